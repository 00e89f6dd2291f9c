/* mutator.c — the copy-on-write IR rewriter (mutator.h): one switch over
 * every expression kind and one over every statement kind, rebuilding a
 * node only when a child came back different. Substitution, buffer
 * remapping and deep copy (ir.c) are its built-in modes; schedule
 * primitives and lowering hook into it instead of carrying walkers. */
#include "mutator.h"

#include <string.h>

void ir_mutator_init(ir_mutator *m, ts_arena *a) {
  memset(m, 0, sizeof *m);
  m->arena = a;
  ir_var_map_init(&m->defs_);
  ts_vec_init(&m->bufs_old_);
  ts_vec_init(&m->bufs_new_);
}

void ir_mutator_fini(ir_mutator *m) {
  ir_var_map_fini(&m->defs_);
  ts_vec_fini(&m->bufs_old_);
  ts_vec_fini(&m->bufs_new_);
}

static void *ck(ir_mutator *m, void *p) {
  if (!p) m->failed = true;
  return p;
}

/* ---- definitions and buffer uses ---- */

static ir_var *def_var(ir_mutator *m, ir_var *v) {
  if (!m->deep || !v) return v;
  ir_var *nv = ir_var_new(m->arena, v->name, v->dtype);
  if (nv) nv->upper = v->upper;
  ir_expr *ref = nv ? ir_var_ref(m->arena, nv) : NULL;
  if (!ref || ir_var_map_put(&m->defs_, v, ref) != TS_OK) {
    m->failed = true;
    return v;
  }
  return nv;
}

static ir_buffer *use_buf(ir_mutator *m, ir_buffer *b) {
  if (!b) return b;
  if (b == m->buf_from) return m->buf_to;
  for (size_t i = 0; i < m->bufs_old_.len; i++)
    if (m->bufs_old_.items[i] == b) return m->bufs_new_.items[i];
  return b;
}

/* A buffer defined here (param, allocation): its shape, strides and offset
 * rewritten; a fresh buffer in deep mode. Later uses map to the result. */
static ir_buffer *def_buf(ir_mutator *m, ir_buffer *b) {
  if (b == m->buf_from) return m->buf_to;
  bool ch = m->deep;
  ir_expr **shape = ir_mutate_exprs(m, b->ndim, b->shape, &ch);
  ir_expr **strides = b->strides ? ir_mutate_exprs(m, b->ndim, b->strides, &ch) : NULL;
  ir_expr *off = ir_mutate_expr(m, b->elem_offset);
  if (off != b->elem_offset) ch = true;
  if (!ch || m->failed) return b;
  ir_buffer *nb = m->deep ? ir_buffer_new(m->arena, b->name, b->dtype, b->ndim, shape, b->scope)
                          : ts_arena_memdup(m->arena, b, sizeof *b);
  if (!ck(m, nb)) return b;
  if (m->deep) {
    uint32_t id = nb->id;
    ir_expr **nshape = nb->shape;
    const char *name = nb->name, *scope = nb->scope;
    *nb = *b;
    nb->id = id;
    nb->name = name;
    nb->scope = scope;
    nb->shape = nshape;
    if (b->align_factor) {
      nb->align_factor = ck(m, ts_arena_memdup(m->arena, b->align_factor, sizeof(int64_t) * (size_t)b->ndim));
      nb->align_offset = ck(m, ts_arena_memdup(m->arena, b->align_offset, sizeof(int64_t) * (size_t)b->ndim));
    }
  } else {
    nb->shape = shape;
  }
  nb->strides = strides;
  nb->elem_offset = off;
  if (ts_vec_push(&m->bufs_old_, b) || ts_vec_push(&m->bufs_new_, nb)) m->failed = true;
  return nb;
}

ir_expr **ir_mutate_exprs(ir_mutator *m, int n, ir_expr **src, bool *changed) {
  ir_expr **out = src;
  for (int i = 0; i < n && !m->failed; i++) {
    ir_expr *x = ir_mutate_expr(m, src[i]);
    if ((x != src[i] || m->deep) && out == src) {
      if (!ck(m, out = TS_ANEWN(m->arena, ir_expr *, n))) return src;
      memcpy(out, src, sizeof *out * (size_t)n);
    }
    out[i] = x;
  }
  if (out != src && changed) *changed = true;
  return out;
}

