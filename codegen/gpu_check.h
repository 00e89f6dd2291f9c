/* gpu_check.h — what a CUDA device can run: the validity checks that the
 * search's VerifyGPUCode (MetaSchedule's verify_gpu_code.cc) and cg_check
 * apply to a scheduled function before a build is spent on it, kernel by
 * kernel on the lowered form (thread extents, shared memory, vector widths,
 * registers, races on global buffers). No CUDA needed. Errors are
 * TS_EUNSUPPORTED naming the loop, buffer or tag and the limit.
 * docs/GPU_SEARCH.md ("Validity checks"), docs/TUNING.md ("Notes by file:
 * codegen/"). */
#ifndef TESSEL_CODEGEN_GPU_CHECK_H
#define TESSEL_CODEGEN_GPU_CHECK_H

#include "codegen/codegen.h"

typedef struct cg_gpu_limits {
  int max_threads_per_block;    /* 1024 */
  int64_t max_shared_bytes;     /* 48 KiB: static shared memory per block */
  int max_vector_bytes;         /* 16: one 128-bit load or store */
  int max_vthread;              /* 8 (MetaSchedule's VerifyGPUCode) */
  int max_regs_per_thread;      /* 255 */
  int64_t max_regs_per_block;   /* the register file per block: 65536 (32768 on sm_53 / sm_62) */
  int regs_per_thread;          /* from the cubin (cuFuncGetAttribute); 0: unknown, not checked */
  int64_t max_spill_bytes;      /* per thread, ptxas's spill stores (cg_gpu_check_registers);
                                   CG_GPU_MAX_SPILL_BYTES; < 0: not checked */
  int64_t max_local_bytes;      /* per thread, "local" allocations; 0: not checked */
  bool allow_unbound;           /* accept stores outside any thread-bound loop */
  bool global_deps;             /* refuse a kernel reading a global buffer it writes at another index */
} cg_gpu_limits;

/* Spilled bytes per thread a candidate may have (32 registers' worth): a
 * kernel spilling more than its register tile's worth of local memory
 * traffic is not worth measuring. */
#define CG_GPU_MAX_SPILL_BYTES 128

/* The defaults above, allow_unbound false, global_deps true. */
void cg_gpu_limits_default(cg_gpu_limits *l);
/* The limits of a cuda target's compute capability (-arch=sm_XY): 1024
 * threads, 48 KiB static shared memory, 255 registers per thread, and the
 * register file per block — 65536 for every sm_XY from sm_50 on (sm_70+:
 * Volta, Turing, Ampere, Ada, Hopper, Blackwell) except sm_53 and sm_62
 * (32768); a runtime with device properties may raise the shared limit. */
void cg_gpu_limits_for_target(const cg_target *t, cg_gpu_limits *l);

/* What the check measured: the maximum over the kernels. */
typedef struct cg_gpu_usage {
  int nkernels;
  int64_t threads_per_block;   /* product of threadIdx extents */
  int64_t blocks;              /* product of blockIdx extents (-1: symbolic) */
  int64_t vthreads;
  int64_t shared_bytes;
  int64_t local_bytes;         /* per thread */
  int max_vector_bytes;        /* widest vector access seen */
} cg_gpu_usage;

/* Checks scheduled (blocks, thread bindings) against lim (NULL: the
 * defaults). usage (may be NULL) receives the measured figures, also when a
 * limit is exceeded. TS_EUNSUPPORTED with a reason; TS_ENOMEM. */
ts_status cg_gpu_check_usage(const ir_func *scheduled, const cg_gpu_limits *lim, cg_gpu_usage *usage,
                             ts_diag *d);
static inline ts_status cg_gpu_check(const ir_func *scheduled, const cg_gpu_limits *lim, ts_diag *d) {
  return cg_gpu_check_usage(scheduled, lim, NULL, d);
}

#endif
