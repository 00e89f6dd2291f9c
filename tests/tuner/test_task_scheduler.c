/* test_task_scheduler.c — the task scheduler (tuner/task_scheduler.h).
 *
 * On synthetic histories (no measurement): the warm-up visits every task
 * once; round-robin cycles and skips dead tasks; the gradient gives rounds
 * to a task whose latency is still dropping rather than to a converged one,
 * shares rounds in proportion to the weights, pushes a task that runs far
 * slower than a similar one, and picks at random on ties and with
 * probability epsilon; a log restores rounds and history.
 * End to end on three small workload PrimFuncs (real builds and
 * measurements): the budget is spent exactly over all tasks, a rerun
 * appends nothing, a run killed mid-way resumes to exactly the budget with
 * no schedule measured twice, a budget below the task count measures the
 * rest's default schedule, and bad task lists are refused.
 * CLI (when meson passes the tessel binary, with MODELS_DIR holding the
 * generated models): `tessel tune-model mlp.onnx --trials 16 --json` logs
 * exactly 16 records under the keys `tessel tasks` prints, a rerun appends
 * nothing, and a larger budget with round-robin appends the difference. */
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "codegen/llvm.h"
#include "ir/parse.h"
#include "ir/struct.h"
#include "ir/workloads/workloads.h"
#include "schedule/util.h"
#include "tuner/task_scheduler.h"
#include "util/run.h"
#include "util/host_target.h"

/* ---- synthetic ----------------------------------------------------------------------- */

static void sched(tun_sched *s, tun_sched_kind kind, double eps, int n, const char *const *names,
                  const double *w, const double *fl) {
  tun_sched_params p;
  tun_sched_params_default(&p);
  p.kind = kind;
  p.epsilon = eps;
  p.seed = 7;
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_msg(tun_sched_init(s, &p, n, names, w, fl, &d) == TS_OK, "%s", d.msg);
}

static void round_of(tun_sched *s, int i, int trials, double best) {
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_msg(tun_sched_update(s, i, trials, best, &d) == TS_OK, "%s", d.msg);
}

START_TEST(warmup_then_round_robin) {
  const char *names[] = {"a", "b", "c"};
  tun_sched s;
  sched(&s, TUN_SCHED_ROUND_ROBIN, 0, 3, names, NULL, NULL);
  int seq[9];
  for (int k = 0; k < 6; k++) {
    seq[k] = tun_sched_next(&s);
    round_of(&s, seq[k], 4, 1e-3);
  }
  int want[] = {0, 1, 2, 0, 1, 2};
  for (int k = 0; k < 6; k++) ck_assert_int_eq(seq[k], want[k]);
  /* task 1's search is exhausted: a round with nothing measured kills it */
  ck_assert_int_eq(tun_sched_next(&s), 0);
  round_of(&s, 0, 4, 1e-3);
  ck_assert_int_eq(tun_sched_next(&s), 1);
  round_of(&s, 1, 0, 0);
  ck_assert(s.tasks[1].dead);
  for (int k = 0; k < 4; k++) {
    int i = tun_sched_next(&s);
    ck_assert_int_eq(i, k % 2 == 0 ? 2 : 0);
    round_of(&s, i, 4, 1e-3);
  }
  round_of(&s, 0, 0, 0);
  round_of(&s, 2, 0, 0);
  ck_assert_int_eq(tun_sched_next(&s), -1);
  tun_sched_fini(&s);
}
END_TEST

/* After a resume the task with the fewest rounds goes first, then the
 * tasks take turns again. */
START_TEST(round_robin_after_restore) {
  const char *names[] = {"a", "b", "c"};
  tun_sched s;
  sched(&s, TUN_SCHED_ROUND_ROBIN, 0, 3, names, NULL, NULL);
  double costs[] = {3, 2, 2, 1, 1, 1};
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_int_eq(tun_sched_restore(&s, 0, costs, 6, 2, &d), TS_OK); /* 3 rounds */
  ck_assert_int_eq(tun_sched_restore(&s, 1, costs, 2, 2, &d), TS_OK); /* 1 round */
  ck_assert_int_eq(tun_sched_restore(&s, 2, costs, 4, 2, &d), TS_OK); /* 2 rounds */
  int want[] = {1, 2, 1, 2, 0, 1, 2, 0};
  for (int k = 0; k < 8; k++) {
    int i = tun_sched_next(&s);
    ck_assert_msg(i == want[k], "pick %d: task %d, expected %d", k, i, want[k]);
    round_of(&s, i, 2, 1);
  }
  tun_sched_fini(&s);
}
END_TEST

