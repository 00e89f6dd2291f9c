/* op_nn.c — the network operators: Conv, ConvTranspose, Gemm, MatMul,
 * BatchNormalization, MaxPool, AveragePool, GlobalAveragePool. Each
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

ts_status imp_batchnorm(imp *im, nctx *nc) {
  ts_status st = imp_unary(im, nc);
  if (st || (st = imp_legacy_is_test(im, nc))) return st;
  if (aint(nc, "training_mode", 0)) return imp_nerr(im, nc, TS_EUNSUPPORTED, "training_mode=1 (inference only)");
  if (!aint(nc, "spatial", 1)) /* before 9: per-activation statistics */
    return imp_nerr(im, nc, TS_EUNSUPPORTED, "spatial=0 (only spatial=1, per-channel statistics)");
  tg_attr *spa = A(nc, "spatial");
  if (spa) *spa = nc->attr[--nc->nattr];
  for (int k = 1; k < nc->nout; k++)
    if (nc->outname[k]) return imp_nerr(im, nc, TS_EUNSUPPORTED, "output %d (%s, a running statistic) is not supported", k, nc->outname[k]);
  const tg_value *x = IN(im, nc, 0);
  if (x->ndim < 2) return imp_nerr(im, nc, TS_ESHAPE, "X has rank %d; BatchNormalization needs [N, C, ...]", x->ndim);
  static const char *const pn[] = {"", "scale", "B", "input_mean", "input_var"};
  for (int i = 1; i < 5; i++) {
    const tg_value *p = IN(im, nc, i);
    if (!p) return imp_nerr(im, nc, TS_EINVAL, "input %d (%s) is required", i, pn[i]);
    if (p->ndim != 1) return imp_nerr(im, nc, TS_ESHAPE, "input %d (%s, %s) has rank %d, expected 1", i, pn[i], p->name, p->ndim);
    if (!p->dims[0].sym && !x->dims[1].sym && p->dims[0].value != x->dims[1].value)
      return imp_nerr(im, nc, TS_ESHAPE, "input %d (%s, %s) has %" PRId64 " elements; X has %" PRId64 " channels", i,
                      pn[i], p->name, p->dims[0].value, x->dims[1].value);
  }
  if ((st = imp_set_float(im, nc, "epsilon", afloat(nc, "epsilon", 1e-5))) ||
      (st = imp_set_float(im, nc, "momentum", afloat(nc, "momentum", 0.9))) || (st = imp_set_int(im, nc, "training_mode", 0)))
    return st;
  nc->nout = 1;
  return TS_OK;
}

/* Spatial attributes shared by Conv/ConvTranspose/pools: kernel, strides,
 * dilations, pads (auto_pad resolved), for ns spatial dims of x. */
typedef struct spatial {
  int ns;
  int64_t k[MAX_RANK], s[MAX_RANK], dl[MAX_RANK], pb[MAX_RANK], pe[MAX_RANK];
  const char *auto_pad;
} spatial;

static ts_status read_spatial(imp *im, nctx *nc, const tg_value *x, const int64_t *kdef, spatial *sp) {
  int ns = x->ndim - 2;
  sp->ns = ns;
  if (ns < 1) return imp_nerr(im, nc, TS_ESHAPE, "input %s has rank %d; expected [N, C, spatial...]", x->name, x->ndim);
  int n;
  const int64_t *v = aints(nc, "kernel_shape", &n);
  if (v && n != ns) return imp_nerr(im, nc, TS_EINVAL, "kernel_shape has %d entries for %d spatial dims", n, ns);
  if (!v && !kdef) return imp_nerr(im, nc, TS_EINVAL, "kernel_shape is required");
  for (int i = 0; i < ns; i++) sp->k[i] = v ? v[i] : kdef[i];
  v = aints(nc, "strides", &n);
  if (v && n != ns) return imp_nerr(im, nc, TS_EINVAL, "strides has %d entries for %d spatial dims", n, ns);
  for (int i = 0; i < ns; i++) sp->s[i] = v ? v[i] : 1;
  v = aints(nc, "dilations", &n);
  if (v && n != ns) return imp_nerr(im, nc, TS_EINVAL, "dilations has %d entries for %d spatial dims", n, ns);
  for (int i = 0; i < ns; i++) sp->dl[i] = v ? v[i] : 1;
  v = aints(nc, "pads", &n);
  if (v && n != 2 * ns) return imp_nerr(im, nc, TS_EINVAL, "pads has %d entries for %d spatial dims", n, ns);
  for (int i = 0; i < ns; i++) {
    sp->pb[i] = v ? v[i] : 0;
    sp->pe[i] = v ? v[ns + i] : 0;
    if (sp->k[i] < 1 || sp->s[i] < 1 || sp->dl[i] < 1 || sp->pb[i] < 0 || sp->pe[i] < 0 || sp->k[i] > (1 << 20) ||
        sp->s[i] > (1 << 20) || sp->dl[i] > (1 << 20) || sp->pb[i] > (1 << 20) || sp->pe[i] > (1 << 20))
      return imp_nerr(im, nc, TS_EINVAL, "spatial dim %d: kernel %" PRId64 ", stride %" PRId64 ", dilation %" PRId64
                      ", pads %" PRId64 "/%" PRId64 " (kernel, stride, dilation >= 1, pads >= 0)",
                  i, sp->k[i], sp->s[i], sp->dl[i], sp->pb[i], sp->pe[i]);
    if (x->dims[2 + i].sym)
      return imp_nerr(im, nc, TS_EUNSUPPORTED, "spatial dim %d of %s is symbolic (%s); only batch and channel dims may be", i,
                      x->name, x->dims[2 + i].sym);
  }
  sp->auto_pad = astr(nc, "auto_pad", "NOTSET");
  if (strcmp(sp->auto_pad, "NOTSET") && strcmp(sp->auto_pad, "VALID") && strcmp(sp->auto_pad, "SAME_UPPER") &&
      strcmp(sp->auto_pad, "SAME_LOWER"))
    return imp_nerr(im, nc, TS_EUNSUPPORTED, "auto_pad='%s'", sp->auto_pad);
  if (strcmp(sp->auto_pad, "NOTSET") && v)
    return imp_nerr(im, nc, TS_EINVAL, "pads given together with auto_pad=%s", sp->auto_pad);
  if (!strcmp(sp->auto_pad, "VALID"))
    for (int i = 0; i < ns; i++) sp->pb[i] = sp->pe[i] = 0;
  if (!strncmp(sp->auto_pad, "SAME", 4) && nc->op != TG_OP_CONV_TRANSPOSE) {
    for (int i = 0; i < ns; i++) {
      int64_t in = x->dims[2 + i].value, out = (in + sp->s[i] - 1) / sp->s[i];
      int64_t total = (out - 1) * sp->s[i] + (sp->k[i] - 1) * sp->dl[i] + 1 - in;
      if (total < 0) total = 0;
      sp->pb[i] = !strcmp(sp->auto_pad, "SAME_UPPER") ? total / 2 : total - total / 2;
      sp->pe[i] = total - sp->pb[i];
    }
  }
  return TS_OK;
}

static ts_status put_spatial(imp *im, nctx *nc, const spatial *sp) {
  int64_t pads[2 * MAX_RANK];
  for (int i = 0; i < sp->ns; i++) {
    pads[i] = sp->pb[i];
    pads[sp->ns + i] = sp->pe[i];
  }
  ts_status st;
  if ((st = imp_set_ints(im, nc, "kernel_shape", sp->k, sp->ns)) || (st = imp_set_ints(im, nc, "strides", sp->s, sp->ns)) ||
      (st = imp_set_ints(im, nc, "dilations", sp->dl, sp->ns)) || (st = imp_set_ints(im, nc, "pads", pads, 2 * sp->ns)) ||
      (st = imp_set_str(im, nc, "auto_pad", "NOTSET")))
    return st;
  return TS_OK;
}

ts_status imp_conv(imp *im, nctx *nc) {
  const tg_value *x = IN(im, nc, 0), *w = IN(im, nc, 1), *b = IN(im, nc, 2);
  if (!x || !w) return imp_nerr(im, nc, TS_EINVAL, "inputs X and W are required");
  ts_status st;
  if ((st = imp_need_float(im, nc, 0)) || (st = imp_need_float(im, nc, 1))) return st;
  if (!ir_dtype_eq(x->dtype, w->dtype) || (b && !ir_dtype_eq(b->dtype, x->dtype)))
    return imp_nerr(im, nc, TS_ETYPE, "X, W and B must have one type");
  return imp_conv_shape(im, nc, x, w, b, x->dtype);
}

