/* test_cache.c — cache_read, cache_write, set_scope, storage_align, set_dtype:
 * placement and names of the copy blocks and cache buffers, consumers
 * rewritten, results unchanged in the reference interpreter (matmul,
 * batch_matmul, conv2d_nchw, softmax and hand-written loop nests where the
 * writer and its consumer share a loop), and every refusal leaving the
 * schedule unchanged. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "ir/parse.h"
#include "ir/print.h"
#include "ir/schedule/trace.h"
#include "ir/struct.h"
#include "util.h"

static ts_diag D;

static sch_block blk(const char *name) { return (sch_block){name}; }

static const ir_block *root(sch_state *s) { return sch_func(s)->body->u.realize.block; }

static const ir_buffer *root_alloc(sch_state *s, const char *name) {
  const ir_block *r = root(s);
  for (int i = 0; i < r->nalloc; i++)
    if (!strcmp(r->allocs[i]->name, name)) return r->allocs[i];
  ck_abort_msg("root does not allocate '%s'", name);
  return NULL;
}

#define REFUSED(s, call, ...) TU_REFUSED(&D, s, call, __VA_ARGS__)

/* ---- matmul ---- */

START_TEST(matmul_read_shared_local) {
  ir_func *orig;
  sch_state *s = tu_open("matmul:m=6,n=10,k=7", &orig);
  sch_block out;
  ts_diag_clear(&D);
  tu_ok(sch_cache_read(s, blk("C"), 0, "shared", 0, NULL, &out, &D), &D);
  ck_assert_str_eq(out.name, "A_shared");
  tu_ok(sch_cache_read(s, blk("C"), 1, "local", 0, NULL, &out, &D), &D);
  ck_assert_str_eq(out.name, "B_local");
  /* inputs: copies at the start of the scope */
  tu_assert_children(s, "B_local A_shared C");
  ck_assert_str_eq(root_alloc(s, "A_shared")->scope, "shared");
  ck_assert_str_eq(root_alloc(s, "B_local")->scope, "local");
  ck_assert_int_eq(root_alloc(s, "A_shared")->ndim, 2);
  const ir_block *c = tu_block(s, "C");
  ck_assert(tu_reads(c, "A_shared") && tu_reads(c, "B_local"));
  ck_assert(!tu_reads(c, "A") && !tu_reads(c, "B"));
  const ir_block *cp = tu_block(s, "A_shared");
  ck_assert(tu_reads(cp, "A") && tu_writes(cp, "A_shared"));
  ck_assert_int_eq(cp->niter, 2);
  for (int i = 0; i < cp->niter; i++) ck_assert_int_eq(cp->iters[i].type, IR_ITER_S);
  /* the copy block's loops, found through its handle */
  sch_loop l[4];
  ck_assert_int_eq(tu_loops(s, out.name, l, 4), 2);
  ck_assert_str_eq(l[0].var->name, "ax0");
  ck_assert_str_eq(l[1].var->name, "ax1");
  tu_assert_equivalent(orig, sch_func(s));
}
END_TEST

START_TEST(matmul_write_local) {
  ir_func *orig;
  sch_state *s = tu_open("matmul:m=6,n=10,k=7", &orig);
  sch_block out;
  ts_diag_clear(&D);
  tu_ok(sch_cache_read(s, blk("C"), 0, "shared", 0, NULL, &out, &D), &D);
  tu_ok(sch_cache_read(s, blk("C"), 1, "shared", 0, NULL, &out, &D), &D);
  tu_ok(sch_cache_write(s, blk("C"), 0, "local", 0, NULL, &out, &D), &D);
  ck_assert_str_eq(out.name, "C_local");
  tu_assert_children(s, "B_shared A_shared C C_local");
  const ir_block *c = tu_block(s, "C"), *cb = tu_block(s, "C_local");
  ck_assert(tu_writes(c, "C_local") && !tu_writes(c, "C"));
  ck_assert(c->init != NULL);
  ck_assert(tu_reads(cb, "C_local") && tu_writes(cb, "C"));
  ck_assert_str_eq(root_alloc(s, "C_local")->scope, "local");
  tu_assert_equivalent(orig, sch_func(s));
  /* the cache buffer name is taken now: a second cache gets a fresh one */
  tu_ok(sch_cache_read(s, blk("C"), 0, "shared", 0, NULL, &out, &D), &D);
  ck_assert_str_eq(out.name, "A_shared_shared");
  tu_assert_equivalent(orig, sch_func(s));
}
END_TEST

