/* tensorize.c — the tensorize primitive (TVM's Tensorize; see tensorize.h).
 *
 * The matcher walks the schedule's block body and the description's block
 * body together. The description's iter vars are paired, in order, with a
 * subsequence of the real ones (chosen from the last: the same S/R type
 * and, on a tile, the same inner binding); the real iter vars left over
 * (a batch, a convolution's window taps and output row) stay outside the
 * intrinsic and must be constant over the tile. Every paired real iter var
 * v_i is replaced by outer_i + w_i, where w_i is the description's iter var
 * and outer_i the tile's position (vo_i * E_i after blockize; 0 when only
 * the form is asked). An index f of a real access then splits into
 * base = f(w = 0) and f - base, which must equal the description's index;
 * base is the offset at which the implementation's parameter is bound.
 * Commutative operands are tried in both orders, backtracking the buffer
 * pairing made by the failed order. */
#include "tensorize.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "../print.h"
#include "blockize.h"
#include "sch_int.h"

#define P "tensorize"
#define MAXB 8

typedef struct mctx {
  ts_arena *a;
  ir_analyzer an;
  ir_var_map sub;   /* real iter var -> outer + desc iter var */
  ir_var_map zero;  /* desc iter var -> 0 */
  int nb;
  int extra; /* real iter vars outside the intrinsic (a batch, window taps): tile-invariant */
  int map[16]; /* description iter var -> the real iter var it stands for */
  const ir_buffer *real[MAXB], *desc[MAXB];
  ir_expr **base[MAXB];
  char why[600];
  bool have_why;
} mctx;

static void why(mctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void why(mctx *c, const char *fmt, ...) {
  if (c->have_why) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->why, sizeof c->why, fmt, ap);
  va_end(ap);
  c->have_why = true;
}

static void why_expr(mctx *c, const char *what, const ir_expr *r, const ir_expr *x) {
  if (c->have_why) return;
  char *rs = ir_expr_to_string(r), *xs = ir_expr_to_string(x);
  why(c, "%s: %s vs the intrinsic's %s", what, rs ? rs : "?", xs ? xs : "?");
  ts_free(rs);
  ts_free(xs);
}

static ir_expr *as_i64(ts_arena *a, ir_expr *e) {
  if (!e || e->dtype.code == IR_I64) return e;
  if (e->kind == IR_INT_IMM) return ir_i64(a, e->u.ival);
  return ir_cast(a, ir_dt_vec(IR_I64, e->dtype.lanes), e);
}

static bool scope_is_global(const char *s) { return !s || !*s || !strcmp(s, "global"); }

/* Pairs real buffer r with description buffer x; -1 on a conflict. */
static int pair_buffer(mctx *c, const ir_buffer *r, const ir_buffer *x) {
  for (int i = 0; i < c->nb; i++) {
    if (c->real[i] == r && c->desc[i] == x) return i;
    if (c->real[i] == r || c->desc[i] == x) {
      why(c, "buffer %s is used where the intrinsic uses %s, but %s already stands for %s", r->name, x->name,
          c->real[i] == r ? r->name : c->real[i]->name, c->desc[i]->name);
      return -1;
    }
  }
  char b1[24], b2[24];
  if (!ir_dtype_eq(r->dtype, x->dtype)) {
    why(c, "buffer %s is %s, the intrinsic's %s is %s", r->name, ir_dtype_str(r->dtype, b1, sizeof b1), x->name,
        ir_dtype_str(x->dtype, b2, sizeof b2));
    return -1;
  }
  if (r->ndim != x->ndim && !(c->extra > 0 && r->ndim > x->ndim)) {
    why(c, "buffer %s has %d dimensions, the intrinsic's %s has %d", r->name, r->ndim, x->name, x->ndim);
    return -1;
  }
  if (!scope_is_global(x->scope) && (!r->scope || strcmp(r->scope, x->scope))) {
    why(c, "buffer %s is in scope \"%s\", the intrinsic's %s needs \"%s\"", r->name, r->scope ? r->scope : "global",
        x->name, x->scope);
    return -1;
  }
  if (c->nb == MAXB) {
    why(c, "more than %d buffers", MAXB);
    return -1;
  }
  c->real[c->nb] = r;
  c->desc[c->nb] = x;
  c->base[c->nb] = NULL;
  return c->nb++;
}

