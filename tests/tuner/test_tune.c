/* test_tune.c — the tuning loop end to end on matmul 64^3: a run logs
 * exactly its budget; a second run with the same budget appends nothing; a
 * run SIGKILLed mid-batch and resumed ends with exactly the budget and no
 * trace measured twice; a corrupt log line is skipped with a warning and
 * tuning goes on. */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "codegen/llvm.h"
#include "schedule/util.h"
#include "tuner/build.h"
#include "tuner/tune.h"
#include "ir/struct.h"
#include "tuner/database.h"
#include "util/run.h"
#include "util/host_target.h"

#define SPEC "matmul:m=64,n=64,k=64"


static void opts(tun_tune_opts *o, const char *log, int trials) {
  tun_tune_opts_default(o);
  o->trials = trials;
  o->batch = 8;
  o->log_path = log;
  o->seed = 3;
  o->measure.repeat = 2;
  o->measure.min_repeat_ms = 2;
  o->measure.timeout_s = 20;
  o->progress = stderr;
  o->population = 128; /* test time */
}

static int run_tune(const char *log, int trials, tun_tune_result *r) {
  ts_arena a;
  ts_arena_init(&a);
  ir_func *f = tu_workload(&a, SPEC);
  cg_target t = tu_host_target();
  tun_tune_opts o;
  opts(&o, log, trials);
  ts_diag d;
  ts_diag_clear(&d);
  ts_status st = tun_tune(f, SPEC, 2.0 * 64 * 64 * 64, &t, &o, r, &d);
  if (st) fprintf(stderr, "tun_tune: %s\n", d.msg);
  ts_arena_fini(&a);
  return st;
}

/* Records in the log and whether any trace_hash repeats. */
static int check_log(const char *path, bool *dup) {
  int nwarn = 0;
  tun_db *db = tun_db_load(path, NULL, &nwarn, NULL);
  ck_assert_ptr_nonnull(db);
  int n = tun_db_count(db);
  *dup = false;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < i; j++) {
      const tun_record *a = tun_db_get(db, i), *b = tun_db_get(db, j);
      if (a->trace_hash && a->trace_hash == b->trace_hash) *dup = true;
    }
  tun_db_close(db);
  return n;
}

static void tmp_log(char *buf, size_t n, const char *tag) {
  snprintf(buf, n, "/tmp/tessel-test-tune-%s-%d.json", tag, (int)getpid());
  unlink(buf);
}

START_TEST(budget_and_rerun) {
  char log[256];
  tmp_log(log, sizeof log, "budget");
  tun_tune_result r;
  ck_assert_int_eq(run_tune(log, 24, &r), TS_OK);
  ck_assert_int_eq(r.trials, 24);
  ck_assert_int_eq(r.new_trials, 24);
  ck_assert_int_eq(tr_count_lines(log), 24);
  bool dup;
  ck_assert_int_eq(check_log(log, &dup), 24);
  ck_assert_msg(!dup, "a trace was measured twice");
  ck_assert(r.best_seconds > 0);
  ck_assert(r.best_gflops > 0);
  ck_assert(r.baseline_gflops > 0);
  /* Same budget again: nothing appended. */
  tun_tune_result r2;
  ck_assert_int_eq(run_tune(log, 24, &r2), TS_OK);
  ck_assert_int_eq(r2.new_trials, 0);
  ck_assert_int_eq(r2.trials, 24);
  ck_assert_int_eq(tr_count_lines(log), 24);
  ck_assert(r2.best_seconds == r.best_seconds);
  unlink(log);
}
END_TEST


/* The default schedule is the first candidate: the log's first record is it
 * (by scheduled-function hash), the baseline is that record's time, the best
 * is never slower than it, and a resumed run takes the baseline from the log
 * without logging the default again. */
START_TEST(default_is_first_record) {
  char log[256];
  tmp_log(log, sizeof log, "default");
  tun_tune_result r;
  ck_assert_int_eq(run_tune(log, 5, &r), TS_OK);
  ck_assert_int_eq(r.trials, 5);
  ts_arena a;
  ts_arena_init(&a);
  ir_func *f = tu_workload(&a, SPEC);
  cg_target t = tu_host_target();
  sch_traced *def = NULL;
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_msg(tun_schedule(f, NULL, &t, &def, &d) == TS_OK, "%s", d.msg);
  uint64_t h = ir_struct_hash_func(sch_traced_func(def));
  sch_traced_free(def);
  int nwarn = 0;
  tun_db *db = tun_db_load(log, NULL, &nwarn, NULL);
  ck_assert_ptr_nonnull(db);
  const tun_record *first = tun_db_get(db, 0);
  ck_assert_msg(first->trace_hash == h, "first record %016llx is not the default schedule %016llx",
                (unsigned long long)first->trace_hash, (unsigned long long)h);
  ck_assert_ptr_null(first->error);
  ck_assert(first->verified);
  ck_assert(r.baseline_seconds == tun_record_mean(first));
  ck_assert(r.best_seconds <= r.baseline_seconds);
  tun_db_close(db);
  tun_tune_result r2;
  ck_assert_int_eq(run_tune(log, 9, &r2), TS_OK);
  ck_assert_int_eq(r2.new_trials, 4);
  ck_assert(r2.baseline_seconds == r.baseline_seconds);
  bool dup;
  ck_assert_int_eq(check_log(log, &dup), 9);
  ck_assert_msg(!dup, "the default schedule was logged twice");
  ts_arena_fini(&a);
  unlink(log);
}
END_TEST

