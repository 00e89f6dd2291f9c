/* op_quant.c — the quantization operators that QDQ and dynamically
 * quantized models hold: QuantizeLinear, DequantizeLinear (per tensor and
 * per axis, int8 and uint8 with zero points), DynamicQuantizeLinear and
 * MatMulInteger, with onnxruntime's arithmetic: q = saturate(round half to
 * even(x / scale) + zp), x = (q - zp) * scale, DynamicQuantizeLinear's
 * scale (max(x, 0) - min(x, 0)) / 255 (1 when that is 0) and zero point
 * round(saturate(-min / scale)), MatMulInteger's int32 sums of (a - azp) *
 * (b - bzp). Each is its own kernel here (the first step of issue 16: QDQ
 * models import and run); the int8 fusion builds on them. Their rows are in
 * ops.c. docs/GRAPH.md ("Quantization"). */
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
  if (x->ndim == 0) *axis = 0;
  else if (!imp_norm_axis(axis, x->ndim, false))
    return imp_nerr(im, nc, TS_EINVAL, "axis %" PRId64 " is out of range for rank %d", aint(nc, "axis", 1), x->ndim);
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

/* MatMulInteger: A [..., M, K] against a 2-D B [K, N] (the weights of a
 * dynamically quantized model); zero points per tensor, B's also per
 * column. */
ts_status imp_matmul_integer(imp *im, nctx *nc) {
  ts_status st = imp_need_input(im, nc, 0, "A");
  if (st || (st = imp_need_input(im, nc, 1, "B"))) return st;
  const tg_value *a = IN(im, nc, 0), *b = IN(im, nc, 1), *az = IN(im, nc, 2), *bz = IN(im, nc, 3);
  if (!q8(a->dtype) || !q8(b->dtype)) return imp_nerr(im, nc, TS_ETYPE, "A and B must be int8 or uint8");
  if (a->ndim < 2 || b->ndim != 2)
    return imp_nerr(im, nc, TS_EUNSUPPORTED, "A of rank %d and B of rank %d (A [..., M, K] and a 2-D B only)", a->ndim, b->ndim);
  if (!tg_dim_eq(a->dims[a->ndim - 1], b->dims[0])) return imp_nerr(im, nc, TS_ESHAPE, "A's K and B's K differ");
  if (az && !numel_is_one(az)) return imp_nerr(im, nc, TS_EUNSUPPORTED, "a_zero_point per row (per tensor only)");
  if (bz && !numel_is_one(bz) && !(bz->ndim == 1 && tg_dim_eq(bz->dims[0], b->dims[1])))
    return imp_nerr(im, nc, TS_EUNSUPPORTED, "b_zero_point (%s) is neither per tensor nor per column", bz->name);
  if ((az && !ir_dtype_eq(az->dtype, a->dtype)) || (bz && !ir_dtype_eq(bz->dtype, b->dtype)))
    return imp_nerr(im, nc, TS_ETYPE, "a zero point differs in type from its matrix");
  tg_dim od[MAX_RANK];
  for (int i = 0; i < a->ndim - 1; i++) od[i] = a->dims[i];
  od[a->ndim - 1] = b->dims[1];
  set_out(nc, 0, ir_dt(IR_I32), a->ndim, od);
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
  if (a->ndim < 2 || b->ndim != 2)
    return imp_nerr(im, nc, TS_EUNSUPPORTED, "a of rank %d and b of rank %d (a [..., M, K] and a 2-D b only)", a->ndim, b->ndim);
  if (!tg_dim_eq(a->dims[a->ndim - 1], b->dims[0])) return imp_nerr(im, nc, TS_ESHAPE, "a's K and b's K differ");
  static const int per_tensor[] = {1, 2, 6, 7};
  for (int i = 0; i < 4; i++)
    if (!numel_is_one(IN(im, nc, per_tensor[i])))
      return imp_nerr(im, nc, TS_EUNSUPPORTED, "input %d (%s) is not per tensor", per_tensor[i], IN(im, nc, per_tensor[i])->name);
  for (int i = 4; i <= 5; i++) {
    const tg_value *v = IN(im, nc, i);
    if (!numel_is_one(v) && !(v->ndim == 1 && tg_dim_eq(v->dims[0], b->dims[1])))
      return imp_nerr(im, nc, TS_EUNSUPPORTED, "input %d (%s) is neither per tensor nor per column", i, v->name);
  }
  tg_dim od[MAX_RANK];
  for (int i = 0; i < a->ndim - 1; i++) od[i] = a->dims[i];
  od[a->ndim - 1] = b->dims[1];
  set_out(nc, 0, yz->dtype, a->ndim, od);
  return TS_OK;
}

/* ---- QLinearConv as DequantizeLinear -> Conv -> QuantizeLinear -------------------- */

