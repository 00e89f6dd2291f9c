/* test_struct.c — structural equality and hashing (ir/struct.c): equality up
 * to consistent renaming, inequality (and a different hash) for every single
 * mutation of a function, the normalisations struct.h documents, explain
 * paths, and one golden hash so an accidental change of the serialization
 * (which would invalidate every tuning log's workload keys) fails a test. */
#include <check.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "ir/struct.h"

#include "irb.h"

/* ---- a matmul with one optional mutation ---------------------------------- */

typedef enum {
  MUT_NONE,
  MUT_CONST,        /* init value 0.0 -> 1.0 */
  MUT_DTYPE,        /* B is f16 */
  MUT_LOOP_KIND,    /* j parallel */
  MUT_EXTENT,       /* i runs to 32 */
  MUT_SWAP,         /* A*B -> B*A */
  MUT_BUFFER,       /* the body loads B where it loaded A */
  MUT_INDEX,        /* C[vj, vi] in the body's store */
  MUT_ITER_TYPE,    /* vk spatial */
  MUT_BINDING,      /* vk bound to k + 0 */
  MUT_OP,           /* + -> max */
  MUT_ANNOT,        /* an annotation on loop k */
  MUT_ANNOT_VALUE,  /* a different annotation value */
  MUT_THREAD,       /* i bound to blockIdx.x */
  MUT_SCOPE,        /* C in "shared" */
  MUT_STRIDES,      /* A with explicit strides */
  MUT_SALIGN,       /* storage_align on B */
  MUT_BLOCK_NAME,   /* block "D" */
  MUT_PREDICATE,    /* block predicate i < 31 */
  MUT_REGION,       /* reads A with extent 2 on axis 1 */
  MUT_NO_INIT,      /* init removed */
  MUT_STORE_PRED,   /* predicated store */
  MUT_VAR_DTYPE,    /* loop var k i32 */
  MUT_INPUTS,       /* ninputs 1 */
  MUT_ELEM_OFFSET,  /* A offset 0 (explicit) */
  MUT_COUNT
} mutation;

typedef struct names {
  const char *a, *b, *c, *i, *j, *k, *vi, *vj, *vk;
} names;

static const names N1 = {"A", "B", "C", "i", "j", "k", "vi", "vj", "vk"};
static const names N2 = {"X", "Y", "Z", "p", "q", "r", "u", "v", "w"};

