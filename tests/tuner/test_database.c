/* test_database.c — the tuning log: every field survives append + reload;
 * corrupt, torn and newer-schema lines are reported with their line numbers
 * and skipped; schema-0 records load; lookups never cross targets; best
 * ignores error and unverified records; has_trace; a writer SIGKILLed at a
 * random moment leaves a log whose every acknowledged record reloads; the
 * plot is an SVG with one polyline per log; invalid records are refused on
 * append and skipped on load (never best); duplicates count once; appending
 * is exclusive (flock) across processes, shared within one; a failed write
 * (a full device, a file size limit) is an error and leaves whole lines;
 * ranked records for the fallback; thread counts (written, reloaded, an
 * older record without one reads as unknown, a bad one is skipped; lookups
 * at one count; the same trace at another count is no duplicate; a build's
 * selection falls back to any count only when its own has none). */
#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tuner/database.h"

static char dir[64];

static const char *tmp_path(const char *name) {
  static char buf[8][256];
  static int k;
  if (!dir[0]) {
    snprintf(dir, sizeof dir, "/tmp/tessel-dbtest-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
  }
  char *b = buf[k++ % 8];
  snprintf(b, 256, "%s/%s", dir, name);
  unlink(b);
  return b;
}

#define KEY_A "0123456789abcdef"
#define KEY_B "fedcba9876543210"

/* A record with constant strings (the db copies them). */
static tun_record mk(const char *key, const char *target, double secs, bool verified, const char *error,
                     uint64_t th) {
  tun_record r;
  memset(&r, 0, sizeof r);
  r.schema = TUN_LOG_SCHEMA;
  memcpy(r.workload_key, key, 17);
  r.workload = (char *)"matmul:m=64,n=64,k=64";
  r.target = (char *)target;
  r.trace = (char *)"[[[\"GetBlock\",[],[\"\\\"C\\\"\"],[\"b0\"]]],[]]";
  if (!error) {
    r.nruns = 3;
    r.run_secs[0] = secs;
    r.run_secs[1] = secs * 1.01;
    r.run_secs[2] = secs * 0.99;
  }
  r.build_secs = 0.125;
  r.error = (char *)error;
  r.verified = verified;
  r.time = 1700000000.25;
  r.version = (char *)"0.1.0";
  r.trace_hash = th;
  return r;
}

static int write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  fputs(text, f);
  return fclose(f);
}

START_TEST(round_trip_every_field) {
  const char *p = tmp_path("rt.jsonl");
  ts_diag d;
  ts_diag_clear(&d);
  tun_db *db = tun_db_open(p, NULL, NULL, &d);
  ck_assert_msg(db != NULL, "%s", d.msg);
  tun_record a = mk(KEY_A, "llvm -mcpu=skylake", 1.0 / 3, true, NULL, 0x8000000000000001ull);
  tun_record b = mk(KEY_B, "llvm", 0, false, "build failed: \"quoted\"\nnewline", 7);
  b.trace = NULL;
  ck_assert_int_eq(tun_db_append(db, &a, &d), TS_OK);
  ck_assert_int_eq(tun_db_append(db, &b, &d), TS_OK);
  tun_db_close(db);
  /* The file is two lines, the trace embedded as JSON (not a string). */
  char *text = NULL;
  size_t len = 0;
  ck_assert_int_eq(ts_read_file(p, &text, &len, &d), TS_OK);
  int lines = 0;
  for (size_t i = 0; i < len; i++) lines += text[i] == '\n';
  ck_assert_int_eq(lines, 2);
  ck_assert_ptr_nonnull(strstr(text, "\"trace\":[[[\"GetBlock\""));
  ck_assert_ptr_nonnull(strstr(text, "\"trace_hash\":\"8000000000000001\""));
  ts_free(text);
  int nwarn = -1;
  db = tun_db_load(p, stderr, &nwarn, &d);
  ck_assert_msg(db != NULL, "%s", d.msg);
  ck_assert_int_eq(nwarn, 0);
  ck_assert_int_eq(tun_db_count(db), 2);
  const tun_record *r = tun_db_get(db, 0);
  ck_assert_int_eq(r->schema, TUN_LOG_SCHEMA_TRACE); /* a trace record is written as schema 1 */
  ck_assert_str_eq(r->workload_key, KEY_A);
  ck_assert_str_eq(r->workload, a.workload);
  ck_assert_str_eq(r->target, a.target);
  ck_assert_str_eq(r->trace, a.trace);
  ck_assert_int_eq(r->nruns, 3);
  for (int i = 0; i < 3; i++) ck_assert(r->run_secs[i] == a.run_secs[i]); /* exact: %.17g */
  ck_assert(r->build_secs == a.build_secs);
  ck_assert_ptr_null(r->error);
  ck_assert(r->verified);
  ck_assert(r->time == a.time);
  ck_assert_str_eq(r->version, "0.1.0");
  ck_assert(r->trace_hash == a.trace_hash);
  r = tun_db_get(db, 1);
  ck_assert_str_eq(r->error, b.error);
  ck_assert_int_eq(r->nruns, 0);
  ck_assert_ptr_null(r->trace);
  ck_assert(!r->verified);
  ck_assert(r->trace_hash == 7);
  ck_assert(tun_record_mean(r) >= 1e10);
  /* copy */
  tun_record c;
  ck_assert_int_eq(tun_record_copy(&c, tun_db_get(db, 0)), TS_OK);
  ck_assert_str_eq(c.trace, a.trace);
  ck_assert(tun_record_median(&c) == a.run_secs[0]);
  tun_record_fini(&c);
  tun_db_close(db);
  /* a read-only log refuses appends */
  db = tun_db_load(p, NULL, NULL, &d);
  ts_diag_clear(&d);
  ck_assert_int_ne(tun_db_append(db, &a, &d), TS_OK);
  tun_db_close(db);
}
END_TEST

