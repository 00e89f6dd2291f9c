/* build.c — the default schedule, trace application and the build path
 * (schedule -> lower -> LLVM -> shared library). See build.h. */
#include "tuner/build.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "codegen/llvm.h"
#include "ir/arith/arith.h"
#include "search/search.h"
#include "runtime/runtime.h"

/* ---- helpers over the traced function (search's IR lookups) ---- */
static const ir_stmt *find_loop(sch_traced *t, const ir_var *v) { return srch_find_loop(sch_traced_func(t), v); }

static const ir_stmt *find_realize(sch_traced *t, const char *name) {
  return srch_find_realize(sch_traced_func(t), name);
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
    red[i] = srch_realize_uses_in_reduction(r, sch_t_loop(t, loops[i]).var);
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
      /* the width a sampled decision (as split_sampled's): the search's
       * tile-size mutator may widen it to a few vectors */
      int64_t dec[2] = {ext / w, w};
      int rv[2], out[2];
      ts_diag_clear(&d);
      sch_arg f[2] = {sch_arg_none(), sch_arg_int(w)};
      if (sch_t_sample_perfect_tile(t, loops[nl - 1], 2, 4 * (int64_t)lanes, dec, rv, &d) == TS_OK)
        f[0] = sch_arg_rv(rv[0]), f[1] = sch_arg_rv(rv[1]);
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
  /* parallelize the outermost spatial loop, past leading unit loops (a
   * batch of 1: TVM CAP's padded copy [1, 18, 18, 4, 4, 32] ran on one
   * thread); a loop already parallel (the block sits under a tile's
   * parallel loop) leaves it alone */
  for (int i = 0; i < nl && !red[i]; i++) {
    const ir_stmt *l = find_loop(t, sch_t_loop(t, loops[i]).var);
    int64_t ext;
    if (!l || l->u.loop.kind != IR_FOR_SERIAL || !ir_as_int(l->u.loop.extent, &ext)) break;
    if (ext == 1) continue;
    ts_diag_clear(&d);
    sch_t_parallel(t, loops[i], &d);
    break;
  }
  /* decompose last: parallel/vectorize refuse once init and update are two blocks */
  if (r->u.realize.block->init && first_r >= 0) {
    int init;
    ts_diag_clear(&d);
    sch_t_decompose_reduction(t, b, loops[first_r], &init, &d);
  }
}

/* ---- the register-tiled default for heavy reductions ----
 *
 * A block MultiLevelTiling would tile (one write, an init, only S and R
 * iters bound one-to-one to constant loops, some read that reuses data
 * across a non-unit spatial var) gets a fixed micro-kernel schedule:
 *
 *   outer spatial loops (original order; the first non-unit one parallel)
 *     reduction loops (original order)
 *       rows  (a spatial loop the vector operand does not depend on; unrolled)
 *         cols  (the innermost spatial loop, one or two vectors; vectorized)
 *
 * with the accumulator tile rows x cols in a "local" cache_write whose
 * copy-back is reverse_compute_at the last outer loop, elementwise
 * consumers inlined into that copy-back (or computed at the same loop), and
 * the init decomposed in front of the reduction loops. Factors divide the
 * extents (no guarded tails); when no sensible factor exists the block
 * keeps the plain schedule of schedule_block. Every step is checked: a
 * refused step before the reorder leaves the block to schedule_block, one
 * after it keeps the (legal) schedule built so far. */

static bool placed(sch_traced *t, const char *name);
static bool has_reuse_sym(const ir_block *b);

static bool expr_has_select(void *ctx, const ir_expr *e) {
  if (e->kind == IR_SELECT) *(bool *)ctx = true;
  return true;
}

static bool stmt_has_if(void *ctx, const ir_stmt *s) {
  if (s->kind == IR_IF) *(bool *)ctx = true;
  return true;
}

/* The step of a block's accesses along iter var v: v -> v + 1 moves an
 * index by a constant (the analyzer knows the iters' ranges). One walk for
 * inlinable's strided-load search and rfactor_lanes' contiguity test. */
typedef struct stride_ctx {
  ir_analyzer *an;
  ts_arena *a;
  ir_var_map *next; /* v -> v + 1 */
  const ir_var *v;
  bool strided; /* a load's last index moves by a constant other than -1, 0 or 1 */
  bool unit;    /* every access uses v in its last index only, moving it by 1 */
} stride_ctx;

/* The constant step of index e along v (false: not a constant). */
static bool index_step(stride_ctx *c, ir_expr *e, int64_t *k) {
  ir_expr *moved = ir_subst_expr(c->a, e, c->next);
  ir_expr *delta = moved ? ir_simplify(c->an, ir_sub(c->a, moved, e)) : NULL;
  return delta && ir_as_int(delta, k);
}

/* Walks b's body with vis (its ctx c set up here); false when v + 1 could
 * not be built. */
static bool walk_steps(const ir_block *b, ir_var *v, ir_visitor vis, stride_ctx *c) {
  ts_arena a;
  ts_arena_init(&a);
  ir_analyzer an;
  ir_analyzer_init(&an, &a);
  ir_var_map m;
  ir_var_map_init(&m);
  c->an = &an, c->a = &a, c->next = &m, c->v = v;
  int64_t lo, ext;
  for (int i = 0; i < b->niter; i++)
    if (ir_as_int(b->iters[i].dom.min, &lo) && ir_as_int(b->iters[i].dom.extent, &ext) && ext > 0)
      ir_analyzer_bind_const(&an, b->iters[i].var, lo, lo + ext - 1);
  ir_expr *v1 = ir_add(&a, ir_var_ref(&a, v), ir_int(&a, v->dtype, 1));
  bool ok = v1 && ir_var_map_put(&m, v, v1) == TS_OK;
  if (ok) {
    vis.ctx = c;
    ir_visit_stmt(&vis, b->body);
  }
  ir_var_map_fini(&m);
  ir_analyzer_fini(&an);
  ts_arena_fini(&a);
  return ok;
}

static bool load_strided(void *ctx, const ir_expr *e) {
  stride_ctx *c = ctx;
  if (e->kind != IR_LOAD || e->u.load.nidx < 1) return true;
  ir_expr *last = e->u.load.idx[e->u.load.nidx - 1];
  int64_t k;
  if (ir_expr_uses_var(last, c->v) && index_step(c, last, &k) && (k > 1 || k < -1)) c->strided = true;
  return true;
}

/* Does the block read a buffer at a constant stride > 1 along its innermost
 * iter (a Slice with steps)? Inlined into a consumer that vectorizes that
 * axis, each vector load becomes a gather in the hot loop; kept as its own
 * loop nest, the consumer reads a compact buffer. */
static bool reads_strided(const ir_block *b) {
  if (b->niter == 0) return false;
  stride_ctx c = {0};
  walk_steps(b, b->iters[b->niter - 1].var, (ir_visitor){.expr = load_strided}, &c);
  return c.strided;
}

