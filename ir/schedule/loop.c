/* loop.c — the loop transformations of the schedule (TVM's
 * loop_transformation.cc, for_kind.cc and annotate): split, fuse, reorder,
 * parallel / vectorize / bind / unroll, annotations and unit loops. None
 * touches a block body; each checks everything, then installs the new nest
 * with one sch_replace, so a refusal changes nothing. docs/IR.md
 * ("Schedules", "Notes by file"). */
#include <stdio.h>
#include <string.h>

#include "sch_int.h"

#define MAX_SPLIT 16
#define MAX_FUSE 16
#define MAX_REORDER 64

/* ---- shared helpers -------------------------------------------------------- */

/* Finds loop l for primitive prim: the path ends at its FOR. */
static ts_status get_loop(sch_state *s, sch_loop l, const char *prim, sch_path *p, ts_diag *d) {
  if (l.mark != SCH_LOC_LOOP)
    return ts_diag_set(d, TS_ESCHEDULE, "%s: expected a loop, got the %s mark", prim,
                       l.mark == SCH_LOC_ROOT ? "root" : "inline");
  return sch_find_loop(s, l.var, p, prim, d);
}

static ts_status oom(ts_diag *d) { return ts_diag_set(d, TS_ENOMEM, "out of memory in a loop transformation"); }

/* Names already taken by params, syms, loop vars and iter vars, so new loops
 * get names the printer does not have to suffix. */
typedef struct name_set {
  ts_vec names;
  bool oom;
} name_set;

static void names_push(name_set *ns, const char *n) {
  if (ts_vec_push(&ns->names, (void *)n)) ns->oom = true;
}

static bool names_stmt_cb(void *ctx, const ir_stmt *st) {
  name_set *ns = ctx;
  if (st->kind == IR_FOR) names_push(ns, st->u.loop.var->name);
  if (st->kind == IR_BLOCK_REALIZE) {
    const ir_block *b = st->u.realize.block;
    for (int i = 0; i < b->niter; i++) names_push(ns, b->iters[i].var->name);
  }
  if (st->kind == IR_LET) names_push(ns, st->u.let.var->name);
  return true;
}

static void names_init(name_set *ns, sch_state *s) {
  ts_vec_init(&ns->names);
  ns->oom = false;
  const ir_func *f = sch_func(s);
  for (int i = 0; i < f->nparams; i++) names_push(ns, f->params[i]->name);
  for (int i = 0; i < f->nsyms; i++) names_push(ns, f->syms[i]->name);
  ir_visitor v = {.stmt = names_stmt_cb, .ctx = ns};
  ir_visit_stmt(&v, f->body);
}

static bool names_has(const name_set *ns, const char *n) {
  for (size_t i = 0; i < ns->names.len; i++)
    if (!strcmp(ns->names.items[i], n)) return true;
  return false;
}

/* A fresh name: base, else base_1, base_2 ... (arena string, remembered). */
static const char *names_take(name_set *ns, ts_arena *a, const char *base) {
  char buf[512];
  snprintf(buf, sizeof buf, "%s", base);
  for (int i = 1; names_has(ns, buf); i++) snprintf(buf, sizeof buf, "%s_%d", base, i);
  const char *r = ts_arena_strdup(a, buf);
  if (r) names_push(ns, r);
  return r;
}

static ir_var *fresh_loop_var(sch_state *s, name_set *ns, const char *base, ir_dtype t) {
  const char *n = names_take(ns, sch_arena(s), base);
  return n ? ir_var_new(sch_arena(s), n, t) : NULL;
}


static const char *iter_type_name(ir_iter_type t) {
  return t == IR_ITER_S ? "spatial" : t == IR_ITER_R ? "reduction" : "opaque";
}

/* Iterations of the loops above the blocks in rz must not talk to each
 * other through buffers, or reordering / parallelizing them changes results.
 * The cover of a consumer by an earlier producer under the same loops is
 * compute_at's invariant (it places producers so that each iteration
 * computes what that iteration reads); what can be checked cheaply here, and
 * is refused, is the rest: a block reading a buffer at other points than it
 * writes it (a scan), and a block reading a buffer that a later block under
 * the same loops writes (the read sees the previous iteration's value). */
static ts_status check_iterations_independent(ir_analyzer *an, const ts_vec *rz, const char *prim,
                                              const char *loop, ts_diag *d) {
  for (size_t i = 0; i < rz->len; i++) {
    const ir_block *b = ((const ir_stmt *)rz->items[i])->u.realize.block;
    for (int r = 0; r < b->nreads; r++) {
      const ir_region *rd = &b->reads[r];
      for (int w = 0; w < b->nwrites; w++) {
        const ir_region *wr = &b->writes[w];
        if (wr->buf != rd->buf) continue;
        bool same = wr->ndim == rd->ndim;
        for (int k = 0; same && k < rd->ndim; k++)
          same = ir_can_prove_equal(an, rd->ranges[k].min, wr->ranges[k].min) &&
                 ir_can_prove_equal(an, rd->ranges[k].extent, wr->ranges[k].extent);
        if (!same)
          return ts_diag_set(d, TS_ESCHEDULE,
                             "%s: loop '%s': block '%s' reads '%s' at other points than it writes "
                             "it, so its iterations depend on each other",
                             prim, loop, b->name, rd->buf->name);
      }
      for (size_t j = i + 1; j < rz->len; j++) {
        const ir_block *later = ((const ir_stmt *)rz->items[j])->u.realize.block;
        if (later != b && sch_block_writes(later, rd->buf))
          return ts_diag_set(d, TS_ESCHEDULE,
                             "%s: loop '%s': block '%s' reads '%s' before block '%s' writes it "
                             "under the same loop (a loop-carried dependence)",
                             prim, loop, b->name, rd->buf->name, later->name);
      }
    }
  }
  return TS_OK;
}