static ir_func *build_mm(const names *n, mutation m) {
  ir_buffer *a = BUF(n->a, ir_dt(IR_F32), 2, I(64), I(16));
  ir_buffer *b = BUF(n->b, ir_dt(m == MUT_DTYPE ? IR_F16 : IR_F32), 2, I(16), I(32));
  ir_buffer *c = BUF(n->c, ir_dt(IR_F32), 2, I(64), I(32));
  if (m == MUT_SCOPE) c->scope = "shared";
  if (m == MUT_STRIDES) {
    a->strides = TS_ANEWN(A, ir_expr *, 2);
    a->strides[0] = I(16);
    a->strides[1] = I(1);
  }
  if (m == MUT_ELEM_OFFSET) a->elem_offset = I(0);
  if (m == MUT_SALIGN) {
    b->align_factor = TS_ANEWN(A, int64_t, 2);
    b->align_offset = TS_ANEWN(A, int64_t, 2);
    b->align_factor[0] = 32;
    b->align_offset[0] = 4;
  }
  ir_var *i = VAR(n->i), *j = VAR(n->j);
  ir_var *k = ir_var_new(A, n->k, ir_dt(m == MUT_VAR_DTYPE ? IR_I32 : IR_I64));
  ir_var *vi = VAR(n->vi), *vj = VAR(n->vj), *vk = VAR(n->vk);
  ir_block *blk = ir_block_new(A, m == MUT_BLOCK_NAME ? "D" : "C");
  blk->niter = 3;
  blk->iters = TS_ANEWN(A, ir_iter_var, 3);
  blk->iters[0] = (ir_iter_var){vi, {I(0), I(64)}, IR_ITER_S};
  blk->iters[1] = (ir_iter_var){vj, {I(0), I(32)}, IR_ITER_S};
  blk->iters[2] = (ir_iter_var){vk, {I(0), I(16)}, m == MUT_ITER_TYPE ? IR_ITER_S : IR_ITER_R};
  blk->nreads = 2;
  blk->reads = TS_ANEWN(A, ir_region, 2);
  blk->reads[0] = REG(a, 2, V(vi), V(vk));
  if (m == MUT_REGION) blk->reads[0].ranges[1].extent = I(2);
  blk->reads[1] = REG(b, 2, V(vk), V(vj));
  blk->nwrites = 1;
  blk->writes = TS_ANEWN(A, ir_region, 1);
  blk->writes[0] = REG(c, 2, V(vi), V(vj));
  if (m != MUT_NO_INIT) blk->init = ST(c, F(m == MUT_CONST ? 1.0 : 0.0), 2, V(vi), V(vj));
  ir_expr *la = LD(m == MUT_BUFFER ? b : a, 2, V(vi), V(vk));
  ir_expr *lb = LD(b, 2, V(vk), V(vj));
  ir_expr *prod = m == MUT_SWAP ? B2(IR_MUL, lb, la) : B2(IR_MUL, la, lb);
  ir_expr *acc = B2(m == MUT_OP ? IR_MAX : IR_ADD, LD(c, 2, V(vi), V(vj)), prod);
  blk->body = m == MUT_INDEX ? ST(c, acc, 2, V(vj), V(vi)) : ST(c, acc, 2, V(vi), V(vj));
  if (m == MUT_STORE_PRED) blk->body->u.store.predicate = B2(IR_LT, V(vk), I(15));
  ir_expr *kval = m == MUT_VAR_DTYPE ? ir_cast(A, ir_dt(IR_I64), V(k)) : V(k);
  if (m == MUT_BINDING) kval = B2(IR_ADD, V(k), I(0));
  ir_expr *vals[3] = {V(i), V(j), kval};
  ir_expr *pred = m == MUT_PREDICATE ? B2(IR_LT, V(i), I(31)) : NULL;
  ir_expr *kext = m == MUT_VAR_DTYPE ? ir_i32(A, 16) : I(16);
  ir_stmt *lk = ir_for(A, k, m == MUT_VAR_DTYPE ? ir_i32(A, 0) : I(0), kext, IR_FOR_SERIAL,
                       ir_realize(A, blk, vals, pred));
  /* every variant carries one annotation; MUT_ANNOT adds a second */
  ir_annot_set(A, &lk->u.loop.nannot, &lk->u.loop.annots,
               (ir_annot){.key = "pragma_unroll", .kind = IR_ANN_INT,
                          .v.i = m == MUT_ANNOT_VALUE ? 8 : 4});
  if (m == MUT_ANNOT)
    ir_annot_set(A, &lk->u.loop.nannot, &lk->u.loop.annots,
                 (ir_annot){.key = "extra", .kind = IR_ANN_STR, .v.s = "x"});
  ir_stmt *lj = FOR(j, I(32), m == MUT_LOOP_KIND ? IR_FOR_PARALLEL : IR_FOR_SERIAL, lk);
  ir_stmt *li = FOR(i, I(m == MUT_EXTENT ? 32 : 64),
                    m == MUT_THREAD ? IR_FOR_THREAD_BINDING : IR_FOR_SERIAL, lj);
  if (m == MUT_THREAD) li->u.loop.thread = "blockIdx.x";
  ir_func *f = ir_func_new(A, "mm");
  f->nparams = 3;
  f->ninputs = m == MUT_INPUTS ? 1 : 2;
  f->params = TS_ANEWN(A, ir_buffer *, 3);
  f->params[0] = a;
  f->params[1] = b;
  f->params[2] = c;
  f->body = root_block(li);
  return f;
}

/* ---- tests ------------------------------------------------------------------ */

START_TEST(test_equal_under_renaming) {
  ir_func *f = build_mm(&N1, MUT_NONE), *g = build_mm(&N2, MUT_NONE);
  char why[256];
  ck_assert_msg(ir_struct_equal_func_explain(f, g, why, sizeof why), "%s", why);
  ck_assert_str_eq(why, "");
  ck_assert(ir_struct_equal_func(f, f));
  ck_assert_uint_eq(ir_struct_hash_func(f), ir_struct_hash_func(g));
  char k1[17], k2[17];
  ck_assert_str_eq(ir_workload_key(f, k1), ir_workload_key(g, k2));
  ck_assert_int_eq((int)strlen(k1), 16);
  /* the function's own name does not matter either */
  g->name = "other";
  ck_assert(ir_struct_equal_func(f, g));
  ck_assert_uint_eq(ir_struct_hash_func(f), ir_struct_hash_func(g));
  /* a deep copy (fresh vars and buffers) is equal */
  ir_func *h = ir_func_copy(A, f);
  ck_assert_ptr_nonnull(h);
  ck_assert(ir_struct_equal_func(f, h));
  ck_assert_uint_eq(ir_struct_hash_func(f), ir_struct_hash_func(h));
}
END_TEST

