/* search.h — the schedule search, MetaSchedule style: sketch rules build the
 * design space, postprocessors make candidates concrete and valid, mutators
 * change one decision, and the evolutionary search proposes measurement
 * batches ranked by a cost model. Uses ir, costmodel and codegen's lowering
 * (never LLVM or CUDA). docs/SEARCH.md, docs/GPU_SEARCH.md. */
#ifndef TESSEL_SEARCH_H
#define TESSEL_SEARCH_H

#include "codegen/codegen.h"
#include "costmodel/costmodel.h"
#include "ir/schedule/trace.h"

/* ---- IR lookups (space.c), shared by the rules and the tuner's default
 * schedules ---------------------------------------------------------------- */
/* The realize of block name in f (NULL if none). */
const ir_stmt *srch_find_realize(const ir_func *f, const char *name);
/* The loop statement of loop var v in f (NULL if none). */
const ir_stmt *srch_find_loop(const ir_func *f, const ir_var *v);
/* Block names of f in DFS (program) order, root excluded, copied into a
 * (*out NULL on OOM). */
int srch_block_names(const ir_func *f, ts_arena *a, const char ***out);
/* Is loop var v bound into a non-spatial iter var of any block under s
 * (s: a statement, normally the loop itself)? */
bool srch_loop_is_reduction(const ir_stmt *s, const ir_var *v);
/* Is v used by a non-spatial iter binding of realize r? */
bool srch_realize_uses_in_reduction(const ir_stmt *r, const ir_var *v);
/* Can MultiLevelTiling tile block b: one write, a read, an init, and only
 * spatial and reduction iter vars, at least one of them reduction? */
bool srch_block_is_tileable_reduction(const ir_block *b);
/* The reuse test of NeedsMultiLevelTiling: a non-unit spatial iter var of
 * b that some read (other than of the output) does not use. In
 * search/rules/multi_level_tiling.c. */
bool srch_block_has_reuse(const ir_block *b);
/* iter_of[l] = the iter var of realize r bound to loop var v itself; false
 * when none is, or one of iter_of[0..l) is the same. */
bool srch_bind_loop_iter(const ir_stmt *r, const ir_var *v, int *iter_of, int l);

/* ---- design space ---------------------------------------------------------- */
/* Rule registry: every rule of every target, one bit each in
 * srch_space_opts.rule_mask (the same bit on every target). Which rules a
 * target runs, and in which order, is its row of the space table
 * (search/targets.c): the CPU rules for llvm, MetaSchedule's CUDA defaults
 * for cuda (search/rules/gpu_*.c, docs/GPU_SEARCH.md); a rule the target
 * does not list is never run. X(enum, function (search_int.h), name). */
#define SRCH_RULE_LIST(X)                                                                                  \
  X(SRCH_RULE_AUTO_INLINE, srch_rule_auto_inline, "auto-inline")                                           \
  X(SRCH_RULE_ADD_RFACTOR, srch_rule_add_rfactor, "add-rfactor")                                           \
  X(SRCH_RULE_MULTI_LEVEL_TILING_TENSOR, srch_rule_multi_level_tiling_tensor, "multi-level-tiling-tensor") \
  X(SRCH_RULE_MULTI_LEVEL_TILING, srch_rule_multi_level_tiling, "multi-level-tiling")                      \
  X(SRCH_RULE_PARALLEL_VECTORIZE_UNROLL, srch_rule_parallel_vectorize_unroll, "parallel-vectorize-unroll") \
  X(SRCH_RULE_RANDOM_COMPUTE_LOCATION, srch_rule_random_compute_location, "random-compute-location")       \
  X(SRCH_RULE_GPU_TENSOR_CORE, srch_rule_gpu_tensor_core, "gpu-tensor-core")                               \
  X(SRCH_RULE_GPU_MULTI_LEVEL_TILING, srch_rule_gpu_multi_level_tiling, "gpu-multi-level-tiling")          \
  X(SRCH_RULE_GPU_AUTO_INLINE, srch_rule_gpu_auto_inline, "gpu-auto-inline")                               \
  X(SRCH_RULE_CROSS_THREAD_REDUCTION, srch_rule_gpu_cross_thread_reduction, "cross-thread-reduction")      \
  X(SRCH_RULE_GPU_UNROLL, srch_rule_gpu_unroll, "gpu-unroll")                                              \
  X(SRCH_RULE_AUTO_BIND, srch_rule_gpu_auto_bind, "auto-bind")

