/* gpu_tensor_core.c — MultiLevelTilingTensorCore for CUDA (MetaSchedule's
 * multi_level_tiling_tensor_core.cc; docs/GPU_SEARCH.md). Runs before the
 * plain GPU MultiLevelTiling and forks, for a block that the WMMA
 * 16x16x16 mma (fp16 or bf16 inputs, f32 accumulation) describes, a
 * tensor-core sketch beside the untouched state (which the plain rule then
 * tiles, so SIMT and tensor-core candidates compete):
 *  1. caches: C's output to "wmma.accumulator" (cache_write), each input to
 *     "shared" and from there to "wmma.matrix_a" / "wmma.matrix_b"
 *     (cache_read twice); the reduction decomposed (init block separate);
 *  2. each loop split [None, 16]; the outer parts tiled SSSRRSRS by
 *     SamplePerfectTile (innermost <= 4 tiles) and reordered
 *     S0 S1 S2 R0 R1 S3 R2 S4 with the three 16-loops innermost; those
 *     blockized (the 16x16x16 block) and tensorized to mma_sync;
 *  3. S0 fused -> blockIdx.y, S1 -> blockIdx.x, S2 -> threadIdx.y: one warp
 *     per threadIdx.y; threadIdx.x (32 lanes) comes from the cooperative
 *     fetch, every lane of a warp runs the warp-wide WMMA calls;
 *  4. the shared copies compute_at the last R0 loop, fused and annotated
 *     cooperative_fetch (vector lanes sampled; RewriteCooperativeFetch
 *     splits them [rest, threadIdx.y, threadIdx.x=32, lanes]); the fragment
 *     copies compute_at the last R1 loop, split into 16x16 tiles and
 *     tensorized to load_matrix_sync;
 *  5. the init block compute_at threadIdx.y, tiled 16x16, tensorized to
 *     fill_fragment; the accumulator's write-back reverse_compute_at
 *     threadIdx.y, tiled 16x16, tensorized to store_matrix_sync (straight
 *     to global memory).
 * Tile sizes are the only sampled decisions besides the fetch lanes, so the
 * tile-size mutator moves within the sketch; VerifyGPUCode rejects samples
 * over the thread or shared-memory limits.
 * Eligible blocks (srch_gpu_tensor_core_check): three loops (four with a
 * batch), one per iter var ([S,] S, S, R), the body
 * C[i, j] = C[i, j] + f32(A[i, k]) * f32(B[k, j]) (or B[j, k]) with A, B both f16 (or both bf16, sm_80+) and C f32, every extent a multiple of
 * 16; anything else gets no tensor-core sketch, with the reason in a debug
 * line (TESSEL_DEBUG containing "search"). Not handled (refused with that
 * reason): more than one batch dimension, a transposed A. B may be [n, k]
 * (dense's weights: the trans_b mma, matrix_b loaded col_major). One
 * leading batch iter var (batch_matmul, any extent) is bound to
 * blockIdx.z: one batch per thread block, the WMMA intrinsics match with the
 * batch index as a tile-invariant leading dimension (tensorize.c).
 * Off without its rule bit (tessel tune --no-tensor-core). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/schedule/intrin.h"
#include "ir/schedule/tensorize.h"
#include "search/rules/gpu_rules.h"

#define TC_MAX_INNER 4 /* MetaSchedule's max_innermost_factor for tensor cores */

static bool debug_on(void) {
  return ts_debug("search");
}

/* Is e (under casts) a load X[vbatch, va, vb] (the batch iter var first when
 * there is one, g_batch non-NULL)? Returns the buffer or NULL. */
static const ir_buffer *load2(const ir_var *g_batch, const ir_expr *e, const ir_var *va, const ir_var *vb) {
  while (e && e->kind == IR_CAST) e = e->u.cast.value;
  int lead = g_batch ? 1 : 0;
  if (!e || e->kind != IR_LOAD || e->u.load.nidx != 2 + lead) return NULL;
  if (lead && (e->u.load.idx[0]->kind != IR_VAR || e->u.load.idx[0]->u.var != g_batch)) return NULL;
  const ir_expr *x = e->u.load.idx[lead], *y = e->u.load.idx[lead + 1];
  if (x->kind == IR_VAR && y->kind == IR_VAR && x->u.var == va && y->u.var == vb) return e->u.load.buf;
  return NULL;
}

