/* test_reduction.c — decompose_reduction: the init block's name, iter vars,
 * loops and position; the update block without init, reading its output;
 * results unchanged in the reference interpreter (matmul at each legal
 * loop, batch_matmul, conv2d_nchw, softmax's two reductions, after
 * cache_write, and a predicated reduction whose predicate the init drops);
 * and the refusals (not a reduction, not an ancestor, a loop the reduction
 * uses, a loop that feeds no binding, a predicate tying dropped and kept
 * loops), each leaving the schedule unchanged. */
#include <check.h>
#include <string.h>

#include "ir/parse.h"
#include "ir/schedule/trace.h"
#include "ir/struct.h"
#include "util.h"

static ts_diag D;

static sch_block blk(const char *name) { return (sch_block){name}; }

#define REFUSED(s, call, ...) TU_REFUSED(&D, s, call, __VA_ARGS__)

/* The update block after decomposition: no init, reads what it writes. */
static void assert_update(sch_state *s, const char *name, const char *out) {
  const ir_block *u = tu_block(s, name);
  ck_assert(u->init == NULL);
  ck_assert(tu_reads(u, out) && tu_writes(u, out));
  ck_assert_str_eq(u->reads[0].buf->name, out); /* writes come first */
}

/* ---- matmul ---- */

START_TEST(matmul_outer) {
  ir_func *orig;
  sch_loop l[4];
  sch_state *s = tu_open_loops("matmul:m=6,n=10,k=7", &orig, "C", l, 3);
  sch_block init;
  ts_diag_clear(&D);
  tu_ok(sch_decompose_reduction(s, blk("C"), l[0], &init, &D), &D);
  ck_assert_str_eq(init.name, "C_init");
  tu_assert_children(s, "C_init C");
  tu_assert_loops(s, "C_init", "i_init j_init");
  tu_assert_loops(s, "C", "i j k");
  const ir_block *ib = tu_block(s, "C_init");
  ck_assert_int_eq(ib->niter, 2);
  ck_assert_str_eq(ib->iters[0].var->name, "vi_init");
  ck_assert_int_eq(ib->iters[1].type, IR_ITER_S);
  ck_assert(ib->init == NULL && tu_writes(ib, "C") && ib->nreads == 0);
  assert_update(s, "C", "C");
  tu_assert_equivalent(orig, sch_func(s));
  /* the loop handles survive; decomposing again is refused */
  REFUSED(s, sch_decompose_reduction(s, blk("C"), l[0], &init, &D), "'C'", "not a reduction");
}
END_TEST

START_TEST(matmul_middle) {
  ir_func *orig;
  sch_loop l[4];
  sch_state *s = tu_open_loops("matmul:m=5,n=4,k=3", &orig, "C", l, 3);
  sch_block init;
  ts_diag_clear(&D);
  tu_ok(sch_decompose_reduction(s, blk("C"), l[1], &init, &D), &D);
  tu_assert_loops(s, "C_init", "i j_init");
  tu_assert_loops(s, "C", "i j k");
  /* both under i: i's body is now a sequence of the init nest and j */
  const ir_stmt *ri = tu_find_realize(s, "C_init");
  ck_assert_ptr_nonnull(ri);
  ck_assert(ri->u.realize.iter_values[0]->kind == IR_VAR);
  ck_assert_ptr_eq(ri->u.realize.iter_values[0]->u.var, l[0].var);
  tu_assert_equivalent(orig, sch_func(s));
}
END_TEST

START_TEST(batch_matmul_decompose) {
  ir_func *orig;
  sch_loop l[4];
  sch_state *s = tu_open_loops("batch_matmul:b=2,m=3,n=5,k=4", &orig, "C", l, 4);
  sch_block init;
  ts_diag_clear(&D);
  tu_ok(sch_decompose_reduction(s, blk("C"), l[1], &init, &D), &D);
  tu_assert_loops(s, "C_init", "b i_init j_init");
  assert_update(s, "C", "C");
  tu_assert_equivalent(orig, sch_func(s));
}
END_TEST

