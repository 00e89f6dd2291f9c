/* op_elemwise.c — the elementwise operators: unary maths (Relu, Sigmoid,
 * Tanh, Erf, Sqrt, LeakyRelu, Gelu, Clip), Cast, Identity and the binary
 * arithmetic with numpy broadcasting (Add, Sub, Mul, Div, Pow). Each
 * operator's import handler (shape and dtype inference, canonical
 * attributes) and its legalisation emitter; their rows are in ops.c.
 * docs/GRAPH.md ("Adding an operator"). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "legalize_int.h"
#include "onnx_int.h"
#include "ops.h"

/* ---- import: shape and dtype inference, canonical form ---------------------- */

ts_status imp_unary(imp *im, nctx *nc) {
  ts_status st = imp_need_input(im, nc, 0, "X");
  if (st) return st;
  /* Identity and Transpose move any dtype, Relu takes ints, MaxPool 8-bit ints (opset 12 on) */
  ir_dtype_code c = IN(im, nc, 0)->dtype.code;
  bool any = nc->op == TG_OP_IDENTITY || nc->op == TG_OP_RELU || nc->op == TG_OP_TRANSPOSE ||
             (nc->op == TG_OP_MAX_POOL && (c == IR_U8 || c == IR_I8));
  if (!any && (st = imp_need_float(im, nc, 0))) return st;
  same_as_input(im, nc, 0, 0);
  if (nc->op == TG_OP_IDENTITY) {
    const known *k = kv_get(im, nc->in[0]);
    if (k) nc->okv = *k;
  }
  return TS_OK;
}


/* One element of Add/Sub/Mul/Div on known shape values; false when it is
 * not foldable at import (the node then computes it at run time). */
static bool kv_arith(imp *im, tg_op op, tg_dim x, tg_dim y, tg_dim *r) {
  if (!x.sym && !y.sym) {
    int64_t v = 0;
    bool ok;
    switch (op) {
      case TG_OP_ADD: ok = !__builtin_add_overflow(x.value, y.value, &v); break;
      case TG_OP_SUB: ok = !__builtin_sub_overflow(x.value, y.value, &v); break;
      case TG_OP_MUL: ok = !__builtin_mul_overflow(x.value, y.value, &v); break;
      default: ok = y.value != 0 && !(x.value == INT64_MIN && y.value == -1); if (ok) v = x.value / y.value; break;
    }
    *r = DC(v);
    return ok;
  }
  bool yzero = !y.sym && y.value == 0, xzero = !x.sym && x.value == 0;
  switch (op) {
    case TG_OP_ADD: *r = yzero ? x : y; return yzero || xzero;
    case TG_OP_SUB: /* x - 0, or a size minus itself (key length - query length) */
      if (tg_dim_eq(x, y)) *r = DC(0);
      else *r = x;
      return yzero || tg_dim_eq(x, y);
    case TG_OP_MUL: return tg_dim_mul(im->a, x, y, r);
    default: return !yzero && tg_dim_div(im->a, x, y, r); /* sizes are >= 0: exact quotients truncate alike */
  }
}

