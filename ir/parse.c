/* parse.c — the two text front-ends of docs/SCRIPT.md over one lexer:
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
#include "parse.h"

#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>

#include "arith/arith.h"
#include "lex.h"

#define MAX_DEPTH 256   /* nesting of parentheses / unary ops / statements */
#define MAX_HEIGHT 1024 /* height of one expression tree */

/* ---- parser state ---------------------------------------------------------- */

enum { E_VAR, E_BUF };
typedef struct ent {
  const char *name;
  int kind;
  void *ptr;
} ent;

/* What identifiers may mean while parsing an expression. */
typedef enum {
  M_SCRIPT, /* names resolve through the scope stack */
  M_SHAPE,  /* DSL shape: literals and syms; a new name becomes a sym */
  M_RANGE,  /* DSL for-range bound: literals and existing syms */
  M_BODY,   /* DSL right-hand side: tensors, syms, index vars (new ones are reduction vars) */
} pmode;

enum { R_IN, R_OUT, R_TMP };
typedef struct ktensor {
  const char *name;
  ir_buffer *buf; /* NULL for an intermediate whose shape is not yet inferred */
  int role;
  bool written;
  const ir_token *decl;
} ktensor;

typedef struct kvar { /* a DSL index variable of the current statement */
  const char *name;
  const ir_token *tok;
  ir_var *iv, *lv;  /* iter var (vi) used in the block; loop var (i) */
  int lhs_dim;      /* -1 for reduction vars */
  ir_expr *min, *ext;
  bool ranged, from_for;
  ir_expr *bare_ext; /* extent of the first dimension it indexes bare */
} kvar;

typedef struct bare {
  int var;
  ir_expr *ext;
  const ir_token *tok;
  ir_buffer *buf;
  int dim;
} bare;

typedef struct P {
  ts_arena *a;
  ir_lexer lx;
  ir_token *t;
  int nt, i;
  ts_diag *d;
  jmp_buf jb;
  int depth;
  bool dsl;
  pmode m;
  char desc[80];
  /* script scope stack (innermost last) */
  ent *sc;
  int nsc, capsc;
  /* DSL kernel state */
  ktensor *kts;
  int nkt, capkt;
  ir_var **syms;
  int nsyms, capsyms;
  kvar *kvs;
  int nkv, capkv;
  bare *bares;
  int nbare, capbare;
  /* results */
  ir_module *mod;
  ir_func *first;
  int nfuncs;
} P;

/* An expression under construction: lit marks a DSL literal-only subtree
 * whose dtype is not yet fixed (it adopts the other operand's). */
typedef struct pv {
  ir_expr *e;
  bool lit;
  int h;
} pv;

/* ---- errors, memory, tokens -------------------------------------------------- */