START_TEST(conv2d_decompose) {
  ir_func *orig;
  sch_loop l[8];
  sch_state *s = tu_open_loops("conv2d_nchw:n=2,c=3,h=5,w=4,k=2,r=3,s=3,pad=1", &orig, "Y", l, 7);
  sch_block init;
  ts_diag_clear(&D);
  /* at q, the last spatial loop: the reduce loops ci, ri, si are dropped */
  tu_ok(sch_decompose_reduction(s, blk("Y"), l[3], &init, &D), &D);
  ck_assert_str_eq(init.name, "Y_init");
  tu_assert_loops(s, "Y_init", "b o p q_init");
  assert_update(s, "Y", "Y");
  tu_assert_equivalent(orig, sch_func(s));
}
END_TEST

START_TEST(softmax_both_reductions) {
  ir_func *orig;
  sch_state *s = tu_open("softmax:m=3,n=7", &orig);
  sch_loop l[4];
  sch_block init;
  ck_assert_int_eq(tu_loops(s, "mx", l, 4), 2);
  ts_diag_clear(&D);
  tu_ok(sch_decompose_reduction(s, blk("mx"), l[0], &init, &D), &D);
  ck_assert_str_eq(init.name, "mx_init");
  ck_assert_int_eq(tu_loops(s, "s", l, 4), 2);
  tu_ok(sch_decompose_reduction(s, blk("s"), l[0], &init, &D), &D);
  ck_assert_str_eq(init.name, "s_init");
  tu_assert_children(s, "mx_init mx e s_init s Y");
  tu_assert_loops(s, "mx_init", "i_init");
  assert_update(s, "mx", "mx");
  tu_assert_equivalent(orig, sch_func(s));
}
END_TEST

START_TEST(after_cache_write) {
  ir_func *orig;
  sch_state *s = tu_open("matmul:m=6,n=10,k=7", &orig);
  sch_block out, init;
  ts_diag_clear(&D);
  tu_ok(sch_cache_read(s, blk("C"), 0, "shared", 0, NULL, &out, &D), &D);
  tu_ok(sch_cache_write(s, blk("C"), 0, "local", 0, NULL, &out, &D), &D);
  sch_loop l[4];
  ck_assert_int_eq(tu_loops(s, "C", l, 4), 3);
  tu_ok(sch_decompose_reduction(s, blk("C"), l[1], &init, &D), &D);
  tu_assert_children(s, "A_shared C_init C C_local");
  ck_assert(tu_writes(tu_block(s, "C_init"), "C_local"));
  assert_update(s, "C", "C_local");
  tu_assert_equivalent(orig, sch_func(s));
}
END_TEST

/* The fresh name when C_init is taken: a block already named so. */
START_TEST(fresh_init_name) {
  ir_func *orig;
  sch_state *s = tu_open("matmul:m=3,n=4,k=5", &orig);
  sch_block out, init;
  ts_diag_clear(&D);
  tu_ok(sch_cache_write(s, blk("C"), 0, "init", 0, NULL, &out, &D), &D);
  ck_assert_str_eq(out.name, "C_init");
  sch_loop l[4];
  ck_assert_int_eq(tu_loops(s, "C", l, 4), 3);
  tu_ok(sch_decompose_reduction(s, blk("C"), l[0], &init, &D), &D);
  ck_assert_str_eq(init.name, "C_init_1");
  tu_assert_equivalent(orig, sch_func(s));
}
END_TEST

/* ---- predicates ---- */

