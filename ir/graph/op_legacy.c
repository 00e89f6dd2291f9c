/* op_legacy.c — the operators older models (opsets 7 to 12: the ONNX model
 * zoo's AlexNet, GoogLeNet, ResNet-50, SqueezeNet, ...) need beyond the
 * other families: LRN, Dropout (the identity at inference), the variadic
 * Sum, Mean, Max and Min with numpy broadcasting, and the helper the
 * handlers of other families call for a parameter that was an attribute
 * before some opset (Slice, Pad, Split, Squeeze, Unsqueeze, ReduceSum).
 * Also the forms of opsets 1 to 6 (PyTorch's first exporter) that other
 * handlers turn into the opset-7 form: the broadcast/axis attributes of
 * binary ops, PRelu's per-channel slope, is_test.
 * Each operator's import handler and its legalisation emitter; their rows
 * are in ops.c. docs/GRAPH.md ("Adding an operator", "Opsets"). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "legalize_int.h"
#include "onnx_int.h"
#include "ops.h"

/* ---- import: shape and dtype inference, canonical form ---------------------- */

ts_status imp_param_legacy(imp *im, nctx *nc, int i, const char *what, int until, bool *present, int64_t *buf,
                           int cap, const int64_t **vals, int *n) {
  if (im->opset >= until) return imp_param_ints(im, nc, i, what, present, buf, cap, vals, n);
  if (i < nc->nin && nc->in[i] >= 0)
    return imp_nerr(im, nc, TS_EINVAL, "input %d (%s): before opset %d the %s are the attribute '%s', not an input", i,
                    IN(im, nc, i)->name, until, what, what);
  const int64_t *v = aints(nc, what, n);
  if (*n > cap) return imp_nerr(im, nc, TS_EUNSUPPORTED, "attribute '%s' has %d elements (at most %d)", what, *n, cap);
  for (int k = 0; k < *n; k++) buf[k] = v[k];
  *vals = buf;
  *present = A(nc, what) != NULL;
  return TS_OK;
}

/* Adds, before the node, an Unsqueeze of input i that appends `ones`
 * trailing dims of 1, and makes the node read it. */
static ts_status unsqueeze_input(imp *im, nctx *nc, int i, int ones) {
  const tg_value *v = IN(im, nc, i);
  if (v->ndim + ones > MAX_RANK) return imp_nerr(im, nc, TS_EUNSUPPORTED, "rank above %d", MAX_RANK);
  tg_dim dims[MAX_RANK];
  int64_t axes[MAX_RANK];
  for (int k = 0; k < v->ndim; k++) dims[k] = v->dims[k];
  for (int k = 0; k < ones; k++) dims[v->ndim + k] = DC(1), axes[k] = v->ndim + k;
  char nm[300];
  snprintf(nm, sizeof nm, "%s:legacy_in%d", nc->outname[0], i); /* outputs are unique, so is this */
  ts_diag tmp;
  ts_diag_clear(&tmp);
  int vid = tg_value_add(im->g, nm, TG_V_INTER, v->dtype, v->ndim + ones, dims, &tmp);
  int nid = vid < 0 ? -1 : tg_node_add(im->g, TG_OP_UNSQUEEZE, nm, 1, &nc->in[i], 1, &vid, &tmp);
  if (nid < 0) return imp_nerr(im, nc, tmp.code, "%s", tmp.msg);
  tg_attr ax = {.name = "axes", .kind = TG_A_INTS, .n = ones, .ints = axes};
  if (tg_node_set_attr(im->g, im->g->nodes[nid], &ax) != TS_OK || !imp_kv_grow(im)) return imp_oom(im);
  nc->in[i] = vid;
  return TS_OK;
}

