/* test_pretrained.c — pre-trained cost models (costmodel/xgb.c,
 * pretrained.c) and the dataset corpus (corpus.c), on synthetic feature
 * rows whose cost is a known function of two features, in three workload
 * groups: an exported model loads back with the same predictions and ranks
 * before any sample arrives; a model of another feature schema, a file that
 * is not a model and a missing file are refused with what is wrong; online
 * updates keep working on top of it; --cost-model none/FILE choices and the
 * family warning; the pairwise objective orders a monotone cost; the corpus
 * is deterministic, parses and never holds a held-out workload. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "costmodel/costmodel.h"
#include "ir/workloads/workloads.h"

#define N 240
static cm_features F[N];
static float rows[N][CM_NUM_FEATURES];
static double cost[N];
static ts_diag D;

/* Candidate i: group i % 3; cost falls with feature 3 and rises with 7. */
static void dataset(void) {
  if (F[0].rows) return;
  ts_rng r;
  ts_rng_seed(&r, 11);
  for (int i = 0; i < N; i++) {
    for (int k = 0; k < CM_NUM_FEATURES; k++) rows[i][k] = (float)ts_rng_unit(&r);
    F[i] = (cm_features){1, rows[i]};
    cost[i] = (1 + 4 * rows[i][7]) / (1 + 3 * rows[i][3]) * (1 + i % 3);
  }
}

static cm_model *trained(bool rank, int n) {
  dataset();
  cm_model *m = cm_xgb_new(1, 3, &D);
  ck_assert_ptr_nonnull(m);
  cm_xgb_set_min_samples(m, 1);
  cm_xgb_set_max_rounds(m, 40);
  cm_xgb_set_objective(m, rank);
  cm_sample s[N];
  for (int i = 0; i < n; i++) s[i] = (cm_sample){(uint64_t)(i % 3) + 1, &F[i], cost[i]};
  ck_assert_msg(cm_update(m, s, n, &D) == TS_OK, "%s", D.msg);
  return m;
}

static void tmpname(char *buf, size_t n) {
  snprintf(buf, n, "/tmp/tessel_pre_XXXXXX");
  int fd = mkstemp(buf);
  ck_assert_int_ge(fd, 0);
  close(fd);
}

/* Replaces the first occurrence of from by to in file path. */
static void edit_file(const char *path, const char *from, const char *to) {
  char *s = NULL;
  size_t len = 0;
  ck_assert_int_eq(ts_read_file_as(path, TS_FILE_TEXT, &s, &len, &D), TS_OK);
  char *p = strstr(s, from);
  ck_assert_ptr_nonnull(p);
  FILE *f = fopen(path, "wb");
  fwrite(s, 1, (size_t)(p - s), f);
  fputs(to, f);
  fputs(p + strlen(from), f);
  fclose(f);
  ts_free(s);
}

START_TEST(export_load_ranks_before_updates) {
  cm_model *m = trained(false, 180);
  char path[64];
  tmpname(path, sizeof path);
  ck_assert_msg(cm_xgb_export(m, path, "llvm x86_64 v512", 3, &D) == TS_OK, "%s", D.msg);
  cm_pretrained_info info;
  cm_model *l = cm_xgb_load_pretrained(path, 1, 9, &info, &D);
  ck_assert_msg(l != NULL, "%s", D.msg);
  ck_assert_str_eq(info.family, "llvm x86_64 v512");
  ck_assert_str_eq(info.objective, "packsum");
  ck_assert_int_eq(info.trained_records, 180);
  ck_assert_int_eq(cm_num_samples(l), 0);
  double a[N], b[N], c[N];
  ck_assert_int_eq(cm_predict(m, F, N, a, &D), TS_OK);
  ck_assert_int_eq(cm_predict(l, F, N, b, &D), TS_OK);
  ck_assert_int_eq(cm_predict(l, F, N, c, &D), TS_OK);
  for (int i = 0; i < N; i++) {
    ck_assert_msg(fabs(a[i] - b[i]) < 1e-5, "candidate %d: %g saved, %g loaded", i, a[i], b[i]);
    ck_assert(b[i] == c[i]); /* the pre-trained model, not random scores */
  }
  /* online updates add to it: a held-out group still ranked better than chance */
  cm_xgb_set_min_samples(l, 10); /* the default, 50, waits for more */
  cm_sample s[30];
  for (int i = 0; i < 30; i++) s[i] = (cm_sample){(uint64_t)(i % 3) + 1, &F[180 + i], cost[180 + i]};
  ck_assert_msg(cm_update(l, s, 30, &D) == TS_OK, "%s", D.msg);
  ck_assert_int_eq(cm_num_samples(l), 30);
  ck_assert_int_gt(cm_xgb_last_rounds(l), 0);
  double h[30], hc[30];
  ck_assert_int_eq(cm_predict(l, F + 210, 30, h, &D), TS_OK);
  for (int i = 0; i < 30; i++) hc[i] = cost[210 + i] / (1 + (210 + i) % 3);
  ck_assert(cm_pairwise_accuracy(h, hc, 30) > 0.6);
  cm_model_free(m);
  cm_model_free(l);
  unlink(path);
}
END_TEST

