/* targets.c — the search's per-target table (TVM's per-target-kind
 * registries): for each codegen target kind, the sketch rules in
 * application order, the postprocessors in order (each named, like the
 * rules) and the mutator probabilities. srch_space_of picks the row once
 * per call from the target's kind; nothing else in search/ asks which kind
 * a target is. Adding a target is one row here (docs/GPU_SEARCH.md). */
#include <string.h>

#include "search/search_int.h"

/* ---- the rule registry ---- */
static const struct {
  const char *name;
  srch_rule_fn fn;
} rules[SRCH_RULE_COUNT] = {
#define SRCH_X(e, fn, n) [e] = {n, fn},
    SRCH_RULE_LIST(SRCH_X)
#undef SRCH_X
};

srch_rule_fn srch_rule_fn_of(srch_rule r) { return (int)r >= 0 && r < SRCH_RULE_COUNT ? rules[r].fn : NULL; }

const char *srch_rule_name(srch_rule r) { return (int)r >= 0 && r < SRCH_RULE_COUNT ? rules[r].name : "?"; }

int srch_rule_by_name(const char *name) {
  for (int r = 0; name && r < SRCH_RULE_COUNT; r++)
    if (!strcmp(rules[r].name, name)) return r;
  return -1;
}

unsigned srch_rule_mask_without(unsigned rule_mask, srch_rule r) {
  unsigned all = (1u << SRCH_RULE_COUNT) - 1;
  return (rule_mask ? rule_mask : all) & ~(1u << r);
}

/* ---- the rows ---- */
static const srch_rule cpu_rules[] = {
    SRCH_RULE_AUTO_INLINE,
    SRCH_RULE_ADD_RFACTOR,
    SRCH_RULE_MULTI_LEVEL_TILING_TENSOR,
    SRCH_RULE_MULTI_LEVEL_TILING,
    SRCH_RULE_PARALLEL_VECTORIZE_UNROLL,
    SRCH_RULE_RANDOM_COMPUTE_LOCATION,
};

static const srch_postproc cpu_postprocs[] = {
    {"DisallowDynamicLoop", srch_pp_disallow_dynamic_loop},
    {"RewriteParallelVectorizeUnroll", srch_pp_rewrite_parallel_vectorize_unroll},
    {"VerifyRegisterTile", srch_pp_verify_register_tile},
    {"RewriteTensorize", srch_pp_rewrite_tensorize},
    {"RewriteReductionBlock", srch_pp_rewrite_reduction_block},
    {"RewriteLayout", srch_pp_rewrite_layout},
    {"VerifyTarget", srch_pp_verify_target},
};

static const srch_rule gpu_rules[] = {
    SRCH_RULE_GPU_TENSOR_CORE,
    SRCH_RULE_GPU_MULTI_LEVEL_TILING,
    SRCH_RULE_GPU_AUTO_INLINE,
    SRCH_RULE_CROSS_THREAD_REDUCTION,
    SRCH_RULE_GPU_UNROLL,
    SRCH_RULE_AUTO_BIND,
};

static const srch_postproc gpu_postprocs[] = {
    {"DisallowDynamicLoop", srch_pp_disallow_dynamic_loop},
    {"RewriteCooperativeFetch", srch_pp_gpu_cooperative_fetch},
    {"RewriteUnboundBlock", srch_pp_gpu_unbound_block},
    {"RewriteUnroll", srch_pp_gpu_unroll},
    {"RewriteReductionBlock", srch_pp_rewrite_reduction_block},
    {"VerifyGPUCode", srch_pp_gpu_verify},
};

#define ROW(nm, r, pp) \
  .name = nm, .rules = r, .nrules = (int)(sizeof r / sizeof r[0]), .postprocs = pp, \
  .npostprocs = (int)(sizeof pp / sizeof pp[0])
static const srch_space spaces[] = {
    [CG_TARGET_LLVM] = {ROW("llvm", cpu_rules, cpu_postprocs),
                        .mutator_prob = {
#define SRCH_X(en, nm, p) [en] = p,
                            SRCH_MUTATOR_LIST(SRCH_X)
#undef SRCH_X
                        }},
    /* MetaSchedule's CUDA defaults (Mutator::DefaultCUDA) */
    [CG_TARGET_CUDA] = {ROW("cuda", gpu_rules, gpu_postprocs),
                        .mutator_prob = {[SRCH_MUT_TILE_SIZE] = 0.90, [SRCH_MUT_UNROLL] = 0.08,
                                         [SRCH_MUT_THREAD_BINDING] = 0.02}},
};
#undef ROW

const srch_space *srch_space_of(const cg_target *t) { return &spaces[t ? t->kind : CG_TARGET_LLVM]; }

double srch_mutator_prob(srch_mutator m, const cg_target *t) {
  if ((int)m < 0 || m >= SRCH_MUT_COUNT) return 0;
  return srch_space_of(t)->mutator_prob[m];
}

ts_status srch_postprocess_opts(sch_traced *ts, const cg_target *t, const srch_postproc_opts *po, ts_diag *d) {
  static const srch_postproc_opts none = {0};
  const srch_space *sp = srch_space_of(t);
  ts_status st = sch_t_enter_postproc(ts, d);
  for (int i = 0; i < sp->npostprocs && !st; i++) st = sp->postprocs[i].fn(ts, t, po ? po : &none, d);
  return st;
}

ts_status srch_postprocess(sch_traced *ts, const cg_target *t, ts_diag *d) {
  return srch_postprocess_opts(ts, t, NULL, d);
}