ts_status imp_legacy_broadcast(imp *im, nctx *nc) {
  if (im->opset >= 7) return TS_OK;
  const tg_value *a = IN(im, nc, 0), *b = IN(im, nc, 1);
  bool bc = aint(nc, "broadcast", 0) != 0, has_axis = A(nc, "axis") != NULL;
  int64_t axis = aint(nc, "axis", 0);
  drop_attr(nc, "broadcast");
  drop_attr(nc, "axis");
  if (!bc || !a || !b) return TS_OK; /* equal shapes: numpy broadcasting agrees */
  int ra = a->ndim, rb = b->ndim;
  if (rb > ra)
    return imp_nerr(im, nc, TS_ESHAPE, "broadcast=1 with B (%s) of rank %d above A's (%s) %d", b->name, rb, a->name, ra);
  if (!has_axis) axis = ra - rb; /* suffix matching */
  if (axis < 0 || axis > ra - rb)
    return imp_nerr(im, nc, TS_EINVAL, "axis=%" PRId64 ": B (%s) of rank %d does not fit in A (%s) of rank %d from there",
                    axis, b->name, rb, a->name, ra);
  for (int k = 0; k < rb; k++) {
    tg_dim x = a->dims[axis + k], y = b->dims[k];
    if (!tg_dim_eq(x, y) && !(!y.sym && y.value == 1)) {
      char s1[256], s2[256];
      imp_dims_str(s1, sizeof s1, ra, a->dims);
      imp_dims_str(s2, sizeof s2, rb, b->dims);
      return imp_nerr(im, nc, TS_ESHAPE, "broadcast=1, axis=%" PRId64 ": B %s does not match A %s from axis %" PRId64,
                      axis, s2, s1, axis);
    }
  }
  return axis + rb == ra ? TS_OK : unsqueeze_input(im, nc, 1, (int)(ra - rb - axis));
}

ts_status imp_legacy_slope(imp *im, nctx *nc) {
  if (im->opset >= 7) return TS_OK;
  const tg_value *x = IN(im, nc, 0), *s = IN(im, nc, 1);
  if (!x || !s || s->ndim != 1 || x->ndim < 3 || (!s->dims[0].sym && s->dims[0].value == 1) ||
      !tg_dim_eq(s->dims[0], x->dims[1]))
    return TS_OK;
  return unsqueeze_input(im, nc, 1, x->ndim - 2);
}

ts_status imp_legacy_is_test(imp *im, nctx *nc) {
  if (im->opset >= 7) return TS_OK;
  if (!aint(nc, "is_test", 0))
    return imp_nerr(im, nc, TS_EUNSUPPORTED,
                    "is_test is %s: before opset 7 that is training mode (batch statistics, random drops); tessel runs "
                    "inference only (export the model in eval mode: is_test=1)",
                    A(nc, "is_test") ? "0" : "absent (default 0)");
  drop_attr(nc, "is_test");
  return TS_OK;
}

/* LRN: y = x / (bias + alpha / size * sum of x^2 over the channel window)^beta. */
ts_status imp_lrn(imp *im, nctx *nc) {
  ts_status st = imp_unary(im, nc);
  if (st) return st;
  const tg_value *x = IN(im, nc, 0);
  if (x->ndim < 3) return imp_nerr(im, nc, TS_ESHAPE, "X has rank %d; LRN needs [N, C, D1, ...]", x->ndim);
  if (!A(nc, "size")) return imp_nerr(im, nc, TS_EINVAL, "attribute size is required");
  int64_t size = aint(nc, "size", 0);
  if (size < 1 || size > 1024) return imp_nerr(im, nc, TS_EINVAL, "size=%" PRId64 " (1 to 1024)", size);
  if ((st = imp_set_float(im, nc, "alpha", afloat(nc, "alpha", 1e-4))) ||
      (st = imp_set_float(im, nc, "beta", afloat(nc, "beta", 0.75))) ||
      (st = imp_set_float(im, nc, "bias", afloat(nc, "bias", 1.0))))
    return st;
  return TS_OK;
}