/* Block b writes a buffer o keeps (never inlined). */
static bool writes_kept(const ir_block *b, const tun_default_opts *o) {
  for (int w = 0; o && w < b->nwrites; w++)
    for (int k = 0; k < o->nkeep; k++)
      if (b->writes[w].buf->name && !strcmp(b->writes[w].buf->name, o->keep[k])) return true;
  return false;
}

/* A block compute_inline may take: all-spatial, no init, one write, and no
 * select or if (TVM's AutoInline disallows if_then_else on CPU: an inlined
 * pad would guard every load of the hot loop), and no strided read along
 * its innermost axis (reads_strided). */
static bool inlinable(const ir_block *b) {
  if (b->init || b->nwrites != 1 || b->nalloc) return false;
  for (int i = 0; i < b->niter; i++)
    if (b->iters[i].type != IR_ITER_S) return false;
  bool found = false;
  ir_visitor v = {.expr = expr_has_select, .stmt = stmt_has_if, .ctx = &found};
  ir_visit_stmt(&v, b->body);
  return !found && !reads_strided(b);
}

static bool region_uses_var(const ir_region *rg, const ir_var *v) {
  for (int k = 0; k < rg->ndim; k++)
    if (ir_expr_uses_var(rg->ranges[k].min, v) || ir_expr_uses_var(rg->ranges[k].extent, v)) return true;
  return false;
}

/* Transpose search of transposes_innermost: a load of a buffer whose last
 * extent is not 1 uses v in an index other than its last. */
typedef struct transp_ctx {
  const ir_var *v;
  bool found;
} transp_ctx;

static bool load_transposed(void *ctx, const ir_expr *e) {
  transp_ctx *c = ctx;
  if (e->kind != IR_LOAD || e->u.load.nidx < 2) return true;
  const ir_buffer *buf = e->u.load.buf;
  int64_t last;
  if (buf->ndim > 0 && ir_as_int(buf->shape[buf->ndim - 1], &last) && last == 1) return true;
  for (int k = 0; k + 1 < e->u.load.nidx; k++)
    if (ir_expr_uses_var(e->u.load.idx[k], c->v)) c->found = true;
  return true;
}

/* Does the block's innermost iter move a load along one of the loaded
 * buffer's outer axes (a transpose that moves the contiguous axis, as K^T
 * in attention: VT[b, h, d, l] = V[b, l, h, d])? */
static bool transposes_innermost(const ir_block *b) {
  if (b->niter == 0) return false;
  transp_ctx c = {.v = b->iters[b->niter - 1].var};
  ir_visitor vis = {.expr = load_transposed, .ctx = &c};
  ir_visit_stmt(&vis, b->body);
  return c.found;
}

/* The innermost spatial iter of a block (NULL: none). */
static const ir_var *innermost_spatial(const ir_block *b) {
  for (int i = b->niter - 1; i >= 0; i--)
    if (b->iters[i].type == IR_ITER_S) return b->iters[i].var;
  return NULL;
}

/* Block b (body blk) transposes its innermost axis (transposes_innermost)
 * and a reduction that reuses its operands (the register tile's candidate)
 * reads what b writes along its own innermost spatial axis: the tile's
 * vectorized cols. Inlined, each vector load of that operand would be a
 * gather (TBG's V, BERT's K^T: 8 loads 3 KB apart per vector); kept, it is
 * one transposing copy (computed at the tile's parallel loop by
 * keep_transposed_at) and the hot loop reads it contiguously. tiled: the
 * consumer already has its tile (its init decomposed away): any consumer
 * reading it along its innermost spatial axis counts. */
static bool transposed_into_tile(sch_traced *t, int b, const ir_block *blk, bool tiled) {
  if (blk->nwrites != 1 || !transposes_innermost(blk)) return false;
  const ir_buffer *out = blk->writes[0].buf;
  ts_diag d;
  ts_diag_clear(&d);
  const int *cons;
  int nc;
  if (sch_t_get_consumers(t, b, &cons, &nc, &d) != TS_OK) return false;
  for (int i = 0; i < nc; i++) {
    const ir_stmt *r = find_realize(t, sch_t_block(t, cons[i]).name);
    const ir_block *cb = r ? r->u.realize.block : NULL;
    if (!cb || (!tiled && (!cb->init || !has_reuse_sym(cb)))) continue;
    const ir_var *cv = innermost_spatial(cb);
    for (int j = 0; cv && j < cb->nreads; j++) {
      const ir_region *rg = &cb->reads[j];
      if (rg->buf != out || rg->ndim == 0) continue;
      const ir_range *lr = &rg->ranges[rg->ndim - 1];
      if (ir_expr_uses_var(lr->min, cv) || ir_expr_uses_var(lr->extent, cv)) return true;
    }
  }
  return false;
}

#define TILE_MAXL 32

/* srch_block_has_reuse with a symbolic extent counted as non-unit: some
 * read (not of the output) leaves out a spatial iter whose extent is not
 * the constant 1 (attention's Q.K^T over a run-time sequence: K is reused
 * across the query rows, Q across the keys). */
static bool has_reuse_sym(const ir_block *b) {
  if (b->nwrites != 1) return false;
  for (int i = 0; i < b->niter; i++) {
    int64_t ext;
    if (b->iters[i].type != IR_ITER_S || (ir_as_int(b->iters[i].dom.extent, &ext) && ext <= 1)) continue;
    for (int j = 0; j < b->nreads; j++)
      if (b->reads[j].buf != b->writes[0].buf && !region_uses_var(&b->reads[j], b->iters[i].var)) return true;
  }
  return false;
}

/* MultiLevelTiling's eligibility (search/rules/multi_level_tiling.c), over
 * the block's loops lv[0..n): fills iter_of (loop -> iter) and ext. */
/* The extent of a loop over a symbolic size (tile_eligible): it may be the
 * rows loop (split with a guarded tail) or an outer loop, never the cols. */
#define EXT_SYM (-1)

static bool tile_eligible(sch_traced *t, const ir_stmt *r, int n, const int *loops, int *iter_of, int64_t *ext) {
  const ir_block *b = r->u.realize.block;
  if (!srch_block_is_tileable_reduction(b) || n != b->niter || n > TILE_MAXL || n == 0) return false;
  for (int l = 0; l < n; l++) {
    const ir_var *v = sch_t_loop(t, loops[l]).var;
    const ir_stmt *ls = v ? find_loop(t, v) : NULL;
    if (!ls || ls->u.loop.kind != IR_FOR_SERIAL) return false;
    if (!ir_as_int(ls->u.loop.extent, &ext[l])) ext[l] = EXT_SYM; /* a model's batch or sequence */
    if (!srch_bind_loop_iter(r, v, iter_of, l)) return false;
  }
  return has_reuse_sym(b);
}

/* Inner split of loop by f (f divides its extent, or the extent is symbolic
 * and the split guards the tail): *outer, *inner. */
static bool split_inner(sch_traced *t, int loop, int64_t f, int *outer, int *inner) {
  ts_diag d;
  ts_diag_clear(&d);
  sch_arg fa[2] = {sch_arg_none(), sch_arg_int(f)};
  int out[2];
  if (sch_t_split(t, loop, 2, fa, out, &d) != TS_OK) return false;
  *outer = out[0];
  *inner = out[1];
  return true;
}

