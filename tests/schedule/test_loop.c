/* test_loop.c — the loop transformations (ir/schedule/loop.c): split, fuse,
 * reorder, parallel / vectorize / bind / unroll, annotations and unit loops.
 * Every legal use runs with the state checker on (tu_schedule) and is
 * compared with the unscheduled function in the reference interpreter; every
 * primitive also has refused illegal uses, which must leave the function
 * unchanged. Sizes are small and odd so non-divisible splits show up. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "ir/parse.h"
#include "ir/print.h"
#include "util.h"

static ts_diag D;

static void setup(void) {
  tu_setup();
  ts_diag_clear(&D);
}

/* ---- helpers ---------------------------------------------------------------- */

static sch_block BLK(const char *name) { return (sch_block){name}; }

typedef struct find_ctx {
  const ir_var *v;
  const ir_stmt *found;
} find_ctx;

static bool find_cb(void *ctx, const ir_stmt *st) {
  find_ctx *c = ctx;
  if (st->kind == IR_FOR && st->u.loop.var == c->v) c->found = st;
  return !c->found;
}

/* The FOR of a loop handle in the current function. */
static const ir_stmt *FOR(sch_state *s, sch_loop l) {
  find_ctx c = {l.var, NULL};
  ir_visitor v = {.stmt = find_cb, .ctx = &c};
  ir_visit_stmt(&v, sch_func(s)->body);
  ck_assert_msg(c.found != NULL, "loop %s not found", l.var ? l.var->name : "?");
  return c.found;
}

static int64_t EXTENT(sch_state *s, sch_loop l) {
  int64_t e = -1;
  ck_assert_msg(ir_as_int(FOR(s, l)->u.loop.extent, &e), "loop %s has a symbolic extent", l.var->name);
  return e;
}

/* A refusal leaves the function untouched: same body pointer. */
#define REFUSED(s, call, ...) TU_REFUSED(&D, s, call, __VA_ARGS__)

#define OK(call) TU_OK(&D, call)

static void equiv(sch_state *s, const ir_func *orig) { tu_assert_equivalent(orig, sch_func(s)); }


/* Symbolic matmul: sizes M, K, N stay symbols until bind_syms. */
static const char *SYM_MATMUL = "kernel mm(A: f32[M, K], B: f32[K, N]) -> C: f32[M, N] {\n"
                                "  C[i, j] += A[i, k] * B[k, j]\n"
                                "}\n";

static ir_func *bind_mkn(ir_func *f, int64_t m, int64_t k, int64_t n) {
  const char *names[] = {"M", "K", "N"};
  int64_t vals[] = {m, k, n};
  ir_func *g = ir_func_bind_syms(tu_arena(), f, 3, names, vals, &D);
  ck_assert_msg(g != NULL, "bind_syms: %s", D.msg);
  return g;
}

/* Two stages under one loop: the nest is not perfect. */
static const char *TWO_STAGE =
    "func two(A: f32[5, 7]) -> B: f32[5, 7], C: f32[5, 7] {\n"
    "  block root() {\n"
    "    for i in serial(0, 5) {\n"
    "      for j in serial(0, 7) {\n"
    "        block B(vi: S(0, 5) = i, vj: S(0, 7) = j) {\n"
    "          reads A[vi, vj]\n"
    "          writes B[vi, vj]\n"
    "          B[vi, vj] = A[vi, vj] + 1.0\n"
    "        }\n"
    "      }\n"
    "      for j2 in serial(0, 7) {\n"
    "        block C(wi: S(0, 5) = i, wj: S(0, 7) = j2) {\n"
    "          reads B[wi, wj]\n"
    "          writes C[wi, wj]\n"
    "          C[wi, wj] = B[wi, wj] * 2.0\n"
    "        }\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "}\n";

/* Two blocks under one loop writing the same buffer: not compact. */
static const char *TWO_WRITERS =
    "func tw(A: f32[5]) -> B: f32[5] {\n"
    "  block root() {\n"
    "    for i in serial(0, 5) {\n"
    "      block B0(vi: S(0, 5) = i) {\n"
    "        reads A[vi]\n"
    "        writes B[vi]\n"
    "        B[vi] = A[vi]\n"
    "      }\n"
    "      block B1(wi: S(0, 5) = i) {\n"
    "        reads B[wi]\n"
    "        writes B[wi]\n"
    "        B[wi] = B[wi] * 3.0\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "}\n";

/* A triangular nest: the inner extent uses the outer var. */
static const char *TRIANGLE =
    "func tri(A: f32[5, 5]) -> B: f32[5, 5] {\n"
    "  block root() {\n"
    "    for i in serial(0, 5) {\n"
    "      for j in serial(0, i + 1) {\n"
    "        block B(vi: S(0, 5) = i, vj: S(0, 5) = j) {\n"
    "          reads A[vi, vj]\n"
    "          writes B[vi, vj]\n"
    "          B[vi, vj] = A[vi, vj] + 1.0\n"
    "        }\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "}\n";

/* The consumer runs before the producer under one loop: each iteration
 * reads what the previous one wrote. */
