/* shift.c — ShiftToUnsigned: the i8 x i8 -> i32 reduction block rewritten
 * for u8 x i8 dot products (vpdpbusd), with the compensation hoisted out of
 * the reduction (what TVM's QNN legalization does for x86 at the graph
 * level, here as a traced schedule primitive so that a record replays it).
 *
 *   C[i, j] = 0;  C[i, j] += i32(A[i, k]) * i32(B[k, j])
 * becomes
 *   A_u8[x] = u8(i32(A[x]) + 128)                      (every element of A)
 *   B_sum[j] = 0; B_sum[j] += i32(B[k, j])              (over C's k domain)
 *   C[i, j] = -128 * B_sum[j];  C[i, j] += i32(A_u8[i, k]) * i32(B[k, j])
 *
 * exact in wrapping i32 arithmetic: Σ (a + 128) b − 128 Σ b = Σ a b. The
 * compensation is computed once per output column (O(K N), not O(M N K)),
 * and the main block's form is the u8 x i8 one the VNNI intrinsics describe.
 * docs/TENSORIZE.md ("i8 x i8"). */
#include <stdio.h>
#include <string.h>

#include "sch_int.h"

#define P "shift_to_unsigned"

static const ir_expr *strip_i32(const ir_expr *e, int code) {
  if (!e || e->kind != IR_CAST || e->dtype.code != IR_I32 || e->dtype.lanes != 1) return NULL;
  const ir_expr *l = e->u.cast.value;
  return l->kind == IR_LOAD && l->dtype.code == code && l->dtype.lanes == 1 ? l : NULL;
}

static int iter_of(const ir_block *b, const ir_expr *e) {
  if (e->kind != IR_VAR) return -1;
  for (int i = 0; i < b->niter; i++)
    if (b->iters[i].var == e->u.var) return i;
  return -1;
}

/* Loops l[0..n) with extents ext around body (outermost first). */
static ir_stmt *nest(ts_arena *a, int n, ir_var **l, ir_expr **ext, ir_stmt *body) {
  for (int d = n - 1; d >= 0 && body; d--) body = ir_for(a, l[d], ir_int(a, l[d]->dtype, 0), ext[d], IR_FOR_SERIAL, body);
  return body;
}

static ir_expr *as_dt(ts_arena *a, ir_dtype t, ir_expr *e) {
  return ir_dtype_eq(e->dtype, t) ? e : ir_cast(a, t, e);
}

static ir_region point_region(ts_arena *a, ir_buffer *buf, int n, ir_expr **idx) {
  ir_range *r = TS_ANEWN(a, ir_range, n ? n : 1);
  for (int d = 0; r && d < n; d++) r[d] = (ir_range){idx[d], ir_int(a, idx[d]->dtype, 1)};
  return (ir_region){buf, n, r};
}