START_TEST(matmul_named_scopes) {
  ir_func *orig;
  sch_state *s = tu_open("matmul:m=5,n=3,k=4", &orig);
  sch_block out;
  ts_diag_clear(&D);
  tu_ok(sch_cache_read(s, blk("C"), 0, "wmma.matrix_a", 0, NULL, &out, &D), &D);
  ck_assert_str_eq(out.name, "A_wmma.matrix_a");
  tu_ok(sch_cache_read(s, blk("C"), 1, "global.local", 0, NULL, &out, &D), &D);
  ck_assert_str_eq(root_alloc(s, "B_global.local")->scope, "global.local");
  tu_ok(sch_cache_write(s, blk("C"), 0, "wmma.accumulator", 0, NULL, &out, &D), &D);
  ck_assert_str_eq(out.name, "C_wmma.accumulator");
  tu_assert_equivalent(orig, sch_func(s));
}
END_TEST

START_TEST(batch_matmul_read_write) {
  ir_func *orig;
  sch_state *s = tu_open("batch_matmul:b=2,m=3,n=5,k=4", &orig);
  sch_block out;
  ts_diag_clear(&D);
  tu_ok(sch_cache_write(s, blk("C"), 0, "local", 0, NULL, &out, &D), &D);
  tu_ok(sch_cache_read(s, blk("C"), 0, "shared", 0, NULL, &out, &D), &D);
  tu_ok(sch_cache_read(s, blk("C"), 1, "local", 0, NULL, &out, &D), &D);
  tu_assert_children(s, "B_local A_shared C C_local");
  sch_loop l[4];
  ck_assert_int_eq(tu_loops(s, "C_local", l, 4), 3);
  tu_assert_equivalent(orig, sch_func(s));
}
END_TEST

/* A padding stage reads its source behind a guard: caching that source copies
 * only the buffer (the read region is clipped), and moving the stage under the
 * copy's loops is refused because the border instances would never run. */
START_TEST(padded_source_read) {
  ir_func *orig;
  sch_state *s = tu_open("conv2d_nchw:n=1,c=3,h=5,w=6,k=4,r=3,s=3,pad=1", &orig);
  sch_block out;
  ts_diag_clear(&D);
  tu_ok(sch_cache_read(s, blk("Xp"), 0, "local", 0, NULL, &out, &D), &D);
  ck_assert_str_eq(out.name, "X_local");
  sch_loop l[4];
  ck_assert_int_eq(tu_loops(s, "X_local", l, 4), 4);
  /* the copy loops span X itself (5 x 6), not the padded read region (7 x 8) */
  char *text = ir_func_to_string(sch_func(s));
  ck_assert_ptr_nonnull(strstr(text, "alloc X_local: f32[1, 3, 5, 6]"));
  ck_assert_msg(strstr(text, "in serial(0, 5)") && strstr(text, "in serial(0, 6)") &&
                    !strstr(text, "in serial(-1"),
                "%s", text);
  ts_free(text);
  tu_assert_equivalent(orig, sch_func(s));
  TU_REFUSED(&D, s, sch_reverse_compute_at(s, blk("Xp"), l[3], false, -1, &D), "reverse_compute_at", "Xp",
             "whole domain");
  TU_REFUSED(&D, s, sch_reverse_compute_at(s, blk("Xp"), l[0], false, -1, &D), "reverse_compute_at", "Xp",
             "whole domain");
  tu_assert_equivalent(orig, sch_func(s));
}
END_TEST

