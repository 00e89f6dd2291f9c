/* add_rfactor.c — AddRFactor for CPU (MetaSchedule's add_rfactor.cc): for a
 * reduction block with little spatial parallelism (TVM's
 * NeedsRFactorOrCrossThreadReduction), fuse the reduction loops, split them
 * by SamplePerfectTile and rfactor at each piece, so partial results run in
 * vector lanes (inner piece) or in parallel (outer piece), and on several
 * cores in both (threads' shares, each summed in vector lanes); the
 * original stays as the last sketch. docs/RFACTOR.md ("AddRFactor"). */
#include <string.h>

#include "search/search_int.h"

#define MAXL 32

/* Checks the conditions on the concrete state; fills is_red per loop and
 * the spatial/reduction extents' products. */
static bool eligible(const srch_rule_ctx *c, sch_traced *t, const char *block, int *nl_out, bool *is_red) {
  const ir_func *f = sch_traced_func(t);
  const ir_stmt *r = srch_find_realize(f, block);
  if (!r) return false;
  const ir_block *b = r->u.realize.block;
  if (!b->init || b->nwrites != 1) return false;
  if (ir_annot_find(b->nannot, b->annots, SRCH_ANN_RFACTOR_PRODUCER)) return false;
  bool has_r = false;
  for (int i = 0; i < b->niter; i++) {
    if (b->iters[i].type == IR_ITER_R) has_r = true;
    else if (b->iters[i].type != IR_ITER_S) return false;
  }
  if (!has_r) return false;
  sch_loop *cl;
  int nl;
  ts_diag q;
  ts_diag_clear(&q);
  if (sch_get_loops(sch_traced_state(t), (sch_block){.name = b->name}, &cl, &nl, &q) || nl != b->niter ||
      nl == 0 || nl > MAXL)
    return false;
  double space = 1, reduce = 1;
  bool used[MAXL] = {false};
  for (int l = 0; l < nl; l++) {
    const ir_stmt *ls = srch_find_loop(f, cl[l].var);
    int64_t ext, mn;
    if (!ls || !ir_as_int(ls->u.loop.extent, &ext) || !ir_as_int(ls->u.loop.min, &mn) || mn != 0) return false;
    /* perfectly nested: each loop's body is the next loop or the block */
    const ir_stmt *next = l + 1 < nl ? srch_find_loop(f, cl[l + 1].var) : r;
    if (ls->u.loop.body != next) return false;
    int it = -1;
    for (int i = 0; i < b->niter; i++) {
      const ir_expr *e = r->u.realize.iter_values[i];
      if (e->kind == IR_VAR && e->u.var == cl[l].var) it = i;
    }
    if (it < 0 || used[it]) return false;
    used[it] = true;
    is_red[l] = b->iters[it].type == IR_ITER_R;
    if (is_red[l]) reduce *= (double)ext;
    else space *= (double)ext;
  }
  double max_par = (double)c->num_cores * 16;
  *nl_out = nl;
  if (b->nreads >= 1 && srch_block_has_reuse(b)) return !(space >= reduce || space > max_par);
  return reduce > 1 && reduce > (double)c->num_cores;
}

/* In a fork of work: rfactor at the outer (which = 0) or inner (1) piece of
 * the split fused reduction loop (the last two loops of the block). NULL if
 * refused. */
static sch_traced *rfactor_fork(const srch_rule_ctx *c, sch_traced *work, const char *block, int nspatial,
                                int which) {
  ts_diag q;
  ts_diag_clear(&q);
  int b, nl, rf;
  const int *lp;
  sch_traced *f = srch_fork_block(c, work, block, &b, &q);
  if (f && (sch_t_get_loops(f, b, &lp, &nl, &q) || nl < 2 || sch_t_rfactor(f, lp[nl - 2 + which], nspatial, &rf, &q) ||
            sch_t_annotate(f, b, SRCH_ANN_RFACTOR_PRODUCER, sch_arg_int(1), &q))) {
    sch_traced_free(f);
    return NULL;
  }
  return f;
}

/* Splits the fused reduction loop fl of f in three: (p0, p1, p2) into p,
 * their sampled factors into v. p0, the
 * thread piece, is a small multiple of the core count that divides the
 * reduction, sampled (few long shares keep the write-back short), and
 * (p1, p2) a perfect tile; without such a multiple, all three are a
 * perfect tile. */
static bool split_thread_pieces(const srch_rule_ctx *c, sch_traced *f, int fl, int *v, int *p, ts_diag *q) {
  int64_t ext = 0, cand[4];
  double pr[4];
  int nc = 0;
  const ir_stmt *ls = srch_find_loop(sch_traced_func(f), sch_t_loop(f, fl).var);
  if (ls && ir_as_int(ls->u.loop.extent, &ext))
    for (int64_t k = 1; k <= 8; k *= 2) {
      int64_t pc = (int64_t)c->num_cores * k;
      if (ext % pc == 0 && ext / pc >= 2) cand[nc++] = pc;
    }
  if (nc == 0) {
    if (sch_t_sample_perfect_tile(f, fl, 3, c->max_innermost, NULL, v, q)) return false;
    sch_arg fa[3] = {sch_arg_rv(v[0]), sch_arg_rv(v[1]), sch_arg_rv(v[2])};
    return !sch_t_split(f, fl, 3, fa, p, q);
  }
  for (int i = 0; i < nc; i++) pr[i] = 1.0 / nc;
  int rest[2], w[2];
  if (sch_t_sample_categorical(f, nc, cand, pr, NULL, &v[0], q)) return false;
  sch_arg fa[2] = {sch_arg_rv(v[0]), sch_arg_none()};
  if (sch_t_split(f, fl, 2, fa, rest, q) || sch_t_sample_perfect_tile(f, rest[1], 2, c->max_innermost, NULL, w, q))
    return false;
  sch_arg fb[2] = {sch_arg_rv(w[0]), sch_arg_rv(w[1])};
  p[0] = rest[0];
  v[1] = w[0];
  v[2] = w[1];
  return !sch_t_split(f, rest[1], 2, fb, p + 1, q);
}

