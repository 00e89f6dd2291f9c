/* cache.c — the memory primitives (TVM's cache_read_write.cc and
 * block_annotate.cc): cache_read and cache_write stage a buffer through a
 * new buffer in another storage scope with an all-S copy block; set_scope
 * and storage_align replace a block-allocated buffer by a copy with another
 * scope or a recorded stride alignment.
 *
 * Why the caches are full size: a cache with the whole buffer's shape, at
 * the same indices as the buffer, stays equal to the buffer on everything
 * the single writer has written so far as long as each execution of the
 * writer is followed by a copy of (at least) the region it wrote before any
 * rewritten consumer runs. The copy is placed in the deepest sequence that
 * holds the writer and the first consumer, right before the consumer's
 * element, and copies the writer's region relaxed over the loops below that
 * sequence, so that holds without a region-cover analysis. Compact caches
 * (shape = region extents) would need one; we do not make them. */
#include <stdio.h>
#include <string.h>

#include "sch_int.h"

/* ---- shared helpers ---------------------------------------------------- */

/* Storage scope names: dot-separated identifiers ("global", "shared",
 * "local", "global.local", "wmma.matrix_a", "shared.dyn"). */
static bool valid_scope(const char *scope) {
  if (!scope || !*scope) return false;
  const char *p = scope;
  for (;;) {
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '_')) return false;
    p++;
    while ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
           *p == '_')
      p++;
    if (!*p) return true;
    if (*p != '.') return false;
    p++;
  }
}

static ir_stmt *realize_of(const ts_vec *kids, size_t i) { return kids->items[i]; }

static int kid_index(const ts_vec *kids, const char *name) {
  for (size_t i = 0; i < kids->len; i++)
    if (!strcmp(realize_of(kids, i)->u.realize.block->name, name)) return (int)i;
  return -1;
}

/* Do the two realizes share an enclosing loop below the scope at path index
 * sc? (Their paths share a FOR node there.) */
static bool share_loop(const sch_path *a, const sch_path *b, int sc) {
  for (int i = 0; i < a->n && i < b->n && a->node[i] == b->node[i]; i++)
    if (i > sc && a->node[i]->kind == IR_FOR) return true;
  return false;
}

/* A compact copy of buf named name in scope (row-major, no alignment). */
static ir_buffer *cache_buffer(ts_arena *a, const ir_buffer *buf, const char *name,
                               const char *scope) {
  return ir_buffer_new(a, name, buf->dtype, buf->ndim, buf->shape, scope);
}

/* Per dimension of a region: [lo, lo + ext) in the enclosing loops' vars. */
typedef struct copy_dim {
  ir_expr *lo, *ext;
} copy_dim;

/* The region the block at the end of p touches in buffer reg->buf, with its
 * bindings substituted and the loops at path indices >= from relaxed
 * (innermost first, so a loop bound that mentions an outer relaxed loop is
 * relaxed in turn). Dimensions that cannot be bounded, or whose extent is not
 * a constant, fall back to the whole dimension. */
static ts_status relaxed_region(sch_state *s, const sch_path *p, const ir_region *reg, int from,
                                copy_dim *out) {
  ts_arena *a = &s->arena;
  const ir_stmt *rz = p->node[p->n - 1];
  const ir_block *blk = rz->u.realize.block;
  ir_var_map bind;
  ir_var_map_init(&bind);
  for (int i = 0; i < blk->niter; i++)
    if (ir_var_map_put(&bind, blk->iters[i].var, rz->u.realize.iter_values[i])) {
      ir_var_map_fini(&bind);
      return TS_ENOMEM;
    }
  ir_analyzer an;
  ir_analyzer_init(&an, a);
  ts_status st = sch_bind_path_loops(&an, p, from);
  for (int d = 0; d < reg->ndim && st == TS_OK; d++) {
    const ir_range *r = &reg->ranges[d];
    ir_expr *one = ir_int(a, r->extent->dtype, 1);
    ir_expr *lo = ir_subst_expr(a, r->min, &bind);
    ir_expr *hi = lo ? ir_subst_expr(a, ir_sub(a, ir_add(a, r->min, r->extent), one), &bind) : NULL;
    if (!one || !lo || !hi) {
      st = TS_ENOMEM;
      break;
    }
    for (int i = p->n - 2; i >= from && lo && hi; i--) {
      const ir_stmt *l = p->node[i];
      if (l->kind != IR_FOR) continue;
      ir_dom_map dom;
      ir_dom_map_init(&dom);
      if (ir_dom_map_put(&dom, l->u.loop.var, ir_intset_range(a, l->u.loop.min, l->u.loop.extent))) {
        ir_dom_map_fini(&dom);
        st = TS_ENOMEM;
        break;
      }
      ir_analyzer inner;
      ir_analyzer_init(&inner, a);
      ir_intset slo = ir_eval_set(&inner, lo, &dom), shi = ir_eval_set(&inner, hi, &dom);
      ir_analyzer_fini(&inner);
      ir_dom_map_fini(&dom);
      lo = slo.empty ? NULL : slo.min;
      hi = shi.empty ? NULL : shi.max;
    }
    if (st) break;
    ir_expr *ext = NULL;
    int64_t e = 0;
    if (lo && hi) {
      lo = ir_simplify(&an, lo);
      ext = lo ? ir_simplify(&an, ir_add(a, ir_sub(a, hi, lo), one)) : NULL;
    }
    int64_t l0, sh;
    if (!lo || !ext || !ir_as_int(ext, &e) || e <= 0) {
      lo = ir_i64(a, 0);
      ext = reg->buf->shape[d];
    } else if (ir_as_int(lo, &l0) && ir_as_int(reg->buf->shape[d], &sh)) {
      /* constant: clip to the buffer (a guarded split overhangs it) */
      int64_t h = l0 + e - 1 < sh - 1 ? l0 + e - 1 : sh - 1;
      l0 = l0 < 0 ? 0 : l0;
      if (h >= l0) {
        lo = ir_int(a, lo->dtype, l0);
        ext = ir_int(a, ext->dtype, h - l0 + 1);
      }
    }
    if (!lo || !ext) {
      st = TS_ENOMEM;
      break;
    }
    out[d].lo = lo;
    out[d].ext = ext;
  }
  ir_analyzer_fini(&an);
  ir_var_map_fini(&bind);
  return st;
}

