/* test_runoff.c — the run-off (tuner/runoff.h) on matmul 64^3: a log where
 * one understated measurement of a deliberately slow schedule (the
 * unscheduled function: scalar, one thread) makes it the best record is
 * corrected by the run-off: the default schedule wins back to back, the
 * log's best and a build's first choice are then the default, and the
 * trial count is unchanged; with no_runoff the old choice stays. Also the
 * run-off record's log rules: not a trial, no duplicate of its trial, a
 * copy of it a duplicate, a bad "runoff" field skipped. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "codegen/llvm.h"
#include "ir/struct.h"
#include "schedule/util.h"
#include "tuner/build.h"
#include "tuner/database.h"
#include "tuner/runoff.h"
#include "tuner/task_scheduler.h"
#include "tuner/tune.h"
#include "util/host_target.h"

#define SPEC "matmul:m=64,n=64,k=64"
#define FLOPS (2.0 * 64 * 64 * 64)


static void opts(tun_tune_opts *o, const char *log, int trials) {
  tun_tune_opts_default(o);
  o->trials = trials;
  o->batch = 8;
  o->log_path = log;
  o->seed = 3;
  o->measure.repeat = 2;
  o->measure.min_repeat_ms = 2;
  o->measure.timeout_s = 20;
  o->measure.num_threads = 1;
  o->progress = stderr;
  o->population = 128;
  o->no_library = true; /* two candidates: the default and the planted one */
}

/* A log with the default schedule's record (tuned, one trial) and a planted
 * record of the unscheduled function claiming 1 ns; *slow gets its hash and
 * *def the default's. */
static void planted_log(const char *path, const ir_func *f, uint64_t *slow, uint64_t *def) {
  unlink(path);
  cg_target t = tu_host_target();
  tun_tune_opts o;
  opts(&o, path, 1);
  tun_tune_result r;
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_msg(tun_tune(f, SPEC, FLOPS, &t, &o, &r, &d) == TS_OK, "%s", d.msg);
  ck_assert_int_eq(r.trials, 1);
  tun_db *db = tun_db_open(path, stderr, NULL, &d);
  ck_assert_ptr_nonnull(db);
  ck_assert_int_eq(tun_db_count(db), 1);
  tun_record rec = *tun_db_get(db, 0);
  *def = rec.trace_hash;
  sch_traced *naive = sch_traced_new(f, 1, &d);
  ck_assert_ptr_nonnull(naive);
  char *tj = sch_trace_to_json(sch_traced_trace(naive));
  rec.trace = tj;
  rec.trace_hash = *slow = ir_struct_hash_func(sch_traced_func(naive));
  rec.nruns = 1;
  rec.run_secs[0] = 1e-9; /* the lucky measurement */
  rec.time = (double)time(NULL);
  ck_assert_msg(tun_db_append(db, &rec, &d) == TS_OK, "%s", d.msg);
  ts_free(tj);
  sch_traced_free(naive);
  ck_assert_uint_eq(tun_db_best_at(db, rec.workload_key, rec.target, 1)->trace_hash, *slow);
  tun_db_close(db);
}

static int count_records(const char *path, int *trials, uint64_t *best, uint64_t *build_first) {
  tun_db *db = tun_db_load(path, NULL, NULL, NULL);
  ck_assert_ptr_nonnull(db);
  int n = tun_db_count(db);
  const tun_record *r0 = tun_db_get(db, 0);
  *trials = tun_db_count_at(db, r0->workload_key, r0->target, 1);
  *best = tun_db_best_at(db, r0->workload_key, r0->target, 1)->trace_hash;
  int nr = 0;
  bool fb = false;
  const tun_record **rs = tun_db_ranked_for_build(db, r0->workload_key, r0->target, 1, &nr, &fb);
  ck_assert_int_gt(nr, 0);
  *build_first = rs[0]->trace_hash;
  ts_free(rs);
  tun_db_close(db);
  return n;
}

static tun_tune_model_result run_model(const char *path, const ir_func *f, bool no_runoff) {
  tun_model_task task = {"matmul", 1, FLOPS, f, SPEC};
  tun_tune_model_opts mo;
  tun_tune_model_opts_default(&mo);
  opts(&mo.tune, path, 2); /* the budget is met: the run goes straight to the run-off */
  mo.tune.no_runoff = no_runoff;
  mo.progress = stderr;
  cg_target t = tu_host_target();
  tun_tune_model_result r;
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_msg(tun_tune_model(&task, 1, &t, &mo, &r, &d) == TS_OK, "%s", d.msg);
  tun_tune_model_print(stderr, &r, "after");
  return r;
}

