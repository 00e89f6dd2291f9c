/* build.c — the default schedule, trace application and the build path
 * (schedule -> lower -> LLVM -> shared library). See build.h. */
#include "tuner/build.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "codegen/llvm.h"

/* ---- helpers over the traced function ---- */
typedef struct find_ctx {
  const ir_var *var;
  const ir_stmt *found;
  const char *block;
  const ir_stmt *realize;
  ts_vec *names;
} find_ctx;

static bool find_cb(void *ctx, const ir_stmt *s) {
  find_ctx *c = ctx;
  if (s->kind == IR_FOR && c->var && s->u.loop.var == c->var) c->found = s;
  if (s->kind == IR_BLOCK_REALIZE) {
    if (c->block && !strcmp(s->u.realize.block->name, c->block)) c->realize = s;
    if (c->names && strcmp(s->u.realize.block->name, "root")) ts_vec_push(c->names, (void *)s->u.realize.block->name);
  }
  return true;
}

static const ir_stmt *find_loop(sch_traced *t, const ir_var *v) {
  find_ctx c = {.var = v};
  ir_visitor vis = {.stmt = find_cb, .ctx = &c};
  ir_visit_stmt(&vis, sch_traced_func(t)->body);
  return c.found;
}

static const ir_stmt *find_realize(sch_traced *t, const char *name) {
  find_ctx c = {.block = name};
  ir_visitor vis = {.stmt = find_cb, .ctx = &c};
  ir_visit_stmt(&vis, sch_traced_func(t)->body);
  return c.realize;
}

/* Is loop var v used by a reduction iter var's binding of realize r? */
static bool is_reduction_loop(const ir_stmt *r, const ir_var *v) {
  const ir_block *b = r->u.realize.block;
  for (int i = 0; i < b->niter; i++)
    if (b->iters[i].type != IR_ITER_S && ir_expr_uses_var(r->u.realize.iter_values[i], v)) return true;
  return false;
}

static int vector_lanes(const cg_target *tg, const ir_block *b) {
  int bits = tg->vector_bits > 0 ? tg->vector_bits : 128;
  int elem = 32;
  if (b->nwrites > 0) elem = ir_dtype_bits(b->writes[0].buf->dtype);
  if (elem < 8) elem = 8;
  int lanes = bits / elem;
  return lanes >= 2 ? lanes : 0;
}

