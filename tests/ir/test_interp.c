/* test_interp.c — the reference interpreter on hand-built IR (ir.h
 * constructors only, no parser): every node kind with known results, exact
 * integer and float semantics, lazy select, blocks (init, predicate, alloc
 * poison), symbolic shapes, vectors, deep IR, and each error with its code
 * and message. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/interp.h"

static ts_arena *A;

static void setup(void) { A = ts_arena_new(); }
static void teardown(void) { ts_arena_free(A); }

/* ---- builders ---- */
static ir_dtype F32 = {IR_F32, 1}, I32 = {IR_I32, 1}, I64 = {IR_I64, 1}, BOOL = {IR_BOOL, 1};

static ir_expr *ci(int64_t v) { return ir_i64(A, v); }
static ir_expr *c32(int64_t v) { return ir_i32(A, v); }
static ir_expr *cf(double v) { return ir_float(A, F32, v); }
static ir_expr *bin(ir_expr_kind k, ir_expr *x, ir_expr *y) { return ir_binop(A, k, x, y); }
static ir_expr *vr(ir_var *v) { return ir_var_ref(A, v); }

static ir_buffer *buf1(const char *name, ir_dtype t, int64_t n) {
  ir_expr *s = ci(n);
  return ir_buffer_new(A, name, t, 1, &s, "global");
}
static ir_buffer *buf2(const char *name, ir_dtype t, int64_t n0, int64_t n1) {
  ir_expr *s[2] = {ci(n0), ci(n1)};
  return ir_buffer_new(A, name, t, 2, s, "global");
}
static ir_expr *ld1(ir_buffer *b, ir_expr *i) { return ir_load(A, b, 1, &i); }
static ir_expr *ld2(ir_buffer *b, ir_expr *i, ir_expr *j) {
  ir_expr *ix[2] = {i, j};
  return ir_load(A, b, 2, ix);
}
static ir_stmt *st1(ir_buffer *b, ir_expr *i, ir_expr *v) { return ir_store(A, b, 1, &i, v); }
static ir_stmt *st2(ir_buffer *b, ir_expr *i, ir_expr *j, ir_expr *v) {
  ir_expr *ix[2] = {i, j};
  return ir_store(A, b, 2, ix, v);
}
static ir_stmt *loop(ir_var *v, int64_t n, ir_stmt *body) { return ir_for(A, v, ci(0), ci(n), IR_FOR_SERIAL, body); }

static ir_func *mkfunc(int np, ir_buffer **params, int nin, ir_stmt *body) {
  ir_func *f = ir_func_new(A, "f");
  f->nparams = np;
  f->params = TS_ANEWN(A, ir_buffer *, np);
  for (int i = 0; i < np; i++) f->params[i] = params[i];
  f->ninputs = nin;
  f->body = body;
  return f;
}

/* Stores es[i] into out[i] (dtype t) and runs; results as doubles. */
static ts_status eval_into(ir_dtype t, int n, ir_expr **es, double *res, ts_diag *d) {
  ir_buffer *out = buf1("out", t, n);
  ir_stmt **ss = TS_ANEWN(A, ir_stmt *, n);
  for (int i = 0; i < n; i++) {
    ss[i] = st1(out, ci(i), es[i]);
    ck_assert_ptr_nonnull(ss[i]);
  }
  ir_func *f = mkfunc(1, &out, 0, ir_seq(A, n, ss));
  ir_tensor arg;
  int64_t shp = n;
  ck_assert_int_eq(ir_tensor_alloc(&arg, t, 1, &shp), TS_OK);
  ts_status s = ir_interp_run(f, &arg, d);
  for (int i = 0; i < n && s == TS_OK; i++) res[i] = ir_tensor_get(&arg, i);
  ir_tensor_free(&arg);
  return s;
}

static void eval_ok(ir_dtype t, int n, ir_expr **es, double *res) {
  ts_diag d;
  ts_diag_clear(&d);
  ts_status s = eval_into(t, n, es, res, &d);
  ck_assert_msg(s == TS_OK, "interp failed: %s", d.msg);
}

/* ---- integer semantics ---- */
START_TEST(test_floordiv_floormod) {
  ir_dtype ts[2] = {I32, I64};
  for (int k = 0; k < 2; k++) {
    ir_dtype t = ts[k];
    ir_expr *es[] = {
        bin(IR_FLOORDIV, ir_int(A, t, -7), ir_int(A, t, 2)),  bin(IR_FLOORMOD, ir_int(A, t, -7), ir_int(A, t, 2)),
        bin(IR_FLOORDIV, ir_int(A, t, 7), ir_int(A, t, -2)),  bin(IR_FLOORMOD, ir_int(A, t, 7), ir_int(A, t, -2)),
        bin(IR_FLOORDIV, ir_int(A, t, -8), ir_int(A, t, 2)),  bin(IR_FLOORMOD, ir_int(A, t, -8), ir_int(A, t, 2)),
        bin(IR_DIV, ir_int(A, t, -7), ir_int(A, t, 2)),       bin(IR_DIV, ir_int(A, t, 7), ir_int(A, t, -2)),
        bin(IR_FLOORDIV, ir_int(A, t, -7), ir_int(A, t, -2)), bin(IR_FLOORMOD, ir_int(A, t, -7), ir_int(A, t, -2)),
        bin(IR_MIN, ir_int(A, t, -3), ir_int(A, t, 2)),       bin(IR_MAX, ir_int(A, t, -3), ir_int(A, t, 2)),
    };
    double want[] = {-4, 1, -4, -1, -4, 0, -3, -3, 3, -1, -3, 2};
    double got[12];
    eval_ok(t, 12, es, got);
    for (int i = 0; i < 12; i++) ck_assert_msg(got[i] == want[i], "%s case %d: got %g want %g", k ? "i64" : "i32", i, got[i], want[i]);
  }
}
END_TEST