ts_status imp_conv_shape(imp *im, nctx *nc, const tg_value *x, const tg_value *w, const tg_value *b, ir_dtype ydt) {
  ts_status st;
  if (w->ndim != x->ndim) return imp_nerr(im, nc, TS_ESHAPE, "W (%s) has rank %d, X (%s) has %d", w->name, w->ndim, x->name, x->ndim);
  if (!tg_value_is_static(w)) return imp_nerr(im, nc, TS_EUNSUPPORTED, "W (%s) has a symbolic shape", w->name);
  int64_t kdef[MAX_RANK];
  for (int i = 2; i < w->ndim; i++) kdef[i - 2] = w->dims[i].value;
  spatial sp;
  if ((st = read_spatial(im, nc, x, kdef, &sp))) return st;
  for (int i = 0; i < sp.ns; i++)
    if (sp.k[i] != kdef[i]) return imp_nerr(im, nc, TS_ESHAPE, "kernel_shape[%d] = %" PRId64 " but W's dim is %" PRId64, i, sp.k[i], kdef[i]);
  int64_t group = aint(nc, "group", 1);
  if (group < 1) return imp_nerr(im, nc, TS_EINVAL, "group %" PRId64 " < 1", group);
  bool tr = nc->op == TG_OP_CONV_TRANSPOSE;
  int64_t m = tr ? w->dims[1].value * group : w->dims[0].value;
  int64_t cin_w = tr ? w->dims[0].value : w->dims[1].value * group;
  if (!x->dims[1].sym && x->dims[1].value != cin_w)
    return imp_nerr(im, nc, TS_ESHAPE, "X (%s) has %" PRId64 " channels, W (%s) with group %" PRId64 " expects %" PRId64,
                    x->name, x->dims[1].value, w->name, group, cin_w);
  if (!tr && m % group) return imp_nerr(im, nc, TS_ESHAPE, "%" PRId64 " output channels are not divisible by group %" PRId64, m, group);
  if (b && (b->ndim != 1 || b->dims[0].sym || b->dims[0].value != m))
    return imp_nerr(im, nc, TS_ESHAPE, "B (%s) must be [%" PRId64 "]", b->name, m);
  tg_dim od[MAX_RANK];
  od[0] = x->dims[0];
  od[1] = DC(m);
  int64_t opad[MAX_RANK] = {0};
  if (tr) {
    int n;
    const int64_t *v = aints(nc, "output_padding", &n);
    if (v && n != sp.ns) return imp_nerr(im, nc, TS_EINVAL, "output_padding has %d entries for %d spatial dims", n, sp.ns);
    for (int i = 0; i < sp.ns; i++) {
      opad[i] = v ? v[i] : 0;
      if (opad[i] < 0 || opad[i] > (1 << 20) || (opad[i] >= sp.s[i] && opad[i] >= sp.dl[i]))
        return imp_nerr(im, nc, TS_EINVAL, "output_padding[%d] = %" PRId64 " (must be below the stride or the dilation)", i, opad[i]);
    }
    const int64_t *os = aints(nc, "output_shape", &n);
    if (os && n != sp.ns) return imp_nerr(im, nc, TS_EINVAL, "output_shape has %d entries for %d spatial dims", n, sp.ns);
    for (int i = 0; i < sp.ns; i++) {
      int64_t in = x->dims[2 + i].value, ek = (sp.k[i] - 1) * sp.dl[i] + 1;
      if (os || !strncmp(sp.auto_pad, "SAME", 4)) {
        int64_t want = os ? os[i] : in * sp.s[i];
        if (want < 1 || want > MAX_ELEMS) return imp_nerr(im, nc, TS_EINVAL, "output_shape[%d] = %" PRId64, i, want);
        int64_t total = sp.s[i] * (in - 1) + opad[i] + ek - want;
        /* the spec's split (onnxruntime agrees): the odd element at the end for SAME_UPPER, else at the start;
         * a negative total (output_shape past what the op covers) gives negative pads: zeros at the end */
        int64_t half = total >= 0 ? total / 2 : -((1 - total) / 2);
        sp.pb[i] = !strcmp(sp.auto_pad, "SAME_UPPER") ? half : total - half;
        sp.pe[i] = total - sp.pb[i];
      }
      int64_t o = sp.s[i] * (in - 1) + opad[i] + ek - sp.pb[i] - sp.pe[i];
      if (o < 1) return imp_nerr(im, nc, TS_ESHAPE, "spatial dim %d of the output would be %" PRId64, i, o);
      od[2 + i] = DC(o);
    }
    if ((st = imp_set_ints(im, nc, "output_padding", opad, sp.ns))) return st;
    tg_attr *osa = A(nc, "output_shape");
    if (osa) *osa = nc->attr[--nc->nattr]; /* resolved into pads */
  } else {
    for (int i = 0; i < sp.ns; i++) {
      int64_t in = x->dims[2 + i].value, ek = (sp.k[i] - 1) * sp.dl[i] + 1;
      int64_t span = in + sp.pb[i] + sp.pe[i] - ek;
      if (span < 0)
        return imp_nerr(im, nc, TS_ESHAPE, "spatial dim %d: input %" PRId64 " (padded %" PRId64 ") is smaller than the kernel extent %" PRId64,
                        i, in, in + sp.pb[i] + sp.pe[i], ek);
      od[2 + i] = DC(span / sp.s[i] + 1);
    }
  }
  if ((st = put_spatial(im, nc, &sp)) || (st = imp_set_int(im, nc, "group", group))) return st;
  set_out(nc, 0, ydt, x->ndim, od);
  return TS_OK;
}

ts_status imp_pool(imp *im, nctx *nc) {
  ts_status st = imp_unary(im, nc);
  if (st) return st;
  if (nc->nout > 1 && nc->outname[1]) return imp_nerr(im, nc, TS_EUNSUPPORTED, "output 1 (Indices) is not supported");
  nc->nout = 1;
  const tg_value *x = IN(im, nc, 0);
  spatial sp;
  if ((st = read_spatial(im, nc, x, NULL, &sp))) return st;
  int64_t ceil_mode = aint(nc, "ceil_mode", 0);
  if (ceil_mode != 0 && ceil_mode != 1) return imp_nerr(im, nc, TS_EINVAL, "ceil_mode=%" PRId64, ceil_mode);
  if (nc->op == TG_OP_MAX_POOL && aint(nc, "storage_order", 0) != 0)
    return imp_nerr(im, nc, TS_EUNSUPPORTED, "storage_order=%" PRId64 " (only row-major, 0)", aint(nc, "storage_order", 0));
  tg_dim od[MAX_RANK];
  od[0] = x->dims[0];
  od[1] = x->dims[1];
  for (int i = 0; i < sp.ns; i++) {
    int64_t in = x->dims[2 + i].value, ek = (sp.k[i] - 1) * sp.dl[i] + 1;
    int64_t span = in + sp.pb[i] + sp.pe[i] - ek;
    if (span < 0)
      return imp_nerr(im, nc, TS_ESHAPE, "spatial dim %d: input %" PRId64 " (padded) is smaller than the window %" PRId64, i, in, ek);
    int64_t o = (ceil_mode ? (span + sp.s[i] - 1) / sp.s[i] : span / sp.s[i]) + 1;
    /* the last window must start inside the input or its left padding */
    if (ceil_mode && (o - 1) * sp.s[i] >= in + sp.pb[i]) o--;
    if (!strncmp(sp.auto_pad, "SAME", 4)) o = (in + sp.s[i] - 1) / sp.s[i];
    od[2 + i] = DC(o);
  }
  if ((st = put_spatial(im, nc, &sp)) || (st = imp_set_int(im, nc, "ceil_mode", ceil_mode))) return st;
  if (nc->op == TG_OP_AVERAGE_POOL) {
    if ((st = imp_set_int(im, nc, "count_include_pad", aint(nc, "count_include_pad", 0)))) return st;
  } else if ((st = imp_set_int(im, nc, "storage_order", 0))) {
    return st;
  }
  set_out(nc, 0, x->dtype, x->ndim, od);
  return TS_OK;
}

ts_status imp_gap(imp *im, nctx *nc) {
  ts_status st = imp_unary(im, nc);
  if (st) return st;
  const tg_value *x = IN(im, nc, 0);
  if (x->ndim < 3) return imp_nerr(im, nc, TS_ESHAPE, "X has rank %d; expected [N, C, spatial...]", x->ndim);
  tg_dim od[MAX_RANK];
  for (int i = 0; i < x->ndim; i++) od[i] = i < 2 ? x->dims[i] : DC(1);
  set_out(nc, 0, x->dtype, x->ndim, od);
  return TS_OK;
}

ts_status imp_gemm(imp *im, nctx *nc) {
  const tg_value *a = IN(im, nc, 0), *b = IN(im, nc, 1), *c = IN(im, nc, 2);
  if (!a || !b) return imp_nerr(im, nc, TS_EINVAL, "inputs A and B are required");
  drop_attr(nc, "broadcast"); /* before opset 7: whether C broadcasts; numpy's rule covers both */
  ts_status st;
  if ((st = imp_need_float(im, nc, 0))) return st;
  if (a->ndim != 2 || b->ndim != 2) return imp_nerr(im, nc, TS_ESHAPE, "A and B must be matrices (ranks %d and %d)", a->ndim, b->ndim);
  if (!ir_dtype_eq(a->dtype, b->dtype) || (c && !ir_dtype_eq(a->dtype, c->dtype)))
    return imp_nerr(im, nc, TS_ETYPE, "A, B and C must have one type");
  if (!c && im->opset < 11) return imp_nerr(im, nc, TS_EINVAL, "input 2 (C) is required before opset 11");
  int64_t tA = aint(nc, "transA", 0), tB = aint(nc, "transB", 0);
  tg_dim m = a->dims[tA ? 1 : 0], ka = a->dims[tA ? 0 : 1], kb = b->dims[tB ? 1 : 0], n = b->dims[tB ? 0 : 1];
  if (!ka.sym && !kb.sym && ka.value != kb.value)
    return imp_nerr(im, nc, TS_ESHAPE, "inner dims differ: A (%s) gives %" PRId64 ", B (%s) %" PRId64, a->name, ka.value, b->name, kb.value);
  tg_dim od[2] = {m, n};
  if (c) {
    if (c->ndim > 2) return imp_nerr(im, nc, TS_ESHAPE, "C (%s) has rank %d", c->name, c->ndim);
    for (int i = 0; i < c->ndim; i++) {
      tg_dim cd = c->dims[i], want = od[2 - c->ndim + i];
      if (!cd.sym && cd.value != 1 && !want.sym && cd.value != want.value)
        return imp_nerr(im, nc, TS_ESHAPE, "C (%s) does not broadcast to the [M, N] result", c->name);
    }
  }
  if ((st = imp_set_float(im, nc, "alpha", afloat(nc, "alpha", 1.0))) || (st = imp_set_float(im, nc, "beta", afloat(nc, "beta", 1.0))) ||
      (st = imp_set_int(im, nc, "transA", tA != 0)) || (st = imp_set_int(im, nc, "transB", tB != 0)))
    return st;
  set_out(nc, 0, a->dtype, 2, od);
  return TS_OK;
}

