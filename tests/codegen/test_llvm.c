/* test_llvm.c — the LLVM backend (codegen/llvm.h). Hand-built functions in
 * the lowered form (flat buffers, one index per access, ramp/broadcast
 * lanes, parallel/unrolled/vectorized loops, allocations) run three ways on
 * identical bytes — the reference interpreter, the in-process JIT and a
 * shared library linked with ld.lld and loaded through the runtime — and the
 * outputs must agree (exactly for integers and narrow floats, to rounding for
 * f32 math). The math intrinsics are also checked against libm over their
 * ranges and special values; artifacts' metadata is read back; an aarch64
 * object and shared library are produced and their ELF machine checked. */
#include <check.h>
#include <elf.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codegen/llvm.h"
#include "ir/interp.h"
#include "ir/print.h"
#include "ir/schedule/trace.h"
#include "ir/struct.h"
#include "ir/workloads/workloads.h"
#include "schedule/util.h"

static ts_arena *A;
static cg_target T;
static char tmpdir[64];
static int so_counter;
static const char *fail_context = ""; /* printed with build failures (a trace) */

/* ---- IR construction shorthands ---------------------------------------------- */

static ir_buffer *buf(const char *name, ir_dtype_code c, int64_t n) {
  ir_expr *sh = ir_i64(A, n);
  return ir_buffer_new(A, name, ir_dt(c), 1, &sh, "global");
}
static ir_buffer *sbuf(const char *name, ir_dtype_code c, int64_t n, const char *scope) {
  ir_expr *sh = ir_i64(A, n);
  return ir_buffer_new(A, name, ir_dt(c), 1, &sh, scope);
}
static ir_var *var(const char *n) { return ir_var_new(A, n, ir_dt(IR_I32)); }
static ir_expr *V(ir_var *v) { return ir_var_ref(A, v); }
static ir_expr *I(int64_t x) { return ir_i32(A, x); }
static ir_expr *F(double x) { return ir_float(A, ir_dt(IR_F32), x); }
static ir_expr *bin(ir_expr_kind k, ir_expr *a, ir_expr *b) { return ir_binop(A, k, a, b); }
static ir_expr *add(ir_expr *a, ir_expr *b) { return bin(IR_ADD, a, b); }
static ir_expr *mul(ir_expr *a, ir_expr *b) { return bin(IR_MUL, a, b); }
static ir_expr *ld(ir_buffer *b, ir_expr *i) { return ir_load(A, b, 1, &i); }
static ir_stmt *stv(ir_buffer *b, ir_expr *i, ir_expr *v) { return ir_store(A, b, 1, &i, v); }
static ir_stmt *loop(ir_var *v, int64_t ext, ir_for_kind k, ir_stmt *body) {
  return ir_for(A, v, I(0), I(ext), k, body);
}
static ir_expr *ramp(ir_expr *base, int lanes) { return ir_ramp(A, base, I(1), lanes); }
static ir_expr *bc(ir_expr *v, int lanes) { return ir_broadcast(A, v, lanes); }
static ir_expr *call1(ir_intrin op, ir_dtype t, ir_expr *x) { return ir_call(A, op, t, 1, &x); }

static ir_stmt *seqv(int n, ...) {
  ir_stmt *s[32];
  va_list ap;
  va_start(ap, n);
  for (int i = 0; i < n; i++) s[i] = va_arg(ap, ir_stmt *);
  va_end(ap);
  return ir_seq(A, n, s);
}

static ir_func *func(const char *name, int nin, int np, ir_buffer **ps, ir_stmt *body) {
  ir_func *f = ir_func_new(A, name);
  f->nparams = np;
  f->ninputs = nin;
  f->params = TS_ANEWN(A, ir_buffer *, np);
  for (int i = 0; i < np; i++) f->params[i] = ps[i];
  f->body = body;
  return f;
}

/* ---- running ---------------------------------------------------------------------- */

typedef void (*fill_fn)(int param, ir_tensor *t);

static void *aligned_copy(const void *src, size_t n) {
  void *p = aligned_alloc(64, (n + 63) & ~(size_t)63);
  ck_assert_ptr_nonnull(p);
  memcpy(p, src, n);
  return p;
}

static size_t tensor_bytes(const ir_tensor *t) {
  return (size_t)ir_tensor_numel(t) * (size_t)ir_dtype_bytes(t->dtype);
}

static void check_meta(const tsrt_kernel_meta *m, const ir_func *orig) {
  ck_assert_ptr_nonnull(m);
  ck_assert_int_eq(m->abi_version, TSRT_ABI_VERSION);
  ck_assert_int_eq(m->nparams, orig->nparams);
  ck_assert_int_eq(m->ninputs, orig->ninputs);
  ck_assert_str_eq(m->name, orig->name);
  char key[17];
  ck_assert_str_eq(m->workload_key, ir_workload_key(orig, key));
  for (int i = 0; i < orig->nparams; i++) {
    const ir_buffer *b = orig->params[i];
    ck_assert_str_eq(m->params[i].name, b->name);
    ck_assert_int_eq(m->params[i].dtype, b->dtype.code);
    ck_assert_int_eq(m->params[i].ndim, b->ndim);
    for (int j = 0; j < b->ndim; j++) {
      int64_t v;
      ck_assert(ir_as_int(b->shape[j], &v));
      ck_assert_int_eq(m->params[i].shape[j], v);
    }
  }
}

static void compare_outputs(const char *how, const ir_func *f, ir_tensor *ref, void **got,
                            double rtol, double atol) {
  for (int i = 0; i < f->nparams; i++) {
    ir_tensor g = ref[i];
    g.data = got[i];
    if (i < f->ninputs) {
      ck_assert_msg(!memcmp(g.data, ref[i].data, tensor_bytes(&g)), "%s: %s modified input %s", how,
                    f->name, f->params[i]->name);
      continue;
    }
    /* like ir_tensor_allclose, but NaN matches NaN and inf matches inf */
    int64_t n = ir_tensor_numel(&g);
    for (int64_t k = 0; k < n; k++) {
      double a = ir_tensor_get(&g, k), b = ir_tensor_get(&ref[i], k);
      bool ok = (isnan(a) && isnan(b)) || a == b || fabs(a - b) <= atol + rtol * fabs(b);
      if (!ok)
        ck_abort_msg("%s: %s output %s differs from the interpreter at %lld: got %.9g, want %.9g", how,
                     f->name, f->params[i]->name, (long long)k, a, b);
    }
  }
}

/* Runs f (lowered form; orig gives the metadata, NULL = f) in the
 * interpreter, the JIT and a shared library on the same bytes. */
static void check_kernel_ex(const ir_func *f, const ir_func *orig, double rtol, double atol,
                            fill_fn fill, bool want_so) {
  ts_diag d;
  ts_diag_clear(&d);
  int np = f->nparams;
  ck_assert_int_le(np, 16);
  ir_tensor ref[16];
  void *init[16], *args[16];
  tu_ok(ir_tensors_for_func(f, NULL, ref, &d), &d);
  for (int i = 0; i < np; i++) {
    if (fill) fill(i, &ref[i]);
    else tsrt_fill_random(ref[i].dtype.code, ref[i].data, ir_tensor_numel(&ref[i]), 100 + (uint64_t)i);
    init[i] = aligned_copy(ref[i].data, tensor_bytes(&ref[i]));
  }
  tu_ok(ir_interp_run(f, ref, &d), &d);
  cg_lowered l = {(ir_func *)f, orig ? orig : f};

  cg_jit *j = NULL;
  ts_status st = cg_llvm_jit(&l, &T, &j, &d);
  if (st != TS_OK) {
    char *text = ir_func_to_string(f);
    ck_abort_msg("JIT of %s: %s\n%s\n%s", f->name, d.msg, fail_context, text ? text : "");
  }
  check_meta(cg_jit_meta(j), l.orig);
  for (int i = 0; i < np; i++) args[i] = aligned_copy(init[i], tensor_bytes(&ref[i]));
  ck_assert_int_eq(cg_jit_entry(j)(args), 0);
  compare_outputs("jit", f, ref, args, rtol, atol);
  for (int i = 0; i < np; i++) free(args[i]);
  cg_jit_free(j);
  if (!want_so) {
    for (int i = 0; i < np; i++) {
      free(init[i]);
      ir_tensor_free(&ref[i]);
    }
    return;
  }

  char path[128];
  snprintf(path, sizeof path, "%s/k%d_%s.so", tmpdir, so_counter++, f->name);
  tu_ok(cg_llvm_build_shared(&l, &T, path, &d), &d);
  tsrt_module m;
  ts_diag md = {0};
  ck_assert_msg(tsrt_module_load(path, &m, &md) == 0, "%s", md.msg);
  check_meta(m.meta, l.orig);
  for (int i = 0; i < np; i++) args[i] = aligned_copy(init[i], tensor_bytes(&ref[i]));
  ck_assert_int_eq(m.entry(args), 0);
  compare_outputs(".so", f, ref, args, rtol, atol);
  for (int i = 0; i < np; i++) {
    free(args[i]);
    free(init[i]);
    ir_tensor_free(&ref[i]);
  }
  tsrt_module_unload(&m);
  unlink(path);
}

static void check_kernel_opts(const ir_func *f, const ir_func *orig, double rtol, double atol,
                              fill_fn fill) {
  check_kernel_ex(f, orig, rtol, atol, fill, true);
}

static void check_kernel(const ir_func *f, double rtol, double atol) {
  check_kernel_opts(f, NULL, rtol, atol, NULL);
}

/* ---- fixtures ------------------------------------------------------------------------ */

