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

/* The inside of a divergent statement must not need a barrier: walk its
 * children as not converged (a conflict there is refused). */
static void check_inside(cctx *c, ir_stmt *s, const char *where) {
  accset p;
  memset(&p, 0, sizeof p);
  switch (s->kind) {
  case IR_FOR:
    (void)cu_sync_stmt(c, s->u.loop.body, &p, false, where);
    (void)cu_sync_stmt(c, s->u.loop.body, &p, false, where); /* the next iteration */
    return;
  case IR_IF:
    (void)cu_sync_stmt(c, s->u.ifs.then_s, &p, false, where);
    memset(&p, 0, sizeof p);
    if (s->u.ifs.else_s) (void)cu_sync_stmt(c, s->u.ifs.else_s, &p, false, where);
    return;
  case IR_SEQ:
    for (int i = 0; i < s->u.seq.n; i++) (void)cu_sync_stmt(c, s->u.seq.stmts[i], &p, false, where);
    return;
  case IR_LET: (void)cu_sync_stmt(c, s->u.let.body, &p, false, where); return;
  case IR_ALLOCATE: (void)cu_sync_stmt(c, s->u.alloc.body, &p, false, where); return;
  default: return;
  }
}

/* An atomic statement (no barrier may go inside): a barrier before it if it
 * conflicts with pend; its own inside must not need one. */
static ir_stmt *sync_atomic(cctx *c, ir_stmt *s, accset *pend, bool converged, const char *where) {
  accset x;
  cu_accesses(s, &x);
  ir_stmt *r = s;
  check_inside(c, s, s->kind == IR_FOR ? s->u.loop.var->name : where);
  if (c->st) return NULL;
  if (cu_conflicts(pend, &x)) {
    if (!converged) {
      FAIL(c, "cuda: a __syncthreads() is needed before %s, which runs in divergent code (%s); "
              "bind the shared-memory stages so every thread reaches the barrier",
           stmt_what(s), where);
      return NULL;
    }
    r = with_barrier(c, s);
    memset(pend, 0, sizeof *pend);
  }
  set_union(pend, &x);
  return r;
}

ir_stmt *cu_sync_stmt(cctx *c, ir_stmt *s, accset *pend, bool converged, const char *where) {
  if (c->st || !s) return s;
  accset x;
  cu_accesses(s, &x);
  if (!x.nr && !x.nw && !x.overflow) return s; /* nothing shared below */
  switch (s->kind) {
  case IR_SEQ: {
    ir_stmt **kids = TS_ANEWN(c->a, ir_stmt *, s->u.seq.n);
    if (!kids) return failp(c, TS_ENOMEM, "cuda: out of memory");
    bool changed = false;
    for (int i = 0; i < s->u.seq.n; i++) {
      /* hoist: a child that conflicts as a whole gets its barrier here, in
       * front of it, rather than deep inside its loops */
      accset kx;
      cu_accesses(s->u.seq.stmts[i], &kx);
      bool front = converged && cu_conflicts(pend, &kx);
      if (front) memset(pend, 0, sizeof *pend);
      kids[i] = cu_sync_stmt(c, s->u.seq.stmts[i], pend, converged, where);
      if (front && !c->st) kids[i] = with_barrier(c, kids[i]);
      if (c->st) return NULL;
      changed |= kids[i] != s->u.seq.stmts[i];
    }
    return changed ? ir_seq(c->a, s->u.seq.n, kids) : s;
  }
  case IR_FOR: {
    int tag = s->u.loop.kind == IR_FOR_THREAD_BINDING ? cu_tag_of(s->u.loop.thread) : TAG_NONE;
    bool bounds_vary = (cu_expr_mask(c, s->u.loop.min, NULL) | cu_expr_mask(c, s->u.loop.extent, NULL)) &
                       THREAD_BITS;
    bool conv = converged && !bounds_vary;
    if (tag >= TAG_TX && tag <= TAG_TZ) {
      int64_t ext = 0;
      ir_as_int(s->u.loop.extent, &ext);
      if (ext < c->launch[tag]) conv = false; /* guarded: divergent */
    }
    if (!conv) return sync_atomic(c, s, pend, converged, where);
    int nv = c->nvars;
    cu_push_var(c, s->u.loop.var, tag >= 0 && tag < TAG_VTHREAD ? 1u << tag : 0, tag, 1);
    /* walk twice: the second pass starts with what the body leaves pending,
     * so a conflict carried to the next iteration gets its barrier */
    accset p0 = *pend;
    accset p2 = p0;
    int64_t once = 0;
    bool single = ir_as_int(s->u.loop.extent, &once) && once == 1;
    if ((tag < 0 || tag == TAG_VTHREAD) && !single) { /* a real loop (blockIdx/threadIdx ones are not iterated) */
      accset p1 = *pend;
      (void)cu_sync_stmt(c, s->u.loop.body, &p1, conv, s->u.loop.var->name);
      set_union(&p2, &p1);
    }
    ir_stmt *body = cu_sync_stmt(c, s->u.loop.body, &p2, conv, s->u.loop.var->name);
    c->nvars = nv;
    if (c->st) return NULL;
    *pend = p2;
    set_union(pend, &p0); /* the loop may run zero times */
    if (body == s->u.loop.body) return s;
    ir_stmt *r = ir_stmt_clone(c->a, s);
    if (!r) return failp(c, TS_ENOMEM, "cuda: out of memory");
    r->u.loop.body = body;
    return r;
  }
  case IR_IF: {
    bool load = false;
    unsigned m = cu_expr_mask(c, s->u.ifs.cond, &load);
    if (!converged || (m & THREAD_BITS) || load) return sync_atomic(c, s, pend, converged, where);
    accset pe = *pend;
    ir_stmt *t = cu_sync_stmt(c, s->u.ifs.then_s, pend, true, where);
    ir_stmt *e = s->u.ifs.else_s ? cu_sync_stmt(c, s->u.ifs.else_s, &pe, true, where) : NULL;
    if (c->st) return NULL;
    set_union(pend, &pe);
    if (t == s->u.ifs.then_s && e == s->u.ifs.else_s) return s;
    ir_stmt *r = ir_stmt_clone(c->a, s);
    if (!r) return failp(c, TS_ENOMEM, "cuda: out of memory");
    r->u.ifs.then_s = t;
    r->u.ifs.else_s = e;
    return r;
  }
  case IR_LET: {
    int nv = c->nvars;
    cu_push_var(c, s->u.let.var, cu_expr_mask(c, s->u.let.value, NULL), TAG_NONE, 1);
    ir_stmt *b = cu_sync_stmt(c, s->u.let.body, pend, converged, where);
    c->nvars = nv;
    if (c->st) return NULL;
    if (b == s->u.let.body) return s;
    ir_stmt *r = ir_stmt_clone(c->a, s);
    if (!r) return failp(c, TS_ENOMEM, "cuda: out of memory");
    r->u.let.body = b;
    return r;
  }
  case IR_ALLOCATE: {
    ir_stmt *b = cu_sync_stmt(c, s->u.alloc.body, pend, converged, where);
    if (c->st) return NULL;
    if (b == s->u.alloc.body) return s;
    ir_stmt *r = ir_stmt_clone(c->a, s);
    if (!r) return failp(c, TS_ENOMEM, "cuda: out of memory");
    r->u.alloc.body = b;
    return r;
  }
  default:
    return sync_atomic(c, s, pend, converged, where);
  }
}