START_TEST(corrupt_lines_reported_and_skipped) {
  const char *p = tmp_path("corrupt.jsonl");
  tun_record a = mk(KEY_A, "llvm", 0.5, true, NULL, 1), a2 = mk(KEY_A, "llvm", 0.5, true, NULL, 2),
             a3 = mk(KEY_A, "llvm", 0.5, true, NULL, 3), a4 = mk(KEY_A, "llvm", 0.5, true, NULL, 4);
  char *good = tun_record_to_json(&a), *good2 = tun_record_to_json(&a2), *good3 = tun_record_to_json(&a3);
  char *newer = ts_strdup(good);
  memcpy(strstr(newer, "\"schema\":1"), "\"schema\":9", 10);
  char buf[8192];
  /* line 1 good, 2 garbage, 3 good, 4 blank, 5 newer schema, 6 wrong field type,
   * 7 good, 8 truncated (no newline) */
  snprintf(buf, sizeof buf, "%s\n{not json at all\n%s\n\n%s\n{\"schema\":1,\"workload_key\":5}\n%s\n%.*s", good,
           good2, newer, good3, (int)(strlen(good) / 2), good);
  ck_assert_int_eq(write_file(p, buf), 0);
  char *wbuf = NULL;
  size_t wlen = 0;
  FILE *w = open_memstream(&wbuf, &wlen);
  int nwarn = 0;
  ts_diag d;
  ts_diag_clear(&d);
  tun_db *db = tun_db_load(p, w, &nwarn, &d);
  fclose(w);
  ck_assert_msg(db != NULL, "%s", d.msg);
  ck_assert_int_eq(tun_db_count(db), 3);
  ck_assert_int_eq(nwarn, 4);
  char want[512];
  snprintf(want, sizeof want, "%s:2: skipped: bad JSON", p);
  ck_assert_msg(strstr(wbuf, want), "%s", wbuf);
  snprintf(want, sizeof want, "%s:5: skipped: schema 9 is newer", p);
  ck_assert_msg(strstr(wbuf, want), "%s", wbuf);
  snprintf(want, sizeof want, "%s:6: skipped:", p);
  ck_assert_msg(strstr(wbuf, want), "%s", wbuf);
  snprintf(want, sizeof want, "%s:8: skipped: incomplete last line", p);
  ck_assert_msg(strstr(wbuf, want), "%s", wbuf);
  tun_db_close(db);
  free(wbuf);
  /* Appending after a torn line starts a fresh line: the new record loads. */
  db = tun_db_open(p, NULL, &nwarn, &d);
  ck_assert_ptr_nonnull(db);
  ck_assert_int_eq(tun_db_append(db, &a4, &d), TS_OK);
  tun_db_close(db);
  db = tun_db_load(p, NULL, &nwarn, &d);
  ck_assert_int_eq(tun_db_count(db), 4);
  ck_assert_int_eq(nwarn, 4); /* the torn line is now a corrupt middle line */
  tun_db_close(db);
  ts_free(good);
  ts_free(good2);
  ts_free(good3);
  ts_free(newer);
}
END_TEST

