/* library.c — library candidates (library.h): recognise a task that is an f32
 * matrix product and write the vendor library's call as its kernel.
 *
 * The match is structural and strict: one reduction block under the root,
 * C[b.., i, j] = C[b.., i, j] + A[b.., i, k] * B[b.., k, j] (or B[.., j, k])
 * with C initialised to 0, every index a bare iteration variable, all three
 * buffers whole tensors in their compact row-major layout: f32, or u8/i8 A
 * and i8 B cast to i32 into an i32 C (oneDNN's integer gemm, zero points 0
 * and a zero offset vector the kernel allocates). A B without the
 * batch dimensions (a weight) folds the batch into A's rows: one call of
 * batch*M rows. What the match misses (a fused epilogue, a cast) simply has
 * no library candidate; a candidate is still verified against the
 * interpreter like every kernel, so a match that was wrong would be an error
 * record, never a kernel. */
#include "tuner/library.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "codegen/llvm.h"
#include "ir/print.h"
#include "ir/struct.h"
#include "ir/workloads/workloads.h"
#include "runtime/runtime.h"
#include "tuner/build.h"
#include "tuner/library_conv.h"

/* oneDNN's gemm on a weight it packs once (runtime/dnnl_packed.c) */
#define PACKED_FN "tsrt_dnnl_sgemm_packed"
/* cuBLAS's sgemm on a CUDA target: a step of the CUDA artifact's launch
 * sequence (codegen/cuda_emit.c), called by runtime/cuda_rt.c */
#define CUBLAS_FN "cublasSgemm"

typedef struct mm_match {
  const ir_func *f;
  int slot;      /* the root body's statement that computes the product (tun_library_root_slot) */
  int nrest;     /* other blocks of f (an epilogue, producers): kept, default schedule */
  ir_buffer *A, *B, *C;
  int nbatch;    /* leading batch dims of C */
  bool fold;     /* B has no batch dims: the batch folds into A's rows */
  bool trans_b;  /* B is [n, k] */
  bool int8;     /* u8 or i8 A, i8 B, i32 C (i32(A) * i32(B)): oneDNN's integer gemm */
  ir_expr *M, *N, *K, *batch; /* batch: the product of the batch extents (NULL: none) */
} mm_match;

/* A CUDA target whose runtime can open cuBLAS here (the tuner's process
 * opens libcublas, never the driver). */
static bool cuda_with_cublas(const cg_target *t) { return t && t->kind == CG_TARGET_CUDA && tsrt_cublas_available(); }

bool tun_library_target_ok(const cg_target *t) {
  return t && ((t->kind == CG_TARGET_LLVM && cg_target_is_host(t)) || cuda_with_cublas(t));
}

/* ---- matching ------------------------------------------------------------------ */
typedef struct blocks_seen {
  const ir_stmt *root;
  const ir_block *blk; /* the reduction block (the last one with an init) */
  int n, nreduce;
} blocks_seen;

static bool see_block(void *ctx, const ir_stmt *s) {
  blocks_seen *b = ctx;
  if (s->kind == IR_BLOCK_REALIZE && s != b->root) {
    b->n++;
    if (s->u.realize.block->init) {
      b->blk = s->u.realize.block;
      b->nreduce++;
    }
  }
  return true;
}

typedef struct holds_block {
  const ir_block *blk;
  bool found;
} holds_block;

static bool see_holds(void *ctx, const ir_stmt *s) {
  holds_block *h = ctx;
  if (s->kind == IR_BLOCK_REALIZE && s->u.realize.block == h->blk) h->found = true;
  return !h->found;
}

static bool count_blocks(void *ctx, const ir_stmt *s) {
  if (s->kind == IR_BLOCK_REALIZE) ++*(int *)ctx;
  return true;
}

int tun_library_root_slot(const ir_block *root, const ir_block *blk) {
  const ir_stmt *b = root->body;
  int n = b->kind == IR_SEQ ? b->u.seq.n : 1;
  for (int i = 0; i < n; i++) {
    const ir_stmt *s = b->kind == IR_SEQ ? b->u.seq.stmts[i] : b;
    holds_block h = {blk, false};
    ir_visitor v = {NULL, see_holds, &h};
    ir_visit_stmt(&v, s);
    if (!h.found) continue;
    int nblocks = 0;
    ir_visitor v2 = {NULL, count_blocks, &nblocks};
    ir_visit_stmt(&v2, s);
    return nblocks == 1 ? i : -1;
  }
  return -1;
}