/* The whole buffer, or the region reg when it is given. */
static void whole_region(sch_state *s, const ir_buffer *buf, const ir_region *reg, copy_dim *out) {
  for (int d = 0; d < buf->ndim; d++) {
    int64_t e, l0, sh;
    if (reg && ir_as_int(reg->ranges[d].extent, &e) && e > 0) {
      out[d].lo = reg->ranges[d].min;
      out[d].ext = reg->ranges[d].extent;
      /* constant: clip to the buffer (a guarded read, e.g. padding, reaches
       * past it; the guard keeps those elements from being used) */
      if (ir_as_int(out[d].lo, &l0) && ir_as_int(buf->shape[d], &sh)) {
        int64_t h = l0 + e - 1 < sh - 1 ? l0 + e - 1 : sh - 1;
        l0 = l0 < 0 ? 0 : l0;
        if (h >= l0) {
          out[d].lo = ir_int(&s->arena, out[d].lo->dtype, l0);
          out[d].ext = ir_int(&s->arena, out[d].ext->dtype, h - l0 + 1);
        }
      }
    } else {
      out[d].lo = ir_i64(&s->arena, 0);
      out[d].ext = buf->shape[d];
    }
  }
}

/* Builds the copy nest `for ax0.. { block name(v0..: S) { dst[v] = src[v] } }`
 * over the region dims (in the vars of the loops on p[0..k), which are bound
 * for the bounds check). Iter var domains are the buffer's shape; a
 * predicate keeps the copy inside the buffer when that is not provable. */
static ts_status make_copy(sch_state *s, const sch_path *p, int k, const char *name,
                           ir_buffer *src, ir_buffer *dst, const copy_dim *dims, ir_stmt **out,
                           ts_diag *d) {
  ts_arena *a = &s->arena;
  int nd = src->ndim;
  ir_analyzer an;
  ir_analyzer_init(&an, a);
  ts_status st = sch_bind_path_loops(&an, p, k);
  ir_block *blk = ir_block_new(a, name);
  ir_var **loops = TS_ANEWN(a, ir_var *, nd ? nd : 1);
  ir_expr **vals = TS_ANEWN(a, ir_expr *, nd ? nd : 1);
  ir_expr **idx = TS_ANEWN(a, ir_expr *, nd ? nd : 1);
  ir_expr *pred = ir_bool(a, true);
  if (!blk || !loops || !vals || !idx || !pred) st = TS_ENOMEM;
  if (!st && nd) {
    blk->iters = TS_ANEWN(a, ir_iter_var, nd);
    if (!blk->iters) st = TS_ENOMEM;
  }
  if (!st) blk->niter = nd;
  for (int i = 0; i < nd && !st; i++) {
    char nm[32];
    snprintf(nm, sizeof nm, "ax%d", i);
    loops[i] = ir_var_new(a, nm, ir_dt(IR_I64));
    snprintf(nm, sizeof nm, "v%d", i);
    ir_var *iv = ir_var_new(a, nm, ir_dt(IR_I64));
    ir_expr *zero = ir_i64(a, 0);
    if (!loops[i] || !iv || !zero) {
      st = TS_ENOMEM;
      break;
    }
    /* a symbolic extent with a known bound (a size var padded to a shape
     * bucket, ir_var.upper) gets the padded domain, as the padded blocks
     * around it have; the predicate below keeps the copy inside */
    ir_expr *dext = src->shape[i];
    int64_t ce;
    ir_const_bound cb = ir_analyzer_const_bound(&an, dext);
    if (!ir_as_int(dext, &ce) && cb.hi > 0 && cb.hi < INT64_MAX / 2 && !(dext = ir_int(a, dext->dtype, cb.hi)))
      st = TS_ENOMEM;
    blk->iters[i] = (ir_iter_var){iv, {zero, dext}, IR_ITER_S};
    idx[i] = ir_var_ref(a, iv);
    if (ir_analyzer_bind(&an, loops[i], zero, dims[i].ext)) st = TS_ENOMEM;
  }
  for (int i = 0; i < nd && !st; i++) {
    ir_expr *v = ir_simplify(&an, ir_add(a, dims[i].lo, ir_var_ref(a, loops[i])));
    if (!v || !idx[i]) {
      st = TS_ENOMEM;
      break;
    }
    vals[i] = v;
    ir_expr *zero = ir_int(a, v->dtype, 0);
    ir_expr *ge = ir_binop(a, IR_LE, zero, v);
    ir_expr *lt = ir_binop(a, IR_LT, v, src->shape[i]);
    if (!ge || !lt) {
      st = TS_ENOMEM;
      break;
    }
    if (!ir_can_prove(&an, ge)) pred = ir_and(a, pred, ge);
    if (!ir_can_prove(&an, lt)) pred = ir_and(a, pred, lt);
    if (!pred) st = TS_ENOMEM;
  }
  ir_stmt *body = NULL;
  if (!st) {
    ir_expr *ld = ir_load(a, src, nd, idx);
    body = ld ? ir_store(a, dst, nd, idx, ld) : NULL;
    if (!body) st = TS_ENOMEM;
  }
  ir_analyzer_fini(&an);
  if (st) return ts_diag_set(d, TS_ENOMEM, "out of memory building copy block '%s'", name);
  blk->body = body;
  st = ir_block_detect_regions(a, blk, d);
  if (st) return st;
  ir_stmt *nest = ir_realize(a, blk, vals, pred);
  for (int i = nd - 1; i >= 0 && nest; i--)
    nest = ir_for(a, loops[i], ir_i64(a, 0), dims[i].ext, IR_FOR_SERIAL, nest);
  if (!nest) return ts_diag_set(d, TS_ENOMEM, "out of memory building copy block '%s'", name);
  *out = nest;
  return TS_OK;
}

