/* test_files_log.c — files and the tuning log against the inputs that used
 * to break them, driven through the tessel binary as a user would (issue 21,
 * items 5-7): readers with limits (/dev/zero, /dev/full, over-size files),
 * a log that cannot be poisoned (zero or negative times, a trace of the
 * wrong type, an empty target) or doubled (a second tuner on a locked log,
 * duplicated lines), `build --log` falling back to the next best record,
 * strict numbers for every option, and `tessel run` opening a bare model
 * name in the current directory. argv[1] is the tessel binary; MODELS_DIR
 * the generated ONNX models. Time bounds are generous: the tight figures are
 * not what is tested. */
#define _GNU_SOURCE
#include <check.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/run.h"

static const char *tessel;
static char tmpdir[256];

static tr_result run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static tr_result run(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  tr_result r = tr_vrun(tmpdir, tessel, fmt, ap);
  va_end(ap);
  return r;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static const char *tmp(const char *name) {
  static char buf[8][512];
  static int k;
  char *b = buf[k++ % 8];
  snprintf(b, 512, "%s/%s", tmpdir, name);
  return b;
}

static void write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs(text, f);
  ck_assert_int_eq(fclose(f), 0);
}

/* The largest resident set of any command this test has run so far, MiB. */
static double children_maxrss_mib(void) {
  struct rusage ru;
  getrusage(RUSAGE_CHILDREN, &ru);
  return (double)ru.ru_maxrss / 1024;
}

/* ---- readers with limits ------------------------------------------------- */

START_TEST(log_on_dev_full) {
  /* Appending to a full device: the first failed write stops the tuner with
   * the device's error, without reading the device as a log (which never
   * ends) and without growing memory. */
  double t0 = now_s();
  tr_result r = tr_sh(tmpdir, "ulimit -v 4000000; exec '%s' tune matmul:m=8,n=8,k=8 --trials 4 --batch 2 --log /dev/full",
                      tessel);
  double secs = now_s() - t0;
  ck_assert_msg(r.status == 1, "status %d: %s", r.status, r.err);
  ck_assert_msg(strstr(r.err, "/dev/full") && strstr(r.err, "No space left on device"), "%s", r.err);
  ck_assert_msg(secs < 120, "%.1f s", secs);
  ck_assert_msg(children_maxrss_mib() < 1024, "peak resident set %.0f MiB", children_maxrss_mib());
  tr_result_free(&r);
}
END_TEST

