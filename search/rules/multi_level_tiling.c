/* multi_level_tiling.c — MultiLevelTiling for CPU, structure "SSRSRS" (notes
 * §5): each spatial loop of an eligible block is split four ways by
 * SamplePerfectTile, each reduction loop two ways, and the pieces reordered
 * S0 S1 R0 S2 R1 S3 (inside a slot, loops keep their original order). Then
 * the write cache forks three sketches: none; cache_write "global" with the
 * copy-back reverse_compute_at the last loop of slot 1 (level 1); the same
 * at slot 2 (level 2). Eligibility is TVM's NeedsMultiLevelTiling. */
#include <string.h>

#include "search/search_int.h"

#define MAXL 32

static bool region_uses(const ir_region *rg, const ir_var *v) {
  for (int k = 0; k < rg->ndim; k++)
    if (ir_expr_uses_var(rg->ranges[k].min, v) || ir_expr_uses_var(rg->ranges[k].extent, v)) return true;
  return false;
}

/* NeedsMultiLevelTiling; fills the loop var -> iter index map. */
static bool eligible(const ir_func *f, const ir_stmt *r, int nloops, const ir_var **lv, int *iter_of) {
  const ir_block *b = r->u.realize.block;
  if (ir_annot_find(b->nannot, b->annots, SRCH_ANN_TILING)) return false;
  if (b->nwrites != 1 || b->nreads < 1 || !b->init) return false;
  if (nloops != b->niter || nloops > MAXL || nloops == 0) return false;
  bool has_r = false;
  for (int i = 0; i < b->niter; i++) {
    if (b->iters[i].type == IR_ITER_R) has_r = true;
    else if (b->iters[i].type != IR_ITER_S) return false;
  }
  if (!has_r) return false;
  /* trivial binding: one loop per block var */
  for (int l = 0; l < nloops; l++) {
    iter_of[l] = -1;
    const ir_stmt *ls = srch_find_loop(f, lv[l]);
    int64_t ext;
    if (!ls || !ir_as_int(ls->u.loop.extent, &ext)) return false;
    for (int i = 0; i < b->niter; i++) {
      const ir_expr *e = r->u.realize.iter_values[i];
      if (e->kind == IR_VAR && e->u.var == lv[l]) iter_of[l] = i;
    }
    if (iter_of[l] < 0) return false;
    for (int k = 0; k < l; k++)
      if (iter_of[k] == iter_of[l]) return false;
  }
  /* no duplicate read buffer, constant read extents */
  for (int i = 0; i < b->nreads; i++) {
    for (int j = 0; j < i; j++)
      if (b->reads[i].buf == b->reads[j].buf) return false;
    for (int k = 0; k < b->reads[i].ndim; k++) {
      int64_t e;
      if (!ir_as_int(b->reads[i].ranges[k].extent, &e)) return false;
    }
  }
  /* reuse: some non-unit spatial var is unused by some read */
  for (int i = 0; i < b->niter; i++) {
    if (b->iters[i].type != IR_ITER_S) continue;
    int64_t ext;
    if (!ir_as_int(b->iters[i].dom.extent, &ext) || ext <= 1) continue;
    for (int j = 0; j < b->nreads; j++)
      if (b->reads[j].buf != b->writes[0].buf && !region_uses(&b->reads[j], b->iters[i].var)) return true;
  }
  return false;
}

static ts_status push(ts_vec *out, sch_traced *t, ts_diag *d) {
  if (ts_vec_push(out, t)) {
    sch_traced_free(t);
    return ts_diag_set(d, TS_ENOMEM, "out of memory");
  }
  return TS_OK;
}

/* The write-cache fork at level (1 or 2): slot `level` ends at loop index
 * level*ns - 1 of the tiled block. NULL when a step is refused. */
