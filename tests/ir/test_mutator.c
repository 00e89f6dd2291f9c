/* test_mutator.c — the shared copy-on-write rewriter (ir/mutator.h) and
 * exact expression equality (ir_expr_equal): the identity walk returns the
 * same pointer for every node kind, a rename rebuilds only the path to the
 * renamed var, a pre hook's replacement is not walked, a post hook sees the
 * rebuilt children, the one-shot forms pass hooks and failure through,
 * buffer remapping reaches every use, and allocation
 * failures at every point are reported, never crash. */
#include <check.h>
#include <math.h>
#include <stdlib.h>

#include "ir/ir.h"
#include "ir/mutator.h"
#include "ir/struct.h"

#include "irb.h"

/* ---- one node of every kind -------------------------------------------- */

static ir_var *X, *Y;
static ir_buffer *BA, *BC;

static int every_expr(ir_expr **out) {
  X = VAR("x");
  Y = VAR("y");
  BA = BUF("A", ir_dt(IR_F32), 1, I(16));
  BC = BUF("C", ir_dt(IR_F32), 1, I(16));
  int n = 0;
  out[n++] = I(3);
  out[n++] = F(1.5);
  out[n++] = V(X);
  for (int k = IR_ADD; k <= IR_GE; k++) out[n++] = B2((ir_expr_kind)k, V(X), I(2));
  out[n++] = B2(IR_AND, ir_bool(A, true), B2(IR_LT, V(X), I(1)));
  out[n++] = B2(IR_OR, ir_bool(A, false), B2(IR_LT, V(X), I(1)));
  out[n++] = ir_not(A, B2(IR_LT, V(X), I(1)));
  out[n++] = ir_select(A, B2(IR_LT, V(X), I(1)), F(1), F(2));
  out[n++] = ir_cast(A, ir_dt(IR_I32), V(X));
  ir_expr *arg = LD(BA, 1, V(X));
  out[n++] = ir_call(A, IR_EXP, ir_dt(IR_F32), 1, &arg);
  out[n++] = LD(BA, 1, V(X));
  out[n++] = ir_ramp(A, V(X), I(1), 4);
  out[n++] = ir_broadcast(A, V(X), 4);
  ir_expr *eargs[2] = {V(X), ir_str(A, "row_major")};
  out[n++] = ir_call_extern(A, "llvm.foo", ir_dt(IR_F32), 2, eargs);
  out[n++] = ir_access_ptr(A, BA, V(X), IR_ACCESS_READ);
  out[n++] = ir_reinterpret(A, ir_dt(IR_I32), F(1));
  out[n++] = ir_str(A, "s");
  for (int i = 0; i < n; i++) ck_assert_ptr_nonnull(out[i]);
  return n;
}

/* A block realize with iters, regions, init, body, an allocation and an
 * annotated loop; plus every other statement kind in a seq. */
static ir_stmt *every_stmt(void) {
  ir_expr *ex[64];
  int n = every_expr(ex);
  ir_var *vi = VAR("vi"), *i = VAR("i"), *t = VAR("t");
  ir_buffer *tmp = BUF("T", ir_dt(IR_F32), 1, V(Y));
  ir_block *b = ir_block_new(A, "blk");
  b->niter = 1;
  b->iters = TS_ANEWN(A, ir_iter_var, 1);
  b->iters[0] = (ir_iter_var){vi, {I(0), I(16)}, IR_ITER_R};
  b->nreads = b->nwrites = 1;
  b->reads = TS_ANEW(A, ir_region);
  b->writes = TS_ANEW(A, ir_region);
  *b->reads = REG(BA, 1, V(vi));
  *b->writes = REG(BC, 1, I(0));
  b->init = ST(BC, F(0), 1, I(0));
  b->body = ST(BC, B2(IR_ADD, LD(BC, 1, I(0)), LD(BA, 1, V(vi))), 1, I(0));
  b->nalloc = 1;
  b->allocs = TS_ANEWN(A, ir_buffer *, 1);
  b->allocs[0] = tmp;
  ir_expr *iv = V(i);
  ir_stmt *rz = ir_realize(A, b, &iv, B2(IR_LT, V(i), V(Y)));
  ir_stmt *loop = FOR(i, I(16), IR_FOR_SERIAL, rz);
  ck_assert_int_eq(ir_annot_set(A, &loop->u.loop.nannot, &loop->u.loop.annots,
                                (ir_annot){.key = "e", .kind = IR_ANN_EXPR, .v.e = V(Y)}), TS_OK);
  ir_stmt *store = ST(BC, LD(BA, 1, V(X)), 1, V(X));
  store->u.store.predicate = B2(IR_LT, V(X), I(8));
  ir_stmt *kids[] = {
      loop,
      ir_if(A, B2(IR_LT, V(X), I(1)), ST(BC, F(1), 1, I(0)), ST(BC, F(2), 1, I(1))),
      ir_let(A, t, V(Y), ST(BC, F(3), 1, V(t))),
      ir_allocate(A, BUF("U", ir_dt(IR_F32), 1, V(Y)), ST(BC, F(4), 1, I(0))),
      ir_evaluate(A, I(0)),
      store,
  };
  ir_stmt *all = ir_seq(A, 6, kids);
  ir_stmt *evals[64];
  for (int k = 0; k < n; k++) evals[k] = ir_evaluate(A, ex[k]);
  ir_stmt *two[2] = {all, ir_seq(A, n, evals)};
  return ir_seq(A, 2, two);
}

