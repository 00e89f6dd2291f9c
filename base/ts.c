/* ts.c — implementation of the shared base: status table, diagnostics, the
 * allocation hook with fault injection, the arena, string buffers, vectors,
 * file reading and the deterministic RNG. */
#include "base/ts.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const status_msgs[] = {
#define TS_X(code, msg) msg,
    TS_STATUS_LIST(TS_X)
#undef TS_X
};

const char *ts_strerror(ts_status st) {
  if ((int)st < 0 || st >= TS_STATUS_COUNT) return "unknown status";
  return status_msgs[st];
}

const char *ts_status_name_of(const ts_status_name *t, size_t n, ts_status st, const char *dflt) {
  for (size_t i = 0; i < n; i++)
    if (t[i].st == st) return t[i].name;
  return dflt;
}

ts_status ts_status_by_name(const ts_status_name *t, size_t n, const char *name, ts_status dflt) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(t[i].name, name) == 0) return t[i].st;
  return dflt;
}

void ts_diag_clear(ts_diag *d) {
  if (!d) return;
  d->code = TS_OK;
  d->msg[0] = '\0';
}

ts_status ts_diag_vset(ts_diag *d, ts_status code, const char *fmt, va_list ap) {
  if (!d || d->code != TS_OK) return code;
  d->code = code;
  vsnprintf(d->msg, sizeof d->msg, fmt, ap);
  return code;
}

ts_status ts_diag_set(ts_diag *d, ts_status code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  ts_diag_vset(d, code, fmt, ap);
  va_end(ap);
  return code;
}

/* ---- allocation hook ---- */
static long fail_countdown; /* 0: never fail */

/* Atomic: the board-side modules allocate from several threads (the
 * tracker's loop, a client's heartbeat thread); exactly one allocation fails. */
void ts_alloc_fail_after(long n) { __atomic_store_n(&fail_countdown, n, __ATOMIC_SEQ_CST); }

static bool should_fail(void) {
  if (__atomic_load_n(&fail_countdown, __ATOMIC_RELAXED) <= 0) return false;
  return __atomic_sub_fetch(&fail_countdown, 1, __ATOMIC_SEQ_CST) == 0;
}

void *ts_malloc(size_t n) {
  if (should_fail()) return NULL;
  return malloc(n ? n : 1);
}

void *ts_calloc(size_t count, size_t size) {
  if (should_fail()) return NULL;
  return calloc(count ? count : 1, size ? size : 1);
}

void *ts_realloc(void *p, size_t n) {
  if (should_fail()) return NULL;
  return realloc(p, n ? n : 1);
}

void ts_free(void *p) { free(p); }

char *ts_strdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *r = ts_malloc(n);
  if (r) memcpy(r, s, n);
  return r;
}

_Noreturn void ts_panic(const char *file, int line, const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "tessel: internal error at %s:%d: ", file, line);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  abort();
}

/* ---- arena ---- */
struct ts_arena_chunk {
  ts_arena_chunk *next;
  size_t cap, used;
  max_align_t data[];
};

#define ARENA_CHUNK 65536

void ts_arena_init(ts_arena *a) {
  a->head = NULL;
  a->used_total = 0;
}

void ts_arena_fini(ts_arena *a) {
  ts_arena_chunk *c = a->head;
  while (c) {
    ts_arena_chunk *n = c->next;
    ts_free(c);
    c = n;
  }
  a->head = NULL;
  a->used_total = 0;
}

ts_arena *ts_arena_new(void) {
  ts_arena *a = ts_malloc(sizeof *a);
  if (a) ts_arena_init(a);
  return a;
}

void ts_arena_free(ts_arena *a) {
  if (!a) return;
  ts_arena_fini(a);
  ts_free(a);
}

void *ts_arena_alloc(ts_arena *a, size_t n) {
  const size_t align = _Alignof(max_align_t);
  n = (n + align - 1) / align * align;
  if (n == 0) n = align;
  ts_arena_chunk *c = a->head;
  if (!c || c->cap - c->used < n) {
    size_t cap = n > ARENA_CHUNK ? n : ARENA_CHUNK;
    c = ts_malloc(sizeof *c + cap);
    if (!c) return NULL;
    c->cap = cap;
    c->used = 0;
    c->next = a->head;
    a->head = c;
  }
  void *p = (char *)c->data + c->used;
  c->used += n;
  a->used_total += n;
  memset(p, 0, n);
  return p;
}

char *ts_arena_strndup(ts_arena *a, const char *s, size_t n) {
  char *r = ts_arena_alloc(a, n + 1);
  if (!r) return NULL;
  memcpy(r, s, n);
  r[n] = '\0';
  return r;
}

char *ts_arena_strdup(ts_arena *a, const char *s) {
  return s ? ts_arena_strndup(a, s, strlen(s)) : NULL;
}

void *ts_arena_memdup(ts_arena *a, const void *p, size_t n) {
  void *r = ts_arena_alloc(a, n);
  if (r && n) memcpy(r, p, n);
  return r;
}

char *ts_arena_printf(ts_arena *a, const char *fmt, ...) {
  va_list ap, ap2;
  va_start(ap, fmt);
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *r = n < 0 ? NULL : ts_arena_alloc(a, (size_t)n + 1);
  if (r) vsnprintf(r, (size_t)n + 1, fmt, ap2);
  va_end(ap2);
  return r;
}

