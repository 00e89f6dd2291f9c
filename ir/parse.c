/* parse.c — the shared part of the two text front-ends of docs/SCRIPT.md
 * (tokens, errors, the expression grammar, names) and the entry points; the
 * front-ends themselves are parse_kernel.c and parse_func.c:
 *   kernel ...  the compute DSL, lowered here into loop nests of blocks;
 *   func ...    the loop-IR script the printer writes, read back node by node.
 * The expression grammar is shared; in the DSL it also type-checks (literals
 * adopt the other operand's dtype, mixed dtypes are errors), in the script it
 * builds exactly what is written.
 *
 * Errors unwind with longjmp to the entry point (chibicc reports and exits; we
 * report into the ts_diag and return). That is safe because everything the
 * parser builds lives in the arena; the only heap object, the token array, is
 * owned by the entry point and freed on every path. Recursion is bounded by a
 * nesting-depth cap, and expression trees by a height cap, so hostile input
 * cannot exhaust the stack here or in the passes that walk the result. */
#include "parse_int.h"

#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>

#include "arith/arith.h"
#include "lex.h"

/* ---- errors, memory, tokens -------------------------------------------------- */

_Noreturn void ps_fail(P *p, const ir_token *t, ts_status code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  ir_lex_verror_at(&p->lx, t->pos, p->d, code, fmt, ap);
  va_end(ap);
  longjmp(p->jb, (int)code);
}

_Noreturn void ps_oom(P *p) {
  ts_diag_set(p->d, TS_ENOMEM, "out of memory while parsing");
  longjmp(p->jb, (int)TS_ENOMEM);
}

void *ps_chk(P *p, void *x) {
  if (!x) ps_oom(p);
  return x;
}

void *ps_grow(P *p, void *arr, int n, int *cap, size_t sz) {
  if (n < *cap) return arr;
  int nc = *cap ? *cap * 2 : 8;
  void *na = ps_chk(p, ts_arena_alloc(p->a, sz * (size_t)nc));
  if (n) memcpy(na, arr, sz * (size_t)n);
  *cap = nc;
  return na;
}

const ir_token *ps_cur(P *p) { return &p->t[p->i]; }
const ir_token *ps_peekn(P *p, int k) {
  int j = p->i + k;
  return &p->t[j < p->nt ? j : p->nt - 1];
}
const ir_token *ps_next(P *p) {
  const ir_token *t = ps_cur(p);
  if (t->kind != IR_TK_EOF) p->i++;
  return t;
}
bool ps_tis(P *p, const ir_token *t, const char *s) { return ir_tok_is(&p->lx, t, s); }
bool ps_is(P *p, const char *s) { return ps_tis(p, ps_cur(p), s); }
bool ps_accept(P *p, const char *s) {
  if (!ps_is(p, s)) return false;
  p->i++;
  return true;
}

const char *ps_describe(P *p, const ir_token *t) {
  if (t->kind == IR_TK_EOF) return "end of input";
  if (t->kind == IR_TK_STR) return "a string";
  size_t n = t->len > 40 ? 40 : t->len;
  snprintf(p->desc, sizeof p->desc, "'%.*s%s'", (int)n, p->lx.src + t->pos, t->len > n ? "..." : "");
  return p->desc;
}

const ir_token *ps_expect(P *p, const char *s) {
  if (!ps_is(p, s)) ps_fail(p, ps_cur(p), TS_EPARSE, "expected '%s' but found %s", s, ps_describe(p, ps_cur(p)));
  return ps_next(p);
}

const ir_token *ps_expect_ident(P *p, const char *what) {
  if (ps_cur(p)->kind != IR_TK_IDENT)
    ps_fail(p, ps_cur(p), TS_EPARSE, "expected %s but found %s", what, ps_describe(p, ps_cur(p)));
  return ps_next(p);
}

const char *ps_tname(P *p, const ir_token *t) {
  return CK(ts_arena_strndup(p->a, p->lx.src + t->pos, t->len));
}

bool ps_teq(P *p, const ir_token *t, const char *name) {
  size_t n = strlen(name);
  return t->len == n && memcmp(p->lx.src + t->pos, name, n) == 0;
}

const char *ps_dts(ir_dtype t, char *buf) { return ir_dtype_str(t, buf, 16); }

bool ps_tok_dtype(P *p, const ir_token *t, ir_dtype *out) {
  return t->kind == IR_TK_IDENT && ir_lex_dtype(p->lx.src + t->pos, t->len, out);
}

ir_dtype ps_expect_dtype(P *p) {
  ir_dtype dt;
  if (!ps_tok_dtype(p, ps_cur(p), &dt))
    ps_fail(p, ps_cur(p), TS_EPARSE, "expected a dtype (f32, i64, ...) but found %s", ps_describe(p, ps_cur(p)));
  ps_next(p);
  return dt;
}

/* ---- small folds (kept local so parsing needs nothing but constructors) ---- */

ir_expr *ps_fold_add(P *p, ir_expr *x, ir_expr *y) {
  int64_t a, b;
  if (ir_as_int(x, &a) && ir_as_int(y, &b) && ir_dtype_eq(x->dtype, y->dtype))
    return CK(ir_int(p->a, x->dtype, a + b));
  if (ir_as_int(x, &a) && a == 0) return y;
  if (ir_as_int(y, &b) && b == 0) return x;
  return CK(ir_binop(p->a, IR_ADD, x, y));
}