ts_status sch_shift_to_unsigned(sch_state *s, sch_block b, sch_block *out, ts_diag *d) {
  ts_arena *a = &s->arena;
  sch_path p;
  ts_status st = sch_find_block(s, b.name, &p, P, d);
  if (st) return st;
  const ir_stmt *rz = p.node[p.n - 1];
  const ir_block *blk = rz->u.realize.block;
  if (sch_path_scope(&p, p.n - 1) != 0)
    return ts_diag_set(d, TS_ESCHEDULE, P ": block '%s' is not a child of the root block", blk->name);
  /* C[idx] = C[idx] + i32(A[..]) * i32(B[..]), init C[idx] = 0 */
  const ir_stmt *body = blk->body, *init = blk->init;
  const ir_expr *sum = body && body->kind == IR_STORE ? body->u.store.value : NULL;
  int64_t zero = -1;
  if (!init || init->kind != IR_STORE || !ir_as_int(init->u.store.value, &zero) || zero != 0 || !sum ||
      sum->kind != IR_ADD || body->u.store.buf->dtype.code != IR_I32 || init->u.store.buf != body->u.store.buf)
    return ts_diag_set(d, TS_ESCHEDULE,
                       P ": block '%s' is not C = 0; C += i32(A) * i32(B) with an i32 C (init and update)",
                       blk->name);
  const ir_expr *mul = sum->u.bin.b;
  if (mul->kind != IR_MUL) mul = sum->u.bin.a;
  const ir_expr *la = mul->kind == IR_MUL ? strip_i32(mul->u.bin.a, IR_I8) : NULL;
  const ir_expr *lb = mul->kind == IR_MUL ? strip_i32(mul->u.bin.b, IR_I8) : NULL;
  if (!la || !lb)
    return ts_diag_set(d, TS_ESCHEDULE, P ": block '%s' does not multiply two i8 loads cast to i32", blk->name);
  /* A: the operand not indexed by the last spatial iter (the rows); B the other */
  int last_s = -1;
  for (int i = 0; i < blk->niter; i++)
    if (blk->iters[i].type == IR_ITER_S) last_s = i;
  bool a_has = false, b_has = false;
  for (int k = 0; k < la->u.load.nidx; k++) a_has = a_has || iter_of(blk, la->u.load.idx[k]) == last_s;
  for (int k = 0; k < lb->u.load.nidx; k++) b_has = b_has || iter_of(blk, lb->u.load.idx[k]) == last_s;
  if (a_has && !b_has) {
    const ir_expr *x = la;
    la = lb;
    lb = x;
  } else if (a_has == b_has) {
    return ts_diag_set(d, TS_ESCHEDULE, P ": block '%s': cannot tell the activation from the weight", blk->name);
  }
  ir_buffer *A = la->u.load.buf, *B = lb->u.load.buf;
  for (int k = 0; k < s->func->nparams; k++)
    if (s->func->params[k] == A && k >= s->func->ninputs)
      return ts_diag_set(d, TS_ESCHEDULE, P ": %s is an output", A->name);
  /* B's indices: plain iter vars; every reduction iter among them */
  int nb = lb->u.load.nidx, bit[8], nr = 0, ns = 0;
  if (nb > 8) return ts_diag_set(d, TS_ESCHEDULE, P ": %s has more than 8 dims", B->name);
  for (int k = 0; k < nb; k++) {
    bit[k] = iter_of(blk, lb->u.load.idx[k]);
    if (bit[k] < 0)
      return ts_diag_set(d, TS_ESCHEDULE, P ": index %d of %s in '%s' is not an iter var", k, B->name, blk->name);
    if (blk->iters[bit[k]].type == IR_ITER_R) nr++;
    else if (blk->iters[bit[k]].type == IR_ITER_S) ns++;
    else return ts_diag_set(d, TS_ESCHEDULE, P ": %s is indexed by an opaque iter var", B->name);
  }
  int nred = 0;
  for (int i = 0; i < blk->niter; i++) nred += blk->iters[i].type == IR_ITER_R;
  if (nr != nred)
    return ts_diag_set(d, TS_ESCHEDULE, P ": %s is not indexed by every reduction iter var of '%s'", B->name,
                       blk->name);
  for (int k = 0; k < A->ndim; k++) {
    int64_t e;
    if (!ir_as_int(A->shape[k], &e)) return ts_diag_set(d, TS_ESCHEDULE, P ": %s has a symbolic shape", A->name);
  }
  ir_dtype it = blk->iters[0].var->dtype;

  /* ---- A_u8[x] = u8(i32(A[x]) + 128) over A's shape ---- */
  ir_buffer *Au = ir_buffer_new(a, sch_fresh_buffer_name(s, ts_arena_printf(a, "%s_u8", A->name)), ir_dt(IR_U8),
                                A->ndim, A->shape, NULL);
  ir_block *ab = ir_block_new(a, sch_fresh_block_name(s, ts_arena_printf(a, "%s_u8", A->name)));
  int na = A->ndim;
  ir_var **al = TS_ANEWN(a, ir_var *, na), **av = TS_ANEWN(a, ir_var *, na);
  ir_expr **aidx = TS_ANEWN(a, ir_expr *, na), **alv = TS_ANEWN(a, ir_expr *, na);
  ab->iters = TS_ANEWN(a, ir_iter_var, na);
  if (!Au || !ab || !al || !av || !aidx || !alv || !ab->iters) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  for (int k = 0; k < na; k++) {
    al[k] = ir_var_new(a, ts_arena_printf(a, "ax%d", k), it);
    av[k] = ir_var_new(a, ts_arena_printf(a, "v%d", k), it);
    aidx[k] = ir_var_ref(a, av[k]);
    alv[k] = ir_var_ref(a, al[k]);
    ab->iters[k] = (ir_iter_var){av[k], {ir_int(a, it, 0), as_dt(a, it, A->shape[k])}, IR_ITER_S};
  }
  ab->niter = na;
  ab->body = ir_store(a, Au, na, aidx,
                      ir_cast(a, ir_dt(IR_U8), ir_binop(a, IR_ADD, ir_cast(a, ir_dt(IR_I32), ir_load(a, A, na, aidx)),
                                                       ir_i32(a, 128))));
  ab->nreads = ab->nwrites = 1;
  ab->reads = TS_ANEW(a, ir_region);
  ab->writes = TS_ANEW(a, ir_region);
  if (!ab->body || !ab->reads || !ab->writes) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  ab->reads[0] = point_region(a, A, na, aidx);
  ab->writes[0] = point_region(a, Au, na, aidx);
  ir_expr **aext = TS_ANEWN(a, ir_expr *, na);
  for (int k = 0; aext && k < na; k++) aext[k] = as_dt(a, it, A->shape[k]);
  ir_stmt *anest = aext ? nest(a, na, al, aext, ir_realize(a, ab, alv, ir_bool(a, true))) : NULL;

  /* ---- B_sum[s..] = 0; B_sum[s..] += i32(B[..]) over C's domains ---- */
  ir_expr **sshape = TS_ANEWN(a, ir_expr *, ns ? ns : 1);
  ir_block *sb = ir_block_new(a, sch_fresh_block_name(s, ts_arena_printf(a, "%s_sum", B->name)));
  ir_var **sl = TS_ANEWN(a, ir_var *, nb);
  ir_expr **bidx = TS_ANEWN(a, ir_expr *, nb), **sidx = TS_ANEWN(a, ir_expr *, ns ? ns : 1),
          **slv = TS_ANEWN(a, ir_expr *, nb), **sext = TS_ANEWN(a, ir_expr *, nb),
          **cidx = TS_ANEWN(a, ir_expr *, ns ? ns : 1);
  if (!sshape || !sb || !sl || !bidx || !sidx || !slv || !sext || !cidx || !anest)
    return ts_diag_set(d, TS_ENOMEM, "out of memory");
  sb->iters = TS_ANEWN(a, ir_iter_var, nb);
  if (!sb->iters) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  for (int k = 0, q = 0; k < nb; k++) {
    const ir_iter_var *ci = &blk->iters[bit[k]];
    ir_var *w = ir_var_new(a, ts_arena_printf(a, "w%d", k), it);
    sl[k] = ir_var_new(a, ts_arena_printf(a, "ax%d", k), it);
    slv[k] = ir_var_ref(a, sl[k]);
    bidx[k] = ir_var_ref(a, w);
    sext[k] = ci->dom.extent;
    int64_t mn;
    if (!ir_as_int(ci->dom.min, &mn) || mn != 0)
      return ts_diag_set(d, TS_ESCHEDULE, P ": iter var %s of '%s' does not start at 0", ci->var->name, blk->name);
    sb->iters[k] = (ir_iter_var){w, ci->dom, ci->type};
    if (ci->type == IR_ITER_S) {
      sshape[q] = ci->dom.extent;
      cidx[q] = lb->u.load.idx[k];
      sidx[q++] = bidx[k];
    }
  }
  sb->niter = nb;
  ir_buffer *Bs = ir_buffer_new(a, sch_fresh_buffer_name(s, ts_arena_printf(a, "%s_sum", B->name)), ir_dt(IR_I32),
                                ns, sshape, NULL);
  if (!Bs) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  sb->init = ir_store(a, Bs, ns, sidx, ir_i32(a, 0));
  sb->body = ir_store(a, Bs, ns, sidx,
                      ir_binop(a, IR_ADD, ir_load(a, Bs, ns, sidx), ir_cast(a, ir_dt(IR_I32), ir_load(a, B, nb, bidx))));
  sb->nreads = 2;
  sb->nwrites = 1;
  sb->reads = TS_ANEWN(a, ir_region, 2);
  sb->writes = TS_ANEW(a, ir_region);
  if (!sb->init || !sb->body || !sb->reads || !sb->writes) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  sb->reads[0] = point_region(a, Bs, ns, sidx);
  sb->reads[1] = point_region(a, B, nb, bidx);
  sb->writes[0] = point_region(a, Bs, ns, sidx);
  ir_stmt *snest = nest(a, nb, sl, sext, ir_realize(a, sb, slv, ir_bool(a, true)));

  /* ---- C: reads A_u8, init -128 * B_sum[s..] ---- */
  ir_block *nc = ir_block_clone(a, blk);
  ir_stmt *nrz = ir_stmt_clone(a, rz);
  if (!snest || !nc || !nrz) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  /* the update, rebuilt with A_u8's load (its own dtype) in A's place */
  ir_expr *ca = ir_cast(a, ir_dt(IR_I32), ir_load(a, Au, la->u.load.nidx, la->u.load.idx));
  bool a_left = mul->u.bin.a->u.cast.value == la;
  ir_expr *nmul = ir_binop(a, IR_MUL, a_left ? ca : mul->u.bin.a, a_left ? mul->u.bin.b : ca);
  bool m_right = sum->u.bin.b == mul;
  nc->body = ir_store(a, body->u.store.buf, body->u.store.nidx, body->u.store.idx,
                      ir_binop(a, IR_ADD, m_right ? sum->u.bin.a : nmul, m_right ? nmul : sum->u.bin.b));
  nc->init = ir_store(a, init->u.store.buf, init->u.store.nidx, init->u.store.idx,
                      ir_binop(a, IR_MUL, ir_i32(a, -128), ir_load(a, Bs, ns, cidx)));
  nc->nreads = blk->nreads + 1;
  nc->reads = TS_ANEWN(a, ir_region, nc->nreads);
  if (!nc->body || !nc->init || !nc->reads) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  for (int i = 0; i < blk->nreads; i++) {
    nc->reads[i] = blk->reads[i];
    if (nc->reads[i].buf == A) nc->reads[i].buf = Au;
  }
  nc->reads[blk->nreads] = point_region(a, Bs, ns, cidx);
  nrz->u.realize.block = nc;

  /* ---- install: C updated, the two stages before C's root-level nest,
   * both buffers allocated by the root block ---- */
  ir_stmt *saved = s->func->body;
  st = sch_replace(s, &p, p.n - 1, nrz, d);
  const char *cname = blk->name;
  for (int pass = 0; pass < 2 && !st; pass++) {
    st = sch_find_block(s, cname, &p, P, d);
    if (st) break;
    int k = p.node[1]->kind == IR_SEQ ? 2 : 1;
    st = sch_insert_before(s, &p, k, pass == 0 ? anest : snest, p.node[k], d);
  }
  if (!st) {
    st = sch_find_block(s, cname, &p, P, d);
    const ir_stmt *root = p.node[0];
    ir_block *rb = st ? NULL : ir_block_with_alloc(a, root->u.realize.block, Au);
    rb = rb ? ir_block_with_alloc(a, rb, Bs) : NULL;
    ir_stmt *nroot = ir_stmt_clone(a, root);
    if (!st && (!rb || !nroot)) {
      st = ts_diag_set(d, TS_ENOMEM, "out of memory");
    } else if (!st) {
      nroot->u.realize.block = rb;
      st = sch_replace(s, &p, 0, nroot, d);
    }
  }
  if (st) {
    s->func->body = saved; /* nodes are immutable: the old tree is intact */
    return st;
  }
  if (out) {
    out[0].name = ab->name;
    out[1].name = sb->name;
  }
  return sch_finish(s, TS_OK, d);
}
