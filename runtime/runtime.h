/* runtime.h — runtime: the small library that generated kernels call
 * and that every measuring process links (the tessel CLI and rpc_server
 * alike, so both time kernels the same way). libc + pthreads + libdl only:
 * it must build for a small board.
 *
 *  - a persistent thread pool behind one C entry point (tsrt_parallel_launch)
 *    that generated code calls for parallel loops;
 *  - the artifact ABI: every built kernel exports `tessel_kernel_meta` (a
 *    tsrt_kernel_meta describing its parameters) and `tessel_kernel_entry`;
 *  - seeded input generation shared with the host-side verifier;
 *  - fork-isolated measurement: load an artifact in a child, time it
 *    (number × repeat, min_repeat_ms, optional cache flush, cool-down), and
 *    return per-repeat seconds and the outputs; a crash or a hang costs that
 *    child only. */
#ifndef TESSEL_RUNTIME_H
#define TESSEL_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/ts.h"

/* 2: kernels may take symbolic sizes (tsrt_kernel_meta.nsyms/syms, args
 * after the tensors, negative shape entries). */
#define TSRT_ABI_VERSION 2

/* dtype codes: the same order as ir.h's IR_DTYPE_LIST (codegen asserts it). */
enum {
  TSRT_BOOL, TSRT_I8, TSRT_I16, TSRT_I32, TSRT_I64, TSRT_U8, TSRT_U32,
  TSRT_F16, TSRT_BF16, TSRT_F32, TSRT_F64, TSRT_HANDLE, TSRT_DTYPE_COUNT
};
/* Bytes per element of a dtype code (bool: 1); 0 if unknown. */
int tsrt_dtype_bytes(int code);
const char *tsrt_dtype_name(int code);

/* ---- artifact ABI --------------------------------------------------------- */
#define TSRT_MAX_DIMS 8
/* shape[j] >= 0: a constant extent; shape[j] = TSRT_DIM_SYM(k) (-1 - k): the
 * kernel's k-th size var (tsrt_kernel_meta.syms[k]); TSRT_DIM_EXPR: some
 * other expression of the size vars (e.g. batch*4). */
#define TSRT_DIM_SYM(k) (-1 - (int64_t)(k))
#define TSRT_DIM_EXPR INT64_MIN
typedef struct tsrt_param_meta {
  const char *name;
  int32_t dtype;  /* TSRT_* */
  int32_t ndim;
  int64_t shape[TSRT_MAX_DIMS];
} tsrt_param_meta;

typedef struct tsrt_kernel_meta {
  int32_t abi_version; /* TSRT_ABI_VERSION */
  int32_t nparams;
  int32_t ninputs;     /* params[0..ninputs) are inputs, the rest outputs */
  const char *name;    /* kernel name */
  const char *workload_key;
  const tsrt_param_meta *params;
  int32_t nsyms;       /* symbolic size vars the kernel takes (0: all shapes constant) */
  const char *const *syms; /* their names, e.g. "batch" */
} tsrt_kernel_meta;

/* The kernel entry: args[i] points at param i's data (dense row-major), for
 * i < nparams; then args[nparams + k] points at an int64_t holding the
 * value of size var k (syms[k]). Returns 0 on success. */
typedef int32_t (*tsrt_kernel_fn)(void **args);

#define TSRT_META_SYMBOL "tessel_kernel_meta"
#define TSRT_ENTRY_SYMBOL "tessel_kernel_entry"

/* ---- thread pool ---------------------------------------------------------- */
/* A parallel task: called once per task_id in [0, num_tasks); returns 0 on
 * success. */
typedef int32_t (*tsrt_task_fn)(int32_t task_id, int32_t num_tasks, void *closure);
/* Runs fn for every task id in [0, num_tasks) on the pool and waits: the
 * caller and the workers claim tasks as they come (any thread may run any
 * task; each runs exactly once). num_tasks <= 0 means one per pool thread;
 * more than 2^20 - 1 tasks run serially. Nested calls run serially in the
 * calling thread. Returns the first non-zero task result, else 0. The pool
 * starts on first use with TESSEL_NUM_THREADS threads (default: all online
 * cores), its workers pinned one per CPU; idle workers spin briefly, then
 * sleep. */
int32_t tsrt_parallel_launch(tsrt_task_fn fn, void *closure, int32_t num_tasks);
int tsrt_num_threads(void);
/* The size a pool started now would have (TESSEL_NUM_THREADS, else the
 * online cores), without starting one: what a tuner records and a build
 * selects for when no --threads is given. */