static bool match_access(mctx *c, const ir_buffer *rb, int rn, ir_expr *const *ridx, const ir_buffer *xb, int xn,
                         ir_expr *const *xidx) {
  int k = pair_buffer(c, rb, xb);
  if (k < 0) return false;
  /* with leading batch iter vars, leading extra indices must not move in the tile */
  int lead = rn - xn;
  if (lead < 0 || (lead > 0 && c->extra == 0)) {
    why(c, "access to %s with %d indices vs %d", rb->name, rn, xn);
    return false;
  }
  ir_expr **base = TS_ANEWN(c->a, ir_expr *, rn ? rn : 1);
  if (!base) return false;
  for (int i = 0; i < rn; i++) {
    ir_expr *f = as_i64(c->a, ir_subst_expr(c->a, ridx[i], &c->sub));
    ir_expr *b0 = ir_simplify(&c->an, ir_subst_expr(c->a, f, &c->zero));
    ir_expr *diff = ir_simplify(&c->an, ir_sub(c->a, f, b0));
    ir_expr *g = i < lead ? ir_i64(c->a, 0) : ir_simplify(&c->an, as_i64(c->a, xidx[i - lead]));
    if (!diff || !g || !ir_can_prove_equal(&c->an, diff, g)) {
      char what[96];
      snprintf(what, sizeof what, "index %d of %s (relative to the tile)", i, rb->name);
      why_expr(c, what, diff ? diff : ridx[i], i < lead ? g : xidx[i - lead]);
      return false;
    }
    base[i] = b0;
    if (c->base[k] && !ir_can_prove_equal(&c->an, c->base[k][i], b0)) {
      char what[96];
      snprintf(what, sizeof what, "two accesses to %s at different offsets in dimension %d", rb->name, i);
      why_expr(c, what, c->base[k][i], b0);
      return false;
    }
  }
  if (!c->base[k]) c->base[k] = base;
  return true;
}

static bool match_expr(mctx *c, const ir_expr *r, const ir_expr *x) {
  char b1[24], b2[24];
  if (!r || !x) {
    why(c, "missing expression");
    return false;
  }
  if (r->kind != x->kind) {
    why_expr(c, "the operation differs", r, x);
    return false;
  }
  if (!ir_dtype_eq(r->dtype, x->dtype)) {
    why(c, "dtype %s vs the intrinsic's %s", ir_dtype_str(r->dtype, b1, sizeof b1),
        ir_dtype_str(x->dtype, b2, sizeof b2));
    return false;
  }
  switch (r->kind) {
  case IR_INT_IMM:
    if (r->u.ival != x->u.ival) why_expr(c, "constant", r, x);
    return r->u.ival == x->u.ival;
  case IR_FLOAT_IMM:
    if (r->u.fval != x->u.fval) why_expr(c, "constant", r, x);
    return r->u.fval == x->u.fval;
  case IR_LOAD:
    return match_access(c, r->u.load.buf, r->u.load.nidx, r->u.load.idx, x->u.load.buf, x->u.load.nidx,
                        x->u.load.idx);
  case IR_CAST:
  case IR_REINTERPRET:
    return match_expr(c, r->u.cast.value, x->u.cast.value);
  case IR_NOT:
    return match_expr(c, r->u.un.a, x->u.un.a);
  case IR_SELECT:
    return match_expr(c, r->u.sel.cond, x->u.sel.cond) && match_expr(c, r->u.sel.t, x->u.sel.t) &&
           match_expr(c, r->u.sel.f, x->u.sel.f);
  case IR_CALL:
    if (r->u.call.op != x->u.call.op || r->u.call.nargs != x->u.call.nargs) {
      why_expr(c, "the operation differs", r, x);
      return false;
    }
    for (int i = 0; i < r->u.call.nargs; i++)
      if (!match_expr(c, r->u.call.args[i], x->u.call.args[i])) return false;
    return true;
  default:
    if (ir_is_binop(r->kind)) {
      int nb = c->nb;
      if (match_expr(c, r->u.bin.a, x->u.bin.a) && match_expr(c, r->u.bin.b, x->u.bin.b)) return true;
      if (r->kind != IR_ADD && r->kind != IR_MUL && r->kind != IR_MIN && r->kind != IR_MAX) return false;
      /* commutative: the other order, forgetting the pairings of the first try */
      c->nb = nb;
      bool had = c->have_why;
      char saved[sizeof c->why];
      memcpy(saved, c->why, sizeof saved);
      c->have_why = false;
      if (match_expr(c, r->u.bin.a, x->u.bin.b) && match_expr(c, r->u.bin.b, x->u.bin.a)) {
        c->have_why = false;
        return true;
      }
      c->nb = nb;
      memcpy(c->why, saved, sizeof saved);
      c->have_why = had;
      return false;
    }
    why_expr(c, "unsupported expression", r, x);
    return false;
  }
}

