/* ir/schedule/compute_inline.c — compute_inline and reverse_compute_inline
 * (TVM's primitive/compute_inline.cc), the two primitives that rewrite block
 * bodies rather than loops; only the direct (identity-indexed) forms.
 * docs/IR.md ("Notes by file"). */
#include <string.h>

#include "sch_int.h"

static ts_status oom(ts_diag *d) { return ts_diag_set(d, TS_ENOMEM, "out of memory"); }

static int iter_index(const ir_block *b, const ir_var *v) {
  for (int i = 0; i < b->niter; i++)
    if (b->iters[i].var == v) return i;
  return -1;
}

/* ---- load rewriting ------------------------------------------------------ */

/* Hooks for the shared mutator: every load of buf is replaced by
 * repl(its already rewritten indices) (NULL on OOM); the statement skip is
 * left alone; a block whose body changed gets fresh regions (post order, so
 * nested blocks first: the detector trusts their regions). */
typedef struct rw {
  ir_buffer *buf;
  ir_expr *(*repl)(ir_mutator *m, ir_expr *const *idx);
  void *ctx;
  const ir_stmt *skip;
  bool regen_failed;
} rw;

static ir_expr *rw_load(ir_mutator *m, const ir_expr *orig, ir_expr *e) {
  (void)orig;
  const rw *r = m->ctx;
  if (e->kind != IR_LOAD || e->u.load.buf != r->buf) return NULL;
  ir_expr *n = r->repl(m, e->u.load.idx);
  if (!n) ir_mutator_fail(m);
  return n;
}

static ir_stmt *rw_skip(ir_mutator *m, ir_stmt *s) {
  const rw *r = m->ctx;
  return s == r->skip ? s : NULL;
}

static ir_stmt *rw_regen(ir_mutator *m, const ir_stmt *orig, ir_stmt *s) {
  rw *r = m->ctx;
  if (s->kind != IR_BLOCK_REALIZE) return NULL;
  const ir_block *ob = orig->u.realize.block;
  ir_block *nb = s->u.realize.block; /* a fresh clone when it differs */
  if (nb == ob || (nb->init == ob->init && nb->body == ob->body)) return NULL;
  ts_diag dd;
  ts_diag_clear(&dd);
  if (ir_block_detect_regions(m->arena, nb, &dd)) {
    r->regen_failed = true;
    if (dd.code == TS_ENOMEM) ir_mutator_fail(m);
  }
  return NULL;
}

static void rw_init(ir_mutator *m, ts_arena *a, rw *r) {
  ir_mutator_init(m, a);
  m->ctx = r;
  m->post_expr = rw_load;
  m->pre_stmt = rw_skip;
  m->post_stmt = rw_regen;
}

/* Does the statement (or expression) use buffer buf anywhere other than
 * loads? Stores to it, allocations of it. */
typedef struct use_ctx {
  const ir_buffer *buf;
  const ir_stmt *skip;
  bool store;
} use_ctx;

static bool use_stmt_cb(void *ctx, const ir_stmt *s) {
  use_ctx *u = ctx;
  if (s == u->skip) return false;
  if (s->kind == IR_STORE && s->u.store.buf == u->buf) u->store = true;
  if (s->kind == IR_ALLOCATE && s->u.alloc.buf == u->buf) u->store = true;
  if (s->kind == IR_BLOCK_REALIZE) {
    const ir_block *b = s->u.realize.block;
    for (int i = 0; i < b->nalloc; i++)
      if (b->allocs[i] == u->buf) u->store = true;
  }
  return !u->store;
}

/* A new scope block without buf among its allocations. */
static ir_stmt *drop_alloc(ts_arena *a, const ir_stmt *scope, const ir_buffer *buf) {
  const ir_block *b = scope->u.realize.block;
  ir_block *nb = ir_block_clone(a, b);
  ir_stmt *n = ir_stmt_clone(a, scope);
  if (!nb || !n) return NULL;
  nb->allocs = TS_ANEWN(a, ir_buffer *, b->nalloc ? b->nalloc : 1);
  if (!nb->allocs) return NULL;
  nb->nalloc = 0;
  for (int i = 0; i < b->nalloc; i++)
    if (b->allocs[i] != buf) nb->allocs[nb->nalloc++] = b->allocs[i];
  n->u.realize.block = nb;
  return n;
}

