/* test_arith.c — the arith module: folding constructors, constant bounds,
 * the simplifier's rules (each with a case where its side condition fails),
 * the prover, interval sets, statement simplification, and the access-region
 * detector on hand-built blocks. Randomized property tests (fixed seeds)
 * check by brute force that simplification preserves every value, that
 * proofs hold on every point, and that ir_eval_set contains every value. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "ir/arith/arith.h"
#include "ir/arith/arith_int.h"
#include "ir/ir.h"
#include "ir/print.h"

static ts_arena *A;
static ir_analyzer an;

static void setup(void) {
  A = ts_arena_new();
  ir_analyzer_init(&an, A);
}

static void teardown(void) {
  ir_analyzer_fini(&an);
  ts_arena_free(A);
}

/* ---- builders ----------------------------------------------------------- */

static ir_var *ivar(const char *n) { return ir_var_new(A, n, ir_dt(IR_I32)); }
static ir_expr *V(ir_var *v) { return ir_var_ref(A, v); }
static ir_expr *C(int64_t c) { return ir_i32(A, c); }
static ir_expr *B(ir_expr_kind k, ir_expr *x, ir_expr *y) { return ir_binop(A, k, x, y); }
static ir_expr *ADD(ir_expr *x, ir_expr *y) { return B(IR_ADD, x, y); }
static ir_expr *SUB(ir_expr *x, ir_expr *y) { return B(IR_SUB, x, y); }
static ir_expr *MUL(ir_expr *x, ir_expr *y) { return B(IR_MUL, x, y); }
static ir_expr *FDIV(ir_expr *x, ir_expr *y) { return B(IR_FLOORDIV, x, y); }
static ir_expr *FMOD(ir_expr *x, ir_expr *y) { return B(IR_FLOORMOD, x, y); }

static char *str(const ir_expr *e) {
  static char buf[4][512];
  static int k;
  char *s = ir_expr_to_string(e);
  char *out = buf[k++ & 3];
  snprintf(out, 512, "%s", s ? s : "(null)");
  ts_free(s);
  return out;
}

#define EXPECT_SIMP(e, want)                                                          \
  do {                                                                                \
    ir_expr *got_ = ir_simplify(&an, (e));                                            \
    ir_expr *want_ = (want);                                                          \
    ck_assert_msg(got_ && ir_arith_same(got_, want_), "simplify(%s) = %s, want %s",   \
                  str(e), str(got_), str(want_));                                     \
  } while (0)

#define EXPECT_NOT(e, notwant)                                                        \
  do {                                                                                \
    ir_expr *got_ = ir_simplify(&an, (e));                                            \
    ck_assert_msg(got_ && !ir_arith_same(got_, (notwant)), "simplify(%s) = %s: must not", \
                  str(e), str(got_));                                                 \
  } while (0)

static bool is_const(const ir_expr *e, int64_t v) {
  int64_t x;
  return ir_as_int(e, &x) && x == v;
}

/* ---- a tiny reference evaluator (exact IR semantics) --------------------- */

typedef struct env {
  int n;
  ir_var *vars[4];
  int64_t vals[4];
} env;

static int64_t fdiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) q--;
  return q;
}
static int64_t fmod_(int64_t a, int64_t b) { return a - fdiv(a, b) * b; }

static int64_t ev(const ir_expr *e, const env *en) {
  switch (e->kind) {
  case IR_INT_IMM: return e->u.ival;
  case IR_VAR:
    for (int i = 0; i < en->n; i++)
      if (en->vars[i] == e->u.var) return en->vals[i];
    ck_abort_msg("unbound var %s", e->u.var->name);
    return 0;
  case IR_NOT: return !ev(e->u.un.a, en);
  case IR_SELECT: {
    int64_t c = ev(e->u.sel.cond, en), t = ev(e->u.sel.t, en), f = ev(e->u.sel.f, en);
    return c ? t : f;
  }
  default: break;
  }
  int64_t x = ev(e->u.bin.a, en), y = ev(e->u.bin.b, en);
  switch (e->kind) {
  case IR_ADD: return x + y;
  case IR_SUB: return x - y;
  case IR_MUL: return x * y;
  case IR_DIV: ck_assert(y != 0); return x / y;
  case IR_FLOORDIV: ck_assert(y != 0); return fdiv(x, y);
  case IR_FLOORMOD: ck_assert(y != 0); return fmod_(x, y);
  case IR_MIN: return x < y ? x : y;
  case IR_MAX: return x > y ? x : y;
  case IR_EQ: return x == y;
  case IR_NE: return x != y;
  case IR_LT: return x < y;
  case IR_LE: return x <= y;
  case IR_GT: return x > y;
  case IR_GE: return x >= y;
  case IR_AND: return x && y;
  case IR_OR: return x || y;
  default: ck_abort_msg("eval: unexpected kind %d", e->kind); return 0;
  }
}

/* ---- folding constructors ----------------------------------------------- */

START_TEST(test_fold_constructors) {
  ir_var *x = ivar("x"), *y = ivar("y");
  ck_assert(is_const(ir_add(A, C(2), C(3)), 5));
  ck_assert(is_const(ir_sub(A, C(2), C(3)), -1));
  ck_assert(is_const(ir_mul(A, C(-4), C(3)), -12));
  ck_assert(is_const(ir_floordiv(A, C(-7), C(2)), -4));
  ck_assert(is_const(ir_floormod(A, C(-7), C(2)), 1));
  ck_assert(is_const(ir_floormod(A, C(7), C(-2)), -1));
  ck_assert(is_const(ir_min(A, C(7), C(-2)), -2));
  ck_assert(is_const(ir_max(A, C(7), C(-2)), 7));
  ck_assert(is_const(ir_lt(A, C(1), C(2)), 1));
  ck_assert(is_const(ir_lt(A, C(2), C(2)), 0));
  ir_expr *xv = V(x);
  ck_assert_ptr_eq(ir_add(A, xv, C(0)), xv);
  ck_assert_ptr_eq(ir_add(A, C(0), xv), xv);
  ck_assert_ptr_eq(ir_sub(A, xv, C(0)), xv);
  ck_assert_ptr_eq(ir_mul(A, xv, C(1)), xv);
  ck_assert_ptr_eq(ir_mul(A, C(1), xv), xv);
  ck_assert(is_const(ir_mul(A, xv, C(0)), 0));
  ck_assert(is_const(ir_sub(A, V(x), V(x)), 0));
  ck_assert_ptr_eq(ir_floordiv(A, xv, C(1)), xv);
  ck_assert(is_const(ir_floormod(A, xv, C(1)), 0));
  ck_assert_ptr_eq(ir_min(A, xv, V(x)), xv);
  /* negatives: nothing to fold */
  ir_expr *e = ir_sub(A, V(x), V(y));
  ck_assert_int_eq(e->kind, IR_SUB);
  e = ir_add(A, V(x), C(1));
  ck_assert_int_eq(e->kind, IR_ADD);
  e = ir_floordiv(A, C(1), C(0)); /* division by zero is never folded */
  ck_assert_int_eq(e->kind, IR_FLOORDIV);
  e = ir_min(A, V(x), V(y));
  ck_assert_int_eq(e->kind, IR_MIN);
  /* overflow of the dtype is never folded */
  e = ir_add(A, C(INT32_MAX), C(1));
  ck_assert_int_eq(e->kind, IR_ADD);
  /* boolean */
  ir_expr *c = ir_lt(A, V(x), V(y));
  ck_assert_ptr_eq(ir_and(A, ir_bool(A, true), c), c);
  ck_assert(is_const(ir_and(A, c, ir_bool(A, false)), 0));
  /* floats: constants of one dtype only */
  ir_expr *f = ir_add(A, ir_float(A, ir_dt(IR_F32), 1.5), ir_float(A, ir_dt(IR_F32), 2.0));
  ck_assert(f->kind == IR_FLOAT_IMM && f->u.fval == 3.5);
  f = ir_add(A, ir_float(A, ir_dt(IR_F32), 1.5), ir_float(A, ir_dt(IR_F64), 2.0));
  ck_assert_int_eq(f->kind, IR_ADD);
  ir_var *fx = ir_var_new(A, "fx", ir_dt(IR_F32));
  f = ir_mul(A, ir_var_ref(A, fx), ir_float(A, ir_dt(IR_F32), 0.0)); /* NaN/inf: keep */
  ck_assert_int_eq(f->kind, IR_MUL);
}
END_TEST

