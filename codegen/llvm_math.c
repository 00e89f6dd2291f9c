/* llvm_math.c — the math intrinsics of the IR (exp, log, sqrt, rsqrt, tanh,
 * erf, sigmoid, pow, fma, abs) as LLVM IR: branch-free f32 polynomials
 * (Cephes, Abramowitz & Stegun) that vectorize, because a libm call in
 * vector code is scalarized. Accuracy and sources: docs/TUNING.md
 * ("Notes by file: codegen/"). */
#include <math.h>
#include <string.h>

#include "llvm_int.h"

/* Horner steps use llvm.fmuladd: fused where the target has FMA, a separate
 * multiply and add elsewhere (never a libm fmaf call). */
static LLVMValueRef fmuladd(lx_fn *f, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c) {
  LLVMTypeRef ty = LLVMTypeOf(a);
  LLVMValueRef args[3] = {a, b, c};
  return cg_lx_intrin(f, "llvm.fmuladd", &ty, 1, args, 3);
}

static LLVMValueRef un_intrin(lx_fn *f, const char *name, LLVMValueRef x) {
  LLVMTypeRef ty = LLVMTypeOf(x);
  return cg_lx_intrin(f, name, &ty, 1, &x, 1);
}

static LLVMValueRef K(LLVMValueRef like, double v) { return cg_lx_constf(LLVMTypeOf(like), v); }

/* Horner evaluation of c[0]*x^(n-1) + ... + c[n-1]. */
static LLVMValueRef horner(lx_fn *f, LLVMValueRef x, const double *c, int n) {
  LLVMValueRef p = K(x, c[0]);
  for (int i = 1; i < n; i++) p = fmuladd(f, p, x, K(x, c[i]));
  return p;
}

static LLVMTypeRef int_like(lx_fn *f, LLVMValueRef x) {
  return cg_lx_vec(f->m->t_i32, cg_lx_lanes(x));
}

static LLVMValueRef fsel(lx_fn *f, LLVMRealPredicate p, LLVMValueRef a, LLVMValueRef b,
                         LLVMValueRef t, LLVMValueRef e) {
  LLVMValueRef c = LLVMBuildFCmp(f->b, p, a, b, "");
  return LLVMBuildSelect(f->b, c, t, e, "");
}

/* exp(x) for f32: n = round(x / ln2), r = x - n ln2 (two-part ln2),
 * e^r by a degree-7 polynomial, then times 2^n split in two halves so that
 * results down in the subnormals and up to overflow come out right. */
static LLVMValueRef exp_f32(lx_fn *f, LLVMValueRef x) {
  LLVMBuilderRef b = f->b;
  LLVMTypeRef ity = int_like(f, x);
  LLVMValueRef xc = fsel(f, LLVMRealOGT, x, K(x, 89.0), K(x, 89.0), x);
  xc = fsel(f, LLVMRealOLT, xc, K(x, -104.0), K(x, -104.0), xc);
  /* round to nearest with the 1.5 * 2^23 trick (|x / ln2| < 2^22 here) */
  LLVMValueRef t = fmuladd(f, xc, K(x, 1.44269504088896341), K(x, 12582912.0));
  LLVMValueRef n = LLVMBuildFSub(b, t, K(x, 12582912.0), "");
  LLVMValueRef r = fmuladd(f, n, K(x, -0.693359375), xc);
  r = fmuladd(f, n, K(x, 2.12194440e-4), r);
  static const double c[] = {1.9875691500E-4, 1.3981999507E-3, 8.3334519073E-3,
                             4.1665795894E-2, 1.6666665459E-1, 5.0000001201E-1};
  LLVMValueRef p = horner(f, r, c, 6);
  LLVMValueRef r2 = LLVMBuildFMul(b, r, r, "");
  LLVMValueRef y = fmuladd(f, p, r2, r);
  y = LLVMBuildFAdd(b, y, K(x, 1.0), "");
  LLVMValueRef ni = LLVMBuildFPToSI(b, n, ity, "");
  LLVMValueRef h = LLVMBuildAShr(b, ni, cg_lx_consti(ity, 1), "");
  LLVMValueRef h2 = LLVMBuildSub(b, ni, h, "");
  LLVMValueRef s1 = LLVMBuildShl(b, LLVMBuildAdd(b, h, cg_lx_consti(ity, 127), ""),
                                 cg_lx_consti(ity, 23), "");
  LLVMValueRef s2 = LLVMBuildShl(b, LLVMBuildAdd(b, h2, cg_lx_consti(ity, 127), ""),
                                 cg_lx_consti(ity, 23), "");
  y = LLVMBuildFMul(b, y, LLVMBuildBitCast(b, s1, LLVMTypeOf(x), ""), "");
  y = LLVMBuildFMul(b, y, LLVMBuildBitCast(b, s2, LLVMTypeOf(x), ""), "");
  /* NaN in, NaN out (the lane's fptosi above is poison, discarded here) */
  return fsel(f, LLVMRealUNO, x, x, x, y);
}

