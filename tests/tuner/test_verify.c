/* test_verify.c — output verification against the interpreter: outputs
 * computed by the hand-written C reference from the runner's seeded inputs
 * verify (whole for small workloads, sampled for a 384³ matmul and a large
 * conv), and a single corrupted element or a slightly wrong result is caught
 * with a message naming the output and the index. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime.h"
#include "ir/interp.h"
#include "ir/parse.h"
#include "ir/workloads/workloads.h"
#include "codegen/llvm.h"
#include "tuner/build.h"
#include "tuner/verify.h"
#include <unistd.h>

/* Builds spec, runs its C reference on tsrt-seeded inputs, returns the
 * concatenated outputs (heap) in *out. */
static ir_func *reference_outputs(ts_arena *a, const char *spec, uint64_t seed, void **out, size_t *bytes) {
  ts_diag d;
  ts_diag_clear(&d);
  ir_wl_inst w;
  ck_assert_msg(ir_wl_parse(spec, &w, &d) == TS_OK, "%s", d.msg);
  ir_func *f = NULL;
  ck_assert_msg(ir_wl_build(a, &w, &f, &d) == TS_OK, "%s", d.msg);
  ir_tensor args[16];
  ck_assert_int_eq(ir_tensors_for_func(f, NULL, args, &d), TS_OK);
  for (int i = 0; i < f->ninputs; i++)
    tsrt_fill_random(f->params[i]->dtype.code, args[i].data, ir_tensor_numel(&args[i]), seed + (uint64_t)i);
  ck_assert_msg(ir_wl_reference(&w, args, &d) == TS_OK, "%s", d.msg);
  *bytes = 0;
  for (int p = f->ninputs; p < f->nparams; p++)
    *bytes += (size_t)ir_tensor_numel(&args[p]) * (size_t)ir_dtype_bytes(args[p].dtype);
  *out = ts_malloc(*bytes);
  size_t off = 0;
  for (int p = f->ninputs; p < f->nparams; p++) {
    size_t n = (size_t)ir_tensor_numel(&args[p]) * (size_t)ir_dtype_bytes(args[p].dtype);
    memcpy((char *)*out + off, args[p].data, n);
    off += n;
  }
  for (int i = 0; i < f->nparams; i++) ir_tensor_free(&args[i]);
  return f;
}

START_TEST(test_small_full) {
  static const char *specs[] = {"matmul:m=7,n=13,k=5", "softmax:m=3,n=17", "matmul_int8:m=5,n=6,k=7",
                                "layernorm:m=4,n=9", "conv2d_nchw:n=1,c=3,h=7,w=5,k=4,r=3,s=3,stride=2,pad=1,dilation=1,groups=1"};
  for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
    ts_arena a;
    ts_arena_init(&a);
    void *out;
    size_t bytes;
    ir_func *f = reference_outputs(&a, specs[i], 11, &out, &bytes);
    tun_verify_result r;
    ts_diag d;
    ts_diag_clear(&d);
    ck_assert_msg(tun_verify(f, 11, out, bytes, &r, &d) == TS_OK, "%s", d.msg);
    ck_assert_msg(r.matched, "%s: %s", specs[i], r.detail);
    ck_assert(!r.sampled);
    ck_assert_int_gt(r.checked, 0);
    /* a different seed means different inputs: must not match */
    ck_assert_int_eq(tun_verify(f, 12, out, bytes, &r, &d), TS_OK);
    ck_assert(!r.matched);
    ck_assert_ptr_nonnull(strstr(r.detail, "expected"));
    ts_free(out);
    ts_arena_fini(&a);
  }
}
END_TEST

START_TEST(test_corrupt_one_element) {
  ts_arena a;
  ts_arena_init(&a);
  void *out;
  size_t bytes;
  ir_func *f = reference_outputs(&a, "matmul:m=16,n=16,k=16", 3, &out, &bytes);
  ((float *)out)[77] += 0.5f;
  tun_verify_result r;
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_int_eq(tun_verify(f, 3, out, bytes, &r, &d), TS_OK);
  ck_assert(!r.matched);
  ck_assert_ptr_nonnull(strstr(r.detail, "C[77]"));
  /* wrong size is an error, not a verdict */
  ck_assert_int_eq(tun_verify(f, 3, out, bytes - 4, &r, &d), TS_EINVAL);
  ts_free(out);
  ts_arena_fini(&a);
}
END_TEST