START_TEST(test_runoff_corrects_lucky_record) {
  char path[96];
  snprintf(path, sizeof path, "/tmp/tessel-test-runoff-%d.json", (int)getpid());
  ts_arena a;
  ts_arena_init(&a);
  ir_func *f = tu_workload(&a, SPEC);
  uint64_t slow = 0, def = 0, best = 0, first = 0;
  int trials = 0;
  planted_log(path, f, &slow, &def);
  ck_assert_uint_ne(slow, def);

  /* --no-runoff: the lucky record stays the choice, nothing is appended */
  tun_tune_model_result r = run_model(path, f, true);
  ck_assert_int_eq(r.tasks[0].runoff_cands, 0);
  ck_assert(r.tasks[0].best_seconds < 1e-8);
  tun_tune_model_result_fini(&r);
  ck_assert_int_eq(count_records(path, &trials, &best, &first), 2);
  ck_assert_uint_eq(best, slow);
  ck_assert_uint_eq(first, slow);

  /* the run-off: the default wins back to back and is what a build replays */
  r = run_model(path, f, false);
  ck_assert_int_eq(r.tasks[0].runoff_cands, 2);
  ck_assert(r.tasks[0].runoff_changed);
  ck_assert_str_eq(r.tasks[0].runoff_winner, "default");
  ck_assert_str_eq(r.tasks[0].runoff_was, "tuned");
  ck_assert(r.tasks[0].best_seconds > 1e-8);
  ck_assert_int_eq(r.trials, 2);
  ck_assert_int_eq(r.new_trials, 0);
  ck_assert_int_eq(r.runoff_changes, 1);
  tun_tune_model_result_fini(&r);
  ck_assert_int_eq(count_records(path, &trials, &best, &first), 4);
  ck_assert_int_eq(trials, 2); /* run-off records are no trials */
  ck_assert_uint_eq(best, def);
  ck_assert_uint_eq(first, def);

  /* the same candidates again: already run off, nothing measured or appended */
  cg_target t = tu_host_target();
  tun_tune_opts o;
  opts(&o, path, 2);
  tun_runoff_result ro;
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_msg(tun_runoff(f, &t, &o, "matmul", &ro, &d) == TS_OK, "%s", d.msg);
  ck_assert_int_eq(ro.ncands, 0);
  ck_assert_str_eq(ro.skipped, "already run off");
  ck_assert_int_eq(count_records(path, &trials, &best, &first), 4);

  /* a tune with the same budget measures nothing: the budget counts trials only */
  tun_tune_result tr;
  ck_assert_msg(tun_tune(f, SPEC, FLOPS, &t, &o, &tr, &d) == TS_OK, "%s", d.msg);
  ck_assert_int_eq(tr.new_trials, 0);
  ck_assert_int_eq(tr.trials, 2);
  unlink(path);
  ts_arena_fini(&a);
}
END_TEST

static const char *const LINE =
    "{\"schema\":1,\"workload_key\":\"98300b2c22fc1217\",\"workload\":\"matmul:m=64,n=64,k=64\",\"target\":\"llvm\","
    "\"trace\":[[],[]],\"run_secs\":[%s],\"build_secs\":0.1,\"error\":null,\"verified\":true,\"time\":1,"
    "\"version\":\"0.1.0\",\"trace_hash\":\"%s\",\"threads\":1%s}\n";

START_TEST(test_runoff_record_rules) {
  char path[96];
  snprintf(path, sizeof path, "/tmp/tessel-test-runoff-log-%d.json", (int)getpid());
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fprintf(f, LINE, "1e-3", "00000000000000aa", "");
  fprintf(f, LINE, "2e-3", "00000000000000bb", "");
  /* run-off 1: bb faster than aa back to back (median of 5; one loaded round) */
  fprintf(f, LINE, "5e-3,5e-3,5e-3,9,9", "00000000000000aa", ",\"runoff\":1");
  fprintf(f, LINE, "4e-3,4e-3,4e-3,4e-3,4e-3", "00000000000000bb", ",\"runoff\":1");
  fprintf(f, LINE, "4e-3,4e-3,4e-3,4e-3,4e-3", "00000000000000bb", ",\"runoff\":1"); /* a copy: a duplicate */
  fprintf(f, LINE, "1e-3", "00000000000000cc", ",\"runoff\":0");                     /* skipped */
  fprintf(f, LINE, "1e-3", "00000000000000cc", ",\"runoff\":true");                  /* skipped */
  fclose(f);
  int nwarn = 0;
  tun_db *db = tun_db_load(path, stderr, &nwarn, NULL);
  ck_assert_ptr_nonnull(db);
  ck_assert_int_eq(nwarn, 2);
  ck_assert_int_eq(tun_db_duplicates(db), 1);
  ck_assert_int_eq(tun_db_count(db), 4);
  const char *k = "98300b2c22fc1217";
  ck_assert_int_eq(tun_db_count_for(db, k, "llvm"), 2);
  ck_assert_int_eq(tun_db_count_at(db, k, "llvm", 1), 2);
  const tun_record *b = tun_db_best(db, k, "llvm");
  ck_assert_uint_eq(b->trace_hash, 0xbb);
  ck_assert_int_eq(b->runoff, 1);
  ck_assert(tun_record_mean(b) == 4e-3);
  ck_assert_uint_eq(tun_db_best_at(db, k, "llvm", 1)->trace_hash, 0xbb);
  ck_assert_double_eq(tun_record_mean(tun_db_get(db, 2)), 5e-3); /* a run-off record's time is its median */
  int n = 0;
  const tun_record **rs = tun_db_ranked(db, k, "llvm", &n);
  ck_assert_int_eq(n, 4);
  ck_assert(rs[0]->trace_hash == 0xbb && rs[0]->runoff == 1);
  ck_assert(rs[1]->trace_hash == 0xaa && rs[1]->runoff == 1);
  ck_assert(rs[2]->trace_hash == 0xaa && rs[2]->runoff == 0);
  ts_free(rs);
  const tun_record *last[4];
  int nl = 0;
  ck_assert_int_eq(tun_db_runoff_last(db, k, "llvm", 1, last, 4, &nl), 1);
  ck_assert_int_eq(nl, 2);
  ck_assert_int_eq(tun_db_runoff_next(db, k, "llvm"), 2);
  /* written back with its mark */
  char *js = tun_record_to_json(b);
  ck_assert_ptr_nonnull(strstr(js, "\"runoff\":1"));
  ts_free(js);
  tun_db_close(db);
  unlink(path);
}
END_TEST

