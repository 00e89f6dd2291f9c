/* ir/arith/intset.c — interval sets [min, max] with symbolic endpoints
 * (NULL = −∞ for min, +∞ for max) and ir_eval_set, which bounds the values
 * an expression takes while some vars range over sets. This is what relaxes
 * a loop var out of an access region (compute_at, region detection).
 * Endpoint arithmetic is sign-aware: multiplying by a negative constant swaps
 * the ends; floordiv by a positive divisor is monotone; floormod by c gives
 * [0, c-1] unless the operand provably stays inside one period. Anything we
 * cannot bound becomes the whole line, which is always sound. */
#include <string.h>

#include "arith_int.h"

void ir_dom_map_init(ir_dom_map *m) { memset(m, 0, sizeof *m); }

void ir_dom_map_fini(ir_dom_map *m) {
  ts_free(m->vars);
  ts_free(m->sets);
  memset(m, 0, sizeof *m);
}

static int dom_find(const ir_dom_map *m, const ir_var *v) {
  if (!m) return -1;
  for (int i = m->n - 1; i >= 0; i--)
    if (m->vars[i] == v) return i;
  return -1;
}

ts_status ir_dom_map_put(ir_dom_map *m, const ir_var *v, ir_intset s) {
  int i = dom_find(m, v);
  if (i >= 0) {
    m->sets[i] = s;
    return TS_OK;
  }
  if (m->n == m->cap) {
    int cap = m->cap ? m->cap * 2 : 8;
    const ir_var **vs = ts_realloc(m->vars, sizeof *vs * (size_t)cap);
    if (!vs) return TS_ENOMEM;
    m->vars = vs;
    ir_intset *ss = ts_realloc(m->sets, sizeof *ss * (size_t)cap);
    if (!ss) return TS_ENOMEM;
    m->sets = ss;
    m->cap = cap;
  }
  m->vars[m->n] = v;
  m->sets[m->n] = s;
  m->n++;
  return TS_OK;
}

static ir_intset everything(void) { return (ir_intset){NULL, NULL, false}; }
static ir_intset nothing(void) { return (ir_intset){NULL, NULL, true}; }

ir_intset ir_intset_range(ts_arena *a, const ir_expr *min, const ir_expr *extent) {
  ir_expr *mn = (ir_expr *)min, *ex = (ir_expr *)extent;
  int64_t e;
  if (ir_as_int(ex, &e) && e <= 0) return nothing();
  ir_expr *end = ir_add(a, mn, ex);
  ir_expr *mx = end ? ir_sub(a, end, ir_int(a, ex->dtype, 1)) : NULL;
  if (!mx) return everything(); /* OOM: the sound answer */
  return (ir_intset){mn, mx, false};
}

ir_intset ir_intset_point(ir_expr *e) { return (ir_intset){e, e, false}; }

static ir_expr *simp_or(ir_analyzer *an, ir_expr *e) {
  if (!e) return NULL;
  return ir_simplify(an, e);
}

/* x ≤ y provably (both non-NULL). */
static bool le(ir_analyzer *an, ir_expr *x, ir_expr *y) {
  if (ir_arith_same(x, y)) return true;
  ir_expr *c = ir_binop(an->arena, IR_LE, x, y);
  return c && ir_can_prove(an, c);
}

/* Lower endpoint min(x, y) (is_min) or upper endpoint max(x, y). NULL is the
 * infinite end on that side, so it absorbs. */
static ir_expr *end_outer(ir_analyzer *an, ir_expr *x, ir_expr *y, bool is_min) {
  if (!x || !y) return NULL;
  if (le(an, x, y)) return is_min ? x : y;
  if (le(an, y, x)) return is_min ? y : x;
  return simp_or(an, is_min ? ir_min(an->arena, x, y) : ir_max(an->arena, x, y));
}

/* The inner endpoint for intersections: max of lower ends / min of upper
 * ends; NULL (infinite) yields the other. */
static ir_expr *end_inner(ir_analyzer *an, ir_expr *x, ir_expr *y, bool is_lower) {
  if (!x) return y;
  if (!y) return x;
  if (le(an, x, y)) return is_lower ? y : x;
  if (le(an, y, x)) return is_lower ? x : y;
  return simp_or(an, is_lower ? ir_max(an->arena, x, y) : ir_min(an->arena, x, y));
}

ir_intset ir_intset_union(ir_analyzer *an, ir_intset x, ir_intset y) {
  if (x.empty) return y;
  if (y.empty) return x;
  return (ir_intset){end_outer(an, x.min, y.min, true), end_outer(an, x.max, y.max, false),
                     false};
}

ir_intset ir_intset_intersect(ir_analyzer *an, ir_intset x, ir_intset y) {
  if (x.empty || y.empty) return nothing();
  ir_intset r = {end_inner(an, x.min, y.min, true), end_inner(an, x.max, y.max, false), false};
  if (r.min && r.max) {
    ir_expr *c = ir_binop(an->arena, IR_LT, r.max, r.min);
    if (c && ir_can_prove(an, c)) return nothing();
  }
  return r;
}

/* ---- evaluation --------------------------------------------------------- */

