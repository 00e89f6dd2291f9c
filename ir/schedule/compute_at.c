/* ir/schedule/compute_at.c — compute_at and reverse_compute_at (TVM's
 * primitive/compute_at.cc), the scope checks they share with compute_inline,
 * and sample_compute_location, which needs a check-only run of compute_at:
 * one check-then-apply algorithm, conservative on purpose. docs/IR.md
 * ("Schedules", "Notes by file"). */
#include <stdio.h>
#include <string.h>

#include "sch_int.h"

/* ---- shared scope checks ------------------------------------------------ */

bool sch_can_remove_leaf(const sch_path *p) {
  int j = p->n - 1;
  while (j - 1 >= 0 && p->node[j - 1]->kind == IR_FOR) j--;
  return j > 0 && p->node[j - 1]->kind == IR_SEQ;
}

bool sch_block_allocates(const ir_block *b, const ir_buffer *buf) {
  for (int i = 0; i < b->nalloc; i++)
    if (b->allocs[i] == buf) return true;
  return false;
}

ts_status sch_check_stage_pipeline(const ir_block *scope, const ir_block *blk, const char *prim,
                                   ts_diag *d) {
  ts_vec kids;
  ts_vec_init(&kids);
  if (sch_child_realizes(scope->body, &kids)) {
    ts_vec_fini(&kids);
    return ts_diag_set(d, TS_ENOMEM, "out of memory");
  }
  ts_status st = TS_OK;
  for (size_t j = 0; j < kids.len && !st; j++) {
    const ir_block *bj = ((ir_stmt *)kids.items[j])->u.realize.block;
    for (int w = 0; w < bj->nwrites && !st; w++) {
      const ir_buffer *buf = bj->writes[w].buf;
      for (size_t i = 0; i < j && !st; i++) {
        const ir_block *bi = ((ir_stmt *)kids.items[i])->u.realize.block;
        if (sch_block_reads(bi, buf))
          st = ts_diag_set(d, TS_ESCHEDULE,
                           "%s: block '%s': its scope '%s' is not a stage pipeline (block '%s' "
                           "writes '%s' after block '%s' reads it)",
                           prim, blk->name, scope->name, bj->name, buf->name, bi->name);
      }
      if (bj != blk && sch_block_writes(blk, buf))
        st = ts_diag_set(d, TS_ESCHEDULE,
                         "%s: block '%s' is not the only writer of '%s' in its scope (block '%s' "
                         "writes it too)",
                         prim, blk->name, buf->name, bj->name);
    }
  }
  ts_vec_fini(&kids);
  return st;
}

/* ---- small helpers ------------------------------------------------------ */

static bool prove(ir_analyzer *an, ir_expr_kind k, ir_expr *x, ir_expr *y) {
  if (!x || !y) return false;
  ir_expr *c = ir_binop(an->arena, k, x, y);
  return c && ir_can_prove(an, c);
}

static bool uses_iters(const ir_block *b, const ir_expr *e) {
  for (int i = 0; i < b->niter; i++)
    if (ir_expr_uses_var(e, b->iters[i].var)) return true;
  return false;
}

static int iter_index(const ir_block *b, const ir_var *v) {
  for (int i = 0; i < b->niter; i++)
    if (b->iters[i].var == v) return i;
  return -1;
}

static bool mentions_dom(const ir_expr *e, const ir_dom_map *dom) {
  for (int i = 0; i < dom->n; i++)
    if (ir_expr_uses_var(e, dom->vars[i])) return true;
  return false;
}

/* Relaxes e over dom; endpoints that still mention relaxed vars (a loop
 * whose range uses an outer relaxed loop) are relaxed again. NULL endpoints
 * stand for unbounded. */
static ir_intset relax(ir_analyzer *an, ir_expr *e, const ir_dom_map *dom) {
  ir_intset r = ir_eval_set(an, e, dom);
  if (r.empty) return r;
  for (int round = 0; round < 16; round++) {
    bool again = false;
    if (r.min && mentions_dom(r.min, dom)) {
      r.min = ir_eval_set(an, r.min, dom).min;
      again = true;
    }
    if (r.max && mentions_dom(r.max, dom)) {
      r.max = ir_eval_set(an, r.max, dom).max;
      again = true;
    }
    if (!again) return r;
  }
  if (r.min && mentions_dom(r.min, dom)) r.min = NULL;
  if (r.max && mentions_dom(r.max, dom)) r.max = NULL;
  return r;
}

static ir_expr *one(ts_arena *a) { return ir_i64(a, 1); }

/* e = v*c + k or v//c + k with v an iter var, c > 0 constant and k free of
 * iter vars. */
typedef struct dim_form {
  int var;
  int64_t c;
  bool div;
  ir_expr *k;
} dim_form;

static bool match_core(const ir_block *b, const ir_expr *e, dim_form *f) {
  int64_t c;
  if (e->kind == IR_VAR) {
    f->var = iter_index(b, e->u.var);
    f->c = 1;
    f->div = false;
    return f->var >= 0;
  }
  if (e->kind == IR_MUL || e->kind == IR_FLOORDIV) {
    const ir_expr *v = e->u.bin.a, *k = e->u.bin.b;
    if (e->kind == IR_MUL && v->kind != IR_VAR) {
      v = e->u.bin.b;
      k = e->u.bin.a;
    }
    if (v->kind != IR_VAR || !ir_as_int(k, &c) || c <= 0) return false;
    f->var = iter_index(b, v->u.var);
    f->c = c;
    f->div = e->kind == IR_FLOORDIV;
    return f->var >= 0;
  }
  return false;
}

static bool match_dim(ts_arena *a, const ir_block *b, ir_expr *e, dim_form *f) {
  f->k = ir_i64(a, 0);
  if (!f->k) return false;
  if (e->kind == IR_ADD) {
    if (!uses_iters(b, e->u.bin.b)) {
      f->k = e->u.bin.b;
      e = e->u.bin.a;
    } else if (!uses_iters(b, e->u.bin.a)) {
      f->k = e->u.bin.a;
      e = e->u.bin.b;
    } else {
      return false;
    }
  } else if (e->kind == IR_SUB && !uses_iters(b, e->u.bin.b)) {
    f->k = ir_sub(a, f->k, e->u.bin.b);
    e = e->u.bin.a;
  }
  return f->k && match_core(b, e, f);
}

/* ---- the placement plan ------------------------------------------------- */

typedef struct req_region {
  const ir_buffer *buf;
  int ndim;
  ir_intset *dims;
  bool any; /* some required block touched it */
} req_region;

typedef struct plan {
  sch_state *s;
  const char *prim;
  bool reverse;
  sch_path pb, pl;   /* block, loop */
  int sc;            /* scope index in pb */
  const ir_block *scope, *blk;
  ir_stmt *loop;
  ts_vec kids;       /* child realizes of the scope */
  ts_vec producers, consumers;
  int nsub;
  ir_stmt **subs;    /* the loop body's subtrees */
  int *sub_first;    /* per subtree: kid index of its first block, or -1 */
  int pos;           /* insertion slot */
  ir_analyzer an;
  ir_dom_map dom;    /* scratch */
  req_region *req;
  int nreq;
  bool *has_cons;
  ir_intset *cons;   /* per block iter var */
  ir_stmt *nest;     /* the new loop nest around the moved block */
  ir_expr *ipred;    /* its old predicate over its iter vars, NULL for true */
} plan;

static void plan_fini(plan *p) {
  ts_vec_fini(&p->kids);
  ts_vec_fini(&p->producers);
  ts_vec_fini(&p->consumers);
  ir_analyzer_fini(&p->an);
  ir_dom_map_fini(&p->dom);
  ts_free(p->req);
  ts_free(p->sub_first);
  ts_free(p->has_cons);
  ts_free(p->cons);
}