typedef enum {
#define SRCH_X(e, fn, n) e,
  SRCH_RULE_LIST(SRCH_X)
#undef SRCH_X
  SRCH_RULE_COUNT
} srch_rule;

/* The rule's name ("auto-inline"), and the rule named name (-1: none). */
const char *srch_rule_name(srch_rule r);
int srch_rule_by_name(const char *name);
/* rule_mask with rule r turned off (a 0 mask means every rule). */
unsigned srch_rule_mask_without(unsigned rule_mask, srch_rule r);

typedef struct srch_space_opts {
  int num_cores;          /* 0: from the target, else sysconf */
  int max_innermost;      /* SamplePerfectTile's innermost bound (64) */
  unsigned rule_mask;     /* bit per srch_rule; 0: all */
} srch_space_opts;

/* The vector registers of t's widest SIMD kind (32 for AVX-512 and
 * AArch64, 16 otherwise). */
int srch_vector_regs(const cg_target *t);
/* Vector registers the accumulator tile of block `name` needs: the product
 * of the loops below its innermost reduction loop, a vectorized loop counted
 * in registers of t's width; 0 when no vectorized loop is there or no
 * reduction loop encloses it. */
int64_t srch_register_tile(sch_traced *t, const char *name, const cg_target *tg);
/* The sketches of f for target t: *out is a heap array of *n traces (free
 * each with sch_trace_free, then ts_free the array). */
ts_status srch_sketches(const ir_func *f, const cg_target *t, const srch_space_opts *o,
                        sch_trace ***out, int *n, ts_diag *d);

/* The default schedule's int8 kernel (tuner/build.c): block of t, an i32
 * sum of 8-bit products (an int8 matmul or channels-last conv) with no
 * symbolic size, gets MultiLevelTilingTensor's preparation (ShiftToUnsigned,
 * with pack the VNNI weight packing of a layout-free weight — the caller
 * must then pack it, as a model build does —, padding) and fixed tiles
 * around the largest VNNI kernel, tensorized and parallel. False when the
 * target has no VNNI or the block is not of that form (t unchanged), or a
 * later step was refused (t then holds the legal schedule built so far). */
bool srch_tensor_default(sch_traced *t, const char *block, const cg_target *tg, bool pack);

/* Whether a consumer of block is to be tensorized (annotated for
 * RewriteTensorize, or tensorized): its producers (an int8 conv's padded,
 * channels-last input) are then neither inlined nor moved into it, where
 * they would no longer match the intrinsic's loads. */
bool srch_feeds_tensorized(sch_traced *t, const char *block);

/* ---- candidates -------------------------------------------------------------- */
/* What the postprocessors may be told (zero: the defaults). */
typedef struct srch_postproc_opts {
  bool no_layout_rewrite; /* skip RewriteLayout (tessel tune --no-layout-rewrite) */
  /* VerifyGPUCode's register check (NULL: off): builds the candidate and
   * checks its kernels' registers and spills. The search cannot build CUDA
   * itself (it must not link the emitter or NVRTC): the tuner installs it
   * (tessel tune --gpu-regcheck; docs/CUDA.md). */
  ts_status (*gpu_regcheck)(const ir_func *scheduled, const cg_target *t, ts_diag *d);
} srch_postproc_opts;

/* Replays a sketch (or any trace) on a fresh schedule of f: resample = true
 * draws every decision afresh from seed (a random candidate); false keeps the
 * trace's decisions. Then runs the postprocessors. NULL when replay or a
 * postprocessor rejects (d says why). */
sch_traced *srch_instantiate(const sch_trace *tr, const ir_func *f, const cg_target *t,
                             bool resample, uint64_t seed, ts_diag *d);
/* srch_instantiate with postprocessor options (NULL: the defaults). */
sch_traced *srch_instantiate_opts(const sch_trace *tr, const ir_func *f, const cg_target *t, bool resample,
                                  uint64_t seed, const srch_postproc_opts *po, ts_diag *d);
/* Runs the postprocessors of t's kind (its row of the space table, in
 * order) on a traced schedule, in place; po may be NULL. */