/* ---- compute_inline ------------------------------------------------------- */

typedef struct inl {
  sch_state *s;
  const char *prim;
  sch_path pb;
  int sc;
  const ir_block *blk, *scope;
  const ir_stmt *store;
  ir_buffer *buf;
  int *dim_of; /* iter var -> store dim, or -1 (a unit var) */
} inl;

static ts_status inline_check(inl *c, sch_block b, ts_diag *d) {
  const char *prim = c->prim;
  ts_status st = sch_find_block(c->s, b.name, &c->pb, prim, d);
  if (st) return st;
  const ir_block *blk = c->blk = c->pb.node[c->pb.n - 1]->u.realize.block;
  c->sc = sch_path_scope(&c->pb, c->pb.n - 1);
  if (c->sc < 0) return ts_diag_set(d, TS_ESCHEDULE, "%s: '%s' is the root block", prim, blk->name);
  c->scope = c->pb.node[c->sc]->u.realize.block;
  if (blk->init)
    return ts_diag_set(d, TS_ESCHEDULE, "%s: block '%s' is a reduction (it has an init)", prim,
                       blk->name);
  for (int i = 0; i < blk->niter; i++)
    if (blk->iters[i].type != IR_ITER_S)
      return ts_diag_set(d, TS_ESCHEDULE,
                         "%s: block '%s' is not complete (iter var '%s' is not spatial)", prim,
                         blk->name, blk->iters[i].var->name);
  if (blk->nwrites != 1)
    return ts_diag_set(d, TS_ESCHEDULE, "%s: block '%s' writes %d buffers; it must write exactly one",
                       prim, blk->name, blk->nwrites);
  c->buf = blk->writes[0].buf;
  if (blk->nalloc)
    return ts_diag_set(d, TS_ESCHEDULE, "%s: block '%s' allocates buffers", prim, blk->name);
  const ir_stmt *body = blk->body;
  if (body->kind != IR_STORE || body->u.store.buf != c->buf || body->u.store.predicate)
    return ts_diag_set(d, TS_ESCHEDULE,
                       "%s: the body of block '%s' is not a single unconditional store to '%s'",
                       prim, blk->name, c->buf->name);
  c->store = body;
  if (body->u.store.nidx != c->buf->ndim)
    return ts_diag_set(d, TS_ESCHEDULE, "%s: block '%s' stores '%s' with the wrong index count", prim,
                       blk->name, c->buf->name);
  c->dim_of = TS_ANEWN(sch_arena(c->s), int, blk->niter ? blk->niter : 1);
  if (!c->dim_of) return oom(d);
  for (int i = 0; i < blk->niter; i++) c->dim_of[i] = -1;
  for (int k = 0; k < body->u.store.nidx; k++) {
    const ir_expr *ix = body->u.store.idx[k];
    if (ix->kind == IR_INT_IMM) continue;
    int v = ix->kind == IR_VAR ? iter_index(blk, ix->u.var) : -1;
    if (v < 0 || c->dim_of[v] >= 0)
      return ts_diag_set(d, TS_ESCHEDULE,
                         "%s: block '%s' stores '%s' at indices that are not its distinct iter vars "
                         "(dim %d); only the direct form is supported",
                         prim, blk->name, c->buf->name, k);
    c->dim_of[v] = k;
  }
  for (int i = 0; i < blk->niter; i++) {
    int64_t e;
    if (c->dim_of[i] < 0 && !(ir_as_int(blk->iters[i].dom.extent, &e) && e == 1))
      return ts_diag_set(d, TS_ESCHEDULE,
                         "%s: block '%s': iter var '%s' does not index the stored buffer '%s'",
                         prim, blk->name, blk->iters[i].var->name, c->buf->name);
  }
  if (!sch_block_allocates(c->scope, c->buf)) {
    bool param = false;
    for (int i = 0; i < c->s->func->nparams; i++) param |= c->s->func->params[i] == c->buf;
    return ts_diag_set(d, TS_ESCHEDULE,
                       param ? "%s: block '%s' is an output block (it writes the parameter '%s')"
                             : "%s: block '%s' writes '%s', which its scope does not allocate",
                       prim, blk->name, c->buf->name);
  }
  st = sch_check_stage_pipeline(c->scope, blk, prim, d);
  if (st) return st;
  /* No opaque use: nothing but loads may touch the buffer in the scope. */
  use_ctx u = {c->buf, c->pb.node[c->pb.n - 1], false};
  ir_visitor vis = {.stmt = use_stmt_cb, .ctx = &u};
  ir_visit_stmt(&vis, c->scope->body);
  if (u.store)
    return ts_diag_set(d, TS_ESCHEDULE,
                       "%s: buffer '%s' of block '%s' is written or allocated elsewhere in its scope",
                       prim, c->buf->name, blk->name);
  if (!sch_can_remove_leaf(&c->pb))
    return ts_diag_set(d, TS_ESCHEDULE, "%s: block '%s' is the only leaf of its scope", prim,
                       blk->name);
  return TS_OK;
}