START_TEST(test_large_sampled) {
  static const char *specs[] = {"matmul:m=384,n=384,k=384",
                                "conv2d_nchw:n=1,c=32,h=28,w=28,k=64,r=3,s=3,stride=1,pad=1,dilation=1,groups=1"};
  for (size_t i = 0; i < 2; i++) {
    ts_arena a;
    ts_arena_init(&a);
    void *out;
    size_t bytes;
    ir_func *f = reference_outputs(&a, specs[i], 5, &out, &bytes);
    tun_verify_result r;
    ts_diag d;
    ts_diag_clear(&d);
    ck_assert_msg(tun_verify(f, 5, out, bytes, &r, &d) == TS_OK, "%s", d.msg);
    ck_assert_msg(r.matched, "%s: %s", specs[i], r.detail);
    ck_assert(r.sampled);
    ck_assert_int_eq(r.checked, 256);
    /* every element slightly wrong: any sample catches it */
    float *o = out;
    for (size_t k = 0; k < bytes / 4; k++) o[k] = o[k] * 1.01f + 0.01f;
    ck_assert_int_eq(tun_verify(f, 5, out, bytes, &r, &d), TS_OK);
    ck_assert(!r.matched);
    ts_free(out);
    ts_arena_fini(&a);
  }
}
END_TEST


/* f's default schedule built in an isolated child into *path (a fresh temp
 * file the caller unlinks) and run once on seed's inputs: *r holds the
 * outputs. *t is the traced schedule (the caller frees it). */
static void build_and_run_default(const ir_func *f, cg_target *tg, uint64_t seed, char *path, sch_traced **t,
                                  tsrt_measure_result *r) {
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert_int_eq(cg_target_parse("llvm", tg, &d), TS_OK);
  ck_assert_int_eq(cg_llvm_resolve_target(tg, &d), TS_OK);
  ck_assert_msg(tun_schedule(f, NULL, tg, t, &d) == TS_OK, "%s", d.msg);
  int fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  close(fd);
  ck_assert_msg(tun_build_shared_isolated(sch_traced_func(*t), tg, path, 120, &d) == TS_OK, "%s", d.msg);
  tsrt_measure_opts o = {.repeat = 1, .seed = seed, .want_outputs = true, .timeout_s = 60};
  tsrt_measure_forked(path, &o, r);
  ck_assert_msg(r->status == TS_OK, "%s", r->error);
}

/* A fused conv -> bias -> residual add -> relu kernel (what the model
 * importer makes, at odd sizes): the output stage is sampled and so are the
 * three intermediates that feed it pointwise, so the conv is interpreted only
 * at the sample points; the pad stage (read through windows) runs whole. A
 * slightly wrong result is still caught. */
