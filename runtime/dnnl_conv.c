/* dnnl_conv.c — tsrt_dnnl_conv2d_f32: an f32 2-d convolution through
 * oneDNN's C API, what a convolution task's library candidate calls
 * (tuner/library_conv.c; docs/TUNING.md, "Library candidates").
 *
 * oneDNN's convolution is not one call: it needs memory descriptors, an
 * operation descriptor, a primitive descriptor and a primitive, then memory
 * objects and a stream to execute it on. This file does that once per
 * distinct parameter set (a small cache under a mutex; a primitive is
 * reused by every later call with the same sizes) and per call only wraps
 * the caller's pointers in memory objects and executes.
 *
 * The runtime has no link dependency on oneDNN (scripts/check-deps; a board
 * build has no oneDNN): libdnnl is opened with dlopen on the first call (the
 * artifact that calls this links libdnnl itself, so in practice it is
 * already loaded) and its functions found with dlsym; without it, or when
 * this build of tessel had no oneDNN headers, the call returns -1 and the
 * kernel's output stays unwritten (a wrong result, which the verifier turns
 * into an error record). oneDNN's threads are its OpenMP runtime's:
 * tsrt_library_threads (runtime/fork_pipe.h) sets their count. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "runtime.h"
#if __has_include("tessel_config.h") /* not in the cross-compiled runner (tests/cross) */
#include "tessel_config.h"
#endif

#if defined(TESSEL_HAVE_DNNL) && TESSEL_HAVE_DNNL && __has_include(<oneapi/dnnl/dnnl.h>)
#include <oneapi/dnnl/dnnl.h>

/* ---- the library, opened on first use --------------------------------------------- */
typedef struct dnnl_api {
  dnnl_status_t (*engine_create)(dnnl_engine_t *, dnnl_engine_kind_t, size_t);
  dnnl_status_t (*stream_create)(dnnl_stream_t *, dnnl_engine_t, unsigned);
  dnnl_status_t (*stream_destroy)(dnnl_stream_t);
  dnnl_status_t (*md_init_by_tag)(dnnl_memory_desc_t *, int, const dnnl_dims_t, dnnl_data_type_t,
                                  dnnl_format_tag_t);
  dnnl_status_t (*md_init_by_strides)(dnnl_memory_desc_t *, int, const dnnl_dims_t, dnnl_data_type_t,
                                      const dnnl_dims_t);
  dnnl_status_t (*conv_desc_init)(dnnl_convolution_desc_t *, dnnl_prop_kind_t, dnnl_alg_kind_t,
                                  const dnnl_memory_desc_t *, const dnnl_memory_desc_t *, const dnnl_memory_desc_t *,
                                  const dnnl_memory_desc_t *, const dnnl_dims_t, const dnnl_dims_t,
                                  const dnnl_dims_t, const dnnl_dims_t);
  dnnl_status_t (*pd_create)(dnnl_primitive_desc_t *, const_dnnl_op_desc_t, const_dnnl_primitive_attr_t,
                             dnnl_engine_t, const_dnnl_primitive_desc_t);
  dnnl_status_t (*pd_destroy)(dnnl_primitive_desc_t);
  dnnl_status_t (*prim_create)(dnnl_primitive_t *, const_dnnl_primitive_desc_t);
  dnnl_status_t (*prim_destroy)(dnnl_primitive_t);
  dnnl_status_t (*prim_execute)(const_dnnl_primitive_t, dnnl_stream_t, int, const dnnl_exec_arg_t *);
  dnnl_status_t (*mem_create)(dnnl_memory_t *, const dnnl_memory_desc_t *, dnnl_engine_t, void *);
  dnnl_status_t (*mem_destroy)(dnnl_memory_t);
} dnnl_api;

static dnnl_api api;
static dnnl_engine_t engine;
static bool api_ok;
static pthread_once_t api_once = PTHREAD_ONCE_INIT;

