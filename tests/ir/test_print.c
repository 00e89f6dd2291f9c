/* test_print.c — the printer (ir/print.c): golden `func` text for hand-built
 * IR (docs/SCRIPT.md), expression precedence and literal spelling, and name
 * disambiguation. Goldens are the contract with the script parser: change
 * them only together with docs/SCRIPT.md. */
#include <check.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "ir/print.h"

#include "irb.h"

static char *to_str(const ir_func *f) {
  char *s = ir_func_to_string(f);
  ck_assert_ptr_nonnull(s);
  return s;
}

#define ck_golden(f, want)                  \
  do {                                      \
    char *got_ = to_str(f);                 \
    ck_assert_str_eq(got_, want);           \
    ts_free(got_);                           \
  } while (0)

static void expr_is(const ir_expr *e, const char *want) {
  char *s = ir_expr_to_string(e);
  ck_assert_ptr_nonnull(s);
  ck_assert_str_eq(s, want);
  ts_free(s);
}

/* The DSL matmul of docs/SCRIPT.md, built by hand. */
static ir_func *build_matmul(void) {
  ir_var *M = VAR("M"), *K = VAR("K"), *N = VAR("N");
  ir_buffer *a = BUF("A", ir_dt(IR_F32), 2, V(M), V(K));
  ir_buffer *b = BUF("B", ir_dt(IR_F32), 2, V(K), V(N));
  ir_buffer *c = BUF("C", ir_dt(IR_F32), 2, V(M), V(N));
  ir_var *i = VAR("i"), *j = VAR("j"), *k = VAR("k");
  ir_var *vi = VAR("vi"), *vj = VAR("vj"), *vk = VAR("vk");
  ir_block *blk = ir_block_new(A, "C");
  blk->niter = 3;
  blk->iters = TS_ANEWN(A, ir_iter_var, 3);
  blk->iters[0] = (ir_iter_var){vi, {I(0), V(M)}, IR_ITER_S};
  blk->iters[1] = (ir_iter_var){vj, {I(0), V(N)}, IR_ITER_S};
  blk->iters[2] = (ir_iter_var){vk, {I(0), V(K)}, IR_ITER_R};
  blk->nreads = 2;
  blk->reads = TS_ANEWN(A, ir_region, 2);
  blk->reads[0] = REG(a, 2, V(vi), V(vk));
  blk->reads[1] = REG(b, 2, V(vk), V(vj));
  blk->nwrites = 1;
  blk->writes = TS_ANEWN(A, ir_region, 1);
  blk->writes[0] = REG(c, 2, V(vi), V(vj));
  blk->init = ST(c, F(0.0), 2, V(vi), V(vj));
  blk->body = ST(c,
                 B2(IR_ADD, LD(c, 2, V(vi), V(vj)),
                    B2(IR_MUL, LD(a, 2, V(vi), V(vk)), LD(b, 2, V(vk), V(vj)))),
                 2, V(vi), V(vj));
  ir_expr *vals[3] = {V(i), V(j), V(k)};
  ir_stmt *nest = FOR(i, V(M), IR_FOR_SERIAL,
                      FOR(j, V(N), IR_FOR_SERIAL,
                          FOR(k, V(K), IR_FOR_SERIAL, ir_realize(A, blk, vals, NULL))));
  ir_func *f = ir_func_new(A, "matmul");
  f->nparams = 3;
  f->ninputs = 2;
  f->params = TS_ANEWN(A, ir_buffer *, 3);
  f->params[0] = a;
  f->params[1] = b;
  f->params[2] = c;
  f->nsyms = 3;
  f->syms = TS_ANEWN(A, ir_var *, 3);
  f->syms[0] = M;
  f->syms[1] = K;
  f->syms[2] = N;
  f->body = root_block(nest);
  return f;
}

/* ---- golden functions ------------------------------------------------------ */

START_TEST(test_matmul_golden) {
  ck_golden(build_matmul(),
            "func matmul(A: f32[M, K], B: f32[K, N]) -> C: f32[M, N] syms(M, K, N) {\n"
            "  block root() {\n"
            "    for i in serial(0, M) {\n"
            "      for j in serial(0, N) {\n"
            "        for k in serial(0, K) {\n"
            "          block C(vi: S(0, M) = i, vj: S(0, N) = j, vk: R(0, K) = k) {\n"
            "            reads A[vi, vk], B[vk, vj]\n"
            "            writes C[vi, vj]\n"
            "            init {\n"
            "              C[vi, vj] = 0.0\n"
            "            }\n"
            "            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]\n"
            "          }\n"
            "        }\n"
            "      }\n"
            "    }\n"
            "  }\n"
            "}\n");
}
END_TEST

