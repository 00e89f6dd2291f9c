/* blockize.c — the blockize primitive (TVM's Blockize; see blockize.h).
 *
 * Subspace division: each binding of the block under loop l is an affine
 * sum of loop vars. The terms in loops at or under l form the inner part;
 * for the split to be a block boundary the inner part must enumerate
 * [0, E) densely — sorted by coefficient the inner loops' coefficients are
 * 1, e0, e0*e1, ... with E their product times the last extent — and the
 * remaining (outer) part, constant included, must be a multiple of E. Then
 * binding = (outer / E) * E + inner, and the outer block's iter var takes
 * outer / E. Fused bindings (floordiv / floormod) are not affine and are
 * refused with that reason; split them back or blockize a loop that keeps
 * them whole. */
#include "blockize.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../print.h"
#include "sch_int.h"

#define P "blockize"
#define MAXT 32

/* An affine form: sum c[i] * v[i] + k. */
typedef struct lin {
  int n;
  const ir_var *v[MAXT];
  int64_t c[MAXT];
  int64_t k;
} lin;

static bool lin_add_term(lin *l, const ir_var *v, int64_t c) {
  for (int i = 0; i < l->n; i++)
    if (l->v[i] == v) {
      l->c[i] += c;
      return true;
    }
  if (l->n == MAXT) return false;
  l->v[l->n] = v;
  l->c[l->n++] = c;
  return true;
}

/* Adds scale * e to l; false if e is not affine in vars. */
static bool linearize(const ir_expr *e, int64_t scale, lin *l) {
  int64_t c;
  if (!e) return false;
  switch (e->kind) {
  case IR_INT_IMM:
    l->k += scale * e->u.ival;
    return true;
  case IR_VAR:
    return lin_add_term(l, e->u.var, scale);
  case IR_CAST:
    return ir_dtype_is_int(e->dtype) && ir_dtype_is_int(e->u.cast.value->dtype) &&
           linearize(e->u.cast.value, scale, l);
  case IR_ADD:
    return linearize(e->u.bin.a, scale, l) && linearize(e->u.bin.b, scale, l);
  case IR_SUB:
    return linearize(e->u.bin.a, scale, l) && linearize(e->u.bin.b, -scale, l);
  case IR_MUL:
    if (ir_as_int(e->u.bin.b, &c)) return linearize(e->u.bin.a, scale * c, l);
    if (ir_as_int(e->u.bin.a, &c)) return linearize(e->u.bin.b, scale * c, l);
    return false;
  default:
    return false;
  }
}

/* Builds sum c[i]/div * v[i] + k/div in dtype t, over the terms selected
 * by keep (NULL: all). */
static ir_expr *lin_build(ts_arena *a, const lin *l, ir_dtype t, int64_t div, const bool *keep, bool with_k) {
  ir_expr *sum = NULL;
  for (int i = 0; i < l->n; i++) {
    if ((keep && !keep[i]) || l->c[i] == 0) continue;
    ir_var *v = (ir_var *)l->v[i];
    ir_expr *x = ir_var_ref(a, v);
    if (x && !ir_dtype_eq(v->dtype, t)) x = ir_cast(a, t, x);
    int64_t c = l->c[i] / div;
    if (c != 1) x = ir_mul(a, x, ir_int(a, t, c));
    sum = sum ? ir_add(a, sum, x) : x;
  }
  if (with_k && (l->k || !sum)) {
    ir_expr *k = ir_int(a, t, l->k / div);
    sum = sum ? ir_add(a, sum, k) : k;
  }
  return sum;
}

typedef struct inner_loop {
  const ir_var *var;
  int64_t ext;
} inner_loop;

static int cmp_coef(const void *x, const void *y) {
  const int64_t *a = x, *b = y;
  return a[0] < b[0] ? -1 : a[0] > b[0];
}

/* The perfect nest of constant, zero-based, unbound loops under top (the
 * blockized loop) down to its one block realize, into loops[0..*nl). */