static void api_open(void) {
  void *h = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_GLOBAL);
  if (!h) h = dlopen("libdnnl.so", RTLD_NOW | RTLD_GLOBAL);
  if (!h) {
    fprintf(stderr, "tsrt_dnnl_conv2d_f32: cannot open libdnnl: %s\n", dlerror());
    return;
  }
  const struct {
    const char *name;
    void **slot;
  } syms[] = {
      {"dnnl_engine_create", (void **)&api.engine_create},
      {"dnnl_stream_create", (void **)&api.stream_create},
      {"dnnl_stream_destroy", (void **)&api.stream_destroy},
      {"dnnl_memory_desc_init_by_tag", (void **)&api.md_init_by_tag},
      {"dnnl_memory_desc_init_by_strides", (void **)&api.md_init_by_strides},
      {"dnnl_dilated_convolution_forward_desc_init", (void **)&api.conv_desc_init},
      {"dnnl_primitive_desc_create", (void **)&api.pd_create},
      {"dnnl_primitive_desc_destroy", (void **)&api.pd_destroy},
      {"dnnl_primitive_create", (void **)&api.prim_create},
      {"dnnl_primitive_destroy", (void **)&api.prim_destroy},
      {"dnnl_primitive_execute", (void **)&api.prim_execute},
      {"dnnl_memory_create", (void **)&api.mem_create},
      {"dnnl_memory_destroy", (void **)&api.mem_destroy},
  };
  for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++)
    if (!(*syms[i].slot = dlsym(h, syms[i].name))) {
      fprintf(stderr, "tsrt_dnnl_conv2d_f32: libdnnl lacks %s\n", syms[i].name);
      return;
    }
  if (api.engine_create(&engine, dnnl_cpu, 0) != dnnl_success) {
    fprintf(stderr, "tsrt_dnnl_conv2d_f32: no oneDNN CPU engine\n");
    return;
  }
  api_ok = true;
}

/* ---- primitives, one per parameter set --------------------------------------------- */
#define CONV_NPARAM 17
#ifndef CONV_CACHE
#define CONV_CACHE 128
#endif

typedef struct conv_prim {
  int64_t key[CONV_NPARAM];
  dnnl_primitive_t prim;
  dnnl_memory_desc_t src, wei, dst;
} conv_prim;

static conv_prim cache[CONV_CACHE];
static int ncache;
static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;

/* Tags by layout code (tsrt_dnnl_conv2d_f32): source and destination, the
 * weights (groups 1), the depthwise weights (groups = c = k; 0: none). */
static const struct {
  dnnl_format_tag_t act, wei, dw;
} tags[] = {
    {dnnl_nchw, dnnl_oihw, dnnl_goihw},            /* 0: NCHW, OIHW (GOIHW grouped) */
    {dnnl_nChw8c, dnnl_OIhw8i8o, dnnl_Goihw8g},     /* 1: [n, c/8, h, w, 8], [k/8, c/8, r, s, 8i, 8o] */
    {dnnl_nChw16c, dnnl_OIhw16i16o, dnnl_Goihw16g}, /* 2: the same with blocks of 16 */
};
#define N_LAYOUTS ((int64_t)(sizeof tags / sizeof tags[0]))

/* The primitive for key p[] (see tsrt_dnnl_conv2d_f32 for the order). A
 * negative bottom/right padding (the last rows of the input never read, as
 * a 1x1 stride-2 convolution of an even size) is given to oneDNN as a
 * shorter input with the full input's strides. */
static bool conv_make(const int64_t *p, conv_prim *out) {
  int64_t n = p[0], c = p[1], h = p[2], w = p[3], k = p[4], r = p[5], s = p[6], g = p[15], lay = p[16];
  int64_t pb = p[11], pr = p[12];
  int64_t oh = (h + p[9] + pb - ((r - 1) * p[13] + 1)) / p[7] + 1;
  int64_t ow = (w + p[10] + pr - ((s - 1) * p[14] + 1)) / p[8] + 1;
  /* a negative far padding that oneDNN's floor division absorbs (fewer
   * unread rows than the stride) becomes 0; else the input is cut short */
  if (pb < 0 && (h + p[9] - ((r - 1) * p[13] + 1)) / p[7] + 1 == oh) pb = 0;
  if (pr < 0 && (w + p[10] - ((s - 1) * p[14] + 1)) / p[8] + 1 == ow) pr = 0;
  int64_t he = pb < 0 ? h + pb : h, we = pr < 0 ? w + pr : w;
  if (oh <= 0 || ow <= 0 || g < 1 || c % g || k % g || lay < 0 || lay >= N_LAYOUTS) return false;
  if (lay && (he != h || we != w || (g != 1 && !(g == c && g == k)))) return false; /* blocked: no cut, dense or depthwise */
  dnnl_dims_t sd = {n, c, he, we}, dd = {n, k, oh, ow};
  dnnl_dims_t ss = {c * h * w, h * w, w, 1};
  dnnl_status_t st = lay || (he == h && we == w) ? api.md_init_by_tag(&out->src, 4, sd, dnnl_f32, tags[lay].act)
                                                 : api.md_init_by_strides(&out->src, 4, sd, dnnl_f32, ss);
  if (st != dnnl_success) return false;
  if (api.md_init_by_tag(&out->dst, 4, dd, dnnl_f32, tags[lay].act) != dnnl_success) return false;
  if (g == 1) {
    dnnl_dims_t wd = {k, c, r, s};
    st = api.md_init_by_tag(&out->wei, 4, wd, dnnl_f32, tags[lay].wei);
  } else {
    dnnl_dims_t wd = {g, k / g, c / g, r, s};
    st = api.md_init_by_tag(&out->wei, 5, wd, dnnl_f32, tags[lay].dw);
  }
  if (st != dnnl_success) return false;
  dnnl_dims_t strides = {p[7], p[8]}, dil = {p[13] - 1, p[14] - 1};
  dnnl_dims_t pl = {p[9], p[10]}, prr = {pb < 0 ? 0 : pb, pr < 0 ? 0 : pr};
  dnnl_convolution_desc_t cd;
  if (api.conv_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct, &out->src, &out->wei, NULL, &out->dst,
                         strides, dil, pl, prr) != dnnl_success)
    return false;
  dnnl_primitive_desc_t pd;
  if (api.pd_create(&pd, &cd, NULL, engine, NULL) != dnnl_success) return false;
  st = api.prim_create(&out->prim, pd);
  api.pd_destroy(pd);
  return st == dnnl_success;
}

