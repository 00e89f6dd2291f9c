/* runoff.h — the run-off at the end of a tuning run: a task's few best
 * distinct candidates (its best generated trial, its default schedule's record, the
 * best record of each library call: at most TUN_RUNOFF_MAX) are built again and timed back
 * to back, interleaved, TUN_RUNOFF_ROUNDS rounds of one run each, through
 * the run's measuring device; each is logged as a run-off record (runs = the
 * rounds' times, time = their median; docs/LOG.md, "Run-offs"), and the log's
 * best-of selection prefers the latest run-off over the trials' single
 * measurements, so `build --log` replays the run-off's winner. A run-off
 * record is no trial: it counts against no budget. docs/TUNING.md. */
#ifndef TESSEL_TUNER_RUNOFF_H
#define TESSEL_TUNER_RUNOFF_H

#include "tuner/tune.h"

#define TUN_RUNOFF_MAX 7 /* 3 + one per library call (TUN_LIB_MAX_CANDS) */
#define TUN_RUNOFF_ROUNDS 5

typedef struct tun_runoff_result {
  int ncands;            /* candidates timed (0: not run, skipped says why) */
  const char *skipped;   /* static text: why there was no run-off; NULL when run */
  bool changed;          /* the winner is not the trial with the best single measurement */
  double trial_seconds;  /* that trial's logged time */
  double best_seconds;   /* the winner's run-off time (median of its rounds) */
  double lib_seconds, kernel_seconds; /* the run-off times of the library call and the best kernel (0: none) */
  char lib[16];          /* the library candidate's library name ("" none) */
  double default_seconds; /* the default schedule's run-off time (0: not a candidate) */
  char winner[24], was[24]; /* "tuned", "default", "library dnnl" */
  double wall_seconds;
} tun_runoff_result;

/* Runs the run-off of f's workload on t in o->log_path at the thread count
 * o tunes for, unless it has fewer than two distinct usable candidates, or
 * the latest run-off already timed exactly these (then res->skipped says
 * so and nothing is measured), or o->rpc is set (not supported through
 * boards yet). A candidate that no longer builds or fails to run drops
 * out. A line per run-off on o->progress, naming label (a task; NULL:
 * none). Errors: the log's (opening, appending). */
ts_status tun_runoff(const ir_func *f, const cg_target *t, const tun_tune_opts *o, const char *label,
                     tun_runoff_result *res, ts_diag *d);

#endif
