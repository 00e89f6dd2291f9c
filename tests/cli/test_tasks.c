/* test_tasks.c — `tessel tasks` and `tessel graph show --after` as a user
 * drives them, on the generated models (MODELS_DIR): the JSON contract
 * {tasks: [{name, key, weight, flops}]}, keys that equal the workload key
 * `tessel show` reports for the dumped task (the key `tessel tune` logs),
 * --sym changing the bound sizes, and bad input giving exit status 2 with a
 * message naming the problem. argv[1] is the tessel binary. */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/run.h"

static const char *tessel;
static char tmpdir[256];
static const char *models;

/* Runs `tessel ARGS`, output captured under tmpdir. */
static tr_result run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static tr_result run(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  tr_result r = tr_vrun(tmpdir, tessel, fmt, ap);
  va_end(ap);
  return r;
}

static json_t *tasks_json(const char *model, const char *extra) {
  tr_result r = run("tasks '%s/%s.onnx' --json %s", models, model, extra);
  ck_assert_msg(r.status == 0, "tessel tasks %s: %s", model, r.err);
  json_error_t e;
  json_t *j = json_loads(r.out, 0, &e);
  ck_assert_msg(j != NULL, "not JSON: %s", e.text);
  tr_result_free(&r);
  return j;
}

START_TEST(test_tasks_json_and_keys) {
  static const char *const names[] = {"mlp", "cnn", "transformer"};
  for (int m = 0; m < 3; m++) {
    char dump[400], extra[500];
    snprintf(dump, sizeof dump, "%s/dump_%s", tmpdir, names[m]);
    snprintf(extra, sizeof extra, "--dump '%s'", dump);
    json_t *j = tasks_json(names[m], extra);
    json_t *tasks = json_object_get(j, "tasks");
    ck_assert(json_is_array(tasks));
    ck_assert_int_gt(json_array_size(tasks), 1);
    int calls = 0;
    for (size_t i = 0; i < json_array_size(tasks); i++) {
      json_t *t = json_array_get(tasks, i);
      const char *name = json_string_value(json_object_get(t, "name"));
      const char *key = json_string_value(json_object_get(t, "key"));
      ck_assert_ptr_nonnull(name);
      ck_assert_ptr_nonnull(key);
      ck_assert_int_eq(strlen(key), 16);
      ck_assert(json_integer_value(json_object_get(t, "weight")) >= 1);
      ck_assert(json_number_value(json_object_get(t, "flops")) > 0);
      calls += (int)json_integer_value(json_object_get(t, "weight"));
      /* the dumped function's workload key, as `tessel show` (and so `tessel tune`) computes it */
      tr_result r = run("show '%s/%s.tsl' --json", dump, name);
      ck_assert_msg(r.status == 0, "show %s: %s", name, r.err);
      json_t *s = json_loads(r.out, 0, NULL);
      ck_assert_ptr_nonnull(s);
      ck_assert_str_eq(json_string_value(json_object_get(s, "workload_key")), key);
      json_decref(s);
      tr_result_free(&r);
    }
    ck_assert_int_eq(json_integer_value(json_object_get(j, "calls")), calls);
    json_decref(j);
  }
}
END_TEST

START_TEST(test_tasks_sym) {
  json_t *a = tasks_json("transformer", ""), *b = tasks_json("transformer", "--sym batch=4");
  json_t *ta = json_object_get(a, "tasks"), *tb = json_object_get(b, "tasks");
  ck_assert_int_eq(json_array_size(ta), json_array_size(tb));
  /* every task depends on the batch: new keys, four times the FLOPs */
  for (size_t i = 0; i < json_array_size(ta); i++) {
    json_t *x = json_array_get(ta, i), *y = json_array_get(tb, i);
    ck_assert_str_ne(json_string_value(json_object_get(x, "key")), json_string_value(json_object_get(y, "key")));
    double fx = json_number_value(json_object_get(x, "flops")), fy = json_number_value(json_object_get(y, "flops"));
    ck_assert_msg(fy > 3.9 * fx && fy < 4.1 * fx, "task %zu: %g vs %g", i, fx, fy);
  }
  json_decref(a);
  json_decref(b);
}
END_TEST

START_TEST(test_graph_show_after) {
  tr_result r = run("graph show '%s/cnn.onnx' --after fuse", models);
  ck_assert_msg(r.status == 0, "%s", r.err);
  ck_assert_ptr_nonnull(strstr(r.out, "call @fused_conv2d"));
  ck_assert_ptr_null(strstr(r.out, "= BatchNormalization("));
  tr_result_free(&r);
  r = run("graph show '%s/cnn.onnx' --after legalize", models);
  ck_assert_int_eq(r.status, 0);
  ck_assert_ptr_null(strstr(r.out, "fused_"));
  ck_assert_ptr_nonnull(strstr(r.out, "call @conv2d_"));
  tr_result_free(&r);
}
END_TEST

