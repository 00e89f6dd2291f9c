/* op_mscontrib.c — the com.microsoft operators that onnxruntime's transformer
 * optimizer writes into the models it saves (onnxruntime.transformers
 * .optimizer, Hugging Face optimum's optimised exports): Gelu, BiasGelu,
 * FastGelu, QuickGelu, FusedMatMul, SkipLayerNormalization,
 * SkipSimplifiedLayerNormalization, EmbedLayerNormalization and Attention
 * (packed QKV weights, a mask index), and SimplifiedLayerNormalization, which
 * onnxruntime registers in the default domain. Each is imported as the ordinary
 * operators it stands for (expand_int.h), so a model optimised for
 * onnxruntime builds as its unoptimised form would. docs/GRAPH.md
 * ("Expanded operators"). */
#include <math.h>
#include <stdio.h>

#include "expand_int.h"


/* Refuses a named output this import does not produce. */
static ts_status no_output(imp *im, nctx *nc, int k, const char *what) {
  if (xout(nc, k)) return imp_nerr(im, nc, TS_EUNSUPPORTED, "output %d (%s) is not supported", k, what);
  return TS_OK;
}

static const char *gelu(xb *b, const char *x, const char *approx, const char *out) {
  int save = b->min_opset;
  b->min_opset = 20; /* Gelu exists from 20 */
  Onnx__AttributeProto *at[] = {xa_str(b, "approximate", approx)};
  const char *y = XA(b, "Gelu", out, at, x);
  b->min_opset = save;
  return y;
}

/* LayerNormalization (or RMSNormalization) over the last axis. */
static const char *last_norm(xb *b, nctx *nc, bool rms, const char *x, const char *gamma, const char *beta, const char *out) {
  Onnx__AttributeProto *at[] = {xa_int(b, "axis", -1), xa_float(b, "epsilon", (float)afloat(nc, "epsilon", 1e-12))};
  int save = b->min_opset;
  b->min_opset = rms ? 23 : 17;
  const char *y = rms ? XA(b, "RMSNormalization", out, at, x, gamma)
                      : (beta[0] ? XA(b, "LayerNormalization", out, at, x, gamma, beta) : XA(b, "LayerNormalization", out, at, x, gamma));
  b->min_opset = save;
  return y;
}

/* Swaps the last two axes of x. */
static const char *swap_last(xb *b, const char *x) {
  const tg_value *v = xv(b, x);
  if (!v || v->ndim < 2) return x;
  int64_t perm[MAX_RANK];
  for (int i = 0; i < v->ndim; i++) perm[i] = i;
  perm[v->ndim - 2] = v->ndim - 1;
  perm[v->ndim - 1] = v->ndim - 2;
  return transpose(b, x, perm, v->ndim, NULL);
}

/* com.microsoft Attention: input [B, S, Hin] times the packed weights [Hin,
 * q + k + v] plus bias, split into Q, K, V heads; softmax(Q Kᵀ · scale + mask
 * bias + attention bias) V; heads merged. A 1-D mask_index holds each batch
 * row's number of keys (right padding), a 2-D or 3-D one is a 1/0 mask; masked
 * keys get mask_filter_value, as do later keys with unidirectional=1. */
