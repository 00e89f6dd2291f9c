/* arith_int.h — internals shared by the arith module's files (bound.c,
 * simplify.c, intset.c, regions.c): exact integer helpers with the IR's
 * division semantics, saturating arithmetic on constant bounds (INT64_MIN and
 * INT64_MAX stand for −∞ and +∞), a structural total order on expressions
 * (used to sort the atoms of a canonical sum deterministically), and the
 * analyzer's fact lookup. Nothing here is part of the public API. */
#ifndef TESSEL_IR_ARITH_INT_H
#define TESSEL_IR_ARITH_INT_H

#include "arith.h"

#define ARITH_NEG_INF INT64_MIN
#define ARITH_POS_INF INT64_MAX

/* Floor division and modulo (b != 0); floormod has the divisor's sign. The
 * caller excludes INT64_MIN / -1. */
static inline int64_t arith_floordiv(int64_t a, int64_t b) {
  int64_t q = a / b, r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) q--;
  return q;
}
static inline int64_t arith_floormod(int64_t a, int64_t b) {
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

/* Saturating arithmetic on bound endpoints: an infinite operand gives an
 * infinite result, overflow saturates. */
static inline int64_t arith_sat_add(int64_t a, int64_t b) {
  if (a == ARITH_NEG_INF || b == ARITH_NEG_INF) return ARITH_NEG_INF;
  if (a == ARITH_POS_INF || b == ARITH_POS_INF) return ARITH_POS_INF;
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return a > 0 ? ARITH_POS_INF : ARITH_NEG_INF;
  return r;
}
static inline int64_t arith_sat_neg(int64_t a) {
  if (a == ARITH_NEG_INF) return ARITH_POS_INF;
  if (a == ARITH_POS_INF) return ARITH_NEG_INF;
  return -a;
}
static inline int64_t arith_sat_mul(int64_t a, int64_t b) {
  if (a == 0 || b == 0) return 0;
  bool neg = (a < 0) != (b < 0);
  if (a == ARITH_NEG_INF || a == ARITH_POS_INF || b == ARITH_NEG_INF || b == ARITH_POS_INF)
    return neg ? ARITH_NEG_INF : ARITH_POS_INF;
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return neg ? ARITH_NEG_INF : ARITH_POS_INF;
  return r;
}
static inline bool arith_is_inf(int64_t a) { return a == ARITH_NEG_INF || a == ARITH_POS_INF; }

static inline int64_t arith_gcd(int64_t a, int64_t b) {
  if (a < 0) a = -a;
  if (b < 0) b = -b;
  while (b != 0) {
    int64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

/* Range of values of an integer dtype (bool: [0, 1]). False for floats and
 * handles. */
bool ir_arith_dtype_range(ir_dtype t, int64_t *lo, int64_t *hi);

/* Structural total order: 0 iff a and b are the same tree (vars and buffers
 * by identity). Deterministic across runs when var ids are. */
int ir_arith_cmp(const ir_expr *a, const ir_expr *b);
static inline bool ir_arith_same(const ir_expr *a, const ir_expr *b) {
  return a == b || ir_arith_cmp(a, b) == 0;
}

/* Index of the newest fact on v, or -1. */
int ir_arith_find_fact(const ir_analyzer *an, const ir_var *v);

/* Constant bound tightened with the symbolic facts: a ≤ b style questions
 * about sums whose vars were bound to symbolic ranges. Returns the bound of
 * e (simplified) using symbolic substitution; falls back to the plain
 * constant bound. */
ir_const_bound ir_arith_sym_bound(ir_analyzer *an, ir_expr *e);

#endif
