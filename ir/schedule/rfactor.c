/* rfactor.c — the rfactor primitive (TVM's RFactor in reduction.cc): one
 * reduction block becomes an rf block writing partial results along a new
 * spatial axis and a write-back block that keeps the name and reduces them,
 * so the partials can run in parallel or in vector lanes. Refusals, trace
 * and code generation: docs/RFACTOR.md; details: docs/IR.md ("Notes by file"). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../struct.h"
#include "sch_int.h"

#define P "rfactor"
#define MAXL 128

/* Is e a load of buf at exactly the indices idx? */
static bool is_self_load(const ir_expr *e, const ir_buffer *buf, int n, ir_expr *const *idx) {
  if (e->kind != IR_LOAD || e->u.load.buf != buf || e->u.load.nidx != n) return false;
  for (int i = 0; i < n; i++)
    if (!ir_expr_equal(e->u.load.idx[i], idx[i])) return false;
  return true;
}

/* The identity of comb for dtype t; NULL (with *why) if there is none we
 * can write. */
static ir_expr *identity(ts_arena *a, ir_expr_kind comb, ir_dtype t, const char **why) {
  bool fl = ir_dtype_is_float(t), in = ir_dtype_is_int(t);
  if (!fl && !in) {
    *why = "its output is neither a float nor an integer type";
    return NULL;
  }
  if (comb == IR_ADD) return fl ? ir_float(a, t, 0.0) : ir_int(a, t, 0);
  if (comb == IR_MUL) return fl ? ir_float(a, t, 1.0) : ir_int(a, t, 1);
  if (fl) return ir_float(a, t, comb == IR_MIN ? INFINITY : -INFINITY);
  int bits = ir_dtype_bits(t);
  bool sg = ir_dtype_is_signed(t);
  int64_t lo, hi;
  if (sg) {
    hi = bits >= 64 ? INT64_MAX : (int64_t)((1ull << (bits - 1)) - 1);
    lo = -hi - 1;
  } else {
    lo = 0;
    if (bits >= 64) {
      *why = "64-bit unsigned min/max identities are not representable";
      return NULL;
    }
    hi = (int64_t)((1ull << bits) - 1);
  }
  return ir_int(a, t, comb == IR_MIN ? hi : lo);
}

static const char *comb_name(ir_expr_kind k) {
  return k == IR_ADD ? "+" : k == IR_MUL ? "*" : k == IR_MIN ? "min" : "max";
}

/* comb(x, y) */
static ir_expr *combine(ts_arena *a, ir_expr_kind k, ir_expr *x, ir_expr *y) { return ir_binop(a, k, x, y); }

/* Splits a predicate into its && clauses (appended to out). */
static ts_status conjuncts(ir_expr *e, ts_vec *out) {
  if (e->kind == IR_AND) {
    ts_status st = conjuncts(e->u.bin.a, out);
    return st ? st : conjuncts(e->u.bin.b, out);
  }
  int64_t v;
  if (ir_as_int(e, &v) && v) return TS_OK;
  return ts_vec_push(out, e);
}

static bool uses_loop_var(const ir_expr *e, const sch_path *p, int from, int to) {
  for (int i = from; i < to; i++)
    if (p->node[i]->kind == IR_FOR && ir_expr_uses_var(e, p->node[i]->u.loop.var)) return true;
  return false;
}

/* Rebuilds node (a FOR or SEQ on the path) with its path child replaced. */
static ir_stmt *with_child(ts_arena *a, const ir_stmt *node, int slot, ir_stmt *child) {
  ir_stmt *c = ir_stmt_clone(a, node);
  if (!c) return NULL;
  if (node->kind == IR_FOR) {
    c->u.loop.body = child;
  } else {
    ir_stmt **v = TS_ANEWN(a, ir_stmt *, node->u.seq.n);
    if (!v) return NULL;
    memcpy(v, node->u.seq.stmts, sizeof *v * (size_t)node->u.seq.n);
    v[slot] = child;
    c->u.seq.stmts = v;
  }
  return c;
}

/* Orders iter vars (stably) by the outermost of the given loops their
 * binding uses (none: first), so that the iter var order follows the loop
 * nest: compute_at and blockize rebuild loops in iter var order, and the
 * rf axis should stay where its loop was (innermost after a split by the
 * vector lanes, so that it vectorizes). */
static void sort_by_loop(ir_iter_var *it, ir_expr **val, int n, ir_var *const *loops, int nl) {
  int key[MAXL * 2 + 8];
  if (n > (int)(sizeof key / sizeof key[0])) return;
  for (int i = 0; i < n; i++) {
    key[i] = -1;
    for (int l = 0; l < nl && key[i] < 0; l++)
      if (loops[l] && ir_expr_uses_var(val[i], loops[l])) key[i] = l;
  }
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && key[j - 1] > key[j]; j--) {
      int k = key[j];
      key[j] = key[j - 1];
      key[j - 1] = k;
      ir_iter_var t = it[j];
      it[j] = it[j - 1];
      it[j - 1] = t;
      ir_expr *e = val[j];
      val[j] = val[j - 1];
      val[j - 1] = e;
    }
}

