/* op_tensor.c — the data-movement operators: Flatten, Reshape, Transpose,
 * Concat, Split, Slice, Gather, Pad, Squeeze, Unsqueeze, Shape, Constant.
 * Each operator's import handler (shape inference, known int contents for
 * shape arithmetic, canonical attributes) and its legalisation emitter;
 * their rows are in ops.c. docs/GRAPH.md ("Adding an operator"). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "legalize_int.h"
#include "onnx_int.h"
#include "ops.h"

/* ---- import: shape and dtype inference, canonical form ---------------------- */

ts_status imp_flatten(imp *im, nctx *nc) {
  ts_status st = imp_need_input(im, nc, 0, "input"); /* any dtype: data movement (bool masks too) */
  if (st) return st;
  const tg_value *x = IN(im, nc, 0);
  int64_t ax = aint(nc, "axis", 1);
  if (!imp_norm_axis(&ax, x->ndim, true)) return imp_nerr(im, nc, TS_EINVAL, "axis %" PRId64 " is out of range for rank %d", aint(nc, "axis", 1), x->ndim);
  tg_dim od[2];
  if (!imp_dims_product(im, x->dims, (int)ax, &od[0]) || !imp_dims_product(im, x->dims + ax, x->ndim - (int)ax, &od[1]))
    return imp_nerr(im, nc, TS_EUNSUPPORTED, "flattening %s at axis %" PRId64 " overflows or multiplies more than %d symbols", x->name, ax, TG_MONO_MAX);
  set_out(nc, 0, x->dtype, 2, od);
  return imp_set_int(im, nc, "axis", ax);
}

static bool dim_is_zero(tg_dim d) { return !d.sym && d.value == 0; }

/* Reshape target with 0 (copy) and -1 (infer) resolved against x's dims. */
ts_status imp_reshape(imp *im, nctx *nc) {
  ts_status st = imp_need_input(im, nc, 0, "data");
  if (st) return st;
  const tg_value *x = IN(im, nc, 0);
  const known *k;
  known legacy;
  if (im->opset < 5) { /* the shape is an attribute */
    int n;
    const int64_t *v = aints(nc, "shape", &n);
    if (!A(nc, "shape")) return imp_nerr(im, nc, TS_EINVAL, "before opset 5 the attribute shape is required");
    if (nc->nin > 1) return imp_nerr(im, nc, TS_EINVAL, "%d inputs; before opset 5 Reshape takes one (shape is an attribute)", nc->nin);
    if (n > MAX_RANK) return imp_nerr(im, nc, TS_EUNSUPPORTED, "target rank %d above %d", n, MAX_RANK);
    legacy.n = n;
    legacy.d = TS_ANEWN(im->a, tg_dim, n ? n : 1);
    if (!legacy.d) return imp_oom(im);
    for (int i = 0; i < n; i++) legacy.d[i] = DC(v[i]);
    drop_attr(nc, "shape");
    k = &legacy;
  } else {
    if ((st = imp_need_input(im, nc, 1, "shape"))) return st;
    const tg_value *s = IN(im, nc, 1);
    k = kv_get(im, nc->in[1]);
    if (!k) return imp_nerr(im, nc, TS_EUNSUPPORTED, "the shape input (%s) must be a constant or computable at import", s->name);
  }
  if (k->n > MAX_RANK) return imp_nerr(im, nc, TS_EUNSUPPORTED, "target rank %d above %d", k->n, MAX_RANK);
  int64_t allowzero = aint(nc, "allowzero", 0);
  tg_dim od[MAX_RANK];
  int infer = -1;
  bool has_sym = false;
  for (int i = 0; i < k->n; i++) {
    tg_dim t = k->d[i];
    if (t.sym) { od[i] = t; has_sym = true; continue; }
    if (t.value == 0 && !allowzero) {
      if (i >= x->ndim) return imp_nerr(im, nc, TS_ESHAPE, "shape[%d] = 0 copies a dim %s does not have", i, x->name);
      od[i] = x->dims[i];
    } else if (t.value == -1) {
      if (infer >= 0) return imp_nerr(im, nc, TS_EINVAL, "shape has more than one -1");
      infer = i;
    } else if (t.value < 0) {
      return imp_nerr(im, nc, TS_EINVAL, "shape[%d] = %" PRId64, i, t.value);
    } else {
      od[i] = t;
    }
  }
  /* element counts as monomials (dim.c): the -1 is their exact quotient */
  tg_dim xn, on = DC(1);
  char b1[256], b2[256];
  imp_dims_str(b1, sizeof b1, x->ndim, x->dims);
  if (!imp_dims_product(im, x->dims, x->ndim, &xn)) return imp_nerr(im, nc, TS_ESHAPE, "the size of %s (%s) overflows", x->name, b1);
  for (int i = 0; i < k->n; i++)
    if (i != infer && (!tg_dim_mul(im->a, on, od[i], &on) || (!on.sym && on.value > MAX_ELEMS)))
      return imp_nerr(im, nc, TS_ESHAPE, "the target shape's size is too large");
  if (infer >= 0) {
    if (dim_is_zero(on) || !tg_dim_div(im->a, xn, on, &od[infer]))
      return imp_nerr(im, nc, TS_EUNSUPPORTED, "cannot infer the -1 of the target shape from %s (%s)", x->name, b1);
  } else if (!tg_dim_eq(xn, on)) {
    imp_dims_str(b2, sizeof b2, k->n, od);
    return imp_nerr(im, nc, TS_ESHAPE, "%s (%s) cannot be reshaped to %s", x->name, b1, b2);
  }
  if (!has_sym) {
    int64_t raw[MAX_RANK];
    for (int i = 0; i < k->n; i++) raw[i] = k->d[i].value;
    if ((st = imp_set_ints(im, nc, "shape", raw, k->n))) return st;
    drop_inputs(nc, 1);
  }
  if ((st = imp_set_int(im, nc, "allowzero", allowzero))) return st;
  set_out(nc, 0, x->dtype, k->n, od);
  const known *xk = kv_get(im, nc->in[0]);
  if (xk) nc->okv = *xk;
  return TS_OK;
}

/* Known contents of a data movement: output element (j_0, .., j_r-1) of
 * shape od reads x at index start[a] + j_b * step[a] on each axis a, where b
 * = a, or the output axis that perm (output axis -> input axis) maps to a.
 * Sets nc->okv when x's contents are known, every dim is a constant and
 * the result is small; otherwise leaves it unset (the node runs). */