START_TEST(schema0_loads) {
  const char *p = tmp_path("v0.jsonl");
  ck_assert_int_eq(write_file(p, "{\"schema\":0,\"workload_key\":\"" KEY_A "\",\"workload\":\"matmul\","
                                 "\"target\":\"llvm\",\"trace\":[[],[]],\"run_secs\":[0.5,1],\"build_secs\":1,"
                                 "\"error\":null,\"time\":1700000000,\"version\":\"0.0.9\"}\n"),
                   0);
  int nwarn = -1;
  ts_diag d;
  ts_diag_clear(&d);
  tun_db *db = tun_db_load(p, stderr, &nwarn, &d);
  ck_assert_msg(db != NULL, "%s", d.msg);
  ck_assert_int_eq(nwarn, 0);
  ck_assert_int_eq(tun_db_count(db), 1);
  const tun_record *r = tun_db_get(db, 0);
  ck_assert_int_eq(r->schema, 0);
  ck_assert_str_eq(r->trace, "[[],[]]");
  ck_assert(tun_record_mean(r) == 0.75);
  ck_assert(!r->verified);
  ck_assert(r->trace_hash == 0);
  ck_assert_int_eq(tun_db_count_for(db, KEY_A, "llvm"), 1);
  ck_assert_ptr_null(tun_db_best(db, KEY_A, "llvm")); /* nothing verified it */
  /* re-serialised, it is written as the current schema */
  char *js = tun_record_to_json(r);
  ck_assert_ptr_nonnull(strstr(js, "\"schema\":1"));
  ts_free(js);
  tun_db_close(db);
}
END_TEST

START_TEST(targets_and_best) {
  const char *p = tmp_path("best.jsonl");
  ts_diag d;
  ts_diag_clear(&d);
  tun_db *db = tun_db_open(p, NULL, NULL, &d);
  tun_record rs[] = {
      mk(KEY_A, "llvm", 0.010, true, NULL, 11),
      mk(KEY_A, "llvm", 0.001, false, NULL, 12),          /* fastest but unverified */
      mk(KEY_A, "llvm", 0.0001, true, "timeout", 13),      /* error */
      mk(KEY_A, "llvm", 0.005, true, NULL, 14),           /* the best */
      mk(KEY_A, "llvm -mcpu=znver3", 0.002, true, NULL, 15),
      mk(KEY_B, "llvm", 0.003, true, NULL, 16),
  };
  for (size_t i = 0; i < sizeof rs / sizeof rs[0]; i++) ck_assert_int_eq(tun_db_append(db, &rs[i], &d), TS_OK);
  for (int pass = 0; pass < 2; pass++) {
    ck_assert_int_eq(tun_db_count_for(db, KEY_A, "llvm"), 4);
    ck_assert_int_eq(tun_db_count_for(db, KEY_A, "llvm -mcpu=znver3"), 1);
    ck_assert_int_eq(tun_db_count_for(db, KEY_A, "llvm -mcpu=skylake"), 0);
    ck_assert_int_eq(tun_db_count_for(db, KEY_A, NULL), 5);
    ck_assert_int_eq(tun_db_count_for(db, NULL, "llvm"), 5);
    ck_assert_int_eq(tun_db_count_for(db, NULL, NULL), 6);
    const tun_record *b = tun_db_best(db, KEY_A, "llvm");
    ck_assert_ptr_nonnull(b);
    ck_assert(b->trace_hash == 14);
    b = tun_db_best(db, KEY_A, "llvm -mcpu=znver3");
    ck_assert(b && b->trace_hash == 15);
    ck_assert_ptr_null(tun_db_best(db, KEY_B, "llvm -mcpu=znver3"));
    ck_assert(tun_db_has_trace(db, KEY_A, "llvm", 12));
    ck_assert(tun_db_has_trace(db, KEY_A, "llvm", 13)); /* error records count */
    ck_assert(!tun_db_has_trace(db, KEY_A, "llvm", 15)); /* other target */
    ck_assert(!tun_db_has_trace(db, KEY_B, "llvm", 11));
    ck_assert(!tun_db_has_trace(db, KEY_A, "llvm", 0));
    ck_assert(tun_db_has_trace(db, KEY_B, "llvm", 16));
    const tun_record *firsts[8];
    ck_assert_int_eq(tun_db_groups(db, firsts, 8), 3);
    int n;
    const int *idx = tun_db_indices_for(db, KEY_A, "llvm", &n);
    ck_assert_int_eq(n, 4);
    ck_assert_int_eq(idx[3], 3);
    tun_db_close(db);
    db = tun_db_load(p, NULL, NULL, &d); /* the same after reloading */
  }
  tun_db_close(db);
}
END_TEST

START_TEST(many_groups_and_hashes) {
  /* grow the index tables well past their initial sizes */
  const char *p = tmp_path("many.jsonl");
  ts_diag d;
  ts_diag_clear(&d);
  tun_db *db = tun_db_open(p, NULL, NULL, &d);
  char key[17], tg[32];
  for (int i = 0; i < 300; i++) {
    snprintf(key, sizeof key, "%016x", i % 50);
    snprintf(tg, sizeof tg, "llvm -mcpu=c%d", i % 3);
    tun_record r = mk(key, tg, 1.0 + i, true, NULL, (uint64_t)i + 1);
    ck_assert_int_eq(tun_db_append(db, &r, &d), TS_OK);
  }
  for (int i = 0; i < 300; i++) {
    snprintf(key, sizeof key, "%016x", i % 50);
    snprintf(tg, sizeof tg, "llvm -mcpu=c%d", i % 3);
    ck_assert(tun_db_has_trace(db, key, tg, (uint64_t)i + 1));
    ck_assert_int_eq(tun_db_count_for(db, key, tg), 2);
    ck_assert(tun_record_mean(tun_db_best(db, key, tg)) < 1.02 * (1.0 + i % 150));
  }
  tun_db_close(db);
}
END_TEST

