/* test_parse.c — the text front-ends (ir/parse.h): DSL kernels lowered to the
 * expected loop nests and blocks, hand-written script functions read back,
 * and malformed input of every kind (truncations at each byte, semantic
 * errors, random bytes and token soups, deep nesting, allocation failures)
 * answered with a located error, never a crash. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/parse.h"
#include "ir/print.h"
#include "ir/struct.h"

/* ---- helpers --------------------------------------------------------------- */

static ts_arena *arena;
static ts_diag diag;

static void setup(void) {
  arena = ts_arena_new();
  ts_diag_clear(&diag);
}
static void teardown(void) { ts_arena_free(arena); }

/* Parses from an exact-size heap copy so an over-read past len is caught by
 * ASan/valgrind. */
static ts_status parse_n(const char *src, size_t len, ir_func **out) {
  char *copy = malloc(len ? len : 1);
  ck_assert_ptr_nonnull(copy);
  memcpy(copy, src, len);
  ts_diag_clear(&diag);
  ir_func *f = NULL;
  ts_status st = ir_parse_func(arena, copy, len, "t.ts", &f, &diag);
  free(copy);
  if (out) *out = f;
  return st;
}

static ir_func *parse_ok(const char *src) {
  ir_func *f = NULL;
  ts_status st = parse_n(src, strlen(src), &f);
  ck_assert_msg(st == TS_OK, "parse failed: %s", diag.msg);
  ck_assert_ptr_nonnull(f);
  return f;
}

/* Checks the house error format: "t.ts:L:C: error: ...\n  line\n  ^". */
static void check_err_format(void) {
  ck_assert_msg(strncmp(diag.msg, "t.ts:", 5) == 0, "no file in: %s", diag.msg);
  int line = 0, col = 0;
  ck_assert_msg(sscanf(diag.msg, "t.ts:%d:%d: error: ", &line, &col) == 2, "bad format: %s", diag.msg);
  ck_assert_int_ge(line, 1);
  ck_assert_int_ge(col, 1);
  ck_assert_msg(strstr(diag.msg, ": error: ") != NULL, "no 'error:' in %s", diag.msg);
  const char *nl = strchr(diag.msg, '\n');
  ck_assert_msg(nl && strchr(nl + 1, '\n'), "no source line in: %s", diag.msg);
  ck_assert_msg(strchr(strchr(nl + 1, '\n'), '^') != NULL, "no caret in: %s", diag.msg);
}

/* Expects code, the format, the position and a message fragment. */
static void expect_err(const char *src, ts_status code, int line, int col, const char *frag) {
  ts_status st = parse_n(src, strlen(src), NULL);
  ck_assert_msg(st == code, "want %s got %s: %s\nfor: %s", ts_strerror(code), ts_strerror(st), diag.msg, src);
  check_err_format();
  if (line) {
    char want[32];
    if (col) snprintf(want, sizeof want, "t.ts:%d:%d:", line, col);
    else snprintf(want, sizeof want, "t.ts:%d:", line);
    ck_assert_msg(strncmp(diag.msg, want, strlen(want)) == 0, "want %s in: %s", want, diag.msg);
  }
  if (frag) ck_assert_msg(strstr(diag.msg, frag) != NULL, "want '%s' in: %s", frag, diag.msg);
}

typedef struct shape_count {
  int loops, blocks, stores, seqs;
} shape_count;

static void count_stmt(const ir_stmt *s, shape_count *c) {
  if (!s) return;
  switch (s->kind) {
  case IR_FOR: c->loops++; count_stmt(s->u.loop.body, c); break;
  case IR_BLOCK_REALIZE:
    c->blocks++;
    count_stmt(s->u.realize.block->init, c);
    count_stmt(s->u.realize.block->body, c);
    break;
  case IR_SEQ:
    c->seqs++;
    for (int i = 0; i < s->u.seq.n; i++) count_stmt(s->u.seq.stmts[i], c);
    break;
  case IR_IF: count_stmt(s->u.ifs.then_s, c); count_stmt(s->u.ifs.else_s, c); break;
  case IR_LET: count_stmt(s->u.let.body, c); break;
  case IR_ALLOCATE: count_stmt(s->u.alloc.body, c); break;
  case IR_STORE: c->stores++; break;
  default: break;
  }
}

/* The block realize at the bottom of a loop nest. */
static const ir_block *nest_block(const ir_stmt *s, int *depth) {
  *depth = 0;
  while (s && s->kind == IR_FOR) {
    (*depth)++;
    s = s->u.loop.body;
  }
  ck_assert_ptr_nonnull(s);
  ck_assert_int_eq(s->kind, IR_BLOCK_REALIZE);
  return s->u.realize.block;
}

static const ir_block *root_of(const ir_func *f) {
  ck_assert_int_eq(f->body->kind, IR_BLOCK_REALIZE);
  const ir_block *r = f->body->u.realize.block;
  ck_assert_str_eq(r->name, "root");
  ck_assert_int_eq(r->niter, 0);
  return r;
}

static const ir_stmt *stage(const ir_func *f, int i, int n) {
  const ir_block *r = root_of(f);
  if (n == 1) return r->body;
  ck_assert_int_eq(r->body->kind, IR_SEQ);
  ck_assert_int_eq(r->body->u.seq.n, n);
  return r->body->u.seq.stmts[i];
}

/* Print, re-parse, compare structurally. */
static void roundtrip(const ir_func *f) {
  char *txt = ir_func_to_string(f);
  ck_assert_ptr_nonnull(txt);
  ir_func *g = NULL;
  ts_status st = parse_n(txt, strlen(txt), &g);
  ck_assert_msg(st == TS_OK, "re-parse failed: %s\n%s", diag.msg, txt);
  char why[512] = "";
  ck_assert_msg(ir_struct_equal_func_explain(f, g, why, sizeof why), "not equal: %s\n%s", why, txt);
  ts_free(txt);
}

/* ---- DSL -------------------------------------------------------------------- */

static const char *matmul_src =
    "kernel matmul(A: f32[M, K], B: f32[K, N]) -> C: f32[M, N] {\n"
    "  C[i, j] += A[i, k] * B[k, j]\n"
    "}";