/* Rewrites the statements of a scope: realizes in subst get `from` replaced
 * by `to`; the SEQ node loc gets `insert` at position pos. Shares what does
 * not change. */
typedef struct rw_ctx {
  ts_arena *a;
  ir_buffer *from, *to;
  ir_stmt **subst;
  int nsubst;
  ir_stmt *loc;
  int pos;
  ir_stmt *insert;
  bool oom;
} rw_ctx;

/* Hooks for the shared mutator: realizes are leaves (swapped when in
 * subst), other leaves are left alone, loc's rebuilt children get insert. */
static ir_stmt *rw_pre(ir_mutator *m, ir_stmt *st) {
  const rw_ctx *c = m->ctx;
  switch (st->kind) {
  case IR_BLOCK_REALIZE:
    for (int i = 0; i < c->nsubst; i++)
      if (c->subst[i] == st) {
        ir_stmt *n = ir_subst_buffer(m->arena, st, c->from, c->to);
        if (!n) ir_mutator_fail(m);
        return n;
      }
    return st;
  case IR_FOR:
  case IR_SEQ:
  case IR_IF:
  case IR_LET:
  case IR_ALLOCATE:
    return NULL;
  default:
    return st;
  }
}

static ir_stmt *rw_insert(ir_mutator *m, const ir_stmt *orig, ir_stmt *st) {
  const rw_ctx *c = m->ctx;
  if (orig != c->loc) return NULL;
  int n = st->u.seq.n;
  ir_stmt **v = TS_ANEWN(m->arena, ir_stmt *, n + 1);
  if (!v) {
    ir_mutator_fail(m);
    return NULL;
  }
  memcpy(v, st->u.seq.stmts, sizeof *v * (size_t)c->pos);
  v[c->pos] = c->insert;
  memcpy(v + c->pos + 1, st->u.seq.stmts + c->pos, sizeof *v * (size_t)(n - c->pos));
  ir_stmt *r = ir_seq(m->arena, n + 1, v);
  if (!r) ir_mutator_fail(m);
  return r;
}

static ir_stmt *rewrite(rw_ctx *c, ir_stmt *st) {
  ir_mutator m;
  ir_mutator_init(&m, c->a);
  m.ctx = c;
  m.pre_stmt = rw_pre;
  m.post_stmt = rw_insert;
  ir_stmt *n = ir_mutate_stmt(&m, st);
  c->oom |= m.failed;
  ir_mutator_fini(&m);
  return n;
}

/* Installs a rewritten scope: the scope realize at p->node[sc] gets its body
 * rewritten by c (with c->loc == NULL and at_end >= 0 meaning "insert at the
 * start (0) or end (1) of the body") and allocates cache. */
static ts_status install(sch_state *s, const sch_path *p, int sc, rw_ctx *c, int at_end,
                         ir_buffer *cache, ts_diag *d) {
  ts_arena *a = &s->arena;
  const ir_stmt *srz = p->node[sc];
  const ir_block *sb = srz->u.realize.block;
  ir_stmt *body = sb->body;
  if (at_end >= 0 && body->kind == IR_SEQ) {
    c->loc = body;
    c->pos = at_end ? body->u.seq.n : 0;
  }
  ir_stmt *nb = rewrite(c, body);
  if (!c->oom && at_end >= 0 && body->kind != IR_SEQ) {
    ir_stmt *two[2] = {at_end ? nb : c->insert, at_end ? c->insert : nb};
    nb = ir_seq(a, 2, two);
  }
  ir_stmt *nrz = ir_stmt_clone(a, srz);
  ir_block *blk = ir_block_with_alloc(a, sb, cache);
  if (c->oom || !nb || !nrz || !blk)
    return ts_diag_set(d, TS_ENOMEM, "out of memory rewriting scope '%s'", sb->name);
  blk->body = nb;
  nrz->u.realize.block = blk;
  return sch_replace(s, p, sc, nrz, d);
}