START_TEST(conv2d_read_write) {
  ir_func *orig;
  sch_state *s = tu_open("conv2d_nchw:n=1,c=3,h=5,w=6,k=4,r=3,s=3,pad=0", &orig);
  sch_block out;
  ts_diag_clear(&D);
  tu_ok(sch_cache_read(s, blk("Y"), 0, "shared", 0, NULL, &out, &D), &D);
  ck_assert_str_eq(out.name, "X_shared");
  tu_ok(sch_cache_read(s, blk("Y"), 1, "shared", 0, NULL, &out, &D), &D);
  ck_assert_str_eq(out.name, "W_shared");
  tu_ok(sch_cache_write(s, blk("Y"), 0, "local", 0, NULL, &out, &D), &D);
  tu_assert_children(s, "W_shared X_shared Y Y_local");
  sch_loop l[8];
  ck_assert_int_eq(tu_loops(s, "X_shared", l, 8), 4);
  tu_assert_equivalent(orig, sch_func(s));
}
END_TEST

/* ---- softmax: intermediates with a writer ---- */

START_TEST(softmax_read_intermediate) {
  ir_func *orig;
  sch_state *s = tu_open("softmax:m=3,n=7", &orig);
  sch_block out;
  ts_diag_clear(&D);
  /* s reads e (written by block e): the copy goes after e, before s, and
   * every later reader (s and Y) reads the cache */
  tu_ok(sch_cache_read(s, blk("s"), 0, "shared", 0, NULL, &out, &D), &D);
  ck_assert_str_eq(out.name, "e_shared");
  tu_assert_children(s, "mx e e_shared s Y");
  ck_assert(tu_reads(tu_block(s, "s"), "e_shared"));
  ck_assert(tu_reads(tu_block(s, "Y"), "e_shared"));
  ck_assert(tu_writes(tu_block(s, "e"), "e"));
  tu_assert_equivalent(orig, sch_func(s));
  /* mx read by e only, into local; the input X read by mx and e */
  tu_ok(sch_cache_read(s, blk("e"), 1, "local", 0, NULL, &out, &D), &D);
  ck_assert_str_eq(out.name, "mx_local");
  tu_ok(sch_cache_read(s, blk("mx"), 0, "shared", 0, NULL, &out, &D), &D);
  ck_assert_str_eq(out.name, "X_shared");
  tu_assert_children(s, "X_shared mx mx_local e e_shared s Y");
  ck_assert(tu_reads(tu_block(s, "e"), "X_shared"));
  tu_assert_equivalent(orig, sch_func(s));
}
END_TEST

START_TEST(softmax_read_selected_consumer) {
  ir_func *orig;
  sch_state *s = tu_open("softmax:m=4,n=5", &orig);
  sch_block out, only_y = blk("Y");
  ts_diag_clear(&D);
  /* only Y reads the cache: the copy goes right before Y, s keeps e */
  tu_ok(sch_cache_read(s, blk("Y"), 0, "local", 1, &only_y, &out, &D), &D);
  tu_assert_children(s, "mx e s e_local Y");
  ck_assert(tu_reads(tu_block(s, "s"), "e"));
  ck_assert(tu_reads(tu_block(s, "Y"), "e_local"));
  tu_assert_equivalent(orig, sch_func(s));
}
END_TEST

START_TEST(softmax_write_intermediates) {
  ir_func *orig;
  sch_state *s = tu_open("softmax:m=3,n=7", &orig);
  sch_block out, cons = blk("Y");
  ts_diag_clear(&D);
  tu_ok(sch_cache_write(s, blk("mx"), 0, "local", 0, NULL, &out, &D), &D);
  ck_assert_str_eq(out.name, "mx_local");
  tu_assert_children(s, "mx mx_local e s Y");
  ck_assert(tu_reads(tu_block(s, "e"), "mx"));
  /* the consumer Y reads the sum's cache directly */
  tu_ok(sch_cache_write(s, blk("s"), 0, "shared", 1, &cons, &out, &D), &D);
  tu_assert_children(s, "mx mx_local e s s_shared Y");
  ck_assert(tu_reads(tu_block(s, "Y"), "s_shared"));
  tu_ok(sch_cache_write(s, blk("Y"), 0, "local", 0, NULL, &out, &D), &D);
  tu_assert_children(s, "mx mx_local e s s_shared Y Y_local");
  tu_assert_equivalent(orig, sch_func(s));
}
END_TEST

/* ---- writer and consumer under one loop ---- */

