/* test_rules.c — the design space: sketches of every built-in workload at
 * small odd sizes, random instantiations either rejected by a postprocessor
 * (with a reason) or equivalent to the unscheduled function in the
 * interpreter; matmul's three SSRSRS sketches and the expressiveness of the
 * hand-written sgemm schedule; VerifyRegisterTile's budget; the serial
 * sketch of a small kernel on two cores; AutoInline of a pad stage, an elementwise
 * chain and a transpose; a candidate built, run and verified. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ir/schedule/layout.h"
#include "runtime/runtime.h"
#include "ir/parse.h"
#include "ir/print.h"
#include "search/search.h"
#include "tests/schedule/util.h"
#include "tuner/build.h"
#include "tuner/verify.h"

static cg_target host(void) {
  cg_target t;
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_msg(cg_target_parse("llvm", &t, &d) == TS_OK, "%s", d.msg);
  return t;
}

static sch_trace **sketches_with(const ir_func *f, const srch_space_opts *o, int *n) {
  cg_target t = host();
  sch_trace **sk;
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_msg(srch_sketches(f, &t, o, &sk, n, &d) == TS_OK, "%s", d.msg);
  ck_assert_int_gt(*n, 0);
  return sk;
}

/* Builds candidate ts of f into path, runs it in a fork and verifies its
 * outputs against the interpreter on f. */
static void build_run_verify(const ir_func *f, sch_traced *ts, const char *path, const char *what) {
  cg_target t = host();
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_msg(tun_build_shared(sch_traced_func(ts), &t, path, &d) == TS_OK, "%s: %s", what, d.msg);
  tsrt_measure_opts mo = {.repeat = 1, .number = 1, .timeout_s = 30, .seed = 3, .want_outputs = true};
  tsrt_measure_result res;
  tsrt_measure_forked(path, &mo, &res);
  ck_assert_msg(res.status == TS_OK, "%s: %s", what, res.error);
  tun_verify_result vr;
  ck_assert_int_eq(tun_verify(f, 3, res.outputs, res.outputs_bytes, &vr, &d), TS_OK);
  ck_assert_msg(vr.matched, "%s: %s", what, vr.detail);
  tsrt_result_fini(&res);
}

/* The host target's f32 vector lanes. */
static int64_t lanes(void) {
  cg_target t = host();
  return t.vector_bits >= 32 ? t.vector_bits / 32 : 1;
}

/* The loop of var v in f (a walk; NULL if none). */
typedef struct loop_find {
  const ir_var *v;
  const ir_stmt *found;
} loop_find;
static bool loop_find_cb(void *ctx, const ir_stmt *s) {
  loop_find *c = ctx;
  if (s->kind == IR_FOR && s->u.loop.var == c->v) c->found = s;
  return !c->found;
}
static const ir_stmt *srch_test_loop(const ir_func *f, const ir_var *v) {
  loop_find c = {v, NULL};
  ir_visitor vis = {.stmt = loop_find_cb, .ctx = &c};
  ir_visit_stmt(&vis, f->body);
  return c.found;
}

static sch_trace **sketches(const ir_func *f, int *n) { return sketches_with(f, NULL, n); }
/* One core: the sketches without a small kernel's serial twins
 * (test_serial_sketch_small), so their number does not depend on the machine. */
static sch_trace **sketches1(const ir_func *f, int *n) {
  srch_space_opts o = {.num_cores = 1};
  return sketches_with(f, &o, n);
}

static void free_sketches(sch_trace **sk, int n) {
  for (int i = 0; i < n; i++) sch_trace_free(sk[i]);
  ts_free(sk);
}

static int count_kind(const sch_trace *tr, sch_inst_kind k) {
  int c = 0;
  for (int i = 0; i < sch_trace_len(tr); i++) c += sch_trace_inst(tr, i)->kind == k;
  return c;
}