static const ir_stmt *single(const ir_stmt *s) {
  while (s && s->kind == IR_SEQ && s->u.seq.n == 1) s = s->u.seq.stmts[0];
  return s;
}

/* The loops from s down to the first realize (a perfect nest). */
static int nest(const ir_stmt *s, const ir_stmt **loops, int max, const ir_stmt **rz) {
  int n = 0;
  s = single(s);
  while (s && s->kind == IR_FOR && n < max) {
    loops[n++] = s;
    s = single(s->u.loop.body);
  }
  *rz = s && s->kind == IR_BLOCK_REALIZE ? s : NULL;
  return n;
}

/* The description's single block and its loops. */
static bool desc_nest(mctx *c, const ir_func *df, const ir_stmt **dl, int *nd, const ir_stmt **drz) {
  const ir_stmt *root = df->body;
  if (!root || root->kind != IR_BLOCK_REALIZE) {
    why(c, "the intrinsic's description has no root block");
    return false;
  }
  *nd = nest(root->u.realize.block->body, dl, 16, drz);
  if (!*drz) {
    why(c, "the intrinsic's description is not one loop nest over one block");
    return false;
  }
  return true;
}

/* Iter var structure and the body; sub must map the real iter vars. */
static bool match_block(mctx *c, const ir_block *rb, const ir_block *xb) {
  if (rb->niter != xb->niter + c->extra) {
    why(c, "block %s has %d iter vars, the intrinsic's %d", rb->name, rb->niter, xb->niter);
    return false;
  }
  for (int i = 0; i < xb->niter; i++)
    if (rb->iters[c->map[i]].type != xb->iters[i].type) {
      why(c, "iter var %d (%s) of block %s is %s, the intrinsic's is %s", c->map[i], rb->iters[c->map[i]].var->name,
          rb->name, rb->iters[c->map[i]].type == IR_ITER_R ? "a reduction" : "spatial",
          xb->iters[i].type == IR_ITER_R ? "a reduction" : "spatial");
      return false;
    }
  const ir_stmt *rs = single(rb->body), *xs = single(xb->body);
  if (!rs || !xs || rs->kind != IR_STORE || xs->kind != IR_STORE) {
    why(c, "block %s's body is not a single store like the intrinsic's", rb->name);
    return false;
  }
  if (rs->u.store.predicate || xs->u.store.predicate) {
    why(c, "block %s's store is predicated", rb->name);
    return false;
  }
  if (!match_access(c, rs->u.store.buf, rs->u.store.nidx, rs->u.store.idx, xs->u.store.buf, xs->u.store.nidx,
                    xs->u.store.idx))
    return false;
  return match_expr(c, rs->u.store.value, xs->u.store.value);
}

/* Pairs the description's iter vars with real ones, from the last: each
 * with the latest real iter var before the previous pick that has its S/R
 * type and, when ok is given, for which ok(ctx, real, desc) holds. Sets
 * c->map and c->extra; false when some description iter var finds none. */
