/* qdq.c — the qdq pass: the QuantizeLinear / DequantizeLinear chains of a
 * QDQ model (onnxruntime's quantize_static) become int8 work.
 *
 * Registry-driven: an operator's row (ops.c) names its rewrite (tg_qdq_fn),
 * run on each live node of that op in order until nothing changes:
 *   - data movement (MaxPool, Reshape, Transpose, Flatten, Squeeze,
 *     Unsqueeze, Slice, Gather's data, Resize nearest, Concat of inputs with
 *     one scale and zero point): DequantizeLinear(x) -> op becomes
 *     op(x) -> DequantizeLinear, so the op moves the int8 tensor (exact: the
 *     op copies or compares values, and dequantizing is monotonic);
 *   - QuantizeLinear(DequantizeLinear(x)) with the same scale, zero point and
 *     type is x;
 *   - DequantizeLinear(x) [, DequantizeLinear(w const; for MatMul also an
 *     activation), DequantizeLinear(bias const int32, scale x_scale *
 *     w_scale)] -> Conv / MatMul / Gemm
 *     [-> Relu] -> QuantizeLinear becomes one QLinearConv or QLinearMatMul
 *     (the integer op, op_quant.c: int32 sums, onnxruntime's requantize; a
 *     Relu raises the saturation's lower bound to the zero point).
 * Whatever does not match keeps its float path. Last, every integer
 * contraction with constant weights and zero points gets its weight-side
 * zero-point terms folded into its bias (attribute tessel.comp): the kernel
 * then adds one int32 per output channel instead of summing the weights (with
 * x's zero point known only at run time and no bias, the weight sums alone:
 * tessel.wsum).
 * g->opts.qdq_off (--qdq off) leaves the Q/DQ chains as they are (the float
 * path); the folding still runs. docs/GRAPH.md ("Quantization"). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ops.h"
#include "passes_int.h"

/* ---- reading the chains ------------------------------------------------------------ */

static const tg_value *val(const tg_graph *g, int vid) { return vid >= 0 ? g->values[vid] : NULL; }

static bool is_const(const tg_graph *g, int vid) {
  const tg_value *v = val(g, vid);
  return v && v->kind == TG_V_CONST && v->data && tg_value_is_static(v);
}

static bool q8(ir_dtype t) { return t.code == IR_U8 || t.code == IR_I8; }

/* The live node of op `op` producing value vid, or NULL. */
static tg_node *producer_op(const tg_graph *g, int vid, tg_op op) {
  const tg_value *v = val(g, vid);
  if (!v || v->producer < 0) return NULL;
  tg_node *p = g->nodes[v->producer];
  return !p->dead && p->op == op ? p : NULL;
}

/* The one live consumer of value vid (not a graph output), or NULL. */
static tg_node *only_consumer(const tg_graph *g, int vid) {
  int c;
  if (tg_is_graph_output(g, vid) || tg_value_consumers(g, vid, &c, 1) != 1) return NULL;
  return g->nodes[c];
}

/* A Q or DQ node's parameters, constant: scale (f32), zero point (or -1),
 * axis; per_tensor when both hold one element. */
typedef struct qparams {
  int scale, zp;
  int64_t axis;
  bool per_tensor;
} qparams;

static bool read_qparams(const tg_graph *g, const tg_node *n, qparams *q) {
  if (n->nin < 2 || n->inputs[0] < 0 || !is_const(g, n->inputs[1])) return false;
  q->scale = n->inputs[1];
  q->zp = n->nin > 2 ? n->inputs[2] : -1;
  if (q->zp >= 0 && !is_const(g, q->zp)) return false;
  if (g->values[q->scale]->dtype.code != IR_F32) return false;
  q->axis = tg_attr_int(n, "axis", 1);
  q->per_tensor = tg_value_numel(g->values[q->scale]) == 1 && (q->zp < 0 || tg_value_numel(g->values[q->zp]) == 1);
  return true;
}

/* Element e of an integer constant as an int64 (0 for an absent one). */
static int64_t int_at(const tg_graph *g, int vid, int64_t e) {
  const tg_value *v = val(g, vid);
  if (!v) return 0;
  if (tg_value_numel(v) == 1) e = 0;
  switch (v->dtype.code) {
  case IR_U8: return ((const uint8_t *)v->data)[e];
  case IR_I8: return ((const int8_t *)v->data)[e];
  case IR_I32: return ((const int32_t *)v->data)[e];
  default: return 0;
  }
}

