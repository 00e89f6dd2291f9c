/* test_roundtrip.c — print -> parse -> compare: every function the printer
 * writes must read back (ir_parse_func) as a structurally equal function with
 * the same hash, and printing the result must give the same text again.
 * Hand-built functions cover every expression and statement kind and every
 * optional field of the `func` form (docs/SCRIPT.md); then every built-in
 * workload, at its default parameters, goes through the same loop. */
#include <check.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "ir/parse.h"
#include "ir/print.h"
#include "ir/struct.h"
#include "ir/workloads/workloads.h"

#include "irb.h"

static ir_buffer **bufs(int n, ...) {
  va_list ap;
  va_start(ap, n);
  ir_buffer **b = TS_ANEWN(A, ir_buffer *, n);
  for (int i = 0; i < n; i++) b[i] = va_arg(ap, ir_buffer *);
  va_end(ap);
  return b;
}

static void annot(int *n, ir_annot **anns, ir_annot a) {
  ck_assert_int_eq(ir_annot_set(A, n, anns, a), TS_OK);
}

/* print -> parse -> struct-equal, equal hashes, and print(parse(print(f)))
 * == print(f). */
static void roundtrip(const ir_func *f) {
  char *text = ir_func_to_string(f);
  ck_assert_ptr_nonnull(text);
  ir_func *g = NULL;
  ts_diag d;
  ts_diag_clear(&d);
  ts_status st = ir_parse_func(A, text, strlen(text), "<roundtrip>", &g, &d);
  ck_assert_msg(st == TS_OK, "parse failed (%s): %s\n--- text ---\n%s", ts_strerror(st), d.msg,
                text);
  ck_assert_ptr_nonnull(g);
  char why[1024];
  ck_assert_msg(ir_struct_equal_func_explain(f, g, why, sizeof why),
                "not equal after round trip: %s\n--- text ---\n%s", why, text);
  ck_assert_msg(ir_struct_equal_func(g, f), "equality not symmetric\n%s", text);
  ck_assert_msg(ir_struct_hash_func(f) == ir_struct_hash_func(g), "hash differs\n%s", text);
  char *again = ir_func_to_string(g);
  ck_assert_ptr_nonnull(again);
  ck_assert_str_eq(again, text);
  ts_free(again);
  ts_free(text);
}

/* ---- hand-built functions -------------------------------------------------- */

/* Reduction block with init, regions, syms, serial nest. */
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
  ir_func *f = func_of("matmul", 2, 1, bufs(3, a, b, c), root_block(nest));
  f->nsyms = 3;
  f->syms = TS_ANEWN(A, ir_var *, 3);
  f->syms[0] = M;
  f->syms[1] = K;
  f->syms[2] = N;
  return f;
}

/* Every loop kind, thread tags, loop/func annotations of every value kind,
 * an i32 loop var. */