ts_status imp_matmul(imp *im, nctx *nc) {
  const tg_value *a = IN(im, nc, 0), *b = IN(im, nc, 1);
  if (!a || !b) return imp_nerr(im, nc, TS_EINVAL, "both inputs are required");
  if (!ir_dtype_eq(a->dtype, b->dtype)) return imp_nerr(im, nc, TS_ETYPE, "inputs differ in type");
  if (a->ndim < 1 || b->ndim < 1) return imp_nerr(im, nc, TS_ESHAPE, "inputs must have rank >= 1");
  if (a->ndim > MAX_RANK || b->ndim > MAX_RANK) return imp_nerr(im, nc, TS_EUNSUPPORTED, "rank above %d", MAX_RANK);
  tg_dim ka = a->dims[a->ndim - 1], kb = b->dims[b->ndim >= 2 ? b->ndim - 2 : 0];
  if (!ka.sym && !kb.sym && ka.value != kb.value)
    return imp_nerr(im, nc, TS_ESHAPE, "inner dims differ: %s gives %" PRId64 ", %s %" PRId64, a->name, ka.value, b->name, kb.value);
  /* batch dims broadcast */
  tg_value ba = *a, bb = *b;
  ba.ndim = a->ndim >= 2 ? a->ndim - 2 : 0;
  bb.ndim = b->ndim >= 2 ? b->ndim - 2 : 0;
  int nd = 0;
  tg_dim od[MAX_RANK + 2];
  ts_status st = imp_broadcast(im, nc, &ba, &bb, &nd, od);
  if (st) return st;
  if (a->ndim >= 2) od[nd++] = a->dims[a->ndim - 2];
  if (b->ndim >= 2) od[nd++] = b->dims[b->ndim - 1];
  if (nd > MAX_RANK) return imp_nerr(im, nc, TS_EUNSUPPORTED, "rank above %d", MAX_RANK);
  set_out(nc, 0, a->dtype, nd, od);
  return TS_OK;
}

/* ---- legalisation: compute-DSL text ------------------------------------------ */

void lg_emit_batchnorm(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out) {
  const char *o = out[0];
  if (tg_attr_int(n, "training_mode", 0)) {
    lg_fail(k, TS_EUNSUPPORTED, n, "training_mode=1 (only inference batch norm is supported)");
    return;
  }
  const tg_value *x = V(k, n->inputs[0]);
  int r = x->ndim;
  if (r < 2) {
    lg_fail(k, TS_EUNSUPPORTED, n, "input of rank %d (need the channel axis 1)", r);
    return;
  }
  char eps[48];
  flit(tg_attr_float(n, "epsilon", 1e-5), eps);
  tb b;
  tb_reset(&b);
  lg_lhs(&b, o, r);
  tb_printf(&b, " = (");
  lg_lhs(&b, in[0], r);
  tb_printf(&b, " - %s[i1]) * (%s[i1] * rsqrt(%s[i1] + %s)) + %s[i1]", in[3], in[1], in[4], eps, in[2]);
  lg_stmt(k, &b);
}

void lg_emit_gemm(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out) {
  const char *o = out[0];
  const tg_value *a = V(k, n->inputs[0]), *y = OUTV(0);
  bool ta = tg_attr_int(n, "transA", 0) != 0, tbm = tg_attr_int(n, "transB", 0) != 0;
  double alpha = tg_attr_float(n, "alpha", 1.0), beta = tg_attr_float(n, "beta", 1.0);
  if (a->ndim != 2 || V(k, n->inputs[1])->ndim != 2) {
    lg_fail(k, TS_ESHAPE, n, "Gemm needs 2-d A and B");
    return;
  }
  bool has_c = n->nin > 2 && n->inputs[2] >= 0 && beta != 0.0;
  char s[48], l1[48], l2[48], mm[96];
  const char *dst = o;
  lg_tmpname(mm, sizeof mm, o, "mm");
  if (has_c || alpha != 1.0) {
    dst = mm;
    lg_let(k, mm, n->outputs[0]);
  }
  tb b;
  tb_reset(&b);
  tb_printf(&b, "%s[i0, i1] += %s[%s] * %s[%s] for r0 in 0..%s", dst, in[0], ta ? "r0, i0" : "i0, r0", in[1],
            tbm ? "i1, r0" : "r0, i1", lg_dim_s(k, a->dims[ta ? 0 : 1], s));
  lg_stmt(k, &b);
  if (dst == o) return;
  tb_reset(&b);
  tb_printf(&b, "%s[i0, i1] = ", o);
  if (alpha != 1.0) tb_printf(&b, "%s * ", flit(alpha, l1));
  tb_printf(&b, "%s[i0, i1]", mm);
  if (has_c) {
    tb_printf(&b, " + ");
    if (beta != 1.0) tb_printf(&b, "%s * ", flit(beta, l2));
    lg_load_bcast(k, &b, in[2], n->inputs[2], 2, y->dims);
  }
  lg_stmt(k, &b);
}

void lg_emit_matmul(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out) {
  const char *o = out[0];
  const tg_value *a = V(k, n->inputs[0]), *bv = V(k, n->inputs[1]), *y = OUTV(0);
  int ra = a->ndim, rb = bv->ndim, r = y->ndim;
  bool bt = tg_attr_int(n, "tessel.b_transposed", 0) != 0; /* layout_rewrite: B stored [.., N, K] */
  char s[48];
  if (ra < 1 || rb < 1) {
    lg_fail(k, TS_ESHAPE, n, "MatMul of a 0-d operand");
    return;
  }
  tb b;
  tb_reset(&b);
  lg_lhs(&b, o, r);
  tb_printf(&b, " += %s[", in[0]);
  /* A */
  if (ra == 1) {
    tb_printf(&b, "r0");
  } else {
    int nb = ra - 2, yb = (rb == 1 ? r - 1 : r - 2);
    for (int i = 0; i < nb; i++) {
      int oax = yb - nb + i;
      bool zero = oax < 0 || (dim_is(a->dims[i], 1) && !dim_is(y->dims[oax], 1));
      if (zero) tb_printf(&b, "0, ");
      else tb_printf(&b, "i%d, ", oax);
    }
    tb_printf(&b, "i%d, r0", rb == 1 ? r - 1 : r - 2);
  }
  tb_printf(&b, "] * %s[", in[1]);
  if (rb == 1) {
    tb_printf(&b, "r0");
  } else {
    int nb = rb - 2, yb = r - 1 - (ra == 1 ? 0 : 1);
    for (int i = 0; i < nb; i++) {
      int oax = yb - nb + i;
      bool zero = oax < 0 || (dim_is(bv->dims[i], 1) && !dim_is(y->dims[oax], 1));
      if (zero) tb_printf(&b, "0, ");
      else tb_printf(&b, "i%d, ", oax);
    }
    if (bt) tb_printf(&b, "i%d, r0", r - 1);
    else tb_printf(&b, "r0, i%d", r - 1);
  }
  tb_printf(&b, "] for r0 in 0..%s", lg_dim_s(k, a->dims[ra - 1], s));
  lg_stmt(k, &b);
}

/* Convolution / pooling window geometry along the spatial axes. */
typedef struct win {
  int ns;
  int64_t kern[3], st[3], dil[3], pb[3], pe[3];
} win;

static bool get_win(lg_kernel *k, const tg_node *n, const tg_value *x, const tg_value *y, const int64_t *kern,
                    win *w) {
  w->ns = x->ndim - 2;
  if (w->ns < 1 || w->ns > 3) {
    lg_fail(k, TS_EUNSUPPORTED, n, "%d spatial dims (1 to 3 are supported)", w->ns);
    return false;
  }
  int c;
  const int64_t *st = tg_attr_ints(n, "strides", &c);
  if (st && c != w->ns) st = NULL;
  const int64_t *dl = tg_attr_ints(n, "dilations", &c);
  if (dl && c != w->ns) dl = NULL;
  const int64_t *pads = tg_attr_ints(n, "pads", &c);
  if (pads && c != 2 * w->ns) pads = NULL;
  const char *ap = tg_attr_str(n, "auto_pad", "NOTSET");
  for (int i = 0; i < w->ns; i++) {
    w->kern[i] = kern[i];
    w->st[i] = st ? st[i] : 1;
    w->dil[i] = dl ? dl[i] : 1;
    w->pb[i] = pads ? pads[i] : 0;
    w->pe[i] = pads ? pads[i + w->ns] : 0;
    if (w->st[i] < 1 || w->dil[i] < 1) {
      lg_fail(k, TS_EINVAL, n, "stride and dilation must be >= 1");
      return false;
    }
    if (!strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER")) {
      tg_dim xi = x->dims[2 + i], yo = y->dims[2 + i];
      if (xi.sym || yo.sym) {
        lg_fail(k, TS_EUNSUPPORTED, n, "auto_pad=%s over a symbolic spatial dim", ap);
        return false;
      }
      int64_t tot = (yo.value - 1) * w->st[i] + (w->kern[i] - 1) * w->dil[i] + 1 - xi.value;
      if (tot < 0) tot = 0;
      w->pb[i] = !strcmp(ap, "SAME_UPPER") ? tot / 2 : tot - tot / 2;
      w->pe[i] = tot - w->pb[i];
    } else if (!strcmp(ap, "VALID")) {
      w->pb[i] = w->pe[i] = 0;
    } else if (strcmp(ap, "NOTSET")) {
      lg_fail(k, TS_EUNSUPPORTED, n, "auto_pad='%s'", ap);
      return false;
    }
  }
  return true;
}