static ts_status known_gather(imp *im, nctx *nc, const tg_value *x, int r, const tg_dim *od, const int64_t *start,
                              const int64_t *step, const int64_t *perm) {
  const known *k = kv_get(im, nc->in[0]);
  if (!k || r > MAX_RANK) return TS_OK;
  int64_t n = 1, xs[MAX_RANK] = {0};
  for (int a = r - 1; a >= 0; a--) {
    if (x->dims[a].sym || od[a].sym) return TS_OK;
    xs[a] = a == r - 1 ? 1 : xs[a + 1] * x->dims[a + 1].value;
  }
  for (int a = 0; a < r; a++) n *= od[a].value;
  if (n > MAX_KNOWN || (r ? xs[0] * x->dims[0].value : 1) != k->n) return TS_OK;
  tg_dim *d = TS_ANEWN(im->a, tg_dim, n ? n : 1);
  if (!d) return imp_oom(im);
  for (int64_t j = 0; j < n; j++) {
    int64_t rest = j, src = 0;
    for (int b = r - 1; b >= 0; b--) {
      int64_t jb = rest % od[b].value, a = perm ? perm[b] : b;
      rest /= od[b].value;
      src += (start[a] + jb * step[a]) * xs[a];
    }
    d[j] = k->d[src];
  }
  nc->okv = (known){(int)n, d};
  return TS_OK;
}

ts_status imp_transpose(imp *im, nctx *nc) {
  ts_status st = imp_unary(im, nc);
  if (st) return st;
  const tg_value *x = IN(im, nc, 0);
  int n;
  const int64_t *p = aints(nc, "perm", &n);
  int64_t perm[MAX_RANK];
  if (x->ndim > MAX_RANK) return imp_nerr(im, nc, TS_EUNSUPPORTED, "rank above %d", MAX_RANK);
  if (p && n != x->ndim) return imp_nerr(im, nc, TS_EINVAL, "perm has %d entries for rank %d", n, x->ndim);
  bool seen[MAX_RANK] = {false};
  tg_dim od[MAX_RANK];
  for (int i = 0; i < x->ndim; i++) {
    perm[i] = p ? p[i] : x->ndim - 1 - i;
    if (perm[i] < 0 || perm[i] >= x->ndim || seen[perm[i]]) return imp_nerr(im, nc, TS_EINVAL, "perm is not a permutation of 0..%d", x->ndim - 1);
    seen[perm[i]] = true;
    od[i] = x->dims[perm[i]];
  }
  set_out(nc, 0, x->dtype, x->ndim, od);
  int64_t zero[MAX_RANK] = {0}, one[MAX_RANK];
  for (int i = 0; i < x->ndim; i++) one[i] = 1;
  if ((st = known_gather(im, nc, x, x->ndim, od, zero, one, perm))) return st;
  return imp_set_ints(im, nc, "perm", perm, x->ndim);
}

ts_status imp_concat(imp *im, nctx *nc) {
  const tg_value *x = IN(im, nc, 0);
  if (!x) return imp_nerr(im, nc, TS_EINVAL, "input 0 is required");
  if (!A(nc, "axis") && im->opset >= 4) return imp_nerr(im, nc, TS_EINVAL, "attribute axis is required");
  int64_t ax = aint(nc, "axis", 1); /* before opset 4 it defaulted to 1 */
  if (!imp_norm_axis(&ax, x->ndim, false)) return imp_nerr(im, nc, TS_EINVAL, "axis %" PRId64 " is out of range for rank %d", aint(nc, "axis", 1), x->ndim);
  tg_dim od[MAX_RANK];
  for (int i = 0; i < x->ndim; i++) od[i] = x->dims[i];
  bool all_known = true;
  int kn = 0;
  for (int i = 0; i < nc->nin; i++) {
    const tg_value *v = IN(im, nc, i);
    if (!v) return imp_nerr(im, nc, TS_EINVAL, "input %d is omitted", i);
    if (!ir_dtype_eq(v->dtype, x->dtype)) return imp_nerr(im, nc, TS_ETYPE, "input %d (%s) differs in type from input 0", i, v->name);
    if (v->ndim != x->ndim) return imp_nerr(im, nc, TS_ESHAPE, "input %d (%s) has rank %d, input 0 has %d", i, v->name, v->ndim, x->ndim);
    for (int j = 0; j < x->ndim; j++) {
      if (j == ax) continue;
      if (!tg_dim_eq(v->dims[j], od[j]) && !od[j].sym && !v->dims[j].sym)
        return imp_nerr(im, nc, TS_ESHAPE, "input %d (%s) dim %d is %" PRId64 ", input 0's is %" PRId64, i, v->name, j, v->dims[j].value, od[j].value);
      if (od[j].sym && !v->dims[j].sym) od[j] = v->dims[j];
    }
    if (i > 0) {
      if (od[ax].sym || v->dims[ax].sym)
        return imp_nerr(im, nc, TS_EUNSUPPORTED, "concatenating along a symbolic dim (input %d, %s)", i, v->name);
      od[ax].value += v->dims[ax].value;
    }
    const known *k = kv_get(im, nc->in[i]);
    if (!k) all_known = false;
    else kn += k->n;
  }
  set_out(nc, 0, x->dtype, x->ndim, od);
  if (all_known && x->ndim == 1 && kn <= MAX_KNOWN) {
    tg_dim *d = TS_ANEWN(im->a, tg_dim, kn ? kn : 1);
    if (!d) return imp_oom(im);
    int o = 0;
    for (int i = 0; i < nc->nin; i++) {
      const known *k = kv_get(im, nc->in[i]);
      for (int j = 0; j < k->n; j++) d[o++] = k->d[j];
    }
    nc->okv = (known){kn, d};
  }
  return imp_set_int(im, nc, "axis", ax);
}