/* log(x) for f32: x = m 2^e with m in [sqrt(1/2), sqrt(2)), log(m) by a
 * degree-9 polynomial in m - 1, plus e ln2 in two parts. Subnormals are
 * scaled by 2^23 first; x < 0 / NaN give NaN, 0 gives -inf, inf gives inf. */
static LLVMValueRef log_f32(lx_fn *f, LLVMValueRef x) {
  LLVMBuilderRef b = f->b;
  LLVMTypeRef fty = LLVMTypeOf(x), ity = int_like(f, x);
  LLVMValueRef sub = LLVMBuildFCmp(b, LLVMRealOLT, x, K(x, 1.17549435e-38), "");
  LLVMValueRef xs = LLVMBuildSelect(b, sub, LLVMBuildFMul(b, x, K(x, 8388608.0), ""), x, "");
  LLVMValueRef adj = LLVMBuildSelect(b, sub, K(x, -23.0), K(x, 0.0), "");
  LLVMValueRef bits = LLVMBuildBitCast(b, xs, ity, "");
  LLVMValueRef ex = LLVMBuildAnd(b, LLVMBuildLShr(b, bits, cg_lx_consti(ity, 23), ""),
                                 cg_lx_consti(ity, 0xff), "");
  ex = LLVMBuildSub(b, ex, cg_lx_consti(ity, 126), "");
  LLVMValueRef mb = LLVMBuildOr(b, LLVMBuildAnd(b, bits, cg_lx_consti(ity, 0x007fffff), ""),
                                cg_lx_consti(ity, 0x3f000000), "");
  LLVMValueRef m = LLVMBuildBitCast(b, mb, fty, ""); /* [0.5, 1) */
  LLVMValueRef fe = LLVMBuildFAdd(b, LLVMBuildSIToFP(b, ex, fty, ""), adj, "");
  LLVMValueRef lo = LLVMBuildFCmp(b, LLVMRealOLT, m, K(x, 0.707106781186547524), "");
  fe = LLVMBuildSelect(b, lo, LLVMBuildFSub(b, fe, K(x, 1.0), ""), fe, "");
  LLVMValueRef mm = LLVMBuildSelect(b, lo, LLVMBuildFAdd(b, m, m, ""), m, "");
  mm = LLVMBuildFSub(b, mm, K(x, 1.0), "");
  LLVMValueRef z = LLVMBuildFMul(b, mm, mm, "");
  static const double c[] = {7.0376836292E-2,  -1.1514610310E-1, 1.1676998740E-1,
                             -1.2420140846E-1, 1.4249322787E-1,  -1.6668057665E-1,
                             2.0000714765E-1,  -2.4999993993E-1, 3.3333331174E-1};
  LLVMValueRef y = horner(f, mm, c, 9);
  y = LLVMBuildFMul(b, LLVMBuildFMul(b, y, mm, ""), z, "");
  y = fmuladd(f, fe, K(x, -2.12194440e-4), y);
  y = fmuladd(f, K(x, -0.5), z, y);
  LLVMValueRef r = LLVMBuildFAdd(b, mm, y, "");
  r = fmuladd(f, fe, K(x, 0.693359375), r);
  r = fsel(f, LLVMRealOEQ, x, K(x, INFINITY), x, r);
  r = fsel(f, LLVMRealOEQ, x, K(x, 0.0), K(x, -INFINITY), r);
  return fsel(f, LLVMRealULT, x, K(x, 0.0), K(x, NAN), r);
}