START_TEST(test_parallel_vectorized_golden) {
  ir_buffer *a = BUF("A", ir_dt(IR_F32), 1, I(1024));
  ir_buffer *c = BUF("C", ir_dt(IR_F32), 1, I(1024));
  ir_var *io = VAR("io"), *ii = VAR("ii"), *tx = VAR("tx"), *u = ir_var_new(A, "u", ir_dt(IR_I32));
  ir_expr *idx = B2(IR_ADD, B2(IR_MUL, V(io), I(64)), V(ii));
  ir_stmt *inner = FOR(ii, I(64), IR_FOR_VECTORIZED,
                       ST(c, B2(IR_MUL, LD(a, 1, idx), F(2.0)), 1, idx));
  ir_stmt *outer = FOR(io, I(16), IR_FOR_PARALLEL, inner);
  ir_annot_set(A, &outer->u.loop.nannot, &outer->u.loop.annots,
               (ir_annot){.key = "pragma_auto_unroll_max_step", .kind = IR_ANN_INT, .v.i = 16});
  ir_annot_set(A, &outer->u.loop.nannot, &outer->u.loop.annots,
               (ir_annot){.key = "note", .kind = IR_ANN_STR, .v.s = "say \"hi\""});
  ir_annot_set(A, &outer->u.loop.nannot, &outer->u.loop.annots,
               (ir_annot){.key = "ratio", .kind = IR_ANN_FLOAT, .v.f = 0.25});
  ir_annot_set(A, &outer->u.loop.nannot, &outer->u.loop.annots,
               (ir_annot){.key = "extent", .kind = IR_ANN_EXPR, .v.e = B2(IR_MUL, V(io), I(2))});
  ir_stmt *thr = FOR(tx, I(32), IR_FOR_THREAD_BINDING,
                     ST(c, F(1.0), 1, V(tx)));
  thr->u.loop.thread = "threadIdx.x";
  ir_stmt *unr = ir_for(A, u, ir_i32(A, 0), ir_i32(A, 4), IR_FOR_UNROLLED,
                        ST(c, F(-1.5), 1, ir_cast(A, ir_dt(IR_I64), V(u))));
  ir_buffer **ps = TS_ANEWN(A, ir_buffer *, 2);
  ps[0] = a;
  ps[1] = c;
  ir_func *f = func_of("scale", 1, 1, ps, SEQ(3, outer, thr, unr));
  ir_annot_set(A, &f->nannot, &f->annots,
               (ir_annot){.key = "global_symbol", .kind = IR_ANN_STR, .v.s = "scale"});
  ck_golden(f,
            "func scale(A: f32[1024]) -> C: f32[1024] annot {global_symbol = \"scale\"} {\n"
            "  for io in parallel(0, 16) annot {pragma_auto_unroll_max_step = 16, "
            "note = \"say \\\"hi\\\"\", ratio = 0.25, extent = expr(io * 2)} {\n"
            "    for ii in vectorized(0, 64) {\n"
            "      C[io * 64 + ii] = A[io * 64 + ii] * 2.0\n"
            "    }\n"
            "  }\n"
            "  for tx in thread(0, 32, \"threadIdx.x\") {\n"
            "    C[tx] = 1.0\n"
            "  }\n"
            "  for u: i32 in unrolled(0i32, 4i32) {\n"
            "    C[i64(u)] = -1.5\n"
            "  }\n"
            "}\n");
}
END_TEST

