/* random_compute_location.c — RandomComputeLocation for CPU (MetaSchedule's
 * random_compute_location.cc): an untiled block with a consumer moves to
 * compute_at(block, SampleComputeLocation(block)); the rf block of an
 * AddRFactor sketch is placed the same way. docs/SEARCH.md ("CPU rules"). */
#include <string.h>

#include "search/search_int.h"

static bool eligible(sch_traced *t, const char *block) {
  const ir_func *f = sch_traced_func(t);
  const ir_stmt *r = srch_find_realize(f, block);
  if (!r) return false;
  const ir_block *b = r->u.realize.block;
  if (ir_annot_find(b->nannot, b->annots, SRCH_ANN_TILING)) return false;
  /* a direct child of root: its outermost loop is a child of the root body */
  const ir_stmt *root = f->body;
  if (root->kind != IR_BLOCK_REALIZE) return false;
  const ir_stmt *body = root->u.realize.block->body;
  int nk = body->kind == IR_SEQ ? body->u.seq.n : 1;
  ir_stmt *const *kids = body->kind == IR_SEQ ? body->u.seq.stmts : (ir_stmt *const *)&root->u.realize.block->body;
  sch_state *s = sch_traced_state(t);
  sch_block sb = {.name = b->name};
  sch_loop *loops;
  int nl;
  ts_diag q;
  ts_diag_clear(&q);
  if (sch_get_loops(s, sb, &loops, &nl, &q)) return false;
  if (nl == 0) return false;
  const ir_stmt *outer = NULL;
  for (int i = 0; i < nk; i++)
    if (kids[i]->kind == IR_FOR && kids[i]->u.loop.var == loops[0].var) outer = kids[i];
  if (!outer) return false;
  sch_block *in;
  int nin;
  if (sch_get_child_blocks_of_loop(s, loops[0], &in, &nin, &q) || nin != 1) return false;
  sch_block *cons;
  int nc;
  if (sch_get_consumers(s, sb, &cons, &nc, &q) || nc == 0) return false;
  /* a producer of a block to be tensorized (an int8 conv's padded input)
   * stays at root: inlined, its select would no longer match the
   * intrinsic's load and RewriteTensorize would reject the candidate */
  return !srch_feeds_tensorized(t, b->name);
}

ts_status srch_rule_random_compute_location(const srch_rule_ctx *c, sch_traced *t, const char *block,
                                            ts_vec *out, ts_diag *d) {
  (void)c;
  if (eligible(t, block)) {
    ts_diag q;
    ts_diag_clear(&q);
    int b, l, prod = -1;
    if (sch_t_get_block(t, block, &b, &q) == TS_OK) {
      const ir_stmt *r = srch_find_realize(sch_traced_func(t), block);
      const ir_block *blk = r ? r->u.realize.block : NULL;
      const int *ps;
      int np;
      if (blk && ir_annot_find(blk->nannot, blk->annots, SRCH_ANN_RFACTOR_PRODUCER) &&
          sch_t_get_producers(t, b, &ps, &np, &q) == TS_OK && np == 1)
        prod = ps[0];
      if (sch_t_sample_compute_location(t, b, NULL, &l, &q) == TS_OK) sch_t_compute_at(t, b, l, true, -1, &q);
      ts_diag_clear(&q);
      if (prod >= 0 && sch_t_sample_compute_location(t, prod, NULL, &l, &q) == TS_OK)
        sch_t_compute_at(t, prod, l, true, -1, &q);
    }
  }
  return srch_push(out, t, d);
}