static ir_var **lvars(ts_arena *a, const ir_stmt *const *L, int nl) {
  ir_var **v = TS_ANEWN(a, ir_var *, nl ? nl : 1);
  if (v)
    for (int l = 0; l < nl; l++) v[l] = L[l]->u.loop.var;
  return v;
}

/* What sch_rfactor's phases share: the reduction block B found under the
 * loop to factor, the loops between B's scope and B, and what each phase
 * builds for the next. */
typedef struct rf_ctx {
  sch_state *s;
  ts_arena *a;
  ts_diag *d;
  sch_path p;           /* root .. B's realize */
  const ir_stmt *rl;    /* the loop to factor */
  const char *ln, *bn;  /* its var's name; B's name */
  ir_stmt *rz;          /* B's realize */
  const ir_block *blk;  /* B */
  int sc;               /* index in p of B's scope */
  /* the reduction: ob[oidx] = comb(ob[oidx], rhs) */
  const ir_stmt *body, *init;
  ir_buffer *ob;
  int nidx, ndim;
  ir_expr **oidx;
  ir_expr_kind comb;
  ir_expr *rhs, *ident;
  /* the loops from the scope down to B: L[l] at p.node[Lpos[l]]; L[rfi] is
   * rl; sU/rU: the loop feeds spatial / reduce iter vars */
  int nl, k0, rfi, first_r;
  const ir_stmt *L[MAXL];
  int Lpos[MAXL];
  bool sU[MAXL], rU[MAXL];
  ir_expr *wpred; /* the write-back block's predicate */
  int factor_axis;
  ir_buffer *rb; /* the rf buffer */
  /* the rf block: old loop var -> rf loop var; old iter var -> new expr */
  ir_var_map lmap, imap;
  ir_var **nlv, **loop_iter, *vrf;
  ir_iter_var *riters;
  ir_expr **rvals;
  int nri;
  ir_block *rfb;
  ir_expr *rpred;
  ir_stmt *rf_nest;
  const char *rfname;
  ir_stmt *wrz; /* the write-back block's realize */
  char nm[256];
} rf_ctx;

/* Finds the one block under loop and its scope. */
static ts_status rf_find(rf_ctx *c, sch_loop loop) {
  sch_state *s = c->s;
  ts_diag *d = c->d;
  if (loop.mark != SCH_LOC_LOOP || !loop.var)
    return ts_diag_set(d, TS_ESCHEDULE, "%s: needs a loop, not a compute-location mark", P);
  sch_path lp;
  ts_status st = sch_find_loop(s, loop.var, &lp, P, d);
  if (st) return st;
  const ir_stmt *rl = c->rl = lp.node[lp.n - 1];
  const char *ln = c->ln = rl->u.loop.var->name;
  if (rl->u.loop.kind != IR_FOR_SERIAL)
    return ts_diag_set(d, TS_ESCHEDULE, "%s: loop '%s' is %s; rfactor needs a serial loop", P, ln,
                       ir_for_kind_name(rl->u.loop.kind));
  {
    ts_vec kids;
    ts_vec_init(&kids);
    if (sch_child_realizes(rl->u.loop.body, &kids)) {
      ts_vec_fini(&kids);
      return ts_diag_set(d, TS_ENOMEM, "out of memory");
    }
    size_t nk = kids.len;
    const char *bn = nk ? ((ir_stmt *)kids.items[0])->u.realize.block->name : NULL;
    ts_vec_fini(&kids);
    if (nk != 1)
      return ts_diag_set(d, TS_ESCHEDULE, "%s: loop '%s' holds %zu blocks; rfactor needs exactly one", P, ln,
                         nk);
    st = sch_find_block(s, bn, &c->p, P, d);
    if (st) return st;
  }
  c->rz = c->p.node[c->p.n - 1];
  c->blk = c->rz->u.realize.block;
  c->bn = c->blk->name;
  c->sc = sch_path_scope(&c->p, c->p.n - 1);
  if (c->sc < 0) return ts_diag_set(d, TS_ESCHEDULE, "%s: block '%s' has no scope", P, c->bn);
  return TS_OK;
}

