/* test_gpu_tensor_core.c — tensor cores in the GPU search, without a GPU:
 *  - the WMMA intrinsics (load_matrix_sync into matrix_a / matrix_b from
 *    shared memory, store_matrix_sync of an accumulator, the bf16 mma) are
 *    each matched by tensorize and refused where the scope or dtype differs;
 *  - MultiLevelTilingTensorCore (search/rules/gpu_tensor_core.c) forks a
 *    tensor-core sketch for matmul_f16 and a bf16 matmul with extents that
 *    are multiples of 16, an odd batch (3) of them and dense's transposed
 *    weights W[n, k] (trans_b), and none (saying why) for 100x100x100, for
 *    f32, for two batch dimensions and for a transposed A;
 *  - 20 sampled candidates per tensor-core sketch (samples that VerifyGPUCode
 *    rejects, over the shared memory of a block, are drawn again) pass the
 *    strict GPU check, hold the fill / load / mma /
 *    store calls, and with the CUDA emitter generate CUDA C with the
 *    nvcuda::wmma calls that NVRTC compiles for sm_90 (skipped, saying so,
 *    when tessel was built without CUDA);
 *  - the candidates' traces without their Tensorize steps (the schedule the
 *    intrinsics replace) match the interpreter at small sizes. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/gpu_check.h"
#include "costmodel/costmodel.h"
#include "ir/print.h"
#include "ir/schedule/intrin.h"
#include "ir/schedule/tensorize.h"
#include "search/rules/gpu_rules.h"
#include "search/search.h"
#include "tests/schedule/util.h"
#include "tests/util/f16_funcs.h"
#ifdef TESSEL_HAVE_CUDA_EMIT
#include "codegen/cuda.h"
#endif

static ts_diag D;

static cg_target cuda(const char *arch) {
  cg_target t;
  char s[64];
  snprintf(s, sizeof s, "cuda -arch=%s", arch);
  ts_diag_clear(&D);
  ck_assert_msg(cg_target_parse(s, &t, &D) == TS_OK, "%s", D.msg);
  return t;
}

typedef struct count_ctx {
  const char *name;
  int n;
} count_ctx;
static bool count_cb(void *ctx, const ir_expr *e) {
  count_ctx *c = ctx;
  if (e->kind == IR_CALL_EXTERN && !strcmp(e->u.ext.name, c->name)) c->n++;
  return true;
}
static int count_calls(const ir_func *f, const char *name) {
  count_ctx c = {name, 0};
  ir_visitor v = {.expr = count_cb, .ctx = &c};
  ir_visit_stmt(&v, f->body);
  return c.n;
}

/* ---- the WMMA intrinsics, matched by tensorize ----------------------------------- */

/* A 2-d copy D[i, j] = S[i, j] over rows x cols, scopes as given. */
static char *copy_text(const char *t, int rows, int cols, const char *sscope, const char *dscope) {
  char *s = malloc(2048);
  snprintf(s, 2048,
           "func cp(S: %s[%d, %d]%s) -> D: %s[%d, %d]%s {\n"
           "  block root() {\n"
           "    for i in serial(0, %d) {\n"
           "      for j in serial(0, %d) {\n"
           "        block D(vi: S(0, %d) = i, vj: S(0, %d) = j) {\n"
           "          reads S[vi, vj]\n"
           "          writes D[vi, vj]\n"
           "          D[vi, vj] = S[vi, vj]\n"
           "        }\n"
           "      }\n"
           "    }\n"
           "  }\n"
           "}\n",
           t, rows, cols, sscope, t, rows, cols, dscope, rows, cols, rows, cols);
  return s;
}

/* Splits both loops of block D by 16 (i0 j0 i1 j1) and tensorizes i1. */
static ts_status tile_tensorize(sch_state *s, const char *intrin) {
  sch_loop lp[2], a[2], b[2];
  ck_assert_int_eq(tu_loops(s, "D", lp, 2), 2);
  int64_t f[2] = {-1, 16};
  ts_diag_clear(&D);
  tu_ok(sch_split(s, lp[0], 2, f, a, &D), &D);
  tu_ok(sch_split(s, lp[1], 2, f, b, &D), &D);
  sch_loop order[4] = {a[0], b[0], a[1], b[1]};
  tu_ok(sch_reorder(s, 4, order, &D), &D);
  ts_diag_clear(&D);
  return sch_tensorize_loop(s, a[1], intrin, NULL, &D);
}