static void suite_setup(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/tessel_llvm_XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void suite_teardown(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
}

static void setup(void) {
  A = ts_arena_new();
  memset(&T, 0, sizeof T);
  T.kind = CG_TARGET_LLVM;
  ts_diag d;
  ts_diag_clear(&d);
  tu_ok(cg_llvm_resolve_target(&T, &d), &d);
}

static void teardown(void) { ts_arena_free(A); }

/* ---- targets -------------------------------------------------------------------------- */

START_TEST(test_resolve_target) {
  ck_assert(T.triple[0] != '\0');
  ck_assert(T.cpu[0] != '\0');
  ck_assert_int_ge(T.vector_bits, 128);
  ck_assert_int_eq(T.num_cores, (int)sysconf(_SC_NPROCESSORS_ONLN));
  if (strstr(T.attrs, "+avx512f")) ck_assert_int_eq(T.vector_bits, 512);
  else if (strstr(T.attrs, "+avx2")) ck_assert_int_eq(T.vector_bits, 256);
  /* a cross target keeps its triple, gets a generic cpu and 128-bit vectors */
  cg_target t;
  memset(&t, 0, sizeof t);
  t.kind = CG_TARGET_LLVM;
  snprintf(t.triple, sizeof t.triple, "aarch64-linux-gnu");
  ts_diag d;
  ts_diag_clear(&d);
  tu_ok(cg_llvm_resolve_target(&t, &d), &d);
  ck_assert_str_eq(t.triple, "aarch64-linux-gnu");
  ck_assert_str_eq(t.cpu, "generic");
  ck_assert_int_eq(t.vector_bits, 128);
  /* parsed target strings: the host's vectors win over the parser's guess */
  static const char *const host_like[] = {"llvm", "llvm -mcpu=native", "llvm -mtriple=x86_64-linux-gnu"};
  for (int i = 0; i < 3; i++) {
#if !defined(__x86_64__)
    if (i == 2) break;
#endif
    ts_diag_clear(&d);
    tu_ok(cg_target_parse(host_like[i], &t, &d), &d);
    tu_ok(cg_llvm_resolve_target(&t, &d), &d);
    ck_assert_msg(!strcmp(t.cpu, T.cpu), "%s: cpu %s, host %s", host_like[i], t.cpu, T.cpu);
    ck_assert_msg(t.vector_bits == T.vector_bits, "%s: %d bits, host %d", host_like[i], t.vector_bits,
                  T.vector_bits);
  }
  tu_ok(cg_target_parse("llvm -mtriple=x86_64-linux-gnu -mcpu=znver4", &t, &d), &d);
  tu_ok(cg_llvm_resolve_target(&t, &d), &d);
  ck_assert_int_eq(t.vector_bits, 512);
  tu_ok(cg_target_parse("llvm -mtriple=x86_64-linux-gnu -mcpu=haswell -mattr=+avx2,+fma", &t, &d), &d);
  tu_ok(cg_llvm_resolve_target(&t, &d), &d);
  ck_assert_int_eq(t.vector_bits, 256);
  /* an unknown triple is refused */
  snprintf(t.triple, sizeof t.triple, "riscv64-linux-gnu");
  t.cpu[0] = '\0';
  t.vector_bits = 0;
  ck_assert_int_eq(cg_llvm_resolve_target(&t, &d), TS_EUNSUPPORTED);
  ck_assert(strstr(d.msg, "riscv64") != NULL);
}
END_TEST

/* ---- kernels ---------------------------------------------------------------------------- */

/* C[i*16 : i*16+16] = A[..] + B[..] in 16 lanes */
static ir_func *vadd(int lanes, int n) {
  ir_buffer *a = buf("A", IR_F32, n), *b = buf("B", IR_F32, n), *c = buf("C", IR_F32, n);
  ir_var *i = var("i");
  ir_expr *idx = ramp(mul(V(i), I(lanes)), lanes);
  ir_stmt *body = stv(c, idx, add(ld(a, idx), ld(b, idx)));
  ir_buffer *ps[] = {a, b, c};
  return func("vadd", 2, 3, ps, loop(i, n / lanes, IR_FOR_SERIAL, body));
}

START_TEST(test_vector_add) {
  check_kernel(vadd(16, 1024), 0, 0);
  check_kernel(vadd(8, 96), 0, 0);
  check_kernel(vadd(4, 64), 0, 0);
}
END_TEST

/* C = A * B + C in 16 lanes: the IR is <16 x float> with contractable ops */
START_TEST(test_vector_fma_ir) {
  int n = 256;
  ir_buffer *a = buf("A", IR_F32, n), *b = buf("B", IR_F32, n), *c = buf("C", IR_F32, n);
  ir_var *i = var("i");
  ir_expr *idx = ramp(mul(V(i), I(16)), 16);
  ir_stmt *body = stv(c, idx, add(mul(ld(a, idx), ld(b, idx)), ld(c, idx)));
  ir_buffer *ps[] = {a, b, c};
  ir_func *f = func("vfma", 2, 3, ps, loop(i, n / 16, IR_FOR_SERIAL, body));
  check_kernel(f, 1e-6, 1e-7);
  cg_lowered l = {f, f};
  ts_diag d;
  ts_diag_clear(&d);
  char *ir = cg_llvm_dump_ir(&l, &T, true, &d);
  ck_assert_msg(ir != NULL, "%s", d.msg);
  ck_assert(strstr(ir, "<16 x float>") != NULL);
  ck_assert(strstr(ir, "fmul contract") != NULL || strstr(ir, "llvm.fma") != NULL ||
            strstr(ir, "fmuladd") != NULL);
  ck_assert(strstr(ir, "tessel_kernel_entry") != NULL);
  ck_assert(strstr(ir, "tessel_kernel_meta") != NULL);
  ts_free(ir);
  char *raw = cg_llvm_dump_ir(&l, &T, false, &d);
  ck_assert_ptr_nonnull(raw);
  ck_assert(strstr(raw, "noalias") != NULL);
  ts_free(raw);
}
END_TEST

START_TEST(test_parallel) {
  /* two parallel loops: a scalar nest with a captured let and a vector one,
   * plus one with a non-zero min and an odd extent and a nested parallel
   * loop (run serially inside the task) */
  int n = 64, m = 37;
  ir_buffer *a = buf("A", IR_F32, n * m), *b = buf("B", IR_F32, n * m), *c = buf("C", IR_F32, n * m);
  ir_buffer *c2 = buf("C2", IR_F32, n * m), *c3 = buf("C3", IR_F32, n * m);
  ir_var *i = var("i"), *j = var("j"), *s = ir_var_new(A, "s", ir_dt(IR_F32));
  ir_var *i2 = var("i2"), *i3 = var("i3"), *j3 = var("j3");
  ir_expr *ix = add(mul(V(i), I(m)), V(j));
  ir_stmt *p1 = loop(i, n, IR_FOR_PARALLEL,
                     loop(j, m, IR_FOR_SERIAL, stv(c, ix, add(mul(ld(a, ix), V(s)), ld(b, ix)))));
  ir_expr *vx = ramp(mul(V(i2), I(16)), 16);
  ir_stmt *p2 = loop(i2, n * m / 16, IR_FOR_PARALLEL, stv(c2, vx, mul(ld(a, vx), bc(V(s), 16))));
  ir_expr *x3 = add(mul(V(i3), I(m)), V(j3));
  ir_stmt *p3 = ir_for(A, i3, I(3), I(n - 5), IR_FOR_PARALLEL,
                       ir_for(A, j3, I(0), I(m), IR_FOR_PARALLEL, stv(c3, x3, add(ld(a, x3), F(1)))));
  ir_stmt *body = ir_let(A, s, F(3.0), seqv(3, p1, p2, p3));
  ir_buffer *ps[] = {a, b, c, c2, c3};
  check_kernel(func("par", 2, 5, ps, body), 1e-6, 1e-7);
}
END_TEST

START_TEST(test_masked_and_gather) {
  int n = 100;
  ir_buffer *a = buf("A", IR_F32, n);
  ir_buffer *c = buf("C", IR_F32, n), *e = buf("E", IR_F32, 48), *fo = buf("F", IR_F32, n);
  ir_buffer *g = buf("G", IR_F32, n), *h = buf("H", IR_F32, 96), *s = buf("S", IR_F32, n);
  ir_var *i = var("i"), *i2 = var("i2"), *i3 = var("i3"), *i4 = var("i4"), *i5 = var("i5"),
         *i6 = var("i6");
  /* masked store (and masked loads under the predicate): 7 x 16 lanes over 100 */
  ir_expr *ix = ramp(mul(V(i), I(16)), 16);
  ir_stmt *s1 = stv(c, ix, add(ld(a, ix), bc(F(1), 16)));
  s1->u.store.predicate = bin(IR_LT, ix, bc(I(n), 16));
  /* gather with stride 2, scatter with stride 25 */
  ir_expr *ex = ramp(mul(V(i2), I(4)), 4);
  ir_stmt *s2 = stv(e, ex, ld(a, ir_ramp(A, mul(V(i2), I(8)), I(2), 4)));
  ir_stmt *s3 = stv(fo, ir_ramp(A, V(i3), I(25), 4), ld(a, ramp(mul(V(i3), I(4)), 4)));
  /* guarded loads: scalar (control flow) and vector (masked load) */
  ir_stmt *s4 = stv(g, V(i4),
                    ir_select(A, bin(IR_GE, V(i4), I(1)), ld(a, bin(IR_SUB, V(i4), I(1))), F(0)));
  ir_expr *hx = ramp(mul(V(i5), I(16)), 16);
  ir_stmt *s5 = stv(h, hx,
                    ir_select(A, bin(IR_GE, hx, bc(I(1), 16)),
                              ld(a, bin(IR_SUB, hx, bc(I(1), 16))), bc(F(0), 16)));
  /* scalar predicated store */
  ir_stmt *s6 = stv(s, V(i6), mul(ld(a, V(i6)), F(2)));
  s6->u.store.predicate = bin(IR_GT, ld(a, V(i6)), F(0));
  ir_stmt *body = seqv(6, loop(i, 7, IR_FOR_SERIAL, s1), loop(i2, 12, IR_FOR_SERIAL, s2),
                       loop(i3, 25, IR_FOR_SERIAL, s3), loop(i4, n, IR_FOR_SERIAL, s4),
                       loop(i5, 6, IR_FOR_SERIAL, s5), loop(i6, n, IR_FOR_SERIAL, s6));
  ir_buffer *ps[] = {a, c, e, fo, g, h, s};
  ir_func *f = func("masked", 1, 7, ps, body);
  check_kernel(f, 0, 0);
  cg_lowered l = {f, f};
  ts_diag d;
  ts_diag_clear(&d);
  char *ir = cg_llvm_dump_ir(&l, &T, false, &d);
  ck_assert_ptr_nonnull(ir);
  ck_assert(strstr(ir, "llvm.masked.store") != NULL);
  ck_assert(strstr(ir, "llvm.masked.load") != NULL);
  ck_assert(strstr(ir, "llvm.masked.gather") != NULL);
  ck_assert(strstr(ir, "llvm.masked.scatter") != NULL);
  ts_free(ir);
}
END_TEST

/* A load under a select whose index the loops keep inside its buffer (a
 * padded copy's clamped index: max(i - 1, 0), i < 96, into 100 elements) is
 * safe whatever the condition: a plain load and a select instruction, which
 * LLVM's loop vectorizer turns into a vector load and a blend (guarded by a
 * branch, the load becomes a masked load, which AVX2 has not for bytes); the
 * same load unclamped keeps its branch. */
/* f checked against the interpreter, then its unoptimised LLVM IR (the
 * caller frees it). */
static char *checked_ir(ir_func *f) {
  check_kernel(f, 0, 0);
  cg_lowered l = {f, f};
  ts_diag d;
  ts_diag_clear(&d);
  char *ir = cg_llvm_dump_ir(&l, &T, false, &d);
  ck_assert_msg(ir != NULL, "%s: %s", f->name, d.msg);
  return ir;
}

START_TEST(test_clamped_select_load) {
  int n = 100;
  ir_buffer *a = buf("A", IR_F32, n), *h = buf("H", IR_F32, 96), *h2 = buf("H2", IR_F32, 96);
  for (int k = 0; k < 2; k++) {
    ir_var *i = var("i");
    ir_expr *x = bin(IR_SUB, V(i), I(1));
    ir_stmt *st = stv(k ? h2 : h, V(i),
                      ir_select(A, bin(IR_GE, V(i), I(1)), ld(a, k ? x : bin(IR_MAX, x, I(0))), F(0)));
    ir_buffer *ps[] = {a, k ? h2 : h};
    ir_func *f = func(k ? "unclamped" : "clamped", 1, 2, ps, loop(i, 96, IR_FOR_VECTORIZED, st));
    char *ir = checked_ir(f);
    ck_assert_msg((strstr(ir, "select i1") != NULL) == (k == 0), "%s: the load %s", f->name,
                  k ? "is not guarded" : "is guarded");
    ts_free(ir);
  }
}
END_TEST

/* A guard the same in every lane (broadcast(i >= 1): a padded window's
 * bounds test around a channels-last vector) branches around a plain vector
 * load instead of masking it lane by lane (AVX2 has no byte masked load: a
 * u8 max pool ran 100x slower); a per-lane guard keeps its masked load. */
START_TEST(test_uniform_guard_branch) {
  int n = 96;
  ir_buffer *a = buf("A", IR_F32, n), *h = buf("H", IR_F32, n), *h2 = buf("H2", IR_F32, n);
  for (int k = 0; k < 2; k++) {
    ir_var *i = var("i");
    ir_expr *x = ramp(mul(V(i), I(16)), 16);
    ir_expr *xm = ir_ramp(A, bin(IR_SUB, mul(V(i), I(16)), I(16)), I(1), 16);
    ir_expr *cond = k ? bin(IR_GE, xm, bc(I(0), 16)) : bc(bin(IR_GE, V(i), I(1)), 16);
    ir_stmt *st = stv(k ? h2 : h, x, ir_select(A, cond, ld(a, xm), bc(F(0), 16)));
    ir_buffer *ps[] = {a, k ? h2 : h};
    ir_func *f = func(k ? "lanewise" : "uniform", 1, 2, ps, loop(i, n / 16, IR_FOR_SERIAL, st));
    char *ir = checked_ir(f);
    ck_assert_msg((strstr(ir, "llvm.masked.") != NULL) == (k == 1), "%s guard: %s", f->name,
                  k ? "no masked load" : "a masked load");
    if (!k) ck_assert_msg(strstr(ir, "load <16 x float>") != NULL, "uniform guard: no plain vector load");
    ts_free(ir);
  }
}
END_TEST

START_TEST(test_int8_accumulate) {
  int M = 8, N = 32, K = 16;
  ir_buffer *a = buf("A", IR_I8, M * K), *b = buf("B", IR_I8, K * N), *c = buf("C", IR_I32, M * N);
  ir_buffer *c2 = buf("C2", IR_I32, M * N);
  ir_var *i = var("i"), *j = var("j"), *k = var("k");
  ir_dtype v16 = ir_dt_vec(IR_I32, 16);
  ir_expr *cx = ramp(add(mul(V(i), I(N)), mul(V(j), I(16))), 16);
  ir_expr *bx = ramp(add(mul(V(k), I(N)), mul(V(j), I(16))), 16);
  ir_expr *av = ir_cast(A, v16, bc(ld(a, add(mul(V(i), I(K)), V(k))), 16));
  ir_stmt *nest = loop(
      i, M, IR_FOR_SERIAL,
      loop(j, N / 16, IR_FOR_SERIAL,
           seqv(2, stv(c, cx, bc(I(0), 16)),
                loop(k, K, IR_FOR_SERIAL,
                     stv(c, cx, add(ld(c, cx), mul(av, ir_cast(A, v16, ld(b, bx)))))))));
  /* the same in scalars with the reduction loop unrolled */
  ir_var *i2 = var("i2"), *j2 = var("j2"), *k2 = var("k2");
  ir_expr *sx = add(mul(V(i2), I(N)), V(j2));
  ir_expr *prod = mul(ir_cast(A, ir_dt(IR_I32), ld(a, add(mul(V(i2), I(K)), V(k2)))),
                      ir_cast(A, ir_dt(IR_I32), ld(b, add(mul(V(k2), I(N)), V(j2)))));
  ir_stmt *nest2 = loop(i2, M, IR_FOR_PARALLEL,
                        loop(j2, N, IR_FOR_VECTORIZED,
                             seqv(2, stv(c2, sx, I(0)),
                                  loop(k2, K, IR_FOR_UNROLLED, stv(c2, sx, add(ld(c2, sx), prod))))));
  ir_buffer *ps[] = {a, b, c, c2};
  check_kernel(func("i8acc", 2, 4, ps, seqv(2, nest, nest2)), 0, 0);
}
END_TEST

START_TEST(test_floordiv_floormod) {
  int n = 64;
  ir_buffer *a = buf("A", IR_I32, n), *b = buf("B", IR_I32, n);
  ir_buffer *o = buf("O", IR_I32, n * 10), *o2 = buf("O2", IR_I32, n * 10);
  ir_buffer *fa = buf("FA", IR_F32, n), *fo = buf("FO", IR_F32, n * 2);
  ir_buffer *ua = buf("UA", IR_U32, n), *uo = buf("UO", IR_U32, n * 2);
  /* scalar */
  ir_var *i = var("i");
  ir_expr *x = bin(IR_SUB, mul(ld(a, V(i)), I(7)), I(3));
  ir_expr *bv = ld(b, V(i));
  ir_expr *nz = ir_select(A, bin(IR_EQ, bv, I(0)), I(1), bv);
  ir_expr *nm1 = ir_select(A, bin(IR_EQ, bv, I(0)), I(-1), bv);
  ir_expr *es[10] = {bin(IR_FLOORDIV, x, I(3)),  bin(IR_FLOORMOD, x, I(3)), bin(IR_FLOORDIV, x, I(-3)),
                     bin(IR_FLOORMOD, x, I(-3)), bin(IR_FLOORDIV, x, I(4)), bin(IR_FLOORMOD, x, I(4)),
                     bin(IR_DIV, x, I(3)),       bin(IR_FLOORDIV, x, nz),   bin(IR_FLOORMOD, x, nz),
                     bin(IR_DIV, x, nm1)};
  ir_stmt *ss[10];
  for (int k = 0; k < 10; k++) ss[k] = stv(o, add(mul(V(i), I(10)), I(k)), es[k]);
  ir_stmt *l1 = loop(i, n, IR_FOR_SERIAL, ir_seq(A, 10, ss));
  /* vector (16 lanes): O2[k*n + lanes] */
  ir_var *v = var("v");
  ir_expr *vi = ramp(mul(V(v), I(16)), 16);
  ir_expr *vx = bin(IR_SUB, mul(ld(a, vi), bc(I(7), 16)), bc(I(3), 16));
  ir_expr *vb = ld(b, vi);
  ir_expr *vnz = ir_select(A, bin(IR_EQ, vb, bc(I(0), 16)), bc(I(1), 16), vb);
  ir_expr *vm1 = ir_select(A, bin(IR_EQ, vb, bc(I(0), 16)), bc(I(-1), 16), vb);
  ir_expr *ves[10] = {bin(IR_FLOORDIV, vx, bc(I(3), 16)),  bin(IR_FLOORMOD, vx, bc(I(3), 16)),
                      bin(IR_FLOORDIV, vx, bc(I(-3), 16)), bin(IR_FLOORMOD, vx, bc(I(-3), 16)),
                      bin(IR_FLOORDIV, vx, bc(I(4), 16)),  bin(IR_FLOORMOD, vx, bc(I(4), 16)),
                      bin(IR_DIV, vx, bc(I(3), 16)),       bin(IR_FLOORDIV, vx, vnz),
                      bin(IR_FLOORMOD, vx, vnz),           bin(IR_DIV, vx, vm1)};
  for (int k = 0; k < 10; k++) ss[k] = stv(o2, ramp(add(mul(V(v), I(16)), I(k * n)), 16), ves[k]);
  ir_stmt *l2 = loop(v, n / 16, IR_FOR_SERIAL, ir_seq(A, 10, ss));
  /* float floordiv / floormod */
  ir_var *w = var("w");
  ir_expr *fx = mul(ld(fa, V(w)), F(5));
  ir_stmt *l3 = loop(w, n, IR_FOR_SERIAL,
                     seqv(2, stv(fo, mul(V(w), I(2)), bin(IR_FLOORDIV, fx, F(0.7))),
                          stv(fo, add(mul(V(w), I(2)), I(1)), bin(IR_FLOORMOD, fx, F(-0.7)))));
  /* unsigned */
  ir_var *u = var("u");
  ir_expr *ux = ld(ua, V(u));
  ir_stmt *l4 = loop(u, n, IR_FOR_SERIAL,
                     seqv(2, stv(uo, mul(V(u), I(2)), bin(IR_FLOORDIV, ux, ir_int(A, ir_dt(IR_U32), 3))),
                          stv(uo, add(mul(V(u), I(2)), I(1)),
                              bin(IR_FLOORMOD, bin(IR_SUB, ux, ir_int(A, ir_dt(IR_U32), 4)),
                                  ir_int(A, ir_dt(IR_U32), 5)))));
  ir_buffer *ps[] = {a, b, fa, ua, o, o2, fo, uo};
  check_kernel(func("floordiv", 4, 8, ps, seqv(4, l1, l2, l3, l4)), 1e-6, 1e-6);
}
END_TEST

/* Guarded division and loads: the untaken side must not divide by zero or
 * read out of bounds (lazy select and && in scalars, masks in lanes). */
START_TEST(test_lazy_guards) {
  int n = 64;
  ir_buffer *a = buf("A", IR_I32, n), *b = buf("B", IR_I32, n), *x = buf("X", IR_F32, n);
  ir_buffer *o = buf("O", IR_I32, n), *ov = buf("OV", IR_I32, n), *ob = buf("OB", IR_BOOL, n);
  ir_buffer *obv = buf("OBV", IR_BOOL, n);
  ir_var *i = var("i"), *v = var("v"), *w = var("w"), *u = var("u");
  ir_expr *bi = ld(b, V(i));
  ir_stmt *s1 = loop(i, n, IR_FOR_SERIAL,
                     stv(o, V(i), ir_select(A, bin(IR_NE, bi, I(0)), bin(IR_FLOORDIV, ld(a, V(i)), bi), I(-99))));
  ir_expr *vi = ramp(mul(V(v), I(16)), 16), *bv = ld(b, vi);
  ir_stmt *s2 = loop(v, n / 16, IR_FOR_SERIAL,
                     stv(ov, vi, ir_select(A, bin(IR_NE, bv, bc(I(0), 16)),
                                           bin(IR_FLOORMOD, ld(a, vi), bv), bc(I(-99), 16))));
  /* w >= 1 && X[w - 1] > 0: X[-1] must not be read */
  ir_stmt *s3 = loop(w, n, IR_FOR_SERIAL,
                     stv(ob, V(w), bin(IR_AND, bin(IR_GE, V(w), I(1)),
                                       bin(IR_GT, ld(x, bin(IR_SUB, V(w), I(1))), F(0)))));
  ir_expr *ui = ramp(mul(V(u), I(16)), 16);
  ir_stmt *s4 = loop(u, n / 16, IR_FOR_SERIAL,
                     stv(obv, ui, bin(IR_OR, bin(IR_LT, ui, bc(I(1), 16)),
                                      bin(IR_GT, ld(x, bin(IR_SUB, ui, bc(I(1), 16))), bc(F(0), 16)))));
  ir_buffer *ps[] = {a, b, x, o, ov, ob, obv};
  check_kernel(func("lazy", 3, 7, ps, seqv(4, s1, s2, s3, s4)), 0, 0);
}
END_TEST

/* Integer widths wrap; i64 loop vars; unsigned min/max/compare; int abs */
START_TEST(test_int_semantics) {
  int n = 64;
  ir_buffer *a = buf("A", IR_U8, n), *b = buf("B", IR_I16, n), *c = buf("C", IR_I64, n);
  ir_buffer *o8 = buf("O8", IR_U8, n), *o16 = buf("O16", IR_I16, n), *o64 = buf("O64", IR_I64, n);
  ir_buffer *ou = buf("OU", IR_U32, n), *oa = buf("OA", IR_I32, n), *oc = buf("OC", IR_BOOL, n);
  ir_var *i = ir_var_new(A, "i", ir_dt(IR_I64));
  ir_expr *iv = ir_var_ref(A, i);
  ir_expr *ai = ld(a, iv), *bi = ld(b, iv), *ci = ld(c, iv);
  ir_dtype u8 = ir_dt(IR_U8), u32 = ir_dt(IR_U32), i16 = ir_dt(IR_I16);
  ir_stmt *ss[] = {
      stv(o8, iv, bin(IR_SUB, mul(ai, ir_int(A, u8, 200)), ir_int(A, u8, 7))),
      stv(o16, iv, mul(mul(bi, ir_int(A, i16, 12345)), ir_int(A, i16, 77))),
      stv(o64, iv, bin(IR_MAX, mul(ci, ir_i64(A, INT64_C(1) << 40)), bin(IR_SUB, ir_cast(A, ir_dt(IR_I64), iv), ir_i64(A, 30)))),
      stv(ou, iv, bin(IR_MIN, bin(IR_SUB, ir_cast(A, u32, ai), ir_int(A, u32, 4)), ir_int(A, u32, 1000))),
      stv(oa, iv, ir_call(A, IR_ABS, ir_dt(IR_I32), 1, (ir_expr *[]){ir_cast(A, ir_dt(IR_I32), bi)})),
      stv(oc, iv, bin(IR_LT, bin(IR_SUB, ir_cast(A, u32, ai), ir_int(A, u32, 4)), ir_int(A, u32, 3))),
  };
  ir_buffer *ps[] = {a, b, c, o8, o16, o64, ou, oa, oc};
  ir_stmt *body = ir_for(A, i, ir_i64(A, 0), ir_i64(A, n), IR_FOR_SERIAL, ir_seq(A, 6, ss));
  check_kernel(func("ints", 3, 9, ps, body), 0, 0);
}
END_TEST

/* f64 math goes through LLVM intrinsics / libm (scalarized lanes) */
START_TEST(test_f64_math) {
  int n = 64;
  ir_buffer *x = buf("X", IR_F64, n);
  ir_dtype d4 = ir_dt_vec(IR_F64, 4);
  static const ir_intrin ops[] = {IR_EXP, IR_TANH, IR_ERF, IR_SIGMOID, IR_SQRT, IR_ABS, IR_POW};
  int nops = (int)(sizeof ops / sizeof *ops);
  ir_buffer *o = buf("O", IR_F64, n * nops);
  ir_var *v = var("v");
  ir_expr *vi = ramp(mul(V(v), I(4)), 4);
  ir_stmt *ss[8];
  for (int k = 0; k < nops; k++) {
    ir_expr *xv = ld(x, vi);
    ir_expr *args[2] = {ops[k] == IR_SQRT || ops[k] == IR_POW ? call1(IR_ABS, d4, xv) : xv,
                        bc(ir_float(A, ir_dt(IR_F64), 1.7), 4)};
    ss[k] = stv(o, ramp(add(mul(V(v), I(4)), I(k * n)), 4), ir_call(A, ops[k], d4, ir_intrin_nargs(ops[k]), args));
  }
  ir_buffer *ps[] = {x, o};
  check_kernel(func("f64math", 1, 2, ps, loop(v, n / 4, IR_FOR_SERIAL, ir_seq(A, nops, ss))), 1e-15, 1e-300);
}
END_TEST

/* A register-tiled matmul micro-kernel as lowering produces it from a
 * cache_write schedule: a local 6x64 accumulator, unrolled 6 x 4 vector
 * updates per k. After O3 the accumulator lives in registers (no alloca
 * left; <16 x float> phis), which is what lets this reach the FMA peak. */
START_TEST(test_register_tile) {
  int M = 12, N = 128, K = 40, MR = 6, NR = 64, L = 16;
  ir_buffer *a = buf("A", IR_F32, M * K), *b = buf("B", IR_F32, K * N), *c = buf("C", IR_F32, M * N);
  ir_buffer *cl = sbuf("Cl", IR_F32, MR * NR, "local");
  ir_var *io = var("io"), *jo = var("jo"), *k = var("k"), *ii = var("ii"), *jv = var("jv");
  ir_var *ii2 = var("ii2"), *jv2 = var("jv2"), *ii3 = var("ii3"), *jv3 = var("jv3");
  ir_expr *clx = ramp(add(mul(V(ii), I(NR)), mul(V(jv), I(L))), L);
  ir_expr *arow = add(mul(V(io), I(MR)), V(ii));
  ir_expr *bx = ramp(add(add(mul(V(k), I(N)), mul(V(jo), I(NR))), mul(V(jv), I(L))), L);
  ir_expr *upd = add(ld(cl, clx), mul(bc(ld(a, add(mul(arow, I(K)), V(k))), L), ld(b, bx)));
  ir_stmt *kl = loop(k, K, IR_FOR_SERIAL,
                     loop(ii, MR, IR_FOR_UNROLLED, loop(jv, NR / L, IR_FOR_UNROLLED, stv(cl, clx, upd))));
  ir_expr *clx2 = ramp(add(mul(V(ii2), I(NR)), mul(V(jv2), I(L))), L);
  ir_stmt *init = loop(ii2, MR, IR_FOR_UNROLLED,
                       loop(jv2, NR / L, IR_FOR_UNROLLED, stv(cl, clx2, bc(F(0), L))));
  ir_expr *clx3 = ramp(add(mul(V(ii3), I(NR)), mul(V(jv3), I(L))), L);
  ir_expr *cx = ramp(add(add(mul(add(mul(V(io), I(MR)), V(ii3)), I(N)), mul(V(jo), I(NR))), mul(V(jv3), I(L))), L);
  ir_stmt *wb = loop(ii3, MR, IR_FOR_UNROLLED, loop(jv3, NR / L, IR_FOR_UNROLLED, stv(c, cx, ld(cl, clx3))));
  ir_stmt *body = loop(io, M / MR, IR_FOR_PARALLEL,
                       loop(jo, N / NR, IR_FOR_SERIAL, ir_allocate(A, cl, seqv(3, init, kl, wb))));
  ir_buffer *ps[] = {a, b, c};
  ir_func *f = func("mm_tile", 2, 3, ps, body);
  check_kernel(f, 1e-5, 1e-5);
  cg_lowered l = {f, f};
  ts_diag d;
  ts_diag_clear(&d);
  char *ir = cg_llvm_dump_ir(&l, &T, true, &d);
  ck_assert_msg(ir != NULL, "%s", d.msg);
  ck_assert_msg(strstr(ir, "alloca [384 x float]") == NULL, "the accumulator tile was not promoted to registers");
  ck_assert(strstr(ir, "phi <16 x float>") != NULL);
  ck_assert(strstr(ir, "call i32 @tsrt_parallel_launch") != NULL);
  ts_free(ir);
}
END_TEST

/* The reduction-init form (if first: B[i] = init; B[i] = B[i] + ...) in
 * scalars and lanes, and look-alikes that must stay guarded: a different
 * index in the next store, and a guarded store whose element is out of
 * bounds when the guard is false. */
START_TEST(test_init_guard) {
  int m = 8, k = 16;
  ir_buffer *a = buf("A", IR_F32, m * k), *o = buf("O", IR_F32, m), *ov = buf("OV", IR_F32, 16);
  ir_buffer *p = buf("P", IR_F32, m + 1), *q = buf("Q", IR_F32, m);
  ir_var *i = var("i"), *r = var("r"), *v = var("v"), *j = var("j"), *w = var("w");
  ir_stmt *red = loop(i, m, IR_FOR_SERIAL,
                      loop(r, k, IR_FOR_SERIAL,
                           seqv(2, ir_if(A, bin(IR_EQ, V(r), I(0)), stv(o, V(i), F(0.5)), NULL),
                                stv(o, V(i), add(ld(o, V(i)), ld(a, add(mul(V(i), I(k)), V(r))))))));
  ir_expr *vi = ramp(I(0), 16);
  ir_stmt *vred = loop(v, m, IR_FOR_SERIAL,
                       seqv(2, ir_if(A, bin(IR_EQ, V(v), I(0)), stv(ov, vi, bc(F(0), 16)), NULL),
                            stv(ov, vi, add(ld(ov, vi), ld(a, ramp(mul(V(v), I(16)), 16))))));
  /* different index: P[j + 1] guarded, then P[j] */
  ir_stmt *diff = loop(j, m, IR_FOR_SERIAL,
                       seqv(2, ir_if(A, bin(IR_EQ, V(j), I(m - 1)), stv(p, add(V(j), I(1)), F(7)), NULL),
                            stv(p, V(j), F(3))));
  /* Q[w + 1] only exists for w < m - 1: must stay a branch */
  ir_stmt *oob = loop(w, m, IR_FOR_SERIAL,
                      seqv(2, ir_if(A, bin(IR_LT, V(w), I(m - 1)), stv(q, add(V(w), I(1)), F(1)), NULL),
                           stv(q, V(w), F(2))));
  ir_buffer *ps[] = {a, o, ov, p, q};
  check_kernel(func("initg", 1, 5, ps, seqv(4, red, vred, diff, oob)), 1e-6, 1e-6);
}
END_TEST

/* ---- intrinsics against libm ---------------------------------------------------------- */

typedef struct intrin_case {
  ir_intrin op;
  double lo, hi;     /* first input range */
  double lo2, hi2;   /* second input (pow) */
  double rtol;
} intrin_case;

static const intrin_case *cur_case;
#define NI 4096
#define NSPECIAL 10
static const float specials[NSPECIAL] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e-40f, -1.0f,
                                         1.0f, 88.5f,  -105.0f};