static const char *SHARED_LOOP =
    "func f(A: f32[8, 6]) -> C: f32[8, 6] {\n"
    "  block root() {\n"
    "    alloc B: f32[8, 6]\n"
    "    for i in serial(0, 8) {\n"
    "      for j in serial(0, 6) {\n"
    "        block B(vi: S(0, 8) = i, vj: S(0, 6) = j) {\n"
    "          reads A[vi, vj]\n"
    "          writes B[vi, vj]\n"
    "          B[vi, vj] = A[vi, vj] * 2.0\n"
    "        }\n"
    "      }\n"
    "      for j2 in serial(0, 6) {\n"
    "        block C(wi: S(0, 8) = i, wj: S(0, 6) = j2) {\n"
    "          reads B[wi, wj]\n"
    "          writes C[wi, wj]\n"
    "          C[wi, wj] = B[wi, wj] + 1.0\n"
    "        }\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "}\n";

START_TEST(shared_loop_read) {
  ir_func *orig;
  sch_state *s = tu_open_text(SHARED_LOOP, &orig);
  sch_block out;
  ts_diag_clear(&D);
  tu_ok(sch_cache_read(s, blk("C"), 0, "shared", 0, NULL, &out, &D), &D);
  ck_assert_str_eq(out.name, "B_shared");
  /* inside loop i, copying one row: a unit loop and one of extent 6 */
  sch_loop l[4];
  ck_assert_int_eq(tu_loops(s, "B_shared", l, 4), 3);
  ck_assert_str_eq(l[0].var->name, "i");
  ck_assert_str_eq(l[1].var->name, "ax0");
  ck_assert_str_eq(l[2].var->name, "ax1");
  ck_assert_int_eq(tu_loops(s, "C", l, 4), 2);
  ck_assert_str_eq(l[0].var->name, "i");
  tu_assert_equivalent(orig, sch_func(s));
}
END_TEST

START_TEST(shared_loop_write) {
  ir_func *orig;
  sch_state *s = tu_open_text(SHARED_LOOP, &orig);
  sch_block out;
  ts_diag_clear(&D);
  tu_ok(sch_cache_write(s, blk("B"), 0, "local", 0, NULL, &out, &D), &D);
  ck_assert_str_eq(out.name, "B_local");
  sch_loop l[4];
  ck_assert_int_eq(tu_loops(s, "B_local", l, 4), 3);
  ck_assert_str_eq(l[0].var->name, "i");
  ck_assert(tu_writes(tu_block(s, "B"), "B_local"));
  ck_assert(tu_reads(tu_block(s, "C"), "B"));
  tu_assert_equivalent(orig, sch_func(s));
  /* the output too: nothing reads C, so it is copied back at the end */
  tu_ok(sch_cache_write(s, blk("C"), 0, "local", 0, NULL, &out, &D), &D);
  tu_assert_children(s, "B B_local C C_local");
  ck_assert_int_eq(tu_loops(s, "C_local", l, 4), 2);
  ck_assert_str_eq(l[0].var->name, "ax0");
  tu_assert_equivalent(orig, sch_func(s));
}
END_TEST

/* Rows in tiles of 3 over 8 rows: the last tile overhangs, so the copy of
 * a tile (its rows start at a loop var) needs a guard. */
static const char *TILED =
    "func f(A: f32[8, 5]) -> C: f32[8, 5] {\n"
    "  block root() {\n"
    "    alloc B: f32[8, 5]\n"
    "    for t in serial(0, 3) {\n"
    "      for r in serial(0, 3) {\n"
    "        for j in serial(0, 5) {\n"
    "          block B(vi: S(0, 8) = t * 3 + r, vj: S(0, 5) = j) where t * 3 + r < 8 {\n"
    "            reads A[vi, vj]\n"
    "            writes B[vi, vj]\n"
    "            B[vi, vj] = A[vi, vj] + 3.0\n"
    "          }\n"
    "        }\n"
    "      }\n"
    "      for r2 in serial(0, 3) {\n"
    "        for j2 in serial(0, 5) {\n"
    "          block C(wi: S(0, 8) = t * 3 + r2, wj: S(0, 5) = j2) where t * 3 + r2 < 8 {\n"
    "            reads B[wi, wj]\n"
    "            writes C[wi, wj]\n"
    "            C[wi, wj] = B[wi, wj] * B[wi, wj]\n"
    "          }\n"
    "        }\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "}\n";