START_TEST(test_int_wrap_and_compare) {
  ir_expr *es[] = {
      bin(IR_ADD, c32(2147483647), c32(1)),
      bin(IR_MUL, c32(65536), c32(65536)),
      ir_cast(A, I32, bin(IR_LT, c32(-1), c32(0))),
      ir_cast(A, I32, bin(IR_EQ, c32(4), c32(5))),
      ir_cast(A, I32, ir_not(A, bin(IR_GE, c32(4), c32(5)))),
      ir_cast(A, I32, bin(IR_AND, ir_bool(A, true), ir_bool(A, false))),
      ir_cast(A, I32, bin(IR_OR, ir_bool(A, false), ir_bool(A, true))),
  };
  double want[] = {-2147483648.0, 0, 1, 0, 1, 0, 1};
  double got[7];
  eval_ok(I32, 7, es, got);
  for (int i = 0; i < 7; i++) ck_assert_msg(got[i] == want[i], "case %d: got %g", i, got[i]);
}
END_TEST

/* ---- casts ---- */
START_TEST(test_casts_int) {
  ir_dtype i8 = ir_dt(IR_I8), u8 = ir_dt(IR_U8);
  ir_expr *a[] = {ir_cast(A, i8, c32(200)), ir_cast(A, i8, c32(-129)), ir_cast(A, i8, cf(-3.7)),
                  ir_cast(A, i8, cf(3.99))};
  double want_a[] = {-56, 127, -3, 3};
  double got[4];
  eval_ok(i8, 4, a, got);
  for (int i = 0; i < 4; i++) ck_assert_msg(got[i] == want_a[i], "i8 case %d: %g", i, got[i]);
  ir_expr *b[] = {ir_cast(A, u8, c32(-1)), ir_cast(A, u8, c32(256 + 7)), ir_cast(A, u8, ir_cast(A, i8, c32(-2)))};
  double want_b[] = {255, 7, 254};
  eval_ok(u8, 3, b, got);
  for (int i = 0; i < 3; i++) ck_assert_msg(got[i] == want_b[i], "u8 case %d: %g", i, got[i]);
  ir_expr *c[] = {ir_cast(A, BOOL, cf(0.5)), ir_cast(A, BOOL, c32(0)), ir_cast(A, BOOL, c32(-3))};
  double want_c[] = {1, 0, 1};
  eval_ok(BOOL, 3, c, got);
  for (int i = 0; i < 3; i++) ck_assert_msg(got[i] == want_c[i], "bool case %d: %g", i, got[i]);
}
END_TEST

START_TEST(test_casts_f16_bf16) {
  ir_dtype f16 = ir_dt(IR_F16), bf16 = ir_dt(IR_BF16);
  ir_expr *h[] = {
      ir_cast(A, f16, ir_float(A, ir_dt(IR_F64), 0.1)),
      ir_cast(A, f16, cf(2049)),       /* tie -> even 2048 */
      ir_cast(A, f16, cf(2051)),       /* tie -> even 2052 */
      ir_cast(A, f16, cf(65520)),      /* rounds past max -> inf */
      ir_cast(A, f16, cf(65519)),      /* -> 65504 */
      ir_cast(A, f16, cf(1e-7)),       /* subnormal: 2^-24 * round(1e-7 / 2^-24) = 2 * 2^-24 */
      ir_cast(A, f16, c32(-3)),
  };
  double want_h[] = {0.0999755859375, 2048, 2052, INFINITY, 65504, ldexp(2, -24), -3};
  double got[7];
  eval_ok(f16, 7, h, got);
  for (int i = 0; i < 7; i++) ck_assert_msg(got[i] == want_h[i], "f16 case %d: got %.17g want %.17g", i, got[i], want_h[i]);
  /* f16 bit pattern of 0.1 */
  {
    ir_buffer *out = buf1("out", f16, 1);
    ir_func *f = mkfunc(1, &out, 0, st1(out, ci(0), ir_cast(A, f16, ir_float(A, ir_dt(IR_F64), 0.1))));
    ir_tensor t;
    int64_t one = 1;
    ck_assert_int_eq(ir_tensor_alloc(&t, f16, 1, &one), TS_OK);
    ck_assert_int_eq(ir_interp_run(f, &t, NULL), TS_OK);
    ck_assert_uint_eq(((uint16_t *)t.data)[0], 0x2E66);
    ir_tensor_free(&t);
  }
  ir_expr *b[] = {
      ir_cast(A, bf16, cf(1.0 + ldexp(1, -8))),     /* tie -> even 1.0 */
      ir_cast(A, bf16, cf(1.0 + 3 * ldexp(1, -8))), /* tie -> even 1 + 2^-6 */
      ir_cast(A, bf16, cf(3.14159265)),
      ir_cast(A, bf16, c32(257)), /* 257 -> 256 (8 significant bits) */
  };
  double want_b[] = {1.0, 1.0 + ldexp(1, -6), 3.140625, 256};
  eval_ok(bf16, 4, b, got);
  for (int i = 0; i < 4; i++) ck_assert_msg(got[i] == want_b[i], "bf16 case %d: got %.17g", i, got[i]);
  /* arithmetic in f16 is rounded after every op: 2048 + 1 = 2048 */
  ir_expr *c[] = {bin(IR_ADD, ir_float(A, f16, 2048), ir_float(A, f16, 1))};
  eval_ok(f16, 1, c, got);
  ck_assert(got[0] == 2048);
}
END_TEST

START_TEST(test_f32_rounding_each_op) {
  /* (1e8 + 1) - 1e8: 0 in f32 (1e8 + 1 rounds back to 1e8), 1 in f64 */
  ir_expr *es[] = {bin(IR_SUB, bin(IR_ADD, cf(1e8), cf(1)), cf(1e8)),
                   bin(IR_DIV, cf(1), cf(3)),
                   bin(IR_FLOORDIV, cf(-7), cf(2)),
                   bin(IR_FLOORMOD, cf(-7), cf(2)),
                   bin(IR_DIV, cf(1), cf(0))};
  double got[5];
  eval_ok(F32, 5, es, got);
  ck_assert(got[0] == 0);
  ck_assert(got[1] == (double)(1.0f / 3.0f));
  ck_assert(got[2] == -4);
  ck_assert(got[3] == 1);
  ck_assert(isinf(got[4]));
  ir_dtype f64 = ir_dt(IR_F64);
  ir_expr *e2[] = {bin(IR_SUB, bin(IR_ADD, ir_float(A, f64, 1e8), ir_float(A, f64, 1)), ir_float(A, f64, 1e8))};
  eval_ok(f64, 1, e2, got);
  ck_assert(got[0] == 1);
}
END_TEST

