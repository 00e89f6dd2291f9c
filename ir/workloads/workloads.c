/* workloads.c — the built-in workload table: spec parsing ("NAME:k=v,..."),
 * validation, the compute-DSL text of each instance (generated with the
 * concrete sizes, so the built function has no symbolic sizes), and FLOP
 * counts (a multiply-add counts 2). Parameter orders, output sizes and the
 * FLOP rules of every workload: docs/IR.md ("Workloads"). */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../parse.h"
#include "workloads_int.h"

#define MAX_DIM_VALUE (INT64_C(1) << 30)

static int64_t I(const ir_wl_inst *w, const char *key) { return ir_wl_int(w, key); }

int64_t ir_wl_conv_out(int64_t in, int64_t k, int64_t stride, int64_t pad, int64_t dil) {
  int64_t span = in + 2 * pad - dil * (k - 1) - 1;
  return span < 0 ? 0 : span / stride + 1;
}

int64_t ir_wl_convt_out(int64_t in, int64_t k, int64_t stride, int64_t pad) {
  return (in - 1) * stride - 2 * pad + k;
}

/* ---- signatures ----------------------------------------------------------- */

void ir_wl_sig_add(wl_sig *s, const char *name, ir_dtype_code dt, int ndim, const int64_t *shape) {
  wl_tensor_sig *t = &s->t[s->nin + s->nout];
  t->name = name;
  t->dt = dt;
  t->ndim = ndim;
  for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
}

static const char *wname(const ir_wl_inst *w) { return w->wl->name; }
static bool is(const ir_wl_inst *w, const char *n) { return !strcmp(wname(w), n); }

/* ---- channel-blocked convolutions (NCHW[x]c) --------------------------------
 * The layouts oneDNN and MLAS vectorise over output channels with: activations
 * [n, c/cb, h, w, cb] (cb = 1 is plain NCHW), conv weights
 * [k/kb, c/cb, r, s, cb, kb], depthwise weights [c/cb, r, s, cb]; the output
 * [n, k/kb, p, q, kb]. The innermost block is contiguous in the output and the
 * weight and a broadcast for the input, so a schedule vectorises it whatever
 * the stride (docs/SEARCH.md, "Channel-blocked convolution"). */
static void wl_sig_blocked(const ir_wl_inst *w, wl_sig *s) {
  int64_t N = ir_wl_int(w, "n"), C = ir_wl_int(w, "c"), H = ir_wl_int(w, "h"), W = ir_wl_int(w, "w"),
          R = ir_wl_int(w, "r"), S = ir_wl_int(w, "s"), cb = ir_wl_int(w, "cb");
  int64_t P = ir_wl_conv_out(H, R, ir_wl_int(w, "stride"), ir_wl_int(w, "pad"), ir_wl_int(w, "dilation"));
  int64_t Q = ir_wl_conv_out(W, S, ir_wl_int(w, "stride"), ir_wl_int(w, "pad"), ir_wl_int(w, "dilation"));
  SIG_IN(s, "X", IR_F32, N, C / cb, H, W, cb);
  if (!strcmp(w->wl->name, "depthwise_conv2d_nchwc")) {
    SIG_IN(s, "W", IR_F32, C / cb, R, S, cb);
    SIG_OUT(s, "Y", IR_F32, N, C / cb, P, Q, cb);
  } else {
    int64_t K = ir_wl_int(w, "k"), kb = ir_wl_int(w, "kb");
    SIG_IN(s, "W", IR_F32, K / kb, C / cb, R, S, cb, kb);
    SIG_OUT(s, "Y", IR_F32, N, K / kb, P, Q, kb);
  }
}