static const char *fused_chain_src =
    "func fused_chain(in0: f32[1, 37, 31, 31], in1: f32[41, 37, 3, 3], in2: f32[41], in3: f32[1, 41, 31, 31]) -> out0: f32[1, 41, 31, 31] {\n"
    "  block root() {\n"
    "    alloc t0: f32[1, 41, 31, 31]\n"
    "    alloc t1: f32[1, 41, 31, 31]\n"
    "    alloc t0_conv: f32[1, 41, 31, 31]\n"
    "    alloc t0_pad: f32[1, 37, 33, 33]\n"
    "    for i0 in serial(0, 1) {\n"
    "      for i1 in serial(0, 37) {\n"
    "        for i2 in serial(0, 33) {\n"
    "          for i3 in serial(0, 33) {\n"
    "            block t0_pad(vi0: S(0, 1) = i0, vi1: S(0, 37) = i1, vi2: S(0, 33) = i2, vi3: S(0, 33) = i3) {\n"
    "              reads in0[vi0, vi1, min(max(vi2 - 1, 0), 30), min(max(vi3 - 1, 0), 30)]\n"
    "              writes t0_pad[vi0, vi1, vi2, vi3]\n"
    "              t0_pad[vi0, vi1, vi2, vi3] = select(vi2 - 1 >= 0 && vi2 - 1 < 31 && vi3 - 1 >= 0 && vi3 - 1 < 31, in0[vi0, vi1, min(max(vi2 - 1, 0), 31 - 1), min(max(vi3 - 1, 0), 31 - 1)], 0.0)\n"
    "            }\n"
    "          }\n"
    "        }\n"
    "      }\n"
    "    }\n"
    "    for i0_1 in serial(0, 1) {\n"
    "      for i1_1 in serial(0, 41) {\n"
    "        for i2_1 in serial(0, 31) {\n"
    "          for i3_1 in serial(0, 31) {\n"
    "            for r0 in serial(0, 37) {\n"
    "              for r1 in serial(0, 3) {\n"
    "                for r2 in serial(0, 3) {\n"
    "                  block t0_conv(vi0_1: S(0, 1) = i0_1, vi1_1: S(0, 41) = i1_1, vi2_1: S(0, 31) = i2_1, vi3_1: S(0, 31) = i3_1, vr0: R(0, 37) = r0, vr1: R(0, 3) = r1, vr2: R(0, 3) = r2) {\n"
    "                    reads t0_pad[vi0_1, vr0, vi2_1 + vr1, vi3_1 + vr2], in1[vi1_1, vr0, vr1, vr2]\n"
    "                    writes t0_conv[vi0_1, vi1_1, vi2_1, vi3_1]\n"
    "                    init {\n"
    "                      t0_conv[vi0_1, vi1_1, vi2_1, vi3_1] = 0.0\n"
    "                    }\n"
    "                    t0_conv[vi0_1, vi1_1, vi2_1, vi3_1] = t0_conv[vi0_1, vi1_1, vi2_1, vi3_1] + t0_pad[vi0_1, vr0, vi2_1 + vr1, vi3_1 + vr2] * in1[vi1_1, vr0, vr1, vr2]\n"
    "                  }\n"
    "                }\n"
    "              }\n"
    "            }\n"
    "          }\n"
    "        }\n"
    "      }\n"
    "    }\n"
    "    for i0_2 in serial(0, 1) {\n"
    "      for i1_2 in serial(0, 41) {\n"
    "        for i2_2 in serial(0, 31) {\n"
    "          for i3_2 in serial(0, 31) {\n"
    "            block t0(vi0_2: S(0, 1) = i0_2, vi1_2: S(0, 41) = i1_2, vi2_2: S(0, 31) = i2_2, vi3_2: S(0, 31) = i3_2) {\n"
    "              reads t0_conv[vi0_2, vi1_2, vi2_2, vi3_2], in2[vi1_2]\n"
    "              writes t0[vi0_2, vi1_2, vi2_2, vi3_2]\n"
    "              t0[vi0_2, vi1_2, vi2_2, vi3_2] = t0_conv[vi0_2, vi1_2, vi2_2, vi3_2] + in2[vi1_2]\n"
    "            }\n"
    "          }\n"
    "        }\n"
    "      }\n"
    "    }\n"
    "    for i0_3 in serial(0, 1) {\n"
    "      for i1_3 in serial(0, 41) {\n"
    "        for i2_3 in serial(0, 31) {\n"
    "          for i3_3 in serial(0, 31) {\n"
    "            block t1(vi0_3: S(0, 1) = i0_3, vi1_3: S(0, 41) = i1_3, vi2_3: S(0, 31) = i2_3, vi3_3: S(0, 31) = i3_3) {\n"
    "              reads t0[vi0_3, vi1_3, vi2_3, vi3_3], in3[vi0_3, vi1_3, vi2_3, vi3_3]\n"
    "              writes t1[vi0_3, vi1_3, vi2_3, vi3_3]\n"
    "              t1[vi0_3, vi1_3, vi2_3, vi3_3] = t0[vi0_3, vi1_3, vi2_3, vi3_3] + in3[vi0_3, vi1_3, vi2_3, vi3_3]\n"
    "            }\n"
    "          }\n"
    "        }\n"
    "      }\n"
    "    }\n"
    "    for i0_4 in serial(0, 1) {\n"
    "      for i1_4 in serial(0, 41) {\n"
    "        for i2_4 in serial(0, 31) {\n"
    "          for i3_4 in serial(0, 31) {\n"
    "            block out0(vi0_4: S(0, 1) = i0_4, vi1_4: S(0, 41) = i1_4, vi2_4: S(0, 31) = i2_4, vi3_4: S(0, 31) = i3_4) {\n"
    "              reads t1[vi0_4, vi1_4, vi2_4, vi3_4]\n"
    "              writes out0[vi0_4, vi1_4, vi2_4, vi3_4]\n"
    "              out0[vi0_4, vi1_4, vi2_4, vi3_4] = max(t1[vi0_4, vi1_4, vi2_4, vi3_4], 0.0)\n"
    "            }\n"
    "          }\n"
    "        }\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "}\n";

