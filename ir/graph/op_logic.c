/* op_logic.c — the comparison, logic and shape-building operators a
 * transformer's mask and position logic uses: Equal, Less, Greater,
 * LessOrEqual, GreaterOrEqual, Not, And, Or, Xor (bool outputs), Where,
 * Mod, Range, ConstantOfShape and Expand. Each operator's import handler
 * and its legalisation emitter; their rows are in ops.c. The handlers fold
 * "known values" (onnx_int.h: small 1-D int tensors whose elements are
 * constants or symbols) so that the shape subgraph of a model exported with
 * dynamic axes resolves at import: Range(0, seq, 1) becomes an iota kernel
 * with output dim `seq`, ConstantOfShape/Expand of a known shape a kernel
 * with those dims, and Equal/Where/... over known shapes known again. A
 * length that depends on tensor data is refused, naming the node.
 * docs/GRAPH.md ("Adding an operator", "Known values"). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "legalize_int.h"
#include "onnx_int.h"
#include "ops.h"

/* ---- known values ---------------------------------------------------------- */

/* Element i of a known 1-D (or scalar) tensor of n elements broadcast to len. */
static tg_dim kv_at(const known *k, int i) { return k->d[k->n == 1 ? 0 : i]; }

/* The element count two known tensors broadcast to, or -1. */
static int kv_len2(const known *a, const known *b) {
  if (a->n == b->n || b->n == 1) return a->n;
  return a->n == 1 ? b->n : -1;
}

/* Compares two known elements; false when the answer depends on a symbol's
 * value. A symbol is a size: never negative; equal to itself. */
static bool kv_cmp(tg_op op, tg_dim x, tg_dim y, int64_t *r) {
  int c; /* -1, 0, 1: x <, ==, > y */
  if (!x.sym && !y.sym) c = x.value < y.value ? -1 : x.value > y.value;
  else if (x.sym && y.sym && !strcmp(x.sym, y.sym)) c = 0;
  else if (x.sym && !y.sym && y.value < 0) c = 1;
  else if (y.sym && !x.sym && x.value < 0) c = -1;
  else return false;
  switch (op) {
  case TG_OP_EQUAL: *r = c == 0; break;
  case TG_OP_LESS: *r = c < 0; break;
  case TG_OP_GREATER: *r = c > 0; break;
  case TG_OP_LESS_OR_EQUAL: *r = c <= 0; break;
  default: *r = c >= 0; break;
  }
  return true;
}

/* Elementwise fold of one element; false: not foldable. */
static bool kv_elem(tg_op op, tg_dim x, tg_dim y, int64_t fmod, tg_dim *out) {
  int64_t r = 0;
  switch (op) {
  case TG_OP_EQUAL: case TG_OP_LESS: case TG_OP_GREATER: case TG_OP_LESS_OR_EQUAL: case TG_OP_GREATER_OR_EQUAL:
    if (!kv_cmp(op, x, y, &r)) return false;
    break;
  default:
    if (x.sym || y.sym) return false;
    switch (op) {
    case TG_OP_AND: r = x.value && y.value; break;
    case TG_OP_OR: r = x.value || y.value; break;
    case TG_OP_XOR: r = !x.value != !y.value; break;
    case TG_OP_NOT: r = !x.value; break;
    case TG_OP_MOD:
      if (y.value == 0 || (x.value == INT64_MIN && y.value == -1)) return false;
      r = x.value % y.value;
      if (!fmod && r != 0 && ((r < 0) != (y.value < 0))) r += y.value;
      break;
    default: return false;
    }
  }
  *out = DC(r);
  return true;
}

/* Known output of an elementwise op over known 1-D/scalar inputs a, b (b
 * NULL for Not); leaves nc->okv unset when anything is not foldable. */
static ts_status kv_fold2(imp *im, nctx *nc, const tg_value *va, const tg_value *vb, int64_t fmod) {
  const known *a = kv_get(im, nc->in[0]), *b = vb ? kv_get(im, nc->in[1]) : a;
  if (!a || !b || va->ndim > 1 || (vb && vb->ndim > 1)) return TS_OK;
  int n = kv_len2(a, b);
  if (n < 0) return TS_OK;
  tg_dim *d = TS_ANEWN(im->a, tg_dim, n ? n : 1);
  if (!d) return imp_oom(im);
  for (int i = 0; i < n; i++)
    if (!kv_elem(nc->op, kv_at(a, i), kv_at(b, i), fmod, &d[i])) return TS_OK;
  nc->okv = (known){n, d};
  return TS_OK;
}

