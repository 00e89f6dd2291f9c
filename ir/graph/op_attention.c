/* op_attention.c — ONNX Attention and RotaryEmbedding (opset 23; what torch's
 * exporter writes for scaled_dot_product_attention and Llama-style rotary
 * position embeddings from opset 23 on), each imported as the subgraph of
 * its function body: the 3-D forms split into heads, the past key and value
 * concatenated, Q and K scaled by sqrt(scale), grouped-query heads repeated,
 * MatMul, softcap, the additive bias of the mask (bool or float, shorter
 * masks padded) and of the bottom-right causal frontier, Softmax, the
 * fully-masked-row guard (such a row is zeros, not NaN), MatMul with V; for
 * RotaryEmbedding the rotation of each head's halves (or pairs) by the cached
 * angles. Each step is an ordinary node imported through the normal path
 * (expand_int.h), so shapes, symbolic sizes and known values follow the
 * ordinary handlers, and fusion sees plain operators.
 * docs/GRAPH.md ("Expanded operators"). */
#include <math.h>
#include <stdio.h>

#include "expand_int.h"

/* [B, S, H * D] -> [B, H, S, D] */
static const char *split_heads(xb *b, const char *x, int64_t heads) {
  static const int64_t perm[] = {0, 2, 1, 3};
  const char *r = XN(b, "Reshape", NULL, x, c_ints(b, (int64_t[]){0, 0, heads, -1}, 4));
  return transpose(b, r, perm, 4, NULL);
}

/* [B, Hkv, X, Y] -> [B, Hkv * g, X, Y], each head repeated g times in place
 * (h0, h0, h1, h1, ...), as numpy's repeat along axis 1 */
static const char *repeat_heads(xb *b, const char *x, int64_t g) {
  const tg_value *v = xv(b, x);
  if (!v) return NULL;
  const char *u = XN(b, "Unsqueeze", NULL, x, c_ints(b, (int64_t[]){2}, 1)); /* opset >= 23: axes is an input */
  const char *e = XN(b, "Expand", NULL, u, c_ints(b, (int64_t[]){1, 1, g, 1, 1}, 5));
  tg_dim h = v->dims[1], last = v->dims[3];
  if (h.sym || last.sym) {
    b->st = imp_nerr(b->im, b->nc, TS_EUNSUPPORTED, "grouped-query attention with a symbolic head count or head size");
    return NULL;
  }
  return XN(b, "Reshape", NULL, e, c_ints(b, (int64_t[]){0, h.value * g, -1, last.value}, 4));
}


