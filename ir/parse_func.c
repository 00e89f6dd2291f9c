/* parse_func.c — the loop-IR script front-end (`func ...`, docs/SCRIPT.md):
 * what the printer writes, read back node by node (buffers, for, blocks
 * with regions and annotations). Shared parser pieces are in parse_int.h. */
#include <string.h>

#include "parse_int.h"

static ir_stmt *parse_sstmt(P *p);

/* '{' STMT* '}' as one statement: a single one stays itself, else a sequence. */
static ir_stmt *parse_block_body(P *p) {
  ps_expect(p, "{");
  ir_stmt **v = NULL;
  int n = 0, cap = 0;
  while (!ps_accept(p, "}")) {
    if (ps_cur(p)->kind == IR_TK_EOF) ps_fail(p, ps_cur(p), TS_EPARSE, "expected '}' but found end of input");
    PUSH(v, n, cap, parse_sstmt(p));
  }
  return ps_mk_body(p, v, n);
}

static int64_t expect_int_lit(P *p, const char *what) {
  bool neg = ps_accept(p, "-");
  const ir_token *t = ps_cur(p);
  if (t->kind != IR_TK_INT) ps_fail(p, t, TS_EPARSE, "expected %s but found %s", what, ps_describe(p, t));
  return ps_parse_number(p, neg).e->u.ival;
}

static ir_buffer *parse_bufdecl(P *p) {
  const ir_token *t = ps_expect_ident(p, "a buffer name");
  ps_expect(p, ":");
  ir_dtype dt = ps_expect_dtype(p);
  ps_expect(p, "[");
  pv *a;
  int n = ps_parse_args(p, "]", &a);
  ir_expr **shape = n ? CK(TS_ANEWN(p->a, ir_expr *, n)) : NULL;
  for (int i = 0; i < n; i++) {
    ps_need_int(p, t, a[i], "a shape extent");
    shape[i] = ps_fold_const(p, a[i].e);
  }
  const char *scope = "global";
  const ir_token *sct = NULL;
  ir_expr **strides = NULL, *offset = NULL;
  int64_t align = 0, *af = NULL, *ao = NULL;
  bool seen[5] = {0};
  for (;;) {
    const ir_token *c = ps_cur(p);
    if (c->kind != IR_TK_IDENT || !ps_tis(p, ps_peekn(p, 1), "(")) break;
    int which = ps_teq(p, c, "strides") ? 0 : ps_teq(p, c, "offset") ? 1 : ps_teq(p, c, "scope") ? 2
              : ps_teq(p, c, "align") ? 3 : ps_teq(p, c, "storage_align") ? 4 : -1;
    if (which < 0) break;
    if (seen[which]) ps_fail(p, c, TS_EPARSE, "duplicate '%.*s'", (int)c->len, p->lx.src + c->pos);
    seen[which] = true;
    ps_next(p);
    ps_next(p);
    if (which == 0) {
      pv *s;
      int ns = ps_parse_args(p, ")", &s);
      if (ns != n) ps_fail(p, c, TS_ESHAPE, "%d strides for a %d-d buffer", ns, n);
      strides = n ? CK(TS_ANEWN(p->a, ir_expr *, n)) : NULL;
      for (int i = 0; i < n; i++) {
        ps_need_int(p, c, s[i], "a stride");
        strides[i] = s[i].e;
      }
    } else if (which == 1) {
      offset = ps_parse_int_expr(p, "an offset");
      ps_expect(p, ")");
    } else if (which == 2) {
      sct = ps_cur(p);
      if (sct->kind != IR_TK_STR) ps_fail(p, sct, TS_EPARSE, "expected a scope string but found %s", ps_describe(p, sct));
      scope = sct->str;
      ps_next(p);
      ps_expect(p, ")");
    } else if (which == 3) {
      align = expect_int_lit(p, "an alignment");
      ps_expect(p, ")");
    } else {
      af = n ? CK(TS_ANEWN(p->a, int64_t, n)) : NULL;
      ao = n ? CK(TS_ANEWN(p->a, int64_t, n)) : NULL;
      for (;;) {
        const ir_token *at = ps_expect(p, "(");
        int64_t axis = expect_int_lit(p, "an axis");
        ps_expect(p, ",");
        int64_t fac = expect_int_lit(p, "a factor");
        ps_expect(p, ",");
        int64_t off = expect_int_lit(p, "an offset");
        ps_expect(p, ")");
        if (axis < 0 || axis >= n) ps_fail(p, at, TS_ESHAPE, "storage_align axis %lld out of range", (long long)axis);
        af[axis] = fac;
        ao[axis] = off;
        if (ps_accept(p, ")")) break;
        ps_expect(p, ",");
      }
    }
  }
  ir_buffer *b = CK(ir_buffer_new(p->a, ps_tname(p, t), dt, n, shape, scope));
  b->strides = strides;
  b->elem_offset = offset;
  b->align = align;
  b->align_factor = af;
  b->align_offset = ao;
  return b;
}

