/* test_ir.c — IR construction: dtypes, constructors, module container,
 * substitution with structural sharing, deep copy, symbolic-size binding,
 * annotations, visitors, and constructor behaviour under allocation failure. */
#include <check.h>
#include <string.h>

#include "ir/ir.h"

/* A matmul C[M,N] += A[M,K]*B[K,N] with symbolic sizes, built by hand. */
static ir_func *build_matmul(ts_arena *a) {
  ir_dtype i64 = ir_dt(IR_I64), f32 = ir_dt(IR_F32);
  ir_var *M = ir_var_new(a, "M", i64), *N = ir_var_new(a, "N", i64), *K = ir_var_new(a, "K", i64);
  ir_expr *sa[] = {ir_var_ref(a, M), ir_var_ref(a, K)}, *sb[] = {ir_var_ref(a, K), ir_var_ref(a, N)},
          *sc[] = {ir_var_ref(a, M), ir_var_ref(a, N)};
  ir_buffer *A = ir_buffer_new(a, "A", f32, 2, sa, NULL), *B = ir_buffer_new(a, "B", f32, 2, sb, NULL),
            *C = ir_buffer_new(a, "C", f32, 2, sc, NULL);
  ir_var *i = ir_var_new(a, "i", i64), *j = ir_var_new(a, "j", i64), *k = ir_var_new(a, "k", i64);
  ir_var *vi = ir_var_new(a, "vi", i64), *vj = ir_var_new(a, "vj", i64), *vk = ir_var_new(a, "vk", i64);
  ir_block *blk = ir_block_new(a, "C");
  blk->niter = 3;
  blk->iters = TS_ANEWN(a, ir_iter_var, 3);
  blk->iters[0] = (ir_iter_var){vi, {ir_i64(a, 0), ir_var_ref(a, M)}, IR_ITER_S};
  blk->iters[1] = (ir_iter_var){vj, {ir_i64(a, 0), ir_var_ref(a, N)}, IR_ITER_S};
  blk->iters[2] = (ir_iter_var){vk, {ir_i64(a, 0), ir_var_ref(a, K)}, IR_ITER_R};
  ir_expr *cij[] = {ir_var_ref(a, vi), ir_var_ref(a, vj)};
  ir_expr *aik[] = {ir_var_ref(a, vi), ir_var_ref(a, vk)};
  ir_expr *bkj[] = {ir_var_ref(a, vk), ir_var_ref(a, vj)};
  blk->init = ir_store(a, C, 2, cij, ir_float(a, f32, 0.0));
  blk->body = ir_store(a, C, 2, cij,
                       ir_binop(a, IR_ADD, ir_load(a, C, 2, cij),
                                ir_binop(a, IR_MUL, ir_load(a, A, 2, aik), ir_load(a, B, 2, bkj))));
  ir_expr *iv[] = {ir_var_ref(a, i), ir_var_ref(a, j), ir_var_ref(a, k)};
  ir_stmt *s = ir_realize(a, blk, iv, NULL);
  s = ir_for(a, k, ir_i64(a, 0), ir_var_ref(a, K), IR_FOR_SERIAL, s);
  s = ir_for(a, j, ir_i64(a, 0), ir_var_ref(a, N), IR_FOR_SERIAL, s);
  s = ir_for(a, i, ir_i64(a, 0), ir_var_ref(a, M), IR_FOR_SERIAL, s);
  ir_block *root = ir_block_new(a, "root");
  root->body = s;
  ir_func *f = ir_func_new(a, "matmul");
  f->nparams = 3;
  f->params = TS_ANEWN(a, ir_buffer *, 3);
  f->params[0] = A;
  f->params[1] = B;
  f->params[2] = C;
  f->ninputs = 2;
  f->nsyms = 3;
  f->syms = TS_ANEWN(a, ir_var *, 3);
  f->syms[0] = M;
  f->syms[1] = K;
  f->syms[2] = N;
  f->body = ir_realize(a, root, NULL, NULL);
  return f;
}

