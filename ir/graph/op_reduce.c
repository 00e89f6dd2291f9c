/* op_reduce.c — the reductions: ReduceMean, ReduceSum, Softmax,
 * LayerNormalization and RMSNormalization (one handler and one emitter:
 * RMS is LayerNorm without the mean and the bias). Each operator's import handler (shape inference,
 * canonical axes) and its legalisation emitter; their rows are in ops.c.
 * docs/GRAPH.md ("Adding an operator"). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "legalize_int.h"
#include "onnx_int.h"
#include "ops.h"

/* ---- import: shape and dtype inference, canonical form ---------------------- */

ts_status imp_softmax(imp *im, nctx *nc) {
  ts_status st = imp_unary(im, nc);
  if (st) return st;
  /* before 13 the default is 1 and the input is coerced to 2-D at axis
   * (normalised over all dims from axis on: the emitter reads the opset) */
  int64_t def = im->opset < 13 ? 1 : -1, ax = aint(nc, "axis", def);
  int r = IN(im, nc, 0)->ndim;
  if (!imp_norm_axis(&ax, r, false)) return imp_nerr(im, nc, TS_EINVAL, "axis %" PRId64 " is out of range for rank %d", aint(nc, "axis", def), r);
  return imp_set_int(im, nc, "axis", ax);
}

ts_status imp_layernorm(imp *im, nctx *nc) {
  ts_status st = imp_unary(im, nc);
  if (st) return st;
  const tg_value *x = IN(im, nc, 0);
  int64_t ax = aint(nc, "axis", -1);
  if (!imp_norm_axis(&ax, x->ndim, false)) return imp_nerr(im, nc, TS_EINVAL, "axis %" PRId64 " is out of range for rank %d", aint(nc, "axis", -1), x->ndim);
  /* Mean and InvStdDev (LayerNormalization's outputs 1 and 2): X's dims
   * before axis, ones after, in the stash type; the emitter computes them
   * in X's type, so they are taken where the two agree */
  bool stats = false;
  for (int k = 1; k < nc->nout; k++) stats |= nc->outname[k] != NULL;
  if (stats) {
    int64_t stash = aint(nc, "stash_type", 1);
    char b1[16];
    if (!(stash == 1 && x->dtype.code == IR_F32 && x->dtype.lanes == 1))
      return imp_nerr(im, nc, TS_EUNSUPPORTED, "outputs Mean/InvStdDev of %s X with stash_type %" PRId64 " (float32 X only)",
                      ir_dtype_str(x->dtype, b1, sizeof b1), stash);
    tg_dim sd[MAX_RANK];
    for (int i = 0; i < x->ndim; i++) sd[i] = i < ax ? x->dims[i] : DC(1);
    for (int k = 1; k < nc->nout; k++) set_out(nc, k, x->dtype, x->ndim, sd);
  }
  for (int i = 1; i < nc->nin; i++) {
    const tg_value *s = IN(im, nc, i);
    if (!s) continue;
    if (!ir_dtype_eq(s->dtype, x->dtype)) return imp_nerr(im, nc, TS_ETYPE, "input %d (%s) differs in type from X", i, s->name);
    /* scale/bias broadcast to X's normalised dims [axis:] */
    if (s->ndim > x->ndim - ax) return imp_nerr(im, nc, TS_ESHAPE, "input %d (%s) has rank %d; the normalised part has %" PRId64, i, s->name, s->ndim, x->ndim - ax);
    for (int j = 0; j < s->ndim; j++) {
      tg_dim xd = x->dims[x->ndim - s->ndim + j], sd = s->dims[j];
      if (!xd.sym && !sd.sym && sd.value != 1 && sd.value != xd.value)
        return imp_nerr(im, nc, TS_ESHAPE, "input %d (%s) dim %d is %" PRId64 ", X's is %" PRId64, i, s->name, j, sd.value, xd.value);
    }
  }
  if ((st = imp_set_int(im, nc, "axis", ax)) || (st = imp_set_float(im, nc, "epsilon", afloat(nc, "epsilon", 1e-5))) ||
      (st = imp_set_int(im, nc, "stash_type", aint(nc, "stash_type", 1))))
    return st;
  if (!stats) nc->nout = 1;
  return TS_OK;
}

