/* struct.c — structural equality and structural hashing of IR (struct.h).
 *
 * Both walks visit a tree in the same order and bind definitions at the same
 * points, so "equal" implies "hash equal" by construction:
 *   function: params (in order), then syms, then the params' declarations
 *             (shapes may use syms), annotations, body;
 *   for:      min, extent (enclosing scope), then the loop var, annotations,
 *             body;
 *   block:    per iter var: binding value and domain (enclosing scope), then
 *             the iter var; the predicate; then the alloc'd buffers, their
 *             declarations, reads, writes, annotations, init, body;
 *   let:      value, then the var, body;
 *   allocate: the buffer, its declaration, body.
 * A binding lives until its scope ends, so a var defined twice (the same
 * ir_var reused in two sibling loops) is two definitions, exactly as the
 * printer names them and the parser reads them. Vars and buffers used but
 * never defined (free) are matched by first use.
 *
 * Normalisations, chosen so print -> parse round trips compare equal and
 * documented in struct.h: sequences are compared flattened (a nested seq is
 * spliced into its parent, a one-statement seq is that statement, an empty
 * seq equals an absent body); a block predicate NULL equals `true`; a buffer
 * scope NULL equals "global"; a storage_align axis with factor 0 is "none"
 * whatever its offset; float literals are compared bitwise at their dtype's
 * precision (f64 as double, narrower floats as float), all NaNs equal;
 * annotations are compared as a set keyed by key (order-insensitive). */
#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack: no allocation */
#include "struct.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <xxhash.h>

#include "print.h"

/* ---- shared helpers -------------------------------------------------------- */

/* Bits that identify a float literal of dtype t: f64 as a double, narrower
 * floats as the float they round to; every NaN maps to one value. */
