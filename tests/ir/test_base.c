/* test_base.c — the ts base: status table, diagnostics (first error wins),
 * allocation fault injection, arena, string buffer, vector, RNG; the
 * bounded file and line readers (caps, /dev/zero, read and allocation
 * failures as errors, never as end of file) and the strict number parsers. */
#define _GNU_SOURCE
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/ts.h"

START_TEST(test_strerror) {
  ck_assert_str_eq(ts_strerror(TS_OK), "success");
  ck_assert_str_eq(ts_strerror(TS_ENOMEM), "out of memory");
  ck_assert_str_eq(ts_strerror((ts_status)9999), "unknown status");
  for (int i = 0; i < TS_STATUS_COUNT; i++) ck_assert_ptr_nonnull(ts_strerror((ts_status)i));
}
END_TEST

START_TEST(test_diag_first_wins) {
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_int_eq(ts_diag_set(&d, TS_EPARSE, "first %d", 1), TS_EPARSE);
  ck_assert_int_eq(ts_diag_set(&d, TS_EIO, "second"), TS_EIO);
  ck_assert_int_eq(d.code, TS_EPARSE);
  ck_assert_str_eq(d.msg, "first 1");
  ck_assert_int_eq(ts_diag_set(NULL, TS_EIO, "ignored"), TS_EIO);
}
END_TEST

START_TEST(test_alloc_fail_injection) {
  ts_alloc_fail_after(3);
  void *a = ts_malloc(8), *b = ts_malloc(8), *c = ts_malloc(8), *dd = ts_malloc(8);
  ck_assert_ptr_nonnull(a);
  ck_assert_ptr_nonnull(b);
  ck_assert_ptr_null(c);
  ck_assert_ptr_nonnull(dd);
  ts_free(a);
  ts_free(b);
  ts_free(dd);
  /* the arena reports OOM as NULL rather than crashing */
  ts_arena ar;
  ts_arena_init(&ar);
  ts_alloc_fail_after(1);
  ck_assert_ptr_null(ts_arena_alloc(&ar, 16));
  ck_assert_ptr_nonnull(ts_arena_alloc(&ar, 16));
  ts_arena_fini(&ar);
}
END_TEST

START_TEST(test_arena) {
  ts_arena *a = ts_arena_new();
  ck_assert_ptr_nonnull(a);
  char *big = ts_arena_alloc(a, 200000); /* larger than one chunk */
  ck_assert_ptr_nonnull(big);
  memset(big, 1, 200000);
  for (int i = 0; i < 10000; i++) {
    int *p = ts_arena_alloc(a, sizeof(int) * 3);
    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(p[0] | p[1] | p[2], 0); /* zeroed */
    ck_assert_int_eq((uintptr_t)p % _Alignof(max_align_t), 0);
    p[0] = i;
  }
  ck_assert_str_eq(ts_arena_printf(a, "%s-%d", "x", 42), "x-42");
  ck_assert_str_eq(ts_arena_strndup(a, "hello", 3), "hel");
  ts_arena_free(a);
}
END_TEST

START_TEST(test_strbuf_vec) {
  ts_strbuf sb;
  ts_strbuf_init(&sb);
  for (int i = 0; i < 1000; i++) ts_strbuf_printf(&sb, "%d,", i);
  ck_assert_int_eq(strncmp(sb.data, "0,1,2,", 6), 0);
  char *s = ts_strbuf_take(&sb);
  ck_assert_uint_eq(strlen(s), 3890);
  ts_free(s);
  ts_vec v;
  ts_vec_init(&v);
  for (intptr_t i = 0; i < 100; i++) ck_assert_int_eq(ts_vec_push(&v, (void *)i), TS_OK);
  ck_assert_uint_eq(v.len, 100);
  ck_assert_ptr_eq(v.items[42], (void *)42);
  ts_vec_fini(&v);
}
END_TEST

START_TEST(test_rng) {
  ts_rng a, b;
  ts_rng_seed(&a, 7);
  ts_rng_seed(&b, 7);
  for (int i = 0; i < 100; i++) ck_assert_uint_eq(ts_rng_next(&a), ts_rng_next(&b));
  ts_rng_seed(&b, 8);
  ck_assert_uint_ne(ts_rng_next(&a), ts_rng_next(&b));
  int hist[5] = {0};
  for (int i = 0; i < 5000; i++) hist[ts_rng_below(&a, 5)]++;
  for (int i = 0; i < 5; i++) ck_assert_int_gt(hist[i], 800);
  for (int i = 0; i < 1000; i++) {
    double u = ts_rng_unit(&a);
    ck_assert(u >= 0 && u < 1);
  }
}
END_TEST

