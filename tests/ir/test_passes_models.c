/* test_passes_models.c — the graph passes on the generated models of issue
 * 15 (tests/models/gen_models.py, conv_bias_models and chain_model):
 *  - convolutions without a bias (a 3x3 stride-1 one Winograd rewrites, a
 *    batch norm folded into a bias-less conv, a strided one for polyphase)
 *    and one with a bias, and strided 1x1 ones (subsampled by the
 *    simplify pass), each with --winograd on, all, off and all with
 *    --winograd-tile 2 (F(2x2, 3x3)): the
 *    Winograd pass applies where it should, and both the reference
 *    interpreter after the whole pipeline and the model built by
 *    tun_model_build (default schedules, run through the C model API)
 *    match onnxruntime (tests/models/ort_run.py) on the same seeded input;
 *  - a ResNet-style and a MobileNet-style network (nchwc_resnet,
 *    nchwc_mobilenet) through the nchwc pass with blocks 8 and 16: the
 *    convolutions it blocks (those whose output channels the block divides),
 *    the layout borders it leaves, and the interpreted and built models
 *    against onnxruntime;
 *  - a 100k-node chain imports (the graph's name lookups are hash lookups;
 *    a scan per lookup made this take minutes).
 * MODELS_DIR and TESSEL_SOURCE_ROOT come from meson. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "include/tessel/tessel_model.h"
#include "ir/graph/graph_interp.h"
#include "ir/graph/onnx.h"
#include "ir/graph/passes.h"
#include "tuner/model_build.h"
#include "tuner/npy.h"
#include "util/run.h"

static const char *models, *root;
static char tmpdir[256], python[TR_PATH_MAX], ort_script[TR_PATH_MAX];

/* model, and how many convolutions the Winograd pass rewrites with
 * --winograd on and all (16 channels, 16x16: over the default thresholds;
 * the strided conv of nobias_bn_chain never) */
static const struct {
  const char *name;
  int winograd;
} conv_models[] = {{"wino_nobias", 1}, {"wino_bias", 1}, {"nobias_bn_chain", 2}, {"strided_pointwise", 0}};
#define NCONV ((int)(sizeof conv_models / sizeof conv_models[0]))
/* the last: --winograd all --winograd-tile 2, F(2x2, 3x3) */
static const tg_winograd_mode modes[] = {TG_WINOGRAD_ON, TG_WINOGRAD_ALL, TG_WINOGRAD_OFF, TG_WINOGRAD_ALL};
static const char *const mode_names[] = {"on", "all", "off", "all_f2"};
#define NMODES 4

/* the nchwc pass's models: per block and Winograd mode, the convolutions
 * it blocks and the border Transposes it leaves (into the blocked layout,
 * out of it). With --winograd all the basic block's two 3x3s are Winograd
 * ones that read and write the blocked forms too: no border around them. The
 * MobileNet's squeeze-excite: its pooled input crosses in (block 8), its
 * [1, 48, 1, 1] scale multiplies blocked. The RegNet's grouped convolutions
 * are all blocked: 16 channels per group as they are, 8 and 4 merged into
 * groups of the block (zeros across groups); one border, before the pool. */
static const struct {
  const char *name;
  int block;
  tg_winograd_mode wino;
  int convs, in, out;
} nchwc_cases[] = {
    {"nchwc_resnet", 8, TG_WINOGRAD_OFF, 7, 0, 1},    {"nchwc_resnet", 16, TG_WINOGRAD_OFF, 5, 0, 2},
    {"nchwc_resnet", 8, TG_WINOGRAD_ALL, 7, 0, 1},    {"nchwc_mobilenet", 8, TG_WINOGRAD_OFF, 9, 1, 2},
    {"nchwc_mobilenet", 16, TG_WINOGRAD_OFF, 7, 0, 2},
    {"nchwc_regnet", 8, TG_WINOGRAD_OFF, 7, 0, 1},     {"nchwc_regnet", 16, TG_WINOGRAD_OFF, 7, 0, 1},
    {"nchwc_densenet", 8, TG_WINOGRAD_OFF, 6, 0, 1},    {"nchwc_densenet", 16, TG_WINOGRAD_OFF, 4, 1, 4}, 
};
#define NNCHWC ((int)(sizeof nchwc_cases / sizeof nchwc_cases[0]))
static const char *const ref_models[] = {"nchwc_resnet", "nchwc_mobilenet", "nchwc_regnet", "nchwc_densenet"};

