/* test_compute_inline.c — compute_inline and reverse_compute_inline
 * (ir/schedule/compute_inline.c). Legal uses run with the state checker on
 * and are compared with the unscheduled function in the reference
 * interpreter; the inlined block and its buffer must be gone and the
 * consumers' regions regenerated. Refusals leave the function unchanged and
 * say why. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "ir/parse.h"
#include "ir/print.h"
#include "ir/schedule/trace.h"
#include "ir/struct.h"
#include "util.h"

static ts_diag D;

static void setup(void) {
  tu_setup();
  ts_diag_clear(&D);
}

static sch_block BLK(const char *name) { return (sch_block){name}; }

#define REFUSED(s, call, ...) TU_REFUSED(&D, s, call, __VA_ARGS__)

#define OK(call) TU_OK(&D, call)

static void equiv(sch_state *s, const ir_func *orig) { tu_assert_equivalent(orig, sch_func(s)); }

static const char *CONV_PAD =
    "kernel convpad(X: f32[1, 2, 5, 5], W: f32[3, 2, 3, 3]) -> Y: f32[1, 3, 5, 5] {\n"
    "  let P: f32[1, 2, 7, 7]\n"
    "  P[n, c, h, w] = select(h >= 1 && h < 6 && w >= 1 && w < 6, X[n, c, h - 1, w - 1], 0.0)\n"
    "  Y[n, k, p, q] += P[n, c, p + r, q + s] * W[k, c, r, s] for r in 0..3, s in 0..3\n"
    "}\n";

/* ---- compute_inline --------------------------------------------------------- */

START_TEST(test_inline_conv_pad) {
  ir_func *orig;
  sch_state *s = tu_open_text(CONV_PAD, &orig);
  OK(sch_compute_inline(s, BLK("P"), &D));
  equiv(s, orig);
  ck_assert(!tu_find_realize(s, "P"));
  tu_assert_lacks(s, "alloc P");
  /* The conv reads X directly now (regions regenerated), through the select. */
  tu_assert_has(s, "reads X[");
  tu_assert_has(s, "select(vp + vr >= 1");
  tu_assert_lacks(s, "P[");
}
END_TEST

/* softmax's exp stage feeds two consumers (the sum and the division). */
START_TEST(test_inline_softmax_exp) {
  ir_func *orig;
  sch_state *s = tu_open("softmax:m=3,n=7", &orig);
  OK(sch_compute_inline(s, BLK("e"), &D));
  equiv(s, orig);
  ck_assert(!tu_find_realize(s, "e"));
  tu_assert_lacks(s, "alloc e");
  tu_assert_has(s, "reads X[vi_2, vj_2], mx[vi_2], s[vi_2]");
  tu_assert_has(s, "Y[vi_2, vj_2] = exp(X[vi_2, vj_2] - mx[vi_2]) / s[vi_2]");
  tu_assert_has(s, "s[vi_1] = s[vi_1] + exp(X[vi_1, vj_1] - mx[vi_1])");
}
END_TEST

/* layernorm: the mean (a scalar per row) into both of its readers, then
 * rstd; the schedule composes with compute_at afterwards. */
START_TEST(test_inline_layernorm_then_compute_at) {
  ir_func *orig;
  sch_state *s = tu_open("layernorm:m=3,n=7", &orig);
  OK(sch_compute_inline(s, BLK("mean"), &D));
  equiv(s, orig);
  OK(sch_compute_inline(s, BLK("rstd"), &D));
  equiv(s, orig);
  sch_loop yi = tu_loop(s, "Y", 0);
  OK(sch_compute_at(s, BLK("sq"), yi, false, -1, &D));
  OK(sch_compute_at(s, BLK("sm"), yi, false, -1, &D));
  equiv(s, orig);
}
END_TEST

/* dense: the bias stage into the activation. */
START_TEST(test_inline_dense_bias) {
  ir_func *orig;
  sch_state *s = tu_open("dense:m=6,n=10,k=7", &orig);
  OK(sch_compute_inline(s, BLK("bb"), &D));
  equiv(s, orig);
  tu_assert_has(s, "reads mm[vi_1, vj_1], bias[vj_1]");
  tu_assert_has(s, "Y[vi_1, vj_1] = max(mm[vi_1, vj_1] + bias[vj_1], 0.0)");
}
END_TEST

/* A producer written with a unit iter var that does not index its buffer,
 * and a consumer under split loops. */
static const char *UNIT_VAR =
    "func unitvar(A: f32[5, 6]) -> C: f32[5, 6] {\n"
    "  block root() {\n"
    "    alloc B: f32[5, 6]\n"
    "    for u in serial(0, 1) {\n"
    "      for i in serial(0, 5) {\n"
    "        for j in serial(0, 6) {\n"
    "          block B(vu: S(0, 1) = u, vi: S(0, 5) = i, vj: S(0, 6) = j) {\n"
    "            reads A[vi, vj]\n"
    "            writes B[vi, vj]\n"
    "            B[vi, vj] = A[vi, vj] * 3.0 + f32(vu)\n"
    "          }\n"
    "        }\n"
    "      }\n"
    "    }\n"
    "    for i in serial(0, 5) {\n"
    "      for j in serial(0, 6) {\n"
    "        block C(vi: S(0, 5) = i, vj: S(0, 6) = j) {\n"
    "          reads B[vi, 5 - vj]\n"
    "          writes C[vi, vj]\n"
    "          C[vi, vj] = B[vi, 5 - vj] + 1.0\n"
    "        }\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "}\n";