static const char *specs[] = {
    "matmul:m=7,n=9,k=5",
    "batch_matmul:b=3,m=5,n=7,k=9",
    "dense:m=7,n=9,k=5,bias=1,act=relu",
    "dense:m=5,n=7,k=3,bias=0,act=gelu",
    "matmul_int8:m=7,n=5,k=9",
    "matmul_int8:m=5,n=32,k=8", /* shifted, packed and tensorized on a VNNI host */
    "matmul_u8s8:m=7,n=5,k=9",
    "matmul_u8s8:m=3,n=16,k=12",
    "conv2d_nchw:n=1,c=3,h=7,w=7,k=5,r=3,s=3,stride=1,pad=1",
    "conv2d_nhwc:n=1,c=3,h=7,w=7,k=5,r=3,s=3,stride=2,pad=1",
    "depthwise_conv2d:n=1,c=3,h=7,w=7,r=3,s=3,stride=1,pad=1",
    "conv2d_nchwc:n=1,c=6,h=7,w=9,k=32,r=3,s=3,stride=2,pad=1,dilation=1,cb=3,kb=32",
    "conv2d_nchwc:n=1,c=3,h=13,w=11,k=16,r=7,s=7,stride=2,pad=3,dilation=1,cb=1,kb=16",
    "depthwise_conv2d_nchwc:n=1,c=32,h=9,w=7,r=3,s=3,stride=2,pad=1,dilation=1,cb=16",
    "conv2d_transpose:n=1,c=3,h=5,w=5,k=3,r=3,s=3,stride=2,pad=1",
    "max_pool2d:n=1,c=3,h=9,w=9,r=3,s=3,stride=2,pad=1",
    "avg_pool2d:n=1,c=3,h=9,w=9,r=3,s=3,stride=2,pad=1",
    "softmax:m=5,n=7",
    "layernorm:m=5,n=7",
    "add:m=7,n=9",
    "mul:m=7,n=9",
    "relu:m=7,n=9",
    "gelu:m=7,n=9",
    "sigmoid:m=7,n=9",
    "exp:m=7,n=9",
    "transpose:m=7,n=9",
    "reduce_sum:m=7,n=9",
    "transpose_batch_matmul:b=1,l=5,heads=2,d=3",
};

/* Every workload: 20 random instantiations per sketch are rejected with a
 * reason or equivalent; at least one passes. */
START_TEST(test_workload_space) {
  const char *spec = specs[_i];
  ts_arena a;
  ts_arena_init(&a);
  ir_func *f = tu_workload(&a, spec);
  int n;
  sch_trace **sk = sketches(f, &n);
  cg_target t = host();
  int passed = 0, rejected = 0;
  for (int s = 0; s < n; s++) {
    for (int k = 0; k < 20; k++) {
      ts_diag d;
      ts_diag_clear(&d);
      sch_traced *ts = srch_instantiate(sk[s], f, &t, true, (uint64_t)(1000 * s + k + 1), &d);
      if (!ts) {
        ck_assert_msg(d.msg[0], "%s sketch %d seed %d: rejected without a reason", spec, s, k);
        rejected++;
        continue;
      }
      char why[512] = "";
      /* against f with the candidate's weight re-layouts applied (a
       * layout-free weight is packed: docs/LAYOUT.md) */
      const ir_func *ref = sch_layout_reference(&a, f, sch_traced_trace(ts), &d);
      ck_assert_msg(ref != NULL, "%s: %s", spec, d.msg);
      bool ok = tu_equivalent(ref, sch_traced_func(ts), 7, why, sizeof why);
      if (!ok) {
        char *js = sch_trace_to_json(sch_traced_trace(ts));
        ck_abort_msg("%s sketch %d seed %d: %s\n%s", spec, s, k, why, js ? js : "");
      }
      /* the candidate's trace (with EnterPostproc) replays to the same function */
      sch_traced *again = sch_trace_replay(sch_traced_trace(ts), f, 1, &d);
      ck_assert_msg(again != NULL, "%s: replay of a candidate: %s", spec, d.msg);
      sch_traced_free(again);
      sch_traced_free(ts);
      passed++;
    }
  }
  ck_assert_msg(passed > 0, "%s: no instantiation passed (%d rejected)", spec, rejected);
  free_sketches(sk, n);
  ts_arena_fini(&a);
}
END_TEST

/* matmul: SSRSRS (10 loops on C), write cache none / level 1 / level 2;
 * n = 48 is a multiple of the lanes and last-index-only, so the sketches are
 * the vector-block ones (one more loop: the width split, sampled among the
 * multiples of the target's lanes that divide 48), which replace the plain
 * ones, and a fourth, register-resident one ("SSRRS": spatial loops split
 * three ways, both reduction pieces above the register tile, no cache). */