static float f32_at(const tg_graph *g, int vid, int64_t e) {
  const tg_value *v = val(g, vid);
  return ((const float *)v->data)[tg_value_numel(v) == 1 ? 0 : e];
}

/* A DequantizeLinear per tensor of an int8/uint8 value: the activation side. */
static tg_node *act_dq(const tg_graph *g, int vid, qparams *q) {
  tg_node *d = producer_op(g, vid, TG_OP_DEQUANTIZE_LINEAR);
  if (!d || !read_qparams(g, d, q) || !q->per_tensor || !q8(g->values[d->inputs[0]]->dtype)) return NULL;
  return d;
}

/* Do two Q/DQ nodes' parameters quantize alike (scale bits, zero point
 * value, per-axis axis), for values of type t? */
static bool same_params(const tg_graph *g, const qparams *a, const qparams *b) {
  const tg_value *sa = g->values[a->scale], *sb = g->values[b->scale];
  int64_t na = tg_value_numel(sa), nb = tg_value_numel(sb);
  if (a->per_tensor != b->per_tensor || na != nb) return false;
  if (!a->per_tensor && a->axis != b->axis) return false;
  if (memcmp(sa->data, sb->data, (size_t)na * sizeof(float))) return false;
  for (int64_t e = 0; e < na; e++)
    if (int_at(g, a->zp, e) != int_at(g, b->zp, e)) return false;
  return true;
}

/* ---- building ------------------------------------------------------------------------ */

static ts_status oom(ts_diag *d) { return ts_diag_set(d, TS_ENOMEM, "out of memory in the qdq pass"); }

/* A new intermediate value named after base with dtype dt and vid's dims. */
static int new_value(tg_graph *g, const char *base, ir_dtype dt, int like, ts_diag *d) {
  char nm[256];
  const tg_value *l = g->values[like];
  int nd = l->ndim;
  tg_dim dims[16];
  memcpy(dims, l->dims, sizeof dims[0] * (size_t)nd);
  int id = tg_value_add(g, tg_fresh_value_name(g, base, nm, sizeof nm), TG_V_INTER, dt, nd, dims, d);
  return id;
}

/* A zero constant of type t (a zero point the chain left out). */
static int zero_const(tg_graph *g, const char *base, ir_dtype t, ts_diag *d) {
  int64_t z = 0;
  return tg_add_const(g, base, t, 0, NULL, &z, (size_t)ir_dtype_bytes(t), d);
}

/* DequantizeLinear(x, dq's scale and zero point) -> y, a new node. */
static ts_status add_dq(tg_graph *g, const tg_node *dq, int x, int y, ts_diag *d) {
  int in[3] = {x, dq->inputs[1], dq->nin > 2 ? dq->inputs[2] : -1};
  char nm[256];
  snprintf(nm, sizeof nm, "%s_dq", g->values[y]->name);
  int id = tg_node_add(g, TG_OP_DEQUANTIZE_LINEAR, nm, in[2] >= 0 ? 3 : 2, in, 1, &y, d);
  if (id < 0) return d && d->code ? d->code : TS_ENOMEM;
  tg_attr a = {.name = "axis", .kind = TG_A_INT, .i = tg_attr_int(dq, "axis", 1)};
  return tg_node_set_attr(g, g->nodes[id], &a) == TS_OK ? TS_OK : oom(d);
}

/* n's output 0 becomes a new int8 value u (what n now computes, from the
 * int8 inputs the caller set) and a new DequantizeLinear with dq's
 * parameters writes the old output from u. */
static ts_status dq_after(tg_graph *g, tg_node *n, const tg_node *dq, ts_diag *d) {
  int y = n->outputs[0];
  char base[256];
  snprintf(base, sizeof base, "%s_q", g->values[y]->name);
  int u = new_value(g, base, g->values[dq->inputs[0]]->dtype, y, d);
  if (u < 0) return d && d->code ? d->code : TS_ENOMEM;
  n->outputs[0] = u;
  g->values[u]->producer = n->id;
  g->values[y]->producer = -1;
  return add_dq(g, dq, u, y, d);
}

/* ---- data movement ----------------------------------------------------------------------- */

