/* test_rfactor.c — the rfactor primitive: the rf block (name, iter vars,
 * loops, intermediate buffer and its shape per factor_axis) and the
 * write-back block (original name, reduce var over the rf loop, the
 * original init); results unchanged in the reference interpreter for
 * matmul (rfactor on k), reduce_sum split by vector lanes with the rf block
 * vectorized and the outer loop parallel, softmax's two row reductions,
 * odd and prime extents, integer max and float product reductions, a
 * symbolic extent (bound afterwards); the refusals (spatial loop, loop
 * feeding both kinds, not a reduction, not serial, two blocks under the
 * loop, imperfect split of the rf loop, factor_axis out of range), each
 * leaving the schedule unchanged; and the trace's JSON round trip. */
#include <check.h>
#include <string.h>

#include "ir/print.h"
#include "ir/schedule/trace.h"
#include "ir/struct.h"
#include "util.h"

static ts_diag D;

#define REFUSED(s, call, ...) TU_REFUSED(&D, s, call, __VA_ARGS__)

static sch_block blk(const char *name) { return (sch_block){name}; }

/* The buffer the block writes (its only write). */
static const ir_buffer *written(sch_state *s, const char *block) {
  const ir_block *b = tu_block(s, block);
  ck_assert_int_eq(b->nwrites, 1);
  return b->writes[0].buf;
}

static void assert_shape(const ir_buffer *b, int n, const int64_t *want) {
  ck_assert_int_eq(b->ndim, n);
  for (int i = 0; i < n; i++) {
    int64_t e;
    ck_assert_msg(ir_as_int(b->shape[i], &e) && e == want[i], "%s dim %d is not %lld", b->name, i,
                  (long long)want[i]);
  }
}

/* ---- matmul, rfactor on k ---- */
START_TEST(matmul_k) {
  ir_func *orig;
  sch_loop l[4];
  sch_state *s = tu_open_loops("matmul:m=6,n=10,k=7", &orig, "C", l, 3);
  sch_block rf;
  ts_diag_clear(&D);
  tu_ok(sch_rfactor(s, l[2], 0, &rf, &D), &D);
  ck_assert_str_eq(rf.name, "C_rf");
  tu_assert_children(s, "C_rf C");
  tu_assert_loops(s, "C_rf", "i_rf j_rf k_rf");
  tu_assert_loops(s, "C", "i j k"); /* the original loops hold the write-back */
  const ir_buffer *rb = written(s, "C_rf");
  ck_assert_str_eq(rb->name, "C_rf");
  assert_shape(rb, 3, (int64_t[]){7, 6, 10});
  const ir_block *rb_blk = tu_block(s, "C_rf");
  /* vi, vj, vk (S: the rf axis), in loop order; no reduce var left */
  ck_assert_int_eq(rb_blk->niter, 3);
  ck_assert_int_eq(rb_blk->iters[2].type, IR_ITER_S);
  ck_assert_str_eq(rb_blk->iters[2].var->name, "vk");
  ck_assert_ptr_nonnull(rb_blk->init);
  const ir_block *wb = tu_block(s, "C");
  ck_assert_int_eq(wb->niter, 3);
  ck_assert_int_eq(wb->iters[2].type, IR_ITER_R);
  ck_assert_ptr_nonnull(wb->init);
  tu_assert_equivalent(orig, sch_func(s));
  /* the rf loop is now a reduction loop of the write-back over the rf
   * buffer: rfactor again works (a second level of partials) */
  tu_ok(sch_rfactor(s, l[2], -1, &rf, &D), &D);
  ck_assert_str_eq(rf.name, "C_rf_1");
  assert_shape(written(s, "C_rf_1"), 3, (int64_t[]){6, 10, 7});
  tu_assert_equivalent(orig, sch_func(s));
}
END_TEST

