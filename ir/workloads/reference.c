/* reference.c — one hand-written C loop nest per workload, independent of the
 * DSL, the parser and the interpreter: the second opinion that `tessel run W
 * --check` and the tests compare the interpreter against. Arguments come in
 * the DSL function's param order (inputs, then outputs; see the table in
 * workloads.c) and are checked against the instance's dtypes and shapes.
 * Float math is plain f32 C with the reduction order the DSL uses (the
 * reduction axes innermost, ascending), so results agree to rounding. */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "workloads_int.h"

typedef ir_wl_ref_fn ref_fn;

static int64_t I(const ir_wl_inst *w, const char *k) { return ir_wl_int(w, k); }
static float *F(ir_tensor *a, int i) { return (float *)a[i].data; }

static void ref_matmul(const ir_wl_inst *w, ir_tensor *a) {
  int64_t M = I(w, "m"), N = I(w, "n"), K = I(w, "k");
  const float *A = F(a, 0), *B = F(a, 1);
  float *C = F(a, 2);
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      float acc = 0;
      for (int64_t k = 0; k < K; k++) acc += A[i * K + k] * B[k * N + j];
      C[i * N + j] = acc;
    }
}

static void ref_batch_matmul(const ir_wl_inst *w, ir_tensor *a) {
  int64_t Bn = I(w, "b"), M = I(w, "m"), N = I(w, "n"), K = I(w, "k");
  const float *A = F(a, 0), *B = F(a, 1);
  float *C = F(a, 2);
  for (int64_t b = 0; b < Bn; b++)
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) {
        float acc = 0;
        for (int64_t k = 0; k < K; k++) acc += A[(b * M + i) * K + k] * B[(b * K + k) * N + j];
        C[(b * M + i) * N + j] = acc;
      }
}

static float gelu(float x) { return 0.5f * x * (1.0f + erff(x * 0.707106781f)); }

static void ref_dense(const ir_wl_inst *w, ir_tensor *a) {
  int64_t M = I(w, "m"), N = I(w, "n"), K = I(w, "k");
  bool bias = I(w, "bias") != 0;
  const char *act = ir_wl_str(w, "act");
  const float *X = F(a, 0), *W = F(a, 1), *bv = bias ? F(a, 2) : NULL;
  float *Y = F(a, bias ? 3 : 2);
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      float acc = 0;
      for (int64_t k = 0; k < K; k++) acc += X[i * K + k] * W[j * K + k];
      if (bias) acc = acc + bv[j];
      if (!strcmp(act, "relu")) acc = acc > 0 ? acc : 0;
      else if (!strcmp(act, "gelu")) acc = gelu(acc);
      Y[i * N + j] = acc;
    }
}

/* C = A . B with i32 accumulation; A's bytes are i8 or (u8a) u8, B's i8. */
static void matmul_8bit(const ir_wl_inst *w, ir_tensor *a, bool u8a) {
  int64_t M = I(w, "m"), N = I(w, "n"), K = I(w, "k");
  const int8_t *A = a[0].data, *B = a[1].data;
  const uint8_t *Au = a[0].data;
  int32_t *C = a[2].data;
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      uint32_t acc = 0; /* wraps like the i32 accumulation */
      for (int64_t k = 0; k < K; k++) {
        int32_t av = u8a ? (int32_t)Au[i * K + k] : (int32_t)A[i * K + k];
        acc += (uint32_t)(av * (int32_t)B[k * N + j]);
      }
      C[i * N + j] = (int32_t)acc;
    }
}

static void ref_matmul_int8(const ir_wl_inst *w, ir_tensor *a) { matmul_8bit(w, a, false); }
static void ref_matmul_u8s8(const ir_wl_inst *w, ir_tensor *a) { matmul_8bit(w, a, true); }

/* IEEE half (bits) to float, exact. */
static float half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  float v;
  if (e == 0) v = ldexpf((float)m, -24);
  else if (e == 31) v = m ? NAN : INFINITY;
  else v = ldexpf((float)(m | 0x400), (int)e - 25);
  return sign ? -v : v;
}

static void ref_matmul_f16(const ir_wl_inst *w, ir_tensor *a) {
  int64_t M = I(w, "m"), N = I(w, "n"), K = I(w, "k");
  const uint16_t *A = a[0].data, *B = a[1].data;
  float *C = F(a, 2);
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      float acc = 0;
      for (int64_t k = 0; k < K; k++) acc += half_to_float(A[i * K + k]) * half_to_float(B[k * N + j]);
      C[i * N + j] = acc;
    }
}