/* Where the copy goes when a writer exists: the deepest SEQ holding both the
 * writer and the first consumer, right before the consumer's element. *from
 * is the path index below which the writer's loops are relaxed. */
static ts_status find_loc(sch_state *s, const char *prim, const char *writer, const char *first,
                          ir_stmt **loc, int *pos, int *from, sch_path *wpath, ts_diag *d) {
  sch_path pc;
  ts_status st = sch_find_block(s, writer, wpath, prim, d);
  if (!st) st = sch_find_block(s, first, &pc, prim, d);
  if (st) return st;
  int l = 0;
  while (l < wpath->n && l < pc.n && wpath->node[l] == pc.node[l]) l++;
  if (l == 0 || l >= pc.n || wpath->node[l - 1]->kind != IR_SEQ)
    return ts_diag_set(d, TS_ESCHEDULE,
                       "%s: blocks '%s' and '%s' do not meet in a sequence (no place for the copy "
                       "between them)",
                       prim, writer, first);
  *loc = wpath->node[l - 1];
  *pos = pc.slot[l];
  *from = l;
  return TS_OK;
}

/* What cache_read and cache_write check first: b's path p and the index sc
 * of its scope in it, idx a valid index into b's reads (read) or writes
 * (the buffer: *buf), a valid scope name, a usable consumer list. Appends
 * the scope's child block realizes to kids (the caller frees it). */
static ts_status cache_begin(sch_state *s, const char *P, sch_block b, bool read, int idx, const char *scope,
                             int nconsumers, const sch_block *consumers, sch_path *p, int *sc, ir_buffer **buf,
                             ts_vec *kids, ts_diag *d) {
  ts_status st = sch_find_block(s, b.name, p, P, d);
  if (st) return st;
  const ir_block *blk = p->node[p->n - 1]->u.realize.block;
  *sc = sch_path_scope(p, p->n - 1);
  if (*sc < 0) return ts_diag_set(d, TS_ESCHEDULE, "%s: '%s' is the root block", P, blk->name);
  int n = read ? blk->nreads : blk->nwrites;
  if (idx < 0 || idx >= n)
    return ts_diag_set(d, TS_ESCHEDULE, "%s: block '%s' %s %d buffer(s); %s_index %d is out of range", P,
                       blk->name, read ? "reads" : "writes", n, read ? "read" : "write", idx);
  if (!valid_scope(scope))
    return ts_diag_set(d, TS_ESCHEDULE,
                       "%s: invalid storage scope \"%s\" (want a name like \"shared\", \"local\" or "
                       "\"%s\")",
                       P, scope ? scope : "(null)", read ? "wmma.matrix_a" : "wmma.accumulator");
  if (nconsumers < 0 || (nconsumers > 0 && !consumers))
    return ts_diag_set(d, TS_ESCHEDULE, "%s: bad consumer list", P);
  *buf = read ? blk->reads[idx].buf : blk->writes[idx].buf;
  if (read && sch_block_writes(blk, *buf))
    return ts_diag_set(d, TS_ESCHEDULE,
                       "%s: block '%s' both reads and writes '%s'; cache_write (or a block that "
                       "only reads it) is needed",
                       P, blk->name, (*buf)->name);
  if (sch_child_realizes(p->node[*sc]->u.realize.block->body, kids)) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  return TS_OK;
}

/* What both end with: the cache buffer <buf>_<scope>, the copy block of the
 * same name (buf -> cache for a read, cache -> buf for a write; over dims,
 * under the loops of loop_path from index from), and the scope rewritten
 * to use the cache (install). The name of the copy block goes to out. */
static ts_status cache_install(sch_state *s, const sch_path *p, int sc, rw_ctx *c, int at_end, ir_buffer *buf,
                               const char *scope, const sch_path *loop_path, int from, const copy_dim *dims,
                               bool read, sch_block *out, ts_diag *d) {
  char base[256];
  snprintf(base, sizeof base, "%s_%s", buf->name, scope);
  const char *bname = sch_fresh_buffer_name(s, base), *kname = sch_fresh_block_name(s, base);
  ir_buffer *cache = bname ? cache_buffer(&s->arena, buf, bname, scope) : NULL;
  if (!cache || !kname) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  ts_status st = make_copy(s, loop_path, from, kname, read ? buf : cache, read ? cache : buf, dims, &c->insert, d);
  if (st) return st;
  c->from = buf;
  c->to = cache;
  st = install(s, p, sc, c, at_end, cache, d);
  if (st) return st;
  if (out) out->name = kname;
  return TS_OK;
}

/* Adds the named consumers to subst (nsub of them so far), once each: child
 * blocks of the scope (kids) that just read buf and run after its writer,
 * kid w (-1: none). *first: the lowest kid index added. */
