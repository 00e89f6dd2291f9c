/* codegen/cuda_barrier.c — the CUDA emitter's barrier pass (TVM's ThreadSync for the
 * shared scope): a __syncthreads() goes before a statement that reads a
 * shared buffer written since the last barrier, or writes one read or
 * written since then; loops are walked twice so a loop-carried conflict puts
 * a barrier at the top of the body; a barrier inside divergent code (a
 * guarded thread loop, an if) is refused. The kernel is rebuilt with the
 * context's sentinel statement where a barrier goes; cuda_emit.c prints it. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "codegen/cuda_int.h"
#include "ir/mutator.h"

/* ---- barrier pass ------------------------------------------------------------- */


static bool set_has(const ir_buffer *const *s, int n, const ir_buffer *b) {
  for (int i = 0; i < n; i++)
    if (s[i] == b) return true;
  return false;
}
static void set_add(accset *s, bool write, const ir_buffer *b) {
  const ir_buffer **arr = write ? s->w : s->r;
  int *n = write ? &s->nw : &s->nr;
  if (set_has(arr, *n, b)) return;
  if (*n >= MAXSH) {
    s->overflow = true;
    return;
  }
  arr[(*n)++] = b;
}
static void set_union(accset *into, const accset *x) {
  for (int i = 0; i < x->nr; i++) set_add(into, false, x->r[i]);
  for (int i = 0; i < x->nw; i++) set_add(into, true, x->w[i]);
  into->overflow |= x->overflow;
}

static bool acc_expr_cb(void *ctx, const ir_expr *e) {
  if (e->kind == IR_LOAD && is_shared(e->u.load.buf)) set_add(ctx, false, e->u.load.buf);
  if (e->kind == IR_ACCESS_PTR && is_shared(e->u.ptr.buf)) { /* WMMA loads/stores through a pointer */
    if (e->u.ptr.rw & IR_ACCESS_READ) set_add(ctx, false, e->u.ptr.buf);
    if (e->u.ptr.rw & IR_ACCESS_WRITE) set_add(ctx, true, e->u.ptr.buf);
  }
  return true;
}
static bool acc_stmt_cb(void *ctx, const ir_stmt *s) {
  if (s->kind == IR_STORE && is_shared(s->u.store.buf)) set_add(ctx, true, s->u.store.buf);
  return true;
}
void cu_accesses(const ir_stmt *s, accset *out) {
  memset(out, 0, sizeof *out);
  ir_visitor v = {acc_expr_cb, acc_stmt_cb, out};
  ir_visit_stmt(&v, s);
}

/* A barrier is needed before a statement with accesses x after pend. */
bool cu_conflicts(const accset *pend, const accset *x) {
  if (pend->overflow || x->overflow) return (pend->nr || pend->nw) && (x->nr || x->nw);
  for (int i = 0; i < x->nr; i++)
    if (set_has(pend->w, pend->nw, x->r[i])) return true; /* RAW */
  for (int i = 0; i < x->nw; i++)
    if (set_has(pend->r, pend->nr, x->w[i])) return true; /* WAR */
  return false;
}

static const char *stmt_what(const ir_stmt *s) {
  if (s->kind == IR_FOR) return s->u.loop.var ? s->u.loop.var->name : "a loop";
  if (s->kind == IR_STORE) return s->u.store.buf ? s->u.store.buf->name : "a store";
  if (s->kind == IR_IF) return "an if";
  return "a statement";
}


static ir_stmt *with_barrier(cctx *c, ir_stmt *s) {
  ir_stmt *two[2] = {c->sync, s};
  ir_stmt *r = ir_seq(c->a, 2, two);
  if (!r) failp(c, TS_ENOMEM, "cuda: out of memory");
  return r;
}

/* The pass is an ir_mutator whose pre_stmt hook (sync_pre) handles every
 * statement; this is its state. pend, converged and where describe the walk
 * at the current node and are saved and restored around children (walk);
 * in_seq says the node is a direct child of a converged SEQ being walked,
 * where a conflicting child gets its barrier in front of it. */
typedef struct sync_ctx {
  cctx *c;
  accset *pend;
  bool converged, in_seq;
  const char *where;
} sync_ctx;

/* A failure of the pass (c->st) stops the mutator; an OOM of the mutator
 * becomes the pass's. */
static bool sync_failed(ir_mutator *m) {
  sync_ctx *sc = m->ctx;
  if (sc->c->st) ir_mutator_fail(m);
  else if (m->failed) failp(sc->c, TS_ENOMEM, "cuda: out of memory");
  return m->failed;
}

