/* reference_tvm.c — the hand-written C loops of workloads_tvm.c's workloads
 * (MetaSchedule's suite in TVM's layouts), independent of the DSL and the
 * interpreter, written from te_workload.py's definitions. One channels-last
 * convolution loop serves conv1d/conv3d, the depthwise conv (groups = c: its
 * [1,r,s,c] weights are [r,s,1,c] byte for byte) and the conv of
 * conv+bn+relu. Arguments come in the DSL param order (workloads_int.h). */
#include <math.h>
#include <string.h>

#include "workloads_int.h"

static int64_t I(const ir_wl_inst *w, const char *k) { return ir_wl_int(w, k); }
static float *F(ir_tensor *a, int i) { return (float *)a[i].data; }

/* A channels-last convolution over nsp spatial axes: X[n, sp..., c],
 * W[taps..., c/g, k], Y[n, out..., k]; stride, pad and dilation alike on
 * every axis. */
typedef struct {
  int nsp;
  int64_t n, c, k, g, stride, pad, dil;
  int64_t in[3], tap[3], out[3];
} cl_conv;

static float cl_conv_at(const cl_conv *cv, const float *X, const float *Wt, int64_t b, const int64_t *o_sp, int64_t o) {
  int64_t cg = cv->c / cv->g, kg = cv->k / cv->g, ntap = 1;
  for (int i = 0; i < cv->nsp; i++) ntap *= cv->tap[i];
  float acc = 0;
  for (int64_t t = 0; t < ntap; t++) {
    int64_t tix[3], rem = t, xoff = b;
    for (int i = cv->nsp - 1; i >= 0; i--) tix[i] = rem % cv->tap[i], rem /= cv->tap[i];
    bool inside = true;
    for (int i = 0; i < cv->nsp; i++) {
      int64_t x = o_sp[i] * cv->stride + tix[i] * cv->dil - cv->pad;
      inside = inside && x >= 0 && x < cv->in[i];
      xoff = xoff * cv->in[i] + x;
    }
    if (!inside) continue;
    for (int64_t ci = 0; ci < cg; ci++) {
      int64_t c = o / kg * cg + ci;
      acc += X[xoff * cv->c + c] * Wt[(t * cg + ci) * cv->k + o];
    }
  }
  return acc;
}

/* Runs the convolution; epi (may be NULL) maps (output channel, sum). */
static void cl_conv_run(const cl_conv *cv, const float *X, const float *Wt, float *Y, float (*epi)(void *, int64_t, float),
                        void *ctx) {
  int64_t nout = 1;
  for (int i = 0; i < cv->nsp; i++) nout *= cv->out[i];
  for (int64_t b = 0; b < cv->n; b++)
    for (int64_t s = 0; s < nout; s++) {
      int64_t o_sp[3], rem = s;
      for (int i = cv->nsp - 1; i >= 0; i--) o_sp[i] = rem % cv->out[i], rem /= cv->out[i];
      for (int64_t o = 0; o < cv->k; o++) {
        float v = cl_conv_at(cv, X, Wt, b, o_sp, o);
        Y[(b * nout + s) * cv->k + o] = epi ? epi(ctx, o, v) : v;
      }
    }
}

/* Fills cv from the instance: spatial keys in[] with kernel keys tap[]. */
static void cl_conv_of(const ir_wl_inst *w, cl_conv *cv, int nsp, const char *const *in, const char *const *tap) {
  memset(cv, 0, sizeof *cv);
  cv->nsp = nsp;
  cv->n = I(w, "n");
  cv->c = I(w, "c");
  cv->k = ir_wl_str(w, "k")[0] ? I(w, "k") : cv->c;
  cv->g = ir_wl_str(w, "groups")[0] ? I(w, "groups") : 1;
  cv->stride = I(w, "stride");
  cv->pad = I(w, "pad");
  cv->dil = ir_wl_str(w, "dilation")[0] ? I(w, "dilation") : 1;
  for (int i = 0; i < nsp; i++) {
    cv->in[i] = I(w, in[i]);
    cv->tap[i] = I(w, tap[i]);
    cv->out[i] = ir_wl_conv_out(cv->in[i], cv->tap[i], cv->stride, cv->pad, cv->dil);
  }
}

static void ref_conv1d(const ir_wl_inst *w, ir_tensor *a) {
  cl_conv cv;
  cl_conv_of(w, &cv, 1, (const char *[]){"l"}, (const char *[]){"r"});
  cl_conv_run(&cv, F(a, 0), F(a, 1), F(a, 2), NULL, NULL);
}

static void ref_conv3d(const ir_wl_inst *w, ir_tensor *a) {
  cl_conv cv;
  cl_conv_of(w, &cv, 3, (const char *[]){"d", "h", "w"}, (const char *[]){"t", "r", "s"});
  cl_conv_run(&cv, F(a, 0), F(a, 1), F(a, 2), NULL, NULL);
}

