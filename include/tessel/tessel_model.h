/* tessel_model.h — load and run a model built by `tessel build MODEL.onnx -o
 * MODEL.so` (or tessel_build_model, tessel.h). The implementation is
 * tessel's runtime (libc, pthreads and libdl only), in both libtessel and the
 * runtime-only libtessel_runtime (pkg-config tessel-runtime): the kernels
 * call the runtime's thread pool, which they find in the process's global
 * symbols (a program linked with either shared library has them; a static
 * link needs -rdynamic). See docs/API.md, docs/MODEL.md, examples/c/.
 *
 * Typical use:
 *   char err[512];
 *   tessel_model *m = tessel_model_load("mlp.so", err, sizeof err);
 *   int64_t shape[2] = {4, 64};
 *   tessel_model_set_input(m, 0, data, 2, shape);    // binds symbolic dims
 *   tessel_model_run(m);
 *   const void *out; int nd; int64_t oshape[TESSEL_MODEL_MAX_DIMS];
 *   tessel_model_get_output(m, 0, &out, &nd, oshape);
 *   tessel_model_free(m);
 *
 * Every call returns 0 on success or -1 with a message for
 * tessel_model_error. A model object is not thread-safe; separate objects
 * of one artifact are independent. */
#ifndef TESSEL_MODEL_API_H
#define TESSEL_MODEL_API_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TESSEL_MODEL_MAX_DIMS 8

/* Element types (the same codes as tessel's IR dtypes). */
enum {
  TESSEL_DT_BOOL, TESSEL_DT_I8, TESSEL_DT_I16, TESSEL_DT_I32, TESSEL_DT_I64, TESSEL_DT_U8,
  TESSEL_DT_U32, TESSEL_DT_F16, TESSEL_DT_BF16, TESSEL_DT_F32, TESSEL_DT_F64
};

typedef struct tessel_model tessel_model;

typedef struct tessel_tensor_info {
  const char *name;
  int dtype;   /* TESSEL_DT_* */
  int ndim;
  int64_t shape[TESSEL_MODEL_MAX_DIMS];   /* -1 where the dim is symbolic */
  const char *dim_names[TESSEL_MODEL_MAX_DIMS]; /* the symbol's name, or NULL */
} tessel_tensor_info;

/* Loads an artifact (dlopen) and checks its plan. NULL on failure with the
 * reason in err. A path with a slash is opened as given; a bare name is the
 * file of that name in the current directory (never dlopen's search path). */
tessel_model *tessel_model_load(const char *path, char *err, size_t errn);
/* Loading options; a zeroed struct is the default. */
typedef struct tessel_model_load_opts {
  /* No effect: the runtime leaves the process's malloc settings alone
   * (kernels' scratch buffers come from a per-thread pool that keeps them
   * faulted in between calls, docs/MODEL.md "Kernel scratch"). Kept so
   * that callers setting it still build. */
  int keep_malloc_settings;
} tessel_model_load_opts;
/* tessel_model_load with options (opts NULL: defaults). */
tessel_model *tessel_model_load_with(const char *path, const tessel_model_load_opts *opts, char *err,
                                     size_t errn);
void tessel_model_free(tessel_model *m);
/* The last error message ("" if none). */
const char *tessel_model_error(const tessel_model *m);

int tessel_model_num_inputs(const tessel_model *m);
int tessel_model_num_outputs(const tessel_model *m);
/* Index of the input / output named name, or -1. */
int tessel_model_input_index(const tessel_model *m, const char *name);
int tessel_model_output_index(const tessel_model *m, const char *name);
/* Declared dtype and shape (symbolic dims -1 with their names). */
int tessel_model_input_info(const tessel_model *m, int i, tessel_tensor_info *out);
int tessel_model_output_info(const tessel_model *m, int i, tessel_tensor_info *out);
/* Bytes per element of a TESSEL_DT_* (0 if unknown) and its name. */
int tessel_dtype_bytes(int dtype);
const char *tessel_dtype_name(int dtype);

/* Copies input i (dense row-major, of the declared dtype) with the given
 * shape: constant dims must match, symbolic dims bind the model's symbols
 * (every input naming a symbol must agree). */
int tessel_model_set_input(tessel_model *m, int i, const void *data, int ndim, const int64_t *shape);
/* tessel_model_set_input without the copy where it can: data (the caller's,
 * dense row-major, of the declared dtype) is used in place when it is
 * 64-byte aligned (the kernels' buffer alignment) and must then stay valid
 * and unchanged until the input is set again or the model is freed; else it
 * is copied. *borrowed (optional) says which. */
int tessel_model_bind_input(tessel_model *m, int i, const void *data, int ndim, const int64_t *shape,
                            int *borrowed);
/* Runs every kernel in order. Needs every input set; the memory plan is
 * recomputed when the bound sizes change. */
int tessel_model_run(tessel_model *m);
/* Per-call profiling (TVM's debug executor in spirit): while on, every run
 * times each kernel call; get_call_profile gives call c's kernel name and its
 * mean seconds over the runs since profiling was switched on (set_profiling
 * resets). The timer costs ~2 clock reads per call. */
int tessel_model_set_profiling(tessel_model *m, int on);
int tessel_model_get_call_profile(const tessel_model *m, int call, const char **kernel, double *mean_secs);
/* Which kernel call c's last run used (docs/MODEL.md "Shape buckets"): *spec
 * the index of its specialisation (smallest bucket first), -1 for the
 * symbolic kernel (also before any run); *nspecs how many it has; *values
 * (the call's size vars' bucket values) and *covers (1: a padded bucket
 * kernel running any sizes up to values, 0: exactly values) for the one used.
 * Any out pointer may be NULL. */
int tessel_model_get_call_spec(const tessel_model *m, int call, int *spec, int *nspecs, const int64_t **values,
                               int *covers);
/* Output i of the last run: *data stays valid until the next run or free. */
int tessel_model_get_output(const tessel_model *m, int i, const void **data, int *ndim,
                            int64_t shape[TESSEL_MODEL_MAX_DIMS]);

/* Copies output i of the last run into the caller's buffer dst of dst_bytes
 * (at least the output's size: tessel_dtype_bytes x its shape's product from
 * tessel_model_get_output). */
int tessel_model_copy_output(const tessel_model *m, int i, void *dst, size_t dst_bytes);

/* Facts about the artifact and the last memory plan. */
typedef struct tessel_model_stats {
  int nkernels, ncalls, ntensors, nsyms;
  uint64_t weights_bytes;
  uint64_t workspace_bytes; /* intermediates, with reuse (last plan) */
  uint64_t naive_bytes;     /* intermediates without reuse (last plan) */
  const char *target;       /* the target string it was built for */
} tessel_model_stats;
int tessel_model_get_stats(const tessel_model *m, tessel_model_stats *out);
/* The value bound to symbol name in the last set_input/run, or -1. */
int64_t tessel_model_symbol(const tessel_model *m, const char *name);

#ifdef __cplusplus
}
#endif

#endif
