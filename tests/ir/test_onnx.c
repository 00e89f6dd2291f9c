/* test_onnx.c — ONNX import (ir/graph/onnx.h) on the models that
 * tests/models/gen_models.py writes into MODELS_DIR: the MLP, CNN and
 * transformer (value/node counts, op mix and shapes, the symbolic batch),
 * every per-op model against the output shapes onnxruntime produced
 * (ops/manifest.json), the canonical form of opset-dependent inputs, the
 * refusals (naming node, op and opset), truncated and bit-flipped files
 * (never a crash), every allocation failing in turn, and the operator
 * registry (ir/graph/ops.h) holding one consistent row per op. */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/graph/onnx.h"
#include "ir/graph/ops.h"

static char path_buf[4096];

static const char *model_path(const char *rel) {
  const char *dir = getenv("MODELS_DIR");
  ck_assert_msg(dir != NULL, "MODELS_DIR is not set (run through meson test)");
  snprintf(path_buf, sizeof path_buf, "%s/%s", dir, rel);
  FILE *f = fopen(path_buf, "rb");
  ck_assert_msg(f != NULL, "%s is missing: the test_models target writes it (scripts/setup.sh makes .venv)", path_buf);
  fclose(f);
  return path_buf;
}

static ir_module *M;
static void msetup(void) { M = ir_module_new(); }
static void mteardown(void) { ir_module_free(M); }

static tg_graph *import_ok(const char *rel) {
  ts_diag d;
  ts_diag_clear(&d);
  tg_graph *g = NULL;
  ts_status st = tg_onnx_import(model_path(rel), M, &g, &d);
  ck_assert_msg(st == TS_OK, "%s: %s", rel, d.msg);
  ck_assert_ptr_nonnull(g);
  ts_diag_clear(&d);
  ck_assert_msg(tg_graph_verify(g, &d) == TS_OK, "%s", d.msg);
  return g;
}

static int count_op(const tg_graph *g, tg_op op) {
  int n = 0;
  for (int i = 0; i < g->nnodes; i++) n += !g->nodes[i]->dead && g->nodes[i]->op == op;
  return n;
}

static int count_kind(const tg_graph *g, tg_value_kind k) {
  int n = 0;
  for (int i = 0; i < g->nvalues; i++) n += g->values[i]->kind == k;
  return n;
}

/* "f32[batch,16,64]" of a value, for comparisons */
static char type_buf[256];
static const char *type_of(const tg_graph *g, int id) {
  ts_strbuf sb;
  ts_strbuf_init(&sb);
  tg_value_type_str(g->values[id], &sb);
  snprintf(type_buf, sizeof type_buf, "%s", sb.data);
  ts_strbuf_fini(&sb);
  return type_buf;
}

static const tg_node *first_node(const tg_graph *g, tg_op op) {
  for (int i = 0; i < g->nnodes; i++)
    if (g->nodes[i]->op == op) return g->nodes[i];
  ck_abort_msg("no %s node", tg_op_name(op));
  return NULL;
}

START_TEST(test_mlp) {
  tg_graph *g = import_ok("mlp.onnx");
  ck_assert_int_eq(g->opset, 17);
  ck_assert_str_eq(g->name, "mlp");
  /* Gemm Relu MatMul Add Relu Gemm; x, 6 weights, 6 results */
  static const tg_op want[] = {TG_OP_GEMM, TG_OP_RELU, TG_OP_MATMUL, TG_OP_ADD, TG_OP_RELU, TG_OP_GEMM};
  ck_assert_int_eq(g->nnodes, 6);
  for (int i = 0; i < 6; i++) ck_assert_int_eq(g->nodes[i]->op, want[i]);
  ck_assert_int_eq(g->nvalues, 13);
  ck_assert_int_eq(count_kind(g, TG_V_CONST), 6);
  ck_assert_int_eq(g->ninputs, 1);
  ck_assert_str_eq(type_of(g, g->inputs[0]), "f32[4,64]");
  ck_assert_int_eq(g->noutputs, 1);
  ck_assert_str_eq(g->values[g->outputs[0]]->name, "y");
  ck_assert_str_eq(type_of(g, g->outputs[0]), "f32[4,10]");
  ck_assert_str_eq(type_of(g, g->nodes[0]->outputs[0]), "f32[4,128]");
  /* Gemm attributes complete, defaults filled */
  ck_assert_int_eq(tg_attr_int(g->nodes[0], "transB", -1), 1);
  ck_assert_int_eq(tg_attr_int(g->nodes[0], "transA", -1), 0);
  ck_assert_double_eq(tg_attr_float(g->nodes[0], "alpha", -1), 1.0);
  /* weights carry their data */
  int w = g->nodes[0]->inputs[1];
  ck_assert_int_eq(g->values[w]->kind, TG_V_CONST);
  ck_assert_uint_eq(g->values[w]->nbytes, 128 * 64 * 4);
  ck_assert_ptr_nonnull(g->values[w]->data);
}
END_TEST

