/* ir/arith/bound.c — the analyzer's fact store (var ∈ [lo, hi], plus the
 * symbolic range when it was not constant) and constant-bound analysis over
 * integer expressions. Facts form a stack so a walker can bind a loop var on
 * the way down and pop it with ir_analyzer_truncate on the way up; a newer
 * fact on the same var shadows (and is already intersected with) the older
 * one. Bounds saturate: INT64_MIN / INT64_MAX mean −∞ / +∞, which is also
 * what an unknown value gets. */
#include <string.h>

#include "arith_int.h"

void ir_analyzer_init(ir_analyzer *an, ts_arena *a) {
  memset(an, 0, sizeof *an);
  an->arena = a;
}

void ir_analyzer_fini(ir_analyzer *an) {
  ts_free(an->vars);
  ts_free(an->bounds);
  ts_free(an->smin);
  ts_free(an->smax);
  ts_arena *a = an->arena;
  memset(an, 0, sizeof *an);
  an->arena = a;
}

int ir_arith_find_fact(const ir_analyzer *an, const ir_var *v) {
  for (int i = an->n - 1; i >= 0; i--)
    if (an->vars[i] == v) return i;
  return -1;
}

static bool grow(void **p, size_t elem, int cap) {
  void *q = ts_realloc(*p, elem * (size_t)cap);
  if (!q) return false;
  *p = q;
  return true;
}

static ts_status push_fact(ir_analyzer *an, const ir_var *v, int64_t lo, int64_t hi,
                           ir_expr *smin, ir_expr *smax) {
  int old = ir_arith_find_fact(an, v);
  if (old >= 0) {
    if (an->bounds[old].lo > lo) lo = an->bounds[old].lo;
    if (an->bounds[old].hi < hi) hi = an->bounds[old].hi;
    if (!smin) smin = an->smin[old];
    if (!smax) smax = an->smax[old];
  }
  if (lo > hi) return TS_OK; /* empty range: code under it never runs; add nothing */
  if (an->n == an->cap) {
    int cap = an->cap ? an->cap * 2 : 16;
    /* Each array is reallocated on its own; a failure leaves the old ones
     * valid (a grown array beyond cap is harmless). */
    if (!grow((void **)&an->vars, sizeof *an->vars, cap) ||
        !grow((void **)&an->bounds, sizeof *an->bounds, cap) ||
        !grow((void **)&an->smin, sizeof *an->smin, cap) ||
        !grow((void **)&an->smax, sizeof *an->smax, cap))
      return TS_ENOMEM;
    an->cap = cap;
  }
  an->vars[an->n] = v;
  an->bounds[an->n] = (ir_const_bound){lo, hi};
  an->smin[an->n] = smin;
  an->smax[an->n] = smax;
  an->n++;
  return TS_OK;
}

ts_status ir_analyzer_bind_const(ir_analyzer *an, const ir_var *v, int64_t lo, int64_t hi) {
  return push_fact(an, v, lo, hi, NULL, NULL);
}

ts_status ir_analyzer_bind(ir_analyzer *an, const ir_var *v, const ir_expr *min,
                           const ir_expr *extent) {
  ir_const_bound bm = ir_analyzer_const_bound(an, min);
  ir_const_bound be = ir_analyzer_const_bound(an, extent);
  int64_t lo = bm.lo;
  int64_t hi = arith_sat_add(bm.hi, be.hi);
  if (!arith_is_inf(hi)) hi -= 1;
  int64_t cmin, cext;
  ir_expr *smin = NULL, *smax = NULL;
  if (!(ir_as_int(min, &cmin) && ir_as_int(extent, &cext))) {
    /* Keep the symbolic range too: min and min + extent - 1. */
    ir_expr *mn = (ir_expr *)min, *ex = (ir_expr *)extent;
    smin = mn;
    ir_expr *end = ir_add(an->arena, mn, ex);
    if (!end) return TS_ENOMEM;
    smax = ir_sub(an->arena, end, ir_int(an->arena, ex->dtype, 1));
    if (!smax) return TS_ENOMEM;
    smax = ir_simplify(an, smax);
    if (!smax) return TS_ENOMEM;
  }
  return push_fact(an, v, lo, hi, smin, smax);
}

