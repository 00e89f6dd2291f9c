/* cublas.h — cuBLAS as a step of a CUDA artifact's launch sequence. A
 * task whose kernel is cuBLAS's sgemm (a library candidate on a CUDA
 * target, tuner/library.c) builds to a cubin whose metadata lists steps
 * (codegen/cuda_emit.c: tessel_nsteps, tessel_steps) instead of launching
 * kernels only; runtime/cuda_rt.c runs a step of kind TSRT_STEP_SGEMM through
 * this file. libcublas is opened with dlopen like the driver, so nothing
 * links it and a machine without it refuses such an artifact by name. */
#ifndef TESSEL_RUNTIME_CUBLAS_H
#define TESSEL_RUNTIME_CUBLAS_H

#include <stddef.h>

/* One step of tessel_steps: TSRT_STEP_WORDS long longs. */
#define TSRT_STEP_WORDS 12
enum {
  TSRT_STEP_KERNEL = 0, /* [1]: the kernel's index (tessel_kernel<i>) */
  TSRT_STEP_SGEMM = 1,  /* [1] trans_b, [2] m, [3] n, [4] k, [5] batch, [6..8] params of A, B, C:
                           row-major C[b, m, n] = A[b, m, k] . B[b, k, n] (B[b, n, k] when trans_b),
                           batches strided by the whole matrix; f32 */
};

/* Runs the sgemm step s on the current context's default stream, on the
 * device pointers of the artifact's params (nparams of them). The handle is
 * created on first use in this process (a forked measurement child) and
 * lives until tsrt_cublas_release. 0, or -1 with err said. */
int tsrt_cublas_step(const long long *s, const unsigned long long *dptr, int nparams, char *err, size_t errn);
/* Destroys this process's handle (before the context goes). */
void tsrt_cublas_release(void);

#endif
