/* test_intrin.c — code generation of tensorized kernels (docs/TENSORIZE.md).
 * A matmul tiled to an intrinsic's shape and tensorized is lowered and
 * compiled through LLVM; the emitted assembly must hold the instruction
 * (vpdpbusd for VNNI with -mattr=+avx512vnni and with -mcpu=znver4; sdot for
 * AArch64 with +dotprod; vfmadd for the AVX-512 FMA micro-kernel), and the
 * kernels must compute what the reference interpreter computes on the
 * seeded inputs: x86 ones natively (when this CPU has AVX-512 VNNI), the
 * AArch64 sdot one under qemu-aarch64 with the cross-compiled runner (argv:
 * RUNNER QEMU; skipped when absent). Also: call_extern of an unknown LLVM
 * intrinsic is refused with its name; access_ptr lowers to an address. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codegen/llvm.h"
#include "runtime/runtime.h"
#include "ir/parse.h"
#include "ir/schedule/layout.h"
#include "ir/schedule/tensorize.h"
#include "schedule/util.h"
#include "search/search.h"
#include "tuner/build.h"
#include "tuner/verify.h"

static const char *runner, *qemu;
static char dir[64];
static ts_diag D;

static bool cpu_has(const char *flag) {
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return false;
  char line[8192];
  bool found = false;
  while (!found && fgets(line, sizeof line, f))
    if (!strncmp(line, "flags", 5)) {
      char pat[64];
      snprintf(pat, sizeof pat, " %s", flag);
      char *p = strstr(line, pat);
      found = p && (p[strlen(pat)] == ' ' || p[strlen(pat)] == '\n');
    }
  fclose(f);
  return found;
}

/* spec tiled (ti, tj, tk) as i0 j0 k0 i1 j1 k1 and tensorized at i1 */
static sch_state *tensorized(ts_arena *a, const char *spec, const char *intrin, int64_t ti, int64_t tj, int64_t tk,
                             ir_func **orig) {
  sch_state *s = tu_schedule(a, spec, orig);
  sch_loop lp[3], o[3][2];
  ck_assert_int_eq(tu_loops(s, "C", lp, 3), 3);
  int64_t f[3][2] = {{-1, ti}, {-1, tj}, {-1, tk}};
  for (int i = 0; i < 3; i++) {
    ts_diag_clear(&D);
    tu_ok(sch_split(s, lp[i], 2, f[i], o[i], &D), &D);
  }
  sch_loop order[6] = {o[0][0], o[1][0], o[2][0], o[0][1], o[1][1], o[2][1]};
  ts_diag_clear(&D);
  tu_ok(sch_reorder(s, 6, order, &D), &D);
  ts_diag_clear(&D);
  tu_ok(sch_tensorize_loop(s, o[0][1], intrin, NULL, &D), &D);
  return s;
}

/* spec's B re-laid into the packed layout [n/lanes, k/depth, lanes*depth]
 * (TransformLayout; VNNI's is 16 x 4), then tiled (ti, lanes, depth) and
 * tensorized with a packed intrinsic; *orig is the unscheduled function on
 * the packed weight (what the kernel computes: docs/LAYOUT.md) */
static sch_state *packed_tensorized_dt(ts_arena *a, const char *spec, const char *intrin, int64_t ti, int64_t lanes,
                                       int64_t depth, bool wide16, ir_func **orig) {
  ir_func *f;
  sch_state *s = tu_schedule(a, spec, &f);
  sch_layout_map m;
  ts_diag_clear(&D);
  tu_ok(sch_layout_vnni(sch_func(s), 1, 0, 1, lanes, depth, &m, &D), &D);
  if (wide16) m.dtype = ir_dt(IR_I16); /* the weight stored as i16 (.packed16) */
  tu_ok(sch_transform_layout(s, &m, &D), &D);
  *orig = ir_func_copy(a, sch_func(s));
  ck_assert_ptr_nonnull(*orig);
  ck_assert_int_eq((*orig)->params[1]->ndim, 3);
  sch_loop lp[3], o[3][2];
  ck_assert_int_eq(tu_loops(s, "C", lp, 3), 3);
  int64_t fs[3][2] = {{-1, ti}, {-1, lanes}, {-1, depth}};
  for (int i = 0; i < 3; i++) {
    ts_diag_clear(&D);
    tu_ok(sch_split(s, lp[i], 2, fs[i], o[i], &D), &D);
  }
  sch_loop order[6] = {o[0][0], o[1][0], o[2][0], o[0][1], o[1][1], o[2][1]};
  ts_diag_clear(&D);
  tu_ok(sch_reorder(s, 6, order, &D), &D);
  ts_diag_clear(&D);
  tu_ok(sch_tensorize_loop(s, o[0][1], intrin, NULL, &D), &D);
  return s;
}

static sch_state *packed_tensorized_ld(ts_arena *a, const char *spec, const char *intrin, int64_t ti, int64_t lanes,
                                       int64_t depth, ir_func **orig) {
  return packed_tensorized_dt(a, spec, intrin, ti, lanes, depth, false, orig);
}

/* The VNNI layout [n/16, k/4, 64], tiled (ti, 16, 4). */
static sch_state *packed_tensorized(ts_arena *a, const char *spec, const char *intrin, int64_t ti, ir_func **orig) {
  return packed_tensorized_ld(a, spec, intrin, ti, 16, 4, orig);
}

static char *asm_of(const ir_func *f, const char *target) {
  cg_target t;
  ts_diag_clear(&D);
  ck_assert_msg(cg_target_parse(target, &t, &D) == TS_OK, "%s", D.msg);
  ts_arena a;
  ts_arena_init(&a);
  cg_lowered l;
  ck_assert_msg(cg_lower(&a, f, &t, &l, &D) == TS_OK, "lower: %s", D.msg);
  char *s = cg_llvm_dump_asm(&l, &t, &D);
  ck_assert_msg(s != NULL, "asm for %s: %s", target, D.msg);
  ts_arena_fini(&a);
  return s;
}

static int count(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle)) n++;
  return n;
}

/* builds f for target into a shared library and checks its outputs
 * against the interpreter: natively or under qemu */