START_TEST(test_dtypes) {
  ir_dtype t;
  char buf[32];
  ck_assert(ir_dtype_parse("f32", &t) && t.code == IR_F32 && t.lanes == 1);
  ck_assert(ir_dtype_parse("i8x16", &t) && t.code == IR_I8 && t.lanes == 16);
  ck_assert(ir_dtype_parse("float16", &t) && t.code == IR_F16);
  ck_assert(ir_dtype_parse("bf16x8", &t) && t.code == IR_BF16 && t.lanes == 8);
  ck_assert(!ir_dtype_parse("f33", &t));
  ck_assert(!ir_dtype_parse("f32x", &t));
  ck_assert(!ir_dtype_parse("f32x0", &t));
  ck_assert(!ir_dtype_parse("f32x99999999", &t));
  ck_assert_str_eq(ir_dtype_str(ir_dt_vec(IR_F32, 8), buf, sizeof buf), "f32x8");
  ck_assert_int_eq(ir_dtype_bytes(ir_dt(IR_BOOL)), 1);
  ck_assert_int_eq(ir_dtype_bytes(ir_dt(IR_BF16)), 2);
  ck_assert(ir_dtype_is_float(ir_dt(IR_BF16)) && !ir_dtype_is_int(ir_dt(IR_BF16)));
  ck_assert(ir_dtype_is_int(ir_dt(IR_U8)) && !ir_dtype_is_signed(ir_dt(IR_U8)));
  ck_assert(!ir_dtype_is_int(ir_dt(IR_BOOL)));
  /* every table entry round-trips through its name */
  for (int c = 0; c < IR_DTYPE_COUNT; c++) {
    ck_assert(ir_dtype_parse(ir_dtype_code_name((ir_dtype_code)c), &t));
    ck_assert_int_eq(t.code, c);
  }
}
END_TEST

START_TEST(test_op_tables) {
  ck_assert_str_eq(ir_binop_symbol(IR_FLOORDIV), "//");
  ck_assert_ptr_null(ir_binop_symbol(IR_MIN));
  ck_assert_int_gt(ir_binop_prec(IR_MUL), ir_binop_prec(IR_ADD));
  ck_assert(ir_is_cmp(IR_LE) && !ir_is_cmp(IR_AND));
  ir_intrin op;
  ck_assert(ir_intrin_lookup("sigmoid", &op) && op == IR_SIGMOID);
  ck_assert_int_eq(ir_intrin_nargs(IR_FMA), 3);
  ck_assert(!ir_intrin_lookup("nope", &op));
  ck_assert_str_eq(ir_for_kind_name(IR_FOR_VECTORIZED), "vectorized");
}
END_TEST

START_TEST(test_constructor_types) {
  ts_arena a;
  ts_arena_init(&a);
  ir_expr *x = ir_var_ref(&a, ir_var_new(&a, "x", ir_dt(IR_I32)));
  ck_assert_int_eq(ir_binop(&a, IR_LT, x, ir_i32(&a, 3))->dtype.code, IR_BOOL);
  ck_assert_int_eq(ir_binop(&a, IR_ADD, x, ir_i32(&a, 3))->dtype.code, IR_I32);
  ck_assert_int_eq(ir_ramp(&a, x, ir_i32(&a, 1), 8)->dtype.lanes, 8);
  ck_assert_ptr_null(ir_binop(&a, IR_ADD, x, NULL)); /* NULL propagates */
  int64_t v;
  ck_assert(ir_as_int(ir_i64(&a, -5), &v) && v == -5);
  ck_assert(!ir_as_int(x, &v));
  ts_arena_fini(&a);
}
END_TEST

/* ir_fold_int: constant-only integer expressions fold; a variable, or a value
 * that overflows int64 (a hostile shape), does not. */