static bool mentions(const ir_expr *e, const ir_dom_map *dom) {
  if (!e || !dom || dom->n == 0) return false;
  switch (e->kind) {
  case IR_INT_IMM:
  case IR_FLOAT_IMM:
    return false;
  case IR_VAR:
    return dom_find(dom, e->u.var) >= 0;
  case IR_NOT:
    return mentions(e->u.un.a, dom);
  case IR_SELECT:
    return mentions(e->u.sel.cond, dom) || mentions(e->u.sel.t, dom) ||
           mentions(e->u.sel.f, dom);
  case IR_CAST:
    return mentions(e->u.cast.value, dom);
  case IR_CALL:
    for (int i = 0; i < e->u.call.nargs; i++)
      if (mentions(e->u.call.args[i], dom)) return true;
    return false;
  case IR_LOAD:
    for (int i = 0; i < e->u.load.nidx; i++)
      if (mentions(e->u.load.idx[i], dom)) return true;
    return false;
  case IR_RAMP:
    return mentions(e->u.ramp.base, dom) || mentions(e->u.ramp.stride, dom);
  case IR_BROADCAST:
    return mentions(e->u.bcast.value, dom);
  default:
    if (ir_is_binop(e->kind)) return mentions(e->u.bin.a, dom) || mentions(e->u.bin.b, dom);
    return true;
  }
}

static bool is_point(const ir_intset *s) {
  return !s->empty && s->min && s->max && ir_arith_same(s->min, s->max);
}

/* Sign of a point expression under the analyzer: 1 (> 0), -1 (< 0), 2
 * (≥ 0), -2 (≤ 0), 0 unknown. */
static int sign_of(ir_analyzer *an, ir_expr *e) {
  ir_const_bound b = ir_arith_sym_bound(an, e);
  if (b.lo > 0) return 1;
  if (b.hi < 0) return -1;
  if (b.lo >= 0) return 2;
  if (b.hi <= 0) return -2;
  return 0;
}

typedef ir_expr *(*binfn)(ts_arena *, ir_expr *, ir_expr *);

static ir_expr *apply(ir_analyzer *an, binfn f, ir_expr *x, ir_expr *y) {
  if (!x || !y) return NULL;
  return simp_or(an, f(an->arena, x, y));
}

static ir_expr *mk_div(ts_arena *a, ir_expr *x, ir_expr *y) {
  return ir_binop(a, IR_DIV, x, y);
}

/* Set of x*k, x/k or x//k for a point k of known sign; monotone in x. */
static ir_intset scale(ir_analyzer *an, ir_intset x, ir_expr *k, int sgn, binfn f) {
  ir_expr *lo = x.min ? apply(an, f, x.min, k) : NULL;
  ir_expr *hi = x.max ? apply(an, f, x.max, k) : NULL;
  if ((x.min && !lo) || (x.max && !hi)) return everything();
  if (sgn > 0) return (ir_intset){lo, hi, false};
  return (ir_intset){hi, lo, false};
}

static ir_intset eval(ir_analyzer *an, const ir_expr *ce, const ir_dom_map *dom);