START_TEST(test_each_mutation_differs) {
  ir_func *base = build_mm(&N1, MUT_NONE);
  uint64_t hb = ir_struct_hash_func(base);
  uint64_t hashes[MUT_COUNT];
  for (int m = 1; m < MUT_COUNT; m++) {
    ir_func *g = build_mm(&N2, (mutation)m);
    char why[512] = "";
    ck_assert_msg(!ir_struct_equal_func_explain(base, g, why, sizeof why), "mutation %d equal", m);
    ck_assert_msg(!ir_struct_equal_func_explain(g, base, NULL, 0), "mutation %d equal (rev)", m);
    ck_assert_msg(why[0] != 0, "mutation %d: no explanation", m);
    hashes[m] = ir_struct_hash_func(g);
    ck_assert_msg(hashes[m] != hb, "mutation %d: same hash", m);
    /* a mutated function still equals itself renamed */
    ck_assert_msg(ir_struct_equal_func(g, build_mm(&N1, (mutation)m)), "mutation %d", m);
    ck_assert_uint_eq(hashes[m], ir_struct_hash_func(build_mm(&N1, (mutation)m)));
  }
  for (int m = 1; m < MUT_COUNT; m++)
    for (int n = m + 1; n < MUT_COUNT; n++)
      ck_assert_msg(hashes[m] != hashes[n], "mutations %d and %d hash equal", m, n);
}
END_TEST

static void explains(mutation m, const char *want) {
  char why[512];
  ck_assert(!ir_struct_equal_func_explain(build_mm(&N1, MUT_NONE), build_mm(&N2, m), why,
                                          sizeof why));
  ck_assert_str_eq(why, want);
}

START_TEST(test_explain_paths) {
  explains(MUT_EXTENT, "body/block root/for i/extent: 64 vs 32");
  explains(MUT_CONST, "body/block root/for i/for j/for k/block C/init/store C/value: 0.0 vs 1.0");
  explains(MUT_DTYPE, "param B/dtype: f32 vs f16");
  explains(MUT_LOOP_KIND, "body/block root/for i/for j/kind: serial vs parallel");
  explains(MUT_SWAP, "body/block root/for i/for j/for k/block C/store C/value: "
                     "C[vi, vj] + A[vi, vk] * B[vk, vj] vs Z[u, v] + Y[w, v] * X[u, w]");
  explains(MUT_INDEX, "body/block root/for i/for j/for k/block C/store C/index[0]: vi vs v");
  explains(MUT_ITER_TYPE, "body/block root/for i/for j/for k/block C/iter vk/type: R vs S");
  explains(MUT_BLOCK_NAME, "body/block root/for i/for j/for k/block C/name: C vs D");
  explains(MUT_SCOPE, "param C/scope: \"global\" vs \"shared\"");
  explains(MUT_NO_INIT, "body/block root/for i/for j/for k/block C/init: present vs absent");
  explains(MUT_ANNOT_VALUE, "body/block root/for i/for j/for k/annot[pragma_unroll]: 4 vs 8");
  explains(MUT_THREAD, "body/block root/for i/kind: serial vs thread");
  explains(MUT_REGION, "body/block root/for i/for j/for k/block C/reads[0]/extent[1]: 1 vs 2");
  explains(MUT_INPUTS, "inputs: 2 vs 1");
}
END_TEST

