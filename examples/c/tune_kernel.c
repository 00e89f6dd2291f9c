/* tune_kernel.c — the C API end to end on one kernel (include/tessel/tessel.h):
 * parse a workload spec, tune it for a few trials into a log with a progress
 * callback, build the log's best schedule, load the artifact and call it on
 * the program's own buffers, and check a matmul against a plain loop.
 *
 *   tune_kernel [SPEC [TRIALS [LOG]]]    (matmul:m=64,n=48,k=33, 8, tune_kernel.jsonl)
 *
 * Build: cc -std=gnu11 tune_kernel.c $(pkg-config --cflags --libs tessel) -lm
 * (or tessel-uninstalled from a build folder: PKG_CONFIG_PATH=build/meson-uninstalled). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessel/tessel.h>

static int on_progress(void *ctx, int done, int total, double best_seconds) {
  (void)ctx;
  printf("  trials %d/%d, best %.4g ms\n", done, total, best_seconds * 1e3);
  return 0; /* nonzero would stop the run (TESSEL_ECANCELED) */
}

static int64_t elems(const tessel_tensor_info *t) {
  int64_t n = 1;
  for (int j = 0; j < t->ndim; j++) n *= t->shape[j];
  return n;
}

/* C[m,n] = A[m,k] . B[k,n] in double; the largest difference from got. */
static double matmul_error(const float *a, const float *b, const float *got, int64_t m, int64_t n, int64_t k) {
  double worst = 0;
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      double s = 0;
      for (int64_t x = 0; x < k; x++) s += (double)a[i * k + x] * b[x * n + j];
      double e = fabs(s - got[i * n + j]);
      if (e > worst) worst = e;
    }
  return worst;
}

int main(int argc, char **argv) {
  const char *spec = argc > 1 ? argv[1] : "matmul:m=64,n=48,k=33";
  const char *trials = argc > 2 ? argv[2] : "8";
  const char *log = argc > 3 ? argv[3] : "tune_kernel.jsonl";
  tessel_error err;
  tessel_func *f = NULL;
  tessel_opts *o = NULL;
  tessel_kernel *k = NULL;
  void *bufs[16] = {0};
  int rc = 1;
  if (tessel_func_parse(spec, &f, &err) || tessel_opts_new(&o, &err) ||
      tessel_opts_set(o, "trials", trials, &err) || tessel_opts_set(o, "log", log, &err) ||
      tessel_opts_set(o, "batch", "4", &err))
    goto fail;
  tessel_opts_set_progress(o, on_progress, NULL);
  printf("tuning %s (key %s) with tessel %s\n", tessel_func_definition(f), tessel_func_key(f), tessel_version());
  tessel_tune_result r = {.size = sizeof r};
  if (tessel_tune(f, o, &r, &err)) goto fail;
  printf("%d trials (%d new, %d errors) on %s: best %.2f GFLOP/s, default schedule %.2f GFLOP/s\n", r.trials,
         r.new_trials, r.errors, r.target, r.best_gflops, r.baseline_gflops);

  if (tessel_build(f, o, "./tune_kernel.so", &err) || tessel_kernel_load("./tune_kernel.so", &k, &err)) goto fail;
  int np = tessel_kernel_num_params(k);
  tessel_tensor_info info[16];
  if (np > 16) {
    fprintf(stderr, "more than 16 parameters\n");
    goto out;
  }
  for (int i = 0; i < np; i++) {
    if (tessel_kernel_param_info(k, i, &info[i], &err)) goto fail;
    size_t bytes = (size_t)elems(&info[i]) * (size_t)tessel_dtype_bytes(info[i].dtype);
    bufs[i] = aligned_alloc(64, (bytes + 63) / 64 * 64); /* the kernels load 64-byte aligned */
    if (!bufs[i]) goto out;
    if (i < tessel_kernel_num_inputs(k) && info[i].dtype == TESSEL_DT_F32)
      for (int64_t e = 0; e < elems(&info[i]); e++) ((float *)bufs[i])[e] = (float)((e * 7 + i * 3) % 13) / 13.0f - 0.5f;
    else
      memset(bufs[i], 0, bytes);
  }
  if (tessel_kernel_run(k, bufs, &err)) goto fail;
  printf("ran %s: %d inputs, %d outputs\n", info[np - 1].name, tessel_kernel_num_inputs(k),
         np - tessel_kernel_num_inputs(k));
  if (!strncmp(spec, "matmul:", 7) && np == 3) {
    double e = matmul_error(bufs[0], bufs[1], bufs[2], info[0].shape[0], info[1].shape[1], info[0].shape[1]);
    printf("max |C - A.B| = %.3g\n", e);
    if (e > 1e-3) goto out;
  }
  rc = 0;
  goto out;
fail:
  fprintf(stderr, "tune_kernel: %s (%s)\n", err.msg, tessel_strerror(err.code));
out:
  for (int i = 0; i < 16; i++) free(bufs[i]);
  tessel_kernel_free(k);
  tessel_opts_free(o);
  tessel_func_free(f);
  return rc;
}
