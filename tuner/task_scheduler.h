/* task_scheduler.h — tuning a whole model: which task (a distinct fused
 * PrimFunc of the model, ir/graph/tasks.h) gets the next batch of trials.
 * `tun_sched` is the pure scheduling state (no I/O, no clock) answering
 * "which task next" round-robin or by Ansor's gradient; `tun_tune_model`
 * drives it over tun_tune, resuming from the log and printing a per-task
 * table after every round. docs/TASK_SCHEDULER.md. */
#ifndef TESSEL_TUNER_TASK_SCHEDULER_H
#define TESSEL_TUNER_TASK_SCHEDULER_H

#include <stdio.h>

#include "tuner/tune.h"

/* The latency of a task with no valid measurement (Ansor's 1e10 s). */
#define TUN_SCHED_NONE 1e10

typedef enum { TUN_SCHED_GRADIENT, TUN_SCHED_ROUND_ROBIN } tun_sched_kind;

/* "gradient" / "round-robin". */
const char *tun_sched_kind_name(tun_sched_kind k);
/* Parses "gradient" or "round-robin"; TS_EINVAL naming both otherwise. */
ts_status tun_sched_kind_parse(const char *s, tun_sched_kind *out, ts_diag *d);

typedef struct tun_sched_params {
  tun_sched_kind kind;
  double alpha;   /* weight of the backward gradient (0.2) */
  double beta;    /* a similar task's speed / beta bounds a task's next latency (2) */
  int window;     /* backward window, in rounds (3) */
  double epsilon; /* probability of choosing a random live task (0.05) */
  uint64_t seed;
} tun_sched_params;
void tun_sched_params_default(tun_sched_params *p);

typedef struct tun_sched_task {
  const char *name;  /* not owned */
  double weight;     /* > 0 */
  double flops;      /* >= 0; 0: unknown (no similarity bound) */
  int group;         /* similarity group (tasks of the same op kind and FLOP scale), -1: none */
  int rounds;        /* rounds tuned (restored ones included) */
  int trials;        /* measurement records (restored ones included) */
  double best;       /* best verified latency in seconds, or TUN_SCHED_NONE */
  double *hist;      /* hist[k]: best after round k (heap) */
  int nhist, caphist;
  bool dead;         /* its search space is exhausted (a round that measured nothing, or
                      * the caller says so): never chosen again */
} tun_sched_task;

typedef struct tun_sched {
  tun_sched_params p;
  int n;
  tun_sched_task *tasks;
  int rr_next;       /* round-robin cursor */
  ts_rng rng;
  bool last_random;  /* the last choice was the epsilon-greedy or a tie's random pick */
} tun_sched;

/* Sets up n tasks (names are borrowed and must outlive s; weights > 0,
 * flops >= 0). Tasks whose names share a stem (the name without a trailing
 * "_<digits>") and whose FLOPs round to the same log_1.618 bucket are similar
 * (Ansor's similarity tag). TS_EINVAL for n < 1 or a bad weight, TS_ENOMEM. */
ts_status tun_sched_init(tun_sched *s, const tun_sched_params *p, int n, const char *const *names,
                         const double *weights, const double *flops, ts_diag *d);
void tun_sched_fini(tun_sched *s);

/* Rebuilds task i's state from its log records in log order: costs[k] is
 * record k's latency (TUN_SCHED_NONE for an error or an unverified record);
 * every `batch` records count as one round, whose history entry is the best
 * so far at its end (a last partial batch counts as a round). */
ts_status tun_sched_restore(tun_sched *s, int i, const double *costs, int ncosts, int batch, ts_diag *d);

/* Records a finished round of task i: new_trials records were added and
 * best_seconds (TUN_SCHED_NONE or 0: none) is its best latency now. A round
 * that measured nothing marks the task dead. */
ts_status tun_sched_update(tun_sched *s, int i, int new_trials, double best_seconds, ts_diag *d);

/* The next task to tune, or -1 when every task is dead. Warm-up first: the
 * lowest-numbered live task without a round; then the strategy. */
int tun_sched_next(tun_sched *s);

/* Task i's gradient of the objective (<= 0; more negative = more to gain)
 * as the gradient strategy computes it, without the random parts. */