START_TEST(dsl_matmul) {
  ir_func *f = parse_ok(matmul_src);
  ck_assert_str_eq(f->name, "matmul");
  ck_assert_int_eq(f->nparams, 3);
  ck_assert_int_eq(f->ninputs, 2);
  ck_assert_int_eq(f->nsyms, 3);
  ck_assert_str_eq(f->syms[0]->name, "M");
  ck_assert_str_eq(f->syms[1]->name, "K");
  ck_assert_str_eq(f->syms[2]->name, "N");
  ck_assert_int_eq(f->syms[0]->dtype.code, IR_I64);
  shape_count c = {0};
  count_stmt(f->body, &c);
  ck_assert_int_eq(c.loops, 3);
  ck_assert_int_eq(c.blocks, 2);
  int depth;
  const ir_block *b = nest_block(stage(f, 0, 1), &depth);
  ck_assert_int_eq(depth, 3);
  ck_assert_str_eq(b->name, "C");
  ck_assert_int_eq(b->niter, 3);
  ck_assert_str_eq(b->iters[0].var->name, "vi");
  ck_assert_str_eq(b->iters[2].var->name, "vk");
  ck_assert_int_eq(b->iters[0].type, IR_ITER_S);
  ck_assert_int_eq(b->iters[1].type, IR_ITER_S);
  ck_assert_int_eq(b->iters[2].type, IR_ITER_R);
  ck_assert_int_eq(b->iters[2].var->dtype.code, IR_I64);
  ck_assert_ptr_nonnull(b->init);
  ck_assert_int_eq(b->init->kind, IR_STORE);
  ck_assert_int_eq(b->init->u.store.value->kind, IR_FLOAT_IMM);
  ck_assert_int_eq(b->init->u.store.value->dtype.code, IR_F32);
  ck_assert_int_eq(b->nreads, 2);
  ck_assert_int_eq(b->nwrites, 1);
  ck_assert_int_eq(b->body->u.store.value->kind, IR_ADD);
  roundtrip(f);
}
END_TEST

START_TEST(dsl_softmax) {
  ir_func *f = parse_ok(
      "# softmax over rows\n"
      "kernel softmax(X: f32[M, N]) -> Y: f32[M, N] {\n"
      "  mx[i] max= X[i, j]\n"
      "  e[i, j] = exp(X[i, j] - mx[i])\n"
      "  s[i] += e[i, j]\n"
      "  Y[i, j] = e[i, j] / s[i]\n"
      "}\n");
  const ir_block *r = root_of(f);
  ck_assert_int_eq(r->nalloc, 3);
  ck_assert_str_eq(r->allocs[0]->name, "mx");
  ck_assert_int_eq(r->allocs[0]->ndim, 1);
  ck_assert_int_eq(r->allocs[1]->ndim, 2);
  const char *names[] = {"mx", "e", "s", "Y"};
  bool reduce[] = {true, false, true, false};
  for (int i = 0; i < 4; i++) {
    int depth;
    const ir_block *b = nest_block(stage(f, i, 4), &depth);
    ck_assert_int_eq(depth, 2);
    ck_assert_str_eq(b->name, names[i]);
    ck_assert_int_eq(b->init != NULL, reduce[i]);
  }
  int depth;
  const ir_block *mx = nest_block(stage(f, 0, 4), &depth);
  ck_assert_int_eq(mx->iters[1].type, IR_ITER_R);
  const ir_expr *id = mx->init->u.store.value;
  ck_assert_int_eq(id->kind, IR_FLOAT_IMM);
  ck_assert(id->u.fval < -1e300);
  ck_assert_int_eq(mx->body->u.store.value->kind, IR_MAX);
  roundtrip(f);
}
END_TEST

START_TEST(dsl_conv_padded) {
  ir_func *f = parse_ok(
      "kernel conv(X: f32[N, C, H, W], Wt: f32[K, C, 3, 3]) -> Y: f32[N, K, H, W] {\n"
      "  let Xp: f32[N, C, H + 2*P, W + 2*P]\n"
      "  Xp[n, c, h, w] = select(h >= P && h < H + P && w >= P && w < W + P,\n"
      "                          X[n, c, h - P, w - P], 0.0)\n"
      "  Y[n, k, h, w] += Xp[n, c, h + r, w + s] * Wt[k, c, r, s]\n"
      "}\n");
  ck_assert_int_eq(f->nsyms, 6); /* N C H W K P */
  ck_assert_str_eq(f->syms[5]->name, "P");
  const ir_block *r = root_of(f);
  ck_assert_int_eq(r->nalloc, 1);
  ck_assert_str_eq(r->allocs[0]->name, "Xp");
  ck_assert_int_eq(r->allocs[0]->shape[2]->kind, IR_ADD);
  int depth;
  const ir_block *xp = nest_block(stage(f, 0, 2), &depth);
  ck_assert_int_eq(depth, 4);
  ck_assert_ptr_null(xp->init);
  ck_assert_int_eq(xp->body->u.store.value->kind, IR_SELECT);
  const ir_block *y = nest_block(stage(f, 1, 2), &depth);
  ck_assert_int_eq(depth, 7);
  int nr = 0;
  for (int i = 0; i < y->niter; i++) nr += y->iters[i].type == IR_ITER_R;
  ck_assert_int_eq(nr, 3);
  int64_t v;
  ck_assert(ir_as_int(y->iters[5].dom.extent, &v) && v == 3);
  roundtrip(f);
}
END_TEST

