/* measure.c — artifact loading, seeded inputs, and measurement: in process
 * (used inside an already isolated child, e.g. rpc_server's) and fork-isolated
 * (the child loads the artifact, times it and sends the result and outputs
 * back through a pipe; the parent enforces the timeout and turns a signal
 * into an error naming it). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "runtime.h"
#include "cuda_rt.h"
#include "fork_pipe.h"

static const struct {
  const char *name;
  int bytes;
} dtypes[TSRT_DTYPE_COUNT] = {
    [TSRT_BOOL] = {"bool", 1}, [TSRT_I8] = {"i8", 1},   [TSRT_I16] = {"i16", 2},
    [TSRT_I32] = {"i32", 4},   [TSRT_I64] = {"i64", 8}, [TSRT_U8] = {"u8", 1},
    [TSRT_U32] = {"u32", 4},   [TSRT_F16] = {"f16", 2}, [TSRT_BF16] = {"bf16", 2},
    [TSRT_F32] = {"f32", 4},   [TSRT_F64] = {"f64", 8}, [TSRT_HANDLE] = {"handle", 8},
};

int tsrt_dtype_bytes(int code) { return code >= 0 && code < TSRT_DTYPE_COUNT ? dtypes[code].bytes : 0; }
const char *tsrt_dtype_name(int code) {
  return code >= 0 && code < TSRT_DTYPE_COUNT ? dtypes[code].name : "?";
}

/* The outcomes of a measurement and their names (also on the wire: a
 * result's "status" field, docs/RPC.md). */
static const ts_status_name outcomes[] = {
    {TS_OK, "ok"},          {TS_ELOAD, "load error"},     {TS_ECRASH, "crashed"},
    {TS_ETIMEOUT, "timed out"}, {TS_EKERNEL, "kernel error"}, {TS_ESYSTEM, "system error"},
    {TS_ENOMEM, "out of memory"},
};
#define NOUTCOMES (sizeof outcomes / sizeof *outcomes)

const char *tsrt_status_name(ts_status st) { return ts_status_name_of(outcomes, NOUTCOMES, st, "?"); }
ts_status tsrt_status_from_name(const char *name) { return ts_status_by_name(outcomes, NOUTCOMES, name, TS_ESYSTEM); }

ts_status tsrt_collect_outputs(tsrt_measure_result *res, void *const *bufs, const size_t *bytes, int ninputs,
                               int nparams, bool want) {
  res->noutputs = nparams - ninputs;
  size_t total = 0;
  for (int i = ninputs; i < nparams; i++) {
    if (i - ninputs < (int)(sizeof res->checksums / sizeof res->checksums[0]))
      res->checksums[i - ninputs] = tsrt_checksum(bufs[i], bytes[i]);
    total += bytes[i];
  }
  if (!want || !total) return TS_OK;
  res->outputs = ts_malloc(total);
  if (!res->outputs) {
    snprintf(res->error, sizeof res->error, "out of memory for %zu bytes of outputs", total);
    return TS_ENOMEM;
  }
  size_t off = 0;
  for (int i = ninputs; i < nparams; i++) {
    memcpy((char *)res->outputs + off, bufs[i], bytes[i]);
    off += bytes[i];
  }
  res->outputs_bytes = total;
  return TS_OK;
}

