/* kernel_cpu.c — one built kernel's thread CPU time, 1 thread (not a test).
 *
 *   build/bench/kernel_cpu KERNEL.so [RUNS=30]
 *
 * Loads a kernel built by `tessel build SUBJECT -o KERNEL.so` (with --log to
 * replay a tuned record), fills every parameter with seeded uniform values in
 * [-0.5, 0.5), runs it twice, then RUNS times, and prints the median and the
 * minimum of CLOCK_THREAD_CPUTIME_ID per call in ms. Run it with
 * TESSEL_NUM_THREADS=1: on a machine the other engineers load, a thread's CPU
 * time moves far less than the wall clock (bench/r50_tasks.sh). Kernels with
 * symbolic sizes are refused. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "runtime/runtime.h"

static double cpu_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: kernel_cpu KERNEL.so [RUNS=30]\n");
    return 2;
  }
  void *h = dlopen(argv[1], RTLD_NOW);
  if (!h) {
    fprintf(stderr, "kernel_cpu: %s\n", dlerror());
    return 1;
  }
  const tsrt_kernel_meta *m = dlsym(h, TSRT_META_SYMBOL);
  tsrt_kernel_fn f = (tsrt_kernel_fn)dlsym(h, TSRT_ENTRY_SYMBOL);
  int runs = argc > 2 ? atoi(argv[2]) : 30;
  if (!m || !f || m->nsyms || m->nparams > 64 || runs < 1 || runs > 1000) {
    fprintf(stderr, "kernel_cpu: %s: not a kernel with constant shapes, or RUNS outside 1..1000\n", argv[1]);
    return 1;
  }
  void *args[64];
  srand(7);
  for (int i = 0; i < m->nparams; i++) {
    size_t n = 1, b = (size_t)tsrt_dtype_bytes(m->params[i].dtype);
    for (int j = 0; j < m->params[i].ndim; j++) n *= (size_t)m->params[i].shape[j];
    unsigned char *p = aligned_alloc(64, (n * b + 63) / 64 * 64);
    if (!p) return 1;
    if (m->params[i].dtype == TSRT_F32)
      for (size_t k = 0; k < n; k++) ((float *)p)[k] = (float)rand() / (float)RAND_MAX - 0.5f;
    else
      for (size_t k = 0; k < n * b; k++) p[k] = 0;
    args[i] = p;
  }
  if (f(args) || f(args)) {
    fprintf(stderr, "kernel_cpu: %s failed\n", argv[1]);
    return 1;
  }
  double t[1000];
  for (int i = 0; i < runs; i++) {
    double a = cpu_now();
    f(args);
    t[i] = cpu_now() - a;
  }
  qsort(t, (size_t)runs, sizeof t[0], cmp_double);
  printf("%.3f ms (min %.3f)\n", t[runs / 2] * 1e3, t[0] * 1e3);
  return 0;
}