static void parse_region(P *p, ir_region *r) {
  const ir_token *t = ps_expect_ident(p, "a buffer name");
  ent *e = ps_scope_find(p, t, E_BUF);
  if (!e)
    ps_fail(p, t, TS_ENOTFOUND, "unknown tensor '%.*s'", (int)(t->len > 64 ? 64 : t->len), p->lx.src + t->pos);
  ir_buffer *b = e->ptr;
  ps_expect(p, "[");
  ir_range *v = NULL;
  int n = 0, cap = 0;
  if (!ps_accept(p, "]")) {
    for (;;) {
      ir_range rg;
      rg.min = ps_fold_const(p, ps_parse_int_expr(p, "a region bound"));
      if (ps_accept(p, ":+")) rg.extent = ps_fold_const(p, ps_parse_int_expr(p, "a region extent"));
      else rg.extent = CK(ir_i64(p->a, 1));
      PUSH(v, n, cap, rg);
      if (ps_accept(p, "]")) break;
      ps_expect(p, ",");
    }
  }
  if (n != b->ndim)
    ps_fail(p, t, TS_ESHAPE, "'%s' has %d dimension%s but the region has %d", b->name, b->ndim,
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
    if (!ps_accept(p, ",")) break;
  }
  *n = k;
  *out = v;
}

static bool kw(P *p, const char *s, const char *next_is) {
  const ir_token *t = ps_cur(p);
  if (t->kind != IR_TK_IDENT || !ps_teq(p, t, s)) return false;
  if (!next_is) return ps_peekn(p, 1)->kind == IR_TK_IDENT;
  return ps_tis(p, ps_peekn(p, 1), next_is);
}