static ts_status oom(ts_diag *d) { return ts_diag_set(d, TS_ENOMEM, "out of memory"); }

static bool in_vec(const ts_vec *v, const void *x) {
  for (size_t i = 0; i < v->len; i++)
    if (v->items[i] == x) return true;
  return false;
}

/* Producers (earlier children writing a buffer blk reads or writes) and
 * consumers (later children reading or writing a buffer blk writes). */
static ts_status find_deps(plan *p, ts_diag *d) {
  ts_vec_init(&p->producers);
  ts_vec_init(&p->consumers);
  ir_stmt *self = p->pb.node[p->pb.n - 1];
  bool after = false;
  for (size_t i = 0; i < p->kids.len; i++) {
    ir_stmt *r = p->kids.items[i];
    const ir_block *o = r->u.realize.block;
    if (r == self) {
      after = true;
      continue;
    }
    bool edge = false;
    if (!after) {
      for (int k = 0; k < o->nwrites && !edge; k++)
        edge = sch_block_reads(p->blk, o->writes[k].buf) || sch_block_writes(p->blk, o->writes[k].buf);
      if (edge && ts_vec_push(&p->producers, r)) return oom(d);
    } else {
      for (int k = 0; k < p->blk->nwrites && !edge; k++)
        edge = sch_block_reads(o, p->blk->writes[k].buf) || sch_block_writes(o, p->blk->writes[k].buf);
      if (edge && ts_vec_push(&p->consumers, r)) return oom(d);
    }
  }
  return TS_OK;
}

/* Legality checks that need no region math. */
static ts_status check_basic(plan *p, ts_diag *d) {
  const ir_block *b = p->blk;
  const char *ln = p->loop->u.loop.var->name;
  p->sc = sch_path_scope(&p->pb, p->pb.n - 1);
  if (p->sc < 0)
    return ts_diag_set(d, TS_ESCHEDULE, "%s: '%s' is the root block", p->prim, b->name);
  p->scope = p->pb.node[p->sc]->u.realize.block;
  int lsc = sch_path_scope(&p->pl, p->pl.n - 1);
  if (lsc < 0 || p->pl.node[lsc] != p->pb.node[p->sc])
    return ts_diag_set(d, TS_ESCHEDULE,
                       "%s: loop '%s' is not in the scope of block '%s' (scope block '%s')", p->prim,
                       ln, b->name, p->scope->name);
  for (int i = lsc + 1; i < p->pl.n - 1; i++) {
    ir_stmt_kind k = p->pl.node[i]->kind;
    if (k != IR_FOR && k != IR_SEQ)
      return ts_diag_set(d, TS_ESCHEDULE,
                         "%s: loop '%s' sits under a statement other than loops (if/let) in scope '%s'",
                         p->prim, ln, p->scope->name);
  }
  for (int i = p->sc + 1; i < p->pb.n - 1; i++)
    if (p->pb.node[i] == p->loop)
      return ts_diag_set(d, TS_ESCHEDULE,
                         "%s: loop '%s' is an ancestor of block '%s' (the block is already under it)",
                         p->prim, ln, b->name);
  for (int i = 0; i < b->niter; i++)
    if (b->iters[i].type != IR_ITER_S && b->iters[i].type != IR_ITER_R)
      return ts_diag_set(d, TS_ESCHEDULE, "%s: block '%s' has iter var '%s' that is neither S nor R",
                         p->prim, b->name, b->iters[i].var->name);
  if (!sch_is_complete(b) && !sch_is_reduction(b))
    return ts_diag_set(d, TS_ESCHEDULE,
                       "%s: block '%s' is neither complete (all S iter vars, no init) nor a "
                       "reduction (init)",
                       p->prim, b->name);
  if (sch_is_complete(b))
    for (int i = 0; i < b->nwrites; i++)
      if (sch_block_reads(b, b->writes[i].buf))
        return ts_diag_set(d, TS_ESCHEDULE,
                           "%s: block '%s' is not complete: it reads '%s', which it writes", p->prim,
                           b->name, b->writes[i].buf->name);
  ts_status st = sch_check_stage_pipeline(p->scope, b, p->prim, d);
  if (st) return st;
  if (!p->reverse)
    for (int i = 0; i < b->nwrites; i++)
      if (!sch_block_allocates(p->scope, b->writes[i].buf))
        return ts_diag_set(d, TS_ESCHEDULE,
                           "%s: block '%s' is an output block (it writes '%s', which its scope '%s' "
                           "does not allocate)",
                           p->prim, b->name, b->writes[i].buf->name, p->scope->name);
  if (!sch_can_remove_leaf(&p->pb))
    return ts_diag_set(d, TS_ESCHEDULE,
                       "%s: block '%s' is the only leaf of its scope; moving it would empty it",
                       p->prim, b->name);
  return TS_OK;
}

static int kid_index(const plan *p, const void *realize) {
  for (size_t i = 0; i < p->kids.len; i++)
    if (p->kids.items[i] == realize) return (int)i;
  return -1;
}

/* Chooses the slot among the loop body's subtrees. */
static ts_status find_slot(plan *p, int index, ts_diag *d) {
  ir_stmt *body = p->loop->u.loop.body;
  if (body->kind == IR_SEQ) {
    p->nsub = body->u.seq.n;
    p->subs = body->u.seq.stmts;
  } else {
    p->nsub = 1;
    p->subs = &p->loop->u.loop.body;
  }
  int last_p = -1, first_c = p->nsub;
  size_t seen_p = 0, seen_c = 0;
  ts_vec v;
  ts_vec_init(&v);
  p->sub_first = ts_calloc((size_t)p->nsub + 1, sizeof *p->sub_first);
  if (!p->sub_first) return oom(d);
  int last_kid = -1;
  for (int i = 0; i < p->nsub; i++) {
    v.len = 0;
    if (sch_child_realizes(p->subs[i], &v)) {
      ts_vec_fini(&v);
      return oom(d);
    }
    p->sub_first[i] = -1;
    for (size_t k = 0; k < v.len; k++) {
      int ki = kid_index(p, v.items[k]);
      if (p->sub_first[i] < 0) p->sub_first[i] = ki;
      if (ki > last_kid) last_kid = ki;
      if (in_vec(&p->producers, v.items[k])) {
        seen_p++;
        last_p = i;
      }
      if (in_vec(&p->consumers, v.items[k])) {
        seen_c++;
        if (i < first_c) first_c = i;
      }
    }
  }
  ts_vec_fini(&v);
  const char *ln = p->loop->u.loop.var->name;
  if (!p->reverse && seen_c < p->consumers.len)
    return ts_diag_set(d, TS_ESCHEDULE,
                       "%s: not all consumers of block '%s' are under loop '%s' (%zu of %zu are); "
                       "the loop's iterations would not cover what they read",
                       p->prim, p->blk->name, ln, seen_c, p->consumers.len);
  if (p->reverse && seen_p < p->producers.len)
    return ts_diag_set(d, TS_ESCHEDULE,
                       "%s: not all producers of block '%s' are under loop '%s' (%zu of %zu are)",
                       p->prim, p->blk->name, ln, seen_p, p->producers.len);
  if (last_p >= first_c)
    return ts_diag_set(d, TS_ESCHEDULE,
                       "%s: no legal slot for block '%s' under loop '%s': a producer (subtree %d) "
                       "follows a consumer (subtree %d)",
                       p->prim, p->blk->name, ln, last_p, first_c);
  if (index == -1) p->pos = first_c;
  else if (index == -2) p->pos = last_p + 1;
  else if (index >= 0 && index > last_p && index <= first_c) p->pos = index;
  else
    return ts_diag_set(d, TS_ESCHEDULE,
                       "%s: index %d is not a legal slot for block '%s' under loop '%s' (legal: "
                       "%d..%d, or -1 latest, -2 earliest)",
                       p->prim, index, p->blk->name, ln, last_p + 1, first_c);
  /* In program order the block lands just before kid np: every producer
   * must stay before it and every consumer after it (the loop may lie on
   * either side of the block's old place). */
  int np = -1;
  for (int i = p->pos; i < p->nsub && np < 0; i++) np = p->sub_first[i];
  if (np < 0) np = last_kid + 1;
  if (last_kid < 0)
    return ts_diag_set(d, TS_ESCHEDULE, "%s: loop '%s' holds no blocks", p->prim, ln);
  for (size_t i = 0; i < p->producers.len; i++)
    if (kid_index(p, p->producers.items[i]) >= np)
      return ts_diag_set(d, TS_ESCHEDULE,
                         "%s: block '%s' would move before its producer '%s' under loop '%s'",
                         p->prim, p->blk->name,
                         ((const ir_stmt *)p->producers.items[i])->u.realize.block->name, ln);
  for (size_t i = 0; i < p->consumers.len; i++)
    if (kid_index(p, p->consumers.items[i]) < np)
      return ts_diag_set(d, TS_ESCHEDULE,
                         "%s: block '%s' would move after its consumer '%s' under loop '%s'",
                         p->prim, p->blk->name,
                         ((const ir_stmt *)p->consumers.items[i])->u.realize.block->name, ln);
  return TS_OK;
}