static void expect_copy(const char *t, int rows, int cols, const char *ss, const char *ds, const char *intrin,
                        const char *call, const char *layout) {
  ts_arena a;
  ts_arena_init(&a);
  char *txt = copy_text(t, rows, cols, ss, ds);
  ir_func *orig;
  sch_state *s = tu_schedule_text(&a, txt, &orig);
  tu_ok(tile_tensorize(s, intrin), &D);
  /* one call per 16x16 tile, inside the two tile loops */
  ck_assert_int_eq(count_calls(sch_func(s), call), 1);
  ck_assert_int_eq(count_calls(sch_func(s), "tessel.buffer_stride"), 1);
  char *p = ir_func_to_string(sch_func(s));
  ck_assert_msg(strstr(p, layout) != NULL, "no %s in\n%s", layout, p);
  ck_assert_msg(strstr(p, "tessel.tensorized") != NULL, "%s", p);
  ts_free(p);
  sch_free(s);
  free(txt);
  ts_arena_fini(&a);
}

START_TEST(test_wmma_load_store_match) {
  const char *sh = " scope(\"shared\")", *fa = " scope(\"wmma.matrix_a\")", *fb = " scope(\"wmma.matrix_b\")",
             *acc = " scope(\"wmma.accumulator\")";
  expect_copy("f16", 32, 48, sh, fa, "cuda.wmma.load_matrix_a.f16.16x16", "tessel.wmma.load_matrix_sync",
              "\"row_major\"");
  expect_copy("f16", 16, 32, sh, fb, "cuda.wmma.load_matrix_b.f16.16x16", "tessel.wmma.load_matrix_sync",
              "\"row_major\"");
  expect_copy("bf16", 48, 16, sh, fa, "cuda.wmma.load_matrix_a.bf16.16x16", "tessel.wmma.load_matrix_sync",
              "\"row_major\"");
  expect_copy("bf16", 16, 16, sh, fb, "cuda.wmma.load_matrix_b.bf16.16x16", "tessel.wmma.load_matrix_sync",
              "\"row_major\"");
  /* store: to global or to shared memory */
  expect_copy("f32", 32, 32, acc, "", "cuda.wmma.store.f32.16x16", "tessel.wmma.store_matrix_sync", "\"row_major\"");
  expect_copy("f32", 16, 48, acc, sh, "cuda.wmma.store.f32.16x16", "tessel.wmma.store_matrix_sync", "\"row_major\"");
}
END_TEST