static void fill_intrin(int p, ir_tensor *t) {
  float *x = t->data;
  int64_t n = ir_tensor_numel(t);
  if (p > 2) {
    memset(x, 0, (size_t)n * 4);
    return;
  }
  double lo = p == 1 && cur_case->op == IR_POW ? cur_case->lo2 : cur_case->lo;
  double hi = p == 1 && cur_case->op == IR_POW ? cur_case->hi2 : cur_case->hi;
  for (int64_t i = 0; i < n - NSPECIAL; i++) {
    double u = (double)((i * 2654435761u) % (uint64_t)(n - NSPECIAL)) / (double)(n - NSPECIAL);
    x[i] = (float)(lo + (hi - lo) * u);
  }
  for (int i = 0; i < NSPECIAL; i++) x[n - NSPECIAL + i] = p == 0 ? specials[i] : 2.0f - (float)i * 0.5f;
}

static double libm_ref(ir_intrin op, double x, double y, double z) {
  switch (op) {
  case IR_EXP: return exp(x);
  case IR_LOG: return log(x);
  case IR_SQRT: return sqrt(x);
  case IR_RSQRT: return 1.0 / sqrt(x);
  case IR_TANH: return tanh(x);
  case IR_ERF: return erf(x);
  case IR_SIGMOID: return 1.0 / (1.0 + exp(-x));
  case IR_POW: return pow(x, y);
  case IR_FMA: return fma(x, y, z);
  case IR_ABS: return fabs(x);
  case IR_FLOOR: return floor(x);
  case IR_CEIL: return ceil(x);
  case IR_ROUND: return nearbyint(x);
  case IR_SIN: return sin(x);
  case IR_COS: return cos(x);
  default: return NAN;
  }
}