/* tanh: odd polynomial below |x| = 0.625, 1 - 2 / (e^{2|x|} + 1) with the
 * sign of x above (no cancellation there: tanh(0.625) = 0.55). */
static LLVMValueRef tanh_f32(lx_fn *f, LLVMValueRef x) {
  LLVMBuilderRef b = f->b;
  LLVMValueRef a = un_intrin(f, "llvm.fabs", x);
  LLVMValueRef z = LLVMBuildFMul(b, x, x, "");
  static const double c[] = {-5.70498872745E-3, 2.06390887954E-2, -5.37397155531E-2,
                             1.33314422036E-1, -3.33332819422E-1};
  LLVMValueRef s = horner(f, z, c, 5);
  LLVMValueRef small = fmuladd(f, LLVMBuildFMul(b, s, z, ""), x, x);
  LLVMValueRef e2 = exp_f32(f, LLVMBuildFAdd(b, a, a, ""));
  LLVMValueRef big = LLVMBuildFSub(
      b, K(x, 1.0), LLVMBuildFDiv(b, K(x, 2.0), LLVMBuildFAdd(b, e2, K(x, 1.0), ""), ""), "");
  LLVMValueRef cs[2] = {big, x};
  LLVMTypeRef ty = LLVMTypeOf(x);
  big = cg_lx_intrin(f, "llvm.copysign", &ty, 1, cs, 2);
  /* olt keeps NaN on the `big` side, where NaN propagates */
  return fsel(f, LLVMRealOLT, a, K(x, 0.625), small, big);
}

/* erf: Cephes' erff polynomial x P(x^2) below |x| = 1; above, A&S 7.1.26
 * (1 - t Q(t) e^{-x^2}, t = 1 / (1 + p|x|), absolute error 1.5e-7, where
 * erf >= 0.84 so that is relative too). */
static LLVMValueRef erf_f32(lx_fn *f, LLVMValueRef x) {
  LLVMBuilderRef b = f->b;
  LLVMTypeRef ty = LLVMTypeOf(x);
  LLVMValueRef a = un_intrin(f, "llvm.fabs", x);
  LLVMValueRef z = LLVMBuildFMul(b, x, x, "");
  static const double c[] = {7.853861353153693E-5, -8.010193625184903E-4,
                             5.188327685732524E-3, -2.685381193529856E-2,
                             1.128358514861418E-1, -3.761262582423300E-1,
                             1.128379165726710E0};
  LLVMValueRef small = LLVMBuildFMul(b, x, horner(f, z, c, 7), "");
  LLVMValueRef t = LLVMBuildFDiv(b, K(x, 1.0), fmuladd(f, K(x, 0.3275911), a, K(x, 1.0)), "");
  static const double q[] = {1.061405429, -1.453152027, 1.421413741, -0.284496736,
                             0.254829592};
  LLVMValueRef qt = LLVMBuildFMul(b, horner(f, t, q, 5), t, "");
  LLVMValueRef e = exp_f32(f, LLVMBuildFNeg(b, z, ""));
  LLVMValueRef big = LLVMBuildFSub(b, K(x, 1.0), LLVMBuildFMul(b, qt, e, ""), "");
  LLVMValueRef cs[2] = {big, x};
  big = cg_lx_intrin(f, "llvm.copysign", &ty, 1, cs, 2);
  return fsel(f, LLVMRealOLT, a, K(x, 1.0), small, big);
}

static LLVMValueRef sigmoid_f32(lx_fn *f, LLVMValueRef x) {
  LLVMValueRef e = exp_f32(f, LLVMBuildFNeg(f->b, x, ""));
  return LLVMBuildFDiv(f->b, K(x, 1.0), LLVMBuildFAdd(f->b, e, K(x, 1.0), ""), "");
}

