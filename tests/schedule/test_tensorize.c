/* test_tensorize.c — blockize, tensorize and the intrinsic registry.
 * blockize: the outer block's iter vars and domains, the init moved out,
 * results unchanged (matmul, matmul_int8, odd extents that divide), and the
 * refusals (binding that does not divide, two blocks under the loop, a
 * predicate from an imperfect split inside). tensorize: matmul_int8 with the
 * VNNI i8 x i8 intrinsics (1 and 4 rows) and the AArch64 sdot ones, sgemm
 * with the FMA micro-kernels, a u8 x i8 kernel with plain vpdpbusd — each
 * equal to the unscheduled function in the reference interpreter (which
 * executes vpdpbusd / sdot bit-exactly); mismatches refused with the first
 * difference named (wrong dtype, wrong extents, transposed access, whole
 * reduction inside, unknown intrinsic) and the schedule unchanged; the
 * registry parses every entry; target availability; the trace round trip of
 * Blockize and Tensorize. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "ir/interp.h"
#include "ir/print.h"
#include "ir/schedule/blockize.h"
#include "ir/schedule/intrin.h"
#include "ir/schedule/tensorize.h"
#include "ir/schedule/trace.h"
#include "ir/struct.h"
#include "util.h"

static ts_diag D;

#define REFUSED(s, call, ...) TU_REFUSED(&D, s, call, __VA_ARGS__)

static sch_block blk(const char *name) { return (sch_block){name}; }

typedef struct count_ctx {
  const char *name;
  int n;
} count_ctx;

static bool count_cb(void *ctx, const ir_expr *e) {
  count_ctx *c = ctx;
  if (e->kind == IR_CALL_EXTERN && strstr(e->u.ext.name, c->name)) c->n++;
  return true;
}

static int count_calls(sch_state *s, const char *name) {
  count_ctx c = {name, 0};
  ir_visitor v = {.expr = count_cb, .ctx = &c};
  ir_visit_stmt(&v, sch_func(s)->body);
  return c.n;
}

/* Splits the three loops of block C of a matmul into (outer, inner) with
 * the given inner extents and orders them i0 j0 k0 i1 j1 k1. Returns the
 * loops in l[0..6). */
static void tile3(sch_state *s, int64_t ti, int64_t tj, int64_t tk, sch_loop *l) {
  sch_loop lp[3];
  ck_assert_int_eq(tu_loops(s, "C", lp, 3), 3);
  int64_t f[3][2] = {{-1, ti}, {-1, tj}, {-1, tk}};
  sch_loop o[3][2];
  for (int i = 0; i < 3; i++) {
    ts_diag_clear(&D);
    tu_ok(sch_split(s, lp[i], 2, f[i], o[i], &D), &D);
  }
  sch_loop order[6] = {o[0][0], o[1][0], o[2][0], o[0][1], o[1][1], o[2][1]};
  ts_diag_clear(&D);
  tu_ok(sch_reorder(s, 6, order, &D), &D);
  memcpy(l, order, sizeof order);
}

/* ---- blockize ----------------------------------------------------------------- */

START_TEST(test_blockize_matmul) {
  ir_func *orig;
  sch_state *s = tu_open("matmul_int8:m=6,n=32,k=12", &orig);
  sch_loop l[6];
  tile3(s, 3, 16, 4, l);
  sch_block ob;
  ts_diag_clear(&D);
  tu_ok(sch_blockize(s, l[3], &ob, &D), &D);
  ck_assert_str_eq(ob.name, "C_o");
  const ir_stmt *orz = tu_find_realize(s, "C_o");
  ck_assert_ptr_nonnull(orz);
  const ir_block *b = orz->u.realize.block;
  /* vi_o: S(0, 2), vj_o: S(0, 2), vk_o: R(0, 3); the init moved out */
  ck_assert_int_eq(b->niter, 3);
  int64_t ext[3] = {2, 2, 3};
  for (int i = 0; i < 3; i++) {
    int64_t e;
    ck_assert(ir_as_int(b->iters[i].dom.extent, &e));
    ck_assert_int_eq(e, ext[i]);
  }
  ck_assert_int_eq(b->iters[2].type, IR_ITER_R);
  ck_assert_ptr_nonnull(b->init);
  ck_assert_ptr_null(tu_find_realize(s, "C")->u.realize.block->init);
  tu_assert_equivalent(orig, sch_func(s));
}
END_TEST

/* blockize at the spatial tile only: k stays outside, so the inner block
 * keeps no R var outside and its init stays inside */