/* The block is a reduction with a recognised combiner and an identity. */
static ts_status rf_check_reduction(rf_ctx *c) {
  ts_diag *d = c->d;
  const ir_block *blk = c->blk, *scope = c->p.node[c->sc]->u.realize.block;
  const char *bn = c->bn, *ln = c->ln;
  if (!blk->init)
    return ts_diag_set(d, TS_ESCHEDULE, "%s: block '%s' under loop '%s' is not a reduction (no init)", P, bn, ln);
  for (int i = 0; i < blk->niter; i++) {
    if (blk->iters[i].type != IR_ITER_S && blk->iters[i].type != IR_ITER_R)
      return ts_diag_set(d, TS_ESCHEDULE, "%s: block '%s' has iter var '%s' that is neither spatial nor reduce",
                         P, bn, blk->iters[i].var->name);
    if (!sch_quasi_affine(c->rz->u.realize.iter_values[i]))
      return ts_diag_set(d, TS_ESCHEDULE, "%s: block '%s' has a binding for '%s' that is not affine in its loops",
                         P, bn, blk->iters[i].var->name);
  }
  if (blk->nwrites != 1)
    return ts_diag_set(d, TS_ESCHEDULE, "%s: block '%s' writes %d buffers; rfactor handles one", P, bn,
                       blk->nwrites);
  ts_status st = sch_check_stage_pipeline(scope, blk, P, d);
  if (st) return st;
  const ir_stmt *body = c->body = blk->body, *init = c->init = blk->init;
  if (body->kind != IR_STORE || body->u.store.predicate)
    return ts_diag_set(d, TS_ESCHEDULE, "%s: the body of block '%s' is not a single store", P, bn);
  ir_buffer *ob = c->ob = body->u.store.buf;
  int nidx = c->nidx = body->u.store.nidx;
  ir_expr **oidx = c->oidx = body->u.store.idx;
  if (ob != blk->writes[0].buf)
    return ts_diag_set(d, TS_ESCHEDULE, "%s: block '%s' stores to '%s' but declares it writes '%s'", P, bn,
                       ob->name, blk->writes[0].buf->name);
  for (int k = 0; k < nidx; k++)
    for (int i = 0; i < blk->niter; i++)
      if (blk->iters[i].type == IR_ITER_R && ir_expr_uses_var(oidx[k], blk->iters[i].var))
        return ts_diag_set(d, TS_ESCHEDULE, "%s: block '%s' is not a reduction: reduce var '%s' indexes its output '%s'",
                           P, bn, blk->iters[i].var->name, ob->name);
  if (init->kind != IR_STORE || init->u.store.buf != ob || init->u.store.nidx != nidx || init->u.store.predicate)
    return ts_diag_set(d, TS_ESCHEDULE, "%s: the init of block '%s' is not a single store to '%s'", P, bn, ob->name);
  for (int k = 0; k < nidx; k++)
    if (!ir_expr_equal(init->u.store.idx[k], oidx[k]))
      return ts_diag_set(d, TS_ESCHEDULE, "%s: the init of block '%s' writes '%s' at other indices than its update",
                         P, bn, ob->name);
  const ir_expr *val = body->u.store.value;
  ir_expr_kind comb = c->comb = val->kind;
  if (comb != IR_ADD && comb != IR_MUL && comb != IR_MIN && comb != IR_MAX)
    return ts_diag_set(d, TS_ESCHEDULE,
                       "%s: block '%s' is not a reduction with a known combiner (its update is not '+', '*', min "
                       "or max of '%s' and a value)",
                       P, bn, ob->name);
  if (is_self_load(val->u.bin.a, ob, nidx, oidx)) c->rhs = val->u.bin.b;
  else if (is_self_load(val->u.bin.b, ob, nidx, oidx)) c->rhs = val->u.bin.a;
  else
    return ts_diag_set(d, TS_ESCHEDULE,
                       "%s: the update of block '%s' does not combine '%s' at its own indices with a value", P,
                       bn, ob->name);
  if (ir_expr_loads_buffer(c->rhs, ob))
    return ts_diag_set(d, TS_ESCHEDULE, "%s: the update of block '%s' reads '%s' outside the '%s' combination", P,
                       bn, ob->name, comb_name(comb));
  const char *why = NULL;
  c->ident = identity(c->a, comb, ob->dtype, &why);
  if (!c->ident && why)
    return ts_diag_set(d, TS_ESCHEDULE, "%s: block '%s' has no identity for '%s': %s", P, bn, comb_name(comb), why);
  if (!c->ident) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  return TS_OK;
}