int tsrt_default_num_threads(void);
/* Pins the calling thread to the slot-th CPU of the process's CPU set (as
 * captured when the pool started). The pool pins its workers to slots
 * 1..n-1; with TESSEL_PIN_CALLER=1 (set in measuring children) it also pins
 * the launching thread, which runs task 0, to slot 0. */
void tsrt_pin_current_thread(int slot);
/* For the span of a model run: pins the calling thread to slot 0 (the
 * workers have 1..n-1), so the thread that launches and runs its share of
 * every parallel loop never shares a CPU with a worker, and
 * tsrt_caller_restore gives it back the affinity it had. Nothing happens
 * with one thread or one CPU. */
typedef struct tsrt_affinity {
  unsigned char mask[128]; /* the thread's cpu_set_t before */
  bool pinned;
} tsrt_affinity;
bool tsrt_caller_pin(tsrt_affinity *saved);
void tsrt_caller_restore(const tsrt_affinity *saved);
/* Stops the pool's threads (tests; also safe to never call). */
void tsrt_pool_shutdown(void);

/* ---- oneDNN's convolution (dnnl_conv.c) ------------------------------------- */
/* dst = conv2d(src, wei), f32: src [n, c, h, w], wei [k, c/groups, r, s], dst
 * [n, k, (h + pad_t + pad_b - (r-1)*dil_h - 1) / stride_h + 1, likewise w]
 * (layout 0: NCHW, OIHW; 1 and 2: [n, c/b, h, w, b] with [k/b, c/b, r, s, b, b] weights,
 * depthwise [c/b, r, s, b], b = 8 or 16). Dilation 1 is none; a negative
 * bottom/right padding leaves the input's last rows/columns unread. What a
 * convolution task's library candidate calls (tuner/library_conv.c). The
 * primitive is made on the first call with these parameters and reused;
 * libdnnl is opened with dlopen (the runtime does not link it). 0 on
 * success; negative when oneDNN is missing or has no such convolution. */
int32_t tsrt_dnnl_conv2d_f32(int64_t n, int64_t c, int64_t h, int64_t w, int64_t k, int64_t r, int64_t s,
                             int64_t stride_h, int64_t stride_w, int64_t pad_t, int64_t pad_l, int64_t pad_b,
                             int64_t pad_r, int64_t dil_h, int64_t dil_w, int64_t groups, int64_t layout,
                             const float *src, const float *wei, float *dst);

/* ---- oneDNN's gemm on a packed weight (dnnl_packed.c) ----------------------- */
/* c[m, n] = a[m, k] . b (b [k, n], or [n, k] when trans_b), f32, row-major,
 * b packed by oneDNN on the first call with that weight (its address, sizes
 * and a fingerprint of its values) and the pack reused by every later call:
 * for weights that do not change between calls (model constants). What a
 * matrix product's "packed" library candidate calls (tuner/library.c).
 * libdnnl is opened with dlopen. 0 on success; negative when oneDNN or its
 * pack entries are missing or refuse the sizes. */
int32_t tsrt_dnnl_sgemm_packed(int64_t m, int64_t n, int64_t k, int64_t trans_b, const float *a, const float *b,
                               float *c);
/* Whether this process's libdnnl has the pack entries the call needs. */
bool tsrt_dnnl_packed_available(void);
/* True when cuBLAS (libcublas.so.13, .12 or .so; TESSEL_LIBCUBLAS names
 * another path) can be opened here: what a CUDA target's library candidate
 * needs (runtime/cuda_rt.c calls it as a step of the artifact). Opens the
 * library only, never the driver, so it is safe before a fork. */
bool tsrt_cublas_available(void);

/* ---- kernel scratch (scratch.c) -------------------------------------------- */
/* What generated kernels call for a heap buffer (too large for the stack)
 * and free before they return: a 64-byte aligned block of at least bytes,
 * NULL when out of memory. Each thread keeps the blocks it freed (up to 16,
 * 1 GiB) and hands the smallest that fits back out, so a kernel called again
 * on the same thread reuses its already faulted scratch instead of reaching
 * malloc. A block may be freed on any thread (it joins that one's cache). */
void *tsrt_scratch_alloc(uint64_t bytes);
void tsrt_scratch_free(void *p);
typedef struct tsrt_scratch_stats {
  uint64_t allocs, reuses; /* calls, and those served from a thread's kept blocks (all threads) */
  uint64_t mallocs;        /* calls that reached malloc (all threads) */
  uint64_t frees, releases;/* frees, and blocks handed back to malloc (all threads) */
  int kept_blocks;         /* the calling thread's kept blocks and their bytes */
  uint64_t kept_bytes;
} tsrt_scratch_stats;
void tsrt_scratch_get_stats(tsrt_scratch_stats *out);
/* Hands the calling thread's kept blocks back to malloc. */
void tsrt_scratch_trim(void);