ts_status tg_qdq_move(tg_graph *g, tg_node *n, bool *changed, ts_diag *d) {
  if (n->nout != 1 || n->nin < 1) return TS_OK;
  if (n->op == TG_OP_RESIZE && strcmp(tg_attr_str(n, "mode", "nearest"), "nearest")) return TS_OK;
  qparams q;
  tg_node *dq = act_dq(g, n->inputs[0], &q);
  if (!dq) return TS_OK;
  n->inputs[0] = dq->inputs[0];
  *changed = true;
  return dq_after(g, n, dq, d);
}

ts_status tg_qdq_concat(tg_graph *g, tg_node *n, bool *changed, ts_diag *d) {
  if (n->nout != 1 || n->nin < 1) return TS_OK;
  qparams q0, q;
  tg_node *dq0 = act_dq(g, n->inputs[0], &q0);
  if (!dq0) return TS_OK;
  ir_dtype t = g->values[dq0->inputs[0]]->dtype;
  for (int i = 1; i < n->nin; i++) {
    tg_node *dq = act_dq(g, n->inputs[i], &q);
    if (!dq || !same_params(g, &q0, &q) || !ir_dtype_eq(g->values[dq->inputs[0]]->dtype, t)) return TS_OK;
  }
  for (int i = 0; i < n->nin; i++) /* each input's DequantizeLinear (checked above) is skipped */
    n->inputs[i] = g->nodes[g->values[n->inputs[i]]->producer]->inputs[0];
  *changed = true;
  return dq_after(g, n, dq0, d);
}

/* QuantizeLinear(DequantizeLinear(x)) with the same parameters: x itself
 * (dequantizing then quantizing with one scale gives back each value). */
ts_status tg_qdq_pair(tg_graph *g, tg_node *n, bool *changed, ts_diag *d) {
  (void)d;
  qparams qq, qd;
  if (n->nout != 1 || !read_qparams(g, n, &qq)) return TS_OK;
  tg_node *dq = producer_op(g, n->inputs[0], TG_OP_DEQUANTIZE_LINEAR);
  if (!dq || !read_qparams(g, dq, &qd) || !same_params(g, &qq, &qd)) return TS_OK;
  int x = dq->inputs[0], y = n->outputs[0];
  if (!ir_dtype_eq(g->values[x]->dtype, g->values[y]->dtype) || tg_is_graph_output(g, y)) return TS_OK;
  tg_replace_uses(g, y, x);
  n->dead = true;
  *changed = true;
  return TS_OK;
}

/* ---- Conv / MatMul / Gemm into the integer ops ---------------------------------------------- */

/* The chain around a contraction c: its activation DQ, its weight DQ (of a
 * constant), its bias DQ (of an int32 constant) and the QuantizeLinear
 * after it (through a Relu). */
typedef struct chain {
  tg_node *dx, *dw, *db, *relu, *q;
  qparams px, pw, pb, py;
} chain;

/* The weight DQ of value vid: a constant int8/uint8 dequantized per tensor
 * or along axis `axis` (the output channels / columns, of extent m). */
static tg_node *weight_dq(const tg_graph *g, int vid, int axis, int64_t m, qparams *q) {
  tg_node *d = producer_op(g, vid, TG_OP_DEQUANTIZE_LINEAR);
  if (!d || !read_qparams(g, d, q) || !is_const(g, d->inputs[0]) || !q8(g->values[d->inputs[0]]->dtype)) return NULL;
  if (q->per_tensor) return d;
  const tg_value *w = g->values[d->inputs[0]];
  int64_t ax = q->axis < 0 ? q->axis + w->ndim : q->axis;
  if (ax != axis || tg_value_numel(g->values[q->scale]) != m || (q->zp >= 0 && tg_value_numel(g->values[q->zp]) != m))
    return NULL;
  return d;
}

/* The bias DQ: an int32 constant [m] with zero point 0 and scale x_scale *
 * w_scale per channel (as onnxruntime's quantizer writes it: within f32
 * rounding of the product). */
static tg_node *bias_dq(const tg_graph *g, int vid, int64_t m, const chain *c, qparams *q) {
  tg_node *d = producer_op(g, vid, TG_OP_DEQUANTIZE_LINEAR);
  if (!d || !read_qparams(g, d, q)) return NULL;
  const tg_value *b = g->values[d->inputs[0]];
  if (!is_const(g, d->inputs[0]) || b->dtype.code != IR_I32 || tg_value_numel(b) != m || b->ndim != 1) return NULL;
  float xs = f32_at(g, c->px.scale, 0);
  for (int64_t e = 0; e < m; e++) {
    double want = (double)xs * f32_at(g, c->pw.scale, e), got = f32_at(g, q->scale, e);
    if (int_at(g, q->zp, e) != 0 || fabs(got - want) > 1e-6 * fabs(want)) return NULL;
  }
  return d;
}

