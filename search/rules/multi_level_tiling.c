/* multi_level_tiling.c — MultiLevelTiling for CPU, structure "SSRSRS"
 * (MetaSchedule's multi_level_tiling.cc): spatial loops split four ways,
 * reduction loops two, reordered S0 S1 R0 S2 R1 S3, and three write-cache
 * sketches; beyond MetaSchedule, a padded variant for extents that tile badly
 * (a ceil split whose overhang lowering turns into masked loads), and a
 * vector-block variant for a block whose innermost spatial axis is a channel
 * block (NCHW[x]c convolutions, depthwise, GEMV): that axis, contiguous in
 * every buffer that uses it, stays whole and innermost under the register
 * tile, so it is what gets vectorised whatever the other loops' strides
 * (where it applies, it replaces the plain variant, and adds a
 * register-resident sketch, "SSRRS", whose accumulators live across the
 * whole reduction).
 * docs/SEARCH.md ("CPU rules"). */
#include <string.h>

#include "search/search_int.h"

#define MAXL 32

static bool region_uses(const ir_region *rg, const ir_var *v) {
  for (int k = 0; k < rg->ndim; k++)
    if (ir_expr_uses_var(rg->ranges[k].min, v) || ir_expr_uses_var(rg->ranges[k].extent, v)) return true;
  return false;
}

bool srch_block_has_reuse(const ir_block *b) {
  for (int i = 0; i < b->niter; i++) {
    int64_t ext;
    if (b->iters[i].type != IR_ITER_S || !ir_as_int(b->iters[i].dom.extent, &ext) || ext <= 1) continue;
    for (int j = 0; j < b->nreads; j++)
      if (b->reads[j].buf != b->writes[0].buf && !region_uses(&b->reads[j], b->iters[i].var)) return true;
  }
  return false;
}

/* NeedsMultiLevelTiling (shared with the GPU tiling rule); fills the loop
 * var -> iter index map. serial_only: every loop must still be serial. */