static ts_status add_consumers(const ts_vec *kids, int nconsumers, const sch_block *consumers, const char *P,
                               const char *bname, const ir_buffer *buf, int w, ir_stmt **subst, int *nsub,
                               int *first, ts_diag *d) {
  for (int k = 0; k < nconsumers; k++) {
    int i = kid_index(kids, consumers[k].name);
    if (i < 0)
      return ts_diag_set(d, TS_ESCHEDULE, "%s: consumer '%s' is not a block in the scope of '%s'", P,
                         consumers[k].name ? consumers[k].name : "(null)", bname);
    const ir_block *o = realize_of(kids, (size_t)i)->u.realize.block;
    if (i == w || !sch_block_reads(o, buf) || sch_block_writes(o, buf))
      return ts_diag_set(d, TS_ESCHEDULE, "%s: consumer '%s' does not just read '%s'", P, o->name, buf->name);
    if (i < w)
      return ts_diag_set(d, TS_ESCHEDULE, "%s: consumer '%s' runs before the writer '%s' of '%s'", P, o->name,
                         realize_of(kids, (size_t)w)->u.realize.block->name, buf->name);
    bool dup = false;
    for (int j = 0; j < *nsub; j++) dup |= subst[j] == realize_of(kids, (size_t)i);
    if (dup) continue;
    subst[(*nsub)++] = realize_of(kids, (size_t)i);
    if (*first < 0 || i < *first) *first = i;
  }
  return TS_OK;
}

/* ---- cache_read ---------------------------------------------------------- */

static ts_status cache_rw(sch_state *s, sch_block b, bool read, int idx, const char *scope, int nconsumers,
                          const sch_block *consumers, sch_block *out, ts_diag *d);

/* cache_read past the common checks: the writer, the consumers, where the
 * copy goes and what it covers. */
static ts_status cache_read_in(sch_state *s, const char *P, const sch_path *p, int sc, ir_buffer *buf,
                               const ts_vec *kids, const char *scope, int nconsumers, const sch_block *consumers,
                               sch_block *out, ts_diag *d) {
  const ir_block *blk = p->node[p->n - 1]->u.realize.block;
  const ir_stmt *scope_rz = p->node[sc];
  ts_arena *a = &s->arena;
  ir_stmt **subst = NULL;
  ts_status st = TS_OK;
  /* the writer, if any, must be unique */
  int w = -1, nw = 0;
  for (size_t i = 0; i < kids->len; i++)
    if (sch_block_writes(realize_of(kids, i)->u.realize.block, buf)) {
      if (nw++ == 0)
        w = (int)i;
      else
        return ts_diag_set(
            d, TS_ESCHEDULE, "%s: buffer '%s' has more than one writer in scope '%s' ('%s' and '%s')", P,
            buf->name, scope_rz->u.realize.block->name, realize_of(kids, (size_t)w)->u.realize.block->name,
            realize_of(kids, i)->u.realize.block->name);
    }
  /* consumers: child blocks reading buf after its writer */
  subst = TS_ANEWN(a, ir_stmt *, kids->len ? kids->len : 1);
  if (!subst) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  int nsub = 0, first = -1;
  if (nconsumers == 0) {
    for (size_t i = 0; i < kids->len; i++) {
      const ir_block *o = realize_of(kids, i)->u.realize.block;
      if ((int)i > w && sch_block_reads(o, buf) && !sch_block_writes(o, buf)) {
        if (first < 0) first = (int)i;
        subst[nsub++] = realize_of(kids, i);
      }
    }
  } else {
    st = add_consumers(kids, nconsumers, consumers, P, blk->name, buf, w, subst, &nsub, &first, d);
    if (st) return st;
  }
  if (nsub == 0) {
    return ts_diag_set(
        d, TS_ESCHEDULE, "%s: no block reads '%s' after its writer '%s'", P, buf->name,
        realize_of(kids, (size_t)w)
            ->u.realize.block->name); /* (w >= 0 here: without a writer, blk itself reads it) */
  }

  /* placement and region */
  copy_dim *dims = TS_ANEWN(a, copy_dim, buf->ndim ? buf->ndim : 1);
  if (!dims) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  rw_ctx c = {.a = a, .subst = subst, .nsubst = nsub};
  int at_end = -1, from = sc + 1;
  sch_path wp;
  const sch_path *loop_path = p;
  if (w < 0) {
    /* no writer in the scope (a function input): copy at the start of the
     * scope, what the scope reads (or all of it) */
    const ir_block *sb = scope_rz->u.realize.block;
    const ir_region *reg = NULL;
    for (int i = 0; i < sb->nreads; i++)
      if (sb->reads[i].buf == buf) reg = &sb->reads[i];
    whole_region(s, buf, reg, dims);
    at_end = 0;
  } else {
    const ir_block *wb = realize_of(kids, (size_t)w)->u.realize.block;
    const char *fname = realize_of(kids, (size_t)first)->u.realize.block->name;
    st = find_loc(s, P, wb->name, fname, &c.loc, &c.pos, &from, &wp, d);
    if (st) return st;
    const ir_region *reg = NULL;
    for (int i = 0; i < wb->nwrites; i++)
      if (wb->writes[i].buf == buf) reg = &wb->writes[i];
    if (relaxed_region(s, &wp, reg, from, dims)) return ts_diag_set(d, TS_ENOMEM, "out of memory");
    loop_path = &wp;
  }

  return cache_install(s, p, sc, &c, at_end, buf, scope, loop_path, from, dims, true, out, d);
}