START_TEST(dsl_int8_and_identities) {
  ir_func *f = parse_ok(
      "kernel qmm(A: i8[M, K], B: i8[K, N]) -> C: i32[M, N] {\n"
      "  C[i, j] += i32(A[i, k]) * i32(B[k, j])\n"
      "}\n");
  int depth;
  const ir_block *b = nest_block(stage(f, 0, 1), &depth);
  ck_assert_int_eq(f->params[2]->dtype.code, IR_I32);
  ck_assert_int_eq(b->init->u.store.value->kind, IR_INT_IMM);
  ck_assert_int_eq(b->init->u.store.value->dtype.code, IR_I32);
  const ir_expr *mul = b->body->u.store.value->u.bin.b;
  ck_assert_int_eq(mul->kind, IR_MUL);
  ck_assert_int_eq(mul->u.bin.a->kind, IR_CAST);
  roundtrip(f);

  f = parse_ok("kernel m(A: i8[N]) -> B: i8[], C: u8[] {\n"
               "  B[] max= A[i]\n  C[] min= u8(A[i])\n}");
  const ir_block *bm = nest_block(stage(f, 0, 2), &depth);
  ck_assert_int_eq(bm->init->u.store.value->u.ival, -128);
  const ir_block *cm = nest_block(stage(f, 1, 2), &depth);
  ck_assert_int_eq(cm->init->u.store.value->u.ival, 255);
  f = parse_ok("kernel m(A: f32[N]) -> B: f32[] { B[] *= A[i] }");
  ck_assert(nest_block(stage(f, 0, 1), &depth)->init->u.store.value->u.fval == 1.0);
  f = parse_ok("kernel m(A: f32[N]) -> B: f32[] { B[] min= A[i] }");
  ck_assert(nest_block(stage(f, 0, 1), &depth)->init->u.store.value->u.fval > 1e300);
}
END_TEST

START_TEST(dsl_zero_d_and_literals) {
  ir_func *f = parse_ok("kernel s(X: f32[N]) -> Y: f32[] {\n  Y[] += X[i] * 2\n}");
  ck_assert_int_eq(f->params[1]->ndim, 0);
  int depth;
  const ir_block *b = nest_block(stage(f, 0, 1), &depth);
  ck_assert_int_eq(depth, 1);
  ck_assert_int_eq(b->niter, 1);
  ck_assert_int_eq(b->iters[0].type, IR_ITER_R);
  const ir_expr *two = b->body->u.store.value->u.bin.b->u.bin.b;
  ck_assert_int_eq(two->kind, IR_FLOAT_IMM); /* adopted f32 */
  ck_assert_int_eq(two->dtype.code, IR_F32);
  roundtrip(f);

  /* layernorm with eps as a literal, gamma/beta, casts of syms */
  f = parse_ok(
      "kernel ln(X: f32[M, N], gamma: f32[N], beta: f32[N]) -> Y: f32[M, N] {\n"
      "  mean[i] += X[i, j] / f32(N)\n"
      "  var[i] += (X[i, j] - mean[i]) * (X[i, j] - mean[i]) / f32(N)\n"
      "  Y[i, j] = (X[i, j] - mean[i]) * rsqrt(var[i] + 1e-5) * gamma[j] + beta[j]\n"
      "}\n");
  ck_assert_int_eq(root_of(f)->nalloc, 2);
  roundtrip(f);

  /* f64 kernel: literals adopt f64; inf_f64 and negative literals */
  f = parse_ok("kernel d(X: f64[N]) -> Y: f64[N] {\n"
               "  Y[i] = max(X[i] * -0.5, -inf) + f64(1) + select(X[i] > 0, X[i], 0)\n}");
  roundtrip(f);
  /* pool with explicit ranges; a 'for' range on an LHS var */
  f = parse_ok("kernel p(X: f32[N, 16]) -> Y: f32[N, 7] {\n"
               "  Y[n, h] max= X[n, h * 2 + r] for r in 0..3\n}");
  b = nest_block(stage(f, 0, 1), &depth);
  ck_assert_int_eq(depth, 3);
  roundtrip(f);
  f = parse_ok("kernel p(X: f32[N]) -> Y: f32[N] {\n  Y[i] = X[i] for i in 0..N\n}");
  roundtrip(f);
  /* where on a reduction, integer index math, all intrinsics */
  f = parse_ok("kernel t(A: f32[N, N]) -> L: f32[N], Z: f32[N] {\n"
               "  L[i] += A[i, j] where j <= i\n"
               "  Z[i] = pow(abs(L[i]), 2) + fma(L[i], 2.0, 1) + exp(L[i]) + log(L[i]) + sqrt(L[i])\n"
               "       + tanh(L[i]) + erf(L[i]) + sigmoid(L[i]) + rsqrt(L[i]) + min(L[i], 0)\n"
               "       + A[i // 2, i % 2] - -L[i]\n"
               "}\n");
  b = nest_block(stage(f, 0, 2), &depth);
  ck_assert_int_eq(b->body->u.store.value->u.bin.b->kind, IR_SELECT);
  roundtrip(f);
  /* int matmul with bool mask and integer literal adoption */
  f = parse_ok("kernel q(A: i32[N], M: bool[N]) -> B: i32[N] {\n"
               "  B[i] = select(M[i] && !(A[i] == 3 || A[i] != -2), A[i] * 2 + 1, 0)\n}");
  roundtrip(f);
  /* several kernels in one module */
  ir_module *m = ir_module_new();
  const char *two_k = "kernel a(X: f32[4]) -> Y: f32[4] { Y[i] = X[i] }\n"
                      "kernel b(X: f32[4]) -> Y: f32[4] { Y[i] = X[i] + 1 }\n";
  ck_assert_int_eq(ir_parse_module(m, two_k, strlen(two_k), "m.ts", &diag), TS_OK);
  ck_assert_int_eq(m->nfuncs, 2);
  ir_module_free(m);
}
END_TEST

/* ---- script ----------------------------------------------------------------- */