START_TEST(refusals) {
  cm_model *m = trained(false, 60);
  char path[64];
  tmpname(path, sizeof path);
  ck_assert_int_eq(cm_xgb_export(m, path, "llvm x86_64 v512", 3, &D), TS_OK);
  char want[64], other[64];
  snprintf(want, sizeof want, "\"tessel_feature_schema\":\"%d\"", CM_FEATURE_SCHEMA);
  snprintf(other, sizeof other, "\"tessel_feature_schema\":\"%d\"", CM_FEATURE_SCHEMA + 1);
  edit_file(path, want, other);
  ts_diag_clear(&D);
  ck_assert_ptr_null(cm_xgb_load_pretrained(path, 1, 1, NULL, &D));
  ck_assert_int_eq(D.code, TS_EINVAL);
  ck_assert_msg(strstr(D.msg, "feature schema") && strstr(D.msg, path), "%s", D.msg);
  /* not a model */
  FILE *f = fopen(path, "w");
  fputs("{\"hello\": 1}", f);
  fclose(f);
  ts_diag_clear(&D);
  ck_assert_ptr_null(cm_xgb_load_pretrained(path, 1, 1, NULL, &D));
  ck_assert_int_eq(D.code, TS_EPARSE);
  ck_assert_msg(strstr(D.msg, "not an XGBoost model") && !strchr(D.msg, '\n'), "%s", D.msg);
  ts_diag_clear(&D);
  ck_assert_ptr_null(cm_xgb_load_pretrained("/nonexistent/m.json", 1, 1, NULL, &D));
  ck_assert_int_ne(D.code, TS_OK);
  /* an untrained model cannot be exported */
  cm_model *u = cm_xgb_new(1, 1, &D);
  ck_assert_int_eq(cm_xgb_export(u, path, "x", 0, &D), TS_EINVAL);
  cm_model_free(u);
  cm_model_free(m);
  unlink(path);
}
END_TEST

START_TEST(open_choices) {
  cm_model *m = trained(false, 60);
  char path[64], wpath[64];
  tmpname(path, sizeof path);
  tmpname(wpath, sizeof wpath);
  ck_assert_int_eq(cm_xgb_export(m, path, "llvm riscv64 v0", 3, &D), TS_OK);
  cg_target t;
  ck_assert_int_eq(cg_target_parse("llvm -mtriple=x86_64-linux-gnu -mattr=+avx512f", &t, &D), TS_OK);
  t.vector_bits = 512;
  char fam[96];
  cm_target_family(&t, fam, sizeof fam);
  ck_assert_str_eq(fam, "llvm x86_64 v512");
  cm_model *o = (cm_model *)1;
  ck_assert_int_eq(cm_pretrained_open("none", &t, 1, NULL, &o, &D), TS_OK);
  ck_assert_ptr_null(o);
  /* a named file of another family: loaded, with a warning */
  FILE *w = fopen(wpath, "w");
  ck_assert_int_eq(cm_pretrained_open(path, &t, 1, w, &o, &D), TS_OK);
  fclose(w);
  ck_assert_ptr_nonnull(o);
  char *txt = NULL;
  size_t len;
  ck_assert_int_eq(ts_read_file_as(wpath, TS_FILE_TEXT, &txt, &len, &D), TS_OK);
  ck_assert_msg(strstr(txt, "llvm riscv64 v0") && strstr(txt, "llvm x86_64 v512"), "%s", txt);
  ts_free(txt);
  cm_model_free(o);
  /* a named file that is missing is an error */
  ck_assert_int_ne(cm_pretrained_open("/nonexistent/m.json", &t, 1, NULL, &o, &D), TS_OK);
  ck_assert_ptr_null(o);
  cm_model_free(m);
  unlink(path);
  unlink(wpath);
}
END_TEST

