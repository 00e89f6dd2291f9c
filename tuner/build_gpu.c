/* build_gpu.c — the default GPU schedule (tun_default_schedule_gpu, see
 * build.h), in the spirit of TVM's dlight fallback rule, so that every
 * workload builds for cuda without a trace: elementwise producers inlined,
 * each block's leading spatial loops fused and bound to blockIdx.x /
 * threadIdx.x with reductions serial inside each thread, inits decomposed.
 * Every step is best effort; the caller checks the result with cg_gpu_check.
 * docs/GPU_SEARCH.md ("Default GPU schedule"). */
#include <string.h>

#include "codegen/gpu_check.h"
#include "search/search.h"
#include "tuner/build.h"

#define MAXL 64

static const ir_stmt *realize_of(sch_traced *t, const char *name) {
  return srch_find_realize(sch_traced_func(t), name);
}

static const ir_stmt *loop_of(sch_traced *t, const ir_var *var) { return srch_find_loop(sch_traced_func(t), var); }

/* Block names in program order, copied into a (-1 on OOM). */
static int block_names(sch_traced *t, ts_arena *a, const char ***out) {
  int n = srch_block_names(sch_traced_func(t), a, out);
  return *out ? n : -1;
}

/* Does any block under loop statement s bind its var into a non-spatial iter? */
static bool carries_reduction(const ir_stmt *loop) { return srch_loop_is_reduction(loop, loop->u.loop.var); }

static bool is_bound(sch_traced *t, const int *loops, int n) {
  for (int i = 0; i < n; i++) {
    const ir_stmt *l = loop_of(t, sch_t_loop(t, loops[i]).var);
    if (l && l->u.loop.kind == IR_FOR_THREAD_BINDING) return true;
  }
  return false;
}

/* Step 1: an elementwise (no init, one write) block with consumers. */
static void try_inline(sch_traced *t, const char *name) {
  const ir_stmt *r = realize_of(t, name);
  if (!r) return;
  const ir_block *b = r->u.realize.block;
  if (b->init || b->nwrites != 1) return;
  ts_diag q;
  ts_diag_clear(&q);
  sch_block *cons;
  int nc = 0;
  if (sch_get_consumers(sch_traced_state(t), (sch_block){.name = b->name}, &cons, &nc, &q) || nc == 0) return;
  int bh;
  if (sch_t_get_block(t, name, &bh, &q)) return;
  ts_diag_clear(&q);
  sch_t_compute_inline(t, bh, &q); /* refused: unchanged */
}

/* Step 2 and 3 for one block. */
static void bind_block(sch_traced *t, const char *name, int max_threads) {
  ts_diag q;
  ts_diag_clear(&q);
  int b, nl;
  const int *lp;
  if (sch_t_get_block(t, name, &b, &q) || sch_t_get_loops(t, b, &lp, &nl, &q) || nl > MAXL) return;
  int loops[MAXL];
  memcpy(loops, lp, sizeof(int) * (size_t)nl);
  if (is_bound(t, loops, nl)) return;
  /* leading spatial loops: serial, unannotated, perfectly nested */
  int ns = 0;
  for (int i = 0; i < nl; i++) {
    const ir_stmt *l = loop_of(t, sch_t_loop(t, loops[i]).var);
    if (!l || l->u.loop.kind != IR_FOR_SERIAL || l->u.loop.nannot > 0 || carries_reduction(l)) break;
    ns = i + 1;
    if (l->u.loop.body->kind != IR_FOR) break; /* several children: stop here */
  }
  int fused;
  if (ns == 0) {
    ts_diag_clear(&q);
    if (sch_t_add_unit_loop(t, b, &fused, &q)) return;
    ts_diag_clear(&q);
    sch_t_bind(t, fused, "blockIdx.x", &q);
  } else {
    fused = loops[0];
    ts_diag_clear(&q);
    if (ns > 1 && sch_t_fuse(t, ns, loops, &fused, &q)) return;
    const ir_stmt *l = loop_of(t, sch_t_loop(t, fused).var);
    int64_t ext = -1;
    int64_t threads = 256 < max_threads ? 256 : max_threads;
    if (l && ir_as_int(l->u.loop.extent, &ext) && ext < threads) threads = ext;
    if (threads < 1) threads = 1;
    sch_arg f[2] = {sch_arg_none(), sch_arg_int(threads)};
    int parts[2];
    ts_diag_clear(&q);
    if (sch_t_split(t, fused, 2, f, parts, &q)) return;
    ts_diag_clear(&q);
    if (sch_t_bind(t, parts[0], "blockIdx.x", &q)) return;
    ts_diag_clear(&q);
    if (sch_t_bind(t, parts[1], "threadIdx.x", &q)) return;
  }
  /* decompose the init in front of the first reduction loop */
  const ir_stmt *r = realize_of(t, name);
  if (!r || !r->u.realize.block->init) return;
  ts_diag_clear(&q);
  if (sch_t_get_loops(t, b, &lp, &nl, &q)) return;
  for (int i = 0; i < nl; i++) {
    const ir_stmt *l = loop_of(t, sch_t_loop(t, lp[i]).var);
    if (l && l->u.loop.kind == IR_FOR_SERIAL && carries_reduction(l)) {
      int init;
      ts_diag_clear(&q);
      sch_t_decompose_reduction(t, b, lp[i], &init, &q);
      return;
    }
  }
}

ts_status tun_default_schedule_gpu(sch_traced *t, const cg_target *tg, ts_diag *d) {
  cg_gpu_limits lim;
  cg_gpu_limits_for_target(tg, &lim);
  ts_arena a;
  ts_arena_init(&a);
  const char **names;
  int n = block_names(t, &a, &names);
  if (n < 0) {
    ts_arena_fini(&a);
    return ts_diag_set(d, TS_ENOMEM, "out of memory");
  }
  for (int i = 0; i < n; i++) try_inline(t, names[i]);
  ts_arena_fini(&a);
  ts_arena_init(&a);
  n = block_names(t, &a, &names);
  if (n < 0) {
    ts_arena_fini(&a);
    return ts_diag_set(d, TS_ENOMEM, "out of memory");
  }
  for (int i = 0; i < n; i++) bind_block(t, names[i], lim.max_threads_per_block);
  ts_arena_fini(&a);
  return TS_OK;
}
