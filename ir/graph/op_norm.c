/* op_norm.c — the normalisations beyond LayerNormalization and
 * BatchNormalization: LpNormalization, InstanceNormalization,
 * GroupNormalization (opset 18's per-group scale and bias and opset 21's
 * per-channel ones) and MeanVarianceNormalization. Each operator's import
 * handler and its legalisation emitter; their rows are in ops.c. Statistics
 * are two-pass (mean, then the mean squared deviation), as LayerNorm's.
 * docs/GRAPH.md ("Adding an operator"). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "legalize_int.h"
#include "onnx_int.h"
#include "ops.h"

/* ---- import: shape and dtype inference, canonical form ---------------------- */

ts_status imp_lpnorm(imp *im, nctx *nc) {
  ts_status st = imp_unary(im, nc);
  if (st) return st;
  int64_t ax = aint(nc, "axis", -1), p = aint(nc, "p", 2);
  int r = IN(im, nc, 0)->ndim;
  if (!imp_norm_axis(&ax, r, false))
    return imp_nerr(im, nc, TS_EINVAL, "axis %" PRId64 " is out of range for rank %d", aint(nc, "axis", -1), r);
  if (p != 1 && p != 2) return imp_nerr(im, nc, TS_EUNSUPPORTED, "p = %" PRId64 " (1 or 2)", p);
  if ((st = imp_set_int(im, nc, "axis", ax))) return st;
  return imp_set_int(im, nc, "p", p);
}

/* Input i (what) is a vector of n (a constant dim) elements of X's type. */
static ts_status need_vec(imp *im, nctx *nc, int i, const char *what, tg_dim n, const char *of) {
  const tg_value *x = IN(im, nc, 0), *v = IN(im, nc, i);
  if (!v) return imp_nerr(im, nc, TS_EINVAL, "input %d (%s) is required", i, what);
  if (!ir_dtype_eq(v->dtype, x->dtype)) return imp_nerr(im, nc, TS_ETYPE, "input %d (%s) differs in type from X", i, v->name);
  if (v->ndim != 1 || (!n.sym && !v->dims[0].sym && v->dims[0].value != n.value))
    return imp_nerr(im, nc, TS_ESHAPE, "input %d (%s, the %s) must be a vector of %s (%" PRId64 ")", i, v->name, what,
                    of, n.value);
  return TS_OK;
}

ts_status imp_instnorm(imp *im, nctx *nc) {
  ts_status st = imp_gap(im, nc); /* X is [N, C, spatial...] */
  if (st) return st;
  same_as_input(im, nc, 0, 0);
  const tg_value *x = IN(im, nc, 0);
  if ((st = need_vec(im, nc, 1, "scale", x->dims[1], "C")) || (st = need_vec(im, nc, 2, "B", x->dims[1], "C")))
    return st;
  return imp_set_float(im, nc, "epsilon", afloat(nc, "epsilon", 1e-5));
}

/* GroupNormalization: opset 18's scale and bias have num_groups elements,
 * opset 21's C; the emitter tells them apart by their length. */
ts_status imp_groupnorm(imp *im, nctx *nc) {
  ts_status st = imp_gap(im, nc); /* X is [N, C, spatial...] */
  if (st) return st;
  same_as_input(im, nc, 0, 0);
  const tg_value *x = IN(im, nc, 0);
  if (!A(nc, "num_groups")) return imp_nerr(im, nc, TS_EINVAL, "attribute num_groups is required");
  int64_t g = aint(nc, "num_groups", 0);
  tg_dim c = x->dims[1];
  if (c.sym) return imp_nerr(im, nc, TS_EUNSUPPORTED, "the channel dim of X (%s) is symbolic", x->name);
  if (g <= 0 || c.value % g)
    return imp_nerr(im, nc, TS_EINVAL, "num_groups %" PRId64 " does not divide the %" PRId64 " channels", g, c.value);
  bool per_group = im->opset < 21;
  tg_dim n = per_group ? DC(g) : c;
  const char *of = per_group ? "num_groups" : "C";
  if ((st = need_vec(im, nc, 1, "scale", n, of)) || (st = need_vec(im, nc, 2, "bias", n, of))) return st;
  int64_t stash = aint(nc, "stash_type", 1);
  if (stash != 1) return imp_nerr(im, nc, TS_EUNSUPPORTED, "stash_type %" PRId64 " (only 1, float32)", stash);
  if ((st = imp_set_float(im, nc, "epsilon", afloat(nc, "epsilon", 1e-5)))) return st;
  return imp_set_int(im, nc, "num_groups", g);
}

