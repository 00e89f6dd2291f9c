/* interp.c — the reference interpreter (see interp.h): the function is
 * compiled into a flat bytecode and run by one loop with an explicit value
 * stack, so deep trees cannot overflow the C stack; f32 is rounded after
 * every operation, selects are lazy lane by lane. docs/IR.md ("Interpreter",
 * "Notes by file"). */
#include "interp.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LOOP_EXTENT (INT64_C(1) << 40)
#define DEFAULT_MAX_STEPS (UINT64_C(1) << 34)
#define MAX_CODE (1 << 26)
#define MAX_ALLOC_BYTES (INT64_C(1) << 36)

/* ---- dtype helpers ------------------------------------------------------- */

static bool code_float(int c) { return c == IR_F16 || c == IR_BF16 || c == IR_F32 || c == IR_F64; }

static int code_bytes(int c) {
  switch (c) {
  case IR_BOOL: case IR_I8: case IR_U8: return 1;
  case IR_I16: case IR_F16: case IR_BF16: return 2;
  case IR_I32: case IR_U32: case IR_F32: return 4;
  default: return 8;
  }
}

static const char *dtstr(ir_dtype t, char *buf) { return ir_dtype_str(t, buf, 24); }

/* Rounds x to a binary float format with `mant` stored mantissa bits and
 * minimum normal exponent emin, to nearest even (subnormals included). */
static double round_fmt(double x, int mant, int emin) {
  if (x == 0 || !isfinite(x)) return x;
  int ex;
  frexp(x, &ex);
  int e = ex - 1;
  if (e < emin) e = emin;
  double q = ldexp(1.0, e - mant);
  return nearbyint(x / q) * q;
}

#define F16_MAX 65504.0
#define BF16_MAX 3.3895313892515355e38

static double round_to(int code, double x) {
  double r;
  switch (code) {
  case IR_F32: return (double)(float)x;
  case IR_F16:
    r = round_fmt(x, 10, -14);
    return fabs(r) > F16_MAX ? copysign(INFINITY, x) : r;
  case IR_BF16:
    r = round_fmt(x, 7, -126);
    return fabs(r) > BF16_MAX ? copysign(INFINITY, x) : r;
  default: return x;
  }
}

static uint16_t f16_bits(double x) {
  x = round_to(IR_F16, x);
  uint16_t s = signbit(x) ? 0x8000 : 0;
  if (isnan(x)) return 0x7E00;
  double a = fabs(x);
  if (isinf(a)) return s | 0x7C00;
  if (a == 0) return s;
  int ex;
  double m = frexp(a, &ex);
  int e = ex - 1;
  if (e < -14) return s | (uint16_t)llrint(a * 16777216.0); /* subnormal: a / 2^-24 */
  return s | (uint16_t)((e + 15) << 10) | (uint16_t)llrint((m * 2 - 1) * 1024);
}

static double f16_value(uint16_t h) {
  int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  double v;
  if (e == 0) v = ldexp(m, -24);
  else if (e == 31) v = m ? NAN : INFINITY;
  else v = ldexp(m + 1024, e - 25);
  return (h & 0x8000) ? -v : v;
}

static uint16_t bf16_bits(double x) {
  x = round_to(IR_BF16, x);
  if (isnan(x)) return 0x7FC0;
  float f = (float)x; /* exact: bf16 values are floats */
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)(u >> 16);
}

static double bf16_value(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

typedef union cell {
  int64_t i;
  double f;
} cell;

/* Wraps an integer to the width of code (two's complement wraparound). */
static int64_t wrap_int(int code, uint64_t v) {
  switch (code) {
  case IR_BOOL: return v != 0;
  case IR_I8: return (int8_t)(uint8_t)v;
  case IR_I16: return (int16_t)(uint16_t)v;
  case IR_I32: return (int32_t)(uint32_t)v;
  case IR_U8: return (int64_t)(v & 0xffu);
  case IR_U32: return (int64_t)(v & 0xffffffffu);
  default: return (int64_t)v;
  }
}

/* Float to integer: truncation toward zero; NaN gives 0, values beyond the
 * i64 range saturate, and then the result wraps to the target width. */
static int64_t f2i(double x) {
  if (isnan(x)) return 0;
  x = trunc(x);
  if (x >= 9223372036854775807.0) return INT64_MAX;
  if (x <= -9223372036854775808.0) return INT64_MIN;
  return (int64_t)x;
}

static cell cast_cell(cell v, int from, int to) {
  cell r;
  bool ff = code_float(from);
  if (code_float(to)) r.f = round_to(to, ff ? v.f : (double)v.i);
  else if (to == IR_BOOL) r.i = ff ? (v.f != 0) : (v.i != 0);
  else r.i = wrap_int(to, (uint64_t)(ff ? f2i(v.f) : v.i));
  return r;
}

static cell mem_get(const void *base, int code, int64_t i) {
  cell r;
  const char *p = (const char *)base;
  switch (code) {
  case IR_BOOL: r.i = ((const uint8_t *)p)[i] != 0; break;
  case IR_I8: r.i = ((const int8_t *)p)[i]; break;
  case IR_U8: r.i = ((const uint8_t *)p)[i]; break;
  case IR_I16: r.i = ((const int16_t *)p)[i]; break;
  case IR_I32: r.i = ((const int32_t *)p)[i]; break;
  case IR_U32: r.i = ((const uint32_t *)p)[i]; break;
  case IR_F16: r.f = f16_value(((const uint16_t *)p)[i]); break;
  case IR_BF16: r.f = bf16_value(((const uint16_t *)p)[i]); break;
  case IR_F32: r.f = ((const float *)p)[i]; break;
  case IR_F64: r.f = ((const double *)p)[i]; break;
  default: r.i = ((const int64_t *)p)[i]; break;
  }
  return r;
}

static void mem_set(void *base, int code, int64_t i, cell v) {
  char *p = (char *)base;
  switch (code) {
  case IR_BOOL: ((uint8_t *)p)[i] = v.i != 0; break;
  case IR_I8: ((int8_t *)p)[i] = (int8_t)v.i; break;
  case IR_U8: ((uint8_t *)p)[i] = (uint8_t)v.i; break;
  case IR_I16: ((int16_t *)p)[i] = (int16_t)v.i; break;
  case IR_I32: ((int32_t *)p)[i] = (int32_t)v.i; break;
  case IR_U32: ((uint32_t *)p)[i] = (uint32_t)v.i; break;
  case IR_F16: ((uint16_t *)p)[i] = f16_bits(v.f); break;
  case IR_BF16: ((uint16_t *)p)[i] = bf16_bits(v.f); break;
  case IR_F32: ((float *)p)[i] = (float)v.f; break;
  case IR_F64: ((double *)p)[i] = v.f; break;
  default: ((int64_t *)p)[i] = v.i; break;
  }
}

/* Fills n elements with the poison pattern: NaN for floats, 0x5A bytes else. */
static void poison(void *data, int code, int64_t n) {
  if (code_float(code)) {
    cell c = {.f = NAN};
    for (int64_t i = 0; i < n; i++) mem_set(data, code, i, c);
  } else {
    memset(data, 0x5A, (size_t)n * (size_t)code_bytes(code));
  }
}

/* ---- tensors --------------------------------------------------------------- */

int64_t ir_tensor_numel(const ir_tensor *t) {
  int64_t n = 1;
  for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
  return n;
}

ts_status ir_tensor_alloc(ir_tensor *t, ir_dtype dt, int ndim, const int64_t *shape) {
  memset(t, 0, sizeof *t);
  if (ndim < 0 || ndim > 8 || dt.code >= IR_DTYPE_COUNT || dt.lanes != 1) return TS_EINVAL;
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0) return TS_EINVAL;
    if (shape[i] && n > INT64_MAX / 16 / shape[i]) return TS_EINVAL;
    n *= shape[i];
    t->shape[i] = shape[i];
  }
  t->dtype = dt;
  t->ndim = ndim;
  t->data = ts_calloc((size_t)(n ? n : 1), (size_t)code_bytes(dt.code));
  if (!t->data) {
    memset(t, 0, sizeof *t);
    return TS_ENOMEM;
  }
  return TS_OK;
}

void ir_tensor_free(ir_tensor *t) {
  if (!t) return;
  ts_free(t->data);
  t->data = NULL;
}

double ir_tensor_get(const ir_tensor *t, int64_t i) {
  cell c = mem_get(t->data, t->dtype.code, i);
  return code_float(t->dtype.code) ? c.f : (double)c.i;
}

void ir_tensor_set(ir_tensor *t, int64_t i, double v) {
  cell c = {.f = v};
  mem_set(t->data, t->dtype.code, i, cast_cell(c, IR_F64, t->dtype.code));
}

void ir_tensor_fill_random(ir_tensor *t, uint64_t seed) {
  ts_rng r;
  ts_rng_seed(&r, seed);
  int code = t->dtype.code;
  int64_t n = ir_tensor_numel(t);
  for (int64_t i = 0; i < n; i++) {
    cell c;
    if (code_float(code)) c.f = round_to(code, ts_rng_unit(&r) * 2.0 - 1.0);
    else if (code == IR_BOOL) c.i = (int64_t)ts_rng_below(&r, 2);
    else if (code == IR_U8 || code == IR_U32) c.i = (int64_t)ts_rng_below(&r, 16);
    else c.i = (int64_t)ts_rng_below(&r, 16) - 8;
    mem_set(t->data, code, i, c);
  }
}

bool ir_tensor_allclose(const ir_tensor *got, const ir_tensor *ref, double rtol, double atol,
                        double *max_abs_err) {
  if (max_abs_err) *max_abs_err = 0;
  if (got->ndim != ref->ndim || got->dtype.code != ref->dtype.code) {
    if (max_abs_err) *max_abs_err = INFINITY;
    return false;
  }
  for (int i = 0; i < got->ndim; i++)
    if (got->shape[i] != ref->shape[i]) {
      if (max_abs_err) *max_abs_err = INFINITY;
      return false;
    }
  bool exact = !code_float(got->dtype.code);
  bool ok = true;
  double maxe = 0;
  int64_t n = ir_tensor_numel(got);
  for (int64_t i = 0; i < n; i++) {
    double a = ir_tensor_get(got, i), b = ir_tensor_get(ref, i);
    double e;
    if (isnan(a) || isnan(b)) {
      e = INFINITY;
      ok = false;
    } else if (a == b) {
      e = 0; /* covers equal infinities */
    } else {
      e = fabs(a - b);
      if (exact || !(e <= atol + rtol * fabs(b))) ok = false;
    }
    if (e > maxe) maxe = e;
  }
  if (max_abs_err) *max_abs_err = maxe;
  return ok;
}

/* ---- bytecode -------------------------------------------------------------- */

enum {
  OP_HALT,
  OP_CONST,      /* push k (dt) */
  OP_VAR,        /* push var slot a */
  OP_BINOP,      /* sub = ir_expr_kind; pops 2 */
  OP_NOT,
  OP_CAST,       /* to dt */
  OP_CALL,       /* sub = intrinsic, a = nargs */
  OP_LOAD,       /* a = buffer slot, b = nidx */
  OP_RAMP,       /* b = lanes */
  OP_BCAST,      /* b = lanes */
  OP_MASK_T,     /* select: peek cond; mask &= cond; none active -> push zero(dt), jump a */
  OP_MASK_F,     /* select: mask = outer & !cond; none active -> push zero(dt), jump a */
  OP_SEL_END,    /* pop mask; pop cond, t, f; push blend */
  OP_POP,
  OP_OUT,        /* pop scalar int into out[a] */
  OP_JZ,         /* pop scalar; jump a when false */
  OP_JMP,
  OP_FOR_BEGIN,  /* pops min, extent; a = exit, b = loop id, c = var slot */
  OP_FOR_NEXT,   /* a = body start, b = loop id, c = var slot */
  OP_BLOCK_PRED, /* pop predicate; jump a when false */
  OP_BLOCK_ENTER,/* a = block id; pops (value, min, extent) per iter var */
  OP_INIT_CHECK, /* b = block id; jump a unless every R iter var is at its min */
  OP_BLOCK_EXIT, /* a = block id */
  OP_LET,        /* pop into var slot a */
  OP_UNBIND,     /* var slot a */
  OP_ALLOC,      /* buffer slot a; pops shape, strides?, offset? */
  OP_FREE,       /* buffer slot a */
  OP_SMASK,      /* store predicate: peek pred; push mask; none active -> jump a */
  OP_SMASK_POP,  /* pop mask and the predicate */
  OP_STORE,      /* buffer slot a, b = nidx; pops indices then value */
  OP_STEP,       /* counts one statement (evaluate, if) */
  OP_EXTERN,     /* sub = extern_table index, a = nargs */
  OP_REINTERP,   /* bit-cast top to dt */
};

