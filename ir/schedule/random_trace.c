/* random_trace.c — random schedules for property testing. The generator
 * grows a traced schedule by repeatedly picking a primitive family (tiling
 * with sampled or fixed factors, fuse, reorder, parallel, vectorize, unroll,
 * bind, annotate, add_unit_loop, sampled compute_at, reverse_compute_at,
 * compute_inline, reverse_compute_inline, cache_read/cache_write, set_scope,
 * storage_align, decompose_reduction, rfactor) and plausible arguments read off the
 * current IR, so that most proposals are legal: only spatial loops are
 * parallelized, only innermost spatial loops vectorized, only loops above
 * every reduction loop get decompose_reduction, compute locations come from
 * the sampler or from check-only runs. The self-check replays each trace
 * from its JSON onto a fresh copy of the function and compares the result
 * with the unscheduled function in the reference interpreter, which is how
 * `tessel selfcheck` and tests/schedule/test_random.c find wrong rewrites. */
#include <stdio.h>
#include <string.h>

#include "../interp.h"
#include "../struct.h"
#include "sch_int.h"
#include "tensorize.h"
#include "trace.h"

/* ---- generator state ---------------------------------------------------- */
typedef struct gen {
  sch_traced *t;
  sch_state *s;
  ts_rng *rng;
  ts_diag *why; /* refusal message */
  ts_diag *d;   /* hard errors */
  bool refused;
  ts_status err;
  sch_path path; /* scratch */
} gen;

enum { SKIP = 0, DONE = 1, STOP = 2 };

static int rnd(gen *g, int n) { return n > 0 ? (int)ts_rng_below(g->rng, (uint64_t)n) : 0; }
static bool coin(gen *g, double p) { return ts_rng_unit(g->rng) < p; }

/* Routes a traced call's status: refusals stop the trace as refused, other
 * failures stop it with an error. */
static int after(gen *g, ts_status st, const ts_diag *ld) {
  if (st == TS_OK) return DONE;
  if (st == TS_ESCHEDULE) {
    g->refused = true;
    ts_diag_set(g->why, st, "%s", ld->msg);
  } else {
    g->err = st;
    ts_diag_set(g->d, st, "%s", ld->msg);
  }
  return STOP;
}

#define TRY(call)                              \
  do {                                         \
    ts_diag ld_;                               \
    ts_diag_clear(&ld_);                       \
    ts_diag *dd = &ld_;                        \
    ts_status st_ = (call);                    \
    if (st_) return after(g, st_, &ld_);       \
  } while (0)

/* ---- reading the current IR ------------------------------------------------ */
static bool collect_cb(void *ctx, const ir_stmt *st) {
  if (st->kind == IR_BLOCK_REALIZE) ts_vec_push(ctx, (void *)st);
  return true;
}

/* Every block realize except the root, in program order. */
static void all_blocks(gen *g, ts_vec *out) {
  ts_vec_init(out);
  ir_visitor v = {.stmt = collect_cb, .ctx = out};
  ir_visit_stmt(&v, sch_func(g->s)->body);
  if (out->len) {
    memmove(out->items, out->items + 1, sizeof *out->items * (out->len - 1));
    out->len--;
  }
}

static const ir_block *blk(const void *realize) { return ((const ir_stmt *)realize)->u.realize.block; }

static ir_stmt *find_loop(gen *g, const ir_var *v) {
  if (sch_find_loop(g->s, v, &g->path, "random", NULL)) return NULL;
  return g->path.node[g->path.n - 1];
}

static ir_stmt *find_realize(gen *g, const char *name) {
  if (sch_find_block(g->s, name, &g->path, "random", NULL)) return NULL;
  return g->path.node[g->path.n - 1];
}

/* The concrete loops of a block (outermost first). */
static int loops_of(gen *g, const char *name, sch_loop **out) {
  int n = 0;
  sch_block b = {name};
  if (sch_get_loops(g->s, b, out, &n, NULL)) return 0;
  return n;
}

static int64_t const_extent(const ir_stmt *l) {
  int64_t e;
  return ir_as_int(l->u.loop.extent, &e) ? e : -1;
}

/* A serial loop without annotations and with a constant extent: what split,
 * fuse and the loop-kind primitives accept without question. */
static bool plain(const ir_stmt *l) {
  return l && l->u.loop.kind == IR_FOR_SERIAL && l->u.loop.nannot == 0 && const_extent(l) >= 1;
}

/* How the blocks under loop l use its var: bit 1 an S iter var, bit 2 an R
 * one, bit 4 anything else, bit 8 a block below that is neither complete nor
 * a reduction (no compact dataflow). */
static int loop_use(const ir_stmt *l) {
  ts_vec v;
  ts_vec_init(&v);
  int use = 0;
  if (sch_child_realizes(l->u.loop.body, &v)) use = 4;
  for (size_t i = 0; i < v.len; i++) {
    const ir_stmt *r = v.items[i];
    const ir_block *b = r->u.realize.block;
    bool red = b->init != NULL;
    for (int k = 0; k < b->niter; k++) {
      if (b->iters[k].type == IR_ITER_OPAQUE) use |= 8;
      if (b->iters[k].type == IR_ITER_R && !red) use |= 8;
      if (!ir_expr_uses_var(r->u.realize.iter_values[k], l->u.loop.var)) continue;
      use |= b->iters[k].type == IR_ITER_S ? 1 : b->iters[k].type == IR_ITER_R ? 2 : 4;
    }
  }
  ts_vec_fini(&v);
  return use;
}

static bool spatial(const ir_stmt *l) { return (loop_use(l) & ~1) == 0; }

/* Is the body of loop a exactly the loop b (a single child)? */
static bool directly_nests(const ir_stmt *a, const ir_stmt *b) { return a && b && a->u.loop.body == b; }

/* Is buf a parameter of the function? */
static bool is_param(gen *g, const ir_buffer *buf) {
  const ir_func *f = sch_func(g->s);
  for (int i = 0; i < f->nparams; i++)
    if (f->params[i] == buf) return true;
  return false;
}

static int writers_of(const ts_vec *blocks, const ir_buffer *buf) {
  int n = 0;
  for (size_t i = 0; i < blocks->len; i++) n += sch_block_writes(blk(blocks->items[i]), buf);
  return n;
}

static bool allocated(const ts_vec *blocks, const ir_stmt *root, const ir_buffer *buf) {
  if (sch_block_allocates(root->u.realize.block, buf)) return true;
  for (size_t i = 0; i < blocks->len; i++)
    if (sch_block_allocates(blk(blocks->items[i]), buf)) return true;
  return false;
}

