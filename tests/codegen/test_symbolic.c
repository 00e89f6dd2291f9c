/* test_symbolic.c — kernels with symbolic sizes (codegen/llvm.h's ABI: the
 * size values follow the tensor pointers in args, the metadata names them).
 * A symbolic-m matmul, an elementwise kernel over [n, 7] and a two-sym
 * kernel (and the transformer forms: a projection over symbolic batch and
 * sequence, attention's P.V) are built once — unscheduled and with the default schedule
 * (splits by the vector width on a symbolic extent leave guarded tails) —
 * JIT-compiled and as shared libraries loaded through the runtime, then run
 * at several sizes (odd and prime among them) and compared with the
 * reference interpreter on the same inputs. A function bound at sizes whose
 * shapes keep the substituted expression (`1 * 6`) has constant dims in its
 * metadata (a bound model task is measured from them). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codegen/llvm.h"
#include "ir/interp.h"
#include "ir/parse.h"
#include "ir/print.h"
#include "schedule/util.h"
#include "tuner/build.h"

static const char *MATMUL =
    "kernel mm(A: f32[m, 24], B: f32[24, 17]) -> C: f32[m, 17] {\n"
    "  C[i, j] += A[i, k] * B[k, j]\n"
    "}\n";
static const char *ELEMWISE =
    "kernel ew(X: f32[n, 7], Y: f32[n, 7]) -> Z: f32[n, 7] {\n"
    "  Z[i, j] = max(X[i, j] * 2.0 + Y[i, j], 0.0)\n"
    "}\n";
static const char *TWO =
    "kernel two(X: f32[rows, cols]) -> Y: f32[rows] {\n"
    "  Y[i] += exp(X[i, j])\n"
    "}\n";

/* the transformer forms: a projection over symbolic batch and sequence
 * (no constant rows loop: one row, four vectors of cols), and attention's
 * P.V with the reduction over the symbolic sequence; K prime */
static const char *BATCHED =
    "kernel proj(A: f32[b, s, 13], B: f32[13, 64]) -> C: f32[b, s, 64] {\n"
    "  C[i, j, n] += A[i, j, k] * B[k, n]\n"
    "}\n";
static const char *PV =
    "kernel pv(P: f32[h, s, s], V: f32[h, s, 48]) -> O: f32[h, s, 48] {\n"
    "  O[i, j, n] += P[i, j, k] * V[i, k, n]\n"
    "}\n";

static char tmpdir[64];

static void setup(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/tessel_sym_XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}
static void teardown(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
}

static ir_func *parse(ts_arena *a, const char *src) {
  ir_func *f = NULL;
  ts_diag d;
  ts_diag_clear(&d);
  ts_status st = ir_parse_func(a, src, strlen(src), "test", &f, &d);
  ck_assert_msg(st == TS_OK, "parse: %s", d.msg);
  ck_assert_int_gt(f->nsyms, 0);
  return f;
}

/* Runs f (reference) and the built kernel at the given sizes on identical
 * seeded inputs; every output element must agree within rtol 1e-5 / atol
 * 1e-5 (the kernel's f32 math vs the interpreter's). */
static void check_at(const ir_func *f, tsrt_kernel_fn entry, const int64_t *syms) {
  ts_diag d;
  ts_diag_clear(&d);
  ir_tensor ref[8], got[8];
  ck_assert_int_le(f->nparams, 8);
  ck_assert_msg(ir_tensors_for_func(f, syms, ref, &d) == TS_OK, "%s", d.msg);
  ck_assert_msg(ir_tensors_for_func(f, syms, got, &d) == TS_OK, "%s", d.msg);
  void *args[16];
  for (int i = 0; i < f->nparams; i++) {
    if (i < f->ninputs) {
      ir_tensor_fill_random(&ref[i], 7 + (uint64_t)i);
      memcpy(got[i].data, ref[i].data,
             (size_t)ir_tensor_numel(&ref[i]) * (size_t)ir_dtype_bytes(ref[i].dtype));
    } else {
      /* poison the kernel's outputs: it must write every element */
      memset(got[i].data, 0x7f, (size_t)ir_tensor_numel(&got[i]) * (size_t)ir_dtype_bytes(got[i].dtype));
    }
    /* the kernel wants 64-byte aligned buffers */
    size_t nb = (size_t)ir_tensor_numel(&got[i]) * (size_t)ir_dtype_bytes(got[i].dtype);
    void *al = aligned_alloc(64, (nb + 63) / 64 * 64 + 64);
    ck_assert_ptr_nonnull(al);
    memcpy(al, got[i].data, nb);
    free(got[i].data);
    got[i].data = al;
    args[i] = al;
  }
  int64_t symv[8];
  for (int k = 0; k < f->nsyms; k++) {
    symv[k] = syms[k];
    args[f->nparams + k] = &symv[k];
  }
  ck_assert_msg(ir_interp_run(f, ref, &d) == TS_OK, "interp: %s", d.msg);
  ck_assert_int_eq(entry(args), 0);
  for (int i = f->ninputs; i < f->nparams; i++) {
    double err = 0;
    ck_assert_msg(ir_tensor_allclose(&got[i], &ref[i], 1e-5, 1e-5, &err),
                  "%s at %s=%lld: output %s differs (max abs err %g)", f->name, f->syms[0]->name,
                  (long long)syms[0], f->params[i]->name, err);
  }
  for (int i = 0; i < f->nparams; i++) {
    ir_tensor_free(&ref[i]);
    ir_tensor_free(&got[i]);
  }
}