/* The child appends forever and acknowledges each record (its index) on a
 * pipe once tun_db_append returned; the parent SIGKILLs it at a random
 * moment. Every acknowledged record must reload; nothing breaks loading. */
START_TEST(crash_safety) {
  const char *p = tmp_path("crash.jsonl");
  srand((unsigned)time(NULL) ^ (unsigned)getpid());
  for (int round = 0; round < 3; round++) {
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
      close(fds[0]);
      ts_diag d;
      tun_db *db = tun_db_open(p, NULL, NULL, &d);
      if (!db) _exit(3);
      /* a long trace so that a kill mid-record is likely to tear a line */
      char *big = malloc(20000);
      strcpy(big, "[[");
      for (int i = 0; i < 600; i++) strcat(big, i ? ",[\"GetBlock\",[],[\"\\\"C\\\"\"],[\"b0\"]]" : "[\"GetBlock\",[],[\"\\\"C\\\"\"],[\"b0\"]]");
      strcat(big, "],[]]");
      for (int i = 0;; i++) {
        tun_record r = mk(KEY_A, "llvm", 1.0 + i, true, NULL, (uint64_t)(round * 1000000 + i + 1));
        r.trace = big;
        r.build_secs = round * 1000000 + i;
        if (tun_db_append(db, &r, &d)) _exit(4);
        if (write(fds[1], &i, sizeof i) != sizeof i) _exit(5);
      }
    }
    close(fds[1]);
    usleep((useconds_t)(20000 + rand() % 200000));
    kill(pid, SIGKILL);
    int status;
    waitpid(pid, &status, 0);
    ck_assert(WIFSIGNALED(status));
    int acked = -1, i;
    while (read(fds[0], &i, sizeof i) == sizeof i) acked = i;
    close(fds[0]);
    int nwarn = 0;
    ts_diag d;
    ts_diag_clear(&d);
    tun_db *db = tun_db_load(p, stderr, &nwarn, &d);
    ck_assert_msg(db != NULL, "%s", d.msg);
    ck_assert_int_le(nwarn, round + 1); /* at most one torn line per killed writer */
    int got = 0;
    for (int k = 0; k < tun_db_count(db); k++) {
      const tun_record *r = tun_db_get(db, k);
      if ((int)(r->build_secs / 1000000) != round) continue;
      ck_assert(r->build_secs == round * 1000000 + got); /* in order, none missing */
      ck_assert_int_eq(r->nruns, 3);
      ck_assert(r->verified);
      got++;
    }
    ck_assert_msg(got >= acked + 1, "round %d: %d records reloaded, %d acknowledged", round, got, acked + 1);
    ck_assert_int_le(got, acked + 2); /* at most the one written but not yet acknowledged */
    tun_db_close(db);
  }
}
END_TEST

START_TEST(plot_svg) {
  const char *p1 = tmp_path("p1.jsonl"), *p2 = tmp_path("p2.jsonl"), *out = tmp_path("curve.svg");
  ts_diag d;
  ts_diag_clear(&d);
  tun_db *a = tun_db_open(p1, NULL, NULL, &d), *b = tun_db_open(p2, NULL, NULL, &d);
  for (int i = 0; i < 20; i++) {
    tun_record r = mk(KEY_A, "llvm", 0.01 / (1 + i % 7), i % 5 != 0, i % 6 == 3 ? "boom" : NULL, (uint64_t)i + 1);
    ck_assert_int_eq(tun_db_append(a, &r, &d), TS_OK);
    r.run_secs[0] = r.run_secs[1] = r.run_secs[2] = 0.02 / (1 + i % 4);
    ck_assert_int_eq(tun_db_append(b, &r, &d), TS_OK);
  }
  FILE *f = fopen(out, "w");
  tun_db *dbs[2] = {a, b};
  const char *labels[2] = {"xgb <1>", "random & co"};
  ck_assert_int_eq(tun_plot_svg(dbs, labels, 2, "matmul:m=64,n=64,k=64", f, &d), TS_OK);
  fclose(f);
  char *svg = NULL;
  ck_assert_int_eq(ts_read_file(out, &svg, NULL, &d), TS_OK);
  ck_assert(!strncmp(svg, "<?xml", 5));
  ck_assert_ptr_nonnull(strstr(svg, "<svg xmlns=\"http://www.w3.org/2000/svg\""));
  ck_assert_ptr_nonnull(strstr(svg, "</svg>\n"));
  char *pl = strstr(svg, "<polyline");
  ck_assert_ptr_nonnull(pl);
  ck_assert_ptr_nonnull(strstr(pl + 1, "<polyline"));
  ck_assert_ptr_nonnull(strstr(svg, "xgb &lt;1&gt;"));
  ck_assert_ptr_nonnull(strstr(svg, "random &amp; co"));
  ck_assert_ptr_nonnull(strstr(svg, "GFLOP/s"));
  ck_assert_ptr_null(strstr(svg, "nan"));
  ck_assert_ptr_null(strstr(svg, "inf"));
  /* every element opened is closed: count '<' tags that are not self-closing */
  int open_tags = 0;
  for (char *s = svg; (s = strchr(s, '<')); s++) {
    if (s[1] == '?' ) continue;
    char *e = strchr(s, '>');
    ck_assert_ptr_nonnull(e);
    if (s[1] == '/') open_tags--;
    else if (e[-1] != '/') open_tags++;
  }
  ck_assert_int_eq(open_tags, 0);
  ts_free(svg);
  tun_db_close(a);
  tun_db_close(b);
}
END_TEST

