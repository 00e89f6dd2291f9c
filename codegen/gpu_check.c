/* gpu_check.c — the CUDA validity checks (see gpu_check.h): lower for cuda,
 * then walk the lowered form kernel by kernel, collecting thread extents,
 * shared/local allocation bytes and vector widths, and refuse with the first
 * limit exceeded. Mirrors MetaSchedule's VerifyGPUCode postprocessor (TVM
 * src/tir/analysis/verify_gpu_code.cc) on tessel's lowered form. */
#include "codegen/gpu_check.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ir/struct.h"

void cg_gpu_limits_default(cg_gpu_limits *l) {
  memset(l, 0, sizeof *l);
  l->max_threads_per_block = 1024;
  l->max_shared_bytes = 48 * 1024;
  l->max_vector_bytes = 16;
  l->max_vthread = 8;
  l->max_regs_per_thread = 255;
  l->max_regs_per_block = 65536;
  l->max_spill_bytes = CG_GPU_MAX_SPILL_BYTES;
  l->global_deps = true;
}

void cg_gpu_limits_for_target(const cg_target *t, cg_gpu_limits *l) {
  cg_gpu_limits_default(l);
  int cc = 0;
  if (t && sscanf(t->arch, "sm_%d", &cc) == 1 && (cc == 53 || cc == 62))
    l->max_regs_per_block = 32768; /* Jetson TX1 / TX2 (CUDA programming guide, compute capabilities) */
}

/* The thread tags a kernel may bind, in a fixed order. */
enum { T_BX, T_BY, T_BZ, T_TX, T_TY, T_TZ, T_VT, T_VX, T_VY, T_VZ, T_COUNT };
static const char *const tag_names[T_COUNT] = {"blockIdx.x", "blockIdx.y",  "blockIdx.z", "threadIdx.x",
                                               "threadIdx.y", "threadIdx.z", "vthread",    "vthread.x",
                                               "vthread.y",  "vthread.z"};

static int tag_index(const char *t) {
  for (int i = 0; t && i < T_COUNT; i++)
    if (!strcmp(t, tag_names[i])) return i;
  return -1;
}

typedef struct walk {
  const cg_gpu_limits *lim;
  ts_diag *d;
  ts_status st;
  cg_gpu_usage *u;
  /* in a kernel; the number of thread-bound loops around the current point */
  int in_kernel, bound;
  const char *kernel_root;
  int64_t ext[T_COUNT]; /* 0: unbound; -1: symbolic */
  const char *ext_loop[T_COUNT];
  int64_t shared_outside; /* shared bytes allocated at the top level around the current kernel */
  ts_vec stores, loads;   /* global-memory accesses of the kernel: (buffer, index) pairs */
  int64_t shared, local;  /* in the current kernel */
} walk;