/* ---- rewriting the bindings below a loop ------------------------------------
 * Substitutes map in every loop bound, binding and predicate between the
 * rewritten loop and the realizes directly below it (not inside their
 * blocks: a block body uses only its own iter vars), simplifies what changed
 * under the loop ranges, and ANDs pred (when not NULL) into those realizes'
 * predicates. */
typedef struct rw_ctx {
  sch_state *s;
  ir_analyzer *an;
  const ir_var_map *map;
  ir_expr *pred;
  const char *prim, *loop; /* for messages */
  ts_diag *d;
  ts_status st;
} rw_ctx;

static ir_expr *rw_expr(ir_mutator *m, ir_expr *e) {
  rw_ctx *c = m->ctx;
  ir_expr *n = ir_subst_expr(sch_arena(c->s), e, c->map);
  if (n && n != e) n = ir_simplify(c->an, n);
  if (!n) {
    c->st = oom(c->d);
    ir_mutator_fail(m);
  }
  return n;
}

static ir_stmt *rw_fail(ir_mutator *m, ts_status st) {
  ((rw_ctx *)m->ctx)->st = st;
  ir_mutator_fail(m);
  return NULL;
}

/* A realize: its bindings and predicate only; a loop: its range bound in
 * the analyzer for the body; anything else outside a block: plain
 * substitution (it cannot carry a predicate). */
static ir_stmt *rw_stmt(ir_mutator *m, ir_stmt *st) {
  rw_ctx *c = m->ctx;
  ts_arena *a = sch_arena(c->s);
  switch (st->kind) {
  case IR_FOR: {
    ir_expr *mn = ir_mutate_expr(m, st->u.loop.min), *ex = ir_mutate_expr(m, st->u.loop.extent);
    int mark = c->an->n;
    if (m->failed) return NULL;
    if (ir_analyzer_bind(c->an, st->u.loop.var, mn, ex)) return rw_fail(m, oom(c->d));
    ir_stmt *n = ir_mutate_stmt_children(m, st);
    ir_analyzer_truncate(c->an, mark);
    return n;
  }
  case IR_BLOCK_REALIZE: {
    bool changed = false;
    ir_expr **vals = ir_mutate_exprs(m, st->u.realize.block->niter, st->u.realize.iter_values, &changed);
    ir_expr *pred = st->u.realize.predicate;
    ir_expr *np = ir_subst_expr(a, pred, c->map);
    if (np && c->pred) np = ir_and(a, np, c->pred);
    if (np && np != pred) np = ir_simplify(c->an, np);
    if (!np) return rw_fail(m, oom(c->d));
    if (m->failed || (!changed && np == pred)) return st;
    ir_stmt *n = ir_stmt_clone(a, st);
    if (!n) return rw_fail(m, oom(c->d));
    n->u.realize.iter_values = vals;
    n->u.realize.predicate = np;
    return n;
  }
  case IR_SEQ:
  case IR_IF:
  case IR_LET:
  case IR_ALLOCATE:
    return NULL; /* the default walk */
  default: {
    if (c->pred)
      return rw_fail(m, ts_diag_set(c->d, TS_ESCHEDULE,
                                    "%s: loop '%s' holds a statement outside any block, which the "
                                    "predicate for a non-divisible split could not guard",
                                    c->prim, c->loop));
    ir_stmt *n = ir_subst_stmt(a, st, c->map);
    return n ? n : rw_fail(m, oom(c->d));
  }
  }
}

static ir_stmt *rw_body(rw_ctx *c, ir_stmt *body) {
  ir_mutator m;
  ir_mutator_init(&m, sch_arena(c->s));
  m.ctx = c;
  m.pre_expr = rw_expr;
  m.pre_stmt = rw_stmt;
  ir_stmt *n = ir_mutate_stmt(&m, body);
  if (m.failed && !c->st) c->st = oom(c->d);
  ir_mutator_fini(&m);
  return n;
}

/* Does any statement between st and the realizes below it (not inside
 * blocks) need a guard it cannot get? Checked before rewriting so refusals
 * happen before anything is built. */
static bool unblocked_cb(void *ctx, const ir_stmt *st) {
  bool *found = ctx;
  switch (st->kind) {
  case IR_BLOCK_REALIZE:
    return false;
  case IR_FOR:
  case IR_SEQ:
  case IR_IF:
  case IR_LET:
  case IR_ALLOCATE:
    return !*found;
  default:
    *found = true;
    return false;
  }
}

static bool has_unblocked_leaf(const ir_stmt *st) {
  bool found = false;
  ir_visitor v = {.stmt = unblocked_cb, .ctx = &found};
  ir_visit_stmt(&v, st);
  return found;
}

/* Checks shared by split and fuse: plain loop, min provably 0. */
static ts_status check_plain_loop(ir_analyzer *an, const ir_stmt *loop, const char *prim, ts_diag *d) {
  const char *name = loop->u.loop.var->name;
  if (loop->u.loop.kind == IR_FOR_THREAD_BINDING)
    return ts_diag_set(d, TS_ESCHEDULE, "%s: loop '%s' is bound to thread '%s'", prim, name,
                       loop->u.loop.thread ? loop->u.loop.thread : "?");
  if (loop->u.loop.nannot > 0)
    return ts_diag_set(d, TS_ESCHEDULE, "%s: loop '%s' has annotations (first: '%s')", prim, name,
                       loop->u.loop.annots[0].key);
  ir_expr *zero = ir_int(an->arena, loop->u.loop.min->dtype, 0);
  if (!zero) return oom(d);
  if (!ir_can_prove_equal(an, loop->u.loop.min, zero))
    return ts_diag_set(d, TS_ESCHEDULE, "%s: loop '%s' does not provably start at 0", prim, name);
  return TS_OK;
}

/* ---- split ----------------------------------------------------------------- */

