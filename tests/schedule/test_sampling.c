/* test_sampling.c — the samplers: sample_perfect_tile (products equal the
 * extent, the innermost bound holds, deterministic per seed, uniform over
 * ordered factorizations, stored decisions repaired when the extent
 * changes, symbolic extents) and sample_categorical (follows the
 * probabilities, honours decisions, refuses bad input). */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "ir/parse.h"
#include "ir/schedule/trace.h"
#include "util.h"

static ts_diag D;
#define OK(x) tu_ok((x), &D)

/* A one-loop function whose loop has the given extent. */
static sch_state *one_loop(ts_arena *a, int64_t extent, uint64_t seed, sch_loop *l) {
  char spec[64];
  snprintf(spec, sizeof spec, "matmul:m=%lld,n=1,k=1", (long long)extent);
  ir_func *f = tu_workload(a, spec);
  ts_diag_clear(&D);
  sch_state *s = sch_create(f, seed, &D);
  ck_assert_msg(s != NULL, "%s", D.msg);
  sch_loop buf[8];
  ck_assert_int_ge(tu_loops(s, "C", buf, 8), 1);
  *l = buf[0];
  return s;
}

START_TEST(test_perfect_tile_products) {
  static const int64_t extents[] = {1, 2, 7, 12, 64, 97, 360, 1024};
  static const int64_t inner[] = {-1, 1, 4, 16};
  ts_arena a;
  ts_arena_init(&a);
  for (size_t e = 0; e < sizeof extents / sizeof *extents; e++) {
    sch_loop l;
    sch_state *s = one_loop(&a, extents[e], 3 + e, &l);
    for (int n = 1; n <= 4; n++)
      for (size_t m = 0; m < sizeof inner / sizeof *inner; m++) {
        if (n == 1 && inner[m] != -1 && extents[e] > inner[m]) continue; /* unsatisfiable */
        for (int rep = 0; rep < 20; rep++) {
          int64_t out[4];
          ts_diag_clear(&D);
          OK(sch_sample_perfect_tile(s, l, n, inner[m], NULL, out, &D));
          int64_t prod = 1;
          for (int i = 0; i < n; i++) {
            ck_assert_int_ge(out[i], 1);
            prod *= out[i];
          }
          ck_assert_int_eq(prod, extents[e]);
          if (inner[m] != -1) ck_assert_int_le(out[n - 1], inner[m]);
        }
      }
    sch_free(s);
  }
  ts_arena_fini(&a);
}
END_TEST

START_TEST(test_perfect_tile_deterministic) {
  ts_arena a;
  ts_arena_init(&a);
  sch_loop l1, l2, l3;
  sch_state *s1 = one_loop(&a, 360, 42, &l1), *s2 = one_loop(&a, 360, 42, &l2), *s3 = one_loop(&a, 360, 43, &l3);
  bool differs = false;
  for (int rep = 0; rep < 50; rep++) {
    int64_t x[3], y[3], z[3];
    OK(sch_sample_perfect_tile(s1, l1, 3, 16, NULL, x, &D));
    OK(sch_sample_perfect_tile(s2, l2, 3, 16, NULL, y, &D));
    OK(sch_sample_perfect_tile(s3, l3, 3, 16, NULL, z, &D));
    ck_assert_mem_eq(x, y, sizeof x);
    if (memcmp(x, z, sizeof x)) differs = true;
  }
  ck_assert_msg(differs, "seeds 42 and 43 drew the same 50 tilings");
  sch_free(s1);
  sch_free(s2);
  sch_free(s3);
  ts_arena_fini(&a);
}
END_TEST

/* 12 into two ordered factors: (1,12) (2,6) (3,4) (4,3) (6,2) (12,1), each
 * with probability 1/6; with max_innermost 4 only (3,4) (4,3) (6,2) (12,1)
 * remain, each 1/4. */