/* x^n for a small integer n by repeated squaring (n may be negative). */
static LLVMValueRef powi(lx_fn *f, LLVMValueRef x, int n) {
  int neg = n < 0;
  unsigned u = (unsigned)(neg ? -n : n);
  LLVMValueRef r = NULL, p = x;
  while (u) {
    if (u & 1) r = r ? LLVMBuildFMul(f->b, r, p, "") : p;
    u >>= 1;
    if (u) p = LLVMBuildFMul(f->b, p, p, "");
  }
  if (!r) r = K(x, 1.0);
  if (neg) r = LLVMBuildFDiv(f->b, K(x, 1.0), r, "");
  return r;
}

/* pow(x, y) for f32: exp(y log|x|), with C's special cases: y == 0 or
 * x == 1 gives 1; x < 0 needs an integer y (sign from its parity) else NaN;
 * x == 0 falls out of log(0) = -inf. */
static LLVMValueRef pow_f32(lx_fn *f, LLVMValueRef x, LLVMValueRef y) {
  LLVMBuilderRef b = f->b;
  LLVMValueRef ax = un_intrin(f, "llvm.fabs", x);
  LLVMValueRef r = exp_f32(f, LLVMBuildFMul(b, y, log_f32(f, ax), ""));
  LLVMValueRef fy = un_intrin(f, "llvm.floor", y);
  LLVMValueRef yint = LLVMBuildFCmp(b, LLVMRealOEQ, fy, y, "");
  LLVMValueRef hy = LLVMBuildFMul(b, y, K(y, 0.5), "");
  LLVMValueRef odd = LLVMBuildAnd(
      b, yint, LLVMBuildFCmp(b, LLVMRealUNE, un_intrin(f, "llvm.floor", hy), hy, ""), "");
  LLVMValueRef negr = LLVMBuildSelect(b, odd, LLVMBuildFNeg(b, r, ""), r, "");
  negr = LLVMBuildSelect(b, yint, negr, K(x, NAN), "");
  r = fsel(f, LLVMRealOLT, x, K(x, 0.0), negr, r);
  /* x = +-0 or +-inf: 0 or inf by the sign of y, negative for odd y and
   * negative x (C's pow(-0, 3) = -0, pow(-inf, 0.5) = inf) */
  LLVMValueRef zero = LLVMBuildFCmp(b, LLVMRealOEQ, ax, K(x, 0.0), "");
  LLVMValueRef inf = LLVMBuildFCmp(b, LLVMRealOEQ, ax, K(x, INFINITY), "");
  LLVMValueRef big = LLVMBuildXor(b, LLVMBuildFCmp(b, LLVMRealOGT, y, K(y, 0.0), ""), zero, "");
  LLVMValueRef rs = LLVMBuildSelect(b, big, K(x, INFINITY), K(x, 0.0), "");
  LLVMValueRef cs[2] = {rs, x};
  LLVMTypeRef ty = LLVMTypeOf(x);
  rs = LLVMBuildSelect(b, odd, cg_lx_intrin(f, "llvm.copysign", &ty, 1, cs, 2), rs, "");
  r = LLVMBuildSelect(b, LLVMBuildOr(b, zero, inf, ""), rs, r, "");
  LLVMValueRef one = LLVMBuildOr(b, LLVMBuildFCmp(b, LLVMRealOEQ, y, K(y, 0.0), ""),
                                 LLVMBuildFCmp(b, LLVMRealOEQ, x, K(x, 1.0), ""), "");
  return LLVMBuildSelect(b, one, K(x, 1.0), r, "");
}

