/* runner_main.c — tessel-kernel-runner: loads a tessel artifact, runs it on
 * the seeded inputs every runner uses, times it, and writes the outputs.
 * Built for the host and (in the test suite) for aarch64, where it runs under
 * qemu-aarch64 as the "edge board" side of the cross check. libc + the
 * runtime only.
 *
 *   tessel-kernel-runner KERNEL.so SEED OUTPUTS.bin [REPEAT]
 *
 * Prints one line: "ok <median seconds> <output bytes>" or "error <msg>". */
#include <stdio.h>
#include <stdlib.h>

#include "runtime.h"

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: tessel-kernel-runner KERNEL.so SEED OUTPUTS.bin [REPEAT]\n");
    return 2;
  }
  tsrt_module m;
  ts_diag d = {0};
  if (tsrt_module_load(argv[1], &m, &d)) {
    printf("error %s\n", d.msg);
    return 1;
  }
  tsrt_measure_opts o = {.repeat = argc > 4 ? atoi(argv[4]) : 1, .seed = strtoull(argv[2], NULL, 0),
                         .want_outputs = true};
  tsrt_measure_result r;
  tsrt_measure_inprocess(&m, &o, &r);
  if (r.status != TS_OK) {
    printf("error %s\n", r.error);
    return 1;
  }
  FILE *f = fopen(argv[3], "wb");
  if (!f || fwrite(r.outputs, 1, r.outputs_bytes, f) != r.outputs_bytes) {
    printf("error cannot write %s\n", argv[3]);
    return 1;
  }
  fclose(f);
  printf("ok %.9g %zu\n", tsrt_result_median(&r), r.outputs_bytes);
  tsrt_result_fini(&r);
  tsrt_module_unload(&m);
  return 0;
}