/* split_inner with the factor a sampled decision: a constant extent ext
 * that f divides is split by SamplePerfectTile with the decision
 * [ext / f, f] (at most maxin innermost), so the default schedule's trace
 * carries the tile sizes it chose as decisions that the evolutionary
 * search's tile-size mutator can move (a Winograd kernel's five reductions
 * and batched matmul start from the default and need it, docs/SEARCH.md
 * "The default schedule's decisions"); the scheduled function is the same
 * as with the literal factor. Other extents take the literal split. */
static bool split_sampled(sch_traced *t, int loop, int64_t ext, int64_t f, int64_t maxin, int *outer, int *inner) {
  if (ext == EXT_SYM || ext < 2 || f < 1 || ext % f) return split_inner(t, loop, f, outer, inner);
  ts_diag d;
  ts_diag_clear(&d);
  int64_t dec[2] = {ext / f, f};
  int rv[2], out[2];
  if (sch_t_sample_perfect_tile(t, loop, 2, maxin > f ? maxin : f, dec, rv, &d) != TS_OK)
    return split_inner(t, loop, f, outer, inner);
  sch_arg fa[2] = {sch_arg_rv(rv[0]), sch_arg_rv(rv[1])};
  if (sch_t_split(t, loop, 2, fa, out, &d) != TS_OK) return false;
  *outer = out[0];
  *inner = out[1];
  return true;
}

/* Vectorizes the innermost loop of block name if its extent is at most
 * max_ext (best effort). */
static void vectorize_innermost(sch_traced *t, const char *name, int64_t max_ext) {
  ts_diag d;
  ts_diag_clear(&d);
  int b, n;
  const int *lp;
  if (sch_t_get_block(t, name, &b, &d) || sch_t_get_loops(t, b, &lp, &n, &d) || n == 0) return;
  const ir_stmt *l = find_loop(t, sch_t_loop(t, lp[n - 1]).var);
  int64_t e;
  if (!l || l->u.loop.kind != IR_FOR_SERIAL || !ir_as_int(l->u.loop.extent, &e) || e < 2 || e > max_ext) return;
  sch_t_vectorize(t, lp[n - 1], &d);
}

/* The end of the register tile (tile_block, tile_gemv): the loops in
 * order[0..k) (nouter outer spatial loops, the reductions from first_red),
 * the innermost c_in vectorized, r_in (or -1) unrolled, order[first_nonunit]
 * (or -1) parallel, the accumulator in "local" written back at the last
 * outer loop with elementwise consumers inlined there, the init decomposed in
 * front of the reductions. A refused reorder keeps the (legal) splits. */
static bool tile_finish(sch_traced *t, const char *name, int b, const int *order, int k, int nouter, int first_red,
                        int first_nonunit, int r_in, int c_in, int lanes) {
  ts_diag d;
  ts_diag_clear(&d);
  if (sch_t_reorder(t, k, order, &d) != TS_OK) return true; /* split but legal: keep */
  /* the innermost cols loop vectorized, the rows loop unrolled */
  ts_diag_clear(&d);
  sch_t_vectorize(t, c_in, &d);
  if (r_in >= 0) {
    ts_diag_clear(&d);
    sch_t_unroll(t, r_in, &d);
  }
  /* the first non-unit outer loop parallel (unit loops above it are free) */
  if (first_nonunit >= 0) {
    ts_diag_clear(&d);
    sch_t_parallel(t, order[first_nonunit], &d);
  }
  /* accumulator tile in "local", written back at the last outer loop */
  if (nouter > 0) {
    int cb;
    ts_diag_clear(&d);
    if (sch_t_cache_write(t, b, 0, "local", 0, NULL, &cb, &d) == TS_OK) {
      int at = order[nouter - 1];
      ts_diag_clear(&d);
      if (sch_t_reverse_compute_at(t, cb, at, true, -1, &d) == TS_OK) {
        /* elementwise consumers of the copy-back: inline into it, else
         * compute them at the same loop */
        for (int round = 0; round < 8; round++) {
          const int *cons;
          int nc;
          ts_diag_clear(&d);
          if (sch_t_get_consumers(t, cb, &cons, &nc, &d) || nc != 1) break;
          int c = cons[0];
          ts_diag_clear(&d);
          if (sch_t_reverse_compute_inline(t, c, &d) == TS_OK) continue;
          ts_diag_clear(&d);
          if (sch_t_reverse_compute_at(t, c, at, true, -1, &d) == TS_OK) {
            vectorize_innermost(t, sch_t_block(t, c).name, 2 * lanes);
          }
          break;
        }
        vectorize_innermost(t, sch_t_block(t, cb).name, 2 * lanes);
      }
    }
  }
  /* the init in front of the reduction loops */
  if (first_red < k) {
    int init;
    ts_diag_clear(&d);
    if (sch_t_get_block(t, name, &b, &d) == TS_OK &&
        sch_t_decompose_reduction(t, b, order[first_red], &init, &d) == TS_OK)
      vectorize_innermost(t, sch_t_block(t, init).name, 2 * lanes);
  }
  return true;
}

/* A GEMV (tile_block's tile has no rows: every spatial loop but the cols
 * is a unit one, and a read uses both the cols and the one reduction: the
 * matrix, streamed once): no register reuse to gain, the time is the
 * matrix's read. The cols split three ways [chunks, m, w] (w two vectors,
 * m*w <= 2048 floats, at least 2 chunks), the reduction by ku = 8 (or
 * the largest of 4, 2 dividing it): chunks (parallel) | k0 | m | k1
 * (unrolled) | w (vectorized), so each step reads ku rows of a chunk as ku
 * long contiguous streams (OpenBLAS's sgemv_n reads 4-8 columns at once),
 * accumulated into the chunk's local sums (L1) ku rows at a time.
 * Both splits are sampled decisions the search may move. False when the
 * block is not a GEMV (nothing done). */