START_TEST(test_cnn) {
  tg_graph *g = import_ok("cnn.onnx");
  ck_assert_int_eq(g->opset, 13);
  ck_assert_int_eq(g->nnodes, 17);
  ck_assert_int_eq(count_op(g, TG_OP_CONV), 4);
  ck_assert_int_eq(count_op(g, TG_OP_BATCH_NORM), 4);
  ck_assert_int_eq(count_op(g, TG_OP_RELU), 4); /* three conv-bn-relu, one after the residual add */
  ck_assert_int_eq(count_op(g, TG_OP_MAX_POOL), 1);
  ck_assert_int_eq(count_op(g, TG_OP_ADD), 1);
  ck_assert_int_eq(count_op(g, TG_OP_GLOBAL_AVERAGE_POOL), 1);
  ck_assert_int_eq(count_op(g, TG_OP_FLATTEN), 1);
  ck_assert_int_eq(count_op(g, TG_OP_GEMM), 1);
  ck_assert_int_eq(count_kind(g, TG_V_CONST), 8 + 16 + 2);
  ck_assert_int_eq(g->nvalues, 1 + 26 + 17);
  ck_assert_str_eq(type_of(g, first_node(g, TG_OP_MAX_POOL)->outputs[0]), "f32[1,16,16,16]");
  ck_assert_str_eq(type_of(g, first_node(g, TG_OP_GLOBAL_AVERAGE_POOL)->outputs[0]), "f32[1,32,1,1]");
  ck_assert_str_eq(type_of(g, first_node(g, TG_OP_FLATTEN)->outputs[0]), "f32[1,32]");
  ck_assert_str_eq(type_of(g, g->outputs[0]), "f32[1,10]");
  /* the residual Add reads the MaxPool output */
  const tg_node *add = first_node(g, TG_OP_ADD);
  ck_assert_int_eq(add->inputs[1], first_node(g, TG_OP_MAX_POOL)->outputs[0]);
  /* Conv canonical attributes */
  const tg_node *c = first_node(g, TG_OP_CONV);
  int n;
  const int64_t *pads = tg_attr_ints(c, "pads", &n);
  ck_assert_int_eq(n, 4);
  ck_assert_int_eq(pads[0], 1);
  ck_assert_int_eq(tg_attr_int(c, "group", 0), 1);
  ck_assert_str_eq(tg_attr_str(c, "auto_pad", ""), "NOTSET");
  ck_assert_ptr_nonnull(tg_attr_ints(c, "dilations", &n));
}
END_TEST

/* every dim of every value is a constant or the symbol "batch" */
static void only_batch_symbol(const tg_graph *g) {
  for (int i = 0; i < g->nvalues; i++)
    for (int k = 0; k < g->values[i]->ndim; k++)
      if (g->values[i]->dims[k].sym) {
        ck_assert_str_eq(g->values[i]->dims[k].sym, "batch");
        ck_assert_int_eq(k, 0);
      }
}

START_TEST(test_transformer) {
  tg_graph *g = import_ok("transformer.onnx");
  ck_assert_int_eq(g->opset, 20);
  ck_assert_str_eq(type_of(g, g->inputs[0]), "f32[batch,16,64]");
  ck_assert_str_eq(type_of(g, g->outputs[0]), "f32[batch,16,64]");
  ck_assert(!tg_value_is_static(g->values[g->inputs[0]]));
  ck_assert_int_eq(count_op(g, TG_OP_MATMUL), 8);
  ck_assert_int_eq(count_op(g, TG_OP_SOFTMAX), 1);
  ck_assert_int_eq(count_op(g, TG_OP_LAYER_NORM), 2);
  ck_assert_int_eq(count_op(g, TG_OP_GELU), 1);
  ck_assert_int_eq(count_op(g, TG_OP_RESHAPE), 4);
  ck_assert_int_eq(count_op(g, TG_OP_TRANSPOSE), 4);
  ck_assert_str_eq(type_of(g, first_node(g, TG_OP_SOFTMAX)->outputs[0]), "f32[batch,4,16,16]");
  ck_assert_int_eq(tg_attr_int(first_node(g, TG_OP_SOFTMAX), "axis", -1), 3);
  ck_assert_int_eq(tg_attr_int(first_node(g, TG_OP_LAYER_NORM), "axis", -1), 2);
  /* constant reshape targets became attributes; outputs exact */
  for (int i = 0; i < g->nnodes; i++) {
    const tg_node *n = g->nodes[i];
    if (n->op != TG_OP_RESHAPE) continue;
    ck_assert_int_eq(n->nin, 1);
    ck_assert_ptr_nonnull(tg_node_attr(n, "shape"));
    const tg_value *o = g->values[n->outputs[0]];
    ck_assert_str_eq(o->dims[0].sym, "batch");
  }
  only_batch_symbol(g);
}
END_TEST

