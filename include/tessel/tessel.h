/* tessel.h — the C API for embedding tessel: parse a kernel, tune a kernel
 * or an ONNX model against a tuning log (the CLI's options, a progress
 * callback, cancellation, a local or RPC runner), build a kernel or a model
 * from the log, load and call a built kernel, read a log's best records.
 * Running a built model is tessel_model.h (included here; it is also all of
 * the runtime-only libtessel_runtime). The header is self-contained: it
 * declares only opaque handles and plain structs, so a program needs
 * nothing but `pkg-config --cflags --libs tessel`. (The IR, parser,
 * interpreter and workload headers are installed beside it, under
 * tessel/ir/ and tessel/base/, for programs that work on the IR itself.)
 * docs/API.md has the whole story; examples/c/ shows it in use.
 *
 * Errors: every call that can fail returns a tessel_status (TESSEL_OK = 0)
 * and, when err is not NULL, fills it with the status and a message naming
 * what went wrong and where (the file, the option, the input). The message
 * is the one the CLI prints.
 *
 * Ownership: a handle made by tessel_X_new / _parse / _load / _open is the
 * caller's and is freed by the matching _free / _close (NULL is a no-op).
 * Strings passed in are copied unless said otherwise; strings handed out
 * live as long as the handle they came from.
 *
 * Threads: distinct handles may be used from different threads at once; one
 * handle is not safe to use from two threads at once (except the cancel flag
 * of tessel_opts_set_cancel, which any thread may set). Tuning forks its
 * measuring and building children and locks its log (a second tuner on the
 * same log is refused), so run one tune per process at a time. */
#ifndef TESSEL_TESSEL_H
#define TESSEL_TESSEL_H

#include <stddef.h>
#include <stdint.h>

#include "tessel_model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The library's version ("0.1.0"). */
const char *tessel_version(void);

/* ---- status and errors ------------------------------------------------------ */
/* The same codes as tessel's internal statuses, plus TESSEL_ECANCELED for a
 * run stopped by its progress callback or cancel flag. */
typedef enum tessel_status {
  TESSEL_OK = 0, TESSEL_ENOMEM, TESSEL_EINVAL, TESSEL_EPARSE, TESSEL_ENOTFOUND, TESSEL_ETYPE,
  TESSEL_ESHAPE, TESSEL_EBOUNDS, TESSEL_EIO, TESSEL_EUNSUPPORTED, TESSEL_ESCHEDULE, TESSEL_ERUNTIME,
  TESSEL_EMISMATCH, TESSEL_ETIMEOUT, TESSEL_EINTERNAL, TESSEL_EPROTO, TESSEL_EVERSION, TESSEL_EAUTH,
  TESSEL_EDENIED, TESSEL_ETOOBIG, TESSEL_EREMOTE, TESSEL_EPENDING, TESSEL_ECLOSED, TESSEL_ESYSTEM,
  TESSEL_ELOAD, TESSEL_ECRASH, TESSEL_EKERNEL,
  TESSEL_ECANCELED = 100
} tessel_status;

#define TESSEL_ERROR_MAX 2048
/* Filled by a failing call (code and message); untouched on success. */
typedef struct tessel_error {
  tessel_status code;
  char msg[TESSEL_ERROR_MAX];
} tessel_error;

/* A static description of a status ("invalid argument"); never NULL. */
const char *tessel_strerror(tessel_status st);

/* ---- kernels: what to tune ------------------------------------------------------
 * A tessel_func is one kernel without symbolic sizes left: a built-in
 * workload spec ("matmul:m=1024,n=1024,k=1024", see `tessel workloads`) or
 * a function in the compute DSL (docs/DSL.md). */
typedef struct tessel_func tessel_func;

/* subject: a workload spec, or the path of a DSL file (its one function, or
 * FILE#NAME) — what `tessel tune SUBJECT` takes. TESSEL_ENOTFOUND for
 * neither, TESSEL_EPARSE / TESSEL_EINVAL for a bad spec or file. */
tessel_status tessel_func_parse(const char *subject, tessel_func **out, tessel_error *err);
/* DSL source text (copied); name picks one function when the text holds
 * several (NULL: the only one). Errors name "<dsl>:LINE:COL". */
tessel_status tessel_func_from_dsl(const char *source, const char *name, tessel_func **out, tessel_error *err);
void tessel_func_free(tessel_func *f);
/* The canonical spec, or the DSL text: what the log records as the
 * workload. */
