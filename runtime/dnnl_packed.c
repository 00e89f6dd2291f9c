/* dnnl_packed.c — tsrt_dnnl_sgemm_packed: an f32 matrix product whose
 * weight (the right operand) oneDNN packs once and every later call reuses,
 * what a matrix-product task's "packed" library candidate calls
 * (tuner/library.c; docs/TUNING.md, "Library candidates").
 *
 * dnnl_sgemm and cblas_sgemm copy both operands into their blocked panels on
 * every call; for a model's projection, where the weight is a constant of
 * K x N and the activation has few rows, that copy of the weight is a
 * tenth of the call (onnxruntime's MLAS packs its weights once, at session
 * start). oneDNN's gemm driver has the pack form (sgemm_pack_get_size,
 * sgemm_pack, sgemm_compute with a 'P' operand: what its RNN primitives use);
 * libdnnl exports those entries with C++ linkage only, so they are found by
 * their mangled names (oneDNN 2.x, dim_t = int64_t) with dlsym, as the rest
 * of oneDNN is (runtime/dnnl_conv.c: the runtime does not link libdnnl).
 *
 * The packed weights live in a small cache under a mutex, keyed by the
 * weight's address, its sizes, its transposition, oneDNN's thread count
 * (the pack is split per thread) and a fingerprint of 32 of its values
 * spread over it: a buffer at the same address with other contents (a
 * tuner's next measurement) is packed again, never read stale. The build
 * gives this call only weights that are model constants (tuner/model_build.c,
 * the "packed" records); a cache entry is never freed (a model has a few
 * hundred weights at most; past CACHE entries each call packs into a
 * scratch buffer of its own). The pack is made at the first call's rows
 * and serves every number of rows (oneDNN's driver reads the packed panels
 * for any M). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime.h"
#if __has_include("tessel_config.h") /* not in the cross-compiled runner (tests/cross) */
#include "tessel_config.h"
#endif

#if defined(TESSEL_HAVE_DNNL) && TESSEL_HAVE_DNNL

typedef int64_t dim_t;
/* column-major, as oneDNN's gemm driver (dnnl_status_t is an int enum) */
typedef int (*pack_size_fn)(const char *id, const char *ta, const char *tb, const dim_t *m, const dim_t *n,
                            const dim_t *k, const dim_t *lda, const dim_t *ldb, size_t *size, bool *pack);
typedef int (*pack_fn)(const char *id, const char *ta, const char *tb, const dim_t *m, const dim_t *n, const dim_t *k,
                       const dim_t *lda, const dim_t *ldb, const float *src, float *dst);
typedef int (*compute_fn)(const char *ta, const char *tb, const dim_t *m, const dim_t *n, const dim_t *k,
                          const float *a, const dim_t *lda, const float *b, const dim_t *ldb, const float *beta,
                          float *c, const dim_t *ldc);

static struct {
  pack_size_fn size;
  pack_fn pack;
  compute_fn compute;
  int (*threads)(void); /* omp_get_max_threads: oneDNN's thread count */
  bool ok;
} api;
static pthread_once_t api_once = PTHREAD_ONCE_INIT;

static void api_open(void) {
  void *h = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_GLOBAL);
  if (!h) h = dlopen("libdnnl.so", RTLD_NOW | RTLD_GLOBAL);
  if (!h) return;
  api.size = (pack_size_fn)dlsym(h, "_ZN4dnnl4impl3cpu19sgemm_pack_get_sizeEPKcS3_S3_PKlS5_S5_S5_S5_PmPb");
  api.pack = (pack_fn)dlsym(h, "_ZN4dnnl4impl3cpu10sgemm_packEPKcS3_S3_PKlS5_S5_S5_S5_PKfPf");
  api.compute = (compute_fn)dlsym(h, "_ZN4dnnl4impl3cpu13sgemm_computeEPKcS3_PKlS5_S5_PKfS5_S7_S5_S7_PfS5_");
  api.threads = (int (*)(void))dlsym(RTLD_DEFAULT, "omp_get_max_threads");
  api.ok = api.size && api.pack && api.compute;
}

bool tsrt_dnnl_packed_available(void) {
  pthread_once(&api_once, api_open);
  return api.ok;
}