/* The cached primitive for p, made on first use; when the cache is full
 * (a symbolic batch seen at many sizes), one made in *tmp for this call
 * only (*own set: the caller destroys it). NULL when oneDNN has none. */
static conv_prim *conv_get(const int64_t *p, conv_prim *tmp, bool *own) {
  *own = false;
  pthread_mutex_lock(&cache_mu);
  conv_prim *e = NULL;
  for (int i = 0; i < ncache && !e; i++)
    if (!memcmp(cache[i].key, p, sizeof cache[i].key)) e = &cache[i];
  bool made = false, full = !e && ncache == CONV_CACHE;
  if (!e && !full) {
    conv_prim *c = &cache[ncache];
    memset(c, 0, sizeof *c);
    memcpy(c->key, p, sizeof c->key);
    if ((made = conv_make(p, c))) e = &cache[ncache++];
  }
  pthread_mutex_unlock(&cache_mu);
  if (full) {
    memset(tmp, 0, sizeof *tmp);
    if ((made = conv_make(p, tmp))) e = tmp, *own = true;
  }
  if (!e && !made)
    fprintf(stderr, "tsrt_dnnl_conv2d_f32: oneDNN has no convolution for these parameters\n");
  return e;
}

int32_t tsrt_dnnl_conv2d_f32(int64_t n, int64_t c, int64_t h, int64_t w, int64_t k, int64_t r, int64_t s,
                             int64_t stride_h, int64_t stride_w, int64_t pad_t, int64_t pad_l, int64_t pad_b,
                             int64_t pad_r, int64_t dil_h, int64_t dil_w, int64_t groups, int64_t layout,
                             const float *src, const float *wei, float *dst) {
  pthread_once(&api_once, api_open);
  if (!api_ok) return -1;
  int64_t p[CONV_NPARAM] = {n,     c,     h,     w,     k,     r,     s,      stride_h, stride_w,
                            pad_t, pad_l, pad_b, pad_r, dil_h, dil_w, groups, layout};
  conv_prim tmp, *e;
  bool own;
  if (!(e = conv_get(p, &tmp, &own))) return -2;
  dnnl_memory_t ms = NULL, mw = NULL, md = NULL;
  dnnl_stream_t stream = NULL;
  int32_t rc = -3;
  if (api.mem_create(&ms, &e->src, engine, (void *)src) == dnnl_success &&
      api.mem_create(&mw, &e->wei, engine, (void *)wei) == dnnl_success &&
      api.mem_create(&md, &e->dst, engine, dst) == dnnl_success &&
      api.stream_create(&stream, engine, dnnl_stream_default_flags) == dnnl_success) {
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, ms}, {DNNL_ARG_WEIGHTS, mw}, {DNNL_ARG_DST, md}};
    rc = api.prim_execute(e->prim, stream, 3, args) == dnnl_success ? 0 : -4;
  }
  if (stream) api.stream_destroy(stream);
  if (ms) api.mem_destroy(ms);
  if (mw) api.mem_destroy(mw);
  if (md) api.mem_destroy(md);
  if (own) api.prim_destroy(tmp.prim);
  return rc;
}

#else /* no oneDNN when tessel was built: no library candidate calls this */
int32_t tsrt_dnnl_conv2d_f32(int64_t n, int64_t c, int64_t h, int64_t w, int64_t k, int64_t r, int64_t s,
                             int64_t stride_h, int64_t stride_w, int64_t pad_t, int64_t pad_l, int64_t pad_b,
                             int64_t pad_r, int64_t dil_h, int64_t dil_w, int64_t groups, int64_t layout,
                             const float *src, const float *wei, float *dst) {
  (void)n, (void)c, (void)h, (void)w, (void)k, (void)r, (void)s, (void)stride_h, (void)stride_w, (void)pad_t;
  (void)pad_l, (void)pad_b, (void)pad_r, (void)dil_h, (void)dil_w, (void)groups, (void)layout, (void)src, (void)wei;
  (void)dst;
  return -1;
}
#endif