static const char *pick_scope(gen *g) {
  static const char *scopes[] = {"global", "shared", "local"};
  return scopes[rnd(g, 3)];
}

/* Finds the RV among n block RVs that names block name; -1 if none. */
static int rv_named(gen *g, const int *rvs, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (!strcmp(sch_t_block(g->t, rvs[i]).name, name)) return rvs[i];
  return -1;
}

/* Traced handles: a block RV by name, usually through GetBlock, sometimes
 * through GetChildBlocks of the root (so every navigation kind feeds later
 * instructions). */
static int t_block(gen *g, const char *name, int *rv) {
  if (coin(g, 0.15)) {
    int root, n;
    const int *kids;
    TRY(sch_t_get_block(g->t, sch_func(g->s)->body->u.realize.block->name, &root, dd));
    TRY(sch_t_get_child_blocks(g->t, root, &kids, &n, dd));
    if ((*rv = rv_named(g, kids, n, name)) >= 0) return DONE;
  }
  TRY(sch_t_get_block(g->t, name, rv, dd));
  return DONE;
}

static int t_loops(gen *g, int brv, const int **rvs, int *n) {
  TRY(sch_t_get_loops(g->t, brv, rvs, n, dd));
  return DONE;
}

/* Picks a random block, its loops (concrete) and, if wanted, its traced
 * handles. */
typedef struct pick {
  const char *name;
  const ir_stmt *realize;
  int nl;
  sch_loop *l;
} pick;

static bool pick_block(gen *g, const ts_vec *blocks, pick *p) {
  if (!blocks->len) return false;
  p->realize = blocks->items[rnd(g, (int)blocks->len)];
  p->name = blk(p->realize)->name;
  p->nl = loops_of(g, p->name, &p->l);
  return true;
}

static int traced_loops(gen *g, const char *name, int *brv, const int **lrv, int *n) {
  int r = t_block(g, name, brv);
  if (r != DONE) return r;
  return t_loops(g, *brv, lrv, n);
}

/* The RV of loop k of block name (k < 0: the innermost), with the block's
 * in *brv; SKIP when the block has no loop k. */
static int traced_loop(gen *g, const char *name, int k, int *brv, int *lv) {
  const int *lrv;
  int nl, r = traced_loops(g, name, brv, &lrv, &nl);
  if (r != DONE) return r;
  if (k < 0) k = nl - 1;
  if (k < 0 || k >= nl) return SKIP;
  *lv = lrv[k];
  return DONE;
}

/* Applies a one-block primitive (compute_inline, reverse_compute_inline)
 * to block name through the traced schedule. */
static int on_block(gen *g, const char *name, ts_status (*fn)(sch_traced *, int, ts_diag *)) {
  int brv, r;
  if ((r = t_block(g, name, &brv)) != DONE) return r;
  TRY(fn(g->t, brv, dd));
  return DONE;
}

/* ---- families ---------------------------------------------------------------- */
static int fam_tile(gen *g, const ts_vec *blocks) {
  pick p;
  if (!pick_block(g, blocks, &p)) return SKIP;
  int cand[64], nc = 0;
  for (int i = 0; i < p.nl && nc < 64; i++) {
    const ir_stmt *l = find_loop(g, p.l[i].var);
    if (plain(l) && const_extent(l) >= 2) cand[nc++] = i;
  }
  if (!nc) return SKIP;
  int k = cand[rnd(g, nc)];
  int64_t ext = const_extent(find_loop(g, p.l[k].var));
  int brv, nl, r;
  const int *lrv;
  if ((r = traced_loops(g, p.name, &brv, &lrv, &nl)) != DONE) return r;
  int loop = lrv[k];
  sch_arg f[3];
  int n;
  if (coin(g, 0.7)) {
    static const int64_t inner[] = {-1, 2, 4, 8, 16};
    n = 2 + rnd(g, 2);
    int v[3];
    TRY(sch_t_sample_perfect_tile(g->t, loop, n, inner[rnd(g, 5)], NULL, v, dd));
    for (int i = 0; i < n; i++) f[i] = sch_arg_rv(v[i]);
  } else if (coin(g, 0.7)) {
    /* fixed factors, possibly not dividing the extent (a predicate) */
    n = 2;
    int64_t x = 2 + rnd(g, (int)(ext > 2 ? ext - 1 : 1));
    bool outer_none = coin(g, 0.5);
    f[outer_none ? 0 : 1] = sch_arg_none();
    f[outer_none ? 1 : 0] = sch_arg_int(x);
  } else {
    /* every factor given, their product at least the extent */
    n = 2 + rnd(g, 2);
    int64_t prod = 1;
    for (int i = 1; i < n; i++) {
      int64_t x = 1 + rnd(g, 4);
      f[i] = sch_arg_int(x);
      prod *= x;
    }
    f[0] = sch_arg_int((ext + prod - 1) / prod + rnd(g, 2));
  }
  int out[3];
  TRY(sch_t_split(g->t, loop, n, f, out, dd));
  /* sometimes act on the new loops at once (RVs from split feed later
   * instructions without another GetLoops) */
  if (coin(g, 0.25)) TRY(sch_t_unroll(g->t, out[n - 1], dd));
  return DONE;
}

static int fam_fuse(gen *g, const ts_vec *blocks) {
  pick p;
  if (!pick_block(g, blocks, &p)) return SKIP;
  int cand[64], nc = 0;
  for (int i = 0; i + 1 < p.nl && nc < 64; i++) {
    const ir_stmt *a = find_loop(g, p.l[i].var);
    const ir_stmt *b = find_loop(g, p.l[i + 1].var);
    if (plain(a) && plain(b) && directly_nests(a, b)) cand[nc++] = i;
  }
  if (!nc) return SKIP;
  int k = cand[rnd(g, nc)], m = 2;
  /* extend the chain to three loops sometimes */
  if (k + 2 < p.nl && coin(g, 0.3)) {
    const ir_stmt *b = find_loop(g, p.l[k + 1].var), *c = find_loop(g, p.l[k + 2].var);
    if (plain(c) && directly_nests(b, c)) m = 3;
  }
  int brv, nl, r, fused;
  const int *lrv;
  if ((r = traced_loops(g, p.name, &brv, &lrv, &nl)) != DONE) return r;
  TRY(sch_t_fuse(g->t, m, lrv + k, &fused, dd));
  return DONE;
}