/* ---- constant bounds ---------------------------------------------------- */

START_TEST(test_const_bound) {
  ir_var *x = ivar("x"), *y = ivar("y"), *u = ivar("u");
  ck_assert_int_eq(ir_analyzer_bind_const(&an, x, 0, 7), TS_OK);
  ck_assert_int_eq(ir_analyzer_bind(&an, y, C(-2), C(5)), TS_OK); /* [-2, 2] */
  ir_const_bound b;
  b = ir_analyzer_const_bound(&an, ADD(V(x), V(y)));
  ck_assert(b.lo == -2 && b.hi == 9);
  b = ir_analyzer_const_bound(&an, SUB(V(x), V(y)));
  ck_assert(b.lo == -2 && b.hi == 9);
  b = ir_analyzer_const_bound(&an, MUL(V(x), V(y)));
  ck_assert(b.lo == -14 && b.hi == 14);
  b = ir_analyzer_const_bound(&an, MUL(V(y), C(-3)));
  ck_assert(b.lo == -6 && b.hi == 6);
  b = ir_analyzer_const_bound(&an, FDIV(V(y), C(2)));
  ck_assert(b.lo == -1 && b.hi == 1);
  b = ir_analyzer_const_bound(&an, FDIV(V(x), C(-2)));
  ck_assert(b.lo == -4 && b.hi == 0);
  b = ir_analyzer_const_bound(&an, B(IR_DIV, V(y), C(2)));
  ck_assert(b.lo == -1 && b.hi == 1);
  b = ir_analyzer_const_bound(&an, FMOD(V(x), C(4)));
  ck_assert(b.lo == 0 && b.hi == 3);
  b = ir_analyzer_const_bound(&an, FMOD(ADD(V(x), C(16)), C(32))); /* one period */
  ck_assert(b.lo == 16 && b.hi == 23);
  b = ir_analyzer_const_bound(&an, B(IR_MIN, V(x), V(y)));
  ck_assert(b.lo == -2 && b.hi == 2);
  b = ir_analyzer_const_bound(&an, B(IR_MAX, V(x), V(y)));
  ck_assert(b.lo == 0 && b.hi == 7);
  b = ir_analyzer_const_bound(&an, ir_select(A, B(IR_LT, V(x), V(y)), C(10), V(y)));
  ck_assert(b.lo == -2 && b.hi == 10);
  /* unknown var: saturates */
  b = ir_analyzer_const_bound(&an, V(u));
  ck_assert(b.lo == INT64_MIN && b.hi == INT64_MAX);
  b = ir_analyzer_const_bound(&an, ADD(V(u), C(5)));
  ck_assert(b.lo == INT64_MIN && b.hi == INT64_MAX);
  b = ir_analyzer_const_bound(&an, MUL(V(u), C(0)));
  ck_assert(b.lo == 0 && b.hi == 0);
  b = ir_analyzer_const_bound(&an, FMOD(V(u), C(8)));
  ck_assert(b.lo == 0 && b.hi == 7);
  b = ir_analyzer_const_bound(&an, FDIV(V(x), V(u))); /* divisor may be 0 */
  ck_assert(b.lo == INT64_MIN && b.hi == INT64_MAX);
  /* scoping: a tighter fact shadows, truncate pops it */
  int n0 = an.n;
  ck_assert_int_eq(ir_analyzer_bind_const(&an, x, 2, 100), TS_OK);
  b = ir_analyzer_const_bound(&an, V(x));
  ck_assert(b.lo == 2 && b.hi == 7);
  ir_analyzer_truncate(&an, n0);
  b = ir_analyzer_const_bound(&an, V(x));
  ck_assert(b.lo == 0 && b.hi == 7);
}
END_TEST

/* ---- simplifier rules --------------------------------------------------- */

START_TEST(test_affine_canonical) {
  ir_var *x = ivar("x"), *y = ivar("y"), *z = ivar("z");
  /* constants fold, like terms merge, atoms sorted */
  EXPECT_SIMP(ADD(ADD(C(1), V(y)), ADD(V(x), C(2))), ADD(ADD(V(x), V(y)), C(3)));
  EXPECT_SIMP(SUB(ADD(V(x), V(y)), V(y)), V(x));
  EXPECT_SIMP(SUB(V(x), V(x)), C(0));
  EXPECT_SIMP(MUL(ADD(V(x), C(1)), C(4)), ADD(MUL(V(x), C(4)), C(4)));
  EXPECT_SIMP(ADD(MUL(V(x), C(2)), MUL(C(3), V(x))), MUL(V(x), C(5)));
  EXPECT_SIMP(SUB(MUL(V(x), C(2)), ADD(V(x), V(x))), C(0));
  EXPECT_SIMP(SUB(C(0), V(z)), MUL(V(z), C(-1)));
  EXPECT_SIMP(SUB(C(5), V(z)), SUB(C(5), V(z)));
  EXPECT_SIMP(SUB(V(y), ADD(V(x), C(3))), SUB(SUB(V(y), V(x)), C(3)));
  EXPECT_SIMP(MUL(V(x), C(0)), C(0));
  EXPECT_SIMP(MUL(C(1), V(x)), V(x));
  /* nonlinear products stay atoms with ordered operands */
  EXPECT_SIMP(ADD(MUL(V(y), V(x)), MUL(V(x), V(y))), MUL(MUL(V(x), V(y)), C(2)));
  /* deterministic: simplifying twice is a no-op returning the same node */
  ir_expr *s = ir_simplify(&an, ADD(ADD(V(z), V(y)), V(x)));
  ck_assert_ptr_eq(ir_simplify(&an, s), s);
  /* an already simple expression comes back as itself (sharing) */
  ir_expr *e = ADD(V(x), C(1));
  ck_assert_ptr_eq(ir_simplify(&an, e), e);
}
END_TEST

START_TEST(test_floordiv_rules) {
  ir_var *x = ivar("x"), *y = ivar("y"), *u = ivar("u");
  ir_analyzer_bind_const(&an, y, 0, 7);
  /* (x*8 + y) // 8 -> x when 0 <= y < 8 */
  EXPECT_SIMP(FDIV(ADD(MUL(V(x), C(8)), V(y)), C(8)), V(x));
  /* negative: y's range unknown: never x, only the divisible part leaves */
  EXPECT_NOT(FDIV(ADD(MUL(V(x), C(8)), V(u)), C(8)), V(x));
  EXPECT_SIMP(FDIV(ADD(MUL(V(x), C(8)), V(u)), C(8)), ADD(V(x), FDIV(V(u), C(8))));
  /* x // c -> 0 when 0 <= x < c; negative: c too small */
  EXPECT_SIMP(FDIV(V(y), C(8)), C(0));
  EXPECT_NOT(FDIV(V(y), C(4)), C(0));
  EXPECT_SIMP(FDIV(V(y), C(4)), FDIV(V(y), C(4)));
  /* constant offsets within one period */
  EXPECT_SIMP(FDIV(ADD(V(y), C(16)), C(8)), C(2));
  EXPECT_SIMP(FDIV(ADD(MUL(V(x), C(8)), ADD(V(y), C(8))), C(8)), ADD(V(x), C(1)));
  /* gcd: (x*4 + 2) // 8 == (x*2 + 1) // 4, then the factor rule: x // 2 */
  EXPECT_SIMP(FDIV(ADD(MUL(V(x), C(4)), C(2)), C(8)), FDIV(V(x), C(2)));
  /* factor rule (a reshape's flat index): (x*49 + j*7 + k) // 98 -> x // 2
   * when 0 <= j*7 + k < 49; negative: k one too wide */
  ir_var *j = ivar("j"), *k = ivar("k"), *k8 = ivar("k8");
  ir_analyzer_bind_const(&an, j, 0, 6);
  ir_analyzer_bind_const(&an, k, 0, 6);
  ir_analyzer_bind_const(&an, k8, 0, 7);
  EXPECT_SIMP(FDIV(ADD(ADD(MUL(V(x), C(49)), MUL(V(j), C(7))), V(k)), C(98)), FDIV(V(x), C(2)));
  EXPECT_NOT(FDIV(ADD(ADD(MUL(V(x), C(49)), MUL(V(j), C(7))), V(k8)), C(98)), FDIV(V(x), C(2)));
  EXPECT_NOT(FDIV(ADD(MUL(V(x), C(49)), V(u)), C(98)), FDIV(V(x), C(2)));
  /* nested: (x // 4) // 2 -> x // 8 */
  EXPECT_SIMP(FDIV(FDIV(V(x), C(4)), C(2)), FDIV(V(x), C(8)));
  /* ((x % 16) // 4) stays; under x in [0,16) the mod goes */
  EXPECT_SIMP(FDIV(FMOD(V(x), C(16)), C(4)), FDIV(FMOD(V(x), C(16)), C(4)));
  ir_var *w = ivar("w");
  ir_analyzer_bind_const(&an, w, 0, 15);
  EXPECT_SIMP(FDIV(FMOD(V(w), C(16)), C(4)), FDIV(V(w), C(4)));
  EXPECT_SIMP(FDIV(FMOD(V(w), C(16)), C(16)), C(0));
  EXPECT_SIMP(FDIV(FDIV(FMOD(V(x), C(16)), C(4)), C(4)), C(0));
  /* division by one, by a constant of the other sign, constants */
  EXPECT_SIMP(FDIV(V(x), C(1)), V(x));
  EXPECT_SIMP(FDIV(C(-7), C(2)), C(-4));
  EXPECT_SIMP(FDIV(C(7), C(-2)), C(-4));
  EXPECT_SIMP(FDIV(V(x), C(0)), FDIV(V(x), C(0))); /* left alone */
  /* truncating division: rewritten only for a non-negative numerator */
  EXPECT_SIMP(B(IR_DIV, ADD(MUL(V(w), C(8)), V(y)), C(8)), V(w));
  EXPECT_SIMP(B(IR_DIV, C(-7), C(2)), C(-3));
  ir_var *n = ivar("n");
  ir_analyzer_bind_const(&an, n, -8, -1);
  EXPECT_NOT(B(IR_DIV, V(n), C(8)), C(-1)); /* trunc(-1/8) = 0, not floor */
  EXPECT_SIMP(B(IR_DIV, V(n), C(8)), B(IR_DIV, V(n), C(8)));
}
END_TEST