static bool tile_gemv(sch_traced *t, const char *name, int b, const ir_block *blk, int n, const int *loops,
                      const int *iter_of, const bool *red, const int64_t *ext, int ci, int lanes) {
  int kl = -1, nred = 0;
  for (int l = 0; l < n; l++)
    if (red[l]) kl = l, nred++;
  if (nred != 1 || ext[kl] == EXT_SYM || ext[ci] == EXT_SYM) return false;
  const ir_var *cvar = blk->iters[iter_of[ci]].var, *kvar = blk->iters[iter_of[kl]].var;
  bool matrix = false;
  for (int j = 0; j < blk->nreads; j++)
    if (blk->reads[j].buf != blk->writes[0].buf && region_uses_var(&blk->reads[j], cvar) &&
        region_uses_var(&blk->reads[j], kvar))
      matrix = true;
  int64_t N = ext[ci], K = ext[kl], w = 2 * (int64_t)lanes;
  if (!matrix || N % w || N / w < 2) return false;
  int64_t m = 1;
  for (int64_t c = 2048 / w; c >= 1; c--)
    if ((N / w) % c == 0 && (N / (c * w) >= 2 || c == 1)) {
      m = c;
      break;
    }
  int64_t ku = K % 8 == 0 ? 8 : K % 4 == 0 ? 4 : K % 2 == 0 ? 2 : 1;
  ts_diag d;
  ts_diag_clear(&d);
  int64_t cdec[3] = {N / (m * w), m, w}, kdec[2] = {K / ku, ku};
  int crv[3], kr[2], cl[3], kls[2] = {loops[kl], -1};
  if (sch_t_sample_perfect_tile(t, loops[ci], 3, 4 * (int64_t)lanes, cdec, crv, &d) != TS_OK) return false;
  sch_arg cf[3] = {sch_arg_rv(crv[0]), sch_arg_rv(crv[1]), sch_arg_rv(crv[2])};
  if (sch_t_split(t, loops[ci], 3, cf, cl, &d) != TS_OK) return false;
  if (ku > 1) {
    ts_diag_clear(&d);
    if (sch_t_sample_perfect_tile(t, loops[kl], 2, 16, kdec, kr, &d) == TS_OK) {
      sch_arg kf[2] = {sch_arg_rv(kr[0]), sch_arg_rv(kr[1])};
      int ko[2];
      ts_diag_clear(&d);
      if (sch_t_split(t, loops[kl], 2, kf, ko, &d) == TS_OK) kls[0] = ko[0], kls[1] = ko[1];
    }
  }
  int order[TILE_MAXL + 4], k = 0;
  for (int l = 0; l < n; l++)
    if (!red[l] && l != ci) order[k++] = loops[l];
  int par = N / (m * w) > 1 ? k : -1;
  order[k++] = cl[0];
  int nouter = k, first_red = k;
  order[k++] = kls[0];
  order[k++] = cl[1];
  if (kls[1] >= 0) order[k++] = kls[1];
  order[k++] = cl[2];
  return tile_finish(t, name, b, order, k, nouter, first_red, par, kls[1], cl[2], lanes);
}

/* The register tile's most rows for nvec accumulator vectors a row. */
static int64_t tile_rmax(int64_t budget, int64_t nvec) { return budget / nvec > 8 ? 8 : budget / nvec; }

/* The largest rows count up to rmax that divides ext (1 when none does). */
static int64_t tile_rows(int64_t ext, int64_t rmax) {
  for (int64_t f = rmax; f >= 2; f--)
    if (ext % f == 0) return f;
  return 1;
}

/* The channel blocks of a blocked convolution's register tile (the nchwc
 * pass's conv2d_nchwc: Y[n, ko, p, q, kv] += X[n, co, h, w, cv] · W[ko, co,
 * r, s, cv, kv]). When the cols are one channel block whole (cols equal to
 * the extent of kv), a constant spatial loop bi other than the rows that
 * every read using the cols also uses (the weights' ko) and no other read
 * uses (a broadcast input, which never depends on it, there is: not the
 * depthwise form, whose input is a vector too) gives the tile a second
 * dimension: m blocks of ko beside the rows, so each broadcast input value
 * feeds m FMAs and each weight vector `rows` of them, the tile shape of
 * MLAS's NCHWc kernels (pixels x 2-4 channel blocks) instead of a row of
 * pixels against one weight vector (a load for every FMA). m divides ko's
 * extent (at most 4), rows the pixels' (at most 8); the pair with the most
 * accumulators such that they, the m weight vectors and the broadcast fit
 * the register file (16 on AVX2: LLVM keeps the weights in registers, and
 * 7 x 2 = 14 accumulators spilled one on every step and ran 1.4x slower
 * than the old 7 x 1, bench/RESULTS.md), ties going to the fewer loads
 * (rows + m) per FMA: 4 x 2 at widths 56 and 28 (and 112), 2 x 4 at 14,
 * 4 x 3 where ko is 3, 7 x 1 (one block) at 7. Float blocks only
 * (the integer kernels have their own tile). Returns bi and sets *m,
 * *rows; -1 when there is no such loop or one block is best. */
static int tile_channel_blocks(const ir_block *blk, const int *iter_of, const bool *red, const int64_t *ext, int ci,
                               int ri, int64_t nvec, int64_t regs, int64_t *m, int64_t *rows) {
  *m = 1;
  if (ri < 0 || ext[ri] == EXT_SYM || blk->nwrites != 1 || !ir_dtype_is_float(blk->writes[0].buf->dtype))
    return -1;
  const ir_var *cvar = blk->iters[iter_of[ci]].var;
  int bi = -1;
  for (int l = ci - 1; l >= 0 && bi < 0; l--) {
    if (red[l] || l == ri || ext[l] == EXT_SYM || ext[l] <= 1) continue;
    const ir_var *v = blk->iters[iter_of[l]].var;
    bool ok = true, weights = false, bcast = false;
    for (int j = 0; j < blk->nreads && ok; j++) {
      const ir_region *rg = &blk->reads[j];
      if (rg->buf == blk->writes[0].buf) continue;
      bool uc = region_uses_var(rg, cvar), uv = region_uses_var(rg, v);
      if (uc != uv) ok = false;
      weights = weights || uc;
      bcast = bcast || !uc;
    }
    if (ok && weights && bcast) bi = l;
  }
  if (bi < 0) return -1;
  int64_t best_acc = 0, best_m = 1, best_rows = 1;
  for (int64_t mm = 1; mm <= 4; mm++) {
    /* accumulators + the m weight vectors + the broadcast within the file */
    int64_t room = regs - 1 - mm * nvec;
    if (ext[bi] % mm || room < mm * nvec) continue;
    int64_t rmax = room / (mm * nvec) > 8 ? 8 : room / (mm * nvec);
    int64_t rw = tile_rows(ext[ri], rmax), acc = rw * mm * nvec;
    /* loads per FMA (rw + mm * nvec) / acc, compared without division */
    bool fewer = acc == best_acc && (rw + mm * nvec) * best_acc < (best_rows + best_m * nvec) * acc;
    if (acc > best_acc || fewer) best_acc = acc, best_m = mm, best_rows = rw;
  }
  if (best_m == 1) return -1;
  *m = best_m;
  *rows = best_rows;
  return bi;
}

/* Returns true when block `name` got the tiled schedule (the caller then
 * leaves it and the blocks it absorbed alone). */