START_TEST(test_fused_chain_sampled) {
  ts_arena a;
  ts_arena_init(&a);
  ts_diag d;
  ts_diag_clear(&d);
  ir_func *f = NULL;
  ck_assert_msg(ir_parse_func(&a, fused_chain_src, strlen(fused_chain_src), "fused_chain", &f, &d) == TS_OK, "%s",
                d.msg);
  cg_target tg;
  sch_traced *t = NULL;
  char path[] = "/tmp/tessel-chain-XXXXXX";
  tsrt_measure_result r;
  build_and_run_default(f, &tg, 9, path, &t, &r);
  tun_verify_result vr;
  ck_assert_msg(tun_verify(f, 9, r.outputs, r.outputs_bytes, &vr, &d) == TS_OK, "%s", d.msg);
  ck_assert_msg(vr.matched, "%s", vr.detail);
  ck_assert(vr.sampled);
  ck_assert_int_eq(vr.sampled_stages, 4); /* out0, t1, t0, t0_conv */
  ck_assert_int_eq(vr.checked, 256);
  float *o32 = r.outputs;
  for (size_t k = 0; k < r.outputs_bytes / 4; k++) o32[k] = o32[k] * 1.01f + 0.01f;
  ck_assert_int_eq(tun_verify(f, 9, r.outputs, r.outputs_bytes, &vr, &d), TS_OK);
  ck_assert(!vr.matched);
  /* a different seed's reference does not match these outputs either */
  float *fresh = r.outputs;
  for (size_t k = 0; k < r.outputs_bytes / 4; k++) fresh[k] = (fresh[k] - 0.01f) / 1.01f;
  ck_assert_int_eq(tun_verify(f, 10, r.outputs, r.outputs_bytes, &vr, &d), TS_OK);
  ck_assert(!vr.matched);
  tsrt_result_fini(&r);
  unlink(path);
  sch_traced_free(t);
  ts_arena_fini(&a);
}
END_TEST

/* The isolated build: a default-scheduled kernel builds in a child and its
 * artifact verifies; an impossible time limit is a timeout, not a hang. */
START_TEST(test_isolated_build) {
  ts_arena a;
  ts_arena_init(&a);
  ts_diag d;
  ts_diag_clear(&d);
  ir_func *f = NULL;
  ck_assert_int_eq(ir_workload_from_spec(&a, "matmul:m=19,n=23,k=17", &f, &d), TS_OK);
  cg_target tg;
  sch_traced *t = NULL;
  char path[] = "/tmp/tessel-iso-XXXXXX";
  tsrt_measure_result r;
  build_and_run_default(f, &tg, 4, path, &t, &r);
  tun_verify_result vr;
  ck_assert_int_eq(tun_verify(f, 4, r.outputs, r.outputs_bytes, &vr, &d), TS_OK);
  ck_assert_msg(vr.matched, "%s", vr.detail);
  tsrt_result_fini(&r);
  ts_diag_clear(&d);
  ck_assert_int_eq(tun_build_shared_isolated(sch_traced_func(t), &tg, path, 1e-4, &d), TS_ETIMEOUT);
  ck_assert_ptr_nonnull(strstr(d.msg, "timed out"));
  unlink(path);
  sch_traced_free(t);
  ts_arena_fini(&a);
}
END_TEST

int main(void) {
  Suite *s = suite_create("verify");
  TCase *tc = tcase_create("verify");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_small_full);
  tcase_add_test(tc, test_corrupt_one_element);
  tcase_add_test(tc, test_large_sampled);
  tcase_add_test(tc, test_isolated_build);
  tcase_add_test(tc, test_fused_chain_sampled);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int nf = srunner_ntests_failed(sr);
  srunner_free(sr);
  return nf ? 1 : 0;
}