START_TEST(invalid_records_refused_and_skipped) {
  const char *p = tmp_path("invalid.jsonl");
  ts_diag d;
  ts_diag_clear(&d);
  tun_db *db = tun_db_open(p, NULL, NULL, &d);
  ck_assert_ptr_nonnull(db);
  tun_record good = mk(KEY_A, "llvm", 0.5, true, NULL, 1);
  ck_assert_int_eq(tun_db_append(db, &good, &d), TS_OK);
  /* appending what loading would skip is refused, and nothing is written */
  tun_record zero = mk(KEY_A, "llvm", 0.0, true, NULL, 2), empty_t = mk(KEY_A, "", 0.1, true, NULL, 3),
             str_trace = mk(KEY_A, "llvm", 0.1, true, NULL, 4), no_trace = mk(KEY_A, "llvm", 0.1, true, NULL, 5);
  str_trace.trace = (char *)"not json";
  no_trace.trace = NULL;
  tun_record *bad[] = {&zero, &empty_t, &str_trace, &no_trace};
  static const char *why[] = {"run_secs[0] is 0", "field \"target\" is empty", "field \"trace\" is a string",
                              "field \"trace\" is null"};
  for (int i = 0; i < 4; i++) {
    ts_diag_clear(&d);
    ck_assert_int_eq(tun_db_append(db, bad[i], &d), TS_EINVAL);
    ck_assert_msg(strstr(d.msg, why[i]), "%s", d.msg);
  }
  /* an error record without a trace is fine */
  tun_record err = mk(KEY_A, "llvm", 0, false, "build failed", 6);
  err.trace = NULL;
  ck_assert_int_eq(tun_db_append(db, &err, &d), TS_OK);
  ck_assert_int_eq(tun_db_count(db), 2);
  tun_db_close(db);
  char *text = NULL;
  ck_assert_int_eq(ts_read_file(p, &text, NULL, &d), TS_OK);
  int lines = 0;
  for (char *c = text; *c; c++) lines += *c == '\n';
  ck_assert_int_eq(lines, 2);
  ts_free(text);
  /* on load: a zero or negative time, a non-finite number (1e999 does not
   * parse), an object as trace never become records, never the best */
  char *line = tun_record_to_json(&good);
  char buf[16384];
  size_t k = 0;
  static const char *subst[][2] = {{"\"run_secs\":[0.5", "\"run_secs\":[0.0"},
                                   {"\"run_secs\":[0.5", "\"run_secs\":[-0.5"},
                                   {"\"trace\":[", "\"trace\":{\"a\":1},\"x\":["},
                                   {"\"time\":", "\"time\":-1,\"t\":"}};
  for (int i = 0; i < 4; i++) {
    char *v = ts_strdup(line);
    char *at = strstr(v, subst[i][0]);
    ck_assert_ptr_nonnull(at);
    k += (size_t)snprintf(buf + k, sizeof buf - k, "%.*s%s%s\n", (int)(at - v), v, subst[i][1],
                          at + strlen(subst[i][0]));
    ts_free(v);
  }
  ck_assert_int_eq(write_file(p, buf), 0);
  char *wbuf = NULL;
  size_t wlen = 0;
  FILE *w = open_memstream(&wbuf, &wlen);
  int nwarn = 0;
  db = tun_db_load(p, w, &nwarn, &d);
  fclose(w);
  ck_assert_ptr_nonnull(db);
  ck_assert_int_eq(nwarn, 4);
  ck_assert_int_eq(tun_db_count(db), 0);
  ck_assert_ptr_null(tun_db_best(db, KEY_A, "llvm"));
  ck_assert_msg(strstr(wbuf, ":1: skipped: run_secs[0] is 0") && strstr(wbuf, ":2: skipped: run_secs[0] is -0.5") &&
                    strstr(wbuf, ":3: skipped: field \"trace\" is an object") &&
                    strstr(wbuf, ":4: skipped: field \"time\" is -1"),
                "%s", wbuf);
  tun_db_close(db);
  free(wbuf);
  ts_free(line);
}
END_TEST