/* ---- expressions ---- */

/* The default step: children rewritten, node cloned if any changed. */
ir_expr *ir_mutate_expr_children(ir_mutator *m, ir_expr *e) {
  if (!e || m->failed) return e;
  ir_expr c = *e; /* the node with its new children */
  bool ch = m->deep;
#define SUB(f)                  \
  do {                          \
    c.f = ir_mutate_expr(m, e->f); \
    ch |= c.f != e->f;          \
  } while (0)
  switch (e->kind) {
  case IR_INT_IMM:
  case IR_FLOAT_IMM:
    break;
  case IR_VAR: {
    ir_expr *r = m->vars ? ir_var_map_get(m->vars, e->u.var) : NULL;
    if (!r && m->deep) r = ir_var_map_get(&m->defs_, e->u.var);
    return r ? r : e;
  }
  case IR_NOT:
    SUB(u.un.a);
    break;
  case IR_SELECT:
    SUB(u.sel.cond);
    SUB(u.sel.t);
    SUB(u.sel.f);
    break;
  case IR_CAST:
  case IR_REINTERPRET:
    SUB(u.cast.value);
    break;
  case IR_CALL:
    c.u.call.args = ir_mutate_exprs(m, e->u.call.nargs, e->u.call.args, &ch);
    break;
  case IR_LOAD:
    c.u.load.buf = use_buf(m, e->u.load.buf);
    ch |= c.u.load.buf != e->u.load.buf;
    c.u.load.idx = ir_mutate_exprs(m, e->u.load.nidx, e->u.load.idx, &ch);
    break;
  case IR_RAMP:
    SUB(u.ramp.base);
    SUB(u.ramp.stride);
    break;
  case IR_BROADCAST:
    SUB(u.bcast.value);
    break;
  case IR_CALL_EXTERN:
    c.u.ext.args = ir_mutate_exprs(m, e->u.ext.nargs, e->u.ext.args, &ch);
    if (m->deep) c.u.ext.name = ck(m, ts_arena_strdup(m->arena, e->u.ext.name));
    break;
  case IR_ACCESS_PTR:
    c.u.ptr.buf = use_buf(m, e->u.ptr.buf);
    ch |= c.u.ptr.buf != e->u.ptr.buf;
    SUB(u.ptr.offset);
    break;
  case IR_STR_IMM:
    if (m->deep) c.u.sval = ck(m, ts_arena_strdup(m->arena, e->u.sval));
    break;
  default:
    if (!ir_is_binop(e->kind)) return e;
    SUB(u.bin.a);
    SUB(u.bin.b);
    break;
  }
#undef SUB
  if (!ch || m->failed) return e;
  ir_expr *n = ck(m, ir_expr_clone(m->arena, &c));
  return n ? n : e;
}

/* The hooked step, the same for both node families: pre hook, else the
 * default step and then the post hook. */
#define MUTATE_HOOKED(T, x, pre, post, children) \
  do {                                           \
    if (!(x) || m->failed) return (x);           \
    if (m->pre) {                                \
      T *r_ = m->pre(m, (x));                    \
      if (r_ || m->failed) return r_ ? r_ : (x); \
    }                                            \
    T *n_ = children(m, (x));                    \
    if (m->post && !m->failed) {                 \
      T *r_ = m->post(m, (x), n_);               \
      if (r_) n_ = r_;                           \
    }                                            \
    return n_;                                   \
  } while (0)

ir_expr *ir_mutate_expr(ir_mutator *m, ir_expr *e) {
  MUTATE_HOOKED(ir_expr, e, pre_expr, post_expr, ir_mutate_expr_children);
}

/* ---- blocks ---- */

