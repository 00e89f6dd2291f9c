/* test_compute_at.c — compute_at, reverse_compute_at and
 * sample_compute_location (ir/schedule/compute_at.c). Every legal use runs
 * with the state checker on and is compared with the unscheduled function
 * in the reference interpreter; refusals must leave the function unchanged
 * (same body pointer) and name the primitive and the reason. Sizes are small
 * and odd so that partial tiles (predicates) show up. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/parse.h"
#include "ir/print.h"
#include "ir/schedule/trace.h"
#include "ir/struct.h"
#include "util.h"

static ts_diag D;

static void setup(void) {
  tu_setup();
  ts_diag_clear(&D);
}

/* ---- helpers ---------------------------------------------------------------- */

static sch_block BLK(const char *name) { return (sch_block){name}; }
static const sch_loop ROOT = {NULL, SCH_LOC_ROOT};
static const sch_loop INLINE = {NULL, SCH_LOC_INLINE};

#define REFUSED(s, call, ...) TU_REFUSED(&D, s, call, __VA_ARGS__)

#define OK(call) TU_OK(&D, call)

static void equiv(sch_state *s, const ir_func *orig) { tu_assert_equivalent(orig, sch_func(s)); }

static void split2(sch_state *s, sch_loop l, int64_t outer, int64_t inner, sch_loop *out) {
  int64_t f[2] = {outer, inner};
  OK(sch_split(s, l, 2, f, out, &D));
}

/* A convolution with an explicit padding stage (the workload library's
 * conv2d folds the padding into a select). */
static const char *CONV_PAD =
    "kernel convpad(X: f32[1, 2, 5, 5], W: f32[3, 2, 3, 3]) -> Y: f32[1, 3, 5, 5] {\n"
    "  let P: f32[1, 2, 7, 7]\n"
    "  P[n, c, h, w] = select(h >= 1 && h < 6 && w >= 1 && w < 6, X[n, c, h - 1, w - 1], 0.0)\n"
    "  Y[n, k, p, q] += P[n, c, p + r, q + s] * W[k, c, r, s] for r in 0..3, s in 0..3\n"
    "}\n";

/* ---- compute_at ------------------------------------------------------------ */

/* softmax: the three stages under Y's row loop, from the last one back. The
 * max and sum reductions keep their whole row (init runs once per row). */
START_TEST(test_softmax_rows) {
  ir_func *orig;
  sch_state *s = tu_open("softmax:m=3,n=7", &orig);
  sch_loop yi = tu_loop(s, "Y", 0);
  OK(sch_compute_at(s, BLK("s"), yi, false, -1, &D));
  equiv(s, orig);
  OK(sch_compute_at(s, BLK("e"), yi, false, -1, &D));
  equiv(s, orig);
  OK(sch_compute_at(s, BLK("mx"), yi, false, -1, &D));
  equiv(s, orig);
  /* Each stage now hangs under i with one loop over its row. */
  const char *blocks[] = {"mx", "e", "s", "Y"};
  for (int i = 0; i < 4; i++) {
    ck_assert_int_eq(tu_nloops(s, blocks[i]), 2);
    ck_assert_ptr_eq(tu_loop(s, blocks[i], 0).var, yi.var);
  }
  tu_assert_has(s, "for ax0 in serial(0, 7)");
  tu_assert_has(s, "      for ax0 in serial(0, 7) {\n        block mx(vi: S(0, 3) = i, vj: R(0, 7) = ax0)");
  tu_assert_has(s, "block e(vi_1: S(0, 3) = i, vj_1: S(0, 7) = ax0_1)");
  char *t = tu_text(s);
  /* Program order under i: mx, e, s, then Y's own loop. */
  const char *pm = strstr(t, "block mx("), *pe = strstr(t, "block e("), *ps = strstr(t, "block s(");
  const char *py = strstr(t, "block Y(");
  ck_assert(pm && pe && ps && py && pm < pe && pe < ps && ps < py);
  ts_free(t);
}
END_TEST

/* preserve_unit_loops keeps a loop for the row var too; index -2 (earliest)
 * puts s before Y's own loop as well. */
START_TEST(test_softmax_preserve_unit_and_earliest) {
  ir_func *orig;
  sch_state *s = tu_open("softmax:m=3,n=7", &orig);
  sch_loop yi = tu_loop(s, "Y", 0);
  OK(sch_compute_at(s, BLK("s"), yi, true, -2, &D));
  equiv(s, orig);
  ck_assert_int_eq(tu_nloops(s, "s"), 3);
  tu_assert_has(s, "for ax0 in serial(0, 1)");
  tu_assert_has(s, "vi_2: S(0, 3) = i_2 + ax0");
}
END_TEST

/* conv2d with a pad stage: tile the output rows, compute the padded input
 * window (rows po*2 .. po*2+3) per tile. 5 rows in tiles of 2 leave a partial
 * tile, so the pad block gets a predicate. */