/* ---- select, intrinsics ---- */
START_TEST(test_select_lazy) {
  ir_buffer *in = buf1("X", F32, 4), *out = buf1("out", F32, 3);
  ir_var *i = ir_var_new(A, "i", I64);
  /* out[i] = select(i + 2 < 4, X[i + 2], -1): X[4] is never loaded */
  ir_expr *idx = bin(IR_ADD, vr(i), ci(2));
  ir_stmt *body = loop(i, 3, st1(out, vr(i), ir_select(A, bin(IR_LT, idx, ci(4)), ld1(in, idx), cf(-1))));
  ir_buffer *ps[2] = {in, out};
  ir_func *f = mkfunc(2, ps, 1, body);
  ir_tensor t[2];
  int64_t n4 = 4, n3 = 3;
  ir_tensor_alloc(&t[0], F32, 1, &n4);
  ir_tensor_alloc(&t[1], F32, 1, &n3);
  for (int k = 0; k < 4; k++) ir_tensor_set(&t[0], k, 10 + k);
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_msg(ir_interp_run(f, t, &d) == TS_OK, "%s", d.msg);
  ck_assert(ir_tensor_get(&t[1], 0) == 12 && ir_tensor_get(&t[1], 1) == 13 && ir_tensor_get(&t[1], 2) == -1);
  /* && short-circuits the same way */
  ir_stmt *b2 = loop(i, 3, st1(out, vr(i), ir_select(A, bin(IR_AND, bin(IR_LT, idx, ci(4)), bin(IR_GT, ld1(in, idx), cf(12.5))), cf(1), cf(0))));
  f = mkfunc(2, ps, 1, b2);
  ck_assert_msg(ir_interp_run(f, t, &d) == TS_OK, "%s", d.msg);
  ck_assert(ir_tensor_get(&t[1], 0) == 0 && ir_tensor_get(&t[1], 1) == 1 && ir_tensor_get(&t[1], 2) == 0);
  ir_tensor_free(&t[0]);
  ir_tensor_free(&t[1]);
}
END_TEST

START_TEST(test_intrinsics) {
  struct {
    ir_intrin op;
    double a, b, c, want;
  } cases[] = {
      {IR_EXP, 1, 0, 0, exp(1)},      {IR_LOG, 2, 0, 0, log(2)},       {IR_SQRT, 2, 0, 0, sqrt(2)},
      {IR_RSQRT, 4, 0, 0, 0.5},       {IR_TANH, 0.5, 0, 0, tanh(0.5)}, {IR_ERF, 0.5, 0, 0, erf(0.5)},
      {IR_SIGMOID, 0, 0, 0, 0.5},     {IR_SIGMOID, 2, 0, 0, 1 / (1 + exp(-2))},
      {IR_POW, 2, 10, 0, 1024},       {IR_FMA, 2, 3, 4, 10},           {IR_ABS, -3.5, 0, 0, 3.5},
      {IR_FLOOR, -1.5, 0, 0, -2},     {IR_CEIL, -1.5, 0, 0, -1},       {IR_ROUND, 2.5, 0, 0, 2},
      {IR_ROUND, -0.5, 0, 0, -0.0},   {IR_ROUND, 1.5, 0, 0, 2},        {IR_SIN, 0.5, 0, 0, sin(0.5)},
      {IR_COS, 0.5, 0, 0, cos(0.5)},
  };
  int n = (int)(sizeof cases / sizeof cases[0]);
  ir_expr **es = TS_ANEWN(A, ir_expr *, n);
  for (int k = 0; k < n; k++) {
    ir_expr *args[3] = {cf(cases[k].a), cf(cases[k].b), cf(cases[k].c)};
    es[k] = ir_call(A, cases[k].op, F32, ir_intrin_nargs(cases[k].op), args);
  }
  double got[32];
  eval_ok(F32, n, es, got);
  for (int k = 0; k < n; k++)
    ck_assert_msg(got[k] == (double)(float)cases[k].want, "%s: got %.9g want %.9g", ir_intrin_name(cases[k].op),
                  got[k], (double)(float)cases[k].want);
  /* abs of an integer */
  ir_expr *ai = c32(-5);
  ir_expr *e1[] = {ir_call(A, IR_ABS, I32, 1, &ai)};
  eval_ok(I32, 1, e1, got);
  ck_assert(got[0] == 5);
}
END_TEST