START_TEST(test_intrinsics) {
  static const intrin_case cases[] = {
      {IR_EXP, -87, 88, 0, 0, 3e-7},      {IR_LOG, 1e-30, 1e4, 0, 0, 3e-7},
      {IR_SQRT, 0, 100, 0, 0, 1e-7},      {IR_RSQRT, 1e-3, 100, 0, 0, 2e-7},
      {IR_TANH, -10, 10, 0, 0, 3e-7},     {IR_ERF, -5, 5, 0, 0, 5e-7},
      {IR_SIGMOID, -30, 30, 0, 0, 5e-7},  {IR_POW, 1e-3, 10, -3, 3, 3e-6},
      {IR_FMA, -4, 4, 0, 0, 1e-6},        {IR_ABS, -4, 4, 0, 0, 0},
      {IR_LOG, 0.5, 2, 0, 0, 3e-7},       {IR_TANH, -1, 1, 0, 0, 3e-7},
      {IR_FLOOR, -4, 4, 0, 0, 0},         {IR_CEIL, -4, 4, 0, 0, 0},
      {IR_ROUND, -4, 4, 0, 0, 0},         {IR_SIN, -10, 10, 0, 0, 3e-7},
      {IR_COS, -10, 10, 0, 0, 3e-7},
  };
  for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
    const intrin_case *c = cur_case = &cases[ci];
    int na = ir_intrin_nargs(c->op);
    ir_buffer *in[3] = {buf("X", IR_F32, NI), buf("Y", IR_F32, NI), buf("Z", IR_F32, NI)};
    ir_buffer *ov = buf("OV", IR_F32, NI), *os = buf("OS", IR_F32, NI);
    ir_var *i = var("i"), *j = var("j");
    ir_expr *vi = ramp(mul(V(i), I(16)), 16), *va[3], *sa[3];
    for (int k = 0; k < 3; k++) {
      va[k] = ld(in[k], vi);
      sa[k] = ld(in[k], V(j));
    }
    ir_stmt *lv = loop(i, NI / 16, IR_FOR_SERIAL,
                       stv(ov, vi, ir_call(A, c->op, ir_dt_vec(IR_F32, 16), na, va)));
    ir_stmt *ls = loop(j, NI, IR_FOR_SERIAL, stv(os, V(j), ir_call(A, c->op, ir_dt(IR_F32), na, sa)));
    ir_buffer *ps[5] = {in[0], in[1], in[2], ov, os};
    ir_func *f = func(ir_intrin_name(c->op), 3, 5, ps, seqv(2, lv, ls));
    /* against the interpreter (libm in double), ... */
    check_kernel_opts(f, NULL, c->rtol > 0 ? c->rtol * 2 : 0, 1e-37, fill_intrin);
    /* ... and directly against libm, vector and scalar bit-identical */
    ir_tensor t[5];
    ts_diag d;
    ts_diag_clear(&d);
    tu_ok(ir_tensors_for_func(f, NULL, t, &d), &d);
    void *args[5];
    for (int k = 0; k < 5; k++) {
      fill_intrin(k, &t[k]);
      args[k] = aligned_copy(t[k].data, tensor_bytes(&t[k]));
    }
    cg_lowered l = {f, f};
    cg_jit *jit;
    tu_ok(cg_llvm_jit(&l, &T, &jit, &d), &d);
    ck_assert_int_eq(cg_jit_entry(jit)(args), 0);
    const float *x = args[0], *y = args[1], *z = args[2], *rv = args[3], *rs = args[4];
    double worst = 0;
    for (int k = 0; k < NI; k++) {
      double want = (float)libm_ref(c->op, x[k], y[k], z[k]);
      ck_assert_msg(memcmp(&rv[k], &rs[k], 4) == 0, "%s(%g): vector %.9g, scalar %.9g",
                    ir_intrin_name(c->op), x[k], rv[k], rs[k]);
      if (isnan(want)) {
        ck_assert_msg(isnan(rv[k]), "%s(%g, %g): got %g, want NaN", ir_intrin_name(c->op), x[k], y[k], rv[k]);
        continue;
      }
      if (isinf(want) || want == 0) {
        ck_assert_msg(rv[k] == want || fabs(rv[k] - want) < 1e-37, "%s(%g, %g): got %g, want %g",
                      ir_intrin_name(c->op), x[k], y[k], rv[k], want);
        continue;
      }
      if (fabs(want) < 1.2e-38) continue; /* subnormal results: absolute error only */
      double rel = fabs(rv[k] - want) / fabs(want);
      if (rel > worst) worst = rel;
      ck_assert_msg(rel <= c->rtol + 1e-12, "%s(%.9g, %.9g) = %.9g, libm %.9g (rel %g)",
                    ir_intrin_name(c->op), x[k], y[k], rv[k], want, rel);
    }
    cg_jit_free(jit);
    for (int k = 0; k < 5; k++) {
      free(args[k]);
      ir_tensor_free(&t[k]);
    }
  }
}
END_TEST