static const char *CARRIED =
    "func war(A: f32[5]) -> B: f32[5], C: f32[5] {\n"
    "  block root() {\n"
    "    for i in serial(0, 5) {\n"
    "      block C(vi: S(0, 5) = i) {\n"
    "        reads B[vi]\n"
    "        writes C[vi]\n"
    "        C[vi] = B[vi] * 2.0\n"
    "      }\n"
    "      block B(wi: S(0, 5) = i) {\n"
    "        reads A[wi]\n"
    "        writes B[wi]\n"
    "        B[wi] = A[wi]\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "}\n";

/* A scan written with spatial iter vars: B[i, j] reads B[i, j - 1]. */
static const char *SCAN =
    "func scan(A: f32[3, 5]) -> B: f32[3, 5] {\n"
    "  block root() {\n"
    "    for i in serial(0, 3) {\n"
    "      for j in serial(1, 4) {\n"
    "        block B(vi: S(0, 3) = i, vj: S(1, 4) = j) {\n"
    "          reads A[vi, vj], B[vi, vj - 1]\n"
    "          writes B[vi, vj]\n"
    "          B[vi, vj] = B[vi, vj - 1] + A[vi, vj]\n"
    "        }\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "}\n";

/* matmul after decompose_reduction: the init block and the update block
 * share loops i and j. */
static const char *DECOMPOSED =
    "func mmd(A: f32[5, 7], B: f32[7, 3]) -> C: f32[5, 3] {\n"
    "  block root() {\n"
    "    for i in serial(0, 5) {\n"
    "      for j in serial(0, 3) {\n"
    "        block C_init(vi: S(0, 5) = i, vj: S(0, 3) = j) {\n"
    "          writes C[vi, vj]\n"
    "          C[vi, vj] = 0.0\n"
    "        }\n"
    "        for k in serial(0, 7) {\n"
    "          block C(wi: S(0, 5) = i, wj: S(0, 3) = j, wk: R(0, 7) = k) {\n"
    "            reads C[wi, wj], A[wi, wk], B[wk, wj]\n"
    "            writes C[wi, wj]\n"
    "            C[wi, wj] = C[wi, wj] + A[wi, wk] * B[wk, wj]\n"
    "          }\n"
    "        }\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "}\n";

/* ---- split ------------------------------------------------------------------ */

START_TEST(test_split_matmul_divisible) {
  ir_func *orig;
  sch_state *s = tu_open("matmul:m=6,n=10,k=7", &orig);
  sch_loop i = tu_loop(s, "C", 0), j = tu_loop(s, "C", 1), o[3];
  OK(sch_split(s, i, 2, (int64_t[]){2, 3}, o, &D));
  ck_assert_int_eq(EXTENT(s, o[0]), 2);
  ck_assert_int_eq(EXTENT(s, o[1]), 3);
  ck_assert_str_eq(o[0].var->name, "i_0");
  ck_assert_str_eq(o[1].var->name, "i_1");
  OK(sch_split(s, j, 3, (int64_t[]){-1, 1, 5}, o, &D));
  ck_assert_int_eq(EXTENT(s, o[0]), 2);
  ck_assert_int_eq(EXTENT(s, o[2]), 5);
  ck_assert_int_eq(tu_nloops(s, "C"), 6);
  tu_assert_has(s, "i_0 * 3 + i_1");
  /* divisible: no predicate */
  char *t = tu_text(s);
  ck_assert_msg(strstr(t, "where") == NULL, "unexpected predicate:\n%s", t);
  ts_free(t);
  equiv(s, orig);
}
END_TEST

START_TEST(test_split_prime_by_three) {
  /* k = 7 split by 3: ceil(7/3) = 3 outer iterations, guarded by a predicate */
  ir_func *orig;
  sch_state *s = tu_open("matmul:m=6,n=10,k=7", &orig);
  sch_loop k = tu_loop(s, "C", 2), o[2];
  OK(sch_split(s, k, 2, (int64_t[]){-1, 3}, o, &D));
  ck_assert_int_eq(EXTENT(s, o[0]), 3);
  ck_assert_int_eq(EXTENT(s, o[1]), 3);
  tu_assert_has(s, "where");
  tu_assert_has(s, "< 7");
  equiv(s, orig);
  /* an explicit over-covering product is fine too */
  sch_loop j = tu_loop(s, "C", 1), p[2];
  OK(sch_split(s, j, 2, (int64_t[]){3, 4}, p, &D));
  equiv(s, orig);
}
END_TEST

START_TEST(test_split_conv2d_nondivisible) {
  ir_func *orig;
  sch_state *s = tu_open("conv2d_nchw:n=1,c=3,h=5,w=5,k=4,r=3,s=3", &orig);
  /* loops b o p q ci ri si */
  sch_loop p = tu_loop(s, "Y", 2), ci = tu_loop(s, "Y", 4), o[3];
  OK(sch_split(s, p, 2, (int64_t[]){-1, 2}, o, &D));
  ck_assert_int_eq(EXTENT(s, o[0]), 3);
  OK(sch_split(s, ci, 3, (int64_t[]){2, -1, 1}, o, &D));
  ck_assert_int_eq(EXTENT(s, o[1]), 2);
  equiv(s, orig);
}
END_TEST

