/* test_passes_ort.c — legalisation and fusion against onnxruntime: every
 * generated model (MODELS_DIR: mlp, cnn, transformer at batch 2, the
 * per-operator models of tests/models/ops) is imported, put through the
 * whole pass pipeline and run on the reference interpreter (tg_graph_run);
 * its outputs must match onnxruntime's (tests/models/ort_run.py, graph
 * optimisations off) on the same seeded inputs. This checks each op's
 * kernel text against the ONNX semantics as onnxruntime implements them,
 * not against our own reading of the spec. One Python process computes all
 * the references up front. */
#include <check.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ir/graph/graph_interp.h"
#include "ir/graph/onnx.h"
#include "ir/graph/passes.h"
#include "ir/graph/tasks.h"
#include "search/search.h"
#include "tuner/npy.h"

#define MAX_MODELS 1024

static const char *models;
static char tmpdir[256];
static char *names[MAX_MODELS]; /* relative to MODELS_DIR, without ".onnx" */
static int nmodels;

static void sanitize(const char *in, char *out, size_t n) {
  size_t k = 0;
  for (; in[k] && k + 1 < n; k++) {
    char c = in[k];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
              c == '.';
    out[k] = ok ? c : '_';
  }
  out[k] = '\0';
  if (!strcmp(out, "") || !strcmp(out, ".") || !strcmp(out, "..")) snprintf(out, n, "output");
}

static void add_model(const char *rel) {
  if (nmodels < MAX_MODELS) names[nmodels++] = strdup(rel);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void list_models(void) {
  add_model("mlp");
  add_model("cnn");
  add_model("transformer");
  add_model("transformer_erf");
  /* QDQ chains the qdq pass turns into QLinearConv / QLinearMatMul, against
   * onnxruntime's own fused int8 kernels (--optimize): uint8 outputs equal */
  add_model("qdq_conv");
  add_model("qdq_matmul");
  add_model("qdq_matmul_act");
  add_model("qdq_moves");
  char dir[600];
  snprintf(dir, sizeof dir, "%s/ops", models);
  DIR *dp = opendir(dir);
  if (!dp) return;
  struct dirent *e;
  int first = nmodels;
  while ((e = readdir(dp)) != NULL) {
    size_t L = strlen(e->d_name);
    if (L < 6 || strcmp(e->d_name + L - 5, ".onnx") || !strncmp(e->d_name, "bad_", 4)) continue;
    char rel[300];
    snprintf(rel, sizeof rel, "ops/%.*s", (int)(L - 5), e->d_name);
    add_model(rel);
  }
  closedir(dp);
  qsort(names + first, (size_t)(nmodels - first), sizeof names[0], cmp_str);
}

static void dirs_of(int i, char *in, char *out, size_t n) {
  snprintf(in, n, "%s/in%d", tmpdir, i);
  snprintf(out, n, "%s/out%d", tmpdir, i);
}

/* One Python process runs ort_run.main for every model; a model whose
 * reference fails gets a file `failed` in its output dir. */
static bool compute_references(void) {
  const char *root = getenv("TESSEL_SOURCE_ROOT");
  char py[600], script[700];
  snprintf(py, sizeof py, "%s/.venv/bin/python", root ? root : ".");
  snprintf(script, sizeof script, "%s/refs.py", tmpdir);
  FILE *f = fopen(script, "w");
  if (!f) return false;
  fprintf(f, "import os, sys\nsys.path.insert(0, '%s/tests/models')\nimport ort_run\n", root ? root : ".");
  fprintf(f, "jobs = [\n");
  for (int i = 0; i < nmodels; i++) {
    char in[512], out[512];
    dirs_of(i, in, out, sizeof in);
    fprintf(f, "  ('%s/%s.onnx', '%s', '%s'),\n", models, names[i], in, out);
  }
  fprintf(f, "]\nfor m, i, o in jobs:\n"
             "    opt = ['--optimize'] if os.path.basename(m).startswith('qdq_') else []\n"
             "    rc = ort_run.main(['ort_run.py', m, i, o, '--random', '7', '--sym', 'batch=2'] + opt)\n"
             "    if rc:\n"
             "        os.makedirs(o, exist_ok=True)\n"
             "        open(os.path.join(o, 'failed'), 'w').close()\n");
  fclose(f);
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "'%s' '%s' 2>'%s/refs.err'", py, script, tmpdir);
  return system(cmd) == 0;
}