static void ref_depthwise_nhwc(const ir_wl_inst *w, ir_tensor *a) {
  cl_conv cv;
  cl_conv_of(w, &cv, 2, (const char *[]){"h", "w"}, (const char *[]){"r", "s"});
  cv.g = cv.c; /* k = c */
  cl_conv_run(&cv, F(a, 0), F(a, 1), F(a, 2), NULL, NULL);
}

/* TVM's order: + bias, * bn_scale, + bn_offset, relu; args X, W, bias, bn_offset, bn_scale. */
static float cbr_epi(void *ctx, int64_t o, float v) {
  ir_tensor *a = ctx;
  float y = (v + F(a, 2)[o]) * F(a, 4)[o] + F(a, 3)[o];
  return y > 0 ? y : 0;
}

static void ref_cbr(const ir_wl_inst *w, ir_tensor *a) {
  cl_conv cv;
  cl_conv_of(w, &cv, 2, (const char *[]){"h", "w"}, (const char *[]){"r", "s"});
  cl_conv_run(&cv, F(a, 0), F(a, 1), F(a, 5), cbr_epi, a);
}

static void ref_capsule(const ir_wl_inst *w, ir_tensor *a) {
  int64_t N = I(w, "n"), H = I(w, "h"), Wd = I(w, "w"), C = I(w, "c"), K = I(w, "k"), R = I(w, "r"), S = I(w, "s"),
          cap = I(w, "cap"), st = I(w, "stride"), pad = I(w, "pad");
  int64_t P = ir_wl_conv_out(H, R, st, pad, 1), Q = ir_wl_conv_out(Wd, S, st, pad, 1);
  const float *X = F(a, 0), *Wt = F(a, 1);
  float *Y = F(a, 2);
  for (int64_t b = 0; b < N; b++)
    for (int64_t p = 0; p < P; p++)
      for (int64_t q = 0; q < Q; q++)
        for (int64_t i = 0; i < cap; i++)
          for (int64_t j = 0; j < cap; j++)
            for (int64_t o = 0; o < K; o++) {
              float acc = 0;
              for (int64_t ri = 0; ri < R; ri++)
                for (int64_t si = 0; si < S; si++) {
                  int64_t h = p * st + ri - pad, x = q * st + si - pad;
                  if (h < 0 || h >= H || x < 0 || x >= Wd) continue;
                  for (int64_t kk = 0; kk < cap; kk++)
                    for (int64_t c = 0; c < C; c++)
                      acc += X[((((b * H + h) * Wd + x) * cap + i) * cap + kk) * C + c] *
                             Wt[((((ri * S + si) * cap + kk) * cap + j) * C + c) * K + o];
                }
              Y[((((b * P + p) * Q + q) * cap + i) * cap + j) * K + o] = acc;
            }
}

/* Gather form (reference.c); TVM's dilate-and-flip reads the same taps. */
static void ref_convt_nhwc(const ir_wl_inst *w, ir_tensor *a) { ir_wl_ref_conv2d_transpose(w, a, true); }

static void ref_tbg(const ir_wl_inst *w, ir_tensor *a) {
  int64_t B = I(w, "b"), L = I(w, "l"), Hh = I(w, "heads"), Dd = I(w, "d");
  const float *Q = F(a, 0), *V = F(a, 1);
  float *C = F(a, 2);
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < Hh; h++)
      for (int64_t i = 0; i < L; i++)
        for (int64_t j = 0; j < L; j++) {
          float acc = 0;
          for (int64_t k = 0; k < Dd; k++) acc += Q[((b * L + i) * Hh + h) * Dd + k] * V[((b * L + j) * Hh + h) * Dd + k];
          C[((b * Hh + h) * L + i) * L + j] = acc;
        }
}

static void ref_norm(const ir_wl_inst *w, ir_tensor *a) {
  int64_t B = I(w, "b"), MN = I(w, "m") * I(w, "n");
  const float *A = F(a, 0);
  float *Y = F(a, 1);
  for (int64_t b = 0; b < B; b++) {
    float s = 0;
    for (int64_t i = 0; i < MN; i++) s += A[b * MN + i] * A[b * MN + i];
    Y[b] = sqrtf(s);
  }
}

ir_wl_ref_fn ir_wl_tvm_reference(const char *name) {
  static const struct {
    const char *name;
    ir_wl_ref_fn fn;
  } refs[] = {
      {"conv1d_nlc", ref_conv1d},
      {"conv3d_ndhwc", ref_conv3d},
      {"conv2d_capsule", ref_capsule},
      {"depthwise_conv2d_nhwc", ref_depthwise_nhwc},
      {"conv2d_transpose_nhwc", ref_convt_nhwc},
      {"conv2d_nhwc_bn_relu", ref_cbr},
      {"transpose_batch_matmul", ref_tbg},
      {"norm", ref_norm},
  };
  for (size_t i = 0; i < sizeof refs / sizeof refs[0]; i++)
    if (!strcmp(refs[i].name, name)) return refs[i].fn;
  return NULL;
}
