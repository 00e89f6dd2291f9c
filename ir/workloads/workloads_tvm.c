/* workloads_tvm.c — MetaSchedule's single-operator suite (TVM's
 * tvm/s_tir/meta_schedule/testing/te_workload.py) as built-in workloads, in
 * TVM's layouts and with TVM's reduction order, so that one shape tuned by
 * both tools is the same computation on the same bytes: C1D conv1d_nlc, C3D
 * conv3d_ndhwc, CAP conv2d_capsule, DEP depthwise_conv2d_nhwc, T2D
 * conv2d_transpose_nhwc, CBR conv2d_nhwc_bn_relu, TBG
 * transpose_batch_matmul, NRM norm. (C2D, DIL and GRP are conv2d_nhwc, GMM
 * is batch_matmul and SFM softmax, in workloads.c.) Padding is a separate
 * stage as TVM's topi.nn.pad, so the convolution reads it unguarded. Param
 * orders, sizes and FLOP rules: docs/IR.md ("Workloads"). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "workloads_int.h"

static int64_t I(const ir_wl_inst *w, const char *key) { return ir_wl_int(w, key); }
static double D(const ir_wl_inst *w, const char *key) { return (double)ir_wl_int(w, key); }
static bool is(const ir_wl_inst *w, const char *n) { return !strcmp(w->wl->name, n); }

/* Output size of one convolved axis of the instance ("stride", "pad" and
 * "dilation" keys; a workload without "dilation" has 1). */
static int64_t out_of(const ir_wl_inst *w, const char *in, const char *k) {
  int64_t dil = ir_wl_str(w, "dilation")[0] ? I(w, "dilation") : 1;
  return ir_wl_conv_out(I(w, in), I(w, k), I(w, "stride"), I(w, "pad"), dil);
}

/* ---- signatures ---------------------------------------------------------------- */

static void sig_conv(const ir_wl_inst *w, wl_sig *s) {
  int64_t N = I(w, "n"), C = I(w, "c"), K = I(w, "k");
  if (is(w, "conv1d_nlc")) {
    SIG_IN(s, "X", IR_F32, N, I(w, "l"), C);
    SIG_IN(s, "W", IR_F32, I(w, "r"), C / I(w, "groups"), K);
    SIG_OUT(s, "Y", IR_F32, N, out_of(w, "l", "r"), K);
  } else if (is(w, "conv3d_ndhwc")) {
    SIG_IN(s, "X", IR_F32, N, I(w, "d"), I(w, "h"), I(w, "w"), C);
    SIG_IN(s, "W", IR_F32, I(w, "t"), I(w, "r"), I(w, "s"), C / I(w, "groups"), K);
    SIG_OUT(s, "Y", IR_F32, N, out_of(w, "d", "t"), out_of(w, "h", "r"), out_of(w, "w", "s"), K);
  } else if (is(w, "conv2d_capsule")) {
    int64_t cap = I(w, "cap");
    SIG_IN(s, "X", IR_F32, N, I(w, "h"), I(w, "w"), cap, cap, C);
    SIG_IN(s, "W", IR_F32, I(w, "r"), I(w, "s"), cap, cap, C, K);
    SIG_OUT(s, "Y", IR_F32, N, out_of(w, "h", "r"), out_of(w, "w", "s"), cap, cap, K);
  } else if (is(w, "conv2d_nhwc_bn_relu")) {
    SIG_IN(s, "X", IR_F32, N, I(w, "h"), I(w, "w"), C);
    SIG_IN(s, "W", IR_F32, I(w, "r"), I(w, "s"), C, K);
    SIG_IN(s, "bias", IR_F32, K);
    SIG_IN(s, "bn_offset", IR_F32, K);
    SIG_IN(s, "bn_scale", IR_F32, K);
    SIG_OUT(s, "Y", IR_F32, N, out_of(w, "h", "r"), out_of(w, "w", "s"), K);
  }
}