START_TEST(test_inline_unit_var_and_reversed_index) {
  ir_func *orig;
  sch_state *s = tu_open_text(UNIT_VAR, &orig);
  int64_t f[2] = {-1, 4};
  sch_loop parts[2];
  OK(sch_split(s, tu_loop(s, "C", 1), 2, f, parts, &D));
  OK(sch_compute_inline(s, BLK("B"), &D));
  equiv(s, orig);
  tu_assert_has(s, "reads A[vi, 5 - vj]");
  tu_assert_has(s, "C[vi, vj] = A[vi, 5 - vj] * 3.0 + f32(");
}
END_TEST

START_TEST(test_inline_refusals) {
  ir_func *orig;
  sch_state *s = tu_open("softmax:m=3,n=7", &orig);
  REFUSED(s, sch_compute_inline(s, BLK("mx"), &D), "compute_inline", "'mx'", "reduction");
  REFUSED(s, sch_compute_inline(s, BLK("Y"), &D), "compute_inline", "output block", "'Y'");

  s = tu_open("dense:m=6,n=10,k=7", &orig);
  REFUSED(s, sch_compute_inline(s, BLK("mm"), &D), "reduction");
}
END_TEST

/* A producer whose body is more than one store. */
static const char *TWO_STORES =
    "func twostores(A: f32[4]) -> C: f32[4] {\n"
    "  block root() {\n"
    "    alloc B: f32[4]\n"
    "    for i in serial(0, 4) {\n"
    "      block B(vi: S(0, 4) = i) {\n"
    "        reads A[vi]\n"
    "        writes B[vi]\n"
    "        B[vi] = A[vi]\n"
    "        B[vi] = A[vi] * 2.0\n"
    "      }\n"
    "    }\n"
    "    for i in serial(0, 4) {\n"
    "      block C(vi: S(0, 4) = i) {\n"
    "        reads B[vi]\n"
    "        writes C[vi]\n"
    "        C[vi] = B[vi] + 1.0\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "}\n";

START_TEST(test_inline_refuses_non_store_body) {
  ir_func *orig;
  sch_state *s = tu_open_text(TWO_STORES, &orig);
  REFUSED(s, sch_compute_inline(s, BLK("B"), &D), "not a single", "store");
  /* reverse: C reads B, whose producer is not a single store either */
  REFUSED(s, sch_reverse_compute_inline(s, BLK("C"), &D), "reverse_compute_inline", "single store");
}
END_TEST

/* ---- reverse_compute_inline ------------------------------------------------- */

/* dense: the activation into the bias stage, then that stage cannot go into
 * the reduction. */
START_TEST(test_reverse_inline_dense_relu) {
  ir_func *orig;
  sch_state *s = tu_open("dense:m=6,n=10,k=7", &orig);
  OK(sch_reverse_compute_inline(s, BLK("Y"), &D));
  equiv(s, orig);
  ck_assert(!tu_find_realize(s, "Y"));
  tu_assert_lacks(s, "alloc bb");
  tu_assert_has(s, "writes Y[vi_1, vj_1]");
  tu_assert_has(s, "Y[vi_1, vj_1] = max(mm[vi_1, vj_1] + bias[vj_1], 0.0)");
  REFUSED(s, sch_reverse_compute_inline(s, BLK("bb"), &D), "reverse_compute_inline", "'mm'",
          "not a complete block");
}
END_TEST

/* A consumer that transposes: the producer stores at the transposed point;
 * the producer's domain is larger than the consumer's, so a predicate
 * keeps the extra points out. */
static const char *TRANSPOSE =
    "func tr(A: f32[6, 5]) -> C: f32[4, 6] {\n"
    "  block root() {\n"
    "    alloc B: f32[6, 5]\n"
    "    for i in serial(0, 6) {\n"
    "      for j in serial(0, 5) {\n"
    "        block B(vi: S(0, 6) = i, vj: S(0, 5) = j) {\n"
    "          reads A[vi, vj]\n"
    "          writes B[vi, vj]\n"
    "          B[vi, vj] = A[vi, vj] * 2.0\n"
    "        }\n"
    "      }\n"
    "    }\n"
    "    for j in serial(0, 4) {\n"
    "      for i in serial(0, 6) {\n"
    "        block C(vj: S(0, 4) = j, vi: S(0, 6) = i) {\n"
    "          reads B[vi, vj]\n"
    "          writes C[vj, vi]\n"
    "          C[vj, vi] = B[vi, vj] + B[vi, vj]\n"
    "        }\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "}\n";

