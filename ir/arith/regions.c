/* ir/arith/regions.c — the block access-region detector (TVM's
 * sblock_access_region_detector): recomputes a block's reads and writes
 * from its init and body. Each load and store contributes, per dimension,
 * the interval of its index with the vars of loops (and lets) inside the
 * block relaxed over their ranges; a nested block contributes its own
 * regions with its iter vars replaced by its bindings and relaxed the same
 * way (its body is not entered: its regions are trusted, as in TVM). Per
 * buffer the result is the hull of all accesses, listed in order of first
 * access. Buffers the block (or an allocate inside it) allocates are left
 * out. For a reduction block (init != NULL) a buffer that is written is not
 * listed among the reads: it is the accumulator (TVM's create_prim_func). */
#include <string.h>

#include "arith_int.h"

typedef struct access {
  ir_buffer *buf;
  int ndim;
  ir_intset *dims; /* arena; NULL when the access shape was inconsistent */
} access;

typedef struct acc_list {
  access *items;
  int n, cap;
} acc_list;

typedef struct detector {
  ir_analyzer an;
  ir_dom_map dom;
  acc_list reads, writes;
  ts_vec excluded; /* ir_buffer * */
  ts_status st;
} detector;

static void fail(detector *dt, ts_status st) {
  if (dt->st == TS_OK) dt->st = st;
}

static access *find_acc(acc_list *l, const ir_buffer *b) {
  for (int i = 0; i < l->n; i++)
    if (l->items[i].buf == b) return &l->items[i];
  return NULL;
}

/* Adds one access (ndim sets) to l, uniting with the buffer's earlier ones. */
static void record(detector *dt, acc_list *l, ir_buffer *b, int ndim, const ir_intset *sets) {
  if (dt->st != TS_OK) return;
  access *acc = find_acc(l, b);
  if (!acc) {
    if (l->n == l->cap) {
      int cap = l->cap ? l->cap * 2 : 8;
      access *it = ts_realloc(l->items, sizeof *it * (size_t)cap);
      if (!it) {
        fail(dt, TS_ENOMEM);
        return;
      }
      l->items = it;
      l->cap = cap;
    }
    acc = &l->items[l->n++];
    acc->buf = b;
    acc->ndim = ndim;
    acc->dims = TS_ANEWN(dt->an.arena, ir_intset, ndim > 0 ? ndim : 1);
    if (!acc->dims) {
      fail(dt, TS_ENOMEM);
      return;
    }
    memcpy(acc->dims, sets, sizeof *sets * (size_t)ndim);
    return;
  }
  if (!acc->dims) return;
  if (acc->ndim != ndim) {
    acc->dims = NULL; /* mixed index shapes: the whole buffer */
    return;
  }
  for (int d = 0; d < ndim; d++) acc->dims[d] = ir_intset_union(&dt->an, acc->dims[d], sets[d]);
}

static void visit_expr(detector *dt, const ir_expr *e);

static void access_idx(detector *dt, acc_list *l, ir_buffer *b, int n, ir_expr *const *idx) {
  ir_intset small[8];
  ir_intset *sets = n <= 8 ? small : TS_ANEWN(dt->an.arena, ir_intset, n);
  if (!sets) {
    fail(dt, TS_ENOMEM);
    return;
  }
  for (int d = 0; d < n; d++) sets[d] = ir_eval_set(&dt->an, idx[d], &dt->dom);
  record(dt, l, b, n, sets);
}

/* Loads record their accesses; the visitor walks the rest. */
static bool expr_cb(void *ctx, const ir_expr *e) {
  detector *dt = ctx;
  if (dt->st != TS_OK) return false;
  /* an access_ptr's extent is unknown here: the block's declared regions
   * carry it; a call_extern's (target intrinsic's) operand loads count */
  if (e->kind == IR_LOAD) access_idx(dt, &dt->reads, e->u.load.buf, e->u.load.nidx, e->u.load.idx);
  return true;
}

static void visit_expr(detector *dt, const ir_expr *e) {
  ir_visitor v = {.expr = expr_cb, .ctx = dt};
  ir_visit_expr(&v, e);
}