static const char *mma_name(ir_dtype_code in, bool trans_b) {
  if (trans_b)
    return in == IR_BF16 ? "cuda.wmma.mma_sync.bf16f32.16x16x16.trans_b" : "cuda.wmma.mma_sync.f16f32.16x16x16.trans_b";
  return in == IR_BF16 ? "cuda.wmma.mma_sync.bf16f32.16x16x16" : "cuda.wmma.mma_sync.f16f32.16x16x16";
}

bool srch_gpu_tensor_core_check(const ir_func *f, const char *block, const cg_target *t, tc_shape *out,
                                char *why, size_t nwhy) {
#define NO(...)                             \
  do {                                      \
    if (why) snprintf(why, nwhy, __VA_ARGS__); \
    return false;                           \
  } while (0)
  if (!cg_target_ops_of(t)->gpu) NO("not a cuda target");
  const ir_stmt *r = srch_find_realize(f, block);
  if (!r) NO("no block %s", block);
  const ir_block *b = r->u.realize.block;
  if (ir_annot_find(b->nannot, b->annots, SRCH_ANN_TILING)) NO("block %s is already tiled", block);
  if (b->niter != 3 && b->niter != 4)
    NO("block %s has %d iter vars; the 16x16x16 mma needs i, j, k (and at most one batch dimension before them)",
       block, b->niter);
  int nb = b->niter - 3; /* a leading batch iter var */
  if ((nb && b->iters[0].type != IR_ITER_S) || b->iters[nb].type != IR_ITER_S ||
      b->iters[nb + 1].type != IR_ITER_S || b->iters[nb + 2].type != IR_ITER_R)
    NO("block %s's iter vars are not [batch,] spatial, spatial, reduction", block);
  if (!b->init) NO("block %s has no init (not a reduction written from zero)", block);
  /* one loop per iter var, bound directly, serial, from 0 */
  const ir_stmt *loops[4];
  const ir_stmt *s = NULL;
  for (int l = 0; l < 3 + nb; l++) {
    const ir_expr *v = r->u.realize.iter_values[l];
    s = v->kind == IR_VAR ? srch_find_loop(f, v->u.var) : NULL;
    int64_t mn;
    if (!s || s->u.loop.kind != IR_FOR_SERIAL || !ir_as_int(s->u.loop.min, &mn) || mn != 0)
      NO("block %s: iter var %s is not bound to its own serial loop", block, b->iters[l].var->name);
    loops[l] = s;
  }
  int64_t ext[4];
  for (int l = 0; l < 3 + nb; l++) {
    if (!ir_as_int(loops[l]->u.loop.extent, &ext[l]))
      NO("block %s: loop %s has a symbolic extent", block, loops[l]->u.loop.var->name);
    if (l >= nb && ext[l] % 16)
      NO("block %s: extent %lld of loop %s is not a multiple of 16 (no padding for the 16x16x16 mma)", block,
         (long long)ext[l], loops[l]->u.loop.var->name);
  }
  /* the body: C[vi, vj] = C[vi, vj] + f32(A[vi, vk]) * f32(B[vk, vj]) */
  const ir_stmt *st = b->body;
  while (st && st->kind == IR_SEQ && st->u.seq.n == 1) st = st->u.seq.stmts[0];
  if (!st || st->kind != IR_STORE || st->u.store.nidx != 2 + nb)
    NO("block %s's body is not a single %d-d store", block, 2 + nb);
  char dt[24];
  const ir_var *vi = b->iters[nb].var, *vj = b->iters[nb + 1].var, *vk = b->iters[nb + 2].var;
  const ir_var *g_batch = nb ? b->iters[0].var : NULL;
  /* the store C[vbatch, vi, vj] */
  if (nb && (st->u.store.idx[0]->kind != IR_VAR || st->u.store.idx[0]->u.var != g_batch))
    NO("block %s's store is not indexed by its batch iter var first", block);
  const ir_buffer *C = st->u.store.buf;
  if (C->dtype.code != IR_F32 || C->dtype.lanes != 1)
    NO("block %s accumulates in %s, not f32", block, ir_dtype_str(C->dtype, dt, sizeof dt));
  const ir_expr *v = st->u.store.value;
  if (v->kind != IR_ADD) NO("block %s's update is not an accumulation", block);
  const ir_expr *acc = v->u.bin.a, *prod = v->u.bin.b;
  if (load2(g_batch, prod, vi, vj) == C) {
    const ir_expr *x = acc;
    acc = prod;
    prod = x;
  }
  if (load2(g_batch, acc, vi, vj) != C || prod->kind != IR_MUL) NO("block %s's update is not C[i, j] += A * B", block);
  /* A[i, k] and B[k, j], or B[j, k] (dense's weights: the trans_b mma with
   * a col_major matrix_b fragment) */
  const ir_buffer *A = NULL, *B = NULL;
  bool trans_b = false;
  for (int o = 0; o < 2 && !(A && B); o++) {
    const ir_expr *p = o ? prod->u.bin.b : prod->u.bin.a, *q = o ? prod->u.bin.a : prod->u.bin.b;
    A = load2(g_batch, p, vi, vk);
    B = load2(g_batch, q, vk, vj);
    if (A && !B && (B = load2(g_batch, q, vj, vk))) trans_b = true;
  }
  if (!A || !B) NO("block %s's operands are not A[i, k] and B[k, j] (or B[j, k])", block);
  ir_dtype_code in = A->dtype.code;
  if ((in != IR_F16 && in != IR_BF16) || B->dtype.code != in)
  {
    char dt2[24];
    NO("block %s multiplies %s by %s; tensor cores take f16 x f16 or bf16 x bf16 (f32 accumulation)", block,
       ir_dtype_str(A->dtype, dt, sizeof dt), ir_dtype_str(B->dtype, dt2, sizeof dt2));
  }
  const sch_intrin *mma = sch_intrin_get(mma_name(in, trans_b));
  if (!sch_intrin_available(mma, "cuda", NULL, NULL, t->arch[0] ? t->arch : "sm_90"))
    NO("%s needs %s, the target is %s", mma->name, mma->features, t->arch);
  if (out) {
    out->in = in;
    out->A = A;
    out->B = B;
    out->C = C;
    out->nbatch = nb;
    out->trans_b = trans_b;
    for (int l = 0; l < 3; l++) out->ext[l] = ext[l + nb];
  }
  return true;
#undef NO
}