const char *tessel_func_definition(const tessel_func *f);
/* The workload key the log indexes (16 hex digits). */
const char *tessel_func_key(const tessel_func *f);
/* FLOPs of a built-in workload; 0 for DSL kernels. */
double tessel_func_flops(const tessel_func *f);

/* ---- options ------------------------------------------------------------------------
 * One options object for tune, tune_model, build and build_model, set by
 * the CLI's long option names (without "--") and values as text, so that a
 * new CLI option needs one table row here (tuner/capi_opts.c) and no new
 * ABI:
 *   target T (default "llvm": the host), log PATH, trials N, batch N,
 *   model xgb|random, seed S, build-jobs N, slow-cutoff F, first-batch N,
 *   xgb-min-samples N, xgb-max-rounds N, number N, repeat N,
 *   min-repeat-ms MS, timeout S, threads N, population N, and the flags
 *   cache-flush, no-layout-rewrite, no-tensorize, no-tensor-core,
 *   gpu-regcheck, no-default-tiling ("1"/"true"/"on"/NULL on,
 *   "0"/"false"/"off" off);
 *   the runner: runner local|rpc, tracker H:P, key K, parallel N,
 *   secret-file F, priority P, rpc-wait S, rpc-tries N;
 *   models: sym NAME=VALUE (also bind; repeatable), buckets NAME=V1,V2,...
 *   (repeatable: shape buckets, docs/MODEL.md), winograd on|off|all,
 *   polyphase on|off, qdq ..., task-scheduler gradient|round-robin,
 *   no-default (flag);
 *   verbose (flag): the CLI's progress lines and notes on stderr (default
 *   off: quiet apart from warnings about the log).
 * TESSEL_EINVAL names the option and what it wants. */
typedef struct tessel_opts tessel_opts;

tessel_status tessel_opts_new(tessel_opts **out, tessel_error *err);
void tessel_opts_free(tessel_opts *o);
tessel_status tessel_opts_set(tessel_opts *o, const char *name, const char *value, tessel_error *err);
/* The value set for name as text (NULL if unset or unknown); lives until the
 * next set of that name or free. */
const char *tessel_opts_get(const tessel_opts *o, const char *name);

/* Progress: called in the tuning thread before the first batch, after each
 * batch, and at the end of a run that was not stopped (also when the log
 * met the budget already: at least one call), with the log's records
 * counted against the trial
 * budget (the whole model's for tessel_tune_model) and the best verified
 * mean in seconds so far (0: none, and always 0 for a model). A nonzero
 * return stops the run before the next batch (TESSEL_ECANCELED). */
typedef int (*tessel_progress_fn)(void *ctx, int done, int total, double best_seconds);
void tessel_opts_set_progress(tessel_opts *o, tessel_progress_fn fn, void *ctx);
/* Cancellation from another thread: when *flag becomes nonzero the run stops
 * before its next batch (TESSEL_ECANCELED). The flag must outlive the run. */
void tessel_opts_set_cancel(tessel_opts *o, const volatile int *flag);

/* ---- tuning ---------------------------------------------------------------------------
 * Results: set size = sizeof the struct before the call (the library fills
 * no more than that, so a program built against an older header keeps
 * working). What was measured is in the log whatever the status: a rerun
 * with the same log resumes (records already there count toward trials). */
typedef struct tessel_tune_result {
  size_t size;
  int trials;              /* records of this workload+target in the log */
  int new_trials;          /* measured by this call */
  int errors;              /* error records of this workload+target */
  double best_seconds;     /* best verified mean (0: none) */
  double best_gflops;
  double baseline_seconds; /* the default schedule (0: not measured) */
  double baseline_gflops;
  double wall_seconds;
  char target[700];        /* the canonical target the records are for */
} tessel_tune_result;

/* Tunes f: options trials and log are required. TESSEL_EINVAL for missing
 * or bad options, TESSEL_EPENDING when the log is in use by another
 * process, TESSEL_ECANCELED when stopped (res filled), the runner's errors. */
tessel_status tessel_tune(const tessel_func *f, const tessel_opts *o, tessel_tune_result *res, tessel_error *err);

typedef struct tessel_tune_model_result {
  size_t size;
  int ntasks;
  int trials;                /* Σ records of the tasks in the log */
  int new_trials;
  int rounds;
  double estimated_seconds;  /* Σ weight x best latency (the default schedule where untuned) */
  int missing;               /* tasks left out of the estimate (neither measured) */
  double wall_seconds;
  char target[700];
} tessel_tune_model_result;