START_TEST(test_floormod_rules) {
  ir_var *x = ivar("x"), *y = ivar("y"), *u = ivar("u");
  ir_analyzer_bind_const(&an, y, 0, 7);
  /* (x*8 + y) % 8 -> y */
  EXPECT_SIMP(FMOD(ADD(MUL(V(x), C(8)), V(y)), C(8)), V(y));
  /* negative: unknown remainder keeps the mod, divisible part dropped */
  EXPECT_SIMP(FMOD(ADD(MUL(V(x), C(8)), V(u)), C(8)), FMOD(V(u), C(8)));
  EXPECT_NOT(FMOD(ADD(MUL(V(x), C(8)), V(u)), C(8)), V(u));
  /* x % c -> x when 0 <= x < c; negative when c is too small */
  EXPECT_SIMP(FMOD(V(y), C(8)), V(y));
  EXPECT_SIMP(FMOD(V(y), C(4)), FMOD(V(y), C(4)));
  EXPECT_SIMP(FMOD(ADD(V(y), C(8)), C(8)), V(y));
  EXPECT_SIMP(FMOD(ADD(V(y), C(16)), C(32)), ADD(V(y), C(16)));
  EXPECT_SIMP(FMOD(ADD(V(u), C(9)), C(8)), FMOD(ADD(V(u), C(1)), C(8)));
  /* nested: (x % 16) % 4 -> x % 4; not when 4 does not divide 6 */
  EXPECT_SIMP(FMOD(FMOD(V(x), C(16)), C(4)), FMOD(V(x), C(4)));
  EXPECT_SIMP(FMOD(FMOD(V(x), C(6)), C(4)), FMOD(FMOD(V(x), C(6)), C(4)));
  EXPECT_SIMP(FMOD(MUL(V(x), C(8)), C(8)), C(0));
  EXPECT_SIMP(FMOD(V(x), C(1)), C(0));
  EXPECT_SIMP(FMOD(C(-7), C(3)), C(2));
  EXPECT_SIMP(FMOD(C(7), C(-3)), C(-2));
  /* factor rule: (x*49 + j*7 + k) % 98 -> (x % 2)*49 + j*7 + k when
   * 0 <= j*7 + k < 49; negative: k one too wide */
  ir_var *j = ivar("j"), *k = ivar("k"), *k8 = ivar("k8");
  ir_analyzer_bind_const(&an, j, 0, 6);
  ir_analyzer_bind_const(&an, k, 0, 6);
  ir_analyzer_bind_const(&an, k8, 0, 7);
  ir_expr *jk = ADD(MUL(V(j), C(7)), V(k));
  EXPECT_SIMP(FMOD(ADD(MUL(V(x), C(49)), jk), C(98)), ADD(ADD(MUL(V(j), C(7)), V(k)), MUL(FMOD(V(x), C(2)), C(49))));
  EXPECT_NOT(FMOD(ADD(ADD(MUL(V(x), C(49)), MUL(V(j), C(7))), V(k8)), C(98)),
             ADD(ADD(MUL(V(j), C(7)), V(k8)), MUL(FMOD(V(x), C(2)), C(49))));
}
END_TEST

/* Symbolic divisors (a Reshape's flat index over a symbolic dim S): with
 * i1 in [0, S), j in [0, 768): ((i0*S + i1)*768 + j) // (S*768) -> i0,
 * (..) // 768 % S -> i1, (i0*S + i1) % S -> i1; negatives: a remainder not
 * provably below the divisor keeps the division. */
START_TEST(test_divmod_symbolic) {
  ir_var *S = ivar("S"), *i0 = ivar("i0"), *i1 = ivar("i1"), *j = ivar("j"), *u = ivar("u");
  ck_assert_int_eq(ir_analyzer_bind(&an, S, C(1), C(1000)), TS_OK);
  ck_assert_int_eq(ir_analyzer_bind(&an, i0, C(0), C(3)), TS_OK);
  ck_assert_int_eq(ir_analyzer_bind(&an, i1, C(0), V(S)), TS_OK);
  ir_analyzer_bind_const(&an, j, 0, 767);
  ir_expr *flat = ADD(MUL(ADD(MUL(V(i0), V(S)), V(i1)), C(768)), V(j));
  EXPECT_SIMP(FDIV(flat, MUL(V(S), C(768))), V(i0));
  EXPECT_SIMP(FMOD(FDIV(flat, C(768)), V(S)), V(i1));
  EXPECT_SIMP(FMOD(ADD(MUL(V(i0), V(S)), V(i1)), V(S)), V(i1));
  EXPECT_SIMP(FDIV(ADD(MUL(V(i0), V(S)), V(i1)), V(S)), V(i0));
  /* by the constant first: (i1*768 + j) // (S*768) -> i1 // S, and the
   * flat address merges back: (i1//S)*S*768 + (i1%S)*768 + j -> i1*768 + j */
  EXPECT_SIMP(FDIV(ADD(MUL(V(i1), C(768)), V(j)), MUL(V(S), C(768))), FDIV(V(i1), V(S)));
  ir_expr *addr = ADD(ADD(MUL(MUL(FDIV(V(i1), V(S)), V(S)), C(768)), MUL(FMOD(V(i1), V(S)), C(768))), V(j));
  EXPECT_SIMP(addr, ADD(MUL(V(i1), C(768)), V(j)));
  EXPECT_SIMP(ADD(MUL(FDIV(V(i1), V(S)), MUL(V(S), C(768))), MUL(FMOD(V(i1), V(S)), C(768))), MUL(V(i1), C(768)));
  /* u unbounded, j one too wide for S: stay divisions */
  EXPECT_NOT(FMOD(ADD(MUL(V(i0), V(S)), V(u)), V(S)), V(u));
  EXPECT_NOT(FDIV(ADD(MUL(V(i0), V(S)), V(j)), V(S)), V(i0));
  EXPECT_NOT(FMOD(ADD(MUL(V(i0), V(S)), ADD(V(i1), C(1))), V(S)), ADD(V(i1), C(1)));
}
END_TEST