ts_status imp_split(imp *im, nctx *nc) {
  ts_status st = imp_need_input(im, nc, 0, "input");
  if (st) return st;
  const tg_value *x = IN(im, nc, 0);
  int64_t ax = aint(nc, "axis", 0);
  if (!imp_norm_axis(&ax, x->ndim, false)) return imp_nerr(im, nc, TS_EINVAL, "axis %" PRId64 " is out of range for rank %d", aint(nc, "axis", 0), x->ndim);
  if (x->dims[ax].sym) return imp_nerr(im, nc, TS_EUNSUPPORTED, "splitting along symbolic dim %s", x->dims[ax].sym);
  int64_t dim = x->dims[ax].value;
  int64_t buf[MAX_IO];
  const int64_t *sv;
  int n;
  bool present;
  if ((st = imp_param_legacy(im, nc, 1, "split", 13, &present, buf, MAX_IO, &sv, &n))) return st;
  int64_t sizes[MAX_IO];
  int nout = nc->nout;
  if (present) {
    if (A(nc, "num_outputs")) return imp_nerr(im, nc, TS_EINVAL, "both the split input and num_outputs are given");
    if (n != nout) return imp_nerr(im, nc, TS_EINVAL, "split has %d sizes for %d outputs", n, nout);
    int64_t sum = 0;
    for (int i = 0; i < n; i++) {
      if (sv[i] < 0) return imp_nerr(im, nc, TS_EINVAL, "split[%d] = %" PRId64, i, sv[i]);
      if (sv[i] > MAX_ELEMS) return imp_nerr(im, nc, TS_EINVAL, "split[%d] = %" PRId64, i, sv[i]);
      sizes[i] = sv[i];
      sum += sv[i];
    }
    if (sum != dim) return imp_nerr(im, nc, TS_ESHAPE, "split sizes add up to %" PRId64 ", dim %" PRId64 " is %" PRId64, sum, ax, dim);
  } else {
    int64_t parts = A(nc, "num_outputs") ? aint(nc, "num_outputs", 0) : nout;
    if (im->opset >= 18 && !A(nc, "num_outputs")) return imp_nerr(im, nc, TS_EINVAL, "neither split nor num_outputs is given (required at opset 18+)");
    if (parts != nout) return imp_nerr(im, nc, TS_EINVAL, "num_outputs %" PRId64 " but %d outputs", parts, nout);
    if (parts < 1) return imp_nerr(im, nc, TS_EINVAL, "num_outputs %" PRId64, parts);
    if (im->opset < 18 && dim % parts)
      return imp_nerr(im, nc, TS_ESHAPE, "dim %" PRId64 " (%" PRId64 ") does not split evenly into %" PRId64, ax, dim, parts);
    int64_t chunk = (dim + parts - 1) / parts;
    for (int i = 0; i < nout; i++) {
      int64_t s = dim - chunk * i;
      sizes[i] = s < 0 ? 0 : s < chunk ? s : chunk;
    }
  }
  for (int i = 0; i < nout; i++) {
    set_out(nc, i, x->dtype, x->ndim, x->dims);
    nc->odims[i][ax] = DC(sizes[i]);
  }
  drop_inputs(nc, 1);
  if ((st = imp_set_int(im, nc, "axis", ax)) || (st = imp_set_ints(im, nc, "split", sizes, nout))) return st;
  tg_attr *no = A(nc, "num_outputs");
  if (no) *no = nc->attr[--nc->nattr];
  return TS_OK;
}

ts_status imp_slice(imp *im, nctx *nc) {
  ts_status st = imp_need_input(im, nc, 0, "data");
  if (st) return st;
  const tg_value *x = IN(im, nc, 0);
  int r = x->ndim;
  int64_t b0[MAX_RANK], b1[MAX_RANK], b2[MAX_RANK], b3[MAX_RANK];
  const int64_t *starts, *ends, *axes, *steps;
  int ns, ne, na, nst;
  bool p0, p1, p2, p3;
  /* ends known at import but symbolic (x[:, 0:seq] with seq = Shape(y)[1]) */
  const char *esym[MAX_RANK] = {NULL};
  const known *ke = nc->nin > 2 ? kv_get(im, nc->in[2]) : NULL;
  bool sym_ends = false;
  for (int i = 0; ke && i < ke->n && ke->n <= MAX_RANK; i++) sym_ends |= ke->d[i].sym != NULL;
  if (sym_ends) {
    for (int i = 0; i < ke->n; i++) {
      esym[i] = ke->d[i].sym;
      b1[i] = ke->d[i].sym ? INT64_MAX : ke->d[i].value;
    }
    p1 = true;
    ends = b1;
    ne = ke->n;
  }
  if ((st = imp_param_legacy(im, nc, 1, "starts", 10, &p0, b0, MAX_RANK, &starts, &ns)) ||
      (!sym_ends && (st = imp_param_legacy(im, nc, 2, "ends", 10, &p1, b1, MAX_RANK, &ends, &ne))) ||
      (st = imp_param_legacy(im, nc, 3, "axes", 10, &p2, b2, MAX_RANK, &axes, &na)) ||
      (st = imp_param_legacy(im, nc, 4, "steps", 10, &p3, b3, MAX_RANK, &steps, &nst)))
    return st;
  if (!p0 || !p1) return imp_nerr(im, nc, TS_EINVAL, "starts and ends are required");
  if (ns != ne || (p2 && na != ns) || (p3 && nst != ns))
    return imp_nerr(im, nc, TS_EINVAL, "starts, ends, axes and steps differ in length");
  tg_dim od[MAX_RANK];
  for (int i = 0; i < r; i++) od[i] = x->dims[i];
  int64_t S[MAX_RANK], E[MAX_RANK], AX[MAX_RANK], ST[MAX_RANK];
  bool seen[MAX_RANK] = {false};
  for (int i = 0; i < ns; i++) {
    int64_t a = p2 ? axes[i] : i;
    if (!imp_norm_axis(&a, r, false) || seen[a]) return imp_nerr(im, nc, TS_EINVAL, "axes[%d] is out of range or repeated", i);
    seen[a] = true;
    int64_t step = p3 ? steps[i] : 1;
    /* no dim exceeds MAX_ELEMS: a larger step means the same, and cannot overflow */
    if (step > MAX_ELEMS) step = MAX_ELEMS;
    if (step < -MAX_ELEMS) step = -MAX_ELEMS;
    if (step == 0) return imp_nerr(im, nc, TS_EINVAL, "steps[%d] is 0", i);
    int64_t s = starts[i], e = ends[i];
    AX[i] = a;
    ST[i] = step;
    if (esym[i]) {
      /* [0, sym) of a constant dim (sym assumed within it) or the whole symbolic dim */
      if (s < 0 && !x->dims[a].sym) s += x->dims[a].value;
      bool whole = x->dims[a].sym && !strcmp(x->dims[a].sym, esym[i]);
      if (step != 1 || s != 0 || (x->dims[a].sym && !whole))
        return imp_nerr(im, nc, TS_EUNSUPPORTED, "a symbolic end (%s) on axis %" PRId64 " with start %" PRId64
                        " and step %" PRId64 " (only [0, %s) of a constant dim or the whole dim)", esym[i], a,
                        starts[i], step, esym[i]);
      S[i] = 0;
      E[i] = x->dims[a].sym ? INT64_MAX : x->dims[a].value;
      od[a] = (tg_dim){-1, esym[i]};
      continue;
    }
    if (x->dims[a].sym) {
      /* a whole symbolic dim is fine; anything else has no symbolic size */
      if (step == 1 && s == 0 && e >= INT32_MAX) {
        S[i] = s;
        E[i] = e;
        continue;
      }
      return imp_nerr(im, nc, TS_EUNSUPPORTED, "slicing symbolic dim %s other than whole", x->dims[a].sym);
    }
    int64_t dim = x->dims[a].value;
    if (s < 0) s += dim;
    if (e < 0) e += dim;
    if (step > 0) {
      s = s < 0 ? 0 : s > dim ? dim : s;
      e = e < 0 ? 0 : e > dim ? dim : e;
    } else {
      s = s < 0 ? -1 : s > dim - 1 ? dim - 1 : s;
      e = e < -1 ? -1 : e > dim - 1 ? dim - 1 : e;
    }
    int64_t len = step > 0 ? (e - s + step - 1) / step : (s - e + (-step) - 1) / (-step);
    if (len < 0) len = 0;
    S[i] = s;
    E[i] = e;
    od[a] = DC(len);
  }
  set_out(nc, 0, x->dtype, r, od);
  /* known contents slice along: output element j reads x at start + j * step per axis */
  int64_t ast[MAX_RANK], astep[MAX_RANK];
  for (int a = 0; a < r; a++) ast[a] = 0, astep[a] = 1;
  for (int i = 0; i < ns; i++) ast[AX[i]] = S[i], astep[AX[i]] = ST[i];
  if ((st = known_gather(im, nc, x, r, od, ast, astep, NULL))) return st;
  drop_inputs(nc, 1);
  if ((st = imp_set_ints(im, nc, "starts", S, ns)) || (st = imp_set_ints(im, nc, "ends", E, ns)) ||
      (st = imp_set_ints(im, nc, "axes", AX, ns)) || (st = imp_set_ints(im, nc, "steps", ST, ns)))
    return st;
  return TS_OK;
}