static bool is_var(const ir_expr *e, const ir_var *v) { return e && e->kind == IR_VAR && e->u.var == v; }

static bool is_param(const ir_func *f, const ir_buffer *b, int first, int last) {
  for (int i = first; i < last; i++)
    if (f->params[i] == b) return true;
  return false;
}

/* A whole tensor of f: a parameter in the range, or an allocation of the root block. */
static bool is_tensor(const ir_func *f, const ir_buffer *b, int first, int last) {
  if (is_param(f, b, first, last)) return true;
  const ir_block *root = f->body->u.realize.block;
  for (int i = 0; i < root->nalloc; i++)
    if (root->allocs[i] == b) return !root->allocs[i]->scope || !strcmp(root->allocs[i]->scope, "global");
  return false;
}

static bool compact_f32(const ir_buffer *b) {
  return b->dtype.code == IR_F32 && b->dtype.lanes == 1 && !b->strides && !b->elem_offset && b->ndim >= 2;
}

/* A compact tensor of dtype code c. */
static bool compact_of(const ir_buffer *b, int c) {
  return b->dtype.code == c && b->dtype.lanes == 1 && !b->strides && !b->elem_offset && b->ndim >= 2;
}

/* The load under an i32 cast (int8 products), else e itself. */
static const ir_expr *uncast(const ir_expr *e, bool int8) {
  if (!int8) return e;
  return e->kind == IR_CAST && e->dtype.code == IR_I32 && e->dtype.lanes == 1 ? e->u.cast.value : NULL;
}

static bool same_expr(const ir_expr *a, const ir_expr *b) {
  int64_t x, y;
  if (ir_as_int(a, &x) && ir_as_int(b, &y)) return x == y;
  return ir_struct_equal_expr(a, b);
}

/* The reduction var of the block (exactly one) or NULL. */
static const ir_var *reduce_var(const ir_block *blk) {
  const ir_var *r = NULL;
  for (int i = 0; i < blk->niter; i++)
    if (blk->iters[i].type == IR_ITER_R) {
      if (r) return NULL;
      r = blk->iters[i].var;
    }
  return r;
}

/* Indices idx of a load: the batch vars of C's store (cidx[0..nb)), then x, y. */
static bool idx_is(const ir_expr *ld, int nb, ir_expr *const *cidx, const ir_var *x, const ir_var *y) {
  for (int i = 0; i < nb; i++)
    if (!is_var(ld->u.load.idx[i], cidx[i]->u.var)) return false;
  return is_var(ld->u.load.idx[nb], x) && is_var(ld->u.load.idx[nb + 1], y);
}

/* A and B loads of the product and their index patterns. */
static bool match_operands(mm_match *m, const ir_expr *la, const ir_expr *lb, const ir_stmt *st, const ir_var *r) {
  int nd = m->C->ndim, nb = nd - 2;
  ir_expr *const *ci = st->u.store.idx;
  const ir_var *vi = ci[nb]->u.var, *vj = ci[nb + 1]->u.var;
  la = uncast(la, m->int8);
  lb = uncast(lb, m->int8);
  if (!la || !lb || la->kind != IR_LOAD || lb->kind != IR_LOAD) return false;
  m->A = la->u.load.buf;
  m->B = lb->u.load.buf;
  if (!is_tensor(m->f, m->A, 0, m->f->ninputs) || !is_tensor(m->f, m->B, 0, m->f->ninputs) || m->A == m->B)
    return false;
  if (m->int8 ? !(compact_of(m->A, IR_U8) || compact_of(m->A, IR_I8)) || !compact_of(m->B, IR_I8)
              : !compact_f32(m->A) || !compact_f32(m->B))
    return false;
  if (m->A->ndim != nd || la->u.load.nidx != nd || !idx_is(la, nb, ci, vi, r)) return false;
  int bnb = m->B->ndim - 2;
  if (lb->u.load.nidx != m->B->ndim || (bnb != nb && bnb != 0)) return false;
  m->fold = bnb == 0 && nb > 0;
  if (idx_is(lb, bnb, ci, r, vj))
    m->trans_b = false;
  else if (idx_is(lb, bnb, ci, vj, r))
    m->trans_b = true;
  else
    return false;
  return true;
}