/* In a fork of work (whose last loop of block is the fused reduction
 * loop): split it in three sampled pieces (p0, p1, p2; p0 a small multiple
 * of the core count where one divides), rfactor at p0 and
 * p2 fused, and in the rfactor block put p1 between them, so each of the p0
 * pieces (a thread's share) sums into p2 partials held as vector lanes:
 * loops (p0, p1, p2) with p0 parallel and p2 vectorised by the later rules.
 * With only the outer piece rfactored a thread's sum runs in one scalar
 * chain; with only the inner one no thread has a share of its own. NULL if
 * refused. */
static sch_traced *rfactor_threads_lanes_fork(const srch_rule_ctx *c, sch_traced *work, const char *block,
                                              int nspatial) {
  ts_diag q;
  ts_diag_clear(&q);
  int b, nl, rf, v[3], p[3], fz = -1, ab[2];
  const int *lp;
  sch_traced *f = srch_fork_block(c, work, block, &b, &q);
  bool ok = f && !sch_t_get_loops(f, b, &lp, &nl, &q) && nl >= 1;
  if (ok) ok = split_thread_pieces(c, f, lp[nl - 1], v, p, &q);
  if (ok) {
    int ord[3] = {p[0], p[2], p[1]}, two[2] = {p[0], p[2]};
    ok = !sch_t_reorder(f, 3, ord, &q) && !sch_t_fuse(f, 2, two, &fz, &q) && !sch_t_rfactor(f, fz, nspatial, &rf, &q);
  }
  if (ok) ok = !sch_t_get_loops(f, rf, &lp, &nl, &q) && nl >= 2;
  if (ok) {
    int red = lp[nl - 1];
    sch_arg fa[2] = {sch_arg_rv(v[0]), sch_arg_rv(v[2])};
    ok = !sch_t_split(f, lp[nl - 2], 2, fa, ab, &q);
    if (ok) {
      int ord[3] = {ab[0], red, ab[1]};
      ok = !sch_t_reorder(f, 3, ord, &q);
    }
  }
  if (ok) ok = !sch_t_annotate(f, b, SRCH_ANN_RFACTOR_PRODUCER, sch_arg_int(1), &q);
  if (!ok) {
    sch_traced_free(f);
    return NULL;
  }
  return f;
}

ts_status srch_rule_add_rfactor(const srch_rule_ctx *c, sch_traced *t, const char *block, ts_vec *out,
                                ts_diag *d) {
  int nl = 0;
  bool is_red[MAXL];
  if (!eligible(c, t, block, &nl, is_red)) return srch_push(out, t, d);
  ts_diag q;
  ts_diag_clear(&q);
  /* the work happens on a fork; t stays the original sketch */
  sch_traced *w = srch_fork(c, t, &q);
  if (!w) return srch_push(out, t, d);
  int b, n2, order[MAXL], no = 0, nsp = 0, red[MAXL], nred = 0;
  const int *lp;
  bool ok = !sch_t_get_block(w, block, &b, &q) && !sch_t_get_loops(w, b, &lp, &n2, &q) && n2 == nl;
  if (ok) {
    for (int l = 0; l < nl; l++)
      if (!is_red[l]) order[no++] = lp[l];
    nsp = no;
    for (int l = 0; l < nl; l++)
      if (is_red[l]) order[no++] = red[nred++] = lp[l];
    bool moved = false;
    for (int l = 0; l < nl; l++) moved |= order[l] != lp[l];
    if (moved) ok = !sch_t_reorder(w, no, order, &q);
  }
  int fused = red[0], v[2], sp[2];
  if (ok && nred > 1) ok = !sch_t_fuse(w, nred, red, &fused, &q);
  /* on several cores, threads' shares summed in vector lanes as well */
  sch_traced *f2 = ok && c->num_cores > 1 ? rfactor_threads_lanes_fork(c, w, block, nsp) : NULL;
  if (ok) ok = !sch_t_sample_perfect_tile(w, fused, 2, c->max_innermost, NULL, v, &q);
  if (ok) {
    sch_arg f[2] = {sch_arg_rv(v[0]), sch_arg_rv(v[1])};
    ok = !sch_t_split(w, fused, 2, f, sp, &q);
  }
  sch_traced *f0 = ok ? rfactor_fork(c, w, block, nsp, 0) : NULL;
  sch_traced *f1 = ok ? rfactor_fork(c, w, block, nsp, 1) : NULL;
  sch_traced_free(w);
  ts_status st = TS_OK;
  if (f0) st = srch_push(out, f0, d);
  if (f1 && !st) st = srch_push(out, f1, d);
  else if (f1) sch_traced_free(f1);
  if (f2 && !st) st = srch_push(out, f2, d);
  else if (f2) sch_traced_free(f2);
  if (!st) st = srch_push(out, t, d);
  else sch_traced_free(t);
  return st;
}