START_TEST(readers_dev_zero_and_oversize) {
  double t0 = now_s();
  tr_result r = tr_sh(tmpdir, "ulimit -v 4000000; exec '%s' log inspect /dev/zero", tessel);
  ck_assert_msg(r.status == 2, "status %d: %s%s", r.status, r.out, r.err); /* not "0 records" */
  ck_assert_msg(strstr(r.err, "/dev/zero:1: a line longer than 16 MiB") && strstr(r.err, "not a tuning log"), "%s",
                r.err);
  tr_result_free(&r);
  r = tr_sh(tmpdir, "ulimit -v 4000000; exec '%s' show matmul:m=4,n=4,k=4 --trace /dev/zero", tessel);
  ck_assert_msg(r.status == 2, "status %d: %s", r.status, r.err);
  ck_assert_msg(strstr(r.err, "/dev/zero") && strstr(r.err, "64 MiB limit for a trace file"), "%s", r.err);
  tr_result_free(&r);
  ck_assert_msg(now_s() - t0 < 60, "%.1f s", now_s() - t0);
  ck_assert_msg(children_maxrss_mib() < 1024, "peak resident set %.0f MiB", children_maxrss_mib());
  /* an over-size DSL file (sparse: no disk used) is refused before reading */
  const char *big = tmp("big.tsl");
  int fd = open(big, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(ftruncate(fd, (off_t)1 << 30), 0);
  close(fd);
  t0 = now_s();
  r = run("show '%s'", big);
  ck_assert_int_eq(r.status, 2);
  ck_assert_msg(strstr(r.err, big) && strstr(r.err, "1 GiB is over the 16 MiB limit for a DSL file"), "%s", r.err);
  ck_assert(now_s() - t0 < 30);
  tr_result_free(&r);
  unlink(big);
}
END_TEST

/* ---- the log -------------------------------------------------------------- */

/* A real log of a small workload (3 trials) at path: tuned once into
 * master.jsonl, then copied (each test runs in a process of its own). */
static void make_log(const char *path) {
  const char *master = tmp("master.jsonl");
  if (tr_count_lines(master) != 3) {
    unlink(master);
    /* trials only (no run-off records): the tests count its lines */
    tr_result r = run("tune matmul:m=8,n=8,k=8 --trials 3 --batch 3 --log '%s' --model random --no-runoff", master);
    ck_assert_msg(r.status == 0, "tune: %s", r.err);
    tr_result_free(&r);
  }
  char *text = tr_slurp(master);
  write_text(path, text);
  free(text);
  ck_assert_int_eq(tr_count_lines(path), 3);
}

/* The first line of path that has a verified record, as a JSON object. */
static json_t *first_record(const char *path) {
  char *text = tr_slurp(path);
  json_t *o = NULL;
  for (char *line = strtok(text, "\n"); line && !o; line = strtok(NULL, "\n")) {
    json_t *j = json_loads(line, 0, NULL);
    if (j && json_is_true(json_object_get(j, "verified"))) o = j;
    else json_decref(j);
  }
  free(text);
  ck_assert_ptr_nonnull(o);
  return o;
}

static void append_json(const char *path, json_t *o) {
  char *s = json_dumps(o, JSON_COMPACT);
  FILE *f = fopen(path, "a");
  ck_assert_ptr_nonnull(f);
  fprintf(f, "%s\n", s);
  fclose(f);
  free(s);
}

/* A copy of rec with a new trace hash (a distinct record) and field k set to v. */
static json_t *variant(json_t *rec, const char *hash, const char *k, json_t *v) {
  json_t *o = json_deep_copy(rec);
  json_object_set_new(o, "trace_hash", json_string(hash));
  if (k) json_object_set_new(o, k, v);
  else json_decref(v);
  return o;
}

START_TEST(poisoned_records_skipped) {
  const char *log = tmp("poison.jsonl");
  make_log(log);
  tr_result r = run("log best '%s' --json", log);
  ck_assert_msg(r.status == 0, "%s", r.err);
  json_t *best = json_loads(r.out, 0, NULL);
  ck_assert_ptr_nonnull(best);
  double best_mean = json_number_value(json_object_get(best, "mean_seconds"));
  ck_assert(best_mean > 0);
  tr_result_free(&r);
  json_t *rec = first_record(log);
  /* each poisoned variant claims to be the fastest ever */
  json_t *zero = json_array(), *neg = json_array();
  json_array_append_new(zero, json_real(0.0));
  json_array_append_new(neg, json_real(-1e-3));
  json_t *v[] = {
      variant(rec, "00000000000000a1", "run_secs", zero),
      variant(rec, "00000000000000a2", "run_secs", neg),
      variant(rec, "00000000000000a3", "trace", json_string("[[],[]]")),
      variant(rec, "00000000000000a4", "trace", json_object()),
      variant(rec, "00000000000000a5", "trace", json_null()), /* a success record with nothing to rebuild */
      variant(rec, "00000000000000a6", "target", json_string("")),
      variant(rec, "00000000000000a7", "build_secs", json_real(-1)),
  };
  const char *why[] = {"run_secs[0] is 0", "run_secs[0] is -0.001", "field \"trace\" is a string",
                       "field \"trace\" is an object", "field \"trace\" is null", "field \"target\" is empty",
                       "field \"build_secs\" is -1"};
  int n = (int)(sizeof v / sizeof v[0]);
  for (int i = 0; i < n; i++) {
    json_t *runs = json_object_get(v[i], "run_secs");
    if (!json_array_size(runs) || json_number_value(json_array_get(runs, 0)) > 0) {
      json_t *fast = json_array();
      json_array_append_new(fast, json_real(1e-12));
      json_object_set_new(v[i], "run_secs", fast);
    }
    append_json(log, v[i]);
    json_decref(v[i]);
  }
  /* an error record without a trace is valid */
  json_t *er = variant(rec, "00000000000000b1", "trace", json_null());
  json_object_set_new(er, "error", json_string("build: something failed"));
  json_object_set_new(er, "verified", json_false());
  json_object_set_new(er, "run_secs", json_array());
  append_json(log, er);
  json_decref(er);
  r = run("log inspect '%s' --json", log);
  ck_assert_msg(r.status == 0, "%s", r.err);
  for (int i = 0; i < n; i++) {
    char want[512];
    snprintf(want, sizeof want, "%s:%d: skipped: %s", log, 4 + i, why[i]);
    ck_assert_msg(strstr(r.err, want), "missing '%s' in:\n%s", want, r.err);
  }
  json_t *ins = json_loads(r.out, 0, NULL);
  ck_assert_ptr_nonnull(ins);
  ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(ins, 0), "trials")), 4);
  ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(ins, 0), "errors")), 1);
  json_decref(ins);
  tr_result_free(&r);
  /* the best is still the real one, with its fields */
  r = run("log best '%s' --json", log);
  ck_assert_msg(r.status == 0, "%s", r.err);
  json_t *b2 = json_loads(r.out, 0, NULL);
  ck_assert_ptr_nonnull(b2);
  static const char *fields[] = {"workload_key", "workload", "target", "trace", "run_secs", "verified",
                                 "trace_hash", "mean_seconds", "gflops"};
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
    ck_assert_msg(json_object_get(b2, fields[i]), "log best --json lacks %s", fields[i]);
  ck_assert(json_number_value(json_object_get(b2, "mean_seconds")) == best_mean);
  ck_assert(json_is_array(json_object_get(b2, "trace")));
  json_decref(b2);
  json_decref(best);
  tr_result_free(&r);
  /* and a resumed tune sees a valid best (not "no valid candidate yet") */
  r = run("tune matmul:m=8,n=8,k=8 --trials 4 --batch 1 --log '%s' --model random", log);
  ck_assert_msg(r.status == 0, "%s", r.err);
  ck_assert_msg(!strstr(r.out, "no valid candidate"), "%s", r.out);
  tr_result_free(&r);
  json_decref(rec);
}
END_TEST

