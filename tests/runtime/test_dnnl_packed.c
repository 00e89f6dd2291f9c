/* test_dnnl_packed.c — tsrt_dnnl_sgemm_packed (runtime/dnnl_packed.c):
 * oneDNN's gemm on a weight it packs once, against a plain triple loop in
 * double: odd and prime sizes, a transposed weight, one row and one column,
 * the pack made at one number of rows reused at others (a model's symbolic
 * sequence), and a weight whose contents change at the same address (the
 * tuner's next measurement): every call equals the reference, never a stale
 * pack. Without oneDNN (or its pack entries) the call must refuse (-1). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "runtime.h"
#include "tessel_config.h"

static float *rnd(int64_t n, unsigned *seed) {
  float *p = malloc(sizeof *p * (size_t)(n ? n : 1));
  for (int64_t i = 0; i < n; i++) p[i] = (float)((int)(rand_r(seed) % 2001) - 1000) / 1000.0f;
  return p;
}

/* max |c - a.b| over c[m, n], b [k, n] or [n, k] (trans) */
static double err(int64_t m, int64_t n, int64_t k, int trans, const float *a, const float *b, const float *c) {
  double e = 0;
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      double s = 0;
      for (int64_t r = 0; r < k; r++) s += (double)a[i * k + r] * (trans ? b[j * k + r] : b[r * n + j]);
      e = fmax(e, fabs(s - c[i * n + j]));
    }
  return e;
}

START_TEST(packed_equals_reference) {
  if (!tsrt_dnnl_packed_available()) {
    float a = 1, b = 1, c = 0;
    ck_assert_int_eq(tsrt_dnnl_sgemm_packed(1, 1, 1, 0, &a, &b, &c), -1);
    fprintf(stderr, "test_dnnl_packed: no oneDNN pack entries here: only the refusal is tested\n");
    return;
  }
  static const int64_t sizes[][3] = {{37, 29, 41}, {1, 67, 53}, {61, 1, 47}, {17, 768, 97}, {128, 131, 257}};
  unsigned seed = 7;
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
    for (int trans = 0; trans < 2; trans++) {
      int64_t m = sizes[s][0], n = sizes[s][1], k = sizes[s][2];
      float *a = rnd(m * k, &seed), *b = rnd(k * n, &seed), *c = malloc(sizeof *c * (size_t)(m * n));
      ck_assert_int_eq(tsrt_dnnl_sgemm_packed(m, n, k, trans, a, b, c), 0);
      double e = err(m, n, k, trans, a, b, c);
      ck_assert_msg(e < 1e-3, "%ldx%ldx%ld trans %d: error %g", (long)m, (long)n, (long)k, trans, e);
      /* the same weight at other row counts: the pack made at m serves them */
      for (int64_t m2 = 1; m2 <= 2 * m + 3; m2 += m + 1) {
        float *a2 = rnd(m2 * k, &seed), *c2 = malloc(sizeof *c2 * (size_t)(m2 * n));
        ck_assert_int_eq(tsrt_dnnl_sgemm_packed(m2, n, k, trans, a2, b, c2), 0);
        e = err(m2, n, k, trans, a2, b, c2);
        ck_assert_msg(e < 1e-3, "%ld rows on a pack made at %ld: error %g", (long)m2, (long)m, e);
        free(a2);
        free(c2);
      }
      free(a);
      free(b);
      free(c);
    }
}
END_TEST

START_TEST(packed_sees_new_contents) {
  if (!tsrt_dnnl_packed_available()) return;
  int64_t m = 19, n = 23, k = 31;
  unsigned seed = 11;
  float *a = rnd(m * k, &seed), *b = rnd(k * n, &seed), *c = malloc(sizeof *c * (size_t)(m * n));
  ck_assert_int_eq(tsrt_dnnl_sgemm_packed(m, n, k, 0, a, b, c), 0);
  ck_assert(err(m, n, k, 0, a, b, c) < 1e-3);
  /* new contents at the same address (every value: what a new measurement's inputs are) */
  for (int64_t i = 0; i < k * n; i++) b[i] = -2.0f * b[i] + 0.25f;
  ck_assert_int_eq(tsrt_dnnl_sgemm_packed(m, n, k, 0, a, b, c), 0);
  double e = err(m, n, k, 0, a, b, c);
  ck_assert_msg(e < 1e-3, "a changed weight read from a stale pack: error %g", e);
  free(a);
  free(b);
  free(c);
}
END_TEST

int main(void) {
  Suite *s = suite_create("dnnl_packed");
  TCase *tc = tcase_create("dnnl_packed");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, packed_equals_reference);
  tcase_add_test(tc, packed_sees_new_contents);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failures = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failures ? 1 : 0;
}
