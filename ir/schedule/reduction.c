/* reduction.c — reduction primitives (TVM's reduction.cc):
 * decompose_reduction splits a reduction block's init into its own block,
 * placed under copies of the loops its spatial bindings use, just before a
 * given loop; the update block then reads its output like any other input.
 *
 * Why the checks: the init nest runs once per spatial point before `loop`,
 * so every update of that point must happen inside the same execution of
 * `loop`. That holds when no loop at or above `loop` feeds a reduce binding,
 * and every non-unit loop below it feeds some binding (otherwise a point is
 * reduced twice, and the original re-initialised in between). Bindings must
 * be quasi-affine (+, -, * by a constant, // and % by a positive constant),
 * which is what split, fuse, reorder and compute_at produce. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sch_int.h"


/* Splits a predicate into its && clauses (appended to out). */
static ts_status conjuncts(ir_expr *e, ts_vec *out) {
  if (e->kind == IR_AND) {
    ts_status st = conjuncts(e->u.bin.a, out);
    return st ? st : conjuncts(e->u.bin.b, out);
  }
  int64_t v;
  if (ir_as_int(e, &v) && v) return TS_OK; /* true */
  return ts_vec_push(out, e);
}

static bool uses_any(const ir_expr *e, ir_var *const *vars, int n) {
  for (int i = 0; i < n; i++)
    if (ir_expr_uses_var(e, vars[i])) return true;
  return false;
}


/* ---- injectivity of the bindings over the decomposed loops ----
 * After decomposition the init runs once before `loop`, so every
 * (spatial, reduce) point of the block must be visited at most once by the
 * loops at and below `loop`; otherwise a point is accumulated twice (e.g. a
 * block moved under a fused loop that revisits each row). Checked by
 * enumeration when the iteration space is small, else by a syntactic rule. */
#define ENUM_LIMIT (1 << 18)

static bool eval_int(const ir_expr *e, ir_var *const *vars, const int64_t *vals, int n, int64_t *out) {
  int64_t a, b;
  switch (e->kind) {
  case IR_INT_IMM: *out = e->u.ival; return true;
  case IR_VAR:
    for (int i = 0; i < n; i++)
      if (vars[i] == e->u.var) {
        *out = vals[i];
        return true;
      }
    return false;
  case IR_ADD: case IR_SUB: case IR_MUL: case IR_FLOORDIV: case IR_FLOORMOD: case IR_MIN: case IR_MAX:
    if (!eval_int(e->u.bin.a, vars, vals, n, &a) || !eval_int(e->u.bin.b, vars, vals, n, &b)) return false;
    switch (e->kind) {
    case IR_ADD: *out = a + b; return true;
    case IR_SUB: *out = a - b; return true;
    case IR_MUL: *out = a * b; return true;
    case IR_MIN: *out = a < b ? a : b; return true;
    case IR_MAX: *out = a > b ? a : b; return true;
    case IR_FLOORDIV:
      if (b == 0) return false;
      *out = a / b - ((a % b != 0) && ((a < 0) != (b < 0)));
      return true;
    default:
      if (b == 0) return false;
      *out = a % b;
      if (*out != 0 && ((*out < 0) != (b < 0))) *out += b;
      return true;
    }
  default:
    return false;
  }
}

/* Does e divide or take a remainder of an expression that uses one of the
 * given (inner) loop vars? Divisions of outer loop vars alone are harmless:
 * the outer loops are fixed while the inner ones run. */
typedef struct divmod_ctx {
  const ir_stmt *const *inner;
  int ninner;
  bool found;
} divmod_ctx;

static bool divmod_cb(void *ctx, const ir_expr *e) {
  divmod_ctx *c = ctx;
  if (c->found) return false;
  if (e->kind == IR_FLOORDIV || e->kind == IR_FLOORMOD || e->kind == IR_DIV) {
    for (int i = 0; i < c->ninner; i++)
      if (ir_expr_uses_var(e, c->inner[i]->u.loop.var)) c->found = true;
  }
  return !c->found;
}