START_TEST(build_falls_back_to_next_best) {
  const char *log = tmp("fallback.jsonl");
  make_log(log);
  json_t *rec = first_record(log);
  /* the fastest record, verified, whose trace names a block the workload lacks */
  json_t *bad = json_deep_copy(rec);
  json_error_t e;
  json_t *tr = json_loads("[[[\"GetBlock\",[],[\"\\\"no_such_block\\\"\",\"\\\"main\\\"\"],[\"b0\"]]],[]]", 0, &e);
  ck_assert_msg(tr != NULL, "%s", e.text);
  json_object_set_new(bad, "trace", tr);
  json_object_set_new(bad, "trace_hash", json_string("00000000000000c1"));
  json_t *fast = json_array();
  json_array_append_new(fast, json_real(1e-12));
  json_object_set_new(bad, "run_secs", fast);
  append_json(log, bad);
  json_decref(bad);
  json_decref(rec);
  const char *so = tmp("fallback.so");
  tr_result r = run("build matmul:m=8,n=8,k=8 --log '%s' -o '%s'", log, so);
  ck_assert_msg(r.status == 0, "%s", r.err);
  ck_assert_msg(strstr(r.err, "the best record (mean 1e-09 ms, trace 00000000000000c1) does not replay") &&
                    strstr(r.err, "trying the next best") && strstr(r.err, "using the next best replaying record"),
                "%s", r.err);
  tr_result_free(&r);
  struct stat sb;
  ck_assert_int_eq(stat(so, &sb), 0);
}
END_TEST


/* Each record carries the thread count it was measured with; a tune at
 * another count has its own budget; build --log picks the records of its
 * --threads, else the best of any count, saying so (kernels and models). */
static void assert_threads(const char *log, int from_line, int threads) {
  char *text = tr_slurp(log);
  int line = 0;
  for (char *l = strtok(text, "\n"); l; l = strtok(NULL, "\n")) {
    if (++line < from_line) continue;
    json_t *j = json_loads(l, 0, NULL);
    ck_assert_ptr_nonnull(j);
    json_t *t = json_object_get(j, "threads");
    ck_assert_msg(json_is_integer(t) && json_integer_value(t) == threads, "line %d: %s", line, l);
    json_decref(j);
  }
  free(text);
}