void ir_wl_signature(const ir_wl_inst *w, wl_sig *s) {
  memset(s, 0, sizeof *s);
  const char *n = wname(w);
  if (is(w, "matmul") || is(w, "matmul_int8") || is(w, "matmul_u8s8") || is(w, "matmul_f16")) {
    bool int8 = is(w, "matmul_int8") || is(w, "matmul_u8s8");
    ir_dtype_code in = is(w, "matmul") ? IR_F32 : is(w, "matmul_f16") ? IR_F16 : IR_I8,
                  out = int8 ? IR_I32 : IR_F32;
    SIG_IN(s, "A", is(w, "matmul_u8s8") ? IR_U8 : in, I(w, "m"), I(w, "k"));
    SIG_IN(s, "B", in, I(w, "k"), I(w, "n"));
    SIG_OUT(s, "C", out, I(w, "m"), I(w, "n"));
  } else if (is(w, "batch_matmul")) {
    SIG_IN(s, "A", IR_F32, I(w, "b"), I(w, "m"), I(w, "k"));
    SIG_IN(s, "B", IR_F32, I(w, "b"), I(w, "k"), I(w, "n"));
    SIG_OUT(s, "C", IR_F32, I(w, "b"), I(w, "m"), I(w, "n"));
  } else if (is(w, "dense")) {
    SIG_IN(s, "X", IR_F32, I(w, "m"), I(w, "k"));
    SIG_IN(s, "W", IR_F32, I(w, "n"), I(w, "k"));
    if (I(w, "bias")) SIG_IN(s, "bias", IR_F32, I(w, "n"));
    SIG_OUT(s, "Y", IR_F32, I(w, "m"), I(w, "n"));
  } else if (is(w, "conv2d_nchw") || is(w, "conv2d_nhwc") || is(w, "conv2d_nhwc_u8s8")) {
    int64_t N = I(w, "n"), C = I(w, "c"), H = I(w, "h"), W = I(w, "w"), K = I(w, "k"), R = I(w, "r"),
            S = I(w, "s"), G = I(w, "groups");
    int64_t P = ir_wl_conv_out(H, R, I(w, "stride"), I(w, "pad"), I(w, "dilation"));
    int64_t Q = ir_wl_conv_out(W, S, I(w, "stride"), I(w, "pad"), I(w, "dilation"));
    if (is(w, "conv2d_nchw")) {
      SIG_IN(s, "X", IR_F32, N, C, H, W);
      SIG_IN(s, "W", IR_F32, K, C / G, R, S);
      SIG_OUT(s, "Y", IR_F32, N, K, P, Q);
    } else {
      bool q8 = is(w, "conv2d_nhwc_u8s8");
      SIG_IN(s, "X", q8 ? IR_U8 : IR_F32, N, H, W, C);
      SIG_IN(s, "W", q8 ? IR_I8 : IR_F32, R, S, C / G, K);
      SIG_OUT(s, "Y", q8 ? IR_I32 : IR_F32, N, P, Q, K);
    }
  } else if (is(w, "conv2d_nchwc") || is(w, "depthwise_conv2d_nchwc")) {
    wl_sig_blocked(w, s);
  } else if (is(w, "depthwise_conv2d")) {
    int64_t P = ir_wl_conv_out(I(w, "h"), I(w, "r"), I(w, "stride"), I(w, "pad"), I(w, "dilation"));
    int64_t Q = ir_wl_conv_out(I(w, "w"), I(w, "s"), I(w, "stride"), I(w, "pad"), I(w, "dilation"));
    SIG_IN(s, "X", IR_F32, I(w, "n"), I(w, "c"), I(w, "h"), I(w, "w"));
    SIG_IN(s, "W", IR_F32, I(w, "c"), 1, I(w, "r"), I(w, "s"));
    SIG_OUT(s, "Y", IR_F32, I(w, "n"), I(w, "c"), P, Q);
  } else if (is(w, "conv2d_transpose")) {
    int64_t OH = ir_wl_convt_out(I(w, "h"), I(w, "r"), I(w, "stride"), I(w, "pad"));
    int64_t OW = ir_wl_convt_out(I(w, "w"), I(w, "s"), I(w, "stride"), I(w, "pad"));
    SIG_IN(s, "X", IR_F32, I(w, "n"), I(w, "c"), I(w, "h"), I(w, "w"));
    SIG_IN(s, "W", IR_F32, I(w, "c"), I(w, "k"), I(w, "r"), I(w, "s"));
    SIG_OUT(s, "Y", IR_F32, I(w, "n"), I(w, "k"), OH, OW);
  } else if (is(w, "max_pool2d") || is(w, "avg_pool2d")) {
    int64_t P = ir_wl_conv_out(I(w, "h"), I(w, "r"), I(w, "stride"), I(w, "pad"), 1);
    int64_t Q = ir_wl_conv_out(I(w, "w"), I(w, "s"), I(w, "stride"), I(w, "pad"), 1);
    SIG_IN(s, "X", IR_F32, I(w, "n"), I(w, "c"), I(w, "h"), I(w, "w"));
    SIG_OUT(s, "Y", IR_F32, I(w, "n"), I(w, "c"), P, Q);
  } else if (is(w, "layernorm")) {
    SIG_IN(s, "X", IR_F32, I(w, "m"), I(w, "n"));
    SIG_IN(s, "gamma", IR_F32, I(w, "n"));
    SIG_IN(s, "beta", IR_F32, I(w, "n"));
    SIG_OUT(s, "Y", IR_F32, I(w, "m"), I(w, "n"));
  } else if (is(w, "add") || is(w, "mul")) {
    SIG_IN(s, "A", IR_F32, I(w, "m"), I(w, "n"));
    SIG_IN(s, "B", IR_F32, I(w, "m"), I(w, "n"));
    SIG_OUT(s, "C", IR_F32, I(w, "m"), I(w, "n"));
  } else if (is(w, "transpose")) {
    SIG_IN(s, "A", IR_F32, I(w, "m"), I(w, "n"));
    SIG_OUT(s, "B", IR_F32, I(w, "n"), I(w, "m"));
  } else if (is(w, "reduce_sum") || is(w, "reduce_mean")) {
    SIG_IN(s, "X", IR_F32, I(w, "m"), I(w, "n"));
    SIG_OUT(s, "Y", IR_F32, I(w, "m"));
  } else if (ir_wl_tvm_signature(w, s)) {
    /* MetaSchedule's single-operator suite (workloads_tvm.c) */
  } else { /* softmax and the unary elementwise ops */
    (void)n;
    SIG_IN(s, "X", IR_F32, I(w, "m"), I(w, "n"));
    SIG_OUT(s, "Y", IR_F32, I(w, "m"), I(w, "n"));
  }
}

/* ---- DSL bodies ------------------------------------------------------------- */

/* Writes "v * stride + t * dil - pad" with the trivial parts left out. */
static void axis(char *buf, size_t n, const char *v, int64_t stride, const char *t, int64_t dil,
                 int64_t pad) {
  size_t k = 0;
  k += (size_t)snprintf(buf + k, n - k, "%s", v);
  if (stride != 1) k += (size_t)snprintf(buf + k, n - k, " * %" PRId64, stride);
  k += (size_t)snprintf(buf + k, n - k, " + %s", t);
  if (dil != 1) k += (size_t)snprintf(buf + k, n - k, " * %" PRId64, dil);
  if (pad) snprintf(buf + k, n - k, " - %" PRId64, pad);
}

/* " where E1 >= 0 && E1 < H && E2 >= 0 && E2 < W" when padding can reach out. */
static void bounds_where(ts_strbuf *sb, int64_t pad, const char *e1, int64_t H, const char *e2, int64_t W) {
  if (pad == 0) return;
  ts_strbuf_printf(sb, " where %s >= 0 && %s < %" PRId64 " && %s >= 0 && %s < %" PRId64, e1, e1, H, e2,
                   e2, W);
}

static void body_matmul(const ir_wl_inst *w, ts_strbuf *sb) {
  if (is(w, "matmul_int8") || is(w, "matmul_u8s8")) ts_strbuf_append(sb, "  C[i, j] += i32(A[i, k]) * i32(B[k, j])\n");
  else if (is(w, "matmul_f16")) ts_strbuf_append(sb, "  C[i, j] += f32(A[i, k]) * f32(B[k, j])\n");
  else ts_strbuf_append(sb, "  C[i, j] += A[i, k] * B[k, j]\n");
}

static void body_batch_matmul(const ir_wl_inst *w, ts_strbuf *sb) {
  (void)w;
  ts_strbuf_append(sb, "  C[b, i, j] += A[b, i, k] * B[b, k, j]\n");
}

static void act_expr(char *buf, size_t n, const char *act, const char *x) {
  if (!strcmp(act, "relu")) snprintf(buf, n, "max(%s, 0.0)", x);
  else if (!strcmp(act, "gelu")) snprintf(buf, n, "0.5 * %s * (1.0 + erf(%s * 0.707106781))", x, x);
  else snprintf(buf, n, "%s", x);
}