static ir_func *build_loops(void) {
  ir_buffer *a = BUF("A", ir_dt(IR_F32), 1, I(1024));
  ir_buffer *c = BUF("C", ir_dt(IR_F32), 1, I(1024));
  ir_var *io = VAR("io"), *ii = VAR("ii"), *bx = VAR("bx"), *tx = VAR("tx");
  ir_var *u = ir_var_new(A, "u", ir_dt(IR_I32));
  ir_expr *idx = B2(IR_ADD, B2(IR_MUL, V(io), I(64)), V(ii));
  ir_stmt *inner = FOR(ii, I(64), IR_FOR_VECTORIZED, ST(c, B2(IR_MUL, LD(a, 1, idx), F(2.0)), 1, idx));
  ir_stmt *outer = FOR(io, I(16), IR_FOR_PARALLEL, inner);
  annot(&outer->u.loop.nannot, &outer->u.loop.annots,
        (ir_annot){.key = "pragma_auto_unroll_max_step", .kind = IR_ANN_INT, .v.i = 16});
  annot(&outer->u.loop.nannot, &outer->u.loop.annots,
        (ir_annot){.key = "neg", .kind = IR_ANN_INT, .v.i = -7});
  annot(&outer->u.loop.nannot, &outer->u.loop.annots,
        (ir_annot){.key = "note", .kind = IR_ANN_STR, .v.s = "say \"hi\" \\ bye"});
  annot(&outer->u.loop.nannot, &outer->u.loop.annots,
        (ir_annot){.key = "ratio", .kind = IR_ANN_FLOAT, .v.f = 0.1});
  annot(&outer->u.loop.nannot, &outer->u.loop.annots,
        (ir_annot){.key = "big", .kind = IR_ANN_FLOAT, .v.f = -1e300});
  annot(&outer->u.loop.nannot, &outer->u.loop.annots,
        (ir_annot){.key = "inf", .kind = IR_ANN_FLOAT, .v.f = INFINITY});
  annot(&outer->u.loop.nannot, &outer->u.loop.annots,
        (ir_annot){.key = "odd key!", .kind = IR_ANN_EXPR, .v.e = B2(IR_MUL, V(io), I(2))});
  ir_stmt *thr = FOR(bx, I(8), IR_FOR_THREAD_BINDING,
                     FOR(tx, I(128), IR_FOR_THREAD_BINDING,
                         ST(c, F(1.0), 1, B2(IR_ADD, B2(IR_MUL, V(bx), I(128)), V(tx)))));
  thr->u.loop.thread = "blockIdx.x";
  thr->u.loop.body->u.loop.thread = "threadIdx.x";
  ir_stmt *unr = ir_for(A, u, ir_i32(A, 0), ir_i32(A, 4), IR_FOR_UNROLLED,
                        ST(c, F(-1.5), 1, ir_cast(A, ir_dt(IR_I64), V(u))));
  ir_stmt *ser = ir_for(A, VAR("s"), I(2), I(3), IR_FOR_SERIAL, SEQ(0));
  ir_func *f = func_of("loops", 1, 1, bufs(2, a, c), SEQ(4, outer, thr, unr, ser));
  annot(&f->nannot, &f->annots, (ir_annot){.key = "global_symbol", .kind = IR_ANN_STR, .v.s = "loops"});
  annot(&f->nannot, &f->annots, (ir_annot){.key = "tir.noalias", .kind = IR_ANN_INT, .v.i = 1});
  return f;
}

/* if/else (and without else, and empty), let, allocate, eval, a predicated
 * store, an if directly after a predicated store. */
static ir_func *build_stmts(void) {
  ir_buffer *x = BUF("X", ir_dt(IR_F32), 1, I(8));
  ir_buffer *y = BUF("Y", ir_dt(IR_F32), 1, I(8));
  ir_buffer *t = BUF("T", ir_dt(IR_F32), 1, I(8));
  t->scope = "local";
  t->align = 64;
  ir_var *i = VAR("i"), *h = ir_var_new(A, "h", ir_dt(IR_F32)), *w = ir_var_new(A, "w", ir_dt(IR_I32));
  ir_stmt *ifs = ir_if(A, B2(IR_LT, V(i), I(4)), ST(t, V(h), 1, V(i)), ST(t, F(0.0), 1, V(i)));
  ir_stmt *let = ir_let(A, h, B2(IR_MUL, LD(x, 1, V(i)), F(0.5)), ifs);
  ir_stmt *pst = ST(y, LD(t, 1, V(i)), 1, V(i));
  pst->u.store.predicate = B2(IR_NE, V(i), I(3));
  ir_stmt *after = ir_if(A, B2(IR_EQ, V(i), I(0)), ST(y, F(9.0), 1, V(i)), NULL);
  ir_stmt *let2 = ir_let(A, w, ir_i32(A, 7), ir_evaluate(A, B2(IR_ADD, V(w), ir_i32(A, 1))));
  ir_stmt *loop = FOR(i, I(8), IR_FOR_SERIAL,
                      SEQ(5, let, pst, after, ir_evaluate(A, LD(t, 1, I(0))), let2));
  ir_stmt *empty_then = ir_if(A, ir_bool(A, false), SEQ(0), ST(y, F(1.0), 1, I(0)));
  ir_stmt *empty_else = ir_if(A, ir_bool(A, true), ST(y, F(2.0), 1, I(1)), SEQ(0));
  ir_stmt *alloc = ir_allocate(A, t, SEQ(4, loop, ir_if(A, ir_bool(A, false), SEQ(0), NULL),
                                       empty_then, empty_else));
  return func_of("stmts", 1, 1, bufs(2, x, y), alloc);
}

