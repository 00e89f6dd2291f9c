/* op_quant.c — the quantization operators that QDQ and dynamically
 * quantized models hold: QuantizeLinear, DequantizeLinear (per tensor and
 * per axis, int8 and uint8 with zero points), DynamicQuantizeLinear and
 * MatMulInteger, with onnxruntime's arithmetic: q = saturate(round half to
 * even(x / scale) + zp), x = (q - zp) * scale, DynamicQuantizeLinear's
 * scale (max(x, 0) - min(x, 0)) / 255 (1 when that is 0) and zero point
 * round(saturate(-min / scale)); and the integer contractions MatMulInteger,
 * QLinearMatMul, ConvInteger and QLinearConv: exact int32 sums of (x - xz) *
 * (w - wz) written as the canonical int8 block plus zero-point
 * compensation blocks, and onnxruntime's requantize (emit_qint). The qdq
 * pass (qdq.c) makes QLinearConv / QLinearMatMul out of a QDQ model's
 * DequantizeLinear -> Conv/MatMul/Gemm -> QuantizeLinear chains. Their rows
 * are in ops.c. docs/GRAPH.md ("Quantization"). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "legalize_int.h"
#include "onnx_int.h"
#include "ops.h"

static bool q8(ir_dtype t) { return t.code == IR_U8 || t.code == IR_I8; }

static bool numel_is_one(const tg_value *v) { return tg_value_numel(v) == 1; }

/* A scale (or zero point) input: per tensor (0-d or one element) or per
 * axis (1-D of x's dim there). Blocked quantization is refused. */
static ts_status check_param(imp *im, nctx *nc, int i, const char *what, const tg_value *x, int64_t axis) {
  const tg_value *s = IN(im, nc, i);
  if (!s) return TS_OK;
  if (s->ndim == 0 || (s->ndim == 1 && !s->dims[0].sym && s->dims[0].value == 1)) return TS_OK;
  if (s->ndim == 1 && axis >= 0 && axis < x->ndim && tg_dim_eq(s->dims[0], x->dims[axis])) return TS_OK; /* a 0-d x has no axis */
  char b1[128], b2[128];
  imp_dims_str(b1, sizeof b1, s->ndim, s->dims);
  imp_dims_str(b2, sizeof b2, x->ndim, x->dims);
  return imp_nerr(im, nc, TS_EUNSUPPORTED, "input %d (%s, %s) of shape %s is neither per tensor nor per axis %" PRId64 " of %s",
                  i, s->name, what, b1, axis, b2);
}

/* Shared by QuantizeLinear and DequantizeLinear: axis (13+), no blocks (21+). */
static ts_status q_common(imp *im, nctx *nc, int64_t *axis) {
  ts_status st = imp_need_input(im, nc, 0, "x");
  if (st || (st = imp_need_input(im, nc, 1, "scale"))) return st;
  const tg_value *x = IN(im, nc, 0);
  *axis = aint(nc, "axis", 1);
  const tg_value *s = IN(im, nc, 1), *z = IN(im, nc, 2);
  bool per_tensor = numel_is_one(s) && (!z || numel_is_one(z));
  if (x->ndim == 0) *axis = 0;
  else if (!imp_norm_axis(axis, x->ndim, false)) {
    /* per tensor the axis is not read (the default 1 on a 1-D bias: DenseNet's QDQ export) */
    if (!per_tensor)
      return imp_nerr(im, nc, TS_EINVAL, "axis %" PRId64 " is out of range for rank %d", aint(nc, "axis", 1), x->ndim);
    *axis = 0;
  }
  if (aint(nc, "block_size", 0) != 0) return imp_nerr(im, nc, TS_EUNSUPPORTED, "blocked quantization (block_size %" PRId64 ")", aint(nc, "block_size", 0));
  if (!is_float(IN(im, nc, 1)->dtype)) return imp_nerr(im, nc, TS_ETYPE, "the scale (%s) is not floating-point", IN(im, nc, 1)->name);
  if ((st = check_param(im, nc, 1, "scale", x, *axis)) || (st = check_param(im, nc, 2, "zero point", x, *axis))) return st;
  return imp_set_int(im, nc, "axis", *axis);
}

