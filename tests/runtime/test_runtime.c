/* test_runtime.c — runtime: the thread pool (every task runs once,
 * nested launches run serially, errors propagate), seeded inputs (identical
 * for the same seed, in range, exact in every dtype), loading (bad paths and
 * non-kernels rejected with a message), and fork-isolated measurement: a good
 * kernel's outputs are correct, a crashing kernel and a hanging kernel are
 * each reported as errors while the caller carries on. argv[1..3]: the ok,
 * crash and hang artifacts. */
#define _GNU_SOURCE
#include <check.h>
#include <sched.h>
#include <stdio.h>
#include <unistd.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "runtime.h"
#include "model.h"

static const char *ok_so, *crash_so, *hang_so;

static _Atomic int hits[257];

static int32_t count_task(int32_t t, int32_t n, void *p) {
  (void)p;
  if (n != 257) return 7;
  atomic_fetch_add(&hits[t], 1);
  return 0;
}

static int32_t fail_task(int32_t t, int32_t n, void *p) {
  (void)n;
  (void)p;
  return t == 3 ? 42 : 0;
}

static int32_t nested_task(int32_t t, int32_t n, void *p) {
  (void)n;
  _Atomic int *sum = p;
  /* a nested launch runs serially in this thread */
  for (int i = 0; i < 1; i++) atomic_fetch_add(sum, t);
  return 0;
}

static int32_t outer_task(int32_t t, int32_t n, void *p) {
  (void)t;
  (void)n;
  return tsrt_parallel_launch(nested_task, p, 4);
}

START_TEST(test_pool) {
  ck_assert_int_ge(tsrt_num_threads(), 1);
  for (int rep = 0; rep < 200; rep++) {
    memset(hits, 0, sizeof hits);
    ck_assert_int_eq(tsrt_parallel_launch(count_task, NULL, 257), 0);
    for (int i = 0; i < 257; i++) ck_assert_int_eq(atomic_load(&hits[i]), 1);
  }
  ck_assert_int_eq(tsrt_parallel_launch(fail_task, NULL, 8), 42);
  _Atomic int sum = 0;
  ck_assert_int_eq(tsrt_parallel_launch(outer_task, &sum, 3), 0);
  ck_assert_int_eq(atomic_load(&sum), 3 * (0 + 1 + 2 + 3));
  tsrt_pool_shutdown();
  /* usable again after shutdown */
  memset(hits, 0, sizeof hits);
  ck_assert_int_eq(tsrt_parallel_launch(count_task, NULL, 257), 0);
  ck_assert_int_eq(atomic_load(&hits[256]), 1);
}
END_TEST

START_TEST(test_fill_random) {
  float a[1000], b[1000];
  tsrt_fill_random(TSRT_F32, a, 1000, 5);
  tsrt_fill_random(TSRT_F32, b, 1000, 5);
  ck_assert_int_eq(memcmp(a, b, sizeof a), 0);
  tsrt_fill_random(TSRT_F32, b, 1000, 6);
  ck_assert_int_ne(memcmp(a, b, sizeof a), 0);
  double mn = 1, mx = -1;
  for (int i = 0; i < 1000; i++) {
    mn = fmin(mn, a[i]);
    mx = fmax(mx, a[i]);
  }
  ck_assert(mn >= -1 && mx < 1 && mx - mn > 1.5);
  int8_t c[100];
  tsrt_fill_random(TSRT_I8, c, 100, 1);
  for (int i = 0; i < 100; i++) ck_assert(c[i] >= -4 && c[i] <= 4);
  uint16_t h[100];
  tsrt_fill_random(TSRT_F16, h, 100, 1);
  for (int i = 0; i < 100; i++) ck_assert_uint_lt(h[i] & 0x7fffu, 0x3c01u); /* |x| <= 1 */
  ck_assert_uint_ne(tsrt_checksum(a, sizeof a), tsrt_checksum(b, sizeof b));
}
END_TEST