static const char *script_src =
    "func f(A: f32[M, 64] strides(64, 1) offset(0) align(64), B: f32x4[16]) -> C: f32[M, 64] syms(M) "
    "annot {\"tir.noalias\" = 1, ratio = 0.5} {\n"
    "  block root() {\n"
    "    alloc S: f32[64] scope(\"shared\") storage_align((0, 32, 1))\n"
    "    for bx: i32 in thread(0, 4, \"blockIdx.x\") {\n"
    "      for i in parallel(0, M) annot {pragma = \"x\", e = expr(M * 2), n = -3} {\n"
    "        for j in vectorized(0, 64) {\n"
    "          block C(vi: S(0, M) = i, vj: i32: S(0, 64) = j, vk: R(0, 1) = 0, vo: O(0, 1) = 0)\n"
    "              where i < M {\n"
    "            alloc T: f32[1]\n"
    "            reads A[vi, vj], S[vj * 2 :+ 2]\n"
    "            writes C[vi, vj]\n"
    "            annot {k = 1}\n"
    "            init {\n"
    "              C[vi, vj] = 0.0\n"
    "            }\n"
    "            T[0] = A[vi, vj]\n"
    "            C[vi, vj] = C[vi, vj] + T[0] if vi < 10\n"
    "            if vi > 2 {\n"
    "              eval exp(A[vi, vj])\n"
    "            } else {\n"
    "              let x: i64 = vi * 2 {\n"
    "                allocate U: f32[4] {\n"
    "                  U[x // 2 % 4] = f32(x)\n"
    "                }\n"
    "              }\n"
    "            }\n"
    "          }\n"
    "        }\n"
    "      }\n"
    "    }\n"
    "    for u in unrolled(0, 4) {\n"
    "    }\n"
    "    for v in serial(0, 4) {\n"
    "      B[v] = broadcast(1.0f32, 4) * B[ramp(v, 1, 1)]\n"
    "      S[v] = 1.5f64 > 2.0 ? 1.0 : 0.0\n"
    "    }\n"
    "  }\n"
    "}\n";

START_TEST(script_full) {
  /* ?: is not in the grammar: the last store must be rejected */
  ts_status st = parse_n(script_src, strlen(script_src), NULL);
  ck_assert_int_eq(st, TS_EPARSE);
  check_err_format();
  /* fix it and parse for real */
  char *src = strdup(script_src);
  char *q = strstr(src, "1.5f64 > 2.0 ? 1.0 : 0.0");
  memcpy(q, "select(true, 1.0, 0.0)  ", 24);
  ir_func *f = parse_ok(src);
  free(src);
  ck_assert_int_eq(f->nsyms, 1);
  ck_assert_int_eq(f->nparams, 3);
  ck_assert_int_eq(f->ninputs, 2);
  ck_assert_int_eq(f->nannot, 2);
  ck_assert_str_eq(f->annots[0].key, "tir.noalias");
  ck_assert_int_eq(f->annots[1].kind, IR_ANN_FLOAT);
  ck_assert_ptr_nonnull(f->params[0]->strides);
  ck_assert_int_eq(f->params[0]->align, 64);
  ck_assert_int_eq(f->params[1]->dtype.lanes, 4);
  const ir_block *r = root_of(f);
  ck_assert_int_eq(r->nalloc, 1);
  ck_assert_str_eq(r->allocs[0]->scope, "shared");
  ck_assert_int_eq(r->allocs[0]->align_factor[0], 32);
  ck_assert_int_eq(r->body->kind, IR_SEQ);
  ck_assert_int_eq(r->body->u.seq.n, 3);
  const ir_stmt *bx = r->body->u.seq.stmts[0];
  ck_assert_int_eq(bx->u.loop.kind, IR_FOR_THREAD_BINDING);
  ck_assert_str_eq(bx->u.loop.thread, "blockIdx.x");
  ck_assert_int_eq(bx->u.loop.var->dtype.code, IR_I32);
  const ir_stmt *li = bx->u.loop.body;
  ck_assert_int_eq(li->u.loop.kind, IR_FOR_PARALLEL);
  ck_assert_int_eq(li->u.loop.nannot, 3);
  ck_assert_int_eq(li->u.loop.annots[1].kind, IR_ANN_EXPR);
  ck_assert_int_eq(li->u.loop.annots[2].v.i, -3);
  const ir_stmt *rz = li->u.loop.body->u.loop.body;
  ck_assert_int_eq(rz->kind, IR_BLOCK_REALIZE);
  ck_assert_int_eq(rz->u.realize.predicate->kind, IR_LT);
  const ir_block *b = rz->u.realize.block;
  ck_assert_int_eq(b->niter, 4);
  ck_assert_int_eq(b->iters[1].var->dtype.code, IR_I32);
  ck_assert_int_eq(b->iters[2].type, IR_ITER_R);
  ck_assert_int_eq(b->iters[3].type, IR_ITER_OPAQUE);
  ck_assert_int_eq(b->nalloc, 1);
  ck_assert_int_eq(b->nreads, 2);
  ck_assert_int_eq(b->reads[1].ranges[0].extent->u.ival, 2);
  ck_assert_int_eq(b->nwrites, 1);
  ck_assert_int_eq(b->nannot, 1);
  ck_assert_ptr_nonnull(b->init);
  ck_assert_int_eq(b->body->kind, IR_SEQ);
  ck_assert_int_eq(b->body->u.seq.n, 3);
  ck_assert_ptr_nonnull(b->body->u.seq.stmts[1]->u.store.predicate);
  ck_assert_int_eq(b->body->u.seq.stmts[2]->kind, IR_IF);
  ck_assert_ptr_nonnull(b->body->u.seq.stmts[2]->u.ifs.else_s);
  const ir_stmt *empty = r->body->u.seq.stmts[1];
  ck_assert_int_eq(empty->u.loop.kind, IR_FOR_UNROLLED);
  ck_assert_int_eq(empty->u.loop.body->kind, IR_SEQ);
  ck_assert_int_eq(empty->u.loop.body->u.seq.n, 0);
  roundtrip(f);
}
END_TEST