START_TEST(test_read_file_missing) {
  ts_diag d;
  ts_diag_clear(&d);
  char *s;
  ck_assert_int_eq(ts_read_file("/nonexistent/x.tsl", &s, NULL, &d), TS_EIO);
  ck_assert_ptr_nonnull(strstr(d.msg, "/nonexistent/x.tsl"));
}
END_TEST

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A sparse file of n bytes (no disk used) at a fresh path. */
static const char *sparse_file(const char *name, off_t n) {
  static char path[8][256];
  static int k;
  char *p = path[k++ % 8];
  snprintf(p, 256, "/tmp/tessel-base-%d-%s", (int)getpid(), name);
  int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(ftruncate(fd, n), 0);
  close(fd);
  return p;
}

START_TEST(test_read_file_dev_zero) {
  /* a device never ends: each kind's cap (at most TS_STREAM_CAP) stops it */
  for (int k = 0; k < TS_FILE_KIND_COUNT; k++) {
    ts_diag d;
    ts_diag_clear(&d);
    char *s = (char *)1;
    double t0 = now_s();
    ck_assert_int_eq(ts_read_file_as("/dev/zero", (ts_file_kind)k, &s, NULL, &d), TS_ETOOBIG);
    ck_assert_msg(now_s() - t0 < 10, "kind %d took %.1f s", k, now_s() - t0);
    ck_assert_ptr_null(s);
    ck_assert_msg(strstr(d.msg, "/dev/zero") && strstr(d.msg, "limit") && strstr(d.msg, ts_file_kind_name((ts_file_kind)k)),
                  "%s", d.msg);
  }
}
END_TEST

START_TEST(test_read_file_cap_boundary) {
  /* a regular file of exactly the cap reads; one byte more is refused before
   * anything is allocated (the message gives both sizes) */
  size_t cap = ts_file_cap(TS_FILE_DSL);
  ck_assert_uint_eq(cap, (size_t)16 << 20);
  const char *at = sparse_file("at.tsl", (off_t)cap), *over = sparse_file("over.tsl", (off_t)cap + 1);
  ts_diag d;
  ts_diag_clear(&d);
  char *s = NULL;
  size_t n = 0;
  ck_assert_msg(ts_read_file_as(at, TS_FILE_DSL, &s, &n, &d) == TS_OK, "%s", d.msg);
  ck_assert_uint_eq(n, cap);
  ck_assert_int_eq(s[n], 0);
  ts_free(s);
  s = NULL;
  ts_alloc_fail_after(1); /* an allocation would fail: the refusal must come first */
  ck_assert_int_eq(ts_read_file_as(over, TS_FILE_DSL, &s, &n, &d), TS_ETOOBIG);
  ts_alloc_fail_after(0);
  ck_assert_msg(strstr(d.msg, over) && strstr(d.msg, "16 MiB") && strstr(d.msg, "a DSL file"), "%s", d.msg);
  /* the ONNX cap is protobuf's 2 GiB: a 3 GiB model file is refused at once */
  const char *big = sparse_file("big.onnx", (off_t)3 << 30);
  ts_diag_clear(&d);
  double t0 = now_s();
  ck_assert_int_eq(ts_read_file_as(big, TS_FILE_ONNX, &s, &n, &d), TS_ETOOBIG);
  ck_assert(now_s() - t0 < 5);
  ck_assert_msg(strstr(d.msg, "3 GiB") && strstr(d.msg, "ONNX"), "%s", d.msg);
  unlink(at);
  unlink(over);
  unlink(big);
}
END_TEST

START_TEST(test_read_file_errors_not_eof) {
  ts_diag d;
  ts_diag_clear(&d);
  char *s = NULL;
  /* an allocation failure is an error naming the file, not an empty file */
  const char *small = sparse_file("small.txt", 100);
  ts_alloc_fail_after(1);
  ck_assert_int_eq(ts_read_file_as(small, TS_FILE_TRACE, &s, NULL, &d), TS_ENOMEM);
  ts_alloc_fail_after(0);
  ck_assert_ptr_null(s);
  ck_assert_msg(strstr(d.msg, small) && strstr(d.msg, "out of memory"), "%s", d.msg);
  /* a read error (EIO: /proc/self/mem at address 0) is an error, not the end */
  ts_diag_clear(&d);
  ck_assert_int_eq(ts_read_file_as("/proc/self/mem", TS_FILE_TEXT, &s, NULL, &d), TS_EIO);
  ck_assert_msg(strstr(d.msg, "/proc/self/mem") && strstr(d.msg, "read error"), "%s", d.msg);
  /* a directory */
  ts_diag_clear(&d);
  ck_assert_int_eq(ts_read_file_as("/tmp", TS_FILE_DSL, &s, NULL, &d), TS_EIO);
  ck_assert_msg(strstr(d.msg, "/tmp") && strstr(d.msg, "directory"), "%s", d.msg);
  unlink(small);
}
END_TEST