START_TEST(test_load_errors) {
  tsrt_module m;
  ts_diag err = {0};
  ck_assert_int_eq(tsrt_module_load("/nonexistent/k.so", &m, &err), TS_ELOAD);
  ck_assert_ptr_nonnull(strstr(err.msg, "/nonexistent/k.so"));
  ts_diag_clear(&err);
  ck_assert_int_eq(tsrt_module_load("libm.so.6", &m, &err), TS_ELOAD);
  ck_assert_ptr_nonnull(strstr(err.msg, "not a tessel kernel"));
}
END_TEST

START_TEST(test_measure_ok) {
  tsrt_measure_opts o = {.repeat = 3, .min_repeat_ms = 1, .timeout_s = 20, .seed = 9,
                         .want_outputs = true, .cooldown_ms = 0.1};
  tsrt_measure_result r;
  tsrt_measure_forked(ok_so, &o, &r);
  ck_assert_msg(r.status == TS_OK, "%s", r.error);
  ck_assert_int_eq(r.repeat, 3);
  ck_assert_int_ge(r.number, 1);
  ck_assert(tsrt_result_median(&r) > 0);
  ck_assert_uint_eq(r.outputs_bytes, 4000);
  float a[1000], b[1000];
  tsrt_fill_random(TSRT_F32, a, 1000, 9);
  tsrt_fill_random(TSRT_F32, b, 1000, 10);
  const float *c = r.outputs;
  for (int i = 0; i < 1000; i++) ck_assert_float_eq(c[i], a[i] + b[i]);
  ck_assert_uint_eq(r.checksums[0], tsrt_checksum(c, 4000));
  tsrt_result_fini(&r);
}
END_TEST

/* The measurement policy: a kernel over the caller's slow cut-off costs its
 * warm-up only (one repeat, number 1); otherwise every requested repeat is
 * timed with a number that makes one repeat last min_repeat_ms. */
START_TEST(test_measure_slow_stop) {
  tsrt_measure_opts o = {.repeat = 5, .min_repeat_ms = 2, .timeout_s = 20, .seed = 9,
                         .want_outputs = true, .slow_stop_s = 1e-12};
  tsrt_measure_result r;
  tsrt_measure_forked(ok_so, &o, &r);
  ck_assert_msg(r.status == TS_OK, "%s", r.error);
  ck_assert_int_eq(r.repeat, 1);
  ck_assert_int_eq(r.number, 1);
  ck_assert(r.secs[0] > 0);
  ck_assert_uint_eq(r.outputs_bytes, 4000);
  tsrt_result_fini(&r);
  o.slow_stop_s = 1e3; /* far above: the full protocol */
  o.min_repeat_ms = 50; /* a preempted first call on a loaded machine stays far below it */
  tsrt_measure_forked(ok_so, &o, &r);
  ck_assert_msg(r.status == TS_OK, "%s", r.error);
  ck_assert_int_eq(r.repeat, 5);
  ck_assert_int_gt(r.number, 1); /* 1000 adds take far less than 50 ms */
  ck_assert_msg(r.secs[0] * r.number * 1e3 >= 50.0, "first repeat %g ms", r.secs[0] * r.number * 1e3);
  for (int i = 0; i < 5; i++) ck_assert(r.secs[i] > 0);
  tsrt_result_fini(&r);
  o.number = 3; /* a user's number is where calibration starts */
  o.min_repeat_ms = 0;
  tsrt_measure_forked(ok_so, &o, &r);
  ck_assert_int_eq(r.number, 3);
  ck_assert_int_eq(r.repeat, 5);
  tsrt_result_fini(&r);
}
END_TEST

/* cpu_time: the same protocol on the process CPU clock; calibration grows
 * number until one repeat lasts min_repeat_ms of CPU time, outputs intact. */
