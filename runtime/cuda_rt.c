/* runtime/cuda_rt.c — the CUDA driver API through dlopen at run time
 * (see cuda_rt.h). The few driver types and entry points used are declared
 * here (the runtime builds on boards without the toolkit); the names with a
 * _v2 suffix are the ones cuda.h maps the plain names to. */
#include "cuda_rt.h"

#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cublas.h"
#include "fork_pipe.h"

typedef int CUresult; /* 0 = CUDA_SUCCESS */
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUevent_st *CUevent;
typedef struct CUstream_st *CUstream;
typedef unsigned long long CUdeviceptr;

enum {
  ATTR_MAX_THREADS_PER_BLOCK = 1,
  ATTR_SHARED_PER_BLOCK = 8,
  ATTR_REGS_PER_BLOCK = 12,
  ATTR_SM_COUNT = 16,
  ATTR_L2_BYTES = 38,
  ATTR_CC_MAJOR = 75,
  ATTR_CC_MINOR = 76,
  ATTR_SHARED_OPTIN = 97,
};

/* The driver entry points: X(field, parameters, symbol, the symbol an older
 * driver has instead, or NULL). */
#define CU_FNS(X)                                                                                                      \
  X(cuInit, (unsigned), "cuInit", NULL)                                                                                \
  X(cuDriverGetVersion, (int *), "cuDriverGetVersion", NULL)                                                           \
  X(cuDeviceGetCount, (int *), "cuDeviceGetCount", NULL)                                                               \
  X(cuDeviceGet, (CUdevice *, int), "cuDeviceGet", NULL)                                                               \
  X(cuDeviceGetName, (char *, int, CUdevice), "cuDeviceGetName", NULL)                                                 \
  X(cuDeviceGetAttribute, (int *, int, CUdevice), "cuDeviceGetAttribute", NULL)                                        \
  X(cuDeviceTotalMem, (size_t *, CUdevice), "cuDeviceTotalMem_v2", "cuDeviceTotalMem")                                 \
  X(cuDevicePrimaryCtxRetain, (CUcontext *, CUdevice), "cuDevicePrimaryCtxRetain", NULL)                               \
  X(cuDevicePrimaryCtxRelease, (CUdevice), "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease")                \
  X(cuCtxSetCurrent, (CUcontext), "cuCtxSetCurrent", NULL)                                                             \
  X(cuCtxSynchronize, (void), "cuCtxSynchronize", NULL)                                                                \
  X(cuModuleLoadData, (CUmodule *, const void *), "cuModuleLoadData", NULL)                                            \
  X(cuModuleUnload, (CUmodule), "cuModuleUnload", NULL)                                                                \
  X(cuModuleGetFunction, (CUfunction *, CUmodule, const char *), "cuModuleGetFunction", NULL)                          \
  X(cuModuleGetGlobal, (CUdeviceptr *, size_t *, CUmodule, const char *), "cuModuleGetGlobal_v2", "cuModuleGetGlobal") \
  X(cuMemAlloc, (CUdeviceptr *, size_t), "cuMemAlloc_v2", "cuMemAlloc")                                                \
  X(cuMemFree, (CUdeviceptr), "cuMemFree_v2", "cuMemFree")                                                             \
  X(cuMemcpyHtoD, (CUdeviceptr, const void *, size_t), "cuMemcpyHtoD_v2", "cuMemcpyHtoD")                              \
  X(cuMemcpyDtoH, (void *, CUdeviceptr, size_t), "cuMemcpyDtoH_v2", "cuMemcpyDtoH")                                    \
  X(cuMemsetD8, (CUdeviceptr, unsigned char, size_t), "cuMemsetD8_v2", "cuMemsetD8")                                   \
  X(cuLaunchKernel, (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,                 \
                    CUstream, void **, void **), "cuLaunchKernel", NULL)                                               \
  X(cuEventCreate, (CUevent *, unsigned), "cuEventCreate", NULL)                                                       \
  X(cuEventDestroy, (CUevent), "cuEventDestroy_v2", "cuEventDestroy")                                                  \
  X(cuEventRecord, (CUevent, CUstream), "cuEventRecord", NULL)                                                         \
  X(cuEventSynchronize, (CUevent), "cuEventSynchronize", NULL)                                                         \
  X(cuEventElapsedTime, (float *, CUevent, CUevent), "cuEventElapsedTime_v2", "cuEventElapsedTime")                    \
  X(cuGetErrorString, (CUresult, const char **), "cuGetErrorString", NULL)