static ir_intset eval_bin(ir_analyzer *an, ir_expr *e, const ir_dom_map *dom) {
  ts_arena *ar = an->arena;
  ir_intset x = eval(an, e->u.bin.a, dom);
  ir_intset y = eval(an, e->u.bin.b, dom);
  if (x.empty || y.empty) return nothing();
  if (is_point(&x) && is_point(&y)) {
    ir_expr *p = ir_binop(ar, e->kind, x.min, y.min);
    if (p) p->dtype = e->dtype;
    p = simp_or(an, p);
    return p ? ir_intset_point(p) : everything();
  }
  if (!ir_dtype_is_int(e->dtype)) {
    if (ir_is_cmp(e->kind) || e->kind == IR_AND || e->kind == IR_OR)
      return (ir_intset){ir_bool(ar, false), ir_bool(ar, true), false};
    return everything();
  }
  switch (e->kind) {
  case IR_ADD:
    return (ir_intset){apply(an, ir_add, x.min, y.min), apply(an, ir_add, x.max, y.max), false};
  case IR_SUB:
    return (ir_intset){apply(an, ir_sub, x.min, y.max), apply(an, ir_sub, x.max, y.min), false};
  case IR_MUL: {
    if (is_point(&y) || is_point(&x)) {
      ir_intset s = is_point(&y) ? x : y;
      ir_expr *k = is_point(&y) ? y.min : x.min;
      int sg = sign_of(an, k);
      if (sg == 0) return everything();
      return scale(an, s, k, sg, ir_mul);
    }
    /* Two ranges with constant ends: the corners. */
    int64_t a0, a1, b0, b1;
    if (x.min && x.max && y.min && y.max && ir_as_int(x.min, &a0) && ir_as_int(x.max, &a1) &&
        ir_as_int(y.min, &b0) && ir_as_int(y.max, &b1)) {
      int64_t c[4] = {arith_sat_mul(a0, b0), arith_sat_mul(a0, b1), arith_sat_mul(a1, b0),
                      arith_sat_mul(a1, b1)};
      int64_t lo = c[0], hi = c[0];
      for (int i = 1; i < 4; i++) {
        if (c[i] < lo) lo = c[i];
        if (c[i] > hi) hi = c[i];
      }
      if (arith_is_inf(lo) || arith_is_inf(hi)) return everything();
      return (ir_intset){ir_int(ar, e->dtype, lo), ir_int(ar, e->dtype, hi), false};
    }
    return everything();
  }
  case IR_DIV:
  case IR_FLOORDIV: {
    if (!is_point(&y)) return everything();
    int sg = sign_of(an, y.min);
    if (sg != 1 && sg != -1) return everything();
    /* Both floor and truncating division are monotone in the numerator for
     * a divisor of fixed sign. */
    return scale(an, x, y.min, sg, e->kind == IR_DIV ? mk_div : ir_floordiv);
  }
  case IR_FLOORMOD: {
    if (!is_point(&y)) return everything();
    ir_expr *k = y.min;
    int sg = sign_of(an, k);
    if (sg != 1) return everything();
    if (x.min && x.max) {
      ir_expr *q0 = apply(an, ir_floordiv, x.min, k), *q1 = apply(an, ir_floordiv, x.max, k);
      if (q0 && q1 && ir_can_prove_equal(an, q0, q1)) {
        ir_expr *lo = apply(an, ir_floormod, x.min, k), *hi = apply(an, ir_floormod, x.max, k);
        if (lo && hi) return (ir_intset){lo, hi, false};
      }
    }
    ir_expr *hi = apply(an, ir_sub, k, ir_int(ar, k->dtype, 1));
    return (ir_intset){ir_int(ar, e->dtype, 0), hi, false};
  }
  case IR_MIN:
    return (ir_intset){x.min && y.min ? end_outer(an, x.min, y.min, true) : NULL,
                       end_inner(an, x.max, y.max, false), false};
  case IR_MAX:
    return (ir_intset){end_inner(an, x.min, y.min, true),
                       x.max && y.max ? end_outer(an, x.max, y.max, false) : NULL, false};
  default:
    return everything();
  }
}

static ir_intset eval(ir_analyzer *an, const ir_expr *ce, const ir_dom_map *dom) {
  ir_expr *e = (ir_expr *)ce;
  ts_arena *ar = an->arena;
  if (!e) return everything();
  if (!mentions(e, dom)) return ir_intset_point(e);
  switch (e->kind) {
  case IR_VAR:
    return dom->sets[dom_find(dom, e->u.var)];
  case IR_SELECT: {
    ir_intset t = eval(an, e->u.sel.t, dom), f = eval(an, e->u.sel.f, dom);
    return ir_intset_union(an, t, f);
  }
  case IR_CAST: {
    ir_intset x = eval(an, e->u.cast.value, dom);
    if (x.empty) return x;
    const ir_expr *v = e->u.cast.value;
    /* Widening integer casts keep order; anything else is unbounded. */
    if (ir_dtype_is_int(e->dtype) && ir_dtype_is_int(v->dtype) &&
        ir_dtype_is_signed(e->dtype) == ir_dtype_is_signed(v->dtype) &&
        ir_dtype_bits(e->dtype) >= ir_dtype_bits(v->dtype)) {
      ir_expr *lo = x.min ? simp_or(an, ir_cast(ar, e->dtype, x.min)) : NULL;
      ir_expr *hi = x.max ? simp_or(an, ir_cast(ar, e->dtype, x.max)) : NULL;
      return (ir_intset){lo, hi, false};
    }
    return everything();
  }
  case IR_RAMP: {
    /* base + stride·[0, lanes-1]. */
    ir_intset b = eval(an, e->u.ramp.base, dom);
    ir_intset s = eval(an, e->u.ramp.stride, dom);
    if (b.empty || s.empty || !is_point(&s)) return everything();
    ir_expr *last = ir_mul(ar, s.min, ir_int(ar, s.min->dtype, e->u.ramp.lanes - 1));
    ir_intset steps = (ir_intset){ir_int(ar, s.min->dtype, 0), last, false};
    int sg = sign_of(an, s.min);
    if (sg < 0) steps = (ir_intset){last, steps.min, false};
    else if (sg == 0) return everything();
    return (ir_intset){apply(an, ir_add, b.min, steps.min), apply(an, ir_add, b.max, steps.max),
                       false};
  }
  case IR_BROADCAST:
    return eval(an, e->u.bcast.value, dom);
  case IR_NOT:
    return (ir_intset){ir_bool(ar, false), ir_bool(ar, true), false};
  default:
    if (ir_is_binop(e->kind)) return eval_bin(an, e, dom);
    return everything();
  }
}

ir_intset ir_eval_set(ir_analyzer *an, const ir_expr *e, const ir_dom_map *dom) {
  ir_intset r = eval(an, e, dom);
  if (r.empty) return r;
  /* Endpoints come back simplified; a point stays the expression itself. */
  if (r.min && r.min != e) r.min = ir_simplify(an, r.min);
  if (r.max && r.max != e) r.max = ir_simplify(an, r.max);
  return r;
}