START_TEST(threads_in_records_and_build) {
  const char *log = tmp("threads.jsonl");
  unlink(log);
  tr_result r =
      run("tune matmul:m=8,n=8,k=8 --trials 3 --batch 3 --log '%s' --model random --threads 2 --no-runoff", log);
  ck_assert_msg(r.status == 0, "%s", r.err);
  tr_result_free(&r);
  ck_assert_int_eq(tr_count_lines(log), 3);
  assert_threads(log, 1, 2);
  /* one thread: its own 3 trials (the 2-thread ones do not count), its own default */
  r = run("tune matmul:m=8,n=8,k=8 --trials 3 --batch 3 --log '%s' --model random --threads 1 --no-runoff", log);
  ck_assert_msg(r.status == 0, "%s", r.err);
  tr_result_free(&r);
  ck_assert_int_eq(tr_count_lines(log), 6);
  assert_threads(log, 4, 1);
  const char *so = tmp("threads.so");
  r = run("build matmul:m=8,n=8,k=8 --log '%s' --threads 2 -o '%s'", log, so);
  ck_assert_msg(r.status == 0, "%s", r.err);
  ck_assert_msg(strstr(r.err, "using the best record of") && strstr(r.err, "at 2 threads") &&
                    !strstr(r.err, "any thread count"), "%s", r.err);
  tr_result_free(&r);
  r = run("build matmul:m=8,n=8,k=8 --log '%s' --threads 3 -o '%s'", log, so);
  ck_assert_msg(r.status == 0, "%s", r.err);
  ck_assert_msg(strstr(r.err, "has no record of matmul:m=8,n=8,k=8") &&
                    strstr(r.err, "measured at 3 threads; using the best of any thread count"), "%s", r.err);
  tr_result_free(&r);
  const char *models = getenv("MODELS_DIR");
  if (!models) return;
  const char *mlog = tmp("threads_model.jsonl");
  unlink(mlog);
  r = run("tune-model '%s/mlp.onnx' --trials 4 --log '%s' --model random --threads 2", models, mlog);
  ck_assert_msg(r.status == 0, "%s", r.err);
  tr_result_free(&r);
  assert_threads(mlog, 1, 2);
  const char *mso = tmp("threads_model.so");
  r = run("build '%s/mlp.onnx' --log '%s' --threads 2 -o '%s' --json", models, mlog, mso);
  ck_assert_msg(r.status == 0, "%s", r.err);
  json_t *j = json_loads(r.out, 0, NULL);
  ck_assert_msg(j != NULL, "%s", r.out);
  ck_assert_int_eq(json_integer_value(json_object_get(j, "threads")), 2);
  ck_assert_int_eq(json_integer_value(json_object_get(j, "other_thread_records")), 0);
  int tuned = (int)json_integer_value(json_object_get(j, "tuned"));
  ck_assert_int_ge(tuned, 1);
  json_decref(j);
  ck_assert_msg(!strstr(r.err, "any thread count"), "%s", r.err);
  tr_result_free(&r);
  r = run("build '%s/mlp.onnx' --log '%s' --threads 1 -o '%s' --json", models, mlog, mso);
  ck_assert_msg(r.status == 0, "%s", r.err);
  j = json_loads(r.out, 0, NULL);
  ck_assert_msg(j != NULL, "%s", r.out);
  ck_assert_int_eq(json_integer_value(json_object_get(j, "other_thread_records")), tuned);
  ck_assert_int_eq(json_integer_value(json_object_get(j, "tuned")), tuned); /* the fallback still tunes them */
  json_decref(j);
  ck_assert_msg(strstr(r.err, "no record measured at 1 thread; using the best of any thread count"), "%s", r.err);
  tr_result_free(&r);
}
END_TEST

START_TEST(second_tuner_refused) {
  const char *log = tmp("locked.jsonl");
  make_log(log);
  /* another tuner holds the log (the advisory lock tessel takes) */
  int fd = open(log, O_RDONLY);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(flock(fd, LOCK_EX | LOCK_NB), 0);
  tr_result r = run("tune matmul:m=8,n=8,k=8 --trials 6 --batch 3 --log '%s' --model random", log);
  ck_assert_int_eq(r.status, 1);
  ck_assert_msg(strstr(r.err, "is in use: another tuner is appending to it"), "%s", r.err);
  tr_result_free(&r);
  ck_assert_int_eq(tr_count_lines(log), 3); /* nothing appended */
  /* tune-model too */
  const char *models = getenv("MODELS_DIR");
  if (models) {
    r = run("tune-model '%s/mlp.onnx' --trials 4 --log '%s' --model random", models, log);
    ck_assert_int_ne(r.status, 0);
    ck_assert_msg(strstr(r.err, "is in use"), "%s", r.err);
    tr_result_free(&r);
  }
  close(fd); /* released: the next tuner runs */
  r = run("tune matmul:m=8,n=8,k=8 --trials 5 --batch 2 --log '%s' --model random --no-runoff", log);
  ck_assert_msg(r.status == 0, "%s", r.err);
  tr_result_free(&r);
  ck_assert_int_eq(tr_count_lines(log), 5);
}
END_TEST

