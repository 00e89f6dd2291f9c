/* model_build.h — the model compiler: an ONNX model to one shared library
 * the graph executor (runtime/model.h) runs. Import, the graph pass
 * pipeline (fold, legalize, fuse: ir/graph/passes.h), one kernel per
 * distinct fused PrimFunc scheduled from the tuning log's best record or by
 * the default schedule, the execution plan with pre-packed weights, and the
 * link. The CLI's `build`, `tune-model`, `tasks` and `graph show` are thin
 * wrappers over these calls; docs/MODEL.md has the whole story.
 *
 * Errors: every function returns a ts_status and fills the ts_diag with a
 * message that names the model (or the artifact) and the problem: TS_EIO /
 * TS_EPARSE for a missing or corrupt model, TS_EINVAL for a --sym the model
 * does not have or a bad target, TS_EUNSUPPORTED for an op or shape the
 * passes cannot express, TS_ENOMEM. */
#ifndef TESSEL_TUNER_MODEL_BUILD_H
#define TESSEL_TUNER_MODEL_BUILD_H

#include <stdio.h>

#include "ir/graph/graph.h"
#include "ir/graph/tasks.h"

#define TUN_MODEL_MAX_SYMS 16
#define TUN_MODEL_MAX_BUCKET_SYMS 4 /* symbols with --buckets */
#define TUN_MODEL_MAX_BUCKETS 16    /* values per symbol */
#define TUN_MODEL_MAX_COMBOS 64     /* combinations of them */

/* What to build and how. Plain data the caller owns; strings it points to
 * must outlive the calls (the sym names are copied into sym_buf). */
typedef struct tun_model_opts {
  const char *target;   /* target text; NULL: "llvm" (the host) */
  const char *log;      /* tuning log whose best records are replayed; NULL: default schedules */
  int threads;          /* the thread count the build is for: the log's records at it first, else
                         * the best of any count (said on warn); 0: TESSEL_NUM_THREADS or all cores */
  tg_pass_opts graph;   /* the graph passes' switches (--winograd, --polyphase, --qdq, --conv-layout;
                         * tun_model_opts_init sets conv_block -1: nchwc, the block from the target) */
  int nsyms;            /* symbolic dims at the sizes they were tuned at (the task keys' binding) */
  const char *sym_names[TUN_MODEL_MAX_SYMS];
  int64_t sym_values[TUN_MODEL_MAX_SYMS];
  char sym_buf[TUN_MODEL_MAX_SYMS][128];
  FILE *warn;           /* notes on records that do not replay or lose their layout; NULL: quiet */
  /* Shape buckets (--buckets NAME=V1,V2,..., docs/MODEL.md "Shape buckets"):
   * tasks are bound at every combination of the bucket symbols' values (the
   * other symbols at their --sym values) and a build emits a specialisation
   * per combination. nbuckets 0: the one binding of the --sym values. */
  int nbuckets;
  char bucket_names[TUN_MODEL_MAX_BUCKET_SYMS][128];
  int nbucket_values[TUN_MODEL_MAX_BUCKET_SYMS];
  int64_t bucket_values[TUN_MODEL_MAX_BUCKET_SYMS][TUN_MODEL_MAX_BUCKETS]; /* ascending, distinct */
} tun_model_opts;

void tun_model_opts_init(tun_model_opts *o);
/* Adds "NAME=VALUE" (VALUE >= 1) to o's symbols. TS_EINVAL saying what is
 * expected, or that there are more than TUN_MODEL_MAX_SYMS. */
ts_status tun_model_opts_add_sym(tun_model_opts *o, const char *spec, ts_diag *d);
/* Adds "NAME=V1,V2,..." (values >= 1, sorted and deduplicated) to o's
 * buckets. TS_EINVAL saying what is expected: a bad value, a NAME given
 * twice or also with --sym, over TUN_MODEL_MAX_BUCKET_SYMS names, over
 * TUN_MODEL_MAX_BUCKETS values, over TUN_MODEL_MAX_COMBOS combinations. */
