/* test_layout_model.c — weight layout rewrite through whole models
 * (docs/LAYOUT.md):
 *  - task extraction marks the params fed by constants (conv and dense
 *    weights) layout-free, without changing the task keys;
 *  - search candidates of the cnn's tasks (postprocessed, so RewriteLayout
 *    re-lays their weights) logged as records: `tessel build --log`
 *    pre-packs the weights (reported), and the outputs match onnxruntime;
 *  - the same records without their TransformLayout (a log from before the
 *    rewrite) still replay: nothing pre-packed, outputs still match;
 *  - the transformer (symbolic batch): its tuned specialisations keep the
 *    original layout (they share calls with the symbolic kernels), batch 1
 *    and 3 match; with the same records stripped of their re-layout in the
 *    log too (slower), the specialisations take those instead;
 *  - a weight read by two different convolutions (a model written here with
 *    the onnx helper API): one pre-packed weight, one packed copy per
 *    distinct map, outputs match;
 *  - (argv[2] == "tune", the slow suite) `tessel tune-model` on the cnn for
 *    a few trials, then build + run against onnxruntime.
 * The builds take --conv-layout nchw: the tasks here come from the graph
 * passes' defaults (tg_run_pipeline), plain NCHW convolutions.
 * argv[1]: the tessel binary. Models from MODELS_DIR, python from
 * TESSEL_SOURCE_ROOT/.venv. */
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codegen/llvm.h"
#include "ir/graph/onnx.h"
#include "ir/graph/passes.h"
#include "ir/graph/tasks.h"
#include "ir/schedule/layout.h"
#include "ir/struct.h"
#include "search/search.h"
#include "tuner/database.h"
#include "tuner/npy.h"
#include "util/run.h"

static const char *tessel, *models, *root;
static bool slow;
static char tmpdir[256], python[TR_PATH_MAX], ort_script[TR_PATH_MAX];

static tr_result sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static tr_result sh(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  tr_result r = tr_vsh(tmpdir, fmt, ap);
  va_end(ap);
  return r;
}
static bool have_python(void) { return access(python, X_OK) == 0; }

/* MODELS_DIR/NAME.onnx, or NAME itself when it is a path */
static const char *model_path(const char *model) {
  static char buf[600];
  if (strchr(model, '/')) return model;
  snprintf(buf, sizeof buf, "%s/%s.onnx", models, model);
  return buf;
}

static void ort(const char *model, const char *dir, int batch) {
  tr_ok(sh("'%s' '%s' '%s' '%s/in' '%s/ref' --random 5 --sym batch=%d", python, ort_script, model_path(model), dir,
        dir, batch),
     "ort_run.py");
}

/* DIR/ref/NAME.npy against DIR/SUB/NAME.npy, |a-b| <= atol + rtol|b|. */
static void compare(const char *dir, const char *sub, const char *name) {
  char rp[600], op[600];
  snprintf(rp, sizeof rp, "%s/ref/%s.npy", dir, name);
  snprintf(op, sizeof op, "%s/%s/%s.npy", dir, sub, name);
  tun_npy r, o;
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_msg(tun_npy_read(rp, &r, &d) == TS_OK, "%s", d.msg);
  ck_assert_msg(tun_npy_read(op, &o, &d) == TS_OK, "%s", d.msg);
  ck_assert_int_eq(r.nbytes, o.nbytes);
  const float *a = o.data, *b = r.data;
  for (size_t i = 0; i < r.nbytes / 4; i++)
    ck_assert_msg(fabs((double)a[i] - (double)b[i]) <= 1e-5 + 1e-4 * fabs((double)b[i]),
                  "%s %s[%zu] = %.9g, onnxruntime %.9g", dir, name, i, (double)a[i], (double)b[i]);
  tun_npy_free(&r);
  tun_npy_free(&o);
}

static void run_and_compare(const char *so, const char *model, const char *sub, int batch) {
  char dir[400];
  const char *base = strrchr(model, '/') ? strrchr(model, '/') + 1 : model;
  snprintf(dir, sizeof dir, "%s/%.40s_%s_%d", tmpdir, base, sub, batch);
  ort(model, dir, batch);
  tr_ok(sh("'%s' run '%s' --input 'x=%s/in/x.npy' --output-dir '%s/out'", tessel, so, dir, dir), "tessel run");
  compare(dir, "out", "y");
}