ts_status imp_attention(imp *im, nctx *nc) {
  const Onnx__NodeProto *np = nc->np;
  xb b = {.im = im, .nc = nc};
  const tg_value *q = IN(im, nc, 0), *kk = IN(im, nc, 1), *vv = IN(im, nc, 2);
  if (!q || !kk || !vv) return imp_nerr(im, nc, TS_EINVAL, "Q, K and V are required");
  ts_status st = imp_need_float(im, nc, 0);
  if (st) return st;
  if (!ir_dtype_eq(q->dtype, kk->dtype) || !ir_dtype_eq(q->dtype, vv->dtype))
    return imp_nerr(im, nc, TS_ETYPE, "Q, K and V differ in type");
  b.elem = xonnx_type(q);
  int r = q->ndim;
  if ((r != 3 && r != 4) || kk->ndim != r || vv->ndim != r)
    return imp_nerr(im, nc, TS_ESHAPE, "Q, K and V have ranks %d, %d, %d (all 3 or all 4)", q->ndim, kk->ndim, vv->ndim);
  bool has_past = IN(im, nc, 4) != NULL, has_pv = IN(im, nc, 5) != NULL;
  if (has_past != has_pv) return imp_nerr(im, nc, TS_EINVAL, "past_key and past_value come together");
  int64_t mode = aint(nc, "qk_matmul_output_mode", 0);
  if (mode < 0 || mode > 3) return imp_nerr(im, nc, TS_EINVAL, "qk_matmul_output_mode=%" PRId64 " (0 to 3)", mode);
  double softcap = afloat(nc, "softcap", 0.0);
  int64_t causal = aint(nc, "is_causal", 0);
  if (causal != 0 && causal != 1) return imp_nerr(im, nc, TS_EINVAL, "is_causal=%" PRId64 " (0 or 1)", causal);
  int64_t sm_prec = aint(nc, "softmax_precision", 0);
  ir_dtype smt;
  if (sm_prec && (!tg_onnx_dtype((int)sm_prec, &smt) || !is_float(smt)))
    return imp_nerr(im, nc, TS_EUNSUPPORTED, "softmax_precision=%" PRId64 " (a floating-point type)", sm_prec);

  /* heads: [B, H, S, D] */
  const char *Q = np->input[0], *K = np->input[1], *V = np->input[2];
  if (r == 3) {
    int64_t hq = aint(nc, "q_num_heads", 0), hkv = aint(nc, "kv_num_heads", 0);
    if (hq < 1 || hkv < 1 || hq > (1 << 20) || hkv > (1 << 20))
      return imp_nerr(im, nc, TS_EINVAL, "3-D inputs need q_num_heads and kv_num_heads (at least 1), given %" PRId64
                      " and %" PRId64, hq, hkv);
    Q = split_heads(&b, Q, hq);
    K = split_heads(&b, K, hkv);
    V = split_heads(&b, V, hkv);
  }
  if (b.st) return b.st;
  const tg_value *qh = xv(&b, Q), *kh = xv(&b, K);
  if (qh->dims[1].sym || kh->dims[1].sym || qh->dims[3].sym)
    return imp_nerr(im, nc, TS_EUNSUPPORTED, "a symbolic head count or query head size");
  int64_t hq = qh->dims[1].value, hkv = kh->dims[1].value;
  if (hkv < 1 || hq % hkv)
    return imp_nerr(im, nc, TS_ESHAPE, "%" PRId64 " query heads are not a multiple of %" PRId64 " key/value heads", hq, hkv);

  /* the cache: present = Concat(past, new) along the sequence */
  const char *pk = xout(nc, 1), *pv = xout(nc, 2);
  Onnx__AttributeProto *ax2[] = {xa_int(&b, "axis", 2)};
  if (has_past) {
    K = XA(&b, "Concat", pk, ax2, np->input[4], K);
    V = XA(&b, "Concat", pv, ax2, np->input[5], V);
  } else {
    if (pk) K = XN(&b, "Identity", pk, K);
    if (pv) V = XN(&b, "Identity", pv, V);
  }

  /* Q and K^T each scaled by sqrt(scale) */
  double scale = A(nc, "scale") ? afloat(nc, "scale", 1.0) : 1.0 / sqrt((double)qh->dims[3].value);
  const char *rs = c_float(&b, sqrt(scale));
  static const int64_t kt_perm[] = {0, 1, 3, 2};
  const char *Kt = XN(&b, "Mul", NULL, transpose(&b, K, kt_perm, 4, NULL), rs);
  const char *Vr = V;
  if (hq != hkv) {
    Kt = repeat_heads(&b, Kt, hq / hkv);
    Vr = repeat_heads(&b, V, hq / hkv);
  }
  const char *qk = XN(&b, "MatMul", NULL, XN(&b, "Mul", NULL, Q, rs), Kt);
  if (softcap > 0) {
    const char *sc = c_float(&b, softcap);
    qk = XN(&b, "Mul", NULL, XN(&b, "Tanh", NULL, XN(&b, "Div", NULL, qk, sc)), sc);
  }
  if (b.st) return b.st;

  /* the additive bias: the mask's, then the causal frontier's */
  const char *bias = NULL;
  const tg_value *mv = IN(im, nc, 3);
  const char *ninf = NULL, *zero = NULL;
  if (mv || causal) ninf = c_float(&b, -INFINITY), zero = c_float(&b, 0.0);
  const tg_value *kc = xv(&b, K);
  if (mv) {
    bias = np->input[3];
    if (ir_dtype_is_bool(mv->dtype)) bias = XN(&b, "Where", NULL, bias, zero, ninf);
    else if (!ir_dtype_eq(mv->dtype, q->dtype))
      return imp_nerr(im, nc, TS_ETYPE, "attn_mask (%s) is neither bool nor Q's type", mv->name);
    tg_dim ml = mv->ndim ? mv->dims[mv->ndim - 1] : DC(1), kl = kc ? kc->dims[2] : DC(1);
    if (!tg_dim_eq(ml, kl)) { /* shorter than the keys: the rest are masked (-inf) */
      if (ml.sym || kl.sym || ml.value > kl.value || mv->ndim < 1)
        return imp_nerr(im, nc, TS_ESHAPE, "attn_mask's last dim does not match the key length and cannot be padded to it");
      int64_t pads[2 * MAX_RANK] = {0};
      pads[2 * mv->ndim - 1] = kl.value - ml.value;
      bias = XN(&b, "Pad", NULL, bias, c_ints(&b, pads, 2 * mv->ndim), ninf);
    }
  }
  if (causal) { /* query i sees key j iff j <= i + past length */
    const char *one = c_int(&b, 1), *z = c_int(&b, 0);
    const char *nq = XN(&b, "Gather", NULL, XN(&b, "Shape", NULL, Q), c_int(&b, 2));
    const char *nk = XN(&b, "Gather", NULL, XN(&b, "Shape", NULL, K), c_int(&b, 2));
    const char *off = has_past ? XN(&b, "Gather", NULL, XN(&b, "Shape", NULL, np->input[4]), c_int(&b, 2)) : z;
    const char *rq = XN(&b, "Unsqueeze", NULL, XN(&b, "Range", NULL, z, nq, one), c_ints(&b, (int64_t[]){1}, 1));
    const char *ok = XN(&b, "LessOrEqual", NULL, XN(&b, "Range", NULL, z, nk, one), XN(&b, "Add", NULL, rq, off));
    const char *cb = XN(&b, "Where", NULL, ok, zero, ninf);
    bias = bias ? XN(&b, "Add", NULL, bias, cb) : cb;
  }
  const char *qkb = bias ? XN(&b, "Add", NULL, qk, bias) : qk;
  const char *qko = xout(nc, 3);
  if (qko && mode < 2) XN(&b, "Identity", qko, qk);
  if (qko && mode == 2) XN(&b, "Identity", qko, qkb);

  /* softmax over the keys, in softmax_precision when it is another type */
  Onnx__AttributeProto *last[] = {xa_int(&b, "axis", -1)};
  const char *p;
  if (sm_prec && sm_prec != b.elem) {
    Onnx__AttributeProto *to[] = {xa_int(&b, "to", sm_prec)}, *back[] = {xa_int(&b, "to", b.elem)};
    p = XA(&b, "Cast", NULL, back, XA(&b, "Softmax", NULL, last, XA(&b, "Cast", NULL, to, qkb)));
  } else {
    p = XA(&b, "Softmax", NULL, last, qkb);
  }
  if (mv) { /* a row whose bias is -inf throughout attends nothing: zeros, not NaN */
    Onnx__AttributeProto *kd[] = {xa_int(&b, "keepdims", 1)};
    const char *mx = XA(&b, "ReduceMax", NULL, kd, bias, c_ints(&b, (int64_t[]){-1}, 1));
    p = XN(&b, "Where", NULL, XN(&b, "Equal", NULL, mx, ninf), zero, p);
  }
  if (qko && mode == 3) XN(&b, "Identity", qko, p);

  const char *y = xout(nc, 0);
  static const int64_t back[] = {0, 2, 1, 3};
  if (r == 3) XN(&b, "Reshape", y, transpose(&b, XN(&b, "MatMul", NULL, p, Vr), back, 4, NULL), c_ints(&b, (int64_t[]){0, 0, -1}, 3));
  else XN(&b, "MatMul", y, p, Vr);
  if (b.st) return b.st;
  nc->expanded = true;
  return TS_OK;
}

