/* threadpool.c — the persistent thread pool behind tsrt_parallel_launch.
 *
 * Generated code outlines each parallel loop into a task function and calls
 * tsrt_parallel_launch once per loop execution, so the launch path must be
 * cheap: workers wait on a generation counter, spinning for a short while
 * (a few tens of microseconds) before sleeping on a futex, and the caller runs
 * task 0 itself. Worker i is pinned to its own core so that sleeping threads
 * are not packed onto one vCPU. Task t runs on thread t mod n (static
 * assignment: the loop's chunks are balanced by the code generator). A nested
 * launch (from inside a task) runs serially. After fork() the child starts
 * with no pool and builds its own on first use. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "runtime.h"

typedef struct pool {
  int n; /* threads including the caller */
  pthread_t *threads;
  _Atomic uint32_t gen;
  _Atomic int remaining;
  _Atomic int32_t result;
  _Atomic bool stop;
  tsrt_task_fn fn;
  void *closure;
  int num_tasks;
} pool_t;

static pool_t pool;
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static bool pool_started;
static __thread int in_task;

static long futex(_Atomic uint32_t *addr, int op, uint32_t val) {
  return syscall(SYS_futex, (uint32_t *)addr, op, val, NULL, NULL, 0);
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

double tsrt_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The CPUs the process may use, captured when the pool starts (before any
 * thread is pinned: a pinned thread's children inherit its one-CPU mask). */
static cpu_set_t pool_cpus;
static bool pool_cpus_valid;

static void pin_in(const cpu_set_t *allowed, int slot) {
  int ncpu = CPU_COUNT(allowed);
  if (ncpu <= 1) return;
  int want = slot % ncpu, seen = 0;
  for (int c = 0; c < CPU_SETSIZE; c++) {
    if (!CPU_ISSET(c, allowed)) continue;
    if (seen++ == want) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(c, &one);
      pthread_setaffinity_np(pthread_self(), sizeof one, &one);
      return;
    }
  }
}

void tsrt_pin_current_thread(int slot) {
  cpu_set_t allowed;
  if (pool_cpus_valid) allowed = pool_cpus;
  else if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return;
  pin_in(&allowed, slot);
}

static void run_tasks(int tid) {
  for (int t = tid; t < pool.num_tasks; t += pool.n) {
    int32_t r = pool.fn(t, pool.num_tasks, pool.closure);
    if (r) {
      int32_t zero = 0;
      atomic_compare_exchange_strong(&pool.result, &zero, r);
    }
  }
}

#define SPIN_SECONDS 50e-6

static void *worker(void *arg) {
  int tid = (int)(intptr_t)arg;
  tsrt_pin_current_thread(tid);
  in_task = 1;
  uint32_t seen = 0; /* the generation the pool was created with */
  for (;;) {
    double t0 = tsrt_now();
    uint32_t g;
    int spins = 0;
    while ((g = atomic_load_explicit(&pool.gen, memory_order_acquire)) == seen) {
      cpu_relax();
      if (++spins % 256 == 0 && tsrt_now() - t0 > SPIN_SECONDS) {
        futex(&pool.gen, FUTEX_WAIT_PRIVATE, seen);
        t0 = tsrt_now();
      }
    }
    seen = g;
    if (atomic_load(&pool.stop)) break;
    run_tasks(tid);
    atomic_fetch_sub_explicit(&pool.remaining, 1, memory_order_acq_rel);
  }
  return NULL;
}

static void after_fork_child(void) {
  /* the child has only the forking thread: forget the parent's pool */
  memset(&pool, 0, sizeof pool);
  pool_started = false;
  pthread_mutex_init(&pool_lock, NULL);
}

static int pool_size_from_env(void) {
  const char *e = getenv("TESSEL_NUM_THREADS");
  if (e && *e) {
    long v = strtol(e, NULL, 10);
    if (v >= 1 && v <= 1024) return (int)v;
  }
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n >= 1 ? (int)n : 1;
}

int tsrt_default_num_threads(void) { return pool_size_from_env(); }

static void pool_start(void) {
  static bool atfork_registered;
  if (!atfork_registered) {
    pthread_atfork(NULL, NULL, after_fork_child);
    atfork_registered = true;
  }
  int n = pool_size_from_env();
  pool_cpus_valid = sched_getaffinity(0, sizeof pool_cpus, &pool_cpus) == 0;
  atomic_store(&pool.gen, 0);
  pool.n = 1;
  pool.threads = n > 1 ? ts_calloc((size_t)n, sizeof(pthread_t)) : NULL;
  for (int i = 1; i < n && pool.threads; i++) {
    if (pthread_create(&pool.threads[i], NULL, worker, (void *)(intptr_t)i) != 0) break;
    pool.n = i + 1;
  }
  /* a measuring process pins task 0 (this thread) too, after the workers
   * captured the full CPU set */
  const char *pc = getenv("TESSEL_PIN_CALLER");
  if (pc && *pc == '1' && pool.n > 1) tsrt_pin_current_thread(0);
  pool_started = true;
}

int tsrt_num_threads(void) {
  pthread_mutex_lock(&pool_lock);
  if (!pool_started) pool_start();
  int n = pool.n;
  pthread_mutex_unlock(&pool_lock);
  return n;
}

int32_t tsrt_parallel_launch(tsrt_task_fn fn, void *closure, int32_t num_tasks) {
  if (in_task) {
    /* nested parallelism runs serially in this thread */
    int32_t n = num_tasks > 0 ? num_tasks : 1;
    for (int32_t t = 0; t < n; t++) {
      int32_t r = fn(t, n, closure);
      if (r) return r;
    }
    return 0;
  }
  pthread_mutex_lock(&pool_lock);
  if (!pool_started) pool_start();
  if (num_tasks <= 0) num_tasks = pool.n;
  pool.fn = fn;
  pool.closure = closure;
  pool.num_tasks = num_tasks;
  atomic_store(&pool.result, 0);
  atomic_store(&pool.remaining, pool.n - 1);
  atomic_fetch_add_explicit(&pool.gen, 1, memory_order_release);
  if (pool.n > 1) futex(&pool.gen, FUTEX_WAKE_PRIVATE, INT32_MAX);
  in_task = 1;
  run_tasks(0);
  in_task = 0;
  double t0 = tsrt_now();
  for (int spins = 0; atomic_load_explicit(&pool.remaining, memory_order_acquire) > 0; spins++) {
    cpu_relax();
    /* a worker descheduled on our core: let it run */
    if (spins % 1024 == 0 && tsrt_now() - t0 > 1e-3) sched_yield();
  }
  int32_t r = atomic_load(&pool.result);
  pthread_mutex_unlock(&pool_lock);
  return r;
}

void tsrt_pool_shutdown(void) {
  pthread_mutex_lock(&pool_lock);
  if (pool_started) {
    atomic_store(&pool.stop, true);
    atomic_fetch_add(&pool.gen, 1);
    futex(&pool.gen, FUTEX_WAKE_PRIVATE, INT32_MAX);
    for (int i = 1; i < pool.n; i++) pthread_join(pool.threads[i], NULL);
    ts_free(pool.threads);
    memset(&pool, 0, sizeof pool);
    pool_started = false;
  }
  pthread_mutex_unlock(&pool_lock);
}