START_TEST(test_matmul_sketches) {
  ts_arena a;
  ts_arena_init(&a);
  ir_func *f = tu_workload(&a, "matmul:m=64,n=48,k=32");
  int n;
  /* the plain sketches (the FMA micro-kernel ones: test_intrin): --no-tensorize */
  srch_space_opts so = {.num_cores = 1, /* no serial twins (test_serial_sketch_small) */
                        .rule_mask = srch_rule_mask_without(0, SRCH_RULE_MULTI_LEVEL_TILING_TENSOR)};
  sch_trace **sk = sketches_with(f, &so, &n);
  ck_assert_int_eq(n, 4);
  for (int s = 0; s < 4; s++) {
    bool vb = true, rr = s == 3;
    ck_assert_int_eq(count_kind(sk[s], SCH_I_SAMPLE_PERFECT_TILE), 3);
    ck_assert_int_eq(count_kind(sk[s], SCH_I_REORDER), 1);
    ck_assert_int_eq(count_kind(sk[s], SCH_I_CACHE_WRITE), s % 3 == 0 ? 0 : 1);
    ck_assert_int_eq(count_kind(sk[s], SCH_I_SAMPLE_CATEGORICAL), vb ? 2 : 1);
    for (int i = 0; i < sch_trace_len(sk[s]); i++)
      ck_assert_int_eq(sch_trace_inst(sk[s], i)->decision.n, 0);
    /* structure of a replay: C has 10 loops and the width loop, the reduction ones at 4 and 7 */
    ts_diag d;
    ts_diag_clear(&d);
    sch_traced *ts = sch_traced_new(f, 5, &d);
    ck_assert_int_eq(sch_trace_apply(sk[s], ts, true, NULL, &d), TS_OK);
    sch_block b;
    sch_loop *loops;
    int nl;
    tu_ok(sch_get_block(sch_traced_state(ts), "C", &b, &d), &d);
    tu_ok(sch_get_loops(sch_traced_state(ts), b, &loops, &nl, &d), &d);
    ck_assert_int_eq(nl, rr ? 9 : vb ? 11 : 10);
    if (rr) { /* S0 S1 R0 R1 S3 w: m 3 + n 3 + k 2 + the width */
      const ir_stmt *l4 = srch_test_loop(sch_traced_func(ts), loops[4].var);
      const ir_stmt *l5 = srch_test_loop(sch_traced_func(ts), loops[5].var);
      ck_assert(srch_loop_is_reduction(l4, loops[4].var) && srch_loop_is_reduction(l5, loops[5].var));
      for (int k = 6; k < 9; k++)
        ck_assert(!srch_loop_is_reduction(srch_test_loop(sch_traced_func(ts), loops[k].var), loops[k].var));
    }
    int lv = s % 3;
    if (lv > 0) {
      /* the copy-back sits under loop level lv (index 2lv-1) */
      sch_block *kids;
      int nk;
      tu_ok(sch_get_child_blocks_of_loop(sch_traced_state(ts), loops[2 * lv - 1], &kids, &nk, &d), &d);
      ck_assert_int_eq(nk, 2);
      tu_ok(sch_get_child_blocks_of_loop(sch_traced_state(ts), loops[2 * lv], &kids, &nk, &d), &d);
      ck_assert_int_eq(nk, 1);
    }
    if (vb) { /* the width loop is innermost: a multiple of the lanes dividing 48 */
      tu_ok(sch_get_loops(sch_traced_state(ts), b, &loops, &nl, &d), &d);
      const ir_stmt *in = srch_test_loop(sch_traced_func(ts), loops[nl - 1].var);
      int64_t e = 0;
      ck_assert(in && ir_as_int(in->u.loop.extent, &e));
      ck_assert_msg(e % lanes() == 0 && 48 % e == 0, "width %lld", (long long)e);
    }
    sch_traced_free(ts);
  }
  free_sketches(sk, n);
  ts_arena_fini(&a);
}
END_TEST

static cg_target target(const char *text) {
  cg_target t;
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_msg(cg_target_parse(text, &t, &d) == TS_OK, "%s", d.msg);
  return t;
}

/* Sets the decisions of tr's samplers in order: perfect tiles from tiles[]
 * (n pieces each), categoricals from cats[]. */
static void set_decisions(sch_trace *tr, const int64_t (*tiles)[4], const int *ntile, const int64_t *cats,
                          ts_diag *d) {
  int k = 0, c = 0;
  for (int i = 0; i < sch_trace_len(tr); i++) {
    const sch_inst *x = sch_trace_inst(tr, i);
    if (x->kind == SCH_I_SAMPLE_PERFECT_TILE) {
      sch_decision dec = {.n = ntile[k], .v = (int64_t *)tiles[k]};
      ck_assert_int_eq(sch_trace_set_decision(tr, i, &dec, d), TS_OK);
      k++;
    } else if (x->kind == SCH_I_SAMPLE_CATEGORICAL) {
      sch_decision dec = {.n = 1, .v = (int64_t *)&cats[c++]};
      ck_assert_int_eq(sch_trace_set_decision(tr, i, &dec, d), TS_OK);
    }
  }
}

/* The sgemm schedule of examples/sgemm_1024.json (C tiled 8 x 16 in registers,
 * one zmm per row) is a point of sketch 1 (vector-block, write cache at level
 * 1) on an AVX-512 target: width 16 (the first multiple of its 16 lanes),
 * the rest of n tiled [32, 1, 2, 1]. */
static sch_traced *sgemm_candidate(const ir_func *f, sch_trace *sketch, ts_diag *d) {
  sch_trace *tr = sch_trace_copy(sketch);
  static const int64_t tiles[3][4] = {{128, 1, 1, 8}, {32, 1, 2, 1}, {1024, 1}};
  static const int ntile[3] = {4, 4, 2};
  static const int64_t cats[2] = {0, 3}; /* width 16, unroll 512 */
  set_decisions(tr, tiles, ntile, cats, d);
  cg_target t = target("llvm -mcpu=skylake-avx512");
  sch_traced *ts = srch_instantiate(tr, f, &t, false, 1, d);
  sch_trace_free(tr);
  return ts;
}