START_TEST(tiled_guarded_copy) {
  ir_func *orig;
  sch_state *s = tu_open_text(TILED, &orig);
  sch_block out;
  ts_diag_clear(&D);
  tu_ok(sch_cache_read(s, blk("C"), 0, "shared", 0, NULL, &out, &D), &D);
  sch_loop l[4];
  ck_assert_int_eq(tu_loops(s, "B_shared", l, 4), 3);
  ck_assert_str_eq(l[0].var->name, "t");
  tu_assert_equivalent(orig, sch_func(s));
  tu_ok(sch_cache_write(s, blk("B"), 0, "local", 0, NULL, &out, &D), &D);
  ck_assert_int_eq(tu_loops(s, "B_local", l, 4), 3);
  ck_assert_str_eq(l[0].var->name, "t");
  tu_assert_equivalent(orig, sch_func(s));
  char *text = ir_func_to_string(sch_func(s));
  ck_assert_msg(strstr(text, "t * 3 + ax0 < 8") != NULL, "no guard on the tile copy:\n%s", text);
  ts_free(text);
}
END_TEST

/* A reader that runs before the writer inside a shared loop (loop-carried). */
static const char *CARRIED =
    "func f(A: f32[8]) -> C: f32[8] {\n"
    "  block root() {\n"
    "    alloc B: f32[8]\n"
    "    for i in serial(0, 8) {\n"
    "      block C(vi: S(0, 8) = i) {\n"
    "        reads B[vi]\n"
    "        writes C[vi]\n"
    "        C[vi] = B[vi]\n"
    "      }\n"
    "      block B(wi: S(0, 8) = i) {\n"
    "        reads A[wi]\n"
    "        writes B[wi]\n"
    "        B[wi] = A[wi]\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "}\n";

START_TEST(refuse_loop_carried) {
  ir_func *orig;
  sch_state *s = tu_open_text(CARRIED, &orig);
  sch_block out, c = blk("C");
  REFUSED(s, sch_cache_write(s, blk("B"), 0, "local", 0, NULL, &out, &D), "cache_write", "'C'",
          "before its writer");
  REFUSED(s, sch_cache_read(s, blk("C"), 0, "local", 1, &c, &out, &D), "cache_read", "'C'",
          "before the writer");
  REFUSED(s, sch_cache_read(s, blk("C"), 0, "local", 0, NULL, &out, &D), "cache_read",
          "no block reads 'B' after its writer");
  (void)orig;
}
END_TEST

/* ---- refusals ---- */

START_TEST(refuse_bad_index_and_scope) {
  ir_func *orig;
  sch_state *s = tu_open("matmul:m=6,n=10,k=7", &orig);
  sch_block out;
  REFUSED(s, sch_cache_read(s, blk("C"), 2, "shared", 0, NULL, &out, &D), "cache_read", "'C'",
          "read_index 2 is out of range");
  REFUSED(s, sch_cache_read(s, blk("C"), -1, "shared", 0, NULL, &out, &D), "read_index -1");
  REFUSED(s, sch_cache_write(s, blk("C"), 1, "local", 0, NULL, &out, &D), "cache_write",
          "write_index 1 is out of range");
  const char *bad[] = {"", "sha red", "1local", "shared.", ".shared", "a..b", "shared!"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    REFUSED(s, sch_cache_read(s, blk("C"), 0, bad[i], 0, NULL, &out, &D), "invalid storage scope");
    REFUSED(s, sch_cache_write(s, blk("C"), 0, bad[i], 0, NULL, &out, &D), "invalid storage scope");
  }
  REFUSED(s, sch_cache_read(s, blk("C"), 0, NULL, 0, NULL, &out, &D), "invalid storage scope");
  /* consumers must be blocks of the scope that read the buffer */
  sch_block nob = blk("nope"), self = blk("C");
  REFUSED(s, sch_cache_read(s, blk("C"), 0, "shared", 1, &nob, &out, &D), "'nope'");
  REFUSED(s, sch_cache_write(s, blk("C"), 0, "local", 1, &self, &out, &D), "does not just read");
  ts_diag_clear(&D);
  ck_assert_int_eq(sch_cache_read(s, blk("nope"), 0, "shared", 0, NULL, &out, &D), TS_ENOTFOUND);
}
END_TEST