static bool tile_block(sch_traced *t, const char *name, const cg_target *tg) {
  ts_diag d;
  ts_diag_clear(&d);
  int b, n;
  const int *lp;
  if (sch_t_get_block(t, name, &b, &d) || sch_t_get_loops(t, b, &lp, &n, &d) || n == 0 || n > TILE_MAXL)
    return false;
  int loops[TILE_MAXL], iter_of[TILE_MAXL];
  int64_t ext[TILE_MAXL];
  memcpy(loops, lp, sizeof(int) * (size_t)n);
  const ir_stmt *r = find_realize(t, name);
  if (!r || !tile_eligible(t, r, n, loops, iter_of, ext)) return false;
  const ir_block *blk = r->u.realize.block;
  /* a guarded body (legalized convolutions carry their padding as a
   * select): its masked loads become gathers of the broadcast operand, one
   * per row of the tile, and the tiled kernel measured 1.5-3x slower than
   * the plain schedule on ResNet-18's 3x3 convs; such blocks keep it */
  bool guarded = false;
  ir_visitor gv = {.expr = expr_has_select, .stmt = stmt_has_if, .ctx = &guarded};
  ir_visit_stmt(&gv, blk->body);
  if (guarded) return false;
  bool red[TILE_MAXL];
  int ci = -1; /* the cols loop: the innermost spatial loop */
  for (int l = 0; l < n; l++) {
    red[l] = blk->iters[iter_of[l]].type == IR_ITER_R;
    if (!red[l]) ci = l;
  }
  if (ci < 0) return false;
  int lanes = vector_lanes(tg, blk);
  if (!lanes) lanes = 4;
  /* cols: two vectors, one, a half or quarter vector (>= 4) dividing the
   * extent; else the whole loop when it is short. A symbolic cols extent
   * (attention's scores over a run-time key length) takes two vectors with a
   * guarded tail, which lowering partitions off (codegen/lower_part.c) so
   * the main part stays vectorized. */
  int64_t cols = 0;
  int64_t cand[4] = {2 * (int64_t)lanes, lanes, lanes / 2, lanes / 4};
  for (int k = 0; k < 4 && !cols; k++)
    if (cand[k] >= 4 && ext[ci] >= cand[k] && ext[ci] % cand[k] == 0) cols = cand[k];
  if (!cols && ext[ci] >= 2 && ext[ci] <= 2 * lanes) cols = ext[ci];
  if (ext[ci] == EXT_SYM) cols = 2 * (int64_t)lanes;
  if (!cols) return false;
  /* rows: the innermost non-unit spatial loop that the vector operand (a
   * read using the cols var) does not depend on, else the innermost other
   * non-unit spatial loop */
  const ir_var *cvar = blk->iters[iter_of[ci]].var;
  /* a symbolic loop (a batch that is often 1) only when no constant one
   * qualifies: the first pass takes constant loops, the second any */
  int ri = -1, ri_any = -1;
  for (int pass = 0; pass < 2 && ri < 0; pass++)
    for (int l = ci - 1; l >= 0; l--) {
      if (red[l] || (ext[l] != EXT_SYM && ext[l] <= 1) || (pass == 0 && ext[l] == EXT_SYM)) continue;
      if (ri_any < 0) ri_any = l;
      const ir_var *v = blk->iters[iter_of[l]].var;
      bool reuse = false;
      for (int j = 0; j < blk->nreads; j++)
        if (blk->reads[j].buf != blk->writes[0].buf && region_uses_var(&blk->reads[j], cvar) &&
            !region_uses_var(&blk->reads[j], v))
          reuse = true;
      if (reuse) {
        ri = l;
        break;
      }
    }
  if (ri < 0) ri = ri_any;
  if (ri < 0 && tile_gemv(t, name, b, blk, n, loops, iter_of, red, ext, ci, lanes)) return true;
  /* accumulator budget in vector registers: 32 with 512-bit vectors, else 16,
   * leaving room for the operands */
  int64_t budget = (tg && tg->vector_bits >= 512) ? 24 : 12;
  int64_t nvec = (cols + lanes - 1) / lanes, rmax = tile_rmax(budget, nvec);
  int64_t rows = ri < 0 ? 1 : ext[ri] == EXT_SYM ? rmax /* the split guards the tail rows */ : tile_rows(ext[ri], rmax);
  /* two vectors of cols whose rows find no divisor (a Winograd matmul's 7
   * tiles a row: a 1 x 2 tile) against one vector with the rows its larger
   * budget divides (7 x 1): the tile with more accumulators */
  if (ri >= 0 && ext[ri] != EXT_SYM && cols == 2 * (int64_t)lanes) {
    int64_t rows1 = tile_rows(ext[ri], tile_rmax(budget, 1));
    if (rows1 > 2 * rows) {
      cols = lanes;
      nvec = 1;
      rmax = tile_rmax(budget, 1);
      rows = rows1;
    }
  }
  /* no divisor worth a tile (ViT's 197 tokens are prime): a full tile with a
   * guarded tail, as for a symbolic extent, when there are rows enough */
  bool guarded_rows = ri >= 0 && (ext[ri] == EXT_SYM || (rows * 2 <= rmax && ext[ri] >= 2 * rmax));
  if (guarded_rows) rows = rmax;
  /* a blocked convolution: m output-channel blocks beside the rows */
  int64_t mblk = 1;
  int bi = guarded_rows || cols != ext[ci]
               ? -1
               : tile_channel_blocks(blk, iter_of, red, ext, ci, ri, nvec, (tg && tg->vector_bits >= 512) ? 32 : 16,
                                     &mblk, &rows);
  /* split: cols, then rows (loop RVs stay valid across splits of others) */
  int c_out = loops[ci], c_in = loops[ci], r_out = -1, r_in = -1;
  if ((cols < ext[ci] || ext[ci] == EXT_SYM) && !split_sampled(t, loops[ci], ext[ci], cols, 4 * (int64_t)lanes, &c_out, &c_in))
    return false;
  if (ri >= 0 && rows > 1) {
    if (!split_sampled(t, loops[ri], guarded_rows ? EXT_SYM : ext[ri], rows, 2 * rmax, &r_out, &r_in)) return false;
  } else if (ri >= 0) {
    r_out = loops[ri]; /* rows 1: the loop stays outer */
  }
  int b_out = -1, b_in = -1;
  if (bi >= 0 && !split_sampled(t, loops[bi], ext[bi], mblk, 4, &b_out, &b_in)) return false;
  /* order: outer spatial (original order), reduction, rows, cols — except
   * that the cols tiles go outside the rows loop when the operand they read
   * (B: K x cols) is the larger one by far (a transformer's MLP, 768 x 3072
   * against 64 rows of A): each B panel then stays in cache while every row
   * tile uses it, instead of all of B streaming past once per row tile. A
   * symbolic rows extent counts as 128. */
  int64_t rows_est = ri < 0 ? 1 : ext[ri] == EXT_SYM ? 128 : ext[ri];
  bool cols_outer = ri >= 0 && r_out >= 0 && c_out != c_in && ci > ri && ext[ci] >= 2 * rows_est;
  int order[2 * TILE_MAXL], k = 0, nouter = 0, first_nonunit = -1, first_sym = -1;
  for (int l = 0; l < n; l++) {
    if (red[l]) continue;
    int rv = l == ci ? (c_out != c_in ? c_out : -1) : l == ri ? r_out : l == bi ? b_out : loops[l];
    if (cols_outer && l == ri) rv = c_out; /* the two swap places */
    else if (cols_outer && l == ci) rv = r_out;
    if (rv < 0) continue;
    int sl = cols_outer && l == ri ? ci : cols_outer && l == ci ? ri : l; /* the loop at this place */
    int64_t e = ext[sl] == EXT_SYM ? 2
                : sl == ci  ? ext[sl] / cols
                : sl == ri  ? (ext[sl] + rows - 1) / rows
                : sl == bi  ? ext[sl] / mblk
                            : ext[sl];
    /* the parallel loop: the first constant non-unit one; a symbolic one
     * (a batch, often 1) only when no constant one comes before the tile */
    if (ext[sl] == EXT_SYM) {
      if (first_sym < 0) first_sym = k;
    } else if (first_nonunit < 0 && e > 1) {
      first_nonunit = k;
    }
    order[k++] = rv;
  }
  nouter = k;
  if (first_nonunit < 0) first_nonunit = first_sym;
  int first_red = k;
  for (int l = 0; l < n; l++)
    if (red[l]) order[k++] = loops[l];
  if (r_in >= 0) order[k++] = r_in;
  if (b_in >= 0) {
    /* the blocks inside the pixels: a pixel's broadcast feeds m FMAs */
    order[k++] = b_in;
    ts_diag_clear(&d);
    sch_t_unroll(t, b_in, &d);
  }
  order[k++] = c_in;
  return tile_finish(t, name, b, order, k, nouter, first_red, first_nonunit, r_in, c_in, lanes);
}