START_TEST(test_split_reduction_with_init) {
  /* the split loops carry the R iter var whose first point triggers init */
  ir_func *orig;
  sch_state *s = tu_open("softmax:m=3,n=7", &orig);
  sch_loop o[3];
  OK(sch_split(s, tu_loop(s, "mx", 1), 2, (int64_t[]){-1, 3}, o, &D));
  OK(sch_split(s, tu_loop(s, "s", 1), 3, (int64_t[]){2, 2, -1}, o, &D));
  ck_assert_int_eq(EXTENT(s, o[2]), 2);
  OK(sch_split(s, tu_loop(s, "Y", 0), 2, (int64_t[]){2, 2}, o, &D));
  equiv(s, orig);
}
END_TEST

START_TEST(test_split_symbolic_extent) {
  ir_func *f;
  sch_state *s = tu_open_text(SYM_MATMUL, &f);
  sch_loop i = tu_loop(s, "C", 0), o[2];
  /* without an inferred factor the product cannot be proven to cover M */
  REFUSED(s, sch_split(s, i, 2, (int64_t[]){4, 4}, o, &D), "split", "'i'", "symbolic");
  OK(sch_split(s, i, 2, (int64_t[]){-1, 4}, o, &D));
  int64_t e;
  ck_assert(!ir_as_int(FOR(s, o[0])->u.loop.extent, &e)); /* ceildiv(M, 4) */
  tu_assert_has(s, "where");
  sch_loop k = tu_loop(s, "C", 3), q[2];
  OK(sch_split(s, k, 2, (int64_t[]){3, -1}, q, &D));
  /* vectorize wants a constant extent; the inner split loop has none */
  REFUSED(s, sch_vectorize(s, q[1], &D), "vectorize", "constant");
  for (int64_t m = 5; m <= 9; m += 4)
    tu_assert_equivalent(bind_mkn(f, m, 7, 3), bind_mkn(sch_func(s), m, 7, 3));
}
END_TEST

START_TEST(test_split_triangular) {
  /* extent i + 1 depends on the outer loop: inferred factor and predicate */
  ir_func *orig;
  sch_state *s = tu_open_text(TRIANGLE, &orig);
  sch_loop j = tu_loop(s, "B", 1), o[2];
  OK(sch_split(s, j, 2, (int64_t[]){-1, 2}, o, &D));
  equiv(s, orig);
}
END_TEST

START_TEST(test_split_refusals) {
  ir_func *orig;
  sch_state *s = tu_open("matmul:m=6,n=10,k=7", &orig);
  sch_loop i = tu_loop(s, "C", 0), k = tu_loop(s, "C", 2), o[3];
  REFUSED(s, sch_split(s, i, 3, (int64_t[]){-1, 2, -1}, o, &D), "split", "'i'", "at most one");
  REFUSED(s, sch_split(s, i, 2, (int64_t[]){0, 6}, o, &D), "split", "positive");
  REFUSED(s, sch_split(s, k, 2, (int64_t[]){2, 3}, o, &D), "split", "'k'", "less than the extent 7");
  REFUSED(s, sch_split(s, (sch_loop){NULL, SCH_LOC_ROOT}, 2, (int64_t[]){-1, 2}, o, &D), "split",
          "root");
  /* annotated loops are not split */
  OK(sch_annotate_loop(s, k, (ir_annot){.key = "pragma_x", .kind = IR_ANN_INT, .v.i = 1}, &D));
  REFUSED(s, sch_split(s, k, 2, (int64_t[]){-1, 2}, o, &D), "split", "annotation");
  /* a dead handle: i was split away */
  OK(sch_split(s, i, 2, (int64_t[]){-1, 2}, o, &D));
  const ir_stmt *before = sch_func(s)->body;
  ts_diag_clear(&D);
  ck_assert_int_eq(sch_split(s, i, 2, (int64_t[]){-1, 2}, o, &D), TS_ENOTFOUND);
  ck_assert_ptr_eq(sch_func(s)->body, before);
  ck_assert_int_eq(sch_reorder(s, 2, (sch_loop[]){k, i}, &D), TS_ENOTFOUND);
  equiv(s, orig);
}
END_TEST

START_TEST(test_split_thread_bound_refused) {
  ir_func *orig;
  sch_state *s = tu_open("add:m=5,n=9", &orig);
  sch_loop i = tu_loop(s, "C", 0), o[2];
  OK(sch_bind(s, i, "blockIdx.x", &D));
  REFUSED(s, sch_split(s, i, 2, (int64_t[]){-1, 2}, o, &D), "split", "thread");
  equiv(s, orig);
}
END_TEST

/* ---- fuse ------------------------------------------------------------------- */

START_TEST(test_fuse_then_split_matmul) {
  ir_func *orig;
  sch_state *s = tu_open("matmul:m=6,n=10,k=7", &orig);
  sch_loop f, o[2];
  OK(sch_fuse(s, 2, (sch_loop[]){tu_loop(s, "C", 0), tu_loop(s, "C", 1)}, &f, &D));
  ck_assert_str_eq(f.var->name, "i_j_fused");
  ck_assert_int_eq(EXTENT(s, f), 60);
  ck_assert_int_eq(tu_nloops(s, "C"), 2);
  tu_assert_has(s, "i_j_fused // 10");
  tu_assert_has(s, "i_j_fused % 10");
  equiv(s, orig);
  OK(sch_split(s, f, 2, (int64_t[]){-1, 7}, o, &D)); /* 60 = 9*7 - 3: predicate */
  ck_assert_int_eq(EXTENT(s, o[0]), 9);
  equiv(s, orig);
}
END_TEST

