/* ir/arith/simplify.c — the folding constructors, the expression and
 * statement simplifiers and the prover: integer arithmetic in a canonical
 * affine form, floordiv/floormod and comparisons decided by bounds, floats
 * folded only constant with constant. Every rewrite is exact and the pass
 * always terminates. docs/IR.md ("Analyses", "Notes by file"). */
#include <stdlib.h>
#include <string.h>

#include "arith_int.h"

#define TRY(x) do { if (!(x)) return NULL; } while (0)

/* ---- structural order --------------------------------------------------- */

static int cmp_i64(int64_t a, int64_t b) { return a < b ? -1 : a > b; }

static int cmp_ptr(const void *a, const void *b) {
  uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
  return x < y ? -1 : x > y;
}

static int cmp_name(const char *a, const char *b) {
  int c = strcmp(a ? a : "", b ? b : "");
  return c < 0 ? -1 : c > 0;
}

static int cmp_var(const ir_var *a, const ir_var *b) {
  if (a == b) return 0;
  if (a->id != b->id) return a->id < b->id ? -1 : 1;
  int c = cmp_name(a->name, b->name);
  return c ? c : cmp_ptr(a, b);
}

static int cmp_buf(const ir_buffer *a, const ir_buffer *b) {
  if (a == b) return 0;
  if (a->id != b->id) return a->id < b->id ? -1 : 1;
  int c = cmp_name(a->name, b->name);
  return c ? c : cmp_ptr(a, b);
}

int ir_arith_cmp(const ir_expr *a, const ir_expr *b) {
  if (a == b) return 0;
  if (!a || !b) return a ? 1 : -1;
  if (a->kind != b->kind) return a->kind < b->kind ? -1 : 1;
  if (a->dtype.code != b->dtype.code) return a->dtype.code < b->dtype.code ? -1 : 1;
  if (a->dtype.lanes != b->dtype.lanes) return a->dtype.lanes < b->dtype.lanes ? -1 : 1;
  int c;
  switch (a->kind) {
  case IR_INT_IMM:
    return cmp_i64(a->u.ival, b->u.ival);
  case IR_FLOAT_IMM: {
    uint64_t x, y;
    memcpy(&x, &a->u.fval, sizeof x);
    memcpy(&y, &b->u.fval, sizeof y);
    return x < y ? -1 : x > y;
  }
  case IR_VAR:
    return cmp_var(a->u.var, b->u.var);
  case IR_NOT:
    return ir_arith_cmp(a->u.un.a, b->u.un.a);
  case IR_SELECT:
    if ((c = ir_arith_cmp(a->u.sel.cond, b->u.sel.cond))) return c;
    if ((c = ir_arith_cmp(a->u.sel.t, b->u.sel.t))) return c;
    return ir_arith_cmp(a->u.sel.f, b->u.sel.f);
  case IR_CAST:
    return ir_arith_cmp(a->u.cast.value, b->u.cast.value);
  case IR_CALL:
    if (a->u.call.op != b->u.call.op) return a->u.call.op < b->u.call.op ? -1 : 1;
    if (a->u.call.nargs != b->u.call.nargs) return a->u.call.nargs < b->u.call.nargs ? -1 : 1;
    for (int i = 0; i < a->u.call.nargs; i++)
      if ((c = ir_arith_cmp(a->u.call.args[i], b->u.call.args[i]))) return c;
    return 0;
  case IR_LOAD:
    if ((c = cmp_buf(a->u.load.buf, b->u.load.buf))) return c;
    if (a->u.load.nidx != b->u.load.nidx) return a->u.load.nidx < b->u.load.nidx ? -1 : 1;
    for (int i = 0; i < a->u.load.nidx; i++)
      if ((c = ir_arith_cmp(a->u.load.idx[i], b->u.load.idx[i]))) return c;
    return 0;
  case IR_RAMP:
    if (a->u.ramp.lanes != b->u.ramp.lanes) return a->u.ramp.lanes < b->u.ramp.lanes ? -1 : 1;
    if ((c = ir_arith_cmp(a->u.ramp.base, b->u.ramp.base))) return c;
    return ir_arith_cmp(a->u.ramp.stride, b->u.ramp.stride);
  case IR_BROADCAST:
    if (a->u.bcast.lanes != b->u.bcast.lanes) return a->u.bcast.lanes < b->u.bcast.lanes ? -1 : 1;
    return ir_arith_cmp(a->u.bcast.value, b->u.bcast.value);
  default:
    if (ir_is_binop(a->kind)) {
      if ((c = ir_arith_cmp(a->u.bin.a, b->u.bin.a))) return c;
      return ir_arith_cmp(a->u.bin.b, b->u.bin.b);
    }
    return cmp_ptr(a, b);
  }
}

/* ---- small helpers ------------------------------------------------------ */

static bool is_int_scalar(ir_dtype t) { return ir_dtype_is_int(t) && t.lanes == 1; }

static bool fits(ir_dtype t, int64_t v) {
  int64_t lo, hi;
  if (!ir_arith_dtype_range(t, &lo, &hi)) return false;
  return v >= lo && v <= hi;
}

static bool const_int(const ir_expr *e, int64_t *v) {
  return e && e->kind == IR_INT_IMM && (*v = e->u.ival, true);
}

static ir_expr *mk_int(ts_arena *a, ir_dtype t, int64_t v) {
  if (ir_dtype_is_bool(t)) return ir_bool(a, v != 0);
  return ir_int(a, t, v);
}

/* A binary node of dtype t (arithmetic) or bool (comparisons/logic). */
static ir_expr *mk_bin(ts_arena *a, ir_expr_kind k, ir_dtype t, ir_expr *x, ir_expr *y) {
  TRY(x);
  TRY(y);
  ir_expr *e = ir_binop(a, k, x, y);
  if (e && !ir_is_cmp(k) && k != IR_AND && k != IR_OR) e->dtype = t;
  return e;
}

/* e with new binary children; e itself when they are the same. */
static ir_expr *with2(ts_arena *a, ir_expr *e, ir_expr *x, ir_expr *y) {
  TRY(x);
  TRY(y);
  if (x == e->u.bin.a && y == e->u.bin.b) return e;
  ir_expr *n = ir_expr_clone(a, e);
  TRY(n);
  n->u.bin.a = x;
  n->u.bin.b = y;
  return n;
}

/* Exact integer folding; false when undefined (÷0), overflowing, or the
 * result does not fit dtype t. */
static bool fold_int(ir_expr_kind k, ir_dtype t, int64_t x, int64_t y, int64_t *out) {
  int64_t r;
  switch (k) {
  case IR_ADD: if (__builtin_add_overflow(x, y, &r)) return false; break;
  case IR_SUB: if (__builtin_sub_overflow(x, y, &r)) return false; break;
  case IR_MUL: if (__builtin_mul_overflow(x, y, &r)) return false; break;
  case IR_DIV:
    if (y == 0 || (x == INT64_MIN && y == -1)) return false;
    r = x / y;
    break;
  case IR_FLOORDIV:
    if (y == 0 || (x == INT64_MIN && y == -1)) return false;
    r = arith_floordiv(x, y);
    break;
  case IR_FLOORMOD:
    if (y == 0) return false;
    r = y == -1 ? 0 : arith_floormod(x, y);
    break;
  case IR_MIN: r = x < y ? x : y; break;
  case IR_MAX: r = x > y ? x : y; break;
  case IR_EQ: *out = x == y; return true;
  case IR_NE: *out = x != y; return true;
  case IR_LT: *out = x < y; return true;
  case IR_LE: *out = x <= y; return true;
  case IR_GT: *out = x > y; return true;
  case IR_GE: *out = x >= y; return true;
  case IR_AND: *out = x && y; return true;
  case IR_OR: *out = x || y; return true;
  default: return false;
  }
  if (!fits(t, r)) return false;
  *out = r;
  return true;
}

static bool float_foldable(ir_dtype t) {
  return t.lanes == 1 && (t.code == IR_F32 || t.code == IR_F64);
}

/* Folds a float op on two constants of one dtype; NULL when not exact-safe
 * (or on OOM: the caller then builds the node, which fails the same way). */