START_TEST(test_conv_pad_under_tile) {
  ir_func *orig;
  sch_state *s = tu_open_text(CONV_PAD, &orig);
  sch_loop pq[2];
  split2(s, tu_loop(s, "Y", 2), -1, 2, pq); /* p -> po, pi */
  OK(sch_compute_at(s, BLK("P"), pq[0], false, -1, &D));
  equiv(s, orig);
  ck_assert_int_eq(tu_nloops(s, "P"), 6); /* n, k, po + c, h, w */
  tu_assert_has(s, "for ax1 in serial(0, 4)");
  tu_assert_has(s, "where p_0 * 2 + ax1 < 7");
  /* Deeper: under the output column loop q, the window is 4 x 3. */
  OK(sch_compute_at(s, BLK("P"), tu_loop(s, "Y", 4), false, -1, &D));
  equiv(s, orig);
  tu_assert_has(s, "for ax2 in serial(0, 3)");
}
END_TEST

/* layernorm: all four intermediate stages computed per row of Y. */
START_TEST(test_layernorm_rows) {
  ir_func *orig;
  sch_state *s = tu_open("layernorm:m=3,n=7", &orig);
  sch_loop yi = tu_loop(s, "Y", 0);
  const char *order[] = {"rstd", "sq", "mean", "sm"};
  for (int i = 0; i < 4; i++) {
    OK(sch_compute_at(s, BLK(order[i]), yi, false, -1, &D));
    equiv(s, orig);
  }
  ck_assert_int_eq(tu_nloops(s, "mean"), 1);
  ck_assert_int_eq(tu_nloops(s, "sm"), 2);
}
END_TEST

/* The new loops are ordinary loops: split them, move more under them. */
START_TEST(test_compute_at_then_split) {
  ir_func *orig;
  sch_state *s = tu_open("softmax:m=3,n=7", &orig);
  sch_loop yi = tu_loop(s, "Y", 0);
  OK(sch_compute_at(s, BLK("s"), yi, false, -1, &D));
  /* e's consumers are both under i now: the sampler offers i (index 0). */
  sch_loop out;
  int idx = 99, dec = 0;
  OK(sch_sample_compute_location(s, BLK("e"), &dec, &out, &idx, &D));
  ck_assert_int_eq(idx, 0);
  ck_assert_ptr_eq(out.var, yi.var);
  OK(sch_compute_at(s, BLK("e"), out, false, -1, &D));
  sch_loop ax = tu_loop(s, "e", 1), parts[2];
  split2(s, ax, -1, 3, parts); /* 7 = 3 * 3 with a predicate */
  equiv(s, orig);
  ck_assert_int_eq(tu_nloops(s, "e"), 3);
  /* Once under i, i is its ancestor: no longer a candidate. */
  OK(sch_sample_compute_location(s, BLK("e"), &dec, &out, &idx, &D));
  ck_assert_int_eq(idx, -1);
}
END_TEST

/* matmul input staging: compute the row of A needed by each i iteration
 * (a copy stage written as a kernel), under a tiled matmul. */
static const char *STAGED_MM =
    "kernel staged(A: f32[6, 7], B: f32[7, 5]) -> C: f32[6, 5] {\n"
    "  AA[i, k] = A[i, k] * 2.0\n"
    "  C[i, j] += AA[i, k] * B[k, j]\n"
    "}\n";

START_TEST(test_staged_matmul_tiles) {
  ir_func *orig;
  sch_state *s = tu_open_text(STAGED_MM, &orig);
  sch_loop io[2];
  split2(s, tu_loop(s, "C", 0), -1, 4, io); /* 6 -> 2 x 4, partial */
  OK(sch_compute_at(s, BLK("AA"), io[1], false, -1, &D));
  equiv(s, orig);
  tu_assert_has(s, "for ax0 in serial(0, 7)");
  ck_assert_int_eq(tu_nloops(s, "AA"), 3);
  /* Under the k loop: one element per iteration, no loops of its own. */
  OK(sch_compute_at(s, BLK("AA"), tu_loop(s, "C", 3), false, -1, &D));
  equiv(s, orig);
  ck_assert_int_eq(tu_nloops(s, "AA"), 4);
}
END_TEST

/* ---- reverse_compute_at ---------------------------------------------------- */

/* dense + bias + relu: the epilogue under the matmul's tiles. */
START_TEST(test_dense_epilogue_under_tiles) {
  ir_func *orig;
  sch_state *s = tu_open("dense:m=6,n=10,k=7", &orig);
  sch_loop i2[2], j2[2];
  split2(s, tu_loop(s, "mm", 0), -1, 4, i2); /* partial tile */
  split2(s, tu_loop(s, "mm", 2), -1, 5, j2);
  sch_loop order[4] = {i2[0], j2[0], i2[1], j2[1]};
  OK(sch_reorder(s, 4, order, &D));
  OK(sch_reverse_compute_at(s, BLK("bb"), j2[0], false, -1, &D));
  equiv(s, orig);
  OK(sch_reverse_compute_at(s, BLK("Y"), j2[0], false, -1, &D));
  equiv(s, orig);
  ck_assert_int_eq(tu_nloops(s, "bb"), 4);
  ck_assert_ptr_eq(tu_loop(s, "Y", 1).var, j2[0].var);
  tu_assert_has(s, "for ax1 in serial(0, 5)");
  /* The partial row tile shows up as a predicate on the epilogue. */
  tu_assert_has(s, "where i_0 * 4 + ax0 < 6");
  /* The epilogue comes after the reduction in the tile. */
  char *t = tu_text(s);
  ck_assert(strstr(t, "block mm(") < strstr(t, "block bb("));
  ck_assert(strstr(t, "block bb(") < strstr(t, "block Y("));
  ts_free(t);
}
END_TEST