ts_status srch_postprocess(sch_traced *ts, const cg_target *t, ts_diag *d);
ts_status srch_postprocess_opts(sch_traced *ts, const cg_target *t, const srch_postproc_opts *po, ts_diag *d);

/* ---- mutators ---------------------------------------------------------------- */
#define SRCH_MUTATOR_LIST(X)                                  \
  X(SRCH_MUT_TILE_SIZE, "mutate-tile-size", 0.90)             \
  X(SRCH_MUT_COMPUTE_LOCATION, "mutate-compute-location", 0.05) \
  X(SRCH_MUT_UNROLL, "mutate-unroll", 0.03)                   \
  X(SRCH_MUT_PARALLEL, "mutate-parallel", 0.02)               \
  X(SRCH_MUT_THREAD_BINDING, "mutate-thread-binding", 0.0)

typedef enum {
#define SRCH_X(e, n, p) e,
  SRCH_MUTATOR_LIST(SRCH_X)
#undef SRCH_X
  SRCH_MUT_COUNT
} srch_mutator;

/* Returns a copy of tr with one decision changed by mutator m (NULL if the
 * mutator has nothing to change in tr). The caller replays it. */
sch_trace *srch_mutate(srch_mutator m, const sch_trace *tr, const ir_func *f, ts_rng *rng);
/* The probability of mutator m for target t (its row of the space table,
 * search/targets.c): the list's column for CPU targets; for cuda
 * MetaSchedule's tile size 0.9, unroll 0.08, thread binding 0.02 (the
 * others 0). */
double srch_mutator_prob(srch_mutator m, const cg_target *t);

/* ---- evolutionary search ------------------------------------------------------- */
typedef struct srch_evo_opts {
  int population;          /* 512 */
  double init_measured_ratio; /* 0.2 */
  int init_min_unmeasured; /* 50 */
  int genetic_iters;       /* 4 */
  double mutate_prob;      /* 0.85 */
  double eps_greedy;       /* 0.05 */
  int num_threads;         /* parallel replay; 0 = all cores */
  int first_batch;         /* > 0: the first batch has at most this many candidates
                            * (MetaSchedule: none; docs/COSTMODEL.md) */
  bool no_replay_cache;    /* replay every candidate again (the cache is on by default) */
  srch_space_opts space;   /* the sketches' options (max_innermost 0: 64) */
  srch_postproc_opts postproc;
} srch_evo_opts;
void srch_evo_opts_default(srch_evo_opts *o);

/* A proposed candidate: its trace (owned) and its structural hash. */
typedef struct srch_candidate {
  sch_trace *trace;
  uint64_t hash;     /* ir_struct_hash_func of the scheduled function */
  double score;      /* model prediction */
} srch_candidate;
void srch_candidate_fini(srch_candidate *c);

typedef struct srch_evo srch_evo;

/* A search over f's design space for t (the sketches are generated here). */
srch_evo *srch_evo_new(const ir_func *f, const cg_target *t, const srch_evo_opts *o,
                       uint64_t seed, ts_diag *d);
void srch_evo_free(srch_evo *e);
int srch_evo_num_sketches(const srch_evo *e);
/* Tells the search about a measured candidate (its trace and mean seconds,
 * 1e10 on failure): it joins the measured set (never proposed again) and the
 * seeds of the next generations. */
ts_status srch_evo_notify(srch_evo *e, const sch_trace *tr, uint64_t hash, double mean_secs, ts_diag *d);
/* Proposes up to n candidates, ranked by model m (best first, then the
 * eps-greedy random picks). *out is a heap array the caller frees (with
 * srch_candidate_fini on each). *nout == 0 means the space is exhausted. */
ts_status srch_evo_next_batch(srch_evo *e, cm_model *m, int n, srch_candidate **out, int *nout,
                              ts_diag *d);
/* Cumulative cost of the search so far (thread-seconds summed over the
 * replay pool): replay = srch_instantiate + postprocessing + structural hash
 * + feature extraction of every seed and child (cache hits excluded);
 * predict = cost model predictions; replays/hits count the candidates
 * instantiated and those served from the search's feature cache. */
typedef struct srch_evo_stats {
  double replay_seconds, predict_seconds;
  long replays, cache_hits;
} srch_evo_stats;
void srch_evo_get_stats(const srch_evo *e, srch_evo_stats *s);

#endif