static int fam_reorder(gen *g, const ts_vec *blocks) {
  pick p;
  if (!pick_block(g, blocks, &p) || p.nl < 2) return SKIP;
  /* maximal runs of loops each directly nesting the next, none feeding both
   * spatial and reduction iter vars (moving such a loop would run an init
   * mid-reduction) */
  int start = rnd(g, p.nl - 1), lo = start, hi = start;
  if ((loop_use(find_loop(g, p.l[start].var)) & 3) == 3) return SKIP;
  while (hi + 1 < p.nl && directly_nests(find_loop(g, p.l[hi].var), find_loop(g, p.l[hi + 1].var)) &&
         (loop_use(find_loop(g, p.l[hi + 1].var)) & 3) != 3)
    hi++;
  while (lo > 0 && directly_nests(find_loop(g, p.l[lo - 1].var), find_loop(g, p.l[lo].var)) &&
         (loop_use(find_loop(g, p.l[lo - 1].var)) & 3) != 3)
    lo--;
  if (hi - lo < 1) return SKIP;
  int span = hi - lo + 1, m = span >= 3 && coin(g, 0.4) ? 3 : 2;
  int idx[3], perm[3];
  /* m distinct positions in [lo, hi], sorted */
  int chosen = 0;
  for (int i = lo; i <= hi && chosen < m; i++)
    if (rnd(g, hi - i + 1) < m - chosen) idx[chosen++] = i;
  for (int i = 0; i < m; i++) perm[i] = idx[i];
  /* a permutation other than the identity */
  for (int tries = 0; tries < 10; tries++) {
    for (int i = m - 1; i > 0; i--) {
      int j = rnd(g, i + 1), t = perm[i];
      perm[i] = perm[j];
      perm[j] = t;
    }
    if (memcmp(perm, idx, sizeof(int) * (size_t)m)) break;
  }
  if (!memcmp(perm, idx, sizeof(int) * (size_t)m)) {
    perm[0] = idx[1];
    perm[1] = idx[0];
  }
  int brv, nl, r;
  const int *lrv;
  if ((r = traced_loops(g, p.name, &brv, &lrv, &nl)) != DONE) return r;
  int order[3];
  for (int i = 0; i < m; i++) order[i] = lrv[perm[i]];
  TRY(sch_t_reorder(g->t, m, order, dd));
  return DONE;
}

/* Outer loops that only spatial iter vars use: parallel and bind targets. */
static int outer_spatial(gen *g, const pick *p, int *cand, int max) {
  int nc = 0;
  for (int i = 0; i < p->nl && nc < max; i++) {
    const ir_stmt *l = find_loop(g, p->l[i].var);
    if (!l || !spatial(l)) break;
    if (l->u.loop.kind == IR_FOR_SERIAL && const_extent(l) >= 1) cand[nc++] = i;
  }
  return nc;
}

/* Applies a one-loop primitive (parallel, vectorize, unroll) to loop k of
 * block name (k < 0: the innermost) through the traced schedule. */
static int on_loop(gen *g, const char *name, int k, ts_status (*fn)(sch_traced *, int, ts_diag *)) {
  int brv, lv, r;
  if ((r = traced_loop(g, name, k, &brv, &lv)) != DONE) return r;
  TRY(fn(g->t, lv, dd));
  return DONE;
}

/* Picks a block and one of its outer spatial loops (index *k); false if
 * there is none. */
static bool pick_outer_spatial(gen *g, const ts_vec *blocks, pick *p, int *k) {
  if (!pick_block(g, blocks, p)) return false;
  int cand[64], nc = outer_spatial(g, p, cand, 64);
  if (!nc) return false;
  *k = cand[rnd(g, nc)];
  return true;
}

static int fam_parallel(gen *g, const ts_vec *blocks) {
  pick p;
  int k;
  return pick_outer_spatial(g, blocks, &p, &k) ? on_loop(g, p.name, k, sch_t_parallel) : SKIP;
}

static int fam_bind(gen *g, const ts_vec *blocks) {
  pick p;
  int k;
  if (!pick_outer_spatial(g, blocks, &p, &k)) return SKIP;
  /* a tag no enclosing loop carries yet */
  static const char *tags[] = {"blockIdx.x", "blockIdx.y", "threadIdx.x", "threadIdx.y", "vthread"};
  const char *tag = NULL;
  for (int tries = 0; tries < 8 && !tag; tries++) {
    const char *t = tags[rnd(g, 5)];
    bool used = false;
    for (int i = 0; i < p.nl; i++) {
      const ir_stmt *l = find_loop(g, p.l[i].var);
      if (l && l->u.loop.thread && !strcmp(l->u.loop.thread, t)) used = true;
    }
    if (!used) tag = t;
  }
  if (!tag) return SKIP;
  int brv, lv, r;
  if ((r = traced_loop(g, p.name, k, &brv, &lv)) != DONE) return r;
  TRY(sch_t_bind(g->t, lv, tag, dd));
  return DONE;
}

static int fam_vectorize(gen *g, const ts_vec *blocks) {
  pick p;
  if (!pick_block(g, blocks, &p) || !p.nl) return SKIP;
  const ir_stmt *l = find_loop(g, p.l[p.nl - 1].var);
  if (!l || l->u.loop.kind != IR_FOR_SERIAL || l->u.loop.body != p.realize || !spatial(l)) return SKIP;
  int64_t e = const_extent(l);
  if (e < 1 || e > 64) return SKIP;
  return on_loop(g, p.name, -1, sch_t_vectorize);
}

static int fam_unroll(gen *g, const ts_vec *blocks) {
  pick p;
  if (!pick_block(g, blocks, &p) || !p.nl) return SKIP;
  int k = coin(g, 0.6) ? p.nl - 1 : rnd(g, p.nl);
  const ir_stmt *l = find_loop(g, p.l[k].var);
  if (!l || l->u.loop.kind != IR_FOR_SERIAL) return SKIP;
  return on_loop(g, p.name, k, sch_t_unroll);
}

/* The RV of the picked block or, with probability prob when it has loops,
 * of one of its loops. */
static int block_or_loop(gen *g, const pick *p, double prob, int *target) {
  int brv, r;
  if ((r = t_block(g, p->name, &brv)) != DONE) return r;
  *target = brv;
  if (p->nl && coin(g, prob)) {
    const int *lrv;
    int nl;
    if ((r = t_loops(g, brv, &lrv, &nl)) != DONE) return r;
    *target = lrv[rnd(g, nl)];
  }
  return DONE;
}