static ir_expr *fold_float(ts_arena *a, ir_expr_kind k, ir_expr *x, ir_expr *y) {
  if (x->kind != IR_FLOAT_IMM || y->kind != IR_FLOAT_IMM) return NULL;
  if (!ir_dtype_eq(x->dtype, y->dtype) || !float_foldable(x->dtype)) return NULL;
  double p = x->u.fval, q = y->u.fval, r;
  if (p != p || q != q) return NULL; /* NaN: leave it to the runtime */
  switch (k) {
  case IR_ADD: r = p + q; break;
  case IR_SUB: r = p - q; break;
  case IR_MUL: r = p * q; break;
  case IR_DIV:
    if (q == 0) return NULL;
    r = p / q;
    break;
  case IR_MIN: r = p < q ? p : q; break;
  case IR_MAX: r = p > q ? p : q; break;
  case IR_EQ: return ir_bool(a, p == q);
  case IR_NE: return ir_bool(a, p != q);
  case IR_LT: return ir_bool(a, p < q);
  case IR_LE: return ir_bool(a, p <= q);
  case IR_GT: return ir_bool(a, p > q);
  case IR_GE: return ir_bool(a, p >= q);
  default: return NULL;
  }
  if (x->dtype.code == IR_F32) r = (double)(float)r;
  return ir_float(a, x->dtype, r);
}

/* ---- folding constructors ----------------------------------------------- */

static ir_expr *fold_or_build(ts_arena *a, ir_expr_kind k, ir_expr *x, ir_expr *y) {
  TRY(x);
  TRY(y);
  int64_t p = 0, q = 0, r = 0;
  if (const_int(x, &p) && const_int(y, &q) && !ir_dtype_is_float(x->dtype) &&
      fold_int(k, x->dtype, p, q, &r))
    return (ir_is_cmp(k) || k == IR_AND || k == IR_OR) ? ir_bool(a, r != 0) : mk_int(a, x->dtype, r);
  ir_expr *f = fold_float(a, k, x, y);
  if (f) return f;
  return ir_binop(a, k, x, y);
}

static bool is_int_like(const ir_expr *e) { return ir_dtype_is_int(e->dtype); }

static bool same_var(const ir_expr *x, const ir_expr *y) {
  return x->kind == IR_VAR && y->kind == IR_VAR && x->u.var == y->u.var;
}

ir_expr *ir_add(ts_arena *a, ir_expr *x, ir_expr *y) {
  TRY(x);
  TRY(y);
  int64_t p = 0, q = 0;
  bool xc = const_int(x, &p), yc = const_int(y, &q);
  if (is_int_like(x) && is_int_like(y) && xc != yc) {
    if (xc && p == 0) return y;
    if (yc && q == 0) return x;
  }
  return fold_or_build(a, IR_ADD, x, y);
}

ir_expr *ir_sub(ts_arena *a, ir_expr *x, ir_expr *y) {
  TRY(x);
  TRY(y);
  int64_t q;
  if (is_int_like(x) && is_int_like(y)) {
    if (const_int(y, &q) && q == 0) return x;
    if (same_var(x, y)) return mk_int(a, x->dtype, 0);
  }
  return fold_or_build(a, IR_SUB, x, y);
}

ir_expr *ir_mul(ts_arena *a, ir_expr *x, ir_expr *y) {
  TRY(x);
  TRY(y);
  int64_t p = 0, q = 0;
  bool xc = const_int(x, &p), yc = const_int(y, &q);
  if (is_int_like(x) && is_int_like(y) && xc != yc) {
    int64_t k = xc ? p : q;
    ir_expr *other = xc ? y : x;
    if (k == 1) return other;
    if (k == 0) return mk_int(a, x->dtype, 0);
  }
  return fold_or_build(a, IR_MUL, x, y);
}

ir_expr *ir_floordiv(ts_arena *a, ir_expr *x, ir_expr *y) {
  TRY(x);
  TRY(y);
  int64_t v;
  if (is_int_like(x) && const_int(y, &v) && v == 1) return x;
  return fold_or_build(a, IR_FLOORDIV, x, y);
}

ir_expr *ir_floormod(ts_arena *a, ir_expr *x, ir_expr *y) {
  TRY(x);
  TRY(y);
  int64_t v;
  if (is_int_like(x) && const_int(y, &v) && (v == 1 || v == -1)) return mk_int(a, x->dtype, 0);
  return fold_or_build(a, IR_FLOORMOD, x, y);
}

ir_expr *ir_min(ts_arena *a, ir_expr *x, ir_expr *y) {
  TRY(x);
  TRY(y);
  if (same_var(x, y)) return x;
  return fold_or_build(a, IR_MIN, x, y);
}

ir_expr *ir_max(ts_arena *a, ir_expr *x, ir_expr *y) {
  TRY(x);
  TRY(y);
  if (same_var(x, y)) return x;
  return fold_or_build(a, IR_MAX, x, y);
}

ir_expr *ir_and(ts_arena *a, ir_expr *x, ir_expr *y) {
  TRY(x);
  TRY(y);
  int64_t v;
  if (const_int(x, &v)) return v ? y : x;
  if (const_int(y, &v)) return v ? x : y;
  return ir_binop(a, IR_AND, x, y);
}

ir_expr *ir_lt(ts_arena *a, ir_expr *x, ir_expr *y) {
  TRY(x);
  TRY(y);
  if (same_var(x, y)) return ir_bool(a, false);
  return fold_or_build(a, IR_LT, x, y);
}

/* ---- canonical sums ----------------------------------------------------- */

typedef struct term {
  int64_t coef;
  ir_expr *atom;
} term;

typedef struct sum {
  ir_dtype t;
  term *terms;
  int n, cap;
  int64_t c;
  bool bad; /* overflow or OOM: abandon the canonical form */
} sum;

static void sum_init(sum *s, ir_dtype t) {
  memset(s, 0, sizeof *s);
  s->t = t;
}

static void sum_fini(sum *s) {
  ts_free(s->terms);
  s->terms = NULL;
  s->n = s->cap = 0;
}

static void sum_push(sum *s, int64_t coef, ir_expr *atom) {
  if (s->bad || coef == 0) return;
  if (coef == INT64_MIN || !atom) {
    s->bad = true;
    return;
  }
  if (s->n == s->cap) {
    int cap = s->cap ? s->cap * 2 : 8;
    term *t = ts_realloc(s->terms, sizeof *t * (size_t)cap);
    if (!t) {
      s->bad = true;
      return;
    }
    s->terms = t;
    s->cap = cap;
  }
  s->terms[s->n++] = (term){coef, atom};
}

static void sum_addc(sum *s, int64_t k) {
  if (__builtin_add_overflow(s->c, k, &s->c)) s->bad = true;
}

static int64_t mul_chk(sum *s, int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) {
    s->bad = true;
    return 0;
  }
  return r;
}

/* Adds k·e to s, descending through + - and multiplication by a constant of
 * the sum's own dtype. e is already simplified. */
static void linearize(sum *s, ir_expr *e, int64_t k) {
  if (s->bad) return;
  if (!e) {
    s->bad = true;
    return;
  }
  if (e->kind == IR_INT_IMM) {
    sum_addc(s, mul_chk(s, k, e->u.ival));
    return;
  }
  if (ir_dtype_eq(e->dtype, s->t)) {
    int64_t c;
    switch (e->kind) {
    case IR_ADD:
      linearize(s, e->u.bin.a, k);
      linearize(s, e->u.bin.b, k);
      return;
    case IR_SUB:
      linearize(s, e->u.bin.a, k);
      linearize(s, e->u.bin.b, mul_chk(s, k, -1));
      return;
    case IR_MUL:
      if (const_int(e->u.bin.b, &c)) {
        linearize(s, e->u.bin.a, mul_chk(s, k, c));
        return;
      }
      if (const_int(e->u.bin.a, &c)) {
        linearize(s, e->u.bin.b, mul_chk(s, k, c));
        return;
      }
      break;
    default:
      break;
    }
  }
  sum_push(s, k, e);
}

static int term_cmp(const void *p, const void *q) {
  const term *a = p, *b = q;
  return ir_arith_cmp(a->atom, b->atom);
}