/* Loop var v feeds an iter of realize r that region rg uses. */
static bool loop_reaches_region(const ir_stmt *r, const ir_var *v, const ir_region *rg) {
  const ir_block *b = r->u.realize.block;
  for (int i = 0; i < b->niter; i++)
    if (ir_expr_uses_var(r->u.realize.iter_values[i], v) && region_uses_var(rg, b->iters[i].var)) return true;
  return false;
}

/* After tile_block gave block name its tile: a producer kept by
 * transposed_into_tile (still at the root) is computed at the tile's
 * parallel loop, when every non-unit loop from the outermost down to that
 * one selects a distinct part of what the tile reads of it (TBG and BERT's
 * K^T: one head's transposed block per iteration of the parallel heads
 * loop, 32 KB that stays in cache, no element copied twice); its own loops
 * then get the plain schedule (vectorized innermost). Best effort: a
 * refused step leaves the producer at the root for schedule_block. Returns
 * how many producers it placed (their names in placed_names). */
static int keep_transposed_at(sch_traced *t, const char *name, const cg_target *tg, const char **placed_names,
                              int maxp) {
  ts_diag d;
  ts_diag_clear(&d);
  int b, n;
  const int *lp;
  if (sch_t_get_block(t, name, &b, &d) || sch_t_get_loops(t, b, &lp, &n, &d)) return 0;
  int par = -1;
  for (int l = 0; l < n && par < 0; l++) {
    const ir_stmt *ls = find_loop(t, sch_t_loop(t, lp[l]).var);
    if (ls && ls->u.loop.kind == IR_FOR_PARALLEL) par = l;
  }
  if (par < 0) return 0;
  int outer[TILE_MAXL];
  int nouter = par + 1 < TILE_MAXL ? par + 1 : TILE_MAXL;
  memcpy(outer, lp, sizeof(int) * (size_t)nouter);
  const int *prod;
  int np;
  if (sch_t_get_producers(t, b, &prod, &np, &d) != TS_OK) return 0;
  int pb[8], npb = 0;
  for (int i = 0; i < np && npb < 8; i++) pb[npb++] = prod[i];
  int placed_n = 0;
  for (int i = 0; i < npb && placed_n < maxp; i++) {
    const char *pn = sch_t_block(t, pb[i]).name;
    const ir_stmt *pr = find_realize(t, pn);
    const ir_stmt *cr = find_realize(t, name);
    if (!pr || !cr || placed(t, pn) || !transposed_into_tile(t, pb[i], pr->u.realize.block, true)) continue;
    const ir_buffer *buf = pr->u.realize.block->writes[0].buf;
    const ir_block *cb = cr->u.realize.block;
    const ir_region *rg = NULL;
    for (int j = 0; j < cb->nreads && !rg; j++)
      if (cb->reads[j].buf == buf) rg = &cb->reads[j];
    bool distinct = rg != NULL;
    for (int l = 0; l < nouter && distinct; l++) {
      const ir_var *v = sch_t_loop(t, outer[l]).var;
      const ir_stmt *ls = find_loop(t, v);
      int64_t e;
      if (!ls || (ir_as_int(ls->u.loop.extent, &e) && e == 1)) continue;
      distinct = loop_reaches_region(cr, v, rg);
    }
    ts_diag_clear(&d);
    if (!distinct || sch_t_compute_at(t, pb[i], outer[nouter - 1], true, -1, &d) != TS_OK) continue;
    schedule_block(t, pn, tg);
    placed_names[placed_n++] = pn;
  }
  return placed_n;
}

static bool expr_transcendental(void *ctx, const ir_expr *e) {
  if (e->kind == IR_CALL && e->u.call.op != IR_FMA && e->u.call.op != IR_ABS && e->u.call.op != IR_FLOOR &&
      e->u.call.op != IR_CEIL && e->u.call.op != IR_ROUND)
    *(bool *)ctx = true;
  return true;
}

/* Block b (blk its current body, with what was inlined into it so far) calls
 * a transcendental (tanh, erf, exp, pow...) and a reduction that reuses its
 * operands reads it: a GELU in front of GPT-2's projection. Inlined, it
 * would be recomputed for every use of the operand (once per cols block
 * and reduction step); kept, it runs once per element. A reduction reading
 * each element once (a pool, a mean) takes it inlined. */
static bool costly_into_reduction(sch_traced *t, int b, const ir_block *blk) {
  bool costly = false;
  ir_visitor v = {.expr = expr_transcendental, .ctx = &costly};
  ir_visit_stmt(&v, blk->body);
  if (!costly) return false;
  ts_diag d;
  ts_diag_clear(&d);
  const int *cons;
  int nc;
  if (sch_t_get_consumers(t, b, &cons, &nc, &d) != TS_OK) return true;
  for (int i = 0; i < nc; i++) {
    const ir_stmt *r = find_realize(t, sch_t_block(t, cons[i]).name);
    if (r && r->u.realize.block->init && srch_block_has_reuse(r->u.realize.block)) return true;
  }
  return false;
}

/* Whether block name is tensorized or already under a parallel (or other
 * non-serial) loop: the default schedule leaves it as it is. */
static bool placed(sch_traced *t, const char *name) {
  const ir_stmt *r = find_realize(t, name);
  if (!r) return true;
  const ir_block *b = r->u.realize.block;
  if (ir_annot_find(b->nannot, b->annots, "tessel.tensorized")) return true;
  ts_diag q;
  ts_diag_clear(&q);
  int bi, nl;
  const int *lp;
  if (sch_t_get_block(t, name, &bi, &q) || sch_t_get_loops(t, bi, &lp, &nl, &q)) return true;
  for (int l = 0; l < nl; l++) {
    const ir_stmt *ls = find_loop(t, sch_t_loop(t, lp[l]).var);
    if (ls && ls->u.loop.kind != IR_FOR_SERIAL) return true;
  }
  return false;
}

