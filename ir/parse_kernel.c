/* parse_kernel.c — the compute DSL front-end (`kernel ...`, docs/SCRIPT.md):
 * tensors declared with shapes, statements in index notation lowered here
 * into loop nests of blocks (reductions get an init, intermediates are
 * allocated). Shared parser pieces are in parse_int.h. */
#include <math.h>
#include <string.h>

#include "arith/arith.h"
#include "parse_int.h"

static ir_expr **parse_shape(P *p, int *ndim) {
  ps_expect(p, "[");
  ir_expr **v = NULL;
  int n = 0, cap = 0;
  pmode save = p->m;
  p->m = M_SHAPE;
  if (!ps_accept(p, "]")) {
    for (;;) {
      ir_expr *e = ps_fold_const(p, ps_parse_int_expr(p, "a shape extent"));
      PUSH(v, n, cap, e);
      if (ps_accept(p, "]")) break;
      ps_expect(p, ",");
    }
  }
  p->m = save;
  *ndim = n;
  return v;
}

static void check_new_tensor_name(P *p, const ir_token *t) {
  if (ps_ktensor_find(p, t))
    ps_fail(p, t, TS_EPARSE, "'%.*s' is already declared", (int)t->len, p->lx.src + t->pos);
  if (ps_ksym_find(p, t))
    ps_fail(p, t, TS_EPARSE, "'%.*s' is a symbolic size, not a tensor", (int)t->len, p->lx.src + t->pos);
}

static ktensor *add_tensor(P *p, const ir_token *t, int role, ir_dtype dt, int ndim, ir_expr **shape) {
  ktensor k;
  memset(&k, 0, sizeof k);
  k.name = ps_tname(p, t);
  k.role = role;
  k.decl = t;
  if (shape || ndim == 0) k.buf = CK(ir_buffer_new(p->a, k.name, dt, ndim, shape, "global"));
  PUSH(p->kts, p->nkt, p->capkt, k);
  return &p->kts[p->nkt - 1];
}

/* `DTYPE[SHAPE]` of tensor t: declares it with role. */
static ktensor *add_typed_tensor(P *p, const ir_token *t, int role) {
  const ir_token *dtt = ps_cur(p);
  ir_dtype dt = ps_expect_dtype(p);
  if (dt.lanes != 1 || dt.code == IR_HANDLE)
    ps_fail(p, dtt, TS_ETYPE, "a tensor's dtype must be a scalar number type");
  int ndim;
  ir_expr **shape = parse_shape(p, &ndim);
  return add_tensor(p, t, role, dt, ndim, shape);
}

static void parse_tensor_decl(P *p, int role) {
  const ir_token *t = ps_expect_ident(p, "a tensor name");
  check_new_tensor_name(p, t);
  ps_expect(p, ":");
  add_typed_tensor(p, t, role);
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
    ps_fail(p, t, TS_ETYPE, "cannot accumulate into bool with this operator");
  }
  if (!ir_dtype_is_int(dt)) ps_fail(p, t, TS_ETYPE, "cannot reduce into %s", ps_dts(dt, b1));
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
/* The optional `for v in lo..hi, ...` clause: explicit index ranges. */
static void dsl_for_clause(P *p) {
  if (!(ps_cur(p)->kind == IR_TK_IDENT && ps_teq(p, ps_cur(p), "for"))) return;
  ps_next(p);
  for (;;) {
    const ir_token *vt = ps_expect_ident(p, "a loop variable");
    int k = ps_kvar_find(p, vt);
    if (k < 0) {
      if (ps_ksym_find(p, vt) || ps_ktensor_find(p, vt) || ps_is_func_name(p, vt))
        ps_fail(p, vt, TS_EPARSE, "'%.*s' cannot be an index variable (it names something else)",
                (int)vt->len, p->lx.src + vt->pos);
      k = ps_kvar_new(p, vt, -1);
    }
    if (p->kvs[k].from_for)
      ps_fail(p, vt, TS_EPARSE, "two ranges for '%s'", p->kvs[k].name);
    if (!ps_teq(p, ps_cur(p), "in")) ps_fail(p, ps_cur(p), TS_EPARSE, "expected 'in' but found %s", ps_describe(p, ps_cur(p)));
    ps_next(p);
    p->m = M_RANGE;
    const ir_token *lot = ps_cur(p);
    ir_expr *lo = ps_fold_const(p, ps_parse_int_expr(p, "a range bound"));
    ps_expect(p, "..");
    ir_expr *hi = ps_fold_const(p, ps_parse_int_expr(p, "a range bound"));
    p->m = M_BODY;
    ir_expr *ext = ps_fold_sub(p, hi, lo);
    int64_t ev;
    if (ir_as_int(ext, &ev) && ev <= 0) ps_fail(p, lot, TS_ESHAPE, "empty range %lld..", (long long)ev);
    kvar *v = &p->kvs[k];
    v->min = lo;
    v->ext = ext;
    v->ranged = v->from_for = true;
    if (!ps_accept(p, ",")) break;
  }
}