/* ---- inputs ---- */
static uint64_t mix(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* Exact small values only, so every dtype represents them without rounding. */
static uint16_t f32_to_f16_exact(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  int exp = (int)((x >> 23) & 0xff) - 127;
  uint32_t mant = x & 0x7fffffu;
  if (f == 0.0f) return (uint16_t)sign;
  if (exp < -14) { /* subnormal in f16 */
    uint32_t m = (mant | 0x800000u) >> (uint32_t)(-14 - exp + 13);
    return (uint16_t)(sign | m);
  }
  return (uint16_t)(sign | (uint32_t)(exp + 15) << 10 | (mant >> 13));
}

void tsrt_fill_random(int dtype, void *data, int64_t n, uint64_t seed) {
  uint64_t s = mix(seed);
  for (int64_t i = 0; i < n; i++) {
    uint64_t r = mix(s + (uint64_t)i);
    switch (dtype) {
    case TSRT_F32: ((float *)data)[i] = (float)((double)(int64_t)(r % 16777216) / 8388608.0 - 1.0); break;
    case TSRT_F64: ((double *)data)[i] = (double)(int64_t)(r % 16777216) / 8388608.0 - 1.0; break;
    case TSRT_F16: ((uint16_t *)data)[i] = f32_to_f16_exact((float)((int)(r % 2048) - 1024) / 1024.0f); break;
    case TSRT_BF16: {
      float f = (float)((int)(r % 256) - 128) / 128.0f;
      uint32_t x;
      memcpy(&x, &f, 4);
      ((uint16_t *)data)[i] = (uint16_t)(x >> 16);
      break;
    }
    case TSRT_I8: ((int8_t *)data)[i] = (int8_t)((int)(r % 9) - 4); break;
    case TSRT_I16: ((int16_t *)data)[i] = (int16_t)((int)(r % 9) - 4); break;
    case TSRT_I32: ((int32_t *)data)[i] = (int32_t)((int)(r % 9) - 4); break;
    case TSRT_I64: ((int64_t *)data)[i] = (int64_t)(r % 9) - 4; break;
    case TSRT_U8: ((uint8_t *)data)[i] = (uint8_t)(r % 9); break;
    case TSRT_U32: ((uint32_t *)data)[i] = (uint32_t)(r % 9); break;
    case TSRT_BOOL: ((uint8_t *)data)[i] = (uint8_t)(r & 1); break;
    default: break;
    }
  }
}

uint64_t tsrt_checksum(const void *data, size_t n) {
  const unsigned char *p = data;
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

/* ---- loading ---- */
size_t tsrt_param_bytes(const tsrt_param_meta *p) {
  size_t n = (size_t)tsrt_dtype_bytes(p->dtype);
  for (int i = 0; i < p->ndim && i < TSRT_MAX_DIMS; i++) {
    if (p->shape[i] < 0) return 0; /* symbolic: the size is known only when bound */
    if (p->shape[i] && n > (SIZE_MAX >> 1) / (size_t)p->shape[i]) return SIZE_MAX; /* overflows */
    n *= (size_t)p->shape[i];
  }
  return n;
}

ts_status tsrt_module_load(const char *path, tsrt_module *m, ts_diag *d) {
  memset(m, 0, sizeof *m);
  m->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!m->handle) {
    return ts_diag_set(d, TS_ELOAD, "cannot load %s: %s", path, dlerror());
  }
  m->meta = dlsym(m->handle, TSRT_META_SYMBOL);
  void *entry = dlsym(m->handle, TSRT_ENTRY_SYMBOL);
  if (!m->meta || !entry) {
    tsrt_module_unload(m);
    return ts_diag_set(d, TS_ELOAD, "%s is not a tessel kernel (no %s/%s symbol)", path, TSRT_META_SYMBOL,
             TSRT_ENTRY_SYMBOL);
  }
  if (m->meta->abi_version != TSRT_ABI_VERSION || m->meta->nparams < 0 || m->meta->nparams > 64 ||
      m->meta->ninputs < 0 || m->meta->ninputs > m->meta->nparams || m->meta->nsyms < 0 ||
      m->meta->nsyms > 32 || (m->meta->nsyms > 0 && !m->meta->syms)) {
    tsrt_module_unload(m);
    return ts_diag_set(d, TS_ELOAD, "%s: unsupported kernel ABI (version %d, %d params)", path,
             m->meta->abi_version, m->meta->nparams);
  }
  for (int i = 0; i < m->meta->nparams; i++) {
    const tsrt_param_meta *p = &m->meta->params[i];
    if (tsrt_dtype_bytes(p->dtype) == 0 || p->ndim < 0 || p->ndim > TSRT_MAX_DIMS) {
      tsrt_module_unload(m);
      return ts_diag_set(d, TS_ELOAD, "%s: parameter %d has a bad dtype or rank", path, i);
    }
  }
  memcpy(&m->entry, &entry, sizeof entry);
  return TS_OK;
}

void tsrt_module_unload(tsrt_module *m) {
  if (m->handle) dlclose(m->handle);
  memset(m, 0, sizeof *m);
}

/* ---- measurement ---- */
static void sleep_ms(double ms) {
  if (ms <= 0) return;
  struct timespec ts = {(time_t)(ms / 1000), (long)((ms - (double)(time_t)(ms / 1000) * 1000) * 1e6)};
  while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
  }
}

static void flush_cache(void) {
  static volatile char *buf;
  const size_t n = 64u << 20; /* larger than any LLC we target */
  if (!buf) buf = ts_malloc(n);
  if (!buf) return;
  for (size_t i = 0; i < n; i += 64) buf[i] = (char)(buf[i] + 1);
}