ts_status imp_mvn(imp *im, nctx *nc) {
  ts_status st = imp_unary(im, nc);
  if (st) return st;
  int r = IN(im, nc, 0)->ndim, na;
  static const int64_t def[3] = {0, 2, 3};
  const int64_t *axes = aints(nc, "axes", &na);
  if (!A(nc, "axes")) axes = def, na = 3;
  int64_t ax[MAX_RANK];
  bool seen[MAX_RANK] = {false};
  if (na > r) return imp_nerr(im, nc, TS_EINVAL, "%d axes for rank %d", na, r);
  for (int i = 0; i < na; i++) {
    ax[i] = axes[i];
    if (!imp_norm_axis(&ax[i], r, false) || seen[ax[i]])
      return imp_nerr(im, nc, TS_EINVAL, "axes[%d] = %" PRId64 " is out of range or repeated", i, axes[i]);
    seen[ax[i]] = true;
  }
  return imp_set_ints(im, nc, "axes", ax, na);
}

/* ---- legalisation: compute-DSL text ------------------------------------------ */

/* Mean and 1/(deviation) of src over a reduction: stats tensors "<o>_mean"
 * and "<o>_rstd" of dims sd, stored at idx ("[i0, i1]"); src the load
 * text, fors the reduction's for clause, cnt the element count. rstd is
 * rsqrt(var + eps), or with mvn 1 / (sqrt(var) + eps) (ONNX's MVN). */
static void norm_stats(lg_kernel *k, const char *o, ir_dtype dt, int nd, const tg_dim *sd, const char *idx,
                       const char *src, const char *fors, const char *cnt, double eps, bool mvn) {
  char sm[96], mean[96], sq[96], rstd[96], e[48];
  lg_tmpname(sm, sizeof sm, o, "sum");
  lg_tmpname(mean, sizeof mean, o, "mean");
  lg_tmpname(sq, sizeof sq, o, "sqsum");
  lg_tmpname(rstd, sizeof rstd, o, "rstd");
  lg_let_dims(k, sm, dt, nd, sd);
  lg_let_dims(k, mean, dt, nd, sd);
  lg_let_dims(k, sq, dt, nd, sd);
  lg_let_dims(k, rstd, dt, nd, sd);
  flit(eps, e);
  tb b;
  tb_reset(&b);
  tb_printf(&b, "%s%s += %s%s", sm, idx, src, fors);
  lg_stmt(k, &b);
  tb_reset(&b);
  tb_printf(&b, "%s%s = %s%s / %s", mean, idx, sm, idx, cnt);
  lg_stmt(k, &b);
  tb_reset(&b);
  tb_printf(&b, "%s%s += (%s - %s%s) * (%s - %s%s)%s", sq, idx, src, mean, idx, src, mean, idx, fors);
  lg_stmt(k, &b);
  tb_reset(&b);
  if (mvn) tb_printf(&b, "%s%s = 1.0 / (sqrt(%s%s / %s) + %s)", rstd, idx, sq, idx, cnt, e);
  else tb_printf(&b, "%s%s = rsqrt(%s%s / %s + %s)", rstd, idx, sq, idx, cnt, e);
  lg_stmt(k, &b);
}

/* Instance norm and MVN: statistics over the axes red[] of x; the output
 * (x - mean) * rstd, times scale[c] plus B[c] when given (inputs 1, 2). */
static void emit_norm_axes(lg_kernel *k, const tg_node *n, const char *const *in, const char *o, const bool *red,
                           double eps, bool mvn) {
  const tg_value *x = V(k, n->inputs[0]);
  int r = x->ndim;
  tg_dim kd[MAX_RANK];
  int nk = lg_kept_dims(x, red, kd);
  tb idx, src, fors, cnt, b;
  tb_reset(&idx);
  tb_reset(&src);
  tb_reset(&fors);
  tb_reset(&cnt);
  lg_kept_index(&idx, "", r, red);
  lg_red_index(&src, in[0], r, red);
  lg_red_for(k, &fors, x, red);
  lg_red_count(k, &cnt, x, red, x->dtype);
  norm_stats(k, o, x->dtype, nk, kd, idx.s, src.s, fors.s, cnt.s, eps, mvn);
  char mean[96], rstd[96];
  lg_tmpname(mean, sizeof mean, o, "mean");
  lg_tmpname(rstd, sizeof rstd, o, "rstd");
  tb_reset(&b);
  lg_lhs(&b, o, r);
  tb_printf(&b, " = (");
  lg_lhs(&b, in[0], r);
  tb_printf(&b, " - %s%s) * %s%s", mean, idx.s, rstd, idx.s);
  if (n->nin >= 3 && in[1] && in[2]) tb_printf(&b, " * %s[i1] + %s[i1]", in[1], in[2]);
  lg_stmt(k, &b);
}

