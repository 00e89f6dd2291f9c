/* test_default_schedule.c — the CPU default schedule (tuner/build.c): heavy
 * reductions get the register-tiled micro-kernel (local accumulator tile,
 * vectorized cols, unrolled rows, parallel outer loop, elementwise
 * epilogue inlined into the copy-back); extents without a usable factor,
 * guarded (select) bodies and --no-default-tiling keep the plain
 * schedule; a long reduction into few outputs is rfactored by vector
 * lanes. Every schedule is checked against the unscheduled function in
 * the interpreter and, built through LLVM, against the interpreter's
 * outputs (tun_verify). */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codegen/llvm.h"
#include "runtime/runtime.h"
#include "ir/parse.h"
#include "ir/schedule/layout.h"
#include "ir/struct.h"
#include "search/search.h"
#include "ir/workloads/workloads.h"
#include "tests/schedule/util.h"
#include "tuner/build.h"
#include "tuner/verify.h"
#include "util/host_target.h"

typedef struct shape_stats {
  int local_allocs, vectorized, unrolled, parallel, blocks;
} shape_stats;

static bool stats_cb(void *ctx, const ir_stmt *s) {
  shape_stats *st = ctx;
  if (s->kind == IR_FOR) {
    if (s->u.loop.kind == IR_FOR_VECTORIZED) st->vectorized++;
    if (s->u.loop.kind == IR_FOR_UNROLLED) st->unrolled++;
    if (s->u.loop.kind == IR_FOR_PARALLEL) st->parallel++;
  }
  if (s->kind == IR_BLOCK_REALIZE) {
    const ir_block *b = s->u.realize.block;
    if (strcmp(b->name, "root")) st->blocks++;
    for (int i = 0; i < b->nalloc; i++)
      if (b->allocs[i]->scope && !strcmp(b->allocs[i]->scope, "local")) st->local_allocs++;
  }
  return true;
}


/* f's default schedule for this host (asserted to succeed). */
static sch_traced *host_default(const ir_func *f) {
  ts_diag d;
  ts_diag_clear(&d);
  cg_target tg = tu_host_target();
  sch_traced *t = NULL;
  ck_assert_msg(tun_schedule_opts(f, NULL, &tg, NULL, &t, &d) == TS_OK, "%s", d.msg);
  return t;
}

/* Default-schedules f, checks it in the interpreter and built; returns the
 * scheduled function's shape. */
static shape_stats check_default_opts(const ir_func *f, const tun_default_opts *dopts) {
  ts_diag d;
  ts_diag_clear(&d);
  cg_target tg = tu_host_target();
  sch_traced *t = NULL;
  ck_assert_msg(tun_schedule_opts(f, NULL, &tg, dopts, &t, &d) == TS_OK, "%s", d.msg);
  const ir_func *s = sch_traced_func(t);
  tu_assert_equivalent(f, s);
  char path[] = "/tmp/tessel-defsched-XXXXXX";
  int fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  close(fd);
  ck_assert_msg(tun_build_shared(s, &tg, path, &d) == TS_OK, "%s: %s", f->name, d.msg);
  tsrt_measure_opts o = {.repeat = 1, .seed = 11, .want_outputs = true, .timeout_s = 60};
  tsrt_measure_result r;
  tsrt_measure_forked(path, &o, &r);
  ck_assert_msg(r.status == TS_OK, "%s: %s", f->name, r.error);
  tun_verify_result vr;
  ck_assert_int_eq(tun_verify(f, 11, r.outputs, r.outputs_bytes, &vr, &d), TS_OK);
  ck_assert_msg(vr.matched, "%s: %s", f->name, vr.detail);
  tsrt_result_fini(&r);
  unlink(path);
  shape_stats st = {0};
  ir_visitor v = {.stmt = stats_cb, .ctx = &st};
  ir_visit_stmt(&v, s->body);
  sch_traced_free(t);
  return st;
}

static shape_stats check_default(const ir_func *f) { return check_default_opts(f, NULL); }

/* check_default on a function given as DSL text. */
static shape_stats check_text(const char *text) {
  ts_arena a;
  ts_arena_init(&a);
  ir_func *f = NULL;
  sch_state *s = tu_schedule_text(&a, text, &f);
  sch_free(s);
  shape_stats st = check_default(f);
  ts_arena_fini(&a);
  return st;
}

static shape_stats check_spec(ts_arena *a, const char *spec) {
  ir_func *f = tu_workload(a, spec);
  return check_default(f);
}

/* A Winograd F(4x4, 3x3) kernel as legalize writes it (op_nn.c
 * emit_conv_winograd; 16 -> 32 channels, 8x8, pad 1): a padded channels-last
 * copy, the input transform in two reductions over 6, 36 channel matmuls
 * whose rows are an image's 2 x 2 tiles on one axis, the inverse transform
 * in two reductions over 6. */
static const char *winograd_text =
    "kernel wg(x: f32[1, 16, 8, 8], u: f32[6, 6, 16, 32], bt: f32[6, 6], at: f32[4, 6]) -> y: f32[1, 32, 8, 8] {\n"
    "  let xp: f32[1, 10, 10, 16]\n"
    "  let t1: f32[6, 6, 1, 4, 16]\n"
    "  let tv: f32[6, 6, 1, 4, 16]\n"
    "  let tm: f32[6, 6, 1, 4, 32]\n"
    "  let to: f32[4, 6, 1, 4, 32]\n"
    "  xp[i0, i1, i2, i3] = select(i1 - 1 >= 0 && i1 - 1 < 8 && i2 - 1 >= 0 && i2 - 1 < 8, "
    "x[i0, i3, min(max(i1 - 1, 0), 7), min(max(i2 - 1, 0), 7)], 0.0)\n"
    "  t1[i0, i1, i2, i3, i4] += bt[i0, r0] * xp[i2, (i3 // 2) * 4 + r0, (i3 % 2) * 4 + i1, i4] for r0 in 0..6\n"
    "  tv[i0, i1, i2, i3, i4] += t1[i0, r0, i2, i3, i4] * bt[i1, r0] for r0 in 0..6\n"
    "  tm[i0, i1, i2, i3, i4] += tv[i0, i1, i2, i3, r0] * u[i0, i1, r0, i4] for r0 in 0..16\n"
    "  to[i0, i1, i2, i3, i4] += at[i0, r0] * tm[r0, i1, i2, i3, i4] for r0 in 0..6\n"
    "  y[i0, i1, i2, i3] += to[i2 % 4, r0, i0, (i2 // 4) * 2 + i3 // 4, i1] * at[i3 % 4, r0] for r0 in 0..6\n"
    "}\n";

/* Builds scheduled function s and checks its outputs against the
 * interpreter's for f. */
static void check_built(const ir_func *f, const ir_func *s) {
  ts_diag d;
  ts_diag_clear(&d);
  cg_target tg = tu_host_target();
  char path[] = "/tmp/tessel-defsched-XXXXXX";
  int fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  close(fd);
  ck_assert_msg(tun_build_shared(s, &tg, path, &d) == TS_OK, "%s", d.msg);
  tsrt_measure_opts o = {.repeat = 1, .seed = 11, .want_outputs = true, .timeout_s = 60};
  tsrt_measure_result r;
  tsrt_measure_forked(path, &o, &r);
  ck_assert_msg(r.status == TS_OK, "%s", r.error);
  tun_verify_result vr;
  ck_assert_int_eq(tun_verify(f, 11, r.outputs, r.outputs_bytes, &vr, &d), TS_OK);
  ck_assert_msg(vr.matched, "%s", vr.detail);
  tsrt_result_fini(&r);
  unlink(path);
}