/* s walked with pend/converged/where (its own state afterwards): s itself
 * through ir_mutate_stmt, or with children set, only its children through
 * the mutator's default rebuild (LET/ALLOCATE/FOR/SEQ, whose children share
 * one pending set; in_seq for a SEQ's). */
static ir_stmt *walk_as(ir_mutator *m, ir_stmt *s, accset *pend, bool converged, const char *where, bool children,
                        bool in_seq) {
  sync_ctx *sc = m->ctx, saved = *sc;
  sc->pend = pend;
  sc->converged = converged;
  sc->where = where;
  sc->in_seq = in_seq;
  ir_stmt *r = children ? ir_mutate_stmt_children(m, s) : ir_mutate_stmt(m, s);
  *sc = saved;
  return r;
}
static ir_stmt *walk(ir_mutator *m, ir_stmt *s, accset *pend, bool converged, const char *where) {
  return walk_as(m, s, pend, converged, where, false, false);
}
static ir_stmt *walk_children(ir_mutator *m, ir_stmt *s, accset *pend, bool converged, const char *where,
                              bool in_seq) {
  return walk_as(m, s, pend, converged, where, true, in_seq);
}

/* The inside of a divergent statement must not need a barrier: walk its
 * children as not converged (a conflict there is refused). */
static void check_inside(ir_mutator *m, ir_stmt *s, const char *where) {
  accset p;
  memset(&p, 0, sizeof p);
  switch (s->kind) {
  case IR_FOR:
    (void)walk(m, s->u.loop.body, &p, false, where);
    (void)walk(m, s->u.loop.body, &p, false, where); /* the next iteration */
    return;
  case IR_IF:
    (void)walk(m, s->u.ifs.then_s, &p, false, where);
    memset(&p, 0, sizeof p);
    if (s->u.ifs.else_s) (void)walk(m, s->u.ifs.else_s, &p, false, where);
    return;
  case IR_SEQ:
    for (int i = 0; i < s->u.seq.n; i++) (void)walk(m, s->u.seq.stmts[i], &p, false, where);
    return;
  case IR_LET: (void)walk(m, s->u.let.body, &p, false, where); return;
  case IR_ALLOCATE: (void)walk(m, s->u.alloc.body, &p, false, where); return;
  default: return;
  }
}

/* An atomic statement (no barrier may go inside): a barrier before it if it
 * conflicts with pend; its own inside must not need one. */
static ir_stmt *sync_atomic(ir_mutator *m, ir_stmt *s, const accset *x) {
  sync_ctx *sc = m->ctx;
  cctx *c = sc->c;
  ir_stmt *r = s;
  check_inside(m, s, s->kind == IR_FOR ? s->u.loop.var->name : sc->where);
  if (c->st) return NULL;
  if (cu_conflicts(sc->pend, x)) {
    if (!sc->converged) {
      FAIL(c, "cuda: a __syncthreads() is needed before %s, which runs in divergent code (%s); "
              "bind the shared-memory stages so every thread reaches the barrier",
           stmt_what(s), sc->where);
      return NULL;
    }
    r = with_barrier(c, s);
    memset(sc->pend, 0, sizeof *sc->pend);
  }
  set_union(sc->pend, x);
  return r;
}

/* A loop: atomic when divergent (guarded thread loop, thread-dependent
 * bounds), else its body walked twice so that the second pass starts with
 * what the body leaves pending and a conflict carried to the next iteration
 * gets its barrier; the first walk's result is discarded. */