START_TEST(test_transformer_erf) {
  tg_graph *g = import_ok("transformer_erf.onnx");
  ck_assert_int_eq(g->opset, 17);
  ck_assert_int_eq(count_op(g, TG_OP_ERF), 1);
  ck_assert_int_eq(count_op(g, TG_OP_GELU), 0);
  ck_assert_int_eq(count_op(g, TG_OP_SHAPE), 1);
  ck_assert_int_eq(count_op(g, TG_OP_CONCAT), 2);
  /* the reshape targets hold the symbolic batch: the shape input stays,
   * and the outputs still have exact dims */
  int seen = 0;
  for (int i = 0; i < g->nnodes; i++) {
    const tg_node *n = g->nodes[i];
    if (n->op != TG_OP_RESHAPE) continue;
    seen++;
    ck_assert_int_eq(n->nin, 2);
    const char *t = type_of(g, n->outputs[0]);
    ck_assert_msg(!strcmp(t, "f32[batch,16,4,16]") || !strcmp(t, "f32[batch,16,64]"), "%s", t);
  }
  ck_assert_int_eq(seen, 4);
  ck_assert_str_eq(type_of(g, first_node(g, TG_OP_SHAPE)->outputs[0]), "i64[3]");
  ck_assert_str_eq(type_of(g, g->outputs[0]), "f32[batch,16,64]");
  only_batch_symbol(g);
}
END_TEST

/* Each per-op model's output shapes equal onnxruntime's. */
START_TEST(test_op_models_vs_onnxruntime) {
  json_error_t je;
  json_t *man = json_load_file(model_path("ops/manifest.json"), 0, &je);
  ck_assert_msg(man && json_is_array(man), "manifest: %s", je.text);
  bool covered[TG_OP_COUNT] = {false};
  int min_opset = 99, max_opset = 0, nshapes = 0;
  size_t i;
  json_t *e;
  json_array_foreach(man, i, e) {
    const char *file = json_string_value(json_object_get(e, "file"));
    int opset = (int)json_integer_value(json_object_get(e, "opset"));
    char rel[256];
    snprintf(rel, sizeof rel, "ops/%s", file);
    ir_module *m = ir_module_new();
    ts_diag d;
    ts_diag_clear(&d);
    tg_graph *g = NULL;
    ts_status st = tg_onnx_import(model_path(rel), m, &g, &d);
    ck_assert_msg(st == TS_OK, "%s: %s", file, d.msg);
    ck_assert_int_eq(g->opset, opset);
    min_opset = opset < min_opset ? opset : min_opset;
    max_opset = opset > max_opset ? opset : max_opset;
    tg_op op = tg_op_from_name(json_string_value(json_object_get(e, "op")));
    ck_assert_msg(op != TG_OP_COUNT, "%s", file);
    covered[op] = true;
    /* the op is in the graph (a Constant becomes a value) */
    /* (a Dropout without a mask output becomes an Identity, a CastLike a Cast,
     * a QLinearConv a Conv between DequantizeLinear and QuantizeLinear; an
     * expanded op never has a node of its own: its output shapes are checked
     * below, its values by test_passes_ort) */
    if (op == TG_OP_CONSTANT)
      ck_assert_int_ge(count_kind(g, TG_V_CONST), 1);
    else if (!(tg_op_def_of(op)->flags & TG_OPF_EXPANDED))
      ck_assert_msg(count_op(g, op) + (op == TG_OP_DROPOUT ? count_op(g, TG_OP_IDENTITY) : 0) +
                            (op == TG_OP_CAST_LIKE ? count_op(g, TG_OP_CAST) : 0) +
                            (op == TG_OP_QLINEAR_CONV ? count_op(g, TG_OP_CONV) * count_op(g, TG_OP_QUANTIZE_LINEAR) : 0) >= 1,
                    "%s: no %s node", file, tg_op_name(op));
    json_t *outs = json_object_get(e, "outputs"), *shapes = json_object_get(e, "shapes");
    if (json_is_array(shapes)) {
      for (size_t k = 0; k < json_array_size(outs); k++) {
        int id = tg_value_find(g, json_string_value(json_array_get(outs, k)));
        ck_assert_int_ge(id, 0);
        const tg_value *v = g->values[id];
        json_t *sh = json_array_get(shapes, k);
        ck_assert_msg((size_t)v->ndim == json_array_size(sh), "%s output %zu: rank %d, onnxruntime %zu", file, k,
                      v->ndim, json_array_size(sh));
        for (int j = 0; j < v->ndim; j++) {
          ck_assert_ptr_null(v->dims[j].sym);
          ck_assert_msg(v->dims[j].value == json_integer_value(json_array_get(sh, (size_t)j)),
                        "%s output %zu dim %d: %lld, onnxruntime %lld", file, k, j, (long long)v->dims[j].value,
                        (long long)json_integer_value(json_array_get(sh, (size_t)j)));
        }
        nshapes++;
      }
    }
    ir_module_free(m);
  }
  json_decref(man);
  /* onnxruntime runs opset 7 on; opsets 1 to 6 are tests/models' legacy/
   * cases (conformance_legacy, NumPy references) */
  ck_assert_int_eq(min_opset, 7);
  tg_graph *g1 = import_ok("legacy/test_relu_consumed_op1/model.onnx");
  ck_assert_int_eq(g1->opset, TG_ONNX_OPSET_MIN);
  ck_assert_int_eq(count_op(g1, TG_OP_RELU), 1);
  ck_assert_int_ge(max_opset, 24);
  ck_assert_int_gt(nshapes, 60);
  for (int op = 0; op < TG_OP_COUNT; op++)
    if (op != TG_OP_CALL) ck_assert_msg(covered[op], "no per-op model for %s", tg_op_name((tg_op)op));
}
END_TEST