/* pow with constant exponents takes the multiply / sqrt paths */
START_TEST(test_pow_const) {
  int n = 256;
  double ys[] = {0, 0.5, -0.5, 1, 2, 3, -1, -2, 4, 1.5};
  int ny = (int)(sizeof ys / sizeof *ys);
  ir_buffer *x = buf("X", IR_F32, n), *o = buf("O", IR_F32, n * ny);
  ir_var *i = var("i");
  ir_stmt *ss[16];
  for (int k = 0; k < ny; k++) {
    ir_expr *args[2] = {add(call1(IR_ABS, ir_dt(IR_F32), ld(x, V(i))), F(0.25)), F(ys[k])};
    ss[k] = stv(o, add(V(i), I(k * n)), ir_call(A, IR_POW, ir_dt(IR_F32), 2, args));
  }
  ir_buffer *ps[] = {x, o};
  check_kernel(func("powc", 1, 2, ps, loop(i, n, IR_FOR_SERIAL, ir_seq(A, ny, ss))), 2e-6, 1e-7);
}
END_TEST

/* ---- narrow floats, casts, bools ------------------------------------------------------ */

START_TEST(test_f16_bf16) {
  int n = 256;
  ir_buffer *a = buf("A", IR_F16, n), *b = buf("B", IR_BF16, n);
  ir_buffer *c = buf("C", IR_F16, n), *d = buf("D", IR_BF16, n), *e = buf("E", IR_F32, n);
  ir_buffer *f16o = buf("F", IR_BF16, n), *g = buf("G", IR_F16, n);
  ir_buffer *cv = buf("CV", IR_F16, n), *dv = buf("DV", IR_BF16, n), *ev = buf("EV", IR_F16, n);
  ir_dtype h = ir_dt(IR_F16), bf = ir_dt(IR_BF16);
  ir_var *i = var("i"), *v = var("v");
  ir_expr *ai = ld(a, V(i)), *bi = ld(b, V(i));
  ir_stmt *sc = seqv(5, stv(c, V(i), add(mul(ai, ai), ir_float(A, h, 1.0))),
                     stv(d, V(i), bin(IR_SUB, mul(bi, ir_float(A, bf, 3.0)), ir_float(A, bf, 0.5))),
                     stv(e, V(i), add(ir_cast(A, ir_dt(IR_F32), ai), ir_cast(A, ir_dt(IR_F32), bi))),
                     stv(f16o, V(i), ir_cast(A, bf, mul(ai, ir_float(A, h, 2.0)))),
                     stv(g, V(i), ir_cast(A, h, add(bi, ir_float(A, bf, 0.1)))));
  ir_expr *vi = ramp(mul(V(v), I(16)), 16);
  ir_dtype h16 = ir_dt_vec(IR_F16, 16), bf16 = ir_dt_vec(IR_BF16, 16);
  ir_expr *av = ld(a, vi), *bv = ld(b, vi);
  ir_stmt *sv = seqv(3, stv(cv, vi, add(mul(av, av), bc(ir_float(A, h, 1.0), 16))),
                     stv(dv, vi, bin(IR_SUB, mul(bv, bc(ir_float(A, bf, 3.0), 16)), bc(ir_float(A, bf, 0.5), 16))),
                     stv(ev, vi, call1(IR_EXP, h16, av)));
  (void)bf16;
  ir_buffer *ps[] = {a, b, c, d, e, f16o, g, cv, dv, ev};
  ir_func *f = func("narrow", 2, 10, ps,
                    seqv(2, loop(i, n, IR_FOR_SERIAL, sc), loop(v, n / 16, IR_FOR_SERIAL, sv)));
  /* exact, except exp: f32 polynomial vs libm can differ by one f16 ulp */
  check_kernel(f, 1e-3, 0);
}
END_TEST