typedef struct cu_driver {
  void *lib;
  char err[256];
#define CU_FIELD(field, params, a, b) CUresult(*field) params;
  CU_FNS(CU_FIELD)
#undef CU_FIELD
  int loaded; /* 1 ok, -1 failed */
} cu_driver;
static cu_driver drv;

static void *sym(const char *a, const char *b) {
  void *p = dlsym(drv.lib, a);
  if (!p && b) p = dlsym(drv.lib, b);
  return p;
}

/* Opens libcuda.so.1 once (TESSEL_LIBCUDA names another path for tests). */
static int drv_open(char *err, size_t errn) {
  if (drv.loaded == 1) return 0;
  if (drv.loaded == -1) {
    snprintf(err, errn, "%s", drv.err);
    return -1;
  }
  const char *path = getenv("TESSEL_LIBCUDA");
  if (!path || !*path) path = "libcuda.so.1";
  drv.lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!drv.lib) {
    const char *e = dlerror();
    snprintf(drv.err, sizeof drv.err, "no GPU: %s not found (%s)", path, e ? e : "dlopen failed");
    drv.loaded = -1;
    snprintf(err, errn, "%s", drv.err);
    return -1;
  }
  static const struct {
    size_t off;
    const char *a, *b;
  } fns[] = {
#define CU_SYM(field, params, a, b) {offsetof(cu_driver, field), a, b},
      CU_FNS(CU_SYM)
#undef CU_SYM
  };
  for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
    void *p = sym(fns[i].a, fns[i].b);
    if (!p) {
      snprintf(drv.err, sizeof drv.err, "no GPU: %s lacks %s (driver too old?)", path, fns[i].a);
      drv.loaded = -1;
      snprintf(err, errn, "%s", drv.err);
      return -1;
    }
    memcpy((char *)&drv + fns[i].off, &p, sizeof p);
  }
  drv.loaded = 1;
  return 0;
}

static const char *cu_str(CUresult r) {
  const char *s = NULL;
  if (drv.cuGetErrorString && drv.cuGetErrorString(r, &s) == 0 && s) return s;
  return "unknown CUDA error";
}

static int device_index(void) {
  const char *e = getenv("TESSEL_CUDA_DEVICE");
  return e && *e ? atoi(e) : 0;
}

ts_status tsrt_cuda_probe(tsrt_cuda_info *info, ts_diag *d) {
  memset(info, 0, sizeof *info);
  char why[256];
  if (drv_open(why, sizeof why) != 0) return ts_diag_set(d, TS_EUNSUPPORTED, "%s", why);
  CUresult r = drv.cuInit(0);
  if (r != 0) {
    return ts_diag_set(d, TS_EUNSUPPORTED, "no GPU: cuInit failed: %s (%d)", cu_str(r), r);
  }
  int n = 0;
  if (drv.cuDeviceGetCount(&n) != 0 || n <= 0) {
    return ts_diag_set(d, TS_EUNSUPPORTED, "no GPU: no CUDA device");
  }
  int idx = device_index();
  if (idx < 0 || idx >= n) {
    return ts_diag_set(d, TS_EUNSUPPORTED, "no GPU: TESSEL_CUDA_DEVICE=%d but only %d device(s)", idx, n);
  }
  CUdevice dev;
  if ((r = drv.cuDeviceGet(&dev, idx)) != 0) {
    return ts_diag_set(d, TS_EUNSUPPORTED, "no GPU: cuDeviceGet(%d): %s", idx, cu_str(r));
  }
  info->device = idx;
  drv.cuDeviceGetName(info->name, (int)sizeof info->name, dev);
  drv.cuDeviceGetAttribute(&info->cc_major, ATTR_CC_MAJOR, dev);
  drv.cuDeviceGetAttribute(&info->cc_minor, ATTR_CC_MINOR, dev);
  drv.cuDeviceGetAttribute(&info->sm_count, ATTR_SM_COUNT, dev);
  drv.cuDeviceGetAttribute(&info->max_threads_per_block, ATTR_MAX_THREADS_PER_BLOCK, dev);
  drv.cuDeviceGetAttribute(&info->shared_per_block, ATTR_SHARED_PER_BLOCK, dev);
  drv.cuDeviceGetAttribute(&info->shared_per_block_optin, ATTR_SHARED_OPTIN, dev);
  drv.cuDeviceGetAttribute(&info->regs_per_block, ATTR_REGS_PER_BLOCK, dev);
  drv.cuDeviceGetAttribute(&info->l2_bytes, ATTR_L2_BYTES, dev);
  drv.cuDriverGetVersion(&info->driver_version);
  drv.cuDeviceTotalMem(&info->total_mem, dev);
  return TS_OK;
}

