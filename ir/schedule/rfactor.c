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

typedef struct reads_ctx {
  const ir_buffer *buf;
  bool hit;
} reads_ctx;

static bool reads_cb(void *ctx, const ir_expr *e) {
  reads_ctx *c = ctx;
  if (e->kind == IR_LOAD && e->u.load.buf == c->buf) c->hit = true;
  return !c->hit;
}

static bool expr_reads(const ir_expr *e, const ir_buffer *buf) {
  reads_ctx c = {buf, false};
  ir_visitor v = {.expr = reads_cb, .ctx = &c};
  ir_visit_expr(&v, e);
  return c.hit;
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

ts_status sch_rfactor(sch_state *s, sch_loop loop, int factor_axis, sch_block *out_rf_block, ts_diag *d) {
  ts_arena *a = &s->arena;
  if (loop.mark != SCH_LOC_LOOP || !loop.var)
    return ts_diag_set(d, TS_ESCHEDULE, "%s: needs a loop, not a compute-location mark", P);
  sch_path lp, p;
  ts_status st = sch_find_loop(s, loop.var, &lp, P, d);
  if (st) return st;
  const ir_stmt *rl = lp.node[lp.n - 1];
  const char *ln = rl->u.loop.var->name;
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
    st = sch_find_block(s, bn, &p, P, d);
    if (st) return st;
  }
  ir_stmt *rz = p.node[p.n - 1];
  const ir_block *blk = rz->u.realize.block;
  const char *bn = blk->name;
  int sc = sch_path_scope(&p, p.n - 1);
  if (sc < 0) return ts_diag_set(d, TS_ESCHEDULE, "%s: block '%s' has no scope", P, bn);
  const ir_block *scope = p.node[sc]->u.realize.block;

  /* ---- the block is a reduction with a recognised combiner ---- */
  if (!blk->init)
    return ts_diag_set(d, TS_ESCHEDULE, "%s: block '%s' under loop '%s' is not a reduction (no init)", P, bn, ln);
  for (int i = 0; i < blk->niter; i++) {
    if (blk->iters[i].type != IR_ITER_S && blk->iters[i].type != IR_ITER_R)
      return ts_diag_set(d, TS_ESCHEDULE, "%s: block '%s' has iter var '%s' that is neither spatial nor reduce",
                         P, bn, blk->iters[i].var->name);
    if (!sch_quasi_affine(rz->u.realize.iter_values[i]))
      return ts_diag_set(d, TS_ESCHEDULE, "%s: block '%s' has a binding for '%s' that is not affine in its loops",
                         P, bn, blk->iters[i].var->name);
  }
  if (blk->nwrites != 1)
    return ts_diag_set(d, TS_ESCHEDULE, "%s: block '%s' writes %d buffers; rfactor handles one", P, bn,
                       blk->nwrites);
  st = sch_check_stage_pipeline(scope, blk, P, d);
  if (st) return st;
  const ir_stmt *body = blk->body, *init = blk->init;
  if (body->kind != IR_STORE || body->u.store.predicate)
    return ts_diag_set(d, TS_ESCHEDULE, "%s: the body of block '%s' is not a single store", P, bn);
  ir_buffer *ob = body->u.store.buf;
  int nidx = body->u.store.nidx;
  ir_expr **oidx = body->u.store.idx;
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
  ir_expr_kind comb = val->kind;
  if (comb != IR_ADD && comb != IR_MUL && comb != IR_MIN && comb != IR_MAX)
    return ts_diag_set(d, TS_ESCHEDULE,
                       "%s: block '%s' is not a reduction with a known combiner (its update is not '+', '*', min "
                       "or max of '%s' and a value)",
                       P, bn, ob->name);
  ir_expr *rhs;
  if (is_self_load(val->u.bin.a, ob, nidx, oidx)) rhs = val->u.bin.b;
  else if (is_self_load(val->u.bin.b, ob, nidx, oidx)) rhs = val->u.bin.a;
  else
    return ts_diag_set(d, TS_ESCHEDULE,
                       "%s: the update of block '%s' does not combine '%s' at its own indices with a value", P,
                       bn, ob->name);
  if (expr_reads(rhs, ob))
    return ts_diag_set(d, TS_ESCHEDULE, "%s: the update of block '%s' reads '%s' outside the '%s' combination", P,
                       bn, ob->name, comb_name(comb));
  const char *why = NULL;
  ir_expr *ident = identity(a, comb, ob->dtype, &why);
  if (!ident && why)
    return ts_diag_set(d, TS_ESCHEDULE, "%s: block '%s' has no identity for '%s': %s", P, bn, comb_name(comb), why);
  if (!ident) return ts_diag_set(d, TS_ENOMEM, "out of memory");

  /* ---- the loops ---- */
  int nl = 0, k0 = -1, rfi = -1;
  const ir_stmt *L[MAXL];
  int Lpos[MAXL];
  for (int i = sc + 1; i < p.n - 1; i++) {
    const ir_stmt *n = p.node[i];
    if (n->kind == IR_FOR) {
      if (nl == MAXL) return ts_diag_set(d, TS_ESCHEDULE, "%s: block '%s' is under more than %d loops", P, bn, MAXL);
      if (k0 < 0) k0 = i;
      if (n == rl) rfi = nl;
      Lpos[nl] = i;
      L[nl++] = n;
    } else if (n->kind != IR_SEQ) {
      return ts_diag_set(d, TS_ESCHEDULE, "%s: block '%s' sits under a %s between its loops; rfactor needs loops only",
                         P, bn, n->kind == IR_IF ? "if" : "non-loop statement");
    }
  }
  if (rfi < 0)
    return ts_diag_set(d, TS_ESCHEDULE, "%s: loop '%s' is not in the scope of block '%s'", P, ln, bn);
  bool sU[MAXL], rU[MAXL];
  int first_r = -1;
  for (int l = 0; l < nl; l++) {
    sU[l] = rU[l] = false;
    for (int i = 0; i < blk->niter; i++) {
      if (!ir_expr_uses_var(rz->u.realize.iter_values[i], L[l]->u.loop.var)) continue;
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
    if (rU[l] && first_r < 0) first_r = l;
    int64_t e;
    if (!sU[l] && !rU[l] && first_r >= 0 && !(ir_as_int(L[l]->u.loop.extent, &e) && e == 1))
      return ts_diag_set(d, TS_ESCHEDULE,
                         "%s: loop '%s' (extent > 1) feeds no iter var of block '%s' but sits below reduction loop '%s'",
                         P, lnm, bn, L[first_r]->u.loop.var->name);
    if ((rU[l] || l == rfi) && (uses_loop_var(L[l]->u.loop.min, &p, sc + 1, p.n - 1) ||
                                uses_loop_var(L[l]->u.loop.extent, &p, sc + 1, p.n - 1)))
      return ts_diag_set(d, TS_ESCHEDULE, "%s: the bounds of reduction loop '%s' depend on an outer loop", P, lnm);
  }
  {
    ir_analyzer an;
    ir_analyzer_init(&an, a);
    ir_expr *z = ir_i64(a, 0);
    bool zero = z && ir_can_prove_equal(&an, rl->u.loop.min, z);
    ir_analyzer_fini(&an);
    if (!zero) return ts_diag_set(d, TS_ESCHEDULE, "%s: loop '%s' does not start at 0", P, ln);
  }
  /* below the outermost reduction loop: a chain of loops down to the block;
   * B is the first block under its outermost loop */
  for (int i = Lpos[first_r]; i < p.n - 1; i++)
    if (p.node[i]->kind != IR_FOR || p.node[i]->u.loop.body != p.node[i + 1])
      return ts_diag_set(d, TS_ESCHEDULE, "%s: reduction loop '%s' holds more than block '%s'", P,
                         L[first_r]->u.loop.var->name, bn);
  {
    ts_vec kids;
    ts_vec_init(&kids);
    if (sch_child_realizes(L[0]->u.loop.body, &kids)) {
      ts_vec_fini(&kids);
      return ts_diag_set(d, TS_ENOMEM, "out of memory");
    }
    bool first = kids.len && kids.items[0] == rz;
    ts_vec_fini(&kids);
    if (!first)
      return ts_diag_set(d, TS_ESCHEDULE, "%s: block '%s' is not the first block under its outermost loop '%s'", P,
                         bn, L[0]->u.loop.var->name);
  }
  /* the predicate */
  ir_expr *wpred = ir_bool(a, true);
  {
    if (ir_expr_uses_var(rz->u.realize.predicate, rl->u.loop.var))
      return ts_diag_set(d, TS_ESCHEDULE,
                         "%s: the predicate of block '%s' uses loop '%s' (an imperfect split): some partial results "
                         "would never be initialised",
                         P, bn, ln);
    ts_vec cl;
    ts_vec_init(&cl);
    if (conjuncts(rz->u.realize.predicate, &cl)) {
      ts_vec_fini(&cl);
      return ts_diag_set(d, TS_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < cl.len && wpred; i++) {
      ir_expr *c = cl.items[i];
      bool kept = false, dropped = false;
      for (int l = 0; l < nl; l++) {
        if (!ir_expr_uses_var(c, L[l]->u.loop.var)) continue;
        if (rU[l] && l != rfi) dropped = true;
        else kept = true;
      }
      if (kept && dropped) {
        ts_vec_fini(&cl);
        return ts_diag_set(d, TS_ESCHEDULE,
                           "%s: the predicate of block '%s' ties a reduction loop to a loop the write-back keeps", P,
                           bn);
      }
      if (!dropped) wpred = ir_and(a, wpred, c);
    }
    ts_vec_fini(&cl);
    if (!wpred) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  }
  int ndim = ob->ndim;
  if (factor_axis < -(ndim + 1) || factor_axis > ndim)
    return ts_diag_set(d, TS_ESCHEDULE, "%s: factor_axis %d is out of range [%d, %d] for '%s' (%d dims)", P,
                       factor_axis, -(ndim + 1), ndim, ob->name, ndim);
  if (factor_axis < 0) factor_axis += ndim + 1;
  if (nidx != ndim)
    return ts_diag_set(d, TS_ESCHEDULE, "%s: block '%s' indexes '%s' with %d indices (it has %d dims)", P, bn,
                       ob->name, nidx, ndim);

  /* ---- the rf buffer ---- */
  char nm[256];
  snprintf(nm, sizeof nm, "%s_rf", ob->name);
  const char *rbname = sch_fresh_buffer_name(s, nm);
  ir_expr **shape = TS_ANEWN(a, ir_expr *, ndim + 1);
  if (!rbname || !shape) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  for (int k = 0, q = 0; k <= ndim; k++) shape[k] = k == factor_axis ? rl->u.loop.extent : ob->shape[q++];
  ir_buffer *rb = ir_buffer_new(a, rbname, ob->dtype, ndim + 1, shape, ob->scope ? ob->scope : "global");
  if (!rb) return ts_diag_set(d, TS_ENOMEM, "out of memory");

  /* ---- the rf block ---- */
  st = TS_OK;
  ir_var_map lmap, imap; /* old loop var -> rf loop var; old iter var -> new expr */
  ir_var_map_init(&lmap);
  ir_var_map_init(&imap);
  ir_var **nlv = TS_ANEWN(a, ir_var *, nl);
  if (!nlv) st = TS_ENOMEM;
  for (int l = 0; l < nl && !st; l++) {
    snprintf(nm, sizeof nm, "%s_rf", L[l]->u.loop.var->name);
    nlv[l] = ir_var_new(a, nm, L[l]->u.loop.var->dtype);
    ir_expr *r = nlv[l] ? ir_var_ref(a, nlv[l]) : NULL;
    if (!r || ir_var_map_put(&lmap, L[l]->u.loop.var, r)) st = TS_ENOMEM;
  }
  /* iter var per loop (for reduce vars that touch the rf loop) */
  ir_var **loop_iter = TS_ANEWN(a, ir_var *, nl);
  int cap = blk->niter + nl + 1;
  ir_iter_var *riters = TS_ANEWN(a, ir_iter_var, cap);
  ir_expr **rvals = TS_ANEWN(a, ir_expr *, cap);
  if (!loop_iter || !riters || !rvals) st = TS_ENOMEM;
  int nri = 0;
  ir_var *vrf = NULL;
  if (!st) {
    memset(loop_iter, 0, sizeof *loop_iter * (size_t)nl);
    snprintf(nm, sizeof nm, "v%s", ln);
    vrf = ir_var_new(a, nm, rl->u.loop.var->dtype);
    if (!vrf) st = TS_ENOMEM;
    else {
      loop_iter[rfi] = vrf;
      riters[nri] = (ir_iter_var){vrf, {rl->u.loop.min, rl->u.loop.extent}, IR_ITER_S};
      rvals[nri++] = ir_var_ref(a, nlv[rfi]);
    }
  }
  /* Reduce vars to split into one var per loop: those using the rf loop,
   * and (closure) those sharing a loop with one already split — e.g. after
   * fuse(ri, si) and split, si = f1 % 3 no longer uses the rf loop f0 but
   * shares f1 with ri = (f0*9 + f1) // 3; keeping si whole next to a var
   * for f1 would leave two iter vars over one loop (not a bijective
   * binding, which compute_at and others assume). */
  bool *split = TS_ANEWN(a, bool, blk->niter ? blk->niter : 1), *lsplit = TS_ANEWN(a, bool, nl);
  if (!split || !lsplit) st = TS_ENOMEM;
  if (!st) {
    for (int l = 0; l < nl; l++) lsplit[l] = l == rfi;
    for (int i = 0; i < blk->niter; i++) split[i] = false;
    for (bool grew = true; grew;) {
      grew = false;
      for (int i = 0; i < blk->niter; i++) {
        if (split[i] || blk->iters[i].type != IR_ITER_R) continue;
        bool touch = false;
        for (int l = 0; l < nl && !touch; l++)
          touch = lsplit[l] && ir_expr_uses_var(rz->u.realize.iter_values[i], L[l]->u.loop.var);
        if (!touch) continue;
        split[i] = grew = true;
        for (int l = 0; l < nl; l++)
          if (ir_expr_uses_var(rz->u.realize.iter_values[i], L[l]->u.loop.var)) lsplit[l] = true;
      }
    }
  }
  /* The per-loop reduce vars get their loops' full ranges as domains; a
   * predicate over those loops (an imperfect split of the reduction) is then
   * the only thing tying them together. The rf block keeps it, and
   * compute_at carries a moved block's predicate over into its iter vars. */
  for (int i = 0; i < blk->niter && !st; i++) {
    const ir_iter_var *it = &blk->iters[i];
    ir_expr *bind = rz->u.realize.iter_values[i];
    if (!split[i]) {
      ir_var *nv = ir_var_new(a, it->var->name, it->var->dtype);
      ir_expr *r = nv ? ir_var_ref(a, nv) : NULL;
      ir_expr *b2 = ir_subst_expr(a, bind, &lmap);
      if (!r || !b2 || ir_var_map_put(&imap, it->var, r)) {
        st = TS_ENOMEM;
        break;
      }
      riters[nri] = (ir_iter_var){nv, it->dom, it->type};
      rvals[nri++] = b2;
      continue;
    }
    /* a reduce var split per loop: one reduce var per loop it uses */
    ir_var_map sub;
    ir_var_map_init(&sub);
    for (int l = 0; l < nl && !st; l++) {
      if (!ir_expr_uses_var(bind, L[l]->u.loop.var)) continue;
      if (!loop_iter[l]) {
        snprintf(nm, sizeof nm, "v%s", L[l]->u.loop.var->name);
        loop_iter[l] = ir_var_new(a, nm, L[l]->u.loop.var->dtype);
        if (!loop_iter[l]) {
          st = TS_ENOMEM;
          break;
        }
        riters[nri] = (ir_iter_var){loop_iter[l], {L[l]->u.loop.min, L[l]->u.loop.extent}, IR_ITER_R};
        rvals[nri++] = ir_var_ref(a, nlv[l]);
      }
      ir_expr *r = ir_var_ref(a, loop_iter[l]);
      if (!r || ir_var_map_put(&sub, L[l]->u.loop.var, r)) st = TS_ENOMEM;
    }
    ir_expr *e = st ? NULL : ir_subst_expr(a, bind, &sub);
    ir_var_map_fini(&sub);
    if (!e || ir_var_map_put(&imap, it->var, e)) st = TS_ENOMEM;
  }
  for (int i = 0; i < nri && !st; i++)
    if (!rvals[i]) st = TS_ENOMEM;
  if (!st) sort_by_loop(riters, rvals, nri, nlv, nl);
  ir_block *rfb = NULL;
  ir_stmt *rf_nest = NULL;
  const char *rfname = NULL;
  if (!st) {
    ir_expr **ridx = TS_ANEWN(a, ir_expr *, ndim + 1);
    if (!ridx) st = TS_ENOMEM;
    for (int k = 0, q = 0; k <= ndim && !st; k++) {
      ridx[k] = k == factor_axis ? ir_var_ref(a, vrf) : ir_subst_expr(a, oidx[q++], &imap);
      if (!ridx[k]) st = TS_ENOMEM;
    }
    ir_expr *nrhs = st ? NULL : ir_subst_expr(a, rhs, &imap);
    ir_expr *lhs = nrhs ? ir_load(a, rb, ndim + 1, ridx) : NULL;
    ir_expr *nv = lhs ? combine(a, comb, lhs, nrhs) : NULL;
    snprintf(nm, sizeof nm, "%s_rf", bn);
    rfname = sch_fresh_block_name(s, nm);
    rfb = ir_block_new(a, rfname);
    ir_expr *rpred = ir_subst_expr(a, rz->u.realize.predicate, &lmap);
    if (!nv || !rfname || !rfb || !rpred) st = TS_ENOMEM;
    if (!st) {
      rfb->niter = nri;
      rfb->iters = riters;
      rfb->nannot = blk->nannot;
      rfb->annots = blk->annots;
      rfb->body = ir_store(a, rb, ndim + 1, ridx, nv);
      rfb->init = ir_store(a, rb, ndim + 1, ridx, ident);
      if (!rfb->body || !rfb->init) st = TS_ENOMEM;
    }
    if (!st && (st = ir_block_detect_regions(a, rfb, d))) {
      ir_var_map_fini(&lmap);
      ir_var_map_fini(&imap);
      return st;
    }
    if (!st) rf_nest = ir_realize(a, rfb, rvals, rpred);
    for (int l = nl - 1; l >= 0 && rf_nest; l--) {
      /* A non-unit loop feeding no binding (B computed at a loop of a
       * consumer) only recomputes the partials: the rf nest leaves it out,
       * unless the predicate or another loop's bounds use it. Kept, it
       * could later be reordered below a reduction loop, re-running the
       * accumulation without the init. */
      int64_t e1;
      if (!sU[l] && !rU[l] && !(ir_as_int(L[l]->u.loop.extent, &e1) && e1 == 1) &&
          !ir_expr_uses_var(rpred, nlv[l])) {
        bool used = false;
        for (int q = 0; q < nl && !used; q++)
          used = ir_expr_uses_var(L[q]->u.loop.min, L[l]->u.loop.var) ||
                 ir_expr_uses_var(L[q]->u.loop.extent, L[l]->u.loop.var);
        if (!used) continue;
      }
      ir_expr *mn = ir_subst_expr(a, L[l]->u.loop.min, &lmap), *ex = ir_subst_expr(a, L[l]->u.loop.extent, &lmap);
      ir_stmt *f = mn && ex ? ir_stmt_clone(a, L[l]) : NULL;
      if (f) {
        f->u.loop.var = nlv[l];
        f->u.loop.min = mn;
        f->u.loop.extent = ex;
        f->u.loop.body = rf_nest;
      }
      rf_nest = f;
    }
    if (!rf_nest) st = TS_ENOMEM;
  }
  ir_var_map_fini(&lmap);
  ir_var_map_fini(&imap);
  if (st) return ts_diag_set(d, TS_ENOMEM, "out of memory building the rf block of '%s'", bn);

  /* ---- the write-back block ---- */
  ir_var_map wmap;
  ir_var_map_init(&wmap);
  int nw = 1;
  for (int i = 0; i < blk->niter; i++) nw += blk->iters[i].type == IR_ITER_S;
  ir_iter_var *witers = TS_ANEWN(a, ir_iter_var, nw);
  ir_expr **wvals = TS_ANEWN(a, ir_expr *, nw);
  ir_block *wb = ir_block_new(a, bn);
  if (!witers || !wvals || !wb) st = TS_ENOMEM;
  ir_var *wrf = NULL;
  if (!st) {
    snprintf(nm, sizeof nm, "v%s", ln);
    wrf = ir_var_new(a, nm, rl->u.loop.var->dtype);
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
    wvals[j++] = rz->u.realize.iter_values[i];
  }
  if (!st) {
    ir_var **wl = lvars(a, L, nl);
    if (!wl) st = TS_ENOMEM;
    else sort_by_loop(witers, wvals, nw, wl, nl);
  }
  ir_stmt *wrz = NULL;
  if (!st) {
    ir_expr **widx = TS_ANEWN(a, ir_expr *, ndim), **fidx = TS_ANEWN(a, ir_expr *, ndim + 1);
    if (!widx || !fidx) st = TS_ENOMEM;
    for (int k = 0; k < ndim && !st; k++)
      if (!(widx[k] = ir_subst_expr(a, oidx[k], &wmap))) st = TS_ENOMEM;
    for (int k = 0, q = 0; k <= ndim && !st; k++)
      if (!(fidx[k] = k == factor_axis ? ir_var_ref(a, wrf) : widx[q++])) st = TS_ENOMEM;
    ir_expr *part = st ? NULL : ir_load(a, rb, ndim + 1, fidx);
    ir_expr *cur = part ? ir_load(a, ob, ndim, widx) : NULL;
    ir_expr *nv = cur ? combine(a, comb, cur, part) : NULL;
    if (!nv) st = TS_ENOMEM;
    if (!st) {
      wb->niter = nw;
      wb->iters = witers;
      wb->nannot = blk->nannot;
      wb->annots = blk->annots;
      wb->body = ir_store(a, ob, ndim, widx, nv);
      wb->init = ir_subst_stmt(a, blk->init, &wmap);
      if (!wb->body || !wb->init) st = TS_ENOMEM;
    }
  }
  ir_var_map_fini(&wmap);
  if (st) return ts_diag_set(d, TS_ENOMEM, "out of memory building the write-back block of '%s'", bn);
  st = ir_block_detect_regions(a, wb, d);
  if (st) return st;
  if (!(wrz = ir_realize(a, wb, wvals, wpred))) return ts_diag_set(d, TS_ENOMEM, "out of memory");

  /* ---- the write-back nest: B's nest minus the reduce-only loops ---- */
  ir_stmt *cur = wrz;
  for (int i = p.n - 2; i >= k0 && cur; i--) {
    const ir_stmt *n = p.node[i];
    if (n->kind == IR_FOR) {
      int l = 0;
      while (L[l] != n) l++;
      if (rU[l] && l != rfi) continue; /* dropped */
    }
    cur = with_child(a, n, p.slot[i + 1], cur);
  }
  if (!cur) return ts_diag_set(d, TS_ENOMEM, "out of memory");

  /* ---- install: the rf nest right before B's outermost loop ---- */
  ir_stmt *saved = s->func->body;
  ir_stmt *parent = p.node[k0 - 1];
  if (parent->kind == IR_SEQ) {
    int m = parent->u.seq.n + 1, pos = p.slot[k0];
    ir_stmt **v = TS_ANEWN(a, ir_stmt *, m);
    ir_stmt *ns = NULL;
    if (v) {
      for (int i = 0, q = 0; i < parent->u.seq.n; i++) {
        if (i == pos) v[q++] = rf_nest;
        v[q++] = i == pos ? cur : parent->u.seq.stmts[i];
      }
      ns = ir_seq(a, m, v);
    }
    st = ns ? sch_replace(s, &p, k0 - 1, ns, d) : ts_diag_set(d, TS_ENOMEM, "out of memory");
  } else {
    ir_stmt *two[2] = {rf_nest, cur};
    ir_stmt *ns = ir_seq(a, 2, two);
    st = ns ? sch_replace(s, &p, k0, ns, d) : ts_diag_set(d, TS_ENOMEM, "out of memory");
  }
  /* ---- the scope allocates the rf buffer ---- */
  sch_path p2;
  if (!st) st = sch_find_block(s, bn, &p2, P, d);
  if (!st) {
    int sc2 = sch_path_scope(&p2, p2.n - 1);
    const ir_stmt *srz = p2.node[sc2];
    const ir_block *sb = srz->u.realize.block;
    ir_block *nsb = ir_block_clone(a, sb);
    ir_stmt *nsrz = ir_stmt_clone(a, srz);
    ir_buffer **al = TS_ANEWN(a, ir_buffer *, sb->nalloc + 1);
    if (!nsb || !nsrz || !al) {
      st = ts_diag_set(d, TS_ENOMEM, "out of memory");
    } else {
      if (sb->nalloc) memcpy(al, sb->allocs, sizeof *al * (size_t)sb->nalloc);
      al[sb->nalloc] = rb;
      nsb->allocs = al;
      nsb->nalloc = sb->nalloc + 1;
      nsrz->u.realize.block = nsb;
      st = sch_replace(s, &p2, sc2, nsrz, d);
    }
  }
  if (st) {
    s->func->body = saved; /* nodes are immutable: the old tree is intact */
    return st;
  }
  if (out_rf_block) out_rf_block->name = rfname;
  return sch_finish(s, TS_OK, d);
}