/* reverse_compute_at must see final values: a producer's reduction may not
 * be cut by the target loop or a loop above it. */
static ts_status check_producer_reductions(plan *p, ts_diag *d) {
  if (!p->reverse) return TS_OK;
  for (size_t i = 0; i < p->producers.len; i++) {
    const ir_stmt *r = p->producers.items[i];
    const ir_block *pb = r->u.realize.block;
    for (int k = 0; k < pb->niter; k++) {
      if (pb->iters[k].type == IR_ITER_S) continue;
      for (int j = p->sc + 1; j < p->pl.n; j++) {
        const ir_stmt *l = p->pl.node[j];
        if (l->kind == IR_FOR && ir_expr_uses_var(r->u.realize.iter_values[k], l->u.loop.var))
          return ts_diag_set(d, TS_ESCHEDULE,
                             "%s: loop '%s' drives reduction var '%s' of producer '%s'; block '%s' "
                             "would read partial results",
                             p->prim, l->u.loop.var->name, pb->iters[k].var->name, pb->name,
                             p->blk->name);
      }
    }
  }
  return TS_OK;
}

static req_region *req_find(plan *p, const ir_buffer *b) {
  for (int i = 0; i < p->nreq; i++)
    if (p->req[i].buf == b) return &p->req[i];
  return NULL;
}

/* TVM's CanRelaxStorageUnderThread: a buffer shared by the threads of a
 * thread loop is computed cooperatively for all of them, so compute_at
 * relaxes those thread loops at and above the target loop too. Ranks:
 * storage global 0, shared 1, warp (threadIdx.x only), local 2; threads
 * blockIdx 0, threadIdx and vthread 1. */
static bool relaxes_thread(const char *scope, const char *tag) {
  if (!tag) return false;
  int trank = !strncmp(tag, "blockIdx", 8) ? 0 : 1;
  if (!scope || !strcmp(scope, "global")) return true;
  if (!strcmp(scope, "shared") || !strncmp(scope, "shared.", 7)) return trank >= 1;
  if (!strcmp(scope, "warp")) return !strcmp(tag, "threadIdx.x");
  return false; /* local and named scopes: per thread */
}

static ts_status relax_threads(plan *p, const ir_buffer *buf) {
  for (int i = p->sc + 1; i < p->pl.n; i++) {
    const ir_stmt *l = p->pl.node[i];
    if (l->kind != IR_FOR || l->u.loop.kind != IR_FOR_THREAD_BINDING) continue;
    if (!relaxes_thread(buf->scope, l->u.loop.thread)) continue;
    if (ir_dom_map_put(&p->dom, l->u.loop.var,
                       ir_intset_range(sch_arena(p->s), l->u.loop.min, l->u.loop.extent)))
      return TS_ENOMEM;
  }
  return TS_OK;
}

/* The regions the blocks under the loop require, relaxed over the loops
 * strictly between them and the target loop. */
/* Is {e : the vars of dom over their ranges} + [0, ext) an interval? True
 * when e does not use them; else e must be affine in them with constant
 * coefficients and constant ranges, and, taking the terms by increasing
 * |coefficient|, each coefficient at most the span covered so far (mixed
 * radix without gaps). Conservative: anything else is "not dense". */
static bool dense_in(ir_analyzer *an, ts_arena *a, ir_expr *e, int64_t ext, const ir_dom_map *dom) {
  int64_t coef[64], len[64];
  int n = 0;
  ir_var_map zero;
  ir_var_map_init(&zero);
  bool ok = true;
  for (int i = 0; i < dom->n && ok; i++)
    ok = !ir_var_map_put(&zero, (ir_var *)dom->vars[i], ir_int(a, dom->vars[i]->dtype, 0));
  ir_expr *rest = ok ? e : NULL;
  for (int i = 0; i < dom->n && ok; i++) {
    ir_var *x = (ir_var *)dom->vars[i];
    if (!ir_expr_uses_var(e, x)) continue;
    int64_t lo, ex;
    ir_intset r = dom->sets[i];
    ir_expr *rext = r.min && r.max ? ir_simplify(an, ir_sub(a, r.max, r.min)) : NULL;
    if (!r.min || !ir_as_int(r.min, &lo) || !rext || !ir_as_int(rext, &ex) || n >= 64) {
      ok = false;
      break;
    }
    ex += 1;
    /* coefficient from e with every other var of dom at 0: e(x=1) - e(x=0),
     * and the same step again from 1 to 2 (catches floordiv and friends) */
    ir_var_map m;
    ir_var_map_init(&m);
    for (int j = 0; j < zero.n; j++) ir_var_map_put(&m, zero.keys[j], zero.vals[j]);
    ir_expr *v[3];
    for (int t = 0; t < 3 && ok; t++) {
      for (int j = 0; j < m.n; j++)
        if (m.keys[j] == x) m.vals[j] = ir_int(a, x->dtype, t);
      v[t] = ir_simplify(an, ir_subst_expr(a, e, &m));
    }
    ir_var_map_fini(&m);
    int64_t c1, c2;
    ir_expr *d1 = ir_simplify(an, ir_sub(a, v[1], v[0])), *d2 = ir_simplify(an, ir_sub(a, v[2], v[1]));
    if (!d1 || !d2 || !ir_as_int(d1, &c1) || !ir_as_int(d2, &c2) || c1 != c2) {
      ok = false;
      break;
    }
    rest = ir_sub(a, rest, ir_mul(a, ir_int(a, x->dtype, c1), ir_var_ref(a, x)));
    if (ex > 1 && c1 != 0) {
      coef[n] = c1 < 0 ? -c1 : c1;
      len[n++] = ex;
    }
  }
  if (ok && rest) {
    rest = ir_simplify(an, rest);
    for (int i = 0; i < dom->n && ok; i++)
      if (rest && ir_expr_uses_var(rest, dom->vars[i])) ok = false; /* not affine */
  }
  ir_var_map_fini(&zero);
  if (!ok || !rest) return false;
  /* by increasing coefficient */
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && coef[j - 1] > coef[j]; j--) {
      int64_t t = coef[j];
      coef[j] = coef[j - 1];
      coef[j - 1] = t;
      t = len[j];
      len[j] = len[j - 1];
      len[j - 1] = t;
    }
  int64_t span = ext;
  for (int i = 0; i < n; i++) {
    if (coef[i] > span) return false;
    span += coef[i] * (len[i] - 1);
  }
  return true;
}