/* The default schedule's tile sizes are sampled decisions: a Winograd
 * kernel's default trace holds SamplePerfectTile instructions for its
 * stages, survives a JSON round trip (replayed: the same function), and the
 * search's tile-size mutator moves it to other points of the space, each of
 * which replays, computes the same as the unscheduled function and builds
 * to the interpreter's outputs. */
START_TEST(test_winograd_default_decisions) {
  ts_arena a;
  ts_arena_init(&a);
  ir_func *f = NULL;
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_msg(ir_parse_func(&a, winograd_text, strlen(winograd_text), "wg", &f, &d) == TS_OK, "%s", d.msg);
  sch_traced *t = host_default(f);
  const sch_trace *tr = sch_traced_trace(t);
  int nsample = 0;
  for (int i = 0; i < sch_trace_len(tr); i++) nsample += sch_trace_inst(tr, i)->kind == SCH_I_SAMPLE_PERFECT_TILE;
  ck_assert_msg(nsample >= 3, "%d tile decisions in the default trace", nsample);
  uint64_t h0 = ir_struct_hash_func(sch_traced_func(t));
  /* round trip: JSON out and back, replayed on the unscheduled function */
  char *js = sch_trace_to_json(tr);
  ck_assert_ptr_nonnull(js);
  sch_trace *back = sch_trace_from_json(js, &d);
  ck_assert_msg(back, "%s", d.msg);
  ts_free(js);
  sch_traced *r = sch_traced_new(f, 1, &d);
  ck_assert_msg(r && sch_trace_apply(back, r, false, NULL, &d) == TS_OK, "%s", d.msg);
  ck_assert(ir_struct_hash_func(sch_traced_func(r)) == h0);
  sch_traced_free(r);
  sch_trace_free(back);
  /* the mutator's neighbours: distinct functions, each replayed and checked */
  uint64_t seen[8] = {h0};
  int nseen = 1;
  ts_rng rng;
  ts_rng_seed(&rng, 7);
  for (int k = 0; k < 200 && nseen < 4; k++) {
    sch_trace *m = srch_mutate(SRCH_MUT_TILE_SIZE, tr, sch_traced_func(t), &rng);
    if (!m) continue;
    sch_traced *mt = sch_traced_new(f, 1, &d);
    ck_assert(mt);
    ts_diag_clear(&d);
    if (sch_trace_apply(m, mt, false, NULL, &d) == TS_OK) {
      uint64_t h = ir_struct_hash_func(sch_traced_func(mt));
      bool dup = false;
      for (int j = 0; j < nseen; j++) dup |= seen[j] == h;
      if (!dup) {
        seen[nseen++] = h;
        tu_assert_equivalent(f, sch_traced_func(mt));
        check_built(f, sch_traced_func(mt));
      }
    }
    sch_traced_free(mt);
    sch_trace_free(m);
  }
  ck_assert_msg(nseen >= 4, "only %d points around the default", nseen);
  sch_traced_free(t);
  ts_arena_fini(&a);
}
END_TEST

/* matmul, dense, batch_matmul and a padded conv get the tiled micro-kernel:
 * a local accumulator, an unrolled rows loop, vectorized loops, a parallel
 * loop; and compute the same as the unscheduled function. */
START_TEST(test_tiled) {
  const char *specs[] = {"matmul:m=64,n=48,k=40", "matmul:m=30,n=64,k=7", "dense:m=16,n=40,k=24",
                         "batch_matmul:b=3,m=12,n=32,k=20",
                         "conv2d_nchw:n=1,c=8,h=14,w=14,k=16,r=3,s=3,stride=1,pad=1",
                         "conv2d_nchw:n=1,c=6,h=16,w=16,k=12,r=3,s=3,stride=2,pad=1"};
  for (size_t i = 0; i < sizeof specs / sizeof *specs; i++) {
    ts_arena a;
    ts_arena_init(&a);
    shape_stats st = check_spec(&a, specs[i]);
    ck_assert_msg(st.local_allocs == 1, "%s: %d local buffers", specs[i], st.local_allocs);
    ck_assert_msg(st.unrolled >= 1, "%s: no unrolled rows loop", specs[i]);
    ck_assert_msg(st.vectorized >= 2, "%s: %d vectorized loops", specs[i], st.vectorized);
    ck_assert_msg(st.parallel >= 1, "%s: no parallel loop", specs[i]);
    ts_arena_fini(&a);
  }
}
END_TEST

/* A matmul over a model's symbolic rows ([batch, seq, K] x [K, N], the
 * linear layers of a transformer exported with dynamic axes) gets the tiled
 * micro-kernel with the rows split by a guarded tail, its accumulator a
 * register tile (reverse_compute_at proves the split covers seq); the
 * checks run it at the test sizes of the size vars. */
START_TEST(test_tiled_symbolic_rows) {
  static const char *text =
      "kernel lin(x: f32[bs, sq, 40], w: f32[40, 48], b: f32[48]) -> y: f32[bs, sq, 48] {\n"
      "  t[i, j, n] += x[i, j, k] * w[k, n]\n"
      "  y[i, j, n] = t[i, j, n] + b[n]\n"
      "}\n";
  ts_arena a;
  ts_arena_init(&a);
  ir_func *f = NULL;
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_msg(ir_parse_func(&a, text, strlen(text), "lin", &f, &d) == TS_OK, "%s", d.msg);
  ck_assert_int_eq(f->nsyms, 2);
  sch_traced *t = host_default(f);
  const ir_func *sf = sch_traced_func(t);
  shape_stats st = {0};
  ir_visitor v = {.stmt = stats_cb, .ctx = &st};
  ir_visit_stmt(&v, sf->body);
  /* at sizes with a tail (13 rows: one full tile and a partial one) and without */
  static const char *names[2] = {"bs", "sq"};
  static const int64_t sizes[][2] = {{1, 1}, {2, 13}, {3, 16}};
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
    const ir_func *fb = ir_func_bind_syms(&a, f, 2, names, sizes[i], &d), *sb = ir_func_bind_syms(&a, sf, 2, names, sizes[i], &d);
    ck_assert_msg(fb && sb, "%s", d.msg);
    tu_assert_equivalent(fb, sb);
    char path[] = "/tmp/tessel-defsched-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    cg_target tg = tu_host_target();
    ck_assert_msg(tun_build_shared(sb, &tg, path, &d) == TS_OK, "%s", d.msg);
    tsrt_measure_opts o = {.repeat = 1, .seed = 11, .want_outputs = true, .timeout_s = 60};
    tsrt_measure_result r;
    tsrt_measure_forked(path, &o, &r);
    ck_assert_msg(r.status == TS_OK, "%s", r.error);
    tun_verify_result vr;
    ck_assert_int_eq(tun_verify(fb, 11, r.outputs, r.outputs_bytes, &vr, &d), TS_OK);
    ck_assert_msg(vr.matched, "bs=%lld sq=%lld: %s", (long long)sizes[i][0], (long long)sizes[i][1], vr.detail);
    tsrt_result_fini(&r);
    unlink(path);
  }
  sch_traced_free(t);
  ck_assert_msg(st.local_allocs == 1, "%d local buffers", st.local_allocs);
  ck_assert_msg(st.unrolled >= 1, "no unrolled rows loop");
  ck_assert_msg(st.vectorized >= 2, "%d vectorized loops", st.vectorized);
  ck_assert_msg(st.parallel >= 1, "no parallel loop");
  ts_arena_fini(&a);
}
END_TEST

