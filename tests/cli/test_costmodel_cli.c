/* test_costmodel_cli.c — `tessel costmodel train|eval|dataset` and `tessel
 * tune --cost-model` as a user drives them, on the real tuning logs in
 * tests/fixtures: train writes an XGBoost JSON model carrying the feature
 * schema and target family; eval --cost-model ranks with it without
 * training (trained_records 0, the file named); --split workloads never
 * scores a workload it trained on; a model of another schema and bad values
 * are refused with exit status 2 and a message naming the problem; eval's
 * --seeds, --noise, --extra, --drop-features, --per-workload and
 * --dump-features; dataset
 * lists a deterministic corpus without the held-out workloads (also in
 * --order small-first), measures through the tuner into a log, and resumes.
 * argv[1] is the tessel binary. */
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/run.h"

#include "costmodel/costmodel.h"
#define CM_SCHEMA CM_FEATURE_SCHEMA
#define CM_NFEAT CM_NUM_FEATURES

static const char *tessel;
static char tmpdir[256];
static char fx_mm[600], fx_sm[600];

static tr_result run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static tr_result run(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  tr_result r = tr_vrun(tmpdir, tessel, fmt, ap);
  va_end(ap);
  return r;
}

static json_t *run_json(const char *what, tr_result r) {
  ck_assert_msg(r.status == 0, "%s: exit %d: %s", what, r.status, r.err);
  json_error_t e;
  json_t *j = json_loads(r.out, 0, &e);
  ck_assert_msg(j != NULL, "%s: not JSON (%s): %s", what, e.text, r.out);
  tr_result_free(&r);
  return j;
}

static double num(json_t *j, const char *k) { return json_number_value(json_object_get(j, k)); }