/* Input coordinate along spatial axis s: "i<2+s> * st + r<rv> * dil - pb". */
static void win_coord(tb *b, const win *w, int s, int rv) {
  tb_printf(b, "i%d", 2 + s);
  if (w->st[s] != 1) tb_printf(b, " * %" PRId64, w->st[s]);
  tb_printf(b, " + r%d", rv);
  if (w->dil[s] != 1) tb_printf(b, " * %" PRId64, w->dil[s]);
  if (w->pb[s]) tb_printf(b, " - %" PRId64, w->pb[s]);
}

/* " where e >= 0 && e < H ..." for the axes whose window can leave the input. */
static void window_where(lg_kernel *k, tb *b, const win *w, const tg_value *x, const tg_value *y, int rv0) {
  bool any = false;
  char s[48];
  for (int i = 0; i < w->ns; i++) {
    tg_dim H = x->dims[2 + i], P = y->dims[2 + i];
    bool may = w->pb[i] > 0 || H.sym || P.sym ||
               (P.value - 1) * w->st[i] + (w->kern[i] - 1) * w->dil[i] - w->pb[i] >= H.value;
    if (!may) continue;
    tb e;
    tb_reset(&e);
    win_coord(&e, w, i, rv0 + i);
    tb_printf(b, "%s%s >= 0 && %s < %s", any ? " && " : " where ", e.s, e.s, lg_dim_s(k, H, s));
    any = true;
  }
}

/* Conv and ConvTranspose with a bias (input 2) accumulate into O_conv (its
 * name written to cv) and add the bias per output channel after; without
 * one they accumulate into o. Returns the accumulator. */
static const char *conv_acc(lg_kernel *k, const tg_node *n, const char *o, char *cv, size_t ncv) {
  if (n->nin <= 2 || n->inputs[2] < 0) return o;
  lg_tmpname(cv, ncv, o, "conv");
  lg_let(k, cv, n->outputs[0]);
  return cv;
}

/* o = acc + bias[i1] when conv_acc chose a temporary (rank r). */
static void conv_bias(lg_kernel *k, const char *const *in, const char *o, const char *acc, int r) {
  if (acc == o) return;
  tb b;
  tb_reset(&b);
  lg_lhs(&b, o, r);
  tb_printf(&b, " = ");
  lg_lhs(&b, acc, r);
  tb_printf(&b, " + %s[i1]", in[2]);
  lg_stmt(k, &b);
}

/* A 4-D view [N, C, H, W] of a blocked [N, C/b, H, W, b] value (the
 * window helpers read only the spatial dims). */
static tg_value plain_view(const tg_value *v) {
  tg_value t = *v;
  if (v->ndim == 5) t.ndim = 4;
  return t;
}

/* The Winograd F(m x m, 3x3) form the winograd pass prepared (m the node's
 * tessel.winograd, 4 or 2; alpha = m + 2; in: x, U[alpha,alpha,C,K], bias or
 * NULL, BT[alpha,alpha], AT[m,alpha]): a zero-padded copy of x covering
 * whole tiles; the input transform in two separable steps (rows, then
 * columns); alpha^2 independent matmuls over the channels, laid out like a
 * matmul with the output channels innermost; the output transform in two
 * steps, the second writing the NCHW output. Tiles of m x m outputs each,
 * an image's on one axis t = th_i * tw + tw_i (the matmuls' rows). With tessel.nchwc = b (the nchwc pass), x and y are the
 * blocked [N, C/b, H, W, b] and [N, K/b, OH, OW, b]: the padded copy reads
 * x's blocks and the last step writes y's, the output-channel block
 * innermost (contiguous in the matmul's result). */
static void emit_conv_winograd(lg_kernel *k, const tg_node *n, const char *const *in, const char *o) {
  const tg_value *x = V(k, n->inputs[0]), *uv = V(k, n->inputs[1]), *y = OUTV(0);
  int64_t bk = tg_attr_int(n, "tessel.nchwc", 0);
  if (bk > 0 && (x->ndim != 5 || y->ndim != 5 || x->dims[4].sym || x->dims[4].value != bk || y->dims[4].sym ||
                 y->dims[4].value != bk)) {
    lg_fail(k, TS_EINVAL, n, "blocked winograd form whose input or output is not blocked by %" PRId64, bk);
    return;
  }
  tg_value x4 = plain_view(x), y4 = plain_view(y);
  win w;
  if (!get_win(k, n, &x4, &y4, (const int64_t[]){3, 3}, &w)) return;
  int64_t pt = w.pb[0], pl = w.pb[1];
  if (uv->ndim != 4 || uv->dims[2].sym || uv->dims[3].sym || x->dims[2].sym || x->dims[3].sym || y->dims[2].sym ||
      y->dims[3].sym) {
    lg_fail(k, TS_EINVAL, n, "winograd form with unexpected shapes");
    return;
  }
  /* the form: output tiles m x m from alpha x alpha input tiles */
  int64_t m = tg_attr_int(n, "tessel.winograd", 4), al = m + 2;
  if (uv->dims[0].sym || uv->dims[0].value != al) {
    lg_fail(k, TS_EINVAL, n, "winograd form F(%" PRId64 "x%" PRId64 ", 3x3) with transformed weights not %" PRId64 " wide",
            m, m, al);
    return;
  }
  int64_t C = uv->dims[2].value, K = uv->dims[3].value;
  int64_t H = x->dims[2].value, W = x->dims[3].value, OH = y->dims[2].value, OW = y->dims[3].value;
  int64_t th = (OH + m - 1) / m, tw = (OW + m - 1) / m;
  char cv[96], xp[96], t1[96], tv[96], tm[96], to[96];
  const char *dst = conv_acc(k, n, o, cv, sizeof cv);
  lg_tmpname(xp, sizeof xp, o, "wpad");
  lg_tmpname(t1, sizeof t1, o, "wrow");
  lg_tmpname(tv, sizeof tv, o, "wv");
  lg_tmpname(tm, sizeof tm, o, "wm");
  lg_tmpname(to, sizeof to, o, "wo");
  tg_dim N = x->dims[0];
  /* the padded input channels-last, so that every transform reads and
   * writes whole channel vectors */
  tg_dim pd[4] = {N, {th * m + 2, NULL}, {tw * m + 2, NULL}, {C, NULL}};
  lg_let_dims(k, xp, x->dtype, 4, pd);
  /* an image's tiles on one axis t = th_i * tw + tw_i: the matmuls' rows,
   * which the register tile splits (7 x 7 tiles have a divisor that 7 has not) */
  tg_dim vd[5] = {{al, NULL}, {al, NULL}, N, {th * tw, NULL}, {C, NULL}};
  lg_let_dims(k, t1, x->dtype, 5, vd);
  lg_let_dims(k, tv, x->dtype, 5, vd);
  vd[4] = (tg_dim){K, NULL};
  lg_let_dims(k, tm, x->dtype, 5, vd);
  vd[0] = (tg_dim){m, NULL};
  lg_let_dims(k, to, x->dtype, 5, vd);
  tb b;
  tb_reset(&b);
  char xc[64];
  if (bk > 0) snprintf(xc, sizeof xc, "i3 // %" PRId64, bk);
  else snprintf(xc, sizeof xc, "i3");
  tb_printf(&b,
            "%s[i0, i1, i2, i3] = select(i1 - %" PRId64 " >= 0 && i1 - %" PRId64 " < %" PRId64 " && i2 - %" PRId64
            " >= 0 && i2 - %" PRId64 " < %" PRId64 ", %s[i0, %s, min(max(i1 - %" PRId64 ", 0), %" PRId64
            "), min(max(i2 - %" PRId64 ", 0), %" PRId64 ")",
            xp, pt, pt, H, pl, pl, W, in[0], xc, pt, H - 1, pl, W - 1);
  if (bk > 0) tb_printf(&b, ", i3 %% %" PRId64, bk);
  tb_printf(&b, "], 0.0)");
  lg_stmt(k, &b);
  /* the input transform, rows then columns (separable: 2 x 6 terms, not 36) */
  tb_reset(&b);
  tb_printf(&b,
            "%s[i0, i1, i2, i3, i4] += %s[i0, r0] * %s[i2, (i3 // %" PRId64 ") * %" PRId64 " + r0, (i3 %% %" PRId64
            ") * %" PRId64 " + i1, i4] for r0 in 0..%" PRId64,
            t1, in[3], xp, tw, m, tw, m, al);
  lg_stmt(k, &b);
  tb_reset(&b);
  tb_printf(&b, "%s[i0, i1, i2, i3, i4] += %s[i0, r0, i2, i3, i4] * %s[i1, r0] for r0 in 0..%" PRId64, tv, t1, in[3],
            al);
  lg_stmt(k, &b);
  tb_reset(&b);
  tb_printf(&b, "%s[i0, i1, i2, i3, i4] += %s[i0, i1, i2, i3, r0] * %s[i0, i1, r0, i4] for r0 in 0..%" PRId64, tm, tv,
            in[1], C);
  lg_stmt(k, &b);
  tb_reset(&b);
  tb_printf(&b, "%s[i0, i1, i2, i3, i4] += %s[i0, r0] * %s[r0, i1, i2, i3, i4] for r0 in 0..%" PRId64, to, in[4], tm,
            al);
  lg_stmt(k, &b);
  tb_reset(&b);
  lg_lhs(&b, dst, bk > 0 ? 5 : 4);
  char kc[64];
  if (bk > 0) snprintf(kc, sizeof kc, "i1 * %" PRId64 " + i4", bk);
  else snprintf(kc, sizeof kc, "i1");
  tb_printf(&b,
            " += %s[i2 %% %" PRId64 ", r0, i0, (i2 // %" PRId64 ") * %" PRId64 " + i3 // %" PRId64 ", %s] * %s[i3 %% %" PRId64
            ", r0] for r0 in 0..%" PRId64,
            to, m, m, tw, m, kc, in[4], m, al);
  lg_stmt(k, &b);
  if (bk <= 0 || dst == o) {
    conv_bias(k, in, o, dst, 4);
    return;
  }
  tb_reset(&b);
  lg_lhs(&b, o, 5);
  tb_printf(&b, " = ");
  lg_lhs(&b, dst, 5);
  tb_printf(&b, " + %s[%s]", in[2], kc);
  lg_stmt(k, &b);
}

