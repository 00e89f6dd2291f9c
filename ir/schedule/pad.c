/* pad.c — PadEinsum: a root-level reduction block's iteration domain padded
 * up to multiples (TVM's PadEinsum), so that a tensor intrinsic whose shape
 * does not divide the extents can still be tensorized over whole tiles.
 *
 *   C[i, j] = init;  C[i, j] += f(A[i, k]) * g(B[k, j])        (i < M, ...)
 * becomes, with M', N', K' the padded extents,
 *   A_pad[i, k] = (i < M && k < K) ? A[min(i, M-1), min(k, K-1)] : 0
 *   B_pad[k, j] = ...                       (every buffer C reads, padded)
 *   C_pad[i, j] = init;  C_pad[i, j] += f(A_pad[i, k]) * g(B_pad[k, j])
 *   C[i, j] = C_pad[i, j]                                     (i < M, j < N)
 *
 * A buffer may also be read at index expressions in some dims (a
 * convolution's window rows p * stride + r, a packed weight): those dims
 * keep their size and must stay in bounds over the padded domain; the
 * dims read at a padded iter var are padded as above.
 *
 * Exact: a padded reduction step adds a product (or a bare load) with a
 * factor that is a zero read from a padded input indexed by every padded
 * reduction iter var, and the padded output
 * rows and columns are computed and dropped (never written to C). The
 * padded loads are clamped so that no read leaves the original buffer,
 * whatever the code generator does with a select. docs/TENSORIZE.md
 * ("Padding"). */
#include <stdio.h>
#include <string.h>

#include "sch_int.h"

#define P "pad_einsum"
#define PAD_MAX 8

static int iter_of(const ir_block *b, const ir_expr *e) {
  if (e->kind != IR_VAR) return -1;
  for (int i = 0; i < b->niter; i++)
    if (b->iters[i].var == e->u.var) return i;
  return -1;
}

typedef struct pad_load {
  ir_buffer *buf;
  int nidx;
  int it[PAD_MAX]; /* the iter var of each index */
} pad_load;

typedef struct load_ctx {
  const ir_block *b;
  ir_analyzer *an; /* the iter vars over the padded domain */
  pad_load l[PAD_MAX];
  int n;
  const char *bad; /* a buffer whose loads are not plain iter vars / differ */
  bool oob;        /* ... read outside its shape over the padded domain */
  bool overflow;
} load_ctx;

static bool load_cb(void *ctx, const ir_expr *e) {
  load_ctx *c = ctx;
  if (e->kind != IR_LOAD || c->bad || c->overflow) return true;
  pad_load x = {e->u.load.buf, e->u.load.nidx, {0}};
  if (x.nidx > PAD_MAX) {
    c->bad = x.buf->name;
    return true;
  }
  for (int k = 0; k < x.nidx; k++) {
    if ((x.it[k] = iter_of(c->b, e->u.load.idx[k])) >= 0) continue;
    /* an index expression (a packed weight, a conv's window row p * st + r)
     * is read as it is: in bounds over the padded domain */
    ir_const_bound cb = ir_analyzer_const_bound(c->an, e->u.load.idx[k]);
    int64_t sd;
    if (!ir_as_int(x.buf->shape[k], &sd) || cb.lo < 0 || cb.hi >= sd) {
      c->bad = x.buf->name;
      c->oob = true;
    }
    x.it[k] = -2;
  }
  for (int i = 0; i < c->n; i++)
    if (c->l[i].buf == x.buf) {
      if (memcmp(c->l[i].it, x.it, sizeof x.it)) c->bad = x.buf->name;
      return true;
    }
  if (c->n == PAD_MAX) c->overflow = true;
  else c->l[c->n++] = x;
  return true;
}

/* Whether e (the update's added term) is zero when the loads of buffers
 * indexed by every padded reduction iter var read zero: such a load, or a
 * product (through casts) one factor of which is such a load. */