ts_status imp_gather(imp *im, nctx *nc) {
  const tg_value *x = IN(im, nc, 0), *ix = IN(im, nc, 1);
  if (!x || !ix) return imp_nerr(im, nc, TS_EINVAL, "inputs data and indices are required");
  if (ix->dtype.code != IR_I64 && ix->dtype.code != IR_I32) return imp_nerr(im, nc, TS_ETYPE, "indices (%s) must be int32 or int64", ix->name);
  int64_t ax = aint(nc, "axis", 0);
  if (!imp_norm_axis(&ax, x->ndim, false)) return imp_nerr(im, nc, TS_EINVAL, "axis %" PRId64 " is out of range for rank %d", aint(nc, "axis", 0), x->ndim);
  int nd = x->ndim - 1 + ix->ndim;
  if (nd > MAX_RANK) return imp_nerr(im, nc, TS_EUNSUPPORTED, "rank above %d", MAX_RANK);
  tg_dim od[MAX_RANK];
  int o = 0;
  for (int i = 0; i < ax; i++) od[o++] = x->dims[i];
  for (int i = 0; i < ix->ndim; i++) od[o++] = ix->dims[i];
  for (int i = (int)ax + 1; i < x->ndim; i++) od[o++] = x->dims[i];
  set_out(nc, 0, x->dtype, nd, od);
  /* Gather of known contents with constant indices (shape arithmetic) */
  const known *k = kv_get(im, nc->in[0]);
  int64_t ib[64];
  const int64_t *iv;
  int ni;
  if (k && x->ndim == 1 && ix->ndim <= 1 && imp_kv_ints(im, nc->in[1], &iv, &ni, ib, 64)) {
    tg_dim *d = TS_ANEWN(im->a, tg_dim, ni ? ni : 1);
    if (!d) return imp_oom(im);
    for (int j = 0; j < ni; j++) {
      int64_t t = iv[j] < 0 ? iv[j] + k->n : iv[j];
      if (t < 0 || t >= k->n) return imp_nerr(im, nc, TS_EBOUNDS, "index %" PRId64 " is out of range for %d elements", iv[j], k->n);
      d[j] = k->d[t];
    }
    nc->okv = (known){ni, d};
  }
  return imp_set_int(im, nc, "axis", ax);
}

ts_status imp_pad(imp *im, nctx *nc) {
  ts_status st = imp_need_input(im, nc, 0, "data");
  if (st) return st;
  const tg_value *x = IN(im, nc, 0);
  int r = x->ndim;
  const char *mode = astr(nc, "mode", "constant");
  if (strcmp(mode, "constant") && strcmp(mode, "reflect") && strcmp(mode, "edge") &&
      (strcmp(mode, "wrap") || im->opset < 19))
    return imp_nerr(im, nc, TS_EUNSUPPORTED, "mode='%s'%s", mode, !strcmp(mode, "wrap") ? " (wrap needs opset 19)" : "");
  if (nc->nin > 3 && im->opset < 18) return imp_nerr(im, nc, TS_EUNSUPPORTED, "the axes input needs opset 18");
  int64_t pb[2 * MAX_RANK], ab[MAX_RANK];
  const int64_t *pads, *axes;
  int np, na;
  bool pp, pa;
  if ((st = imp_param_legacy(im, nc, 1, "pads", 11, &pp, pb, 2 * MAX_RANK, &pads, &np)) ||
      (st = imp_param_ints(im, nc, 3, "axes", &pa, ab, MAX_RANK, &axes, &na)))
    return st;
  if (!pp) return imp_nerr(im, nc, TS_EINVAL, "input 1 (pads) is required");
  int64_t ax[MAX_RANK];
  int nax = pa ? na : r;
  for (int i = 0; i < nax; i++) {
    ax[i] = pa ? axes[i] : i;
    if (!imp_norm_axis(&ax[i], r, false)) return imp_nerr(im, nc, TS_EINVAL, "axes[%d] is out of range", i);
  }
  if (np != 2 * nax) return imp_nerr(im, nc, TS_EINVAL, "pads has %d entries for %d axes", np, nax);
  int64_t full[2 * MAX_RANK] = {0};
  for (int i = 0; i < nax; i++) {
    if (pads[i] < -MAX_ELEMS || pads[i] > MAX_ELEMS || pads[nax + i] < -MAX_ELEMS || pads[nax + i] > MAX_ELEMS)
      return imp_nerr(im, nc, TS_EINVAL, "pads for axis %" PRId64 " are out of range", ax[i]);
    full[ax[i]] = pads[i];
    full[r + ax[i]] = pads[nax + i];
  }
  double value = im->opset < 11 ? afloat(nc, "value", 0) : 0;
  if (nc->nin > 2 && nc->in[2] >= 0 && !imp_const_scalar(im, nc->in[2], &value))
    return imp_nerr(im, nc, TS_EUNSUPPORTED, "input 2 (constant_value) must be a constant scalar");
  tg_dim od[MAX_RANK];
  for (int i = 0; i < r; i++) {
    od[i] = x->dims[i];
    if (!full[i] && !full[r + i]) continue;
    if (x->dims[i].sym) return imp_nerr(im, nc, TS_EUNSUPPORTED, "padding symbolic dim %s", x->dims[i].sym);
    int64_t o = x->dims[i].value + full[i] + full[r + i];
    if (o < 0) return imp_nerr(im, nc, TS_ESHAPE, "dim %d would be %" PRId64, i, o);
    od[i] = DC(o);
  }
  set_out(nc, 0, x->dtype, r, od);
  drop_inputs(nc, 1);
  if ((st = imp_set_ints(im, nc, "pads", full, 2 * r)) || (st = imp_set_str(im, nc, "mode", mode)) ||
      (st = imp_set_float(im, nc, "value", value)))
    return st;
  return TS_OK;
}