/* Sorts atoms, merges like terms, drops zero coefficients. */
static void normalize(sum *s) {
  if (s->bad || s->n == 0) return;
  qsort(s->terms, (size_t)s->n, sizeof *s->terms, term_cmp);
  int w = 0;
  for (int i = 0; i < s->n; i++) {
    if (w > 0 && ir_arith_same(s->terms[w - 1].atom, s->terms[i].atom)) {
      if (__builtin_add_overflow(s->terms[w - 1].coef, s->terms[i].coef, &s->terms[w - 1].coef))
        s->bad = true;
    } else {
      s->terms[w++] = s->terms[i];
    }
  }
  int k = 0;
  for (int i = 0; i < w; i++) {
    if (s->terms[i].coef == INT64_MIN) s->bad = true;
    if (s->terms[i].coef != 0) s->terms[k++] = s->terms[i];
  }
  s->n = k;
}

static ir_const_bound sum_bound(const ir_analyzer *an, const sum *s) {
  int64_t lo = s->c, hi = s->c;
  for (int i = 0; i < s->n; i++) {
    ir_const_bound b = ir_analyzer_const_bound(an, s->terms[i].atom);
    int64_t k = s->terms[i].coef;
    int64_t p = arith_sat_mul(k, b.lo), q = arith_sat_mul(k, b.hi);
    if (p > q) {
      int64_t t = p;
      p = q;
      q = t;
    }
    lo = arith_sat_add(lo, p);
    hi = arith_sat_add(hi, q);
  }
  return (ir_const_bound){lo, hi};
}

static ir_expr *simp(ir_analyzer *an, ir_expr *e);
static ir_expr *simp_floormod_const(ir_analyzer *an, ir_expr *x, int64_t c, ir_dtype t);
static ir_expr *simp_floordiv_const(ir_analyzer *an, ir_expr *x, int64_t c, ir_dtype t);

static bool const_divisor(const ir_expr *e, ir_expr_kind k, int64_t *c) {
  return e->kind == k && const_int(e->u.bin.b, c) && *c > 0;
}

/* One merge of (X//c)·(a·c) + (X%c)·a → X·a, or
 * ((X//c)%s)·(a·c) + (X%c)·a → (X%(c·s))·a. True if something merged. */
static bool merge_divmod(ir_analyzer *an, sum *s) {
  for (int i = 0; i < s->n; i++) {
    ir_expr *m = s->terms[i].atom;
    int64_t c, a = s->terms[i].coef, ac;
    if (!const_divisor(m, IR_FLOORMOD, &c)) continue;
    if (__builtin_mul_overflow(a, c, &ac)) continue;
    ir_expr *x = m->u.bin.a;
    for (int j = 0; j < s->n; j++) {
      if (j == i || s->terms[j].coef != ac) continue;
      ir_expr *d = s->terms[j].atom;
      int64_t c2, sm, cs;
      if (const_divisor(d, IR_FLOORDIV, &c2) && c2 == c && ir_arith_same(d->u.bin.a, x)) {
        s->terms[i].coef = s->terms[j].coef = 0;
        linearize(s, x, a);
        return true;
      }
      if (const_divisor(d, IR_FLOORMOD, &sm) && const_divisor(d->u.bin.a, IR_FLOORDIV, &c2) &&
          c2 == c && ir_arith_same(d->u.bin.a->u.bin.a, x) &&
          !__builtin_mul_overflow(c, sm, &cs)) {
        s->terms[i].coef = s->terms[j].coef = 0;
        linearize(s, simp_floormod_const(an, x, cs, s->t), a);
        return true;
      }
    }
  }
  return false;
}

/* The symbolic merge: (X//F)*F·a + (X%F)·a -> X·a for a non-constant F
 * (a Reshape over a symbolic dim flattened back). True if merged. */
static bool merge_divmod_sym(sum *s) {
  for (int i = 0; i < s->n; i++) {
    ir_expr *m = s->terms[i].atom;
    if (m->kind != IR_FLOORMOD || m->u.bin.b->kind == IR_INT_IMM) continue;
    ir_expr *x = m->u.bin.a, *f = m->u.bin.b;
    for (int j = 0; j < s->n; j++) {
      ir_expr *p = s->terms[j].atom;
      if (j == i || s->terms[j].coef != s->terms[i].coef || p->kind != IR_MUL) continue;
      ir_expr *dv = ir_arith_same(p->u.bin.b, f) ? p->u.bin.a : ir_arith_same(p->u.bin.a, f) ? p->u.bin.b : NULL;
      if (!dv || dv->kind != IR_FLOORDIV || !ir_arith_same(dv->u.bin.a, x) || !ir_arith_same(dv->u.bin.b, f)) continue;
      int64_t a = s->terms[i].coef;
      s->terms[i].coef = s->terms[j].coef = 0;
      linearize(s, x, a);
      return true;
    }
  }
  return false;
}

/* Normalizes and applies the merge rules to a fixed point (bounded). */
static void settle(ir_analyzer *an, sum *s) {
  normalize(s);
  for (int it = 0; it < 32 && !s->bad && (merge_divmod(an, s) || merge_divmod_sym(s)); it++) normalize(s);
}

static ir_expr *term_expr(ts_arena *a, ir_dtype t, int64_t coef, ir_expr *atom) {
  if (coef == 1) return atom;
  return mk_bin(a, IR_MUL, t, atom, ir_int(a, t, coef));
}

/* Builds the expression of a settled sum: positive terms first (in atom
 * order), then negative ones subtracted, then the constant. */
static ir_expr *rebuild(ir_analyzer *an, const sum *s) {
  ts_arena *a = an->arena;
  ir_dtype t = s->t;
  ir_expr *r = NULL;
  bool c_done = false;
  bool has_neg = false;
  for (int i = 0; i < s->n; i++) {
    if (s->terms[i].coef < 0) {
      has_neg = true;
      continue;
    }
    ir_expr *x = term_expr(a, t, s->terms[i].coef, s->terms[i].atom);
    TRY(x);
    r = r ? mk_bin(a, IR_ADD, t, r, x) : x;
    TRY(r);
  }
  if (!r && has_neg && s->c > 0) {
    r = ir_int(a, t, s->c);
    TRY(r);
    c_done = true;
  }
  for (int i = 0; i < s->n; i++) {
    int64_t k = s->terms[i].coef;
    if (k >= 0) continue;
    if (r)
      r = mk_bin(a, IR_SUB, t, r, term_expr(a, t, -k, s->terms[i].atom));
    else
      r = mk_bin(a, IR_MUL, t, s->terms[i].atom, ir_int(a, t, k));
    TRY(r);
  }
  if (!c_done) {
    if (!r) return ir_int(a, t, s->c);
    if (s->c > 0)
      r = mk_bin(a, IR_ADD, t, r, ir_int(a, t, s->c));
    else if (s->c < 0 && s->c != INT64_MIN)
      r = mk_bin(a, IR_SUB, t, r, ir_int(a, t, -s->c));
    else if (s->c < 0)
      r = mk_bin(a, IR_ADD, t, r, ir_int(a, t, s->c));
  }
  return r;
}

/* Settles and rebuilds s (then frees it); NULL if the canonical form was
 * abandoned (the caller falls back). */
static ir_expr *finish(ir_analyzer *an, sum *s) {
  settle(an, s);
  ir_expr *r = s->bad ? NULL : rebuild(an, s);
  sum_fini(s);
  return r;
}

/* ---- symbolic bounds ---------------------------------------------------- */

static bool has_sym_var(const ir_analyzer *an, const sum *s) {
  for (int i = 0; i < s->n; i++) {
    if (s->terms[i].atom->kind != IR_VAR) continue;
    int f = ir_arith_find_fact(an, s->terms[i].atom->u.var);
    if (f >= 0 && (an->smin[f] || an->smax[f])) return true;
  }
  return false;
}

/* Upper (or lower) constant bound of s, substituting each var atom that has
 * a symbolic range by the end that bounds its term, so i - N with
 * i ∈ [0, N-1] bounds to -1. Depth-limited. */
/* A second view of a settled sum for bounds: k·floordiv(X, c) with c | k is
 * (k/c)·(X − floormod(X, c)), and floormod ∈ [0, c) is bounded where the
 * floordiv alone is not: what proves c·floordiv(n + c − 1, c) ≥ n (an
 * imperfect split of a symbolic extent covers it). False when no term
 * qualifies (e is then empty). */