static void schedule_block(sch_traced *t, const char *name, const cg_target *tg) {
  ts_diag d;
  ts_diag_clear(&d);
  int b;
  if (sch_t_get_block(t, name, &b, &d)) return;
  const int *lp;
  int n;
  if (sch_t_get_loops(t, b, &lp, &n, &d) || n == 0) return;
  int loops[64], nl = n < 64 ? n : 64;
  memcpy(loops, lp, sizeof(int) * (size_t)nl);
  const ir_stmt *r = find_realize(t, name);
  if (!r) return;
  bool red[64];
  int last_s = -1, first_r = -1;
  for (int i = 0; i < nl; i++) {
    red[i] = is_reduction_loop(r, sch_t_loop(t, loops[i]).var);
    if (!red[i]) last_s = i;
    if (red[i] && first_r < 0) first_r = i;
  }
  /* move the innermost spatial loop inside the reduction loops */
  if (first_r >= 0 && last_s >= 0 && last_s < nl - 1) {
    int order[64], k = 0;
    for (int i = 0; i < nl; i++)
      if (i != last_s) order[k++] = loops[i];
    order[k++] = loops[last_s];
    ts_diag_clear(&d);
    if (sch_t_reorder(t, nl, order, &d) == TS_OK) {
      memcpy(loops, order, sizeof(int) * (size_t)nl);
      bool nred[64];
      for (int i = 0, j = 0; i < nl; i++)
        if (i != last_s) nred[j++] = red[i];
      nred[nl - 1] = false;
      memcpy(red, nred, sizeof(bool) * (size_t)nl);
      last_s = nl - 1;
      first_r = -1;
      for (int i = 0; i < nl; i++)
        if (red[i] && first_r < 0) first_r = i;
    }
  }
  /* vectorize the innermost spatial loop */
  int lanes = vector_lanes(tg, r->u.realize.block);
  if (last_s == nl - 1 && lanes) {
    const ir_stmt *l = find_loop(t, sch_t_loop(t, loops[nl - 1]).var);
    int64_t ext;
    /* a width that divides the extent; none: the loop stays scalar (a
     * guarded tail would keep the split loop scalar too, with a test per
     * element) */
    int w = lanes;
    if (l && ir_as_int(l->u.loop.extent, &ext) && ext % lanes)
      for (int v = lanes / 2; v >= 4; v /= 2)
        if (ext % v == 0) {
          w = v;
          break;
        }
    if (l && ir_as_int(l->u.loop.extent, &ext) && ext >= w && ext % w == 0) {
      sch_arg f[2] = {sch_arg_none(), sch_arg_int(w)};
      int out[2];
      ts_diag_clear(&d);
      if (sch_t_split(t, loops[nl - 1], 2, f, out, &d) == TS_OK) {
        ts_diag_clear(&d);
        sch_t_vectorize(t, out[1], &d);
        if (nl - 1 == 0) loops[0] = out[0];
      }
    } else if (l && ir_as_int(l->u.loop.extent, &ext) && ext > 1 && ext <= 64) {
      ts_diag_clear(&d);
      sch_t_vectorize(t, loops[nl - 1], &d);
    }
  }
  /* parallelize the outermost spatial loop */
  if (!red[0]) {
    const ir_stmt *l = find_loop(t, sch_t_loop(t, loops[0]).var);
    int64_t ext;
    if (l && l->u.loop.kind == IR_FOR_SERIAL && ir_as_int(l->u.loop.extent, &ext) && ext > 1) {
      ts_diag_clear(&d);
      sch_t_parallel(t, loops[0], &d);
    }
  }
  /* decompose last: parallel/vectorize refuse once init and update are two blocks */
  if (r->u.realize.block->init && first_r >= 0) {
    int init;
    ts_diag_clear(&d);
    sch_t_decompose_reduction(t, b, loops[first_r], &init, &d);
  }
}

ts_status tun_default_schedule(sch_traced *t, const cg_target *tg, ts_diag *d) {
  if (tg && tg->kind == CG_TARGET_CUDA) return tun_default_schedule_gpu(t, tg, d);
  ts_vec names;
  ts_vec_init(&names);
  find_ctx c = {.names = &names};
  ir_visitor vis = {.stmt = find_cb, .ctx = &c};
  ir_visit_stmt(&vis, sch_traced_func(t)->body);
  /* copy the names: the blocks are rewritten as we go */
  ts_arena a;
  ts_arena_init(&a);
  const char **copy = TS_ANEWN(&a, const char *, names.len + 1);
  if (!copy) {
    ts_vec_fini(&names);
    ts_arena_fini(&a);
    return ts_diag_set(d, TS_ENOMEM, "out of memory");
  }
  size_t n = names.len;
  for (size_t i = 0; i < n; i++) copy[i] = ts_arena_strdup(&a, names.items[i]);
  ts_vec_fini(&names);
  for (size_t i = 0; i < n; i++) schedule_block(t, copy[i], tg);
  ts_arena_fini(&a);
  return TS_OK;
}