START_TEST(test_train_and_eval_with_model) {
  json_t *t = run_json("train", run("costmodel train '%s' -o '%s/m.json' --max-rounds 30 --json", fx_sm, tmpdir));
  ck_assert_int_eq(json_integer_value(json_object_get(t, "trained_records")),
                   json_integer_value(json_object_get(t, "records")));
  ck_assert_int_eq(json_integer_value(json_object_get(t, "workloads")), 1);
  ck_assert_str_eq(json_string_value(json_object_get(t, "objective")), "packsum");
  const char *fam = json_string_value(json_object_get(t, "family"));
  ck_assert_msg(fam && !strncmp(fam, "llvm ", 5), "family %s", fam);
  json_decref(t);
  /* XGBoost's own JSON, with the schema and family as attributes */
  char path[400];
  snprintf(path, sizeof path, "%s/m.json", tmpdir);
  json_t *m = json_load_file(path, 0, NULL);
  ck_assert_ptr_nonnull(m);
  json_t *attrs = json_object_get(json_object_get(m, "learner"), "attributes");
  ck_assert_ptr_nonnull(json_object_get(attrs, "tessel_feature_schema"));
  ck_assert_ptr_nonnull(json_object_get(attrs, "tessel_target_family"));
  json_decref(m);
  /* --max-depth 2: every tree has at most 7 nodes */
  json_decref(run_json("train depth 2",
                       run("costmodel train '%s' -o '%s/d2.json' --max-rounds 10 --max-depth 2 --objective rank --json",
                           fx_sm, tmpdir)));
  char d2[400];
  snprintf(d2, sizeof d2, "%s/d2.json", tmpdir);
  json_t *md = json_load_file(d2, 0, NULL);
  ck_assert_ptr_nonnull(md);
  json_t *trees = json_object_get(json_object_get(json_object_get(json_object_get(md, "learner"), "gradient_booster"),
                                                  "model"), "trees");
  ck_assert_int_gt(json_array_size(trees), 0);
  for (size_t i = 0; i < json_array_size(trees); i++) {
    const char *nn = json_string_value(json_object_get(json_object_get(json_array_get(trees, i), "tree_param"),
                                                       "num_nodes"));
    ck_assert_msg(nn && atoi(nn) >= 1 && atoi(nn) <= 7, "tree %zu has %s nodes", i, nn ? nn : "?");
  }
  json_decref(md);
  json_t *e = run_json("eval --cost-model", run("costmodel eval '%s' --cost-model '%s' --json", fx_mm, path));
  ck_assert_int_eq(json_integer_value(json_object_get(e, "trained_records")), 0);
  ck_assert_str_eq(json_string_value(json_object_get(e, "model")), path);
  ck_assert(num(e, "pairwise_accuracy") >= 0 && num(e, "pairwise_accuracy") <= 1);
  ck_assert(num(e, "recall_at_30") >= 0 && num(e, "recall_at_30") <= 1);
  ck_assert_int_gt(json_integer_value(json_object_get(e, "scored")), 30);
  json_decref(e);
  /* tune starts from it */
  tr_ok(run("tune softmax:m=8,n=16 --trials 3 --batch 2 --log '%s/t.json' --cost-model '%s' --threads 1",
            tmpdir, path),
        "tune --cost-model FILE");
  tr_ok(run("tune softmax:m=8,n=16 --trials 3 --batch 2 --log '%s/t2.json' --cost-model none --threads 1", tmpdir),
        "tune --cost-model none");
  /* another feature schema is refused, by eval and by tune */
  tr_result r = tr_sh(tmpdir, "cp '%s' '%s/old.json' && sed -i 's/\"tessel_feature_schema\":\"[0-9]*\"/"
                              "\"tessel_feature_schema\":\"999\"/' '%s/old.json'", path, tmpdir, tmpdir);
  tr_ok(r, "sed");
  r = run("costmodel eval '%s' --cost-model '%s/old.json'", fx_mm, tmpdir);
  ck_assert_int_eq(r.status, 2);
  ck_assert_msg(strstr(r.err, "feature schema 999"), "%s", r.err);
  tr_result_free(&r);
  /* the schema-1 models of before group 6 name both versions */
  r = tr_sh(tmpdir, "sed -i 's/\"tessel_feature_schema\":\"999\"/\"tessel_feature_schema\":\"1\"/' '%s/old.json'",
            tmpdir);
  tr_ok(r, "sed");
  r = run("costmodel eval '%s' --cost-model '%s/old.json'", fx_mm, tmpdir);
  ck_assert_int_eq(r.status, 2);
  char want[64];
  snprintf(want, sizeof want, "feature schema 1, but this tessel extracts schema %d", CM_SCHEMA);
  ck_assert_msg(strstr(r.err, want) && strstr(r.err, "costmodel train"), "%s", r.err);
  tr_result_free(&r);
  r = run("tune softmax:m=8,n=16 --trials 2 --log '%s/t3.json' --cost-model '%s/old.json'", tmpdir, tmpdir);
  ck_assert_int_ne(r.status, 0);
  ck_assert_msg(strstr(r.err, "feature schema"), "%s", r.err);
  tr_result_free(&r);
}
END_TEST