START_TEST(test_sgemm_expressible) {
  ts_arena a;
  ts_arena_init(&a);
  ir_func *f = tu_workload(&a, "matmul:m=1024,n=1024,k=1024");
  int n;
  cg_target skx = target("llvm -mcpu=skylake-avx512");
  sch_trace **sk;
  ts_diag d0;
  ts_diag_clear(&d0);
  srch_space_opts so = {.num_cores = 1, /* no serial twins (test_serial_sketch_small) */
                        .rule_mask = srch_rule_mask_without(0, SRCH_RULE_MULTI_LEVEL_TILING_TENSOR)};
  ck_assert_msg(srch_sketches(f, &skx, &so, &sk, &n, &d0) == TS_OK, "%s", d0.msg);
  ts_diag d;
  ts_diag_clear(&d);
  sch_traced *ts = sgemm_candidate(f, sk[1], &d);
  ck_assert_msg(ts != NULL, "%s", d.msg);
  const sch_trace *tr = sch_traced_trace(ts);
  ck_assert_int_eq(count_kind(tr, SCH_I_ENTER_POSTPROC), 1);
  ck_assert_int_ge(count_kind(tr, SCH_I_VECTORIZE), 1);
  ck_assert_int_ge(count_kind(tr, SCH_I_PARALLEL), 1);
  ck_assert_int_eq(count_kind(tr, SCH_I_DECOMPOSE_REDUCTION), 1);
  char *text = ir_func_to_string(sch_traced_func(ts));
  ck_assert_ptr_nonnull(strstr(text, "pragma_auto_unroll_max_step"));
  ck_assert_ptr_nonnull(strstr(text, "vectorized(0, 16)"));
  ts_free(text);
  sch_traced_free(ts);
  free_sketches(sk, n);
  ts_arena_fini(&a);
}
END_TEST

/* VerifyRegisterTile: the accumulator tile under the innermost reduction loop
 * (rows x vector registers per row) must leave SRCH_TILE_SPARE_REGS (3) of the
 * register file. matmul 64x48x32, vector-block sketch without write cache,
 * width 16 (the second of the widths 8, 16, 24, 48 on AVX2; the first of 16,
 * 48 on AVX-512), k tiled [1, 32]: 8 rows need 16 ymm (refused on AVX2's 16
 * registers) or 8 zmm (kept on AVX-512's 32), 4 rows 8 ymm (kept). */
START_TEST(test_register_tile) {
  static const struct {
    const char *target;
    int64_t rows, width_idx, regs; /* regs 0: refused */
  } cases[] = {
      {"llvm -mattr=+avx2,+fma", 8, 1, 0},
      {"llvm -mattr=+avx2,+fma", 4, 1, 8},
      {"llvm -mcpu=skylake-avx512", 8, 0, 8},
      {"llvm -mcpu=skylake-avx512", 32, 0, 0},
  };
  ts_arena a;
  ts_arena_init(&a);
  ir_func *f = tu_workload(&a, "matmul:m=64,n=48,k=32");
  srch_space_opts so = {.num_cores = 1, /* no serial twins (test_serial_sketch_small) */
                        .rule_mask = srch_rule_mask_without(0, SRCH_RULE_MULTI_LEVEL_TILING_TENSOR)};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    cg_target t = target(cases[c].target);
    ck_assert_int_eq(srch_vector_regs(&t), t.vector_bits >= 512 ? 32 : 16);
    sch_trace **sk;
    int n;
    ts_diag d;
    ts_diag_clear(&d);
    ck_assert_msg(srch_sketches(f, &t, &so, &sk, &n, &d) == TS_OK, "%s", d.msg);
    ck_assert_int_eq(n, 4);
    sch_trace *tr = sch_trace_copy(sk[0]);
    int64_t tiles[3][4] = {{64 / cases[c].rows, 1, 1, cases[c].rows}, {3, 1, 1, 1},
                           {1, 32}};
    static const int ntile[3] = {4, 4, 2};
    int64_t cats[2] = {cases[c].width_idx, 0};
    set_decisions(tr, (const int64_t(*)[4])tiles, ntile, cats, &d);
    ts_diag_clear(&d);
    sch_traced *ts = srch_instantiate(tr, f, &t, false, 1, &d);
    if (cases[c].regs == 0) {
      ck_assert_msg(ts == NULL, "%s, %lld rows: not refused", cases[c].target, (long long)cases[c].rows);
      ck_assert_msg(strstr(d.msg, "VerifyRegisterTile: block C keeps") != NULL, "%s", d.msg);
    } else {
      ck_assert_msg(ts != NULL, "%s, %lld rows: %s", cases[c].target, (long long)cases[c].rows, d.msg);
      ck_assert_int_eq(srch_register_tile(ts, "C", &t), cases[c].regs);
      sch_traced_free(ts);
    }
    sch_trace_free(tr);
    free_sketches(sk, n);
  }
  ts_arena_fini(&a);
}
END_TEST