/* conv2d_nchw, conv2d_nhwc and depthwise_conv2d (groups = c, one weight
 * channel) share one loop; layouts differ only in the index arithmetic. */
static void conv_common(const ir_wl_inst *w, ir_tensor *a, bool nhwc, bool depthwise) {
  int64_t N = I(w, "n"), C = I(w, "c"), H = I(w, "h"), Wd = I(w, "w"), R = I(w, "r"), S = I(w, "s");
  int64_t K = depthwise ? C : I(w, "k"), G = depthwise ? C : I(w, "groups");
  int64_t st = I(w, "stride"), pad = I(w, "pad"), dil = I(w, "dilation");
  int64_t P = ir_wl_conv_out(H, R, st, pad, dil), Q = ir_wl_conv_out(Wd, S, st, pad, dil);
  int64_t CG = C / G, KG = K / G;
  const float *X = F(a, 0), *Wt = F(a, 1);
  float *Y = F(a, 2);
  for (int64_t b = 0; b < N; b++)
    for (int64_t o = 0; o < K; o++)
      for (int64_t p = 0; p < P; p++)
        for (int64_t q = 0; q < Q; q++) {
          float acc = 0;
          int64_t g = o / KG;
          /* the DSL's reduction order: ci, ri, si for NCHW; ri, si, ci for NHWC */
          for (int64_t t = 0; t < CG * R * S; t++) {
            int64_t ci, ri, si;
            if (nhwc) {
              ri = t / (S * CG), si = t / CG % S, ci = t % CG;
            } else {
              ci = t / (R * S), ri = t / S % R, si = t % S;
            }
            int64_t h = p * st + ri * dil - pad, x = q * st + si * dil - pad;
            if (h < 0 || h >= H || x < 0 || x >= Wd) continue;
            int64_t c = g * CG + ci;
            float xv, wv;
            if (nhwc) {
              xv = X[((b * H + h) * Wd + x) * C + c];
              wv = Wt[((ri * S + si) * CG + ci) * K + o];
            } else {
              xv = X[((b * C + c) * H + h) * Wd + x];
              wv = Wt[((o * CG + ci) * R + ri) * S + si];
            }
            acc += xv * wv;
          }
          if (nhwc) Y[((b * P + p) * Q + q) * K + o] = acc;
          else Y[((b * K + o) * P + p) * Q + q] = acc;
        }
}

/* conv2d_nhwc_u8s8: u8 NHWC input (padding reads 0), i8 RSCK weights,
 * wrapping i32 accumulation */
static void ref_conv2d_nhwc_u8s8(const ir_wl_inst *w, ir_tensor *a) {
  int64_t N = I(w, "n"), C = I(w, "c"), H = I(w, "h"), Wd = I(w, "w"), R = I(w, "r"), S = I(w, "s");
  int64_t K = I(w, "k"), G = I(w, "groups"), st = I(w, "stride"), pad = I(w, "pad"), dil = I(w, "dilation");
  int64_t P = ir_wl_conv_out(H, R, st, pad, dil), Q = ir_wl_conv_out(Wd, S, st, pad, dil);
  int64_t CG = C / G, KG = K / G;
  const uint8_t *X = a[0].data;
  const int8_t *Wt = a[1].data;
  int32_t *Y = a[2].data;
  for (int64_t b = 0; b < N; b++)
    for (int64_t p = 0; p < P; p++)
      for (int64_t q = 0; q < Q; q++)
        for (int64_t o = 0; o < K; o++) {
          uint32_t acc = 0;
          for (int64_t ri = 0; ri < R; ri++)
            for (int64_t si = 0; si < S; si++) {
              int64_t h = p * st + ri * dil - pad, x = q * st + si * dil - pad;
              if (h < 0 || h >= H || x < 0 || x >= Wd) continue;
              for (int64_t ci = 0; ci < CG; ci++)
                acc += (uint32_t)((int32_t)X[((b * H + h) * Wd + x) * C + o / KG * CG + ci] *
                                  (int32_t)Wt[((ri * S + si) * CG + ci) * K + o]);
            }
          Y[((b * P + p) * Q + q) * K + o] = (int32_t)acc;
        }
}

