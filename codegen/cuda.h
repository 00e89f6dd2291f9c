/* cuda.h — the CUDA backend: CUDA C emission from a scheduled PrimFunc
 * (cuda_emit.c and its stages, no CUDA needed), and its compilation to PTX / cubin through NVRTC
 * (nvrtc.c; a stub that answers TS_EUNSUPPORTED "built without CUDA" when
 * tessel is configured without the toolkit).
 *
 * Emission (cg_cuda_emit) lowers the function for the cuda target (cg_lower
 * keeps thread-bound loops) and writes one translation unit:
 *  - one __global__ kernel per top-level loop nest of the function body
 *    (TVM's SplitHostDevice: each stage of a multi-stage workload runs as its
 *    own launch, in program order, so a later stage sees all of an earlier
 *    one's writes); every kernel takes every param, inputs as
 *    `const T *__restrict__`;
 *  - launch configuration from the bound extents: per kernel, grid[d] is the
 *    largest constant extent bound to blockIdx.d and block[d] the largest
 *    bound to threadIdx.d; a loop bound with a smaller extent is guarded
 *    (`if (threadIdx.x < ext)`); a loop bound to a tag inside another loop
 *    bound to the same tag is the same hardware index (TVM's semantics), so
 *    its body may not use the outer var (refused otherwise); vthread loops
 *    become unrolled serial loops; non-constant bound extents are refused;
 *    __launch_bounds__(threads per block) on every kernel;
 *  - `shared` buffers as __shared__ arrays, `local` ones as per-thread arrays
 *    (registers after unrolling), intermediate `global` buffers as __device__
 *    arrays of the module (constant sizes only);
 *  - the barrier pass (cuda_sync.c's logic lives here): a __syncthreads() goes
 *    before a statement that reads a shared buffer written by an earlier
 *    statement since the last barrier, or writes one read/written since then;
 *    loops are walked twice so a loop-carried conflict (the next iteration's
 *    cooperative fetch overwriting what this one still reads) puts a barrier
 *    at the top of the loop body; a barrier that would fall inside a
 *    divergent region (a guarded thread loop, an if) is refused;
 *  - a store inside a thread-bound loop whose index does not use that loop's
 *    var (several threads writing one element: a cross-thread reduction) is
 *    emitted as a warp-shuffle all-reduce when it has the form
 *    `B[i] = B[i] + e` (also max/min) under threadIdx.x, possibly below
 *    serial loops and guards (a split that does not divide the extent), in a
 *    one-dimensional block of any size up to 1024 (partial warps masked,
 *    shared memory combines the warps beyond 32; docs/CUDA.md), and refused
 *    otherwise;
 *  - vector code (lanes from vectorized loops) scalarised per lane, with
 *    contiguous aligned loads and stores of f32/i32 (float2/float4, int2/int4)
 *    and f16 (half2) done as one vector access when the base index is a
 *    provable multiple of the width;
 *  - `#pragma unroll` on unrolled loops and on loops annotated
 *    pragma_auto_unroll_max_step; fp16 through cuda_fp16.h, bf16 through
 *    cuda_bf16.h; fast-math intrinsics (__expf, __logf, __powf, __fdividef)
 *    unless opts->precise_math;
 *  - metadata as __device__ globals so a cubin is self-describing:
 *    tessel_nkernels, tessel_launch (6 per kernel: grid xyz, block xyz),
 *    tessel_nparams, tessel_ninputs, tessel_param_dtype, tessel_param_ndim,
 *    tessel_param_shape (TSRT_MAX_DIMS per param); the runtime reads them with
 *    cuModuleGetGlobal (runtime/cuda_rt.h). Kernels are named
 *    tessel_kernel0 ... tessel_kernelN-1 (extern "C").
 *
 * Index math (i64 in the IR) is emitted as `int` when every buffer has a
 * constant size under 2^31 elements and every loop a constant extent, else
 * as `long long`. */
#ifndef TESSEL_CODEGEN_CUDA_H
#define TESSEL_CODEGEN_CUDA_H

#include "codegen/codegen.h"
#include "codegen/gpu_check.h"

#define CG_CUDA_MAX_KERNELS 32
/* words per step of tessel_steps (runtime/cublas.h TSRT_STEP_WORDS) */
#define CG_CUDA_STEP_WORDS 12

typedef struct cg_cuda_opts {
  bool precise_math; /* expf/logf instead of __expf/__logf */
} cg_cuda_opts;

typedef struct cg_cuda_launch {
  int64_t grid[3], block[3];
  int64_t shared_bytes; /* static __shared__ bytes */
  int nsyncs;           /* __syncthreads() inserted */
} cg_cuda_launch;