/* Shapes: A [.., M, K], B [.., K, N] or [.., N, K], C [.., M, N], batch dims equal. */
static bool match_shapes(mm_match *m, ts_arena *a) {
  int nd = m->C->ndim, nb = nd - 2;
  ir_expr **cs = m->C->shape, **as = m->A->shape, **bs = m->B->shape;
  int bb = m->B->ndim - 2;
  m->M = cs[nb];
  m->N = cs[nb + 1];
  m->K = as[nb + 1];
  if (!same_expr(as[nb], m->M) || !same_expr(bs[bb + (m->trans_b ? 1 : 0)], m->K) ||
      !same_expr(bs[bb + (m->trans_b ? 0 : 1)], m->N))
    return false;
  m->batch = NULL;
  for (int i = 0; i < nb; i++) {
    if (!same_expr(as[i], cs[i]) || (!m->fold && !same_expr(bs[i], cs[i]))) return false;
    ir_expr *e = cs[i];
    if (e->dtype.code != IR_I64) e = ir_cast(a, ir_dt(IR_I64), e);
    m->batch = m->batch ? ir_binop(a, IR_MUL, m->batch, e) : e;
    if (!m->batch) return false;
  }
  return true;
}

/* Matches f (allocations in a: the batch product). */
static bool match_matmul(const ir_func *f, ts_arena *a, mm_match *m) {
  memset(m, 0, sizeof *m);
  m->f = f;
  if (!f->body || f->body->kind != IR_BLOCK_REALIZE) return false;
  blocks_seen bs = {f->body, NULL, 0, 0};
  ir_visitor v = {NULL, see_block, &bs};
  ir_visit_stmt(&v, f->body);
  const ir_block *blk = bs.blk;
  if (bs.nreduce != 1 || !blk->body) return false;
  m->nrest = bs.n - 1;
  if ((m->slot = tun_library_root_slot(f->body->u.realize.block, blk)) < 0) return false;
  const ir_var *r = reduce_var(blk);
  const ir_stmt *st = blk->body, *in = blk->init;
  if (!r || st->kind != IR_STORE || in->kind != IR_STORE || st->u.store.predicate || in->u.store.predicate)
    return false;
  m->C = st->u.store.buf;
  int nd = m->C->ndim;
  m->int8 = compact_of(m->C, IR_I32);
  if (!is_tensor(f, m->C, f->ninputs, f->nparams) || !(compact_f32(m->C) || m->int8) || st->u.store.nidx != nd ||
      blk->niter != nd + 1 || in->u.store.buf != m->C || in->u.store.nidx != nd)
    return false;
  for (int i = 0; i < nd; i++) {
    const ir_expr *x = st->u.store.idx[i];
    if (x->kind != IR_VAR || x->u.var == r || !is_var(in->u.store.idx[i], x->u.var)) return false;
    for (int j = 0; j < i; j++)
      if (st->u.store.idx[j]->u.var == x->u.var) return false;
  }
  const ir_expr *z = in->u.store.value;
  if (m->int8 ? z->kind != IR_INT_IMM || z->u.ival != 0 : z->kind != IR_FLOAT_IMM || z->u.fval != 0) return false;
  const ir_expr *val = st->u.store.value;
  if (val->kind != IR_ADD) return false;
  const ir_expr *acc = val->u.bin.a, *prod = val->u.bin.b;
  if (acc->kind != IR_LOAD) {
    const ir_expr *t = acc;
    acc = prod;
    prod = t;
  }
  if (acc->kind != IR_LOAD || acc->u.load.buf != m->C || acc->u.load.nidx != nd || prod->kind != IR_MUL) return false;
  for (int i = 0; i < nd; i++)
    if (!is_var(acc->u.load.idx[i], st->u.store.idx[i]->u.var)) return false;
  const ir_expr *x = prod->u.bin.a, *y = prod->u.bin.b;
  if (!match_operands(m, x, y, st, r) && !match_operands(m, y, x, st, r)) return false;
  return match_shapes(m, a);
}

/* ---- parameters ------------------------------------------------------------------- */
static json_t *extent_json(const ir_expr *e) {
  int64_t v;
  if (ir_as_int(e, &v)) return json_integer(v);
  char *s = ir_expr_to_string(e);
  json_t *j = json_string(s ? s : "?");
  ts_free(s);
  return j;
}

