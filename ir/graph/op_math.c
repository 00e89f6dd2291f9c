/* op_math.c — unary maths (Exp, Log, Neg, Abs, Reciprocal, Floor, Ceil,
 * Round, Sign, Sin, Cos), the activations (Softplus, Softsign, Elu, Selu,
 * Celu, HardSigmoid, HardSwish, PRelu, Mish), LogSoftmax, the Reduce family
 * beyond ReduceMean/ReduceSum, ArgMax/ArgMin and GlobalMaxPool. Each
 * operator's import handler (shape and dtype inference, canonical
 * attributes) and its legalisation emitter; their rows are in ops.c,
 * LpNormalization's handler and the other normalisations in op_norm.c. docs/GRAPH.md ("Adding an operator"). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "legalize_int.h"
#include "onnx_int.h"
#include "ops.h"

/* ---- import: shape and dtype inference, canonical form ---------------------- */

/* Neg, Abs and Sign take signed integers too; the rest floats only. */
static bool takes_ints(tg_op op) { return op == TG_OP_NEG || op == TG_OP_ABS || op == TG_OP_SIGN; }

ts_status imp_math_unary(imp *im, nctx *nc) {
  ts_status st = imp_need_input(im, nc, 0, "X");
  if (st) return st;
  const tg_value *x = IN(im, nc, 0);
  char b[16];
  if (takes_ints(nc->op)) {
    ir_dtype_code c = (ir_dtype_code)x->dtype.code;
    if (!is_float(x->dtype) && c != IR_I8 && c != IR_I16 && c != IR_I32 && c != IR_I64)
      return imp_nerr(im, nc, TS_ETYPE, "input 0 (%s) is %s; the op takes float or signed integer tensors", x->name,
                      ir_dtype_str(x->dtype, b, sizeof b));
  } else if ((st = imp_need_float(im, nc, 0))) {
    return st;
  }
  same_as_input(im, nc, 0, 0);
  /* shape arithmetic: Neg and Abs of a known int tensor of constants (an
   * axis counted from the end, as LayerNormalization's function body does) */
  const known *kx = kv_get(im, nc->in[0]);
  if ((nc->op == TG_OP_NEG || nc->op == TG_OP_ABS) && kx && x->ndim <= 1 &&
      (x->dtype.code == IR_I64 || x->dtype.code == IR_I32)) {
    tg_dim *kd = TS_ANEWN(im->a, tg_dim, kx->n ? kx->n : 1);
    if (!kd) return imp_oom(im);
    bool ok = true;
    for (int i = 0; i < kx->n && ok; i++) {
      int64_t v = kx->d[i].value;
      ok = !kx->d[i].sym && v > INT64_MIN;
      kd[i] = DC(nc->op == TG_OP_NEG || v < 0 ? -v : v);
    }
    if (ok) nc->okv = (known){kx->n, kd};
  }
  switch (nc->op) {
  case TG_OP_ELU:
  case TG_OP_CELU: return imp_set_float(im, nc, "alpha", afloat(nc, "alpha", 1.0));
  case TG_OP_SELU:
    if ((st = imp_set_float(im, nc, "alpha", afloat(nc, "alpha", 1.67326319217681884765625)))) return st;
    return imp_set_float(im, nc, "gamma", afloat(nc, "gamma", 1.05070102214813232421875));
  case TG_OP_SHRINK:
    if ((st = imp_set_float(im, nc, "lambd", afloat(nc, "lambd", 0.5)))) return st;
    return imp_set_float(im, nc, "bias", afloat(nc, "bias", 0.0));
  case TG_OP_HARD_SIGMOID:
    if ((st = imp_set_float(im, nc, "alpha", afloat(nc, "alpha", 0.2)))) return st;
    return imp_set_float(im, nc, "beta", afloat(nc, "beta", 0.5));
  default: return TS_OK;
  }
}

/* PRelu: slope broadcasts to X's shape (unidirectionally). */
ts_status imp_prelu(imp *im, nctx *nc) {
  ts_status st = imp_math_unary(im, nc);
  if (st || (st = imp_legacy_slope(im, nc))) return st;
  const tg_value *x = IN(im, nc, 0), *s = IN(im, nc, 1);
  if (!s) return imp_nerr(im, nc, TS_EINVAL, "input 1 (slope) is required");
  char b1[16], b2[16];
  if (!ir_dtype_eq(x->dtype, s->dtype))
    return imp_nerr(im, nc, TS_ETYPE, "slope %s (%s) differs in type from X (%s)", s->name,
                    ir_dtype_str(s->dtype, b1, sizeof b1), ir_dtype_str(x->dtype, b2, sizeof b2));
  int nd;
  tg_dim dims[MAX_RANK];
  if ((st = imp_broadcast(im, nc, x, s, &nd, dims))) return st;
  bool same = nd == x->ndim;
  for (int i = 0; same && i < nd; i++) same = tg_dim_eq(dims[i], x->dims[i]);
  if (!same) {
    char s1[256], s2[256];
    imp_dims_str(s1, sizeof s1, s->ndim, s->dims);
    imp_dims_str(s2, sizeof s2, x->ndim, x->dims);
    return imp_nerr(im, nc, TS_ESHAPE, "slope %s %s does not broadcast to X's shape %s", s->name, s1, s2);
  }
  return TS_OK;
}