static ts_status perfect_nest(ir_stmt *top, sch_loop loop, inner_loop loops[64], int *nl, ir_stmt **rz, ts_diag *d) {
  ir_stmt *cur = top;
  *nl = 0;
  while (cur && cur->kind == IR_FOR) {
    int64_t mn, ex;
    if (!ir_as_int(cur->u.loop.min, &mn) || !ir_as_int(cur->u.loop.extent, &ex))
      return ts_diag_set(d, TS_ESCHEDULE, P ": loop '%s' under '%s' has a non-constant range", cur->u.loop.var->name,
                         loop.var->name);
    if (mn != 0)
      return ts_diag_set(d, TS_ESCHEDULE, P ": loop '%s' under '%s' starts at %lld, not 0", cur->u.loop.var->name,
                         loop.var->name, (long long)mn);
    if (cur->u.loop.kind == IR_FOR_THREAD_BINDING)
      return ts_diag_set(d, TS_ESCHEDULE, P ": loop '%s' under '%s' is bound to a thread", cur->u.loop.var->name,
                         loop.var->name);
    if (*nl == 64) return ts_diag_set(d, TS_ESCHEDULE, P ": more than 64 loops under '%s'", loop.var->name);
    loops[*nl].var = cur->u.loop.var;
    loops[(*nl)++].ext = ex;
    cur = cur->u.loop.body;
  }
  if (!cur || cur->kind != IR_BLOCK_REALIZE) {
    ts_vec rs;
    ts_vec_init(&rs);
    sch_child_realizes(top, &rs);
    size_t n = rs.len;
    ts_vec_fini(&rs);
    if (n != 1)
      return ts_diag_set(d, TS_ESCHEDULE, P ": loop '%s' holds %zu blocks; blockize needs exactly one", loop.var->name,
                         n);
    return ts_diag_set(d, TS_ESCHEDULE,
                       P ": between loop '%s' and its block there is a statement that is not a loop (%s)",
                       loop.var->name, cur && cur->kind == IR_SEQ ? "a sequence" : cur && cur->kind == IR_IF ? "an if" : "a let or allocation");
  }
  *rz = cur;
  return TS_OK;
}