START_TEST(refuse_softmax_misuse) {
  ir_func *orig;
  sch_state *s = tu_open("softmax:m=3,n=7", &orig);
  sch_block out, mx = blk("mx"), e = blk("e");
  /* mx does not read e; e is the writer of e */
  REFUSED(s, sch_cache_read(s, blk("s"), 0, "shared", 1, &mx, &out, &D), "'mx'",
          "does not just read 'e'");
  REFUSED(s, sch_cache_read(s, blk("s"), 0, "shared", 1, &e, &out, &D), "'e'");
  REFUSED(s, sch_cache_write(s, blk("e"), 0, "local", 1, &mx, &out, &D), "'mx'");
}
END_TEST

START_TEST(refuse_two_writers) {
  ir_func *orig;
  sch_loop l[4];
  sch_state *s = tu_open_loops("matmul:m=4,n=3,k=5", &orig, "C", l, 3);
  sch_block init;
  ts_diag_clear(&D);
  tu_ok(sch_decompose_reduction(s, blk("C"), l[0], &init, &D), &D);
  sch_block out;
  REFUSED(s, sch_cache_write(s, blk("C"), 0, "local", 0, NULL, &out, &D), "cache_write", "'C'",
          "not the only writer", "C_init");
  REFUSED(s, sch_cache_write(s, blk("C_init"), 0, "local", 0, NULL, &out, &D), "not the only writer");
  /* the update reads and writes C: caching its read of C is refused */
  REFUSED(s, sch_cache_read(s, blk("C"), 0, "local", 0, NULL, &out, &D), "both reads and writes");
  tu_assert_equivalent(orig, sch_func(s));
}
END_TEST

/* ---- set_scope / storage_align ---- */

START_TEST(set_scope_intermediate) {
  ir_func *orig;
  sch_state *s = tu_open("softmax:m=3,n=7", &orig);
  ts_diag_clear(&D);
  tu_ok(sch_set_scope(s, blk("e"), 0, "shared", &D), &D);
  const ir_buffer *b = root_alloc(s, "e_shared");
  ck_assert_str_eq(b->scope, "shared");
  ck_assert(tu_writes(tu_block(s, "e"), "e_shared"));
  ck_assert(tu_reads(tu_block(s, "s"), "e_shared"));
  ck_assert(tu_reads(tu_block(s, "Y"), "e_shared"));
  tu_assert_equivalent(orig, sch_func(s));
  /* same scope again: nothing changes */
  ir_stmt *body = sch_func(s)->body;
  tu_ok(sch_set_scope(s, blk("e"), 0, "shared", &D), &D);
  ck_assert_ptr_eq(sch_func(s)->body, body);
  tu_ok(sch_set_scope(s, blk("mx"), 0, "local", &D), &D);
  ck_assert_str_eq(root_alloc(s, "mx_local")->scope, "local");
  tu_assert_equivalent(orig, sch_func(s));
}
END_TEST

START_TEST(set_scope_after_cache) {
  ir_func *orig;
  sch_state *s = tu_open("matmul:m=6,n=10,k=7", &orig);
  sch_block out;
  ts_diag_clear(&D);
  tu_ok(sch_cache_read(s, blk("C"), 0, "shared", 0, NULL, &out, &D), &D);
  tu_ok(sch_set_scope(s, out, 0, "local", &D), &D);
  ck_assert_str_eq(root_alloc(s, "A_shared_local")->scope, "local");
  ck_assert(tu_reads(tu_block(s, "C"), "A_shared_local"));
  tu_ok(sch_storage_align(s, out, 0, 0, 16, 4, &D), &D);
  tu_assert_equivalent(orig, sch_func(s));
}
END_TEST

/* set_dtype: an int8 conv's pad stage (Xp, u8) stored as i16: the pad
 * block stores its value widened, the conv reads i32(Xp) of the wide
 * buffer directly, results unchanged; a copy of a param (cache_read) the
 * same for an i8 matmul's A; refusals (a param, a narrowing, a float)
 * leave the schedule as it was. */