static ts_status compute_required(plan *p, ts_diag *d) {
  ts_arena *a = sch_arena(p->s);
  const ir_region *prov = p->reverse ? p->blk->reads : p->blk->writes;
  int nprov = p->reverse ? p->blk->nreads : p->blk->nwrites;
  p->req = ts_calloc((size_t)(nprov ? nprov : 1), sizeof *p->req);
  if (!p->req) return oom(d);
  for (int i = 0; i < nprov; i++) {
    if (req_find(p, prov[i].buf)) continue;
    req_region *r = &p->req[p->nreq++];
    r->buf = prov[i].buf;
    r->ndim = prov[i].buf->ndim;
    r->dims = TS_ANEWN(a, ir_intset, r->ndim ? r->ndim : 1);
    if (!r->dims) return oom(d);
    for (int k = 0; k < r->ndim; k++) r->dims[k] = (ir_intset){NULL, NULL, true};
  }
  const ts_vec *deps = p->reverse ? &p->producers : &p->consumers;
  sch_path *dp = ts_malloc(sizeof *dp);
  if (!dp) return oom(d);
  ts_status st = TS_OK;
  for (size_t i = 0; i < deps->len && !st; i++) {
    const ir_stmt *rz = deps->items[i];
    const ir_block *db = rz->u.realize.block;
    st = sch_find_block(p->s, db->name, dp, p->prim, d);
    if (st) break;
    int li = -1;
    for (int k = 0; k < dp->n; k++)
      if (dp->node[k] == p->loop) li = k;
    if (li < 0) continue; /* not under the loop (cannot happen after find_slot) */
    p->dom.n = 0;
    for (int k = li + 1; k < dp->n - 1; k++) {
      const ir_stmt *l = dp->node[k];
      if (l->kind != IR_FOR) continue;
      if (ir_dom_map_put(&p->dom, l->u.loop.var, ir_intset_range(a, l->u.loop.min, l->u.loop.extent))) {
        st = oom(d);
        break;
      }
    }
    ir_var_map bind;
    ir_var_map_init(&bind);
    for (int k = 0; k < db->niter && !st; k++)
      if (ir_var_map_put(&bind, db->iters[k].var, rz->u.realize.iter_values[k])) st = oom(d);
    const ir_region *regs = p->reverse ? db->writes : db->reads;
    int nregs = p->reverse ? db->nwrites : db->nreads;
    int nbase = p->dom.n;
    for (int k = 0; k < nregs && !st; k++) {
      req_region *r = req_find(p, regs[k].buf);
      if (!r) continue;
      p->dom.n = nbase;
      if (!p->reverse && relax_threads(p, r->buf)) {
        st = oom(d);
        break;
      }
      if (regs[k].ndim != r->ndim) {
        st = ts_diag_set(d, TS_ESCHEDULE, "%s: block '%s' accesses '%s' with %d indices, not %d",
                         p->prim, db->name, r->buf->name, regs[k].ndim, r->ndim);
        break;
      }
      r->any = true;
      for (int j = 0; j < r->ndim; j++) {
        ir_expr *lo = ir_subst_expr(a, regs[k].ranges[j].min, &bind);
        ir_expr *hi = lo ? ir_add(a, lo, ir_sub(a, ir_subst_expr(a, regs[k].ranges[j].extent, &bind), one(a)))
                         : NULL;
        if (!lo || !hi) {
          st = oom(d);
          break;
        }
        ir_intset slo = relax(&p->an, lo, &p->dom), shi = relax(&p->an, hi, &p->dom);
        ir_intset s = {slo.min, shi.max, slo.empty || shi.empty};
        if (p->reverse) {
          /* the consumer will read the hull of what each iteration writes:
           * it must all be written (a strided write leaves holes the
           * consumer would read before they are produced) */
          int64_t ex;
          ir_expr *rext = ir_simplify(&p->an, ir_subst_expr(a, regs[k].ranges[j].extent, &bind));
          if (!rext || !ir_as_int(rext, &ex) || !dense_in(&p->an, a, ir_simplify(&p->an, lo), ex, &p->dom)) {
            st = ts_diag_set(d, TS_ESCHEDULE,
                             "%s: block '%s' writes '%s' (dim %d) with gaps in each iteration of loop "
                             "'%s'; block '%s' would read elements not produced yet",
                             p->prim, db->name, r->buf->name, j, p->loop->u.loop.var->name, p->blk->name);
            break;
          }
        }
        r->dims[j] = ir_intset_union(&p->an, r->dims[j], s);
      }
    }
    ir_var_map_fini(&bind);
  }
  ts_free(dp);
  return st;
}

static ir_expr *simp(plan *p, ir_expr *e) { return e ? ir_simplify(&p->an, e) : NULL; }