bool ir_wl_tvm_signature(const ir_wl_inst *w, wl_sig *s) {
  if (is(w, "conv1d_nlc") || is(w, "conv3d_ndhwc") || is(w, "conv2d_capsule") || is(w, "conv2d_nhwc_bn_relu")) {
    sig_conv(w, s);
  } else if (is(w, "depthwise_conv2d_nhwc")) {
    SIG_IN(s, "X", IR_F32, I(w, "n"), I(w, "h"), I(w, "w"), I(w, "c"));
    SIG_IN(s, "W", IR_F32, 1, I(w, "r"), I(w, "s"), I(w, "c"));
    SIG_OUT(s, "Y", IR_F32, I(w, "n"), out_of(w, "h", "r"), out_of(w, "w", "s"), I(w, "c"));
  } else if (is(w, "conv2d_transpose_nhwc")) {
    int64_t st = I(w, "stride"), pad = I(w, "pad");
    SIG_IN(s, "X", IR_F32, I(w, "n"), I(w, "h"), I(w, "w"), I(w, "c"));
    SIG_IN(s, "W", IR_F32, I(w, "r"), I(w, "s"), I(w, "c"), I(w, "k"));
    SIG_OUT(s, "Y", IR_F32, I(w, "n"), ir_wl_convt_out(I(w, "h"), I(w, "r"), st, pad),
            ir_wl_convt_out(I(w, "w"), I(w, "s"), st, pad), I(w, "k"));
  } else if (is(w, "transpose_batch_matmul")) {
    int64_t B = I(w, "b"), L = I(w, "l"), H = I(w, "heads"), Dd = I(w, "d");
    SIG_IN(s, "Q", IR_F32, B, L, H, Dd);
    SIG_IN(s, "V", IR_F32, B, L, H, Dd);
    SIG_OUT(s, "C", IR_F32, B, H, L, L);
  } else if (is(w, "norm")) {
    SIG_IN(s, "A", IR_F32, I(w, "b"), I(w, "m"), I(w, "n"));
    SIG_OUT(s, "Y", IR_F32, I(w, "b"));
  } else {
    return false;
  }
  return true;
}

/* ---- DSL bodies -------------------------------------------------------------------- */

static const char *const AX[] = {"a0", "a1", "a2", "a3", "a4", "a5"};

/* "Xp[a0, ...] = select(in range, X[a0, a1 - pad, ...], 0.0)" over the padded
 * extents; padded[i] marks the axes that get pad on both sides. */
static void pad_stage(ts_strbuf *sb, const wl_tensor_sig *x, const bool *padded, int64_t pad) {
  ts_strbuf_append(sb, "  let Xp: f32[");
  for (int i = 0; i < x->ndim; i++)
    ts_strbuf_printf(sb, "%s%" PRId64, i ? ", " : "", x->shape[i] + (padded[i] ? 2 * pad : 0));
  ts_strbuf_append(sb, "]\n  Xp[");
  for (int i = 0; i < x->ndim; i++) ts_strbuf_printf(sb, "%s%s", i ? ", " : "", AX[i]);
  ts_strbuf_append(sb, "] = select(");
  bool first = true;
  for (int i = 0; i < x->ndim; i++) {
    if (!padded[i]) continue;
    ts_strbuf_printf(sb, "%s%s - %" PRId64 " >= 0 && %s - %" PRId64 " < %" PRId64, first ? "" : " && ", AX[i], pad,
                     AX[i], pad, x->shape[i]);
    first = false;
  }
  ts_strbuf_append(sb, ", X[");
  for (int i = 0; i < x->ndim; i++) {
    if (padded[i]) ts_strbuf_printf(sb, "%s%s - %" PRId64, i ? ", " : "", AX[i], pad);
    else ts_strbuf_printf(sb, "%s%s", i ? ", " : "", AX[i]);
  }
  ts_strbuf_append(sb, "], 0.0)\n");
}

/* "v * stride + t * dil" with the trivial parts left out. */
static void axis(char *buf, size_t n, const char *v, int64_t stride, const char *t, int64_t dil) {
  size_t k = (size_t)snprintf(buf, n, "%s", v);
  if (stride != 1) k += (size_t)snprintf(buf + k, n - k, " * %" PRId64, stride);
  k += (size_t)snprintf(buf + k, n - k, " + %s", t);
  if (dil != 1) snprintf(buf + k, n - k, " * %" PRId64, dil);
}

/* The input the convolution reads: Xp after a pad stage over the spatial
 * axes (1 .. nsp), else X itself. */
static const char *conv_input(const ir_wl_inst *w, ts_strbuf *sb, int nsp) {
  int64_t pad = I(w, "pad");
  if (!pad) return "X";
  wl_sig s;
  ir_wl_signature(w, &s);
  bool padded[6] = {false};
  for (int i = 1; i <= nsp; i++) padded[i] = true;
  pad_stage(sb, &s.t[0], padded, pad);
  return "Xp";
}