double tun_sched_gradient(const tun_sched *s, int i);

/* ---- the driver ---------------------------------------------------------------- */

/* One task of the model (from tg_task): func has no symbolic sizes left. */
typedef struct tun_model_task {
  const char *name;
  int weight;
  double flops;
  const ir_func *func;
  const char *definition; /* logged as the record's workload */
} tun_model_task;

typedef struct tun_tune_model_opts {
  /* Per round: log_path, batch (the most trials one round gives a task;
   * capped at trials / ntasks as Ansor does, at least 1), measure, model,
   * seed, build_jobs, population, rpc. `trials` is the total budget over all
   * tasks, counted from the log (records of these tasks on this target). */
  tun_tune_opts tune;
  tun_sched_params sched;
  const char *model_name; /* for the table's title (optional) */
  FILE *progress;         /* table and messages (stderr; NULL: quiet) */
  bool progress_tty;      /* redraw the table in place */
  bool measure_defaults;  /* measure the default schedule of tasks without a tuned latency (true) */
} tun_tune_model_opts;
void tun_tune_model_opts_default(tun_tune_model_opts *o);

typedef struct tun_model_task_status {
  const char *name;
  char key[17];           /* the workload key the log uses */
  int weight;
  double flops;
  int trials;             /* records in the log for this task and target */
  int rounds;
  double best_seconds;    /* best verified latency; 0: none */
  double default_seconds; /* the default schedule's latency; 0: not measured */
  bool dead;
  /* library candidates (tuner/library.h): the best library call's and the
   * best generated kernel's latency (0: none), the library's name */
  double lib_seconds, kernel_seconds;
  char lib[16];
  /* the run-off at the end (tuner/runoff.h): its candidates (0: none run),
   * and when its winner is not the best single trial, both their names */
  int runoff_cands;
  bool runoff_changed;
  char runoff_winner[24], runoff_was[24];
} tun_model_task_status;

typedef struct tun_tune_model_result {
  int ntasks;
  tun_model_task_status *tasks; /* heap (tun_tune_model_result_fini) */
  int trials;                   /* Σ trials over the tasks, resumed ones included */
  int new_trials;               /* measured in this run */
  int rounds;                   /* rounds run in this run */
  int batch;                    /* trials per round used */
  /* Σ weight × latency: the best tuned latency, else the default schedule's;
   * tasks with neither are left out and counted in missing. */
  double estimated_seconds;
  int from_default, missing;
  double wall_seconds;
  double runoff_seconds;        /* wall seconds of the run-offs (tuner/runoff.h) */
  int runoffs, runoff_changes;  /* tasks run off, and those whose choice it changed */
  bool cancelled;               /* tune.on_progress or tune.cancel stopped the run */
} tun_tune_model_result;
void tun_tune_model_result_fini(tun_tune_model_result *r);

/* Recomputes r's totals from r->tasks: trials, and the estimate Σ weight ×
 * (best_seconds, else default_seconds) with from_default and missing. */
void tun_tune_model_estimate(tun_tune_model_result *r);

/* Prints the per-task table (id, task, weight, GFLOP, best latency, GFLOP/s,
 * trials) and the estimated end-to-end latency. */
void tun_tune_model_print(FILE *out, const tun_tune_model_result *r, const char *title);

/* The embedding hooks of o->tune (on_progress, cancel) see the whole
 * model: done and total count the records of all tasks against the total
 * budget, and a stop ends the run after the current round (the default
 * schedules of untuned tasks are then not measured).
 * Tunes the n tasks for t until their records in the log reach
 * o->tune.trials or every task's search is exhausted. Resumable: records
 * already in the log count toward the budget and restore each task's
 * rounds and history (so a rerun with a met budget appends nothing and
 * measures nothing but missing default latencies). r is filled even on
 * error. Errors: TS_EINVAL (no tasks, a func with symbolic sizes, two tasks
 * with one workload key), tun_tune's errors (the log, the runner). */
ts_status tun_tune_model(const tun_model_task *tasks, int n, const cg_target *t,
                         const tun_tune_model_opts *o, tun_tune_model_result *r, ts_diag *d);

#endif