/* Odd and prime extents: no factor for the cols loop (a prime above two
 * vectors) keeps the plain schedule; prime rows (37, ViT's 197 tokens) get a
 * full unrolled tile with a guarded tail, short prime rows (11) one row. All
 * still compute the right thing. */
START_TEST(test_fallback_extents) {
  ts_arena a;
  ts_arena_init(&a);
  shape_stats st = check_spec(&a, "matmul:m=37,n=67,k=29");
  ck_assert_int_eq(st.local_allocs, 0);
  st = check_spec(&a, "matmul:m=37,n=16,k=29"); /* rows 37: prime, guarded tile */
  ck_assert_int_eq(st.local_allocs, 1);
  ck_assert_int_ge(st.unrolled, 1);
  st = check_spec(&a, "matmul:m=11,n=16,k=29"); /* rows 11: prime and short, one row */
  ck_assert_int_eq(st.local_allocs, 1);
  ck_assert_int_eq(st.unrolled, 0);
  ts_arena_fini(&a);
}
END_TEST

/* The largest unrolled loop's extent in s (a register tile's rows). */
static bool unrolled_cb(void *ctx, const ir_stmt *s) {
  int64_t e;
  if (s->kind == IR_FOR && s->u.loop.kind == IR_FOR_UNROLLED && ir_as_int(s->u.loop.extent, &e) && e > *(int64_t *)ctx)
    *(int64_t *)ctx = e;
  return true;
}

/* Rows that two vectors of cols find no divisor for (7: a Winograd
 * matmul's tiles along a 28-wide layer) but one vector's larger budget does
 * take all 7 rows: a 7 x 1-vector tile, not 1 x 2 vectors (3.4 -> 1.9 ms on
 * ResNet-50's 128-channel Winograd layer, bench/RESULTS.md). */
START_TEST(test_rows_from_one_vector) {
  ts_arena a;
  ts_arena_init(&a);
  ts_diag d;
  ts_diag_clear(&d);
  ir_func *f = tu_workload(&a, "matmul:m=7,n=64,k=29");
  sch_traced *t = host_default(f);
  int64_t rows = 0;
  ir_visitor v = {.stmt = unrolled_cb, .ctx = &rows};
  ir_visit_stmt(&v, sch_traced_func(t)->body);
  sch_traced_free(t);
  ck_assert_int_eq(rows, 7);
  shape_stats st = check_spec(&a, "matmul:m=7,n=64,k=29");
  ck_assert_int_eq(st.local_allocs, 1);
  ts_arena_fini(&a);
}
END_TEST

/* Walks s down to every block realize, carrying the product of the unrolled
 * loops' extents above it and how many there are; a block for which hit
 * returns true is not descended into. */
typedef bool (*unrolled_hit)(const ir_block *b, int64_t prod, int n, void *ctx);

static void walk_unrolled(const ir_stmt *s, int64_t prod, int n, unrolled_hit hit, void *ctx) {
  if (!s) return;
  switch (s->kind) {
  case IR_FOR: {
    int64_t e = 1;
    bool u = s->u.loop.kind == IR_FOR_UNROLLED && ir_as_int(s->u.loop.extent, &e);
    walk_unrolled(s->u.loop.body, u ? prod * e : prod, n + u, hit, ctx);
    return;
  }
  case IR_SEQ:
    for (int i = 0; i < s->u.seq.n; i++) walk_unrolled(s->u.seq.stmts[i], prod, n, hit, ctx);
    return;
  case IR_BLOCK_REALIZE: {
    const ir_block *b = s->u.realize.block;
    if (hit(b, prod, n, ctx)) return;
    walk_unrolled(b->init, prod, n, hit, ctx);
    walk_unrolled(b->body, prod, n, hit, ctx);
    return;
  }
  case IR_IF: walk_unrolled(s->u.ifs.then_s, prod, n, hit, ctx); walk_unrolled(s->u.ifs.else_s, prod, n, hit, ctx); return;
  case IR_LET: walk_unrolled(s->u.let.body, prod, n, hit, ctx); return;
  case IR_ALLOCATE: walk_unrolled(s->u.alloc.body, prod, n, hit, ctx); return;
  default: return;
  }
}

/* The product of the unrolled loops' extents above block `name`'s body
 * (its register tile less the vector) and how many there are. */
typedef struct unrolled_tile {
  const char *name;
  int64_t acc;
  int nested;
} unrolled_tile;

static bool named_hit(const ir_block *b, int64_t prod, int n, void *ctx) {
  unrolled_tile *out = ctx;
  if (strcmp(b->name, out->name)) return false;
  out->acc = prod;
  out->nested = n;
  return true;
}

static void find_unrolled(const ir_stmt *s, int64_t prod, int n, unrolled_tile *out) {
  walk_unrolled(s, prod, n, named_hit, out);
}

/* A channel-blocked convolution (the nchwc pass's conv2d_nchwc) on AVX2
 * gets MLAS's register tile: output pixels x output-channel blocks, each a
 * vector of 8 (m blocks of ko unrolled inside the pixels, so one broadcast
 * input feeds m FMAs), the accumulators, the m weight vectors and the
 * broadcast within the 16 ymm registers: 4 x 2 at widths 28 and 56 (1x1,
 * 3x3 s2, the 7x7 stem reading plain NCHW), 2 x 4 at 14, 4 x 3 where ko is
 * 3 (24 channels), 1 x 4 at a prime width, where before they were a row of
 * 7 or 8 pixels against one weight vector; at 7 no such pair beats 7 x 1,
 * which stays, and so does the depthwise form's one block (its input is a
 * vector too). Each also built for this host at odd and prime sizes and
 * checked against the interpreter. */