static void ref_dirs_of(const char *name, char *in, char *ref, size_t n) {
  snprintf(in, n, "%s/%s/in", tmpdir, name);
  snprintf(ref, n, "%s/%s/ref", tmpdir, name);
}

static void ref_dirs(int m, char *in, char *ref, size_t n) { ref_dirs_of(conv_models[m].name, in, ref, n); }

/* y against onnxruntime's y: every element within 1e-5 + 1e-4 |ref|. */
static void compare(const char *what, const float *y, const int64_t *shape, int nd, const tun_npy *ref) {
  ck_assert_int_eq(nd, ref->ndim);
  size_t n = 1;
  for (int j = 0; j < nd; j++) {
    ck_assert_int_eq(shape[j], ref->shape[j]);
    n *= (size_t)shape[j];
  }
  const float *r = ref->data;
  for (size_t i = 0; i < n; i++)
    ck_assert_msg(fabs((double)y[i] - (double)r[i]) <= 1e-5 + 1e-4 * fabs((double)r[i]),
                  "%s: y[%zu] = %.9g, onnxruntime %.9g", what, i, (double)y[i], (double)r[i]);
}

static int count_winograd(const tg_graph *g) {
  int c = 0;
  for (int i = 0; i < g->nnodes; i++)
    if (!g->nodes[i]->dead && tg_attr_int(g->nodes[i], "tessel.winograd", 0) != 0) c++;
  return c;
}

/* The pipeline up to winograd, the count, then the rest; the interpreter's y. */
static void check_interp(const char *what, const char *path, const tg_pass_opts *o, int want_wino,
                         const tun_npy *x, const tun_npy *ref) {
  ir_module *m = ir_module_new();
  tg_graph *g = NULL;
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_msg(tg_onnx_import(path, m, &g, &d) == TS_OK, "%s: %s", what, d.msg);
  ck_assert_msg(tg_run_pipeline_opts(g, "winograd", o, &d) == TS_OK, "%s: %s", what, d.msg);
  ck_assert_msg(count_winograd(g) == want_wino, "%s: %d convolutions in the Winograd form, want %d", what,
                count_winograd(g), want_wino);
  int np;
  const char *const *names = tg_pass_names(&np);
  bool after = false;
  for (int i = 0; i < np; i++) {
    if (after) ck_assert_msg(tg_run_pass(g, names[i], &d) == TS_OK, "%s: %s: %s", what, names[i], d.msg);
    after |= !strcmp(names[i], "winograd");
  }
  ir_tensor in = {.dtype = ir_dt(IR_F32), .ndim = x->ndim, .data = x->data}, out;
  memcpy(in.shape, x->shape, sizeof x->shape);
  ck_assert_msg(tg_graph_run(g, &in, &out, &d) == TS_OK, "%s: %s", what, d.msg);
  compare(what, out.data, out.shape, out.ndim, ref);
  ir_tensor_free(&out);
  ir_module_free(m);
}

/* tun_model_build with o, run through the C model API. */
static void check_built(const char *what, const char *path, const tun_model_opts *o, const tun_npy *x,
                        const tun_npy *ref) {
  char so[600], err[600];
  snprintf(so, sizeof so, "%s/%s.so", tmpdir, what);
  tun_model_result r;
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_msg(tun_model_build(path, so, o, &r, &d) == TS_OK, "%s: %s", what, d.msg);
  tun_model_result_fini(&r);
  tessel_model *m = tessel_model_load(so, err, sizeof err);
  ck_assert_msg(m != NULL, "%s: %s", what, err);
  ck_assert_int_eq(tessel_model_set_input(m, 0, x->data, x->ndim, x->shape), 0);
  ck_assert_msg(tessel_model_run(m) == 0, "%s: %s", what, tessel_model_error(m));
  const void *y;
  int nd;
  int64_t shape[TESSEL_MODEL_MAX_DIMS];
  ck_assert_int_eq(tessel_model_get_output(m, tessel_model_output_index(m, "y"), &y, &nd, shape), 0);
  compare(what, y, shape, nd, ref);
  tessel_model_free(m);
}