/* ---- inputs --------------------------------------------------------------- */
/* Fills n elements of dtype with seeded values: floats uniform in [-1, 1),
 * signed ints in [-4, 4], unsigned in [0, 8], bool 0/1. The host verifier
 * and every board produce identical bytes for the same (dtype, n, seed). */
void tsrt_fill_random(int dtype, void *data, int64_t n, uint64_t seed);
/* FNV-1a 64 over bytes: a cheap checksum for output comparison. */
uint64_t tsrt_checksum(const void *data, size_t n);

/* ---- loading -------------------------------------------------------------- */
typedef struct tsrt_module {
  void *handle; /* dlopen handle */
  const tsrt_kernel_meta *meta;
  tsrt_kernel_fn entry;
} tsrt_module;
/* dlopen + ABI checks. TS_ELOAD with the reason in d on failure. */
ts_status tsrt_module_load(const char *path, tsrt_module *m, ts_diag *d);
void tsrt_module_unload(tsrt_module *m);
/* Total bytes of param i; 0 while a dim is symbolic, SIZE_MAX when the
 * count overflows (the measurer refuses such a kernel). */
size_t tsrt_param_bytes(const tsrt_param_meta *p);

/* ---- measurement ---------------------------------------------------------- */
typedef struct tsrt_measure_opts {
  int number;           /* runs per repeat (0: 1, then grown for min_repeat_ms) */
  int repeat;           /* timed repeats (default 3) */
  double min_repeat_ms; /* grow number until one repeat lasts this long */
  bool cache_flush;     /* write a buffer larger than the LLC before each repeat */
  double cooldown_ms;   /* sleep between repeats */
  double timeout_s;     /* the child is killed after this (default 10) */
  uint64_t seed;        /* input seed; input i uses seed + i */
  bool want_outputs;    /* return output bytes (for verification) */
  int num_threads;      /* pool size in the child (0: TESSEL_NUM_THREADS/all) */
  /* > 0: a kernel whose warm-up call took longer than this many seconds is
   * not timed again: its one repeat is the warm-up's time (res->repeat 1,
   * res->number 1). The tuner sets it to a multiple of the best time so far
   * (tun_tune_opts.slow_cutoff), so hopeless candidates cost one call, not
   * warm-up + calibration + repeat. 0: off (always `repeat` repeats). */
  double slow_stop_s;
  /* Time with the process's CPU clock (CLOCK_PROCESS_CPUTIME_ID) instead of
   * wall time: with one thread, time the kernel lost to other processes on a
   * shared machine does not count (with several threads it sums them). */
  bool cpu_time;
} tsrt_measure_opts;

#define TSRT_MAX_REPEAT 64
/* A measurement's outcome (result->status): TS_OK, TS_ELOAD (artifact failed
 * to load / ABI mismatch), TS_ECRASH (the child died on a signal),
 * TS_ETIMEOUT (killed after timeout_s), TS_EKERNEL (the kernel returned
 * non-zero), TS_ESYSTEM (fork/pipe failed), TS_ENOMEM. */

typedef struct tsrt_measure_result {
  ts_status status;
  char error[512];
  int repeat;                       /* filled repeats */
  int number;                       /* runs per repeat actually used */
  double secs[TSRT_MAX_REPEAT];     /* seconds per run, per repeat */
  int noutputs;
  uint64_t checksums[TSRT_MAX_DIMS * 2];
  void *outputs;                    /* heap (free()), concatenated outputs, if wanted */
  size_t outputs_bytes;
} tsrt_measure_result;

/* Measures the artifact at path in a forked child. Never crashes the caller;
 * result->status says what happened. */
void tsrt_measure_forked(const char *path, const tsrt_measure_opts *opts, tsrt_measure_result *result);
/* The same, in this process (no isolation) — for rpc_server's child. */
void tsrt_measure_inprocess(const tsrt_module *m, const tsrt_measure_opts *opts,
                            tsrt_measure_result *result);
/* Median of the result's per-repeat seconds (0 when none). */
double tsrt_result_median(const tsrt_measure_result *r);
void tsrt_result_fini(tsrt_measure_result *r);
/* A measurement outcome's name ("ok", "crashed", ...) and back (an unknown
 * name: TS_ESYSTEM). */
const char *tsrt_status_name(ts_status st);
ts_status tsrt_status_from_name(const char *name);

/* Monotonic seconds. */
double tsrt_now(void);

#endif