START_TEST(test_nchwc_channel_blocks) {
  static const struct {
    const char *spec;
    int64_t acc;
    int nested; /* unrolled loops: rows and blocks, or one of them */
  } cases[] = {
      {"conv2d_nchwc:n=1,c=16,h=28,w=28,k=64,r=1,s=1,stride=1,pad=0,cb=8,kb=8", 8, 2},    /* 1x1: 4 x 2 */
      {"conv2d_nchwc:n=1,c=16,h=56,w=56,k=16,r=3,s=3,stride=2,pad=1,cb=8,kb=8", 8, 2},    /* 3x3 s2: 4 x 2 */
      {"conv2d_nchwc:n=1,c=64,h=56,w=56,k=64,r=1,s=1,stride=1,pad=0,cb=8,kb=8", 8, 2},    /* 56: 4 x 2, not 8 x 1 */
      {"conv2d_nchwc:n=1,c=16,h=14,w=14,k=64,r=1,s=1,stride=1,pad=0,cb=8,kb=8", 8, 2},    /* 14: 2 x 4, not 7 x 1 */
      {"conv2d_nchwc:n=1,c=16,h=7,w=7,k=32,r=3,s=3,stride=1,pad=1,cb=8,kb=8", 7, 1},      /* 7: 7 x 1 stays */
      {"conv2d_nchwc:n=1,c=3,h=56,w=56,k=16,r=7,s=7,stride=2,pad=3,cb=1,kb=8", 8, 2},     /* stem, plain input */
      {"conv2d_nchwc:n=1,c=16,h=28,w=28,k=24,r=1,s=1,stride=1,pad=0,cb=8,kb=8", 12, 2},   /* ko 3: 4 x 3 */
      {"conv2d_nchwc:n=1,c=8,h=13,w=13,k=32,r=3,s=3,stride=1,pad=1,cb=8,kb=8", 4, 1},     /* prime 13: 1 x 4 */
      {"depthwise_conv2d_nchwc:n=1,c=32,h=28,w=28,r=3,s=3,stride=1,pad=1,cb=8", 7, 1},    /* one block */
  };
  ts_diag d;
  ts_diag_clear(&d);
  cg_target tg;
  ck_assert_int_eq(cg_target_parse("llvm -mtriple=x86_64-linux-gnu -mattr=+avx2,+fma", &tg, &d), TS_OK);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ts_arena a;
    ts_arena_init(&a);
    ir_func *f = tu_workload(&a, cases[i].spec);
    sch_traced *t = NULL;
    ck_assert_msg(tun_schedule(f, NULL, &tg, &t, &d) == TS_OK, "%s: %s", cases[i].spec, d.msg);
    unrolled_tile tl = {.name = "Y"}; /* the workloads' reduction block */
    find_unrolled(sch_traced_func(t)->body, 1, 0, &tl);
    ck_assert_msg(tl.acc == cases[i].acc && tl.nested == cases[i].nested, "%s: %lld accumulators in %d unrolled loops", cases[i].spec,
                  (long long)tl.acc, tl.nested);
    tu_assert_equivalent(f, sch_traced_func(t));
    sch_traced_free(t);
    ts_arena_fini(&a);
  }
  /* built for this host (AVX-512 or not), odd and prime sizes, against the
   * interpreter */
  ts_arena a;
  ts_arena_init(&a);
  shape_stats st = check_spec(&a, "conv2d_nchwc:n=1,c=8,h=13,w=13,k=32,r=3,s=3,stride=1,pad=1,cb=8,kb=8");
  ck_assert_int_eq(st.local_allocs, 1);
  check_spec(&a, "conv2d_nchwc:n=1,c=16,h=14,w=14,k=64,r=3,s=3,stride=2,pad=1,cb=8,kb=8");
  check_spec(&a, "conv2d_nchwc:n=1,c=3,h=23,w=23,k=24,r=7,s=7,stride=2,pad=3,cb=1,kb=8");
  check_spec(&a, "conv2d_nchwc:n=1,c=16,h=7,w=7,k=16,r=1,s=1,stride=1,pad=0,cb=8,kb=8");
  check_spec(&a, "conv2d_nchwc:n=1,c=16,h=11,w=7,k=24,r=3,s=3,stride=1,pad=1,cb=8,kb=8");
  ts_arena_fini(&a);
}
END_TEST

/* A legalized convolution (padding as a select, as the ONNX import emits
 * it) with a bias + residual + relu epilogue: the conv keeps the plain
 * schedule (guarded body), the elementwise chain is inlined into one block. */
static const char *fused_conv =
    "func fused(in0: f32[1, 4, 9, 9], in1: f32[8, 4, 3, 3], in2: f32[8], in3: f32[1, 8, 9, 9]) -> out0: f32[1, 8, 9, 9] {\n"
    "  block root() {\n"
    "    alloc t0: f32[1, 8, 9, 9]\n"
    "    alloc t0_conv: f32[1, 8, 9, 9]\n"
    "    for i0 in serial(0, 1) { for i1 in serial(0, 8) { for i2 in serial(0, 9) { for i3 in serial(0, 9) {\n"
    "      for r0 in serial(0, 4) { for r1 in serial(0, 3) { for r2 in serial(0, 3) {\n"
    "        block t0_conv(vi0: S(0, 1) = i0, vi1: S(0, 8) = i1, vi2: S(0, 9) = i2, vi3: S(0, 9) = i3, vr0: R(0, 4) = r0, vr1: R(0, 3) = r1, vr2: R(0, 3) = r2) {\n"
    "          reads in0[vi0, vr0, vi2 + vr1 - 1, vi3 + vr2 - 1], in1[vi1, vr0, vr1, vr2]\n"
    "          writes t0_conv[vi0, vi1, vi2, vi3]\n"
    "          init { t0_conv[vi0, vi1, vi2, vi3] = 0.0 }\n"
    "          t0_conv[vi0, vi1, vi2, vi3] = t0_conv[vi0, vi1, vi2, vi3] + select(vi2 + vr1 - 1 >= 0 && vi2 + vr1 - 1 < 9 && vi3 + vr2 - 1 >= 0 && vi3 + vr2 - 1 < 9, in0[vi0, vr0, vi2 + vr1 - 1, vi3 + vr2 - 1] * in1[vi1, vr0, vr1, vr2], 0.0)\n"
    "        }\n"
    "      } } } } } } }\n"
    "    for j0 in serial(0, 1) { for j1 in serial(0, 8) { for j2 in serial(0, 9) { for j3 in serial(0, 9) {\n"
    "      block t0(v0: S(0, 1) = j0, v1: S(0, 8) = j1, v2: S(0, 9) = j2, v3: S(0, 9) = j3) {\n"
    "        reads t0_conv[v0, v1, v2, v3], in2[v1]\n"
    "        writes t0[v0, v1, v2, v3]\n"
    "        t0[v0, v1, v2, v3] = t0_conv[v0, v1, v2, v3] + in2[v1]\n"
    "      }\n"
    "    } } } }\n"
    "    for k0 in serial(0, 1) { for k1 in serial(0, 8) { for k2 in serial(0, 9) { for k3 in serial(0, 9) {\n"
    "      block out0(w0: S(0, 1) = k0, w1: S(0, 8) = k1, w2: S(0, 9) = k2, w3: S(0, 9) = k3) {\n"
    "        reads t0[w0, w1, w2, w3], in3[w0, w1, w2, w3]\n"
    "        writes out0[w0, w1, w2, w3]\n"
    "        out0[w0, w1, w2, w3] = max(t0[w0, w1, w2, w3] + in3[w0, w1, w2, w3], 0.0)\n"
    "      }\n"
    "    } } } }\n"
    "  }\n"
    "}\n";

START_TEST(test_guarded_conv_epilogue) {
  shape_stats st = check_text(fused_conv);
  ck_assert_int_eq(st.local_allocs, 0);
  /* conv update + its init + the inlined epilogue */
  ck_assert_int_eq(st.blocks, 3);
}
END_TEST