static void fill_casts(int p, ir_tensor *t) {
  int64_t n = ir_tensor_numel(t);
  if (p == 0) {
    float *x = t->data;
    for (int64_t i = 0; i < n; i++) x[i] = (float)(((i * 7919) % 4001) - 2000) * 0.37f;
    x[0] = NAN;
    x[1] = 3e9f;
    x[2] = -3e9f;
    x[3] = 1e20f;
    x[4] = -0.0f;
    x[5] = 255.9f;
    x[6] = -128.5f;
  } else if (p == 1) {
    int32_t *x = t->data;
    for (int64_t i = 0; i < n; i++) x[i] = (int32_t)((i * 2654435761u) & 0xffffffffu);
  } else {
    tsrt_fill_random(t->dtype.code, t->data, n, 7 + (uint64_t)p);
  }
}

START_TEST(test_casts) {
  int n = 256;
  ir_buffer *x = buf("X", IR_F32, n), *k = buf("K", IR_I32, n);
  ir_buffer *oi = buf("OI32", IR_I32, n), *ou8 = buf("OU8", IR_U8, n), *oi8 = buf("OI8", IR_I8, n);
  ir_buffer *oi64 = buf("OI64", IR_I64, n), *ob = buf("OB", IR_BOOL, n), *od = buf("OD", IR_F64, n);
  ir_buffer *of = buf("OF", IR_F32, n), *oh = buf("OH", IR_F16, n), *ou32 = buf("OU32", IR_U32, n);
  ir_buffer *oi16 = buf("OI16", IR_I16, n), *of2 = buf("OF2", IR_F32, n);
  ir_var *i = var("i");
  ir_expr *xi = ld(x, V(i)), *ki = ld(k, V(i));
  ir_stmt *ss[] = {
      stv(oi, V(i), ir_cast(A, ir_dt(IR_I32), xi)),
      stv(ou8, V(i), ir_cast(A, ir_dt(IR_U8), xi)),
      stv(oi8, V(i), ir_cast(A, ir_dt(IR_I8), ki)),
      stv(oi64, V(i), add(ir_cast(A, ir_dt(IR_I64), xi), ir_cast(A, ir_dt(IR_I64), ki))),
      stv(ob, V(i), bin(IR_AND, ir_cast(A, ir_dt(IR_BOOL), xi), bin(IR_LT, ki, I(0)))),
      stv(od, V(i), mul(ir_cast(A, ir_dt(IR_F64), xi), ir_float(A, ir_dt(IR_F64), 1.0 / 3.0))),
      stv(of, V(i), ir_cast(A, ir_dt(IR_F32), ki)),
      stv(oh, V(i), ir_cast(A, ir_dt(IR_F16), ki)),
      stv(ou32, V(i), ir_cast(A, ir_dt(IR_U32), ir_cast(A, ir_dt(IR_I8), ki))),
      stv(oi16, V(i), ir_cast(A, ir_dt(IR_I16), ir_cast(A, ir_dt(IR_U8), ki))),
      stv(of2, V(i), ir_cast(A, ir_dt(IR_F32), ir_cast(A, ir_dt(IR_U32), ki))),
  };
  int ns = (int)(sizeof ss / sizeof *ss);
  ir_buffer *ps[] = {x, k, oi, ou8, oi8, oi64, ob, od, of, oh, ou32, oi16, of2};
  check_kernel_opts(func("casts", 2, 13, ps, loop(i, n, IR_FOR_SERIAL, ir_seq(A, ns, ss))), NULL, 0,
                    0, fill_casts);
}
END_TEST

static void fill_nan(int p, ir_tensor *t) {
  tsrt_fill_random(t->dtype.code, t->data, ir_tensor_numel(t), 40 + (uint64_t)p);
  if (t->dtype.code == IR_F32 && p < 2) {
    float *x = t->data;
    x[3 + p] = NAN;
    x[10] = p ? 0.0f : -0.0f;
  }
}

START_TEST(test_select_minmax_bool) {
  int n = 64;
  ir_buffer *a = buf("A", IR_F32, n), *b = buf("B", IR_F32, n), *m = buf("M", IR_BOOL, n);
  ir_buffer *mn = buf("MIN", IR_F32, n), *mx = buf("MAX", IR_F32, n), *sl = buf("SEL", IR_F32, n);
  ir_buffer *im = buf("IM", IR_I8, n), *bo = buf("BO", IR_BOOL, n), *vm = buf("VM", IR_F32, n);
  ir_var *i = var("i"), *v = var("v");
  ir_expr *ai = ld(a, V(i)), *bi = ld(b, V(i)), *mi = ld(m, V(i));
  ir_stmt *ss[] = {
      stv(mn, V(i), bin(IR_MIN, ai, bi)),
      stv(mx, V(i), bin(IR_MAX, ai, bi)),
      stv(sl, V(i), ir_select(A, bin(IR_OR, mi, bin(IR_GT, ai, F(0.5))), ai, bi)),
      stv(im, V(i), bin(IR_MAX, ir_cast(A, ir_dt(IR_I8), mul(ai, F(100))), ir_int(A, ir_dt(IR_I8), -20))),
      stv(bo, V(i), bin(IR_AND, ir_not(A, mi), bin(IR_NE, ai, bi))),
  };
  ir_expr *vi = ramp(mul(V(v), I(16)), 16);
  ir_stmt *vs = stv(vm, vi, ir_select(A, ld(m, vi), bin(IR_MAX, ld(a, vi), ld(b, vi)), bc(F(-1), 16)));
  ir_buffer *ps[] = {a, b, m, mn, mx, sl, im, bo, vm};
  ir_func *f = func("selmm", 3, 9, ps,
                    seqv(2, loop(i, n, IR_FOR_SERIAL, ir_seq(A, 5, ss)), loop(v, n / 16, IR_FOR_SERIAL, vs)));
  check_kernel_opts(f, NULL, 0, 0, fill_nan);
}
END_TEST

/* ---- allocations -------------------------------------------------------------------------- */

START_TEST(test_allocate) {
  int n = 64, big = 1 << 20;
  ir_buffer *a = buf("A", IR_F32, big), *c = buf("C", IR_F32, n), *c2 = buf("C2", IR_F32, big);
  ir_buffer *c3 = buf("C3", IR_F32, 16 * n), *c4 = buf("C4", IR_BOOL, n);
  ir_buffer *t = sbuf("t", IR_F32, n, "local"), *tb = sbuf("tb", IR_F32, big, "global");
  ir_buffer *tp = sbuf("tp", IR_F32, n, "local"), *tbool = sbuf("tbool", IR_BOOL, n, "shared");
  ir_var *i = var("i"), *j = var("j"), *k = var("k"), *q = var("q"), *p = var("p"), *r = var("r");
  ir_var *w = var("w"), *w2 = var("w2");
  /* small local: reversed through a stack buffer */
  ir_stmt *s1 = ir_allocate(A, t,
                            seqv(2, loop(i, n, IR_FOR_SERIAL, stv(t, V(i), mul(ld(a, V(i)), F(2)))),
                                 loop(j, n, IR_FOR_SERIAL,
                                      stv(c, V(j), add(ld(t, bin(IR_SUB, I(n - 1), V(j))), F(1))))));
  /* large global (4 MiB): heap */
  ir_stmt *s2 = ir_allocate(
      A, tb,
      seqv(2, loop(k, big, IR_FOR_SERIAL, stv(tb, V(k), add(ld(a, V(k)), F(0.5)))),
           loop(q, big, IR_FOR_SERIAL, stv(c2, V(q), mul(ld(tb, bin(IR_SUB, I(big - 1), V(q))), F(3))))));
  /* per-task local inside a parallel loop */
  ir_stmt *s3 = loop(
      p, 16, IR_FOR_PARALLEL,
      ir_allocate(A, tp,
                  seqv(2, loop(r, n, IR_FOR_SERIAL, stv(tp, V(r), ld(a, add(mul(V(p), I(n)), V(r))))),
                       loop(w, n, IR_FOR_SERIAL,
                            stv(c3, add(mul(V(p), I(n)), V(w)), ld(tp, bin(IR_SUB, I(n - 1), V(w))))))));
  /* bool buffer */
  ir_stmt *s4 = ir_allocate(A, tbool,
                            seqv(2, loop(w2, n, IR_FOR_SERIAL, stv(tbool, V(w2), bin(IR_GT, ld(a, V(w2)), F(0)))),
                                 loop(i, n, IR_FOR_SERIAL, stv(c4, V(i), ir_not(A, ld(tbool, V(i)))))));
  ir_buffer *ps[] = {a, c, c2, c3, c4};
  ir_func *f = func("alloc", 1, 5, ps, seqv(4, s1, s2, s3, s4));
  check_kernel(f, 0, 0);
  cg_lowered l = {f, f};
  ts_diag d;
  ts_diag_clear(&d);
  char *ir = cg_llvm_dump_ir(&l, &T, false, &d);
  ck_assert_ptr_nonnull(ir);
  ck_assert(strstr(ir, "alloca [64 x float], align 64") != NULL);
  /* heap scratch from the runtime's per-thread pool */
  ck_assert(strstr(ir, "@tsrt_scratch_alloc(i64 4194304)") != NULL);
  ck_assert(strstr(ir, "@tsrt_scratch_free(") != NULL);
  ts_free(ir);
  /* in a steady state the heap scratch reaches no malloc: the second and
   * later calls get the block the first one freed back from the pool */
  cg_jit *jit = NULL;
  tu_ok(cg_llvm_jit(&l, &T, &jit, &d), &d);
  size_t bytes[5] = {(size_t)big * 4, (size_t)n * 4, (size_t)big * 4, (size_t)16 * n * 4, (size_t)n};
  void *args[5];
  for (int k2 = 0; k2 < 5; k2++) ck_assert_ptr_nonnull(args[k2] = calloc(1, bytes[k2]));
  ck_assert_int_eq(cg_jit_entry(jit)(args), 0);
  tsrt_scratch_stats st0, st1;
  tsrt_scratch_get_stats(&st0);
  for (int rep = 0; rep < 3; rep++) ck_assert_int_eq(cg_jit_entry(jit)(args), 0);
  tsrt_scratch_get_stats(&st1);
  ck_assert_uint_eq(st1.mallocs, st0.mallocs);
  ck_assert_uint_ge(st1.reuses, st0.reuses + 3);
  ck_assert_uint_eq(st1.allocs - st0.allocs, st1.reuses - st0.reuses);
  for (int k2 = 0; k2 < 5; k2++) free(args[k2]);
  cg_jit_free(jit);
}
END_TEST