/* The input channel of a grouped convolution: "ci", or the group's base plus ci. */
static void group_channel(char *buf, size_t n, const ir_wl_inst *w) {
  int64_t G = I(w, "groups");
  if (G == 1) snprintf(buf, n, "ci");
  else snprintf(buf, n, "(o // %" PRId64 ") * %" PRId64 " + ci", I(w, "k") / G, I(w, "c") / G);
}

static void body_conv1d(const ir_wl_inst *w, ts_strbuf *sb) {
  char el[128], ch[128];
  axis(el, sizeof el, "p", I(w, "stride"), "ri", I(w, "dilation"));
  group_channel(ch, sizeof ch, w);
  const char *x = conv_input(w, sb, 1);
  ts_strbuf_printf(sb, "  Y[b, p, o] += %s[b, %s, %s] * W[ri, ci, o]\n", x, el, ch);
}

static void body_conv3d(const ir_wl_inst *w, ts_strbuf *sb) {
  int64_t st = I(w, "stride"), dil = I(w, "dilation");
  char ed[128], eh[128], ew[128], ch[128];
  axis(ed, sizeof ed, "z", st, "ti", dil);
  axis(eh, sizeof eh, "p", st, "ri", dil);
  axis(ew, sizeof ew, "q", st, "si", dil);
  group_channel(ch, sizeof ch, w);
  const char *x = conv_input(w, sb, 3);
  ts_strbuf_printf(sb, "  Y[b, z, p, q, o] += %s[b, %s, %s, %s, %s] * W[ti, ri, si, ci, o]\n", x, ed, eh, ew, ch);
}

static void body_capsule(const ir_wl_inst *w, ts_strbuf *sb) {
  int64_t st = I(w, "stride");
  char eh[128], ew[128];
  axis(eh, sizeof eh, "p", st, "ri", 1);
  axis(ew, sizeof ew, "q", st, "si", 1);
  const char *x = conv_input(w, sb, 2);
  /* TVM's reduction order: rh, rw, cap_k, rc */
  ts_strbuf_printf(sb, "  Y[b, p, q, ii, jj, o] += %s[b, %s, %s, ii, kk, ci] * W[ri, si, kk, jj, ci, o]\n", x, eh, ew);
}

static void body_depthwise_nhwc(const ir_wl_inst *w, ts_strbuf *sb) {
  int64_t st = I(w, "stride"), dil = I(w, "dilation");
  char eh[128], ew[128];
  axis(eh, sizeof eh, "p", st, "ri", dil);
  axis(ew, sizeof ew, "q", st, "si", dil);
  const char *x = conv_input(w, sb, 2);
  ts_strbuf_printf(sb, "  Y[b, p, q, ch] += %s[b, %s, %s, ch] * W[0, ri, si, ch]\n", x, eh, ew);
}

/* TVM's form when pad <= r-1 and s-1: the correlation of the zero-dilated,
 * (r-1-pad)-padded input (its own stage) with the flipped kernel. Otherwise
 * the gather form, as conv2d_transpose in workloads.c: output y takes input
 * row hi through tap ri when y + pad - ri == hi * stride (the same sum). The
 * gather form's guard and divisions sit in the reduction, where no sketch
 * moves them: 4x slower on TVM's T2D shape (bench/RESULTS.md). */
/* One axis of the zero-free form: output y = st*yq + yr takes the taps
 * ri = m + st*t (t < r/st), m = (ph - yr) mod st, ph = r-1-pad, of the flipped
 * kernel, reading input row yq + (yr + m - ph)/st + t. The input is padded
 * by lo before and hi after so every such row is in range; the expressions
 * are the padded input's index and the kernel's, for output var v and tap
 * var t. */
typedef struct convt_axis {
  int64_t lo, hi;
  char in[256], tap[160];
} convt_axis;