START_TEST(test_measure_cpu_time) {
  tsrt_measure_opts o = {.repeat = 3, .min_repeat_ms = 20, .timeout_s = 20, .seed = 9,
                         .want_outputs = true, .cpu_time = true};
  tsrt_measure_result r;
  tsrt_measure_forked(ok_so, &o, &r);
  ck_assert_msg(r.status == TS_OK, "%s", r.error);
  ck_assert_int_eq(r.repeat, 3);
  ck_assert_int_gt(r.number, 1);
  ck_assert_msg(r.secs[0] * r.number * 1e3 >= 20.0, "first repeat %g ms", r.secs[0] * r.number * 1e3);
  for (int i = 0; i < 3; i++) ck_assert(r.secs[i] > 0);
  float a[1000], b[1000];
  tsrt_fill_random(TSRT_F32, a, 1000, 9);
  tsrt_fill_random(TSRT_F32, b, 1000, 10);
  const float *c = r.outputs;
  for (int i = 0; i < 1000; i++) ck_assert_float_eq(c[i], a[i] + b[i]);
  tsrt_result_fini(&r);
}
END_TEST

START_TEST(test_measure_crash_and_hang) {
  tsrt_measure_opts o = {.repeat = 1, .timeout_s = 1, .seed = 1};
  tsrt_measure_result r;
  tsrt_measure_forked(crash_so, &o, &r);
  ck_assert_int_eq(r.status, TS_ECRASH);
  ck_assert_ptr_nonnull(strstr(r.error, "signal 11"));
  double t0 = tsrt_now();
  tsrt_measure_forked(hang_so, &o, &r);
  ck_assert_int_eq(r.status, TS_ETIMEOUT);
  ck_assert(tsrt_now() - t0 < 5);
  ck_assert_ptr_nonnull(strstr(r.error, "timed out"));
  tsrt_measure_forked("/nonexistent.so", &o, &r);
  ck_assert_int_eq(r.status, TS_ELOAD);
  /* and the runner keeps going */
  o.want_outputs = false;
  tsrt_measure_forked(ok_so, &o, &r);
  ck_assert_int_eq(r.status, TS_OK);
}
END_TEST


static int cpu_of_task[2];
static _Atomic int started;
static _Atomic int tally[64];

/* Records the count the pool chose for a default launch. */
static int32_t count_default_task(int32_t t, int32_t n, void *p) {
  _Atomic int32_t *seen = p;
  int32_t none = -1;
  atomic_compare_exchange_strong(seen, &none, n);
  if (t >= 0 && t < 64) atomic_fetch_add(&tally[t], 1);
  return 0;
}

static int32_t where_task(int32_t t, int32_t n, void *p) {
  (void)n;
  (void)p;
  /* both tasks run at once: each waits (up to 5 s) for the other to start,
   * so the thread that claimed one cannot claim the other too */
  atomic_fetch_add(&started, 1);
  double t0 = tsrt_now();
  while (atomic_load(&started) < 2 && tsrt_now() - t0 < 5) sched_yield();
  cpu_of_task[t] = sched_getcpu();
  return 0;
}

/* With two CPUs, a pinned pool runs task 0 (the caller, pinned by
 * TESSEL_PIN_CALLER as in measuring children) and task 1 (worker 1) on
 * different CPUs: a caller pinned before the workers start must not drag
 * them onto its one CPU. */
/* Fault injection: the runtime's allocations fail in turn (checking and
 * memory-planning a model, an in-process measurement's outputs), each a
 * clean TS_ENOMEM; the same operation then succeeds. */