ts_status sch_split(sch_state *s, sch_loop l, int n, const int64_t *factors, sch_loop *out,
                    ts_diag *d) {
  sch_path p;
  ts_status st = get_loop(s, l, "split", &p, d);
  if (st) return st;
  ir_stmt *loop = p.node[p.n - 1];
  ir_var *v = loop->u.loop.var;
  if (n < 1 || n > MAX_SPLIT || !factors)
    return ts_diag_set(d, TS_ESCHEDULE, "split: loop '%s': %d factors given; 1 to %d are allowed",
                       v->name, n, MAX_SPLIT);
  int infer = -1;
  int64_t prod = 1;
  for (int k = 0; k < n; k++) {
    if (factors[k] == -1) {
      if (infer >= 0)
        return ts_diag_set(d, TS_ESCHEDULE,
                           "split: loop '%s': factors %d and %d are both -1; at most one factor "
                           "can be inferred",
                           v->name, infer, k);
      infer = k;
    } else if (factors[k] < 1) {
      return ts_diag_set(d, TS_ESCHEDULE,
                         "split: loop '%s': factor %d is %lld; factors must be positive (or -1 "
                         "to infer one)",
                         v->name, k, (long long)factors[k]);
    } else if (__builtin_mul_overflow(prod, factors[k], &prod)) {
      return ts_diag_set(d, TS_ESCHEDULE, "split: loop '%s': the factors' product overflows", v->name);
    }
  }

  ts_arena *a = sch_arena(s);
  ir_analyzer an;
  ir_analyzer_init(&an, a);
  name_set ns;
  names_init(&ns, s);
  if ((st = sch_bind_path_loops(&an, &p, p.n - 1))) goto fail_oom;
  if ((st = check_plain_loop(&an, loop, "split", d))) goto done;

  ir_dtype t = v->dtype;
  ir_expr *extent = loop->u.loop.extent;
  ir_expr *ext[MAX_SPLIT];
  for (int k = 0; k < n; k++) ext[k] = factors[k] == -1 ? NULL : ir_int(a, t, factors[k]);
  if (infer >= 0) {
    int64_t e;
    if (ir_as_int(extent, &e)) {
      ext[infer] = ir_int(a, t, e <= 0 ? 0 : (e + prod - 1) / prod);
    } else {
      /* symbolic: ceildiv(extent, prod), the predicate below keeps it exact */
      ext[infer] = ir_simplify(&an, ir_floordiv(a, ir_add(a, extent, ir_int(a, t, prod - 1)),
                                                ir_int(a, t, prod)));
    }
  } else {
    ir_expr *ge = ir_binop(a, IR_LE, extent, ir_int(a, t, prod));
    if (!ge) goto fail_oom;
    if (!ir_can_prove(&an, ge)) {
      int64_t e;
      if (ir_as_int(extent, &e))
        st = ts_diag_set(d, TS_ESCHEDULE,
                         "split: loop '%s': the factors' product %lld is less than the extent %lld",
                         v->name, (long long)prod, (long long)e);
      else
        st = ts_diag_set(d, TS_ESCHEDULE,
                         "split: loop '%s': the factors' product %lld is not provably at least "
                         "its symbolic extent (use -1 for one factor)",
                         v->name, (long long)prod);
      goto done;
    }
  }
  for (int k = 0; k < n; k++)
    if (!ext[k]) goto fail_oom;

  /* new loops i_0 ... i_{n-1}; v = ((i_0*f1 + i_1)*f2 + i_2)... */
  ir_var *nv[MAX_SPLIT];
  ir_expr *sub = NULL;
  for (int k = 0; k < n; k++) {
    char base[256];
    snprintf(base, sizeof base, "%s_%d", v->name, k);
    nv[k] = fresh_loop_var(s, &ns, base, t);
    if (!nv[k]) goto fail_oom;
    if (ir_analyzer_bind(&an, nv[k], ir_int(a, t, 0), ext[k])) goto fail_oom;
    ir_expr *ref = ir_var_ref(a, nv[k]);
    sub = k == 0 ? ref : ir_add(a, ir_mul(a, sub, ext[k]), ref);
    if (!sub) goto fail_oom;
  }
  ir_expr *inbound = ir_lt(a, sub, extent);
  if (!inbound) goto fail_oom;
  ir_expr *pred = ir_can_prove(&an, inbound) ? NULL : inbound;
  if (pred && has_unblocked_leaf(loop->u.loop.body)) {
    st = ts_diag_set(d, TS_ESCHEDULE,
                     "split: loop '%s' holds a statement outside any block, which the predicate "
                     "of a non-divisible split could not guard",
                     v->name);
    goto done;
  }

  ir_var_map map;
  ir_var_map_init(&map);
  if (ir_var_map_put(&map, v, sub)) {
    ir_var_map_fini(&map);
    goto fail_oom;
  }
  rw_ctx c = {s, &an, &map, pred, "split", v->name, d, TS_OK};
  ir_stmt *body = rw_body(&c, loop->u.loop.body);
  ir_var_map_fini(&map);
  if ((st = c.st)) goto done;
  for (int k = n - 1; k >= 0; k--) {
    body = ir_for(a, nv[k], ir_int(a, t, 0), ext[k], IR_FOR_SERIAL, body);
    if (!body) goto fail_oom;
  }
  if ((st = sch_replace(s, &p, p.n - 1, body, d))) goto done;
  for (int k = 0; out && k < n; k++) out[k] = (sch_loop){nv[k], SCH_LOC_LOOP};
  goto done;

fail_oom:
  st = oom(d);
done:
  ir_analyzer_fini(&an);
  ts_vec_fini(&ns.names);
  if (st) return st;
  return sch_finish(s, TS_OK, d);
}

/* ---- fuse ------------------------------------------------------------------ */