/* ---- statements ---- */
START_TEST(test_let_if_allocate_evaluate_loops) {
  ir_buffer *out = buf1("out", I32, 6);
  ir_var *i = ir_var_new(A, "i", I64), *x = ir_var_new(A, "x", I32), *t = ir_var_new(A, "tx", I64);
  ir_buffer *tmp = buf1("tmp", I32, 1);
  /* for i (thread-bound): let x = i32(i) * 3 { if i % 2 == 0 { out[i] = x } else { allocate tmp { tmp[0] = x + 1; out[i] = tmp[0] } } } */
  ir_stmt *odd = ir_allocate(A, tmp, ir_seq(A, 2, (ir_stmt *[]){st1(tmp, ci(0), bin(IR_ADD, vr(x), c32(1))),
                                                            st1(out, vr(i), ld1(tmp, ci(0)))}));
  ir_stmt *body = ir_let(A, x, bin(IR_MUL, ir_cast(A, I32, vr(i)), c32(3)),
                         ir_if(A, bin(IR_EQ, bin(IR_FLOORMOD, vr(i), ci(2)), ci(0)), st1(out, vr(i), vr(x)), odd));
  ir_stmt *l = ir_for(A, i, ci(0), ci(5), IR_FOR_THREAD_BINDING, body);
  l->u.loop.thread = "threadIdx.x";
  /* a vectorized loop with an evaluate, and an empty loop */
  ir_stmt *l2 = ir_for(A, t, ci(5), ci(1), IR_FOR_VECTORIZED,
                       ir_seq(A, 2, (ir_stmt *[]){ir_evaluate(A, bin(IR_ADD, vr(t), ci(1))), st1(out, vr(t), c32(42))}));
  ir_var *e = ir_var_new(A, "e", I64);
  ir_stmt *l3 = ir_for(A, e, ci(0), ci(0), IR_FOR_UNROLLED, st1(out, ci(100), c32(1)));
  double got[6];
  ir_func *f = mkfunc(1, &out, 0, ir_seq(A, 3, (ir_stmt *[]){l, l2, l3}));
  ir_tensor a;
  int64_t n = 6;
  ir_tensor_alloc(&a, I32, 1, &n);
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_msg(ir_interp_run(f, &a, &d) == TS_OK, "%s", d.msg);
  for (int k = 0; k < 6; k++) got[k] = ir_tensor_get(&a, k);
  double want[] = {0, 4, 6, 10, 12, 42};
  for (int k = 0; k < 6; k++) ck_assert_msg(got[k] == want[k], "out[%d] = %g", k, got[k]);
  ir_tensor_free(&a);
}
END_TEST

/* Y[i] = sum_{j in [2, 6)} X[i, j] as a reduction block whose R domain
 * starts at 2; with_pred adds the block predicate i < 2. */
static ir_func *row_sum(bool with_pred) {
  ir_buffer *X = buf2("X", F32, 3, 6), *Y = buf1("Y", F32, 3);
  ir_var *i = ir_var_new(A, "i", I64), *j = ir_var_new(A, "j", I64);
  ir_var *vi = ir_var_new(A, "vi", I64), *vj = ir_var_new(A, "vj", I64);
  ir_block *b = ir_block_new(A, "Y");
  b->niter = 2;
  b->iters = TS_ANEWN(A, ir_iter_var, 2);
  b->iters[0] = (ir_iter_var){vi, {ci(0), ci(3)}, IR_ITER_S};
  b->iters[1] = (ir_iter_var){vj, {ci(2), ci(4)}, IR_ITER_R};
  b->init = st1(Y, vr(vi), cf(0));
  b->body = st1(Y, vr(vi), bin(IR_ADD, ld1(Y, vr(vi)), ld2(X, vr(vi), vr(vj))));
  ir_expr *vals[2] = {vr(i), bin(IR_ADD, vr(j), ci(2))};
  ir_stmt *r = ir_realize(A, b, vals, with_pred ? bin(IR_LT, vr(i), ci(2)) : NULL);
  ir_block *root = ir_block_new(A, "root");
  root->body = loop(i, 3, loop(j, 4, r));
  ir_buffer *ps[2] = {X, Y};
  return mkfunc(2, ps, 1, ir_realize(A, root, NULL, NULL));
}

static void alloc_args(ir_func *f, ir_tensor *t) {
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_msg(ir_tensors_for_func(f, NULL, t, &d) == TS_OK, "%s", d.msg);
}
static void free_args(ir_func *f, ir_tensor *t) {
  for (int i = 0; i < f->nparams; i++) ir_tensor_free(&t[i]);
}

START_TEST(test_reduction_block_init) {
  ir_func *f = row_sum(false);
  ir_tensor t[2];
  alloc_args(f, t);
  for (int k = 0; k < 18; k++) ir_tensor_set(&t[0], k, k);
  for (int k = 0; k < 3; k++) ir_tensor_set(&t[1], k, 1000); /* init must overwrite */
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_msg(ir_interp_run(f, t, &d) == TS_OK, "%s", d.msg);
  for (int r = 0; r < 3; r++) {
    double want = 0;
    for (int c = 2; c < 6; c++) want += r * 6 + c;
    ck_assert_msg(ir_tensor_get(&t[1], r) == want, "row %d: %g want %g", r, ir_tensor_get(&t[1], r), want);
  }
  free_args(f, t);
}
END_TEST

START_TEST(test_predicate_false_block) {
  ir_func *f = row_sum(true);
  ir_tensor t[2];
  alloc_args(f, t);
  for (int k = 0; k < 18; k++) ir_tensor_set(&t[0], k, 1);
  for (int k = 0; k < 3; k++) ir_tensor_set(&t[1], k, -5);
  ck_assert_int_eq(ir_interp_run(f, t, NULL), TS_OK);
  ck_assert(ir_tensor_get(&t[1], 0) == 4 && ir_tensor_get(&t[1], 1) == 4);
  ck_assert(ir_tensor_get(&t[1], 2) == -5); /* skipped: neither init nor body ran */
  free_args(f, t);
}
END_TEST

START_TEST(test_block_alloc_poison) {
  /* block with alloc tmp[2]: tmp[0] = 1; out[0] = tmp[0]; out[1] = tmp[1] (never written) */
  ir_buffer *out = buf1("out", F32, 2), *tmp = buf1("tmp", F32, 2);
  ir_buffer *outi = buf1("outi", I32, 1), *tmpi = buf1("tmpi", I32, 1);
  ir_block *b = ir_block_new(A, "root");
  b->nalloc = 2;
  b->allocs = TS_ANEWN(A, ir_buffer *, 2);
  b->allocs[0] = tmp;
  b->allocs[1] = tmpi;
  b->body = ir_seq(A, 4, (ir_stmt *[]){st1(tmp, ci(0), cf(1)), st1(out, ci(0), ld1(tmp, ci(0))),
                                       st1(out, ci(1), ld1(tmp, ci(1))), st1(outi, ci(0), ld1(tmpi, ci(0)))});
  ir_buffer *ps[2] = {out, outi};
  ir_func *f = mkfunc(2, ps, 0, ir_realize(A, b, NULL, NULL));
  ir_tensor t[2];
  alloc_args(f, t);
  ck_assert_int_eq(ir_interp_run(f, t, NULL), TS_OK);
  ck_assert(ir_tensor_get(&t[0], 0) == 1);
  ck_assert(isnan(ir_tensor_get(&t[0], 1)));
  ck_assert_int_eq(((int32_t *)t[1].data)[0], 0x5A5A5A5A);
  free_args(f, t);
}
END_TEST