ts_status tun_schedule(const ir_func *f, const char *trace_path, const cg_target *tg, sch_traced **out,
                       ts_diag *d) {
  *out = NULL;
  if (!trace_path) {
    sch_traced *t = sch_traced_new(f, 1, d);
    if (!t) return d ? d->code : TS_ENOMEM;
    ts_status st = tun_default_schedule(t, tg, d);
    if (st) {
      sch_traced_free(t);
      return st;
    }
    *out = t;
    return TS_OK;
  }
  char *text = NULL;
  ts_status st = ts_read_file(trace_path, &text, NULL, d);
  if (st) return st;
  ts_diag pd;
  ts_diag_clear(&pd);
  sch_trace *tr = sch_trace_from_json(text, &pd);
  ts_free(text);
  if (!tr) return ts_diag_set(d, pd.code ? pd.code : TS_EPARSE, "%s: %s", trace_path, pd.msg);
  sch_traced *t = sch_trace_replay(tr, f, 1, &pd);
  sch_trace_free(tr);
  if (!t) return ts_diag_set(d, pd.code ? pd.code : TS_ESCHEDULE, "%s: %s", trace_path, pd.msg);
  *out = t;
  return TS_OK;
}

ts_status tun_build_shared(const ir_func *scheduled, const cg_target *tg, const char *path, ts_diag *d) {
  if (tg && tg->kind == CG_TARGET_CUDA) return tun_build_cuda(scheduled, tg, path, d); /* a cubin */
  ts_arena a;
  ts_arena_init(&a);
  cg_lowered l;
  ts_status st = cg_check(scheduled, tg, d);
  if (st == TS_OK) st = cg_lower(&a, scheduled, tg, &l, d);
  if (st == TS_OK) st = cg_llvm_build_shared(&l, tg, path, d);
  ts_arena_fini(&a);
  return st;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

ts_status tun_build_shared_isolated(const ir_func *scheduled, const cg_target *tg, const char *path,
                                    double timeout_s, ts_diag *d) {
  int fds[2];
  if (pipe(fds) != 0) return ts_diag_set(d, TS_EIO, "build: pipe: %s", strerror(errno));
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return ts_diag_set(d, TS_EIO, "build: fork: %s", strerror(errno));
  }
  if (pid == 0) {
    close(fds[0]);
    ts_diag cd;
    ts_diag_clear(&cd);
    ts_status st = tun_build_shared(scheduled, tg, path, &cd);
    int code = (int)st;
    ssize_t w = write(fds[1], &code, sizeof code);
    if (st && w == (ssize_t)sizeof code) w = write(fds[1], cd.msg, strlen(cd.msg) + 1);
    (void)w;
    _exit(st ? 1 : 0);
  }
  close(fds[1]);
  double deadline = now_s() + (timeout_s > 0 ? timeout_s : 60);
  char buf[sizeof(int) + TS_DIAG_MAX];
  size_t got = 0;
  bool timed_out = false;
  for (;;) {
    double left = deadline - now_s();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    struct pollfd pfd = {fds[0], POLLIN, 0};
    int pr = poll(&pfd, 1, (int)(left * 1000) + 1);
    if (pr < 0 && errno == EINTR) continue;
    if (pr <= 0) {
      timed_out = pr == 0;
      break;
    }
    ssize_t r = read(fds[0], buf + got, sizeof buf - 1 - got);
    if (r <= 0) break;
    got += (size_t)r;
  }
  if (timed_out) kill(pid, SIGKILL);
  close(fds[0]);
  int wst = 0;
  while (waitpid(pid, &wst, 0) < 0 && errno == EINTR) {
  }
  if (timed_out)
    return ts_diag_set(d, TS_ETIMEOUT, "build timed out after %.3g s (compiler child killed)", timeout_s);
  if (WIFSIGNALED(wst))
    return ts_diag_set(d, TS_EINTERNAL, "build crashed: signal %d (%s)", WTERMSIG(wst), strsignal(WTERMSIG(wst)));
  int code = -1;
  if (got >= sizeof code) memcpy(&code, buf, sizeof code);
  if (code == 0 && WIFEXITED(wst) && WEXITSTATUS(wst) == 0) return TS_OK;
  buf[got < sizeof buf ? got : sizeof buf - 1] = '\0';
  return ts_diag_set(d, code > 0 && code < TS_STATUS_COUNT ? (ts_status)code : TS_EINTERNAL, "%s",
                     got > sizeof code ? buf + sizeof code : "build failed without a message");
}