static const tg_node *only_node(ir_module *m, const char *rel) {
  ts_diag d;
  ts_diag_clear(&d);
  tg_graph *g = NULL;
  ck_assert_msg(tg_onnx_import(model_path(rel), m, &g, &d) == TS_OK, "%s: %s", rel, d.msg);
  ck_assert_int_eq(g->nnodes, 1);
  return g->nodes[0];
}

static void ints_eq(const tg_node *n, const char *attr, int cnt, const int64_t *want) {
  int k;
  const int64_t *v = tg_attr_ints(n, attr, &k);
  ck_assert_msg(k == cnt, "%s: %d entries, want %d", attr, k, cnt);
  for (int i = 0; i < cnt; i++) ck_assert_msg(v[i] == want[i], "%s[%d] = %lld, want %lld", attr, i, (long long)v[i], (long long)want[i]);
}

/* Opset-dependent input forms end up in one form. */
START_TEST(test_canonical_forms) {
  const tg_node *n = only_node(M, "ops/split_num_op18.onnx"); /* num_outputs=3 on 7 */
  ck_assert_int_eq(n->nin, 1);
  ints_eq(n, "split", 3, (int64_t[]){3, 3, 1});
  ck_assert_ptr_null(tg_node_attr(n, "num_outputs"));
  n = only_node(M, "ops/split_op13.onnx"); /* split input [1,2,3] */
  ck_assert_int_eq(n->nin, 1);
  ints_eq(n, "split", 3, (int64_t[]){1, 2, 3});
  n = only_node(M, "ops/reducemean_op13.onnx"); /* axes attribute */
  ints_eq(n, "axes", 2, (int64_t[]){2, 3});
  n = only_node(M, "ops/reducemean_op18.onnx"); /* axes input [-1] */
  ck_assert_int_eq(n->nin, 1);
  ints_eq(n, "axes", 1, (int64_t[]){3});
  ck_assert_int_eq(tg_attr_int(n, "keepdims", -1), 0);
  n = only_node(M, "ops/reducesum_all_op13.onnx"); /* no axes: all */
  ints_eq(n, "axes", 4, (int64_t[]){0, 1, 2, 3});
  n = only_node(M, "ops/pad_axes_op18.onnx"); /* pads [2,1,2,1] on axes [-1,2] */
  ck_assert_int_eq(n->nin, 1);
  ints_eq(n, "pads", 8, (int64_t[]){0, 0, 1, 2, 0, 0, 1, 2});
  ck_assert_str_eq(tg_attr_str(n, "mode", ""), "edge");
  n = only_node(M, "ops/pad_op13.onnx");
  ck_assert_double_eq(tg_attr_float(n, "value", 0), 1.5);
  n = only_node(M, "ops/clip_max_op21.onnx"); /* min omitted, max 6 */
  ck_assert_int_eq(n->nin, 1);
  ck_assert_double_eq(tg_attr_float(n, "max", 0), 6.0);
  ck_assert(tg_attr_float(n, "min", 0) < -1e300);
  n = only_node(M, "ops/conv_same_op18.onnx"); /* SAME_UPPER, 8 -> 4 with stride 2, k 3 */
  ints_eq(n, "pads", 4, (int64_t[]){0, 0, 1, 1});
  ck_assert_str_eq(tg_attr_str(n, "auto_pad", ""), "NOTSET");
  ck_assert_int_eq(tg_attr_int(n, "group", 0), 3);
  n = only_node(M, "ops/slice_op13.onnx"); /* starts [1,-6] ends [9,1000] on [10,8] */
  ck_assert_int_eq(n->nin, 1);
  ints_eq(n, "starts", 2, (int64_t[]){1, 2});
  ints_eq(n, "ends", 2, (int64_t[]){9, 8});
  ints_eq(n, "steps", 2, (int64_t[]){3, 2});
  n = only_node(M, "ops/squeeze_op13.onnx");
  ints_eq(n, "axes", 2, (int64_t[]){0, 2});
  n = only_node(M, "ops/unsqueeze_op13.onnx");
  ints_eq(n, "axes", 2, (int64_t[]){0, 3});
  n = only_node(M, "ops/transpose_default_op21.onnx");
  ints_eq(n, "perm", 3, (int64_t[]){2, 1, 0});
  n = only_node(M, "ops/convtranspose_oshape_op17.onnx"); /* output_shape resolved into pads */
  ck_assert_ptr_null(tg_node_attr(n, "output_shape"));
  ck_assert_ptr_nonnull(tg_node_attr(n, "pads"));
  /* Shape/Gather/Div/Concat computed the target: known at import, so an attribute,
   * and the shape chain is dropped as unused */
  n = only_node(M, "ops/reshape_arith_op17.onnx");
  ck_assert_int_eq(n->op, TG_OP_RESHAPE);
  ck_assert_int_eq(n->nin, 1);
  ints_eq(n, "shape", 4, (int64_t[]){2, 3, 4, 2});
  n = only_node(M, "ops/convtranspose_odd_op17.onnx"); /* 17 -> 16: the odd pad goes first (NOTSET) */
  ints_eq(n, "pads", 4, (int64_t[]){1, 1, 0, 0});
}
END_TEST