/* Dropout at inference: the identity. Opsets 7-11 carry a ratio attribute
 * (irrelevant at inference); from 12 ratio and training_mode are inputs,
 * and training_mode must be a constant false. Without a mask output the
 * node becomes an Identity; with one it stays a Dropout whose emitter
 * writes the mask (nothing is dropped at inference: all true, or zeros for
 * the old mask of the data's type). */
ts_status imp_dropout(imp *im, nctx *nc) {
  ts_status st = imp_need_input(im, nc, 0, "data");
  if (st || (st = imp_legacy_is_test(im, nc))) return st;
  if (im->opset < 12 && nc->nin > 1)
    return imp_nerr(im, nc, TS_EINVAL, "%d inputs; before opset 12 Dropout takes one (ratio is an attribute)", nc->nin);
  if ((st = imp_need_float(im, nc, 0))) return st;
  double tm = 0;
  if (nc->nin > 2 && nc->in[2] >= 0) {
    const tg_value *t = IN(im, nc, 2);
    if (ir_dtype_is_bool(t->dtype) && t->kind == TG_V_CONST && t->data && t->nbytes >= 1)
      tm = *(const uint8_t *)t->data; /* one bool */
    else if (!imp_const_scalar(im, nc->in[2], &tm))
      return imp_nerr(im, nc, TS_EUNSUPPORTED, "input 2 (%s, training_mode) must be a constant", IN(im, nc, 2)->name);
    if (tm != 0) return imp_nerr(im, nc, TS_EUNSUPPORTED, "training_mode is true (inference only)");
  }
  same_as_input(im, nc, 0, 0);
  drop_inputs(nc, 1);
  nc->nattr = 0;
  if (nc->nout < 2 || !nc->outname[1]) {
    nc->op = TG_OP_IDENTITY;
    nc->nout = 1;
    return TS_OK;
  }
  const tg_value *x = IN(im, nc, 0);
  tg_dim d[MAX_RANK];
  for (int i = 0; i < x->ndim; i++) d[i] = x->dims[i];
  /* the mask: bool from opset 10, the data's type before */
  set_out(nc, 1, im->opset >= 10 ? ir_dt(IR_BOOL) : x->dtype, x->ndim, d);
  return TS_OK;
}

/* Sum, Mean, Max, Min: one or more inputs of one dtype, broadcast together. */
ts_status imp_variadic(imp *im, nctx *nc) {
  const tg_value *a = IN(im, nc, 0);
  if (!a) return imp_nerr(im, nc, TS_EINVAL, "input 0 is required");
  if (nc->op != TG_OP_MAX && nc->op != TG_OP_MIN) {
    ts_status st = imp_need_float(im, nc, 0);
    if (st) return st;
  }
  int nd = a->ndim;
  tg_dim dims[MAX_RANK];
  for (int i = 0; i < nd; i++) dims[i] = a->dims[i];
  for (int i = 1; i < nc->nin; i++) {
    const tg_value *b = IN(im, nc, i);
    char b1[16], b2[16];
    if (!b) return imp_nerr(im, nc, TS_EINVAL, "input %d is omitted", i);
    if (!ir_dtype_eq(a->dtype, b->dtype))
      return imp_nerr(im, nc, TS_ETYPE, "inputs %s (%s) and %s (%s) differ in type", a->name,
                      ir_dtype_str(a->dtype, b1, sizeof b1), b->name, ir_dtype_str(b->dtype, b2, sizeof b2));
    tg_value acc = *a;
    acc.ndim = nd;
    acc.dims = dims;
    acc.name = "the inputs before it";
    tg_dim od[MAX_RANK];
    ts_status st = imp_broadcast(im, nc, &acc, b, &nd, od);
    if (st) return st;
    for (int k = 0; k < nd; k++) dims[k] = od[k];
  }
  set_out(nc, 0, a->dtype, nd, dims);
  return TS_OK;
}

/* ---- legalisation: compute-DSL text ------------------------------------------ */