ts_status imp_quantize(imp *im, nctx *nc) {
  int64_t axis;
  ts_status st = q_common(im, nc, &axis);
  if (st) return st;
  const tg_value *x = IN(im, nc, 0), *zp = IN(im, nc, 2);
  if (!is_float(x->dtype)) return imp_nerr(im, nc, TS_ETYPE, "x (%s) is not floating-point", x->name);
  ir_dtype out = ir_dt(IR_U8);
  if (zp) out = zp->dtype;
  else if (A(nc, "output_dtype") && aint(nc, "output_dtype", 0) != 0 && !tg_onnx_dtype((int)aint(nc, "output_dtype", 0), &out))
    return imp_nerr(im, nc, TS_EUNSUPPORTED, "output_dtype %" PRId64, aint(nc, "output_dtype", 0));
  if (!q8(out)) return imp_nerr(im, nc, TS_EUNSUPPORTED, "quantizing to %s (int8 and uint8 only)", ir_dtype_code_name((ir_dtype_code)out.code));
  set_out(nc, 0, out, x->ndim, x->dims);
  return TS_OK;
}

ts_status imp_dequantize(imp *im, nctx *nc) {
  int64_t axis;
  ts_status st = q_common(im, nc, &axis);
  if (st) return st;
  const tg_value *x = IN(im, nc, 0), *zp = IN(im, nc, 2);
  if (!q8(x->dtype) && x->dtype.code != IR_I32)
    return imp_nerr(im, nc, TS_EUNSUPPORTED, "x (%s) is %s (int8, uint8 and int32 only)", x->name,
                    ir_dtype_code_name((ir_dtype_code)x->dtype.code));
  if (zp && !ir_dtype_eq(zp->dtype, x->dtype)) return imp_nerr(im, nc, TS_ETYPE, "the zero point (%s) differs in type from x", zp->name);
  set_out(nc, 0, IN(im, nc, 1)->dtype, x->ndim, x->dims);
  return TS_OK;
}

ts_status imp_dyn_quantize(imp *im, nctx *nc) {
  ts_status st = imp_need_input(im, nc, 0, "x");
  if (st) return st;
  const tg_value *x = IN(im, nc, 0);
  if (x->dtype.code != IR_F32) return imp_nerr(im, nc, TS_ETYPE, "x (%s) is not float32", x->name);
  set_out(nc, 0, ir_dt(IR_U8), x->ndim, x->dims);
  set_out(nc, 1, ir_dt(IR_F32), 0, NULL);
  set_out(nc, 2, ir_dt(IR_U8), 0, NULL);
  return TS_OK;
}

/* The output dims of an integer matmul: a [..., M, K] x b [..., K, N],
 * the batch dims broadcast (numpy); *nd and od set. */
static ts_status qmm_dims(imp *im, nctx *nc, const tg_value *a, const tg_value *b, int *nd, tg_dim *od) {
  if (a->ndim < 2 || b->ndim < 2)
    return imp_nerr(im, nc, TS_EUNSUPPORTED, "inputs of rank %d and %d (matrices, or batches of them)", a->ndim, b->ndim);
  if (!tg_dim_eq(a->dims[a->ndim - 1], b->dims[b->ndim - 2]))
    return imp_nerr(im, nc, TS_ESHAPE, "the inner dims of %s and %s differ", a->name, b->name);
  tg_value ba = *a, bb = *b;
  ba.ndim = a->ndim - 2;
  bb.ndim = b->ndim - 2;
  ts_status st = imp_broadcast(im, nc, &ba, &bb, nd, od);
  if (st) return st;
  od[(*nd)++] = a->dims[a->ndim - 2];
  od[(*nd)++] = b->dims[b->ndim - 1];
  return *nd > MAX_RANK ? imp_nerr(im, nc, TS_EUNSUPPORTED, "rank above %d", MAX_RANK) : TS_OK;
}

/* MatMulInteger: A [..., M, K] against B [..., K, N] (the weights of a
 * dynamically quantized model: 2-D), batch dims broadcast; zero points per
 * tensor, B's also per column. */