static bool has_inner_divmod(const ir_expr *e, const ir_stmt *const *inner, int ninner) {
  divmod_ctx c = {inner, ninner, false};
  ir_visitor v = {.expr = divmod_cb, .ctx = &c};
  ir_visit_expr(&v, e);
  return c.found;
}

static int cmp_u64(const void *x, const void *y) {
  uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
  return a < b ? -1 : a > b;
}

/* ---- a proof without enumeration, for the common tiled bindings ----
 * A binding that is affine in the inner loops, c0 + sum c_v * v (outer
 * loop vars and other inner-loop-free terms fold into c0), with every inner
 * loop of extent > 1 in exactly one binding, is injective if within each
 * binding the terms form a mixed radix: ordered by |c|, each |c_k| exceeds
 * sum_{l<k} |c_l| (extent_l - 1) (i = i0*32 + i1*8 + i2 after tiling). Then
 * the enumeration (up to ENUM_LIMIT points per call, repeated for every
 * replayed candidate by the search's RewriteReductionBlock) is not needed. */
#define AFF_MAX 128

static bool affine_terms(const ir_expr *e, const ir_stmt *const *loops, int n, int64_t scale,
                         int64_t *coef) {
  bool uses = false;
  for (int i = 0; i < n && !uses; i++) uses = ir_expr_uses_var(e, loops[i]->u.loop.var);
  if (!uses) return true; /* a constant offset within the inner space */
  switch (e->kind) {
  case IR_VAR:
    for (int i = 0; i < n; i++)
      if (loops[i]->u.loop.var == e->u.var) {
        coef[i] += scale;
        return true;
      }
    return false;
  case IR_ADD:
    return affine_terms(e->u.bin.a, loops, n, scale, coef) && affine_terms(e->u.bin.b, loops, n, scale, coef);
  case IR_SUB:
    return affine_terms(e->u.bin.a, loops, n, scale, coef) && affine_terms(e->u.bin.b, loops, n, -scale, coef);
  case IR_MUL: {
    int64_t k;
    if (ir_as_int(e->u.bin.b, &k)) return affine_terms(e->u.bin.a, loops, n, scale * k, coef);
    if (ir_as_int(e->u.bin.a, &k)) return affine_terms(e->u.bin.b, loops, n, scale * k, coef);
    return false;
  }
  case IR_CAST:
    return e->u.cast.value->dtype.code == e->dtype.code && affine_terms(e->u.cast.value, loops, n, scale, coef);
  default:
    return false;
  }
}

static int cmp_abs_i64(const void *x, const void *y) {
  int64_t a = ((const int64_t *)x)[0], b = ((const int64_t *)y)[0];
  return a < b ? -1 : a > b;
}

/* 1: injective by the mixed-radix rule; -1: not shown (enumerate). */
static int bindings_injective_affine(const ir_stmt *const *loops, int nloops, const ir_stmt *rz) {
  const ir_block *b = rz->u.realize.block;
  if (nloops > AFF_MAX) return -1;
  int64_t ext[AFF_MAX];
  int owner[AFF_MAX];
  for (int i = 0; i < nloops; i++) {
    if (!ir_as_int(loops[i]->u.loop.extent, &ext[i]) || ext[i] <= 0) return -1;
    owner[i] = -1;
  }
  for (int j = 0; j < b->niter; j++) {
    int64_t coef[AFF_MAX] = {0};
    if (!affine_terms(rz->u.realize.iter_values[j], loops, nloops, 1, coef)) return -1;
    int64_t term[AFF_MAX][2]; /* |c|, extent */
    int nt = 0;
    for (int i = 0; i < nloops; i++) {
      if (!coef[i] || ext[i] == 1) continue;
      if (owner[i] >= 0) return -1; /* in two bindings: leave it to the enumeration */
      owner[i] = j;
      term[nt][0] = coef[i] < 0 ? -coef[i] : coef[i];
      term[nt][1] = ext[i];
      nt++;
    }
    qsort(term, (size_t)nt, sizeof term[0], cmp_abs_i64);
    double reach = 0; /* largest sum of the smaller terms */
    for (int k = 0; k < nt; k++) {
      if ((double)term[k][0] <= reach) return -1;
      reach += (double)term[k][0] * (double)(term[k][1] - 1);
    }
  }
  for (int i = 0; i < nloops; i++)
    if (ext[i] > 1 && owner[i] < 0) return -1; /* a loop no binding uses revisits points */
  return 1;
}

