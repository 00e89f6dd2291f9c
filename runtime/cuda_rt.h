/* cuda_rt.h — the GPU half of runtime: the CUDA driver API opened
 * with dlopen("libcuda.so.1") at run time, so every binary that links the
 * runtime (tessel, tessel-rpc-server on a board) runs with or without a GPU
 * and without any link-time CUDA dependency.
 *
 * A CUDA artifact is a cubin (or PTX) written by codegen/cuda.c: kernels
 * tessel_kernel0..N-1 and __device__ metadata (tessel_nkernels,
 * tessel_launch[7 per kernel: grid xyz, block xyz, static shared bytes],
 * tessel_nparams, tessel_ninputs, tessel_param_dtype/ndim/shape). The runtime
 * reads the metadata through cuModuleGetGlobal, allocates every param on the
 * device, fills inputs with tsrt_fill_random (the same bytes as the CPU
 * path, so tun_verify compares them the same way), launches the kernels in
 * order and times them with CUDA events (number x repeat, min_repeat_ms;
 * cache_flush writes an L2-sized buffer before each repeat). */
#ifndef TESSEL_CUDA_RT_H
#define TESSEL_CUDA_RT_H

#include <stddef.h>

#include "runtime.h"

typedef struct tsrt_cuda_info {
  char name[128];
  int device;
  int cc_major, cc_minor;
  int sm_count;
  int max_threads_per_block;
  int shared_per_block;       /* bytes, without opt-in */
  int shared_per_block_optin; /* bytes */
  int regs_per_block;
  int l2_bytes;
  int driver_version;         /* e.g. 13000 */
  size_t total_mem;
} tsrt_cuda_info;

/* Opens the driver and describes device 0 (TESSEL_CUDA_DEVICE picks another).
 * Returns TS_OK, or TS_EUNSUPPORTED with d saying why: "no GPU: libcuda.so.1 not found
 * (...)", "no GPU: cuInit failed: ...", "no GPU: no CUDA device". Does not
 * create a context. Safe to call repeatedly. */
ts_status tsrt_cuda_probe(tsrt_cuda_info *info, ts_diag *d);

/* A one-line description for rpc_server's info ("gpu=NAME arch=sm_XY
 * sms=N ..."), or "no GPU: ..." when probing fails. Returns 1 when a GPU is
 * present, else 0. The probe runs in a forked child (a process that has
 * called cuInit cannot use CUDA in children it forks later, and every
 * measurement is forked), and its answer is cached. */
int tsrt_cuda_describe(char *buf, size_t n);
/* True when the file at path is a CUDA artifact (an ELF cubin for
 * EM_CUDA, or PTX text) rather than a shared library. */
bool tsrt_is_cuda_artifact(const char *path);

/* Measures a CUDA artifact image (cubin or NUL-terminated PTX, size bytes)
 * in this process: creates the primary context, loads, runs, frees. Fills
 * result like tsrt_measure_inprocess (secs per run of all kernels together,
 * outputs when opts->want_outputs). Never exits; errors are TS_ELOAD (no
 * GPU, bad image, metadata missing), TS_EKERNEL (a launch failed). */
void tsrt_cuda_measure_inprocess(const void *image, size_t size, const tsrt_measure_opts *opts,
                                 tsrt_measure_result *result);
/* The same in a forked child (a GPU fault or hang costs the child; the
 * parent never initialises CUDA). */
void tsrt_cuda_measure_forked(const void *image, size_t size, const tsrt_measure_opts *opts,
                              tsrt_measure_result *result);
/* Reads a kernel artifact into a heap buffer (ts_free; NUL-terminated)
 * under the base reader's cap; NULL on error, said in d. */
void *tsrt_read_file(const char *path, size_t *size, ts_diag *d);

#endif