/* The QuantizeLinear per tensor after value y (through a Relu). */
static bool find_q(const tg_graph *g, int y, chain *c) {
  tg_node *t = only_consumer(g, y);
  c->relu = NULL;
  if (t && t->op == TG_OP_RELU) {
    c->relu = t;
    t = only_consumer(g, t->outputs[0]);
  }
  if (!t || t->op != TG_OP_QUANTIZE_LINEAR || t->inputs[0] != (c->relu ? c->relu->outputs[0] : y)) return false;
  if (!read_qparams(g, t, &c->py) || !c->py.per_tensor || !q8(g->values[t->outputs[0]]->dtype)) return false;
  c->q = t;
  return true;
}

/* The integer op replacing the chain: inputs x, x_scale, x_zp, w, w_scale,
 * w_zp, y_scale, y_zp[, bias], output the QuantizeLinear's; attributes from
 * the contraction (conv's) plus tessel.relu. Absent zero points become
 * zero constants. */
static ts_status replace_chain(tg_graph *g, tg_node *c, chain *ch, tg_op op, int w, int bias, ts_diag *d) {
  int in[9];
  in[0] = ch->dx->inputs[0];
  in[1] = ch->px.scale;
  in[2] = ch->px.zp;
  in[3] = w;
  in[4] = ch->pw.scale;
  in[5] = ch->pw.zp;
  in[6] = ch->py.scale;
  in[7] = ch->py.zp;
  in[8] = bias;
  char base[256];
  static const int zps[3] = {2, 5, 7};
  for (int i = 0; i < 3; i++) {
    if (in[zps[i]] >= 0) continue;
    ir_dtype t = i == 0 ? g->values[in[0]]->dtype : i == 1 ? g->values[w]->dtype : g->values[ch->q->outputs[0]]->dtype;
    snprintf(base, sizeof base, "%s_zero_point%d", c->name, zps[i]);
    if ((in[zps[i]] = zero_const(g, base, t, d)) < 0) return d && d->code ? d->code : TS_ENOMEM;
  }
  int y = ch->q->outputs[0];
  g->values[y]->producer = -1; /* the QuantizeLinear goes */
  snprintf(base, sizeof base, "%s_int8", c->name);
  int id = tg_node_add(g, op, base, bias >= 0 ? 9 : 8, in, 1, &y, d);
  if (id < 0) return d && d->code ? d->code : TS_ENOMEM;
  tg_node *n = g->nodes[id];
  if (op == TG_OP_QLINEAR_CONV)
    for (int i = 0; i < c->nattr; i++)
      if (tg_node_set_attr(g, n, &c->attrs[i]) != TS_OK) return oom(d);
  if (ch->relu) {
    tg_attr a = {.name = "tessel.relu", .kind = TG_A_INT, .i = 1};
    if (tg_node_set_attr(g, n, &a) != TS_OK) return oom(d);
  }
  c->dead = ch->q->dead = true;
  if (ch->relu) ch->relu->dead = true;
  return TS_OK;
}

ts_status tg_qdq_conv(tg_graph *g, tg_node *c, bool *changed, ts_diag *d) {
  chain ch = {0};
  if (c->nin < 2 || c->nout != 1 || !(ch.dx = act_dq(g, c->inputs[0], &ch.px))) return TS_OK;
  const tg_value *wv = g->values[c->inputs[1]];
  if (wv->ndim < 3 || wv->dims[0].sym) return TS_OK;
  int64_t m = wv->dims[0].value;
  if (!(ch.dw = weight_dq(g, c->inputs[1], 0, m, &ch.pw))) return TS_OK;
  if (c->nin > 2 && c->inputs[2] >= 0 && !(ch.db = bias_dq(g, c->inputs[2], m, &ch, &ch.pb))) return TS_OK;
  if (!find_q(g, c->outputs[0], &ch)) return TS_OK;
  *changed = true;
  return replace_chain(g, c, &ch, TG_OP_QLINEAR_CONV, ch.dw->inputs[0], ch.db ? ch.db->inputs[0] : -1, d);
}