static ir_expr *null_pre_e(ir_mutator *m, ir_expr *e) {
  (void)e;
  (*(int *)m->ctx)++;
  return NULL;
}
static ir_stmt *null_pre_s(ir_mutator *m, ir_stmt *s) {
  (void)s;
  (*(int *)m->ctx)++;
  return NULL;
}
static ir_expr *null_post_e(ir_mutator *m, const ir_expr *o, ir_expr *e) {
  (void)m;
  ck_assert_ptr_eq(o, e); /* nothing changed below */
  return NULL;
}
static ir_stmt *null_post_s(ir_mutator *m, const ir_stmt *o, ir_stmt *s) {
  (void)m;
  ck_assert_ptr_eq(o, s);
  return NULL;
}

START_TEST(identity_same_pointer) {
  ir_stmt *s = every_stmt(); /* sets X, Y, BA, BC */
  ir_expr *ex[64];
  int n = every_expr(ex);
  ck_assert_int_eq(n, IR_EXPR_KIND_COUNT);
  for (int hooks = 0; hooks < 2; hooks++) {
    int visits = 0;
    ir_mutator m;
    ir_mutator_init(&m, A);
    if (hooks) {
      m.ctx = &visits;
      m.pre_expr = null_pre_e;
      m.pre_stmt = null_pre_s;
      m.post_expr = null_post_e;
      m.post_stmt = null_post_s;
    }
    for (int k = 0; k < n; k++) ck_assert_ptr_eq(ir_mutate_expr(&m, ex[k]), ex[k]);
    ck_assert_ptr_eq(ir_mutate_stmt(&m, s), s);
    ck_assert(!m.failed);
    if (hooks) ck_assert_int_gt(visits, 100);
    ir_mutator_fini(&m);
  }
}
END_TEST

/* ---- rename ------------------------------------------------------------ */

static ir_expr *rename_x(ir_mutator *m, ir_expr *e) {
  if (e->kind != IR_VAR || e->u.var != X) return NULL;
  return ir_var_ref(m->arena, m->ctx);
}

START_TEST(rename_rebuilds_only_the_path) {
  ir_stmt *s = every_stmt();
  ir_mutator m;
  ir_mutator_init(&m, A);
  ir_var *z = VAR("z");
  m.ctx = z;
  m.pre_expr = rename_x;
  ir_stmt *n = ir_mutate_stmt(&m, s);
  ck_assert(!m.failed);
  ck_assert_ptr_ne(n, s);
  ck_assert(!ir_stmt_uses_var(n, X));
  ck_assert(ir_stmt_uses_var(n, z));
  ck_assert(ir_stmt_uses_var(s, X)); /* the original is untouched */
  ir_stmt *o0 = s->u.seq.stmts[0], *n0 = n->u.seq.stmts[0];
  /* the loop does not mention x: shared, as are the let and allocate */
  ck_assert_ptr_eq(n0->u.seq.stmts[0], o0->u.seq.stmts[0]);
  ck_assert_ptr_eq(n0->u.seq.stmts[2], o0->u.seq.stmts[2]);
  ck_assert_ptr_eq(n0->u.seq.stmts[3], o0->u.seq.stmts[3]);
  /* the if: its cond rebuilt, its branches shared */
  ir_stmt *oi = o0->u.seq.stmts[1], *ni = n0->u.seq.stmts[1];
  ck_assert_ptr_ne(ni, oi);
  ck_assert_ptr_eq(ni->u.ifs.then_s, oi->u.ifs.then_s);
  ck_assert_ptr_eq(ni->u.ifs.else_s, oi->u.ifs.else_s);
  ck_assert_ptr_eq(ni->u.ifs.cond->u.bin.b, oi->u.ifs.cond->u.bin.b); /* the literal 1 */
  /* the store's predicate x < 8: 8 shared */
  ir_stmt *os = o0->u.seq.stmts[5], *ns = n0->u.seq.stmts[5];
  ck_assert_ptr_eq(ns->u.store.predicate->u.bin.b, os->u.store.predicate->u.bin.b);
  ck_assert_ptr_eq(ns->u.store.buf, os->u.store.buf);
  /* a literal-only evaluate is shared */
  ck_assert_ptr_eq(n->u.seq.stmts[1]->u.seq.stmts[0], s->u.seq.stmts[1]->u.seq.stmts[0]);
  ir_mutator_fini(&m);
}
END_TEST