START_TEST(gradient_warmup_visits_each_task_first) {
  const char *names[] = {"a", "b", "c", "d"};
  double w[] = {1, 9, 1, 1};
  tun_sched s;
  sched(&s, TUN_SCHED_GRADIENT, 0.05, 4, names, w, NULL);
  for (int k = 0; k < 4; k++) {
    ck_assert_int_eq(tun_sched_next(&s), k);
    round_of(&s, k, 8, 1e-3 * (k + 1));
  }
  tun_sched_fini(&s);
}
END_TEST

/* Two tasks, equal weight, four rounds each: A went 12, 9, 6, 3 ms (still
 * dropping), B sat at 3 ms (converged): A's backward gradient makes it the
 * better use of the next round. */
START_TEST(gradient_prefers_dropping_task) {
  const char *names[] = {"dropping", "converged"};
  tun_sched s;
  sched(&s, TUN_SCHED_GRADIENT, 0, 2, names, NULL, NULL);
  double a[] = {12e-3, 9e-3, 6e-3, 3e-3};
  for (int k = 0; k < 4; k++) {
    round_of(&s, 0, 8, a[k]);
    round_of(&s, 1, 8, 3e-3);
  }
  double g0 = tun_sched_gradient(&s, 0), g1 = tun_sched_gradient(&s, 1);
  ck_assert_msg(g0 < g1, "dropping %g vs converged %g", g0, g1);
  /* alpha 0.2 × (3 - 12) / 3 + 0.8 × (-3 / 4), in ms, vs 0.8 × (-3 / 4) */
  ck_assert_double_eq_tol(g0, (0.2 * (3 - 12) / 3.0 + 0.8 * (-3 / 4.0)) * 1e-3, 1e-12);
  ck_assert_double_eq_tol(g1, 0.8 * (-3 / 4.0) * 1e-3, 1e-12);
  ck_assert_int_eq(tun_sched_next(&s), 0);
  ck_assert(!s.last_random);
  tun_sched_fini(&s);
}
END_TEST

/* A simulated run: task 0's latency keeps falling (10 ms towards 1 ms,
 * time constant 20 rounds), task 1's is flat at 1 ms from the start. Over 40
 * rounds the dropping one gets most of them, the converged one still some
 * (its forward gradient, best / rounds, never reaches zero). */
START_TEST(gradient_simulated_run) {
  const char *names[] = {"dropping", "converged"};
  tun_sched s;
  sched(&s, TUN_SCHED_GRADIENT, 0, 2, names, NULL, NULL);
  int got[2] = {0, 0};
  for (int k = 0; k < 40; k++) {
    int i = tun_sched_next(&s);
    ck_assert_int_ge(i, 0);
    int r = s.tasks[i].rounds + 1;
    double lat = i == 0 ? 1e-3 + 9e-3 * exp(-r / 20.0) : 1e-3;
    round_of(&s, i, 8, lat);
    got[i]++;
  }
  ck_assert_msg(got[0] > 2 * got[1], "dropping task got %d rounds, converged %d", got[0], got[1]);
  ck_assert_int_ge(got[1], 1);
  tun_sched_fini(&s);
}
END_TEST

/* Equal flat histories, weights 1 and 5: the heavier task wins the next
 * round, and over a run the rounds split roughly in the weights' ratio (the
 * forward gradient weight × best / rounds is what gets equalised). */