ts_status sch_cache_read(sch_state *s, sch_block b, int read_index, const char *scope, int nconsumers,
                         const sch_block *consumers, sch_block *out, ts_diag *d) {
  return cache_rw(s, b, true, read_index, scope, nconsumers, consumers, out, d);
}

/* ---- cache_write --------------------------------------------------------- */

static ts_status cache_write_in(sch_state *s, const char *P, const sch_path *p, int sc, ir_buffer *buf,
                                const ts_vec *kids, int write_index, const char *scope, int nconsumers,
                                const sch_block *consumers, sch_block *out, ts_diag *d) {
  ts_arena *a = &s->arena;
  ir_stmt **subst = NULL;
  ts_status st = TS_OK;
  ir_stmt *rz = p->node[p->n - 1];
  const ir_block *blk = rz->u.realize.block;
  int w = kid_index(kids, blk->name);
  TS_ASSERT(w >= 0);
  for (size_t i = 0; i < kids->len; i++) {
    const ir_block *o = realize_of(kids, i)->u.realize.block;
    if ((int)i != w && sch_block_writes(o, buf))
      return ts_diag_set(d, TS_ESCHEDULE,
                         "%s: block '%s' is not the only writer of '%s' (block '%s' writes it too)", P,
                         blk->name, buf->name, o->name);
  }
  /* readers before the writer that share a loop with it would read values
   * the copy-back has not stored yet */
  int first = -1;
  for (size_t i = 0; i < kids->len; i++) {
    const ir_block *o = realize_of(kids, i)->u.realize.block;
    if ((int)i == w || !sch_block_reads(o, buf)) continue;
    if ((int)i > w) {
      if (first < 0) first = (int)i;
      continue;
    }
    sch_path rp;
    st = sch_find_block(s, o->name, &rp, P, d);
    if (st) return st;
    if (share_loop(p, &rp, sc))
      return ts_diag_set(d, TS_ESCHEDULE,
                         "%s: block '%s' reads '%s' before its writer '%s' inside a shared loop", P, o->name,
                         buf->name, blk->name);
  }
  subst = TS_ANEWN(a, ir_stmt *, kids->len + 1);
  if (!subst) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  int nsub = 0;
  subst[nsub++] = rz;
  int cfirst = -1;
  st = add_consumers(kids, nconsumers, consumers, P, blk->name, buf, w, subst, &nsub, &cfirst, d);
  if (st) return st;

  copy_dim *dims = TS_ANEWN(a, copy_dim, buf->ndim ? buf->ndim : 1);
  if (!dims) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  rw_ctx c = {.a = a, .subst = subst, .nsubst = nsub};
  int at_end = -1, from = sc + 1;
  sch_path wp = *p;
  if (first < 0) {
    at_end = 1; /* nothing reads it here: copy back at the end of the scope */
  } else {
    st = find_loc(s, P, blk->name, realize_of(kids, (size_t)first)->u.realize.block->name, &c.loc, &c.pos,
                  &from, &wp, d);
    if (st) return st;
  }
  if (relaxed_region(s, &wp, &blk->writes[write_index], from, dims))
    return ts_diag_set(d, TS_ENOMEM, "out of memory");
  return cache_install(s, p, sc, &c, at_end, buf, scope, &wp, from, dims, false, out, d);
}

/* cache_read (read) / cache_write at b: the common checks, then the
 * primitive's own placement. */
static ts_status cache_rw(sch_state *s, sch_block b, bool read, int idx, const char *scope, int nconsumers,
                          const sch_block *consumers, sch_block *out, ts_diag *d) {
  const char *P = read ? "cache_read" : "cache_write";
  sch_path p;
  int sc = -1;
  ir_buffer *buf = NULL;
  ts_vec kids;
  ts_vec_init(&kids);
  ts_status st = cache_begin(s, P, b, read, idx, scope, nconsumers, consumers, &p, &sc, &buf, &kids, d);
  if (!st)
    st = read ? cache_read_in(s, P, &p, sc, buf, &kids, scope, nconsumers, consumers, out, d)
              : cache_write_in(s, P, &p, sc, buf, &kids, idx, scope, nconsumers, consumers, out, d);
  ts_vec_fini(&kids);
  return st ? st : sch_finish(s, TS_OK, d);
}

ts_status sch_cache_write(sch_state *s, sch_block b, int write_index, const char *scope, int nconsumers,
                          const sch_block *consumers, sch_block *out, ts_diag *d) {
  return cache_rw(s, b, false, write_index, scope, nconsumers, consumers, out, d);
}

/* ---- set_scope / storage_align ----------------------------------------- */