/* Collects the loops from the scope down to B and checks what each feeds. */
static ts_status rf_check_loops(rf_ctx *c) {
  ts_diag *d = c->d;
  const sch_path *p = &c->p;
  const ir_block *blk = c->blk;
  const char *bn = c->bn, *ln = c->ln;
  const ir_stmt **L = c->L;
  bool *sU = c->sU, *rU = c->rU;
  int nl = 0;
  c->k0 = c->rfi = c->first_r = -1;
  for (int i = c->sc + 1; i < p->n - 1; i++) {
    const ir_stmt *n = p->node[i];
    if (n->kind == IR_FOR) {
      if (nl == MAXL) return ts_diag_set(d, TS_ESCHEDULE, "%s: block '%s' is under more than %d loops", P, bn, MAXL);
      if (c->k0 < 0) c->k0 = i;
      if (n == c->rl) c->rfi = nl;
      c->Lpos[nl] = i;
      L[nl++] = n;
    } else if (n->kind != IR_SEQ) {
      return ts_diag_set(d, TS_ESCHEDULE, "%s: block '%s' sits under a %s between its loops; rfactor needs loops only",
                         P, bn, n->kind == IR_IF ? "if" : "non-loop statement");
    }
  }
  c->nl = nl;
  int rfi = c->rfi;
  if (rfi < 0)
    return ts_diag_set(d, TS_ESCHEDULE, "%s: loop '%s' is not in the scope of block '%s'", P, ln, bn);
  for (int l = 0; l < nl; l++) {
    sU[l] = rU[l] = false;
    for (int i = 0; i < blk->niter; i++) {
      if (!ir_expr_uses_var(c->rz->u.realize.iter_values[i], L[l]->u.loop.var)) continue;
      if (blk->iters[i].type == IR_ITER_S) sU[l] = true;
      else rU[l] = true;
    }
    const char *lnm = L[l]->u.loop.var->name;
    if (sU[l] && rU[l])
      return ts_diag_set(d, TS_ESCHEDULE, "%s: loop '%s' of block '%s' feeds both spatial and reduce iter vars", P,
                         lnm, bn);
    if (l == rfi && sU[l])
      return ts_diag_set(d, TS_ESCHEDULE, "%s: loop '%s' feeds a spatial iter var of block '%s'; rfactor needs a reduction loop",
                         P, lnm, bn);
    if (l == rfi && !rU[l])
      return ts_diag_set(d, TS_ESCHEDULE, "%s: loop '%s' feeds no reduce iter var of block '%s'", P, lnm, bn);
    if (rU[l] && c->first_r < 0) c->first_r = l;
    int64_t e;
    if (!sU[l] && !rU[l] && c->first_r >= 0 && !(ir_as_int(L[l]->u.loop.extent, &e) && e == 1))
      return ts_diag_set(d, TS_ESCHEDULE,
                         "%s: loop '%s' (extent > 1) feeds no iter var of block '%s' but sits below reduction loop '%s'",
                         P, lnm, bn, L[c->first_r]->u.loop.var->name);
    if ((rU[l] || l == rfi) && (uses_loop_var(L[l]->u.loop.min, p, c->sc + 1, p->n - 1) ||
                                uses_loop_var(L[l]->u.loop.extent, p, c->sc + 1, p->n - 1)))
      return ts_diag_set(d, TS_ESCHEDULE, "%s: the bounds of reduction loop '%s' depend on an outer loop", P, lnm);
  }
  {
    ir_analyzer an;
    ir_analyzer_init(&an, c->a);
    ir_expr *z = ir_i64(c->a, 0);
    bool zero = z && ir_can_prove_equal(&an, c->rl->u.loop.min, z);
    ir_analyzer_fini(&an);
    if (!zero) return ts_diag_set(d, TS_ESCHEDULE, "%s: loop '%s' does not start at 0", P, ln);
  }
  /* below the outermost reduction loop: a chain of loops down to the block;
   * B is the first block under its outermost loop */
  for (int i = c->Lpos[c->first_r]; i < p->n - 1; i++)
    if (p->node[i]->kind != IR_FOR || p->node[i]->u.loop.body != p->node[i + 1])
      return ts_diag_set(d, TS_ESCHEDULE, "%s: reduction loop '%s' holds more than block '%s'", P,
                         L[c->first_r]->u.loop.var->name, bn);
  ts_vec kids;
  ts_vec_init(&kids);
  if (sch_child_realizes(L[0]->u.loop.body, &kids)) {
    ts_vec_fini(&kids);
    return ts_diag_set(d, TS_ENOMEM, "out of memory");
  }
  bool first = kids.len && kids.items[0] == c->rz;
  ts_vec_fini(&kids);
  if (!first)
    return ts_diag_set(d, TS_ESCHEDULE, "%s: block '%s' is not the first block under its outermost loop '%s'", P,
                       bn, L[0]->u.loop.var->name);
  return TS_OK;
}

/* The write-back predicate: B's clauses that use no dropped reduction loop. */
static ts_status rf_write_pred(rf_ctx *c) {
  ts_diag *d = c->d;
  ir_expr *pred = c->rz->u.realize.predicate;
  c->wpred = ir_bool(c->a, true);
  if (ir_expr_uses_var(pred, c->rl->u.loop.var))
    return ts_diag_set(d, TS_ESCHEDULE,
                       "%s: the predicate of block '%s' uses loop '%s' (an imperfect split): some partial results "
                       "would never be initialised",
                       P, c->bn, c->ln);
  ts_vec cl;
  ts_vec_init(&cl);
  if (conjuncts(pred, &cl)) {
    ts_vec_fini(&cl);
    return ts_diag_set(d, TS_ENOMEM, "out of memory");
  }
  for (size_t i = 0; i < cl.len && c->wpred; i++) {
    ir_expr *e = cl.items[i];
    bool kept = false, dropped = false;
    for (int l = 0; l < c->nl; l++) {
      if (!ir_expr_uses_var(e, c->L[l]->u.loop.var)) continue;
      if (c->rU[l] && l != c->rfi) dropped = true;
      else kept = true;
    }
    if (kept && dropped) {
      ts_vec_fini(&cl);
      return ts_diag_set(d, TS_ESCHEDULE,
                         "%s: the predicate of block '%s' ties a reduction loop to a loop the write-back keeps", P,
                         c->bn);
    }
    if (!dropped) c->wpred = ir_and(c->a, c->wpred, e);
  }
  ts_vec_fini(&cl);
  if (!c->wpred) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  return TS_OK;
}

/* Checks factor_axis and makes the rf buffer: ob's shape with the rf loop's
 * extent inserted at factor_axis. */