START_TEST(gradient_weights_matter) {
  const char *names[] = {"once", "five_times"};
  double w[] = {1, 5};
  tun_sched s;
  sched(&s, TUN_SCHED_GRADIENT, 0, 2, names, w, NULL);
  round_of(&s, tun_sched_next(&s), 8, 2e-3);
  round_of(&s, tun_sched_next(&s), 8, 2e-3);
  ck_assert_int_eq(tun_sched_next(&s), 1);
  int got[2] = {1, 1};
  for (int k = 0; k < 58; k++) {
    int i = tun_sched_next(&s);
    round_of(&s, i, 8, 2e-3);
    got[i]++;
  }
  double ratio = (double)got[1] / got[0];
  ck_assert_msg(ratio > 3.5 && ratio < 7, "rounds %d vs %d", got[1], got[0]);
  tun_sched_fini(&s);
}
END_TEST

/* fused_dense_0 and fused_dense_1 are similar (same stem, same FLOP scale);
 * fused_dense_1 runs 10x slower than its sibling, so its forward gradient
 * uses the sibling's speed / beta and beats a task with the same history
 * but no similar task. */
START_TEST(gradient_similar_tasks) {
  const char *names[] = {"fused_dense_0", "fused_dense_1", "fused_softmax_0"};
  double fl[] = {1e6, 1.1e6, 1.1e6};
  tun_sched s;
  sched(&s, TUN_SCHED_GRADIENT, 0, 3, names, NULL, fl);
  ck_assert_int_ge(s.tasks[0].group, 0);
  ck_assert_int_eq(s.tasks[0].group, s.tasks[1].group);
  ck_assert_int_eq(s.tasks[2].group, -1);
  for (int k = 0; k < 3; k++) {
    round_of(&s, 0, 8, 1e-4);
    round_of(&s, 1, 8, 1.1e-3);
    round_of(&s, 2, 8, 1.1e-3);
  }
  double g1 = tun_sched_gradient(&s, 1), g2 = tun_sched_gradient(&s, 2);
  ck_assert_msg(g1 < g2, "similar-bound %g vs alone %g", g1, g2);
  /* forward for task 1: beta × flops / best speed = 2 × 1.1e6 / 1e10 s */
  ck_assert_double_eq_tol(g1, 0.8 * (2 * 1.1e6 / 1e10 - 1.1e-3), 1e-12);
  ck_assert_int_eq(tun_sched_next(&s), 1);
  /* different FLOP scale: not similar */
  const char *n2[] = {"fused_dense_0", "fused_dense_1"};
  double fl2[] = {1e6, 1e8};
  tun_sched s2;
  sched(&s2, TUN_SCHED_GRADIENT, 0, 2, n2, NULL, fl2);
  ck_assert_int_eq(s2.tasks[0].group, -1);
  ck_assert_int_eq(s2.tasks[1].group, -1);
  tun_sched_fini(&s2);
  tun_sched_fini(&s);
}
END_TEST

START_TEST(gradient_random_choices) {
  const char *names[] = {"a", "b", "c"};
  tun_sched s;
  sched(&s, TUN_SCHED_GRADIENT, 0, 3, names, NULL, NULL);
  for (int k = 0; k < 3; k++) round_of(&s, tun_sched_next(&s), 8, 1e-3);
  /* all gradients equal: a random live task */
  int seen[3] = {0, 0, 0};
  for (int k = 0; k < 60; k++) {
    int i = tun_sched_next(&s);
    ck_assert(s.last_random);
    seen[i]++;
  }
  ck_assert(seen[0] && seen[1] && seen[2]);
  tun_sched_fini(&s);
  /* epsilon 1: always random, never a dead task */
  double w[] = {1, 100, 1};
  sched(&s, TUN_SCHED_GRADIENT, 1, 3, names, w, NULL);
  round_of(&s, tun_sched_next(&s), 8, 1e-3);
  round_of(&s, tun_sched_next(&s), 8, 1e-3);
  round_of(&s, tun_sched_next(&s), 0, 0); /* task 2: dead */
  int seen2[3] = {0, 0, 0};
  for (int k = 0; k < 100; k++) seen2[tun_sched_next(&s)]++;
  ck_assert_int_eq(seen2[2], 0);
  ck_assert_int_gt(seen2[0], 20); /* the weight would never have picked it */
  tun_sched_fini(&s);
}
END_TEST