static ir_region *mutate_regions(ir_mutator *m, int n, ir_region *src, bool *changed) {
  ir_region *out = src;
  for (int i = 0; i < n && !m->failed; i++) {
    ir_region r = src[i];
    bool ch = m->deep;
    r.buf = use_buf(m, src[i].buf);
    ch |= r.buf != src[i].buf;
    for (int j = 0; j < src[i].ndim && !m->failed; j++) {
      ir_expr *mn = ir_mutate_expr(m, src[i].ranges[j].min);
      ir_expr *ex = ir_mutate_expr(m, src[i].ranges[j].extent);
      if ((mn == src[i].ranges[j].min && ex == src[i].ranges[j].extent && !m->deep) || m->failed) continue;
      if (r.ranges == src[i].ranges) {
        if (!ck(m, r.ranges = TS_ANEWN(m->arena, ir_range, src[i].ndim))) return src;
        memcpy(r.ranges, src[i].ranges, sizeof *r.ranges * (size_t)src[i].ndim);
      }
      r.ranges[j] = (ir_range){mn, ex};
      ch = true;
    }
    if (!ch || m->failed) continue;
    if (out == src) {
      if (!ck(m, out = TS_ANEWN(m->arena, ir_region, n))) return src;
      memcpy(out, src, sizeof *out * (size_t)n);
    }
    out[i] = r;
  }
  if (out != src) *changed = true;
  return out;
}

static ir_annot *mutate_annots(ir_mutator *m, int n, ir_annot *src, bool *changed) {
  ir_annot *out = src;
  if (m->deep && n > 0) { /* a deep copy owns its annotations: array, keys and strings */
    if (!ck(m, out = ts_arena_memdup(m->arena, src, sizeof *src * (size_t)n))) return src;
    for (int i = 0; i < n; i++) {
      if (src[i].key) out[i].key = ck(m, ts_arena_strdup(m->arena, src[i].key));
      if (src[i].kind == IR_ANN_STR && src[i].v.s) out[i].v.s = ck(m, ts_arena_strdup(m->arena, src[i].v.s));
    }
  }
  for (int i = 0; i < n && !m->failed; i++) {
    if (src[i].kind != IR_ANN_EXPR) continue;
    ir_expr *ne = ir_mutate_expr(m, src[i].v.e);
    if (ne == src[i].v.e) continue;
    if (out == src) {
      if (!ck(m, out = ts_arena_memdup(m->arena, src, sizeof *src * (size_t)n))) return src;
    }
    out[i].v.e = ne;
  }
  if (out != src) *changed = true;
  return out;
}

/* Buffers first (their shapes may mention syms), then iter vars, regions,
 * annotations, init and body. */
static ir_block *mutate_block(ir_mutator *m, ir_block *b, bool *changed) {
  ir_block c = *b;
  bool ch = m->deep;
  for (int i = 0; i < b->nalloc && !m->failed; i++) {
    ir_buffer *nb = def_buf(m, b->allocs[i]);
    if (nb == b->allocs[i] && !m->deep) continue;
    if (c.allocs == b->allocs) {
      if (!ck(m, c.allocs = TS_ANEWN(m->arena, ir_buffer *, b->nalloc))) return b;
      memcpy(c.allocs, b->allocs, sizeof *c.allocs * (size_t)b->nalloc);
    }
    c.allocs[i] = nb;
    ch = true;
  }
  for (int i = 0; i < b->niter && !m->failed; i++) {
    ir_iter_var iv = b->iters[i];
    iv.dom.min = ir_mutate_expr(m, iv.dom.min);
    iv.dom.extent = ir_mutate_expr(m, iv.dom.extent);
    iv.var = def_var(m, iv.var);
    if (iv.var == b->iters[i].var && iv.dom.min == b->iters[i].dom.min &&
        iv.dom.extent == b->iters[i].dom.extent && !m->deep)
      continue;
    if (c.iters == b->iters) {
      if (!ck(m, c.iters = TS_ANEWN(m->arena, ir_iter_var, b->niter))) return b;
      memcpy(c.iters, b->iters, sizeof *c.iters * (size_t)b->niter);
    }
    c.iters[i] = iv;
    ch = true;
  }
  c.reads = mutate_regions(m, b->nreads, b->reads, &ch);
  c.writes = mutate_regions(m, b->nwrites, b->writes, &ch);
  c.annots = mutate_annots(m, b->nannot, b->annots, &ch);
  c.init = ir_mutate_stmt(m, b->init);
  c.body = ir_mutate_stmt(m, b->body);
  ch |= c.init != b->init || c.body != b->body;
  if (m->deep) c.name = ck(m, ts_arena_strdup(m->arena, b->name));
  if (!ch || m->failed) return b;
  ir_block *nb = ck(m, ir_block_clone(m->arena, &c));
  if (!nb) return b;
  *changed = true;
  return nb;
}