static int fam_annotate(gen *g, const ts_vec *blocks) {
  pick p;
  if (!pick_block(g, blocks, &p)) return SKIP;
  static const char *keys[] = {"pragma_auto_unroll_max_step", "pragma_unroll_explicit", "schedule_rule",
                               "software_pipeline_stage"};
  const char *key = keys[rnd(g, 4)];
  int target, r;
  if ((r = block_or_loop(g, &p, 0.5, &target)) != DONE) return r;
  sch_arg v;
  switch (rnd(g, 4)) {
  case 0: {
    static const int64_t cands[] = {0, 16, 64, 512};
    static const double probs[] = {0.25, 0.25, 0.25, 0.25};
    int rv;
    TRY(sch_t_sample_categorical(g->t, 4, cands, probs, NULL, &rv, dd));
    v = sch_arg_rv(rv);
    break;
  }
  case 1: v = sch_arg_int(rnd(g, 100)); break;
  case 2: v = sch_arg_float(0.5 * rnd(g, 8)); break;
  default: v = sch_arg_str(coin(g, 0.5) ? "SSRSRS" : "vectorize me"); break;
  }
  TRY(sch_t_annotate(g->t, target, key, v, dd));
  return DONE;
}

static int fam_add_unit_loop(gen *g, const ts_vec *blocks) {
  pick p;
  if (!pick_block(g, blocks, &p)) return SKIP;
  int target, r, out;
  if ((r = block_or_loop(g, &p, 0.3, &target)) != DONE) return r;
  TRY(sch_t_add_unit_loop(g->t, target, &out, dd));
  return DONE;
}

/* The realizes in blocks that ok accepts, at most max of them, in order. */
static int blocks_where(gen *g, const ts_vec *blocks, bool (*ok)(gen *, const ts_vec *, const ir_stmt *),
                        const ir_stmt **cand, int max) {
  int nc = 0;
  for (size_t i = 0; i < blocks->len && nc < max; i++)
    if (ok(g, blocks, blocks->items[i])) cand[nc++] = blocks->items[i];
  return nc;
}

/* Blocks that write only buffers the function allocates (compute_at and
 * compute_inline refuse output blocks). */
static bool non_output(gen *g, const ir_block *b) {
  if (!b->nwrites) return false;
  for (int i = 0; i < b->nwrites; i++)
    if (is_param(g, b->writes[i].buf)) return false;
  return true;
}

/* Does the block have producers (or consumers)? */
static bool has_links(gen *g, const ir_stmt *rz, bool producers) {
  sch_block *o;
  int n = 0;
  sch_block bb = {blk(rz)->name};
  return (producers ? sch_get_producers : sch_get_consumers)(g->s, bb, &o, &n, NULL) == TS_OK && n;
}

/* A non-output block with consumers. */
static bool at_ok(gen *g, const ts_vec *blocks, const ir_stmt *rz) {
  (void)blocks;
  return non_output(g, blk(rz)) && has_links(g, rz, false);
}

static int fam_compute_at(gen *g, const ts_vec *blocks) {
  const ir_stmt *cand[256];
  int nc = blocks_where(g, blocks, at_ok, cand, 256);
  if (!nc) return SKIP;
  const char *name = blk(cand[rnd(g, nc)])->name;
  int brv, loc, r;
  if ((r = t_block(g, name, &brv)) != DONE) return r;
  if (coin(g, 0.3)) {
    /* the same block again, as a producer of its first consumer */
    const int *cons, *prods;
    int ncons, nprod;
    TRY(sch_t_get_consumers(g->t, brv, &cons, &ncons, dd));
    if (ncons) {
      TRY(sch_t_get_producers(g->t, cons[0], &prods, &nprod, dd));
      int again = rv_named(g, prods, nprod, name);
      if (again >= 0) brv = again;
    }
  }
  TRY(sch_t_sample_compute_location(g->t, brv, NULL, &loc, dd));
  TRY(sch_t_compute_at(g->t, brv, loc, coin(g, 0.5), coin(g, 0.8) ? -1 : -2, dd));
  return DONE;
}

/* A complete block with producers. */
static bool reverse_at_ok(gen *g, const ts_vec *blocks, const ir_stmt *rz) {
  (void)blocks;
  return sch_is_complete(blk(rz)) && has_links(g, rz, true);
}

static int fam_reverse_compute_at(gen *g, const ts_vec *blocks) {
  const ir_stmt *cand[256];
  int nc = blocks_where(g, blocks, reverse_at_ok, cand, 256);
  if (!nc) return SKIP;
  const char *name = blk(cand[rnd(g, nc)])->name;
  sch_block bb = {name}, *prod;
  int np;
  if (sch_get_producers(g->s, bb, &prod, &np, NULL)) return SKIP;
  /* the locations among a producer's loops that a check-only run accepts */
  int pi = rnd(g, np);
  sch_loop *pl;
  int npl = loops_of(g, prod[pi].name, &pl);
  int ok[64], nok = 0;
  for (int i = 0; i < npl && nok < 64; i++) {
    const ir_stmt *l = find_loop(g, pl[i].var);
    if (!l || (loop_use(l) & ~1)) break; /* stop at the producer's first non-spatial loop */
    ts_diag scratch;
    ts_diag_clear(&scratch);
    if (sch_compute_at_check(g->s, bb, pl[i], true, true, -1, false, &scratch) == TS_OK) ok[nok++] = i;
  }
  if (!nok) return SKIP;
  int k = ok[rnd(g, nok)];
  int brv, prv = -1, nl, r;
  const int *lrv;
  if ((r = t_block(g, name, &brv)) != DONE) return r;
  if (coin(g, 0.4)) {
    const int *prods;
    int nprod;
    TRY(sch_t_get_producers(g->t, brv, &prods, &nprod, dd));
    prv = rv_named(g, prods, nprod, prod[pi].name);
  }
  if (prv < 0 && (r = t_block(g, prod[pi].name, &prv)) != DONE) return r;
  if ((r = t_loops(g, prv, &lrv, &nl)) != DONE) return r;
  TRY(sch_t_reverse_compute_at(g->t, brv, lrv[k], coin(g, 0.5), -1, dd));
  return DONE;
}

/* A non-output block that compute_inline's checks accept. */
static bool inline_ok(gen *g, const ts_vec *blocks, const ir_stmt *rz) {
  (void)blocks;
  const ir_block *b = blk(rz);
  ts_diag scratch;
  ts_diag_clear(&scratch);
  sch_block bb = {b->name};
  return non_output(g, b) && sch_compute_inline_check(g->s, bb, &scratch) == TS_OK;
}

static int fam_compute_inline(gen *g, const ts_vec *blocks) {
  const ir_stmt *cand[256];
  int nc = blocks_where(g, blocks, inline_ok, cand, 256);
  return nc ? on_block(g, blk(cand[rnd(g, nc)])->name, sch_t_compute_inline) : SKIP;
}

/* A consumer that reads exactly one buffer another block writes, from a
 * complete producer, under a true predicate, with a single store body. */
