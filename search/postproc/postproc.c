/* postproc.c — the CPU postprocessors (the llvm row of search/targets.c
 * lists them in order): DisallowDynamicLoop, RewriteParallelVectorizeUnroll,
 * RewriteTensorize, RewriteReductionBlock, RewriteLayout, then VerifyTarget
 * (cg_check). They run on the traced schedule after an EnterPostproc
 * instruction, so the candidate's trace replays to the exact schedule. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/schedule/layout.h"
#include "search/search_int.h"

#define MAXL 64

/* ---- DisallowDynamicLoop ---- */
typedef struct dyn_ctx {
  const ir_stmt *bad;
} dyn_ctx;

static bool dyn_cb(void *ctx, const ir_stmt *s) {
  dyn_ctx *c = ctx;
  int64_t e;
  if (s->kind == IR_FOR && !c->bad && (!ir_as_int(s->u.loop.extent, &e) || !ir_as_int(s->u.loop.min, &e)))
    c->bad = s;
  return !c->bad;
}

ts_status srch_pp_disallow_dynamic_loop(sch_traced *t, const cg_target *tg, const srch_postproc_opts *o,
                                        ts_diag *d) {
  (void)tg;
  (void)o;
  dyn_ctx c = {0};
  ir_visitor v = {.stmt = dyn_cb, .ctx = &c};
  ir_visit_stmt(&v, sch_traced_func(t)->body);
  if (c.bad)
    return ts_diag_set(d, TS_ESCHEDULE, "DisallowDynamicLoop: loop %s has a non-constant extent",
                       c.bad->u.loop.var->name);
  return TS_OK;
}

/* ---- RewriteParallelVectorizeUnroll ---- */
static int64_t root_ann(const ir_func *f, const char *key) {
  const ir_stmt *r = f->body;
  if (!r || r->kind != IR_BLOCK_REALIZE) return 0;
  const ir_block *b = r->u.realize.block;
  const ir_annot *a = ir_annot_find(b->nannot, b->annots, key);
  if (!a) return 0;
  if (a->kind == IR_ANN_INT) return a->v.i;
  int64_t v;
  if (a->kind == IR_ANN_EXPR && ir_as_int(a->v.e, &v)) return v;
  return 0;
}

/* Per access of block b: does iter var v appear only in the last index? */
typedef struct contig_ctx {
  const ir_var *v;
  bool ok;
} contig_ctx;

static bool idx_ok(contig_ctx *c, int n, ir_expr *const *idx) {
  for (int k = 0; k + 1 < n; k++)
    if (ir_expr_uses_var(idx[k], c->v)) return false;
  return true;
}

static bool contig_expr(void *ctx, const ir_expr *e) {
  contig_ctx *c = ctx;
  if (e->kind == IR_LOAD && !idx_ok(c, e->u.load.nidx, e->u.load.idx)) c->ok = false;
  return c->ok;
}

static bool contig_stmt(void *ctx, const ir_stmt *s) {
  contig_ctx *c = ctx;
  if (s->kind == IR_STORE && !idx_ok(c, s->u.store.nidx, s->u.store.idx)) c->ok = false;
  return c->ok;
}

/* Loop var lv is contiguous for every buffer of realize r: each iter var
 * bound to an expression of lv is used only in last indices, and a vector of
 * len lanes over it stays within their vector span (srch_vector_span: one
 * group of a grouped convolution; across it the read is a gather). */
static bool loop_contiguous(const ir_stmt *r, const ir_var *lv, int64_t len) {
  const ir_block *b = r->u.realize.block;
  for (int i = 0; i < b->niter; i++) {
    if (!ir_expr_uses_var(r->u.realize.iter_values[i], lv)) continue;
    contig_ctx c = {.v = b->iters[i].var, .ok = true};
    ir_visitor v = {.expr = contig_expr, .stmt = contig_stmt, .ctx = &c};
    ir_visit_stmt(&v, b->body);
    if (b->init) ir_visit_stmt(&v, b->init);
    if (!c.ok) return false;
    int64_t span = srch_vector_span(b, b->iters[i].var);
    if (span && span % len) return false;
  }
  return true;
}

