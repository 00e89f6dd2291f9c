/* search_int.h — internals shared by the design-space files (space.c, the
 * rules under rules/, postproc.c): IR lookups over a traced schedule and the
 * rule signature. Not part of the public API (search.h). */
#ifndef TESSEL_SEARCH_INT_H
#define TESSEL_SEARCH_INT_H

#include "search/search.h"

/* Root-block annotation keys written by ParallelizeVectorizeUnroll and read
 * by the RewriteParallelVectorizeUnroll postprocessor. */
#define SRCH_ANN_PARALLEL "meta_schedule.parallel"
#define SRCH_ANN_VECTORIZE "meta_schedule.vectorize"
#define SRCH_ANN_UNROLL "meta_schedule.unroll_explicit"
#define SRCH_ANN_TILING "meta_schedule.tiling_structure"
/* Block annotation AddRFactor puts on a write-back block: RandomComputeLocation
 * then also places its producer (the rf block). */
#define SRCH_ANN_RFACTOR_PRODUCER "meta_schedule.random_compute_producer"
/* Block annotation MultiLevelTilingTensor puts on a blockized intrinsic tile:
 * the intrinsic's name; the RewriteTensorize postprocessor tensorizes it. */
#define SRCH_ANN_AUTO_TENSORIZE "meta_schedule.auto_tensorize"

/* What a rule sees: the unscheduled function, the target and options. */
typedef struct srch_rule_ctx {
  const ir_func *func; /* unscheduled */
  const cg_target *target;
  int num_cores;
  int max_innermost;
  uint64_t seed;
} srch_rule_ctx;

/* A rule applied to one block (by name) of state t. It takes ownership of t
 * and pushes the resulting states (t itself, or forks of it) onto out;
 * returns an error only for OOM-like failures (a refused primitive just
 * leaves the state as it was). */
typedef ts_status (*srch_rule_fn)(const srch_rule_ctx *c, sch_traced *t, const char *block,
                                  ts_vec *out, ts_diag *d);

ts_status srch_rule_auto_inline(const srch_rule_ctx *c, sch_traced *t, const char *block, ts_vec *out,
                                ts_diag *d);
ts_status srch_rule_add_rfactor(const srch_rule_ctx *c, sch_traced *t, const char *block, ts_vec *out,
                                ts_diag *d);
ts_status srch_rule_multi_level_tiling(const srch_rule_ctx *c, sch_traced *t, const char *block,
                                       ts_vec *out, ts_diag *d);
ts_status srch_rule_multi_level_tiling_tensor(const srch_rule_ctx *c, sch_traced *t, const char *block,
                                              ts_vec *out, ts_diag *d);
ts_status srch_rule_parallel_vectorize_unroll(const srch_rule_ctx *c, sch_traced *t, const char *block,
                                              ts_vec *out, ts_diag *d);
ts_status srch_rule_random_compute_location(const srch_rule_ctx *c, sch_traced *t, const char *block,
                                            ts_vec *out, ts_diag *d);

/* The GPU rules (rules/gpu_*.c), in the cuda row's order (targets.c). */
ts_status srch_rule_gpu_tensor_core(const srch_rule_ctx *c, sch_traced *t, const char *block, ts_vec *out,
                                    ts_diag *d);
ts_status srch_rule_gpu_multi_level_tiling(const srch_rule_ctx *c, sch_traced *t, const char *block,
                                           ts_vec *out, ts_diag *d);
ts_status srch_rule_gpu_auto_inline(const srch_rule_ctx *c, sch_traced *t, const char *block, ts_vec *out,
                                    ts_diag *d);
ts_status srch_rule_gpu_cross_thread_reduction(const srch_rule_ctx *c, sch_traced *t, const char *block,
                                               ts_vec *out, ts_diag *d);
ts_status srch_rule_gpu_unroll(const srch_rule_ctx *c, sch_traced *t, const char *block, ts_vec *out,
                               ts_diag *d);
ts_status srch_rule_gpu_auto_bind(const srch_rule_ctx *c, sch_traced *t, const char *block, ts_vec *out,
                                  ts_diag *d);