static void load_npy(const char *dir, const char *name, tun_npy *out) {
  char s[300], path[900];
  sanitize(name, s, sizeof s);
  snprintf(path, sizeof path, "%s/%s.npy", dir, s);
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_msg(tun_npy_read(path, out, &d) == TS_OK, "%s", d.msg);
}

START_TEST(test_model_vs_onnxruntime) {
  const char *name = names[_i];
  char in[512], out[512], p[1100];
  dirs_of(_i, in, out, sizeof in);
  snprintf(p, sizeof p, "%s/failed", out);
  ck_assert_msg(access(p, F_OK) != 0, "%s: onnxruntime could not run it (see %s/refs.err)", name, tmpdir);
  ir_module *m = ir_module_new();
  tg_graph *g = NULL;
  ts_diag d;
  ts_diag_clear(&d);
  snprintf(p, sizeof p, "%s/%s.onnx", models, name);
  ck_assert_msg(tg_onnx_import(p, m, &g, &d) == TS_OK, "%s: %s", name, d.msg);
  ck_assert_msg(tg_run_pipeline(g, NULL, &d) == TS_OK, "%s: %s", name, d.msg);
  ir_tensor ins[16], outs[16];
  tun_npy nin[16];
  ck_assert_int_le(g->ninputs, 16);
  ck_assert_int_le(g->noutputs, 16);
  for (int i = 0; i < g->ninputs; i++) {
    load_npy(in, g->values[g->inputs[i]]->name, &nin[i]);
    ins[i] = (ir_tensor){.dtype = ir_dt((ir_dtype_code)nin[i].dtype), .ndim = nin[i].ndim, .data = nin[i].data};
    memcpy(ins[i].shape, nin[i].shape, sizeof nin[i].shape);
  }
  ck_assert_msg(tg_graph_run(g, ins, outs, &d) == TS_OK, "%s: %s", name, d.msg);
  for (int i = 0; i < g->noutputs; i++) {
    tun_npy ref;
    load_npy(out, g->values[g->outputs[i]]->name, &ref);
    ir_tensor rt = {.dtype = ir_dt((ir_dtype_code)ref.dtype), .ndim = ref.ndim, .data = ref.data};
    memcpy(rt.shape, ref.shape, sizeof ref.shape);
    ck_assert_msg(ir_dtype_eq(rt.dtype, outs[i].dtype), "%s: output %d dtype", name, i);
    ck_assert_int_eq(rt.ndim, outs[i].ndim);
    for (int a = 0; a < rt.ndim; a++) ck_assert_int_eq(rt.shape[a], outs[i].shape[a]);
    /* NaN where onnxruntime has NaN (sqrt or pow of a negative) is a match */
    int64_t cnt = ir_tensor_numel(&outs[i]), bad = -1;
    double worst = 0;
    /* float16 models: ONNX leaves the accumulation precision of a float16
     * MatMul open (tessel accumulates in float16, onnxruntime in float32), so
     * a few units of float16's last place (2^-11 relative) are a match */
    bool half = false;
    for (int j = 0; j < g->nvalues; j++) half |= g->values[j]->dtype.code == IR_F16;
    double rtol = half ? 4e-3 : 1e-4, atol = 1e-5;
    /* integer outputs (the quantization ops' int8/uint8, ConvInteger's and
     * MatMulInteger's int32) must be equal */
    if (!ir_dtype_is_float(rt.dtype)) rtol = atol = 0;
    /* ... except one step of com.microsoft's QLinearAdd and QLinearMul: onnxruntime
     * multiplies the integer differences by a precomputed scale ratio (MLAS), tessel
     * dequantizes, computes in float and requantizes by division, so a value within
     * rounding of a half step may round to the neighbour */
    if (!strncmp(name, "ops/qlinearadd", 14) || !strncmp(name, "ops/qlinearmul", 14)) atol = 1;
    for (int64_t e = 0; e < cnt; e++) {
      double x = ir_tensor_get(&outs[i], e), r = ir_tensor_get(&rt, e);
      if (isnan(x) && isnan(r)) continue;
      double err = fabs(x - r);
      if (!(err <= atol + rtol * fabs(r))) {
        if (bad < 0 || !(err <= worst)) worst = err;
        if (bad < 0) bad = e;
      }
    }
    ck_assert_msg(bad < 0, "%s: output %s: element %lld is %g, onnxruntime says %g (max abs err %g)", name,
                  g->values[g->outputs[i]]->name, (long long)bad, ir_tensor_get(&outs[i], bad),
                  ir_tensor_get(&rt, bad), worst);
    tun_npy_free(&ref);
    ir_tensor_free(&outs[i]);
  }
  for (int i = 0; i < g->ninputs; i++) tun_npy_free(&nin[i]);
  ir_module_free(m);
}
END_TEST