void ir_analyzer_truncate(ir_analyzer *an, int n) {
  if (n >= 0 && n < an->n) an->n = n;
}

bool ir_arith_dtype_range(ir_dtype t, int64_t *lo, int64_t *hi) {
  if (ir_dtype_is_bool(t)) {
    *lo = 0;
    *hi = 1;
    return true;
  }
  if (!ir_dtype_is_int(t)) return false;
  int bits = ir_dtype_bits(t);
  if (ir_dtype_is_signed(t)) {
    if (bits >= 64) {
      *lo = INT64_MIN;
      *hi = INT64_MAX;
    } else {
      *lo = -((int64_t)1 << (bits - 1));
      *hi = ((int64_t)1 << (bits - 1)) - 1;
    }
  } else {
    *lo = 0;
    *hi = bits >= 63 ? INT64_MAX : ((int64_t)1 << bits) - 1;
  }
  return true;
}

static const ir_const_bound everything = {ARITH_NEG_INF, ARITH_POS_INF};

static ir_const_bound unknown_of(ir_dtype t) {
  int64_t lo, hi;
  /* Signed values stay unbounded (we reason as if index math never
   * overflows); unsigned and bool get their natural floor. */
  if (ir_arith_dtype_range(t, &lo, &hi) && (ir_dtype_is_bool(t) || !ir_dtype_is_signed(t)))
    return (ir_const_bound){lo, hi};
  return everything;
}

static ir_const_bound hull2(int64_t a, int64_t b, int64_t c, int64_t d) {
  int64_t lo = a, hi = a;
  int64_t v[3] = {b, c, d};
  for (int i = 0; i < 3; i++) {
    if (v[i] < lo) lo = v[i];
    if (v[i] > hi) hi = v[i];
  }
  return (ir_const_bound){lo, hi};
}

/* Endpoint division by a nonzero constant, keeping infinities. */
static int64_t div_end(int64_t a, int64_t c, bool floor_sem) {
  if (arith_is_inf(a)) return (a == ARITH_POS_INF) == (c > 0) ? ARITH_POS_INF : ARITH_NEG_INF;
  if (a == INT64_MIN && c == -1) return ARITH_POS_INF;
  return floor_sem ? arith_floordiv(a, c) : a / c;
}

static ir_const_bound bound_div(ir_const_bound x, ir_const_bound y, bool floor_sem) {
  if (y.lo > 0 || y.hi < 0) {
    /* Divisor of one sign: quotient is monotone in each argument, so the
     * extremes are at the corners. */
    return hull2(div_end(x.lo, y.lo, floor_sem), div_end(x.lo, y.hi, floor_sem),
                 div_end(x.hi, y.lo, floor_sem), div_end(x.hi, y.hi, floor_sem));
  }
  return everything;
}

static ir_const_bound bound_mod(ir_const_bound x, ir_const_bound y) {
  if (y.lo == y.hi && y.lo > 0 && !arith_is_inf(x.lo) && !arith_is_inf(x.hi)) {
    int64_t c = y.lo;
    if (arith_floordiv(x.lo, c) == arith_floordiv(x.hi, c))
      return (ir_const_bound){arith_floormod(x.lo, c), arith_floormod(x.hi, c)};
  }
  if (y.lo > 0) {
    int64_t hi = arith_is_inf(y.hi) ? ARITH_POS_INF : y.hi - 1;
    if (x.lo >= 0 && x.hi < hi) hi = x.hi;
    return (ir_const_bound){0, hi};
  }
  if (y.hi < 0) {
    int64_t lo = arith_is_inf(y.lo) ? ARITH_NEG_INF : y.lo + 1;
    return (ir_const_bound){lo, 0};
  }
  return everything;
}

