/* postproc_gpu.c — the CUDA postprocessors, in MetaSchedule's order (the
 * cuda row of search/targets.c lists them): DisallowDynamicLoop, RewriteCooperativeFetch, RewriteUnboundBlock,
 * RewriteUnroll (the unroll half of RewriteParallelVectorizeUnroll),
 * RewriteReductionBlock, VerifyGPUCode. Like the CPU ones (postproc.c) they
 * run on the traced schedule after EnterPostproc, so a candidate's trace
 * replays to the exact schedule.
 *
 *  - RewriteCooperativeFetch: a copy block annotated
 *    meta_schedule.cooperative_fetch = lanes (gpu_multi_level_tiling.c)
 *    has its fused loop split [rest, threadIdx.x, lanes] with the thread
 *    count of the threadIdx.x loop around it, the middle loop bound to
 *    threadIdx.x (the same hardware index: each thread copies its share) and
 *    the lanes vectorized (under warps bound to threadIdx.z/y and no
 *    threadIdx.x, as the tensor-core rule's copies: [rest, threadIdx.z,
 *    threadIdx.y, threadIdx.x = 32, lanes]). Lanes are used only when they divide the copy's
 *    extent (so the split's guard does not depend on the lane); otherwise
 *    the copy is split [rest, threadIdx.x] alone.
 *  - RewriteUnboundBlock: a block under no thread-bound loop gets its
 *    leading spatial loops fused and bound to blockIdx.x / threadIdx.x (at
 *    most 1024 threads and 256 blocks; beyond, each thread loops), or a unit
 *    loop bound to blockIdx.x when it has no spatial loop.
 *  - RewriteUnroll: the root's meta_schedule.unroll_explicit step (when not
 *    0) becomes pragma_auto_unroll_max_step + pragma_unroll_explicit on the
 *    outermost loop of each block with a reduction (bound to blockIdx on a
 *    GPU, as in TVM): the CUDA emitter unrolls every serial loop below it whose nest
 *    takes at most that many steps.
 *  - RewriteReductionBlock: decompose_reduction at the outermost reduction
 *    loop. For a cross-thread reduction that is the threadIdx.x loop (TVM
 *    skips those blocks and lowers their init in LowerCrossThreadReduction):
 *    the init then runs before the threads' loop and the update is the plain
 *    B[i] = B[i] + e that the CUDA emitter turns into a warp all-reduce; when the
 *    primitive refuses there (fused pooling windows), the init stays.
 *  - VerifyGPUCode: cg_gpu_check with the target's limits (every store must
 *    be thread-bound), and each tiled block's threads per block within the
 *    range its tiling annotated; with a register check installed
 *    (srch_postproc_opts.gpu_regcheck: the tuner's, tessel tune
 *    --gpu-regcheck, which emits and compiles the candidate to a cubin and
 *    checks its kernels' registers x threads and spills) that too —
 *    opt-in, as a compile costs ~0.3-0.7 s against a replay's milliseconds
 *    and the search postprocesses ~2500 candidates per batch; the build of
 *    every measured candidate checks the register file anyway. */
#include <stdlib.h>
#include <string.h>

#include "codegen/gpu_check.h"
#include "search/rules/gpu_rules.h"

#define MAXL 64

/* ---- helpers ---- */
static int64_t ann_int(const ir_annot *a) {
  if (!a) return 0;
  if (a->kind == IR_ANN_INT) return a->v.i;
  int64_t v;
  if (a->kind == IR_ANN_EXPR && ir_as_int(a->v.e, &v)) return v;
  return 0;
}

static const ir_stmt *loop_stmt(sch_traced *t, int rv) {
  return srch_find_loop(sch_traced_func(t), sch_t_loop(t, rv).var);
}