static void body_dense(const ir_wl_inst *w, ts_strbuf *sb) {
  int64_t M = I(w, "m"), N = I(w, "n");
  bool bias = I(w, "bias") != 0;
  const char *act = ir_wl_str(w, "act");
  bool has_act = strcmp(act, "none") != 0;
  char e[256];
  if (!bias && !has_act) {
    ts_strbuf_append(sb, "  Y[i, j] += X[i, k] * W[j, k]\n");
    return;
  }
  ts_strbuf_printf(sb, "  let mm: f32[%" PRId64 ", %" PRId64 "]\n", M, N);
  if (bias && has_act) ts_strbuf_printf(sb, "  let bb: f32[%" PRId64 ", %" PRId64 "]\n", M, N);
  ts_strbuf_append(sb, "  mm[i, j] += X[i, k] * W[j, k]\n");
  const char *src = "mm[i, j]";
  if (bias) {
    ts_strbuf_printf(sb, "  %s[i, j] = mm[i, j] + bias[j]\n", has_act ? "bb" : "Y");
    src = "bb[i, j]";
  }
  if (has_act) {
    act_expr(e, sizeof e, act, src);
    ts_strbuf_printf(sb, "  Y[i, j] = %s\n", e);
  }
}

/* A separate padding stage (as TVM's data_pad): "Xp[...] = select(in range,
 * X[...], 0.0)" over the padded extents, so the convolution itself reads Xp
 * without a guard and the stage can be placed (or inlined) by the schedule.
 * nchw: channel axis 1, spatial axes 2, 3; nhwc: spatial 1, 2, channel 3. */
static void pad_stage(ts_strbuf *sb, bool nchw, int64_t N, int64_t C, int64_t H, int64_t W, int64_t pad,
                      bool u8) {
  int64_t HP = H + 2 * pad, WP = W + 2 * pad;
  const char *cond_fmt = "hh - %" PRId64 " >= 0 && hh - %" PRId64 " < %" PRId64 " && ww - %" PRId64
                         " >= 0 && ww - %" PRId64 " < %" PRId64;
  char cond[256];
  snprintf(cond, sizeof cond, cond_fmt, pad, pad, H, pad, pad, W);
  if (nchw) {
    ts_strbuf_printf(sb, "  let Xp: f32[%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 "]\n", N, C, HP, WP);
    ts_strbuf_printf(sb, "  Xp[b, cc, hh, ww] = select(%s, X[b, cc, hh - %" PRId64 ", ww - %" PRId64 "], 0.0)\n",
                     cond, pad, pad);
  } else {
    ts_strbuf_printf(sb, "  let Xp: %s[%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 "]\n", u8 ? "u8" : "f32", N,
                     HP, WP, C);
    ts_strbuf_printf(sb, "  Xp[b, hh, ww, cc] = select(%s, X[b, hh - %" PRId64 ", ww - %" PRId64 ", cc], %s)\n",
                     cond, pad, pad, u8 ? "u8(0)" : "0.0");
  }
}

/* conv2d_nchw / conv2d_nhwc */
static void body_conv(const ir_wl_inst *w, ts_strbuf *sb) {
  int64_t C = I(w, "c"), H = I(w, "h"), W = I(w, "w"), K = I(w, "k"), G = I(w, "groups");
  int64_t st = I(w, "stride"), pad = I(w, "pad"), dil = I(w, "dilation");
  bool nchw = is(w, "conv2d_nchw"), q8 = is(w, "conv2d_nhwc_u8s8");
  char eh[128], ew[128], ch[128];
  /* with a pad stage the conv indexes the padded input: no "- pad", no guard */
  axis(eh, sizeof eh, "p", st, "ri", dil, 0);
  axis(ew, sizeof ew, "q", st, "si", dil, 0);
  if (pad) pad_stage(sb, nchw, I(w, "n"), C, H, W, pad, q8);
  const char *src = pad ? "Xp" : "X";
  if (G == 1) snprintf(ch, sizeof ch, "ci");
  else snprintf(ch, sizeof ch, "(o // %" PRId64 ") * %" PRId64 " + ci", K / G, C / G);
  if (nchw)
    ts_strbuf_printf(sb, "  Y[b, o, p, q] += %s[b, %s, %s, %s] * W[o, ci, ri, si]\n", src, ch, eh, ew);
  else if (q8) /* the canonical int8 form the VNNI rule tensorizes (docs/TENSORIZE.md) */
    ts_strbuf_printf(sb, "  Y[b, p, q, o] += i32(%s[b, %s, %s, %s]) * i32(W[ri, si, ci, o])\n", src, eh, ew, ch);
  else
    ts_strbuf_printf(sb, "  Y[b, p, q, o] += %s[b, %s, %s, %s] * W[ri, si, ci, o]\n", src, eh, ew, ch);
}

static void body_depthwise(const ir_wl_inst *w, ts_strbuf *sb) {
  int64_t st = I(w, "stride"), pad = I(w, "pad"), dil = I(w, "dilation");
  char eh[128], ew[128];
  axis(eh, sizeof eh, "p", st, "ri", dil, 0);
  axis(ew, sizeof ew, "q", st, "si", dil, 0);
  if (pad) pad_stage(sb, true, I(w, "n"), I(w, "c"), I(w, "h"), I(w, "w"), pad, false);
  ts_strbuf_printf(sb, "  Y[b, ch, p, q] += %s[b, ch, %s, %s] * W[ch, 0, ri, si]\n", pad ? "Xp" : "X", eh, ew);
}

/* conv2d_nchwc / depthwise_conv2d_nchwc: the pad stage on the blocked input,
 * then the convolution (layouts: wl_sig_blocked). */
static void body_conv_blocked(const ir_wl_inst *w, ts_strbuf *sb) {
  int64_t H = I(w, "h"), W = I(w, "w"), st = I(w, "stride"), pad = I(w, "pad"), dil = I(w, "dilation");
  int64_t cb = I(w, "cb");
  char eh[128], ew[128];
  axis(eh, sizeof eh, "p", st, "ri", dil, 0);
  axis(ew, sizeof ew, "q", st, "si", dil, 0);
  const char *src = pad ? "Xp" : "X";
  if (pad) {
    char cond[256];
    snprintf(cond, sizeof cond,
             "hh - %" PRId64 " >= 0 && hh - %" PRId64 " < %" PRId64 " && ww - %" PRId64 " >= 0 && ww - %" PRId64
             " < %" PRId64,
             pad, pad, H, pad, pad, W);
    ts_strbuf_printf(sb, "  let Xp: f32[%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 "]\n",
                     I(w, "n"), I(w, "c") / cb, H + 2 * pad, W + 2 * pad, cb);
    ts_strbuf_printf(sb, "  Xp[b, cc, hh, ww, cv] = select(%s, X[b, cc, hh - %" PRId64 ", ww - %" PRId64 ", cv], 0.0)\n",
                     cond, pad, pad);
  }
  if (is(w, "depthwise_conv2d_nchwc"))
    ts_strbuf_printf(sb, "  Y[b, co, p, q, cv] += %s[b, co, %s, %s, cv] * W[co, ri, si, cv]\n", src, eh, ew);
  else
    ts_strbuf_printf(sb, "  Y[b, ko, p, q, kv] += %s[b, co, %s, %s, cv] * W[ko, co, ri, si, cv, kv]\n", src, eh,
                     ew);
}