static ir_stmt *parse_for(P *p) {
  ps_next(p);
  const ir_token *vt = ps_expect_ident(p, "a loop variable");
  ir_dtype dt = ir_dt(IR_I64);
  if (ps_accept(p, ":")) dt = ps_expect_dtype(p);
  if (!ps_teq(p, ps_cur(p), "in")) ps_fail(p, ps_cur(p), TS_EPARSE, "expected 'in' but found %s", ps_describe(p, ps_cur(p)));
  ps_next(p);
  const ir_token *kt = ps_cur(p);
  static const char *const kinds[] = {"serial", "parallel", "vectorized", "unrolled", "thread"};
  int kind = -1;
  for (int i = 0; i < 5; i++)
    if (kt->kind == IR_TK_IDENT && ps_teq(p, kt, kinds[i])) kind = i;
  if (kind < 0)
    ps_fail(p, kt, TS_EPARSE, "expected a loop kind (serial, parallel, vectorized, unrolled, thread) but found %s",
            ps_describe(p, kt));
  ps_next(p);
  ps_expect(p, "(");
  ir_expr *mn = ps_fold_const(p, ps_parse_int_expr(p, "a loop bound"));
  ps_expect(p, ",");
  ir_expr *ext = ps_fold_const(p, ps_parse_int_expr(p, "a loop extent"));
  const char *tag = NULL;
  if (ps_accept(p, ",")) {
    const ir_token *st = ps_cur(p);
    if (st->kind != IR_TK_STR) ps_fail(p, st, TS_EPARSE, "expected a thread tag string but found %s", ps_describe(p, st));
    tag = st->str;
    ps_next(p);
  }
  ps_expect(p, ")");
  ir_var *v = CK(ir_var_new(p->a, ps_tname(p, vt), dt));
  int save = p->nsc;
  ps_scope_push(p, v->name, E_VAR, v); /* annotations see the loop var too */
  int nann = 0;
  ir_annot *anns = NULL;
  if (kw(p, "annot", "{")) {
    ps_next(p);
    ps_parse_annots(p, &nann, &anns);
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
  ps_next(p);
  const ir_token *nt = ps_cur(p);
  if (nt->kind != IR_TK_IDENT && nt->kind != IR_TK_STR)
    ps_fail(p, nt, TS_EPARSE, "expected a block name but found %s", ps_describe(p, nt));
  ps_next(p);
  ir_block *b = CK(ir_block_new(p->a, nt->kind == IR_TK_STR ? nt->str : ps_tname(p, nt)));
  ps_expect(p, "(");
  ir_iter_var *iters = NULL;
  ir_expr **vals = NULL;
  int n = 0, cap = 0, capv = 0, nv = 0;
  if (!ps_accept(p, ")")) {
    for (;;) {
      const ir_token *it = ps_expect_ident(p, "an iter var");
      ps_expect(p, ":");
      ir_dtype dt = ir_dt(IR_I64);
      if (ps_tok_dtype(p, ps_cur(p), &dt) && ps_tis(p, ps_peekn(p, 1), ":")) {
        ps_next(p);
        ps_next(p);
      } else {
        dt = ir_dt(IR_I64);
      }
      const ir_token *tt = ps_cur(p);
      ir_iter_type ty;
      if (tt->kind == IR_TK_IDENT && ps_teq(p, tt, "S")) ty = IR_ITER_S;
      else if (tt->kind == IR_TK_IDENT && ps_teq(p, tt, "R")) ty = IR_ITER_R;
      else if (tt->kind == IR_TK_IDENT && ps_teq(p, tt, "O")) ty = IR_ITER_OPAQUE;
      else ps_fail(p, tt, TS_EPARSE, "expected an iter type S, R or O but found %s", ps_describe(p, tt));
      ps_next(p);
      ps_expect(p, "(");
      ir_iter_var iv;
      iv.dom.min = ps_fold_const(p, ps_parse_int_expr(p, "a domain bound"));
      ps_expect(p, ",");
      iv.dom.extent = ps_fold_const(p, ps_parse_int_expr(p, "a domain extent"));
      ps_expect(p, ")");
      ps_expect(p, "=");
      ir_expr *val = ps_parse_expr(p).e;
      iv.var = CK(ir_var_new(p->a, ps_tname(p, it), dt));
      iv.type = ty;
      PUSH(iters, n, cap, iv);
      PUSH(vals, nv, capv, val);
      if (ps_accept(p, ")")) break;
      ps_expect(p, ",");
    }
  }
  ir_expr *pred = NULL;
  if (ps_cur(p)->kind == IR_TK_IDENT && ps_teq(p, ps_cur(p), "where")) {
    ps_next(p);
    pred = ps_parse_expr(p).e;
  }
  b->niter = n;
  b->iters = iters;
  ps_expect(p, "{");
  int save = p->nsc;
  for (int i = 0; i < n; i++) ps_scope_push(p, iters[i].var->name, E_VAR, iters[i].var);
  ir_buffer **allocs = NULL;
  int na = 0, capa = 0;
  while (kw(p, "alloc", NULL)) {
    ps_next(p);
    ir_buffer *ab = parse_bufdecl(p);
    PUSH(allocs, na, capa, ab);
    ps_scope_push(p, ab->name, E_BUF, ab);
  }
  b->nalloc = na;
  b->allocs = allocs;
  if (kw(p, "reads", NULL)) {
    ps_next(p);
    parse_regions(p, &b->nreads, &b->reads);
  }
  if (kw(p, "writes", NULL)) {
    ps_next(p);
    parse_regions(p, &b->nwrites, &b->writes);
  }
  if (kw(p, "annot", "{")) {
    ps_next(p);
    ps_parse_annots(p, &b->nannot, &b->annots);
  }
  if (kw(p, "init", "{")) {
    ps_next(p);
    b->init = parse_block_body(p);
  }
  ir_stmt **v = NULL;
  int ns = 0, caps = 0;
  while (!ps_accept(p, "}")) {
    if (ps_cur(p)->kind == IR_TK_EOF) ps_fail(p, ps_cur(p), TS_EPARSE, "expected '}' but found end of input");
    PUSH(v, ns, caps, parse_sstmt(p));
  }
  b->body = ps_mk_body(p, v, ns);
  p->nsc = save;
  return CK(ir_realize(p->a, b, vals, pred ? pred : CK(ir_bool(p->a, true))));
}

static ir_stmt *parse_sstmt_inner(P *p) {
  const ir_token *t = ps_cur(p);
  if (t->kind == IR_TK_IDENT && ps_tis(p, ps_peekn(p, 1), "[")) {
    /* store */
    ps_next(p);
    ent *e = ps_scope_find(p, t, E_BUF);
    ir_buffer *b = e ? e->ptr : NULL;
    pv *a;
    int n = ps_parse_indices(p, t, b, &a);
    int h;
    for (int i = 0; i < n; i++) ps_need_int(p, t, a[i], "an index");
    ir_expr **idx = ps_exprs_of(p, a, n, &h);
    ps_expect(p, "=");
    ir_expr *val = ps_parse_expr(p).e;
    ir_stmt *s = CK(ir_store(p->a, b, n, idx, val));
    if (ps_cur(p)->kind == IR_TK_IDENT && ps_teq(p, ps_cur(p), "if")) {
      /* a store predicate, unless this 'if' starts the next statement */
      int save = p->i;
      ps_next(p);
      ir_expr *pr = ps_parse_expr(p).e;
      if (ps_is(p, "{")) p->i = save;
      else s->u.store.predicate = pr;
    }
    return s;
  }
  if (t->kind != IR_TK_IDENT)
    ps_fail(p, t, TS_EPARSE, "expected a statement but found %s", ps_describe(p, t));
  if (ps_teq(p, t, "for")) return parse_for(p);
  if (ps_teq(p, t, "block")) return parse_block(p);
  if (ps_teq(p, t, "if")) {
    ps_next(p);
    ir_expr *c = ps_parse_expr(p).e;
    ir_stmt *th = parse_block_body(p);
    ir_stmt *el = NULL;
    if (ps_cur(p)->kind == IR_TK_IDENT && ps_teq(p, ps_cur(p), "else")) {
      ps_next(p);
      el = parse_block_body(p);
    }
    return CK(ir_if(p->a, c, th, el));
  }
  if (ps_teq(p, t, "let")) {
    ps_next(p);
    const ir_token *vt = ps_expect_ident(p, "a variable name");
    ps_expect(p, ":");
    ir_dtype dt = ps_expect_dtype(p);
    ps_expect(p, "=");
    ir_expr *val = ps_parse_expr(p).e;
    ir_var *v = CK(ir_var_new(p->a, ps_tname(p, vt), dt));
    int save = p->nsc;
    ps_scope_push(p, v->name, E_VAR, v);
    ir_stmt *body = parse_block_body(p);
    p->nsc = save;
    return CK(ir_let(p->a, v, val, body));
  }
  if (ps_teq(p, t, "allocate")) {
    ps_next(p);
    ir_buffer *b = parse_bufdecl(p);
    int save = p->nsc;
    ps_scope_push(p, b->name, E_BUF, b);
    ir_stmt *body = parse_block_body(p);
    p->nsc = save;
    return CK(ir_allocate(p->a, b, body));
  }
  if (ps_teq(p, t, "eval")) {
    ps_next(p);
    return CK(ir_evaluate(p->a, ps_parse_expr(p).e));
  }
  ps_fail(p, t, TS_EPARSE, "expected a statement but found %s", ps_describe(p, t));
}

static ir_stmt *parse_sstmt(P *p) {
  ps_enter(p);
  ir_stmt *s = parse_sstmt_inner(p);
  p->depth--;
  return s;
}

ir_func *ps_parse_func(P *p) {
  ps_next(p); /* 'func' */
  p->dsl = false;
  p->m = M_SCRIPT;
  p->nsc = 0;
  const ir_token *nt = ps_expect_ident(p, "a function name");
  ir_func *f = CK(ir_func_new(p->a, ps_tname(p, nt)));
  /* syms(...) is written after the params that use it: declare it first. */
  int depth = 0, symsat = -1, symsend = -1;
  for (int j = p->i; j < p->nt; j++) {
    const ir_token *t = &p->t[j];
    if (t->kind == IR_TK_EOF) break;
    if (depth == 0 && t->kind == IR_TK_IDENT && j + 1 < p->nt) {
      if (ps_teq(p, t, "syms") && ps_tis(p, &p->t[j + 1], "(")) {
        symsat = j;
        break;
      }
      if (ps_teq(p, t, "annot") && ps_tis(p, &p->t[j + 1], "{")) {
        int dd = 0;
        for (j = j + 1; j < p->nt && p->t[j].kind != IR_TK_EOF; j++) {
          if (ps_tis(p, &p->t[j], "{")) dd++;
          else if (ps_tis(p, &p->t[j], "}") && --dd == 0) break;
        }
        continue;
      }
    }
    if (t->kind != IR_TK_PUNCT) continue;
    if (ps_tis(p, t, "{") && depth == 0) break;
    if (ps_tis(p, t, "(") || ps_tis(p, t, "[") || ps_tis(p, t, "{")) depth++;
    else if (ps_tis(p, t, ")") || ps_tis(p, t, "]") || ps_tis(p, t, "}")) depth--;
  }
  ir_var **syms = NULL;
  int nsyms = 0, capsyms = 0;
  if (symsat >= 0) {
    int save = p->i;
    p->i = symsat + 2;
    if (!ps_accept(p, ")")) {
      for (;;) {
        const ir_token *st = ps_expect_ident(p, "a sym name");
        ir_dtype sdt = ir_dt(IR_I64);
        if (ps_accept(p, ":")) sdt = ps_expect_dtype(p);
        ir_var *v = CK(ir_var_new(p->a, ps_tname(p, st), sdt));
        PUSH(syms, nsyms, capsyms, v);
        ps_scope_push(p, v->name, E_VAR, v);
        if (ps_accept(p, ")")) break;
        ps_expect(p, ",");
      }
    }
    symsend = p->i;
    p->i = save;
  }
  ps_expect(p, "(");
  ir_buffer **params = NULL;
  int np = 0, capp = 0;
  if (!ps_accept(p, ")")) {
    for (;;) {
      ir_buffer *b = parse_bufdecl(p);
      PUSH(params, np, capp, b);
      ps_scope_push(p, b->name, E_BUF, b);
      if (ps_accept(p, ")")) break;
      ps_expect(p, ",");
    }
  }
  int nin = np;
  if (ps_accept(p, "->")) {
    for (;;) {
      ir_buffer *b = parse_bufdecl(p);
      PUSH(params, np, capp, b);
      ps_scope_push(p, b->name, E_BUF, b);
      if (!ps_accept(p, ",")) break;
    }
  }
  if (kw(p, "syms", "(")) {
    if (p->i != symsat) ps_fail(p, ps_cur(p), TS_EPARSE, "unexpected 'syms'");
    p->i = symsend; /* already parsed above */
  }
  if (kw(p, "annot", "{")) {
    ps_next(p);
    ps_parse_annots(p, &f->nannot, &f->annots);
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