/* ---- reduce_sum: split by the lanes, rfactor the inner part, vectorize it ---- */
START_TEST(reduce_sum_vectorized_partials) {
  ir_func *orig;
  sch_loop l[4], sp[2], rl[4];
  sch_state *s = tu_open_loops("reduce_sum:m=5,n=64", &orig, "Y", l, 2);
  ts_diag_clear(&D);
  tu_ok(sch_split(s, l[1], 2, (int64_t[]){-1, 16}, sp, &D), &D);
  sch_block rf;
  tu_ok(sch_rfactor(s, sp[1], -1, &rf, &D), &D);
  ck_assert_str_eq(rf.name, "Y_rf");
  assert_shape(written(s, "Y_rf"), 2, (int64_t[]){5, 16});
  ck_assert_int_eq(tu_loops(s, "Y_rf", rl, 4), 3);
  /* in the rf block the inner loop is spatial: it vectorizes; the outer
   * loop of both blocks runs in parallel */
  tu_ok(sch_vectorize(s, rl[2], &D), &D);
  tu_ok(sch_parallel(s, rl[0], &D), &D);
  tu_assert_loops(s, "Y", "i j_1");
  tu_assert_equivalent(orig, sch_func(s));
  /* the write-back's loop over the partials stays a reduction loop */
  sch_loop wl[2];
  ck_assert_int_eq(tu_loops(s, "Y", wl, 2), 2);
  REFUSED(s, sch_vectorize(s, wl[1], &D), "vectorize");
}
END_TEST

/* reduce over one long row: parallel partial sums over the outer part */
START_TEST(reduce_sum_parallel_outer) {
  ir_func *orig;
  sch_loop l[2], sp[2], rl[4];
  sch_state *s = tu_open_loops("reduce_sum:m=1,n=96", &orig, "Y", l, 2);
  ts_diag_clear(&D);
  tu_ok(sch_split(s, l[1], 2, (int64_t[]){4, -1}, sp, &D), &D);
  sch_block rf;
  tu_ok(sch_rfactor(s, sp[0], 0, &rf, &D), &D);
  assert_shape(written(s, "Y_rf"), 2, (int64_t[]){4, 1});
  ck_assert_int_eq(tu_loops(s, "Y_rf", rl, 4), 3);
  /* loops of the rf block: i, jo (spatial now), ji (reduce) */
  sch_loop order[2] = {rl[1], rl[0]};
  tu_ok(sch_reorder(s, 2, order, &D), &D);
  tu_ok(sch_parallel(s, rl[1], &D), &D);
  tu_assert_equivalent(orig, sch_func(s));
}
END_TEST

/* ---- softmax: both row reductions ---- */
START_TEST(softmax_both) {
  ir_func *orig;
  sch_state *s = tu_open("softmax:m=3,n=24", &orig);
  const char *blocks[2] = {"mx", "s"};
  for (int b = 0; b < 2; b++) {
    sch_loop l[4], sp[2], rl[4];
    ck_assert_int_eq(tu_loops(s, blocks[b], l, 4), 2);
    ts_diag_clear(&D);
    tu_ok(sch_split(s, l[1], 2, (int64_t[]){-1, 8}, sp, &D), &D);
    sch_block rf;
    tu_ok(sch_rfactor(s, sp[1], 1, &rf, &D), &D);
    ck_assert_int_eq(tu_loops(s, rf.name, rl, 4), 3);
    tu_ok(sch_vectorize(s, rl[2], &D), &D);
  }
  tu_assert_children(s, "mx_rf mx e s_rf s Y");
  /* max's identity is -inf, sum's 0 */
  const ir_block *mrf = tu_block(s, "mx_rf");
  ck_assert(mrf->init->kind == IR_STORE && mrf->init->u.store.value->kind == IR_FLOAT_IMM);
  ck_assert(mrf->init->u.store.value->u.fval < -1e300);
  tu_assert_equivalent(orig, sch_func(s));
  /* the rf block can move under the write-back's row loop */
  sch_loop wl[2];
  ck_assert_int_eq(tu_loops(s, "s", wl, 2), 2);
  tu_ok(sch_compute_at(s, blk("s_rf"), wl[0], false, -1, &D), &D);
  tu_assert_equivalent(orig, sch_func(s));
}
END_TEST