static json_t *build_json(const char *model, const char *log, const char *so) {
  /* the tasks as load_tasks extracts them: the graph passes' defaults, plain
   * NCHW convolutions (the model compiler's default is nchwc) */
  tr_result b = sh("'%s' build '%s' --log '%s' -o '%s' --json --conv-layout nchw", tessel, model_path(model), log, so);
  ck_assert_msg(b.status == 0, "build %s: %s", model, b.err);
  json_t *j = json_loads(b.out, 0, NULL);
  ck_assert_msg(j != NULL, "build --json: %s", b.out);
  tr_result_free(&b);
  return j;
}

static int jint(json_t *j, const char *k) { return (int)json_integer_value(json_object_get(j, k)); }

typedef struct model_tasks {
  ir_module *m;
  tg_graph *g;
  tg_task *t;
  int n;
} model_tasks;

static void load_tasks(const char *model, model_tasks *mt) {
  const char *path = model_path(model);
  ts_diag d;
  ts_diag_clear(&d);
  mt->m = ir_module_new();
  ck_assert_msg(tg_onnx_import(path, mt->m, &mt->g, &d) == TS_OK, "%s", d.msg);
  ck_assert_msg(tg_run_pipeline(mt->g, NULL, &d) == TS_OK, "%s", d.msg);
  ck_assert_msg(tg_extract_tasks(mt->g, &mt->t, &mt->n, &d) == TS_OK, "%s", d.msg);
}

static void free_tasks(model_tasks *mt) {
  tg_tasks_free(mt->t, mt->n);
  ir_module_free(mt->m);
}

/* The time write_log gives its records. */
static double log_secs = 1e-4;

/* The maps of the records write_log logged last (the re-laid ones). */
static sch_layout_map logged[32];
static int nlogged;

static bool has_layout(const sch_trace *tr) {
  for (int i = 0; i < sch_trace_len(tr); i++)
    if (sch_trace_inst(tr, i)->kind == SCH_I_TRANSFORM_LAYOUT) return true;
  return false;
}

/* Logs one verified record per task: a postprocessed search candidate
 * (the first of a few seeds whose trace re-lays a weight, if any does);
 * with strip, the candidate without its TransformLayout. Returns how many
 * records re-lay a weight. */
static int write_log(const char *model, const char *log, bool strip) {
  model_tasks mt;
  load_tasks(model, &mt);
  ts_diag d;
  ts_diag_clear(&d);
  cg_target tg;
  ck_assert_int_eq(cg_target_parse("llvm", &tg, &d), TS_OK);
  ck_assert_int_eq(cg_llvm_resolve_target(&tg, &d), TS_OK);
  tun_db *db = tun_db_open(log, NULL, NULL, &d);
  ck_assert_msg(db != NULL, "%s", d.msg);
  int nlayout = 0;
  nlogged = 0;
  for (int i = 0; i < mt.n; i++) {
    sch_trace **sk = NULL;
    int nsk = 0;
    srch_space_opts so = {0, 64, 0};
    ck_assert_msg(srch_sketches(mt.t[i].func, &tg, &so, &sk, &nsk, &d) == TS_OK, "%s", d.msg);
    sch_trace *pick = NULL;
    for (int s = 0; s < 4 * nsk && !(pick && has_layout(pick)); s++) {
      ts_diag q;
      ts_diag_clear(&q);
      sch_traced *ts = srch_instantiate(sk[s % nsk], mt.t[i].func, &tg, true, 100 + (uint64_t)s, &q);
      if (!ts) continue;
      if (!pick || has_layout(sch_traced_trace(ts))) {
        sch_trace_free(pick);
        pick = sch_trace_copy(sch_traced_trace(ts));
      }
      sch_traced_free(ts);
    }
    for (int s = 0; s < nsk; s++) sch_trace_free(sk[s]);
    ts_free(sk);
    ck_assert_msg(pick != NULL, "no candidate for %s", mt.t[i].name);
    if (has_layout(pick)) {
      nlayout++;
      /* only params the task marks layout-free are re-laid */
      sch_layout_map maps[8];
      int nm = sch_layout_maps_of_trace(pick, mt.t[i].func, maps, 8, &d);
      for (int k = 0; k < nm; k++) {
        ck_assert(mt.t[i].layout_free >> maps[k].param & 1);
        if (nlogged < 32) logged[nlogged++] = maps[k];
      }
    }
    if (strip) {
      sch_trace *p2 = sch_trace_without_kind(pick, SCH_I_TRANSFORM_LAYOUT);
      sch_trace_free(pick);
      pick = p2;
    }
    char *tj = sch_trace_to_json(pick);
    tun_record r;
    memset(&r, 0, sizeof r);
    snprintf(r.workload_key, sizeof r.workload_key, "%016llx", (unsigned long long)mt.t[i].key);
    r.workload = (char *)mt.t[i].definition;
    r.target = tg.text;
    r.trace = tj;
    r.nruns = 1;
    r.run_secs[0] = log_secs;
    r.verified = true;
    r.version = "test";
    ck_assert_msg(tun_db_append(db, &r, &d) == TS_OK, "%s", d.msg);
    ts_free(tj);
    sch_trace_free(pick);
  }
  tun_db_close(db);
  free_tasks(&mt);
  return nlayout;
}