static sch_traced *cache_fork(const srch_rule_ctx *c, sch_traced *t, const char *block, int ns, int level) {
  ts_diag q;
  ts_diag_clear(&q);
  sch_traced *f = srch_fork(c, t, &q);
  if (!f) return NULL;
  int b, cb, nl;
  const int *lp;
  if (sch_t_get_block(f, block, &b, &q) || sch_t_cache_write(f, b, 0, "global", 0, NULL, &cb, &q) ||
      sch_t_get_loops(f, b, &lp, &nl, &q) || nl < level * ns ||
      sch_t_reverse_compute_at(f, cb, lp[level * ns - 1], true, -1, &q)) {
    sch_traced_free(f);
    return NULL;
  }
  return f;
}

ts_status srch_rule_multi_level_tiling(const srch_rule_ctx *c, sch_traced *t, const char *block, ts_vec *out,
                                       ts_diag *d) {
  const ir_func *fn = sch_traced_func(t);
  const ir_stmt *r = srch_find_realize(fn, block);
  ts_diag q;
  ts_diag_clear(&q);
  int b, nl;
  const int *lp;
  sch_loop *cl;
  /* eligibility on the concrete state first, so that an ineligible block
   * leaves nothing in the trace */
  if (!r || sch_get_loops(sch_traced_state(t), (sch_block){.name = r->u.realize.block->name}, &cl, &nl, &q) ||
      nl > MAXL)
    return push(out, t, d);
  int loops[MAXL], iter_of[MAXL];
  const ir_var *lv[MAXL];
  for (int i = 0; i < nl; i++) lv[i] = cl[i].var;
  if (!eligible(fn, r, nl, lv, iter_of)) return push(out, t, d);
  if (sch_t_get_block(t, block, &b, &q) || sch_t_get_loops(t, b, &lp, &nl, &q) || nl > MAXL)
    return push(out, t, d);
  memcpy(loops, lp, sizeof(int) * (size_t)nl);
  const ir_block *blk = r->u.realize.block;
  /* tiles[slot][k]: loop RVs of the slot, original order */
  static const char structure[] = "SSRSRS";
  int ns = 0, nr = 0;
  for (int l = 0; l < nl; l++) (blk->iters[iter_of[l]].type == IR_ITER_S ? ns++ : nr++);
  int slots[6][MAXL], cnt[6] = {0};
  for (int l = 0; l < nl; l++) {
    bool sp = blk->iters[iter_of[l]].type == IR_ITER_S;
    int n = sp ? 4 : 2;
    int v[4], o[4];
    ts_diag_clear(&q);
    if (sch_t_sample_perfect_tile(t, loops[l], n, c->max_innermost, NULL, v, &q)) return push(out, t, d);
    sch_arg f[4];
    for (int k = 0; k < n; k++) f[k] = sch_arg_rv(v[k]);
    if (sch_t_split(t, loops[l], n, f, o, &q)) return push(out, t, d);
    /* the k-th piece of a spatial loop goes to the k-th 'S' slot */
    int k = 0;
    for (int s = 0; s < 6; s++)
      if (structure[s] == (sp ? 'S' : 'R')) slots[s][cnt[s]++] = o[k++];
  }
  int order[4 * MAXL], no = 0;
  for (int s = 0; s < 6; s++)
    for (int k = 0; k < cnt[s]; k++) order[no++] = slots[s][k];
  ts_diag_clear(&q);
  if (sch_t_reorder(t, no, order, &q)) return push(out, t, d);
  ts_diag_clear(&q);
  sch_t_annotate(t, b, SRCH_ANN_TILING, sch_arg_str("SSRSRS"), &q);
  (void)nr;
  /* write cache: none, level 1, level 2 */
  sch_traced *f1 = cache_fork(c, t, block, ns, 1);
  sch_traced *f2 = cache_fork(c, t, block, ns, 2);
  ts_status st = push(out, t, d);
  if (f1 && !st) st = push(out, f1, d);
  else if (f1) sch_traced_free(f1);
  if (f2 && !st) st = push(out, f2, d);
  else if (f2) sch_traced_free(f2);
  return st;
}