static void parity(const ir_func *orig, const ir_func *f, const char *target, bool under_qemu) {
  cg_target tg;
  ts_diag_clear(&D);
  ck_assert_msg(cg_target_parse(target, &tg, &D) == TS_OK, "%s", D.msg);
  ck_assert_msg(cg_llvm_resolve_target(&tg, &D) == TS_OK, "%s", D.msg);
  char so[128], out[128];
  static int counter;
  snprintf(so, sizeof so, "%s/k%d.so", dir, counter);
  snprintf(out, sizeof out, "%s/k%d.out", dir, counter++);
  ck_assert_msg(tun_build_shared(f, &tg, so, &D) == TS_OK, "%s: %s", target, D.msg);
  const uint64_t seed = 23;
  void *bytes = NULL;
  size_t nb = 0;
  tsrt_measure_result r;
  memset(&r, 0, sizeof r);
  if (under_qemu) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "TESSEL_NUM_THREADS=1 '%s' '%s' '%s' %llu '%s'", qemu, runner, so,
             (unsigned long long)seed, out);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    char line[600] = "";
    if (!fgets(line, sizeof line, p)) line[0] = 0;
    int st = pclose(p);
    ck_assert_msg(st == 0 && !strncmp(line, "ok ", 3), "under qemu: %s", line);
    FILE *fo = fopen(out, "rb");
    ck_assert_ptr_nonnull(fo);
    fseek(fo, 0, SEEK_END);
    nb = (size_t)ftell(fo);
    fseek(fo, 0, SEEK_SET);
    bytes = malloc(nb ? nb : 1);
    ck_assert_uint_eq(fread(bytes, 1, nb, fo), nb);
    fclose(fo);
  } else {
    tsrt_measure_opts o = {.repeat = 1, .seed = seed, .want_outputs = true, .timeout_s = 60};
    tsrt_measure_forked(so, &o, &r);
    ck_assert_msg(r.status == TS_OK, "%s", r.error);
    bytes = r.outputs;
    nb = r.outputs_bytes;
  }
  tun_verify_result vr;
  ck_assert_msg(tun_verify(orig, seed, bytes, nb, &vr, &D) == TS_OK, "%s", D.msg);
  ck_assert_msg(vr.matched, "%s vs the interpreter: %s", target, vr.detail);
  if (under_qemu) free(bytes);
  else tsrt_result_fini(&r);
  unlink(so);
  unlink(out);
}

START_TEST(test_vnni_asm) {
  ts_arena a;
  ts_arena_init(&a);
  ir_func *orig;
  sch_state *s = tensorized(&a, "matmul_int8:m=8,n=64,k=32", "x86.avx512.vnni.i8i8.4x16x4", 4, 16, 4, &orig);
  char *x = asm_of(sch_func(s), "llvm -mtriple=x86_64-linux-gnu -mattr=+avx512f,+avx512bw,+avx512vnni");
  ck_assert_msg(count(x, "vpdpbusd") >= 2, "no vpdpbusd in:\n%.4000s", x);
  ts_free(x);
  x = asm_of(sch_func(s), "llvm -mtriple=x86_64-linux-gnu -mcpu=znver4");
  ck_assert_msg(count(x, "vpdpbusd") >= 2, "no vpdpbusd for znver4");
  ts_free(x);
  sch_free(s);
  ts_arena_fini(&a);
}
END_TEST

START_TEST(test_vnni_parity) {
  if (!cpu_has("avx512_vnni")) {
    fprintf(stderr, "test_intrin: this CPU has no avx512_vnni; native VNNI parity skipped\n");
    return;
  }
  ts_arena a;
  ts_arena_init(&a);
  ir_func *orig;
  sch_state *s = tensorized(&a, "matmul_int8:m=12,n=48,k=20", "x86.avx512.vnni.i8i8.4x16x4", 4, 16, 4, &orig);
  parity(orig, sch_func(s), "llvm -mattr=+avx512f,+avx512bw,+avx512vnni", false);
  sch_free(s);
  s = tensorized(&a, "matmul_int8:m=3,n=32,k=8", "x86.avx512.vnni.i8i8.1x16x4", 1, 16, 4, &orig);
  parity(orig, sch_func(s), "llvm", false);
  sch_free(s);
  ts_arena_fini(&a);
}
END_TEST

/* The packed-weight intrinsics: one 64-byte load of B feeds vpdpbusd (no
 * interleaving shuffles), bit-exact with the interpreter on the packed
 * function (u8 x i8 and i8 x i8, 1 / 4 / 8 rows) */