static bool map_iters(mctx *c, const ir_block *rb, const ir_block *xb, bool (*ok)(void *, int, int), void *ctx) {
  if (xb->niter > 16 || rb->niter < xb->niter) {
    why(c, "block %s has %d iter vars, the intrinsic's %d", rb->name, rb->niter, xb->niter);
    return false;
  }
  int j = rb->niter;
  for (int i = xb->niter - 1; i >= 0; i--) {
    do j--;
    while (j >= 0 && (rb->iters[j].type != xb->iters[i].type || (ok && !ok(ctx, j, i))));
    if (j < 0) {
      why(c, "no iter var of block %s stands for the intrinsic's %s %s (in order, from the last)", rb->name,
          xb->iters[i].type == IR_ITER_R ? "reduction" : "spatial", xb->iters[i].var->name);
      return false;
    }
    c->map[i] = j;
  }
  c->extra = rb->niter - xb->niter;
  return true;
}

static bool is_mapped(const mctx *c, int nx, int j) {
  for (int i = 0; i < nx; i++)
    if (c->map[i] == j) return true;
  return false;
}

static void mctx_init(mctx *c, ts_arena *a) {
  memset(c, 0, sizeof *c);
  c->a = a;
  ir_analyzer_init(&c->an, a);
  ir_var_map_init(&c->sub);
  ir_var_map_init(&c->zero);
}

static void mctx_fini(mctx *c) {
  ir_analyzer_fini(&c->an);
  ir_var_map_fini(&c->sub);
  ir_var_map_fini(&c->zero);
}

/* Binds the description's iter vars (over their domains) for proofs. */
static ts_status bind_desc_iters(mctx *c, const ir_block *xb) {
  for (int i = 0; i < xb->niter; i++) {
    ir_var *w = xb->iters[i].var;
    if (ir_analyzer_bind(&c->an, w, xb->iters[i].dom.min, xb->iters[i].dom.extent) ||
        ir_var_map_put(&c->zero, w, ir_int(c->a, w->dtype, 0)))
      return TS_ENOMEM;
  }
  return TS_OK;
}

static const sch_intrin *lookup_intrin(const char *name, ts_diag *d) {
  const sch_intrin *in = sch_intrin_get(name);
  if (in) return in;
  ts_strbuf sb;
  ts_strbuf_init(&sb);
  for (int i = 0; i < sch_intrin_count(); i++) ts_strbuf_printf(&sb, "%s%s", i ? ", " : "", sch_intrin_at(i)->name);
  ts_diag_set(d, TS_ENOTFOUND, P ": no intrinsic named '%s' (registered: %s)", name ? name : "(null)",
              sb.data ? sb.data : "none");
  ts_strbuf_fini(&sb);
  return NULL;
}

ts_status sch_tensorize_match_block(sch_state *s, sch_block b, const sch_intrin *in, int64_t *desc_ext,
                                    ts_diag *d) {
  sch_path p;
  ts_status st = sch_find_block(s, b.name, &p, P, d);
  if (st) return st;
  const ir_block *rb = p.node[p.n - 1]->u.realize.block;
  ts_arena tmp;
  ts_arena_init(&tmp);
  ir_func *df, *impl;
  st = sch_intrin_funcs(in, &tmp, &df, &impl, d);
  mctx c;
  mctx_init(&c, &tmp);
  const ir_stmt *dl[16], *drz = NULL;
  int nd = 0;
  if (!st && !desc_nest(&c, df, dl, &nd, &drz)) st = ts_diag_set(d, TS_EINTERNAL, P ": %s: %s", in->name, c.why);
  if (!st) {
    const ir_block *xb = drz->u.realize.block;
    /* real iter vars beyond the description's (a batch, a convolution's
     * window taps and output row) stay outside the intrinsic: paired by
     * type from the last (map_iters); they index only the buffers' leading
     * dims or the tile's base */
    if (!map_iters(&c, rb, xb, NULL, NULL))
      st = ts_diag_set(d, TS_ESCHEDULE, P ": block '%s' does not match %s: %s", rb->name, in->name, c.why);
    if (!st && bind_desc_iters(&c, xb)) st = ts_diag_set(d, TS_ENOMEM, "out of memory");
    for (int i = 0; !st && i < xb->niter; i++)
      if (ir_var_map_put(&c.sub, rb->iters[c.map[i]].var, ir_var_ref(&tmp, xb->iters[i].var)))
        st = ts_diag_set(d, TS_ENOMEM, "out of memory");
    if (!st && !match_block(&c, rb, xb))
      st = ts_diag_set(d, TS_ESCHEDULE, P ": block '%s' does not match %s: %s", rb->name, in->name, c.why);
    for (int i = 0; !st && desc_ext && i < rb->niter; i++) desc_ext[i] = 0;
    for (int i = 0; !st && desc_ext && i < xb->niter; i++)
      if (!ir_as_int(xb->iters[i].dom.extent, &desc_ext[c.map[i]])) desc_ext[c.map[i]] = 1;
  }
  mctx_fini(&c);
  ts_arena_fini(&tmp);
  return st;
}