START_TEST(test_wmma_copy_refusals) {
  const char *sh = " scope(\"shared\")", *fa = " scope(\"wmma.matrix_a\")", *fb = " scope(\"wmma.matrix_b\")";
  struct {
    const char *t, *ss, *ds, *intrin, *why;
  } cases[] = {
      /* a matrix_b fragment is not loaded by the matrix_a intrinsic */
      {"f16", sh, fb, "cuda.wmma.load_matrix_a.f16.16x16", "wmma.matrix_a"},
      /* fragments load from shared memory only */
      {"f16", "", fa, "cuda.wmma.load_matrix_a.f16.16x16", "\"shared\""},
      /* dtype */
      {"bf16", sh, fa, "cuda.wmma.load_matrix_a.f16.16x16", "bf16"},
      /* the store reads an accumulator */
      {"f32", sh, "", "cuda.wmma.store.f32.16x16", "wmma.accumulator"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ts_arena a;
    ts_arena_init(&a);
    char *txt = copy_text(cases[i].t, 32, 32, cases[i].ss, cases[i].ds);
    ir_func *orig;
    sch_state *s = tu_schedule_text(&a, txt, &orig);
    ts_status st = tile_tensorize(s, cases[i].intrin);
    tu_refused(st, &D, "does not match", cases[i].why, NULL);
    ck_assert_int_eq(count_calls(sch_func(s), "tessel.wmma.load_matrix_sync") +
                         count_calls(sch_func(s), "tessel.wmma.store_matrix_sync"),
                     0);
    sch_free(s);
    free(txt);
    ts_arena_fini(&a);
  }
}
END_TEST

START_TEST(test_wmma_bf16_mma_match) {
  ts_arena a;
  ts_arena_init(&a);
  ir_func *orig;
  sch_state *s = tu_schedule_text(
      &a,
      "func mm(A: bf16[16, 32] scope(\"wmma.matrix_a\"), B: bf16[32, 16] scope(\"wmma.matrix_b\"))"
      " -> C: f32[16, 16] scope(\"wmma.accumulator\") {\n"
      "  block root() {\n"
      "    for i in serial(0, 16) {\n"
      "      for j in serial(0, 16) {\n"
      "        for k in serial(0, 32) {\n"
      "          block C(vi: S(0, 16) = i, vj: S(0, 16) = j, vk: R(0, 32) = k) {\n"
      "            reads C[vi, vj], A[vi, vk], B[vk, vj]\n"
      "            writes C[vi, vj]\n"
      "            C[vi, vj] = C[vi, vj] + f32(A[vi, vk]) * f32(B[vk, vj])\n"
      "          }\n"
      "        }\n"
      "      }\n"
      "    }\n"
      "  }\n"
      "}\n",
      &orig);
  sch_loop lp[3], o[2];
  ck_assert_int_eq(tu_loops(s, "C", lp, 3), 3);
  int64_t f[2] = {-1, 16};
  ts_diag_clear(&D);
  tu_ok(sch_split(s, lp[2], 2, f, o, &D), &D);
  sch_loop order[4] = {o[0], lp[0], lp[1], o[1]};
  tu_ok(sch_reorder(s, 4, order, &D), &D);
  /* the f16 entry refuses bf16 fragments, the bf16 one matches */
  ts_diag_clear(&D);
  tu_refused(sch_tensorize_loop(s, lp[0], "cuda.wmma.mma_sync.f16f32.16x16x16", NULL, &D), &D, "bf16", NULL);
  ts_diag_clear(&D);
  tu_ok(sch_tensorize_loop(s, lp[0], "cuda.wmma.mma_sync.bf16f32.16x16x16", NULL, &D), &D);
  ck_assert_int_eq(count_calls(sch_func(s), "tessel.wmma.mma_sync"), 1);
  const sch_intrin *in = sch_intrin_get("cuda.wmma.mma_sync.bf16f32.16x16x16");
  ck_assert(sch_intrin_available(in, "cuda", NULL, NULL, "sm_80"));
  ck_assert(!sch_intrin_available(in, "cuda", NULL, NULL, "sm_75"));
  sch_free(s);
  ts_arena_fini(&a);
}
END_TEST

/* ---- the sketch rule -------------------------------------------------------------- */

static const char *const TC_INTRINS[] = {"cuda.wmma.fill.f32.16x16", "cuda.wmma.load_matrix_a", "cuda.wmma.load_matrix_b",
                                         "cuda.wmma.mma_sync", "cuda.wmma.store.f32.16x16"};

/* Tensorize steps of tr naming an intrinsic that starts with prefix. */
static int count_tensorize(const sch_trace *tr, const char *prefix) {
  int c = 0;
  for (int i = 0; i < sch_trace_len(tr); i++) {
    const sch_inst *in = sch_trace_inst(tr, i);
    if (in->kind == SCH_I_TENSORIZE && in->nattr == 1 && !strncmp(in->attrs[0].s, prefix, strlen(prefix))) c++;
  }
  return c;
}

static bool is_tc_sketch(const sch_trace *tr) { return count_tensorize(tr, "cuda.wmma.mma_sync") > 0; }

/* The sketches of f on target t; *ntc gets the number of tensor-core ones. */
static sch_trace **sketches(const ir_func *f, const cg_target *t, int *n, int *ntc) {
  sch_trace **sk;
  ts_diag_clear(&D);
  ck_assert_msg(srch_sketches(f, t, NULL, &sk, n, &D) == TS_OK, "%s", D.msg);
  *ntc = 0;
  for (int i = 0; i < *n; i++) *ntc += is_tc_sketch(sk[i]);
  return sk;
}

static void free_sketches(sch_trace **sk, int n) {
  for (int i = 0; i < n; i++) sch_trace_free(sk[i]);
  ts_free(sk);
}

/* A bf16 matmul (no built-in workload has bf16 inputs). */
static const char BF16_MM[] =
    "func mm_bf16(A: bf16[32, 64], B: bf16[64, 48]) -> C: f32[32, 48] {\n"
    "  block root() {\n"
    "    for i in serial(0, 32) {\n"
    "      for j in serial(0, 48) {\n"
    "        for k in serial(0, 64) {\n"
    "          block C(vi: S(0, 32) = i, vj: S(0, 48) = j, vk: R(0, 64) = k) {\n"
    "            reads A[vi, vk], B[vk, vj]\n"
    "            writes C[vi, vj]\n"
    "            init { C[vi, vj] = 0.0f32 }\n"
    "            C[vi, vj] = C[vi, vj] + f32(A[vi, vk]) * f32(B[vk, vj])\n"
    "          }\n"
    "        }\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "}\n";

