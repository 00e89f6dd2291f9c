/* gpu_auto_inline.c — AutoInline for CUDA (TVM's CUDA setting): inline into
 * consumers, else into the single complete producer, without the CPU rule's
 * checks on exp, if-then-else and injectivity: on a GPU a recomputed
 * elementwise stage is cheaper than a launch and a round trip through global
 * memory. docs/GPU_SEARCH.md ("Design space"). */
#include <string.h>

#include "search/rules/gpu_rules.h"

static bool candidate(const ir_block *b) {
  if (b->init || b->nwrites != 1) return false;
  if (ir_annot_find(b->nannot, b->annots, SRCH_ANN_TILING)) return false;
  const ir_annot *dis = ir_annot_find(b->nannot, b->annots, "inline_rule");
  if (dis && dis->kind == IR_ANN_STR && !strcmp(dis->v.s, "disable")) return false;
  for (int i = 0; i < b->niter; i++)
    if (b->iters[i].type != IR_ITER_S) return false;
  return true;
}

ts_status srch_rule_gpu_auto_inline(const srch_rule_ctx *c, sch_traced *t, const char *block, ts_vec *out,
                                    ts_diag *d) {
  (void)c;
  const ir_stmt *r = srch_find_realize(sch_traced_func(t), block);
  if (r && candidate(r->u.realize.block) && !srch_gpu_block_bound(t, block)) {
    sch_state *s = sch_traced_state(t);
    sch_block sb = {.name = r->u.realize.block->name};
    ts_diag q;
    ts_diag_clear(&q);
    sch_block *cons, *prods;
    int nc = 0, np = 0, b;
    bool done = false;
    if (sch_get_consumers(s, sb, &cons, &nc, &q) == TS_OK && nc > 0 && sch_t_get_block(t, block, &b, &q) == TS_OK) {
      ts_diag_clear(&q);
      done = sch_t_compute_inline(t, b, &q) == TS_OK;
    }
    ts_diag_clear(&q);
    if (!done && sch_get_producers(s, sb, &prods, &np, &q) == TS_OK && np == 1) {
      const ir_stmt *pr = srch_find_realize(sch_traced_func(t), prods[0].name);
      if (pr && !pr->u.realize.block->init && sch_t_get_block(t, block, &b, &q) == TS_OK) {
        ts_diag_clear(&q);
        sch_t_reverse_compute_inline(t, b, &q); /* refused: unchanged */
      }
    }
  }
  return srch_push(out, t, d);
}