/* A block with alloc'd buffers, a predicate, opaque and i32 iter vars,
 * annotations, ranged and 0-d regions, and buffers with every decl field. */
static ir_func *build_block_fields(void) {
  ir_var *n = VAR("n"), *m32 = ir_var_new(A, "m", ir_dt(IR_I32));
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
  ir_buffer *z = BUF("Z", ir_dt(IR_I32), 1, ir_cast(A, ir_dt(IR_I64), V(m32)));
  z->elem_offset = I(0);
  ir_var *i = VAR("i"), *vi = ir_var_new(A, "vi", ir_dt(IR_I32)), *vo = VAR("vo");
  ir_block *blk = ir_block_new(A, "B");
  blk->niter = 2;
  blk->iters = TS_ANEWN(A, ir_iter_var, 2);
  blk->iters[0] = (ir_iter_var){vi, {ir_i32(A, 0), ir_i32(A, 4)}, IR_ITER_S};
  blk->iters[1] = (ir_iter_var){vo, {I(0), V(n)}, IR_ITER_OPAQUE};
  blk->nalloc = 2;
  blk->allocs = TS_ANEWN(A, ir_buffer *, 2);
  blk->allocs[0] = s;
  ir_buffer *l = BUF("L", ir_dt(IR_F32), 2, I(4), I(4));
  l->scope = "local";
  blk->allocs[1] = l;
  blk->nreads = 2;
  blk->reads = TS_ANEWN(A, ir_region, 2);
  blk->reads[0] = (ir_region){x, 2, TS_ANEWN(A, ir_range, 2)};
  blk->reads[0].ranges[0] = (ir_range){V(vo), I(1)};
  blk->reads[0].ranges[1] = (ir_range){B2(IR_MUL, ir_cast(A, ir_dt(IR_I64), V(vi)), I(4)), I(4)};
  blk->reads[1] = (ir_region){z, 1, TS_ANEWN(A, ir_range, 1)};
  blk->reads[1].ranges[0] = (ir_range){ir_i32(A, 0), ir_i32(A, 1)};
  blk->nwrites = 1;
  blk->writes = TS_ANEWN(A, ir_region, 1);
  blk->writes[0] = (ir_region){o, 0, NULL};
  annot(&blk->nannot, &blk->annots,
        (ir_annot){.key = "meta_schedule.tiling_structure", .kind = IR_ANN_STR, .v.s = "SSRSRS"});
  annot(&blk->nannot, &blk->annots, (ir_annot){.key = "vi_expr", .kind = IR_ANN_EXPR, .v.e = V(vi)});
  ir_stmt *st_s = ST(s, ir_broadcast(A, ir_float(A, ir_dt(IR_F32), 0.0), 4), 1,
                     ir_cast(A, ir_dt(IR_I64), V(vi)));
  ir_stmt *st_l = ST(l, F(1.0), 2, I(0), I(0));
  ir_stmt *st_o = ST(o, ir_cast(A, ir_dt(IR_F16), LD(x, 2, V(vo), I(0))), 0);
  blk->body = SEQ(3, st_s, st_l, st_o);
  ir_expr *vals[2] = {ir_cast(A, ir_dt(IR_I32), V(i)), I(0)};
  ir_stmt *real = ir_realize(A, blk, vals, B2(IR_LT, V(i), V(n)));
  ir_stmt *loop = FOR(i, I(4), IR_FOR_SERIAL, real);
  ir_func *f = func_of("fields", 2, 1, bufs(3, x, z, o), root_block(loop));
  f->nsyms = 2;
  f->syms = TS_ANEWN(A, ir_var *, 2);
  f->syms[0] = n;
  f->syms[1] = m32;
  return f;
}