/* Derives a range for each block iter var from the required regions. */
static ts_status derive_domains(plan *p, ts_diag *d) {
  ts_arena *a = sch_arena(p->s);
  const ir_block *b = p->blk;
  p->has_cons = ts_calloc((size_t)(b->niter ? b->niter : 1), sizeof *p->has_cons);
  p->cons = ts_calloc((size_t)(b->niter ? b->niter : 1), sizeof *p->cons);
  if (!p->has_cons || !p->cons) return oom(d);
  const ir_region *prov = p->reverse ? b->reads : b->writes;
  int nprov = p->reverse ? b->nreads : b->nwrites;
  for (int i = 0; i < nprov; i++) {
    req_region *r = req_find(p, prov[i].buf);
    if (!r || !r->any) continue;
    if (prov[i].ndim != r->ndim)
      return ts_diag_set(d, TS_ESCHEDULE, "%s: block '%s' region of '%s' has %d dims, not %d",
                         p->prim, b->name, r->buf->name, prov[i].ndim, r->ndim);
    for (int k = 0; k < r->ndim; k++) {
      ir_intset req = r->dims[k];
      if (req.empty) continue;
      /* An unbounded side is clamped to the buffer. */
      ir_expr *rmin = req.min ? req.min : ir_i64(a, 0);
      ir_expr *rmax = req.max ? req.max : simp(p, ir_sub(a, r->buf->shape[k], one(a)));
      ir_expr *idx = simp(p, prov[i].ranges[k].min), *ext = simp(p, prov[i].ranges[k].extent);
      if (!rmin || !rmax || !idx || !ext) return oom(d);
      if (!uses_iters(b, idx)) {
        if (!p->reverse) continue;
        /* A fixed index must lie in what the producers just wrote. */
        ir_expr *last = simp(p, ir_sub(a, ir_add(a, idx, ext), one(a)));
        if (!prove(&p->an, IR_LE, rmin, idx) || !prove(&p->an, IR_LE, last, rmax))
          return ts_diag_set(d, TS_ESCHEDULE,
                             "%s: block '%s' reads '%s' at a fixed index (dim %d) that loop '%s' "
                             "does not produce in each iteration",
                             p->prim, b->name, r->buf->name, k, p->loop->u.loop.var->name);
        continue;
      }
      dim_form f;
      int64_t e1 = 0;
      bool ok = match_dim(a, b, idx, &f);
      if (p->reverse) ok = ok && !f.div && f.c == 1 && ir_as_int(ext, &e1) && e1 == 1;
      if (!ok) {
        if (!p->reverse) continue; /* compute_at: that var keeps its full domain */
        /* reverse: fine only if every instance reads inside the produced part. */
        p->dom.n = 0;
        for (int j = 0; j < b->niter; j++)
          if (ir_dom_map_put(&p->dom, b->iters[j].var,
                             ir_intset_range(a, b->iters[j].dom.min, b->iters[j].dom.extent)))
            return oom(d);
        ir_intset lo = relax(&p->an, idx, &p->dom);
        ir_intset hi = relax(&p->an, simp(p, ir_sub(a, ir_add(a, idx, ext), one(a))), &p->dom);
        if (!lo.min || !hi.max || !prove(&p->an, IR_LE, rmin, lo.min) ||
            !prove(&p->an, IR_LE, hi.max, rmax))
          return ts_diag_set(d, TS_ESCHEDULE,
                             "%s: block '%s' reads '%s' (dim %d) through an index that is not a "
                             "plain iter var; cannot invert it to follow loop '%s'",
                             p->prim, b->name, r->buf->name, k, p->loop->u.loop.var->name);
        continue;
      }
      ir_expr *c = ir_i64(a, f.c);
      ir_expr *lo, *hi;
      ir_expr *base_lo = ir_sub(a, ir_sub(a, rmin, f.k), ir_sub(a, ext, one(a))); /* rmin-k-e+1 */
      ir_expr *base_hi = ir_sub(a, rmax, f.k);
      if (!f.div) {
        lo = ir_floordiv(a, ir_add(a, base_lo, ir_sub(a, c, one(a))), c);
        hi = ir_floordiv(a, base_hi, c);
      } else {
        lo = ir_mul(a, base_lo, c);
        hi = ir_add(a, ir_mul(a, base_hi, c), ir_sub(a, c, one(a)));
      }
      lo = simp(p, lo);
      hi = simp(p, hi);
      if (!lo || !hi) return oom(d);
      int v = f.var;
      if (!p->reverse && b->iters[v].type == IR_ITER_R) continue; /* reductions stay whole */
      ir_intset s = {lo, hi, false};
      if (!p->has_cons[v]) {
        p->has_cons[v] = true;
        p->cons[v] = s;
      } else if (!p->reverse) {
        p->cons[v] = ir_intset_union(&p->an, p->cons[v], s);
      } else if (!ir_can_prove_equal(&p->an, p->cons[v].min, lo) ||
                 !ir_can_prove_equal(&p->an, p->cons[v].max, hi)) {
        return ts_diag_set(d, TS_ESCHEDULE,
                           "%s: block '%s': its reads give iter var '%s' different ranges under "
                           "loop '%s'",
                           p->prim, b->name, b->iters[v].var->name, p->loop->u.loop.var->name);
      }
    }
  }
  if (p->reverse)
    for (int v = 0; v < b->niter; v++) {
      if (!p->has_cons[v] || b->iters[v].type != IR_ITER_R) continue;
      ir_expr *dmax = simp(p, ir_sub(a, ir_add(a, b->iters[v].dom.min, b->iters[v].dom.extent), one(a)));
      if (prove(&p->an, IR_LE, p->cons[v].min, b->iters[v].dom.min) &&
          prove(&p->an, IR_GE, p->cons[v].max, dmax)) {
        p->has_cons[v] = false; /* covers the whole reduction */
        continue;
      }
      return ts_diag_set(d, TS_ESCHEDULE,
                         "%s: block '%s': loop '%s' would split its reduction var '%s' across "
                         "iterations",
                         p->prim, b->name, p->loop->u.loop.var->name, b->iters[v].var->name);
    }
  if (p->reverse) {
    /* Every instance of the consumer must still run: over all iterations of
     * the loop and the loops around it (inside the scope), each spatial iter
     * var's derived range must reach both ends of its domain. A guarded read
     * (a padding stage reading its source only inside the border) would
     * otherwise drop the instances that read nothing. */
    p->dom.n = 0;
    for (int k = p->sc + 1; k < p->pl.n; k++) {
      const ir_stmt *l = p->pl.node[k];
      if (l->kind == IR_FOR &&
          ir_dom_map_put(&p->dom, l->u.loop.var, ir_intset_range(a, l->u.loop.min, l->u.loop.extent)))
        return oom(d);
    }
    for (int v = 0; v < b->niter; v++) {
      if (!p->has_cons[v]) continue;
      ir_expr *dmin = b->iters[v].dom.min;
      ir_expr *dmax = simp(p, ir_sub(a, ir_add(a, dmin, b->iters[v].dom.extent), one(a)));
      ir_intset lo = relax(&p->an, p->cons[v].min, &p->dom), hi = relax(&p->an, p->cons[v].max, &p->dom);
      if (!lo.min || !hi.max || !prove(&p->an, IR_LE, lo.min, dmin) || !prove(&p->an, IR_GE, hi.max, dmax))
        return ts_diag_set(d, TS_ESCHEDULE,
                           "%s: block '%s': under loop '%s' its iter var '%s' would not cover its "
                           "whole domain (it reads '%s' only in part of it, e.g. behind a guard), so "
                           "some of its instances would never run",
                           p->prim, b->name, p->loop->u.loop.var->name, b->iters[v].var->name,
                           p->nreq ? p->req[0].buf->name : "?");
    }
  }
  return TS_OK;
}

/* ---- the moved block's predicate -----------------------------------------
 * The old realize's predicate is written over the loops the block leaves: an
 * imperfect split's guard (ko*8 + ki < 777), a bound reverse_compute_inline
 * added (i < 7), the clause tying the per-loop reduce vars rfactor makes.
 * The new nest runs the block's iter vars over ranges derived from regions
 * and domains, which the guard may cut further, so each clause is carried
 * over next to the new bound guards: first into the block's iter vars and
 * the loops that still enclose the new place, later (build_nest) into the
 * new bindings. The rewrite follows the bindings back: a subexpression that
 * equals a binding up to a term free of the loops left becomes that iter var
 * plus the term; X with bindings equal to X // c and X % c (a fused loop
 * split again; nested, for three fused loops) becomes vi*c + vj; a
 * comparison that does not rewrite side by side is tried as (lhs - rhs)
 * against 0. A clause that still uses a loop the block leaves cannot be
 * carried and is refused. */

typedef struct pkey {
  ir_expr *e; /* over loops */
  ir_expr *v; /* the same value over iter vars */
} pkey;

typedef struct prw {
  plan *p;
  ts_arena *a;
  const ir_var **gone; /* loops the block leaves */
  int ngone;
  pkey *keys;
  int nkeys, cap;
  const ir_var *bad; /* a loop left in a clause that could not be rewritten */
  bool oom;
} prw;

static const ir_var *gone_in(const prw *r, const ir_expr *e) {
  for (int i = 0; i < r->ngone; i++)
    if (ir_expr_uses_var(e, r->gone[i])) return r->gone[i];
  return NULL;
}

static void add_key(prw *r, ir_expr *e, ir_expr *v) {
  if (r->oom) return;
  if (!e || !v) {
    r->oom = true;
    return;
  }
  for (int i = 0; i < r->nkeys; i++)
    if (ir_can_prove_equal(&r->p->an, e, r->keys[i].e)) return;
  if (r->nkeys == r->cap) {
    int cap = r->cap ? 2 * r->cap : 8;
    pkey *k = ts_realloc(r->keys, (size_t)cap * sizeof *k);
    if (!k) {
      r->oom = true;
      return;
    }
    r->keys = k;
    r->cap = cap;
  }
  r->keys[r->nkeys++] = (pkey){e, v};
}

/* A clause or term that cannot be rewritten: the walk stops (m->failed),
 * naming the first loop left in it. */
static ir_expr *prw_refuse(ir_mutator *m, prw *r, const ir_var *g, ir_expr *e) {
  if (!r->bad) r->bad = g;
  ir_mutator_fail(m);
  return e;
}