static _Noreturn void fail(P *p, const ir_token *t, ts_status code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static _Noreturn void fail(P *p, const ir_token *t, ts_status code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  ir_lex_verror_at(&p->lx, t->pos, p->d, code, fmt, ap);
  va_end(ap);
  longjmp(p->jb, (int)code);
}

static _Noreturn void oom(P *p) {
  ts_diag_set(p->d, TS_ENOMEM, "out of memory while parsing");
  longjmp(p->jb, (int)TS_ENOMEM);
}

static void *chk(P *p, void *x) {
  if (!x) oom(p);
  return x;
}
#define CK(x) ((__typeof__(x))chk(p, (x)))

static void *grow(P *p, void *arr, int n, int *cap, size_t sz) {
  if (n < *cap) return arr;
  int nc = *cap ? *cap * 2 : 8;
  void *na = chk(p, ts_arena_alloc(p->a, sz * (size_t)nc));
  if (n) memcpy(na, arr, sz * (size_t)n);
  *cap = nc;
  return na;
}
#define PUSH(arr, n, cap, val)                                   \
  do {                                                           \
    (arr) = grow(p, (arr), (n), &(cap), sizeof *(arr));          \
    (arr)[(n)++] = (val);                                        \
  } while (0)

static const ir_token *cur(P *p) { return &p->t[p->i]; }
static const ir_token *peekn(P *p, int k) {
  int j = p->i + k;
  return &p->t[j < p->nt ? j : p->nt - 1];
}
static const ir_token *next(P *p) {
  const ir_token *t = cur(p);
  if (t->kind != IR_TK_EOF) p->i++;
  return t;
}
static bool tis(P *p, const ir_token *t, const char *s) { return ir_tok_is(&p->lx, t, s); }
static bool is(P *p, const char *s) { return tis(p, cur(p), s); }
static bool accept(P *p, const char *s) {
  if (!is(p, s)) return false;
  p->i++;
  return true;
}

static const char *describe(P *p, const ir_token *t) {
  if (t->kind == IR_TK_EOF) return "end of input";
  if (t->kind == IR_TK_STR) return "a string";
  size_t n = t->len > 40 ? 40 : t->len;
  snprintf(p->desc, sizeof p->desc, "'%.*s%s'", (int)n, p->lx.src + t->pos, t->len > n ? "..." : "");
  return p->desc;
}

static const ir_token *expect(P *p, const char *s) {
  if (!is(p, s)) fail(p, cur(p), TS_EPARSE, "expected '%s' but found %s", s, describe(p, cur(p)));
  return next(p);
}

static const ir_token *expect_ident(P *p, const char *what) {
  if (cur(p)->kind != IR_TK_IDENT)
    fail(p, cur(p), TS_EPARSE, "expected %s but found %s", what, describe(p, cur(p)));
  return next(p);
}

static const char *tname(P *p, const ir_token *t) {
  return CK(ts_arena_strndup(p->a, p->lx.src + t->pos, t->len));
}

static bool teq(P *p, const ir_token *t, const char *name) {
  size_t n = strlen(name);
  return t->len == n && memcmp(p->lx.src + t->pos, name, n) == 0;
}

static const char *dts(ir_dtype t, char *buf) { return ir_dtype_str(t, buf, 16); }

static bool tok_dtype(P *p, const ir_token *t, ir_dtype *out) {
  return t->kind == IR_TK_IDENT && ir_lex_dtype(p->lx.src + t->pos, t->len, out);
}

static ir_dtype expect_dtype(P *p) {
  ir_dtype dt;
  if (!tok_dtype(p, cur(p), &dt))
    fail(p, cur(p), TS_EPARSE, "expected a dtype (f32, i64, ...) but found %s", describe(p, cur(p)));
  next(p);
  return dt;
}

/* ---- small folds (kept local so parsing needs nothing but constructors) ---- */

static ir_expr *fold_add(P *p, ir_expr *x, ir_expr *y) {
  int64_t a, b;
  if (ir_as_int(x, &a) && ir_as_int(y, &b) && ir_dtype_eq(x->dtype, y->dtype))
    return CK(ir_int(p->a, x->dtype, a + b));
  if (ir_as_int(x, &a) && a == 0) return y;
  if (ir_as_int(y, &b) && b == 0) return x;
  return CK(ir_binop(p->a, IR_ADD, x, y));
}

static ir_expr *fold_sub(P *p, ir_expr *x, ir_expr *y) {
  int64_t a, b;
  if (ir_as_int(x, &a) && ir_as_int(y, &b) && ir_dtype_eq(x->dtype, y->dtype))
    return CK(ir_int(p->a, x->dtype, a - b));
  if (ir_as_int(y, &b) && b == 0) return x;
  return CK(ir_binop(p->a, IR_SUB, x, y));
}

static bool same_expr(const ir_expr *x, const ir_expr *y) {
  if (x == y) return true;
  if (!x || !y || x->kind != y->kind || !ir_dtype_eq(x->dtype, y->dtype)) return false;
  switch (x->kind) {
  case IR_INT_IMM: return x->u.ival == y->u.ival;
  case IR_FLOAT_IMM: return x->u.fval == y->u.fval;
  case IR_VAR: return x->u.var == y->u.var;
  default:
    if (ir_is_binop(x->kind)) return same_expr(x->u.bin.a, y->u.bin.a) && same_expr(x->u.bin.b, y->u.bin.b);
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

static pv parse_expr(P *p);

static pv mkpv(ir_expr *e, bool lit, int h) { return (pv){e, lit, h}; }

/* Gives a literal-only subtree the dtype dt (DSL literal adoption). */
static ir_expr *retype(P *p, const ir_token *t, ir_expr *e, ir_dtype dt) {
  char b1[16];
  if (e->kind == IR_INT_IMM) {
    if (ir_dtype_is_float(dt)) return CK(ir_float(p->a, dt, (double)e->u.ival));
    if (!ir_dtype_is_int(dt) || dt.lanes != 1)
      fail(p, t, TS_ETYPE, "integer literal used where %s is expected", dts(dt, b1));
    if (!int_fits(e->u.ival, dt))
      fail(p, t, TS_ETYPE, "literal %lld is out of range for %s", (long long)e->u.ival, dts(dt, b1));
    return CK(ir_int(p->a, dt, e->u.ival));
  }
  if (e->kind == IR_FLOAT_IMM) {
    if (!ir_dtype_is_float(dt) || dt.lanes != 1)
      fail(p, t, TS_ETYPE, "float literal used where %s is expected (write a cast)", dts(dt, b1));
    return CK(ir_float(p->a, dt, e->u.fval));
  }
  if (ir_is_binop(e->kind))
    return CK(ir_binop(p->a, e->kind, retype(p, t, e->u.bin.a, dt), retype(p, t, e->u.bin.b, dt)));
  return e;
}

/* DSL: makes x and y the same dtype or reports a type error at t. */
static void unify(P *p, const ir_token *t, pv *x, pv *y) {
  char b1[16], b2[16];
  if (!p->dsl) return;
  if (x->lit && y->lit) {
    bool fx = ir_dtype_is_float(x->e->dtype), fy = ir_dtype_is_float(y->e->dtype);
    if (fx && !fy) y->e = retype(p, t, y->e, x->e->dtype);
    if (fy && !fx) x->e = retype(p, t, x->e, y->e->dtype);
    return;
  }
  if (x->lit) {
    x->e = retype(p, t, x->e, y->e->dtype);
    x->lit = false;
    return;
  }
  if (y->lit) {
    y->e = retype(p, t, y->e, x->e->dtype);
    y->lit = false;
    return;
  }
  if (!ir_dtype_eq(x->e->dtype, y->e->dtype))
    fail(p, t, TS_ETYPE, "mismatched dtypes %s and %s (write a cast)", dts(x->e->dtype, b1),
         dts(y->e->dtype, b2));
}

static int hmax(int a, int b) { return a > b ? a : b; }

static void check_height(P *p, const ir_token *t, int h) {
  if (h > MAX_HEIGHT) fail(p, t, TS_EPARSE, "expression is too large (height limit %d)", MAX_HEIGHT);
}

static void need_bool(P *p, const ir_token *t, pv x, const char *what) {
  char b1[16];
  if (p->dsl && (x.lit || x.e->dtype.code != IR_BOOL))
    fail(p, t, TS_ETYPE, "%s must be bool, not %s", what, x.lit ? "a number" : dts(x.e->dtype, b1));
}

static void need_int(P *p, const ir_token *t, pv x, const char *what) {
  char b1[16];
  if (!ir_dtype_is_int(x.e->dtype))
    fail(p, t, TS_ETYPE, "%s must be an integer, not %s", what, dts(x.e->dtype, b1));
}

static pv mkbin(P *p, const ir_token *op, ir_expr_kind k, pv x, pv y) {
  char b1[16];
  int h = hmax(x.h, y.h) + 1;
  check_height(p, op, h);
  bool lit = false;
  if (p->dsl) {
    if (k == IR_AND || k == IR_OR) {
      need_bool(p, op, x, "operand of logical operator");
      need_bool(p, op, y, "operand of logical operator");
    } else {
      if (!x.lit && x.e->dtype.code == IR_BOOL && !ir_is_cmp(k))
        fail(p, op, TS_ETYPE, "arithmetic on %s", dts(x.e->dtype, b1));
      if (!y.lit && y.e->dtype.code == IR_BOOL && !ir_is_cmp(k))
        fail(p, op, TS_ETYPE, "arithmetic on %s", dts(y.e->dtype, b1));
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
static pv parse_number(P *p, bool neg) {
  const ir_token *t = next(p);
  char b1[16];
  if (t->kind == IR_TK_INT) {
    int64_t v;
    if (neg) {
      if (t->ival > (uint64_t)INT64_MAX + 1) fail(p, t, TS_EPARSE, "integer literal is too large");
      v = t->ival == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)t->ival;
    } else {
      if (t->ival > (uint64_t)INT64_MAX) fail(p, t, TS_EPARSE, "integer literal is too large");
      v = (int64_t)t->ival;
    }
    if (t->has_dt) {
      if (!int_fits(v, t->dt))
        fail(p, t, TS_ETYPE, "literal %lld is out of range for %s", (long long)v, dts(t->dt, b1));
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
  fail(p, t, TS_EPARSE, "expected a number but found %s", describe(p, t));
}

static bool at_literal(P *p, int k) {
  const ir_token *t = peekn(p, k);
  double v;
  ir_dtype dt;
  bool typed;
  return t->kind == IR_TK_INT || t->kind == IR_TK_FLOAT ||
         (special_float(p, t, &v, &dt, &typed) && !tis(p, peekn(p, k + 1), "(") &&
          !tis(p, peekn(p, k + 1), "["));
}

/* Comma-separated expressions up to the closing token (consumed). */
static int parse_args(P *p, const char *close, pv **out) {
  pv *v = NULL;
  int n = 0, cap = 0;
  if (!accept(p, close)) {
    for (;;) {
      PUSH(v, n, cap, parse_expr(p));
      if (accept(p, close)) break;
      expect(p, ",");
    }
  }
  *out = v;
  return n;
}

static ir_expr **exprs_of(P *p, pv *v, int n, int *h) {
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
    if (teq(p, t, ir_intrin_name((ir_intrin)i))) {
      *op = (ir_intrin)i;
      return true;
    }
  return false;
}

static void need_nargs(P *p, const ir_token *t, int n, int want) {
  if (n != want)
    fail(p, t, TS_EPARSE, "'%.*s' takes %d argument%s, not %d", (int)t->len, p->lx.src + t->pos,
         want, want == 1 ? "" : "s", n);
}

static int lanes_arg(P *p, const ir_token *t, pv x) {
  int64_t v;
  if (!ir_as_int(x.e, &v) || v < 1 || v > 65535)
    fail(p, t, TS_EPARSE, "lanes must be an integer literal in [1, 65535]");
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
  if (teq(p, t, "call_extern")) {
    const ir_token *nt = next(p);
    if (nt->kind != IR_TK_STR)
      fail(p, nt, TS_EPARSE, "call_extern needs the callee name as a string, found %s", describe(p, nt));
    expect(p, ",");
    ir_dtype rt = expect_dtype(p);
    pv *a = NULL;
    int n = 0, cap = 0;
    while (accept(p, ",")) PUSH(a, n, cap, parse_expr(p));
    expect(p, ")");
    for (int i = 0; i < n; i++)
      if (a[i].lit && p->dsl)
        fail(p, t, TS_ETYPE, "argument %d of call_extern is an untyped literal; write a cast", i);
    ir_expr **e = exprs_of(p, a, n, &h);
    check_height(p, t, h + 1);
    return mkpv(CK(ir_call_extern(p->a, nt->str, rt, n, e)), false, h + 1);
  }
  if (teq(p, t, "reinterpret")) {
    ir_dtype rt = expect_dtype(p);
    expect(p, ",");
    pv x = parse_expr(p);
    expect(p, ")");
    if (x.lit && p->dsl) fail(p, t, TS_ETYPE, "reinterpret of an untyped literal; write a cast");
    if ((long)ir_dtype_bits(rt) * rt.lanes != (long)ir_dtype_bits(x.e->dtype) * x.e->dtype.lanes)
      fail(p, t, TS_ETYPE, "reinterpret to %s from %s changes the number of bits", dts(rt, b1),
           ir_dtype_str(x.e->dtype, (char[16]){0}, 16));
    check_height(p, t, x.h + 1);
    return mkpv(CK(ir_reinterpret(p->a, rt, x.e)), false, x.h + 1);
  }
  /* access_ptr */
  const ir_token *bt = next(p);
  ir_buffer *b = buffer_named(p, bt);
  expect(p, ",");
  pv off = parse_expr(p);
  need_int(p, t, off, "access_ptr's offset");
  expect(p, ",");
  const ir_token *rt = cur(p);
  pv rw = parse_expr(p);
  expect(p, ")");
  int64_t m;
  if (!ir_as_int(rw.e, &m) || m < 0 || m > 3)
    fail(p, rt, TS_EPARSE, "access_ptr's access mask must be 0..3 (1 read, 2 write)");
  if (off.lit) off.e = retype(p, t, off.e, ir_dt(IR_I64));
  check_height(p, t, off.h + 1);
  return mkpv(CK(ir_access_ptr(p->a, b, off.e, (int)m)), false, off.h + 1);
}

static pv parse_call(P *p) {
  const ir_token *t = next(p);
  char b1[16];
  ir_dtype dt;
  expect(p, "(");
  if (teq(p, t, "call_extern") || teq(p, t, "reinterpret") || teq(p, t, "access_ptr"))
    return parse_target_call(p, t);
  if (tok_dtype(p, t, &dt)) {
    /* cast; directly applied to a literal it makes a literal of that dtype */
    int k = is(p, "-") ? 1 : 0;
    if (dt.lanes == 1 && dt.code != IR_HANDLE && at_literal(p, k) && tis(p, peekn(p, k + 1), ")")) {
      bool tint = peekn(p, k)->kind == IR_TK_INT;
      if (tint || ir_dtype_is_float(dt)) {
        bool neg = accept(p, "-");
        const ir_token *lt = cur(p);
        pv x = parse_number(p, neg);
        expect(p, ")");
        ir_expr *e;
        if (ir_dtype_is_float(dt)) {
          e = ir_float(p->a, dt, x.e->kind == IR_INT_IMM ? (double)x.e->u.ival : x.e->u.fval);
        } else {
          if (!int_fits(x.e->u.ival, dt))
            fail(p, lt, TS_ETYPE, "literal %lld is out of range for %s", (long long)x.e->u.ival,
                 dts(dt, b1));
          e = ir_int(p->a, dt, x.e->u.ival);
        }
        return mkpv(CK(e), false, 1);
      }
    }
    pv *a;
    int n = parse_args(p, ")", &a);
    need_nargs(p, t, n, 1);
    pv x = a[0];
    if (x.lit && (ir_dtype_is_float(dt) || x.e->kind == IR_INT_IMM) && dt.lanes == 1 &&
        (ir_dtype_is_float(dt) || ir_dtype_is_int(dt)) && !ir_dtype_is_float(x.e->dtype))
      return mkpv(retype(p, t, x.e, dt), false, x.h);
    if (x.lit && ir_dtype_is_float(dt) && ir_dtype_is_float(x.e->dtype))
      return mkpv(retype(p, t, x.e, dt), false, x.h);
    check_height(p, t, x.h + 1);
    return mkpv(CK(ir_cast(p->a, dt, x.e)), false, x.h + 1);
  }
  pv *a;
  int n = parse_args(p, ")", &a);
  int h;
  if (teq(p, t, "min") || teq(p, t, "max")) {
    need_nargs(p, t, n, 2);
    pv r = mkbin(p, t, teq(p, t, "min") ? IR_MIN : IR_MAX, a[0], a[1]);
    return r;
  }
  if (teq(p, t, "select")) {
    need_nargs(p, t, n, 3);
    need_bool(p, t, a[0], "select's condition");
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
          a[i].e = retype(p, t, a[i].e, want);
          a[i].lit = false;
        }
      } else {
        for (int i = 0; i < n; i++)
          if (i != typed) unify(p, t, &a[i], &a[typed]);
      }
      if (float_only && !ir_dtype_is_float(a[0].e->dtype))
        fail(p, t, TS_ETYPE, "'%s' needs a float argument, not %s (write a cast)", ir_intrin_name(op),
             dts(a[0].e->dtype, b1));
      if (a[0].e->dtype.code == IR_BOOL)
        fail(p, t, TS_ETYPE, "'%s' of bool", ir_intrin_name(op));
    }
    ir_expr **e = exprs_of(p, a, n, &h);
    check_height(p, t, h + 1);
    return mkpv(CK(ir_call(p->a, op, a[0].e->dtype, n, e)), false, h + 1);
  }
  if (teq(p, t, "ramp")) {
    need_nargs(p, t, n, 3);
    int lanes = lanes_arg(p, t, a[2]);
    if (p->dsl) unify(p, t, &a[0], &a[1]);
    h = hmax(a[0].h, a[1].h) + 1;
    check_height(p, t, h);
    return mkpv(CK(ir_ramp(p->a, a[0].e, a[1].e, lanes)), false, h);
  }
  if (teq(p, t, "broadcast")) {
    need_nargs(p, t, n, 2);
    int lanes = lanes_arg(p, t, a[1]);
    check_height(p, t, a[0].h + 1);
    return mkpv(CK(ir_broadcast(p->a, a[0].e, lanes)), false, a[0].h + 1);
  }
  fail(p, t, TS_ENOTFOUND, "unknown function '%.*s'", (int)(t->len > 64 ? 64 : t->len),
       p->lx.src + t->pos);
}

/* ---- name resolution ------------------------------------------------------- */

static ent *scope_find(P *p, const ir_token *t, int kind) {
  for (int i = p->nsc - 1; i >= 0; i--)
    if (p->sc[i].kind == kind && teq(p, t, p->sc[i].name)) return &p->sc[i];
  return NULL;
}

static void scope_push(P *p, const char *name, int kind, void *ptr) {
  PUSH(p->sc, p->nsc, p->capsc, ((ent){name, kind, ptr}));
}

static ktensor *ktensor_find(P *p, const ir_token *t) {
  for (int i = 0; i < p->nkt; i++)
    if (teq(p, t, p->kts[i].name)) return &p->kts[i];
  return NULL;
}

static ir_var *ksym_find(P *p, const ir_token *t) {
  for (int i = 0; i < p->nsyms; i++)
    if (teq(p, t, p->syms[i]->name)) return p->syms[i];
  return NULL;
}

static int kvar_find(P *p, const ir_token *t) {
  for (int i = 0; i < p->nkv; i++)
    if (teq(p, t, p->kvs[i].name)) return i;
  return -1;
}

static bool is_func_name(P *p, const ir_token *t) {
  ir_dtype dt;
  ir_intrin op;
  return tok_dtype(p, t, &dt) || intrin_of(p, t, &op) || teq(p, t, "min") || teq(p, t, "max") ||
         teq(p, t, "select") || teq(p, t, "ramp") || teq(p, t, "broadcast") ||
         teq(p, t, "call_extern") || teq(p, t, "reinterpret") || teq(p, t, "access_ptr");
}

static int kvar_new(P *p, const ir_token *t, int lhs_dim) {
  kvar v;
  memset(&v, 0, sizeof v);
  v.name = tname(p, t);
  v.tok = t;
  v.lhs_dim = lhs_dim;
  v.lv = CK(ir_var_new(p->a, v.name, ir_dt(IR_I64)));
  v.iv = CK(ir_var_new(p->a, CK(ts_arena_printf(p->a, "v%s", v.name)), ir_dt(IR_I64)));
  PUSH(p->kvs, p->nkv, p->capkv, v);
  return p->nkv - 1;
}

static pv parse_name(P *p) {
  const ir_token *t = next(p);
  if (!p->dsl) {
    ent *e = scope_find(p, t, E_VAR);
    if (e) return mkpv(CK(ir_var_ref(p->a, e->ptr)), false, 1);
  } else {
    if (p->m == M_BODY) {
      int k = kvar_find(p, t);
      if (k >= 0) return mkpv(CK(ir_var_ref(p->a, p->kvs[k].iv)), false, 1);
    }
    ir_var *s = ksym_find(p, t);
    if (s) return mkpv(CK(ir_var_ref(p->a, s)), false, 1);
    if (ktensor_find(p, t))
      fail(p, t, TS_ESHAPE, "'%.*s' is a tensor; index it as %.*s[...]", (int)t->len,
           p->lx.src + t->pos, (int)t->len, p->lx.src + t->pos);
  }
  if (teq(p, t, "true") || teq(p, t, "false")) return mkpv(CK(ir_bool(p->a, teq(p, t, "true"))), false, 1);
  double v;
  ir_dtype dt;
  bool typed;
  if (special_float(p, t, &v, &dt, &typed)) {
    p->i--;
    return parse_number(p, false);
  }
  if (p->dsl) {
    const char *s = p->lx.src + t->pos;
    if (p->m == M_SHAPE && !is_func_name(p, t)) {
      ir_var *sv = CK(ir_var_new(p->a, tname(p, t), ir_dt(IR_I64)));
      PUSH(p->syms, p->nsyms, p->capsyms, sv);
      return mkpv(CK(ir_var_ref(p->a, sv)), false, 1);
    }
    if (p->m == M_BODY && s[0] >= 'a' && s[0] <= 'z' && !is_func_name(p, t)) {
      int k = kvar_new(p, t, -1);
      return mkpv(CK(ir_var_ref(p->a, p->kvs[k].iv)), false, 1);
    }
  }
  fail(p, t, TS_ENOTFOUND, "unknown identifier '%.*s'", (int)(t->len > 64 ? 64 : t->len),
       p->lx.src + t->pos);
}

static ir_buffer *buffer_named(P *p, const ir_token *t) {
  ir_buffer *b = NULL;
  if (p->dsl) {
    ktensor *k = ktensor_find(p, t);
    if (k) b = k->buf;
  } else {
    ent *e = scope_find(p, t, E_BUF);
    if (e) b = e->ptr;
  }
  if (!b)
    fail(p, t, TS_ENOTFOUND, "unknown buffer '%.*s'", (int)(t->len > 64 ? 64 : t->len),
         p->lx.src + t->pos);
  return b;
}

static pv parse_load(P *p) {
  const ir_token *t = next(p);
  ir_buffer *b = NULL;
  if (p->dsl) {
    ktensor *k = p->m == M_BODY ? ktensor_find(p, t) : NULL;
    if (k) {
      b = k->buf;
      if (!b || (k->role == R_TMP && !k->written))
        fail(p, t, TS_ENOTFOUND, "'%s' is read before it is written", k->name);
    } else if (p->m != M_BODY && ktensor_find(p, t)) {
      fail(p, t, TS_EPARSE, "a tensor cannot appear in a shape or range");
    }
  } else {
    ent *e = scope_find(p, t, E_BUF);
    if (e) b = e->ptr;
  }
  if (!b)
    fail(p, t, TS_ENOTFOUND, "unknown tensor '%.*s'", (int)(t->len > 64 ? 64 : t->len),
         p->lx.src + t->pos);
  expect(p, "[");
  pv *a;
  int n = parse_args(p, "]", &a);
  if (n != b->ndim)
    fail(p, t, TS_ESHAPE, "'%s' has %d dimension%s but is indexed with %d", b->name, b->ndim,
         b->ndim == 1 ? "" : "s", n);
  for (int i = 0; i < n; i++) {
    need_int(p, t, a[i], "an index");
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
  ir_expr **e = exprs_of(p, a, n, &h);
  check_height(p, t, h + 1);
  return mkpv(CK(ir_load(p->a, b, n, e)), false, h + 1);
}

static pv parse_primary(P *p) {
  const ir_token *t = cur(p);
  if (t->kind == IR_TK_INT || t->kind == IR_TK_FLOAT) return parse_number(p, false);
  if (t->kind == IR_TK_STR) {
    next(p);
    return mkpv(CK(ir_str(p->a, t->str)), false, 1);
  }
  if (accept(p, "(")) {
    pv x = parse_expr(p);
    expect(p, ")");
    return x;
  }
  if (t->kind == IR_TK_IDENT) {
    const ir_token *n1 = peekn(p, 1);
    if (tis(p, n1, "(")) return parse_call(p);
    if (tis(p, n1, "[")) return parse_load(p);
    return parse_name(p);
  }
  fail(p, t, TS_EPARSE, "expected an expression but found %s", describe(p, t));
}

static void enter(P *p) {
  if (++p->depth > MAX_DEPTH) fail(p, cur(p), TS_EPARSE, "nesting is too deep (limit %d)", MAX_DEPTH);
}

static pv parse_unary(P *p) {
  enter(p);
  const ir_token *t = cur(p);
  pv r;
  if (accept(p, "-")) {
    if (at_literal(p, 0)) {
      r = parse_number(p, true);
    } else {
      pv x = parse_unary(p);
      char b1[16];
      if (p->dsl && !x.lit && x.e->dtype.code == IR_BOOL)
        fail(p, t, TS_ETYPE, "negation of %s", dts(x.e->dtype, b1));
      ir_expr *zero = ir_dtype_is_float(x.e->dtype) ? ir_float(p->a, x.e->dtype, 0.0)
                                                     : ir_int(p->a, x.e->dtype, 0);
      check_height(p, t, x.h + 1);
      r = mkpv(CK(ir_binop(p->a, IR_SUB, CK(zero), x.e)), x.lit, x.h + 1);
    }
  } else if (accept(p, "!")) {
    pv x = parse_unary(p);
    need_bool(p, t, x, "operand of '!'");
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
    const ir_token *t = cur(p);
    if (t->kind != IR_TK_PUNCT) return x;
    size_t k;
    for (k = 0; k < sizeof binops / sizeof binops[0]; k++)
      if (binops[k].lvl == lvl && tis(p, t, binops[k].s)) break;
    if (k == sizeof binops / sizeof binops[0]) return x;
    next(p);
    pv y = parse_bin(p, lvl + 1);
    x = mkbin(p, t, binops[k].k, x, y);
  }
}

static pv parse_expr(P *p) { return parse_bin(p, 0); }

/* A typed (non-literal) expression: DSL literals take their default dtype. */
static ir_expr *parse_int_expr(P *p, const char *what) {
  const ir_token *t = cur(p);
  pv x = parse_expr(p);
  need_int(p, t, x, what);
  return x.e;
}

/* ---- annotations (script) ---------------------------------------------------- */

static void parse_annots(P *p, int *n, ir_annot **out) {
  expect(p, "{");
  int cap = 0;
  ir_annot *v = NULL;
  int k = 0;
  while (!accept(p, "}")) {
    if (k) {
      expect(p, ",");
      if (accept(p, "}")) break;
    }
    const ir_token *kt = cur(p);
    ir_annot an;
    memset(&an, 0, sizeof an);
    if (kt->kind == IR_TK_STR) an.key = kt->str;
    else if (kt->kind == IR_TK_IDENT) an.key = tname(p, kt);
    else fail(p, kt, TS_EPARSE, "expected an annotation key but found %s", describe(p, kt));
    next(p);
    for (int i = 0; i < k; i++)
      if (!strcmp(v[i].key, an.key)) fail(p, kt, TS_EPARSE, "duplicate annotation key '%s'", an.key);
    expect(p, "=");
    const ir_token *vt = cur(p);
    if (vt->kind == IR_TK_STR) {
      an.kind = IR_ANN_STR;
      an.v.s = vt->str;
      next(p);
    } else if (vt->kind == IR_TK_IDENT && teq(p, vt, "expr") && tis(p, peekn(p, 1), "(")) {
      next(p);
      next(p);
      an.kind = IR_ANN_EXPR;
      an.v.e = parse_expr(p).e;
      expect(p, ")");
    } else {
      bool neg = accept(p, "-");
      if (!at_literal(p, 0))
        fail(p, cur(p), TS_EPARSE, "expected an annotation value but found %s", describe(p, cur(p)));
      pv x = parse_number(p, neg);
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
 * The compute DSL
 * ========================================================================== */

static ir_expr **parse_shape(P *p, int *ndim) {
  expect(p, "[");
  ir_expr **v = NULL;
  int n = 0, cap = 0;
  pmode save = p->m;
  p->m = M_SHAPE;
  if (!accept(p, "]")) {
    for (;;) {
      ir_expr *e = parse_int_expr(p, "a shape extent");
      PUSH(v, n, cap, e);
      if (accept(p, "]")) break;
      expect(p, ",");
    }
  }
  p->m = save;
  *ndim = n;
  return v;
}

static void check_new_tensor_name(P *p, const ir_token *t) {
  if (ktensor_find(p, t))
    fail(p, t, TS_EPARSE, "'%.*s' is already declared", (int)t->len, p->lx.src + t->pos);
  if (ksym_find(p, t))
    fail(p, t, TS_EPARSE, "'%.*s' is a symbolic size, not a tensor", (int)t->len, p->lx.src + t->pos);
}

static ktensor *add_tensor(P *p, const ir_token *t, int role, ir_dtype dt, int ndim, ir_expr **shape) {
  ktensor k;
  memset(&k, 0, sizeof k);
  k.name = tname(p, t);
  k.role = role;
  k.decl = t;
  if (shape || ndim == 0) k.buf = CK(ir_buffer_new(p->a, k.name, dt, ndim, shape, "global"));
  PUSH(p->kts, p->nkt, p->capkt, k);
  return &p->kts[p->nkt - 1];
}

static void parse_tensor_decl(P *p, int role) {
  const ir_token *t = expect_ident(p, "a tensor name");
  check_new_tensor_name(p, t);
  expect(p, ":");
  const ir_token *dtt = cur(p);
  ir_dtype dt = expect_dtype(p);
  if (dt.lanes != 1 || dt.code == IR_HANDLE)
    fail(p, dtt, TS_ETYPE, "a tensor's dtype must be a scalar number type");
  int ndim;
  ir_expr **shape = parse_shape(p, &ndim);
  add_tensor(p, t, role, dt, ndim, shape);
}

static ir_expr *identity(P *p, const ir_token *t, ir_expr_kind op, ir_dtype dt) {
  char b1[16];
  if (ir_dtype_is_float(dt)) {
    double v = op == IR_ADD ? 0.0 : op == IR_MUL ? 1.0 : op == IR_MAX ? -INFINITY : INFINITY;
    return CK(ir_float(p->a, dt, v));
  }
  if (dt.code == IR_BOOL) {
    if (op == IR_MAX) return CK(ir_bool(p->a, false));
    if (op == IR_MIN) return CK(ir_bool(p->a, true));
    fail(p, t, TS_ETYPE, "cannot accumulate into bool with this operator");
  }
  if (!ir_dtype_is_int(dt)) fail(p, t, TS_ETYPE, "cannot reduce into %s", dts(dt, b1));
  int bits = ir_dtype_bits(dt);
  int64_t lo, hi;
  if (ir_dtype_is_signed(dt)) {
    hi = bits >= 64 ? INT64_MAX : (((int64_t)1 << (bits - 1)) - 1);
    lo = -hi - 1;
  } else {
    lo = 0;
    hi = bits >= 63 ? INT64_MAX : (((int64_t)1 << bits) - 1);
  }
  int64_t v = op == IR_ADD ? 0 : op == IR_MUL ? 1 : op == IR_MAX ? lo : hi;
  return CK(ir_int(p->a, dt, v));
}

/* One statement `T[i, j] OP expr [where c] [for v in lo..hi, ...]` lowered to
 * its loop nest around one block. Allocates new intermediates into allocs. */
static ir_stmt *parse_dsl_stmt(P *p, ir_buffer ***allocs, int *nalloc, int *capalloc) {
  char b1[16], b2[16];
  p->nkv = 0;
  p->nbare = 0;
  p->kvs = NULL;
  p->capkv = 0;
  p->bares = NULL;
  p->capbare = 0;
  const ir_token *tt = expect_ident(p, "a statement (a tensor to write, or 'let')");
  if (ksym_find(p, tt))
    fail(p, tt, TS_EPARSE, "'%.*s' is a symbolic size and cannot be written", (int)tt->len,
         p->lx.src + tt->pos);
  ktensor *T = ktensor_find(p, tt);
  int tidx = T ? (int)(T - p->kts) : -1;
  if (T && T->role == R_IN) fail(p, tt, TS_EPARSE, "cannot write input tensor '%s'", T->name);
  if (T && T->written)
    fail(p, tt, TS_EPARSE, "'%s' is already written by an earlier statement; each tensor has one writer",
         T->name);
  expect(p, "[");
  int nlhs = 0;
  if (!accept(p, "]")) {
    for (;;) {
      const ir_token *vt = expect_ident(p, "an index variable");
      if (ksym_find(p, vt) || ktensor_find(p, vt) || is_func_name(p, vt))
        fail(p, vt, TS_EPARSE, "'%.*s' cannot be an index variable (it names something else)",
             (int)vt->len, p->lx.src + vt->pos);
      if (kvar_find(p, vt) >= 0)
        fail(p, vt, TS_EPARSE, "index variable '%.*s' appears twice on the left-hand side",
             (int)vt->len, p->lx.src + vt->pos);
      kvar_new(p, vt, nlhs++);
      if (accept(p, "]")) break;
      expect(p, ",");
    }
  }
  if (T && T->buf) {
    if (nlhs != T->buf->ndim)
      fail(p, tt, TS_ESHAPE, "'%s' has %d dimension%s but is indexed with %d", T->name, T->buf->ndim,
           T->buf->ndim == 1 ? "" : "s", nlhs);
    for (int i = 0; i < nlhs; i++) {
      p->kvs[i].min = CK(ir_i64(p->a, 0));
      p->kvs[i].ext = T->buf->shape[i];
      p->kvs[i].ranged = true;
    }
  }
  /* operator */
  const ir_token *opt = cur(p);
  ir_expr_kind op;
  bool reduce = true;
  if (accept(p, "=")) {
    reduce = false;
    op = IR_ADD;
  } else if (accept(p, "+=")) {
    op = IR_ADD;
  } else if (accept(p, "*=")) {
    op = IR_MUL;
  } else if ((teq(p, opt, "max") || teq(p, opt, "min")) && opt->kind == IR_TK_IDENT &&
             tis(p, peekn(p, 1), "=")) {
    op = teq(p, opt, "max") ? IR_MAX : IR_MIN;
    next(p);
    next(p);
  } else {
    fail(p, opt, TS_EPARSE, "expected '=', '+=', '*=', 'max=' or 'min=' but found %s", describe(p, opt));
  }
  p->m = M_BODY;
  const ir_token *rt = cur(p);
  pv rhs = parse_expr(p);
  ir_expr *cond = NULL;
  if (cur(p)->kind == IR_TK_IDENT && teq(p, cur(p), "where")) {
    const ir_token *wt = next(p);
    if (!reduce)
      fail(p, wt, TS_EPARSE, "'where' is only allowed on reductions; on '=' write select(cond, x, y)");
    pv c = parse_expr(p);
    need_bool(p, wt, c, "the 'where' condition");
    cond = c.e;
  }
  if (cur(p)->kind == IR_TK_IDENT && teq(p, cur(p), "for")) {
    next(p);
    for (;;) {
      const ir_token *vt = expect_ident(p, "a loop variable");
      int k = kvar_find(p, vt);
      if (k < 0) {
        if (ksym_find(p, vt) || ktensor_find(p, vt) || is_func_name(p, vt))
          fail(p, vt, TS_EPARSE, "'%.*s' cannot be an index variable (it names something else)",
               (int)vt->len, p->lx.src + vt->pos);
        k = kvar_new(p, vt, -1);
      }
      if (p->kvs[k].from_for)
        fail(p, vt, TS_EPARSE, "two ranges for '%s'", p->kvs[k].name);
      if (!teq(p, cur(p), "in")) fail(p, cur(p), TS_EPARSE, "expected 'in' but found %s", describe(p, cur(p)));
      next(p);
      p->m = M_RANGE;
      const ir_token *lot = cur(p);
      ir_expr *lo = parse_int_expr(p, "a range bound");
      expect(p, "..");
      ir_expr *hi = parse_int_expr(p, "a range bound");
      p->m = M_BODY;
      ir_expr *ext = fold_sub(p, hi, lo);
      int64_t ev;
      if (ir_as_int(ext, &ev) && ev <= 0) fail(p, lot, TS_ESHAPE, "empty range %lld..", (long long)ev);
      kvar *v = &p->kvs[k];
      v->min = lo;
      v->ext = ext;
      v->ranged = v->from_for = true;
      if (!accept(p, ",")) break;
    }
  }
  p->m = M_SCRIPT;
  /* ranges */
  int nred = 0;
  for (int k = 0; k < p->nkv; k++) {
    kvar *v = &p->kvs[k];
    if (v->lhs_dim < 0) nred++;
    if (v->ranged) continue;
    if (v->bare_ext) {
      v->min = CK(ir_i64(p->a, 0));
      v->ext = v->bare_ext;
      v->ranged = true;
      continue;
    }
    fail(p, v->tok, TS_ESHAPE, "cannot infer the range of '%s'; add 'for %s in 0..N'", v->name, v->name);
  }
  if (!reduce && nred)
    for (int k = 0; k < p->nkv; k++)
      if (p->kvs[k].lhs_dim < 0)
        fail(p, p->kvs[k].tok, TS_EPARSE,
             "'%s' is not an index of the left-hand side; use a reduction (+=, *=, max=, min=)",
             p->kvs[k].name);
  /* bare uses must stay inside the dimension they index */
  for (int i = 0; i < p->nbare; i++) {
    bare *b = &p->bares[i];
    kvar *v = &p->kvs[b->var];
    ir_expr *end = fold_add(p, v->min, v->ext);
    int64_t ce, cd;
    bool ke = ir_as_int(end, &ce), kd = ir_as_int(b->ext, &cd);
    bool bad = (ke && kd) ? ce > cd : (!ke && !kd) ? !same_expr(end, b->ext) : false;
    if (bad)
      fail(p, b->tok, TS_ESHAPE,
           "shape mismatch: '%s' ranges over a different extent than dimension %d of '%s'", v->name,
           b->dim, b->buf->name);
  }
  /* dtype */
  if (T && T->buf) {
    if (rhs.lit) {
      rhs.e = retype(p, rt, rhs.e, T->buf->dtype);
      rhs.lit = false;
    }
    if (!ir_dtype_eq(rhs.e->dtype, T->buf->dtype))
      fail(p, rt, TS_ETYPE, "'%s' is %s but the right-hand side is %s (write a cast)", T->name,
           dts(T->buf->dtype, b1), dts(rhs.e->dtype, b2));
  } else {
    ir_dtype dt = rhs.e->dtype;
    if (dt.lanes != 1 || dt.code == IR_HANDLE) fail(p, rt, TS_ETYPE, "cannot store %s", dts(dt, b1));
    ir_expr **shape = nlhs ? CK(TS_ANEWN(p->a, ir_expr *, nlhs)) : NULL;
    for (int k = 0; k < nlhs; k++) shape[k] = fold_add(p, p->kvs[k].min, p->kvs[k].ext);
    if (T) {
      T->buf = CK(ir_buffer_new(p->a, T->name, dt, nlhs, shape, "global"));
    } else {
      T = add_tensor(p, tt, R_TMP, dt, nlhs, shape);
      if (!T->buf) T->buf = CK(ir_buffer_new(p->a, T->name, dt, nlhs, shape, "global"));
    }
    tidx = (int)(T - p->kts);
    PUSH(*allocs, *nalloc, *capalloc, T->buf);
  }
  T = &p->kts[tidx];
  T->written = true;
  ir_buffer *buf = T->buf;
  ir_dtype dt = buf->dtype;
  /* the block */
  ir_block *blk = CK(ir_block_new(p->a, T->name));
  blk->niter = p->nkv;
  blk->iters = p->nkv ? CK(TS_ANEWN(p->a, ir_iter_var, p->nkv)) : NULL;
  ir_expr **vals = p->nkv ? CK(TS_ANEWN(p->a, ir_expr *, p->nkv)) : NULL;
  for (int k = 0; k < p->nkv; k++) {
    kvar *v = &p->kvs[k];
    blk->iters[k].var = v->iv;
    blk->iters[k].dom.min = v->min;
    blk->iters[k].dom.extent = v->ext;
    blk->iters[k].type = v->lhs_dim >= 0 ? IR_ITER_S : IR_ITER_R;
    vals[k] = CK(ir_var_ref(p->a, v->lv));
  }
  ir_expr **idx = nlhs ? CK(TS_ANEWN(p->a, ir_expr *, nlhs)) : NULL;
  for (int k = 0; k < nlhs; k++) idx[k] = CK(ir_var_ref(p->a, p->kvs[k].iv));
  if (!reduce) {
    blk->body = CK(ir_store(p->a, buf, nlhs, idx, rhs.e));
  } else {
    ir_expr *id = identity(p, opt, op, dt);
    ir_expr *val = rhs.e;
    if (cond) val = CK(ir_select(p->a, cond, val, id));
    ir_expr *old = CK(ir_load(p->a, buf, nlhs, idx));
    ir_expr *nv = CK(ir_binop(p->a, op, old, val));
    blk->init = CK(ir_store(p->a, buf, nlhs, idx, id));
    blk->body = CK(ir_store(p->a, buf, nlhs, idx, nv));
  }
  ts_diag ld;
  ts_diag_clear(&ld);
  ts_status st = ir_block_detect_regions(p->a, blk, &ld);
  if (st == TS_ENOMEM) oom(p);
  if (st != TS_OK) fail(p, tt, st, "cannot compute the regions of '%s': %s", T->name, ld.msg);
  ir_stmt *s = CK(ir_realize(p->a, blk, vals, CK(ir_bool(p->a, true))));
  for (int k = p->nkv - 1; k >= 0; k--)
    s = CK(ir_for(p->a, p->kvs[k].lv, p->kvs[k].min, p->kvs[k].ext, IR_FOR_SERIAL, s));
  return s;
}

static ir_stmt *mk_body(P *p, ir_stmt **v, int n) {
  if (n == 1) return v[0];
  return CK(ir_seq(p->a, n, v));
}

static ir_func *parse_kernel(P *p) {
  next(p); /* 'kernel' */
  p->dsl = true;
  p->m = M_SCRIPT;
  p->nkt = p->capkt = 0;
  p->kts = NULL;
  p->nsyms = p->capsyms = 0;
  p->syms = NULL;
  const ir_token *nt = expect_ident(p, "a kernel name");
  ir_func *f = CK(ir_func_new(p->a, tname(p, nt)));
  expect(p, "(");
  if (!accept(p, ")")) {
    for (;;) {
      parse_tensor_decl(p, R_IN);
      if (accept(p, ")")) break;
      expect(p, ",");
    }
  }
  int nin = p->nkt;
  expect(p, "->");
  for (;;) {
    parse_tensor_decl(p, R_OUT);
    if (!accept(p, ",")) break;
  }
  int nparams = p->nkt;
  expect(p, "{");
  ir_stmt **stages = NULL;
  int nst = 0, capst = 0;
  ir_buffer **allocs = NULL;
  int nalloc = 0, capalloc = 0;
  while (!accept(p, "}")) {
    const ir_token *t = cur(p);
    if (t->kind == IR_TK_EOF) fail(p, t, TS_EPARSE, "expected '}' to close kernel '%s'", f->name);
    if (accept(p, ";")) continue;
    if (t->kind == IR_TK_IDENT && teq(p, t, "let") && peekn(p, 1)->kind == IR_TK_IDENT &&
        tis(p, peekn(p, 2), ":")) {
      next(p);
      const ir_token *vt = next(p);
      check_new_tensor_name(p, vt);
      next(p);
      const ir_token *dtt = cur(p);
      ir_dtype dt = expect_dtype(p);
      if (dt.lanes != 1 || dt.code == IR_HANDLE)
        fail(p, dtt, TS_ETYPE, "a tensor's dtype must be a scalar number type");
      int ndim;
      ir_expr **shape = parse_shape(p, &ndim);
      ktensor *k = add_tensor(p, vt, R_TMP, dt, ndim, shape);
      PUSH(allocs, nalloc, capalloc, k->buf);
      continue;
    }
    ir_stmt *s = parse_dsl_stmt(p, &allocs, &nalloc, &capalloc);
    PUSH(stages, nst, capst, s);
  }
  for (int i = nin; i < nparams; i++)
    if (!p->kts[i].written)
      fail(p, p->kts[i].decl, TS_EPARSE, "output '%s' is never written", p->kts[i].name);
  ir_block *root = CK(ir_block_new(p->a, "root"));
  root->body = mk_body(p, stages, nst);
  root->nalloc = nalloc;
  root->allocs = allocs;
  f->body = CK(ir_realize(p->a, root, NULL, CK(ir_bool(p->a, true))));
  f->nparams = nparams;
  f->ninputs = nin;
  f->params = nparams ? CK(TS_ANEWN(p->a, ir_buffer *, nparams)) : NULL;
  for (int i = 0; i < nparams; i++) f->params[i] = p->kts[i].buf;
  f->nsyms = p->nsyms;
  f->syms = p->syms;
  p->dsl = false;
  return f;
}

/* =============================================================================
 * The loop-IR script
 * ========================================================================== */

static ir_stmt *parse_sstmt(P *p);

/* '{' STMT* '}' as one statement: a single one stays itself, else a sequence. */
static ir_stmt *parse_block_body(P *p) {
  expect(p, "{");
  ir_stmt **v = NULL;
  int n = 0, cap = 0;
  while (!accept(p, "}")) {
    if (cur(p)->kind == IR_TK_EOF) fail(p, cur(p), TS_EPARSE, "expected '}' but found end of input");
    PUSH(v, n, cap, parse_sstmt(p));
  }
  return mk_body(p, v, n);
}

static int64_t expect_int_lit(P *p, const char *what) {
  bool neg = accept(p, "-");
  const ir_token *t = cur(p);
  if (t->kind != IR_TK_INT) fail(p, t, TS_EPARSE, "expected %s but found %s", what, describe(p, t));
  return parse_number(p, neg).e->u.ival;
}

static ir_buffer *parse_bufdecl(P *p) {
  const ir_token *t = expect_ident(p, "a buffer name");
  expect(p, ":");
  ir_dtype dt = expect_dtype(p);
  expect(p, "[");
  pv *a;
  int n = parse_args(p, "]", &a);
  ir_expr **shape = n ? CK(TS_ANEWN(p->a, ir_expr *, n)) : NULL;
  for (int i = 0; i < n; i++) {
    need_int(p, t, a[i], "a shape extent");
    shape[i] = a[i].e;
  }
  const char *scope = "global";
  const ir_token *sct = NULL;
  ir_expr **strides = NULL, *offset = NULL;
  int64_t align = 0, *af = NULL, *ao = NULL;
  bool seen[5] = {0};
  for (;;) {
    const ir_token *c = cur(p);
    if (c->kind != IR_TK_IDENT || !tis(p, peekn(p, 1), "(")) break;
    int which = teq(p, c, "strides") ? 0 : teq(p, c, "offset") ? 1 : teq(p, c, "scope") ? 2
              : teq(p, c, "align") ? 3 : teq(p, c, "storage_align") ? 4 : -1;
    if (which < 0) break;
    if (seen[which]) fail(p, c, TS_EPARSE, "duplicate '%.*s'", (int)c->len, p->lx.src + c->pos);
    seen[which] = true;
    next(p);
    next(p);
    if (which == 0) {
      pv *s;
      int ns = parse_args(p, ")", &s);
      if (ns != n) fail(p, c, TS_ESHAPE, "%d strides for a %d-d buffer", ns, n);
      strides = n ? CK(TS_ANEWN(p->a, ir_expr *, n)) : NULL;
      for (int i = 0; i < n; i++) {
        need_int(p, c, s[i], "a stride");
        strides[i] = s[i].e;
      }
    } else if (which == 1) {
      offset = parse_int_expr(p, "an offset");
      expect(p, ")");
    } else if (which == 2) {
      sct = cur(p);
      if (sct->kind != IR_TK_STR) fail(p, sct, TS_EPARSE, "expected a scope string but found %s", describe(p, sct));
      scope = sct->str;
      next(p);
      expect(p, ")");
    } else if (which == 3) {
      align = expect_int_lit(p, "an alignment");
      expect(p, ")");
    } else {
      af = n ? CK(TS_ANEWN(p->a, int64_t, n)) : NULL;
      ao = n ? CK(TS_ANEWN(p->a, int64_t, n)) : NULL;
      for (;;) {
        const ir_token *at = expect(p, "(");
        int64_t axis = expect_int_lit(p, "an axis");
        expect(p, ",");
        int64_t fac = expect_int_lit(p, "a factor");
        expect(p, ",");
        int64_t off = expect_int_lit(p, "an offset");
        expect(p, ")");
        if (axis < 0 || axis >= n) fail(p, at, TS_ESHAPE, "storage_align axis %lld out of range", (long long)axis);
        af[axis] = fac;
        ao[axis] = off;
        if (accept(p, ")")) break;
        expect(p, ",");
      }
    }
  }
  ir_buffer *b = CK(ir_buffer_new(p->a, tname(p, t), dt, n, shape, scope));
  b->strides = strides;
  b->elem_offset = offset;
  b->align = align;
  b->align_factor = af;
  b->align_offset = ao;
  return b;
}

static void parse_region(P *p, ir_region *r) {
  const ir_token *t = expect_ident(p, "a buffer name");
  ent *e = scope_find(p, t, E_BUF);
  if (!e)
    fail(p, t, TS_ENOTFOUND, "unknown tensor '%.*s'", (int)(t->len > 64 ? 64 : t->len), p->lx.src + t->pos);
  ir_buffer *b = e->ptr;
  expect(p, "[");
  ir_range *v = NULL;
  int n = 0, cap = 0;
  if (!accept(p, "]")) {
    for (;;) {
      ir_range rg;
      rg.min = parse_int_expr(p, "a region bound");
      if (accept(p, ":+")) rg.extent = parse_int_expr(p, "a region extent");
      else rg.extent = CK(ir_i64(p->a, 1));
      PUSH(v, n, cap, rg);
      if (accept(p, "]")) break;
      expect(p, ",");
    }
  }
  if (n != b->ndim)
    fail(p, t, TS_ESHAPE, "'%s' has %d dimension%s but the region has %d", b->name, b->ndim,
         b->ndim == 1 ? "" : "s", n);
  r->buf = b;
  r->ndim = n;
  r->ranges = v;
}

static void parse_regions(P *p, int *n, ir_region **out) {
  int cap = 0;
  ir_region *v = NULL;
  int k = 0;
  for (;;) {
    ir_region r;
    parse_region(p, &r);
    PUSH(v, k, cap, r);
    if (!accept(p, ",")) break;
  }
  *n = k;
  *out = v;
}

static bool kw(P *p, const char *s, const char *next_is) {
  const ir_token *t = cur(p);
  if (t->kind != IR_TK_IDENT || !teq(p, t, s)) return false;
  if (!next_is) return peekn(p, 1)->kind == IR_TK_IDENT;
  return tis(p, peekn(p, 1), next_is);
}

static ir_stmt *parse_for(P *p) {
  next(p);
  const ir_token *vt = expect_ident(p, "a loop variable");
  ir_dtype dt = ir_dt(IR_I64);
  if (accept(p, ":")) dt = expect_dtype(p);
  if (!teq(p, cur(p), "in")) fail(p, cur(p), TS_EPARSE, "expected 'in' but found %s", describe(p, cur(p)));
  next(p);
  const ir_token *kt = cur(p);
  static const char *const kinds[] = {"serial", "parallel", "vectorized", "unrolled", "thread"};
  int kind = -1;
  for (int i = 0; i < 5; i++)
    if (kt->kind == IR_TK_IDENT && teq(p, kt, kinds[i])) kind = i;
  if (kind < 0)
    fail(p, kt, TS_EPARSE, "expected a loop kind (serial, parallel, vectorized, unrolled, thread) but found %s",
         describe(p, kt));
  next(p);
  expect(p, "(");
  ir_expr *mn = parse_int_expr(p, "a loop bound");
  expect(p, ",");
  ir_expr *ext = parse_int_expr(p, "a loop extent");
  const char *tag = NULL;
  if (accept(p, ",")) {
    const ir_token *st = cur(p);
    if (st->kind != IR_TK_STR) fail(p, st, TS_EPARSE, "expected a thread tag string but found %s", describe(p, st));
    tag = st->str;
    next(p);
  }
  expect(p, ")");
  ir_var *v = CK(ir_var_new(p->a, tname(p, vt), dt));
  int save = p->nsc;
  scope_push(p, v->name, E_VAR, v); /* annotations see the loop var too */
  int nann = 0;
  ir_annot *anns = NULL;
  if (kw(p, "annot", "{")) {
    next(p);
    parse_annots(p, &nann, &anns);
  }
  ir_stmt *body = parse_block_body(p);
  p->nsc = save;
  ir_stmt *s = CK(ir_for(p->a, v, mn, ext, (ir_for_kind)kind, body));
  s->u.loop.thread = tag;
  s->u.loop.nannot = nann;
  s->u.loop.annots = anns;
  return s;
}

static ir_stmt *parse_block(P *p) {
  next(p);
  const ir_token *nt = cur(p);
  if (nt->kind != IR_TK_IDENT && nt->kind != IR_TK_STR)
    fail(p, nt, TS_EPARSE, "expected a block name but found %s", describe(p, nt));
  next(p);
  ir_block *b = CK(ir_block_new(p->a, nt->kind == IR_TK_STR ? nt->str : tname(p, nt)));
  expect(p, "(");
  ir_iter_var *iters = NULL;
  ir_expr **vals = NULL;
  int n = 0, cap = 0, capv = 0, nv = 0;
  if (!accept(p, ")")) {
    for (;;) {
      const ir_token *it = expect_ident(p, "an iter var");
      expect(p, ":");
      ir_dtype dt = ir_dt(IR_I64);
      if (tok_dtype(p, cur(p), &dt) && tis(p, peekn(p, 1), ":")) {
        next(p);
        next(p);
      } else {
        dt = ir_dt(IR_I64);
      }
      const ir_token *tt = cur(p);
      ir_iter_type ty;
      if (tt->kind == IR_TK_IDENT && teq(p, tt, "S")) ty = IR_ITER_S;
      else if (tt->kind == IR_TK_IDENT && teq(p, tt, "R")) ty = IR_ITER_R;
      else if (tt->kind == IR_TK_IDENT && teq(p, tt, "O")) ty = IR_ITER_OPAQUE;
      else fail(p, tt, TS_EPARSE, "expected an iter type S, R or O but found %s", describe(p, tt));
      next(p);
      expect(p, "(");
      ir_iter_var iv;
      iv.dom.min = parse_int_expr(p, "a domain bound");
      expect(p, ",");
      iv.dom.extent = parse_int_expr(p, "a domain extent");
      expect(p, ")");
      expect(p, "=");
      ir_expr *val = parse_expr(p).e;
      iv.var = CK(ir_var_new(p->a, tname(p, it), dt));
      iv.type = ty;
      PUSH(iters, n, cap, iv);
      PUSH(vals, nv, capv, val);
      if (accept(p, ")")) break;
      expect(p, ",");
    }
  }
  ir_expr *pred = NULL;
  if (cur(p)->kind == IR_TK_IDENT && teq(p, cur(p), "where")) {
    next(p);
    pred = parse_expr(p).e;
  }
  b->niter = n;
  b->iters = iters;
  expect(p, "{");
  int save = p->nsc;
  for (int i = 0; i < n; i++) scope_push(p, iters[i].var->name, E_VAR, iters[i].var);
  ir_buffer **allocs = NULL;
  int na = 0, capa = 0;
  while (kw(p, "alloc", NULL)) {
    next(p);
    ir_buffer *ab = parse_bufdecl(p);
    PUSH(allocs, na, capa, ab);
    scope_push(p, ab->name, E_BUF, ab);
  }
  b->nalloc = na;
  b->allocs = allocs;
  if (kw(p, "reads", NULL)) {
    next(p);
    parse_regions(p, &b->nreads, &b->reads);
  }
  if (kw(p, "writes", NULL)) {
    next(p);
    parse_regions(p, &b->nwrites, &b->writes);
  }
  if (kw(p, "annot", "{")) {
    next(p);
    parse_annots(p, &b->nannot, &b->annots);
  }
  if (kw(p, "init", "{")) {
    next(p);
    b->init = parse_block_body(p);
  }
  ir_stmt **v = NULL;
  int ns = 0, caps = 0;
  while (!accept(p, "}")) {
    if (cur(p)->kind == IR_TK_EOF) fail(p, cur(p), TS_EPARSE, "expected '}' but found end of input");
    PUSH(v, ns, caps, parse_sstmt(p));
  }
  b->body = mk_body(p, v, ns);
  p->nsc = save;
  return CK(ir_realize(p->a, b, vals, pred ? pred : CK(ir_bool(p->a, true))));
}

static ir_stmt *parse_sstmt_inner(P *p) {
  const ir_token *t = cur(p);
  if (t->kind == IR_TK_IDENT && tis(p, peekn(p, 1), "[")) {
    /* store */
    next(p);
    ent *e = scope_find(p, t, E_BUF);
    if (!e)
      fail(p, t, TS_ENOTFOUND, "unknown tensor '%.*s'", (int)(t->len > 64 ? 64 : t->len), p->lx.src + t->pos);
    ir_buffer *b = e->ptr;
    expect(p, "[");
    pv *a;
    int n = parse_args(p, "]", &a);
    if (n != b->ndim)
      fail(p, t, TS_ESHAPE, "'%s' has %d dimension%s but is indexed with %d", b->name, b->ndim,
           b->ndim == 1 ? "" : "s", n);
    int h;
    for (int i = 0; i < n; i++) need_int(p, t, a[i], "an index");
    ir_expr **idx = exprs_of(p, a, n, &h);
    expect(p, "=");
    ir_expr *val = parse_expr(p).e;
    ir_stmt *s = CK(ir_store(p->a, b, n, idx, val));
    if (cur(p)->kind == IR_TK_IDENT && teq(p, cur(p), "if")) {
      /* a store predicate, unless this 'if' starts the next statement */
      int save = p->i;
      next(p);
      ir_expr *pr = parse_expr(p).e;
      if (is(p, "{")) p->i = save;
      else s->u.store.predicate = pr;
    }
    return s;
  }
  if (t->kind != IR_TK_IDENT)
    fail(p, t, TS_EPARSE, "expected a statement but found %s", describe(p, t));
  if (teq(p, t, "for")) return parse_for(p);
  if (teq(p, t, "block")) return parse_block(p);
  if (teq(p, t, "if")) {
    next(p);
    ir_expr *c = parse_expr(p).e;
    ir_stmt *th = parse_block_body(p);
    ir_stmt *el = NULL;
    if (cur(p)->kind == IR_TK_IDENT && teq(p, cur(p), "else")) {
      next(p);
      el = parse_block_body(p);
    }
    return CK(ir_if(p->a, c, th, el));
  }
  if (teq(p, t, "let")) {
    next(p);
    const ir_token *vt = expect_ident(p, "a variable name");
    expect(p, ":");
    ir_dtype dt = expect_dtype(p);
    expect(p, "=");
    ir_expr *val = parse_expr(p).e;
    ir_var *v = CK(ir_var_new(p->a, tname(p, vt), dt));
    int save = p->nsc;
    scope_push(p, v->name, E_VAR, v);
    ir_stmt *body = parse_block_body(p);
    p->nsc = save;
    return CK(ir_let(p->a, v, val, body));
  }
  if (teq(p, t, "allocate")) {
    next(p);
    ir_buffer *b = parse_bufdecl(p);
    int save = p->nsc;
    scope_push(p, b->name, E_BUF, b);
    ir_stmt *body = parse_block_body(p);
    p->nsc = save;
    return CK(ir_allocate(p->a, b, body));
  }
  if (teq(p, t, "eval")) {
    next(p);
    return CK(ir_evaluate(p->a, parse_expr(p).e));
  }
  fail(p, t, TS_EPARSE, "expected a statement but found %s", describe(p, t));
}

static ir_stmt *parse_sstmt(P *p) {
  enter(p);
  ir_stmt *s = parse_sstmt_inner(p);
  p->depth--;
  return s;
}

static ir_func *parse_func(P *p) {
  next(p); /* 'func' */
  p->dsl = false;
  p->m = M_SCRIPT;
  p->nsc = 0;
  const ir_token *nt = expect_ident(p, "a function name");
  ir_func *f = CK(ir_func_new(p->a, tname(p, nt)));
  /* syms(...) is written after the params that use it: declare it first. */
  int depth = 0, symsat = -1, symsend = -1;
  for (int j = p->i; j < p->nt; j++) {
    const ir_token *t = &p->t[j];
    if (t->kind == IR_TK_EOF) break;
    if (depth == 0 && t->kind == IR_TK_IDENT && j + 1 < p->nt) {
      if (teq(p, t, "syms") && tis(p, &p->t[j + 1], "(")) {
        symsat = j;
        break;
      }
      if (teq(p, t, "annot") && tis(p, &p->t[j + 1], "{")) {
        int dd = 0;
        for (j = j + 1; j < p->nt && p->t[j].kind != IR_TK_EOF; j++) {
          if (tis(p, &p->t[j], "{")) dd++;
          else if (tis(p, &p->t[j], "}") && --dd == 0) break;
        }
        continue;
      }
    }
    if (t->kind != IR_TK_PUNCT) continue;
    if (tis(p, t, "{") && depth == 0) break;
    if (tis(p, t, "(") || tis(p, t, "[") || tis(p, t, "{")) depth++;
    else if (tis(p, t, ")") || tis(p, t, "]") || tis(p, t, "}")) depth--;
  }
  ir_var **syms = NULL;
  int nsyms = 0, capsyms = 0;
  if (symsat >= 0) {
    int save = p->i;
    p->i = symsat + 2;
    if (!accept(p, ")")) {
      for (;;) {
        const ir_token *st = expect_ident(p, "a sym name");
        ir_dtype sdt = ir_dt(IR_I64);
        if (accept(p, ":")) sdt = expect_dtype(p);
        ir_var *v = CK(ir_var_new(p->a, tname(p, st), sdt));
        PUSH(syms, nsyms, capsyms, v);
        scope_push(p, v->name, E_VAR, v);
        if (accept(p, ")")) break;
        expect(p, ",");
      }
    }
    symsend = p->i;
    p->i = save;
  }
  expect(p, "(");
  ir_buffer **params = NULL;
  int np = 0, capp = 0;
  if (!accept(p, ")")) {
    for (;;) {
      ir_buffer *b = parse_bufdecl(p);
      PUSH(params, np, capp, b);
      scope_push(p, b->name, E_BUF, b);
      if (accept(p, ")")) break;
      expect(p, ",");
    }
  }
  int nin = np;
  if (accept(p, "->")) {
    for (;;) {
      ir_buffer *b = parse_bufdecl(p);
      PUSH(params, np, capp, b);
      scope_push(p, b->name, E_BUF, b);
      if (!accept(p, ",")) break;
    }
  }
  if (kw(p, "syms", "(")) {
    if (p->i != symsat) fail(p, cur(p), TS_EPARSE, "unexpected 'syms'");
    p->i = symsend; /* already parsed above */
  }
  if (kw(p, "annot", "{")) {
    next(p);
    parse_annots(p, &f->nannot, &f->annots);
  }
  f->body = parse_block_body(p);
  f->nparams = np;
  f->ninputs = nin;
  f->params = params;
  f->nsyms = nsyms;
  f->syms = syms;
  p->nsc = 0;
  return f;
}

/* =============================================================================
 * Entry points
 * ========================================================================== */

static void add_func(P *p, const ir_token *nt, ir_func *f) {
  p->nfuncs++;
  if (!p->mod) {
    if (p->nfuncs > 1) fail(p, nt, TS_EPARSE, "expected exactly one function, found a second one");
    p->first = f;
    return;
  }
  if (ir_module_get(p->mod, f->name)) fail(p, nt, TS_EPARSE, "duplicate function '%s'", f->name);
  if (ir_module_add(p->mod, f) != TS_OK) oom(p);
}

static ts_status run(P *p) {
  int code = setjmp(p->jb);
  if (code) return (ts_status)code;
  while (cur(p)->kind != IR_TK_EOF) {
    const ir_token *t = cur(p);
    const ir_token *nt = peekn(p, 1);
    ir_func *f;
    if (t->kind == IR_TK_IDENT && teq(p, t, "kernel")) f = parse_kernel(p);
    else if (t->kind == IR_TK_IDENT && teq(p, t, "func")) f = parse_func(p);
    else fail(p, t, TS_EPARSE, "expected 'kernel' or 'func' but found %s", describe(p, t));
    add_func(p, nt, f);
  }
  if (!p->mod && p->nfuncs == 0) fail(p, cur(p), TS_EPARSE, "expected a 'kernel' or 'func'");
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
