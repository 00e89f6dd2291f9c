/* op_data.c — more data-movement operators: GatherElements, Tile,
 * DepthToSpace, SpaceToDepth, Trilu, Size, CumSum, OneHot, GatherND. Each
 * operator's import handler (shape and dtype inference, compile-time
 * parameters turned into attributes) and its legalisation emitter; their
 * rows are in ops.c. Index inputs may be negative (counted from the end);
 * the kernels clamp them into range as Gather does. docs/GRAPH.md
 * ("Adding an operator"). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "legalize_int.h"
#include "onnx_int.h"
#include "ops.h"

/* ---- import ------------------------------------------------------------------- */

/* TS_ETYPE naming input i (`what`) unless it is int32 or int64. */
ts_status imp_need_index(imp *im, nctx *nc, int i, const char *what) {
  const tg_value *v = IN(im, nc, i);
  if (!v) return imp_nerr(im, nc, TS_EINVAL, "input %d (%s) is required", i, what);
  if (v->dtype.code != IR_I64 && v->dtype.code != IR_I32)
    return imp_nerr(im, nc, TS_ETYPE, "input %d (%s, %s) must be int32 or int64", i, v->name, what);
  return TS_OK;
}

/* A scalar (or one-element) constant int input i: *v; TS_EUNSUPPORTED when
 * it is not known at import. */
static ts_status scalar_param(imp *im, nctx *nc, int i, const char *what, int64_t *v) {
  int64_t buf[2];
  const int64_t *vals;
  int n;
  bool present;
  ts_status st = imp_param_ints(im, nc, i, what, &present, buf, 2, &vals, &n);
  if (st) return st;
  if (!present || n != 1) return imp_nerr(im, nc, TS_EINVAL, "input %d (%s) must be one integer", i, what);
  *v = vals[0];
  return TS_OK;
}

ts_status imp_gather_elements(imp *im, nctx *nc) {
  ts_status st = imp_need_input(im, nc, 0, "data");
  if (st || (st = imp_need_index(im, nc, 1, "indices"))) return st;
  const tg_value *x = IN(im, nc, 0), *ix = IN(im, nc, 1);
  if (x->ndim != ix->ndim || x->ndim < 1)
    return imp_nerr(im, nc, TS_EINVAL, "data (rank %d) and indices (rank %d) must have the same rank, at least 1",
                    x->ndim, ix->ndim);
  int64_t ax = aint(nc, "axis", 0);
  if (!imp_norm_axis(&ax, x->ndim, false))
    return imp_nerr(im, nc, TS_EINVAL, "axis %" PRId64 " is out of range for rank %d", aint(nc, "axis", 0), x->ndim);
  set_out(nc, 0, x->dtype, ix->ndim, ix->dims);
  return imp_set_int(im, nc, "axis", ax);
}

ts_status imp_tile(imp *im, nctx *nc) {
  ts_status st = imp_need_input(im, nc, 0, "input");
  if (st) return st;
  const tg_value *x = IN(im, nc, 0);
  int64_t buf[MAX_RANK];
  const int64_t *rep;
  int n;
  bool present;
  if ((st = imp_param_ints(im, nc, 1, "repeats", &present, buf, MAX_RANK, &rep, &n))) return st;
  if (!present || n != x->ndim)
    return imp_nerr(im, nc, TS_EINVAL, "repeats has %d entries for rank %d", present ? n : 0, x->ndim);
  tg_dim od[MAX_RANK];
  for (int a = 0; a < x->ndim; a++) {
    if (rep[a] < 0) return imp_nerr(im, nc, TS_EINVAL, "repeats[%d] = %" PRId64 " is negative", a, rep[a]);
    if (x->dims[a].sym && rep[a] != 1)
      return imp_nerr(im, nc, TS_EUNSUPPORTED, "repeating symbolic dim %s (repeats[%d] = %" PRId64 ")",
                      x->dims[a].sym, a, rep[a]);
    od[a] = x->dims[a].sym ? x->dims[a] : DC(x->dims[a].value * rep[a]);
  }
  set_out(nc, 0, x->dtype, x->ndim, od);
  drop_inputs(nc, 1);
  return imp_set_ints(im, nc, "repeats", rep, n);
}

