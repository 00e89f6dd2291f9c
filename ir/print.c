/* print.c — the IR printer: expressions, statements and functions as the
 * `func` script of docs/SCRIPT.md, which the script parser reads back into a
 * structurally equal function (unique names per definition, literals that
 * read back exactly, minimal parentheses). docs/IR.md ("Notes by file"). */
#include "print.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Precedences of docs/SCRIPT.md: binary operators use ir.h's table; unary
 * `-`/`!` bind tighter than any binary operator, calls/loads/names tighter
 * still. */
#define PREC_UNARY 8
#define PREC_PRIMARY 9

static const char *const binop_sym[] = {
#define IR_X(e, n, s, p) [e] = s,
    IR_BINOP_LIST(IR_X)
#undef IR_X
};
static const int binop_prec[] = {
#define IR_X(e, n, s, p) [e] = p,
    IR_BINOP_LIST(IR_X)
#undef IR_X
};
static const char *const intrin_name[] = {
#define IR_X(e, n, a) [e] = n,
    IR_INTRIN_LIST(IR_X)
#undef IR_X
};
static const char *const dtype_name[] = {
#define IR_X(e, n, b, c) [e] = n,
    IR_DTYPE_LIST(IR_X)
#undef IR_X
};
static const char *const for_kind_name[] = {
    [IR_FOR_SERIAL] = "serial",         [IR_FOR_PARALLEL] = "parallel",
    [IR_FOR_VECTORIZED] = "vectorized", [IR_FOR_UNROLLED] = "unrolled",
    [IR_FOR_THREAD_BINDING] = "thread",
};

/* Words a definition may not print as bare: literals, statement keywords and
 * builtin call names. Dtype names are checked separately. */
static const char *const reserved[] = {
    "true", "false", "inf", "nan", "func", "kernel", "for", "in", "block", "where", "alloc",
    "reads", "writes", "annot", "init", "if", "else", "let", "allocate", "eval", "syms",
    "min", "max", "select", "ramp", "broadcast", "expr", "strides", "offset", "scope",
    "align", "storage_align",
};

/* ---- printing context ------------------------------------------------------ */

typedef struct bind {
  const void *key; /* ir_var * or ir_buffer * */
  const char *name;
} bind;

typedef struct pctx {
  ts_strbuf *sb;
  ts_arena names;  /* generated names */
  bind *binds;     /* live definitions, innermost last */
  size_t nbinds, capbinds;
  const char **used; /* every name handed out in this function */
  size_t nused, capused;
  bool oom;
} pctx;

static void pctx_init(pctx *c, ts_strbuf *sb) {
  memset(c, 0, sizeof *c);
  c->sb = sb;
  ts_arena_init(&c->names);
}

static void pctx_fini(pctx *c) {
  if (c->oom) c->sb->oom = true;
  ts_free(c->binds);
  ts_free(c->used);
  ts_arena_fini(&c->names);
}

static void out(pctx *c, const char *s) { ts_strbuf_append(c->sb, s); }