static void describe_here(char *buf, size_t n, int *has) {
  tsrt_cuda_info i;
  ts_diag d = {0};
  *has = 0;
  if (tsrt_cuda_probe(&i, &d) != TS_OK) {
    snprintf(buf, n, "%.500s", d.msg);
    return;
  }
  *has = 1;
  snprintf(buf, n, "gpu=%s arch=sm_%d%d sms=%d max_threads=%d shared_per_block=%d l2=%d mem_mb=%zu driver=%d",
           i.name, i.cc_major, i.cc_minor, i.sm_count, i.max_threads_per_block, i.shared_per_block_optin,
           i.l2_bytes, i.total_mem >> 20, i.driver_version);
}

int tsrt_cuda_describe(char *buf, size_t n) {
  static char cached[512];
  static int cached_has = -1;
  if (cached_has < 0) {
    int fds[2];
    struct {
      int has;
      char text[512];
    } msg;
    memset(&msg, 0, sizeof msg);
    snprintf(msg.text, sizeof msg.text, "no GPU: probe failed");
    char err[128];
    ts_status fst;
    pid_t pid = tsrt_fork_pipe(fds, &fst, err, sizeof err);
    if (pid < 0) {
      snprintf(msg.text, sizeof msg.text, "no GPU: probe failed (%s)", err);
    } else if (pid == 0) {
      close(fds[0]);
      describe_here(msg.text, sizeof msg.text, &msg.has);
      tsrt_write_all(fds[1], &msg, sizeof msg);
      _exit(0);
    } else {
      close(fds[1]);
      if (tsrt_read_all(fds[0], &msg, sizeof msg, tsrt_now() + 30) != 0) {
        kill(pid, SIGKILL);
        memset(&msg, 0, sizeof msg);
        snprintf(msg.text, sizeof msg.text, "no GPU: the probe did not answer");
      }
      tsrt_reap(pid);
      close(fds[0]);
    }
    msg.text[sizeof msg.text - 1] = 0;
    snprintf(cached, sizeof cached, "%s", msg.text);
    cached_has = msg.has ? 1 : 0;
  }
  snprintf(buf, n, "%s", cached);
  return cached_has;
}

bool tsrt_is_cuda_artifact(const char *path) {
  unsigned char h[256];
  FILE *f = fopen(path, "rb");
  if (!f) return false;
  size_t n = fread(h, 1, sizeof h - 1, f);
  fclose(f);
  h[n] = 0;
  if (n >= 20 && memcmp(h, "\x7f" "ELF", 4) == 0) {
    unsigned em = h[5] == 2 ? (unsigned)(h[18] << 8 | h[19]) : (unsigned)(h[18] | h[19] << 8);
    return em == 190; /* EM_CUDA */
  }
  return strstr((const char *)h, "Generated by NVIDIA") != NULL || strstr((const char *)h, ".version ") != NULL;
}