/* _i: model * NMODES + mode */
START_TEST(test_conv_vs_onnxruntime) {
  int mi = _i / NMODES, wi = _i % NMODES;
  char what[128], path[600], in[400], ref[400], p[500];
  snprintf(what, sizeof what, "%s_winograd_%s", conv_models[mi].name, mode_names[wi]);
  snprintf(path, sizeof path, "%s/conv/%s.onnx", models, conv_models[mi].name);
  ref_dirs(mi, in, ref, sizeof in);
  tun_npy x, y;
  ts_diag d;
  ts_diag_clear(&d);
  snprintf(p, sizeof p, "%s/x.npy", in);
  ck_assert_msg(tun_npy_read(p, &x, &d) == TS_OK, "%s", d.msg);
  snprintf(p, sizeof p, "%s/y.npy", ref);
  ck_assert_msg(tun_npy_read(p, &y, &d) == TS_OK, "%s", d.msg);
  tun_model_opts o;
  tun_model_opts_init(&o);
  o.graph.winograd = modes[wi];
  o.graph.winograd_tile = wi == 3 ? 2 : 0;
  check_interp(what, path, &o.graph, modes[wi] == TG_WINOGRAD_OFF ? 0 : conv_models[mi].winograd, &x, &y);
  check_built(what, path, &o, &x, &y);
  tun_npy_free(&x);
  tun_npy_free(&y);
}
END_TEST

static int count_transposes(const tg_graph *g, const int64_t *perm) {
  int c = 0, np;
  for (int i = 0; i < g->nnodes; i++) {
    const tg_node *n = g->nodes[i];
    const int64_t *p = n->dead || n->op != TG_OP_TRANSPOSE ? NULL : tg_attr_ints(n, "perm", &np);
    if (p && np == 5 && !memcmp(p, perm, 5 * sizeof *p)) c++;
  }
  return c;
}

/* The pipeline up to nchwc: the blocked convolutions and borders counted;
 * then the rest, interpreted, against onnxruntime; then built. */
START_TEST(test_nchwc_vs_onnxruntime) {
  char what[128], path[600], in[400], ref[400], p[500];
  snprintf(what, sizeof what, "%s_nchwc%d_winograd_%s", nchwc_cases[_i].name, nchwc_cases[_i].block,
           nchwc_cases[_i].wino == TG_WINOGRAD_OFF ? "off" : "all");
  snprintf(path, sizeof path, "%s/conv/%s.onnx", models, nchwc_cases[_i].name);
  ref_dirs_of(nchwc_cases[_i].name, in, ref, sizeof in);
  tun_npy x, y;
  ts_diag d;
  ts_diag_clear(&d);
  snprintf(p, sizeof p, "%s/x.npy", in);
  ck_assert_msg(tun_npy_read(p, &x, &d) == TS_OK, "%s", d.msg);
  snprintf(p, sizeof p, "%s/y.npy", ref);
  ck_assert_msg(tun_npy_read(p, &y, &d) == TS_OK, "%s", d.msg);
  tun_model_opts o;
  tun_model_opts_init(&o);
  o.graph.conv_block = nchwc_cases[_i].block;
  o.graph.winograd = nchwc_cases[_i].wino;
  ir_module *m = ir_module_new();
  tg_graph *g = NULL;
  ck_assert_msg(tg_onnx_import(path, m, &g, &d) == TS_OK, "%s: %s", what, d.msg);
  ck_assert_msg(tg_run_pipeline_opts(g, "nchwc", &o.graph, &d) == TS_OK, "%s: %s", what, d.msg);
  int convs = 0;
  for (int i = 0; i < g->nnodes; i++)
    convs += !g->nodes[i]->dead && g->nodes[i]->op == TG_OP_CONV && tg_attr_int(g->nodes[i], "tessel.nchwc", 0);
  static const int64_t to_blocked[5] = {0, 1, 3, 4, 2}, from_blocked[5] = {0, 1, 4, 2, 3};
  ck_assert_msg(convs == nchwc_cases[_i].convs, "%s: %d blocked convolutions", what, convs);
  ck_assert_msg(count_transposes(g, to_blocked) == nchwc_cases[_i].in, "%s: %d borders in", what,
                count_transposes(g, to_blocked));
  ck_assert_msg(count_transposes(g, from_blocked) == nchwc_cases[_i].out, "%s: %d borders out", what,
                count_transposes(g, from_blocked));
  int np;
  const char *const *names = tg_pass_names(&np);
  bool after = false;
  for (int i = 0; i < np; i++) {
    if (after) ck_assert_msg(tg_run_pass(g, names[i], &d) == TS_OK, "%s: %s: %s", what, names[i], d.msg);
    after |= !strcmp(names[i], "nchwc");
  }
  ir_tensor tin = {.dtype = ir_dt(IR_F32), .ndim = x.ndim, .data = x.data}, out;
  memcpy(tin.shape, x.shape, sizeof x.shape);
  ck_assert_msg(tg_graph_run(g, &tin, &out, &d) == TS_OK, "%s: %s", what, d.msg);
  compare(what, out.data, out.shape, out.ndim, &y);
  ir_tensor_free(&out);
  ir_module_free(m);
  check_built(what, path, &o, &x, &y);
  tun_npy_free(&x);
  tun_npy_free(&y);
}
END_TEST