/* two batch dimensions: not handled */
static const char BATCH2_F16[] =
    "func bmm2(A: f16[2, 3, 16, 16], B: f16[2, 3, 16, 16]) -> C: f32[2, 3, 16, 16] {\n"
    "  block root() {\n"
    "    for a in serial(0, 2) {\n"
    "      for b in serial(0, 3) {\n"
    "        for i in serial(0, 16) {\n"
    "          for j in serial(0, 16) {\n"
    "            for k in serial(0, 16) {\n"
    "              block C(va: S(0, 2) = a, vb: S(0, 3) = b, vi: S(0, 16) = i, vj: S(0, 16) = j, vk: R(0, 16) = k) {\n"
    "                reads A[va, vb, vi, vk], B[va, vb, vk, vj]\n"
    "                writes C[va, vb, vi, vj]\n"
    "                init { C[va, vb, vi, vj] = 0.0f32 }\n"
    "                C[va, vb, vi, vj] = C[va, vb, vi, vj] + f32(A[va, vb, vi, vk]) * f32(B[va, vb, vk, vj])\n"
    "              }\n"
    "            }\n"
    "          }\n"
    "        }\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "}\n";

/* A read as A[k, i]: no transposed matrix_a is registered */
static const char TRANS_A_F16[] =
    "func ta(A: f16[32, 32], B: f16[32, 48]) -> C: f32[32, 48] {\n"
    "  block root() {\n"
    "    for i in serial(0, 32) {\n"
    "      for j in serial(0, 48) {\n"
    "        for k in serial(0, 32) {\n"
    "          block C(vi: S(0, 32) = i, vj: S(0, 48) = j, vk: R(0, 32) = k) {\n"
    "            reads A[vk, vi], B[vk, vj]\n"
    "            writes C[vi, vj]\n"
    "            init { C[vi, vj] = 0.0f32 }\n"
    "            C[vi, vj] = C[vi, vj] + f32(A[vk, vi]) * f32(B[vk, vj])\n"
    "          }\n"
    "        }\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "}\n";

static ir_func *parse(ts_arena *a, const char *text) {
  ir_func *orig;
  sch_state *s = tu_schedule_text(a, text, &orig);
  sch_free(s);
  return orig;
}

