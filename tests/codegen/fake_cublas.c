/* fake_cublas.c — a stand-in libcublas for machines without a GPU: the
 * entry points runtime/cublas.c opens, computing on host memory what
 * cuBLAS's reference documents (column-major; op(X) = X or X^T; C = alpha
 * op(A) op(B) + beta C; strided batches). test_cuda.c loads it through
 * TESSEL_LIBCUBLAS and hands host pointers as "device" pointers, so the
 * runtime's row-major-to-column-major mapping of a library step is checked
 * against the interpreter. fake_cublas_calls counts the products. */
#include <stddef.h>

int fake_cublas_calls;

typedef struct fake_handle {
  int unused;
} fake_handle;
static fake_handle the_handle;

/* cuBLAS's names and (simplified) types: the library is opened with dlsym only */
int cublasCreate_v2(fake_handle **h);
int cublasDestroy_v2(fake_handle *h);
const char *cublasGetStatusString(int s);
int cublasSgemm_v2(fake_handle *h, int ta, int tb, int m, int n, int k, const float *alpha, const float *a, int lda,
                   const float *b, int ldb, const float *beta, float *c, int ldc);
int cublasSgemmStridedBatched(fake_handle *h, int ta, int tb, int m, int n, int k, const float *alpha,
                              const float *a, int lda, long long sa, const float *b, int ldb, long long sb,
                              const float *beta, float *c, int ldc, long long sc, int batch);

int cublasCreate_v2(fake_handle **h) {
  *h = &the_handle;
  return 0;
}
int cublasDestroy_v2(fake_handle *h) { return h == &the_handle ? 0 : 1; }
const char *cublasGetStatusString(int s) { return s ? "CUBLAS_STATUS_INVALID_VALUE" : "CUBLAS_STATUS_SUCCESS"; }

/* op(X)[r, c] of a column-major X with leading dimension ld */
static float at(const float *x, int trans, int ld, long r, long c) { return trans ? x[c + r * ld] : x[r + c * ld]; }

static int gemm(int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda, const float *b, int ldb,
                float beta, float *c, int ldc) {
  if (m < 0 || n < 0 || k < 0 || lda < (ta ? k : m) || ldb < (tb ? n : k) || ldc < m) return 7;
  for (long j = 0; j < n; j++)
    for (long i = 0; i < m; i++) {
      double s = 0;
      for (long l = 0; l < k; l++) s += (double)at(a, ta, lda, i, l) * at(b, tb, ldb, l, j);
      c[i + j * ldc] = (float)(alpha * s + (beta != 0 ? beta * c[i + j * ldc] : 0));
    }
  fake_cublas_calls++;
  return 0;
}

int cublasSgemm_v2(fake_handle *h, int ta, int tb, int m, int n, int k, const float *alpha, const float *a, int lda,
                   const float *b, int ldb, const float *beta, float *c, int ldc) {
  if (h != &the_handle) return 1;
  return gemm(ta, tb, m, n, k, *alpha, a, lda, b, ldb, *beta, c, ldc);
}

int cublasSgemmStridedBatched(fake_handle *h, int ta, int tb, int m, int n, int k, const float *alpha,
                              const float *a, int lda, long long sa, const float *b, int ldb, long long sb,
                              const float *beta, float *c, int ldc, long long sc, int batch) {
  if (h != &the_handle) return 1;
  for (int i = 0; i < batch; i++) {
    int st = gemm(ta, tb, m, n, k, *alpha, a + i * sa, lda, b + i * sb, ldb, *beta, c + i * sc, ldc);
    if (st) return st;
  }
  return 0;
}