bool srch_needs_multi_level_tiling(const ir_func *f, const ir_stmt *r, int nloops, const ir_var **lv,
                                   int *iter_of, bool serial_only) {
  const ir_block *b = r->u.realize.block;
  if (ir_annot_find(b->nannot, b->annots, SRCH_ANN_TILING)) return false;
  if (!srch_block_is_tileable_reduction(b)) return false;
  if (nloops != b->niter || nloops > MAXL || nloops == 0) return false;
  /* trivial binding: one loop per block var */
  for (int l = 0; l < nloops; l++) {
    const ir_stmt *ls = srch_find_loop(f, lv[l]);
    int64_t ext;
    if (!ls || !ir_as_int(ls->u.loop.extent, &ext)) return false;
    if (serial_only && ls->u.loop.kind != IR_FOR_SERIAL) return false;
    if (!srch_bind_loop_iter(r, lv[l], iter_of, l)) return false;
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
  return srch_block_has_reuse(b);
}

const ir_stmt *srch_block_needs_tiling(sch_traced *t, const char *block, bool serial_only, int *iter_of,
                                       int *nl) {
  sch_loop *cl;
  const ir_stmt *r = srch_block_loops(t, block, &cl, nl);
  if (!r || *nl > MAXL) return NULL;
  const ir_var *lv[MAXL];
  for (int i = 0; i < *nl; i++) lv[i] = cl[i].var;
  return srch_needs_multi_level_tiling(sch_traced_func(t), r, *nl, lv, iter_of, serial_only) ? r : NULL;
}

ts_status srch_sample_split(sch_traced *t, int loop, int n, int64_t maxin, int *o, ts_diag *q) {
  int v[5];
  ts_status st = sch_t_sample_perfect_tile(t, loop, n, maxin, NULL, v, q);
  if (st) return st;
  sch_arg f[5];
  for (int k = 0; k < n; k++) f[k] = sch_arg_rv(v[k]);
  return sch_t_split(t, loop, n, f, o, q);
}

/* The write-cache fork at level (1 or 2): slot `level` ends at loop index
 * level*ns - 1 of the tiled block. NULL when a step is refused. */
static sch_traced *cache_fork(const srch_rule_ctx *c, sch_traced *t, const char *block, int ns, int level) {
  ts_diag q;
  ts_diag_clear(&q);
  int b, cb, nl;
  const int *lp;
  sch_traced *f = srch_fork_block(c, t, block, &b, &q);
  if (f && (sch_t_cache_write(f, b, 0, "global", 0, NULL, &cb, &q) || sch_t_get_loops(f, b, &lp, &nl, &q) ||
            nl < level * ns || sch_t_reverse_compute_at(f, cb, lp[level * ns - 1], true, -1, &q))) {
    sch_traced_free(f);
    return NULL;
  }
  return f;
}

/* Pre-split factor of loop l for the padded variant (0: none). Extents with
 * poor divisors (1000 x 333 x 777, primes) tile badly with perfect tiles
 * only: the innermost spatial loop, when not a multiple of the vector lanes,
 * is split by the lanes (ceil: the last tile overhangs, guarded by a
 * predicate that lowering turns into masked loads); any other spatial loop
 * with no divisor in [4, 64] is split by 8. */
static int64_t presplit_factor(const srch_rule_ctx *c, const ir_block *blk, int iter, bool innermost_s) {
  int64_t ext;
  if (blk->iters[iter].type != IR_ITER_S || !ir_as_int(blk->iters[iter].dom.extent, &ext)) return 0;
  int bits = ir_dtype_bits(blk->writes[0].buf->dtype);
  int vbits = c->target && c->target->vector_bits ? c->target->vector_bits : 128;
  int64_t lanes = bits > 0 && bits <= vbits ? vbits / bits : 1;
  if (innermost_s) return lanes > 1 && ext > lanes && ext % lanes != 0 ? lanes : 0;
  if (ext <= 8) return 0;
  for (int64_t f = 4; f <= 64 && f < ext; f++)
    if (ext % f == 0) return 0;
  return 8;
}

/* Does iter var v appear in no index but the last of every access of blk
 * (its write and its reads)? Then a loop over it is unit-stride (or a
 * broadcast) everywhere. */
static bool last_index_only(const ir_block *blk, const ir_var *v) {
  for (int j = 0; j < blk->nreads + blk->nwrites; j++) {
    const ir_region *rg = j < blk->nreads ? &blk->reads[j] : &blk->writes[j - blk->nreads];
    for (int k = 0; k + 1 < rg->ndim; k++)
      if (ir_expr_uses_var(rg->ranges[k].min, v) || ir_expr_uses_var(rg->ranges[k].extent, v)) return false;
  }
  return true;
}

static bool count_tileable(void *ctx, const ir_stmt *s) {
  if (s->kind == IR_BLOCK_REALIZE && srch_block_is_tileable_reduction(s->u.realize.block)) ++*(int *)ctx;
  return true;
}

/* The vector-block variant's candidate widths for iter `iter` (the innermost
 * spatial one): multiples of the vector lanes dividing its extent, at most
 * max_innermost, and dividing its vector span (srch_vector_span: within one
 * group of a grouped convolution), when it is last-index-only (a channel
 * block). Returns the count (0: no variant). */
static int vector_block_widths(const srch_rule_ctx *c, const ir_block *blk, int iter, int64_t *w, int cap) {
  int64_t ext;
  const ir_iter_var *it = &blk->iters[iter];
  if (it->type != IR_ITER_S || !ir_as_int(it->dom.extent, &ext)) return 0;
  int bits = ir_dtype_bits(blk->writes[0].buf->dtype);
  int vbits = c->target && c->target->vector_bits ? c->target->vector_bits : 128;
  int64_t lanes = bits > 0 && bits <= vbits ? vbits / bits : 1;
  if (lanes <= 1 || ext % lanes || !last_index_only(blk, it->var)) return 0;
  /* one tileable reduction in the function only: with several (Winograd's
   * transforms and batched matmul) the variant would double the sketches
   * per block, multiplying the space */
  int ntile = 0;
  ir_visitor vis = {.stmt = count_tileable, .ctx = &ntile};
  ir_visit_stmt(&vis, c->func->body);
  if (ntile > 1) return 0;
  /* a width across a group boundary makes the grouped read a gather */
  int64_t span = srch_vector_span(blk, it->var);
  int n = 0;
  for (int64_t f = lanes; f <= c->max_innermost && f <= ext && n < cap; f += lanes)
    if (ext % f == 0 && (!span || span % f == 0)) w[n++] = f;
  return n;
}

static void levels_add(srch_tile_levels *lv, const char *structure, bool spatial, const int *pieces);

/* Tiles block b of t as `structure` ("SSRSRS", or the register-resident
 * "SSRRS"); pre[l] > 0 first splits loop l by pre[l] (ceil) and tiles its
 * outer part, the inner part going innermost. Returns the number of spatial
 * loops per slot, or -1 when a step is refused. */
static int tile_block(const srch_rule_ctx *c, sch_traced *t, int b, const ir_block *blk, const int *iter_of,
                      const int64_t *pre, const int64_t *vbw, int nvbw, const char *structure) {
  ts_diag q;
  int nl;
  const int *lp;
  int loops[MAXL];
  ts_diag_clear(&q);
  if (sch_t_get_loops(t, b, &lp, &nl, &q) || nl > MAXL) return -1;
  memcpy(loops, lp, sizeof(int) * (size_t)nl);
  int ns = 0;
  srch_tile_levels lvl = {0};
  int tail[MAXL], ntail = 0;
  for (int l = 0; l < nl; l++) {
    bool sp = blk->iters[iter_of[l]].type == IR_ITER_S;
    if (sp) ns++;
    int n = 0;
    for (const char *k = structure; *k; k++) n += *k == (sp ? 'S' : 'R');
    int o[4], loop = loops[l];
    int64_t maxin = c->max_innermost;
    ts_diag_clear(&q);
    if (pre[l] != 0) {
      /* pre[l] < 0: the vector-block width, a sampled decision among vbw */
      sch_arg pf[2] = {sch_arg_none(), sch_arg_int(pre[l])};
      int64_t minw = pre[l];
      if (pre[l] < 0) {
        double probs[8];
        for (int k = 0; k < nvbw; k++) probs[k] = 1.0 / nvbw;
        int v;
        if (sch_t_sample_categorical(t, nvbw, vbw, probs, NULL, &v, &q)) return -1;
        pf[1] = sch_arg_rv(v);
        minw = vbw[0];
      }
      int po[2];
      if (sch_t_split(t, loop, 2, pf, po, &q)) return -1;
      loop = po[0];
      tail[ntail++] = po[1];
      maxin = maxin / minw > 1 ? maxin / minw : 1;
    }
    if (srch_sample_split(t, loop, n, maxin, o, &q)) return -1;
    levels_add(&lvl, structure, sp, o);
  }
  int order[5 * MAXL];
  int no = srch_tile_levels_order(&lvl, order, 0);
  for (int k = 0; k < ntail; k++) order[no++] = tail[k]; /* the pre-split parts, innermost */
  ts_diag_clear(&q);
  if (sch_t_reorder(t, no, order, &q)) return -1;
  ts_diag_clear(&q);
  sch_t_annotate(t, b, SRCH_ANN_TILING, sch_arg_str(structure), &q);
  return ns;
}

static void levels_add(srch_tile_levels *lv, const char *structure, bool spatial, const int *pieces) {
  int k = 0;
  for (int s = 0; s < 6 && structure[s]; s++)
    if (structure[s] == (spatial ? 'S' : 'R')) lv->at[s][lv->n[s]++] = pieces[k++];
}

void srch_tile_levels_add(srch_tile_levels *lv, bool spatial, const int *pieces) {
  levels_add(lv, "SSRSRS", spatial, pieces);
}

int srch_tile_levels_order(const srch_tile_levels *lv, int *order, int no) {
  for (int s = 0; s < 6; s++)
    for (int k = 0; k < lv->n[s]; k++) order[no++] = lv->at[s][k];
  return no;
}

/* SSRRS: block b's one consumer, when it is elementwise (no reduction
 * iter: the bias, activation and residual add fused behind a convolution,
 * inlined into one block by AutoInline), goes under the last S1 loop, after
 * the tile's whole reduction: each output tile is then finished and written
 * once, as MLAS's and oneDNN's kernels write theirs with the epilogue, and
 * the intermediate the block writes shrinks to the tile (lowering compacts
 * it), instead of a full pass over a tensor-sized buffer after the
 * convolution. Float blocks only (the integer ones tile elsewhere). Best
 * effort: a refused step leaves t as it was. */
static void fuse_consumer_at_tile(sch_traced *t, int b, const ir_block *blk, int ns) {
  if (ns <= 0 || blk->nwrites != 1 || !ir_dtype_is_float(blk->writes[0].buf->dtype)) return;
  ts_diag q;
  ts_diag_clear(&q);
  const int *cons, *lp;
  int nc, nl;
  if (sch_t_get_consumers(t, b, &cons, &nc, &q) || nc != 1) return;
  int c = cons[0];
  const ir_stmt *cr = srch_find_realize(sch_traced_func(t), sch_t_block(t, c).name);
  if (!cr) return;
  const ir_block *cb = cr->u.realize.block;
  for (int i = 0; i < cb->niter; i++)
    if (cb->iters[i].type != IR_ITER_S) return;
  if (sch_t_get_loops(t, b, &lp, &nl, &q) || nl < 2 * ns) return;
  ts_diag_clear(&q);
  sch_t_reverse_compute_at(t, c, lp[2 * ns - 1], true, -1, &q);
}

/* Pushes t tiled (with pre-splits pre, or none) and its two write-cache
 * forks; t untouched by a refused tiling is pushed as is. */
static ts_status tile_and_fork(const srch_rule_ctx *c, sch_traced *t, const char *block, const ir_block *blk,
                               const int *iter_of, const int64_t *pre, const int64_t *vbw, int nvbw,
                               const char *structure, ts_vec *out, ts_diag *d) {
  ts_diag q;
  ts_diag_clear(&q);
  int b;
  if (sch_t_get_block(t, block, &b, &q)) return srch_push(out, t, d);
  int ns = tile_block(c, t, b, blk, iter_of, pre, vbw, nvbw, structure);
  /* SSRRS writes each output tile once, after its whole reduction: no
   * cache; its elementwise epilogue follows each tile */
  if (ns > 0 && !strcmp(structure, "SSRRS")) fuse_consumer_at_tile(t, b, blk, ns);
  if (ns < 0 || strcmp(structure, "SSRSRS")) return srch_push(out, t, d);
  /* write cache: none, level 1, level 2 (with pre-splits, the level-2 slot
   * ends before the pre-split tails, which stay inside with the compute) */
  sch_traced *f1 = cache_fork(c, t, block, ns, 1);
  sch_traced *f2 = cache_fork(c, t, block, ns, 2);
  ts_status st = srch_push(out, t, d);
  if (f1 && !st) st = srch_push(out, f1, d);
  else if (f1) sch_traced_free(f1);
  if (f2 && !st) st = srch_push(out, f2, d);
  else if (f2) sch_traced_free(f2);
  return st;
}

ts_status srch_rule_multi_level_tiling(const srch_rule_ctx *c, sch_traced *t, const char *block, ts_vec *out,
                                       ts_diag *d) {
  ts_diag q;
  ts_diag_clear(&q);
  int nl, iter_of[MAXL];
  /* eligibility on the concrete state first, so that an ineligible block
   * leaves nothing in the trace */
  const ir_stmt *r = srch_block_needs_tiling(t, block, false, iter_of, &nl);
  if (!r) return srch_push(out, t, d);
  const ir_block *blk = r->u.realize.block;
  /* the padded variant: pre-split factors (the innermost spatial loop is
   * the last spatial one in loop order) */
  int64_t none[MAXL] = {0}, pre[MAXL] = {0};
  int last_s = -1;
  for (int l = 0; l < nl; l++)
    if (blk->iters[iter_of[l]].type == IR_ITER_S) last_s = l;
  bool any = false;
  for (int l = 0; l < nl; l++) {
    pre[l] = presplit_factor(c, blk, iter_of[l], l == last_s);
    any = any || pre[l] > 0;
  }
  sch_traced *padded = NULL;
  if (any) {
    ts_diag_clear(&q);
    padded = srch_fork(c, t, &q);
  }
  /* the vector-block variant: the channel block whole and innermost, its
   * vector width sampled (a single candidate: a fixed split). Where it
   * applies it replaces the plain variant: the plain perfect tiles of that
   * axis that vectorize well are its own tiles (a vector width w times
   * outer tiles), and the rest split the block across the vector position
   * (measured on the channel-blocked 3x3 convolution, 64 trials: 28 of 64
   * went to the plain sketches, the best of them at 0.4x the vector-block
   * best). The padded variant stays: it pre-splits the other loops. */
  int64_t vbw[8], vpre[MAXL] = {0};
  int nvbw = last_s >= 0 ? vector_block_widths(c, blk, iter_of[last_s], vbw, 8) : 0;
  /* ... and, beside its three SSRSRS sketches, a register-resident one,
   * "SSRRS": the spatial loops split three ways, every reduction piece above
   * the register tile, so the accumulators stay in registers across the
   * whole reduction, the loop order of oneDNN's direct and 1x1 kernels (in
   * SSRSRS that is the point where every S2 piece is 1, which the sampler
   * rarely draws: on the 1x1 stride-2 convolution the search's best after
   * 64 trials had S2 = 7 x 28 and ran 25 % slower than the same tile with
   * S2 = 1). */
  ts_status st;
  if (nvbw > 0) {
    vpre[last_s] = nvbw == 1 ? vbw[0] : -1;
    ts_diag_clear(&q);
    sch_traced *rr = srch_fork(c, t, &q);
    st = tile_and_fork(c, t, block, blk, iter_of, vpre, vbw, nvbw, "SSRSRS", out, d);
    if (rr && !st) st = tile_and_fork(c, rr, block, blk, iter_of, vpre, vbw, nvbw, "SSRRS", out, d);
    else if (rr) sch_traced_free(rr);
  } else {
    st = tile_and_fork(c, t, block, blk, iter_of, none, NULL, 0, "SSRSRS", out, d);
  }
  if (padded && !st) st = tile_and_fork(c, padded, block, blk, iter_of, pre, NULL, 0, "SSRSRS", out, d);
  else if (padded) sch_traced_free(padded);
  return st;
}
