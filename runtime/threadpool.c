/* threadpool.c — the persistent thread pool behind tsrt_parallel_launch.
 *
 * Generated code outlines each parallel loop into a task function and calls
 * tsrt_parallel_launch once per loop execution (a model makes dozens per
 * run), so the launch path must be cheap and must not depend on when a
 * worker happens to get a CPU. A launch publishes its tasks in one claim
 * word (generation | count | next); the caller and the workers take tasks
 * with a CAS on it, and the caller waits only for tasks that others claimed
 * and are still running. A worker that wakes late, or whose CPU is busy with
 * another process, claims nothing and delays nothing: the caller runs what
 * is left (with the static assignment this replaced, the caller waited for
 * every worker, spinning for a millisecond before yielding). Idle workers
 * spin for 50 us, then sleep on a futex. Worker i is pinned to the i-th CPU
 * of the process's set; the launching thread is pinned to the 0-th for the
 * span of a model run (tsrt_caller_pin) and, with TESSEL_PIN_CALLER=1, in
 * measuring children, so it never shares a CPU with a worker (unpinned, it
 * often did: TESSEL_DEBUG=pool counts such launches; docs/MODEL.md
 * "Threads", bench/RESULTS.md). A nested launch (from
 * inside a task) runs serially. After fork() the child starts with no pool
 * and builds its own on first use. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "runtime.h"

/* A launch's claim word: generation (24 bits) | task count (20) | next
 * task (20). Threads claim a task with one CAS on it; a thread that saw an
 * older launch's word cannot claim anything of the current one (its CAS
 * fails), so a worker that woke late never delays or corrupts a launch. */
#define CLAIM_BITS 20
#define CLAIM_MAX ((1u << CLAIM_BITS) - 1)
#define CLAIM_NEXT(c) ((uint32_t)((c) & CLAIM_MAX))
#define CLAIM_COUNT(c) ((uint32_t)(((c) >> CLAIM_BITS) & CLAIM_MAX))
#define CLAIM_WORD(gen, count) (((uint64_t)((gen) & 0xffffffu) << (2 * CLAIM_BITS)) | ((uint64_t)(count) << CLAIM_BITS))

typedef struct pool {
  int n; /* threads including the caller */
  pthread_t *threads;
  _Atomic uint64_t claim;    /* the current launch (CLAIM_WORD) and its next task */
  _Atomic int done;          /* tasks of the current launch finished */
  _Atomic uint32_t wake;     /* bumped per launch: the futex sleeping workers wait on */
  _Atomic int sleepers;      /* workers in (or entering) the futex wait */
  _Atomic int32_t result;
  _Atomic bool stop;
  uint32_t gen;
  tsrt_task_fn fn;
  void *closure;
  int caller_cpu;            /* where the launching thread ran when it published (debug stats) */
  _Atomic int clash;         /* a worker ran a task of this launch on caller_cpu */
} pool_t;

static pool_t pool;
/* TESSEL_DEBUG=pool: what the pool did, printed at exit (docs/MODEL.md). */
static bool pool_debug;
static struct {
  _Atomic uint64_t launches, caller_tasks, worker_tasks, clashes, wakes;
  double wait_s; /* the caller's wait for tasks other threads claimed */
} pstats;

static void print_stats(void) {
  uint64_t l = atomic_load(&pstats.launches);
  fprintf(stderr,
          "pool: %llu parallel launches on %d threads; tasks run by the caller %llu, by workers %llu; "
          "launches with a worker on the caller's CPU %llu (%.1f%%); caller waited %.3f ms for workers; "
          "futex wakes %llu\n",
          (unsigned long long)l, pool.n, (unsigned long long)atomic_load(&pstats.caller_tasks),
          (unsigned long long)atomic_load(&pstats.worker_tasks), (unsigned long long)atomic_load(&pstats.clashes),
          l ? 100.0 * (double)atomic_load(&pstats.clashes) / (double)l : 0.0, pstats.wait_s * 1e3,
          (unsigned long long)atomic_load(&pstats.wakes));
}

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