/* DepthToSpace and SpaceToDepth: NCHW with a constant blocksize. */
ts_status imp_depth_space(imp *im, nctx *nc) {
  ts_status st = imp_need_input(im, nc, 0, "input");
  if (st) return st;
  const tg_value *x = IN(im, nc, 0);
  bool d2s = nc->op == TG_OP_DEPTH_TO_SPACE;
  int64_t b = aint(nc, "blocksize", 0);
  if (!A(nc, "blocksize") || b < 1) return imp_nerr(im, nc, TS_EINVAL, "attribute blocksize must be given and >= 1");
  const char *mode = astr(nc, "mode", "DCR");
  if (d2s && strcmp(mode, "DCR") && strcmp(mode, "CRD")) return imp_nerr(im, nc, TS_EINVAL, "mode='%s' (DCR or CRD)", mode);
  if (x->ndim != 4) return imp_nerr(im, nc, TS_EINVAL, "input %s has rank %d (NCHW expected)", x->name, x->ndim);
  int sp = d2s ? 1 : 2; /* axes that must divide by b (d2s: C by b*b) */
  for (int a = sp; a < (d2s ? 2 : 4); a++)
    if (x->dims[a].sym) return imp_nerr(im, nc, TS_EUNSUPPORTED, "symbolic dim %s", x->dims[a].sym);
  for (int a = 2; a < 4 && d2s; a++)
    if (x->dims[a].sym) return imp_nerr(im, nc, TS_EUNSUPPORTED, "symbolic dim %s", x->dims[a].sym);
  tg_dim od[4] = {x->dims[0], x->dims[1], x->dims[2], x->dims[3]};
  if (d2s) {
    if (x->dims[1].value % (b * b)) return imp_nerr(im, nc, TS_EINVAL, "C = %" PRId64 " is not a multiple of blocksize^2", x->dims[1].value);
    od[1] = DC(x->dims[1].value / (b * b));
    od[2] = DC(x->dims[2].value * b);
    od[3] = DC(x->dims[3].value * b);
  } else {
    if (x->dims[1].sym) return imp_nerr(im, nc, TS_EUNSUPPORTED, "symbolic dim %s", x->dims[1].sym);
    if (x->dims[2].value % b || x->dims[3].value % b)
      return imp_nerr(im, nc, TS_EINVAL, "H and W are not multiples of blocksize %" PRId64, b);
    od[1] = DC(x->dims[1].value * b * b);
    od[2] = DC(x->dims[2].value / b);
    od[3] = DC(x->dims[3].value / b);
  }
  set_out(nc, 0, x->dtype, 4, od);
  if (d2s && (st = imp_set_str(im, nc, "mode", mode))) return st;
  return TS_OK;
}

ts_status imp_trilu(imp *im, nctx *nc) {
  ts_status st = imp_need_input(im, nc, 0, "input");
  if (st) return st;
  const tg_value *x = IN(im, nc, 0);
  if (x->ndim < 2) return imp_nerr(im, nc, TS_EINVAL, "input %s has rank %d (at least 2)", x->name, x->ndim);
  int64_t kk = 0;
  if (IN(im, nc, 1) && (st = scalar_param(im, nc, 1, "k", &kk))) return st;
  same_as_input(im, nc, 0, 0);
  drop_inputs(nc, 1);
  if ((st = imp_set_int(im, nc, "k", kk))) return st;
  return imp_set_int(im, nc, "upper", aint(nc, "upper", 1));
}

ts_status imp_size(imp *im, nctx *nc) {
  ts_status st = imp_need_input(im, nc, 0, "data");
  if (st) return st;
  const tg_value *x = IN(im, nc, 0);
  tg_dim p;
  if (!imp_dims_product(im, x->dims, x->ndim, &p))
    return imp_nerr(im, nc, TS_EUNSUPPORTED, "the size of %s overflows or multiplies more than %d symbols", x->name, TG_MONO_MAX);
  set_out(nc, 0, ir_dt(IR_I64), 0, NULL);
  tg_dim *d = TS_ANEWN(im->a, tg_dim, 1);
  if (!d) return imp_oom(im);
  d[0] = p;
  nc->okv = (known){1, d};
  return TS_OK;
}

ts_status imp_cumsum(imp *im, nctx *nc) {
  ts_status st = imp_need_input(im, nc, 0, "x");
  if (st) return st;
  const tg_value *x = IN(im, nc, 0);
  int64_t ax;
  if ((st = scalar_param(im, nc, 1, "axis", &ax))) return st;
  int64_t a0 = ax;
  if (!imp_norm_axis(&ax, x->ndim, false))
    return imp_nerr(im, nc, TS_EINVAL, "axis %" PRId64 " is out of range for rank %d", a0, x->ndim);
  same_as_input(im, nc, 0, 0);
  drop_inputs(nc, 1);
  if ((st = imp_set_int(im, nc, "axis", ax)) || (st = imp_set_int(im, nc, "exclusive", aint(nc, "exclusive", 0))))
    return st;
  return imp_set_int(im, nc, "reverse", aint(nc, "reverse", 0));
}