/* conv2d_nchwc and depthwise_conv2d_nchwc (layouts in workloads.c,
 * wl_sig_blocked); the DSL's reduction order: co, ri, si, cv. */
static void ref_conv_blocked(const ir_wl_inst *w, ir_tensor *a) {
  bool dw = !strcmp(w->wl->name, "depthwise_conv2d_nchwc");
  int64_t N = I(w, "n"), C = I(w, "c"), H = I(w, "h"), Wd = I(w, "w"), R = I(w, "r"), S = I(w, "s");
  int64_t st = I(w, "stride"), pad = I(w, "pad"), dil = I(w, "dilation"), cb = I(w, "cb");
  int64_t K = dw ? C : I(w, "k"), kb = dw ? cb : I(w, "kb");
  int64_t P = ir_wl_conv_out(H, R, st, pad, dil), Q = ir_wl_conv_out(Wd, S, st, pad, dil);
  int64_t CB = C / cb;
  const float *X = F(a, 0), *Wt = F(a, 1);
  float *Y = F(a, 2);
  for (int64_t b = 0; b < N; b++)
    for (int64_t o = 0; o < K; o++)
      for (int64_t p = 0; p < P; p++)
        for (int64_t q = 0; q < Q; q++) {
          int64_t ko = o / kb, kv = o % kb;
          float acc = 0;
          for (int64_t co = dw ? ko : 0; co < (dw ? ko + 1 : CB); co++)
            for (int64_t ri = 0; ri < R; ri++)
              for (int64_t si = 0; si < S; si++)
                for (int64_t cv = dw ? kv : 0; cv < (dw ? kv + 1 : cb); cv++) {
                  int64_t h = p * st + ri * dil - pad, x = q * st + si * dil - pad;
                  if (h < 0 || h >= H || x < 0 || x >= Wd) continue;
                  float xv = X[(((b * CB + co) * H + h) * Wd + x) * cb + cv];
                  float wv = dw ? Wt[((co * R + ri) * S + si) * cb + cv]
                                : Wt[((((ko * CB + co) * R + ri) * S + si) * cb + cv) * kb + kv];
                  acc += xv * wv;
                }
          Y[(((b * (K / kb) + ko) * P + p) * Q + q) * kb + kv] = acc;
        }
}

static void ref_conv2d_nchw(const ir_wl_inst *w, ir_tensor *a) { conv_common(w, a, false, false); }
static void ref_conv2d_nhwc(const ir_wl_inst *w, ir_tensor *a) { conv_common(w, a, true, false); }
static void ref_depthwise(const ir_wl_inst *w, ir_tensor *a) { conv_common(w, a, false, true); }

/* Gather form: output (y, x) takes input (hi, wi) through tap (ri, si) when
 * y + pad - ri == hi * stride (and likewise for x). NCHW with [c,k,r,s]
 * weights, or (nhwc) NHWC with [r,s,c,k] weights. */
void ir_wl_ref_conv2d_transpose(const ir_wl_inst *w, ir_tensor *a, bool nhwc) {
  int64_t N = I(w, "n"), C = I(w, "c"), H = I(w, "h"), Wd = I(w, "w"), K = I(w, "k"), R = I(w, "r"),
          S = I(w, "s"), st = I(w, "stride"), pad = I(w, "pad");
  int64_t OH = ir_wl_convt_out(H, R, st, pad), OW = ir_wl_convt_out(Wd, S, st, pad);
  const float *X = F(a, 0), *Wt = F(a, 1);
  float *Y = F(a, 2);
  for (int64_t b = 0; b < N; b++)
    for (int64_t o = 0; o < K; o++)
      for (int64_t y = 0; y < OH; y++)
        for (int64_t x = 0; x < OW; x++) {
          float acc = 0;
          for (int64_t ci = 0; ci < C; ci++)
            for (int64_t ri = 0; ri < R; ri++)
              for (int64_t si = 0; si < S; si++) {
                int64_t th = y + pad - ri, tw = x + pad - si;
                if (th < 0 || tw < 0 || th % st || tw % st) continue;
                int64_t hi = th / st, wi = tw / st;
                if (hi >= H || wi >= Wd) continue;
                if (nhwc)
                  acc += X[((b * H + hi) * Wd + wi) * C + ci] * Wt[((ri * S + si) * C + ci) * K + o];
                else
                  acc += X[((b * C + ci) * H + hi) * Wd + wi] * Wt[((ci * K + o) * R + ri) * S + si];
              }
          if (nhwc) Y[((b * OH + y) * OW + x) * K + o] = acc;
          else Y[((b * K + o) * OH + y) * OW + x] = acc;
        }
}

