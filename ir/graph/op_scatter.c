/* op_scatter.c — operators that select or write data by computed
 * positions: TopK, ScatterND, ScatterElements (and its opset 9-10 name
 * Scatter). The compute DSL writes every output element from one
 * expression, so these are written as gathers: TopK ranks each element
 * against its row (ties to the lower index, as onnxruntime orders them)
 * and picks the element of each rank; a scatter computes, for each output
 * element, the updates whose index hits it (the last one for reduction
 * "none", as onnxruntime applies them in order; their sum, product, max or
 * min otherwise). Both cost a pass over the row (TopK) or the updates
 * (scatter) per output element: right for the small index sets models
 * carry, slow for large ones. docs/GRAPH.md ("TopK and the scatters"). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "legalize_int.h"
#include "onnx_int.h"
#include "ops.h"

/* ---- import ------------------------------------------------------------------- */

ts_status imp_topk(imp *im, nctx *nc) {
  ts_status st = imp_need_input(im, nc, 0, "X");
  if (st) return st;
  const tg_value *x = IN(im, nc, 0);
  if (x->ndim < 1) return imp_nerr(im, nc, TS_EINVAL, "input %s is a scalar (rank at least 1)", x->name);
  if (x->dtype.code == IR_BOOL) return imp_nerr(im, nc, TS_ETYPE, "input %s is bool (a number type is needed)", x->name);
  int64_t kk;
  if (im->opset < 10) {
    tg_attr *a = A(nc, "k");
    if (!a) return imp_nerr(im, nc, TS_EINVAL, "attribute 'k' is required before opset 10");
    kk = a->i;
  } else {
    int64_t buf[2];
    const int64_t *vals;
    int n;
    bool present;
    if ((st = imp_param_ints(im, nc, 1, "K", &present, buf, 2, &vals, &n))) return st;
    if (!present || n != 1) return imp_nerr(im, nc, TS_EINVAL, "input 1 (K) must be one integer");
    kk = vals[0];
  }
  int64_t ax = aint(nc, "axis", -1), a0 = ax;
  if (!imp_norm_axis(&ax, x->ndim, false))
    return imp_nerr(im, nc, TS_EINVAL, "axis %" PRId64 " is out of range for rank %d", a0, x->ndim);
  tg_dim d = x->dims[ax];
  if (kk < 0 || (!d.sym && kk > d.value))
    return imp_nerr(im, nc, TS_EINVAL, "k %" PRId64 " is out of range for axis %" PRId64 " of extent %" PRId64, kk,
                    ax, d.sym ? (int64_t)-1 : d.value);
  tg_dim od[MAX_RANK];
  for (int i = 0; i < x->ndim; i++) od[i] = i == ax ? DC(kk) : x->dims[i];
  set_out(nc, 0, x->dtype, x->ndim, od);
  set_out(nc, 1, ir_dt(IR_I64), x->ndim, od);
  drop_inputs(nc, 1);
  if ((st = imp_set_int(im, nc, "k", kk)) || (st = imp_set_int(im, nc, "axis", ax)) ||
      (st = imp_set_int(im, nc, "largest", aint(nc, "largest", 1))))
    return st;
  return imp_set_int(im, nc, "sorted", aint(nc, "sorted", 1));
}

/* The reduction attribute as one of none/add/mul/max/min (opsets below 16: none). */
static ts_status scatter_reduction(imp *im, nctx *nc) {
  const char *r = astr(nc, "reduction", "none");
  static const char *const ok[] = {"none", "add", "mul", "max", "min"};
  for (int i = 0; i < 5; i++)
    if (!strcmp(r, ok[i])) {
      if (i >= 3 && im->opset < 18)
        return imp_nerr(im, nc, TS_EINVAL, "reduction '%s' needs opset 18", r);
      return imp_set_str(im, nc, "reduction", r);
    }
  return imp_nerr(im, nc, TS_EINVAL, "reduction '%s' is not one of none, add, mul, max, min", r);
}

static ts_status scatter_types(imp *im, nctx *nc) {
  ts_status st = imp_need_input(im, nc, 0, "data");
  if (st || (st = imp_need_index(im, nc, 1, "indices")) || (st = imp_need_input(im, nc, 2, "updates"))) return st;
  const tg_value *x = IN(im, nc, 0), *u = IN(im, nc, 2);
  if (!ir_dtype_eq(x->dtype, u->dtype))
    return imp_nerr(im, nc, TS_ETYPE, "data %s and updates %s differ in type", x->name, u->name);
  return TS_OK;
}