/* A value's dims as a stand-in tg_value for imp_broadcast. */
static tg_value shape_value(const char *name, int nd, tg_dim *dims) {
  return (tg_value){.name = name, .ndim = nd, .dims = dims};
}

/* Input i's contents as dims (constants or symbols), known at import:
 * a shape, a Range limit. */
static ts_status known_dims(imp *im, nctx *nc, int i, const char *what, const known **out) {
  const tg_value *v = IN(im, nc, i);
  if (!v) return imp_nerr(im, nc, TS_EINVAL, "input %d (%s) is required", i, what);
  if (v->dtype.code != IR_I64 && v->dtype.code != IR_I32)
    return imp_nerr(im, nc, TS_ETYPE, "input %d (%s, the %s) must be int64", i, v->name, what);
  *out = kv_get(im, nc->in[i]);
  if (!*out)
    return imp_nerr(im, nc, TS_EUNSUPPORTED,
                    "input %d (%s, the %s) depends on tensor data: the output's shape would not be known before "
                    "run time (only shapes computed from the inputs' dims are supported)",
                    i, v->name, what);
  if ((*out)->n > MAX_RANK) return imp_nerr(im, nc, TS_EUNSUPPORTED, "the %s has %d elements (rank above %d)", what, (*out)->n, MAX_RANK);
  for (int k = 0; k < (*out)->n; k++)
    if (!(*out)->d[k].sym && (*out)->d[k].value < 0)
      return imp_nerr(im, nc, TS_EINVAL, "the %s (%s) has the negative element %" PRId64 " at %d", what, v->name,
                      (*out)->d[k].value, k);
  return TS_OK;
}

/* ---- import: shape and dtype inference, canonical form ---------------------- */

static ts_status need_dtype(imp *im, nctx *nc, int i, bool ok, const char *what) {
  const tg_value *v = IN(im, nc, i);
  char b[16];
  if (!ok)
    return imp_nerr(im, nc, TS_ETYPE, "input %d (%s) is %s; the op takes %s", i, v->name,
                    ir_dtype_str(v->dtype, b, sizeof b), what);
  return TS_OK;
}

/* Equal, Less, Greater, LessOrEqual, GreaterOrEqual, And, Or, Xor, Mod:
 * two inputs of one dtype, numpy broadcasting. */
ts_status imp_compare(imp *im, nctx *nc) {
  ts_status lst = imp_legacy_broadcast(im, nc);
  if (lst) return lst;
  const tg_value *a = IN(im, nc, 0), *b = IN(im, nc, 1);
  if (!a || !b) return imp_nerr(im, nc, TS_EINVAL, "both inputs are required");
  char b1[16], b2[16];
  if (!ir_dtype_eq(a->dtype, b->dtype))
    return imp_nerr(im, nc, TS_ETYPE, "inputs %s (%s) and %s (%s) differ in type", a->name,
                    ir_dtype_str(a->dtype, b1, sizeof b1), b->name, ir_dtype_str(b->dtype, b2, sizeof b2));
  bool logic = nc->op == TG_OP_AND || nc->op == TG_OP_OR || nc->op == TG_OP_XOR;
  ts_status st = TS_OK;
  if (logic) st = need_dtype(im, nc, 0, ir_dtype_is_bool(a->dtype), "bool tensors");
  else if (nc->op == TG_OP_EQUAL || nc->op == TG_OP_MOD)
    st = need_dtype(im, nc, 0, !ir_dtype_is_bool(a->dtype) || nc->op == TG_OP_EQUAL, "numeric tensors");
  else st = need_dtype(im, nc, 0, !ir_dtype_is_bool(a->dtype), "numeric tensors");
  if (st) return st;
  int64_t fmod = 0;
  if (nc->op == TG_OP_MOD) {
    fmod = aint(nc, "fmod", 0);
    if (fmod != 0 && fmod != 1) return imp_nerr(im, nc, TS_EINVAL, "fmod is %" PRId64 " (0 or 1)", fmod);
    if (is_float(a->dtype) && !fmod)
      return imp_nerr(im, nc, TS_EINVAL, "fmod=0 on floating-point inputs (%s); ONNX requires fmod=1 there", a->name);
    if ((st = imp_set_int(im, nc, "fmod", fmod))) return st;
  }
  int nd;
  tg_dim dims[MAX_RANK];
  if ((st = imp_broadcast(im, nc, a, b, &nd, dims))) return st;
  set_out(nc, 0, nc->op == TG_OP_MOD ? a->dtype : ir_dt(IR_BOOL), nd, dims);
  return kv_fold2(im, nc, a, b, fmod);
}