ts_status imp_onehot(imp *im, nctx *nc) {
  ts_status st = imp_need_input(im, nc, 0, "indices");
  if (st || (st = imp_need_input(im, nc, 2, "values"))) return st;
  const tg_value *ix = IN(im, nc, 0), *vals = IN(im, nc, 2);
  double depth;
  if (!IN(im, nc, 1) || !imp_const_scalar(im, nc->in[1], &depth))
    return imp_nerr(im, nc, TS_EUNSUPPORTED, "input 1 (depth) must be a one-element constant");
  if (depth < 1 || depth > (double)MAX_ELEMS) return imp_nerr(im, nc, TS_EINVAL, "depth %g is out of range", depth);
  if (tg_value_numel(vals) != 2) return imp_nerr(im, nc, TS_EINVAL, "values (%s) must have 2 elements", vals->name);
  int r = ix->ndim + 1;
  if (r > MAX_RANK) return imp_nerr(im, nc, TS_EUNSUPPORTED, "rank above %d", MAX_RANK);
  int64_t ax = aint(nc, "axis", -1);
  if (!imp_norm_axis(&ax, r, false))
    return imp_nerr(im, nc, TS_EINVAL, "axis %" PRId64 " is out of range for rank %d", aint(nc, "axis", -1), r);
  tg_dim od[MAX_RANK];
  for (int a = 0, j = 0; a < r; a++) od[a] = a == ax ? DC((int64_t)depth) : ix->dims[j++];
  set_out(nc, 0, vals->dtype, r, od);
  return imp_set_int(im, nc, "axis", ax);
}

ts_status imp_gather_nd(imp *im, nctx *nc) {
  ts_status st = imp_need_input(im, nc, 0, "data");
  if (st || (st = imp_need_index(im, nc, 1, "indices"))) return st;
  const tg_value *x = IN(im, nc, 0), *ix = IN(im, nc, 1);
  int64_t bd = aint(nc, "batch_dims", 0);
  int q = ix->ndim, r = x->ndim;
  if (q < 1 || ix->dims[q - 1].sym) return imp_nerr(im, nc, TS_EUNSUPPORTED, "indices must have a constant last dim");
  int64_t m = ix->dims[q - 1].value;
  if (bd < 0 || bd >= q || bd >= r || bd + m > r)
    return imp_nerr(im, nc, TS_EINVAL, "batch_dims %" PRId64 " and index depth %" PRId64 " do not fit data rank %d", bd, m, r);
  int nd = q - 1 + (int)(r - bd - m);
  if (nd > MAX_RANK) return imp_nerr(im, nc, TS_EUNSUPPORTED, "rank above %d", MAX_RANK);
  tg_dim od[MAX_RANK];
  int o = 0;
  for (int a = 0; a < q - 1; a++) od[o++] = ix->dims[a];
  for (int a = (int)(bd + m); a < r; a++) od[o++] = x->dims[a];
  set_out(nc, 0, x->dtype, nd, od);
  return imp_set_int(im, nc, "batch_dims", bd);
}

/* ---- legalisation -------------------------------------------------------------- */

/* "min(max(select(I < 0, I + D, I), 0), D - 1)": index I into a dim D, negative counted from the end. */
static void norm_index(tb *b, const char *I, const char *D) {
  tb_printf(b, "min(max(select(%s < 0, %s + %s, %s), 0), %s - 1)", I, I, D, I, D);
}

/* "name[i0, ..]" over the given axes, wrapped in i64() unless the dtype is i64. */
static void index_load(tb *b, const char *name, ir_dtype dt, const char *axes) {
  bool cast = dt.code != IR_I64;
  tb_printf(b, "%s%s[%s]%s", cast ? "i64(" : "", name, axes, cast ? ")" : "");
}

void lg_emit_gather_elements(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out) {
  const tg_value *x = V(k, n->inputs[0]), *ix = V(k, n->inputs[1]);
  int r = x->ndim, a = lg_axis(tg_attr_int(n, "axis", 0), r);
  tb all, I, b;
  tb_reset(&all);
  tb_reset(&I);
  tb_reset(&b);
  for (int p = 0; p < r; p++) tb_printf(&all, "%si%d", p ? ", " : "", p);
  index_load(&I, in[1], ix->dtype, all.s);
  char D[48];
  lg_lhs(&b, out[0], r);
  tb_printf(&b, " = %s[", in[0]);
  for (int p = 0; p < r; p++) {
    if (p) tb_printf(&b, ", ");
    if (p == a) norm_index(&b, I.s, lg_dim_s(k, x->dims[a], D));
    else tb_printf(&b, "i%d", p);
  }
  tb_printf(&b, "]");
  lg_stmt(k, &b);
}