static ts_status ms_attention(xb *b, imp *im, nctx *nc) {
  const tg_value *x = IN(im, nc, 0), *w = IN(im, nc, 1);
  if (!x || !w || x->ndim != 3 || w->ndim != 2)
    return imp_nerr(im, nc, TS_ESHAPE, "input [B, S, hidden] and weights [hidden, 3 * hidden] are required");
  if (IN(im, nc, 4) || (nc->nin > 6 && IN(im, nc, 6)) || (nc->nin > 7 && IN(im, nc, 7)))
    return imp_nerr(im, nc, TS_EUNSUPPORTED, "past state and past_sequence_length are not supported (no KV cache)");
  ts_status st = no_output(im, nc, 1, "present");
  if (st) return st;
  if (aint(nc, "do_rotary", 0)) return imp_nerr(im, nc, TS_EUNSUPPORTED, "do_rotary=1");
  int64_t nh = aint(nc, "num_heads", 0);
  if (nh < 1 || nh > (1 << 16)) return imp_nerr(im, nc, TS_EINVAL, "num_heads=%" PRId64 " (at least 1)", nh);
  if (w->dims[1].sym) return imp_nerr(im, nc, TS_EUNSUPPORTED, "symbolic weight width");
  int64_t qkv[3];
  int n;
  const int64_t *hs = aints(nc, "qkv_hidden_sizes", &n);
  if (hs) {
    if (n != 3) return imp_nerr(im, nc, TS_EINVAL, "qkv_hidden_sizes has %d entries (3)", n);
    memcpy(qkv, hs, sizeof qkv);
  } else {
    qkv[0] = qkv[1] = qkv[2] = w->dims[1].value / 3;
  }
  if (qkv[0] + qkv[1] + qkv[2] != w->dims[1].value || qkv[0] != qkv[1] || qkv[0] % nh || qkv[2] % nh || qkv[0] < 1)
    return imp_nerr(im, nc, TS_ESHAPE, "q, k, v widths %" PRId64 ", %" PRId64 ", %" PRId64
                    " do not split the weights' %" PRId64 " columns over %" PRId64 " heads", qkv[0], qkv[1], qkv[2],
                    w->dims[1].value, nh);
  const char *y = XN(b, "MatMul", NULL, xin(nc, 0), xin(nc, 1));
  if (xin(nc, 2)[0]) y = XN(b, "Add", NULL, y, xin(nc, 2));
  Onnx__AttributeProto *sp[] = {xa_int(b, "axis", 2)};
  const char *part[3] = {NULL, NULL, NULL};
  xn_outs(b, "Split", 3, part, 2, (const char *[]){y, c_ints(b, qkv, 3)}, 1, sp);
  if (b->st) return b->st;
  static const int64_t heads[] = {0, 2, 1, 3}, kt[] = {0, 2, 3, 1};
  const char *q = transpose(b, XN(b, "Reshape", NULL, part[0], c_ints(b, (int64_t[]){0, 0, nh, -1}, 4)), heads, 4, NULL);
  const char *k = transpose(b, XN(b, "Reshape", NULL, part[1], c_ints(b, (int64_t[]){0, 0, nh, -1}, 4)), kt, 4, NULL);
  const char *v = transpose(b, XN(b, "Reshape", NULL, part[2], c_ints(b, (int64_t[]){0, 0, nh, -1}, 4)), heads, 4, NULL);
  double scale = A(nc, "scale") ? afloat(nc, "scale", 1.0) : 1.0 / sqrt((double)(qkv[0] / nh));
  const char *s = XN(b, "Mul", NULL, XN(b, "MatMul", NULL, q, k), c_float(b, scale)); /* [B, H, S, T] */
  double fill = afloat(nc, "mask_filter_value", -10000.0);
  const tg_value *m = IN(im, nc, 3);
  const char *zero = c_float(b, 0.0), *neg = c_float(b, fill);
  if (m) {
    const char *keep; /* bool, broadcast against [B, H, S, T] */
    if (m->ndim == 1) {
      if (!tg_dim_eq(m->dims[0], x->dims[0]))
        return imp_nerr(im, nc, TS_EUNSUPPORTED, "a 1-D mask_index of other than batch_size entries (start positions)");
      Onnx__AttributeProto *to[] = {xa_int(b, "to", ONNX__TENSOR_PROTO__DATA_TYPE__INT64)};
      const char *len = XN(b, "Unsqueeze", NULL, XA(b, "Cast", NULL, to, xin(nc, 3)), c_ints(b, (int64_t[]){1}, 1));
      const char *t = XN(b, "Gather", NULL, XN(b, "Shape", NULL, k), c_int(b, 3));
      keep = XN(b, "Less", NULL, XN(b, "Range", NULL, c_int(b, 0), t, c_int(b, 1)), len); /* [B, T] */
      keep = XN(b, "Unsqueeze", NULL, keep, c_ints(b, (int64_t[]){1, 2}, 2));
    } else if (m->ndim == 2 || m->ndim == 3) {
      keep = XN(b, "Not", NULL, XN(b, "Equal", NULL, xin(nc, 3), XN(b, "CastLike", NULL, c_int(b, 0), xin(nc, 3))));
      keep = XN(b, "Unsqueeze", NULL, keep, c_ints(b, m->ndim == 2 ? (int64_t[]){1, 2} : (int64_t[]){1}, m->ndim == 2 ? 2 : 1));
    } else {
      return imp_nerr(im, nc, TS_EUNSUPPORTED, "a %d-D mask_index (1-D lengths, 2-D or 3-D 1/0 masks)", m->ndim);
    }
    s = XN(b, "Add", NULL, s, XN(b, "Where", NULL, keep, zero, neg));
  }
  if (aint(nc, "unidirectional", 0)) { /* query i sees keys j <= i */
    const char *one = c_int(b, 1), *z = c_int(b, 0);
    const char *ns = XN(b, "Gather", NULL, XN(b, "Shape", NULL, q), c_int(b, 2));
    const char *nt = XN(b, "Gather", NULL, XN(b, "Shape", NULL, k), c_int(b, 3));
    const char *rq = XN(b, "Unsqueeze", NULL, XN(b, "Range", NULL, z, ns, one), c_ints(b, (int64_t[]){1}, 1));
    const char *ok = XN(b, "LessOrEqual", NULL, XN(b, "Range", NULL, z, nt, one), rq);
    s = XN(b, "Add", NULL, s, XN(b, "Where", NULL, ok, zero, neg));
  }
  if (nc->nin > 5 && IN(im, nc, 5)) s = XN(b, "Add", NULL, s, xin(nc, 5)); /* attention bias */
  Onnx__AttributeProto *last[] = {xa_int(b, "axis", -1)};
  const char *p = XA(b, "Softmax", NULL, last, s);
  const char *o = transpose(b, XN(b, "MatMul", NULL, p, v), heads, 4, NULL);
  XN(b, "Reshape", xout(nc, 0), o, c_ints(b, (int64_t[]){0, 0, -1}, 3));
  return b->st;
}