static ts_status rf_buffer(rf_ctx *c, int factor_axis) {
  ts_diag *d = c->d;
  ir_buffer *ob = c->ob;
  int ndim = c->ndim = ob->ndim;
  if (factor_axis < -(ndim + 1) || factor_axis > ndim)
    return ts_diag_set(d, TS_ESCHEDULE, "%s: factor_axis %d is out of range [%d, %d] for '%s' (%d dims)", P,
                       factor_axis, -(ndim + 1), ndim, ob->name, ndim);
  if (factor_axis < 0) factor_axis += ndim + 1;
  c->factor_axis = factor_axis;
  if (c->nidx != ndim)
    return ts_diag_set(d, TS_ESCHEDULE, "%s: block '%s' indexes '%s' with %d indices (it has %d dims)", P, c->bn,
                       ob->name, c->nidx, ndim);
  snprintf(c->nm, sizeof c->nm, "%s_rf", ob->name);
  const char *rbname = sch_fresh_buffer_name(c->s, c->nm);
  ir_expr **shape = TS_ANEWN(c->a, ir_expr *, ndim + 1);
  if (!rbname || !shape) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  for (int k = 0, q = 0; k <= ndim; k++) shape[k] = k == factor_axis ? c->rl->u.loop.extent : ob->shape[q++];
  c->rb = ir_buffer_new(c->a, rbname, ob->dtype, ndim + 1, shape, ob->scope ? ob->scope : "global");
  if (!c->rb) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  return TS_OK;
}

/* Reduce vars to split into one var per loop: those using the rf loop,
 * and (closure) those sharing a loop with one already split — e.g. after
 * fuse(ri, si) and split, si = f1 % 3 no longer uses the rf loop f0 but
 * shares f1 with ri = (f0*9 + f1) // 3; keeping si whole next to a var
 * for f1 would leave two iter vars over one loop (not a bijective
 * binding, which compute_at and others assume). */
static bool *rf_split_vars(rf_ctx *c) {
  const ir_block *blk = c->blk;
  int nl = c->nl;
  bool *split = TS_ANEWN(c->a, bool, blk->niter ? blk->niter : 1), *lsplit = TS_ANEWN(c->a, bool, nl);
  if (!split || !lsplit) return NULL;
  for (int l = 0; l < nl; l++) lsplit[l] = l == c->rfi;
  for (int i = 0; i < blk->niter; i++) split[i] = false;
  for (bool grew = true; grew;) {
    grew = false;
    for (int i = 0; i < blk->niter; i++) {
      if (split[i] || blk->iters[i].type != IR_ITER_R) continue;
      bool touch = false;
      for (int l = 0; l < nl && !touch; l++)
        touch = lsplit[l] && ir_expr_uses_var(c->rz->u.realize.iter_values[i], c->L[l]->u.loop.var);
      if (!touch) continue;
      split[i] = grew = true;
      for (int l = 0; l < nl; l++)
        if (ir_expr_uses_var(c->rz->u.realize.iter_values[i], c->L[l]->u.loop.var)) lsplit[l] = true;
    }
  }
  return split;
}

/* Iter var i of B, split per loop: one reduce var per loop its binding
 * uses (made once per loop), substituted into the binding. */
static ts_status rf_split_iter(rf_ctx *c, int i) {
  ts_arena *a = c->a;
  const ir_iter_var *it = &c->blk->iters[i];
  ir_expr *bind = c->rz->u.realize.iter_values[i];
  ts_status st = TS_OK;
  ir_var_map sub;
  ir_var_map_init(&sub);
  for (int l = 0; l < c->nl && !st; l++) {
    const ir_stmt *L = c->L[l];
    if (!ir_expr_uses_var(bind, L->u.loop.var)) continue;
    if (!c->loop_iter[l]) {
      snprintf(c->nm, sizeof c->nm, "v%s", L->u.loop.var->name);
      c->loop_iter[l] = ir_var_new(a, c->nm, L->u.loop.var->dtype);
      if (!c->loop_iter[l]) {
        st = TS_ENOMEM;
        break;
      }
      c->riters[c->nri] = (ir_iter_var){c->loop_iter[l], {L->u.loop.min, L->u.loop.extent}, IR_ITER_R};
      c->rvals[c->nri++] = ir_var_ref(a, c->nlv[l]);
    }
    ir_expr *r = ir_var_ref(a, c->loop_iter[l]);
    if (!r || ir_var_map_put(&sub, L->u.loop.var, r)) st = TS_ENOMEM;
  }
  ir_expr *e = st ? NULL : ir_subst_expr(a, bind, &sub);
  ir_var_map_fini(&sub);
  if (!e || ir_var_map_put(&c->imap, it->var, e)) st = TS_ENOMEM;
  return st;
}

/* The rf block's loop vars (lmap) and iter vars with their bindings: the rf
 * axis first, then B's iter vars, whole or split per loop (imap). */