START_TEST(test_perfect_tile_uniform) {
  ts_arena a;
  ts_arena_init(&a);
  sch_loop l;
  sch_state *s = one_loop(&a, 12, 7, &l);
  int count[13] = {0};
  const int N = 3000;
  for (int rep = 0; rep < N; rep++) {
    int64_t out[2];
    OK(sch_sample_perfect_tile(s, l, 2, -1, NULL, out, &D));
    count[out[1]]++;
  }
  static const int divs[] = {1, 2, 3, 4, 6, 12};
  for (int i = 0; i < 6; i++)
    ck_assert_msg(count[divs[i]] > N / 6 - 150 && count[divs[i]] < N / 6 + 150, "inner %d drawn %d times of %d",
                  divs[i], count[divs[i]], N);
  memset(count, 0, sizeof count);
  for (int rep = 0; rep < N; rep++) {
    int64_t out[2];
    OK(sch_sample_perfect_tile(s, l, 2, 4, NULL, out, &D));
    count[out[1]]++;
  }
  for (int i = 0; i < 4; i++) ck_assert_msg(count[divs[i]] > N / 4 - 170 && count[divs[i]] < N / 4 + 170,
                                            "inner %d drawn %d times", divs[i], count[divs[i]]);
  ck_assert_int_eq(count[6] + count[12], 0);
  /* three factors of 8 = 2^3: C(5,2) = 10 ordered tilings, all reachable */
  sch_loop l8;
  sch_state *s8 = one_loop(&a, 8, 9, &l8);
  int seen[9][9] = {{0}};
  int distinct = 0;
  for (int rep = 0; rep < 2000; rep++) {
    int64_t out[3];
    OK(sch_sample_perfect_tile(s8, l8, 3, -1, NULL, out, &D));
    if (!seen[out[1]][out[2]]++) distinct++;
  }
  ck_assert_int_eq(distinct, 10);
  sch_free(s);
  sch_free(s8);
  ts_arena_fini(&a);
}
END_TEST

START_TEST(test_perfect_tile_decision_repair) {
  ts_arena a;
  ts_arena_init(&a);
  sch_loop l;
  sch_state *s = one_loop(&a, 12, 1, &l);
  struct {
    int n;
    int64_t dec[3], want[3];
  } cases[] = {
      {2, {2, 6}, {2, 6}},      /* still fits */
      {2, {3, 4}, {3, 4}},
      {2, {4, 4}, {3, 4}},      /* the outer absorbs the rest */
      {2, {1, 5}, {1, 12}},     /* 5 no longer divides: it takes everything */
      {3, {1, 2, 6}, {1, 2, 6}},
      {3, {9, 3, 2}, {2, 3, 2}},
      {3, {1, 5, 4}, {1, 3, 4}},  /* 3 left; 5 does not divide 3 -> 3 */
      {3, {1, 4, 5}, {1, 1, 12}}, /* 5 takes all 12; then 4 takes the 1 */
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    int64_t out[3];
    ts_diag_clear(&D);
    OK(sch_sample_perfect_tile(s, l, cases[i].n, -1, cases[i].dec, out, &D));
    for (int k = 0; k < cases[i].n; k++)
      ck_assert_msg(out[k] == cases[i].want[k], "case %zu: tile %d is %lld, want %lld", i, k, (long long)out[k],
                    (long long)cases[i].want[k]);
  }
  /* a non-positive stored tile is an error, not a crash */
  int64_t bad[2] = {3, 0}, out[2];
  ts_diag_clear(&D);
  ck_assert_int_eq(sch_sample_perfect_tile(s, l, 2, -1, bad, out, &D), TS_EINVAL);
  ck_assert_ptr_nonnull(strstr(D.msg, "non-positive"));
  sch_free(s);
  ts_arena_fini(&a);
}
END_TEST

/* A trace recorded on one size replays on another: the stored tiles are
 * repaired and the trace records the repaired decision. */
START_TEST(test_perfect_tile_repair_in_replay) {
  ts_arena a;
  ts_arena_init(&a);
  ir_func *f8 = tu_workload(&a, "matmul:m=8,n=5,k=3"), *f12 = tu_workload(&a, "matmul:m=12,n=5,k=3"),
          *f7 = tu_workload(&a, "matmul:m=7,n=5,k=3");
  ts_diag_clear(&D);
  sch_traced *t = sch_traced_new(f8, 1, &D);
  int b, v[2], parts[2];
  const int *l;
  int n;
  OK(sch_t_get_block(t, "C", &b, &D));
  OK(sch_t_get_loops(t, b, &l, &n, &D));
  int64_t want[2] = {2, 4};
  OK(sch_t_sample_perfect_tile(t, l[0], 2, -1, want, v, &D));
  sch_arg f[2] = {sch_arg_rv(v[0]), sch_arg_rv(v[1])};
  OK(sch_t_split(t, l[0], 2, f, parts, &D));
  const sch_trace *tr = sch_traced_trace(t);

  sch_traced *r = sch_trace_replay(tr, f12, 5, &D);
  ck_assert_msg(r != NULL, "%s", D.msg);
  const sch_inst *x = sch_trace_inst(sch_traced_trace(r), 2);
  ck_assert_int_eq(x->kind, SCH_I_SAMPLE_PERFECT_TILE);
  ck_assert_int_eq(x->decision.v[0], 3); /* 12 = 3 x 4 */
  ck_assert_int_eq(x->decision.v[1], 4);
  tu_assert_equivalent(f12, sch_traced_func(r));
  sch_traced_free(r);

  r = sch_trace_replay(tr, f7, 5, &D);
  ck_assert_msg(r != NULL, "%s", D.msg);
  x = sch_trace_inst(sch_traced_trace(r), 2);
  ck_assert_int_eq(x->decision.v[0], 1); /* 4 does not divide 7 */
  ck_assert_int_eq(x->decision.v[1], 7);
  tu_assert_equivalent(f7, sch_traced_func(r));
  sch_traced_free(r);
  sch_traced_free(t);
  ts_arena_fini(&a);
}
END_TEST