START_TEST(test_divmod_merge) {
  ir_var *x = ivar("x"), *y = ivar("y");
  /* (x//c)*c + x%c -> x, for any x */
  EXPECT_SIMP(ADD(MUL(FDIV(V(x), C(8)), C(8)), FMOD(V(x), C(8))), V(x));
  EXPECT_SIMP(ADD(FMOD(V(x), C(8)), MUL(C(8), FDIV(V(x), C(8)))), V(x));
  /* scaled: 3*((x//4)*4 + x%4) + y */
  ir_expr *e = ADD(ADD(MUL(FDIV(V(x), C(4)), C(12)), MUL(FMOD(V(x), C(4)), C(3))), V(y));
  EXPECT_SIMP(e, ADD(MUL(V(x), C(3)), V(y)));
  /* negative: mismatched scale or divisor does not merge */
  EXPECT_NOT(ADD(MUL(FDIV(V(x), C(8)), C(4)), FMOD(V(x), C(8))), V(x));
  EXPECT_NOT(ADD(MUL(FDIV(V(x), C(4)), C(8)), FMOD(V(x), C(8))), V(x));
  /* (x//c)%s*c + x%c -> x%(c*s) */
  EXPECT_SIMP(ADD(MUL(FMOD(FDIV(V(x), C(4)), C(4)), C(4)), FMOD(V(x), C(4))),
              FMOD(V(x), C(16)));
  /* fuse then split back: f in [0, 12): (f//4)*4 + f%4 with sums inside */
  ir_var *f = ivar("f");
  ir_analyzer_bind_const(&an, f, 0, 11);
  ir_expr *xs = ADD(V(f), MUL(V(y), C(12)));
  EXPECT_SIMP(ADD(MUL(FDIV(xs, C(4)), C(4)), FMOD(xs, C(4))), ADD(MUL(V(y), C(12)), V(f)));
  /* three fused loops (extents 2, 3, 4) un-fused into an index: back to g */
  ir_var *gv = ivar("g");
  ir_analyzer_bind_const(&an, gv, 0, 23);
  ir_expr *i0 = FDIV(V(gv), C(12)), *i1 = FMOD(FDIV(V(gv), C(4)), C(3)), *i2 = FMOD(V(gv), C(4));
  EXPECT_SIMP(ADD(ADD(MUL(i0, C(12)), MUL(i1, C(4))), i2), V(gv));
  EXPECT_SIMP(ADD(MUL(ADD(MUL(i0, C(3)), i1), C(4)), i2), V(gv));
  /* and split: g = o*4 + n with n in [0,4): g // 4 -> o, g % 4 -> n */
  ir_var *o = ivar("o"), *nn = ivar("n");
  ir_analyzer_bind_const(&an, o, 0, 5);
  ir_analyzer_bind_const(&an, nn, 0, 3);
  ir_expr *gs = ADD(MUL(V(o), C(4)), V(nn));
  EXPECT_SIMP(FMOD(FDIV(gs, C(4)), C(3)), FMOD(V(o), C(3)));
  EXPECT_SIMP(FMOD(gs, C(4)), V(nn));
  EXPECT_SIMP(B(IR_LT, gs, C(24)), ir_bool(A, true));
}
END_TEST

START_TEST(test_compare_rules) {
  ir_var *i = ivar("i"), *j = ivar("j"), *N = ivar("N"), *u = ivar("u");
  ir_analyzer_bind_const(&an, i, 0, 9);
  ir_analyzer_bind_const(&an, j, 0, 3);
  EXPECT_SIMP(B(IR_LT, V(i), C(10)), ir_bool(A, true));
  EXPECT_SIMP(B(IR_LT, V(i), C(9)), B(IR_LT, V(i), C(9))); /* undecided */
  EXPECT_SIMP(B(IR_GE, V(i), C(0)), ir_bool(A, true));
  EXPECT_SIMP(B(IR_GT, V(i), C(9)), ir_bool(A, false));
  EXPECT_SIMP(B(IR_LE, ADD(MUL(V(j), C(4)), C(3)), C(15)), ir_bool(A, true));
  EXPECT_SIMP(B(IR_LT, ADD(MUL(V(j), C(4)), C(3)), C(15)), B(IR_LT, ADD(MUL(V(j), C(4)), C(3)), C(15)));
  EXPECT_SIMP(B(IR_EQ, V(u), V(u)), ir_bool(A, true));
  EXPECT_SIMP(B(IR_NE, ADD(V(u), C(1)), V(u)), ir_bool(A, true));
  EXPECT_SIMP(B(IR_EQ, MUL(V(u), C(2)), C(1)), ir_bool(A, false)); /* parity */
  EXPECT_SIMP(B(IR_LT, V(u), C(3)), B(IR_LT, V(u), C(3)));
  /* symbolic: k in [0, N) proves k < N and k <= N - 1, not k < N - 1 */
  ir_var *k = ivar("k");
  ck_assert_int_eq(ir_analyzer_bind(&an, k, C(0), V(N)), TS_OK);
  EXPECT_SIMP(B(IR_LT, V(k), V(N)), ir_bool(A, true));
  EXPECT_SIMP(B(IR_LE, V(k), SUB(V(N), C(1))), ir_bool(A, true));
  EXPECT_SIMP(B(IR_GE, V(k), V(N)), ir_bool(A, false));
  EXPECT_NOT(B(IR_LT, V(k), SUB(V(N), C(1))), ir_bool(A, true));
  /* float comparisons: constants only */
  ir_dtype f32 = ir_dt(IR_F32);
  EXPECT_SIMP(B(IR_LT, ir_float(A, f32, 1.0), ir_float(A, f32, 2.0)), ir_bool(A, true));
  ir_var *fx = ir_var_new(A, "fx", f32);
  ir_expr *fe = B(IR_EQ, ir_var_ref(A, fx), ir_var_ref(A, fx)); /* NaN != NaN */
  ck_assert_ptr_eq(ir_simplify(&an, fe), fe);
}
END_TEST

START_TEST(test_bool_select_minmax) {
  ir_var *x = ivar("x"), *y = ivar("y"), *u = ivar("u");
  ir_analyzer_bind_const(&an, x, 0, 9);
  ir_analyzer_bind_const(&an, y, 20, 29);
  ir_expr *T = ir_bool(A, true), *F = ir_bool(A, false);
  ir_expr *c = B(IR_LT, V(u), C(3));
  EXPECT_SIMP(B(IR_AND, c, T), c);
  EXPECT_SIMP(B(IR_AND, T, c), c);
  EXPECT_SIMP(B(IR_AND, c, F), F);
  EXPECT_SIMP(B(IR_OR, c, T), T);
  EXPECT_SIMP(B(IR_OR, F, c), c);
  EXPECT_SIMP(B(IR_AND, c, B(IR_LT, V(u), C(3))), c);
  EXPECT_SIMP(ir_not(A, ir_not(A, c)), c);
  EXPECT_SIMP(ir_not(A, c), B(IR_GE, V(u), C(3)));
  EXPECT_SIMP(ir_not(A, T), F);
  EXPECT_SIMP(B(IR_AND, B(IR_LT, V(x), C(10)), c), c); /* decided clause drops */
  /* select with a constant (or decidable) condition */
  EXPECT_SIMP(ir_select(A, T, V(u), C(1)), V(u));
  EXPECT_SIMP(ir_select(A, B(IR_LT, V(x), V(y)), V(x), V(y)), V(x));
  EXPECT_SIMP(ir_select(A, c, V(u), V(u)), V(u));
  ir_expr *sel = ir_select(A, c, V(u), C(1));
  ck_assert_ptr_eq(ir_simplify(&an, sel), sel);
  /* min/max by bounds */
  EXPECT_SIMP(B(IR_MIN, V(x), V(y)), V(x));
  EXPECT_SIMP(B(IR_MAX, V(x), V(y)), V(y));
  EXPECT_SIMP(B(IR_MIN, V(u), ADD(V(u), C(1))), V(u));
  EXPECT_SIMP(B(IR_MAX, V(u), ADD(V(u), C(1))), ADD(V(u), C(1)));
  EXPECT_SIMP(B(IR_MIN, C(3), C(-1)), C(-1));
  EXPECT_SIMP(B(IR_MIN, V(x), C(10)), V(x));
  EXPECT_SIMP(B(IR_MIN, V(x), C(5)), B(IR_MIN, V(x), C(5))); /* undecided */
  EXPECT_SIMP(B(IR_MAX, V(u), V(x)), B(IR_MAX, V(x), V(u)));  /* ordered operands */
}
END_TEST