START_TEST(test_read_file_pipe) {
  /* a pipe's size is not known in advance: it is read to its end */
  int fds[2];
  ck_assert_int_eq(pipe(fds), 0);
  static const char text[] = "kernel k(A: f32[3]) -> B: f32[3] {\n  B[i] = A[i]\n}\n";
  ck_assert_int_eq(write(fds[1], text, sizeof text - 1), (ssize_t)(sizeof text - 1));
  close(fds[1]);
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", fds[0]);
  ts_diag d;
  ts_diag_clear(&d);
  char *s = NULL;
  size_t n = 0;
  ck_assert_msg(ts_read_file_as(path, TS_FILE_DSL, &s, &n, &d) == TS_OK, "%s", d.msg);
  ck_assert_uint_eq(n, sizeof text - 1);
  ck_assert_str_eq(s, text);
  ts_free(s);
  close(fds[0]);
}
END_TEST

START_TEST(test_lines) {
  const char *p = sparse_file("lines.txt", 0);
  FILE *f = fopen(p, "w");
  fputs("one\n\ntwo\r\nthree", f);
  fclose(f);
  int fd = open(p, O_RDONLY);
  ts_line_reader lr;
  ts_lines_init(&lr, fd, p, 5);
  char *line;
  size_t len;
  bool complete;
  ts_diag d;
  ts_diag_clear(&d);
  static const char *want[] = {"one", "", "two\r", "three"};
  for (int i = 0; i < 4; i++) {
    ck_assert_int_eq(ts_lines_next(&lr, &line, &len, &complete, &d), TS_OK);
    ck_assert_ptr_nonnull(line);
    ck_assert_str_eq(line, want[i]);
    ck_assert_uint_eq(len, strlen(want[i]));
    ck_assert(complete == (i < 3));
    ck_assert_int_eq(lr.lineno, i + 1);
  }
  ck_assert_int_eq(ts_lines_next(&lr, &line, &len, &complete, &d), TS_OK);
  ck_assert_ptr_null(line);
  ts_lines_fini(&lr);
  close(fd);
  /* a line over the cap: an error naming the file and line */
  f = fopen(p, "w");
  fputs("ok\n123456\n", f);
  fclose(f);
  fd = open(p, O_RDONLY);
  ts_lines_init(&lr, fd, p, 5);
  ck_assert_int_eq(ts_lines_next(&lr, &line, &len, &complete, &d), TS_OK);
  ck_assert_int_eq(ts_lines_next(&lr, &line, &len, &complete, &d), TS_ETOOBIG);
  char want2[300];
  snprintf(want2, sizeof want2, "%s:2: a line longer than 5 bytes", p);
  ck_assert_msg(strstr(d.msg, want2), "%s", d.msg);
  ts_lines_fini(&lr);
  close(fd);
  /* an allocation failure is an error, not the end of the file */
  fd = open(p, O_RDONLY);
  ts_lines_init(&lr, fd, p, 5);
  ts_diag_clear(&d);
  ts_alloc_fail_after(1);
  ck_assert_int_eq(ts_lines_next(&lr, &line, &len, &complete, &d), TS_ENOMEM);
  ts_alloc_fail_after(0);
  ck_assert_msg(strstr(d.msg, p) && strstr(d.msg, "out of memory"), "%s", d.msg);
  ts_lines_fini(&lr);
  close(fd);
  /* /dev/zero: one endless line, refused at the cap, fast */
  fd = open("/dev/zero", O_RDONLY);
  ts_lines_init(&lr, fd, "/dev/zero", TS_LOG_LINE_CAP);
  ts_diag_clear(&d);
  double t0 = now_s();
  ck_assert_int_eq(ts_lines_next(&lr, &line, &len, &complete, &d), TS_ETOOBIG);
  ck_assert(now_s() - t0 < 10);
  ck_assert_msg(strstr(d.msg, "/dev/zero:1: a line longer than 16 MiB"), "%s", d.msg);
  ts_lines_fini(&lr);
  close(fd);
  /* a read error */
  fd = open("/proc/self/mem", O_RDONLY);
  ts_lines_init(&lr, fd, "/proc/self/mem", 100);
  ts_diag_clear(&d);
  ck_assert_int_eq(ts_lines_next(&lr, &line, &len, &complete, &d), TS_EIO);
  ck_assert_msg(strstr(d.msg, "/proc/self/mem:1: read error"), "%s", d.msg);
  ts_lines_fini(&lr);
  close(fd);
  unlink(p);
}
END_TEST