static bool single_child(const ir_stmt *l) {
  const ir_stmt *b = l->u.loop.body;
  return b->kind == IR_FOR || b->kind == IR_BLOCK_REALIZE;
}

static ts_status rewrite_block_pvu(sch_traced *t, const char *name, int64_t par, int64_t vec, int64_t unroll,
                                   ts_diag *d) {
  ts_diag q;
  ts_diag_clear(&q);
  int b, nl;
  const int *lp;
  if (sch_t_get_block(t, name, &b, &q) || sch_t_get_loops(t, b, &lp, &nl, &q)) return TS_OK;
  if (nl == 0 || nl > MAXL) return TS_OK;
  int loops[MAXL];
  memcpy(loops, lp, sizeof(int) * (size_t)nl);
  const ir_func *f = sch_traced_func(t);
  const ir_stmt *r = srch_find_realize(f, name);
  if (!r) return TS_OK;
  const ir_stmt *ls[MAXL];
  int64_t ext[MAXL];
  bool spatial[MAXL], plain[MAXL];
  for (int i = 0; i < nl; i++) {
    ls[i] = srch_find_loop(f, sch_t_loop(t, loops[i]).var);
    if (!ls[i]) return TS_OK;
    plain[i] = ls[i]->u.loop.kind == IR_FOR_SERIAL && ls[i]->u.loop.nannot == 0 &&
               ir_as_int(ls[i]->u.loop.extent, &ext[i]);
    spatial[i] = !srch_loop_is_reduction(ls[i], ls[i]->u.loop.var);
  }
  /* vectorize: trailing spatial single-child contiguous loops, product <= vec */
  int vfirst = nl;
  int64_t vprod = 1;
  if (vec > 1) {
    for (int i = nl - 1; i >= 0; i--) {
      if (!plain[i] || !spatial[i] || !single_child(ls[i]) || !loop_contiguous(r, ls[i]->u.loop.var, vprod * ext[i]))
        break;
      if (vprod * ext[i] > vec) break;
      vprod *= ext[i];
      vfirst = i;
    }
  }
  /* parallel: leading spatial loops, up to the one passing the limit */
  int pend = 0;
  int64_t pprod = 1;
  if (par > 1) {
    for (int i = 0; i < vfirst; i++) {
      if (!plain[i] || !spatial[i]) break;
      pprod *= ext[i];
      pend = i + 1;
      if (pprod >= par || !single_child(ls[i])) break;
    }
  }
  if (vfirst < nl && vprod > 1) {
    int v = loops[vfirst];
    ts_diag_clear(&q);
    if (nl - vfirst == 1 || sch_t_fuse(t, nl - vfirst, loops + vfirst, &v, &q) == TS_OK) {
      ts_diag_clear(&q);
      sch_t_vectorize(t, v, &q);
    }
  }
  if (pend > 0 && pprod > 1) {
    int p = loops[0];
    ts_diag_clear(&q);
    if (pend == 1 || sch_t_fuse(t, pend, loops, &p, &q) == TS_OK) {
      ts_diag_clear(&q);
      sch_t_parallel(t, p, &q);
    }
  }
  /* unroll: the outermost loop of a non-spatial block */
  if (unroll > 0) {
    const ir_block *blk = r->u.realize.block;
    bool red = false;
    for (int i = 0; i < blk->niter; i++)
      if (blk->iters[i].type != IR_ITER_S) red = true;
    if (red) {
      const int *l2;
      int n2;
      ts_diag_clear(&q);
      if (sch_t_get_loops(t, b, &l2, &n2, &q) == TS_OK && n2 > 0) {
        int outer = l2[0];
        sch_t_annotate(t, outer, "pragma_auto_unroll_max_step", sch_arg_int(unroll), &q);
        sch_t_annotate(t, outer, "pragma_unroll_explicit", sch_arg_int(1), &q);
      }
    }
  }
  (void)d;
  return TS_OK;
}