/* A shape extent, loop or domain bound made only of constants (`1 * 128`, as
 * the graph's legalizer writes a flattened dim) becomes the constant itself:
 * every consumer (kernel metadata, buffer sizes, step counts, the workload
 * key) then sees one integer, as it would for `128`. Expressions with size
 * vars or loop vars are kept as written. */
ir_expr *ps_fold_const(P *p, ir_expr *e) {
  if (!e || e->kind == IR_INT_IMM) return e;
  ir_analyzer an;
  ir_analyzer_init(&an, p->a);
  ir_expr *f = CK(ir_simplify(&an, e));
  ir_analyzer_fini(&an);
  return f && f->kind == IR_INT_IMM ? f : e;
}

ir_expr *ps_fold_sub(P *p, ir_expr *x, ir_expr *y) {
  int64_t a, b;
  if (ir_as_int(x, &a) && ir_as_int(y, &b) && ir_dtype_eq(x->dtype, y->dtype))
    return CK(ir_int(p->a, x->dtype, a - b));
  if (ir_as_int(y, &b) && b == 0) return x;
  return CK(ir_binop(p->a, IR_SUB, x, y));
}

bool ps_same_expr(const ir_expr *x, const ir_expr *y) {
  if (x == y) return true;
  if (!x || !y || x->kind != y->kind || !ir_dtype_eq(x->dtype, y->dtype)) return false;
  switch (x->kind) {
  case IR_INT_IMM: return x->u.ival == y->u.ival;
  case IR_FLOAT_IMM: return x->u.fval == y->u.fval;
  case IR_VAR: return x->u.var == y->u.var;
  default:
    if (ir_is_binop(x->kind)) return ps_same_expr(x->u.bin.a, y->u.bin.a) && ps_same_expr(x->u.bin.b, y->u.bin.b);
    return false;
  }
}

static bool int_fits(int64_t v, ir_dtype dt) {
  int bits = ir_dtype_bits(dt);
  if (dt.code == IR_BOOL) return v == 0 || v == 1;
  if (ir_dtype_is_signed(dt)) {
    if (bits >= 64) return true;
    int64_t lim = (int64_t)1 << (bits - 1);
    return v >= -lim && v < lim;
  }
  if (v < 0) return false;
  return bits >= 63 || v < ((int64_t)1 << bits);
}

/* ---- expressions ---------------------------------------------------------------- */


static pv mkpv(ir_expr *e, bool lit, int h) { return (pv){e, lit, h}; }

/* Gives a literal-only subtree the dtype dt (DSL literal adoption). */
ir_expr *ps_retype(P *p, const ir_token *t, ir_expr *e, ir_dtype dt) {
  char b1[16];
  if (e->kind == IR_INT_IMM) {
    if (ir_dtype_is_float(dt)) return CK(ir_float(p->a, dt, (double)e->u.ival));
    if (!ir_dtype_is_int(dt) || dt.lanes != 1)
      ps_fail(p, t, TS_ETYPE, "integer literal used where %s is expected", ps_dts(dt, b1));
    if (!int_fits(e->u.ival, dt))
      ps_fail(p, t, TS_ETYPE, "literal %lld is out of range for %s", (long long)e->u.ival, ps_dts(dt, b1));
    return CK(ir_int(p->a, dt, e->u.ival));
  }
  if (e->kind == IR_FLOAT_IMM) {
    if (!ir_dtype_is_float(dt) || dt.lanes != 1)
      ps_fail(p, t, TS_ETYPE, "float literal used where %s is expected (write a cast)", ps_dts(dt, b1));
    return CK(ir_float(p->a, dt, e->u.fval));
  }
  if (ir_is_binop(e->kind))
    return CK(ir_binop(p->a, e->kind, ps_retype(p, t, e->u.bin.a, dt), ps_retype(p, t, e->u.bin.b, dt)));
  return e;
}

/* DSL: makes x and y the same dtype or reports a type error at t. */
static void unify(P *p, const ir_token *t, pv *x, pv *y) {
  char b1[16], b2[16];
  if (!p->dsl) return;
  if (x->lit && y->lit) {
    bool fx = ir_dtype_is_float(x->e->dtype), fy = ir_dtype_is_float(y->e->dtype);
    if (fx && !fy) y->e = ps_retype(p, t, y->e, x->e->dtype);
    if (fy && !fx) x->e = ps_retype(p, t, x->e, y->e->dtype);
    return;
  }
  if (x->lit) {
    x->e = ps_retype(p, t, x->e, y->e->dtype);
    x->lit = false;
    return;
  }
  if (y->lit) {
    y->e = ps_retype(p, t, y->e, x->e->dtype);
    y->lit = false;
    return;
  }
  if (!ir_dtype_eq(x->e->dtype, y->e->dtype))
    ps_fail(p, t, TS_ETYPE, "mismatched dtypes %s and %s (write a cast)", ps_dts(x->e->dtype, b1),
            ps_dts(y->e->dtype, b2));
}

static int hmax(int a, int b) { return a > b ? a : b; }

static void check_height(P *p, const ir_token *t, int h) {
  if (h > MAX_HEIGHT) ps_fail(p, t, TS_EPARSE, "expression is too large (height limit %d)", MAX_HEIGHT);
}