START_TEST(test_symbolic_shape) {
  /* f(A: f32[N, 2], B: f32[N * 2]) -> C: f32[N * 2]: C[i] = A[i // 2, i % 2] + B[i] */
  ir_var *N = ir_var_new(A, "N", I64), *i = ir_var_new(A, "i", I64);
  ir_expr *sa[2] = {vr(N), ci(2)}, *sb = bin(IR_MUL, vr(N), ci(2));
  ir_buffer *a = ir_buffer_new(A, "A", F32, 2, sa, "global");
  ir_buffer *b = ir_buffer_new(A, "B", F32, 1, &sb, "global");
  ir_buffer *c = ir_buffer_new(A, "C", F32, 1, &sb, "global");
  ir_stmt *body = ir_for(A, i, ci(0), bin(IR_MUL, vr(N), ci(2)), IR_FOR_SERIAL,
                         st1(c, vr(i), bin(IR_ADD, ld2(a, bin(IR_FLOORDIV, vr(i), ci(2)), bin(IR_FLOORMOD, vr(i), ci(2))),
                                          ld1(b, vr(i)))));
  ir_buffer *ps[3] = {a, b, c};
  ir_func *f = mkfunc(3, ps, 2, body);
  f->nsyms = 1;
  f->syms = TS_ANEWN(A, ir_var *, 1);
  f->syms[0] = N;
  ir_tensor t[3];
  int64_t nv = 5;
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_msg(ir_tensors_for_func(f, &nv, t, &d) == TS_OK, "%s", d.msg);
  ck_assert_int_eq(t[1].shape[0], 10);
  for (int k = 0; k < 10; k++) {
    ir_tensor_set(&t[0], k, k);
    ir_tensor_set(&t[1], k, 100 * k);
  }
  ck_assert_msg(ir_interp_run(f, t, &d) == TS_OK, "%s", d.msg);
  for (int k = 0; k < 10; k++) ck_assert(ir_tensor_get(&t[2], k) == 101 * k);
  /* a second size: N = 3 inferred from A's first dimension */
  free_args(f, t);
  nv = 3;
  ck_assert_int_eq(ir_tensors_for_func(f, &nv, t, &d), TS_OK);
  ck_assert_int_eq(ir_interp_run(f, t, &d), TS_OK);
  /* shape mismatch: B has 7 elements, but N * 2 = 6 */
  ir_tensor bad;
  int64_t seven = 7;
  ir_tensor_alloc(&bad, F32, 1, &seven);
  ir_tensor keep = t[1];
  t[1] = bad;
  ck_assert_int_eq(ir_interp_run(f, t, &d), TS_ESHAPE);
  ck_assert_msg(strstr(d.msg, "B") && strstr(d.msg, "7") && strstr(d.msg, "6"), "%s", d.msg);
  t[1] = keep;
  ir_tensor_free(&bad);
  free_args(f, t);
}
END_TEST

START_TEST(test_vectors) {
  /* B[ramp(0, 1, 4)] = A[ramp(1, 2, 4)] + broadcast(0.5, 4): B[k] = A[1 + 2k] + 0.5 */
  ir_buffer *a = buf1("A", F32, 8), *b = buf1("B", F32, 4);
  ir_expr *v = bin(IR_ADD, ld1(a, ir_ramp(A, ci(1), ci(2), 4)), ir_broadcast(A, cf(0.5), 4));
  ck_assert_int_eq(v->dtype.lanes, 4);
  ir_stmt *s1 = st1(b, ir_ramp(A, ci(0), ci(1), 4), v);
  ir_buffer *ps[2] = {a, b};
  ir_func *f = mkfunc(2, ps, 1, s1);
  ir_tensor t[2];
  alloc_args(f, t);
  for (int k = 0; k < 8; k++) ir_tensor_set(&t[0], k, k * 10);
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_msg(ir_interp_run(f, t, &d) == TS_OK, "%s", d.msg);
  for (int k = 0; k < 4; k++) ck_assert(ir_tensor_get(&t[1], k) == (1 + 2 * k) * 10 + 0.5);

  /* masked store: B[ramp(2, 1, 4)] = A[ramp(5, 1, 4)] if ramp(2,1,4) < broadcast(4): lanes 2, 3 only;
   * the value's lanes 2, 3 (A[7], A[8]) — A[8] is out of bounds but masked off */
  for (int k = 0; k < 4; k++) ir_tensor_set(&t[1], k, -1);
  ir_expr *idx = ir_ramp(A, ci(2), ci(1), 4);
  ir_stmt *s2 = st1(b, idx, ld1(a, ir_ramp(A, ci(5), ci(1), 4)));
  s2->u.store.predicate = bin(IR_LT, idx, ir_broadcast(A, ci(4), 4));
  f = mkfunc(2, ps, 1, s2);
  ck_assert_msg(ir_interp_run(f, t, &d) == TS_OK, "%s", d.msg);
  ck_assert(ir_tensor_get(&t[1], 0) == -1 && ir_tensor_get(&t[1], 1) == -1);
  ck_assert(ir_tensor_get(&t[1], 2) == 50 && ir_tensor_get(&t[1], 3) == 60);

  /* vector select with a mixed mask: lanes whose index is past the end load nothing */
  ir_expr *i2 = ir_ramp(A, ci(6), ci(1), 4); /* 6, 7, 8, 9 */
  ir_expr *sel = ir_select(A, bin(IR_LT, i2, ir_broadcast(A, ci(8), 4)), ld1(a, i2), ir_broadcast(A, cf(-7), 4));
  f = mkfunc(2, ps, 1, st1(b, ir_ramp(A, ci(0), ci(1), 4), sel));
  ck_assert_msg(ir_interp_run(f, t, &d) == TS_OK, "%s", d.msg);
  ck_assert(ir_tensor_get(&t[1], 0) == 60 && ir_tensor_get(&t[1], 1) == 70);
  ck_assert(ir_tensor_get(&t[1], 2) == -7 && ir_tensor_get(&t[1], 3) == -7);

  /* a vector let: let v: f32x4 = A[ramp(0, 1, 4)] * broadcast(2) { B[ramp(0,1,4)] = v } */
  ir_var *vv = ir_var_new(A, "v", ir_dt_vec(IR_F32, 4));
  ir_stmt *s4 = ir_let(A, vv, bin(IR_MUL, ld1(a, ir_ramp(A, ci(0), ci(1), 4)), ir_broadcast(A, cf(2), 4)),
                       st1(b, ir_ramp(A, ci(0), ci(1), 4), vr(vv)));
  f = mkfunc(2, ps, 1, s4);
  ck_assert_msg(ir_interp_run(f, t, &d) == TS_OK, "%s", d.msg);
  for (int k = 0; k < 4; k++) ck_assert(ir_tensor_get(&t[1], k) == 20 * k);
  free_args(f, t);
}
END_TEST

