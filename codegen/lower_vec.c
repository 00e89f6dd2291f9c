/* codegen/lower_vec.c — a vectorized loop to lanes (see codegen.h): the
 * body runs once with every expression widened to L lanes (ramps for
 * constant-stride indices, gathers otherwise), only when no lane can see
 * another lane's writes; anything else keeps the loop, which is always
 * correct. docs/TUNING.md ("Notes by file: codegen/"). */
#include "codegen/lower_int.h"

#include <string.h>

typedef struct access {
  const ir_buffer *buf;
  ir_expr *idx;
  bool store;
} access;

typedef struct vctx {
  ts_arena *a;
  ir_analyzer *an;
  ir_var *v;
  ir_expr *min;
  int lanes;
  const char *why; /* first reason the loop cannot be widened */
  bool oom;
  bool guarded; /* widening under a lane-dependent guard (see widen) */
  access *acc;
  int nacc, capacc;
} vctx;

static bool refuse(vctx *c, const char *why) {
  if (!c->why) c->why = why;
  return false;
}

static void *nn(vctx *c, void *p) {
  if (!p) c->oom = true;
  return p;
}

static bool uses(vctx *c, const ir_expr *e) { return ir_expr_uses_var(e, c->v); }

static bool record(vctx *c, const ir_buffer *b, ir_expr *idx, bool store) {
  if (c->nacc == c->capacc) {
    int nc = c->capacc ? c->capacc * 2 : 16;
    access *p = ts_realloc(c->acc, sizeof *p * (size_t)nc);
    if (!p) {
      c->oom = true;
      return false;
    }
    c->acc = p;
    c->capacc = nc;
  }
  c->acc[c->nacc++] = (access){b, idx, store};
  return true;
}

/* True if evaluating e for a lane whose guard is false could fault: a load,
 * or an integer division by something other than a non-zero constant. */
static bool hazard_cb(void *ctx, const ir_expr *e) {
  bool *found = ctx;
  int64_t k;
  switch (e->kind) {
  case IR_INT_IMM:
  case IR_FLOAT_IMM:
  case IR_VAR:
  case IR_NOT:
  case IR_SELECT:
  case IR_CAST:
  case IR_CALL:
  case IR_RAMP:
  case IR_BROADCAST:
    break;
  default: /* a load, an unknown kind, or a division by a maybe-zero */
    if (!ir_is_binop(e->kind)) *found = true;
    else if ((e->kind == IR_DIV || e->kind == IR_FLOORDIV || e->kind == IR_FLOORMOD) && !ir_dtype_is_float(e->dtype))
      *found |= !ir_as_int(e->u.bin.b, &k) || k == 0;
    break;
  }
  return !*found;
}

static bool hazardous(const ir_expr *e) {
  bool found = false;
  ir_visitor v = {.expr = hazard_cb, .ctx = &found};
  ir_visit_expr(&v, e);
  return found;
}

/* ---- legality ------------------------------------------------------------ */

/* What the widening handles: scalar, flat loads, no vectors yet. Records
 * every access for independent(). */
static bool check_expr_cb(void *ctx, const ir_expr *e) {
  vctx *c = ctx;
  if (c->why || c->oom) return false;
  if (e->dtype.lanes != 1) return refuse(c, "the body already holds vector expressions");
  switch (e->kind) {
  case IR_LOAD:
    if (e->u.load.nidx != 1) return refuse(c, "a load is not flat");
    return record(c, e->u.load.buf, e->u.load.idx[0], false);
  case IR_RAMP:
  case IR_BROADCAST:
    return refuse(c, "the body already holds vector expressions");
  case IR_INT_IMM:
  case IR_FLOAT_IMM:
  case IR_VAR:
  case IR_NOT:
  case IR_SELECT:
  case IR_CAST:
  case IR_CALL:
    return true;
  default:
    return ir_is_binop(e->kind) || refuse(c, "unknown expression kind");
  }
}