static void convt_phase_axis(int64_t n, int64_t r, int64_t st, int64_t pad, const char *v, const char *t,
                             convt_axis *a) {
  int64_t ph = r - 1 - pad, out = (n - 1) * st + r - 2 * pad, mn = 0, mx = n - 1;
  for (int64_t y = 0; y < out; y++) {
    int64_t yr = y % st, m = (ph - yr + st * r) % st, row = y / st + (yr + m - ph) / st; /* exact division */
    if (row < mn) mn = row;
    if (row + r / st - 1 > mx) mx = row + r / st - 1;
  }
  a->lo = -mn;
  a->hi = mx - (n - 1);
  /* m with a non-negative left operand: ph + st - v % st > 0 */
  char m[96];
  snprintf(m, sizeof m, "(%" PRId64 " - %s %% %" PRId64 ") %% %" PRId64, ph + st, v, st, st);
  snprintf(a->in, sizeof a->in, "%s // %" PRId64 " + (%s %% %" PRId64 " + %s + %" PRId64 ") // %" PRId64 " + %s",
           v, st, v, st, m, a->lo * st - ph, st, t); /* an exact multiple of st */
  snprintf(a->tap, sizeof a->tap, "%" PRId64 " - %s - %" PRId64 " * %s", r - 1, m, st, t);
}

/* The zero-free form (r and s multiples of the stride): each output phase
 * convolves the input padded once with its own taps of the kernel, so no
 * product with an inserted zero is ever computed (the dilated form computes
 * stride^2 times the useful products). The same sums in the same order. */
static void body_convt_phases(const ir_wl_inst *w, ts_strbuf *sb) {
  int64_t H = I(w, "h"), W = I(w, "w"), st = I(w, "stride"), pad = I(w, "pad"), R = I(w, "r"), S = I(w, "s");
  convt_axis ah, aw;
  convt_phase_axis(H, R, st, pad, "y", "t", &ah);
  convt_phase_axis(W, S, st, pad, "x", "u", &aw);
  ts_strbuf_printf(sb, "  let Xp: f32[%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 "]\n", I(w, "n"), H + ah.lo + ah.hi,
                   W + aw.lo + aw.hi, I(w, "c"));
  ts_strbuf_printf(sb,
                   "  Xp[b, hh, ww, cc] = select(hh >= %" PRId64 " && hh < %" PRId64 " && ww >= %" PRId64 " && ww < %" PRId64
                   ", X[b, hh - %" PRId64 ", ww - %" PRId64 ", cc], 0.0)\n",
                   ah.lo, ah.lo + H, aw.lo, aw.lo + W, ah.lo, aw.lo);
  ts_strbuf_printf(sb,
                   "  Y[b, y, x, o] += Xp[b, %s, %s, ci] * W[%s, %s, ci, o] for t in 0..%" PRId64 ", u in 0..%" PRId64 "\n",
                   ah.in, aw.in, ah.tap, aw.tap, R / st, S / st);
}

static void body_convt_nhwc(const ir_wl_inst *w, ts_strbuf *sb) {
  int64_t H = I(w, "h"), W = I(w, "w"), st = I(w, "stride"), pad = I(w, "pad"), R = I(w, "r"), S = I(w, "s");
  if (st > 1 && R % st == 0 && S % st == 0 && pad <= R - 1 && pad <= S - 1) {
    body_convt_phases(w, sb);
    return;
  }
  if (pad <= R - 1 && pad <= S - 1) {
    /* TVM's own form: a stage holding the zero-dilated input padded by
     * r-1-pad (s-1-pad), then an unguarded correlation with the flipped
     * kernel, so no guard or division sits in the reduction */
    int64_t ph = R - 1 - pad, pw = S - 1 - pad, HD = (H - 1) * st + 1, WD = (W - 1) * st + 1;
    ts_strbuf_printf(sb, "  let Xd: f32[%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 "]\n", I(w, "n"), HD + 2 * ph,
                     WD + 2 * pw, I(w, "c"));
    ts_strbuf_printf(sb,
                     "  Xd[b, hh, ww, cc] = select(hh - %" PRId64 " >= 0 && hh - %" PRId64 " < %" PRId64 " && (hh - %" PRId64
                     ") %% %" PRId64 " == 0 && ww - %" PRId64 " >= 0 && ww - %" PRId64 " < %" PRId64 " && (ww - %" PRId64
                     ") %% %" PRId64 " == 0, X[b, (hh - %" PRId64 ") // %" PRId64 ", (ww - %" PRId64 ") // %" PRId64
                     ", cc], 0.0)\n",
                     ph, ph, HD, ph, st, pw, pw, WD, pw, st, ph, st, pw, st);
    ts_strbuf_printf(sb,
                     "  Y[b, y, x, o] += Xd[b, y + ri, x + si, ci] * W[%" PRId64 " - ri, %" PRId64
                     " - si, ci, o] for ri in 0..%" PRId64 ", si in 0..%" PRId64 "\n",
                     R - 1, S - 1, R, S);
    return;
  }
  char th[64], tw[64];
  snprintf(th, sizeof th, pad ? "y + %" PRId64 " - ri" : "y - ri", pad);
  snprintf(tw, sizeof tw, pad ? "x + %" PRId64 " - si" : "x - si", pad);
  if (st == 1) {
    ts_strbuf_printf(sb, "  Y[b, y, x, o] += X[b, %s, %s, ci] * W[ri, si, ci, o]", th, tw);
    ts_strbuf_printf(sb, " where %s >= 0 && %s < %" PRId64 " && %s >= 0 && %s < %" PRId64 "\n", th, th, H, tw, tw,
                     W);
    return;
  }
  ts_strbuf_printf(sb, "  Y[b, y, x, o] += X[b, (%s) // %" PRId64 ", (%s) // %" PRId64 ", ci] * W[ri, si, ci, o]", th,
                   st, tw, st);
  ts_strbuf_printf(sb,
                   " where (%s) %% %" PRId64 " == 0 && %s >= 0 && %s < %" PRId64 " && (%s) %% %" PRId64
                   " == 0 && %s >= 0 && %s < %" PRId64 "\n",
                   th, st, th, th, H * st, tw, st, tw, tw, W * st);
}