static void ref_conv2d_transpose(const ir_wl_inst *w, ir_tensor *a) { ir_wl_ref_conv2d_transpose(w, a, false); }

static void pool_common(const ir_wl_inst *w, ir_tensor *a, bool avg) {
  int64_t N = I(w, "n"), C = I(w, "c"), H = I(w, "h"), Wd = I(w, "w"), R = I(w, "r"), S = I(w, "s"),
          st = I(w, "stride"), pad = I(w, "pad");
  int64_t P = ir_wl_conv_out(H, R, st, pad, 1), Q = ir_wl_conv_out(Wd, S, st, pad, 1);
  const float *X = F(a, 0);
  float *Y = F(a, 1);
  for (int64_t b = 0; b < N; b++)
    for (int64_t c = 0; c < C; c++)
      for (int64_t p = 0; p < P; p++)
        for (int64_t q = 0; q < Q; q++) {
          float acc = avg ? 0.0f : -INFINITY;
          for (int64_t ri = 0; ri < R; ri++)
            for (int64_t si = 0; si < S; si++) {
              int64_t h = p * st + ri - pad, x = q * st + si - pad;
              if (h < 0 || h >= H || x < 0 || x >= Wd) continue;
              float v = X[((b * C + c) * H + h) * Wd + x];
              if (avg) acc += v;
              else if (v > acc) acc = v;
            }
          Y[((b * C + c) * P + p) * Q + q] = avg ? acc / (float)(R * S) : acc;
        }
}

static void ref_max_pool(const ir_wl_inst *w, ir_tensor *a) { pool_common(w, a, false); }
static void ref_avg_pool(const ir_wl_inst *w, ir_tensor *a) { pool_common(w, a, true); }

static void ref_softmax(const ir_wl_inst *w, ir_tensor *a) {
  int64_t M = I(w, "m"), N = I(w, "n");
  const float *X = F(a, 0);
  float *Y = F(a, 1);
  for (int64_t i = 0; i < M; i++) {
    const float *x = X + i * N;
    float mx = -INFINITY, s = 0;
    for (int64_t j = 0; j < N; j++) mx = x[j] > mx ? x[j] : mx;
    for (int64_t j = 0; j < N; j++) s += expf(x[j] - mx);
    for (int64_t j = 0; j < N; j++) Y[i * N + j] = expf(x[j] - mx) / s;
  }
}

static void ref_layernorm(const ir_wl_inst *w, ir_tensor *a) {
  int64_t M = I(w, "m"), N = I(w, "n");
  const float *X = F(a, 0), *gamma = F(a, 1), *beta = F(a, 2);
  float *Y = F(a, 3);
  for (int64_t i = 0; i < M; i++) {
    const float *x = X + i * N;
    float sum = 0, sq = 0;
    for (int64_t j = 0; j < N; j++) sum += x[j];
    float mean = sum / (float)N;
    for (int64_t j = 0; j < N; j++) sq += (x[j] - mean) * (x[j] - mean);
    float rstd = 1.0f / sqrtf(sq / (float)N + 1e-5f);
    for (int64_t j = 0; j < N; j++) Y[i * N + j] = (x[j] - mean) * rstd * gamma[j] + beta[j];
  }
}

static void ref_elementwise(const ir_wl_inst *w, ir_tensor *a) {
  int64_t n = I(w, "m") * I(w, "n");
  const char *nm = w->wl->name;
  bool binary = !strcmp(nm, "add") || !strcmp(nm, "mul");
  const float *X = F(a, 0), *B = binary ? F(a, 1) : NULL;
  float *Y = F(a, binary ? 2 : 1);
  for (int64_t i = 0; i < n; i++) {
    float x = X[i], y;
    if (!strcmp(nm, "add")) y = x + B[i];
    else if (!strcmp(nm, "mul")) y = x * B[i];
    else if (!strcmp(nm, "relu")) y = x > 0 ? x : 0;
    else if (!strcmp(nm, "gelu")) y = gelu(x);
    else if (!strcmp(nm, "sigmoid")) y = 1.0f / (1.0f + expf(-x));
    else y = expf(x);
    Y[i] = y;
  }
}