/* Claims and runs tasks of the launch c belongs to until none is left;
 * false when c's launch has no task left to claim. */
static bool run_claimed(uint64_t c, bool worker) {
  bool ran = false;
  while (CLAIM_NEXT(c) < CLAIM_COUNT(c)) {
    if (!atomic_compare_exchange_weak_explicit(&pool.claim, &c, c + 1, memory_order_acquire,
                                               memory_order_relaxed))
      continue; /* c now holds the current word: maybe another launch's */
    int32_t t = (int32_t)CLAIM_NEXT(c), n = (int32_t)CLAIM_COUNT(c);
    if (pool_debug) {
      atomic_fetch_add(worker ? &pstats.worker_tasks : &pstats.caller_tasks, 1);
      if (worker && sched_getcpu() == pool.caller_cpu) atomic_store(&pool.clash, 1);
    }
    int32_t r = pool.fn(t, n, pool.closure);
    if (r) {
      int32_t zero = 0;
      atomic_compare_exchange_strong(&pool.result, &zero, r);
    }
    atomic_fetch_add_explicit(&pool.done, 1, memory_order_release);
    ran = true;
    c = atomic_load_explicit(&pool.claim, memory_order_acquire);
  }
  return ran;
}

#define SPIN_SECONDS 50e-6