/* The live calls' ONNX ops (tessel.op) after the whole pipeline: how many
 * of op. */
static int count_op(const tg_graph *g, const char *op) {
  int c = 0;
  for (int i = 0; i < g->nnodes; i++) {
    const tg_node *n = g->nodes[i];
    if (n->dead) continue;
    const char *o = n->op == TG_OP_CALL ? tg_attr_str(n, "tessel.op", "") : tg_op_name(n->op);
    c += !strcmp(o, op);
  }
  return c;
}

/* The QDQ CNN quantized by onnxruntime's tools (quant_cnn_qdq: two Conv,
 * a MaxPool, a Gemm between DequantizeLinear and QuantizeLinear) built with
 * the qdq pass: its convolutions and its Gemm are the integer ops, no float
 * Conv or Gemm is left, and the MaxPool runs on uint8; with --qdq off
 * (negative control) they stay float. Legalised only (fusion merges calls). */
START_TEST(test_qdq_fused) {
  for (int off = 0; off < 2; off++) {
    ir_module *m = ir_module_new();
    tg_graph *g = NULL;
    ts_diag d;
    ts_diag_clear(&d);
    char p[700];
    snprintf(p, sizeof p, "%s/quant_cnn_qdq.onnx", models);
    ck_assert_msg(tg_onnx_import(p, m, &g, &d) == TS_OK, "%s", d.msg);
    tg_pass_opts o = {.qdq_off = off};
    ck_assert_msg(tg_run_pipeline_opts(g, "legalize", &o, &d) == TS_OK, "%s", d.msg);
    if (!off) {
      ck_assert_int_eq(count_op(g, "QLinearConv"), 2);
      ck_assert_int_eq(count_op(g, "QLinearMatMul"), 1);
      ck_assert_int_eq(count_op(g, "Conv") + count_op(g, "Gemm") + count_op(g, "MatMul"), 0);
      bool u8pool = false;
      for (int i = 0; i < g->nnodes; i++) {
        const tg_node *n = g->nodes[i];
        if (!n->dead && n->op == TG_OP_CALL && !strcmp(tg_attr_str(n, "tessel.op", ""), "MaxPool"))
          u8pool = g->values[n->outputs[0]]->dtype.code == IR_U8;
      }
      ck_assert_msg(u8pool, "the MaxPool does not run on uint8");
      /* the integer convolution's task counts its multiply-adds (2 per tap
       * and output: 8 channels of 12x12 from 3x3x3 taps), as float ones do */
      ck_assert_msg(tg_run_pipeline_opts(g, NULL, &o, &d) == TS_OK, "%s", d.msg);
      tg_task *t = NULL;
      int nt = 0;
      ck_assert_msg(tg_extract_tasks(g, &t, &nt, &d) == TS_OK, "%s", d.msg);
      bool seen = false;
      cg_target vt;
      ck_assert(cg_target_parse("llvm -mattr=+avx512f,+avx512bw,+avx512vnni", &vt, &d) == TS_OK);
      int nconv = 0;
      for (int i = 0; i < nt; i++) {
        if (!strstr(t[i].name, "qlinear_conv")) continue;
        if (!seen) { /* the first: conv 1 */
          seen = true;
          ck_assert_msg(t[i].flops >= 2.0 * 8 * 12 * 12 * 27, "%s: %g flops", t[i].name, t[i].flops);
        }
        /* channels-last (a byte transpose + pad stage, the sum over NHWC)
         * and tensorized by the VNNI rule on the packed weight: its
         * candidates pass RewriteTensorize */
        ck_assert_msg(strstr(t[i].definition, "_nhwc(") && strstr(t[i].definition, "_acc("), "%s", t[i].definition);
        sch_trace **sk;
        int ns, tensor = 0;
        ck_assert_msg(srch_sketches(t[i].func, &vt, NULL, &sk, &ns, &d) == TS_OK, "%s", d.msg);
        for (int j = 0; j < ns; j++) {
          char *js = sch_trace_to_json(sk[j]);
          if (strstr(js, "x86.avx512.vnni.u8i8.packed.")) {
            sch_traced *c = srch_instantiate(sk[j], t[i].func, &vt, true, 1, &d);
            ck_assert_msg(c != NULL, "%s: %s", t[i].name, d.msg);
            sch_traced_free(c);
            tensor++;
          }
          free(js);
          sch_trace_free(sk[j]);
        }
        ts_free(sk);
        ck_assert_msg(tensor >= 1, "%s: no tensorized sketch", t[i].name);
        nconv++;
      }
      ck_assert(seen);
      ck_assert_int_eq(nconv, 2);
      tg_tasks_free(t, nt);
    } else {
      ck_assert_int_eq(count_op(g, "QLinearConv"), 0);
      ck_assert_int_eq(count_op(g, "Conv"), 2);
    }
    ir_module_free(m);
  }
}
END_TEST

