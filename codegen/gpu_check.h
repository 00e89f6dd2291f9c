/* gpu_check.h — what a CUDA device can run: the validity checks the search's
 * postprocessors (VerifyGPUCode, MetaSchedule's verify_gpu_code.cc) and
 * cg_check apply to a scheduled function before a build is spent on it.
 * No CUDA is needed: the function is lowered for cuda (codegen.h) and the
 * lowered form is measured kernel by kernel.
 *
 * A *kernel* is one top-level loop nest of the lowered body (below its
 * sequences and top-level allocations), as cuda.c emits one launch per nest
 * (TVM's SplitHostDevice). Per kernel the checks are:
 *  - every thread tag is bound with one extent: the same tag on two loops of
 *    a kernel (siblings, or a cooperative fetch nested in its block's own
 *    threadIdx loop) must have the same extent; threadIdx and vthread
 *    extents must be constants (blockIdx extents may be symbolic: the grid
 *    is computed at launch);
 *  - threads per block = the product of the threadIdx.{x,y,z} extents
 *    <= max_threads_per_block; vthread extents multiply to <= max_vthread;
 *  - shared memory per block = the sum of the (compacted, by lowering)
 *    "shared" allocations inside the kernel plus those enclosing it
 *    <= max_shared_bytes; a shared allocation of non-constant size is refused;
 *  - vector accesses: a widened load or store of lanes x elem_bytes over
 *    max_vector_bytes (16: float4, 8 x half) is refused, and so is a
 *    vectorized loop left as a loop whose extent times the widest element
 *    stored in it exceeds that;
 *  - no parallel loops (cuda has no CPU thread pool);
 *  - registers, when known from the cubin (regs_per_thread > 0):
 *    regs_per_thread <= max_regs_per_thread and regs x threads <=
 *    max_regs_per_block (cg_gpu_check_registers below does this per kernel
 *    from a compiled module, with spills);
 *  - with global_deps, a kernel that stores to a global buffer and loads it
 *    at an index expression other than the store's is refused: the element
 *    may be written by another thread or block of the same launch and
 *    nothing orders them (no grid-wide barrier). The test is conservative (a
 *    thread reading back its own element through another loop variable is
 *    refused too), so cg_check leaves it off and the search turns it on;
 *  - unless allow_unbound, a store outside every thread-bound loop is
 *    refused: cuda.c would run it on a single GPU thread, which the search
 *    never wants (RewriteUnboundBlock binds every block); cg_check allows it.
 * Errors are TS_EUNSUPPORTED naming the loop, buffer or tag and the limit;
 * a function that does not lower reports the lowering's error. */
#ifndef TESSEL_CODEGEN_GPU_CHECK_H
#define TESSEL_CODEGEN_GPU_CHECK_H

#include "codegen/codegen.h"
#include "codegen/cuda.h"

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

/* The register check of a compiled module: for each kernel of m (its
 * threads per block from the launch) the registers and spills NVRTC's cubin
 * reports in bin (cg_nvrtc_compile with a cubin): regs <= max_regs_per_thread,
 * regs x threads <= max_regs_per_block, spill stores <= max_spill_bytes (when
 * >= 0). TS_EUNSUPPORTED naming the kernel, its registers and threads (or its
 * spills) and the limit; TS_EINVAL when bin has no figures for a kernel. */
ts_status cg_gpu_check_registers(const cg_cuda_module *m, const cg_cuda_binary *bin, const cg_gpu_limits *lim,
                                 ts_diag *d);

#endif