/* A constant int8 [N, K] transposed into [K, N]. */
static int transposed_i8(tg_graph *g, int vid, ts_diag *d) {
  const tg_value *v = g->values[vid];
  int64_t N = v->dims[0].value, K = v->dims[1].value;
  unsigned char *buf = ts_malloc((size_t)(N * K) + 1);
  if (!buf) return oom(d), -1;
  const unsigned char *src = v->data;
  for (int64_t n = 0; n < N; n++)
    for (int64_t k = 0; k < K; k++) buf[k * N + n] = src[n * K + k];
  tg_dim dims[2] = {{K, NULL}, {N, NULL}};
  char base[256];
  snprintf(base, sizeof base, "%s_kn", v->name);
  int id = tg_add_const(g, base, v->dtype, 2, dims, buf, (size_t)(N * K), d);
  ts_free(buf);
  return id;
}

/* MatMul [..., M, K] x [K, N], and Gemm (transA 0, alpha 1, beta 1; B
 * [K, N] or with transB [N, K]; C an int32 bias [N]): QLinearMatMul (the
 * bias as its input 8, tessel's extension). */
static ts_status qdq_matmul_like(tg_graph *g, tg_node *c, bool gemm, bool *changed, ts_diag *d) {
  chain ch = {0};
  if (c->nin < 2 || c->nout != 1 || !(ch.dx = act_dq(g, c->inputs[0], &ch.px))) return TS_OK;
  const tg_value *a = g->values[c->inputs[0]], *bv = g->values[c->inputs[1]];
  bool tb = gemm && tg_attr_int(c, "transB", 0);
  if (a->ndim < 2 || bv->ndim < 2) return TS_OK;
  if (gemm && (a->ndim != 2 || tg_attr_int(c, "transA", 0) || tg_attr_float(c, "alpha", 1.0) != 1.0 ||
               (c->nin > 2 && c->inputs[2] >= 0 && tg_attr_float(c, "beta", 1.0) != 1.0)))
    return TS_OK;
  /* B: a constant 2-D weight (per tensor or per column), or for MatMul an
   * activation per tensor (attention's Q·K^T, batched) */
  int64_t n = bv->ndim == 2 && tg_value_is_static(bv) ? bv->dims[tb ? 0 : 1].value : -1;
  if (!(n >= 0 && (ch.dw = weight_dq(g, c->inputs[1], tb ? 0 : 1, n, &ch.pw))) &&
      (gemm || !(ch.dw = act_dq(g, c->inputs[1], &ch.pw))))
    return TS_OK;
  if (gemm && c->nin > 2 && c->inputs[2] >= 0 && !(ch.db = bias_dq(g, c->inputs[2], n, &ch, &ch.pb))) return TS_OK;
  if (!find_q(g, c->outputs[0], &ch)) return TS_OK;
  int w = ch.dw->inputs[0];
  if (tb && (w = transposed_i8(g, w, d)) < 0) return d && d->code ? d->code : TS_ENOMEM;
  *changed = true;
  return replace_chain(g, c, &ch, TG_OP_QLINEAR_MATMUL, w, ch.db ? ch.db->inputs[0] : -1, d);
}

ts_status tg_qdq_matmul(tg_graph *g, tg_node *c, bool *changed, ts_diag *d) {
  return qdq_matmul_like(g, c, c->op == TG_OP_GEMM, changed, d);
}

/* ---- folding the weight-side zero-point terms ---------------------------------------------- */

/* comp[m] = bias[m] - xz * sum_k w[m, k] + K * xz * wz[m]: the terms of the
 * exact sum of (x - xz) * (w - wz) that depend on the weights only. */