START_TEST(test_if_let_allocate_golden) {
  ir_buffer *x = BUF("X", ir_dt(IR_F32), 1, I(8));
  ir_buffer *y = BUF("Y", ir_dt(IR_F32), 1, I(8));
  ir_buffer *t = BUF("T", ir_dt(IR_F32), 1, I(8));
  t->scope = "local";
  t->align = 64;
  ir_var *i = VAR("i"), *h = ir_var_new(A, "h", ir_dt(IR_F32));
  ir_stmt *st_t = ST(t, V(h), 1, V(i));
  ir_stmt *ifs = ir_if(A, B2(IR_LT, V(i), I(4)), st_t,
                       ST(t, F(0.0), 1, V(i)));
  ir_stmt *let = ir_let(A, h, B2(IR_MUL, LD(x, 1, V(i)), F(0.5)), ifs);
  ir_stmt *pst = ST(y, LD(t, 1, V(i)), 1, V(i));
  pst->u.store.predicate = B2(IR_NE, V(i), I(3));
  ir_stmt *loop = FOR(i, I(8), IR_FOR_SERIAL, SEQ(3, let, pst, ir_evaluate(A, LD(t, 1, I(0)))));
  ir_stmt *alloc = ir_allocate(A, t, SEQ(2, loop, ir_if(A, ir_bool(A, false), SEQ(0), NULL)));
  ir_buffer **ps = TS_ANEWN(A, ir_buffer *, 2);
  ps[0] = x;
  ps[1] = y;
  ck_golden(func_of("misc", 1, 1, ps, alloc),
            "func misc(X: f32[8]) -> Y: f32[8] {\n"
            "  allocate T: f32[8] scope(\"local\") align(64) {\n"
            "    for i in serial(0, 8) {\n"
            "      let h: f32 = X[i] * 0.5 {\n"
            "        if i < 4 {\n"
            "          T[i] = h\n"
            "        } else {\n"
            "          T[i] = 0.0\n"
            "        }\n"
            "      }\n"
            "      Y[i] = T[i] if i != 3\n"
            "      eval T[0]\n"
            "    }\n"
            "    if false {}\n"
            "  }\n"
            "}\n");
}
END_TEST

/* A block with alloc'd buffers, a predicate, opaque and i32 iter vars,
 * annotations, multi-element regions and a buffer with every decl field. */
START_TEST(test_block_fields_golden) {
  ir_var *n = VAR("n");
  ir_buffer *x = BUF("X", ir_dt(IR_F16), 2, V(n), I(16));
  x->strides = TS_ANEWN(A, ir_expr *, 2);
  x->strides[0] = I(32);
  x->strides[1] = I(1);
  x->elem_offset = I(4);
  x->align_factor = TS_ANEWN(A, int64_t, 2);
  x->align_offset = TS_ANEWN(A, int64_t, 2);
  x->align_factor[0] = 32;
  x->align_offset[0] = 8;
  ir_buffer *s = BUF("S", ir_dt_vec(IR_F32, 4), 1, I(4));
  s->scope = "shared";
  ir_buffer *o = BUF("O", ir_dt(IR_F16), 0);
  ir_var *i = VAR("i"), *vi = ir_var_new(A, "vi", ir_dt(IR_I32)), *vo = VAR("vo");
  ir_block *blk = ir_block_new(A, "B");
  blk->niter = 2;
  blk->iters = TS_ANEWN(A, ir_iter_var, 2);
  blk->iters[0] = (ir_iter_var){vi, {ir_i32(A, 0), ir_i32(A, 4)}, IR_ITER_S};
  blk->iters[1] = (ir_iter_var){vo, {I(0), V(n)}, IR_ITER_OPAQUE};
  blk->nalloc = 1;
  blk->allocs = TS_ANEWN(A, ir_buffer *, 1);
  blk->allocs[0] = s;
  blk->nreads = 1;
  blk->reads = TS_ANEWN(A, ir_region, 1);
  blk->reads[0] = (ir_region){x, 2, TS_ANEWN(A, ir_range, 2)};
  blk->reads[0].ranges[0] = (ir_range){V(vo), I(1)};
  blk->reads[0].ranges[1] = (ir_range){B2(IR_MUL, ir_cast(A, ir_dt(IR_I64), V(vi)), I(4)), I(4)};
  blk->nwrites = 1;
  blk->writes = TS_ANEWN(A, ir_region, 1);
  blk->writes[0] = (ir_region){o, 0, NULL};
  ir_annot_set(A, &blk->nannot, &blk->annots,
               (ir_annot){.key = "meta_schedule.tiling_structure", .kind = IR_ANN_STR, .v.s = "SSRSRS"});
  ir_annot_set(A, &blk->nannot, &blk->annots,
               (ir_annot){.key = "odd key", .kind = IR_ANN_INT, .v.i = -3});
  ir_stmt *st_s = ST(s, ir_broadcast(A, ir_float(A, ir_dt(IR_F32), 0.0), 4), 1,
                     ir_cast(A, ir_dt(IR_I64), V(vi)));
  ir_stmt *st_o = ST(o, ir_cast(A, ir_dt(IR_F16), LD(x, 2, V(vo), I(0))), 0);
  blk->body = SEQ(2, st_s, st_o);
  ir_expr *vals[2] = {ir_cast(A, ir_dt(IR_I32), V(i)), I(0)};
  ir_stmt *real = ir_realize(A, blk, vals, B2(IR_LT, V(i), V(n)));
  ir_stmt *loop = FOR(i, I(4), IR_FOR_SERIAL, real);
  ir_buffer **ps = TS_ANEWN(A, ir_buffer *, 2);
  ps[0] = x;
  ps[1] = o;
  ir_func *f = func_of("fields", 1, 1, ps, root_block(loop));
  f->nsyms = 1;
  f->syms = &n;
  ck_golden(f,
            "func fields(X: f16[n, 16] strides(32, 1) offset(4) storage_align((0, 32, 8))) "
            "-> O: f16[] syms(n) {\n"
            "  block root() {\n"
            "    for i in serial(0, 4) {\n"
            "      block B(vi: i32: S(0i32, 4i32) = i32(i), vo: O(0, n) = 0) where i < n {\n"
            "        alloc S: f32x4[4] scope(\"shared\")\n"
            "        reads X[vo, i64(vi) * 4:+4]\n"
            "        writes O[]\n"
            "        annot {meta_schedule.tiling_structure = \"SSRSRS\", \"odd key\" = -3}\n"
            "        S[i64(vi)] = broadcast(0.0, 4)\n"
            "        O[] = f16(X[vo, 0])\n"
            "      }\n"
            "    }\n"
            "  }\n"
            "}\n");
}
END_TEST