START_TEST(duplicates_once) {
  const char *p = tmp_path("dups.jsonl");
  tun_record a = mk(KEY_A, "llvm", 0.5, true, NULL, 1), b = mk(KEY_A, "llvm", 0.25, true, NULL, 2);
  char *la = tun_record_to_json(&a), *lb = tun_record_to_json(&b);
  char buf[8192];
  snprintf(buf, sizeof buf, "%s\n%s\n%s\n%s\n%s\n", la, lb, la, la, lb);
  ck_assert_int_eq(write_file(p, buf), 0);
  char *wbuf = NULL;
  size_t wlen = 0;
  FILE *w = open_memstream(&wbuf, &wlen);
  int nwarn = 0;
  ts_diag d;
  ts_diag_clear(&d);
  tun_db *db = tun_db_open(p, w, &nwarn, &d);
  fclose(w);
  ck_assert_ptr_nonnull(db);
  ck_assert_int_eq(tun_db_count(db), 2);
  ck_assert_int_eq(tun_db_count_for(db, KEY_A, "llvm"), 2);
  ck_assert_int_eq(tun_db_duplicates(db), 3);
  ck_assert_int_eq(nwarn, 0); /* duplicates are not bad lines */
  ck_assert_msg(strstr(wbuf, "3 duplicate records") && strstr(wbuf, "first at line 3"), "%s", wbuf);
  /* appending a duplicate writes nothing */
  ck_assert_int_eq(tun_db_append(db, &a, &d), TS_OK);
  ck_assert_int_eq(tun_db_count(db), 2);
  tun_db_close(db);
  char *text = NULL;
  ck_assert_int_eq(ts_read_file(p, &text, NULL, &d), TS_OK);
  ck_assert_str_eq(text, buf);
  ts_free(text);
  free(wbuf);
  ts_free(la);
  ts_free(lb);
}
END_TEST

/* Opens p for appending in a child process: its status (0 opened, 1 refused
 * as in use, 2 other error). */
static int open_in_child(const char *p) {
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    ts_diag d;
    ts_diag_clear(&d);
    tun_db *db = tun_db_open(p, NULL, NULL, &d);
    if (db) _exit(0);
    _exit(d.code == TS_EPENDING && strstr(d.msg, "is in use") ? 1 : 2);
  }
  int st;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 3;
}

START_TEST(append_lock) {
  const char *p = tmp_path("lock.jsonl");
  ts_diag d;
  ts_diag_clear(&d);
  tun_db *a = tun_db_open(p, NULL, NULL, &d);
  ck_assert_ptr_nonnull(a);
  ck_assert_int_eq(open_in_child(p), 1); /* another process: refused */
  /* the same process may open it again (tune-model's rounds) */
  tun_db *b = tun_db_open(p, NULL, NULL, &d);
  ck_assert_msg(b != NULL, "%s", d.msg);
  tun_db_close(a);
  ck_assert_int_eq(open_in_child(p), 1); /* still held by b */
  tun_db *ro = tun_db_load(p, NULL, NULL, &d); /* readers never wait */
  ck_assert_ptr_nonnull(ro);
  tun_db_close(ro);
  tun_db_close(b);
  ck_assert_int_eq(open_in_child(p), 0); /* released */
  /* a lock held by another program (flock on the file) is honoured too */
  int fd = open(p, O_RDONLY);
  ck_assert_int_eq(flock(fd, LOCK_EX), 0);
  ts_diag_clear(&d);
  ck_assert_ptr_null(tun_db_open(p, NULL, NULL, &d));
  ck_assert_int_eq(d.code, TS_EPENDING);
  ck_assert_msg(strstr(d.msg, p) && strstr(d.msg, "another tuner"), "%s", d.msg);
  close(fd);
}
END_TEST