ts_status imp_binary(imp *im, nctx *nc) {
  ts_status lst = imp_legacy_broadcast(im, nc);
  if (lst) return lst;
  const tg_value *a = IN(im, nc, 0), *b = IN(im, nc, 1);
  if (!a || !b) return imp_nerr(im, nc, TS_EINVAL, "both inputs are required");
  char b1[16], b2[16];
  if (nc->op != TG_OP_POW && !ir_dtype_eq(a->dtype, b->dtype))
    return imp_nerr(im, nc, TS_ETYPE, "inputs %s (%s) and %s (%s) differ in type", a->name,
                    ir_dtype_str(a->dtype, b1, sizeof b1), b->name, ir_dtype_str(b->dtype, b2, sizeof b2));
  int nd;
  tg_dim dims[MAX_RANK];
  ts_status st = imp_broadcast(im, nc, a, b, &nd, dims);
  if (st) return st;
  set_out(nc, 0, a->dtype, nd, dims);
  /* shape arithmetic on known int tensors (a scalar or 1-D each): constants
   * fold as in C (Div truncates toward zero); a symbolic element multiplies
   * and divides exactly as a monomial (dim.c), adds only 0, and subtracts
   * 0 or itself */
  const known *ka = kv_get(im, nc->in[0]), *kb = kv_get(im, nc->in[1]);
  if (nc->op != TG_OP_POW && (a->dtype.code == IR_I64 || a->dtype.code == IR_I32) && a->ndim <= 1 && b->ndim <= 1 &&
      ka && kb && (ka->n == kb->n || ka->n == 1 || kb->n == 1)) {
    int n = ka->n > kb->n ? ka->n : kb->n;
    tg_dim *kd = TS_ANEWN(im->a, tg_dim, n ? n : 1);
    if (!kd) return imp_oom(im);
    bool ok = true;
    for (int i = 0; i < n && ok; i++) ok = kv_arith(im, nc->op, ka->d[ka->n == 1 ? 0 : i], kb->d[kb->n == 1 ? 0 : i], &kd[i]);
    if (ok) nc->okv = (known){n, kd};
  }
  return TS_OK;
}

ts_status imp_leaky(imp *im, nctx *nc) {
  ts_status st = imp_unary(im, nc);
  if (!st) st = imp_set_float(im, nc, "alpha", afloat(nc, "alpha", 0.01));
  return st;
}

ts_status imp_gelu(imp *im, nctx *nc) {
  const char *ap = astr(nc, "approximate", "none");
  if (strcmp(ap, "none") && strcmp(ap, "tanh"))
    return imp_nerr(im, nc, TS_EUNSUPPORTED, "approximate='%s' (none or tanh)", ap);
  ts_status st = imp_unary(im, nc);
  if (!st) st = imp_set_str(im, nc, "approximate", ap);
  return st;
}

ts_status imp_clip(imp *im, nctx *nc) {
  ts_status st = imp_unary(im, nc);
  if (st) return st;
  double lo = -INFINITY, hi = INFINITY;
  if (im->opset < 11) { /* min and max are attributes */
    if (nc->nin > 1) return imp_nerr(im, nc, TS_EINVAL, "%d inputs; before opset 11 min and max are attributes", nc->nin);
    lo = afloat(nc, "min", -INFINITY);
    hi = afloat(nc, "max", INFINITY);
  }
  for (int i = 1; i < nc->nin; i++) {
    if (nc->in[i] < 0) continue;
    double v;
    if (!imp_const_scalar(im, nc->in[i], &v))
      return imp_nerr(im, nc, TS_EUNSUPPORTED, "input %d (%s, the %s) must be a constant scalar", i,
                      IN(im, nc, i)->name, i == 1 ? "min" : "max");
    if (i == 1) lo = v;
    else hi = v;
  }
  drop_inputs(nc, 1);
  if ((st = imp_set_float(im, nc, "min", lo)) || (st = imp_set_float(im, nc, "max", hi))) return st;
  return TS_OK;
}

ts_status imp_cast(imp *im, nctx *nc) {
  ts_status st = imp_need_input(im, nc, 0, "input");
  if (st) return st;
  if (!A(nc, "to")) return imp_nerr(im, nc, TS_EINVAL, "attribute to is required");
  int64_t to = aint(nc, "to", 0);
  ir_dtype dt;
  if (to < 0 || to > 1000 || !tg_onnx_dtype((int)to, &dt))
    return imp_nerr(im, nc, TS_EUNSUPPORTED, "cast to %s (%" PRId64 ")", imp_type_name((int)to), to);
  const tg_value *x = IN(im, nc, 0);
  set_out(nc, 0, dt, x->ndim, x->dims);
  const known *k = kv_get(im, nc->in[0]);
  if (k && (dt.code == IR_I64 || dt.code == IR_I32)) nc->okv = *k;
  static const char *const f8_only[] = {"saturate", "round_mode"}; /* float8/4 targets, which are refused */
  for (int i = 0; i < 2; i++) {
    tg_attr *s = A(nc, f8_only[i]);
    if (s) *s = nc->attr[--nc->nattr];
  }
  return imp_set_int(im, nc, "to", to);
}