/* Splits the two innermost loops of block rv by 16, moves the 16-loops
 * inside and tensorizes them with intrinsic `name`. */
static bool tile16_tensorize(sch_traced *t, int blk, const char *name, ts_diag *q) {
  const int *lp;
  int nl;
  if (sch_t_get_loops(t, blk, &lp, &nl, q)) return false;
  if (nl < 2) {
    ts_diag_set(q, TS_ESCHEDULE, "block %s has %d loops, 2 are tiled 16x16", sch_t_block(t, blk).name, nl);
    return false;
  }
  int l0 = lp[nl - 2], l1 = lp[nl - 1];
  sch_arg f[2] = {sch_arg_none(), sch_arg_int(16)};
  int a[2], b[2];
  if (sch_t_split(t, l0, 2, f, a, q) || sch_t_split(t, l1, 2, f, b, q)) return false;
  int order[4] = {a[0], b[0], a[1], b[1]};
  if (sch_t_reorder(t, 4, order, q)) return false;
  return sch_t_tensorize(t, a[1], name, q) == TS_OK;
}

/* The read index of the buffer named buf in block name, or -1 (by name: a
 * fork has its own copies of the buffers). */
static int read_index(sch_traced *t, const char *name, const ir_buffer *buf) {
  const ir_stmt *r = srch_find_realize(sch_traced_func(t), name);
  if (!r) return -1;
  for (int k = 0; k < r->u.realize.block->nreads; k++)
    if (!strcmp(r->u.realize.block->reads[k].buf->name, buf->name)) return k;
  return -1;
}

/* Binds loop l to tag. */
static bool bind1(sch_traced *t, int l, const char *tag, ts_diag *q) { return sch_t_bind(t, l, tag, q) == TS_OK; }