START_TEST(duplicates_counted_once) {
  const char *log = tmp("dup.jsonl"), *doubled = tmp("dup2.jsonl");
  make_log(log);
  char *text = tr_slurp(log);
  FILE *f = fopen(doubled, "w");
  ck_assert_ptr_nonnull(f);
  for (int i = 0; i < 3; i++) fputs(text, f);
  fclose(f);
  free(text);
  tr_result r = run("log inspect '%s' --json", doubled);
  ck_assert_msg(r.status == 0, "%s", r.err);
  json_t *j = json_loads(r.out, 0, NULL);
  ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(j, 0), "trials")), 3);
  json_decref(j);
  ck_assert_msg(strstr(r.err, "6 duplicate records") && strstr(r.err, "first at line 4") &&
                    strstr(r.err, "counted once"),
                "%s", r.err);
  tr_result_free(&r);
  /* a tune on the doubled log sees 3 trials done, not 9 */
  r = run("tune matmul:m=8,n=8,k=8 --trials 5 --batch 2 --log '%s' --model random --json", doubled);
  ck_assert_msg(r.status == 0, "%s", r.err);
  j = json_loads(r.out, 0, NULL);
  ck_assert_ptr_nonnull(j);
  ck_assert_int_eq(json_integer_value(json_object_get(j, "trials")), 5);
  json_decref(j);
  tr_result_free(&r);
}
END_TEST

START_TEST(incomplete_last_line_named) {
  const char *log = tmp("torn.jsonl");
  make_log(log);
  FILE *f = fopen(log, "a");
  fputs("{\"schema\":1,\"workload_key\":\"0123", f);
  fclose(f);
  tr_result r = run("log inspect '%s'", log);
  ck_assert_int_eq(r.status, 0);
  char want[600];
  snprintf(want, sizeof want, "%s:4: skipped: incomplete last line (32 bytes without the closing newline", log);
  ck_assert_msg(strstr(r.err, want), "%s", r.err);
  ck_assert_msg(!strstr(r.err, "killed?"), "%s", r.err);
  tr_result_free(&r);
}
END_TEST

/* ---- strict numbers ------------------------------------------------------------ */

START_TEST(strict_numbers) {
  const char *dsl = tmp("sym.tsl");
  write_text(dsl, "kernel k(A: f32[M, N]) -> B: f32[M, N] {\n  B[i, j] = A[i, j] * 2.0\n}\n");
  static const struct {
    const char *args, *want;
  } bad[] = {
      {"tune matmul --trials 99999999999999 --log x.jsonl", "--trials wants an integer"},
      {"tune matmul --trials 12abc --log x.jsonl", "--trials"},
      {"tune matmul --trials 4 --batch 0 --log x.jsonl", "--batch"},
      {"tune matmul --trials 4 --log x.jsonl --timeout nan", "--timeout wants a number"},
      {"tune matmul --trials 4 --log x.jsonl --timeout inf", "--timeout"},
      {"tune matmul --trials 4 --log x.jsonl --seed -1", "--seed"},
      {"tune matmul --trials 4 --log x.jsonl --slow-cutoff 1x", "--slow-cutoff"},
      {"tune matmul --trials 4 --log x.jsonl --threads many", "--threads"},
      {"bench matmul --repeat 4294967297", "--repeat"},
      {"bench matmul --min-repeat-ms 1e999", "--min-repeat-ms"},
      {"bench matmul --cooldown-ms -5", "--cooldown-ms"},
      {"tracker --port 65536", "--port"},
      {"tracker --port 80x", "--port"},
      {"sketches matmul --instantiate 1e3", "--instantiate"},
      {"run SYM --sym M=abc --sym N=4", "--sym"},
      {"run SYM --sym M=12abc --sym N=4", "--sym"},
      {"run SYM --sym M=0 --sym N=4", "--sym"},
      {"run SYM --sym M=99999999999999999999 --sym N=4", "--sym"},
      {"tune-model MODEL --trials 4 --log x.jsonl --sym batch=4x", "--sym"},
      {"tune-model MODEL --trials 40000000000 --log x.jsonl", "--trials"},
  };
  const char *models = getenv("MODELS_DIR");
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char args[1024];
    const char *a = bad[i].args;
    if (!strncmp(a, "run SYM", 7)) snprintf(args, sizeof args, "run '%s'%s", dsl, a + 7);
    else if (!strncmp(a, "tune-model MODEL", 16)) {
      if (!models) continue;
      snprintf(args, sizeof args, "tune-model '%s/mlp.onnx'%s", models, a + 16);
    } else snprintf(args, sizeof args, "%s", a);
    tr_result r = run("%s", args);
    ck_assert_msg(r.status == 2, "`tessel %s` exited %d: %s", args, r.status, r.err);
    ck_assert_msg(strstr(r.err, bad[i].want), "`tessel %s`: %s", args, r.err);
    tr_result_free(&r);
  }
  /* rpc-server: a bad --port is refused; --port 0 (a port the system picks,
   * which the server reports to its tracker) is valid: the server runs */
  const char *secret = tmp("secret");
  write_text(secret, "k3Vq9ZpL0wXy7TbN2mRc5sHd8jFa4GeU");
  chmod(secret, 0600);
  tr_result r = run("rpc-server --no-tracker --host 127.0.0.1 --port 65536 --secret-file '%s'", secret);
  ck_assert_int_eq(r.status, 2);
  ck_assert_msg(strstr(r.err, "--port"), "%s", r.err);
  tr_result_free(&r);
  r = tr_sh(tmpdir, "timeout 3 '%s' rpc-server --no-tracker --host 127.0.0.1 --port 0 --secret-file '%s'", tessel,
            secret);
  ck_assert_msg(r.status == 124, "status %d: %s", r.status, r.err);
  tr_result_free(&r);
  /* values at the edge are taken */
  r = run("run '%s' --sym M=3 --sym N=5", dsl);
  ck_assert_msg(r.status == 0 && strstr(r.out, "15 elements"), "%s", r.err);
  tr_result_free(&r);
}
END_TEST