START_TEST(test_eval_modes) {
  json_t *a = run_json("eval records", run("costmodel eval '%s' '%s' --json --max-rounds 30", fx_mm, fx_sm));
  ck_assert_str_eq(json_string_value(json_object_get(a, "split")), "records");
  ck_assert_int_eq(json_integer_value(json_object_get(a, "heldout_workloads")), 2);
  int used = (int)json_integer_value(json_object_get(a, "used"));
  json_decref(a);
  /* leave workloads out: one trained on, the other scored, whole */
  json_t *b = run_json("eval workloads",
                       run("costmodel eval '%s' '%s' --split workloads --train-frac 0.5 --json --max-rounds 30",
                           fx_mm, fx_sm));
  ck_assert_int_eq(json_integer_value(json_object_get(b, "heldout_workloads")), 1);
  int train = (int)json_integer_value(json_object_get(b, "train"));
  ck_assert_int_gt(train, 0);
  ck_assert_int_lt(train, used);
  ck_assert_int_eq(json_integer_value(json_object_get(b, "trained_records")), train);
  json_decref(b);
  json_t *c = run_json("eval rank", run("costmodel eval '%s' --objective rank --json --max-rounds 20", fx_sm));
  ck_assert_str_eq(json_string_value(json_object_get(c, "objective")), "rank");
  json_decref(c);
  tr_result r = run("costmodel eval '%s' --split nope", fx_sm);
  ck_assert_int_eq(r.status, 2);
  ck_assert_msg(strstr(r.err, "--split") && strstr(r.err, "workloads"), "%s", r.err);
  tr_result_free(&r);
  r = run("costmodel train '%s'", fx_sm);
  ck_assert_int_eq(r.status, 2);
  ck_assert_msg(strstr(r.err, "-o MODEL"), "%s", r.err);
  tr_result_free(&r);
  r = run("costmodel eval '%s' --cost-model '%s/missing.json'", fx_sm, tmpdir);
  ck_assert_int_eq(r.status, 2);
  ck_assert_msg(strstr(r.err, "missing.json"), "%s", r.err);
  tr_result_free(&r);
}
END_TEST

/* The JSON object on line i (0-based) of out. */
static json_t *json_line(const char *out, int i) {
  const char *p = out;
  for (int k = 0; k < i && p; k++) {
    p = strchr(p, '\n');
    if (p) p++;
  }
  ck_assert_msg(p && *p, "no line %d in %s", i, out);
  json_error_t e;
  json_t *j = json_loadb(p, strcspn(p, "\n"), 0, &e);
  ck_assert_msg(j != NULL, "line %d not JSON (%s): %s", i, e.text, out);
  return j;
}