ts_status srch_pp_rewrite_parallel_vectorize_unroll(sch_traced *t, const cg_target *tg,
                                                    const srch_postproc_opts *o, ts_diag *d) {
  (void)o;
  const ir_func *f = sch_traced_func(t);
  int64_t par = root_ann(f, SRCH_ANN_PARALLEL), vec = root_ann(f, SRCH_ANN_VECTORIZE),
          unroll = root_ann(f, SRCH_ANN_UNROLL);
  (void)tg;
  if (par <= 0 && vec <= 0 && unroll <= 0) return TS_OK;
  ts_diag q;
  ts_diag_clear(&q);
  int rb, nb;
  const int *bl;
  if (sch_t_get_block(t, "root", &rb, &q) || sch_t_get_child_blocks(t, rb, &bl, &nb, &q)) return TS_OK;
  ts_arena a;
  ts_arena_init(&a);
  const char **names = TS_ANEWN(&a, const char *, nb + 1);
  if (!names) {
    ts_arena_fini(&a);
    return ts_diag_set(d, TS_ENOMEM, "out of memory");
  }
  for (int i = 0; i < nb; i++) names[i] = ts_arena_strdup(&a, sch_t_block(t, bl[i]).name);
  ts_status st = TS_OK;
  for (int i = 0; i < nb && !st; i++) st = rewrite_block_pvu(t, names[i], par, vec, unroll, d);
  ts_arena_fini(&a);
  return st;
}

/* ---- the walk over blocks ---- */
ts_status srch_each_block(sch_traced *t, srch_block_fn fn, ts_diag *d) {
  ts_arena a;
  ts_arena_init(&a);
  const char **names;
  int n = srch_block_names(sch_traced_func(t), &a, &names);
  ts_status st = n > 0 && !names ? ts_diag_set(d, TS_ENOMEM, "out of memory") : TS_OK;
  for (int i = 0; i < n && !st; i++) {
    const ir_stmt *r = srch_find_realize(sch_traced_func(t), names[i]);
    if (r) st = fn(t, names[i], r, d);
  }
  ts_arena_fini(&a);
  return st;
}

/* ---- RewriteTensorize ----
 * Tensorizes every block MultiLevelTilingTensor annotated with an intrinsic
 * (SRCH_ANN_AUTO_TENSORIZE); a refusal rejects the candidate with the
 * reason. Runs before RewriteReductionBlock, which then splits the
 * tensorized block's init out of its reduction loops. */
static ts_status tensorize_block(sch_traced *t, const char *name, const ir_stmt *r, ts_diag *d) {
  const ir_block *blk = r->u.realize.block;
  const ir_annot *an = ir_annot_find(blk->nannot, blk->annots, SRCH_ANN_AUTO_TENSORIZE);
  if (!an || an->kind != IR_ANN_STR || ir_annot_find(blk->nannot, blk->annots, "tessel.tensorized")) return TS_OK;
  char intrin[256];
  snprintf(intrin, sizeof intrin, "%s", an->v.s);
  ts_diag q;
  ts_diag_clear(&q);
  int b;
  if (sch_t_get_block(t, name, &b, &q) || sch_t_tensorize(t, b, intrin, &q))
    return ts_diag_set(d, TS_ESCHEDULE, "RewriteTensorize: %s", q.msg);
  return TS_OK;
}

ts_status srch_pp_rewrite_tensorize(sch_traced *t, const cg_target *tg, const srch_postproc_opts *o, ts_diag *d) {
  return srch_each_block(t, tensorize_block, d);
}

/* ---- RewriteReductionBlock ----
 * decompose_reduction at the outermost reduction loop of every block with
 * an init. On a GPU that may be a cross-thread reduction's threadIdx loop
 * (TVM skips those blocks and lowers their init in
 * LowerCrossThreadReduction): the init then runs before the threads' loop;
 * over fused loops (pooling windows) the primitive can refuse there, and
 * the init stays in the block, which is still right. */