/* ---- loops: unroll copies, metadata, auto-unroll, let/if/evaluate ---------------------------- */

START_TEST(test_loop_kinds) {
  int n = 48;
  ir_buffer *a = buf("A", IR_F32, n), *c = buf("C", IR_F32, n), *c2 = buf("C2", IR_F32, n);
  ir_buffer *c3 = buf("C3", IR_F32, n), *c4 = buf("C4", IR_I32, n);
  ir_var *i = var("i"), *j = var("j"), *k = var("k"), *q = var("q"), *x = var("x");
  ir_stmt *s1 = loop(i, n, IR_FOR_UNROLLED, stv(c, V(i), mul(ld(a, V(i)), F(-1))));
  ir_stmt *s2 = loop(j, n, IR_FOR_VECTORIZED, stv(c2, V(j), add(ld(a, V(j)), F(2))));
  ir_stmt *s3 = loop(k, 6, IR_FOR_SERIAL,
                     loop(q, 8, IR_FOR_SERIAL,
                          stv(c3, add(mul(V(k), I(8)), V(q)), ld(a, add(mul(V(q), I(6)), V(k))))));
  ir_annot ann = {.key = "pragma_auto_unroll_max_step", .kind = IR_ANN_INT, .v.i = 16};
  ts_diag d;
  ck_assert_int_eq(ir_annot_set(A, &s3->u.loop.nannot, &s3->u.loop.annots, ann), TS_OK);
  /* let + if/else + evaluate */
  ir_stmt *s4 = loop(x, n, IR_FOR_SERIAL,
                     ir_let(A, ir_var_new(A, "t", ir_dt(IR_I32)), I(5),
                            seqv(2, ir_evaluate(A, I(0)),
                                 ir_if(A, bin(IR_LT, V(x), I(20)), stv(c4, V(x), mul(V(x), I(3))),
                                       stv(c4, V(x), bin(IR_SUB, I(0), V(x)))))));
  ir_buffer *ps[] = {a, c, c2, c3, c4};
  ir_func *f = func("loops", 1, 5, ps, seqv(4, s1, s2, s3, s4));
  check_kernel(f, 0, 0);
  cg_lowered l = {f, f};
  ts_diag_clear(&d);
  char *ir = cg_llvm_dump_ir(&l, &T, false, &d);
  ck_assert_ptr_nonnull(ir);
  ck_assert(strstr(ir, "llvm.loop.vectorize.enable") != NULL);
  ts_free(ir);
}
END_TEST

/* ---- built-in workloads through cg_lower ---------------------------------------------------- */

static void check_lowered(const ir_func *f, const char *what) {
  ts_diag d;
  ts_diag_clear(&d);
  cg_lowered l;
  ts_status st = cg_lower(A, f, &T, &l, &d);
  ck_assert_msg(st == TS_OK, "lowering %s: %s", what, d.msg);
  check_kernel_opts(l.func, f, 1e-4, 1e-4, NULL);
}

/* Every workload at its defaults, unscheduled, lowered and run through the
 * JIT and a .so against the interpreter (metadata from the n-d original). */
START_TEST(test_workloads) {
  for (int i = 0; i < ir_workload_count(); i++) {
    const ir_workload *w = ir_workload_at(i);
    check_lowered(tu_workload(A, w->name), w->name);
  }
}
END_TEST

/* Every workload with something scheduled: per block, parallel outermost
 * loop, split + vectorize (lanes 4 and 16) + unroll of the innermost,
 * wherever the primitives accept them. */
START_TEST(test_workloads_scheduled) {
  for (int lanes = 4; lanes <= 16; lanes *= 4) {
    for (int i = 0; i < ir_workload_count(); i++) {
      const ir_workload *w = ir_workload_at(i);
      ir_func *orig;
      sch_state *s = tu_schedule(A, w->name, &orig);
      ts_diag d;
      sch_block *blocks;
      int nb;
      ts_diag_clear(&d);
      tu_ok(sch_get_child_blocks(s, (sch_block){"root"}, &blocks, &nb, &d), &d);
      const char *names[32];
      for (int b = 0; b < nb && b < 32; b++) names[b] = blocks[b].name;
      for (int b = 0; b < nb && b < 32; b++) {
        sch_loop ls[32], parts[2];
        int n = tu_loops(s, names[b], ls, 32);
        if (n == 0) continue;
        int64_t f[2] = {-1, lanes};
        ts_diag_clear(&d);
        if (sch_split(s, ls[n - 1], 2, f, parts, &d) == TS_OK) {
          ts_diag_clear(&d);
          if (sch_vectorize(s, parts[1], &d) != TS_OK) (void)sch_unroll(s, parts[1], &d);
        }
        n = tu_loops(s, names[b], ls, 32);
        ts_diag_clear(&d);
        (void)sch_parallel(s, ls[0], &d);
      }
      char what[64];
      snprintf(what, sizeof what, "%s (scheduled, %d lanes)", w->name, lanes);
      check_lowered(sch_func(s), what);
      sch_free(s);
    }
  }
}
END_TEST

/* Random traces (every primitive family) over every workload, lowered and
 * JIT-compiled against the interpreter. TESSEL_LLVM_TRACES raises the
 * count per workload for a longer soak. */
START_TEST(test_random_traces) {
  const char *env = getenv("TESSEL_LLVM_TRACES");
  int ntr = env && atoi(env) > 0 ? atoi(env) : 4;
  int done = 0, skipped = 0;
  for (int w = 0; w < ir_workload_count(); w++) {
    const char *name = ir_workload_at(w)->name;
    ir_func *f = tu_workload(A, name);
    ts_rng rng;
    ts_rng_seed(&rng, 5000 + (uint64_t)w);
    for (int k = 0; k < ntr; k++) {
      ts_diag d, why;
      ts_diag_clear(&d);
      ts_diag_clear(&why);
      sch_traced *t = sch_traced_new(f, 11 + (uint64_t)k, &d);
      ck_assert_msg(t != NULL, "%s: %s", name, d.msg);
      sch_random_opts opts = {.min_steps = 2, .max_steps = 10};
      sch_random_result res;
      tu_ok(sch_random_trace(t, &rng, &opts, &res, &why, &d), &d);
      const ir_func *g = sch_func(sch_traced_state(t));
      cg_lowered l;
      ts_diag_clear(&d);
      if (cg_check(g, &T, &d) != TS_OK) { /* e.g. thread bindings: not for a CPU */
        skipped++;
        sch_traced_free(t);
        continue;
      }
      ts_diag_clear(&d);
      if (cg_lower(A, g, &T, &l, &d) != TS_OK) {
        char *js = sch_trace_to_json(sch_traced_trace(t));
        ck_abort_msg("%s: lowering trace %s: %s", name, js, d.msg);
      }
      char *js = sch_trace_to_json(sch_traced_trace(t));
      fail_context = js ? js : "";
      check_kernel_ex(l.func, g, 1e-4, 1e-4, NULL, false);
      fail_context = "";
      ts_free(js);
      done++;
      sch_traced_free(t);
    }
  }
  ck_assert_int_eq(done + skipped, ntr * ir_workload_count());
  ck_assert_int_gt(done, skipped);
  if (env) printf("random traces: %d built and run, %d refused by cg_check\n", done, skipped);
}
END_TEST

/* examples/matmul_tiled.json: cache_write + reverse_compute_at + parallel +
 * vectorize + unroll + decompose_reduction on a 64^3 matmul */
START_TEST(test_matmul_trace) {
  const char *root = getenv("TESSEL_SOURCE_ROOT");
  char path[512];
  snprintf(path, sizeof path, "%s/examples/matmul_tiled.json", root ? root : ".");
  char *text = NULL;
  size_t len;
  ts_diag d;
  ts_diag_clear(&d);
  tu_ok(ts_read_file(path, &text, &len, &d), &d);
  sch_trace *tr = sch_trace_from_json(text, &d);
  ck_assert_msg(tr != NULL, "%s", d.msg);
  ir_func *f = tu_workload(A, "matmul:m=64,n=64,k=64");
  sch_traced *t = sch_trace_replay(tr, f, 1, &d);
  ck_assert_msg(t != NULL, "%s", d.msg);
  ir_func *g = sch_func(sch_traced_state(t));
  check_lowered(g, "matmul_tiled");
  cg_lowered l;
  tu_ok(cg_lower(A, g, &T, &l, &d), &d);
  char *ir = cg_llvm_dump_ir(&l, &T, true, &d);
  ck_assert_msg(ir != NULL, "%s", d.msg);
  ck_assert(strstr(ir, "<16 x float>") != NULL);
  ck_assert(strstr(ir, "@tsrt_parallel_launch") != NULL);
  ts_free(ir);
  sch_traced_free(t);
  sch_trace_free(tr);
  ts_free(text);
}
END_TEST

/* ---- metadata, errors, cross targets ------------------------------------------------------- */