/* "dst[i0, ..] += PRE src[i0, <input channel>": r0 within the output
 * channel's group (PRE "i32(" for the integer convolution, else "") */
static void conv_lhs_chan(tb *b, const char *dst, int r, const char *pre, const char *src, int64_t g, int64_t M,
                          int64_t cg) {
  tb_reset(b);
  lg_lhs(b, dst, r);
  tb_printf(b, " += %s%s[i0, ", pre, src);
  if (g == 1) tb_printf(b, "r0");
  else tb_printf(b, "(i1 // %" PRId64 ") * %" PRId64 " + r0", M / g, cg);
}

/* One convolution's geometry and input stage, shared by the float
 * convolution and the integer one (ConvInteger, QLinearConv: op_quant.c). */
typedef struct conv_plan {
  const tg_value *x, *wv, *y;
  int r;
  win w;
  int64_t g, cg, M;
  bool pad_stage, poly;
  const char *src; /* what the reduction reads: the input, or its padded copy */
  char xp[96];
} conv_plan;

static bool conv_plan_make(lg_kernel *k, const tg_node *n, int xvid, int wvid, conv_plan *p) {
  p->x = V(k, xvid), p->wv = V(k, wvid), p->y = OUTV(0);
  p->r = p->x->ndim;
  int64_t kern[3];
  for (int i = 0; i < p->r - 2 && i < 3; i++) {
    if (p->wv->dims[2 + i].sym) {
      lg_fail(k, TS_EUNSUPPORTED, n, "symbolic kernel size");
      return false;
    }
    kern[i] = p->wv->dims[2 + i].value;
  }
  if (!get_win(k, n, p->x, p->y, kern, &p->w)) return false;
  p->g = tg_attr_int(n, "group", 1);
  if (p->wv->dims[1].sym || p->wv->dims[0].sym) {
    lg_fail(k, TS_EUNSUPPORTED, n, "symbolic channel counts");
    return false;
  }
  p->cg = p->wv->dims[1].value, p->M = p->wv->dims[0].value;
  if (p->g < 1 || p->M % p->g) {
    lg_fail(k, TS_EINVAL, n, "group=%" PRId64 " does not divide the %" PRId64 " output channels", p->g, p->M);
    return false;
  }
  return true;
}

/* Padding as its own stage (as TVM's data_pad and the built-in conv
 * workloads): the convolution then reads without a guard, and the search
 * places (or keeps) the pad stage. Needs constant spatial sizes; else the
 * guard stays in the convolution. padval is the padding's value ("0.0", or
 * the integer convolution's x zero point). Sets p->src. */
static void conv_input_stage(lg_kernel *k, conv_plan *p, const char *xin, const char *o, const char *padval) {
  const tg_value *x = p->x, *y = p->y;
  win *w = &p->w;
  bool guard = false, konst = true;
  int64_t pext[3] = {0, 0, 0};
  for (int s = 0; s < w->ns; s++) {
    tg_dim H = x->dims[2 + s], P = y->dims[2 + s];
    if (H.sym || P.sym) {
      konst = false;
      continue;
    }
    pext[s] = (P.value - 1) * w->st[s] + (w->kern[s] - 1) * w->dil[s] + 1;
    guard = guard || w->pb[s] > 0 || pext[s] - w->pb[s] > H.value;
  }
  p->pad_stage = guard && konst && w->ns <= 3;
  p->src = xin;
  /* A strided 2-d convolution reads its padded input in polyphase order,
   * xp[n, c, p, q, h', w'] = padded x[n, c, h'*sh + p, w'*sw + q]: the output
   * column i3 then reads xp[.., i3 + s // sw] at unit stride (the plain order
   * reads x[.., i3*sw + s], a gather once the output width is vectorised). */
  p->poly = p->pad_stage && w->ns == 2 && (w->st[0] > 1 || w->st[1] > 1) && w->dil[0] == 1 && w->dil[1] == 1 &&
            !k->g->opts.polyphase_off; /* --polyphase off: the plain order (comparisons) */
  if (p->poly) {
    lg_tmpname(p->xp, sizeof p->xp, o, "pad");
    tg_dim pd[6] = {x->dims[0], x->dims[1], {w->st[0], NULL}, {w->st[1], NULL},
                    {y->dims[2].value + (w->kern[0] - 1) / w->st[0], NULL},
                    {y->dims[3].value + (w->kern[1] - 1) / w->st[1], NULL}};
    lg_let_dims(k, p->xp, x->dtype, 6, pd);
    tb b;
    tb_reset(&b);
    char hb[48], wb[48];
    const char *hs = lg_dim_s(k, x->dims[2], hb), *ws = lg_dim_s(k, x->dims[3], wb);
    lg_lhs(&b, p->xp, 6);
    tb_printf(&b,
              " = select(i4 * %" PRId64 " + i2 - %" PRId64 " >= 0 && i4 * %" PRId64 " + i2 - %" PRId64
              " < %s && i5 * %" PRId64 " + i3 - %" PRId64 " >= 0 && i5 * %" PRId64 " + i3 - %" PRId64
              " < %s, %s[i0, i1, min(max(i4 * %" PRId64 " + i2 - %" PRId64 ", 0), %s - 1), min(max(i5 * %" PRId64
              " + i3 - %" PRId64 ", 0), %s - 1)], %s)",
              w->st[0], w->pb[0], w->st[0], w->pb[0], hs, w->st[1], w->pb[1], w->st[1], w->pb[1], ws, xin, w->st[0],
              w->pb[0], hs, w->st[1], w->pb[1], ws, padval);
    lg_stmt(k, &b);
    p->src = p->xp;
    return;
  }
  if (p->pad_stage) {
    lg_tmpname(p->xp, sizeof p->xp, o, "pad");
    tg_dim pd[5];
    pd[0] = x->dims[0];
    pd[1] = x->dims[1];
    for (int s = 0; s < w->ns; s++) pd[2 + s] = (tg_dim){pext[s], NULL};
    lg_let_dims(k, p->xp, x->dtype, 2 + w->ns, pd);
    tb b;
    tb_reset(&b);
    lg_lhs(&b, p->xp, 2 + w->ns);
    tb_printf(&b, " = select(");
    char hs[48];
    for (int s = 0; s < w->ns; s++)
      tb_printf(&b, "%si%d - %" PRId64 " >= 0 && i%d - %" PRId64 " < %s", s ? " && " : "", 2 + s, w->pb[s], 2 + s,
                w->pb[s], lg_dim_s(k, x->dims[2 + s], hs));
    /* the load's indices clamped too: safe even where a select is eager */
    tb_printf(&b, ", %s[i0, i1", xin);
    for (int s = 0; s < w->ns; s++)
      tb_printf(&b, ", min(max(i%d - %" PRId64 ", 0), %s - 1)", 2 + s, w->pb[s], lg_dim_s(k, x->dims[2 + s], hs));
    tb_printf(&b, "], %s)", padval);
    lg_stmt(k, &b);
    p->src = p->xp;
    for (int s = 0; s < w->ns; s++) w->pb[s] = 0; /* the conv indexes the padded input */
  }
}

/* "dst[...] += PRE src[...window...] (* PRE win[i1, r...]) where .. for r..":
 * the convolution's reduction over the window (with win), or the window sum
 * of the input per group (win NULL, g groups as dst's axis 1). PRE wraps
 * each load in an i32 cast when `cast`. */
static void conv_reduce(lg_kernel *k, const conv_plan *p, const char *dst, int64_t g, int64_t M, const char *win_in,
                        bool cast) {
  const char *pre = cast ? "i32(" : "", *post = cast ? ")" : "";
  const win *w = &p->w;
  tb b;
  conv_lhs_chan(&b, dst, p->r, pre, p->src, g, M, p->cg);
  if (p->poly) {
    tb_printf(&b, ", r1 %% %" PRId64 ", r2 %% %" PRId64 ", i2 + r1 // %" PRId64 ", i3 + r2 // %" PRId64 "]%s", w->st[0],
              w->st[1], w->st[0], w->st[1], post);
  } else {
    for (int s = 0; s < w->ns; s++) {
      tb_printf(&b, ", ");
      win_coord(&b, w, s, 1 + s);
    }
    tb_printf(&b, "]%s", post);
  }
  if (win_in) {
    tb_printf(&b, " * %s%s[i1, r0", pre, win_in);
    for (int s = 0; s < w->ns; s++) tb_printf(&b, ", r%d", 1 + s);
    tb_printf(&b, "]%s", post);
  }
  if (!p->pad_stage) window_where(k, &b, w, p->x, p->y, 1);
  tb_printf(&b, " for r0 in 0..%" PRId64, p->cg);
  for (int s = 0; s < w->ns; s++) tb_printf(&b, ", r%d in 0..%" PRId64, 1 + s, w->kern[s]);
  lg_stmt(k, &b);
}