/* Adds the node cc has been imported as (its op, inputs, attributes, one
 * output named oname); *vid is the output value. */
static ts_status add_aux(imp *im, nctx *cc, const char *oname, int *vid) {
  ts_diag tmp;
  ts_diag_clear(&tmp);
  if (!oname) return imp_oom(im);
  *vid = tg_value_add(im->g, oname, TG_V_INTER, cc->odt[0], cc->ondim[0], cc->odims[0], &tmp);
  if (*vid < 0) return imp_nerr(im, cc, tmp.code, "%s", tmp.msg);
  if (!imp_kv_grow(im)) return imp_oom(im);
  int nid = tg_node_add(im->g, cc->op, NULL, cc->nin, cc->in, 1, vid, &tmp);
  if (nid < 0) return imp_nerr(im, cc, tmp.code, "%s", tmp.msg);
  for (int i = 0; i < cc->nattr; i++)
    if (tg_node_set_attr(im->g, im->g->nodes[nid], &cc->attr[i]) != TS_OK) return imp_oom(im);
  return TS_OK;
}

/* DequantizeLinear(x, scale[, zp]) along axis as an extra node. */
static ts_status add_dequant(imp *im, nctx *nc, nctx *cc, int x, int scale, int zp, int64_t axis, const char *tag, int *vid) {
  memset(cc, 0, sizeof *cc);
  cc->np = nc->np;
  cc->name = nc->name;
  cc->op = TG_OP_DEQUANTIZE_LINEAR;
  cc->nin = zp >= 0 ? 3 : 2;
  cc->in[0] = x;
  cc->in[1] = scale;
  cc->in[2] = zp;
  cc->nout = 1;
  cc->attr[cc->nattr++] = (tg_attr){.name = "axis", .kind = TG_A_INT, .i = axis};
  ts_status st = imp_dequantize(im, cc);
  return st ? st : add_aux(im, cc, ts_arena_printf(im->a, "%s:%s", nc->outname[0], tag), vid);
}

/* The bias scale x_scale * w_scale (per output channel), a constant. */
static ts_status bias_scale(imp *im, nctx *nc, int64_t m, int *vid) {
  double xs;
  const tg_value *ws = IN(im, nc, 4);
  if (!imp_const_scalar(im, nc->in[1], &xs) || ws->kind != TG_V_CONST || !ws->data || ws->dtype.code != IR_F32)
    return imp_nerr(im, nc, TS_EUNSUPPORTED, "with a bias, x_scale and w_scale must be float32 constants");
  int64_t nw = tg_value_numel(ws);
  float *v = ts_malloc((size_t)m * sizeof *v);
  if (!v) return imp_oom(im);
  for (int64_t c = 0; c < m; c++) v[c] = (float)(xs * ((const float *)ws->data)[nw == 1 ? 0 : c]);
  tg_dim d = DC(m);
  ts_diag tmp;
  ts_diag_clear(&tmp);
  *vid = tg_value_add(im->g, ts_arena_printf(im->a, "%s:bias_scale", nc->outname[0]), TG_V_CONST, ir_dt(IR_F32), 1, &d, &tmp);
  ts_status st = *vid < 0 ? imp_nerr(im, nc, tmp.code, "%s", tmp.msg) : tg_value_set_data(im->g, *vid, v, (size_t)m * 4, im->d);
  ts_free(v);
  if (!st && !imp_kv_grow(im)) st = imp_oom(im);
  return st;
}

/* QLinearConv: the float convolution of the dequantized input and weights
 * (per output channel), the int32 bias dequantized with x_scale * w_scale,
 * then QuantizeLinear with y's scale and zero point. The same value as
 * onnxruntime's int32 convolution and requantize, up to the order of the
 * float sums (a rounding boundary may land one step away). */