/* Under the inner spatial loop: one element per iteration. */
START_TEST(test_dense_epilogue_per_element) {
  ir_func *orig;
  sch_state *s = tu_open("dense:m=6,n=10,k=7", &orig);
  OK(sch_reverse_compute_at(s, BLK("bb"), tu_loop(s, "mm", 1), false, -1, &D));
  equiv(s, orig);
  ck_assert_int_eq(tu_nloops(s, "bb"), 2);
  OK(sch_reverse_compute_at(s, BLK("Y"), tu_loop(s, "mm", 1), true, -1, &D));
  equiv(s, orig);
  ck_assert_int_eq(tu_nloops(s, "Y"), 4); /* two unit loops kept */
}
END_TEST

/* ---- marks ----------------------------------------------------------------- */

START_TEST(test_marks) {
  ir_func *orig;
  sch_state *s = tu_open("softmax:m=3,n=7", &orig);
  const ir_stmt *before = sch_func(s)->body;
  OK(sch_compute_at(s, BLK("e"), ROOT, false, -1, &D));
  ck_assert_ptr_eq(sch_func(s)->body, before);
  OK(sch_compute_at(s, BLK("e"), INLINE, false, -1, &D));
  equiv(s, orig);
  tu_assert_lacks(s, "block e(");
  REFUSED(s, sch_compute_at(s, BLK("mx"), INLINE, false, -1, &D), "compute_inline", "reduction");
}
END_TEST

/* ---- the moved block's predicate --------------------------------------------
 * A block's predicate is written over the loops it leaves; compute_at and
 * reverse_compute_at must carry it over (in the block's iter vars) to the
 * loops they build, or the moved block runs instances the original never ran. */

/* A row sum whose reduction sits on two loops with one reduce var each (what
 * rfactor makes of an imperfectly split reduction): only the predicate keeps
 * vko*4 + vki inside the 13 columns. */
static const char *TWO_VAR_SUM =
    "func twovar(X: f32[5, 13]) -> Y: f32[5] {\n"
    "  block root() {\n"
    "    alloc S: f32[5]\n"
    "    for i in serial(0, 5) {\n"
    "      for ko in serial(0, 4) {\n"
    "        for ki in serial(0, 4) {\n"
    "          block S(vi: S(0, 5) = i, vko: R(0, 4) = ko, vki: R(0, 4) = ki) where ko * 4 + ki < 13 {\n"
    "            reads S[vi], X[vi, vko * 4 + vki]\n"
    "            writes S[vi]\n"
    "            init {\n"
    "              S[vi] = 0.0\n"
    "            }\n"
    "            S[vi] = S[vi] + X[vi, vko * 4 + vki]\n"
    "          }\n"
    "        }\n"
    "      }\n"
    "    }\n"
    "    for i in serial(0, 5) {\n"
    "      block Y(vi: S(0, 5) = i) {\n"
    "        reads S[vi]\n"
    "        writes Y[vi]\n"
    "        Y[vi] = S[vi] * 2.0\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "}\n";

START_TEST(test_predicate_over_reduce_loops_kept) {
  ir_func *orig;
  sch_state *s = tu_open_text(TWO_VAR_SUM, &orig);
  OK(sch_compute_at(s, BLK("S"), tu_loop(s, "Y", 0), false, -1, &D));
  equiv(s, orig);
  /* the guard now reads in the new loops */
  tu_assert_has(s, "where ax0 * 4 + ax1 < 13");
  /* preserve_unit_loops and the earliest slot: the same guard */
  s = tu_open_text(TWO_VAR_SUM, &orig);
  OK(sch_compute_at(s, BLK("S"), tu_loop(s, "Y", 0), true, -2, &D));
  equiv(s, orig);
}
END_TEST

/* A consumer guarded to the first 7 of the producer's 10 rows: after
 * reverse_compute_inline(Y) block B stores Y's values under the predicate
 * vi < 7 (B's domain is larger). Under A's loop that guard must stay, or B
 * writes rows 7..9 of a 7-row output. */
static const char *GUARDED_TAIL =
    "kernel tail(X: f32[10]) -> Y: f32[7] {\n"
    "  A[i] = X[i] * 2.0\n"
    "  B[i] = A[i] + 1.0\n"
    "  Y[i] = B[i] * 3.0 for i in 0..7\n"
    "}\n";

