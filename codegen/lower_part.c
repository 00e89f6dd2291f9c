/* lower_part.c — loop partitioning of guarded tails (TVM's LoopPartition),
 * the last step of lowering. A register tile over rows that the tile does
 * not divide (a model's symbolic batch*seq, ViT's 197 tokens) is an
 * imperfect split: every row of the tile is guarded, `if v*8 + j < n`, in
 * the hot loop. A loop `for v in (0, E)` whose body holds such guards runs
 * as two loops: the main part [0, floordiv(n, c)) where each guard linear
 * in v is proven true (the analyzer, with the loops inside bound) and
 * dropped (a vectorized loop that had fallen back for a guard per lane is
 * lowered to lanes again), and the tail [floordiv(n, c), E) with the guards
 * kept. A guard that is an && of such tests (a tile split on rows and
 * cols) partitions on each conjunct, each loop dropping its own. Only
 * serial and parallel loops starting at 0 are split, and only when the
 * main part provably fits in E. docs/TUNING.md (cg_lower). */
#include <string.h>

#include "ir/arith/arith.h"
#include "ir/mutator.h"
#include "lower_int.h"

#define PART_MAX_INNER 64

typedef struct part_ctx {
  ts_arena *a;
  ir_analyzer an;
  const ir_var *v; /* the loop being partitioned (drop_pre) */
  int dropped;     /* guards proven true in the main part */
  /* candidate search */
  const ir_var *inner[PART_MAX_INNER];
  int ninner;
  ir_expr *cand; /* floordiv(B, k) of the first guard linear in v */
  int64_t stride; /* its k */
} part_ctx;

static bool is_true_imm(const ir_expr *e) {
  int64_t v;
  return e && ir_as_int(e, &v) && v != 0;
}

/* Loop s with its children walked while its var is bound to its range (the
 * facts the guards inside are proven with); then, when revec is set, a
 * vectorized loop that fell back for a guard per lane and lost the guard
 * is lowered to lanes again. */
static ir_stmt *walk_bound(ir_mutator *m, part_ctx *c, ir_stmt *s, bool revec) {
  int mark = c->an.n;
  if (ir_analyzer_bind(&c->an, s->u.loop.var, s->u.loop.min, s->u.loop.extent) != TS_OK) {
    ir_mutator_fail(m);
    return NULL;
  }
  ir_stmt *r = ir_mutate_stmt_children(m, s);
  if (revec && r && !m->failed && r != s && r->u.loop.kind == IR_FOR_VECTORIZED) {
    ir_stmt *v = NULL;
    if (cg_vectorize_loop(c->a, &c->an, r, &v, NULL) != TS_OK) ir_mutator_fail(m);
    else if (v) r = v;
  }
  ir_analyzer_truncate(&c->an, mark);
  return r;
}

/* ---- the main part: guards on v proven true are dropped -------------------- */

/* cond without its conjuncts on v proven true (NULL: none left; cond
 * itself: none dropped). A tile guarded on two tails (rows and cols both
 * symbolic: attention's scores, `j0*16 + j1 < n && i0*6 + i1 < n`) loses
 * the one of the loop being partitioned here and keeps the other for the
 * loop that partitions it. */
static ir_expr *drop_conjuncts(part_ctx *c, ir_expr *cond, bool *any) {
  if (cond->kind == IR_AND) {
    ir_expr *x = drop_conjuncts(c, cond->u.bin.a, any), *y = drop_conjuncts(c, cond->u.bin.b, any);
    if (x == cond->u.bin.a && y == cond->u.bin.b) return cond;
    if (!x || !y) return x ? x : y;
    ir_expr *r = ir_binop(c->a, IR_AND, x, y);
    return r ? r : cond;
  }
  if (ir_expr_uses_var(cond, c->v) && is_true_imm(ir_simplify(&c->an, cond))) {
    *any = true;
    return NULL;
  }
  return cond;
}

