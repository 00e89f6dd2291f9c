/* runtime/cublas.c — cuBLAS opened with dlopen (cublas.h). Row-major
 * products map onto column-major cuBLAS by computing C^T = op(B)^T . A^T:
 * cuBLAS's (m, n) is our (n, m) and the operands swap. The few cuBLAS
 * types and entry points used are declared here, so the runtime builds
 * without the toolkit. */
#include "cublas.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime.h"

typedef int cublas_status; /* 0 = CUBLAS_STATUS_SUCCESS */
typedef struct cublas_ctx *cublas_handle;
enum { OP_N = 0, OP_T = 1 };

#define CUBLAS_FNS(X)                                                                                         \
  X(create, cublas_status, (cublas_handle *), "cublasCreate_v2")                                              \
  X(destroy, cublas_status, (cublas_handle), "cublasDestroy_v2")                                              \
  X(sgemm, cublas_status,                                                                                     \
    (cublas_handle, int, int, int, int, int, const float *, const float *, int, const float *, int,          \
     const float *, float *, int),                                                                            \
    "cublasSgemm_v2")                                                                                         \
  X(sgemm_strided, cublas_status,                                                                             \
    (cublas_handle, int, int, int, int, int, const float *, const float *, int, long long, const float *, int, \
     long long, const float *, float *, int, long long, int),                                                 \
    "cublasSgemmStridedBatched")                                                                              \
  X(status_string, const char *, (cublas_status), "cublasGetStatusString")

static struct {
  void *lib;
  int loaded; /* 1 ok, -1 failed, 0 not tried */
  char err[300];
  cublas_handle h;
#define CB_FIELD(field, ret, params, name) ret(*field) params;
  CUBLAS_FNS(CB_FIELD)
#undef CB_FIELD
} cb;

/* The names tried, in order: TESSEL_LIBCUBLAS, then the sonames on the
 * loader's path, then the toolkit's usual place. */
static void *open_lib(char *tried, size_t n) {
  static const char *const names[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so",
                                      "/usr/local/cuda/lib64/libcublas.so.13",
                                      "/usr/local/cuda/lib64/libcublas.so.12"};
  const char *env = getenv("TESSEL_LIBCUBLAS");
  if (env && *env) {
    snprintf(tried, n, "%s", env);
    return dlopen(env, RTLD_NOW | RTLD_LOCAL);
  }
  snprintf(tried, n, "libcublas.so.13/.12/.so and /usr/local/cuda/lib64");
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (h) return h;
  }
  return NULL;
}

static int cb_open(void) {
  if (cb.loaded) return cb.loaded > 0 ? 0 : -1;
  char tried[200];
  cb.lib = open_lib(tried, sizeof tried);
  if (!cb.lib) {
    const char *e = dlerror();
    snprintf(cb.err, sizeof cb.err, "cuBLAS not found (%s): %s", tried, e ? e : "dlopen failed");
    cb.loaded = -1;
    return -1;
  }
  static const struct {
    size_t off;
    const char *name;
  } fns[] = {
#define CB_SYM(field, ret, params, name) {offsetof(__typeof__(cb), field), name},
      CUBLAS_FNS(CB_SYM)
#undef CB_SYM
  };
  for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
    void *p = dlsym(cb.lib, fns[i].name);
    if (!p) {
      snprintf(cb.err, sizeof cb.err, "cuBLAS (%s) lacks %s", tried, fns[i].name);
      cb.loaded = -1;
      return -1;
    }
    memcpy((char *)&cb + fns[i].off, &p, sizeof p);
  }
  cb.loaded = 1;
  return 0;
}

bool tsrt_cublas_available(void) { return cb_open() == 0; }

static const char *status_str(cublas_status s) {
  const char *t = cb.status_string ? cb.status_string(s) : NULL;
  return t ? t : "unknown cuBLAS status";
}

int tsrt_cublas_step(const long long *s, const unsigned long long *dptr, int nparams, char *err, size_t errn) {
  if (cb_open() != 0) {
    snprintf(err, errn, "%s", cb.err);
    return -1;
  }
  long long tb = s[1], m = s[2], n = s[3], k = s[4], batch = s[5];
  for (int i = 6; i <= 8; i++)
    if (s[i] < 0 || s[i] >= nparams) {
      snprintf(err, errn, "cuBLAS step: operand %d names param %lld of %d", i - 6, s[i], nparams);
      return -1;
    }
  if (m <= 0 || n <= 0 || k <= 0 || batch <= 0 || m > INT32_MAX || n > INT32_MAX || k > INT32_MAX ||
      batch > INT32_MAX) {
    snprintf(err, errn, "cuBLAS step: sizes out of range (m %lld, n %lld, k %lld, batch %lld)", m, n, k, batch);
    return -1;
  }
  cublas_status st;
  if (!cb.h && (st = cb.create(&cb.h)) != 0) {
    cb.h = NULL;
    snprintf(err, errn, "cublasCreate: %s", status_str(st));
    return -1;
  }
  const float one = 1, zero = 0;
  const float *A = (const float *)(uintptr_t)dptr[s[6]], *B = (const float *)(uintptr_t)dptr[s[7]];
  float *C = (float *)(uintptr_t)dptr[s[8]];
  /* C^T [n x m] = op(B^T) [n x k] . A^T [k x m], column-major */
  int opb = tb ? OP_T : OP_N, ldb = (int)(tb ? k : n);
  if (batch == 1)
    st = cb.sgemm(cb.h, opb, OP_N, (int)n, (int)m, (int)k, &one, B, ldb, A, (int)k, &zero, C, (int)n);
  else
    st = cb.sgemm_strided(cb.h, opb, OP_N, (int)n, (int)m, (int)k, &one, B, ldb, k * n, A, (int)k, m * k, &zero, C,
                          (int)n, m * n, (int)batch);
  if (st != 0) {
    snprintf(err, errn, "cuBLAS sgemm (m %lld, n %lld, k %lld, batch %lld): %s", m, n, k, batch, status_str(st));
    return -1;
  }
  return 0;
}

void tsrt_cublas_release(void) {
  if (cb.h) cb.destroy(cb.h);
  cb.h = NULL;
}