ts_status imp_reduce(imp *im, nctx *nc) {
  ts_status st = imp_need_input(im, nc, 0, "data");
  if (st) return st;
  const tg_value *x = IN(im, nc, 0);
  int r = x->ndim;
  bool axes_input = (nc->op == TG_OP_REDUCE_SUM && im->opset >= 13) || im->opset >= 18;
  if (!axes_input && nc->nin > 1) return imp_nerr(im, nc, TS_EUNSUPPORTED, "the axes input needs opset %d (use the axes attribute)",
                    nc->op == TG_OP_REDUCE_SUM ? 13 : 18);
  int64_t buf[MAX_RANK];
  const int64_t *axes;
  int na;
  bool present = false;
  if (axes_input) {
    if ((st = imp_param_ints(im, nc, 1, "axes", &present, buf, MAX_RANK, &axes, &na))) return st;
  } else {
    axes = aints(nc, "axes", &na);
    present = A(nc, "axes") != NULL;
  }
  int64_t keep = aint(nc, "keepdims", 1), noop = aint(nc, "noop_with_empty_axes", 0);
  drop_inputs(nc, 1);
  if (na == 0 && noop) {
    /* reduces nothing: an Identity */
    nc->op = TG_OP_IDENTITY;
    nc->nattr = 0;
    same_as_input(im, nc, 0, 0);
    return TS_OK;
  }
  bool red[MAX_RANK] = {false};
  int64_t ax[MAX_RANK];
  int nax = 0;
  if (na == 0) {
    for (int i = 0; i < r; i++) red[i] = true;
  }
  for (int i = 0; i < na; i++) {
    int64_t a = axes[i];
    if (!imp_norm_axis(&a, r, false) || red[a]) return imp_nerr(im, nc, TS_EINVAL, "axes[%d] = %" PRId64 " is out of range or repeated", i, axes[i]);
    red[a] = true;
  }
  (void)present;
  tg_dim od[MAX_RANK];
  int o = 0;
  for (int i = 0; i < r; i++) {
    if (red[i]) {
      ax[nax++] = i;
      if (keep) od[o++] = DC(1);
    } else {
      od[o++] = x->dims[i];
    }
  }
  set_out(nc, 0, x->dtype, o, od);
  if ((st = imp_set_ints(im, nc, "axes", ax, nax)) || (st = imp_set_int(im, nc, "keepdims", keep != 0)) ||
      (st = imp_set_int(im, nc, "noop_with_empty_axes", 0)))
    return st;
  return TS_OK;
}

/* ---- legalisation: compute-DSL text ------------------------------------------ */

void lg_emit_softmax(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out) {
  const char *o = out[0];
  const tg_value *x = V(k, n->inputs[0]);
  int r = x->ndim;
  bool red[8] = {false};
  int64_t ax = tg_attr_int(n, "axis", k->g->opset && k->g->opset < 13 ? 1 : -1);
  int a = lg_axis(ax, r);
  if (a < 0 || a >= r) {
    lg_fail(k, TS_EINVAL, n, "axis %" PRId64 " out of range for rank %d", ax, r);
    return;
  }
  if (k->g->opset && k->g->opset < 13)
    for (int i = a; i < r; i++) red[i] = true;
  else red[a] = true;
  tg_dim kd[8];
  int nk = lg_kept_dims(x, red, kd);
  char mx[96], e[96], s[96];
  lg_tmpname(mx, sizeof mx, o, "max");
  lg_tmpname(e, sizeof e, o, "exp");
  lg_tmpname(s, sizeof s, o, "sum");
  lg_let_dims(k, mx, x->dtype, nk, kd);
  lg_let_dims(k, e, x->dtype, r, x->dims);
  lg_let_dims(k, s, x->dtype, nk, kd);
  lg_reduce_stmt(k, mx, "max=", in[0], x, red);
  tb b;
  tb_reset(&b);
  lg_lhs(&b, e, r);
  tb_printf(&b, " = exp(");
  lg_lhs(&b, in[0], r);
  tb_printf(&b, " - ");
  lg_kept_index(&b, mx, r, red);
  tb_printf(&b, ")");
  lg_stmt(k, &b);
  lg_reduce_stmt(k, s, "+=", e, x, red);
  tb_reset(&b);
  lg_lhs(&b, o, r);
  tb_printf(&b, " = ");
  lg_lhs(&b, e, r);
  tb_printf(&b, " / ");
  lg_kept_index(&b, s, r, red);
  lg_stmt(k, &b);
}