START_TEST(spec_without_parameters) {
  tr_result r = run("show matmul:");
  ck_assert_int_eq(r.status, 2);
  ck_assert_msg(strstr(r.err, "matmul: no parameters after ':'") && strstr(r.err, "m, n, k"), "%s", r.err);
  tr_result_free(&r);
  r = run("show matmul"); /* the bare name takes the defaults */
  ck_assert_msg(r.status == 0, "%s", r.err);
  tr_result_free(&r);
}
END_TEST

START_TEST(byte_count_overflow_refused) {
  const char *dsl = tmp("huge.tsl");
  write_text(dsl, "kernel huge(A: f32[9223372036854775807]) -> B: f32[9223372036854775807] {\n"
                  "  B[i] = A[i] * 2.0\n}\n");
  tr_result r = run("bench '%s'", dsl);
  ck_assert_int_eq(r.status, 2);
  ck_assert_msg(strstr(r.err, "huge.tsl:1:") && strstr(r.err, "parameter 'A'") && strstr(r.err, "overflows"), "%s",
                r.err);
  ck_assert_msg(!strstr(r.err, "crashed"), "%s", r.err);
  tr_result_free(&r);
  /* a symbolic size bound so large that the bytes overflow */
  const char *sym = tmp("sym2.tsl");
  write_text(sym, "kernel k(A: f32[M, N]) -> B: f32[M, N] {\n  B[i, j] = A[i, j] * 2.0\n}\n");
  r = run("run '%s' --sym M=4611686018427387904 --sym N=4", sym);
  ck_assert_int_eq(r.status, 2);
  ck_assert_msg(strstr(r.err, "parameter 'A'") && strstr(r.err, "overflows"), "%s", r.err);
  tr_result_free(&r);
}
END_TEST

/* ---- tessel run MODEL.so --------------------------------------------------------- */