/* Every expression kind and literal spelling, as eval statements. */
static ir_func *build_exprs(void) {
  ir_buffer *c = BUF("C", ir_dt(IR_F32), 1, I(16));
  ir_buffer *z = BUF("Z", ir_dt(IR_F32), 0);
  ir_var *a = VAR("a"), *b = VAR("b"), *x = ir_var_new(A, "x", ir_dt(IR_F32));
  ir_var *p = ir_var_new(A, "p", ir_dt(IR_BOOL));
  ir_var *d = ir_var_new(A, "d", ir_dt(IR_F64));
  ir_expr *e[64];
  int n = 0;
  static const ir_expr_kind bins[] = {IR_ADD, IR_SUB, IR_MUL, IR_DIV, IR_FLOORDIV, IR_FLOORMOD,
                                      IR_MIN, IR_MAX, IR_EQ, IR_NE, IR_LT, IR_LE, IR_GT, IR_GE};
  for (size_t k = 0; k < sizeof bins / sizeof *bins; k++)
    e[n++] = B2(bins[k], B2(IR_SUB, V(a), V(b)), B2(IR_ADD, V(b), I(1)));
  e[n++] = B2(IR_SUB, V(a), B2(IR_SUB, V(b), I(-3)));
  e[n++] = B2(IR_MUL, I(-3), B2(IR_FLOORMOD, V(a), B2(IR_FLOORDIV, V(b), I(2))));
  e[n++] = B2(IR_OR, B2(IR_AND, V(p), ir_not(A, V(p))), B2(IR_AND, ir_bool(A, false), V(p)));
  e[n++] = B2(IR_AND, V(p), B2(IR_OR, V(p), ir_bool(A, true)));
  e[n++] = B2(IR_EQ, B2(IR_LT, V(a), V(b)), B2(IR_GE, V(a), I(0)));
  e[n++] = B2(IR_LT, B2(IR_LT, V(a), V(b)), V(p));
  e[n++] = ir_not(A, B2(IR_LT, V(a), V(b)));
  e[n++] = ir_select(A, B2(IR_GT, V(a), I(0)), V(x), F(-0.0));
  e[n++] = ir_cast(A, ir_dt(IR_F32), I(3));
  e[n++] = ir_cast(A, ir_dt(IR_I32), I(-3));
  e[n++] = ir_cast(A, ir_dt(IR_F64), B2(IR_ADD, V(x), F(1.0)));
  e[n++] = B2(IR_ADD, V(d), ir_float(A, ir_dt(IR_F64), 0.1));
  e[n++] = ir_call(A, IR_EXP, ir_dt(IR_F32), 1, (ir_expr *[]){V(x)});
  e[n++] = ir_call(A, IR_POW, ir_dt(IR_F32), 2, (ir_expr *[]){V(x), F(2.0)});
  e[n++] = ir_call(A, IR_FMA, ir_dt(IR_F32), 3, (ir_expr *[]){V(x), V(x), F(1e-5)});
  static const ir_intrin un[] = {IR_LOG, IR_SQRT, IR_RSQRT, IR_TANH, IR_ERF, IR_SIGMOID, IR_ABS};
  for (size_t k = 0; k < sizeof un / sizeof *un; k++)
    e[n++] = ir_call(A, un[k], ir_dt(IR_F32), 1, (ir_expr *[]){B2(IR_MUL, V(x), F(0.5))});
  e[n++] = ir_ramp(A, B2(IR_MUL, V(a), I(8)), I(1), 8);
  e[n++] = LD(c, 1, ir_ramp(A, I(0), I(2), 8));
  e[n++] = ir_broadcast(A, V(x), 8);
  e[n++] = ir_cast(A, ir_dt_vec(IR_F16, 8), ir_broadcast(A, V(x), 8));
  e[n++] = B2(IR_ADD, LD(z, 0), LD(c, 1, V(a)));
  e[n++] = B2(IR_ADD, ir_int(A, ir_dt(IR_U8), 255), ir_int(A, ir_dt(IR_U8), 1));
  e[n++] = B2(IR_ADD, ir_int(A, ir_dt(IR_U32), 4000000000LL), ir_int(A, ir_dt(IR_U32), 0));
  e[n++] = B2(IR_SUB, ir_int(A, ir_dt(IR_I8), -5), ir_int(A, ir_dt(IR_I16), 300));
  e[n++] = B2(IR_ADD, I(INT64_MIN), I(INT64_MAX));
  e[n++] = B2(IR_ADD, F(INFINITY), F(-INFINITY));
  e[n++] = B2(IR_ADD, F(NAN), F(3e20));
  e[n++] = B2(IR_ADD, ir_float(A, ir_dt(IR_F64), -INFINITY), ir_float(A, ir_dt(IR_F64), 1e100));
  e[n++] = B2(IR_ADD, ir_float(A, ir_dt(IR_F16), 1.0), ir_float(A, ir_dt(IR_F16), NAN));
  e[n++] = B2(IR_ADD, ir_float(A, ir_dt(IR_BF16), -2.5), ir_float(A, ir_dt(IR_BF16), INFINITY));
  ck_assert_int_le(n, 64);
  ir_stmt **ss = TS_ANEWN(A, ir_stmt *, n + 1);
  for (int k = 0; k < n; k++) ss[k] = ir_evaluate(A, e[k]);
  ss[n] = ST(c, F(0.1), 1, I(0));
  ir_stmt *body = ir_let(A, a, I(1),
                         ir_let(A, b, I(2),
                                ir_let(A, x, F(0.5),
                                       ir_let(A, p, ir_bool(A, true),
                                              ir_let(A, d, ir_float(A, ir_dt(IR_F64), 2.0),
                                                     ir_seq(A, n + 1, ss))))));
  return func_of("exprs", 1, 1, bufs(2, z, c), body);
}