START_TEST(test_float_untouched) {
  ir_dtype f32 = ir_dt(IR_F32), f64 = ir_dt(IR_F64);
  ir_var *a = ir_var_new(A, "a", f32);
  ir_expr *e = ADD(ADD(ir_var_ref(A, a), ir_float(A, f32, 1.0)), ir_float(A, f32, 2.0));
  ck_assert_ptr_eq(ir_simplify(&an, e), e); /* never reassociated */
  ir_expr *s = ir_simplify(&an, SUB(ir_var_ref(A, a), ir_var_ref(A, a)));
  ck_assert_int_eq(s->kind, IR_SUB); /* inf - inf is NaN */
  ir_expr *k = ir_simplify(&an, MUL(ir_float(A, f32, 0.1), ir_float(A, f32, 3.0)));
  ck_assert(k->kind == IR_FLOAT_IMM && k->u.fval == (double)(float)(0.1 * 3.0));
  ir_expr *m = ir_simplify(&an, ADD(ir_float(A, f64, 1.0), ir_float(A, f32, 2.0)));
  ck_assert_int_eq(m->kind, IR_ADD); /* mixed dtypes */
  ir_expr *d = ir_simplify(&an, B(IR_DIV, ir_float(A, f32, 1.0), ir_float(A, f32, 0.0)));
  ck_assert_int_eq(d->kind, IR_DIV);
  /* integer indices inside a float expression still simplify */
  ir_expr *shape[] = {C(16)};
  ir_buffer *buf = ir_buffer_new(A, "X", f32, 1, shape, NULL);
  ir_var *i = ivar("i");
  ir_expr *idx[] = {ADD(V(i), SUB(C(3), C(3)))};
  ir_expr *ld = ir_simplify(&an, ir_load(A, buf, 1, idx));
  ck_assert(ld->kind == IR_LOAD && ir_arith_same(ld->u.load.idx[0], V(i)));
}
END_TEST

START_TEST(test_prove) {
  ir_var *i = ivar("i"), *N = ivar("N"), *x = ivar("x");
  ir_analyzer_bind(&an, i, C(0), V(N));
  ck_assert(ir_can_prove(&an, B(IR_LT, V(i), V(N))));
  ck_assert(ir_can_prove(&an, B(IR_GE, V(i), C(0))));
  ck_assert(!ir_can_prove(&an, B(IR_LT, V(i), C(100))));
  ck_assert(!ir_can_prove(&an, B(IR_LT, V(x), V(N))));
  ck_assert(ir_can_prove(&an, B(IR_AND, B(IR_LT, V(i), V(N)), B(IR_LE, C(0), V(i)))));
  ck_assert(ir_can_prove_equal(&an, ADD(V(x), V(x)), MUL(V(x), C(2))));
  ck_assert(ir_can_prove_equal(&an, ADD(MUL(FDIV(V(x), C(4)), C(4)), FMOD(V(x), C(4))), V(x)));
  ck_assert(!ir_can_prove_equal(&an, FDIV(V(x), C(4)), B(IR_DIV, V(x), C(4))));
  ck_assert(!ir_can_prove_equal(&an, V(x), V(N)));
  ir_var *j = ivar("j");
  ir_analyzer_bind_const(&an, j, 0, 3);
  ck_assert(ir_can_prove_equal(&an, FDIV(ADD(MUL(V(x), C(4)), V(j)), C(4)), V(x)));
  /* an imperfect split of a symbolic extent covers it: 8*((x + 7) // 8) >= x
   * (through x + 7 - (x + 7) % 8), and overshoots by at most 7 */
  ir_expr *cover = MUL(FDIV(ADD(V(x), C(7)), C(8)), C(8));
  ck_assert(ir_can_prove(&an, B(IR_GE, cover, V(x))));
  ck_assert(ir_can_prove(&an, B(IR_LE, cover, ADD(V(x), C(7)))));
  ck_assert(!ir_can_prove(&an, B(IR_LE, cover, ADD(V(x), C(6)))));
  ck_assert(!ir_can_prove(&an, B(IR_GE, MUL(FDIV(V(x), C(8)), C(8)), V(x)))); /* floor, not ceil */
}
END_TEST

/* ---- interval sets ------------------------------------------------------ */

START_TEST(test_intset) {
  ir_var *i = ivar("i"), *j = ivar("j"), *t = ivar("t");
  ir_dom_map dom;
  ir_dom_map_init(&dom);
  ck_assert_int_eq(ir_dom_map_put(&dom, j, ir_intset_range(A, C(0), C(4))), TS_OK);
  /* i*4 + j with j in [0,4) -> [i*4, i*4+3] */
  ir_intset s = ir_eval_set(&an, ADD(MUL(V(i), C(4)), V(j)), &dom);
  ck_assert(!s.empty && ir_arith_same(s.min, MUL(V(i), C(4))));
  ck_assert(ir_arith_same(s.max, ADD(MUL(V(i), C(4)), C(3))));
  /* negative scale swaps the ends */
  s = ir_eval_set(&an, SUB(V(i), MUL(V(j), C(2))), &dom);
  ck_assert(ir_arith_same(s.min, SUB(V(i), C(6))) && ir_arith_same(s.max, V(i)));
  /* floordiv of the symbolic range collapses to a point */
  s = ir_eval_set(&an, FDIV(ADD(MUL(V(i), C(4)), V(j)), C(4)), &dom);
  ck_assert(ir_arith_same(s.min, V(i)) && ir_arith_same(s.max, V(i)));
  /* floormod: within one period exact, otherwise [0, c-1] */
  s = ir_eval_set(&an, FMOD(ADD(MUL(V(i), C(8)), V(j)), C(8)), &dom);
  ck_assert(is_const(s.min, 0) && is_const(s.max, 3));
  s = ir_eval_set(&an, FMOD(ADD(V(i), V(j)), C(8)), &dom);
  ck_assert(is_const(s.min, 0) && is_const(s.max, 7));
  /* unknown sign multiplier: everything */
  s = ir_eval_set(&an, MUL(V(j), V(t)), &dom);
  ck_assert(!s.empty && s.min == NULL && s.max == NULL);
  /* min/max/select */
  s = ir_eval_set(&an, B(IR_MIN, V(j), C(2)), &dom);
  ck_assert(is_const(s.min, 0) && is_const(s.max, 2));
  /* vars outside dom stay points */
  s = ir_eval_set(&an, V(i), &dom);
  ck_assert(s.min == s.max && ir_arith_same(s.min, V(i)));
  /* union and intersect */
  ir_intset a = ir_intset_range(A, C(0), C(4)), b = ir_intset_range(A, C(2), C(10));
  ir_intset u = ir_intset_union(&an, a, b);
  ck_assert(is_const(ir_simplify(&an, u.min), 0) && is_const(ir_simplify(&an, u.max), 11));
  ir_intset x = ir_intset_intersect(&an, a, b);
  ck_assert(is_const(ir_simplify(&an, x.min), 2) && is_const(ir_simplify(&an, x.max), 3));
  ir_intset e = ir_intset_intersect(&an, ir_intset_range(A, C(0), C(2)), ir_intset_range(A, C(5), C(2)));
  ck_assert(e.empty);
  ck_assert(ir_intset_range(A, C(0), C(0)).empty);
  ir_intset p = ir_intset_union(&an, ir_intset_point(V(i)), ir_intset_point(ADD(V(i), C(2))));
  ck_assert(ir_arith_same(p.min, V(i)) && ir_arith_same(p.max, ADD(V(i), C(2))));
  ir_intset inf = ir_intset_union(&an, (ir_intset){NULL, C(3), false}, a);
  ck_assert(inf.min == NULL && is_const(ir_simplify(&an, inf.max), 3));
  ir_dom_map_fini(&dom);
}
END_TEST

/* ---- statement simplification ------------------------------------------ */

