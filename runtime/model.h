/* model.h — the model artifact's ABI (what `tessel build MODEL.onnx` puts in
 * a shared library: one kernel per distinct fused PrimFunc, the plan
 * `tessel_model_plan` as relocated C structs, the weights as one aligned
 * blob) and the graph executor that runs it. libc + pthreads + libdl only,
 * like the rest of the runtime: tessel-rpc-server runs models with it on a
 * board. docs/MODEL.md describes the format, the memory plan and the API. */
#ifndef TESSEL_RUNTIME_MODEL_H
#define TESSEL_RUNTIME_MODEL_H

#include "runtime.h"

#define TSRT_MODEL_ABI_VERSION 3 /* 3: a call's specialisations are a list (shape buckets) */
#define TSRT_MODEL_SYMBOL "tessel_model_plan"
#define TSRT_MODEL_MAX_SYMS 32

enum { TSRT_T_INPUT = 0, TSRT_T_CONST = 1, TSRT_T_INTER = 2 };

typedef struct tsrt_model_tensor {
  const char *name;
  int32_t kind;  /* TSRT_T_* */
  int32_t dtype; /* TSRT_* */
  int32_t ndim;
  int32_t reserved;
  int64_t shape[TSRT_MAX_DIMS]; /* >= 0: constant; TSRT_DIM_SYM(k): model symbol k */
  uint64_t offset;              /* TSRT_T_CONST: byte offset into the weights */
  uint64_t nbytes;              /* TSRT_T_CONST: byte size */
} tsrt_model_tensor;

/* A specialisation of a call's symbolic kernel (docs/MODEL.md "Shape
 * buckets"): kernel `kernel` runs the call instead of the symbolic one when
 * the call's sizes fit. covers 0: exactly when every size var k is bound to
 * values[k]; the kernel takes no sizes (a schedule tuned at those sizes).
 * covers 1: when every size var k is at most values[k]; the kernel takes the
 * sizes like the symbolic one (the tuned schedule on the function padded to
 * the bucket, guarded to the call's own sizes). */
typedef struct tsrt_model_spec {
  int32_t kernel;
  int32_t covers;
  const int64_t *values; /* the call's nsyms values */
} tsrt_model_spec;

typedef struct tsrt_model_call {
  int32_t kernel;      /* index into kernels */
  int32_t nargs;       /* == the kernel's nparams */
  const int32_t *args; /* tensor ids: the kernel's params in order */
  int32_t nsyms;       /* == the kernel's nsyms */
  const int32_t *syms; /* model symbol index for each kernel size var */
  /* The specialisations, smallest bucket first: the first that fits the
   * bound sizes runs; none fits: the symbolic kernel. */
  int32_t nspecs;
  int32_t ninputs;     /* args[0..ninputs) are read, the rest written */
  const tsrt_model_spec *specs;
} tsrt_model_call;

typedef struct tsrt_model_kernel {
  const tsrt_kernel_meta *meta;
  tsrt_kernel_fn entry;
} tsrt_model_kernel;

/* How model symbol k gets its value. A base symbol (nfactors 0) is bound
 * from the inputs' dims; a derived one is coeff times the product of base
 * symbols factors[] (a Flatten's batch*seq, ViT's 12*batch heads: graph
 * dims that are products, ir/graph/dim.c), computed once the inputs are set. */
typedef struct tsrt_model_symdef {
  int64_t coeff;
  int32_t nfactors;
  int32_t reserved;
  const int32_t *factors;
} tsrt_model_symdef;

typedef struct tsrt_model_plan {
  int32_t abi_version; /* TSRT_MODEL_ABI_VERSION */
  int32_t ntensors, ncalls, nkernels, nsyms, ninputs, noutputs;
  const char *name;   /* the graph's name */
  const char *target; /* the target string it was built for */
  const char *const *syms;
  const tsrt_model_tensor *tensors;
  const tsrt_model_call *calls;
  const tsrt_model_kernel *kernels;
  const int32_t *inputs;  /* tensor ids */
  const int32_t *outputs; /* tensor ids */
  const uint8_t *weights;
  uint64_t weights_bytes;
  const tsrt_model_symdef *symdefs; /* nsyms of them; NULL: every symbol is a base symbol */
} tsrt_model_plan;

/* Checks a plan's internal consistency (ids in range, kernels' param counts,
 * dtypes and constant dims against the tensors, constants inside the
 * weights, every intermediate produced once before use). Returns TS_OK, or
 * TS_EINVAL / TS_ENOMEM with the reason in d. Used by the loader and by the
 * builder (host-side, kernels may be NULL there: then kernel checks are
 * skipped). */
ts_status tsrt_model_plan_check(const tsrt_model_plan *p, ts_diag *d);

/* The executor. The public API (include/tessel/tessel_model.h) wraps it;
 * tessel_model is the same object. */
typedef struct tessel_model tsrt_model;

/* The memory plan for given symbol values: one byte offset per tensor into a
 * single workspace (intermediates only; -1 for inputs/constants), the
 * workspace size, and what a plan without reuse would need. Liveness-based:
 * an intermediate is live from the call that writes it to its last reader
 * (graph outputs to the end); a freed block is reused best-fit by later
 * tensors, never by an output of the call that frees it (kernels take
 * non-overlapping buffers). TS_EINVAL: overflow, bad plan; TS_ENOMEM. */
ts_status tsrt_model_memory_plan(const tsrt_model_plan *p, const int64_t *sym_values, int64_t *offsets,
                                 uint64_t *workspace_bytes, uint64_t *naive_bytes, ts_diag *d);

/* Loading options (the public tessel_model_load_opts). */
typedef struct tsrt_model_load_opts {
  /* No effect: the runtime never changes the process's malloc settings
   * (kernel scratch comes from the per-thread pool, runtime/scratch.c).
   * Kept so that callers setting it still build. */
  bool keep_malloc_settings;
} tsrt_model_load_opts;
/* Loads the model artifact at path (o may be NULL: defaults). Errors:
 * TS_ELOAD (dlopen, not a model, a bad plan), TS_ENOMEM. */
ts_status tsrt_model_load(const char *path, const tsrt_model_load_opts *o, tsrt_model **out, ts_diag *d);

/* ---- running a model in a forked child (rpc_server's "run_model") ---------- */
typedef struct tsrt_model_io {
  char name[128];
  int32_t dtype;
  int32_t ndim;
  int64_t shape[TSRT_MAX_DIMS];
  void *data; /* heap (malloc) in results; the caller's in inputs */
  size_t nbytes;
} tsrt_model_io;

typedef struct tsrt_model_run_result {
  ts_status status;
  char error[512];
  int nsecs;                     /* timed runs (after one warm-up run) */
  double secs[TSRT_MAX_REPEAT];
  int noutputs;
  tsrt_model_io *outputs;        /* heap; tsrt_model_run_result_fini */
} tsrt_model_run_result;

/* Loads the model at path in a forked child, sets every model input from the
 * io of the same name (all must be given), runs once, then `repeat` timed
 * runs (0: none), and sends the outputs back through a pipe. A crash, a
 * kernel error or timeout_s costs the child only; res->status says what
 * happened (TS_ELOAD also for missing/ill-shaped inputs, with the reason). */
void tsrt_model_run_forked(const char *path, const tsrt_model_io *inputs, int ninputs, int repeat,
                           double timeout_s, int num_threads, tsrt_model_run_result *res);
void tsrt_model_run_result_fini(tsrt_model_run_result *res);

#endif