START_TEST(script_scoping) {
  /* an inner definition shadows an outer one of the same name */
  ir_func *f = parse_ok("func g(A: f32[4]) -> B: f32[4] {\n"
                        "  for i in serial(0, 4) {\n"
                        "    let i: i64 = 3 {\n"
                        "      B[i] = A[i]\n"
                        "    }\n"
                        "    B[i] = A[i]\n"
                        "  }\n"
                        "}\n");
  const ir_stmt *loop = f->body;
  ck_assert_int_eq(loop->kind, IR_FOR);
  const ir_stmt *let = loop->u.loop.body->u.seq.stmts[0];
  const ir_stmt *inner = let->u.let.body;
  ck_assert_ptr_eq(inner->u.store.idx[0]->u.var, let->u.let.var);
  const ir_stmt *outer = loop->u.loop.body->u.seq.stmts[1];
  ck_assert_ptr_eq(outer->u.store.idx[0]->u.var, loop->u.loop.var);
  /* a loop var is not visible after its loop */
  expect_err("func g(A: f32[4]) -> B: f32[4] {\n  for i in serial(0, 4) {\n  }\n  B[i] = 1.0\n}",
             TS_ENOTFOUND, 4, 5, "unknown identifier 'i'");
  /* an alloc is visible only inside its block */
  expect_err("func g() -> B: f32[4] {\n  block x() {\n    alloc T: f32[4]\n  }\n  T[0] = 1.0\n}",
             TS_ENOTFOUND, 5, 3, "unknown tensor 'T'");
  /* the store predicate vs. a following if statement */
  f = parse_ok("func g(A: f32[4]) -> B: f32[4] {\n  B[0] = A[0]\n  if true {\n    B[1] = A[1]\n  }\n}");
  ck_assert_int_eq(f->body->kind, IR_SEQ);
  ck_assert_ptr_null(f->body->u.seq.stmts[0]->u.store.predicate);
  ck_assert_int_eq(f->body->u.seq.stmts[1]->kind, IR_IF);
}
END_TEST

/* ---- errors ------------------------------------------------------------------ */

START_TEST(errors_semantic) {
  expect_err("kernel k(X: f32[N]) -> Y: f32[N] {\n  Y[i] = Z[i]\n}", TS_ENOTFOUND, 2, 10,
             "unknown tensor 'Z'");
  expect_err("kernel k(X: f32[N]) -> Y: f32[N] {\n  Y[i] = X[i] * Q\n}", TS_ENOTFOUND, 2, 17,
             "unknown identifier 'Q'");
  expect_err("kernel k(X: f32[N]) -> Y: f32[N] {\n  Y[i] = foo(X[i])\n}", TS_ENOTFOUND, 2, 10,
             "unknown function");
  expect_err("kernel k(X: f32[N, M]) -> Y: f32[N] {\n  Y[i] = X[i]\n}", TS_ESHAPE, 2, 10,
             "2 dimensions but is indexed with 1");
  expect_err("kernel k(X: f32[N]) -> Y: f32[N] {\n  Y[i, j] = X[i]\n}", TS_ESHAPE, 2, 3,
             "indexed with 2");
  expect_err("kernel k(X: f32[N], Z: f32[M]) -> Y: f32[N] {\n  Y[i] = X[i] + Z[i]\n}", TS_ESHAPE, 2,
             17, "shape mismatch");
  expect_err("kernel k(X: f32[4]) -> Y: f32[8] {\n  Y[i] = X[i]\n}", TS_ESHAPE, 2, 10, "shape mismatch");
  expect_err("kernel k(X: f32[N], Z: f16[N]) -> Y: f32[N] {\n  Y[i] = X[i] + Z[i]\n}", TS_ETYPE, 2, 15,
             "mismatched dtypes f32 and f16");
  expect_err("kernel k(X: i32[N]) -> Y: f32[N] {\n  Y[i] = X[i]\n}", TS_ETYPE, 2, 10,
             "'Y' is f32 but the right-hand side is i32");
  expect_err("kernel k(X: i32[N]) -> Y: i32[N] {\n  Y[i] = X[i] + 0.5\n}", TS_ETYPE, 2, 15,
             "float literal");
  expect_err("kernel k(X: f32[N]) -> Y: f32[N] {\n  Y[i] = X[i] where X[i] > 0\n}", TS_EPARSE, 2, 15,
             "'where' is only allowed on reductions");
  expect_err("kernel k(X: f32[N]) -> Y: f32[N] {\n  Y[i] += X[i] * f32(k)\n}", TS_ESHAPE, 2, 22,
             "cannot infer the range of 'k'; add 'for k in 0..N'");
  expect_err("kernel k(X: f32[N]) -> Y: f32[N] {\n  Y[i] = X[i]\n  Y[i] = X[i]\n}", TS_EPARSE, 3, 3,
             "one writer");
  expect_err("kernel k(X: f32[N]) -> Y: f32[N] {\n  t[i] = X[i]\n  t[i] = X[i]\n  Y[i] = t[i]\n}",
             TS_EPARSE, 3, 3, "one writer");
  expect_err("kernel k(X: f32[N]) -> Y: f32[N] {\n  X[i] = Y[i]\n}", TS_EPARSE, 2, 3, "cannot write input");
  expect_err("kernel k(X: f32[N]) -> Y: f32[N] {\n  Y[i] = X[i, k]\n}", TS_ESHAPE, 2, 10, NULL);
  expect_err("kernel k(X: f32[N, N]) -> Y: f32[N] {\n  Y[i] = X[i, k]\n}", TS_EPARSE, 2, 15,
             "not an index of the left-hand side");
  expect_err("kernel k(X: f32[N]) -> Y: f32[N], Z: f32[N] {\n  Y[i] = X[i]\n}", TS_EPARSE, 1, 35,
             "never written");
  expect_err("kernel k(X: f32[N]) -> Y: f32[N] {\n  Y[i] = X\n}", TS_ESHAPE, 2, 10, "is a tensor");
  expect_err("kernel k(X: f32[N]) -> Y: f32[N] {\n  Y[i] = exp(X[i], 1)\n}", TS_EPARSE, 2, 10,
             "takes 1 argument");
  expect_err("kernel k(X: i32[N]) -> Y: i32[N] {\n  Y[i] = exp(X[i])\n}", TS_ETYPE, 2, 10,
             "needs a float");
  expect_err("kernel k(X: i8[N]) -> Y: i8[N] {\n  Y[i] = X[i] + 300\n}", TS_ETYPE, 2, 15, "out of range");
  expect_err("kernel k(X: f32[N]) -> Y: f32[N] {\n  Y[i] = select(X[i], X[i], 0)\n}", TS_ETYPE, 2, 10,
             "must be bool");
  expect_err("kernel k(X: f32[N]) -> Y: f32[N] {\n  Y[i] = t[i]\n  t[i] = X[i]\n}", TS_ENOTFOUND, 2, 10,
             "unknown tensor 't'");
  expect_err("kernel k(X: f32[N]) -> Y: f32[N] {\n  let t: f32[N]\n  Y[i] = t[i]\n  t[i] = X[i]\n}",
             TS_ENOTFOUND, 3, 10, "read before it is written");
  expect_err("kernel k(X: f32[N]) -> Y: f32[N] {\n  Y[N] = X[N]\n}", TS_EPARSE, 2, 5,
             "cannot be an index variable");
  expect_err("kernel k(X: f32[N], X: f32[N]) -> Y: f32[N] {\n  Y[i] = X[i]\n}", TS_EPARSE, 1, 21,
             "already declared");
  expect_err("kernel a(X: f32[4]) -> Y: f32[4] { Y[i] = X[i] }\n"
             "kernel b(X: f32[4]) -> Y: f32[4] { Y[i] = X[i] }\n",
             TS_EPARSE, 2, 8, "exactly one function");
  /* script semantics */
  expect_err("func g(A: f32[4]) -> B: f32[4] {\n  B[0, 1] = A[0]\n}", TS_ESHAPE, 2, 3, "indexed with 2");
  expect_err("func g(A: f32[N]) -> B: f32[4] {\n  B[0] = A[0]\n}", TS_ENOTFOUND, 1, 15,
             "unknown identifier 'N'");
  expect_err("func g(A: f32[4]) -> B: f32[4] {\n  block b(vi: S(0, 4) = 0) {\n    reads A[vi, 0]\n  }\n}",
             TS_ESHAPE, 3, 11, "region has 2");
}
END_TEST