typedef struct cg_cuda_module {
  char *source; /* the CUDA C translation unit (ts_malloc; cg_cuda_module_fini frees) */
  int nkernels;
  cg_cuda_launch kernels[CG_CUDA_MAX_KERNELS];
  int nlibrary; /* library steps (cuBLAS calls) in the launch sequence */
  int nsteps;   /* 0: the kernels run in order; else the launch sequence (tessel_steps) */
  long long steps[CG_CUDA_MAX_KERNELS][CG_CUDA_STEP_WORDS];
  int nsyncs;   /* total over kernels */
  int nvector;  /* vector loads/stores emitted (float2/float4/half2 ...) */
  int nshuffle; /* warp-shuffle all-reduces emitted */
  int nwmma;    /* nvcuda::wmma calls emitted */
} cg_cuda_module;

/* Emits CUDA C for a scheduled function f (not lowered; cg_lower runs here)
 * for target t (kind cuda). opts may be NULL. Errors: TS_EUNSUPPORTED naming
 * the loop/buffer/statement that cannot run on a GPU (cg_check's reasons,
 * non-constant bound extents, a barrier in divergent code, a racy store),
 * TS_ENOMEM. On success the caller owns out (cg_cuda_module_fini). */
ts_status cg_cuda_emit(const ir_func *f, const cg_target *t, const cg_cuda_opts *opts,
                       cg_cuda_module *out, ts_diag *d);
void cg_cuda_module_fini(cg_cuda_module *m);

/* ---- NVRTC (codegen/nvrtc.c) ---------------------------------------------- */

/* What ptxas gave one kernel of a cubin. */
typedef struct cg_cuda_kernel_regs {
  char name[64];             /* tessel_kernel0 ... */
  int regs;                  /* registers per thread (the cubin's EIATTR_REGCOUNT) */
  int64_t stack_bytes;       /* per-thread stack frame in local memory (EIATTR_FRAME_SIZE) */
  int64_t spill_store_bytes; /* ptxas -v: bytes of registers spilled per thread; -1 unknown */
  int64_t spill_load_bytes;  /* ptxas -v: bytes reloaded; -1 unknown */
} cg_cuda_kernel_regs;

typedef struct cg_cuda_binary {
  char *ptx;      /* NUL-terminated PTX (ts_malloc) */
  size_t ptx_size;
  void *cubin;    /* ELF cubin (ts_malloc); NULL unless asked for */
  size_t cubin_size;
  char *log;      /* NVRTC's log (with a cubin: ptxas's --verbose report), may be NULL */
  /* with a cubin: one entry per kernel (ts_malloc), in the cubin's symbol
   * order; registers and stack frame from the cubin, spills from the log */
  cg_cuda_kernel_regs *kernels;
  int nkernels;
} cg_cuda_binary;

/* True when tessel was built with NVRTC. */
bool cg_nvrtc_available(void);
/* NVRTC's version "13.0" into buf (or "none"). */
void cg_nvrtc_version(char *buf, size_t n);
/* Compiles source for arch ("sm_90"; NULL or "" = sm_90) to PTX and, when
 * want_cubin, to a cubin. A compile error is TS_EBUILD (or TS_EINVAL) whose
 * message quotes NVRTC's first error and the generated source line it names.
 * Without CUDA at build time: TS_EUNSUPPORTED "built without CUDA". The
 * caller frees out with cg_cuda_binary_fini. */
ts_status cg_nvrtc_compile(const char *source, const char *arch, bool want_cubin,
                           cg_cuda_binary *out, ts_diag *d);
void cg_cuda_binary_fini(cg_cuda_binary *b);
/* The kernel named name in b (NULL when absent or b has no cubin). */
const cg_cuda_kernel_regs *cg_cuda_binary_kernel(const cg_cuda_binary *b, const char *name);

/* Registers and stack frame of every kernel (STT_FUNC symbol) of a cubin,
 * read from its ELF .nv.info section (EIATTR_REGCOUNT, EIATTR_FRAME_SIZE);
 * spill fields -1. No CUDA needed. *out is ts_malloc'd (*n may be 0).
 * TS_EPARSE naming what is malformed (not an ELF, truncated sections). */
ts_status cg_cubin_kernel_regs(const void *cubin, size_t size, cg_cuda_kernel_regs **out, int *n,
                               ts_diag *d);
/* Fills spill_store/load_bytes (and stack_bytes/regs where the cubin gave
 * none) of kernels[0..n) from an NVRTC log with ptxas --verbose lines
 * ("Function properties for K", "N bytes stack frame, N bytes spill stores,
 * N bytes spill loads", "Used N registers"). */
void cg_ptxas_log_apply(const char *log, cg_cuda_kernel_regs *kernels, int n);

/* ---- the register check (codegen/cuda_regs.c) ------------------------------ */

/* The register check of a compiled module: for each kernel of m (its
 * threads per block from the launch) the registers and spills NVRTC's cubin
 * reports in bin (cg_nvrtc_compile with a cubin): regs <= max_regs_per_thread,
 * regs x threads <= max_regs_per_block, spill stores <= max_spill_bytes (when
 * >= 0). TS_EUNSUPPORTED naming the kernel, its registers and threads (or its
 * spills) and the limit; TS_EINVAL when bin has no figures for a kernel. */
ts_status cg_gpu_check_registers(const cg_cuda_module *m, const cg_cuda_binary *bin, const cg_gpu_limits *lim,
                                 ts_diag *d);

#endif
