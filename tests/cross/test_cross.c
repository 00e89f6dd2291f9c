/* test_cross.c — the aarch64 cross check: workloads are scheduled (default
 * schedule), built for aarch64-linux-gnu through LLVM + ld.lld, run under
 * qemu-aarch64 by the cross-compiled kernel runner on the seeded inputs, and
 * their outputs must (a) verify against the reference interpreter and (b)
 * match the x86-64 build's outputs. argv: RUNNER-AARCH64 QEMU (absent:
 * skipped with 77). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codegen/llvm.h"
#include "runtime/runtime.h"
#include "ir/workloads/workloads.h"
#include "tuner/build.h"
#include "tuner/verify.h"

static const char *runner, *qemu;
static char dir[64];

static const char *specs[] = {
    "matmul:m=37,n=29,k=41",
    "matmul_int8:m=13,n=17,k=19",
    "softmax:m=5,n=23",
    "layernorm:m=4,n=33",
    "conv2d_nchw:n=1,c=3,h=11,w=9,k=5,r=3,s=3,stride=2,pad=1,dilation=1,groups=1",
    "gelu:m=7,n=19",
};

static void *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  ck_assert_msg(f != NULL, "cannot open %s", path);
  fseek(f, 0, SEEK_END);
  *n = (size_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  void *p = malloc(*n ? *n : 1);
  ck_assert_uint_eq(fread(p, 1, *n, f), *n);
  fclose(f);
  return p;
}

static void build_for(const ir_func *f, const char *target, const char *path) {
  ts_diag d;
  ts_diag_clear(&d);
  cg_target tg;
  ck_assert_msg(cg_target_parse(target, &tg, &d) == TS_OK, "%s", d.msg);
  ck_assert_msg(cg_llvm_resolve_target(&tg, &d) == TS_OK, "%s", d.msg);
  sch_traced *t = NULL;
  ck_assert_msg(tun_schedule(f, NULL, &tg, &t, &d) == TS_OK, "%s", d.msg);
  ck_assert_msg(tun_build_shared(sch_traced_func(t), &tg, path, &d) == TS_OK, "%s: %s", target, d.msg);
  sch_traced_free(t);
}

START_TEST(test_cross_workload) {
  const char *spec = specs[_i];
  ts_arena a;
  ts_arena_init(&a);
  ts_diag d;
  ts_diag_clear(&d);
  ir_func *f = NULL;
  ck_assert_msg(ir_workload_from_spec(&a, spec, &f, &d) == TS_OK, "%s", d.msg);
  char arm_so[128], host_so[128], out[128], cmd[1024];
  snprintf(arm_so, sizeof arm_so, "%s/k%d_arm.so", dir, _i);
  snprintf(host_so, sizeof host_so, "%s/k%d_host.so", dir, _i);
  snprintf(out, sizeof out, "%s/k%d.out", dir, _i);
  build_for(f, "llvm -mtriple=aarch64-linux-gnu", arm_so);
  build_for(f, "llvm", host_so);
  /* the ELF really is aarch64 (e_machine 183) */
  size_t n;
  unsigned char *elf = slurp(arm_so, &n);
  ck_assert(n > 20 && elf[18] == 183 && elf[19] == 0);
  free(elf);
  const uint64_t seed = 17;
  /* the multiarch libc6:arm64 (found without -L); with the cross toolchain's
   * libc (-L /usr/aarch64-linux-gnu) qemu-user 7.2 hangs in pthread_create */
  snprintf(cmd, sizeof cmd, "TESSEL_NUM_THREADS=2 '%s' '%s' '%s' %llu '%s'", qemu, runner, arm_so,
           (unsigned long long)seed, out);
  FILE *p = popen(cmd, "r");
  ck_assert_ptr_nonnull(p);
  char line[600] = "";
  if (!fgets(line, sizeof line, p)) line[0] = '\0';
  int st = pclose(p);
  ck_assert_msg(st == 0 && !strncmp(line, "ok ", 3), "%s under qemu: %s", spec, line);
  size_t nb;
  void *arm_out = slurp(out, &nb);
  tun_verify_result vr;
  ck_assert_msg(tun_verify(f, seed, arm_out, nb, &vr, &d) == TS_OK, "%s", d.msg);
  ck_assert_msg(vr.matched, "%s (aarch64) vs interpreter: %s", spec, vr.detail);
  /* and against the x86-64 build */
  tsrt_measure_opts o = {.repeat = 1, .seed = seed, .want_outputs = true, .timeout_s = 60};
  tsrt_measure_result r;
  tsrt_measure_forked(host_so, &o, &r);
  ck_assert_msg(r.status == TS_OK, "%s", r.error);
  ck_assert_uint_eq(r.outputs_bytes, nb);
  size_t off = 0;
  for (int pi = f->ninputs; pi < f->nparams; pi++) {
    ir_dtype dt = f->params[pi]->dtype;
    int64_t cnt = ir_buffer_const_size(f->params[pi]);
    for (int64_t i = 0; i < cnt; i++) {
      const char *x = (const char *)r.outputs + off + (size_t)i * (size_t)ir_dtype_bytes(dt);
      const char *y = (const char *)arm_out + off + (size_t)i * (size_t)ir_dtype_bytes(dt);
      if (dt.code == IR_F32) {
        float fx, fy;
        memcpy(&fx, x, 4);
        memcpy(&fy, y, 4);
        ck_assert_msg(fabsf(fx - fy) <= 1e-4f + 1e-4f * fabsf(fx), "%s[%lld]: x86 %g, aarch64 %g", spec,
                      (long long)i, fx, fy);
      } else {
        ck_assert_msg(!memcmp(x, y, (size_t)ir_dtype_bytes(dt)), "%s[%lld] differs", spec, (long long)i);
      }
    }
    off += (size_t)cnt * (size_t)ir_dtype_bytes(dt);
  }
  tsrt_result_fini(&r);
  free(arm_out);
  unlink(arm_so);
  unlink(host_so);
  unlink(out);
  ts_arena_fini(&a);
}
END_TEST

int main(int argc, char **argv) {
  if (argc < 3 || access("/lib/ld-linux-aarch64.so.1", R_OK) != 0) {
    fprintf(stderr, "test_cross: no aarch64 cross runner or libc: skipped\n");
    return 77;
  }
  runner = argv[1];
  qemu = argv[2];
  snprintf(dir, sizeof dir, "/tmp/tessel-cross-XXXXXX");
  if (!mkdtemp(dir)) return 2;
  Suite *s = suite_create("cross");
  TCase *tc = tcase_create("aarch64");
  tcase_set_timeout(tc, 300);
  tcase_add_loop_test(tc, test_cross_workload, 0, (int)(sizeof specs / sizeof specs[0]));
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int nf = srunner_ntests_failed(sr);
  srunner_free(sr);
  rmdir(dir);
  return nf ? 1 : 0;
}
