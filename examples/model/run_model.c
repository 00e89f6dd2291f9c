/* run_model.c — runs a model artifact built by `tessel build MODEL.onnx -o
 * MODEL.so` through the C API (include/tessel/tessel_model.h), with nothing
 * else of tessel: every input gets deterministic values, symbolic dims take
 * the value given on the command line, and the outputs' shapes and first
 * values are printed.
 *
 *   run_model MODEL.so [DIM_VALUE]
 *
 * Build (outside meson): cc -std=gnu11 run_model.c -I<prefix>/include \
 *   -Wl,--whole-archive libtessel_runtime.a -Wl,--no-whole-archive -rdynamic -lpthread -ldl
 * (the artifact's kernels call the runtime's thread pool, so the program
 * must export it: link the runtime whole and with -rdynamic). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessel/tessel_model.h"

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s MODEL.so [DIM_VALUE]\n", argv[0]);
    return 2;
  }
  int64_t dim = argc > 2 ? atoll(argv[2]) : 1;
  char err[512];
  tessel_model *m = tessel_model_load(argv[1], err, sizeof err);
  if (!m) {
    fprintf(stderr, "%s\n", err);
    return 1;
  }
  int rc = 1;
  for (int i = 0; i < tessel_model_num_inputs(m); i++) {
    tessel_tensor_info info;
    tessel_model_input_info(m, i, &info);
    int64_t shape[TESSEL_MODEL_MAX_DIMS], n = 1;
    for (int j = 0; j < info.ndim; j++) {
      shape[j] = info.shape[j] < 0 ? dim : info.shape[j];
      n *= shape[j];
    }
    if (info.dtype != TESSEL_DT_F32) {
      fprintf(stderr, "input %s is %s; this example fills f32 inputs only\n", info.name,
              tessel_dtype_name(info.dtype));
      goto out;
    }
    float *x = malloc(sizeof *x * (size_t)(n ? n : 1));
    if (!x) goto out;
    for (int64_t e = 0; e < n; e++) x[e] = (float)((e * 7919 + i * 31) % 200) / 100.0f - 1.0f;
    int st = tessel_model_set_input(m, i, x, info.ndim, shape);
    free(x);
    if (st) {
      fprintf(stderr, "%s\n", tessel_model_error(m));
      goto out;
    }
    printf("input %s:", info.name);
    for (int j = 0; j < info.ndim; j++)
      printf(" %lld%s%s", (long long)shape[j], info.dim_names[j] ? "=" : "",
             info.dim_names[j] ? info.dim_names[j] : "");
    printf("\n");
  }
  if (tessel_model_run(m)) {
    fprintf(stderr, "%s\n", tessel_model_error(m));
    goto out;
  }
  for (int i = 0; i < tessel_model_num_outputs(m); i++) {
    tessel_tensor_info info;
    tessel_model_output_info(m, i, &info);
    const void *data;
    int nd;
    int64_t shape[TESSEL_MODEL_MAX_DIMS], n = 1;
    if (tessel_model_get_output(m, i, &data, &nd, shape)) {
      fprintf(stderr, "%s\n", tessel_model_error(m));
      goto out;
    }
    printf("output %s: [", info.name);
    for (int j = 0; j < nd; j++) {
      printf("%s%lld", j ? ", " : "", (long long)shape[j]);
      n *= shape[j];
    }
    printf("]");
    if (info.dtype == TESSEL_DT_F32) {
      double sum = 0;
      for (int64_t e = 0; e < n; e++) sum += ((const float *)data)[e];
      printf(" sum %.6f first %.6f", sum, n ? ((const float *)data)[0] : 0.0f);
    }
    printf("\n");
  }
  tessel_model_stats st;
  tessel_model_get_stats(m, &st);
  printf("%d kernels, %d calls, weights %llu bytes, workspace %llu bytes (%llu without reuse)\n", st.nkernels,
         st.ncalls, (unsigned long long)st.weights_bytes, (unsigned long long)st.workspace_bytes,
         (unsigned long long)st.naive_bytes);
  rc = 0;
out:
  tessel_model_free(m);
  return rc;
}