/* Names that need disambiguation: duplicates, a var defined twice, an
 * existing suffix, keywords and builtins, an invalid identifier. */
static ir_func *build_names(void) {
  ir_buffer *c = BUF("C", ir_dt(IR_F32), 2, I(4), I(4));
  ir_buffer *i_buf = BUF("i", ir_dt(IR_F32), 1, I(4));
  ir_buffer *kw_buf = BUF("for", ir_dt(IR_F32), 1, I(4));
  ir_var *i1 = VAR("i"), *i2 = VAR("i"), *k = VAR("k"), *i_1 = VAR("i_1"), *kw = VAR("for"),
         *mn = VAR("min"), *bad = VAR("3x-y"), *tr = VAR("true"), *dt = VAR("f32"),
         *inf = VAR("inf_f64"), *s = VAR("strides");
  ir_stmt *nest = FOR(i1, I(4), IR_FOR_SERIAL,
                      FOR(i2, I(4), IR_FOR_SERIAL,
                          ST(c, B2(IR_ADD, LD(i_buf, 1, V(i2)), LD(kw_buf, 1, V(i1))), 2, V(i1),
                             V(i2))));
  ir_stmt *sib1 = FOR(k, I(4), IR_FOR_SERIAL, ST(c, F(1.0), 2, V(k), V(k)));
  ir_stmt *sib2 = FOR(k, I(4), IR_FOR_SERIAL, ST(c, F(2.0), 2, V(k), I(0)));
  ir_stmt *other = FOR(i_1, I(2), IR_FOR_SERIAL,
                       FOR(kw, I(2), IR_FOR_SERIAL,
                           FOR(mn, I(2), IR_FOR_SERIAL,
                               FOR(bad, I(2), IR_FOR_SERIAL,
                                   ST(c, F(3.0), 2, B2(IR_ADD, V(kw), V(mn)), V(bad))))));
  ir_stmt *lets = ir_let(A, tr, I(1), ir_let(A, dt, I(2), ir_let(A, inf, I(3), ir_let(A, s, I(0),
      ST(c, F(4.0), 2, B2(IR_ADD, V(tr), V(dt)), B2(IR_SUB, V(inf), V(s)))))));
  /* a buffer allocated twice by one allocate node in two places */
  ir_buffer *t = BUF("T", ir_dt(IR_F32), 1, I(4));
  ir_stmt *al = ir_allocate(A, t, ST(t, F(5.0), 1, I(0)));
  return func_of("names", 2, 1, bufs(3, i_buf, kw_buf, c), SEQ(6, nest, sib1, sib2, other, lets,
                                                                  SEQ(2, al, al)));
}

/* Random float literals (any bit pattern: subnormals, huge, negative zero,
 * inf, NaN) of every float dtype, and random integers of every int dtype:
 * the shortest-digits spelling must read back to the same value. */