/* TVM's conv2d_nhwc_bn_relu: conv, + bias, * bn_scale, + bn_offset, relu. */
static void body_cbr(const ir_wl_inst *w, ts_strbuf *sb) {
  int64_t st = I(w, "stride"), dil = I(w, "dilation");
  wl_sig s;
  ir_wl_signature(w, &s);
  const int64_t *y = s.t[s.nin].shape;
  char eh[128], ew[128];
  axis(eh, sizeof eh, "p", st, "ri", dil);
  axis(ew, sizeof ew, "q", st, "si", dil);
  const char *x = conv_input(w, sb, 2);
  ts_strbuf_printf(sb, "  let cv: f32[%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 "]\n", y[0], y[1], y[2], y[3]);
  ts_strbuf_printf(sb, "  cv[b, p, q, o] += %s[b, %s, %s, ci] * W[ri, si, ci, o]\n", x, eh, ew);
  ts_strbuf_append(sb, "  Y[b, p, q, o] = max((cv[b, p, q, o] + bias[o]) * bn_scale[o] + bn_offset[o], 0.0)\n");
}

/* TVM's form: the two transposes are stages (query_T[b,h,l,d], value_T[b,h,d,l])
 * and the product reads them with j contiguous, so the search can vectorise j
 * and place the transposes as packed tiles (RandomComputeLocation; AutoInline
 * keeps reordered reads). Folded into the reads, V[b, j, h, k] is a gather
 * across j in the innermost loop of every sketch. */
static void body_tbg(const ir_wl_inst *w, ts_strbuf *sb) {
  int64_t B = I(w, "b"), L = I(w, "l"), H = I(w, "heads"), Dd = I(w, "d");
  ts_strbuf_printf(sb,
                   "  let QT: f32[%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 "]\n"
                   "  let VT: f32[%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 "]\n"
                   "  QT[b, h, l, d] = Q[b, l, h, d]\n"
                   "  VT[b, h, d, l] = V[b, l, h, d]\n"
                   "  C[b, h, i, j] += QT[b, h, i, k] * VT[b, h, k, j]\n",
                   B, H, L, Dd, B, H, Dd, L);
}

static void body_norm(const ir_wl_inst *w, ts_strbuf *sb) {
  ts_strbuf_printf(sb,
                   "  let sq: f32[%" PRId64 "]\n"
                   "  sq[b] += A[b, i, j] * A[b, i, j]\n"
                   "  Y[b] = sqrt(sq[b])\n",
                   I(w, "b"));
}

/* ---- FLOPs (a multiply-add counts 2; every tap, padded ones included) --------------- */

static double out_numel(const ir_wl_inst *w) {
  wl_sig s;
  ir_wl_signature(w, &s);
  double n = 1;
  for (int i = 0; i < s.t[s.nin].ndim; i++) n *= (double)s.t[s.nin].shape[i];
  return n;
}