void ps_need_bool(P *p, const ir_token *t, pv x, const char *what) {
  char b1[16];
  if (p->dsl && (x.lit || x.e->dtype.code != IR_BOOL))
    ps_fail(p, t, TS_ETYPE, "%s must be bool, not %s", what, x.lit ? "a number" : ps_dts(x.e->dtype, b1));
}

void ps_need_int(P *p, const ir_token *t, pv x, const char *what) {
  char b1[16];
  if (!ir_dtype_is_int(x.e->dtype))
    ps_fail(p, t, TS_ETYPE, "%s must be an integer, not %s", what, ps_dts(x.e->dtype, b1));
}

static pv mkbin(P *p, const ir_token *op, ir_expr_kind k, pv x, pv y) {
  char b1[16];
  int h = hmax(x.h, y.h) + 1;
  check_height(p, op, h);
  bool lit = false;
  if (p->dsl) {
    if (k == IR_AND || k == IR_OR) {
      ps_need_bool(p, op, x, "operand of logical operator");
      ps_need_bool(p, op, y, "operand of logical operator");
    } else {
      if (!x.lit && x.e->dtype.code == IR_BOOL && !ir_is_cmp(k))
        ps_fail(p, op, TS_ETYPE, "arithmetic on %s", ps_dts(x.e->dtype, b1));
      if (!y.lit && y.e->dtype.code == IR_BOOL && !ir_is_cmp(k))
        ps_fail(p, op, TS_ETYPE, "arithmetic on %s", ps_dts(y.e->dtype, b1));
      unify(p, op, &x, &y);
      lit = x.lit && y.lit && !ir_is_cmp(k);
    }
  }
  return mkpv(CK(ir_binop(p->a, k, x.e, y.e)), lit, h);
}

static bool special_float(P *p, const ir_token *t, double *v, ir_dtype *dt, bool *typed) {
  if (t->kind != IR_TK_IDENT || t->len < 3) return false;
  const char *s = p->lx.src + t->pos;
  double val;
  if (!memcmp(s, "inf", 3)) val = INFINITY;
  else if (!memcmp(s, "nan", 3)) val = NAN;
  else return false;
  if (t->len == 3) {
    *dt = ir_dt(IR_F32);
    *typed = false;
  } else {
    if (s[3] != '_' || !ir_lex_dtype(s + 4, t->len - 4, dt) || !ir_dtype_is_float(*dt) ||
        dt->lanes != 1)
      return false;
    *typed = true;
  }
  *v = val;
  return true;
}

/* A literal token (or inf/nan), with the sign already consumed. */
pv ps_parse_number(P *p, bool neg) {
  const ir_token *t = ps_next(p);
  char b1[16];
  if (t->kind == IR_TK_INT) {
    int64_t v;
    if (neg) {
      if (t->ival > (uint64_t)INT64_MAX + 1) ps_fail(p, t, TS_EPARSE, "integer literal is too large");
      v = t->ival == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)t->ival;
    } else {
      if (t->ival > (uint64_t)INT64_MAX) ps_fail(p, t, TS_EPARSE, "integer literal is too large");
      v = (int64_t)t->ival;
    }
    if (t->has_dt) {
      if (!int_fits(v, t->dt))
        ps_fail(p, t, TS_ETYPE, "literal %lld is out of range for %s", (long long)v, ps_dts(t->dt, b1));
      return mkpv(CK(ir_int(p->a, t->dt, v)), false, 1);
    }
    return mkpv(CK(ir_i64(p->a, v)), p->dsl, 1);
  }
  if (t->kind == IR_TK_FLOAT) {
    double v = neg ? -t->fval : t->fval;
    return mkpv(CK(ir_float(p->a, t->has_dt ? t->dt : ir_dt(IR_F32), v)), p->dsl && !t->has_dt, 1);
  }
  double v;
  ir_dtype dt;
  bool typed;
  if (special_float(p, t, &v, &dt, &typed))
    return mkpv(CK(ir_float(p->a, dt, neg ? -v : v)), p->dsl && !typed, 1);
  ps_fail(p, t, TS_EPARSE, "expected a number but found %s", ps_describe(p, t));
}

static bool at_literal(P *p, int k) {
  const ir_token *t = ps_peekn(p, k);
  double v;
  ir_dtype dt;
  bool typed;
  return t->kind == IR_TK_INT || t->kind == IR_TK_FLOAT ||
         (special_float(p, t, &v, &dt, &typed) && !ps_tis(p, ps_peekn(p, k + 1), "(") &&
          !ps_tis(p, ps_peekn(p, k + 1), "["));
}

/* Comma-separated expressions up to the closing token (consumed). */
int ps_parse_args(P *p, const char *close, pv **out) {
  pv *v = NULL;
  int n = 0, cap = 0;
  if (!ps_accept(p, close)) {
    for (;;) {
      PUSH(v, n, cap, ps_parse_expr(p));
      if (ps_accept(p, close)) break;
      ps_expect(p, ",");
    }
  }
  *out = v;
  return n;
}

ir_expr **ps_exprs_of(P *p, pv *v, int n, int *h) {
  ir_expr **e = n ? CK(TS_ANEWN(p->a, ir_expr *, n)) : NULL;
  *h = 0;
  for (int i = 0; i < n; i++) {
    e[i] = v[i].e;
    *h = hmax(*h, v[i].h);
  }
  return e;
}