START_TEST(errors_syntax) {
  expect_err("kernel k(X: f32[N]) -> Y: f32[N] {\n  Y[i] = X[i] +\n}", TS_EPARSE, 3, 1,
             "expected an expression");
  expect_err("kernel k(X: f32[N]) -> Y: f32[N] {\n  Y[i] = X[i] $ 2\n}", TS_EPARSE, 2, 15,
             "unexpected character '$'");
  expect_err("kernel k(X: f32[N]) -> Y: f32[N] {\n  Y[i] -= X[i]\n}", TS_EPARSE, 2, 8, "expected '='");
  expect_err("kernel k(X: f32[N]) -> Y: f32[N] {\n  Y[i] = 1bf16\n}", TS_EPARSE, 2, 11, "float suffix");
  expect_err("kernel k(X: f32[N]) -> Y: f32[N] {\n  Y[i] = 1bool\n}", TS_EPARSE, 2, 11, "true or false");
  expect_err("kernel k(X: f32[N]) -> Y: f32[N] {\n  Y[i] = \"abc\n}", TS_EPARSE, 2, 10, "unterminated string");
  expect_err("kernel k(X: f32[N]) -> Y: f32[N] {\n  Y[i] = 99999999999999999999\n}", TS_EPARSE, 2, 10,
             "too large");
  expect_err("kernel k(X: q32[N]) -> Y: f32[N] {\n  Y[i] = X[i]\n}", TS_EPARSE, 1, 13, "expected a dtype");
  expect_err("", TS_EPARSE, 1, 1, "expected a 'kernel' or 'func'");
  expect_err("garbage", TS_EPARSE, 1, 1, "expected 'kernel' or 'func'");
  expect_err("kernel k(X: f32[N]) -> Y: f32[N] {\n  Y[i] = X[i]", TS_EPARSE, 2, 14, "expected '}'");
  /* non-printable bytes are shown as '?' and the caret still lands */
  expect_err("kernel k(X: f32[N]) -> Y: f32[N] {\n  Y[i] = \x01\n}", TS_EPARSE, 2, 10, "unexpected byte 0x01");
  /* tabs keep the caret aligned */
  expect_err("kernel k(X: f32[N]) -> Y: f32[N] {\n\tY[i] = X[i] @\n}", TS_EPARSE, 2, 14, "'@'");
  ck_assert_msg(strstr(diag.msg, "\n  \t            ^") != NULL, "caret: %s", diag.msg);
}
END_TEST

START_TEST(errors_deep_nesting) {
  const char *head = "kernel k(X: f32[N]) -> Y: f32[N] {\n  Y[i] = ";
  size_t n = 100000;
  char *src = malloc(strlen(head) + n + 1);
  strcpy(src, head);
  memset(src + strlen(head), '(', n);
  src[strlen(head) + n] = '\0';
  expect_err(src, TS_EPARSE, 2, 0, "too deep");
  memset(src + strlen(head), '-', n);
  expect_err(src, TS_EPARSE, 2, 0, "too deep");
  memset(src + strlen(head), '!', n);
  expect_err(src, TS_EPARSE, 2, 0, "too deep");
  free(src);
  /* a long flat chain builds a tall tree: capped too */
  ts_strbuf sb;
  ts_strbuf_init(&sb);
  ts_strbuf_append(&sb, head);
  for (int i = 0; i < 5000; i++) ts_strbuf_append(&sb, "X[i] + ");
  ts_strbuf_append(&sb, "X[i]\n}");
  expect_err(sb.data, TS_EPARSE, 2, 0, "too large");
  ts_strbuf_fini(&sb);
  /* nested statements in the script */
  ts_strbuf_init(&sb);
  ts_strbuf_append(&sb, "func g() -> B: f32[1] {\n");
  for (int i = 0; i < 2000; i++) ts_strbuf_append(&sb, "if true {");
  expect_err(sb.data, TS_EPARSE, 2, 0, "too deep");
  ts_strbuf_fini(&sb);
  /* moderate nesting is fine */
  ir_func *f = parse_ok("kernel k(X: f32[N]) -> Y: f32[N] {\n  Y[i] = ((((((((((X[i]))))))))))\n}");
  ck_assert_ptr_nonnull(f);
}
END_TEST