ts_status imp_matmul_integer(imp *im, nctx *nc) {
  ts_status st = imp_need_input(im, nc, 0, "A");
  if (st || (st = imp_need_input(im, nc, 1, "B"))) return st;
  const tg_value *a = IN(im, nc, 0), *b = IN(im, nc, 1), *az = IN(im, nc, 2), *bz = IN(im, nc, 3);
  if (!q8(a->dtype) || !q8(b->dtype)) return imp_nerr(im, nc, TS_ETYPE, "A and B must be int8 or uint8");
  int nd = 0;
  tg_dim od[MAX_RANK + 2];
  ts_status st2 = qmm_dims(im, nc, a, b, &nd, od);
  if (st2) return st2;
  if (az && !numel_is_one(az)) return imp_nerr(im, nc, TS_EUNSUPPORTED, "a_zero_point per row (per tensor only)");
  if (bz && !numel_is_one(bz) && !(bz->ndim == 1 && tg_dim_eq(bz->dims[0], b->dims[b->ndim - 1])))
    return imp_nerr(im, nc, TS_EUNSUPPORTED, "b_zero_point (%s) is neither per tensor nor per column", bz->name);
  if ((az && !ir_dtype_eq(az->dtype, a->dtype)) || (bz && !ir_dtype_eq(bz->dtype, b->dtype)))
    return imp_nerr(im, nc, TS_ETYPE, "a zero point differs in type from its matrix");
  set_out(nc, 0, ir_dt(IR_I32), nd, od);
  return TS_OK;
}

/* QLinearMatMul: MatMulInteger's shapes, then the requantize of onnxruntime:
 * q = saturate(round(acc * (a_scale * b_scale / y_scale)) + y_zp); a's and
 * y's parameters per tensor, b's per tensor or per column. */
ts_status imp_qlinear_matmul(imp *im, nctx *nc) {
  for (int i = 0; i < 8; i++) {
    static const char *const what[8] = {"a", "a_scale", "a_zero_point", "b", "b_scale", "b_zero_point", "y_scale", "y_zero_point"};
    ts_status st = imp_need_input(im, nc, i, what[i]);
    if (st) return st;
  }
  const tg_value *a = IN(im, nc, 0), *b = IN(im, nc, 3), *yz = IN(im, nc, 7);
  if (!q8(a->dtype) || !q8(b->dtype) || !q8(yz->dtype)) return imp_nerr(im, nc, TS_ETYPE, "a, b and y must be int8 or uint8");
  int nd = 0;
  tg_dim od[MAX_RANK + 2];
  ts_status st = qmm_dims(im, nc, a, b, &nd, od);
  if (st) return st;
  static const int per_tensor[] = {1, 2, 6, 7};
  for (int i = 0; i < 4; i++)
    if (!numel_is_one(IN(im, nc, per_tensor[i])))
      return imp_nerr(im, nc, TS_EUNSUPPORTED, "input %d (%s) is not per tensor", per_tensor[i], IN(im, nc, per_tensor[i])->name);
  for (int i = 4; i <= 5; i++) {
    const tg_value *v = IN(im, nc, i);
    if (!numel_is_one(v) && !(v->ndim == 1 && tg_dim_eq(v->dims[0], b->dims[b->ndim - 1])))
      return imp_nerr(im, nc, TS_EUNSUPPORTED, "input %d (%s) is neither per tensor nor per column", i, v->name);
  }
  set_out(nc, 0, yz->dtype, nd, od);
  return TS_OK;
}

/* ---- the integer convolutions ------------------------------------------------ */

/* A zero point that must be per tensor (input i, optional), of x's type. */
static ts_status per_tensor_zp(imp *im, nctx *nc, int i, const char *what, const tg_value *x) {
  const tg_value *z = IN(im, nc, i);
  if (!z) return TS_OK;
  if (!numel_is_one(z)) return imp_nerr(im, nc, TS_EUNSUPPORTED, "%s (%s) is not per tensor", what, z->name);
  if (!ir_dtype_eq(z->dtype, x->dtype)) return imp_nerr(im, nc, TS_ETYPE, "%s (%s) differs in type from its tensor", what, z->name);
  return TS_OK;
}

/* A weight parameter: per tensor or per output channel (w's dim 0). */
static ts_status per_channel(imp *im, nctx *nc, int i, const char *what, const tg_value *w) {
  const tg_value *v = IN(im, nc, i);
  if (!v || numel_is_one(v) || (v->ndim == 1 && tg_dim_eq(v->dims[0], w->dims[0]))) return TS_OK;
  return imp_nerr(im, nc, TS_EUNSUPPORTED, "%s (%s) is neither per tensor nor per output channel", what, v->name);
}

/* ConvInteger: Conv's shapes and attributes over int8/uint8 x and w, the
 * exact int32 sums of (x - x_zero_point) * (w - w_zero_point), the padding
 * being x's zero point (onnxruntime's). */