/* ---- the channel-blocked forms (the nchwc pass, nchwc.c) ---- */

/* A blocked convolution's groups, 1 for a depthwise one (its own form). */
static int64_t dw_group_or_1(const tg_node *n, const tg_value *wv) {
  return wv->ndim == 4 ? 1 : tg_attr_int(n, "group", 1);
}

/* The blocked convolution (tessel.nchwc = b, tessel.nchwc_cb = cb): x
 * [N, C/cb, H, W, cb] (or plain [N, C, H, W] when cb = 1), w
 * [K/b, C/cb, R, S, cb, b] (grouped: C/group channels; depthwise [C/b, R, S, b]), bias [K], y
 * [N, K/b, P, Q, b]. A padded copy of x when the window leaves it, then the
 * sum with the output-channel block innermost, as the conv2d_nchwc workload. */
static void emit_conv_nchwc(lg_kernel *k, const tg_node *n, const char *const *in, const char *o) {
  const tg_value *x = V(k, n->inputs[0]), *wv = V(k, n->inputs[1]), *y = OUTV(0);
  int64_t b = tg_attr_int(n, "tessel.nchwc", 0), cb = tg_attr_int(n, "tessel.nchwc_cb", b);
  int64_t grp = dw_group_or_1(n, wv);
  bool dw = wv->ndim == 4, plain = x->ndim == 4;
  bool konst = tg_value_is_static(wv);
  for (int i = 1; i < x->ndim; i++) konst = konst && !x->dims[i].sym;
  for (int i = 1; i < y->ndim; i++) konst = konst && !y->dims[i].sym;
  if (y->ndim != 5 || (wv->ndim != 4 && wv->ndim != 6) || (plain && (cb != 1 || dw)) || (!plain && x->ndim != 5) ||
      !konst) {
    lg_fail(k, TS_EINVAL, n, "tessel.nchwc convolution with unexpected shapes");
    return;
  }
  tg_value x4 = plain_view(x), y4 = plain_view(y);
  int64_t kern[2] = {wv->dims[dw ? 1 : 2].value, wv->dims[dw ? 2 : 3].value};
  win w;
  if (!get_win(k, n, &x4, &y4, kern, &w)) return;
  if (w.ns != 2) {
    lg_fail(k, TS_EUNSUPPORTED, n, "tessel.nchwc on a convolution that is not 2-D");
    return;
  }
  int64_t CB = x->dims[1].value, H = x->dims[2].value, W = x->dims[3].value; /* the batch may be symbolic */
  int64_t ph = (y->dims[2].value - 1) * w.st[0] + (w.kern[0] - 1) * w.dil[0] + 1;
  int64_t pw = (y->dims[3].value - 1) * w.st[1] + (w.kern[1] - 1) * w.dil[1] + 1;
  bool guard = w.pb[0] > 0 || w.pb[1] > 0 || ph - w.pb[0] > H || pw - w.pb[1] > W;
  char xp[96], cv[96];
  const char *src = in[0];
  tb bb;
  if (guard) {
    lg_tmpname(xp, sizeof xp, o, "pad");
    tg_dim pd[5] = {x->dims[0], {CB, NULL}, {ph, NULL}, {pw, NULL}, {plain ? 1 : cb, NULL}};
    lg_let_dims(k, xp, x->dtype, 5, pd);
    tb_reset(&bb);
    lg_lhs(&bb, xp, 5);
    tb_printf(&bb,
              " = select(i2 - %" PRId64 " >= 0 && i2 - %" PRId64 " < %" PRId64 " && i3 - %" PRId64
              " >= 0 && i3 - %" PRId64 " < %" PRId64 ", %s[i0, i1, min(max(i2 - %" PRId64 ", 0), %" PRId64
              "), min(max(i3 - %" PRId64 ", 0), %" PRId64 ")%s], 0.0)",
              w.pb[0], w.pb[0], H, w.pb[1], w.pb[1], W, in[0], w.pb[0], H - 1, w.pb[1], W - 1, plain ? "" : ", i4");
    lg_stmt(k, &bb);
    src = xp;
    plain = false; /* the padded copy is 5-D */
  }
  /* without a guard there is no padding: the window starts at i * stride */
  char eh[96], ew[96];
  int rv = dw ? 0 : 1;
  snprintf(eh, sizeof eh, "i2 * %" PRId64 " + r%d * %" PRId64, w.st[0], rv, w.dil[0]);
  snprintf(ew, sizeof ew, "i3 * %" PRId64 " + r%d * %" PRId64, w.st[1], rv + 1, w.dil[1]);
  const char *dst = conv_acc(k, n, o, cv, sizeof cv);
  tb_reset(&bb);
  lg_lhs(&bb, dst, 5);
  if (dw)
    tb_printf(&bb, " += %s[i0, i1, %s, %s, i4] * %s[i1, r0, r1, i4] for r0 in 0..%" PRId64 ", r1 in 0..%" PRId64, src,
              eh, ew, in[1], w.kern[0], w.kern[1]);
  else if (plain)
    tb_printf(&bb, " += %s[i0, r0, %s, %s] * %s[i1, r0, r1, r2, 0, i4] for r0 in 0..%" PRId64 ", r1 in 0..%" PRId64
              ", r2 in 0..%" PRId64,
              src, eh, ew, in[1], CB, w.kern[0], w.kern[1]);
  else if (grp > 1) /* output block i1 is of group i1 / (its group's blocks): that group's input blocks */
    tb_printf(&bb, " += %s[i0, i1 / %" PRId64 " * %" PRId64 " + r0, %s, %s, r3] * %s[i1, r0, r1, r2, r3, i4] for r0 in 0..%" PRId64
              ", r1 in 0..%" PRId64 ", r2 in 0..%" PRId64 ", r3 in 0..%" PRId64,
              src, y->dims[1].value / grp, wv->dims[1].value, eh, ew, in[1], wv->dims[1].value, w.kern[0], w.kern[1], cb);
  else
    tb_printf(&bb, " += %s[i0, r0, %s, %s, r3] * %s[i1, r0, r1, r2, r3, i4] for r0 in 0..%" PRId64
              ", r1 in 0..%" PRId64 ", r2 in 0..%" PRId64 ", r3 in 0..%" PRId64,
              src, eh, ew, in[1], CB, w.kern[0], w.kern[1], cb);
  lg_stmt(k, &bb);
  if (dst == o) return;
  tb_reset(&bb);
  lg_lhs(&bb, o, 5);
  tb_printf(&bb, " = ");
  lg_lhs(&bb, dst, 5);
  tb_printf(&bb, " + %s[i1 * %" PRId64 " + i4]", in[2], b);
  lg_stmt(k, &bb);
}

/* A 2-D MaxPool or AveragePool of a blocked value (tessel.nchwc): x and y [N, C/b, H, W, b]. */
static void emit_avg_divide(lg_kernel *k, const tg_node *n, const win *wp, const tg_value *x, const tg_value *y,
                            const char *o, char *sm, size_t smn, int r, bool dilated);

static void emit_pool_nchwc(lg_kernel *k, const tg_node *n, const int64_t *ks, const char *xin, const char *o, bool avg) {
  const tg_value *x = V(k, n->inputs[0]), *y = OUTV(0);
  tg_value x4 = plain_view(x), y4 = plain_view(y);
  win w;
  if (x->ndim != 5 || y->ndim != 5 || !get_win(k, n, &x4, &y4, ks, &w) || w.ns != 2 ||
      (avg && (w.dil[0] != 1 || w.dil[1] != 1))) {
    if (k->st == TS_OK) lg_fail(k, TS_EUNSUPPORTED, n, "tessel.nchwc on a pool that is not 2-D (or a dilated average)");
    return;
  }
  char sm[96];
  lg_tmpname(sm, sizeof sm, o, "sum");
  if (avg) lg_let(k, sm, n->outputs[0]);
  tb b;
  tb_reset(&b);
  lg_lhs(&b, avg ? sm : o, 5);
  tb_printf(&b, " %s %s[i0, i1, ", avg ? "+=" : "max=", xin);
  win_coord(&b, &w, 0, 0);
  tb_printf(&b, ", ");
  win_coord(&b, &w, 1, 1);
  tb_printf(&b, ", i4]");
  window_where(k, &b, &w, &x4, &y4, 0);
  tb_printf(&b, " for r0 in 0..%" PRId64 ", r1 in 0..%" PRId64, w.kern[0], w.kern[1]);
  lg_stmt(k, &b);
  if (avg) emit_avg_divide(k, n, &w, &x4, &y4, o, sm, sizeof sm, 5, false);
}

void lg_emit_conv(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out) {
  const char *o = out[0];
  int64_t wm = tg_attr_int(n, "tessel.winograd", 0);
  if ((wm == 4 || wm == 2) && n->nin >= 5) {
    emit_conv_winograd(k, n, in, o);
    return;
  }
  if (tg_attr_int(n, "tessel.nchwc", 0)) {
    emit_conv_nchwc(k, n, in, o);
    return;
  }
  conv_plan p;
  if (!conv_plan_make(k, n, n->inputs[0], n->inputs[1], &p)) return;
  char cv[96];
  const char *dst = conv_acc(k, n, o, cv, sizeof cv);
  conv_input_stage(k, &p, in[0], o, "0.0");
  conv_reduce(k, &p, dst, p.g, p.M, in[1], false);
  conv_bias(k, in, o, dst, p.r);
}