START_TEST(test_strict_numbers) {
  static const struct {
    const char *s;
    bool ok;
    int64_t v;
  } ints[] = {{"12", true, 12},     {"-3", true, -3},      {"+7", true, 7},        {"0", true, 0},
              {"", false, 0},       {"abc", false, 0},     {"12abc", false, 0},    {" 12", false, 0},
              {"12 ", false, 0},    {"1e3", false, 0},     {"0x10", false, 0},     {"-", false, 0},
              {"99999999999999", false, 0}, {"99999999999999999999", false, 0}, {"101", false, 0},
              {"-101", false, 0}};
  for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
    int64_t v = -999;
    const char *why = NULL;
    bool ok = ts_parse_i64(ints[i].s, -100, 100, &v, &why);
    ck_assert_msg(ok == ints[i].ok, "'%s'", ints[i].s);
    if (ok) ck_assert_int_eq(v, ints[i].v);
    else ck_assert_ptr_nonnull(why);
  }
  int64_t v;
  const char *why;
  ck_assert(!ts_parse_i64("99999999999999999999", INT64_MIN, INT64_MAX, &v, &why));
  ck_assert_str_eq(why, "out of range");
  ck_assert(ts_parse_i64("9223372036854775807", 1, INT64_MAX, &v, NULL) && v == INT64_MAX);
  uint64_t u;
  ck_assert(ts_parse_u64("18446744073709551615", &u, NULL) && u == UINT64_MAX);
  ck_assert(ts_parse_u64("0x10", &u, NULL) && u == 16);
  ck_assert(!ts_parse_u64("18446744073709551616", &u, &why));
  ck_assert(!ts_parse_u64("-1", &u, &why)); /* strtoull would take it as 2^64-1 */
  ck_assert(!ts_parse_u64("5x", &u, &why));
  double x;
  ck_assert(ts_parse_f64("2.5", 0, 10, &x, NULL) && x == 2.5);
  ck_assert(ts_parse_f64(".5", 0, 10, &x, NULL) && x == 0.5);
  ck_assert(ts_parse_f64("1e-3", 0, 10, &x, NULL) && x == 1e-3);
  static const char *bad[] = {"nan", "NaN", "inf", "-inf", "infinity", "1e999", "", "1.5s", "11", "-1", " 1"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    ck_assert_msg(!ts_parse_f64(bad[i], 0, 10, &x, &why), "'%s' accepted", bad[i]);
}
END_TEST

/* TESSEL_DEBUG is read once per process: each Check test runs in a forked
 * child, so setting it first here is what that child reads. */
START_TEST(test_debug_topics) {
  setenv("TESSEL_DEBUG", " passes,legalize layout", 1);
  ck_assert(ts_debug("passes"));
  ck_assert(ts_debug("legalize"));
  ck_assert(ts_debug("layout"));
  ck_assert(!ts_debug("pass"));   /* whole topics, not substrings */
  ck_assert(!ts_debug("lower"));
  setenv("TESSEL_DEBUG", "all", 1); /* already read: no effect */
  ck_assert(!ts_debug("lower"));
}
END_TEST

START_TEST(test_debug_all) {
  setenv("TESSEL_DEBUG", "all", 1);
  ck_assert(ts_debug("lower"));
  ck_assert(ts_debug("anything"));
}
END_TEST

int main(void) {
  Suite *s = suite_create("base");
  TCase *tc = tcase_create("base");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_strerror);
  tcase_add_test(tc, test_diag_first_wins);
  tcase_add_test(tc, test_alloc_fail_injection);
  tcase_add_test(tc, test_arena);
  tcase_add_test(tc, test_strbuf_vec);
  tcase_add_test(tc, test_rng);
  tcase_add_test(tc, test_read_file_missing);
  tcase_add_test(tc, test_read_file_dev_zero);
  tcase_add_test(tc, test_read_file_cap_boundary);
  tcase_add_test(tc, test_read_file_errors_not_eof);
  tcase_add_test(tc, test_read_file_pipe);
  tcase_add_test(tc, test_lines);
  tcase_add_test(tc, test_strict_numbers);
  tcase_add_test(tc, test_debug_topics);
  tcase_add_test(tc, test_debug_all);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int nf = srunner_ntests_failed(sr);
  srunner_free(sr);
  return nf ? 1 : 0;
}