/* Stores, sequences, and ifs and lets whose condition or value does not
 * depend on the lane. */
static bool check_stmt_cb(void *ctx, const ir_stmt *s) {
  vctx *c = ctx;
  if (c->why || c->oom) return false;
  switch (s->kind) {
  case IR_STORE:
    if (s->u.store.nidx != 1) return refuse(c, "a store is not flat");
    if (s->u.store.predicate) return refuse(c, "a store has a predicate");
    if (!uses(c, s->u.store.idx[0]))
      return refuse(c, "a store index does not depend on the lane (a reduction over the vectorized loop)");
    return record(c, s->u.store.buf, s->u.store.idx[0], true);
  case IR_SEQ:
    return true;
  case IR_IF:
    return !uses(c, s->u.ifs.cond) || refuse(c, "an if condition depends on the lane");
  case IR_LET:
    return !uses(c, s->u.let.value) || refuse(c, "a let value depends on the lane");
  case IR_FOR:
    return refuse(c, "the body holds an inner loop");
  case IR_ALLOCATE:
    return refuse(c, "the body allocates a buffer");
  case IR_EVALUATE:
    return refuse(c, "the body evaluates an expression for effect");
  default:
    return refuse(c, "the body holds a block or an unknown statement");
  }
}

static bool check_stmt(vctx *c, ir_stmt *s) {
  if (!s) return refuse(c, "missing statement");
  ir_visitor v = {.expr = check_expr_cb, .stmt = check_stmt_cb, .ctx = c};
  ir_visit_stmt(&v, s);
  return !c->why && !c->oom;
}

/* How much idx moves from one lane to the next, when that is a constant.
 * An index that does not mention the lane moves by 0. */
static bool lane_stride(vctx *c, ir_expr *idx, int64_t *out) {
  if (!uses(c, idx)) {
    *out = 0;
    return true;
  }
  ir_var_map m;
  ir_var_map_init(&m);
  ir_expr *next = NULL;
  ir_expr *vp1 = nn(c, ir_add(c->a, nn(c, ir_var_ref(c->a, c->v)), nn(c, ir_int(c->a, c->v->dtype, 1))));
  if (vp1 && !ir_var_map_put(&m, c->v, vp1)) next = nn(c, ir_subst_expr(c->a, idx, &m));
  else c->oom = true;
  ir_var_map_fini(&m);
  if (!next) return false;
  ir_expr *delta = nn(c, ir_simplify(c->an, nn(c, ir_sub(c->a, next, idx))));
  return delta && ir_as_int(delta, out);
}

/* ---- widening -------------------------------------------------------------- */

static ir_expr *at_min(vctx *c, ir_expr *e) {
  ir_var_map m;
  ir_var_map_init(&m);
  ir_expr *r = NULL;
  ir_expr *mn = c->min;
  if (mn->dtype.code != c->v->dtype.code) mn = nn(c, ir_cast(c->a, c->v->dtype, mn));
  if (mn && !ir_var_map_put(&m, c->v, mn)) r = nn(c, ir_subst_expr(c->a, e, &m));
  else c->oom = true;
  ir_var_map_fini(&m);
  return r ? nn(c, ir_simplify(c->an, r)) : NULL;
}

static ir_expr *bcast(vctx *c, ir_expr *e) {
  if (!e || e->dtype.lanes != 1) return e;
  return nn(c, ir_broadcast(c->a, e, c->lanes));
}

static ir_dtype vec_of(vctx *c, ir_dtype t) { return ir_dt_vec((ir_dtype_code)t.code, c->lanes); }

static ir_expr *widen(vctx *c, ir_expr *e, bool guarded);

/* Integer ramp algebra, so that index parts stay ramps inside a gather
 * (ramp(b, s) + x = ramp(b + x, s), ramp(b, s) * x = ramp(b*x, s*x), ...).
 * x, y: widened operands (scalar = invariant). NULL when no rule applies. */