static void body_conv_transpose(const ir_wl_inst *w, ts_strbuf *sb) {
  int64_t H = I(w, "h"), W = I(w, "w"), st = I(w, "stride"), pad = I(w, "pad");
  char th[64], tw[64];
  if (pad) {
    snprintf(th, sizeof th, "y + %" PRId64 " - ri", pad);
    snprintf(tw, sizeof tw, "x + %" PRId64 " - si", pad);
  } else {
    snprintf(th, sizeof th, "y - ri");
    snprintf(tw, sizeof tw, "x - si");
  }
  /* output y gets input row hi when y + pad - ri == hi * stride */
  if (st == 1) {
    ts_strbuf_printf(sb, "  Y[b, o, y, x] += X[b, ci, %s, %s] * W[ci, o, ri, si]", th, tw);
    ts_strbuf_printf(sb, " where %s >= 0 && %s < %" PRId64 " && %s >= 0 && %s < %" PRId64 "\n", th, th, H,
                     tw, tw, W);
  } else {
    ts_strbuf_printf(sb,
                     "  Y[b, o, y, x] += X[b, ci, (%s) // %" PRId64 ", (%s) // %" PRId64
                     "] * W[ci, o, ri, si]",
                     th, st, tw, st);
    ts_strbuf_printf(sb,
                     " where (%s) %% %" PRId64 " == 0 && %s >= 0 && %s < %" PRId64 " && (%s) %% %" PRId64
                     " == 0 && %s >= 0 && %s < %" PRId64 "\n",
                     th, st, th, th, H * st, tw, st, tw, tw, W * st);
  }
}

static void body_pool(const ir_wl_inst *w, ts_strbuf *sb) {
  int64_t R = I(w, "r"), S = I(w, "s"), st = I(w, "stride"), pad = I(w, "pad");
  char eh[128], ew[128];
  axis(eh, sizeof eh, "p", st, "ri", 1, pad);
  axis(ew, sizeof ew, "q", st, "si", 1, pad);
  bool avg = is(w, "avg_pool2d");
  if (avg) {
    wl_sig s;
    ir_wl_signature(w, &s);
    const int64_t *y = s.t[1].shape;
    ts_strbuf_printf(sb, "  let sm: f32[%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 "]\n", y[0], y[1],
                     y[2], y[3]);
  }
  ts_strbuf_printf(sb, "  %s[b, ch, p, q] %s X[b, ch, %s, %s]", avg ? "sm" : "Y", avg ? "+=" : "max=", eh, ew);
  bounds_where(sb, pad, eh, I(w, "h"), ew, I(w, "w"));
  ts_strbuf_printf(sb, " for ri in 0..%" PRId64 ", si in 0..%" PRId64 "\n", R, S);
  if (avg) ts_strbuf_printf(sb, "  Y[b, ch, p, q] = sm[b, ch, p, q] / %" PRId64 ".0\n", R * S);
}

static void body_softmax(const ir_wl_inst *w, ts_strbuf *sb) {
  int64_t M = I(w, "m"), N = I(w, "n");
  ts_strbuf_printf(sb,
                   "  let mx: f32[%" PRId64 "]\n"
                   "  let e: f32[%" PRId64 ", %" PRId64 "]\n"
                   "  let s: f32[%" PRId64 "]\n"
                   "  mx[i] max= X[i, j]\n"
                   "  e[i, j] = exp(X[i, j] - mx[i])\n"
                   "  s[i] += e[i, j]\n"
                   "  Y[i, j] = e[i, j] / s[i]\n",
                   M, M, N, M);
}

static void body_layernorm(const ir_wl_inst *w, ts_strbuf *sb) {
  int64_t M = I(w, "m"), N = I(w, "n");
  ts_strbuf_printf(sb,
                   "  let sm: f32[%" PRId64 "]\n"
                   "  let mean: f32[%" PRId64 "]\n"
                   "  let sq: f32[%" PRId64 "]\n"
                   "  let rstd: f32[%" PRId64 "]\n"
                   "  sm[i] += X[i, j]\n"
                   "  mean[i] = sm[i] / %" PRId64 ".0\n"
                   "  sq[i] += (X[i, j] - mean[i]) * (X[i, j] - mean[i])\n"
                   "  rstd[i] = rsqrt(sq[i] / %" PRId64 ".0 + 1e-5)\n"
                   "  Y[i, j] = (X[i, j] - mean[i]) * rstd[i] * gamma[j] + beta[j]\n",
                   M, M, M, M, N, N);
}

static void body_elementwise(const ir_wl_inst *w, ts_strbuf *sb) {
  char e[256];
  if (is(w, "add")) ts_strbuf_append(sb, "  C[i, j] = A[i, j] + B[i, j]\n");
  else if (is(w, "mul")) ts_strbuf_append(sb, "  C[i, j] = A[i, j] * B[i, j]\n");
  else if (is(w, "sigmoid")) ts_strbuf_append(sb, "  Y[i, j] = sigmoid(X[i, j])\n");
  else if (is(w, "exp")) ts_strbuf_append(sb, "  Y[i, j] = exp(X[i, j])\n");
  else {
    act_expr(e, sizeof e, wname(w), "X[i, j]");
    ts_strbuf_printf(sb, "  Y[i, j] = %s\n", e);
  }
}

static void body_transpose(const ir_wl_inst *w, ts_strbuf *sb) {
  (void)w;
  ts_strbuf_append(sb, "  B[j, i] = A[i, j]\n");
}

static void body_reduce(const ir_wl_inst *w, ts_strbuf *sb) {
  if (is(w, "reduce_sum")) {
    ts_strbuf_append(sb, "  Y[i] += X[i, j]\n");
  } else {
    ts_strbuf_printf(sb,
                     "  let sm: f32[%" PRId64 "]\n"
                     "  sm[i] += X[i, j]\n"
                     "  Y[i] = sm[i] / %" PRId64 ".0\n",
                     I(w, "m"), I(w, "n"));
  }
}

/* ---- FLOPs ------------------------------------------------------------------ */

