/* gpu_check_cublas.c — the cuBLAS baseline of bench/gpu-check: times
 * C = A·B (row-major M×K by K×N) with cublasSgemm (f32) and with
 * cublasGemmEx (f16 inputs, f32 output and compute, tensor cores allowed),
 * both opened with dlopen at run time (libcuda.so.1 and libcublas from
 * /usr/local/cuda or the loader path), so this builds without CUDA.
 *
 * usage: gpu_check_cublas M N K [f32|f16] [ITERS]
 * prints one JSON object: {"dtype":..,"m":..,"n":..,"k":..,"seconds":..,"gflops":..}
 * exit 2 with a message on stderr when there is no GPU or no cuBLAS. */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext, *CUevent;
typedef unsigned long long CUdeviceptr;
typedef void *cublasHandle_t;

/* cuBLAS enums (cublas_api.h / library_types.h) */
enum { CUBLAS_OP_N = 0 };
enum { CUDA_R_32F = 0, CUDA_R_16F = 2 };
enum { CUBLAS_COMPUTE_32F = 68 };
enum { CUBLAS_GEMM_DEFAULT = -1 };

static void *load(void *lib, const char *name) {
  void *p = dlsym(lib, name);
  if (!p) {
    fprintf(stderr, "gpu_check_cublas: %s lacks %s\n", lib ? "library" : "?", name);
    exit(2);
  }
  return p;
}

static void check(int r, const char *what) {
  if (r != 0) {
    fprintf(stderr, "gpu_check_cublas: %s failed (%d)\n", what, r);
    exit(2);
  }
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: gpu_check_cublas M N K [f32|f16] [ITERS]\n");
    return 2;
  }
  long long M = atoll(argv[1]), N = atoll(argv[2]), K = atoll(argv[3]);
  bool f16 = argc > 4 && strcmp(argv[4], "f16") == 0;
  int iters = argc > 5 ? atoi(argv[5]) : 20;
  if (M <= 0 || N <= 0 || K <= 0 || iters <= 0) {
    fprintf(stderr, "gpu_check_cublas: sizes and ITERS must be positive\n");
    return 2;
  }
  void *cu = dlopen("libcuda.so.1", RTLD_NOW);
  if (!cu) {
    fprintf(stderr, "gpu_check_cublas: no GPU: libcuda.so.1 not found (%s)\n", dlerror());
    return 2;
  }
  const char *cands[] = {getenv("TESSEL_LIBCUBLAS"), "libcublas.so", "libcublas.so.13", "libcublas.so.12",
                         "/usr/local/cuda/lib64/libcublas.so", "/usr/local/cuda/lib64/libcublas.so.13",
                         "/usr/local/cuda/lib64/libcublas.so.12"};
  void *bl = NULL;
  for (size_t i = 0; i < sizeof cands / sizeof cands[0] && !bl; i++)
    if (cands[i] && *cands[i]) bl = dlopen(cands[i], RTLD_NOW);
  if (!bl) {
    fprintf(stderr, "gpu_check_cublas: no cuBLAS (libcublas.so not found; set TESSEL_LIBCUBLAS)\n");
    return 2;
  }
  CUresult (*cuInit)(unsigned) = load(cu, "cuInit");
  CUresult (*cuDeviceGet)(CUdevice *, int) = load(cu, "cuDeviceGet");
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice) = load(cu, "cuDevicePrimaryCtxRetain");
  CUresult (*cuCtxSetCurrent)(CUcontext) = load(cu, "cuCtxSetCurrent");
  CUresult (*cuMemAlloc)(CUdeviceptr *, size_t) = load(cu, "cuMemAlloc_v2");
  CUresult (*cuMemsetD8)(CUdeviceptr, unsigned char, size_t) = load(cu, "cuMemsetD8_v2");
  CUresult (*cuEventCreate)(CUevent *, unsigned) = load(cu, "cuEventCreate");
  CUresult (*cuEventRecord)(CUevent, void *) = load(cu, "cuEventRecord");
  CUresult (*cuEventSynchronize)(CUevent) = load(cu, "cuEventSynchronize");
  CUresult (*cuEventElapsedTime)(float *, CUevent, CUevent) = dlsym(cu, "cuEventElapsedTime_v2");
  if (!cuEventElapsedTime) cuEventElapsedTime = load(cu, "cuEventElapsedTime");
  int (*cublasCreate)(cublasHandle_t *) = load(bl, "cublasCreate_v2");
  int (*cublasSgemm)(cublasHandle_t, int, int, int, int, int, const float *, const float *, int,
                     const float *, int, const float *, float *, int) = load(bl, "cublasSgemm_v2");
  int (*cublasGemmEx)(cublasHandle_t, int, int, int, int, int, const void *, const void *, int, int,
                      const void *, int, int, const void *, void *, int, int, int, int) =
      load(bl, "cublasGemmEx");
  check(cuInit(0), "cuInit");
  CUdevice dev;
  CUcontext ctx;
  check(cuDeviceGet(&dev, 0), "cuDeviceGet");
  check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  size_t eb = f16 ? 2 : 4;
  CUdeviceptr A, B, C;
  check(cuMemAlloc(&A, (size_t)(M * K) * eb), "cuMemAlloc A");
  check(cuMemAlloc(&B, (size_t)(K * N) * eb), "cuMemAlloc B");
  check(cuMemAlloc(&C, (size_t)(M * N) * 4), "cuMemAlloc C");
  /* small values (0x3c = 1.0 in the high half byte pattern is fine either
   * way: the timing does not depend on the data) */
  check(cuMemsetD8(A, 0x11, (size_t)(M * K) * eb), "cuMemsetD8");
  check(cuMemsetD8(B, 0x11, (size_t)(K * N) * eb), "cuMemsetD8");
  cublasHandle_t h;
  check(cublasCreate(&h), "cublasCreate");
  float alpha = 1, beta = 0;
  /* row-major C = A·B is column-major C^T = B^T·A^T: swap the operands */
#define GEMM()                                                                                          \
  (f16 ? cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, (int)N, (int)M, (int)K, &alpha, (void *)B, CUDA_R_16F, \
                      (int)N, (void *)A, CUDA_R_16F, (int)K, &beta, (void *)C, CUDA_R_32F, (int)N,         \
                      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT)                                          \
       : cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, (int)N, (int)M, (int)K, &alpha, (float *)B, (int)N,    \
                     (float *)A, (int)K, &beta, (float *)C, (int)N))
  for (int i = 0; i < 3; i++) check(GEMM(), "warm-up gemm");
  CUevent e0, e1;
  check(cuEventCreate(&e0, 0), "cuEventCreate");
  check(cuEventCreate(&e1, 0), "cuEventCreate");
  double best = 1e30;
  for (int rep = 0; rep < 5; rep++) {
    check(cuEventRecord(e0, NULL), "cuEventRecord");
    for (int i = 0; i < iters; i++) check(GEMM(), "gemm");
    check(cuEventRecord(e1, NULL), "cuEventRecord");
    check(cuEventSynchronize(e1), "cuEventSynchronize");
    float ms = 0;
    check(cuEventElapsedTime(&ms, e0, e1), "cuEventElapsedTime");
    double s = ms * 1e-3 / iters;
    if (s < best) best = s;
  }
  double gflops = 2.0 * (double)M * (double)N * (double)K / best * 1e-9;
  printf("{\"dtype\": \"%s\", \"m\": %lld, \"n\": %lld, \"k\": %lld, \"seconds\": %.9g, \"gflops\": %.2f}\n",
         f16 ? "f16" : "f32", M, N, K, best, gflops);
  return 0;
}
