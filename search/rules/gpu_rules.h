/* gpu_rules.h — internals shared by the GPU design-space rules
 * (rules/gpu_*.c), the GPU postprocessors (postproc_gpu.c) and mutators
 * (mutators_gpu.c): annotation keys, candidate lists and small helpers over
 * a traced schedule. The rules follow MetaSchedule's CUDA defaults
 * (docs/GPU_SEARCH.md). */
#ifndef TESSEL_SEARCH_GPU_RULES_H
#define TESSEL_SEARCH_GPU_RULES_H

#include "search/search_int.h"

/* Block annotation: the vector lanes of a cooperative fetch (an expr RV
 * drawn by SampleCategorical); RewriteCooperativeFetch reads it. TVM puts
 * it on the fused loop; our split refuses annotated loops and there is no
 * unannotate, so the copy block carries it. */
#define SRCH_ANN_COOP_FETCH "meta_schedule.cooperative_fetch"
/* Block annotation written by the tiling rules: the threads-per-block
 * range the tile structure expects (MetaSchedule's thread_extent_low /
 * high_inclusive); VerifyGPUCode checks it. */
#define SRCH_ANN_THREAD_LOW "meta_schedule.thread_extent_low_inclusive"
#define SRCH_ANN_THREAD_HIGH "meta_schedule.thread_extent_high_inclusive"

#define SRCH_GPU_MAX_THREADS 1024
#define SRCH_GPU_MAX_BLOCKS 256 /* AutoBind / RewriteUnboundBlock's max_threadblocks */

/* Is any of the loops of block `name` thread-bound (the block already
 * runs inside a kernel's thread structure)? */
bool srch_gpu_block_bound(sch_traced *t, const char *name);
/* The extent of the threadIdx.x loop around block `name` (0 if none, -1
 * if not constant). */
int64_t srch_gpu_thread_extent(sch_traced *t, const char *name, const char *tag);
/* Binds the leading spatial loops of block `name` (serial, unannotated,
 * carrying no reduction): fuse, split [None, threads] (threads: an int, or
 * an expr RV when rv >= 0), blockIdx.x / threadIdx.x; with bind_threads
 * false only blockIdx.x. A block with no such loop gets a unit loop bound to
 * blockIdx.x. When the fused extent exceeds max_blocks x threads (constant
 * threads only), split [None, max_blocks, threads] and bind the outer two
 * after moving the rest innermost. Refusals leave t as it was up to the
 * failing step; returns whether the block ended up bound. */
bool srch_gpu_bind_block(sch_traced *t, const char *name, bool bind_threads, int64_t threads, int threads_rv,
                         int64_t max_blocks);
/* The leading spatial loops of block name: loop RVs into out (at most cap),
 * their count; *ext gets the product of their constant extents (-1 if one
 * is symbolic). */
int srch_gpu_leading_spatial(sch_traced *t, const char *name, int *out, int cap, int64_t *ext);

/* MultiLevelTilingTensorCore (rules/gpu_tensor_core.c): the operands of a
 * block the WMMA 16x16x16 mma can compute. */
typedef struct tc_shape {
  ir_dtype_code in; /* IR_F16 or IR_BF16 */
  const ir_buffer *A, *B, *C;
  int64_t ext[3]; /* i, j, k */
  int nbatch;     /* 1: a leading batch iter var (bound to blockIdx.z), else 0 */
  bool trans_b;   /* B is read B[j, k] (dense): the trans_b mma, matrix_b col_major */
} tc_shape;
/* Whether block `block` of f gets a tensor-core sketch on target t; if not,
 * why (a sentence) is written to why. out may be NULL. */
bool srch_gpu_tensor_core_check(const ir_func *f, const char *block, const cg_target *t, tc_shape *out,
                                char *why, size_t nwhy);

#endif