ts_status imp_not(imp *im, nctx *nc) {
  ts_status st = imp_need_input(im, nc, 0, "X");
  if (st || (st = need_dtype(im, nc, 0, ir_dtype_is_bool(IN(im, nc, 0)->dtype), "bool tensors"))) return st;
  same_as_input(im, nc, 0, 0);
  return kv_fold2(im, nc, IN(im, nc, 0), NULL, 0);
}

/* IsNaN, IsInf: a float tensor to a bool one of its shape. */
ts_status imp_is_special(imp *im, nctx *nc) {
  ts_status st = imp_need_input(im, nc, 0, "X");
  if (st || (st = imp_need_float(im, nc, 0))) return st;
  const tg_value *x = IN(im, nc, 0);
  set_out(nc, 0, ir_dt(IR_BOOL), x->ndim, x->dims);
  if (nc->op == TG_OP_IS_INF) {
    int64_t neg = aint(nc, "detect_negative", 1), pos = aint(nc, "detect_positive", 1);
    if ((neg != 0 && neg != 1) || (pos != 0 && pos != 1))
      return imp_nerr(im, nc, TS_EINVAL, "detect_negative=%" PRId64 ", detect_positive=%" PRId64 " (each 0 or 1)", neg, pos);
    if ((st = imp_set_int(im, nc, "detect_negative", neg)) || (st = imp_set_int(im, nc, "detect_positive", pos))) return st;
  }
  return TS_OK;
}

ts_status imp_where(imp *im, nctx *nc) {
  const tg_value *c = IN(im, nc, 0), *x = IN(im, nc, 1), *y = IN(im, nc, 2);
  if (!c || !x || !y) return imp_nerr(im, nc, TS_EINVAL, "inputs condition, X and Y are required");
  ts_status st = need_dtype(im, nc, 0, ir_dtype_is_bool(c->dtype), "a bool condition");
  if (st) return st;
  char b1[16], b2[16];
  if (!ir_dtype_eq(x->dtype, y->dtype))
    return imp_nerr(im, nc, TS_ETYPE, "X (%s, %s) and Y (%s, %s) differ in type", x->name,
                    ir_dtype_str(x->dtype, b1, sizeof b1), y->name, ir_dtype_str(y->dtype, b2, sizeof b2));
  int n1, nd;
  tg_dim d1[MAX_RANK], dims[MAX_RANK];
  if ((st = imp_broadcast(im, nc, c, x, &n1, d1))) return st;
  tg_value cx = shape_value(c->name, n1, d1);
  if ((st = imp_broadcast(im, nc, &cx, y, &nd, dims))) return st;
  set_out(nc, 0, x->dtype, nd, dims);
  /* known: a known condition picks from known X and Y element by element */
  const known *kc = kv_get(im, nc->in[0]), *kx = kv_get(im, nc->in[1]), *ky = kv_get(im, nc->in[2]);
  if (!kc || !kx || !ky || nd > 1) return TS_OK;
  int n = kv_len2(kc, kx);
  if (n < 0) return TS_OK;
  known kcx = {n, NULL};
  if ((n = kv_len2(&kcx, ky)) < 0) return TS_OK;
  tg_dim *d = TS_ANEWN(im->a, tg_dim, n ? n : 1);
  if (!d) return imp_oom(im);
  for (int i = 0; i < n; i++) {
    tg_dim cc = kv_at(kc, i);
    if (cc.sym) return TS_OK;
    d[i] = cc.value ? kv_at(kx, i) : kv_at(ky, i);
  }
  nc->okv = (known){n, d};
  return TS_OK;
}