/* ---- statements ---- */

static ir_stmt **mutate_stmts(ir_mutator *m, int n, ir_stmt **src, bool *changed) {
  ir_stmt **out = src;
  for (int i = 0; i < n && !m->failed; i++) {
    ir_stmt *x = ir_mutate_stmt(m, src[i]);
    if ((x != src[i] || m->deep) && out == src) {
      if (!ck(m, out = TS_ANEWN(m->arena, ir_stmt *, n))) return src;
      memcpy(out, src, sizeof *out * (size_t)n);
    }
    out[i] = x;
  }
  if (out != src) *changed = true;
  return out;
}

ir_stmt *ir_mutate_stmt_children(ir_mutator *m, ir_stmt *s) {
  if (!s || m->failed) return s;
  ir_stmt c = *s;
  bool ch = m->deep;
#define SUBE(f)                    \
  do {                             \
    c.f = ir_mutate_expr(m, s->f); \
    ch |= c.f != s->f;             \
  } while (0)
#define SUBS(f)                    \
  do {                             \
    c.f = ir_mutate_stmt(m, s->f); \
    ch |= c.f != s->f;             \
  } while (0)
  switch (s->kind) {
  case IR_FOR:
    SUBE(u.loop.min);
    SUBE(u.loop.extent);
    c.u.loop.var = def_var(m, s->u.loop.var);
    c.u.loop.annots = mutate_annots(m, s->u.loop.nannot, s->u.loop.annots, &ch);
    SUBS(u.loop.body);
    break;
  case IR_BLOCK_REALIZE:
    c.u.realize.iter_values = ir_mutate_exprs(m, s->u.realize.block->niter, s->u.realize.iter_values, &ch);
    SUBE(u.realize.predicate);
    c.u.realize.block = mutate_block(m, s->u.realize.block, &ch);
    break;
  case IR_SEQ:
    c.u.seq.stmts = mutate_stmts(m, s->u.seq.n, s->u.seq.stmts, &ch);
    break;
  case IR_IF:
    SUBE(u.ifs.cond);
    SUBS(u.ifs.then_s);
    SUBS(u.ifs.else_s);
    break;
  case IR_LET:
    SUBE(u.let.value);
    c.u.let.var = def_var(m, s->u.let.var);
    SUBS(u.let.body);
    break;
  case IR_ALLOCATE:
    c.u.alloc.buf = def_buf(m, s->u.alloc.buf);
    ch |= c.u.alloc.buf != s->u.alloc.buf;
    SUBS(u.alloc.body);
    break;
  case IR_EVALUATE:
    SUBE(u.eval.value);
    break;
  case IR_STORE:
    c.u.store.buf = use_buf(m, s->u.store.buf);
    ch |= c.u.store.buf != s->u.store.buf;
    c.u.store.idx = ir_mutate_exprs(m, s->u.store.nidx, s->u.store.idx, &ch);
    SUBE(u.store.value);
    SUBE(u.store.predicate);
    break;
  default:
    return s;
  }
#undef SUBE
#undef SUBS
  if (!ch || m->failed) return s;
  ir_stmt *n = ck(m, ir_stmt_clone(m->arena, &c));
  return n ? n : s;
}

ir_stmt *ir_mutate_stmt(ir_mutator *m, ir_stmt *s) {
  MUTATE_HOOKED(ir_stmt, s, pre_stmt, post_stmt, ir_mutate_stmt_children);
}