static double D(const ir_wl_inst *w, const char *k) { return (double)I(w, k); }
static double out_numel(const ir_wl_inst *w) {
  wl_sig s;
  ir_wl_signature(w, &s);
  double n = 1;
  const wl_tensor_sig *t = &s.t[s.nin];
  for (int i = 0; i < t->ndim; i++) n *= (double)t->shape[i];
  return n;
}

static double flops_matmul(const ir_wl_inst *w) { return 2 * D(w, "m") * D(w, "n") * D(w, "k"); }
static double flops_batch_matmul(const ir_wl_inst *w) { return D(w, "b") * flops_matmul(w); }
static double flops_dense(const ir_wl_inst *w) {
  double mn = D(w, "m") * D(w, "n"), f = 2 * mn * D(w, "k");
  if (I(w, "bias")) f += mn;
  const char *act = ir_wl_str(w, "act");
  if (!strcmp(act, "relu")) f += mn;
  else if (!strcmp(act, "gelu")) f += 5 * mn;
  return f;
}
static double flops_conv(const ir_wl_inst *w) {
  return 2 * out_numel(w) * (D(w, "c") / D(w, "groups")) * D(w, "r") * D(w, "s");
}
static double flops_depthwise(const ir_wl_inst *w) { return 2 * out_numel(w) * D(w, "r") * D(w, "s"); }
static double flops_conv_transpose(const ir_wl_inst *w) {
  return 2 * D(w, "n") * D(w, "c") * D(w, "h") * D(w, "w") * D(w, "k") * D(w, "r") * D(w, "s");
}
static double flops_pool(const ir_wl_inst *w) {
  double taps = D(w, "r") * D(w, "s");
  return out_numel(w) * (is(w, "avg_pool2d") ? taps + 1 : taps);
}
static double flops_softmax(const ir_wl_inst *w) { return 5 * D(w, "m") * D(w, "n"); }
static double flops_layernorm(const ir_wl_inst *w) { return D(w, "m") * (8 * D(w, "n") + 4); }
static double flops_elementwise(const ir_wl_inst *w) {
  return (is(w, "gelu") ? 5 : 1) * D(w, "m") * D(w, "n");
}
static double flops_transpose(const ir_wl_inst *w) { return D(w, "m") * D(w, "n"); }
static double flops_reduce(const ir_wl_inst *w) {
  return D(w, "m") * D(w, "n") + (is(w, "reduce_mean") ? D(w, "m") : 0);
}

/* ---- cross-key checks --------------------------------------------------------- */

static ts_status check_none(const ir_wl_inst *w, ts_diag *d) { (void)w; (void)d; return TS_OK; }

ts_status ir_wl_check_out(const ir_wl_inst *w, int64_t p, int64_t q, ts_diag *d) {
  if (p <= 0 || q <= 0)
    return ts_diag_set(d, TS_EINVAL,
                       "%s: the output would be %" PRId64 "x%" PRId64
                       " (the kernel window does not fit the padded input); use a larger h/w, "
                       "more padding or a smaller r/s/dilation",
                       wname(w), p, q);
  return TS_OK;
}

static ts_status check_conv(const ir_wl_inst *w, ts_diag *d) {
  bool grouped = w->wl->nparams == 11;
  if (grouped) {
    int64_t g = I(w, "groups");
    if (I(w, "c") % g || I(w, "k") % g)
      return ts_diag_set(d, TS_EINVAL, "%s: groups=%" PRId64 " must divide c=%" PRId64 " and k=%" PRId64,
                         wname(w), g, I(w, "c"), I(w, "k"));
  }
  int64_t st = I(w, "stride"), pad = I(w, "pad"), dil = I(w, "dilation");
  return ir_wl_check_out(w, ir_wl_conv_out(I(w, "h"), I(w, "r"), st, pad, dil),
                   ir_wl_conv_out(I(w, "w"), I(w, "s"), st, pad, dil), d);
}

static ts_status check_conv_transpose(const ir_wl_inst *w, ts_diag *d) {
  int64_t st = I(w, "stride"), pad = I(w, "pad");
  return ir_wl_check_out(w, ir_wl_convt_out(I(w, "h"), I(w, "r"), st, pad),
                   ir_wl_convt_out(I(w, "w"), I(w, "s"), st, pad), d);
}

static ts_status check_pool(const ir_wl_inst *w, ts_diag *d) {
  int64_t pad = I(w, "pad");
  if (pad >= I(w, "r") || pad >= I(w, "s"))
    return ts_diag_set(d, TS_EINVAL, "%s: pad=%" PRId64 " must be smaller than r=%" PRId64 " and s=%" PRId64
                       " (else a window can lie wholly in the padding)",
                       wname(w), pad, I(w, "r"), I(w, "s"));
  return ir_wl_check_out(w, ir_wl_conv_out(I(w, "h"), I(w, "r"), I(w, "stride"), pad, 1),
                   ir_wl_conv_out(I(w, "w"), I(w, "s"), I(w, "stride"), pad, 1), d);
}

static double flops_conv_blocked(const ir_wl_inst *w) {
  double taps = D(w, "r") * D(w, "s");
  return 2 * out_numel(w) * taps * (is(w, "depthwise_conv2d_nchwc") ? 1 : D(w, "c"));
}

static ts_status check_conv_blocked(const ir_wl_inst *w, ts_diag *d) {
  bool dw = is(w, "depthwise_conv2d_nchwc");
  if (I(w, "c") % I(w, "cb"))
    return ts_diag_set(d, TS_EINVAL, "%s: cb=%" PRId64 " must divide c=%" PRId64 " (the input channel block)",
                       wname(w), I(w, "cb"), I(w, "c"));
  if (!dw && I(w, "k") % I(w, "kb"))
    return ts_diag_set(d, TS_EINVAL, "%s: kb=%" PRId64 " must divide k=%" PRId64 " (the output channel block)",
                       wname(w), I(w, "kb"), I(w, "k"));
  int64_t st = I(w, "stride"), pad = I(w, "pad"), dil = I(w, "dilation");
  return ir_wl_check_out(w, ir_wl_conv_out(I(w, "h"), I(w, "r"), st, pad, dil),
                   ir_wl_conv_out(I(w, "w"), I(w, "s"), st, pad, dil), d);
}

/* ---- the table ------------------------------------------------------------------ */

#define P(k, def, help) {k, def, help}
#define MN P("m", "16", "rows"), P("n", "16", "columns")
#define CONV_KEYS                                                                           \
  P("n", "1", "batch"), P("c", "4", "input channels"), P("h", "10", "input height"),       \
      P("w", "10", "input width"), P("k", "8", "output channels"), P("r", "3", "kernel height"), \
      P("s", "3", "kernel width"), P("stride", "1", "stride (both axes)"),                 \
      P("pad", "1", "zero padding (both sides, both axes)"), P("dilation", "1", "dilation"), \
      P("groups", "1", "groups (divides c and k)")
