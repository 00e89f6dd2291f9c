/* test_cli.c — drives the tessel binary as a user would: the JSON contracts
 * of `workloads`, `show` and `run --check` for every built-in workload, DSL
 * files, and bad input (unknown workloads/keys, malformed DSL files) giving
 * exit status 2 and a message that names the problem. argv[1] is the path
 * of the tessel binary. */
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

/* Runs `tessel ARGS` (args is shell text; tests pass only safe strings). */
static tr_result run(const char *args) { return tr_run(tmpdir, tessel, "%s", args); }

static const char *write_tmp(const char *name, const char *text) {
  static char path[512];
  snprintf(path, sizeof path, "%s/%s", tmpdir, name);
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs(text, f);
  fclose(f);
  return path;
}

/* The names and keys the contract requires (issue "Foundation", item 9). */
static const struct {
  const char *name, *keys;
} required[] = {
    {"matmul", "m,n,k"},
    {"batch_matmul", "b,m,n,k"},
    {"dense", "m,n,k,bias,act"},
    {"matmul_int8", "m,n,k"},
    {"conv2d_nchw", "n,c,h,w,k,r,s,stride,pad,dilation,groups"},
    {"conv2d_nhwc", "n,c,h,w,k,r,s,stride,pad,dilation,groups"},
    {"depthwise_conv2d", "n,c,h,w,r,s,stride,pad,dilation"},
    {"conv2d_transpose", "n,c,h,w,k,r,s,stride,pad"},
    {"max_pool2d", "n,c,h,w,r,s,stride,pad"},
    {"avg_pool2d", "n,c,h,w,r,s,stride,pad"},
    {"softmax", "m,n"},
    {"layernorm", "m,n"},
    {"add", "m,n"},
    {"mul", "m,n"},
    {"relu", "m,n"},
    {"gelu", "m,n"},
    {"transpose", "m,n"},
    {"reduce_sum", "m,n"},
    {"reduce_mean", "m,n"},
};
#define NREQ (sizeof required / sizeof required[0])

START_TEST(test_workloads_json) {
  tr_result r = run("workloads --json");
  ck_assert_int_eq(r.status, 0);
  json_error_t e;
  json_t *arr = json_loads(r.out, 0, &e);
  ck_assert_msg(arr && json_is_array(arr), "workloads --json is not an array: %s", e.text);
  for (size_t i = 0; i < NREQ; i++) {
    json_t *found = NULL, *it;
    size_t k;
    json_array_foreach(arr, k, it) {
      if (!strcmp(json_string_value(json_object_get(it, "name")), required[i].name)) found = it;
    }
    ck_assert_msg(found, "workload %s missing", required[i].name);
    json_t *params = json_object_get(found, "params");
    ck_assert(json_is_object(params));
    char keys[256];
    snprintf(keys, sizeof keys, "%s", required[i].keys);
    size_t nkeys = 0;
    for (char *t = strtok(keys, ","); t; t = strtok(NULL, ",")) {
      ck_assert_msg(json_object_get(params, t), "%s lacks key %s", required[i].name, t);
      nkeys++;
    }
    ck_assert_uint_eq(json_object_size(params), nkeys);
    ck_assert_msg(json_number_value(json_object_get(found, "flops")) > 0, "%s flops", required[i].name);
  }
  json_decref(arr);
  tr_result_free(&r);
}
END_TEST

START_TEST(test_show_and_check_each) {
  const char *name = required[_i].name;
  char args[256];
  snprintf(args, sizeof args, "show %s", name);
  tr_result r = run(args);
  ck_assert_msg(r.status == 0, "show %s: %s", name, r.err);
  ck_assert_ptr_nonnull(strstr(r.out, "func "));
  ck_assert_ptr_nonnull(strstr(r.out, "block root"));
  tr_result_free(&r);
  snprintf(args, sizeof args, "run %s --check --json", name);
  r = run(args);
  ck_assert_msg(r.status == 0, "run %s --check: status %d: %s", name, r.status, r.err);
  json_t *o = json_loads(r.out, 0, NULL);
  ck_assert_ptr_nonnull(o);
  ck_assert(json_is_true(json_object_get(o, "matched")));
  ck_assert_ptr_nonnull(json_object_get(o, "max_abs_err"));
  ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(o, "workload")), name));
  json_decref(o);
  tr_result_free(&r);
}
END_TEST

START_TEST(test_odd_sizes_check) {
  static const char *specs[] = {
      "matmul:m=7,n=13,k=5",
      "conv2d_nchw:n=1,c=4,h=7,w=11,k=6,r=3,s=3,stride=2,pad=1,dilation=1,groups=2",
      "softmax:m=3,n=17",
      "max_pool2d:n=1,c=3,h=9,w=7,r=3,s=3,stride=2,pad=1",
  };
  for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
    char args[512];
    snprintf(args, sizeof args, "run '%s' --check", specs[i]);
    tr_result r = run(args);
    ck_assert_msg(r.status == 0, "%s: %s", specs[i], r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "matches"));
    tr_result_free(&r);
  }
}
END_TEST