/* A subsampling copy (a Slice with steps 2 and 3) feeding a 1x1
 * convolution, prime and odd extents: %s is the copy's last two indices. */
static const char *subsample_conv_fmt =
    "func sub(in0: f32[1, 6, %d, %d], in1: f32[16, 6]) -> out0: f32[1, 16, 7, 5] {\n"
    "  block root() {\n"
    "    alloc t0: f32[1, 6, 7, 5]\n"
    "    for j0 in serial(0, 1) { for j1 in serial(0, 6) { for j2 in serial(0, 7) { for j3 in serial(0, 5) {\n"
    "      block t0(v0: S(0, 1) = j0, v1: S(0, 6) = j1, v2: S(0, 7) = j2, v3: S(0, 5) = j3) {\n"
    "        reads in0[v0, v1, %s]\n"
    "        writes t0[v0, v1, v2, v3]\n"
    "        t0[v0, v1, v2, v3] = in0[v0, v1, %s]\n"
    "      }\n"
    "    } } } }\n"
    "    for i0 in serial(0, 1) { for i1 in serial(0, 16) { for i2 in serial(0, 7) { for i3 in serial(0, 5) {\n"
    "      for r0 in serial(0, 6) {\n"
    "        block out0(vi0: S(0, 1) = i0, vi1: S(0, 16) = i1, vi2: S(0, 7) = i2, vi3: S(0, 5) = i3, vr0: R(0, 6) = r0) {\n"
    "          reads t0[vi0, vr0, vi2, vi3], in1[vi1, vr0]\n"
    "          writes out0[vi0, vi1, vi2, vi3]\n"
    "          init { out0[vi0, vi1, vi2, vi3] = 0.0 }\n"
    "          out0[vi0, vi1, vi2, vi3] = out0[vi0, vi1, vi2, vi3] + t0[vi0, vr0, vi2, vi3] * in1[vi1, vr0]\n"
    "        }\n"
    "      } } } } }\n"
    "  }\n"
    "}\n";

static shape_stats check_subsample(int h, int w, const char *idx) {
  char text[4096];
  snprintf(text, sizeof text, subsample_conv_fmt, h, w, idx, idx);
  return check_text(text);
}

/* A producer read at a stride along its innermost axis stays its own loop
 * nest (inlined, every vector load of the hot loop would be a gather); the
 * same copy at unit stride is inlined into the reduction: one block fewer. */
START_TEST(test_strided_producer_kept) {
  shape_stats strided = check_subsample(13, 15, "v2 * 2, v3 * 3");
  shape_stats unit = check_subsample(7, 5, "v2, v3");
  ck_assert_int_eq(strided.blocks, unit.blocks + 1);
}
END_TEST

/* The elementwise prologue t0 [7, 13] of the next two cases (%s, its body). */
#define PROLOGUE_T0                                                  \
  "    for j0 in serial(0, 7) { for j1 in serial(0, 13) {\n"          \
  "      block t0(v0: S(0, 7) = j0, v1: S(0, 13) = j1) {\n"          \
  "        reads in0[v0, v1]\n"                                       \
  "        writes t0[v0, v1]\n"                                       \
  "        t0[v0, v1] = %s\n"                                         \
  "      }\n"                                                         \
  "    } }\n"

/* An elementwise prologue in front of a matmul's A operand; prime and odd
 * extents. */
static const char *prologue_mm_fmt =
    "func pro(in0: f32[7, 13], in1: f32[13, 32]) -> out0: f32[7, 32] {\n"
    "  block root() {\n"
    "    alloc t0: f32[7, 13]\n"
    PROLOGUE_T0
    "    for i0 in serial(0, 7) { for i1 in serial(0, 32) { for r0 in serial(0, 13) {\n"
    "      block out0(vi0: S(0, 7) = i0, vi1: S(0, 32) = i1, vr0: R(0, 13) = r0) {\n"
    "        reads t0[vi0, vr0], in1[vr0, vi1]\n"
    "        writes out0[vi0, vi1]\n"
    "        init { out0[vi0, vi1] = 0.0 }\n"
    "        out0[vi0, vi1] = out0[vi0, vi1] + t0[vi0, vr0] * in1[vr0, vi1]\n"
    "      }\n"
    "    } } }\n"
    "  }\n"
    "}\n";

/* A prologue calling a transcendental (GPT-2's tanh GELU in front of its
 * projection) is computed once as its own loop nest, not inlined into the
 * reduction (where it would run once per use); a cheap one is inlined: one
 * block fewer. */
START_TEST(test_costly_prologue_kept) {
  char text[4096];
  snprintf(text, sizeof text, prologue_mm_fmt, "tanh(in0[v0, v1]) * 0.5");
  shape_stats costly = check_text(text);
  snprintf(text, sizeof text, prologue_mm_fmt, "in0[v0, v1] * 0.5");
  shape_stats cheap = check_text(text);
  ck_assert_int_eq(costly.blocks, cheap.blocks + 1);
  /* a reduction reading each element once (a row sum: no reuse) takes it inlined */
  static const char *rowsum =
      "func rs(in0: f32[7, 13]) -> out0: f32[7] {\n"
      "  block root() {\n"
      "    alloc t0: f32[7, 13]\n"
      PROLOGUE_T0
      "    for i0 in serial(0, 7) { for r0 in serial(0, 13) {\n"
      "      block out0(vi0: S(0, 7) = i0, vr0: R(0, 13) = r0) {\n"
      "        reads t0[vi0, vr0]\n"
      "        writes out0[vi0]\n"
      "        init { out0[vi0] = 0.0 }\n"
      "        out0[vi0] = out0[vi0] + t0[vi0, vr0]\n"
      "      }\n"
      "    } }\n"
      "  }\n"
      "}\n";
  snprintf(text, sizeof text, rowsum, "tanh(in0[v0, v1]) * 0.5");
  shape_stats costly_sum = check_text(text);
  snprintf(text, sizeof text, rowsum, "in0[v0, v1] * 0.5");
  ck_assert_int_eq(costly_sum.blocks, check_text(text).blocks);
}
END_TEST

/* Where block name sits: its loops' kinds (outermost first, 'p' parallel,
 * 'v' vectorized, 'u' unrolled, 's' serial) in kinds, their count. */
static int block_loop_kinds(sch_traced *t, const char *name, char *kinds, int max) {
  ts_diag d;
  ts_diag_clear(&d);
  int b, n;
  const int *lp;
  if (sch_t_get_block(t, name, &b, &d) || sch_t_get_loops(t, b, &lp, &n, &d)) return -1;
  int k = 0;
  for (int l = 0; l < n && k + 1 < max; l++) {
    const ir_stmt *ls = srch_find_loop(sch_traced_func(t), sch_t_loop(t, lp[l]).var);
    ck_assert_ptr_nonnull(ls);
    kinds[k++] = ls->u.loop.kind == IR_FOR_PARALLEL     ? 'p'
                 : ls->u.loop.kind == IR_FOR_VECTORIZED ? 'v'
                 : ls->u.loop.kind == IR_FOR_UNROLLED   ? 'u'
                                                        : 's';
  }
  kinds[k] = '\0';
  return n;
}