void lg_emit_lrn(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out) {
  const char *o = out[0];
  const tg_value *x = V(k, n->inputs[0]);
  int r = x->ndim;
  int64_t size = tg_attr_int(n, "size", 1);
  int64_t lo = (size - 1) / 2; /* the window is [c - lo, c + size - 1 - lo] */
  char sq[96], s[48], l1[48], l2[48], l3[48];
  lg_tmpname(sq, sizeof sq, o, "sqsum");
  lg_let(k, sq, n->outputs[0]);
  tb b, c;
  tb_reset(&b);
  tb_reset(&c);
  tb_printf(&c, "i1 + r0");
  if (lo) tb_printf(&c, " - %" PRId64, lo);
  /* X[i0, i1 + r0 - lo, i2, ...] */
  tb X;
  tb_reset(&X);
  tb_printf(&X, "%s[i0, %s", in[0], c.s);
  for (int a = 2; a < r; a++) tb_printf(&X, ", i%d", a);
  tb_printf(&X, "]");
  lg_lhs(&b, sq, r);
  tb_printf(&b, " += %s * %s", X.s, X.s);
  if (size > 1) tb_printf(&b, " where %s >= 0 && %s < %s", c.s, c.s, lg_dim_s(k, x->dims[1], s));
  tb_printf(&b, " for r0 in 0..%" PRId64, size);
  lg_stmt(k, &b);
  double alpha = tg_attr_float(n, "alpha", 1e-4), beta = tg_attr_float(n, "beta", 0.75);
  double bias = tg_attr_float(n, "bias", 1.0);
  tb_reset(&b);
  lg_lhs(&b, o, r);
  tb_printf(&b, " = ");
  lg_lhs(&b, in[0], r);
  tb_printf(&b, " / pow(%s + %s * ", flit(bias, l1), flit(alpha / (double)size, l2));
  lg_lhs(&b, sq, r);
  tb_printf(&b, ", %s)", flit(beta, l3));
  lg_stmt(k, &b);
}

void lg_emit_dropout(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out) {
  tb b;
  if (n->nout > 1 && out[1]) {
    /* at inference nothing is dropped: the bool mask (opset 10+) is all
     * true; the old mask of the data's type (7-9) is zeros, as onnxruntime
     * writes it */
    const tg_value *m = OUTV(1);
    tb_reset(&b);
    lg_lhs(&b, out[1], m->ndim);
    tb_printf(&b, " = %s(%d)", dtn(m->dtype), ir_dtype_is_bool(m->dtype) ? 1 : 0);
    lg_stmt(k, &b);
  }
  if (!out[0]) return;
  tb_reset(&b);
  lg_lhs(&b, out[0], OUTV(0)->ndim);
  tb_printf(&b, " = ");
  lg_lhs(&b, in[0], OUTV(0)->ndim);
  lg_stmt(k, &b);
}

void lg_emit_variadic(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out) {
  tg_op op = lg_node_op(n);
  const tg_value *y = OUTV(0);
  int r = y->ndim;
  tb b;
  tb_reset(&b);
  lg_lhs(&b, out[0], r);
  tb_printf(&b, " = ");
  bool mm = op == TG_OP_MAX || op == TG_OP_MIN;
  if (op == TG_OP_MEAN && n->nin > 1) tb_printf(&b, "(");
  for (int i = 0; i < n->nin; i++) {
    if (mm && i + 1 < n->nin) tb_printf(&b, "%s(", op == TG_OP_MAX ? "max" : "min");
    lg_load_bcast(k, &b, in[i], n->inputs[i], r, y->dims);
    if (i + 1 < n->nin) tb_printf(&b, mm ? ", " : " + ");
  }
  if (mm)
    for (int i = 0; i + 1 < n->nin; i++) tb_printf(&b, ")");
  if (op == TG_OP_MEAN && n->nin > 1) {
    char l[48];
    tb_printf(&b, ") / %s", lit(y->dtype, (double)n->nin, l));
  }
  lg_stmt(k, &b);
}
