/* auto_inline.c — AutoInline for CPU (MetaSchedule's auto_inline.cc):
 * compute_inline of a block into its consumers when legal; in a function with
 * a reduction, blocks with exp, if-then-else, a padding select, a
 * non-identity store or a reordered read (a transpose: MetaSchedule's
 * require_ordered) stay. docs/SEARCH.md ("CPU rules"). */
#include <string.h>

#include "search/search_int.h"

typedef struct scan_ctx {
  bool has_exp, has_if;
} scan_ctx;

static bool load_cb(void *ctx, const ir_expr *e) {
  if (e->kind == IR_LOAD) *(bool *)ctx = true;
  return true;
}

static bool reads_memory(const ir_expr *e) {
  bool r = false;
  ir_visitor v = {.expr = load_cb, .ctx = &r};
  ir_visit_expr(&v, e);
  return r;
}

static bool scan_expr(void *ctx, const ir_expr *e) {
  scan_ctx *c = ctx;
  if (e->kind == IR_CALL && e->u.call.op == IR_EXP) c->has_exp = true;
  if (e->kind == IR_SELECT && (reads_memory(e->u.sel.t) || reads_memory(e->u.sel.f))) c->has_if = true;
  return true;
}

static bool scan_stmt(void *ctx, const ir_stmt *s) {
  scan_ctx *c = ctx;
  if (s->kind == IR_IF) c->has_if = true;
  return true;
}

/* The body is one store whose indices are the iter vars, in order. */
static bool identity_store(const ir_block *b) {
  const ir_stmt *s = b->body;
  if (!s || s->kind != IR_STORE || s->u.store.nidx != b->niter) return false;
  for (int i = 0; i < b->niter; i++) {
    const ir_expr *e = s->u.store.idx[i];
    if (e->kind != IR_VAR || e->u.var != b->iters[i].var) return false;
  }
  return true;
}

/* The position of e in the store of b when e is an iter var of b, or one
 * plus or minus a constant (TVM's AnalyzeVarWithShift); -1 otherwise. */
static int store_pos(const ir_block *b, const ir_expr *e) {
  if ((e->kind == IR_ADD || e->kind == IR_SUB) && e->u.bin.b->kind == IR_INT_IMM) e = e->u.bin.a;
  if (e->kind != IR_VAR) return -1;
  for (int i = 0; i < b->niter; i++)
    if (b->iters[i].var == e->u.var) return i;
  return -1;
}

typedef struct order_ctx {
  const ir_block *b;
  bool reordered;
} order_ctx;

/* A load whose iter-var indices name the store's axes out of their order
 * (X[j, i] stored at [i, j]): the block transposes. */
static bool order_cb(void *ctx, const ir_expr *e) {
  order_ctx *c = ctx;
  if (e->kind != IR_LOAD) return true;
  int last = -1;
  for (int i = 0; i < e->u.load.nidx; i++) {
    int p = store_pos(c->b, e->u.load.idx[i]);
    if (p < 0) continue;
    if (p < last) c->reordered = true;
    last = p;
  }
  return true;
}

/* MetaSchedule's require_ordered (auto_inline.cc, AnalyzeReadWritePattern):
 * a block reading its input in another axis order than it writes is a
 * layout change the consumer's schedule should see as a stage of its own
 * (placed by RandomComputeLocation: a packed tile), not a strided read
 * folded into the consumer's innermost loop. Called for blocks with an
 * identity store. */
static bool reordered_read(const ir_block *b) {
  order_ctx c = {b, false};
  ir_visitor v = {.expr = order_cb, .ctx = &c};
  ir_visit_stmt(&v, b->body);
  return c.reordered;
}

static bool should_inline(const ir_func *f, const ir_block *b) {
  if (b->init) return false;
  if (b->nwrites != 1) return false;
  const ir_annot *dis = ir_annot_find(b->nannot, b->annots, "inline_rule");
  if (dis && dis->kind == IR_ANN_STR && !strcmp(dis->v.s, "disable")) return false;
  if (b->nreads == 0) return true;
  if (!srch_func_has_reduction(f)) return true;
  scan_ctx c = {0};
  ir_visitor v = {.expr = scan_expr, .stmt = scan_stmt, .ctx = &c};
  ir_visit_stmt(&v, b->body);
  if (c.has_exp || c.has_if) return false;
  return identity_store(b) && !reordered_read(b);
}

ts_status srch_rule_auto_inline(const srch_rule_ctx *c, sch_traced *t, const char *block, ts_vec *out,
                                ts_diag *d) {
  (void)c;
  const ir_stmt *r = srch_find_realize(sch_traced_func(t), block);
  /* not into a block to be tensorized (an int8 conv's channels-last copy
   * of its input: inlined, the transposed read would not match) */
  if (r && should_inline(sch_traced_func(t), r->u.realize.block) && !srch_feeds_tensorized(t, block)) {
    /* only into consumers: an output written by no later block stays */
    sch_block sb = {.name = r->u.realize.block->name};
    sch_block *cons;
    int nc = 0;
    ts_diag q;
    ts_diag_clear(&q);
    if (sch_get_consumers(sch_traced_state(t), sb, &cons, &nc, &q) == TS_OK && nc > 0) {
      int b;
      ts_diag_clear(&q);
      if (sch_t_get_block(t, block, &b, &q) == TS_OK) {
        ts_diag_clear(&q);
        sch_t_compute_inline(t, b, &q); /* refused: the state is unchanged */
      }
    }
  }
  return srch_push(out, t, d);
}
