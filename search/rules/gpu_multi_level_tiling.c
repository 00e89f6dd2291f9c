/* gpu_multi_level_tiling.c — MultiLevelTiling for CUDA, structure
 * "SSSRRSRS" (TVM's multi_level_tiling.cc with tile_binds [blockIdx.x,
 * vthread.x, threadIdx.x]): five-way spatial and three-way reduction splits,
 * a local write cache at the threadIdx loop, shared-memory read caches with a
 * cooperative-fetch annotation. One sketch; a refused step drops the attempt
 * and leaves the block to CrossThreadReduction / AutoBind.
 * docs/GPU_SEARCH.md ("Design space"). */
#include <string.h>

#include "search/rules/gpu_rules.h"

#define MAXL 32

/* Vector lanes a cooperative fetch may use for an element of `bytes`. */
static int fetch_lanes(int bytes, int64_t *out) {
  static const int64_t f32[] = {1, 2, 3, 4}, f16[] = {1, 2, 4, 8}, i8[] = {1, 2, 3, 4, 8, 16}, f64[] = {1, 2};
  const int64_t *src = f32;
  int n = 4;
  if (bytes == 2) src = f16;
  else if (bytes == 1) src = i8, n = 6;
  else if (bytes >= 8) src = f64, n = 2;
  memcpy(out, src, sizeof(int64_t) * (size_t)n);
  return n;
}

/* Fuses the slot's loops (if more than one) and binds the result. */
static bool fuse_bind(sch_traced *t, const int *loops, int n, const char *tag, int *out, ts_diag *q) {
  int f = loops[0];
  if (n > 1 && sch_t_fuse(t, n, loops, &f, q)) return false;
  if (sch_t_bind(t, f, tag, q)) return false;
  *out = f;
  return true;
}

/* Steps 1-4 on t (a fork). False when a step is refused. */
static bool tile(const srch_rule_ctx *c, sch_traced *t, const char *block, const ir_block *blk, const int *iter_of,
                 int nl) {
  ts_diag q;
  ts_diag_clear(&q);
  int b, nl2;
  const int *lp;
  if (sch_t_get_block(t, block, &b, &q) || sch_t_get_loops(t, b, &lp, &nl2, &q) || nl2 != nl) return false;
  int loops[MAXL];
  memcpy(loops, lp, sizeof(int) * (size_t)nl);
  static const char structure[] = "SSSRRSRS";
  enum { NSLOT = 8 };
  int slots[NSLOT][MAXL], cnt[NSLOT] = {0};
  int64_t sprod = 1;
  for (int l = 0; l < nl; l++) {
    bool sp = blk->iters[iter_of[l]].type == IR_ITER_S;
    if (sp) {
      int64_t e;
      if (ir_as_int(blk->iters[iter_of[l]].dom.extent, &e)) sprod *= e;
    }
    int n = sp ? 5 : 3;
    int o[5];
    if (srch_sample_split(t, loops[l], n, c->max_innermost, o, &q)) return false;
    int k = 0;
    for (int s = 0; s < NSLOT; s++)
      if (structure[s] == (sp ? 'S' : 'R')) slots[s][cnt[s]++] = o[k++];
  }
  int order[5 * MAXL], no = 0;
  for (int s = 0; s < NSLOT; s++)
    for (int k = 0; k < cnt[s]; k++) order[no++] = slots[s][k];
  if (sch_t_reorder(t, no, order, &q)) return false;
  int bx, vt, tx;
  if (!fuse_bind(t, slots[0], cnt[0], "blockIdx.x", &bx, &q) || !fuse_bind(t, slots[1], cnt[1], "vthread.x", &vt, &q) ||
      !fuse_bind(t, slots[2], cnt[2], "threadIdx.x", &tx, &q))
    return false;
  (void)bx;
  (void)vt;
  if (sch_t_annotate(t, b, SRCH_ANN_TILING, sch_arg_str("SSSRRSRS"), &q) ||
      sch_t_annotate(t, b, SRCH_ANN_THREAD_LOW, sch_arg_int(sprod > 64 ? 32 : 1), &q) ||
      sch_t_annotate(t, b, SRCH_ANN_THREAD_HIGH, sch_arg_int(SRCH_GPU_MAX_THREADS), &q))
    return false;
  /* 3. local write cache, written back per thread */
  int wb;
  if (sch_t_cache_write(t, b, 0, "local", 0, NULL, &wb, &q) || sch_t_reverse_compute_at(t, wb, tx, true, -1, &q))
    return false;
  /* 4. shared read caches at the last R0 loop: loops are bx vt tx R0... */
  int nr = cnt[3];
  if (sch_t_get_loops(t, b, &lp, &nl2, &q) || nl2 < 3 + nr) return false;
  int at = lp[3 + nr - 1];
  const ir_stmt *r = srch_find_realize(sch_traced_func(t), block);
  if (!r) return false;
  const ir_block *cur = r->u.realize.block;
  int nreads = cur->nreads;
  const ir_buffer *out_buf = cur->writes[0].buf;
  const ir_buffer *reads[MAXL];
  if (nreads > MAXL) return false;
  for (int i = 0; i < nreads; i++) reads[i] = cur->reads[i].buf;
  for (int i = 0; i < nreads; i++) {
    if (reads[i] == out_buf) continue;
    /* the read's index may have moved: find it again by buffer */
    r = srch_find_realize(sch_traced_func(t), block);
    int idx = -1;
    for (int k = 0; k < r->u.realize.block->nreads; k++)
      if (r->u.realize.block->reads[k].buf == reads[i]) idx = k;
    if (idx < 0) return false;
    int cb;
    if (sch_t_cache_read(t, b, idx, "shared", 0, NULL, &cb, &q) || sch_t_compute_at(t, cb, at, true, -1, &q))
      return false;
    const int *cl;
    int ncl;
    if (sch_t_get_loops(t, cb, &cl, &ncl, &q)) return false;
    int nd = reads[i]->ndim;
    if (ncl < nd) return false;
    int own[MAXL];
    memcpy(own, cl + ncl - nd, sizeof(int) * (size_t)nd);
    int fused = own[0];
    if (nd > 1 && sch_t_fuse(t, nd, own, &fused, &q)) return false;
    int64_t lanes[6];
    int nlanes = fetch_lanes(ir_dtype_bytes(reads[i]->dtype), lanes);
    double probs[6];
    for (int k = 0; k < nlanes; k++) probs[k] = 1.0 / nlanes;
    int v;
    if (sch_t_sample_categorical(t, nlanes, lanes, probs, NULL, &v, &q) ||
        sch_t_annotate(t, cb, SRCH_ANN_COOP_FETCH, sch_arg_rv(v), &q))
      return false;
  }
  return true;
}

ts_status srch_rule_gpu_multi_level_tiling(const srch_rule_ctx *c, sch_traced *t, const char *block, ts_vec *out,
                                           ts_diag *d) {
  const ir_func *fn = sch_traced_func(t);
  ts_diag q;
  ts_diag_clear(&q);
  int nl, iter_of[MAXL];
  if (srch_block_needs_tiling(t, block, true, iter_of, &nl)) {
    sch_traced *f = srch_fork(c, t, &q);
    const ir_block *blk = srch_find_realize(f ? sch_traced_func(f) : fn, block)->u.realize.block;
    if (f && tile(c, f, block, blk, iter_of, nl)) {
      sch_traced_free(t);
      t = f;
    } else if (f) {
      sch_traced_free(f);
    }
  }
  return srch_push(out, t, d);
}
