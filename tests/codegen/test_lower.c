/* test_lower.c — codegen's LLVM-free half: target strings (cg_target_parse),
 * lowering (cg_lower) and validity (cg_check).
 *
 * Every lowering case runs the lowered function in the reference
 * interpreter against the unlowered one (same seeded inputs: the lowered
 * params are flat views with the same element order), and checks the shape
 * of the lowered form: no blocks, flat buffers, one index per access, ramps
 * for contiguous vector accesses, and the vectorized-loop fallback where the
 * loop cannot be expressed in lanes. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "ir/interp.h"
#include "ir/parse.h"
#include "ir/print.h"
#include "ir/schedule/schedule.h"
#include "ir/schedule/trace.h"
#include "ir/workloads/workloads.h"
#include "schedule/util.h"

static ts_diag D;

/* ---- helpers ------------------------------------------------------------------ */

static cg_target target(const char *s) {
  cg_target t;
  ts_diag_clear(&D);
  ts_status st = cg_target_parse(s, &t, &D);
  ck_assert_msg(st == TS_OK, "target '%s': %s", s, D.msg);
  return t;
}

static char *ftext(const ir_func *f) {
  char *t = ir_func_to_string(f);
  ck_assert(t != NULL);
  return t;
}

/* Shape facts about a lowered function. */
typedef struct census {
  int blocks, loads, stores, bad_access; /* accesses with != 1 index or n-d buffers */
  int ifs, allocs, loops;
  int vec_loops, par_loops, unroll_loops, bound_loops;
  int vec_stores;         /* stores of a vector value */
  int ramp1_stores;       /* ... whose index is ramp(_, 1, _) */
  int ramp1_loads, strided_loads, gather_loads, bcast_loads;
  int max_lanes;
  bool annot_seen;        /* a loop carrying "pragma_auto_unroll_max_step" */
} census;

static bool cen_expr_cb(void *ctx, const ir_expr *e) {
  census *c = ctx;
  if (e->dtype.lanes > c->max_lanes) c->max_lanes = e->dtype.lanes;
  if (e->kind == IR_LOAD) {
    c->loads++;
    if (e->u.load.nidx != 1 || e->u.load.buf->ndim != 1) c->bad_access++;
    const ir_expr *ix = e->u.load.idx[0];
    int64_t st;
    if (ix->kind == IR_RAMP && ir_as_int(ix->u.ramp.stride, &st)) {
      if (st == 1) c->ramp1_loads++;
      else c->strided_loads++;
    } else if (ix->dtype.lanes > 1) {
      c->gather_loads++;
    }
  } else if (e->kind == IR_BROADCAST && e->u.bcast.value->kind == IR_LOAD) {
    c->bcast_loads++;
  }
  return true;
}

static bool cen_stmt_cb(void *ctx, const ir_stmt *s) {
  census *c = ctx;
  switch (s->kind) {
  case IR_BLOCK_REALIZE: c->blocks++; break;
  case IR_IF: c->ifs++; break;
  case IR_ALLOCATE:
    c->allocs++;
    if (s->u.alloc.buf->ndim != 1) c->bad_access++;
    break;
  case IR_FOR:
    c->loops++;
    if (s->u.loop.kind == IR_FOR_VECTORIZED) c->vec_loops++;
    if (s->u.loop.kind == IR_FOR_PARALLEL) c->par_loops++;
    if (s->u.loop.kind == IR_FOR_UNROLLED) c->unroll_loops++;
    if (s->u.loop.kind == IR_FOR_THREAD_BINDING) c->bound_loops++;
    if (ir_annot_find(s->u.loop.nannot, s->u.loop.annots, "pragma_auto_unroll_max_step"))
      c->annot_seen = true;
    break;
  case IR_STORE:
    c->stores++;
    if (s->u.store.nidx != 1 || s->u.store.buf->ndim != 1) c->bad_access++;
    if (s->u.store.value->dtype.lanes > 1) {
      c->vec_stores++;
      const ir_expr *ix = s->u.store.idx[0];
      int64_t st;
      if (ix->kind == IR_RAMP && ir_as_int(ix->u.ramp.stride, &st) && st == 1) c->ramp1_stores++;
    }
    break;
  default: break;
  }
  return true;
}

static census take_census(const ir_func *f) {
  census c;
  memset(&c, 0, sizeof c);
  ir_visitor v = {.expr = cen_expr_cb, .stmt = cen_stmt_cb, .ctx = &c};
  ir_visit_stmt(&v, f->body);
  for (int i = 0; i < f->nparams; i++)
    if (f->params[i]->ndim != 1) c.bad_access++;
  return c;
}

/* Runs orig and the lowered function on the same seeded inputs and compares
 * every output. Both get tensors of orig's (n-d) shapes: a 1-d param of the
 * lowered function accepts any shape with its element count, which is the
 * flat-view contract itself. (tu_equivalent would allocate flat tensors for
 * the lowered side, and allclose compares shapes too.) */
static bool same_outputs(const ir_func *orig, const ir_func *low, uint64_t seed, char *why, size_t n) {
  int np = orig->nparams;
  bool ok = false;
  ts_diag d;
  ts_diag_clear(&d);
  ir_tensor *x = ts_calloc((size_t)np, sizeof *x), *y = ts_calloc((size_t)np, sizeof *y);
  ck_assert(x && y);
  if (ir_tensors_for_func(orig, NULL, x, &d) || ir_tensors_for_func(orig, NULL, y, &d)) {
    snprintf(why, n, "tensors: %.1500s", d.msg);
    goto out;
  }
  for (int i = 0; i < orig->ninputs; i++) {
    ir_tensor_fill_random(&x[i], seed + (uint64_t)i);
    ir_tensor_fill_random(&y[i], seed + (uint64_t)i);
  }
  if (ir_interp_run(orig, x, &d)) {
    snprintf(why, n, "interpreting the original: %.1500s", d.msg);
    goto out;
  }
  if (ir_interp_run(low, y, &d)) {
    snprintf(why, n, "interpreting the lowered function: %.1500s", d.msg);
    goto out;
  }
  ok = true;
  for (int i = orig->ninputs; i < np && ok; i++) {
    double err = 0;
    if (!ir_tensor_allclose(&y[i], &x[i], 1e-4, 1e-5, &err)) {
      snprintf(why, n, "output %s differs (max abs err %g)", orig->params[i]->name, err);
      ok = false;
    }
  }
out:
  for (int i = 0; i < np; i++) {
    ir_tensor_free(&x[i]);
    ir_tensor_free(&y[i]);
  }
  ts_free(x);
  ts_free(y);
  return ok;
}

static void assert_same(const ir_func *orig, const ir_func *low) {
  char why[2048] = "";
  for (uint64_t seed = 1; seed <= 2; seed++) {
    if (!same_outputs(orig, low, seed, why, sizeof why)) {
      char *t = ftext(low);
      ck_abort_msg("lowered function differs from the original: %s\n%s", why, t);
    }
  }
}

static int guard_violations(const ir_func *f);

/* Lowers f for llvm, checks the lowered form's invariants and that it
 * computes what orig computes. */
static cg_lowered lower_checked(ts_arena *a, const ir_func *orig, const ir_func *f, census *out) {
  cg_target t = target("llvm");
  cg_lowered l;
  ts_diag_clear(&D);
  ts_status st = cg_lower(a, f, &t, &l, &D);
  ck_assert_msg(st == TS_OK, "lowering %s: %s", f->name, D.msg);
  ck_assert(l.func != NULL && l.orig == f);
  census c = take_census(l.func);
  if (c.blocks || c.bad_access) {
    char *s = ftext(l.func);
    ck_abort_msg("lowered %s still has %d blocks / %d non-flat accesses:\n%s", f->name, c.blocks,
                 c.bad_access, s);
  }
  ck_assert_int_eq(l.func->nparams, f->nparams);
  ck_assert_int_eq(l.func->ninputs, f->ninputs);
  for (int i = 0; i < f->nparams; i++) {
    int64_t n = ir_buffer_const_size(f->params[i]), m = ir_buffer_const_size(l.func->params[i]);
    ck_assert_int_eq(n, m);
    ck_assert_str_eq(l.func->params[i]->name, f->params[i]->name);
  }
  ck_assert_int_le(c.max_lanes, 64);
  int bad = guard_violations(l.func);
  if (bad) {
    char *s = ftext(l.func);
    ck_abort_msg("lowered %s has %d scalar loads under a lane-dependent guard:\n%s", f->name, bad, s);
  }
  assert_same(orig, l.func);
  if (out) *out = c;
  return l;
}

static sch_loop LP(sch_state *s, const char *block, int idx) {
  sch_loop ls[32];
  int n = tu_loops(s, block, ls, 32);
  ck_assert_msg(idx < n, "block %s has %d loops, wanted #%d", block, n, idx);
  return ls[idx];
}

static int nloops(sch_state *s, const char *block) {
  sch_loop ls[32];
  return tu_loops(s, block, ls, 32);
}

static sch_block BLK(const char *name) { return (sch_block){name}; }

static void split2(sch_state *s, sch_loop l, int64_t inner, sch_loop out[2]) {
  int64_t f[2] = {-1, inner};
  ts_diag_clear(&D);
  tu_ok(sch_split(s, l, 2, f, out, &D), &D);
}