static bool intrin_of(P *p, const ir_token *t, ir_intrin *op) {
  for (int i = 0; i < IR_INTRIN_COUNT; i++)
    if (ps_teq(p, t, ir_intrin_name((ir_intrin)i))) {
      *op = (ir_intrin)i;
      return true;
    }
  return false;
}

static void need_nargs(P *p, const ir_token *t, int n, int want) {
  if (n != want)
    ps_fail(p, t, TS_EPARSE, "'%.*s' takes %d argument%s, not %d", (int)t->len, p->lx.src + t->pos,
            want, want == 1 ? "" : "s", n);
}

static int lanes_arg(P *p, const ir_token *t, pv x) {
  int64_t v;
  if (!ir_as_int(x.e, &v) || v < 1 || v > 65535)
    ps_fail(p, t, TS_EPARSE, "lanes must be an integer literal in [1, 65535]");
  return (int)v;
}

/* Buffer named by token t (a tensor in the DSL, a declared buffer in the
 * loop-IR form); fails if there is none. */
static ir_buffer *buffer_named(P *p, const ir_token *t);

/* call_extern("name", dtype, args...), reinterpret(dtype, x),
 * access_ptr(Buf, offset, rw): target intrinsics (docs/TENSORIZE.md). */
static pv parse_target_call(P *p, const ir_token *t) {
  char b1[16];
  int h = 0;
  if (ps_teq(p, t, "call_extern")) {
    const ir_token *nt = ps_next(p);
    if (nt->kind != IR_TK_STR)
      ps_fail(p, nt, TS_EPARSE, "call_extern needs the callee name as a string, found %s", ps_describe(p, nt));
    ps_expect(p, ",");
    ir_dtype rt = ps_expect_dtype(p);
    pv *a = NULL;
    int n = 0, cap = 0;
    while (ps_accept(p, ",")) PUSH(a, n, cap, ps_parse_expr(p));
    ps_expect(p, ")");
    for (int i = 0; i < n; i++)
      if (a[i].lit && p->dsl)
        ps_fail(p, t, TS_ETYPE, "argument %d of call_extern is an untyped literal; write a cast", i);
    ir_expr **e = ps_exprs_of(p, a, n, &h);
    check_height(p, t, h + 1);
    return mkpv(CK(ir_call_extern(p->a, nt->str, rt, n, e)), false, h + 1);
  }
  if (ps_teq(p, t, "reinterpret")) {
    ir_dtype rt = ps_expect_dtype(p);
    ps_expect(p, ",");
    pv x = ps_parse_expr(p);
    ps_expect(p, ")");
    if (x.lit && p->dsl) ps_fail(p, t, TS_ETYPE, "reinterpret of an untyped literal; write a cast");
    if ((long)ir_dtype_bits(rt) * rt.lanes != (long)ir_dtype_bits(x.e->dtype) * x.e->dtype.lanes)
      ps_fail(p, t, TS_ETYPE, "reinterpret to %s from %s changes the number of bits", ps_dts(rt, b1),
              ir_dtype_str(x.e->dtype, (char[16]){0}, 16));
    check_height(p, t, x.h + 1);
    return mkpv(CK(ir_reinterpret(p->a, rt, x.e)), false, x.h + 1);
  }
  /* access_ptr */
  const ir_token *bt = ps_next(p);
  ir_buffer *b = buffer_named(p, bt);
  ps_expect(p, ",");
  pv off = ps_parse_expr(p);
  ps_need_int(p, t, off, "access_ptr's offset");
  ps_expect(p, ",");
  const ir_token *rt = ps_cur(p);
  pv rw = ps_parse_expr(p);
  ps_expect(p, ")");
  int64_t m;
  if (!ir_as_int(rw.e, &m) || m < 0 || m > 3)
    ps_fail(p, rt, TS_EPARSE, "access_ptr's access mask must be 0..3 (1 read, 2 write)");
  if (off.lit) off.e = ps_retype(p, t, off.e, ir_dt(IR_I64));
  check_height(p, t, off.h + 1);
  return mkpv(CK(ir_access_ptr(p->a, b, off.e, (int)m)), false, off.h + 1);
}