START_TEST(test_simplify_stmt) {
  ir_var *i = ivar("i"), *j = ivar("j");
  ir_expr *shape[] = {C(64)};
  ir_buffer *buf = ir_buffer_new(A, "X", ir_dt(IR_F32), 1, shape, NULL);
  /* for i in [0,8): for j in [0,8): if (i*8+j < 64) X[(i*8+j)//8*8 + (i*8+j)%8] = 0 */
  ir_expr *f = ADD(MUL(V(i), C(8)), V(j));
  ir_expr *idx[] = {ADD(MUL(FDIV(f, C(8)), C(8)), FMOD(f, C(8)))};
  ir_stmt *st = ir_store(A, buf, 1, idx, ir_float(A, ir_dt(IR_F32), 0.0));
  st = ir_if(A, B(IR_LT, f, C(64)), st, NULL);
  st = ir_for(A, j, C(0), ADD(C(4), C(4)), IR_FOR_SERIAL, st);
  st = ir_for(A, i, C(0), C(8), IR_FOR_SERIAL, st);
  ir_stmt *r = ir_simplify_stmt(&an, st);
  ck_assert_int_eq(an.n, 0); /* facts popped */
  ck_assert_int_eq(r->kind, IR_FOR);
  ir_stmt *inner = r->u.loop.body;
  ck_assert(inner->kind == IR_FOR && is_const(inner->u.loop.extent, 8));
  ir_stmt *s2 = inner->u.loop.body;
  ck_assert_int_eq(s2->kind, IR_STORE); /* the if went away */
  ck_assert_msg(ir_arith_same(s2->u.store.idx[0], f), "%s", str(s2->u.store.idx[0]));
  /* an if's condition is a fact inside its then-branch only:
   * for i in [0,8): if i < 4: X[i] = X[min(i, 3) + (i // 4) * 8] else X[min(i, 3)] = 0 */
  ir_expr *ld_idx[] = {ADD(B(IR_MIN, V(i), C(3)), MUL(FDIV(V(i), C(4)), C(8)))};
  ir_expr *st_idx[] = {V(i)}, *el_idx[] = {B(IR_MIN, V(i), C(3))};
  ir_stmt *th = ir_store(A, buf, 1, st_idx, ir_load(A, buf, 1, ld_idx));
  ir_stmt *el = ir_store(A, buf, 1, el_idx, ir_float(A, ir_dt(IR_F32), 0.0));
  ir_stmt *lp = ir_for(A, i, C(0), C(8), IR_FOR_SERIAL, ir_if(A, B(IR_GT, C(4), V(i)), th, el));
  ir_stmt *lr = ir_simplify_stmt(&an, lp);
  ir_stmt *ifs = lr->u.loop.body;
  ck_assert_int_eq(ifs->kind, IR_IF);
  ir_expr *got = ifs->u.ifs.then_s->u.store.value->u.load.idx[0];
  ck_assert_msg(ir_arith_same(got, V(i)), "%s", str(got));
  got = ifs->u.ifs.else_s->u.store.idx[0];
  ck_assert_msg(ir_arith_same(got, B(IR_MIN, V(i), C(3))), "%s", str(got));
  ck_assert_int_eq(an.n, 0);
  /* unchanged statements come back as themselves */
  ck_assert_ptr_eq(ir_simplify_stmt(&an, r), r);
  /* the original is untouched */
  ck_assert_int_eq(st->u.loop.body->u.loop.body->kind, IR_IF);
}
END_TEST

/* ---- region detection -------------------------------------------------- */

static ir_buffer *buf2(const char *name, int64_t d0, int64_t d1) {
  ir_expr *sh[] = {C(d0), C(d1)};
  return ir_buffer_new(A, name, ir_dt(IR_F32), 2, sh, NULL);
}

static void check_range(const ir_region *r, int d, ir_expr *mn, ir_expr *ex) {
  ck_assert_msg(ir_arith_same(r->ranges[d].min, mn) && ir_arith_same(r->ranges[d].extent, ex),
                "%s dim %d: [%s, +%s), want [%s, +%s)", r->buf->name, d, str(r->ranges[d].min),
                str(r->ranges[d].extent), str(mn), str(ex));
}

START_TEST(test_regions_matmul) {
  ir_buffer *Ab = buf2("A", 16, 16), *Bb = buf2("B", 16, 16), *Cb = buf2("C", 16, 16);
  ir_var *vi = ivar("vi"), *vj = ivar("vj"), *vk = ivar("vk");
  ir_block *blk = ir_block_new(A, "C");
  blk->niter = 3;
  blk->iters = TS_ANEWN(A, ir_iter_var, 3);
  blk->iters[0] = (ir_iter_var){vi, {C(0), C(16)}, IR_ITER_S};
  blk->iters[1] = (ir_iter_var){vj, {C(0), C(16)}, IR_ITER_S};
  blk->iters[2] = (ir_iter_var){vk, {C(0), C(16)}, IR_ITER_R};
  ir_expr *cij[] = {V(vi), V(vj)}, *aik[] = {V(vi), V(vk)}, *bkj[] = {V(vk), V(vj)};
  blk->init = ir_store(A, Cb, 2, cij, ir_float(A, ir_dt(IR_F32), 0.0));
  blk->body = ir_store(A, Cb, 2, cij,
                       ADD(ir_load(A, Cb, 2, cij), MUL(ir_load(A, Ab, 2, aik), ir_load(A, Bb, 2, bkj))));
  ck_assert_int_eq(ir_block_detect_regions(A, blk, NULL), TS_OK);
  /* reduction: C is the accumulator, not a read */
  ck_assert_int_eq(blk->nreads, 2);
  ck_assert_ptr_eq(blk->reads[0].buf, Ab);
  ck_assert_ptr_eq(blk->reads[1].buf, Bb);
  check_range(&blk->reads[0], 0, V(vi), C(1));
  check_range(&blk->reads[0], 1, V(vk), C(1));
  check_range(&blk->reads[1], 0, V(vk), C(1));
  ck_assert_int_eq(blk->nwrites, 1);
  ck_assert_ptr_eq(blk->writes[0].buf, Cb);
  check_range(&blk->writes[0], 0, V(vi), C(1));
  check_range(&blk->writes[0], 1, V(vj), C(1));
  /* without init (not a reduction) C is read too, in first-access order */
  blk->init = NULL;
  ck_assert_int_eq(ir_block_detect_regions(A, blk, NULL), TS_OK);
  ck_assert_int_eq(blk->nreads, 3);
  ck_assert_ptr_eq(blk->reads[0].buf, Cb);
  ck_assert_ptr_eq(blk->reads[1].buf, Ab);
}
END_TEST

START_TEST(test_regions_inner_loop) {
  /* block vi in [0,4): for k in [0,8): for l in [0,2): Y[vi, k*2+l] = X[vi*4 + l, k] + X[vi*4+3, 0]
   * plus a local temp allocated by the block. */
  ir_buffer *X = buf2("X", 16, 8), *Y = buf2("Y", 4, 16), *T = buf2("T", 1, 1);
  ir_var *vi = ivar("vi"), *k = ivar("k"), *l = ivar("l");
  ir_block *blk = ir_block_new(A, "blk");
  blk->niter = 1;
  blk->iters = TS_ANEWN(A, ir_iter_var, 1);
  blk->iters[0] = (ir_iter_var){vi, {C(0), C(4)}, IR_ITER_S};
  blk->nalloc = 1;
  blk->allocs = TS_ANEWN(A, ir_buffer *, 1);
  blk->allocs[0] = T;
  ir_expr *y_idx[] = {V(vi), ADD(MUL(V(k), C(2)), V(l))};
  ir_expr *x1[] = {ADD(MUL(V(vi), C(4)), V(l)), V(k)};
  ir_expr *x2[] = {ADD(MUL(V(vi), C(4)), C(3)), C(0)};
  ir_expr *t_idx[] = {C(0), C(0)};
  ir_stmt *body = ir_store(A, Y, 2, y_idx,
                           ADD(ADD(ir_load(A, X, 2, x1), ir_load(A, X, 2, x2)), ir_load(A, T, 2, t_idx)));
  body = ir_for(A, l, C(0), C(2), IR_FOR_SERIAL, body);
  body = ir_for(A, k, C(0), C(8), IR_FOR_SERIAL, body);
  blk->body = body;
  ck_assert_int_eq(ir_block_detect_regions(A, blk, NULL), TS_OK);
  ck_assert_int_eq(blk->nreads, 1); /* T excluded */
  ck_assert_ptr_eq(blk->reads[0].buf, X);
  check_range(&blk->reads[0], 0, MUL(V(vi), C(4)), C(4)); /* hull of [vi*4, vi*4+1] and vi*4+3 */
  check_range(&blk->reads[0], 1, C(0), C(8));
  ck_assert_int_eq(blk->nwrites, 1);
  check_range(&blk->writes[0], 0, V(vi), C(1));
  check_range(&blk->writes[0], 1, C(0), C(16));
}
END_TEST