START_TEST(test_metadata_nd) {
  /* the lowered function is flat; the original has 2-D / 3-D params */
  int m = 4, n = 6;
  ir_buffer *a = buf("A", IR_F32, m * n), *b = buf("B", IR_I8, m * n * 2);
  ir_buffer *c = buf("C", IR_F64, m * n);
  ir_var *i = var("i");
  ir_stmt *body = loop(i, m * n, IR_FOR_SERIAL,
                       stv(c, V(i), ir_cast(A, ir_dt(IR_F64), add(ld(a, V(i)),
                                                                   ir_cast(A, ir_dt(IR_F32), ld(b, mul(V(i), I(2))))))));
  ir_buffer *ps[] = {a, b, c};
  ir_func *f = func("meta2d", 2, 3, ps, body);
  ir_expr *s2[2] = {ir_i64(A, m), ir_i64(A, n)}, *s3[3] = {ir_i64(A, m), ir_i64(A, n), ir_i64(A, 2)};
  ir_buffer *oa = ir_buffer_new(A, "A", ir_dt(IR_F32), 2, s2, "global");
  ir_buffer *ob = ir_buffer_new(A, "B", ir_dt(IR_I8), 3, s3, "global");
  ir_buffer *oc = ir_buffer_new(A, "C", ir_dt(IR_F64), 2, s2, "global");
  ir_buffer *ops[] = {oa, ob, oc};
  ir_func *orig = func("meta2d", 2, 3, ops, body);
  check_kernel_opts(f, orig, 1e-12, 0, NULL);
  /* a symbolic dim that is not a size var of the function is refused
   * (declared size vars are fine: tests/codegen/test_symbolic.c) */
  ir_var *sym = ir_var_new(A, "n", ir_dt(IR_I64));
  ir_expr *ss[2] = {ir_var_ref(A, sym), ir_i64(A, n)};
  ir_buffer *sa = ir_buffer_new(A, "A", ir_dt(IR_F32), 2, ss, "global");
  ir_buffer *sps[] = {sa, ob, oc};
  ir_func *sorig = func("metasym", 2, 3, sps, body);
  cg_lowered l = {f, sorig};
  ts_diag d;
  ts_diag_clear(&d);
  char path[128];
  snprintf(path, sizeof path, "%s/sym.so", tmpdir);
  ck_assert_int_eq(cg_llvm_build_shared(&l, &T, path, &d), TS_EINVAL);
  ck_assert(strstr(d.msg, "not a size var") != NULL);
  ck_assert(access(path, F_OK) != 0);
}
END_TEST

static ir_func *simple_copy(void) {
  ir_buffer *a = buf("A", IR_F32, 16), *c = buf("C", IR_F32, 16);
  ir_var *i = var("i");
  ir_buffer *ps[] = {a, c};
  return func("copy", 1, 2, ps, loop(i, 16, IR_FOR_SERIAL, stv(c, V(i), ld(a, V(i)))));
}

START_TEST(test_errors) {
  ts_diag d;
  cg_jit *j = NULL;
  /* thread-bound loop */
  ir_func *f = simple_copy();
  f->body->u.loop.kind = IR_FOR_THREAD_BINDING;
  f->body->u.loop.thread = "threadIdx.x";
  cg_lowered l = {f, f};
  ts_diag_clear(&d);
  ck_assert_int_eq(cg_llvm_jit(&l, &T, &j, &d), TS_EUNSUPPORTED);
  ck_assert(strstr(d.msg, "threadIdx.x") != NULL);
  ck_assert_ptr_null(j);
  /* a block realize (not lowered) */
  f = simple_copy();
  ir_block *blk = ir_block_new(A, "root");
  blk->body = f->body;
  f->body = ir_realize(A, blk, NULL, ir_bool(A, true));
  l.func = f;
  l.orig = f;
  ts_diag_clear(&d);
  ck_assert_int_eq(cg_llvm_jit(&l, &T, &j, &d), TS_EUNSUPPORTED);
  ck_assert(strstr(d.msg, "root") != NULL);
  /* two indices */
  f = simple_copy();
  ir_expr *two[2] = {V(f->body->u.loop.var), I(0)};
  f->body->u.loop.body = ir_store(A, f->params[1], 2, two, F(1));
  l.func = f;
  l.orig = f;
  ts_diag_clear(&d);
  ck_assert_int_eq(cg_llvm_jit(&l, &T, &j, &d), TS_EINVAL);
  ck_assert(strstr(d.msg, "flat") != NULL);
  /* an unbound variable */
  f = simple_copy();
  f->body->u.loop.body = stv(f->params[1], V(var("ghost")), F(1));
  l.func = f;
  l.orig = f;
  ts_diag_clear(&d);
  ck_assert_int_eq(cg_llvm_jit(&l, &T, &j, &d), TS_EINVAL);
  ck_assert(strstr(d.msg, "ghost") != NULL);
  /* a store of the wrong dtype */
  f = simple_copy();
  f->body->u.loop.body = stv(f->params[1], V(f->body->u.loop.var), I(1));
  l.func = f;
  l.orig = f;
  ts_diag_clear(&d);
  ck_assert_int_eq(cg_llvm_jit(&l, &T, &j, &d), TS_ETYPE);
  /* a missing linker output directory: the linker's message comes back */
  f = simple_copy();
  l.func = f;
  l.orig = f;
  ts_diag_clear(&d);
  ck_assert_int_ne(cg_llvm_build_shared(&l, &T, "/nonexistent-dir/x.so", &d), TS_OK);
  ck_assert(strstr(d.msg, "/nonexistent-dir") != NULL);
}
END_TEST

static int elf_machine(const char *path) {
  int fd = open(path, O_RDONLY);
  if (fd < 0) return -1;
  Elf64_Ehdr h;
  ssize_t r = read(fd, &h, sizeof h);
  close(fd);
  if (r != (ssize_t)sizeof h || memcmp(h.e_ident, ELFMAG, SELFMAG) != 0) return -1;
  return h.e_machine;
}

static int elf_type(const char *path) {
  int fd = open(path, O_RDONLY);
  if (fd < 0) return -1;
  Elf64_Ehdr h;
  ssize_t r = read(fd, &h, sizeof h);
  close(fd);
  return r == (ssize_t)sizeof h ? h.e_type : -1;
}

START_TEST(test_aarch64) {
  cg_target t;
  memset(&t, 0, sizeof t);
  t.kind = CG_TARGET_LLVM;
  snprintf(t.triple, sizeof t.triple, "aarch64-linux-gnu");
  ts_diag d;
  ts_diag_clear(&d);
  tu_ok(cg_llvm_resolve_target(&t, &d), &d);
  /* a kernel with vectors, a parallel loop and exp */
  ir_buffer *a = buf("A", IR_F32, 1024), *c = buf("C", IR_F32, 1024);
  ir_var *i = var("i");
  ir_expr *vi = ramp(mul(V(i), I(4)), 4);
  ir_stmt *body = loop(i, 256, IR_FOR_PARALLEL, stv(c, vi, call1(IR_EXP, ir_dt_vec(IR_F32, 4), ld(a, vi))));
  ir_buffer *ps[] = {a, c};
  cg_lowered l = {func("exp_a64", 1, 2, ps, body), NULL};
  l.orig = l.func;
  char obj[128], so[128];
  snprintf(obj, sizeof obj, "%s/a64.o", tmpdir);
  snprintf(so, sizeof so, "%s/a64.so", tmpdir);
  tu_ok(cg_llvm_emit_object(&l, &t, obj, &d), &d);
  ck_assert_int_eq(elf_machine(obj), EM_AARCH64);
  ck_assert_int_eq(elf_type(obj), ET_REL);
  tu_ok(cg_llvm_build_shared(&l, &t, so, &d), &d);
  ck_assert_int_eq(elf_machine(so), EM_AARCH64);
  ck_assert_int_eq(elf_type(so), ET_DYN);
  /* the host object is x86-64 (or whatever the host is) */
  snprintf(obj, sizeof obj, "%s/host.o", tmpdir);
  tu_ok(cg_llvm_emit_object(&l, &T, obj, &d), &d);
#if defined(__x86_64__)
  ck_assert_int_eq(elf_machine(obj), EM_X86_64);
#endif
  /* JIT for another architecture is refused */
  cg_jit *j = NULL;
  ck_assert_int_eq(cg_llvm_jit(&l, &t, &j, &d), TS_EUNSUPPORTED);
  char *ir = cg_llvm_dump_ir(&l, &t, true, &d);
  ck_assert_ptr_nonnull(ir);
  ck_assert(strstr(ir, "aarch64") != NULL);
  ck_assert(strstr(ir, "<4 x float>") != NULL);
  ts_free(ir);
}
END_TEST

/* ---- suite -------------------------------------------------------------------------------- */

static Suite *suite(void) {
  Suite *s = suite_create("cg_llvm");
  TCase *tc = tcase_create("llvm");
  tcase_add_unchecked_fixture(tc, suite_setup, suite_teardown);
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_resolve_target);
  tcase_add_test(tc, test_vector_add);
  tcase_add_test(tc, test_vector_fma_ir);
  tcase_add_test(tc, test_parallel);
  tcase_add_test(tc, test_masked_and_gather);
  tcase_add_test(tc, test_clamped_select_load);
  tcase_add_test(tc, test_uniform_guard_branch);
  tcase_add_test(tc, test_int8_accumulate);
  tcase_add_test(tc, test_floordiv_floormod);
  tcase_add_test(tc, test_register_tile);
  tcase_add_test(tc, test_init_guard);
  tcase_add_test(tc, test_lazy_guards);
  tcase_add_test(tc, test_int_semantics);
  tcase_add_test(tc, test_f64_math);
  tcase_add_test(tc, test_intrinsics);
  tcase_add_test(tc, test_pow_const);
  tcase_add_test(tc, test_f16_bf16);
  tcase_add_test(tc, test_casts);
  tcase_add_test(tc, test_select_minmax_bool);
  tcase_add_test(tc, test_allocate);
  tcase_add_test(tc, test_loop_kinds);
  tcase_add_test(tc, test_workloads);
  tcase_add_test(tc, test_workloads_scheduled);
  tcase_add_test(tc, test_matmul_trace);
  tcase_add_test(tc, test_random_traces);
  tcase_add_test(tc, test_metadata_nd);
  tcase_add_test(tc, test_errors);
  tcase_add_test(tc, test_aarch64);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(suite());
  srunner_run_all(sr, CK_NORMAL);
  int failures = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failures ? 1 : 0;
}