/* Every index variable gets a range (from the left-hand side, a for
 * clause, or the dimension it indexes bare); '=' has no reduction vars;
 * bare uses stay inside the dimension they index. */
static void dsl_check_ranges(P *p, bool reduce) {
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
    ps_fail(p, v->tok, TS_ESHAPE, "cannot infer the range of '%s'; add 'for %s in 0..N'", v->name, v->name);
  }
  if (!reduce && nred)
    for (int k = 0; k < p->nkv; k++)
      if (p->kvs[k].lhs_dim < 0)
        ps_fail(p, p->kvs[k].tok, TS_EPARSE,
                "'%s' is not an index of the left-hand side; use a reduction (+=, *=, max=, min=)",
                p->kvs[k].name);
  /* bare uses must stay inside the dimension they index */
  for (int i = 0; i < p->nbare; i++) {
    bare *b = &p->bares[i];
    kvar *v = &p->kvs[b->var];
    ir_expr *end = ps_fold_add(p, v->min, v->ext);
    int64_t ce, cd;
    bool ke = ir_as_int(end, &ce), kd = ir_as_int(b->ext, &cd);
    bool bad = (ke && kd) ? ce > cd : (!ke && !kd) ? !ps_same_expr(end, b->ext) : false;
    if (bad)
      ps_fail(p, b->tok, TS_ESHAPE,
              "shape mismatch: '%s' ranges over a different extent than dimension %d of '%s'", v->name,
              b->dim, b->buf->name);
  }
}

/* The block of one statement over the index vars (init + update for a
 * reduction), its regions, in a loop nest. */
static ir_stmt *dsl_block(P *p, const ir_token *tt, ktensor *T, int nlhs, bool reduce, ir_expr_kind op,
                          const ir_token *opt, ir_expr *rhs, ir_expr *cond) {
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
    blk->body = CK(ir_store(p->a, buf, nlhs, idx, rhs));
  } else {
    ir_expr *id = identity(p, opt, op, dt);
    ir_expr *val = rhs;
    if (cond) val = CK(ir_select(p->a, cond, val, id));
    ir_expr *old = CK(ir_load(p->a, buf, nlhs, idx));
    ir_expr *nv = CK(ir_binop(p->a, op, old, val));
    blk->init = CK(ir_store(p->a, buf, nlhs, idx, id));
    blk->body = CK(ir_store(p->a, buf, nlhs, idx, nv));
  }
  ts_diag ld;
  ts_diag_clear(&ld);
  ts_status st = ir_block_detect_regions(p->a, blk, &ld);
  if (st == TS_ENOMEM) ps_oom(p);
  if (st != TS_OK) ps_fail(p, tt, st, "cannot compute the regions of '%s': %s", T->name, ld.msg);
  ir_stmt *s = CK(ir_realize(p->a, blk, vals, CK(ir_bool(p->a, true))));
  for (int k = p->nkv - 1; k >= 0; k--)
    s = CK(ir_for(p->a, p->kvs[k].lv, p->kvs[k].min, p->kvs[k].ext, IR_FOR_SERIAL, s));
  return s;
}