/* Tunes the ONNX model at path (its tasks, as `tessel tune-model`):
 * options trials and log are required; sym binds symbolic dims. Errors: the
 * import's (TESSEL_EIO / TESSEL_EPARSE for a missing or corrupt model,
 * TESSEL_EUNSUPPORTED for an op), and tessel_tune's. */
tessel_status tessel_tune_model(const char *path, const tessel_opts *o, tessel_tune_model_result *res,
                                tessel_error *err);

/* ---- building ------------------------------------------------------------------------
 * From the log's best verified record for the workload and target (option
 * log; when it does not replay, the next best), or the default schedule
 * when no log is set. A log with no usable record for it is
 * TESSEL_ENOTFOUND. out: the artifact's path. */
tessel_status tessel_build(const tessel_func *f, const tessel_opts *o, const char *out, tessel_error *err);
/* The ONNX model at path into one shared library at out (and out.json),
 * what tessel_model_load runs. Options: target, log, sym, winograd,
 * polyphase, qdq. */
tessel_status tessel_build_model(const char *path, const tessel_opts *o, const char *out, tessel_error *err);

/* ---- built kernels ----------------------------------------------------------------------
 * A kernel artifact (tessel_build, `tessel build`) loaded into this process.
 * Its parameters are its inputs, then its outputs (tessel_tensor_info:
 * name, dtype, shape). */
typedef struct tessel_kernel tessel_kernel;

/* TESSEL_ELOAD with the reason (not found, not a tessel kernel, ABI). A path
 * without a slash is taken in the current directory. */
tessel_status tessel_kernel_load(const char *path, tessel_kernel **out, tessel_error *err);
void tessel_kernel_free(tessel_kernel *k);
int tessel_kernel_num_params(const tessel_kernel *k);
int tessel_kernel_num_inputs(const tessel_kernel *k);
tessel_status tessel_kernel_param_info(const tessel_kernel *k, int i, tessel_tensor_info *out, tessel_error *err);
/* Calls the kernel once: args[i] is parameter i's buffer (dense row-major,
 * of its dtype and shape, 64-byte aligned: the kernels load aligned), owned
 * by the caller. TESSEL_EINVAL for a NULL or misaligned buffer,
 * TESSEL_EKERNEL when the kernel fails. Calls on one kernel from several
 * threads are safe when their buffers are distinct. */
tessel_status tessel_kernel_run(const tessel_kernel *k, void *const *args, tessel_error *err);

/* ---- tuning logs --------------------------------------------------------------------------
 * A log opened read-only (never locked: a tuner may be appending). */
typedef struct tessel_log tessel_log;

/* One record; the strings live as long as the log handle. */
typedef struct tessel_record {
  const char *workload;     /* the canonical spec, or the DSL text */
  const char *workload_key;
  const char *target;
  const char *trace;        /* the schedule's trace (JSON) */
  const char *error;        /* NULL unless the candidate failed */
  int verified;             /* outputs matched the reference interpreter */
  int nruns;
  double mean_seconds;      /* 1e10 for an error record */
  double gflops;            /* 0 when the workload is not a built-in spec */
  double build_seconds;
  double time;              /* unix seconds */
} tessel_record;

/* Corrupt lines are skipped (counted by tessel_log_skipped). TESSEL_EIO
 * naming the path when it cannot be read. */
tessel_status tessel_log_open(const char *path, tessel_log **out, tessel_error *err);
void tessel_log_close(tessel_log *l);
int tessel_log_count(const tessel_log *l);
int tessel_log_skipped(const tessel_log *l);
/* Record i in log order. TESSEL_EBOUNDS outside [0, count). */
tessel_status tessel_log_record(const tessel_log *l, int i, tessel_record *out, tessel_error *err);
/* The best verified, error-free record of each (workload, target) pair in
 * the log, in the log order of each pair's first record: workload
 * (NULL: any) is a spec, a key or a DSL text; target (NULL: any) a target
 * string ("llvm" means the host's canonical one). Fills up to max records
 * and returns how many pairs have one (call with max 0 to count). */
int tessel_log_best(const tessel_log *l, const char *workload, const char *target, tessel_record *out, int max);

/* The canonical form of a target string (what the log records), into buf;
 * TESSEL_EINVAL for a bad target. */
tessel_status tessel_target_canonical(const char *target, char *buf, size_t n, tessel_error *err);

#ifdef __cplusplus
}
#endif

#endif