START_TEST(test_fuse_conv2d_spatial_and_reduction) {
  ir_func *orig;
  sch_state *s = tu_open("conv2d_nchw:n=1,c=3,h=5,w=5,k=4,r=3,s=3", &orig);
  sch_loop f1, f2;
  /* b (unit), o, p, q */
  OK(sch_fuse(s, 4, (sch_loop[]){tu_loop(s, "Y", 0), tu_loop(s, "Y", 1), tu_loop(s, "Y", 2), tu_loop(s, "Y", 3)}, &f1, &D));
  ck_assert_int_eq(EXTENT(s, f1), 100);
  OK(sch_fuse(s, 3, (sch_loop[]){tu_loop(s, "Y", 1), tu_loop(s, "Y", 2), tu_loop(s, "Y", 3)}, &f2, &D));
  ck_assert_int_eq(EXTENT(s, f2), 27);
  equiv(s, orig);
}
END_TEST

START_TEST(test_fuse_reduction_init_dependence) {
  /* fusing the S and R loops of a reduction: init runs on vj == 0 per row */
  ir_func *orig;
  sch_state *s = tu_open("softmax:m=3,n=7", &orig);
  sch_loop f, o[2];
  OK(sch_fuse(s, 2, (sch_loop[]){tu_loop(s, "mx", 0), tu_loop(s, "mx", 1)}, &f, &D));
  OK(sch_split(s, f, 2, (int64_t[]){4, -1}, o, &D));
  OK(sch_fuse(s, 2, (sch_loop[]){tu_loop(s, "e", 0), tu_loop(s, "e", 1)}, &f, &D));
  equiv(s, orig);
}
END_TEST

START_TEST(test_fuse_refusals) {
  ir_func *orig;
  sch_state *s = tu_open("matmul:m=6,n=10,k=7", &orig);
  sch_loop i = tu_loop(s, "C", 0), j = tu_loop(s, "C", 1), k = tu_loop(s, "C", 2), f;
  REFUSED(s, sch_fuse(s, 2, (sch_loop[]){i, k}, &f, &D), "fuse", "'k'", "not the only child");
  REFUSED(s, sch_fuse(s, 2, (sch_loop[]){j, i}, &f, &D), "fuse", "outermost first");
  REFUSED(s, sch_fuse(s, 2, (sch_loop[]){i, i}, &f, &D), "fuse", "twice");

  /* loops of two different blocks */
  s = tu_open("softmax:m=3,n=7", &orig);
  REFUSED(s, sch_fuse(s, 2, (sch_loop[]){tu_loop(s, "mx", 0), tu_loop(s, "e", 1)}, &f, &D), "fuse",
          "not the only child");

  /* a loop with two children is not perfectly nested */
  s = tu_open_text(TWO_STAGE, &orig);
  REFUSED(s, sch_fuse(s, 2, (sch_loop[]){tu_loop(s, "B", 0), tu_loop(s, "B", 1)}, &f, &D), "fuse",
          "not the only child");

  /* an inner extent that uses the outer var */
  s = tu_open_text(TRIANGLE, &orig);
  REFUSED(s, sch_fuse(s, 2, (sch_loop[]){tu_loop(s, "B", 0), tu_loop(s, "B", 1)}, &f, &D), "fuse",
          "depends on outer loop");
}
END_TEST

/* ---- reorder ---------------------------------------------------------------- */

START_TEST(test_reorder_reduction_outside_spatial) {
  ir_func *orig;
  sch_state *s = tu_open("matmul:m=6,n=10,k=7", &orig);
  sch_loop i = tu_loop(s, "C", 0), j = tu_loop(s, "C", 1), k = tu_loop(s, "C", 2);
  OK(sch_reorder(s, 2, (sch_loop[]){k, i}, &D));
  ck_assert_ptr_eq(tu_loop(s, "C", 0).var, k.var);
  ck_assert_ptr_eq(tu_loop(s, "C", 1).var, j.var);
  ck_assert_ptr_eq(tu_loop(s, "C", 2).var, i.var);
  equiv(s, orig);
  /* handles survive: reorder back with all three */
  OK(sch_reorder(s, 3, (sch_loop[]){i, j, k}, &D));
  ck_assert_ptr_eq(tu_loop(s, "C", 0).var, i.var);
  equiv(s, orig);
}
END_TEST

START_TEST(test_reorder_with_split_predicate) {
  ir_func *orig;
  sch_state *s = tu_open("matmul:m=6,n=10,k=7", &orig);
  sch_loop io[2], ko[2];
  OK(sch_split(s, tu_loop(s, "C", 0), 2, (int64_t[]){-1, 4}, io, &D)); /* 6 by 4: predicate */
  OK(sch_split(s, tu_loop(s, "C", 3), 2, (int64_t[]){-1, 3}, ko, &D)); /* 7 by 3: predicate */
  sch_loop j = tu_loop(s, "C", 2);
  OK(sch_reorder(s, 5, (sch_loop[]){ko[0], io[1], j, io[0], ko[1]}, &D));
  ck_assert_ptr_eq(tu_loop(s, "C", 0).var, ko[0].var);
  ck_assert_ptr_eq(tu_loop(s, "C", 3).var, io[0].var);
  equiv(s, orig);
}
END_TEST