ts_status sch_fuse(sch_state *s, int n, const sch_loop *loops, sch_loop *out, ts_diag *d) {
  if (n < 1 || n > MAX_FUSE || !loops)
    return ts_diag_set(d, TS_ESCHEDULE, "fuse: %d loops given; 1 to %d are allowed", n, MAX_FUSE);
  sch_path p, q;
  ts_status st;
  for (int k = 0; k < n; k++) {
    if ((st = get_loop(s, loops[k], "fuse", k == 0 ? &p : &q, d))) return st;
    for (int j = 0; j < k; j++)
      if (loops[j].var == loops[k].var)
        return ts_diag_set(d, TS_ESCHEDULE, "fuse: loop '%s' is listed twice", loops[k].var->name);
  }
  /* a chain: loops[k] is the body (only child) of loops[k-1] */
  ir_stmt *chain[MAX_FUSE];
  chain[0] = p.node[p.n - 1];
  for (int k = 1; k < n; k++) {
    ir_stmt *body = chain[k - 1]->u.loop.body;
    if (!body || body->kind != IR_FOR || body->u.loop.var != loops[k].var)
      return ts_diag_set(d, TS_ESCHEDULE,
                         "fuse: loop '%s' is not the only child of loop '%s'; fuse takes perfectly "
                         "nested adjacent loops, outermost first",
                         loops[k].var->name, loops[k - 1].var->name);
    chain[k] = body;
  }

  ts_arena *a = sch_arena(s);
  ir_analyzer an;
  ir_analyzer_init(&an, a);
  name_set ns;
  names_init(&ns, s);
  if (sch_bind_path_loops(&an, &p, p.n - 1)) goto fail_oom;
  ir_dtype t = loops[0].var->dtype;
  for (int k = 0; k < n; k++) {
    const ir_stmt *lk = chain[k];
    if ((st = check_plain_loop(&an, lk, "fuse", d))) goto done;
    if (!ir_dtype_eq(lk->u.loop.var->dtype, t)) {
      st = ts_diag_set(d, TS_ESCHEDULE, "fuse: loops '%s' and '%s' have different dtypes",
                       loops[0].var->name, lk->u.loop.var->name);
      goto done;
    }
    for (int j = 0; j < k; j++)
      if (ir_expr_uses_var(lk->u.loop.extent, chain[j]->u.loop.var) ||
          ir_expr_uses_var(lk->u.loop.min, chain[j]->u.loop.var)) {
        st = ts_diag_set(d, TS_ESCHEDULE, "fuse: the range of loop '%s' depends on outer loop '%s'",
                         lk->u.loop.var->name, chain[j]->u.loop.var->name);
        goto done;
      }
    if (ir_analyzer_bind(&an, lk->u.loop.var, lk->u.loop.min, lk->u.loop.extent)) goto fail_oom;
  }

  /* fused extent, the new var, and each old var as a digit of it */
  ir_expr *prod = chain[0]->u.loop.extent;
  for (int k = 1; k < n; k++) prod = ir_mul(a, prod, chain[k]->u.loop.extent);
  if (!prod || !(prod = ir_simplify(&an, prod))) goto fail_oom;
  char base[512] = "";
  for (int k = 0; k < n; k++) {
    size_t used = strlen(base);
    snprintf(base + used, sizeof base - used, "%s_", loops[k].var->name);
  }
  {
    size_t used = strlen(base);
    snprintf(base + used, sizeof base - used, "fused");
  }
  ir_var *f = fresh_loop_var(s, &ns, base, t);
  if (!f) goto fail_oom;
  ir_analyzer_truncate(&an, 0);
  if (sch_bind_path_loops(&an, &p, p.n - 1)) goto fail_oom;
  if (ir_analyzer_bind(&an, f, ir_int(a, t, 0), prod)) goto fail_oom;

  ir_var_map map;
  ir_var_map_init(&map);
  ir_expr *stride = ir_int(a, t, 1);
  bool bad = !stride;
  for (int k = n - 1; k >= 0 && !bad; k--) {
    ir_expr *ek = chain[k]->u.loop.extent;
    ir_expr *one = ir_int(a, t, 1), *dig;
    if (!one) {
      bad = true;
      break;
    }
    if (ir_can_prove_equal(&an, ek, one)) {
      dig = ir_int(a, t, 0);
    } else {
      dig = ir_floordiv(a, ir_var_ref(a, f), stride);
      if (k > 0) dig = ir_floormod(a, dig, ek);
    }
    stride = ir_mul(a, stride, ek);
    if (!dig || !stride || ir_var_map_put(&map, chain[k]->u.loop.var, dig)) bad = true;
  }
  if (bad) {
    ir_var_map_fini(&map);
    goto fail_oom;
  }
  rw_ctx c = {s, &an, &map, NULL, "fuse", loops[0].var->name, d, TS_OK};
  ir_stmt *body = rw_body(&c, chain[n - 1]->u.loop.body);
  ir_var_map_fini(&map);
  if ((st = c.st)) goto done;
  ir_stmt *fl = ir_for(a, f, ir_int(a, t, 0), prod, IR_FOR_SERIAL, body);
  if (!fl) goto fail_oom;
  if ((st = sch_replace(s, &p, p.n - 1, fl, d))) goto done;
  if (out) *out = (sch_loop){f, SCH_LOC_LOOP};
  goto done;

fail_oom:
  st = oom(d);
done:
  ir_analyzer_fini(&an);
  ts_vec_fini(&ns.names);
  if (st) return st;
  return sch_finish(s, TS_OK, d);
}

/* ---- reorder --------------------------------------------------------------- */