/* LogSoftmax: before opset 13 the input is coerced to 2-D at axis (default
 * 1) and the reduction runs over axes [axis, rank); from 13 over axis
 * (default -1) alone. The emitter reads the graph's opset, as Softmax's. */
ts_status imp_logsoftmax(imp *im, nctx *nc) {
  ts_status st = imp_math_unary(im, nc);
  if (st) return st;
  int64_t def = im->opset < 13 ? 1 : -1, ax = aint(nc, "axis", def);
  int r = IN(im, nc, 0)->ndim;
  if (!imp_norm_axis(&ax, r, false))
    return imp_nerr(im, nc, TS_EINVAL, "axis %" PRId64 " is out of range for rank %d", aint(nc, "axis", def), r);
  return imp_set_int(im, nc, "axis", ax);
}

/* ReduceMax ... ReduceSumSquare: ReduceMean's canonical form (imp_reduce:
 * axes attribute before 18, input from 18, keepdims, noop_with_empty_axes). */
ts_status imp_reduce_math(imp *im, nctx *nc) {
  tg_op op = nc->op;
  ts_status st;
  if ((op == TG_OP_REDUCE_L2 || op == TG_OP_REDUCE_LOG_SUM_EXP) && (st = imp_need_float(im, nc, 0))) return st;
  const tg_value *x = IN(im, nc, 0);
  if (x && ir_dtype_is_bool(x->dtype))
    return imp_nerr(im, nc, TS_EUNSUPPORTED, "input 0 (%s) is bool", x->name);
  return imp_reduce(im, nc);
}

/* ArgMax, ArgMin: int64 indices along axis (default 0); keepdims (1);
 * select_last_index (0, from opset 12). */
ts_status imp_argmax(imp *im, nctx *nc) {
  ts_status st = imp_need_input(im, nc, 0, "data");
  if (st) return st;
  const tg_value *x = IN(im, nc, 0);
  if (ir_dtype_is_bool(x->dtype)) return imp_nerr(im, nc, TS_EUNSUPPORTED, "input 0 (%s) is bool", x->name);
  int64_t ax = aint(nc, "axis", 0), keep = aint(nc, "keepdims", 1), last = aint(nc, "select_last_index", 0);
  if (!imp_norm_axis(&ax, x->ndim, false))
    return imp_nerr(im, nc, TS_EINVAL, "axis %" PRId64 " is out of range for rank %d", aint(nc, "axis", 0), x->ndim);
  tg_dim od[MAX_RANK];
  int o = 0;
  for (int i = 0; i < x->ndim; i++)
    if (i != ax) od[o++] = x->dims[i];
    else if (keep) od[o++] = DC(1);
  set_out(nc, 0, ir_dt(IR_I64), o, od);
  if ((st = imp_set_int(im, nc, "axis", ax)) || (st = imp_set_int(im, nc, "keepdims", keep != 0)) ||
      (st = imp_set_int(im, nc, "select_last_index", last != 0)))
    return st;
  return TS_OK;
}

/* ---- legalisation: compute-DSL text ------------------------------------------ */