START_TEST(test_reorder_conv2d_and_batch_matmul) {
  ir_func *orig;
  sch_state *s = tu_open("conv2d_nchw:n=1,c=3,h=5,w=5,k=4,r=3,s=3", &orig);
  /* b o p q ci ri si -> b ri p si ci q o (slots of o, q, ri, si, ci) */
  sch_loop o = tu_loop(s, "Y", 1), q = tu_loop(s, "Y", 3), ci = tu_loop(s, "Y", 4), ri = tu_loop(s, "Y", 5),
           si = tu_loop(s, "Y", 6);
  OK(sch_reorder(s, 5, (sch_loop[]){ri, si, ci, q, o}, &D));
  ck_assert_ptr_eq(tu_loop(s, "Y", 1).var, ri.var);
  ck_assert_ptr_eq(tu_loop(s, "Y", 6).var, o.var);
  equiv(s, orig);

  sch_loop ls[4];
  s = tu_open_loops("batch_matmul:b=3,m=5,n=3,k=7", &orig, "C", ls, 4);
  OK(sch_reorder(s, 4, (sch_loop[]){ls[3], ls[2], ls[1], ls[0]}, &D));
  equiv(s, orig);
}
END_TEST

START_TEST(test_reorder_refusals) {
  ir_func *orig;
  /* loops of two different blocks: not one path */
  sch_state *s = tu_open("softmax:m=3,n=7", &orig);
  REFUSED(s, sch_reorder(s, 2, (sch_loop[]){tu_loop(s, "mx", 1), tu_loop(s, "e", 0)}, &D), "reorder",
          "not on one path");
  REFUSED(s, sch_reorder(s, 2, (sch_loop[]){tu_loop(s, "mx", 1), tu_loop(s, "mx", 1)}, &D), "reorder",
          "twice");

  /* a loop with two children in the range */
  s = tu_open_text(TWO_STAGE, &orig);
  REFUSED(s, sch_reorder(s, 2, (sch_loop[]){tu_loop(s, "B", 1), tu_loop(s, "B", 0)}, &D), "reorder",
          "more than one child");

  /* a loop feeding both a spatial and a reduction iter var (fused j and k,
   * then split) must not move: init would run mid-reduction */
  s = tu_open("matmul:m=6,n=10,k=7", &orig);
  sch_loop fz, half[2];
  OK(sch_fuse(s, 2, (sch_loop[]){tu_loop(s, "C", 1), tu_loop(s, "C", 2)}, &fz, &D));
  OK(sch_split(s, fz, 2, (int64_t[]){-1, 4}, half, &D));
  REFUSED(s, sch_reorder(s, 2, (sch_loop[]){half[1], half[0]}, &D), "reorder",
          "both spatial and reduction");
  equiv(s, orig);

  /* the inner extent i + 1 would use a loop nested inside it */
  s = tu_open_text(TRIANGLE, &orig);
  REFUSED(s, sch_reorder(s, 2, (sch_loop[]){tu_loop(s, "B", 1), tu_loop(s, "B", 0)}, &D), "reorder",
          "'j'", "uses loop 'i'");
}
END_TEST

/* ---- parallel / vectorize / bind / unroll --------------------------------- */

START_TEST(test_parallel_outer_spatial) {
  ir_func *orig;
  sch_state *s = tu_open("matmul:m=6,n=10,k=7", &orig);
  sch_loop i = tu_loop(s, "C", 0);
  OK(sch_parallel(s, i, &D));
  ck_assert_int_eq(FOR(s, i)->u.loop.kind, IR_FOR_PARALLEL);
  tu_assert_has(s, "for i in parallel(0, 6)");
  equiv(s, orig);

  s = tu_open("conv2d_nchw:n=1,c=3,h=5,w=5,k=4,r=3,s=3", &orig);
  sch_loop f;
  OK(sch_fuse(s, 3, (sch_loop[]){tu_loop(s, "Y", 0), tu_loop(s, "Y", 1), tu_loop(s, "Y", 2)}, &f, &D));
  OK(sch_parallel(s, f, &D));
  equiv(s, orig);

  /* two complete stages under one loop, each the only writer of its buffer */
  s = tu_open_text(TWO_STAGE, &orig);
  OK(sch_parallel(s, tu_loop(s, "B", 0), &D));
  equiv(s, orig);
}
END_TEST

START_TEST(test_parallel_refusals) {
  ir_func *orig;
  sch_state *s = tu_open("matmul:m=6,n=10,k=7", &orig);
  REFUSED(s, sch_parallel(s, tu_loop(s, "C", 2), &D), "parallel", "'k'", "reduction iter var 'vk'");

  s = tu_open("softmax:m=3,n=7", &orig);
  REFUSED(s, sch_parallel(s, tu_loop(s, "s", 1), &D), "parallel", "reduction");
  OK(sch_parallel(s, tu_loop(s, "s", 0), &D));
  equiv(s, orig);

  s = tu_open_text(TWO_WRITERS, &orig);
  REFUSED(s, sch_parallel(s, tu_loop(s, "B0", 0), &D), "parallel", "not compact",
          "only writer of 'B'");
}
END_TEST