typedef struct ins {
  uint8_t op, sub;
  ir_dtype dt;
  int32_t a, b, c;
  cell k;
  const char *ctx; /* innermost block name, for diagnostics */
} ins;

typedef struct vslot {
  const ir_var *var;
  ir_dtype dt;
  bool bound;
  cell *val; /* dt.lanes cells */
} vslot;

typedef struct bslot {
  const ir_buffer *buf;
  int code;
  bool bound, owned;
  int ndim;
  int64_t *shape, *strides; /* ndim each (strides always filled) */
  int64_t offset, storage;  /* elem_offset, elements addressable from data */
  void *data;
} bslot;

typedef struct blkrt {
  const ir_block *blk;
  int32_t *slots;   /* var slot per iter var */
  int64_t *dom_min; /* per iter var, this instance */
  int64_t *dom_ext; /* per iter var, this instance */
  bool *dom_const;  /* domain is two immediates: not pushed, kept in dom_min/ext */
} blkrt;

typedef struct vent {
  ir_dtype dt;
  uint32_t off;
} vent;

typedef struct ment {
  uint32_t lanes, off;
} ment;

/* pointer -> int map (open addressing) */
typedef struct pmap {
  const void **keys;
  int32_t *vals;
  size_t cap, n;
} pmap;

typedef struct vm {
  ts_diag *d;
  ts_status st;
  ins *code;
  int32_t ncode, capcode;
  vslot *vars;
  int32_t nvars, capvars;
  bslot *bufs;
  int32_t nbufs, capbufs;
  blkrt *blks;
  int32_t nblks, capblks;
  int64_t *loop_end;
  int32_t nloops, caploops;
  pmap varmap, bufmap;
  /* value stack */
  vent *vs;
  uint32_t vn, vcap;
  cell *cs;
  uint32_t cn, ccap;
  /* mask stack */
  ment *ms;
  uint32_t mn, mcap;
  uint8_t *mpool;
  uint32_t mpn, mpcap;
  /* compile-time patch stack */
  int32_t *patch;
  int32_t npatch, cappatch;
  int64_t *out;
  uint64_t steps, max_steps;
} vm;

static bool grow(void **p, int32_t *cap, int32_t need, size_t elem) {
  if (need <= *cap) return true;
  int32_t nc = *cap ? *cap : 16;
  while (nc < need) nc *= 2;
  void *np = ts_realloc(*p, (size_t)nc * elem);
  if (!np) return false;
  *p = np;
  *cap = nc;
  return true;
}

static bool growu(void **p, uint32_t *cap, uint64_t need, size_t elem) {
  if (need <= *cap) return true;
  if (need > UINT32_MAX / 2) return false;
  uint32_t nc = *cap ? *cap : 64;
  while (nc < need) nc *= 2;
  void *np = ts_realloc(*p, (size_t)nc * elem);
  if (!np) return false;
  *p = np;
  *cap = nc;
  return true;
}

static ts_status oom(vm *m) {
  m->st = ts_diag_set(m->d, TS_ENOMEM, "interpreter: out of memory");
  return m->st;
}