/* Squeeze/Unsqueeze: output 0 gets dims od (rank r), the input's known
 * value passes through, and the axes input becomes the "axes" attribute. */
static ts_status axes_op_out(imp *im, nctx *nc, ir_dtype dt, int r, const tg_dim *od, const int64_t *ax, int nax) {
  set_out(nc, 0, dt, r, od);
  const known *k = kv_get(im, nc->in[0]);
  if (k) nc->okv = *k;
  drop_inputs(nc, 1);
  return imp_set_ints(im, nc, "axes", ax, nax);
}

ts_status imp_squeeze(imp *im, nctx *nc) {
  ts_status st = imp_need_input(im, nc, 0, "data");
  if (st) return st;
  const tg_value *x = IN(im, nc, 0);
  int r = x->ndim;
  int64_t buf[MAX_RANK];
  const int64_t *axes;
  int na;
  bool present;
  if ((st = imp_param_legacy(im, nc, 1, "axes", 13, &present, buf, MAX_RANK, &axes, &na))) return st;
  bool sq[MAX_RANK] = {false};
  if (!present) {
    for (int i = 0; i < r; i++) {
      if (x->dims[i].sym) return imp_nerr(im, nc, TS_EUNSUPPORTED, "squeeze without axes over symbolic dim %s", x->dims[i].sym);
      sq[i] = x->dims[i].value == 1;
    }
  }
  for (int i = 0; i < na; i++) {
    int64_t a = axes[i];
    if (!imp_norm_axis(&a, r, false) || sq[a]) return imp_nerr(im, nc, TS_EINVAL, "axes[%d] = %" PRId64 " is out of range or repeated", i, axes[i]);
    if (x->dims[a].sym || x->dims[a].value != 1)
      return imp_nerr(im, nc, TS_ESHAPE, "dim %" PRId64 " of %s is not 1", a, x->name);
    sq[a] = true;
  }
  tg_dim od[MAX_RANK];
  int64_t ax[MAX_RANK];
  int o = 0, nax = 0;
  for (int i = 0; i < r; i++) {
    if (sq[i]) ax[nax++] = i;
    else od[o++] = x->dims[i];
  }
  return axes_op_out(im, nc, x->dtype, o, od, ax, nax);
}

ts_status imp_unsqueeze(imp *im, nctx *nc) {
  ts_status st = imp_need_input(im, nc, 0, "data");
  if (st) return st;
  const tg_value *x = IN(im, nc, 0);
  int64_t buf[MAX_RANK];
  const int64_t *axes;
  int na;
  bool present;
  if ((st = imp_param_legacy(im, nc, 1, "axes", 13, &present, buf, MAX_RANK, &axes, &na))) return st;
  if (!present) return imp_nerr(im, nc, TS_EINVAL, "input 1 (axes) is required");
  int r = x->ndim + na;
  if (r > MAX_RANK) return imp_nerr(im, nc, TS_EUNSUPPORTED, "rank above %d", MAX_RANK);
  bool ins[MAX_RANK] = {false};
  for (int i = 0; i < na; i++) {
    int64_t a = axes[i];
    if (!imp_norm_axis(&a, r, false) || ins[a]) return imp_nerr(im, nc, TS_EINVAL, "axes[%d] = %" PRId64 " is out of range or repeated", i, axes[i]);
    ins[a] = true;
  }
  tg_dim od[MAX_RANK];
  int64_t ax[MAX_RANK];
  int j = 0, nax = 0;
  for (int i = 0; i < r; i++) {
    if (ins[i]) {
      od[i] = DC(1);
      ax[nax++] = i;
    } else {
      od[i] = x->dims[j++];
    }
  }
  return axes_op_out(im, nc, x->dtype, r, od, ax, nax);
}

ts_status imp_shape(imp *im, nctx *nc) {
  ts_status st = imp_need_input(im, nc, 0, "data");
  if (st) return st;
  const tg_value *x = IN(im, nc, 0);
  int r = x->ndim;
  int64_t s = aint(nc, "start", 0), e = aint(nc, "end", r);
  tg_shape_range(r, &s, &e);
  int64_t n = e > s ? e - s : 0;
  tg_dim od[1] = {DC(n)};
  set_out(nc, 0, ir_dt(IR_I64), 1, od);
  tg_dim *d = TS_ANEWN(im->a, tg_dim, n ? n : 1);
  if (!d) return imp_oom(im);
  for (int64_t i = 0; i < n; i++) d[i] = x->dims[s + i];
  nc->okv = (known){(int)n, d};
  if ((st = imp_set_int(im, nc, "start", s)) || (st = imp_set_int(im, nc, "end", e))) return st;
  return TS_OK;
}