static ir_expr *inline_repl(ir_mutator *mu, ir_expr *const *idx) {
  const inl *c = ((const rw *)mu->ctx)->ctx;
  ir_var_map m;
  ir_var_map_init(&m);
  bool ok = true;
  for (int i = 0; i < c->blk->niter && ok; i++) {
    ir_expr *v = c->dim_of[i] >= 0 ? idx[c->dim_of[i]] : c->blk->iters[i].dom.min;
    ok = ir_var_map_put(&m, c->blk->iters[i].var, v) == TS_OK;
  }
  ir_expr *e = ok ? ir_subst_expr(mu->arena, c->store->u.store.value, &m) : NULL;
  ir_var_map_fini(&m);
  return e;
}

/* The checked state of compute_inline(b), or NULL with *st set. */
static inl *inline_begin(sch_state *s, sch_block b, ts_diag *d, ts_status *st) {
  inl *c = ts_calloc(1, sizeof *c);
  if (!c) {
    *st = oom(d);
    return NULL;
  }
  c->s = s;
  c->prim = "compute_inline";
  if ((*st = inline_check(c, b, d))) {
    ts_free(c);
    return NULL;
  }
  return c;
}

ts_status sch_compute_inline_check(sch_state *s, sch_block b, ts_diag *d) {
  ts_status st;
  ts_free(inline_begin(s, b, d, &st));
  return st;
}

ts_status sch_compute_inline(sch_state *s, sch_block b, ts_diag *d) {
  ts_status st;
  inl *c = inline_begin(s, b, d, &st);
  if (!c) return st;
  ts_arena *a = sch_arena(s);
  ir_stmt *saved = s->func->body;
  rw r = {.buf = c->buf, .repl = inline_repl, .ctx = c, .skip = c->pb.node[c->pb.n - 1]};
  ir_mutator mu;
  rw_init(&mu, a, &r);
  const ir_stmt *scope_rz = c->pb.node[c->sc];
  ir_stmt *nbody = ir_mutate_stmt(&mu, scope_rz->u.realize.block->body);
  ir_stmt *nscope = !mu.failed ? drop_alloc(a, scope_rz, c->buf) : NULL;
  ir_mutator_fini(&mu);
  if (!nscope) {
    ts_free(c);
    return oom(d);
  }
  if (r.regen_failed) {
    st = ts_diag_set(d, TS_ESCHEDULE,
                     "compute_inline: could not regenerate the regions of the blocks reading '%s'",
                     c->buf->name);
    ts_free(c);
    return st;
  }
  nscope->u.realize.block->body = nbody;
  const char *name = c->blk->name;
  st = sch_replace(s, &c->pb, c->sc, nscope, d);
  if (!st) st = sch_find_block(s, name, &c->pb, c->prim, d);
  if (!st) st = sch_remove_leaf(s, &c->pb, c->prim, d);
  if (st) s->func->body = saved;
  ts_free(c);
  return st ? st : sch_finish(s, TS_OK, d);
}