static ir_const_bound bound_of(const ir_analyzer *an, const ir_expr *e) {
  switch (e->kind) {
  case IR_INT_IMM:
    return (ir_const_bound){e->u.ival, e->u.ival};
  case IR_VAR: {
    int i = ir_arith_find_fact(an, e->u.var);
    if (i >= 0) return an->bounds[i];
    if (e->u.var->upper > 0) return (ir_const_bound){0, e->u.var->upper}; /* a size var padded to a bucket */
    return unknown_of(e->dtype);
  }
  case IR_ADD: {
    ir_const_bound x = bound_of(an, e->u.bin.a), y = bound_of(an, e->u.bin.b);
    return (ir_const_bound){arith_sat_add(x.lo, y.lo), arith_sat_add(x.hi, y.hi)};
  }
  case IR_SUB: {
    ir_const_bound x = bound_of(an, e->u.bin.a), y = bound_of(an, e->u.bin.b);
    return (ir_const_bound){arith_sat_add(x.lo, arith_sat_neg(y.hi)),
                            arith_sat_add(x.hi, arith_sat_neg(y.lo))};
  }
  case IR_MUL: {
    if (!ir_dtype_is_int(e->dtype)) return everything;
    ir_const_bound x = bound_of(an, e->u.bin.a), y = bound_of(an, e->u.bin.b);
    return hull2(arith_sat_mul(x.lo, y.lo), arith_sat_mul(x.lo, y.hi),
                 arith_sat_mul(x.hi, y.lo), arith_sat_mul(x.hi, y.hi));
  }
  case IR_DIV:
  case IR_FLOORDIV:
    if (!ir_dtype_is_int(e->dtype)) return everything;
    return bound_div(bound_of(an, e->u.bin.a), bound_of(an, e->u.bin.b),
                     e->kind == IR_FLOORDIV);
  case IR_FLOORMOD:
    if (!ir_dtype_is_int(e->dtype)) return everything;
    return bound_mod(bound_of(an, e->u.bin.a), bound_of(an, e->u.bin.b));
  case IR_MIN:
  case IR_MAX: {
    if (!ir_dtype_is_int(e->dtype)) return everything;
    ir_const_bound x = bound_of(an, e->u.bin.a), y = bound_of(an, e->u.bin.b);
    if (e->kind == IR_MIN)
      return (ir_const_bound){x.lo < y.lo ? x.lo : y.lo, x.hi < y.hi ? x.hi : y.hi};
    return (ir_const_bound){x.lo > y.lo ? x.lo : y.lo, x.hi > y.hi ? x.hi : y.hi};
  }
  case IR_EQ: case IR_NE: case IR_LT: case IR_LE: case IR_GT: case IR_GE:
  case IR_AND: case IR_OR: case IR_NOT:
    return (ir_const_bound){0, 1};
  case IR_SELECT: {
    ir_const_bound c = bound_of(an, e->u.sel.cond);
    if (c.lo > 0 || c.hi < 0) return bound_of(an, e->u.sel.t);
    if (c.lo == 0 && c.hi == 0) return bound_of(an, e->u.sel.f);
    ir_const_bound x = bound_of(an, e->u.sel.t), y = bound_of(an, e->u.sel.f);
    return (ir_const_bound){x.lo < y.lo ? x.lo : y.lo, x.hi > y.hi ? x.hi : y.hi};
  }
  case IR_CAST: {
    int64_t lo, hi;
    if (!ir_arith_dtype_range(e->dtype, &lo, &hi)) return everything;
    const ir_expr *v = e->u.cast.value;
    if (ir_dtype_is_int(v->dtype) || ir_dtype_is_bool(v->dtype)) {
      ir_const_bound x = bound_of(an, v);
      if (ir_dtype_is_bool(e->dtype)) {
        if (x.lo > 0 || x.hi < 0) return (ir_const_bound){1, 1};
        if (x.lo == 0 && x.hi == 0) return (ir_const_bound){0, 0};
        return (ir_const_bound){0, 1};
      }
      if (x.lo >= lo && x.hi <= hi) return x; /* fits: the value is kept */
    }
    if (ir_dtype_is_signed(e->dtype) && ir_dtype_bits(e->dtype) >= 64) return everything;
    return (ir_const_bound){lo, hi};
  }
  default:
    return unknown_of(e->dtype);
  }
}

ir_const_bound ir_analyzer_const_bound(const ir_analyzer *an, const ir_expr *e) {
  if (!e) return everything;
  return bound_of(an, e);
}