static ts_status rf_iters(rf_ctx *c) {
  ts_arena *a = c->a;
  const ir_block *blk = c->blk;
  int nl = c->nl;
  ts_status st = TS_OK;
  c->nlv = TS_ANEWN(a, ir_var *, nl);
  if (!c->nlv) st = TS_ENOMEM;
  for (int l = 0; l < nl && !st; l++) {
    snprintf(c->nm, sizeof c->nm, "%s_rf", c->L[l]->u.loop.var->name);
    c->nlv[l] = ir_var_new(a, c->nm, c->L[l]->u.loop.var->dtype);
    ir_expr *r = c->nlv[l] ? ir_var_ref(a, c->nlv[l]) : NULL;
    if (!r || ir_var_map_put(&c->lmap, c->L[l]->u.loop.var, r)) st = TS_ENOMEM;
  }
  /* iter var per loop (for reduce vars that touch the rf loop) */
  c->loop_iter = TS_ANEWN(a, ir_var *, nl);
  int cap = blk->niter + nl + 1;
  c->riters = TS_ANEWN(a, ir_iter_var, cap);
  c->rvals = TS_ANEWN(a, ir_expr *, cap);
  if (!c->loop_iter || !c->riters || !c->rvals) st = TS_ENOMEM;
  c->nri = 0;
  if (!st) {
    memset(c->loop_iter, 0, sizeof *c->loop_iter * (size_t)nl);
    snprintf(c->nm, sizeof c->nm, "v%s", c->ln);
    c->vrf = ir_var_new(a, c->nm, c->rl->u.loop.var->dtype);
    if (!c->vrf) st = TS_ENOMEM;
    else {
      c->loop_iter[c->rfi] = c->vrf;
      c->riters[c->nri] = (ir_iter_var){c->vrf, {c->rl->u.loop.min, c->rl->u.loop.extent}, IR_ITER_S};
      c->rvals[c->nri++] = ir_var_ref(a, c->nlv[c->rfi]);
    }
  }
  bool *split = st ? NULL : rf_split_vars(c);
  if (!split) st = TS_ENOMEM;
  /* The per-loop reduce vars get their loops' full ranges as domains; a
   * predicate over those loops (an imperfect split of the reduction) is then
   * the only thing tying them together. The rf block keeps it, and
   * compute_at carries a moved block's predicate over into its iter vars. */
  for (int i = 0; i < blk->niter && !st; i++) {
    const ir_iter_var *it = &blk->iters[i];
    if (split[i]) {
      st = rf_split_iter(c, i);
      continue;
    }
    ir_var *nv = ir_var_new(a, it->var->name, it->var->dtype);
    ir_expr *r = nv ? ir_var_ref(a, nv) : NULL;
    ir_expr *b2 = ir_subst_expr(a, c->rz->u.realize.iter_values[i], &c->lmap);
    if (!r || !b2 || ir_var_map_put(&c->imap, it->var, r)) {
      st = TS_ENOMEM;
      break;
    }
    c->riters[c->nri] = (ir_iter_var){nv, it->dom, it->type};
    c->rvals[c->nri++] = b2;
  }
  for (int i = 0; i < c->nri && !st; i++)
    if (!c->rvals[i]) st = TS_ENOMEM;
  if (!st) sort_by_loop(c->riters, c->rvals, c->nri, c->nlv, nl);
  return st;
}

/* The rf block: rb[idx with vrf at factor_axis] = comb(itself, rhs), with
 * the reduction's identity as init. */
static ts_status rf_make_block(rf_ctx *c) {
  ts_arena *a = c->a;
  int ndim = c->ndim;
  ts_status st = TS_OK;
  ir_expr **ridx = TS_ANEWN(a, ir_expr *, ndim + 1);
  if (!ridx) st = TS_ENOMEM;
  for (int k = 0, q = 0; k <= ndim && !st; k++) {
    ridx[k] = k == c->factor_axis ? ir_var_ref(a, c->vrf) : ir_subst_expr(a, c->oidx[q++], &c->imap);
    if (!ridx[k]) st = TS_ENOMEM;
  }
  ir_expr *nrhs = st ? NULL : ir_subst_expr(a, c->rhs, &c->imap);
  ir_expr *lhs = nrhs ? ir_load(a, c->rb, ndim + 1, ridx) : NULL;
  ir_expr *nv = lhs ? combine(a, c->comb, lhs, nrhs) : NULL;
  snprintf(c->nm, sizeof c->nm, "%s_rf", c->bn);
  c->rfname = sch_fresh_block_name(c->s, c->nm);
  ir_block *rfb = c->rfb = ir_block_new(a, c->rfname);
  c->rpred = ir_subst_expr(a, c->rz->u.realize.predicate, &c->lmap);
  if (!nv || !c->rfname || !rfb || !c->rpred) st = TS_ENOMEM;
  if (!st) {
    rfb->niter = c->nri;
    rfb->iters = c->riters;
    rfb->nannot = c->blk->nannot;
    rfb->annots = c->blk->annots;
    rfb->body = ir_store(a, c->rb, ndim + 1, ridx, nv);
    rfb->init = ir_store(a, c->rb, ndim + 1, ridx, c->ident);
    if (!rfb->body || !rfb->init) st = TS_ENOMEM;
  }
  return st;
}