START_TEST(test_regions_nested_block) {
  /* outer block vo in [0,4) holds: for ii in [0,4): inner block vx := vo*4 + ii,
   * whose regions are reads X[vx, 0:8], writes Y[vx]. */
  ir_buffer *X = buf2("X", 16, 8), *Y = buf2("Y", 16, 1);
  ir_var *vo = ivar("vo"), *ii = ivar("ii"), *vx = ivar("vx");
  ir_block *in = ir_block_new(A, "inner");
  in->niter = 1;
  in->iters = TS_ANEWN(A, ir_iter_var, 1);
  in->iters[0] = (ir_iter_var){vx, {C(0), C(16)}, IR_ITER_S};
  ir_expr *yx[] = {V(vx), C(0)}, *xx[] = {V(vx), C(0)};
  in->body = ir_store(A, Y, 2, yx, ir_load(A, X, 2, xx));
  ck_assert_int_eq(ir_block_detect_regions(A, in, NULL), TS_OK);
  ck_assert_int_eq(in->nreads, 1);
  /* widen the inner read by hand to check that nested regions are trusted */
  in->reads[0].ranges[1] = (ir_range){C(0), C(8)};
  ir_expr *bind[] = {ADD(MUL(V(vo), C(4)), V(ii))};
  ir_stmt *s = ir_realize(A, in, bind, NULL);
  s = ir_for(A, ii, C(0), C(4), IR_FOR_SERIAL, s);
  ir_block *out = ir_block_new(A, "outer");
  out->niter = 1;
  out->iters = TS_ANEWN(A, ir_iter_var, 1);
  out->iters[0] = (ir_iter_var){vo, {C(0), C(4)}, IR_ITER_S};
  out->body = s;
  ck_assert_int_eq(ir_block_detect_regions(A, out, NULL), TS_OK);
  ck_assert_int_eq(out->nreads, 1);
  check_range(&out->reads[0], 0, MUL(V(vo), C(4)), C(4));
  check_range(&out->reads[0], 1, C(0), C(8));
  ck_assert_int_eq(out->nwrites, 1);
  check_range(&out->writes[0], 0, MUL(V(vo), C(4)), C(4));
  check_range(&out->writes[0], 1, C(0), C(1));
}
END_TEST

START_TEST(test_regions_symbolic) {
  /* Inner loop with symbolic extent N and an unbounded (data-dependent) index. */
  ir_var *N = ivar("N"), *vi = ivar("vi"), *k = ivar("k");
  ir_expr *sh[] = {V(N), C(8)};
  ir_buffer *X = ir_buffer_new(A, "X", ir_dt(IR_F32), 2, sh, NULL);
  ir_expr *ish[] = {V(N)};
  ir_buffer *I = ir_buffer_new(A, "I", ir_dt(IR_I32), 1, ish, NULL);
  ir_block *blk = ir_block_new(A, "b");
  blk->niter = 1;
  blk->iters = TS_ANEWN(A, ir_iter_var, 1);
  blk->iters[0] = (ir_iter_var){vi, {C(0), C(8)}, IR_ITER_S};
  ir_expr *iidx[] = {V(k)};
  ir_expr *xidx[] = {V(k), ir_load(A, I, 1, iidx)};
  ir_expr *widx[] = {V(k), V(vi)};
  blk->body = ir_for(A, k, C(0), V(N), IR_FOR_SERIAL,
                     ir_store(A, X, 2, widx, ir_load(A, X, 2, xidx)));
  ck_assert_int_eq(ir_block_detect_regions(A, blk, NULL), TS_OK);
  ck_assert_int_eq(blk->nreads, 2);
  ck_assert_ptr_eq(blk->reads[0].buf, X);
  ck_assert_ptr_eq(blk->reads[1].buf, I);
  check_range(&blk->reads[0], 0, C(0), V(N));
  check_range(&blk->reads[0], 1, C(0), C(8)); /* data-dependent in k -> whole dim */
  check_range(&blk->reads[1], 0, C(0), V(N));
  check_range(&blk->writes[0], 0, C(0), V(N));
  check_range(&blk->writes[0], 1, V(vi), C(1));
  /* a data-dependent index that does not vary inside the block stays as is
   * (as in TVM): X[k, I[vi]] reads column I[vi] */
  ir_expr *pidx[] = {V(vi)};
  ir_expr *xidx2[] = {V(k), ir_load(A, I, 1, pidx)};
  blk->body = ir_for(A, k, C(0), V(N), IR_FOR_SERIAL,
                     ir_store(A, X, 2, widx, ir_load(A, X, 2, xidx2)));
  ck_assert_int_eq(ir_block_detect_regions(A, blk, NULL), TS_OK);
  check_range(&blk->reads[0], 1, ir_load(A, I, 1, pidx), C(1));
}
END_TEST

/* ---- randomized properties --------------------------------------------- */

typedef struct gen {
  ts_rng rng;
  int nvars;
  ir_var *vars[3];
} gen;

static int64_t rnd(gen *g, int64_t lo, int64_t hi) {
  return lo + (int64_t)ts_rng_below(&g->rng, (uint64_t)(hi - lo + 1));
}

static int64_t nonzero_divisor(gen *g) {
  int64_t c = rnd(g, 1, 9);
  if (rnd(g, 0, 5) == 0) c = -c;
  return c;
}

static ir_expr *gen_expr(gen *g, int depth);

static ir_expr *gen_cond(gen *g, int depth) {
  static const ir_expr_kind cmps[] = {IR_EQ, IR_NE, IR_LT, IR_LE, IR_GT, IR_GE};
  int r = (int)rnd(g, 0, 9);
  if (depth > 0 && r == 0) return B(IR_AND, gen_cond(g, depth - 1), gen_cond(g, depth - 1));
  if (depth > 0 && r == 1) return B(IR_OR, gen_cond(g, depth - 1), gen_cond(g, depth - 1));
  if (depth > 0 && r == 2) return ir_not(A, gen_cond(g, depth - 1));
  return B(cmps[rnd(g, 0, 5)], gen_expr(g, depth - 1), gen_expr(g, depth - 1));
}

static ir_expr *gen_expr(gen *g, int depth) {
  if (depth <= 0 || rnd(g, 0, 5) == 0) {
    if (rnd(g, 0, 2) == 0) return C(rnd(g, -10, 10));
    return V(g->vars[rnd(g, 0, g->nvars - 1)]);
  }
  ir_expr *x = gen_expr(g, depth - 1);
  switch (rnd(g, 0, 14)) {
  case 0: case 1: return ADD(x, gen_expr(g, depth - 1));
  case 2: return SUB(x, gen_expr(g, depth - 1));
  case 3: return MUL(x, C(rnd(g, -4, 8)));
  case 4: return MUL(x, gen_expr(g, depth - 2));
  case 5: return FDIV(x, C(nonzero_divisor(g)));
  case 6: return FMOD(x, C(nonzero_divisor(g)));
  case 7: return B(IR_DIV, x, C(nonzero_divisor(g)));
  case 8: return B(IR_MIN, x, gen_expr(g, depth - 1));
  case 9: return B(IR_MAX, x, gen_expr(g, depth - 1));
  case 10: return ir_select(A, gen_cond(g, depth - 1), x, gen_expr(g, depth - 1));
  case 11: { /* x*c + y, divided or reduced by c: the split patterns */
    int64_t c = rnd(g, 2, 8);
    ir_expr *s = ADD(MUL(x, C(c)), gen_expr(g, depth - 1));
    return rnd(g, 0, 1) ? FDIV(s, C(c)) : FMOD(s, C(c));
  }
  case 12: { /* (x//c)*c + x%c and (x//c)%s*c + x%c: the merge patterns */
    int64_t c = rnd(g, 2, 6);
    if (rnd(g, 0, 1)) return ADD(MUL(FDIV(x, C(c)), C(c)), FMOD(x, C(c)));
    return ADD(MUL(FMOD(FDIV(x, C(c)), C(rnd(g, 2, 4))), C(c)), FMOD(x, C(c)));
  }
  case 13: { /* nested div/mod */
    int64_t c = rnd(g, 2, 6), d = rnd(g, 2, 4);
    switch (rnd(g, 0, 2)) {
    case 0: return FDIV(FDIV(x, C(c)), C(d));
    case 1: return FMOD(FMOD(x, C(c * d)), C(d));
    default: return FDIV(FMOD(x, C(c * d)), C(c));
    }
  }
  default: return ADD(x, C(rnd(g, -9, 9)));
  }
}