/* Rebuilds s with the loop of var v changed to kind k (thread tag for
 * bound loops): for cg_check cases the schedule primitives would refuse. */
static ir_stmt *with_kind(ts_arena *a, ir_stmt *s, const ir_var *v, ir_for_kind k, const char *thread) {
  if (!s) return NULL;
  ir_stmt *n = ir_stmt_clone(a, s);
  switch (s->kind) {
  case IR_FOR:
    if (s->u.loop.var == v) {
      n->u.loop.kind = k;
      n->u.loop.thread = thread;
    }
    n->u.loop.body = with_kind(a, s->u.loop.body, v, k, thread);
    break;
  case IR_BLOCK_REALIZE: {
    ir_block *b = ir_block_clone(a, s->u.realize.block);
    b->body = with_kind(a, b->body, v, k, thread);
    n->u.realize.block = b;
    break;
  }
  case IR_SEQ:
    n->u.seq.stmts = TS_ANEWN(a, ir_stmt *, s->u.seq.n);
    for (int i = 0; i < s->u.seq.n; i++) n->u.seq.stmts[i] = with_kind(a, s->u.seq.stmts[i], v, k, thread);
    break;
  default:
    break;
  }
  return n;
}

static ir_func *func_with_body(ts_arena *a, const ir_func *f, ir_stmt *body) {
  ir_func *g = ts_arena_memdup(a, f, sizeof *f);
  g->body = body;
  return g;
}

/* The loop var of the idx-th FOR in pre-order. */
typedef struct nth_ctx {
  int want, seen;
  ir_var *v;
} nth_ctx;
static bool nth_cb(void *ctx, const ir_stmt *s) {
  nth_ctx *c = ctx;
  if (s->kind == IR_FOR && c->seen++ == c->want) c->v = s->u.loop.var;
  return c->v == NULL;
}
static ir_var *nth_loop(const ir_func *f, int idx) {
  nth_ctx c = {idx, 0, NULL};
  ir_visitor v = {.stmt = nth_cb, .ctx = &c};
  ir_visit_stmt(&v, f->body);
  ck_assert_msg(c.v != NULL, "no loop #%d", idx);
  return c.v;
}

/* ---- targets -------------------------------------------------------------------- */