static ir_func *build_random_literals(uint64_t seed) {
  ts_rng r;
  ts_rng_seed(&r, seed);
  enum { NLIT = 400 };
  ir_stmt **ss = TS_ANEWN(A, ir_stmt *, NLIT);
  static const ir_dtype_code fdt[] = {IR_F32, IR_F64, IR_F16, IR_BF16};
  static const ir_dtype_code idt[] = {IR_I8, IR_I16, IR_I32, IR_I64, IR_U8, IR_U32};
  for (int k = 0; k < NLIT; k++) {
    uint64_t bits = ts_rng_next(&r);
    ir_expr *e;
    if (k % 3 == 2) {
      ir_dtype_code c = idt[ts_rng_below(&r, 6)];
      int nb = ir_dtype_bits(ir_dt(c));
      int64_t v = (int64_t)bits;
      if (nb < 64) {
        v = (int64_t)(bits & ((UINT64_C(1) << nb) - 1));
        if (c != IR_U8 && c != IR_U32 && (v >> (nb - 1))) v -= (int64_t)1 << nb;
      }
      e = ir_int(A, ir_dt(c), v);
    } else {
      ir_dtype_code c = fdt[ts_rng_below(&r, 4)];
      double v;
      if (c == IR_F64) {
        memcpy(&v, &bits, sizeof v);
      } else {
        uint32_t b32 = (uint32_t)bits;
        float f;
        memcpy(&f, &b32, sizeof f);
        v = f;
      }
      e = ir_float(A, ir_dt(c), v);
    }
    ss[k] = ir_evaluate(A, e);
  }
  ir_buffer *c = BUF("C", ir_dt(IR_F32), 1, I(1));
  return func_of("literals", 0, 1, bufs(1, c), ir_seq(A, NLIT, ss));
}

/* ---- tests ------------------------------------------------------------------ */

START_TEST(test_rt_matmul) { roundtrip(build_matmul()); }
END_TEST
START_TEST(test_rt_loops) { roundtrip(build_loops()); }
END_TEST
START_TEST(test_rt_stmts) { roundtrip(build_stmts()); }
END_TEST
START_TEST(test_rt_block_fields) { roundtrip(build_block_fields()); }
END_TEST
START_TEST(test_rt_exprs) { roundtrip(build_exprs()); }
END_TEST
START_TEST(test_rt_names) { roundtrip(build_names()); }
END_TEST
START_TEST(test_rt_random_literals) {
  for (uint64_t seed = 1; seed <= 5; seed++) roundtrip(build_random_literals(seed));
}
END_TEST

/* Every built-in workload at its default parameters: build (DSL -> loop IR),
 * print, reparse, struct-equal, same hash (= same workload key). */
START_TEST(test_rt_workload) {
  const ir_workload *wl = ir_workload_at(_i);
  ck_assert_ptr_nonnull(wl);
  ir_wl_inst inst;
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_msg(ir_wl_parse(wl->name, &inst, &d) == TS_OK, "%s: %s", wl->name, d.msg);
  ir_func *f = NULL;
  ck_assert_msg(ir_wl_build(A, &inst, &f, &d) == TS_OK, "%s: %s", wl->name, d.msg);
  roundtrip(f);
  /* and the key does not depend on the arena or the names the DSL chose */
  ir_func *g = NULL;
  ck_assert(ir_wl_build(A, &inst, &g, &d) == TS_OK);
  char k1[17], k2[17];
  ck_assert_str_eq(ir_workload_key(f, k1), ir_workload_key(g, k2));
}
END_TEST

START_TEST(test_workloads_exist) { ck_assert_int_gt(ir_workload_count(), 0); }
END_TEST

static Suite *roundtrip_suite(void) {
  Suite *s = suite_create("ir_roundtrip");
  TCase *tc = tcase_create("hand_built");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, test_rt_matmul);
  tcase_add_test(tc, test_rt_loops);
  tcase_add_test(tc, test_rt_stmts);
  tcase_add_test(tc, test_rt_block_fields);
  tcase_add_test(tc, test_rt_exprs);
  tcase_add_test(tc, test_rt_names);
  tcase_add_test(tc, test_rt_random_literals);
  suite_add_tcase(s, tc);
  TCase *tw = tcase_create("workloads");
  tcase_add_checked_fixture(tw, setup, teardown);
  tcase_add_test(tw, test_workloads_exist);
  tcase_add_loop_test(tw, test_rt_workload, 0, ir_workload_count());
  suite_add_tcase(s, tw);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(roundtrip_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failures = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failures ? 1 : 0;
}