static ts_status fail(vm *m, ts_status code, const char *ctx, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static ts_status fail(vm *m, ts_status code, const char *ctx, const char *fmt, ...) {
  char msg[TS_DIAG_MAX - 128];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (ctx) ts_diag_set(m->d, code, "%s (in block %s)", msg, ctx);
  else ts_diag_set(m->d, code, "%s", msg);
  m->st = code;
  return code;
}

static size_t phash(const void *p) {
  uint64_t x = (uint64_t)(uintptr_t)p;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return (size_t)x;
}

static int32_t pmap_get(const pmap *m, const void *k) {
  if (!m->cap) return -1;
  for (size_t i = phash(k) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
    if (!m->keys[i]) return -1;
    if (m->keys[i] == k) return m->vals[i];
  }
}

static bool pmap_put(pmap *m, const void *k, int32_t v) {
  if ((m->n + 1) * 2 > m->cap) {
    size_t nc = m->cap ? m->cap * 2 : 64;
    const void **nk = ts_calloc(nc, sizeof *nk);
    int32_t *nv = ts_calloc(nc, sizeof *nv);
    if (!nk || !nv) {
      ts_free(nk);
      ts_free(nv);
      return false;
    }
    for (size_t i = 0; i < m->cap; i++) {
      if (!m->keys[i]) continue;
      size_t j = phash(m->keys[i]) & (nc - 1);
      while (nk[j]) j = (j + 1) & (nc - 1);
      nk[j] = m->keys[i];
      nv[j] = m->vals[i];
    }
    ts_free(m->keys);
    ts_free(m->vals);
    m->keys = nk;
    m->vals = nv;
    m->cap = nc;
  }
  size_t i = phash(k) & (m->cap - 1);
  while (m->keys[i]) i = (i + 1) & (m->cap - 1);
  m->keys[i] = k;
  m->vals[i] = v;
  m->n++;
  return true;
}

static void pmap_fini(pmap *m) {
  ts_free(m->keys);
  ts_free(m->vals);
  memset(m, 0, sizeof *m);
}

static void vm_init(vm *m, ts_diag *d) {
  memset(m, 0, sizeof *m);
  m->d = d;
  m->max_steps = DEFAULT_MAX_STEPS;
}

static void vm_fini(vm *m) {
  for (int32_t i = 0; i < m->nvars; i++) ts_free(m->vars[i].val);
  for (int32_t i = 0; i < m->nbufs; i++) {
    if (m->bufs[i].owned) ts_free(m->bufs[i].data);
    ts_free(m->bufs[i].shape);
  }
  for (int32_t i = 0; i < m->nblks; i++) {
    ts_free(m->blks[i].slots);
    ts_free(m->blks[i].dom_min);
    ts_free(m->blks[i].dom_ext);
    ts_free(m->blks[i].dom_const);
  }
  ts_free(m->code);
  ts_free(m->vars);
  ts_free(m->bufs);
  ts_free(m->blks);
  ts_free(m->loop_end);
  pmap_fini(&m->varmap);
  pmap_fini(&m->bufmap);
  ts_free(m->vs);
  ts_free(m->cs);
  ts_free(m->ms);
  ts_free(m->mpool);
  ts_free(m->patch);
}

static int32_t var_slot(vm *m, const ir_var *v) {
  int32_t s = pmap_get(&m->varmap, v);
  if (s >= 0) return s;
  if (!grow((void **)&m->vars, &m->capvars, m->nvars + 1, sizeof *m->vars)) return -1;
  vslot *vs = &m->vars[m->nvars];
  *vs = (vslot){.var = v, .dt = v->dtype};
  if (vs->dt.lanes < 1) vs->dt.lanes = 1;
  vs->val = ts_calloc(vs->dt.lanes, sizeof(cell));
  if (!vs->val) return -1;
  if (!pmap_put(&m->varmap, v, m->nvars)) {
    ts_free(vs->val);
    return -1;
  }
  return m->nvars++;
}

static int32_t buf_slot(vm *m, const ir_buffer *b) {
  int32_t s = pmap_get(&m->bufmap, b);
  if (s >= 0) return s;
  if (!grow((void **)&m->bufs, &m->capbufs, m->nbufs + 1, sizeof *m->bufs)) return -1;
  bslot *bs = &m->bufs[m->nbufs];
  memset(bs, 0, sizeof *bs);
  bs->buf = b;
  bs->code = b->dtype.code;
  bs->ndim = b->ndim;
  bs->shape = ts_calloc((size_t)(b->ndim > 0 ? 2 * b->ndim : 1), sizeof(int64_t));
  if (!bs->shape) return -1;
  bs->strides = bs->shape + b->ndim;
  if (!pmap_put(&m->bufmap, b, m->nbufs)) {
    ts_free(bs->shape);
    return -1;
  }
  return m->nbufs++;
}

/* ---- target intrinsics ------------------------------------------------------ */
/* The call_extern names the interpreter executes, bit-exactly as the
 * hardware does (docs/TENSORIZE.md). Arguments and result travel as raw
 * little-endian bytes of their lanes, so an intrinsic sees exactly the
 * register contents LLVM would pass. */
typedef void (*extern_fn)(const uint8_t *const *args, uint8_t *out, int lanes, int ebytes);

static int32_t rd_i32(const uint8_t *p, int i) {
  int32_t v;
  memcpy(&v, p + 4 * i, 4);
  return v;
}

/* vpdpbusd: out[i] = src[i] + sum_k u8(a[4i+k]) * s8(b[4i+k]), wrapping. */
static void ext_vpdpbusd(const uint8_t *const *x, uint8_t *out, int lanes, int ebytes) {
  (void)ebytes;
  for (int i = 0; i < lanes; i++) {
    int64_t acc = rd_i32(x[0], i);
    for (int k = 0; k < 4; k++) acc += (int64_t)x[1][4 * i + k] * (int8_t)x[2][4 * i + k];
    int32_t r = (int32_t)(uint32_t)(uint64_t)acc;
    memcpy(out + 4 * i, &r, 4);
  }
}

/* vpmaddwd (AVX2): out[i] = a16[2i] * b16[2i] + a16[2i+1] * b16[2i+1], i16
 * operands, the i32 sum wrapping (only -32768^2 * 2 overflows). */
static void ext_pmaddwd(const uint8_t *const *x, uint8_t *out, int lanes, int ebytes) {
  (void)ebytes;
  for (int i = 0; i < lanes; i++) {
    int64_t acc = 0;
    for (int k = 0; k < 2; k++) {
      int16_t a, b;
      memcpy(&a, x[0] + 2 * (2 * i + k), 2);
      memcpy(&b, x[1] + 2 * (2 * i + k), 2);
      acc += (int64_t)a * b;
    }
    int32_t r = (int32_t)(uint32_t)(uint64_t)acc;
    memcpy(out + 4 * i, &r, 4);
  }
}

/* sdot / udot: out[i] = acc[i] + sum_k a[4i+k] * b[4i+k], both signed or
 * both unsigned bytes, wrapping. */
static void dot4(const uint8_t *const *x, uint8_t *out, int lanes, bool sgn) {
  for (int i = 0; i < lanes; i++) {
    int64_t acc = rd_i32(x[0], i);
    for (int k = 0; k < 4; k++) {
      int j = 4 * i + k;
      acc += sgn ? (int64_t)(int8_t)x[1][j] * (int8_t)x[2][j] : (int64_t)x[1][j] * x[2][j];
    }
    int32_t r = (int32_t)(uint32_t)(uint64_t)acc;
    memcpy(out + 4 * i, &r, 4);
  }
}
static void ext_sdot(const uint8_t *const *x, uint8_t *out, int lanes, int ebytes) {
  (void)ebytes;
  dot4(x, out, lanes, true);
}
static void ext_udot(const uint8_t *const *x, uint8_t *out, int lanes, int ebytes) {
  (void)ebytes;
  dot4(x, out, lanes, false);
}
/* llvm.vector.interleave2: out = a0 b0 a1 b1 ... (lanes = result lanes). */
static void ext_interleave2(const uint8_t *const *x, uint8_t *out, int lanes, int ebytes) {
  for (int i = 0; i < lanes / 2; i++) {
    memcpy(out + (size_t)(2 * i) * (size_t)ebytes, x[0] + (size_t)i * (size_t)ebytes, (size_t)ebytes);
    memcpy(out + (size_t)(2 * i + 1) * (size_t)ebytes, x[1] + (size_t)i * (size_t)ebytes, (size_t)ebytes);
  }
}

/* Argument and result types as LLVM declares them (integer lanes of either
 * signedness match: LLVM has no unsigned types). */
static const struct extern_impl {
  const char *name;
  ir_dtype ret;
  int nargs;
  ir_dtype args[3];
  extern_fn fn;
} extern_table[] = {
    {"llvm.x86.avx512.vpdpbusd.512", {IR_I32, 16}, 3, {{IR_I32, 16}, {IR_I32, 16}, {IR_I32, 16}}, ext_vpdpbusd},
    {"llvm.x86.avx512.vpdpbusd.256", {IR_I32, 8}, 3, {{IR_I32, 8}, {IR_I32, 8}, {IR_I32, 8}}, ext_vpdpbusd},
    {"llvm.x86.avx512.vpdpbusd.128", {IR_I32, 4}, 3, {{IR_I32, 4}, {IR_I32, 4}, {IR_I32, 4}}, ext_vpdpbusd},
    {"llvm.x86.avx2.pmadd.wd", {IR_I32, 8}, 2, {{IR_I16, 16}, {IR_I16, 16}}, ext_pmaddwd},
    {"llvm.aarch64.neon.sdot.v4i32.v16i8", {IR_I32, 4}, 3, {{IR_I32, 4}, {IR_I8, 16}, {IR_I8, 16}}, ext_sdot},
    {"llvm.aarch64.neon.udot.v4i32.v16i8", {IR_I32, 4}, 3, {{IR_I32, 4}, {IR_I8, 16}, {IR_I8, 16}}, ext_udot},
    {"llvm.aarch64.neon.sdot.v2i32.v8i8", {IR_I32, 2}, 3, {{IR_I32, 2}, {IR_I8, 8}, {IR_I8, 8}}, ext_sdot},
    {"llvm.aarch64.neon.udot.v2i32.v8i8", {IR_I32, 2}, 3, {{IR_I32, 2}, {IR_I8, 8}, {IR_I8, 8}}, ext_udot},
    /* overloaded on the result: one row per type in use */
    {"llvm.vector.interleave2", {IR_I8, 64}, 2, {{IR_I8, 32}, {IR_I8, 32}}, ext_interleave2},
    {"llvm.vector.interleave2", {IR_I8, 32}, 2, {{IR_I8, 16}, {IR_I8, 16}}, ext_interleave2},
    {"llvm.vector.interleave2", {IR_I8, 16}, 2, {{IR_I8, 8}, {IR_I8, 8}}, ext_interleave2},
    {"llvm.vector.interleave2", {IR_I8, 8}, 2, {{IR_I8, 4}, {IR_I8, 4}}, ext_interleave2},
    {"llvm.vector.interleave2", {IR_I32, 16}, 2, {{IR_I32, 8}, {IR_I32, 8}}, ext_interleave2},
    {"llvm.vector.interleave2", {IR_I32, 8}, 2, {{IR_I32, 4}, {IR_I32, 4}}, ext_interleave2},
    {"llvm.vector.interleave2", {IR_F32, 16}, 2, {{IR_F32, 8}, {IR_F32, 8}}, ext_interleave2},
    {"llvm.vector.interleave2", {IR_F32, 8}, 2, {{IR_F32, 4}, {IR_F32, 4}}, ext_interleave2},
};
#define N_EXTERN ((int)(sizeof extern_table / sizeof extern_table[0]))
#define MAX_EXTERN_BYTES 1024

/* Same LLVM type: lanes equal and same bits, integer vs float kept apart. */
static bool llvm_same_type(ir_dtype a, ir_dtype b) {
  return a.lanes == b.lanes && code_bytes(a.code) == code_bytes(b.code) &&
         code_float(a.code) == code_float(b.code) && a.code != IR_BOOL && b.code != IR_BOOL &&
         a.code != IR_HANDLE && b.code != IR_HANDLE;
}

/* ---- compiler ------------------------------------------------------------- */

enum { T_EXPR, T_STMT, T_EMIT, T_PATCH_HERE };
/* patch flags of T_EMIT */
enum { P_PUSH = 1, P_POP_HERE = 2, P_POP_NEXT = 4, P_POP_FOR = 8 };

typedef struct task {
  uint8_t kind, flags;
  const void *node;
  const char *ctx;
  ins in;
} task;

typedef struct compiler {
  vm *m;
  task *stk;
  int32_t n, cap;
  task *tmp; /* forward list being built for one node */
  int32_t ntmp, captmp;
} compiler;

static bool emit(vm *m, ins in) {
  if (m->ncode >= MAX_CODE) {
    fail(m, TS_EUNSUPPORTED, NULL, "interpreter: program too large (over %d instructions)", MAX_CODE);
    return false;
  }
  if (!grow((void **)&m->code, &m->capcode, m->ncode + 1, sizeof *m->code)) {
    oom(m);
    return false;
  }
  m->code[m->ncode++] = in;
  return true;
}

static bool tmp_add(compiler *c, task t) {
  if (!grow((void **)&c->tmp, &c->captmp, c->ntmp + 1, sizeof *c->tmp)) {
    oom(c->m);
    return false;
  }
  c->tmp[c->ntmp++] = t;
  return true;
}

static bool t_expr(compiler *c, const ir_expr *e, const char *ctx) {
  return tmp_add(c, (task){.kind = T_EXPR, .node = e, .ctx = ctx});
}
static bool t_stmt(compiler *c, const ir_stmt *s, const char *ctx) {
  return tmp_add(c, (task){.kind = T_STMT, .node = s, .ctx = ctx});
}
static bool t_emit(compiler *c, ins in, int flags, const char *ctx) {
  in.ctx = ctx;
  return tmp_add(c, (task){.kind = T_EMIT, .flags = (uint8_t)flags, .ctx = ctx, .in = in});
}
static bool t_patch(compiler *c) { return tmp_add(c, (task){.kind = T_PATCH_HERE}); }

/* Moves the forward list onto the work stack (reversed, so it runs in order). */
static bool flush_tmp(compiler *c) {
  if (!grow((void **)&c->stk, &c->cap, c->n + c->ntmp, sizeof *c->stk)) {
    oom(c->m);
    return false;
  }
  for (int32_t i = c->ntmp - 1; i >= 0; i--) c->stk[c->n++] = c->tmp[i];
  c->ntmp = 0;
  return true;
}

static bool push_patch(vm *m, int32_t pc) {
  if (!grow((void **)&m->patch, &m->cappatch, m->npatch + 1, sizeof *m->patch)) {
    oom(m);
    return false;
  }
  m->patch[m->npatch++] = pc;
  return true;
}

static bool malformed(vm *m, const char *ctx, const char *what) {
  fail(m, TS_EINVAL, ctx, "malformed IR: %s", what);
  return false;
}

static ins mkins(int op) {
  ins in;
  memset(&in, 0, sizeof in);
  in.op = (uint8_t)op;
  return in;
}

/* Splits one expression node into tasks. */
/* An extern call: its row of extern_table (name, then the return type), its
 * checked arguments, then OP_EXTERN. */
static bool plan_extern(compiler *c, const ir_expr *e, ins in, const char *ctx) {
  vm *m = c->m;
  char b1[24];
  const char *nm = e->u.ext.name ? e->u.ext.name : "";
  int k = 0, named = 0;
  for (; k < N_EXTERN; k++) {
    if (strcmp(extern_table[k].name, nm)) continue;
    named++;
    if (llvm_same_type(e->dtype, extern_table[k].ret)) break;
  }
  if (k == N_EXTERN && named) {
    return fail(m, TS_ETYPE, ctx, "interpreter: call_extern '%s' returning %s is not implemented here", nm,
                dtstr(e->dtype, b1)),
           false;
  }
  if (k == N_EXTERN) {
    char known[512];
    size_t o = 0;
    for (int j = 0; j < N_EXTERN && o < sizeof known; j++)
      if (!j || strcmp(extern_table[j].name, extern_table[j - 1].name))
        o += (size_t)snprintf(known + o, sizeof known - o, "%s%s", j ? ", " : "", extern_table[j].name);
    return fail(m, TS_EUNSUPPORTED, ctx,
                "interpreter: call_extern '%s' has no implementation here (known: %s)", nm, known),
           false;
  }
  const struct extern_impl *x = &extern_table[k];
  char b2[24];
  if (!llvm_same_type(e->dtype, x->ret))
    return fail(m, TS_ETYPE, ctx, "call_extern '%s' returns %s, not %s", nm, dtstr(x->ret, b1),
                dtstr(e->dtype, b2)),
           false;
  if (e->u.ext.nargs != x->nargs)
    return fail(m, TS_EINVAL, ctx, "call_extern '%s' takes %d arguments, got %d", nm, x->nargs,
                e->u.ext.nargs),
           false;
  for (int i = 0; i < x->nargs; i++) {
    const ir_expr *ai = e->u.ext.args[i];
    if (!ai) return malformed(m, ctx, "call_extern with a missing argument");
    if (!llvm_same_type(ai->dtype, x->args[i]))
      return fail(m, TS_ETYPE, ctx, "argument %d of call_extern '%s' is %s, it needs %s", i, nm,
                  dtstr(ai->dtype, b1), dtstr(x->args[i], b2)),
             false;
    if (!t_expr(c, ai, ctx)) return false;
  }
  in.op = OP_EXTERN;
  in.sub = (uint8_t)k;
  in.a = x->nargs;
  return t_emit(c, in, 0, ctx);
}

static bool plan_expr(compiler *c, const ir_expr *e, const char *ctx) {
  vm *m = c->m;
  ins in = mkins(OP_HALT);
  in.dt = e->dtype;
  if (in.dt.lanes < 1) in.dt.lanes = 1;
  char b1[24];
  switch (e->kind) {
  case IR_INT_IMM:
    in.op = OP_CONST;
    in.k.i = wrap_int(e->dtype.code, (uint64_t)e->u.ival);
    if (code_float(e->dtype.code)) in.k.f = round_to(e->dtype.code, (double)e->u.ival);
    return t_emit(c, in, 0, ctx);
  case IR_FLOAT_IMM:
    in.op = OP_CONST;
    if (code_float(e->dtype.code)) in.k.f = round_to(e->dtype.code, e->u.fval);
    else in.k = cast_cell((cell){.f = e->u.fval}, IR_F64, e->dtype.code);
    return t_emit(c, in, 0, ctx);
  case IR_VAR: {
    if (!e->u.var) return malformed(m, ctx, "variable reference without a variable");
    int32_t s = var_slot(m, e->u.var);
    if (s < 0) return oom(m), false;
    in.op = OP_VAR;
    in.a = s;
    return t_emit(c, in, 0, ctx);
  }
  case IR_NOT:
    if (!e->u.un.a) return malformed(m, ctx, "'!' without an operand");
    in.op = OP_NOT;
    return t_expr(c, e->u.un.a, ctx) && t_emit(c, in, 0, ctx);
  case IR_SELECT: {
    const ir_expr *cd = e->u.sel.cond, *t = e->u.sel.t, *f = e->u.sel.f;
    if (!cd || !t || !f) return malformed(m, ctx, "select with a missing operand");
    if (cd->dtype.lanes <= 1 && t->dtype.lanes <= 1 && f->dtype.lanes <= 1) /* scalar: plain jumps */
      return t_expr(c, cd, ctx) && t_emit(c, mkins(OP_JZ), P_PUSH, ctx) && t_expr(c, t, ctx) &&
             t_emit(c, mkins(OP_JMP), P_POP_NEXT | P_PUSH, ctx) && t_expr(c, f, ctx) && t_patch(c);
    ins mt = mkins(OP_MASK_T), mf = mkins(OP_MASK_F), se = mkins(OP_SEL_END);
    mt.dt = t->dtype;
    mf.dt = f->dtype;
    se.dt = in.dt;
    return t_expr(c, cd, ctx) && t_emit(c, mt, P_PUSH, ctx) && t_expr(c, t, ctx) &&
           t_emit(c, mf, P_POP_HERE | P_PUSH, ctx) && t_expr(c, f, ctx) &&
           t_emit(c, se, P_POP_HERE, ctx);
  }
  case IR_CAST:
    if (!e->u.cast.value) return malformed(m, ctx, "cast without an operand");
    if (e->dtype.code >= IR_HANDLE || e->u.cast.value->dtype.code >= IR_HANDLE)
      return fail(m, TS_ETYPE, ctx, "cannot cast to or from %s",
                  dtstr(e->dtype.code >= IR_HANDLE ? e->dtype : e->u.cast.value->dtype, b1)),
             false;
    in.op = OP_CAST;
    return t_expr(c, e->u.cast.value, ctx) && t_emit(c, in, 0, ctx);
  case IR_CALL: {
    int op = e->u.call.op;
    if ((unsigned)op >= IR_INTRIN_COUNT) return malformed(m, ctx, "unknown intrinsic");
    if (e->u.call.nargs != ir_intrin_nargs((ir_intrin)op))
      return fail(m, TS_EINVAL, ctx, "intrinsic %s takes %d arguments, got %d",
                  ir_intrin_name((ir_intrin)op), ir_intrin_nargs((ir_intrin)op), e->u.call.nargs),
             false;
    if (!code_float(e->dtype.code) && !(op == IR_ABS && e->dtype.code != IR_HANDLE))
      return fail(m, TS_ETYPE, ctx, "intrinsic %s needs a float dtype, got %s",
                  ir_intrin_name((ir_intrin)op), dtstr(e->dtype, b1)),
             false;
    for (int i = 0; i < e->u.call.nargs; i++) {
      if (!e->u.call.args[i]) return malformed(m, ctx, "intrinsic call with a missing argument");
      if (!t_expr(c, e->u.call.args[i], ctx)) return false;
    }
    in.op = OP_CALL;
    in.sub = (uint8_t)op;
    in.a = e->u.call.nargs;
    return t_emit(c, in, 0, ctx);
  }
  case IR_LOAD: {
    const ir_buffer *b = e->u.load.buf;
    if (!b) return malformed(m, ctx, "load without a buffer");
    if (e->u.load.nidx != b->ndim)
      return fail(m, TS_EINVAL, ctx, "load of %s with %d indices, but it has %d dimensions",
                  b->name, e->u.load.nidx, b->ndim),
             false;
    if (b->dtype.lanes > 1 || b->dtype.code >= IR_HANDLE)
      return fail(m, TS_EUNSUPPORTED, ctx, "buffer %s of dtype %s is not supported", b->name,
                  dtstr(b->dtype, b1)),
             false;
    for (int i = 0; i < e->u.load.nidx; i++) {
      if (!e->u.load.idx[i]) return malformed(m, ctx, "load with a missing index");
      if (!t_expr(c, e->u.load.idx[i], ctx)) return false;
    }
    int32_t s = buf_slot(m, b);
    if (s < 0) return oom(m), false;
    in.op = OP_LOAD;
    in.a = s;
    in.b = e->u.load.nidx;
    return t_emit(c, in, 0, ctx);
  }
  case IR_RAMP:
    if (!e->u.ramp.base || !e->u.ramp.stride) return malformed(m, ctx, "ramp with a missing operand");
    if (e->u.ramp.lanes < 1) return malformed(m, ctx, "ramp with fewer than one lane");
    in.op = OP_RAMP;
    in.b = e->u.ramp.lanes;
    in.dt.lanes = (uint16_t)e->u.ramp.lanes;
    return t_expr(c, e->u.ramp.base, ctx) && t_expr(c, e->u.ramp.stride, ctx) &&
           t_emit(c, in, 0, ctx);
  case IR_CALL_EXTERN:
    return plan_extern(c, e, in, ctx);
  case IR_REINTERPRET: {
    const ir_expr *v = e->u.cast.value;
    if (!v) return malformed(m, ctx, "reinterpret without an operand");
    char b2[24];
    if (e->dtype.code == IR_BOOL || e->dtype.code >= IR_HANDLE || v->dtype.code == IR_BOOL ||
        v->dtype.code >= IR_HANDLE)
      return fail(m, TS_ETYPE, ctx, "reinterpret between %s and %s: only number lanes", dtstr(v->dtype, b1),
                  dtstr(e->dtype, b2)),
             false;
    long bits = (long)code_bytes(e->dtype.code) * in.dt.lanes;
    if (bits != (long)code_bytes(v->dtype.code) * (v->dtype.lanes ? v->dtype.lanes : 1) ||
        bits > MAX_EXTERN_BYTES)
      return fail(m, TS_ETYPE, ctx, "reinterpret of %s as %s changes the size", dtstr(v->dtype, b1),
                  dtstr(e->dtype, b2)),
             false;
    in.op = OP_REINTERP;
    return t_expr(c, v, ctx) && t_emit(c, in, 0, ctx);
  }
  case IR_ACCESS_PTR:
    return fail(m, TS_EUNSUPPORTED, ctx,
                "interpreter: access_ptr(%s) is not supported; pointer-taking intrinsics run only "
                "in generated code",
                e->u.ptr.buf ? e->u.ptr.buf->name : "?"),
           false;
  case IR_STR_IMM:
    return fail(m, TS_EUNSUPPORTED, ctx, "interpreter: string \"%s\" is not a value",
                e->u.sval ? e->u.sval : ""),
           false;
  case IR_BROADCAST:
    if (!e->u.bcast.value) return malformed(m, ctx, "broadcast without an operand");
    if (e->u.bcast.lanes < 1) return malformed(m, ctx, "broadcast with fewer than one lane");
    in.op = OP_BCAST;
    in.b = e->u.bcast.lanes;
    in.dt.lanes = (uint16_t)e->u.bcast.lanes;
    return t_expr(c, e->u.bcast.value, ctx) && t_emit(c, in, 0, ctx);
  default:
    if (ir_is_binop(e->kind)) {
      const ir_expr *x = e->u.bin.a, *y = e->u.bin.b;
      if (!x || !y) return malformed(m, ctx, "binary operation with a missing operand");
      if (e->kind == IR_AND || e->kind == IR_OR) {
        /* short-circuit, lane-wise: a && b = select(a, b, false); a || b = select(a, true, b) */
        ins mt = mkins(OP_MASK_T), mf = mkins(OP_MASK_F), se = mkins(OP_SEL_END), k = mkins(OP_CONST);
        k.dt = ir_dt(IR_BOOL);
        k.k.i = e->kind == IR_OR;
        mt.dt = e->kind == IR_AND ? y->dtype : k.dt;
        mf.dt = e->kind == IR_AND ? k.dt : y->dtype;
        se.dt = in.dt;
        if (x->dtype.lanes <= 1 && y->dtype.lanes <= 1) { /* scalar: plain jumps */
          if (!t_expr(c, x, ctx) || !t_emit(c, mkins(OP_JZ), P_PUSH, ctx)) return false;
          if (!(e->kind == IR_AND ? t_expr(c, y, ctx) : t_emit(c, k, 0, ctx))) return false;
          if (!t_emit(c, mkins(OP_JMP), P_POP_NEXT | P_PUSH, ctx)) return false;
          if (!(e->kind == IR_AND ? t_emit(c, (ins){.op = OP_CONST, .dt = k.dt}, 0, ctx) : t_expr(c, y, ctx)))
            return false;
          return t_patch(c);
        }
        if (!t_expr(c, x, ctx) || !t_emit(c, mt, P_PUSH, ctx)) return false;
        if (!(e->kind == IR_AND ? t_expr(c, y, ctx) : t_emit(c, k, 0, ctx))) return false;
        if (!t_emit(c, mf, P_POP_HERE | P_PUSH, ctx)) return false;
        if (!(e->kind == IR_AND ? t_emit(c, k, 0, ctx) : t_expr(c, y, ctx))) return false;
        return t_emit(c, se, P_POP_HERE, ctx);
      }
      in.op = OP_BINOP;
      in.sub = (uint8_t)e->kind;
      return t_expr(c, x, ctx) && t_expr(c, y, ctx) && t_emit(c, in, 0, ctx);
    }
    return malformed(m, ctx, "unknown expression kind");
  }
}

/* Tasks that push a buffer's shape, strides and offset, then OP_ALLOC. */
static bool plan_alloc(compiler *c, const ir_buffer *b, const char *ctx) {
  vm *m = c->m;
  char b1[24];
  if (b->dtype.lanes > 1 || b->dtype.code >= IR_HANDLE)
    return fail(m, TS_EUNSUPPORTED, ctx, "buffer %s of dtype %s is not supported", b->name,
                dtstr(b->dtype, b1)),
           false;
  for (int i = 0; i < b->ndim; i++) {
    if (!b->shape || !b->shape[i]) return malformed(m, ctx, "buffer with a missing shape");
    if (!t_expr(c, b->shape[i], ctx)) return false;
  }
  if (b->strides)
    for (int i = 0; i < b->ndim; i++) {
      if (!b->strides[i]) return malformed(m, ctx, "buffer with a missing stride");
      if (!t_expr(c, b->strides[i], ctx)) return false;
    }
  if (b->elem_offset && !t_expr(c, b->elem_offset, ctx)) return false;
  int32_t s = buf_slot(m, b);
  if (s < 0) return oom(m), false;
  ins in = mkins(OP_ALLOC);
  in.a = s;
  return t_emit(c, in, 0, ctx);
}

static bool plan_stmt(compiler *c, const ir_stmt *s, const char *ctx) {
  vm *m = c->m;
  char b1[24], b2[24];
  switch (s->kind) {
  case IR_FOR: {
    if (!s->u.loop.var || !s->u.loop.min || !s->u.loop.extent || !s->u.loop.body)
      return malformed(m, ctx, "for loop with a missing part");
    int32_t vs = var_slot(m, s->u.loop.var);
    if (vs < 0 || !grow((void **)&m->loop_end, &m->caploops, m->nloops + 1, sizeof(int64_t)))
      return oom(m), false;
    int32_t id = m->nloops++;
    ins fb = mkins(OP_FOR_BEGIN), fn = mkins(OP_FOR_NEXT);
    fb.b = fn.b = id;
    fb.c = fn.c = vs;
    return t_expr(c, s->u.loop.min, ctx) && t_expr(c, s->u.loop.extent, ctx) &&
           t_emit(c, fb, P_PUSH, ctx) && t_stmt(c, s->u.loop.body, ctx) &&
           t_emit(c, fn, P_POP_FOR, ctx);
  }
  case IR_BLOCK_REALIZE: {
    const ir_block *b = s->u.realize.block;
    if (!b) return malformed(m, ctx, "block realize without a block");
    const char *bctx = b->name ? b->name : "?";
    if (b->niter && (!s->u.realize.iter_values || !b->iters))
      return malformed(m, bctx, "block without iter var bindings");
    if (!grow((void **)&m->blks, &m->capblks, m->nblks + 1, sizeof *m->blks)) return oom(m), false;
    blkrt *rt = &m->blks[m->nblks];
    memset(rt, 0, sizeof *rt);
    rt->blk = b;
    rt->slots = ts_calloc((size_t)(b->niter ? b->niter : 1), sizeof *rt->slots);
    rt->dom_min = ts_calloc((size_t)(b->niter ? b->niter : 1), sizeof *rt->dom_min);
    rt->dom_ext = ts_calloc((size_t)(b->niter ? b->niter : 1), sizeof *rt->dom_ext);
    rt->dom_const = ts_calloc((size_t)(b->niter ? b->niter : 1), sizeof *rt->dom_const);
    int32_t id = m->nblks++;
    if (!rt->slots || !rt->dom_min || !rt->dom_ext || !rt->dom_const) return oom(m), false;
    for (int i = 0; i < b->niter; i++) {
      const ir_iter_var *iv = &b->iters[i];
      if (!iv->var || !iv->dom.min || !iv->dom.extent || !s->u.realize.iter_values[i])
        return malformed(m, bctx, "block iter var with a missing part");
      rt->slots[i] = var_slot(m, iv->var);
      if (rt->slots[i] < 0) return oom(m), false;
      if (iv->dom.min->kind == IR_INT_IMM && iv->dom.extent->kind == IR_INT_IMM) {
        rt->dom_const[i] = true;
        rt->dom_min[i] = iv->dom.min->u.ival;
        rt->dom_ext[i] = iv->dom.extent->u.ival;
      }
    }
    const ir_expr *pred = s->u.realize.predicate;
    bool has_pred = pred && !(pred->kind == IR_INT_IMM && pred->u.ival != 0);
    if (has_pred) {
      ins bp = mkins(OP_BLOCK_PRED);
      if (!t_expr(c, pred, ctx) || !t_emit(c, bp, P_PUSH, bctx)) return false;
    }
    for (int i = 0; i < b->niter; i++) {
      if (!t_expr(c, s->u.realize.iter_values[i], ctx)) return false;
      if (!rt->dom_const[i] && (!t_expr(c, b->iters[i].dom.min, ctx) || !t_expr(c, b->iters[i].dom.extent, ctx)))
        return false;
    }
    ins be = mkins(OP_BLOCK_ENTER);
    be.a = id;
    if (!t_emit(c, be, 0, bctx)) return false;
    for (int i = 0; i < b->nalloc; i++) {
      if (!b->allocs || !b->allocs[i]) return malformed(m, bctx, "block with a missing alloc buffer");
      if (!plan_alloc(c, b->allocs[i], bctx)) return false;
    }
    if (b->init) {
      ins ic = mkins(OP_INIT_CHECK);
      ic.b = id;
      if (!t_emit(c, ic, P_PUSH, bctx) || !t_stmt(c, b->init, bctx) || !t_patch(c)) return false;
    }
    if (b->body && !t_stmt(c, b->body, bctx)) return false;
    for (int i = b->nalloc - 1; i >= 0; i--) {
      ins fr = mkins(OP_FREE);
      fr.a = buf_slot(m, b->allocs[i]);
      if (!t_emit(c, fr, 0, bctx)) return false;
    }
    ins bx = mkins(OP_BLOCK_EXIT);
    bx.a = id;
    if (!t_emit(c, bx, 0, bctx)) return false;
    return has_pred ? t_patch(c) : true;
  }
  case IR_SEQ:
    for (int i = 0; i < s->u.seq.n; i++) {
      if (!s->u.seq.stmts || !s->u.seq.stmts[i]) return malformed(m, ctx, "sequence with a missing statement");
      if (!t_stmt(c, s->u.seq.stmts[i], ctx)) return false;
    }
    return true;
  case IR_IF: {
    if (!s->u.ifs.cond || !s->u.ifs.then_s) return malformed(m, ctx, "if with a missing part");
    ins st = mkins(OP_STEP), jz = mkins(OP_JZ), jmp = mkins(OP_JMP);
    if (!t_emit(c, st, 0, ctx) || !t_expr(c, s->u.ifs.cond, ctx) || !t_emit(c, jz, P_PUSH, ctx) ||
        !t_stmt(c, s->u.ifs.then_s, ctx))
      return false;
    if (s->u.ifs.else_s)
      return t_emit(c, jmp, P_POP_NEXT | P_PUSH, ctx) && t_stmt(c, s->u.ifs.else_s, ctx) && t_patch(c);
    return t_patch(c);
  }
  case IR_LET: {
    if (!s->u.let.var || !s->u.let.value || !s->u.let.body) return malformed(m, ctx, "let with a missing part");
    int32_t vs = var_slot(m, s->u.let.var);
    if (vs < 0) return oom(m), false;
    ins lt = mkins(OP_LET), ub = mkins(OP_UNBIND);
    lt.a = ub.a = vs;
    return t_expr(c, s->u.let.value, ctx) && t_emit(c, lt, 0, ctx) && t_stmt(c, s->u.let.body, ctx) &&
           t_emit(c, ub, 0, ctx);
  }
  case IR_ALLOCATE: {
    if (!s->u.alloc.buf || !s->u.alloc.body) return malformed(m, ctx, "allocate with a missing part");
    ins fr = mkins(OP_FREE);
    if (!plan_alloc(c, s->u.alloc.buf, ctx)) return false;
    fr.a = buf_slot(m, s->u.alloc.buf);
    return t_stmt(c, s->u.alloc.body, ctx) && t_emit(c, fr, 0, ctx);
  }
  case IR_EVALUATE: {
    if (!s->u.eval.value) return malformed(m, ctx, "evaluate without an expression");
    return t_emit(c, mkins(OP_STEP), 0, ctx) && t_expr(c, s->u.eval.value, ctx) &&
           t_emit(c, mkins(OP_POP), 0, ctx);
  }
  case IR_STORE: {
    const ir_buffer *b = s->u.store.buf;
    const ir_expr *v = s->u.store.value;
    if (!b || !v) return malformed(m, ctx, "store with a missing part");
    if (s->u.store.nidx != b->ndim)
      return fail(m, TS_EINVAL, ctx, "store to %s with %d indices, but it has %d dimensions", b->name,
                  s->u.store.nidx, b->ndim),
             false;
    if (b->dtype.lanes > 1 || b->dtype.code >= IR_HANDLE)
      return fail(m, TS_EUNSUPPORTED, ctx, "buffer %s of dtype %s is not supported", b->name,
                  dtstr(b->dtype, b1)),
             false;
    if (v->dtype.code != b->dtype.code)
      return fail(m, TS_ETYPE, ctx, "store of a %s value into buffer %s of dtype %s",
                  dtstr(v->dtype, b1), b->name, dtstr(b->dtype, b2)),
             false;
    int32_t bs = buf_slot(m, b);
    if (bs < 0) return oom(m), false;
    const ir_expr *pred = s->u.store.predicate;
    bool has_pred = pred && !(pred->kind == IR_INT_IMM && pred->u.ival != 0);
    if (has_pred && (!t_expr(c, pred, ctx) || !t_emit(c, mkins(OP_SMASK), P_PUSH, ctx))) return false;
    for (int i = 0; i < s->u.store.nidx; i++) {
      if (!s->u.store.idx || !s->u.store.idx[i]) return malformed(m, ctx, "store with a missing index");
      if (!t_expr(c, s->u.store.idx[i], ctx)) return false;
    }
    ins in = mkins(OP_STORE);
    in.a = bs;
    in.b = s->u.store.nidx;
    if (!t_expr(c, v, ctx) || !t_emit(c, in, 0, ctx)) return false;
    return has_pred ? t_emit(c, mkins(OP_SMASK_POP), P_POP_HERE, ctx) : true;
  }
  default:
    return malformed(m, ctx, "unknown statement kind");
  }
}

/* Compiles a statement (or, with s NULL, the n expressions es, each followed
 * by OP_OUT i) ending in OP_HALT; returns the entry pc or -1 on error. */
static int32_t compile(vm *m, const ir_stmt *s, int n, ir_expr *const *es) {
  compiler c;
  memset(&c, 0, sizeof c);
  c.m = m;
  m->npatch = 0;
  int32_t entry = m->ncode;
  bool ok = true;
  if (s) {
    ok = t_stmt(&c, s, NULL);
  } else {
    for (int i = 0; ok && i < n; i++) {
      ins o = mkins(OP_OUT);
      o.a = i;
      ok = es[i] ? t_expr(&c, es[i], NULL) && t_emit(&c, o, 0, NULL) : malformed(m, NULL, "missing expression");
    }
  }
  ok = ok && flush_tmp(&c);
  while (ok && c.n > 0) {
    task t = c.stk[--c.n];
    switch (t.kind) {
    case T_EXPR: ok = plan_expr(&c, t.node, t.ctx); break;
    case T_STMT: ok = plan_stmt(&c, t.node, t.ctx); break;
    case T_PATCH_HERE:
      m->code[m->patch[--m->npatch]].a = m->ncode;
      break;
    case T_EMIT: {
      int32_t pc = m->ncode;
      if (t.flags & (P_POP_HERE | P_POP_NEXT)) {
        int32_t p = m->patch[--m->npatch];
        m->code[p].a = (t.flags & P_POP_HERE) ? pc : pc + 1;
      }
      if (t.flags & P_POP_FOR) {
        int32_t p = m->patch[--m->npatch];
        m->code[p].a = pc + 1;
        t.in.a = p + 1;
      }
      ok = emit(m, t.in);
      if (ok && (t.flags & P_PUSH)) ok = push_patch(m, pc);
      break;
    }
    }
    ok = ok && flush_tmp(&c);
  }
  ok = ok && emit(m, mkins(OP_HALT));
  ts_free(c.stk);
  ts_free(c.tmp);
  if (!ok && m->st == TS_OK) oom(m);
  return ok ? entry : -1;
}

/* ---- execution -------------------------------------------------------------- */

static inline cell *vpush(vm *m, ir_dtype dt) {
  uint32_t lanes = dt.lanes ? dt.lanes : 1;
  dt.lanes = (uint16_t)lanes;
  if ((m->vn >= m->vcap || m->cn + lanes > m->ccap) &&
      (!growu((void **)&m->vs, &m->vcap, (uint64_t)m->vn + 1, sizeof *m->vs) ||
       !growu((void **)&m->cs, &m->ccap, (uint64_t)m->cn + lanes, sizeof *m->cs))) {
    oom(m);
    return NULL;
  }
  m->vs[m->vn].dt = dt;
  m->vs[m->vn].off = m->cn;
  m->vn++;
  cell *r = m->cs + m->cn;
  m->cn += lanes;
  return r;
}

static void vpop(vm *m, uint32_t n) {
  m->vn -= n;
  m->cn = m->vn ? m->vs[m->vn - 1].off + m->vs[m->vn - 1].dt.lanes : 0;
}

/* Replaces the n entries below the top one with the top one. */
static inline void vcollapse(vm *m, uint32_t n) {
  vent top = m->vs[m->vn - 1];
  uint32_t dst = m->vs[m->vn - 1 - n].off;
  if (top.dt.lanes == 1) m->cs[dst] = m->cs[top.off];
  else memmove(m->cs + dst, m->cs + top.off, top.dt.lanes * sizeof(cell));
  m->vn -= n;
  m->vs[m->vn - 1].dt = top.dt;
  m->vs[m->vn - 1].off = dst;
  m->cn = dst + top.dt.lanes;
}

static inline vent *vat(vm *m, uint32_t from_top) { return &m->vs[m->vn - 1 - from_top]; }
static inline cell *vcells(vm *m, const vent *e) { return m->cs + e->off; }
static inline cell lane(const cell *c, const vent *e, uint32_t i) { return e->dt.lanes == 1 ? c[0] : c[i]; }

/* The active mask for an operation over `lanes` lanes, or NULL when every
 * lane is active (no mask, or a mask of another width: then the operation
 * only runs because some lane is active, and it feeds all lanes). */
static const uint8_t *cur_mask(vm *m, uint32_t lanes) {
  if (!m->mn) return NULL;
  ment *t = &m->ms[m->mn - 1];
  return t->lanes == lanes && lanes > 1 ? m->mpool + t->off : NULL;
}

/* Pushes the mask (outer & cond) or (outer & !cond); returns the number of
 * active lanes, or -1 on OOM. */
static int64_t mask_push(vm *m, const vent *cond, bool negate) {
  uint32_t lanes = cond->dt.lanes;
  uint32_t outer_lanes = m->mn ? m->ms[m->mn - 1].lanes : 0;
  if (!growu((void **)&m->ms, &m->mcap, (uint64_t)m->mn + 1, sizeof *m->ms) ||
      !growu((void **)&m->mpool, &m->mpcap, (uint64_t)m->mpn + lanes + outer_lanes, 1)) {
    oom(m);
    return -1;
  }
  const uint8_t *outer = m->mn ? m->mpool + m->ms[m->mn - 1].off : NULL;
  const cell *cc = vcells(m, cond);
  uint8_t *mk = m->mpool + m->mpn;
  int64_t active = 0;
  if (lanes == 1 && outer && outer_lanes > 1 && (cc[0].i != 0) != negate) {
    /* a scalar condition that holds keeps the outer vector mask */
    for (uint32_t i = 0; i < outer_lanes; i++) active += (mk[i] = outer[i]);
    m->ms[m->mn].lanes = outer_lanes;
    m->ms[m->mn].off = m->mpn;
    m->mn++;
    m->mpn += outer_lanes;
    return active;
  }
  for (uint32_t i = 0; i < lanes; i++) {
    bool on = (cc[i].i != 0) != negate;
    if (outer && outer_lanes == lanes) on = on && outer[i];
    else if (outer && outer_lanes == 1) on = on && outer[0];
    mk[i] = on;
    active += on;
  }
  m->ms[m->mn].lanes = lanes;
  m->ms[m->mn].off = m->mpn;
  m->mn++;
  m->mpn += lanes;
  return active;
}

static void mask_pop(vm *m) {
  m->mn--;
  m->mpn = m->ms[m->mn].off;
}

static bool push_zero(vm *m, ir_dtype dt) {
  cell *r = vpush(m, dt);
  if (!r) return false;
  memset(r, 0, (dt.lanes ? dt.lanes : 1) * sizeof(cell));
  return true;
}

static bool step(vm *m, const ins *in) {
  if (++m->steps > m->max_steps) {
    fail(m, TS_ERUNTIME, in->ctx,
         "interpreter: iteration limit exceeded (more than %" PRIu64 " statement executions)",
         m->max_steps);
    return false;
  }
  return true;
}

static bool int_binop(vm *m, const ins *in, int k, int code, int64_t x, int64_t y, int64_t *out) {
  uint64_t ux = (uint64_t)x, uy = (uint64_t)y;
  switch (k) {
  case IR_ADD: *out = wrap_int(code, ux + uy); return true;
  case IR_SUB: *out = wrap_int(code, ux - uy); return true;
  case IR_MUL: *out = wrap_int(code, ux * uy); return true;
  case IR_DIV: case IR_FLOORDIV: case IR_FLOORMOD: {
    if (y == 0) {
      fail(m, TS_ERUNTIME, in->ctx, "integer division by zero (%s of %" PRId64 " by 0)",
           ir_binop_symbol((ir_expr_kind)k), x);
      return false;
    }
    int64_t q, r;
    if (y == -1) {
      q = (int64_t)(0 - ux);
      r = 0;
    } else {
      q = x / y;
      r = x % y;
    }
    if (k == IR_DIV) *out = wrap_int(code, (uint64_t)q);
    else if (k == IR_FLOORDIV) *out = wrap_int(code, (uint64_t)(r != 0 && ((r < 0) != (y < 0)) ? q - 1 : q));
    else *out = wrap_int(code, (uint64_t)(r != 0 && ((r < 0) != (y < 0)) ? r + y : r));
    return true;
  }
  case IR_MIN: *out = x < y ? x : y; return true;
  case IR_MAX: *out = x > y ? x : y; return true;
  case IR_EQ: *out = x == y; return true;
  case IR_NE: *out = x != y; return true;
  case IR_LT: *out = x < y; return true;
  case IR_LE: *out = x <= y; return true;
  case IR_GT: *out = x > y; return true;
  case IR_GE: *out = x >= y; return true;
  case IR_AND: *out = x && y; return true;
  case IR_OR: *out = x || y; return true;
  default: return false;
  }
}

static cell flt_binop(int k, int code, double x, double y) {
  cell r;
  switch (k) {
  case IR_ADD: r.f = x + y; break;
  case IR_SUB: r.f = x - y; break;
  case IR_MUL: r.f = x * y; break;
  case IR_DIV: r.f = x / y; break;
  case IR_FLOORDIV: r.f = floor(x / y); break;
  case IR_FLOORMOD: r.f = x - floor(x / y) * y; break;
  case IR_MIN: r.f = (isnan(x) || isnan(y)) ? NAN : (x < y ? x : y); break;
  case IR_MAX: r.f = (isnan(x) || isnan(y)) ? NAN : (x > y ? x : y); break;
  case IR_EQ: r.i = x == y; return r;
  case IR_NE: r.i = x != y; return r;
  case IR_LT: r.i = x < y; return r;
  case IR_LE: r.i = x <= y; return r;
  case IR_GT: r.i = x > y; return r;
  case IR_GE: r.i = x >= y; return r;
  case IR_AND: r.i = x != 0 && y != 0; return r;
  case IR_OR: r.i = x != 0 || y != 0; return r;
  default: r.f = NAN; break;
  }
  r.f = round_to(code, r.f);
  return r;
}

static double intrin(int op, double a, double b, double c) {
  switch (op) {
  case IR_EXP: return exp(a);
  case IR_LOG: return log(a);
  case IR_SQRT: return sqrt(a);
  case IR_RSQRT: return 1.0 / sqrt(a);
  case IR_TANH: return tanh(a);
  case IR_ERF: return erf(a);
  case IR_SIGMOID: return 1.0 / (1.0 + exp(-a));
  case IR_POW: return pow(a, b);
  case IR_FMA: return fma(a, b, c);
  case IR_ABS: return fabs(a);
  case IR_FLOOR: return floor(a);
  case IR_CEIL: return ceil(a);
  case IR_ROUND: return nearbyint(a); /* the default rounding mode: half to even */
  case IR_SIN: return sin(a);
  case IR_COS: return cos(a);
  default: return NAN;
  }
}

/* Lanes of the result of combining operands with lanes a and b. */
static bool join_lanes(vm *m, const ins *in, uint32_t a, uint32_t b, uint32_t *out) {
  if (a == b || b == 1) *out = a;
  else if (a == 1) *out = b;
  else {
    fail(m, TS_ETYPE, in->ctx, "lane count mismatch: %u lanes against %u", a, b);
    return false;
  }
  return true;
}

/* Flat element offset of idx in buffer bs, with bounds checks. */
static bool flat_offset(vm *m, const ins *in, const bslot *bs, const int64_t *idx, const char *what,
                        int64_t *out) {
  int64_t off = bs->offset;
  for (int d = 0; d < bs->ndim; d++) {
    if (idx[d] < 0 || idx[d] >= bs->shape[d]) {
      char buf[512];
      size_t n = 0;
      for (int j = 0; j < bs->ndim && n < sizeof buf - 32; j++)
        n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%" PRId64, j ? ", " : "", idx[j]);
      fail(m, TS_EBOUNDS, in->ctx,
           "out-of-bounds %s %s[%s]: index %" PRId64 " of dimension %d is outside [0, %" PRId64 ")",
           what, bs->buf->name, buf, idx[d], d, bs->shape[d]);
      return false;
    }
    off += idx[d] * bs->strides[d];
  }
  if (off < 0 || off >= bs->storage) {
    fail(m, TS_EBOUNDS, in->ctx,
         "out-of-bounds %s %s: element offset %" PRId64 " is outside its storage of %" PRId64
         " elements",
         what, bs->buf->name, off, bs->storage);
    return false;
  }
  *out = off;
  return true;
}

/* Gathers per-lane indices from the top nidx stack entries. */
/* The flat offset of lane i of an access whose nidx index vectors sit on the
 * stack below the top; ip has room for nidx indices. */
static bool lane_offset(vm *m, const ins *in, const bslot *bs, int nidx, uint32_t i, int64_t *ip,
                        const char *what, int64_t *off) {
  for (int j = 0; j < nidx; j++) {
    const vent *e = vat(m, (uint32_t)(nidx - j));
    ip[j] = lane(vcells(m, e), e, i).i;
  }
  return flat_offset(m, in, bs, ip, what, off);
}

static bool gather_idx(vm *m, const ins *in, int nidx, uint32_t *lanes) {
  uint32_t l = 1;
  for (int j = 0; j < nidx; j++) {
    const vent *e = vat(m, (uint32_t)(nidx - 1 - j));
    if (code_float(e->dt.code)) {
      fail(m, TS_ETYPE, in->ctx, "buffer index %d is a float", j);
      return false;
    }
    if (!join_lanes(m, in, l, e->dt.lanes, &l)) return false;
  }
  *lanes = l;
  return true;
}

static bool set_strides(vm *m, bslot *bs, const ins *in) {
  int64_t st = 1;
  for (int d = bs->ndim - 1; d >= 0; d--) {
    if (bs->shape[d] < 0) {
      fail(m, TS_ERUNTIME, in ? in->ctx : NULL, "buffer %s: dimension %d has negative extent %" PRId64,
           bs->buf->name, d, bs->shape[d]);
      return false;
    }
    bs->strides[d] = st;
    if (bs->shape[d] && st > INT64_MAX / 64 / bs->shape[d]) {
      fail(m, TS_ERUNTIME, in ? in->ctx : NULL, "buffer %s is too large", bs->buf->name);
      return false;
    }
    st *= bs->shape[d];
  }
  return true;
}

static ts_status exec(vm *m, int32_t pc) {
  char b1[24], b2[24];
  for (;;) {
    const ins *in = &m->code[pc];
    switch (in->op) {
    case OP_HALT:
      return TS_OK;
    case OP_CONST: {
      cell *r = vpush(m, in->dt);
      if (!r) return m->st;
      for (uint32_t i = 0; i < in->dt.lanes; i++) r[i] = in->k;
      break;
    }
    case OP_VAR: {
      const vslot *v = &m->vars[in->a];
      if (!v->bound)
        return fail(m, TS_ERUNTIME, in->ctx, "variable %s is used outside its scope (unbound)",
                    v->var->name);
      cell *r = vpush(m, v->dt);
      if (!r) return m->st;
      memcpy(r, m->vars[in->a].val, v->dt.lanes * sizeof(cell));
      break;
    }
    case OP_BINOP: {
      vent ea = *vat(m, 1), eb = *vat(m, 0);
      uint32_t l;
      if (!join_lanes(m, in, ea.dt.lanes, eb.dt.lanes, &l)) return m->st;
      bool fa = code_float(ea.dt.code), fb = code_float(eb.dt.code);
      if (fa != fb)
        return fail(m, TS_ETYPE, in->ctx, "operands of %s have dtypes %s and %s (write a cast)",
                    ir_binop_name((ir_expr_kind)in->sub), dtstr(ea.dt, b1), dtstr(eb.dt, b2));
      ir_dtype rdt = in->dt;
      rdt.lanes = (uint16_t)l;
      int code = ir_is_cmp((ir_expr_kind)in->sub) || in->sub == IR_AND || in->sub == IR_OR ? IR_BOOL
                                                                                           : in->dt.code;
      cell *r = vpush(m, rdt);
      if (!r) return m->st;
      const cell *ca = vcells(m, &ea), *cb = vcells(m, &eb);
      const uint8_t *mk = cur_mask(m, l);
      for (uint32_t i = 0; i < l; i++) {
        cell x = lane(ca, &ea, i), y = lane(cb, &eb, i);
        if (fa) {
          r[i] = flt_binop(in->sub, code, x.f, y.f);
        } else if (mk && !mk[i] && y.i == 0) {
          r[i].i = 0; /* masked-off lane: no division-by-zero error */
        } else if (!int_binop(m, in, in->sub, code, x.i, y.i, &r[i].i)) {
          return m->st;
        }
      }
      vcollapse(m, 2);
      break;
    }
    case OP_NOT: {
      vent *e = vat(m, 0);
      cell *c = vcells(m, e);
      bool fl = code_float(e->dt.code);
      for (uint32_t i = 0; i < e->dt.lanes; i++) c[i].i = fl ? c[i].f == 0 : c[i].i == 0;
      e->dt.code = IR_BOOL;
      break;
    }
    case OP_CAST: {
      vent *e = vat(m, 0);
      cell *c = vcells(m, e);
      for (uint32_t i = 0; i < e->dt.lanes; i++) c[i] = cast_cell(c[i], e->dt.code, in->dt.code);
      e->dt.code = in->dt.code;
      break;
    }
    case OP_EXTERN: {
      const struct extern_impl *x = &extern_table[in->sub];
      int n = in->a;
      uint8_t bytes[3][MAX_EXTERN_BYTES], ob[MAX_EXTERN_BYTES];
      const uint8_t *ap[3];
      for (int j = 0; j < n; j++) {
        const vent *e = vat(m, (uint32_t)(n - 1 - j));
        const cell *c = vcells(m, e);
        for (uint32_t i = 0; i < e->dt.lanes; i++) mem_set(bytes[j], e->dt.code, (int64_t)i, c[i]);
        ap[j] = bytes[j];
      }
      x->fn(ap, ob, x->ret.lanes, code_bytes(x->ret.code));
      vpop(m, (uint32_t)n);
      cell *r = vpush(m, in->dt);
      if (!r) return m->st;
      for (uint32_t i = 0; i < in->dt.lanes; i++) r[i] = mem_get(ob, in->dt.code, (int64_t)i);
      break;
    }
    case OP_REINTERP: {
      uint8_t bytes[MAX_EXTERN_BYTES];
      const vent *e = vat(m, 0);
      const cell *c = vcells(m, e);
      for (uint32_t i = 0; i < e->dt.lanes; i++) mem_set(bytes, e->dt.code, (int64_t)i, c[i]);
      vpop(m, 1);
      cell *r = vpush(m, in->dt);
      if (!r) return m->st;
      for (uint32_t i = 0; i < in->dt.lanes; i++) r[i] = mem_get(bytes, in->dt.code, (int64_t)i);
      break;
    }
    case OP_CALL: {
      int n = in->a;
      uint32_t l = 1;
      for (int j = 0; j < n; j++) {
        const vent *e = vat(m, (uint32_t)(n - 1 - j));
        if (!join_lanes(m, in, l, e->dt.lanes, &l)) return m->st;
        if (code_float(e->dt.code) != code_float(in->dt.code))
          return fail(m, TS_ETYPE, in->ctx, "argument %d of %s has dtype %s, the call %s", j,
                      ir_intrin_name((ir_intrin)in->sub), dtstr(e->dt, b1), dtstr(in->dt, b2));
      }
      ir_dtype rdt = in->dt;
      rdt.lanes = (uint16_t)l;
      cell *r = vpush(m, rdt);
      if (!r) return m->st;
      bool fl = code_float(in->dt.code);
      for (uint32_t i = 0; i < l; i++) {
        double a[3] = {0, 0, 0};
        for (int j = 0; j < n; j++) {
          const vent *e = vat(m, (uint32_t)(n - j)); /* +1: result on top */
          cell c = lane(vcells(m, e), e, i);
          a[j] = fl ? c.f : (double)c.i;
        }
        if (fl) {
          r[i].f = round_to(in->dt.code, intrin(in->sub, a[0], a[1], a[2]));
        } else { /* integer abs */
          cell c = lane(vcells(m, vat(m, 1)), vat(m, 1), i);
          r[i].i = wrap_int(in->dt.code, c.i < 0 ? 0 - (uint64_t)c.i : (uint64_t)c.i);
        }
      }
      vcollapse(m, (uint32_t)n);
      break;
    }
    case OP_LOAD: {
      bslot *bs = &m->bufs[in->a];
      if (!bs->bound)
        return fail(m, TS_ERUNTIME, in->ctx,
                    "load from buffer %s, which is neither a parameter nor allocated here",
                    bs->buf->name);
      int nidx = in->b;
      uint32_t l;
      if (!gather_idx(m, in, nidx, &l)) return m->st;
      ir_dtype rdt = {(uint8_t)bs->code, (uint16_t)l};
      cell *r = vpush(m, rdt);
      if (!r) return m->st;
      const uint8_t *mk = cur_mask(m, l);
      int64_t idx[64], *ip = idx;
      if (nidx > 64 && !(ip = ts_malloc((size_t)nidx * sizeof *ip))) return oom(m);
      for (uint32_t i = 0; i < l; i++) {
        if (mk && !mk[i]) {
          r[i].i = 0;
          continue;
        }
        int64_t off;
        if (!lane_offset(m, in, bs, nidx, i, ip, "load", &off)) {
          if (ip != idx) ts_free(ip);
          return m->st;
        }
        r[i] = mem_get(bs->data, bs->code, off);
      }
      if (ip != idx) ts_free(ip);
      vcollapse(m, (uint32_t)nidx);
      break;
    }
    case OP_RAMP: {
      vent eb = *vat(m, 1), es = *vat(m, 0);
      if (eb.dt.lanes != 1 || es.dt.lanes != 1)
        return fail(m, TS_ETYPE, in->ctx, "ramp base and stride must be scalars");
      cell base = vcells(m, &eb)[0], stride = vcells(m, &es)[0];
      bool fl = code_float(in->dt.code);
      cell *r = vpush(m, in->dt);
      if (!r) return m->st;
      for (uint32_t i = 0; i < (uint32_t)in->b; i++) {
        if (fl) r[i].f = round_to(in->dt.code, base.f + (double)i * stride.f);
        else r[i].i = wrap_int(in->dt.code, (uint64_t)base.i + (uint64_t)i * (uint64_t)stride.i);
      }
      vcollapse(m, 2);
      break;
    }
    case OP_BCAST: {
      vent e = *vat(m, 0);
      if (e.dt.lanes != 1) return fail(m, TS_ETYPE, in->ctx, "broadcast of a vector value");
      cell v = vcells(m, &e)[0];
      ir_dtype rdt = {e.dt.code, (uint16_t)in->b};
      cell *r = vpush(m, rdt);
      if (!r) return m->st;
      for (uint32_t i = 0; i < (uint32_t)in->b; i++) r[i] = v;
      vcollapse(m, 1);
      break;
    }
    case OP_MASK_T:
    case OP_MASK_F: { /* F: the true side's mask is replaced by its complement */
      bool negate = in->op == OP_MASK_F;
      if (negate) mask_pop(m);
      const vent *cd = vat(m, negate ? 1 : 0);
      if (!negate && code_float(cd->dt.code)) return fail(m, TS_ETYPE, in->ctx, "select condition is a float");
      int64_t act = mask_push(m, cd, negate);
      if (act < 0) return m->st;
      if (act == 0) {
        if (!push_zero(m, in->dt)) return m->st;
        pc = in->a;
        continue;
      }
      break;
    }
    case OP_SEL_END: {
      mask_pop(m);
      vent ec = *vat(m, 2), et = *vat(m, 1), ef = *vat(m, 0);
      uint32_t l;
      if (!join_lanes(m, in, ec.dt.lanes, et.dt.lanes, &l) || !join_lanes(m, in, l, ef.dt.lanes, &l))
        return m->st;
      if (code_float(et.dt.code) != code_float(ef.dt.code))
        return fail(m, TS_ETYPE, in->ctx, "select sides have dtypes %s and %s", dtstr(et.dt, b1),
                    dtstr(ef.dt, b2));
      ir_dtype rdt = in->dt;
      rdt.lanes = (uint16_t)l;
      cell *r = vpush(m, rdt);
      if (!r) return m->st;
      const cell *cc = vcells(m, &ec), *ct = vcells(m, &et), *cf = vcells(m, &ef);
      for (uint32_t i = 0; i < l; i++) r[i] = lane(cc, &ec, i).i ? lane(ct, &et, i) : lane(cf, &ef, i);
      vcollapse(m, 3);
      break;
    }
    case OP_POP:
      vpop(m, 1);
      break;
    case OP_OUT: {
      const vent *e = vat(m, 0);
      cell c = vcells(m, e)[0];
      m->out[in->a] = code_float(e->dt.code) ? f2i(c.f) : c.i;
      vpop(m, 1);
      break;
    }
    case OP_JZ:
    case OP_BLOCK_PRED: {
      const vent *e = vat(m, 0);
      if (e->dt.lanes != 1)
        return fail(m, TS_ETYPE, in->ctx, "%s is a vector", in->op == OP_JZ ? "if condition" : "block predicate");
      cell c = vcells(m, e)[0];
      bool t = code_float(e->dt.code) ? c.f != 0 : c.i != 0;
      vpop(m, 1);
      if (!t) {
        pc = in->a;
        continue;
      }
      break;
    }
    case OP_JMP:
      pc = in->a;
      continue;
    case OP_FOR_BEGIN: {
      vent emin = *vat(m, 1), eext = *vat(m, 0);
      vslot *v = &m->vars[in->c];
      if (emin.dt.lanes != 1 || eext.dt.lanes != 1 || code_float(emin.dt.code) || code_float(eext.dt.code))
        return fail(m, TS_ETYPE, in->ctx, "loop %s: min and extent must be scalar integers", v->var->name);
      int64_t mn = vcells(m, &emin)[0].i, ext = vcells(m, &eext)[0].i;
      vpop(m, 2);
      if (ext > MAX_LOOP_EXTENT)
        return fail(m, TS_ERUNTIME, in->ctx, "loop %s has %" PRId64 " iterations (the limit is 2^40)",
                    v->var->name, ext);
      if (v->bound)
        return fail(m, TS_ERUNTIME, in->ctx, "loop variable %s is bound twice (nested loops over one variable)",
                    v->var->name);
      if (ext <= 0) {
        pc = in->a;
        continue;
      }
      if (!step(m, in)) return m->st;
      v->bound = true;
      v->val[0].i = mn;
      m->loop_end[in->b] = mn + ext;
      break;
    }
    case OP_FOR_NEXT: {
      vslot *v = &m->vars[in->c];
      int64_t nx = v->val[0].i + 1;
      if (nx < m->loop_end[in->b]) {
        if (!step(m, in)) return m->st;
        v->val[0].i = nx;
        pc = in->a;
        continue;
      }
      v->bound = false;
      break;
    }
    case OP_BLOCK_ENTER: {
      blkrt *rt = &m->blks[in->a];
      const ir_block *b = rt->blk;
      uint32_t n = (uint32_t)b->niter, np = 0;
      if (!step(m, in)) return m->st;
      for (uint32_t i = 0; i < n; i++) np += rt->dom_const[i] ? 1 : 3;
      uint32_t at = np; /* entries from the top, counting down */
      for (uint32_t i = 0; i < n; i++) {
        vslot *v = &m->vars[rt->slots[i]];
        const vent *ev = vat(m, --at);
        int64_t mn, ex;
        bool bad = ev->dt.lanes != 1 || code_float(ev->dt.code);
        if (rt->dom_const[i]) {
          mn = rt->dom_min[i];
          ex = rt->dom_ext[i];
        } else {
          const vent *emn = vat(m, --at), *eex = vat(m, --at);
          bad = bad || emn->dt.lanes != 1 || eex->dt.lanes != 1 || code_float(emn->dt.code) ||
                code_float(eex->dt.code);
          mn = vcells(m, emn)[0].i;
          ex = vcells(m, eex)[0].i;
        }
        if (bad)
          return fail(m, TS_ETYPE, in->ctx, "iter var %s: binding and domain must be scalar integers",
                      v->var->name);
        int64_t val = vcells(m, ev)[0].i;
        if (val < mn || val - mn >= ex)
          return fail(m, TS_ERUNTIME, in->ctx,
                      "iter var %s = %" PRId64 " is outside its domain [%" PRId64 ", %" PRId64 ")",
                      v->var->name, val, mn, mn + ex);
        if (v->bound)
          return fail(m, TS_ERUNTIME, in->ctx, "iter var %s is bound twice", v->var->name);
        v->bound = true;
        v->val[0].i = val;
        rt->dom_min[i] = mn;
      }
      vpop(m, np);
      break;
    }
    case OP_INIT_CHECK: {
      const blkrt *rt = &m->blks[in->b];
      bool first = true;
      for (int i = 0; i < rt->blk->niter && first; i++)
        if (rt->blk->iters[i].type == IR_ITER_R && m->vars[rt->slots[i]].val[0].i != rt->dom_min[i])
          first = false;
      if (!first) {
        pc = in->a;
        continue;
      }
      break;
    }
    case OP_BLOCK_EXIT: {
      const blkrt *rt = &m->blks[in->a];
      for (int i = 0; i < rt->blk->niter; i++) m->vars[rt->slots[i]].bound = false;
      break;
    }
    case OP_LET: {
      vslot *v = &m->vars[in->a];
      const vent *e = vat(m, 0);
      if (!step(m, in)) return m->st;
      if (v->bound) return fail(m, TS_ERUNTIME, in->ctx, "let variable %s is bound twice", v->var->name);
      if (e->dt.lanes != v->dt.lanes || code_float(e->dt.code) != code_float(v->dt.code))
        return fail(m, TS_ETYPE, in->ctx, "let %s: %s value for a %s variable", v->var->name,
                    dtstr(e->dt, b1), dtstr(v->dt, b2));
      const cell *c = vcells(m, e);
      for (uint32_t i = 0; i < v->dt.lanes; i++) v->val[i] = cast_cell(c[i], e->dt.code, v->dt.code);
      v->bound = true;
      vpop(m, 1);
      break;
    }
    case OP_UNBIND:
      m->vars[in->a].bound = false;
      break;
    case OP_ALLOC: {
      bslot *bs = &m->bufs[in->a];
      const ir_buffer *b = bs->buf;
      uint32_t nv = (uint32_t)b->ndim * (b->strides ? 2u : 1u) + (b->elem_offset ? 1u : 0u);
      if (bs->bound)
        return fail(m, TS_ERUNTIME, in->ctx, "buffer %s is allocated while already live", b->name);
      for (uint32_t i = 0; i < nv; i++) {
        const vent *e = vat(m, nv - 1 - i);
        if (e->dt.lanes != 1 || code_float(e->dt.code))
          return fail(m, TS_ETYPE, in->ctx, "buffer %s: shape, strides and offset must be scalar integers",
                      b->name);
      }
      uint32_t at = 0;
      for (int d = 0; d < b->ndim; d++) bs->shape[d] = vcells(m, vat(m, nv - 1 - at++))[0].i;
      if (!set_strides(m, bs, in)) return m->st;
      int64_t storage = 1;
      for (int d = 0; d < b->ndim; d++) storage *= bs->shape[d];
      bs->offset = 0;
      if (b->strides) {
        for (int d = 0; d < b->ndim; d++) bs->strides[d] = vcells(m, vat(m, nv - 1 - at++))[0].i;
      }
      if (b->elem_offset) bs->offset = vcells(m, vat(m, nv - 1 - at++))[0].i;
      if (b->strides || b->elem_offset) {
        int64_t hi = bs->offset;
        bool empty = false;
        for (int d = 0; d < b->ndim; d++) {
          if (bs->shape[d] == 0) empty = true;
          if (bs->strides[d] < 0)
            return fail(m, TS_EUNSUPPORTED, in->ctx, "buffer %s has a negative stride", b->name);
          if (bs->shape[d] > 0 && bs->strides[d] > INT64_MAX / 64 / bs->shape[d])
            return fail(m, TS_ERUNTIME, in->ctx, "buffer %s is too large", b->name);
          hi += (bs->shape[d] - 1) * bs->strides[d];
        }
        if (bs->offset < 0) return fail(m, TS_ERUNTIME, in->ctx, "buffer %s has a negative offset", b->name);
        storage = empty ? 0 : hi + 1;
      }
      vpop(m, nv);
      if (storage > MAX_ALLOC_BYTES / code_bytes(bs->code))
        return fail(m, TS_ERUNTIME, in->ctx, "buffer %s: %" PRId64 " elements is too large to allocate",
                    b->name, storage);
      bs->data = ts_malloc((size_t)(storage ? storage : 1) * (size_t)code_bytes(bs->code));
      if (!bs->data) return oom(m);
      poison(bs->data, bs->code, storage);
      bs->storage = storage;
      bs->bound = bs->owned = true;
      break;
    }
    case OP_FREE: {
      bslot *bs = &m->bufs[in->a];
      if (bs->owned) ts_free(bs->data);
      bs->data = NULL;
      bs->bound = bs->owned = false;
      break;
    }
    case OP_SMASK: {
      const vent *pd = vat(m, 0);
      if (code_float(pd->dt.code)) return fail(m, TS_ETYPE, in->ctx, "store predicate is a float");
      int64_t act = mask_push(m, pd, false);
      if (act < 0) return m->st;
      if (act == 0) {
        pc = in->a;
        continue;
      }
      break;
    }
    case OP_SMASK_POP:
      mask_pop(m);
      vpop(m, 1);
      break;
    case OP_STORE: {
      bslot *bs = &m->bufs[in->a];
      int nidx = in->b;
      if (!step(m, in)) return m->st;
      if (!bs->bound)
        return fail(m, TS_ERUNTIME, in->ctx,
                    "store to buffer %s, which is neither a parameter nor allocated here", bs->buf->name);
      const vent *ev = vat(m, 0);
      /* indices are below the value */
      uint32_t l = 1;
      for (int j = 0; j < nidx; j++) {
        const vent *e = vat(m, (uint32_t)(nidx - j));
        if (code_float(e->dt.code)) return fail(m, TS_ETYPE, in->ctx, "buffer index %d is a float", j);
        if (!join_lanes(m, in, l, e->dt.lanes, &l)) return m->st;
      }
      if (l == 1 && ev->dt.lanes > 1)
        return fail(m, TS_ETYPE, in->ctx, "store of a %u-lane value to one element of %s",
                    (unsigned)ev->dt.lanes, bs->buf->name);
      if (ev->dt.lanes != 1 && ev->dt.lanes != l)
        return fail(m, TS_ETYPE, in->ctx, "store to %s: %u-lane value, %u-lane index", bs->buf->name,
                    (unsigned)ev->dt.lanes, l);
      const uint8_t *mk = cur_mask(m, l);
      int64_t idx[64], *ip = idx;
      if (nidx > 64 && !(ip = ts_malloc((size_t)nidx * sizeof *ip))) return oom(m);
      const cell *cv = vcells(m, ev);
      for (uint32_t i = 0; i < l; i++) {
        if (mk && !mk[i]) continue;
        int64_t off;
        if (!lane_offset(m, in, bs, nidx, i, ip, "store", &off)) {
          if (ip != idx) ts_free(ip);
          return m->st;
        }
        mem_set(bs->data, bs->code, off, cast_cell(lane(cv, ev, i), ev->dt.code, bs->code));
      }
      if (ip != idx) ts_free(ip);
      vpop(m, (uint32_t)nidx + 1);
      break;
    }
    case OP_STEP:
      if (!step(m, in)) return m->st;
      break;
    default:
      return fail(m, TS_EINTERNAL, in->ctx, "interpreter: bad opcode %d", in->op);
    }
    pc++;
  }
}

/* Evaluates n integer expressions (syms bound as in m) into out. */
static ts_status eval_ints(vm *m, int n, ir_expr *const *es, int64_t *out) {
  if (n == 0) return TS_OK;
  int32_t pc = compile(m, NULL, n, es);
  if (pc < 0) return m->st;
  m->out = out;
  ts_status st = exec(m, pc);
  m->out = NULL;
  m->vn = m->cn = m->mn = m->mpn = 0;
  return st;
}

static ts_status bind_syms(vm *m, const ir_func *f, const int64_t *vals) {
  for (int i = 0; i < f->nsyms; i++) {
    if (!f->syms[i]) return fail(m, TS_EINVAL, NULL, "malformed IR: missing symbolic size var");
    int32_t s = var_slot(m, f->syms[i]);
    if (s < 0) return oom(m);
    m->vars[s].bound = true;
    m->vars[s].val[0].i = vals[i];
  }
  return TS_OK;
}

ts_status ir_tensors_for_func(const ir_func *f, const int64_t *sym_values, ir_tensor *out,
                              ts_diag *d) {
  for (int i = 0; i < f->nparams; i++) memset(&out[i], 0, sizeof out[i]);
  if (f->nsyms && !sym_values)
    return ts_diag_set(d, TS_EINVAL, "%s has symbolic sizes (%s, ...); give their values", f->name,
                       f->syms[0]->name);
  vm m;
  vm_init(&m, d);
  ts_status st = bind_syms(&m, f, sym_values);
  for (int i = 0; st == TS_OK && i < f->nparams; i++) {
    const ir_buffer *b = f->params[i];
    if (!b) {
      st = fail(&m, TS_EINVAL, NULL, "malformed IR: missing parameter %d", i);
      break;
    }
    if (b->ndim > 8) {
      st = fail(&m, TS_EUNSUPPORTED, NULL, "parameter %s has %d dimensions (at most 8)", b->name, b->ndim);
      break;
    }
    int64_t shape[8];
    st = eval_ints(&m, b->ndim, b->shape, shape);
    if (st != TS_OK) break;
    for (int k = 0; k < b->ndim; k++)
      if (shape[k] < 0) st = fail(&m, TS_ESHAPE, NULL, "parameter %s: dimension %d is %" PRId64, b->name, k, shape[k]);
    if (st != TS_OK) break;
    ir_dtype dt = b->dtype;
    st = ir_tensor_alloc(&out[i], dt, b->ndim, shape);
    if (st != TS_OK) st = fail(&m, st, NULL, "cannot allocate parameter %s: %s", b->name, ts_strerror(st));
  }
  vm_fini(&m);
  if (st != TS_OK)
    for (int i = 0; i < f->nparams; i++) ir_tensor_free(&out[i]);
  return st;
}

/* Binds param buffer slots to the argument tensors, inferring syms. */
static ts_status bind_params(vm *m, const ir_func *f, ir_tensor *args) {
  char b1[24], b2[24];
  int64_t *symv = ts_calloc((size_t)(f->nsyms ? f->nsyms : 1), sizeof *symv);
  bool *known = ts_calloc((size_t)(f->nsyms ? f->nsyms : 1), sizeof *known);
  ts_status st = TS_OK;
  if (!symv || !known) {
    st = oom(m);
    goto out;
  }
  for (int i = 0; i < f->nparams && st == TS_OK; i++) {
    const ir_buffer *b = f->params[i];
    const ir_tensor *t = &args[i];
    if (!b) {
      st = fail(m, TS_EINVAL, NULL, "malformed IR: missing parameter %d", i);
      break;
    }
    if (!t->data && ir_tensor_numel(t) > 0) {
      st = fail(m, TS_EINVAL, NULL, "argument %d (%s) has no data", i, b->name);
      break;
    }
    if (t->dtype.code != b->dtype.code || t->dtype.lanes != b->dtype.lanes) {
      st = fail(m, TS_ETYPE, NULL, "argument %d (%s): dtype %s, but the parameter is %s", i, b->name,
                dtstr(t->dtype, b1), dtstr(b->dtype, b2));
      break;
    }
    if (t->ndim != b->ndim) continue; /* checked below (or a flattened param) */
    for (int k = 0; k < b->ndim; k++) {
      const ir_expr *e = b->shape[k];
      if (!e || e->kind != IR_VAR) continue;
      for (int s = 0; s < f->nsyms; s++) {
        if (f->syms[s] != e->u.var) continue;
        if (known[s] && symv[s] != t->shape[k])
          st = fail(m, TS_ESHAPE, NULL,
                    "symbolic size %s is %" PRId64 " from an earlier argument but %" PRId64
                    " from dimension %d of argument %d (%s)",
                    e->u.var->name, symv[s], t->shape[k], k, i, b->name);
        known[s] = true;
        symv[s] = t->shape[k];
      }
    }
  }
  for (int s = 0; st == TS_OK && s < f->nsyms; s++)
    if (!known[s])
      st = fail(m, TS_EINVAL, NULL,
                "cannot infer symbolic size %s: it is not a bare dimension of any parameter (bind it "
                "with ir_func_bind_syms)",
                f->syms[s]->name);
  if (st == TS_OK) st = bind_syms(m, f, symv);
  for (int i = 0; i < f->nparams && st == TS_OK; i++) {
    const ir_buffer *b = f->params[i];
    const ir_tensor *t = &args[i];
    int32_t s = buf_slot(m, b);
    if (s < 0) {
      st = oom(m);
      break;
    }
    bslot *bs = &m->bufs[s];
    if (bs->bound) {
      st = fail(m, TS_EINVAL, NULL, "parameter %s appears twice", b->name);
      break;
    }
    st = eval_ints(m, b->ndim, b->shape, bs->shape);
    if (st != TS_OK) break;
    int64_t numel = ir_tensor_numel(t), pn = 1;
    for (int k = 0; k < b->ndim; k++) pn *= bs->shape[k];
    if (t->ndim != b->ndim) {
      if (!(b->ndim == 1 && numel == pn)) {
        st = fail(m, TS_ESHAPE, NULL, "argument %d (%s) has %d dimensions, but the parameter has %d", i,
                  b->name, t->ndim, b->ndim);
        break;
      }
    } else {
      for (int k = 0; k < b->ndim; k++)
        if (bs->shape[k] != t->shape[k]) {
          st = fail(m, TS_ESHAPE, NULL,
                    "argument %d (%s): dimension %d is %" PRId64 ", but the parameter wants %" PRId64, i,
                    b->name, k, t->shape[k], bs->shape[k]);
          break;
        }
      if (st != TS_OK) break;
    }
    if (!set_strides(m, bs, NULL)) {
      st = m->st;
      break;
    }
    bs->offset = 0;
    if (b->strides) {
      st = eval_ints(m, b->ndim, b->strides, bs->strides);
      if (st != TS_OK) break;
    }
    if (b->elem_offset) {
      st = eval_ints(m, 1, &b->elem_offset, &bs->offset);
      if (st != TS_OK) break;
    }
    bs->storage = numel;
    bs->data = t->data;
    bs->bound = true;
    bs->owned = false;
  }
out:
  ts_free(symv);
  ts_free(known);
  return st;
}

static ts_status run_opts(const ir_func *f, ir_tensor *args, const ir_interp_opts *o, ts_diag *d) {
  if (!f || (!args && f->nparams)) return ts_diag_set(d, TS_EINVAL, "interpreter: no function or arguments");
  if (!f->body) return ts_diag_set(d, TS_EINVAL, "interpreter: function %s has no body", f->name);
  vm m;
  vm_init(&m, d);
  if (o && o->max_steps) m.max_steps = o->max_steps;
  ts_status st = bind_params(&m, f, args);
  if (st == TS_OK) {
    int32_t pc = compile(&m, f->body, 0, NULL);
    st = pc < 0 ? m.st : exec(&m, pc);
  }
  if (st != TS_OK && (!d || d->code == TS_OK)) ts_diag_set(d, st, "interpreter: %s", ts_strerror(st));
  if (o && o->steps) *o->steps = m.steps;
  vm_fini(&m);
  return st;
}

ts_status ir_interp_run(const ir_func *f, ir_tensor *args, ts_diag *d) { return run_opts(f, args, NULL, d); }

ts_status ir_interp_run_opts(const ir_func *f, ir_tensor *args, const ir_interp_opts *opts, ts_diag *d) {
  return run_opts(f, args, opts, d);
}