static pv parse_call(P *p) {
  const ir_token *t = ps_next(p);
  char b1[16];
  ir_dtype dt;
  ps_expect(p, "(");
  if (ps_teq(p, t, "call_extern") || ps_teq(p, t, "reinterpret") || ps_teq(p, t, "access_ptr"))
    return parse_target_call(p, t);
  if (ps_tok_dtype(p, t, &dt)) {
    /* cast; directly applied to a literal it makes a literal of that dtype */
    int k = ps_is(p, "-") ? 1 : 0;
    if (dt.lanes == 1 && dt.code != IR_HANDLE && at_literal(p, k) && ps_tis(p, ps_peekn(p, k + 1), ")")) {
      bool tint = ps_peekn(p, k)->kind == IR_TK_INT;
      if (tint || ir_dtype_is_float(dt)) {
        bool neg = ps_accept(p, "-");
        const ir_token *lt = ps_cur(p);
        pv x = ps_parse_number(p, neg);
        ps_expect(p, ")");
        ir_expr *e;
        if (ir_dtype_is_float(dt)) {
          e = ir_float(p->a, dt, x.e->kind == IR_INT_IMM ? (double)x.e->u.ival : x.e->u.fval);
        } else {
          if (!int_fits(x.e->u.ival, dt))
            ps_fail(p, lt, TS_ETYPE, "literal %lld is out of range for %s", (long long)x.e->u.ival,
                    ps_dts(dt, b1));
          e = ir_int(p->a, dt, x.e->u.ival);
        }
        return mkpv(CK(e), false, 1);
      }
    }
    pv *a;
    int n = ps_parse_args(p, ")", &a);
    need_nargs(p, t, n, 1);
    pv x = a[0];
    if (x.lit && (ir_dtype_is_float(dt) || x.e->kind == IR_INT_IMM) && dt.lanes == 1 &&
        (ir_dtype_is_float(dt) || ir_dtype_is_int(dt)) && !ir_dtype_is_float(x.e->dtype))
      return mkpv(ps_retype(p, t, x.e, dt), false, x.h);
    if (x.lit && ir_dtype_is_float(dt) && ir_dtype_is_float(x.e->dtype))
      return mkpv(ps_retype(p, t, x.e, dt), false, x.h);
    check_height(p, t, x.h + 1);
    return mkpv(CK(ir_cast(p->a, dt, x.e)), false, x.h + 1);
  }
  pv *a;
  int n = ps_parse_args(p, ")", &a);
  int h;
  if (ps_teq(p, t, "min") || ps_teq(p, t, "max")) {
    need_nargs(p, t, n, 2);
    pv r = mkbin(p, t, ps_teq(p, t, "min") ? IR_MIN : IR_MAX, a[0], a[1]);
    return r;
  }
  if (ps_teq(p, t, "select")) {
    need_nargs(p, t, n, 3);
    ps_need_bool(p, t, a[0], "select's condition");
    if (p->dsl && (!a[1].lit || !a[2].lit)) unify(p, t, &a[1], &a[2]);
    h = hmax(a[0].h, hmax(a[1].h, a[2].h)) + 1;
    check_height(p, t, h);
    return mkpv(CK(ir_select(p->a, a[0].e, a[1].e, a[2].e)), false, h);
  }
  ir_intrin op;
  if (intrin_of(p, t, &op)) {
    need_nargs(p, t, n, ir_intrin_nargs(op));
    if (p->dsl) {
      int typed = -1;
      for (int i = 0; i < n; i++)
        if (!a[i].lit) typed = i;
      bool float_only = op != IR_ABS && op != IR_FMA;
      if (typed < 0) {
        /* all literals: default to f32 for float math, else the first one's */
        ir_dtype want = float_only || ir_dtype_is_float(a[0].e->dtype) ? ir_dt(IR_F32) : a[0].e->dtype;
        for (int i = 0; i < n; i++)
          if (ir_dtype_is_float(a[i].e->dtype)) want = a[i].e->dtype;
        for (int i = 0; i < n; i++) {
          a[i].e = ps_retype(p, t, a[i].e, want);
          a[i].lit = false;
        }
      } else {
        for (int i = 0; i < n; i++)
          if (i != typed) unify(p, t, &a[i], &a[typed]);
      }
      if (float_only && !ir_dtype_is_float(a[0].e->dtype))
        ps_fail(p, t, TS_ETYPE, "'%s' needs a float argument, not %s (write a cast)", ir_intrin_name(op),
                ps_dts(a[0].e->dtype, b1));
      if (a[0].e->dtype.code == IR_BOOL)
        ps_fail(p, t, TS_ETYPE, "'%s' of bool", ir_intrin_name(op));
    }
    ir_expr **e = ps_exprs_of(p, a, n, &h);
    check_height(p, t, h + 1);
    return mkpv(CK(ir_call(p->a, op, a[0].e->dtype, n, e)), false, h + 1);
  }
  if (ps_teq(p, t, "ramp")) {
    need_nargs(p, t, n, 3);
    int lanes = lanes_arg(p, t, a[2]);
    if (p->dsl) unify(p, t, &a[0], &a[1]);
    h = hmax(a[0].h, a[1].h) + 1;
    check_height(p, t, h);
    return mkpv(CK(ir_ramp(p->a, a[0].e, a[1].e, lanes)), false, h);
  }
  if (ps_teq(p, t, "broadcast")) {
    need_nargs(p, t, n, 2);
    int lanes = lanes_arg(p, t, a[1]);
    check_height(p, t, a[0].h + 1);
    return mkpv(CK(ir_broadcast(p->a, a[0].e, lanes)), false, a[0].h + 1);
  }
  ps_fail(p, t, TS_ENOTFOUND, "unknown function '%.*s'", (int)(t->len > 64 ? 64 : t->len),
          p->lx.src + t->pos);
}

/* ---- name resolution ------------------------------------------------------- */

ent *ps_scope_find(P *p, const ir_token *t, int kind) {
  for (int i = p->nsc - 1; i >= 0; i--)
    if (p->sc[i].kind == kind && ps_teq(p, t, p->sc[i].name)) return &p->sc[i];
  return NULL;
}

void ps_scope_push(P *p, const char *name, int kind, void *ptr) {
  PUSH(p->sc, p->nsc, p->capsc, ((ent){name, kind, ptr}));
}

ktensor *ps_ktensor_find(P *p, const ir_token *t) {
  for (int i = 0; i < p->nkt; i++)
    if (ps_teq(p, t, p->kts[i].name)) return &p->kts[i];
  return NULL;
}