ts_status sch_reorder(sch_state *s, int n, const sch_loop *loops, ts_diag *d) {
  if (n < 0 || n > MAX_REORDER || (n > 0 && !loops))
    return ts_diag_set(d, TS_ESCHEDULE, "reorder: %d loops given; at most %d are allowed", n,
                       MAX_REORDER);
  sch_path paths[2];
  sch_path *deep = &paths[0], *tmp = &paths[1];
  ts_status st;
  int deepest = -1;
  for (int k = 0; k < n; k++) {
    if ((st = get_loop(s, loops[k], "reorder", tmp, d))) return st;
    for (int j = 0; j < k; j++)
      if (loops[j].var == loops[k].var)
        return ts_diag_set(d, TS_ESCHEDULE, "reorder: loop '%s' is listed twice", loops[k].var->name);
    if (deepest < 0 || tmp->n > deep->n) {
      sch_path *sw = deep;
      deep = tmp;
      tmp = sw;
      deepest = k;
    }
  }
  if (n <= 1) return sch_finish(s, TS_OK, d);

  /* every listed loop on the deepest loop's path */
  int depth[MAX_REORDER];
  int top = deep->n, bottom = -1;
  for (int k = 0; k < n; k++) {
    depth[k] = -1;
    for (int i = 0; i < deep->n; i++)
      if (deep->node[i]->kind == IR_FOR && deep->node[i]->u.loop.var == loops[k].var) depth[k] = i;
    if (depth[k] < 0)
      return ts_diag_set(d, TS_ESCHEDULE,
                         "reorder: loops '%s' and '%s' are not on one path (they are in different "
                         "subtrees, e.g. above different blocks)",
                         loops[k].var->name, loops[deepest].var->name);
    if (depth[k] < top) top = depth[k];
    if (depth[k] > bottom) bottom = depth[k];
  }
  /* one scope, and a chain of single-child loops from top to bottom */
  for (int i = top; i < bottom; i++) {
    const ir_stmt *cur = deep->node[i], *next = deep->node[i + 1];
    if (cur->kind != IR_FOR) {
      if (cur->kind == IR_BLOCK_REALIZE)
        return ts_diag_set(d, TS_ESCHEDULE,
                           "reorder: loops '%s' and '%s' are in different scopes (block '%s' lies "
                           "between them)",
                           deep->node[top]->u.loop.var->name, deep->node[bottom]->u.loop.var->name,
                           cur->u.realize.block->name);
      return ts_diag_set(d, TS_ESCHEDULE,
                         "reorder: a non-loop statement lies between loops '%s' and '%s'",
                         deep->node[top]->u.loop.var->name, deep->node[bottom]->u.loop.var->name);
    }
    if (cur->u.loop.body != next || next->kind != IR_FOR)
      return ts_diag_set(d, TS_ESCHEDULE,
                         "reorder: loop '%s' has more than one child (or a non-loop child) between "
                         "loops '%s' and '%s'",
                         cur->u.loop.var->name, deep->node[top]->u.loop.var->name,
                         deep->node[bottom]->u.loop.var->name);
  }
  /* the blocks below: only S/R iter vars, quasi-affine bindings */
  ts_vec rz;
  ts_vec_init(&rz);
  if (sch_child_realizes(deep->node[bottom]->u.loop.body, &rz)) {
    ts_vec_fini(&rz);
    return oom(d);
  }
  for (size_t i = 0; i < rz.len; i++) {
    const ir_stmt *r = rz.items[i];
    const ir_block *b = r->u.realize.block;
    for (int j = 0; j < b->niter; j++) {
      if (b->iters[j].type != IR_ITER_S && b->iters[j].type != IR_ITER_R) {
        st = ts_diag_set(d, TS_ESCHEDULE, "reorder: block '%s' has %s iter var '%s' (only S/R allowed)",
                         b->name, iter_type_name(b->iters[j].type), b->iters[j].var->name);
        ts_vec_fini(&rz);
        return st;
      }
      if (!sch_quasi_affine(r->u.realize.iter_values[j])) {
        st = ts_diag_set(d, TS_ESCHEDULE,
                         "reorder: block '%s' binds iter var '%s' to a non-affine expression",
                         b->name, b->iters[j].var->name);
        ts_vec_fini(&rz);
        return st;
      }
    }
    /* A loop feeding both spatial and reduction iter vars (e.g. after fusing
     * a spatial and a reduction loop) must keep its place: reordered, the
     * first visit of an output element need not be at the start of its
     * reduction, and init would run mid-reduction. */
    if (!b->init) continue;
    for (int i2 = top; i2 <= bottom; i2++) {
      const ir_var *lv = deep->node[i2]->u.loop.var;
      bool s_use = false, r_use = false;
      for (int j = 0; j < b->niter; j++) {
        if (!ir_expr_uses_var(r->u.realize.iter_values[j], lv)) continue;
        if (b->iters[j].type == IR_ITER_R) r_use = true;
        else s_use = true;
      }
      /* A loop feeding no iter var repeats the block; moved among (or
       * below) the reduction loops, each repeat would accumulate again
       * without the init. Unit loops are harmless. */
      int64_t ext1;
      bool unit = ir_as_int(deep->node[i2]->u.loop.extent, &ext1) && ext1 == 1;
      if ((s_use && r_use) || (!s_use && !r_use && !unit)) {
        st = ts_diag_set(d, TS_ESCHEDULE, "reorder: loop '%s' %s '%s'%s", lv->name,
                         s_use ? "feeds both spatial and reduction iter vars of block"
                               : "feeds no iter var of reduction block",
                         b->name,
                         s_use ? "; reordering it would run the reduction's init mid-reduction"
                               : " (it repeats the block); reordering it could repeat the accumulation "
                                 "without the init");
        ts_vec_fini(&rz);
        return st;
      }
    }
  }
  {
    ir_analyzer an;
    ir_analyzer_init(&an, sch_arena(s));
    st = check_iterations_independent(&an, &rz, "reorder", deep->node[top]->u.loop.var->name, d);
    ir_analyzer_fini(&an);
  }
  ts_vec_fini(&rz);
  if (st) return st;

  /* the listed loops fill the listed slots (by depth) in the listed order */
  int cnt = bottom - top + 1;
  ir_stmt **order = TS_ANEWN(sch_arena(s), ir_stmt *, cnt);
  if (!order) return oom(d);
  for (int i = 0; i < cnt; i++) order[i] = deep->node[top + i];
  int slots[MAX_REORDER];
  memcpy(slots, depth, sizeof(int) * (size_t)n);
  for (int i = 1; i < n; i++) /* insertion sort of slot depths */
    for (int j = i; j > 0 && slots[j - 1] > slots[j]; j--) {
      int t = slots[j];
      slots[j] = slots[j - 1];
      slots[j - 1] = t;
    }
  for (int k = 0; k < n; k++) order[slots[k] - top] = deep->node[depth[k]];
  /* no loop's range may use a loop now nested inside it */
  for (int i = 0; i < cnt; i++)
    for (int j = i + 1; j < cnt; j++) {
      const ir_var *inner = order[j]->u.loop.var;
      if (ir_expr_uses_var(order[i]->u.loop.min, inner) || ir_expr_uses_var(order[i]->u.loop.extent, inner))
        return ts_diag_set(d, TS_ESCHEDULE,
                           "reorder: the range of loop '%s' uses loop '%s', which would be nested "
                           "inside it",
                           order[i]->u.loop.var->name, inner->name);
    }
  ir_stmt *body = deep->node[bottom]->u.loop.body;
  for (int i = cnt - 1; i >= 0; i--) {
    ir_stmt *nl = ir_stmt_clone(sch_arena(s), order[i]);
    if (!nl) return oom(d);
    nl->u.loop.body = body;
    body = nl;
  }
  if ((st = sch_replace(s, deep, top, body, d))) return st;
  return sch_finish(s, TS_OK, d);
}

