/* gpu_unroll.c — ParallelizeVectorizeUnroll for CUDA: on a GPU only the
 * unroll part applies. The root block of a function with a reduction is
 * annotated meta_schedule.unroll_explicit = SampleCategorical over {0, 16,
 * 64, 512, 1024}; the GPU postprocessor turns it into unroll pragmas on each
 * reduction block's outermost loop. docs/GPU_SEARCH.md ("Design space"). */
#include "search/rules/gpu_rules.h"

ts_status srch_rule_gpu_unroll(const srch_rule_ctx *c, sch_traced *t, const char *block, ts_vec *out,
                               ts_diag *d) {
  (void)c;
  (void)block;
  const ir_stmt *root = sch_traced_func(t)->body;
  if (root && root->kind == IR_BLOCK_REALIZE && srch_func_has_reduction(sch_traced_func(t))) {
    const ir_block *rb = root->u.realize.block;
    if (!ir_annot_find(rb->nannot, rb->annots, SRCH_ANN_UNROLL)) {
      ts_diag q;
      ts_diag_clear(&q);
      int b, v;
      static const int64_t steps[5] = {0, 16, 64, 512, 1024};
      static const double probs[5] = {0.2, 0.2, 0.2, 0.2, 0.2};
      if (sch_t_get_block(t, "root", &b, &q) == TS_OK &&
          sch_t_sample_categorical(t, 5, steps, probs, NULL, &v, &q) == TS_OK)
        sch_t_annotate(t, b, SRCH_ANN_UNROLL, sch_arg_rv(v), &q);
    }
  }
  return srch_push(out, t, d);
}
