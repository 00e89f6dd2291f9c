/* gpu_cross_thread_reduction.c — CrossThreadReduction for CUDA (TVM's
 * cross_thread_reduction.cc): a reduction that MultiLevelTiling did not take
 * (softmax, layernorm, reduce_sum, pooling, matrix-vector) gets a second
 * sketch whose fused reduction loop is split by a sampled power of two and
 * bound to threadIdx.x, the form the CUDA emitter turns into per-thread
 * partials and a warp-shuffle all-reduce. Eligibility: a trivially bound
 * reduction block with constant extents, untiled, reduction extent > 1.
 * docs/GPU_SEARCH.md ("Design space"). */
#include <string.h>

#include "search/rules/gpu_rules.h"

#define MAXL 32

static bool eligible(sch_traced *t, const char *block, int64_t *rprod) {
  const ir_func *f = sch_traced_func(t);
  const ir_stmt *r = srch_find_realize(f, block);
  if (!r) return false;
  const ir_block *b = r->u.realize.block;
  if (!b->init || b->nwrites != 1 || ir_annot_find(b->nannot, b->annots, SRCH_ANN_TILING)) return false;
  if (srch_gpu_block_bound(t, block)) return false;
  ts_diag q;
  ts_diag_clear(&q);
  sch_loop *loops;
  int nl;
  if (sch_get_loops(sch_traced_state(t), (sch_block){.name = block}, &loops, &nl, &q) || nl != b->niter ||
      nl > MAXL)
    return false;
  *rprod = 1;
  bool has_r = false;
  for (int l = 0; l < nl; l++) {
    const ir_stmt *ls = srch_find_loop(f, loops[l].var);
    int64_t e;
    if (!ls || ls->u.loop.kind != IR_FOR_SERIAL || ls->u.loop.nannot || !ir_as_int(ls->u.loop.extent, &e))
      return false;
    int it = -1;
    for (int i = 0; i < b->niter; i++) {
      const ir_expr *v = r->u.realize.iter_values[i];
      if (v->kind == IR_VAR && v->u.var == loops[l].var) it = i;
    }
    if (it < 0) return false;
    if (b->iters[it].type == IR_ITER_R) {
      has_r = true;
      *rprod *= e;
    } else if (b->iters[it].type != IR_ITER_S) {
      return false;
    }
  }
  return has_r && *rprod > 1;
}

static bool apply(sch_traced *t, const char *block, int64_t rprod) {
  ts_diag q;
  ts_diag_clear(&q);
  int b, nl;
  const int *lp;
  if (sch_t_get_block(t, block, &b, &q) || sch_t_get_loops(t, b, &lp, &nl, &q) || nl > MAXL) return false;
  int sp[MAXL], rd[MAXL], ns = 0, nr = 0;
  for (int l = 0; l < nl; l++) {
    const ir_stmt *ls = srch_find_loop(sch_traced_func(t), sch_t_loop(t, lp[l]).var);
    if (srch_loop_is_reduction(ls, ls->u.loop.var)) rd[nr++] = lp[l];
    else sp[ns++] = lp[l];
  }
  int order[MAXL];
  memcpy(order, sp, sizeof(int) * (size_t)ns);
  memcpy(order + ns, rd, sizeof(int) * (size_t)nr);
  bool moved = false;
  for (int l = 0; l < nl; l++) moved |= order[l] != lp[l];
  if (moved && sch_t_reorder(t, nl, order, &q)) return false;
  int red = rd[0];
  if (nr > 1 && sch_t_fuse(t, nr, rd, &red, &q)) return false;
  int64_t cand[8];
  double probs[8];
  int nc = 0;
  for (int64_t v = 4; v <= 512 && v <= SRCH_GPU_MAX_THREADS; v *= 2) {
    cand[nc++] = v;
    if (v >= rprod) break;
  }
  for (int i = 0; i < nc; i++) probs[i] = 1.0 / nc;
  int tv, parts[2];
  if (sch_t_sample_categorical(t, nc, cand, probs, NULL, &tv, &q)) return false;
  sch_arg f[2] = {sch_arg_none(), sch_arg_rv(tv)};
  /* [ro, ri] -> ri outer: thread ri sums j = ro * t + ri serially (strided,
   * so a warp reads consecutive elements), then the threads combine */
  int swap[2];
  if (sch_t_split(t, red, 2, f, parts, &q)) return false;
  swap[0] = parts[1];
  swap[1] = parts[0];
  if (sch_t_reorder(t, 2, swap, &q) || sch_t_bind(t, parts[1], "threadIdx.x", &q)) return false;
  if (ns > 0) {
    int fused = sp[0];
    if (ns > 1 && sch_t_fuse(t, ns, sp, &fused, &q)) return false;
    if (sch_t_bind(t, fused, "blockIdx.x", &q)) return false;
  }
  return true;
}

ts_status srch_rule_gpu_cross_thread_reduction(const srch_rule_ctx *c, sch_traced *t, const char *block,
                                               ts_vec *out, ts_diag *d) {
  int64_t rprod;
  sch_traced *f = NULL;
  if (eligible(t, block, &rprod)) {
    ts_diag q;
    ts_diag_clear(&q);
    f = srch_fork(c, t, &q);
    if (f && !apply(f, block, rprod)) {
      sch_traced_free(f);
      f = NULL;
    }
  }
  /* [new, original], as TVM yields them */
  if (f && ts_vec_push(out, f)) {
    sch_traced_free(f);
    sch_traced_free(t);
    return ts_diag_set(d, TS_ENOMEM, "out of memory");
  }
  return srch_push(out, t, d);
}