START_TEST(failed_writes) {
  /* a full device: opened without reading it, the first append fails */
  ts_diag d;
  ts_diag_clear(&d);
  tun_db *db = tun_db_open("/dev/full", NULL, NULL, &d);
  ck_assert_msg(db != NULL, "%s", d.msg);
  tun_record a = mk(KEY_A, "llvm", 0.5, true, NULL, 1);
  ck_assert_int_eq(tun_db_append(db, &a, &d), TS_EIO);
  ck_assert_msg(strstr(d.msg, "/dev/full") && strstr(d.msg, "No space left on device"), "%s", d.msg);
  ck_assert_int_eq(tun_db_count(db), 0);
  tun_db_close(db);
  /* a write that fails part-way (a file size limit standing in for a full
   * disk) is cut back: the log keeps whole lines */
  const char *p = tmp_path("limit.jsonl");
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    signal(SIGXFSZ, SIG_IGN);
    ts_diag cd;
    ts_diag_clear(&cd);
    tun_db *cdb = tun_db_open(p, NULL, NULL, &cd);
    if (!cdb || tun_db_append(cdb, &a, &cd)) _exit(2);
    struct stat sb;
    if (stat(p, &sb)) _exit(2);
    struct rlimit rl = {(rlim_t)sb.st_size + 40, (rlim_t)sb.st_size + 40};
    if (setrlimit(RLIMIT_FSIZE, &rl)) _exit(2);
    tun_record b = mk(KEY_A, "llvm", 0.25, true, NULL, 2);
    ts_status st = tun_db_append(cdb, &b, &cd);
    _exit(st == TS_EIO && strstr(cd.msg, "File too large") ? 0 : 1);
  }
  int status;
  waitpid(pid, &status, 0);
  ck_assert_int_eq(WEXITSTATUS(status), 0);
  int nwarn = -1;
  db = tun_db_load(p, NULL, &nwarn, &d);
  ck_assert_ptr_nonnull(db);
  ck_assert_int_eq(nwarn, 0); /* no partial line */
  ck_assert_int_eq(tun_db_count(db), 1);
  tun_db_close(db);
}
END_TEST

START_TEST(ranked_records) {
  const char *p = tmp_path("ranked.jsonl");
  ts_diag d;
  ts_diag_clear(&d);
  tun_db *db = tun_db_open(p, NULL, NULL, &d);
  tun_record rs[] = {mk(KEY_A, "llvm", 0.3, true, NULL, 1), mk(KEY_A, "llvm", 0.1, true, NULL, 2),
                     mk(KEY_A, "llvm", 0.05, false, NULL, 3), mk(KEY_A, "llvm", 0.2, true, NULL, 4),
                     mk(KEY_A, "llvm", 0.01, true, "crash", 5), mk(KEY_A, "llvm -mcpu=x", 0.01, true, NULL, 6)};
  for (size_t i = 0; i < sizeof rs / sizeof rs[0]; i++) ck_assert_int_eq(tun_db_append(db, &rs[i], &d), TS_OK);
  int n = -1;
  const tun_record **r = tun_db_ranked(db, KEY_A, "llvm", &n);
  ck_assert_int_eq(n, 3);
  ck_assert(r[0]->trace_hash == 2 && r[1]->trace_hash == 4 && r[2]->trace_hash == 1);
  ck_assert_ptr_eq(r[0], tun_db_best(db, KEY_A, "llvm"));
  ts_free(r);
  ck_assert_ptr_null(tun_db_ranked(db, KEY_B, "llvm", &n));
  ck_assert_int_eq(n, 0);
  tun_db_close(db);
}
END_TEST