static void outf(pctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void outf(pctx *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  ts_strbuf_vprintf(c->sb, fmt, ap);
  va_end(ap);
}

static void indent(pctx *c, int level) {
  for (int i = 0; i < level; i++) out(c, "  ");
}

static const char *dt_str(ir_dtype t, char *buf, size_t n) {
  const char *base = t.code < IR_DTYPE_COUNT ? dtype_name[t.code] : "?";
  if (t.lanes > 1)
    snprintf(buf, n, "%sx%u", base, (unsigned)t.lanes);
  else
    snprintf(buf, n, "%s", base);
  return buf;
}

static void out_dtype(pctx *c, ir_dtype t) {
  char b[32];
  out(c, dt_str(t, b, sizeof b));
}

static bool is_ident(const char *s) {
  if (!s || !*s) return false;
  if (!(s[0] == '_' || (s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z'))) return false;
  for (const char *p = s + 1; *p; p++) {
    char ch = *p;
    if (!(ch == '_' || ch == '.' || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
          (ch >= '0' && ch <= '9')))
      return false;
  }
  return true;
}

/* "f32", "i8x16", "inf_f64", "nan_bf16": names the lexer reads as dtypes or
 * special literals. */
static bool is_dtype_word(const char *s) {
  const char *p = s;
  if (!strncmp(p, "inf_", 4) || !strncmp(p, "nan_", 4)) p += 4;
  for (int i = 0; i < IR_DTYPE_COUNT; i++) {
    size_t n = strlen(dtype_name[i]);
    if (strncmp(p, dtype_name[i], n)) continue;
    const char *q = p + n;
    if (!*q) return true;
    if (*q == 'x' && q[1]) {
      for (q++; *q >= '0' && *q <= '9'; q++) {}
      if (!*q) return true;
    }
  }
  return false;
}

static bool is_reserved(const char *s) {
  for (size_t i = 0; i < sizeof reserved / sizeof *reserved; i++)
    if (!strcmp(s, reserved[i])) return true;
  if (is_dtype_word(s)) return true;
  for (int i = 0; i < IR_INTRIN_COUNT; i++)
    if (!strcmp(s, intrin_name[i])) return true;
  return false;
}

/* A printable identifier for a raw name: invalid characters become '_', a
 * leading digit or '.' gets a '_' in front, no name becomes fallback. */
static const char *sanitize(pctx *c, const char *raw, const char *fallback) {
  if (is_ident(raw)) return raw;
  if (!raw || !*raw) return fallback;
  size_t n = strlen(raw);
  char *s = ts_arena_alloc(&c->names, n + 2);
  if (!s) {
    c->oom = true;
    return fallback;
  }
  size_t k = 0;
  if (!(raw[0] == '_' || (raw[0] >= 'a' && raw[0] <= 'z') || (raw[0] >= 'A' && raw[0] <= 'Z')))
    s[k++] = '_';
  for (size_t i = 0; i < n; i++) {
    char ch = raw[i];
    bool ok = ch == '_' || ch == '.' || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
              (ch >= '0' && ch <= '9');
    s[k++] = ok ? ch : '_';
  }
  s[k] = 0;
  return s;
}

static bool name_used(const pctx *c, const char *s) {
  for (size_t i = 0; i < c->nused; i++)
    if (!strcmp(c->used[i], s)) return true;
  return false;
}

static void mark_used(pctx *c, const char *s) {
  if (c->nused == c->capused) {
    size_t cap = c->capused ? 2 * c->capused : 32;
    const char **u = ts_realloc(c->used, cap * sizeof *u);
    if (!u) {
      c->oom = true;
      return;
    }
    c->used = u;
    c->capused = cap;
  }
  c->used[c->nused++] = s;
}

/* Gives a new definition its printed name and makes it live. */
static const char *define(pctx *c, const void *key, const char *raw, const char *fallback) {
  const char *base = sanitize(c, raw, fallback);
  const char *name = base;
  if (name_used(c, name) || is_reserved(name)) {
    name = NULL;
    for (unsigned k = 1; !name; k++) {
      char *cand = ts_arena_printf(&c->names, "%s_%u", base, k);
      if (!cand) {
        c->oom = true;
        name = base;
        break;
      }
      if (!name_used(c, cand) && !is_reserved(cand)) name = cand;
    }
  }
  mark_used(c, name);
  if (c->nbinds == c->capbinds) {
    size_t cap = c->capbinds ? 2 * c->capbinds : 32;
    bind *b = ts_realloc(c->binds, cap * sizeof *b);
    if (!b) {
      c->oom = true;
      return name;
    }
    c->binds = b;
    c->capbinds = cap;
  }
  c->binds[c->nbinds++] = (bind){key, name};
  return name;
}

/* The printed name of a use: the innermost live definition, else (a free
 * var or undeclared buffer) its own name. */
static const char *lookup(pctx *c, const void *key, const char *raw, const char *fallback) {
  for (size_t i = c->nbinds; i-- > 0;)
    if (c->binds[i].key == key) return c->binds[i].name;
  return sanitize(c, raw, fallback);
}

/* ---- literals -------------------------------------------------------------- */

/* Formats a float so the lexer reads it back as the same value, as short as
 * possible: the fewest %.Ng digits (N <= 9 for f32 and narrower, of the value
 * rounded to float; N <= 17 for f64) that read back exactly. That is %.9g /
 * %.17g when nothing shorter survives, and `0.1` rather than `0.100000001`
 * otherwise. No '+' in exponents; ".0" added when neither '.' nor 'e'
 * appeared. */
static void fmt_float(char *buf, size_t n, double v, bool f64) {
  char tmp[64];
  if (f64) {
    for (int p = 1; p <= 17; p++) {
      snprintf(tmp, sizeof tmp, "%.*g", p, v);
      if (strtod(tmp, NULL) == v) break;
    }
  } else {
    float f = (float)v;
    for (int p = 1; p <= 9; p++) {
      snprintf(tmp, sizeof tmp, "%.*g", p, (double)f);
      /* both ways a parser might read it: strtof, or strtod then narrow */
      if (strtof(tmp, NULL) == f && (float)strtod(tmp, NULL) == f) break;
    }
  }
  size_t k = 0;
  for (const char *p = tmp; *p && k + 3 < n; p++) {
    if (*p == '+' && p > tmp && (p[-1] == 'e' || p[-1] == 'E')) continue;
    buf[k++] = *p;
  }
  buf[k] = 0;
  if (!strpbrk(buf, ".eE") && k + 2 < n) {
    buf[k++] = '.';
    buf[k++] = '0';
    buf[k] = 0;
  }
}

static void out_float_lit(pctx *c, ir_dtype t, double v) {
  char b[64], d[32];
  bool deflt = t.code == IR_F32 && t.lanes == 1;
  const char *sfx = deflt ? "" : dt_str(t, d, sizeof d);
  if (isnan(v) || isinf(v)) {
    const char *w = isnan(v) ? "nan" : (v < 0 ? "-inf" : "inf");
    outf(c, "%s%s%s", w, deflt ? "" : "_", sfx);
    return;
  }
  fmt_float(b, sizeof b, v, t.code == IR_F64);
  outf(c, "%s%s", b, sfx);
}

static void out_int_lit(pctx *c, ir_dtype t, int64_t v) {
  char d[32];
  if (t.code == IR_BOOL && t.lanes == 1) {
    out(c, v ? "true" : "false");
    return;
  }
  if (t.code == IR_U32 || t.code == IR_U8)
    outf(c, "%" PRIu64, (uint64_t)v);
  else
    outf(c, "%" PRId64, v);
  if (!(t.code == IR_I64 && t.lanes == 1)) out(c, dt_str(t, d, sizeof d));
}

static bool is_negative_lit(const ir_expr *e) {
  if (e->kind == IR_INT_IMM)
    return e->u.ival < 0 && e->dtype.code != IR_BOOL && e->dtype.code != IR_U32 &&
           e->dtype.code != IR_U8;
  if (e->kind == IR_FLOAT_IMM) return signbit(e->u.fval) && !isnan(e->u.fval);
  return false;
}

/* ---- expressions ----------------------------------------------------------- */

static int expr_prec(const ir_expr *e) {
  if (ir_is_binop(e->kind) && binop_sym[e->kind]) return binop_prec[e->kind];
  if (e->kind == IR_NOT || is_negative_lit(e)) return PREC_UNARY;
  return PREC_PRIMARY;
}

static void pexpr(pctx *c, const ir_expr *e, int need);

static void pargs(pctx *c, int n, ir_expr *const *args) {
  for (int i = 0; i < n; i++) {
    if (i) out(c, ", ");
    pexpr(c, args[i], 0);
  }
}

/* open, the n expressions comma-separated, close */
static void pwrap(pctx *c, const char *open, int n, ir_expr *const *args, const char *close) {
  out(c, open);
  pargs(c, n, args);
  out(c, close);
}

static void out_string(pctx *c, const char *s);

/* Prints e, wrapped in parentheses when its precedence is below need. */
static void pexpr(pctx *c, const ir_expr *e, int need) {
  if (!e) {
    out(c, "<null>");
    return;
  }
  bool paren = expr_prec(e) < need;
  if (paren) out(c, "(");
  switch (e->kind) {
  case IR_INT_IMM: out_int_lit(c, e->dtype, e->u.ival); break;
  case IR_FLOAT_IMM: out_float_lit(c, e->dtype, e->u.fval); break;
  case IR_VAR: out(c, lookup(c, e->u.var, e->u.var ? e->u.var->name : NULL, "v")); break;
  case IR_NOT:
    out(c, "!");
    pexpr(c, e->u.un.a, PREC_UNARY);
    break;
  case IR_SELECT:
    pwrap(c, "select(", 3, (ir_expr *const[]){e->u.sel.cond, e->u.sel.t, e->u.sel.f}, ")");
    break;
  case IR_CAST: {
    const ir_expr *v = e->u.cast.value;
    bool lit = v && (v->kind == IR_INT_IMM || v->kind == IR_FLOAT_IMM);
    out_dtype(c, e->dtype);
    /* `f32(3)` would read back as a literal; `f32((3))` stays a cast. */
    out(c, lit ? "((" : "(");
    pexpr(c, v, 0);
    out(c, lit ? "))" : ")");
    break;
  }
  case IR_CALL:
    out(c, (unsigned)e->u.call.op < IR_INTRIN_COUNT ? intrin_name[e->u.call.op] : "?");
    pwrap(c, "(", e->u.call.nargs, e->u.call.args, ")");
    break;
  case IR_LOAD: {
    const ir_buffer *b = e->u.load.buf;
    out(c, lookup(c, b, b ? b->name : NULL, "buf"));
    pwrap(c, "[", e->u.load.nidx, e->u.load.idx, "]");
    break;
  }
  case IR_RAMP:
    pwrap(c, "ramp(", 2, (ir_expr *const[]){e->u.ramp.base, e->u.ramp.stride}, "");
    outf(c, ", %d)", e->u.ramp.lanes);
    break;
  case IR_BROADCAST:
    pwrap(c, "broadcast(", 1, &e->u.bcast.value, "");
    outf(c, ", %d)", e->u.bcast.lanes);
    break;
  case IR_CALL_EXTERN:
    out(c, "call_extern(");
    out_string(c, e->u.ext.name);
    out(c, ", ");
    out_dtype(c, e->dtype);
    for (int i = 0; i < e->u.ext.nargs; i++) {
      out(c, ", ");
      pexpr(c, e->u.ext.args[i], 0);
    }
    out(c, ")");
    break;
  case IR_ACCESS_PTR: {
    const ir_buffer *b = e->u.ptr.buf;
    out(c, "access_ptr(");
    out(c, lookup(c, b, b ? b->name : NULL, "buf"));
    out(c, ", ");
    pexpr(c, e->u.ptr.offset, 0);
    outf(c, ", %d)", e->u.ptr.rw);
    break;
  }
  case IR_REINTERPRET:
    out(c, "reinterpret(");
    out_dtype(c, e->dtype);
    out(c, ", ");
    pexpr(c, e->u.cast.value, 0);
    out(c, ")");
    break;
  case IR_STR_IMM: out_string(c, e->u.sval); break;
  default:
    if (ir_is_binop(e->kind)) {
      const char *sym = binop_sym[e->kind];
      if (sym) {
        int p = binop_prec[e->kind];
        pexpr(c, e->u.bin.a, p);
        outf(c, " %s ", sym);
        pexpr(c, e->u.bin.b, p + 1);
      } else {
        out(c, e->kind == IR_MIN ? "min(" : "max(");
        pexpr(c, e->u.bin.a, 0);
        out(c, ", ");
        pexpr(c, e->u.bin.b, 0);
        out(c, ")");
      }
    } else {
      outf(c, "<expr kind %d>", (int)e->kind);
    }
    break;
  }
  if (paren) out(c, ")");
}

/* ---- annotations, buffers, regions ----------------------------------------- */

static void out_string(pctx *c, const char *s) {
  out(c, "\"");
  for (const char *p = s ? s : ""; *p; p++) {
    if (*p == '"' || *p == '\\') out(c, "\\");
    ts_strbuf_appendn(c->sb, p, 1);
  }
  out(c, "\"");
}

static void pannots(pctx *c, int n, const ir_annot *anns) {
  out(c, "annot {");
  for (int i = 0; i < n; i++) {
    const ir_annot *a = &anns[i];
    if (i) out(c, ", ");
    if (is_ident(a->key))
      out(c, a->key);
    else
      out_string(c, a->key);
    out(c, " = ");
    switch (a->kind) {
    case IR_ANN_INT: outf(c, "%" PRId64, a->v.i); break;
    case IR_ANN_FLOAT: {
      char b[64];
      if (isnan(a->v.f))
        out(c, "nan");
      else if (isinf(a->v.f))
        out(c, a->v.f < 0 ? "-inf" : "inf");
      else {
        fmt_float(b, sizeof b, a->v.f, true);
        out(c, b);
      }
      break;
    }
    case IR_ANN_STR: out_string(c, a->v.s); break;
    case IR_ANN_EXPR:
      out(c, "expr(");
      pexpr(c, a->v.e, 0);
      out(c, ")");
      break;
    }
  }
  out(c, "}");
}

static bool has_storage_align(const ir_buffer *b) {
  if (!b->align_factor) return false;
  for (int i = 0; i < b->ndim; i++)
    if (b->align_factor[i]) return true;
  return false;
}

/* BUFDECL, for a buffer already given its name. */
static void pbufdecl(pctx *c, const ir_buffer *b, const char *name) {
  outf(c, "%s: ", name);
  out_dtype(c, b->dtype);
  pwrap(c, "[", b->ndim, b->shape, "]");
  if (b->strides) pwrap(c, " strides(", b->ndim, b->strides, ")");
  if (b->elem_offset) {
    out(c, " offset(");
    pexpr(c, b->elem_offset, 0);
    out(c, ")");
  }
  if (b->scope && strcmp(b->scope, "global")) {
    out(c, " scope(");
    out_string(c, b->scope);
    out(c, ")");
  }
  if (b->align) outf(c, " align(%" PRId64 ")", b->align);
  if (has_storage_align(b)) {
    out(c, " storage_align(");
    bool first = true;
    for (int i = 0; i < b->ndim; i++) {
      if (!b->align_factor[i]) continue;
      outf(c, "%s(%d, %" PRId64 ", %" PRId64 ")", first ? "" : ", ", i, b->align_factor[i],
           b->align_offset ? b->align_offset[i] : 0);
      first = false;
    }
    out(c, ")");
  }
}

static bool is_i64_one(const ir_expr *e) {
  return e && e->kind == IR_INT_IMM && e->u.ival == 1 && e->dtype.code == IR_I64 &&
         e->dtype.lanes == 1;
}

static void pregion(pctx *c, const ir_region *r) {
  out(c, lookup(c, r->buf, r->buf ? r->buf->name : NULL, "buf"));
  out(c, "[");
  for (int i = 0; i < r->ndim; i++) {
    if (i) out(c, ", ");
    pexpr(c, r->ranges[i].min, 0);
    if (!is_i64_one(r->ranges[i].extent)) {
      out(c, ":+");
      pexpr(c, r->ranges[i].extent, 0);
    }
  }
  out(c, "]");
}

static void pregions(pctx *c, int level, const char *kw, int n, const ir_region *rs) {
  if (n <= 0) return;
  indent(c, level);
  outf(c, "%s ", kw);
  for (int i = 0; i < n; i++) {
    if (i) out(c, ", ");
    pregion(c, &rs[i]);
  }
  out(c, "\n");
}

/* ---- statements ------------------------------------------------------------ */

static void pstmt(pctx *c, const ir_stmt *s, int level);

static bool body_empty(const ir_stmt *s) {
  if (!s) return true;
  if (s->kind != IR_SEQ) return false;
  for (int i = 0; i < s->u.seq.n; i++)
    if (!body_empty(s->u.seq.stmts[i])) return false;
  return true;
}

/* " {", the body one level in, "}" — or " {}" for an empty body. */
static void pbody(pctx *c, const ir_stmt *s, int level) {
  if (body_empty(s)) {
    out(c, " {}\n");
    return;
  }
  out(c, " {\n");
  pstmt(c, s, level + 1);
  indent(c, level);
  out(c, "}\n");
}

static bool is_true(const ir_expr *e) {
  return !e || (e->kind == IR_INT_IMM && e->dtype.code == IR_BOOL && e->dtype.lanes == 1 &&
                e->u.ival != 0);
}

static const char iter_letter[] = {[IR_ITER_S] = 'S', [IR_ITER_R] = 'R', [IR_ITER_OPAQUE] = 'O'};

static void pblock(pctx *c, const ir_stmt *s, int level) {
  const ir_block *b = s->u.realize.block;
  size_t mark = c->nbinds;
  indent(c, level);
  out(c, "block ");
  if (is_ident(b->name))
    out(c, b->name);
  else
    out_string(c, b->name);
  out(c, "(");
  for (int i = 0; i < b->niter; i++) {
    const ir_iter_var *iv = &b->iters[i];
    ir_expr *val = s->u.realize.iter_values ? s->u.realize.iter_values[i] : NULL;
    if (i) out(c, ", ");
    /* The binding is in the enclosing scope: render it before the iter var
     * is defined (names are unique function-wide, so it cannot be shadowed
     * in the text either). */
    ts_strbuf tmp;
    ts_strbuf_init(&tmp);
    ts_strbuf *saved = c->sb;
    c->sb = &tmp;
    pexpr(c, val, 0);
    c->sb = saved;
    const char *nm = define(c, iv->var, iv->var ? iv->var->name : NULL, "v");
    out(c, nm);
    if (iv->var && !(iv->var->dtype.code == IR_I64 && iv->var->dtype.lanes == 1)) {
      out(c, ": ");
      out_dtype(c, iv->var->dtype);
    }
    outf(c, ": %c(", (unsigned)iv->type <= IR_ITER_OPAQUE ? iter_letter[iv->type] : '?');
    pexpr(c, iv->dom.min, 0);
    out(c, ", ");
    pexpr(c, iv->dom.extent, 0);
    out(c, ") = ");
    if (tmp.oom) c->oom = true;
    out(c, tmp.data ? tmp.data : "");
    ts_strbuf_fini(&tmp);
  }
  out(c, ")");
  if (!is_true(s->u.realize.predicate)) {
    /* The predicate speaks of the enclosing loop vars, which keep their
     * names (iter names never shadow them). */
    out(c, " where ");
    pexpr(c, s->u.realize.predicate, 0);
  }
  out(c, " {\n");
  for (int i = 0; i < b->nalloc; i++) {
    const ir_buffer *ab = b->allocs[i];
    indent(c, level + 1);
    out(c, "alloc ");
    pbufdecl(c, ab, define(c, ab, ab->name, "buf"));
    out(c, "\n");
  }
  pregions(c, level + 1, "reads", b->nreads, b->reads);
  pregions(c, level + 1, "writes", b->nwrites, b->writes);
  if (b->nannot > 0) {
    indent(c, level + 1);
    pannots(c, b->nannot, b->annots);
    out(c, "\n");
  }
  if (b->init) {
    indent(c, level + 1);
    out(c, "init");
    pbody(c, b->init, level + 1);
  }
  if (b->body) pstmt(c, b->body, level + 1);
  indent(c, level);
  out(c, "}\n");
  c->nbinds = mark;
}

static void pstmt(pctx *c, const ir_stmt *s, int level) {
  if (!s) return;
  size_t mark = c->nbinds;
  switch (s->kind) {
  case IR_SEQ:
    for (int i = 0; i < s->u.seq.n; i++) pstmt(c, s->u.seq.stmts[i], level);
    break;
  case IR_FOR: {
    const ir_var *v = s->u.loop.var;
    indent(c, level);
    /* min and extent are in the enclosing scope; the loop var is new. */
    ts_strbuf tmp;
    ts_strbuf_init(&tmp);
    ts_strbuf *saved = c->sb;
    c->sb = &tmp;
    pexpr(c, s->u.loop.min, 0);
    out(c, ", ");
    pexpr(c, s->u.loop.extent, 0);
    c->sb = saved;
    if (tmp.oom) c->oom = true;
    outf(c, "for %s", define(c, v, v ? v->name : NULL, "i"));
    if (v && !(v->dtype.code == IR_I64 && v->dtype.lanes == 1)) {
      out(c, ": ");
      out_dtype(c, v->dtype);
    }
    unsigned k = (unsigned)s->u.loop.kind;
    outf(c, " in %s(%s", k <= IR_FOR_THREAD_BINDING ? for_kind_name[k] : "?",
         tmp.data ? tmp.data : "");
    ts_strbuf_fini(&tmp);
    if (s->u.loop.thread) {
      out(c, ", ");
      out_string(c, s->u.loop.thread);
    }
    out(c, ")");
    if (s->u.loop.nannot > 0) {
      out(c, " ");
      pannots(c, s->u.loop.nannot, s->u.loop.annots);
    }
    pbody(c, s->u.loop.body, level);
    break;
  }
  case IR_BLOCK_REALIZE: pblock(c, s, level); break;
  case IR_IF:
    indent(c, level);
    out(c, "if ");
    pexpr(c, s->u.ifs.cond, 0);
    if (!s->u.ifs.else_s) {
      pbody(c, s->u.ifs.then_s, level);
      break;
    }
    if (body_empty(s->u.ifs.then_s)) {
      out(c, " {} else");
    } else {
      out(c, " {\n");
      pstmt(c, s->u.ifs.then_s, level + 1);
      indent(c, level);
      out(c, "} else");
    }
    pbody(c, s->u.ifs.else_s, level);
    break;
  case IR_LET: {
    const ir_var *v = s->u.let.var;
    ts_strbuf tmp;
    ts_strbuf_init(&tmp);
    ts_strbuf *saved = c->sb;
    c->sb = &tmp;
    pexpr(c, s->u.let.value, 0);
    c->sb = saved;
    if (tmp.oom) c->oom = true;
    indent(c, level);
    outf(c, "let %s: ", define(c, v, v ? v->name : NULL, "x"));
    out_dtype(c, v ? v->dtype : s->u.let.value->dtype);
    outf(c, " = %s", tmp.data ? tmp.data : "");
    ts_strbuf_fini(&tmp);
    pbody(c, s->u.let.body, level);
    break;
  }
  case IR_ALLOCATE: {
    const ir_buffer *b = s->u.alloc.buf;
    indent(c, level);
    out(c, "allocate ");
    pbufdecl(c, b, define(c, b, b->name, "buf"));
    pbody(c, s->u.alloc.body, level);
    break;
  }
  case IR_EVALUATE:
    indent(c, level);
    out(c, "eval ");
    pexpr(c, s->u.eval.value, 0);
    out(c, "\n");
    break;
  case IR_STORE: {
    const ir_buffer *b = s->u.store.buf;
    indent(c, level);
    out(c, lookup(c, b, b ? b->name : NULL, "buf"));
    pwrap(c, "[", s->u.store.nidx, s->u.store.idx, "] = ");
    pexpr(c, s->u.store.value, 0);
    if (s->u.store.predicate) {
      out(c, " if ");
      pexpr(c, s->u.store.predicate, 0);
    }
    out(c, "\n");
    break;
  }
  default:
    indent(c, level);
    outf(c, "<stmt kind %d>\n", (int)s->kind);
    break;
  }
  c->nbinds = mark;
}

/* ---- public ---------------------------------------------------------------- */

void ir_print_expr(ts_strbuf *sb, const ir_expr *e) {
  pctx c;
  pctx_init(&c, sb);
  pexpr(&c, e, 0);
  pctx_fini(&c);
}

void ir_print_stmt(ts_strbuf *sb, const ir_stmt *s, int level) {
  pctx c;
  pctx_init(&c, sb);
  pstmt(&c, s, level);
  pctx_fini(&c);
}

void ir_print_func(ts_strbuf *sb, const ir_func *f) {
  pctx c;
  pctx_init(&c, sb);
  /* Definition order (= the order names are claimed): params, then syms. */
  const char **pname = NULL, **sname = NULL;
  if (f->nparams > 0) pname = ts_arena_alloc(&c.names, sizeof *pname * (size_t)f->nparams);
  if (f->nsyms > 0) sname = ts_arena_alloc(&c.names, sizeof *sname * (size_t)f->nsyms);
  if ((f->nparams > 0 && !pname) || (f->nsyms > 0 && !sname)) {
    c.oom = true;
    pctx_fini(&c);
    return;
  }
  for (int i = 0; i < f->nparams; i++)
    pname[i] = define(&c, f->params[i], f->params[i]->name, "buf");
  for (int i = 0; i < f->nsyms; i++) sname[i] = define(&c, f->syms[i], f->syms[i]->name, "n");

  out(&c, "func ");
  out(&c, sanitize(&c, f->name, "main"));
  out(&c, "(");
  int nin = f->ninputs < f->nparams ? f->ninputs : f->nparams;
  for (int i = 0; i < nin; i++) {
    if (i) out(&c, ", ");
    pbufdecl(&c, f->params[i], pname[i]);
  }
  out(&c, ")");
  for (int i = nin; i < f->nparams; i++) {
    out(&c, i == nin ? " -> " : ", ");
    pbufdecl(&c, f->params[i], pname[i]);
  }
  if (f->nsyms > 0) {
    out(&c, " syms(");
    for (int i = 0; i < f->nsyms; i++) {
      const ir_var *v = f->syms[i];
      if (i) out(&c, ", ");
      out(&c, sname[i]);
      if (!(v->dtype.code == IR_I64 && v->dtype.lanes == 1)) {
        out(&c, ": ");
        out_dtype(&c, v->dtype);
      }
    }
    out(&c, ")");
  }
  if (f->nannot > 0) {
    out(&c, " ");
    pannots(&c, f->nannot, f->annots);
  }
  pbody(&c, f->body, 0);
  pctx_fini(&c);
}

/* The printed text (heap), or NULL when printing ran out of memory. */
static char *take_text(ts_strbuf *sb) {
  if (sb->oom) {
    ts_strbuf_fini(sb);
    return NULL;
  }
  return ts_strbuf_take(sb);
}

char *ir_func_to_string(const ir_func *f) {
  ts_strbuf sb;
  ts_strbuf_init(&sb);
  ir_print_func(&sb, f);
  return take_text(&sb);
}

char *ir_expr_to_string(const ir_expr *e) {
  ts_strbuf sb;
  ts_strbuf_init(&sb);
  ir_print_expr(&sb, e);
  return take_text(&sb);
}