START_TEST(test_strided_buffer) {
  /* an alloc buffer with padded strides (row stride 5) and an element offset */
  ir_buffer *out = buf2("out", I32, 2, 3);
  ir_buffer *tmp = buf2("tmp", I32, 2, 3);
  tmp->strides = TS_ANEWN(A, ir_expr *, 2);
  tmp->strides[0] = ci(5);
  tmp->strides[1] = ci(1);
  tmp->elem_offset = ci(2);
  ir_var *i = ir_var_new(A, "i", I64), *j = ir_var_new(A, "j", I64);
  ir_stmt *fill = loop(i, 2, loop(j, 3, st2(tmp, vr(i), vr(j), ir_cast(A, I32, bin(IR_ADD, bin(IR_MUL, vr(i), ci(10)), vr(j))))));
  ir_var *i2 = ir_var_new(A, "i2", I64), *j2 = ir_var_new(A, "j2", I64);
  ir_stmt *copy = loop(i2, 2, loop(j2, 3, st2(out, vr(i2), vr(j2), ld2(tmp, vr(i2), vr(j2)))));
  ir_func *f = mkfunc(1, &out, 0, ir_allocate(A, tmp, ir_seq(A, 2, (ir_stmt *[]){fill, copy})));
  ir_tensor t;
  alloc_args(f, &t);
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_msg(ir_interp_run(f, &t, &d) == TS_OK, "%s", d.msg);
  for (int r = 0; r < 2; r++)
    for (int c = 0; c < 3; c++) ck_assert(ir_tensor_get(&t, r * 3 + c) == r * 10 + c);
  ir_tensor_free(&t);
}
END_TEST

START_TEST(test_deep_ir) {
  /* a 200000-deep let chain and a 200000-deep sum: no recursion, no stack overflow */
  enum { DEPTH = 200000 };
  ir_buffer *out = buf1("out", I64, 2);
  ir_var **vs = TS_ANEWN(A, ir_var *, DEPTH);
  for (int k = 0; k < DEPTH; k++) vs[k] = ir_var_new(A, "x", I64);
  ir_stmt *s = st1(out, ci(0), vr(vs[DEPTH - 1]));
  for (int k = DEPTH - 1; k >= 0; k--) s = ir_let(A, vs[k], k ? bin(IR_ADD, vr(vs[k - 1]), ci(1)) : ci(1), s);
  ir_expr *e = ci(0);
  for (int k = 0; k < DEPTH; k++) e = bin(IR_ADD, ci(1), e); /* right-leaning */
  ir_func *f = mkfunc(1, &out, 0, ir_seq(A, 2, (ir_stmt *[]){s, st1(out, ci(1), e)}));
  ir_tensor t;
  alloc_args(f, &t);
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_msg(ir_interp_run(f, &t, &d) == TS_OK, "%s", d.msg);
  ck_assert(ir_tensor_get(&t, 0) == DEPTH);
  ck_assert(ir_tensor_get(&t, 1) == DEPTH);
  ir_tensor_free(&t);
}
END_TEST

/* ---- errors ---- */
static ts_status run_expect(ir_func *f, ir_tensor *t, ts_status code, ts_diag *d) {
  ts_diag_clear(d);
  ts_status s = ir_interp_run(f, t, d);
  ck_assert_msg(s == code, "status %s (%s), want %s", ts_strerror(s), d->msg, ts_strerror(code));
  ck_assert_int_eq(d->code, code);
  return s;
}

START_TEST(test_err_out_of_bounds) {
  ir_buffer *a = buf2("Src", F32, 3, 4), *b = buf1("Dst", F32, 3);
  ir_var *i = ir_var_new(A, "i", I64);
  ir_block *blk = ir_block_new(A, "copy");
  blk->body = loop(i, 3, st1(b, vr(i), ld2(a, vr(i), bin(IR_ADD, vr(i), ci(2))))); /* Src[2, 4] at i = 2 */
  ir_buffer *ps[2] = {a, b};
  ir_func *f = mkfunc(2, ps, 1, ir_realize(A, blk, NULL, NULL));
  ir_tensor t[2];
  alloc_args(f, t);
  ts_diag d;
  run_expect(f, t, TS_EBOUNDS, &d);
  ck_assert_msg(strstr(d.msg, "Src[2, 4]") && strstr(d.msg, "dimension 1") && strstr(d.msg, "[0, 4)") &&
                    strstr(d.msg, "load") && strstr(d.msg, "copy"),
                "%s", d.msg);
  /* and a store */
  blk->body = loop(i, 3, st1(b, bin(IR_SUB, vr(i), ci(1)), cf(0)));
  run_expect(f, t, TS_EBOUNDS, &d);
  ck_assert_msg(strstr(d.msg, "store") && strstr(d.msg, "Dst[-1]") && strstr(d.msg, "dimension 0"), "%s", d.msg);
  free_args(f, t);
}
END_TEST