ts_status imp_conv_integer(imp *im, nctx *nc) {
  ts_status st = imp_need_input(im, nc, 0, "x");
  if (st || (st = imp_need_input(im, nc, 1, "w"))) return st;
  const tg_value *x = IN(im, nc, 0), *w = IN(im, nc, 1), *wz = IN(im, nc, 3);
  if (!q8(x->dtype) || !q8(w->dtype)) return imp_nerr(im, nc, TS_ETYPE, "x (%s) and w (%s) must be int8 or uint8", x->name, w->name);
  if (w->ndim < 3 || !tg_value_is_static(w)) return imp_nerr(im, nc, TS_ESHAPE, "w (%s) must be a static [M, C/group, k...]", w->name);
  if ((st = per_tensor_zp(im, nc, 2, "x_zero_point", x)) || (st = per_channel(im, nc, 3, "w_zero_point", w))) return st;
  if (wz && !ir_dtype_eq(wz->dtype, w->dtype)) return imp_nerr(im, nc, TS_ETYPE, "w_zero_point (%s) differs in type from w", wz->name);
  return imp_conv_shape(im, nc, x, w, NULL, ir_dt(IR_I32));
}

/* QLinearConv: ConvInteger's int32 sums (+ the int32 bias), then
 * onnxruntime's requantize: saturate(round half to even(acc * (x_scale *
 * w_scale / y_scale)) + y_zero_point), the multiplier in f32, per output
 * channel with w_scale. Kept as one integer op (lg_emit_qlinear_conv). */
ts_status imp_qlinear_conv(imp *im, nctx *nc) {
  static const char *const what[8] = {"x", "x_scale", "x_zero_point", "w", "w_scale", "w_zero_point", "y_scale", "y_zero_point"};
  for (int i = 0; i < 8; i++) {
    ts_status st = imp_need_input(im, nc, i, what[i]);
    if (st) return st;
  }
  const tg_value *x = IN(im, nc, 0), *w = IN(im, nc, 3), *wz = IN(im, nc, 5), *yz = IN(im, nc, 7), *b = IN(im, nc, 8);
  if (!q8(x->dtype) || !q8(w->dtype) || !q8(yz->dtype)) return imp_nerr(im, nc, TS_ETYPE, "x, w and y must be int8 or uint8");
  if (w->ndim < 3 || !tg_value_is_static(w)) return imp_nerr(im, nc, TS_ESHAPE, "w (%s) must be a static [M, C/group, k...]", w->name);
  for (int i = 1; i < 8; i += 5) /* x_scale, y_scale */
    if (!numel_is_one(IN(im, nc, i)) || !is_float(IN(im, nc, i)->dtype))
      return imp_nerr(im, nc, TS_EUNSUPPORTED, "input %d (%s, %s) is not a float scale per tensor", i, IN(im, nc, i)->name, what[i]);
  ts_status st;
  if ((st = per_tensor_zp(im, nc, 2, "x_zero_point", x)) || (st = per_tensor_zp(im, nc, 7, "y_zero_point", yz)) ||
      (st = per_channel(im, nc, 4, "w_scale", w)) || (st = per_channel(im, nc, 5, "w_zero_point", w)))
    return st;
  if (!ir_dtype_eq(wz->dtype, w->dtype)) return imp_nerr(im, nc, TS_ETYPE, "w_zero_point (%s) differs in type from w", wz->name);
  if (b && (b->dtype.code != IR_I32 || b->ndim != 1 || !tg_dim_eq(b->dims[0], w->dims[0])))
    return imp_nerr(im, nc, TS_ETYPE, "B (%s) must be int32 [M]", b->name);
  return imp_conv_shape(im, nc, x, w, NULL, yz->dtype);
}

/* ---- legalisation ------------------------------------------------------------ */

/* The load of a scale or zero point for output rank r: in[axis index] per
 * axis, else its one element. */
static void param_load(lg_kernel *k, tb *b, const char *name, int vid, int axis) {
  const tg_value *v = V(k, vid);
  if (v->ndim == 0) tb_printf(b, "%s[]", name);
  else if (!v->dims[0].sym && v->dims[0].value == 1) tb_printf(b, "%s[0]", name);
  else tb_printf(b, "%s[i%d]", name, axis);
}