static bool expand_floordiv(ir_analyzer *an, const sum *d, sum *e) {
  sum_init(e, d->t);
  bool any = false;
  for (int i = 0; i < d->n && !any; i++) {
    int64_t c;
    any = const_divisor(d->terms[i].atom, IR_FLOORDIV, &c) && c > 1 && d->terms[i].coef % c == 0;
  }
  if (!any) return false; /* the common case: nothing to expand, nothing allocated */
  any = false;
  sum_addc(e, d->c);
  for (int i = 0; i < d->n; i++) {
    ir_expr *m = d->terms[i].atom;
    int64_t k = d->terms[i].coef, c;
    if (const_divisor(m, IR_FLOORDIV, &c) && c > 1 && k % c == 0) {
      linearize(e, m->u.bin.a, k / c);
      sum_push(e, -(k / c), mk_bin(an->arena, IR_FLOORMOD, d->t, m->u.bin.a, ir_int(an->arena, d->t, c)));
      any = true;
    } else {
      sum_push(e, k, m);
    }
  }
  if (any) settle(an, e);
  return any && !e->bad;
}

static int64_t sym_end(ir_analyzer *an, const sum *s, bool upper, int depth) {
  ir_const_bound b = sum_bound(an, s);
  sum x;
  if (expand_floordiv(an, s, &x)) { /* both views bound the same value: the tighter end */
    ir_const_bound bx = sum_bound(an, &x);
    if (bx.lo > b.lo) b.lo = bx.lo;
    if (bx.hi < b.hi) b.hi = bx.hi;
  }
  sum_fini(&x);
  int64_t plain = upper ? b.hi : b.lo;
  if (depth == 0 || !has_sym_var(an, s)) return plain;
  sum u;
  sum_init(&u, s->t);
  u.c = s->c;
  for (int i = 0; i < s->n; i++) {
    const term *tm = &s->terms[i];
    ir_expr *end = NULL;
    if (tm->atom->kind == IR_VAR) {
      int f = ir_arith_find_fact(an, tm->atom->u.var);
      if (f >= 0) end = (upper == (tm->coef > 0)) ? an->smax[f] : an->smin[f];
    }
    if (end)
      linearize(&u, end, tm->coef);
    else
      sum_push(&u, tm->coef, tm->atom);
  }
  settle(an, &u);
  int64_t r = plain;
  if (!u.bad) {
    int64_t v = sym_end(an, &u, upper, depth - 1);
    if (upper ? v < r : v > r) r = v;
  }
  sum_fini(&u);
  return r;
}

static ir_const_bound sum_bound_sym(ir_analyzer *an, const sum *s) {
  return (ir_const_bound){sym_end(an, s, false, 3), sym_end(an, s, true, 3)};
}

ir_const_bound ir_arith_sym_bound(ir_analyzer *an, ir_expr *e) {
  ir_const_bound plain = ir_analyzer_const_bound(an, e);
  if (!e || !is_int_scalar(e->dtype)) return plain;
  sum s;
  sum_init(&s, e->dtype);
  linearize(&s, e, 1);
  settle(an, &s);
  ir_const_bound r = s.bad ? plain : sum_bound_sym(an, &s);
  sum_fini(&s);
  if (plain.lo > r.lo) r.lo = plain.lo;
  if (plain.hi < r.hi) r.hi = plain.hi;
  return r;
}

/* Bound of x - y (both simplified ints); false if it cannot be formed. */
static bool diff_bound(ir_analyzer *an, ir_expr *x, ir_expr *y, ir_const_bound *out,
                       int64_t *gcd_terms) {
  sum d;
  sum_init(&d, x->dtype);
  linearize(&d, x, 1);
  linearize(&d, y, -1);
  settle(an, &d);
  bool ok = !d.bad;
  if (ok) {
    *out = sum_bound_sym(an, &d); /* with the floordiv-expanded view (sym_end) */
    int64_t g = 0;
    for (int i = 0; i < d.n; i++) g = arith_gcd(g, d.terms[i].coef);
    /* -1 flags "x - y = g·k + c with g ∤ c": never zero. */
    if (gcd_terms) *gcd_terms = (g > 1 && arith_floormod(d.c, g) != 0) ? -1 : g;
  }
  sum_fini(&d);
  return ok;
}

/* ---- floordiv / floormod by a positive constant ------------------------ */

/* TVM's factor rules for a sum r (its constant included) and a divisor c: a g
 * with 1 < g < c dividing c such that the terms g divides form g·X and the
 * others with the constant a rest R in [0, g). Then floordiv(g·X + R, c) =
 * floordiv(X, c/g) and floormod(g·X + R, c) = g·floormod(X, c/g) + R: what
 * a reshape's flat index (i·49 + j·7 + k) // 98 needs to become i // 2.
 * Returns g and fills x (X) and rest (R), or returns 0 (both freed). */
static int64_t factor_split(ir_analyzer *an, const sum *r, int64_t c, sum *x, sum *rest) {
  for (int i = 0; i < r->n; i++) {
    int64_t g = arith_gcd(r->terms[i].coef, c);
    if (g <= 1 || g >= c) continue;
    sum_init(x, r->t);
    sum_init(rest, r->t);
    for (int j = 0; j < r->n; j++) {
      if (r->terms[j].coef % g == 0) sum_push(x, r->terms[j].coef / g, r->terms[j].atom);
      else sum_push(rest, r->terms[j].coef, r->terms[j].atom);
    }
    rest->c = r->c;
    ir_const_bound b = sum_bound(an, rest);
    if (!x->bad && !rest->bad && !arith_is_inf(b.lo) && !arith_is_inf(b.hi) && b.lo >= 0 && b.hi < g) return g;
    sum_fini(x);
    sum_fini(rest);
  }
  return 0;
}

static ir_expr *simp_floordiv_const(ir_analyzer *an, ir_expr *x, int64_t c, ir_dtype t) {
  ts_arena *a = an->arena;
  TRY(x);
  if (c == 1) return x;
  sum s;
  sum_init(&s, t);
  linearize(&s, x, 1);
  settle(an, &s);
  if (s.bad) {
    sum_fini(&s);
    return mk_bin(a, IR_FLOORDIV, t, x, ir_int(a, t, c));
  }
  /* floordiv(floordiv(y, l), c) = floordiv(y, l·c) for l, c > 0. */
  int64_t l, lc;
  if (s.n == 1 && s.c == 0 && s.terms[0].coef == 1 &&
      const_divisor(s.terms[0].atom, IR_FLOORDIV, &l) && !__builtin_mul_overflow(l, c, &lc)) {
    ir_expr *y = s.terms[0].atom->u.bin.a;
    sum_fini(&s);
    return simp_floordiv_const(an, y, lc, t);
  }
  /* floordiv(g·Y, g·k) = floordiv(Y, k). */
  int64_t g = arith_gcd(c, s.c);
  for (int i = 0; i < s.n; i++) g = arith_gcd(g, s.terms[i].coef);
  if (g > 1) {
    for (int i = 0; i < s.n; i++) s.terms[i].coef /= g;
    s.c /= g;
    c /= g;
  }
  sum q, r, fx, fr;
  sum_init(&q, t);
  sum_init(&r, t);
  for (int i = 0; i < s.n; i++) {
    if (s.terms[i].coef % c == 0)
      sum_push(&q, s.terms[i].coef / c, s.terms[i].atom);
    else
      sum_push(&r, s.terms[i].coef, s.terms[i].atom);
  }
  q.c = arith_floordiv(s.c, c);
  r.c = arith_floormod(s.c, c);
  q.bad |= s.bad;
  sum_fini(&s);
  if (c == 1) {
    /* All of it divided out. */
  } else if (r.n > 0) {
    ir_const_bound b = sum_bound(an, &r);
    if (!arith_is_inf(b.lo) && !arith_is_inf(b.hi) &&
        arith_floordiv(b.lo, c) == arith_floordiv(b.hi, c)) {
      sum_addc(&q, arith_floordiv(b.lo, c));
    } else if ((g = factor_split(an, &r, c, &fx, &fr)) > 0) {
      sum_fini(&fr);
      ir_expr *xx = finish(an, &fx);
      if (!xx) q.bad = true;
      sum_push(&q, 1, simp_floordiv_const(an, xx, c / g, t));
    } else {
      settle(an, &r);
      ir_expr *rr = r.bad ? NULL : rebuild(an, &r);
      if (!rr) q.bad = true;
      sum_push(&q, 1, mk_bin(a, IR_FLOORDIV, t, rr, ir_int(a, t, c)));
    }
  }
  sum_fini(&r);
  ir_expr *res = finish(an, &q);
  return res ? res : mk_bin(a, IR_FLOORDIV, t, x, ir_int(a, t, c));
}