/* Names: a second `i` becomes i_1, a var reused in two sibling loops prints
 * as two names, an existing `i_1` does not collide, a reserved word is never
 * printed bare, and a buffer sharing a var's name is renamed too. */
START_TEST(test_name_disambiguation) {
  ir_buffer *c = BUF("C", ir_dt(IR_F32), 2, I(4), I(4));
  ir_buffer *i_buf = BUF("i", ir_dt(IR_F32), 1, I(4));
  ir_var *i1 = VAR("i"), *i2 = VAR("i"), *k = VAR("k"), *i_1 = VAR("i_1"), *kw = VAR("for"),
         *mn = VAR("min"), *bad = VAR("3x-y");
  ir_stmt *nest = FOR(i1, I(4), IR_FOR_SERIAL,
                      FOR(i2, I(4), IR_FOR_SERIAL, ST(c, LD(i_buf, 1, V(i2)), 2, V(i1), V(i2))));
  ir_stmt *sib1 = FOR(k, I(4), IR_FOR_SERIAL, ST(c, F(1.0), 2, V(k), V(k)));
  ir_stmt *sib2 = FOR(k, I(4), IR_FOR_SERIAL, ST(c, F(2.0), 2, V(k), I(0)));
  ir_stmt *other = FOR(i_1, I(2), IR_FOR_SERIAL,
                       FOR(kw, I(2), IR_FOR_SERIAL,
                           FOR(mn, I(2), IR_FOR_SERIAL,
                               FOR(bad, I(2), IR_FOR_SERIAL,
                                   ST(c, F(3.0), 2, B2(IR_ADD, V(kw), V(mn)), V(bad))))));
  ir_buffer **ps = TS_ANEWN(A, ir_buffer *, 2);
  ps[0] = i_buf;
  ps[1] = c;
  ck_golden(func_of("names", 1, 1, ps, SEQ(4, nest, sib1, sib2, other)),
            "func names(i: f32[4]) -> C: f32[4, 4] {\n"
            "  for i_1 in serial(0, 4) {\n"
            "    for i_2 in serial(0, 4) {\n"
            "      C[i_1, i_2] = i[i_2]\n"
            "    }\n"
            "  }\n"
            "  for k in serial(0, 4) {\n"
            "    C[k, k] = 1.0\n"
            "  }\n"
            "  for k_1 in serial(0, 4) {\n"
            "    C[k_1, 0] = 2.0\n"
            "  }\n"
            "  for i_1_1 in serial(0, 2) {\n"
            "    for for_1 in serial(0, 2) {\n"
            "      for min_1 in serial(0, 2) {\n"
            "        for _3x_y in serial(0, 2) {\n"
            "          C[for_1 + min_1, _3x_y] = 3.0\n"
            "        }\n"
            "      }\n"
            "    }\n"
            "  }\n"
            "}\n");
}
END_TEST

/* ---- expressions ------------------------------------------------------------ */