void lg_emit_tile(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out) {
  const tg_value *x = V(k, n->inputs[0]);
  int r = x->ndim, c;
  const int64_t *rep = tg_attr_ints(n, "repeats", &c);
  if (!rep || c != r) {
    lg_fail(k, TS_EINVAL, n, "repeats has %d entries for rank %d", c, r);
    return;
  }
  tb b;
  tb_reset(&b);
  lg_lhs(&b, out[0], r);
  tb_printf(&b, " = %s[", in[0]);
  char D[48];
  for (int p = 0; p < r; p++) {
    if (p) tb_printf(&b, ", ");
    if (rep[p] == 1) tb_printf(&b, "i%d", p);
    else tb_printf(&b, "i%d %% %s", p, lg_dim_s(k, x->dims[p], D));
  }
  tb_printf(&b, "]");
  lg_stmt(k, &b);
}

void lg_emit_depth_space(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out) {
  const tg_value *x = V(k, n->inputs[0]), *y = OUTV(0);
  int64_t bs = tg_attr_int(n, "blocksize", 1);
  tb b;
  tb_reset(&b);
  lg_lhs(&b, out[0], 4);
  if (n->op == TG_OP_DEPTH_TO_SPACE) {
    int64_t C = y->dims[1].value;
    const char *mode = tg_attr_str(n, "mode", "DCR");
    if (!strcmp(mode, "CRD"))
      tb_printf(&b, " = %s[i0, i1 * %" PRId64 " + (i2 %% %" PRId64 ") * %" PRId64 " + i3 %% %" PRId64 ", i2 // %" PRId64
                ", i3 // %" PRId64 "]", in[0], bs * bs, bs, bs, bs, bs, bs);
    else
      tb_printf(&b, " = %s[i0, ((i2 %% %" PRId64 ") * %" PRId64 " + i3 %% %" PRId64 ") * %" PRId64 " + i1, i2 // %" PRId64
                ", i3 // %" PRId64 "]", in[0], bs, bs, bs, C, bs, bs);
  } else {
    int64_t C = x->dims[1].value;
    tb_printf(&b, " = %s[i0, i1 %% %" PRId64 ", i2 * %" PRId64 " + (i1 // %" PRId64 ") // %" PRId64 ", i3 * %" PRId64
              " + (i1 // %" PRId64 ") %% %" PRId64 "]", in[0], C, bs, C, bs, bs, C, bs);
  }
  lg_stmt(k, &b);
}

void lg_emit_trilu(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out) {
  const tg_value *x = V(k, n->inputs[0]);
  int r = x->ndim;
  int64_t kk = tg_attr_int(n, "k", 0);
  bool upper = tg_attr_int(n, "upper", 1) != 0;
  char z[48];
  tb b;
  tb_reset(&b);
  lg_lhs(&b, out[0], r);
  tb_printf(&b, " = select(i%d - i%d %s %" PRId64 ", ", r - 1, r - 2, upper ? ">=" : "<=", kk);
  lg_lhs(&b, in[0], r);
  tb_printf(&b, ", %s)", lit(x->dtype, 0, z));
  lg_stmt(k, &b);
}

void lg_emit_size(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out) {
  (void)in;
  const tg_value *x = V(k, n->inputs[0]);
  char D[48];
  tb b;
  tb_reset(&b);
  tb_printf(&b, "%s[] = i64(1", out[0]);
  for (int a = 0; a < x->ndim; a++) tb_printf(&b, " * %s", lg_dim_s(k, x->dims[a], D));
  tb_printf(&b, ")");
  lg_stmt(k, &b);
}

void lg_emit_cumsum(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out) {
  const tg_value *x = V(k, n->inputs[0]);
  int r = x->ndim, a = lg_axis(tg_attr_int(n, "axis", 0), r);
  bool excl = tg_attr_int(n, "exclusive", 0) != 0, rev = tg_attr_int(n, "reverse", 0) != 0;
  const char *cmp = rev ? (excl ? ">" : ">=") : (excl ? "<" : "<=");
  char D[48];
  tb b;
  tb_reset(&b);
  lg_lhs(&b, out[0], r);
  tb_printf(&b, " += %s[", in[0]);
  for (int p = 0; p < r; p++) tb_printf(&b, "%s%s%d", p ? ", " : "", p == a ? "r" : "i", p == a ? 0 : p);
  tb_printf(&b, "] where r0 %s i%d for r0 in 0..%s", cmp, a, lg_dim_s(k, x->dims[a], D));
  lg_stmt(k, &b);
}

void lg_emit_onehot(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out) {
  const tg_value *ix = V(k, n->inputs[0]), *y = OUTV(0);
  int r = y->ndim, a = lg_axis(tg_attr_int(n, "axis", -1), r);
  tb all, I, b;
  tb_reset(&all);
  tb_reset(&I);
  tb_reset(&b);
  for (int p = 0, j = 0; p < r; p++)
    if (p != a) tb_printf(&all, "%si%d", j++ ? ", " : "", p);
  index_load(&I, in[0], ix->dtype, all.s);
  char Db[48];
  const char *D = lg_dim_s(k, y->dims[a], Db);
  lg_lhs(&b, out[0], r);
  /* an index outside [-depth, depth) matches no position (all off) */
  tb_printf(&b, " = select(select(%s < 0, %s + %s, %s) == i%d, %s[1], %s[0])", I.s, I.s, D, I.s, a, in[2], in[2]);
  lg_stmt(k, &b);
}