START_TEST(test_eval_options) {
  /* --seeds 2: one line per seed, then their mean */
  tr_result r = run("costmodel eval '%s' '%s' --split workloads --train-frac 0.5 --seeds 2 --max-rounds 10 --json",
                    fx_mm, fx_sm);
  ck_assert_msg(r.status == 0, "%s", r.err);
  json_t *s1 = json_line(r.out, 0), *s2 = json_line(r.out, 1), *mean = json_line(r.out, 2);
  ck_assert_int_eq(json_integer_value(json_object_get(s1, "seed")), 1);
  ck_assert_int_eq(json_integer_value(json_object_get(s2, "seed")), 2);
  ck_assert_int_eq(json_integer_value(json_object_get(mean, "mean_of_seeds")), 2);
  ck_assert(fabs(num(mean, "pairwise_accuracy") - (num(s1, "pairwise_accuracy") + num(s2, "pairwise_accuracy")) / 2) <
            1e-3);
  ck_assert(num(s1, "pairwise_accuracy_beyond_noise") >= 0 && num(s1, "pairwise_accuracy_beyond_noise") <= 1);
  json_decref(s1);
  json_decref(s2);
  json_decref(mean);
  tr_result_free(&r);
  /* --noise 0 counts the same pairs as pairwise_accuracy */
  json_t *n = run_json("noise 0", run("costmodel eval '%s' --noise 0 --max-rounds 10 --json", fx_sm));
  ck_assert(fabs(num(n, "pairwise_accuracy") - num(n, "pairwise_accuracy_beyond_noise")) < 1e-9);
  json_decref(n);
  /* --extra: its records train, only the main log's workload is scored */
  json_t *a = run_json("records", run("costmodel eval '%s' --max-rounds 10 --json", fx_mm));
  json_t *x = run_json("extra", run("costmodel eval '%s' --extra '%s' --max-rounds 10 --json", fx_mm, fx_sm));
  ck_assert_int_eq(json_integer_value(json_object_get(x, "heldout_workloads")), 1);
  ck_assert_int_eq(json_integer_value(json_object_get(x, "heldout")), json_integer_value(json_object_get(a, "heldout")));
  ck_assert_int_gt(json_integer_value(json_object_get(x, "train")), json_integer_value(json_object_get(a, "train")));
  json_decref(a);
  json_decref(x);
  /* every feature dropped: a row's margin is one constant, so a candidate's
   * (pack-sum) score is a function of its row count only: the ranking
   * changes, the random model's does not */
  char all[32];
  snprintf(all, sizeof all, "0-%d", CM_NFEAT - 1);
  json_t *y = run_json("drop none", run("costmodel eval '%s' --max-rounds 10 --json", fx_sm));
  json_t *z = run_json("drop all", run("costmodel eval '%s' --drop-features %s --max-rounds 10 --json", fx_sm, all));
  ck_assert(fabs(num(z, "pairwise_accuracy") - num(y, "pairwise_accuracy")) > 1e-6);
  ck_assert(fabs(num(json_object_get(z, "random"), "pairwise_accuracy") -
                 num(json_object_get(y, "random"), "pairwise_accuracy")) < 1e-12);
  json_decref(y);
  json_decref(z);
  r = run("costmodel eval '%s' --drop-features 5-x", fx_sm);
  ck_assert_int_eq(r.status, 2);
  ck_assert_msg(strstr(r.err, "--drop-features") && strstr(r.err, "5-x"), "%s", r.err);
  tr_result_free(&r);
  r = run("costmodel eval '%s' --per-workload --max-rounds 10", fx_sm);
  ck_assert_msg(r.status == 0 && strstr(r.out, "softmax") && strstr(r.out, "slowest/fastest"), "%s %s", r.out, r.err);
  tr_result_free(&r);
  /* --dump-features: one tab-separated line per feature row, workload,
   * record, cost, row, then every feature, after --drop-features */
  char dump[400];
  snprintf(dump, sizeof dump, "%s/feats.tsv", tmpdir);
  r = run("costmodel eval '%s' --drop-features 1-2 --max-rounds 3 --dump-features '%s'", fx_sm, dump);
  ck_assert_msg(r.status == 0, "%s", r.err);
  tr_result_free(&r);
  FILE *f = fopen(dump, "r");
  ck_assert_ptr_nonnull(f);
  static char line[65536];
  int lines = 0, first_rows = 0;
  while (fgets(line, sizeof line, f)) {
    int fields = 1;
    for (const char *c = line; *c; c++) fields += *c == '\t';
    ck_assert_int_eq(fields, 4 + CM_NFEAT);
    int wl, rec, row;
    double cost, f0, f1, f2;
    ck_assert_int_eq(sscanf(line, "%d\t%d\t%lf\t%d\t%lf\t%lf\t%lf", &wl, &rec, &cost, &row, &f0, &f1, &f2), 7);
    ck_assert(wl == 0 && rec >= 0 && cost > 0 && row >= 0);
    ck_assert(f1 == 0 && f2 == 0); /* dropped */
    first_rows += row == 0;
    lines++;
  }
  fclose(f);
  ck_assert_int_gt(first_rows, 10); /* one per record of the softmax log */
  ck_assert_int_ge(lines, first_rows);
  r = run("costmodel eval '%s' --max-rounds 3 --dump-features '%s/no/such/dir/f.tsv'", fx_sm, tmpdir);
  ck_assert_int_eq(r.status, 2);
  ck_assert_msg(strstr(r.err, "--dump-features") && strstr(r.err, "no/such/dir"), "%s", r.err);
  tr_result_free(&r);
}
END_TEST