static ir_expr *simp_floormod_const(ir_analyzer *an, ir_expr *x, int64_t c, ir_dtype t) {
  ts_arena *a = an->arena;
  TRY(x);
  if (c == 1) return ir_int(a, t, 0);
  sum s;
  sum_init(&s, t);
  linearize(&s, x, 1);
  settle(an, &s);
  if (s.bad) {
    sum_fini(&s);
    return mk_bin(a, IR_FLOORMOD, t, x, ir_int(a, t, c));
  }
  /* floormod(floormod(y, m), c) = floormod(y, c) when c divides m. */
  int64_t m;
  if (s.n == 1 && s.c == 0 && s.terms[0].coef == 1 &&
      const_divisor(s.terms[0].atom, IR_FLOORMOD, &m) && m % c == 0) {
    ir_expr *y = s.terms[0].atom->u.bin.a;
    sum_fini(&s);
    return simp_floormod_const(an, y, c, t);
  }
  for (int i = 0; i < s.n; i++)
    if (s.terms[i].coef % c == 0) s.terms[i].coef = 0;
  s.c = arith_floormod(s.c, c);
  normalize(&s);
  if (!s.bad && s.n == 0) {
    int64_t v = s.c;
    sum_fini(&s);
    return ir_int(a, t, v);
  }
  ir_const_bound b = sum_bound(an, &s);
  if (!arith_is_inf(b.lo) && !arith_is_inf(b.hi) &&
      arith_floordiv(b.lo, c) == arith_floordiv(b.hi, c)) {
    sum_addc(&s, mul_chk(&s, -arith_floordiv(b.lo, c), c));
    ir_expr *r = finish(an, &s);
    return r ? r : mk_bin(a, IR_FLOORMOD, t, x, ir_int(a, t, c));
  }
  sum fx, fr;
  int64_t g = factor_split(an, &s, c, &fx, &fr);
  if (g > 0) {
    sum_fini(&s);
    ir_expr *xx = finish(an, &fx);
    if (!xx) fr.bad = true;
    sum_push(&fr, g, simp_floormod_const(an, xx, c / g, t));
    ir_expr *r = finish(an, &fr);
    return r ? r : mk_bin(a, IR_FLOORMOD, t, x, ir_int(a, t, c));
  }
  ir_expr *inner = finish(an, &s);
  return mk_bin(a, IR_FLOORMOD, t, inner ? inner : x, ir_int(a, t, c));
}

/* ---- floordiv / floormod by a symbolic divisor --------------------------- */

/* The other factor of a product atom that has f as one operand (atom == f:
 * NULL and *unit set). */
static ir_expr *cofactor(ir_expr *atom, const ir_expr *f, bool *unit) {
  *unit = false;
  if (ir_arith_same(atom, f)) {
    *unit = true;
    return NULL;
  }
  if (atom->kind != IR_MUL) return NULL;
  if (ir_arith_same(atom->u.bin.a, f)) return atom->u.bin.b;
  if (ir_arith_same(atom->u.bin.b, f)) return atom->u.bin.a;
  return NULL;
}

/* floordiv / floormod of x by a divisor y = c·F (c > 0, F a symbol or a
 * product): the terms of x that are multiples of y form y·Q, the others R;
 * when 0 <= R < y is provable (a loop var bounded by the symbolic extent),
 * floordiv is Q and floormod is R. The index of a Reshape over a symbolic
 * dim: ((i0·S + i1)·768 + j) // (S·768) -> i0, (..) // 768 % S -> i1. NULL
 * when the rule does not apply. */
static ir_expr *simp_divmod_sym(ir_analyzer *an, ir_expr_kind kind, ir_expr *x, ir_expr *y, ir_dtype t) {
  ts_arena *a = an->arena;
  sum ds, xs, q, r;
  sum_init(&ds, t);
  linearize(&ds, y, 1);
  settle(an, &ds);
  bool ok = !ds.bad && ds.n == 1 && ds.c == 0 && ds.terms[0].coef > 0;
  int64_t c = ok ? ds.terms[0].coef : 0;
  ir_expr *f = ok ? ds.terms[0].atom : NULL;
  sum_fini(&ds);
  if (!ok) return NULL;
  sum_init(&xs, t);
  linearize(&xs, x, 1);
  settle(an, &xs);
  sum_init(&q, t);
  sum_init(&r, t);
  bool any = false;
  for (int i = 0; i < xs.n; i++) {
    bool unit;
    ir_expr *co = xs.terms[i].coef % c == 0 ? cofactor(xs.terms[i].atom, f, &unit) : NULL;
    if (co || (xs.terms[i].coef % c == 0 && unit)) {
      any = true;
      if (co) sum_push(&q, xs.terms[i].coef / c, co);
      else sum_addc(&q, xs.terms[i].coef / c);
    } else {
      sum_push(&r, xs.terms[i].coef, xs.terms[i].atom);
    }
  }
  r.c = xs.c;
  bool bad = xs.bad || q.bad || r.bad;
  sum_fini(&xs);
  ir_expr *rr = bad || !any ? NULL : finish(an, &r);
  ir_expr *res = NULL;
  if (rr && ir_can_prove(an, ir_lt(a, ir_int(a, t, -1), rr)) && ir_can_prove(an, ir_lt(a, rr, y)))
    res = kind == IR_FLOORMOD ? rr : finish(an, &q);
  sum_fini(&r);
  sum_fini(&q);
  if (res || c == 1 || !ir_can_prove(an, ir_lt(a, ir_int(a, t, 0), f))) return res;
  /* by c first: X // (c·F) = (X // c) // F and X % (c·F) = (X // c % F)·c + X % c
   * for c, F > 0 ((i·768 + j) // (S·768) -> i // S when 0 <= j < 768) */
  ir_expr *xc = simp_floordiv_const(an, x, c, t);
  if (!xc) return NULL;
  if (kind == IR_FLOORDIV) return simp(an, mk_bin(a, IR_FLOORDIV, t, xc, f));
  ir_expr *hi = mk_bin(a, IR_MUL, t, mk_bin(a, IR_FLOORMOD, t, xc, f), ir_int(a, t, c));
  return simp(an, mk_bin(a, IR_ADD, t, hi, simp_floormod_const(an, x, c, t)));
}

/* ---- the expression simplifier ----------------------------------------- */

/* An operand the canonical form of dtype t can take: same dtype, or an
 * integer constant of another width whose value fits t (1i64 in an i32
 * sum). */
static bool operand_ok(const ir_expr *x, ir_dtype t) {
  if (ir_dtype_eq(x->dtype, t)) return true;
  return x->kind == IR_INT_IMM && ir_dtype_is_int(x->dtype) && fits(t, x->u.ival);
}