static void setup(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/tessel_layout_XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}
static void teardown(void) { tr_rmtree(tmpdir); }

START_TEST(tasks_mark_weights) {
  model_tasks mt;
  load_tasks("cnn", &mt);
  int nconv = 0, nwino = 0;
  for (int i = 0; i < mt.n; i++) {
    char key[17], want[17];
    ir_workload_key(mt.t[i].func, key);
    snprintf(want, sizeof want, "%016llx", (unsigned long long)mt.t[i].key);
    ck_assert_str_eq(key, want); /* the mark does not change the key */
    const ir_annot *a = ir_annot_find(mt.t[i].func->nannot, mt.t[i].func->annots, IR_FUNC_ANN_LAYOUT_FREE);
    if (!strstr(mt.t[i].name, "conv2d") && !strstr(mt.t[i].name, "dense")) continue;
    if (strstr(mt.t[i].name, "winograd")) {
      /* the transformed weights (input 1) and the transform matrices (3, 4)
       * are laid out by the Winograd pass: never layout-free */
      nwino++;
      ck_assert_msg(a == NULL || !(a->v.i & (2 | 8 | 16 | 1)), "%s: mark %lld", mt.t[i].name, (long long)a->v.i);
      continue;
    }
    nconv++;
    /* input 0 is the activation, input 1 the weight (a constant) */
    ck_assert_msg(a && a->kind == IR_ANN_INT && (a->v.i & 2) && !(a->v.i & 1), "%s: mark %lld", mt.t[i].name,
                  a ? (long long)a->v.i : -1LL);
    ck_assert_int_eq(mt.t[i].layout_free, a->v.i);
    ck_assert_ptr_nonnull(strstr(mt.t[i].definition, IR_FUNC_ANN_LAYOUT_FREE));
  }
  ck_assert_int_ge(nconv, 3); /* the first conv, the strided one, the dense */
  ck_assert_int_ge(nwino, 1); /* the residual block's two 16-channel 3x3 convs */
  /* max pool and global pool read activations only */
  for (int i = 0; i < mt.n; i++)
    if (strstr(mt.t[i].name, "pool")) ck_assert_int_eq(mt.t[i].layout_free, 0);
  free_tasks(&mt);
}
END_TEST

START_TEST(cnn_prepacked_matches_ort) {
  if (!have_python()) return;
  char log[400], so[400];
  snprintf(log, sizeof log, "%s/rw.log", tmpdir);
  int nl = write_log("cnn", log, false);
  ck_assert_int_ge(nl, 3); /* the convolutions' candidates re-lay their weights */
  snprintf(so, sizeof so, "%s/cnn_rw.so", tmpdir);
  json_t *j = build_json("cnn", log, so);
  ck_assert_int_eq(jint(j, "tuned"), jint(j, "kernels"));
  ck_assert_int_eq(jint(j, "prepacked_weights"), nl);
  ck_assert_int_ge(jint(j, "packed_copies"), jint(j, "prepacked_weights"));
  int npacked = 0;
  json_t *ks = json_object_get(j, "kernel_list");
  for (size_t i = 0; i < json_array_size(ks); i++)
    npacked += (int)json_array_size(json_object_get(json_array_get(ks, i), "packed_params"));
  ck_assert_int_eq(npacked, nl);
  json_decref(j);
  /* the text report says it too */
  tr_result b = sh("'%s' build '%s/cnn.onnx' --log '%s' -o '%s' --conv-layout nchw", tessel, models, log, so);
  ck_assert_msg(b.status == 0 && strstr(b.out, "pre-packed"), "%s%s", b.out, b.err);
  tr_result_free(&b);
  run_and_compare(so, "cnn", "rw", 1);
}
END_TEST