START_TEST(restore_history) {
  const char *names[] = {"a", "b"};
  tun_sched s;
  sched(&s, TUN_SCHED_GRADIENT, 0, 2, names, NULL, NULL);
  double costs[] = {5, 4, TUN_SCHED_NONE, 3, 3.5, 2, 2.5};
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_int_eq(tun_sched_restore(&s, 0, costs, 7, 3, &d), TS_OK);
  ck_assert_int_eq(s.tasks[0].rounds, 3);
  ck_assert_int_eq(s.tasks[0].trials, 7);
  ck_assert_int_eq(s.tasks[0].nhist, 3);
  ck_assert(s.tasks[0].hist[0] == 4 && s.tasks[0].hist[1] == 2 && s.tasks[0].hist[2] == 2);
  ck_assert(s.tasks[0].best == 2);
  /* a restored task needs no warm-up round; the unrestored one does */
  ck_assert_int_eq(tun_sched_next(&s), 1);
  tun_sched_fini(&s);
}
END_TEST

START_TEST(bad_parameters) {
  ts_diag d;
  ts_diag_clear(&d);
  tun_sched_kind k;
  ck_assert_int_eq(tun_sched_kind_parse("greedy", &k, &d), TS_EINVAL);
  ck_assert_ptr_nonnull(strstr(d.msg, "round-robin"));
  ck_assert_int_eq(tun_sched_kind_parse("round-robin", &k, &d), TS_OK);
  ck_assert_int_eq(k, TUN_SCHED_ROUND_ROBIN);
  tun_sched s;
  tun_sched_params p;
  tun_sched_params_default(&p);
  ck_assert(p.alpha == 0.2 && p.window == 3 && p.beta == 2 && p.epsilon == 0.05);
  p.window = 0;
  ts_diag_clear(&d);
  ck_assert_int_eq(tun_sched_init(&s, &p, 2, NULL, NULL, NULL, &d), TS_EINVAL);
  ck_assert_ptr_nonnull(strstr(d.msg, "window"));
  tun_sched_params_default(&p);
  double w[] = {1, 0};
  const char *names[] = {"x", "y"};
  ts_diag_clear(&d);
  ck_assert_int_eq(tun_sched_init(&s, &p, 2, names, w, NULL, &d), TS_EINVAL);
  ck_assert_ptr_nonnull(strstr(d.msg, "y"));
  ts_diag_clear(&d);
  ck_assert_int_eq(tun_sched_init(&s, &p, 0, NULL, NULL, NULL, &d), TS_EINVAL);
}
END_TEST

/* ---- end to end ------------------------------------------------------------------------ */

static const char *const specs[] = {"matmul:m=16,n=16,k=16", "dense:m=8,n=24,k=16,bias=1,act=relu",
                                     "batch_matmul:b=2,m=8,n=8,k=24"};
#define NT 3

typedef struct model {
  ts_arena a;
  tun_model_task tasks[NT];
} model;

static void model_init(model *m) {
  ts_arena_init(&m->a);
  for (int i = 0; i < NT; i++) {
    ir_wl_inst w;
    ts_diag d;
    ts_diag_clear(&d);
    ck_assert_msg(ir_wl_parse(specs[i], &w, &d) == TS_OK, "%s", d.msg);
    m->tasks[i].name = specs[i];
    m->tasks[i].weight = i + 1;
    m->tasks[i].flops = ir_wl_flops(&w);
    m->tasks[i].func = tu_workload(&m->a, specs[i]);
    m->tasks[i].definition = specs[i];
  }
}


static void opts(tun_tune_model_opts *o, const char *log, int trials, tun_sched_kind kind) {
  tun_tune_model_opts_default(o);
  o->tune.trials = trials;
  o->tune.batch = 4;
  o->tune.log_path = log;
  o->tune.seed = 3;
  o->tune.model = "random"; /* test time: no XGBoost training per round */
  o->tune.population = 32;
  o->tune.measure.repeat = 2;
  o->tune.measure.min_repeat_ms = 1;
  o->tune.measure.timeout_s = 20;
  o->sched.kind = kind;
  o->progress = stderr;
  o->model_name = "test";
  /* the scheduler's budget, rounds and estimate by the trials alone; the run-off
   * (which re-times the bests, so an estimate may then rise) is test_runoff's, and
   * the CLI case below runs it */
  o->tune.no_runoff = true;
}