/* k split by 4 with a guard: the init drops the guard on the reduce loops. */
static const char *GUARDED =
    "func f(A: f32[4, 7]) -> C: f32[4] {\n"
    "  block root() {\n"
    "    for i in serial(0, 4) {\n"
    "      for k0 in serial(0, 2) {\n"
    "        for k1 in serial(0, 4) {\n"
    "          block C(vi: S(0, 4) = i, vk: R(0, 7) = k0 * 4 + k1) where k0 * 4 + k1 < 7 {\n"
    "            reads A[vi, vk]\n"
    "            writes C[vi]\n"
    "            init {\n"
    "              C[vi] = 0.0\n"
    "            }\n"
    "            C[vi] = C[vi] + A[vi, vk]\n"
    "          }\n"
    "        }\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "}\n";

START_TEST(guarded_reduction) {
  ir_func *orig;
  sch_state *s = tu_open_text(GUARDED, &orig);
  sch_loop l[4];
  ck_assert_int_eq(tu_loops(s, "C", l, 4), 3);
  sch_block init;
  ts_diag_clear(&D);
  /* below the outermost reduction loop k0: refused */
  REFUSED(s, sch_decompose_reduction(s, blk("C"), l[2], &init, &D), "decompose_reduction", "'k0'",
          "reduce var 'vk'");
  tu_ok(sch_decompose_reduction(s, blk("C"), l[0], &init, &D), &D);
  const ir_stmt *ri = tu_find_realize(s, "C_init");
  ck_assert_ptr_nonnull(ri);
  int64_t v = 0;
  ck_assert(ir_as_int(ri->u.realize.predicate, &v) && v == 1);
  tu_assert_loops(s, "C_init", "i_init");
  tu_assert_equivalent(orig, sch_func(s));
}
END_TEST

/* A guard that ties the spatial loop to a reduce loop cannot be dropped. */
static const char *TIED =
    "func f(A: f32[4, 4]) -> C: f32[4] {\n"
    "  block root() {\n"
    "    for i in serial(0, 4) {\n"
    "      for k in serial(0, 4) {\n"
    "        block C(vi: S(0, 4) = i, vk: R(0, 4) = k) where i + k < 6 {\n"
    "          reads A[vi, vk]\n"
    "          writes C[vi]\n"
    "          init {\n"
    "            C[vi] = 0.0\n"
    "          }\n"
    "          C[vi] = C[vi] + A[vi, vk]\n"
    "        }\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "}\n";

/* A loop t that feeds no binding: each pass reduces again. */
static const char *REDUNDANT =
    "func f(A: f32[4, 4]) -> C: f32[4] {\n"
    "  block root() {\n"
    "    for i in serial(0, 4) {\n"
    "      for t in serial(0, 2) {\n"
    "        for k in serial(0, 4) {\n"
    "          block C(vi: S(0, 4) = i, vk: R(0, 4) = k) {\n"
    "            reads A[vi, vk]\n"
    "            writes C[vi]\n"
    "            init {\n"
    "              C[vi] = 0.0\n"
    "            }\n"
    "            C[vi] = C[vi] + A[vi, vk]\n"
    "          }\n"
    "        }\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "}\n";

START_TEST(refuse_tied_and_redundant) {
  ir_func *orig;
  sch_state *s = tu_open_text(TIED, &orig);
  sch_loop l[4];
  sch_block init;
  ck_assert_int_eq(tu_loops(s, "C", l, 4), 2);
  REFUSED(s, sch_decompose_reduction(s, blk("C"), l[0], &init, &D), "decompose_reduction", "'C'",
          "predicate");
  s = tu_open_text(REDUNDANT, &orig);
  ck_assert_int_eq(tu_loops(s, "C", l, 4), 3);
  REFUSED(s, sch_decompose_reduction(s, blk("C"), l[0], &init, &D), "loop 't'", "feeds no binding");
  REFUSED(s, sch_decompose_reduction(s, blk("C"), l[1], &init, &D), "loop 't'", "feeds no binding");
}
END_TEST

/* ---- refusals ---- */