START_TEST(test_enomem) {
  static const char *names[] = {"x", "a", "b", "y"};
  tsrt_model_tensor t[4];
  memset(t, 0, sizeof t);
  for (int i = 0; i < 4; i++) {
    t[i].name = names[i];
    t[i].kind = i == 0 ? TSRT_T_INPUT : TSRT_T_INTER;
    t[i].dtype = TSRT_F32;
    t[i].ndim = 2;
    t[i].shape[0] = TSRT_DIM_SYM(0);
    t[i].shape[1] = 10 + i;
  }
  static const int32_t a0[] = {0, 1}, a1[] = {1, 2}, a2[] = {2, 3};
  tsrt_model_call c[3] = {{0, 2, a0, 0, NULL, 0, 1, NULL}, {0, 2, a1, 0, NULL, 0, 1, NULL},
                          {0, 2, a2, 0, NULL, 0, 1, NULL}};
  static const int32_t ins[] = {0}, outs[] = {3};
  static const char *syms[] = {"batch"};
  tsrt_model_plan p = {TSRT_MODEL_ABI_VERSION, 4, 3, 1, 1, 1, 1, "chain", "llvm", syms, t, c, NULL,
                       ins, outs, NULL, 0};
  int failures = 0;
  for (long n = 1; n < 50; n++) {
    int64_t off[4], sv[1] = {4};
    uint64_t ws = 0, naive = 0;
    ts_diag d = {0};
    ts_alloc_fail_after(n);
    ts_status st = tsrt_model_plan_check(&p, &d);
    if (st == TS_OK) st = tsrt_model_memory_plan(&p, sv, off, &ws, &naive, &d);
    ts_alloc_fail_after(0);
    if (st == TS_OK) {
      ck_assert_uint_gt(ws, 0);
      break;
    }
    ck_assert_msg(st == TS_ENOMEM, "allocation %ld: %s", n, d.msg);
    failures++;
  }
  ck_assert_int_ge(failures, 5);
  tsrt_module m;
  ts_diag d = {0};
  ck_assert_msg(tsrt_module_load(ok_so, &m, &d) == TS_OK, "%s", d.msg);
  tsrt_measure_opts o = {.repeat = 1, .number = 1, .seed = 9, .want_outputs = true};
  tsrt_measure_result r;
  memset(&r, 0, sizeof r);
  tsrt_measure_inprocess(&m, &o, &r); /* the pool starts outside the injection */
  tsrt_result_fini(&r);
  memset(&r, 0, sizeof r);
  ts_alloc_fail_after(1);
  tsrt_measure_inprocess(&m, &o, &r);
  ts_alloc_fail_after(0);
  ck_assert_msg(r.status == TS_ENOMEM, "%s: %s", tsrt_status_name(r.status), r.error);
  ck_assert_ptr_null(r.outputs);
  tsrt_result_fini(&r);
  memset(&r, 0, sizeof r);
  tsrt_measure_inprocess(&m, &o, &r);
  ck_assert_msg(r.status == TS_OK, "%s", r.error);
  ck_assert_uint_eq(r.outputs_bytes, 4000);
  tsrt_result_fini(&r);
  tsrt_module_unload(&m);
}
END_TEST

START_TEST(test_pool_pinning) {
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2) return;
  tsrt_pool_shutdown();
  cpu_set_t mine;
  ck_assert_int_eq(pthread_getaffinity_np(pthread_self(), sizeof mine, &mine), 0);
  setenv("TESSEL_NUM_THREADS", "2", 1);
  setenv("TESSEL_PIN_CALLER", "1", 1);
  for (int rep = 0; rep < 5; rep++) {
    atomic_store(&started, 0);
    ck_assert_int_eq(tsrt_parallel_launch(where_task, NULL, 2), 0);
    ck_assert_int_ne(cpu_of_task[0], cpu_of_task[1]);
  }
  tsrt_pool_shutdown();
  unsetenv("TESSEL_PIN_CALLER");
  ck_assert_int_eq(pthread_setaffinity_np(pthread_self(), sizeof mine, &mine), 0); /* unpinned again */
  /* a model run pins its calling thread to slot 0 for the run only: the
   * same holds, and the thread's own affinity comes back after */
  cpu_set_t before, during, after;
  ck_assert_int_eq(pthread_getaffinity_np(pthread_self(), sizeof before, &before), 0);
  tsrt_affinity aff;
  ck_assert(tsrt_caller_pin(&aff));
  ck_assert_int_eq(pthread_getaffinity_np(pthread_self(), sizeof during, &during), 0);
  ck_assert_int_eq(CPU_COUNT(&during), 1);
  for (int rep = 0; rep < 5; rep++) {
    atomic_store(&started, 0);
    ck_assert_int_eq(tsrt_parallel_launch(where_task, NULL, 2), 0);
    ck_assert_int_ne(cpu_of_task[0], cpu_of_task[1]);
  }
  tsrt_caller_restore(&aff);
  ck_assert_int_eq(pthread_getaffinity_np(pthread_self(), sizeof after, &after), 0);
  ck_assert(CPU_EQUAL(&before, &after));
  tsrt_pool_shutdown();
  unsetenv("TESSEL_NUM_THREADS");
}
END_TEST

