/* test_model_build.c — the model compiler's C API (tuner/model_build.h)
 * called directly, without the CLI:
 *  - the test models (tests/models, MODELS_DIR) built with the default
 *    schedules by tun_model_build, loaded and run through the C model API
 *    (include/tessel/tessel_model.h) on onnxruntime's seeded inputs and
 *    compared with its outputs (tests/models/ort_run.py in .venv);
 *  - the graph switches: cnn built with --winograd off / all and
 *    --polyphase off still matches onnxruntime, and the switches change the
 *    task keys (which is why the log records them);
 *  - tun_model_tasks and tun_model_import on their own (--after a pass);
 *  - the switches in the tuning log (a record's graph_opts, and what
 *    tun_tune_model writes with them set);
 *  - bad input: a missing model, a corrupt one, a --sym the model lacks, a
 *    bad target, a malformed --sym: each a status and a message naming it.
 * MODELS_DIR and TESSEL_SOURCE_ROOT come from meson. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "include/tessel/tessel_model.h"
#include "ir/graph/passes.h"
#include "codegen/llvm.h"
#include "tuner/database.h"
#include "tuner/model_build.h"
#include "tuner/task_scheduler.h"
#include "tuner/npy.h"
#include "util/run.h"

static const char *models, *root;
static char tmpdir[256], python[TR_PATH_MAX], ort_script[TR_PATH_MAX];

static void setup(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/tessel_model_build_XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}
static void teardown(void) { tr_rmtree(tmpdir); }

static bool have_python(void) {
  if (access(python, X_OK) == 0) return true;
  fprintf(stderr, "skipped: %s missing (scripts/setup.sh)\n", python);
  return false;
}

static void model_path(const char *model, char *buf, size_t n) { snprintf(buf, n, "%s/%s.onnx", models, model); }

/* onnxruntime on seeded inputs: DIR/in/x.npy and DIR/ref/y.npy. */
static void ort(const char *model, const char *dir) {
  tr_ok(tr_sh(tmpdir, "'%s' '%s' '%s/%s.onnx' '%s/in' '%s/ref' --random 5 --sym batch=1", python, ort_script,
              models, model, dir, dir),
        "ort_run.py");
}

/* Builds model into DIR/NAME.so with o, runs it through the C API on
 * DIR/in/x.npy and compares y with DIR/ref/y.npy. Returns the max abs error. */
static double build_and_compare(const char *model, const char *name, const char *dir, const tun_model_opts *o,
                                tun_model_result *r) {
  char path[400], so[600];
  model_path(model, path, sizeof path);
  snprintf(so, sizeof so, "%s/%s.so", dir, name);
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_msg(tun_model_build(path, so, o, r, &d) == TS_OK, "%s: %s", name, d.msg);
  ck_assert_int_gt(r->kernels, 0);
  ck_assert_int_eq(r->ntuned, 0);
  ck_assert_int_eq(r->ndefault, r->kernels);
  char side[700];
  snprintf(side, sizeof side, "%s.json", so);
  ck_assert_msg(access(side, R_OK) == 0, "no signature %s", side);

  char err[600], ip[600], rp[600];
  tessel_model *m = tessel_model_load(so, err, sizeof err);
  ck_assert_msg(m != NULL, "%s", err);
  ck_assert_int_eq(tessel_model_num_inputs(m), 1);
  snprintf(ip, sizeof ip, "%s/in/x.npy", dir);
  snprintf(rp, sizeof rp, "%s/ref/y.npy", dir);
  tun_npy in, ref;
  ck_assert_msg(tun_npy_read(ip, &in, &d) == TS_OK, "%s", d.msg);
  ck_assert_msg(tun_npy_read(rp, &ref, &d) == TS_OK, "%s", d.msg);
  ck_assert_int_eq(tessel_model_set_input(m, 0, in.data, in.ndim, in.shape), 0);
  ck_assert_msg(tessel_model_run(m) == 0, "%s", tessel_model_error(m));
  const void *out;
  int nd;
  int64_t shape[TESSEL_MODEL_MAX_DIMS];
  ck_assert_int_eq(tessel_model_get_output(m, tessel_model_output_index(m, "y"), &out, &nd, shape), 0);
  ck_assert_int_eq(nd, ref.ndim);
  size_t n = 1;
  for (int j = 0; j < nd; j++) {
    ck_assert_int_eq(shape[j], ref.shape[j]);
    n *= (size_t)shape[j];
  }
  const float *a = out, *b = ref.data;
  double maxerr = 0;
  for (size_t i = 0; i < n; i++) {
    double e = fabs((double)a[i] - (double)b[i]);
    if (e > maxerr) maxerr = e;
    ck_assert_msg(e <= 1e-5 + 1e-4 * fabs((double)b[i]), "%s y[%zu] = %.9g, onnxruntime %.9g", name, i,
                  (double)a[i], (double)b[i]);
  }
  fprintf(stderr, "%s: %d kernels, max abs error vs onnxruntime %.3g\n", name, r->kernels, maxerr);
  tun_npy_free(&in);
  tun_npy_free(&ref);
  tessel_model_free(m);
  return maxerr;
}