static ts_status shape_mismatch(imp *im, nctx *nc, const char *what, const tg_value *v, int nd, const tg_dim *want) {
  char s1[160], s2[160];
  imp_dims_str(s1, sizeof s1, v->ndim, v->dims);
  imp_dims_str(s2, sizeof s2, nd, want);
  return imp_nerr(im, nc, TS_ESHAPE, "%s %s has shape %s, expected %s", what, v->name, s1, s2);
}

ts_status imp_scatter_nd(imp *im, nctx *nc) {
  ts_status st = scatter_types(im, nc);
  if (st) return st;
  const tg_value *x = IN(im, nc, 0), *ix = IN(im, nc, 1), *u = IN(im, nc, 2);
  int q = ix->ndim, r = x->ndim;
  if (q < 1 || ix->dims[q - 1].sym) return imp_nerr(im, nc, TS_EUNSUPPORTED, "indices must have a constant last dim");
  int64_t m = ix->dims[q - 1].value;
  if (m > r) return imp_nerr(im, nc, TS_EINVAL, "index depth %" PRId64 " is above the data rank %d", m, r);
  tg_dim want[MAX_RANK];
  int nw = 0;
  for (int a = 0; a < q - 1; a++) want[nw++] = ix->dims[a];
  for (int a = (int)m; a < r && nw < MAX_RANK; a++) want[nw++] = x->dims[a];
  bool ok = u->ndim == nw;
  for (int a = 0; ok && a < nw; a++) ok = tg_dim_eq(u->dims[a], want[a]);
  if (!ok) return shape_mismatch(im, nc, "updates", u, nw, want);
  same_as_input(im, nc, 0, 0);
  return scatter_reduction(im, nc);
}

ts_status imp_scatter_elements(imp *im, nctx *nc) {
  ts_status st = scatter_types(im, nc);
  if (st) return st;
  const tg_value *x = IN(im, nc, 0), *ix = IN(im, nc, 1), *u = IN(im, nc, 2);
  if (ix->ndim != x->ndim || ix->ndim < 1)
    return imp_nerr(im, nc, TS_EINVAL, "data (rank %d) and indices (rank %d) must have the same rank, at least 1",
                    x->ndim, ix->ndim);
  bool ok = u->ndim == ix->ndim;
  for (int a = 0; ok && a < ix->ndim; a++) ok = tg_dim_eq(u->dims[a], ix->dims[a]);
  if (!ok) return shape_mismatch(im, nc, "updates", u, ix->ndim, ix->dims);
  int64_t ax = aint(nc, "axis", 0), a0 = ax;
  if (!imp_norm_axis(&ax, x->ndim, false))
    return imp_nerr(im, nc, TS_EINVAL, "axis %" PRId64 " is out of range for rank %d", a0, x->ndim);
  same_as_input(im, nc, 0, 0);
  if ((st = imp_set_int(im, nc, "axis", ax))) return st;
  return scatter_reduction(im, nc);
}

/* ---- legalisation --------------------------------------------------------------- */

/* "i0, .., i<r-1>" with i<ax> replaced by `at`. */
static void axes_with(tb *b, int r, int ax, const char *at) {
  for (int p = 0; p < r; p++) {
    if (p) tb_printf(b, ", ");
    if (p == ax) tb_printf(b, "%s", at);
    else tb_printf(b, "i%d", p);
  }
}

void lg_emit_topk(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out) {
  const tg_value *x = V(k, n->inputs[0]), *y = OUTV(0);
  int r = x->ndim, ax = (int)tg_attr_int(n, "axis", r - 1);
  bool largest = tg_attr_int(n, "largest", 1) != 0;
  char rank[96], idx[96], D[48], ai[16];
  const char *base = out[0] ? out[0] : out[1];
  lg_tmpname(rank, sizeof rank, base, "rank");
  lg_let_dims(k, rank, ir_dt(IR_I64), r, x->dims);
  if (out[1]) snprintf(idx, sizeof idx, "%s", out[1]);
  else {
    lg_tmpname(idx, sizeof idx, base, "idx");
    lg_let_dims(k, idx, ir_dt(IR_I64), r, y->dims);
  }
  snprintf(ai, sizeof ai, "i%d", ax);
  const char *dn = lg_dim_s(k, x->dims[ax], D);
  /* rank of each element in its row: how many come before it (better, or equal at a lower index) */
  tb b, xi, xj;
  tb_reset(&b);
  tb_reset(&xi);
  tb_reset(&xj);
  tb_printf(&xi, "%s[", in[0]);
  axes_with(&xi, r, ax, ai);
  tb_printf(&xi, "]");
  tb_printf(&xj, "%s[", in[0]);
  axes_with(&xj, r, ax, "r0");
  tb_printf(&xj, "]");
  lg_lhs(&b, rank, r);
  tb_printf(&b, " += select(%s %s %s || (%s == %s && r0 < %s), 1, 0) for r0 in 0..%s", xj.s, largest ? ">" : "<", xi.s,
            xj.s, xi.s, ai, dn);
  lg_stmt(k, &b);
  /* the index of the element of each rank 0..k-1 */
  tb_reset(&b);
  lg_lhs(&b, idx, r);
  tb_printf(&b, " += select(%s[", rank);
  axes_with(&b, r, ax, "r0");
  tb_printf(&b, "] == %s, r0, 0) for r0 in 0..%s", ai, dn);
  lg_stmt(k, &b);
  if (!out[0]) return;
  tb_reset(&b);
  lg_lhs(&b, out[0], r);
  tb_printf(&b, " = %s[", in[0]);
  tb at;
  tb_reset(&at);
  lg_lhs(&at, idx, r);
  axes_with(&b, r, ax, at.s);
  tb_printf(&b, "]");
  lg_stmt(k, &b);
}