static bool zero_on_pad(const ir_expr *e, const load_ctx *lc, const bool *rpad) {
  while (e->kind == IR_CAST) e = e->u.cast.value;
  if (e->kind == IR_MUL) return zero_on_pad(e->u.bin.a, lc, rpad) || zero_on_pad(e->u.bin.b, lc, rpad);
  if (e->kind != IR_LOAD) return false;
  for (int i = 0; i < lc->n; i++)
    if (lc->l[i].buf == e->u.load.buf) {
      for (int r = 0; r < lc->b->niter; r++) {
        bool has = false;
        for (int k = 0; k < lc->l[i].nidx; k++) has = has || lc->l[i].it[k] == r;
        if (rpad[r] && !has) return false;
      }
      return true;
    }
  return false;
}

static ir_region full_region(ts_arena *a, ir_buffer *buf, int n, ir_expr **idx) {
  ir_range *r = TS_ANEWN(a, ir_range, n ? n : 1);
  for (int d = 0; r && d < n; d++) r[d] = (ir_range){idx[d], ir_int(a, idx[d]->dtype, 1)};
  return (ir_region){buf, n, r};
}

/* A copy stage over ext[0..n) (a nest of fresh loops around a block named
 * name): dst[v] = src[v] (pad: (v < src's shape) ? src[min(v, dim-1)] : 0). */
static ir_stmt *copy_stage(sch_state *s, const char *name, ir_buffer *dst, ir_buffer *src, int n, const int64_t *ext,
                           const int64_t *dim, bool pad, ir_dtype it, const char **bname) {
  ts_arena *a = &s->arena;
  ir_block *b = ir_block_new(a, sch_fresh_block_name(s, name));
  ir_var **l = TS_ANEWN(a, ir_var *, n), **v = TS_ANEWN(a, ir_var *, n);
  ir_expr **idx = TS_ANEWN(a, ir_expr *, n), **cl = TS_ANEWN(a, ir_expr *, n), **lv = TS_ANEWN(a, ir_expr *, n);
  if (!b || !l || !v || !idx || !cl || !lv || !(b->iters = TS_ANEWN(a, ir_iter_var, n))) return NULL;
  ir_expr *in = NULL;
  for (int k = 0; k < n; k++) {
    l[k] = ir_var_new(a, ts_arena_printf(a, "ax%d", k), it);
    v[k] = ir_var_new(a, ts_arena_printf(a, "v%d", k), it);
    if (!l[k] || !v[k]) return NULL;
    idx[k] = ir_var_ref(a, v[k]);
    lv[k] = ir_var_ref(a, l[k]);
    b->iters[k] = (ir_iter_var){v[k], {ir_int(a, it, 0), ir_int(a, it, ext[k])}, IR_ITER_S};
    cl[k] = idx[k];
    if (pad && ext[k] > dim[k]) {
      cl[k] = ir_binop(a, IR_MIN, idx[k], ir_int(a, it, dim[k] - 1));
      ir_expr *c = ir_binop(a, IR_LT, idx[k], ir_int(a, it, dim[k]));
      in = in ? ir_binop(a, IR_AND, in, c) : c;
    }
  }
  ir_expr *val = ir_load(a, src, n, cl);
  if (in) val = ir_select(a, in, val, ir_int(a, src->dtype, 0));
  b->niter = n;
  b->body = ir_store(a, dst, n, idx, val);
  b->nreads = b->nwrites = 1;
  b->reads = TS_ANEW(a, ir_region);
  b->writes = TS_ANEW(a, ir_region);
  if (!val || !b->body || !b->reads || !b->writes) return NULL;
  b->reads[0] = full_region(a, src, n, cl);
  if (in) { /* the clamped read covers the whole source */
    ir_range *r = TS_ANEWN(a, ir_range, n);
    if (!r) return NULL;
    for (int k = 0; k < n; k++) r[k] = (ir_range){ir_int(a, it, 0), ir_int(a, it, dim[k])};
    b->reads[0] = (ir_region){src, n, r};
  }
  b->writes[0] = full_region(a, dst, n, idx);
  ir_stmt *body = ir_realize(a, b, lv, ir_bool(a, true));
  for (int k = n - 1; k >= 0 && body; k--)
    body = ir_for(a, l[k], ir_int(a, it, 0), ir_int(a, it, ext[k]), IR_FOR_SERIAL, body);
  *bname = b->name;
  return body;
}