/* ---- reverse_compute_inline ------------------------------------------------ */

typedef struct rinl {
  const ir_block *prod;
  ir_expr *value; /* what the producer stored */
} rinl;

static ir_expr *rinline_repl(ir_mutator *mu, ir_expr *const *idx) {
  (void)idx; /* all loads of A share one index list, checked before */
  const rinl *c = ((const rw *)mu->ctx)->ctx;
  return c->value;
}

typedef struct loads_ctx {
  const ir_buffer *buf;
  const ir_expr *first;
  bool mismatch;
  int n;
} loads_ctx;

static bool same_idx(const ir_expr *x, const ir_expr *y) {
  if (x->u.load.nidx != y->u.load.nidx) return false;
  for (int i = 0; i < x->u.load.nidx; i++) {
    const ir_expr *a = x->u.load.idx[i], *b = y->u.load.idx[i];
    if (a->kind != IR_VAR || b->kind != IR_VAR || a->u.var != b->u.var) return false;
  }
  return true;
}

static bool loads_cb(void *ctx, const ir_expr *e) {
  loads_ctx *l = ctx;
  if (e->kind == IR_LOAD && e->u.load.buf == l->buf) {
    l->n++;
    if (!l->first) l->first = e;
    else if (!same_idx(l->first, e)) l->mismatch = true;
  }
  return true;
}

/* The state of one reverse_compute_inline: C the consumer, P (prz/pbk)
 * the producer of buffer A, found and checked phase by phase. */
typedef struct rci {
  sch_state *s;
  ts_arena *a;
  ts_diag *d;
  const char *prim;
  sch_path *pc, *pp;
  ts_vec kids;
  ir_analyzer an;
  ir_var_map m;
  const ir_stmt *crz, *cst, *prz, *pst, *pif;
  const ir_block *cb, *scope, *pbk;
  ir_buffer *abuf;
  const ir_expr *ld;
  ir_expr *pred;
} rci;

/* C: a complete, unpredicated single-store block that can be removed;
 * the one buffer A it reads from its scope, and A's single producer P (a
 * complete block storing A at its distinct iter vars), no other reader. */