/* The nodes of op (or any op: NULL) whose attribute attr is set, and of op. */
static void count_attr(const tg_graph *g, tg_op op, const char *attr, int *with, int *all) {
  *with = *all = 0;
  for (int i = 0; i < g->nnodes; i++) {
    const tg_node *n = g->nodes[i];
    if (n->dead || n->op != op) continue;
    (*all)++;
    *with += tg_attr_int(n, attr, 0) != 0;
  }
}

/* The QDQ small ResNet (quant_resnet_qdq: a 7x7 stride-2 stem, a padded
 * MaxPool, two bottlenecks with residual Adds, GlobalAveragePool, Gemm)
 * after the qdq pass is one channels-last int8 region: every QLinearConv and
 * the MaxPool carry tessel.nhwc, the elementwise DequantizeLinear -> Add ->
 * QuantizeLinear chains run on NHWC tensors, and only two Transposes are
 * left (the stem's input, the float tail's GlobalAveragePool); with --qdq
 * nchw none. The whole pipeline on the reference interpreter gives the same
 * output both ways, bit for bit (the layout changes no arithmetic). */
START_TEST(test_qdq_nhwc) {
  ir_tensor out[2];
  for (int nchw = 0; nchw < 2; nchw++) {
    ir_module *m = ir_module_new();
    tg_graph *g = NULL;
    ts_diag d;
    ts_diag_clear(&d);
    char p[700];
    snprintf(p, sizeof p, "%s/quant_resnet_qdq.onnx", models);
    ck_assert_msg(tg_onnx_import(p, m, &g, &d) == TS_OK, "%s", d.msg);
    tg_pass_opts o = {.qdq_nchw = nchw};
    ck_assert_msg(tg_run_pipeline_opts(g, "qdq", &o, &d) == TS_OK, "%s", d.msg);
    int with, all;
    count_attr(g, TG_OP_QLINEAR_CONV, "tessel.nhwc", &with, &all);
    ck_assert_int_eq(all, 8);
    ck_assert_int_eq(with, nchw ? 0 : 8);
    count_attr(g, TG_OP_MAX_POOL, "tessel.nhwc", &with, &all);
    ck_assert_int_eq(all, 1);
    ck_assert_int_eq(with, nchw ? 0 : 1);
    count_attr(g, TG_OP_TRANSPOSE, "perm", &with, &all);
    ck_assert_int_eq(all, nchw ? 0 : 2);
    count_attr(g, TG_OP_ADD, "", &with, &all);
    ck_assert_int_eq(all, 2);
    for (int i = 0; i < g->nnodes; i++) /* the residual Adds read and write NHWC: [1, 5, 5, 20] */
      if (!g->nodes[i]->dead && g->nodes[i]->op == TG_OP_ADD && !nchw)
        ck_assert_int_eq(g->values[g->nodes[i]->outputs[0]]->dims[3].value, 20);
    ck_assert_msg(tg_run_pipeline_opts(g, NULL, &o, &d) == TS_OK, "%s", d.msg);
    ir_tensor in = {.dtype = ir_dt(IR_F32), .ndim = 4, .shape = {1, 3, 37, 35}};
    float *x = malloc(sizeof(float) * 3 * 37 * 35);
    ck_assert_ptr_nonnull(x);
    for (int i = 0; i < 3 * 37 * 35; i++) x[i] = (float)((i * 7919) % 1000) / 250.0f - 2.0f;
    in.data = x;
    ck_assert_msg(tg_graph_run(g, &in, &out[nchw], &d) == TS_OK, "%s", d.msg);
    free(x);
    ir_module_free(m);
  }
  ck_assert_int_eq(ir_tensor_numel(&out[0]), 10);
  for (int64_t e = 0; e < 10; e++) ck_assert_double_eq(ir_tensor_get(&out[0], e), ir_tensor_get(&out[1], e));
  ir_tensor_free(&out[0]);
  ir_tensor_free(&out[1]);
}
END_TEST