/* --winograd off and --polyphase off change cnn's kernels with plain NCHW
 * convolutions (--conv-layout nchw), so its task keys; the default nchwc
 * layout makes conv2d_nchwc tasks; graph show --after takes the same
 * switches; a bad value is exit 2. */
START_TEST(test_tasks_graph_switches) {
  tr_result a = run("tasks '%s/cnn.onnx' --conv-layout nchw", models),
            b = run("tasks '%s/cnn.onnx' --winograd off --conv-layout nchw", models),
            c = run("tasks '%s/cnn.onnx' --polyphase off --winograd on --conv-layout nchw", models),
            e = run("tasks '%s/cnn.onnx'", models);
  ck_assert_int_eq(e.status, 0);
  ck_assert_ptr_nonnull(strstr(e.out, "conv2d_nchwc"));
  ck_assert_ptr_null(strstr(a.out, "conv2d_nchwc"));
  tr_result_free(&e);
  ck_assert_int_eq(a.status, 0);
  ck_assert_int_eq(b.status, 0);
  ck_assert_int_eq(c.status, 0);
  ck_assert_ptr_nonnull(strstr(a.out, "conv2d_winograd"));
  ck_assert_ptr_null(strstr(b.out, "conv2d_winograd"));
  ck_assert_str_ne(a.out, c.out);
  tr_result_free(&a);
  tr_result_free(&b);
  tr_result_free(&c);
  a = run("graph show '%s/cnn.onnx' --after legalize --winograd off", models);
  ck_assert_int_eq(a.status, 0);
  ck_assert_ptr_null(strstr(a.out, "winograd"));
  tr_result_free(&a);
  a = run("tasks '%s/cnn.onnx' --winograd maybe", models);
  ck_assert_int_eq(a.status, 2);
  ck_assert_msg(strstr(a.err, "--winograd: 'maybe' is not on, off or all"), "%s", a.err);
  tr_result_free(&a);
  a = run("tasks '%s/cnn.onnx' --conv-layout nhwc", models);
  ck_assert_int_eq(a.status, 2);
  ck_assert_msg(strstr(a.err, "--conv-layout: 'nhwc' is not nchw, nchwc or nchwc<B>"), "%s", a.err);
  tr_result_free(&a);
  a = run("build '%s/cnn.onnx' -o x.so --polyphase sometimes", models);
  ck_assert_int_eq(a.status, 2);
  ck_assert_msg(strstr(a.err, "--polyphase"), "%s", a.err);
  tr_result_free(&a);
}
END_TEST

START_TEST(test_tasks_bad_input) {
  tr_result r = run("tasks '%s/transformer.onnx' --sym nosuch=3", models);
  ck_assert_int_eq(r.status, 2);
  ck_assert_ptr_nonnull(strstr(r.err, "nosuch"));
  tr_result_free(&r);
  r = run("tasks '%s/transformer.onnx' --sym batch=0", models);
  ck_assert_int_eq(r.status, 2);
  ck_assert_ptr_nonnull(strstr(r.err, "--sym"));
  tr_result_free(&r);
  r = run("tasks '%s/missing.onnx'", tmpdir);
  ck_assert_int_eq(r.status, 2);
  ck_assert_ptr_nonnull(strstr(r.err, "missing.onnx"));
  tr_result_free(&r);
  r = run("tasks");
  ck_assert_int_eq(r.status, 2);
  tr_result_free(&r);
  r = run("tasks --help");
  ck_assert_int_eq(r.status, 0);
  ck_assert_ptr_nonnull(strstr(r.out, "--json"));
  tr_result_free(&r);
}
END_TEST

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: test_tasks PATH/TO/tessel\n");
    return 2;
  }
  tessel = argv[1];
  models = getenv("MODELS_DIR");
  char probe[600];
  snprintf(probe, sizeof probe, "%s/cnn.onnx", models ? models : "");
  if (!models || access(probe, R_OK) != 0) {
    fprintf(stderr, "test_tasks: MODELS_DIR has no generated models (run scripts/setup.sh)\n");
    return 1;
  }
  snprintf(tmpdir, sizeof tmpdir, "/tmp/tessel-tasks-cli-XXXXXX");
  if (!mkdtemp(tmpdir)) return 2;
  Suite *s = suite_create("tasks_cli");
  TCase *tc = tcase_create("tasks");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_tasks_json_and_keys);
  tcase_add_test(tc, test_tasks_sym);
  tcase_add_test(tc, test_graph_show_after);
  tcase_add_test(tc, test_tasks_graph_switches);
  tcase_add_test(tc, test_tasks_bad_input);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failures = srunner_ntests_failed(sr);
  srunner_free(sr);
  tr_rmtree(tmpdir);
  return failures ? 1 : 0;
}