/* The rf nest: the rf block's realize under copies of B's loops. */
static ir_stmt *rf_make_nest(rf_ctx *c) {
  ts_arena *a = c->a;
  const ir_stmt **L = c->L;
  ir_stmt *rf_nest = ir_realize(a, c->rfb, c->rvals, c->rpred);
  for (int l = c->nl - 1; l >= 0 && rf_nest; l--) {
    /* A non-unit loop feeding no binding (B computed at a loop of a
     * consumer) only recomputes the partials: the rf nest leaves it out,
     * unless the predicate or another loop's bounds use it. Kept, it
     * could later be reordered below a reduction loop, re-running the
     * accumulation without the init. */
    int64_t e1;
    if (!c->sU[l] && !c->rU[l] && !(ir_as_int(L[l]->u.loop.extent, &e1) && e1 == 1) &&
        !ir_expr_uses_var(c->rpred, c->nlv[l])) {
      bool used = false;
      for (int q = 0; q < c->nl && !used; q++)
        used = ir_expr_uses_var(L[q]->u.loop.min, L[l]->u.loop.var) ||
               ir_expr_uses_var(L[q]->u.loop.extent, L[l]->u.loop.var);
      if (!used) continue;
    }
    ir_expr *mn = ir_subst_expr(a, L[l]->u.loop.min, &c->lmap), *ex = ir_subst_expr(a, L[l]->u.loop.extent, &c->lmap);
    ir_stmt *f = mn && ex ? ir_stmt_clone(a, L[l]) : NULL;
    if (f) {
      f->u.loop.var = c->nlv[l];
      f->u.loop.min = mn;
      f->u.loop.extent = ex;
      f->u.loop.body = rf_nest;
    }
    rf_nest = f;
  }
  return rf_nest;
}

/* The rf block and its nest (c->rf_nest). */
static ts_status rf_block(rf_ctx *c) {
  ir_var_map_init(&c->lmap);
  ir_var_map_init(&c->imap);
  ts_status st = rf_iters(c);
  if (!st) st = rf_make_block(c);
  if (!st && (st = ir_block_detect_regions(c->a, c->rfb, c->d))) {
    ir_var_map_fini(&c->lmap);
    ir_var_map_fini(&c->imap);
    return st;
  }
  if (!st && !(c->rf_nest = rf_make_nest(c))) st = TS_ENOMEM;
  ir_var_map_fini(&c->lmap);
  ir_var_map_fini(&c->imap);
  if (st) return ts_diag_set(c->d, TS_ENOMEM, "out of memory building the rf block of '%s'", c->bn);
  return TS_OK;
}

/* The write-back block (B's name): ob[idx] = comb(ob[idx], rb[idx with the
 * rf loop at factor_axis]) over B's spatial iter vars and a reduce var
 * over the rf loop; B's init (c->wrz). */
static ts_status rf_writeback(rf_ctx *c) {
  ts_arena *a = c->a;
  ts_diag *d = c->d;
  const ir_block *blk = c->blk;
  const ir_stmt *rl = c->rl;
  int ndim = c->ndim;
  ts_status st = TS_OK;
  ir_var_map wmap;
  ir_var_map_init(&wmap);
  int nw = 1;
  for (int i = 0; i < blk->niter; i++) nw += blk->iters[i].type == IR_ITER_S;
  ir_iter_var *witers = TS_ANEWN(a, ir_iter_var, nw);
  ir_expr **wvals = TS_ANEWN(a, ir_expr *, nw);
  ir_block *wb = ir_block_new(a, c->bn);
  if (!witers || !wvals || !wb) st = TS_ENOMEM;
  ir_var *wrf = NULL;
  if (!st) {
    snprintf(c->nm, sizeof c->nm, "v%s", c->ln);
    wrf = ir_var_new(a, c->nm, rl->u.loop.var->dtype);
    wvals[0] = ir_var_ref(a, rl->u.loop.var);
    if (!wrf || !wvals[0]) st = TS_ENOMEM;
    else witers[0] = (ir_iter_var){wrf, {rl->u.loop.min, rl->u.loop.extent}, IR_ITER_R};
  }
  for (int i = 0, j = 1; i < blk->niter && !st; i++) {
    const ir_iter_var *it = &blk->iters[i];
    if (it->type != IR_ITER_S) continue;
    ir_var *nv = ir_var_new(a, it->var->name, it->var->dtype);
    ir_expr *r = nv ? ir_var_ref(a, nv) : NULL;
    if (!r || ir_var_map_put(&wmap, it->var, r)) {
      st = TS_ENOMEM;
      break;
    }
    witers[j] = (ir_iter_var){nv, it->dom, IR_ITER_S};
    wvals[j++] = c->rz->u.realize.iter_values[i];
  }
  if (!st) {
    ir_var **wl = lvars(a, c->L, c->nl);
    if (!wl) st = TS_ENOMEM;
    else sort_by_loop(witers, wvals, nw, wl, c->nl);
  }
  if (!st) {
    ir_expr **widx = TS_ANEWN(a, ir_expr *, ndim), **fidx = TS_ANEWN(a, ir_expr *, ndim + 1);
    if (!widx || !fidx) st = TS_ENOMEM;
    for (int k = 0; k < ndim && !st; k++)
      if (!(widx[k] = ir_subst_expr(a, c->oidx[k], &wmap))) st = TS_ENOMEM;
    for (int k = 0, q = 0; k <= ndim && !st; k++)
      if (!(fidx[k] = k == c->factor_axis ? ir_var_ref(a, wrf) : widx[q++])) st = TS_ENOMEM;
    ir_expr *part = st ? NULL : ir_load(a, c->rb, ndim + 1, fidx);
    ir_expr *cur = part ? ir_load(a, c->ob, ndim, widx) : NULL;
    ir_expr *nv = cur ? combine(a, c->comb, cur, part) : NULL;
    if (!nv) st = TS_ENOMEM;
    if (!st) {
      wb->niter = nw;
      wb->iters = witers;
      wb->nannot = blk->nannot;
      wb->annots = blk->annots;
      wb->body = ir_store(a, c->ob, ndim, widx, nv);
      wb->init = ir_subst_stmt(a, blk->init, &wmap);
      if (!wb->body || !wb->init) st = TS_ENOMEM;
    }
  }
  ir_var_map_fini(&wmap);
  if (st) return ts_diag_set(d, TS_ENOMEM, "out of memory building the write-back block of '%s'", c->bn);
  st = ir_block_detect_regions(a, wb, d);
  if (st) return st;
  if (!(c->wrz = ir_realize(a, wb, wvals, c->wpred))) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  return TS_OK;
}

