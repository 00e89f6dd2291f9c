/* tune.h — the tuning loop for one kernel: search -> build (both cores) ->
 * measure (alone) -> verify -> record -> update the cost model, batch after
 * batch, until the trial budget counts the log's records for this workload
 * and target (resumed ones included). Every failure (replay, build, crash,
 * timeout, wrong output) becomes an error record and tuning goes on. */
#ifndef TESSEL_TUNER_TUNE_H
#define TESSEL_TUNER_TUNE_H

#include "codegen/codegen.h"
#include "runtime/runtime.h"
#include "search/search.h"
#include "tuner/build.h"
#include "tuner/database.h"

typedef struct tun_tune_opts {
  int trials;              /* budget of measurement records for this workload+target */
  int batch;               /* candidates per batch (64) */
  const char *log_path;
  const char *model;       /* "xgb" (default) or "random" */
  uint64_t seed;
  tsrt_measure_opts measure; /* number/repeat/min_repeat_ms/timeout/cache_flush/threads */
  int build_jobs;          /* parallel builds (0: all cores) */
  bool progress_tty;       /* one live progress line (else plain lines) */
  FILE *progress;          /* stderr */
  int population;          /* evolutionary search population (0: 512) */
  /* A candidate whose warm-up call is slower than slow_cutoff x the best
   * time so far is recorded with that one call instead of warm-up +
   * calibration + repeat (tsrt_measure_opts.slow_stop_s); 0: off. Default
   * 10 (docs/COSTMODEL.md, "Phase timings"). */
  double slow_cutoff;
  int first_batch;         /* > 0: the search's first batch is this small (srch_evo_opts) */
  /* NULL: measure here (forked child). Else measure on remote boards through
   * this runner (tuner/rpc_runner.h): t is the board's target, builds run on
   * the host while the boards measure, results are logged as they arrive. */
  struct tun_rpc_runner *rpc;
  const char *graph_opts;  /* written into each record: the graph switches of a model task (NULL: defaults) */
  /* What used to be environment switches, now CLI flags. Each changes what
   * is measured only through the candidates' schedules, which the log keeps
   * (every record's trace: a rule or postprocessor that did not run leaves
   * no instructions in it). */
  srch_space_opts space;       /* rule_mask: --no-tensorize, --no-tensor-core */
  srch_postproc_opts postproc; /* --no-layout-rewrite */
  bool gpu_regcheck;           /* --gpu-regcheck: the device's register check in VerifyGPUCode */
  tun_default_opts defaults;   /* --no-default-tiling (the baseline candidate) */
  int xgb_min_samples;         /* --xgb-min-samples N: random scores until N samples (0: the model's 50) */
  int xgb_max_rounds;          /* --xgb-max-rounds N: boosting rounds per update (0: the model's 150) */
  /* --no-library: no library candidates (tuner/library.h). Off by default:
   * a task a library covers gets each found library's call as a candidate
   * after the default schedule, on a host llvm target and never through RPC. */
  bool no_library;
  /* --no-runoff: no run-off at the end of `tessel tune` / `tune-model`
   * (tuner/runoff.h; the callers run it, not tun_tune, which is one round) */
  bool no_runoff;
  /* Embedding hooks (the C API's tessel_tune, include/tessel/tessel.h).
   * on_progress (NULL: none) is called in the calling thread before the
   * first batch, after every batch, and once at the end, with the records of
   * this workload+target so far, the budget and the best verified mean (0:
   * none). A nonzero return, or *cancel (NULL: none; another thread may set
   * it) becoming nonzero, ends the run before the next batch: the result's
   * cancelled is set and the status stays TS_OK (what was measured is
   * logged, so a rerun resumes). */
  int (*on_progress)(void *ctx, int done, int total, double best_seconds);
  void *progress_ctx;
  const volatile int *cancel;
  /* --cost-model FILE|default|none: the xgb model starts from this
   * pre-trained model (cm_pretrained_open; NULL: the default one when it
   * matches the target) and keeps training online */
  const char *cost_model;
} tun_tune_opts;
void tun_tune_opts_default(tun_tune_opts *o);

typedef struct tun_tune_result {
  int trials;              /* records for this workload+target at `threads` in the log after the run */
  int threads;             /* the thread count it tuned for (0: unknown, a board's default; GPU) */
  int new_trials;          /* measured in this run */
  int errors;              /* error records for this workload+target */
  double best_seconds;     /* best verified mean; 0 if none */
  double best_gflops;
  double baseline_seconds; /* the default schedule, measured the same way */
  double baseline_gflops;
  double wall_seconds;
  /* Where the wall time went (seconds of this run; docs/COSTMODEL.md "Phase
   * timings"). search: proposing batches (srch_evo_next_batch) plus replaying
   * the proposed traces and extracting the measured candidates' features;
   * train: cost model updates (resume warm start included); build: waiting
   * for the batch builds; measure: the forked measurements (tsrt_measure_*);
   * verify: checking outputs against the interpreter; baseline: the default
   * schedule's build and measurement; resume: loading and replaying the log.
   * search_replay/search_predict: thread-seconds inside the search spent on
   * replaying candidates (with postprocessing and feature extraction) and
   * in the cost model's predictions. */
  double search_seconds, train_seconds, build_seconds, measure_seconds, verify_seconds;
  double baseline_seconds_wall, resume_seconds;
  double search_replay_seconds, search_predict_seconds;
  long search_replays, search_cache_hits; /* replays done / served by the search's cache */
  /* library candidates: the best library record's and the best trace
   * record's mean seconds (0: none) and the library (tun_library_split) */
  double lib_seconds, kernel_seconds;
  char lib[16];
  bool cancelled;          /* on_progress or *cancel stopped the run (tun_tune_opts) */
} tun_tune_result;

/* Tunes f (workload definition text `definition`, FLOPs `flops`) for t. */
ts_status tun_tune(const ir_func *f, const char *definition, double flops, const cg_target *t,
                   const tun_tune_opts *o, tun_tune_result *res, ts_diag *d);

#endif