START_TEST(test_import_100k_chain) {
  char path[600];
  snprintf(path, sizeof path, "%s/chain_100k.onnx", models);
  ir_module *m = ir_module_new();
  tg_graph *g = NULL;
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_msg(tg_onnx_import(path, m, &g, &d) == TS_OK, "%s", d.msg);
  ck_assert_int_eq(g->nnodes, 100000);
  ck_assert_int_eq(g->nvalues, 100002); /* x, c, t0..t99998, y */
  ck_assert_int_eq(tg_graph_verify(g, &d), TS_OK);
  int t = tg_value_find(g, "t54321");
  ck_assert_int_ge(t, 0);
  const tg_node *n = g->nodes[g->values[t]->producer];
  ck_assert_int_eq(n->op, TG_OP_RELU); /* odd: an unnamed Relu reading t54320 */
  ck_assert_int_eq(n->inputs[0], tg_value_find(g, "t54320"));
  ir_module_free(m);
}
END_TEST

int main(void) {
  if (!tr_model_env(&models, &root, python, ort_script)) return 2;
  snprintf(tmpdir, sizeof tmpdir, "/tmp/tessel-passes-models-XXXXXX");
  if (!mkdtemp(tmpdir)) return 2;
  for (int i = 0; i < NCONV + (int)(sizeof ref_models / sizeof ref_models[0]); i++) {
    const char *name = i < NCONV ? conv_models[i].name : ref_models[i - NCONV];
    char in[400], ref[400];
    ref_dirs_of(name, in, ref, sizeof in);
    char cmd[2400];
    snprintf(cmd, sizeof cmd, "'%s' '%s' '%s/conv/%s.onnx' '%s' '%s' --random 5", python, ort_script, models, name,
             in, ref);
    if (system(cmd) != 0) {
      fprintf(stderr, "test_passes_models: onnxruntime failed on %s (%s)\n", name, cmd);
      return 1;
    }
  }
  Suite *s = suite_create("passes_models");
  TCase *tc = tcase_create("models");
  tcase_set_timeout(tc, 300);
  tcase_add_loop_test(tc, test_conv_vs_onnxruntime, 0, NCONV * NMODES);
  tcase_add_loop_test(tc, test_nchwc_vs_onnxruntime, 0, NNCHWC);
  tcase_add_test(tc, test_import_100k_chain);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failures = srunner_ntests_failed(sr);
  srunner_free(sr);
  if (!failures) tr_rmtree(tmpdir);
  return failures ? 1 : 0;
}