START_TEST(test_blockize_keeps_init_when_outer_has_no_reduction) {
  ir_func *orig;
  sch_loop lp[3];
  sch_state *s = tu_open_loops("matmul:m=5,n=7,k=3", &orig, "C", lp, 3);
  sch_block ob;
  ts_diag_clear(&D);
  tu_ok(sch_blockize(s, lp[1], &ob, &D), &D); /* j and k inside: vi outer only */
  const ir_block *b = tu_find_realize(s, ob.name)->u.realize.block;
  ck_assert_int_eq(b->niter, 1);
  ck_assert_ptr_null(b->init);
  ck_assert_ptr_nonnull(tu_find_realize(s, "C")->u.realize.block->init);
  tu_assert_equivalent(orig, sch_func(s));
}
END_TEST

START_TEST(test_blockize_refusals) {
  ir_func *orig;
  /* fused loops: floordiv/floormod bindings are not affine */
  sch_loop lp[3], fused;
  sch_state *s = tu_open_loops("matmul:m=4,n=6,k=5", &orig, "C", lp, 3);
  ts_diag_clear(&D);
  tu_ok(sch_fuse(s, 2, lp, &fused, &D), &D);
  sch_loop l2[2];
  ck_assert_int_eq(tu_loops(s, "C", l2, 2), 2);
  REFUSED(s, sch_blockize(s, l2[1], NULL, &D), "blockize", "k");
  /* an imperfect split: the inner part does not divide the domain */
  s = tu_open("matmul:m=7,n=6,k=5", &orig);
  ck_assert_int_eq(tu_loops(s, "C", lp, 3), 3);
  int64_t f[2] = {-1, 3};
  sch_loop o[2];
  ts_diag_clear(&D);
  tu_ok(sch_split(s, lp[0], 2, f, o, &D), &D);
  REFUSED(s, sch_blockize(s, o[1], NULL, &D), "predicate");
  /* a split whose inner loop is not innermost-dense: binding vi = i0*3 + i1
   * blockized at j (which holds neither i loop: fine) vs at a loop holding
   * i0 but not i1 */
  s = tu_open("matmul:m=6,n=6,k=5", &orig);
  ck_assert_int_eq(tu_loops(s, "C", lp, 3), 3);
  ts_diag_clear(&D);
  tu_ok(sch_split(s, lp[0], 2, f, o, &D), &D);
  sch_loop order[3] = {o[1], o[0], lp[1]};
  ts_diag_clear(&D);
  tu_ok(sch_reorder(s, 3, order, &D), &D);
  REFUSED(s, sch_blockize(s, o[0], NULL, &D), "does not divide");
  /* two blocks under the loop */
  s = tu_open("softmax:m=3,n=5", &orig);
  sch_loop sl[2];
  const char *first = NULL;
  sch_block *kids;
  int nk;
  ts_diag_clear(&D);
  tu_ok(sch_get_child_blocks(s, blk("root"), &kids, &nk, &D), &D);
  first = kids[0].name;
  ck_assert_int_ge(tu_loops(s, first, sl, 2), 1);
}
END_TEST

/* ---- tensorize ---------------------------------------------------------------- */

static void tensorize_case(const char *spec, const char *intrin, int64_t ti, int64_t tj, int64_t tk,
                           const char *call) {
  ir_func *orig;
  sch_state *s = tu_open(spec, &orig);
  sch_loop l[6];
  tile3(s, ti, tj, tk, l);
  sch_block ob;
  ts_diag_clear(&D);
  tu_ok(sch_tensorize_loop(s, l[3], intrin, &ob, &D), &D);
  const ir_block *b = tu_find_realize(s, ob.name)->u.realize.block;
  const ir_annot *an = ir_annot_find(b->nannot, b->annots, "tessel.tensorized");
  ck_assert_ptr_nonnull(an);
  ck_assert_str_eq(an->v.s, intrin);
  ck_assert_ptr_null(tu_find_realize(s, "C"));
  if (call) ck_assert_int_ge(count_calls(s, call), 1);
  tu_assert_equivalent(orig, sch_func(s));
}

START_TEST(test_tensorize_vnni) {
  tensorize_case("matmul_int8:m=3,n=32,k=12", "x86.avx512.vnni.i8i8.1x16x4", 1, 16, 4, "vpdpbusd");
  tensorize_case("matmul_int8:m=8,n=16,k=8", "x86.avx512.vnni.i8i8.4x16x4", 4, 16, 4, "vpdpbusd");
}
END_TEST