START_TEST(test_vectorize_inner_spatial) {
  ir_func *orig;
  sch_state *s = tu_open("matmul:m=6,n=10,k=7", &orig);
  sch_loop j = tu_loop(s, "C", 1), k = tu_loop(s, "C", 2), o[2];
  REFUSED(s, sch_vectorize(s, k, &D), "vectorize", "'k'", "reduction");
  OK(sch_reorder(s, 2, (sch_loop[]){k, j}, &D));
  OK(sch_split(s, j, 2, (int64_t[]){-1, 4}, o, &D));
  OK(sch_vectorize(s, o[1], &D));
  tu_assert_has(s, "vectorized(0, 4)");
  equiv(s, orig);

  s = tu_open("depthwise_conv2d:n=1,c=3,h=5,w=5,r=3,s=3", &orig);
  /* b ch p q ri si: vectorize q after moving it innermost */
  sch_loop q = tu_loop(s, "Y", 3), si = tu_loop(s, "Y", 5);
  REFUSED(s, sch_vectorize(s, si, &D), "vectorize", "reduction");
  OK(sch_reorder(s, 2, (sch_loop[]){si, q}, &D));
  OK(sch_vectorize(s, q, &D));
  equiv(s, orig);
}
END_TEST

START_TEST(test_bind_threads) {
  ir_func *orig;
  sch_state *s = tu_open("matmul:m=6,n=10,k=7", &orig);
  sch_loop f, o[2];
  OK(sch_fuse(s, 2, (sch_loop[]){tu_loop(s, "C", 0), tu_loop(s, "C", 1)}, &f, &D));
  OK(sch_split(s, f, 2, (int64_t[]){-1, 8}, o, &D));
  REFUSED(s, sch_bind(s, o[0], "threadIdx.w", &D), "bind", "unknown thread tag 'threadIdx.w'");
  OK(sch_bind(s, o[0], "blockIdx.x", &D));
  OK(sch_bind(s, o[1], "threadIdx.x", &D));
  tu_assert_has(s, "\"blockIdx.x\"");
  sch_loop k = tu_loop(s, "C", 2);
  /* a reduction may go to threads (cross-thread reduction), not to blocks */
  REFUSED(s, sch_bind(s, k, "blockIdx.y", &D), "bind", "reduction");
  REFUSED(s, sch_bind(s, k, "threadIdx.x", &D), "bind", "already bound to 'threadIdx.x'");
  OK(sch_bind(s, k, "threadIdx.y", &D));
  equiv(s, orig);

  s = tu_open("softmax:m=3,n=7", &orig);
  OK(sch_bind(s, tu_loop(s, "Y", 0), "blockIdx.x", &D));
  OK(sch_bind(s, tu_loop(s, "Y", 1), "threadIdx.x", &D));
  OK(sch_bind(s, tu_loop(s, "s", 1), "threadIdx.x", &D)); /* sibling nests may share a tag */
  equiv(s, orig);
}
END_TEST

START_TEST(test_unroll) {
  ir_func *orig;
  sch_state *s = tu_open("matmul:m=6,n=10,k=7", &orig);
  sch_loop k = tu_loop(s, "C", 2), o[2];
  OK(sch_unroll(s, k, &D)); /* no checks: a reduction loop may unroll */
  ck_assert_int_eq(FOR(s, k)->u.loop.kind, IR_FOR_UNROLLED);
  equiv(s, orig);
  OK(sch_split(s, tu_loop(s, "C", 1), 2, (int64_t[]){-1, 3}, o, &D));
  OK(sch_unroll(s, o[1], &D));
  equiv(s, orig);

  s = tu_open("reduce_sum:m=5,n=9", &orig);
  OK(sch_unroll(s, tu_loop(s, "Y", 1), &D));
  OK(sch_unroll(s, tu_loop(s, "Y", 0), &D));
  equiv(s, orig);
  ck_assert_int_eq(sch_unroll(s = tu_open("add:m=3,n=3", &orig),
                              (sch_loop){NULL, SCH_LOC_LOOP}, &D),
                   TS_ENOTFOUND);
}
END_TEST

/* ---- annotations and unit loops ------------------------------------------ */