/* CastLike (opset 15): a Cast to input 1's element type; imported as that Cast. */
ts_status imp_castlike(imp *im, nctx *nc) {
  ts_status st = imp_need_input(im, nc, 1, "target_type");
  if (st) return st;
  ir_dtype want = IN(im, nc, 1)->dtype, dt;
  int to = 1;
  while (to <= 16 && !(tg_onnx_dtype(to, &dt) && ir_dtype_eq(dt, want))) to++;
  if (to > 16) return imp_nerr(im, nc, TS_EUNSUPPORTED, "target_type %s has an element type Cast cannot produce", IN(im, nc, 1)->name);
  drop_inputs(nc, 1);
  nc->op = TG_OP_CAST;
  if ((st = imp_set_int(im, nc, "to", to))) return st;
  return imp_cast(im, nc);
}

/* ---- legalisation: compute-DSL text ------------------------------------------ */

void lg_emit_unary(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out) {
  tg_op op = lg_node_op(n);
  const char *o = out[0];
  const tg_value *x = V(k, n->inputs[0]), *y = OUTV(0);
  int r = y->ndim;
  tb b, X;
  tb_reset(&b);
  tb_reset(&X);
  lg_load_bcast(k, &X, in[0], n->inputs[0], r, y->dims);
  char l1[48], l2[48];
  lg_lhs(&b, o, r);
  tb_printf(&b, " = ");
  switch (op) {
    case TG_OP_RELU: tb_printf(&b, "max(%s, %s)", X.s, lit(x->dtype, 0, l1)); break;
    case TG_OP_LEAKY_RELU:
      tb_printf(&b, "select(%s > 0.0, %s, %s * %s)", X.s, X.s, X.s, flit(tg_attr_float(n, "alpha", 0.01), l1));
      break;
    case TG_OP_SIGMOID: tb_printf(&b, "sigmoid(%s)", X.s); break;
    case TG_OP_TANH: tb_printf(&b, "tanh(%s)", X.s); break;
    case TG_OP_ERF: tb_printf(&b, "erf(%s)", X.s); break;
    case TG_OP_SQRT: tb_printf(&b, "sqrt(%s)", X.s); break;
    case TG_OP_GELU:
      if (!strcmp(tg_attr_str(n, "approximate", "none"), "tanh"))
        tb_printf(&b, "0.5 * %s * (1.0 + tanh(0.797884561 * (%s + 0.044715 * %s * %s * %s)))", X.s, X.s, X.s,
                  X.s, X.s);
      else
        tb_printf(&b, "0.5 * %s * (1.0 + erf(%s * 0.707106781))", X.s, X.s);
      break;
    case TG_OP_CLIP: {
      const tg_attr *mn = tg_node_attr(n, "min"), *mx = tg_node_attr(n, "max");
      if (mx) tb_printf(&b, "min(");
      if (mn) tb_printf(&b, "max(");
      tb_printf(&b, "%s", X.s);
      if (mn) tb_printf(&b, ", %s)", lit(x->dtype, mn->kind == TG_A_INT ? (double)mn->i : mn->f, l1));
      if (mx) tb_printf(&b, ", %s)", lit(x->dtype, mx->kind == TG_A_INT ? (double)mx->i : mx->f, l2));
      break;
    }
    case TG_OP_CAST:
      if (ir_dtype_eq(x->dtype, y->dtype)) tb_printf(&b, "%s", X.s);
      else if (ir_dtype_is_bool(y->dtype)) tb_printf(&b, "%s != %s", X.s, lit(x->dtype, 0, l1));
      else tb_printf(&b, "%s(%s)", dtn(y->dtype), X.s);
      break;
    default: /* Identity */
      tb_printf(&b, "%s", X.s);
      break;
  }
  lg_stmt(k, &b);
}