/* A scalar input known at import as a double (a constant, or a known int). */
static bool scalar_of(imp *im, nctx *nc, int i, double *v, tg_dim *sym) {
  *sym = DC(0);
  if (imp_const_scalar(im, nc->in[i], v)) return true;
  const known *k = kv_get(im, nc->in[i]);
  if (!k || k->n != 1) return false;
  *sym = k->d[0];
  *v = (double)k->d[0].value;
  return true;
}

/* Range(start, limit, delta): the length must be known at import — all
 * three constants, or start 0, delta 1 and a symbolic limit (a sequence
 * length). The canonical node has no inputs; attributes start and delta. */
ts_status imp_range(imp *im, nctx *nc) {
  const tg_value *s = IN(im, nc, 0), *l = IN(im, nc, 1), *dl = IN(im, nc, 2);
  if (!s || !l || !dl) return imp_nerr(im, nc, TS_EINVAL, "inputs start, limit and delta are required");
  char b1[16];
  if (!ir_dtype_eq(s->dtype, l->dtype) || !ir_dtype_eq(s->dtype, dl->dtype))
    return imp_nerr(im, nc, TS_ETYPE, "start, limit and delta differ in type");
  ir_dtype_code c = (ir_dtype_code)s->dtype.code;
  if (c != IR_F32 && c != IR_F64 && c != IR_I16 && c != IR_I32 && c != IR_I64)
    return imp_nerr(im, nc, TS_ETYPE, "inputs of type %s (float, double, int16, int32, int64)",
                    ir_dtype_str(s->dtype, b1, sizeof b1));
  for (int i = 0; i < 3; i++)
    if (IN(im, nc, i)->ndim != 0 && tg_value_numel(IN(im, nc, i)) != 1)
      return imp_nerr(im, nc, TS_ESHAPE, "input %d (%s) is not a scalar", i, IN(im, nc, i)->name);
  double vs, vl, vd;
  tg_dim ss, sl, sd;
  const char *whats[3] = {"start", "limit", "delta"};
  double *vals[3] = {&vs, &vl, &vd};
  tg_dim *syms[3] = {&ss, &sl, &sd};
  for (int i = 0; i < 3; i++)
    if (!scalar_of(im, nc, i, vals[i], syms[i]))
      return imp_nerr(im, nc, TS_EUNSUPPORTED,
                      "input %d (%s, the %s) depends on tensor data: the output's length would not be known before "
                      "run time", i, IN(im, nc, i)->name, whats[i]);
  if (ss.sym || sd.sym) return imp_nerr(im, nc, TS_EUNSUPPORTED, "a symbolic start or delta (only the limit may be a symbolic size)");
  if (vd == 0) return imp_nerr(im, nc, TS_EINVAL, "delta is 0");
  tg_dim len;
  if (sl.sym) {
    if (vs != 0 || vd != 1)
      return imp_nerr(im, nc, TS_EUNSUPPORTED, "a symbolic limit (%s) with start %g and delta %g: the length is not a "
                      "plain size (start 0, delta 1 only)", sl.sym, vs, vd);
    len = sl;
  } else {
    double n = ceil((vl - vs) / vd);
    if (!(n <= (double)MAX_ELEMS)) return imp_nerr(im, nc, TS_EUNSUPPORTED, "%g elements", n);
    len = DC(n > 0 ? (int64_t)n : 0);
  }
  set_out(nc, 0, s->dtype, 1, &len);
  ts_status st;
  if ((st = imp_set_float(im, nc, "start", vs)) || (st = imp_set_float(im, nc, "delta", vd))) return st;
  nc->nin = 0;
  if ((c == IR_I64 || c == IR_I32) && !len.sym && len.value <= MAX_KNOWN) {
    tg_dim *d = TS_ANEWN(im->a, tg_dim, len.value ? len.value : 1);
    if (!d) return imp_oom(im);
    for (int64_t i = 0; i < len.value; i++) d[i] = DC((int64_t)vs + i * (int64_t)vd);
    nc->okv = (known){(int)len.value, d};
  } else if (sl.sym && c == IR_I64) {
    /* one element, 0, when seq is 1: nothing to know in general */
  }
  return TS_OK;
}

/* ConstantOfShape(shape) {value}: the shape must be known at import; the
 * canonical node has no inputs and the attribute value as a double. */
