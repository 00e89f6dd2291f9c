/* gpu_auto_bind.c — AutoBind for CUDA (TVM's auto_bind.cc), and the binding
 * helpers the GPU rules and postprocessors share (gpu_rules.h). A block under
 * no thread binding gets its leading spatial loops fused, split [None, t] and
 * bound to blockIdx.x / threadIdx.x, t sampled from {32, ..., 1024} below
 * twice the extent; the thread-binding mutator resamples t.
 * docs/GPU_SEARCH.md ("Design space"). */
#include <string.h>

#include "search/rules/gpu_rules.h"

#define MAXL 64

static const ir_stmt *loop_stmt(sch_traced *t, int rv) {
  return srch_find_loop(sch_traced_func(t), sch_t_loop(t, rv).var);
}

bool srch_gpu_block_bound(sch_traced *t, const char *name) {
  ts_diag q;
  ts_diag_clear(&q);
  sch_loop *loops;
  int nl;
  if (sch_get_loops(sch_traced_state(t), (sch_block){.name = name}, &loops, &nl, &q)) return false;
  for (int i = 0; i < nl; i++) {
    const ir_stmt *l = srch_find_loop(sch_traced_func(t), loops[i].var);
    if (l && l->u.loop.kind == IR_FOR_THREAD_BINDING) return true;
  }
  return false;
}

int64_t srch_gpu_thread_extent(sch_traced *t, const char *name, const char *tag) {
  ts_diag q;
  ts_diag_clear(&q);
  sch_loop *loops;
  int nl;
  if (sch_get_loops(sch_traced_state(t), (sch_block){.name = name}, &loops, &nl, &q)) return 0;
  for (int i = 0; i < nl; i++) {
    const ir_stmt *l = srch_find_loop(sch_traced_func(t), loops[i].var);
    if (l && l->u.loop.kind == IR_FOR_THREAD_BINDING && l->u.loop.thread && !strcmp(l->u.loop.thread, tag)) {
      int64_t e;
      return ir_as_int(l->u.loop.extent, &e) ? e : -1;
    }
  }
  return 0;
}

int srch_gpu_leading_spatial(sch_traced *t, const char *name, int *out, int cap, int64_t *ext) {
  ts_diag q;
  ts_diag_clear(&q);
  int b, nl;
  const int *lp;
  *ext = 1;
  if (sch_t_get_block(t, name, &b, &q) || sch_t_get_loops(t, b, &lp, &nl, &q)) return 0;
  int n = 0;
  for (int i = 0; i < nl && n < cap; i++) {
    const ir_stmt *l = loop_stmt(t, lp[i]);
    if (!l || l->u.loop.kind != IR_FOR_SERIAL || l->u.loop.nannot > 0 ||
        srch_loop_is_reduction(l, l->u.loop.var))
      break;
    int64_t e;
    if (!ir_as_int(l->u.loop.extent, &e)) *ext = -1;
    else if (*ext > 0) *ext *= e;
    out[n++] = lp[i];
    if (l->u.loop.body->kind != IR_FOR) break; /* several children: stop after it */
  }
  return n;
}

bool srch_gpu_bind_block(sch_traced *t, const char *name, bool bind_threads, int64_t threads, int threads_rv,
                         int64_t max_blocks) {
  ts_diag q;
  ts_diag_clear(&q);
  int loops[MAXL];
  int64_t ext;
  int n = srch_gpu_leading_spatial(t, name, loops, MAXL, &ext);
  int b, fused;
  if (n == 0) {
    if (sch_t_get_block(t, name, &b, &q) || sch_t_add_unit_loop(t, b, &fused, &q)) return false;
    return sch_t_bind(t, fused, "blockIdx.x", &q) == TS_OK;
  }
  fused = loops[0];
  if (n > 1 && sch_t_fuse(t, n, loops, &fused, &q)) return false;
  if (!bind_threads) return sch_t_bind(t, fused, "blockIdx.x", &q) == TS_OK;
  if (threads_rv < 0 && ext > 0 && max_blocks > 0 && ext > max_blocks * threads) {
    sch_arg f[3] = {sch_arg_none(), sch_arg_int(max_blocks), sch_arg_int(threads)};
    int p[3];
    if (sch_t_split(t, fused, 3, f, p, &q)) return false;
    int order[3] = {p[1], p[2], p[0]};
    if (sch_t_reorder(t, 3, order, &q)) return false;
    return sch_t_bind(t, p[1], "blockIdx.x", &q) == TS_OK && sch_t_bind(t, p[2], "threadIdx.x", &q) == TS_OK;
  }
  if (threads_rv < 0 && ext > 0 && ext < threads) threads = ext;
  sch_arg f[2] = {sch_arg_none(), threads_rv >= 0 ? sch_arg_rv(threads_rv) : sch_arg_int(threads)};
  int p[2];
  if (sch_t_split(t, fused, 2, f, p, &q)) return false;
  return sch_t_bind(t, p[0], "blockIdx.x", &q) == TS_OK && sch_t_bind(t, p[1], "threadIdx.x", &q) == TS_OK;
}

ts_status srch_rule_gpu_auto_bind(const srch_rule_ctx *c, sch_traced *t, const char *block, ts_vec *out,
                                  ts_diag *d) {
  if (srch_find_realize(sch_traced_func(t), block) && !srch_gpu_block_bound(t, block)) {
    int loops[MAXL];
    int64_t ext;
    int n = srch_gpu_leading_spatial(t, block, loops, MAXL, &ext);
    if (n > 0 && ext > (int64_t)SRCH_GPU_MAX_BLOCKS * SRCH_GPU_MAX_THREADS) {
      /* work on a fork: a refused step must not leave half a binding */
      ts_diag q;
      ts_diag_clear(&q);
      sch_traced *f = srch_fork(c, t, &q);
      if (f && srch_gpu_bind_block(f, block, true, SRCH_GPU_MAX_THREADS, -1, SRCH_GPU_MAX_BLOCKS)) {
        sch_traced_free(t);
        t = f;
      } else if (f) {
        sch_traced_free(f);
      }
    } else if (n > 0) {
      static const int64_t all[6] = {32, 64, 128, 256, 512, 1024};
      int64_t cand[6];
      double probs[6];
      int nc = 0;
      for (int i = 0; i < 6; i++)
        if (all[i] <= SRCH_GPU_MAX_THREADS && (nc == 0 || ext < 0 || all[i] < 2 * ext)) cand[nc++] = all[i];
      for (int i = 0; i < nc; i++) probs[i] = 1.0 / nc;
      ts_diag q;
      ts_diag_clear(&q);
      sch_traced *f = srch_fork(c, t, &q);
      int v;
      if (f && sch_t_sample_categorical(f, nc, cand, probs, NULL, &v, &q) == TS_OK &&
          srch_gpu_bind_block(f, block, true, 0, v, 0)) {
        sch_traced_free(t);
        t = f;
      } else if (f) {
        sch_traced_free(f);
      }
    }
  }
  return srch_push(out, t, d);
}