ts_status tun_model_opts_add_buckets(tun_model_opts *o, const char *spec, ts_diag *d);
/* How many bindings o's buckets make (1 without buckets). */
int tun_model_bucket_count(const tun_model_opts *o);
/* Binding i (0 <= i < tun_model_bucket_count) as names/values (arrays of
 * TUN_MODEL_MAX_SYMS + TUN_MODEL_MAX_BUCKET_SYMS): the --sym values, then
 * the bucket symbols' values of combination i. Returns how many. */
int tun_model_bucket_binding(const tun_model_opts *o, int i, const char **names, int64_t *values);

/* Imports the ONNX model at path into m and runs the graph pass pipeline
 * with o->graph up to and including stop_after (NULL: all of it; "" : none).
 * Every symbol in o must name a symbolic dim of the model. *g lives in m
 * (the caller frees m). */
ts_status tun_model_import(const char *path, const tun_model_opts *o, const char *stop_after, ir_module *m,
                           tg_graph **g, ts_diag *d);
/* tun_model_import and the model's tuning tasks bound at o's symbols
 * (tg_extract_tasks_at); with buckets, the tasks of every binding, each
 * distinct bound function once, a symbolic one named NAME@SYM=V,... after
 * its bucket values. *tasks is a heap array (tg_tasks_free); what it
 * points to lives in m. */
ts_status tun_model_tasks(const char *path, const tun_model_opts *o, ir_module *m, tg_graph **g, tg_task **tasks,
                          int *ntasks, ts_diag *d);

/* The tasks as the task scheduler takes them (tuner/task_scheduler.h):
 * a heap array (ts_free) pointing into tasks; NULL on OOM. A task whose
 * key differs from its function's workload key is noted on warn. */
struct tun_model_task *tun_model_sched_tasks(const tg_task *tasks, int n, FILE *warn);

/* One kernel of a built model. */
typedef struct tun_model_kernel {
  char name[128];
  char key[17];          /* task key (bound as tasks bind) */
  bool tuned;            /* the log's record was replayed on it */
  bool symbolic;         /* it serves every size of a symbolic dim */
  bool specialisation;   /* a tuned copy of a symbolic kernel for the tuned sizes */
  bool covers;           /* a specialisation padded to its bucket: runs every size up to it */
  int npacked;           /* params whose constant was pre-packed into the kernel's layout */
  int packed_params[8];
} tun_model_kernel;

/* What a build made. Heap parts freed by tun_model_result_fini. */
typedef struct tun_model_result {
  char target[700];      /* canonical target text */
  int kernels;           /* distinct kernels, specialisations not counted */
  int ntuned, ndefault, nspec;
  int ncovering;         /* specialisations that cover every size up to their bucket (nspec counts them) */
  int nrecord_unused;    /* kernels whose log record did not replay (default schedule instead) */
  int threads;           /* the thread count the build selected records for */
  int nother_threads;    /* kernels with no record at that count, built from another count's best */
  int nlayout_kept;      /* records whose weight re-layout was dropped */
  int nlibrary;          /* kernels that call a library (library records); the model links it */
  int nlib_generic;      /* of those, symbolic (generic) kernels: the call serves every size */
  int nlib_below;        /* of those, calls below a padded bucket, where padding costs more (docs/MODEL.md) */
  int ncalls, ntensors;
  uint64_t weights_bytes;
  int npacked_weights, npacked_copies;
  double build_seconds, codegen_seconds;
  int nk;                /* every kernel, specialisations included */
  tun_model_kernel *k;
} tun_model_result;

/* Builds the model at path into the shared library out (and its signature
 * out.json, which `tessel run` reads for a cross-built artifact). r is
 * filled on success and zeroed on failure; either way the caller calls
 * tun_model_result_fini. */
ts_status tun_model_build(const char *path, const char *out, const tun_model_opts *o, tun_model_result *r,
                          ts_diag *d);
void tun_model_result_fini(tun_model_result *r);

#endif