/* The expression of a unary op applied to the load text X (dtype t). */
static void unary_expr(lg_kernel *k, const tg_node *n, tg_op op, ir_dtype t, const char *X, tb *b) {
  char z[48], one[48], a[48], c[48];
  lit(t, 0, z);
  lit(t, 1, one);
  flit(tg_attr_float(n, "alpha", 1.0), a);
  switch (op) {
  case TG_OP_EXP: tb_printf(b, "exp(%s)", X); break;
  case TG_OP_LOG: tb_printf(b, "log(%s)", X); break;
  case TG_OP_NEG: tb_printf(b, "%s - %s", z, X); break;
  case TG_OP_ABS: tb_printf(b, "abs(%s)", X); break;
  case TG_OP_RECIPROCAL: tb_printf(b, "%s / %s", one, X); break;
  case TG_OP_FLOOR: tb_printf(b, "floor(%s)", X); break;
  case TG_OP_CEIL: tb_printf(b, "ceil(%s)", X); break;
  case TG_OP_ROUND: tb_printf(b, "round(%s)", X); break;
  case TG_OP_SIN: tb_printf(b, "sin(%s)", X); break;
  case TG_OP_COS: tb_printf(b, "cos(%s)", X); break;
  case TG_OP_SIGN: /* NaN stays NaN, as numpy's */
    tb_printf(b, "select(%s > %s, %s, select(%s < %s, %s - %s, %s))", X, z, one, X, z, z, one,
              ir_dtype_is_float(t) ? X : z);
    break;
  case TG_OP_SOFTPLUS: /* log(1 + e^x) without overflow */
    tb_printf(b, "max(%s, 0.0) + log(1.0 + exp(0.0 - abs(%s)))", X, X);
    break;
  case TG_OP_SOFTSIGN: tb_printf(b, "%s / (1.0 + abs(%s))", X, X); break;
  case TG_OP_ELU: tb_printf(b, "select(%s > 0.0, %s, %s * (exp(%s) - 1.0))", X, X, a, X); break;
  case TG_OP_SELU:
    tb_printf(b, "%s * select(%s > 0.0, %s, %s * (exp(%s) - 1.0))", flit(tg_attr_float(n, "gamma", 1.0507), c), X,
              X, a, X);
    break;
  case TG_OP_CELU:
    tb_printf(b, "max(%s, 0.0) + min(0.0, %s * (exp(%s / %s) - 1.0))", X, a, X, a);
    break;
  case TG_OP_HARD_SIGMOID:
    tb_printf(b, "max(0.0, min(1.0, %s * %s + %s))", flit(tg_attr_float(n, "alpha", 0.2), a), X,
              flit(tg_attr_float(n, "beta", 0.5), c));
    break;
  case TG_OP_SHRINK: { /* x + bias below -lambd, x - bias above lambd, 0 between */
    char l[48], nl[48];
    double lam = tg_attr_float(n, "lambd", 0.5);
    flit(lam, l);
    flit(-lam, nl);
    flit(tg_attr_float(n, "bias", 0.0), c);
    tb_printf(b, "select(%s < %s, %s + %s, select(%s > %s, %s - %s, 0.0))", X, nl, X, c, X, l, X, c);
    break;
  }
  case TG_OP_HARD_SWISH: tb_printf(b, "%s * max(0.0, min(1.0, %s * 0.166666672 + 0.5))", X, X); break;
  case TG_OP_MISH: tb_printf(b, "%s * tanh(max(%s, 0.0) + log(1.0 + exp(0.0 - abs(%s))))", X, X, X); break;
  default: lg_fail(k, TS_EINTERNAL, n, "not a unary maths op"); break;
  }
}

void lg_emit_math_unary(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out) {
  const tg_value *x = V(k, n->inputs[0]), *y = OUTV(0);
  int r = y->ndim;
  tb b, X;
  tb_reset(&b);
  tb_reset(&X);
  lg_load_bcast(k, &X, in[0], n->inputs[0], r, y->dims);
  lg_lhs(&b, out[0], r);
  tb_printf(&b, " = ");
  unary_expr(k, n, lg_node_op(n), x->dtype, X.s, &b);
  lg_stmt(k, &b);
}

void lg_emit_prelu(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out) {
  const tg_value *x = V(k, n->inputs[0]), *y = OUTV(0);
  int r = y->ndim;
  tb b, XS[2]; /* X, slope */
  for (int i = 0; i < 2; i++) {
    tb_reset(&XS[i]);
    lg_load_bcast(k, &XS[i], in[i], n->inputs[i], r, y->dims);
  }
  char z[48];
  tb_reset(&b);
  lg_lhs(&b, out[0], r);
  tb_printf(&b, " = select(%s < %s, %s * %s, %s)", XS[0].s, lit(x->dtype, 0, z), XS[0].s, XS[1].s, XS[0].s);
  lg_stmt(k, &b);
}

/* A temporary "<o>_<tag>" of x's dtype over the kept axes of x. */
static void kept_temp(lg_kernel *k, const tg_value *x, const bool *red, const char *o, const char *tag, char name[96]) {
  tg_dim kd[MAX_RANK];
  int nk = lg_kept_dims(x, red, kd);
  lg_tmpname(name, 96, o, tag);
  lg_let_dims(k, name, x->dtype, nk, kd);
}