/* Steps 1-5 on t (a fork); false (q says why) when a step is refused. */
static bool apply(sch_traced *t, const char *block, const tc_shape *sh, ts_diag *q) {
  const char *suffix = sh->in == IR_BF16 ? "bf16" : "f16";
  char load_a[64], load_b[64];
  snprintf(load_a, sizeof load_a, "cuda.wmma.load_matrix_a.%s.16x16", suffix);
  snprintf(load_b, sizeof load_b, "cuda.wmma.load_matrix_b%s.%s.16x16", sh->trans_b ? "_trans" : "", suffix);
  int b;
  if (sch_t_get_block(t, block, &b, q)) return false;
  /* 1. caches */
  int wb;
  if (sch_t_cache_write(t, b, 0, "wmma.accumulator", 0, NULL, &wb, q)) return false;
  const ir_buffer *ins[2] = {sh->A, sh->B};
  const char *frag_scope[2] = {"wmma.matrix_a", "wmma.matrix_b"};
  int shared_cb[2], frag_cb[2];
  for (int o = 0; o < 2; o++) {
    int idx = read_index(t, block, ins[o]);
    if (idx < 0) {
      ts_diag_set(q, TS_ESCHEDULE, "block %s does not read %s", block, ins[o]->name);
      return false;
    }
    if (sch_t_cache_read(t, b, idx, "shared", 0, NULL, &shared_cb[o], q)) return false;
    const ir_stmt *cr = srch_find_realize(sch_traced_func(t), sch_t_block(t, shared_cb[o]).name);
    idx = cr && cr->u.realize.block->nwrites == 1 ? read_index(t, block, cr->u.realize.block->writes[0].buf) : -1;
    if (idx < 0) {
      ts_diag_set(q, TS_ESCHEDULE, "block %s does not read the shared copy of %s", block, ins[o]->name);
      return false;
    }
    if (sch_t_cache_read(t, b, idx, frag_scope[o], 0, NULL, &frag_cb[o], q)) return false;
  }
  const int *lp;
  int nl;
  if (sch_t_get_loops(t, b, &lp, &nl, q)) return false;
  int nb = sh->nbatch;
  if (nl != 3 + nb) {
    ts_diag_set(q, TS_ESCHEDULE, "block %s has %d loops after caching, not %d", block, nl, 3 + nb);
    return false;
  }
  int batch = nb ? lp[0] : -1;
  int loops[3] = {lp[nb], lp[nb + 1], lp[nb + 2]};
  /* 2. tiling: [None, 16], then SSRRSRS over the outer parts */
  static const char structure[] = "SSRRSRS";
  enum { NSLOT = 7 };
  int slots[NSLOT][2], cnt[NSLOT] = {0}, inner[3];
  for (int l = 0; l < 3; l++) {
    sch_arg f2[2] = {sch_arg_none(), sch_arg_int(16)};
    int o2[2];
    if (sch_t_split(t, loops[l], 2, f2, o2, q)) return false;
    inner[l] = o2[1];
    bool sp = l < 2;
    int n = sp ? 4 : 3, v[4], o[4];
    if (sch_t_sample_perfect_tile(t, o2[0], n, TC_MAX_INNER, NULL, v, q)) return false;
    sch_arg f[4];
    for (int k = 0; k < n; k++) f[k] = sch_arg_rv(v[k]);
    if (sch_t_split(t, o2[0], n, f, o, q)) return false;
    int k = 0;
    for (int s2 = 0; s2 < NSLOT; s2++)
      if (structure[s2] == (sp ? 'S' : 'R')) slots[s2][cnt[s2]++] = o[k++];
  }
  int order[17], no = 0;
  if (nb) order[no++] = batch; /* the batch loop outermost, one per block (blockIdx.z) */
  for (int s2 = 0; s2 < NSLOT; s2++)
    for (int k = 0; k < cnt[s2]; k++) order[no++] = slots[s2][k];
  for (int l = 0; l < 3; l++) order[no++] = inner[l];
  if (sch_t_reorder(t, no, order, q)) return false;
  /* 3. bindings, unfused (fused loops would make the bindings of the blocks
   *    below non-affine, which blockize refuses): S0 i -> blockIdx.y,
   *    j -> blockIdx.x; S1 (warps) i -> threadIdx.z, j -> threadIdx.y. Before
   *    the reduction is decomposed: bind wants the reduction with its init */
  if ((nb && !bind1(t, batch, "blockIdx.z", q)) || !bind1(t, slots[0][0], "blockIdx.y", q) ||
      !bind1(t, slots[0][1], "blockIdx.x", q) ||
      !bind1(t, slots[1][0], "threadIdx.z", q) || !bind1(t, slots[1][1], "threadIdx.y", q))
    return false;
  int warp = slots[1][1];
  /* 5. the init at R0 (under the warp: loops S2 S3 and the 16x16 tile),
   *    tensorized to fill_fragment; the 16x16x16 block; the write-back per
   *    warp, tiled and tensorized to store_matrix_sync */
  int init;
  if (sch_t_decompose_reduction(t, b, slots[2][0], &init, q)) return false;
  const int *il;
  int nil;
  if (sch_t_get_loops(t, init, &il, &nil, q)) return false;
  if (nil < 2 || sch_t_tensorize(t, il[nil - 2], "cuda.wmma.fill.f32.16x16", q)) return false;
  int ob;
  if (sch_t_blockize(t, inner[0], &ob, q)) return false;
  if (sch_t_annotate(t, ob, SRCH_ANN_TILING, sch_arg_str("SSRRSRS+wmma"), q)) return false;
  if (sch_t_reverse_compute_at(t, wb, warp, true, -1, q) || !tile16_tensorize(t, wb, "cuda.wmma.store.f32.16x16", q))
    return false;
  /* 4. shared copies at the last R0 loop, fragments at the last R1 loop:
   *    the loops of the mma block are [bz] by bx tz ty R0 R1 S2i S2j R2 S3i S3j */
  const int *ol;
  int nol;
  if (sch_t_get_loops(t, ob, &ol, &nol, q)) return false;
  if (nol != 11 + nb) {
    ts_diag_set(q, TS_ESCHEDULE, "the mma block has %d loops, not %d", nol, 11 + nb);
    return false;
  }
  int at_r0 = ol[4 + nb], at_r1 = ol[5 + nb];
  for (int o = 0; o < 2; o++) /* consumers first: the fragments, then their shared sources */
    if (sch_t_compute_at(t, frag_cb[o], at_r1, true, -1, q)) return false;
  for (int o = 0; o < 2; o++) {
    if (sch_t_compute_at(t, shared_cb[o], at_r0, true, -1, q)) return false;
    const int *cl;
    int ncl;
    if (sch_t_get_loops(t, shared_cb[o], &cl, &ncl, q)) return false;
    if (ncl < 2) {
      ts_diag_set(q, TS_ESCHEDULE, "the shared copy has %d loops", ncl);
      return false;
    }
    int own[2] = {cl[ncl - 2], cl[ncl - 1]}, fused;
    if (sch_t_fuse(t, 2, own, &fused, q)) return false;
    static const int64_t lanes[4] = {1, 2, 4, 8};
    static const double probs[4] = {0.25, 0.25, 0.25, 0.25};
    int vl;
    if (sch_t_sample_categorical(t, 4, lanes, probs, NULL, &vl, q) ||
        sch_t_annotate(t, shared_cb[o], SRCH_ANN_COOP_FETCH, sch_arg_rv(vl), q))
      return false;
  }
  for (int o = 0; o < 2; o++)
    if (!tile16_tensorize(t, frag_cb[o], o ? load_b : load_a, q)) return false;
  /* the 16x16x16 block */
  return sch_t_tensorize(t, ob, mma_name(sh->in, sh->trans_b), q) == TS_OK;
}