#define CONV_KINDS {K_POS, K_POS, K_POS, K_POS, K_POS, K_POS, K_POS, K_POS, K_NONNEG, K_POS, K_POS}
#define POOL_KEYS                                                                           \
  P("n", "1", "batch"), P("c", "4", "channels"), P("h", "10", "input height"),             \
      P("w", "10", "input width"), P("r", "3", "window height"), P("s", "3", "window width"), \
      P("stride", "2", "stride"), P("pad", "1", "padding (smaller than r and s)")
#define POOL_KINDS {K_POS, K_POS, K_POS, K_POS, K_POS, K_POS, K_POS, K_NONNEG}
#define ELEMWISE(nm, desc) \
  {{nm, desc, 2, {MN}}, {K_POS, K_POS}, check_none, body_elementwise, flops_elementwise}

static const wl_def defs[] = {
    {{"matmul", "C[m,n] = A[m,k] . B[k,n] (f32)", 3,
      {P("m", "16", "rows of A and C"), P("n", "16", "columns of B and C"), P("k", "16", "reduction")}},
     {K_POS, K_POS, K_POS}, check_none, body_matmul, flops_matmul},
    {{"batch_matmul", "C[b,m,n] = A[b,m,k] . B[b,k,n] (f32)", 4,
      {P("b", "2", "batch"), P("m", "16", "rows"), P("n", "16", "columns"), P("k", "16", "reduction")}},
     {K_POS, K_POS, K_POS, K_POS}, check_none, body_batch_matmul, flops_batch_matmul},
    {{"dense", "Y[m,n] = act(X[m,k] . W[n,k]^T + bias[n]) (f32)", 5,
      {P("m", "16", "rows"), P("n", "16", "output features"), P("k", "16", "input features"),
       P("bias", "1", "add bias[n]: 0 or 1"), P("act", "relu", "activation: none, relu or gelu")}},
     {K_POS, K_POS, K_POS, K_BOOL, K_ACT}, check_none, body_dense, flops_dense},
    {{"matmul_int8", "C[m,n] = A[m,k] . B[k,n], i8 inputs, i32 accumulation", 3,
      {P("m", "16", "rows"), P("n", "16", "columns"), P("k", "16", "reduction")}},
     {K_POS, K_POS, K_POS}, check_none, body_matmul, flops_matmul},
    {{"matmul_u8s8", "C[m,n] = A[m,k] . B[k,n], u8 A, i8 B, i32 accumulation (quantized models' form)", 3,
      {P("m", "16", "rows"), P("n", "16", "columns"), P("k", "16", "reduction")}},
     {K_POS, K_POS, K_POS}, check_none, body_matmul, flops_matmul},
    {{"conv2d_nchw", "2-d convolution, NCHW input, KCRS weights (f32)", 11, {CONV_KEYS}}, CONV_KINDS,
     check_conv, body_conv, flops_conv},
    {{"conv2d_nhwc", "2-d convolution, NHWC input, RSCK weights (f32)", 11, {CONV_KEYS}}, CONV_KINDS,
     check_conv, body_conv, flops_conv},
    {{"conv2d_nhwc_u8s8",
      "int8 2-d convolution: NHWC u8 input (padding reads 0), RSCK i8 weights, i32 accumulation", 11, {CONV_KEYS}},
     CONV_KINDS, check_conv, body_conv, flops_conv},
    {{"depthwise_conv2d", "depthwise 2-d convolution, NCHW input, weights [c,1,r,s] (f32)", 9,
      {P("n", "1", "batch"), P("c", "4", "channels"), P("h", "10", "input height"),
       P("w", "10", "input width"), P("r", "3", "kernel height"), P("s", "3", "kernel width"),
       P("stride", "1", "stride"), P("pad", "1", "zero padding"), P("dilation", "1", "dilation")}},
     {K_POS, K_POS, K_POS, K_POS, K_POS, K_POS, K_POS, K_NONNEG, K_POS}, check_conv, body_depthwise,
     flops_depthwise},
    {{"conv2d_transpose", "transposed 2-d convolution, NCHW input, weights [c,k,r,s] (f32)", 9,
      {P("n", "1", "batch"), P("c", "4", "input channels"), P("h", "6", "input height"),
       P("w", "6", "input width"), P("k", "4", "output channels"), P("r", "3", "kernel height"),
       P("s", "3", "kernel width"), P("stride", "2", "stride"), P("pad", "1", "padding")}},
     {K_POS, K_POS, K_POS, K_POS, K_POS, K_POS, K_POS, K_POS, K_NONNEG}, check_conv_transpose,
     body_conv_transpose, flops_conv_transpose},
    {{"max_pool2d", "max pooling, NCHW (padding never wins)", 8, {POOL_KEYS}}, POOL_KINDS, check_pool,
     body_pool, flops_pool},
    {{"avg_pool2d", "average pooling, NCHW, divides by r*s (count_include_pad)", 8, {POOL_KEYS}},
     POOL_KINDS, check_pool, body_pool, flops_pool},
    {{"softmax", "softmax over the last axis (f32)", 2, {MN}}, {K_POS, K_POS}, check_none, body_softmax,
     flops_softmax},
    {{"layernorm", "layer norm over the last axis, gamma[n], beta[n], eps 1e-5 (f32)", 2, {MN}},
     {K_POS, K_POS}, check_none, body_layernorm, flops_layernorm},
    ELEMWISE("add", "C = A + B elementwise (f32)"),
    ELEMWISE("mul", "C = A * B elementwise (f32)"),
    ELEMWISE("relu", "Y = max(X, 0) (f32)"),
    ELEMWISE("gelu", "Y = 0.5 X (1 + erf(X / sqrt 2)) (f32)"),
    ELEMWISE("sigmoid", "Y = 1 / (1 + exp(-X)) (f32)"),
    ELEMWISE("exp", "Y = exp(X) (f32)"),
    {{"transpose", "B[n,m] = A[m,n] (f32)", 2, {MN}}, {K_POS, K_POS}, check_none, body_transpose,
     flops_transpose},
    {{"reduce_sum", "Y[m] = sum over n of X[m,n] (f32)", 2, {MN}}, {K_POS, K_POS}, check_none,
     body_reduce, flops_reduce},
    {{"reduce_mean", "Y[m] = mean over n of X[m,n] (f32)", 2, {MN}}, {K_POS, K_POS}, check_none,
     body_reduce, flops_reduce},
    {{"matmul_f16", "C[m,n] = A[m,k] . B[k,n], f16 inputs, f32 accumulation (tensor-core GEMM)", 3,
      {P("m", "16", "rows"), P("n", "16", "columns"), P("k", "16", "reduction")}},
     {K_POS, K_POS, K_POS}, check_none, body_matmul, flops_matmul},
    /* channel-blocked convolutions (wl_sig_blocked) */
    {{"conv2d_nchwc", "2-d convolution, NCHW[cb]c input, [k/kb,c/cb,r,s,cb,kb] weights, NCHW[kb]c output (f32)", 12,
      {P("n", "1", "batch"), P("c", "8", "input channels"), P("h", "10", "input height"),
       P("w", "10", "input width"), P("k", "8", "output channels"), P("r", "3", "kernel height"),
       P("s", "3", "kernel width"), P("stride", "1", "stride (both axes)"),
       P("pad", "1", "zero padding (both sides, both axes)"), P("dilation", "1", "dilation"),
       P("cb", "4", "input channel block (divides c; 1: plain NCHW input)"),
       P("kb", "8", "output channel block (divides k)")}},
     {K_POS, K_POS, K_POS, K_POS, K_POS, K_POS, K_POS, K_POS, K_NONNEG, K_POS, K_POS, K_POS}, check_conv_blocked,
     body_conv_blocked, flops_conv_blocked},
    {{"depthwise_conv2d_nchwc", "depthwise 2-d convolution, NCHW[cb]c input and output, [c/cb,r,s,cb] weights (f32)",
      10,
      {P("n", "1", "batch"), P("c", "8", "channels"), P("h", "10", "input height"), P("w", "10", "input width"),
       P("r", "3", "kernel height"), P("s", "3", "kernel width"), P("stride", "1", "stride"),
       P("pad", "1", "zero padding"), P("dilation", "1", "dilation"), P("cb", "8", "channel block (divides c)")}},
     {K_POS, K_POS, K_POS, K_POS, K_POS, K_POS, K_POS, K_NONNEG, K_POS, K_POS}, check_conv_blocked,
     body_conv_blocked, flops_conv_blocked},
};
#define NDEFS ((int)(sizeof defs / sizeof defs[0]))