static double flops_conv1d(const ir_wl_inst *w) { return 2 * out_numel(w) * D(w, "r") * D(w, "c") / D(w, "groups"); }
static double flops_conv3d(const ir_wl_inst *w) {
  return 2 * out_numel(w) * D(w, "t") * D(w, "r") * D(w, "s") * D(w, "c") / D(w, "groups");
}
static double flops_capsule(const ir_wl_inst *w) {
  return 2 * out_numel(w) * D(w, "r") * D(w, "s") * D(w, "cap") * D(w, "c");
}
static double flops_depthwise(const ir_wl_inst *w) { return 2 * out_numel(w) * D(w, "r") * D(w, "s"); }
static double flops_convt(const ir_wl_inst *w) {
  return 2 * D(w, "n") * D(w, "h") * D(w, "w") * D(w, "c") * D(w, "k") * D(w, "r") * D(w, "s");
}
static double flops_cbr(const ir_wl_inst *w) {
  return out_numel(w) * (2 * D(w, "r") * D(w, "s") * D(w, "c") + 4);
}
static double flops_tbg(const ir_wl_inst *w) { return 2 * D(w, "b") * D(w, "heads") * D(w, "l") * D(w, "l") * D(w, "d"); }
static double flops_norm(const ir_wl_inst *w) { return D(w, "b") * (2 * D(w, "m") * D(w, "n") + 1); }

/* ---- checks -------------------------------------------------------------------------- */

static ts_status check_none(const ir_wl_inst *w, ts_diag *d) {
  (void)w;
  (void)d;
  return TS_OK;
}

static ts_status check_groups(const ir_wl_inst *w, ts_diag *d) {
  int64_t g = I(w, "groups");
  if (I(w, "c") % g || I(w, "k") % g)
    return ts_diag_set(d, TS_EINVAL, "%s: groups=%" PRId64 " must divide c=%" PRId64 " and k=%" PRId64, w->wl->name, g,
                       I(w, "c"), I(w, "k"));
  return TS_OK;
}

static ts_status check_conv1d(const ir_wl_inst *w, ts_diag *d) {
  ts_status st = check_groups(w, d);
  return st ? st : ir_wl_check_out(w, out_of(w, "l", "r"), 1, d);
}

static ts_status check_conv3d(const ir_wl_inst *w, ts_diag *d) {
  ts_status st = check_groups(w, d);
  if (st) return st;
  if (out_of(w, "d", "t") <= 0)
    return ts_diag_set(d, TS_EINVAL, "%s: the output depth would be %" PRId64 " (the kernel does not fit the padded input)",
                       w->wl->name, out_of(w, "d", "t"));
  return ir_wl_check_out(w, out_of(w, "h", "r"), out_of(w, "w", "s"), d);
}

static ts_status check_conv2d(const ir_wl_inst *w, ts_diag *d) {
  return ir_wl_check_out(w, out_of(w, "h", "r"), out_of(w, "w", "s"), d);
}

static ts_status check_convt(const ir_wl_inst *w, ts_diag *d) {
  int64_t st = I(w, "stride"), pad = I(w, "pad");
  return ir_wl_check_out(w, ir_wl_convt_out(I(w, "h"), I(w, "r"), st, pad), ir_wl_convt_out(I(w, "w"), I(w, "s"), st, pad),
                         d);
}

/* ---- the table --------------------------------------------------------------------------- */

#define P(k, def, help) {k, def, help}
#define SPATIAL P("stride", "1", "stride"), P("pad", "1", "zero padding (both sides)")