static int fam_reverse_compute_inline(gen *g, const ts_vec *blocks) {
  const char *cand[256];
  int nc = 0;
  for (size_t i = 0; i < blocks->len && nc < 256; i++) {
    const ir_stmt *r = blocks->items[i];
    const ir_block *b = blk(r);
    int64_t pv;
    if (!sch_is_complete(b) || b->body->kind != IR_STORE || !ir_as_int(r->u.realize.predicate, &pv) || !pv)
      continue;
    int produced = 0;
    const ir_block *prod = NULL;
    const ir_region *reg = NULL;
    for (int k = 0; k < b->nreads; k++)
      for (size_t j = 0; j < blocks->len; j++)
        if (blk(blocks->items[j]) != b && sch_block_writes(blk(blocks->items[j]), b->reads[k].buf)) {
          produced++;
          prod = blk(blocks->items[j]);
          reg = &b->reads[k];
        }
    /* the load indices must mention every iter var to be invertible */
    for (int k = 0; produced == 1 && k < b->niter; k++) {
      bool used = false;
      for (int j = 0; j < reg->ndim && !used; j++) used = ir_expr_uses_var(reg->ranges[j].min, b->iters[k].var);
      if (!used) produced = 0;
    }
    /* ... and is its only reader */
    int readers = 0;
    for (size_t j = 0; produced == 1 && j < blocks->len; j++)
      readers += sch_block_reads(blk(blocks->items[j]), reg->buf);
    if (produced == 1 && readers == 1 && sch_is_complete(prod) && prod->body->kind == IR_STORE)
      cand[nc++] = b->name;
  }
  return nc ? on_block(g, cand[rnd(g, nc)], sch_t_reverse_compute_inline) : SKIP;
}

static int fam_cache_read(gen *g, const ts_vec *blocks) {
  pick p;
  if (!pick_block(g, blocks, &p)) return SKIP;
  const ir_block *b = blk(p.realize);
  /* a buffer the block only reads, with at most one writer */
  int ok[64], nok = 0;
  for (int i = 0; i < b->nreads && nok < 64; i++)
    if (!sch_block_writes(b, b->reads[i].buf) && writers_of(blocks, b->reads[i].buf) <= 1) ok[nok++] = i;
  if (!nok) return SKIP;
  int idx = ok[rnd(g, nok)], brv, r, out;
  if ((r = t_block(g, p.name, &brv)) != DONE) return r;
  /* usually every reader; sometimes just this block */
  bool only_me = coin(g, 0.3);
  TRY(sch_t_cache_read(g->t, brv, idx, pick_scope(g), only_me ? 1 : 0, &brv, &out, dd));
  return DONE;
}

/* The only writer of its one output. */
static bool sole_writer(gen *g, const ts_vec *blocks, const ir_stmt *rz) {
  (void)g;
  const ir_block *b = blk(rz);
  return b->nwrites == 1 && writers_of(blocks, b->writes[0].buf) == 1;
}

static int fam_cache_write(gen *g, const ts_vec *blocks) {
  const ir_stmt *cand[256];
  int nc = blocks_where(g, blocks, sole_writer, cand, 256);
  if (!nc) return SKIP;
  int brv, r, out, ncons = 0;
  const int *cons = NULL;
  if ((r = t_block(g, blk(cand[rnd(g, nc)])->name, &brv)) != DONE) return r;
  /* sometimes name the consumers that should read the cache */
  if (coin(g, 0.25)) {
    TRY(sch_t_get_consumers(g->t, brv, &cons, &ncons, dd));
    if (ncons > 1) ncons = 1 + rnd(g, ncons);
  }
  TRY(sch_t_cache_write(g->t, brv, 0, pick_scope(g), ncons, cons, &out, dd));
  return DONE;
}

/* Blocks whose first written buffer is allocated by a block (set_scope and
 * storage_align refuse parameters). */
static int alloc_writers(gen *g, const ts_vec *blocks, const char **cand, int max) {
  int nc = 0;
  const ir_stmt *root = sch_func(g->s)->body;
  for (size_t i = 0; i < blocks->len && nc < max; i++) {
    const ir_block *b = blk(blocks->items[i]);
    if (b->nwrites >= 1 && allocated(blocks, root, b->writes[0].buf)) cand[nc++] = b->name;
  }
  return nc;
}

static int fam_set_scope(gen *g, const ts_vec *blocks) {
  const char *cand[256];
  int nc = alloc_writers(g, blocks, cand, 256);
  if (!nc) return SKIP;
  int brv, r;
  if ((r = t_block(g, cand[rnd(g, nc)], &brv)) != DONE) return r;
  TRY(sch_t_set_scope(g->t, brv, 0, pick_scope(g), dd));
  return DONE;
}

static int fam_storage_align(gen *g, const ts_vec *blocks) {
  const char *cand[256];
  int nc = alloc_writers(g, blocks, cand, 256);
  if (!nc) return SKIP;
  const char *name = cand[rnd(g, nc)];
  const ir_stmt *r0 = find_realize(g, name);
  if (!r0) return SKIP;
  int ndim = r0->u.realize.block->writes[0].buf->ndim;
  if (ndim < 1) return SKIP;
  int axis = rnd(g, 2 * ndim) - ndim;
  int64_t factor = (int64_t)1 << (1 + rnd(g, 5));
  int64_t offset = rnd(g, (int)factor);
  int brv, r;
  if ((r = t_block(g, name, &brv)) != DONE) return r;
  TRY(sch_t_storage_align(g->t, brv, 0, axis, factor, offset, dd));
  return DONE;
}

static bool reduction_ok(gen *g, const ts_vec *blocks, const ir_stmt *rz) {
  (void)g, (void)blocks;
  return sch_is_reduction(blk(rz));
}

static int fam_decompose(gen *g, const ts_vec *blocks) {
  const ir_stmt *cand[256];
  int nc = blocks_where(g, blocks, reduction_ok, cand, 256);
  if (!nc) return SKIP;
  const ir_stmt *rz = cand[rnd(g, nc)];
  const ir_block *b = blk(rz);
  sch_loop *l;
  int n = loops_of(g, b->name, &l);
  /* loops strictly above every loop a reduction binding uses */
  int first_r = n;
  for (int i = 0; i < n && first_r == n; i++)
    for (int k = 0; k < b->niter; k++)
      if (b->iters[k].type == IR_ITER_R && ir_expr_uses_var(rz->u.realize.iter_values[k], l[i].var)) {
        first_r = i;
        break;
      }
  /* and every loop below the chosen one feeds some binding */
  int lowest = 0;
  for (int i = 0; i < n; i++) {
    bool feeds = false;
    for (int k = 0; k < b->niter && !feeds; k++) feeds = ir_expr_uses_var(rz->u.realize.iter_values[k], l[i].var);
    if (!feeds) lowest = i;
  }
  if (lowest >= first_r) return SKIP;
  int k = lowest + rnd(g, first_r - lowest);
  int brv, lv, r, out;
  if ((r = traced_loop(g, b->name, k, &brv, &lv)) != DONE) return r;
  TRY(sch_t_decompose_reduction(g->t, brv, lv, &out, dd));
  return DONE;
}

