/* space.c — the design space (TVM's PostOrderApply): the target's rules
 * (its row of targets.c) applied post-order over the blocks (last block first), each rule
 * over all blocks before the next, turning the unscheduled function into a
 * few sketches; and candidates, a sketch replayed with fresh or given
 * decisions and then postprocessed (postproc.c). Also the IR helpers the
 * rules share (search_int.h). */
#include <string.h>
#include <unistd.h>

#include "search/search_int.h"

/* ---- IR helpers ---- */
/* One walk for the lookups below: what it looks for is what is set. */
typedef struct walk_ctx {
  const char *name;       /* the realize of this block */
  const ir_var *var;      /* the loop of this var */
  const ir_var *red_of;   /* a realize binding this var into a reduction iter */
  const ir_stmt *found;
  ts_vec *names;          /* every block name but root */
  bool red;               /* any non-spatial iter var */
} walk_ctx;

static bool walk_cb(void *ctx, const ir_stmt *s) {
  walk_ctx *c = ctx;
  if (c->found) return false;
  if (s->kind == IR_FOR && c->var && s->u.loop.var == c->var) c->found = s;
  if (s->kind == IR_BLOCK_REALIZE) {
    const ir_block *b = s->u.realize.block;
    if (c->name && !strcmp(b->name, c->name)) c->found = s;
    if (c->red_of && srch_realize_uses_in_reduction(s, c->red_of)) c->found = s;
    if (c->names && strcmp(b->name, "root")) ts_vec_push(c->names, (void *)b->name);
    for (int i = 0; i < b->niter; i++)
      if (b->iters[i].type != IR_ITER_S) c->red = true;
  }
  return !c->found;
}

static walk_ctx walk(walk_ctx c, const ir_stmt *s) {
  ir_visitor v = {.stmt = walk_cb, .ctx = &c};
  ir_visit_stmt(&v, s);
  return c;
}

const ir_stmt *srch_find_realize(const ir_func *f, const char *name) {
  return walk((walk_ctx){.name = name}, f->body).found;
}

const ir_stmt *srch_find_loop(const ir_func *f, const ir_var *var) {
  return walk((walk_ctx){.var = var}, f->body).found;
}

int srch_block_names(const ir_func *f, ts_arena *a, const char ***out) {
  ts_vec names;
  ts_vec_init(&names);
  walk((walk_ctx){.names = &names}, f->body);
  const char **o = TS_ANEWN(a, const char *, names.len + 1);
  int n = 0;
  if (o)
    for (size_t i = 0; i < names.len; i++) o[n++] = ts_arena_strdup(a, names.items[i]);
  ts_vec_fini(&names);
  *out = o;
  return n;
}

bool srch_func_has_reduction(const ir_func *f) { return walk((walk_ctx){0}, f->body).red; }

static bool volume_cb(void *ctx, const ir_stmt *s) {
  double *v = ctx;
  if (s->kind != IR_BLOCK_REALIZE || !strcmp(s->u.realize.block->name, "root")) return true;
  const ir_block *b = s->u.realize.block;
  double p = 1;
  for (int i = 0; i < b->niter; i++) {
    int64_t e;
    p *= ir_as_int(b->iters[i].dom.extent, &e) && e > 0 ? (double)e : 1e18; /* symbolic: never small */
  }
  *v += p;
  return true;
}

double srch_func_volume(const ir_func *f) {
  double v = 0;
  ir_visitor vis = {.stmt = volume_cb, .ctx = &v};
  ir_visit_stmt(&vis, f->body);
  return v;
}

bool srch_realize_uses_in_reduction(const ir_stmt *r, const ir_var *v) {
  const ir_block *b = r->u.realize.block;
  for (int i = 0; i < b->niter; i++)
    if (b->iters[i].type != IR_ITER_S && ir_expr_uses_var(r->u.realize.iter_values[i], v)) return true;
  return false;
}

bool srch_loop_is_reduction(const ir_stmt *s, const ir_var *v) { return walk((walk_ctx){.red_of = v}, s).found; }

/* ---- the vector span of an iter var ---- */
typedef struct span_ctx {
  const ir_var *v;
  int64_t span; /* gcd of the divisors seen; 0: none */
} span_ctx;