START_TEST(test_reverse_predicate_kept) {
  ir_func *orig;
  sch_state *s = tu_open_text(GUARDED_TAIL, &orig);
  OK(sch_reverse_compute_inline(s, BLK("Y"), &D));
  tu_assert_has(s, "where i_1 < 7");
  OK(sch_reverse_compute_at(s, BLK("B"), tu_loop(s, "A", 0), false, -1, &D));
  equiv(s, orig);
  tu_assert_has(s, "where i < 7");
  /* the same after splitting the producer's loop imperfectly (10 by 4): the
   * consumer follows the inner loop under both guards */
  s = tu_open_text(GUARDED_TAIL, &orig);
  OK(sch_reverse_compute_inline(s, BLK("Y"), &D));
  sch_loop parts[2];
  split2(s, tu_loop(s, "A", 0), -1, 4, parts);
  OK(sch_reverse_compute_at(s, BLK("B"), parts[1], false, -1, &D));
  equiv(s, orig);
}
END_TEST

static const char *THREE_LOOPS =
    "kernel three(X: f32[2, 3, 5]) -> Y: f32[2, 3, 5] {\n"
    "  A[b, i, j] = X[b, i, j] * 2.0\n"
    "  Y[b, i, j] = A[b, i, j] + 1.0\n"
    "}\n";

static const char *SYM_ROWS =
    "kernel symrows(X: f32[M]) -> Y: f32[M] {\n"
    "  A[i] = X[i] * 2.0\n"
    "  Y[i] = A[i] + 1.0\n"
    "}\n";

/* An imperfect split of a reduction (k = ko*8 + ki, ko*8 + ki < 13) and of
 * a fused spatial loop ((i*5 + j) split by 4): the guards tie the split loops
 * back to the block's iter vars, so compute_at keeps them. */
START_TEST(test_split_guards_follow) {
  ir_func *orig;
  sch_state *s = tu_open("dense:m=3,n=5,k=13", &orig);
  sch_loop parts[2];
  split2(s, tu_loop(s, "mm", 2), -1, 8, parts);
  OK(sch_compute_at(s, BLK("mm"), tu_loop(s, "bb", 1), false, -1, &D));
  equiv(s, orig);
  s = tu_open("dense:m=3,n=5,k=13", &orig);
  sch_loop f;
  sch_loop ij[2] = {tu_loop(s, "mm", 0), tu_loop(s, "mm", 1)};
  OK(sch_fuse(s, 2, ij, &f, &D));
  split2(s, f, -1, 4, parts);
  OK(sch_compute_at(s, BLK("mm"), tu_loop(s, "bb", 0), false, -1, &D));
  equiv(s, orig);
  /* split on both sides (13 rows by 4): the kept guard and the new bound
   * guard are the same clause, written once */
  s = tu_open("dense:m=13,n=3,k=5", &orig);
  sch_loop bparts[2];
  split2(s, tu_loop(s, "mm", 0), -1, 4, parts);
  split2(s, tu_loop(s, "bb", 0), -1, 4, bparts);
  OK(sch_compute_at(s, BLK("mm"), bparts[0], false, -1, &D));
  equiv(s, orig);
  tu_assert_has(s, "* 4 + ax0 < 13 {");
  tu_assert_lacks(s, "&&");
  /* three fused loops (2*3*5 = 30) split by 4: the guard reads
   * vb*15 + vi*5 + vj < 30 through the nested // and %, implied by the new
   * loops, so it simplifies away */
  s = tu_open_text(THREE_LOOPS, &orig);
  sch_loop a3[3] = {tu_loop(s, "A", 0), tu_loop(s, "A", 1), tu_loop(s, "A", 2)};
  OK(sch_fuse(s, 3, a3, &f, &D));
  split2(s, f, -1, 4, parts);
  tu_assert_has(s, "< 30 {");
  OK(sch_compute_at(s, BLK("A"), tu_loop(s, "Y", 0), false, -1, &D));
  equiv(s, orig);
  tu_assert_lacks(s, "< 30 {");
  /* a symbolic extent (M split by 4): the guard i_0*4 + i_1 < M follows
   * into the consumer's loop; checked with M bound to 9 */
  s = tu_open_text(SYM_ROWS, &orig);
  split2(s, tu_loop(s, "A", 0), -1, 4, parts);
  OK(sch_compute_at(s, BLK("A"), tu_loop(s, "Y", 0), false, -1, &D));
  const char *mname[1] = {"M"};
  int64_t mval[1] = {9};
  ir_func *bo = ir_func_bind_syms(tu_arena(), orig, 1, mname, mval, &D);
  ir_func *bs = ir_func_bind_syms(tu_arena(), sch_func(s), 1, mname, mval, &D);
  ck_assert_msg(bo && bs, "bind: %s", D.msg);
  tu_assert_equivalent(bo, bs);
}
END_TEST

/* A guard over a loop that feeds none of the block's iter vars cannot be
 * written in them: refused, naming the loop, rather than dropped. */