static ts_status rci_find(rci *c) {
  ts_diag *d = c->d;
  const char *prim = c->prim;
  sch_path *pc = c->pc;
  ts_status st;
  const ir_stmt *crz = c->crz = pc->node[pc->n - 1];
  const ir_block *cb = c->cb = crz->u.realize.block;
  int sc = sch_path_scope(pc, pc->n - 1);
  int64_t t;
  if (sc < 0)
    return ts_diag_set(d, TS_ESCHEDULE, "%s: '%s' is the root block", prim, cb->name);
  const ir_block *scope = c->scope = pc->node[sc]->u.realize.block;
  if (cb->init)
    return ts_diag_set(d, TS_ESCHEDULE, "%s: block '%s' is a reduction (it has an init)", prim, cb->name);
  for (int i = 0; i < cb->niter; i++)
    if (cb->iters[i].type != IR_ITER_S)
      return ts_diag_set(d, TS_ESCHEDULE, "%s: block '%s' is not complete (iter var '%s' is not spatial)",
                       prim, cb->name, cb->iters[i].var->name);
  if (!(ir_as_int(crz->u.realize.predicate, &t) && t)) {
    /* a predicate over loops that are C's distinct iter values (a block
     * padded to a shape bucket) moves to the producer's points (rci_map) */
    for (int i = 0; i < cb->niter; i++) {
      const ir_expr *v = crz->u.realize.iter_values[i];
      bool dup = v->kind != IR_VAR;
      for (int j = 0; j < i && !dup; j++) dup = crz->u.realize.iter_values[j]->kind == IR_VAR &&
                                               crz->u.realize.iter_values[j]->u.var == v->u.var;
      if (dup)
        return ts_diag_set(d, TS_ESCHEDULE, "%s: block '%s' has a predicate and iter values that are not distinct loops",
                           prim, cb->name);
    }
  }
  const ir_stmt *cst = c->cst = cb->body;
  if (cst->kind != IR_STORE || cst->u.store.predicate || cb->nwrites != 1 ||
      cst->u.store.buf != cb->writes[0].buf || cb->nalloc)
    return ts_diag_set(d, TS_ESCHEDULE, "%s: the body of block '%s' is not a single store", prim,
                     cb->name);
  st = sch_check_stage_pipeline(scope, cb, prim, d);
  if (st) return st;
  if (!sch_can_remove_leaf(pc))
    return ts_diag_set(d, TS_ESCHEDULE, "%s: block '%s' is the only leaf of its scope", prim, cb->name);
  if (sch_child_realizes(scope->body, &c->kids))
    return oom(d);
  const ts_vec kids = c->kids;
  /* The one buffer C reads that its scope produces, and its producer. */
  ir_buffer *abuf = NULL;
  const ir_stmt *prz = NULL;
  int nprod_bufs = 0;
  for (int i = 0; i < cb->nreads; i++) {
    const ir_stmt *w = NULL;
    int nw = 0;
    for (size_t k = 0; k < kids.len; k++) {
      const ir_stmt *r = kids.items[k];
      if (r != crz && sch_block_writes(r->u.realize.block, cb->reads[i].buf)) {
        w = r;
        nw++;
      }
    }
    if (!nw) continue;
    nprod_bufs++;
    abuf = cb->reads[i].buf;
    prz = nw == 1 ? w : NULL;
  }
  if (nprod_bufs != 1) {
    return ts_diag_set(d, TS_ESCHEDULE,
                     "%s: block '%s' reads %d buffers produced in its scope; it must read exactly one",
                     prim, cb->name, nprod_bufs);
  }
  if (!prz)
    return ts_diag_set(d, TS_ESCHEDULE, "%s: buffer '%s' read by block '%s' has several producers", prim,
                     abuf->name, cb->name);
  const ir_block *pbk = c->pbk = prz->u.realize.block;
  for (size_t k = 0; k < kids.len; k++) {
    const ir_block *o = ((const ir_stmt *)kids.items[k])->u.realize.block;
    if (o != cb && o != pbk && sch_block_reads(o, abuf))
      return ts_diag_set(d, TS_ESCHEDULE, "%s: buffer '%s' has another consumer, block '%s'", prim,
                       abuf->name, o->name);
  }
  if (!sch_block_allocates(scope, abuf))
    return ts_diag_set(d, TS_ESCHEDULE,
                     "%s: producer '%s' is an output block (its scope does not allocate '%s')", prim,
                     pbk->name, abuf->name);
  if (pbk->init || pbk->nwrites != 1 || pbk->nalloc)
    return ts_diag_set(d, TS_ESCHEDULE,
                     "%s: producer '%s' of '%s' is not a complete block writing only '%s'", prim,
                     pbk->name, abuf->name, abuf->name);
  for (int i = 0; i < pbk->niter; i++)
    if (pbk->iters[i].type != IR_ITER_S)
      return ts_diag_set(d, TS_ESCHEDULE, "%s: producer '%s' is not complete (iter var '%s')", prim,
                       pbk->name, pbk->iters[i].var->name);
  if (sch_block_reads(pbk, abuf))
    return ts_diag_set(d, TS_ESCHEDULE, "%s: producer '%s' reads '%s', which it writes", prim, pbk->name,
                     abuf->name);
  /* Producer body: A[u...] = e(u), maybe under an else-less if. */
  const ir_stmt *pst = pbk->body, *pif = NULL;
  if (pst->kind == IR_IF && !pst->u.ifs.else_s) {
    pif = pst;
    pst = pst->u.ifs.then_s;
  }
  if (pst->kind != IR_STORE || pst->u.store.buf != abuf || pst->u.store.predicate ||
      pst->u.store.nidx != abuf->ndim)
    return ts_diag_set(d, TS_ESCHEDULE, "%s: the body of producer '%s' is not a single store to '%s'",
                     prim, pbk->name, abuf->name);
  for (int k = 0; k < pst->u.store.nidx; k++) {
    const ir_expr *ix = pst->u.store.idx[k];
    bool dup = false;
    for (int j = 0; j < k; j++) {
      const ir_expr *o = pst->u.store.idx[j];
      dup |= ix->kind == IR_VAR && o->kind == IR_VAR && o->u.var == ix->u.var;
    }
    if (ix->kind != IR_VAR || iter_index(pbk, ix->u.var) < 0 || dup)
      return ts_diag_set(d, TS_ESCHEDULE,
                       "%s: producer '%s' stores '%s' at indices that are not its distinct iter vars",
                       prim, pbk->name, abuf->name);
  }
  c->abuf = abuf;
  c->prz = prz;
  c->pst = pst;
  c->pif = pif;
  return TS_OK;
}