void lg_emit_gather_nd(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out) {
  const tg_value *x = V(k, n->inputs[0]), *ix = V(k, n->inputs[1]), *y = OUTV(0);
  int q = ix->ndim, r = x->ndim, bd = (int)tg_attr_int(n, "batch_dims", 0);
  int m = (int)ix->dims[q - 1].value;
  char D[48];
  tb b;
  tb_reset(&b);
  lg_lhs(&b, out[0], y->ndim);
  tb_printf(&b, " = %s[", in[0]);
  for (int p = 0; p < r; p++) {
    if (p) tb_printf(&b, ", ");
    if (p < bd) tb_printf(&b, "i%d", p);
    else if (p < bd + m) {
      tb ax, I;
      tb_reset(&ax);
      tb_reset(&I);
      for (int j = 0; j < q - 1; j++) tb_printf(&ax, "i%d, ", j);
      tb_printf(&ax, "%d", p - bd);
      index_load(&I, in[1], ix->dtype, ax.s);
      norm_index(&b, I.s, lg_dim_s(k, x->dims[p], D));
    } else tb_printf(&b, "i%d", q - 1 + p - bd - m);
  }
  tb_printf(&b, "]");
  lg_stmt(k, &b);
}

/* ---- Resize and Upsample --------------------------------------------------------- */

/* Float constant input i (scales): its values into buf; *n = 0 when omitted or empty. */
static ts_status float_param(imp *im, nctx *nc, int i, double *buf, int cap, int *n) {
  *n = 0;
  const tg_value *v = IN(im, nc, i);
  if (!v) return TS_OK;
  if (v->kind != TG_V_CONST || !v->data || (v->dtype.code != IR_F32 && v->dtype.code != IR_F64))
    return imp_nerr(im, nc, TS_EUNSUPPORTED, "input %d (%s, the scales) must be a float constant", i, v->name);
  int64_t e = tg_value_numel(v);
  if (e > cap) return imp_nerr(im, nc, TS_EINVAL, "input %d (%s) has %" PRId64 " scales", i, v->name, e);
  for (int j = 0; j < e; j++) {
    if (v->dtype.code == IR_F32) {
      float f;
      memcpy(&f, (const char *)v->data + 4 * j, 4);
      buf[j] = f;
    } else memcpy(&buf[j], (const char *)v->data + 8 * j, 8);
  }
  *n = (int)e;
  return TS_OK;
}

static bool in_list(const char *s, const char *const *list) {
  for (; *list; list++)
    if (!strcmp(s, *list)) return true;
  return false;
}

/* Upsample (opsets 7 to 9) is Resize with the old defaults. */
static bool is_upsample(const nctx *nc) { return nc->op == TG_OP_UPSAMPLE; }

/* Per-axis scales of a Resize/Upsample node (from scales or sizes, over axes). */
static ts_status resize_scales(imp *im, nctx *nc, const tg_value *x, double *S, tg_dim *od) {
  bool ups = is_upsample(nc);
  int r = x->ndim, na = 0, ns = 0, nz = 0;
  const int64_t *axes = im->opset >= 18 ? aints(nc, "axes", &na) : NULL;
  int64_t AX[MAX_RANK];
  for (int j = 0; j < (axes ? na : r); j++) {
    AX[j] = axes ? axes[j] : j;
    if (!imp_norm_axis(&AX[j], r, false)) return imp_nerr(im, nc, TS_EINVAL, "axes[%d] is out of range", j);
  }
  int cnt = axes ? na : r;
  double sc[MAX_RANK];
  ts_status st;
  if (ups && im->opset < 9) {
    const tg_attr *a = A(nc, "scales");
    if (!a || a->kind != TG_A_FLOATS || a->n > MAX_RANK) return imp_nerr(im, nc, TS_EINVAL, "attribute scales is required");
    for (ns = 0; ns < a->n; ns++) sc[ns] = a->floats[ns];
  } else if ((st = float_param(im, nc, ups || im->opset < 11 ? 1 : 2, sc, MAX_RANK, &ns)))
    return st;
  int64_t zb[MAX_RANK];
  const int64_t *sizes = NULL;
  bool pz = false;
  if (!ups && im->opset >= 11 && (st = imp_param_ints(im, nc, 3, "sizes", &pz, zb, MAX_RANK, &sizes, &nz))) return st;
  if (pz && nz == 0) pz = false;
  if ((ns > 0) == pz) return imp_nerr(im, nc, TS_EINVAL, "exactly one of scales and sizes must be given");
  if ((ns ? ns : nz) != cnt) return imp_nerr(im, nc, TS_EINVAL, "%d scales or sizes for %d axes", ns ? ns : nz, cnt);
  for (int a = 0; a < r; a++) S[a] = 1.0, od[a] = x->dims[a];
  for (int j = 0; j < cnt; j++) {
    int a = (int)AX[j];
    bool same = ns ? sc[j] == 1.0 : false;
    if (x->dims[a].sym) {
      if (!same) return imp_nerr(im, nc, TS_EUNSUPPORTED, "resizing symbolic dim %s", x->dims[a].sym);
      continue;
    }
    int64_t in = x->dims[a].value;
    if (ns) {
      if (!(sc[j] > 0)) return imp_nerr(im, nc, TS_EINVAL, "scales[%d] = %g is not positive", j, sc[j]);
      S[a] = (float)sc[j];
      od[a] = DC((int64_t)((float)sc[j] * (float)in));
    } else {
      if (sizes[j] < 1) return imp_nerr(im, nc, TS_EINVAL, "sizes[%d] = %" PRId64, j, sizes[j]);
      S[a] = (float)sizes[j] / (float)in;
      od[a] = DC(sizes[j]);
    }
    if (od[a].value < 1) return imp_nerr(im, nc, TS_EINVAL, "axis %d resizes to nothing", a);
  }
  return TS_OK;
}