/* ---- odd and prime extents ---- */
START_TEST(odd_prime_extents) {
  ir_func *orig;
  /* the whole prime loop */
  sch_loop l[4], sp[3];
  sch_state *s = tu_open_loops("reduce_sum:m=5,n=13", &orig, "Y", l, 2);
  sch_block rf;
  ts_diag_clear(&D);
  tu_ok(sch_rfactor(s, l[1], 0, &rf, &D), &D);
  assert_shape(written(s, "Y_rf"), 2, (int64_t[]){13, 5});
  tu_assert_equivalent(orig, sch_func(s));
  /* a perfect split of 15 = 3 * 5, rfactor the middle of three */
  s = tu_open("matmul:m=3,n=7,k=15", &orig);
  ck_assert_int_eq(tu_loops(s, "C", l, 4), 3);
  tu_ok(sch_split(s, l[2], 3, (int64_t[]){1, 3, 5}, sp, &D), &D);
  tu_ok(sch_rfactor(s, sp[1], 1, &rf, &D), &D);
  assert_shape(written(s, "C_rf"), 3, (int64_t[]){3, 3, 7});
  /* k0 (unit) and k2 stay reduce loops of the rf block */
  const ir_block *rb = tu_block(s, "C_rf");
  int nr = 0;
  for (int i = 0; i < rb->niter; i++) nr += rb->iters[i].type == IR_ITER_R;
  ck_assert_int_eq(nr, 2);
  tu_assert_equivalent(orig, sch_func(s));
  /* an imperfect split (13 by 4) guards the block with a predicate on the
   * rf loop: refused */
  s = tu_open("reduce_sum:m=5,n=13", &orig);
  ck_assert_int_eq(tu_loops(s, "Y", l, 4), 2);
  tu_ok(sch_split(s, l[1], 2, (int64_t[]){-1, 4}, sp, &D), &D);
  REFUSED(s, sch_rfactor(s, sp[1], 0, &rf, &D), "rfactor", "'Y'", "imperfect split");
  REFUSED(s, sch_rfactor(s, sp[0], 0, &rf, &D), "rfactor", "imperfect split");
  /* a perfect split, then an imperfect split of its inner piece: rfactor at
   * the outer piece gives the guarded loops their own reduce vars, tied only
   * by the predicate (4*vj_1_0 + vj_1_1 < 13), which the rf block keeps and
   * compute_at carries over to the loops it builds (it used to drop it and
   * read past the 13 columns, so rfactor refused this case) */
  for (int at = 0; at < 2; at++) {
    s = tu_open("reduce_sum:m=5,n=13", &orig);
    ck_assert_int_eq(tu_loops(s, "Y", l, 4), 2);
    tu_ok(sch_split(s, l[1], 2, (int64_t[]){1, 13}, sp, &D), &D);
    sch_loop sp2[2], wl[4];
    tu_ok(sch_split(s, sp[1], 2, (int64_t[]){-1, 4}, sp2, &D), &D);
    tu_ok(sch_rfactor(s, sp[0], 0, &rf, &D), &D);
    rb = tu_block(s, rf.name);
    nr = 0;
    for (int i = 0; i < rb->niter; i++) nr += rb->iters[i].type == IR_ITER_R;
    ck_assert_int_eq(nr, 2);
    tu_assert_equivalent(orig, sch_func(s));
    /* the rf block under the write-back's row loop (at 0), or under its rf
     * loop with unit loops kept (at 1) */
    ck_assert_int_eq(tu_loops(s, "Y", wl, 4), 2);
    tu_ok(sch_compute_at(s, rf, wl[at], at == 1, -1, &D), &D);
    tu_assert_equivalent(orig, sch_func(s));
    char *t = ir_func_to_string(sch_func(s));
    ck_assert_msg(t && strstr(t, "* 4 +") && strstr(t, "< 13"), "the rf block lost its guard:\n%s", t);
    ts_free(t);
  }
}
END_TEST