START_TEST(test_dataset) {
  tr_result l1 = run("costmodel dataset --list --workloads 60"), l2 = run("costmodel dataset --list --workloads 60");
  ck_assert_int_eq(l1.status, 0);
  ck_assert_str_eq(l1.out, l2.out);
  tr_result h = run("costmodel dataset --list --heldout");
  ck_assert_int_eq(h.status, 0);
  for (char *line = strtok(h.out, "\n"); line; line = strtok(NULL, "\n")) {
    char needle[300];
    snprintf(needle, sizeof needle, "%s\n", line);
    ck_assert_msg(!strstr(l1.out, needle), "held-out %s is in the corpus", line);
  }
  /* small-first: the same workloads, another order, families in turn */
  tr_result l3 = run("costmodel dataset --list --workloads 60 --order small-first");
  ck_assert_int_eq(l3.status, 0);
  ck_assert_str_ne(l1.out, l3.out);
  ck_assert_int_eq(strlen(l1.out), strlen(l3.out));
  for (char *line = strtok(l3.out, "\n"); line; line = strtok(NULL, "\n")) {
    char needle[300];
    snprintf(needle, sizeof needle, "%s\n", line);
    ck_assert_msg(strstr(l1.out, needle), "%s is not in the corpus order", line);
  }
  tr_result_free(&l3);
  tr_result r0 = run("costmodel dataset --list --order largest");
  ck_assert_int_eq(r0.status, 2);
  ck_assert_msg(strstr(r0.err, "--order") && strstr(r0.err, "small-first"), "%s", r0.err);
  tr_result_free(&r0);
  tr_result_free(&l1);
  tr_result_free(&l2);
  tr_result_free(&h);
  /* one workload, two trials, through the tuner; a rerun measures nothing */
  tr_result r = run("costmodel dataset --log '%s/ds.json' --workloads 1 --trials 2 --batch 2 --threads 1", tmpdir);
  ck_assert_msg(r.status == 0, "%s", r.err);
  ck_assert_msg(strstr(r.out, "2 new trials"), "%s", r.out);
  tr_result_free(&r);
  char log[400];
  snprintf(log, sizeof log, "%s/ds.json", tmpdir);
  ck_assert_int_eq(tr_count_lines(log), 2);
  r = run("costmodel dataset --log '%s/ds.json' --workloads 1 --trials 2 --batch 2 --threads 1", tmpdir);
  ck_assert_msg(r.status == 0 && strstr(r.out, "0 new trials"), "%s %s", r.out, r.err);
  tr_result_free(&r);
  ck_assert_int_eq(tr_count_lines(log), 2);
  r = run("costmodel dataset --log '%s/ds.json' --trials 2 --workloads 0", tmpdir);
  ck_assert_int_eq(r.status, 2);
  ck_assert_msg(strstr(r.err, "--workloads"), "%s", r.err);
  tr_result_free(&r);
}
END_TEST

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: test_costmodel_cli PATH/TO/tessel\n");
    return 2;
  }
  tessel = argv[1];
  const char *root = getenv("TESSEL_SOURCE_ROOT");
  if (!root) {
    fprintf(stderr, "test_costmodel_cli: TESSEL_SOURCE_ROOT is not set (run it through meson test)\n");
    return 1;
  }
  snprintf(fx_mm, sizeof fx_mm, "%s/tests/fixtures/tune_matmul_256x333x257.jsonl", root);
  snprintf(fx_sm, sizeof fx_sm, "%s/tests/fixtures/tune_softmax_1024.jsonl", root);
  snprintf(tmpdir, sizeof tmpdir, "/tmp/tessel-cm-cli-XXXXXX");
  if (!mkdtemp(tmpdir)) return 2;
  Suite *s = suite_create("costmodel_cli");
  TCase *tc = tcase_create("costmodel");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, test_train_and_eval_with_model);
  tcase_add_test(tc, test_eval_modes);
  tcase_add_test(tc, test_eval_options);
  tcase_add_test(tc, test_dataset);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failures = srunner_ntests_failed(sr);
  srunner_free(sr);
  tr_rmtree(tmpdir);
  return failures ? 1 : 0;
}