START_TEST(refuse_not_reduction_or_ancestor) {
  ir_func *orig;
  sch_loop le[4], lmx[4], ls[4];
  sch_state *s = tu_open_loops("softmax:m=3,n=7", &orig, "e", le, 2);
  ck_assert_int_eq(tu_loops(s, "mx", lmx, 4), 2);
  ck_assert_int_eq(tu_loops(s, "s", ls, 4), 2);
  sch_block init;
  REFUSED(s, sch_decompose_reduction(s, blk("e"), le[0], &init, &D), "decompose_reduction", "'e'",
          "not a reduction");
  REFUSED(s, sch_decompose_reduction(s, blk("s"), lmx[0], &init, &D), "decompose_reduction",
          "not an ancestor of block 's'");
  REFUSED(s, sch_decompose_reduction(s, blk("s"), (sch_loop){NULL, SCH_LOC_ROOT}, &init, &D),
          "location mark");
  ts_diag_clear(&D);
  ck_assert_int_eq(sch_decompose_reduction(s, blk("nope"), ls[0], &init, &D), TS_ENOTFOUND);
  /* a copy block is not a reduction either */
  sch_block out;
  tu_ok(sch_cache_read(s, blk("mx"), 0, "shared", 0, NULL, &out, &D), &D);
  sch_loop lc[4];
  ck_assert_int_eq(tu_loops(s, out.name, lc, 4), 2);
  REFUSED(s, sch_decompose_reduction(s, out, lc[0], &init, &D), "not a reduction");
}
END_TEST

/* ---- after loop transformations ---- */

START_TEST(after_split_reorder) {
  ir_func *orig;
  sch_loop l[8], ks[2], js[2];
  sch_state *s = tu_open_loops("matmul:m=6,n=10,k=7", &orig, "C", l, 3);
  int64_t f3[2] = {-1, 3}, f4[2] = {-1, 4};
  ts_diag_clear(&D);
  tu_ok(sch_split(s, l[2], 2, f3, ks, &D), &D); /* k: 7 = 3 x 3, guarded */
  tu_ok(sch_split(s, l[1], 2, f4, js, &D), &D); /* j: 10 = 3 x 4, guarded */
  /* i j0 k0 j1 k1 */
  sch_loop order[3] = {ks[0], js[1], ks[1]};
  tu_ok(sch_reorder(s, 3, order, &D), &D);
  tu_assert_loops(s, "C", "i j_0 k_0 j_1 k_1");
  sch_block init;
  /* below the outermost reduce loop k0 it is refused; at j0 it works and
   * keeps the guard on j but not the one on k */
  REFUSED(s, sch_decompose_reduction(s, blk("C"), ks[1], &init, &D), "reduce var 'vk'");
  tu_ok(sch_decompose_reduction(s, blk("C"), js[0], &init, &D), &D);
  tu_assert_loops(s, "C_init", "i j_0_init j_1_init");
  const ir_stmt *ri = tu_find_realize(s, "C_init");
  ck_assert_ptr_nonnull(ri);
  int64_t v;
  ck_assert(!ir_as_int(ri->u.realize.predicate, &v));
  tu_assert_equivalent(orig, sch_func(s));
}
END_TEST

/* Tiled bindings (vi = i0*12 + i1*4 + i2, ...) are proved injective without
 * enumerating the iteration space (reduction.c, mixed-radix rule): the
 * decomposition at the outermost reduction loop of an SSRSRS-like nest is
 * accepted and computes what the unscheduled matmul computes. */