/* ---- other combiners and dtypes ---- */
START_TEST(int_max_and_product) {
  ir_func *orig;
  sch_state *s = tu_open_text(
                                  "kernel imax(X: i32[4, 9]) -> Y: i32[4] {\n"
                                  "  Y[i] max= X[i, j]\n"
                                  "}\n",
                                  &orig);
  sch_loop l[2], sp[2];
  ck_assert_int_eq(tu_loops(s, "Y", l, 2), 2);
  sch_block rf;
  ts_diag_clear(&D);
  tu_ok(sch_split(s, l[1], 2, (int64_t[]){3, 3}, sp, &D), &D);
  tu_ok(sch_rfactor(s, sp[0], 1, &rf, &D), &D);
  const ir_block *rb = tu_block(s, rf.name);
  int64_t v;
  ck_assert(ir_as_int(rb->init->u.store.value, &v) && v == INT32_MIN);
  tu_assert_equivalent(orig, sch_func(s));
  s = tu_open_text(
                       "kernel prod(X: f32[3, 8]) -> Y: f32[3] {\n"
                       "  Y[i] *= X[i, j]\n"
                       "}\n",
                       &orig);
  ck_assert_int_eq(tu_loops(s, "Y", l, 2), 2);
  tu_ok(sch_split(s, l[1], 2, (int64_t[]){2, 4}, sp, &D), &D);
  tu_ok(sch_rfactor(s, sp[1], 0, &rf, &D), &D);
  rb = tu_block(s, rf.name);
  ck_assert(rb->init->u.store.value->kind == IR_FLOAT_IMM && rb->init->u.store.value->u.fval == 1.0);
  tu_assert_equivalent(orig, sch_func(s));
}
END_TEST

/* ---- a symbolic reduction extent ---- */
START_TEST(symbolic_extent) {
  ir_func *orig;
  sch_state *s = tu_open_text(
                                  "kernel rs(X: f32[M, N]) -> Y: f32[M] {\n"
                                  "  Y[i] += X[i, j]\n"
                                  "}\n",
                                  &orig);
  sch_loop l[2];
  ck_assert_int_eq(tu_loops(s, "Y", l, 2), 2);
  sch_block rf;
  ts_diag_clear(&D);
  tu_ok(sch_rfactor(s, l[1], 1, &rf, &D), &D);
  const ir_buffer *rb = written(s, "Y_rf");
  ck_assert_int_eq(rb->ndim, 2);
  ck_assert(rb->shape[1]->kind == IR_VAR && !strcmp(rb->shape[1]->u.var->name, "N"));
  /* bind M, N and compare */
  const char *names[2] = {"M", "N"};
  int64_t vals[2] = {3, 11};
  ir_func *bo = ir_func_bind_syms(tu_arena(), orig, 2, names, vals, &D);
  ir_func *bs = ir_func_bind_syms(tu_arena(), sch_func(s), 2, names, vals, &D);
  ck_assert_msg(bo && bs, "bind: %s", D.msg);
  tu_assert_equivalent(bo, bs);
}
END_TEST

/* ---- fused reduce loops (pooling window), rfactor at the outer piece ----
 * After fuse(ri, si) and a split into (f0, f1), si = f1 % 3 no longer uses
 * the rf loop f0 but shares f1 with ri: both become one reduce var per loop,
 * so no two iter vars of the rf block sit on one loop and compute_at (which
 * rebuilds one loop per iter var) stays correct. */
