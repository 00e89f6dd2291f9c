/* test_xgb.c — the XGBoost pack-sum model on a synthetic dataset built from
 * real schedules: random traces of matmul (sch_random_trace, plus the
 * default schedule), features extracted from each, and a hidden cost
 * formula over the features. The model must rank held-out candidates
 * better than the random model; save/load must give identical predictions;
 * prediction throughput is reported. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "costmodel/costmodel.h"
#include "ir/schedule/trace.h"
#include "ir/workloads/workloads.h"
#include "schedule/util.h"
#include "tuner/build.h"

#define NCAND 240
#define NTRAIN 170

static ts_diag D;
static cm_features feats[NCAND];
static double costs[NCAND];
static int ncand;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int fidx(const char *name) {
  for (int i = 0; i < CM_NUM_FEATURES; i++)
    if (!strcmp(cm_feature_name(i), name)) return i;
  return 0;
}

/* Hidden cost: cache lines touched, discounted by vectorization and
 * parallelism, plus loop overhead. */
static double hidden_cost(const cm_features *f) {
  int lines = fidx("B0.lines"), vec = fidx("vec_prod"), par = fidx("parallel_prod"),
      nl = fidx("num_loops"), ul = fidx("B1.unique_lines");
  double c = 0;
  for (int r = 0; r < f->nrows; r++) {
    const float *v = f->rows + (size_t)r * CM_NUM_FEATURES;
    double l = exp2(v[lines]) + 0.5 * exp2(v[ul]);
    c += l / (1 + exp2(v[vec]) * 0.5) / (1 + 0.3 * exp2(v[par])) + 3 * exp2(v[nl]);
  }
  return 1e-6 * c;
}

static void build_dataset(void) {
  if (ncand) return;
  ts_arena *a = ts_arena_new();
  ir_func *f = tu_workload(a, "matmul:m=64,n=64,k=64");
  cg_target tg;
  ck_assert_int_eq(cg_target_parse("llvm -mtriple=x86_64-linux-gnu -mattr=+avx2", &tg, &D), TS_OK);
  tg.vector_bits = 256;
  ts_rng rng;
  ts_rng_seed(&rng, 7);
  double t0 = now();
  for (int i = 0; ncand < NCAND && i < NCAND * 4; i++) {
    sch_traced *t = sch_traced_new(f, (uint64_t)i + 1, &D);
    ck_assert_ptr_nonnull(t);
    if (i % 2 == 0) tun_default_schedule(t, &tg, NULL);
    sch_random_opts o = {1, 8};
    sch_random_result res;
    ts_diag why, d2;
    ts_diag_clear(&why);
    ts_diag_clear(&d2);
    if (sch_random_trace(t, &rng, &o, &res, &why, &d2) == TS_OK) {
      cm_features ft;
      if (cm_extract(sch_traced_func(t), &tg, &ft, NULL) == TS_OK && ft.nrows > 0) {
        feats[ncand] = ft;
        costs[ncand] = hidden_cost(&ft);
        ncand++;
      }
    }
    sch_traced_free(t);
  }
  printf("dataset: %d matmul candidates from random traces in %.2f s\n", ncand, now() - t0);
  ck_assert_int_ge(ncand, 200);
  ts_arena_free(a);
}

static cm_model *trained(void) {
  build_dataset();
  cm_model *m = cm_xgb_new(2, 43, &D);
  ck_assert_ptr_nonnull(m);
  cm_sample s[NCAND];
  for (int i = 0; i < NTRAIN; i++) s[i] = (cm_sample){1, &feats[i], costs[i]};
  double t0 = now();
  ck_assert_msg(cm_update(m, s, NTRAIN, &D) == TS_OK, "%s", D.msg);
  printf("trained on %d candidates: %d rounds in %.2f s\n", NTRAIN, cm_xgb_last_rounds(m),
         now() - t0);
  ck_assert_int_eq(cm_num_samples(m), NTRAIN);
  return m;
}

START_TEST(beats_random) {
  cm_model *m = trained();
  cm_model *r = cm_random_new(5);
  int nh = ncand - NTRAIN;
  double sx[NCAND], sr[NCAND];
  ck_assert_int_eq(cm_predict(m, feats + NTRAIN, nh, sx, &D), TS_OK);
  ck_assert_int_eq(cm_predict(r, feats + NTRAIN, nh, sr, &D), TS_OK);
  double ax = cm_pairwise_accuracy(sx, costs + NTRAIN, nh);
  double ar = cm_pairwise_accuracy(sr, costs + NTRAIN, nh);
  double kx = cm_recall_at_k(sx, costs + NTRAIN, nh, 10);
  double kr = cm_recall_at_k(sr, costs + NTRAIN, nh, 10);
  printf("held-out %d: pairwise accuracy xgb %.3f random %.3f; recall@10 xgb %.2f random %.2f\n",
         nh, ax, ar, kx, kr);
  ck_assert(ax > 0.7);
  ck_assert(ax > ar + 0.1);
  ck_assert_str_eq(cm_model_name(m), "xgb");
  ck_assert_str_eq(cm_model_name(r), "random");
  cm_model_free(m);
  cm_model_free(r);
}
END_TEST