typedef struct varspec {
  int64_t lo, hi; /* brute-force range */
  bool bound;     /* told to the analyzer */
} varspec;

/* Calls fn for every assignment of the vars in their ranges; false stops. */
static void for_all(const gen *g, const varspec *vs, env *en, int k,
                    void (*fn)(void *ctx, const env *en), void *ctx) {
  if (k == g->nvars) {
    fn(ctx, en);
    return;
  }
  for (int64_t v = vs[k].lo; v <= vs[k].hi; v++) {
    en->vals[k] = v;
    for_all(g, vs, en, k + 1, fn, ctx);
  }
}

typedef struct pair_ctx {
  ir_expr *orig, *simp;
  const ir_expr *cond; /* for the prover check */
  int checked;
} pair_ctx;

static void check_pair(void *p, const env *en) {
  pair_ctx *c = p;
  int64_t a = ev(c->orig, en), b = ev(c->simp, en);
  if (a != b) {
    char vals[128];
    snprintf(vals, sizeof vals, "x0=%lld x1=%lld x2=%lld", (long long)en->vals[0],
             (long long)en->vals[1], (long long)en->vals[2]);
    ck_abort_msg("simplify changed a value at %s: %s = %lld but %s = %lld", vals, str(c->orig),
                 (long long)a, str(c->simp), (long long)b);
  }
  c->checked++;
}

static void setup_vars(gen *g, varspec *vs, env *en) {
  static const char *names[] = {"x0", "x1", "x2"};
  g->nvars = (int)rnd(g, 2, 3);
  en->n = g->nvars;
  for (int k = 0; k < g->nvars; k++) {
    g->vars[k] = ivar(names[k]);
    en->vars[k] = g->vars[k];
    vs[k].bound = rnd(g, 0, 4) != 0;
    if (vs[k].bound) {
      vs[k].lo = rnd(g, -5, 5);
      vs[k].hi = vs[k].lo + rnd(g, 0, 7);
      ir_analyzer_bind_const(&an, g->vars[k], vs[k].lo, vs[k].hi);
    } else {
      vs[k].lo = -11; /* unknown to the analyzer: test a wide window */
      vs[k].hi = 11;
    }
  }
}

START_TEST(test_random_simplify) {
  int total = 0;
  for (uint64_t seed = 1; seed <= 400; seed++) {
    gen g;
    ts_rng_seed(&g.rng, seed * 7919);
    varspec vs[3];
    env en = {0};
    ir_analyzer_truncate(&an, 0);
    setup_vars(&g, vs, &en);
    ir_expr *e = rnd(&g, 0, 4) == 0 ? ir_select(A, gen_cond(&g, 3), gen_expr(&g, 3), gen_expr(&g, 3))
                                    : gen_expr(&g, (int)rnd(&g, 2, 5));
    ir_expr *s = ir_simplify(&an, e);
    ck_assert_ptr_nonnull(s);
    ck_assert_ptr_eq(ir_simplify(&an, s), s); /* fixed point */
    pair_ctx c = {e, s, NULL, 0};
    for_all(&g, vs, &en, 0, check_pair, &c);
    total += c.checked;
  }
  ck_assert_int_gt(total, 10000);
}
END_TEST

START_TEST(test_random_conditions) {
  for (uint64_t seed = 1; seed <= 300; seed++) {
    gen g;
    ts_rng_seed(&g.rng, seed * 104729 + 3);
    varspec vs[3];
    env en = {0};
    ir_analyzer_truncate(&an, 0);
    setup_vars(&g, vs, &en);
    ir_expr *e = gen_cond(&g, 3);
    ir_expr *s = ir_simplify(&an, e);
    ck_assert_ptr_nonnull(s);
    pair_ctx c = {e, s, NULL, 0};
    for_all(&g, vs, &en, 0, check_pair, &c);
    /* a proved condition holds everywhere (check_pair compared it to 1) */
    if (ir_can_prove(&an, e)) {
      pair_ctx t = {e, ir_bool(A, true), NULL, 0};
      for_all(&g, vs, &en, 0, check_pair, &t);
    }
  }
}
END_TEST

typedef struct set_ctx {
  ir_expr *e;
  ir_intset s;
  int relaxed; /* var index relaxed by the dom map */
} set_ctx;

static void check_in_set(void *p, const env *en) {
  set_ctx *c = p;
  int64_t v = ev(c->e, en);
  /* Endpoints may use the other (non-relaxed) vars: evaluate them there. */
  if (c->s.min) {
    int64_t lo = ev(c->s.min, en);
    ck_assert_msg(lo <= v, "eval_set(%s) min %s = %lld > %lld", str(c->e), str(c->s.min),
                  (long long)lo, (long long)v);
  }
  if (c->s.max) {
    int64_t hi = ev(c->s.max, en);
    ck_assert_msg(v <= hi, "eval_set(%s) max %s = %lld < %lld", str(c->e), str(c->s.max),
                  (long long)hi, (long long)v);
  }
}

START_TEST(test_random_eval_set) {
  int bounded = 0;
  for (uint64_t seed = 1; seed <= 300; seed++) {
    gen g;
    ts_rng_seed(&g.rng, seed * 31337 + 11);
    varspec vs[3];
    env en = {0};
    ir_analyzer_truncate(&an, 0);
    setup_vars(&g, vs, &en);
    ir_expr *e = gen_expr(&g, (int)rnd(&g, 1, 4));
    /* relax var 0 over its (finite) brute-force range */
    ir_dom_map dom;
    ir_dom_map_init(&dom);
    ir_dom_map_put(&dom, g.vars[0], ir_intset_range(A, C(vs[0].lo), C(vs[0].hi - vs[0].lo + 1)));
    set_ctx c = {e, ir_eval_set(&an, e, &dom), 0};
    ck_assert(!c.s.empty);
    if (c.s.min && c.s.max) bounded++;
    for_all(&g, vs, &en, 0, check_in_set, &c);
    ir_dom_map_fini(&dom);
  }
  ck_assert_int_gt(bounded, 50);
}
END_TEST

static Suite *arith_suite(void) {
  Suite *s = suite_create("arith");
  TCase *tc = tcase_create("core");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, test_fold_constructors);
  tcase_add_test(tc, test_const_bound);
  tcase_add_test(tc, test_affine_canonical);
  tcase_add_test(tc, test_floordiv_rules);
  tcase_add_test(tc, test_floormod_rules);
  tcase_add_test(tc, test_divmod_merge);
  tcase_add_test(tc, test_divmod_symbolic);
  tcase_add_test(tc, test_compare_rules);
  tcase_add_test(tc, test_bool_select_minmax);
  tcase_add_test(tc, test_float_untouched);
  tcase_add_test(tc, test_prove);
  tcase_add_test(tc, test_intset);
  tcase_add_test(tc, test_simplify_stmt);
  tcase_add_test(tc, test_regions_matmul);
  tcase_add_test(tc, test_regions_inner_loop);
  tcase_add_test(tc, test_regions_nested_block);
  tcase_add_test(tc, test_regions_symbolic);
  suite_add_tcase(s, tc);
  TCase *rp = tcase_create("random");
  tcase_add_checked_fixture(rp, setup, teardown);
  tcase_set_timeout(rp, 120);
  tcase_add_test(rp, test_random_simplify);
  tcase_add_test(rp, test_random_conditions);
  tcase_add_test(rp, test_random_eval_set);
  suite_add_tcase(s, rp);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(arith_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failures = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failures ? 1 : 0;
}