/* TVM's TBG (C[b,h,i,j] = sum_k Q[b,i,h,k] V[b,j,h,k]): the transpose of V
 * moves the axis the tile vectorizes (j) off V's contiguous one, so it is
 * not inlined (every vector load would be a gather) but computed, one
 * head at a time, under the tile's parallel heads loop, its own innermost
 * loop vectorized; Q's transpose keeps the contiguous axis and is inlined.
 * The matmul keeps its register tile (local accumulator, unrolled rows,
 * vectorized cols). Odd sizes too (5 heads, 24 rows, 20-wide head). */
START_TEST(test_transposed_operand_kept) {
  static const char *specs[] = {"transpose_batch_matmul:b=1,l=32,heads=4,d=16",
                                "transpose_batch_matmul:b=2,l=24,heads=5,d=20"};
  for (size_t i = 0; i < sizeof specs / sizeof *specs; i++) {
    ts_arena a;
    ts_arena_init(&a);
    ir_func *f = tu_workload(&a, specs[i]);
    shape_stats st = check_default(f);
    ck_assert_msg(st.local_allocs == 1, "%s: %d local buffers", specs[i], st.local_allocs);
    ck_assert_msg(st.unrolled >= 1, "%s: no unrolled rows loop", specs[i]);
    /* VT, the tile's init, update and copy-back; QT inlined */
    ck_assert_msg(st.blocks == 4, "%s: %d blocks", specs[i], st.blocks);
    ts_diag d;
    ts_diag_clear(&d);
    sch_traced *t = host_default(f);
    char kinds[64];
    ck_assert_int_ge(block_loop_kinds(t, "VT", kinds, sizeof kinds), 1);
    ck_assert_msg(strchr(kinds, 'p') && kinds[strlen(kinds) - 1] == 'v', "%s: VT under loops %s", specs[i], kinds);
    ck_assert_msg(srch_find_realize(sch_traced_func(t), "QT") == NULL, "%s: QT not inlined", specs[i]);
    sch_traced_free(t);
    ts_arena_fini(&a);
  }
}
END_TEST

/* The plain schedule parallelizes past leading unit loops: TVM CAP's padded
 * copy Xp [1, h, w, cap, cap, c] (batch 1) runs its rows in parallel (it
 * ran on one thread when only the outermost loop was considered), and
 * the whole kernel still computes the same. */
START_TEST(test_plain_parallel_past_unit) {
  ts_arena a;
  ts_arena_init(&a);
  static const char *spec = "conv2d_capsule:n=1,h=6,w=6,c=3,k=5,r=3,s=3,cap=4,stride=1,pad=1";
  ir_func *f = tu_workload(&a, spec);
  check_default(f);
  ts_diag d;
  ts_diag_clear(&d);
  sch_traced *t = host_default(f);
  char kinds[64];
  ck_assert_int_ge(block_loop_kinds(t, "Xp", kinds, sizeof kinds), 2);
  ck_assert_msg(kinds[0] == 's' && kinds[1] == 'p', "Xp under loops %s", kinds);
  sch_traced_free(t);
  ts_arena_fini(&a);
}
END_TEST

/* Checks the default schedule of symbolic function f at the sizes of its
 * one size var sq (names) against the interpreter, built; returns its
 * shape. */
static shape_stats check_symbolic(ts_arena *a, const ir_func *f, const char *sym) {
  ts_diag d;
  ts_diag_clear(&d);
  sch_traced *t = host_default(f);
  const ir_func *sf = sch_traced_func(t);
  shape_stats st = {0};
  ir_visitor v = {.stmt = stats_cb, .ctx = &st};
  ir_visit_stmt(&v, sf->body);
  const char *names[1] = {sym};
  static const int64_t sizes[] = {1, 13, 16, 40};
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
    const ir_func *fb = ir_func_bind_syms(a, f, 1, names, &sizes[i], &d), *sb = ir_func_bind_syms(a, sf, 1, names, &sizes[i], &d);
    ck_assert_msg(fb && sb, "%s", d.msg);
    tu_assert_equivalent(fb, sb);
    check_built(fb, sb);
  }
  sch_traced_free(t);
  return st;
}

/* BERT's attention products over a run-time sequence length sq (the two
 * kernels of a dynamic export, 2 heads of 16): Q.K^T with K's transpose
 * kept out of the hot loop and the scale and mask in the epilogue, and
 * P.V; both compute the same as the unscheduled function at sequence
 * lengths with and without tails. */
START_TEST(test_attention_symbolic) {
  static const char *qk =
      "kernel qk(q: f32[1, sq, 32], k: f32[1, sq, 32], m: f32[1, 1, sq, sq]) -> o: f32[1, 2, sq, sq] {\n"
      "  let kt: f32[1, 2, 16, sq]\n"
      "  let s: f32[1, 2, sq, sq]\n"
      "  kt[b, h, d, j] = k[b, j, h * 16 + d]\n"
      "  s[b, h, i, j] += q[b, i, h * 16 + r] * kt[b, h, r, j]\n"
      "  o[b, h, i, j] = s[b, h, i, j] * 0.25 + m[b, 0, i, j]\n"
      "}\n";
  static const char *pv =
      "kernel pv(p: f32[1, 2, sq, sq], v: f32[1, sq, 32]) -> o: f32[1, 2, sq, 16] {\n"
      "  o[b, h, i, d] += p[b, h, i, r] * v[b, r, h * 16 + d]\n"
      "}\n";
  const char *texts[2] = {qk, pv}, *names[2] = {"qk", "pv"};
  for (int i = 0; i < 2; i++) {
    ts_arena a;
    ts_arena_init(&a);
    ir_func *f = NULL;
    ts_diag d;
    ts_diag_clear(&d);
    ck_assert_msg(ir_parse_func(&a, texts[i], strlen(texts[i]), names[i], &f, &d) == TS_OK, "%s", d.msg);
    ck_assert_int_eq(f->nsyms, 1);
    shape_stats st = check_symbolic(&a, f, "sq");
    ck_assert_msg(st.parallel >= 1, "%s: no parallel loop", names[i]);
    ck_assert_msg(st.vectorized >= 1, "%s: no vectorized loop", names[i]);
    ts_arena_fini(&a);
  }
}
END_TEST

/* tun_default_opts.no_tiling (--no-default-tiling): the plain schedule, for
 * comparisons. */
static bool tensorized_cb(void *ctx, const ir_stmt *s) {
  if (s->kind == IR_BLOCK_REALIZE) {
    const ir_block *b = s->u.realize.block;
    const ir_annot *an = ir_annot_find(b->nannot, b->annots, "tessel.tensorized");
    if (an && an->kind == IR_ANN_STR && strstr(an->v.s, "x86.avx512.vnni.u8i8.")) (*(int *)ctx)++;
  }
  return true;
}

/* On a target with AVX-512 VNNI the int8 matmuls and channels-last convs
 * (odd and prime extents, strides, padded channels) get the tensorized
 * default (srch_tensor_default): with pack_weights (a model build's) on the
 * packed weight, equal to the layout reference in the interpreter; without
 * (the default) in the inputs' own layout, equal to the function; float
 * blocks keep the tiled default. */
