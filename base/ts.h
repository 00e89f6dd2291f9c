/* ts.h — the shared base every tessel module stands on: one status enum with
 * ts_strerror(), a diagnostic that names what went wrong and where, one
 * allocation hook (so tests can fail the N-th allocation, as Lua and SQLite
 * do), a bump arena that frees a whole IR module in one call (QBE), and a
 * small growable vector. Nothing here knows about tensors. */
#ifndef TESSEL_TS_H
#define TESSEL_TS_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

/* Status codes. X-macro so the message table cannot drift from the enum. */
#define TS_STATUS_LIST(X)                                              \
  X(TS_OK, "success")                                                  \
  X(TS_ENOMEM, "out of memory")                                        \
  X(TS_EINVAL, "invalid argument")                                     \
  X(TS_EPARSE, "parse error")                                          \
  X(TS_ENOTFOUND, "not found")                                         \
  X(TS_ETYPE, "type error")                                            \
  X(TS_ESHAPE, "shape mismatch")                                       \
  X(TS_EBOUNDS, "index out of bounds")                                 \
  X(TS_EIO, "input/output error")                                      \
  X(TS_EUNSUPPORTED, "unsupported")                                    \
  X(TS_ESCHEDULE, "schedule primitive refused")                        \
  X(TS_ERUNTIME, "runtime error")                                      \
  X(TS_EMISMATCH, "result mismatch")                                   \
  X(TS_ETIMEOUT, "timed out")                                          \
  X(TS_EINTERNAL, "internal error")                                    \
  /* the network (rpc, tracker) */                                     \
  X(TS_EPROTO, "malformed message")                                    \
  X(TS_EVERSION, "protocol version mismatch")                          \
  X(TS_EAUTH, "not authenticated (wrong or missing key)")              \
  X(TS_EDENIED, "no session grants this")                              \
  X(TS_ETOOBIG, "over a size limit")                                   \
  X(TS_EREMOTE, "the peer reported an error")                          \
  X(TS_EPENDING, "not yet (retry)")                                    \
  X(TS_ECLOSED, "connection closed")                                   \
  /* the runtime: what became of a measured artifact */                \
  X(TS_ESYSTEM, "system error")                                        \
  X(TS_ELOAD, "artifact failed to load")                               \
  X(TS_ECRASH, "crashed")                                              \
  X(TS_EKERNEL, "kernel failed")

typedef enum {
#define TS_X(code, msg) code,
  TS_STATUS_LIST(TS_X)
#undef TS_X
  TS_STATUS_COUNT
} ts_status;

/* Returns a static message for a status; never NULL. */
const char *ts_strerror(ts_status st);

/* A diagnostic: the status plus a message naming what and where (SQLite's
 * error-on-context). Functions that can fail take a ts_diag * (may be NULL)
 * and fill it on failure; the first error set wins so the root cause is kept. */
#define TS_DIAG_MAX 2048
typedef struct ts_diag {
  ts_status code;
  char msg[TS_DIAG_MAX];
} ts_diag;

void ts_diag_clear(ts_diag *d);

/* A table naming some statuses (the rpc wire codes, measurement outcomes):
 * look a status up by code or by name, dflt when absent. */
typedef struct ts_status_name {
  ts_status st;
  const char *name;
} ts_status_name;
const char *ts_status_name_of(const ts_status_name *t, size_t n, ts_status st, const char *dflt);
ts_status ts_status_by_name(const ts_status_name *t, size_t n, const char *name, ts_status dflt);
/* Sets d (if not NULL and not already set) and returns code, so callers can
 * write `return ts_diag_set(d, TS_EINVAL, "...")`. */