void lg_emit_instnorm(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out) {
  const tg_value *x = V(k, n->inputs[0]);
  bool red[MAX_RANK] = {false};
  for (int a = 2; a < x->ndim; a++) red[a] = true;
  emit_norm_axes(k, n, in, out[0], red, tg_attr_float(n, "epsilon", 1e-5), false);
}

void lg_emit_mvn(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out) {
  const tg_value *x = V(k, n->inputs[0]);
  bool red[MAX_RANK] = {false};
  int c = 0;
  const int64_t *axes = tg_attr_ints(n, "axes", &c);
  for (int i = 0; i < c; i++) {
    int a = lg_axis(axes[i], x->ndim);
    if (a < 0 || a >= x->ndim) {
      lg_fail(k, TS_EINVAL, n, "axis %" PRId64 " out of range for rank %d", axes[i], x->ndim);
      return;
    }
    red[a] = true;
  }
  emit_norm_axes(k, n, in, out[0], red, 1e-9, true);
}

/* GroupNormalization: statistics per (n, group) over the group's channels
 * and the spatial axes, X read as X[i0, g * CG + r0, r1, ...]. */
void lg_emit_groupnorm(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out) {
  const char *o = out[0];
  const tg_value *x = V(k, n->inputs[0]), *s = V(k, n->inputs[1]);
  int r = x->ndim;
  int64_t g = tg_attr_int(n, "num_groups", 1), c = x->dims[1].value;
  if (x->dims[1].sym || g <= 0 || c % g) {
    lg_fail(k, TS_EINVAL, n, "num_groups %" PRId64 " does not divide the channels", g);
    return;
  }
  int64_t cg = c / g;
  bool per_channel = !s->dims[0].sym && s->dims[0].value == c;
  bool red[MAX_RANK] = {false};
  for (int a = 2; a < r; a++) red[a] = true;
  tb src, fors, cnt, b;
  tb_reset(&src);
  tb_reset(&fors);
  tb_reset(&cnt);
  char d[48];
  tb_printf(&src, "%s[i0, i1 * %" PRId64 " + rg", in[0], cg);
  for (int a = 2, j = 0; a < r; a++) tb_printf(&src, ", r%d", j++);
  tb_printf(&src, "]");
  tb_printf(&fors, " for rg in 0..%" PRId64, cg);
  for (int a = 2, j = 0; a < r; a++) tb_printf(&fors, ", r%d in 0..%s", j++, lg_dim_s(k, x->dims[a], d));
  tb_printf(&cnt, "(");
  lg_red_count(k, &cnt, x, red, x->dtype);
  tb_printf(&cnt, " * %s)", lit(x->dtype, (double)cg, d));
  tg_dim sd[2] = {x->dims[0], DC(g)};
  norm_stats(k, o, x->dtype, 2, sd, "[i0, i1]", src.s, fors.s, cnt.s, tg_attr_float(n, "epsilon", 1e-5), false);
  char mean[96], rstd[96], gi[64], si[64];
  lg_tmpname(mean, sizeof mean, o, "mean");
  lg_tmpname(rstd, sizeof rstd, o, "rstd");
  snprintf(gi, sizeof gi, "[i0, i1 // %" PRId64 "]", cg);
  if (per_channel) snprintf(si, sizeof si, "[i1]");
  else snprintf(si, sizeof si, "[i1 // %" PRId64 "]", cg);
  tb_reset(&b);
  lg_lhs(&b, o, r);
  tb_printf(&b, " = (");
  lg_lhs(&b, in[0], r);
  tb_printf(&b, " - %s%s) * %s%s * %s%s + %s%s", mean, gi, rstd, gi, in[1], si, in[2], si);
  lg_stmt(k, &b);
}