/* ---- parallel / vectorize / bind / unroll ---------------------------------- */

/* Is the block dominant among the given sibling realizes (the only writer
 * of each buffer it writes)? */
static const ir_buffer *not_dominant(const ir_block *b, const ts_vec *rz) {
  for (int w = 0; w < b->nwrites; w++) {
    int writers = 0;
    for (size_t i = 0; i < rz->len; i++)
      writers += sch_block_writes(((const ir_stmt *)rz->items[i])->u.realize.block, b->writes[w].buf);
    if (writers != 1) return b->writes[w].buf;
  }
  return NULL;
}

/* Local-complete or local-reduction within the subtree of the loop; on
 * failure writes why into why. */
static bool compact_block(const ir_stmt *r, const ts_vec *rz, char *why, size_t n) {
  const ir_block *b = r->u.realize.block;
  const ir_buffer *nd = not_dominant(b, rz);
  if (nd) {
    snprintf(why, n, "block '%s' is not the only writer of '%s' under the loop", b->name, nd->name);
    return false;
  }
  for (int j = 0; j < b->niter; j++)
    if (b->iters[j].type != IR_ITER_S && (b->iters[j].type != IR_ITER_R || !b->init)) {
      snprintf(why, n,
               "block '%s' has %s iter var '%s' but is not a reduction with init (decompose the "
               "reduction after this primitive, not before)",
               b->name, iter_type_name(b->iters[j].type), b->iters[j].var->name);
      return false;
    }
  if (!b->init) {
    for (int w = 0; w < b->nwrites; w++)
      if (sch_block_reads(b, b->writes[w].buf)) {
        snprintf(why, n, "block '%s' reads and writes '%s' without being a reduction", b->name,
                 b->writes[w].buf->name);
        return false;
      }
    return true;
  }
  for (int j = 0; j < b->niter; j++)
    if (!sch_quasi_affine(r->u.realize.iter_values[j])) {
      snprintf(why, n, "reduction block '%s' binds '%s' to a non-affine expression", b->name,
               b->iters[j].var->name);
      return false;
    }
  for (int w = 0; w < b->nwrites; w++)
    for (int k = 0; k < b->writes[w].ndim; k++)
      for (int j = 0; j < b->niter; j++)
        if (b->iters[j].type == IR_ITER_R &&
            (ir_expr_uses_var(b->writes[w].ranges[k].min, b->iters[j].var) ||
             ir_expr_uses_var(b->writes[w].ranges[k].extent, b->iters[j].var))) {
          snprintf(why, n, "reduction block '%s' indexes its output '%s' with reduction var '%s'",
                   b->name, b->writes[w].buf->name, b->iters[j].var->name);
          return false;
        }
  return true;
}

typedef struct kind_ctx {
  const char *prim;
  const ir_var *v;
  bool allow_r; /* bind to threadIdx.*: cross-thread reduction */
  ts_diag *d;
  ts_status st;
} kind_ctx;

/* Every realize in the subtree (not inside init): each iter var whose
 * binding uses the loop var is S (or R when allowed) and quasi-affine. */
static void check_bindings(kind_ctx *c, const ir_stmt *st);

static bool check_bindings_cb(void *ctx, const ir_stmt *st) {
  kind_ctx *c = ctx;
  if (c->st) return false;
  if (st->kind != IR_BLOCK_REALIZE) return true;
  const ir_block *b = st->u.realize.block;
  for (int j = 0; j < b->niter && !c->st; j++) {
    const ir_expr *val = st->u.realize.iter_values[j];
    if (!ir_expr_uses_var(val, c->v)) continue;
    ir_iter_type ty = b->iters[j].type;
    if (ty != IR_ITER_S && !(ty == IR_ITER_R && c->allow_r))
      c->st = ts_diag_set(c->d, TS_ESCHEDULE,
                          "%s: loop '%s' carries %s iter var '%s' of block '%s'%s", c->prim,
                          c->v->name, iter_type_name(ty), b->iters[j].var->name, b->name,
                          ty == IR_ITER_R ? " (a reduction cannot run in parallel)" : "");
    else if (!sch_quasi_affine(val))
      c->st = ts_diag_set(c->d, TS_ESCHEDULE,
                          "%s: loop '%s': block '%s' binds '%s' to a non-affine expression",
                          c->prim, c->v->name, b->name, b->iters[j].var->name);
  }
  check_bindings(c, b->body); /* not b->init */
  return false;
}