static ts_status run_model(const char *log, int trials, tun_sched_kind kind, tun_tune_model_result *r) {
  model m;
  model_init(&m);
  cg_target t = tu_host_target();
  tun_tune_model_opts o;
  opts(&o, log, trials, kind);
  ts_diag d;
  ts_diag_clear(&d);
  ts_status st = tun_tune_model(m.tasks, NT, &t, &o, r, &d);
  if (st) fprintf(stderr, "tun_tune_model: %s\n", d.msg);
  ts_arena_fini(&m.a);
  return st;
}

/* Records of each task (by workload key) and whether a schedule repeats. */
static int log_counts(const char *path, const tun_tune_model_result *r, int *per, bool *dup) {
  tun_db *db = tun_db_load(path, NULL, NULL, NULL);
  ck_assert_ptr_nonnull(db);
  int n = tun_db_count(db);
  *dup = false;
  for (int i = 0; i < NT; i++) per[i] = 0;
  for (int i = 0; i < n; i++) {
    const tun_record *a = tun_db_get(db, i);
    for (int k = 0; k < NT; k++) per[k] += !strcmp(a->workload_key, r->tasks[k].key);
    for (int j = 0; j < i; j++) {
      const tun_record *b = tun_db_get(db, j);
      if (a->trace_hash && a->trace_hash == b->trace_hash && !strcmp(a->workload_key, b->workload_key)) *dup = true;
    }
  }
  tun_db_close(db);
  return n;
}

static void tmp_log(char *buf, size_t n, const char *tag) {
  snprintf(buf, n, "/tmp/tessel-test-tm-%s-%d.json", tag, (int)getpid());
  unlink(buf);
}

START_TEST(budget_over_tasks_and_rerun) {
  char log[256];
  tmp_log(log, sizeof log, "budget");
  tun_tune_model_result r;
  ck_assert_int_eq(run_model(log, 20, TUN_SCHED_GRADIENT, &r), TS_OK);
  ck_assert_int_eq(r.trials, 20);
  ck_assert_int_eq(r.new_trials, 20);
  ck_assert_int_eq(r.batch, 4);
  ck_assert_int_eq(tr_count_lines(log), 20);
  int per[NT];
  bool dup;
  ck_assert_int_eq(log_counts(log, &r, per, &dup), 20);
  ck_assert(!dup);
  for (int i = 0; i < NT; i++) {
    ck_assert_msg(per[i] >= 4, "task %d got %d trials (warm-up gives each a round)", i, per[i]);
    ck_assert_int_eq(per[i], r.tasks[i].trials);
    ck_assert(r.tasks[i].best_seconds > 0);
    ts_arena a;
    ts_arena_init(&a);
    char key[17];
    ck_assert_str_eq(r.tasks[i].key, ir_workload_key(tu_workload(&a, specs[i]), key));
    ts_arena_fini(&a);
  }
  ck_assert_int_eq(r.missing, 0);
  ck_assert_int_eq(r.from_default, 0);
  double est = 0;
  for (int i = 0; i < NT; i++) est += r.tasks[i].weight * r.tasks[i].best_seconds;
  ck_assert_double_eq_tol(r.estimated_seconds, est, 1e-15);
  /* rerun with the budget met: nothing measured, nothing appended */
  tun_tune_model_result r2;
  ck_assert_int_eq(run_model(log, 20, TUN_SCHED_GRADIENT, &r2), TS_OK);
  ck_assert_int_eq(r2.new_trials, 0);
  ck_assert_int_eq(r2.rounds, 0);
  ck_assert_int_eq(r2.trials, 20);
  ck_assert_int_eq(tr_count_lines(log), 20);
  ck_assert(r2.estimated_seconds == r.estimated_seconds);
  /* a larger budget continues from the log */
  tun_tune_model_result r3;
  ck_assert_int_eq(run_model(log, 26, TUN_SCHED_ROUND_ROBIN, &r3), TS_OK);
  ck_assert_int_eq(r3.trials, 26);
  ck_assert_int_eq(r3.new_trials, 6);
  ck_assert_int_eq(tr_count_lines(log), 26);
  ck_assert(r3.estimated_seconds <= r.estimated_seconds);
  tun_tune_model_result_fini(&r);
  tun_tune_model_result_fini(&r2);
  tun_tune_model_result_fini(&r3);
  unlink(log);
}
END_TEST