static const char *UNBOUND_GUARD =
    "func unbound(X: f32[6]) -> Y: f32[6] {\n"
    "  block root() {\n"
    "    alloc B: f32[6]\n"
    "    for i in serial(0, 6) {\n"
    "      for j in serial(0, 3) {\n"
    "        block B(vi: S(0, 6) = i) where i + j < 5 {\n"
    "          reads X[vi]\n"
    "          writes B[vi]\n"
    "          B[vi] = X[vi] * 2.0\n"
    "        }\n"
    "      }\n"
    "    }\n"
    "    for i in serial(0, 6) {\n"
    "      block Y(vi: S(0, 6) = i) {\n"
    "        reads B[vi]\n"
    "        writes Y[vi]\n"
    "        Y[vi] = B[vi] + 1.0\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "}\n";

START_TEST(test_predicate_not_expressible_refused) {
  ir_func *orig;
  sch_state *s = tu_open_text(UNBOUND_GUARD, &orig);
  REFUSED(s, sch_compute_at(s, BLK("B"), tu_loop(s, "Y", 0), false, -1, &D), "compute_at", "'B'",
          "predicate", "loop 'j'");
  /* the sampler does not offer that loop either */
  sch_loop loc;
  int idx;
  OK(sch_sample_compute_location(s, BLK("B"), NULL, &loc, &idx, &D));
  ck_assert_int_lt(idx, 0);
}
END_TEST

/* ---- refusals -------------------------------------------------------------- */

START_TEST(test_refusals) {
  ir_func *orig;
  sch_state *s = tu_open("softmax:m=3,n=7", &orig);
  /* A loop of an unrelated (here: producer) block does not cover e's
   * consumers. */
  REFUSED(s, sch_compute_at(s, BLK("e"), tu_loop(s, "mx", 0), false, -1, &D), "compute_at",
          "not all consumers", "'e'");
  /* Y's loop holds only one of e's two consumers. */
  REFUSED(s, sch_compute_at(s, BLK("e"), tu_loop(s, "Y", 0), false, -1, &D), "not all consumers");
  /* An output block. */
  REFUSED(s, sch_compute_at(s, BLK("Y"), tu_loop(s, "s", 0), false, -1, &D), "output block", "'Y'");
  /* Under its own loop. */
  REFUSED(s, sch_compute_at(s, BLK("e"), tu_loop(s, "e", 1), false, -1, &D), "ancestor");
  /* Slot outside the legal range (Y's loop body has one subtree). */
  OK(sch_compute_at(s, BLK("s"), tu_loop(s, "Y", 0), false, -1, &D));
  REFUSED(s, sch_compute_at(s, BLK("e"), tu_loop(s, "Y", 0), false, 2, &D), "index 2", "legal");
  /* reverse: Y's producers are not under mx's loop. */
  REFUSED(s, sch_reverse_compute_at(s, BLK("Y"), tu_loop(s, "mx", 0), false, -1, &D),
          "reverse_compute_at", "not all producers");

  s = tu_open("dense:m=6,n=10,k=7", &orig);
  /* The k loop drives mm's reduction: bb would read partial sums. */
  REFUSED(s, sch_reverse_compute_at(s, BLK("bb"), tu_loop(s, "mm", 2), false, -1, &D), "reduction",
          "partial");
  /* A loop that no longer exists. */
  sch_loop gone = tu_loop(s, "mm", 0), parts[2];
  split2(s, gone, 2, 3, parts);
  ts_diag_clear(&D);
  ck_assert_int_eq(sch_compute_at(s, BLK("mm"), gone, false, -1, &D), TS_ENOTFOUND);
}
END_TEST

/* Reverse: a consumer reading a shifted window cannot follow the producer
 * row by row; a stage-pipeline violation (WAR) is refused too. */
static const char *SHIFT =
    "kernel shift(A: f32[8]) -> C: f32[6] {\n"
    "  B[i] = A[i] * 2.0\n"
    "  C[i] = B[i] + B[i + 2] for i in 0..6\n"
    "}\n";

START_TEST(test_reverse_window_refused) {
  ir_func *orig;
  sch_state *s = tu_open_text(SHIFT, &orig);
  REFUSED(s, sch_reverse_compute_at(s, BLK("C"), tu_loop(s, "B", 0), false, -1, &D), "not a plain iter var");
  /* compute_at of the producer is fine: it computes the window. */
  OK(sch_compute_at(s, BLK("B"), tu_loop(s, "C", 0), false, -1, &D));
  equiv(s, orig);
  tu_assert_has(s, "for ax0 in serial(0, 3)");
}
END_TEST

/* reverse_compute_at copies the hull of what each iteration of the loop
 * writes: a producer that writes with a stride under that loop leaves holes
 * the consumer would read before they exist (the copy of one iteration reads
 * elements only a later one produces) — refused; the dense order is fine. */