static void *worker(void *arg) {
  int tid = (int)(intptr_t)arg;
  tsrt_pin_current_thread(tid);
  in_task = 1;
  double t0 = tsrt_now();
  for (int spins = 0; !atomic_load_explicit(&pool.stop, memory_order_acquire);) {
    uint64_t c = atomic_load_explicit(&pool.claim, memory_order_acquire);
    if (CLAIM_NEXT(c) < CLAIM_COUNT(c)) {
      run_claimed(c, true);
      t0 = tsrt_now();
      spins = 0;
      continue;
    }
    cpu_relax();
    if (++spins % 256 || tsrt_now() - t0 <= SPIN_SECONDS) continue;
    /* idle for a while: sleep until the next launch bumps `wake` (a launch
     * published between the check below and the wait changes `wake`, so
     * the wait returns at once) */
    uint32_t w = atomic_load(&pool.wake);
    atomic_fetch_add(&pool.sleepers, 1);
    c = atomic_load(&pool.claim);
    if (CLAIM_NEXT(c) >= CLAIM_COUNT(c) && !atomic_load(&pool.stop)) futex(&pool.wake, FUTEX_WAIT_PRIVATE, w);
    atomic_fetch_sub(&pool.sleepers, 1);
    t0 = tsrt_now();
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
  static bool debug_registered;
  if (!debug_registered && ts_debug("pool")) {
    pool_debug = debug_registered = true;
    atexit(print_stats);
  }
  pool_cpus_valid = sched_getaffinity(0, sizeof pool_cpus, &pool_cpus) == 0;
  atomic_store(&pool.claim, CLAIM_WORD(0, 0));
  pool.gen = 0;
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

bool tsrt_caller_pin(tsrt_affinity *saved) {
  saved->pinned = false;
  pthread_mutex_lock(&pool_lock);
  if (!pool_started) pool_start();
  bool want = pool.n > 1 && pool_cpus_valid && CPU_COUNT(&pool_cpus) > 1;
  pthread_mutex_unlock(&pool_lock);
  _Static_assert(sizeof saved->mask >= sizeof(cpu_set_t), "the saved mask holds a cpu_set_t");
  if (!want || pthread_getaffinity_np(pthread_self(), sizeof(cpu_set_t), (cpu_set_t *)saved->mask) != 0)
    return false;
  cpu_set_t now;
  tsrt_pin_current_thread(0);
  if (pthread_getaffinity_np(pthread_self(), sizeof now, &now) == 0 && CPU_EQUAL(&now, (cpu_set_t *)saved->mask))
    return false; /* it was pinned there already */
  saved->pinned = true;
  return true;
}

void tsrt_caller_restore(const tsrt_affinity *saved) {
  if (saved->pinned) pthread_setaffinity_np(pthread_self(), sizeof(cpu_set_t), (const cpu_set_t *)saved->mask);
}

int tsrt_num_threads(void) {
  pthread_mutex_lock(&pool_lock);
  if (!pool_started) pool_start();
  int n = pool.n;
  pthread_mutex_unlock(&pool_lock);
  return n;
}

static int32_t run_serially(tsrt_task_fn fn, void *closure, int32_t n) {
  for (int32_t t = 0; t < n; t++) {
    int32_t r = fn(t, n, closure);
    if (r) return r;
  }
  return 0;
}

int32_t tsrt_parallel_launch(tsrt_task_fn fn, void *closure, int32_t num_tasks) {
  /* nested parallelism runs serially in this thread */
  if (in_task) return run_serially(fn, closure, num_tasks > 0 ? num_tasks : 1);
  pthread_mutex_lock(&pool_lock);
  if (!pool_started) pool_start();
  if (num_tasks <= 0) num_tasks = pool.n;
  if (pool.n == 1 || num_tasks == 1 || (uint32_t)num_tasks > CLAIM_MAX) {
    in_task = 1;
    int32_t r = run_serially(fn, closure, num_tasks);
    in_task = 0;
    pthread_mutex_unlock(&pool_lock);
    return r;
  }
  pool.fn = fn;
  pool.closure = closure;
  if (pool_debug) {
    pool.caller_cpu = sched_getcpu();
    atomic_store(&pool.clash, 0);
    atomic_fetch_add(&pstats.launches, 1);
  }
  atomic_store_explicit(&pool.result, 0, memory_order_relaxed);
  atomic_store_explicit(&pool.done, 0, memory_order_relaxed);
  pool.gen++;
  atomic_store(&pool.claim, CLAIM_WORD(pool.gen, (uint32_t)num_tasks)); /* publishes fn, closure */
  atomic_fetch_add(&pool.wake, 1);
  if (atomic_load(&pool.sleepers) > 0) {
    futex(&pool.wake, FUTEX_WAKE_PRIVATE, INT32_MAX);
    if (pool_debug) atomic_fetch_add(&pstats.wakes, 1);
  }
  in_task = 1;
  run_claimed(atomic_load_explicit(&pool.claim, memory_order_acquire), false);
  in_task = 0;
  /* tasks other threads claimed: wait for them to finish */
  double t0 = tsrt_now();
  for (int spins = 0; atomic_load_explicit(&pool.done, memory_order_acquire) < num_tasks; spins++) {
    cpu_relax();
    /* a worker descheduled on our core: let it run */
    if (spins % 1024 == 0 && tsrt_now() - t0 > 1e-3) sched_yield();
  }
  if (pool_debug) {
    pstats.wait_s += tsrt_now() - t0;
    if (atomic_load(&pool.clash)) atomic_fetch_add(&pstats.clashes, 1);
  }
  int32_t r = atomic_load(&pool.result);
  pthread_mutex_unlock(&pool_lock);
  return r;
}

void tsrt_pool_shutdown(void) {
  pthread_mutex_lock(&pool_lock);
  if (pool_started) {
    atomic_store(&pool.stop, true);
    atomic_fetch_add(&pool.wake, 1);
    futex(&pool.wake, FUTEX_WAKE_PRIVATE, INT32_MAX);
    for (int i = 1; i < pool.n; i++) pthread_join(pool.threads[i], NULL);
    ts_free(pool.threads);
    memset(&pool, 0, sizeof pool);
    pool_started = false;
  }
  pthread_mutex_unlock(&pool_lock);
}