static const char *trunc_src =
    "kernel conv(X: f32[N, C, H, W], Wt: f32[K, C, 3, 3], b: f32[K]) -> Y: f32[N, K, H, W] {\n"
    "  let Xp: f32[N, C, H + 2, W + 2]\n"
    "  Xp[n, c, h, w] = select(h >= 1 && h < H + 1 && w >= 1 && w < W + 1, X[n, c, h - 1, w - 1], 0.0)\n"
    "  acc[n, k, h, w] += Xp[n, c, h + r, w + s] * Wt[k, c, r, s] for r in 0..3, s in 0..3, h in 0..H, w in 0..W\n"
    "  Y[n, k, h, w] = max(acc[n, k, h, w] + b[k], 0.0f32) * 1e-5 # relu\n"
    "}";

START_TEST(errors_truncated) {
  size_t len = strlen(trunc_src);
  ck_assert_int_eq(parse_n(trunc_src, len, NULL), TS_OK);
  for (size_t i = 0; i < len; i++) {
    ts_status st = parse_n(trunc_src, i, NULL);
    ck_assert_msg(st != TS_OK, "prefix of %zu bytes parsed", i);
    ck_assert_int_eq(st, st == TS_EPARSE ? TS_EPARSE : st);
    check_err_format();
  }
  /* the same for the printed script form */
  ir_func *f = parse_ok(trunc_src);
  char *txt = ir_func_to_string(f);
  size_t tl = strlen(txt);
  while (tl && (txt[tl - 1] == '\n' || txt[tl - 1] == ' ')) tl--;
  for (size_t i = 0; i < tl; i++) {
    ts_status st = parse_n(txt, i, NULL);
    ck_assert_msg(st != TS_OK, "script prefix of %zu bytes parsed", i);
    check_err_format();
  }
  ts_free(txt);
}
END_TEST

static const char *soup_tokens[] = {
    "kernel", "func", "let", "for", "in", "where", "block", "reads", "writes", "init", "alloc",
    "annot", "if", "else", "eval", "allocate", "serial", "thread", "S", "R", "O", "max", "min",
    "select", "exp", "f32", "i64", "i8", "bool", "X", "Y", "A", "i", "j", "k", "N", "M", "0", "1",
    "3", "2.5", "1e-5", "7i32", "inf", "nan_f64", "true", "\"s\"", "(", ")", "[", "]", "{", "}",
    ",", ":", ":+", "+", "-", "*", "/", "//", "%", "=", "+=", "*=", "max=", "==", "!=", "<", "<=",
    "&&", "||", "!", "->", "..", "\n", "#c\n", "syms", "strides", "scope",
};

START_TEST(errors_random) {
  ts_rng rng;
  ts_rng_seed(&rng, 12345);
  char buf[512];
  int ok = 0;
  for (int iter = 0; iter < 4000; iter++) {
    size_t n = (size_t)ts_rng_below(&rng, 200);
    for (size_t i = 0; i < n; i++) {
      uint64_t r = ts_rng_next(&rng);
      buf[i] = (iter & 1) ? (char)(r & 0xff) : (char)(0x20 + r % 95);
    }
    ts_status st = parse_n(buf, n, NULL);
    if (st == TS_OK) ok++;
    else check_err_format();
  }
  /* token soups, and soups after a valid prefix so the parser gets deep */
  const char *prefixes[] = {"", "kernel k(X: f32[N]) -> Y: f32[N] {\n  Y[i] = ",
                            "func f(A: f32[4]) -> B: f32[4] {\n  block root() {\n  ",
                            "kernel k(X: f32[N]) -> Y: f32[N] {\n  "};
  for (int iter = 0; iter < 6000; iter++) {
    ts_strbuf sb;
    ts_strbuf_init(&sb);
    ts_strbuf_append(&sb, prefixes[iter % 4]);
    int nt = (int)ts_rng_below(&rng, 40);
    for (int i = 0; i < nt; i++) {
      ts_strbuf_append(&sb, soup_tokens[ts_rng_below(&rng, sizeof soup_tokens / sizeof *soup_tokens)]);
      ts_strbuf_append(&sb, ts_rng_below(&rng, 3) ? " " : "");
    }
    ts_status st = parse_n(sb.data ? sb.data : "", sb.len, NULL);
    if (st == TS_OK) ok++;
    else check_err_format();
    ts_strbuf_fini(&sb);
  }
  ck_assert_int_lt(ok, 100);
}
END_TEST

START_TEST(errors_oom) {
  /* every allocation failure point yields TS_ENOMEM (or success), no crash */
  for (long n = 1; n < 4000; n++) {
    ts_arena *a = ts_arena_new();
    ck_assert_ptr_nonnull(a);
    ts_diag_clear(&diag);
    ts_alloc_fail_after(n);
    ir_func *f = NULL;
    ts_status st = ir_parse_func(a, trunc_src, strlen(trunc_src), "t.ts", &f, &diag);
    ts_alloc_fail_after(0);
    ck_assert_msg(st == TS_OK || st == TS_ENOMEM, "n=%ld: %s", n, diag.msg);
    ts_arena_free(a);
    if (st == TS_OK) break;
  }
  /* the same for the script form */
  ir_func *f = parse_ok(trunc_src);
  char *txt = ir_func_to_string(f);
  for (long n = 1; n < 4000; n++) {
    ts_arena *a = ts_arena_new();
    ck_assert_ptr_nonnull(a);
    ts_diag_clear(&diag);
    ts_alloc_fail_after(n);
    ir_func *g = NULL;
    ts_status st = ir_parse_func(a, txt, strlen(txt), "t.ts", &g, &diag);
    ts_alloc_fail_after(0);
    ck_assert_msg(st == TS_OK || st == TS_ENOMEM, "n=%ld: %s", n, diag.msg);
    ts_arena_free(a);
    if (st == TS_OK) break;
  }
  ts_free(txt);
}
END_TEST