/* Finds the block on p that allocates buf: its path index, or -1. */
static int alloc_site(const sch_path *p, const ir_buffer *buf) {
  for (int i = p->n - 1; i >= 0; i--) {
    if (p->node[i]->kind != IR_BLOCK_REALIZE) continue;
    const ir_block *b = p->node[i]->u.realize.block;
    for (int k = 0; k < b->nalloc; k++)
      if (b->allocs[k] == buf) return i;
  }
  return -1;
}

/* The buffer a block writes (write_index) and the block allocating it: at
 * p.node[site]. */
typedef struct written_buf {
  sch_path p;
  ir_buffer *buf;
  int site;
} written_buf;

/* Common front of set_scope and storage_align: the write_index-th written
 * buffer of b, which must be allocated by a block (its path index in *site). */
static ts_status written_alloc(sch_state *s, const char *P, sch_block b, int write_index, written_buf *w,
                               ts_diag *d) {
  sch_path *p = &w->p;
  ir_buffer **buf = &w->buf;
  int *site = &w->site;
  ts_status st = sch_find_block(s, b.name, p, P, d);
  if (st) return st;
  const ir_block *blk = p->node[p->n - 1]->u.realize.block;
  if (write_index < 0 || write_index >= blk->nwrites)
    return ts_diag_set(d, TS_ESCHEDULE,
                       "%s: block '%s' writes %d buffer(s); write_index %d is out of range", P,
                       blk->name, blk->nwrites, write_index);
  *buf = blk->writes[write_index].buf;
  *site = alloc_site(p, *buf);
  if (*site < 0)
    return ts_diag_set(d, TS_ESCHEDULE,
                       "%s: buffer '%s' written by block '%s' is not allocated by a block (it is a "
                       "function parameter)",
                       P, (*buf)->name, blk->name);
  return TS_OK;
}

/* Replaces buf by nb throughout the allocating block at p->node[site]. */
static ts_status swap_buffer(sch_state *s, const sch_path *p, int site, ir_buffer *buf,
                             ir_buffer *nb, ts_diag *d) {
  ts_arena *a = &s->arena;
  ir_stmt *n = ir_subst_buffer(a, p->node[site], buf, nb);
  if (!n) return ts_diag_set(d, TS_ENOMEM, "out of memory replacing buffer '%s'", buf->name);
  /* the allocation itself (ir_subst_buffer may leave alloc lists alone) */
  const ir_block *ob = n->u.realize.block;
  for (int i = 0; i < ob->nalloc; i++) {
    if (ob->allocs[i] != buf) continue;
    ir_stmt *n2 = ir_stmt_clone(a, n);
    ir_block *b2 = ir_block_clone(a, ob);
    ir_buffer **al = TS_ANEWN(a, ir_buffer *, ob->nalloc);
    if (!n2 || !b2 || !al) return ts_diag_set(d, TS_ENOMEM, "out of memory");
    memcpy(al, ob->allocs, sizeof *al * (size_t)ob->nalloc);
    al[i] = nb;
    b2->allocs = al;
    n2->u.realize.block = b2;
    n = n2;
    break;
  }
  return sch_replace(s, p, site, n, d);
}

static ir_buffer *copy_buffer(ts_arena *a, const ir_buffer *buf) {
  ir_buffer *nb = TS_ANEW(a, ir_buffer);
  if (!nb) return NULL;
  *nb = *buf;
  return nb;
}

ts_status sch_set_scope(sch_state *s, sch_block b, int write_index, const char *scope, ts_diag *d) {
  const char *P = "set_scope";
  written_buf w;
  ts_status st = written_alloc(s, P, b, write_index, &w, d);
  if (st) return st;
  if (!valid_scope(scope))
    return ts_diag_set(d, TS_ESCHEDULE,
                       "%s: invalid storage scope \"%s\" (want a name like \"shared\" or \"local\")",
                       P, scope ? scope : "(null)");
  if (w.buf->scope && !strcmp(w.buf->scope, scope)) return sch_finish(s, TS_OK, d); /* no-op */
  char base[256];
  snprintf(base, sizeof base, "%s_%s", w.buf->name, scope);
  ir_buffer *nb = copy_buffer(&s->arena, w.buf);
  const char *name = sch_fresh_buffer_name(s, base);
  const char *sc = ts_arena_strdup(&s->arena, scope);
  if (!nb || !name || !sc) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  nb->name = name;
  nb->scope = sc;
  st = swap_buffer(s, &w.p, w.site, w.buf, nb, d);
  return st ? st : sch_finish(s, TS_OK, d);
}