static void q_range(ir_dtype t, const char **lo, const char **hi) {
  *lo = t.code == IR_U8 ? "0.0" : "-128.0";
  *hi = t.code == IR_U8 ? "255.0" : "127.0";
}

void lg_emit_quantize(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out) {
  const tg_value *y = OUTV(0);
  int r = y->ndim, axis = (int)tg_attr_int(n, "axis", 1);
  const char *lo, *hi;
  q_range(y->dtype, &lo, &hi);
  tb b, S, Z;
  tb_reset(&b);
  tb_reset(&S);
  tb_reset(&Z);
  param_load(k, &S, in[1], n->inputs[1], axis);
  if (n->nin > 2 && in[2]) {
    tb_printf(&Z, "f32(");
    param_load(k, &Z, in[2], n->inputs[2], axis);
    tb_printf(&Z, ")");
  } else {
    tb_printf(&Z, "0.0");
  }
  lg_lhs(&b, out[0], r);
  tb_printf(&b, " = %s(min(max(round(f32(", dtn(y->dtype));
  lg_lhs(&b, in[0], r);
  tb_printf(&b, ") / f32(%s)) + %s, %s), %s))", S.s, Z.s, lo, hi);
  lg_stmt(k, &b);
}

void lg_emit_dequantize(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out) {
  const tg_value *y = OUTV(0);
  int r = y->ndim, axis = (int)tg_attr_int(n, "axis", 1);
  tb b, S, Z;
  tb_reset(&b);
  tb_reset(&S);
  tb_reset(&Z);
  param_load(k, &S, in[1], n->inputs[1], axis);
  if (n->nin > 2 && in[2]) param_load(k, &Z, in[2], n->inputs[2], axis);
  /* computed in f32, stored in the scale's type (f32, or f16) */
  lg_lhs(&b, out[0], r);
  tb_printf(&b, " = %s((f32(", dtn(y->dtype));
  lg_lhs(&b, in[0], r);
  if (Z.n) tb_printf(&b, ") - f32(%s)) * f32(%s))", Z.s, S.s);
  else tb_printf(&b, ")) * f32(%s))", S.s);
  lg_stmt(k, &b);
}

void lg_emit_dyn_quantize(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out) {
  const tg_value *x = V(k, n->inputs[0]);
  int r = x->ndim;
  bool red[MAX_RANK];
  for (int a = 0; a < r; a++) red[a] = true;
  char mn[64], mx[64], sc[64], zp[64];
  lg_tmpname(mn, sizeof mn, out[0], "min");
  lg_tmpname(mx, sizeof mx, out[0], "max");
  lg_tmpname(sc, sizeof sc, out[0], "scale");
  lg_tmpname(zp, sizeof zp, out[0], "zp");
  lg_let_dims(k, mn, x->dtype, 0, NULL);
  lg_let_dims(k, mx, x->dtype, 0, NULL);
  lg_reduce_stmt(k, mn, "min=", in[0], x, red);
  lg_reduce_stmt(k, mx, "max=", in[0], x, red);
  tb b;
  const char *so = out[1] ? out[1] : sc, *zo = out[2] ? out[2] : zp;
  if (!out[1]) lg_let_dims(k, sc, x->dtype, 0, NULL);
  if (!out[2]) lg_let_dims(k, zp, ir_dt(IR_U8), 0, NULL);
  /* scale: the range of [min(x, 0), max(x, 0)] over 255, 1 when empty */
  tb_reset(&b);
  tb_printf(&b, "%s[] = select(max(%s[], 0.0) == min(%s[], 0.0), 1.0, (max(%s[], 0.0) - min(%s[], 0.0)) / 255.0)", so, mx,
            mn, mx, mn);
  lg_stmt(k, &b);
  tb_reset(&b);
  tb_printf(&b, "%s[] = u8(round(min(max(0.0 - min(%s[], 0.0) / %s[], 0.0), 255.0)))", zo, mn, so);
  lg_stmt(k, &b);
  tb_reset(&b);
  lg_lhs(&b, out[0], r);
  tb_printf(&b, " = u8(min(max(round(");
  lg_lhs(&b, in[0], r);
  tb_printf(&b, " / %s[]) + f32(%s[]), 0.0), 255.0))", so, zo);
  lg_stmt(k, &b);
}