START_TEST(build_default_schedules) {
  if (!have_python()) return;
  static const char *ms[] = {"mlp", "cnn"};
  for (int i = 0; i < 2; i++) {
    char dir[400];
    snprintf(dir, sizeof dir, "%s/%s", tmpdir, ms[i]);
    ort(ms[i], dir);
    tun_model_opts o;
    tun_model_opts_init(&o);
    tun_model_result r;
    build_and_compare(ms[i], ms[i], dir, &o, &r);
    ck_assert_int_eq(r.nk, r.kernels); /* no specialisations without a log */
    for (int k = 0; k < r.nk; k++) ck_assert_int_eq((int)strlen(r.k[k].key), 16);
    tun_model_result_fini(&r);
  }
}
END_TEST

/* The keys of cnn's tasks with the given graph switches (sorted into keys). */
static int task_keys(const tun_model_opts *o, uint64_t *keys, int max) {
  char path[400];
  model_path("cnn", path, sizeof path);
  ir_module *m = ir_module_new();
  tg_graph *g = NULL;
  tg_task *t = NULL;
  int n = 0;
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_msg(tun_model_tasks(path, o, m, &g, &t, &n, &d) == TS_OK, "%s", d.msg);
  ck_assert_int_le(n, max);
  for (int i = 0; i < n; i++) keys[i] = t[i].key;
  tg_tasks_free(t, n);
  ir_module_free(m);
  return n;
}

static bool same_keys(const uint64_t *a, int na, const uint64_t *b, int nb) {
  if (na != nb) return false;
  for (int i = 0; i < na; i++) {
    bool found = false;
    for (int j = 0; j < nb; j++) found |= a[i] == b[j];
    if (!found) return false;
  }
  return true;
}

START_TEST(graph_switches) {
  if (!have_python()) return;
  char dir[400];
  snprintf(dir, sizeof dir, "%s/cnn", tmpdir);
  ort("cnn", dir);
  /* against plain NCHW convolutions (--conv-layout nchw), where polyphase
   * applies; nchwc (the default) changes every conv's kernel */
  static const char *const sw[][2] = {
      {"winograd", "off"}, {"winograd", "all"}, {"polyphase", "off"}, {"conv_layout", "nchwc"}};
  uint64_t base[64], other[64];
  tun_model_opts o;
  tun_model_opts_init(&o);
  o.graph.conv_block = 0;
  int nbase = task_keys(&o, base, 64);
  for (int i = 0; i < 4; i++) {
    tun_model_opts_init(&o);
    o.graph.conv_block = 0;
    ts_diag d;
    ts_diag_clear(&d);
    ck_assert_int_eq(tg_pass_opts_set(&o.graph, sw[i][0], sw[i][1], &d), TS_OK);
    char name[64];
    snprintf(name, sizeof name, "cnn_%s_%s", sw[i][0], sw[i][1]);
    tun_model_result r;
    build_and_compare("cnn", name, dir, &o, &r);
    tun_model_result_fini(&r);
    int n = task_keys(&o, other, 64);
    /* off and polyphase off change cnn's kernels; "all" changes nothing the default missed only
     * when every conv already qualified, so it is not required to differ */
    if (i != 1) ck_assert_msg(!same_keys(base, nbase, other, n), "%s=%s left the task keys as they were", sw[i][0],
                              sw[i][1]);
  }
}
END_TEST

