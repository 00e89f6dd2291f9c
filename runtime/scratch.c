/* scratch.c — the per-thread scratch pool behind tsrt_scratch_alloc and
 * tsrt_scratch_free, which generated kernels call for a buffer too large for
 * the stack (a Winograd kernel's transformed tiles: megabytes) and free
 * before they return.
 *
 * With plain malloc such a buffer is usually mmapped or carved from a heap
 * that is trimmed after the free, so every call page-faults it in again
 * (ResNet-18's Winograd kernels took twice their own time inside the model).
 * The runtime used to stop that by changing glibc's thresholds for the whole
 * process (mallopt); instead each thread keeps the blocks its kernels freed,
 * and the next call of the same kernel on that thread gets the same, already
 * faulted block back: in a steady state (the same model run again) no call
 * reaches malloc. A thread keeps at most SCRATCH_SLOTS blocks and
 * SCRATCH_KEEP_BYTES in all (beyond that a freed block goes back to malloc);
 * a thread's blocks are released when it exits (tsrt_scratch_trim for the
 * calling thread). Blocks come from ts_malloc, so fault injection reaches
 * kernel scratch too. docs/MODEL.md ("Scratch"). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "runtime.h"

#define SCRATCH_SLOTS 16
#define SCRATCH_KEEP_BYTES ((uint64_t)1 << 30)
#define SCRATCH_ALIGN 64
#define SCRATCH_MAGIC 0x7473736372617463ull /* "tsscratc" */

/* Written in the SCRATCH_ALIGN bytes before the pointer handed out. */
typedef struct hdr {
  void *base;    /* what ts_malloc returned */
  uint64_t cap;  /* usable bytes after the header */
  uint64_t magic;
} hdr;
_Static_assert(sizeof(hdr) <= SCRATCH_ALIGN, "header fits its slot");

typedef struct cache {
  char *blk[SCRATCH_SLOTS]; /* pointers as handed out (header before them) */
  int n;
  uint64_t bytes;
} cache;

/* Process-wide counts (every thread's calls): relaxed, they only count. */
static _Atomic uint64_t n_allocs, n_reuses, n_mallocs, n_frees, n_releases;
#define COUNT(x) atomic_fetch_add_explicit(&(x), 1, memory_order_relaxed)

static __thread cache tcache;
static pthread_key_t exit_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

static hdr *hdr_of(void *p) { return (hdr *)((char *)p - SCRATCH_ALIGN); }

static void release(void *p) {
  ts_free(hdr_of(p)->base);
  COUNT(n_releases);
}

static void trim(cache *c) {
  for (int i = 0; i < c->n; i++) release(c->blk[i]);
  c->n = 0;
  c->bytes = 0;
}

/* At thread exit: its cache goes back to malloc. */
static void on_exit_thread(void *arg) {
  (void)arg;
  trim(&tcache);
}

static void make_key(void) { (void)pthread_key_create(&exit_key, on_exit_thread); }

static void register_thread(void) {
  pthread_once(&key_once, make_key);
  if (!pthread_getspecific(exit_key)) (void)pthread_setspecific(exit_key, &tcache);
}

void *tsrt_scratch_alloc(uint64_t bytes) {
  cache *c = &tcache;
  uint64_t want = (bytes + SCRATCH_ALIGN - 1) / SCRATCH_ALIGN * SCRATCH_ALIGN;
  if (!want) want = SCRATCH_ALIGN;
  COUNT(n_allocs);
  /* the smallest kept block that holds it */
  int best = -1;
  for (int i = 0; i < c->n; i++) {
    uint64_t cap = hdr_of(c->blk[i])->cap;
    if (cap >= want && (best < 0 || cap < hdr_of(c->blk[best])->cap)) best = i;
  }
  if (best >= 0) {
    char *p = c->blk[best];
    c->bytes -= hdr_of(p)->cap;
    c->blk[best] = c->blk[--c->n];
    COUNT(n_reuses);
    return p;
  }
  if (want > SIZE_MAX - 2 * SCRATCH_ALIGN) return NULL;
  char *base = ts_malloc((size_t)want + 2 * SCRATCH_ALIGN);
  if (!base) return NULL;
  COUNT(n_mallocs);
  char *p = (char *)(((uintptr_t)base + 2 * SCRATCH_ALIGN - 1) / SCRATCH_ALIGN * SCRATCH_ALIGN);
  hdr *h = hdr_of(p);
  h->base = base;
  h->cap = want;
  h->magic = SCRATCH_MAGIC;
  return p;
}

void tsrt_scratch_free(void *p) {
  if (!p) return;
  cache *c = &tcache;
  hdr *h = hdr_of(p);
  if (h->magic != SCRATCH_MAGIC) TS_PANIC("tsrt_scratch_free of a pointer tsrt_scratch_alloc did not return");
  COUNT(n_frees);
  if (h->cap > SCRATCH_KEEP_BYTES) {
    release(p);
    return;
  }
  /* make room: the smallest kept blocks go first (the large ones are the
   * ones worth keeping faulted in) */
  while (c->n > 0 && (c->n == SCRATCH_SLOTS || c->bytes + h->cap > SCRATCH_KEEP_BYTES)) {
    int small = 0;
    for (int i = 1; i < c->n; i++)
      if (hdr_of(c->blk[i])->cap < hdr_of(c->blk[small])->cap) small = i;
    if (hdr_of(c->blk[small])->cap > h->cap) { /* p is the smallest: it goes */
      release(p);
      return;
    }
    c->bytes -= hdr_of(c->blk[small])->cap;
    release(c->blk[small]);
    c->blk[small] = c->blk[--c->n];
  }
  if (c->n == 0) register_thread();
  c->blk[c->n++] = p;
  c->bytes += h->cap;
}

void tsrt_scratch_get_stats(tsrt_scratch_stats *out) {
  out->allocs = atomic_load(&n_allocs);
  out->reuses = atomic_load(&n_reuses);
  out->mallocs = atomic_load(&n_mallocs);
  out->frees = atomic_load(&n_frees);
  out->releases = atomic_load(&n_releases);
  out->kept_blocks = tcache.n;
  out->kept_bytes = tcache.bytes;
}

void tsrt_scratch_trim(void) { trim(&tcache); }