/* loops: the FORs at and below `loop`; others (outer loops) are fixed at
 * their min. Returns 1 injective, 0 not, -1 unknown (too large, symbolic,
 * or bindings the evaluator does not handle). */
static int bindings_injective(const ir_stmt *const *loops, int nloops, const ir_stmt *outer_all[],
                              int nouter, const ir_stmt *rz) {
  const ir_block *b = rz->u.realize.block;
  ir_var *vars[128];
  int64_t vals[128], ext[128];
  int nv = 0;
  double space = 1;
  for (int i = 0; i < nouter && nv < 64; i++) {
    int64_t mn;
    if (!ir_as_int(outer_all[i]->u.loop.min, &mn)) return -1;
    vars[nv] = outer_all[i]->u.loop.var;
    vals[nv++] = mn;
  }
  int first = nv;
  for (int i = 0; i < nloops && nv < 128; i++) {
    int64_t mn, e;
    if (!ir_as_int(loops[i]->u.loop.min, &mn) || !ir_as_int(loops[i]->u.loop.extent, &e) || e <= 0) return -1;
    vars[nv] = loops[i]->u.loop.var;
    vals[nv] = mn;
    ext[nv] = e;
    space *= (double)e;
    nv++;
  }
  if (space > ENUM_LIMIT) return -1;
  size_t total = (size_t)space, m = 0;
  uint64_t *h = ts_malloc(sizeof *h * (total ? total : 1));
  if (!h) return -1;
  int64_t base[128];
  memcpy(base, vals, sizeof(int64_t) * (size_t)nv);
  int res = 1;
  for (size_t it = 0; it < total && res == 1; it++) {
    size_t r = it;
    for (int i = nv - 1; i >= first; i--) {
      vals[i] = base[i] + (int64_t)(r % (size_t)ext[i]);
      r /= (size_t)ext[i];
    }
    int64_t pred = 1;
    if (!eval_int(rz->u.realize.predicate, vars, vals, nv, &pred)) {
      int64_t t;
      if (!ir_as_int(rz->u.realize.predicate, &t)) { res = -1; break; }
      pred = t;
    }
    if (!pred) continue;
    uint64_t hv = 1469598103934665603ull;
    for (int j = 0; j < b->niter; j++) {
      int64_t x;
      if (!eval_int(rz->u.realize.iter_values[j], vars, vals, nv, &x)) { res = -1; break; }
      hv = (hv ^ (uint64_t)x) * 1099511628211ull;
      hv ^= hv >> 29;
    }
    h[m++] = hv;
  }
  if (res == 1) {
    qsort(h, m, sizeof *h, cmp_u64);
    for (size_t i = 1; i < m; i++)
      if (h[i] == h[i - 1]) { res = 0; break; }
  }
  ts_free(h);
  return res;
}

/* decompose_reduction's checks on the block: a reduction (an init, S/R iter
 * vars, no reduce var indexing an output, affine bindings) whose outputs no
 * other block of its scope writes. */