START_TEST(test_err_div_by_zero) {
  ir_buffer *out = buf1("out", I32, 2);
  ir_var *i = ir_var_new(A, "i", I64);
  ir_expr *den = ir_cast(A, I32, bin(IR_SUB, ci(1), vr(i)));
  ir_func *f = mkfunc(1, &out, 0, loop(i, 2, st1(out, vr(i), bin(IR_FLOORDIV, c32(7), den))));
  ir_tensor t;
  alloc_args(f, &t);
  ts_diag d;
  run_expect(f, &t, TS_ERUNTIME, &d);
  ck_assert_msg(strstr(d.msg, "division by zero"), "%s", d.msg);
  f = mkfunc(1, &out, 0, st1(out, ci(0), bin(IR_FLOORMOD, c32(7), c32(0))));
  run_expect(f, &t, TS_ERUNTIME, &d);
  f = mkfunc(1, &out, 0, st1(out, ci(0), bin(IR_DIV, c32(7), c32(0))));
  run_expect(f, &t, TS_ERUNTIME, &d);
  /* float division by zero is IEEE, not an error */
  ir_expr *e[] = {bin(IR_DIV, cf(-1), cf(0))};
  double got;
  eval_ok(F32, 1, e, &got);
  ck_assert(isinf(got) && got < 0);
  ir_tensor_free(&t);
}
END_TEST

START_TEST(test_err_arguments) {
  ir_buffer *a = buf2("In", F32, 2, 3), *b = buf1("Out", F32, 2);
  ir_var *i = ir_var_new(A, "i", I64);
  ir_buffer *ps[2] = {a, b};
  ir_func *f = mkfunc(2, ps, 1, loop(i, 2, st1(b, vr(i), ld2(a, vr(i), ci(0)))));
  ir_tensor t[2];
  alloc_args(f, t);
  ts_diag d;
  ck_assert_int_eq(ir_interp_run(f, t, &d), TS_OK);
  /* wrong shape */
  ir_tensor bad;
  int64_t s[2] = {2, 4};
  ir_tensor_alloc(&bad, F32, 2, s);
  ir_tensor keep = t[0];
  t[0] = bad;
  run_expect(f, t, TS_ESHAPE, &d);
  ck_assert_msg(strstr(d.msg, "In") && strstr(d.msg, "dimension 1") && strstr(d.msg, "4") && strstr(d.msg, "3"), "%s", d.msg);
  ir_tensor_free(&bad);
  /* wrong dtype */
  s[1] = 3;
  ir_tensor_alloc(&bad, I32, 2, s);
  t[0] = bad;
  run_expect(f, t, TS_ETYPE, &d);
  ck_assert_msg(strstr(d.msg, "In") && strstr(d.msg, "i32") && strstr(d.msg, "f32"), "%s", d.msg);
  ir_tensor_free(&bad);
  /* wrong rank */
  ir_tensor_alloc(&bad, F32, 1, s);
  t[0] = bad;
  run_expect(f, t, TS_ESHAPE, &d);
  ir_tensor_free(&bad);
  t[0] = keep;
  free_args(f, t);
}
END_TEST

START_TEST(test_err_uninferable_sym) {
  /* A: f32[N + 1]: N is not a bare dimension anywhere */
  ir_var *N = ir_var_new(A, "N", I64);
  ir_expr *sh = bin(IR_ADD, vr(N), ci(1));
  ir_buffer *a = ir_buffer_new(A, "A", F32, 1, &sh, "global");
  ir_func *f = mkfunc(1, &a, 0, st1(a, ci(0), cf(1)));
  f->nsyms = 1;
  f->syms = &N;
  ir_tensor t;
  int64_t n = 4;
  ir_tensor_alloc(&t, F32, 1, &n);
  ts_diag d;
  run_expect(f, &t, TS_EINVAL, &d);
  ck_assert_msg(strstr(d.msg, "N") && strstr(d.msg, "infer"), "%s", d.msg);
  ir_tensor_free(&t);
}
END_TEST

START_TEST(test_err_iteration_cap) {
  ir_buffer *out = buf1("out", I64, 1);
  ir_var *i = ir_var_new(A, "i", I64), *j = ir_var_new(A, "j", I64);
  ir_func *f = mkfunc(1, &out, 0, loop(i, 1000, loop(j, 1000, st1(out, ci(0), vr(j)))));
  ir_tensor t;
  alloc_args(f, &t);
  ts_diag d;
  ts_diag_clear(&d);
  ir_interp_opts o = {.max_steps = 10000};
  ck_assert_int_eq(ir_interp_run_opts(f, &t, &o, &d), TS_ERUNTIME);
  ck_assert_msg(strstr(d.msg, "iteration limit"), "%s", d.msg);
  uint64_t steps = 0;
  o = (ir_interp_opts){.steps = &steps};
  ck_assert_int_eq(ir_interp_run_opts(f, &t, &o, &d), TS_OK);
  ck_assert_uint_eq(steps, 1000 + 1000000 + 1000000); /* loop iterations and stores */
  /* a single loop beyond 2^40 iterations is refused up front */
  f = mkfunc(1, &out, 0, ir_for(A, i, ci(0), ci(INT64_C(1) << 41), IR_FOR_SERIAL, st1(out, ci(0), vr(i))));
  run_expect(f, &t, TS_ERUNTIME, &d);
  ck_assert_msg(strstr(d.msg, "2^40"), "%s", d.msg);
  ir_tensor_free(&t);
}
END_TEST