static ir_expr *simp_arith(ir_analyzer *an, ir_expr *e) {
  ts_arena *a = an->arena;
  ir_expr *x = simp(an, e->u.bin.a);
  TRY(x);
  ir_expr *y = simp(an, e->u.bin.b);
  TRY(y);
  ir_dtype t = e->dtype;
  int64_t p = 0, q = 0, r = 0;
  if (!is_int_scalar(t) || !operand_ok(x, t) || !operand_ok(y, t)) {
    if (e->kind != IR_FLOORMOD && e->kind != IR_FLOORDIV) {
      ir_expr *f = fold_float(a, e->kind, x, y);
      if (f) return f;
    }
    if (const_int(x, &p) && const_int(y, &q) && ir_dtype_is_int(t) && fold_int(e->kind, t, p, q, &r))
      return ir_int(a, t, r);
    return with2(a, e, x, y);
  }
  bool xc = const_int(x, &p), yc = const_int(y, &q);
  if (xc && yc && fold_int(e->kind, t, p, q, &r)) return ir_int(a, t, r);
  switch (e->kind) {
  case IR_ADD:
  case IR_SUB:
  case IR_MUL: {
    if (e->kind == IR_MUL && !xc && !yc) {
      /* Nonlinear product: an atom; canonical operand order; a constant
       * factor of either side pulled out in front ((i // S) * (S * 768) is
       * 768 * ((i // S) * S), which merge_divmod can pair) */
      int64_t cf;
      ir_expr *in = NULL, *other = NULL;
      if (x->kind == IR_MUL && const_int(x->u.bin.b, &cf)) in = x->u.bin.a, other = y;
      else if (y->kind == IR_MUL && const_int(y->u.bin.b, &cf)) in = y->u.bin.a, other = x;
      if (in) {
        ir_expr *prod = simp(an, mk_bin(a, IR_MUL, t, in, other));
        return prod ? simp(an, mk_bin(a, IR_MUL, t, prod, ir_int(a, t, cf))) : with2(a, e, x, y);
      }
      if (ir_arith_cmp(x, y) > 0) return with2(a, e, y, x);
      return with2(a, e, x, y);
    }
    sum s;
    sum_init(&s, t);
    if (e->kind == IR_MUL) {
      linearize(&s, xc ? y : x, xc ? p : q);
    } else {
      linearize(&s, x, 1);
      linearize(&s, y, e->kind == IR_SUB ? -1 : 1);
    }
    ir_expr *res = finish(an, &s);
    return res ? res : with2(a, e, x, y);
  }
  case IR_FLOORDIV:
    if (yc && q > 0) return simp_floordiv_const(an, x, q, t);
    if (!yc) {
      ir_expr *sd = simp_divmod_sym(an, IR_FLOORDIV, x, y, t);
      if (sd) return sd;
    }
    return with2(a, e, x, y);
  case IR_FLOORMOD:
    if (yc && q > 0) return simp_floormod_const(an, x, q, t);
    if (yc && q == -1) return ir_int(a, t, 0);
    if (!yc) {
      ir_expr *sd = simp_divmod_sym(an, IR_FLOORMOD, x, y, t);
      if (sd) return sd;
    }
    return with2(a, e, x, y);
  case IR_DIV:
    if (yc && q == 1) return x;
    /* Truncation equals floor on a non-negative numerator. */
    if (yc && q > 0 && ir_arith_sym_bound(an, x).lo >= 0) return simp_floordiv_const(an, x, q, t);
    return with2(a, e, x, y);
  case IR_MIN:
  case IR_MAX: {
    if (ir_arith_same(x, y)) return x;
    ir_const_bound d;
    if (diff_bound(an, x, y, &d, NULL)) {
      bool x_le = d.hi <= 0, x_ge = d.lo >= 0;
      if (e->kind == IR_MIN && (x_le || x_ge)) return x_le ? x : y;
      if (e->kind == IR_MAX && (x_le || x_ge)) return x_ge ? x : y;
    }
    /* Canonical operand order, constants last (min(x, 5), not min(5, x)). */
    if (xc || (!yc && ir_arith_cmp(x, y) > 0)) return with2(a, e, y, x);
    return with2(a, e, x, y);
  }
  default:
    return with2(a, e, x, y);
  }
}

/* 1 true, 0 false, -1 unknown, for "d OP 0" with d ∈ [lo, hi]. */
static int decide(ir_expr_kind k, ir_const_bound d, int64_t g) {
  switch (k) {
  case IR_LT: return d.hi < 0 ? 1 : d.lo >= 0 ? 0 : -1;
  case IR_LE: return d.hi <= 0 ? 1 : d.lo > 0 ? 0 : -1;
  case IR_GT: return d.lo > 0 ? 1 : d.hi <= 0 ? 0 : -1;
  case IR_GE: return d.lo >= 0 ? 1 : d.hi < 0 ? 0 : -1;
  case IR_EQ: return (d.lo == 0 && d.hi == 0) ? 1 : (d.lo > 0 || d.hi < 0 || g < 0) ? 0 : -1;
  case IR_NE: return (d.lo == 0 && d.hi == 0) ? 0 : (d.lo > 0 || d.hi < 0 || g < 0) ? 1 : -1;
  default: return -1;
  }
}

static ir_expr *simp_cmp(ir_analyzer *an, ir_expr *e) {
  ts_arena *a = an->arena;
  ir_expr *x = simp(an, e->u.bin.a);
  TRY(x);
  ir_expr *y = simp(an, e->u.bin.b);
  TRY(y);
  int64_t p = 0, q = 0, r = 0;
  if (const_int(x, &p) && const_int(y, &q) && !ir_dtype_is_float(x->dtype) &&
      fold_int(e->kind, x->dtype, p, q, &r))
    return ir_bool(a, r != 0);
  ir_expr *f = fold_float(a, e->kind, x, y);
  if (f) return f;
  if (is_int_scalar(x->dtype) && is_int_scalar(y->dtype)) {
    if (ir_arith_same(x, y)) {
      bool v = e->kind == IR_EQ || e->kind == IR_LE || e->kind == IR_GE;
      return ir_bool(a, v);
    }
    ir_const_bound d;
    int64_t g = 0;
    if (diff_bound(an, x, y, &d, &g)) {
      int v = decide(e->kind, d, g);
      if (v >= 0) return ir_bool(a, v != 0);
    }
  }
  return with2(a, e, x, y);
}

static bool is_true(const ir_expr *e) { int64_t v; return const_int(e, &v) && v != 0; }
static bool is_false(const ir_expr *e) { int64_t v; return const_int(e, &v) && v == 0; }

static ir_expr *simp_logic(ir_analyzer *an, ir_expr *e) {
  ts_arena *a = an->arena;
  ir_expr *x = simp(an, e->u.bin.a);
  TRY(x);
  /* Short-circuit on the left operand: the right one need not simplify. */
  if (e->kind == IR_AND && is_false(x)) return ir_bool(a, false);
  if (e->kind == IR_OR && is_true(x)) return ir_bool(a, true);
  ir_expr *y = simp(an, e->u.bin.b);
  TRY(y);
  if (e->kind == IR_AND) {
    if (is_true(x)) return y;
    if (is_true(y)) return x;
    if (is_false(y)) return ir_bool(a, false);
  } else {
    if (is_false(x)) return y;
    if (is_false(y)) return x;
    if (is_true(y)) return ir_bool(a, true);
  }
  if (ir_arith_same(x, y)) return x;
  return with2(a, e, x, y);
}

static ir_expr_kind negate_cmp(ir_expr_kind k) {
  switch (k) {
  case IR_EQ: return IR_NE;
  case IR_NE: return IR_EQ;
  case IR_LT: return IR_GE;
  case IR_LE: return IR_GT;
  case IR_GT: return IR_LE;
  default: return IR_LT; /* IR_GE */
  }
}

static ir_expr *simp_not(ir_analyzer *an, ir_expr *e) {
  ts_arena *a = an->arena;
  ir_expr *x = simp(an, e->u.un.a);
  TRY(x);
  int64_t v;
  if (const_int(x, &v)) return ir_bool(a, v == 0);
  if (x->kind == IR_NOT) return x->u.un.a;
  /* Negating a comparison is exact for integers (floats have NaN). */
  if (ir_is_cmp(x->kind) && ir_dtype_is_int(x->u.bin.a->dtype)) {
    ir_expr *n = ir_expr_clone(a, x);
    TRY(n);
    n->kind = negate_cmp(x->kind);
    return n;
  }
  if (x == e->u.un.a) return e;
  ir_expr *n = ir_expr_clone(a, e);
  TRY(n);
  n->u.un.a = x;
  return n;
}

static ir_expr *simp_select(ir_analyzer *an, ir_expr *e) {
  ts_arena *a = an->arena;
  ir_expr *c = simp(an, e->u.sel.cond);
  TRY(c);
  if (is_true(c)) return simp(an, e->u.sel.t);
  if (is_false(c)) return simp(an, e->u.sel.f);
  ir_expr *t = simp(an, e->u.sel.t);
  TRY(t);
  ir_expr *f = simp(an, e->u.sel.f);
  TRY(f);
  if (ir_arith_same(t, f)) return t;
  if (c == e->u.sel.cond && t == e->u.sel.t && f == e->u.sel.f) return e;
  ir_expr *n = ir_expr_clone(a, e);
  TRY(n);
  n->u.sel.cond = c;
  n->u.sel.t = t;
  n->u.sel.f = f;
  return n;
}