ts_status sch_storage_align(sch_state *s, sch_block b, int write_index, int axis, int64_t factor,
                            int64_t offset, ts_diag *d) {
  const char *P = "storage_align";
  written_buf w;
  ts_status st = written_alloc(s, P, b, write_index, &w, d);
  if (st) return st;
  if (factor <= 0)
    return ts_diag_set(d, TS_ESCHEDULE, "%s: factor %lld for buffer '%s' must be positive", P,
                       (long long)factor, w.buf->name);
  int nd = w.buf->ndim;
  if (axis < -nd || axis >= nd)
    return ts_diag_set(d, TS_ESCHEDULE,
                       "%s: axis %d is out of range [%d, %d) for the %d-d buffer '%s'", P, axis,
                       -nd, nd, nd, w.buf->name);
  if (axis < 0) axis += nd;
  ts_arena *a = &s->arena;
  ir_buffer *nb = copy_buffer(a, w.buf);
  int64_t *f = TS_ANEWN(a, int64_t, nd), *o = TS_ANEWN(a, int64_t, nd);
  if (!nb || !f || !o) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  for (int i = 0; i < nd; i++) {
    f[i] = w.buf->align_factor ? w.buf->align_factor[i] : 0;
    o[i] = w.buf->align_factor && w.buf->align_offset ? w.buf->align_offset[i] : 0;
  }
  f[axis] = factor;
  o[axis] = offset;
  nb->align_factor = f;
  nb->align_offset = o;
  st = swap_buffer(s, &w.p, w.site, w.buf, nb, d);
  return st ? st : sch_finish(s, TS_OK, d);
}

/* ---- set_dtype ----------------------------------------------------------- */

typedef struct sd_ctx {
  ir_buffer *from, *to;
} sd_ctx;

/* Loads of the buffer read the wide one cast back to the old dtype (every
 * value fits both); a cast of that to a type at least as wide reads the
 * wide load directly (i32(u8(w16)) = i32(w16) where w16 holds a u8). */
static ir_expr *sd_expr(ir_mutator *m, const ir_expr *orig, ir_expr *e) {
  (void)orig;
  const sd_ctx *c = m->ctx;
  if (e->kind == IR_CAST) {
    const ir_expr *x = e->u.cast.value;
    bool narrowed = x->kind == IR_CAST && x->dtype.code == c->from->dtype.code && x->u.cast.value->kind == IR_LOAD &&
                    x->u.cast.value->u.load.buf == c->to;
    if (!narrowed || !(ir_dtype_is_float(e->dtype) ||
                       (ir_dtype_is_int(e->dtype) && ir_dtype_bits(e->dtype) >= ir_dtype_bits(c->to->dtype))))
      return NULL;
    ir_expr *n = ir_expr_clone(m->arena, e);
    if (!n) {
      ir_mutator_fail(m);
      return NULL;
    }
    n->u.cast.value = x->u.cast.value;
    return n;
  }
  if (e->kind != IR_LOAD || e->u.load.buf != c->from) return NULL;
  ir_expr *n = ir_expr_clone(m->arena, e);
  ir_expr *back = n ? ir_cast(m->arena, e->dtype, n) : NULL;
  if (!back) {
    ir_mutator_fail(m);
    return NULL;
  }
  n->u.load.buf = c->to;
  n->dtype = (ir_dtype){c->to->dtype.code, e->dtype.lanes};
  return back;
}

/* Stores to the buffer store their value widened. */
static ir_stmt *sd_stmt(ir_mutator *m, const ir_stmt *orig, ir_stmt *s) {
  (void)orig;
  const sd_ctx *c = m->ctx;
  if (s->kind != IR_STORE || s->u.store.buf != c->from) return NULL;
  ir_stmt *n = ir_stmt_clone(m->arena, s);
  ir_expr *v = n ? ir_cast(m->arena, (ir_dtype){c->to->dtype.code, s->u.store.value->dtype.lanes}, s->u.store.value)
                 : NULL;
  if (!v) {
    ir_mutator_fail(m);
    return NULL;
  }
  n->u.store.buf = c->to;
  n->u.store.value = v;
  return n;
}

ts_status sch_set_dtype(sch_state *s, sch_block b, int write_index, ir_dtype dtype, ts_diag *d) {
  const char *P = "set_dtype";
  written_buf w;
  ts_status st = written_alloc(s, P, b, write_index, &w, d);
  if (st) return st;
  if (ir_dtype_eq(w.buf->dtype, dtype)) return sch_finish(s, TS_OK, d); /* no-op */
  if (!sch_dtype_widens(w.buf->dtype, dtype)) {
    char f1[16], f2[16];
    return ts_diag_set(d, TS_ESCHEDULE, "%s: buffer '%s' (%s) to %s is no widening of an 8-bit integer to 16 or 32 bits",
                       P, w.buf->name, ir_dtype_str(w.buf->dtype, f1, sizeof f1), ir_dtype_str(dtype, f2, sizeof f2));
  }
  ts_arena *a = &s->arena;
  ir_buffer *nb = copy_buffer(a, w.buf);
  if (!nb) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  nb->dtype = dtype;
  sd_ctx c = {.from = w.buf, .to = nb};
  bool failed = false;
  ir_stmt *n = ir_rewrite_stmt(a, &(ir_mutator_hooks){.post_expr = sd_expr, .post_stmt = sd_stmt}, &c,
                               (ir_stmt *)w.p.node[w.site], &failed);
  if (failed || !n) return ts_diag_set(d, TS_ENOMEM, "out of memory widening buffer '%s'", w.buf->name);
  if (n != w.p.node[w.site]) {
    st = sch_replace(s, &w.p, w.site, n, d);
    if (st) return st;
    st = sch_find_block(s, b.name, &w.p, P, d);
    if (st) return st;
  }
  /* the regions and the allocation */
  st = swap_buffer(s, &w.p, w.site, w.buf, nb, d);
  return st ? st : sch_finish(s, TS_OK, d);
}