static void refused(const char *rel, ts_status code, const char *s1, const char *s2) {
  ir_module *m = ir_module_new();
  ts_diag d;
  ts_diag_clear(&d);
  tg_graph *g = (tg_graph *)1;
  ts_status st = tg_onnx_import(model_path(rel), m, &g, &d);
  ck_assert_msg(st == code, "%s: status %s (%s), want %s", rel, ts_strerror(st), d.msg, ts_strerror(code));
  ck_assert_ptr_null(g);
  ck_assert_msg(strstr(d.msg, s1) && (!s2 || strstr(d.msg, s2)), "%s: '%s' lacks '%s' / '%s'", rel, d.msg, s1,
                s2 ? s2 : "");
  ck_assert_msg(strstr(d.msg, rel) != NULL, "the message names the file: %s", d.msg);
  ir_module_free(m);
}

START_TEST(test_refusals) {
  refused("ops/bad_op.onnx", TS_EUNSUPPORTED, "node hm: operator Hardmax (opset 17) is not supported", NULL);
  refused("ops/bad_attr.onnx", TS_EUNSUPPORTED, "node r (Relu, opset 17)", "attribute 'foo' is not supported");
  refused("ops/bad_gelu18.onnx", TS_EUNSUPPORTED, "node g (Gelu, opset 18)", "from opset 20");
  refused("ops/bad_opset0.onnx", TS_EUNSUPPORTED, "opset 0 is not supported", "1 to 28");
  refused("ops/bad_bn_training6.onnx", TS_EUNSUPPORTED, "node bn (BatchNormalization, opset 6)", "is_test is absent");
  refused("ops/bad_ms_op_default_domain.onnx", TS_EUNSUPPORTED, "node qa", "operator QLinearAdd (opset 17) is not supported");
  refused("ops/bad_attention_heads.onnx", TS_EINVAL, "node at (Attention, opset 23)", "3-D inputs need q_num_heads and kv_num_heads");
  refused("ops/bad_attention_gqa.onnx", TS_ESHAPE, "node at (Attention, opset 23)", "6 query heads are not a multiple of 4 key/value heads");
  refused("ops/bad_legacy_axis6.onnx", TS_ESHAPE, "node a (Add, opset 6)", "B [4,3] does not match A [2,3,4] from axis 1");
  refused("ops/bad_opset29.onnx", TS_EUNSUPPORTED, "opset 29 is not supported", NULL);
  refused("ops/bad_slice_inputs9.onnx", TS_EINVAL, "node sl (Slice, opset 9)", "before opset 10 the starts are the attribute");
  refused("ops/bad_dropout_training.onnx", TS_EUNSUPPORTED, "node dr (Dropout, opset 13)", "training_mode is true");
  refused("ops/bad_bn_spatial0.onnx", TS_EUNSUPPORTED, "node bn (BatchNormalization, opset 7)", "spatial=0");
  refused("ops/bad_convinteger_float.onnx", TS_ETYPE, "node ci (ConvInteger, opset 17)", "x (xf) and w (w) must be int8 or uint8");
  refused("ops/bad_convinteger_wzp.onnx", TS_EUNSUPPORTED, "node ci (ConvInteger, opset 17)",
          "w_zero_point (wz) is neither per tensor nor per output channel");
  refused("ops/bad_domain.onnx", TS_EUNSUPPORTED, "node fg: operator FusedGemm of domain 'com.microsoft'", NULL);
  refused("ops/bad_external.onnx", TS_EIO, "initializer w: external data file", "weights.bin: no such file");
  refused("ops/bad_reducemean_axes13.onnx", TS_EUNSUPPORTED, "node rm (ReduceMean, opset 13)", "axes input needs opset 18");
  refused("ops/bad_broadcast.onnx", TS_ESHAPE, "node a (Add, opset 17)", "[2,3] (x) and [4,3] (z) do not broadcast");
  refused("ops/bad_unsorted.onnx", TS_EINVAL, "node second (Relu, opset 17)", "topologically sorted");
  refused("ops/bad_symconv.onnx", TS_EUNSUPPORTED, "node c (Conv, opset 17)", "symbolic (h)");
  refused("ops/bad_dynamic_slice.onnx", TS_EUNSUPPORTED, "node sl (Slice, opset 17)", "must be a constant");
  refused("ops/bad_split_num13.onnx", TS_EUNSUPPORTED, "node sp (Split, opset 13)", "attribute 'num_outputs' is not supported at this opset");
  refused("ops/bad_avgpool_dil18.onnx", TS_EUNSUPPORTED, "node ap (AveragePool, opset 18)", "attribute 'dilations' is not supported at this opset");
  refused("ops/bad_pad_wrap18.onnx", TS_EUNSUPPORTED, "node pd (Pad, opset 18)", "wrap needs opset 19");
  refused("ops/bad_string.onnx", TS_EUNSUPPORTED, "graph input x: element type STRING", NULL);
  /* mathops */
  refused("ops/bad_lpnorm_p3.onnx", TS_EUNSUPPORTED, "node lp (LpNormalization, opset 17)", "p = 3 (1 or 2)");
  refused("ops/bad_groupnorm_groups.onnx", TS_EINVAL, "node gn (GroupNormalization, opset 21)",
          "num_groups 4 does not divide the 6 channels");
  refused("ops/bad_groupnorm18_scale.onnx", TS_ESHAPE, "node gn (GroupNormalization, opset 18)",
          "must be a vector of num_groups (2)");
  refused("ops/bad_prelu_slope.onnx", TS_ESHAPE, "node pr (PRelu, opset 17)", "does not broadcast to X's shape");
  refused("ops/bad_reducel2_int.onnx", TS_ETYPE, "node rl (ReduceL2, opset 17)", "takes floating-point tensors");
  /* ops2: external data, TopK, Einsum, ScatterND */
  refused("ops/bad_extern_escape.onnx", TS_EINVAL, "initializer w: external data location '../weights.bin' leaves the model's directory", NULL);
  refused("ops/bad_extern_abs.onnx", TS_EINVAL, "initializer w: external data location '/etc/hostname' leaves", NULL);
  refused("ops/bad_extern_missing.onnx", TS_EIO, "initializer w: external data file", "no_such_weights.bin: no such file");
  refused("ops/bad_extern_trunc.onnx", TS_EPARSE, "initializer w: external data file",
          "bad_extern_trunc.bin holds 30 bytes; offset 8 + length 24 runs past its end");
  refused("ops/bad_extern_length.onnx", TS_EPARSE,
          "initializer w: external data 'bad_extern_trunc.bin' has length 20, the tensor needs 24 bytes", NULL);
  refused("ops/bad_extern_link.onnx", TS_EINVAL, "initializer w: external data file",
          "bad_extern_link.bin resolves outside the model's directory");
  refused("ops/bad_topk_dynamic_k.onnx", TS_EUNSUPPORTED, "node tk (TopK, opset 13)", "K");
  refused("ops/bad_topk_k_large.onnx", TS_EINVAL, "node tk (TopK, opset 9)", "k 6 is out of range for axis 1 of extent 5");
  refused("ops/bad_einsum_letters.onnx", TS_ESHAPE, "node es (Einsum, opset 13)", "letter 'j' is [5] in one operand and [3] in x");
  refused("ops/bad_einsum_term.onnx", TS_EINVAL, "node es (Einsum, opset 13)", "bad term 'i2'");
  refused("ops/bad_scatternd_max16.onnx", TS_EINVAL, "node sc (ScatterND, opset 16)", "reduction 'max' needs opset 18");
  {
    /* external data needs the model's directory: from memory it is refused */
    char *buf;
    size_t len;
    ts_diag e;
    ts_diag_clear(&e);
    tg_graph *ge = NULL;
    ck_assert_int_eq(ts_read_file(model_path("ops/extern_mm_op17.onnx"), &buf, &len, &e), TS_OK);
    ck_assert_int_eq(tg_onnx_import_mem(buf, len, "mem", M, &ge, &e), TS_EUNSUPPORTED);
    ck_assert_msg(strstr(e.msg, "initializer k1: stored as external data in 'extern_mm_op17.bin', but the model was read from memory"), "%s", e.msg);
    ts_free(buf);
  }
  /* not a file / not a model */
  ts_diag d;
  ts_diag_clear(&d);
  tg_graph *g;
  ck_assert_int_eq(tg_onnx_import("/nonexistent/model.onnx", M, &g, &d), TS_EIO);
  ck_assert_ptr_null(g);
  ts_diag_clear(&d);
  const char junk[] = "this is not a protobuf message at all \xff\xff\xff";
  ck_assert_int_eq(tg_onnx_import_mem(junk, sizeof junk, "junk", M, &g, &d), TS_EPARSE);
  ck_assert_ptr_nonnull(strstr(d.msg, "junk: not a valid ONNX model"));
  ts_diag_clear(&d);
  ck_assert_int_ne(tg_onnx_import_mem("", 0, "empty", M, &g, &d), TS_OK); /* an empty ModelProto: no graph */
  ck_assert_ptr_nonnull(strstr(d.msg, "empty: the model has no graph"));
}
END_TEST