START_TEST(test_sketch_matmul_f16) {
  ts_arena a;
  ts_arena_init(&a);
  ir_func *f = tu_workload(&a, "matmul_f16:m=256,n=256,k=256");
  cg_target t = cuda("sm_90");
  char why[300] = "";
  ck_assert_msg(srch_gpu_tensor_core_check(f, "C", &t, NULL, why, sizeof why), "%s", why);
  int n, ntc;
  sch_trace **sk = sketches(f, &t, &n, &ntc);
  ck_assert_int_eq(ntc, 1);
  ck_assert_int_ge(n, 2); /* the plain SIMT tiling stays in the space */
  for (int i = 0; i < n; i++) {
    if (!is_tc_sketch(sk[i])) continue;
    for (size_t k = 0; k < sizeof TC_INTRINS / sizeof *TC_INTRINS; k++)
      ck_assert_msg(count_tensorize(sk[i], TC_INTRINS[k]) >= 1, "no Tensorize %s", TC_INTRINS[k]);
    /* tile sizes are sampled (the mutator's decisions): 2 spatial x 4 + 1 x 3 */
    int nsample = 0;
    for (int j = 0; j < sch_trace_len(sk[i]); j++) nsample += sch_trace_inst(sk[i], j)->kind == SCH_I_SAMPLE_PERFECT_TILE;
    ck_assert_int_eq(nsample, 3);
  }
  free_sketches(sk, n);
  /* bf16 on sm_80 gets one; on sm_75 not (the bf16 mma needs sm_80) */
  ir_func *g = parse(&a, BF16_MM);
  cg_target t80 = cuda("sm_80"), t75 = cuda("sm_75");
  sk = sketches(g, &t80, &n, &ntc);
  ck_assert_int_eq(ntc, 1);
  for (int i = 0; i < n; i++)
    if (is_tc_sketch(sk[i])) ck_assert_int_ge(count_tensorize(sk[i], "cuda.wmma.load_matrix_a.bf16"), 1);
  free_sketches(sk, n);
  ck_assert(!srch_gpu_tensor_core_check(g, "C", &t75, NULL, why, sizeof why));
  ck_assert_msg(strstr(why, "sm_80") != NULL, "%s", why);
  /* an odd batch (3) of f16 matmuls: the batch bound to blockIdx.z */
  ir_func *bm = parse(&a, BATCH_F16);
  tc_shape sh;
  ck_assert_msg(srch_gpu_tensor_core_check(bm, "C", &t, &sh, why, sizeof why), "%s", why);
  ck_assert_int_eq(sh.nbatch, 1);
  sk = sketches(bm, &t, &n, &ntc);
  ck_assert_int_eq(ntc, 1);
  free_sketches(sk, n);
  /* dense's W[n, k]: the trans_b mma and a col_major matrix_b load */
  ir_func *dn = parse(&a, DENSE_F16);
  ck_assert_msg(srch_gpu_tensor_core_check(dn, "Y", &t, &sh, why, sizeof why), "%s", why);
  ck_assert(sh.trans_b);
  sk = sketches(dn, &t, &n, &ntc);
  ck_assert_int_eq(ntc, 1);
  for (int i = 0; i < n; i++)
    if (is_tc_sketch(sk[i])) {
      ck_assert_int_eq(count_tensorize(sk[i], "cuda.wmma.load_matrix_b_trans.f16"), 1);
      ck_assert_int_eq(count_tensorize(sk[i], "cuda.wmma.mma_sync.f16f32.16x16x16.trans_b"), 1);
    }
  free_sketches(sk, n);
  ts_arena_fini(&a);
}
END_TEST

/* No tensor-core sketch, and the reason. */
static void expect_none(const ir_func *f, const char *block, const char *reason) {
  cg_target t = cuda("sm_90");
  char why[300] = "";
  ck_assert(!srch_gpu_tensor_core_check(f, block, &t, NULL, why, sizeof why));
  ck_assert_msg(strstr(why, reason) != NULL, "'%s' does not say '%s'", why, reason);
  int n, ntc;
  sch_trace **sk = sketches(f, &t, &n, &ntc);
  ck_assert_int_eq(ntc, 0);
  ck_assert_int_ge(n, 1);
  free_sketches(sk, n);
}