static ts_status reduction_block(sch_traced *t, const char *name, const ir_stmt *r, ts_diag *d) {
  if (!r->u.realize.block->init) return TS_OK;
  ts_diag q;
  ts_diag_clear(&q);
  int b, nl;
  const int *lp;
  if (sch_t_get_block(t, name, &b, &q) || sch_t_get_loops(t, b, &lp, &nl, &q)) return TS_OK;
  for (int k = 0; k < nl; k++) {
    if (!srch_realize_uses_in_reduction(r, sch_t_loop(t, lp[k]).var)) continue;
    const ir_stmt *l = srch_find_loop(sch_traced_func(t), sch_t_loop(t, lp[k]).var);
    bool bound = l && l->u.loop.kind == IR_FOR_THREAD_BINDING;
    int init;
    if (sch_t_decompose_reduction(t, b, lp[k], &init, &q) && !bound)
      return ts_diag_set(d, TS_ESCHEDULE, "RewriteReductionBlock: %s", q.msg);
    break;
  }
  return TS_OK;
}

ts_status srch_pp_rewrite_reduction_block(sch_traced *t, const cg_target *tg, const srch_postproc_opts *o,
                                          ts_diag *d) {
  return srch_each_block(t, reduction_block, d);
}

/* ---- VerifyRegisterTile ----
 * The accumulator tile of a block MultiLevelTiling tiled (annotation
 * "SSRSRS" or "SSRRS") is what runs under its innermost reduction loop: the spatial
 * loops below that loop, the vectorized one counted in vector registers.
 * LLVM keeps it in registers across the reduction only while it fits with
 * the operands of one step (a broadcast input and a weight vector or two);
 * a larger tile spills every accumulator on every step (measured on the
 * channel-blocked convolutions: 14 ymm accumulators with two weight vectors
 * spill on AVX2, and such candidates run at a quarter of the 8- and
 * 12-accumulator ones). A candidate whose tile needs more than the vector
 * register file less SRCH_TILE_SPARE_REGS is refused, so the search spends
 * no measurements on it. Blocks without a vectorized innermost loop (scalar
 * accumulators) are not checked. docs/SEARCH.md ("CPU postprocessors"). */
int srch_vector_regs(const cg_target *t) {
  int bits = t && t->vector_bits ? t->vector_bits : 128;
  /* AVX-512: 32 zmm; AArch64 NEON/SVE: 32; SSE/AVX/AVX2: 16 */
  bool arm = t && (strstr(t->triple, "aarch64") || strstr(t->triple, "arm"));
  return bits >= 512 || arm ? 32 : 16;
}

int64_t srch_register_tile(sch_traced *t, const char *name, const cg_target *tg) {
  ts_diag q;
  ts_diag_clear(&q);
  int b, nl;
  const int *lp;
  if (sch_t_get_block(t, name, &b, &q) || sch_t_get_loops(t, b, &lp, &nl, &q)) return 0;
  const ir_func *f = sch_traced_func(t);
  const ir_stmt *r = srch_find_realize(f, name);
  if (!r) return 0;
  int bits = ir_dtype_bits(r->u.realize.block->writes[0].buf->dtype);
  int vbits = tg && tg->vector_bits ? tg->vector_bits : 128;
  int64_t regs = 1;
  bool vec = false;
  for (int k = nl - 1; k >= 0; k--) {
    const ir_stmt *l = srch_find_loop(f, sch_t_loop(t, lp[k]).var);
    int64_t ext;
    if (!l || !ir_as_int(l->u.loop.extent, &ext)) return 0;
    if (srch_realize_uses_in_reduction(r, l->u.loop.var)) return vec ? regs : 0;
    if (l->u.loop.kind == IR_FOR_VECTORIZED) {
      vec = true;
      int64_t per = bits > 0 && bits < vbits ? vbits / bits : 1;
      regs *= (ext + per - 1) / per;
    } else {
      regs *= ext;
    }
  }
  return 0; /* no reduction loop: nothing accumulates across loops */
}