/* C's load of A, the map from C's iter vars to P's, and the predicate
 * of the new producer (P's points outside C's domain). */
static ts_status rci_map(rci *c) {
  ts_diag *d = c->d;
  const char *prim = c->prim;
  const ir_block *cb = c->cb;
  const ir_stmt *cst = c->cst;
  ir_buffer *abuf = c->abuf;
  const ir_stmt *pst = c->pst;
  sch_state *s = c->s;
  ts_arena *a = c->a;
  sch_path *pp = c->pp;
  const ir_stmt *prz = c->prz;
  const ir_block *pbk = c->pbk;
  ts_status st;
  /* C's loads of A: identical, its distinct iter vars, covering the
   * non-unit ones; and no load of A in C's store indices. */
  loads_ctx lc = {abuf, NULL, false, 0};
  ir_visitor lv = {.expr = loads_cb, .ctx = &lc};
  ir_visit_expr(&lv, cst->u.store.value);
  loads_ctx li = {abuf, NULL, false, 0};
  ir_visitor liv = {.expr = loads_cb, .ctx = &li};
  for (int k = 0; k < cst->u.store.nidx; k++) ir_visit_expr(&liv, cst->u.store.idx[k]);
  if (!lc.first || lc.mismatch || li.n)
    return ts_diag_set(d, TS_ESCHEDULE,
                     "%s: block '%s' does not load '%s' with one identical list of iter vars", prim,
                     cb->name, abuf->name);
  const ir_expr *ld = lc.first;
  if (ld->u.load.nidx != pst->u.store.nidx)
    return ts_diag_set(d, TS_ESCHEDULE, "%s: block '%s' loads '%s' with the wrong index count", prim,
                     cb->name, abuf->name);
  for (int k = 0; k < ld->u.load.nidx; k++) {
    const ir_expr *lk = ld->u.load.idx[k];
    int v = lk->kind == IR_VAR ? iter_index(cb, lk->u.var) : -1;
    if (v < 0 || ir_var_map_get(&c->m, cb->iters[v].var))
      return ts_diag_set(d, TS_ESCHEDULE,
                       "%s: block '%s' loads '%s' at indices that are not its distinct iter vars",
                       prim, cb->name, abuf->name);
    const ir_expr *u = pst->u.store.idx[k];
    if (ir_var_map_put(&c->m, cb->iters[v].var, (ir_expr *)u))
      return oom(d);
  }
  for (int v = 0; v < cb->niter; v++) {
    if (ir_var_map_get(&c->m, cb->iters[v].var)) continue;
    int64_t e;
    if (!(ir_as_int(cb->iters[v].dom.extent, &e) && e == 1))
      return ts_diag_set(d, TS_ESCHEDULE,
                       "%s: block '%s': iter var '%s' does not index its load of '%s' (not invertible)",
                       prim, cb->name, cb->iters[v].var->name, abuf->name);
    if (ir_var_map_put(&c->m, cb->iters[v].var, cb->iters[v].dom.min))
      return oom(d);
  }
  /* Coverage: each consumer var's domain inside the producer var's domain;
   * producer points outside the consumer's domain get a predicate. */
  st = sch_find_block(s, pbk->name, pp, prim, d);
  if (st) return st;
  if (sch_bind_path_loops(&c->an, pp, pp->n))
    return oom(d);
  ir_expr *pred = prz->u.realize.predicate;
  int64_t t;
  for (int k = 0; k < ld->u.load.nidx; k++) {
    const ir_iter_var *cv = &cb->iters[iter_index(cb, ld->u.load.idx[k]->u.var)];
    int pu = iter_index(pbk, pst->u.store.idx[k]->u.var);
    const ir_iter_var *pv = &pbk->iters[pu];
    ir_expr *cend = ir_add(a, cv->dom.min, cv->dom.extent), *pend = ir_add(a, pv->dom.min, pv->dom.extent);
    ir_expr *c1 = ir_binop(a, IR_LE, pv->dom.min, cv->dom.min), *c2 = ir_binop(a, IR_LE, cend, pend);
    if (!c1 || !c2)
      return oom(d);
    if (!ir_can_prove(&c->an, c1) || !ir_can_prove(&c->an, c2))
      return ts_diag_set(d, TS_ESCHEDULE,
                       "%s: producer '%s' does not cover the domain of block '%s' (iter var '%s')",
                       prim, pbk->name, cb->name, cv->var->name);
    ir_expr *val = prz->u.realize.iter_values[pu];
    ir_expr *lo = ir_simplify(&c->an, ir_binop(a, IR_LE, cv->dom.min, val));
    ir_expr *hi = ir_simplify(&c->an, ir_lt(a, val, ir_simplify(&c->an, cend)));
    if (!lo || !hi)
      return oom(d);
    if (!(ir_as_int(lo, &t) && t)) pred = ir_and(a, pred, lo);
    if (!(ir_as_int(hi, &t) && t)) pred = ir_and(a, pred, hi);
    if (!pred)
      return oom(d);
  }
  /* C's own predicate (over its loops, each one of its iter values: rci_find)
   * at the producer's points: loop -> C's iter var -> P's store index -> P's
   * iter value. The new block runs where both P and C ran. */
  if (!(ir_as_int(c->crz->u.realize.predicate, &t) && t)) {
    ir_var_map lm;
    ir_var_map_init(&lm);
    ts_status e = TS_OK;
    for (int v = 0; v < cb->niter && !e; v++) {
      ir_expr *u = ir_var_map_get(&c->m, cb->iters[v].var);
      int pu = u && u->kind == IR_VAR ? iter_index(pbk, u->u.var) : -1;
      ir_expr *pval = pu >= 0 ? prz->u.realize.iter_values[pu] : u;
      if (!pval || ir_var_map_put(&lm, c->crz->u.realize.iter_values[v]->u.var, pval)) e = TS_ENOMEM;
    }
    ir_expr *cp = e ? NULL : ir_subst_expr(a, c->crz->u.realize.predicate, &lm);
    bool left = false; /* a loop of C's nest that is none of its iter values */
    for (int k = 0; cp && k < c->pc->n; k++)
      if (c->pc->node[k]->kind == IR_FOR) left |= ir_expr_uses_var(cp, c->pc->node[k]->u.loop.var);
    ir_var_map_fini(&lm);
    if (!cp) return oom(d);
    if (left)
      return ts_diag_set(d, TS_ESCHEDULE, "%s: block '%s' has a predicate over loops its iter values do not name",
                         prim, cb->name);
    if (!(pred = ir_and(a, pred, cp))) return oom(d);
  }
  c->ld = ld;
  c->pred = pred;
  return TS_OK;
}