void *tsrt_read_file(const char *path, size_t *size, ts_diag *d) {
  char *buf = NULL;
  return ts_read_file_as(path, TS_FILE_KERNEL, &buf, size, d) == TS_OK ? buf : NULL;
}

/* ---- measurement ----------------------------------------------------------- */

#define MAXP 64
#define MAXK 32

typedef struct kmeta {
  int nkernels, nparams, ninputs;
  int nsteps; /* 0: the kernels in order; else tessel_steps (library calls among them) */
  long long steps[MAXK * TSRT_STEP_WORDS];
  long long launch[MAXK * 7];
  int dtype[MAXP], ndim[MAXP];
  long long shape[MAXP * 8];
  CUfunction fn[MAXK];
} kmeta;

static int get_global(CUmodule m, const char *name, void *dst, size_t want, char *err, size_t errn) {
  CUdeviceptr p;
  size_t sz = 0;
  CUresult r = drv.cuModuleGetGlobal(&p, &sz, m, name);
  if (r != 0) {
    snprintf(err, errn, "artifact has no %s (not a tessel CUDA build?): %s", name, cu_str(r));
    return -1;
  }
  if (sz < want) want = sz;
  r = drv.cuMemcpyDtoH(dst, p, want);
  if (r != 0) {
    snprintf(err, errn, "reading %s: %s", name, cu_str(r));
    return -1;
  }
  return 0;
}

static size_t param_elems(const kmeta *k, int i) {
  size_t n = 1;
  for (int j = 0; j < k->ndim[i] && j < 8; j++) n *= (size_t)k->shape[i * 8 + j];
  return n;
}

/* A cuBLAS step reads and writes within its params: f32, A and B inputs, C
 * an output, each at least the product's extent (a corrupt or hostile
 * artifact is refused before anything runs). */
static bool sgemm_fits(const kmeta *k, const long long *s) {
  const long long lim = 1LL << 31;
  if (s[2] <= 0 || s[3] <= 0 || s[4] <= 0 || s[5] <= 0 || s[2] >= lim || s[3] >= lim || s[4] >= lim ||
      s[5] >= lim)
    return false;
  double need[3] = {(double)s[5] * (double)s[2] * (double)s[4], (double)s[5] * (double)s[4] * (double)s[3],
                    (double)s[5] * (double)s[2] * (double)s[3]};
  for (int o = 0; o < 3; o++) {
    long long p = s[6 + o];
    if (p < 0 || p >= k->nparams || k->dtype[p] != TSRT_F32 || (o < 2) != (p < k->ninputs) ||
        (double)param_elems(k, (int)p) < need[o])
      return false;
  }
  return true;
}

/* The launch sequence, when the artifact has one (a library step among the
 * kernels, cublas.h); an artifact without it launches its kernels in order. */
static int read_steps(CUmodule m, kmeta *k, char *err, size_t errn) {
  CUdeviceptr p;
  size_t sz = 0;
  if (drv.cuModuleGetGlobal(&p, &sz, m, "tessel_nsteps") != 0) return 0;
  if (get_global(m, "tessel_nsteps", &k->nsteps, sizeof(int), err, errn)) return -1;
  if (k->nsteps < 0 || k->nsteps > MAXK) {
    snprintf(err, errn, "artifact metadata out of range (%d steps)", k->nsteps);
    return -1;
  }
  if (get_global(m, "tessel_steps", k->steps, sizeof(long long) * TSRT_STEP_WORDS * (size_t)k->nsteps, err, errn))
    return -1;
  for (int i = 0; i < k->nsteps; i++) {
    const long long *s = &k->steps[i * TSRT_STEP_WORDS];
    if ((s[0] == TSRT_STEP_KERNEL && (s[1] < 0 || s[1] >= k->nkernels)) ||
        (s[0] != TSRT_STEP_KERNEL && s[0] != TSRT_STEP_SGEMM)) {
      snprintf(err, errn, "artifact step %d is malformed (kind %lld, %lld)", i, s[0], s[1]);
      return -1;
    }
    if (s[0] == TSRT_STEP_SGEMM && !sgemm_fits(k, s)) {
      snprintf(err, errn, "artifact step %d: the cuBLAS product (m %lld, n %lld, k %lld, batch %lld, params %lld, "
               "%lld, %lld) does not fit the artifact's f32 params", i, s[2], s[3], s[4], s[5], s[6], s[7], s[8]);
      return -1;
    }
  }
  return 0;
}