/* red[] of the node's "axis" attribute (default def) over rank r. */
static bool one_axis(lg_kernel *k, const tg_node *n, int r, int64_t def, bool *red) {
  int64_t ax = tg_attr_int(n, "axis", def);
  int a = lg_axis(ax, r);
  if (a < 0 || a >= r) {
    lg_fail(k, TS_EINVAL, n, "axis %" PRId64 " out of range for rank %d", ax, r);
    return false;
  }
  for (int i = 0; i < r; i++) red[i] = i == a;
  return true;
}

/* "acc[kept] += rhs for r.." over the axes red[] of x. */
static void kept_acc(lg_kernel *k, const tg_value *x, const bool *red, const char *acc, const tb *rhs) {
  tb b;
  tb_reset(&b);
  lg_kept_index(&b, acc, x->ndim, red);
  tb_printf(&b, " += %s", rhs->s);
  lg_red_for(k, &b, x, red);
  lg_stmt(k, &b);
}

/* "o[i0, ..] = X[i0, ..]" into b (reset), to be continued. */
static void out_is_x(tb *b, const char *o, const char *xin, int r) {
  tb_reset(b);
  lg_lhs(b, o, r);
  tb_printf(b, " = ");
  lg_lhs(b, xin, r);
}

void lg_emit_logsoftmax(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out) {
  const char *o = out[0];
  const tg_value *x = V(k, n->inputs[0]);
  int r = x->ndim;
  bool coerce = k->g->opset && k->g->opset < 13, red[MAX_RANK];
  if (!one_axis(k, n, r, coerce ? 1 : -1, red)) return;
  for (int i = 1; coerce && i < r; i++) red[i] = red[i] || red[i - 1]; /* [axis, r) */
  char mx[96], s[96];
  kept_temp(k, x, red, o, "max", mx);
  kept_temp(k, x, red, o, "lse", s);
  lg_reduce_stmt(k, mx, "max=", in[0], x, red);
  tb b, xr, mk;
  tb_reset(&xr);
  tb_reset(&mk);
  lg_red_index(&xr, in[0], r, red);
  lg_kept_index(&mk, mx, r, red);
  tb_reset(&b);
  tb_printf(&b, "exp(%s - %s)", xr.s, mk.s);
  kept_acc(k, x, red, s, &b);
  out_is_x(&b, o, in[0], r);
  tb_printf(&b, " - (%s + log(", mk.s);
  lg_kept_index(&b, s, r, red);
  tb_printf(&b, "))");
  lg_stmt(k, &b);
}

/* The reduced axes of a canonical Reduce/Arg node over x (rank r). */
static bool reduced_axes(lg_kernel *k, const tg_node *n, int r, bool *red) {
  int c = 0;
  const int64_t *axes = tg_attr_ints(n, "axes", &c);
  for (int a = 0; a < r; a++) red[a] = !axes || c == 0;
  for (int i = 0; axes && i < c; i++) {
    int a = lg_axis(axes[i], r);
    if (a < 0 || a >= r) {
      lg_fail(k, TS_EINVAL, n, "axis %" PRId64 " out of range for rank %d", axes[i], r);
      return false;
    }
    red[a] = true;
  }
  return true;
}

/* The output's store: o[i0 .. i<r-1>] with keepdims, else o[kept axes]. */
static void reduce_lhs(tb *b, const char *o, int r, const bool *red, bool keep) {
  if (keep) lg_lhs(b, o, r);
  else lg_kept_index(b, o, r, red);
}