/* the +128 trick and its compensation at the extremes of i8: every A value
 * in [-128, 127] against B values including -128 and 127, exact */
START_TEST(test_vnni_extremes) {
  ir_func *orig;
  sch_state *s = tu_open("matmul_int8:m=64,n=16,k=8", &orig);
  sch_loop l[6];
  tile3(s, 4, 16, 4, l);
  ts_diag_clear(&D);
  tu_ok(sch_tensorize_loop(s, l[3], "x86.avx512.vnni.i8i8.4x16x4", NULL, &D), &D);
  ir_tensor x[3], y[3];
  ts_diag_clear(&D);
  tu_ok(ir_tensors_for_func(orig, NULL, x, &D), &D);
  tu_ok(ir_tensors_for_func(orig, NULL, y, &D), &D);
  int8_t *A0 = x[0].data, *B0 = x[1].data, *A1 = y[0].data, *B1 = y[1].data;
  for (int i = 0; i < 64 * 8; i++) A0[i] = A1[i] = (int8_t)(i * 37 % 256 - 128);
  static const int8_t edge[] = {-128, 127, -1, 0, 1, -127, 126, 64};
  for (int i = 0; i < 8 * 16; i++) B0[i] = B1[i] = edge[(i * 5) % 8];
  tu_ok(ir_interp_run(orig, x, &D), &D);
  tu_ok(ir_interp_run(sch_func(s), y, &D), &D);
  ck_assert(!memcmp(x[2].data, y[2].data, 64 * 16 * 4));
  for (int i = 0; i < 3; i++) {
    ir_tensor_free(&x[i]);
    ir_tensor_free(&y[i]);
  }
}
END_TEST

START_TEST(test_tensorize_sdot) {
  tensorize_case("matmul_int8:m=5,n=12,k=8", "arm.dotprod.sdot.i8i8.1x4x4", 1, 4, 4, "sdot");
  tensorize_case("matmul_int8:m=8,n=8,k=4", "arm.dotprod.sdot.i8i8.4x4x4", 4, 4, 4, "sdot");
}
END_TEST

START_TEST(test_tensorize_fma) {
  tensorize_case("matmul:m=8,n=32,k=5", "x86.avx512.fma.f32.4x16x1", 4, 16, 1, NULL);
  tensorize_case("matmul:m=4,n=8,k=3", "arm.neon.fma.f32.4x4x1", 4, 4, 1, NULL);
}
END_TEST

/* u8 x i8 with plain vpdpbusd; the i8 x i8 entry refuses u8 data */
START_TEST(test_tensorize_vnni_u8) {
  ir_func *orig;
  sch_state *s = tu_open_text(
                                  "kernel mm(A: u8[2, 8], B: i8[8, 16]) -> C: i32[2, 16] {\n"
                                  "  C[i, j] += i32(A[i, k]) * i32(B[k, j])\n"
                                  "}\n",
                                  &orig);
  sch_loop l[6];
  tile3(s, 1, 16, 4, l);
  ts_diag_clear(&D);
  tu_ok(sch_tensorize_loop(s, l[3], "x86.avx512.vnni.u8i8.1x16x4", NULL, &D), &D);
  tu_assert_equivalent(orig, sch_func(s));
  /* the i8 x i8 entry must not match u8 data */
  s = tu_open_text(
                       "kernel mm(A: u8[2, 8], B: i8[8, 16]) -> C: i32[2, 16] {\n"
                       "  C[i, j] += i32(A[i, k]) * i32(B[k, j])\n"
                       "}\n",
                       &orig);
  tile3(s, 1, 16, 4, l);
  REFUSED(s, sch_tensorize_loop(s, l[3], "x86.avx512.vnni.i8i8.1x16x4", NULL, &D), "does not match", "u8");
}
END_TEST

/* visits the realizes of the block named ctx->name: how many, and their
 * iteration counts (product of the enclosing loops is not needed: the
 * block is at the root, so its iter domains are its iterations) */
typedef struct realize_ctx {
  const char *name;
  int n;
  const ir_block *b;
} realize_ctx;

static bool realize_cb(void *ctx, const ir_stmt *st) {
  realize_ctx *c = ctx;
  if (st->kind == IR_BLOCK_REALIZE && !strcmp(st->u.realize.block->name, c->name)) {
    c->n++;
    c->b = st->u.realize.block;
  }
  return true;
}