ts_status imp_constant_of_shape(imp *im, nctx *nc) {
  const known *k;
  ts_status st = known_dims(im, nc, 0, "shape", &k);
  if (st) return st;
  /* a copy: importing the value tensor below may move im->kv */
  int rank = k->n;
  tg_dim shape[MAX_RANK];
  for (int i = 0; i < rank; i++) shape[i] = k->d[i];
  ir_dtype dt = ir_dt(IR_F32);
  double v = 0;
  tg_attr *a = A(nc, "value");
  if (a) {
    const Onnx__TensorProto *t = nc->np->attribute[a->i]->t;
    if (!t) return imp_nerr(im, nc, TS_EPARSE, "value holds no tensor");
    char what[512];
    snprintf(what, sizeof what, "node %s (ConstantOfShape, opset %d): value", nc->name, im->opset);
    char nm[600];
    snprintf(nm, sizeof nm, "%s:value", nc->outname[0]);
    int id;
    if ((st = imp_import_tensor(im, t, nm, what, &id))) return st;
    const tg_value *cv = im->g->values[id];
    if (tg_value_numel(cv) != 1) return imp_nerr(im, nc, TS_EINVAL, "value has %" PRId64 " elements (one)", tg_value_numel(cv));
    dt = cv->dtype;
    if (ir_dtype_is_bool(dt)) v = ((const unsigned char *)cv->data)[0] != 0;
    else if (!imp_const_scalar(im, id, &v))
      return imp_nerr(im, nc, TS_EUNSUPPORTED, "value of type %s", ir_dtype_code_name((ir_dtype_code)dt.code));
  }
  set_out(nc, 0, dt, rank, shape);
  if ((st = imp_set_float(im, nc, "value", v))) return st;
  nc->nin = 0;
  /* known: a 1-D int/bool result of constant length */
  if (rank == 1 && !shape[0].sym && shape[0].value <= MAX_KNOWN && !is_float(dt)) {
    int64_t n = shape[0].value;
    tg_dim *d = TS_ANEWN(im->a, tg_dim, n ? n : 1);
    if (!d) return imp_oom(im);
    for (int64_t i = 0; i < n; i++) d[i] = DC((int64_t)v);
    nc->okv = (known){(int)n, d};
  }
  return TS_OK;
}

/* Expand(x, shape): numpy broadcasting of x against a shape known at import
 * (its elements constants or symbols); the shape input is dropped. */
ts_status imp_expand(imp *im, nctx *nc) {
  ts_status st = imp_need_input(im, nc, 0, "input");
  const known *k;
  if (st || (st = known_dims(im, nc, 1, "shape", &k))) return st;
  const tg_value *x = IN(im, nc, 0);
  tg_dim sd[MAX_RANK];
  for (int i = 0; i < k->n; i++) sd[i] = k->d[i];
  tg_value sv = shape_value(IN(im, nc, 1)->name, k->n, sd);
  int nd;
  tg_dim dims[MAX_RANK];
  if ((st = imp_broadcast(im, nc, x, &sv, &nd, dims))) return st;
  set_out(nc, 0, x->dtype, nd, dims);
  drop_inputs(nc, 1);
  const known *kx = kv_get(im, nc->in[0]);
  if (kx && nd == 1 && !dims[0].sym && (kx->n == dims[0].value || kx->n == 1) && dims[0].value <= MAX_KNOWN) {
    int n = (int)dims[0].value;
    tg_dim *d = TS_ANEWN(im->a, tg_dim, n ? n : 1);
    if (!d) return imp_oom(im);
    for (int i = 0; i < n; i++) d[i] = kv_at(kx, i);
    nc->okv = (known){n, d};
  }
  return TS_OK;
}

/* ---- legalisation: compute-DSL text ------------------------------------------ */

/* Elementwise over the inputs broadcast to the output: comparisons, logic,
 * Mod, Where, Not, Expand, IsNaN, IsInf. */