/* EmbedLayerNormalization: LayerNorm(word[ids] + position[pos] (+ segment[seg])),
 * and the mask's row sums as the mask index (int32). */
static ts_status ms_embed_ln(xb *b, imp *im, nctx *nc) {
  const tg_value *ids = IN(im, nc, 0);
  if (!ids || ids->ndim != 2 || !IN(im, nc, 2) || !IN(im, nc, 3) || !IN(im, nc, 5))
    return imp_nerr(im, nc, TS_EINVAL, "input_ids [B, S], word_embedding, position_embedding and gamma are required");
  if (IN(im, nc, 1) != NULL && (nc->nin <= 4 || !IN(im, nc, 4)))
    return imp_nerr(im, nc, TS_EINVAL, "segment_ids without segment_embedding");
  const char *e = XN(b, "Gather", NULL, xin(nc, 2), xin(nc, 0));
  const char *pos = xin(nc, 8);
  if (!pos[0]) { /* 0 .. S-1 */
    const char *sl = XN(b, "Gather", NULL, XN(b, "Shape", NULL, xin(nc, 0)), c_int(b, 1));
    pos = XN(b, "Unsqueeze", NULL, XN(b, "Range", NULL, c_int(b, 0), sl, c_int(b, 1)), c_ints(b, (int64_t[]){0}, 1));
  }
  e = XN(b, "Add", NULL, e, XN(b, "Gather", NULL, xin(nc, 3), pos));
  if (IN(im, nc, 1)) e = XN(b, "Add", NULL, e, XN(b, "Gather", NULL, xin(nc, 4), xin(nc, 1)));
  if (xout(nc, 2)) e = XN(b, "Identity", xout(nc, 2), e);
  last_norm(b, nc, false, e, xin(nc, 5), xin(nc, 6), xout(nc, 0));
  if (xout(nc, 1)) {
    Onnx__AttributeProto *to[] = {xa_int(b, "to", ONNX__TENSOR_PROTO__DATA_TYPE__INT32)};
    Onnx__AttributeProto *kd[] = {xa_int(b, "keepdims", 0)};
    const char *mi;
    if (nc->nin > 7 && IN(im, nc, 7)) {
      mi = XA(b, "ReduceSum", NULL, kd, XA(b, "Cast", NULL, to, xin(nc, 7)), c_ints(b, (int64_t[]){1}, 1));
    } else { /* no mask: every key counts */
      const char *sh = XN(b, "Shape", NULL, xin(nc, 0));
      const char *bs = XN(b, "Slice", NULL, sh, c_ints(b, (int64_t[]){0}, 1), c_ints(b, (int64_t[]){1}, 1));
      mi = XN(b, "Expand", NULL, XN(b, "Gather", NULL, sh, c_int(b, 1)), bs);
    }
    XA(b, "Cast", xout(nc, 1), to, mi);
  }
  return b->st;
}