/* The example of the brief: a difference inside a sequence. */
START_TEST(test_explain_seq) {
  ir_buffer *c = BUF("C", ir_dt(IR_F32), 1, I(64));
  ir_func *f[2];
  for (int t = 0; t < 2; t++) {
    ir_var *i = VAR("i"), *j = VAR("j");
    ir_stmt *s = SEQ(2, FOR(j, I(64), IR_FOR_SERIAL, ST(c, F(0.0), 1, V(j))),
                     FOR(i, I(t ? 32 : 64), IR_FOR_SERIAL, ST(c, F(1.0), 1, V(i))));
    f[t] = ir_func_new(A, "f");
    f[t]->nparams = 1;
    f[t]->params = &c;
    f[t]->body = root_block(s);
  }
  char why[256];
  ck_assert(!ir_struct_equal_func_explain(f[0], f[1], why, sizeof why));
  ck_assert_str_eq(why, "body/block root/seq[1]/for i/extent: 64 vs 32");
  /* a too-small buffer truncates, never overflows */
  char tiny[8];
  ck_assert(!ir_struct_equal_func_explain(f[0], f[1], tiny, sizeof tiny));
  ck_assert_str_eq(tiny, "body/bl");
}
END_TEST

/* Uses must map consistently: swapping which loop var indexes which axis is
 * a difference even though every var is used the same number of times. */
START_TEST(test_inconsistent_mapping) {
  ir_buffer *c = BUF("C", ir_dt(IR_F32), 2, I(4), I(4));
  ir_stmt *s[2];
  for (int t = 0; t < 2; t++) {
    ir_var *i = VAR("i"), *j = VAR("j");
    ir_stmt *st = t ? ST(c, F(0.0), 2, V(j), V(i)) : ST(c, F(0.0), 2, V(i), V(j));
    s[t] = FOR(i, I(4), IR_FOR_SERIAL, FOR(j, I(4), IR_FOR_SERIAL, st));
  }
  ck_assert(!ir_struct_equal_stmt(s[0], s[1]));
  /* free vars match by first use: x + y ~ a + b, but x + x !~ a + b */
  ir_var *x = VAR("x"), *y = VAR("y"), *a = VAR("a"), *b = VAR("b");
  ck_assert(ir_struct_equal_expr(B2(IR_ADD, V(x), V(y)), B2(IR_ADD, V(a), V(b))));
  ck_assert(!ir_struct_equal_expr(B2(IR_ADD, V(x), V(x)), B2(IR_ADD, V(a), V(b))));
  ck_assert(!ir_struct_equal_expr(B2(IR_ADD, V(x), V(y)), B2(IR_ADD, V(a), V(a))));
  ck_assert_uint_eq(ir_struct_hash_expr(B2(IR_ADD, V(x), V(y))),
                    ir_struct_hash_expr(B2(IR_ADD, V(a), V(b))));
  ck_assert_uint_ne(ir_struct_hash_expr(B2(IR_ADD, V(x), V(x))),
                    ir_struct_hash_expr(B2(IR_ADD, V(a), V(b))));
}
END_TEST

/* One ir_var defined by two sibling loops (shared after a rewrite) is equal
 * to two distinct vars: it is what the printer writes and the parser reads. */
START_TEST(test_var_defined_twice) {
  ir_buffer *c = BUF("C", ir_dt(IR_F32), 1, I(4));
  ir_var *k = VAR("k"), *k1 = VAR("k"), *k2 = VAR("k2");
  ir_stmt *s1 = SEQ(2, FOR(k, I(4), IR_FOR_SERIAL, ST(c, F(1.0), 1, V(k))),
                    FOR(k, I(4), IR_FOR_SERIAL, ST(c, F(2.0), 1, V(k))));
  ir_stmt *s2 = SEQ(2, FOR(k1, I(4), IR_FOR_SERIAL, ST(c, F(1.0), 1, V(k1))),
                    FOR(k2, I(4), IR_FOR_SERIAL, ST(c, F(2.0), 1, V(k2))));
  ck_assert(ir_struct_equal_stmt(s1, s2));
  ck_assert(ir_struct_equal_stmt(s2, s1));
  /* but a use of the first loop's var inside the second loop is not */
  ir_stmt *s3 = SEQ(2, FOR(k1, I(4), IR_FOR_SERIAL, ST(c, F(1.0), 1, V(k1))),
                    FOR(k2, I(4), IR_FOR_SERIAL, ST(c, F(2.0), 1, V(k1))));
  ck_assert(!ir_struct_equal_stmt(s1, s3));
}
END_TEST