START_TEST(test_perfect_tile_symbolic) {
  static const char src[] = "kernel scale(X: f32[N]) -> Y: f32[N] {\n  Y[i] = X[i] * 2.0\n}\n";
  ts_arena a;
  ts_arena_init(&a);
  ir_func *f;
  ts_diag_clear(&D);
  OK(ir_parse_func(&a, src, strlen(src), "scale.tsl", &f, &D));
  sch_state *s = sch_create(f, 1, &D);
  ck_assert_ptr_nonnull(s);
  sch_block *blocks;
  int nb;
  sch_block root = {sch_func(s)->body->u.realize.block->name};
  OK(sch_get_child_blocks(s, root, &blocks, &nb, &D));
  ck_assert_int_eq(nb, 1);
  sch_loop *l;
  int n;
  OK(sch_get_loops(s, blocks[0], &l, &n, &D));
  int64_t out[3], dec[3] = {2, 2, 2};
  OK(sch_sample_perfect_tile(s, l[0], 3, 4, NULL, out, &D));
  ck_assert_int_eq(out[0], -1);
  ck_assert_int_eq(out[1], 1);
  ck_assert_int_eq(out[2], 1);
  OK(sch_sample_perfect_tile(s, l[0], 3, 4, dec, out, &D)); /* a stored decision cannot apply */
  ck_assert_int_eq(out[0], -1);
  sch_free(s);
  ts_arena_fini(&a);
}
END_TEST

START_TEST(test_perfect_tile_errors) {
  ts_arena a;
  ts_arena_init(&a);
  sch_loop l;
  sch_state *s = one_loop(&a, 12, 1, &l);
  int64_t out[70];
  ts_diag_clear(&D);
  ck_assert_int_eq(sch_sample_perfect_tile(s, l, 0, -1, NULL, out, &D), TS_EINVAL);
  ts_diag_clear(&D);
  ck_assert_int_eq(sch_sample_perfect_tile(s, l, 65, -1, NULL, out, &D), TS_EINVAL);
  ts_diag_clear(&D);
  ck_assert_int_eq(sch_sample_perfect_tile(s, l, 2, 0, NULL, out, &D), TS_EINVAL);
  ck_assert_ptr_nonnull(strstr(D.msg, "max_innermost"));
  ts_diag_clear(&D);
  ck_assert_int_eq(sch_sample_perfect_tile(s, l, 1, 4, NULL, out, &D), TS_EINVAL);
  ts_diag_clear(&D);
  sch_loop root = {NULL, SCH_LOC_ROOT};
  ck_assert_int_eq(sch_sample_perfect_tile(s, root, 2, -1, NULL, out, &D), TS_EINVAL);
  ck_assert_ptr_nonnull(strstr(D.msg, "mark"));
  sch_free(s);
  ts_arena_fini(&a);
}
END_TEST

START_TEST(test_categorical) {
  ts_arena a;
  ts_arena_init(&a);
  sch_loop l;
  sch_state *s = one_loop(&a, 4, 11, &l);
  int64_t cand[4] = {10, 20, 30, 40};
  double probs[4] = {0.1, 0.2, 0.0, 0.7};
  int count[4] = {0};
  const int N = 5000;
  for (int i = 0; i < N; i++) {
    int64_t v;
    int idx;
    OK(sch_sample_categorical(s, 4, cand, probs, NULL, &v, &idx, &D));
    ck_assert_int_eq(v, cand[idx]);
    count[idx]++;
  }
  ck_assert_int_eq(count[2], 0);
  for (int i = 0; i < 4; i++)
    ck_assert_msg(count[i] > N * probs[i] - 150 && count[i] < N * probs[i] + 150, "candidate %d drawn %d times", i,
                  count[i]);
  /* a decision is honoured; unnormalized probabilities are fine */
  double w[4] = {1, 1, 1, 5};
  int dec = 2, idx;
  int64_t v;
  OK(sch_sample_categorical(s, 4, cand, w, &dec, &v, &idx, &D));
  ck_assert_int_eq(idx, 2);
  ck_assert_int_eq(v, 30);
  /* errors */
  dec = 4;
  ts_diag_clear(&D);
  ck_assert_int_eq(sch_sample_categorical(s, 4, cand, w, &dec, &v, &idx, &D), TS_EINVAL);
  double zero[2] = {0, 0}, neg[2] = {0.5, -1};
  ts_diag_clear(&D);
  ck_assert_int_eq(sch_sample_categorical(s, 2, cand, zero, NULL, &v, &idx, &D), TS_EINVAL);
  ts_diag_clear(&D);
  ck_assert_int_eq(sch_sample_categorical(s, 2, cand, neg, NULL, &v, &idx, &D), TS_EINVAL);
  ts_diag_clear(&D);
  ck_assert_int_eq(sch_sample_categorical(s, 0, cand, w, NULL, &v, &idx, &D), TS_EINVAL);
  sch_free(s);
  ts_arena_fini(&a);
}
END_TEST