static LLVMValueRef libm_call(lx_fn *f, const char *name, LLVMValueRef *args, int nargs) {
  /* f64 only; scalarized lane by lane for vectors */
  lx_mod *m = f->m;
  LLVMTypeRef dt = m->t_f64;
  LLVMTypeRef params[2] = {dt, dt};
  LLVMTypeRef fty = LLVMFunctionType(dt, params, (unsigned)nargs, 0);
  LLVMValueRef fn = LLVMGetNamedFunction(m->mod, name);
  if (!fn) fn = LLVMAddFunction(m->mod, name, fty);
  int lanes = cg_lx_lanes(args[0]);
  if (lanes == 1) return LLVMBuildCall2(f->b, fty, fn, args, (unsigned)nargs, "");
  LLVMValueRef out = LLVMGetPoison(LLVMTypeOf(args[0]));
  for (int i = 0; i < lanes; i++) {
    LLVMValueRef li = LLVMConstInt(m->t_i32, (unsigned long long)i, 0), a[2];
    for (int j = 0; j < nargs; j++) a[j] = LLVMBuildExtractElement(f->b, args[j], li, "");
    LLVMValueRef r = LLVMBuildCall2(f->b, fty, fn, a, (unsigned)nargs, "");
    out = LLVMBuildInsertElement(f->b, out, r, li, "");
  }
  return out;
}

static LLVMValueRef math_f64(lx_fn *f, ir_intrin op, LLVMValueRef *a) {
  LLVMBuilderRef b = f->b;
  LLVMValueRef x = a[0];
  switch (op) {
  case IR_EXP: return un_intrin(f, "llvm.exp", x);
  case IR_LOG: return un_intrin(f, "llvm.log", x);
  case IR_TANH: return libm_call(f, "tanh", a, 1);
  case IR_ERF: return libm_call(f, "erf", a, 1);
  case IR_SIGMOID: {
    LLVMValueRef e = un_intrin(f, "llvm.exp", LLVMBuildFNeg(b, x, ""));
    return LLVMBuildFDiv(b, K(x, 1.0), LLVMBuildFAdd(b, e, K(x, 1.0), ""), "");
  }
  case IR_POW: {
    LLVMTypeRef ty = LLVMTypeOf(x);
    return cg_lx_intrin(f, "llvm.pow", &ty, 1, a, 2);
  }
  default: return NULL;
  }
}

LLVMValueRef cg_lx_math(lx_fn *f, ir_intrin op, LLVMValueRef *args, int nargs,
                        const double *pow_const) {
  LLVMBuilderRef b = f->b;
  LLVMValueRef x = args[0];
  LLVMTypeRef ty = LLVMTypeOf(x);
  LLVMTypeRef et = LLVMGetTypeKind(ty) == LLVMVectorTypeKind ? LLVMGetElementType(ty) : ty;
  bool dbl = et == f->m->t_f64;
  (void)nargs;
  switch (op) {
  case IR_SQRT: return un_intrin(f, "llvm.sqrt", x);
  case IR_RSQRT: return LLVMBuildFDiv(b, K(x, 1.0), un_intrin(f, "llvm.sqrt", x), "");
  case IR_ABS: return un_intrin(f, "llvm.fabs", x);
  case IR_FMA: return cg_lx_intrin(f, "llvm.fma", &ty, 1, args, 3);
  case IR_FLOOR: return un_intrin(f, "llvm.floor", x);
  case IR_CEIL: return un_intrin(f, "llvm.ceil", x);
  case IR_ROUND: return un_intrin(f, "llvm.roundeven", x);
  case IR_SIN: return un_intrin(f, "llvm.sin", x); /* libm sinf/sin, lane by lane */
  case IR_COS: return un_intrin(f, "llvm.cos", x);
  default: break;
  }
  if (op == IR_POW && pow_const) {
    double c = *pow_const;
    if (c == 0.0) return K(x, 1.0);
    if (c == 0.5) return un_intrin(f, "llvm.sqrt", x);
    if (c == -0.5) return LLVMBuildFDiv(b, K(x, 1.0), un_intrin(f, "llvm.sqrt", x), "");
    if (c == floor(c) && fabs(c) <= 4.0) return powi(f, x, (int)c);
  }
  if (dbl) return math_f64(f, op, args);
  switch (op) {
  case IR_EXP: return exp_f32(f, x);
  case IR_LOG: return log_f32(f, x);
  case IR_TANH: return tanh_f32(f, x);
  case IR_ERF: return erf_f32(f, x);
  case IR_SIGMOID: return sigmoid_f32(f, x);
  case IR_POW: return pow_f32(f, x, args[1]);
  default: return NULL;
  }
}
