/* ts.c — implementation of the shared base: status table, diagnostics, the
 * allocation hook with fault injection, the arena, string buffers, vectors,
 * file reading and the deterministic RNG. */
#include "base/ts.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
static const struct {
  size_t cap;
  const char *name;
} file_kinds[TS_FILE_KIND_COUNT] = {
    [TS_FILE_TEXT] = {(size_t)64 << 20, "a text file"},
    [TS_FILE_DSL] = {(size_t)16 << 20, "a DSL file"},
    [TS_FILE_TRACE] = {(size_t)64 << 20, "a trace file"},
    [TS_FILE_JSON] = {(size_t)16 << 20, "a JSON side file"},
    [TS_FILE_ONNX] = {((size_t)2 << 30) - 1, "an ONNX model file"},
    [TS_FILE_NPY] = {(size_t)16 << 30, "a .npy file"},
    [TS_FILE_KERNEL] = {(size_t)1 << 30, "a kernel artifact"},
};

size_t ts_file_cap(ts_file_kind kind) { return kind < TS_FILE_KIND_COUNT ? file_kinds[kind].cap : 0; }

const char *ts_file_kind_name(ts_file_kind kind) {
  return kind < TS_FILE_KIND_COUNT ? file_kinds[kind].name : "a file";
}

const char *ts_fmt_bytes(uint64_t n, char *buf, size_t cap) {
  static const char *const units[] = {"KiB", "MiB", "GiB", "TiB"};
  if (n < 1024) {
    snprintf(buf, cap, "%llu bytes", (unsigned long long)n);
    return buf;
  }
  double v = (double)n / 1024;
  int u = 0;
  while (v >= 1024 && u < 3) {
    v /= 1024;
    u++;
  }
  snprintf(buf, cap, "%.4g %s", v, units[u]);
  return buf;
}

/* read(2) until n bytes or the end; -1 (errno set) on an error. */
static ssize_t read_some(int fd, char *p, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t k = read(fd, p + got, n - got);
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) return -1;
    if (k == 0) break;
    got += (size_t)k;
  }
  return (ssize_t)got;
}

ts_status ts_read_file_as(const char *path, ts_file_kind kind, char **out, size_t *len, ts_diag *d) {
  *out = NULL;
  if (len) *len = 0;
  size_t cap = ts_file_cap(kind);
  const char *what = ts_file_kind_name(kind);
  char b1[32], b2[32];
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ts_diag_set(d, TS_EIO, "%s: cannot open: %s", path, strerror(errno));
  struct stat sb;
  if (fstat(fd, &sb) != 0) {
    int e = errno;
    close(fd);
    return ts_diag_set(d, TS_EIO, "%s: cannot read: %s", path, strerror(e));
  }
  if (S_ISDIR(sb.st_mode)) {
    close(fd);
    return ts_diag_set(d, TS_EIO, "%s: is a directory, not %s", path, what);
  }
  bool regular = S_ISREG(sb.st_mode);
  if (!regular && cap > TS_STREAM_CAP) cap = TS_STREAM_CAP;
  if (regular && (uint64_t)sb.st_size > cap) {
    close(fd);
    return ts_diag_set(d, TS_ETOOBIG, "%s: %s is over the %s limit for %s", path,
                       ts_fmt_bytes((uint64_t)sb.st_size, b1, sizeof b1), ts_fmt_bytes(cap, b2, sizeof b2), what);
  }
  /* A regular file is read into one allocation of its size (one more byte
   * shows it grew); anything else grows its buffer as data arrives. */
  size_t bufcap = regular ? (size_t)sb.st_size + 2 : 65536;
  size_t n = 0;
  char *buf = ts_malloc(bufcap);
  ts_status st = TS_OK;
  for (;;) {
    if (!buf) {
      st = ts_diag_set(d, TS_ENOMEM, "%s: out of memory reading %s (%s)", path, what, ts_fmt_bytes(bufcap, b1, sizeof b1));
      break;
    }
    if (n == bufcap - 1) {
      if (n > cap) {
        st = ts_diag_set(d, TS_ETOOBIG, "%s: over the %s limit for %s%s", path, ts_fmt_bytes(cap, b2, sizeof b2),
                         what, regular ? "" : " read from a pipe or device");
        break;
      }
      size_t nc = bufcap * 2 > cap + 2 ? cap + 2 : bufcap * 2;
      char *p = ts_realloc(buf, nc);
      if (!p) {
        ts_free(buf);
        buf = NULL;
        bufcap = nc;
        continue;
      }
      buf = p;
      bufcap = nc;
    }
    ssize_t k = read_some(fd, buf + n, bufcap - 1 - n);
    if (k < 0) {
      st = ts_diag_set(d, TS_EIO, "%s: read error after %zu bytes: %s", path, n, strerror(errno));
      break;
    }
    n += (size_t)k;
    if (n > cap) {
      st = ts_diag_set(d, TS_ETOOBIG, "%s: over the %s limit for %s%s", path, ts_fmt_bytes(cap, b2, sizeof b2), what,
                       regular ? "" : " read from a pipe or device");
      break;
    }
    if (n < bufcap - 1) break; /* the end of the file */
  }
  close(fd);
  if (st) {
    ts_free(buf);
    return st;
  }
  buf[n] = '\0';
  if (len) *len = n;
  *out = buf;
  return TS_OK;
}