ir_var *ps_ksym_find(P *p, const ir_token *t) {
  for (int i = 0; i < p->nsyms; i++)
    if (ps_teq(p, t, p->syms[i]->name)) return p->syms[i];
  return NULL;
}

int ps_kvar_find(P *p, const ir_token *t) {
  for (int i = 0; i < p->nkv; i++)
    if (ps_teq(p, t, p->kvs[i].name)) return i;
  return -1;
}

bool ps_is_func_name(P *p, const ir_token *t) {
  ir_dtype dt;
  ir_intrin op;
  return ps_tok_dtype(p, t, &dt) || intrin_of(p, t, &op) || ps_teq(p, t, "min") || ps_teq(p, t, "max") ||
         ps_teq(p, t, "select") || ps_teq(p, t, "ramp") || ps_teq(p, t, "broadcast") ||
         ps_teq(p, t, "call_extern") || ps_teq(p, t, "reinterpret") || ps_teq(p, t, "access_ptr");
}

int ps_kvar_new(P *p, const ir_token *t, int lhs_dim) {
  kvar v;
  memset(&v, 0, sizeof v);
  v.name = ps_tname(p, t);
  v.tok = t;
  v.lhs_dim = lhs_dim;
  v.lv = CK(ir_var_new(p->a, v.name, ir_dt(IR_I64)));
  v.iv = CK(ir_var_new(p->a, CK(ts_arena_printf(p->a, "v%s", v.name)), ir_dt(IR_I64)));
  PUSH(p->kvs, p->nkv, p->capkv, v);
  return p->nkv - 1;
}

static pv parse_name(P *p) {
  const ir_token *t = ps_next(p);
  if (!p->dsl) {
    ent *e = ps_scope_find(p, t, E_VAR);
    if (e) return mkpv(CK(ir_var_ref(p->a, e->ptr)), false, 1);
  } else {
    if (p->m == M_BODY) {
      int k = ps_kvar_find(p, t);
      if (k >= 0) return mkpv(CK(ir_var_ref(p->a, p->kvs[k].iv)), false, 1);
    }
    ir_var *s = ps_ksym_find(p, t);
    if (s) return mkpv(CK(ir_var_ref(p->a, s)), false, 1);
    if (ps_ktensor_find(p, t))
      ps_fail(p, t, TS_ESHAPE, "'%.*s' is a tensor; index it as %.*s[...]", (int)t->len,
              p->lx.src + t->pos, (int)t->len, p->lx.src + t->pos);
  }
  if (ps_teq(p, t, "true") || ps_teq(p, t, "false")) return mkpv(CK(ir_bool(p->a, ps_teq(p, t, "true"))), false, 1);
  double v;
  ir_dtype dt;
  bool typed;
  if (special_float(p, t, &v, &dt, &typed)) {
    p->i--;
    return ps_parse_number(p, false);
  }
  if (p->dsl) {
    const char *s = p->lx.src + t->pos;
    if (p->m == M_SHAPE && !ps_is_func_name(p, t)) {
      ir_var *sv = CK(ir_var_new(p->a, ps_tname(p, t), ir_dt(IR_I64)));
      PUSH(p->syms, p->nsyms, p->capsyms, sv);
      return mkpv(CK(ir_var_ref(p->a, sv)), false, 1);
    }
    if (p->m == M_BODY && s[0] >= 'a' && s[0] <= 'z' && !ps_is_func_name(p, t)) {
      int k = ps_kvar_new(p, t, -1);
      return mkpv(CK(ir_var_ref(p->a, p->kvs[k].iv)), false, 1);
    }
  }
  ps_fail(p, t, TS_ENOTFOUND, "unknown identifier '%.*s'", (int)(t->len > 64 ? 64 : t->len),
          p->lx.src + t->pos);
}

static ir_buffer *buffer_named(P *p, const ir_token *t) {
  ir_buffer *b = NULL;
  if (p->dsl) {
    ktensor *k = ps_ktensor_find(p, t);
    if (k) b = k->buf;
  } else {
    ent *e = ps_scope_find(p, t, E_BUF);
    if (e) b = e->ptr;
  }
  if (!b)
    ps_fail(p, t, TS_ENOTFOUND, "unknown buffer '%.*s'", (int)(t->len > 64 ? 64 : t->len),
            p->lx.src + t->pos);
  return b;
}

int ps_parse_indices(P *p, const ir_token *t, const ir_buffer *b, pv **a) {
  if (!b)
    ps_fail(p, t, TS_ENOTFOUND, "unknown tensor '%.*s'", (int)(t->len > 64 ? 64 : t->len), p->lx.src + t->pos);
  ps_expect(p, "[");
  int n = ps_parse_args(p, "]", a);
  if (n != b->ndim)
    ps_fail(p, t, TS_ESHAPE, "'%s' has %d dimension%s but is indexed with %d", b->name, b->ndim,
            b->ndim == 1 ? "" : "s", n);
  return n;
}