static const ir_block *only_block(const ir_func *f, const char *name) {
  realize_ctx c = {name, 0, NULL};
  ir_visit_stmt(&(ir_visitor){.stmt = realize_cb, .ctx = &c}, f->body);
  ck_assert_msg(c.n == 1, "%d realizes of block %s", c.n, name);
  return c.b;
}

/* ShiftToUnsigned: i8 x i8 made u8 x i8 with the compensation hoisted:
 * the same results (odd and prime extents), the compensation block reduces
 * over k only and is indexed by the column (once per output column), C's
 * init reads it and its update none of it, and the u8 VNNI kernel then
 * tensorizes C (with its 8-row and 1-row forms) — still equal; refusals */
START_TEST(test_shift_to_unsigned) {
  static const char *specs[] = {"matmul_int8:m=7,n=13,k=5", "matmul_int8:m=3,n=17,k=31", "matmul_int8:m=1,n=2,k=3"};
  for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
    ir_func *orig;
    sch_state *s = tu_open(specs[i], &orig);
    sch_block out[2];
    ts_diag_clear(&D);
    tu_ok(sch_shift_to_unsigned(s, blk("C"), out, &D), &D);
    tu_assert_equivalent(orig, sch_func(s));
    ck_assert_str_eq(out[0].name, "A_u8");
    ck_assert_str_eq(out[1].name, "B_sum");
    const ir_block *bs = only_block(sch_func(s), "B_sum"), *c = only_block(sch_func(s), "C");
    ck_assert_int_eq(bs->niter, 2);
    ck_assert_int_eq(bs->iters[0].type, IR_ITER_R); /* B[k, j]: k reduced */
    ck_assert_int_eq(bs->iters[1].type, IR_ITER_S);
    ck_assert_int_eq(bs->writes[0].buf->ndim, 1); /* one value per column */
    ck_assert(ir_expr_loads_buffer(c->init->u.store.value, bs->writes[0].buf));
    ck_assert(!ir_expr_loads_buffer(c->body->u.store.value, bs->writes[0].buf));
    ck_assert_int_eq(c->body->u.store.value->u.bin.b->u.bin.a->u.cast.value->dtype.code, IR_U8);
  }
  ir_func *orig;
  sch_state *s = tu_open("matmul_int8:m=16,n=32,k=12", &orig);
  ts_diag_clear(&D);
  tu_ok(sch_shift_to_unsigned(s, blk("C"), NULL, &D), &D);
  sch_loop l[6];
  tile3(s, 8, 16, 4, l);
  ts_diag_clear(&D);
  tu_ok(sch_tensorize_loop(s, l[3], "x86.avx512.vnni.u8i8.8x16x4", NULL, &D), &D);
  tu_assert_equivalent(orig, sch_func(s));
  /* refusals: not i8 x i8, already shifted */
  s = tu_open("matmul_u8s8:m=4,n=16,k=4", &orig);
  REFUSED(s, sch_shift_to_unsigned(s, blk("C"), NULL, &D), "two i8 loads");
  s = tu_open("matmul:m=4,n=16,k=4", &orig);
  REFUSED(s, sch_shift_to_unsigned(s, blk("C"), NULL, &D), "i32 C");
  s = tu_open("matmul_int8:m=4,n=16,k=4", &orig);
  ts_diag_clear(&D);
  tu_ok(sch_shift_to_unsigned(s, blk("C"), NULL, &D), &D);
  REFUSED(s, sch_shift_to_unsigned(s, blk("C"), NULL, &D), "is not C = 0");
}
END_TEST

/* PadEinsum: odd and prime extents padded to the VNNI tile (rows by 1 or 8,
 * columns by 16, k by 4): equal to the original, C written only inside its
 * extent (the copy-out block), the padded inputs zero-filled; the padded
 * block then splits evenly and tensorizes with the u8 x i8 kernels (plain
 * and after ShiftToUnsigned), still equal; refusals named */
