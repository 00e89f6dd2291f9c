/* test_graph_cli.c — `tessel graph show` as a user drives it, on the
 * generated models (MODELS_DIR): the text form (header, constants, a node
 * line with attributes and type, return), the JSON form (counts, shapes,
 * the symbolic batch), a refused model (exit 1, the message names node, op
 * and opset) and bad usage (exit 2). argv[1] is the tessel binary. */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/run.h"

static const char *tessel, *models;
static char tmpdir[256];

/* Runs `tessel ARGS`, output captured under tmpdir. */
static tr_result run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static tr_result run(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  tr_result r = tr_vrun(tmpdir, tessel, fmt, ap);
  va_end(ap);
  return r;
}

START_TEST(test_text) {
  tr_result r = run("graph show '%s/cnn.onnx'", models);
  ck_assert_msg(r.status == 0, "%s", r.err);
  ck_assert_ptr_nonnull(strstr(r.out, "graph @cnn(%x: f32[1,3,32,32]) opset 13 {\n"));
  ck_assert_ptr_nonnull(strstr(r.out, " = const f32[16,3,3,3] ["));
  ck_assert_ptr_nonnull(strstr(r.out, "(432 elements)]"));
  ck_assert_msg(strstr(r.out, " = Conv(%x, ") && strstr(r.out, "{kernel_shape=[3,3], pads=[1,1,1,1], strides=[1,1], dilations=[1,1], auto_pad=\"NOTSET\", group=1} : f32[1,16,32,32]\n"), "%s", r.out);
  ck_assert_ptr_nonnull(strstr(r.out, " = MaxPool("));
  ck_assert_ptr_nonnull(strstr(r.out, "  %y = Gemm("));
  ck_assert_ptr_nonnull(strstr(r.out, "  return %y\n}\n"));
  tr_result_free(&r);
  r = run("graph show '%s/transformer.onnx'", models);
  ck_assert_msg(r.status == 0, "%s", r.err);
  ck_assert_ptr_nonnull(strstr(r.out, "graph @transformer(%x: f32[batch,16,64]) opset 20 {\n"));
  ck_assert_ptr_nonnull(strstr(r.out, " = Softmax("));
  ck_assert_ptr_nonnull(strstr(r.out, "{axis=3} : f32[batch,4,16,16]\n"));
  tr_result_free(&r);
}
END_TEST

START_TEST(test_json) {
  tr_result r = run("graph show '%s/cnn.onnx' --json", models);
  ck_assert_msg(r.status == 0, "%s", r.err);
  json_error_t e;
  json_t *j = json_loads(r.out, 0, &e);
  ck_assert_msg(j != NULL, "not JSON: %s", e.text);
  ck_assert_str_eq(json_string_value(json_object_get(j, "name")), "cnn");
  ck_assert_int_eq(json_integer_value(json_object_get(j, "opset")), 13);
  ck_assert_int_eq(json_array_size(json_object_get(j, "nodes")), 17);
  ck_assert_int_eq(json_array_size(json_object_get(j, "values")), 44);
  size_t i;
  json_t *v;
  int consts = 0;
  json_array_foreach(json_object_get(j, "values"), i, v) consts += !strcmp(json_string_value(json_object_get(v, "kind")), "const");
  ck_assert_int_eq(consts, 26);
  json_t *n0 = json_array_get(json_object_get(j, "nodes"), 0);
  ck_assert_str_eq(json_string_value(json_object_get(n0, "op")), "Conv");
  json_t *pads = json_object_get(json_object_get(n0, "attrs"), "pads");
  ck_assert_int_eq(json_array_size(pads), 4);
  json_decref(j);
  tr_result_free(&r);
  r = run("graph show '%s/transformer.onnx' --json", models);
  ck_assert_msg(r.status == 0, "%s", r.err);
  j = json_loads(r.out, 0, &e);
  ck_assert_ptr_nonnull(j);
  const char *in = json_string_value(json_array_get(json_object_get(j, "inputs"), 0));
  json_array_foreach(json_object_get(j, "values"), i, v) {
    if (strcmp(json_string_value(json_object_get(v, "name")), in)) continue;
    json_t *sh = json_object_get(v, "shape");
    ck_assert_str_eq(json_string_value(json_array_get(sh, 0)), "batch");
    ck_assert_int_eq(json_integer_value(json_array_get(sh, 1)), 16);
    ck_assert_str_eq(json_string_value(json_object_get(v, "kind")), "input");
  }
  json_decref(j);
  tr_result_free(&r);
}
END_TEST

START_TEST(test_errors) {
  tr_result r = run("graph show '%s/ops/bad_gelu18.onnx'", models);
  ck_assert_int_eq(r.status, 1);
  ck_assert_msg(strstr(r.err, "node g (Gelu, opset 18): Gelu exists from opset 20"), "%s", r.err);
  tr_result_free(&r);
  r = run("graph show /nonexistent.onnx");
  ck_assert_int_eq(r.status, 1);
  ck_assert_ptr_nonnull(strstr(r.err, "/nonexistent.onnx"));
  tr_result_free(&r);
  r = run("graph show '%s/mlp.onnx' --after no_such_pass", models);
  ck_assert_int_eq(r.status, 1);
  ck_assert_msg(strstr(r.err, "unknown pass 'no_such_pass'"), "%s", r.err);
  tr_result_free(&r);
  static const char *const usage_errors[] = {"graph", "graph frobnicate", "graph show", "graph show a.onnx b.onnx",
                                             "graph show a.onnx --after", "graph show a.onnx --bogus"};
  for (int k = 0; k < 6; k++) {
    r = run("%s", usage_errors[k]);
    ck_assert_msg(r.status == 2, "'%s' exited %d", usage_errors[k], r.status);
    ck_assert_msg(strstr(r.err, "usage: tessel graph show"), "'%s': %s", usage_errors[k], r.err);
    tr_result_free(&r);
  }
  r = run("graph show --help");
  ck_assert_int_eq(r.status, 0);
  ck_assert_ptr_nonnull(strstr(r.out, "usage: tessel graph show MODEL.onnx"));
  tr_result_free(&r);
}
END_TEST

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: test_graph_cli TESSEL\n");
    return 2;
  }
  tessel = argv[1];
  models = getenv("MODELS_DIR");
  if (!models) {
    fprintf(stderr, "MODELS_DIR is not set (run through meson test)\n");
    return 1;
  }
  snprintf(tmpdir, sizeof tmpdir, "/tmp/tessel_graph_cli_XXXXXX");
  if (!mkdtemp(tmpdir)) return 1;
  Suite *s = suite_create("graph_cli");
  TCase *tc = tcase_create("graph_cli");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_text);
  tcase_add_test(tc, test_json);
  tcase_add_test(tc, test_errors);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failures = srunner_ntests_failed(sr);
  srunner_free(sr);
  tr_rmtree(tmpdir);
  return failures ? 1 : 0;
}