ts_status imp_resize(imp *im, nctx *nc) {
  static const char *const modes[] = {"nearest", "linear", "cubic", NULL};
  static const char *const ctms[] = {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_half_pixel_for_nn", NULL};
  static const char *const nms[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil", NULL};
  ts_status st = imp_need_input(im, nc, 0, "X");
  if (st) return st;
  const tg_value *x = IN(im, nc, 0);
  bool old = is_upsample(nc) || im->opset < 11;
  const char *mode = astr(nc, "mode", "nearest");
  const char *ctm = old ? "asymmetric" : astr(nc, "coordinate_transformation_mode", "half_pixel");
  const char *nm = old ? "simple" : astr(nc, "nearest_mode", "round_prefer_floor");
  if (!in_list(mode, modes) || (old && !strcmp(mode, "cubic")))
    return imp_nerr(im, nc, TS_EUNSUPPORTED, "mode='%s' (nearest, linear%s are supported)", mode, old ? "" : " and cubic");
  if (!in_list(ctm, ctms)) return imp_nerr(im, nc, TS_EUNSUPPORTED, "coordinate_transformation_mode='%s'", ctm);
  if (!old && !in_list(nm, nms)) return imp_nerr(im, nc, TS_EUNSUPPORTED, "nearest_mode='%s'", nm);
  if (aint(nc, "antialias", 0)) return imp_nerr(im, nc, TS_EUNSUPPORTED, "antialias=1");
  if (strcmp(astr(nc, "keep_aspect_ratio_policy", "stretch"), "stretch"))
    return imp_nerr(im, nc, TS_EUNSUPPORTED, "keep_aspect_ratio_policy='%s' (stretch is supported)",
                    astr(nc, "keep_aspect_ratio_policy", ""));
  double S[MAX_RANK];
  tg_dim od[MAX_RANK];
  if ((st = resize_scales(im, nc, x, S, od))) return st;
  set_out(nc, 0, x->dtype, x->ndim, od);
  drop_inputs(nc, 1);
  if ((st = imp_set_str(im, nc, "mode", mode)) || (st = imp_set_str(im, nc, "coordinate_transformation_mode", ctm)) ||
      (st = imp_set_str(im, nc, "nearest_mode", nm)))
    return st;
  if (!strcmp(mode, "cubic") && ((st = imp_set_float(im, nc, "cubic_coeff_a", afloat(nc, "cubic_coeff_a", -0.75))) ||
                                 (st = imp_set_int(im, nc, "exclude_outside", aint(nc, "exclude_outside", 0) != 0))))
    return st;
  return imp_set_floats(im, nc, "scales", S, x->ndim);
}

/* The source coordinate of output index i<a> as f32 text, clamped to [0,
 * in - 1] (cubic: unclamped, its taps are clamped instead). */
static void resize_coord(tb *b, const char *ctm, int a, double s, int64_t in, int64_t out, bool clamp) {
  char sl[48];
  flit(s, sl);
  tb e;
  tb_reset(&e);
  if (!strcmp(ctm, "align_corners")) {
    if (out == 1) tb_printf(&e, "0.0");
    else tb_printf(&e, "f32(i%d) * %" PRId64 ".0 / %" PRId64 ".0", a, in - 1, out - 1);
  } else if (!strcmp(ctm, "asymmetric")) tb_printf(&e, "f32(i%d) / %s", a, sl);
  else if (!strcmp(ctm, "tf_half_pixel_for_nn")) tb_printf(&e, "(f32(i%d) + 0.5) / %s", a, sl);
  else if (!strcmp(ctm, "pytorch_half_pixel") && out == 1) tb_printf(&e, "0.0");
  else tb_printf(&e, "(f32(i%d) + 0.5) / %s - 0.5", a, sl);
  if (clamp) tb_printf(b, "min(max(%s, 0.0), %" PRId64 ".0)", e.s, in - 1);
  else tb_printf(b, "(%s)", e.s);
}

/* Nearest source index of axis a (clamped coordinate X >= 0, so i64() is floor). */
static void resize_nearest(tb *b, const char *nm, const char *X, double s, int64_t in) {
  bool ceil_ = !strcmp(nm, "ceil") || (!strcmp(nm, "simple") && s < 1.0);
  if (ceil_) tb_printf(b, "min(i64(%s) + select(f32(i64(%s)) < %s, 1, 0), %" PRId64 ")", X, X, X, in - 1);
  else if (!strcmp(nm, "round_prefer_floor"))
    tb_printf(b, "min(i64(%s - 0.5) + select(f32(i64(%s - 0.5)) < %s - 0.5, 1, 0), %" PRId64 ")", X, X, X, in - 1);
  else if (!strcmp(nm, "round_prefer_ceil")) tb_printf(b, "min(i64(%s + 0.5), %" PRId64 ")", X, in - 1);
  else tb_printf(b, "i64(%s)", X);
}

/* Cubic resize over the resized axes ra[0..nr) with source coordinates
 (the coordinate as in resize_coord, unclamped): per axis a table of the 4 tap indices
 * (floor(X) - 1 + t, clamped to the input: edge padding) and their weights
 * (the cubic kernel with coefficient A; with exclude_outside, taps outside
 * the input weigh 0 and the rest are renormalised), then one sum over the
 * 4^nr taps. */
static void resize_cubic(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out, int nr,
                         const int *ra) {
  const tg_value *x = V(k, n->inputs[0]), *y = OUTV(0);
  int r = x->ndim;
  double A = tg_attr_float(n, "cubic_coeff_a", -0.75);
  bool excl = tg_attr_int(n, "exclude_outside", 0) != 0;
  char al[48], idx[MAX_RANK][96], wt[MAX_RANK][96], raw[96], sum[96];
  flit(A, al);
  for (int j = 0; j < nr; j++) {
    int a = ra[j];
    int64_t D = x->dims[a].value;
    tg_dim td[2] = {y->dims[a], DC(4)};
    char tag[32];
    snprintf(tag, sizeof tag, "cidx%d", j);
    lg_tmpname(idx[j], sizeof idx[j], out[0], tag);
    snprintf(tag, sizeof tag, "cw%d", j);
    lg_tmpname(wt[j], sizeof wt[j], out[0], tag);
    lg_let_dims(k, idx[j], ir_dt(IR_I64), 2, td);
    lg_let_dims(k, wt[j], ir_dt(IR_F32), 2, td);
    /* the coordinate text is in i<a>: the tables index it by i0 (output position), i1 (tap) */
    tb Xs, b;
    tb_reset(&Xs);
    tb_reset(&b);
    resize_coord(&Xs, tg_attr_str(n, "coordinate_transformation_mode", "half_pixel"), 0,
                 tg_node_attr(n, "scales")->floats[a], D, y->dims[a].value, false);
    tb_printf(&b, "%s[i0, i1] = min(max(i64(floor(%s)) - 1 + i1, 0), %" PRId64 ")", idx[j], Xs.s, D - 1);
    lg_stmt(k, &b);
    /* distance d = |tap - X| in [0, 2]: A|d|^3 - 5A|d|^2 + 8A|d| - 4A for 1 <= d < 2, (A+2)d^3 - (A+3)d^2 + 1 below */
    tb d;
    tb_reset(&d);
    tb_printf(&d, "abs(f32(i64(floor(%s)) - 1 + i1) - %s)", Xs.s, Xs.s);
    snprintf(tag, sizeof tag, "craw%d", j);
    lg_tmpname(raw, sizeof raw, out[0], tag);
    lg_let_dims(k, raw, ir_dt(IR_F32), 2, td);
    tb_reset(&b);
    tb_printf(&b, "%s[i0, i1] = select(%s < 1.0, ((%s + 2.0) * %s - (%s + 3.0)) * %s * %s + 1.0, "
              "((%s * %s - 5.0 * %s) * %s + 8.0 * %s) * %s - 4.0 * %s)",
              raw, d.s, al, d.s, al, d.s, d.s, al, d.s, al, d.s, al, d.s, al);
    if (excl) {
      tb_printf(&b, " * select(i64(floor(%s)) - 1 + i1 >= 0 && i64(floor(%s)) - 1 + i1 < %" PRId64 ", 1.0, 0.0)", Xs.s,
                Xs.s, D);
      lg_stmt(k, &b);
      snprintf(tag, sizeof tag, "csum%d", j);
      lg_tmpname(sum, sizeof sum, out[0], tag);
      tb_reset(&b);
      tb_printf(&b, "%s[i0] += %s[i0, r0] for r0 in 0..4", sum, raw);
      lg_stmt(k, &b);
      tb_reset(&b);
      tb_printf(&b, "%s[i0, i1] = %s[i0, i1] / %s[i0]", wt[j], raw, sum);
    } else {
      lg_stmt(k, &b);
      tb_reset(&b);
      tb_printf(&b, "%s[i0, i1] = %s[i0, i1]", wt[j], raw);
    }
    lg_stmt(k, &b);
  }
  bool cast = x->dtype.code != IR_F32;
  tb b;
  tb_reset(&b);
  lg_lhs(&b, out[0], r);
  tb_printf(&b, " += %s[", in[0]);
  for (int a = 0, j = 0; a < r; a++) {
    if (a) tb_printf(&b, ", ");
    if (j < nr && ra[j] == a) {
      tb_printf(&b, "%s[i%d, r%d]", idx[j], a, j);
      j++;
    }
    else tb_printf(&b, "i%d", a);
  }
  tb_printf(&b, "] * %s(", cast ? dtn(x->dtype) : "");
  for (int j = 0; j < nr; j++) tb_printf(&b, "%s%s[i%d, r%d]", j ? " * " : "", wt[j], ra[j], j);
  tb_printf(&b, ")");
  for (int j = 0; j < nr; j++) tb_printf(&b, "%s r%d in 0..4", j ? "," : " for", j);
  lg_stmt(k, &b);
}

void lg_emit_resize(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out) {
  const tg_value *x = V(k, n->inputs[0]), *y = OUTV(0);
  int r = x->ndim;
  const tg_attr *sa = tg_node_attr(n, "scales");
  const char *ctm = tg_attr_str(n, "coordinate_transformation_mode", "half_pixel");
  const char *nm = tg_attr_str(n, "nearest_mode", "round_prefer_floor");
  bool linear = !strcmp(tg_attr_str(n, "mode", "nearest"), "linear");
  bool cubic = !strcmp(tg_attr_str(n, "mode", "nearest"), "cubic");
  if (!sa || sa->kind != TG_A_FLOATS || sa->n != r) {
    lg_fail(k, TS_EINVAL, n, "no scales for rank %d", r);
    return;
  }
  int ra[MAX_RANK], nr = 0; /* resized axes */
  tb X[MAX_RANK];
  for (int a = 0; a < r; a++) {
    if (tg_dim_eq(x->dims[a], y->dims[a]) && sa->floats[a] == 1.0) continue;
    ra[nr] = a;
    tb_reset(&X[nr]);
    resize_coord(&X[nr], ctm, a, sa->floats[a], x->dims[a].value, y->dims[a].value, !cubic);
    nr++;
  }
  if (cubic) {
    resize_cubic(k, n, in, out, nr, ra);
    return;
  }
  if (linear && nr > 3) {
    lg_fail(k, TS_EUNSUPPORTED, n, "linear resize of %d axes (at most 3)", nr);
    return;
  }
  tb b;
  tb_reset(&b);
  lg_lhs(&b, out[0], r);
  tb_printf(&b, " = ");
  for (int c = 0; c < (linear ? 1 << nr : 1); c++) {
    if (c) tb_printf(&b, " + ");
    for (int j = 0; linear && j < nr; j++) /* weight: w or 1 - w, w = X - floor(X) */
      tb_printf(&b, "%s(%s - f32(i64(%s)))%s * ", c >> j & 1 ? "" : "(1.0 - ", X[j].s, X[j].s, c >> j & 1 ? "" : ")");
    tb_printf(&b, "%s[", in[0]);
    for (int a = 0, j = 0; a < r; a++) {
      if (a) tb_printf(&b, ", ");
      if (j >= nr || ra[j] != a) {
        tb_printf(&b, "i%d", a);
        continue;
      }
      int64_t D = x->dims[a].value;
      if (!linear) resize_nearest(&b, nm, X[j].s, sa->floats[a], D);
      else if (c >> j & 1) tb_printf(&b, "min(i64(%s) + 1, %" PRId64 ")", X[j].s, D - 1);
      else tb_printf(&b, "i64(%s)", X[j].s);
      j++;
    }
    tb_printf(&b, "]");
  }
  lg_stmt(k, &b);
}