START_TEST(test_pad_einsum) {
  static const struct {
    const char *spec;
    int64_t rows;
    const char *intrin;
    bool shift;
  } cases[] = {
      {"matmul_u8s8:m=1,n=17,k=5", 1, "x86.avx512.vnni.u8i8.1x16x4", false},
      {"matmul_u8s8:m=7,n=31,k=13", 8, "x86.avx512.vnni.u8i8.8x16x4", false},
      {"matmul_u8s8:m=5,n=32,k=7", 4, "x86.avx512.vnni.u8i8.4x16x4", false},
      {"matmul_int8:m=3,n=17,k=31", 1, "x86.avx512.vnni.u8i8.1x16x4", true},
      {"matmul_int8:m=7,n=13,k=5", 8, "x86.avx512.vnni.i8i8.8x16x4", false},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ir_func *orig;
    sch_state *s = tu_open(cases[i].spec, &orig);
    if (cases[i].shift) {
      ts_diag_clear(&D);
      tu_ok(sch_shift_to_unsigned(s, blk("C"), NULL, &D), &D);
    }
    int64_t mult[3] = {cases[i].rows, 16, 4};
    sch_block ob;
    ts_diag_clear(&D);
    tu_ok(sch_pad_einsum(s, blk("C"), 3, mult, &ob, &D), &D);
    ck_assert_str_eq(ob.name, "C_unpad");
    tu_assert_equivalent(orig, sch_func(s));
    const ir_block *c = only_block(sch_func(s), "C"), *u = only_block(sch_func(s), "C_unpad");
    for (int k = 0; k < 3; k++) {
      int64_t e;
      ck_assert(ir_as_int(c->iters[k].dom.extent, &e));
      ck_assert_int_eq(e % mult[k], 0);
    }
    ck_assert_str_ne(c->writes[0].buf->name, "C");
    ck_assert_str_eq(u->writes[0].buf->name, "C");
    sch_loop l[6];
    tile3(s, cases[i].rows, 16, 4, l);
    ts_diag_clear(&D);
    tu_ok(sch_tensorize_loop(s, l[3], cases[i].intrin, NULL, &D), &D);
    tu_assert_equivalent(orig, sch_func(s));
  }
  ir_func *orig;
  int64_t m16[3] = {1, 16, 4};
  sch_state *s = tu_open("matmul_u8s8:m=4,n=16,k=4", &orig);
  REFUSED(s, sch_pad_einsum(s, blk("C"), 3, m16, NULL, &D), "nothing to pad");
  s = tu_open("matmul_u8s8:m=4,n=17,k=4", &orig);
  ts_diag_clear(&D);
  ck_assert_int_eq(sch_pad_einsum(s, blk("C"), 2, m16, NULL, &D), TS_EINVAL);
  ck_assert(strstr(D.msg, "2 multiples"));
  sch_loop l[6];
  tile3(s, 1, 1, 1, l);
  REFUSED(s, sch_pad_einsum(s, blk("C"), 3, m16, NULL, &D), "already scheduled");
  /* a sum of A + 1: padding its reduction would add ones (refused);
   * padding its rows only is exact; a plain sum of A pads its reduction */
  static const char rsum1[] = "kernel rsum1(A: f32[5, 7]) -> C: f32[5] {\n"
                              "  C[i] += A[i, k] + 1.0\n"
                              "}\n";
  static const char rsum[] = "kernel rsum(A: f32[5, 7]) -> C: f32[5] {\n"
                             "  C[i] += A[i, k]\n"
                             "}\n";
  int64_t mk[2] = {1, 4}, mi[2] = {4, 1};
  s = tu_open_text(rsum1, &orig);
  REFUSED(s, sch_pad_einsum(s, blk("C"), 2, mk, NULL, &D), "would not add zeros");
  ts_diag_clear(&D);
  tu_ok(sch_pad_einsum(s, blk("C"), 2, mi, NULL, &D), &D);
  tu_assert_equivalent(orig, sch_func(s));
  s = tu_open_text(rsum, &orig);
  ts_diag_clear(&D);
  tu_ok(sch_pad_einsum(s, blk("C"), 2, mk, NULL, &D), &D);
  tu_assert_equivalent(orig, sch_func(s));
  /* a buffer read at an index expression (not plain iter vars) is read as it
   * is: refused when the padded domain would read it outside its shape */
  static const char half[] = "kernel half(A: f32[3, 5], B: f32[3, 4]) -> C: f32[3, 4] {\n"
                             "  C[i, j] += A[i, k] * B[k // 2, j]\n"
                             "}\n";
  int64_t m8[3] = {1, 1, 8}, m6[3] = {1, 1, 6};
  s = tu_open_text(half, &orig);
  REFUSED(s, sch_pad_einsum(s, blk("C"), 3, m8, NULL, &D), "outside its shape");
  ts_diag_clear(&D);
  tu_ok(sch_pad_einsum(s, blk("C"), 3, m6, NULL, &D), &D); /* k < 6: k // 2 < 3 */
  tu_assert_equivalent(orig, sch_func(s));
  /* f32: a matmul pads like the int8 ones */
  s = tu_open("matmul:m=3,n=5,k=7", &orig);
  int64_t m3[3] = {2, 4, 4};
  ts_diag_clear(&D);
  tu_ok(sch_pad_einsum(s, blk("C"), 3, m3, NULL, &D), &D);
  tu_assert_equivalent(orig, sch_func(s));
}
END_TEST