/* P stores what C stored; C and the allocation of A go. */
static ts_status rci_apply(rci *c) {
  sch_state *s = c->s;
  ts_arena *a = c->a;
  ts_diag *d = c->d;
  sch_path *pc = c->pc, *pp = c->pp;
  const ir_stmt *cst = c->cst, *prz = c->prz, *pst = c->pst, *pif = c->pif;
  const ir_block *cb = c->cb, *scope = c->scope, *pbk = c->pbk;
  ir_buffer *abuf = c->abuf;
  const char *prim = c->prim;
  ir_expr *pred = c->pred;
  ts_status st;
  /* The producer now stores C's value. */
  rinl rc = {pbk, pst->u.store.value};
  rw r = {.buf = abuf, .repl = rinline_repl, .ctx = &rc};
  ir_mutator mu;
  rw_init(&mu, a, &r);
  ir_expr *val = ir_mutate_expr(&mu, cst->u.store.value);
  val = !mu.failed ? ir_subst_expr(a, val, &c->m) : NULL;
  ir_mutator_fini(&mu);
  ir_expr **idx = TS_ANEWN(a, ir_expr *, cst->u.store.nidx ? cst->u.store.nidx : 1);
  if (!val || !idx)
    return oom(d);
  for (int k = 0; k < cst->u.store.nidx; k++)
    if (!(idx[k] = ir_subst_expr(a, cst->u.store.idx[k], &c->m)))
      return oom(d);
  ir_stmt *nstore = ir_store(a, cst->u.store.buf, cst->u.store.nidx, idx, val);
  ir_stmt *nbody = nstore;
  if (pif && nstore) {
    nbody = ir_stmt_clone(a, pif);
    if (nbody) nbody->u.ifs.then_s = nstore;
  }
  ir_block *npb = nbody ? ir_block_clone(a, pbk) : NULL;
  ir_stmt *nprz = npb ? ir_stmt_clone(a, prz) : NULL;
  if (!nprz)
    return oom(d);
  npb->body = nbody;
  st = ir_block_detect_regions(a, npb, d);
  if (st) return st;
  nprz->u.realize.block = npb;
  nprz->u.realize.predicate = pred;
  /* Apply: new producer, drop C, drop A's allocation. */
  ir_stmt *saved = s->func->body;
  const char *scope_name = scope->name;
  st = sch_replace(s, pp, pp->n - 1, nprz, d);
  if (!st) st = sch_find_block(s, cb->name, pc, prim, d);
  if (!st) st = sch_remove_leaf(s, pc, prim, d);
  if (!st) st = sch_find_block(s, scope_name, pc, prim, d);
  if (!st) {
    ir_stmt *ns = drop_alloc(a, pc->node[pc->n - 1], abuf);
    st = ns ? sch_replace(s, pc, pc->n - 1, ns, d) : oom(d);
  }
  if (st) s->func->body = saved;
  return TS_OK;
}

ts_status sch_reverse_compute_inline(sch_state *s, sch_block b, ts_diag *d) {
  rci c = {.s = s, .a = sch_arena(s), .d = d, .prim = "reverse_compute_inline"};
  c.pc = ts_malloc(sizeof *c.pc);
  c.pp = ts_malloc(sizeof *c.pp);
  ts_vec_init(&c.kids);
  ir_analyzer_init(&c.an, c.a);
  ir_var_map_init(&c.m);
  ts_status st = (!c.pc || !c.pp) ? oom(d) : sch_find_block(s, b.name, c.pc, c.prim, d);
  if (!st) st = rci_find(&c);
  if (!st) st = rci_map(&c);
  if (!st) st = rci_apply(&c);
  ir_var_map_fini(&c.m);
  ir_analyzer_fini(&c.an);
  ts_vec_fini(&c.kids);
  ts_free(c.pc);
  ts_free(c.pp);
  return st ? st : sch_finish(s, TS_OK, d);
}