static const char *slice_last(xb *b, const char *x, int64_t start, int64_t end, int64_t step) {
  return XN(b, "Slice", NULL, x, c_ints(b, &start, 1), c_ints(b, &end, 1), c_ints(b, (int64_t[]){-1}, 1),
            c_ints(b, &step, 1));
}

/* RotaryEmbedding (opset 23): the rotary half (or the even/odd pairs, interleaved)
 * of each head rotated by the cached angle of its position: [x1, x2] ->
 * [cos x1 - sin x2, sin x1 + cos x2]; the rest of the head passes through. */
ts_status imp_rotary(imp *im, nctx *nc) {
  const Onnx__NodeProto *np = nc->np;
  xb b = {.im = im, .nc = nc};
  const tg_value *x = IN(im, nc, 0), *cc = IN(im, nc, 1), *sc = IN(im, nc, 2), *pos = IN(im, nc, 3);
  if (!x || !cc || !sc) return imp_nerr(im, nc, TS_EINVAL, "X, cos_cache and sin_cache are required");
  ts_status st = imp_need_float(im, nc, 0);
  if (st) return st;
  if (!ir_dtype_eq(cc->dtype, x->dtype) || !ir_dtype_eq(sc->dtype, x->dtype))
    return imp_nerr(im, nc, TS_ETYPE, "cos_cache and sin_cache differ in type from X");
  if (x->ndim != 3 && x->ndim != 4) return imp_nerr(im, nc, TS_ESHAPE, "X has rank %d (3 or 4)", x->ndim);
  int64_t nh = aint(nc, "num_heads", 0), inter = aint(nc, "interleaved", 0), rd = aint(nc, "rotary_embedding_dim", 0);
  if (inter != 0 && inter != 1) return imp_nerr(im, nc, TS_EINVAL, "interleaved=%" PRId64 " (0 or 1)", inter);
  b.elem = xonnx_type(x);
  /* [B, S, H, D] */
  const char *X = np->input[0];
  static const int64_t swap[] = {0, 2, 1, 3};
  if (x->ndim == 4) {
    X = transpose(&b, X, swap, 4, NULL);
  } else {
    if (nh < 1 || nh > (1 << 20)) return imp_nerr(im, nc, TS_EINVAL, "3-D X needs num_heads (at least 1), given %" PRId64, nh);
    X = XN(&b, "Reshape", NULL, X, c_ints(&b, (int64_t[]){0, 0, nh, -1}, 4));
  }
  const tg_value *x4 = xv(&b, X);
  if (!x4) return b.st;
  if (x4->dims[3].sym) return imp_nerr(im, nc, TS_EUNSUPPORTED, "a symbolic head size");
  int64_t d = x4->dims[3].value;
  if (rd == 0) rd = d;
  if (rd < 2 || rd > d || rd % 2)
    return imp_nerr(im, nc, TS_EINVAL, "rotary_embedding_dim=%" PRId64 " (even, 2 to the head size %" PRId64 ")", rd, d);
  tg_dim half = cc->ndim ? cc->dims[cc->ndim - 1] : DC(0);
  if (half.sym || half.value != rd / 2)
    return imp_nerr(im, nc, TS_ESHAPE, "cos_cache's last dim is not rotary_embedding_dim / 2 = %" PRId64, rd / 2);
  /* the angles: [B, S, rd/2] (gathered by position when position_ids is given), then a heads axis */
  const char *co = np->input[1], *si = np->input[2];
  if (pos) {
    co = XN(&b, "Gather", NULL, co, np->input[3]);
    si = XN(&b, "Gather", NULL, si, np->input[3]);
  }
  const char *ax2 = c_ints(&b, (int64_t[]){2}, 1);
  co = XN(&b, "Unsqueeze", NULL, co, ax2);
  si = XN(&b, "Unsqueeze", NULL, si, ax2);
  const char *xr = rd < d ? slice_last(&b, X, 0, rd, 1) : X;
  const char *x1 = inter ? slice_last(&b, xr, 0, rd, 2) : slice_last(&b, xr, 0, rd / 2, 1);
  const char *x2 = inter ? slice_last(&b, xr, 1, rd, 2) : slice_last(&b, xr, rd / 2, rd, 1);
  const char *re = XN(&b, "Sub", NULL, XN(&b, "Mul", NULL, co, x1), XN(&b, "Mul", NULL, si, x2));
  const char *imv = XN(&b, "Add", NULL, XN(&b, "Mul", NULL, si, x1), XN(&b, "Mul", NULL, co, x2));
  const char *rot;
  if (inter) { /* pairs back in place: [.., rd/2, 2] -> [.., rd] */
    const char *ax4 = c_ints(&b, (int64_t[]){4}, 1);
    Onnx__AttributeProto *c4[] = {xa_int(&b, "axis", 4)};
    rot = XA(&b, "Concat", NULL, c4, XN(&b, "Unsqueeze", NULL, re, ax4), XN(&b, "Unsqueeze", NULL, imv, ax4));
    rot = XN(&b, "Reshape", NULL, rot, c_ints(&b, (int64_t[]){0, 0, 0, rd}, 4));
  } else {
    Onnx__AttributeProto *c3[] = {xa_int(&b, "axis", 3)};
    rot = XA(&b, "Concat", NULL, c3, re, imv);
  }
  if (rd < d) {
    Onnx__AttributeProto *c3[] = {xa_int(&b, "axis", 3)};
    rot = XA(&b, "Concat", NULL, c3, rot, slice_last(&b, X, rd, d, 1));
  }
  const char *y = nc->outname[0];
  if (x->ndim == 4) transpose(&b, rot, swap, 4, y);
  else XN(&b, "Reshape", y, rot, c_ints(&b, (int64_t[]){0, 0, -1}, 3));
  if (b.st) return b.st;
  nc->expanded = true;
  return TS_OK;
}