START_TEST(fused_reduce_loops) {
  ir_func *orig;
  sch_loop l[8], f, sp[2], wl[8];
  sch_state *s = tu_open_loops("avg_pool2d:n=1,c=3,h=9,w=9,r=3,s=3,stride=2,pad=1", &orig, "sm", l, 6);
  ts_diag_clear(&D);
  tu_ok(sch_fuse(s, 2, l + 4, &f, &D), &D);
  tu_ok(sch_split(s, f, 2, (int64_t[]){3, 3}, sp, &D), &D);
  sch_block rf;
  tu_ok(sch_rfactor(s, sp[0], 4, &rf, &D), &D);
  const ir_stmt *r = tu_find_realize(s, rf.name);
  ck_assert_ptr_nonnull(r);
  const ir_block *b = r->u.realize.block;
  for (int i = 0; i < b->niter; i++) {
    ck_assert_int_eq(r->u.realize.iter_values[i]->kind, IR_VAR);
    for (int j = 0; j < i; j++)
      ck_assert_msg(r->u.realize.iter_values[i]->u.var != r->u.realize.iter_values[j]->u.var,
                    "iter vars %d and %d of %s share a loop", i, j, rf.name);
  }
  tu_assert_equivalent(orig, sch_func(s));
  int nw = tu_loops(s, "sm", wl, 8);
  ck_assert_int_eq(nw, 5);
  tu_ok(sch_compute_at(s, rf, wl[3], true, -1, &D), &D);
  tu_assert_equivalent(orig, sch_func(s));
}
END_TEST

/* ---- a reduction computed under a loop that feeds none of its vars ----
 * (s computed at Y's column loop, outermost after a reorder): the rf nest
 * leaves that loop out (it would only recompute the partials, and could be
 * reordered below the reduction loop, re-accumulating without init). */
START_TEST(unbound_outer_loop) {
  ir_func *orig;
  sch_loop yl[2], sl[4], rl[4];
  sch_state *s = tu_open_loops("softmax:m=3,n=8", &orig, "Y", yl, 2);
  ts_diag_clear(&D);
  sch_loop order[2] = {yl[1], yl[0]};
  tu_ok(sch_reorder(s, 2, order, &D), &D);
  tu_ok(sch_compute_at(s, blk("s"), yl[0], false, -1, &D), &D);
  tu_assert_loops(s, "s", "j i ax0");
  ck_assert_int_eq(tu_loops(s, "s", sl, 4), 3);
  sch_block rf;
  tu_ok(sch_rfactor(s, sl[2], 0, &rf, &D), &D);
  tu_assert_loops(s, "s_rf", "i_rf ax0_rf");
  tu_assert_loops(s, "s", "j i ax0");
  tu_assert_equivalent(orig, sch_func(s));
  ck_assert_int_eq(tu_loops(s, "s_rf", rl, 4), 2);
  sch_loop o2[2] = {rl[1], rl[0]};
  tu_ok(sch_reorder(s, 2, o2, &D), &D);
  tu_assert_equivalent(orig, sch_func(s));
}
END_TEST

/* ---- refusals ---- */
START_TEST(refusals) {
  ir_func *orig;
  sch_state *s = tu_open("matmul:m=4,n=6,k=5", &orig);
  sch_loop l[4], f;
  sch_block rf;
  ck_assert_int_eq(tu_loops(s, "C", l, 4), 3);
  REFUSED(s, sch_rfactor(s, l[0], 0, &rf, &D), "rfactor", "'i'", "spatial");
  REFUSED(s, sch_rfactor(s, l[2], 3, &rf, &D), "rfactor", "factor_axis 3", "[-3, 2]");
  REFUSED(s, sch_rfactor(s, l[2], -4, &rf, &D), "rfactor", "factor_axis -4");
  REFUSED(s, sch_rfactor(s, (sch_loop){NULL, SCH_LOC_ROOT}, 0, &rf, &D), "rfactor", "mark");
  /* a loop fused from a spatial and a reduce loop feeds both */
  s = tu_open("reduce_sum:m=4,n=6", &orig);
  ck_assert_int_eq(tu_loops(s, "Y", l, 4), 2);
  ts_diag_clear(&D);
  tu_ok(sch_fuse(s, 2, l, &f, &D), &D);
  REFUSED(s, sch_rfactor(s, f, 0, &rf, &D), "rfactor", "both spatial and reduce");
  /* not a reduction */
  s = tu_open("add:m=4,n=6", &orig);
  ck_assert_int_eq(tu_loops(s, "C", l, 4), 2);
  REFUSED(s, sch_rfactor(s, l[1], 0, &rf, &D), "rfactor", "'C'", "not a reduction");
  /* not serial */
  s = tu_open("reduce_sum:m=4,n=6", &orig);
  ck_assert_int_eq(tu_loops(s, "Y", l, 4), 2);
  tu_ok(sch_unroll(s, l[1], &D), &D);
  REFUSED(s, sch_rfactor(s, l[1], 0, &rf, &D), "rfactor", "'j'", "serial");
  /* two blocks under the loop */
  sch_loop yl[2];
  s = tu_open_loops("softmax:m=3,n=5", &orig, "Y", yl, 2);
  tu_ok(sch_compute_at(s, blk("s"), yl[0], false, -1, &D), &D);
  REFUSED(s, sch_rfactor(s, yl[0], 0, &rf, &D), "rfactor", "2 blocks");
  /* the reduction under the row loop: its own j loop still works, and the
   * rf nest goes in front of it inside the row loop */
  sch_loop sl[3];
  ck_assert_int_eq(tu_loops(s, "s", sl, 3), 2);
  tu_ok(sch_rfactor(s, sl[1], 0, &rf, &D), &D);
  tu_assert_equivalent(orig, sch_func(s));
}
END_TEST