/* ---- pre-hook replacement, post-hook view ------------------------------- */

static int walked_below;
static ir_expr *replace_add(ir_mutator *m, ir_expr *e) {
  if (e->kind == IR_VAR) walked_below++;
  return e->kind == IR_ADD ? ir_i64(m->arena, 42) : NULL;
}

START_TEST(pre_replacement_stops_recursion) {
  ir_expr *e = B2(IR_MUL, B2(IR_ADD, V(VAR("a")), V(VAR("b"))), I(3));
  ir_mutator m;
  ir_mutator_init(&m, A);
  m.pre_expr = replace_add;
  walked_below = 0;
  ir_expr *n = ir_mutate_expr(&m, e);
  ck_assert_int_eq(walked_below, 0);
  ck_assert_int_eq(n->kind, IR_MUL);
  ck_assert_int_eq(n->u.bin.a->u.ival, 42);
  ck_assert_ptr_eq(n->u.bin.b, e->u.bin.b);
  ir_mutator_fini(&m);
}
END_TEST

static ir_expr *post_check(ir_mutator *m, const ir_expr *orig, ir_expr *e) {
  if (e->kind != IR_ADD) return NULL;
  ck_assert_ptr_ne(e, orig);
  ck_assert_int_eq(e->u.bin.a->kind, IR_VAR);
  ck_assert_ptr_eq(e->u.bin.a->u.var, m->ctx); /* already renamed */
  ck_assert_ptr_eq(orig->u.bin.a->u.var, X);
  return ir_binop(m->arena, IR_SUB, e->u.bin.a, e->u.bin.b);
}

START_TEST(post_sees_rebuilt_children) {
  ir_expr *ex[64];
  every_expr(ex);
  ir_var *z = VAR("z");
  ir_var_map vm;
  ir_var_map_init(&vm);
  ck_assert_int_eq(ir_var_map_put(&vm, X, V(z)), TS_OK);
  ir_mutator m;
  ir_mutator_init(&m, A);
  m.ctx = z;
  m.vars = &vm;
  m.post_expr = post_check;
  ir_expr *n = ir_mutate_expr(&m, ex[3]); /* x + 2 */
  ck_assert_int_eq(n->kind, IR_SUB);
  ck_assert_ptr_eq(n->u.bin.b, ex[3]->u.bin.b);
  ir_mutator_fini(&m);
  ir_var_map_fini(&vm);
}
END_TEST

/* ---- one-shot forms ------------------------------------------------------ */

static ir_stmt *fail_on_store(ir_mutator *m, ir_stmt *s) {
  if (s->kind != IR_STORE) return NULL;
  ir_mutator_fail(m);
  return NULL;
}

static ir_expr *add_to_sub(ir_mutator *m, const ir_expr *orig, ir_expr *e) {
  if (orig->kind != IR_ADD) return NULL;
  (*(int *)m->ctx)++;
  return ir_binop(m->arena, IR_SUB, e->u.bin.a, e->u.bin.b);
}

START_TEST(rewrite_one_shot) {
  /* the hooks and ctx reach the walk */
  ir_expr *e = B2(IR_MUL, B2(IR_ADD, V(VAR("a")), I(1)), I(3));
  static const ir_mutator_hooks post = {.post_expr = add_to_sub};
  bool failed = false;
  int seen = 0;
  ir_expr *n = ir_rewrite_expr(A, &post, &seen, e, &failed);
  ck_assert(!failed);
  ck_assert_int_eq(seen, 1);
  ck_assert_int_eq(n->kind, IR_MUL);
  ck_assert_int_eq(n->u.bin.a->kind, IR_SUB);
  ck_assert_int_eq(e->u.bin.a->kind, IR_ADD); /* the original untouched */
  /* no hooks: the same tree back; a failing hook sets *failed */
  ir_stmt *s = every_stmt();
  static const ir_mutator_hooks none = {0}, bad = {.pre_stmt = fail_on_store};
  ck_assert_ptr_eq(ir_rewrite_stmt(A, &none, NULL, s, &failed), s);
  ck_assert(!failed);
  ir_rewrite_stmt(A, &bad, NULL, s, &failed);
  ck_assert(failed);
}
END_TEST