static int64_t gcd64(int64_t a, int64_t b) {
  while (b) {
    int64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

/* A division or modulo of an expression of v by a constant d in a last
 * index: the index stays affine in v only over aligned runs of d. */
static bool span_expr(void *ctx, const ir_expr *e) {
  span_ctx *c = ctx;
  int64_t d;
  if ((e->kind == IR_FLOORDIV || e->kind == IR_FLOORMOD || e->kind == IR_DIV) && ir_as_int(e->u.bin.b, &d) && d > 0 &&
      ir_expr_uses_var(e->u.bin.a, c->v))
    c->span = gcd64(c->span, d);
  return true;
}

static void span_last(span_ctx *c, int n, ir_expr *const *idx) {
  if (n < 1) return;
  ir_visitor v = {.expr = span_expr, .ctx = c};
  ir_visit_expr(&v, idx[n - 1]);
}

static bool span_load(void *ctx, const ir_expr *e) {
  if (e->kind == IR_LOAD) span_last(ctx, e->u.load.nidx, e->u.load.idx);
  return true;
}

static bool span_store(void *ctx, const ir_stmt *s) {
  if (s->kind == IR_STORE) span_last(ctx, s->u.store.nidx, s->u.store.idx);
  return true;
}

int64_t srch_vector_span(const ir_block *b, const ir_var *v) {
  span_ctx c = {v, 0};
  ir_visitor vis = {.expr = span_load, .stmt = span_store, .ctx = &c};
  if (b->body) ir_visit_stmt(&vis, b->body);
  if (b->init) ir_visit_stmt(&vis, b->init);
  return c.span;
}

bool srch_block_is_tileable_reduction(const ir_block *b) {
  if (b->nwrites != 1 || b->nreads < 1 || !b->init) return false;
  bool has_r = false;
  for (int i = 0; i < b->niter; i++) {
    if (b->iters[i].type == IR_ITER_R) has_r = true;
    else if (b->iters[i].type != IR_ITER_S) return false;
  }
  return has_r;
}

bool srch_bind_loop_iter(const ir_stmt *r, const ir_var *v, int *iter_of, int l) {
  const ir_block *b = r->u.realize.block;
  iter_of[l] = -1;
  for (int i = 0; i < b->niter; i++) {
    const ir_expr *e = r->u.realize.iter_values[i];
    if (e->kind == IR_VAR && e->u.var == v) iter_of[l] = i;
  }
  if (iter_of[l] < 0) return false;
  for (int k = 0; k < l; k++)
    if (iter_of[k] == iter_of[l]) return false;
  return true;
}

const ir_stmt *srch_block_loops(sch_traced *t, const char *block, sch_loop **cl, int *nl) {
  const ir_stmt *r = srch_find_realize(sch_traced_func(t), block);
  ts_diag q;
  ts_diag_clear(&q);
  if (!r || sch_get_loops(sch_traced_state(t), (sch_block){.name = block}, cl, nl, &q)) return NULL;
  return r;
}

ts_status srch_push(ts_vec *out, sch_traced *t, ts_diag *d) {
  if (ts_vec_push(out, t)) {
    sch_traced_free(t);
    return ts_diag_set(d, TS_ENOMEM, "out of memory");
  }
  return TS_OK;
}

sch_traced *srch_fork(const srch_rule_ctx *c, sch_traced *t, ts_diag *d) {
  return sch_trace_replay(sch_traced_trace(t), c->func, c->seed, d);
}

sch_traced *srch_fork_block(const srch_rule_ctx *c, sch_traced *t, const char *block, int *b, ts_diag *d) {
  sch_traced *f = srch_fork(c, t, d);
  if (f && sch_t_get_block(f, block, b, d)) {
    sch_traced_free(f);
    return NULL;
  }
  return f;
}

static void free_states(ts_vec *v) {
  for (size_t i = 0; i < v->len; i++) sch_traced_free(v->items[i]);
  ts_vec_fini(v);
}

/* A copy of tr with every sampler's decision dropped. */
static sch_trace *strip_decisions(const sch_trace *tr) {
  sch_trace *c = sch_trace_copy(tr);
  if (!c) return NULL;
  for (int i = 0; i < sch_trace_len(c); i++)
    if (sch_trace_inst(c, i)->decision.n > 0) sch_trace_set_decision(c, i, NULL, NULL);
  return c;
}

ts_status srch_sketches(const ir_func *f, const cg_target *t, const srch_space_opts *o, sch_trace ***out,
                        int *n, ts_diag *d) {
  *out = NULL;
  *n = 0;
  srch_rule_ctx c = {.func = f, .target = t, .num_cores = 0, .max_innermost = 64, .seed = 1};
  unsigned mask = 0;
  if (o) {
    c.num_cores = o->num_cores;
    if (o->max_innermost > 0) c.max_innermost = o->max_innermost;
    mask = o->rule_mask;
  }
  if (c.num_cores <= 0 && t) c.num_cores = t->num_cores;
  if (c.num_cores <= 0) {
    long nc = sysconf(_SC_NPROCESSORS_ONLN);
    c.num_cores = nc > 0 ? (int)nc : 1;
  }
  ts_vec states;
  ts_vec_init(&states);
  sch_traced *t0 = sch_traced_new(f, c.seed, d);
  if (!t0) return d ? d->code : TS_ENOMEM;
  if (ts_vec_push(&states, t0)) {
    sch_traced_free(t0);
    return ts_diag_set(d, TS_ENOMEM, "out of memory");
  }
  ts_status st = TS_OK;
  /* the rule list is the target's row of the space table (targets.c) */
  const srch_space *sp = srch_space_of(t);
  for (int ri = 0; ri < sp->nrules && !st; ri++) {
    srch_rule r = sp->rules[ri];
    if (mask && !(mask & (1u << r))) continue;
    srch_rule_fn fn = srch_rule_fn_of(r);
    ts_arena a;
    ts_arena_init(&a);
    const char **names;
    int nb = srch_block_names(sch_traced_func(states.items[0]), &a, &names);
    for (int bi = nb - 1; bi >= 0 && !st; bi--) {
      ts_vec next;
      ts_vec_init(&next);
      for (size_t si = 0; si < states.len; si++) {
        sch_traced *s = states.items[si];
        states.items[si] = NULL;
        if (!st) st = fn(&c, s, names[bi], &next, d);
        else sch_traced_free(s);
      }
      ts_vec_fini(&states);
      states = next;
    }
    ts_arena_fini(&a);
  }
  if (st) {
    free_states(&states);
    return st;
  }
  sch_trace **arr = ts_calloc(states.len ? states.len : 1, sizeof *arr);
  if (!arr) {
    free_states(&states);
    return ts_diag_set(d, TS_ENOMEM, "out of memory");
  }
  for (size_t i = 0; i < states.len; i++) {
    arr[i] = strip_decisions(sch_traced_trace(states.items[i]));
    if (!arr[i]) st = TS_ENOMEM;
  }
  size_t ns = states.len;
  free_states(&states);
  if (st) {
    for (size_t i = 0; i < ns; i++) sch_trace_free(arr[i]);
    ts_free(arr);
    return ts_diag_set(d, TS_ENOMEM, "out of memory");
  }
  *out = arr;
  *n = (int)ns;
  return TS_OK;
}

/* ---- candidates ---- */
static bool has_postproc(const sch_trace *tr) {
  for (int i = 0; i < sch_trace_len(tr); i++)
    if (sch_trace_inst(tr, i)->kind == SCH_I_ENTER_POSTPROC) return true;
  return false;
}

sch_traced *srch_instantiate(const sch_trace *tr, const ir_func *f, const cg_target *t, bool resample,
                             uint64_t seed, ts_diag *d) {
  return srch_instantiate_opts(tr, f, t, resample, seed, NULL, d);
}

sch_traced *srch_instantiate_opts(const sch_trace *tr, const ir_func *f, const cg_target *t, bool resample,
                                  uint64_t seed, const srch_postproc_opts *po, ts_diag *d) {
  /* a logged candidate carries its postprocessing: replay the part before
   * EnterPostproc and postprocess again (deterministic, so the same). */
  sch_trace *own = NULL;
  if (has_postproc(tr)) {
    if (!(own = sch_trace_simplified(tr, true))) {
      ts_diag_set(d, TS_ENOMEM, "out of memory");
      return NULL;
    }
    tr = own;
  }
  sch_traced *ts = sch_traced_new(f, seed, d);
  if (!ts) {
    sch_trace_free(own);
    return NULL;
  }
  ts_status st = sch_trace_apply(tr, ts, resample, NULL, d);
  sch_trace_free(own);
  if (!st) st = srch_postprocess_opts(ts, t, po, d);
  if (st) {
    sch_traced_free(ts);
    return NULL;
  }
  return ts;
}