static ir_stmt *drop_pre(ir_mutator *m, ir_stmt *s) {
  part_ctx *c = m->ctx;
  if (s->kind == IR_FOR) return walk_bound(m, c, s, true);
  if (s->kind != IR_IF || s->u.ifs.else_s || !ir_expr_uses_var(s->u.ifs.cond, c->v)) return NULL;
  bool any = false;
  ir_expr *rest = drop_conjuncts(c, s->u.ifs.cond, &any);
  if (!any) return NULL;
  c->dropped++;
  ir_stmt *then_s = ir_mutate_stmt(m, s->u.ifs.then_s);
  if (!rest || !then_s) return then_s;
  ir_stmt *r = ir_if(c->a, rest, then_s, NULL);
  if (!r) ir_mutator_fail(m);
  return r;
}

/* ---- candidates: `x < B` with x linear in v (stride c > 0), B loop-invariant */

static bool uses_inner(const part_ctx *c, const ir_expr *e) {
  for (int i = 0; i < c->ninner; i++)
    if (ir_expr_uses_var(e, c->inner[i])) return true;
  return false;
}

static void find_cond(part_ctx *c, const ir_expr *cond);

static bool find_stmt(void *ctx, const ir_stmt *s) {
  part_ctx *c = ctx;
  if (s->kind == IR_FOR && c->ninner < PART_MAX_INNER) c->inner[c->ninner++] = s->u.loop.var;
  if (c->cand || s->kind != IR_IF || s->u.ifs.else_s) return true;
  find_cond(c, s->u.ifs.cond);
  return true;
}

/* A candidate from guard cond (`x < B`, or a conjunct of an && of guards). */
static void find_cond(part_ctx *c, const ir_expr *cond) {
  if (c->cand) return;
  if (cond->kind == IR_AND) {
    find_cond(c, cond->u.bin.a);
    find_cond(c, cond->u.bin.b);
    return;
  }
  if (cond->kind != IR_LT) return;
  ir_expr *x = cond->u.bin.a, *b = cond->u.bin.b;
  if (!ir_expr_uses_var(x, c->v) || ir_expr_uses_var(b, c->v)) return;
  /* the stride of x in v: x[v := v + 1] - x, a positive constant */
  ir_var_map vm;
  ir_var_map_init(&vm);
  ir_var *v = (ir_var *)c->v;
  ir_expr *v1 = ir_add(c->a, ir_var_ref(c->a, v), ir_int(c->a, v->dtype, 1));
  int64_t k = 0;
  if (v1 && ir_var_map_put(&vm, v, v1) == TS_OK) {
    ir_expr *x1 = ir_subst_expr(c->a, x, &vm);
    ir_expr *dx = x1 ? ir_simplify(&c->an, ir_sub(c->a, x1, x)) : NULL;
    if (dx && ir_as_int(dx, &k) && k > 0) {
      c->cand = ir_floordiv(c->a, b, ir_int(c->a, b->dtype, k));
      c->stride = k;
    }
  }
  ir_var_map_fini(&vm);
}

/* The candidate main extent of loop s, or NULL. Its B may not use a var of
 * a loop inside s (checked after the walk has seen them all). */
static ir_expr *main_extent(part_ctx *c, const ir_stmt *s) {
  c->v = s->u.loop.var;
  c->cand = NULL;
  c->ninner = 0;
  ir_visitor vis = {.stmt = find_stmt, .ctx = c};
  ir_visit_stmt(&vis, s->u.loop.body);
  if (!c->cand || c->ninner == PART_MAX_INNER || uses_inner(c, c->cand)) return NULL;
  return ir_simplify(&c->an, c->cand);
}

/* ---- the partition ---------------------------------------------------------- */

static ir_stmt *part_stmt(part_ctx *c, ir_stmt *s, bool *failed);