/* rfactor over a serial loop that only reduce vars of a reduction block
 * use, at a random factor_axis (negative ones included). */
static bool rfactor_ok(gen *g, const ts_vec *blocks, const ir_stmt *rz) {
  return reduction_ok(g, blocks, rz) && blk(rz)->nwrites == 1;
}

static int fam_rfactor(gen *g, const ts_vec *blocks) {
  const ir_stmt *cand[256];
  int nc = blocks_where(g, blocks, rfactor_ok, cand, 256);
  if (!nc) return SKIP;
  const ir_block *b = blk(cand[rnd(g, nc)]);
  sch_loop *l;
  int n = loops_of(g, b->name, &l), ks[64], nk = 0;
  for (int i = 0; i < n && nk < 64; i++) {
    const ir_stmt *ls = find_loop(g, l[i].var);
    if (ls && ls->u.loop.kind == IR_FOR_SERIAL && loop_use(ls) == 2) ks[nk++] = i;
  }
  if (!nk) return SKIP;
  int k = ks[rnd(g, nk)];
  int ndim = b->writes[0].buf->ndim;
  int axis = rnd(g, 2 * ndim + 2) - (ndim + 1);
  int brv, lv, r, out;
  if ((r = traced_loop(g, b->name, k, &brv, &lv)) != DONE) return r;
  TRY(sch_t_rfactor(g->t, lv, axis, &out, dd));
  return DONE;
}

/* blockize at a loop over a perfect nest of loops with one block */
static int fam_blockize(gen *g, const ts_vec *blocks) {
  pick p;
  if (!pick_block(g, blocks, &p) || !p.nl) return SKIP;
  int cand[64], nc = 0;
  for (int i = 0; i < p.nl && nc < 64; i++) {
    const ir_stmt *l = find_loop(g, p.l[i].var);
    bool perfect = l != NULL;
    for (const ir_stmt *c = l; perfect && c->kind == IR_FOR; c = c->u.loop.body)
      perfect = c->u.loop.body && (c->u.loop.body->kind == IR_FOR || c->u.loop.body->kind == IR_BLOCK_REALIZE);
    if (perfect) cand[nc++] = i;
  }
  if (!nc) return SKIP;
  int k = cand[rnd(g, nc)];
  int brv, lv, r, out;
  if ((r = traced_loop(g, p.name, k, &brv, &lv)) != DONE) return r;
  TRY(sch_t_blockize(g->t, lv, &out, dd));
  return DONE;
}

/* tensorize a block that an interpretable intrinsic describes, when its
 * loops are still one per iter var: split each to the intrinsic's extent,
 * put the intrinsic's loops innermost, tensorize (sometimes through an
 * explicit blockize) */
static int fam_tensorize(gen *g, const ts_vec *blocks) {
  const ir_stmt *rz = blocks->len ? blocks->items[rnd(g, (int)blocks->len)] : NULL;
  if (!rz) return SKIP;
  const ir_block *b = blk(rz);
  if (b->niter < 1 || b->niter > 8) return SKIP;
  const sch_intrin *pickd = NULL;
  int64_t ext[8];
  for (int i = 0; i < sch_intrin_count() && !pickd; i++) {
    const sch_intrin *in = sch_intrin_at((i + rnd(g, sch_intrin_count())) % sch_intrin_count());
    if (!strcmp(in->arch, "cuda")) continue; /* not interpretable */
    sch_block sb = {b->name};
    if (sch_tensorize_match_block(g->s, sb, in, ext, NULL) == TS_OK) pickd = in;
  }
  if (!pickd) return SKIP;
  sch_loop *l;
  int n = loops_of(g, b->name, &l);
  if (n != b->niter) return SKIP;
  for (int i = 0; i < n; i++) {
    const ir_stmt *ls = find_loop(g, l[i].var);
    const ir_expr *bv = rz->u.realize.iter_values[i];
    if (!plain(ls) || bv->kind != IR_VAR || bv->u.var != l[i].var || ext[i] < 1 || const_extent(ls) % ext[i])
      return SKIP;
  }
  int brv, nl, r;
  const int *lrv;
  if ((r = traced_loops(g, b->name, &brv, &lrv, &nl)) != DONE) return r;
  if (nl != n) return SKIP;
  int outer[8], inner[8], order[16];
  int lv[8];
  memcpy(lv, lrv, sizeof *lv * (size_t)n);
  for (int i = 0; i < n; i++) {
    sch_arg f[2] = {sch_arg_none(), sch_arg_int(ext[i])};
    int o[2];
    TRY(sch_t_split(g->t, lv[i], 2, f, o, dd));
    outer[i] = o[0];
    inner[i] = o[1];
  }
  for (int i = 0; i < n; i++) {
    order[i] = outer[i];
    order[n + i] = inner[i];
  }
  TRY(sch_t_reorder(g->t, 2 * n, order, dd));
  if (coin(g, 0.3)) {
    int ob;
    TRY(sch_t_blockize(g->t, inner[0], &ob, dd));
    TRY(sch_t_tensorize(g->t, ob, pickd->name, dd));
  } else {
    TRY(sch_t_tensorize(g->t, inner[0], pickd->name, dd));
  }
  return DONE;
}

typedef struct family {
  const char *name;
  int (*fn)(gen *g, const ts_vec *blocks);
  int weight;
  bool intrinsic; /* drawn only with sch_random_opts.with_intrinsics */
} family;

static const family families[] = {
    {"tile", fam_tile, 6},
    {"fuse", fam_fuse, 2},
    {"reorder", fam_reorder, 3},
    {"parallel", fam_parallel, 2},
    {"vectorize", fam_vectorize, 2},
    {"unroll", fam_unroll, 1},
    {"bind", fam_bind, 1},
    {"annotate", fam_annotate, 1},
    {"add_unit_loop", fam_add_unit_loop, 1},
    {"compute_at", fam_compute_at, 3},
    {"reverse_compute_at", fam_reverse_compute_at, 2},
    {"compute_inline", fam_compute_inline, 2},
    {"reverse_compute_inline", fam_reverse_compute_inline, 1},
    {"cache_read", fam_cache_read, 2},
    {"cache_write", fam_cache_write, 2},
    {"set_scope", fam_set_scope, 1},
    {"storage_align", fam_storage_align, 1},
    {"decompose_reduction", fam_decompose, 2},
    {"rfactor", fam_rfactor, 2},
    {"blockize", fam_blockize, 1, true},
    {"tensorize", fam_tensorize, 1, true},
};
#define NFAM ((int)(sizeof families / sizeof families[0]))