static ts_status check_reduction_block(const sch_path *pp, int sc, const ir_stmt *rz, const ir_block *blk,
                                       const char *P, ts_diag *d) {
  /* the block is a reduction */
  if (!blk->init)
    return ts_diag_set(d, TS_ESCHEDULE, "%s: block '%s' is not a reduction (it has no init)", P,
                       blk->name);
  for (int i = 0; i < blk->niter; i++)
    if (blk->iters[i].type != IR_ITER_S && blk->iters[i].type != IR_ITER_R)
      return ts_diag_set(d, TS_ESCHEDULE,
                         "%s: block '%s' has iter var '%s' that is neither spatial nor reduce", P,
                         blk->name, blk->iters[i].var->name);
  for (int w = 0; w < blk->nwrites; w++)
    for (int k = 0; k < blk->writes[w].ndim; k++)
      for (int i = 0; i < blk->niter; i++)
        if (blk->iters[i].type == IR_ITER_R &&
            (ir_expr_uses_var(blk->writes[w].ranges[k].min, blk->iters[i].var) ||
             ir_expr_uses_var(blk->writes[w].ranges[k].extent, blk->iters[i].var)))
          return ts_diag_set(d, TS_ESCHEDULE,
                             "%s: block '%s' is not a reduction: reduce var '%s' indexes its "
                             "output '%s'",
                             P, blk->name, blk->iters[i].var->name, blk->writes[w].buf->name);
  for (int i = 0; i < blk->niter; i++)
    if (!sch_quasi_affine(rz->u.realize.iter_values[i]))
      return ts_diag_set(d, TS_ESCHEDULE,
                         "%s: block '%s' has a binding for '%s' that is not affine in its loops", P,
                         blk->name, blk->iters[i].var->name);
  {
    ts_vec kids;
    ts_vec_init(&kids);
    if (sch_child_realizes(pp->node[sc]->u.realize.block->body, &kids)) {
      ts_vec_fini(&kids);
      return ts_diag_set(d, TS_ENOMEM, "out of memory");
    }
    const char *other = NULL, *what = NULL;
    for (size_t i = 0; i < kids.len && !other; i++) {
      const ir_block *o = ((ir_stmt *)kids.items[i])->u.realize.block;
      if (o == blk) continue;
      for (int w = 0; w < blk->nwrites && !other; w++)
        if (sch_block_writes(o, blk->writes[w].buf)) {
          other = o->name;
          what = blk->writes[w].buf->name;
        }
    }
    ts_vec_fini(&kids);
    if (other)
      return ts_diag_set(d, TS_ESCHEDULE,
                         "%s: block '%s' is not a reduction: '%s' also writes its output '%s'", P,
                         blk->name, other, what);
  }
  return TS_OK;
}

/* decompose_reduction's checks on the loop l: an ancestor of the block in its
 * scope (its path index in *kout), at or above every reduction loop, every
 * non-unit loop below it feeding a binding, and the loops at and below it
 * visiting each point of the block once. */