START_TEST(test_vnni_packed) {
  ts_arena a;
  ts_arena_init(&a);
  ir_func *orig;
  sch_state *s = packed_tensorized(&a, "matmul_u8s8:m=8,n=64,k=32", "x86.avx512.vnni.u8i8.packed.4x16x4", 4, &orig);
  char *x = asm_of(sch_func(s), "llvm -mtriple=x86_64-linux-gnu -mattr=+avx512f,+avx512bw,+avx512vnni");
  ck_assert_msg(count(x, "vpdpbusd") >= 2, "no vpdpbusd in:\n%.4000s", x);
  ck_assert_msg(count(x, "vpermt2b") + count(x, "vpunpck") + count(x, "vpermb") == 0,
                "the packed kernel still shuffles B:\n%.4000s", x);
  ts_free(x);
  sch_free(s);
  if (!cpu_has("avx512_vnni")) {
    fprintf(stderr, "test_intrin: this CPU has no avx512_vnni; native packed VNNI parity skipped\n");
    ts_arena_fini(&a);
    return;
  }
  static const struct {
    const char *spec, *intrin;
    int64_t rows;
  } cases[] = {
      {"matmul_u8s8:m=16,n=48,k=20", "x86.avx512.vnni.u8i8.packed.8x16x4", 8},
      {"matmul_u8s8:m=12,n=32,k=12", "x86.avx512.vnni.u8i8.packed.4x16x4", 4},
      {"matmul_u8s8:m=3,n=16,k=8", "x86.avx512.vnni.u8i8.packed.1x16x4", 1},
      {"matmul_int8:m=12,n=48,k=20", "x86.avx512.vnni.i8i8.packed.4x16x4", 4},
      {"matmul_int8:m=5,n=32,k=8", "x86.avx512.vnni.i8i8.packed.1x16x4", 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    s = packed_tensorized(&a, cases[i].spec, cases[i].intrin, cases[i].rows, &orig);
    parity(orig, sch_func(s), "llvm", false);
    sch_free(s);
  }
  ts_arena_fini(&a);
}
END_TEST

/* The AVX2 int8 kernels (no VNNI): vpmaddwd on the weight packed 8 lanes x
 * 2 deep, sign-extended; bit-exact with the interpreter natively (u8 x i8
 * and i8 x i8, 1 / 4 / 8 rows) */
START_TEST(test_pmaddwd_packed) {
  ts_arena a;
  ts_arena_init(&a);
  ir_func *orig;
  sch_state *s =
      packed_tensorized_ld(&a, "matmul_u8s8:m=8,n=32,k=16", "x86.avx2.pmaddwd.u8i8.packed.4x8x2", 4, 8, 2, &orig);
  char *x = asm_of(sch_func(s), "llvm -mtriple=x86_64-linux-gnu -mattr=+avx2,+fma");
  ck_assert_msg(count(x, "vpmaddwd") >= 2, "no vpmaddwd in:\n%.4000s", x);
  /* A's byte pair broadcast from memory as one i16, then widened: not moved
   * through a general register (movzwl + vmovd) row by row */
  ck_assert_msg(count(x, "vpbroadcastw") >= 1 && count(x, "vmovd\t") == 0, "A's pair through a GPR in:\n%.4000s", x);
  ts_free(x);
  sch_free(s);
  if (!cpu_has("avx2")) {
    fprintf(stderr, "test_intrin: this CPU has no avx2; native vpmaddwd parity skipped\n");
    ts_arena_fini(&a);
    return;
  }
  static const struct {
    const char *spec, *intrin;
    int64_t rows;
  } cases[] = {
      {"matmul_u8s8:m=16,n=24,k=20", "x86.avx2.pmaddwd.u8i8.packed.8x8x2", 8},
      {"matmul_u8s8:m=12,n=16,k=6", "x86.avx2.pmaddwd.u8i8.packed.4x8x2", 4},
      {"matmul_u8s8:m=3,n=8,k=4", "x86.avx2.pmaddwd.u8i8.packed.1x8x2", 1},
      {"matmul_int8:m=12,n=24,k=20", "x86.avx2.pmaddwd.i8i8.packed.4x8x2", 4},
      {"matmul_int8:m=5,n=16,k=8", "x86.avx2.pmaddwd.i8i8.packed.1x8x2", 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    s = packed_tensorized_ld(&a, cases[i].spec, cases[i].intrin, cases[i].rows, 8, 2, &orig);
    parity(orig, sch_func(s), "llvm -mattr=+avx2,+fma", false);
    sch_free(s);
  }
  ts_arena_fini(&a);
}
END_TEST

/* The same kernels on the weight stored as i16 (.packed16): the weight is
 * vpmaddwd's operand as loaded (no vpmovsxbw), A's pair still broadcast
 * from memory and widened; bit-exact with the interpreter natively on any
 * i16 weight (the verification's random packed inputs span all of i16) */
START_TEST(test_pmaddwd_packed16) {
  ts_arena a;
  ts_arena_init(&a);
  ir_func *orig;
  sch_state *s = packed_tensorized_dt(&a, "matmul_u8s8:m=8,n=32,k=16", "x86.avx2.pmaddwd.u8i8.packed16.4x8x2", 4, 8,
                                      2, true, &orig);
  ck_assert_int_eq(orig->params[1]->dtype.code, IR_I16);
  char *x = asm_of(sch_func(s), "llvm -mtriple=x86_64-linux-gnu -mattr=+avx2,+fma");
  ck_assert_msg(count(x, "vpmaddwd") >= 4, "no vpmaddwd in:\n%.4000s", x);
  ck_assert_msg(count(x, "vpmovsxbw") == 0, "the i16 weight is widened in:\n%.4000s", x);
  ck_assert_msg(count(x, "vpbroadcastw") >= 1 && count(x, "vmovd\t") == 0, "A's pair through a GPR in:\n%.4000s", x);
  ts_free(x);
  sch_free(s);
  /* a byte weight does not match the i16 kernel */
  ir_func *of;
  s = tu_schedule(&a, "matmul_u8s8:m=4,n=8,k=2", &of);
  sch_layout_map m;
  ts_diag_clear(&D);
  tu_ok(sch_layout_vnni(sch_func(s), 1, 0, 1, 8, 2, &m, &D), &D);
  tu_ok(sch_transform_layout(s, &m, &D), &D);
  sch_loop lp[3];
  ck_assert_int_eq(tu_loops(s, "C", lp, 3), 3);
  ts_diag_clear(&D);
  ck_assert_int_ne(sch_tensorize_loop(s, lp[0], "x86.avx2.pmaddwd.u8i8.packed16.4x8x2", NULL, &D), TS_OK);
  sch_free(s);
  if (!cpu_has("avx2")) {
    fprintf(stderr, "test_intrin: this CPU has no avx2; native packed16 parity skipped\n");
    ts_arena_fini(&a);
    return;
  }
  static const struct {
    const char *spec, *intrin;
    int64_t rows;
  } cases[] = {
      {"matmul_u8s8:m=12,n=16,k=6", "x86.avx2.pmaddwd.u8i8.packed16.4x8x2", 4},
      {"matmul_u8s8:m=3,n=8,k=4", "x86.avx2.pmaddwd.u8i8.packed16.1x8x2", 1},
      {"matmul_int8:m=12,n=24,k=20", "x86.avx2.pmaddwd.i8i8.packed16.4x8x2", 4},
      {"matmul_int8:m=5,n=16,k=8", "x86.avx2.pmaddwd.i8i8.packed16.1x8x2", 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    s = packed_tensorized_dt(&a, cases[i].spec, cases[i].intrin, cases[i].rows, 8, 2, true, &orig);
    parity(orig, sch_func(s), "llvm -mattr=+avx2,+fma", false);
    sch_free(s);
  }
  ts_arena_fini(&a);
}
END_TEST

START_TEST(test_fma_microkernel) {
  ts_arena a;
  ts_arena_init(&a);
  ir_func *orig;
  sch_state *s = tensorized(&a, "matmul:m=8,n=32,k=7", "x86.avx512.fma.f32.4x16x1", 4, 16, 1, &orig);
  char *x = asm_of(sch_func(s), "llvm -mtriple=x86_64-linux-gnu -mattr=+avx512f");
  ck_assert_msg(count(x, "vfmadd") >= 4 && strstr(x, "zmm"), "no zmm vfmadd in:\n%.3000s", x);
  ts_free(x);
  if (cpu_has("avx512f")) parity(orig, sch_func(s), "llvm", false);
  sch_free(s);
  ts_arena_fini(&a);
}
END_TEST

START_TEST(test_sdot) {
  ts_arena a;
  ts_arena_init(&a);
  ir_func *orig;
  sch_state *s = tensorized(&a, "matmul_int8:m=8,n=12,k=16", "arm.dotprod.sdot.i8i8.4x4x4", 4, 4, 4, &orig);
  char *x = asm_of(sch_func(s), "llvm -mtriple=aarch64-linux-gnu -mattr=+dotprod");
  ck_assert_msg(count(x, "sdot") >= 4, "no sdot in:\n%.3000s", x);
  ts_free(x);
  if (!runner || access("/lib/ld-linux-aarch64.so.1", R_OK) != 0) {
    fprintf(stderr, "test_intrin: no aarch64 runner or libc: sdot parity under qemu skipped\n");
  } else {
    parity(orig, sch_func(s), "llvm -mtriple=aarch64-linux-gnu -mattr=+dotprod", true);
    sch_free(s);
    s = tensorized(&a, "matmul_int8:m=3,n=8,k=8", "arm.dotprod.sdot.i8i8.1x4x4", 1, 4, 4, &orig);
    parity(orig, sch_func(s), "llvm -mtriple=aarch64-linux-gnu -mattr=+dotprod", true);
  }
  sch_free(s);
  ts_arena_fini(&a);
}
END_TEST

/* A float value converted to an integer (a quantize's round, zero point and
 * cast) is computed without `contract`, so LLVM cannot fuse its multiply-add
 * into an FMA that moves a .5 tie (the interpreter rounds each operation);
 * the same expression stored as float keeps `contract`. */
START_TEST(test_quantize_not_contracted) {
  ts_arena a;
  ts_arena_init(&a);
  const char *srcs[2] = {"func q(A: f32[16], B: f32[16], D: f32[16]) -> C: i32[16] {\n"
                         "  block root() {\n"
                         "    for i in serial(0, 16) {\n"
                         "      C[i] = i32(round(A[i] * B[i] + D[i]))\n"
                         "    }\n"
                         "  }\n"
                         "}\n",
                         "func g(A: f32[16], B: f32[16], D: f32[16]) -> C: f32[16] {\n"
                         "  block root() {\n"
                         "    for i in serial(0, 16) {\n"
                         "      C[i] = A[i] * B[i] + D[i]\n"
                         "    }\n"
                         "  }\n"
                         "}\n"};
  cg_target t;
  ts_diag_clear(&D);
  ck_assert(cg_target_parse("llvm -mtriple=x86_64-linux-gnu -mattr=+avx2,+fma", &t, &D) == TS_OK);
  for (int k = 0; k < 2; k++) {
    ir_func *f;
    ts_diag_clear(&D);
    tu_ok(ir_parse_func(&a, srcs[k], strlen(srcs[k]), "q.tsl", &f, &D), &D);
    cg_lowered l;
    ts_diag_clear(&D);
    tu_ok(cg_lower(&a, f, &t, &l, &D), &D);
    char *ir = cg_llvm_dump_ir(&l, &t, false, &D);
    ck_assert_msg(ir != NULL, "%s", D.msg);
    ck_assert_msg(strstr(ir, "fmul") != NULL, "no fmul in:\n%.3000s", ir);
    if (k == 0) ck_assert_msg(!strstr(ir, "contract"), "quantize contracted:\n%.3000s", ir);
    else ck_assert_msg(strstr(ir, "contract") != NULL, "float kernel lost contract:\n%.3000s", ir);
    ts_free(ir);
  }
  ts_arena_fini(&a);
}
END_TEST

/* A float clamped into the i32 range (a quantize's saturation) converts to
 * u8 / i8 / i32 through i32: vectorized on AVX2 (vcvttps2dq, not a scalar
 * vcvttss2si per lane through i64) and equal to the interpreter, NaN (which
 * the clamp passes on) to 0, fractions truncated, both bounds reached. */
START_TEST(test_clamped_cast_vectorized) {
  static const char *fmt = "func q(A: f32[128]) -> C: %s[128] {\n"
                           "  block root() {\n"
                           "    for i0 in serial(0, 4) {\n"
                           "      for i1 in vectorized(0, 32) {\n"
                           "        C[i0 * 32 + i1] = %s(min(max(select((i0 * 32 + i1) %% 5 == 0, "
                           "sqrt(-1.0f32 - f32(i0 * 32 + i1)), (f32(i0 * 32 + i1) - 30.0f32) * 3.7f32 + A[i0 * 32 + i1]), "
                           "%s), %s))\n"
                           "      }\n"
                           "    }\n"
                           "  }\n"
                           "}\n";
  static const char *cases[][3] = {{"u8", "0.0f32", "255.0f32"}, {"i8", "-128.0f32", "127.0f32"},
                                   {"i32", "-1000.0f32", "200.0f32"}};
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    ts_arena a;
    ts_arena_init(&a);
    char src[1024];
    snprintf(src, sizeof src, fmt, cases[k][0], cases[k][0], cases[k][1], cases[k][2]);
    ir_func *f;
    ts_diag_clear(&D);
    tu_ok(ir_parse_func(&a, src, strlen(src), "q.tsl", &f, &D), &D);
    char *x = asm_of(f, "llvm -mtriple=x86_64-linux-gnu -mattr=+avx2,+fma");
    ck_assert_msg(count(x, "vcvttps2dq") >= 1 && count(x, "cvttss2si") == 0, "%s: conversion lane by lane:\n%.3000s",
                  cases[k][0], x);
    ts_free(x);
    parity(f, f, cpu_has("avx2") ? "llvm -mattr=+avx2,+fma" : "llvm", false);
    ts_arena_fini(&a);
  }
}
END_TEST

START_TEST(test_extern_refusals) {
  ts_arena a;
  ts_arena_init(&a);
  const char *src = "func k(A: i32[16]) -> C: i32[16] {\n"
                    "  block root() {\n"
                    "    C[ramp(0, 1, 16)] = call_extern(\"llvm.x86.no.such.thing\", i32x16, A[ramp(0, 1, 16)])\n"
                    "  }\n"
                    "}\n";
  ir_func *f;
  ts_diag_clear(&D);
  tu_ok(ir_parse_func(&a, src, strlen(src), "t", &f, &D), &D);
  cg_target t;
  ck_assert(cg_target_parse("llvm", &t, &D) == TS_OK);
  cg_lowered l;
  ts_diag_clear(&D);
  tu_ok(cg_lower(&a, f, &t, &l, &D), &D);
  ts_diag_clear(&D);
  char *x = cg_llvm_dump_asm(&l, &t, &D);
  ck_assert_ptr_null(x);
  ck_assert_msg(strstr(D.msg, "llvm.x86.no.such.thing") != NULL, "%s", D.msg);
  /* access_ptr: the address of an element, used by a pointer intrinsic */
  const char *src2 = "func k(A: f32[4, 8]) -> C: f32[4, 8] {\n"
                     "  block root() {\n"
                     "    eval call_extern(\"llvm.prefetch\", handle, access_ptr(A, 9, 1), 0i32, 3i32, 1i32)\n"
                     "    C[1, ramp(0, 1, 8)] = A[1, ramp(0, 1, 8)]\n"
                     "  }\n"
                     "}\n";
  ts_diag_clear(&D);
  tu_ok(ir_parse_func(&a, src2, strlen(src2), "t2", &f, &D), &D);
  ts_diag_clear(&D);
  tu_ok(cg_lower(&a, f, &t, &l, &D), &D);
  char *ir = cg_llvm_dump_ir(&l, &t, false, &D);
  ck_assert_msg(ir && strstr(ir, "llvm.prefetch") && strstr(ir, "getelementptr"), "%s", ir ? ir : D.msg);
  ts_free(ir);
  ts_arena_fini(&a);
}
END_TEST


/* ---- the search: MultiLevelTilingTensor + RewriteTensorize ------------------------- */

typedef struct ann_ctx {
  const char *key;
  const char *val;
} ann_ctx;

static bool ann_cb(void *ctx, const ir_stmt *s) {
  ann_ctx *c = ctx;
  if (s->kind == IR_BLOCK_REALIZE) {
    const ir_annot *a = ir_annot_find(s->u.realize.block->nannot, s->u.realize.block->annots, c->key);
    if (a && a->kind == IR_ANN_STR) c->val = a->v.s;
  }
  return true;
}

static const char *tensorized_with(const ir_func *f) {
  ann_ctx c = {"tessel.tensorized", NULL};
  ir_visitor v = {.stmt = ann_cb, .ctx = &c};
  ir_visit_stmt(&v, f->body);
  return c.val;
}

/* One core: no serial twins of a small kernel's sketches (search/rules/
 * parallel_vectorize_unroll.c), so the counts below do not depend on the
 * machine. */
static const srch_space_opts ONE_CORE = {.num_cores = 1};

static int tensor_sketches(const ir_func *f, const char *target, sch_trace ***sk, int *n) {
  cg_target t;
  ts_diag_clear(&D);
  ck_assert(cg_target_parse(target, &t, &D) == TS_OK);
  ck_assert_msg(srch_sketches(f, &t, &ONE_CORE, sk, n, &D) == TS_OK, "%s", D.msg);
  int k = 0;
  for (int i = 0; i < *n; i++) {
    char *js = sch_trace_to_json((*sk)[i]);
    if (strstr(js, "meta_schedule.auto_tensorize")) k++;
    free(js);
  }
  return k;
}

static void free_sk(sch_trace **sk, int n) {
  for (int i = 0; i < n; i++) sch_trace_free(sk[i]);
  ts_free(sk);
}

START_TEST(test_rule_targets) {
  ts_arena a;
  ts_arena_init(&a);
  ir_func *f = tu_workload(&a, "matmul_int8:m=64,n=64,k=64");
  sch_trace **sk;
  int n;
  /* VNNI: the 4-row and the 1-row intrinsic, plus the MultiLevelTiling
   * sketches: n = 64 is a multiple of the i32 lanes, so the vector-block
   * variant's three write-cache ones and its register-resident one, in place
   * of the plain ones (docs/SEARCH.md) */
  ck_assert_int_eq(tensor_sketches(f, "llvm -mtriple=x86_64-linux-gnu -mattr=+avx512f,+avx512vnni", &sk, &n), 2);
  ck_assert_int_eq(n, 6);
  free_sk(sk, n);
  /* without VNNI (skylake-avx512 has AVX2): the AVX2 vpmaddwd kernels; without AVX2 none */
  ck_assert_int_eq(tensor_sketches(f, "llvm -mtriple=x86_64-linux-gnu -mcpu=skylake-avx512", &sk, &n), 2);
  free_sk(sk, n);
  ck_assert_int_eq(tensor_sketches(f, "llvm -mtriple=x86_64-linux-gnu -mcpu=x86-64 -mattr=+sse4.2", &sk, &n), 0);
  free_sk(sk, n);
  ck_assert_int_eq(tensor_sketches(f, "llvm -mtriple=aarch64-linux-gnu -mattr=+dotprod", &sk, &n), 2);
  free_sk(sk, n);
  ck_assert_int_eq(tensor_sketches(f, "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72", &sk, &n), 0);
  free_sk(sk, n);
  /* an extent the intrinsic does not divide: the block padded (PadEinsum)
   * for the two largest VNNI kernels; with AVX2 only, for its kernels */
  ir_func *g = tu_workload(&a, "matmul_int8:m=64,n=60,k=64");
  ck_assert_int_eq(tensor_sketches(g, "llvm -mtriple=x86_64-linux-gnu -mattr=+avx512f,+avx512vnni", &sk, &n), 2);
  free_sk(sk, n);
  ck_assert_int_eq(tensor_sketches(g, "llvm -mtriple=x86_64-linux-gnu -mcpu=skylake-avx512", &sk, &n), 2);
  free_sk(sk, n);
  /* sgemm: the FMA micro-kernels */
  ir_func *h = tu_workload(&a, "matmul:m=64,n=64,k=64");
  ck_assert_int_ge(tensor_sketches(h, "llvm -mtriple=x86_64-linux-gnu -mattr=+avx512f", &sk, &n), 1);
  free_sk(sk, n);
  ts_arena_fini(&a);
}
END_TEST

/* tensorized candidates instantiate (RewriteTensorize, RewriteReductionBlock,
 * cg_check), compute the right thing, and the tile-size mutator never
 * changes the intrinsic's shape */
/* a batched int8 matmul (a quantized transformer's [b, s, k] x [k, n]
 * MatMul: the batch stays outside the intrinsic) and a prime row count (the
 * 1-row kernel divides it) get tensorized sketches on the packed weight;
 * their candidates match the layout reference, natively too */
START_TEST(test_rule_batch_and_odd) {
  ts_arena a;
  ts_arena_init(&a);
  const char *target = "llvm -mattr=+avx512f,+avx512bw,+avx512vnni";
  cg_target t;
  ts_diag_clear(&D);
  ck_assert(cg_target_parse(target, &t, &D) == TS_OK);
  static const char bmm[] = "kernel bmm(A: i8[2, 5, 12], B: i8[12, 32]) -> C: i32[2, 5, 32] {\n"
                            "  C[b, i, j] += i32(A[b, i, k]) * i32(B[k, j])\n"
                            "}\n";
  ir_func *fs[2] = {NULL, tu_workload(&a, "matmul_u8s8:m=13,n=32,k=12")};
  ts_diag_clear(&D);
  ck_assert_msg(ir_parse_func(&a, bmm, strlen(bmm), "bmm.tsl", &fs[0], &D) == TS_OK, "%s", D.msg);
  ck_assert(!ir_annot_set(&a, &fs[0]->nannot, &fs[0]->annots,
                          (ir_annot){.key = IR_FUNC_ANN_LAYOUT_FREE, .kind = IR_ANN_INT, .v.i = 2}));
  for (int w = 0; w < 2; w++) {
    ir_func *f = fs[w];
    sch_trace **sk;
    int n, checked = 0;
    ck_assert_msg(srch_sketches(f, &t, &ONE_CORE, &sk, &n, &D) == TS_OK, "%s", D.msg);
    for (int i = 0; i < n; i++) {
      char *js = sch_trace_to_json(sk[i]);
      bool tensor = strstr(js, "meta_schedule.auto_tensorize") != NULL;
      free(js);
      if (!tensor) continue;
      for (uint64_t seed = 1; seed <= 2; seed++) {
        ts_diag_clear(&D);
        sch_traced *c = srch_instantiate(sk[i], f, &t, true, seed, &D);
        ck_assert_msg(c != NULL, "instantiate: %s", D.msg);
        const char *in = tensorized_with(sch_traced_func(c));
        ck_assert_msg(in && strstr(in, "u8i8.packed"), "tensorized with %s", in ? in : "nothing");
        const ir_func *ref = sch_layout_reference(&a, f, sch_traced_trace(c), &D);
        ck_assert_msg(ref != NULL, "%s", D.msg);
        tu_assert_equivalent(ref, sch_traced_func(c));
        if (seed == 1 && cpu_has("avx512_vnni")) parity(ref, sch_traced_func(c), target, false);
        sch_traced_free(c);
        checked++;
      }
    }
    ck_assert_msg(checked >= 2, "workload %d: %d tensorized candidates", w, checked);
    free_sk(sk, n);
  }
  ts_arena_fini(&a);
}
END_TEST

/* extents no VNNI kernel divides (prime and odd n and k, and m): the rule
 * pads the block (PadEinsum) and tensorizes it; the candidates equal the
 * workload in the interpreter (the small ones), natively against the
 * interpreter, and their code holds vpdpbusd */
START_TEST(test_rule_padded) {
  ts_arena a;
  ts_arena_init(&a);
  const char *target = "llvm -mattr=+avx512f,+avx512bw,+avx512vnni";
  cg_target t;
  ts_diag_clear(&D);
  ck_assert(cg_target_parse(target, &t, &D) == TS_OK);
  static const char *specs[] = {"matmul_u8s8:m=1,n=17,k=5", "matmul_u8s8:m=7,n=31,k=13", "matmul_int8:m=3,n=17,k=31",
                                "matmul_u8s8:m=197,n=1000,k=333"};
  for (size_t w = 0; w < sizeof specs / sizeof specs[0]; w++) {
    bool big = w == 3;
    ir_func *f = tu_workload(&a, specs[w]);
    sch_trace **sk;
    int n, checked = 0;
    ck_assert_msg(srch_sketches(f, &t, &ONE_CORE, &sk, &n, &D) == TS_OK, "%s", D.msg);
    for (int i = 0; i < n; i++) {
      char *js = sch_trace_to_json(sk[i]);
      bool tensor = strstr(js, "meta_schedule.auto_tensorize") != NULL;
      ck_assert(!tensor || strstr(js, "\"PadEinsum\""));
      free(js);
      if (!tensor) continue;
      ts_diag_clear(&D);
      sch_traced *c = srch_instantiate(sk[i], f, &t, true, 1, &D);
      ck_assert_msg(c != NULL, "%s: instantiate: %s", specs[w], D.msg);
      const char *in = tensorized_with(sch_traced_func(c));
      /* the layout-free weight packed with its padding */
      ck_assert_msg(in && strstr(in, "x86.avx512.vnni.u8i8.packed."), "%s: tensorized with %s", specs[w],
                    in ? in : "nothing");
      const ir_func *ref = sch_layout_reference(&a, f, sch_traced_trace(c), &D);
      ck_assert_msg(ref != NULL && ref != f, "%s", D.msg);
      if (!big) tu_assert_equivalent(ref, sch_traced_func(c));
      if (!big || checked == 0) {
        char *s = asm_of(sch_traced_func(c), target);
        ck_assert_msg(count(s, "vpdpbusd") >= 1, "%s: no vpdpbusd", specs[w]);
        ts_free(s);
        if (cpu_has("avx512_vnni")) parity(ref, sch_traced_func(c), target, false);
      }
      sch_traced_free(c);
      checked++;
    }
    ck_assert_msg(checked == 2, "%s: %d tensorized candidates", specs[w], checked);
    free_sk(sk, n);
  }
  ts_arena_fini(&a);
}
END_TEST

/* int8 NHWC convolutions (issue 16): an implicit GEMM over (output row q,
 * output channel o, input channel ci) with the batch, the output row p and
 * the window taps outside the intrinsic; the weight packed as
 * [r, s, k/16, c/4, 64] (padded where 16 and 4 do not divide). Stride 1 and
 * 2, dilation, a batch, odd and prime channel counts (padded: PadEinsum on
 * the padded input's channels): every tensorized candidate equals the
 * layout reference in the interpreter, natively too, and holds vpdpbusd */
/* The int8 rule on channels-last convolutions for target: every tensorized
 * sketch uses the family's packed kernels (prefix), whose instruction (insn)
 * is in the asm, equal to the layout reference in the interpreter and, when
 * the CPU has cpuflag, natively. */
static void rule_conv(const char *target, const char *prefix, const char *insn, const char *cpuflag) {
  ts_arena a;
  ts_arena_init(&a);
  cg_target t;
  ts_diag_clear(&D);
  ck_assert(cg_target_parse(target, &t, &D) == TS_OK);
  static const struct {
    const char *spec;
    bool padded;
    int min_sketches;
  } cases[] = {
      {"conv2d_nhwc_u8s8:n=1,c=8,h=4,w=8,k=32,r=3,s=3,stride=1,pad=1", false, 2}, /* 8- and 4-row kernels */
      {"conv2d_nhwc_u8s8:n=2,c=8,h=7,w=7,k=16,r=3,s=3,stride=2,pad=1", false, 1}, /* stride 2: 1 row */
      {"conv2d_nhwc_u8s8:n=1,c=5,h=5,w=7,k=17,r=3,s=2,stride=1,pad=1,dilation=2", true, 1},
      {"conv2d_nhwc_u8s8:n=1,c=3,h=5,w=5,k=13,r=1,s=1,stride=1,pad=0", true, 1},
      {"conv2d_nhwc_u8s8:n=1,c=3,h=9,w=9,k=16,r=7,s=7,stride=2,pad=3", true, 1}, /* a stem conv */
  };
  for (size_t w = 0; w < sizeof cases / sizeof cases[0]; w++) {
    const char *spec = cases[w].spec;
    ir_func *f = tu_workload(&a, spec);
    sch_trace **sk;
    int n, sketches = 0;
    ck_assert_msg(srch_sketches(f, &t, &ONE_CORE, &sk, &n, &D) == TS_OK, "%s", D.msg);
    for (int i = 0; i < n; i++) {
      char *js = sch_trace_to_json(sk[i]);
      bool tensor = strstr(js, "meta_schedule.auto_tensorize") != NULL;
      ck_assert_msg(!tensor || cases[w].padded == (strstr(js, "\"PadEinsum\"") != NULL), "%s: %s", spec, js);
      free(js);
      if (!tensor) continue;
      sketches++;
      for (uint64_t seed = 1; seed <= 2; seed++) {
        ts_diag_clear(&D);
        sch_traced *c = srch_instantiate(sk[i], f, &t, true, seed, &D);
        ck_assert_msg(c != NULL, "%s: instantiate: %s", spec, D.msg);
        const char *in = tensorized_with(sch_traced_func(c));
        ck_assert_msg(in && strstr(in, prefix), "%s: tensorized with %s", spec, in ? in : "nothing");
        const ir_func *ref = sch_layout_reference(&a, f, sch_traced_trace(c), &D);
        ck_assert_msg(ref != NULL && ref != f, "%s", D.msg);
        tu_assert_equivalent(ref, sch_traced_func(c));
        if (seed == 1) {
          char *as = asm_of(sch_traced_func(c), target);
          ck_assert_msg(count(as, insn) >= 1, "%s: no %s", spec, insn);
          ts_free(as);
          if (cpu_has(cpuflag)) parity(ref, sch_traced_func(c), target, false);
        }
        sch_traced_free(c);
      }
    }
    ck_assert_msg(sketches >= cases[w].min_sketches, "%s: %d tensorized sketches", spec, sketches);
    free_sk(sk, n);
  }
  ts_arena_fini(&a);
}

START_TEST(test_rule_conv) {
  rule_conv("llvm -mattr=+avx512f,+avx512bw,+avx512vnni", "x86.avx512.vnni.u8i8.packed.", "vpdpbusd", "avx512_vnni");
}
END_TEST

/* Without VNNI (AVX2 only) the same convolutions take the vpmaddwd kernels
 * on the weight packed as i16 (.packed16; the padded input widened once to
 * i16 too where the conv has a pad stage or enough reuse: .i16i16). */
START_TEST(test_rule_conv_avx2) {
  rule_conv("llvm -mtriple=x86_64-linux-gnu -mattr=+avx2,+fma", ".packed16.", "vpmaddwd", "avx2");
}
END_TEST

/* The AVX2 int8 default with the weight packed as i16: a conv's pad stage
 * and a matmul's A where each element feeds >= 128 multiply-adds are
 * widened once to i16 (SetDType) and the kernel is the .i16i16 one (A's
 * pair one vpbroadcastd, no vpbroadcastw); a matmul with less reuse keeps
 * its u8 A (.u8i8.packed16); each equal to the layout reference natively. */
START_TEST(test_default_widened_a) {
  static const struct {
    const char *spec, *kernel;
  } cases[] = {
      {"conv2d_nhwc_u8s8:n=1,c=8,h=4,w=8,k=32,r=3,s=3,stride=1,pad=1", "x86.avx2.pmaddwd.i16i16.packed16."},
      {"conv2d_nhwc_u8s8:n=1,c=6,h=5,w=7,k=16,r=3,s=3,stride=2,pad=1", "x86.avx2.pmaddwd.i16i16.packed16."},
      {"matmul_u8s8:m=4,n=256,k=16", "x86.avx2.pmaddwd.i16i16.packed16."},
      {"matmul_int8:m=4,n=256,k=16", "x86.avx2.pmaddwd.i16i16.packed16."},
      {"matmul_u8s8:m=56,n=64,k=8", "x86.avx2.pmaddwd.u8i8.packed16."},
  };
  const char *target = "llvm -mtriple=x86_64-linux-gnu -mattr=+avx2,+fma";
  cg_target tg;
  ts_diag_clear(&D);
  ck_assert_int_eq(cg_target_parse(target, &tg, &D), TS_OK);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ts_arena a;
    ts_arena_init(&a);
    ir_func *f = tu_workload(&a, cases[i].spec);
    sch_traced *t = NULL;
    ts_diag_clear(&D);
    ck_assert_msg(tun_schedule_opts(f, NULL, &tg, &(tun_default_opts){.pack_weights = true}, &t, &D) == TS_OK, "%s: %s",
                  cases[i].spec, D.msg);
    const char *in = tensorized_with(sch_traced_func(t));
    ck_assert_msg(in && strstr(in, cases[i].kernel), "%s: tensorized with %s", cases[i].spec, in ? in : "nothing");
    const ir_func *ref = sch_layout_reference(&a, f, sch_traced_trace(t), &D);
    ck_assert_msg(ref != NULL, "%s: %s", cases[i].spec, D.msg);
    tu_assert_equivalent(ref, sch_traced_func(t));
    char *x = asm_of(sch_traced_func(t), target);
    bool a16 = strstr(cases[i].kernel, "i16i16") != NULL;
    ck_assert_msg(count(x, "vpmaddwd") >= 1 && (a16 ? count(x, "vpbroadcastw") == 0 : count(x, "vpbroadcastw") >= 1),
                  "%s:\n%.4000s", cases[i].spec, x);
    ts_free(x);
    if (cpu_has("avx2")) parity(ref, sch_traced_func(t), "llvm -mattr=+avx2,+fma", false);
    sch_traced_free(t);
    ts_arena_fini(&a);
  }
}
END_TEST

START_TEST(test_rule_candidates) {
  ts_arena a;
  ts_arena_init(&a);
  ir_func *f = tu_workload(&a, "matmul_int8:m=64,n=64,k=32");
  const char *target = "llvm -mattr=+avx512f,+avx512bw,+avx512vnni";
  cg_target t;
  ts_diag_clear(&D);
  ck_assert(cg_target_parse(target, &t, &D) == TS_OK);
  sch_trace **sk;
  int n;
  ck_assert_msg(srch_sketches(f, &t, &ONE_CORE, &sk, &n, &D) == TS_OK, "%s", D.msg);
  int checked = 0;
  ts_rng rng;
  ts_rng_seed(&rng, 3);
  for (int i = 0; i < n; i++) {
    char *js = sch_trace_to_json(sk[i]);
    bool tensor = strstr(js, "meta_schedule.auto_tensorize") != NULL;
    free(js);
    if (!tensor) continue;
    for (uint64_t seed = 1; seed <= 3; seed++) {
      ts_diag_clear(&D);
      sch_traced *c = srch_instantiate(sk[i], f, &t, true, seed, &D);
      ck_assert_msg(c != NULL, "instantiate: %s", D.msg);
      const char *in = tensorized_with(sch_traced_func(c));
      ck_assert_msg(in && strstr(in, "vnni"), "not tensorized");
      /* the weight is layout-free: packed into the VNNI layout, and the
       * i8 x i8 block shifted to u8 with its compensation hoisted */
      ck_assert_msg(strstr(in, "u8i8.packed"), "tensorized with %s", in);
      char *tj = sch_trace_to_json(sch_traced_trace(c));
      ck_assert_msg(strstr(tj, "\"ShiftToUnsigned\"") && strstr(tj, "\"TransformLayout\"") &&
                        strstr(tj, "x86.avx512.vnni.colsum.packed.16x4"),
                    "%s", tj);
      free(tj);
      const ir_func *ref = sch_layout_reference(&a, f, sch_traced_trace(c), &D);
      ck_assert_msg(ref != NULL, "%s", D.msg);
      tu_assert_equivalent(ref, sch_traced_func(c));
      if (seed == 1 && cpu_has("avx512_vnni")) parity(ref, sch_traced_func(c), target, false);
      /* mutate the tile sizes: the intrinsic is still there, same one */
      for (int m = 0; m < 10; m++) {
        sch_trace *mt = srch_mutate(SRCH_MUT_TILE_SIZE, sch_traced_trace(c), f, &rng);
        if (!mt) continue;
        ts_diag_clear(&D);
        sch_traced *c2 = srch_instantiate(mt, f, &t, false, seed, &D);
        ck_assert_msg(c2 != NULL, "instantiate a mutated candidate: %s", D.msg);
        ck_assert_str_eq(tensorized_with(sch_traced_func(c2)), in);
        sch_traced_free(c2);
        sch_trace_free(mt);
      }
      sch_traced_free(c);
      checked++;
    }
  }
  ck_assert_int_ge(checked, 6);
  free_sk(sk, n);
  ts_arena_fini(&a);
}
END_TEST

int main(int argc, char **argv) {
  if (argc >= 3) {
    runner = argv[1];
    qemu = argv[2];
  }
  snprintf(dir, sizeof dir, "/tmp/tessel-intrin-XXXXXX");
  if (!mkdtemp(dir)) return 2;
  Suite *s = suite_create("intrin");
  TCase *tc = tcase_create("codegen");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_vnni_asm);
  tcase_add_test(tc, test_vnni_parity);
  tcase_add_test(tc, test_vnni_packed);
  tcase_add_test(tc, test_pmaddwd_packed);
  tcase_add_test(tc, test_pmaddwd_packed16);
  tcase_add_test(tc, test_default_widened_a);
  tcase_add_test(tc, test_clamped_cast_vectorized);
  tcase_add_test(tc, test_fma_microkernel);
  tcase_add_test(tc, test_sdot);
  tcase_add_test(tc, test_extern_refusals);
  tcase_add_test(tc, test_quantize_not_contracted);
  suite_add_tcase(s, tc);
  tc = tcase_create("search");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_rule_targets);
  tcase_add_test(tc, test_rule_candidates);
  tcase_add_test(tc, test_rule_batch_and_odd);
  tcase_add_test(tc, test_rule_padded);
  tcase_add_test(tc, test_rule_conv);
  tcase_add_test(tc, test_rule_conv_avx2);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int nf = srunner_ntests_failed(sr);
  srunner_free(sr);
  rmdir(dir);
  return nf ? 1 : 0;
}