/* Loop s as main + tail, or NULL when it does not partition. */
static ir_stmt *partition(part_ctx *c, ir_stmt *s, bool *failed) {
  int64_t mn;
  if ((s->u.loop.kind != IR_FOR_SERIAL && s->u.loop.kind != IR_FOR_PARALLEL) || !ir_as_int(s->u.loop.min, &mn) ||
      mn != 0)
    return NULL;
  ir_expr *n = main_extent(c, s), *e = s->u.loop.extent;
  int64_t nv;
  if (!n || (ir_as_int(n, &nv) && nv <= 0)) return NULL;
  /* the main part fits: n <= E, proven as k·n <= k·E (k·floordiv(B, k) is
   * B - floormod(B, k) to the prover, and E is usually ceildiv(B, k)) */
  ir_expr *k = ir_int(c->a, n->dtype, c->stride);
  ir_expr *fits = ir_binop(c->a, IR_LE, ir_mul(c->a, n, k), ir_mul(c->a, e, k));
  if (!fits || !ir_can_prove(&c->an, fits)) return NULL;
  int mark = c->an.n;
  if (ir_analyzer_bind(&c->an, s->u.loop.var, ir_int(c->a, n->dtype, 0), n) != TS_OK) return NULL;
  c->v = s->u.loop.var;
  c->dropped = 0;
  static const ir_mutator_hooks h = {.pre_stmt = drop_pre};
  ir_stmt *body = ir_rewrite_stmt(c->a, &h, c, s->u.loop.body, failed);
  ir_analyzer_truncate(&c->an, mark);
  if (*failed || !body || c->dropped == 0) return NULL;
  /* the tail: its own var, starting at n */
  ir_var *tv = ir_var_new(c->a, s->u.loop.var->name, s->u.loop.var->dtype);
  ir_var_map vm;
  ir_var_map_init(&vm);
  ir_stmt *tail_body = NULL;
  if (tv && ir_var_map_put(&vm, s->u.loop.var, ir_var_ref(c->a, tv)) == TS_OK)
    tail_body = ir_subst_stmt(c->a, s->u.loop.body, &vm);
  ir_var_map_fini(&vm);
  ir_expr *tail_ext = ir_simplify(&c->an, ir_sub(c->a, e, n));
  if (!tail_body || !tail_ext) {
    *failed = true;
    return NULL;
  }
  ir_stmt *main = ir_for(c->a, s->u.loop.var, s->u.loop.min, n, s->u.loop.kind, part_stmt(c, body, failed));
  ir_stmt *tail = ir_for(c->a, tv, n, tail_ext, s->u.loop.kind, part_stmt(c, tail_body, failed));
  if (!main || !tail) {
    *failed = true;
    return NULL;
  }
  main->u.loop.nannot = tail->u.loop.nannot = s->u.loop.nannot;
  main->u.loop.annots = tail->u.loop.annots = s->u.loop.annots;
  ir_stmt *two[2] = {main, tail};
  return ir_seq(c->a, 2, two);
}

static ir_stmt *part_pre(ir_mutator *m, ir_stmt *s) {
  part_ctx *c = m->ctx;
  if (s->kind != IR_FOR) return NULL;
  bool failed = false;
  ir_stmt *r = partition(c, s, &failed);
  if (failed) {
    ir_mutator_fail(m);
    return NULL;
  }
  return r ? r : walk_bound(m, c, s, false); /* not partitioned: on to the loops inside */
}

static ir_stmt *part_stmt(part_ctx *c, ir_stmt *s, bool *failed) {
  static const ir_mutator_hooks h = {.pre_stmt = part_pre};
  return ir_rewrite_stmt(c->a, &h, c, s, failed);
}

ir_stmt *cg_partition_tails(ts_arena *a, ir_stmt *body) {
  part_ctx c;
  memset(&c, 0, sizeof c);
  c.a = a;
  ir_analyzer_init(&c.an, a);
  bool failed = false;
  ir_stmt *r = part_stmt(&c, body, &failed);
  ir_analyzer_fini(&c.an);
  return failed || !r ? body : r;
}