START_TEST(random_until_min_samples) {
  build_dataset();
  cm_model *m = cm_xgb_new(2, 1, &D);
  cm_sample s[49]; /* one short of the default minimum (50) */
  for (int i = 0; i < 49; i++) s[i] = (cm_sample){1, &feats[i], costs[i]};
  ck_assert_int_eq(cm_update(m, s, 49, &D), TS_OK);
  double sc[10];
  ck_assert_int_eq(cm_predict(m, feats, 10, sc, &D), TS_OK);
  for (int i = 0; i < 10; i++) ck_assert(sc[i] >= 0 && sc[i] < 1);
  ck_assert_int_eq(cm_xgb_last_rounds(m), 0);
  /* the 50th sample trains the booster */
  cm_sample one = {1, &feats[49], costs[49]};
  ck_assert_int_eq(cm_update(m, &one, 1, &D), TS_OK);
  ck_assert_int_gt(cm_xgb_last_rounds(m), 0);
  cm_model_free(m);
}
END_TEST

START_TEST(save_load_identical) {
  cm_model *m = trained();
  char path[] = "/tmp/tessel_cm_XXXXXX";
  int fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  close(fd);
  ck_assert_msg(cm_save(m, path, &D) == TS_OK, "%s", D.msg);
  cm_model *l = cm_load(path, &D);
  ck_assert_msg(l != NULL, "%s", D.msg);
  ck_assert_int_eq(cm_num_samples(l), NTRAIN);
  double a[NCAND], b[NCAND];
  ck_assert_int_eq(cm_predict(m, feats, ncand, a, &D), TS_OK);
  ck_assert_int_eq(cm_predict(l, feats, ncand, b, &D), TS_OK);
  ck_assert(!memcmp(a, b, sizeof(double) * (size_t)ncand));
  ck_assert(cm_load("/nonexistent/x", &D) == NULL);
  unlink(path);
  cm_model_free(m);
  cm_model_free(l);
}
END_TEST

START_TEST(throughput) {
  cm_model *m = trained();
  enum { N = 4000 };
  static cm_features big[N];
  static double sc[N];
  for (int i = 0; i < N; i++) big[i] = feats[i % ncand];
  double t0 = now();
  ck_assert_int_eq(cm_predict(m, big, N, sc, &D), TS_OK);
  double dt = now() - t0;
  printf("prediction: %d candidates in %.3f s = %.0f candidates/s\n", N, dt, N / dt);
  ck_assert(N / dt > 200);
  cm_model_free(m);
}
END_TEST

START_TEST(metrics) {
  double c[4] = {1, 2, 3, 4}, good[4] = {4, 3, 2, 1}, bad[4] = {1, 2, 3, 4};
  ck_assert(fabs(cm_pairwise_accuracy(good, c, 4) - 1) < 1e-12);
  ck_assert(fabs(cm_pairwise_accuracy(bad, c, 4)) < 1e-12);
  ck_assert(fabs(cm_recall_at_k(good, c, 4, 2) - 1) < 1e-12);
  ck_assert(fabs(cm_recall_at_k(bad, c, 4, 2)) < 1e-12);
  /* beyond a noise margin: costs 1 and 1.01 (and 3 and 3.02) are within 2 %,
   * so their swapped order is not counted; the 4 other pairs are right */
  double cn[4] = {1, 1.01, 3, 3.02}, sn[4] = {3, 4, 1, 2};
  ck_assert(fabs(cm_pairwise_accuracy(sn, cn, 4) - 4.0 / 6) < 1e-12);
  ck_assert(fabs(cm_pairwise_accuracy_margin(sn, cn, 4, 0.02) - 1) < 1e-12);
  ck_assert(fabs(cm_pairwise_accuracy_margin(sn, cn, 4, 0) - 4.0 / 6) < 1e-12);
  ck_assert(fabs(cm_pairwise_accuracy_margin(sn, cn, 4, 10) - 0.5) < 1e-12); /* no pair left */
}
END_TEST

int main(void) {
  Suite *s = suite_create("costmodel_xgb");
  TCase *tc = tcase_create("xgb");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, metrics);
  tcase_add_test(tc, random_until_min_samples);
  tcase_add_test(tc, beats_random);
  tcase_add_test(tc, save_load_identical);
  tcase_add_test(tc, throughput);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_set_fork_status(sr, CK_NOFORK);
  srunner_run_all(sr, CK_NORMAL);
  int failures = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failures ? 1 : 0;
}