ts_status imp_constant(imp *im, nctx *nc) {
  if (nc->nattr != 1) return imp_nerr(im, nc, TS_EINVAL, "exactly one value attribute is required, %d given", nc->nattr);
  tg_attr *a = &nc->attr[0];
  const char *on = nc->outname[0];
  char what[512];
  snprintf(what, sizeof what, "node %s (Constant, opset %d)", nc->name, im->opset);
  if (!on) return imp_nerr(im, nc, TS_EINVAL, "the output has no name");
  ts_status st;
  if (!strcmp(a->name, "value")) {
    const Onnx__AttributeProto *ap = nc->np->attribute[a->i];
    if (!ap->t) return imp_nerr(im, nc, TS_EPARSE, "value holds no tensor");
    if ((st = imp_import_tensor(im, ap->t, on, what, &nc->const_value))) return st;
  } else {
    /* value_float(s) / value_int(s): build the tensor here */
    bool isf = a->kind == TG_A_FLOAT || a->kind == TG_A_FLOATS;
    bool scalar = a->kind == TG_A_FLOAT || a->kind == TG_A_INT;
    int n = scalar ? 1 : a->n;
    size_t eb = isf ? 4 : 8;
    void *buf = ts_malloc((size_t)(n ? n : 1) * eb);
    if (!buf) return imp_oom(im);
    for (int i = 0; i < n; i++) {
      if (isf) { float f = (float)(scalar ? a->f : a->floats[i]); memcpy((char *)buf + i * 4, &f, 4); }
      else { int64_t v = scalar ? a->i : a->ints[i]; memcpy((char *)buf + i * 8, &v, 8); }
    }
    tg_dim dd = DC(n);
    ts_diag tmp;
    ts_diag_clear(&tmp);
    int id = tg_value_add(im->g, on, TG_V_CONST, ir_dt(isf ? IR_F32 : IR_I64), scalar ? 0 : 1, &dd, &tmp);
    if (id < 0) st = imp_nerr(im, nc, tmp.code, "%s", tmp.msg);
    else st = tg_value_set_data(im->g, id, buf, (size_t)n * eb, im->d);
    ts_free(buf);
    if (st) return st;
    if (!imp_kv_grow(im)) return imp_oom(im);
    if (!isf) {
      tg_dim *kd = TS_ANEWN(im->a, tg_dim, n ? n : 1);
      if (!kd) return imp_oom(im);
      for (int i = 0; i < n; i++) kd[i] = DC(scalar ? a->i : a->ints[i]);
      im->kv[id] = (known){n, kd};
    }
    nc->const_value = id;
  }
  nc->to_const = true;
  return TS_OK;
}

/* ---- legalisation: compute-DSL text ------------------------------------------ */

void lg_emit_transpose(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out) {
  const char *o = out[0];
  const tg_value *x = V(k, n->inputs[0]);
  int r = x->ndim, c;
  const int64_t *perm = tg_attr_ints(n, "perm", &c);
  int p[8];
  for (int i = 0; i < r; i++) p[i] = perm && c == r ? (int)perm[i] : r - 1 - i;
  int src[8];
  for (int i = 0; i < r; i++) src[i] = -1;
  for (int i = 0; i < r; i++) {
    if (p[i] < 0 || p[i] >= r || src[p[i]] >= 0) {
      lg_fail(k, TS_EINVAL, n, "perm is not a permutation of 0..%d", r - 1);
      return;
    }
    src[p[i]] = i;
  }
  tb b;
  tb_reset(&b);
  lg_lhs(&b, o, r);
  tb_printf(&b, " = %s[", in[0]);
  for (int a = 0; a < r; a++) tb_printf(&b, "%si%d", a ? ", " : "", src[a]);
  tb_printf(&b, "]");
  lg_stmt(k, &b);
}

/* Reshape's axis groups: x axes [x0, x1) and y axes [y0, y1) with equal
 * products (dim.c monomials), the smallest such runs from the left, so that
 * [b, s, 768] -> [b, s, 12, 64] is the groups b | s | 768 -> 12 x 64. */
typedef struct rs_group {
  int x0, x1, y0, y1;
} rs_group;

static int reshape_groups(lg_kernel *k, const tg_value *x, const tg_value *y, rs_group *gs, int cap) {
  ts_arena *ar = k->g->mod->arena;
  int ng = 0, i = 0, j = 0;
  while (i < x->ndim || j < y->ndim) {
    if (i == x->ndim || j == y->ndim) { /* what is left on one side must be 1s */
      for (; i < x->ndim; i++)
        if (!dim_is(x->dims[i], 1)) return -1;
      for (; j < y->ndim; j++)
        if (!dim_is(y->dims[j], 1)) return -1;
      if (ng == 0) return -1;
      gs[ng - 1].x1 = x->ndim; /* the trailing 1s join the last group */
      gs[ng - 1].y1 = y->ndim;
      break;
    }
    if (ng == cap) return -1;
    rs_group g = {i, i + 1, j, j + 1};
    tg_dim px = x->dims[i], py = y->dims[j], q;
    while (!tg_dim_eq(px, py)) {
      if (tg_dim_div(ar, py, px, &q) && g.x1 < x->ndim) {
        if (!tg_dim_mul(ar, px, x->dims[g.x1++], &px)) return -1;
      } else if (tg_dim_div(ar, px, py, &q) && g.y1 < y->ndim) {
        if (!tg_dim_mul(ar, py, y->dims[g.y1++], &py)) return -1;
      } else {
        return -1;
      }
    }
    gs[ng++] = g;
    i = g.x1;
    j = g.y1;
  }
  return ng;
}

/* Reshape and its relatives: each axis group (reshape_groups) maps directly
 * when it is one axis on each side, else through the group's flat index;
 * with no grouping, through the whole flat index. */