static ir_expr *simp_cast(ir_analyzer *an, ir_expr *e) {
  ts_arena *a = an->arena;
  ir_expr *x = simp(an, e->u.cast.value);
  TRY(x);
  if (ir_dtype_eq(x->dtype, e->dtype)) return x;
  int64_t v;
  if (const_int(x, &v) && e->dtype.lanes == 1) {
    if (ir_dtype_is_bool(e->dtype)) return ir_bool(a, v != 0);
    if (ir_dtype_is_int(e->dtype) && fits(e->dtype, v)) return ir_int(a, e->dtype, v);
    int64_t lim = e->dtype.code == IR_F64 ? (int64_t)1 << 53 : (int64_t)1 << 24;
    if (float_foldable(e->dtype) && v <= lim && v >= -lim) return ir_float(a, e->dtype, (double)v);
  }
  if (x->kind == IR_FLOAT_IMM && float_foldable(e->dtype) && float_foldable(x->dtype)) {
    double d = x->u.fval;
    return ir_float(a, e->dtype, e->dtype.code == IR_F32 ? (double)(float)d : d);
  }
  if (x == e->u.cast.value) return e;
  ir_expr *n = ir_expr_clone(a, e);
  TRY(n);
  n->u.cast.value = x;
  return n;
}

/* Simplifies an array of n children into *out: the original array when
 * none changed, a fresh one otherwise. False on OOM. */
static bool simp_array(ir_analyzer *an, ir_expr **xs, int n, ir_expr ***out) {
  *out = xs;
  for (int i = 0; i < n; i++) {
    ir_expr *y = simp(an, xs[i]);
    if (!y) return false;
    if (y != xs[i] && *out == xs) {
      *out = TS_ANEWN(an->arena, ir_expr *, n);
      if (!*out) return false;
      memcpy(*out, xs, sizeof **out * (size_t)n);
    }
    (*out)[i] = y;
  }
  return true;
}

static ir_expr *simp_node(ir_analyzer *an, ir_expr *e) {
  ts_arena *a = an->arena;
  switch (e->kind) {
  case IR_INT_IMM:
  case IR_FLOAT_IMM:
  case IR_VAR:
    return e;
  case IR_ADD: case IR_SUB: case IR_MUL: case IR_DIV: case IR_FLOORDIV: case IR_FLOORMOD:
  case IR_MIN: case IR_MAX:
    return simp_arith(an, e);
  case IR_EQ: case IR_NE: case IR_LT: case IR_LE: case IR_GT: case IR_GE:
    return simp_cmp(an, e);
  case IR_AND: case IR_OR:
    return simp_logic(an, e);
  case IR_NOT:
    return simp_not(an, e);
  case IR_SELECT:
    return simp_select(an, e);
  case IR_CAST:
    return simp_cast(an, e);
  case IR_CALL: {
    ir_expr **args;
    if (!simp_array(an, e->u.call.args, e->u.call.nargs, &args)) return NULL;
    if (args == e->u.call.args) return e;
    ir_expr *n = ir_expr_clone(a, e);
    TRY(n);
    n->u.call.args = args;
    return n;
  }
  case IR_LOAD: {
    ir_expr **idx;
    if (!simp_array(an, e->u.load.idx, e->u.load.nidx, &idx)) return NULL;
    if (idx == e->u.load.idx) return e;
    ir_expr *n = ir_expr_clone(a, e);
    TRY(n);
    n->u.load.idx = idx;
    return n;
  }
  case IR_RAMP: {
    ir_expr *b = simp(an, e->u.ramp.base);
    TRY(b);
    ir_expr *s = simp(an, e->u.ramp.stride);
    TRY(s);
    if (b == e->u.ramp.base && s == e->u.ramp.stride) return e;
    ir_expr *n = ir_expr_clone(a, e);
    TRY(n);
    n->u.ramp.base = b;
    n->u.ramp.stride = s;
    return n;
  }
  case IR_BROADCAST: {
    ir_expr *v = simp(an, e->u.bcast.value);
    TRY(v);
    if (v == e->u.bcast.value) return e;
    ir_expr *n = ir_expr_clone(a, e);
    TRY(n);
    n->u.bcast.value = v;
    return n;
  }
  default:
    return e;
  }
}

static ir_expr *simp(ir_analyzer *an, ir_expr *e) {
  TRY(e);
  ir_expr *r = simp_node(an, e);
  if (r && r != e && ir_arith_cmp(r, e) == 0) return e; /* keep sharing */
  return r;
}

ir_expr *ir_simplify(ir_analyzer *an, ir_expr *e) {
  TRY(e);
  ir_expr *cur = e;
  /* One pass usually reaches the fixed point; a second catches rules that
   * fire on a rebuilt parent. Bounded so it can never loop. */
  for (int it = 0; it < 4; it++) {
    ir_expr *next = simp(an, cur);
    TRY(next);
    if (next == cur) break;
    cur = next;
  }
  return cur;
}

/* ---- prover ------------------------------------------------------------- */

bool ir_can_prove(ir_analyzer *an, const ir_expr *cond) {
  if (!cond) return false;
  ir_expr *r = ir_simplify(an, (ir_expr *)cond);
  return r && is_true(r);
}

bool ir_can_prove_equal(ir_analyzer *an, const ir_expr *a, const ir_expr *b) {
  if (!a || !b) return false;
  if (ir_arith_same(a, b)) return true;
  ir_expr *x = ir_simplify(an, (ir_expr *)a);
  ir_expr *y = ir_simplify(an, (ir_expr *)b);
  if (!x || !y) return false;
  if (ir_arith_same(x, y)) return true;
  if (is_int_scalar(x->dtype) && is_int_scalar(y->dtype)) {
    ir_const_bound d;
    if (diff_bound(an, x, y, &d, NULL)) return d.lo == 0 && d.hi == 0;
  }
  return false;
}

/* ---- statements --------------------------------------------------------- */

static ir_stmt *simp_stmt(ir_analyzer *an, ir_stmt *s);

/* Simplifies region bounds into *out (the original array when unchanged).
 * False on OOM. */
static bool simp_regions(ir_analyzer *an, ir_region *rs, int n, ir_region **out) {
  *out = rs;
  for (int i = 0; i < n; i++) {
    ir_range *rg = rs[i].ranges, *nr = rg;
    for (int d = 0; d < rs[i].ndim; d++) {
      ir_expr *mn = ir_simplify(an, rg[d].min);
      ir_expr *ex = ir_simplify(an, rg[d].extent);
      if (!mn || !ex) return false;
      if ((mn != rg[d].min || ex != rg[d].extent) && nr == rg) {
        nr = TS_ANEWN(an->arena, ir_range, rs[i].ndim);
        if (!nr) return false;
        memcpy(nr, rg, sizeof *nr * (size_t)rs[i].ndim);
      }
      nr[d] = (ir_range){mn, ex};
    }
    if (nr != rg) {
      if (*out == rs) {
        *out = TS_ANEWN(an->arena, ir_region, n);
        if (!*out) return false;
        memcpy(*out, rs, sizeof **out * (size_t)n);
      }
      (*out)[i].ranges = nr;
    }
  }
  return true;
}