static int read_meta(CUmodule m, kmeta *k, char *err, size_t errn) {
  memset(k, 0, sizeof *k);
  if (get_global(m, "tessel_nkernels", &k->nkernels, sizeof(int), err, errn) ||
      get_global(m, "tessel_nparams", &k->nparams, sizeof(int), err, errn) ||
      get_global(m, "tessel_ninputs", &k->ninputs, sizeof(int), err, errn))
    return -1;
  if (k->nkernels < 0 || k->nkernels > MAXK || k->nparams <= 0 || k->nparams > MAXP || k->ninputs < 0 ||
      k->ninputs > k->nparams) {
    snprintf(err, errn, "artifact metadata out of range (%d kernels, %d params, %d inputs)", k->nkernels,
             k->nparams, k->ninputs);
    return -1;
  }
  if (get_global(m, "tessel_launch", k->launch, sizeof(long long) * 7 * (size_t)k->nkernels, err, errn) ||
      get_global(m, "tessel_param_dtype", k->dtype, sizeof(int) * (size_t)k->nparams, err, errn) ||
      get_global(m, "tessel_param_ndim", k->ndim, sizeof(int) * (size_t)k->nparams, err, errn) ||
      get_global(m, "tessel_param_shape", k->shape, sizeof(long long) * 8 * (size_t)k->nparams, err, errn))
    return -1;
  for (int i = 0; i < k->nkernels; i++) {
    char name[32];
    snprintf(name, sizeof name, "tessel_kernel%d", i);
    CUresult r = drv.cuModuleGetFunction(&k->fn[i], m, name);
    if (r != 0) {
      snprintf(err, errn, "artifact has no %s: %s", name, cu_str(r));
      return -1;
    }
  }
  return read_steps(m, k, err, errn);
}

static size_t param_bytes(const kmeta *k, int i) { return (size_t)tsrt_dtype_bytes(k->dtype[i]) * param_elems(k, i); }

static CUresult launch_one(const kmeta *k, int i, void **params) {
  const long long *L = &k->launch[i * 7];
  return drv.cuLaunchKernel(k->fn[i], (unsigned)L[0], (unsigned)L[1], (unsigned)L[2], (unsigned)L[3],
                            (unsigned)L[4], (unsigned)L[5], 0, NULL, params, NULL);
}

/* CUDA_ERROR_UNKNOWN (999) for a failed library step, its words in err. */
static CUresult launch_all(const kmeta *k, void **params, const CUdeviceptr *dptr, char *err, size_t errn) {
  if (!k->nsteps) {
    for (int i = 0; i < k->nkernels; i++) {
      CUresult r = launch_one(k, i, params);
      if (r != 0) return r;
    }
    return 0;
  }
  for (int i = 0; i < k->nsteps; i++) {
    const long long *s = &k->steps[i * TSRT_STEP_WORDS];
    if (s[0] == TSRT_STEP_KERNEL) {
      CUresult r = launch_one(k, (int)s[1], params);
      if (r != 0) return r;
    } else if (tsrt_cublas_step(s, dptr, k->nparams, err, errn) != 0) {
      return 999;
    }
  }
  return 0;
}