/* A nested block's region (in its iter vars), seen through its bindings. */
static void nested_region(detector *dt, acc_list *l, const ir_region *r, const ir_var_map *bind) {
  ts_arena *a = dt->an.arena;
  ir_intset small[8];
  ir_intset *sets = r->ndim <= 8 ? small : TS_ANEWN(a, ir_intset, r->ndim);
  if (!sets) {
    fail(dt, TS_ENOMEM);
    return;
  }
  for (int d = 0; d < r->ndim; d++) {
    ir_expr *mn = ir_subst_expr(a, r->ranges[d].min, bind);
    ir_expr *ex = ir_subst_expr(a, r->ranges[d].extent, bind);
    int64_t e;
    if (!mn || !ex) {
      fail(dt, TS_ENOMEM);
      return;
    }
    if (ir_as_int(ex, &e) && e <= 0) {
      sets[d] = (ir_intset){NULL, NULL, true};
      continue;
    }
    ir_expr *last = ir_sub(a, ir_add(a, mn, ex), ir_int(a, ex->dtype, 1));
    if (!last) {
      fail(dt, TS_ENOMEM);
      return;
    }
    ir_intset lo = ir_eval_set(&dt->an, mn, &dt->dom);
    ir_intset hi = ir_eval_set(&dt->an, last, &dt->dom);
    sets[d] = (ir_intset){lo.min, hi.max, lo.empty || hi.empty};
  }
  record(dt, l, r->buf, r->ndim, sets);
}

static void visit_stmt(detector *dt, const ir_stmt *s);

static void exclude(detector *dt, ir_buffer *b) {
  ts_status st = ts_vec_push(&dt->excluded, b);
  if (st != TS_OK) fail(dt, st);
}

static bool dom_push(detector *dt, ir_var *v, ir_intset s) {
  ir_dom_map *m = &dt->dom;
  if (m->n == m->cap) {
    int cap = m->cap ? m->cap * 2 : 8;
    const ir_var **vs = ts_realloc(m->vars, sizeof *vs * (size_t)cap);
    if (!vs) return false;
    m->vars = vs;
    ir_intset *ss = ts_realloc(m->sets, sizeof *ss * (size_t)cap);
    if (!ss) return false;
    m->sets = ss;
    m->cap = cap;
  }
  m->vars[m->n] = v;
  m->sets[m->n] = s;
  m->n++;
  return true;
}

/* Loops and lets bind their var's range for the accesses below them;
 * blocks are seen through their declared regions (not walked into). */
static bool stmt_cb(void *ctx, const ir_stmt *s) {
  detector *dt = ctx;
  if (dt->st != TS_OK) return false;
  ts_arena *a = dt->an.arena;
  switch (s->kind) {
  case IR_FOR: {
    visit_expr(dt, s->u.loop.min);
    visit_expr(dt, s->u.loop.extent);
    ir_intset r = ir_intset_range(a, s->u.loop.min, s->u.loop.extent);
    ir_intset lo = r.empty ? r : ir_eval_set(&dt->an, r.min, &dt->dom);
    ir_intset hi = r.empty ? r : ir_eval_set(&dt->an, r.max, &dt->dom);
    int n0 = dt->dom.n;
    if (!dom_push(dt, s->u.loop.var, (ir_intset){lo.min, hi.max, r.empty})) {
      fail(dt, TS_ENOMEM);
      return false;
    }
    visit_stmt(dt, s->u.loop.body);
    dt->dom.n = n0;
    return false;
  }
  case IR_BLOCK_REALIZE: {
    const ir_block *b = s->u.realize.block;
    for (int i = 0; i < b->niter; i++) visit_expr(dt, s->u.realize.iter_values[i]);
    visit_expr(dt, s->u.realize.predicate);
    ir_var_map bind;
    ir_var_map_init(&bind);
    for (int i = 0; i < b->niter; i++)
      if (ir_var_map_put(&bind, b->iters[i].var, s->u.realize.iter_values[i]) != TS_OK)
        fail(dt, TS_ENOMEM);
    for (int i = 0; i < b->nreads && dt->st == TS_OK; i++)
      nested_region(dt, &dt->reads, &b->reads[i], &bind);
    for (int i = 0; i < b->nwrites && dt->st == TS_OK; i++)
      nested_region(dt, &dt->writes, &b->writes[i], &bind);
    ir_var_map_fini(&bind);
    return false;
  }
  case IR_LET: {
    visit_expr(dt, s->u.let.value);
    int n0 = dt->dom.n;
    if (!dom_push(dt, s->u.let.var, ir_eval_set(&dt->an, s->u.let.value, &dt->dom))) {
      fail(dt, TS_ENOMEM);
      return false;
    }
    visit_stmt(dt, s->u.let.body);
    dt->dom.n = n0;
    return false;
  }
  case IR_ALLOCATE:
    exclude(dt, s->u.alloc.buf);
    return true;
  case IR_STORE:
    access_idx(dt, &dt->writes, s->u.store.buf, s->u.store.nidx, s->u.store.idx);
    return true;
  default: /* sequences, ifs, evaluates: walked by the visitor */
    return true;
  }
}

static void visit_stmt(detector *dt, const ir_stmt *s) {
  ir_visitor v = {.expr = expr_cb, .stmt = stmt_cb, .ctx = dt};
  ir_visit_stmt(&v, s);
}