START_TEST(test_reverse_strided_producer_refused) {
  ir_func *orig;
  sch_state *s = tu_open("relu:m=4,n=16", &orig);
  sch_loop j[2];
  int64_t f[2] = {2, 8};
  OK(sch_split(s, tu_loop(s, "Y", 1), 2, f, j, &D));
  sch_loop order[2] = {j[1], j[0]}; /* under j1: columns j1 and j1 + 8 */
  OK(sch_reorder(s, 2, order, &D));
  sch_block cb;
  OK(sch_cache_write(s, BLK("Y"), 0, "local", 0, NULL, &cb, &D));
  REFUSED(s, sch_reverse_compute_at(s, cb, tu_loop(s, "Y", 1), false, -1, &D), "with gaps", "not produced");
  OK(sch_reverse_compute_at(s, cb, tu_loop(s, "Y", 0), false, -1, &D)); /* whole rows: dense */
  equiv(s, orig);
  /* in the dense order the same move under j0 is accepted */
  s = tu_open("relu:m=4,n=16", &orig);
  OK(sch_split(s, tu_loop(s, "Y", 1), 2, f, j, &D));
  OK(sch_cache_write(s, BLK("Y"), 0, "local", 0, NULL, &cb, &D));
  OK(sch_reverse_compute_at(s, cb, tu_loop(s, "Y", 1), false, -1, &D));
  equiv(s, orig);
}
END_TEST

/* Under a thread loop: a shared buffer is computed cooperatively for all
 * threads (the thread loop is relaxed), a local one per thread. */
static const char *THREADS_FMT =
    "func thr(A: f32[5, 7]) -> C: f32[5, 7] {\n"
    "  block root() {\n"
    "    alloc B: f32[5, 7] scope(\"%s\")\n"
    "    for i in serial(0, 5) {\n"
    "      for j in serial(0, 7) {\n"
    "        block B(vi: S(0, 5) = i, vj: S(0, 7) = j) {\n"
    "          reads A[vi, vj]\n"
    "          writes B[vi, vj]\n"
    "          B[vi, vj] = A[vi, vj] * 2.0\n"
    "        }\n"
    "      }\n"
    "    }\n"
    "    for t in thread(0, 5, \"threadIdx.x\") {\n"
    "      for u in serial(0, 7) {\n"
    "        block C(wi: S(0, 5) = t, wj: S(0, 7) = u) {\n"
    "          reads B[wi, wj]\n"
    "          writes C[wi, wj]\n"
    "          C[wi, wj] = B[wi, wj] + 1.0\n"
    "        }\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "}\n";

START_TEST(test_thread_scopes) {
  const char *scopes[] = {"shared", "local"};
  for (int k = 0; k < 2; k++) {
    char src[2048];
    snprintf(src, sizeof src, THREADS_FMT, scopes[k]);
    ir_func *orig;
    sch_state *s = tu_open_text(src, &orig);
    OK(sch_compute_at(s, BLK("B"), tu_loop(s, "C", 1), false, -1, &D));
    equiv(s, orig);
    /* shared: all 5 rows per iteration (cooperative); local: this thread's row */
    ck_assert_int_eq(tu_nloops(s, "B"), k == 0 ? 3 : 2);
    if (k == 0) tu_assert_has(s, "for ax0 in serial(0, 5)");
  }
}
END_TEST

/* ---- sample_compute_location ------------------------------------------------ */

START_TEST(test_sample_candidates) {
  ir_func *orig;
  sch_state *s = tu_open("dense:m=6,n=10,k=7", &orig);
  sch_loop out;
  int idx;
  /* mm (a reduction: not inlinable): root or bb's loops i_1 (0), j_1 (1). */
  int decisions[] = {-1, 0, 1};
  for (int k = 0; k < 3; k++) {
    OK(sch_sample_compute_location(s, BLK("mm"), &decisions[k], &out, &idx, &D));
    ck_assert_int_eq(idx, decisions[k]);
  }
  OK(sch_sample_compute_location(s, BLK("mm"), &decisions[2], &out, &idx, &D));
  ck_assert_ptr_eq(out.var, tu_loop(s, "bb", 1).var);
  ck_assert_int_eq(out.mark, SCH_LOC_LOOP);
  /* A vanished decision: inline is not a candidate for mm -> root. */
  int dec = -2;
  OK(sch_sample_compute_location(s, BLK("mm"), &dec, &out, &idx, &D));
  ck_assert_int_eq(idx, -1);
  ck_assert_int_eq(out.mark, SCH_LOC_ROOT);
  /* 7 is past the last loop: nearest smaller is 1. */
  dec = 7;
  OK(sch_sample_compute_location(s, BLK("mm"), &dec, &out, &idx, &D));
  ck_assert_int_eq(idx, 1);
  /* bb: inline, root, and Y's loops. */
  dec = -2;
  OK(sch_sample_compute_location(s, BLK("bb"), &dec, &out, &idx, &D));
  ck_assert_int_eq(idx, -2);
  ck_assert_int_eq(out.mark, SCH_LOC_INLINE);
  /* Y (output): root only. */
  dec = 0;
  OK(sch_sample_compute_location(s, BLK("Y"), &dec, &out, &idx, &D));
  ck_assert_int_eq(idx, -1);
  /* Applying the sampled location works and keeps the result. */
  dec = 1;
  OK(sch_sample_compute_location(s, BLK("mm"), &dec, &out, &idx, &D));
  OK(sch_compute_at(s, BLK("mm"), out, true, -1, &D));
  equiv(s, orig);
}
END_TEST

/* Random sampling: uniform over the candidates, every sample legal, and the
 * same seed gives the same sequence. */