/* ---- binding the implementation -------------------------------------------------- */

typedef struct bctx {
  ts_arena *a;
  int n;
  const ir_buffer *from[MAXB];
  ir_buffer *to[MAXB];
  ir_expr **base[MAXB];
  ir_mutator *m; /* the walk (bexpr rewrites a subexpression through it) */
} bctx;

static int bfind(bctx *c, const ir_buffer *b) {
  for (int i = 0; i < c->n; i++)
    if (c->from[i] == b) return i;
  return -1;
}

static ir_expr *bexpr(bctx *c, ir_expr *e);

static ir_expr *offset_index(bctx *c, ir_expr *base, ir_expr *idx) {
  if (idx->kind == IR_RAMP) {
    ir_expr *b = as_i64(c->a, idx->u.ramp.base);
    return ir_ramp(c->a, ir_add(c->a, base, b), as_i64(c->a, idx->u.ramp.stride), idx->u.ramp.lanes);
  }
  if (idx->kind == IR_BROADCAST)
    return ir_broadcast(c->a, ir_add(c->a, base, as_i64(c->a, bexpr(c, idx->u.bcast.value))), idx->u.bcast.lanes);
  return ir_add(c->a, base, as_i64(c->a, bexpr(c, idx)));
}

/* The real buffer's indices of an implementation access with n indices: its
 * leading dimensions beyond the intrinsic's (a batch) at the tile's base. */
static ir_expr **bindex(bctx *c, int k, int n, ir_expr *const *idx) {
  int rn = c->to[k]->ndim, lead = rn > n ? rn - n : 0;
  ir_expr **o = TS_ANEWN(c->a, ir_expr *, rn > n ? rn : n ? n : 1);
  if (!o) return NULL;
  for (int i = 0; i < lead; i++) o[i] = c->base[k][i];
  for (int i = 0; i < n; i++)
    if (!(o[lead + i] = offset_index(c, c->base[k][lead + i], idx[i]))) return NULL;
  return o;
}

/* Flat element offset of base in buffer b's own layout. */
static ir_expr *flat_offset(bctx *c, const ir_buffer *b, ir_expr **base) {
  ir_expr *sum = ir_i64(c->a, 0), *stride = ir_i64(c->a, 1);
  for (int i = b->ndim - 1; i >= 0 && sum; i--) {
    ir_expr *st = b->strides ? as_i64(c->a, b->strides[i]) : stride;
    sum = ir_add(c->a, sum, ir_mul(c->a, base[i], st));
    stride = ir_mul(c->a, stride, as_i64(c->a, b->shape[i]));
  }
  return sum;
}

static ir_expr *bexpr(bctx *c, ir_expr *e) { return ir_mutate_expr(c->m, e); }

/* n, or e after marking the walk failed (OOM) when n is NULL. */
static ir_expr *bdone(bctx *c, ir_expr *e, ir_expr *n) {
  if (!n) ir_mutator_fail(c->m);
  return n ? n : e;
}

/* Loads and access_ptrs of a bound parameter read the real buffer at the
 * tile's base; the rest is the default walk. */