void tsrt_cuda_measure_inprocess(const void *image, size_t size, const tsrt_measure_opts *o,
                                 tsrt_measure_result *res) {
  memset(res, 0, sizeof *res);
  tsrt_cuda_info info;
  ts_diag d = {0};
  if (tsrt_cuda_probe(&info, &d) != TS_OK) {
    snprintf(res->error, sizeof res->error, "%.500s", d.msg);
    res->status = TS_ELOAD;
    return;
  }
  CUdevice dev;
  CUcontext ctx = NULL;
  CUmodule mod = NULL;
  CUdeviceptr dptr[MAXP] = {0}, flush = 0;
  void *host[MAXP] = {0};
  size_t bytes[MAXP] = {0};
  void *params[MAXP];
  CUevent e0 = NULL, e1 = NULL;
  kmeta *k = ts_calloc(1, sizeof *k);
  CUresult r;
  if (!k) {
    res->status = TS_ESYSTEM;
    snprintf(res->error, sizeof res->error, "out of memory");
    return;
  }
  char lib_err[300] = ""; /* a library step's own words */
#define CU(call, what)                                                                              \
  do {                                                                                              \
    if ((r = (call)) != 0) {                                                                        \
      res->status = TS_EKERNEL;                                                                     \
      if (lib_err[0])                                                                               \
        snprintf(res->error, sizeof res->error, "%s: %s", what, lib_err);                           \
      else                                                                                          \
        snprintf(res->error, sizeof res->error, "%s: %s (CUDA error %d)", what, cu_str(r), r);      \
      goto out;                                                                                     \
    }                                                                                               \
  } while (0)
  if ((r = drv.cuDeviceGet(&dev, info.device)) != 0 || (r = drv.cuDevicePrimaryCtxRetain(&ctx, dev)) != 0 ||
      (r = drv.cuCtxSetCurrent(ctx)) != 0) {
    res->status = TS_ELOAD;
    snprintf(res->error, sizeof res->error, "cannot create a CUDA context: %s", cu_str(r));
    goto out;
  }
  if ((r = drv.cuModuleLoadData(&mod, image)) != 0) {
    res->status = TS_ELOAD;
    snprintf(res->error, sizeof res->error, "cuModuleLoadData (%zu bytes): %s — built for another arch? "
             "this GPU is sm_%d%d", size, cu_str(r), info.cc_major, info.cc_minor);
    mod = NULL;
    goto out;
  }
  if (read_meta(mod, k, res->error, sizeof res->error) != 0) {
    res->status = TS_ELOAD;
    goto out;
  }
  for (int i = 0; i < k->nparams; i++) {
    bytes[i] = param_bytes(k, i);
    size_t n = bytes[i] ? bytes[i] : 4;
    host[i] = ts_malloc(n);
    if (!host[i]) {
      res->status = TS_ESYSTEM;
      snprintf(res->error, sizeof res->error, "cannot allocate %zu host bytes", n);
      goto out;
    }
    CU(drv.cuMemAlloc(&dptr[i], n), "cuMemAlloc");
    if (i < k->ninputs) {
      tsrt_fill_random(k->dtype[i], host[i], (int64_t)(bytes[i] / (size_t)tsrt_dtype_bytes(k->dtype[i])),
                       o->seed + (uint64_t)i);
      CU(drv.cuMemcpyHtoD(dptr[i], host[i], bytes[i]), "copying an input to the device");
    } else {
      CU(drv.cuMemsetD8(dptr[i], 0, n), "cuMemsetD8");
    }
    params[i] = &dptr[i];
  }
  size_t flush_bytes = (size_t)(info.l2_bytes > 0 ? info.l2_bytes : 64 << 20) * 2;
  if (o->cache_flush) CU(drv.cuMemAlloc(&flush, flush_bytes), "cuMemAlloc (cache flush)");
  CU(drv.cuEventCreate(&e0, 0), "cuEventCreate");
  CU(drv.cuEventCreate(&e1, 0), "cuEventCreate");
  /* warm-up: the run whose outputs we keep */
  CU(launch_all(k, params, dptr, lib_err, sizeof lib_err), "launching the kernel");
  CU(drv.cuCtxSynchronize(), "running the kernel");
  for (int i = k->ninputs; i < k->nparams; i++)
    CU(drv.cuMemcpyDtoH(host[i], dptr[i], bytes[i]), "copying an output back");
  int number = o->number > 0 ? o->number : 1;
  int repeat = o->repeat > 0 ? o->repeat : 3;
  if (repeat > TSRT_MAX_REPEAT) repeat = TSRT_MAX_REPEAT;
  float ms = 0;
  if (o->min_repeat_ms > 0) {
    for (int tries = 0; tries < 20; tries++) {
      CU(drv.cuEventRecord(e0, NULL), "cuEventRecord");
      for (int j = 0; j < number; j++) CU(launch_all(k, params, dptr, lib_err, sizeof lib_err), "launching the kernel");
      CU(drv.cuEventRecord(e1, NULL), "cuEventRecord");
      CU(drv.cuEventSynchronize(e1), "running the kernel");
      CU(drv.cuEventElapsedTime(&ms, e0, e1), "cuEventElapsedTime");
      if (ms >= o->min_repeat_ms || number >= (1 << 20)) break;
      double grow = ms > 0 ? o->min_repeat_ms / ms * 1.2 : 10;
      if (grow < 2) grow = 2;
      if (grow > 100) grow = 100;
      number = (int)(number * grow);
    }
  }
  res->number = number;
  for (int rep = 0; rep < repeat; rep++) {
    if (flush) CU(drv.cuMemsetD8(flush, (unsigned char)rep, flush_bytes), "cache flush");
    CU(drv.cuEventRecord(e0, NULL), "cuEventRecord");
    for (int j = 0; j < number; j++) CU(launch_all(k, params, dptr, lib_err, sizeof lib_err), "launching the kernel");
    CU(drv.cuEventRecord(e1, NULL), "cuEventRecord");
    CU(drv.cuEventSynchronize(e1), "running the kernel");
    CU(drv.cuEventElapsedTime(&ms, e0, e1), "cuEventElapsedTime");
    res->secs[rep] = ms * 1e-3 / number;
    res->repeat = rep + 1;
    if (o->cooldown_ms > 0) usleep((useconds_t)(o->cooldown_ms * 1000));
  }
  res->status = tsrt_collect_outputs(res, (void *const *)host, bytes, k->ninputs, k->nparams, o->want_outputs);
#undef CU
out:
  if (e0) drv.cuEventDestroy(e0);
  if (e1) drv.cuEventDestroy(e1);
  if (flush) drv.cuMemFree(flush);
  for (int i = 0; i < MAXP; i++) {
    if (dptr[i]) drv.cuMemFree(dptr[i]);
    ts_free(host[i]);
  }
  tsrt_cublas_release();
  if (mod) drv.cuModuleUnload(mod);
  if (ctx) drv.cuDevicePrimaryCtxRelease(dev);
  ts_free(k);
}