/* The function of rule r (targets.c; NULL for no such rule). */
srch_rule_fn srch_rule_fn_of(srch_rule r);

/* A postprocessor: runs on the traced schedule after EnterPostproc (in
 * place); an error rejects the candidate with the reason. */
typedef ts_status (*srch_postproc_fn)(sch_traced *ts, const cg_target *t, const srch_postproc_opts *o,
                                      ts_diag *d);
typedef struct srch_postproc {
  const char *name; /* MetaSchedule's name (DisallowDynamicLoop ...) */
  srch_postproc_fn fn;
} srch_postproc;

/* One target kind's row of the search table (targets.c). */
typedef struct srch_space {
  const char *name;
  const srch_rule *rules; /* in application order */
  int nrules;
  const srch_postproc *postprocs; /* in order */
  int npostprocs;
  double mutator_prob[SRCH_MUT_COUNT];
} srch_space;
/* The row of t's kind (llvm's for t == NULL). */
const srch_space *srch_space_of(const cg_target *t);

/* Calls fn on every block of t that still exists when its turn comes (the
 * names are taken first: fn may rewrite the function), stopping at the
 * first error fn returns (postproc.c). */
typedef ts_status (*srch_block_fn)(sch_traced *t, const char *name, const ir_stmt *realize, ts_diag *d);
ts_status srch_each_block(sch_traced *t, srch_block_fn fn, ts_diag *d);

/* The postprocessors (postproc.c; RewriteReductionBlock serves both rows). DisallowDynamicLoop is shared with
 * the cuda row: TS_ESCHEDULE naming the first loop with a non-constant min
 * or extent. VerifyTarget is cg_check. */
ts_status srch_pp_disallow_dynamic_loop(sch_traced *ts, const cg_target *t, const srch_postproc_opts *o,
                                        ts_diag *d);
ts_status srch_pp_rewrite_parallel_vectorize_unroll(sch_traced *ts, const cg_target *t,
                                                    const srch_postproc_opts *o, ts_diag *d);
ts_status srch_pp_rewrite_tensorize(sch_traced *ts, const cg_target *t, const srch_postproc_opts *o, ts_diag *d);
ts_status srch_pp_rewrite_reduction_block(sch_traced *ts, const cg_target *t, const srch_postproc_opts *o,
                                          ts_diag *d);
ts_status srch_pp_rewrite_layout(sch_traced *ts, const cg_target *t, const srch_postproc_opts *o, ts_diag *d);
/* VerifyRegisterTile: refuses a candidate whose "SSRSRS" block keeps more
 * vector accumulators under its innermost reduction loop than the register
 * file less SRCH_TILE_SPARE_REGS (TS_ESCHEDULE naming the block and counts). */
#define SRCH_TILE_SPARE_REGS 3
ts_status srch_pp_verify_register_tile(sch_traced *ts, const cg_target *t, const srch_postproc_opts *o,
                                       ts_diag *d);
ts_status srch_pp_verify_target(sch_traced *ts, const cg_target *t, const srch_postproc_opts *o, ts_diag *d);
/* The cuda postprocessors (postproc_gpu.c). */
ts_status srch_pp_gpu_cooperative_fetch(sch_traced *ts, const cg_target *t, const srch_postproc_opts *o,
                                        ts_diag *d);
ts_status srch_pp_gpu_unbound_block(sch_traced *ts, const cg_target *t, const srch_postproc_opts *o, ts_diag *d);
ts_status srch_pp_gpu_unroll(sch_traced *ts, const cg_target *t, const srch_postproc_opts *o, ts_diag *d);
ts_status srch_pp_gpu_verify(sch_traced *ts, const cg_target *t, const srch_postproc_opts *o, ts_diag *d);
/* A copy of tr with SampleCategorical k redrawn among its other candidates
 * (mutators.c); NULL when none has weight. */
sch_trace *srch_resample_categorical(const sch_trace *tr, int k, ts_rng *rng);
/* The instruction of tr defining RV rv (-1 if none; mutators.c). */
int srch_defining_inst(const sch_trace *tr, int rv);
/* GPU mutators (mutators_gpu.c): thread binding; the cooperative-fetch lane
 * categoricals (instruction indices into out) MutateTileSize also draws
 * from, and one resampled. */