/* An integer term over loops: a binding up to a loop-free term, or a cast,
 * select or arithmetic node whose children rewrite (the default walk). */
static ir_expr *prw_int(ir_mutator *m, prw *r, const ir_var *g, ir_expr *e) {
  ts_arena *a = r->a;
  for (int i = 0; i < r->nkeys; i++) {
    ir_expr *rest = ir_simplify(&r->p->an, ir_sub(a, e, r->keys[i].e));
    if (!rest) {
      r->oom = true;
      ir_mutator_fail(m);
      return e;
    }
    if (!gone_in(r, rest)) {
      ir_expr *n = ir_add(a, r->keys[i].v, rest);
      if (!n) {
        r->oom = true;
        ir_mutator_fail(m);
        return e;
      }
      return n;
    }
  }
  bool arith = ir_is_binop(e->kind) && !ir_is_cmp(e->kind) && e->kind != IR_AND && e->kind != IR_OR;
  bool cast = e->kind == IR_CAST && !ir_dtype_is_bool(e->u.cast.value->dtype);
  if (arith || cast || e->kind == IR_SELECT) return NULL;
  return prw_refuse(m, r, g, e);
}

/* A comparison of integers: side by side, else (lhs - rhs) against 0 (ki < 13
 * - ko*4 reads as ko*4 + ki - 13 < 0). */
static ir_expr *prw_cmp(ir_mutator *m, prw *r, ir_expr *e) {
  const ir_var *bad = r->bad;
  ir_expr *n = ir_mutate_expr_children(m, e);
  if (!m->failed || r->oom) return n;
  m->failed = false;
  r->bad = bad;
  ts_arena *a = r->a;
  ir_expr *diff = ir_simplify(&r->p->an, ir_sub(a, e->u.bin.a, e->u.bin.b));
  ir_expr *zero = diff ? ir_int(a, diff->dtype, 0) : NULL;
  if (!diff || !zero) {
    r->oom = true;
    ir_mutator_fail(m);
    return e;
  }
  ir_expr *x = ir_mutate_expr(m, diff);
  if (m->failed) return e;
  n = ir_binop(a, e->kind, x, zero);
  if (!n) ir_mutator_fail(m);
  return n ? n : e;
}

/* The pre hook: a node free of the loops left stays; a boolean clause
 * rewrites through not/and/or and integer comparisons, an integer term as
 * prw_int says; anything else is refused. */
static ir_expr *prw_pre(ir_mutator *m, ir_expr *e) {
  prw *r = m->ctx;
  const ir_var *g = gone_in(r, e);
  if (!g) return e;
  if (!ir_dtype_is_bool(e->dtype)) return prw_int(m, r, g, e);
  if (e->kind == IR_NOT || e->kind == IR_AND || e->kind == IR_OR) return NULL;
  if (ir_is_cmp(e->kind) && ir_dtype_is_int(e->u.bin.a->dtype)) return prw_cmp(m, r, e);
  return prw_refuse(m, r, g, e);
}

/* The predicate rewritten; NULL when it cannot be (r->bad says why) or on
 * OOM (r->oom). */
static ir_expr *prw_rewrite(prw *r, ir_expr *pred) {
  if (!pred) {
    r->oom = true;
    return NULL;
  }
  ir_mutator m;
  ir_mutator_init(&m, r->a);
  m.ctx = r;
  m.pre_expr = prw_pre;
  ir_expr *n = ir_mutate_expr(&m, pred);
  bool failed = m.failed;
  ir_mutator_fini(&m);
  if (failed && !r->bad) r->oom = true;
  return failed ? NULL : n;
}

/* Sets p->ipred to the block's predicate over its iter vars (and the loops
 * that enclose the new place); NULL when it is true. */
static ts_status keep_predicate(plan *p, ts_diag *d) {
  const ir_stmt *rz = p->pb.node[p->pb.n - 1];
  const ir_block *b = p->blk;
  ir_expr *pred = rz->u.realize.predicate;
  int64_t t;
  p->ipred = NULL;
  if (ir_as_int(pred, &t) && t) return TS_OK;
  ts_arena *a = sch_arena(p->s);
  prw r = {.p = p, .a = a};
  r.gone = ts_calloc((size_t)p->pb.n, sizeof *r.gone);
  if (!r.gone) return oom(d);
  int mark = p->an.n;
  for (int i = p->sc + 1; i < p->pb.n - 1 && !r.oom; i++) {
    const ir_stmt *l = p->pb.node[i];
    bool kept = false;
    for (int j = 0; j < p->pl.n && !kept; j++) kept = p->pl.node[j] == l;
    if (l->kind != IR_FOR || kept) continue;
    r.gone[r.ngone++] = l->u.loop.var;
    if (ir_analyzer_bind(&p->an, l->u.loop.var, l->u.loop.min, l->u.loop.extent)) r.oom = true;
  }
  /* the bindings, then E from pairs E // c, E % c (to a fixed point) */
  for (int k = 0; k < b->niter && !r.oom; k++) {
    ir_expr *e = ir_simplify(&p->an, rz->u.realize.iter_values[k]);
    if (e && !gone_in(&r, e)) continue;
    add_key(&r, e, ir_var_ref(a, b->iters[k].var));
  }
  for (bool grew = true; grew && !r.oom && r.nkeys < 64;) {
    grew = false;
    for (int j = 0; j < r.nkeys && !grew && !r.oom; j++) {
      /* m = X % c with some key equal to X // c: X = (X // c)*c + X % c
       * (X // c may be written (f // 5) // 3 or f // 15: a fused loop of three) */
      ir_expr *m = r.keys[j].e, *x = m->u.bin.a;
      int64_t c;
      if (m->kind != IR_FLOORMOD || !ir_as_int(m->u.bin.b, &c) || c <= 0) continue;
      ir_expr *quot = ir_floordiv(a, x, m->u.bin.b);
      if (!quot) r.oom = true;
      for (int i = 0; i < r.nkeys && !grew && !r.oom; i++) {
        if (!ir_can_prove_equal(&p->an, r.keys[i].e, quot)) continue;
        int before = r.nkeys;
        add_key(&r, x, ir_add(a, ir_mul(a, r.keys[i].v, ir_int(a, x->dtype, c)), r.keys[j].v));
        grew = r.nkeys > before;
      }
    }
  }
  ir_expr *np = r.oom ? NULL : prw_rewrite(&r, ir_simplify(&p->an, pred));
  ir_analyzer_truncate(&p->an, mark);
  ts_free(r.keys);
  ts_free(r.gone);
  if (r.oom) return oom(d);
  if (!np)
    return ts_diag_set(d, TS_ESCHEDULE,
                       "%s: block '%s': its predicate uses loop '%s' in a form that its iter vars' "
                       "bindings do not express; moved, the block would lose that guard",
                       p->prim, b->name, r.bad ? r.bad->name : "?");
  p->ipred = np;
  return TS_OK;
}

/* Is c (a comparison) already one of pred's && clauses? The kept predicate
 * often holds the very bound guard build_nest would add (an imperfect
 * split's vi < 37 and the new range's vi < 37). */
static bool has_clause(plan *p, const ir_expr *pred, const ir_expr *c) {
  if (pred->kind == IR_AND) return has_clause(p, pred->u.bin.a, c) || has_clause(p, pred->u.bin.b, c);
  return pred->kind == c->kind && ir_is_cmp(c->kind) &&
         ir_can_prove_equal(&p->an, pred->u.bin.a, c->u.bin.a) &&
         ir_can_prove_equal(&p->an, pred->u.bin.b, c->u.bin.b);
}