static bool fill_cand(const mm_match *m, const char *lib, const char *fn, tun_lib_cand *c) {
  json_t *o = json_object();
  if (!o) return false;
  if (!strcmp(fn, PACKED_FN)) /* the weight the call packs once: which parameter (model_build.c) */
    for (int i = 0; i < m->f->ninputs; i++)
      if (m->f->params[i] == m->B) json_object_set_new(o, "b_param", json_integer(i));
  json_object_set_new(o, "lib", json_string(lib));
  json_object_set_new(o, "call", json_string(fn));
  json_object_set_new(o, "m", extent_json(m->M));
  json_object_set_new(o, "n", extent_json(m->N));
  json_object_set_new(o, "k", extent_json(m->K));
  json_object_set_new(o, "batch", m->batch ? extent_json(m->batch) : json_integer(1));
  json_object_set_new(o, "batch_mode", json_string(!m->batch ? "none" : m->fold ? "rows" : "loop"));
  json_object_set_new(o, "trans_b", json_boolean(m->trans_b));
  json_object_set_new(o, "other_blocks", json_integer(m->nrest));
  char *js = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
  json_decref(o);
  if (!js || strlen(js) >= sizeof c->params) {
    free(js);
    return false;
  }
  c->lib = lib;
  c->fn = fn;
  snprintf(c->params, sizeof c->params, "%s", js);
  free(js);
  uint64_t h = XXH3_64bits(c->params, strlen(c->params));
  c->hash = h ? h : 1;
  return true;
}

static bool is_one(const ir_expr *e) {
  int64_t v;
  return e && ir_as_int(e, &v) && v == 1;
}

/* What cuBLAS's step takes: an f32 product alone in its task (no other
 * block: the step reads and writes the artifact's parameters, never a
 * module buffer), constant extents within cuBLAS's int. */
static bool cublas_fits(const ir_func *f, const mm_match *m) {
  if (m->int8 || m->nrest || !is_param(f, m->A, 0, f->ninputs) || !is_param(f, m->B, 0, f->ninputs) ||
      !is_param(f, m->C, f->ninputs, f->nparams))
    return false;
  const ir_expr *ext[] = {m->M, m->N, m->K, m->batch};
  for (int i = 0; i < 4; i++) {
    int64_t v = 1;
    if (ext[i] && (!ir_as_int(ext[i], &v) || v <= 0 || v > INT32_MAX)) return false;
  }
  return true;
}

int tun_library_candidates(const ir_func *f, const cg_target *t, tun_lib_cand *out, int max) {
  if (!tun_library_target_ok(t) || !f) return 0;
  ts_arena a;
  ts_arena_init(&a);
  mm_match m;
  int n = 0;
  if (t->kind == CG_TARGET_CUDA) {
    if (max > 0 && match_matmul(f, &a, &m) && cublas_fits(f, &m) && fill_cand(&m, "cublas", CUBLAS_FN, &out[0])) n = 1;
  } else if (match_matmul(f, &a, &m)) {
    bool vec = !m.batch && (is_one(m.M) || is_one(m.N));
    if (m.int8) { /* oneDNN's integer gemm; OpenBLAS has none */
      const char *fn = m.A->dtype.code == IR_U8 ? "dnnl_gemm_u8s8s32" : "dnnl_gemm_s8s8s32";
      if (n < max && cg_llvm_have_library("dnnl") && fill_cand(&m, "dnnl", fn, &out[n])) n++;
    } else if (n < max && cg_llvm_have_library("openblas") &&
        fill_cand(&m, "openblas", vec ? "cblas_sgemv" : "cblas_sgemm", &out[n]))
      n++;
    if (!m.int8 && n < max && cg_llvm_have_library("dnnl") && fill_cand(&m, "dnnl", "dnnl_sgemm", &out[n])) n++;
    /* a weight (B without batch dimensions, an input of the task) packed once */
    if (!m.int8 && m.B->ndim == 2 && is_param(f, m.B, 0, f->ninputs) && n < max && cg_llvm_have_library("dnnl") &&
        tsrt_dnnl_packed_available() && fill_cand(&m, "dnnl", PACKED_FN, &out[n]))
      n++;
  } else {
    n += tun_conv_candidates(f, out, max); /* a convolution: oneDNN's (library_conv.c) */
  }
  ts_arena_fini(&a);
  return n;
}