void lg_emit_binary(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out) {
  tg_op op = lg_node_op(n);
  const char *o = out[0];
  const tg_value *y = OUTV(0), *a = V(k, n->inputs[0]), *bv = V(k, n->inputs[1]);
  int r = y->ndim;
  tb b, A, B;
  tb_reset(&b);
  tb_reset(&A);
  tb_reset(&B);
  lg_load_bcast(k, &A, in[0], n->inputs[0], r, y->dims);
  lg_load_bcast(k, &B, in[1], n->inputs[1], r, y->dims);
  lg_lhs(&b, o, r);
  if (op == TG_OP_POW) {
    if (!ir_dtype_is_float(a->dtype)) {
      /* an integer base: through f64 (exact below 2^53), rounded to the
       * nearest integer, which also gives onnxruntime's 0 for |base| >= 2
       * with a negative exponent (|result| <= 0.5, half to even) */
      if (!ir_dtype_is_int(a->dtype)) {
        lg_fail(k, TS_EUNSUPPORTED, n, "Pow of %s", dtn(a->dtype));
        return;
      }
      tb_printf(&b, " = %s(round(pow(f64(%s), f64(%s))))", dtn(a->dtype), A.s, B.s);
      lg_stmt(k, &b);
      return;
    }
    /* x^2 and x^0.5 are common (layer norms written out); keep them exact and cheap */
    double e;
    if (bv->kind == TG_V_CONST && lg_const_scalar(bv, &e) && (e == 2.0 || e == 0.5 || e == 1.0 || e == 3.0)) {
      if (e == 2.0) tb_printf(&b, " = %s * %s", A.s, A.s);
      else if (e == 3.0) tb_printf(&b, " = %s * %s * %s", A.s, A.s, A.s);
      else if (e == 1.0) tb_printf(&b, " = %s", A.s);
      else tb_printf(&b, " = sqrt(%s)", A.s);
    } else if (ir_dtype_eq(a->dtype, bv->dtype)) {
      tb_printf(&b, " = pow(%s, %s)", A.s, B.s);
    } else {
      tb_printf(&b, " = pow(%s, %s(%s))", A.s, dtn(a->dtype), B.s);
    }
    lg_stmt(k, &b);
    return;
  }
  if (!ir_dtype_eq(a->dtype, bv->dtype)) {
    lg_fail(k, TS_ETYPE, n, "operands of different dtypes (%s, %s)", dtn(a->dtype), dtn(bv->dtype));
    return;
  }
  const char *sym = op == TG_OP_ADD ? "+" : op == TG_OP_SUB ? "-" : op == TG_OP_MUL ? "*" : "/";
  tb_printf(&b, " = %s %s %s", A.s, sym, B.s);
  lg_stmt(k, &b);
}

static bool same_shape(const tg_value *a, const tg_value *b) {
  if (a->ndim != b->ndim) return false;
  for (int i = 0; i < a->ndim; i++)
    if (!tg_dim_eq(a->dims[i], b->dims[i])) return false;
  return true;
}

/* Add, Sub, Mul, Div, Pow: elementwise when every input has the output's
 * shape, else broadcast. */
tg_pattern lg_pattern_binary(const tg_graph *g, const tg_node *n) {
  const tg_value *o = g->values[n->outputs[0]];
  for (int i = 0; i < n->nin; i++)
    if (n->inputs[i] >= 0 && !same_shape(g->values[n->inputs[i]], o)) return TG_PAT_BROADCAST;
  return TG_PAT_ELEMWISE;
}