START_TEST(old_records_still_replay) {
  if (!have_python()) return;
  char log[400], so[400];
  snprintf(log, sizeof log, "%s/old.log", tmpdir);
  write_log("cnn", log, true);
  snprintf(so, sizeof so, "%s/cnn_old.so", tmpdir);
  json_t *j = build_json("cnn", log, so);
  ck_assert_int_eq(jint(j, "tuned"), jint(j, "kernels"));
  ck_assert_int_eq(jint(j, "prepacked_weights"), 0);
  json_decref(j);
  run_and_compare(so, "cnn", "old", 1);
}
END_TEST

START_TEST(symbolic_specialisations_keep_layout) {
  if (!have_python()) return;
  char log[400], so[400];
  snprintf(log, sizeof log, "%s/tr.log", tmpdir);
  int nl = write_log("transformer", log, false);
  ck_assert_int_ge(nl, 1);
  snprintf(so, sizeof so, "%s/tr.so", tmpdir);
  tr_result b = sh("'%s' build '%s/transformer.onnx' --log '%s' -o '%s' --json", tessel, models, log, so);
  ck_assert_msg(b.status == 0, "%s", b.err);
  ck_assert_msg(strstr(b.err, "kept the original layout"), "%s", b.err);
  json_t *j = json_loads(b.out, 0, NULL);
  ck_assert_ptr_nonnull(j);
  ck_assert_int_ge(jint(j, "specialised"), 1);
  json_decref(j);
  tr_result_free(&b);
  run_and_compare(so, "transformer", "sym", 1);
  run_and_compare(so, "transformer", "sym", 3);
}
END_TEST

/* The same, with the records without their TransformLayout in the log too,
 * timed slower: a specialisation cannot keep a re-layout (it would run in a
 * layout it was never timed in), so it takes the best record that re-lays
 * nothing (before: the re-laying one, its layout dropped). */
START_TEST(symbolic_specialisations_take_unrelaid) {
  if (!have_python()) return;
  char log[400], so[400];
  snprintf(log, sizeof log, "%s/tr2.log", tmpdir);
  log_secs = 1e-4;
  int nl = write_log("transformer", log, false);
  ck_assert_int_ge(nl, 1);
  log_secs = 2e-4;
  write_log("transformer", log, true);
  log_secs = 1e-4;
  snprintf(so, sizeof so, "%s/tr2.so", tmpdir);
  tr_result b = sh("'%s' build '%s/transformer.onnx' --log '%s' -o '%s' --json", tessel, models, log, so);
  ck_assert_msg(b.status == 0, "%s", b.err);
  ck_assert_msg(strstr(b.err, "took the best record that does not"), "%s", b.err);
  ck_assert_msg(!strstr(b.err, "kept the original layout"), "a specialisation dropped a re-layout: %s", b.err);
  tr_result_free(&b);
  run_and_compare(so, "transformer", "unrelaid", 1);
  run_and_compare(so, "transformer", "unrelaid", 3);
}
END_TEST

static bool same_map(const sch_layout_map *a, const sch_layout_map *b) {
  if (a->ncomp != b->ncomp || a->naxes != b->naxes) return false;
  for (int j = 0; j < a->ncomp; j++)
    if (a->comp[j].dim != b->comp[j].dim || a->comp[j].stride != b->comp[j].stride ||
        a->comp[j].extent != b->comp[j].extent)
      return false;
  for (int j = 0; j < a->naxes; j++)
    if (a->group[j] != b->group[j]) return false;
  return true;
}

/* One weight W read by two different convolutions (pad 1, then pad 0): one
 * pre-packed weight, one packed copy per distinct map the two kernels chose. */
