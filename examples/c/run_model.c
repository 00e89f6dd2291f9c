/* run_model.c — runs a built model with the runtime-only library
 * (include/tessel/tessel_model.h, pkg-config tessel-runtime): the inputs
 * live in the program's own 64-byte aligned buffers, bound without a copy
 * (tessel_model_bind_input), symbolic dims take the value given, and the
 * outputs are copied into the program's buffers (tessel_model_copy_output)
 * and summarised.
 *
 *   run_model MODEL.so [DIM_VALUE]     (build one: tessel build MODEL.onnx -o MODEL.so)
 *
 * Build: cc -std=gnu11 run_model.c $(pkg-config --cflags --libs tessel-runtime)
 * (or libtessel: pkg-config tessel; from a build folder the -uninstalled
 * names with PKG_CONFIG_PATH=build/meson-uninstalled). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessel/tessel_model.h>

static size_t nbytes(int dtype, int ndim, const int64_t *shape) {
  size_t n = (size_t)tessel_dtype_bytes(dtype);
  for (int j = 0; j < ndim; j++) n *= (size_t)shape[j];
  return n;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s MODEL.so [DIM_VALUE]\n", argv[0]);
    return 2;
  }
  int64_t dim = argc > 2 ? strtoll(argv[2], NULL, 10) : 1;
  char err[512];
  tessel_model *m = tessel_model_load(argv[1], err, sizeof err);
  if (!m) {
    fprintf(stderr, "run_model: %s\n", err);
    return 1;
  }
  int ni = tessel_model_num_inputs(m), no = tessel_model_num_outputs(m), rc = 1;
  void **in = calloc((size_t)ni, sizeof *in);
  for (int i = 0; in && i < ni; i++) {
    tessel_tensor_info t;
    tessel_model_input_info(m, i, &t);
    for (int j = 0; j < t.ndim; j++)
      if (t.shape[j] < 0) t.shape[j] = dim; /* a symbolic dim */
    size_t n = nbytes(t.dtype, t.ndim, t.shape);
    if (!(in[i] = aligned_alloc(64, (n + 63) / 64 * 64))) goto out;
    memset(in[i], 0, n);
    if (t.dtype == TESSEL_DT_F32)
      for (size_t e = 0; e < n / 4; e++) ((float *)in[i])[e] = (float)(e % 17) / 17.0f - 0.25f;
    int borrowed = 0;
    if (tessel_model_bind_input(m, i, in[i], t.ndim, t.shape, &borrowed)) goto fail;
    printf("input %s: %s, %s\n", t.name, tessel_dtype_name(t.dtype), borrowed ? "bound in place" : "copied");
  }
  if (tessel_model_run(m)) goto fail;
  for (int i = 0; i < no; i++) {
    tessel_tensor_info t;
    const void *data;
    int nd;
    int64_t shape[TESSEL_MODEL_MAX_DIMS];
    tessel_model_output_info(m, i, &t);
    if (tessel_model_get_output(m, i, &data, &nd, shape)) goto fail;
    size_t n = nbytes(t.dtype, nd, shape);
    void *mine = malloc(n ? n : 1);
    if (!mine || tessel_model_copy_output(m, i, mine, n)) {
      free(mine);
      goto fail;
    }
    printf("output %s: %s [", t.name, tessel_dtype_name(t.dtype));
    for (int j = 0; j < nd; j++) printf("%s%lld", j ? ", " : "", (long long)shape[j]);
    printf("]");
    if (t.dtype == TESSEL_DT_F32) {
      double s = 0;
      for (size_t e = 0; e < n / 4; e++) s += ((float *)mine)[e];
      printf(" sum %.6g", s);
    }
    printf("\n");
    free(mine);
  }
  rc = 0;
  goto out;
fail:
  fprintf(stderr, "run_model: %s\n", tessel_model_error(m));
out:
  for (int i = 0; in && i < ni; i++) free(in[i]);
  free(in);
  tessel_model_free(m);
  return rc;
}