/* The CPU default schedule (build.h). */
/* ---- a long reduction into few outputs: rfactor by vector lanes ----
 *
 * A reduction whose innermost loop reads memory contiguously (a row sum, a
 * norm, the max and sum of a softmax over the last axis) and whose spatial
 * loops give no contiguous vector (a scalar output, or rows read across
 * their stride) ran as one scalar dependence chain: NRM's 65536-element sum
 * of squares took 89 us against 3 us tuned. Split the innermost reduction
 * loop by w (4, 2 or 1 vectors, dividing its extent at least twice) and
 * rfactor at the inner piece: the rf block keeps w partial sums per output
 * in a vector loop over contiguous input, and the write-back block adds the
 * w of them, when the reduction is at least 4w long. The split is a
 * sampled decision the search can mutate. */
static bool idx_unit(stride_ctx *c, int n, ir_expr *const *idx) {
  for (int k = 0; k + 1 < n; k++)
    if (ir_expr_uses_var(idx[k], c->v)) return false;
  int64_t k;
  return n < 1 || !ir_expr_uses_var(idx[n - 1], c->v) || (index_step(c, idx[n - 1], &k) && k == 1);
}

static bool unit_expr(void *ctx, const ir_expr *e) {
  stride_ctx *c = ctx;
  if (e->kind == IR_LOAD && !idx_unit(c, e->u.load.nidx, e->u.load.idx)) c->unit = false;
  return c->unit;
}

static bool unit_stmt(void *ctx, const ir_stmt *s) {
  stride_ctx *c = ctx;
  if (s->kind == IR_STORE && !idx_unit(c, s->u.store.nidx, s->u.store.idx)) c->unit = false;
  return c->unit;
}

/* Does iter var v of b move every access of b's body by 0 or 1 element,
 * in its last index only (a vector over v is contiguous)? */
static bool iter_unit_stride(const ir_block *b, ir_var *v) {
  stride_ctx c = {.unit = true};
  return walk_steps(b, v, (ir_visitor){.expr = unit_expr, .stmt = unit_stmt}, &c) && c.unit;
}

/* The iter var of b bound to exactly loop var lv (none: NULL). */
static int iter_of_loop(const ir_stmt *r, const ir_var *lv) {
  const ir_block *b = r->u.realize.block;
  for (int i = 0; i < b->niter; i++) {
    const ir_expr *e = r->u.realize.iter_values[i];
    if (e->kind == IR_VAR && e->u.var == lv) return i;
  }
  return -1;
}

/* The rf block's name (in a) when block `name` was rfactored; NULL when it
 * is not such a reduction or a step was refused (then nothing changed, or
 * only the split, which schedule_block handles like any loop). */
static const char *rfactor_lanes(sch_traced *t, const char *name, const cg_target *tg, ts_arena *a) {
  ts_diag q;
  ts_diag_clear(&q);
  int b, nl;
  const int *lp;
  if (sch_t_get_block(t, name, &b, &q) || sch_t_get_loops(t, b, &lp, &nl, &q) || nl < 1 || nl > 64) return NULL;
  int loops[64];
  memcpy(loops, lp, sizeof(int) * (size_t)nl);
  const ir_stmt *r = find_realize(t, name);
  if (!r) return NULL;
  const ir_block *blk = r->u.realize.block;
  if (!blk->init || blk->nwrites != 1) return NULL;
  for (int i = 0; i < blk->niter; i++)
    if (blk->iters[i].type != IR_ITER_S && blk->iters[i].type != IR_ITER_R) return NULL;
  /* the innermost loop: a reduction iter of its own, contiguous */
  const ir_stmt *inner = find_loop(t, sch_t_loop(t, loops[nl - 1]).var);
  int ki = inner ? iter_of_loop(r, inner->u.loop.var) : -1;
  int64_t ext, mn;
  if (ki < 0 || blk->iters[ki].type != IR_ITER_R || inner->u.loop.kind != IR_FOR_SERIAL ||
      !ir_as_int(inner->u.loop.extent, &ext) || !ir_as_int(inner->u.loop.min, &mn) || mn != 0 ||
      !iter_unit_stride(blk, blk->iters[ki].var))
    return NULL;
  int lanes = vector_lanes(tg, blk);
  if (!lanes) return NULL;
  /* a spatial loop schedule_block would vectorize well: leave it so */
  for (int l = nl - 1; l >= 0; l--) {
    const ir_stmt *ls = find_loop(t, sch_t_loop(t, loops[l]).var);
    int si = ls ? iter_of_loop(r, ls->u.loop.var) : -1;
    if (si < 0 || blk->iters[si].type != IR_ITER_S) continue;
    int64_t se;
    if (ir_as_int(ls->u.loop.extent, &se) && se >= lanes && iter_unit_stride(blk, blk->iters[si].var)) return NULL;
    break; /* the innermost spatial loop is the one it would take */
  }
  int64_t w = 0;
  for (int m = 4; m >= 1 && !w; m /= 2)
    if (ext % (m * lanes) == 0 && ext / (m * lanes) >= 2) w = m * lanes;
  /* the rf buffer (w per output) at most a quarter of what is summed: a
   * short reduction into many outputs (a matmul with k = 64) would write
   * as much as it reads */
  double reduce = 1;
  for (int i = 0; i < blk->niter; i++) {
    int64_t e;
    if (blk->iters[i].type == IR_ITER_R) reduce *= ir_as_int(blk->iters[i].dom.extent, &e) && e > 0 ? (double)e : 1;
  }
  if (!w || reduce < 4.0 * (double)w) return NULL;
  int64_t dec[2] = {ext / w, w};
  int rv[2], out[2];
  sch_arg f[2] = {sch_arg_int(ext / w), sch_arg_int(w)};
  if (sch_t_sample_perfect_tile(t, loops[nl - 1], 2, 4 * (int64_t)lanes, dec, rv, &q) == TS_OK)
    f[0] = sch_arg_rv(rv[0]), f[1] = sch_arg_rv(rv[1]);
  ts_diag_clear(&q);
  int rf;
  if (sch_t_split(t, loops[nl - 1], 2, f, out, &q) || sch_t_rfactor(t, out[1], -1, &rf, &q)) return NULL;
  return ts_arena_strdup(a, sch_t_block(t, rf).name);
}