START_TEST(test_int8_tensorized) {
  static const char *specs[] = {
      "matmul_u8s8:m=13,n=32,k=12",
      "matmul_int8:m=7,n=31,k=13",
      "conv2d_nhwc_u8s8:n=1,c=8,h=6,w=8,k=32,r=3,s=3,stride=1,pad=1",
      "conv2d_nhwc_u8s8:n=2,c=5,h=7,w=7,k=17,r=3,s=3,stride=2,pad=1",
      "conv2d_nhwc_u8s8:n=1,c=3,h=5,w=5,k=13,r=1,s=1,stride=1,pad=0",
  };
  ts_diag d;
  ts_diag_clear(&d);
  cg_target tg;
  ck_assert_int_eq(cg_target_parse("llvm -mattr=+avx512f,+avx512bw,+avx512vnni", &tg, &d), TS_OK);
  for (size_t i = 0; i < 2 * (sizeof specs / sizeof specs[0]); i++) {
    bool pack = i % 2 == 0;
    const char *spec = specs[i / 2];
    ts_arena a;
    ts_arena_init(&a);
    ir_func *f = tu_workload(&a, spec);
    sch_traced *t = NULL;
    ck_assert_msg(tun_schedule_opts(f, NULL, &tg, &(tun_default_opts){.pack_weights = pack}, &t, &d) == TS_OK, "%s: %s",
                  spec, d.msg);
    int n = 0;
    ir_visitor v = {.stmt = tensorized_cb, .ctx = &n};
    ir_visit_stmt(&v, sch_traced_func(t)->body);
    ck_assert_msg(n >= 1, "%s: %d tensorized blocks", spec, n);
    char *js = sch_trace_to_json(sch_traced_trace(t));
    ck_assert_msg(pack == (strstr(js, "TransformLayout") != NULL), "%s: %s", spec, js);
    free(js);
    const ir_func *ref = pack ? sch_layout_reference(&a, f, sch_traced_trace(t), &d) : f;
    ck_assert_msg(ref != NULL && (ref != f) == pack, "%s: %s", spec, d.msg);
    tu_assert_equivalent(ref, sch_traced_func(t));
    sch_traced_free(t);
    ts_arena_fini(&a);
  }
  /* a float matmul is not int8: the tiled default, no intrinsic */
  ts_arena a;
  ts_arena_init(&a);
  sch_traced *t = NULL;
  ck_assert(tun_schedule(tu_workload(&a, "matmul:m=16,n=32,k=8"), NULL, &tg, &t, &d) == TS_OK);
  int n = 0;
  ir_visitor v = {.stmt = tensorized_cb, .ctx = &n};
  ir_visit_stmt(&v, sch_traced_func(t)->body);
  ck_assert_int_eq(n, 0);
  sch_traced_free(t);
  ts_arena_fini(&a);
}
END_TEST

/* The register tile around the AVX2 pmaddwd kernel: the product of the
 * unrolled loops' extents above the tensorized block times its intrinsic's
 * rows (from its name), and how many of those loops there are. */
typedef struct avx2_tile {
  int64_t acc;
  int rows, nested;
  bool wide16; /* a .packed16 kernel: the weight stored as i16 */
} avx2_tile;

static bool pmaddwd_hit(const ir_block *b, int64_t prod, int nunrolled, void *ctx) {
  avx2_tile *out = ctx;
  const ir_annot *an = ir_annot_find(b->nannot, b->annots, "tessel.tensorized");
  if (an && an->kind == IR_ANN_STR && strstr(an->v.s, "x86.avx2.pmaddwd.")) {
    const char *pk = strstr(an->v.s, ".packed16.");
    int r = pk ? atoi(pk + 10) : atoi(strstr(an->v.s, ".packed.") + 8);
    out->wide16 = pk != NULL;
    out->acc = prod * r;
    out->rows = r;
    out->nested = nunrolled;
    return true;
  }
  return false;
}

static void find_tile(const ir_stmt *s, int64_t prod, int nunrolled, avx2_tile *out) {
  walk_unrolled(s, prod, nunrolled, pmaddwd_hit, out);
}

/* On AVX2 without VNNI (16 ymm) the int8 default takes the vpmaddwd kernel
 * on the weight packed as i16 (.packed16: the packed param is i16) with the
 * register tile of least cost (1/C widenings of A per multiply + 1/(2R) for
 * the weight re-read per row): rows x column vectors with at most 14
 * accumulators (A's pair and a product in the rest), 2 x 4 where the
 * channels and rows allow, rows from a conv's output rows h where its w is
 * short (7), equal to the packed reference. */
START_TEST(test_int8_avx2_tile) {
  static const struct {
    const char *spec;
    int64_t acc;
  } cases[] = {
      {"matmul_u8s8:m=56,n=64,k=8", 8},                                      /* 2 rows x 4 vectors */
      {"matmul_u8s8:m=14,n=256,k=4", 8},                                     /* 2 x 4 */
      {"matmul_u8s8:m=7,n=8,k=4", 7},                                        /* one column: 7 rows */
      {"matmul_u8s8:m=7,n=16,k=4", 14},                                      /* 7 x 2 */
      {"conv2d_nhwc_u8s8:n=1,c=8,h=4,w=8,k=32,r=3,s=3,stride=1,pad=1", 8},  /* 2 x 4 */
      {"conv2d_nhwc_u8s8:n=1,c=8,h=4,w=7,k=32,r=3,s=3,stride=1,pad=1", 8},  /* rows from h too: 2 x 4, not 7 x 2 */
  };
  ts_diag d;
  ts_diag_clear(&d);
  cg_target tg;
  ck_assert_int_eq(cg_target_parse("llvm -mtriple=x86_64-linux-gnu -mattr=+avx2,+fma", &tg, &d), TS_OK);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ts_arena a;
    ts_arena_init(&a);
    ir_func *f = tu_workload(&a, cases[i].spec);
    sch_traced *t = NULL;
    ck_assert_msg(tun_schedule_opts(f, NULL, &tg, &(tun_default_opts){.pack_weights = true}, &t, &d) == TS_OK,
                  "%s: %s", cases[i].spec, d.msg);
    avx2_tile tl = {0, 0, 0};
    find_tile(sch_traced_func(t)->body, 1, 0, &tl);
    ck_assert_msg(tl.rows > 0, "%s: no pmaddwd kernel", cases[i].spec);
    ck_assert_msg(tl.wide16, "%s: the kernel is not the i16-weight one", cases[i].spec);
    ck_assert_int_eq(sch_traced_func(t)->params[1]->dtype.code, IR_I16);
    ck_assert_msg(tl.acc == cases[i].acc, "%s: %lld accumulators (kernel rows %d, %d unrolled loops)", cases[i].spec,
                  (long long)tl.acc, tl.rows, tl.nested);
    shape_stats st = {0};
    ir_visitor v = {.stmt = stats_cb, .ctx = &st};
    ir_visit_stmt(&v, sch_traced_func(t)->body);
    ck_assert_msg(st.parallel >= 1, "%s: no parallel loop", cases[i].spec);
    const ir_func *ref = sch_layout_reference(&a, f, sch_traced_trace(t), &d);
    ck_assert_msg(ref != NULL, "%s: %s", cases[i].spec, d.msg);
    tu_assert_equivalent(ref, sch_traced_func(t));
    sch_traced_free(t);
    ts_arena_fini(&a);
  }
}
END_TEST