/* ---- the kernel ----------------------------------------------------------------------- */
typedef struct call_b {
  ts_arena *a;
  bool i64; /* dnnl: dnnl_dim_t sizes; cblas: int */
} call_b;

static ir_expr *sz(call_b *b, ir_expr *e) {
  ir_dtype t = ir_dt(b->i64 ? IR_I64 : IR_I32);
  int64_t v;
  if (ir_as_int(e, &v)) return ir_int(b->a, t, v);
  return e->dtype.code == t.code ? e : ir_cast(b->a, t, e);
}
static ir_expr *i32c(call_b *b, int64_t v) { return ir_int(b->a, ir_dt(IR_I32), v); }
static ir_expr *chr(call_b *b, char c) { return ir_int(b->a, ir_dt(IR_I8), c); }
static ir_expr *f32c(call_b *b, double v) { return ir_float(b->a, ir_dt(IR_F32), v); }
static ir_expr *mul(ts_arena *a, ir_expr *x, ir_expr *y) {
  ir_dtype t = ir_dt(IR_I64);
  if (x->dtype.code != IR_I64) x = ir_cast(a, t, x);
  if (y->dtype.code != IR_I64) y = ir_cast(a, t, y);
  return ir_binop(a, IR_MUL, x, y);
}

/* The call for one product of M x K by K x N (or N x K) at element offsets. */
static ir_expr *the_call(call_b *b, const tun_lib_cand *c, const mm_match *m, ir_expr *M, ir_expr *oa, ir_expr *ob,
                         ir_expr *oc, ir_buffer *zero) {
  ts_arena *a = b->a;
  ir_expr *A = ir_access_ptr(a, m->A, oa, IR_ACCESS_READ), *B = ir_access_ptr(a, m->B, ob, IR_ACCESS_READ);
  ir_expr *C = ir_access_ptr(a, m->C, oc, IR_ACCESS_WRITE);
  ir_expr *N = m->N, *K = m->K, *ldb = m->trans_b ? m->K : m->N;
  if (!strcmp(c->fn, "cblas_sgemm")) {
    b->i64 = false;
    ir_expr *args[] = {i32c(b, 101), i32c(b, 111), i32c(b, m->trans_b ? 112 : 111), sz(b, M), sz(b, N), sz(b, K),
                       f32c(b, 1), A, sz(b, K), B, sz(b, ldb), f32c(b, 0), C, sz(b, N)};
    return ir_call_extern(a, c->fn, ir_dt(IR_HANDLE), 14, args);
  }
  if (!strcmp(c->fn, "cblas_sgemv")) {
    b->i64 = false;
    /* C = A x (N = 1), or x^T B (M = 1): y = op(Mat) x */
    bool n1 = is_one(N);
    ir_expr *mat = n1 ? A : B, *x = n1 ? B : A;
    bool tr = !n1 && !m->trans_b;
    ir_expr *rows = n1 ? M : m->trans_b ? N : K, *cols = n1 ? K : m->trans_b ? K : N;
    ir_expr *args[] = {i32c(b, 101), i32c(b, tr ? 112 : 111), sz(b, rows), sz(b, cols), f32c(b, 1), mat,
                       sz(b, cols), x, i32c(b, 1), f32c(b, 0), C, i32c(b, 1)};
    return ir_call_extern(a, c->fn, ir_dt(IR_HANDLE), 12, args);
  }
  if (!strcmp(c->fn, CUBLAS_FN)) { /* (trans_b, m, n, k, batch, a, b, c): row-major, batch strided */
    int64_t nb = 1, rows = 1, cols = 1, depth = 1; /* constants (cublas_fits) */
    if (m->batch) ir_as_int(m->batch, &nb);
    ir_as_int(m->M, &rows);
    ir_as_int(m->N, &cols);
    ir_as_int(m->K, &depth);
    if (m->fold) rows *= nb, nb = 1;
    ir_expr *args[] = {ir_i64(a, m->trans_b), ir_i64(a, rows), ir_i64(a, cols), ir_i64(a, depth), ir_i64(a, nb),
                       A, B, C};
    return ir_call_extern(a, "tessel.cublas.sgemm", ir_dt(IR_I32), 8, args);
  }
  b->i64 = true;
  if (!strcmp(c->fn, PACKED_FN)) { /* (m, n, k, trans_b, a, b, c): row-major, B packed once */
    ir_expr *args[] = {sz(b, M), sz(b, N), sz(b, K), ir_i64(a, m->trans_b), A, B, C};
    return ir_call_extern(a, c->fn, ir_dt(IR_I32), 7, args);
  }
  if (m->int8) { /* dnnl_gemm_[us]8s8s32: zero points 0, a fixed offset C += co[0] = 0 */
    ir_expr *co = ir_access_ptr(a, zero, ir_i64(a, 0), IR_ACCESS_READ);
    ir_expr *args[] = {chr(b, 'N'), chr(b, m->trans_b ? 'T' : 'N'), chr(b, 'F'), sz(b, M), sz(b, N), sz(b, K),
                       f32c(b, 1), A, sz(b, K), ir_int(a, ir_dt(m->A->dtype.code), 0), B, sz(b, ldb),
                       ir_int(a, ir_dt(IR_I8), 0), f32c(b, 0), C, sz(b, N), co};
    return ir_call_extern(a, c->fn, ir_dt(IR_I32), 17, args);
  }
  /* dnnl_sgemm: row-major, status returned (ignored: it fails only on bad sizes) */
  ir_expr *args[] = {chr(b, 'N'), chr(b, m->trans_b ? 'T' : 'N'), sz(b, M), sz(b, N), sz(b, K), f32c(b, 1), A,
                     sz(b, K), B, sz(b, ldb), f32c(b, 0), C, sz(b, N)};
  return ir_call_extern(a, c->fn, ir_dt(IR_I32), 13, args);
}