static pv parse_load(P *p) {
  const ir_token *t = ps_next(p);
  ir_buffer *b = NULL;
  if (p->dsl) {
    ktensor *k = p->m == M_BODY ? ps_ktensor_find(p, t) : NULL;
    if (k) {
      b = k->buf;
      if (!b || (k->role == R_TMP && !k->written))
        ps_fail(p, t, TS_ENOTFOUND, "'%s' is read before it is written", k->name);
    } else if (p->m != M_BODY && ps_ktensor_find(p, t)) {
      ps_fail(p, t, TS_EPARSE, "a tensor cannot appear in a shape or range");
    }
  } else {
    ent *e = ps_scope_find(p, t, E_BUF);
    if (e) b = e->ptr;
  }
  pv *a;
  int n = ps_parse_indices(p, t, b, &a);
  for (int i = 0; i < n; i++) {
    ps_need_int(p, t, a[i], "an index");
    if (p->dsl && a[i].e->kind == IR_VAR) {
      for (int k = 0; k < p->nkv; k++)
        if (p->kvs[k].iv == a[i].e->u.var) {
          bare bb = {k, b->shape[i], t, b, i};
          PUSH(p->bares, p->nbare, p->capbare, bb);
          if (!p->kvs[k].bare_ext) p->kvs[k].bare_ext = b->shape[i];
        }
    }
  }
  int h;
  ir_expr **e = ps_exprs_of(p, a, n, &h);
  check_height(p, t, h + 1);
  return mkpv(CK(ir_load(p->a, b, n, e)), false, h + 1);
}

static pv parse_primary(P *p) {
  const ir_token *t = ps_cur(p);
  if (t->kind == IR_TK_INT || t->kind == IR_TK_FLOAT) return ps_parse_number(p, false);
  if (t->kind == IR_TK_STR) {
    ps_next(p);
    return mkpv(CK(ir_str(p->a, t->str)), false, 1);
  }
  if (ps_accept(p, "(")) {
    pv x = ps_parse_expr(p);
    ps_expect(p, ")");
    return x;
  }
  if (t->kind == IR_TK_IDENT) {
    const ir_token *n1 = ps_peekn(p, 1);
    if (ps_tis(p, n1, "(")) return parse_call(p);
    if (ps_tis(p, n1, "[")) return parse_load(p);
    return parse_name(p);
  }
  ps_fail(p, t, TS_EPARSE, "expected an expression but found %s", ps_describe(p, t));
}

void ps_enter(P *p) {
  if (++p->depth > MAX_DEPTH) ps_fail(p, ps_cur(p), TS_EPARSE, "nesting is too deep (limit %d)", MAX_DEPTH);
}

static pv parse_unary(P *p) {
  ps_enter(p);
  const ir_token *t = ps_cur(p);
  pv r;
  if (ps_accept(p, "-")) {
    if (at_literal(p, 0)) {
      r = ps_parse_number(p, true);
    } else {
      pv x = parse_unary(p);
      char b1[16];
      if (p->dsl && !x.lit && x.e->dtype.code == IR_BOOL)
        ps_fail(p, t, TS_ETYPE, "negation of %s", ps_dts(x.e->dtype, b1));
      ir_expr *zero = ir_dtype_is_float(x.e->dtype) ? ir_float(p->a, x.e->dtype, 0.0)
                                                     : ir_int(p->a, x.e->dtype, 0);
      check_height(p, t, x.h + 1);
      r = mkpv(CK(ir_binop(p->a, IR_SUB, CK(zero), x.e)), x.lit, x.h + 1);
    }
  } else if (ps_accept(p, "!")) {
    pv x = parse_unary(p);
    ps_need_bool(p, t, x, "operand of '!'");
    check_height(p, t, x.h + 1);
    r = mkpv(CK(ir_not(p->a, x.e)), false, x.h + 1);
  } else {
    r = parse_primary(p);
  }
  p->depth--;
  return r;
}

static const struct {
  const char *s;
  ir_expr_kind k;
  int lvl;
} binops[] = {
    {"||", IR_OR, 0}, {"&&", IR_AND, 1}, {"==", IR_EQ, 2},       {"!=", IR_NE, 2},
    {"<", IR_LT, 3},  {"<=", IR_LE, 3},  {">", IR_GT, 3},        {">=", IR_GE, 3},
    {"+", IR_ADD, 4}, {"-", IR_SUB, 4},  {"*", IR_MUL, 5},       {"/", IR_DIV, 5},
    {"//", IR_FLOORDIV, 5},              {"%", IR_FLOORMOD, 5},
};

static pv parse_bin(P *p, int lvl) {
  if (lvl == 6) return parse_unary(p);
  pv x = parse_bin(p, lvl + 1);
  for (;;) {
    const ir_token *t = ps_cur(p);
    if (t->kind != IR_TK_PUNCT) return x;
    size_t k;
    for (k = 0; k < sizeof binops / sizeof binops[0]; k++)
      if (binops[k].lvl == lvl && ps_tis(p, t, binops[k].s)) break;
    if (k == sizeof binops / sizeof binops[0]) return x;
    ps_next(p);
    pv y = parse_bin(p, lvl + 1);
    x = mkbin(p, t, binops[k].k, x, y);
  }
}

pv ps_parse_expr(P *p) { return parse_bin(p, 0); }

/* A typed (non-literal) expression: DSL literals take their default dtype. */
ir_expr *ps_parse_int_expr(P *p, const char *what) {
  const ir_token *t = ps_cur(p);
  pv x = ps_parse_expr(p);
  ps_need_int(p, t, x, what);
  return x.e;
}