START_TEST(test_err_scope_and_domain) {
  ir_buffer *out = buf1("out", I64, 4);
  ir_var *i = ir_var_new(A, "i", I64), *k = ir_var_new(A, "k", I64);
  /* a variable that is never bound */
  ir_func *f = mkfunc(1, &out, 0, st1(out, ci(0), vr(k)));
  ir_tensor t;
  alloc_args(f, &t);
  ts_diag d;
  run_expect(f, &t, TS_ERUNTIME, &d);
  ck_assert_msg(strstr(d.msg, "k") && strstr(d.msg, "unbound"), "%s", d.msg);
  /* a buffer neither param nor allocated */
  ir_buffer *ghost = buf1("ghost", I64, 4);
  f = mkfunc(1, &out, 0, st1(out, ci(0), ld1(ghost, ci(0))));
  run_expect(f, &t, TS_ERUNTIME, &d);
  ck_assert_msg(strstr(d.msg, "ghost"), "%s", d.msg);
  /* an iter var bound outside its domain */
  ir_block *b = ir_block_new(A, "B");
  ir_var *vi = ir_var_new(A, "vi", I64);
  b->niter = 1;
  b->iters = TS_ANEWN(A, ir_iter_var, 1);
  b->iters[0] = (ir_iter_var){vi, {ci(0), ci(3)}, IR_ITER_S};
  b->body = st1(out, vr(vi), ci(1));
  ir_expr *val = vr(i);
  f = mkfunc(1, &out, 0, loop(i, 4, ir_realize(A, b, &val, NULL)));
  run_expect(f, &t, TS_ERUNTIME, &d);
  ck_assert_msg(strstr(d.msg, "vi") && strstr(d.msg, "domain") && strstr(d.msg, "B"), "%s", d.msg);
  /* ill-typed store */
  f = mkfunc(1, &out, 0, st1(out, ci(0), cf(1)));
  run_expect(f, &t, TS_ETYPE, &d);
  ck_assert_msg(strstr(d.msg, "out"), "%s", d.msg);
  /* wrong index count */
  f = mkfunc(1, &out, 0, st2(out, ci(0), ci(0), ci(1)));
  run_expect(f, &t, TS_EINVAL, &d);
  ir_tensor_free(&t);
}
END_TEST

START_TEST(test_tensor_helpers) {
  ir_tensor a, b;
  int64_t s[2] = {2, 3};
  ck_assert_int_eq(ir_tensor_alloc(&a, F32, 2, s), TS_OK);
  ck_assert_int_eq(ir_tensor_alloc(&b, F32, 2, s), TS_OK);
  ck_assert_int_eq(ir_tensor_numel(&a), 6);
  ir_tensor_fill_random(&a, 7);
  ir_tensor_fill_random(&b, 7);
  double e;
  ck_assert(ir_tensor_allclose(&a, &b, 0, 0, &e) && e == 0);
  for (int k = 0; k < 6; k++) ck_assert(fabs(ir_tensor_get(&a, k)) <= 1);
  ir_tensor_set(&b, 3, ir_tensor_get(&b, 3) + 1e-3);
  ck_assert(!ir_tensor_allclose(&a, &b, 1e-4, 1e-5, &e));
  ck_assert(fabs(e - 1e-3) < 1e-6);
  ck_assert(ir_tensor_allclose(&a, &b, 0, 2e-3, &e));
  ir_tensor_set(&b, 3, NAN);
  ck_assert(!ir_tensor_allclose(&a, &b, 1, 1, &e));
  ir_tensor_free(&a);
  ir_tensor_free(&b);
  ir_tensor c;
  ck_assert_int_eq(ir_tensor_alloc(&c, ir_dt(IR_I8), 1, s), TS_OK);
  ir_tensor_fill_random(&c, 3);
  for (int k = 0; k < 2; k++) ck_assert(ir_tensor_get(&c, k) >= -8 && ir_tensor_get(&c, k) < 8);
  ir_tensor_set(&c, 0, 300); /* wraps like a cast */
  ck_assert(ir_tensor_get(&c, 0) == 44);
  ir_tensor_free(&c);
}
END_TEST

START_TEST(test_oom_injection) {
  /* every allocation the interpreter makes may fail: TS_ENOMEM, no crash, no leak */
  ir_func *f = row_sum(false);
  ir_tensor t[2];
  alloc_args(f, t);
  bool done = false;
  for (long n = 1; n < 500 && !done; n++) {
    ts_diag d;
    ts_diag_clear(&d);
    ts_alloc_fail_after(n);
    ts_status s = ir_interp_run(f, t, &d);
    ts_alloc_fail_after(0);
    ck_assert_msg(s == TS_OK || s == TS_ENOMEM, "n=%ld: %s (%s)", n, ts_strerror(s), d.msg);
    if (s == TS_ENOMEM) ck_assert_int_eq(d.code, TS_ENOMEM);
    done = s == TS_OK;
  }
  ck_assert(done);
  free_args(f, t);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("interp");
  TCase *tc = tcase_create("core");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_floordiv_floormod);
  tcase_add_test(tc, test_int_wrap_and_compare);
  tcase_add_test(tc, test_casts_int);
  tcase_add_test(tc, test_casts_f16_bf16);
  tcase_add_test(tc, test_f32_rounding_each_op);
  tcase_add_test(tc, test_select_lazy);
  tcase_add_test(tc, test_intrinsics);
  tcase_add_test(tc, test_let_if_allocate_evaluate_loops);
  tcase_add_test(tc, test_reduction_block_init);
  tcase_add_test(tc, test_predicate_false_block);
  tcase_add_test(tc, test_block_alloc_poison);
  tcase_add_test(tc, test_symbolic_shape);
  tcase_add_test(tc, test_vectors);
  tcase_add_test(tc, test_strided_buffer);
  tcase_add_test(tc, test_deep_ir);
  tcase_add_test(tc, test_err_out_of_bounds);
  tcase_add_test(tc, test_err_div_by_zero);
  tcase_add_test(tc, test_err_arguments);
  tcase_add_test(tc, test_err_uninferable_sym);
  tcase_add_test(tc, test_err_iteration_cap);
  tcase_add_test(tc, test_err_scope_and_domain);
  tcase_add_test(tc, test_tensor_helpers);
  tcase_add_test(tc, test_oom_injection);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(suite());
  srunner_run_all(sr, CK_NORMAL);
  int failures = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failures ? 1 : 0;
}
