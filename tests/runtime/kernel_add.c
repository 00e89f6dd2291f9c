/* kernel_add.c — a hand-written artifact with the tessel kernel ABI (C[i] =
 * A[i] + B[i] over 1000 f32 elements, split over the thread pool), so the
 * runtime tests exercise loading, the pool and measurement without codegen.
 * Built three ways: normal, -DCRASH (writes through NULL), -DHANG (spins). */
#include <stddef.h>

#include "runtime.h"

#define N 1000
static const tsrt_param_meta params[] = {
    {"A", TSRT_F32, 1, {N}}, {"B", TSRT_F32, 1, {N}}, {"C", TSRT_F32, 1, {N}}};
const tsrt_kernel_meta tessel_kernel_meta = {TSRT_ABI_VERSION, 3, 2, "add", "test", params};

typedef struct closure {
  float *a, *b, *c;
} closure;

static int32_t task(int32_t t, int32_t n, void *p) {
  closure *c = p;
  int lo = N * t / n, hi = N * (t + 1) / n;
  for (int i = lo; i < hi; i++) c->c[i] = c->a[i] + c->b[i];
  return 0;
}

int32_t tessel_kernel_entry(void **args);
int32_t tessel_kernel_entry(void **args) {
#ifdef CRASH
  *(volatile int *)NULL = 1;
#endif
#ifdef HANG
  for (volatile int spin = 0;; spin++) {
  }
#endif
  closure c = {args[0], args[1], args[2]};
  return tsrt_parallel_launch(task, &c, 0);
}