ts_status sch_random_trace(sch_traced *t, ts_rng *rng, const sch_random_opts *opts, sch_random_result *result,
                           ts_diag *why, ts_diag *d) {
  int lo = opts && opts->min_steps > 0 ? opts->min_steps : 1;
  int hi = opts && opts->max_steps >= lo ? opts->max_steps : (lo > 12 ? lo : 12);
  gen *g = ts_calloc(1, sizeof *g);
  if (!g) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  g->t = t;
  g->s = sch_traced_state(t);
  g->rng = rng;
  g->why = why;
  g->d = d;
  bool intr = opts && opts->with_intrinsics;
  int total = 0;
  for (int i = 0; i < NFAM; i++) total += families[i].intrinsic && !intr ? 0 : families[i].weight;
  int steps = lo + rnd(g, hi - lo + 1);
  /* sometimes the last step comes after an EnterPostproc mark */
  int post = steps > 1 && coin(g, 0.1) ? steps - 1 : -1;
  for (int step = 0; step < steps && !g->refused && !g->err; step++) {
    if (step == post) {
      ts_diag ld;
      ts_diag_clear(&ld);
      ts_status st = sch_t_enter_postproc(t, &ld);
      if (st && after(g, st, &ld) == STOP) break;
    }
    for (int attempt = 0; attempt < 24; attempt++) {
      int w = rnd(g, total), f = 0;
      while (w >= (families[f].intrinsic && !intr ? 0 : families[f].weight))
        w -= families[f].intrinsic && !intr ? 0 : families[f].weight, f++;
      ts_vec blocks;
      all_blocks(g, &blocks);
      int r = families[f].fn(g, &blocks);
      ts_vec_fini(&blocks);
      if (r != SKIP) break;
    }
  }
  *result = g->refused ? SCH_RANDOM_REFUSED : SCH_RANDOM_OK;
  ts_status st = g->err;
  ts_free(g);
  return st;
}

/* ---- the self-check ---------------------------------------------------------- */
typedef struct refdata {
  int np;
  ir_tensor *in;  /* inputs (filled) and reference outputs */
  ir_tensor *got; /* scratch for the scheduled run */
} refdata;

static void ref_free(refdata *r) {
  for (int i = 0; i < r->np; i++) {
    if (r->in) ir_tensor_free(&r->in[i]);
    if (r->got) ir_tensor_free(&r->got[i]);
  }
  ts_free(r->in);
  ts_free(r->got);
}

static ts_status ref_init(refdata *r, const ir_func *f, uint64_t seed, ts_diag *d) {
  memset(r, 0, sizeof *r);
  r->np = f->nparams;
  r->in = ts_calloc((size_t)r->np, sizeof *r->in);
  r->got = ts_calloc((size_t)r->np, sizeof *r->got);
  if (!r->in || !r->got) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  ts_status st = ir_tensors_for_func(f, NULL, r->in, d);
  if (st) return st;
  if ((st = ir_tensors_for_func(f, NULL, r->got, d))) return st;
  for (int i = 0; i < f->ninputs; i++) ir_tensor_fill_random(&r->in[i], seed + (uint64_t)i);
  ts_diag ld;
  ts_diag_clear(&ld);
  st = ir_interp_run(f, r->in, &ld);
  if (st) ts_diag_set(d, st, "selfcheck: interpreting the unscheduled function: %s", ld.msg);
  return st;
}

/* Runs the scheduled function on the reference inputs; false (why set) on a
 * difference or an interpreter error. */
static bool ref_matches(refdata *r, const ir_func *orig, const ir_func *f, char *why, size_t n) {
  for (int i = 0; i < r->np; i++) {
    size_t bytes = (size_t)ir_tensor_numel(&r->in[i]) * (size_t)ir_dtype_bytes(r->in[i].dtype);
    if (i < orig->ninputs) memcpy(r->got[i].data, r->in[i].data, bytes);
    else memset(r->got[i].data, 0, bytes);
  }
  ts_diag d;
  ts_diag_clear(&d);
  if (ir_interp_run(f, r->got, &d)) {
    snprintf(why, n, "interpreting the scheduled function: %.1900s", d.msg);
    return false;
  }
  for (int i = orig->ninputs; i < r->np; i++) {
    double err = 0;
    if (!ir_tensor_allclose(&r->got[i], &r->in[i], 1e-4, 1e-5, &err)) {
      snprintf(why, n, "output %s differs from the unscheduled function (max abs err %g)", orig->params[i]->name,
               err);
      return false;
    }
  }
  return true;
}

static uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t z = a * 0x9E3779B97F4A7C15ull + b + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* Changes one sampler's decision of tr at random (a tile list that may not
 * fit, another index) and replays it on a fresh copy: a refusal or a vanished
 * loop discards the mutant; success must still match the interpreter; any
 * other failure is a mismatch. On a mismatch *json becomes the mutant's. */
static int mutate_one(const ir_func *f, refdata *ref, const sch_trace *tr, uint64_t seed, char **json, char *why,
                      size_t n, ts_status *hard, ts_diag *d) {
  int cand[256], nc = 0;
  for (int i = 0; i < sch_trace_len(tr) && nc < 256; i++)
    if (sch_inst_kind_get(sch_trace_inst(tr, i)->kind)->decision) cand[nc++] = i;
  if (!nc) return 0;
  ts_rng rng;
  ts_rng_seed(&rng, seed);
  int k = cand[ts_rng_below(&rng, (uint64_t)nc)];
  const sch_inst *x = sch_trace_inst(tr, k);
  int64_t v[64];
  sch_decision dec = {1, v};
  if (x->kind == SCH_I_SAMPLE_PERFECT_TILE) {
    dec.n = (int)x->attrs[0].i;
    for (int i = 0; i < dec.n; i++) v[i] = 1 + (int64_t)ts_rng_below(&rng, 8);
  } else if (x->kind == SCH_I_SAMPLE_CATEGORICAL) {
    v[0] = (int64_t)ts_rng_below(&rng, (uint64_t)x->attrs[0].n);
  } else {
    v[0] = (int64_t)ts_rng_below(&rng, 8) - 2;
  }
  ts_diag dd;
  ts_diag_clear(&dd);
  sch_trace *mt = sch_trace_copy(tr);
  sch_traced *t = mt ? sch_traced_new(f, seed, &dd) : NULL;
  int res = 0;
  if (!t) {
    *hard = ts_diag_set(d, TS_ENOMEM, "out of memory");
    goto out;
  }
  if (sch_trace_set_decision(mt, k, &dec, &dd)) {
    *hard = ts_diag_set(d, TS_EINTERNAL, "selfcheck: %s", dd.msg);
    goto out;
  }
  sch_set_debug_verify(sch_traced_state(t), true);
  ts_status st = sch_trace_apply(mt, t, false, NULL, &dd);
  if (st == TS_ESCHEDULE || st == TS_ENOTFOUND) goto out;
  if (st || !ref_matches(ref, f, sch_traced_func(t), why, n)) {
    if (st) snprintf(why, n, "replaying with a mutated decision failed with %s: %.1900s", ts_strerror(st), dd.msg);
    char *mj = sch_trace_to_json(mt);
    if (mj) {
      ts_free(*json);
      *json = mj;
    }
    res = 2;
  }
out:
  sch_trace_free(mt);
  sch_traced_free(t);
  return res;
}