void lg_emit_layernorm(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out) {
  const tg_value *x = V(k, n->inputs[0]);
  int r = x->ndim;
  int64_t ax = tg_attr_int(n, "axis", -1);
  int a = lg_axis(ax, r);
  if (a < 0 || a >= r) {
    lg_fail(k, TS_EINVAL, n, "axis %" PRId64 " out of range for rank %d", ax, r);
    return;
  }
  bool red[8] = {false};
  for (int i = a; i < r; i++) red[i] = true;
  tg_dim kd[8];
  int nk = lg_kept_dims(x, red, kd);
  const char *o = out[0];
  char sm[96], mean[96], sq[96], rstd[96], cnt[64], eps[48];
  lg_tmpname(sm, sizeof sm, o, "sum");
  lg_tmpname(mean, sizeof mean, o, "mean");
  lg_tmpname(sq, sizeof sq, o, "sqsum");
  lg_tmpname(rstd, sizeof rstd, o, "rstd");
  bool rms = lg_node_op(n) == TG_OP_RMS_NORM;
  if (!rms) {
    lg_let_dims(k, sm, x->dtype, nk, kd);
    lg_let_dims(k, mean, x->dtype, nk, kd);
  }
  lg_let_dims(k, sq, x->dtype, nk, kd);
  lg_let_dims(k, rstd, x->dtype, nk, kd);
  tb c;
  tb_reset(&c);
  lg_red_count(k, &c, x, red, x->dtype);
  snprintf(cnt, sizeof cnt, "%s", c.s);
  flit(tg_attr_float(n, "epsilon", 1e-5), eps);
  tb b, xr, xk, mk;
  tb_reset(&xr);
  lg_red_index(&xr, in[0], r, red);
  tb_reset(&mk);
  lg_kept_index(&mk, mean, r, red);
  tb_reset(&b);
  if (!rms) { /* the mean first; RMSNormalization has none */
    lg_kept_index(&b, sm, r, red);
    tb_printf(&b, " += %s", xr.s);
    lg_red_for(k, &b, x, red);
    lg_stmt(k, &b);
    tb_reset(&b);
    lg_kept_index(&b, mean, r, red);
    tb_printf(&b, " = ");
    lg_kept_index(&b, sm, r, red);
    tb_printf(&b, " / %s", cnt);
    lg_stmt(k, &b);
    tb_reset(&b);
  }
  lg_kept_index(&b, sq, r, red);
  if (rms) tb_printf(&b, " += %s * %s", xr.s, xr.s);
  else tb_printf(&b, " += (%s - %s) * (%s - %s)", xr.s, mk.s, xr.s, mk.s);
  lg_red_for(k, &b, x, red);
  lg_stmt(k, &b);
  tb_reset(&b);
  lg_kept_index(&b, rstd, r, red);
  tb_printf(&b, " = rsqrt(");
  lg_kept_index(&b, sq, r, red);
  tb_printf(&b, " / %s + %s)", cnt, eps);
  lg_stmt(k, &b);
  tb_reset(&b);
  tb_reset(&xk);
  lg_lhs(&xk, in[0], r);
  lg_lhs(&b, o, r);
  if (rms) tb_printf(&b, " = %s * ", xk.s);
  else tb_printf(&b, " = (%s - %s) * ", xk.s, mk.s);
  lg_kept_index(&b, rstd, r, red);
  tb_printf(&b, " * ");
  lg_load_bcast(k, &b, in[1], n->inputs[1], r, x->dims);
  if (n->nin > 2 && n->inputs[2] >= 0 && in[2]) {
    tb_printf(&b, " + ");
    lg_load_bcast(k, &b, in[2], n->inputs[2], r, x->dims);
  }
  lg_stmt(k, &b);
  /* optional Mean / InvStdDev outputs: shape X.shape[:axis] + [1]*(r-axis) */
  for (int oi = 1; oi < n->nout && oi < 3; oi++) {
    if (!out[oi]) continue;
    tb_reset(&b);
    lg_lhs(&b, out[oi], r);
    tb_printf(&b, " = ");
    lg_kept_index(&b, oi == 1 ? mean : rstd, r, red);
    lg_stmt(k, &b);
  }
}

void lg_emit_reduce(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out) {
  tg_op op = lg_node_op(n);
  const char *o = out[0];
  const tg_value *x = V(k, n->inputs[0]), *y = OUTV(0);
  int r = x->ndim, c = 0;
  const int64_t *axes = tg_attr_ints(n, "axes", &c);
  bool keep = tg_attr_int(n, "keepdims", 1) != 0;
  bool red[8] = {false};
  if (!axes || c == 0) {
    if (tg_attr_int(n, "noop_with_empty_axes", 0)) {
      tb b;
      tb_reset(&b);
      lg_lhs(&b, o, r);
      tb_printf(&b, " = ");
      lg_lhs(&b, in[0], r);
      lg_stmt(k, &b);
      return;
    }
    for (int a = 0; a < r; a++) red[a] = true;
  } else {
    for (int i = 0; i < c; i++) {
      int a = lg_axis(axes[i], r);
      if (a < 0 || a >= r) {
        lg_fail(k, TS_EINVAL, n, "axis %" PRId64 " out of range for rank %d", axes[i], r);
        return;
      }
      red[a] = true;
    }
  }
  bool mean = op == TG_OP_REDUCE_MEAN;
  char sm[96];
  lg_tmpname(sm, sizeof sm, o, "sum");
  const char *dst = mean ? sm : o;
  /* The accumulator is indexed by output axes: with keepdims the reduced axes
   * stay (extent 1, index var unused), without they vanish; the source is
   * indexed with i<output axis> for kept axes. */
  tb b;
  tb_reset(&b);
  if (mean) lg_let(k, sm, n->outputs[0]);
  lg_lhs(&b, dst, y->ndim);
  tb_printf(&b, " += %s[", in[0]);
  int oa = 0, j = 0;
  for (int a = 0; a < r; a++) {
    if (a) tb_printf(&b, ", ");
    if (red[a]) {
      tb_printf(&b, "r%d", j++);
      if (keep) oa++;
    } else {
      tb_printf(&b, "i%d", oa++);
    }
  }
  tb_printf(&b, "]");
  lg_red_for(k, &b, x, red);
  lg_stmt(k, &b);
  if (!mean) return;
  tb_reset(&b);
  lg_lhs(&b, o, y->ndim);
  tb_printf(&b, " = ");
  lg_lhs(&b, sm, y->ndim);
  tb_printf(&b, " / ");
  lg_red_count(k, &b, x, red, y->dtype);
  lg_stmt(k, &b);
}