START_TEST(set_dtype_widens) {
  ir_func *orig;
  sch_state *s = tu_open("conv2d_nhwc_u8s8:n=1,c=3,h=4,w=5,k=8,r=3,s=3,stride=1,pad=1", &orig);
  ts_diag_clear(&D);
  tu_ok(sch_set_dtype(s, blk("Xp"), 0, ir_dt(IR_I16), &D), &D);
  ck_assert_int_eq(root_alloc(s, "Xp")->dtype.code, IR_I16);
  char *text = ir_func_to_string(sch_func(s));
  ck_assert_msg(strstr(text, "i16(select(") && strstr(text, "i32(Xp[") && !strstr(text, "u8(Xp["), "%s", text);
  ts_free(text);
  tu_assert_equivalent(orig, sch_func(s));
  /* the same dtype again: nothing changes */
  ir_stmt *body = sch_func(s)->body;
  tu_ok(sch_set_dtype(s, blk("Xp"), 0, ir_dt(IR_I16), &D), &D);
  ck_assert_ptr_eq(sch_func(s)->body, body);
  REFUSED(s, sch_set_dtype(s, blk("Xp"), 0, ir_dt(IR_I8), &D), "set_dtype", "no widening");
  REFUSED(s, sch_set_dtype(s, blk("Y"), 0, ir_dt(IR_I64), &D), "set_dtype", "function parameter");
  s = tu_open("matmul_int8:m=5,n=7,k=6", &orig);
  sch_block out;
  tu_ok(sch_cache_read(s, blk("C"), 0, "global", 0, NULL, &out, &D), &D);
  tu_ok(sch_set_dtype(s, out, 0, ir_dt(IR_I32), &D), &D);
  tu_assert_equivalent(orig, sch_func(s));
  s = tu_open("softmax:m=3,n=7", &orig);
  REFUSED(s, sch_set_dtype(s, blk("e"), 0, ir_dt(IR_F64), &D), "set_dtype", "no widening");
}
END_TEST

START_TEST(storage_align_records) {
  ir_func *orig;
  sch_state *s = tu_open("softmax:m=3,n=7", &orig);
  ts_diag_clear(&D);
  tu_ok(sch_storage_align(s, blk("e"), 0, 0, 8, 1, &D), &D);
  const ir_buffer *b = root_alloc(s, "e");
  ck_assert(b->align_factor && b->align_offset);
  ck_assert_int_eq(b->align_factor[0], 8);
  ck_assert_int_eq(b->align_offset[0], 1);
  ck_assert_int_eq(b->align_factor[1], 0);
  tu_ok(sch_storage_align(s, blk("e"), 0, -1, 4, 0, &D), &D);
  b = root_alloc(s, "e");
  ck_assert_int_eq(b->align_factor[0], 8);
  ck_assert_int_eq(b->align_factor[1], 4);
  /* every use sees the same buffer */
  const ir_block *sb = tu_block(s, "s"), *eb = tu_block(s, "e");
  ck_assert_ptr_eq(sb->reads[0].buf, b);
  ck_assert_ptr_eq(eb->writes[0].buf, b);
  tu_ok(sch_set_scope(s, blk("e"), 0, "shared", &D), &D);
  b = root_alloc(s, "e_shared");
  ck_assert_int_eq(b->align_factor[1], 4);
  tu_assert_equivalent(orig, sch_func(s));
  char *text = ir_func_to_string(sch_func(s));
  ck_assert_ptr_nonnull(strstr(text, "storage_align("));
  ts_free(text);
}
END_TEST

START_TEST(refuse_params_and_bad_align) {
  ir_func *orig;
  sch_state *s = tu_open("softmax:m=3,n=7", &orig);
  REFUSED(s, sch_set_scope(s, blk("Y"), 0, "shared", &D), "set_scope", "'Y'", "function parameter");
  REFUSED(s, sch_storage_align(s, blk("Y"), 0, 0, 8, 0, &D), "storage_align", "function parameter");
  REFUSED(s, sch_storage_align(s, blk("e"), 0, 0, 0, 0, &D), "storage_align", "factor 0");
  REFUSED(s, sch_storage_align(s, blk("e"), 0, 0, -4, 0, &D), "factor -4");
  REFUSED(s, sch_storage_align(s, blk("e"), 0, 2, 8, 0, &D), "axis 2 is out of range [-2, 2)");
  REFUSED(s, sch_storage_align(s, blk("e"), 0, -3, 8, 0, &D), "axis -3");
  REFUSED(s, sch_storage_align(s, blk("e"), 1, 0, 8, 0, &D), "write_index 1 is out of range");
  REFUSED(s, sch_set_scope(s, blk("e"), 0, "", &D), "invalid storage scope");
  REFUSED(s, sch_set_scope(s, blk("e"), -1, "local", &D), "write_index -1");
}
END_TEST