ts_status imp_qlinear_conv(imp *im, nctx *nc) {
  static const char *const what[8] = {"x", "x_scale", "x_zero_point", "w", "w_scale", "w_zero_point", "y_scale", "y_zero_point"};
  for (int i = 0; i < 8; i++) {
    ts_status st = imp_need_input(im, nc, i, what[i]);
    if (st) return st;
  }
  const tg_value *w = IN(im, nc, 3), *b = IN(im, nc, 8);
  if (w->ndim < 3 || w->dims[0].sym) return imp_nerr(im, nc, TS_ESHAPE, "w (%s) must be [M, C/group, k...]", w->name);
  if (b && (b->dtype.code != IR_I32 || b->ndim != 1 || !tg_dim_eq(b->dims[0], w->dims[0])))
    return imp_nerr(im, nc, TS_ETYPE, "B (%s) must be int32 [M]", b->name);
  nctx *cc = ts_calloc(1, sizeof *cc);
  if (!cc) return imp_oom(im);
  int dx = -1, dw = -1, sb = -1, db = -1, conv = -1;
  ts_status st = add_dequant(im, nc, cc, nc->in[0], nc->in[1], nc->in[2], 1, "x_dq", &dx);
  if (!st) st = add_dequant(im, nc, cc, nc->in[3], nc->in[4], nc->in[5], 0, "w_dq", &dw);
  if (!st && b) st = bias_scale(im, nc, w->dims[0].value, &sb);
  if (!st && b) st = add_dequant(im, nc, cc, nc->in[8], sb, -1, 0, "b_dq", &db);
  if (!st) { /* the convolution, with QLinearConv's own attributes */
    memset(cc, 0, sizeof *cc);
    cc->np = nc->np;
    cc->name = nc->name;
    cc->op = TG_OP_CONV;
    cc->nin = b ? 3 : 2;
    cc->in[0] = dx;
    cc->in[1] = dw;
    cc->in[2] = db;
    cc->nout = 1;
    cc->nattr = nc->nattr;
    memcpy(cc->attr, nc->attr, sizeof nc->attr[0] * (size_t)nc->nattr);
    st = imp_conv(im, cc);
    if (!st) st = add_aux(im, cc, ts_arena_printf(im->a, "%s:conv", nc->outname[0]), &conv);
  }
  ts_free(cc);
  if (st) return st;
  /* this node becomes the QuantizeLinear of the convolution */
  int ys = nc->in[6], yz = nc->in[7];
  nc->op = TG_OP_QUANTIZE_LINEAR;
  nc->nin = 3;
  nc->in[0] = conv;
  nc->in[1] = ys;
  nc->in[2] = yz;
  nc->nattr = 0;
  return imp_quantize(im, nc);
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

/* "dst[...] += (i32(a[..., r0]) - azp) * (i32(b[r0, n]) - bzp) for r0": the
 * int32 sums of MatMulInteger and QLinearMatMul (zero points may be absent). */
static void int_sum(lg_kernel *k, const char *dst, int r, const char *a, int avid, const char *b, const char *az, int azvid,
                    const char *bz, int bzvid) {
  tb t;
  tb_reset(&t);
  lg_lhs(&t, dst, r);
  tb_printf(&t, " += (i32(%s[", a);
  for (int i = 0; i < r - 1; i++) tb_printf(&t, "i%d, ", i);
  tb_printf(&t, "r0])");
  if (az) {
    tb_printf(&t, " - i32(");
    param_load(k, &t, az, azvid, 0); /* per tensor */
    tb_printf(&t, ")");
  }
  tb_printf(&t, ") * (i32(%s[r0, i%d])", b, r - 1);
  if (bz) {
    tb_printf(&t, " - i32(");
    param_load(k, &t, bz, bzvid, r - 1); /* per tensor or per column */
    tb_printf(&t, ")");
  }
  char s[48];
  const tg_value *av = V(k, avid);
  tb_printf(&t, ") for r0 in 0..%s", lg_dim_s(k, av->dims[av->ndim - 1], s));
  lg_stmt(k, &t);
}

void lg_emit_matmul_integer(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out) {
  bool az = n->nin > 2 && in[2], bz = n->nin > 3 && in[3];
  int_sum(k, out[0], OUTV(0)->ndim, in[0], n->inputs[0], in[1], az ? in[2] : NULL, az ? n->inputs[2] : -1,
          bz ? in[3] : NULL, bz ? n->inputs[3] : -1);
}

void lg_emit_qlinear_matmul(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out) {
  const tg_value *y = OUTV(0);
  int r = y->ndim;
  char acc[64];
  lg_tmpname(acc, sizeof acc, out[0], "acc");
  lg_let_dims(k, acc, ir_dt(IR_I32), r, y->dims);
  int_sum(k, acc, r, in[0], n->inputs[0], in[3], in[2], n->inputs[2], in[5], n->inputs[5]);
  const char *lo, *hi;
  q_range(y->dtype, &lo, &hi);
  tb b, BS;
  tb_reset(&b);
  tb_reset(&BS);
  param_load(k, &BS, in[4], n->inputs[4], r - 1); /* per tensor or per column */
  tb A, YS, YZ;
  tb_reset(&A);
  tb_reset(&YS);
  tb_reset(&YZ);
  param_load(k, &A, in[1], n->inputs[1], 0);
  param_load(k, &YS, in[6], n->inputs[6], 0);
  param_load(k, &YZ, in[7], n->inputs[7], 0);
  lg_lhs(&b, out[0], r);
  tb_printf(&b, " = %s(min(max(round(f32(", dtn(y->dtype));
  lg_lhs(&b, acc, r);
  tb_printf(&b, ") * (%s * %s / %s)) + f32(%s), %s), %s))", A.s, BS.s, YS.s, YZ.s, lo, hi);
  lg_stmt(k, &b);
}