bool lg_conv_int(lg_kernel *k, const tg_node *n, int xi, int wi, const char *const *in, const char *o,
                 const char *padval, bool zero_pad, const char *acc, const char *xsum, int64_t *groups) {
  conv_plan p;
  if (!conv_plan_make(k, n, n->inputs[xi], n->inputs[wi], &p)) return false;
  conv_input_stage(k, &p, in[xi], o, padval);
  /* without a pad stage the window's reads outside the input are dropped
   * (a zero), which is the padding only when the x zero point is 0 */
  bool leaves = false;
  for (int s = 0; s < p.w.ns; s++)
    leaves = leaves || p.w.pb[s] > 0 || p.w.pe[s] > 0 || p.x->dims[2 + s].sym || p.y->dims[2 + s].sym;
  if (!p.pad_stage && leaves && !zero_pad) {
    lg_fail(k, TS_EUNSUPPORTED, n, "padding over a symbolic spatial dim with a nonzero x zero point");
    return false;
  }
  conv_reduce(k, &p, acc, p.g, p.M, in[wi], true);
  if (xsum) {
    tg_dim d[5];
    for (int i = 0; i < p.r; i++) d[i] = p.y->dims[i];
    d[1] = (tg_dim){p.g, NULL};
    lg_let_dims(k, xsum, ir_dt(IR_I32), p.r, d);
    conv_reduce(k, &p, xsum, p.g, p.g, NULL, true);
  }
  *groups = p.g;
  return k->st == TS_OK;
}

bool lg_conv_int_nhwc_ok(lg_kernel *k, const tg_node *n, int xi, int wi) {
  const tg_value *x = V(k, n->inputs[xi]), *wv = V(k, n->inputs[wi]), *y = OUTV(0);
  if (x->ndim != 4 || wv->ndim != 4 || y->ndim != 4 || tg_attr_int(n, "group", 1) != 1 ||
      !strcmp(tg_attr_str(n, "auto_pad", "NOTSET"), "SAME_UPPER") ||
      !strcmp(tg_attr_str(n, "auto_pad", "NOTSET"), "SAME_LOWER"))
    return false;
  for (int i = 0; i < 4; i++)
    if (x->dims[i].sym || wv->dims[i].sym || y->dims[i].sym) return false;
  return true;
}

bool lg_conv_int_nhwc(lg_kernel *k, const tg_node *n, int xi, int wi, const char *const *in, const char *o,
                      const char *padval, const char *acc) {
  conv_plan p;
  if (!conv_plan_make(k, n, n->inputs[xi], n->inputs[wi], &p)) return false;
  const win *w = &p.w;
  const tg_value *x = p.x, *y = p.y;
  /* tessel.nhwc (the qdq pass's channels-last region): x and y are already
   * [N, H, W, C]; else both are NCHW and x is transposed here */
  bool cl = tg_attr_int(n, "tessel.nhwc", 0) != 0;
  int hx = cl ? 1 : 2, cx = cl ? 3 : 1;
  int64_t N = x->dims[0].value, C = x->dims[cx].value, H = x->dims[hx].value, W = x->dims[hx + 1].value;
  int64_t ph = (y->dims[hx].value - 1) * w->st[0] + (w->kern[0] - 1) * w->dil[0] + 1;
  int64_t pw = (y->dims[hx + 1].value - 1) * w->st[1] + (w->kern[1] - 1) * w->dil[1] + 1;
  bool guard = w->pb[0] > 0 || w->pb[1] > 0 || ph - w->pb[0] > H || pw - w->pb[1] > W;
  /* x channels-last and padded, one byte stage (none for a channels-last x
   * the window never leaves) */
  char xt[96];
  tb b;
  if (cl && !guard) {
    snprintf(xt, sizeof xt, "%s", in[xi]);
  } else {
    lg_tmpname(xt, sizeof xt, o, "nhwc");
    tg_dim td[4] = {{N, NULL}, {ph, NULL}, {pw, NULL}, {C, NULL}};
    lg_let_dims(k, xt, x->dtype, 4, td);
    tb_reset(&b);
    lg_lhs(&b, xt, 4);
    if (guard) {
      tb_printf(&b,
                " = select(i1 - %" PRId64 " >= 0 && i1 - %" PRId64 " < %" PRId64 " && i2 - %" PRId64
                " >= 0 && i2 - %" PRId64 " < %" PRId64 ", %s[i0, ",
                w->pb[0], w->pb[0], H, w->pb[1], w->pb[1], W, in[xi]);
      if (!cl) tb_printf(&b, "i3, ");
      tb_printf(&b, "min(max(i1 - %" PRId64 ", 0), %" PRId64 "), min(max(i2 - %" PRId64 ", 0), %" PRId64 ")%s], %s)",
                w->pb[0], H - 1, w->pb[1], W - 1, cl ? ", i3" : "", padval);
    } else {
      tb_printf(&b, " = %s[i0, i3, i1, i2]", in[xi]);
    }
    lg_stmt(k, &b);
  }
  /* acc[n, p, q, m]: the window taps, then the channel, innermost */
  tg_dim ad[4] = {y->dims[0], y->dims[hx], y->dims[hx + 1], y->dims[cx]};
  lg_let_dims(k, acc, ir_dt(IR_I32), 4, ad);
  tb_reset(&b);
  lg_lhs(&b, acc, 4);
  tb_printf(&b, " += i32(%s[i0, i1", xt);
  if (w->st[0] != 1) tb_printf(&b, " * %" PRId64, w->st[0]);
  tb_printf(&b, " + r0");
  if (w->dil[0] != 1) tb_printf(&b, " * %" PRId64, w->dil[0]);
  tb_printf(&b, ", i2");
  if (w->st[1] != 1) tb_printf(&b, " * %" PRId64, w->st[1]);
  tb_printf(&b, " + r1");
  if (w->dil[1] != 1) tb_printf(&b, " * %" PRId64, w->dil[1]);
  tb_printf(&b, ", r2]) * i32(%s[i3, r2, r0, r1]) for r0 in 0..%" PRId64 ", r1 in 0..%" PRId64 ", r2 in 0..%" PRId64,
            in[wi], w->kern[0], w->kern[1], C);
  lg_stmt(k, &b);
  return k->st == TS_OK;
}

void lg_emit_conv_transpose(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out) {
  const char *o = out[0];
  const tg_value *x = V(k, n->inputs[0]), *wv = V(k, n->inputs[1]), *y = OUTV(0);
  int r = x->ndim;
  int64_t group = tg_attr_int(n, "group", 1);
  int64_t kern[3];
  for (int i = 0; i < r - 2 && i < 3; i++) {
    if (wv->dims[2 + i].sym || wv->dims[0].sym) {
      lg_fail(k, TS_EUNSUPPORTED, n, "symbolic kernel size or channel count");
      return;
    }
    kern[i] = wv->dims[2 + i].value;
  }
  win w;
  if (!get_win(k, n, x, y, kern, &w)) return;
  if (!strcmp(tg_attr_str(n, "auto_pad", "NOTSET"), "SAME_UPPER") ||
      !strcmp(tg_attr_str(n, "auto_pad", "NOTSET"), "SAME_LOWER")) {
    lg_fail(k, TS_EUNSUPPORTED, n, "auto_pad SAME for ConvTranspose");
    return;
  }
  for (int s = 0; s < w.ns; s++)
    if (x->dims[2 + s].sym) {
      lg_fail(k, TS_EUNSUPPORTED, n, "a symbolic spatial dim");
      return;
    }
  int64_t cg = wv->dims[0].value / group, mg = wv->dims[1].value; /* input and output channels per group */
  char cv[96];
  const char *dst = conv_acc(k, n, o, cv, sizeof cv);
  /* output y gets input h when y + pb - rk * dilation == h * stride; with groups, output
   * channel i1 reads the input channels of its group (i1 // mg) */
  tb b, cond, ch;
  tb_reset(&b);
  tb_reset(&cond);
  tb_reset(&ch);
  if (group == 1) tb_printf(&ch, "r0");
  else tb_printf(&ch, "i1 // %" PRId64 " * %" PRId64 " + r0", mg, cg);
  lg_lhs(&b, dst, r);
  tb_printf(&b, " += %s[i0, %s", in[0], ch.s);
  for (int s = 0; s < w.ns; s++) {
    int64_t H = x->dims[2 + s].value, st = w.st[s];
    char t[96], rk[48];
    if (w.dil[s] == 1) snprintf(rk, sizeof rk, "r%d", 1 + s);
    else snprintf(rk, sizeof rk, "r%d * %" PRId64, 1 + s, w.dil[s]);
    snprintf(t, sizeof t, "i%d + %" PRId64 " - %s", 2 + s, w.pb[s], rk);
    if (st == 1) {
      tb_printf(&b, ", %s", t);
      tb_printf(&cond, "%s%s >= 0 && %s < %" PRId64, s ? " && " : "", t, t, H);
    } else {
      tb_printf(&b, ", (%s) // %" PRId64, t, st);
      tb_printf(&cond, "%s(%s) %% %" PRId64 " == 0 && %s >= 0 && %s < %" PRId64, s ? " && " : "", t, st, t, t,
                H * st);
    }
  }
  if (group == 1) tb_printf(&b, "] * %s[r0, i1", in[1]);
  else tb_printf(&b, "] * %s[%s, i1 %% %" PRId64, in[1], ch.s, mg);
  for (int s = 0; s < w.ns; s++) tb_printf(&b, ", r%d", 1 + s);
  tb_printf(&b, "] where %s for r0 in 0..%" PRId64, cond.s, cg);
  for (int s = 0; s < w.ns; s++) tb_printf(&b, ", r%d in 0..%" PRId64, 1 + s, w.kern[s]);
  lg_stmt(k, &b);
  conv_bias(k, in, o, dst, r);
}