/* One trace: generate, serialize, parse, replay on a fresh copy, compare.
 * Returns 0 checked, 1 refused, 2 mismatch (why/json set). */
static int check_one(const ir_func *f, refdata *ref, uint64_t seed, const sch_random_opts *opts, char **json,
                     char *why, size_t n, ts_status *hard, ts_diag *d) {
  *json = NULL;
  ts_diag dd, rw;
  ts_diag_clear(&dd);
  ts_diag_clear(&rw);
  sch_traced *t = sch_traced_new(f, seed, &dd), *t2 = NULL, *t3 = NULL;
  sch_trace *tr = NULL, *simp = NULL;
  char *json2 = NULL;
  int res = 2;
  if (!t) {
    *hard = ts_diag_set(d, dd.code, "%s", dd.msg);
    return 2;
  }
  sch_set_debug_verify(sch_traced_state(t), true);
  ts_rng rng;
  ts_rng_seed(&rng, mix(seed, 77));
  sch_random_result rr;
  sch_random_opts o = opts ? *opts : (sch_random_opts){0};
  o.with_intrinsics = true; /* the self-check covers blockize and tensorize */
  ts_status st = sch_random_trace(t, &rng, &o, &rr, &rw, &dd);
  /* a failed step is part of what gets reported, so that it replays */
  *json = st || rr == SCH_RANDOM_REFUSED ? sch_traced_failure_json(t) : sch_trace_to_json(sch_traced_trace(t));
  if (!*json) {
    *hard = ts_diag_set(d, TS_ENOMEM, "out of memory");
    goto out;
  }
  if (st == TS_ENOMEM) {
    *hard = ts_diag_set(d, st, "%s", dd.msg);
    goto out;
  }
  if (st) {
    snprintf(why, n, "a primitive failed with %s: %.1900s", ts_strerror(st), dd.msg);
    goto out;
  }
  if (rr == SCH_RANDOM_REFUSED) {
    snprintf(why, n, "%.1900s", rw.msg);
    res = 1;
    goto out;
  }
  /* the JSON path: parse, replay onto a fresh copy, compare */
  ts_diag_clear(&dd);
  tr = sch_trace_from_json(*json, &dd);
  if (!tr) {
    snprintf(why, n, "the trace's own JSON does not parse: %.1900s", dd.msg);
    goto out;
  }
  t2 = sch_traced_new(f, mix(seed, 99), &dd);
  if (!t2) {
    *hard = ts_diag_set(d, dd.code, "%s", dd.msg);
    goto out;
  }
  sch_set_debug_verify(sch_traced_state(t2), true);
  if (sch_trace_apply(tr, t2, false, NULL, &dd)) {
    snprintf(why, n, "replaying the trace from JSON failed: %.1900s", dd.msg);
    goto out;
  }
  char ex[1024];
  if (!ir_struct_equal_func_explain(sch_traced_func(t), sch_traced_func(t2), ex, sizeof ex)) {
    snprintf(why, n, "the replayed function differs from the traced one: %.1000s", ex);
    goto out;
  }
  json2 = sch_trace_to_json(sch_traced_trace(t2));
  if (!json2 || strcmp(json2, *json)) {
    snprintf(why, n, "the replayed trace serializes differently: %s", json2 ? json2 : "(out of memory)");
    goto out;
  }
  /* dead-instruction elimination must not change the result */
  simp = sch_trace_simplified(tr, false);
  if (!simp) {
    *hard = ts_diag_set(d, TS_ENOMEM, "out of memory");
    goto out;
  }
  t3 = sch_traced_new(f, mix(seed, 5), &dd);
  if (!t3) {
    *hard = ts_diag_set(d, dd.code, "%s", dd.msg);
    goto out;
  }
  if (sch_trace_apply(simp, t3, false, NULL, &dd)) {
    snprintf(why, n, "replaying the simplified trace failed: %.1900s", dd.msg);
    goto out;
  }
  if (!ir_struct_equal_func_explain(sch_traced_func(t), sch_traced_func(t3), ex, sizeof ex)) {
    snprintf(why, n, "the simplified trace gives a different function: %s", ex);
    goto out;
  }
  if (!ref_matches(ref, f, sch_traced_func(t2), why, n)) goto out;
  /* a mutated decision (as a tuning mutator would make) replays to a
   * correct schedule or is refused */
  res = mutate_one(f, ref, tr, mix(seed, 3), json, why, n, hard, d);
out:
  ts_free(json2);
  sch_trace_free(tr);
  sch_trace_free(simp);
  sch_traced_free(t);
  sch_traced_free(t2);
  sch_traced_free(t3);
  return res;
}

ts_status sch_selfcheck(const ir_func *f, int ntraces, uint64_t seed, const sch_random_opts *opts,
                        sch_report_fn report, void *ctx, sch_selfcheck_stats *out, ts_diag *d) {
  memset(out, 0, sizeof *out);
  refdata ref;
  ts_status st = ref_init(&ref, f, mix(seed, 1), d);
  for (int i = 0; i < ntraces && !st; i++) {
    char *json = NULL, why[TS_DIAG_MAX];
    why[0] = '\0';
    ts_status hard = TS_OK;
    int r = check_one(f, &ref, mix(seed, (uint64_t)i + 1000), opts, &json, why, sizeof why, &hard, d);
    if (hard) {
      st = hard;
    } else {
      out->traces++;
      if (r == 0) out->checked++;
      else if (r == 1) out->refused++;
      else out->mismatches++;
      if (r && report) report(ctx, i, r == 1, json ? json : "", why);
    }
    ts_free(json);
  }
  ref_free(&ref);
  return st;
}