static ir_expr *bpre_expr(ir_mutator *m, ir_expr *e) {
  bctx *c = m->ctx;
  int k;
  if (e->kind == IR_LOAD && (k = bfind(c, e->u.load.buf)) >= 0) {
    ir_expr **idx = bindex(c, k, e->u.load.nidx, e->u.load.idx);
    int nd = c->to[k]->ndim > e->u.load.nidx ? c->to[k]->ndim : e->u.load.nidx;
    return bdone(c, e, idx ? ir_load(c->a, c->to[k], nd, idx) : NULL);
  }
  if (e->kind == IR_ACCESS_PTR && (k = bfind(c, e->u.ptr.buf)) >= 0)
    return bdone(c, e,
                 ir_access_ptr(c->a, c->to[k],
                               ir_add(c->a, flat_offset(c, c->to[k], c->base[k]), as_i64(c->a, bexpr(c, e->u.ptr.offset))),
                               e->u.ptr.rw));
  return NULL;
}

/* Stores to a bound parameter write the real buffer; blocks or allocations
 * in an implementation are not supported (the walk fails). */
static ir_stmt *bpre_stmt(ir_mutator *m, ir_stmt *s) {
  bctx *c = m->ctx;
  int k;
  switch (s->kind) {
  case IR_FOR: case IR_SEQ: case IR_IF: case IR_LET: case IR_EVALUATE:
    return NULL;
  case IR_STORE:
    if ((k = bfind(c, s->u.store.buf)) < 0) return NULL;
    ir_stmt *n = ir_stmt_clone(c->a, s);
    if (n) {
      n->u.store.value = bexpr(c, s->u.store.value);
      n->u.store.buf = c->to[k];
      n->u.store.idx = bindex(c, k, s->u.store.nidx, s->u.store.idx);
      if (c->to[k]->ndim > s->u.store.nidx) n->u.store.nidx = c->to[k]->ndim;
    }
    if (!n || !n->u.store.idx) ir_mutator_fail(m);
    return n ? n : s;
  default:
    ir_mutator_fail(m);
    return s;
  }
}

/* The implementation's body over the real buffers, in *out; false when it
 * holds a statement that cannot be bound, or on OOM. */
static bool bind_body(bctx *c, ir_stmt *body, ir_stmt **out) {
  ir_mutator m;
  ir_mutator_init(&m, c->a);
  m.ctx = c;
  m.pre_expr = bpre_expr;
  m.pre_stmt = bpre_stmt;
  c->m = &m;
  *out = ir_mutate_stmt(&m, body);
  bool failed = m.failed;
  ir_mutator_fini(&m);
  c->m = NULL;
  return !failed;
}

/* ---- the primitive ---------------------------------------------------------------- */

/* The tile's bindings for map_iters: real iter var j may stand for
 * description iter var i when its inner part equals i's binding. */
typedef struct bmap {
  mctx *c;
  ir_expr *outer[16], *inner[16], *xv[16];
} bmap;

static bool bmap_ok(void *ctx, int j, int i) {
  bmap *m = ctx;
  return ir_can_prove_equal(&m->c->an, m->inner[j], m->xv[i]);
}

