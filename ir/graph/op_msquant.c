/* op_msquant.c — onnxruntime's quantized operators of the com.microsoft
 * domain that its quantizer writes in the QOperator format (and that the
 * ONNX model zoo's int8 models hold): QLinearAdd, QLinearMul,
 * QLinearSigmoid, QLinearLeakyRelu, QLinearGlobalAveragePool,
 * QLinearAveragePool, QLinearConcat and QGemm. Each is imported as what it
 * means: DequantizeLinear of each quantized input, the float operator,
 * QuantizeLinear to the output's scale and zero point (expand_int.h), the
 * same chain a QDQ model holds, so the qdq pass treats both alike.
 * docs/GRAPH.md ("Expanded operators"). */
#include <stdio.h>

#include "expand_int.h"

static const char *dq(xb *b, const char *x, const char *s, const char *zp) {
  return XN(b, "DequantizeLinear", NULL, x, s, zp);
}

/* Quantizes y to the output: the zero point's type, else x's (an omitted
 * zero point means 0 of the quantized input's type; QuantizeLinear alone
 * would make it uint8). */
static const char *q(xb *b, const char *y, const char *s, const char *zp, int qtype, const char *out) {
  if (!zp[0] && qtype != ONNX__TENSOR_PROTO__DATA_TYPE__UINT8) {
    Onnx__AttributeProto *to[] = {xa_int(b, "to", qtype)};
    zp = XA(b, "Cast", NULL, to, c_int(b, 0));
  }
  return XN(b, "QuantizeLinear", out, y, s, zp);
}

static ts_status need_quant(imp *im, nctx *nc, int i, const char *what) {
  const tg_value *v = IN(im, nc, i);
  char buf[16];
  if (!v) return imp_nerr(im, nc, TS_EINVAL, "%s (input %d) is required", what, i);
  if (v->dtype.code != IR_U8 && v->dtype.code != IR_I8)
    return imp_nerr(im, nc, TS_ETYPE, "%s (%s) is %s; the op takes uint8 or int8", what, v->name,
                    ir_dtype_str(v->dtype, buf, sizeof buf));
  return TS_OK;
}

/* [N, spatial..., C] <-> [N, C, spatial...] around a channels_last pool */
static const char *to_channels_first(xb *b, const char *x, int r, bool back) {
  int64_t perm[MAX_RANK];
  perm[0] = 0;
  for (int i = 1; i < r; i++) perm[i] = back ? (i == r - 1 ? 1 : i + 1) : (i == 1 ? r - 1 : i - 1);
  return transpose(b, x, perm, r, NULL);
}