/* ---- the integer contractions ------------------------------------------------
 * MatMulInteger, QLinearMatMul, ConvInteger and QLinearConv share one form:
 *   acc  += i32(x[..]) * i32(w[..])                  (the canonical int8 block)
 *   xsum += i32(x[..])      per output row / pixel and group, when w's zero point is not 0
 *   wsum += i32(w[..])      per output column / channel, when x's zero point is not 0
 *   v = acc - wz * xsum - xz * wsum + K * xz * wz + bias
 * which is the exact sum of (x - xz) * (w - wz) (+ bias) in int32. When the
 * qdq pass has folded the weight side at build time (constant w and zero
 * points: attribute tessel.comp), the bias input holds
 * bias - xz * wsum + K * xz * wz and the wsum block is not written; with a
 * zero point known only at run time (DynamicQuantizeLinear's) and no bias,
 * tessel.wsum: the bias input holds the constant wsum instead. The
 * QLinear ops then requantize v as onnxruntime does (MlasRequantizeOutput):
 * saturate(round half to even(f32(v) * (x_scale * w_scale / y_scale)) +
 * y_zero_point), the multiplier in f32; tessel.relu raises the lower bound to
 * y_zero_point (a Relu between the op and its QuantizeLinear, exactly). */

/* Where each operand of an integer contraction is (input indices; -1: none). */
typedef struct qint_layout {
  int x, xs, xz, w, ws, wz, ys, yz, bias;
  bool conv;
} qint_layout;

static const qint_layout L_MATMUL_INTEGER = {0, -1, 2, 1, -1, 3, -1, -1, 4, false};
static const qint_layout L_QLINEAR_MATMUL = {0, 1, 2, 3, 4, 5, 6, 7, 8, false};
static const qint_layout L_CONV_INTEGER = {0, -1, 2, 1, -1, 3, -1, -1, 4, true};
static const qint_layout L_QLINEAR_CONV = {0, 1, 2, 3, 4, 5, 6, 7, 8, true};

int tg_qint_comp_input(tg_op op) {
  switch (op) {
  case TG_OP_MATMUL_INTEGER: return L_MATMUL_INTEGER.bias;
  case TG_OP_QLINEAR_MATMUL: return L_QLINEAR_MATMUL.bias;
  case TG_OP_CONV_INTEGER: return L_CONV_INTEGER.bias;
  case TG_OP_QLINEAR_CONV: return L_QLINEAR_CONV.bias;
  default: return -1;
  }
}

static bool present(const tg_node *n, int i) { return i >= 0 && i < n->nin && n->inputs[i] >= 0; }

/* Input i is omitted or a constant of zeros. */
static bool known_zero(lg_kernel *k, const tg_node *n, int i) {
  if (!present(n, i)) return true;
  const tg_value *v = V(k, n->inputs[i]);
  if (v->kind != TG_V_CONST || !v->data) return false;
  const unsigned char *p = v->data;
  for (size_t j = 0; j < v->nbytes; j++)
    if (p[j]) return false;
  return true;
}

/* "f(load)" of a parameter (axis: the output axis it runs along), or "" . */
static void param_cast(lg_kernel *k, tb *t, const char *f, const char *const *in, const tg_node *n, int i, int axis) {
  tb_printf(t, "%s(", f);
  param_load(k, t, in[i], n->inputs[i], axis);
  tb_printf(t, ")");
}

/* "name[<v's batch dims broadcast against y's>, " (v [..., R, C], y of rank r). */
static void batch_load(tb *t, const char *name, const tg_value *v, const tg_value *y) {
  int nb = v->ndim - 2, off = (y->ndim - 2) - nb;
  tb_printf(t, "%s[", name);
  for (int i = 0; i < nb; i++) {
    bool zero = dim_is(v->dims[i], 1) && !dim_is(y->dims[off + i], 1);
    if (zero) tb_printf(t, "0, ");
    else tb_printf(t, "i%d, ", off + i);
  }
}

/* The column sums of w as indexed at an output element: "wsum[i(r-1)]" for
 * a 2-D w, else per output batch "wsum[i0, .., i(r-3), i(r-1)]". */
static void wsum_index(tb *t, const char *wsum, const tg_value *wv, int r) {
  tb_printf(t, "%s[", wsum);
  for (int i = 0; i < r - 2 && wv->ndim > 2; i++) tb_printf(t, "i%d, ", i);
  tb_printf(t, "i%d]", r - 1);
}