static ir_stmt *call_body(ts_arena *a, const tun_lib_cand *c, const mm_match *m, ir_buffer *zero) {
  call_b b = {a, false};
  ir_expr *z = ir_i64(a, 0);
  ir_stmt *call;
  if (!m->batch || (!m->fold && !strcmp(c->fn, CUBLAS_FN))) /* cuBLAS's strided batch: one call */
    call = ir_evaluate(a, the_call(&b, c, m, m->M, z, z, z, zero));
  else if (m->fold)
    call = ir_evaluate(a, the_call(&b, c, m, mul(a, m->batch, m->M), z, z, z, zero));
  else {
    ir_var *bi = ir_var_new(a, "lib_b", ir_dt(IR_I64));
    if (!bi) return NULL;
    ir_expr *bv = ir_var_ref(a, bi);
    ir_expr *e = the_call(&b, c, m, m->M, mul(a, bv, mul(a, m->M, m->K)), mul(a, bv, mul(a, m->K, m->N)),
                          mul(a, bv, mul(a, m->M, m->N)), zero);
    call = ir_for(a, bi, z, m->batch, IR_FOR_SERIAL, ir_evaluate(a, e));
  }
  if (!zero || !call) return call;
  /* the integer gemm's offset vector: one i32 0 */
  ir_expr *idx0 = ir_i64(a, 0);
  ir_stmt *st[2] = {ir_store(a, zero, 1, &idx0, ir_int(a, ir_dt(IR_I32), 0)), call};
  return st[0] ? ir_seq(a, 2, st) : NULL;
}