START_TEST(tiled_affine_bindings) {
  ir_func *orig;
  sch_loop l[3], is[3], js[2], ks[2];
  sch_state *s = tu_open_loops("matmul:m=24,n=40,k=18", &orig, "C", l, 3);
  int64_t fi[3] = {-1, 3, 4}, fj[2] = {-1, 8}, fk[2] = {-1, 6};
  ts_diag_clear(&D);
  tu_ok(sch_split(s, l[0], 3, fi, is, &D), &D);
  tu_ok(sch_split(s, l[1], 2, fj, js, &D), &D);
  tu_ok(sch_split(s, l[2], 2, fk, ks, &D), &D);
  /* i0 j0 | i1 | k0 | i2 j1 | k1 */
  sch_loop order[7] = {is[0], js[0], is[1], ks[0], is[2], js[1], ks[1]};
  tu_ok(sch_reorder(s, 7, order, &D), &D);
  tu_assert_loops(s, "C", "i_0 j_0 i_1 k_0 i_2 j_1 k_1");
  sch_block init;
  tu_ok(sch_decompose_reduction(s, blk("C"), ks[0], &init, &D), &D);
  tu_assert_loops(s, "C_init", "i_0 j_0 i_1 i_2_init j_1_init");
  tu_assert_equivalent(orig, sch_func(s));
}
END_TEST

START_TEST(trace_roundtrip) {
  ir_func *orig;
  sch_traced *t = tu_open_traced("batch_matmul:b=2,m=3,n=5,k=4", 1, &orig);
  int c, w, init;
  const int *l;
  int n;
  tu_ok(sch_t_get_block(t, "C", &c, &D), &D);
  tu_ok(sch_t_cache_write(t, c, 0, "local", 0, NULL, &w, &D), &D);
  tu_ok(sch_t_get_loops(t, c, &l, &n, &D), &D);
  ck_assert_int_eq(n, 4);
  tu_ok(sch_t_decompose_reduction(t, c, l[2], &init, &D), &D);
  ck_assert_str_eq(sch_t_block(t, init).name, "C_init");
  tu_assert_roundtrip(t, orig, 1);
}
END_TEST


/* A reduction moved under a fused loop that revisits each row recomputes the
 * row (init included) every time; one init in front of the fused loop would
 * accumulate it repeatedly, so decomposing there is refused; decomposing at
 * the row's own reduction loop stays correct. */
START_TEST(refuse_revisiting_loop) {
  ir_func *orig;
  sch_state *s = tu_open("softmax:m=3,n=9", &orig);
  sch_loop yl[2], fused, sl[4];
  sch_block init;
  ck_assert_int_eq(tu_loops(s, "Y", yl, 2), 2);
  tu_ok(sch_fuse(s, 2, yl, &fused, &D), &D);
  tu_ok(sch_compute_at(s, blk("s"), fused, false, -1, &D), &D);
  tu_assert_equivalent(orig, sch_func(s));
  REFUSED(s, sch_decompose_reduction(s, blk("s"), fused, &init, &D), "decompose_reduction",
          "more than once");
  /* at the row's own reduction loop, inside the fused loop, it is fine */
  ck_assert_int_eq(tu_loops(s, "s", sl, 4), 2);
  tu_ok(sch_decompose_reduction(s, blk("s"), sl[1], &init, &D), &D);
  tu_assert_equivalent(orig, sch_func(s));
}
END_TEST

static Suite *suite(void) {
  Suite *su = suite_create("schedule_reduction");
  TCase *tc = tu_tcase(su, "decompose", NULL, 0);
  tcase_add_test(tc, matmul_outer);
  tcase_add_test(tc, matmul_middle);
  tcase_add_test(tc, batch_matmul_decompose);
  tcase_add_test(tc, conv2d_decompose);
  tcase_add_test(tc, softmax_both_reductions);
  tcase_add_test(tc, after_cache_write);
  tcase_add_test(tc, fresh_init_name);
  tcase_add_test(tc, guarded_reduction);
  tcase_add_test(tc, refuse_tied_and_redundant);
  tcase_add_test(tc, refuse_not_reduction_or_ancestor);
  tcase_add_test(tc, after_split_reorder);
  tcase_add_test(tc, trace_roundtrip);
  tcase_add_test(tc, refuse_revisiting_loop);
  tcase_add_test(tc, tiled_affine_bindings);
  return su;
}

int main(void) { return tu_run(suite()); }