static bool has_block(const ir_func *f, const char *name) {
  sch_state *s = sch_create(f, 1, NULL);
  sch_block b;
  bool ok = sch_get_block(s, name, &b, NULL) == TS_OK;
  sch_free(s);
  return ok;
}

/* AutoInline: a gelu-like chain is inlined; the pad stage of a padded conv
 * (a select guarding a load) stays a stage, as MetaSchedule's CPU AutoInline
 * keeps if_then_else producers of a reduction (RandomComputeLocation places
 * it). */
START_TEST(test_auto_inline) {
  static const char *src[3] = {
      "kernel pconv(X: f32[1, 3, 7, 7], W: f32[5, 3, 3, 3]) -> Y: f32[1, 5, 7, 7] {\n"
      "  let P: f32[1, 3, 9, 9]\n"
      "  P[b, c, h, w] = select(h - 1 >= 0 && h - 1 < 7 && w - 1 >= 0 && w - 1 < 7, X[b, c, h - 1, w - 1], 0.0)\n"
      "  Y[b, o, p, q] += P[b, ci, p + ri, q + si] * W[o, ci, ri, si]\n"
      "}\n",
      "kernel gchain(X: f32[7, 9]) -> Y: f32[7, 9] {\n"
      "  let T1: f32[7, 9]\n"
      "  let T2: f32[7, 9]\n"
      "  T1[i, j] = X[i, j] * 0.707106781\n"
      "  T2[i, j] = 1.0 + erf(T1[i, j])\n"
      "  Y[i, j] = 0.5 * X[i, j] * T2[i, j]\n"
      "}\n",
      /* a transpose feeding a matmul (TVM's TBG): reordered reads stay a
       * stage, as MetaSchedule's require_ordered keeps them */
      "kernel tmm(A: f32[5, 3], B: f32[7, 3]) -> C: f32[5, 7] {\n"
      "  let BT: f32[3, 7]\n"
      "  BT[k, j] = B[j, k]\n"
      "  C[i, j] += A[i, k] * BT[k, j]\n"
      "}\n"};
  static const char *inlined[3][2] = {{NULL, NULL}, {"T1", "T2"}, {NULL, NULL}};
  static const char *kept[3] = {"P", NULL, "BT"};
  /* P stays in every instance; BT is left to RandomComputeLocation, whose
   * sampler may still inline it: kept in some instances, placed by a
   * SampleComputeLocation in every sketch */
  static const bool always[3] = {true, false, false};
  for (int w = 0; w < 3; w++) {
    ts_arena a;
    ts_arena_init(&a);
    ir_func *f;
    ts_diag d;
    ts_diag_clear(&d);
    ck_assert_msg(ir_parse_func(&a, src[w], strlen(src[w]), "test.tsl", &f, &d) == TS_OK, "%s", d.msg);
    ck_assert(has_block(f, inlined[w][0] ? inlined[w][0] : kept[w]));
    int n;
    sch_trace **sk = sketches(f, &n);
    ck_assert_int_eq(count_kind(sk[0], SCH_I_COMPUTE_INLINE), inlined[w][1] ? 2 : 0);
    cg_target t = host();
    int passed = 0, with_kept = 0;
    for (int s = 0; s < n; s++) {
      if (kept[w] && !always[w]) ck_assert_int_ge(count_kind(sk[s], SCH_I_SAMPLE_COMPUTE_LOCATION), 1);
      for (int k = 0; k < 5; k++) {
        sch_traced *ts = srch_instantiate(sk[s], f, &t, true, (uint64_t)(k + 1), &d);
        if (!ts) continue;
        for (int i = 0; i < 2; i++)
          if (inlined[w][i]) ck_assert(!has_block(sch_traced_func(ts), inlined[w][i]));
        if (kept[w] && always[w]) ck_assert(has_block(sch_traced_func(ts), kept[w]));
        with_kept += kept[w] && has_block(sch_traced_func(ts), kept[w]);
        tu_assert_equivalent(f, sch_traced_func(ts));
        sch_traced_free(ts);
        passed++;
      }
    }
    ck_assert_int_gt(passed, 0);
    if (kept[w]) ck_assert_int_gt(with_kept, 0);
    free_sketches(sk, n);
    ts_arena_fini(&a);
  }
}
END_TEST

/* The instantiated matmul candidate builds, runs and verifies. */
/* The innermost loop of block `name` in ts's function (NULL if none). */
static const ir_stmt *innermost_loop_of(sch_traced *ts, const char *name) {
  ts_diag d;
  ts_diag_clear(&d);
  sch_loop *loops;
  int nl;
  if (sch_get_loops(sch_traced_state(ts), (sch_block){.name = name}, &loops, &nl, &d) != TS_OK || nl == 0)
    return NULL;
  return srch_test_loop(sch_traced_func(ts), loops[nl - 1].var);
}