/* Builds the loop nest (ax0, ax1, ...) and the realize of the moved block. */
static ts_status build_nest(plan *p, bool preserve_unit_loops, ts_diag *d) {
  ts_arena *a = sch_arena(p->s);
  const ir_block *b = p->blk;
  int n = b->niter;
  ir_expr **vals = TS_ANEWN(a, ir_expr *, n ? n : 1);
  ir_var **lv = TS_ANEWN(a, ir_var *, n ? n : 1);
  ir_expr **lext = TS_ANEWN(a, ir_expr *, n ? n : 1);
  bool *need_lo = TS_ANEWN(a, bool, n ? n : 1), *need_hi = TS_ANEWN(a, bool, n ? n : 1);
  if (!vals || !lv || !lext || !need_lo || !need_hi) return oom(d);
  int nl = 0;
  ir_expr **mins = TS_ANEWN(a, ir_expr *, n ? n : 1);
  if (!mins) return oom(d);
  for (int k = 0; k < n; k++) {
    const ir_iter_var *it = &b->iters[k];
    ir_expr *bmin = it->dom.min;
    ir_expr *bmax = simp(p, ir_sub(a, ir_add(a, it->dom.min, it->dom.extent), one(a)));
    ir_expr *mn = it->dom.min, *ex = it->dom.extent;
    need_lo[k] = need_hi[k] = false;
    if (p->has_cons[k]) {
      ir_expr *cmin = p->cons[k].min, *cmax = p->cons[k].max;
      bool in_lo = prove(&p->an, IR_LE, bmin, cmin), in_hi = prove(&p->an, IR_LE, cmax, bmax);
      if (in_lo && in_hi) {
        mn = cmin;
        ex = simp(p, ir_add(a, ir_sub(a, cmax, cmin), one(a)));
      } else if (prove(&p->an, IR_LE, cmin, bmin) && prove(&p->an, IR_LE, bmax, cmax)) {
        /* the whole domain is needed */
      } else {
        mn = cmin;
        ex = simp(p, ir_add(a, ir_sub(a, cmax, cmin), one(a)));
        need_lo[k] = !in_lo;
        need_hi[k] = !in_hi;
      }
    }
    if (!mn || !ex) return oom(d);
    mins[k] = mn;
    int64_t e;
    if (!preserve_unit_loops && ir_as_int(ex, &e) && e == 1) {
      vals[k] = mn;
      continue;
    }
    char name[32];
    snprintf(name, sizeof name, "ax%d", nl);
    ir_var *v = ir_var_new(a, name, ir_dt(IR_I64));
    if (!v) return oom(d);
    lv[nl] = v;
    lext[nl] = ex;
    nl++;
    vals[k] = ir_add(a, mn, ir_var_ref(a, v));
    if (!vals[k]) return oom(d);
  }
  int mark = p->an.n;
  for (int i = 0; i < nl; i++)
    if (ir_analyzer_bind(&p->an, lv[i], ir_i64(a, 0), lext[i])) return oom(d);
  for (int k = 0; k < n; k++)
    if (!(vals[k] = simp(p, vals[k]))) return oom(d);
  /* the old predicate in the new bindings, then the new bound guards */
  ir_expr *pred = ir_bool(a, true);
  if (p->ipred) {
    ir_var_map m;
    ir_var_map_init(&m);
    bool bad = false;
    for (int k = 0; k < n && !bad; k++) bad = ir_var_map_put(&m, b->iters[k].var, vals[k]) != TS_OK;
    pred = bad ? NULL : simp(p, ir_subst_expr(a, p->ipred, &m));
    ir_var_map_fini(&m);
    if (!pred) return oom(d);
  }
  for (int k = 0; k < n && pred; k++) {
    const ir_iter_var *it = &b->iters[k];
    if (need_lo[k]) {
      ir_expr *c = simp(p, ir_binop(a, IR_LE, it->dom.min, vals[k]));
      int64_t t;
      if (!c) return oom(d);
      if (!(ir_as_int(c, &t) && t) && !has_clause(p, pred, c)) pred = ir_and(a, pred, c);
    }
    if (need_hi[k]) {
      ir_expr *end = simp(p, ir_add(a, it->dom.min, it->dom.extent));
      ir_expr *c = end ? simp(p, ir_lt(a, vals[k], end)) : NULL;
      int64_t t;
      if (!c) return oom(d);
      if (!(ir_as_int(c, &t) && t) && !has_clause(p, pred, c)) pred = ir_and(a, pred, c);
    }
  }
  ir_analyzer_truncate(&p->an, mark);
  if (!pred) return oom(d);
  ir_stmt *st = ir_realize(a, (ir_block *)b, vals, pred);
  for (int i = nl - 1; i >= 0 && st; i--) st = ir_for(a, lv[i], ir_i64(a, 0), lext[i], IR_FOR_SERIAL, st);
  if (!st) return oom(d);
  p->nest = st;
  return TS_OK;
}

static ts_status plan_make(plan *p, sch_state *s, sch_block blk, sch_loop l,
                           bool preserve_unit_loops, int index, ts_diag *d) {
  ts_status st = sch_find_block(s, blk.name, &p->pb, p->prim, d);
  if (st) return st;
  st = sch_find_loop(s, l.var, &p->pl, p->prim, d);
  if (st) return st;
  p->blk = p->pb.node[p->pb.n - 1]->u.realize.block;
  p->loop = p->pl.node[p->pl.n - 1];
  st = check_basic(p, d);
  if (st) return st;
  if (sch_child_realizes(p->scope->body, &p->kids)) return oom(d);
  st = find_deps(p, d);
  if (!st) st = find_slot(p, index, d);
  if (!st) st = check_producer_reductions(p, d);
  if (!st) st = sch_bind_path_loops(&p->an, &p->pl, p->pl.n) ? oom(d) : TS_OK;
  if (!st) st = compute_required(p, d);
  if (!st) st = derive_domains(p, d);
  if (!st) st = keep_predicate(p, d);
  if (!st) st = build_nest(p, preserve_unit_loops, d);
  return st;
}

static ts_status plan_apply(plan *p, ts_diag *d) {
  sch_state *s = p->s;
  ts_arena *a = sch_arena(s);
  ir_stmt *saved = s->func->body;
  ts_status st = sch_remove_leaf(s, &p->pb, p->prim, d);
  if (st) return st;
  sch_path *pl = ts_malloc(sizeof *pl);
  if (!pl) {
    s->func->body = saved;
    return oom(d);
  }
  st = sch_find_loop(s, p->loop->u.loop.var, pl, p->prim, d);
  if (!st) {
    ir_stmt *loop = pl->node[pl->n - 1];
    ir_stmt *body = loop->u.loop.body;
    int nsub = body->kind == IR_SEQ ? body->u.seq.n : 1;
    ir_stmt *const *subs = body->kind == IR_SEQ ? body->u.seq.stmts : &loop->u.loop.body;
    ir_stmt **ns = TS_ANEWN(a, ir_stmt *, nsub + 1);
    ir_stmt *nl = ir_stmt_clone(a, loop);
    if (!ns || !nl) {
      st = oom(d);
    } else {
      int m = 0;
      for (int i = 0; i <= nsub; i++) {
        if (i == p->pos) ns[m++] = p->nest;
        if (i < nsub) ns[m++] = subs[i];
      }
      nl->u.loop.body = ir_seq(a, nsub + 1, ns);
      st = nl->u.loop.body ? sch_replace(s, pl, pl->n - 1, nl, d) : oom(d);
    }
  }
  ts_free(pl);
  if (st) s->func->body = saved;
  return st;
}