ts_status imp_ms_contrib(imp *im, nctx *nc) {
  const tg_value *x = IN(im, nc, 0);
  if (!x) return imp_nerr(im, nc, TS_EINVAL, "input 0 is required");
  /* the bodies are written in opset-13 forms (axes and split sizes as inputs,
   * Softmax over the last axis alone), whatever the model's opset */
  xb b = {.im = im, .nc = nc, .elem = xonnx_type(x), .min_opset = 13};
  const char *y = nc->outname[0];
  ts_status st = TS_OK;
  switch (nc->op) {
  case TG_OP_MS_GELU: gelu(&b, xin(nc, 0), "none", y); break;
  case TG_OP_MS_BIAS_GELU: gelu(&b, XN(&b, "Add", NULL, xin(nc, 0), xin(nc, 1)), "none", y); break;
  case TG_OP_MS_FAST_GELU:
    gelu(&b, xin(nc, 1)[0] ? XN(&b, "Add", NULL, xin(nc, 0), xin(nc, 1)) : xin(nc, 0), "tanh", y);
    break;
  case TG_OP_MS_QUICK_GELU: {
    const char *xx = xin(nc, 0);
    XN(&b, "Mul", y, xx, XN(&b, "Sigmoid", NULL, XN(&b, "Mul", NULL, xx, c_float(&b, afloat(nc, "alpha", 1.702)))));
    break;
  }
  case TG_OP_MS_FUSED_MATMUL: {
    if (aint(nc, "transBatchA", 0) || aint(nc, "transBatchB", 0))
      return imp_nerr(im, nc, TS_EUNSUPPORTED, "transBatchA / transBatchB");
    const char *a = xin(nc, 0), *bb = xin(nc, 1);
    if (aint(nc, "transA", 0)) a = swap_last(&b, a);
    if (aint(nc, "transB", 0)) bb = swap_last(&b, bb);
    double alpha = afloat(nc, "alpha", 1.0);
    if (alpha == 1.0) XN(&b, "MatMul", y, a, bb);
    else XN(&b, "Mul", y, XN(&b, "MatMul", NULL, a, bb), c_float(&b, alpha));
    break;
  }
  case TG_OP_MS_SKIP_LAYER_NORM:
  case TG_OP_MS_SKIP_SIMPLIFIED_LAYER_NORM: {
    bool rms = nc->op == TG_OP_MS_SKIP_SIMPLIFIED_LAYER_NORM;
    if ((st = no_output(im, nc, 1, "mean")) || (st = no_output(im, nc, 2, "inv_std_var"))) return st;
    int bias = rms ? 3 : 4, sum = 3;
    const char *s = XN(&b, "Add", NULL, xin(nc, 0), xin(nc, 1));
    if (xin(nc, bias)[0]) s = XN(&b, "Add", NULL, s, xin(nc, bias));
    if (xout(nc, sum)) s = XN(&b, "Identity", xout(nc, sum), s);
    last_norm(&b, nc, rms, s, xin(nc, 2), rms ? "" : xin(nc, 3), y);
    break;
  }
  case TG_OP_MS_EMBED_LAYER_NORM: st = ms_embed_ln(&b, im, nc); break;
  case TG_OP_SIMPLIFIED_LAYER_NORM: { /* RMSNormalization over axis.. */
    if ((st = no_output(im, nc, 1, "inv_std_var"))) return st;
    Onnx__AttributeProto *at[] = {xa_int(&b, "axis", aint(nc, "axis", -1)), xa_float(&b, "epsilon", (float)afloat(nc, "epsilon", 1e-5))};
    b.min_opset = 23;
    XA(&b, "RMSNormalization", y, at, xin(nc, 0), xin(nc, 1));
    break;
  }
  default: st = ms_attention(&b, im, nc); break;
  }
  if (st) return st;
  if (b.st) return b.st;
  nc->expanded = true;
  return TS_OK;
}