ts_status sch_tensorize_block(sch_state *s, sch_block b, const char *name, ts_diag *d) {
  const sch_intrin *in = lookup_intrin(name, d);
  if (!in) return TS_ENOTFOUND;
  ts_arena *a = &s->arena;
  sch_path p;
  ts_status st = sch_find_block(s, b.name, &p, P, d);
  if (st) return st;
  ir_stmt *orz = p.node[p.n - 1];
  const ir_block *ob = orz->u.realize.block;
  const ir_stmt *rl[16], *rrz = NULL;
  int nr = nest(ob->body, rl, 16, &rrz);
  if (!rrz)
    return ts_diag_set(d, TS_ESCHEDULE,
                       P ": block '%s' is not a loop nest over one block (blockize the loop to tensorize first)",
                       ob->name);
  const ir_block *rb = rrz->u.realize.block;
  ir_func *df, *impl;
  st = sch_intrin_funcs(in, a, &df, &impl, d);
  if (st) return st;
  mctx c;
  mctx_init(&c, a);
  const ir_stmt *dl[16], *drz = NULL;
  int nd = 0;
  if (!desc_nest(&c, df, dl, &nd, &drz)) {
    st = ts_diag_set(d, TS_EINTERNAL, P ": %s: %s", in->name, c.why);
    goto done;
  }
  const ir_block *xb = drz->u.realize.block;
  if (nr != nd) {
    st = ts_diag_set(d, TS_ESCHEDULE, P ": block '%s' has %d loops around '%s', intrinsic %s has %d", ob->name, nr,
                     rb->name, in->name, nd);
    goto done;
  }
  ir_var_map l2d;
  ir_var_map_init(&l2d);
  for (int j = 0; j < nr && !st; j++) {
    int64_t re, xe, rm, xm;
    if (!ir_as_int(rl[j]->u.loop.extent, &re) || !ir_as_int(dl[j]->u.loop.extent, &xe) ||
        !ir_as_int(rl[j]->u.loop.min, &rm) || !ir_as_int(dl[j]->u.loop.min, &xm) || re != xe || rm != xm) {
      char *rs = ir_expr_to_string(rl[j]->u.loop.extent);
      st = ts_diag_set(d, TS_ESCHEDULE, P ": loop %d ('%s') of block '%s' has extent %s, intrinsic %s needs %s", j,
                       rl[j]->u.loop.var->name, ob->name, rs ? rs : "?", in->name,
                       ir_as_int(dl[j]->u.loop.extent, &xe) ? ts_arena_printf(a, "%lld", (long long)xe) : "?");
      ts_free(rs);
    } else if (ir_var_map_put(&l2d, rl[j]->u.loop.var, ir_var_ref(a, dl[j]->u.loop.var)) ||
               ir_analyzer_bind(&c.an, dl[j]->u.loop.var, dl[j]->u.loop.min, dl[j]->u.loop.extent)) {
      st = ts_diag_set(d, TS_ENOMEM, "out of memory");
    }
  }
  if (!st && bind_desc_iters(&c, xb)) st = ts_diag_set(d, TS_ENOMEM, "out of memory");
  if (!st && rb->init)
    st = ts_diag_set(d, TS_ESCHEDULE,
                     P ": block '%s' still has its init inside (the whole reduction would be one call of %s)",
                     rb->name, in->name);
  /* bindings: each real iter var's tile position (outer) and its part in
   * the tile's loops (inner) */
  ir_var_map lzero;
  ir_var_map_init(&lzero);
  for (int j = 0; j < nr && !st; j++)
    if (ir_var_map_put(&lzero, rl[j]->u.loop.var, ir_int(a, rl[j]->u.loop.var->dtype, 0)))
      st = ts_diag_set(d, TS_ENOMEM, "out of memory");
  if (!st && (rb->niter > 16 || xb->niter > 16))
    st = ts_diag_set(d, TS_ESCHEDULE, P ": block '%s' has %d iter vars (at most 16)", rb->name, rb->niter);
  bmap bm = {.c = &c};
  for (int i = 0; i < rb->niter && !st; i++) {
    ir_expr *rv = as_i64(a, rrz->u.realize.iter_values[i]);
    bm.outer[i] = ir_simplify(&c.an, ir_subst_expr(a, rv, &lzero));
    bm.inner[i] = bm.outer[i] ? ir_simplify(&c.an, ir_sub(a, ir_subst_expr(a, rv, &l2d), bm.outer[i])) : NULL;
    if (!bm.inner[i]) st = ts_diag_set(d, TS_ENOMEM, "out of memory");
  }
  for (int i = 0; i < xb->niter && !st; i++)
    if (!(bm.xv[i] = ir_simplify(&c.an, as_i64(a, drz->u.realize.iter_values[i]))))
      st = ts_diag_set(d, TS_ENOMEM, "out of memory");
  /* the description's iter vars paired with real ones whose inner part is
   * theirs; every other real iter var (a batch, window taps) must be
   * constant over the tile */
  if (!st && !map_iters(&c, rb, xb, bmap_ok, &bm))
    st = ts_diag_set(d, TS_ESCHEDULE, P ": block '%s' does not match %s: %s", rb->name, in->name, c.why);
  for (int i = 0; i < rb->niter && !st; i++) {
    if (is_mapped(&c, xb->niter, i)) continue;
    if (!ir_can_prove_equal(&c.an, bm.inner[i], ir_i64(a, 0))) {
      char *rs = ir_expr_to_string(rrz->u.realize.iter_values[i]);
      st = ts_diag_set(d, TS_ESCHEDULE,
                       P ": binding of iter var %s of block '%s' is %s, intrinsic %s binds nothing there (an iter var "
                         "outside the intrinsic must be constant over the tile)",
                       rb->iters[i].var->name, rb->name, rs ? rs : "?", in->name);
      ts_free(rs);
      break;
    }
    /* outside the intrinsic: the tile's position only */
    if (ir_var_map_put(&c.sub, rb->iters[i].var, bm.outer[i])) st = ts_diag_set(d, TS_ENOMEM, "out of memory");
  }
  /* sub: v_i -> outer_i + w_i */
  for (int xi = 0; xi < xb->niter && !st; xi++) {
    int i = c.map[xi];
    ir_expr *wref = as_i64(a, ir_var_ref(a, xb->iters[xi].var));
    if (ir_var_map_put(&c.sub, rb->iters[i].var, ir_add(a, bm.outer[i], wref)))
      st = ts_diag_set(d, TS_ENOMEM, "out of memory");
  }
  ir_var_map_fini(&lzero);
  ir_var_map_fini(&l2d);
  if (!st && !match_block(&c, rb, xb))
    st = ts_diag_set(d, TS_ESCHEDULE, P ": block '%s' does not match %s: %s", rb->name, in->name, c.why);
  if (st) goto done;
  /* bind the implementation's params to the matched buffers */
  bctx bc = {.a = a};
  for (int k = 0; k < df->nparams; k++) {
    int m = -1;
    for (int i = 0; i < c.nb; i++)
      if (c.desc[i] == df->params[k]) m = i;
    if (m < 0) {
      st = ts_diag_set(d, TS_EINTERNAL, P ": %s's parameter %s is not accessed by its description", in->name,
                       df->params[k]->name);
      goto done;
    }
    bc.from[bc.n] = impl->params[k];
    bc.to[bc.n] = (ir_buffer *)c.real[m];
    bc.base[bc.n++] = c.base[m];
  }
  const ir_stmt *iroot = impl->body;
  if (!iroot || iroot->kind != IR_BLOCK_REALIZE) {
    st = ts_diag_set(d, TS_EINTERNAL, P ": %s's implementation has no root block", in->name);
    goto done;
  }
  ir_stmt *body = NULL;
  if (!bind_body(&bc, iroot->u.realize.block->body, &body)) {
    st = ts_diag_set(d, TS_EINTERNAL, P ": %s's implementation holds a statement that cannot be bound (or out of memory)",
                     in->name);
    goto done;
  }
  ir_block *nb = ir_block_clone(a, ob);
  ir_stmt *nrz = nb ? ir_stmt_clone(a, orz) : NULL;
  ir_annot ann = {.key = "tessel.tensorized", .kind = IR_ANN_STR, .v.s = in->name};
  if (!nrz || ir_annot_set(a, &nb->nannot, &nb->annots, ann)) {
    st = ts_diag_set(d, TS_ENOMEM, "out of memory");
    goto done;
  }
  nb->body = body;
  nrz->u.realize.block = nb;
  st = sch_replace(s, &p, p.n - 1, nrz, d);
done:
  mctx_fini(&c);
  return st ? st : sch_finish(s, TS_OK, d);
}

ts_status sch_tensorize_loop(sch_state *s, sch_loop l, const char *name, sch_block *out, ts_diag *d) {
  if (!lookup_intrin(name, d)) return TS_ENOTFOUND;
  ir_stmt *saved = s->func->body;
  sch_block ob;
  ts_status st = sch_blockize(s, l, &ob, d);
  if (!st) st = sch_tensorize_block(s, ob, name, d);
  if (st) {
    s->func->body = saved; /* all or nothing */
    return st;
  }
  if (out) *out = ob;
  return TS_OK;
}