static ts_status fold_comp(tg_graph *g, tg_node *n, int ci, ts_diag *d) {
  bool conv = n->op == TG_OP_QLINEAR_CONV || n->op == TG_OP_CONV_INTEGER;
  bool ql = n->op == TG_OP_QLINEAR_CONV || n->op == TG_OP_QLINEAR_MATMUL;
  int xi = 0, wi = ql ? 3 : 1, xzi = 2, wzi = ql ? 5 : 3;
  int xz = n->nin > xzi ? n->inputs[xzi] : -1, wz = n->nin > wzi ? n->inputs[wzi] : -1;
  int b = n->nin > ci ? n->inputs[ci] : -1;
  (void)xi;
  /* x's zero point known only at run time (DynamicQuantizeLinear's), no
   * bias: the sums of w alone become the constant (tessel.wsum) */
  bool wsum_only = xz >= 0 && !is_const(g, xz) && b < 0;
  if (xz < 0 || (!wsum_only && (!is_const(g, xz) || int_at(g, xz, 0) == 0)) || !is_const(g, n->inputs[wi]) ||
      (wz >= 0 && !is_const(g, wz)) || (b >= 0 && !is_const(g, b)))
    return TS_OK;
  const tg_value *w = g->values[n->inputs[wi]];
  if (!conv && w->ndim != 2) return TS_OK; /* a batch of weight matrices: summed in the kernel */
  int64_t M = conv ? w->dims[0].value : w->dims[1].value, K = tg_value_numel(w) / M;
  if (wz >= 0 && tg_value_numel(g->values[wz]) != 1 && tg_value_numel(g->values[wz]) != M) return TS_OK;
  int32_t *comp = ts_malloc((size_t)M * sizeof *comp + 1);
  if (!comp) return oom(d);
  int64_t x0 = wsum_only ? 0 : int_at(g, xz, 0);
  for (int64_t m = 0; m < M; m++) {
    int64_t s = 0;
    for (int64_t k = 0; k < K; k++) s += int_at(g, n->inputs[wi], conv ? m * K + k : k * M + m);
    comp[m] = wsum_only ? (int32_t)s : (int32_t)(int_at(g, b, m) - x0 * s + K * x0 * int_at(g, wz, m));
  }
  char base[256];
  snprintf(base, sizeof base, "%s_%s", n->name, wsum_only ? "wsum" : "comp");
  tg_dim md = {M, NULL};
  int cid = tg_add_const(g, base, ir_dt(IR_I32), 1, &md, comp, (size_t)M * sizeof *comp, d);
  ts_free(comp);
  if (cid < 0) return d && d->code ? d->code : TS_ENOMEM;
  if (wz < 0) { /* ConvInteger / MatMulInteger without w's zero point: a zero one */
    snprintf(base, sizeof base, "%s_w_zero_point", n->name);
    if ((wz = zero_const(g, base, w->dtype, d)) < 0) return d && d->code ? d->code : TS_ENOMEM;
  }
  int nin = ci + 1;
  int *in = TS_ANEWN(g->mod->arena, int, nin);
  if (!in) return oom(d);
  for (int i = 0; i < nin; i++) in[i] = i < n->nin ? n->inputs[i] : -1;
  if (in[wzi] < 0) in[wzi] = wz;
  in[ci] = cid;
  n->inputs = in;
  n->nin = nin;
  tg_attr a = {.name = wsum_only ? "tessel.wsum" : "tessel.comp", .kind = TG_A_INT, .i = 1};
  return tg_node_set_attr(g, n, &a) == TS_OK ? TS_OK : oom(d);
}

/* ---- the pass ---------------------------------------------------------------------------- */

ts_status tg_pass_qdq(tg_graph *g, ts_diag *d) {
  bool any = false;
  for (int round = 0; !g->opts.qdq_off && round < 64; round++) {
    bool changed = false;
    for (int i = 0; i < g->nnodes; i++) {
      tg_node *n = g->nodes[i];
      const tg_op_def *def = n->dead ? NULL : tg_op_def_of(n->op);
      if (!def || !def->qdq) continue;
      ts_status st = def->qdq(g, n, &changed, d);
      if (st != TS_OK) return st;
    }
    if (!changed) break;
    any = true;
    ts_status st = tg_pass_dce(g, d); /* re-sorts topologically: new nodes were appended */
    if (st != TS_OK) return st;
  }
  if (!g->opts.qdq_off && !g->opts.qdq_nchw) {
    int before = g->nnodes;
    ts_status st = tg_qdq_layout(g, d);
    if (st != TS_OK) return st;
    any |= g->nnodes != before;
  }
  for (int i = 0; i < g->nnodes; i++) {
    tg_node *n = g->nodes[i];
    int ci = n->dead ? -1 : tg_qint_comp_input(n->op);
    if (ci < 0 || tg_attr_int(n, "tessel.comp", 0) || tg_attr_int(n, "tessel.wsum", 0)) continue;
    int before = n->nin;
    ts_status st = fold_comp(g, n, ci, d);
    if (st != TS_OK) return st;
    any |= n->nin != before || tg_attr_int(n, "tessel.comp", 0) || tg_attr_int(n, "tessel.wsum", 0);
  }
  return any ? tg_pass_dce(g, d) : TS_OK;
}