START_TEST(killed_and_resumed) {
  char log[256];
  tmp_log(log, sizeof log, "kill");
  fflush(NULL);
  pid_t p = fork();
  ck_assert_int_ge(p, 0);
  if (p == 0) {
    tun_tune_model_result r;
    _exit(run_model(log, 24, TUN_SCHED_GRADIENT, &r) ? 1 : 0);
  }
  /* kill it once it has logged something, mid-run */
  for (int k = 0; k < 600 && tr_count_lines(log) < 6; k++) usleep(50000);
  kill(p, SIGKILL);
  waitpid(p, NULL, 0);
  int before = tr_count_lines(log);
  ck_assert_int_ge(before, 6);
  ck_assert_int_lt(before, 24);
  tun_tune_model_result r;
  ck_assert_int_eq(run_model(log, 24, TUN_SCHED_GRADIENT, &r), TS_OK);
  ck_assert_int_eq(r.trials, 24);
  ck_assert_int_eq(r.new_trials, 24 - before);
  ck_assert_int_eq(tr_count_lines(log), 24);
  int per[NT];
  bool dup;
  log_counts(log, &r, per, &dup);
  ck_assert_msg(!dup, "a schedule was measured twice after the resume");
  tun_tune_model_result_fini(&r);
  unlink(log);
}
END_TEST

/* Two trials for three tasks: one round of one trial for tasks 0 and 1;
 * task 2 is never tuned, so its default schedule is measured for the
 * estimate. */
START_TEST(budget_below_task_count) {
  char log[256];
  tmp_log(log, sizeof log, "small");
  tun_tune_model_result r;
  ck_assert_int_eq(run_model(log, 2, TUN_SCHED_GRADIENT, &r), TS_OK);
  ck_assert_int_eq(r.batch, 1);
  ck_assert_int_eq(r.trials, 2);
  ck_assert_int_eq(r.tasks[0].trials, 1);
  ck_assert_int_eq(r.tasks[1].trials, 1);
  ck_assert_int_eq(r.tasks[2].trials, 0);
  ck_assert(r.tasks[2].best_seconds == 0);
  ck_assert(r.tasks[2].default_seconds > 0);
  ck_assert_int_eq(r.missing, 0);
  ck_assert_int_ge(r.from_default, 1);
  ck_assert_int_eq(tr_count_lines(log), 2);
  tun_tune_model_result_fini(&r);
  unlink(log);
}
END_TEST

START_TEST(refuses_bad_tasks) {
  model m;
  model_init(&m);
  cg_target t = tu_host_target();
  tun_tune_model_opts o;
  char log[256];
  tmp_log(log, sizeof log, "bad");
  opts(&o, log, 4, TUN_SCHED_GRADIENT);
  tun_tune_model_result r;
  ts_diag d;
  /* two tasks with one workload */
  tun_model_task two[2] = {m.tasks[0], m.tasks[0]};
  two[1].name = "copy";
  ts_diag_clear(&d);
  ck_assert_int_eq(tun_tune_model(two, 2, &t, &o, &r, &d), TS_EINVAL);
  ck_assert_ptr_nonnull(strstr(d.msg, "same workload"));
  tun_tune_model_result_fini(&r);
  /* symbolic sizes */
  static const char src[] = "kernel scale(A: f32[N]) -> B: f32[N] {\n  B[i] = A[i] * 2.0\n}\n";
  ir_func *f = NULL;
  ts_diag_clear(&d);
  ck_assert_msg(ir_parse_func(&m.a, src, sizeof src - 1, "scale.tsl", &f, &d) == TS_OK, "%s", d.msg);
  ck_assert_int_gt(f->nsyms, 0);
  tun_model_task sym = {"scale", 1, 0, f, src};
  ts_diag_clear(&d);
  ck_assert_int_eq(tun_tune_model(&sym, 1, &t, &o, &r, &d), TS_EINVAL);
  ck_assert_ptr_nonnull(strstr(d.msg, "symbolic"));
  ck_assert_ptr_nonnull(strstr(d.msg, "scale"));
  tun_tune_model_result_fini(&r);
  /* no tasks */
  ts_diag_clear(&d);
  ck_assert_int_eq(tun_tune_model(m.tasks, 0, &t, &o, &r, &d), TS_EINVAL);
  ck_assert_int_eq(tr_count_lines(log), 0);
  ts_arena_fini(&m.a);
  unlink(log);
}
END_TEST