/* A u8 x i8 matmul over a model's symbolic rows ([batch, seq, K] x [K, N],
 * a dynamically quantized transformer's MatMulInteger) with its weight
 * layout-free (a model build's constant) gets the AVX2 pmaddwd kernel on the
 * packed weight too: one row per call on the symbolic iters (their extent is
 * known only at run time), the column tiles outside them and parallel; equal
 * to the packed reference at several sizes of the size vars. */
START_TEST(test_int8_avx2_symbolic_rows) {
  static const char *text = "kernel linq(x: u8[bs, sq, 36], w: i8[36, 48]) -> y: i32[bs, sq, 48] {\n"
                            "  y[i, j, n] += i32(x[i, j, k]) * i32(w[k, n])\n"
                            "}\n";
  ts_arena a;
  ts_arena_init(&a);
  ir_func *f = NULL;
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_msg(ir_parse_func(&a, text, strlen(text), "linq", &f, &d) == TS_OK, "%s", d.msg);
  ck_assert_int_eq(f->nsyms, 2);
  ck_assert(ir_annot_set(&a, &f->nannot, &f->annots,
                         (ir_annot){.key = IR_FUNC_ANN_LAYOUT_FREE, .kind = IR_ANN_INT, .v.i = 2}) == TS_OK);
  cg_target tg;
  ck_assert_int_eq(cg_target_parse("llvm -mtriple=x86_64-linux-gnu -mattr=+avx2,+fma", &tg, &d), TS_OK);
  sch_traced *t = NULL;
  ck_assert_msg(tun_schedule_opts(f, NULL, &tg, &(tun_default_opts){.pack_weights = true}, &t, &d) == TS_OK, "%s",
                d.msg);
  avx2_tile tl = {0, 0, 0};
  find_tile(sch_traced_func(t)->body, 1, 0, &tl);
  ck_assert_msg(tl.rows == 1, "no one-row pmaddwd kernel (rows %d)", tl.rows);
  ck_assert_msg(tl.acc >= 2, "%lld accumulators", (long long)tl.acc);
  shape_stats st = {0};
  ir_visitor v = {.stmt = stats_cb, .ctx = &st};
  ir_visit_stmt(&v, sch_traced_func(t)->body);
  ck_assert_msg(st.parallel >= 1, "no parallel loop");
  const ir_func *ref = sch_layout_reference(&a, f, sch_traced_trace(t), &d);
  ck_assert_msg(ref != NULL, "%s", d.msg);
  static const char *names[2] = {"bs", "sq"};
  static const int64_t sizes[][2] = {{1, 1}, {2, 13}, {3, 5}};
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
    const ir_func *rb = ir_func_bind_syms(&a, ref, 2, names, sizes[i], &d),
                  *sb = ir_func_bind_syms(&a, sch_traced_func(t), 2, names, sizes[i], &d);
    ck_assert_msg(rb && sb, "%s", d.msg);
    tu_assert_equivalent(rb, sb);
  }
  sch_traced_free(t);
  ts_arena_fini(&a);
}
END_TEST

START_TEST(test_switch_off) {
  ts_arena a;
  ts_arena_init(&a);
  tun_default_opts o = {.no_tiling = true};
  shape_stats st = check_default_opts(tu_workload(&a, "matmul:m=64,n=48,k=40"), &o);
  ck_assert_int_eq(st.local_allocs, 0);
  ck_assert_int_eq(st.unrolled, 0);
  ts_arena_fini(&a);
}
END_TEST

/* The RFactor instructions in f's default trace on this host. */
static int default_rfactors(const ir_func *f) {
  sch_traced *t = host_default(f);
  const sch_trace *tr = sch_traced_trace(t);
  int n = 0;
  for (int i = 0; i < sch_trace_len(tr); i++) n += sch_trace_inst(tr, i)->kind == SCH_I_RFACTOR;
  sch_traced_free(t);
  return n;
}

/* A long reduction into few outputs, read contiguously along the reduction
 * (a norm to a scalar, row sums, a softmax's max and sum, a layer norm's
 * mean and variance), is rfactored by vector lanes and stays equal to the
 * interpreter; one that is too short (under 4 vectors of partial sums:
 * n = 64) or not contiguous, or a column sum whose output axis is the
 * contiguous one, is not. The extents give the same answers with AVX2's 8
 * lanes and AVX-512's 16. */
START_TEST(test_rfactor_long_reduction) {
  static const char *colsum =
      "kernel colsum(X: f32[96, 64]) -> Y: f32[64] {\n"
      "  Y[j] += X[i, j]\n"
      "}\n";
  static const struct {
    const char *spec;
    int rfactors;
  } cases[] = {{"norm:b=1,m=8,n=128", 1},  {"norm:b=3,m=5,n=256", 1}, {"reduce_sum:m=6,n=256", 1},
               {"softmax:m=5,n=256", 2},   {"layernorm:m=3,n=256", 2}, {"reduce_sum:m=6,n=7", 0},
               {"norm:b=2,m=16,n=5", 0},   {"reduce_sum:m=6,n=64", 0}};
  ts_arena a;
  ts_arena_init(&a);
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    ir_func *f = tu_workload(&a, cases[c].spec);
    ck_assert_msg(default_rfactors(f) >= cases[c].rfactors && (cases[c].rfactors || default_rfactors(f) == 0),
                  "%s: %d rfactors in the default trace, want %d", cases[c].spec, default_rfactors(f),
                  cases[c].rfactors);
    shape_stats st = check_default(f);
    if (cases[c].rfactors) ck_assert_msg(st.vectorized > 0, "%s: nothing vectorized", cases[c].spec);
  }
  ir_func *f = NULL;
  sch_state *ss = tu_schedule_text(&a, colsum, &f);
  sch_free(ss);
  ck_assert_int_eq(default_rfactors(f), 0);
  check_default(f);
  ts_arena_fini(&a);
}
END_TEST

int main(void) {
  Suite *s = suite_create("default_schedule");
  TCase *tc = tcase_create("default_schedule");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_tiled);
  tcase_add_test(tc, test_tiled_symbolic_rows);
  tcase_add_test(tc, test_transposed_operand_kept);
  tcase_add_test(tc, test_attention_symbolic);
  tcase_add_test(tc, test_plain_parallel_past_unit);
  tcase_add_test(tc, test_int8_avx2_symbolic_rows);
  tcase_add_test(tc, test_winograd_default_decisions);
  tcase_add_test(tc, test_fallback_extents);
  tcase_add_test(tc, test_rows_from_one_vector);
  tcase_add_test(tc, test_nchwc_channel_blocks);
  tcase_add_test(tc, test_guarded_conv_epilogue);
  tcase_add_test(tc, test_switch_off);
  tcase_add_test(tc, test_rfactor_long_reduction);
  tcase_add_test(tc, test_strided_producer_kept);
  tcase_add_test(tc, test_costly_prologue_kept);
  tcase_add_test(tc, test_int8_tensorized);
  tcase_add_test(tc, test_int8_avx2_tile);
  suite_add_tcase(s, tc);
  SRunner *r = srunner_create(s);
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