START_TEST(import_stops_after_a_pass) {
  char path[400];
  model_path("cnn", path, sizeof path);
  tun_model_opts o;
  tun_model_opts_init(&o);
  ts_diag d;
  ts_diag_clear(&d);
  ir_module *m = ir_module_new();
  tg_graph *g = NULL;
  ck_assert_msg(tun_model_import(path, &o, "", m, &g, &d) == TS_OK, "%s", d.msg);
  ck_assert_int_eq(tg_count_called_funcs(g), 0); /* as imported: no calls yet */
  ir_module_free(m);
  m = ir_module_new();
  ck_assert_msg(tun_model_import(path, &o, "legalize", m, &g, &d) == TS_OK, "%s", d.msg);
  ck_assert_int_gt(tg_count_called_funcs(g), 0);
  ir_module_free(m);
  m = ir_module_new();
  ck_assert_int_eq(tun_model_import(path, &o, "no_such_pass", m, &g, &d), TS_ENOTFOUND);
  ck_assert_msg(strstr(d.msg, "unknown pass 'no_such_pass'"), "%s", d.msg);
  ir_module_free(m);
}
END_TEST

/* The graph switches in the log: a record's graph_opts round trip, old
 * records (without the field) read as the defaults, and tune-model's
 * records (here two trials on mlp with --winograd off) carry them. */
START_TEST(log_records_graph_switches) {
  tun_record r, back;
  memset(&r, 0, sizeof r);
  memcpy(r.workload_key, "0123456789abcdef", 17);
  r.workload = "w";
  r.target = "llvm";
  r.version = "test";
  r.trace = "[[],[]]"; /* a success record has a trace (docs/LOG.md, valid records) */
  r.graph_opts = "winograd=off,polyphase=off";
  char *line = tun_record_to_json(&r);
  ck_assert_ptr_nonnull(line);
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_msg(tun_record_from_json(line, &back, &d) == TS_OK, "%s", d.msg);
  ck_assert_str_eq(back.graph_opts, "winograd=off,polyphase=off");
  tun_record_fini(&back);
  ts_free(line);
  r.graph_opts = NULL;
  line = tun_record_to_json(&r);
  ck_assert_ptr_null(strstr(line, "graph_opts")); /* defaults: the line an older tessel wrote */
  ck_assert_int_eq(tun_record_from_json(line, &back, &d), TS_OK);
  ck_assert_ptr_null(back.graph_opts);
  tun_record_fini(&back);
  ts_free(line);

  char path[400], log[400];
  model_path("mlp", path, sizeof path);
  snprintf(log, sizeof log, "%s/mlp.log", tmpdir);
  tun_model_opts o;
  tun_model_opts_init(&o);
  ck_assert_int_eq(tg_pass_opts_set(&o.graph, "winograd", "off", &d), TS_OK);
  ir_module *m = ir_module_new();
  tg_graph *g = NULL;
  tg_task *t = NULL;
  int n = 0;
  ck_assert_msg(tun_model_tasks(path, &o, m, &g, &t, &n, &d) == TS_OK, "%s", d.msg);
  tun_model_task *mt = tun_model_sched_tasks(t, n, stderr);
  ck_assert_ptr_nonnull(mt);
  cg_target tg;
  ck_assert_int_eq(cg_target_parse("llvm", &tg, &d), TS_OK);
  ck_assert_int_eq(cg_llvm_resolve_target(&tg, &d), TS_OK);
  tun_tune_model_opts mo;
  tun_tune_model_opts_default(&mo);
  mo.tune.trials = 2;
  mo.tune.batch = 2;
  mo.tune.log_path = log;
  mo.tune.model = "random";
  mo.tune.progress = NULL;
  mo.progress = NULL;
  mo.measure_defaults = false;
  char gopts[96];
  mo.tune.graph_opts = tg_pass_opts_str(&o.graph, gopts, sizeof gopts);
  tun_tune_model_result res;
  ck_assert_msg(tun_tune_model(mt, n, &tg, &mo, &res, &d) == TS_OK, "%s", d.msg);
  ck_assert_int_gt(res.new_trials, 0);
  tun_tune_model_result_fini(&res);
  tun_db *db = tun_db_load(log, NULL, NULL, &d);
  ck_assert_msg(db != NULL, "%s", d.msg);
  ck_assert_int_gt(tun_db_count(db), 0);
  for (int i = 0; i < tun_db_count(db); i++) {
    const tun_record *x = tun_db_get(db, i);
    ck_assert_msg(x->graph_opts && !strcmp(x->graph_opts, "winograd=off"), "record %d: %s", i,
                  x->graph_opts ? x->graph_opts : "(none)");
  }
  tun_db_close(db);
  ts_free(mt);
  tg_tasks_free(t, n);
  ir_module_free(m);
}
END_TEST