START_TEST(test_fold_int) {
  ts_arena a;
  ts_arena_init(&a);
  int64_t v = 0;
  ir_expr *x = ir_var_ref(&a, ir_var_new(&a, "x", ir_dt(IR_I64)));
  ck_assert(ir_fold_int(ir_binop(&a, IR_MUL, ir_i64(&a, 1), ir_i64(&a, 64)), &v) && v == 64);
  ck_assert(ir_fold_int(ir_binop(&a, IR_FLOORDIV, ir_i64(&a, -7), ir_i64(&a, 2)), &v) && v == -4);
  ck_assert(ir_fold_int(ir_binop(&a, IR_FLOORMOD, ir_i64(&a, -7), ir_i64(&a, 2)), &v) && v == 1);
  ck_assert(!ir_fold_int(ir_binop(&a, IR_MUL, ir_i64(&a, 2), x), &v));
  ck_assert(!ir_fold_int(ir_binop(&a, IR_MUL, ir_i64(&a, INT64_C(1) << 62), ir_i64(&a, 4)), &v));
  ck_assert(!ir_fold_int(ir_binop(&a, IR_ADD, ir_i64(&a, INT64_MAX), ir_i64(&a, 1)), &v));
  ck_assert(!ir_fold_int(ir_binop(&a, IR_SUB, ir_i64(&a, INT64_MIN), ir_i64(&a, 1)), &v));
  ts_arena_fini(&a);
}
END_TEST

START_TEST(test_module) {
  ir_module *m = ir_module_new();
  for (int i = 0; i < 10; i++) {
    ir_func *f = ir_func_new(m->arena, i == 7 ? "seven" : "other");
    ck_assert_int_eq(ir_module_add(m, f), TS_OK);
  }
  ck_assert_int_eq(m->nfuncs, 10);
  ck_assert_ptr_nonnull(ir_module_get(m, "seven"));
  ck_assert_ptr_null(ir_module_get(m, "missing"));
  ir_module_free(m);
}
END_TEST

START_TEST(test_subst_sharing) {
  ts_arena a;
  ts_arena_init(&a);
  ir_func *f = build_matmul(&a);
  ir_var *other = ir_var_new(&a, "unused", ir_dt(IR_I64));
  ir_var_map m;
  ir_var_map_init(&m);
  ir_var_map_put(&m, other, ir_i64(&a, 3));
  /* nothing to substitute: the same tree comes back */
  ck_assert_ptr_eq(ir_subst_stmt(&a, f->body, &m), f->body);
  /* substitute K := 7: loops change, the tree is new, the original intact */
  ir_var_map_put(&m, f->syms[1], ir_i64(&a, 7));
  ir_stmt *s2 = ir_subst_stmt(&a, f->body, &m);
  ck_assert_ptr_ne(s2, f->body);
  ck_assert(ir_stmt_uses_var(f->body, f->syms[1]));
  ck_assert(!ir_stmt_uses_var(s2, f->syms[1]));
  ck_assert(ir_stmt_uses_var(s2, f->syms[0]));
  ir_var_map_fini(&m);
  ts_arena_fini(&a);
}
END_TEST

static bool count_loads(void *ctx, const ir_expr *e) {
  if (e->kind == IR_LOAD) (*(int *)ctx)++;
  return true;
}

START_TEST(test_visitor) {
  ts_arena a;
  ts_arena_init(&a);
  ir_func *f = build_matmul(&a);
  int n = 0;
  ir_visitor v = {.expr = count_loads, .ctx = &n};
  ir_visit_stmt(&v, f->body);
  ck_assert_int_eq(n, 3); /* C, A, B in the update */
  ts_arena_fini(&a);
}
END_TEST