/* The pool at 1..5 threads (more than this machine's CPUs included): every
 * task of every launch runs exactly once with its own id and the launch's
 * count, for counts below, at and above the pool size and the default (0:
 * one or more per thread); the first failing task's result comes back; a
 * nested launch runs serially; thousands of back-to-back launches of tiny
 * tasks (workers waking late for a launch that is already over) lose or
 * repeat nothing. */
static _Atomic int wrong_count;

static int32_t tally_task(int32_t t, int32_t n, void *p) {
  if (n != *(int32_t *)p) atomic_fetch_add(&wrong_count, 1);
  if (t >= 0 && t < 64) atomic_fetch_add(&tally[t], 1);
  return 0;
}

START_TEST(test_pool_sizes) {
  for (int th = 1; th <= 5; th++) {
    tsrt_pool_shutdown();
    char v[8];
    snprintf(v, sizeof v, "%d", th);
    setenv("TESSEL_NUM_THREADS", v, 1);
    ck_assert_int_eq(tsrt_num_threads(), th);
    for (int rep = 0; rep < 3000; rep++) {
      int32_t n = rep % 11 == 10 ? 0 : 1 + rep % 11 * 5 % 23; /* 1..23, and the default */
      int32_t expect = n;
      if (n == 0) {
        /* the default: the pool picks the count; every id below it once */
        memset(tally, 0, sizeof tally);
        _Atomic int32_t seen = -1;
        ck_assert_int_eq(tsrt_parallel_launch(count_default_task, (void *)&seen, 0), 0);
        ck_assert_int_ge(seen, th);
        ck_assert_int_le(seen, 64);
        for (int i = 0; i < seen; i++) ck_assert_int_eq(atomic_load(&tally[i]), 1);
        continue;
      }
      memset(tally, 0, sizeof tally);
      ck_assert_int_eq(tsrt_parallel_launch(tally_task, &expect, n), 0);
      for (int i = 0; i < 64; i++) ck_assert_int_eq(atomic_load(&tally[i]), i < n ? 1 : 0);
    }
    ck_assert_int_eq(atomic_load(&wrong_count), 0);
    ck_assert_int_eq(tsrt_parallel_launch(fail_task, NULL, 8), 42);
    ck_assert_int_eq(tsrt_parallel_launch(fail_task, NULL, 3), 0);
    _Atomic int sum = 0;
    ck_assert_int_eq(tsrt_parallel_launch(outer_task, &sum, 5), 0);
    ck_assert_int_eq(atomic_load(&sum), 5 * (0 + 1 + 2 + 3));
  }
  tsrt_pool_shutdown();
  unsetenv("TESSEL_NUM_THREADS");
}
END_TEST


/* The kernel scratch pool: 64-byte aligned blocks; a freed block comes back
 * for the next request it fits (no malloc in a steady state); a thread's
 * blocks are its own and go back to malloc when it exits; the cache keeps
 * at most 16 blocks (the largest); an allocation failure is NULL. */
static void *scratch_thread(void *arg) {
  tsrt_scratch_stats *out = arg;
  void *p = tsrt_scratch_alloc(1 << 20); /* not the main thread's kept block */
  tsrt_scratch_get_stats(&out[0]);
  tsrt_scratch_free(p);
  tsrt_scratch_get_stats(&out[1]);
  return NULL;
}