static bool is_excluded(const detector *dt, const ir_block *b, const ir_buffer *buf) {
  for (int i = 0; i < b->nalloc; i++)
    if (b->allocs[i] == buf) return true;
  for (size_t i = 0; i < dt->excluded.len; i++)
    if (dt->excluded.items[i] == buf) return true;
  return false;
}

/* Turns an access into a region: [min, max] → (min, max - min + 1); an
 * unbounded side falls back to the buffer's full extent in that dimension. */
static bool to_region(detector *dt, const access *acc, ir_region *out) {
  ts_arena *a = dt->an.arena;
  ir_buffer *b = acc->buf;
  int ndim = acc->dims ? acc->ndim : b->ndim;
  out->buf = b;
  out->ndim = ndim;
  out->ranges = TS_ANEWN(a, ir_range, ndim > 0 ? ndim : 1);
  if (!out->ranges) return false;
  for (int d = 0; d < ndim; d++) {
    const ir_intset *s = acc->dims ? &acc->dims[d] : NULL;
    bool full_dim = d < b->ndim && b->shape && b->shape[d];
    ir_dtype it = full_dim ? b->shape[d]->dtype : ir_dt(IR_I32);
    ir_expr *mn, *ex;
    if (s && s->empty) {
      mn = ir_int(a, it, 0);
      ex = ir_int(a, it, 0);
    } else if (s && s->min && s->max) {
      mn = ir_simplify(&dt->an, s->min);
      ex = mn ? ir_simplify(&dt->an, ir_add(a, ir_sub(a, s->max, mn),
                                            ir_int(a, s->max->dtype, 1))) : NULL;
    } else if (full_dim) {
      mn = ir_int(a, it, 0);
      ex = b->shape[d];
    } else {
      /* An index shape the buffer does not have (flat access): the whole
       * allocation, as far as we know it. */
      int64_t size = ir_buffer_const_size(b);
      mn = ir_int(a, it, 0);
      ex = ir_int(a, it, size > 0 ? size : INT32_MAX);
    }
    if (!mn || !ex) return false;
    out->ranges[d] = (ir_range){mn, ex};
  }
  return true;
}

static ts_status finish(detector *dt, ir_block *b, const acc_list *l, bool drop_written,
                        int *n_out, ir_region **out) {
  ts_arena *a = dt->an.arena;
  ir_region *rs = TS_ANEWN(a, ir_region, l->n > 0 ? l->n : 1);
  if (!rs) return TS_ENOMEM;
  int n = 0;
  for (int i = 0; i < l->n; i++) {
    const access *acc = &l->items[i];
    if (is_excluded(dt, b, acc->buf)) continue;
    if (drop_written && find_acc(&dt->writes, acc->buf)) continue;
    if (!to_region(dt, acc, &rs[n])) return TS_ENOMEM;
    n++;
  }
  *n_out = n;
  *out = n > 0 ? rs : NULL;
  return TS_OK;
}

ts_status ir_block_detect_regions(ts_arena *a, ir_block *b, ts_diag *d) {
  if (!a || !b) return ts_diag_set(d, TS_EINVAL, "detect_regions: NULL block or arena");
  detector dt;
  memset(&dt, 0, sizeof dt);
  ir_analyzer_init(&dt.an, a);
  ir_dom_map_init(&dt.dom);
  ts_vec_init(&dt.excluded);
  /* The block's iter vars stay symbolic; their domains help decide the
   * hull's min/max. */
  for (int i = 0; i < b->niter && dt.st == TS_OK; i++)
    if (ir_analyzer_bind(&dt.an, b->iters[i].var, b->iters[i].dom.min,
                         b->iters[i].dom.extent) != TS_OK)
      fail(&dt, TS_ENOMEM);
  visit_stmt(&dt, b->init);
  visit_stmt(&dt, b->body);
  int nr = 0, nw = 0;
  ir_region *reads = NULL, *writes = NULL;
  ts_status st = dt.st;
  if (st == TS_OK) st = finish(&dt, b, &dt.reads, b->init != NULL, &nr, &reads);
  if (st == TS_OK) st = finish(&dt, b, &dt.writes, false, &nw, &writes);
  if (st == TS_OK) {
    b->nreads = nr;
    b->reads = reads;
    b->nwrites = nw;
    b->writes = writes;
  }
  ts_free(dt.reads.items);
  ts_free(dt.writes.items);
  ts_vec_fini(&dt.excluded);
  ir_dom_map_fini(&dt.dom);
  ir_analyzer_fini(&dt.an);
  if (st != TS_OK)
    return ts_diag_set(d, st, "detect_regions: block '%s': %s", b->name ? b->name : "?",
                       ts_strerror(st));
  return TS_OK;
}