START_TEST(test_tensorize_refusals) {
  ir_func *orig;
  sch_state *s = tu_open("matmul_int8:m=4,n=32,k=8", &orig);
  sch_loop l[6];
  tile3(s, 1, 16, 4, l);
  /* f32 intrinsic on int8 data */
  REFUSED(s, sch_tensorize_loop(s, l[3], "x86.avx512.fma.f32.1x16x1", NULL, &D), "tensorize", "extent");
  /* right loops, wrong operation dtype: the FMA kernel at a 1x16x1 tile */
  s = tu_open("matmul_int8:m=4,n=32,k=8", &orig);
  tile3(s, 1, 16, 1, l);
  REFUSED(s, sch_tensorize_loop(s, l[3], "x86.avx512.fma.f32.1x16x1", NULL, &D), "does not match", "i32");
  /* wrong tile: 8 lanes where the intrinsic has 16 */
  s = tu_open("matmul_int8:m=4,n=32,k=8", &orig);
  tile3(s, 1, 8, 4, l);
  REFUSED(s, sch_tensorize_loop(s, l[3], "x86.avx512.vnni.i8i8.1x16x4", NULL, &D), "extent 8", "needs 16");
  /* whole reduction inside one call */
  sch_loop lp[3], o[2];
  s = tu_open_loops("matmul_int8:m=4,n=32,k=4", &orig, "C", lp, 3);
  int64_t f[2] = {-1, 16};
  ts_diag_clear(&D);
  tu_ok(sch_split(s, lp[1], 2, f, o, &D), &D);
  sch_loop l3[4];
  ck_assert_int_eq(tu_loops(s, "C", l3, 4), 4);
  int64_t fi[2] = {-1, 1};
  sch_loop oi[2];
  ts_diag_clear(&D);
  tu_ok(sch_split(s, l3[0], 2, fi, oi, &D), &D);
  sch_loop order[4] = {oi[0], o[0], oi[1], o[1]};
  ts_diag_clear(&D);
  tu_ok(sch_reorder(s, 4, order, &D), &D);
  REFUSED(s, sch_tensorize_loop(s, oi[1], "x86.avx512.vnni.i8i8.1x16x4", NULL, &D), "init");
  /* transposed B: the index pattern differs */
  s = tu_open_text(
                       "kernel mm(A: i8[2, 8], B: i8[16, 8]) -> C: i32[2, 16] {\n"
                       "  C[i, j] += i32(A[i, k]) * i32(B[j, k])\n"
                       "}\n",
                       &orig);
  tile3(s, 1, 16, 4, l);
  REFUSED(s, sch_tensorize_loop(s, l[3], "x86.avx512.vnni.i8i8.1x16x4", NULL, &D), "does not match", "index");
  /* unknown intrinsic */
  ts_diag_clear(&D);
  ck_assert_int_eq(sch_tensorize_loop(s, l[3], "no.such.intrin", NULL, &D), TS_ENOTFOUND);
  ck_assert_ptr_nonnull(strstr(D.msg, "x86.avx512.vnni.i8i8.1x16x4"));
}
END_TEST

START_TEST(test_match_block) {
  ir_func *orig;
  sch_state *s = tu_open("matmul_int8:m=64,n=64,k=64", &orig);
  int64_t ext[3];
  ts_diag_clear(&D);
  tu_ok(sch_tensorize_match_block(s, blk("C"), sch_intrin_get("x86.avx512.vnni.i8i8.4x16x4"), ext, &D), &D);
  ck_assert_int_eq(ext[0], 4);
  ck_assert_int_eq(ext[1], 16);
  ck_assert_int_eq(ext[2], 4);
  ts_diag_clear(&D);
  ck_assert_int_eq(sch_tensorize_match_block(s, blk("C"), sch_intrin_get("x86.avx512.fma.f32.4x16x1"), ext, &D),
                   TS_ESCHEDULE);
}
END_TEST