/* Records carry the thread count they were measured with. */
START_TEST(thread_counts) {
  const char *p = tmp_path("threads.jsonl");
  ts_diag d;
  ts_diag_clear(&d);
  tun_db *db = tun_db_open(p, NULL, NULL, &d);
  ck_assert_ptr_nonnull(db);
  /* the same trace (hash 7) at 1 and 2 threads: two measurements, not a duplicate */
  tun_record r1 = mk(KEY_A, "llvm", 0.4, true, NULL, 7), r2 = mk(KEY_A, "llvm", 0.25, true, NULL, 7),
             r2b = mk(KEY_A, "llvm", 0.3, true, NULL, 8), r0 = mk(KEY_A, "llvm", 0.1, true, NULL, 9),
             only1 = mk(KEY_B, "llvm", 0.5, true, NULL, 10);
  r1.threads = 1;
  r2.threads = 2;
  r2b.threads = 2;
  only1.threads = 1;
  tun_record *all[] = {&r1, &r2, &r2b, &r0, &only1};
  for (int i = 0; i < 5; i++) ck_assert_int_eq(tun_db_append(db, all[i], &d), TS_OK);
  ck_assert_int_eq(tun_db_count(db), 5);
  /* appending the 2-thread measurement again is the duplicate */
  ck_assert_int_eq(tun_db_append(db, &r2, &d), TS_OK);
  ck_assert_int_eq(tun_db_count(db), 5);
  tun_db_close(db);

  /* reloaded: the field round trips; the record without it is unknown (0) */
  int nwarn = -1;
  db = tun_db_load(p, NULL, &nwarn, &d);
  ck_assert_ptr_nonnull(db);
  ck_assert_int_eq(nwarn, 0);
  ck_assert_int_eq(tun_db_get(db, 0)->threads, 1);
  ck_assert_int_eq(tun_db_get(db, 1)->threads, 2);
  ck_assert_int_eq(tun_db_get(db, 3)->threads, 0);
  ck_assert_int_eq(tun_db_count_for(db, KEY_A, "llvm"), 4);
  ck_assert_int_eq(tun_db_count_at(db, KEY_A, "llvm", 2), 2);
  ck_assert_int_eq(tun_db_count_at(db, KEY_A, "llvm", 1), 1);
  ck_assert_int_eq(tun_db_count_at(db, KEY_A, "llvm", 0), 1);
  ck_assert_int_eq(tun_db_count_at(db, KEY_A, "llvm", 4), 0);
  ck_assert_int_eq(tun_db_count_at(db, KEY_A, "llvm", TUN_ANY_THREADS), 4);
  /* best at a count, and of any count (the unknown-count record is fastest) */
  ck_assert_ptr_eq(tun_db_best_at(db, KEY_A, "llvm", 2), tun_db_get(db, 1));
  ck_assert_ptr_eq(tun_db_best_at(db, KEY_A, "llvm", 1), tun_db_get(db, 0));
  ck_assert_ptr_null(tun_db_best_at(db, KEY_A, "llvm", 3));
  ck_assert_ptr_eq(tun_db_best_at(db, KEY_A, "llvm", TUN_ANY_THREADS), tun_db_get(db, 3));
  ck_assert(tun_db_has_trace_at(db, KEY_A, "llvm", 7, 1) && tun_db_has_trace_at(db, KEY_A, "llvm", 7, 2));
  ck_assert(!tun_db_has_trace_at(db, KEY_A, "llvm", 7, 4) && !tun_db_has_trace_at(db, KEY_A, "llvm", 8, 1));
  ck_assert(tun_db_has_trace_at(db, KEY_A, "llvm", 9, 0) && !tun_db_has_trace_at(db, KEY_A, "llvm", 9, 1));
  int n = -1;
  const tun_record **rs = tun_db_ranked_at(db, KEY_A, "llvm", 2, &n);
  ck_assert_int_eq(n, 2);
  ck_assert(rs[0]->run_secs[0] == 0.25 && rs[1]->run_secs[0] == 0.3);
  ts_free(rs);
  /* a build's selection: its own count when it has records ... */
  bool other = true;
  rs = tun_db_ranked_for_build(db, KEY_A, "llvm", 2, &n, &other);
  ck_assert(!other);
  ck_assert_int_eq(n, 2);
  ck_assert(rs[0] == tun_db_get(db, 1));
  ts_free(rs);
  /* ... else every count's, best first, saying it fell back */
  rs = tun_db_ranked_for_build(db, KEY_A, "llvm", 8, &n, &other);
  ck_assert(other);
  ck_assert_int_eq(n, 4);
  ck_assert(rs[0] == tun_db_get(db, 3));
  ts_free(rs);
  rs = tun_db_ranked_for_build(db, KEY_B, "llvm", 2, &n, &other);
  ck_assert(other);
  ck_assert_int_eq(n, 1);
  ck_assert_int_eq(rs[0]->threads, 1);
  ts_free(rs);
  rs = tun_db_ranked_for_build(db, "00000000000000aa", "llvm", 2, &n, &other);
  ck_assert(!other);
  ck_assert_int_eq(n, 0);
  ts_free(rs);
  tun_db_close(db);

  /* the line itself: "threads" written when known, absent when not */
  char *js = tun_record_to_json(&r2);
  ck_assert_ptr_nonnull(strstr(js, "\"threads\":2"));
  ts_free(js);
  js = tun_record_to_json(&r0);
  ck_assert_ptr_null(strstr(js, "\"threads\""));
  ts_free(js);
  /* a bad count is skipped with its reason */
  static const char *bad[] = {"0", "-3", "1.5", "\"2\"", "5000"};
  for (int i = 0; i < 5; i++) {
    char line[1024];
    js = tun_record_to_json(&r0);
    snprintf(line, sizeof line, "%.*s,\"threads\":%s}", (int)strlen(js) - 1, js, bad[i]);
    ts_free(js);
    tun_record out;
    ts_diag_clear(&d);
    ck_assert_int_eq(tun_record_from_json(line, &out, &d), TS_EPARSE);
    ck_assert_msg(strstr(d.msg, "field \"threads\" is not an integer in 1..4096"), "%s", d.msg);
  }
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("tuner_database");
  TCase *tc = tcase_create("log");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, round_trip_every_field);
  tcase_add_test(tc, corrupt_lines_reported_and_skipped);
  tcase_add_test(tc, schema0_loads);
  tcase_add_test(tc, targets_and_best);
  tcase_add_test(tc, many_groups_and_hashes);
  tcase_add_test(tc, crash_safety);
  tcase_add_test(tc, plot_svg);
  tcase_add_test(tc, invalid_records_refused_and_skipped);
  tcase_add_test(tc, duplicates_once);
  tcase_add_test(tc, append_lock);
  tcase_add_test(tc, failed_writes);
  tcase_add_test(tc, ranked_records);
  tcase_add_test(tc, thread_counts);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(suite());
  srunner_run_all(sr, CK_NORMAL);
  int failures = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failures ? 1 : 0;
}