static void check_bindings(kind_ctx *c, const ir_stmt *st) {
  ir_visitor v = {.stmt = check_bindings_cb, .ctx = c};
  ir_visit_stmt(&v, st);
}

static const char *const thread_tags[] = {
    "blockIdx.x", "blockIdx.y",  "blockIdx.z",  "threadIdx.x", "threadIdx.y",
    "threadIdx.z", "vthread", "vthread.x", "vthread.y", "vthread.z",
};

typedef struct tag_ctx {
  const char *tag;
  const ir_var *found;
} tag_ctx;

static bool tag_stmt_cb(void *ctx, const ir_stmt *st) {
  tag_ctx *c = ctx;
  if (c->found) return false;
  if (st->kind == IR_FOR && st->u.loop.kind == IR_FOR_THREAD_BINDING && st->u.loop.thread &&
      !strcmp(st->u.loop.thread, c->tag))
    c->found = st->u.loop.var;
  return !c->found;
}

/* A cooperative fetch (MetaSchedule's RewriteCooperativeFetch): a copy into
 * shared memory computed inside its consumer's threadIdx loop `outer` may
 * bind one of its own loops to the same tag. On a GPU the two are the same
 * hardware index, so each thread does its share of the copy once; run as
 * loops (the interpreter) every outer iteration redoes the whole copy. Both
 * mean the same only when the copy does not depend on the outer index and
 * writes nothing but shared buffers (visible to every thread of the block),
 * with the same constant extent. */
typedef struct coop_ctx {
  bool ok;
} coop_ctx;

static bool coop_cb(void *ctx, const ir_stmt *st) {
  coop_ctx *c = ctx;
  if (st->kind == IR_BLOCK_REALIZE) {
    const ir_block *b = st->u.realize.block;
    for (int w = 0; w < b->nwrites; w++) {
      const char *sc = b->writes[w].buf->scope;
      if (!sc || strncmp(sc, "shared", 6) || (sc[6] && sc[6] != '.')) c->ok = false;
    }
  }
  return c->ok;
}

static bool cooperative_rebind(const ir_stmt *outer, const ir_stmt *loop, const char *thread) {
  int64_t e1, e2;
  if (strncmp(thread, "threadIdx.", 10) || !ir_as_int(outer->u.loop.extent, &e1) ||
      !ir_as_int(loop->u.loop.extent, &e2) || e1 != e2)
    return false;
  if (ir_stmt_uses_var(loop, outer->u.loop.var)) return false;
  coop_ctx c = {true};
  ir_visitor v = {.stmt = coop_cb, .ctx = &c};
  ir_visit_stmt(&v, loop->u.loop.body);
  return c.ok;
}

/* Sets loop kind (and thread for bind) after the checks of for_kind.cc. */
static ts_status set_kind(sch_state *s, sch_loop l, ir_for_kind kind, const char *thread,
                          const char *prim, bool check, ts_diag *d) {
  sch_path p;
  ts_status st = get_loop(s, l, prim, &p, d);
  if (st) return st;
  ir_stmt *loop = p.node[p.n - 1];
  const char *name = loop->u.loop.var->name;
  if (kind == IR_FOR_THREAD_BINDING) {
    bool ok = false;
    for (size_t i = 0; thread && i < sizeof thread_tags / sizeof *thread_tags; i++)
      ok |= !strcmp(thread, thread_tags[i]);
    if (!ok)
      return ts_diag_set(d, TS_ESCHEDULE,
                         "bind: loop '%s': unknown thread tag '%s' (expected blockIdx.{x,y,z}, "
                         "threadIdx.{x,y,z} or vthread)",
                         name, thread ? thread : "(null)");
    for (int i = 0; i < p.n - 1; i++) {
      const ir_stmt *an = p.node[i];
      if (an->kind == IR_FOR && an->u.loop.kind == IR_FOR_THREAD_BINDING && an->u.loop.thread &&
          !strcmp(an->u.loop.thread, thread) && !cooperative_rebind(an, loop, thread))
        return ts_diag_set(d, TS_ESCHEDULE,
                           "bind: loop '%s' is inside loop '%s', already bound to '%s' (allowed only for a "
                           "cooperative copy into shared memory: same constant extent, a body independent "
                           "of '%s' writing only shared buffers)",
                           name, an->u.loop.var->name, thread, an->u.loop.var->name);
    }
    tag_ctx tc = {thread, NULL};
    ir_visitor vis = {.stmt = tag_stmt_cb, .ctx = &tc};
    ir_visit_stmt(&vis, loop->u.loop.body);
    if (tc.found)
      return ts_diag_set(d, TS_ESCHEDULE, "bind: loop '%s' encloses loop '%s', already bound to '%s'",
                         name, tc.found->name, thread);
  }
  if (kind == IR_FOR_VECTORIZED) {
    int64_t e;
    if (!ir_as_int(loop->u.loop.extent, &e))
      return ts_diag_set(d, TS_ESCHEDULE, "vectorize: loop '%s' has a non-constant extent", name);
  }
  if (check) {
    ts_vec rz;
    ts_vec_init(&rz);
    if (sch_child_realizes(loop->u.loop.body, &rz)) {
      ts_vec_fini(&rz);
      return oom(d);
    }
    char why[512];
    for (size_t i = 0; i < rz.len; i++)
      if (!compact_block(rz.items[i], &rz, why, sizeof why)) {
        ts_vec_fini(&rz);
        return ts_diag_set(d, TS_ESCHEDULE, "%s: loop '%s': the dataflow below is not compact: %s",
                           prim, name, why);
      }
    ir_analyzer an;
    ir_analyzer_init(&an, sch_arena(s));
    st = check_iterations_independent(&an, &rz, prim, name, d);
    ir_analyzer_fini(&an);
    if (st) {
      ts_vec_fini(&rz);
      return st;
    }
    ts_vec_fini(&rz);
    kind_ctx kc = {prim, loop->u.loop.var,
                   kind == IR_FOR_THREAD_BINDING && !strncmp(thread, "threadIdx.", 10), d, TS_OK};
    check_bindings(&kc, loop->u.loop.body);
    if (kc.st) return kc.st;
  }
  ts_arena *a = sch_arena(s);
  ir_stmt *nl = ir_stmt_clone(a, loop);
  if (!nl) return oom(d);
  nl->u.loop.kind = kind;
  nl->u.loop.thread = NULL;
  if (thread && !(nl->u.loop.thread = ts_arena_strdup(a, thread))) return oom(d);
  if ((st = sch_replace(s, &p, p.n - 1, nl, d))) return st;
  return sch_finish(s, TS_OK, d);
}