sch_traced *tun_library_schedule(const ir_func *f, const cg_target *t, const tun_lib_cand *c, ts_diag *d) {
  if (tun_conv_is_cand(c)) return tun_conv_schedule(f, t, c, d);
  ts_arena a;
  ts_arena_init(&a);
  sch_traced *out = NULL;
  mm_match m;
  tun_lib_cand again = {0};
  ir_func *g = ir_func_copy(&a, f);
  if (!g) {
    ts_diag_set(d, TS_ENOMEM, "out of memory");
    goto done;
  }
  if (!match_matmul(g, &a, &m)) {
    ts_diag_set(d, TS_EINVAL, "library: %s is not a matrix product a library call covers", f->name ? f->name : "?");
    goto done;
  }
  /* the parameters must be the ones f gives (the record is of this task) */
  if (!fill_cand(&m, c->lib, c->fn, &again) || strcmp(again.params, c->params)) {
    ts_diag_set(d, TS_EINVAL, "library: the call %s does not fit %s (its parameters are %s)", c->params,
                f->name ? f->name : "?", again.params);
    goto done;
  }
  ir_block *root = ir_block_clone(&a, g->body->u.realize.block);
  ir_stmt *rs = root ? ir_stmt_clone(&a, g->body) : NULL;
  ir_buffer *zero = NULL;
  if (m.int8) {
    ir_expr *one = ir_i64(&a, 1);
    zero = ir_buffer_new(&a, "lib_zero", ir_dt(IR_I32), 1, &one, "global");
  }
  ir_stmt *call = call_body(&a, c, &m, zero);
  ir_stmt *body = call;
  if (root && call && root->body->kind == IR_SEQ) { /* the product's statement becomes the call */
    body = ir_stmt_clone(&a, root->body);
    ir_stmt **ss = body ? ts_arena_alloc(&a, sizeof *ss * (size_t)body->u.seq.n) : NULL;
    if (ss) {
      memcpy(ss, body->u.seq.stmts, sizeof *ss * (size_t)body->u.seq.n);
      ss[m.slot] = call;
      body->u.seq.stmts = ss;
    } else {
      body = NULL;
    }
  }
  if (!root || !rs || !body) {
    ts_diag_set(d, TS_ENOMEM, "out of memory");
    goto done;
  }
  root->body = body;
  if (zero && !(root = ir_block_with_alloc(&a, root, zero))) {
    ts_diag_set(d, TS_ENOMEM, "out of memory");
    goto done;
  }
  rs->u.realize.block = root;
  g->body = rs;
  out = sch_traced_new(g, 1, d);
  if (out && m.nrest > 0) {
    /* the other blocks (an epilogue reading the product, the producers of
     * an operand computed in the task: attention's transposes) get the
     * default schedule, best effort: a refusal leaves them plain. The
     * blocks writing the call's operands are never inlined: the call reads
     * them through pointers (access_ptr) the inlining does not see, so it
     * would drop them; what feeds them is inlined into them */
    const char *keep[3] = {m.A->name, m.B->name, m.C->name};
    tun_default_opts o = {.keep = keep, .nkeep = 3};
    ts_diag sd;
    ts_diag_clear(&sd);
    if (tun_default_schedule_opts(out, t, &o, &sd) != TS_OK) {
      sch_traced_free(out);
      out = sch_traced_new(g, 1, d);
    }
  }
done:
  ts_arena_fini(&a);
  return out;
}

/* ---- records ----------------------------------------------------------------------- */
bool tun_record_is_library(const tun_record *r, char *lib, size_t n) {
  if (!r || !r->kind || strcmp(r->kind, TUN_KIND_LIBRARY)) return false;
  if (lib && n) {
    lib[0] = 0;
    json_error_t e;
    json_t *o = r->params ? json_loads(r->params, 0, &e) : NULL;
    const char *s = json_string_value(json_object_get(o, "lib"));
    snprintf(lib, n, "%s", s ? s : "?");
    json_decref(o);
  }
  return true;
}

/* The parsed parameters of a library record (NULL for any other); the
 * caller json_decref()s them. */
static json_t *library_params(const tun_record *r) {
  if (!tun_record_is_library(r, NULL, 0) || !r->params) return NULL;
  json_error_t e;
  return json_loads(r->params, 0, &e);
}

bool tun_record_library_call(const tun_record *r, char *call, size_t n) {
  json_t *o = library_params(r);
  const char *fn = json_string_value(json_object_get(o, "call"));
  if (call && n) snprintf(call, n, "%s", fn ? fn : "");
  json_decref(o);
  return fn != NULL;
}

int tun_library_packed_param(const tun_record *r) {
  json_t *o = library_params(r);
  const char *fn = json_string_value(json_object_get(o, "call"));
  json_t *p = json_object_get(o, "b_param");
  int i = fn && !strcmp(fn, PACKED_FN) && json_is_integer(p) ? (int)json_integer_value(p) : -1;
  json_decref(o);
  return i;
}

sch_traced *tun_record_schedule(const tun_record *r, const ir_func *f, const cg_target *t, ts_diag *d) {
  if (!tun_record_is_library(r, NULL, 0)) {
    sch_trace *tr = sch_trace_from_json(r->trace, d);
    sch_traced *s = tr ? sch_trace_replay(tr, f, 1, d) : NULL;
    sch_trace_free(tr);
    return s;
  }
  tun_lib_cand cs[TUN_LIB_MAX_CANDS];
  int n = tun_library_candidates(f, t, cs, TUN_LIB_MAX_CANDS);
  for (int i = 0; i < n; i++)
    if (r->params && !strcmp(cs[i].params, r->params)) return tun_library_schedule(f, t, &cs[i], d);
  ts_diag_set(d, TS_EUNSUPPORTED, "library record %s: %s", r->params ? r->params : "(no parameters)",
              !tun_library_target_ok(t) ? "the target cannot call libraries (not an llvm target of this host)"
              : n ? "no call of the task has these parameters"
                  : "no library call covers the task here (or the library was not found when tessel was built)");
  return NULL;
}