static ir_expr *fold_ramp(vctx *c, ir_expr_kind k, ir_expr *x, ir_expr *y) {
  if (!ir_dtype_is_int(x->dtype) || (k != IR_ADD && k != IR_SUB && k != IR_MUL)) return NULL;
  bool rx = x->kind == IR_RAMP, ry = y->kind == IR_RAMP;
  bool sx = x->dtype.lanes == 1, sy = y->dtype.lanes == 1;
  if (!(rx || ry) || !((rx || sx) && (ry || sy))) return NULL;
  ir_expr *zero = nn(c, ir_int(c->a, ir_dt((ir_dtype_code)x->dtype.code), 0));
  if (!zero) return NULL;
  ir_expr *bx = rx ? x->u.ramp.base : x, *by = ry ? y->u.ramp.base : y;
  ir_expr *tx = rx ? x->u.ramp.stride : zero, *ty = ry ? y->u.ramp.stride : zero;
  ir_expr *b, *s;
  switch (k) {
  case IR_ADD:
    b = ir_add(c->a, bx, by);
    s = ir_add(c->a, tx, ty);
    break;
  case IR_SUB:
    b = ir_sub(c->a, bx, by);
    s = ir_sub(c->a, tx, ty);
    break;
  default: /* MUL: only ramp * invariant */
    if (rx && ry) return NULL;
    b = ir_mul(c->a, bx, by);
    s = rx ? ir_mul(c->a, tx, y) : ir_mul(c->a, x, ty);
    break;
  }
  if (!nn(c, b) || !nn(c, s)) return NULL;
  b = nn(c, ir_simplify(c->an, b));
  s = nn(c, ir_simplify(c->an, s));
  return b && s ? nn(c, ir_ramp(c->a, b, s, c->lanes)) : NULL;
}

/* An index in lanes: ramp for a constant per-lane stride (a scalar when the
 * stride is 0), else a gather. */
static ir_expr *widen_index(vctx *c, ir_expr *idx, bool guarded, int64_t *stride_out, bool *affine) {
  int64_t k;
  *affine = false;
  if (lane_stride(c, idx, &k)) {
    ir_expr *base = at_min(c, idx);
    if (!base) return NULL;
    *affine = true;
    *stride_out = k;
    if (k == 0) return base;
    return nn(c, ir_ramp(c->a, base, nn(c, ir_int(c->a, base->dtype, k)), c->lanes));
  }
  if (c->oom) return NULL;
  return bcast(c, widen(c, idx, guarded));
}

/* A binary operation on widened operands: a ramp when the ramp algebra
 * applies, else the vector operation on broadcast operands. */
static ir_expr *widen_binop(vctx *c, const ir_expr *e, ir_expr *x, ir_expr *y) {
  ir_expr *n = fold_ramp(c, e->kind, x, y);
  if (n || c->oom) return n;
  n = nn(c, ir_binop(c->a, e->kind, bcast(c, x), bcast(c, y)));
  if (n) n->dtype = vec_of(c, e->dtype);
  return n;
}

static ir_expr *widen_load(vctx *c, ir_expr *e) {
  ir_expr *ix = e->u.load.idx[0], *idx;
  int64_t k = 0;
  bool affine = false;
  if (c->guarded && hazardous(ix)) idx = bcast(c, widen(c, ix, true));
  else idx = widen_index(c, ix, c->guarded, &k, &affine);
  bool scalar = affine && k == 0;
  if (scalar && c->guarded) {
    idx = bcast(c, idx);
    scalar = false;
  }
  if (!idx) return NULL;
  ir_expr *n = nn(c, ir_load(c->a, e->u.load.buf, 1, &idx));
  if (n) n->dtype = scalar ? e->dtype : vec_of(c, e->dtype);
  return scalar ? bcast(c, n) : n;
}

/* The kinds whose children are widened under another guard, or that are
 * not rebuilt from their widened children: a pre hook of the shared
 * mutator. Invariant, harmless subtrees stay as they are. */