START_TEST(test_sample_random) {
  ir_func *orig;
  int seen[4] = {0};
  int seq1[40], seq2[40];
  for (int run = 0; run < 2; run++) {
    sch_state *s = tu_open("softmax:m=3,n=7", &orig);
    OK(sch_compute_at(s, BLK("s"), tu_loop(s, "Y", 0), false, -1, &D));
    for (int k = 0; k < 40; k++) {
      sch_loop out;
      int idx;
      OK(sch_sample_compute_location(s, BLK("e"), NULL, &out, &idx, &D));
      ck_assert(idx >= -2 && idx <= 0);
      (run ? seq2 : seq1)[k] = idx;
      seen[idx + 2]++;
    }
    /* each sample applies cleanly */
    sch_loop out;
    int idx = 0;
    OK(sch_sample_compute_location(s, BLK("e"), &idx, &out, &idx, &D));
    OK(sch_compute_at(s, BLK("e"), out, false, -1, &D));
    equiv(s, orig);
  }
  ck_assert_mem_eq(seq1, seq2, sizeof seq1);
  ck_assert_int_gt(seen[0], 0);
  ck_assert_int_gt(seen[1], 0);
  ck_assert_int_gt(seen[2], 0);
}
END_TEST

/* Reduction R loops after the last S loop are not offered: matmul's k loop
 * for a staging block. */
START_TEST(test_sample_skips_trailing_reduction_loops) {
  ir_func *orig;
  sch_state *s = tu_open_text(STAGED_MM, &orig);
  int dec = 2; /* C's k loop: not a candidate -> nearest smaller, j (1) */
  sch_loop out;
  int idx;
  OK(sch_sample_compute_location(s, BLK("AA"), &dec, &out, &idx, &D));
  ck_assert_int_eq(idx, 1);
  OK(sch_compute_at(s, BLK("AA"), out, true, -1, &D));
  equiv(s, orig);
}
END_TEST

/* ---- exhaustive: every (block, loop) pair is refused or correct ----------- */

typedef struct all_ctx {
  ir_var *loops[64];
  const char *blocks[32];
  int nl, nb;
} all_ctx;

static bool all_cb(void *ctx, const ir_stmt *st) {
  all_ctx *c = ctx;
  if (st->kind == IR_FOR && c->nl < 64) c->loops[c->nl++] = st->u.loop.var;
  if (st->kind == IR_BLOCK_REALIZE && c->nb < 32 && strcmp(st->u.realize.block->name, "root"))
    c->blocks[c->nb++] = st->u.realize.block->name;
  return true;
}

static void collect(sch_state *s, all_ctx *c) {
  memset(c, 0, sizeof *c);
  ir_visitor v = {.stmt = all_cb, .ctx = c};
  ir_visit_stmt(&v, sch_func(s)->body);
}

/* Opens spec (or DSL text) and applies a few splits so loops have partial
 * tiles. */
static sch_state *open_tiled(const char *spec, const char *text, ir_func **orig, int tile) {
  /* untracked: the exhaustive loop frees each of its many schedules at once */
  sch_state *s = text ? tu_schedule_text(tu_arena(), text, orig) : tu_schedule(tu_arena(), spec, orig);
  if (tile) {
    all_ctx c;
    collect(s, &c);
    /* split the last block's outermost loop */
    sch_loop parts[2];
    split2(s, tu_loop(s, c.blocks[c.nb - 1], 0), -1, tile, parts);
  }
  return s;
}

START_TEST(test_exhaustive_pairs) {
  struct {
    const char *spec, *text;
    int tile;
  } cases[] = {
      {"softmax:m=3,n=5", NULL, 0},   {"softmax:m=3,n=5", NULL, 2},
      {"layernorm:m=3,n=4", NULL, 0}, {"dense:m=3,n=5,k=2", NULL, 2},
      {NULL, CONV_PAD, 0},            {NULL, STAGED_MM, 4},
      {NULL, SHIFT, 4},
  };
  int ok = 0, refused = 0;
  for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
    ir_func *orig;
    sch_state *s0 = open_tiled(cases[ci].spec, cases[ci].text, &orig, cases[ci].tile);
    all_ctx c;
    collect(s0, &c);
    for (int bi = 0; bi < c.nb; bi++)
      for (int li = 0; li < c.nl; li++)
        for (int mode = 0; mode < 4; mode++) {
          sch_state *s = open_tiled(cases[ci].spec, cases[ci].text, &orig, cases[ci].tile);
          all_ctx c2;
          collect(s, &c2);
          sch_loop l = {c2.loops[li], SCH_LOC_LOOP};
          ts_diag_clear(&D);
          bool rev = mode & 1, pres = mode & 2;
          ts_status st = rev ? sch_reverse_compute_at(s, BLK(c2.blocks[bi]), l, pres, -1, &D)
                             : sch_compute_at(s, BLK(c2.blocks[bi]), l, pres, -2, &D);
          ck_assert_msg(st == TS_OK || st == TS_ESCHEDULE, "%s %s/%s: %s", rev ? "reverse" : "",
                        c2.blocks[bi], l.var->name, D.msg);
          if (st == TS_OK) {
            ok++;
            char why[1024];
            if (!tu_equivalent(orig, sch_func(s), 3, why, sizeof why)) {
              char *t = tu_text(s);
              ck_abort_msg("case %zu: %s %s at %s: %s\n%s", ci, rev ? "reverse_compute_at" : "compute_at",
                           c2.blocks[bi], l.var->name, why, t);
            }
          } else {
            refused++;
          }
          sch_free(s);
        }
    for (int bi = 0; bi < c.nb; bi++)
      for (int rev = 0; rev < 2; rev++) {
        sch_state *s = open_tiled(cases[ci].spec, cases[ci].text, &orig, cases[ci].tile);
        ts_diag_clear(&D);
        ts_status st = rev ? sch_reverse_compute_inline(s, BLK(c.blocks[bi]), &D)
                           : sch_compute_inline(s, BLK(c.blocks[bi]), &D);
        ck_assert_msg(st == TS_OK || st == TS_ESCHEDULE, "%s: %s", c.blocks[bi], D.msg);
        if (st == TS_OK) {
          ok++;
          char why[1024];
          ck_assert_msg(tu_equivalent(orig, sch_func(s), 3, why, sizeof why), "inline %s: %s",
                        c.blocks[bi], why);
        }
        sch_free(s);
      }
    sch_free(s0);
  }
  ck_assert_int_gt(ok, 20);
  ck_assert_int_gt(refused, 20);
}
END_TEST