/* ---- the CLI on the generated mlp model ------------------------------------------------ */

static const char *tessel_bin;

/* Runs tessel with args (shell words) and parses its stdout as JSON. */
static json_t *run_json(const char *args, int *rc) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "'%s' %s", tessel_bin, args);
  FILE *p = popen(cmd, "r");
  ck_assert_ptr_nonnull(p);
  char *buf = NULL;
  size_t cap = 0, len = 0;
  char chunk[4096];
  size_t k;
  while ((k = fread(chunk, 1, sizeof chunk, p)) > 0) {
    if (len + k + 1 > cap) {
      cap = (len + k + 1) * 2;
      buf = realloc(buf, cap);
      ck_assert_ptr_nonnull(buf);
    }
    memcpy(buf + len, chunk, k);
    len += k;
  }
  int st = pclose(p);
  *rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  json_error_t e;
  json_t *j = buf ? json_loadb(buf, len, 0, &e) : NULL;
  ck_assert_msg(j != NULL, "`%s` printed no JSON (rc %d): %.300s", cmd, *rc, buf ? buf : "");
  free(buf);
  return j;
}

/* The log's trial lines: its lines less the run-off's (tuner/runoff.h). */
static int trial_lines(const char *path) {
  int n = tr_count_lines(path), ro = 0;
  char *s = tr_slurp(path);
  for (char *p = s; p && (p = strstr(p, "\"runoff\":")); p++) ro++;
  free(s);
  return n - ro;
}