/* The committed model (costmodel/pretrained/default.json) loads with this
 * tessel's feature schema: changing the features without retraining it
 * (costmodel/pretrained/make.sh) fails here. */
START_TEST(committed_default) {
  dataset();
  cm_pretrained_info info;
  ts_diag_clear(&D);
  cm_model *m = cm_xgb_load_pretrained(cm_pretrained_default_path(), 1, 1, &info, &D);
  ck_assert_msg(m != NULL, "%s", D.msg);
  ck_assert_str_eq(info.objective, "rank");
  ck_assert_msg(!strncmp(info.family, "llvm x86_64 v", 13), "family %s", info.family);
  ck_assert_int_gt(info.trained_records, 1000);
  double s[8];
  ck_assert_int_eq(cm_predict(m, F, 8, s, &D), TS_OK);
  for (int i = 0; i < 8; i++) ck_assert(isfinite(s[i]));
  cm_model_free(m);
  cg_target t;
  ck_assert_int_eq(cg_target_parse("llvm -mtriple=x86_64-linux-gnu -mattr=+avx2", &t, &D), TS_OK);
  t.vector_bits = 256;
  cm_model *o = NULL;
  ck_assert_int_eq(cm_pretrained_open("default", &t, 1, NULL, &o, &D), TS_OK);
  ck_assert_ptr_nonnull(o);
  cm_model_free(o);
}
END_TEST

START_TEST(rank_objective_orders) {
  cm_model *m = trained(true, 180);
  double s[60], c[60];
  ck_assert_int_eq(cm_predict(m, F + 180, 60, s, &D), TS_OK);
  for (int i = 0; i < 60; i++) c[i] = cost[180 + i] / (1 + (180 + i) % 3);
  double acc = cm_pairwise_accuracy(s, c, 60);
  printf("rank objective: held-out pairwise accuracy %.3f\n", acc);
  ck_assert(acc > 0.75);
  cm_model_free(m);
}
END_TEST

START_TEST(corpus) {
  char a[512], b[512];
  int nfixed = cm_corpus_fixed_count();
  ck_assert_int_gt(nfixed, 20);
  ck_assert_int_eq(cm_corpus_heldout_count(), 3);
  for (int i = 0; i < nfixed + 200; i++) {
    cm_corpus_spec(1, i, a, sizeof a);
    cm_corpus_spec(1, i, b, sizeof b);
    ck_assert_str_eq(a, b);
    ir_wl_inst w;
    ck_assert_msg(ir_wl_parse(a, &w, &D) == TS_OK, "%s: %s", a, D.msg);
    char ca[512];
    ir_wl_canonical(&w, ca, sizeof ca);
    for (int h = 0; h < cm_corpus_heldout_count(); h++) {
      ir_wl_inst hw;
      char ch[512];
      ck_assert_int_eq(ir_wl_parse(cm_corpus_heldout(h), &hw, &D), TS_OK);
      ir_wl_canonical(&hw, ch, sizeof ch);
      ck_assert_msg(strcmp(ca, ch), "corpus spec %d is held-out %s", i, ch);
    }
  }
  /* another seed, other random workloads; the fixed part is shared */
  cm_corpus_spec(1, nfixed + 3, a, sizeof a);
  cm_corpus_spec(2, nfixed + 3, b, sizeof b);
  ck_assert_str_ne(a, b);
  cm_corpus_spec(2, 0, b, sizeof b);
  cm_corpus_spec(1, 0, a, sizeof a);
  ck_assert_str_eq(a, b);
}
END_TEST

int main(void) {
  Suite *s = suite_create("costmodel_pretrained");
  TCase *tc = tcase_create("pretrained");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, export_load_ranks_before_updates);
  tcase_add_test(tc, refusals);
  tcase_add_test(tc, open_choices);
  tcase_add_test(tc, rank_objective_orders);
  tcase_add_test(tc, committed_default);
  tcase_add_test(tc, corpus);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_set_fork_status(sr, CK_NOFORK);
  srunner_run_all(sr, CK_NORMAL);
  int nf = srunner_ntests_failed(sr);
  srunner_free(sr);
  return nf ? 1 : 0;
}