/* Schedules (default schedule or none), lowers, and builds f both ways;
 * runs each at every row of sizes (nsizes x f->nsyms). */
static bool count_local(void *ctx, const ir_stmt *st) {
  if (st->kind == IR_BLOCK_REALIZE)
    for (int i = 0; i < st->u.realize.block->nalloc; i++) {
      const char *sc = st->u.realize.block->allocs[i]->scope;
      if (sc && !strcmp(sc, "local")) (*(int *)ctx)++;
    }
  return true;
}

/* local accumulator buffers of the last scheduled function (build_and_check) */
static int last_local;

static void build_and_check(const char *src, bool schedule, const int64_t *sizes, int nsizes) {
  ts_arena *a = ts_arena_new();
  ir_func *f = parse(a, src);
  ts_diag d;
  ts_diag_clear(&d);
  cg_target t;
  ck_assert_int_eq(cg_target_parse("llvm", &t, &d), TS_OK);
  ck_assert_int_eq(cg_llvm_resolve_target(&t, &d), TS_OK);
  const ir_func *sched = f;
  sch_traced *tr = NULL;
  if (schedule) {
    ck_assert_msg(tun_schedule(f, NULL, &t, &tr, &d) == TS_OK, "schedule: %s", d.msg);
    sched = sch_traced_func(tr);
  }
  last_local = 0;
  ir_visitor lv = {.stmt = count_local, .ctx = &last_local};
  ir_visit_stmt(&lv, sched->body);
  cg_lowered l;
  ck_assert_msg(cg_lower(a, sched, &t, &l, &d) == TS_OK, "lower: %s", d.msg);
  /* JIT */
  cg_jit *j = NULL;
  ck_assert_msg(cg_llvm_jit(&l, &t, &j, &d) == TS_OK, "jit: %s", d.msg);
  const tsrt_kernel_meta *meta = cg_jit_meta(j);
  ck_assert_int_eq(meta->abi_version, TSRT_ABI_VERSION);
  ck_assert_int_eq(meta->nsyms, f->nsyms);
  for (int k = 0; k < f->nsyms; k++) ck_assert_str_eq(meta->syms[k], f->syms[k]->name);
  /* the first param's first dim is the first size var in all three kernels */
  ck_assert_int_eq(meta->params[0].shape[0], TSRT_DIM_SYM(0));
  ck_assert_int_eq(tsrt_param_bytes(&meta->params[0]), 0);
  for (int s = 0; s < nsizes; s++) check_at(f, cg_jit_entry(j), sizes + s * f->nsyms);
  cg_jit_free(j);
  /* shared library through the runtime loader */
  char so[128];
  snprintf(so, sizeof so, "%s/%s%d.so", tmpdir, f->name, schedule);
  ck_assert_msg(cg_llvm_build_shared(&l, &t, so, &d) == TS_OK, "shared: %s", d.msg);
  tsrt_module mod;
  ts_diag err = {0};
  ck_assert_msg(tsrt_module_load(so, &mod, &err) == 0, "%s", err.msg);
  ck_assert_int_eq(mod.meta->nsyms, f->nsyms);
  for (int s = 0; s < nsizes; s++) check_at(f, mod.entry, sizes + s * f->nsyms);
  /* measurement cannot size symbolic params: refused, not crashed */
  tsrt_measure_opts mo = {.repeat = 1, .timeout_s = 10, .seed = 1};
  tsrt_measure_result r;
  tsrt_measure_inprocess(&mod, &mo, &r);
  ck_assert_int_eq(r.status, TS_ELOAD);
  ck_assert_ptr_nonnull(strstr(r.error, "symbolic"));
  tsrt_result_fini(&r);
  tsrt_module_unload(&mod);
  sch_traced_free(tr);
  ts_arena_free(a);
}