START_TEST(test_annotate) {
  ir_func *orig;
  sch_state *s = tu_open("matmul:m=6,n=10,k=7", &orig);
  sch_loop i = tu_loop(s, "C", 0);
  OK(sch_annotate_loop(s, i, (ir_annot){.key = "pragma_unroll", .kind = IR_ANN_INT, .v.i = 16}, &D));
  OK(sch_annotate_loop(s, i, (ir_annot){.key = "pragma_unroll", .kind = IR_ANN_INT, .v.i = 64}, &D));
  ck_assert_int_eq(FOR(s, i)->u.loop.nannot, 1);
  ck_assert_int_eq(FOR(s, i)->u.loop.annots[0].v.i, 64);
  OK(sch_annotate_block(s, BLK("C"), (ir_annot){.key = "tag", .kind = IR_ANN_STR, .v.s = "x"}, &D));
  OK(sch_annotate_block(s, BLK("C"), (ir_annot){.key = "tag", .kind = IR_ANN_STR, .v.s = "y"}, &D));
  OK(sch_annotate_block(s, BLK("C"), (ir_annot){.key = "w", .kind = IR_ANN_FLOAT, .v.f = 0.5}, &D));
  tu_assert_has(s, "annot {pragma_unroll = 64}");
  tu_assert_has(s, "annot {tag = \"y\", w = 0.5}");
  ck_assert_int_eq(sch_annotate_block(s, BLK("nope"), (ir_annot){.key = "k"}, &D), TS_ENOTFOUND);
  equiv(s, orig);

  s = tu_open("softmax:m=3,n=7", &orig);
  OK(sch_annotate_block(s, BLK("s"), (ir_annot){.key = "k", .kind = IR_ANN_INT, .v.i = 1}, &D));
  OK(sch_annotate_loop(s, tu_loop(s, "e", 1), (ir_annot){.key = "k", .kind = IR_ANN_INT, .v.i = 1}, &D));
  equiv(s, orig);
}
END_TEST

START_TEST(test_add_unit_loops) {
  ir_func *orig;
  sch_state *s = tu_open("matmul:m=6,n=10,k=7", &orig);
  sch_loop u1, u2, f;
  OK(sch_add_unit_loop_block(s, BLK("C"), &u1, &D));
  ck_assert_int_eq(tu_nloops(s, "C"), 4);
  ck_assert_ptr_eq(tu_loop(s, "C", 3).var, u1.var);
  ck_assert_int_eq(EXTENT(s, u1), 1);
  OK(sch_add_unit_loop_loop(s, tu_loop(s, "C", 0), &u2, &D));
  ck_assert_ptr_eq(tu_loop(s, "C", 1).var, u2.var);
  ck_assert_str_ne(u1.var->name, u2.var->name);
  /* unit loops fuse away into a digit of 0 */
  OK(sch_fuse(s, 2, (sch_loop[]){tu_loop(s, "C", 0), u2}, &f, &D));
  ck_assert_int_eq(EXTENT(s, f), 6);
  REFUSED(s, sch_add_unit_loop_block(s, BLK("root"), &u1, &D), "add_unit_loop", "root");
  equiv(s, orig);

  s = tu_open("softmax:m=3,n=7", &orig);
  OK(sch_add_unit_loop_block(s, BLK("e"), &u1, &D));
  OK(sch_parallel(s, u1, &D));
  equiv(s, orig);
}
END_TEST

/* ---- printed form ----------------------------------------------------------- */

START_TEST(test_print_tiled_matmul) {
  ir_func *orig;
  sch_state *s = tu_open("matmul:m=6,n=10,k=7", &orig);
  sch_loop io[2], jo[2], ko[2];
  OK(sch_split(s, tu_loop(s, "C", 0), 2, (int64_t[]){2, 3}, io, &D));
  OK(sch_split(s, tu_loop(s, "C", 2), 2, (int64_t[]){-1, 5}, jo, &D));
  OK(sch_split(s, tu_loop(s, "C", 4), 2, (int64_t[]){-1, 3}, ko, &D));
  OK(sch_reorder(s, 6, (sch_loop[]){io[0], jo[0], ko[0], io[1], ko[1], jo[1]}, &D));
  OK(sch_parallel(s, io[0], &D));
  OK(sch_vectorize(s, jo[1], &D));
  char *t = tu_text(s);
  const char *want[] = {
      "for i_0 in parallel(0, 2) {", "for j_0 in serial(0, 2) {", "for k_0 in serial(0, 3) {",
      "for i_1 in serial(0, 3) {",   "for k_1 in serial(0, 3) {", "for j_1 in vectorized(0, 5) {",
      "vi: S(0, 6) = i_0 * 3 + i_1", "vj: S(0, 10) = j_0 * 5 + j_1", "vk: R(0, 7) = k_0 * 3 + k_1",
      "where k_0 * 3 + k_1 < 7",
  };
  const char *prev = t;
  for (size_t w = 0; w < sizeof want / sizeof *want; w++) {
    const char *at = strstr(t, want[w]);
    ck_assert_msg(at != NULL, "printed tiled matmul lacks '%s':\n%s", want[w], t);
    if (w < 6) { /* the loops in nesting order */
      ck_assert_msg(at >= prev, "'%s' is out of order:\n%s", want[w], t);
      prev = at;
    }
  }
  ts_free(t);
  equiv(s, orig);
}
END_TEST

START_TEST(test_loop_carried_refusals) {
  ir_func *orig;
  sch_state *s = tu_open_text(CARRIED, &orig);
  REFUSED(s, sch_parallel(s, tu_loop(s, "C", 0), &D), "parallel", "'i'", "block 'C' reads 'B' before",
          "loop-carried");
  OK(sch_unroll(s, tu_loop(s, "C", 0), &D)); /* order kept: fine */
  equiv(s, orig);

  s = tu_open_text(SCAN, &orig);
  REFUSED(s, sch_reorder(s, 2, (sch_loop[]){tu_loop(s, "B", 1), tu_loop(s, "B", 0)}, &D), "reorder",
          "reads 'B' at other points");
  REFUSED(s, sch_parallel(s, tu_loop(s, "B", 1), &D), "parallel", "'j'");
  REFUSED(s, sch_split(s, tu_loop(s, "B", 1), 2, (int64_t[]){-1, 2}, (sch_loop[2]){{0}}, &D), "split",
          "start at 0");
}
END_TEST