/* The two tables (this file's and workloads_tvm.c's) read as one list. */
static int ndefs_all(void) { return NDEFS + ir_wl_tvm_ndefs; }
static const wl_def *def_at(int i) { return i < NDEFS ? &defs[i] : &ir_wl_tvm_defs[i - NDEFS]; }

int ir_workload_count(void) { return ndefs_all(); }
const ir_workload *ir_workload_at(int i) { return i >= 0 && i < ndefs_all() ? &def_at(i)->pub : NULL; }
const ir_workload *ir_workload_find(const char *name) {
  for (int i = 0; i < ndefs_all(); i++)
    if (!strcmp(def_at(i)->pub.name, name)) return &def_at(i)->pub;
  return NULL;
}

static const wl_def *def_of(const ir_wl_inst *w) { return (const wl_def *)w->wl; }

static int key_index(const ir_workload *wl, const char *key) {
  for (int i = 0; i < wl->nparams; i++)
    if (!strcmp(wl->params[i].key, key)) return i;
  return -1;
}

int64_t ir_wl_int(const ir_wl_inst *w, const char *key) {
  int i = key_index(w->wl, key);
  return i < 0 ? 0 : strtoll(w->values[i], NULL, 10);
}

const char *ir_wl_str(const ir_wl_inst *w, const char *key) {
  int i = key_index(w->wl, key);
  return i < 0 ? "" : w->values[i];
}

static void list_names(ts_strbuf *sb) {
  for (int i = 0; i < ndefs_all(); i++) ts_strbuf_printf(sb, "%s%s", i ? ", " : "", def_at(i)->pub.name);
}

static void list_keys(ts_strbuf *sb, const ir_workload *wl) {
  for (int i = 0; i < wl->nparams; i++) ts_strbuf_printf(sb, "%s%s", i ? ", " : "", wl->params[i].key);
}

/* Validates one value and stores its canonical text. */
static ts_status set_value(ir_wl_inst *out, int i, const char *v, size_t n, ts_diag *d) {
  const ir_workload *wl = out->wl;
  key_kind kind = ((const wl_def *)wl)->kinds[i];
  const char *key = wl->params[i].key;
  char buf[sizeof out->values[0]];
  if (n >= sizeof buf)
    return ts_diag_set(d, TS_EINVAL, "%s: the value of %s is too long ('%.40s...')", wl->name, key, v);
  memcpy(buf, v, n);
  buf[n] = '\0';
  if (kind == K_ACT) {
    if (strcmp(buf, "none") && strcmp(buf, "relu") && strcmp(buf, "gelu"))
      return ts_diag_set(d, TS_EINVAL, "%s: %s must be one of none, relu, gelu; got '%s'", wl->name, key, buf);
    snprintf(out->values[i], sizeof out->values[i], "%s", buf);
    return TS_OK;
  }
  char *end;
  errno = 0;
  long long x = strtoll(buf, &end, 10);
  bool ok = n > 0 && *end == '\0' && errno == 0 && (isdigit((unsigned char)buf[0]) || buf[0] == '-' || buf[0] == '+');
  const char *want = kind == K_POS ? "a positive integer" : kind == K_NONNEG ? "a non-negative integer" : "0 or 1";
  if (ok) {
    if (kind == K_POS) ok = x >= 1 && x <= MAX_DIM_VALUE;
    else if (kind == K_NONNEG) ok = x >= 0 && x <= MAX_DIM_VALUE;
    else ok = x == 0 || x == 1;
  }
  if (!ok)
    return ts_diag_set(d, TS_EINVAL, "%s: %s must be %s%s, got '%s'", wl->name, key, want,
                       kind == K_BOOL ? "" : " (at most 2^30)", buf);
  snprintf(out->values[i], sizeof out->values[i], "%lld", x);
  return TS_OK;
}