START_TEST(module_partial) {
  /* functions before the faulty one stay in the module */
  ir_module *m = ir_module_new();
  const char *src = "kernel a(X: f32[4]) -> Y: f32[4] { Y[i] = X[i] }\n"
                    "func b(A: f32[4]) -> B: f32[4] { B[0] = A[0] }\n"
                    "kernel c(X: f32[4]) -> Y: f32[4] { Y[i] = W[i] }\n";
  ck_assert_int_eq(ir_parse_module(m, src, strlen(src), "t.ts", &diag), TS_ENOTFOUND);
  check_err_format();
  ck_assert_int_eq(m->nfuncs, 2);
  ck_assert_ptr_nonnull(ir_module_get(m, "b"));
  ts_diag_clear(&diag);
  const char *dup = "kernel a(X: f32[4]) -> Y: f32[4] { Y[i] = X[i] }\n";
  ck_assert_int_eq(ir_parse_module(m, dup, strlen(dup), "t.ts", &diag), TS_EPARSE);
  ck_assert_ptr_nonnull(strstr(diag.msg, "duplicate function 'a'"));
  ir_module_free(m);
}
END_TEST

START_TEST(lexer_numbers) {
  ir_func *f = parse_ok("func g() -> B: f32[4], C: i64[4] {\n"
                        "  B[0x3] = 2.\n  B[1] = 1.0bf16 + 2e3f32 + -inf + 0.5f16 + nan_f64\n"
                        "  C[1] = -9223372036854775808 + 7u8 + 255u8 + -128i8\n"
                        "  for i in serial(0, 4) {\n    C[i] = 3\n  }\n}");
  ck_assert_int_eq(f->body->kind, IR_SEQ);
  const ir_stmt *s0 = f->body->u.seq.stmts[0];
  ck_assert_int_eq(s0->u.store.idx[0]->u.ival, 3);
  ck_assert_int_eq(s0->u.store.value->kind, IR_FLOAT_IMM);
  ck_assert(s0->u.store.value->u.fval == 2.0);
  const ir_stmt *s2 = f->body->u.seq.stmts[2];
  const ir_expr *e = s2->u.store.value;
  while (e->kind == IR_ADD) e = e->u.bin.a;
  ck_assert_int_eq(e->u.ival, INT64_MIN);
  expect_err("func g() -> B: u8[4] {\n  B[0] = 256u8\n}", TS_ETYPE, 2, 10, "out of range");
  expect_err("func g() -> B: u8[4] {\n  B[0] = 9223372036854775808\n}", TS_EPARSE, 2, 10, "too large");
  expect_err("func g() -> B: u8[4] {\n  B[0] = 0x\n}", TS_EPARSE, 2, 10, "hex");
  expect_err("func g() -> B: u8[4] {\n  B[0] = 1.5i32\n}", TS_EPARSE, 2, 13, "integer suffix");
  expect_err("func g() -> B: u8[4] {\n  B[0] = \"a\\q\"\n}", TS_EPARSE, 2, 12, "escape");
}
END_TEST

/* A constant-only extent (`1 * 128`, as the graph legalizer writes a
 * flattened dim) is folded where shapes, loop and domain bounds are read: the
 * function is the one written with `128` (same workload key), so the kernel
 * metadata and buffer sizes see a constant. A size var's product stays. */
START_TEST(script_constant_extents) {
  static const char *folded =
      "func f(A: f32[1 * 128]) -> B: f32[2 * 64, 1], C: f32[n * 2] syms(n) {\n"
      "  block root() {\n"
      "    for i in serial(0, 4 * 32) {\n"
      "      block B(vi: S(0, 1 * 128) = i) {\n"
      "        reads A[vi]\n"
      "        writes B[vi, 0]\n"
      "        B[vi, 0] = A[vi]\n"
      "      }\n"
      "    }\n"
      "    for j in serial(0, n * 2) {\n"
      "      block C(vj: S(0, n * 2) = j) {\n"
      "        writes C[vj]\n"
      "        C[vj] = 1.0\n"
      "      }\n"
      "    }\n"
      "  }\n"
      "}\n";
  static const char *plain =
      "func f(A: f32[128]) -> B: f32[128, 1], C: f32[n * 2] syms(n) {\n"
      "  block root() {\n"
      "    for i in serial(0, 128) {\n"
      "      block B(vi: S(0, 128) = i) {\n"
      "        reads A[vi]\n"
      "        writes B[vi, 0]\n"
      "        B[vi, 0] = A[vi]\n"
      "      }\n"
      "    }\n"
      "    for j in serial(0, n * 2) {\n"
      "      block C(vj: S(0, n * 2) = j) {\n"
      "        writes C[vj]\n"
      "        C[vj] = 1.0\n"
      "      }\n"
      "    }\n"
      "  }\n"
      "}\n";
  ir_func *f = parse_ok(folded), *g = parse_ok(plain);
  int64_t v = 0;
  ck_assert(ir_as_int(f->params[0]->shape[0], &v));
  ck_assert_int_eq(v, 128);
  ck_assert(ir_as_int(f->params[1]->shape[0], &v));
  ck_assert_int_eq(v, 128);
  ck_assert(!ir_as_int(f->params[2]->shape[0], NULL)); /* n * 2 is not a constant */
  ck_assert_int_eq(ir_buffer_const_size(f->params[0]), 128);
  char k1[17], k2[17];
  ck_assert_str_eq(ir_workload_key(f, k1), ir_workload_key(g, k2));
  roundtrip(f);
}
END_TEST

static Suite *parse_suite(void) {
  Suite *s = suite_create("ir_parse");
  TCase *tc = tcase_create("dsl");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, dsl_matmul);
  tcase_add_test(tc, dsl_softmax);
  tcase_add_test(tc, dsl_conv_padded);
  tcase_add_test(tc, dsl_int8_and_identities);
  tcase_add_test(tc, dsl_zero_d_and_literals);
  suite_add_tcase(s, tc);
  tc = tcase_create("script");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, script_full);
  tcase_add_test(tc, script_scoping);
  tcase_add_test(tc, script_constant_extents);
  tcase_add_test(tc, lexer_numbers);
  suite_add_tcase(s, tc);
  tc = tcase_create("errors");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, errors_semantic);
  tcase_add_test(tc, errors_syntax);
  tcase_add_test(tc, errors_deep_nesting);
  tcase_add_test(tc, errors_truncated);
  tcase_add_test(tc, errors_random);
  tcase_add_test(tc, errors_oom);
  tcase_add_test(tc, module_partial);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(parse_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failures = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failures ? 1 : 0;
}