int main(void) {
  models = getenv("MODELS_DIR");
  char probe[600];
  snprintf(probe, sizeof probe, "%s/cnn.onnx", models ? models : "");
  if (!models || access(probe, R_OK) != 0) {
    fprintf(stderr, "test_passes_ort: MODELS_DIR has no generated models (run scripts/setup.sh)\n");
    return 1;
  }
  snprintf(tmpdir, sizeof tmpdir, "/tmp/tessel-passes-ort-XXXXXX");
  if (!mkdtemp(tmpdir)) return 2;
  list_models();
  if (!compute_references()) {
    fprintf(stderr, "test_passes_ort: the onnxruntime references could not be computed (%s/refs.err)\n", tmpdir);
    return 1;
  }
  Suite *s = suite_create("passes_ort");
  TCase *tc = tcase_create("models");
  tcase_set_timeout(tc, 120);
  tcase_add_loop_test(tc, test_model_vs_onnxruntime, 0, nmodels);
  tcase_add_test(tc, test_qdq_fused);
  tcase_add_test(tc, test_qdq_nhwc);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failures = srunner_ntests_failed(sr);
  srunner_free(sr);
  fprintf(stderr, "test_passes_ort: %d models against onnxruntime\n", nmodels);
  if (!failures) {
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
  }
  for (int i = 0; i < nmodels; i++) free(names[i]);
  return failures ? 1 : 0;
}