ts_status ir_wl_parse(const char *spec, ir_wl_inst *out, ts_diag *d) {
  memset(out, 0, sizeof *out);
  if (!spec) return ts_diag_set(d, TS_EINVAL, "no workload spec");
  const char *colon = strchr(spec, ':');
  size_t nlen = colon ? (size_t)(colon - spec) : strlen(spec);
  const ir_workload *wl = NULL;
  for (int i = 0; i < ndefs_all(); i++)
    if (strlen(def_at(i)->pub.name) == nlen && !strncmp(def_at(i)->pub.name, spec, nlen)) wl = &def_at(i)->pub;
  if (!wl) {
    ts_strbuf sb;
    ts_strbuf_init(&sb);
    list_names(&sb);
    ts_diag_set(d, TS_ENOTFOUND, "unknown workload '%.*s'; valid workloads: %s", (int)(nlen > 200 ? 200 : nlen),
                spec, sb.data ? sb.data : "");
    ts_strbuf_fini(&sb);
    return TS_ENOTFOUND;
  }
  if (colon && !colon[1]) { /* "matmul:" promises parameters and gives none: a cut-off spec, not the defaults */
    ts_strbuf sb;
    ts_strbuf_init(&sb);
    list_keys(&sb, wl);
    ts_diag_set(d, TS_EINVAL, "%s: no parameters after ':' (give key=value pairs of %s, or write '%s' alone for the "
                "defaults)", wl->name, sb.data ? sb.data : "", wl->name);
    ts_strbuf_fini(&sb);
    return TS_EINVAL;
  }
  out->wl = wl;
  for (int i = 0; i < wl->nparams; i++) snprintf(out->values[i], sizeof out->values[i], "%s", wl->params[i].def);
  bool seen[IR_WL_MAX_PARAMS] = {false};
  const char *p = colon ? colon + 1 : NULL;
  while (p && *p) {
    const char *comma = strchr(p, ',');
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    const char *eq = memchr(p, '=', len);
    if (!eq || eq == p) {
      ts_diag_set(d, TS_EINVAL, "%s: expected key=value in the spec, got '%.*s'", wl->name,
                  (int)(len > 100 ? 100 : len), p);
      goto fail;
    }
    size_t klen = (size_t)(eq - p);
    int idx = -1;
    for (int i = 0; i < wl->nparams; i++)
      if (strlen(wl->params[i].key) == klen && !strncmp(wl->params[i].key, p, klen)) idx = i;
    if (idx < 0) {
      ts_strbuf sb;
      ts_strbuf_init(&sb);
      list_keys(&sb, wl);
      ts_diag_set(d, TS_ENOTFOUND, "workload %s has no key '%.*s'; valid keys: %s", wl->name,
                  (int)(klen > 100 ? 100 : klen), p, sb.data ? sb.data : "");
      ts_strbuf_fini(&sb);
      memset(out, 0, sizeof *out);
      return TS_ENOTFOUND;
    }
    if (seen[idx]) {
      ts_diag_set(d, TS_EINVAL, "%s: key '%s' given twice", wl->name, wl->params[idx].key);
      goto fail;
    }
    seen[idx] = true;
    if (set_value(out, idx, eq + 1, len - klen - 1, d) != TS_OK) goto fail;
    p = comma ? comma + 1 : NULL;
    if (p && !*p) {
      ts_diag_set(d, TS_EINVAL, "%s: trailing ',' in the spec", wl->name);
      goto fail;
    }
  }
  if (def_of(out)->check(out, d) != TS_OK) goto fail;
  return TS_OK;
fail:
  memset(out, 0, sizeof *out);
  return TS_EINVAL;
}

void ir_wl_canonical(const ir_wl_inst *w, char *buf, size_t n) {
  if (!n) return;
  size_t k = (size_t)snprintf(buf, n, "%s", w->wl->name);
  for (int i = 0; i < w->wl->nparams && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, "%c%s=%s", i ? ',' : ':', w->wl->params[i].key, w->values[i]);
}

static const char *dt_name(ir_dtype_code c) { return ir_dtype_code_name(c); }

char *ir_wl_source(const ir_wl_inst *w) {
  wl_sig s;
  ir_wl_signature(w, &s);
  ts_strbuf sb;
  ts_strbuf_init(&sb);
  char canon[512];
  ir_wl_canonical(w, canon, sizeof canon);
  ts_strbuf_printf(&sb, "# %s\nkernel %s(", canon, w->wl->name);
  for (int i = 0; i < s.nin + s.nout; i++) {
    const wl_tensor_sig *t = &s.t[i];
    if (i == s.nin) ts_strbuf_append(&sb, ") -> ");
    else if (i) ts_strbuf_append(&sb, ", ");
    ts_strbuf_printf(&sb, "%s: %s[", t->name, dt_name(t->dt));
    for (int k = 0; k < t->ndim; k++) ts_strbuf_printf(&sb, "%s%" PRId64, k ? ", " : "", t->shape[k]);
    ts_strbuf_append(&sb, "]");
  }
  ts_strbuf_append(&sb, " {\n");
  def_of(w)->body(w, &sb);
  ts_strbuf_append(&sb, "}\n");
  if (sb.oom) {
    ts_strbuf_fini(&sb);
    return NULL;
  }
  return ts_strbuf_take(&sb);
}

ts_status ir_wl_build(ts_arena *a, const ir_wl_inst *w, ir_func **out, ts_diag *d) {
  *out = NULL;
  if (!w || !w->wl) return ts_diag_set(d, TS_EINVAL, "no workload instance");
  char *src = ir_wl_source(w);
  if (!src) return ts_diag_set(d, TS_ENOMEM, "out of memory generating workload source");
  char fname[64];
  snprintf(fname, sizeof fname, "<workload %s>", w->wl->name);
  ts_status st = ir_parse_func(a, src, strlen(src), fname, out, d);
  ts_free(src);
  /* the int8 matmuls' B and the int8 conv's W are a quantized model's constant weight: layout-free
   * (docs/LAYOUT.md), so a schedule may pre-pack it (the VNNI layout,
   * docs/TENSORIZE.md) as a model build does once */
  if (st == TS_OK && (is(w, "matmul_int8") || is(w, "matmul_u8s8") || is(w, "conv2d_nhwc_u8s8")) &&
      ir_annot_set(a, &(*out)->nannot, &(*out)->annots,
                   (ir_annot){.key = IR_FUNC_ANN_LAYOUT_FREE, .kind = IR_ANN_INT, .v.i = 2}))
    return ts_diag_set(d, TS_ENOMEM, "out of memory marking the workload's weight");
  return st;
}

double ir_wl_flops(const ir_wl_inst *w) { return def_of(w)->flops(w); }

ts_status ir_workload_from_spec(ts_arena *a, const char *spec, ir_func **out, ts_diag *d) {
  ir_wl_inst w;
  *out = NULL;
  ts_status st = ir_wl_parse(spec, &w, d);
  return st != TS_OK ? st : ir_wl_build(a, &w, out, d);
}
