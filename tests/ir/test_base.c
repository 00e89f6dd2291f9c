/* test_base.c — the ts base: status table, diagnostics (first error wins),
 * allocation fault injection, arena, string buffer, vector, RNG. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

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
  tcase_add_test(tc, test_strerror);
  tcase_add_test(tc, test_diag_first_wins);
  tcase_add_test(tc, test_alloc_fail_injection);
  tcase_add_test(tc, test_arena);
  tcase_add_test(tc, test_strbuf_vec);
  tcase_add_test(tc, test_rng);
  tcase_add_test(tc, test_read_file_missing);
  tcase_add_test(tc, test_debug_topics);
  tcase_add_test(tc, test_debug_all);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int nf = srunner_ntests_failed(sr);
  srunner_free(sr);
  return nf ? 1 : 0;
}