/* "select(I < 0, I + D, I)": a possibly negative index I into a dim D. */
static void wrap_index(tb *b, const char *I, const char *D) { tb_printf(b, "select(%s < 0, %s + %s, %s)", I, I, D, I); }

/* "name[..]" of an index tensor, as i64. */
static void index_at(tb *b, const char *name, ir_dtype dt, const char *axes) {
  bool cast = dt.code != IR_I64;
  tb_printf(b, "%s%s[%s]%s", cast ? "i64(" : "", name, axes, cast ? ")" : "");
}

/* The scatter's final statements, given the hit condition `cond` over the
 * reduction vars (for clause `fr`), the update at the hit position
 * (`upd_r`, in the reduction vars) and, for "none", the vars' flat number
 * and the update read at a flat number, '@' standing for it. */
typedef struct scatter_parts {
  tb cond, fr, upd_r;
  tb flat;    /* the reduction vars as one flat update number */
  tb upd_hit; /* the update read at the flat number '@' (replaced by the last hit) */
} scatter_parts;

static void parts_reset(scatter_parts *sp) {
  tb_reset(&sp->cond);
  tb_reset(&sp->fr);
  tb_reset(&sp->upd_r);
  tb_reset(&sp->flat);
  tb_reset(&sp->upd_hit);
}

static void scatter_finish(lg_kernel *k, const tg_node *n, const char *const *in, const char *o, const scatter_parts *sp) {
  const tg_value *x = V(k, n->inputs[0]);
  int r = x->ndim;
  const char *red = tg_attr_str(n, "reduction", "none");
  char acc[96];
  tb b;
  tb_reset(&b);
  if (!strcmp(red, "none")) {
    lg_tmpname(acc, sizeof acc, o, "hit");
    lg_let_dims(k, acc, ir_dt(IR_I64), r, x->dims);
    lg_lhs(&b, acc, r);
    tb_printf(&b, " max= select(%s, %s, -1)%s", sp->cond.s, sp->flat.s, sp->fr.s);
    lg_stmt(k, &b);
    tb_reset(&b);
    tb h;
    tb_reset(&h);
    tb_printf(&h, "max(");
    lg_lhs(&h, acc, r);
    tb_printf(&h, ", 0)");
    lg_lhs(&b, o, r);
    tb_printf(&b, " = select(");
    lg_lhs(&b, acc, r);
    tb_printf(&b, " >= 0, ");
    /* the update text with H replaced by the clamped hit */
    for (const char *p = sp->upd_hit.s; *p; p++) {
      if (*p == '@') tb_printf(&b, "%s", h.s);
      else tb_printf(&b, "%c", *p);
    }
    tb_printf(&b, ", ");
    lg_lhs(&b, in[0], r);
    tb_printf(&b, ")");
    lg_stmt(k, &b);
    return;
  }
  static const char *const names[] = {"add", "mul", "max", "min"};
  static const char *const ops[] = {"+=", "*=", "max=", "min="};
  static const char *const comb[] = {"%s + %s", "%s * %s", "max(%s, %s)", "min(%s, %s)"};
  int w = 0;
  while (w < 3 && strcmp(red, names[w])) w++;
  char idn[48];
  const char *ident = w == 0 ? "0" : w == 1 ? "1" : NULL;
  lg_tmpname(acc, sizeof acc, o, "acc");
  lg_let_dims(k, acc, x->dtype, r, x->dims);
  lg_lhs(&b, acc, r);
  if (ident) tb_printf(&b, " %s select(%s, %s, %s)%s", ops[w], sp->cond.s, sp->upd_r.s, lit(x->dtype, ident[0] - '0', idn), sp->fr.s);
  else tb_printf(&b, " %s %s where %s%s", ops[w], sp->upd_r.s, sp->cond.s, sp->fr.s);
  lg_stmt(k, &b);
  tb xs, as;
  tb_reset(&b);
  tb_reset(&xs);
  tb_reset(&as);
  lg_lhs(&xs, in[0], r);
  lg_lhs(&as, acc, r);
  lg_lhs(&b, o, r);
  tb_printf(&b, " = ");
  tb_printf(&b, comb[w], xs.s, as.s);
  lg_stmt(k, &b);
}