/* ---- RewriteCooperativeFetch ---- */
static void cooperative_fetch(sch_traced *t, const char *name, int64_t lanes) {
  int64_t tx = srch_gpu_thread_extent(t, name, "threadIdx.x"), ty = 0, tz = 0;
  if (tx <= 0) { /* under warps (threadIdx.z/y, tensor cores): 32 lanes each on threadIdx.x */
    ty = srch_gpu_thread_extent(t, name, "threadIdx.y");
    tz = srch_gpu_thread_extent(t, name, "threadIdx.z");
    if (ty <= 0) return;
    tx = 32;
  }
  ts_diag q;
  ts_diag_clear(&q);
  int b, nl;
  const int *lp;
  if (sch_t_get_block(t, name, &b, &q) || sch_t_get_loops(t, b, &lp, &nl, &q) || nl == 0) return;
  int fused = lp[nl - 1];
  const ir_stmt *l = loop_stmt(t, fused);
  int64_t ext;
  if (!l || l->u.loop.kind != IR_FOR_SERIAL || l->u.loop.nannot || !ir_as_int(l->u.loop.extent, &ext)) return;
  int vec = -1;
  if (lanes > 1 && ext % lanes == 0 && ext > lanes) {
    sch_arg f[2] = {sch_arg_none(), sch_arg_int(lanes)};
    int p[2];
    if (sch_t_split(t, fused, 2, f, p, &q)) return;
    fused = p[0];
    vec = p[1];
  }
  if (ty > 0 && tz > 0) {
    sch_arg f[4] = {sch_arg_none(), sch_arg_int(tz), sch_arg_int(ty), sch_arg_int(tx)};
    int p[4];
    if (sch_t_split(t, fused, 4, f, p, &q) || sch_t_bind(t, p[1], "threadIdx.z", &q) ||
        sch_t_bind(t, p[2], "threadIdx.y", &q) || sch_t_bind(t, p[3], "threadIdx.x", &q))
      return;
  } else if (ty > 0) {
    sch_arg f[3] = {sch_arg_none(), sch_arg_int(ty), sch_arg_int(tx)};
    int p[3];
    if (sch_t_split(t, fused, 3, f, p, &q) || sch_t_bind(t, p[1], "threadIdx.y", &q) ||
        sch_t_bind(t, p[2], "threadIdx.x", &q))
      return;
  } else {
    sch_arg f[2] = {sch_arg_none(), sch_arg_int(tx)};
    int p[2];
    if (sch_t_split(t, fused, 2, f, p, &q)) return;
    if (sch_t_bind(t, p[1], "threadIdx.x", &q)) return;
  }
  if (vec >= 0) {
    ts_diag_clear(&q);
    sch_t_vectorize(t, vec, &q);
  }
}

static ts_status cooperative_fetch_block(sch_traced *t, const char *name, const ir_stmt *r, ts_diag *d) {
  (void)d;
  const ir_block *b = r->u.realize.block;
  const ir_annot *an = ir_annot_find(b->nannot, b->annots, SRCH_ANN_COOP_FETCH);
  if (an) cooperative_fetch(t, name, ann_int(an));
  return TS_OK;
}

/* ---- RewriteUnboundBlock ---- */
static ts_status unbound_block(sch_traced *t, const char *name, const ir_stmt *r, ts_diag *d) {
  (void)r;
  (void)d;
  if (!srch_gpu_block_bound(t, name))
    srch_gpu_bind_block(t, name, true, SRCH_GPU_MAX_THREADS, -1, SRCH_GPU_MAX_BLOCKS);
  return TS_OK;
}

/* ---- RewriteUnroll ---- */
static bool has_reduction_iter(const ir_block *b) {
  for (int i = 0; i < b->niter; i++)
    if (b->iters[i].type != IR_ITER_S) return true;
  return false;
}

/* The root's meta_schedule.unroll_explicit step (0: none). */
static int64_t unroll_step(sch_traced *t) {
  const ir_stmt *root = sch_traced_func(t)->body;
  if (!root || root->kind != IR_BLOCK_REALIZE) return 0;
  const ir_block *rb = root->u.realize.block;
  return ann_int(ir_annot_find(rb->nannot, rb->annots, SRCH_ANN_UNROLL));
}