ts_status ts_read_file(const char *path, char **out, size_t *len, ts_diag *d) {
  return ts_read_file_as(path, TS_FILE_TEXT, out, len, d);
}

void ts_lines_init(ts_line_reader *r, int fd, const char *path, size_t max) {
  memset(r, 0, sizeof *r);
  r->fd = fd;
  r->path = path;
  r->max = max;
}

void ts_lines_fini(ts_line_reader *r) {
  ts_free(r->buf);
  r->buf = NULL;
  r->cap = r->start = r->end = 0;
}

ts_status ts_lines_next(ts_line_reader *r, char **line, size_t *len, bool *complete, ts_diag *d) {
  *line = NULL;
  *len = 0;
  *complete = false;
  size_t scanned = r->start; /* bytes before this hold no '\n' */
  for (;;) {
    char *nl = r->end > scanned ? memchr(r->buf + scanned, '\n', r->end - scanned) : NULL;
    if (nl || (r->eof && r->end > r->start)) {
      size_t n = nl ? (size_t)(nl - (r->buf + r->start)) : r->end - r->start;
      if (n > r->max) break;
      *line = r->buf + r->start;
      *len = n;
      *complete = nl != NULL;
      r->buf[r->start + n] = '\0'; /* the '\n', or the spare byte kept after end */
      r->start += n + (nl ? 1 : 0);
      r->lineno++;
      return TS_OK;
    }
    if (r->eof) return TS_OK;
    if (r->end - r->start > r->max) break;
    if (r->start > 0) { /* move the partial line to the front */
      memmove(r->buf, r->buf + r->start, r->end - r->start);
      r->end -= r->start;
      r->start = 0;
    }
    scanned = r->end;
    if (r->end + 1 >= r->cap) {
      size_t want = r->cap ? r->cap * 2 : 65536;
      if (want > r->max + 2) want = r->max + 2;
      if (want <= r->cap) want = r->cap + 1;
      char *p = ts_realloc(r->buf, want);
      if (!p)
        return ts_diag_set(d, TS_ENOMEM, "%s:%ld: out of memory reading a line (%zu bytes so far)", r->path,
                           r->lineno + 1, r->end);
      r->buf = p;
      r->cap = want;
    }
    ssize_t k;
    do k = read(r->fd, r->buf + r->end, r->cap - 1 - r->end);
    while (k < 0 && errno == EINTR);
    if (k < 0) return ts_diag_set(d, TS_EIO, "%s:%ld: read error: %s", r->path, r->lineno + 1, strerror(errno));
    if (k == 0) r->eof = true;
    r->end += (size_t)k;
  }
  char b[32];
  return ts_diag_set(d, TS_ETOOBIG, "%s:%ld: a line longer than %s", r->path, r->lineno + 1,
                     ts_fmt_bytes(r->max, b, sizeof b));
}

/* ---- strict numbers ---- */
static bool num_start_ok(const char *s, bool sign) {
  if (!s || !*s) return false;
  if (*s == '-' || *s == '+') return sign && s[1] >= '0' && s[1] <= '9';
  return (*s >= '0' && *s <= '9') || *s == '.';
}

bool ts_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out, const char **why) {
  const char *w = "not an integer";
  if (num_start_ok(s, true) && *s != '.') {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*end == '\0') {
      if (errno == ERANGE || v < lo || v > hi) w = "out of range";
      else {
        *out = v;
        return true;
      }
    }
  }
  if (why) *why = w;
  return false;
}

bool ts_parse_u64(const char *s, uint64_t *out, const char **why) {
  const char *w = "not a non-negative integer";
  if (num_start_ok(s, false) && *s != '.') {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (*end == '\0') {
      if (errno == ERANGE) w = "out of range";
      else {
        *out = v;
        return true;
      }
    }
  }
  if (why) *why = w;
  return false;
}

bool ts_parse_f64(const char *s, double lo, double hi, double *out, const char **why) {
  const char *w = "not a number";
  if (num_start_ok(s, true)) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (*end == '\0') {
      if (!isfinite(v) || errno == ERANGE) w = "not a finite number";
      else if (v < lo || v > hi) w = "out of range";
      else {
        *out = v;
        return true;
      }
    }
  }
  if (why) *why = w;
  return false;
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
