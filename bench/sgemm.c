/* sgemm.c — tessel's sgemm against OpenBLAS, in one process run.
 *
 *   build/bench/bench_sgemm KERNEL.so [M N K]
 *
 * KERNEL.so is a tessel artifact of matmul:m=M,n=N,k=K (e.g. built by
 * bench/sgemm.sh from the hand-written trace examples/sgemm_1024.json). Both
 * kernels get the same seeded inputs; each is timed on 1 and 2 threads
 * (TESSEL_NUM_THREADS / openblas_set_num_threads) as the median of repeats of
 * at least 200 ms, interleaved so that neither benefits from a warmer
 * machine. Prints GFLOP/s, the ratio, and the largest relative difference
 * between the two outputs. Never part of the test pass/fail. */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime.h"

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

typedef struct ctx {
  tsrt_module *m;
  void *args[3];
  int M, N, K;
  const float *A, *B;
  float *C;
} ctx;

static void run_tessel(ctx *c) { c->m->entry(c->args); }
static void run_blas(ctx *c) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, c->M, c->N, c->K, 1.0f, c->A, c->K, c->B, c->N,
              0.0f, c->C, c->N);
}

/* Median seconds per call over `reps` repeats of >= 200 ms each. */
static double time_it(void (*fn)(ctx *), ctx *c, int reps) {
  fn(c);
  int number = 1;
  for (;;) {
    double t0 = tsrt_now();
    for (int i = 0; i < number; i++) fn(c);
    double dt = tsrt_now() - t0;
    if (dt >= 0.2) break;
    number *= dt > 0 ? (int)(0.25 / dt) + 1 : 10;
  }
  double v[32];
  for (int r = 0; r < reps; r++) {
    double t0 = tsrt_now();
    for (int i = 0; i < number; i++) fn(c);
    v[r] = (tsrt_now() - t0) / number;
  }
  qsort(v, (size_t)reps, sizeof v[0], cmp);
  return v[reps / 2];
}

int main(int argc, char **argv) {
  if (argc != 2 && argc != 5) {
    fprintf(stderr, "usage: bench_sgemm KERNEL.so [M N K]\n");
    return 2;
  }
  int M = 1024, N = 1024, K = 1024;
  if (argc == 5) {
    M = atoi(argv[2]);
    N = atoi(argv[3]);
    K = atoi(argv[4]);
  }
  tsrt_module m;
  ts_diag d;
  ts_diag_clear(&d);
  if (tsrt_module_load(argv[1], &m, &d)) {
    fprintf(stderr, "bench_sgemm: %s\n", d.msg);
    return 2;
  }
  const tsrt_kernel_meta *meta = m.meta;
  if (meta->nparams != 3 || meta->params[0].shape[0] != M || meta->params[0].shape[1] != K ||
      meta->params[1].shape[1] != N || meta->params[0].dtype != TSRT_F32) {
    fprintf(stderr, "bench_sgemm: %s is not an f32 matmul of %dx%dx%d\n", argv[1], M, N, K);
    return 2;
  }
  float *A = aligned_alloc(64, sizeof(float) * (size_t)M * K), *B = aligned_alloc(64, sizeof(float) * (size_t)K * N);
  float *C1 = aligned_alloc(64, sizeof(float) * (size_t)M * N), *C2 = aligned_alloc(64, sizeof(float) * (size_t)M * N);
  tsrt_fill_random(TSRT_F32, A, (int64_t)M * K, 1);
  tsrt_fill_random(TSRT_F32, B, (int64_t)K * N, 2);
  ctx tc = {&m, {A, B, C1}, M, N, K, A, B, C1}, bc = {&m, {0}, M, N, K, A, B, C2};
  double flops = 2.0 * M * N * K;
  printf("sgemm %dx%dx%d: tessel (%s) vs OpenBLAS cblas_sgemm\n", M, N, K, argv[1]);
  printf("%-8s %14s %14s %8s\n", "threads", "tessel GF/s", "OpenBLAS GF/s", "ratio");
  for (int th = 1; th <= 2; th++) {
    char buf[8];
    snprintf(buf, sizeof buf, "%d", th);
    tsrt_pool_shutdown();
    setenv("TESSEL_NUM_THREADS", buf, 1);
    openblas_set_num_threads(th);
    double tt = 1e30, tb = 1e30;
    for (int round = 0; round < 3; round++) { /* interleave */
      tt = fmin(tt, time_it(run_tessel, &tc, 5));
      tb = fmin(tb, time_it(run_blas, &bc, 5));
    }
    printf("%-8d %14.1f %14.1f %8.2f\n", th, flops / tt * 1e-9, flops / tb * 1e-9, tb / tt);
  }
  /* both sum K products in different orders: compare against the output's
   * scale, not element by element (a result near 0 has no relative error) */
  double maxdiff = 0, scale = 0;
  for (size_t i = 0; i < (size_t)M * N; i++) {
    double dlt = fabs(C1[i] - C2[i]);
    if (dlt > maxdiff || isnan(dlt)) maxdiff = dlt;
    if (fabs(C2[i]) > scale) scale = fabs(C2[i]);
  }
  double maxrel = maxdiff / (scale > 0 ? scale : 1);
  printf("max |tessel - OpenBLAS| / max |OpenBLAS| = %.3g\n", maxrel);
  tsrt_module_unload(&m);
  return maxrel < 1e-3 ? 0 : 1;
}