/* A grouped convolution (TVM's GRP: the input channel (o // 16) * 2 + ci):
 * no candidate vectorises its output channel across a group of 16, where the
 * grouped read would be a gather: the vector-block widths divide the group
 * and RewriteParallelVectorizeUnroll fuses no loop past it; the candidates
 * that vectorise it build, run and match the interpreter. */
START_TEST(test_grouped_vector_span) {
  const char *spec = "conv2d_nhwc:n=1,c=8,h=6,w=5,k=64,r=3,s=3,stride=1,pad=1,dilation=1,groups=4";
  srch_space_opts so = {.num_cores = 1, /* no serial twins (test_serial_sketch_small) */
                        .rule_mask = srch_rule_mask_without(0, SRCH_RULE_MULTI_LEVEL_TILING_TENSOR)};
  cg_target t = host();
  char path[] = "/tmp/tessel_rules_grp_XXXXXX.so";
  int fd = mkstemps(path, 3);
  ck_assert_int_ge(fd, 0);
  close(fd);
  ts_arena a;
  ts_arena_init(&a);
  ir_func *f = tu_workload(&a, spec);
  int n;
  sch_trace **sk = sketches_with(f, &so, &n);
  int vectorized = 0, built = 0;
  for (int s = 0; s < n; s++)
    for (int k = 0; k < 24; k++) {
      ts_diag d;
      ts_diag_clear(&d);
      sch_traced *ts = srch_instantiate(sk[s], f, &t, true, (uint64_t)(100 * s + k + 1), &d);
      if (!ts) continue;
      const ir_stmt *in = innermost_loop_of(ts, "Y");
      int64_t e = 0;
      if (in && in->u.loop.kind == IR_FOR_VECTORIZED) {
        ck_assert(ir_as_int(in->u.loop.extent, &e));
        ck_assert_msg(16 % e == 0, "sketch %d seed %d: a vector of %lld output channels crosses a group of 16", s, k,
                      (long long)e);
        vectorized++;
        if (built < 2) build_run_verify(f, ts, path, spec);
        built++;
      }
      sch_traced_free(ts);
    }
  ck_assert_int_gt(vectorized, 0);
  free_sketches(sk, n);
  ts_arena_fini(&a);
  unlink(path);
}
END_TEST

/* Channel-blocked convolutions: the vector-block sketches put the output
 * channel block innermost (a width dividing the block), and their candidates
 * vectorise it, build, and match the interpreter; the plain NCHW conv, whose
 * output channel is no last index, gets no such sketch. */
/* The register-resident sketch ("SSRRS") of a channel-blocked convolution
 * with a fused epilogue (bias + Relu, as the model compiler fuses them):
 * the epilogue block goes under the tile's last S1 loop, after the whole
 * reduction (one ReverseComputeAt, no cache), so each output tile is
 * written once with its epilogue as MLAS's kernels write it; every
 * candidate equal to the unscheduled function, one built and verified. */
START_TEST(test_ssrrs_epilogue) {
  static const char *src =
      "kernel bconv(X: f32[1, 2, 5, 7, 8], W: f32[4, 2, 1, 1, 8, 8], B: f32[32]) -> Y: f32[1, 4, 5, 7, 8] {\n"
      "  let C: f32[1, 4, 5, 7, 8]\n"
      "  C[n, ko, p, q, kv] += X[n, co, p + ri, q + si, cv] * W[ko, co, ri, si, cv, kv]\n"
      "  Y[n, ko, p, q, kv] = max(C[n, ko, p, q, kv] + B[ko * 8 + kv], 0.0)\n"
      "}\n";
  ts_arena a;
  ts_arena_init(&a);
  ir_func *f;
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_msg(ir_parse_func(&a, src, strlen(src), "test.tsl", &f, &d) == TS_OK, "%s", d.msg);
  srch_space_opts so = {.num_cores = 1, /* no serial twins (test_serial_sketch_small) */
                        .rule_mask = srch_rule_mask_without(0, SRCH_RULE_MULTI_LEVEL_TILING_TENSOR)};
  int n;
  sch_trace **sk = sketches_with(f, &so, &n);
  cg_target t = host();
  char path[] = "/tmp/tessel_rules_ep_XXXXXX.so";
  int fd = mkstemps(path, 3);
  ck_assert_int_ge(fd, 0);
  close(fd);
  int fused = 0, passed = 0;
  for (int s = 0; s < n; s++) {
    if (count_kind(sk[s], SCH_I_REVERSE_COMPUTE_AT) != 1 || count_kind(sk[s], SCH_I_CACHE_WRITE) != 0) continue;
    fused++;
    for (int k = 0; k < 8; k++) {
      ts_diag_clear(&d);
      sch_traced *ts = srch_instantiate(sk[s], f, &t, true, (uint64_t)(k + 1), &d);
      if (!ts) continue;
      /* Y under C's tile loops (the postprocessor fuses the outer ones):
       * both under the same outermost loop, Y below more than its own 5 */
      sch_block b, cb;
      sch_loop *loops, *cloops;
      int nl, ncl;
      tu_ok(sch_get_block(sch_traced_state(ts), "Y", &b, &d), &d);
      tu_ok(sch_get_loops(sch_traced_state(ts), b, &loops, &nl, &d), &d);
      const ir_var *outer = loops[0].var;
      tu_ok(sch_get_block(sch_traced_state(ts), "C", &cb, &d), &d);
      tu_ok(sch_get_loops(sch_traced_state(ts), cb, &cloops, &ncl, &d), &d);
      ck_assert_msg(nl > 5 && cloops[0].var == outer, "Y (%d loops) is not under C's tile", nl);
      const ir_func *ref = sch_layout_reference(&a, f, sch_traced_trace(ts), &d);
      ck_assert_msg(ref != NULL, "%s", d.msg);
      tu_assert_equivalent(ref, sch_traced_func(ts));
      if (!passed) build_run_verify(ref, ts, path, "bconv");
      passed++;
      sch_traced_free(ts);
    }
  }
  ck_assert_int_eq(fused, 1);
  ck_assert_int_gt(passed, 0);
  free_sketches(sk, n);
  unlink(path);
  ts_arena_fini(&a);
}
END_TEST