static ir_expr *widen_pre(ir_mutator *m, ir_expr *e) {
  vctx *c = m->ctx;
  bool guarded = c->guarded;
  if (!uses(c, e) && !(guarded && hazardous(e))) return e;
  ir_expr *n = NULL;
  int64_t cv;
  switch (e->kind) {
  case IR_VAR: {
    ir_expr *mn = c->min;
    if (mn->dtype.code != c->v->dtype.code) mn = nn(c, ir_cast(c->a, c->v->dtype, mn));
    n = mn ? nn(c, ir_ramp(c->a, mn, nn(c, ir_int(c->a, c->v->dtype, 1)), c->lanes)) : NULL;
    break;
  }
  case IR_LOAD:
    n = widen_load(c, e);
    break;
  case IR_SELECT: {
    /* Any undecided condition guards the branches once widened: a
     * lane-invariant one becomes a broadcast mask, which protects vector
     * operations only, so scalar loads under it must be guarded too. */
    bool g = guarded || !ir_as_int(e->u.sel.cond, &cv);
    n = nn(c, ir_select(c->a, bcast(c, widen(c, e->u.sel.cond, guarded)), bcast(c, widen(c, e->u.sel.t, g)),
                        bcast(c, widen(c, e->u.sel.f, g))));
    if (n) n->dtype = vec_of(c, e->dtype);
    break;
  }
  case IR_AND:
  case IR_OR: { /* the right side runs under the left one */
    ir_expr *x = widen(c, e->u.bin.a, guarded);
    ir_expr *y = widen(c, e->u.bin.b, guarded || !ir_as_int(e->u.bin.a, &cv));
    n = x && y ? widen_binop(c, e, x, y) : NULL;
    break;
  }
  default:
    return NULL; /* children widened by the default walk, then widen_post */
  }
  if (!n) ir_mutator_fail(m);
  return n;
}

/* The rest, rebuilt in lanes from their widened children (in e). */
static ir_expr *widen_post(ir_mutator *m, const ir_expr *orig, ir_expr *e) {
  vctx *c = m->ctx;
  ir_expr *n = NULL;
  switch (orig->kind) {
  case IR_NOT:
    n = nn(c, ir_not(c->a, bcast(c, e->u.un.a)));
    break;
  case IR_CAST:
    n = nn(c, ir_cast(c->a, vec_of(c, orig->dtype), bcast(c, e->u.cast.value)));
    break;
  case IR_CALL: {
    int na = e->u.call.nargs;
    ir_expr **args = nn(c, TS_ANEWN(c->a, ir_expr *, na ? na : 1));
    for (int i = 0; i < na && args; i++)
      if (!(args[i] = bcast(c, e->u.call.args[i]))) args = NULL;
    n = args ? nn(c, ir_call(c->a, e->u.call.op, vec_of(c, orig->dtype), na, args)) : NULL;
    break;
  }
  default:
    if (!ir_is_binop(orig->kind)) {
      c->oom = true; /* unreachable after check_expr */
      break;
    }
    if (!(n = widen_binop(c, orig, e->u.bin.a, e->u.bin.b))) ir_mutator_fail(m);
    return n;
  }
  if (n) n->dtype = vec_of(c, orig->dtype);
  else ir_mutator_fail(m);
  return n;
}

/* e in lanes. Under a lane-dependent guard (the branches of a select whose
 * condition depends on the lane, the right side of such an && / ||),
 * nothing that may fault stays scalar: backends evaluate vector code under
 * the guard's lane mask, but a scalar load or division would run
 * unconditionally, even when every lane's guard is false. So there a load
 * always gets a vector index (a broadcast one if need be), and an
 * invariant but hazardous expression is widened too. */
static ir_expr *widen(vctx *c, ir_expr *e, bool guarded) {
  if (!e || c->oom) return NULL;
  bool outer = c->guarded;
  c->guarded = guarded;
  static const ir_mutator_hooks h = {.pre_expr = widen_pre, .post_expr = widen_post};
  ir_expr *n = ir_rewrite_expr(c->a, &h, c, e, &c->oom);
  c->guarded = outer;
  return c->oom ? NULL : n;
}