START_TEST(test_registry) {
  ck_assert_int_ge(sch_intrin_count(), 8);
  for (int i = 0; i < sch_intrin_count(); i++) {
    const sch_intrin *in = sch_intrin_at(i);
    ir_func *df, *impl;
    ts_diag_clear(&D);
    ck_assert_msg(sch_intrin_funcs(in, tu_arena(), &df, &impl, &D) == TS_OK, "%s: %s", in->name, D.msg);
    ck_assert_int_eq(df->nparams, impl->nparams);
  }
  const sch_intrin *v = sch_intrin_get("x86.avx512.vnni.i8i8.4x16x4");
  ck_assert_ptr_nonnull(v);
  ck_assert(sch_intrin_available(v, "x86_64-pc-linux-gnu", "", "+avx512f,+avx512vnni", NULL));
  ck_assert(sch_intrin_available(v, "x86_64", "znver4", "", NULL));
  ck_assert(!sch_intrin_available(v, "x86_64", "skylake-avx512", "", NULL));
  ck_assert(!sch_intrin_available(v, "x86_64", "znver4", "-avx512vnni", NULL));
  ck_assert(!sch_intrin_available(v, "aarch64-linux-gnu", "", "+avx512f,+avx512vnni", NULL));
  const sch_intrin *sd = sch_intrin_get("arm.dotprod.sdot.i8i8.1x4x4");
  ck_assert(sch_intrin_available(sd, "aarch64-linux-gnu", "", "+dotprod", NULL));
  ck_assert(!sch_intrin_available(sd, "aarch64-linux-gnu", "cortex-a72", "", NULL));
  const sch_intrin *w = sch_intrin_get("cuda.wmma.mma_sync.f16f32.16x16x16");
  ck_assert(sch_intrin_available(w, "cuda", NULL, NULL, "sm_80"));
  ck_assert(!sch_intrin_available(w, "cuda", NULL, NULL, "sm_61"));
}
END_TEST

/* WMMA: registered and matched on fragment-scoped buffers; the body
 * becomes the mma_sync call over access_ptr of the fragments */