/* A failing build: the status, a message holding needle, no artifact. */
static void build_fails(const char *path, const tun_model_opts *o, ts_status want, const char *needle) {
  char so[400];
  snprintf(so, sizeof so, "%s/bad.so", tmpdir);
  ts_diag d;
  ts_diag_clear(&d);
  tun_model_result r;
  ts_status st = tun_model_build(path, so, o, &r, &d);
  ck_assert_msg(st != TS_OK && (!want || st == want), "%s: status %s, wanted %s (%s)", path, ts_strerror(st),
                ts_strerror(want), d.msg);
  ck_assert_msg(strstr(d.msg, needle), "%s: message '%s' lacks '%s'", path, d.msg, needle);
  ck_assert_int_eq(r.nk, 0);
  ck_assert_ptr_null(r.k);
  ck_assert_int_ne(access(so, F_OK), 0);
  tun_model_result_fini(&r);
}

START_TEST(bad_input) {
  tun_model_opts o;
  tun_model_opts_init(&o);
  char path[400], corrupt[400];
  snprintf(path, sizeof path, "%s/missing.onnx", tmpdir);
  build_fails(path, &o, 0, "missing.onnx");
  snprintf(corrupt, sizeof corrupt, "%s/corrupt.onnx", tmpdir);
  FILE *f = fopen(corrupt, "wb");
  ck_assert_ptr_nonnull(f);
  fputs("\x08\x07\x12\x03this is not a protobuf model \xff\xff\xff", f);
  fclose(f);
  build_fails(corrupt, &o, 0, "corrupt.onnx");
  model_path("mlp", path, sizeof path);
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_int_eq(tun_model_opts_add_sym(&o, "nosuch=4", &d), TS_OK);
  build_fails(path, &o, TS_EINVAL, "no symbolic dim named 'nosuch'");
  tun_model_opts_init(&o);
  o.target = "nonsense-target";
  build_fails(path, &o, 0, "nonsense");
  tun_model_opts_init(&o);
  ck_assert_int_eq(tun_model_opts_add_sym(&o, "batch", &d), TS_EINVAL);
  ck_assert_msg(strstr(d.msg, "NAME=VALUE"), "%s", d.msg);
  ts_diag_clear(&d);
  ck_assert_int_eq(tun_model_opts_add_sym(&o, "batch=0", &d), TS_EINVAL);
  for (int i = 0; i < TUN_MODEL_MAX_SYMS; i++) ck_assert_int_eq(tun_model_opts_add_sym(&o, "s=2", NULL), TS_OK);
  ck_assert_int_eq(tun_model_opts_add_sym(&o, "s=2", NULL), TS_EINVAL);
}
END_TEST

int main(void) {
  if (!tr_model_env(&models, &root, python, ort_script)) return 2;
  Suite *s = suite_create("model_build");
  TCase *tc = tcase_create("model_build");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, build_default_schedules);
  tcase_add_test(tc, graph_switches);
  tcase_add_test(tc, import_stops_after_a_pass);
  tcase_add_test(tc, log_records_graph_switches);
  tcase_add_test(tc, bad_input);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int nf = srunner_ntests_failed(sr);
  srunner_free(sr);
  return nf ? 1 : 0;
}