static void emit_qint(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out, const qint_layout *L) {
  const tg_value *y = OUTV(0), *xv = V(k, n->inputs[L->x]), *wv = V(k, n->inputs[L->w]);
  /* tessel.nhwc: a channels-last conv (the qdq pass's int8 region), x and y [N, H, W, C] */
  bool cl = L->conv && tg_attr_int(n, "tessel.nhwc", 0) != 0;
  int r = y->ndim, ch = L->conv ? (cl ? 3 : 1) : r - 1; /* the output axis of w's channels / columns */
  bool requant = L->ys >= 0, folded = tg_attr_int(n, "tessel.comp", 0) != 0;
  bool wsum_in = tg_attr_int(n, "tessel.wsum", 0) != 0 && present(n, L->bias); /* the bias slot holds sum w */
  bool xz = !known_zero(k, n, L->xz), wz = !known_zero(k, n, L->wz), bias = present(n, L->bias) && !wsum_in;
  /* a 2-D ungrouped conv with w's zero point 0 (a QDQ model's symmetric
   * weights) sums channels-last, the form the VNNI rule tensorizes; its
   * epilogue reads acc back in NCHW order */
  bool nhwc = L->conv && !wz && lg_conv_int_nhwc_ok(k, n, L->x, L->w);
  if (cl && !nhwc) {
    lg_fail(k, TS_EUNSUPPORTED, n, "tessel.nhwc on a convolution that cannot sum channels-last");
    return;
  }
  bool direct = !nhwc && !requant && !xz && !wz && !bias;
  char acc[64], xsum[64], wsum[64], s[48];
  if (direct) {
    snprintf(acc, sizeof acc, "%s", out[0]);
  } else {
    lg_tmpname(acc, sizeof acc, out[0], "acc");
    if (!nhwc) lg_let_dims(k, acc, ir_dt(IR_I32), r, y->dims);
  }
  lg_tmpname(xsum, sizeof xsum, out[0], "xsum");
  if (wsum_in) snprintf(wsum, sizeof wsum, "%s", in[L->bias]);
  else lg_tmpname(wsum, sizeof wsum, out[0], "wsum");
  tb K, t;
  tb_reset(&K);
  int64_t groups = 1;
  if (L->conv) {
    tb pad;
    tb_reset(&pad);
    if (xz) param_load(k, &pad, in[L->xz], n->inputs[L->xz], 0);
    else tb_printf(&pad, "0");
    if (nhwc ? !lg_conv_int_nhwc(k, n, L->x, L->w, in, out[0], pad.s, acc)
             : !lg_conv_int(k, n, L->x, L->w, in, out[0], pad.s, !xz, acc, wz ? xsum : NULL, &groups))
      return;
    int64_t kk = 1;
    for (int i = 1; i < wv->ndim; i++) kk *= wv->dims[i].value;
    tb_printf(&K, "%" PRId64, kk);
  } else {
    tg_dim kd = xv->dims[xv->ndim - 1];
    tb_printf(&K, "%s", lg_dim_s(k, kd, s));
    tb xa, wb;
    tb_reset(&xa);
    tb_reset(&wb);
    batch_load(&xa, in[L->x], xv, y); /* x[<batch>, i(r-2), r0] */
    tb_printf(&xa, "i%d, r0]", r - 2);
    batch_load(&wb, in[L->w], wv, y); /* w[<batch>, r0, i(r-1)] */
    tb_printf(&wb, "r0, i%d]", r - 1);
    tb_reset(&t);
    lg_lhs(&t, acc, r);
    tb_printf(&t, " += i32(%s) * i32(%s) for r0 in 0..%s", xa.s, wb.s, K.s);
    lg_stmt(k, &t);
    if (wz) { /* the row sums of x */
      lg_let_dims(k, xsum, ir_dt(IR_I32), r - 1, y->dims);
      tb_reset(&t);
      lg_lhs(&t, xsum, r - 1);
      tb_printf(&t, " += i32(%s) for r0 in 0..%s", xa.s, K.s);
      lg_stmt(k, &t);
    }
    if (xz && !folded && !wsum_in) { /* the column sums of w, per batch of the output */
      tg_dim wd[MAX_RANK];
      int nw = 0;
      for (int i = 0; i < r - 2 && wv->ndim > 2; i++) wd[nw++] = y->dims[i];
      wd[nw++] = y->dims[r - 1];
      lg_let_dims(k, wsum, ir_dt(IR_I32), nw, wd);
      tb_reset(&t);
      wsum_index(&t, wsum, wv, r);
      tb_printf(&t, " += i32(%s) for r0 in 0..%s", wb.s, K.s);
      lg_stmt(k, &t);
    }
  }
  if (L->conv && xz && !folded && !wsum_in) { /* the output channel sums of w */
    lg_let_dims(k, wsum, ir_dt(IR_I32), 1, &wv->dims[0]);
    tb_reset(&t);
    tb_printf(&t, "%s[i1] += i32(%s[i1", wsum, in[L->w]);
    for (int i = 1; i < wv->ndim; i++) tb_printf(&t, ", r%d", i - 1);
    tb_printf(&t, "])");
    for (int i = 1; i < wv->ndim; i++) tb_printf(&t, "%s r%d in 0..%" PRId64, i > 1 ? "," : " for", i - 1, wv->dims[i].value);
    lg_stmt(k, &t);
  }
  if (direct) return;
  /* v = acc - wz * xsum - xz * wsum + K * xz * wz + bias */
  tb v;
  tb_reset(&v);
  if (nhwc && !cl) tb_printf(&v, "%s[i0, i2, i3, i1]", acc);
  else lg_lhs(&v, acc, r);
  if (wz) {
    tb_printf(&v, " - ");
    param_cast(k, &v, "i32", in, n, L->wz, ch);
    tb_printf(&v, " * %s[", xsum);
    if (L->conv) {
      tb_printf(&v, "i0, ");
      if (groups == 1) tb_printf(&v, "0");
      else tb_printf(&v, "i1 // %" PRId64, wv->dims[0].value / groups);
      for (int i = 2; i < r; i++) tb_printf(&v, ", i%d", i);
    } else {
      for (int i = 0; i < r - 1; i++) tb_printf(&v, "%si%d", i ? ", " : "", i);
    }
    tb_printf(&v, "]");
  }
  if (xz && !folded) {
    tb_printf(&v, " - ");
    param_cast(k, &v, "i32", in, n, L->xz, 0);
    tb_printf(&v, " * ");
    if (L->conv || wsum_in) tb_printf(&v, "%s[i%d]", wsum, ch);
    else wsum_index(&v, wsum, wv, r);
    if (wz) {
      tb_printf(&v, " + %s * ", K.s);
      param_cast(k, &v, "i32", in, n, L->xz, 0);
      tb_printf(&v, " * ");
      param_cast(k, &v, "i32", in, n, L->wz, ch);
    }
  }
  if (bias) tb_printf(&v, " + %s[i%d]", in[L->bias], ch);
  tb_reset(&t);
  lg_lhs(&t, out[0], r);
  if (!requant) {
    tb_printf(&t, " = %s", v.s);
    lg_stmt(k, &t);
    return;
  }
  const char *lo, *hi;
  q_range(y->dtype, &lo, &hi);
  tb XS, WS, YS, YZ;
  tb_reset(&XS);
  tb_reset(&WS);
  tb_reset(&YS);
  tb_reset(&YZ);
  param_cast(k, &XS, "f32", in, n, L->xs, 0);
  param_cast(k, &WS, "f32", in, n, L->ws, ch);
  param_cast(k, &YS, "f32", in, n, L->ys, 0);
  param_cast(k, &YZ, "f32", in, n, L->yz, 0);
  /* x_scale * w_scale / y_scale in f32 (f16 scales widened first), in that
   * order (onnxruntime's) */
  tb_printf(&t, " = %s(min(max(round(f32(%s) * (%s * %s / %s)) + %s, %s), %s))", dtn(y->dtype), v.s, XS.s, WS.s, YS.s,
            YZ.s, tg_attr_int(n, "tessel.relu", 0) ? YZ.s : lo, hi);
  lg_stmt(k, &t);
}

void lg_emit_matmul_integer(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out) {
  emit_qint(k, n, in, out, &L_MATMUL_INTEGER);
}

void lg_emit_qlinear_matmul(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out) {
  emit_qint(k, n, in, out, &L_QLINEAR_MATMUL);
}

void lg_emit_conv_integer(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out) {
  emit_qint(k, n, in, out, &L_CONV_INTEGER);
}

void lg_emit_qlinear_conv(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out) {
  emit_qint(k, n, in, out, &L_QLINEAR_CONV);
}