sch_trace *srch_mutate_thread_binding(const sch_trace *tr, ts_rng *rng);
int srch_fetch_lane_candidates(const sch_trace *tr, int *out, int cap);
sch_trace *srch_mutate_fetch_lanes(const sch_trace *tr, int inst, ts_rng *rng);

/* ---- IR helpers (space.c) ---- */
/* The vector span of iter var v in block b: the gcd of the constant divisors
 * d of every floordiv, floormod or div of an expression of v inside the last
 * index of an access of b (a grouped convolution's input channel
 * (o // 32) * 16 + ci: 32); 0 when there is none. A vector loop over v
 * keeps every last index unit-stride or uniform only when its length (and
 * alignment) divides the span; across it the read is a gather. */
int64_t srch_vector_span(const ir_block *b, const ir_var *v);
/* Does any block of f have a reduction iter var? */
bool srch_func_has_reduction(const ir_func *f);
/* The sum over f's blocks (root excluded) of their iteration-domain volumes;
 * a symbolic extent counts as 1e18. */
double srch_func_volume(const ir_func *f);
/* Below this volume a kernel is a few microseconds: the fork and join of a
 * parallel loop can cost more than a second thread saves, so the CPU space
 * also offers it serial (ParallelizeVectorizeUnroll, MutateParallel). */
#define SRCH_SMALL_VOLUME (1 << 19)
/* MetaSchedule's NeedsMultiLevelTiling for block realize r whose nloops
 * loops (vars lv, outer to inner) are all it has; fills iter_of (loop ->
 * iter var index). serial_only: refuse loops that are no longer serial (the
 * GPU rule). At most 32 loops. In search/rules/multi_level_tiling.c. */
bool srch_needs_multi_level_tiling(const ir_func *f, const ir_stmt *r, int nloops, const ir_var **lv,
                                   int *iter_of, bool serial_only);
/* The levels of MultiLevelTiling's "SSRSRS" structure, filled loop by loop
 * with each loop's tile pieces (outer to inner): the k-th piece of a
 * spatial loop goes to the k-th 'S' level, of a reduction loop to the k-th
 * 'R' level. At most 32 loops. In search/rules/multi_level_tiling.c. */
typedef struct srch_tile_levels {
  int at[6][32];
  int n[6];
} srch_tile_levels;
void srch_tile_levels_add(srch_tile_levels *lv, bool spatial, const int *pieces);
/* Appends the pieces level by level, outermost first, at order[no..]; the
 * new count. */
int srch_tile_levels_order(const srch_tile_levels *lv, int *order, int no);
/* The realize of block in t's function when its loops need multi-level
 * tiling (srch_needs_multi_level_tiling on the concrete state), with iter_of
 * and the loop count nl filled; NULL otherwise. */
const ir_stmt *srch_block_needs_tiling(sch_traced *t, const char *block, bool serial_only, int *iter_of,
                                       int *nl);
/* Splits loop into n (at most 5) pieces o, outer to inner, by a sampled
 * perfect tiling whose innermost factor is at most maxin. */
ts_status srch_sample_split(sch_traced *t, int loop, int n, int64_t maxin, int *o, ts_diag *q);
/* The realize of block in t's function, with its loops (outer to inner)
 * from the concrete state in cl and nl; NULL when either is missing. */
const ir_stmt *srch_block_loops(sch_traced *t, const char *block, sch_loop **cl, int *nl);
/* Pushes state t onto a rule's out (on OOM t is freed: TS_ENOMEM). */
ts_status srch_push(ts_vec *out, sch_traced *t, ts_diag *d);
/* A fork of t: a fresh traced schedule of f replaying t's trace with its
 * decisions. NULL on failure (d set). */
sch_traced *srch_fork(const srch_rule_ctx *c, sch_traced *t, ts_diag *d);
/* srch_fork, and block's index in the fork into *b; NULL (nothing kept)
 * when either fails. */
sch_traced *srch_fork_block(const srch_rule_ctx *c, sch_traced *t, const char *block, int *b, ts_diag *d);

#endif