static ts_status check_decompose_loop(const sch_path *pp, int sc, const ir_stmt *rz, const ir_block *blk,
                                      sch_loop l, int *kout, const char *P, ts_diag *d) {
  /* the loop is an ancestor of the block within its scope */
  int k = -1;
  for (int i = sc + 1; i < pp->n - 1; i++)
    if (pp->node[i]->kind == IR_FOR && pp->node[i]->u.loop.var == l.var) k = i;
  if (k < 0)
    return ts_diag_set(d, TS_ESCHEDULE, "%s: loop '%s' is not an ancestor of block '%s'", P,
                       l.var->name, blk->name);
  *kout = k;
  /* no loop above it feeds a reduce binding (the loop itself may be the
   * outermost reduction loop: the init then goes right before it) */
  for (int i = sc + 1; i < k; i++) {
    if (pp->node[i]->kind != IR_FOR) continue;
    const ir_var *v = pp->node[i]->u.loop.var;
    for (int j = 0; j < blk->niter; j++)
      if (blk->iters[j].type == IR_ITER_R && ir_expr_uses_var(rz->u.realize.iter_values[j], v))
        return ts_diag_set(d, TS_ESCHEDULE,
                           "%s: reduce var '%s' of block '%s' uses loop '%s', which is above "
                           "loop '%s'; decompose at or above the outermost reduction loop",
                           P, blk->iters[j].var->name, blk->name, v->name, l.var->name);
  }
  /* every non-unit loop below it feeds some binding */
  for (int i = k; i < pp->n - 1; i++) {
    if (pp->node[i]->kind != IR_FOR) continue;
    const ir_stmt *lo = pp->node[i];
    int64_t e;
    if (ir_as_int(lo->u.loop.extent, &e) && e == 1) continue;
    bool used = false;
    for (int j = 0; j < blk->niter && !used; j++)
      used = ir_expr_uses_var(rz->u.realize.iter_values[j], lo->u.loop.var);
    if (!used)
      return ts_diag_set(d, TS_ESCHEDULE,
                         "%s: loop '%s' below '%s' feeds no binding of block '%s', so the block "
                         "would be reduced more than once per init",
                         P, lo->u.loop.var->name, l.var->name, blk->name);
  }

  {
    const ir_stmt *inner[128], *outer[128];
    int ni = 0, no = 0;
    for (int i = sc + 1; i < pp->n - 1; i++) {
      if (pp->node[i]->kind != IR_FOR) continue;
      if (i < k && no < 128) outer[no++] = pp->node[i];
      else if (i >= k && ni < 128) inner[ni++] = pp->node[i];
    }
    int inj = bindings_injective_affine(inner, ni, rz);
    if (inj < 0) inj = bindings_injective(inner, ni, outer, no, rz);
    if (inj == 0)
      return ts_diag_set(d, TS_ESCHEDULE,
                         "%s: the loops at and below '%s' visit some point of block '%s' more than "
                         "once (e.g. a fused loop revisiting a row), so one init before '%s' would "
                         "accumulate it repeatedly",
                         P, l.var->name, blk->name, l.var->name);
    if (inj < 0)
      for (int i = 0; i < blk->niter; i++)
        if (has_inner_divmod(rz->u.realize.iter_values[i], inner, ni))
          return ts_diag_set(d, TS_ESCHEDULE,
                             "%s: cannot show that the loops at and below '%s' visit each point of "
                             "block '%s' once (binding of '%s' uses // or %% over a large or "
                             "symbolic space)",
                             P, l.var->name, blk->name, blk->iters[i].var->name);
  }
  return TS_OK;
}