/* ---- strbuf ---- */
void ts_strbuf_init(ts_strbuf *sb) { memset(sb, 0, sizeof *sb); }

void ts_strbuf_fini(ts_strbuf *sb) {
  ts_free(sb->data);
  memset(sb, 0, sizeof *sb);
}

static bool sb_reserve(ts_strbuf *sb, size_t extra) {
  if (sb->oom) return false;
  if (sb->len + extra + 1 <= sb->cap) return true;
  size_t cap = sb->cap ? sb->cap * 2 : 256;
  while (cap < sb->len + extra + 1) cap *= 2;
  char *p = ts_realloc(sb->data, cap);
  if (!p) {
    sb->oom = true;
    return false;
  }
  sb->data = p;
  sb->cap = cap;
  return true;
}

void ts_strbuf_appendn(ts_strbuf *sb, const char *s, size_t n) {
  if (!sb_reserve(sb, n)) return;
  memcpy(sb->data + sb->len, s, n);
  sb->len += n;
  sb->data[sb->len] = '\0';
}

void ts_strbuf_append(ts_strbuf *sb, const char *s) { ts_strbuf_appendn(sb, s, strlen(s)); }

void ts_strbuf_vprintf(ts_strbuf *sb, const char *fmt, va_list ap) {
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  if (n >= 0 && sb_reserve(sb, (size_t)n)) {
    vsnprintf(sb->data + sb->len, (size_t)n + 1, fmt, ap2);
    sb->len += (size_t)n;
  }
  va_end(ap2);
}

void ts_strbuf_printf(ts_strbuf *sb, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  ts_strbuf_vprintf(sb, fmt, ap);
  va_end(ap);
}

char *ts_strbuf_take(ts_strbuf *sb) {
  char *r = sb->data;
  if (!r) r = ts_strdup("");
  memset(sb, 0, sizeof *sb);
  return r;
}

/* ---- vec ---- */
void ts_vec_init(ts_vec *v) { memset(v, 0, sizeof *v); }

void ts_vec_fini(ts_vec *v) {
  ts_free(v->items);
  memset(v, 0, sizeof *v);
}

ts_status ts_vec_push(ts_vec *v, void *item) {
  if (v->len == v->cap) {
    size_t cap = v->cap ? v->cap * 2 : 8;
    void **p = ts_realloc(v->items, cap * sizeof *p);
    if (!p) return TS_ENOMEM;
    v->items = p;
    v->cap = cap;
  }
  v->items[v->len++] = item;
  return TS_OK;
}

/* ---- files ---- */
ts_status ts_read_file(const char *path, char **out, size_t *len, ts_diag *d) {
  *out = NULL;
  FILE *f = fopen(path, "rb");
  if (!f) return ts_diag_set(d, TS_EIO, "%s: cannot open: %s", path, strerror(errno));
  ts_strbuf sb;
  ts_strbuf_init(&sb);
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) ts_strbuf_appendn(&sb, buf, n);
  bool err = ferror(f);
  fclose(f);
  if (err) {
    ts_strbuf_fini(&sb);
    return ts_diag_set(d, TS_EIO, "%s: read error", path);
  }
  if (sb.oom) {
    ts_strbuf_fini(&sb);
    return ts_diag_set(d, TS_ENOMEM, "%s: out of memory reading file", path);
  }
  if (len) *len = sb.len;
  *out = ts_strbuf_take(&sb);
  return *out ? TS_OK : ts_diag_set(d, TS_ENOMEM, "out of memory");
}

/* ---- rng ---- */
void ts_rng_seed(ts_rng *r, uint64_t seed) {
  /* splitmix64 to spread small seeds */
  uint64_t z = seed + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  r->s = z ? z : 0x2545F4914F6CDD1Dull;
}

uint64_t ts_rng_next(ts_rng *r) {
  uint64_t x = r->s;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  r->s = x;
  return x * 0x2545F4914F6CDD1Dull;
}

uint64_t ts_rng_below(ts_rng *r, uint64_t n) { return n ? ts_rng_next(r) % n : 0; }

double ts_rng_unit(ts_rng *r) { return (double)(ts_rng_next(r) >> 11) * (1.0 / 9007199254740992.0); }

bool ts_debug(const char *topic) {
  static char topics[256];
  static int read; /* 0: not yet, 1: read */
  if (!read) { /* racing first calls write the same bytes */
    const char *e = getenv("TESSEL_DEBUG");
    snprintf(topics, sizeof topics, "%s", e ? e : "");
    read = 1;
  }
  size_t n = strlen(topic);
  for (const char *p = topics; *p;) {
    p += strspn(p, ", ");
    size_t m = strcspn(p, ", ");
    if ((m == n && !strncmp(p, topic, n)) || (m == 3 && !strncmp(p, "all", 3)) || (m == 1 && *p == '1')) return true;
    p += m;
  }
  return false;
}

bool ts_grow(void **p, int *cap, int need, size_t elem) {
  if (need <= *cap) return true;
  int nc = *cap ? *cap : 16;
  while (nc < need) {
    if (nc > INT_MAX / 2) return false;
    nc *= 2;
  }
  void *q = ts_realloc(*p, (size_t)nc * elem);
  if (!q) return false;
  *p = q;
  *cap = nc;
  return true;
}