/* The structure of a candidate's parameters: lib, batch_mode, trans_b,
 * other_blocks (the extents and the call left out: they follow the sizes). */
static bool same_structure(const char *pa, const char *pb) {
  if (pa && pb && strstr(pa, "tsrt_dnnl_conv") && strstr(pb, "tsrt_dnnl_conv")) return tun_conv_same_structure(pa, pb);
  json_error_t e;
  json_t *a = pa ? json_loads(pa, 0, &e) : NULL, *b = pb ? json_loads(pb, 0, &e) : NULL;
  static const char *const keys[] = {"lib", "batch_mode", "trans_b", "other_blocks"};
  bool same = a && b;
  /* the packed call is its own structure (a plain call of the same library is not it) */
  const char *ca = json_string_value(json_object_get(a, "call")), *cb = json_string_value(json_object_get(b, "call"));
  if (same && ca && cb && (!strcmp(ca, PACKED_FN)) != (!strcmp(cb, PACKED_FN))) same = false;
  for (size_t i = 0; same && i < sizeof keys / sizeof keys[0]; i++) {
    json_t *x = json_object_get(a, keys[i]), *y = json_object_get(b, keys[i]);
    same = x && y && json_equal(x, y);
  }
  json_decref(a);
  json_decref(b);
  return same;
}

sch_traced *tun_record_schedule_any_size(const tun_record *r, const ir_func *f, const cg_target *t, ts_diag *d) {
  if (!tun_record_is_library(r, NULL, 0))
    return ts_diag_set(d, TS_EINVAL, "not a library record (a trace is made for its sizes)"), NULL;
  tun_lib_cand cs[TUN_LIB_MAX_CANDS];
  int n = tun_library_candidates(f, t, cs, TUN_LIB_MAX_CANDS);
  for (int i = 0; i < n; i++)
    if (same_structure(cs[i].params, r->params)) return tun_library_schedule(f, t, &cs[i], d);
  ts_diag_set(d, TS_EUNSUPPORTED, "library record %s: %s %s", r->params ? r->params : "(no parameters)",
              f->name ? f->name : "?",
              !tun_library_target_ok(t) ? "is built for a target that cannot call libraries"
              : n ? "has no call of that library and structure"
                  : "has no library call (or the library was not found when tessel was built)");
  return NULL;
}

void tun_library_split(const tun_db *db, const char *key, const char *target, int threads, double *lib_s, char *lib,
                       size_t n, double *kernel_s) {
  *lib_s = *kernel_s = 0;
  if (lib && n) lib[0] = 0;
  int cnt = 0;
  const int *idx = db ? tun_db_indices_for(db, key, target, &cnt) : NULL;
  for (int i = 0; i < cnt; i++) {
    const tun_record *r = tun_db_get(db, idx[i]);
    if (r->error || !r->verified || r->nruns <= 0) continue;
    if (threads != TUN_ANY_THREADS && r->threads != threads) continue;
    double m = tun_record_mean(r);
    char name[32];
    if (tun_record_is_library(r, name, sizeof name)) {
      if (*lib_s <= 0 || m < *lib_s) {
        *lib_s = m;
        if (lib && n) snprintf(lib, n, "%s", name);
      }
    } else if (*kernel_s <= 0 || m < *kernel_s) {
      *kernel_s = m;
    }
  }
}

void tun_library_cell(double lib_s, const char *lib, double kernel_s, char *buf, size_t n) {
  if (lib_s <= 0)
    snprintf(buf, n, "-");
  else if (kernel_s <= 0)
    snprintf(buf, n, "%s", lib);
  else if (lib_s < kernel_s)
    snprintf(buf, n, "%s %.2fx", lib, kernel_s / lib_s);
  else
    snprintf(buf, n, "kernel %.2fx", lib_s / kernel_s);
}
