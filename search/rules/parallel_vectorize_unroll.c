/* parallel_vectorize_unroll.c — ParallelizeVectorizeUnroll for CPU (notes
 * §5): annotates the root block only, with the parallel limit (cores·16),
 * the vectorize limit (64) and, when the function has a reduction, an
 * explicit-unroll step drawn uniformly from {0, 16, 64, 512}. The
 * RewriteParallelVectorizeUnroll postprocessor turns the annotations into
 * loops. Applied once per sketch (at the first block visited). A kernel of
 * under SRCH_SMALL_VOLUME iterations on a multi-core target gets a second,
 * serial sketch (limit 1): at a few microseconds the fork and join can cost
 * more than the second core saves, and only measurement tells. */
#include <string.h>

#include "search/search_int.h"

static bool root_done(sch_traced *t) {
  const ir_stmt *r = sch_traced_func(t)->body;
  if (!r || r->kind != IR_BLOCK_REALIZE) return true;
  const ir_block *b = r->u.realize.block;
  return ir_annot_find(b->nannot, b->annots, SRCH_ANN_PARALLEL) != NULL;
}

static void annotate_root(const srch_rule_ctx *c, sch_traced *t, int64_t par) {
  ts_diag q;
  ts_diag_clear(&q);
  int rb;
  if (sch_t_get_block(t, "root", &rb, &q) != TS_OK) return;
  sch_t_annotate(t, rb, SRCH_ANN_PARALLEL, sch_arg_int(par), &q);
  sch_t_annotate(t, rb, SRCH_ANN_VECTORIZE, sch_arg_int(64), &q);
  if (srch_func_has_reduction(sch_traced_func(t))) {
    static const int64_t steps[4] = {0, 16, 64, 512};
    static const double probs[4] = {0.25, 0.25, 0.25, 0.25};
    int v;
    if (sch_t_sample_categorical(t, 4, steps, probs, NULL, &v, &q) == TS_OK)
      sch_t_annotate(t, rb, SRCH_ANN_UNROLL, sch_arg_rv(v), &q);
  }
}

ts_status srch_rule_parallel_vectorize_unroll(const srch_rule_ctx *c, sch_traced *t, const char *block,
                                              ts_vec *out, ts_diag *d) {
  (void)block;
  if (root_done(t)) return srch_push(out, t, d);
  /* a small kernel also gets a serial sketch (parallel limit 1) */
  sch_traced *serial = NULL;
  if (c->num_cores > 1 && srch_func_volume(c->func) < SRCH_SMALL_VOLUME) {
    ts_diag q;
    ts_diag_clear(&q);
    serial = srch_fork(c, t, &q);
  }
  annotate_root(c, t, (int64_t)c->num_cores * 16);
  ts_status st = srch_push(out, t, d);
  if (serial) {
    annotate_root(c, serial, 1);
    if (st == TS_OK) st = srch_push(out, serial, d);
    else sch_traced_free(serial);
  }
  return st;
}