START_TEST(test_no_sketch) {
  ts_arena a;
  ts_arena_init(&a);
  expect_none(tu_workload(&a, "matmul_f16:m=100,n=100,k=100"), "C", "not a multiple of 16");
  expect_none(tu_workload(&a, "matmul_f16:m=64,n=64,k=24"), "C", "extent 24");
  expect_none(tu_workload(&a, "matmul:m=64,n=64,k=64"), "C", "tensor cores take f16");
  expect_none(parse(&a, BATCH2_F16), "C", "at most one batch dimension");
  expect_none(parse(&a, TRANS_A_F16), "C", "operands are not A[i, k]");
  /* the switch for A/B runs (--no-tensor-core): the rule's bit off */
  {
    cg_target t = cuda("sm_90");
    const ir_func *f = tu_workload(&a, "matmul_f16:m=64,n=64,k=64");
    srch_space_opts so = {.rule_mask = srch_rule_mask_without(0, SRCH_RULE_GPU_TENSOR_CORE)};
    ck_assert_int_eq(srch_rule_by_name("gpu-tensor-core"), SRCH_RULE_GPU_TENSOR_CORE);
    sch_trace **sk;
    int n, ntc = 0;
    ts_diag_clear(&D);
    ck_assert_msg(srch_sketches(f, &t, &so, &sk, &n, &D) == TS_OK, "%s", D.msg);
    for (int i = 0; i < n; i++) ntc += is_tc_sketch(sk[i]);
    ck_assert_int_ge(n, 1);
    ck_assert_int_eq(ntc, 0);
    free_sketches(sk, n);
    int m, mtc;
    sk = sketches(f, &t, &m, &mtc);
    ck_assert_int_gt(mtc, 0); /* and with every rule on, it has one */
    free_sketches(sk, m);
  }
  /* a CPU target never gets one */
  cg_target llvm;
  ts_diag_clear(&D);
  tu_ok(cg_target_parse("llvm", &llvm, &D), &D);
  char why[300];
  ck_assert(!srch_gpu_tensor_core_check(tu_workload(&a, "matmul_f16:m=64,n=64,k=64"), "C", &llvm, NULL, why,
                                        sizeof why));
  ts_arena_fini(&a);
}
END_TEST

/* ---- candidates --------------------------------------------------------------------- */

#ifdef TESSEL_HAVE_CUDA_EMIT
/* Emits g and, with NVRTC, compiles it for sm_90; checks the WMMA calls. */
static void emit_compile(const char *what, const ir_func *g, bool nvrtc) {
  cg_target t = cuda("sm_90");
  cg_cuda_module m;
  ts_diag_clear(&D);
  ts_status st = cg_cuda_emit(g, &t, NULL, &m, &D);
  if (st) {
    char *txt = ir_func_to_string(g);
    ck_abort_msg("%s: CUDA emission failed: %s\n%s", what, D.msg, txt);
  }
  if (getenv("TESSEL_TEST_DUMP_CUDA")) fprintf(stderr, "---- %s\n%s\n", what, m.source);
  static const char *const needles[] = {"nvcuda::wmma::fill_fragment(", "nvcuda::wmma::load_matrix_sync(",
                                        "nvcuda::wmma::mma_sync(", "nvcuda::wmma::store_matrix_sync(",
                                        "__syncthreads();", "__shared__"};
  for (size_t i = 0; i < sizeof needles / sizeof *needles; i++)
    ck_assert_msg(strstr(m.source, needles[i]) != NULL, "%s: no '%s' in\n%s", what, needles[i], m.source);
  /* 32 lanes per warp on threadIdx.x */
  ck_assert_int_eq(m.kernels[0].block[0], 32);
  ck_assert_int_le(m.kernels[0].block[0] * m.kernels[0].block[1] * m.kernels[0].block[2], 1024);
  if (nvrtc) {
    cg_cuda_binary bin;
    ts_diag_clear(&D);
    st = cg_nvrtc_compile(m.source, "sm_90", false, &bin, &D);
    ck_assert_msg(st == TS_OK, "%s: NVRTC: %s\n%s", what, D.msg, m.source);
    ck_assert(bin.ptx && strstr(bin.ptx, "wmma.mma.sync") && strstr(bin.ptx, "wmma.load.a") &&
              strstr(bin.ptx, "wmma.store.d"));
    cg_cuda_binary_fini(&bin);
  }
  cg_cuda_module_fini(&m);
}
#endif