/* The count temporary's name for output o, into buf. */
static const char *pool_count_name(const char *o, char *buf, size_t n) {
  lg_tmpname(buf, n, o, "count");
  return buf;
}

/* A dilated AveragePool's divisor per output, O_count: the window taps
 * inside the input (count_include_pad=0) or inside the padded input
 * (count_include_pad=1), counted tap by tap. */
static void pool_count(lg_kernel *k, const tg_node *n, const win *w, const tg_value *x, const char *o, bool incl) {
  char cnt[96], s[48];
  pool_count_name(o, cnt, sizeof cnt);
  lg_let(k, cnt, n->outputs[0]);
  tb b;
  tb_reset(&b);
  lg_lhs(&b, cnt, x->ndim);
  tb_printf(&b, " += %s(1) where ", dtn(V(k, n->outputs[0])->dtype));
  for (int a = 0; a < w->ns; a++) {
    tb e;
    tb_reset(&e);
    win_coord(&e, w, a, a);
    tb_printf(&b, "%s%s >= %" PRId64 " && %s < %s", a ? " && " : "", e.s, incl ? -w->pb[a] : 0, e.s,
              lg_dim_s(k, x->dims[2 + a], s));
    if (incl) tb_printf(&b, " + %" PRId64, w->pe[a]);
  }
  for (int a = 0; a < w->ns; a++) tb_printf(&b, "%s r%d in 0..%" PRId64, a ? "," : " for", a, w->kern[a]);
  lg_stmt(k, &b);
}

/* A 2-D MaxPool channels-last (tessel.nhwc, the qdq pass's int8 region):
 * x and y [N, H, W, C], the window over axes 1 and 2. */
static void emit_max_pool_nhwc(lg_kernel *k, const tg_node *n, const win *w, const tg_value *x, const tg_value *y,
                               const char *xin, const char *o) {
  if (w->ns != 2 || x->ndim != 4) {
    lg_fail(k, TS_EUNSUPPORTED, n, "tessel.nhwc on a pool that is not 2-D");
    return;
  }
  tb b, e[2];
  for (int s = 0; s < 2; s++) {
    tb_reset(&e[s]);
    tb_printf(&e[s], "i%d", 1 + s);
    if (w->st[s] != 1) tb_printf(&e[s], " * %" PRId64, w->st[s]);
    tb_printf(&e[s], " + r%d", s);
    if (w->dil[s] != 1) tb_printf(&e[s], " * %" PRId64, w->dil[s]);
    if (w->pb[s]) tb_printf(&e[s], " - %" PRId64, w->pb[s]);
  }
  tb_reset(&b);
  lg_lhs(&b, o, 4);
  tb_printf(&b, " max= %s[i0, %s, %s, i3]", xin, e[0].s, e[1].s);
  bool any = false;
  char sz[48];
  for (int s = 0; s < 2; s++) {
    tg_dim H = x->dims[1 + s], P = y->dims[1 + s];
    bool may = w->pb[s] > 0 || H.sym || P.sym ||
               (P.value - 1) * w->st[s] + (w->kern[s] - 1) * w->dil[s] - w->pb[s] >= H.value;
    if (!may) continue;
    tb_printf(&b, "%s%s >= 0 && %s < %s", any ? " && " : " where ", e[s].s, e[s].s, lg_dim_s(k, H, sz));
    any = true;
  }
  tb_printf(&b, " for r0 in 0..%" PRId64 ", r1 in 0..%" PRId64, w->kern[0], w->kern[1]);
  lg_stmt(k, &b);
}

/* An average pool's o = sm / the taps counted (r dims, the spatial ones
 * i2.., x and y plain or plain views of blocked forms). */
static void emit_avg_divide(lg_kernel *k, const tg_node *n, const win *wp, const tg_value *x, const tg_value *y,
                            const char *o, char *sm, size_t smn, int r, bool dilated) {
  win w = *wp;
  tb b;
  tb_reset(&b);
  lg_lhs(&b, o, r);
  tb_printf(&b, " = ");
  lg_lhs(&b, sm, r);
  bool incl = tg_attr_int(n, "count_include_pad", 0) != 0;
  int64_t taps = 1;
  for (int s = 0; s < w.ns; s++) taps *= w.kern[s];
  bool pads = false;
  for (int s = 0; s < w.ns; s++) {
    /* ceil_mode's last window can pass the end without any padding */
    tg_dim H = x->dims[2 + s], P = y->dims[2 + s];
    pads |= w.pb[s] || w.pe[s] || H.sym || P.sym || (P.value - 1) * w.st[s] + w.kern[s] - w.pb[s] > H.value;
  }
  if (dilated) {
    pool_count(k, n, &w, x, o, incl);
    tb_printf(&b, " / ");
    lg_lhs(&b, pool_count_name(o, sm, smn), r);
  } else if (incl || !pads) {
    char l[48];
    tb_printf(&b, " / %s", lit(y->dtype, (double)taps, l));
  } else {
    /* count of taps inside the input, per output: prod over axes of
     * min(o*st - pb + k, H) - max(o*st - pb, 0) */
    tb_printf(&b, " / %s(", dtn(y->dtype));
    char s[48];
    for (int a = 0; a < w.ns; a++) {
      tb_printf(&b, "%s(min(i%d * %" PRId64 " - %" PRId64 " + %" PRId64 ", %s) - max(i%d * %" PRId64 " - %" PRId64
                ", 0))",
                a ? " * " : "", 2 + a, w.st[a], w.pb[a], w.kern[a], lg_dim_s(k, x->dims[2 + a], s), 2 + a, w.st[a],
                w.pb[a]);
    }
    tb_printf(&b, ")");
  }
  lg_stmt(k, &b);
}

void lg_emit_pool(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out) {
  tg_op op = lg_node_op(n);
  const char *o = out[0];
  const tg_value *x = V(k, n->inputs[0]), *y = OUTV(0);
  int r = x->ndim - (tg_attr_int(n, "tessel.nchwc", 0) ? 1 : 0), c; /* a blocked x has 2 + 3 dims */
  const int64_t *ks = tg_attr_ints(n, "kernel_shape", &c);
  if (!ks || c != r - 2) {
    lg_fail(k, TS_EINVAL, n, "kernel_shape missing or of the wrong length");
    return;
  }
  if (tg_attr_int(n, "tessel.nchwc", 0)) {
    if ((op != TG_OP_MAX_POOL && op != TG_OP_AVERAGE_POOL) || (n->nout > 1 && n->outputs[1] >= 0) || c != 2)
      lg_fail(k, TS_EUNSUPPORTED, n, "tessel.nchwc on this pool");
    else emit_pool_nchwc(k, n, ks, in[0], o, op == TG_OP_AVERAGE_POOL);
    return;
  }
  win w;
  if (!get_win(k, n, x, y, ks, &w)) return;
  if (tg_attr_int(n, "tessel.nhwc", 0)) {
    if (op != TG_OP_MAX_POOL || (n->nout > 1 && n->outputs[1] >= 0)) lg_fail(k, TS_EUNSUPPORTED, n, "tessel.nhwc on this pool");
    else emit_max_pool_nhwc(k, n, &w, x, y, in[0], o);
    return;
  }
  if (n->nout > 1 && n->outputs[1] >= 0) {
    lg_fail(k, TS_EUNSUPPORTED, n, "the Indices output of MaxPool");
    return;
  }
  tb b;
  tb_reset(&b);
  bool avg = op == TG_OP_AVERAGE_POOL;
  char sm[96];
  lg_tmpname(sm, sizeof sm, o, "sum");
  bool dilated = false;
  for (int s = 0; s < w.ns; s++) dilated |= w.dil[s] != 1;
  if (avg) lg_let(k, sm, n->outputs[0]);
  lg_lhs(&b, avg ? sm : o, r);
  tb_printf(&b, " %s %s[i0, i1", avg ? "+=" : "max=", in[0]);
  for (int s = 0; s < w.ns; s++) {
    tb_printf(&b, ", ");
    win_coord(&b, &w, s, s);
  }
  tb_printf(&b, "]");
  window_where(k, &b, &w, x, y, 0);
  for (int s = 0; s < w.ns; s++) tb_printf(&b, "%s r%d in 0..%" PRId64, s ? "," : " for", s, w.kern[s]);
  lg_stmt(k, &b);
  if (avg) emit_avg_divide(k, n, &w, x, y, o, sm, sizeof sm, r, dilated);
}

void lg_emit_global_avg(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out) {
  const char *o = out[0];
  const tg_value *x = V(k, n->inputs[0]);
  int r = x->ndim;
  bool red[8] = {false};
  for (int a = 2; a < r; a++) red[a] = true;
  tg_dim kd[8] = {{0}}; /* kept_dims fills nk (GCC cannot see it) */
  int nk = lg_kept_dims(x, red, kd);
  char sm[96];
  lg_tmpname(sm, sizeof sm, o, "sum");
  lg_let_dims(k, sm, x->dtype, nk, kd);
  lg_reduce_stmt(k, sm, "+=", in[0], x, red);
  tb b;
  tb_reset(&b);
  lg_lhs(&b, o, r);
  tb_printf(&b, " = ");
  lg_kept_index(&b, sm, r, red);
  tb_printf(&b, " / ");
  lg_red_count(k, &b, x, red, x->dtype);
  lg_stmt(k, &b);
}