static ir_stmt **child_slot(ir_stmt *s, int i) {
  switch (s->kind) {
  case IR_FOR: return i == 0 ? &s->u.loop.body : NULL;
  case IR_LET: return i == 0 ? &s->u.let.body : NULL;
  case IR_ALLOCATE: return i == 0 ? &s->u.alloc.body : NULL;
  case IR_IF: return i == 0 ? &s->u.ifs.then_s : i == 1 ? &s->u.ifs.else_s : NULL;
  default: return NULL;
  }
}

ir_stmt *ir_stmt_with_child(ir_mutator *m, ir_stmt *s, int i, ir_stmt *child) {
  if (!s || m->failed) return s;
  bool seq = s->kind == IR_SEQ;
  ir_stmt **slot = seq ? (i >= 0 && i < s->u.seq.n ? &s->u.seq.stmts[i] : NULL) : child_slot(s, i);
  if (!slot) {
    m->failed = true;
    return s;
  }
  if (*slot == child) return s;
  ir_stmt *n = ck(m, ir_stmt_clone(m->arena, s));
  if (!n) return s;
  if (seq) {
    ir_stmt **kids = ck(m, TS_ANEWN(m->arena, ir_stmt *, s->u.seq.n));
    if (!kids) return s;
    memcpy(kids, s->u.seq.stmts, sizeof *kids * (size_t)s->u.seq.n);
    kids[i] = child;
    n->u.seq.stmts = kids;
  } else {
    *child_slot(n, i) = child;
  }
  return n;
}

/* ---- one-shot forms ---- */

static void mutator_with(ir_mutator *m, ts_arena *a, const ir_mutator_hooks *h, void *ctx) {
  ir_mutator_init(m, a);
  m->ctx = ctx;
  m->pre_expr = h->pre_expr;
  m->post_expr = h->post_expr;
  m->pre_stmt = h->pre_stmt;
  m->post_stmt = h->post_stmt;
}

ir_expr *ir_rewrite_expr(ts_arena *a, const ir_mutator_hooks *h, void *ctx, ir_expr *e, bool *failed) {
  ir_mutator m;
  mutator_with(&m, a, h, ctx);
  ir_expr *n = ir_mutate_expr(&m, e);
  if (m.failed) *failed = true;
  ir_mutator_fini(&m);
  return n;
}

ir_stmt *ir_rewrite_stmt(ts_arena *a, const ir_mutator_hooks *h, void *ctx, ir_stmt *s, bool *failed) {
  ir_mutator m;
  mutator_with(&m, a, h, ctx);
  ir_stmt *n = ir_mutate_stmt(&m, s);
  if (m.failed) *failed = true;
  ir_mutator_fini(&m);
  return n;
}

/* ---- functions ---- */

ir_func *ir_mutate_func(ir_mutator *m, const ir_func *f, const ir_var_map *drop) {
  ir_func *nf = ir_func_new(m->arena, f->name);
  if (!ck(m, nf)) return NULL;
  nf->ninputs = f->ninputs;
  /* syms first (they appear in shapes) */
  nf->syms = f->nsyms ? ck(m, TS_ANEWN(m->arena, ir_var *, f->nsyms)) : NULL;
  for (int i = 0; i < f->nsyms && nf->syms; i++)
    if (!drop || !ir_var_map_get(drop, f->syms[i])) nf->syms[nf->nsyms++] = def_var(m, f->syms[i]);
  nf->nparams = f->nparams;
  nf->params = f->nparams ? ck(m, TS_ANEWN(m->arena, ir_buffer *, f->nparams)) : NULL;
  for (int i = 0; i < f->nparams && nf->params; i++) nf->params[i] = def_buf(m, f->params[i]);
  bool ch = false;
  nf->annots = mutate_annots(m, f->nannot, f->annots, &ch);
  nf->nannot = f->nannot;
  nf->body = ir_mutate_stmt(m, f->body);
  return m->failed ? NULL : nf;
}