START_TEST(test_scratch_pool) {
  tsrt_scratch_trim();
  tsrt_scratch_stats a, b;
  tsrt_scratch_get_stats(&a);
  ck_assert_int_eq(a.kept_blocks, 0);
  /* a Winograd-like call pattern: three buffers of different sizes per call */
  static const uint64_t sizes[3] = {3 << 20, 100000, 7};
  for (int call = 0; call < 10; call++) {
    if (call == 1) tsrt_scratch_get_stats(&a);
    void *p[3];
    for (int k = 0; k < 3; k++) {
      p[k] = tsrt_scratch_alloc(sizes[k]);
      ck_assert_ptr_nonnull(p[k]);
      ck_assert_uint_eq((uintptr_t)p[k] % 64, 0);
      memset(p[k], call, sizes[k]); /* the whole block is usable */
    }
    for (int k = 2; k >= 0; k--) tsrt_scratch_free(p[k]);
  }
  tsrt_scratch_get_stats(&b);
  ck_assert_uint_eq(b.mallocs, a.mallocs); /* calls 2..10: no malloc */
  ck_assert_uint_eq(b.allocs - a.allocs, 27);
  ck_assert_uint_eq(b.reuses - a.reuses, 27);
  ck_assert_int_eq(b.kept_blocks, 3);
  ck_assert_uint_ge(b.kept_bytes, (3 << 20) + 100000 + 7);
  /* the smallest block that fits is the one handed out */
  void *q = tsrt_scratch_alloc(90000);
  tsrt_scratch_get_stats(&a);
  ck_assert_uint_eq(a.mallocs, b.mallocs);
  ck_assert_uint_lt(a.kept_bytes, b.kept_bytes - 90000);
  ck_assert_uint_gt(a.kept_bytes, 3 << 20);
  tsrt_scratch_free(q);
  /* another thread has its own blocks (a malloc there), released at its exit */
  tsrt_scratch_stats t[2];
  pthread_t th;
  ck_assert_int_eq(pthread_create(&th, NULL, scratch_thread, t), 0);
  ck_assert_int_eq(pthread_join(th, NULL), 0);
  ck_assert_uint_eq(t[0].mallocs, a.mallocs + 1);
  ck_assert_int_eq(t[1].kept_blocks, 1);
  tsrt_scratch_get_stats(&b);
  ck_assert_int_eq(b.kept_blocks, 3); /* this thread's cache is untouched */
  ck_assert_uint_eq(b.releases, t[1].releases + 1); /* the thread's block went back at its exit */
  /* at most 16 blocks kept: the smallest go */
  void *many[20];
  for (int k = 0; k < 20; k++) ck_assert_ptr_nonnull(many[k] = tsrt_scratch_alloc(4096 * (uint64_t)(k + 1)));
  for (int k = 0; k < 20; k++) tsrt_scratch_free(many[k]);
  tsrt_scratch_get_stats(&b);
  ck_assert_int_eq(b.kept_blocks, 16);
  void *big = tsrt_scratch_alloc(3 << 20); /* still kept */
  tsrt_scratch_get_stats(&a);
  ck_assert_uint_eq(a.reuses, b.reuses + 1);
  tsrt_scratch_free(big);
  /* out of memory: NULL, and the pool still works after */
  tsrt_scratch_trim();
  ts_alloc_fail_after(1);
  ck_assert_ptr_null(tsrt_scratch_alloc(1 << 16));
  ts_alloc_fail_after(0);
  void *ok = tsrt_scratch_alloc(1 << 16);
  ck_assert_ptr_nonnull(ok);
  tsrt_scratch_free(ok);
  tsrt_scratch_free(NULL);
  tsrt_scratch_trim();
  tsrt_scratch_get_stats(&a);
  ck_assert_int_eq(a.kept_blocks, 0);
  ck_assert_uint_eq(a.kept_bytes, 0);
}
END_TEST

int main(int argc, char **argv) {
  if (argc < 4) return 2;
  ok_so = argv[1];
  crash_so = argv[2];
  hang_so = argv[3];
  Suite *s = suite_create("runtime");
  TCase *tc = tcase_create("runtime");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_pool);
  tcase_add_test(tc, test_measure_cpu_time);
  tcase_add_test(tc, test_pool_pinning);
  tcase_add_test(tc, test_pool_sizes);
  tcase_add_test(tc, test_fill_random);
  tcase_add_test(tc, test_load_errors);
  tcase_add_test(tc, test_measure_ok);
  tcase_add_test(tc, test_measure_crash_and_hang);
  tcase_add_test(tc, test_measure_slow_stop);
  tcase_add_test(tc, test_enomem);
  tcase_add_test(tc, test_scratch_pool);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int nf = srunner_ntests_failed(sr);
  srunner_free(sr);
  return nf ? 1 : 0;
}