static void ref_transpose(const ir_wl_inst *w, ir_tensor *a) {
  int64_t M = I(w, "m"), N = I(w, "n");
  const float *A = F(a, 0);
  float *B = F(a, 1);
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) B[j * M + i] = A[i * N + j];
}

static void ref_reduce(const ir_wl_inst *w, ir_tensor *a) {
  int64_t M = I(w, "m"), N = I(w, "n");
  bool mean = !strcmp(w->wl->name, "reduce_mean");
  const float *X = F(a, 0);
  float *Y = F(a, 1);
  for (int64_t i = 0; i < M; i++) {
    float s = 0;
    for (int64_t j = 0; j < N; j++) s += X[i * N + j];
    Y[i] = mean ? s / (float)N : s;
  }
}

static const struct {
  const char *name;
  ref_fn fn;
} refs[] = {
    {"matmul", ref_matmul},
    {"batch_matmul", ref_batch_matmul},
    {"dense", ref_dense},
    {"matmul_int8", ref_matmul_int8},
    {"matmul_u8s8", ref_matmul_u8s8},
    {"matmul_f16", ref_matmul_f16},
    {"conv2d_nchw", ref_conv2d_nchw},
    {"conv2d_nhwc", ref_conv2d_nhwc},
    {"conv2d_nhwc_u8s8", ref_conv2d_nhwc_u8s8},
    {"depthwise_conv2d", ref_depthwise},
    {"conv2d_transpose", ref_conv2d_transpose},
    {"max_pool2d", ref_max_pool},
    {"avg_pool2d", ref_avg_pool},
    {"softmax", ref_softmax},
    {"layernorm", ref_layernorm},
    {"add", ref_elementwise},
    {"mul", ref_elementwise},
    {"relu", ref_elementwise},
    {"gelu", ref_elementwise},
    {"sigmoid", ref_elementwise},
    {"exp", ref_elementwise},
    {"transpose", ref_transpose},
    {"reduce_sum", ref_reduce},
    {"reduce_mean", ref_reduce},
    {"conv2d_nchwc", ref_conv_blocked},
    {"depthwise_conv2d_nchwc", ref_conv_blocked},
};

ts_status ir_wl_reference(const ir_wl_inst *w, ir_tensor *args, ts_diag *d) {
  if (!w || !w->wl || !args) return ts_diag_set(d, TS_EINVAL, "reference: no workload or arguments");
  ref_fn fn = NULL;
  for (size_t i = 0; i < sizeof refs / sizeof refs[0]; i++)
    if (!strcmp(refs[i].name, w->wl->name)) fn = refs[i].fn;
  if (!fn) fn = ir_wl_tvm_reference(w->wl->name);
  if (!fn) return ts_diag_set(d, TS_ENOTFOUND, "reference: no C loop for workload %s", w->wl->name);
  wl_sig s;
  ir_wl_signature(w, &s);
  for (int i = 0; i < s.nin + s.nout; i++) {
    const wl_tensor_sig *t = &s.t[i];
    const ir_tensor *x = &args[i];
    if (x->dtype.code != t->dt || x->dtype.lanes != 1)
      return ts_diag_set(d, TS_ETYPE, "reference %s: argument %d (%s) has dtype %s, want %s", w->wl->name, i,
                         t->name, ir_dtype_code_name((ir_dtype_code)x->dtype.code), ir_dtype_code_name(t->dt));
    if (x->ndim != t->ndim)
      return ts_diag_set(d, TS_ESHAPE, "reference %s: argument %d (%s) has %d dimensions, want %d",
                         w->wl->name, i, t->name, x->ndim, t->ndim);
    for (int k = 0; k < t->ndim; k++)
      if (x->shape[k] != t->shape[k])
        return ts_diag_set(d, TS_ESHAPE,
                           "reference %s: argument %d (%s): dimension %d is %" PRId64 ", want %" PRId64,
                           w->wl->name, i, t->name, k, x->shape[k], t->shape[k]);
    if (!x->data) return ts_diag_set(d, TS_EINVAL, "reference %s: argument %d (%s) has no data", w->wl->name, i, t->name);
  }
  fn(w, args);
  return TS_OK;
}