void lg_emit_reshape(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out) {
  const char *o = out[0];
  const tg_value *x = V(k, n->inputs[0]), *y = OUTV(0);
  int rx = x->ndim, ry = y->ndim;
  rs_group gs[16];
  int ng = reshape_groups(k, x, y, gs, 16);
  if (ng < 0) { /* one group of everything */
    ng = 1;
    gs[0] = (rs_group){0, rx, 0, ry};
  }
  tb b;
  tb_reset(&b);
  lg_lhs(&b, o, ry);
  tb_printf(&b, " = %s[", in[0]);
  char s[48];
  for (int gi = 0; gi < ng; gi++) {
    const rs_group *g = &gs[gi];
    /* flat = ((i0 * d1 + i1) * d2 + i2) ... over the group's output axes */
    tb flat;
    tb_reset(&flat);
    for (int a = g->y0; a < g->y1; a++) {
      if (a == g->y0) {
        tb_printf(&flat, "i%d", a);
      } else {
        tb t;
        tb_reset(&t);
        tb_printf(&t, "(%s) * %s + i%d", flat.s, lg_dim_s(k, y->dims[a], s), a);
        flat = t;
      }
    }
    if (g->y0 == g->y1) tb_printf(&flat, "0");
    for (int a = g->x0; a < g->x1; a++) {
      if (a) tb_printf(&b, ", ");
      if (g->x1 - g->x0 == 1) { /* the whole group's index */
        tb_printf(&b, "%s", flat.s);
        continue;
      }
      /* stride of axis a = product of the group's dims after it */
      tb st;
      tb_reset(&st);
      for (int q = a + 1; q < g->x1; q++) tb_printf(&st, "%s%s", st.n ? " * " : "", lg_dim_s(k, x->dims[q], s));
      if (st.n) tb_printf(&b, "(%s) // (%s)", flat.s, st.s);
      else tb_printf(&b, "(%s)", flat.s);
      if (a > g->x0) tb_printf(&b, " %% %s", lg_dim_s(k, x->dims[a], s));
    }
  }
  tb_printf(&b, "]");
  lg_stmt(k, &b);
}

void lg_emit_concat(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out) {
  const char *o = out[0];
  const tg_value *y = OUTV(0);
  int r = y->ndim;
  int a = lg_axis(tg_attr_int(n, "axis", 0), r);
  if (a < 0 || a >= r) {
    lg_fail(k, TS_EINVAL, n, "axis out of range");
    return;
  }
  int cnt = 0;
  int ids[64];
  const char *nm[64];
  for (int i = 0; i < n->nin && cnt < 64; i++)
    if (n->inputs[i] >= 0) {
      ids[cnt] = n->inputs[i];
      nm[cnt++] = in[i];
    }
  /* offsets along the axis as text */
  char off[64][256];
  char s[48];
  snprintf(off[0], sizeof off[0], "0");
  for (int i = 1; i < cnt; i++) {
    tg_dim dd = V(k, ids[i - 1])->dims[a];
    const char *ds = lg_dim_s(k, dd, s);
    if (!strcmp(off[i - 1], "0")) snprintf(off[i], sizeof off[i], "%s", ds);
    else { /* the previous offset, then " + dim" (one buffer: no overlapping snprintf) */
      memcpy(off[i], off[i - 1], sizeof off[i]);
      size_t l = strlen(off[i]);
      snprintf(off[i] + l, sizeof off[i] - l, " + %s", ds);
    }
  }
  tb e;
  tb_reset(&e);
  for (int i = cnt - 1; i >= 0; i--) {
    const tg_value *v = V(k, ids[i]);
    tb ld;
    tb_reset(&ld);
    tb_printf(&ld, "%s[", nm[i]);
    for (int q = 0; q < r; q++) {
      if (q) tb_printf(&ld, ", ");
      if (q != a) tb_printf(&ld, "i%d", q);
      else if (i == 0) tb_printf(&ld, "min(i%d, %s - 1)", q, lg_dim_s(k, v->dims[a], s));
      else tb_printf(&ld, "min(max(i%d - (%s), 0), %s - 1)", q, off[i], lg_dim_s(k, v->dims[a], s));
    }
    tb_printf(&ld, "]");
    if (i == cnt - 1) {
      e = ld;
    } else {
      tb t;
      tb_reset(&t);
      tb_printf(&t, "select(i%d < %s, %s, %s)", a, off[i + 1], ld.s, e.s);
      e = t;
    }
  }
  tb b;
  tb_reset(&b);
  lg_lhs(&b, o, r);
  tb_printf(&b, " = %s", e.s);
  if (e.over) b.over = true;
  lg_stmt(k, &b);
}

void lg_emit_split(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out) {
  const tg_value *x = V(k, n->inputs[0]);
  int r = x->ndim;
  int a = lg_axis(tg_attr_int(n, "axis", 0), r);
  if (a < 0 || a >= r) {
    lg_fail(k, TS_EINVAL, n, "axis out of range");
    return;
  }
  char off[512] = "0", s[48];
  for (int i = 0; i < n->nout; i++) {
    const tg_value *y = OUTV(i);
    if (out[i]) {
      tb b;
      tb_reset(&b);
      lg_lhs(&b, out[i], r);
      tb_printf(&b, " = %s[", in[0]);
      for (int q = 0; q < r; q++) {
        if (q) tb_printf(&b, ", ");
        if (q == a && strcmp(off, "0")) tb_printf(&b, "i%d + %s", q, off);
        else tb_printf(&b, "i%d", q);
      }
      tb_printf(&b, "]");
      lg_stmt(k, &b);
    }
    char t[512];
    if (!strcmp(off, "0")) snprintf(t, sizeof t, "%s", lg_dim_s(k, y->dims[a], s));
    else snprintf(t, sizeof t, "%s + %s", off, lg_dim_s(k, y->dims[a], s));
    snprintf(off, sizeof off, "%s", t);
  }
}

void lg_emit_slice(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out) {
  const char *o = out[0];
  const tg_value *x = V(k, n->inputs[0]);
  int r = x->ndim, cs, ce, ca, cst;
  const int64_t *starts = tg_attr_ints(n, "starts", &cs), *ends = tg_attr_ints(n, "ends", &ce);
  const int64_t *axes = tg_attr_ints(n, "axes", &ca), *steps = tg_attr_ints(n, "steps", &cst);
  if (!starts || !ends || cs != ce || (axes && ca != cs) || (steps && cst != cs)) {
    lg_fail(k, TS_EINVAL, n, "starts/ends/axes/steps missing or of different lengths");
    return;
  }
  int64_t start[8] = {0}, step[8];
  for (int a = 0; a < r; a++) step[a] = 1;
  for (int i = 0; i < cs; i++) {
    int a = lg_axis(axes ? axes[i] : i, r);
    if (a < 0 || a >= r) {
      lg_fail(k, TS_EINVAL, n, "axis out of range");
      return;
    }
    int64_t st = steps ? steps[i] : 1, s0 = starts[i];
    if (st == 0) {
      lg_fail(k, TS_EINVAL, n, "step 0");
      return;
    }
    tg_dim D = x->dims[a];
    if (D.sym) {
      if (s0 < 0 || st < 0) {
        lg_fail(k, TS_EUNSUPPORTED, n, "a negative start or step on the symbolic dim '%s'", D.sym);
        return;
      }
    } else {
      if (s0 < 0) s0 += D.value;
      if (st > 0) s0 = s0 < 0 ? 0 : s0 > D.value ? D.value : s0;
      else s0 = s0 < 0 ? -1 : s0 > D.value - 1 ? D.value - 1 : s0;
    }
    start[a] = s0;
    step[a] = st;
  }
  tb b;
  tb_reset(&b);
  lg_lhs(&b, o, r);
  tb_printf(&b, " = %s[", in[0]);
  for (int a = 0; a < r; a++) {
    if (a) tb_printf(&b, ", ");
    if (start[a]) tb_printf(&b, "%" PRId64 " + ", start[a]);
    if (step[a] != 1) tb_printf(&b, "i%d * %" PRId64, a, step[a]);
    else tb_printf(&b, "i%d", a);
  }
  tb_printf(&b, "]");
  lg_stmt(k, &b);
}