const wl_def ir_wl_tvm_defs[] = {
    {{"conv1d_nlc", "1-d convolution, NLC input, weights [r,c/groups,k] (TVM C1D, f32)", 9,
      {P("n", "1", "batch"), P("l", "12", "input length"), P("c", "4", "input channels"), P("k", "6", "output channels"),
       P("r", "3", "kernel length"), SPATIAL, P("dilation", "1", "dilation"), P("groups", "1", "groups (divides c and k)")}},
     {K_POS, K_POS, K_POS, K_POS, K_POS, K_POS, K_NONNEG, K_POS, K_POS}, check_conv1d, body_conv1d, flops_conv1d},
    {{"conv3d_ndhwc", "3-d convolution, NDHWC input, weights [t,r,s,c/groups,k] (TVM C3D, f32)", 13,
      {P("n", "1", "batch"), P("d", "5", "input depth"), P("h", "6", "input height"), P("w", "6", "input width"),
       P("c", "4", "input channels"), P("k", "6", "output channels"), P("t", "3", "kernel depth"),
       P("r", "3", "kernel height"), P("s", "3", "kernel width"), SPATIAL, P("dilation", "1", "dilation"),
       P("groups", "1", "groups (divides c and k)")}},
     {K_POS, K_POS, K_POS, K_POS, K_POS, K_POS, K_POS, K_POS, K_POS, K_POS, K_NONNEG, K_POS, K_POS}, check_conv3d,
     body_conv3d, flops_conv3d},
    {{"conv2d_capsule", "capsule 2-d convolution, input [n,h,w,cap,cap,c], weights [r,s,cap,cap,c,k] (TVM CAP, f32)",
      10,
      {P("n", "1", "batch"), P("h", "6", "input height"), P("w", "6", "input width"), P("c", "3", "input channels"),
       P("k", "5", "output channels"), P("r", "3", "kernel height"), P("s", "3", "kernel width"),
       P("cap", "4", "capsule size"), SPATIAL}},
     {K_POS, K_POS, K_POS, K_POS, K_POS, K_POS, K_POS, K_POS, K_POS, K_NONNEG}, check_conv2d, body_capsule,
     flops_capsule},
    {{"depthwise_conv2d_nhwc", "depthwise 2-d convolution, NHWC input, weights [1,r,s,c] (TVM DEP, f32)", 9,
      {P("n", "1", "batch"), P("h", "10", "input height"), P("w", "10", "input width"), P("c", "4", "channels"),
       P("r", "3", "kernel height"), P("s", "3", "kernel width"), SPATIAL, P("dilation", "1", "dilation")}},
     {K_POS, K_POS, K_POS, K_POS, K_POS, K_POS, K_POS, K_NONNEG, K_POS}, check_conv2d, body_depthwise_nhwc,
     flops_depthwise},
    {{"conv2d_transpose_nhwc", "transposed 2-d convolution, NHWC input, weights [r,s,c,k] (TVM T2D, f32)", 9,
      {P("n", "1", "batch"), P("h", "4", "input height"), P("w", "4", "input width"), P("c", "4", "input channels"),
       P("k", "6", "output channels"), P("r", "4", "kernel height"), P("s", "4", "kernel width"),
       P("stride", "2", "stride"), P("pad", "1", "padding")}},
     {K_POS, K_POS, K_POS, K_POS, K_POS, K_POS, K_POS, K_POS, K_NONNEG}, check_convt, body_convt_nhwc, flops_convt},
    {{"conv2d_nhwc_bn_relu",
      "relu((conv2d_nhwc + bias[k]) * bn_scale[k] + bn_offset[k]), weights [r,s,c,k] (TVM CBR, f32)", 10,
      {P("n", "1", "batch"), P("h", "8", "input height"), P("w", "8", "input width"), P("c", "4", "input channels"),
       P("k", "6", "output channels"), P("r", "3", "kernel height"), P("s", "3", "kernel width"), SPATIAL,
       P("dilation", "1", "dilation")}},
     {K_POS, K_POS, K_POS, K_POS, K_POS, K_POS, K_POS, K_POS, K_NONNEG, K_POS}, check_conv2d, body_cbr, flops_cbr},
    {{"transpose_batch_matmul", "C[b,h,i,j] = sum_k Q[b,i,h,k] V[b,j,h,k] (TVM TBG, f32)", 4,
      {P("b", "1", "batch"), P("l", "16", "sequence length"), P("heads", "2", "heads"), P("d", "8", "head size")}},
     {K_POS, K_POS, K_POS, K_POS}, check_none, body_tbg, flops_tbg},
    {{"norm", "Y[b] = sqrt(sum over m, n of A[b,m,n]^2) (TVM NRM, f32)", 3,
      {P("b", "2", "batch"), P("m", "16", "rows"), P("n", "16", "columns")}},
     {K_POS, K_POS, K_POS}, check_none, body_norm, flops_norm},
};
const int ir_wl_tvm_ndefs = (int)(sizeof ir_wl_tvm_defs / sizeof ir_wl_tvm_defs[0]);