/* ---- buffer remapping --------------------------------------------------- */

typedef struct buf_count {
  const ir_buffer *b;
  int n;
} buf_count;

static bool count_buf_e(void *ctx, const ir_expr *e) {
  buf_count *c = ctx;
  if ((e->kind == IR_LOAD && e->u.load.buf == c->b) || (e->kind == IR_ACCESS_PTR && e->u.ptr.buf == c->b)) c->n++;
  return true;
}
static bool count_buf_s(void *ctx, const ir_stmt *s) {
  buf_count *c = ctx;
  if (s->kind == IR_STORE && s->u.store.buf == c->b) c->n++;
  if (s->kind == IR_BLOCK_REALIZE) {
    const ir_block *b = s->u.realize.block;
    for (int i = 0; i < b->nreads; i++) c->n += b->reads[i].buf == c->b;
  }
  return true;
}

static int uses_of(const ir_stmt *s, const ir_buffer *b) {
  buf_count c = {b, 0};
  ir_visitor v = {count_buf_e, count_buf_s, &c};
  ir_visit_stmt(&v, s);
  return c.n;
}

START_TEST(buffer_remap_every_use) {
  ir_stmt *s = every_stmt();
  ir_buffer *nb = BUF("A2", ir_dt(IR_F32), 1, I(16));
  int before = uses_of(s, BA);
  ck_assert_int_gt(before, 5);
  ir_stmt *n = ir_subst_buffer(A, s, BA, nb);
  ck_assert_int_eq(uses_of(n, BA), 0);
  ck_assert_int_eq(uses_of(n, nb), before);
  ck_assert_int_eq(uses_of(s, BA), before);
}
END_TEST

/* ---- exact equality ----------------------------------------------------- */

START_TEST(expr_equal_exact) {
  ir_expr *ex[64], *ey[64];
  int n = every_expr(ex);
  ir_var *x1 = X;
  ir_buffer *a1 = BA;
  every_expr(ey); /* fresh vars and buffers */
  for (int i = 0; i < n; i++) {
    ck_assert(ir_expr_equal(ex[i], ex[i]));
    for (int j = 0; j < n; j++)
      if (i != j) ck_assert(!ir_expr_equal(ex[i], ex[j]));
  }
  ir_var_map vm;
  ir_var_map_init(&vm);
  ck_assert_int_eq(ir_var_map_put(&vm, X, V(x1)), TS_OK);
  for (int i = 0; i < n; i++) {
    ir_expr *back = ir_subst_expr(A, ey[i], &vm);
    /* same vars now; loads and pointers of another buffer still differ */
    bool has_buf = ey[i]->kind == IR_LOAD || ey[i]->kind == IR_ACCESS_PTR || ey[i]->kind == IR_CALL;
    ck_assert_int_eq(ir_expr_equal(ex[i], back), !has_buf);
    ck_assert(ir_struct_equal_expr(ex[i], ey[i]));
  }
  (void)a1;
  ir_var_map_fini(&vm);
  ck_assert(ir_expr_equal(F(NAN), F(NAN)));
  ck_assert(!ir_expr_equal(F(0.0), F(-0.0)));
  ck_assert(!ir_expr_equal(ir_ramp(A, I(0), I(1), 4), ir_ramp(A, I(0), I(1), 8)));
  ck_assert(!ir_expr_equal(ir_broadcast(A, I(0), 4), ir_broadcast(A, I(0), 8)));
  ck_assert(ir_expr_equal(NULL, NULL));
  ck_assert(!ir_expr_equal(I(0), NULL));
}
END_TEST

/* ir_stmt_with_child: one slot replaced in a copy, the original untouched;
 * the same child gives back the same node; a slot the kind lacks fails. */