START_TEST(test_reverse_inline_transpose_with_predicate) {
  ir_func *orig;
  sch_state *s = tu_open_text(TRANSPOSE, &orig);
  OK(sch_reverse_compute_inline(s, BLK("C"), &D));
  equiv(s, orig);
  tu_assert_has(s, "where j < 4");
  tu_assert_has(s, "C[vj, vi] = A[vi, vj] * 2.0 + A[vi, vj] * 2.0");
}
END_TEST

/* A predicated consumer (a block padded to a shape bucket runs only inside
 * the call's sizes, docs/MODEL.md "Shape buckets"): its predicate moves to
 * the producer's points, so the points C skipped stay unwritten. */
static const char *GUARDED =
    "func gd(A: f32[6, 5]) -> C: f32[6, 5] {\n"
    "  block root() {\n"
    "    alloc B: f32[6, 5]\n"
    "    for i in serial(0, 6) {\n"
    "      for j in serial(0, 5) {\n"
    "        block B(vi: S(0, 6) = i, vj: S(0, 5) = j) where i < 4 {\n"
    "          reads A[vi, vj]\n"
    "          writes B[vi, vj]\n"
    "          B[vi, vj] = A[vi, vj] * 2.0\n"
    "        }\n"
    "      }\n"
    "    }\n"
    "    for i in serial(0, 6) {\n"
    "      for j in serial(0, 5) {\n"
    "        block C(vi: S(0, 6) = i, vj: S(0, 5) = j) where i < 4 && j < 3 {\n"
    "          reads B[vi, vj]\n"
    "          writes C[vi, vj]\n"
    "          C[vi, vj] = B[vi, vj] + 1.0\n"
    "        }\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "}\n";

START_TEST(test_reverse_inline_predicated_consumer) {
  ir_func *orig;
  sch_state *s = tu_open_text(GUARDED, &orig);
  OK(sch_reverse_compute_inline(s, BLK("C"), &D));
  equiv(s, orig);
  ck_assert(!tu_find_realize(s, "C"));
  tu_assert_has(s, "where i < 4 && (i < 4 && j < 3)");
  tu_assert_has(s, "C[vi, vj] = A[vi, vj] * 2.0 + 1.0");
}
END_TEST

START_TEST(test_reverse_inline_refusals) {
  ir_func *orig;
  sch_state *s = tu_open("softmax:m=3,n=7", &orig);
  /* a reduction consumer */
  REFUSED(s, sch_reverse_compute_inline(s, BLK("s"), &D), "reverse_compute_inline", "'s'",
          "reduction");
  /* Y reads two buffers produced in the scope (e and s) */
  REFUSED(s, sch_reverse_compute_inline(s, BLK("Y"), &D), "2 buffers");
  /* e's producer mx... e reads mx (a reduction producer) */
  REFUSED(s, sch_reverse_compute_inline(s, BLK("e"), &D), "'mx'");
}
END_TEST

/* ---- trace round trip ------------------------------------------------------ */

START_TEST(test_trace_roundtrip) {
  ir_func *orig;
  sch_traced *t = tu_open_traced("softmax:m=3,n=7", 1, &orig);
  int e, loc, dec = -2;
  OK(sch_t_get_block(t, "e", &e, &D));
  /* the sampler's inline mark, applied through compute_at */
  OK(sch_t_sample_compute_location(t, e, &dec, &loc, &D));
  ck_assert_int_eq(sch_t_loop(t, loc).mark, SCH_LOC_INLINE);
  OK(sch_t_compute_at(t, e, loc, false, -1, &D));
  tu_assert_roundtrip(t, orig, 7);

  t = tu_open_traced("dense:m=6,n=10,k=7", 1, &orig);
  int y, bb;
  OK(sch_t_get_block(t, "Y", &y, &D));
  OK(sch_t_reverse_compute_inline(t, y, &D));
  tu_assert_roundtrip(t, orig, 7);

  t = tu_open_traced("dense:m=6,n=10,k=7", 1, &orig);
  OK(sch_t_get_block(t, "bb", &bb, &D));
  OK(sch_t_compute_inline(t, bb, &D));
  tu_assert_roundtrip(t, orig, 7);
}
END_TEST

static Suite *inline_suite(void) {
  Suite *su = suite_create("schedule_compute_inline");
  TCase *tc = tu_tcase(su, "compute_inline", setup, 60);
  tcase_add_test(tc, test_inline_conv_pad);
  tcase_add_test(tc, test_inline_softmax_exp);
  tcase_add_test(tc, test_inline_layernorm_then_compute_at);
  tcase_add_test(tc, test_inline_dense_bias);
  tcase_add_test(tc, test_inline_unit_var_and_reversed_index);
  tcase_add_test(tc, test_inline_refusals);
  tcase_add_test(tc, test_inline_refuses_non_store_body);
  tcase_add_test(tc, test_reverse_inline_dense_relu);
  tcase_add_test(tc, test_reverse_inline_transpose_with_predicate);
  tcase_add_test(tc, test_reverse_inline_refusals);
  tcase_add_test(tc, test_reverse_inline_predicated_consumer);
  tcase_add_test(tc, test_trace_roundtrip);
  return su;
}

int main(void) { return tu_run(inline_suite()); }