ts_status sch_blockize(sch_state *s, sch_loop loop, sch_block *out, ts_diag *d) {
  ts_arena *a = &s->arena;
  sch_path p;
  if (loop.mark != SCH_LOC_LOOP || !loop.var)
    return ts_diag_set(d, TS_ESCHEDULE, P ": needs a real loop, not a compute-location mark");
  ts_status st = sch_find_loop(s, loop.var, &p, P, d);
  if (st) return st;
  int k = p.n - 1;
  ir_stmt *top = p.node[k];
  /* the perfect nest under l */
  inner_loop loops[64];
  int nl = 0;
  ir_stmt *rz = NULL;
  if ((st = perfect_nest(top, loop, loops, &nl, &rz, d))) return st;
  ir_block *b = rz->u.realize.block;
  /* the predicate may only use loops above l */
  for (int j = 0; j < nl; j++)
    if (ir_expr_uses_var(rz->u.realize.predicate, loops[j].var))
      return ts_diag_set(d, TS_ESCHEDULE,
                         P ": block '%s' has a predicate that uses loop '%s' under '%s' (an imperfect split "
                         "inside the new block)",
                         b->name, loops[j].var->name, loop.var->name);
  int ni = b->niter;
  ir_iter_var *oiters = TS_ANEWN(a, ir_iter_var, ni ? ni : 1);
  ir_expr **ovals = TS_ANEWN(a, ir_expr *, ni ? ni : 1);
  ir_expr **ivals = TS_ANEWN(a, ir_expr *, ni ? ni : 1);
  ir_var_map init_map;
  ir_var_map_init(&init_map);
  ir_var *init_loops_v[64];
  int64_t init_ext[64];
  int ninit = 0;
  if (!oiters || !ovals || !ivals) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  int no = 0;
  bool outer_reduce = false;
  st = TS_OK;
  for (int i = 0; i < ni && !st; i++) {
    const ir_iter_var *iv = &b->iters[i];
    ir_expr *e = rz->u.realize.iter_values[i];
    ir_dtype t = e->dtype;
    lin l = {0};
    if (!linearize(e, 1, &l)) {
      char *es = ir_expr_to_string(e);
      st = ts_diag_set(d, TS_ESCHEDULE, P ": binding %s = %s of block '%s' is not an affine sum of loops", iv->var->name,
                       es ? es : "?", b->name);
      ts_free(es);
      break;
    }
    /* inner terms, sorted by coefficient */
    int64_t terms[64][2];
    int nt = 0;
    bool inner[MAXT] = {false};
    for (int t2 = 0; t2 < l.n; t2++) {
      if (l.c[t2] == 0) continue;
      for (int j = 0; j < nl; j++)
        if (loops[j].var == l.v[t2]) {
          inner[t2] = true;
          terms[nt][0] = l.c[t2];
          terms[nt++][1] = loops[j].ext;
        }
    }
    qsort(terms, (size_t)nt, sizeof terms[0], cmp_coef);
    int64_t E = 1;
    for (int j = 0; j < nt && !st; j++) {
      if (terms[j][0] != E) {
        char *es = ir_expr_to_string(e);
        st = ts_diag_set(d, TS_ESCHEDULE,
                         P ": binding %s = %s of block '%s' does not divide at loop '%s': the loops under it "
                         "do not cover a dense range (coefficient %lld where %lld is needed)",
                         iv->var->name, es ? es : "?", b->name, loop.var->name, (long long)terms[j][0],
                         (long long)E);
        ts_free(es);
      }
      E *= terms[j][1];
    }
    if (st) break;
    int64_t dmin, dext;
    /* a symbolic extent (a model's batch or sequence) only where the loops
     * under `loop` leave it whole (E = 1): the outer iter var takes it as it is */
    bool symx = E == 1 && ir_as_int(iv->dom.min, &dmin) && dmin == 0 && !ir_as_int(iv->dom.extent, &dext);
    if (symx) dext = INT64_MAX;
    if (!symx && (!ir_as_int(iv->dom.min, &dmin) || !ir_as_int(iv->dom.extent, &dext) || dmin != 0)) {
      st = ts_diag_set(d, TS_ESCHEDULE, P ": iter var %s of block '%s' has a non-constant or non-zero-based domain",
                       iv->var->name, b->name);
      break;
    }
    bool outer_divisible = l.k % E == 0;
    for (int t2 = 0; t2 < l.n; t2++)
      if (!inner[t2] && l.c[t2] % E != 0) outer_divisible = false;
    if (!outer_divisible || dext % E != 0) {
      char *es = ir_expr_to_string(e);
      st = ts_diag_set(d, TS_ESCHEDULE,
                       P ": binding %s = %s of block '%s' does not divide at loop '%s': %s is not a multiple "
                       "of the inner extent %lld",
                       iv->var->name, es ? es : "?", b->name, loop.var->name,
                       outer_divisible ? "the iter var's domain" : "the part outside the loop", (long long)E);
      ts_free(es);
      break;
    }
    bool outer_mask[MAXT];
    bool has_outer = l.k != 0;
    for (int t2 = 0; t2 < l.n; t2++) {
      outer_mask[t2] = !inner[t2];
      if (outer_mask[t2] && l.c[t2]) has_outer = true;
    }
    ir_expr *inner_e = nt ? lin_build(a, &l, t, 1, inner, false) : NULL;
    ir_expr *vo_ref = NULL;
    if (has_outer || dext / E > 1) {
      ir_var *vo = ir_var_new(a, ts_arena_printf(a, "%s_o", iv->var->name), iv->var->dtype);
      if (!vo) {
        st = ts_diag_set(d, TS_ENOMEM, "out of memory");
        break;
      }
      oiters[no] = (ir_iter_var){vo,
                                 {ir_int(a, iv->dom.min->dtype, 0),
                                  symx ? iv->dom.extent : ir_int(a, iv->dom.extent->dtype, dext / E)},
                                 iv->type};
      ovals[no++] = lin_build(a, &l, t, E, outer_mask, true);
      if (iv->type == IR_ITER_R) outer_reduce = true;
      vo_ref = ir_var_ref(a, vo);
      if (vo_ref && !ir_dtype_eq(vo->dtype, t)) vo_ref = ir_cast(a, t, vo_ref);
      if (vo_ref && E != 1) vo_ref = ir_mul(a, vo_ref, ir_int(a, t, E));
    }
    ivals[i] = vo_ref && inner_e ? ir_add(a, vo_ref, inner_e) : vo_ref ? vo_ref : inner_e ? inner_e : ir_int(a, t, 0);
    /* the init (moved outward) covers the inner spatial range */
    if (b->init && iv->type == IR_ITER_S && E > 1) {
      ir_var *lv = ir_var_new(a, ts_arena_printf(a, "%s_init", iv->var->name), t);
      if (!lv || ninit == 64) {
        st = ts_diag_set(d, TS_ENOMEM, "out of memory");
        break;
      }
      ir_expr *lref = ir_var_ref(a, lv);
      init_loops_v[ninit] = lv;
      init_ext[ninit++] = E;
      ir_var_map_put(&init_map, iv->var, vo_ref ? ir_add(a, vo_ref, lref) : lref);
    } else if (b->init) {
      ir_var_map_put(&init_map, iv->var, vo_ref ? vo_ref : ir_int(a, t, 0));
    }
  }
  if (st) {
    ir_var_map_fini(&init_map);
    return st;
  }
  /* inner block: same block, new bindings; its init moves out when the outer
   * block reduces */
  ir_block *ib = ir_block_clone(a, b);
  ir_stmt *irz = ib ? ir_realize(a, ib, ivals, ir_bool(a, true)) : NULL;
  ir_block *ob = ir_block_new(a, sch_fresh_block_name(s, ts_arena_printf(a, "%s_o", b->name)));
  if (!irz || !ob) {
    ir_var_map_fini(&init_map);
    return ts_diag_set(d, TS_ENOMEM, "out of memory");
  }
  if (b->init && outer_reduce) {
    ib->init = NULL;
    ir_stmt *init = ir_subst_stmt(a, b->init, &init_map);
    for (int j = ninit - 1; j >= 0 && init; j--) {
      ir_var *lv = init_loops_v[j];
      init = ir_for(a, lv, ir_int(a, lv->dtype, 0), ir_int(a, lv->dtype, init_ext[j]), IR_FOR_SERIAL, init);
    }
    ob->init = init;
  }
  ir_var_map_fini(&init_map);
  /* rebuild the loop nest over the inner realize */
  ir_stmt *body = irz;
  for (int j = nl - 1; j >= 0 && body; j--) {
    const ir_stmt *lp = top;
    for (int q = 0; q < j; q++) lp = lp->u.loop.body;
    ir_stmt *c2 = ir_stmt_clone(a, lp);
    if (c2) c2->u.loop.body = body;
    body = c2;
  }
  if (!body) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  ob->niter = no;
  ob->iters = oiters;
  ob->body = body;
  st = ir_block_detect_regions(a, ob, d);
  if (st) return st;
  ir_stmt *orz = ir_realize(a, ob, ovals, rz->u.realize.predicate);
  if (!orz) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  st = sch_replace(s, &p, k, orz, d);
  if (st) return st;
  if (out) out->name = ob->name;
  return sch_finish(s, TS_OK, d);
}