START_TEST(shared_weight_copies) {
  if (!have_python()) return;
  char gen[400], model[400], log[400], so[400];
  snprintf(gen, sizeof gen, "%s/gen.py", tmpdir);
  snprintf(model, sizeof model, "%s/shared.onnx", tmpdir);
  FILE *f = fopen(gen, "w");
  ck_assert_ptr_nonnull(f);
  fputs("import sys\nimport numpy as np\nimport onnx\nfrom onnx import helper, TensorProto as T\n"
        "W = (0.3 * np.random.default_rng(3).standard_normal((4, 4, 3, 3))).astype(np.float32)\n"
        "nodes = [helper.make_node('Conv', ['x', 'W'], ['a'], pads=[1, 1, 1, 1]),\n"
        "         helper.make_node('Relu', ['a'], ['b']), helper.make_node('Conv', ['b', 'W'], ['y'])]\n"
        "g = helper.make_graph(nodes, 'shared', [helper.make_tensor_value_info('x', T.FLOAT, [1, 4, 10, 10])],\n"
        "    [helper.make_tensor_value_info('y', T.FLOAT, [1, 4, 8, 8])],\n"
        "    [helper.make_tensor('W', T.FLOAT, W.shape, W.flatten())])\n"
        "m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)])\nm.ir_version = 7\n"
        "onnx.save(m, sys.argv[1])\n",
        f);
  fclose(f);
  tr_ok(sh("'%s' '%s' '%s'", python, gen, model), "gen.py");
  snprintf(log, sizeof log, "%s/shared.log", tmpdir);
  int nl = write_log(model, log, false);
  ck_assert_int_eq(nl, 2); /* both convolutions re-lay W */
  int distinct = 0;
  for (int i = 0; i < nlogged; i++) {
    bool seen = false;
    for (int j = 0; j < i && !seen; j++) seen = same_map(&logged[i], &logged[j]);
    distinct += !seen;
  }
  snprintf(so, sizeof so, "%s/shared.so", tmpdir);
  json_t *j = build_json(model, log, so);
  ck_assert_int_eq(jint(j, "prepacked_weights"), 1);
  ck_assert_int_eq(jint(j, "packed_copies"), distinct);
  fprintf(stderr, "shared weight: %d distinct map(s), %d packed copies\n", distinct, jint(j, "packed_copies"));
  json_decref(j);
  run_and_compare(so, model, "shared", 1);
}
END_TEST

START_TEST(tune_model_cnn) {
  if (!slow || !have_python()) return;
  char log[400], so[400];
  snprintf(log, sizeof log, "%s/tuned.log", tmpdir);
  tr_ok(sh("'%s' tune-model '%s/cnn.onnx' --trials 14 --batch 2 --log '%s' --conv-layout nchw", tessel, models, log), "tune-model");
  /* some measured, verified records re-lay a weight */
  ts_diag d;
  ts_diag_clear(&d);
  int nw = 0;
  tun_db *db = tun_db_load(log, NULL, &nw, &d);
  ck_assert_msg(db != NULL, "%s", d.msg);
  int nrw = 0;
  for (int i = 0; i < tun_db_count(db); i++) {
    const tun_record *r = tun_db_get(db, i);
    if (r->verified && !r->error && r->trace && strstr(r->trace, "TransformLayout")) nrw++;
  }
  tun_db_close(db);
  ck_assert_int_ge(nrw, 1);
  snprintf(so, sizeof so, "%s/cnn_tuned.so", tmpdir);
  json_t *j = build_json("cnn", log, so);
  ck_assert_int_eq(jint(j, "default"), 0);
  json_decref(j);
  run_and_compare(so, "cnn", "tuned", 1);
}
END_TEST

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s TESSEL [tune]\n", argv[0]);
    return 2;
  }
  tessel = argv[1];
  slow = argc > 2 && !strcmp(argv[2], "tune");
  if (!tr_model_env(&models, &root, python, ort_script)) return 2;
  if (!have_python()) fprintf(stderr, "no %s: the onnxruntime cases are skipped\n", python);
  Suite *su = suite_create("layout_model");
  TCase *tc = tcase_create("layout_model");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, slow ? 900 : 240);
  if (slow) {
    tcase_add_test(tc, tune_model_cnn);
  } else {
    tcase_add_test(tc, tasks_mark_weights);
    tcase_add_test(tc, cnn_prepacked_matches_ort);
    tcase_add_test(tc, old_records_still_replay);
    tcase_add_test(tc, symbolic_specialisations_keep_layout);
    tcase_add_test(tc, symbolic_specialisations_take_unrelaid);
    tcase_add_test(tc, shared_weight_copies);
  }
  suite_add_tcase(su, tc);
  SRunner *sr = srunner_create(su);
  srunner_run_all(sr, CK_NORMAL);
  int failures = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failures ? 1 : 0;
}