/* 20 candidates of the tensor-core sketch of f: postprocessed, strict GPU
 * check, the calls present, emitted and compiled; with parity true the
 * trace without Tensorize matches the interpreter. */
static void candidates(const ir_func *f, const char *arch, const char *what, bool parity) {
  cg_target t = cuda(arch);
  int n, ntc;
  sch_trace **sk = sketches(f, &t, &n, &ntc);
  ck_assert_int_eq(ntc, 1);
  bool nvrtc = false;
#ifdef TESSEL_HAVE_CUDA_EMIT
  nvrtc = cg_nvrtc_available();
  if (!nvrtc) fprintf(stderr, "%s: NVRTC part skipped: tessel was built without NVRTC (no CUDA toolkit)\n", what);
#else
  fprintf(stderr, "%s: CUDA emission and NVRTC skipped: tessel was built without the CUDA emitter\n", what);
#endif
  cg_gpu_limits lim;
  cg_gpu_limits_default(&lim);
  int ok = 0, rejected = 0;
  for (int i = 0; i < n; i++) {
    if (!is_tc_sketch(sk[i])) continue;
    /* draw until 20 pass (a sampled tile can ask for more shared memory
     * than a block has: VerifyGPUCode rejects it) */
    for (int k = 0; k < 100 && ok < 20; k++) {
      ts_diag_clear(&D);
      sch_traced *ts = srch_instantiate(sk[i], f, &t, true, (uint64_t)(7 * k + 1), &D);
      if (!ts) {
        /* only VerifyGPUCode may reject a sample (threads / shared memory) */
        ck_assert_msg(strstr(D.msg, "VerifyGPUCode") != NULL, "%s candidate %d: %s", what, k, D.msg);
        if (getenv("TESSEL_TEST_VERBOSE")) fprintf(stderr, "%s candidate %d rejected: %s\n", what, k, D.msg);
        rejected++;
        continue;
      }
      ok++;
      const ir_func *g = sch_traced_func(ts);
      ts_diag_clear(&D);
      ck_assert_msg(cg_gpu_check(g, &lim, &D) == TS_OK, "%s candidate %d: %s", what, k, D.msg);
      ck_assert_int_ge(count_calls(g, "tessel.wmma.mma_sync"), 1);
      ck_assert_int_ge(count_calls(g, "tessel.wmma.fill_fragment"), 1);
      ck_assert_int_ge(count_calls(g, "tessel.wmma.load_matrix_sync"), 2);
      ck_assert_int_ge(count_calls(g, "tessel.wmma.store_matrix_sync"), 1);
      char w[160];
      snprintf(w, sizeof w, "%s candidate %d", what, k);
      /* the cost model reads the tensorized candidate (the search ranks it) */
      cm_features feat;
      ts_diag_clear(&D);
      ck_assert_msg(cm_extract(g, &t, &feat, &D) == TS_OK, "%s: features: %s", w, D.msg);
      ck_assert_int_gt(feat.nrows, 0);
      cm_features_fini(&feat);
#ifdef TESSEL_HAVE_CUDA_EMIT
      emit_compile(w, g, nvrtc && (!parity || ok <= 4 || getenv("TESSEL_TEST_ALL")));
#endif
      if (parity && ok <= 6) {
        /* the same schedule with the intrinsics' descriptions in place */
        sch_trace *plain = sch_trace_without_kind(sch_traced_trace(ts), SCH_I_TENSORIZE);
        ck_assert_ptr_nonnull(plain);
        ts_diag_clear(&D);
        sch_traced *p = sch_trace_replay(plain, f, 1, &D);
        ck_assert_msg(p != NULL, "%s: replay without Tensorize: %s", w, D.msg);
        ck_assert_int_eq(count_calls(sch_traced_func(p), "tessel.wmma.mma_sync"), 0);
        char why[600];
        ck_assert_msg(tu_equivalent(f, sch_traced_func(p), (uint64_t)k + 3, why, sizeof why), "%s: %s", w, why);
        sch_traced_free(p);
        sch_trace_free(plain);
      }
      sch_traced_free(ts);
    }
  }
  fprintf(stderr, "%s: %d candidates accepted, %d rejected by VerifyGPUCode\n", what, ok, rejected);
  ck_assert_int_eq(ok, 20);
  free_sketches(sk, n);
}