START_TEST(test_normalisations) {
  ir_buffer *c = BUF("C", ir_dt(IR_F32), 1, I(4));
  ir_stmt *x = ST(c, F(1.0), 1, I(0)), *y = ST(c, F(2.0), 1, I(1)), *z = ST(c, F(3.0), 1, I(2));
  /* nested and one-element sequences are flattened */
  ck_assert(ir_struct_equal_stmt(SEQ(2, SEQ(2, x, y), z), SEQ(3, x, y, z)));
  ck_assert(ir_struct_equal_stmt(SEQ(1, x), x));
  ck_assert(ir_struct_equal_stmt(SEQ(0), NULL));
  ck_assert(!ir_struct_equal_stmt(SEQ(2, x, y), SEQ(2, y, x)));
  /* annotations are a set keyed by key */
  ir_func *f = build_mm(&N1, MUT_ANNOT), *g = build_mm(&N2, MUT_ANNOT);
  ir_stmt *kg = g->body->u.realize.block->body->u.loop.body->u.loop.body;
  ck_assert_int_eq(kg->u.loop.nannot, 2);
  ir_annot tmp = kg->u.loop.annots[0];
  kg->u.loop.annots[0] = kg->u.loop.annots[1];
  kg->u.loop.annots[1] = tmp;
  ck_assert(ir_struct_equal_func(f, g));
  ck_assert_uint_eq(ir_struct_hash_func(f), ir_struct_hash_func(g));
  /* the hash of a nested seq equals the flat one's */
  ir_func *h1 = ir_func_new(A, "h"), *h2 = ir_func_new(A, "h");
  h1->nparams = h2->nparams = 1;
  h1->params = h2->params = &c;
  h1->body = root_block(SEQ(2, SEQ(2, x, y), z));
  h2->body = root_block(SEQ(3, x, y, z));
  ck_assert_uint_eq(ir_struct_hash_func(h1), ir_struct_hash_func(h2));
}
END_TEST

START_TEST(test_floats) {
  ck_assert(ir_struct_equal_expr(F(NAN), F(-NAN)));
  ck_assert_uint_eq(ir_struct_hash_expr(F(NAN)), ir_struct_hash_expr(F(-NAN)));
  ck_assert(!ir_struct_equal_expr(F(0.0), F(-0.0)));
  ck_assert_uint_ne(ir_struct_hash_expr(F(0.0)), ir_struct_hash_expr(F(-0.0)));
  /* an f32 literal is its float value: 0.1 and (float)0.1 are one literal */
  ck_assert(ir_struct_equal_expr(F(0.1), F((double)0.1f)));
  ck_assert_uint_eq(ir_struct_hash_expr(F(0.1)), ir_struct_hash_expr(F((double)0.1f)));
  ck_assert(!ir_struct_equal_expr(ir_float(A, ir_dt(IR_F64), 0.1),
                                  ir_float(A, ir_dt(IR_F64), (double)0.1f)));
  ck_assert(!ir_struct_equal_expr(F(1.0), ir_float(A, ir_dt(IR_F64), 1.0)));
  ck_assert(!ir_struct_equal_expr(I(1), ir_i32(A, 1)));
  ck_assert_uint_ne(ir_struct_hash_expr(I(1)), ir_struct_hash_expr(ir_i32(A, 1)));
  ck_assert(!ir_struct_equal_expr(ir_broadcast(A, F(1.0), 4), ir_broadcast(A, F(1.0), 8)));
}
END_TEST

/* The workload key must never change by accident: tuning logs are keyed by
 * it. If the serialization changes on purpose, update this value and say so
 * in the commit message. */
START_TEST(test_golden_hash) {
  char key[17];
  ir_workload_key(build_mm(&N1, MUT_NONE), key);
  ck_assert_str_eq(key, "6b23c2629451864e");
}
END_TEST

static Suite *struct_suite(void) {
  Suite *s = suite_create("ir_struct");
  TCase *tc = tcase_create("struct");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, test_equal_under_renaming);
  tcase_add_test(tc, test_each_mutation_differs);
  tcase_add_test(tc, test_explain_paths);
  tcase_add_test(tc, test_explain_seq);
  tcase_add_test(tc, test_inconsistent_mapping);
  tcase_add_test(tc, test_var_defined_twice);
  tcase_add_test(tc, test_normalisations);
  tcase_add_test(tc, test_floats);
  tcase_add_test(tc, test_golden_hash);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(struct_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failures = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failures ? 1 : 0;
}