START_TEST(test_precedence) {
  ir_var *a = VAR("a"), *b = VAR("b"), *c = VAR("c");
  expr_is(B2(IR_SUB, V(a), B2(IR_SUB, V(b), V(c))), "a - (b - c)");
  expr_is(B2(IR_SUB, B2(IR_SUB, V(a), V(b)), V(c)), "a - b - c");
  expr_is(B2(IR_MUL, B2(IR_ADD, V(a), V(b)), V(c)), "(a + b) * c");
  expr_is(B2(IR_ADD, B2(IR_MUL, V(a), V(b)), V(c)), "a * b + c");
  expr_is(B2(IR_ADD, V(a), B2(IR_MUL, V(b), V(c))), "a + b * c");
  expr_is(B2(IR_FLOORDIV, V(a), B2(IR_MUL, V(b), V(c))), "a // (b * c)");
  expr_is(B2(IR_FLOORMOD, B2(IR_FLOORDIV, V(a), V(b)), V(c)), "a // b % c");
  expr_is(B2(IR_DIV, V(a), B2(IR_DIV, V(b), V(c))), "a / (b / c)");
  expr_is(B2(IR_OR, B2(IR_AND, B2(IR_LT, V(a), V(b)), B2(IR_GE, V(b), V(c))),
             B2(IR_EQ, V(a), V(c))),
          "a < b && b >= c || a == c");
  expr_is(B2(IR_AND, V(a), B2(IR_OR, V(b), V(c))), "a && (b || c)");
  expr_is(B2(IR_EQ, B2(IR_LT, V(a), V(b)), B2(IR_LT, V(b), V(c))), "a < b == b < c");
  expr_is(B2(IR_LT, B2(IR_LT, V(a), V(b)), V(c)), "a < b < c");
  expr_is(B2(IR_LT, V(a), B2(IR_LT, V(b), V(c))), "a < (b < c)");
  expr_is(ir_not(A, B2(IR_LT, V(a), V(b))), "!(a < b)");
  expr_is(ir_not(A, ir_not(A, V(a))), "!!a");
  expr_is(B2(IR_MUL, V(a), I(-3)), "a * -3");
  expr_is(B2(IR_SUB, V(a), I(-3)), "a - -3");
  expr_is(B2(IR_MUL, I(-3), V(a)), "-3 * a");
  expr_is(B2(IR_SUB, I(0), V(a)), "0 - a");
  expr_is(B2(IR_MIN, B2(IR_ADD, V(a), V(b)), B2(IR_MAX, V(c), I(0))), "min(a + b, max(c, 0))");
  expr_is(B2(IR_MUL, B2(IR_MIN, V(a), V(b)), V(c)), "min(a, b) * c");
  ir_expr *sel = ir_select(A, B2(IR_GT, V(a), I(0)), V(b), V(c));
  expr_is(B2(IR_ADD, sel, I(1)), "select(a > 0, b, c) + 1");
}
END_TEST

START_TEST(test_literals) {
  expr_is(I(42), "42");
  expr_is(I(-7), "-7");
  expr_is(ir_i32(A, 3), "3i32");
  expr_is(ir_int(A, ir_dt(IR_U8), 255), "255u8");
  expr_is(ir_int(A, ir_dt(IR_I8), -5), "-5i8");
  expr_is(ir_int(A, ir_dt(IR_U32), 4000000000LL), "4000000000u32");
  expr_is(ir_bool(A, true), "true");
  expr_is(ir_bool(A, false), "false");
  expr_is(I(INT64_MIN), "-9223372036854775808");
  expr_is(F(0.0), "0.0");
  expr_is(F(2.0), "2.0");
  expr_is(F(1.5), "1.5");
  expr_is(F(-0.0), "-0.0");
  expr_is(F(0.1), "0.1");
  expr_is(F(16777217.0), "16777216.0");
  expr_is(F(3.14159265358979), "3.1415927");
  expr_is(F(1.0f / 3.0f), "0.33333334");
  expr_is(F(1e-5), "1e-05");
  expr_is(F(3e20), "3e20");
  expr_is(F(1e-45), "1e-45");
  expr_is(ir_float(A, ir_dt(IR_F64), 0.5), "0.5f64");
  expr_is(ir_float(A, ir_dt(IR_F64), 0.1), "0.1f64");
  expr_is(ir_float(A, ir_dt(IR_F64), 1.0 / 3.0), "0.3333333333333333f64");
  expr_is(ir_float(A, ir_dt(IR_F64), (double)0.1f), "0.10000000149011612f64");
  expr_is(ir_float(A, ir_dt(IR_F64), 1e100), "1e100f64");
  expr_is(ir_float(A, ir_dt(IR_F16), 1.0), "1.0f16");
  expr_is(ir_float(A, ir_dt(IR_BF16), -2.5), "-2.5bf16");
  expr_is(F(INFINITY), "inf");
  expr_is(F(-INFINITY), "-inf");
  expr_is(F(NAN), "nan");
  expr_is(ir_float(A, ir_dt(IR_F64), INFINITY), "inf_f64");
  expr_is(ir_float(A, ir_dt(IR_F64), -INFINITY), "-inf_f64");
  expr_is(ir_float(A, ir_dt(IR_F16), NAN), "nan_f16");
}
END_TEST