static ir_stmt *sync_for(ir_mutator *m, ir_stmt *s, const accset *x) {
  sync_ctx *sc = m->ctx;
  cctx *c = sc->c;
  int tag = s->u.loop.kind == IR_FOR_THREAD_BINDING ? cu_tag_of(s->u.loop.thread) : TAG_NONE;
  bool bounds_vary = (cu_expr_mask(c, s->u.loop.min, NULL) | cu_expr_mask(c, s->u.loop.extent, NULL)) &
                     THREAD_BITS;
  bool conv = sc->converged && !bounds_vary;
  if (tag >= TAG_TX && tag <= TAG_TZ) {
    int64_t ext = 0;
    ir_as_int(s->u.loop.extent, &ext);
    if (ext < c->launch[tag]) conv = false; /* guarded: divergent */
  }
  if (!conv) return sync_atomic(m, s, x);
  int nv = c->nvars;
  cu_push_var(c, s->u.loop.var, tag >= 0 && tag < TAG_VTHREAD ? 1u << tag : 0, tag, 1);
  accset p0 = *sc->pend;
  accset p2 = p0;
  int64_t once = 0;
  bool single = ir_as_int(s->u.loop.extent, &once) && once == 1;
  if ((tag < 0 || tag == TAG_VTHREAD) && !single) { /* a real loop (blockIdx/threadIdx ones are not iterated) */
    accset p1 = *sc->pend;
    (void)walk(m, s->u.loop.body, &p1, conv, s->u.loop.var->name);
    set_union(&p2, &p1);
  }
  ir_stmt *r = walk_children(m, s, &p2, conv, s->u.loop.var->name, false);
  c->nvars = nv;
  if (c->st) return NULL;
  *sc->pend = p2;
  set_union(sc->pend, &p0); /* the loop may run zero times */
  return r;
}

/* An if: atomic when divergent, else each arm walked from the same pending
 * set and their leftovers merged. */
static ir_stmt *sync_if(ir_mutator *m, ir_stmt *s, const accset *x) {
  sync_ctx *sc = m->ctx;
  bool load = false;
  unsigned mask = cu_expr_mask(sc->c, s->u.ifs.cond, &load);
  if (!sc->converged || (mask & THREAD_BITS) || load) return sync_atomic(m, s, x);
  accset pe = *sc->pend;
  ir_stmt *t = walk(m, s->u.ifs.then_s, sc->pend, true, sc->where);
  ir_stmt *e = s->u.ifs.else_s ? walk(m, s->u.ifs.else_s, &pe, true, sc->where) : NULL;
  if (sc->c->st) return NULL;
  set_union(sc->pend, &pe);
  return ir_stmt_with_child(m, ir_stmt_with_child(m, s, 0, t), 1, e);
}

/* The per-kind step; the caller has found shared accesses x below s. */
static ir_stmt *sync_kind(ir_mutator *m, ir_stmt *s, const accset *x) {
  sync_ctx *sc = m->ctx;
  cctx *c = sc->c;
  switch (s->kind) {
  case IR_SEQ: return walk_children(m, s, sc->pend, sc->converged, sc->where, true);
  case IR_FOR: return sync_for(m, s, x);
  case IR_IF: return sync_if(m, s, x);
  case IR_LET: {
    int nv = c->nvars;
    cu_push_var(c, s->u.let.var, cu_expr_mask(c, s->u.let.value, NULL), TAG_NONE, 1);
    ir_stmt *r = walk_children(m, s, sc->pend, sc->converged, sc->where, false);
    c->nvars = nv;
    return r;
  }
  case IR_ALLOCATE: return walk_children(m, s, sc->pend, sc->converged, sc->where, false);
  default: return sync_atomic(m, s, x);
  }
}

/* The pre_stmt hook: every statement is handled here (never NULL unless the
 * pass failed). A child of a converged SEQ that conflicts as a whole gets
 * its barrier in front of it (hoisted) rather than deep inside its loops. */
static ir_stmt *sync_pre(ir_mutator *m, ir_stmt *s) {
  sync_ctx *sc = m->ctx;
  if (sync_failed(m)) return NULL;
  accset x;
  cu_accesses(s, &x);
  bool front = sc->in_seq && sc->converged && cu_conflicts(sc->pend, &x);
  if (!x.nr && !x.nw && !x.overflow) return s; /* nothing shared below */
  if (front) memset(sc->pend, 0, sizeof *sc->pend);
  bool in_seq = sc->in_seq;
  sc->in_seq = false;
  ir_stmt *r = sync_kind(m, s, &x);
  sc->in_seq = in_seq;
  if (front && !sc->c->st && !m->failed) r = with_barrier(sc->c, r);
  if (sync_failed(m)) return NULL;
  return r;
}

ir_stmt *cu_sync_stmt(cctx *c, ir_stmt *s, accset *pend, bool converged, const char *where) {
  if (c->st || !s) return s;
  static const ir_mutator_hooks hooks = {.pre_stmt = sync_pre};
  sync_ctx sc = {c, pend, converged, false, where};
  bool failed = false;
  ir_stmt *r = ir_rewrite_stmt(c->a, &hooks, &sc, s, &failed);
  if (failed && !c->st) failp(c, TS_ENOMEM, "cuda: out of memory");
  return c->st ? NULL : r;
}