ts_status ts_diag_set(ts_diag *d, ts_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
ts_status ts_diag_vset(ts_diag *d, ts_status code, const char *fmt, va_list ap);

/* ---- allocation hook ----------------------------------------------------
 * Every heap allocation in tessel goes through ts_malloc/ts_realloc/ts_free.
 * ts_alloc_fail_after(n) makes the n-th allocation from now fail (n = 0
 * disables), for fault-injection tests. */
void *ts_malloc(size_t n);
void *ts_calloc(size_t count, size_t size);
void *ts_realloc(void *p, size_t n);
void ts_free(void *p);
char *ts_strdup(const char *s);
void ts_alloc_fail_after(long n);

/* Aborts with a message: only for our own bugs (broken invariants), never for
 * bad input, OOM or the network. */
_Noreturn void ts_panic(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
#define TS_PANIC(...) ts_panic(__FILE__, __LINE__, __VA_ARGS__)
#define TS_ASSERT(c) \
  do { if (!(c)) TS_PANIC("assertion failed: %s", #c); } while (0)

/* ---- arena ---------------------------------------------------------------
 * A bump allocator in chunks. All IR nodes of one module live in one arena and
 * die together with ts_arena_free. Allocation failure panics only if the
 * arena was told so; by default ts_arena_alloc returns NULL, which IR
 * constructors turn into TS_ENOMEM. Memory is zeroed. */
typedef struct ts_arena_chunk ts_arena_chunk;
typedef struct ts_arena {
  ts_arena_chunk *head;
  size_t used_total;
} ts_arena;

void ts_arena_init(ts_arena *a);
void ts_arena_fini(ts_arena *a);
ts_arena *ts_arena_new(void);
void ts_arena_free(ts_arena *a);
void *ts_arena_alloc(ts_arena *a, size_t n);
char *ts_arena_strdup(ts_arena *a, const char *s);
char *ts_arena_strndup(ts_arena *a, const char *s, size_t n);
char *ts_arena_printf(ts_arena *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void *ts_arena_memdup(ts_arena *a, const void *p, size_t n);
#define TS_ANEW(a, T) ((T *)ts_arena_alloc((a), sizeof(T)))
#define TS_ANEWN(a, T, n) ((T *)ts_arena_alloc((a), sizeof(T) * (size_t)(n)))

/* ---- growable byte/string buffer (heap) --------------------------------- */
typedef struct ts_strbuf {
  char *data; /* always NUL-terminated when len > 0 or after append */
  size_t len, cap;
  bool oom;   /* set once an append failed; later appends are no-ops */
} ts_strbuf;

void ts_strbuf_init(ts_strbuf *sb);
void ts_strbuf_fini(ts_strbuf *sb);
void ts_strbuf_append(ts_strbuf *sb, const char *s);
void ts_strbuf_appendn(ts_strbuf *sb, const char *s, size_t n);
void ts_strbuf_printf(ts_strbuf *sb, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void ts_strbuf_vprintf(ts_strbuf *sb, const char *fmt, va_list ap);
/* Detaches the string (caller frees with ts_free); the buffer is reset. */
char *ts_strbuf_take(ts_strbuf *sb);

/* ---- growable pointer vector (heap) ------------------------------------- */
typedef struct ts_vec {
  void **items;
  size_t len, cap;
} ts_vec;

void ts_vec_init(ts_vec *v);
void ts_vec_fini(ts_vec *v);
ts_status ts_vec_push(ts_vec *v, void *item);

/* Grows the heap array *p (elements of elem bytes, capacity *cap) to hold at
 * least need elements, doubling from 16; false (and *p unchanged) when
 * out of memory or the size overflows. */
bool ts_grow(void **p, int *cap, int need, size_t elem);

/* ---- bounded file reading ------------------------------------------------
 * Every file tessel reads has a size cap suited to its kind, so a wrong path
 * (/dev/zero, a huge file) is a clear error within a second, not unbounded
 * memory. A regular file's size is checked before anything is allocated; a
 * file whose size is not known in advance (a pipe, a device) is read up to
 * min(cap, TS_STREAM_CAP). Read and allocation failures are errors naming the
 * file, never taken for the end of the file. ONNX external data is read by
 * the importer from the tensors' declared ranges, not under the model's cap. */
typedef enum {
  TS_FILE_TEXT,  /* any other text input (64 MiB) */
  TS_FILE_DSL,   /* a compute-definition (DSL) file (16 MiB) */
  TS_FILE_TRACE, /* a trace JSON file (64 MiB) */
  TS_FILE_JSON,  /* a small JSON side file (16 MiB) */
  TS_FILE_ONNX,  /* an ONNX model file without its external data (2 GiB - 1: protobuf's limit) */
  TS_FILE_NPY,   /* a .npy tensor (16 GiB) */
  TS_FILE_KERNEL, /* a kernel artifact read whole (a cubin or PTX: 1 GiB) */
  TS_FILE_KIND_COUNT
} ts_file_kind;
#define TS_STREAM_CAP ((size_t)256 << 20)
/* The most bytes a line of the tuning log may hold (a record is a few KiB). */
#define TS_LOG_LINE_CAP ((size_t)16 << 20)
size_t ts_file_cap(ts_file_kind kind);
/* "a trace file", ... for messages. */
const char *ts_file_kind_name(ts_file_kind kind);
/* Reads a whole file of that kind into a heap string (NUL-terminated, caller
 * frees). TS_ETOOBIG over the cap, TS_EIO when it cannot be opened or read,
 * TS_ENOMEM; every message names the file. */
ts_status ts_read_file_as(const char *path, ts_file_kind kind, char **out, size_t *len, ts_diag *d);
/* ts_read_file_as(path, TS_FILE_TEXT, ...). */
ts_status ts_read_file(const char *path, char **out, size_t *len, ts_diag *d);
/* "1.5 GiB", "12 KiB", "17 bytes" into buf; returns buf. */
const char *ts_fmt_bytes(uint64_t n, char *buf, size_t cap);

/* A line reader over a descriptor with a cap on a line's length: a line is
 * returned without its '\n', NUL-terminated in the reader's buffer (valid
 * until the next call). */
typedef struct ts_line_reader {
  int fd;
  const char *path; /* for messages (not owned) */
  size_t max;       /* the longest line accepted, in bytes */
  char *buf;
  size_t cap, start, end;
  bool eof;
  long lineno;      /* the number of the line last returned (1-based) */
} ts_line_reader;
void ts_lines_init(ts_line_reader *r, int fd, const char *path, size_t max);
void ts_lines_fini(ts_line_reader *r); /* frees the buffer; the descriptor stays the caller's */
/* The next line into *line (NULL at the end of the file) and *len;
 * *complete is false for a last line without '\n'. Errors name the file and
 * line: TS_ETOOBIG for a line longer than max (the file is then not what the
 * caller reads: nothing after it is read), TS_EIO, TS_ENOMEM. */
ts_status ts_lines_next(ts_line_reader *r, char **line, size_t *len, bool *complete, ts_diag *d);

/* ---- strict numbers ------------------------------------------------------
 * The whole of s must be the number (no sign for unsigned, no leading or
 * trailing blanks, no "12abc"), within [lo, hi] (doubles: finite too).
 * On failure *why (optional) gets a static phrase ("not an integer",
 * "out of range", "not a finite number"). */
bool ts_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out, const char **why);
bool ts_parse_u64(const char *s, uint64_t *out, const char **why);
bool ts_parse_f64(const char *s, double lo, double hi, double *out, const char **why);

/* Deterministic RNG (xorshift64*), for seeded inputs and sampling. */
typedef struct ts_rng { uint64_t s; } ts_rng;
void ts_rng_seed(ts_rng *r, uint64_t seed);
uint64_t ts_rng_next(ts_rng *r);
/* Uniform in [0, n). */
uint64_t ts_rng_below(ts_rng *r, uint64_t n);
/* Uniform double in [0, 1). */
double ts_rng_unit(ts_rng *r);

/* TESSEL_DEBUG: a comma- or space-separated list of topics (passes, legalize,
 * lower, codegen, cuda, search, layout) or "all"; read once per process.
 * True when `topic` or "all" is listed. The one parser of the variable. */
bool ts_debug(const char *topic);

#endif