static ts_status default_schedule_cpu(sch_traced *t, const cg_target *tg, const tun_default_opts *o, ts_diag *d) {
  /* copied names: the blocks are rewritten as we go */
  ts_arena a;
  ts_arena_init(&a);
  const char **copy;
  size_t n = (size_t)srch_block_names(sch_traced_func(t), &a, &copy);
  if (!copy) {
    ts_arena_fini(&a);
    return ts_diag_set(d, TS_ENOMEM, "out of memory");
  }
  /* no_tiling: the plain per-block schedule only, as before the tiled
   * default (for before/after comparisons) */
  bool tiling = !(o && o->no_tiling);
  /* int8 sums (matmuls, channels-last convs) tensorized with VNNI where
   * the target has it (the search's int8 tiling with fixed tiles); the
   * blocks that adds (shifted / padded copies, column sums) are scheduled
   * below like the others, what sits in the kernel's loops is done */
  bool any8 = false;
  for (size_t i = 0; tiling && i < n; i++) any8 = srch_tensor_default(t, copy[i], tg, o && o->pack_weights) || any8;
  if (any8) {
    n = (size_t)srch_block_names(sch_traced_func(t), &a, &copy);
    if (!copy) {
      ts_arena_fini(&a);
      return ts_diag_set(d, TS_ENOMEM, "out of memory");
    }
  }
  bool *done = TS_ANEWN(&a, bool, n + 1);
  if (!done) {
    ts_arena_fini(&a);
    return ts_diag_set(d, TS_ENOMEM, "out of memory");
  }
  for (size_t i = 0; i < n; i++) done[i] = any8 && placed(t, copy[i]);
  /* elementwise blocks inlined into their consumers (AutoInline; a refused
   * one, e.g. an output, stays; not into a tensorized block; not one
   * writing a buffer the options keep) */
  for (size_t i = 0; tiling && i < n; i++) {
    const ir_stmt *r = done[i] ? NULL : find_realize(t, copy[i]);
    if (r && writes_kept(r->u.realize.block, o)) r = NULL;
    ts_diag q;
    ts_diag_clear(&q);
    int b;
    if (r && inlinable(r->u.realize.block) && !srch_feeds_tensorized(t, copy[i]) &&
        sch_t_get_block(t, copy[i], &b, &q) == TS_OK && !costly_into_reduction(t, b, r->u.realize.block) &&
        !transposed_into_tile(t, b, r->u.realize.block, false) &&
        sch_t_compute_inline(t, b, &q) == TS_OK)
      copy[i] = NULL;
  }
  /* heavy reductions register-tiled; what they absorbed is left alone */
  for (size_t i = 0; i < n; i++) done[i] = done[i] || copy[i] == NULL;
  for (size_t i = 0; i < n; i++)
    if (tiling && !done[i] && tile_block(t, copy[i], tg)) {
      done[i] = true;
      const char *kept[8];
      int nkept = keep_transposed_at(t, copy[i], tg, kept, 8);
      for (int k = 0; k < nkept; k++)
        for (size_t j = 0; j < n; j++)
          if (copy[j] && !strcmp(copy[j], kept[k])) done[j] = true;
      /* blocks now nested under the tiled one's loops are scheduled */
      for (size_t j = 0; j < n; j++) {
        if (done[j]) continue;
        const ir_stmt *r = find_realize(t, copy[j]);
        int bj, nl;
        const int *lp;
        ts_diag q;
        ts_diag_clear(&q);
        if (!r || sch_t_get_block(t, copy[j], &bj, &q) || sch_t_get_loops(t, bj, &lp, &nl, &q)) {
          done[j] = true;
          continue;
        }
        for (int l = 0; l < nl; l++) {
          const ir_stmt *ls = find_loop(t, sch_t_loop(t, lp[l]).var);
          if (ls && ls->u.loop.kind != IR_FOR_SERIAL) done[j] = true;
        }
      }
    }
  for (size_t i = 0; i < n; i++) {
    if (done[i]) continue;
    const char *rf = tiling ? rfactor_lanes(t, copy[i], tg, &a) : NULL;
    if (rf) schedule_block(t, rf, tg);
    schedule_block(t, copy[i], tg);
  }
  ts_arena_fini(&a);
  return TS_OK;
}

static ts_status default_schedule_gpu(sch_traced *t, const cg_target *tg, const tun_default_opts *o, ts_diag *d) {
  (void)o;
  return tun_default_schedule_gpu(t, tg, d);
}

ts_status tun_default_schedule_opts(sch_traced *t, const cg_target *tg, const tun_default_opts *o, ts_diag *d) {
  return tun_device_of(tg)->default_schedule(t, tg, o, d);
}

ts_status tun_default_schedule(sch_traced *t, const cg_target *tg, ts_diag *d) {
  return tun_default_schedule_opts(t, tg, NULL, d);
}

ts_status tun_schedule(const ir_func *f, const char *trace_path, const cg_target *tg, sch_traced **out,
                       ts_diag *d) {
  return tun_schedule_opts(f, trace_path, tg, NULL, out, d);
}

ts_status tun_schedule_opts(const ir_func *f, const char *trace_path, const cg_target *tg,
                            const tun_default_opts *o, sch_traced **out, ts_diag *d) {
  *out = NULL;
  ts_status cs = ir_func_check_sizes(f, d);
  if (cs) return cs;
  if (!trace_path) {
    sch_traced *t = sch_traced_new(f, 1, d);
    if (!t) return d ? d->code : TS_ENOMEM;
    ts_status st = tun_default_schedule_opts(t, tg, o, d);
    if (st) {
      sch_traced_free(t);
      return st;
    }
    *out = t;
    return TS_OK;
  }
  char *text = NULL;
  ts_status st = ts_read_file_as(trace_path, TS_FILE_TRACE, &text, NULL, d);
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

/* The CPU build: lower, then LLVM to a shared library. */
static ts_status build_llvm(const ir_func *scheduled, const cg_target *tg, const char *path, FILE *text,
                            struct json_t *json, ts_diag *d) {
  (void)text;
  (void)json;
  ts_arena a;
  ts_arena_init(&a);
  cg_lowered l;
  ts_status st = cg_check(scheduled, tg, d);
  if (st == TS_OK) st = cg_lower(&a, scheduled, tg, &l, d);
  if (st == TS_OK) st = cg_llvm_build_shared(&l, tg, path, d);
  ts_arena_fini(&a);
  return st;
}

ts_status tun_build_shared(const ir_func *scheduled, const cg_target *tg, const char *path, ts_diag *d) {
  return tun_device_of(tg)->build(scheduled, tg, path, NULL, NULL, d);
}

/* ---- the device table (build.h) ---- */
static void measure_so(const char *path, const tsrt_measure_opts *mo, tsrt_measure_result *res) {
  tsrt_measure_forked(path, mo, res);
}

static const tun_device devices[] = {
    [CG_TARGET_LLVM] = {.name = "cpu",
                        .artifact_ext = "so",
                        .resolve = cg_llvm_resolve_target,
                        .default_schedule = default_schedule_cpu,
                        .build = build_llvm,
                        .measure = measure_so,
                        .thread_pool = true},
    [CG_TARGET_CUDA] = {.name = "cuda",
                        .artifact_ext = "cubin",
                        .kernel_report = true,
                        .default_schedule = default_schedule_gpu,
                        .build = tun_build_cuda_report,
                        .measure = tun_measure_cuda_file,
                        .regcheck = tun_cuda_regcheck},
};

const tun_device *tun_device_of(const cg_target *t) { return &devices[t ? t->kind : CG_TARGET_LLVM]; }

int tun_device_threads(const cg_target *t, int requested, bool remote) {
  if (!tun_device_of(t)->thread_pool) return 0;
  if (requested > 0) return requested;
  return remote ? 0 : tsrt_default_num_threads();
}

ts_status tun_resolve_target(cg_target *t, ts_diag *d) {
  const tun_device *dv = tun_device_of(t);
  return dv->resolve ? dv->resolve(t, d) : TS_OK;
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