START_TEST(test_calls_casts_vectors) {
  ir_var *x = ir_var_new(A, "x", ir_dt(IR_F32)), *i = VAR("i");
  ir_expr *ex = ir_call(A, IR_EXP, ir_dt(IR_F32), 1, (ir_expr *[]){V(x)});
  expr_is(ex, "exp(x)");
  expr_is(ir_call(A, IR_POW, ir_dt(IR_F32), 2, (ir_expr *[]){V(x), F(2.0)}), "pow(x, 2.0)");
  expr_is(ir_call(A, IR_FMA, ir_dt(IR_F32), 3, (ir_expr *[]){V(x), V(x), ex}), "fma(x, x, exp(x))");
  expr_is(ir_cast(A, ir_dt(IR_F32), V(i)), "f32(i)");
  expr_is(ir_cast(A, ir_dt(IR_F32), I(3)), "f32((3))");
  expr_is(ir_cast(A, ir_dt(IR_I32), I(-3)), "i32((-3))");
  expr_is(ir_cast(A, ir_dt(IR_F64), B2(IR_ADD, V(x), F(1.0))), "f64(x + 1.0)");
  expr_is(ir_ramp(A, B2(IR_MUL, V(i), I(8)), I(1), 8), "ramp(i * 8, 1, 8)");
  expr_is(ir_broadcast(A, V(x), 8), "broadcast(x, 8)");
  expr_is(ir_cast(A, ir_dt_vec(IR_F16, 8), ir_broadcast(A, V(x), 8)), "f16x8(broadcast(x, 8))");
  ir_buffer *z = BUF("Z", ir_dt(IR_F32), 0);
  expr_is(LD(z, 0), "Z[]");
  expr_is(ir_not(A, ir_bool(A, true)), "!true");
}
END_TEST

START_TEST(test_stmt_indent) {
  ir_buffer *c = BUF("C", ir_dt(IR_F32), 1, I(4));
  ir_var *i = VAR("i");
  ts_strbuf sb;
  ts_strbuf_init(&sb);
  ir_print_stmt(&sb, FOR(i, I(4), IR_FOR_SERIAL, ST(c, F(1.0), 1, V(i))), 2);
  ck_assert_str_eq(sb.data, "    for i in serial(0, 4) {\n"
                            "      C[i] = 1.0\n"
                            "    }\n");
  ts_strbuf_fini(&sb);
}
END_TEST

/* Printing under allocation failure returns NULL (or full text), never
 * crashes or returns a truncated string. */
START_TEST(test_oom) {
  ir_func *f = build_matmul();
  char *want = ir_func_to_string(f);
  ck_assert_ptr_nonnull(want);
  for (long n = 1; n < 40; n++) {
    ts_alloc_fail_after(n);
    char *s = ir_func_to_string(f);
    ts_alloc_fail_after(0);
    if (s) ck_assert_str_eq(s, want);
    ts_free(s);
  }
  ts_free(want);
}
END_TEST

static Suite *print_suite(void) {
  Suite *s = suite_create("ir_print");
  TCase *tc = tcase_create("print");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, test_matmul_golden);
  tcase_add_test(tc, test_parallel_vectorized_golden);
  tcase_add_test(tc, test_if_let_allocate_golden);
  tcase_add_test(tc, test_block_fields_golden);
  tcase_add_test(tc, test_name_disambiguation);
  tcase_add_test(tc, test_precedence);
  tcase_add_test(tc, test_literals);
  tcase_add_test(tc, test_calls_casts_vectors);
  tcase_add_test(tc, test_stmt_indent);
  tcase_add_test(tc, test_oom);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(print_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failures = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failures ? 1 : 0;
}