static const int64_t M_SIZES[] = {1, 7, 16, 33, 97};

START_TEST(matmul_unscheduled) { build_and_check(MATMUL, false, M_SIZES, 5); }
END_TEST
START_TEST(matmul_default_schedule) { build_and_check(MATMUL, true, M_SIZES, 5); }
END_TEST
START_TEST(elementwise_both) {
  build_and_check(ELEMWISE, false, M_SIZES, 5);
  build_and_check(ELEMWISE, true, M_SIZES, 5);
}
END_TEST
START_TEST(two_syms) {
  static const int64_t sizes[] = {1, 1, 5, 3, 13, 67, 64, 31};
  build_and_check(TWO, false, sizes, 4);
  build_and_check(TWO, true, sizes, 4);
}
END_TEST

/* symbolic outer loops (and a symbolic reduction) keep the register-tiled
 * default: a local accumulator tile */
START_TEST(transformer_forms) {
  static const int64_t bs[] = {1, 1, 2, 7, 3, 33, 1, 128};
  build_and_check(BATCHED, true, bs, 4);
  ck_assert_int_eq(last_local, 1);
  build_and_check(PV, true, bs, 4);
  ck_assert_int_eq(last_local, 1);
}
END_TEST

/* bound at b = 1, s = 6, the shape is the expression 1 * 6: the metadata
 * records 6 (no symbolic dim left: the measuring harness sizes from it) */
static const char *FLAT =
    "kernel flat(X: f32[b * s, 3]) -> Y: f32[b * s, 3] {\n"
    "  Y[i, j] = X[i, j] + 1.0\n"
    "}\n";

START_TEST(bound_product_dims_constant) {
  ts_arena *a = ts_arena_new();
  ir_func *f = parse(a, FLAT);
  ts_diag d;
  ts_diag_clear(&d);
  static const char *const names[] = {"b", "s"};
  static const int64_t vals[] = {1, 6};
  ir_func *g = ir_func_bind_syms(a, f, 2, names, vals, &d);
  ck_assert_msg(g != NULL, "bind: %s", d.msg);
  int64_t v;
  ck_assert_msg(!ir_as_int(g->params[0]->shape[0], &v), "the bound shape is no longer an expression");
  cg_target t;
  ck_assert_int_eq(cg_target_parse("llvm", &t, &d), TS_OK);
  ck_assert_int_eq(cg_llvm_resolve_target(&t, &d), TS_OK);
  cg_lowered l;
  ck_assert_msg(cg_lower(a, g, &t, &l, &d) == TS_OK, "lower: %s", d.msg);
  cg_jit *j = NULL;
  ck_assert_msg(cg_llvm_jit(&l, &t, &j, &d) == TS_OK, "jit: %s", d.msg);
  const tsrt_kernel_meta *meta = cg_jit_meta(j);
  for (int p = 0; p < 2; p++) {
    ck_assert_int_eq(meta->params[p].shape[0], 6);
    ck_assert_int_eq(meta->params[p].shape[1], 3);
    ck_assert_int_eq(tsrt_param_bytes(&meta->params[p]), 6 * 3 * 4);
  }
  cg_jit_free(j);
  ts_arena_free(a);
}
END_TEST

int main(void) {
  Suite *s = suite_create("codegen_symbolic");
  TCase *tc = tcase_create("symbolic");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, matmul_unscheduled);
  tcase_add_test(tc, matmul_default_schedule);
  tcase_add_test(tc, elementwise_both);
  tcase_add_test(tc, two_syms);
  tcase_add_test(tc, transformer_forms);
  tcase_add_test(tc, bound_product_dims_constant);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int nf = srunner_ntests_failed(sr);
  srunner_free(sr);
  return nf ? 1 : 0;
}