static ts_status unroll_block(sch_traced *t, const char *name, const ir_stmt *r, ts_diag *d) {
  (void)d;
  int64_t step = unroll_step(t);
  if (step <= 0 || !has_reduction_iter(r->u.realize.block)) return TS_OK;
  ts_diag q;
  ts_diag_clear(&q);
  int b, nl;
  const int *lp;
  if (sch_t_get_block(t, name, &b, &q) || sch_t_get_loops(t, b, &lp, &nl, &q)) return TS_OK;
  const ir_stmt *l = nl > 0 ? loop_stmt(t, lp[0]) : NULL;
  if (l && !ir_annot_find(l->u.loop.nannot, l->u.loop.annots, "pragma_auto_unroll_max_step")) {
    int lv = lp[0];
    sch_t_annotate(t, lv, "pragma_auto_unroll_max_step", sch_arg_int(step), &q);
    sch_t_annotate(t, lv, "pragma_unroll_explicit", sch_arg_int(1), &q);
  }
  return TS_OK;
}

/* ---- VerifyGPUCode ---- */
static ts_status thread_range_block(sch_traced *t, const char *name, const ir_stmt *r, ts_diag *d) {
  const ir_block *b = r->u.realize.block;
  const ir_annot *lo = ir_annot_find(b->nannot, b->annots, SRCH_ANN_THREAD_LOW);
  const ir_annot *hi = ir_annot_find(b->nannot, b->annots, SRCH_ANN_THREAD_HIGH);
  if (!lo && !hi) return TS_OK;
  int64_t threads = 1;
  static const char *const tags[3] = {"threadIdx.x", "threadIdx.y", "threadIdx.z"};
  for (int k = 0; k < 3; k++) {
    int64_t e = srch_gpu_thread_extent(t, name, tags[k]);
    if (e > 0) threads *= e;
  }
  int64_t l = lo ? ann_int(lo) : 1, h = hi ? ann_int(hi) : SRCH_GPU_MAX_THREADS;
  if (threads < l || threads > h)
    return ts_diag_set(d, TS_EUNSUPPORTED,
                       "VerifyGPUCode: block %s runs %lld threads per block, outside the range [%lld, %lld] its "
                       "tiling asks for",
                       name, (long long)threads, (long long)l, (long long)h);
  return TS_OK;
}

/* The postprocessors over every block (the cuda row of targets.c). */
ts_status srch_pp_gpu_cooperative_fetch(sch_traced *ts, const cg_target *t, const srch_postproc_opts *o,
                                        ts_diag *d) {
  return srch_each_block(ts, cooperative_fetch_block, d);
}

ts_status srch_pp_gpu_unbound_block(sch_traced *ts, const cg_target *t, const srch_postproc_opts *o, ts_diag *d) {
  return srch_each_block(ts, unbound_block, d);
}

ts_status srch_pp_gpu_unroll(sch_traced *ts, const cg_target *t, const srch_postproc_opts *o, ts_diag *d) {
  return srch_each_block(ts, unroll_block, d);
}

/* VerifyGPUCode: each block's thread range, cg_gpu_check with the target's
 * limits, then the installed register check (see the top). */
ts_status srch_pp_gpu_verify(sch_traced *ts, const cg_target *t, const srch_postproc_opts *o, ts_diag *d) {
  ts_status st = srch_each_block(ts, thread_range_block, d);
  if (st) return st;
  cg_gpu_limits lim;
  cg_gpu_limits_for_target(t, &lim);
  ts_diag q;
  ts_diag_clear(&q);
  if (cg_gpu_check(sch_traced_func(ts), &lim, &q)) return ts_diag_set(d, q.code, "VerifyGPUCode: %s", q.msg);
  if (!o->gpu_regcheck) return TS_OK;
  ts_diag_clear(&q);
  if (o->gpu_regcheck(sch_traced_func(ts), t, &q)) return ts_diag_set(d, q.code, "VerifyGPUCode: %s", q.msg);
  return TS_OK;
}