/* A loop that feeds no iter var of a reduction block repeats it (each
 * repeat runs init and the whole reduction); moved below the reduction loop
 * it would accumulate again without the init: reorder refuses it. */
START_TEST(test_reorder_repeat_loop_refused) {
  ir_func *orig;
  sch_state *s = tu_open_text("func rep(A: f32[4, 8]) -> B: f32[4] {\n"
                            "  block root() {\n"
                            "    for i in serial(0, 4) {\n"
                            "      for u in serial(0, 3) {\n"
                            "        for k in serial(0, 8) {\n"
                            "          block B(vi: S(0, 4) = i, vk: R(0, 8) = k) {\n"
                            "            reads A[vi, vk]\n"
                            "            writes B[vi]\n"
                            "            init {\n"
                            "              B[vi] = 0.0\n"
                            "            }\n"
                            "            B[vi] = B[vi] + A[vi, vk]\n"
                            "          }\n"
                            "        }\n"
                            "      }\n"
                            "    }\n"
                            "  }\n"
                            "}\n",
                            &orig);
  sch_loop order[2] = {tu_loop(s, "B", 2), tu_loop(s, "B", 1)};
  REFUSED(s, sch_reorder(s, 2, order, &D), "reorder", "feeds no iter var", "'B'");
  tu_assert_equivalent(orig, sch_func(s));
}
END_TEST

START_TEST(test_split_fuse_decomposed_init) {
  /* splitting / fusing loops both the init block and the update use */
  ir_func *orig;
  sch_state *s = tu_open_text(DECOMPOSED, &orig);
  sch_loop jo[2], f, ko[2];
  OK(sch_split(s, tu_loop(s, "C", 1), 2, (int64_t[]){-1, 2}, jo, &D)); /* 3 by 2: predicate */
  ck_assert_ptr_eq(tu_loop(s, "C_init", 1).var, jo[0].var);
  ck_assert_ptr_eq(tu_loop(s, "C_init", 2).var, jo[1].var);
  equiv(s, orig);
  OK(sch_fuse(s, 2, (sch_loop[]){tu_loop(s, "C", 0), jo[0]}, &f, &D));
  ck_assert_ptr_eq(tu_loop(s, "C_init", 0).var, f.var);
  equiv(s, orig);
  OK(sch_split(s, tu_loop(s, "C", 2), 2, (int64_t[]){2, -1}, ko, &D));
  equiv(s, orig);
  /* init and update both write C: neither is the only writer */
  REFUSED(s, sch_parallel(s, f, &D), "parallel", "not compact", "only writer of 'C'");
  /* the range f .. k_0 holds two blocks */
  REFUSED(s, sch_reorder(s, 2, (sch_loop[]){ko[0], f}, &D), "reorder", "more than one child");
  REFUSED(s, sch_fuse(s, 2, (sch_loop[]){jo[1], ko[0]}, &f, &D), "fuse", "not the only child");
}
END_TEST

static Suite *loop_suite(void) {
  Suite *su = suite_create("schedule_loop");
  TCase *tc = tu_tcase(su, "loop", setup, 60);
  tcase_add_test(tc, test_split_matmul_divisible);
  tcase_add_test(tc, test_split_prime_by_three);
  tcase_add_test(tc, test_split_conv2d_nondivisible);
  tcase_add_test(tc, test_split_reduction_with_init);
  tcase_add_test(tc, test_split_symbolic_extent);
  tcase_add_test(tc, test_split_triangular);
  tcase_add_test(tc, test_split_refusals);
  tcase_add_test(tc, test_split_thread_bound_refused);
  tcase_add_test(tc, test_fuse_then_split_matmul);
  tcase_add_test(tc, test_fuse_conv2d_spatial_and_reduction);
  tcase_add_test(tc, test_fuse_reduction_init_dependence);
  tcase_add_test(tc, test_fuse_refusals);
  tcase_add_test(tc, test_reorder_reduction_outside_spatial);
  tcase_add_test(tc, test_reorder_with_split_predicate);
  tcase_add_test(tc, test_reorder_conv2d_and_batch_matmul);
  tcase_add_test(tc, test_reorder_refusals);
  tcase_add_test(tc, test_parallel_outer_spatial);
  tcase_add_test(tc, test_parallel_refusals);
  tcase_add_test(tc, test_vectorize_inner_spatial);
  tcase_add_test(tc, test_bind_threads);
  tcase_add_test(tc, test_unroll);
  tcase_add_test(tc, test_annotate);
  tcase_add_test(tc, test_add_unit_loops);
  tcase_add_test(tc, test_print_tiled_matmul);
  tcase_add_test(tc, test_loop_carried_refusals);
  tcase_add_test(tc, test_split_fuse_decomposed_init);
  tcase_add_test(tc, test_reorder_repeat_loop_refused);
  return su;
}

int main(void) { return tu_run(loop_suite()); }