ts_status sch_decompose_reduction(sch_state *s, sch_block b, sch_loop l, sch_block *out,
                                  ts_diag *d) {
  const char *P = "decompose_reduction";
  ts_arena *a = &s->arena;
  sch_path p, lp;
  ts_status st = sch_find_block(s, b.name, &p, P, d);
  if (st) return st;
  if (l.mark != SCH_LOC_LOOP || !l.var)
    return ts_diag_set(d, TS_ESCHEDULE, "%s: needs a loop above block '%s', not a location mark",
                       P, b.name);
  st = sch_find_loop(s, l.var, &lp, P, d);
  if (st) return st;
  ir_stmt *rz = p.node[p.n - 1];
  const ir_block *blk = rz->u.realize.block;
  int sc = sch_path_scope(&p, p.n - 1);
  if (sc < 0) return ts_diag_set(d, TS_ESCHEDULE, "%s: '%s' is the root block", P, blk->name);

  if ((st = check_reduction_block(&p, sc, rz, blk, P, d))) return st;
  int k = -1;
  if ((st = check_decompose_loop(&p, sc, rz, blk, l, &k, P, d))) return st;

  /* chosen loops (S bindings use them) and dropped ones, from k down */
  int nl = p.n - 1 - k;
  ir_var **dropped = TS_ANEWN(a, ir_var *, nl), **kept_old = TS_ANEWN(a, ir_var *, nl);
  const ir_stmt **kept = TS_ANEWN(a, const ir_stmt *, nl);
  int ns = 0;
  for (int i = 0; i < blk->niter; i++) ns += blk->iters[i].type == IR_ITER_S;
  ir_block *ib = ir_block_new(a, "");
  ir_expr **ivals = TS_ANEWN(a, ir_expr *, ns ? ns : 1);
  ir_iter_var *iters = TS_ANEWN(a, ir_iter_var, ns ? ns : 1);
  if (!dropped || !kept_old || !kept || !ib || !ivals || !iters)
    return ts_diag_set(d, TS_ENOMEM, "out of memory");
  int nd = 0, nk = 0;
  for (int i = k; i < p.n - 1; i++) {
    if (p.node[i]->kind != IR_FOR) continue;
    ir_var *v = p.node[i]->u.loop.var;
    bool used = false;
    for (int j = 0; j < blk->niter && !used; j++)
      used = blk->iters[j].type == IR_ITER_S && ir_expr_uses_var(rz->u.realize.iter_values[j], v);
    if (used) {
      kept[nk] = p.node[i];
      kept_old[nk++] = v;
    } else {
      dropped[nd++] = v;
    }
  }
  /* predicate clauses over dropped loops go; a clause that mixes them with
   * other loops cannot be dropped safely */
  ts_vec cl;
  ts_vec_init(&cl);
  if (conjuncts(rz->u.realize.predicate, &cl)) {
    ts_vec_fini(&cl);
    return ts_diag_set(d, TS_ENOMEM, "out of memory");
  }
  ir_expr *pred = ir_bool(a, true);
  for (size_t i = 0; i < cl.len && pred; i++) {
    ir_expr *c = cl.items[i];
    if (!uses_any(c, dropped, nd)) {
      pred = ir_and(a, pred, c);
      continue;
    }
    bool only_dropped = true;
    for (int j2 = sc + 1; j2 < p.n - 1; j2++) {
      if (p.node[j2]->kind != IR_FOR || !ir_expr_uses_var(c, p.node[j2]->u.loop.var)) continue;
      bool is_dropped = false;
      for (int q = 0; q < nd; q++) is_dropped |= dropped[q] == p.node[j2]->u.loop.var;
      only_dropped &= is_dropped;
    }
    if (!only_dropped) {
      ts_vec_fini(&cl);
      return ts_diag_set(d, TS_ESCHEDULE,
                         "%s: the predicate of block '%s' ties a loop the init drops to a loop it "
                         "keeps",
                         P, blk->name);
    }
  }
  ts_vec_fini(&cl);
  if (!pred) return ts_diag_set(d, TS_ENOMEM, "out of memory");

  /* ---- build the init nest ---- */
  ir_var_map ivmap, lmap;
  ir_var_map_init(&ivmap);
  ir_var_map_init(&lmap);
  st = TS_OK;
  int j = 0;
  for (int i = 0; i < blk->niter && !st; i++) {
    const ir_iter_var *it = &blk->iters[i];
    if (it->type != IR_ITER_S) continue;
    char nm[256];
    snprintf(nm, sizeof nm, "%s_init", it->var->name);
    ir_var *nv = ir_var_new(a, nm, it->var->dtype);
    ir_expr *ref = nv ? ir_var_ref(a, nv) : NULL;
    if (!ref || ir_var_map_put(&ivmap, it->var, ref)) st = TS_ENOMEM;
    iters[j] = (ir_iter_var){nv, it->dom, IR_ITER_S};
    ivals[j++] = rz->u.realize.iter_values[i];
  }
  ir_var **newl = TS_ANEWN(a, ir_var *, nk ? nk : 1);
  if (!newl) st = TS_ENOMEM;
  for (int i = 0; i < nk && !st; i++) {
    char nm[256];
    snprintf(nm, sizeof nm, "%s_init", kept_old[i]->name);
    newl[i] = ir_var_new(a, nm, kept_old[i]->dtype);
    ir_expr *ref = newl[i] ? ir_var_ref(a, newl[i]) : NULL;
    if (!ref || ir_var_map_put(&lmap, kept_old[i], ref)) st = TS_ENOMEM;
  }
  const char *iname = NULL;
  ir_stmt *nest = NULL;
  if (!st) {
    char base[256];
    snprintf(base, sizeof base, "%s_init", blk->name);
    iname = sch_fresh_block_name(s, base);
    ib->name = iname;
    ib->niter = ns;
    ib->iters = iters;
    ib->nannot = blk->nannot;
    ib->annots = blk->annots;
    ib->body = ir_subst_stmt(a, blk->init, &ivmap);
    for (int i = 0; i < ns && !st; i++)
      if (!(ivals[i] = ir_subst_expr(a, ivals[i], &lmap))) st = TS_ENOMEM;
    ir_expr *ipred = st ? NULL : ir_subst_expr(a, pred, &lmap);
    if (!iname || !ib->body || !ipred) st = TS_ENOMEM;
    if (!st) {
      ir_analyzer an;
      ir_analyzer_init(&an, a);
      if (sch_bind_path_loops(&an, &p, p.n - 1)) st = TS_ENOMEM;
      for (int i = 0; i < nk && !st; i++)
        if (ir_analyzer_bind(&an, newl[i], kept[i]->u.loop.min, kept[i]->u.loop.extent))
          st = TS_ENOMEM;
      if (!st) ipred = ir_simplify(&an, ipred);
      ir_analyzer_fini(&an);
      if (!ipred) st = TS_ENOMEM;
      if (!st) nest = ir_realize(a, ib, ivals, ipred);
      if (!nest) st = TS_ENOMEM;
    }
    /* innermost kept loop first; loop bounds may use outer kept loops */
    for (int i = nk - 1; i >= 0 && !st; i--) {
      const ir_stmt *ol = kept[i];
      ir_expr *mn = ir_subst_expr(a, ol->u.loop.min, &lmap);
      ir_expr *ex = ir_subst_expr(a, ol->u.loop.extent, &lmap);
      ir_stmt *f = mn && ex ? ir_stmt_clone(a, ol) : NULL;
      if (!f) {
        st = TS_ENOMEM;
        break;
      }
      f->u.loop.var = newl[i];
      f->u.loop.min = mn;
      f->u.loop.extent = ex;
      f->u.loop.body = nest;
      f->u.loop.nannot = 0; /* as TVM: kind and thread, not annotations */
      f->u.loop.annots = NULL;
      nest = f;
    }
  }
  ir_var_map_fini(&ivmap);
  ir_var_map_fini(&lmap);
  if (st) return ts_diag_set(d, TS_ENOMEM, "out of memory building the init block");
  st = ir_block_detect_regions(a, ib, d);
  if (st) return st;

  /* ---- the update block: no init; its writes join its reads ---- */
  ir_block *ub = ir_block_clone(a, blk);
  ir_stmt *nrz = ir_stmt_clone(a, rz);
  ir_region *reads = TS_ANEWN(a, ir_region, blk->nreads + blk->nwrites + 1);
  if (!ub || !nrz || !reads) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  int nr = 0;
  for (int i = 0; i < blk->nwrites; i++)
    if (!sch_block_reads(blk, blk->writes[i].buf)) reads[nr++] = blk->writes[i];
  for (int i = 0; i < blk->nreads; i++) reads[nr++] = blk->reads[i];
  ub->init = NULL;
  ub->reads = reads;
  ub->nreads = nr;
  nrz->u.realize.block = ub;

  /* ---- install: the new update realize, then the init nest before loop ---- */
  ir_stmt *saved = s->func->body;
  st = sch_replace(s, &p, p.n - 1, nrz, d);
  if (!st) st = sch_find_loop(s, l.var, &lp, P, d);
  if (!st) st = sch_insert_before(s, &lp, lp.n - 1, nest, lp.node[lp.n - 1], d);
  if (st) {
    s->func->body = saved; /* nodes are immutable: the old tree is intact */
    return st;
  }
  if (out) out->name = iname;
  return sch_finish(s, TS_OK, d);
}