START_TEST(target_valid) {
  static const struct {
    const char *in, *text;
    cg_target_kind kind;
    int vector_bits, num_cores;
  } cases[] = {
      {"llvm", "llvm", CG_TARGET_LLVM, 0, 0},
      {"  llvm  ", "llvm", CG_TARGET_LLVM, 0, 0},
      {"llvm -mtriple=aarch64-linux-gnu", "llvm -mtriple=aarch64-linux-gnu", CG_TARGET_LLVM, 128, 0},
      {"llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72", "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72",
       CG_TARGET_LLVM, 128, 0},
      {"llvm -mcpu=znver4", "llvm -mcpu=znver4", CG_TARGET_LLVM, 512, 0},
      {"llvm -mcpu=skylake-avx512", "llvm -mcpu=skylake-avx512", CG_TARGET_LLVM, 512, 0},
      {"llvm -mcpu=sapphirerapids", "llvm -mcpu=sapphirerapids", CG_TARGET_LLVM, 512, 0},
      {"llvm -mcpu=znver3", "llvm -mcpu=znver3", CG_TARGET_LLVM, 256, 0},
      {"llvm -mcpu=haswell", "llvm -mcpu=haswell", CG_TARGET_LLVM, 256, 0},
      {"llvm -mattr=+avx2,+fma", "llvm -mattr=+avx2,+fma", CG_TARGET_LLVM, 256, 0},
      {"llvm -mattr=+avx512f,+avx512bw", "llvm -mattr=+avx512f,+avx512bw", CG_TARGET_LLVM, 512, 0},
      {"llvm -mcpu=znver4 -mattr=-avx512f", "llvm -mcpu=znver4 -mattr=-avx512f", CG_TARGET_LLVM, 256, 0},
      {"llvm -mcpu=x86-64", "llvm -mcpu=x86-64", CG_TARGET_LLVM, 128, 0},
      {"llvm -mtriple=x86_64-linux-gnu", "llvm -mtriple=x86_64-linux-gnu", CG_TARGET_LLVM, 128, 0},
      {"llvm -num-cores=2", "llvm -num-cores=2", CG_TARGET_LLVM, 0, 2},
      {"llvm -mcpu=native", "llvm -mcpu=native", CG_TARGET_LLVM, 0, 0}, /* the backend asks the host */
      {"llvm -mtriple=arm64-apple-darwin", "llvm -mtriple=arm64-apple-darwin", CG_TARGET_LLVM, 128, 0},
      /* canonical order is triple, cpu, attrs, cores whatever the input order */
      {"llvm -num-cores=4 -mattr=+avx2 -mcpu=haswell -mtriple=x86_64-linux-gnu",
       "llvm -mtriple=x86_64-linux-gnu -mcpu=haswell -mattr=+avx2 -num-cores=4", CG_TARGET_LLVM, 256, 4},
      {"cuda -arch=sm_90", "cuda -arch=sm_90", CG_TARGET_CUDA, 0, 0},
      {"cuda -arch=sm_90a", "cuda -arch=sm_90a", CG_TARGET_CUDA, 0, 0},
      {"cuda", "cuda", CG_TARGET_CUDA, 0, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    cg_target t = target(cases[i].in);
    ck_assert_msg(t.kind == cases[i].kind, "%s: kind", cases[i].in);
    ck_assert_str_eq(t.text, cases[i].text);
    ck_assert_msg(t.vector_bits == cases[i].vector_bits, "%s: vector_bits %d, want %d", cases[i].in,
                  t.vector_bits, cases[i].vector_bits);
    ck_assert_int_eq(t.num_cores, cases[i].num_cores);
    /* the canonical text parses back to itself */
    cg_target u = target(t.text);
    ck_assert_str_eq(u.text, t.text);
    ck_assert_int_eq(u.vector_bits, t.vector_bits);
  }
  cg_target t = target("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72 -mattr=+neon");
  ck_assert_str_eq(t.triple, "aarch64-linux-gnu");
  ck_assert_str_eq(t.cpu, "cortex-a72");
  ck_assert_str_eq(t.attrs, "+neon");
  t = target("cuda -arch=sm_80");
  ck_assert_str_eq(t.arch, "sm_80");
}
END_TEST

START_TEST(target_invalid) {
  static const struct {
    const char *in;
    const char *need[3];
  } cases[] = {
      {"", {"valid kinds", "llvm", "cuda"}},
      {"   ", {"valid kinds", NULL}},
      {"opencl", {"unknown kind 'opencl'", "llvm, cuda", NULL}},
      {"llvmx -mcpu=a", {"unknown kind 'llvmx'", NULL}},
      {"llvm -march=x86", {"unknown key '-march'", "-mtriple", "-num-cores"}},
      {"llvm -arch=sm_90", {"unknown key '-arch'", "-mcpu", NULL}},
      {"cuda -mcpu=znver4", {"unknown key '-mcpu'", "-arch", NULL}},
      {"llvm mcpu=znver4", {"expected -key=value", NULL}},
      {"llvm -mcpu", {"-mcpu needs a value", NULL}},
      {"llvm -mcpu=", {"-mcpu needs a value", NULL}},
      {"llvm -mcpu=a -mcpu=b", {"given twice", NULL}},
      {"llvm -num-cores=0", {"positive integer", NULL}},
      {"llvm -num-cores=two", {"positive integer", NULL}},
      {"llvm -num-cores=-3", {"positive integer", NULL}},
      {"cuda -arch=90", {"sm_XY", NULL}},
      {"cuda -arch=sm_", {"sm_XY", NULL}},
      {"llvm -mcpu=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", {"too long", NULL}},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    cg_target t;
    ts_diag_clear(&D);
    ts_status st = cg_target_parse(cases[i].in, &t, &D);
    ck_assert_msg(st == TS_EINVAL, "'%s' parsed (%s)", cases[i].in, ts_strerror(st));
    for (int j = 0; j < 3 && cases[i].need[j]; j++)
      ck_assert_msg(strstr(D.msg, cases[i].need[j]) != NULL, "'%s': message '%s' lacks '%s'", cases[i].in,
                    D.msg, cases[i].need[j]);
  }
  cg_target t;
  ck_assert_int_eq(cg_target_parse(NULL, &t, NULL), TS_EINVAL);
  /* every field at its longest: the canonical text would not fit */
  char big[1200];
  int k = snprintf(big, sizeof big, "llvm -mtriple=");
  for (int i = 0; i < 127; i++) big[k++] = 't';
  k += snprintf(big + k, sizeof big - (size_t)k, " -mcpu=");
  for (int i = 0; i < 63; i++) big[k++] = 'c';
  k += snprintf(big + k, sizeof big - (size_t)k, " -mattr=");
  for (int i = 0; i < 511; i++) big[k++] = 'a';
  snprintf(big + k, sizeof big - (size_t)k, " -num-cores=64");
  ts_diag_clear(&D);
  ck_assert_int_eq(cg_target_parse(big, &t, &D), TS_EINVAL);
  ck_assert_msg(strstr(D.msg, "too long") != NULL, "%s", D.msg);
}
END_TEST

START_TEST(target_host) {
  ck_assert(cg_target_is_host(&(cg_target){.kind = CG_TARGET_LLVM}));
  cg_target t = target("llvm -mcpu=znver4");
  ck_assert(cg_target_is_host(&t));
  t = target("cuda -arch=sm_90");
  ck_assert(!cg_target_is_host(&t));
#if defined(__x86_64__) && defined(__linux__)
  t = target("llvm -mtriple=x86_64-linux-gnu");
  ck_assert(cg_target_is_host(&t));
  t = target("llvm -mtriple=x86_64-unknown-linux-gnu");
  ck_assert(cg_target_is_host(&t));
  t = target("llvm -mtriple=aarch64-linux-gnu");
  ck_assert(!cg_target_is_host(&t));
#elif defined(__aarch64__) && defined(__linux__)
  t = target("llvm -mtriple=aarch64-linux-gnu");
  ck_assert(cg_target_is_host(&t));
  t = target("llvm -mtriple=x86_64-linux-gnu");
  ck_assert(!cg_target_is_host(&t));
#endif
}
END_TEST

/* ---- lowering: every workload, unscheduled ---------------------------------------- */

START_TEST(lower_every_workload) {
  for (int i = 0; i < ir_workload_count(); i++) {
    const ir_workload *w = ir_workload_at(i);
    ts_arena *a = ts_arena_new();
    ir_func *f = tu_workload(a, w->name);
    census c;
    lower_checked(a, f, f, &c);
    ck_assert_msg(c.stores > 0 && c.loops > 0, "%s: no stores or loops", w->name);
    ck_assert_int_eq(c.vec_stores, 0);
    /* every block-allocated intermediate is one allocate at the top */
    int nalloc = f->body->u.realize.block->nalloc;
    ck_assert_int_eq(c.allocs, nalloc);
    ts_arena_free(a);
  }
}
END_TEST

/* Something scheduled in every workload: for each block, parallel on its
 * outermost loop and split + vectorize of its innermost, wherever the
 * primitives accept them (they refuse reduction loops, for instance). */
START_TEST(lower_every_workload_scheduled) {
  int vectorized = 0;
  for (int i = 0; i < ir_workload_count(); i++) {
    const ir_workload *w = ir_workload_at(i);
    ts_arena *a = ts_arena_new();
    ir_func *orig;
    sch_state *s = tu_schedule(a, w->name, &orig);
    sch_block *blocks;
    int nb;
    ts_diag_clear(&D);
    tu_ok(sch_get_child_blocks(s, BLK("root"), &blocks, &nb, &D), &D);
    const char *names[32];
    for (int b = 0; b < nb && b < 32; b++) names[b] = blocks[b].name;
    for (int b = 0; b < nb && b < 32; b++) {
      int n = nloops(s, names[b]);
      if (n == 0) continue;
      sch_loop inner = LP(s, names[b], n - 1), parts[2];
      int64_t f[2] = {-1, 4};
      ts_diag_clear(&D);
      if (sch_split(s, inner, 2, f, parts, &D) == TS_OK) {
        ts_diag_clear(&D);
        if (sch_vectorize(s, parts[1], &D) == TS_OK) vectorized++;
      }
      ts_diag_clear(&D);
      (void)sch_parallel(s, LP(s, names[b], 0), &D);
    }
    lower_checked(a, orig, sch_func(s), NULL);
    sch_free(s);
    ts_arena_free(a);
  }
  ck_assert_int_gt(vectorized, 5);
}
END_TEST

/* ---- lowering: targeted schedules -------------------------------------------------- */

START_TEST(lower_add_vectorized) {
  static const char *const specs[] = {"add:m=6,n=16", "relu:m=5,n=32", "mul:m=3,n=8"};
  for (int k = 0; k < 3; k++) {
    ts_arena *a = ts_arena_new();
    ir_func *orig;
    sch_state *s = tu_schedule(a, specs[k], &orig);
    const char *blk = k == 1 ? "Y" : "C";
    sch_loop parts[2];
    split2(s, LP(s, blk, 1), 8, parts);
    tu_ok(sch_vectorize(s, parts[1], &D), &D);
    tu_ok(sch_parallel(s, LP(s, blk, 0), &D), &D);
    census c;
    cg_lowered l = lower_checked(a, orig, sch_func(s), &c);
    if (c.vec_stores != 1 || c.ramp1_stores != 1 || c.vec_loops != 0) {
      char *t = ftext(l.func);
      ck_abort_msg("%s: expected one ramp-indexed vector store and no vectorized loop:\n%s", specs[k], t);
    }
    ck_assert_int_eq(c.par_loops, 1);
    ck_assert_int_eq(c.ramp1_loads, k == 1 ? 1 : 2);
    ck_assert_int_eq(c.max_lanes, 8);
    ck_assert_int_eq(c.ifs, 0); /* the split divides: no predicate */
    sch_free(s);
    ts_arena_free(a);
  }
}
END_TEST

/* Vectorizing the whole inner loop (no split), and a vectorized loop of
 * one lane. */
START_TEST(lower_vectorize_whole_and_unit) {
  ts_arena *a = ts_arena_new();
  ir_func *orig;
  sch_state *s = tu_schedule(a, "add:m=3,n=16", &orig);
  tu_ok(sch_vectorize(s, LP(s, "C", 1), &D), &D);
  census c;
  lower_checked(a, orig, sch_func(s), &c);
  ck_assert_int_eq(c.ramp1_stores, 1);
  ck_assert_int_eq(c.max_lanes, 16);
  sch_free(s);

  s = tu_schedule(a, "add:m=3,n=5", &orig);
  sch_loop parts[2];
  split2(s, LP(s, "C", 1), 1, parts);
  tu_ok(sch_vectorize(s, parts[1], &D), &D);
  lower_checked(a, orig, sch_func(s), &c);
  ck_assert_int_eq(c.vec_loops, 0);
  ck_assert_int_eq(c.vec_stores, 0);
  ck_assert_int_eq(c.loops, 2);
  sch_free(s);
  ts_arena_free(a);
}
END_TEST

/* matmul: j split and vectorized below k (reorder), so the init's
 * condition (k == 0) is lane-invariant and the update is vector code. */
START_TEST(lower_matmul_vectorized_j) {
  ts_arena *a = ts_arena_new();
  ir_func *orig;
  sch_state *s = tu_schedule(a, "matmul:m=4,n=16,k=5", &orig);
  sch_loop i = LP(s, "C", 0), j = LP(s, "C", 1), k = LP(s, "C", 2), jp[2];
  split2(s, j, 8, jp);
  sch_loop order[4] = {i, jp[0], k, jp[1]};
  tu_ok(sch_reorder(s, 4, order, &D), &D);
  tu_ok(sch_vectorize(s, jp[1], &D), &D);
  tu_ok(sch_parallel(s, i, &D), &D);
  census c;
  cg_lowered l = lower_checked(a, orig, sch_func(s), &c);
  if (c.vec_loops != 0 || c.ramp1_stores != 2 || c.ifs != 1 || c.bcast_loads != 1) {
    char *t = ftext(l.func);
    ck_abort_msg("matmul j-vectorized: unexpected form:\n%s", t);
  }
  sch_free(s);
  ts_arena_free(a);
}
END_TEST

/* The fallback: a vectorized loop holding an inner reduction loop stays a
 * loop of kind vectorized (serial plus a hint) and still computes right. */
START_TEST(lower_vectorized_fallback_inner_loop) {
  ts_arena *a = ts_arena_new();
  ir_func *orig;
  sch_state *s = tu_schedule(a, "matmul:m=4,n=16,k=5", &orig);
  sch_loop jp[2];
  split2(s, LP(s, "C", 1), 4, jp);
  tu_ok(sch_vectorize(s, jp[1], &D), &D);
  census c;
  cg_lowered l = lower_checked(a, orig, sch_func(s), &c);
  if (c.vec_loops != 1 || c.vec_stores != 0) {
    char *t = ftext(l.func);
    ck_abort_msg("expected the vectorized loop to stay a loop:\n%s", t);
  }
  sch_free(s);
  ts_arena_free(a);
}
END_TEST

/* A vectorized reduction loop (reduce_sum's inner loop cannot be vectorized
 * by the primitive, so it is marked by hand): the store index does not move
 * per lane, so the loop stays. */
START_TEST(lower_vectorized_fallback_reduction) {
  ts_arena *a = ts_arena_new();
  ir_func *f = tu_workload(a, "reduce_sum:m=3,n=8");
  ir_var *inner = nth_loop(f, 1);
  ir_func *g = func_with_body(a, f, with_kind(a, f->body, inner, IR_FOR_VECTORIZED, NULL));
  census c;
  lower_checked(a, f, g, &c);
  ck_assert_int_eq(c.vec_loops, 1);
  ck_assert_int_eq(c.vec_stores, 0);
  ts_arena_free(a);
}
END_TEST

/* transpose: the inner loop vectorized gives a contiguous store and a
 * strided load (ramp with stride m). */
START_TEST(lower_transpose_strided) {
  ts_arena *a = ts_arena_new();
  ir_func *orig;
  sch_state *s = tu_schedule(a, "transpose:m=8,n=6", &orig);
  tu_ok(sch_vectorize(s, LP(s, "B", 1), &D), &D);
  census c;
  cg_lowered l = lower_checked(a, orig, sch_func(s), &c);
  if (c.vec_stores != 1 || c.ramp1_stores + c.strided_loads != 2 - (c.ramp1_loads ? 1 : 0)) {
    char *t = ftext(l.func);
    ck_abort_msg("transpose: unexpected form:\n%s", t);
  }
  ck_assert_int_eq(c.strided_loads + (c.vec_stores - c.ramp1_stores), 1);
  sch_free(s);
  ts_arena_free(a);
}
END_TEST

/* A prime extent split by 4: the block predicate becomes an if, and the
 * vectorized lanes would need it per lane, so the loop falls back — in the
 * tail only: lower_part.c partitions the outer loop, whose main part (3 of 4
 * iterations) has no guard and lowers to lanes. */
START_TEST(lower_nondivisible_split) {
  ts_arena *a = ts_arena_new();
  ir_func *orig;
  sch_state *s = tu_schedule(a, "add:m=3,n=13", &orig);
  sch_loop parts[2];
  split2(s, LP(s, "C", 1), 4, parts);
  census c;
  lower_checked(a, orig, sch_func(s), &c);
  ck_assert_int_eq(c.ifs, 1);
  tu_ok(sch_vectorize(s, parts[1], &D), &D);
  lower_checked(a, orig, sch_func(s), &c);
  ck_assert_int_eq(c.ifs, 1);
  ck_assert_int_eq(c.vec_loops, 1);
  sch_free(s);

  /* a split of the reduction loop: the init test is on both parts of the
   * partitioned k loop (main k_o < 2 without the guard, tail with it) */
  s = tu_schedule(a, "matmul:m=3,n=4,k=7", &orig);
  split2(s, LP(s, "C", 2), 3, parts);
  lower_checked(a, orig, sch_func(s), &c);
  ck_assert_int_eq(c.ifs, 3);
  sch_free(s);
  ts_arena_free(a);
}
END_TEST

/* Both loops of a block split with tails (13 = 3*4 + 1 rows and cols): one
 * guard `i0*4 + i1 < 13 && j0*4 + j1 < 13`. The rows loop partitions on
 * its conjunct and the cols loop inside its main part on the other, so the
 * main x main part has no guard and its vectorized cols loop lowers to
 * lanes (before, the && hid both tails and every lane stayed guarded). */
START_TEST(lower_two_tails) {
  ts_arena *a = ts_arena_new();
  ir_func *orig;
  sch_state *s = tu_schedule(a, "add:m=13,n=13", &orig);
  sch_loop rows[2], cols[2];
  split2(s, LP(s, "C", 0), 4, rows);
  split2(s, LP(s, "C", 2), 4, cols);
  tu_ok(sch_vectorize(s, cols[1], &D), &D);
  census c;
  cg_lowered l = lower_checked(a, orig, sch_func(s), &c);
  if (c.vec_stores < 1 || c.ramp1_stores < 1) {
    char *t = ftext(l.func);
    ck_abort_msg("two tails: no contiguous vector store in the main part:\n%s", t);
  }
  sch_free(s);
  ts_arena_free(a);
}
END_TEST

/* The init rule after reorder: k outermost, the init runs at k == 0 for
 * every (i, j) before its first update. */
START_TEST(lower_reduction_reordered) {
  ts_arena *a = ts_arena_new();
  ir_func *orig;
  sch_state *s = tu_schedule(a, "matmul:m=3,n=5,k=4", &orig);
  sch_loop i = LP(s, "C", 0), j = LP(s, "C", 1), k = LP(s, "C", 2);
  sch_loop order[3] = {k, j, i};
  tu_ok(sch_reorder(s, 3, order, &D), &D);
  census c;
  lower_checked(a, orig, sch_func(s), &c);
  ck_assert_int_eq(c.ifs, 1);
  sch_free(s);

  s = tu_schedule(a, "conv2d_nchw:n=1,c=2,h=5,w=5,k=3", &orig);
  int n = nloops(s, "Y");
  sch_loop all[8], perm[8];
  for (int q = 0; q < n; q++) all[q] = LP(s, "Y", q);
  for (int q = 0; q < n; q++) perm[q] = all[n - 1 - q];
  ts_diag_clear(&D);
  tu_ok(sch_reorder(s, n, perm, &D), &D);
  lower_checked(a, orig, sch_func(s), NULL);
  sch_free(s);
  ts_arena_free(a);
}
END_TEST

START_TEST(lower_kinds_and_annotations) {
  ts_arena *a = ts_arena_new();
  ir_func *orig;
  sch_state *s = tu_schedule(a, "softmax:m=4,n=9", &orig);
  tu_ok(sch_parallel(s, LP(s, "Y", 0), &D), &D);
  tu_ok(sch_unroll(s, LP(s, "Y", 1), &D), &D);
  ir_annot ann = {.key = "pragma_auto_unroll_max_step", .kind = IR_ANN_INT, .v.i = 16};
  tu_ok(sch_annotate_loop(s, LP(s, "e", 0), ann, &D), &D);
  census c;
  lower_checked(a, orig, sch_func(s), &c);
  ck_assert_int_eq(c.par_loops, 1);
  ck_assert_int_eq(c.unroll_loops, 1);
  ck_assert(c.annot_seen);
  ck_assert_int_eq(c.allocs, 3);
  sch_free(s);
  ts_arena_free(a);
}
END_TEST

/* fuse + split of the fused loop, then vectorize: the flat index of a
 * fused loop is contiguous again. */
START_TEST(lower_fused) {
  ts_arena *a = ts_arena_new();
  ir_func *orig;
  sch_state *s = tu_schedule(a, "add:m=4,n=6", &orig);
  sch_loop ij[2] = {LP(s, "C", 0), LP(s, "C", 1)}, fused, parts[2];
  tu_ok(sch_fuse(s, 2, ij, &fused, &D), &D);
  split2(s, fused, 8, parts);
  tu_ok(sch_vectorize(s, parts[1], &D), &D);
  tu_ok(sch_parallel(s, parts[0], &D), &D);
  census c;
  cg_lowered l = lower_checked(a, orig, sch_func(s), &c);
  if (c.ramp1_stores != 1) {
    char *t = ftext(l.func);
    ck_abort_msg("fused add: expected a contiguous vector store:\n%s", t);
  }
  sch_free(s);
  ts_arena_free(a);
}
END_TEST

/* cache_write + reverse_compute_at of the copy-back, storage_align of the
 * cache: the local buffer's row stride is padded (7 -> 9 for factor 8,
 * offset 1), so it has 4*9 elements. */
START_TEST(lower_cache_write_compute_at) {
  ts_arena *a = ts_arena_new();
  ir_func *orig;
  sch_state *s = tu_schedule(a, "matmul:m=4,n=7,k=5", &orig);
  sch_block cb;
  tu_ok(sch_cache_write(s, BLK("C"), 0, "local", 0, NULL, &cb, &D), &D);
  tu_ok(sch_storage_align(s, BLK("C"), 0, 0, 8, 1, &D), &D);
  census c;
  cg_lowered l = lower_checked(a, orig, sch_func(s), &c);
  ck_assert_int_eq(c.allocs, 1);
  const ir_stmt *al = l.func->body;
  while (al->kind != IR_ALLOCATE) {
    ck_assert(al->kind == IR_SEQ && al->u.seq.n >= 1);
    al = al->u.seq.stmts[0];
  }
  int64_t size = -1;
  ck_assert(ir_as_int(al->u.alloc.buf->shape[0], &size));
  ck_assert_int_eq(size, 4 * 9);
  ck_assert_str_eq(al->u.alloc.buf->scope, "local");

  ts_diag_clear(&D);
  tu_ok(sch_reverse_compute_at(s, cb, LP(s, "C", 0), true, -1, &D), &D);
  lower_checked(a, orig, sch_func(s), &c);
  ck_assert_int_eq(c.allocs, 1);
  ck_assert_int_eq(c.loops, 4); /* i { j { k } ax1 }: the unit loop ax0 is folded */
  /* the copy-back's row in lanes: contiguous on both sides despite the padding */
  int nl = nloops(s, cb.name);
  tu_ok(sch_vectorize(s, LP(s, cb.name, nl - 1), &D), &D);
  lower_checked(a, orig, sch_func(s), &c);
  ck_assert_int_eq(c.ramp1_stores, 1);
  ck_assert_int_eq(c.ramp1_loads, 1);
  sch_free(s);

  /* cache_read + compute_at of the copy under the consumer's loop */
  s = tu_schedule(a, "matmul:m=4,n=6,k=5", &orig);
  tu_ok(sch_cache_read(s, BLK("C"), 0, "local", 0, NULL, &cb, &D), &D);
  ts_diag_clear(&D);
  tu_ok(sch_compute_at(s, cb, LP(s, "C", 1), true, -1, &D), &D);
  lower_checked(a, orig, sch_func(s), &c);
  ck_assert_int_eq(c.allocs, 1);
  sch_free(s);
  ts_arena_free(a);
}
END_TEST

/* A non-divisible split of the vectorized axis: the update and init blocks
 * store into the compacted accumulator tile and run without their predicate
 * (the overhang lands in the tile), so the j loop widens to lanes with only
 * the loads of B guarded; the copy-back to C keeps its guard. Outputs match
 * the interpreter (lower_checked). Without compaction (the cache stays at
 * root, full size) the rule must not fire: the overhang would alias the next
 * row. */
START_TEST(lower_overhang_tile) {
  ts_arena *a = ts_arena_new();
  ir_func *orig;
  sch_state *s = tu_schedule(a, "matmul:m=6,n=37,k=5", &orig);
  sch_loop i2[2], j2[2];
  split2(s, LP(s, "C", 0), 3, i2);
  split2(s, LP(s, "C", 2), 16, j2); /* 37 = 2 * 16 + 5: the last tile overhangs */
  sch_loop order[5] = {i2[0], j2[0], LP(s, "C", 4), i2[1], j2[1]};
  tu_ok(sch_reorder(s, 5, order, &D), &D);
  sch_block cb, init;
  tu_ok(sch_cache_write(s, BLK("C"), 0, "local", 0, NULL, &cb, &D), &D);
  ts_diag_clear(&D);
  tu_ok(sch_reverse_compute_at(s, cb, j2[0], true, -1, &D), &D);
  tu_ok(sch_vectorize(s, j2[1], &D), &D);
  ts_diag_clear(&D);
  tu_ok(sch_decompose_reduction(s, BLK("C"), LP(s, "C", 2), &init, &D), &D);
  census c;
  lower_checked(a, orig, sch_func(s), &c);
  ck_assert_int_eq(c.vec_loops, 0);    /* both vectorized loops became lanes */
  ck_assert_int_ge(c.ramp1_stores, 2); /* init and update store whole vectors */
  ck_assert_int_ge(c.ramp1_loads, 2);  /* the tile and B (masked) */
  sch_free(s);

  /* the same without the tile: C_local at root, declared [6, 37] */
  s = tu_schedule(a, "matmul:m=6,n=37,k=5", &orig);
  split2(s, LP(s, "C", 1), 16, j2);
  tu_ok(sch_cache_write(s, BLK("C"), 0, "local", 0, NULL, &cb, &D), &D);
  tu_ok(sch_vectorize(s, j2[1], &D), &D);
  lower_checked(a, orig, sch_func(s), &c);
  ck_assert_int_ge(c.ifs, 1); /* the guard stays */
  sch_free(s);
  ts_arena_free(a);
}
END_TEST

START_TEST(lower_decompose_reduction) {
  ts_arena *a = ts_arena_new();
  ir_func *orig;
  sch_state *s = tu_schedule(a, "matmul:m=4,n=8,k=5", &orig);
  sch_block init;
  ts_status st = sch_decompose_reduction(s, BLK("C"), LP(s, "C", 1), &init, &D);
  ck_assert_msg(st == TS_OK, "decompose_reduction: %s", D.msg);
  census c;
  lower_checked(a, orig, sch_func(s), &c);
  ck_assert_int_eq(c.ifs, 0); /* the init is its own loop nest, no test */
  /* now the init's inner loop vectorizes on its own */
  int n = nloops(s, init.name);
  tu_ok(sch_vectorize(s, LP(s, init.name, n - 1), &D), &D);
  lower_checked(a, orig, sch_func(s), &c);
  ck_assert_int_eq(c.ramp1_stores, 1);
  sch_free(s);
  ts_arena_free(a);
}
END_TEST

/* Loads under a lane-dependent guard (a select with a vector condition, or
 * the right side of a vector && / ||) must be vector loads, which backends
 * mask with the guard; a scalar load there would run even when every lane's
 * guard is false. Counts the violations. */
static int unguarded_scalar_loads(const ir_expr *e, bool guarded) {
  if (!e) return 0;
  switch (e->kind) {
  case IR_LOAD:
    return (guarded && e->dtype.lanes == 1) + unguarded_scalar_loads(e->u.load.idx[0], guarded);
  case IR_SELECT: {
    bool g = guarded || e->u.sel.cond->dtype.lanes > 1;
    return unguarded_scalar_loads(e->u.sel.cond, guarded) + unguarded_scalar_loads(e->u.sel.t, g) +
           unguarded_scalar_loads(e->u.sel.f, g);
  }
  case IR_NOT: return unguarded_scalar_loads(e->u.un.a, guarded);
  case IR_CAST: return unguarded_scalar_loads(e->u.cast.value, guarded);
  case IR_BROADCAST: return unguarded_scalar_loads(e->u.bcast.value, guarded);
  case IR_RAMP:
    return unguarded_scalar_loads(e->u.ramp.base, guarded) + unguarded_scalar_loads(e->u.ramp.stride, guarded);
  case IR_CALL: {
    int n = 0;
    for (int i = 0; i < e->u.call.nargs; i++) n += unguarded_scalar_loads(e->u.call.args[i], guarded);
    return n;
  }
  default:
    if (ir_is_binop(e->kind)) {
      bool lazy = (e->kind == IR_AND || e->kind == IR_OR) && e->u.bin.a->dtype.lanes > 1;
      return unguarded_scalar_loads(e->u.bin.a, guarded) + unguarded_scalar_loads(e->u.bin.b, guarded || lazy);
    }
    return 0;
  }
}

static bool guard_cb(void *ctx, const ir_stmt *s) {
  int *n = ctx;
  if (s->kind == IR_STORE) *n += unguarded_scalar_loads(s->u.store.value, false);
  return true;
}

static int guard_violations(const ir_func *f) {
  int n = 0;
  ir_visitor v = {.stmt = guard_cb, .ctx = &n};
  ir_visit_stmt(&v, f->body);
  return n;
}

/* conv2d with padding, the output's innermost spatial loop vectorized: the
 * lane-dependent padding guard becomes a vector select, the guarded input
 * load a contiguous vector load under it, and the weight (invariant in the
 * lane, but guarded) a load with a broadcast index rather than a scalar. */
START_TEST(lower_padded_select) {
  static const char *const specs[] = {"conv2d_nchw:n=1,c=2,h=6,w=8,k=2", "max_pool2d:n=1,c=2,h=9,w=16"};
  for (int sp = 0; sp < 2; sp++) {
    ts_arena *a = ts_arena_new();
    ir_func *orig;
    sch_state *s = tu_schedule(a, specs[sp], &orig);
    sch_loop ls[8];
    int n = tu_loops(s, "Y", ls, 8);
    /* q (the 4th loop) to the innermost position, then vectorize it */
    sch_loop order[8];
    int m = 0;
    for (int q = 0; q < n; q++)
      if (q != 3) order[m++] = ls[q];
    order[m++] = ls[3];
    ts_diag_clear(&D);
    tu_ok(sch_reorder(s, n, order, &D), &D);
    tu_ok(sch_vectorize(s, ls[3], &D), &D);
    census c;
    cg_lowered l = lower_checked(a, orig, sch_func(s), &c);
    int bad = guard_violations(l.func);
    if (c.vec_loops != 0 || c.vec_stores < 1 || bad) {
      char *t = ftext(l.func);
      ck_abort_msg("%s: expected vector code with guarded vector loads (%d scalar ones):\n%s", specs[sp], bad, t);
    }
    sch_free(s);
    ts_arena_free(a);
  }
}
END_TEST

/* Hand-built: an allocated buffer with explicit strides and an element
 * offset, and a param with storage_align (ignored: params keep their
 * compact layout). */
START_TEST(lower_explicit_strides) {
  ts_arena *a = ts_arena_new();
  ir_func *f = tu_workload(a, "softmax:m=3,n=5");
  ir_block *root = ir_block_clone(a, f->body->u.realize.block);
  root->allocs = ts_arena_memdup(a, root->allocs, sizeof *root->allocs * (size_t)root->nalloc);
  ir_buffer *e = NULL;
  int ei = -1;
  for (int i = 0; i < root->nalloc; i++)
    if (strcmp(root->allocs[i]->name, "e") == 0) ei = i;
  ck_assert_int_ge(ei, 0);
  e = ts_arena_memdup(a, root->allocs[ei], sizeof *e);
  e->strides = TS_ANEWN(a, ir_expr *, 2);
  e->strides[0] = ir_i64(a, 1);
  e->strides[1] = ir_i64(a, 4); /* column-major with padding */
  e->elem_offset = ir_i64(a, 2);
  ir_stmt *body = ir_subst_buffer(a, root->body, root->allocs[ei], e);
  root->allocs[ei] = e;
  root->body = body;
  ir_stmt *rs = ir_stmt_clone(a, f->body);
  rs->u.realize.block = root;
  ir_func *g = func_with_body(a, f, rs);
  lower_checked(a, f, g, NULL);
  ts_arena_free(a);
}
END_TEST

/* A function given already in lowered shape (an allocate statement, flat
 * buffers) lowers to itself, structurally. */
START_TEST(lower_idempotent) {
  ts_arena *a = ts_arena_new();
  ir_func *orig;
  sch_state *s = tu_schedule(a, "layernorm:m=3,n=8", &orig);
  sch_loop parts[2];
  split2(s, LP(s, "Y", 1), 4, parts);
  tu_ok(sch_vectorize(s, parts[1], &D), &D);
  cg_lowered l1 = lower_checked(a, orig, sch_func(s), NULL);
  census c1 = take_census(l1.func), c2;
  cg_lowered l2 = lower_checked(a, orig, l1.func, &c2);
  ck_assert_int_eq(c1.allocs, c2.allocs);
  ck_assert_int_eq(c1.vec_stores, c2.vec_stores);
  ck_assert_int_eq(c1.loops, c2.loops);
  (void)l2;
  sch_free(s);
  ts_arena_free(a);
}
END_TEST

/* Symbolic shapes: the flat sizes are products of syms; binding the syms
 * afterwards (the interpreter cannot infer them from flat params) runs. */
START_TEST(lower_symbolic) {
  ts_arena *a = ts_arena_new();
  static const char src[] =
      "kernel addsym(A: f32[M, N], B: f32[M, N]) -> C: f32[M, N] {\n"
      "  C[i, j] = A[i, j] + B[i, j] * 2.0\n"
      "}\n"
      "kernel mmsym(A: f32[M, K], B: f32[K, N]) -> C: f32[M, N] {\n"
      "  C[i, j] += A[i, k] * B[k, j]\n"
      "}\n";
  ir_module *m = ir_module_new();
  ts_diag_clear(&D);
  ck_assert_msg(ir_parse_module(m, src, sizeof src - 1, "<sym>", &D) == TS_OK, "%s", D.msg);
  cg_target t = target("llvm");
  for (int fi = 0; fi < 2; fi++) {
    ir_func *f = m->funcs[fi].u.prim;
    ck_assert_int_ge(f->nsyms, 2);
    sch_state *s = sch_create(f, 1, &D);
    ck_assert(s != NULL);
    sch_loop ls[8], parts[2];
    int n = tu_loops(s, "C", ls, 8);
    ck_assert_int_ge(n, 2);
    split2(s, ls[1], 4, parts); /* a predicate: N is not known to divide */
    ts_diag_clear(&D);
    if (fi == 0) tu_ok(sch_vectorize(s, parts[1], &D), &D);
    cg_lowered l;
    ts_diag_clear(&D);
    ck_assert_msg(cg_lower(a, sch_func(s), &t, &l, &D) == TS_OK, "%s", D.msg);
    census c = take_census(l.func);
    ck_assert_int_eq(c.blocks, 0);
    ck_assert_int_eq(c.bad_access, 0);
    ck_assert_int_eq(l.func->nsyms, f->nsyms);
    const char *names[3];
    int64_t vals[3] = {3, 7, 5};
    for (int i = 0; i < f->nsyms && i < 3; i++) names[i] = f->syms[i]->name;
    ir_func *fb = ir_func_bind_syms(a, f, f->nsyms, names, vals, &D);
    ir_func *lb = ir_func_bind_syms(a, l.func, f->nsyms, names, vals, &D);
    ck_assert_msg(fb && lb, "bind syms: %s", D.msg);
    assert_same(fb, lb);
    sch_free(s);
  }
  ir_module_free(m);
  ts_arena_free(a);
}
END_TEST

/* A vectorized loop that does not start at 0 (hand-built): lanes are
 * ramp(min, 1, L). */
static ir_stmt *with_range(ts_arena *a, ir_stmt *s, const ir_var *v, int64_t min, int64_t ext, ir_for_kind k) {
  if (!s) return NULL;
  ir_stmt *n = ir_stmt_clone(a, s);
  if (s->kind == IR_FOR) {
    if (s->u.loop.var == v) {
      n->u.loop.min = ir_i64(a, min);
      n->u.loop.extent = ir_i64(a, ext);
      n->u.loop.kind = k;
    }
    n->u.loop.body = with_range(a, s->u.loop.body, v, min, ext, k);
  } else if (s->kind == IR_BLOCK_REALIZE) {
    ir_block *b = ir_block_clone(a, s->u.realize.block);
    b->body = with_range(a, b->body, v, min, ext, k);
    n->u.realize.block = b;
  }
  return n;
}

START_TEST(lower_vector_offset_min) {
  ts_arena *a = ts_arena_new();
  ir_func *f = tu_workload(a, "relu:m=3,n=12");
  ir_var *j = nth_loop(f, 1);
  ir_func *serial = func_with_body(a, f, with_range(a, f->body, j, 3, 8, IR_FOR_SERIAL));
  ir_func *vec = func_with_body(a, f, with_range(a, f->body, j, 3, 8, IR_FOR_VECTORIZED));
  census c;
  cg_lowered l = lower_checked(a, serial, vec, &c);
  ck_assert_int_eq(c.ramp1_stores, 1);
  ck_assert_int_eq(c.vec_loops, 0);
  char *t = ftext(l.func);
  ck_assert_msg(strstr(t, "ramp(i * 12 + 3, 1, 8)") != NULL, "%s", t);
  ts_free(t);
  ts_arena_free(a);
}
END_TEST

/* Fused transpose split in lanes: the store is contiguous, the load index
 * (f % m) * n + f / m is not affine in the lane: a gather. */
START_TEST(lower_gather) {
  ts_arena *a = ts_arena_new();
  ir_func *orig;
  sch_state *s = tu_schedule(a, "transpose:m=6,n=4", &orig);
  sch_loop ij[2] = {LP(s, "B", 0), LP(s, "B", 1)}, fused, parts[2];
  tu_ok(sch_fuse(s, 2, ij, &fused, &D), &D);
  split2(s, fused, 4, parts);
  tu_ok(sch_vectorize(s, parts[1], &D), &D);
  census c;
  cg_lowered l = lower_checked(a, orig, sch_func(s), &c);
  if (c.ramp1_stores != 1 || c.gather_loads != 1) {
    char *t = ftext(l.func);
    ck_abort_msg("fused transpose: expected a contiguous store and a gather:\n%s", t);
  }
  sch_free(s);
  ts_arena_free(a);
}
END_TEST

/* Random traces (every primitive family, ir/schedule/random_trace.c) over
 * every workload, each lowered and run against the unscheduled function. A
 * trace with a refused step keeps the steps before it, which are just as
 * good a schedule to lower. */
START_TEST(lower_random_traces) {
  int lowered = 0, widened = 0, kept = 0;
  /* TESSEL_LOWER_TRACES raises the count per workload for a longer soak. */
  const char *env = getenv("TESSEL_LOWER_TRACES");
  int ntr = env && atoi(env) > 0 ? atoi(env) : 12;
  for (int w = 0; w < ir_workload_count(); w++) {
    ts_arena *a = ts_arena_new();
    const char *name = ir_workload_at(w)->name;
    ir_func *f = tu_workload(a, name);
    ts_rng rng;
    ts_rng_seed(&rng, 1000 + (uint64_t)w);
    for (int k = 0; k < ntr; k++) {
      ts_diag_clear(&D);
      sch_traced *t = sch_traced_new(f, 7 + (uint64_t)k, &D);
      ck_assert_msg(t != NULL, "%s: %s", name, D.msg);
      sch_random_opts opts = {.min_steps = 2, .max_steps = 10, .with_intrinsics = true};
      sch_random_result res;
      ts_diag why;
      ts_diag_clear(&why);
      ts_status st = sch_random_trace(t, &rng, &opts, &res, &why, &D);
      ck_assert_msg(st == TS_OK, "%s: random trace: %s", name, D.msg);
      char why_s[2048];
      if (!same_outputs(f, sch_traced_func(t), 1, why_s, sizeof why_s)) {
        char *js = sch_trace_to_json(sch_traced_trace(t));
        char *tx = ftext(sch_traced_func(t));
        ck_abort_msg("%s: the scheduled function itself differs (%s); trace %s\n%s", name, why_s, js, tx);
      }
      { /* name the trace when lowering refuses it */
        cg_target tt = target("llvm");
        cg_lowered tl;
        ts_diag_clear(&D);
        if (cg_lower(a, sch_traced_func(t), &tt, &tl, &D) != TS_OK) {
          char *js = sch_trace_to_json(sch_traced_trace(t));
          ck_abort_msg("%s: lowering trace %d: %s\ntrace %s", name, k, D.msg, js);
        }
      }
      census c;
      lower_checked(a, f, sch_traced_func(t), &c);
      lowered++;
      widened += c.vec_stores > 0;
      kept += c.vec_loops > 0;
      sch_traced_free(t);
    }
    ts_arena_free(a);
  }
  ck_assert_int_eq(lowered, ntr * ir_workload_count());
  ck_assert_int_gt(widened, 0);
  if (env) printf("random traces: %d lowered, %d with vector stores, %d with a kept vectorized loop\n",
                  lowered, widened, kept);
}
END_TEST

/* ---- allocation placement and compaction ------------------------------------ */

/* The IR_ALLOCATE of buffer `name` in a lowered body, with the loops around
 * it (outermost first). */
static const ir_stmt *find_alloc(const ir_stmt *s, const char *name, const ir_stmt **loops, int *nloops,
                                 int depth) {
  if (!s) return NULL;
  const ir_stmt *r = NULL;
  switch (s->kind) {
  case IR_ALLOCATE:
    if (strcmp(s->u.alloc.buf->name, name) == 0) {
      *nloops = depth;
      return s;
    }
    return find_alloc(s->u.alloc.body, name, loops, nloops, depth);
  case IR_FOR:
    ck_assert_int_lt(depth, 16);
    loops[depth] = s;
    return find_alloc(s->u.loop.body, name, loops, nloops, depth + 1);
  case IR_SEQ:
    for (int i = 0; i < s->u.seq.n && !r; i++) r = find_alloc(s->u.seq.stmts[i], name, loops, nloops, depth);
    return r;
  case IR_IF:
    r = find_alloc(s->u.ifs.then_s, name, loops, nloops, depth);
    return r ? r : find_alloc(s->u.ifs.else_s, name, loops, nloops, depth);
  case IR_LET:
    return find_alloc(s->u.let.body, name, loops, nloops, depth);
  default:
    return NULL;
  }
}

static int64_t alloc_size(const ir_stmt *al) {
  int64_t n = -1;
  ck_assert(al && al->u.alloc.buf->ndim == 1);
  ck_assert(ir_as_int(al->u.alloc.buf->shape[0], &n));
  return n;
}

/* matmul with i and j tiled (i0, j0, k, i1, j1), the cache of C written
 * back under j0 (sgemm's schedule in miniature). */
static sch_state *tiled_cache_write(ts_arena *a, const char *wl, int64_t ti, int64_t tj, ir_func **orig,
                                    sch_block *cb, sch_loop *i0, sch_loop *j0) {
  sch_state *s = tu_schedule(a, wl, orig);
  sch_loop ip[2], jp[2];
  split2(s, LP(s, "C", 0), ti, ip);
  split2(s, LP(s, "C", 2), tj, jp);
  sch_loop order[5] = {ip[0], jp[0], LP(s, "C", 4), ip[1], jp[1]};
  ts_diag_clear(&D);
  tu_ok(sch_reorder(s, 5, order, &D), &D);
  tu_ok(sch_cache_write(s, BLK("C"), 0, "local", 0, NULL, cb, &D), &D);
  tu_ok(sch_reverse_compute_at(s, *cb, LP(s, "C", 1), true, -1, &D), &D);
  *i0 = LP(s, "C", 0);
  *j0 = LP(s, "C", 1);
  return s;
}

START_TEST(lower_compact_cache_write) {
  ts_arena *a = ts_arena_new();
  ir_func *orig;
  sch_block cb;
  sch_loop i0, j0;
  sch_state *s = tiled_cache_write(a, "matmul:m=16,n=32,k=8", 4, 8, &orig, &cb, &i0, &j0);
  const ir_stmt *loops[16];
  int nl = -1;
  census c;
  cg_lowered l = lower_checked(a, orig, sch_func(s), &c);
  ck_assert_int_eq(c.allocs, 1);
  const ir_stmt *al = find_alloc(l.func->body, "C_local", loops, &nl, 0);
  ck_assert_ptr_nonnull(al);
  ck_assert_int_eq(nl, 2); /* inside i0 and j0 */
  ck_assert_int_eq(alloc_size(al), 4 * 8);
  ck_assert_str_eq(al->u.alloc.buf->scope, "local");

  /* parallel i0, unrolled/vectorized tile loops, decomposed init: the cache
   * is per task, inside the parallel body */
  ts_diag_clear(&D);
  tu_ok(sch_parallel(s, i0, &D), &D);
  tu_ok(sch_vectorize(s, LP(s, "C", 4), &D), &D);
  tu_ok(sch_unroll(s, LP(s, "C", 3), &D), &D);
  sch_block init;
  tu_ok(sch_decompose_reduction(s, BLK("C"), LP(s, "C", 2), &init, &D), &D);
  l = lower_checked(a, orig, sch_func(s), &c);
  ck_assert_int_eq(c.allocs, 1);
  ck_assert_int_gt(c.vec_stores, 0);
  al = find_alloc(l.func->body, "C_local", loops, &nl, 0);
  ck_assert_ptr_nonnull(al);
  ck_assert_int_eq(nl, 2);
  ck_assert_int_eq(loops[0]->u.loop.kind, IR_FOR_PARALLEL);
  ck_assert_int_eq(alloc_size(al), 4 * 8);
  sch_free(s);

  /* storage_align pads the compacted row: 8 -> 9 */
  s = tiled_cache_write(a, "matmul:m=16,n=32,k=8", 4, 8, &orig, &cb, &i0, &j0);
  ts_diag_clear(&D);
  tu_ok(sch_storage_align(s, BLK("C"), 0, 0, 8, 1, &D), &D);
  l = lower_checked(a, orig, sch_func(s), &c);
  al = find_alloc(l.func->body, "C_local", loops, &nl, 0);
  ck_assert_ptr_nonnull(al);
  ck_assert_int_eq(nl, 2);
  ck_assert_int_eq(alloc_size(al), 4 * 9);
  sch_free(s);

  /* a tail tile (16 = 3*5 + 1 rows): the region is the whole tile, accesses
   * past the end stay predicated off */
  s = tiled_cache_write(a, "matmul:m=16,n=12,k=3", 5, 4, &orig, &cb, &i0, &j0);
  l = lower_checked(a, orig, sch_func(s), &c);
  al = find_alloc(l.func->body, "C_local", loops, &nl, 0);
  ck_assert_ptr_nonnull(al);
  ck_assert_int_eq(nl, 2);
  ck_assert_int_eq(alloc_size(al), 5 * 4);
  sch_free(s);
  ts_arena_free(a);
}
END_TEST

START_TEST(lower_compact_cache_read) {
  ts_arena *a = ts_arena_new();
  ir_func *orig;
  sch_block cb;
  /* A's row i copied under the consumer's j loop: one row of k */
  sch_state *s = tu_schedule(a, "matmul:m=4,n=6,k=5", &orig);
  tu_ok(sch_cache_read(s, BLK("C"), 0, "local", 0, NULL, &cb, &D), &D);
  const char *bname = sch_func(s)->body->u.realize.block->allocs[0]->name;
  ts_diag_clear(&D);
  tu_ok(sch_compute_at(s, cb, LP(s, "C", 1), true, -1, &D), &D);
  census c;
  cg_lowered l = lower_checked(a, orig, sch_func(s), &c);
  const ir_stmt *loops[16];
  int nl = -1;
  const ir_stmt *al = find_alloc(l.func->body, bname, loops, &nl, 0);
  ck_assert_msg(al != NULL, "no allocation of %s:\n%s", bname, ftext(l.func));
  ck_assert_int_eq(nl, 2);
  ck_assert_int_eq(alloc_size(al), 5);
  sch_free(s);

  /* in "shared" scope on the same nest */
  s = tu_schedule(a, "matmul:m=4,n=6,k=5", &orig);
  tu_ok(sch_cache_read(s, BLK("C"), 1, "shared", 0, NULL, &cb, &D), &D);
  bname = sch_func(s)->body->u.realize.block->allocs[0]->name;
  ts_diag_clear(&D);
  tu_ok(sch_compute_at(s, cb, LP(s, "C", 0), true, -1, &D), &D);
  l = lower_checked(a, orig, sch_func(s), &c);
  al = find_alloc(l.func->body, bname, loops, &nl, 0);
  ck_assert_ptr_nonnull(al);
  ck_assert_int_eq(nl, 1);
  ck_assert_int_eq(alloc_size(al), 5 * 6); /* B is read whole per row of C */
  sch_free(s);
  ts_arena_free(a);
}
END_TEST

/* A cache whose accesses span the whole nest keeps its declared shape and
 * its place at the top. */
START_TEST(lower_compact_full_span) {
  ts_arena *a = ts_arena_new();
  ir_func *orig;
  sch_state *s = tu_schedule(a, "matmul:m=6,n=10,k=3", &orig);
  sch_block cb;
  tu_ok(sch_cache_write(s, BLK("C"), 0, "local", 0, NULL, &cb, &D), &D);
  census c;
  cg_lowered l = lower_checked(a, orig, sch_func(s), &c);
  const ir_stmt *loops[16];
  int nl = -1;
  const ir_stmt *al = find_alloc(l.func->body, "C_local", loops, &nl, 0);
  ck_assert_ptr_nonnull(al);
  ck_assert_int_eq(nl, 0);
  ck_assert_int_eq(alloc_size(al), 6 * 10);
  /* compute_at under i of the producer with the consumer left whole: the
   * LCA is still the top */
  sch_free(s);
  s = tu_schedule(a, "matmul:m=6,n=10,k=3", &orig);
  tu_ok(sch_cache_read(s, BLK("C"), 0, "global", 0, NULL, &cb, &D), &D);
  const char *bname = sch_func(s)->body->u.realize.block->allocs[0]->name;
  l = lower_checked(a, orig, sch_func(s), &c);
  al = find_alloc(l.func->body, bname, loops, &nl, 0);
  ck_assert_ptr_nonnull(al);
  ck_assert_int_eq(nl, 0);
  ck_assert_int_eq(alloc_size(al), 6 * 3);
  sch_free(s);
  ts_arena_free(a);
}
END_TEST

/* Lowering under failing allocations: TS_ENOMEM or success, never a crash
 * or a half-built result. */
START_TEST(lower_oom) {
  ts_arena *a = ts_arena_new();
  ir_func *orig;
  sch_state *s = tu_schedule(a, "matmul:m=4,n=16,k=3", &orig);
  sch_loop i = LP(s, "C", 0), k = LP(s, "C", 2), jp[2];
  split2(s, LP(s, "C", 1), 4, jp);
  sch_loop order[4] = {i, jp[0], k, jp[1]};
  tu_ok(sch_reorder(s, 4, order, &D), &D);
  tu_ok(sch_vectorize(s, jp[1], &D), &D);
  cg_target t = target("llvm");
  bool succeeded = false;
  for (long n = 1; n < 2000 && !succeeded; n++) {
    ts_arena *b = ts_arena_new();
    ck_assert(b != NULL);
    cg_lowered l;
    ts_diag_clear(&D);
    ts_alloc_fail_after(n);
    ts_status st = cg_lower(b, sch_func(s), &t, &l, &D);
    ts_alloc_fail_after(0);
    ck_assert_msg(st == TS_OK || st == TS_ENOMEM, "fail after %ld: %s (%s)", n, ts_strerror(st), D.msg);
    if (st == TS_OK) {
      succeeded = true;
      assert_same(orig, l.func);
    } else {
      ck_assert(l.func == NULL);
    }
    ts_arena_free(b);
  }
  ck_assert(succeeded);
  sch_free(s);
  ts_arena_free(a);
}
END_TEST

START_TEST(lower_errors) {
  ts_arena *a = ts_arena_new();
  ir_func *f = tu_workload(a, "add:m=2,n=3");
  cg_target t = target("llvm");
  cg_lowered l;
  /* a buffer used where nobody allocated it */
  ir_block *root = ir_block_clone(a, f->body->u.realize.block);
  ir_expr *shape[2] = {ir_i64(a, 2), ir_i64(a, 3)};
  ir_buffer *ghost = ir_buffer_new(a, "ghost", ir_dt(IR_F32), 2, shape, "global");
  root->body = ir_subst_buffer(a, root->body, f->params[2], ghost);
  ir_stmt *rs = ir_stmt_clone(a, f->body);
  rs->u.realize.block = root;
  ts_diag_clear(&D);
  ck_assert_int_eq(cg_lower(a, func_with_body(a, f, rs), &t, &l, &D), TS_EUNSUPPORTED);
  ck_assert_msg(strstr(D.msg, "ghost") && strstr(D.msg, "block C"), "%s", D.msg);
  ck_assert(l.func == NULL);
  ts_diag_clear(&D);
  ck_assert_int_eq(cg_lower(a, NULL, &t, &l, &D), TS_EINVAL);
  ts_arena_free(a);
}
END_TEST

/* ---- cg_check --------------------------------------------------------------------- */

START_TEST(check_refusals) {
  ts_arena *a = ts_arena_new();
  cg_target cpu = target("llvm"), gpu = target("cuda -arch=sm_90");
  ir_func *f = tu_workload(a, "add:m=4,n=128");
  ts_diag_clear(&D);
  ck_assert_int_eq(cg_check(f, &cpu, &D), TS_OK);
  ck_assert_int_eq(cg_check(f, &gpu, &D), TS_OK);
  ir_var *i = nth_loop(f, 0), *j = nth_loop(f, 1);

  /* thread bindings on a CPU */
  ir_func *g = func_with_body(a, f, with_kind(a, f->body, j, IR_FOR_THREAD_BINDING, "threadIdx.x"));
  ts_diag_clear(&D);
  ck_assert_int_eq(cg_check(g, &cpu, &D), TS_EUNSUPPORTED);
  ck_assert_msg(strstr(D.msg, "threadIdx.x") && strstr(D.msg, "llvm"), "%s", D.msg);
  ts_diag_clear(&D);
  ck_assert_int_eq(cg_check(g, &gpu, &D), TS_OK);
  /* ... and too many threads per block on cuda */
  g = func_with_body(a, g, with_kind(a, g->body, i, IR_FOR_THREAD_BINDING, "threadIdx.y"));
  ts_diag_clear(&D);
  ck_assert_int_eq(cg_check(g, &gpu, &D), TS_OK); /* 4 * 128 = 512 */
  ir_func *big = tu_workload(a, "add:m=16,n=128");
  ir_var *bi = nth_loop(big, 0), *bj = nth_loop(big, 1);
  g = func_with_body(a, big, with_kind(a, big->body, bj, IR_FOR_THREAD_BINDING, "threadIdx.x"));
  g = func_with_body(a, g, with_kind(a, g->body, bi, IR_FOR_THREAD_BINDING, "threadIdx.y"));
  ts_diag_clear(&D);
  ck_assert_int_eq(cg_check(g, &gpu, &D), TS_EUNSUPPORTED);
  ck_assert_msg(strstr(D.msg, "1024"), "%s", D.msg);

  /* nested parallel loops */
  g = func_with_body(a, f, with_kind(a, f->body, i, IR_FOR_PARALLEL, NULL));
  ts_diag_clear(&D);
  ck_assert_int_eq(cg_check(g, &cpu, &D), TS_OK);
  ck_assert_int_eq(cg_check(g, &gpu, &D), TS_EUNSUPPORTED);
  g = func_with_body(a, g, with_kind(a, g->body, j, IR_FOR_PARALLEL, NULL));
  ts_diag_clear(&D);
  ck_assert_int_eq(cg_check(g, &cpu, &D), TS_EUNSUPPORTED);
  ck_assert_msg(strstr(D.msg, "nested") && strstr(D.msg, j->name) && strstr(D.msg, i->name), "%s", D.msg);

  /* 128 vector lanes: refused by the check; lowering keeps the loop */
  g = func_with_body(a, f, with_kind(a, f->body, j, IR_FOR_VECTORIZED, NULL));
  ts_diag_clear(&D);
  ck_assert_int_eq(cg_check(g, &cpu, &D), TS_EUNSUPPORTED);
  ck_assert_msg(strstr(D.msg, "128 lanes"), "%s", D.msg);
  census c;
  lower_checked(a, f, g, &c);
  ck_assert_int_eq(c.vec_loops, 1);
  ck_assert_int_eq(c.vec_stores, 0);

  /* sequential parallel loops are fine */
  ir_func *sm = tu_workload(a, "softmax:m=4,n=8");
  ir_func *h = sm;
  for (int q = 0; q < 8; q += 2) h = func_with_body(a, h, with_kind(a, h->body, nth_loop(sm, q), IR_FOR_PARALLEL, NULL));
  ts_diag_clear(&D);
  ck_assert_int_eq(cg_check(h, &cpu, &D), TS_OK);
  lower_checked(a, sm, h, &c);
  ck_assert_int_eq(c.par_loops, 4);

  /* warp scope on a CPU */
  ir_block *root = ir_block_clone(a, sm->body->u.realize.block);
  root->allocs = ts_arena_memdup(a, root->allocs, sizeof *root->allocs * (size_t)root->nalloc);
  ir_buffer *w = ts_arena_memdup(a, root->allocs[0], sizeof *w);
  w->scope = "warp";
  root->body = ir_subst_buffer(a, root->body, root->allocs[0], w);
  root->allocs[0] = w;
  ir_stmt *rs = ir_stmt_clone(a, sm->body);
  rs->u.realize.block = root;
  g = func_with_body(a, sm, rs);
  ts_diag_clear(&D);
  ck_assert_int_eq(cg_check(g, &cpu, &D), TS_EUNSUPPORTED);
  ck_assert_msg(strstr(D.msg, "warp"), "%s", D.msg);
  ck_assert_int_eq(cg_check(g, &gpu, &D), TS_OK);
  ts_arena_free(a);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("cg_lower");
  TCase *t = tcase_create("target");
  tcase_add_test(t, target_valid);
  tcase_add_test(t, target_invalid);
  tcase_add_test(t, target_host);
  suite_add_tcase(s, t);
  t = tcase_create("lower");
  /* lower_random_traces takes about 40 s alone and ran past 120 s at a load
   * average of 10-18 on 2 cores; the bound is for a hang, not for speed */
  tcase_set_timeout(t, 600);
  tcase_add_test(t, lower_every_workload);
  tcase_add_test(t, lower_every_workload_scheduled);
  tcase_add_test(t, lower_add_vectorized);
  tcase_add_test(t, lower_vectorize_whole_and_unit);
  tcase_add_test(t, lower_matmul_vectorized_j);
  tcase_add_test(t, lower_vectorized_fallback_inner_loop);
  tcase_add_test(t, lower_vectorized_fallback_reduction);
  tcase_add_test(t, lower_transpose_strided);
  tcase_add_test(t, lower_nondivisible_split);
  tcase_add_test(t, lower_two_tails);
  tcase_add_test(t, lower_reduction_reordered);
  tcase_add_test(t, lower_kinds_and_annotations);
  tcase_add_test(t, lower_fused);
  tcase_add_test(t, lower_cache_write_compute_at);
  tcase_add_test(t, lower_decompose_reduction);
  tcase_add_test(t, lower_overhang_tile);
  tcase_add_test(t, lower_padded_select);
  tcase_add_test(t, lower_explicit_strides);
  tcase_add_test(t, lower_idempotent);
  tcase_add_test(t, lower_symbolic);
  tcase_add_test(t, lower_vector_offset_min);
  tcase_add_test(t, lower_gather);
  tcase_add_test(t, lower_random_traces);
  tcase_add_test(t, lower_compact_cache_write);
  tcase_add_test(t, lower_compact_cache_read);
  tcase_add_test(t, lower_compact_full_span);
  tcase_add_test(t, lower_oom);
  tcase_add_test(t, lower_errors);
  suite_add_tcase(s, t);
  t = tcase_create("check");
  tcase_add_test(t, check_refusals);
  suite_add_tcase(s, t);
  return s;
}

int main(void) {
  SRunner *r = srunner_create(suite());
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