/* ---- annotations (script) ---------------------------------------------------- */

void ps_parse_annots(P *p, int *n, ir_annot **out) {
  ps_expect(p, "{");
  int cap = 0;
  ir_annot *v = NULL;
  int k = 0;
  while (!ps_accept(p, "}")) {
    if (k) {
      ps_expect(p, ",");
      if (ps_accept(p, "}")) break;
    }
    const ir_token *kt = ps_cur(p);
    ir_annot an;
    memset(&an, 0, sizeof an);
    if (kt->kind == IR_TK_STR) an.key = kt->str;
    else if (kt->kind == IR_TK_IDENT) an.key = ps_tname(p, kt);
    else ps_fail(p, kt, TS_EPARSE, "expected an annotation key but found %s", ps_describe(p, kt));
    ps_next(p);
    for (int i = 0; i < k; i++)
      if (!strcmp(v[i].key, an.key)) ps_fail(p, kt, TS_EPARSE, "duplicate annotation key '%s'", an.key);
    ps_expect(p, "=");
    const ir_token *vt = ps_cur(p);
    if (vt->kind == IR_TK_STR) {
      an.kind = IR_ANN_STR;
      an.v.s = vt->str;
      ps_next(p);
    } else if (vt->kind == IR_TK_IDENT && ps_teq(p, vt, "expr") && ps_tis(p, ps_peekn(p, 1), "(")) {
      ps_next(p);
      ps_next(p);
      an.kind = IR_ANN_EXPR;
      an.v.e = ps_parse_expr(p).e;
      ps_expect(p, ")");
    } else {
      bool neg = ps_accept(p, "-");
      if (!at_literal(p, 0))
        ps_fail(p, ps_cur(p), TS_EPARSE, "expected an annotation value but found %s", ps_describe(p, ps_cur(p)));
      pv x = ps_parse_number(p, neg);
      if (x.e->kind == IR_INT_IMM) {
        an.kind = IR_ANN_INT;
        an.v.i = x.e->u.ival;
      } else {
        an.kind = IR_ANN_FLOAT;
        an.v.f = x.e->u.fval;
      }
    }
    PUSH(v, k, cap, an);
  }
  *n = k;
  *out = v;
}

/* =============================================================================
 * Entry points
 * ========================================================================== */

static void add_func(P *p, const ir_token *nt, ir_func *f) {
  p->nfuncs++;
  if (!p->mod) {
    if (p->nfuncs > 1) ps_fail(p, nt, TS_EPARSE, "expected exactly one function, found a second one");
    p->first = f;
    return;
  }
  if (ir_module_get(p->mod, f->name)) ps_fail(p, nt, TS_EPARSE, "duplicate function '%s'", f->name);
  if (ir_module_add(p->mod, f) != TS_OK) ps_oom(p);
}

static ts_status run(P *p) {
  int code = setjmp(p->jb);
  if (code) return (ts_status)code;
  while (ps_cur(p)->kind != IR_TK_EOF) {
    const ir_token *t = ps_cur(p);
    const ir_token *nt = ps_peekn(p, 1);
    ir_func *f;
    if (t->kind == IR_TK_IDENT && ps_teq(p, t, "kernel")) f = ps_parse_kernel(p);
    else if (t->kind == IR_TK_IDENT && ps_teq(p, t, "func")) f = ps_parse_func(p);
    else ps_fail(p, t, TS_EPARSE, "expected 'kernel' or 'func' but found %s", ps_describe(p, t));
    ts_diag sd;
    ts_diag_clear(&sd);
    if (ir_func_check_sizes(f, &sd)) ps_fail(p, nt, sd.code, "%s", sd.msg);
    add_func(p, nt, f);
  }
  if (!p->mod && p->nfuncs == 0) ps_fail(p, ps_cur(p), TS_EPARSE, "expected a 'kernel' or 'func'");
  return TS_OK;
}

static ts_status parse_all(ts_arena *a, ir_module *m, const char *src, size_t len,
                           const char *filename, ir_func **one, ts_diag *d) {
  if (!a || (!src && len)) return ts_diag_set(d, TS_EINVAL, "ir_parse: NULL argument");
  P *p = ts_calloc(1, sizeof *p);
  if (!p) return ts_diag_set(d, TS_ENOMEM, "out of memory while parsing");
  p->a = a;
  p->lx.src = src ? src : "";
  p->lx.len = len;
  p->lx.file = filename ? filename : "<input>";
  p->d = d;
  p->mod = m;
  ts_status st = ir_lex(a, &p->lx, &p->t, &p->nt, d);
  if (st == TS_OK) st = run(p);
  if (st == TS_OK && one) *one = p->first;
  ts_free(p->t);
  ts_free(p);
  return st;
}

ts_status ir_parse_module(ir_module *m, const char *src, size_t len, const char *filename,
                          ts_diag *d) {
  if (!m) return ts_diag_set(d, TS_EINVAL, "ir_parse_module: NULL module");
  return parse_all(m->arena, m, src, len, filename, NULL, d);
}

ts_status ir_parse_func(ts_arena *a, const char *src, size_t len, const char *filename,
                        ir_func **out, ts_diag *d) {
  if (!out) return ts_diag_set(d, TS_EINVAL, "ir_parse_func: NULL out");
  *out = NULL;
  return parse_all(a, NULL, src, len, filename, out, d);
}