START_TEST(test_deep_copy_and_bind) {
  ts_arena a, b;
  ts_arena_init(&a);
  ts_arena_init(&b);
  ir_func *f = build_matmul(&a);
  ir_func *g = ir_func_copy(&b, f);
  ck_assert_ptr_nonnull(g);
  ck_assert_ptr_ne(g->params[0], f->params[0]);
  ck_assert_str_eq(g->params[0]->name, "A");
  ck_assert_ptr_ne(g->syms[0], f->syms[0]);
  /* the copy refers to its own syms, not the original's */
  ck_assert(!ir_stmt_uses_var(g->body, f->syms[0]));
  ck_assert(ir_stmt_uses_var(g->body, g->syms[0]));
  ts_arena_fini(&a); /* the copy survives the original's arena */
  ck_assert_str_eq(g->body->u.realize.block->name, "root");

  const char *names[] = {"M", "N"};
  int64_t vals[] = {4, 5};
  ts_diag d;
  ts_diag_clear(&d);
  ir_func *h = ir_func_bind_syms(&b, g, 2, names, vals, &d);
  ck_assert_ptr_nonnull(h);
  ck_assert_int_eq(h->nsyms, 1);
  ck_assert_str_eq(h->syms[0]->name, "K");
  int64_t v;
  ck_assert(ir_as_int(h->params[2]->shape[0], &v) && v == 4);
  ck_assert(ir_as_int(h->params[2]->shape[1], &v) && v == 5);
  ck_assert_int_eq(ir_buffer_const_size(h->params[2]), 20);
  ck_assert_int_eq(ir_buffer_const_size(h->params[0]), -1);
  const ir_stmt *loop = h->body->u.realize.block->body;
  ck_assert(ir_as_int(loop->u.loop.extent, &v) && v == 4);

  const char *bad[] = {"Q"};
  ck_assert_ptr_null(ir_func_bind_syms(&b, g, 1, bad, vals, &d));
  ck_assert_int_eq(d.code, TS_ENOTFOUND);
  ck_assert_ptr_nonnull(strstr(d.msg, "valid: M, K, N"));
  ts_arena_fini(&b);
}
END_TEST

START_TEST(test_subst_buffer) {
  ts_arena a;
  ts_arena_init(&a);
  ir_func *f = build_matmul(&a);
  ir_buffer *C2 = ir_buffer_new(&a, "C_local", ir_dt(IR_F32), 2, f->params[2]->shape, "local");
  ir_stmt *s = ir_subst_buffer(&a, f->body, f->params[2], C2);
  const ir_stmt *x = s->u.realize.block->body;
  while (x->kind == IR_FOR) x = x->u.loop.body;
  ck_assert_ptr_eq(x->u.realize.block->body->u.store.buf, C2);
  ck_assert_ptr_eq(x->u.realize.block->init->u.store.buf, C2);
  ts_arena_fini(&a);
}
END_TEST

START_TEST(test_annots) {
  ts_arena a;
  ts_arena_init(&a);
  int n = 0;
  ir_annot *anns = NULL;
  ck_assert_int_eq(ir_annot_set(&a, &n, &anns, (ir_annot){.key = "unroll", .kind = IR_ANN_INT, .v.i = 16}), TS_OK);
  ck_assert_int_eq(ir_annot_set(&a, &n, &anns, (ir_annot){.key = "tag", .kind = IR_ANN_STR, .v.s = "x"}), TS_OK);
  ck_assert_int_eq(ir_annot_set(&a, &n, &anns, (ir_annot){.key = "unroll", .kind = IR_ANN_INT, .v.i = 64}), TS_OK);
  ck_assert_int_eq(n, 2);
  ck_assert_int_eq(ir_annot_find(n, anns, "unroll")->v.i, 64);
  ck_assert_ptr_null(ir_annot_find(n, anns, "missing"));
  ts_arena_fini(&a);
}
END_TEST

START_TEST(test_oom_constructors) {
  /* Fail each allocation in turn while building: constructors return NULL
   * (propagated up), never crash. */
  for (long k = 1; k < 40; k++) {
    ts_arena a;
    ts_arena_init(&a);
    ts_alloc_fail_after(k);
    ir_func *f = build_matmul(&a);
    (void)f;
    ts_alloc_fail_after(0);
    ts_arena_fini(&a);
  }
}
END_TEST

int main(void) {
  Suite *s = suite_create("ir");
  TCase *tc = tcase_create("ir");
  tcase_add_test(tc, test_dtypes);
  tcase_add_test(tc, test_op_tables);
  tcase_add_test(tc, test_constructor_types);
  tcase_add_test(tc, test_module);
  tcase_add_test(tc, test_subst_sharing);
  tcase_add_test(tc, test_visitor);
  tcase_add_test(tc, test_deep_copy_and_bind);
  tcase_add_test(tc, test_subst_buffer);
  tcase_add_test(tc, test_annots);
  tcase_add_test(tc, test_oom_constructors);
  tcase_add_test(tc, test_fold_int);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int nf = srunner_ntests_failed(sr);
  srunner_free(sr);
  return nf ? 1 : 0;
}