START_TEST(test_vector_block) {
  static const char *const cases[] = {
      "conv2d_nchwc:n=1,c=6,h=7,w=9,k=32,r=3,s=3,stride=2,pad=1,dilation=1,cb=3,kb=32",
      "depthwise_conv2d_nchwc:n=1,c=16,h=9,w=7,r=3,s=3,stride=2,pad=1,dilation=1,cb=16",
  };
  srch_space_opts so = {.num_cores = 1, /* no serial twins (test_serial_sketch_small) */
                        .rule_mask = srch_rule_mask_without(0, SRCH_RULE_MULTI_LEVEL_TILING_TENSOR)};
  cg_target t = host();
  char path[] = "/tmp/tessel_rules_vb_XXXXXX.so";
  int fd = mkstemps(path, 3);
  ck_assert_int_ge(fd, 0);
  close(fd);
  for (int c = 0; c < 2; c++) {
    ts_arena a;
    ts_arena_init(&a);
    ir_func *f = tu_workload(&a, cases[c]);
    int n;
    sch_trace **sk = sketches_with(f, &so, &n);
    /* write cache x vector-block (which replaces the plain sketches), and the
     * register-resident vector-block sketch */
    ck_assert_int_eq(n, 4);
    for (int s = 0; s < n; s++) ck_assert_int_eq(count_kind(sk[s], SCH_I_SAMPLE_CATEGORICAL), 2);
    int vectorized = 0;
    for (int s = 0; s < 4; s++) {
      bool built = false; /* one candidate per sketch built, run and verified */
      for (int k = 0; k < 8; k++) {
        ts_diag d;
        ts_diag_clear(&d);
        sch_traced *ts = srch_instantiate(sk[s], f, &t, true, (uint64_t)(100 * s + k + 1), &d);
        if (!ts) continue;
        const ir_stmt *in = innermost_loop_of(ts, "Y");
        int64_t e = 0;
        ck_assert(in && ir_as_int(in->u.loop.extent, &e));
        ck_assert_msg(e % lanes() == 0 && (c == 1 ? 16 : 32) % e == 0, "%s: innermost extent %lld", cases[c],
                      (long long)e);
        if (in->u.loop.kind != IR_FOR_VECTORIZED) {
          sch_traced_free(ts);
          continue;
        }
        vectorized++;
        if (!built) build_run_verify(f, ts, path, cases[c]);
        built = true;
        sch_traced_free(ts);
      }
    }
    ck_assert_msg(vectorized > 0, "%s: no vector-block candidate vectorised its channel block", cases[c]);
    free_sketches(sk, n);
    ts_arena_fini(&a);
  }
  /* negative control: NCHW's output channel is no last index */
  ts_arena a;
  ts_arena_init(&a);
  ir_func *f = tu_workload(&a, "conv2d_nchw:n=1,c=6,h=7,w=9,k=32,r=3,s=3,stride=2,pad=1");
  int n;
  sch_trace **sk = sketches_with(f, &so, &n);
  for (int s = 0; s < n; s++) /* the unroll categorical only: no width decision */
    ck_assert_int_eq(count_kind(sk[s], SCH_I_SAMPLE_CATEGORICAL), 1);
  free_sketches(sk, n);
  ts_arena_fini(&a);
  unlink(path);
}
END_TEST