/* ---- trace round trip ------------------------------------------------------ */

START_TEST(test_trace_roundtrip) {
  ir_func *orig;
  sch_traced *t = tu_open_traced("softmax:m=3,n=7", 1, &orig);
  int s_, e, y, loc;
  const int *ly;
  int n;
  OK(sch_t_get_block(t, "s", &s_, &D));
  OK(sch_t_get_block(t, "e", &e, &D));
  OK(sch_t_get_block(t, "Y", &y, &D));
  OK(sch_t_get_loops(t, y, &ly, &n, &D));
  OK(sch_t_compute_at(t, s_, ly[0], false, -1, &D));
  int dec = 0;
  OK(sch_t_sample_compute_location(t, e, &dec, &loc, &D));
  ck_assert_int_eq(sch_t_loop(t, loc).mark, SCH_LOC_LOOP);
  OK(sch_t_compute_at(t, e, loc, false, -1, &D));
  const int *le;
  OK(sch_t_get_loops(t, e, &le, &n, &D));
  ck_assert_int_eq(n, 2);
  int parts[2];
  sch_arg f[2] = {sch_arg_none(), sch_arg_int(3)};
  OK(sch_t_split(t, le[1], 2, f, parts, &D));
  tu_assert_roundtrip(t, orig, 7);

  t = tu_open_traced("dense:m=6,n=10,k=7", 1, &orig);
  int mm, bb, yy;
  const int *lm;
  OK(sch_t_get_block(t, "mm", &mm, &D));
  OK(sch_t_get_block(t, "bb", &bb, &D));
  OK(sch_t_get_block(t, "Y", &yy, &D));
  OK(sch_t_get_loops(t, mm, &lm, &n, &D));
  OK(sch_t_reverse_compute_at(t, bb, lm[1], false, -1, &D));
  OK(sch_t_reverse_compute_at(t, yy, lm[1], true, -1, &D));
  tu_assert_roundtrip(t, orig, 7);
}
END_TEST

static Suite *compute_at_suite(void) {
  Suite *su = suite_create("schedule_compute_at");
  TCase *tc = tu_tcase(su, "compute_at", setup, 60);
  tcase_add_test(tc, test_softmax_rows);
  tcase_add_test(tc, test_softmax_preserve_unit_and_earliest);
  tcase_add_test(tc, test_conv_pad_under_tile);
  tcase_add_test(tc, test_layernorm_rows);
  tcase_add_test(tc, test_compute_at_then_split);
  tcase_add_test(tc, test_staged_matmul_tiles);
  tcase_add_test(tc, test_dense_epilogue_under_tiles);
  tcase_add_test(tc, test_dense_epilogue_per_element);
  tcase_add_test(tc, test_marks);
  tcase_add_test(tc, test_predicate_over_reduce_loops_kept);
  tcase_add_test(tc, test_reverse_predicate_kept);
  tcase_add_test(tc, test_split_guards_follow);
  tcase_add_test(tc, test_predicate_not_expressible_refused);
  tcase_add_test(tc, test_refusals);
  tcase_add_test(tc, test_reverse_window_refused);
  tcase_add_test(tc, test_reverse_strided_producer_refused);
  tcase_add_test(tc, test_thread_scopes);
  tcase_add_test(tc, test_sample_candidates);
  tcase_add_test(tc, test_sample_random);
  tcase_add_test(tc, test_sample_skips_trailing_reduction_loops);
  tcase_add_test(tc, test_exhaustive_pairs);
  tcase_add_test(tc, test_trace_roundtrip);
  return su;
}

int main(void) { return tu_run(compute_at_suite()); }