static char *slurp(const char *rel, size_t *len) {
  char *buf;
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_msg(ts_read_file(model_path(rel), &buf, len, &d) == TS_OK, "%s", d.msg);
  return buf;
}

/* Imports buf; must not crash; a failure must say something. */
static ts_status try_import(const char *buf, size_t len) {
  ir_module *m = ir_module_new();
  ts_diag d;
  ts_diag_clear(&d);
  tg_graph *g = NULL;
  ts_status st = tg_onnx_import_mem(buf, len, "fuzz", m, &g, &d);
  if (st != TS_OK) {
    ck_assert_ptr_null(g);
    ck_assert_msg(strstr(d.msg, "fuzz") != NULL, "unnamed failure: '%s'", d.msg);
  } else {
    ck_assert_ptr_nonnull(g);
    ck_assert_int_eq(tg_graph_verify(g, NULL), TS_OK);
  }
  ir_module_free(m);
  return st;
}

START_TEST(test_truncated) {
  /* every strict prefix of a model lacks at least its opset import (the last
   * field written), so every one must be refused */
  static const char *const models[] = {"mlp.onnx", "transformer_erf.onnx", "ops/conv_op13.onnx"};
  for (size_t mi = 0; mi < 3; mi++) {
    size_t len;
    char *buf = slurp(models[mi], &len);
    ck_assert_int_eq(try_import(buf, len), TS_OK);
    size_t step = len / 150 + 1, ncut = 0;
    for (size_t cut = 0; cut < len; cut += (cut < 256 ? 1 : step)) {
      char *p = ts_malloc(cut + 1); /* exact size, so valgrind sees overreads */
      memcpy(p, buf, cut);
      ck_assert_msg(try_import(p, cut) != TS_OK, "%s cut at %zu of %zu was accepted", models[mi], cut, len);
      ncut++;
      ts_free(p);
    }
    fprintf(stderr, "truncated: %s (%zu bytes) refused at %zu cut points\n", models[mi], len, ncut);
    ts_free(buf);
  }
}
END_TEST