/* ---- after loop transformations ---- */

START_TEST(after_split_with_predicate) {
  ir_func *orig;
  sch_loop l[4], sp[2];
  sch_state *s = tu_open_loops("matmul:m=6,n=10,k=7", &orig, "C", l, 3);
  int64_t f4[2] = {-1, 4};
  ts_diag_clear(&D);
  /* j (10) by 4: a guarded tail, so the written region overhangs C */
  tu_ok(sch_split(s, l[1], 2, f4, sp, &D), &D);
  sch_block out;
  tu_ok(sch_cache_write(s, blk("C"), 0, "local", 0, NULL, &out, &D), &D);
  tu_ok(sch_cache_read(s, blk("C"), 1, "shared", 0, NULL, &out, &D), &D);
  ck_assert_int_eq(tu_loops(s, "C", l, 4), 4);
  tu_assert_equivalent(orig, sch_func(s));
}
END_TEST

/* ---- trace round trip ---- */

START_TEST(trace_roundtrip) {
  ir_func *orig;
  sch_traced *t = tu_open_traced("softmax:m=3,n=7", 1, &orig);
  int s_, y, e, c1, c2, c3;
  tu_ok(sch_t_get_block(t, "s", &s_, &D), &D);
  tu_ok(sch_t_get_block(t, "Y", &y, &D), &D);
  tu_ok(sch_t_get_block(t, "e", &e, &D), &D);
  tu_ok(sch_t_cache_read(t, y, 0, "shared", 1, &y, &c1, &D), &D);
  tu_ok(sch_t_cache_read(t, s_, 0, "local", 0, NULL, &c2, &D), &D);
  tu_ok(sch_t_cache_write(t, s_, 0, "local", 1, &y, &c3, &D), &D);
  tu_ok(sch_t_set_scope(t, e, 0, "shared", &D), &D);
  tu_ok(sch_t_storage_align(t, c1, 0, -1, 8, 1, &D), &D);
  tu_assert_roundtrip(t, orig, 1);
}
END_TEST

static Suite *suite(void) {
  Suite *su = suite_create("schedule_cache");
  TCase *tc = tu_tcase(su, "cache", NULL, 0);
  tcase_add_test(tc, matmul_read_shared_local);
  tcase_add_test(tc, matmul_write_local);
  tcase_add_test(tc, matmul_named_scopes);
  tcase_add_test(tc, batch_matmul_read_write);
  tcase_add_test(tc, conv2d_read_write);
  tcase_add_test(tc, padded_source_read);
  tcase_add_test(tc, softmax_read_intermediate);
  tcase_add_test(tc, softmax_read_selected_consumer);
  tcase_add_test(tc, softmax_write_intermediates);
  tcase_add_test(tc, shared_loop_read);
  tcase_add_test(tc, shared_loop_write);
  tcase_add_test(tc, tiled_guarded_copy);
  tcase_add_test(tc, refuse_loop_carried);
  tcase_add_test(tc, refuse_bad_index_and_scope);
  tcase_add_test(tc, refuse_softmax_misuse);
  tcase_add_test(tc, refuse_two_writers);
  tcase_add_test(tc, after_split_with_predicate);
  TCase *tb = tu_tcase(su, "scope_align", NULL, 0);
  tcase_add_test(tb, set_scope_intermediate);
  tcase_add_test(tb, set_scope_after_cache);
  tcase_add_test(tb, storage_align_records);
  tcase_add_test(tb, set_dtype_widens);
  tcase_add_test(tb, refuse_params_and_bad_align);
  tcase_add_test(tb, trace_roundtrip);
  return su;
}

int main(void) { return tu_run(suite()); }