void lg_emit_gather(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out) {
  const char *o = out[0];
  const tg_value *x = V(k, n->inputs[0]), *ix = V(k, n->inputs[1]);
  int r = x->ndim, q = ix->ndim;
  int a = lg_axis(tg_attr_int(n, "axis", 0), r);
  if (a < 0 || a >= r) {
    lg_fail(k, TS_EINVAL, n, "axis out of range");
    return;
  }
  if (!ir_dtype_is_int(ix->dtype)) {
    lg_fail(k, TS_ETYPE, n, "indices of dtype %s", dtn(ix->dtype));
    return;
  }
  tb idx;
  tb_reset(&idx);
  bool cast = ix->dtype.code != IR_I64;
  tb_printf(&idx, "%s%s[", cast ? "i64(" : "", in[1]);
  for (int j = 0; j < q; j++) tb_printf(&idx, "%si%d", j ? ", " : "", a + j);
  tb_printf(&idx, "]%s", cast ? ")" : "");
  char Db[48];
  const char *D = lg_dim_s(k, x->dims[a], Db);
  tb b;
  tb_reset(&b);
  lg_lhs(&b, o, r + q - 1);
  tb_printf(&b, " = %s[", in[0]);
  for (int p = 0; p < r; p++) {
    if (p) tb_printf(&b, ", ");
    if (p < a) tb_printf(&b, "i%d", p);
    else if (p == a)
      tb_printf(&b, "min(max(select(%s < 0, %s + %s, %s), 0), %s - 1)", idx.s, idx.s, D, idx.s, D);
    else tb_printf(&b, "i%d", p + q - 1);
  }
  tb_printf(&b, "]");
  lg_stmt(k, &b);
}

void lg_emit_pad(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out) {
  const char *o = out[0];
  const tg_value *x = V(k, n->inputs[0]), *y = OUTV(0);
  int r = x->ndim, c, ca;
  const int64_t *pads = tg_attr_ints(n, "pads", &c);
  const int64_t *axes = tg_attr_ints(n, "axes", &ca);
  int64_t pb[8] = {0};
  if (pads) {
    int na = axes ? ca : r;
    if (c != 2 * na) {
      lg_fail(k, TS_EINVAL, n, "pads has %d entries for %d axes", c, na);
      return;
    }
    for (int i = 0; i < na; i++) {
      int a = lg_axis(axes ? axes[i] : i, r);
      if (a < 0 || a >= r) {
        lg_fail(k, TS_EINVAL, n, "axis out of range");
        return;
      }
      pb[a] = pads[i];
    }
  }
  const char *mode = tg_attr_str(n, "mode", "constant");
  bool edge = !strcmp(mode, "edge"), refl = !strcmp(mode, "reflect");
  if (!edge && !refl && strcmp(mode, "constant")) {
    lg_fail(k, TS_EUNSUPPORTED, n, "mode '%s'", mode);
    return;
  }
  char s[48], l[48];
  tb ld, cond;
  tb_reset(&ld);
  tb_reset(&cond);
  tb_printf(&ld, "%s[", in[0]);
  for (int a = 0; a < r; a++) {
    const char *D = lg_dim_s(k, x->dims[a], s);
    if (a) tb_printf(&ld, ", ");
    bool padded = pb[a] != 0 || !tg_dim_eq(x->dims[a], y->dims[a]);
    if (!padded) {
      tb_printf(&ld, "i%d", a);
      continue;
    }
    char j[64];
    snprintf(j, sizeof j, "(i%d - %" PRId64 ")", a, pb[a]);
    if (refl)
      tb_printf(&ld, "min(max(select(%s < 0, 0 - %s, select(%s >= %s, 2 * %s - 2 - %s, %s)), 0), %s - 1)", j, j,
                j, D, D, j, j, D);
    else tb_printf(&ld, "min(max(%s, 0), %s - 1)", j, D);
    if (!edge && !refl) tb_printf(&cond, "%s%s >= 0 && %s < %s", cond.n ? " && " : "", j, j, D);
  }
  tb_printf(&ld, "]");
  tb b;
  tb_reset(&b);
  lg_lhs(&b, o, r);
  if (cond.n) tb_printf(&b, " = select(%s, %s, %s)", cond.s, ld.s, lit(x->dtype, tg_attr_float(n, "value", 0.0), l));
  else tb_printf(&b, " = %s", ld.s);
  lg_stmt(k, &b);
}

void lg_emit_shape(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out) {
  const char *o = out[0];
  const tg_value *x = V(k, n->inputs[0]), *y = OUTV(0);
  int r = x->ndim;
  int64_t st = tg_attr_int(n, "start", 0), en = tg_attr_int(n, "end", r);
  if (st < 0) st += r;
  if (en < 0) en += r;
  if (st < 0) st = 0;
  if (en > r) en = r;
  if (y->dtype.code != IR_I64) {
    lg_fail(k, TS_ETYPE, n, "output dtype %s (Shape is i64)", dtn(y->dtype));
    return;
  }
  tb e;
  tb_reset(&e);
  char s[48];
  int cnt = (int)(en - st);
  if (cnt <= 0) {
    lg_fail(k, TS_EUNSUPPORTED, n, "an empty shape slice");
    return;
  }
  tb_printf(&e, "%s", lg_dim_s(k, x->dims[en - 1], s));
  for (int64_t i = en - 2; i >= st; i--) {
    tb t;
    tb_reset(&t);
    tb_printf(&t, "select(i0 == %" PRId64 ", %s, %s)", i - st, lg_dim_s(k, x->dims[i], s), e.s);
    e = t;
  }
  tb b;
  tb_reset(&b);
  tb_printf(&b, "%s[i0] = %s", o, e.s);
  lg_stmt(k, &b);
}