ts_status sch_parallel(sch_state *s, sch_loop l, ts_diag *d) {
  return set_kind(s, l, IR_FOR_PARALLEL, NULL, "parallel", true, d);
}

ts_status sch_vectorize(sch_state *s, sch_loop l, ts_diag *d) {
  return set_kind(s, l, IR_FOR_VECTORIZED, NULL, "vectorize", true, d);
}

ts_status sch_bind(sch_state *s, sch_loop l, const char *thread, ts_diag *d) {
  return set_kind(s, l, IR_FOR_THREAD_BINDING, thread, "bind", true, d);
}

ts_status sch_unroll(sch_state *s, sch_loop l, ts_diag *d) {
  return set_kind(s, l, IR_FOR_UNROLLED, NULL, "unroll", false, d);
}

/* ---- annotations ----------------------------------------------------------- */

/* Copies the key (and a string value) into the state's arena. */
static bool own_annot(ts_arena *a, ir_annot *ann) {
  if (!(ann->key = ts_arena_strdup(a, ann->key))) return false;
  if (ann->kind == IR_ANN_STR && ann->v.s && !(ann->v.s = ts_arena_strdup(a, ann->v.s))) return false;
  return true;
}

ts_status sch_annotate_loop(sch_state *s, sch_loop l, ir_annot ann, ts_diag *d) {
  sch_path p;
  ts_status st = get_loop(s, l, "annotate", &p, d);
  if (st) return st;
  if (!ann.key || !*ann.key)
    return ts_diag_set(d, TS_ESCHEDULE, "annotate: loop '%s': empty annotation key", l.var->name);
  ts_arena *a = sch_arena(s);
  ir_stmt *nl = ir_stmt_clone(a, p.node[p.n - 1]);
  if (!nl || !own_annot(a, &ann) || ir_annot_set(a, &nl->u.loop.nannot, &nl->u.loop.annots, ann))
    return oom(d);
  if ((st = sch_replace(s, &p, p.n - 1, nl, d))) return st;
  return sch_finish(s, TS_OK, d);
}

ts_status sch_annotate_block(sch_state *s, sch_block b, ir_annot ann, ts_diag *d) {
  sch_path p;
  ts_status st = sch_find_block(s, b.name, &p, "annotate", d);
  if (st) return st;
  if (!ann.key || !*ann.key)
    return ts_diag_set(d, TS_ESCHEDULE, "annotate: block '%s': empty annotation key", b.name);
  ts_arena *a = sch_arena(s);
  ir_stmt *nr = ir_stmt_clone(a, p.node[p.n - 1]);
  ir_block *nb = nr ? ir_block_clone(a, nr->u.realize.block) : NULL;
  if (!nb || !own_annot(a, &ann) || ir_annot_set(a, &nb->nannot, &nb->annots, ann)) return oom(d);
  nr->u.realize.block = nb;
  if ((st = sch_replace(s, &p, p.n - 1, nr, d))) return st;
  return sch_finish(s, TS_OK, d);
}

/* ---- unit loops ------------------------------------------------------------ */

/* Wraps node[k] = the end of p in a new unit loop: the realize itself
 * (around_body false), or the loop's body (around_body true). */
static ts_status add_unit_loop(sch_state *s, const sch_path *p, bool around_body, sch_loop *out,
                               ts_diag *d) {
  ts_arena *a = sch_arena(s);
  ir_stmt *node = p->node[p->n - 1];
  name_set ns;
  names_init(&ns, s);
  ir_var *u = fresh_loop_var(s, &ns, "u", ir_dt(IR_I64));
  ts_vec_fini(&ns.names);
  if (!u) return oom(d);
  ir_stmt *ul = ir_for(a, u, ir_i64(a, 0), ir_i64(a, 1), IR_FOR_SERIAL,
                       around_body ? node->u.loop.body : node);
  if (!ul) return oom(d);
  ir_stmt *repl = ul;
  if (around_body) {
    if (!(repl = ir_stmt_clone(a, node))) return oom(d);
    repl->u.loop.body = ul;
  }
  ts_status st = sch_replace(s, p, p->n - 1, repl, d);
  if (st) return st;
  if (out) *out = (sch_loop){u, SCH_LOC_LOOP};
  return sch_finish(s, TS_OK, d);
}

ts_status sch_add_unit_loop_block(sch_state *s, sch_block b, sch_loop *out, ts_diag *d) {
  sch_path p;
  ts_status st = sch_find_block(s, b.name, &p, "add_unit_loop", d);
  if (st) return st;
  if (p.n == 1)
    return ts_diag_set(d, TS_ESCHEDULE, "add_unit_loop: '%s' is the root block", b.name);
  return add_unit_loop(s, &p, false, out, d);
}

ts_status sch_add_unit_loop_loop(sch_state *s, sch_loop l, sch_loop *out, ts_diag *d) {
  sch_path p;
  ts_status st = get_loop(s, l, "add_unit_loop", &p, d);
  if (st) return st;
  return add_unit_loop(s, &p, true, out, d);
}