START_TEST(test_bitflips) {
  /* small models: flips land in the structure, not only in weights */
  static const char *const models[] = {"ops/conv_op13.onnx", "ops/split_num_op18.onnx", "ops/slice_op13.onnx",
                                       "ops/constant_op13.onnx", "transformer_erf.onnx"};
  ts_rng r;
  ts_rng_seed(&r, 12345);
  int ok = 0, bad = 0;
  for (size_t mi = 0; mi < sizeof models / sizeof *models; mi++) {
    size_t len;
    char *buf = slurp(models[mi], &len);
    char *p = ts_malloc(len);
    /* the transformer is large: its structure sits after the weights, so flip anywhere */
    for (int it = 0; it < 400; it++) {
      memcpy(p, buf, len);
      int nflip = 1 + (int)ts_rng_below(&r, 4);
      for (int k = 0; k < nflip; k++) p[ts_rng_below(&r, len)] ^= (char)(1u << ts_rng_below(&r, 8));
      if (try_import(p, len) == TS_OK) ok++;
      else bad++;
    }
    ts_free(p);
    ts_free(buf);
  }
  fprintf(stderr, "bitflips: %d imported, %d refused\n", ok, bad);
  /* both outcomes occur: the fuzzing reached the checks */
  ck_assert_int_gt(bad, 50);
  ck_assert_int_gt(ok, 50);
}
END_TEST