void lg_emit_logic(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out) {
  tg_op op = lg_node_op(n);
  const tg_value *y = OUTV(0);
  int r = y->ndim;
  tb X[3], b;
  for (int i = 0; i < 3; i++) tb_reset(&X[i]);
  for (int i = 0; i < n->nin && i < 3; i++) lg_load_bcast(k, &X[i], in[i], n->inputs[i], r, y->dims);
  tb_reset(&b);
  lg_lhs(&b, out[0], r);
  const char *A = X[0].s, *B = X[1].s;
  switch (op) {
  case TG_OP_EQUAL: tb_printf(&b, " = %s == %s", A, B); break;
  case TG_OP_LESS: tb_printf(&b, " = %s < %s", A, B); break;
  case TG_OP_GREATER: tb_printf(&b, " = %s > %s", A, B); break;
  case TG_OP_LESS_OR_EQUAL: tb_printf(&b, " = %s <= %s", A, B); break;
  case TG_OP_GREATER_OR_EQUAL: tb_printf(&b, " = %s >= %s", A, B); break;
  case TG_OP_AND: tb_printf(&b, " = %s && %s", A, B); break;
  case TG_OP_OR: tb_printf(&b, " = %s || %s", A, B); break;
  case TG_OP_XOR: tb_printf(&b, " = %s != %s", A, B); break;
  case TG_OP_NOT: tb_printf(&b, " = !%s", A); break;
  case TG_OP_IS_NAN: tb_printf(&b, " = %s != %s", A, A); break; /* codegen keeps NaN semantics (only `contract`) */
  case TG_OP_IS_INF: {
    bool neg = tg_attr_int(n, "detect_negative", 1), pos = tg_attr_int(n, "detect_positive", 1);
    if (neg && pos) tb_printf(&b, " = %s == inf || %s == -inf", A, A);
    else if (pos) tb_printf(&b, " = %s == inf", A);
    else if (neg) tb_printf(&b, " = %s == -inf", A);
    else tb_printf(&b, " = %s != %s && false", A, A);
    break;
  }
  case TG_OP_WHERE: tb_printf(&b, " = select(%s, %s, %s)", A, B, X[2].s); break;
  case TG_OP_MOD:
    if (ir_dtype_is_float(y->dtype)) /* C fmod: x - y * trunc(x / y), trunc through i64 */
      tb_printf(&b, " = %s - %s * %s(i64(%s / %s))", A, B, dtn(y->dtype), A, B);
    else if (tg_attr_int(n, "fmod", 0)) /* truncating: the sign of the dividend */
      tb_printf(&b, " = %s - %s * (%s / %s)", A, B, A, B);
    else tb_printf(&b, " = %s %% %s", A, B); /* floor: the sign of the divisor */
    break;
  default: /* Expand */
    tb_printf(&b, " = %s", A);
    break;
  }
  lg_stmt(k, &b);
}

/* A literal of dtype t for value v ("true"/"false" for bool). */
static const char *dlit(ir_dtype t, double v, char buf[48]) {
  if (ir_dtype_is_bool(t)) return strcpy(buf, v != 0 ? "true" : "false");
  if (ir_dtype_is_float(t) || t.code == IR_I64) return lit(t, v, buf);
  char l[48];
  snprintf(buf, 48, "%s(%s)", dtn(t), lit(t, v, l));
  return buf;
}

void lg_emit_range(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out) {
  (void)in;
  const tg_value *y = OUTV(0);
  char s[48], d[48];
  tb b;
  tb_reset(&b);
  double vs = tg_attr_float(n, "start", 0), vd = tg_attr_float(n, "delta", 1);
  if (ir_dtype_is_float(y->dtype))
    tb_printf(&b, "%s[i0] = %s + %s(i0) * %s", out[0], dlit(y->dtype, vs, s), dtn(y->dtype), dlit(y->dtype, vd, d));
  else if (y->dtype.code == IR_I64)
    tb_printf(&b, "%s[i0] = %s + i0 * %s", out[0], dlit(y->dtype, vs, s), dlit(y->dtype, vd, d));
  else
    tb_printf(&b, "%s[i0] = %s(%s + i0 * %s)", out[0], dtn(y->dtype), lit(ir_dt(IR_I64), vs, s), lit(ir_dt(IR_I64), vd, d));
  lg_stmt(k, &b);
}

void lg_emit_constant_of_shape(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out) {
  (void)in;
  const tg_value *y = OUTV(0);
  char l[48];
  tb b;
  tb_reset(&b);
  lg_lhs(&b, out[0], y->ndim);
  tb_printf(&b, " = %s", dlit(y->dtype, tg_attr_float(n, "value", 0), l));
  lg_stmt(k, &b);
}