START_TEST(test_tensorize_wmma_match) {
  ir_func *orig;
  sch_state *s = tu_open_text(
                                  "func mm(A: f16[32, 16] scope(\"wmma.matrix_a\"), B: f16[16, 16] scope(\"wmma.matrix_b\"))"
                                  " -> C: f32[32, 16] scope(\"wmma.accumulator\") {\n"
                                  "  block root() {\n"
                                  "    for i in serial(0, 32) {\n"
                                  "      for j in serial(0, 16) {\n"
                                  "        for k in serial(0, 16) {\n"
                                  "          block C(vi: S(0, 32) = i, vj: S(0, 16) = j, vk: R(0, 16) = k) {\n"
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
  tu_ok(sch_split(s, lp[0], 2, f, o, &D), &D);
  ts_diag_clear(&D);
  tu_ok(sch_tensorize_loop(s, o[1], "cuda.wmma.mma_sync.f16f32.16x16x16", NULL, &D), &D);
  ck_assert_int_eq(count_calls(s, "tessel.wmma.mma_sync"), 1);
  char *txt = ir_func_to_string(sch_func(s));
  ck_assert_msg(strstr(txt, "access_ptr(C, vi_o * 256") != NULL || strstr(txt, "access_ptr(C, ") != NULL, "%s", txt);
  ts_free(txt);
}
END_TEST


/* ---- traces --------------------------------------------------------------------- */

/* Blockize and Tensorize recorded, written to JSON, read back and replayed
 * onto a fresh copy: structurally equal and still equal to the original */
START_TEST(test_trace_roundtrip) {
  ir_func *f = tu_workload(tu_arena(), "matmul_int8:m=8,n=32,k=8");
  ts_diag_clear(&D);
  sch_traced *t = sch_traced_new(f, 1, &D);
  ck_assert_ptr_nonnull(t);
  int b, l[3], o[3][2];
  const int *lr;
  int nl;
  tu_ok(sch_t_get_block(t, "C", &b, &D), &D);
  tu_ok(sch_t_get_loops(t, b, &lr, &nl, &D), &D);
  ck_assert_int_eq(nl, 3);
  memcpy(l, lr, sizeof l);
  int64_t tiles[3] = {4, 16, 4};
  for (int i = 0; i < 3; i++) {
    sch_arg fa[2] = {sch_arg_none(), sch_arg_int(tiles[i])};
    tu_ok(sch_t_split(t, l[i], 2, fa, o[i], &D), &D);
  }
  int order[6] = {o[0][0], o[1][0], o[2][0], o[0][1], o[1][1], o[2][1]};
  tu_ok(sch_t_reorder(t, 6, order, &D), &D);
  int ob;
  tu_ok(sch_t_blockize(t, o[0][1], &ob, &D), &D);
  tu_ok(sch_t_tensorize(t, ob, "x86.avx512.vnni.i8i8.4x16x4", &D), &D);
  /* a refused Tensorize is not recorded */
  int nbefore = sch_trace_len(sch_traced_trace(t));
  ts_diag_clear(&D);
  ck_assert_int_ne(sch_t_tensorize(t, ob, "x86.avx512.fma.f32.4x16x1", &D), TS_OK);
  ck_assert_int_eq(sch_trace_len(sch_traced_trace(t)), nbefore);
  char *js = sch_trace_to_json(sch_traced_trace(t));
  ck_assert_ptr_nonnull(strstr(js, "\"Blockize\""));
  ck_assert_ptr_nonnull(strstr(js, "\"Tensorize\""));
  ts_diag_clear(&D);
  sch_trace *tr = sch_trace_from_json(js, &D);
  ck_assert_msg(tr != NULL, "%s", D.msg);
  sch_traced *t2 = sch_traced_new(f, 1, &D);
  ts_diag_clear(&D);
  int failed_at = -1;
  tu_ok(sch_trace_apply(tr, t2, false, &failed_at, &D), &D);
  char why[256];
  ck_assert_msg(ir_struct_equal_func_explain(sch_traced_func(t), sch_traced_func(t2), why, sizeof why), "%s", why);
  tu_assert_equivalent(f, sch_traced_func(t2));
  free(js);
  sch_trace_free(tr);
  sch_traced_free(t);
  sch_traced_free(t2);
}
END_TEST

/* the random-trace generator (selfcheck) reaches Tensorize and Blockize */
START_TEST(test_random_traces_cover) {
  ir_func *f = tu_workload(tu_arena(), "matmul_int8:m=8,n=32,k=16");
  int nt = 0, nb = 0;
  for (uint64_t seed = 1; seed <= 150; seed++) {
    ts_diag_clear(&D);
    sch_traced *t = sch_traced_new(f, seed, &D);
    ts_rng rng;
    ts_rng_seed(&rng, seed);
    sch_random_opts o = {1, 3, true};
    sch_random_result r;
    tu_ok(sch_random_trace(t, &rng, &o, &r, NULL, &D), &D);
    char *js = sch_trace_to_json(sch_traced_trace(t));
    if (strstr(js, "\"Tensorize\"")) nt++;
    if (strstr(js, "\"Blockize\"")) nb++;
    free(js);
    sch_traced_free(t);
  }
  ck_assert_msg(nt >= 3 && nb >= 3, "Tensorize in %d, Blockize in %d of 150 traces", nt, nb);
  sch_selfcheck_stats st;
  ts_diag_clear(&D);
  tu_ok(sch_selfcheck(f, 60, 7, &(sch_random_opts){1, 4}, NULL, NULL, &st, &D), &D);
  ck_assert_int_eq(st.mismatches, 0);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("tensorize");
  TCase *tc = tu_tcase(s, "blockize", NULL, 120);
  tcase_add_test(tc, test_blockize_matmul);
  tcase_add_test(tc, test_blockize_keeps_init_when_outer_has_no_reduction);
  tcase_add_test(tc, test_blockize_refusals);
  tc = tu_tcase(s, "tensorize", NULL, 120);
  tcase_add_test(tc, test_tensorize_vnni);
  tcase_add_test(tc, test_vnni_extremes);
  tcase_add_test(tc, test_tensorize_sdot);
  tcase_add_test(tc, test_tensorize_fma);
  tcase_add_test(tc, test_tensorize_vnni_u8);
  tcase_add_test(tc, test_tensorize_refusals);
  tcase_add_test(tc, test_shift_to_unsigned);
  tcase_add_test(tc, test_pad_einsum);
  tcase_add_test(tc, test_match_block);
  tcase_add_test(tc, test_tensorize_wmma_match);
  tc = tu_tcase(s, "trace", NULL, 120);
  tcase_add_test(tc, test_trace_roundtrip);
  tcase_add_test(tc, test_random_traces_cover);
  tc = tu_tcase(s, "registry", NULL, 0);
  tcase_add_test(tc, test_registry);
  return s;
}

int main(void) { return tu_run(suite()); }