START_TEST(test_oom) {
  size_t len;
  char *buf = slurp("ops/layernorm_op17.onnx", &len);
  bool done = false;
  for (long k = 1; k < 400 && !done; k++) {
    ir_module *m = ir_module_new();
    ck_assert_ptr_nonnull(m);
    ts_diag d;
    ts_diag_clear(&d);
    tg_graph *g = NULL;
    ts_alloc_fail_after(k);
    ts_status st = tg_onnx_import_mem(buf, len, "oom", m, &g, &d);
    ts_alloc_fail_after(0);
    if (st == TS_OK) done = true;
    /* protobuf-c reports a failed allocation as a parse failure */
    else ck_assert_msg(st == TS_ENOMEM || st == TS_EPARSE, "k=%ld: %s (%s)", k, ts_strerror(st), d.msg);
    ir_module_free(m);
  }
  ck_assert(done);
  ts_free(buf);
}
END_TEST

/* The operator registry has one row for every op of TG_OP_LIST, found by
 * enum and by ONNX name, and each row is complete. */
START_TEST(test_registry) {
  for (int i = 0; i < TG_OP_COUNT; i++) {
    tg_op op = (tg_op)i;
    const tg_op_def *def = tg_op_def_of(op);
    ck_assert_msg(def != NULL, "no registry row for %s (ir/graph/ops.c)", tg_op_name(op));
    ck_assert_int_eq(def->op, op);
    ck_assert_str_eq(def->onnx, tg_op_name(op));
    ck_assert_ptr_eq(tg_op_def_find(def->onnx), def);
    ck_assert_ptr_nonnull(def->kernel);
    ck_assert_ptr_nonnull(def->attrs);
    if (op == TG_OP_CALL) continue;
    ck_assert_msg(def->import != NULL, "%s has no import handler", def->onnx);
    ck_assert_msg(def->since >= 1 && def->since <= TG_ONNX_OPSET_MAX && (!def->until || def->until > def->since),
                  "%s: opsets [%d, %d)", def->onnx, def->since, def->until);
    ck_assert_msg(def->min_in >= 0 && (def->max_in < 0 || def->max_in >= def->min_in), "%s: inputs", def->onnx);
    ck_assert_msg(def->min_out >= 1 && (def->max_out < 0 || def->max_out >= def->min_out), "%s: outputs", def->onnx);
    if (op == TG_OP_CONSTANT || (def->flags & TG_OPF_EXPANDED)) continue; /* folded before legalisation; expanded at import */
    ck_assert_msg(def->emit != NULL, "%s has no emitter", def->onnx);
    ck_assert_msg(strcmp(def->kernel, "op") != 0, "%s has no kernel name", def->onnx);
    ck_assert_msg((def->lg_min_in >= 1 || (def->flags & TG_OPF_NO_INPUTS)) && def->lg_min_in <= def->min_in,
                  "%s: the emitter needs %d inputs", def->onnx, def->lg_min_in);
  }
  ck_assert_ptr_null(tg_op_def_of(TG_OP_COUNT));
  ck_assert_ptr_null(tg_op_def_find("NoSuchOp"));
  ck_assert_ptr_null(tg_op_def_find(NULL));
}
END_TEST

static Suite *onnx_suite(void) {
  Suite *s = suite_create("ir_onnx");
  TCase *tc = tcase_create("onnx");
  tcase_set_timeout(tc, 300);
  tcase_add_checked_fixture(tc, msetup, mteardown);
  tcase_add_test(tc, test_mlp);
  tcase_add_test(tc, test_cnn);
  tcase_add_test(tc, test_transformer);
  tcase_add_test(tc, test_transformer_erf);
  tcase_add_test(tc, test_op_models_vs_onnxruntime);
  tcase_add_test(tc, test_canonical_forms);
  tcase_add_test(tc, test_refusals);
  tcase_add_test(tc, test_truncated);
  tcase_add_test(tc, test_bitflips);
  tcase_add_test(tc, test_oom);
  tcase_add_test(tc, test_registry);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(onnx_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failures = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failures ? 1 : 0;
}