static ts_status register_tile_block(sch_traced *t, const char *name, const ir_stmt *r, const cg_target *tg,
                                     ts_diag *d) {
  const ir_block *blk = r->u.realize.block;
  const ir_annot *an = ir_annot_find(blk->nannot, blk->annots, SRCH_ANN_TILING);
  if (!an || an->kind != IR_ANN_STR || (strcmp(an->v.s, "SSRSRS") && strcmp(an->v.s, "SSRRS")) || !blk->init)
    return TS_OK;
  int64_t regs = srch_register_tile(t, name, tg);
  int budget = srch_vector_regs(tg) - SRCH_TILE_SPARE_REGS;
  if (regs > budget)
    return ts_diag_set(d, TS_ESCHEDULE,
                       "VerifyRegisterTile: block %s keeps %" PRId64 " vector accumulators under its innermost "
                       "reduction loop, more than the %d a %d-register file leaves",
                       name, regs, budget, srch_vector_regs(tg));
  return TS_OK;
}

ts_status srch_pp_verify_register_tile(sch_traced *t, const cg_target *tg, const srch_postproc_opts *o,
                                       ts_diag *d) {
  (void)o;
  ts_arena a;
  ts_arena_init(&a);
  const char **names;
  int n = srch_block_names(sch_traced_func(t), &a, &names);
  ts_status st = n > 0 && !names ? ts_diag_set(d, TS_ENOMEM, "out of memory") : TS_OK;
  for (int i = 0; i < n && !st; i++) {
    const ir_stmt *r = srch_find_realize(sch_traced_func(t), names[i]);
    if (r) st = register_tile_block(t, names[i], r, tg, d);
  }
  ts_arena_fini(&a);
  return st;
}

/* ---- RewriteLayout ----
 * MetaSchedule's RewriteLayout (Ansor's layout rewrite of
 * layout_free_placeholders): every input the function marks layout-free
 * (IR_FUNC_ANN_LAYOUT_FREE: fed by a model's constant) is re-laid, through a
 * traced TransformLayout, into the order its reading block's loop nest walks
 * it (sch_layout_suggest; docs/LAYOUT.md). Where the map is refused (two
 * reader blocks, a guarded split, non-quasi-affine reads) or is the identity,
 * the layout stays; TESSEL_DEBUG containing "layout" prints why. Off with
 * o->no_layout_rewrite (tessel tune --no-layout-rewrite). Runs last, after RewriteReductionBlock, so the
 * map follows the final loop nest. */
ts_status srch_pp_rewrite_layout(sch_traced *t, const cg_target *tg, const srch_postproc_opts *o, ts_diag *d) {
  (void)tg;
  const ir_func *f = sch_traced_func(t);
  const ir_annot *lf = ir_annot_find(f->nannot, f->annots, IR_FUNC_ANN_LAYOUT_FREE);
  if (!lf || lf->kind != IR_ANN_INT || !lf->v.i || o->no_layout_rewrite) return TS_OK;
  bool say = ts_debug("layout");
  int64_t mask = lf->v.i;
  for (int p = 0; p < f->ninputs && p < 63; p++) {
    if (!(mask >> p & 1)) continue;
    sch_layout_map m;
    ts_diag q;
    ts_diag_clear(&q);
    ts_status st = sch_layout_suggest(sch_traced_func(t), p, &m, &q);
    if (!st && sch_layout_is_identity(&m)) continue;
    if (!st) st = sch_t_transform_layout(t, &m, &q);
    if (st == TS_ENOMEM) return ts_diag_set(d, st, "RewriteLayout: %s", q.msg);
    if (say) {
      char buf[256];
      if (!st) sch_layout_str(&m, sch_traced_func(t)->params[p]->name, buf, sizeof buf);
      fprintf(stderr, "RewriteLayout: %s\n", st ? q.msg : buf);
    }
  }
  return TS_OK;
}

/* ---- VerifyTarget: cg_check ---- */
ts_status srch_pp_verify_target(sch_traced *ts, const cg_target *t, const srch_postproc_opts *o, ts_diag *d) {
  (void)o;
  if (!t) return TS_OK;
  ts_diag q;
  ts_diag_clear(&q);
  if (cg_check(sch_traced_func(ts), t, &q)) return ts_diag_set(d, q.code, "cg_check: %s", q.msg);
  return TS_OK;
}