/* The traced samplers record their decisions; replaying with the decision
 * reproduces the value, and a changed categorical decision changes it. */
START_TEST(test_traced_samplers) {
  ts_arena a;
  ts_arena_init(&a);
  ir_func *f = tu_workload(&a, "matmul:m=12,n=10,k=7");
  ts_diag_clear(&D);
  sch_traced *t = sch_traced_new(f, 3, &D);
  int b, v[3], c;
  const int *l;
  int n;
  OK(sch_t_get_block(t, "C", &b, &D));
  OK(sch_t_get_loops(t, b, &l, &n, &D));
  OK(sch_t_sample_perfect_tile(t, l[1], 3, 5, NULL, v, &D));
  int64_t cand[3] = {2, 3, 5};
  double probs[3] = {1, 1, 1};
  OK(sch_t_sample_categorical(t, 3, cand, probs, NULL, &c, &D));
  const sch_trace *tr = sch_traced_trace(t);
  const sch_inst *pt = sch_trace_inst(tr, 2), *ct = sch_trace_inst(tr, 3);
  ck_assert_int_eq(pt->decision.n, 3);
  ck_assert_int_eq(pt->decision.v[0] * pt->decision.v[1] * pt->decision.v[2], 10);
  ck_assert_int_le(pt->decision.v[2], 5);
  for (int i = 0; i < 3; i++) ck_assert_int_eq(sch_t_value(t, v[i]), pt->decision.v[i]);
  ck_assert_int_eq(ct->decision.n, 1);
  ck_assert_int_eq(sch_t_value(t, c), cand[ct->decision.v[0]]);

  sch_trace *tr2 = sch_trace_copy(tr);
  int64_t nd = (ct->decision.v[0] + 1) % 3;
  sch_decision dec = {1, &nd};
  OK(sch_trace_set_decision(tr2, 3, &dec, &D));
  sch_traced *r = sch_trace_replay(tr2, f, 99, &D);
  ck_assert_msg(r != NULL, "%s", D.msg);
  /* the RVs of the replay are numbered as in the original */
  ck_assert_int_eq(sch_t_value(r, c), cand[nd]);
  for (int i = 0; i < 3; i++) ck_assert_int_eq(sch_t_value(r, v[i]), pt->decision.v[i]);
  /* decisions of the wrong form are refused */
  int64_t two[2] = {1, 2};
  sch_decision bad = {2, two};
  ts_diag_clear(&D);
  ck_assert_int_eq(sch_trace_set_decision(tr2, 3, &bad, &D), TS_EINVAL);
  ts_diag_clear(&D);
  ck_assert_int_eq(sch_trace_set_decision(tr2, 2, &bad, &D), TS_EINVAL);
  ts_diag_clear(&D);
  ck_assert_int_eq(sch_trace_set_decision(tr2, 0, &dec, &D), TS_EINVAL);
  sch_traced_free(r);
  sch_trace_free(tr2);
  sch_traced_free(t);
  ts_arena_fini(&a);
}
END_TEST

int main(void) {
  Suite *s = suite_create("sampling");
  TCase *tc = tu_tcase(s, "sampling", NULL, 60);
  tcase_add_test(tc, test_perfect_tile_products);
  tcase_add_test(tc, test_perfect_tile_deterministic);
  tcase_add_test(tc, test_perfect_tile_uniform);
  tcase_add_test(tc, test_perfect_tile_decision_repair);
  tcase_add_test(tc, test_perfect_tile_repair_in_replay);
  tcase_add_test(tc, test_perfect_tile_symbolic);
  tcase_add_test(tc, test_perfect_tile_errors);
  tcase_add_test(tc, test_categorical);
  tcase_add_test(tc, test_traced_samplers);
  return tu_run(s);
}