ts_status sch_compute_at_check(sch_state *s, sch_block b, sch_loop l, bool reverse,
                               bool preserve_unit_loops, int index, bool apply, ts_diag *d) {
  plan *p = ts_calloc(1, sizeof *p);
  if (!p) return oom(d);
  p->s = s;
  p->reverse = reverse;
  p->prim = reverse ? "reverse_compute_at" : "compute_at";
  ts_vec_init(&p->kids);
  ts_vec_init(&p->producers);
  ts_vec_init(&p->consumers);
  ir_analyzer_init(&p->an, sch_arena(s));
  ir_dom_map_init(&p->dom);
  ts_status st = plan_make(p, s, b, l, preserve_unit_loops, index, d);
  if (!st && apply) st = plan_apply(p, d);
  plan_fini(p);
  ts_free(p);
  return st;
}

static ts_status at_entry(sch_state *s, sch_block b, sch_loop l, bool reverse, bool preserve,
                          int index, ts_diag *d) {
  const char *prim = reverse ? "reverse_compute_at" : "compute_at";
  if (l.mark == SCH_LOC_ROOT) {
    sch_path *p = ts_malloc(sizeof *p);
    if (!p) return oom(d);
    ts_status st = sch_find_block(s, b.name, p, prim, d);
    ts_free(p);
    return st ? st : sch_finish(s, TS_OK, d);
  }
  if (l.mark == SCH_LOC_INLINE)
    return reverse ? sch_reverse_compute_inline(s, b, d) : sch_compute_inline(s, b, d);
  ts_status st = sch_compute_at_check(s, b, l, reverse, preserve, index, true, d);
  if (st) return st;
  return sch_finish(s, TS_OK, d);
}

ts_status sch_compute_at(sch_state *s, sch_block b, sch_loop l, bool preserve_unit_loops, int index,
                         ts_diag *d) {
  return at_entry(s, b, l, false, preserve_unit_loops, index, d);
}

ts_status sch_reverse_compute_at(sch_state *s, sch_block b, sch_loop l, bool preserve_unit_loops,
                                 int index, ts_diag *d) {
  return at_entry(s, b, l, true, preserve_unit_loops, index, d);
}

/* ---- sample_compute_location -------------------------------------------- */

/* TVM's GetLoopIterType: S when only S iter vars of the blocks directly
 * below use the loop, R when only R ones do, else opaque (0). */
enum { LOOP_S = 1, LOOP_R = 2, LOOP_OTHER = 3 };
static int loop_iter_type(const ir_stmt *loop) {
  ts_vec v;
  ts_vec_init(&v);
  int ns = 0, nr = 0, no = 0;
  if (sch_child_realizes(loop->u.loop.body, &v) == TS_OK) {
    for (size_t i = 0; i < v.len; i++) {
      const ir_stmt *r = v.items[i];
      const ir_block *b = r->u.realize.block;
      for (int k = 0; k < b->niter; k++) {
        if (!ir_expr_uses_var(r->u.realize.iter_values[k], loop->u.loop.var)) continue;
        if (b->iters[k].type == IR_ITER_S) ns++;
        else if (b->iters[k].type == IR_ITER_R) nr++;
        else no++;
      }
    }
  } else {
    no = 1;
  }
  ts_vec_fini(&v);
  if (no || (ns && nr)) return LOOP_OTHER;
  return nr ? LOOP_R : LOOP_S;
}

typedef struct loc_list {
  int n;
  int idx[SCH_MAX_DEPTH + 2];
  sch_loop loop[SCH_MAX_DEPTH + 2];
} loc_list;

static ts_status collect_locations(sch_state *s, sch_block b, loc_list *out, ts_diag *d) {
  static const char *prim = "sample_compute_location";
  out->n = 0;
  ts_diag scratch;
  ts_diag_clear(&scratch);
  sch_path *pb = ts_malloc(sizeof *pb), *pc = ts_malloc(sizeof *pc), *pc0 = ts_malloc(sizeof *pc0);
  sch_block *cons = NULL;
  int ncons = 0;
  ts_status st = (!pb || !pc || !pc0) ? oom(d) : sch_find_block(s, b.name, pb, prim, d);
  if (st) goto done;
  if (sch_compute_inline_check(s, b, &scratch) == TS_OK) {
    out->idx[out->n] = -2;
    out->loop[out->n++] = (sch_loop){NULL, SCH_LOC_INLINE};
  }
  out->idx[out->n] = -1;
  out->loop[out->n++] = (sch_loop){NULL, SCH_LOC_ROOT};
  if (sch_path_scope(pb, pb->n - 1) < 0) goto done;
  st = sch_get_consumers(s, b, &cons, &ncons, d);
  if (st || ncons == 0) goto done;
  /* The boundary: the deepest loop or block above every consumer. */
  st = sch_find_block(s, cons[0].name, pc0, prim, d);
  if (st) goto done;
  int common = pc0->n - 1; /* nodes [0, common) are shared by all consumers */
  for (int i = 1; i < ncons; i++) {
    st = sch_find_block(s, cons[i].name, pc, prim, d);
    if (st) goto done;
    int k = 0;
    while (k < common && k < pc->n && pc->node[k] == pc0->node[k]) k++;
    common = k;
  }
  int boundary = -1;
  for (int k = common - 1; k >= 0; k--)
    if (pc0->node[k]->kind == IR_FOR || pc0->node[k]->kind == IR_BLOCK_REALIZE) {
      boundary = k;
      break;
    }
  if (boundary < 0 || pc0->node[boundary]->kind != IR_FOR) goto done;
  int scope = sch_path_scope(pc0, pc0->n - 1);
  /* The first consumer's loops from the scope down to the boundary. */
  int nloops = 0, last_s = -1;
  int pos[SCH_MAX_DEPTH], type[SCH_MAX_DEPTH];
  for (int k = scope + 1; k <= boundary; k++) {
    if (pc0->node[k]->kind != IR_FOR) continue;
    type[nloops] = loop_iter_type(pc0->node[k]);
    if (type[nloops] == LOOP_S) last_s = nloops;
    pos[nloops++] = k;
  }
  bool seen_r = false;
  for (int i = 0; i < nloops; i++) {
    const ir_stmt *l = pc0->node[pos[i]];
    int64_t e;
    if (ir_as_int(l->u.loop.extent, &e) && e == 1) continue;
    if (type[i] == LOOP_S) {
      if (seen_r) break;
    } else {
      seen_r = true;
      if (i > last_s) break;
    }
    sch_loop cand = {l->u.loop.var, SCH_LOC_LOOP};
    ts_diag_clear(&scratch);
    if (sch_compute_at_check(s, b, cand, false, true, -1, false, &scratch) == TS_OK) {
      out->idx[out->n] = i;
      out->loop[out->n++] = cand;
    }
  }
done:
  ts_free(pb);
  ts_free(pc);
  ts_free(pc0);
  return st;
}

ts_status sch_sample_compute_location(sch_state *s, sch_block b, const int *decision,
                                      sch_loop *out, int *index, ts_diag *d) {
  loc_list *L = ts_malloc(sizeof *L);
  if (!L) return oom(d);
  ts_status st = collect_locations(s, b, L, d);
  if (st) {
    ts_free(L);
    return st;
  }
  int pick;
  if (decision) {
    /* The stored index, else the nearest smaller candidate, else root. */
    pick = -1;
    for (int i = 0; i < L->n; i++)
      if (L->idx[i] <= *decision) pick = i;
    if (pick < 0)
      for (int i = 0; i < L->n; i++)
        if (L->idx[i] == -1) pick = i;
  } else {
    pick = (int)ts_rng_below(&s->rng, (uint64_t)L->n);
  }
  *out = L->loop[pick];
  *index = L->idx[pick];
  ts_free(L);
  return TS_OK;
}