START_TEST(test_bad_workloads) {
  tr_result r = run("show nosuchkernel");
  ck_assert_int_eq(r.status, 2);
  ck_assert_msg(strstr(r.err, "matmul") && strstr(r.err, "softmax"), "no list of valid workloads: %s", r.err);
  tr_result_free(&r);
  r = run("show matmul:q=3");
  ck_assert_int_eq(r.status, 2);
  ck_assert_msg(strstr(r.err, "q") && strstr(r.err, "m") && strstr(r.err, "k"), "%s", r.err);
  tr_result_free(&r);
  r = run("run matmul:m=-4 --check");
  ck_assert_int_eq(r.status, 2);
  ck_assert(strlen(r.err) > 0);
  tr_result_free(&r);
  r = run("frobnicate");
  ck_assert_int_eq(r.status, 2);
  tr_result_free(&r);
}
END_TEST

START_TEST(test_dsl_file) {
  char p[512];
  snprintf(p, sizeof p, "%s", write_tmp("softmax.tsl",
                            "# a user's kernel\n"
                            "kernel softmax(X: f32[M, N]) -> Y: f32[M, N] {\n"
                            "  mx[i] max= X[i, j]\n"
                            "  e[i, j] = exp(X[i, j] - mx[i])\n"
                            "  s[i] += e[i, j]\n"
                            "  Y[i, j] = e[i, j] / s[i]\n"
                            "}\n"));
  char args[1024];
  snprintf(args, sizeof args, "show '%s'", p);
  tr_result r = run(args);
  ck_assert_msg(r.status == 0, "%s", r.err);
  ck_assert_ptr_nonnull(strstr(r.out, "block mx"));
  tr_result_free(&r);
  /* the printed IR is itself a valid input */
  const char *printed = write_tmp("printed.tsl", "");
  snprintf(args, sizeof args, "show '%s' > '%s' 2>/dev/null; '%s' run '%s' --sym M=3 --sym N=5", p,
           printed, tessel, printed);
  r = run(args);
  ck_assert_msg(r.status == 0, "%s", r.err);
  ck_assert_ptr_nonnull(strstr(r.out, "15 elements"));
  tr_result_free(&r);
  snprintf(args, sizeof args, "run '%s'", p); /* syms unbound */
  r = run(args);
  ck_assert_int_eq(r.status, 2);
  ck_assert_ptr_nonnull(strstr(r.err, "--sym"));
  tr_result_free(&r);
}
END_TEST

START_TEST(test_malformed_dsl_file) {
  const char *p = write_tmp("bad.tsl",
                            "kernel k(A: f32[4]) -> B: f32[4] {\n"
                            "  B[i] = A[i] + Q[i]\n"
                            "}\n");
  char args[1024];
  snprintf(args, sizeof args, "show '%s'", p);
  tr_result r = run(args);
  ck_assert_int_eq(r.status, 2);
  ck_assert_msg(strstr(r.err, "bad.tsl:2:") && strstr(r.err, "Q") && strstr(r.err, "^"), "%s", r.err);
  tr_result_free(&r);
  p = write_tmp("garbage.tsl", "\x01\x02kernel (((\xff\xfe");
  snprintf(args, sizeof args, "show '%s'", p);
  r = run(args);
  ck_assert_int_eq(r.status, 2);
  ck_assert_ptr_nonnull(strstr(r.err, "garbage.tsl:1:"));
  tr_result_free(&r);
}
END_TEST

START_TEST(test_help) {
  static const char *cmds[] = {"workloads", "show", "run"};
  for (size_t i = 0; i < 3; i++) {
    char args[64];
    snprintf(args, sizeof args, "%s --help", cmds[i]);
    tr_result r = run(args);
    ck_assert_int_eq(r.status, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "usage: tessel"));
    tr_result_free(&r);
  }
}
END_TEST

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: test_cli PATH-TO-TESSEL\n");
    return 2;
  }
  tessel = argv[1];
  snprintf(tmpdir, sizeof tmpdir, "/tmp/tessel-cli-XXXXXX");
  if (!mkdtemp(tmpdir)) return 2;
  Suite *s = suite_create("cli");
  TCase *tc = tcase_create("cli");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_workloads_json);
  tcase_add_loop_test(tc, test_show_and_check_each, 0, (int)NREQ);
  tcase_add_test(tc, test_odd_sizes_check);
  tcase_add_test(tc, test_bad_workloads);
  tcase_add_test(tc, test_dsl_file);
  tcase_add_test(tc, test_malformed_dsl_file);
  tcase_add_test(tc, test_help);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int nf = srunner_ntests_failed(sr);
  srunner_free(sr);
  tr_rmtree(tmpdir);
  return nf ? 1 : 0;
}