static void fail(walk *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(walk *w, const char *fmt, ...) {
  if (w->st) return;
  char msg[TS_DIAG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  w->st = ts_diag_set(w->d, TS_EUNSUPPORTED, "gpu check: %s", msg);
}

static int64_t buffer_bytes(const ir_buffer *b, bool *ok) {
  int64_t n = 1;
  *ok = true;
  for (int i = 0; i < b->ndim; i++) {
    int64_t e;
    if (!ir_as_int(b->shape[i], &e)) {
      *ok = false;
      return 0;
    }
    n *= e;
  }
  return n * ir_dtype_bytes(b->dtype);
}

static bool is_scope(const ir_buffer *b, const char *s) {
  size_t n = strlen(s);
  return b->scope && !strncmp(b->scope, s, n) && (b->scope[n] == '\0' || b->scope[n] == '.');
}

/* ---- vector widths ---- */
typedef struct vec_ctx {
  walk *w;
} vec_ctx;

static void check_access(walk *w, const ir_buffer *buf, ir_dtype dt, const char *what) {
  if (w->st || dt.lanes <= 1) return;
  int64_t bytes = (int64_t)dt.lanes * ir_dtype_bytes(dt);
  if (bytes > w->u->max_vector_bytes) w->u->max_vector_bytes = (int)bytes;
  if (bytes > w->lim->max_vector_bytes)
    fail(w, "a vector %s %s (%d x %d bytes) is %lld bytes wide; cuda moves at most %d bytes per access "
            "(float4, 8 x half)",
         what, buf ? buf->name : "?", dt.lanes, ir_dtype_bytes(dt), (long long)bytes, w->lim->max_vector_bytes);
}

static bool is_global(const ir_buffer *b) { return !b->scope || is_scope(b, "global"); }

static void record(walk *w, ts_vec *v, const ir_buffer *b, const ir_expr *idx) {
  if (w->st || !b || !idx || !is_global(b)) return;
  if (ts_vec_push(v, (void *)b) || ts_vec_push(v, (void *)idx)) w->st = ts_diag_set(w->d, TS_ENOMEM, "out of memory");
}

static bool vec_expr(void *ctx, const ir_expr *e) {
  vec_ctx *c = ctx;
  if (e->kind == IR_LOAD) {
    check_access(c->w, e->u.load.buf, e->dtype, "load of");
    if (e->u.load.nidx == 1) record(c->w, &c->w->loads, e->u.load.buf, e->u.load.idx[0]);
  }
  return !c->w->st;
}


/* A global buffer the kernel stores to and loads at another index: the
 * element read may be written by another thread or block of the same launch,
 * which nothing orders (no grid-wide barrier). Reading back exactly what the
 * same store index wrote (a reduction's B[i] = B[i] + e) is per thread. */
static void check_global_deps(walk *w) {
  for (size_t i = 0; i + 1 < w->loads.len && !w->st; i += 2) {
    const ir_buffer *b = w->loads.items[i];
    const ir_expr *li = w->loads.items[i + 1];
    bool stored = false, same = false;
    for (size_t k = 0; k + 1 < w->stores.len && !same; k += 2) {
      if (w->stores.items[k] != b) continue;
      stored = true;
      same = ir_expr_equal(li, w->stores.items[k + 1]);
    }
    if (stored && !same)
      fail(w, "the kernel at loop %s stores to global buffer %s and loads it at another index; another thread "
              "or block of the same launch may write that element (no grid-wide barrier): split the stages "
              "into separate loop nests",
           w->kernel_root, b->name);
  }
}

static void check_exprs_of(walk *w, const ir_stmt *s) {
  vec_ctx c = {w};
  ir_visitor v = {.expr = vec_expr, .ctx = &c};
  switch (s->kind) {
  case IR_STORE:
    check_access(w, s->u.store.buf, s->u.store.value->dtype, "store to");
    if (s->u.store.nidx == 1) record(w, &w->stores, s->u.store.buf, s->u.store.idx[0]);
    ir_visit_expr(&v, s->u.store.value);
    for (int i = 0; i < s->u.store.nidx; i++) ir_visit_expr(&v, s->u.store.idx[i]);
    break;
  case IR_IF: ir_visit_expr(&v, s->u.ifs.cond); break;
  case IR_LET: ir_visit_expr(&v, s->u.let.value); break;
  case IR_EVALUATE: ir_visit_expr(&v, s->u.eval.value); break;
  default: break;
  }
}

/* The widest element stored under s (bytes). */
typedef struct widest_ctx {
  int bytes;
} widest_ctx;
static bool widest_cb(void *ctx, const ir_stmt *s) {
  widest_ctx *c = ctx;
  if (s->kind == IR_STORE && s->u.store.buf) {
    int b = ir_dtype_bytes(s->u.store.buf->dtype);
    if (b > c->bytes) c->bytes = b;
  }
  return true;
}

/* ---- the walk ---- */
static void walk_stmt(walk *w, const ir_stmt *s);

static void end_kernel(walk *w) {
  cg_gpu_usage *u = w->u;
  u->nkernels++;
  int64_t threads = 1, blocks = 1, vt = 1;
  for (int i = T_TX; i <= T_TZ; i++)
    if (w->ext[i] > 0) threads *= w->ext[i];
  for (int i = T_BX; i <= T_BZ; i++) {
    if (w->ext[i] < 0) blocks = -1;
    else if (w->ext[i] > 0 && blocks > 0) blocks *= w->ext[i];
  }
  for (int i = T_VT; i <= T_VZ; i++)
    if (w->ext[i] > 0) vt *= w->ext[i];
  int64_t shared = w->shared_outside + w->shared, local = w->local;
  if (threads > u->threads_per_block) u->threads_per_block = threads;
  if (blocks < 0 || u->blocks < 0) u->blocks = -1;
  else if (blocks > u->blocks) u->blocks = blocks;
  if (vt > u->vthreads) u->vthreads = vt;
  if (shared > u->shared_bytes) u->shared_bytes = shared;
  if (local > u->local_bytes) u->local_bytes = local;
  const cg_gpu_limits *l = w->lim;
  if (threads > l->max_threads_per_block)
    fail(w, "the kernel at loop %s runs %lld threads per block (threadIdx extents multiplied), over the limit "
            "of %d",
         w->kernel_root, (long long)threads, l->max_threads_per_block);
  else if (vt > l->max_vthread)
    fail(w, "the kernel at loop %s has %lld virtual threads, over the limit of %d", w->kernel_root, (long long)vt,
         l->max_vthread);
  else if (shared > l->max_shared_bytes)
    fail(w, "the kernel at loop %s uses %lld bytes of shared memory per block, over the limit of %lld",
         w->kernel_root, (long long)shared, (long long)l->max_shared_bytes);
  else if (l->max_local_bytes > 0 && local > l->max_local_bytes)
    fail(w, "the kernel at loop %s uses %lld bytes of local memory per thread, over the limit of %lld",
         w->kernel_root, (long long)local, (long long)l->max_local_bytes);
  else if (l->regs_per_thread > 0 && l->regs_per_thread > l->max_regs_per_thread)
    fail(w, "the kernel at loop %s needs %d registers per thread, over the limit of %d", w->kernel_root,
         l->regs_per_thread, l->max_regs_per_thread);
  else if (l->regs_per_thread > 0 && (int64_t)l->regs_per_thread * threads > l->max_regs_per_block)
    fail(w, "the kernel at loop %s needs %lld registers per block (%d per thread x %lld threads), over the "
            "limit of %lld",
         w->kernel_root, (long long)((int64_t)l->regs_per_thread * threads), l->regs_per_thread,
         (long long)threads, (long long)l->max_regs_per_block);
}

static void walk_loop(walk *w, const ir_stmt *s) {
  const char *name = s->u.loop.var->name;
  int64_t ext = -1;
  bool cext = ir_as_int(s->u.loop.extent, &ext);
  switch (s->u.loop.kind) {
  case IR_FOR_PARALLEL:
    fail(w, "loop %s is parallel, which cuda cannot run (bind it to blockIdx/threadIdx)", name);
    return;
  case IR_FOR_VECTORIZED: {
    /* left as a loop by lowering: its lanes still become one access */
    widest_ctx c = {0};
    ir_visitor v = {.stmt = widest_cb, .ctx = &c};
    ir_visit_stmt(&v, s->u.loop.body);
    if (cext && c.bytes > 0 && ext * c.bytes > w->lim->max_vector_bytes)
      fail(w, "vectorized loop %s covers %lld x %d bytes = %lld bytes per access, over cuda's %d", name,
           (long long)ext, c.bytes, (long long)(ext * c.bytes), w->lim->max_vector_bytes);
    break;
  }
  case IR_FOR_THREAD_BINDING: {
    int ti = tag_index(s->u.loop.thread);
    if (ti < 0) {
      fail(w, "loop %s is bound to unknown thread tag '%s'", name, s->u.loop.thread ? s->u.loop.thread : "(none)");
      return;
    }
    if (!cext && ti >= T_TX) {
      fail(w, "loop %s is bound to %s with a non-constant extent (block dimensions must be constants)", name,
           tag_names[ti]);
      return;
    }
    int64_t e = cext ? ext : -1;
    if (w->ext[ti] != 0 && w->ext[ti] != e) {
      fail(w, "loop %s binds %s with extent %lld, but loop %s of the same kernel (at loop %s) binds it with "
              "extent %lld (one extent per tag and kernel; -1 = symbolic)",
           name, tag_names[ti], (long long)e, w->ext_loop[ti], w->kernel_root, (long long)w->ext[ti]);
      return;
    }
    w->ext[ti] = e;
    w->ext_loop[ti] = name;
    w->bound++;
    walk_stmt(w, s->u.loop.body);
    w->bound--;
    return;
  }
  default:
    break;
  }
  walk_stmt(w, s->u.loop.body);
}

/* Loops walk their own bodies (thread bindings are scoped); the visitor
 * walks the rest. */
static bool walk_cb(void *ctx, const ir_stmt *s) {
  walk *w = ctx;
  if (w->st) return false;
  switch (s->kind) {
  case IR_FOR:
    walk_loop(w, s);
    return false;
  case IR_IF:
  case IR_LET:
    check_exprs_of(w, s);
    return true;
  case IR_ALLOCATE: {
    const ir_buffer *b = s->u.alloc.buf;
    bool shared = is_scope(b, "shared"), local = is_scope(b, "local");
    int64_t bytes = 0;
    if (shared || local) {
      bool ok;
      bytes = buffer_bytes(b, &ok);
      if (!ok) {
        fail(w, "%s buffer %s has a non-constant size after compaction", shared ? "shared" : "local", b->name);
        return false;
      }
    }
    /* TVM sums every allocation of a kernel (no reuse between them) */
    if (shared) w->shared += bytes;
    if (local) w->local += bytes;
    return true;
  }
  case IR_STORE:
    if (!w->bound && !w->lim->allow_unbound) {
      fail(w, "the store to %s is outside every blockIdx/threadIdx loop (it would run on a single GPU "
              "thread; bind the loops of the block writing %s)",
           s->u.store.buf ? s->u.store.buf->name : "?", s->u.store.buf ? s->u.store.buf->name : "?");
      return false;
    }
    check_exprs_of(w, s);
    return false;
  case IR_EVALUATE:
    check_exprs_of(w, s);
    return false;
  default: /* sequences; blocks (not in the lowered form; be safe) */
    return true;
  }
}

static void walk_stmt(walk *w, const ir_stmt *s) {
  ir_visitor v = {.stmt = walk_cb, .ctx = w};
  ir_visit_stmt(&v, s);
}

static int count_kernels(const ir_stmt *s) {
  if (!s) return 0;
  if (s->kind == IR_SEQ) {
    int n = 0;
    for (int i = 0; i < s->u.seq.n; i++) n += count_kernels(s->u.seq.stmts[i]);
    return n;
  }
  if (s->kind == IR_ALLOCATE) return count_kernels(s->u.alloc.body);
  return 1;
}

/* The top level of the lowered body: sequences and allocations; anything
 * else is one kernel (one launch), as the CUDA emitter splits it. */
static void walk_top(walk *w, const ir_stmt *s) {
  if (!s || w->st) return;
  if (s->kind == IR_SEQ) {
    for (int i = 0; i < s->u.seq.n; i++) walk_top(w, s->u.seq.stmts[i]);
    return;
  }
  if (s->kind == IR_ALLOCATE) {
    const ir_buffer *b = s->u.alloc.buf;
    bool shared = is_scope(b, "shared");
    int64_t bytes = 0;
    if (shared) {
      bool ok;
      bytes = buffer_bytes(b, &ok);
      if (!ok) {
        fail(w, "shared buffer %s has a non-constant size after compaction", b->name);
        return;
      }
    }
    if (shared) {
      /* shared memory lives for one launch: a buffer spanning two kernels
       * would be read in a launch that never wrote it */
      int nk = count_kernels(s->u.alloc.body);
      if (nk > 1) {
        fail(w, "shared buffer %s is used by %d kernels (top-level loop nests), but shared memory lives for "
                "one launch (compute the copy under its consumer's blockIdx loop)",
             b->name, nk);
        return;
      }
    }
    w->shared_outside += bytes;
    walk_top(w, s->u.alloc.body);
    w->shared_outside -= bytes;
    return;
  }
  memset(w->ext, 0, sizeof w->ext);
  memset(w->ext_loop, 0, sizeof w->ext_loop);
  w->kernel_root = s->kind == IR_FOR ? s->u.loop.var->name : "(top level)";
  w->shared = w->local = 0;
  w->in_kernel = 1;
  w->stores.len = w->loads.len = 0;
  walk_stmt(w, s);
  w->in_kernel = 0;
  if (!w->st && w->lim->global_deps) check_global_deps(w);
  if (!w->st) end_kernel(w);
}

ts_status cg_gpu_check_usage(const ir_func *scheduled, const cg_gpu_limits *lim, cg_gpu_usage *usage,
                             ts_diag *d) {
  cg_gpu_usage local_usage;
  if (!usage) usage = &local_usage;
  memset(usage, 0, sizeof *usage);
  if (!scheduled) return ts_diag_set(d, TS_EINVAL, "gpu check: missing function");
  cg_gpu_limits def;
  if (!lim) {
    cg_gpu_limits_default(&def);
    lim = &def;
  }
  cg_target t;
  ts_status pst = cg_target_parse("cuda -arch=sm_90", &t, d);
  if (pst) return pst;
  ts_arena a;
  ts_arena_init(&a);
  cg_lowered l;
  ts_status st = cg_lower(&a, scheduled, &t, &l, d);
  if (st) {
    ts_arena_fini(&a);
    return st;
  }
  walk w;
  memset(&w, 0, sizeof w);
  w.lim = lim;
  w.d = d;
  w.u = usage;
  ts_vec_init(&w.stores);
  ts_vec_init(&w.loads);
  walk_top(&w, l.func->body);
  ts_vec_fini(&w.stores);
  ts_vec_fini(&w.loads);
  ts_arena_fini(&a);
  return w.st;
}