static uint64_t float_bits(ir_dtype t, double v) {
  if (isnan(v)) return UINT64_C(0x7ff8000000000000);
  if (t.code == IR_F64) {
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    return u;
  }
  float f = (float)v;
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static uint64_t annot_float_bits(double v) { return float_bits(ir_dt(IR_F64), v); }

static const char *norm_scope(const char *s) { return s ? s : "global"; }

static int64_t salign_factor(const ir_buffer *b, int i) {
  return b->align_factor ? b->align_factor[i] : 0;
}
static int64_t salign_offset(const ir_buffer *b, int i) {
  return salign_factor(b, i) && b->align_offset ? b->align_offset[i] : 0;
}

static bool pred_is_true(const ir_expr *e) {
  return !e || (e->kind == IR_INT_IMM && e->dtype.code == IR_BOOL && e->dtype.lanes == 1 &&
                e->u.ival != 0);
}

/* Flattened view of a sequence: the number of non-seq statements and the
 * k-th one. Sequences are short; no allocation. */
static int nleaves(const ir_stmt *s) {
  if (!s) return 0;
  if (s->kind != IR_SEQ) return 1;
  int n = 0;
  for (int i = 0; i < s->u.seq.n; i++) n += nleaves(s->u.seq.stmts[i]);
  return n;
}

static const ir_stmt *leaf(const ir_stmt *s, int k) {
  if (s->kind != IR_SEQ) return s;
  for (int i = 0; i < s->u.seq.n; i++) {
    int n = nleaves(s->u.seq.stmts[i]);
    if (k < n) return leaf(s->u.seq.stmts[i], k);
    k -= n;
  }
  return NULL;
}

static const char *stmt_kind_word(ir_stmt_kind k) {
  static const char *const w[] = {
      [IR_FOR] = "for",     [IR_BLOCK_REALIZE] = "block", [IR_SEQ] = "seq",
      [IR_IF] = "if",       [IR_LET] = "let",             [IR_ALLOCATE] = "allocate",
      [IR_EVALUATE] = "eval", [IR_STORE] = "store",
  };
  return (unsigned)k < IR_STMT_KIND_COUNT ? w[k] : "?";
}

static const char *iter_word(ir_iter_type t) {
  return t == IR_ITER_S ? "S" : t == IR_ITER_R ? "R" : t == IR_ITER_OPAQUE ? "O" : "?";
}

/* ==== equality ============================================================== */

typedef struct pair {
  const void *a, *b;
} pair;

typedef struct pairs {
  pair *p;
  size_t n, cap;
} pairs;

typedef struct eqctx {
  pairs scoped; /* live definitions, innermost last */
  pairs free;   /* free vars/buffers matched at first use */
  char path[512];
  size_t plen;
  char *why;
  size_t nwhy;
  bool failed;
  bool exact; /* vars and buffers by identity (ir_expr_equal) */
} eqctx;

static bool pairs_push(pairs *ps, const void *a, const void *b) {
  if (ps->n == ps->cap) {
    size_t cap = ps->cap ? 2 * ps->cap : 32;
    pair *p = ts_realloc(ps->p, cap * sizeof *p);
    if (!p) return false;
    ps->p = p;
    ps->cap = cap;
  }
  ps->p[ps->n++] = (pair){a, b};
  return true;
}

static void eq_fini(eqctx *c) {
  ts_free(c->scoped.p);
  ts_free(c->free.p);
}

/* Records the first difference as "path/message" (messages read
 * "field: left vs right"); returns false. */
static bool fail(eqctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool fail(eqctx *c, const char *fmt, ...) {
  if (c->failed) return false;
  c->failed = true;
  if (!c->why || !c->nwhy) return false;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (c->plen)
    snprintf(c->why, c->nwhy, "%s/%s", c->path, msg);
  else
    snprintf(c->why, c->nwhy, "%s", msg);
  return false;
}

static size_t path_push(eqctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static size_t path_push(eqctx *c, const char *fmt, ...) {
  size_t old = c->plen;
  if (!c->why) return old; /* nobody will read the path */
  if (c->plen && c->plen + 1 < sizeof c->path) c->path[c->plen++] = '/';
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(c->path + c->plen, sizeof c->path - c->plen, fmt, ap);
  va_end(ap);
  if (n > 0) c->plen += (size_t)n;
  if (c->plen >= sizeof c->path) c->plen = sizeof c->path - 1;
  c->path[c->plen] = 0;
  return old;
}

static void path_pop(eqctx *c, size_t old) {
  c->plen = old;
  c->path[old] = 0;
}

static bool define(eqctx *c, const void *a, const void *b) {
  if (!pairs_push(&c->scoped, a, b)) return fail(c, "out of memory");
  return true;
}

/* Checks that use a (left) and use b (right) refer to corresponding
 * definitions: the innermost binding of each must be the other. */
static bool same_ref(eqctx *c, const void *a, const void *b) {
  if (c->exact) return a == b;
  const pair *pa = NULL, *pb = NULL;
  for (size_t i = c->scoped.n; i-- > 0 && (!pa || !pb);) {
    if (!pa && c->scoped.p[i].a == a) pa = &c->scoped.p[i];
    if (!pb && c->scoped.p[i].b == b) pb = &c->scoped.p[i];
  }
  if (pa || pb) return pa && pa == pb;
  for (size_t i = 0; i < c->free.n; i++) {
    if (c->free.p[i].a == a || c->free.p[i].b == b)
      return c->free.p[i].a == a && c->free.p[i].b == b;
  }
  return pairs_push(&c->free, a, b);
}

static bool eq_dtype(ir_dtype a, ir_dtype b) { return a.code == b.code && a.lanes == b.lanes; }

static bool eq_e(eqctx *c, const ir_expr *a, const ir_expr *b);

static bool eq_es(eqctx *c, int n, ir_expr *const *a, ir_expr *const *b) {
  for (int i = 0; i < n; i++)
    if (!eq_e(c, a[i], b[i])) return false;
  return true;
}

/* Expression equality without reporting; callers report the field. */
static bool eq_e(eqctx *c, const ir_expr *a, const ir_expr *b) {
  if (a == b && !a) return true;
  if (!a || !b) return false;
  if (a->kind != b->kind || !eq_dtype(a->dtype, b->dtype)) return false;
  switch (a->kind) {
  case IR_INT_IMM: return a->u.ival == b->u.ival;
  case IR_FLOAT_IMM: return float_bits(a->dtype, a->u.fval) == float_bits(b->dtype, b->u.fval);
  case IR_VAR: return same_ref(c, a->u.var, b->u.var);
  case IR_NOT: return eq_e(c, a->u.un.a, b->u.un.a);
  case IR_SELECT:
    return eq_e(c, a->u.sel.cond, b->u.sel.cond) && eq_e(c, a->u.sel.t, b->u.sel.t) &&
           eq_e(c, a->u.sel.f, b->u.sel.f);
  case IR_CAST: return eq_e(c, a->u.cast.value, b->u.cast.value);
  case IR_CALL:
    return a->u.call.op == b->u.call.op && a->u.call.nargs == b->u.call.nargs &&
           eq_es(c, a->u.call.nargs, a->u.call.args, b->u.call.args);
  case IR_LOAD:
    return a->u.load.nidx == b->u.load.nidx && same_ref(c, a->u.load.buf, b->u.load.buf) &&
           eq_es(c, a->u.load.nidx, a->u.load.idx, b->u.load.idx);
  case IR_RAMP:
    return a->u.ramp.lanes == b->u.ramp.lanes && eq_e(c, a->u.ramp.base, b->u.ramp.base) &&
           eq_e(c, a->u.ramp.stride, b->u.ramp.stride);
  case IR_BROADCAST:
    return a->u.bcast.lanes == b->u.bcast.lanes && eq_e(c, a->u.bcast.value, b->u.bcast.value);
  case IR_CALL_EXTERN:
    return a->u.ext.nargs == b->u.ext.nargs && a->u.ext.name && b->u.ext.name &&
           !strcmp(a->u.ext.name, b->u.ext.name) &&
           eq_es(c, a->u.ext.nargs, a->u.ext.args, b->u.ext.args);
  case IR_ACCESS_PTR:
    return a->u.ptr.rw == b->u.ptr.rw && same_ref(c, a->u.ptr.buf, b->u.ptr.buf) &&
           eq_e(c, a->u.ptr.offset, b->u.ptr.offset);
  case IR_REINTERPRET: return eq_e(c, a->u.cast.value, b->u.cast.value);
  case IR_STR_IMM: return a->u.sval && b->u.sval && !strcmp(a->u.sval, b->u.sval);
  default:
    if (ir_is_binop(a->kind))
      return eq_e(c, a->u.bin.a, b->u.bin.a) && eq_e(c, a->u.bin.b, b->u.bin.b);
    return false;
  }
}

/* Compares one expression field, reporting "field: left vs right". */
static bool eq_field(eqctx *c, const char *field, const ir_expr *a, const ir_expr *b) {
  if (eq_e(c, a, b)) return true;
  if (c->failed || !c->why) return fail(c, "%s differs", field);
  char *sa = a ? ir_expr_to_string(a) : NULL, *sb = b ? ir_expr_to_string(b) : NULL;
  fail(c, "%s: %s vs %s", field, sa ? sa : "(none)", sb ? sb : "(none)");
  ts_free(sa);
  ts_free(sb);
  return false;
}

static bool eq_dt_field(eqctx *c, const char *field, ir_dtype a, ir_dtype b) {
  if (eq_dtype(a, b)) return true;
  char x[32], y[32];
  return fail(c, "%s: %s vs %s", field, ir_dtype_str(a, x, sizeof x), ir_dtype_str(b, y, sizeof y));
}

static bool eq_str(const char *a, const char *b) {
  if (!a || !b) return a == b;
  return !strcmp(a, b);
}

static bool eq_annot_value(eqctx *c, const ir_annot *a, const ir_annot *b) {
  if (a->kind != b->kind) return false;
  switch (a->kind) {
  case IR_ANN_INT: return a->v.i == b->v.i;
  case IR_ANN_FLOAT: return annot_float_bits(a->v.f) == annot_float_bits(b->v.f);
  case IR_ANN_STR: return eq_str(a->v.s, b->v.s);
  case IR_ANN_EXPR: return eq_e(c, a->v.e, b->v.e);
  }
  return false;
}

static void annot_str(const ir_annot *a, char *buf, size_t n) {
  switch (a->kind) {
  case IR_ANN_INT: snprintf(buf, n, "%" PRId64, a->v.i); return;
  case IR_ANN_FLOAT: snprintf(buf, n, "%.17g", a->v.f); return;
  case IR_ANN_STR: snprintf(buf, n, "\"%s\"", a->v.s ? a->v.s : ""); return;
  case IR_ANN_EXPR: {
    char *s = ir_expr_to_string(a->v.e);
    snprintf(buf, n, "expr(%s)", s ? s : "?");
    ts_free(s);
    return;
  }
  }
  snprintf(buf, n, "?");
}

/* A function's annotations without the metadata ones (IR_FUNC_ANN_LAYOUT_FREE:
 * which inputs a model feeds from constants), which neither equality nor the
 * hash sees, so marking them never changes a task key. Returns how many went
 * into out, or -1 (use them all) when there are more than FUNC_ANNOTS_MAX. */
#define FUNC_ANNOTS_MAX 32
static int func_annots(const ir_func *f, ir_annot *out) {
  if (f->nannot > FUNC_ANNOTS_MAX) return -1;
  int n = 0;
  for (int i = 0; i < f->nannot; i++)
    if (!f->annots[i].key || strcmp(f->annots[i].key, IR_FUNC_ANN_LAYOUT_FREE)) out[n++] = f->annots[i];
  return n;
}

/* Annotations as a set keyed by key. */
static bool eq_annots(eqctx *c, int na, const ir_annot *a, int nb, const ir_annot *b) {
  for (int i = 0; i < na; i++) {
    const ir_annot *m = NULL;
    for (int j = 0; j < nb && !m; j++)
      if (eq_str(a[i].key, b[j].key)) m = &b[j];
    if (!m) return fail(c, "annot[%s]: present vs absent", a[i].key ? a[i].key : "");
    if (!eq_annot_value(c, &a[i], m)) {
      char x[128], y[128];
      annot_str(&a[i], x, sizeof x);
      annot_str(m, y, sizeof y);
      return fail(c, "annot[%s]: %s vs %s", a[i].key, x, y);
    }
  }
  for (int j = 0; j < nb; j++) {
    bool found = false;
    for (int i = 0; i < na && !found; i++) found = eq_str(a[i].key, b[j].key);
    if (!found) return fail(c, "annot[%s]: absent vs present", b[j].key ? b[j].key : "");
  }
  return true;
}

/* A buffer declaration (the buffers are already bound). */
static bool eq_bufdecl(eqctx *c, const ir_buffer *a, const ir_buffer *b) {
  if (!eq_dt_field(c, "dtype", a->dtype, b->dtype)) return false;
  if (a->ndim != b->ndim) return fail(c, "ndim: %d vs %d", a->ndim, b->ndim);
  char f[48];
  for (int i = 0; i < a->ndim; i++) {
    snprintf(f, sizeof f, "shape[%d]", i);
    if (!eq_field(c, f, a->shape[i], b->shape[i])) return false;
  }
  if (!a->strides != !b->strides)
    return fail(c, "strides: %s vs %s", a->strides ? "explicit" : "compact",
                b->strides ? "explicit" : "compact");
  for (int i = 0; a->strides && i < a->ndim; i++) {
    snprintf(f, sizeof f, "strides[%d]", i);
    if (!eq_field(c, f, a->strides[i], b->strides[i])) return false;
  }
  if (!eq_field(c, "offset", a->elem_offset, b->elem_offset)) return false;
  if (strcmp(norm_scope(a->scope), norm_scope(b->scope)))
    return fail(c, "scope: \"%s\" vs \"%s\"", norm_scope(a->scope), norm_scope(b->scope));
  if (a->align != b->align)
    return fail(c, "align: %" PRId64 " vs %" PRId64, a->align, b->align);
  for (int i = 0; i < a->ndim; i++) {
    if (salign_factor(a, i) != salign_factor(b, i) || salign_offset(a, i) != salign_offset(b, i))
      return fail(c, "storage_align[%d]: (%" PRId64 ", %" PRId64 ") vs (%" PRId64 ", %" PRId64 ")",
                  i, salign_factor(a, i), salign_offset(a, i), salign_factor(b, i),
                  salign_offset(b, i));
  }
  return true;
}

static bool eq_var_def(eqctx *c, const ir_var *a, const ir_var *b) {
  if (!a || !b) return a == b ? true : fail(c, "var: missing");
  if (!eq_dt_field(c, "dtype", a->dtype, b->dtype)) return false;
  return define(c, a, b);
}

static bool eq_regions(eqctx *c, const char *what, int na, const ir_region *a, int nb,
                       const ir_region *b) {
  if (na != nb) return fail(c, "%s: %d vs %d regions", what, na, nb);
  for (int i = 0; i < na; i++) {
    size_t p = path_push(c, "%s[%d]", what, i);
    if (!same_ref(c, a[i].buf, b[i].buf))
      return fail(c, "buffer: %s vs %s", a[i].buf ? a[i].buf->name : "?",
                  b[i].buf ? b[i].buf->name : "?");
    if (a[i].ndim != b[i].ndim) return fail(c, "ndim: %d vs %d", a[i].ndim, b[i].ndim);
    for (int k = 0; k < a[i].ndim; k++) {
      char f[48];
      snprintf(f, sizeof f, "min[%d]", k);
      if (!eq_field(c, f, a[i].ranges[k].min, b[i].ranges[k].min)) return false;
      snprintf(f, sizeof f, "extent[%d]", k);
      if (!eq_field(c, f, a[i].ranges[k].extent, b[i].ranges[k].extent)) return false;
    }
    path_pop(c, p);
  }
  return true;
}

static bool eq_body(eqctx *c, const ir_stmt *a, const ir_stmt *b);

static bool eq_block(eqctx *c, const ir_stmt *sa, const ir_stmt *sb) {
  const ir_block *a = sa->u.realize.block, *b = sb->u.realize.block;
  if (!eq_str(a->name, b->name)) return fail(c, "name: %s vs %s", a->name, b->name);
  if (a->niter != b->niter) return fail(c, "iter vars: %d vs %d", a->niter, b->niter);
  for (int i = 0; i < a->niter; i++) {
    const ir_iter_var *ia = &a->iters[i], *ib = &b->iters[i];
    size_t p = path_push(c, "iter %s", ia->var ? ia->var->name : "?");
    if (ia->type != ib->type)
      return fail(c, "type: %s vs %s", iter_word(ia->type), iter_word(ib->type));
    if (!eq_field(c, "dom.min", ia->dom.min, ib->dom.min)) return false;
    if (!eq_field(c, "dom.extent", ia->dom.extent, ib->dom.extent)) return false;
    if (!eq_field(c, "value", sa->u.realize.iter_values[i], sb->u.realize.iter_values[i]))
      return false;
    if (!eq_var_def(c, ia->var, ib->var)) return false;
    path_pop(c, p);
  }
  /* The predicate speaks of enclosing loop vars; iter vars are bound by now
   * but distinct from them, so the order does not matter. */
  const ir_expr *pa = sa->u.realize.predicate, *pb = sb->u.realize.predicate;
  if (!(pred_is_true(pa) && pred_is_true(pb)) && !eq_field(c, "predicate", pa, pb)) return false;
  if (a->nalloc != b->nalloc) return fail(c, "alloc: %d vs %d buffers", a->nalloc, b->nalloc);
  for (int i = 0; i < a->nalloc; i++)
    if (!define(c, a->allocs[i], b->allocs[i])) return false;
  for (int i = 0; i < a->nalloc; i++) {
    size_t p = path_push(c, "alloc %s", a->allocs[i]->name);
    if (!eq_bufdecl(c, a->allocs[i], b->allocs[i])) return false;
    path_pop(c, p);
  }
  if (!eq_regions(c, "reads", a->nreads, a->reads, b->nreads, b->reads)) return false;
  if (!eq_regions(c, "writes", a->nwrites, a->writes, b->nwrites, b->writes)) return false;
  if (!eq_annots(c, a->nannot, a->annots, b->nannot, b->annots)) return false;
  if (!a->init != !b->init)
    return fail(c, "init: %s vs %s", a->init ? "present" : "absent", b->init ? "present" : "absent");
  if (a->init) {
    size_t p = path_push(c, "init");
    if (!eq_body(c, a->init, b->init)) return false;
    path_pop(c, p);
  }
  return eq_body(c, a->body, b->body);
}

/* One non-seq statement; pushes its own path component. */
static bool eq_stmt1(eqctx *c, const ir_stmt *a, const ir_stmt *b) {
  if (a->kind != b->kind)
    return fail(c, "statement: %s vs %s", stmt_kind_word(a->kind), stmt_kind_word(b->kind));
  size_t mark = c->scoped.n, p = c->plen;
  bool ok = true;
  switch (a->kind) {
  case IR_FOR: {
    const ir_var *va = a->u.loop.var;
    path_push(c, "for %s", va ? va->name : "?");
    if (a->u.loop.kind != b->u.loop.kind) {
      ok = fail(c, "kind: %s vs %s", ir_for_kind_name(a->u.loop.kind),
                ir_for_kind_name(b->u.loop.kind));
      break;
    }
    ok = eq_field(c, "min", a->u.loop.min, b->u.loop.min) &&
         eq_field(c, "extent", a->u.loop.extent, b->u.loop.extent);
    if (ok && !eq_str(a->u.loop.thread, b->u.loop.thread))
      ok = fail(c, "thread: %s vs %s", a->u.loop.thread ? a->u.loop.thread : "(none)",
                b->u.loop.thread ? b->u.loop.thread : "(none)");
    ok = ok && eq_var_def(c, va, b->u.loop.var) &&
         eq_annots(c, a->u.loop.nannot, a->u.loop.annots, b->u.loop.nannot, b->u.loop.annots) &&
         eq_body(c, a->u.loop.body, b->u.loop.body);
    break;
  }
  case IR_BLOCK_REALIZE:
    path_push(c, "block %s", a->u.realize.block->name);
    ok = eq_block(c, a, b);
    break;
  case IR_IF:
    path_push(c, "if");
    ok = eq_field(c, "cond", a->u.ifs.cond, b->u.ifs.cond);
    if (ok) {
      size_t q = path_push(c, "then");
      ok = eq_body(c, a->u.ifs.then_s, b->u.ifs.then_s);
      path_pop(c, q);
    }
    if (ok && !a->u.ifs.else_s != !b->u.ifs.else_s)
      ok = fail(c, "else: %s vs %s", a->u.ifs.else_s ? "present" : "absent",
                b->u.ifs.else_s ? "present" : "absent");
    if (ok && a->u.ifs.else_s) {
      path_push(c, "else");
      ok = eq_body(c, a->u.ifs.else_s, b->u.ifs.else_s);
    }
    break;
  case IR_LET:
    path_push(c, "let %s", a->u.let.var ? a->u.let.var->name : "?");
    ok = eq_field(c, "value", a->u.let.value, b->u.let.value) &&
         eq_var_def(c, a->u.let.var, b->u.let.var) && eq_body(c, a->u.let.body, b->u.let.body);
    break;
  case IR_ALLOCATE:
    path_push(c, "allocate %s", a->u.alloc.buf->name);
    ok = define(c, a->u.alloc.buf, b->u.alloc.buf) &&
         eq_bufdecl(c, a->u.alloc.buf, b->u.alloc.buf) &&
         eq_body(c, a->u.alloc.body, b->u.alloc.body);
    break;
  case IR_EVALUATE:
    path_push(c, "eval");
    ok = eq_field(c, "value", a->u.eval.value, b->u.eval.value);
    break;
  case IR_STORE: {
    path_push(c, "store %s", a->u.store.buf ? a->u.store.buf->name : "?");
    if (!same_ref(c, a->u.store.buf, b->u.store.buf)) {
      ok = fail(c, "buffer: %s vs %s", a->u.store.buf ? a->u.store.buf->name : "?",
                b->u.store.buf ? b->u.store.buf->name : "?");
      break;
    }
    if (a->u.store.nidx != b->u.store.nidx) {
      ok = fail(c, "indices: %d vs %d", a->u.store.nidx, b->u.store.nidx);
      break;
    }
    for (int i = 0; ok && i < a->u.store.nidx; i++) {
      char f[32];
      snprintf(f, sizeof f, "index[%d]", i);
      ok = eq_field(c, f, a->u.store.idx[i], b->u.store.idx[i]);
    }
    ok = ok && eq_field(c, "value", a->u.store.value, b->u.store.value) &&
         eq_field(c, "predicate", a->u.store.predicate, b->u.store.predicate);
    break;
  }
  default: ok = fail(c, "statement kind %d", (int)a->kind); break;
  }
  if (ok) path_pop(c, p);
  c->scoped.n = mark;
  return ok;
}

/* A statement list, flattened. */
static bool eq_body(eqctx *c, const ir_stmt *a, const ir_stmt *b) {
  int na = nleaves(a), nb = nleaves(b);
  if (na == 1 && nb == 1) return eq_stmt1(c, leaf(a, 0), leaf(b, 0));
  if (na != nb) return fail(c, "seq: %d vs %d statements", na, nb);
  for (int i = 0; i < na; i++) {
    size_t p = path_push(c, "seq[%d]", i);
    if (!eq_stmt1(c, leaf(a, i), leaf(b, i))) return false;
    path_pop(c, p);
  }
  return true;
}

static bool eq_func(eqctx *c, const ir_func *a, const ir_func *b) {
  if (a->nparams != b->nparams) return fail(c, "params: %d vs %d", a->nparams, b->nparams);
  if (a->ninputs != b->ninputs) return fail(c, "inputs: %d vs %d", a->ninputs, b->ninputs);
  if (a->nsyms != b->nsyms) return fail(c, "syms: %d vs %d", a->nsyms, b->nsyms);
  for (int i = 0; i < a->nparams; i++)
    if (!define(c, a->params[i], b->params[i])) return false;
  for (int i = 0; i < a->nsyms; i++) {
    size_t p = path_push(c, "sym %s", a->syms[i]->name);
    if (!eq_var_def(c, a->syms[i], b->syms[i])) return false;
    path_pop(c, p);
  }
  for (int i = 0; i < a->nparams; i++) {
    size_t p = path_push(c, "param %s", a->params[i]->name);
    if (!eq_bufdecl(c, a->params[i], b->params[i])) return false;
    path_pop(c, p);
  }
  ir_annot fa[FUNC_ANNOTS_MAX], fb[FUNC_ANNOTS_MAX];
  int na = func_annots(a, fa), nb = func_annots(b, fb);
  if (!eq_annots(c, na >= 0 ? na : a->nannot, na >= 0 ? fa : a->annots, nb >= 0 ? nb : b->nannot,
                 nb >= 0 ? fb : b->annots))
    return false;
  size_t p = path_push(c, "body");
  if (!eq_body(c, a->body, b->body)) return false;
  path_pop(c, p);
  return true;
}

bool ir_struct_equal_expr(const ir_expr *a, const ir_expr *b) {
  eqctx c = {0};
  bool ok = eq_e(&c, a, b);
  eq_fini(&c);
  return ok;
}

bool ir_expr_equal(const ir_expr *a, const ir_expr *b) {
  eqctx c = {.exact = true};
  return a == b || eq_e(&c, a, b);
}

bool ir_struct_equal_stmt(const ir_stmt *a, const ir_stmt *b) {
  eqctx c = {0};
  bool ok = eq_body(&c, a, b);
  eq_fini(&c);
  return ok;
}

bool ir_struct_equal_func_explain(const ir_func *a, const ir_func *b, char *why, size_t n) {
  eqctx c = {0};
  c.why = why;
  c.nwhy = n;
  if (why && n) why[0] = 0;
  bool ok = (a && b) ? eq_func(&c, a, b) : (a == b || fail(&c, "function: missing"));
  eq_fini(&c);
  return ok;
}

bool ir_struct_equal_func(const ir_func *a, const ir_func *b) {
  return ir_struct_equal_func_explain(a, b, NULL, 0);
}

/* ==== hashing =============================================================== */

/* Serialization tags. Every node starts with one; fields follow in a fixed
 * order, integers little-endian, so the byte stream (and the hash) is the
 * same on every machine. Values are part of the format: never renumber. */
enum {
  H_EXPR = 0x10,     /* + expr kind, dtype, payload */
  H_DEF = 0x20,      /* var/buffer definition: + dtype (vars) */
  H_REF = 0x21,      /* use of a live definition: + u32 number */
  H_FREE = 0x22,     /* use of a free var/buffer: + u32 number (first-use order) */
  H_NULL = 0x23,     /* an absent optional expression */
  H_BUFDECL = 0x30,
  H_ANNOTS = 0x31,
  H_REGION = 0x32,
  H_STMT = 0x40,     /* + stmt kind */
  H_SEQ = 0x41,      /* + u32 count */
  H_FUNC = 0x50,
};

typedef struct refs {
  const void **p;
  size_t n, cap;
} refs;

typedef struct hctx {
  XXH3_state_t st;
  unsigned char buf[256]; /* small writes are batched */
  size_t nbuf;
  refs scoped; /* live definitions in definition order; number = defs so far */
  uint32_t *num;
  uint32_t ndefs;
  refs free;
  bool oom;
} hctx;

static void h_init(hctx *h) {
  memset(h, 0, sizeof *h);
  XXH3_INITSTATE(&h->st);
  XXH3_64bits_reset(&h->st);
}

static void h_flush(hctx *h) {
  if (h->nbuf) XXH3_64bits_update(&h->st, h->buf, h->nbuf);
  h->nbuf = 0;
}

static void h_bytes(hctx *h, const void *p, size_t n) {
  if (n > sizeof h->buf) {
    h_flush(h);
    XXH3_64bits_update(&h->st, p, n);
    return;
  }
  if (h->nbuf + n > sizeof h->buf) h_flush(h);
  memcpy(h->buf + h->nbuf, p, n);
  h->nbuf += n;
}

static void h_u8(hctx *h, unsigned v) {
  unsigned char b = (unsigned char)v;
  h_bytes(h, &b, 1);
}

static void h_u32(hctx *h, uint32_t v) {
  unsigned char b[4];
  for (int i = 0; i < 4; i++) b[i] = (unsigned char)(v >> (8 * i));
  h_bytes(h, b, 4);
}

static void h_u64(hctx *h, uint64_t v) {
  unsigned char b[8];
  for (int i = 0; i < 8; i++) b[i] = (unsigned char)(v >> (8 * i));
  h_bytes(h, b, 8);
}

static void h_str(hctx *h, const char *s) {
  if (!s) {
    h_u32(h, UINT32_MAX);
    return;
  }
  size_t n = strlen(s);
  h_u32(h, (uint32_t)n);
  h_bytes(h, s, n);
}

static void h_dtype(hctx *h, ir_dtype t) {
  h_u8(h, t.code);
  h_u32(h, t.lanes);
}

static uint64_t h_done(hctx *h) {
  h_flush(h);
  uint64_t r = XXH3_64bits_digest(&h->st);
  ts_free(h->scoped.p);
  ts_free(h->num);
  ts_free(h->free.p);
  /* An allocation failure leaves a hash that could collide with another
   * function's; make it obviously special instead. */
  return h->oom ? 0 : r;
}

static bool refs_push(refs *r, const void *p, uint32_t **num, uint32_t v) {
  if (r->n == r->cap) {
    size_t cap = r->cap ? 2 * r->cap : 32;
    const void **np = ts_realloc((void *)r->p, cap * sizeof *np);
    if (!np) return false;
    r->p = np;
    if (num) {
      uint32_t *nn = ts_realloc(*num, cap * sizeof *nn);
      if (!nn) return false;
      *num = nn;
    }
    r->cap = cap;
  }
  if (num) (*num)[r->n] = v;
  r->p[r->n++] = p;
  return true;
}

static void h_define(hctx *h, const void *p) {
  if (!refs_push(&h->scoped, p, &h->num, h->ndefs)) h->oom = true;
  h->ndefs++;
}

static void h_ref(hctx *h, const void *p) {
  for (size_t i = h->scoped.n; i-- > 0;) {
    if (h->scoped.p[i] == p) {
      h_u8(h, H_REF);
      h_u32(h, h->num[i]);
      return;
    }
  }
  size_t i = 0;
  while (i < h->free.n && h->free.p[i] != p) i++;
  if (i == h->free.n && !refs_push(&h->free, p, NULL, 0)) h->oom = true;
  h_u8(h, H_FREE);
  h_u32(h, (uint32_t)i);
}

static void h_expr(hctx *h, const ir_expr *e) {
  if (!e) {
    h_u8(h, H_NULL);
    return;
  }
  h_u8(h, H_EXPR);
  h_u8(h, (unsigned)e->kind);
  h_dtype(h, e->dtype);
  switch (e->kind) {
  case IR_INT_IMM: h_u64(h, (uint64_t)e->u.ival); break;
  case IR_FLOAT_IMM: h_u64(h, float_bits(e->dtype, e->u.fval)); break;
  case IR_VAR: h_ref(h, e->u.var); break;
  case IR_NOT: h_expr(h, e->u.un.a); break;
  case IR_SELECT:
    h_expr(h, e->u.sel.cond);
    h_expr(h, e->u.sel.t);
    h_expr(h, e->u.sel.f);
    break;
  case IR_CAST: h_expr(h, e->u.cast.value); break;
  case IR_CALL:
    h_u32(h, (uint32_t)e->u.call.op);
    h_u32(h, (uint32_t)e->u.call.nargs);
    for (int i = 0; i < e->u.call.nargs; i++) h_expr(h, e->u.call.args[i]);
    break;
  case IR_LOAD:
    h_ref(h, e->u.load.buf);
    h_u32(h, (uint32_t)e->u.load.nidx);
    for (int i = 0; i < e->u.load.nidx; i++) h_expr(h, e->u.load.idx[i]);
    break;
  case IR_RAMP:
    h_expr(h, e->u.ramp.base);
    h_expr(h, e->u.ramp.stride);
    h_u32(h, (uint32_t)e->u.ramp.lanes);
    break;
  case IR_BROADCAST:
    h_expr(h, e->u.bcast.value);
    h_u32(h, (uint32_t)e->u.bcast.lanes);
    break;
  case IR_CALL_EXTERN:
    h_str(h, e->u.ext.name);
    h_u32(h, (uint32_t)e->u.ext.nargs);
    for (int i = 0; i < e->u.ext.nargs; i++) h_expr(h, e->u.ext.args[i]);
    break;
  case IR_ACCESS_PTR:
    h_ref(h, e->u.ptr.buf);
    h_expr(h, e->u.ptr.offset);
    h_u32(h, (uint32_t)e->u.ptr.rw);
    break;
  case IR_REINTERPRET: h_expr(h, e->u.cast.value); break;
  case IR_STR_IMM: h_str(h, e->u.sval); break;
  default:
    if (ir_is_binop(e->kind)) {
      h_expr(h, e->u.bin.a);
      h_expr(h, e->u.bin.b);
    }
    break;
  }
}

static void h_var_def(hctx *h, const ir_var *v) {
  h_u8(h, H_DEF);
  h_dtype(h, v ? v->dtype : ir_dt(IR_I64));
  h_define(h, v);
}

/* Annotations in key order (strcmp; ties by position), matching the
 * order-insensitive equality. */
static void h_annots(hctx *h, int n, const ir_annot *a) {
  h_u8(h, H_ANNOTS);
  h_u32(h, (uint32_t)n);
  int last = -1;
  for (int k = 0; k < n; k++) {
    int best = -1;
    for (int i = 0; i < n; i++) {
      const char *ki = a[i].key ? a[i].key : "";
      if (last >= 0) {
        int cl = strcmp(ki, a[last].key ? a[last].key : "");
        if (cl < 0 || (cl == 0 && i <= last)) continue;
      }
      if (best < 0) {
        best = i;
        continue;
      }
      int cb = strcmp(ki, a[best].key ? a[best].key : "");
      if (cb < 0) best = i;
    }
    if (best < 0) break;
    last = best;
    const ir_annot *x = &a[best];
    h_str(h, x->key);
    h_u8(h, (unsigned)x->kind);
    switch (x->kind) {
    case IR_ANN_INT: h_u64(h, (uint64_t)x->v.i); break;
    case IR_ANN_FLOAT: h_u64(h, annot_float_bits(x->v.f)); break;
    case IR_ANN_STR: h_str(h, x->v.s); break;
    case IR_ANN_EXPR: h_expr(h, x->v.e); break;
    }
  }
}

static void h_bufdecl(hctx *h, const ir_buffer *b) {
  h_u8(h, H_BUFDECL);
  h_dtype(h, b->dtype);
  h_u32(h, (uint32_t)b->ndim);
  for (int i = 0; i < b->ndim; i++) h_expr(h, b->shape[i]);
  h_u8(h, b->strides ? 1 : 0);
  for (int i = 0; b->strides && i < b->ndim; i++) h_expr(h, b->strides[i]);
  h_expr(h, b->elem_offset);
  h_str(h, norm_scope(b->scope));
  h_u64(h, (uint64_t)b->align);
  for (int i = 0; i < b->ndim; i++) {
    h_u64(h, (uint64_t)salign_factor(b, i));
    h_u64(h, (uint64_t)salign_offset(b, i));
  }
}

static void h_regions(hctx *h, int n, const ir_region *r) {
  h_u32(h, (uint32_t)n);
  for (int i = 0; i < n; i++) {
    h_u8(h, H_REGION);
    h_ref(h, r[i].buf);
    h_u32(h, (uint32_t)r[i].ndim);
    for (int k = 0; k < r[i].ndim; k++) {
      h_expr(h, r[i].ranges[k].min);
      h_expr(h, r[i].ranges[k].extent);
    }
  }
}

static void h_body(hctx *h, const ir_stmt *s);

static void h_stmt1(hctx *h, const ir_stmt *s) {
  size_t mark = h->scoped.n;
  h_u8(h, H_STMT);
  h_u8(h, (unsigned)s->kind);
  switch (s->kind) {
  case IR_FOR:
    h_u8(h, (unsigned)s->u.loop.kind);
    h_expr(h, s->u.loop.min);
    h_expr(h, s->u.loop.extent);
    h_str(h, s->u.loop.thread);
    h_var_def(h, s->u.loop.var);
    h_annots(h, s->u.loop.nannot, s->u.loop.annots);
    h_body(h, s->u.loop.body);
    break;
  case IR_BLOCK_REALIZE: {
    const ir_block *b = s->u.realize.block;
    h_str(h, b->name);
    h_u32(h, (uint32_t)b->niter);
    for (int i = 0; i < b->niter; i++) {
      h_u8(h, (unsigned)b->iters[i].type);
      h_expr(h, b->iters[i].dom.min);
      h_expr(h, b->iters[i].dom.extent);
      h_expr(h, s->u.realize.iter_values[i]);
      h_var_def(h, b->iters[i].var);
    }
    const ir_expr *pred = s->u.realize.predicate;
    if (pred_is_true(pred))
      h_u8(h, 1);
    else {
      h_u8(h, 0);
      h_expr(h, pred);
    }
    h_u32(h, (uint32_t)b->nalloc);
    for (int i = 0; i < b->nalloc; i++) {
      h_u8(h, H_DEF);
      h_define(h, b->allocs[i]);
    }
    for (int i = 0; i < b->nalloc; i++) h_bufdecl(h, b->allocs[i]);
    h_regions(h, b->nreads, b->reads);
    h_regions(h, b->nwrites, b->writes);
    h_annots(h, b->nannot, b->annots);
    h_u8(h, b->init ? 1 : 0);
    if (b->init) h_body(h, b->init);
    h_body(h, b->body);
    break;
  }
  case IR_IF:
    h_expr(h, s->u.ifs.cond);
    h_body(h, s->u.ifs.then_s);
    h_u8(h, s->u.ifs.else_s ? 1 : 0);
    if (s->u.ifs.else_s) h_body(h, s->u.ifs.else_s);
    break;
  case IR_LET:
    h_expr(h, s->u.let.value);
    h_var_def(h, s->u.let.var);
    h_body(h, s->u.let.body);
    break;
  case IR_ALLOCATE:
    h_u8(h, H_DEF);
    h_define(h, s->u.alloc.buf);
    h_bufdecl(h, s->u.alloc.buf);
    h_body(h, s->u.alloc.body);
    break;
  case IR_EVALUATE: h_expr(h, s->u.eval.value); break;
  case IR_STORE:
    h_ref(h, s->u.store.buf);
    h_u32(h, (uint32_t)s->u.store.nidx);
    for (int i = 0; i < s->u.store.nidx; i++) h_expr(h, s->u.store.idx[i]);
    h_expr(h, s->u.store.value);
    h_expr(h, s->u.store.predicate);
    break;
  default: break;
  }
  h->scoped.n = mark;
}

/* A statement list, flattened as eq_body compares it. */
static void h_body(hctx *h, const ir_stmt *s) {
  int n = nleaves(s);
  if (n == 1) {
    h_stmt1(h, leaf(s, 0));
    return;
  }
  h_u8(h, H_SEQ);
  h_u32(h, (uint32_t)n);
  for (int i = 0; i < n; i++) h_stmt1(h, leaf(s, i));
}

uint64_t ir_struct_hash_expr(const ir_expr *e) {
  hctx h;
  h_init(&h);
  h_expr(&h, e);
  return h_done(&h);
}

uint64_t ir_struct_hash_func(const ir_func *f) {
  hctx h;
  h_init(&h);
  h_u8(&h, H_FUNC);
  h_u32(&h, (uint32_t)f->nparams);
  h_u32(&h, (uint32_t)f->ninputs);
  h_u32(&h, (uint32_t)f->nsyms);
  for (int i = 0; i < f->nparams; i++) {
    h_u8(&h, H_DEF);
    h_define(&h, f->params[i]);
  }
  for (int i = 0; i < f->nsyms; i++) h_var_def(&h, f->syms[i]);
  for (int i = 0; i < f->nparams; i++) h_bufdecl(&h, f->params[i]);
  ir_annot fa[FUNC_ANNOTS_MAX];
  int na = func_annots(f, fa);
  h_annots(&h, na >= 0 ? na : f->nannot, na >= 0 ? fa : f->annots);
  h_body(&h, f->body);
  return h_done(&h);
}

char *ir_workload_key(const ir_func *f, char buf[17]) {
  snprintf(buf, 17, "%016" PRIx64, ir_struct_hash_func(f));
  return buf;
}