static ir_block *simp_block(ir_analyzer *an, ir_block *b) {
  int n0 = an->n;
  ir_iter_var *iters = b->iters;
  for (int i = 0; i < b->niter; i++) {
    ir_expr *mn = ir_simplify(an, iters[i].dom.min);
    TRY(mn);
    ir_expr *ex = ir_simplify(an, iters[i].dom.extent);
    TRY(ex);
    if ((mn != iters[i].dom.min || ex != iters[i].dom.extent) && iters == b->iters) {
      iters = TS_ANEWN(an->arena, ir_iter_var, b->niter);
      TRY(iters);
      memcpy(iters, b->iters, sizeof *iters * (size_t)b->niter);
    }
    iters[i].dom = (ir_range){mn, ex};
  }
  bool ok = true;
  for (int i = 0; i < b->niter && ok; i++)
    ok = ir_analyzer_bind(an, iters[i].var, iters[i].dom.min, iters[i].dom.extent) == TS_OK;
  ir_region *reads = NULL, *writes = NULL;
  ir_stmt *init = NULL, *body = NULL;
  ok = ok && simp_regions(an, b->reads, b->nreads, &reads) &&
       simp_regions(an, b->writes, b->nwrites, &writes);
  if (ok && b->init) ok = (init = simp_stmt(an, b->init)) != NULL;
  if (ok) ok = (body = simp_stmt(an, b->body)) != NULL;
  ir_analyzer_truncate(an, n0);
  if (!ok) return NULL;
  if (iters == b->iters && reads == b->reads && writes == b->writes && init == b->init &&
      body == b->body)
    return b;
  ir_block *nb = ir_block_clone(an->arena, b);
  TRY(nb);
  nb->iters = iters;
  nb->reads = reads;
  nb->writes = writes;
  nb->init = init;
  nb->body = body;
  return nb;
}

/* Facts implied by a condition that holds: clauses `v OP c` / `c OP v`
 * under && tighten v's bound (for the then-branch of an if). False on OOM. */
static bool add_cond_facts(ir_analyzer *an, const ir_expr *c) {
  if (c->kind == IR_AND) return add_cond_facts(an, c->u.bin.a) && add_cond_facts(an, c->u.bin.b);
  if (!ir_is_cmp(c->kind) || c->kind == IR_NE) return true;
  const ir_expr *x = c->u.bin.a, *y = c->u.bin.b;
  ir_expr_kind k = c->kind;
  int64_t v;
  if (x->kind != IR_VAR) {
    /* c OP v  ==  v OP' c */
    const ir_expr *t = x;
    x = y;
    y = t;
    k = k == IR_LT ? IR_GT : k == IR_GT ? IR_LT : k == IR_LE ? IR_GE : k == IR_GE ? IR_LE : k;
  }
  if (x->kind != IR_VAR || !ir_dtype_is_int(x->dtype) || !const_int(y, &v)) return true;
  int64_t lo = INT64_MIN, hi = INT64_MAX;
  switch (k) {
  case IR_LT: if (v == INT64_MIN) return true; hi = v - 1; break;
  case IR_LE: hi = v; break;
  case IR_GT: if (v == INT64_MAX) return true; lo = v + 1; break;
  case IR_GE: lo = v; break;
  default: lo = hi = v; break; /* IR_EQ */
  }
  return ir_analyzer_bind_const(an, x->u.var, lo, hi) == TS_OK;
}

static ir_stmt *simp_stmt(ir_analyzer *an, ir_stmt *s) {
  ts_arena *a = an->arena;
  TRY(s);
  ir_stmt *n;
  switch (s->kind) {
  case IR_FOR: {
    ir_expr *mn = ir_simplify(an, s->u.loop.min);
    TRY(mn);
    ir_expr *ex = ir_simplify(an, s->u.loop.extent);
    TRY(ex);
    int n0 = an->n;
    if (ir_analyzer_bind(an, s->u.loop.var, mn, ex) != TS_OK) return NULL;
    ir_stmt *body = simp_stmt(an, s->u.loop.body);
    ir_analyzer_truncate(an, n0);
    TRY(body);
    if (mn == s->u.loop.min && ex == s->u.loop.extent && body == s->u.loop.body) return s;
    TRY(n = ir_stmt_clone(a, s));
    n->u.loop.min = mn;
    n->u.loop.extent = ex;
    n->u.loop.body = body;
    return n;
  }
  case IR_BLOCK_REALIZE: {
    ir_block *b = s->u.realize.block;
    ir_expr **iv;
    if (!simp_array(an, s->u.realize.iter_values, b->niter, &iv)) return NULL;
    ir_expr *pred = s->u.realize.predicate ? ir_simplify(an, s->u.realize.predicate) : NULL;
    if (s->u.realize.predicate) TRY(pred);
    ir_block *nb = simp_block(an, b);
    TRY(nb);
    if (iv == s->u.realize.iter_values && pred == s->u.realize.predicate && nb == b) return s;
    TRY(n = ir_stmt_clone(a, s));
    n->u.realize.iter_values = iv;
    n->u.realize.predicate = pred;
    n->u.realize.block = nb;
    return n;
  }
  case IR_SEQ: {
    ir_stmt **out = s->u.seq.stmts;
    for (int i = 0; i < s->u.seq.n; i++) {
      ir_stmt *y = simp_stmt(an, s->u.seq.stmts[i]);
      TRY(y);
      if (y != s->u.seq.stmts[i] && out == s->u.seq.stmts) {
        out = TS_ANEWN(a, ir_stmt *, s->u.seq.n);
        TRY(out);
        memcpy(out, s->u.seq.stmts, sizeof *out * (size_t)s->u.seq.n);
      }
      out[i] = y;
    }
    if (out == s->u.seq.stmts) return s;
    TRY(n = ir_stmt_clone(a, s));
    n->u.seq.stmts = out;
    return n;
  }
  case IR_IF: {
    ir_expr *c = ir_simplify(an, s->u.ifs.cond);
    TRY(c);
    if (is_true(c)) return simp_stmt(an, s->u.ifs.then_s);
    if (is_false(c) && s->u.ifs.else_s) return simp_stmt(an, s->u.ifs.else_s);
    int n0 = an->n;
    bool ok = add_cond_facts(an, c);
    ir_stmt *t = ok ? simp_stmt(an, s->u.ifs.then_s) : NULL;
    ir_analyzer_truncate(an, n0);
    TRY(t);
    ir_stmt *f = s->u.ifs.else_s ? simp_stmt(an, s->u.ifs.else_s) : NULL;
    if (s->u.ifs.else_s) TRY(f);
    if (c == s->u.ifs.cond && t == s->u.ifs.then_s && f == s->u.ifs.else_s) return s;
    TRY(n = ir_stmt_clone(a, s));
    n->u.ifs.cond = c;
    n->u.ifs.then_s = t;
    n->u.ifs.else_s = f;
    return n;
  }
  case IR_LET: {
    ir_expr *v = ir_simplify(an, s->u.let.value);
    TRY(v);
    int n0 = an->n;
    if (is_int_scalar(v->dtype)) {
      ir_const_bound b = ir_analyzer_const_bound(an, v);
      if (ir_analyzer_bind_const(an, s->u.let.var, b.lo, b.hi) != TS_OK) return NULL;
    }
    ir_stmt *body = simp_stmt(an, s->u.let.body);
    ir_analyzer_truncate(an, n0);
    TRY(body);
    if (v == s->u.let.value && body == s->u.let.body) return s;
    TRY(n = ir_stmt_clone(a, s));
    n->u.let.value = v;
    n->u.let.body = body;
    return n;
  }
  case IR_ALLOCATE: {
    ir_stmt *body = simp_stmt(an, s->u.alloc.body);
    TRY(body);
    if (body == s->u.alloc.body) return s;
    TRY(n = ir_stmt_clone(a, s));
    n->u.alloc.body = body;
    return n;
  }
  case IR_EVALUATE: {
    ir_expr *v = ir_simplify(an, s->u.eval.value);
    TRY(v);
    if (v == s->u.eval.value) return s;
    TRY(n = ir_stmt_clone(a, s));
    n->u.eval.value = v;
    return n;
  }
  case IR_STORE: {
    ir_expr **idx;
    if (!simp_array(an, s->u.store.idx, s->u.store.nidx, &idx)) return NULL;
    ir_expr *v = ir_simplify(an, s->u.store.value);
    TRY(v);
    ir_expr *p = s->u.store.predicate ? ir_simplify(an, s->u.store.predicate) : NULL;
    if (s->u.store.predicate) TRY(p);
    if (idx == s->u.store.idx && v == s->u.store.value && p == s->u.store.predicate) return s;
    TRY(n = ir_stmt_clone(a, s));
    n->u.store.idx = idx;
    n->u.store.value = v;
    n->u.store.predicate = p;
    return n;
  }
  default:
    return s;
  }
}

ir_stmt *ir_simplify_stmt(ir_analyzer *an, ir_stmt *s) {
  int n0 = an->n;
  ir_stmt *r = simp_stmt(an, s);
  ir_analyzer_truncate(an, n0);
  return r;
}