/* ---- the forked variant ------------------------------------------------------ */

void tsrt_cuda_measure_forked(const void *image, size_t size, const tsrt_measure_opts *o,
                              tsrt_measure_result *res) {
  memset(res, 0, sizeof *res);
  double timeout = o->timeout_s > 0 ? o->timeout_s : 10;
  int fds[2];
  pid_t pid = tsrt_fork_measure(fds, res);
  if (pid < 0) return;
  if (pid == 0) {
    tsrt_measure_result r;
    tsrt_cuda_measure_inprocess(image, size, o, &r);
    tsrt_child_send_result(fds[1], &r);
  }
  int rd = tsrt_read_result(fds[0], res, tsrt_now() + timeout + 5); /* context creation takes a moment */
  if (rd == -2) kill(pid, SIGKILL);
  close(fds[0]);
  int wst = tsrt_reap(pid);
  if (rd == -2)
    tsrt_result_fail(res, TS_ETIMEOUT, "GPU measurement timed out after %.3g s (child killed)", timeout);
  else if (WIFSIGNALED(wst))
    tsrt_result_fail(res, TS_ECRASH, "GPU measurement child died: signal %d", WTERMSIG(wst));
  else if (rd != 0)
    tsrt_result_fail(res, TS_ESYSTEM, "GPU measurement child exited without a result");
}