ts_status sch_pad_einsum(sch_state *s, sch_block b, int n, const int64_t *mult, sch_block *out, ts_diag *d) {
  ts_arena *a = &s->arena;
  sch_path p;
  ts_status st = sch_find_block(s, b.name, &p, P, d);
  if (st) return st;
  const ir_stmt *rz = p.node[p.n - 1];
  const ir_block *blk = rz->u.realize.block;
  if (sch_path_scope(&p, p.n - 1) != 0)
    return ts_diag_set(d, TS_ESCHEDULE, P ": block '%s' is not a child of the root block", blk->name);
  if (n != blk->niter || n > PAD_MAX)
    return ts_diag_set(d, TS_EINVAL, P ": %d multiples for block '%s' with %d iter vars", n, blk->name, blk->niter);
  const ir_stmt *body = blk->body, *init = blk->init;
  if (!init || !body || body->kind != IR_STORE || init->kind != IR_STORE || init->u.store.buf != body->u.store.buf ||
      body->u.store.value->kind != IR_ADD)
    return ts_diag_set(d, TS_ESCHEDULE, P ": block '%s' is not C = init; C = C + e (a reduction with its init)",
                       blk->name);
  ir_buffer *C = body->u.store.buf;
  for (int k = 0; k < s->func->nparams; k++)
    if (s->func->params[k] == C && k < s->func->ninputs)
      return ts_diag_set(d, TS_ESCHEDULE, P ": %s is an input", C->name);
  /* the nest: one loop per iter var, bound as it is (the untransformed block) */
  int top = p.node[1]->kind == IR_SEQ ? 2 : 1, nl = p.n - 1 - top;
  if (nl != n || false)
    return ts_diag_set(d, TS_ESCHEDULE, P ": block '%s' is not under one loop per iter var (already scheduled)",
                       blk->name);
  int64_t ext[PAD_MAX], pext[PAD_MAX];
  bool pad_any = false, rpad[PAD_MAX];
  ir_dtype it = blk->iters[0].var->dtype;
  for (int i = 0; i < n; i++) {
    const ir_stmt *f = p.node[top + i];
    int64_t mn;
    if (f->kind != IR_FOR || rz->u.realize.iter_values[i]->kind != IR_VAR || rz->u.realize.iter_values[i]->u.var != f->u.loop.var)
      return ts_diag_set(d, TS_ESCHEDULE, P ": iter var %d of '%s' is not bound to its own loop", i, blk->name);
    if (!ir_as_int(blk->iters[i].dom.min, &mn) || mn != 0 || !ir_as_int(blk->iters[i].dom.extent, &ext[i]))
      return ts_diag_set(d, TS_ESCHEDULE, P ": iter var %s of '%s' is not a constant range from 0",
                         blk->iters[i].var->name, blk->name);
    if (mult[i] < 1) return ts_diag_set(d, TS_EINVAL, P ": multiple %lld for iter var %d", (long long)mult[i], i);
    if (blk->iters[i].type != IR_ITER_S && blk->iters[i].type != IR_ITER_R)
      return ts_diag_set(d, TS_ESCHEDULE, P ": iter var %s of '%s' is opaque", blk->iters[i].var->name, blk->name);
    pext[i] = (ext[i] + mult[i] - 1) / mult[i] * mult[i];
    rpad[i] = pext[i] != ext[i] && blk->iters[i].type == IR_ITER_R;
    pad_any = pad_any || pext[i] != ext[i];
  }
  if (!pad_any)
    return ts_diag_set(d, TS_ESCHEDULE, P ": the multiples divide every extent of '%s' (nothing to pad)", blk->name);
  /* the loads: each buffer at one index tuple of plain iter vars */
  ir_analyzer an;
  ir_analyzer_init(&an, a);
  for (int i = 0; i < n; i++) ir_analyzer_bind_const(&an, blk->iters[i].var, 0, pext[i] - 1);
  load_ctx lc = {.b = blk, .an = &an};
  ir_visitor vis = {.expr = load_cb, .ctx = &lc};
  ir_visit_stmt(&vis, init);
  ir_visit_stmt(&vis, body);
  ir_analyzer_fini(&an);
  if (lc.overflow) return ts_diag_set(d, TS_ESCHEDULE, P ": block '%s' reads more than %d buffers", blk->name, PAD_MAX);
  if (lc.bad)
    return ts_diag_set(d, TS_ESCHEDULE,
                       lc.oob ? P ": %s would be read outside its shape over the padded domain of '%s'"
                              : P ": %s is not read at one tuple of index expressions in '%s'",
                       lc.bad, blk->name);
  const ir_expr *sum = body->u.store.value;
  const ir_expr *term = ir_expr_loads_buffer(sum->u.bin.a, C) ? sum->u.bin.b : sum->u.bin.a;
  bool any_r = false;
  for (int i = 0; i < n; i++) any_r = any_r || rpad[i];
  if (any_r && !zero_on_pad(term, &lc, rpad))
    return ts_diag_set(d, TS_ESCHEDULE,
                       P ": the update of '%s' is not a product with a factor read from a buffer indexed by every "
                       "padded reduction iter var (padding would not add zeros)",
                       blk->name);

  /* ---- stages: a padded copy of every buffer C reads (but C) ---- */
  ir_block *nc = ir_block_clone(a, blk);
  if (!nc || !(nc->iters = TS_ANEWN(a, ir_iter_var, n))) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  for (int i = 0; i < n; i++) {
    nc->iters[i] = blk->iters[i];
    nc->iters[i].dom.extent = ir_int(a, it, pext[i]);
  }
  ir_stmt *ninit = (ir_stmt *)init, *nbody = (ir_stmt *)body;
  ir_stmt *stages[PAD_MAX];
  ir_buffer *news[PAD_MAX + 1];
  int nst = 0;
  if (!(nc->reads = TS_ANEWN(a, ir_region, blk->nreads ? blk->nreads : 1)))
    return ts_diag_set(d, TS_ENOMEM, "out of memory");
  for (int r = 0; r < blk->nreads; r++) nc->reads[r] = blk->reads[r];
  for (int i = 0; i < lc.n; i++) {
    const pad_load *l = &lc.l[i];
    if (l->buf == C) continue;
    /* padded along the dims read at a padded iter var; a dim read at an
     * index expression keeps its size (a packed weight is read as it is) */
    int64_t bext[PAD_MAX], bdim[PAD_MAX];
    bool grows = false;
    ir_expr *shape[PAD_MAX];
    for (int k = 0; k < l->nidx; k++) {
      int64_t sd;
      bool known = ir_as_int(l->buf->shape[k], &sd);
      bdim[k] = l->it[k] >= 0 ? ext[l->it[k]] : sd;
      bext[k] = l->it[k] >= 0 ? pext[l->it[k]] : sd;
      if (!known || sd != bdim[k])
        return ts_diag_set(d, TS_ESCHEDULE, P ": dim %d of %s is not the extent of its iter var in '%s'", k,
                           l->buf->name, blk->name);
      shape[k] = ir_int(a, it, bext[k]);
      grows = grows || bext[k] != bdim[k];
    }
    if (!grows) continue;
    ir_buffer *np = ir_buffer_new(a, sch_fresh_buffer_name(s, ts_arena_printf(a, "%s_pad", l->buf->name)),
                                  l->buf->dtype, l->nidx, shape, NULL);
    const char *bn;
    ir_stmt *stg = np ? copy_stage(s, ts_arena_printf(a, "%s_pad", l->buf->name), np, l->buf, l->nidx, bext, bdim, true,
                                   it, &bn)
                      : NULL;
    ninit = ninit ? ir_subst_buffer(a, ninit, l->buf, np) : NULL;
    nbody = nbody ? ir_subst_buffer(a, nbody, l->buf, np) : NULL;
    if (!stg || !ninit || !nbody) return ts_diag_set(d, TS_ENOMEM, "out of memory");
    for (int r = 0; r < blk->nreads; r++)
      if (nc->reads[r].buf == l->buf) {
        nc->reads[r].buf = np;
      }
    stages[nst] = stg;
    news[nst++] = np;
  }
  /* ---- C_pad over the padded domain, then C = C_pad over C's ---- */
  int nci = body->u.store.nidx;
  int64_t cext[PAD_MAX], cdim[PAD_MAX];
  ir_expr *cshape[PAD_MAX];
  for (int k = 0; k < nci; k++) {
    int v = iter_of(blk, body->u.store.idx[k]);
    int64_t sd;
    if (v < 0 || !ir_as_int(C->shape[k], &sd) || sd != ext[v])
      return ts_diag_set(d, TS_ESCHEDULE, P ": %s is not written at a tuple of plain iter vars spanning it", C->name);
    cdim[k] = ext[v];
    cext[k] = pext[v];
    cshape[k] = ir_int(a, it, cext[k]);
  }
  ir_buffer *Cp = ir_buffer_new(a, sch_fresh_buffer_name(s, ts_arena_printf(a, "%s_pad", C->name)), C->dtype, nci,
                                cshape, NULL);
  const char *oname = NULL;
  ir_stmt *ostage = Cp ? copy_stage(s, ts_arena_printf(a, "%s_unpad", C->name), C, Cp, nci, cdim, cdim, false, it,
                                    &oname)
                       : NULL;
  ninit = ninit ? ir_subst_buffer(a, ninit, C, Cp) : NULL;
  nbody = nbody ? ir_subst_buffer(a, nbody, C, Cp) : NULL;
  nc->writes = TS_ANEWN(a, ir_region, blk->nwrites ? blk->nwrites : 1);
  if (!ostage || !ninit || !nbody || !nc->writes) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  for (int r = 0; r < blk->nreads; r++)
    if (nc->reads[r].buf == C) nc->reads[r].buf = Cp;
  for (int r = 0; r < blk->nwrites; r++) {
    nc->writes[r] = blk->writes[r];
    if (nc->writes[r].buf == C) nc->writes[r].buf = Cp;
  }
  nc->init = ninit;
  nc->body = nbody;
  news[nst] = Cp;
  ir_stmt *nrz = ir_stmt_clone(a, rz);
  if (!nrz) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  nrz->u.realize.block = nc;
  ir_stmt *cnest = nrz;
  for (int i = n - 1; i >= 0 && cnest; i--) {
    const ir_stmt *f = p.node[top + i];
    cnest = ir_for(a, f->u.loop.var, ir_int(a, it, 0), ir_int(a, it, pext[i]), f->u.loop.kind, cnest);
  }
  if (!cnest) return ts_diag_set(d, TS_ENOMEM, "out of memory");

  /* ---- install: C's nest replaced, the copy-out after it, the pads before,
   * the new buffers allocated by the root block ---- */
  ir_stmt *saved = s->func->body;
  const char *cname = blk->name;
  st = sch_insert_before(s, &p, top, cnest, ostage, d);
  for (int i = 0; i < nst && !st; i++) {
    st = sch_find_block(s, cname, &p, P, d);
    if (!st) st = sch_insert_before(s, &p, top, stages[i], p.node[top], d);
  }
  if (!st) st = sch_find_block(s, cname, &p, P, d);
  if (!st) {
    const ir_stmt *root = p.node[0];
    ir_block *rb = root->u.realize.block;
    for (int i = 0; i <= nst && rb; i++) rb = ir_block_with_alloc(a, rb, news[i]);
    ir_stmt *nroot = ir_stmt_clone(a, root);
    if (!rb || !nroot) {
      st = ts_diag_set(d, TS_ENOMEM, "out of memory");
    } else {
      nroot->u.realize.block = rb;
      st = sch_replace(s, &p, 0, nroot, d);
    }
  }
  if (st) {
    s->func->body = saved; /* nodes are immutable: the old tree is intact */
    return st;
  }
  if (out) out->name = oname;
  return sch_finish(s, TS_OK, d);
}