START_TEST(test_build_candidate) {
  ts_arena a;
  ts_arena_init(&a);
  ir_func *f = tu_workload(&a, "matmul:m=67,n=45,k=33");
  int n;
  sch_trace **sk = sketches1(f, &n);
  cg_target t = host();
  char path[] = "/tmp/tessel_rules_XXXXXX.so";
  int fd = mkstemps(path, 3);
  ck_assert_int_ge(fd, 0);
  close(fd);
  int built = 0;
  for (int s = 0; s < n; s++) {
    ts_diag d;
    ts_diag_clear(&d);
    sch_traced *ts = NULL;
    for (int k = 0; k < 20 && !ts; k++) ts = srch_instantiate(sk[s], f, &t, true, (uint64_t)(k + 11), &d);
    ck_assert_msg(ts != NULL, "sketch %d: %s", s, d.msg);
    build_run_verify(f, ts, path, "matmul:m=67,n=45,k=33");
    sch_traced_free(ts);
    built++;
  }
  /* 67 (prime) and 45 tile badly: a padded variant (pre-split, overhang
   * guarded) of each of the three write-cache sketches */
  ck_assert_int_eq(n, 6);
  ck_assert_int_eq(built, 6);
  unlink(path);
  free_sketches(sk, n);
  ts_arena_fini(&a);
}
END_TEST

/* The parallel limit the root block of sketch tr is annotated with (-1: none). */
static int64_t sketch_parallel(const sch_trace *tr) {
  for (int i = 0; i < sch_trace_len(tr); i++) {
    const sch_inst *in = sch_trace_inst(tr, i);
    if (in->kind == SCH_I_ANNOTATE && in->nin >= 2 && in->nattr >= 1 && in->attrs[0].s &&
        !strcmp(in->attrs[0].s, "meta_schedule.parallel") && in->in[1].kind == SCH_ARG_INT)
      return in->in[1].i;
  }
  return -1;
}

/* A kernel of a few microseconds on two cores gets a serial sketch beside
 * the parallel ones, and a serial candidate of it has no parallel loop and
 * computes the right thing; a large kernel, or one core, gets none. */
START_TEST(test_serial_sketch_small) {
  ts_arena a;
  ts_arena_init(&a);
  struct {
    const char *spec;
    int cores;
    bool serial;
  } cases[] = {{"norm:b=1,m=256,n=256", 2, true},   {"softmax:m=37,n=211", 2, true},
               {"norm:b=1,m=256,n=256", 1, false},  {"matmul:m=256,n=256,k=256", 2, false}};
  cg_target t = host();
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    ir_func *f = tu_workload(&a, cases[c].spec);
    srch_space_opts o = {.num_cores = cases[c].cores};
    int n, nser = 0, npar = 0;
    sch_trace **sk = sketches_with(f, &o, &n);
    for (int s = 0; s < n; s++) {
      int64_t p = sketch_parallel(sk[s]);
      if (p == 1) {
        nser++;
        ts_diag d;
        ts_diag_clear(&d);
        sch_traced *ts = NULL;
        for (int k = 0; k < 20 && !ts; k++) ts = srch_instantiate(sk[s], f, &t, true, (uint64_t)(k + 5), &d);
        ck_assert_msg(ts != NULL, "%s sketch %d: %s", cases[c].spec, s, d.msg);
        char *txt = ir_func_to_string(sch_traced_func(ts));
        ck_assert_msg(!strstr(txt, "parallel("), "%s: serial candidate has a parallel loop:\n%s", cases[c].spec, txt);
        ts_free(txt);
        char path[] = "/tmp/tessel_serial_XXXXXX.so";
        int fd = mkstemps(path, 3);
        ck_assert_int_ge(fd, 0);
        close(fd);
        build_run_verify(f, ts, path, cases[c].spec);
        unlink(path);
        sch_traced_free(ts);
      } else if (p == 16 * cases[c].cores) {
        npar++;
      }
    }
    ck_assert_msg(npar > 0, "%s: no parallel sketch", cases[c].spec);
    ck_assert_msg(cases[c].serial ? nser == npar : nser == 0, "%s at %d cores: %d serial sketches beside %d parallel",
                  cases[c].spec, cases[c].cores, nser, npar);
    free_sketches(sk, n);
  }
  ts_arena_fini(&a);
}
END_TEST

int main(void) {
  Suite *s = suite_create("search_rules");
  TCase *tc = tcase_create("rules");
  tcase_set_timeout(tc, 300);
  tcase_add_loop_test(tc, test_workload_space, 0, (int)(sizeof specs / sizeof specs[0]));
  tcase_add_test(tc, test_matmul_sketches);
  tcase_add_test(tc, test_sgemm_expressible);
  tcase_add_test(tc, test_auto_inline);
  tcase_add_test(tc, test_grouped_vector_span);
  tcase_add_test(tc, test_build_candidate);
  tcase_add_test(tc, test_vector_block);
  tcase_add_test(tc, test_ssrrs_epilogue);
  tcase_add_test(tc, test_register_tile);
  tcase_add_test(tc, test_serial_sketch_small);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failures = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failures ? 1 : 0;
}