START_TEST(test_candidates_256) {
  ts_arena a;
  ts_arena_init(&a);
  candidates(tu_workload(&a, "matmul_f16:m=256,n=256,k=256"), "sm_90", "matmul_f16 256^3", false);
  ts_arena_fini(&a);
}
END_TEST

START_TEST(test_candidates_parity) {
  ts_arena a;
  ts_arena_init(&a);
  candidates(tu_workload(&a, "matmul_f16:m=48,n=32,k=64"), "sm_90", "matmul_f16 48x32x64", true);
  candidates(parse(&a, BF16_MM), "sm_80", "bf16 32x48x64", true);
  candidates(parse(&a, BATCH_F16), "sm_90", "batch 3 x f16 32x48x32", true);
  candidates(parse(&a, DENSE_F16), "sm_90", "dense f16 32x48x32", true);
  ts_arena_fini(&a);
}
END_TEST

/* MutateTileSize on a tensor-core candidate changes a tile split (or a
 * fetch's lanes) and the mutant, replayed with its decisions, is still a
 * tensor-core candidate that passes the postprocessors. */
START_TEST(test_tile_size_mutator) {
  ts_arena a;
  ts_arena_init(&a);
  ir_func *f = tu_workload(&a, "matmul_f16:m=128,n=128,k=64");
  cg_target t = cuda("sm_90");
  int n, ntc;
  sch_trace **sk = sketches(f, &t, &n, &ntc);
  ck_assert_int_eq(ntc, 1);
  int tci = -1;
  for (int i = 0; i < n; i++)
    if (is_tc_sketch(sk[i])) tci = i;
  sch_traced *ts = NULL;
  for (uint64_t seed = 1; seed < 50 && !ts; seed++) ts = srch_instantiate(sk[tci], f, &t, true, seed, &D);
  ck_assert_ptr_nonnull(ts);
  sch_trace *base = sch_trace_simplified(sch_traced_trace(ts), true);
  ck_assert_ptr_nonnull(base);
  ts_rng rng;
  ts_rng_seed(&rng, 5);
  int mutated = 0, valid = 0;
  for (int k = 0; k < 30; k++) {
    sch_trace *m = srch_mutate(SRCH_MUT_TILE_SIZE, base, f, &rng);
    if (!m) continue;
    mutated++;
    ts_diag_clear(&D);
    sch_traced *c = srch_instantiate(m, f, &t, false, 1, &D);
    if (c) {
      valid++;
      ck_assert_int_ge(count_calls(sch_traced_func(c), "tessel.wmma.mma_sync"), 1);
      sch_traced_free(c);
    } else {
      ck_assert_msg(strstr(D.msg, "VerifyGPUCode") != NULL, "mutant %d: %s", k, D.msg);
    }
    sch_trace_free(m);
  }
  fprintf(stderr, "tile-size mutator: %d mutants, %d pass the postprocessors\n", mutated, valid);
  ck_assert_int_ge(mutated, 25);
  ck_assert_int_ge(valid, 1);
  sch_trace_free(base);
  sch_traced_free(ts);
  free_sketches(sk, n);
  ts_arena_fini(&a);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("gpu_tensor_core");
  TCase *tc = tcase_create("tc");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_wmma_load_store_match);
  tcase_add_test(tc, test_wmma_copy_refusals);
  tcase_add_test(tc, test_wmma_bf16_mma_match);
  tcase_add_test(tc, test_sketch_matmul_f16);
  tcase_add_test(tc, test_no_sketch);
  tcase_add_test(tc, test_candidates_256);
  tcase_add_test(tc, test_candidates_parity);
  tcase_add_test(tc, test_tile_size_mutator);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *r = srunner_create(suite());
  srunner_run_all(r, CK_NORMAL);
  int nf = srunner_ntests_failed(r);
  srunner_free(r);
  return nf ? 1 : 0;
}