/* When a library call is the best trial, the best generated kernel still
 * runs against it: a log with the default schedule (first), a faster library
 * call and a generated record timed between them gets a run-off of all three
 * (it had two: the library call was taken as the best trial and the best
 * library both). */
START_TEST(test_runoff_keeps_generated_beside_library) {
  char path[96];
  snprintf(path, sizeof path, "/tmp/tessel-test-runoff-lib-%d.json", (int)getpid());
  unlink(path);
  ts_arena a;
  ts_arena_init(&a);
  ir_func *f = tu_workload(&a, SPEC);
  cg_target t = tu_host_target();
  tun_tune_opts o;
  opts(&o, path, 4);
  o.no_library = false;
  o.no_runoff = true;
  tun_tune_result r;
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_msg(tun_tune(f, SPEC, FLOPS, &t, &o, &r, &d) == TS_OK, "%s", d.msg);
  tun_db *db = tun_db_open(path, stderr, NULL, &d);
  ck_assert_ptr_nonnull(db);
  const tun_record *lib = NULL, *def = tun_db_get(db, 0);
  for (int i = 0; i < tun_db_count(db); i++)
    if (tun_db_get(db, i)->kind && tun_db_get(db, i)->verified) lib = tun_db_get(db, i);
  if (!lib) { /* built without a library: nothing to check */
    tun_db_close(db);
    unlink(path);
    ts_arena_fini(&a);
    return;
  }
  /* a generated record timed between the library call and the default */
  double tl = tun_record_mean(lib), td = tun_record_mean(def);
  if (tl >= td) { /* the library lost to the default here: not this case */
    tun_db_close(db);
    unlink(path);
    ts_arena_fini(&a);
    return;
  }
  sch_traced *naive = sch_traced_new(f, 1, &d);
  ck_assert_ptr_nonnull(naive);
  char *tj = sch_trace_to_json(sch_traced_trace(naive));
  tun_record gen = *def;
  gen.trace = tj;
  gen.trace_hash = ir_struct_hash_func(sch_traced_func(naive));
  gen.nruns = 1;
  gen.run_secs[0] = (tl + td) / 2;
  gen.time = (double)time(NULL);
  ck_assert_msg(tun_db_append(db, &gen, &d) == TS_OK, "%s", d.msg);
  ts_free(tj);
  sch_traced_free(naive);
  tun_db_close(db);
  o.no_runoff = false;
  tun_runoff_result rr;
  ck_assert_msg(tun_runoff(f, &t, &o, "matmul", &rr, &d) == TS_OK, "%s", d.msg);
  /* the default, the generated record and each library call's best (one or more) */
  ck_assert_msg(rr.ncands >= 3, "%d candidates (%s)", rr.ncands, rr.skipped ? rr.skipped : "run");
  ck_assert(rr.lib[0] && rr.kernel_seconds > 0 && rr.default_seconds > 0);
  ck_assert_msg(!strncmp(rr.was, "library ", 8), "the choice before the run-off: %s", rr.was); /* listed first */
  unlink(path);
  ts_arena_fini(&a);
}
END_TEST

int main(void) {
  Suite *s = suite_create("runoff");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, test_runoff_record_rules);
  tcase_add_test(tc, test_runoff_corrects_lucky_record);
  tcase_add_test(tc, test_runoff_keeps_generated_beside_library);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int nf = srunner_ntests_failed(sr);
  srunner_free(sr);
  return nf ? EXIT_FAILURE : EXIT_SUCCESS;
}