ts_status srch_rule_gpu_tensor_core(const srch_rule_ctx *c, sch_traced *t, const char *block, ts_vec *out,
                                    ts_diag *d) {
  char why[300];
  tc_shape sh;
  sch_traced *f = NULL;
  bool dbg = debug_on();
  if (srch_gpu_tensor_core_check(sch_traced_func(t), block, c->target, &sh, why, sizeof why)) {
    ts_diag q;
    ts_diag_clear(&q);
    f = srch_fork(c, t, &q);
    if (f && !apply(f, block, &sh, &q)) {
      if (dbg) fprintf(stderr, "[search] MultiLevelTilingTensorCore: block %s: a step was refused: %s\n", block, q.msg);
      sch_traced_free(f);
      f = NULL;
    } else if (f && dbg) {
      fprintf(stderr, "[search] MultiLevelTilingTensorCore: block %s: tensor-core sketch\n", block);
    }
  } else if (dbg && strcmp(why, "not a cuda target")) {
    fprintf(stderr, "[search] MultiLevelTilingTensorCore: no tensor-core sketch: %s\n", why);
  }
  if (ts_vec_push(out, t)) {
    sch_traced_free(t);
    if (f) sch_traced_free(f);
    return ts_diag_set(d, TS_ENOMEM, "out of memory");
  }
  if (f && ts_vec_push(out, f)) {
    sch_traced_free(f);
    return ts_diag_set(d, TS_ENOMEM, "out of memory");
  }
  return TS_OK;
}