START_TEST(run_bare_model_name) {
  const char *models = getenv("MODELS_DIR");
  if (!models) {
    fprintf(stderr, "test_files_log: MODELS_DIR unset; run_bare_model_name skipped\n");
    return;
  }
  char here[600], other[600];
  snprintf(here, sizeof here, "%s/here", tmpdir);
  snprintf(other, sizeof other, "%s/other", tmpdir);
  mkdir(here, 0700);
  mkdir(other, 0700);
  tr_result r = run("build '%s/mlp.onnx' -o '%s/model.so'", models, here);
  ck_assert_msg(r.status == 0, "%s", r.err);
  tr_result_free(&r);
  r = run("build '%s/cnn.onnx' -o '%s/model.so'", models, other);
  ck_assert_msg(r.status == 0, "%s", r.err);
  tr_result_free(&r);
  /* a bare name is the file in the current directory, whatever LD_LIBRARY_PATH says */
  r = tr_sh(here, "cd '%s' && LD_LIBRARY_PATH='%s' '%s' run model.so --json", here, other, tessel);
  ck_assert_msg(r.status == 0, "%s", r.err);
  tr_result mine = tr_sh(here, "cd '%s' && '%s' run ./model.so --json", here, tessel);
  ck_assert_msg(mine.status == 0, "%s", mine.err);
  json_t *a = json_loads(r.out, 0, NULL), *b = json_loads(mine.out, 0, NULL);
  ck_assert(a && b);
  char *oa = json_dumps(json_object_get(a, "outputs"), JSON_COMPACT), *ob = json_dumps(json_object_get(b, "outputs"), JSON_COMPACT);
  ck_assert_str_eq(oa, ob); /* the same model ran (mlp, not cnn): same outputs and checksums */
  free(oa);
  free(ob);
  json_decref(a);
  json_decref(b);
  tr_result_free(&mine);
  tr_result_free(&r);
  /* and where the current directory has none, nothing is found elsewhere */
  r = tr_sh(tmpdir, "cd '%s' && LD_LIBRARY_PATH='%s' '%s' run model.so", tmpdir, other, tessel);
  ck_assert_int_ne(r.status, 0);
  ck_assert_msg(strstr(r.err, "model.so"), "%s", r.err);
  tr_result_free(&r);
}
END_TEST

START_TEST(tune_help_tells_the_truth) {
  tr_result r = run("tune --help");
  ck_assert_int_eq(r.status, 0);
  ck_assert_msg(!strstr(r.out, "(not logged)"), "%s", r.out);
  ck_assert_msg(strstr(r.out, "The default schedule is the first candidate") && strstr(r.out, "logged"), "%s", r.out);
  tr_result_free(&r);
}
END_TEST

/* A library call measured after the cost model trained (the run-off at the
 * end of a tune) runs: the tuner's XGBoost must not leave an OpenMP pool that
 * makes a forked measuring child entering OpenMP (oneDNN) hang. */
START_TEST(library_measured_after_model_trained) {
  tr_result r = run("tune matmul:m=96,n=80,k=72 --trials 24 --batch 8 --xgb-min-samples 8 --log %s",
                    tmp("lib_after_xgb.json"));
  ck_assert_msg(r.status == 0, "%s%s", r.out, r.err);
  if (strstr(r.out, "library") || strstr(r.err, "library")) { /* built with a library */
    ck_assert_msg(strstr(r.err, "run-off") || strstr(r.out, "run-off"), "%s%s", r.out, r.err);
    ck_assert_msg(!strstr(r.err, "drops out") && !strstr(r.out, "drops out"), "%s%s", r.out, r.err);
  }
  tr_result_free(&r);
}
END_TEST

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: test_files_log PATH-TO-TESSEL\n");
    return 2;
  }
  tessel = argv[1];
  snprintf(tmpdir, sizeof tmpdir, "/tmp/tessel-fileslog-XXXXXX");
  if (!mkdtemp(tmpdir)) return 2;
  Suite *s = suite_create("files_log");
  TCase *tc = tcase_create("files_log");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, log_on_dev_full);
  tcase_add_test(tc, readers_dev_zero_and_oversize);
  tcase_add_test(tc, poisoned_records_skipped);
  tcase_add_test(tc, build_falls_back_to_next_best);
  tcase_add_test(tc, threads_in_records_and_build);
  tcase_add_test(tc, second_tuner_refused);
  tcase_add_test(tc, duplicates_counted_once);
  tcase_add_test(tc, incomplete_last_line_named);
  tcase_add_test(tc, strict_numbers);
  tcase_add_test(tc, spec_without_parameters);
  tcase_add_test(tc, byte_count_overflow_refused);
  tcase_add_test(tc, run_bare_model_name);
  tcase_add_test(tc, tune_help_tells_the_truth);
  tcase_add_test(tc, library_measured_after_model_trained);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int nf = srunner_ntests_failed(sr);
  srunner_free(sr);
  tr_rmtree(tmpdir);
  return nf ? 1 : 0;
}