void lg_emit_scatter_elements(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out) {
  const tg_value *x = V(k, n->inputs[0]), *ix = V(k, n->inputs[1]);
  int r = x->ndim, ax = (int)tg_attr_int(n, "axis", 0);
  char D[48];
  scatter_parts sp;
  parts_reset(&sp);
  /* the update position: i<p> (clamped into the indices' extent) off the axis, r0 on it */
  tb pos, posH;
  tb_reset(&pos);
  tb_reset(&posH);
  for (int p = 0; p < r; p++) {
    if (p) {
      tb_printf(&pos, ", ");
      tb_printf(&posH, ", ");
    }
    const char *dp = lg_dim_s(k, ix->dims[p], D);
    if (p == ax) {
      tb_printf(&pos, "r0");
      tb_printf(&posH, "@");
    } else {
      tb_printf(&pos, "min(i%d, %s - 1)", p, dp);
      tb_printf(&posH, "min(i%d, %s - 1)", p, dp);
      tb_printf(&sp.cond, "i%d < %s && ", p, dp);
    }
  }
  tb I;
  tb_reset(&I);
  index_at(&I, in[1], ix->dtype, pos.s);
  wrap_index(&sp.cond, I.s, lg_dim_s(k, x->dims[ax], D));
  tb_printf(&sp.cond, " == i%d", ax);
  tb_printf(&sp.fr, " for r0 in 0..%s", lg_dim_s(k, ix->dims[ax], D));
  tb_printf(&sp.upd_r, "%s[%s]", in[2], pos.s);
  tb_printf(&sp.flat, "r0");
  tb_printf(&sp.upd_hit, "%s[%s]", in[2], posH.s);
  scatter_finish(k, n, in, out[0], &sp);
}

void lg_emit_scatter_nd(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out) {
  const tg_value *x = V(k, n->inputs[0]), *ix = V(k, n->inputs[1]);
  int r = x->ndim, q = ix->ndim, m = (int)ix->dims[q - 1].value;
  char D[48];
  scatter_parts sp;
  parts_reset(&sp);
  tb js;
  tb_reset(&js);
  for (int j = 0; j < q - 1; j++) tb_printf(&js, "r%d, ", j);
  if (m == 0) tb_printf(&sp.cond, "true");
  for (int t = 0; t < m; t++) {
    tb ax, I;
    tb_reset(&ax);
    tb_reset(&I);
    tb_printf(&ax, "%s%d", js.s, t);
    index_at(&I, in[1], ix->dtype, ax.s);
    if (t) tb_printf(&sp.cond, " && ");
    wrap_index(&sp.cond, I.s, lg_dim_s(k, x->dims[t], D));
    tb_printf(&sp.cond, " == i%d", t);
  }
  /* updates[j.., i<m>..]; the flat number of j and its inverse (row-major over the indices' leading dims) */
  tb_printf(&sp.upd_r, "%s[", in[2]);
  tb_printf(&sp.upd_hit, "%s[", in[2]);
  for (int j = 0; j < q - 1; j++) {
    const char *dj = lg_dim_s(k, ix->dims[j], D);
    tb_printf(&sp.fr, "%s r%d in 0..%s", j ? "," : " for", j, dj);
    tb_printf(&sp.upd_r, "%sr%d", j ? ", " : "", j);
    tb_printf(&sp.flat, "%sr%d", j ? " + " : "", j);
    char D2[48]; /* dj stays in D */
    for (int l = j + 1; l < q - 1; l++) tb_printf(&sp.flat, " * %s", lg_dim_s(k, ix->dims[l], D2));
    /* H // (product of the later dims) % D_j */
    tb_printf(&sp.upd_hit, "%s(@", j ? ", " : "");
    for (int l = j + 1; l < q - 1; l++) tb_printf(&sp.upd_hit, " // %s", lg_dim_s(k, ix->dims[l], D2));
    tb_printf(&sp.upd_hit, ") %% %s", dj);
  }
  if (q == 1) tb_printf(&sp.flat, "0");
  for (int a = m; a < r; a++) {
    bool first = q == 1 && a == m;
    tb_printf(&sp.upd_r, "%si%d", first ? "" : ", ", a);
    tb_printf(&sp.upd_hit, "%si%d", first ? "" : ", ", a);
  }
  tb_printf(&sp.upd_r, "]");
  tb_printf(&sp.upd_hit, "]");
  scatter_finish(k, n, in, out[0], &sp);
}