START_TEST(cli_tune_model_mlp) {
  const char *dir = getenv("MODELS_DIR");
  ck_assert_msg(dir != NULL, "MODELS_DIR is not set");
  char mpath[1024], log[256], args[2048];
  snprintf(mpath, sizeof mpath, "%s/mlp.onnx", dir);
  ck_assert_msg(access(mpath, R_OK) == 0, "%s is missing (test_models generates it)", mpath);
  tmp_log(log, sizeof log, "cli");
  int rc;
  /* the keys tessel tasks reports */
  snprintf(args, sizeof args, "tasks '%s' --json", mpath);
  json_t *jt = run_json(args, &rc);
  ck_assert_int_eq(rc, 0);
  json_t *tl = json_object_get(jt, "tasks");
  size_t ntasks = json_array_size(tl);
  ck_assert_int_ge(ntasks, 2);

  snprintf(args, sizeof args,
           "tune-model '%s' --trials 16 --log '%s' --model random --repeat 2 --min-repeat-ms 5 --json", mpath, log);
  json_t *j = run_json(args, &rc);
  ck_assert_int_eq(rc, 0);
  ck_assert_int_eq(json_integer_value(json_object_get(j, "trials")), 16);
  ck_assert_int_eq(json_integer_value(json_object_get(j, "new_trials")), 16);
  ck_assert_str_eq(json_string_value(json_object_get(j, "task_scheduler")), "gradient");
  json_t *ta = json_object_get(j, "tasks");
  ck_assert_int_eq(json_array_size(ta), ntasks);
  long sum = 0;
  double est = 0;
  for (size_t i = 0; i < ntasks; i++) {
    json_t *t = json_array_get(ta, i);
    ck_assert_str_eq(json_string_value(json_object_get(t, "key")),
                     json_string_value(json_object_get(json_array_get(tl, i), "key")));
    ck_assert_int_eq(json_integer_value(json_object_get(t, "weight")),
                     json_integer_value(json_object_get(json_array_get(tl, i), "weight")));
    long tr = (long)json_integer_value(json_object_get(t, "trials"));
    ck_assert_int_ge(tr, 1); /* the warm-up gives every task a round */
    sum += tr;
    double b = json_real_value(json_object_get(t, "best_seconds"));
    ck_assert(b > 0);
    est += (double)json_integer_value(json_object_get(t, "weight")) * b;
  }
  ck_assert_int_eq(sum, 16);
  double e1 = json_real_value(json_object_get(j, "estimated_latency_seconds"));
  ck_assert_double_eq_tol(e1, est, est * 1e-9);
  ck_assert_int_eq(trial_lines(log), 16);
  /* the run-off ran (its records are no trials: the counts above hold) */
  json_t *jro = json_object_get(j, "runoff");
  ck_assert_ptr_nonnull(jro);
  long ro_tasks = (long)json_integer_value(json_object_get(jro, "tasks"));
  ck_assert_int_eq(ro_tasks > 0, tr_count_lines(log) > 16); /* run-off lines iff tasks were run off */
  int all = tr_count_lines(log);
  json_decref(j);

  /* rerun: the budget is met, nothing measured or appended (the run-off timed these candidates) */
  j = run_json(args, &rc);
  ck_assert_int_eq(rc, 0);
  ck_assert_int_eq(json_integer_value(json_object_get(j, "new_trials")), 0);
  ck_assert_int_eq(json_integer_value(json_object_get(j, "rounds")), 0);
  ck_assert_double_eq_tol(json_real_value(json_object_get(j, "estimated_latency_seconds")), e1, e1 * 1e-9);
  ck_assert_int_eq(trial_lines(log), 16);
  ck_assert_int_eq(tr_count_lines(log), all);
  json_decref(j);

  /* more budget, round-robin: appends the difference */
  snprintf(args, sizeof args,
           "tune-model '%s' --trials 19 --log '%s' --model random --repeat 2 --min-repeat-ms 5 "
           "--task-scheduler round-robin --json",
           mpath, log);
  j = run_json(args, &rc);
  ck_assert_int_eq(rc, 0);
  ck_assert_int_eq(json_integer_value(json_object_get(j, "trials")), 19);
  ck_assert_int_eq(json_integer_value(json_object_get(j, "new_trials")), 3);
  ck_assert_int_eq(trial_lines(log), 19);
  json_decref(j);
  json_decref(jt);

  /* not a model */
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "'%s' tune-model matmul --trials 4 --log '%s' 2>/dev/null", tessel_bin, log);
  int st = system(cmd);
  ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 2);
  ck_assert_int_eq(trial_lines(log), 19);
  unlink(log);
}
END_TEST

int main(int argc, char **argv) {
  tessel_bin = argc > 1 ? argv[1] : NULL;
  Suite *s = suite_create("task_scheduler");
  /* with the tessel binary (argv[1]) only the cli case runs: meson registers
   * it as its own test so that each stays short */
  if (!tessel_bin) {
    TCase *c = tcase_create("synthetic");
    tcase_add_test(c, warmup_then_round_robin);
    tcase_add_test(c, round_robin_after_restore);
    tcase_add_test(c, gradient_warmup_visits_each_task_first);
    tcase_add_test(c, gradient_prefers_dropping_task);
    tcase_add_test(c, gradient_simulated_run);
    tcase_add_test(c, gradient_weights_matter);
    tcase_add_test(c, gradient_similar_tasks);
    tcase_add_test(c, gradient_random_choices);
    tcase_add_test(c, restore_history);
    tcase_add_test(c, bad_parameters);
    suite_add_tcase(s, c);
    TCase *e = tcase_create("end_to_end");
    tcase_set_timeout(e, 300);
    tcase_add_test(e, budget_over_tasks_and_rerun);
    tcase_add_test(e, killed_and_resumed);
    tcase_add_test(e, budget_below_task_count);
    tcase_add_test(e, refuses_bad_tasks);
    suite_add_tcase(s, e);
  } else {
    TCase *ct = tcase_create("cli");
    tcase_set_timeout(ct, 300);
    tcase_add_test(ct, cli_tune_model_mlp);
    suite_add_tcase(s, ct);
  }
  SRunner *r = srunner_create(s);
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? 1 : 0;
}