/* ---- the packed weights ------------------------------------------------------------ */
#define FP_N 32
#ifndef PACK_CACHE
#define PACK_CACHE 512
#endif

typedef struct packed_w {
  const float *w;
  int64_t n, k, trans, threads;
  float fp[FP_N];
  float *data;
} packed_w;

static packed_w cache[PACK_CACHE];
static int ncache;
static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;

static void fingerprint(const float *w, int64_t count, float *fp) {
  for (int i = 0; i < FP_N; i++) fp[i] = w[(int64_t)((double)i * (double)(count - 1) / (FP_N - 1))];
}

/* The column-major view of row-major C[m, n] = A[m, k] . B: C' (n x m) =
 * B' (n x k: B [k, n] row-major is n x k column-major with ld n; B [n, k]
 * is its transpose, ld k) . A' (k x m, ld k). B' is oneDNN's "A" operand. */
static float *pack_weight(const float *w, int64_t m, int64_t n, int64_t k, int64_t trans) {
  dim_t M = n, N = m, K = k, lda = trans ? k : n, ldb = k;
  const char *ta = trans ? "T" : "N";
  size_t bytes = 0;
  if (api.size("A", ta, "N", &M, &N, &K, &lda, &ldb, &bytes, NULL) != 0 || !bytes) return NULL;
  float *p = aligned_alloc(64, (bytes + 63) / 64 * 64);
  if (p && api.pack("A", ta, "N", &M, &N, &K, &lda, &ldb, w, p) != 0) {
    free(p);
    p = NULL;
  }
  return p;
}

/* The packed form of w (made on first use); *own: a pack for this call only
 * (the cache is full), which the caller frees. */
static float *packed_for(const float *w, int64_t m, int64_t n, int64_t k, int64_t trans, bool *own) {
  float fp[FP_N];
  fingerprint(w, n * k, fp);
  int64_t threads = api.threads ? api.threads() : 1;
  *own = false;
  pthread_mutex_lock(&cache_mu);
  packed_w *e = NULL;
  for (int i = 0; i < ncache && !e; i++) {
    packed_w *c = &cache[i];
    if (c->w == w && c->n == n && c->k == k && c->trans == trans && c->threads == threads) e = c;
  }
  if (e && memcmp(e->fp, fp, sizeof fp)) { /* other contents at that address: pack again */
    free(e->data);
    e->data = NULL;
  }
  if (!e && ncache < PACK_CACHE) {
    e = &cache[ncache++];
    *e = (packed_w){.w = w, .n = n, .k = k, .trans = trans, .threads = threads};
  }
  if (e && !e->data) {
    memcpy(e->fp, fp, sizeof fp);
    e->data = pack_weight(w, m, n, k, trans);
  }
  float *p = e ? e->data : NULL;
  pthread_mutex_unlock(&cache_mu);
  if (!e) {
    p = pack_weight(w, m, n, k, trans);
    *own = true;
  }
  return p;
}

int32_t tsrt_dnnl_sgemm_packed(int64_t m, int64_t n, int64_t k, int64_t trans_b, const float *a, const float *b,
                               float *c) {
  pthread_once(&api_once, api_open);
  if (!api.ok) {
    fprintf(stderr, "tsrt_dnnl_sgemm_packed: libdnnl or its sgemm_pack entries are missing\n");
    return -1;
  }
  if (m <= 0 || n <= 0 || k <= 0) return m == 0 || n == 0 ? 0 : -2;
  bool own;
  float *p = packed_for(b, m, n, k, trans_b, &own);
  if (!p) return -3;
  dim_t M = n, N = m, K = k, lda = trans_b ? k : n, ldb = k, ldc = n;
  float beta = 0;
  int rc = api.compute("P", "N", &M, &N, &K, p, &lda, a, &ldb, &beta, c, &ldc);
  if (own) free(p);
  return rc == 0 ? 0 : -4;
}

#else /* no oneDNN when tessel was built: no library candidate calls this */
bool tsrt_dnnl_packed_available(void) { return false; }

int32_t tsrt_dnnl_sgemm_packed(int64_t m, int64_t n, int64_t k, int64_t trans_b, const float *a, const float *b,
                               float *c) {
  (void)m, (void)n, (void)k, (void)trans_b, (void)a, (void)b, (void)c;
  return -1;
}
#endif