/* An int8 kernel with a layout-free weight: the first candidate is the
 * default a model build makes (the weight packed for the int8 kernel,
 * pack_weights), not the unpacked one of a plain build, so a tuned model
 * build never falls below the untuned one. */
START_TEST(default_int8_packed) {
  static const char *spec = "matmul_u8s8:m=16,n=32,k=16";
  if (!__builtin_cpu_supports("avx2")) {
    fprintf(stderr, "test_tune: no avx2 on this CPU (no int8 kernel family); default_int8_packed skipped\n");
    return;
  }
  char log[256];
  tmp_log(log, sizeof log, "int8");
  ts_arena a;
  ts_arena_init(&a);
  ir_func *f = tu_workload(&a, spec);
  cg_target t = tu_host_target();
  tun_tune_opts o;
  opts(&o, log, 2);
  tun_tune_result r;
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_msg(tun_tune(f, spec, 2.0 * 16 * 32 * 16, &t, &o, &r, &d) == TS_OK, "%s", d.msg);
  sch_traced *def = NULL;
  ck_assert_msg(tun_schedule_opts(f, NULL, &t, &(tun_default_opts){.pack_weights = true}, &def, &d) == TS_OK, "%s",
                d.msg);
  uint64_t h = ir_struct_hash_func(sch_traced_func(def));
  sch_traced_free(def);
  int nwarn = 0;
  tun_db *db = tun_db_load(log, NULL, &nwarn, NULL);
  ck_assert_ptr_nonnull(db);
  const tun_record *first = tun_db_get(db, 0);
  ck_assert_msg(first->trace_hash == h, "first record %016llx is not the packed default %016llx",
                (unsigned long long)first->trace_hash, (unsigned long long)h);
  ck_assert_msg(first->trace && strstr(first->trace, "TransformLayout"), "default not packed: %s",
                first->trace ? first->trace : "(no trace)");
  ck_assert(first->verified);
  ck_assert(r.baseline_seconds == tun_record_mean(first));
  tun_db_close(db);
  ts_arena_fini(&a);
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
    tun_tune_result r;
    _exit(run_tune(log, 24, &r) ? 1 : 0);
  }
  /* Wait until the second batch is partly written, then kill. */
  int lines = 0;
  for (int i = 0; i < 120 * 50 && (lines = tr_count_lines(log)) < 11; i++) usleep(20000);
  ck_assert_int_ge(lines, 11);
  kill(p, SIGKILL);
  int ws;
  waitpid(p, &ws, 0);
  ck_assert(WIFSIGNALED(ws));
  int before = tr_count_lines(log);
  ck_assert_int_lt(before, 24);
  tun_tune_result r;
  ck_assert_int_eq(run_tune(log, 24, &r), TS_OK);
  ck_assert_int_eq(r.trials, 24);
  ck_assert_int_eq(r.new_trials, 24 - before);
  bool dup;
  ck_assert_int_eq(check_log(log, &dup), 24);
  ck_assert_msg(!dup, "a trace was measured twice after the resume");
  unlink(log);
}
END_TEST

START_TEST(corrupt_line_skipped) {
  char log[256];
  tmp_log(log, sizeof log, "corrupt");
  tun_tune_result r;
  ck_assert_int_eq(run_tune(log, 8, &r), TS_OK);
  ck_assert_int_eq(r.trials, 8);
  FILE *fp = fopen(log, "a");
  ck_assert_ptr_nonnull(fp);
  fputs("{\"schema\":1,\"workload_key\": this is not json\n", fp);
  fclose(fp);
  tun_tune_result r2;
  ck_assert_int_eq(run_tune(log, 16, &r2), TS_OK);
  ck_assert_int_eq(r2.trials, 16);
  ck_assert_int_eq(r2.new_trials, 8);
  bool dup;
  ck_assert_int_eq(check_log(log, &dup), 16);
  ck_assert(!dup);
  unlink(log);
}
END_TEST

int main(void) {
  Suite *s = suite_create("tuner_tune");
  TCase *tc = tcase_create("tune");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, budget_and_rerun);
  tcase_add_test(tc, default_is_first_record);
  tcase_add_test(tc, default_int8_packed);
  tcase_add_test(tc, killed_and_resumed);
  tcase_add_test(tc, corrupt_line_skipped);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failures = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failures ? 1 : 0;
}