ts_status imp_ms_qlinear(imp *im, nctx *nc) {
  xb b = {.im = im, .nc = nc, .elem = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT};
  const char *out = nc->outname[0];
  ts_status st = need_quant(im, nc, nc->op == TG_OP_MS_QLINEAR_CONCAT ? 2 : 0, "input X");
  if (st) return st;
  const tg_value *x = IN(im, nc, nc->op == TG_OP_MS_QLINEAR_CONCAT ? 2 : 0);
  int qt = xonnx_type(x);
  switch (nc->op) {
  case TG_OP_MS_QLINEAR_ADD:
  case TG_OP_MS_QLINEAR_MUL: {
    if ((st = need_quant(im, nc, 3, "input B"))) return st;
    const char *a = dq(&b, xin(nc, 0), xin(nc, 1), xin(nc, 2));
    const char *c = dq(&b, xin(nc, 3), xin(nc, 4), xin(nc, 5));
    const char *y = XN(&b, nc->op == TG_OP_MS_QLINEAR_ADD ? "Add" : "Mul", NULL, a, c);
    q(&b, y, xin(nc, 6), xin(nc, 7), qt, out);
    break;
  }
  case TG_OP_MS_QLINEAR_SIGMOID:
  case TG_OP_MS_QLINEAR_LEAKY_RELU: {
    const char *a = dq(&b, xin(nc, 0), xin(nc, 1), xin(nc, 2)), *y;
    if (nc->op == TG_OP_MS_QLINEAR_SIGMOID) y = XN(&b, "Sigmoid", NULL, a);
    else {
      Onnx__AttributeProto *al[] = {xa_float(&b, "alpha", (float)afloat(nc, "alpha", 0.01))};
      y = XA(&b, "LeakyRelu", NULL, al, a);
    }
    q(&b, y, xin(nc, 3), xin(nc, 4), qt, out);
    break;
  }
  case TG_OP_MS_QLINEAR_GLOBAL_AVG_POOL:
  case TG_OP_MS_QLINEAR_AVG_POOL: {
    int64_t cl = aint(nc, "channels_last", 0);
    if (cl != 0 && cl != 1) return imp_nerr(im, nc, TS_EINVAL, "channels_last=%" PRId64 " (0 or 1)", cl);
    if (x->ndim < 3) return imp_nerr(im, nc, TS_ESHAPE, "X has rank %d; the pool needs [N, C, spatial...]", x->ndim);
    const char *a = dq(&b, xin(nc, 0), xin(nc, 1), xin(nc, 2)), *y;
    if (cl) a = to_channels_first(&b, a, x->ndim, false);
    if (nc->op == TG_OP_MS_QLINEAR_GLOBAL_AVG_POOL) {
      y = XN(&b, "GlobalAveragePool", NULL, a);
    } else { /* AveragePool's own attributes, passed on as given */
      Onnx__AttributeProto *at[8];
      int na = 0, n;
      const int64_t *v;
      static const char *const lists[] = {"kernel_shape", "pads", "strides"};
      for (int i = 0; i < 3; i++)
        if ((v = aints(nc, lists[i], &n))) at[na++] = xa_ints(&b, lists[i], v, n);
      if (A(nc, "ceil_mode")) at[na++] = xa_int(&b, "ceil_mode", aint(nc, "ceil_mode", 0));
      if (A(nc, "count_include_pad")) at[na++] = xa_int(&b, "count_include_pad", aint(nc, "count_include_pad", 0));
      if (A(nc, "auto_pad")) at[na++] = xa_str(&b, "auto_pad", astr(nc, "auto_pad", "NOTSET"));
      y = xn(&b, "AveragePool", NULL, 1, (const char *[]){a}, na, at);
    }
    if (cl) y = to_channels_first(&b, y, x->ndim, true);
    q(&b, y, xin(nc, 3), xin(nc, 4), qt, out);
    break;
  }
  case TG_OP_MS_QLINEAR_CONCAT: {
    if ((nc->nin - 2) % 3 || nc->nin < 5)
      return imp_nerr(im, nc, TS_EINVAL, "%d inputs: Y_scale, Y_zero_point, then (X, X_scale, X_zero_point) triples",
                      nc->nin);
    int k = (nc->nin - 2) / 3;
    const char **parts = TS_ANEWN(im->a, const char *, k);
    if (!parts) return imp_oom(im);
    for (int i = 0; i < k; i++) {
      if ((st = need_quant(im, nc, 2 + 3 * i, "input X"))) return st;
      parts[i] = dq(&b, xin(nc, 2 + 3 * i), xin(nc, 3 + 3 * i), xin(nc, 4 + 3 * i));
    }
    Onnx__AttributeProto *ax[] = {xa_int(&b, "axis", aint(nc, "axis", 0))};
    const char *y = xn(&b, "Concat", NULL, k, parts, 1, ax);
    q(&b, y, xin(nc, 0), xin(nc, 1), qt, out);
    break;
  }
  default: { /* QGemm: A, a_scale, a_zp, B, b_scale, b_zp, [C], [y_scale, y_zp] */
    if ((st = need_quant(im, nc, 3, "input B"))) return st;
    int64_t ta = aint(nc, "transA", 0), tb = aint(nc, "transB", 0);
    Onnx__AttributeProto *bax[] = {xa_int(&b, "axis", tb ? 0 : 1)}; /* a per-column scale of B */
    const char *a = dq(&b, xin(nc, 0), xin(nc, 1), xin(nc, 2));
    const char *bb = XA(&b, "DequantizeLinear", NULL, bax, xin(nc, 3), xin(nc, 4), xin(nc, 5));
    const char *c = xin(nc, 6);
    const tg_value *cv = IN(im, nc, 6);
    double alpha = afloat(nc, "alpha", 1.0);
    if (cv && cv->dtype.code == IR_I32) {
      /* an int32 bias added to the accumulator: scale alpha * a_scale * b_scale, zero point 0
       * (onnxruntime scales the biased sum by alpha) */
      Onnx__AttributeProto *cax[] = {xa_int(&b, "axis", 0)};
      const char *cs = XN(&b, "Mul", NULL, xin(nc, 1), xin(nc, 4));
      if (alpha != 1.0) cs = XN(&b, "Mul", NULL, cs, c_float(&b, alpha));
      c = XA(&b, "DequantizeLinear", NULL, cax, c, cs);
    } else if (cv) {
      return imp_nerr(im, nc, TS_ETYPE, "C (%s) is not int32", cv->name);
    }
    Onnx__AttributeProto *g[] = {xa_float(&b, "alpha", (float)alpha), xa_int(&b, "transA", ta),
                                 xa_int(&b, "transB", tb)};
    bool quant_out = IN(im, nc, 7) != NULL;
    const char *y = c[0] ? XA(&b, "Gemm", quant_out ? NULL : out, g, a, bb, c) : XA(&b, "Gemm", quant_out ? NULL : out, g, a, bb);
    if (quant_out) q(&b, y, xin(nc, 7), xin(nc, 8), qt, out);
    break;
  }
  }
  if (b.st) return b.st;
  nc->expanded = true;
  return TS_OK;
}