static ir_stmt *parse_dsl_stmt(P *p, ir_buffer ***allocs, int *nalloc, int *capalloc) {
  char b1[16], b2[16];
  p->nkv = 0;
  p->nbare = 0;
  p->kvs = NULL;
  p->capkv = 0;
  p->bares = NULL;
  p->capbare = 0;
  const ir_token *tt = ps_expect_ident(p, "a statement (a tensor to write, or 'let')");
  if (ps_ksym_find(p, tt))
    ps_fail(p, tt, TS_EPARSE, "'%.*s' is a symbolic size and cannot be written", (int)tt->len,
            p->lx.src + tt->pos);
  ktensor *T = ps_ktensor_find(p, tt);
  int tidx = T ? (int)(T - p->kts) : -1;
  if (T && T->role == R_IN) ps_fail(p, tt, TS_EPARSE, "cannot write input tensor '%s'", T->name);
  if (T && T->written)
    ps_fail(p, tt, TS_EPARSE, "'%s' is already written by an earlier statement; each tensor has one writer",
            T->name);
  ps_expect(p, "[");
  int nlhs = 0;
  if (!ps_accept(p, "]")) {
    for (;;) {
      const ir_token *vt = ps_expect_ident(p, "an index variable");
      if (ps_ksym_find(p, vt) || ps_ktensor_find(p, vt) || ps_is_func_name(p, vt))
        ps_fail(p, vt, TS_EPARSE, "'%.*s' cannot be an index variable (it names something else)",
                (int)vt->len, p->lx.src + vt->pos);
      if (ps_kvar_find(p, vt) >= 0)
        ps_fail(p, vt, TS_EPARSE, "index variable '%.*s' appears twice on the left-hand side",
                (int)vt->len, p->lx.src + vt->pos);
      ps_kvar_new(p, vt, nlhs++);
      if (ps_accept(p, "]")) break;
      ps_expect(p, ",");
    }
  }
  if (T && T->buf) {
    if (nlhs != T->buf->ndim)
      ps_fail(p, tt, TS_ESHAPE, "'%s' has %d dimension%s but is indexed with %d", T->name, T->buf->ndim,
              T->buf->ndim == 1 ? "" : "s", nlhs);
    for (int i = 0; i < nlhs; i++) {
      p->kvs[i].min = CK(ir_i64(p->a, 0));
      p->kvs[i].ext = T->buf->shape[i];
      p->kvs[i].ranged = true;
    }
  }
  /* operator */
  const ir_token *opt = ps_cur(p);
  ir_expr_kind op;
  bool reduce = true;
  if (ps_accept(p, "=")) {
    reduce = false;
    op = IR_ADD;
  } else if (ps_accept(p, "+=")) {
    op = IR_ADD;
  } else if (ps_accept(p, "*=")) {
    op = IR_MUL;
  } else if ((ps_teq(p, opt, "max") || ps_teq(p, opt, "min")) && opt->kind == IR_TK_IDENT &&
             ps_tis(p, ps_peekn(p, 1), "=")) {
    op = ps_teq(p, opt, "max") ? IR_MAX : IR_MIN;
    ps_next(p);
    ps_next(p);
  } else {
    ps_fail(p, opt, TS_EPARSE, "expected '=', '+=', '*=', 'max=' or 'min=' but found %s", ps_describe(p, opt));
  }
  p->m = M_BODY;
  const ir_token *rt = ps_cur(p);
  pv rhs = ps_parse_expr(p);
  ir_expr *cond = NULL;
  if (ps_cur(p)->kind == IR_TK_IDENT && ps_teq(p, ps_cur(p), "where")) {
    const ir_token *wt = ps_next(p);
    if (!reduce)
      ps_fail(p, wt, TS_EPARSE, "'where' is only allowed on reductions; on '=' write select(cond, x, y)");
    pv c = ps_parse_expr(p);
    ps_need_bool(p, wt, c, "the 'where' condition");
    cond = c.e;
  }
  dsl_for_clause(p);
  p->m = M_SCRIPT;
  dsl_check_ranges(p, reduce);
  /* dtype */
  if (T && T->buf) {
    if (rhs.lit) {
      rhs.e = ps_retype(p, rt, rhs.e, T->buf->dtype);
      rhs.lit = false;
    }
    if (!ir_dtype_eq(rhs.e->dtype, T->buf->dtype))
      ps_fail(p, rt, TS_ETYPE, "'%s' is %s but the right-hand side is %s (write a cast)", T->name,
              ps_dts(T->buf->dtype, b1), ps_dts(rhs.e->dtype, b2));
  } else {
    ir_dtype dt = rhs.e->dtype;
    if (dt.lanes != 1 || dt.code == IR_HANDLE) ps_fail(p, rt, TS_ETYPE, "cannot store %s", ps_dts(dt, b1));
    ir_expr **shape = nlhs ? CK(TS_ANEWN(p->a, ir_expr *, nlhs)) : NULL;
    for (int k = 0; k < nlhs; k++) shape[k] = ps_fold_add(p, p->kvs[k].min, p->kvs[k].ext);
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
  return dsl_block(p, tt, T, nlhs, reduce, op, opt, rhs.e, cond);
}

ir_stmt *ps_mk_body(P *p, ir_stmt **v, int n) {
  if (n == 1) return v[0];
  return CK(ir_seq(p->a, n, v));
}

ir_func *ps_parse_kernel(P *p) {
  ps_next(p); /* 'kernel' */
  p->dsl = true;
  p->m = M_SCRIPT;
  p->nkt = p->capkt = 0;
  p->kts = NULL;
  p->nsyms = p->capsyms = 0;
  p->syms = NULL;
  const ir_token *nt = ps_expect_ident(p, "a kernel name");
  ir_func *f = CK(ir_func_new(p->a, ps_tname(p, nt)));
  ps_expect(p, "(");
  if (!ps_accept(p, ")")) {
    for (;;) {
      parse_tensor_decl(p, R_IN);
      if (ps_accept(p, ")")) break;
      ps_expect(p, ",");
    }
  }
  int nin = p->nkt;
  ps_expect(p, "->");
  for (;;) {
    parse_tensor_decl(p, R_OUT);
    if (!ps_accept(p, ",")) break;
  }
  int nparams = p->nkt;
  ps_expect(p, "{");
  ir_stmt **stages = NULL;
  int nst = 0, capst = 0;
  ir_buffer **allocs = NULL;
  int nalloc = 0, capalloc = 0;
  while (!ps_accept(p, "}")) {
    const ir_token *t = ps_cur(p);
    if (t->kind == IR_TK_EOF) ps_fail(p, t, TS_EPARSE, "expected '}' to close kernel '%s'", f->name);
    if (ps_accept(p, ";")) continue;
    if (t->kind == IR_TK_IDENT && ps_teq(p, t, "let") && ps_peekn(p, 1)->kind == IR_TK_IDENT &&
        ps_tis(p, ps_peekn(p, 2), ":")) {
      ps_next(p);
      const ir_token *vt = ps_next(p);
      check_new_tensor_name(p, vt);
      ps_next(p);
      ktensor *k = add_typed_tensor(p, vt, R_TMP);
      PUSH(allocs, nalloc, capalloc, k->buf);
      continue;
    }
    ir_stmt *s = parse_dsl_stmt(p, &allocs, &nalloc, &capalloc);
    PUSH(stages, nst, capst, s);
  }
  for (int i = nin; i < nparams; i++)
    if (!p->kts[i].written)
      ps_fail(p, p->kts[i].decl, TS_EPARSE, "output '%s' is never written", p->kts[i].name);
  ir_block *root = CK(ir_block_new(p->a, "root"));
  root->body = ps_mk_body(p, stages, nst);
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