/* ---- trace: split, rfactor, vectorize; JSON round trip ---- */
START_TEST(trace_roundtrip) {
  ir_func *orig;
  sch_traced *t = tu_open_traced("softmax:m=4,n=32", 7, &orig);
  int b, rf, v[2], sp[2], nl;
  const int *lp;
  ts_diag_clear(&D);
  tu_ok(sch_t_get_block(t, "s", &b, &D), &D);
  tu_ok(sch_t_get_loops(t, b, &lp, &nl, &D), &D);
  ck_assert_int_eq(nl, 2);
  int j = lp[1];
  tu_ok(sch_t_sample_perfect_tile(t, j, 2, 16, NULL, v, &D), &D);
  sch_arg f[2] = {sch_arg_rv(v[0]), sch_arg_rv(v[1])};
  tu_ok(sch_t_split(t, j, 2, f, sp, &D), &D);
  tu_ok(sch_t_rfactor(t, sp[1], -1, &rf, &D), &D);
  tu_ok(sch_t_get_loops(t, rf, &lp, &nl, &D), &D);
  ck_assert_int_eq(nl, 3);
  tu_ok(sch_t_vectorize(t, lp[2], &D), &D);
  tu_assert_equivalent(orig, sch_traced_func(t));
  char *json = sch_trace_to_json(sch_traced_trace(t));
  ck_assert_ptr_nonnull(json);
  ck_assert_msg(strstr(json, "[\"RFactor\",[\"l") != NULL, "%s", json);
  ts_free(json);
  tu_assert_roundtrip(t, orig, 99);
  /* a wrong attr count is a parse error naming the kind */
  const char *bad = "[[[\"GetBlock\",[],[\"s\",\"softmax\"],[\"b0\"]],"
                    "[\"GetLoops\",[\"b0\"],[],[\"l1\",\"l2\"]],"
                    "[\"RFactor\",[\"l2\"],[],[\"b3\"]]],[]]";
  ts_diag_clear(&D);
  ck_assert_ptr_null(sch_trace_from_json(bad, &D));
  ck_assert_msg(strstr(D.msg, "RFactor") != NULL, "%s", D.msg);
}
END_TEST

static Suite *suite(void) {
  Suite *su = suite_create("schedule_rfactor");
  TCase *tc = tu_tcase(su, "rfactor", NULL, 0);
  tcase_add_test(tc, matmul_k);
  tcase_add_test(tc, reduce_sum_vectorized_partials);
  tcase_add_test(tc, reduce_sum_parallel_outer);
  tcase_add_test(tc, softmax_both);
  tcase_add_test(tc, odd_prime_extents);
  tcase_add_test(tc, int_max_and_product);
  tcase_add_test(tc, symbolic_extent);
  tcase_add_test(tc, fused_reduce_loops);
  tcase_add_test(tc, unbound_outer_loop);
  tcase_add_test(tc, refusals);
  tcase_add_test(tc, trace_roundtrip);
  return su;
}

int main(void) { return tu_run(suite()); }