/* The clock of a measurement: wall time, or the process's CPU time
 * (tsrt_measure_opts.cpu_time). */
static double clock_of(const tsrt_measure_opts *o) {
  if (!o->cpu_time) return tsrt_now();
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void tsrt_measure_inprocess(const tsrt_module *m, const tsrt_measure_opts *o, tsrt_measure_result *res) {
  memset(res, 0, sizeof *res);
  const tsrt_kernel_meta *meta = m->meta;
  void *args[64] = {0};
  size_t bytes[64] = {0};
  if (meta->nsyms > 0) {
    res->status = TS_ELOAD;
    snprintf(res->error, sizeof res->error,
             "kernel %s takes %d symbolic size(s) (%s ...); measure a build with the sizes bound",
             meta->name ? meta->name : "?", meta->nsyms, meta->syms && meta->syms[0] ? meta->syms[0] : "?");
    return;
  }
  for (int i = 0; i < meta->nparams; i++) {
    for (int j = 0; j < meta->params[i].ndim && j < TSRT_MAX_DIMS; j++)
      if (meta->params[i].shape[j] < 0) { /* an extent the artifact cannot size: never guess */
        res->status = TS_ELOAD;
        snprintf(res->error, sizeof res->error, "parameter %s: dim %d has no constant size in the kernel's metadata",
                 meta->params[i].name, j);
        goto out;
      }
    bytes[i] = tsrt_param_bytes(&meta->params[i]);
    if (bytes[i] == SIZE_MAX) {
      res->status = TS_ESYSTEM;
      snprintf(res->error, sizeof res->error, "parameter %s: its byte count overflows", meta->params[i].name);
      goto out;
    }
    size_t alloc = (bytes[i] + 63) / 64 * 64;
    args[i] = aligned_alloc(64, alloc ? alloc : 64);
    if (!args[i]) {
      res->status = TS_ESYSTEM;
      snprintf(res->error, sizeof res->error, "cannot allocate %zu bytes for parameter %s", bytes[i],
               meta->params[i].name);
      goto out;
    }
    if (i < meta->ninputs)
      tsrt_fill_random(meta->params[i].dtype, args[i], (int64_t)(bytes[i] / (size_t)tsrt_dtype_bytes(meta->params[i].dtype)),
                       o->seed + (uint64_t)i);
    else
      memset(args[i], 0, alloc);
  }
  double tw0 = clock_of(o);
  int32_t rc = m->entry(args); /* warm-up, and the run whose outputs we keep */
  double warm_s = clock_of(o) - tw0;
  if (rc != 0) {
    res->status = TS_EKERNEL;
    snprintf(res->error, sizeof res->error, "kernel %s returned %d", meta->name, rc);
    goto out;
  }
  int number = o->number > 0 ? o->number : 1;
  int repeat = o->repeat > 0 ? o->repeat : 3;
  if (repeat > TSRT_MAX_REPEAT) repeat = TSRT_MAX_REPEAT;
  int r0 = 0; /* repeats already timed by the calibration */
  if (o->slow_stop_s > 0 && warm_s > o->slow_stop_s) {
    /* hopeless (slower than the caller's cut-off): the warm-up is the one repeat */
    res->number = 1;
    res->secs[0] = warm_s;
    res->repeat = 1;
    repeat = 0;
  } else if (o->min_repeat_ms > 0) {
    /* The warm-up's time seeds the calibration (it includes one-time costs
     * such as the thread pool's start, so it can only under-estimate the
     * number), and the last calibration try, which lasted at least
     * min_repeat_ms with the final number, is the first repeat (TVM's time
     * evaluator retimes within a repeat the same way); with cache_flush
     * every repeat is flushed first, so there it is not reused. */
    if (o->number <= 0 && warm_s * 1e3 < o->min_repeat_ms && warm_s > 0) {
      double want = o->min_repeat_ms / (warm_s * 1e3);
      number = want > (1 << 24) ? (1 << 24) : (int)want;
      if (number < 1) number = 1;
    }
    {
      for (int tries = 0; tries < 20; tries++) {
        double t0 = clock_of(o);
        for (int k = 0; k < number; k++) m->entry(args);
        double secs = clock_of(o) - t0;
        double ms = secs * 1e3;
        if (ms >= o->min_repeat_ms || number >= (1 << 24)) {
          if (!o->cache_flush) {
            res->secs[0] = secs / number;
            res->repeat = r0 = 1;
          }
          break;
        }
        double grow = ms > 0 ? o->min_repeat_ms / ms * 1.2 : 10;
        if (grow < 2) grow = 2;
        if (grow > 100) grow = 100;
        number = (int)(number * grow);
      }
    }
  }
  if (repeat > 0) res->number = number;
  for (int r = r0; r < repeat; r++) {
    if (o->cache_flush) flush_cache();
    double t0 = clock_of(o);
    for (int k = 0; k < number; k++) m->entry(args);
    res->secs[r] = (clock_of(o) - t0) / number;
    res->repeat = r + 1;
    sleep_ms(o->cooldown_ms);
  }
  res->status = tsrt_collect_outputs(res, args, bytes, meta->ninputs, meta->nparams, o->want_outputs);
out:
  for (int i = 0; i < meta->nparams; i++) ts_free(args[i]);
}

void tsrt_measure_forked(const char *path, const tsrt_measure_opts *o, tsrt_measure_result *res) {
  memset(res, 0, sizeof *res);
  if (tsrt_is_cuda_artifact(path)) { /* kernel kind "cuda": a cubin/PTX for the GPU (cuda_rt.c) */
    size_t n = 0;
    ts_diag rd = {0};
    void *img = tsrt_read_file(path, &n, &rd);
    if (!img) {
      res->status = TS_ELOAD;
      snprintf(res->error, sizeof res->error, "%.500s", rd.msg);
      return;
    }
    tsrt_cuda_measure_forked(img, n, o, res);
    ts_free(img);
    return;
  }
  double timeout = o->timeout_s > 0 ? o->timeout_s : 10;
  int fds[2];
  pid_t pid = tsrt_fork_measure(fds, res);
  if (pid < 0) return;
  if (pid == 0) {
    tsrt_child_threads(o->num_threads);
    setenv("TESSEL_PIN_CALLER", "1", 1); /* the pool pins task 0 (this thread) */
    tsrt_measure_result r;
    tsrt_module m;
    memset(&r, 0, sizeof r);
    ts_diag d = {0};
    if (tsrt_module_load(path, &m, &d) != TS_OK) {
      r.status = d.code;
      snprintf(r.error, sizeof r.error, "%.500s", d.msg);
    } else {
      tsrt_measure_inprocess(&m, o, &r);
    }
    tsrt_child_send_result(fds[1], &r);
  }
  int rd = tsrt_read_result(fds[0], res, tsrt_now() + timeout);
  if (rd == -2) kill(pid, SIGKILL);
  close(fds[0]);
  /* the child _exits right after its write (or died: EOF); a child that
   * outlives that by 5 s is killed, so the server never waits on it */
  int killed = 0;
  int wst = tsrt_reap_by(pid, tsrt_now() + 5, &killed);
  if (killed && rd == 0) wst = 0; /* the result came; only its exit hung */
  if (rd == -2)
    tsrt_result_fail(res, TS_ETIMEOUT, "timed out after %.3g s (child killed)", timeout);
  else if (rd != 0 && killed)
    tsrt_result_fail(res, TS_ESYSTEM,
                     "measurement child closed its pipe without a result and did not exit within 5 s (killed)");
  else if (WIFSIGNALED(wst))
    tsrt_result_fail(res, TS_ECRASH, "kernel crashed: signal %d (%s)", WTERMSIG(wst), strsignal(WTERMSIG(wst)));
  else if (rd != 0)
    tsrt_result_fail(res, TS_ESYSTEM, "measurement child exited (status %d) without a result",
                     WIFEXITED(wst) ? WEXITSTATUS(wst) : -1);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

double tsrt_result_median(const tsrt_measure_result *r) {
  if (r->repeat <= 0) return 0;
  double v[TSRT_MAX_REPEAT];
  memcpy(v, r->secs, sizeof(double) * (size_t)r->repeat);
  qsort(v, (size_t)r->repeat, sizeof v[0], cmp_double);
  return r->repeat % 2 ? v[r->repeat / 2] : 0.5 * (v[r->repeat / 2 - 1] + v[r->repeat / 2]);
}

void tsrt_result_fini(tsrt_measure_result *r) {
  ts_free(r->outputs);
  r->outputs = NULL;
  r->outputs_bytes = 0;
}