/* Stores widened; sequences, ifs and lets (whose conditions and values
 * check_stmt found lane-invariant) rebuilt around them by the default walk. */
static ir_stmt *widen_stmt_pre(ir_mutator *m, ir_stmt *s) {
  vctx *c = m->ctx;
  ir_stmt *n = NULL;
  switch (s->kind) {
  case IR_STORE: {
    int64_t k = 0;
    bool affine;
    ir_expr *idx = widen_index(c, s->u.store.idx[0], false, &k, &affine);
    ir_expr *v = idx ? bcast(c, widen(c, s->u.store.value, false)) : NULL;
    n = v ? nn(c, ir_store(c->a, s->u.store.buf, 1, &idx, v)) : NULL;
    break;
  }
  case IR_SEQ:
  case IR_IF:
  case IR_LET:
    return NULL;
  default:
    c->oom = true; /* unreachable after check_stmt */
    break;
  }
  if (!n) ir_mutator_fail(m);
  return n;
}

static ir_stmt *widen_stmt(vctx *c, ir_stmt *s) {
  static const ir_mutator_hooks h = {.pre_stmt = widen_stmt_pre};
  ir_stmt *n = ir_rewrite_stmt(c->a, &h, c, s, &c->oom);
  return c->oom ? NULL : n;
}

/* Lanes write distinct elements, and read back only their own. */
static bool independent(vctx *c) {
  for (int i = 0; i < c->nacc; i++) {
    if (!c->acc[i].store) continue;
    int64_t k;
    if (!lane_stride(c, c->acc[i].idx, &k) || k == 0)
      return c->oom ? false : refuse(c, "a store index does not move by a constant per lane");
    for (int j = 0; j < c->nacc; j++) {
      if (j == i || c->acc[j].buf != c->acc[i].buf) continue;
      if (!ir_can_prove_equal(c->an, c->acc[j].idx, c->acc[i].idx))
        return refuse(c, "a stored buffer is also accessed at another index (lanes would see each other's writes)");
    }
  }
  return true;
}

ts_status cg_vectorize_loop(ts_arena *a, ir_analyzer *an, ir_stmt *loop, ir_stmt **out, const char **why) {
  *out = loop;
  if (why) *why = NULL;
  int64_t lanes;
  if (!loop || loop->kind != IR_FOR || !ir_as_int(loop->u.loop.extent, &lanes)) {
    if (why) *why = "the extent is not a constant";
    return TS_OK;
  }
  if (lanes < 1 || lanes > CG_MAX_LANES) {
    if (why) *why = lanes < 1 ? "the loop is empty" : "more lanes than " "64";
    return TS_OK;
  }
  vctx c;
  memset(&c, 0, sizeof c);
  c.a = a;
  c.an = an;
  c.v = loop->u.loop.var;
  c.min = loop->u.loop.min;
  c.lanes = (int)lanes;
  ir_stmt *res = NULL;
  if (lanes == 1) {
    /* One lane: the body at v = min, no vector types needed. */
    ir_var_map m;
    ir_var_map_init(&m);
    ir_expr *mn = c.min;
    if (mn->dtype.code != c.v->dtype.code) mn = nn(&c, ir_cast(a, c.v->dtype, mn));
    if (mn && !ir_var_map_put(&m, c.v, mn)) res = nn(&c, ir_subst_stmt(a, loop->u.loop.body, &m));
    else c.oom = true;
    ir_var_map_fini(&m);
  } else if (check_stmt(&c, loop->u.loop.body) && independent(&c)) {
    res = widen_stmt(&c, loop->u.loop.body);
  }
  ts_free(c.acc);
  if (c.oom) return TS_ENOMEM;
  if (res) *out = res;
  else if (why) *why = c.why;
  return TS_OK;
}