void lg_emit_reduce_math(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out) {
  tg_op op = lg_node_op(n);
  const char *o = out[0];
  const tg_value *x = V(k, n->inputs[0]);
  int r = x->ndim;
  bool red[MAX_RANK], keep = tg_attr_int(n, "keepdims", 1) != 0;
  if (!reduced_axes(k, n, r, red)) return;
  tb b, xr;
  tb_reset(&b);
  tb_reset(&xr);
  lg_red_index(&xr, in[0], r, red);
  if (op == TG_OP_REDUCE_L2 || op == TG_OP_REDUCE_LOG_SUM_EXP) {
    char acc[96], mx[96];
    kept_temp(k, x, red, o, "acc", acc);
    tb mk;
    tb_reset(&mk);
    if (op == TG_OP_REDUCE_LOG_SUM_EXP) {
      kept_temp(k, x, red, o, "max", mx);
      lg_reduce_stmt(k, mx, "max=", in[0], x, red);
      lg_kept_index(&mk, mx, r, red);
    }
    if (op == TG_OP_REDUCE_L2) tb_printf(&b, "%s * %s", xr.s, xr.s);
    else tb_printf(&b, "exp(%s - %s)", xr.s, mk.s);
    kept_acc(k, x, red, acc, &b);
    tb_reset(&b);
    reduce_lhs(&b, o, r, red, keep);
    tb_printf(&b, op == TG_OP_REDUCE_L2 ? " = sqrt(" : " = log(");
    lg_kept_index(&b, acc, r, red);
    tb_printf(&b, op == TG_OP_REDUCE_L2 ? ")" : ") + %s", mk.s);
    lg_stmt(k, &b);
    return;
  }
  reduce_lhs(&b, o, r, red, keep);
  switch (op) {
  case TG_OP_REDUCE_MAX: tb_printf(&b, " max= %s", xr.s); break;
  case TG_OP_REDUCE_MIN: tb_printf(&b, " min= %s", xr.s); break;
  case TG_OP_REDUCE_PROD: tb_printf(&b, " *= %s", xr.s); break;
  case TG_OP_REDUCE_L1: tb_printf(&b, " += abs(%s)", xr.s); break;
  case TG_OP_REDUCE_SUM_SQUARE: tb_printf(&b, " += %s * %s", xr.s, xr.s); break;
  default: lg_fail(k, TS_EINTERNAL, n, "not a Reduce op"); return;
  }
  lg_red_for(k, &b, x, red);
  lg_stmt(k, &b);
}

/* ArgMax/ArgMin: the extreme value along the axis, then the first (or,
 * with select_last_index, the last) index holding it. */
void lg_emit_argmax(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out) {
  bool isMax = lg_node_op(n) == TG_OP_ARG_MAX, last = tg_attr_int(n, "select_last_index", 0) != 0;
  bool keep = tg_attr_int(n, "keepdims", 1) != 0;
  const char *o = out[0];
  const tg_value *x = V(k, n->inputs[0]);
  int r = x->ndim;
  bool red[MAX_RANK];
  if (!one_axis(k, n, r, 0, red)) return;
  char ex[96];
  kept_temp(k, x, red, o, isMax ? "max" : "min", ex);
  lg_reduce_stmt(k, ex, isMax ? "max=" : "min=", in[0], x, red);
  tb b;
  tb_reset(&b);
  reduce_lhs(&b, o, r, red, keep);
  tb_printf(&b, last ? " max= select(" : " min= select(");
  lg_red_index(&b, in[0], r, red);
  tb_printf(&b, " == ");
  lg_kept_index(&b, ex, r, red);
  tb_printf(&b, last ? ", r0, -1)" : ", r0, 9223372036854775807)");
  lg_red_for(k, &b, x, red);
  lg_stmt(k, &b);
}

void lg_emit_global_max(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out) {
  const tg_value *x = V(k, n->inputs[0]);
  bool red[MAX_RANK] = {false};
  for (int a = 2; a < x->ndim; a++) red[a] = true;
  tb b;
  tb_reset(&b);
  lg_lhs(&b, out[0], x->ndim);
  tb_printf(&b, " max= ");
  lg_red_index(&b, in[0], x->ndim, red);
  lg_red_for(k, &b, x, red);
  lg_stmt(k, &b);
}

/* LpNormalization: x / ||x||_p along axis (p 1 or 2); 0 where the norm is 0. */
void lg_emit_lpnorm(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out) {
  const char *o = out[0];
  const tg_value *x = V(k, n->inputs[0]);
  int r = x->ndim;
  bool l1 = tg_attr_int(n, "p", 2) == 1, red[MAX_RANK];
  if (!one_axis(k, n, r, -1, red)) return;
  char nm[96];
  kept_temp(k, x, red, o, "norm", nm);
  tb b, xr;
  tb_reset(&b);
  tb_reset(&xr);
  lg_red_index(&xr, in[0], r, red);
  if (l1) tb_printf(&b, "abs(%s)", xr.s);
  else tb_printf(&b, "%s * %s", xr.s, xr.s);
  kept_acc(k, x, red, nm, &b);
  /* a zero norm gives 0, not 0/0 (ONNX's reference: np.where(norm == 0, 0, x / norm)) */
  char zero[48];
  lit(x->dtype, 0.0, zero);
  tb_reset(&b);
  lg_lhs(&b, o, r);
  tb_printf(&b, " = select(");
  lg_kept_index(&b, nm, r, red);
  tb_printf(&b, " == %s, %s, ", zero, zero);
  lg_lhs(&b, in[0], r);
  tb_printf(&b, l1 ? " / " : " / sqrt(");
  lg_kept_index(&b, nm, r, red);
  tb_printf(&b, l1 ? ")" : "))");
  lg_stmt(k, &b);
}