START_TEST(with_child_replaces_one_slot) {
  ir_expr *ex[64];
  (void)every_expr(ex); /* X, BC */
  ir_mutator m;
  ir_mutator_init(&m, A);
  ir_stmt *a = ST(BC, F(1), 1, I(0)), *b = ST(BC, F(2), 1, I(1)), *c = ir_evaluate(A, I(0));
  ir_stmt *ifs = ir_if(A, B2(IR_LT, V(X), I(1)), a, b);
  ck_assert_ptr_eq(ir_stmt_with_child(&m, ifs, 0, a), ifs);
  ir_stmt *n = ir_stmt_with_child(&m, ifs, 1, c);
  ck_assert_ptr_ne(n, ifs);
  ck_assert_ptr_eq(n->u.ifs.then_s, a);
  ck_assert_ptr_eq(n->u.ifs.else_s, c);
  ck_assert_ptr_eq(n->u.ifs.cond, ifs->u.ifs.cond);
  ck_assert_ptr_eq(ifs->u.ifs.else_s, b);
  ir_stmt *kids[] = {a, b};
  ir_stmt *seq = ir_seq(A, 2, kids);
  n = ir_stmt_with_child(&m, seq, 1, c);
  ck_assert_int_eq(n->u.seq.n, 2);
  ck_assert_ptr_eq(n->u.seq.stmts[0], a);
  ck_assert_ptr_eq(n->u.seq.stmts[1], c);
  ck_assert_ptr_eq(seq->u.seq.stmts[1], b);
  ir_stmt *loop = FOR(X, I(4), IR_FOR_SERIAL, a);
  n = ir_stmt_with_child(&m, loop, 0, c);
  ck_assert_ptr_eq(n->u.loop.body, c);
  ck_assert_ptr_eq(n->u.loop.var, X);
  ck_assert_ptr_eq(loop->u.loop.body, a);
  ck_assert(!m.failed);
  ck_assert_ptr_eq(ir_stmt_with_child(&m, loop, 1, c), loop);
  ck_assert(m.failed);
  ir_mutator_fini(&m);
}
END_TEST

/* ---- fault injection ---------------------------------------------------- */

START_TEST(alloc_failures_reported) {
  ir_stmt *s = every_stmt();
  ir_var *z = VAR("z");
  ir_var_map vm;
  ir_var_map_init(&vm);
  ck_assert_int_eq(ir_var_map_put(&vm, X, V(z)), TS_OK);
  ck_assert_int_eq(ir_var_map_put(&vm, Y, I(7)), TS_OK);
  ir_func *f = ir_func_new(A, "f");
  f->body = s;
  ir_buffer *params[] = {BA, BC};
  f->params = params;
  f->nparams = 2;
  f->ninputs = 1;
  ir_var *syms[] = {Y};
  f->syms = syms;
  f->nsyms = 1;
  int failed = 0, ok = 0;
  for (long k = 1; k < 400; k++) {
    ts_arena *a = ts_arena_new();
    ck_assert_ptr_nonnull(a);
    ts_alloc_fail_after(k);
    ir_stmt *n = ir_subst_stmt(a, s, &vm);
    ir_func *c = ir_func_copy(a, f);
    ts_alloc_fail_after(0);
    if (n) ck_assert(!ir_stmt_uses_var(n, X) && !ir_stmt_uses_var(n, Y));
    char why[512];
    if (c) ck_assert_msg(ir_struct_equal_func_explain(c, f, why, sizeof why), "%s", why);
    if (n && c) ok++;
    else failed++;
    ts_arena_free(a);
  }
  ck_assert_int_gt(failed, 0);
  ck_assert_int_gt(ok, 0);
  ir_var_map_fini(&vm);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("mutator");
  TCase *t = tcase_create("core");
  tcase_add_checked_fixture(t, setup, teardown);
  tcase_add_test(t, identity_same_pointer);
  tcase_add_test(t, rename_rebuilds_only_the_path);
  tcase_add_test(t, pre_replacement_stops_recursion);
  tcase_add_test(t, post_sees_rebuilt_children);
  tcase_add_test(t, rewrite_one_shot);
  tcase_add_test(t, buffer_remap_every_use);
  tcase_add_test(t, expr_equal_exact);
  tcase_add_test(t, with_child_replaces_one_slot);
  tcase_add_test(t, alloc_failures_reported);
  suite_add_tcase(s, t);
  return s;
}

int main(void) {
  SRunner *r = srunner_create(suite());
  srunner_run_all(r, CK_NORMAL);
  int nf = srunner_ntests_failed(r);
  srunner_free(r);
  return nf ? EXIT_FAILURE : EXIT_SUCCESS;
}