/* Rewrites the loop nest: B's nest minus the reduce-only loops around the
 * write-back block, the rf nest right before it, the rf buffer allocated
 * by the scope. On failure the function body is left as it was. */
static ts_status rf_install(rf_ctx *c) {
  sch_state *s = c->s;
  ts_arena *a = c->a;
  ts_diag *d = c->d;
  sch_path *p = &c->p;
  ir_stmt *cur = c->wrz;
  for (int i = p->n - 2; i >= c->k0 && cur; i--) {
    const ir_stmt *n = p->node[i];
    if (n->kind == IR_FOR) {
      int l = 0;
      while (c->L[l] != n) l++;
      if (c->rU[l] && l != c->rfi) continue; /* dropped */
    }
    cur = with_child(a, n, p->slot[i + 1], cur);
  }
  if (!cur) return ts_diag_set(d, TS_ENOMEM, "out of memory");

  ir_stmt *saved = s->func->body;
  ts_status st = sch_insert_before(s, p, c->k0, c->rf_nest, cur, d);
  /* ---- the scope allocates the rf buffer ---- */
  sch_path p2;
  if (!st) st = sch_find_block(s, c->bn, &p2, P, d);
  if (!st) {
    int sc2 = sch_path_scope(&p2, p2.n - 1);
    const ir_stmt *srz = p2.node[sc2];
    ir_block *nsb = ir_block_with_alloc(a, srz->u.realize.block, c->rb);
    ir_stmt *nsrz = ir_stmt_clone(a, srz);
    if (!nsb || !nsrz) {
      st = ts_diag_set(d, TS_ENOMEM, "out of memory");
    } else {
      nsrz->u.realize.block = nsb;
      st = sch_replace(s, &p2, sc2, nsrz, d);
    }
  }
  if (st) s->func->body = saved; /* nodes are immutable: the old tree is intact */
  return st;
}

/* Puts first before node[k] of p and second in its place (second may be
 * node[k] itself): into the SEQ above node[k], or as a new SEQ of the two. */
ts_status sch_insert_before(sch_state *s, const sch_path *p, int k, ir_stmt *first, ir_stmt *second, ts_diag *d) {
  ts_arena *a = &s->arena;
  ir_stmt *parent = p->node[k - 1];
  if (parent->kind == IR_SEQ) {
    int m = parent->u.seq.n + 1, pos = p->slot[k];
    ir_stmt **v = TS_ANEWN(a, ir_stmt *, m);
    ir_stmt *ns = NULL;
    if (v) {
      for (int i = 0, q = 0; i < parent->u.seq.n; i++) {
        if (i == pos) v[q++] = first;
        v[q++] = i == pos ? second : parent->u.seq.stmts[i];
      }
      ns = ir_seq(a, m, v);
    }
    return ns ? sch_replace(s, p, k - 1, ns, d) : ts_diag_set(d, TS_ENOMEM, "out of memory");
  }
  ir_stmt *two[2] = {first, second};
  ir_stmt *ns = ir_seq(a, 2, two);
  return ns ? sch_replace(s, p, k, ns, d) : ts_diag_set(d, TS_ENOMEM, "out of memory");
}

ts_status sch_rfactor(sch_state *s, sch_loop loop, int factor_axis, sch_block *out_rf_block, ts_diag *d) {
  rf_ctx c = {.s = s, .a = &s->arena, .d = d};
  ts_status st = rf_find(&c, loop);
  if (!st) st = rf_check_reduction(&c);
  if (!st) st = rf_check_loops(&c);
  if (!st) st = rf_write_pred(&c);
  if (!st) st = rf_buffer(&c, factor_axis);
  if (!st) st = rf_block(&c);
  if (!st) st = rf_writeback(&c);
  if (!st) st = rf_install(&c);
  if (st) return st;
  if (out_rf_block) out_rf_block->name = c.rfname;
  return sch_finish(s, TS_OK, d);
}
