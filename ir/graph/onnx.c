/* onnx.c — ONNX import (onnx.h): protobuf-c unpacks the model through the
 * allocation hook, then one table row per operator (opset, input/output
 * counts, attributes) and one handler per op build the canonical graph node
 * by node. Small int64 tensors known at import are tracked so a computed
 * Reshape still gets exact dims. docs/GRAPH.md, docs/IR.md ("Notes by file"). */
#include "onnx.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx.pb-c.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "onnx.c reads raw_data as host order: a little-endian host is required"
#endif

#define MAX_RANK 16
#define MAX_IO 64
#define MAX_ATTRS 24
#define MAX_KNOWN 4096              /* elements tracked for a known int tensor */
#define MAX_ELEMS ((int64_t)1 << 40) /* no tensor is larger */

/* ---- protobuf-c allocation through ts_malloc (fault injection reaches it) -- */
static void *pb_alloc(void *ud, size_t n) {
  (void)ud;
  return ts_malloc(n ? n : 1);
}
static void pb_free(void *ud, void *p) {
  (void)ud;
  ts_free(p);
}
static ProtobufCAllocator pb_allocator = {.alloc = pb_alloc, .free = pb_free, .allocator_data = NULL};

/* ---- dtypes ---------------------------------------------------------------- */
bool tg_onnx_dtype(int t, ir_dtype *out) {
  ir_dtype_code c;
  switch (t) {
  case 1: c = IR_F32; break;
  case 2: c = IR_U8; break;
  case 3: c = IR_I8; break;
  case 5: c = IR_I16; break;
  case 6: c = IR_I32; break;
  case 7: c = IR_I64; break;
  case 9: c = IR_BOOL; break;
  case 10: c = IR_F16; break;
  case 11: c = IR_F64; break;
  case 12: c = IR_U32; break;
  case 16: c = IR_BF16; break;
  default: return false;
  }
  if (out) *out = ir_dt(c);
  return true;
}

static const char *onnx_type_name(int t) {
  static const char *const names[] = {"UNDEFINED", "FLOAT",     "UINT8",      "INT8",      "UINT16",
                                      "INT16",     "INT32",     "INT64",      "STRING",    "BOOL",
                                      "FLOAT16",   "DOUBLE",    "UINT32",     "UINT64",    "COMPLEX64",
                                      "COMPLEX128", "BFLOAT16", "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ",
                                      "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "UINT4", "INT4", "FLOAT4E2M1"};
  return t >= 0 && t < (int)(sizeof names / sizeof *names) ? names[t] : "unknown";
}

/* ---- the importer's state ------------------------------------------------- */
typedef struct known {
  int n; /* -1: contents unknown */
  tg_dim *d;
} known;

typedef struct imp {
  tg_graph *g;
  ts_arena *a;
  ts_diag *d;
  const char *label;
  int opset;
  known *kv; /* by value id */
  int nkv;
  int nunk;  /* made-up symbols so far */
} imp;

/* One node being imported. */
typedef struct nctx {
  const Onnx__NodeProto *np;
  const char *name; /* for messages: the ONNX name or "#<index>" */
  tg_op op;
  int nin;
  int in[MAX_IO];
  int nout;
  const char *outname[MAX_IO];
  ir_dtype odt[MAX_IO];
  int ondim[MAX_IO];
  tg_dim odims[MAX_IO][MAX_RANK];
  int nattr;
  tg_attr attr[MAX_ATTRS];
  /* set by handlers */
  bool to_const;     /* Constant: becomes a constant value */
  int const_value;   /* its value id */
  known okv;         /* known contents of output 0 (n = -1 if none) */
} nctx;

static ts_status nerr(imp *im, const nctx *nc, ts_status code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static ts_status nerr(imp *im, const nctx *nc, ts_status code, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return ts_diag_set(im->d, code, "%s: node %s (%s, opset %d): %s", im->label, nc->name, tg_op_name(nc->op),
                     im->opset, msg);
}

static ts_status oom(imp *im) { return ts_diag_set(im->d, TS_ENOMEM, "%s: out of memory importing", im->label); }

static bool kv_grow(imp *im) {
  int n = im->g->nvalues;
  if (n <= im->nkv) return true;
  known *p = ts_realloc(im->kv, (size_t)n * sizeof *p);
  if (!p) return false;
  for (int i = im->nkv; i < n; i++) p[i] = (known){-1, NULL};
  im->kv = p;
  im->nkv = n;
  return true;
}

static const known *kv_get(imp *im, int id) { return id >= 0 && id < im->nkv && im->kv[id].n >= 0 ? &im->kv[id] : NULL; }

/* A known tensor with no symbolic element: its values. */
static bool kv_ints(imp *im, int id, const int64_t **vals, int *n, int64_t *buf, int cap) {
  const known *k = kv_get(im, id);
  if (!k || k->n > cap) return false;
  for (int i = 0; i < k->n; i++) {
    if (k->d[i].sym) return false;
    buf[i] = k->d[i].value;
  }
  *vals = buf;
  *n = k->n;
  return true;
}

/* ---- dims --------------------------------------------------------------- */
static tg_dim DC(int64_t v) { return (tg_dim){v, NULL}; }

static void dims_str(char *buf, size_t n, int nd, const tg_dim *dims) {
  size_t o = 0;
  o += (size_t)snprintf(buf + o, n - o, "[");
  for (int i = 0; i < nd && o < n; i++) {
    if (dims[i].sym) o += (size_t)snprintf(buf + o, n - o, "%s%s", i ? "," : "", dims[i].sym);
    else o += (size_t)snprintf(buf + o, n - o, "%s%" PRId64, i ? "," : "", dims[i].value);
  }
  if (o < n) snprintf(buf + o, n - o, "]");
}

static const tg_value *IN(imp *im, const nctx *nc, int i) {
  return i < nc->nin && nc->in[i] >= 0 ? im->g->values[nc->in[i]] : NULL;
}

static void set_out(nctx *nc, int k, ir_dtype dt, int nd, const tg_dim *dims) {
  nc->odt[k] = dt;
  nc->ondim[k] = nd;
  for (int i = 0; i < nd; i++) nc->odims[k][i] = dims[i];
}

static void same_as_input(imp *im, nctx *nc, int k, int i) {
  const tg_value *v = IN(im, nc, i);
  set_out(nc, k, v->dtype, v->ndim, v->dims);
}

/* Normalises axis a for rank r (valid range [-r, r-1], or [-r, r] when
 * inclusive); false when out of range. */
static bool norm_axis(int64_t *a, int r, bool inclusive) {
  int64_t hi = inclusive ? r : r - 1;
  if (*a < -(int64_t)r || *a > hi) return false;
  if (*a < 0) *a += r;
  return true;
}

/* Product of dims: a constant, a single symbol times 1, or refused. */
static bool dims_product(const tg_dim *d, int n, tg_dim *out) {
  int64_t c = 1;
  const char *sym = NULL;
  for (int i = 0; i < n; i++) {
    if (d[i].sym) {
      if (sym) return false;
      sym = d[i].sym;
    } else {
      if (d[i].value != 0 && c > MAX_ELEMS / d[i].value) return false;
      c *= d[i].value;
    }
  }
  if (sym && c != 1) return false;
  *out = sym ? (tg_dim){-1, sym} : DC(c);
  return true;
}

/* Multidirectional (numpy) broadcasting of two shapes. */
static ts_status broadcast(imp *im, nctx *nc, const tg_value *a, const tg_value *b, int *nd, tg_dim *out) {
  int r = a->ndim > b->ndim ? a->ndim : b->ndim;
  if (r > MAX_RANK) return nerr(im, nc, TS_EUNSUPPORTED, "rank %d is above %d", r, MAX_RANK);
  for (int i = 0; i < r; i++) {
    int ia = i - (r - a->ndim), ib = i - (r - b->ndim);
    tg_dim da = ia >= 0 ? a->dims[ia] : DC(1), db = ib >= 0 ? b->dims[ib] : DC(1);
    if (tg_dim_eq(da, db)) out[i] = da;
    else if (!da.sym && da.value == 1) out[i] = db;
    else if (!db.sym && db.value == 1) out[i] = da;
    else if (da.sym && !db.sym) out[i] = db; /* the symbol must equal the constant at run time */
    else if (db.sym && !da.sym) out[i] = da;
    else {
      char s1[256], s2[256];
      dims_str(s1, sizeof s1, a->ndim, a->dims);
      dims_str(s2, sizeof s2, b->ndim, b->dims);
      return nerr(im, nc, TS_ESHAPE, "shapes %s (%s) and %s (%s) do not broadcast (dim %d)", s1, a->name, s2, b->name, i);
    }
  }
  *nd = r;
  return TS_OK;
}

/* ---- attributes --------------------------------------------------------- */
static tg_attr *A(nctx *nc, const char *name) {
  for (int i = 0; i < nc->nattr; i++)
    if (!strcmp(nc->attr[i].name, name)) return &nc->attr[i];
  return NULL;
}

static tg_attr *put_attr(imp *im, nctx *nc, const char *name, tg_attr_kind kind) {
  tg_attr *a = A(nc, name);
  if (!a) {
    if (nc->nattr == MAX_ATTRS) return NULL;
    a = &nc->attr[nc->nattr++];
  }
  *a = (tg_attr){.name = name, .kind = kind};
  (void)im;
  return a;
}

static int64_t aint(nctx *nc, const char *name, int64_t def) {
  tg_attr *a = A(nc, name);
  return a ? a->i : def;
}
static double afloat(nctx *nc, const char *name, double def) {
  tg_attr *a = A(nc, name);
  return a ? a->f : def;
}
static const char *astr(nctx *nc, const char *name, const char *def) {
  tg_attr *a = A(nc, name);
  return a ? a->s : def;
}
static const int64_t *aints(nctx *nc, const char *name, int *n) {
  tg_attr *a = A(nc, name);
  *n = a ? a->n : 0;
  return a ? a->ints : NULL;
}

static ts_status set_int(imp *im, nctx *nc, const char *name, int64_t v) {
  tg_attr *a = put_attr(im, nc, name, TG_A_INT);
  if (!a) return nerr(im, nc, TS_EUNSUPPORTED, "too many attributes");
  a->i = v;
  return TS_OK;
}
static ts_status set_float(imp *im, nctx *nc, const char *name, double v) {
  tg_attr *a = put_attr(im, nc, name, TG_A_FLOAT);
  if (!a) return nerr(im, nc, TS_EUNSUPPORTED, "too many attributes");
  a->f = v;
  return TS_OK;
}
static ts_status set_str(imp *im, nctx *nc, const char *name, const char *v) {
  tg_attr *a = put_attr(im, nc, name, TG_A_STRING);
  if (!a) return nerr(im, nc, TS_EUNSUPPORTED, "too many attributes");
  a->s = v;
  return TS_OK;
}
static ts_status set_ints(imp *im, nctx *nc, const char *name, const int64_t *v, int n) {
  int64_t *cp = n ? ts_arena_memdup(im->a, v, (size_t)n * sizeof *v) : NULL;
  if (n && !cp) return oom(im);
  tg_attr *a = put_attr(im, nc, name, TG_A_INTS);
  if (!a) return nerr(im, nc, TS_EUNSUPPORTED, "too many attributes");
  a->n = n;
  a->ints = cp;
  return TS_OK;
}

/* ---- constants -------------------------------------------------------- */
static bool numel_of(const int64_t *dims, int n, int64_t *out) {
  int64_t e = 1;
  for (int i = 0; i < n; i++) {
    if (dims[i] < 0) return false;
    if (dims[i] && e > MAX_ELEMS / dims[i]) return false;
    e *= dims[i];
  }
  *out = e;
  return true;
}

/* Converts a TensorProto into a new constant value named `name`. `what`
 * names it in messages ("initializer w0", "node c (Constant, ...)"). */
static ts_status import_tensor(imp *im, const Onnx__TensorProto *t, const char *name, const char *what, int *out_id) {
  ir_dtype dt;
  int dtype = t->has_data_type ? t->data_type : 0;
  if (!tg_onnx_dtype(dtype, &dt))
    return ts_diag_set(im->d, TS_EUNSUPPORTED, "%s: %s: element type %s (%d) is not supported", im->label, what,
                       onnx_type_name(dtype), dtype);
  if (t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL || t->n_external_data)
    return ts_diag_set(im->d, TS_EUNSUPPORTED,
                       "%s: %s: stored as external data; tessel reads only weights inside the model file "
                       "(re-save with onnx.save_model(..., save_as_external_data=False))",
                       im->label, what);
  if (t->segment) return ts_diag_set(im->d, TS_EUNSUPPORTED, "%s: %s: segmented tensors are not supported", im->label, what);
  if (t->n_dims > MAX_RANK)
    return ts_diag_set(im->d, TS_EUNSUPPORTED, "%s: %s: rank %zu is above %d", im->label, what, t->n_dims, MAX_RANK);
  int64_t numel;
  if (!numel_of(t->dims, (int)t->n_dims, &numel))
    return ts_diag_set(im->d, TS_EPARSE, "%s: %s: bad dims (negative or too large)", im->label, what);
  int eb = ir_dtype_bytes(dt);
  size_t nbytes = (size_t)numel * (size_t)eb;
  tg_dim dims[MAX_RANK];
  for (size_t i = 0; i < t->n_dims; i++) dims[i] = DC(t->dims[i]);
  void *buf = NULL;
  if (t->has_raw_data) {
    if (t->raw_data.len != nbytes)
      return ts_diag_set(im->d, TS_EPARSE, "%s: %s: raw_data holds %zu bytes, %" PRId64 " %s elements need %zu",
                         im->label, what, t->raw_data.len, numel, onnx_type_name(dtype), nbytes);
  } else if (numel > 0) {
    size_t have;
    switch (dtype) {
    case 1: have = t->n_float_data; break;
    case 11: have = t->n_double_data; break;
    case 7: have = t->n_int64_data; break;
    case 12: have = t->n_uint64_data; break;
    default: have = t->n_int32_data; break;
    }
    if (have != (size_t)numel)
      return ts_diag_set(im->d, TS_EPARSE, "%s: %s: %zu data elements for a %s tensor of %" PRId64, im->label, what,
                         have, onnx_type_name(dtype), numel);
    buf = ts_malloc(nbytes);
    if (!buf) return oom(im);
    unsigned char *p = buf;
    for (int64_t i = 0; i < numel; i++) {
      switch (dtype) {
      case 1: memcpy(p + i * 4, &t->float_data[i], 4); break;
      case 11: memcpy(p + i * 8, &t->double_data[i], 8); break;
      case 7: memcpy(p + i * 8, &t->int64_data[i], 8); break;
      case 12: { uint32_t x = (uint32_t)t->uint64_data[i]; memcpy(p + i * 4, &x, 4); break; }
      case 6: { int32_t x = t->int32_data[i]; memcpy(p + i * 4, &x, 4); break; }
      case 5: { int16_t x = (int16_t)t->int32_data[i]; memcpy(p + i * 2, &x, 2); break; }
      case 10: case 16: { uint16_t x = (uint16_t)t->int32_data[i]; memcpy(p + i * 2, &x, 2); break; }
      case 3: p[i] = (unsigned char)(int8_t)t->int32_data[i]; break;
      case 2: p[i] = (unsigned char)t->int32_data[i]; break;
      case 9: p[i] = t->int32_data[i] != 0; break;
      default: break;
      }
    }
  }
  ts_diag tmp;
  ts_diag_clear(&tmp);
  int id = tg_value_add(im->g, name, TG_V_CONST, dt, (int)t->n_dims, dims, &tmp);
  ts_status st = TS_OK;
  if (id < 0) st = ts_diag_set(im->d, tmp.code, "%s: %s: %s", im->label, what, tmp.msg);
  else st = tg_value_set_data(im->g, id, t->has_raw_data ? t->raw_data.data : buf, nbytes, im->d);
  ts_free(buf);
  if (st != TS_OK) return st;
  if (!kv_grow(im)) return oom(im);
  /* small integer constants are known contents */
  if ((dt.code == IR_I64 || dt.code == IR_I32) && numel <= MAX_KNOWN && t->n_dims <= 1) {
    tg_dim *kd = TS_ANEWN(im->a, tg_dim, numel ? numel : 1);
    if (!kd) return oom(im);
    const tg_value *v = im->g->values[id];
    for (int64_t i = 0; i < numel; i++) {
      int64_t x;
      if (dt.code == IR_I64) memcpy(&x, (const char *)v->data + i * 8, 8);
      else { int32_t y; memcpy(&y, (const char *)v->data + i * 4, 4); x = y; }
      kd[i] = DC(x);
    }
    im->kv[id] = (known){(int)numel, kd};
  }
  *out_id = id;
  return TS_OK;
}

/* A scalar (or one-element) float constant input. */
static bool const_scalar(imp *im, int vid, double *out) {
  if (vid < 0) return false;
  const tg_value *v = im->g->values[vid];
  if (v->kind != TG_V_CONST || !v->data || tg_value_numel(v) != 1) return false;
  switch (v->dtype.code) {
  case IR_F32: { float f; memcpy(&f, v->data, 4); *out = f; return true; }
  case IR_F64: memcpy(out, v->data, 8); return true;
  case IR_I64: { int64_t x; memcpy(&x, v->data, 8); *out = (double)x; return true; }
  case IR_I32: { int32_t x; memcpy(&x, v->data, 4); *out = x; return true; }
  case IR_I8: *out = (int8_t)((unsigned char *)v->data)[0]; return true;
  case IR_U8: *out = ((unsigned char *)v->data)[0]; return true;
  default: return false;
  }
}

/* Parameter input i as ints known at import (NULL input: *present = false). */
static ts_status param_ints(imp *im, nctx *nc, int i, const char *what, bool *present, int64_t *buf, int cap,
                            const int64_t **vals, int *n) {
  *present = false;
  *n = 0;
  if (i >= nc->nin || nc->in[i] < 0) return TS_OK;
  const tg_value *v = im->g->values[nc->in[i]];
  if (v->dtype.code != IR_I64 && v->dtype.code != IR_I32)
    return nerr(im, nc, TS_ETYPE, "input %d (%s, the %s) must be int64", i, v->name, what);
  if (!kv_ints(im, nc->in[i], vals, n, buf, cap))
    return nerr(im, nc, TS_EUNSUPPORTED, "input %d (%s, the %s) must be a constant (or computable at import)", i,
                v->name, what);
  *present = true;
  return TS_OK;
}

/* Drops inputs from index `from` on (their contents became attributes). */
static void drop_inputs(nctx *nc, int from) {
  if (nc->nin > from) nc->nin = from;
}

/* ---- op table ----------------------------------------------------------- */
/* attrs: space-separated "K:name[@since][<until]" with K one of i f s I F T:
 * int, float, string, ints, floats, tensor; @N: exists from opset N; <N:
 * only before opset N. */
typedef struct op_spec {
  tg_op op;
  int since;
  int min_in, max_in;   /* max -1: unbounded */
  int min_out, max_out;
  const char *attrs;
  ts_status (*fn)(imp *, nctx *);
} op_spec;

#define POOL_ATTRS "s:auto_pad i:ceil_mode I:dilations I:kernel_shape I:pads I:strides"

static ts_status h_unary(imp *, nctx *);
static ts_status h_binary(imp *, nctx *);
static ts_status h_conv(imp *, nctx *);
static ts_status h_gemm(imp *, nctx *);
static ts_status h_matmul(imp *, nctx *);
static ts_status h_leaky(imp *, nctx *);
static ts_status h_gelu(imp *, nctx *);
static ts_status h_clip(imp *, nctx *);
static ts_status h_softmax(imp *, nctx *);
static ts_status h_layernorm(imp *, nctx *);
static ts_status h_batchnorm(imp *, nctx *);
static ts_status h_pool(imp *, nctx *);
static ts_status h_gap(imp *, nctx *);
static ts_status h_flatten(imp *, nctx *);
static ts_status h_reshape(imp *, nctx *);
static ts_status h_transpose(imp *, nctx *);
static ts_status h_concat(imp *, nctx *);
static ts_status h_split(imp *, nctx *);
static ts_status h_slice(imp *, nctx *);
static ts_status h_gather(imp *, nctx *);
static ts_status h_pad(imp *, nctx *);
static ts_status h_reduce(imp *, nctx *);
static ts_status h_cast(imp *, nctx *);
static ts_status h_squeeze(imp *, nctx *);
static ts_status h_unsqueeze(imp *, nctx *);
static ts_status h_shape(imp *, nctx *);
static ts_status h_constant(imp *, nctx *);

static const op_spec specs[] = {
    {TG_OP_CONV, 1, 2, 3, 1, 1, "s:auto_pad I:dilations i:group I:kernel_shape I:pads I:strides", h_conv},
    {TG_OP_CONV_TRANSPOSE, 1, 2, 3, 1, 1,
     "s:auto_pad I:dilations i:group I:kernel_shape I:output_padding I:output_shape I:pads I:strides", h_conv},
    {TG_OP_GEMM, 1, 2, 3, 1, 1, "f:alpha f:beta i:transA i:transB", h_gemm},
    {TG_OP_MATMUL, 1, 2, 2, 1, 1, "", h_matmul},
    {TG_OP_ADD, 1, 2, 2, 1, 1, "", h_binary},
    {TG_OP_SUB, 1, 2, 2, 1, 1, "", h_binary},
    {TG_OP_MUL, 1, 2, 2, 1, 1, "", h_binary},
    {TG_OP_DIV, 1, 2, 2, 1, 1, "", h_binary},
    {TG_OP_POW, 1, 2, 2, 1, 1, "", h_binary},
    {TG_OP_RELU, 1, 1, 1, 1, 1, "", h_unary},
    {TG_OP_SIGMOID, 1, 1, 1, 1, 1, "", h_unary},
    {TG_OP_TANH, 1, 1, 1, 1, 1, "", h_unary},
    {TG_OP_ERF, 9, 1, 1, 1, 1, "", h_unary},
    {TG_OP_SQRT, 1, 1, 1, 1, 1, "", h_unary},
    {TG_OP_IDENTITY, 1, 1, 1, 1, 1, "", h_unary},
    {TG_OP_LEAKY_RELU, 1, 1, 1, 1, 1, "f:alpha", h_leaky},
    {TG_OP_GELU, 20, 1, 1, 1, 1, "s:approximate", h_gelu},
    {TG_OP_CLIP, 11, 1, 3, 1, 1, "", h_clip},
    {TG_OP_SOFTMAX, 13, 1, 1, 1, 1, "i:axis", h_softmax},
    {TG_OP_LAYER_NORM, 17, 2, 3, 1, 3, "i:axis f:epsilon i:stash_type", h_layernorm},
    {TG_OP_BATCH_NORM, 1, 5, 5, 1, 3, "f:epsilon f:momentum i:training_mode@14", h_batchnorm},
    {TG_OP_MAX_POOL, 1, 1, 1, 1, 2, POOL_ATTRS " i:storage_order", h_pool},
    {TG_OP_AVERAGE_POOL, 1, 1, 1, 1, 1,
     "s:auto_pad i:ceil_mode i:count_include_pad I:dilations@19 I:kernel_shape I:pads I:strides", h_pool},
    {TG_OP_GLOBAL_AVERAGE_POOL, 1, 1, 1, 1, 1, "", h_gap},
    {TG_OP_FLATTEN, 1, 1, 1, 1, 1, "i:axis", h_flatten},
    {TG_OP_RESHAPE, 5, 2, 2, 1, 1, "i:allowzero@14", h_reshape},
    {TG_OP_TRANSPOSE, 1, 1, 1, 1, 1, "I:perm", h_transpose},
    {TG_OP_CONCAT, 1, 1, -1, 1, 1, "i:axis", h_concat},
    {TG_OP_SPLIT, 13, 1, 2, 1, -1, "i:axis i:num_outputs@18", h_split},
    {TG_OP_SLICE, 10, 3, 5, 1, 1, "", h_slice},
    {TG_OP_GATHER, 1, 2, 2, 1, 1, "i:axis", h_gather},
    {TG_OP_PAD, 11, 2, 4, 1, 1, "s:mode", h_pad},
    {TG_OP_REDUCE_MEAN, 1, 1, 2, 1, 1, "I:axes<18 i:keepdims i:noop_with_empty_axes@18", h_reduce},
    {TG_OP_REDUCE_SUM, 13, 1, 2, 1, 1, "i:keepdims i:noop_with_empty_axes", h_reduce},
    {TG_OP_CAST, 1, 1, 1, 1, 1, "i:to i:saturate@19", h_cast},
    {TG_OP_SQUEEZE, 13, 1, 2, 1, 1, "", h_squeeze},
    {TG_OP_UNSQUEEZE, 13, 2, 2, 1, 1, "", h_unsqueeze},
    {TG_OP_SHAPE, 1, 1, 1, 1, 1, "i:start@15 i:end@15", h_shape},
    {TG_OP_CONSTANT, 1, 0, 0, 1, 1, "T:value f:value_float F:value_floats i:value_int I:value_ints", h_constant},
};

static const op_spec *spec_of(tg_op op) {
  for (size_t i = 0; i < sizeof specs / sizeof *specs; i++)
    if (specs[i].op == op) return &specs[i];
  return NULL;
}

/* Finds attribute `name` in the spec string: its kind char, or 0 when the
 * op has no such attribute at this opset. */
static char spec_attr(const char *attrs, const char *name, int opset, bool *wrong_opset) {
  *wrong_opset = false;
  size_t nl = strlen(name);
  for (const char *p = attrs; *p;) {
    while (*p == ' ') p++;
    if (!*p) break;
    char kind = p[0];
    const char *nm = p + 2;
    const char *e = nm;
    while (*e && *e != ' ' && *e != '@' && *e != '<') e++;
    int since = 0, until = 1000;
    const char *q = e;
    while (*q && *q != ' ') {
      if (*q == '@') since = atoi(q + 1);
      if (*q == '<') until = atoi(q + 1);
      q++;
    }
    if ((size_t)(e - nm) == nl && !strncmp(nm, name, nl)) {
      if (opset < since || opset >= until) {
        *wrong_opset = true;
        return 0;
      }
      return kind;
    }
    p = q;
  }
  return 0;
}

static const char *attr_type_name(int t) {
  switch (t) {
  case 1: return "FLOAT";
  case 2: return "INT";
  case 3: return "STRING";
  case 4: return "TENSOR";
  case 5: return "GRAPH";
  case 6: return "FLOATS";
  case 7: return "INTS";
  case 8: return "STRINGS";
  case 9: return "TENSORS";
  case 10: return "GRAPHS";
  case 11: return "SPARSE_TENSOR";
  case 12: return "SPARSE_TENSORS";
  case 13: return "TYPE_PROTO";
  case 14: return "TYPE_PROTOS";
  default: return "UNDEFINED";
  }
}

static ts_status read_attrs(imp *im, nctx *nc, const op_spec *sp) {
  const Onnx__NodeProto *np = nc->np;
  if (np->n_attribute > MAX_ATTRS) return nerr(im, nc, TS_EUNSUPPORTED, "%zu attributes", np->n_attribute);
  for (size_t i = 0; i < np->n_attribute; i++) {
    const Onnx__AttributeProto *ap = np->attribute[i];
    const char *an = ap->name ? ap->name : "";
    if (ap->ref_attr_name && ap->ref_attr_name[0])
      return nerr(im, nc, TS_EUNSUPPORTED, "attribute %s refers to a function attribute", an);
    bool wrong;
    char kind = spec_attr(sp->attrs, an, im->opset, &wrong);
    if (!kind)
      return nerr(im, nc, TS_EUNSUPPORTED, "attribute '%s' is not supported%s", an,
                  wrong ? " at this opset" : " (not an attribute of this op)");
    int want = kind == 'i' ? 2 : kind == 'f' ? 1 : kind == 's' ? 3 : kind == 'I' ? 7 : kind == 'F' ? 6 : 4;
    int type = ap->has_type ? (int)ap->type : 0;
    if (type != want)
      return nerr(im, nc, TS_EUNSUPPORTED, "attribute '%s' has type %s, expected %s", an, attr_type_name(type),
                  attr_type_name(want));
    char *nm = ts_arena_strdup(im->a, an);
    if (!nm) return oom(im);
    if (A(nc, nm)) return nerr(im, nc, TS_EPARSE, "attribute '%s' given twice", an);
    tg_attr *a = put_attr(im, nc, nm, TG_A_INT);
    switch (kind) {
    case 'i': a->kind = TG_A_INT; a->i = ap->i; break;
    case 'f': a->kind = TG_A_FLOAT; a->f = ap->f; break;
    case 's': {
      a->kind = TG_A_STRING;
      char *s = ts_arena_strndup(im->a, ap->s.len ? (const char *)ap->s.data : "", ap->s.len);
      if (!s) return oom(im);
      if (strlen(s) != ap->s.len) return nerr(im, nc, TS_EPARSE, "attribute '%s' holds a NUL byte", an);
      a->s = s;
      break;
    }
    case 'I':
      a->kind = TG_A_INTS;
      if (ap->n_ints > 1024) return nerr(im, nc, TS_EUNSUPPORTED, "attribute '%s' has %zu elements", an, ap->n_ints);
      a->n = (int)ap->n_ints;
      a->ints = a->n ? ts_arena_memdup(im->a, ap->ints, ap->n_ints * sizeof(int64_t)) : NULL;
      if (a->n && !a->ints) return oom(im);
      break;
    case 'F':
      a->kind = TG_A_FLOATS;
      if (ap->n_floats > (1u << 24)) return nerr(im, nc, TS_EUNSUPPORTED, "attribute '%s' is too long", an);
      a->n = (int)ap->n_floats;
      if (a->n) {
        a->floats = TS_ANEWN(im->a, double, a->n);
        if (!a->floats) return oom(im);
        for (int k = 0; k < a->n; k++) a->floats[k] = ap->floats[k];
      }
      break;
    case 'T':
      /* only Constant has one; h_constant reads it from the proto */
      a->kind = TG_A_INT;
      a->i = (int64_t)i;
      break;
    }
  }
  return TS_OK;
}

/* ---- handlers ------------------------------------------------------------ */
static bool is_float(ir_dtype t) { return ir_dtype_is_float(t); }

static ts_status need_float(imp *im, nctx *nc, int i) {
  const tg_value *v = IN(im, nc, i);
  char b[16];
  if (v && !is_float(v->dtype))
    return nerr(im, nc, TS_ETYPE, "input %d (%s) is %s; the op takes floating-point tensors", i, v->name,
                ir_dtype_str(v->dtype, b, sizeof b));
  return TS_OK;
}

static ts_status need_input(imp *im, nctx *nc, int i, const char *what) {
  if (!IN(im, nc, i)) return nerr(im, nc, TS_EINVAL, "input %d (%s) is required", i, what);
  return TS_OK;
}

static ts_status h_unary(imp *im, nctx *nc) {
  ts_status st = need_input(im, nc, 0, "X");
  if (st) return st;
  if (nc->op != TG_OP_IDENTITY && nc->op != TG_OP_RELU && (st = need_float(im, nc, 0))) return st;
  same_as_input(im, nc, 0, 0);
  if (nc->op == TG_OP_IDENTITY) {
    const known *k = kv_get(im, nc->in[0]);
    if (k) nc->okv = *k;
  }
  return TS_OK;
}

static ts_status h_binary(imp *im, nctx *nc) {
  const tg_value *a = IN(im, nc, 0), *b = IN(im, nc, 1);
  if (!a || !b) return nerr(im, nc, TS_EINVAL, "both inputs are required");
  char b1[16], b2[16];
  if (nc->op != TG_OP_POW && !ir_dtype_eq(a->dtype, b->dtype))
    return nerr(im, nc, TS_ETYPE, "inputs %s (%s) and %s (%s) differ in type", a->name,
                ir_dtype_str(a->dtype, b1, sizeof b1), b->name, ir_dtype_str(b->dtype, b2, sizeof b2));
  int nd;
  tg_dim dims[MAX_RANK];
  ts_status st = broadcast(im, nc, a, b, &nd, dims);
  if (st) return st;
  set_out(nc, 0, a->dtype, nd, dims);
  /* shape arithmetic: Add/Sub/Mul/Div of known constant int tensors (a
   * scalar or 1-D each) is known too; Div truncates toward zero as in C */
  int64_t ba[64], bb[64];
  const int64_t *va, *vb;
  int na, nb;
  if (nc->op != TG_OP_POW && (a->dtype.code == IR_I64 || a->dtype.code == IR_I32) && a->ndim <= 1 && b->ndim <= 1 &&
      kv_ints(im, nc->in[0], &va, &na, ba, 64) && kv_ints(im, nc->in[1], &vb, &nb, bb, 64) &&
      (na == nb || na == 1 || nb == 1)) {
    int n = na > nb ? na : nb;
    tg_dim *kd = TS_ANEWN(im->a, tg_dim, n ? n : 1);
    if (!kd) return oom(im);
    bool ok = true;
    for (int i = 0; i < n && ok; i++) {
      int64_t x = va[na == 1 ? 0 : i], y = vb[nb == 1 ? 0 : i], r = 0;
      switch (nc->op) {
      case TG_OP_ADD: ok = !__builtin_add_overflow(x, y, &r); break;
      case TG_OP_SUB: ok = !__builtin_sub_overflow(x, y, &r); break;
      case TG_OP_MUL: ok = !__builtin_mul_overflow(x, y, &r); break;
      default: ok = y != 0 && !(x == INT64_MIN && y == -1); if (ok) r = x / y; break;
      }
      kd[i] = DC(r);
    }
    if (ok) nc->okv = (known){n, kd};
  }
  return TS_OK;
}

static ts_status h_leaky(imp *im, nctx *nc) {
  ts_status st = h_unary(im, nc);
  if (!st) st = set_float(im, nc, "alpha", afloat(nc, "alpha", 0.01));
  return st;
}

static ts_status h_gelu(imp *im, nctx *nc) {
  const char *ap = astr(nc, "approximate", "none");
  if (strcmp(ap, "none") && strcmp(ap, "tanh"))
    return nerr(im, nc, TS_EUNSUPPORTED, "approximate='%s' (none or tanh)", ap);
  ts_status st = h_unary(im, nc);
  if (!st) st = set_str(im, nc, "approximate", ap);
  return st;
}

static ts_status h_clip(imp *im, nctx *nc) {
  ts_status st = h_unary(im, nc);
  if (st) return st;
  double lo = -INFINITY, hi = INFINITY;
  for (int i = 1; i < nc->nin; i++) {
    if (nc->in[i] < 0) continue;
    double v;
    if (!const_scalar(im, nc->in[i], &v))
      return nerr(im, nc, TS_EUNSUPPORTED, "input %d (%s, the %s) must be a constant scalar", i,
                  IN(im, nc, i)->name, i == 1 ? "min" : "max");
    if (i == 1) lo = v;
    else hi = v;
  }
  drop_inputs(nc, 1);
  if ((st = set_float(im, nc, "min", lo)) || (st = set_float(im, nc, "max", hi))) return st;
  return TS_OK;
}

static ts_status h_softmax(imp *im, nctx *nc) {
  ts_status st = h_unary(im, nc);
  if (st) return st;
  int64_t ax = aint(nc, "axis", -1);
  int r = IN(im, nc, 0)->ndim;
  if (!norm_axis(&ax, r, false)) return nerr(im, nc, TS_EINVAL, "axis %" PRId64 " is out of range for rank %d", aint(nc, "axis", -1), r);
  return set_int(im, nc, "axis", ax);
}

static ts_status h_layernorm(imp *im, nctx *nc) {
  ts_status st = h_unary(im, nc);
  if (st) return st;
  for (int k = 1; k < nc->nout; k++)
    if (nc->outname[k]) return nerr(im, nc, TS_EUNSUPPORTED, "output %d (%s, a training statistic) is not supported", k, nc->outname[k]);
  const tg_value *x = IN(im, nc, 0);
  int64_t ax = aint(nc, "axis", -1);
  if (!norm_axis(&ax, x->ndim, false)) return nerr(im, nc, TS_EINVAL, "axis %" PRId64 " is out of range for rank %d", aint(nc, "axis", -1), x->ndim);
  for (int i = 1; i < nc->nin; i++) {
    const tg_value *s = IN(im, nc, i);
    if (!s) continue;
    if (!ir_dtype_eq(s->dtype, x->dtype)) return nerr(im, nc, TS_ETYPE, "input %d (%s) differs in type from X", i, s->name);
    /* scale/bias broadcast to X's normalised dims [axis:] */
    if (s->ndim > x->ndim - ax) return nerr(im, nc, TS_ESHAPE, "input %d (%s) has rank %d; the normalised part has %" PRId64, i, s->name, s->ndim, x->ndim - ax);
    for (int j = 0; j < s->ndim; j++) {
      tg_dim xd = x->dims[x->ndim - s->ndim + j], sd = s->dims[j];
      if (!xd.sym && !sd.sym && sd.value != 1 && sd.value != xd.value)
        return nerr(im, nc, TS_ESHAPE, "input %d (%s) dim %d is %" PRId64 ", X's is %" PRId64, i, s->name, j, sd.value, xd.value);
    }
  }
  if ((st = set_int(im, nc, "axis", ax)) || (st = set_float(im, nc, "epsilon", afloat(nc, "epsilon", 1e-5))) ||
      (st = set_int(im, nc, "stash_type", aint(nc, "stash_type", 1))))
    return st;
  nc->nout = 1;
  return TS_OK;
}

static ts_status h_batchnorm(imp *im, nctx *nc) {
  ts_status st = h_unary(im, nc);
  if (st) return st;
  if (aint(nc, "training_mode", 0)) return nerr(im, nc, TS_EUNSUPPORTED, "training_mode=1 (inference only)");
  for (int k = 1; k < nc->nout; k++)
    if (nc->outname[k]) return nerr(im, nc, TS_EUNSUPPORTED, "output %d (%s, a running statistic) is not supported", k, nc->outname[k]);
  const tg_value *x = IN(im, nc, 0);
  if (x->ndim < 2) return nerr(im, nc, TS_ESHAPE, "X has rank %d; BatchNormalization needs [N, C, ...]", x->ndim);
  static const char *const pn[] = {"", "scale", "B", "input_mean", "input_var"};
  for (int i = 1; i < 5; i++) {
    const tg_value *p = IN(im, nc, i);
    if (!p) return nerr(im, nc, TS_EINVAL, "input %d (%s) is required", i, pn[i]);
    if (p->ndim != 1) return nerr(im, nc, TS_ESHAPE, "input %d (%s, %s) has rank %d, expected 1", i, pn[i], p->name, p->ndim);
    if (!p->dims[0].sym && !x->dims[1].sym && p->dims[0].value != x->dims[1].value)
      return nerr(im, nc, TS_ESHAPE, "input %d (%s, %s) has %" PRId64 " elements; X has %" PRId64 " channels", i,
                  pn[i], p->name, p->dims[0].value, x->dims[1].value);
  }
  if ((st = set_float(im, nc, "epsilon", afloat(nc, "epsilon", 1e-5))) ||
      (st = set_float(im, nc, "momentum", afloat(nc, "momentum", 0.9))) || (st = set_int(im, nc, "training_mode", 0)))
    return st;
  nc->nout = 1;
  return TS_OK;
}

/* Spatial attributes shared by Conv/ConvTranspose/pools: kernel, strides,
 * dilations, pads (auto_pad resolved), for ns spatial dims of x. */
typedef struct spatial {
  int ns;
  int64_t k[MAX_RANK], s[MAX_RANK], dl[MAX_RANK], pb[MAX_RANK], pe[MAX_RANK];
  const char *auto_pad;
} spatial;

static ts_status read_spatial(imp *im, nctx *nc, const tg_value *x, const int64_t *kdef, spatial *sp) {
  int ns = x->ndim - 2;
  sp->ns = ns;
  if (ns < 1) return nerr(im, nc, TS_ESHAPE, "input %s has rank %d; expected [N, C, spatial...]", x->name, x->ndim);
  int n;
  const int64_t *v = aints(nc, "kernel_shape", &n);
  if (v && n != ns) return nerr(im, nc, TS_EINVAL, "kernel_shape has %d entries for %d spatial dims", n, ns);
  if (!v && !kdef) return nerr(im, nc, TS_EINVAL, "kernel_shape is required");
  for (int i = 0; i < ns; i++) sp->k[i] = v ? v[i] : kdef[i];
  v = aints(nc, "strides", &n);
  if (v && n != ns) return nerr(im, nc, TS_EINVAL, "strides has %d entries for %d spatial dims", n, ns);
  for (int i = 0; i < ns; i++) sp->s[i] = v ? v[i] : 1;
  v = aints(nc, "dilations", &n);
  if (v && n != ns) return nerr(im, nc, TS_EINVAL, "dilations has %d entries for %d spatial dims", n, ns);
  for (int i = 0; i < ns; i++) sp->dl[i] = v ? v[i] : 1;
  v = aints(nc, "pads", &n);
  if (v && n != 2 * ns) return nerr(im, nc, TS_EINVAL, "pads has %d entries for %d spatial dims", n, ns);
  for (int i = 0; i < ns; i++) {
    sp->pb[i] = v ? v[i] : 0;
    sp->pe[i] = v ? v[ns + i] : 0;
    if (sp->k[i] < 1 || sp->s[i] < 1 || sp->dl[i] < 1 || sp->pb[i] < 0 || sp->pe[i] < 0 || sp->k[i] > (1 << 20) ||
        sp->s[i] > (1 << 20) || sp->dl[i] > (1 << 20) || sp->pb[i] > (1 << 20) || sp->pe[i] > (1 << 20))
      return nerr(im, nc, TS_EINVAL, "spatial dim %d: kernel %" PRId64 ", stride %" PRId64 ", dilation %" PRId64
                  ", pads %" PRId64 "/%" PRId64 " (kernel, stride, dilation >= 1, pads >= 0)",
                  i, sp->k[i], sp->s[i], sp->dl[i], sp->pb[i], sp->pe[i]);
    if (x->dims[2 + i].sym)
      return nerr(im, nc, TS_EUNSUPPORTED, "spatial dim %d of %s is symbolic (%s); only batch and channel dims may be", i,
                  x->name, x->dims[2 + i].sym);
  }
  sp->auto_pad = astr(nc, "auto_pad", "NOTSET");
  if (strcmp(sp->auto_pad, "NOTSET") && strcmp(sp->auto_pad, "VALID") && strcmp(sp->auto_pad, "SAME_UPPER") &&
      strcmp(sp->auto_pad, "SAME_LOWER"))
    return nerr(im, nc, TS_EUNSUPPORTED, "auto_pad='%s'", sp->auto_pad);
  if (strcmp(sp->auto_pad, "NOTSET") && v)
    return nerr(im, nc, TS_EINVAL, "pads given together with auto_pad=%s", sp->auto_pad);
  if (!strcmp(sp->auto_pad, "VALID"))
    for (int i = 0; i < ns; i++) sp->pb[i] = sp->pe[i] = 0;
  if (!strncmp(sp->auto_pad, "SAME", 4) && nc->op != TG_OP_CONV_TRANSPOSE) {
    for (int i = 0; i < ns; i++) {
      int64_t in = x->dims[2 + i].value, out = (in + sp->s[i] - 1) / sp->s[i];
      int64_t total = (out - 1) * sp->s[i] + (sp->k[i] - 1) * sp->dl[i] + 1 - in;
      if (total < 0) total = 0;
      sp->pb[i] = !strcmp(sp->auto_pad, "SAME_UPPER") ? total / 2 : total - total / 2;
      sp->pe[i] = total - sp->pb[i];
    }
  }
  return TS_OK;
}

static ts_status put_spatial(imp *im, nctx *nc, const spatial *sp) {
  int64_t pads[2 * MAX_RANK];
  for (int i = 0; i < sp->ns; i++) {
    pads[i] = sp->pb[i];
    pads[sp->ns + i] = sp->pe[i];
  }
  ts_status st;
  if ((st = set_ints(im, nc, "kernel_shape", sp->k, sp->ns)) || (st = set_ints(im, nc, "strides", sp->s, sp->ns)) ||
      (st = set_ints(im, nc, "dilations", sp->dl, sp->ns)) || (st = set_ints(im, nc, "pads", pads, 2 * sp->ns)) ||
      (st = set_str(im, nc, "auto_pad", "NOTSET")))
    return st;
  return TS_OK;
}

static ts_status h_conv(imp *im, nctx *nc) {
  const tg_value *x = IN(im, nc, 0), *w = IN(im, nc, 1), *b = IN(im, nc, 2);
  if (!x || !w) return nerr(im, nc, TS_EINVAL, "inputs X and W are required");
  ts_status st;
  if ((st = need_float(im, nc, 0)) || (st = need_float(im, nc, 1))) return st;
  if (!ir_dtype_eq(x->dtype, w->dtype) || (b && !ir_dtype_eq(b->dtype, x->dtype)))
    return nerr(im, nc, TS_ETYPE, "X, W and B must have one type");
  if (w->ndim != x->ndim) return nerr(im, nc, TS_ESHAPE, "W (%s) has rank %d, X (%s) has %d", w->name, w->ndim, x->name, x->ndim);
  if (!tg_value_is_static(w)) return nerr(im, nc, TS_EUNSUPPORTED, "W (%s) has a symbolic shape", w->name);
  int64_t kdef[MAX_RANK];
  for (int i = 2; i < w->ndim; i++) kdef[i - 2] = w->dims[i].value;
  spatial sp;
  if ((st = read_spatial(im, nc, x, kdef, &sp))) return st;
  for (int i = 0; i < sp.ns; i++)
    if (sp.k[i] != kdef[i]) return nerr(im, nc, TS_ESHAPE, "kernel_shape[%d] = %" PRId64 " but W's dim is %" PRId64, i, sp.k[i], kdef[i]);
  int64_t group = aint(nc, "group", 1);
  if (group < 1) return nerr(im, nc, TS_EINVAL, "group %" PRId64 " < 1", group);
  bool tr = nc->op == TG_OP_CONV_TRANSPOSE;
  int64_t m = tr ? w->dims[1].value * group : w->dims[0].value;
  int64_t cin_w = tr ? w->dims[0].value : w->dims[1].value * group;
  if (!x->dims[1].sym && x->dims[1].value != cin_w)
    return nerr(im, nc, TS_ESHAPE, "X (%s) has %" PRId64 " channels, W (%s) with group %" PRId64 " expects %" PRId64,
                x->name, x->dims[1].value, w->name, group, cin_w);
  if (!tr && m % group) return nerr(im, nc, TS_ESHAPE, "%" PRId64 " output channels are not divisible by group %" PRId64, m, group);
  if (b && (b->ndim != 1 || b->dims[0].sym || b->dims[0].value != m))
    return nerr(im, nc, TS_ESHAPE, "B (%s) must be [%" PRId64 "]", b->name, m);
  tg_dim od[MAX_RANK];
  od[0] = x->dims[0];
  od[1] = DC(m);
  int64_t opad[MAX_RANK] = {0};
  if (tr) {
    int n;
    const int64_t *v = aints(nc, "output_padding", &n);
    if (v && n != sp.ns) return nerr(im, nc, TS_EINVAL, "output_padding has %d entries for %d spatial dims", n, sp.ns);
    for (int i = 0; i < sp.ns; i++) {
      opad[i] = v ? v[i] : 0;
      if (opad[i] < 0 || opad[i] > (1 << 20) || (opad[i] >= sp.s[i] && opad[i] >= sp.dl[i]))
        return nerr(im, nc, TS_EINVAL, "output_padding[%d] = %" PRId64 " (must be below the stride or the dilation)", i, opad[i]);
    }
    const int64_t *os = aints(nc, "output_shape", &n);
    if (os && n != sp.ns) return nerr(im, nc, TS_EINVAL, "output_shape has %d entries for %d spatial dims", n, sp.ns);
    for (int i = 0; i < sp.ns; i++) {
      int64_t in = x->dims[2 + i].value, ek = (sp.k[i] - 1) * sp.dl[i] + 1;
      if (os || !strncmp(sp.auto_pad, "SAME", 4)) {
        int64_t want = os ? os[i] : in * sp.s[i];
        if (want < 1 || want > MAX_ELEMS) return nerr(im, nc, TS_EINVAL, "output_shape[%d] = %" PRId64, i, want);
        int64_t total = sp.s[i] * (in - 1) + opad[i] + ek - want;
        if (total < 0) return nerr(im, nc, TS_ESHAPE, "output_shape[%d] = %" PRId64 " is larger than the op can produce", i, want);
        /* the spec's split (onnxruntime agrees): the odd element at the end for SAME_UPPER, else at the start */
        sp.pb[i] = !strcmp(sp.auto_pad, "SAME_UPPER") ? total / 2 : total - total / 2;
        sp.pe[i] = total - sp.pb[i];
      }
      int64_t o = sp.s[i] * (in - 1) + opad[i] + ek - sp.pb[i] - sp.pe[i];
      if (o < 1) return nerr(im, nc, TS_ESHAPE, "spatial dim %d of the output would be %" PRId64, i, o);
      od[2 + i] = DC(o);
    }
    if ((st = set_ints(im, nc, "output_padding", opad, sp.ns))) return st;
    tg_attr *osa = A(nc, "output_shape");
    if (osa) *osa = nc->attr[--nc->nattr]; /* resolved into pads */
  } else {
    for (int i = 0; i < sp.ns; i++) {
      int64_t in = x->dims[2 + i].value, ek = (sp.k[i] - 1) * sp.dl[i] + 1;
      int64_t span = in + sp.pb[i] + sp.pe[i] - ek;
      if (span < 0)
        return nerr(im, nc, TS_ESHAPE, "spatial dim %d: input %" PRId64 " (padded %" PRId64 ") is smaller than the kernel extent %" PRId64,
                    i, in, in + sp.pb[i] + sp.pe[i], ek);
      od[2 + i] = DC(span / sp.s[i] + 1);
    }
  }
  if ((st = put_spatial(im, nc, &sp)) || (st = set_int(im, nc, "group", group))) return st;
  set_out(nc, 0, x->dtype, x->ndim, od);
  return TS_OK;
}

static ts_status h_pool(imp *im, nctx *nc) {
  ts_status st = h_unary(im, nc);
  if (st) return st;
  if (nc->nout > 1 && nc->outname[1]) return nerr(im, nc, TS_EUNSUPPORTED, "output 1 (Indices) is not supported");
  nc->nout = 1;
  const tg_value *x = IN(im, nc, 0);
  spatial sp;
  if ((st = read_spatial(im, nc, x, NULL, &sp))) return st;
  int64_t ceil_mode = aint(nc, "ceil_mode", 0);
  if (ceil_mode != 0 && ceil_mode != 1) return nerr(im, nc, TS_EINVAL, "ceil_mode=%" PRId64, ceil_mode);
  if (nc->op == TG_OP_MAX_POOL && aint(nc, "storage_order", 0) != 0)
    return nerr(im, nc, TS_EUNSUPPORTED, "storage_order=%" PRId64 " (only row-major, 0)", aint(nc, "storage_order", 0));
  tg_dim od[MAX_RANK];
  od[0] = x->dims[0];
  od[1] = x->dims[1];
  for (int i = 0; i < sp.ns; i++) {
    int64_t in = x->dims[2 + i].value, ek = (sp.k[i] - 1) * sp.dl[i] + 1;
    int64_t span = in + sp.pb[i] + sp.pe[i] - ek;
    if (span < 0)
      return nerr(im, nc, TS_ESHAPE, "spatial dim %d: input %" PRId64 " (padded) is smaller than the window %" PRId64, i, in, ek);
    int64_t o = (ceil_mode ? (span + sp.s[i] - 1) / sp.s[i] : span / sp.s[i]) + 1;
    /* the last window must start inside the input or its left padding */
    if (ceil_mode && (o - 1) * sp.s[i] >= in + sp.pb[i]) o--;
    if (!strncmp(sp.auto_pad, "SAME", 4)) o = (in + sp.s[i] - 1) / sp.s[i];
    od[2 + i] = DC(o);
  }
  if ((st = put_spatial(im, nc, &sp)) || (st = set_int(im, nc, "ceil_mode", ceil_mode))) return st;
  if (nc->op == TG_OP_AVERAGE_POOL) {
    if ((st = set_int(im, nc, "count_include_pad", aint(nc, "count_include_pad", 0)))) return st;
  } else if ((st = set_int(im, nc, "storage_order", 0))) {
    return st;
  }
  set_out(nc, 0, x->dtype, x->ndim, od);
  return TS_OK;
}

static ts_status h_gap(imp *im, nctx *nc) {
  ts_status st = h_unary(im, nc);
  if (st) return st;
  const tg_value *x = IN(im, nc, 0);
  if (x->ndim < 3) return nerr(im, nc, TS_ESHAPE, "X has rank %d; expected [N, C, spatial...]", x->ndim);
  tg_dim od[MAX_RANK];
  for (int i = 0; i < x->ndim; i++) od[i] = i < 2 ? x->dims[i] : DC(1);
  set_out(nc, 0, x->dtype, x->ndim, od);
  return TS_OK;
}

static ts_status h_gemm(imp *im, nctx *nc) {
  const tg_value *a = IN(im, nc, 0), *b = IN(im, nc, 1), *c = IN(im, nc, 2);
  if (!a || !b) return nerr(im, nc, TS_EINVAL, "inputs A and B are required");
  ts_status st;
  if ((st = need_float(im, nc, 0))) return st;
  if (a->ndim != 2 || b->ndim != 2) return nerr(im, nc, TS_ESHAPE, "A and B must be matrices (ranks %d and %d)", a->ndim, b->ndim);
  if (!ir_dtype_eq(a->dtype, b->dtype) || (c && !ir_dtype_eq(a->dtype, c->dtype)))
    return nerr(im, nc, TS_ETYPE, "A, B and C must have one type");
  int64_t ta = aint(nc, "transA", 0), tb = aint(nc, "transB", 0);
  tg_dim m = a->dims[ta ? 1 : 0], ka = a->dims[ta ? 0 : 1], kb = b->dims[tb ? 1 : 0], n = b->dims[tb ? 0 : 1];
  if (!ka.sym && !kb.sym && ka.value != kb.value)
    return nerr(im, nc, TS_ESHAPE, "inner dims differ: A (%s) gives %" PRId64 ", B (%s) %" PRId64, a->name, ka.value, b->name, kb.value);
  tg_dim od[2] = {m, n};
  if (c) {
    if (c->ndim > 2) return nerr(im, nc, TS_ESHAPE, "C (%s) has rank %d", c->name, c->ndim);
    for (int i = 0; i < c->ndim; i++) {
      tg_dim cd = c->dims[i], want = od[2 - c->ndim + i];
      if (!cd.sym && cd.value != 1 && !want.sym && cd.value != want.value)
        return nerr(im, nc, TS_ESHAPE, "C (%s) does not broadcast to the [M, N] result", c->name);
    }
  }
  if ((st = set_float(im, nc, "alpha", afloat(nc, "alpha", 1.0))) || (st = set_float(im, nc, "beta", afloat(nc, "beta", 1.0))) ||
      (st = set_int(im, nc, "transA", ta != 0)) || (st = set_int(im, nc, "transB", tb != 0)))
    return st;
  set_out(nc, 0, a->dtype, 2, od);
  return TS_OK;
}

static ts_status h_matmul(imp *im, nctx *nc) {
  const tg_value *a = IN(im, nc, 0), *b = IN(im, nc, 1);
  if (!a || !b) return nerr(im, nc, TS_EINVAL, "both inputs are required");
  if (!ir_dtype_eq(a->dtype, b->dtype)) return nerr(im, nc, TS_ETYPE, "inputs differ in type");
  if (a->ndim < 1 || b->ndim < 1) return nerr(im, nc, TS_ESHAPE, "inputs must have rank >= 1");
  if (a->ndim > MAX_RANK || b->ndim > MAX_RANK) return nerr(im, nc, TS_EUNSUPPORTED, "rank above %d", MAX_RANK);
  tg_dim ka = a->dims[a->ndim - 1], kb = b->dims[b->ndim >= 2 ? b->ndim - 2 : 0];
  if (!ka.sym && !kb.sym && ka.value != kb.value)
    return nerr(im, nc, TS_ESHAPE, "inner dims differ: %s gives %" PRId64 ", %s %" PRId64, a->name, ka.value, b->name, kb.value);
  /* batch dims broadcast */
  tg_value ba = *a, bb = *b;
  ba.ndim = a->ndim >= 2 ? a->ndim - 2 : 0;
  bb.ndim = b->ndim >= 2 ? b->ndim - 2 : 0;
  int nd = 0;
  tg_dim od[MAX_RANK + 2];
  ts_status st = broadcast(im, nc, &ba, &bb, &nd, od);
  if (st) return st;
  if (a->ndim >= 2) od[nd++] = a->dims[a->ndim - 2];
  if (b->ndim >= 2) od[nd++] = b->dims[b->ndim - 1];
  if (nd > MAX_RANK) return nerr(im, nc, TS_EUNSUPPORTED, "rank above %d", MAX_RANK);
  set_out(nc, 0, a->dtype, nd, od);
  return TS_OK;
}

static ts_status h_flatten(imp *im, nctx *nc) {
  ts_status st = h_unary(im, nc);
  if (st) return st;
  const tg_value *x = IN(im, nc, 0);
  int64_t ax = aint(nc, "axis", 1);
  if (!norm_axis(&ax, x->ndim, true)) return nerr(im, nc, TS_EINVAL, "axis %" PRId64 " is out of range for rank %d", aint(nc, "axis", 1), x->ndim);
  tg_dim od[2];
  if (!dims_product(x->dims, (int)ax, &od[0]) || !dims_product(x->dims + ax, x->ndim - (int)ax, &od[1]))
    return nerr(im, nc, TS_EUNSUPPORTED, "flattening %s at axis %" PRId64 " multiplies a symbolic dim by others", x->name, ax);
  set_out(nc, 0, x->dtype, 2, od);
  return set_int(im, nc, "axis", ax);
}

/* Reshape target with 0 (copy) and -1 (infer) resolved against x's dims. */
static ts_status h_reshape(imp *im, nctx *nc) {
  ts_status st = need_input(im, nc, 0, "data");
  if (st || (st = need_input(im, nc, 1, "shape"))) return st;
  const tg_value *x = IN(im, nc, 0), *s = IN(im, nc, 1);
  const known *k = kv_get(im, nc->in[1]);
  if (!k) return nerr(im, nc, TS_EUNSUPPORTED, "the shape input (%s) must be a constant or computable at import", s->name);
  if (k->n > MAX_RANK) return nerr(im, nc, TS_EUNSUPPORTED, "target rank %d above %d", k->n, MAX_RANK);
  int64_t allowzero = aint(nc, "allowzero", 0);
  tg_dim od[MAX_RANK];
  int infer = -1;
  bool has_sym = false;
  for (int i = 0; i < k->n; i++) {
    tg_dim t = k->d[i];
    if (t.sym) { od[i] = t; has_sym = true; continue; }
    if (t.value == 0 && !allowzero) {
      if (i >= x->ndim) return nerr(im, nc, TS_ESHAPE, "shape[%d] = 0 copies a dim %s does not have", i, x->name);
      od[i] = x->dims[i];
    } else if (t.value == -1) {
      if (infer >= 0) return nerr(im, nc, TS_EINVAL, "shape has more than one -1");
      infer = i;
    } else if (t.value < 0) {
      return nerr(im, nc, TS_EINVAL, "shape[%d] = %" PRId64, i, t.value);
    } else {
      od[i] = t;
    }
  }
  /* element count algebra: constants multiply, symbols cancel pairwise */
  const char *xs[MAX_RANK];
  int nxs = 0, nos = 0;
  int64_t xc = 1, oc = 1;
  for (int i = 0; i < x->ndim; i++) {
    if (x->dims[i].sym) xs[nxs++] = x->dims[i].sym;
    else if (__builtin_mul_overflow(xc, x->dims[i].value, &xc)) return nerr(im, nc, TS_ESHAPE, "the input's size overflows");
  }
  for (int i = 0; i < k->n; i++) {
    if (i == infer) continue;
    if (od[i].sym) {
      int j;
      for (j = 0; j < nxs; j++)
        if (xs[j] && !strcmp(xs[j], od[i].sym)) break;
      if (j < nxs) xs[j] = NULL;
      else nos++;
    } else {
      if (od[i].value > MAX_ELEMS || __builtin_mul_overflow(oc, od[i].value, &oc) || oc > MAX_ELEMS)
        return nerr(im, nc, TS_ESHAPE, "the target shape's size is too large");
    }
  }
  int left = 0;
  const char *lsym = NULL;
  for (int j = 0; j < nxs; j++)
    if (xs[j]) { left++; lsym = xs[j]; }
  char b1[256], b2[256];
  dims_str(b1, sizeof b1, x->ndim, x->dims);
  if (infer >= 0) {
    if (nos || left > 1 || (left == 1 && (oc == 0 || xc % oc || xc / oc != 1)) || (left == 0 && (oc == 0 || xc % oc)))
      return nerr(im, nc, TS_EUNSUPPORTED, "cannot infer the -1 of the target shape from %s (%s)", x->name, b1);
    od[infer] = left ? (tg_dim){-1, lsym} : DC(xc / oc);
  } else if (nos || left || xc != oc) {
    dims_str(b2, sizeof b2, k->n, od);
    return nerr(im, nc, TS_ESHAPE, "%s (%s) cannot be reshaped to %s", x->name, b1, b2);
  }
  if (!has_sym) {
    int64_t raw[MAX_RANK];
    for (int i = 0; i < k->n; i++) raw[i] = k->d[i].value;
    if ((st = set_ints(im, nc, "shape", raw, k->n))) return st;
    drop_inputs(nc, 1);
  }
  if ((st = set_int(im, nc, "allowzero", allowzero))) return st;
  set_out(nc, 0, x->dtype, k->n, od);
  const known *xk = kv_get(im, nc->in[0]);
  if (xk) nc->okv = *xk;
  return TS_OK;
}

static ts_status h_transpose(imp *im, nctx *nc) {
  ts_status st = h_unary(im, nc);
  if (st) return st;
  const tg_value *x = IN(im, nc, 0);
  int n;
  const int64_t *p = aints(nc, "perm", &n);
  int64_t perm[MAX_RANK];
  if (x->ndim > MAX_RANK) return nerr(im, nc, TS_EUNSUPPORTED, "rank above %d", MAX_RANK);
  if (p && n != x->ndim) return nerr(im, nc, TS_EINVAL, "perm has %d entries for rank %d", n, x->ndim);
  bool seen[MAX_RANK] = {false};
  tg_dim od[MAX_RANK];
  for (int i = 0; i < x->ndim; i++) {
    perm[i] = p ? p[i] : x->ndim - 1 - i;
    if (perm[i] < 0 || perm[i] >= x->ndim || seen[perm[i]]) return nerr(im, nc, TS_EINVAL, "perm is not a permutation of 0..%d", x->ndim - 1);
    seen[perm[i]] = true;
    od[i] = x->dims[perm[i]];
  }
  set_out(nc, 0, x->dtype, x->ndim, od);
  return set_ints(im, nc, "perm", perm, x->ndim);
}

static ts_status h_concat(imp *im, nctx *nc) {
  const tg_value *x = IN(im, nc, 0);
  if (!x) return nerr(im, nc, TS_EINVAL, "input 0 is required");
  if (!A(nc, "axis")) return nerr(im, nc, TS_EINVAL, "attribute axis is required");
  int64_t ax = aint(nc, "axis", 0);
  if (!norm_axis(&ax, x->ndim, false)) return nerr(im, nc, TS_EINVAL, "axis %" PRId64 " is out of range for rank %d", aint(nc, "axis", 0), x->ndim);
  tg_dim od[MAX_RANK];
  for (int i = 0; i < x->ndim; i++) od[i] = x->dims[i];
  bool all_known = true;
  int kn = 0;
  for (int i = 0; i < nc->nin; i++) {
    const tg_value *v = IN(im, nc, i);
    if (!v) return nerr(im, nc, TS_EINVAL, "input %d is omitted", i);
    if (!ir_dtype_eq(v->dtype, x->dtype)) return nerr(im, nc, TS_ETYPE, "input %d (%s) differs in type from input 0", i, v->name);
    if (v->ndim != x->ndim) return nerr(im, nc, TS_ESHAPE, "input %d (%s) has rank %d, input 0 has %d", i, v->name, v->ndim, x->ndim);
    for (int j = 0; j < x->ndim; j++) {
      if (j == ax) continue;
      if (!tg_dim_eq(v->dims[j], od[j]) && !od[j].sym && !v->dims[j].sym)
        return nerr(im, nc, TS_ESHAPE, "input %d (%s) dim %d is %" PRId64 ", input 0's is %" PRId64, i, v->name, j, v->dims[j].value, od[j].value);
      if (od[j].sym && !v->dims[j].sym) od[j] = v->dims[j];
    }
    if (i > 0) {
      if (od[ax].sym || v->dims[ax].sym)
        return nerr(im, nc, TS_EUNSUPPORTED, "concatenating along a symbolic dim (input %d, %s)", i, v->name);
      od[ax].value += v->dims[ax].value;
    }
    const known *k = kv_get(im, nc->in[i]);
    if (!k) all_known = false;
    else kn += k->n;
  }
  set_out(nc, 0, x->dtype, x->ndim, od);
  if (all_known && x->ndim == 1 && kn <= MAX_KNOWN) {
    tg_dim *d = TS_ANEWN(im->a, tg_dim, kn ? kn : 1);
    if (!d) return oom(im);
    int o = 0;
    for (int i = 0; i < nc->nin; i++) {
      const known *k = kv_get(im, nc->in[i]);
      for (int j = 0; j < k->n; j++) d[o++] = k->d[j];
    }
    nc->okv = (known){kn, d};
  }
  return set_int(im, nc, "axis", ax);
}

static ts_status h_split(imp *im, nctx *nc) {
  ts_status st = need_input(im, nc, 0, "input");
  if (st) return st;
  const tg_value *x = IN(im, nc, 0);
  int64_t ax = aint(nc, "axis", 0);
  if (!norm_axis(&ax, x->ndim, false)) return nerr(im, nc, TS_EINVAL, "axis %" PRId64 " is out of range for rank %d", aint(nc, "axis", 0), x->ndim);
  if (x->dims[ax].sym) return nerr(im, nc, TS_EUNSUPPORTED, "splitting along symbolic dim %s", x->dims[ax].sym);
  int64_t dim = x->dims[ax].value;
  int64_t buf[MAX_IO];
  const int64_t *sv;
  int n;
  bool present;
  if ((st = param_ints(im, nc, 1, "split", &present, buf, MAX_IO, &sv, &n))) return st;
  int64_t sizes[MAX_IO];
  int nout = nc->nout;
  if (present) {
    if (A(nc, "num_outputs")) return nerr(im, nc, TS_EINVAL, "both the split input and num_outputs are given");
    if (n != nout) return nerr(im, nc, TS_EINVAL, "split has %d sizes for %d outputs", n, nout);
    int64_t sum = 0;
    for (int i = 0; i < n; i++) {
      if (sv[i] < 0) return nerr(im, nc, TS_EINVAL, "split[%d] = %" PRId64, i, sv[i]);
      if (sv[i] > MAX_ELEMS) return nerr(im, nc, TS_EINVAL, "split[%d] = %" PRId64, i, sv[i]);
      sizes[i] = sv[i];
      sum += sv[i];
    }
    if (sum != dim) return nerr(im, nc, TS_ESHAPE, "split sizes add up to %" PRId64 ", dim %" PRId64 " is %" PRId64, sum, ax, dim);
  } else {
    int64_t parts = A(nc, "num_outputs") ? aint(nc, "num_outputs", 0) : nout;
    if (im->opset >= 18 && !A(nc, "num_outputs")) return nerr(im, nc, TS_EINVAL, "neither split nor num_outputs is given (required at opset 18+)");
    if (parts != nout) return nerr(im, nc, TS_EINVAL, "num_outputs %" PRId64 " but %d outputs", parts, nout);
    if (parts < 1) return nerr(im, nc, TS_EINVAL, "num_outputs %" PRId64, parts);
    if (im->opset < 18 && dim % parts)
      return nerr(im, nc, TS_ESHAPE, "dim %" PRId64 " (%" PRId64 ") does not split evenly into %" PRId64, ax, dim, parts);
    int64_t chunk = (dim + parts - 1) / parts;
    for (int i = 0; i < nout; i++) {
      int64_t s = dim - chunk * i;
      sizes[i] = s < 0 ? 0 : s < chunk ? s : chunk;
    }
  }
  for (int i = 0; i < nout; i++) {
    set_out(nc, i, x->dtype, x->ndim, x->dims);
    nc->odims[i][ax] = DC(sizes[i]);
  }
  drop_inputs(nc, 1);
  if ((st = set_int(im, nc, "axis", ax)) || (st = set_ints(im, nc, "split", sizes, nout))) return st;
  tg_attr *no = A(nc, "num_outputs");
  if (no) *no = nc->attr[--nc->nattr];
  return TS_OK;
}

static ts_status h_slice(imp *im, nctx *nc) {
  ts_status st = need_input(im, nc, 0, "data");
  if (st) return st;
  const tg_value *x = IN(im, nc, 0);
  int r = x->ndim;
  int64_t b0[MAX_RANK], b1[MAX_RANK], b2[MAX_RANK], b3[MAX_RANK];
  const int64_t *starts, *ends, *axes, *steps;
  int ns, ne, na, nst;
  bool p0, p1, p2, p3;
  if ((st = param_ints(im, nc, 1, "starts", &p0, b0, MAX_RANK, &starts, &ns)) ||
      (st = param_ints(im, nc, 2, "ends", &p1, b1, MAX_RANK, &ends, &ne)) ||
      (st = param_ints(im, nc, 3, "axes", &p2, b2, MAX_RANK, &axes, &na)) ||
      (st = param_ints(im, nc, 4, "steps", &p3, b3, MAX_RANK, &steps, &nst)))
    return st;
  if (!p0 || !p1) return nerr(im, nc, TS_EINVAL, "starts and ends are required");
  if (ns != ne || (p2 && na != ns) || (p3 && nst != ns))
    return nerr(im, nc, TS_EINVAL, "starts, ends, axes and steps differ in length");
  tg_dim od[MAX_RANK];
  for (int i = 0; i < r; i++) od[i] = x->dims[i];
  int64_t S[MAX_RANK], E[MAX_RANK], AX[MAX_RANK], ST[MAX_RANK];
  bool seen[MAX_RANK] = {false};
  for (int i = 0; i < ns; i++) {
    int64_t a = p2 ? axes[i] : i;
    if (!norm_axis(&a, r, false) || seen[a]) return nerr(im, nc, TS_EINVAL, "axes[%d] is out of range or repeated", i);
    seen[a] = true;
    int64_t step = p3 ? steps[i] : 1;
    /* no dim exceeds MAX_ELEMS: a larger step means the same, and cannot overflow */
    if (step > MAX_ELEMS) step = MAX_ELEMS;
    if (step < -MAX_ELEMS) step = -MAX_ELEMS;
    if (step == 0) return nerr(im, nc, TS_EINVAL, "steps[%d] is 0", i);
    int64_t s = starts[i], e = ends[i];
    AX[i] = a;
    ST[i] = step;
    if (x->dims[a].sym) {
      /* a whole symbolic dim is fine; anything else has no symbolic size */
      if (step == 1 && s == 0 && e >= INT32_MAX) {
        S[i] = s;
        E[i] = e;
        continue;
      }
      return nerr(im, nc, TS_EUNSUPPORTED, "slicing symbolic dim %s other than whole", x->dims[a].sym);
    }
    int64_t dim = x->dims[a].value;
    if (s < 0) s += dim;
    if (e < 0) e += dim;
    if (step > 0) {
      s = s < 0 ? 0 : s > dim ? dim : s;
      e = e < 0 ? 0 : e > dim ? dim : e;
    } else {
      s = s < 0 ? -1 : s > dim - 1 ? dim - 1 : s;
      e = e < -1 ? -1 : e > dim - 1 ? dim - 1 : e;
    }
    int64_t len = step > 0 ? (e - s + step - 1) / step : (s - e + (-step) - 1) / (-step);
    if (len < 0) len = 0;
    S[i] = s;
    E[i] = e;
    od[a] = DC(len);
  }
  set_out(nc, 0, x->dtype, r, od);
  /* known 1-D contents slice along */
  const known *k = kv_get(im, nc->in[0]);
  if (k && r == 1 && ns == 1 && !x->dims[0].sym) {
    int64_t len = od[0].value;
    tg_dim *d = TS_ANEWN(im->a, tg_dim, len ? len : 1);
    if (!d) return oom(im);
    for (int64_t j = 0; j < len; j++) d[j] = k->d[S[0] + j * ST[0]];
    nc->okv = (known){(int)len, d};
  }
  drop_inputs(nc, 1);
  if ((st = set_ints(im, nc, "starts", S, ns)) || (st = set_ints(im, nc, "ends", E, ns)) ||
      (st = set_ints(im, nc, "axes", AX, ns)) || (st = set_ints(im, nc, "steps", ST, ns)))
    return st;
  return TS_OK;
}

static ts_status h_gather(imp *im, nctx *nc) {
  const tg_value *x = IN(im, nc, 0), *ix = IN(im, nc, 1);
  if (!x || !ix) return nerr(im, nc, TS_EINVAL, "inputs data and indices are required");
  if (ix->dtype.code != IR_I64 && ix->dtype.code != IR_I32) return nerr(im, nc, TS_ETYPE, "indices (%s) must be int32 or int64", ix->name);
  int64_t ax = aint(nc, "axis", 0);
  if (!norm_axis(&ax, x->ndim, false)) return nerr(im, nc, TS_EINVAL, "axis %" PRId64 " is out of range for rank %d", aint(nc, "axis", 0), x->ndim);
  int nd = x->ndim - 1 + ix->ndim;
  if (nd > MAX_RANK) return nerr(im, nc, TS_EUNSUPPORTED, "rank above %d", MAX_RANK);
  tg_dim od[MAX_RANK];
  int o = 0;
  for (int i = 0; i < ax; i++) od[o++] = x->dims[i];
  for (int i = 0; i < ix->ndim; i++) od[o++] = ix->dims[i];
  for (int i = (int)ax + 1; i < x->ndim; i++) od[o++] = x->dims[i];
  set_out(nc, 0, x->dtype, nd, od);
  /* Gather of known contents with constant indices (shape arithmetic) */
  const known *k = kv_get(im, nc->in[0]);
  int64_t ib[64];
  const int64_t *iv;
  int ni;
  if (k && x->ndim == 1 && ix->ndim <= 1 && kv_ints(im, nc->in[1], &iv, &ni, ib, 64)) {
    tg_dim *d = TS_ANEWN(im->a, tg_dim, ni ? ni : 1);
    if (!d) return oom(im);
    for (int j = 0; j < ni; j++) {
      int64_t t = iv[j] < 0 ? iv[j] + k->n : iv[j];
      if (t < 0 || t >= k->n) return nerr(im, nc, TS_EBOUNDS, "index %" PRId64 " is out of range for %d elements", iv[j], k->n);
      d[j] = k->d[t];
    }
    nc->okv = (known){ni, d};
  }
  return set_int(im, nc, "axis", ax);
}

static ts_status h_pad(imp *im, nctx *nc) {
  ts_status st = need_input(im, nc, 0, "data");
  if (st) return st;
  const tg_value *x = IN(im, nc, 0);
  int r = x->ndim;
  const char *mode = astr(nc, "mode", "constant");
  if (strcmp(mode, "constant") && strcmp(mode, "reflect") && strcmp(mode, "edge") &&
      (strcmp(mode, "wrap") || im->opset < 19))
    return nerr(im, nc, TS_EUNSUPPORTED, "mode='%s'%s", mode, !strcmp(mode, "wrap") ? " (wrap needs opset 19)" : "");
  if (nc->nin > 3 && im->opset < 18) return nerr(im, nc, TS_EUNSUPPORTED, "the axes input needs opset 18");
  int64_t pb[2 * MAX_RANK], ab[MAX_RANK];
  const int64_t *pads, *axes;
  int np, na;
  bool pp, pa;
  if ((st = param_ints(im, nc, 1, "pads", &pp, pb, 2 * MAX_RANK, &pads, &np)) ||
      (st = param_ints(im, nc, 3, "axes", &pa, ab, MAX_RANK, &axes, &na)))
    return st;
  if (!pp) return nerr(im, nc, TS_EINVAL, "input 1 (pads) is required");
  int64_t ax[MAX_RANK];
  int nax = pa ? na : r;
  for (int i = 0; i < nax; i++) {
    ax[i] = pa ? axes[i] : i;
    if (!norm_axis(&ax[i], r, false)) return nerr(im, nc, TS_EINVAL, "axes[%d] is out of range", i);
  }
  if (np != 2 * nax) return nerr(im, nc, TS_EINVAL, "pads has %d entries for %d axes", np, nax);
  int64_t full[2 * MAX_RANK] = {0};
  for (int i = 0; i < nax; i++) {
    if (pads[i] < -MAX_ELEMS || pads[i] > MAX_ELEMS || pads[nax + i] < -MAX_ELEMS || pads[nax + i] > MAX_ELEMS)
      return nerr(im, nc, TS_EINVAL, "pads for axis %" PRId64 " are out of range", ax[i]);
    full[ax[i]] = pads[i];
    full[r + ax[i]] = pads[nax + i];
  }
  double value = 0;
  if (nc->nin > 2 && nc->in[2] >= 0 && !const_scalar(im, nc->in[2], &value))
    return nerr(im, nc, TS_EUNSUPPORTED, "input 2 (constant_value) must be a constant scalar");
  tg_dim od[MAX_RANK];
  for (int i = 0; i < r; i++) {
    od[i] = x->dims[i];
    if (!full[i] && !full[r + i]) continue;
    if (x->dims[i].sym) return nerr(im, nc, TS_EUNSUPPORTED, "padding symbolic dim %s", x->dims[i].sym);
    int64_t o = x->dims[i].value + full[i] + full[r + i];
    if (o < 0) return nerr(im, nc, TS_ESHAPE, "dim %d would be %" PRId64, i, o);
    od[i] = DC(o);
  }
  set_out(nc, 0, x->dtype, r, od);
  drop_inputs(nc, 1);
  if ((st = set_ints(im, nc, "pads", full, 2 * r)) || (st = set_str(im, nc, "mode", mode)) ||
      (st = set_float(im, nc, "value", value)))
    return st;
  return TS_OK;
}

static ts_status h_reduce(imp *im, nctx *nc) {
  ts_status st = need_input(im, nc, 0, "data");
  if (st) return st;
  const tg_value *x = IN(im, nc, 0);
  int r = x->ndim;
  bool axes_input = nc->op == TG_OP_REDUCE_SUM || im->opset >= 18;
  if (!axes_input && nc->nin > 1) return nerr(im, nc, TS_EUNSUPPORTED, "the axes input needs opset 18 (use the axes attribute)");
  int64_t buf[MAX_RANK];
  const int64_t *axes;
  int na;
  bool present = false;
  if (axes_input) {
    if ((st = param_ints(im, nc, 1, "axes", &present, buf, MAX_RANK, &axes, &na))) return st;
  } else {
    axes = aints(nc, "axes", &na);
    present = A(nc, "axes") != NULL;
  }
  int64_t keep = aint(nc, "keepdims", 1), noop = aint(nc, "noop_with_empty_axes", 0);
  drop_inputs(nc, 1);
  if (na == 0 && noop) {
    /* reduces nothing: an Identity */
    nc->op = TG_OP_IDENTITY;
    nc->nattr = 0;
    same_as_input(im, nc, 0, 0);
    return TS_OK;
  }
  bool red[MAX_RANK] = {false};
  int64_t ax[MAX_RANK];
  int nax = 0;
  if (na == 0) {
    for (int i = 0; i < r; i++) red[i] = true;
  }
  for (int i = 0; i < na; i++) {
    int64_t a = axes[i];
    if (!norm_axis(&a, r, false) || red[a]) return nerr(im, nc, TS_EINVAL, "axes[%d] = %" PRId64 " is out of range or repeated", i, axes[i]);
    red[a] = true;
  }
  (void)present;
  tg_dim od[MAX_RANK];
  int o = 0;
  for (int i = 0; i < r; i++) {
    if (red[i]) {
      ax[nax++] = i;
      if (keep) od[o++] = DC(1);
    } else {
      od[o++] = x->dims[i];
    }
  }
  set_out(nc, 0, x->dtype, o, od);
  if ((st = set_ints(im, nc, "axes", ax, nax)) || (st = set_int(im, nc, "keepdims", keep != 0)) ||
      (st = set_int(im, nc, "noop_with_empty_axes", 0)))
    return st;
  return TS_OK;
}

static ts_status h_cast(imp *im, nctx *nc) {
  ts_status st = need_input(im, nc, 0, "input");
  if (st) return st;
  if (!A(nc, "to")) return nerr(im, nc, TS_EINVAL, "attribute to is required");
  int64_t to = aint(nc, "to", 0);
  ir_dtype dt;
  if (to < 0 || to > 1000 || !tg_onnx_dtype((int)to, &dt))
    return nerr(im, nc, TS_EUNSUPPORTED, "cast to %s (%" PRId64 ")", onnx_type_name((int)to), to);
  const tg_value *x = IN(im, nc, 0);
  set_out(nc, 0, dt, x->ndim, x->dims);
  const known *k = kv_get(im, nc->in[0]);
  if (k && (dt.code == IR_I64 || dt.code == IR_I32)) nc->okv = *k;
  if (A(nc, "saturate")) {
    tg_attr *s = A(nc, "saturate");
    *s = nc->attr[--nc->nattr]; /* only meaningful for float8 targets, which are refused */
  }
  return set_int(im, nc, "to", to);
}

/* Squeeze/Unsqueeze: output 0 gets dims od (rank r), the input's known
 * value passes through, and the axes input becomes the "axes" attribute. */
static ts_status axes_op_out(imp *im, nctx *nc, ir_dtype dt, int r, const tg_dim *od, const int64_t *ax, int nax) {
  set_out(nc, 0, dt, r, od);
  const known *k = kv_get(im, nc->in[0]);
  if (k) nc->okv = *k;
  drop_inputs(nc, 1);
  return set_ints(im, nc, "axes", ax, nax);
}

static ts_status h_squeeze(imp *im, nctx *nc) {
  ts_status st = need_input(im, nc, 0, "data");
  if (st) return st;
  const tg_value *x = IN(im, nc, 0);
  int r = x->ndim;
  int64_t buf[MAX_RANK];
  const int64_t *axes;
  int na;
  bool present;
  if ((st = param_ints(im, nc, 1, "axes", &present, buf, MAX_RANK, &axes, &na))) return st;
  bool sq[MAX_RANK] = {false};
  if (!present) {
    for (int i = 0; i < r; i++) {
      if (x->dims[i].sym) return nerr(im, nc, TS_EUNSUPPORTED, "squeeze without axes over symbolic dim %s", x->dims[i].sym);
      sq[i] = x->dims[i].value == 1;
    }
  }
  for (int i = 0; i < na; i++) {
    int64_t a = axes[i];
    if (!norm_axis(&a, r, false) || sq[a]) return nerr(im, nc, TS_EINVAL, "axes[%d] = %" PRId64 " is out of range or repeated", i, axes[i]);
    if (x->dims[a].sym || x->dims[a].value != 1)
      return nerr(im, nc, TS_ESHAPE, "dim %" PRId64 " of %s is not 1", a, x->name);
    sq[a] = true;
  }
  tg_dim od[MAX_RANK];
  int64_t ax[MAX_RANK];
  int o = 0, nax = 0;
  for (int i = 0; i < r; i++) {
    if (sq[i]) ax[nax++] = i;
    else od[o++] = x->dims[i];
  }
  return axes_op_out(im, nc, x->dtype, o, od, ax, nax);
}

static ts_status h_unsqueeze(imp *im, nctx *nc) {
  ts_status st = need_input(im, nc, 0, "data");
  if (st) return st;
  const tg_value *x = IN(im, nc, 0);
  int64_t buf[MAX_RANK];
  const int64_t *axes;
  int na;
  bool present;
  if ((st = param_ints(im, nc, 1, "axes", &present, buf, MAX_RANK, &axes, &na))) return st;
  if (!present) return nerr(im, nc, TS_EINVAL, "input 1 (axes) is required");
  int r = x->ndim + na;
  if (r > MAX_RANK) return nerr(im, nc, TS_EUNSUPPORTED, "rank above %d", MAX_RANK);
  bool ins[MAX_RANK] = {false};
  for (int i = 0; i < na; i++) {
    int64_t a = axes[i];
    if (!norm_axis(&a, r, false) || ins[a]) return nerr(im, nc, TS_EINVAL, "axes[%d] = %" PRId64 " is out of range or repeated", i, axes[i]);
    ins[a] = true;
  }
  tg_dim od[MAX_RANK];
  int64_t ax[MAX_RANK];
  int j = 0, nax = 0;
  for (int i = 0; i < r; i++) {
    if (ins[i]) {
      od[i] = DC(1);
      ax[nax++] = i;
    } else {
      od[i] = x->dims[j++];
    }
  }
  return axes_op_out(im, nc, x->dtype, r, od, ax, nax);
}

static ts_status h_shape(imp *im, nctx *nc) {
  ts_status st = need_input(im, nc, 0, "data");
  if (st) return st;
  const tg_value *x = IN(im, nc, 0);
  int r = x->ndim;
  int64_t s = aint(nc, "start", 0), e = aint(nc, "end", r);
  tg_shape_range(r, &s, &e);
  int64_t n = e > s ? e - s : 0;
  tg_dim od[1] = {DC(n)};
  set_out(nc, 0, ir_dt(IR_I64), 1, od);
  tg_dim *d = TS_ANEWN(im->a, tg_dim, n ? n : 1);
  if (!d) return oom(im);
  for (int64_t i = 0; i < n; i++) d[i] = x->dims[s + i];
  nc->okv = (known){(int)n, d};
  if ((st = set_int(im, nc, "start", s)) || (st = set_int(im, nc, "end", e))) return st;
  return TS_OK;
}

static ts_status h_constant(imp *im, nctx *nc) {
  if (nc->nattr != 1) return nerr(im, nc, TS_EINVAL, "exactly one value attribute is required, %d given", nc->nattr);
  tg_attr *a = &nc->attr[0];
  const char *on = nc->outname[0];
  char what[512];
  snprintf(what, sizeof what, "node %s (Constant, opset %d)", nc->name, im->opset);
  if (!on) return nerr(im, nc, TS_EINVAL, "the output has no name");
  ts_status st;
  if (!strcmp(a->name, "value")) {
    const Onnx__AttributeProto *ap = nc->np->attribute[a->i];
    if (!ap->t) return nerr(im, nc, TS_EPARSE, "value holds no tensor");
    if ((st = import_tensor(im, ap->t, on, what, &nc->const_value))) return st;
  } else {
    /* value_float(s) / value_int(s): build the tensor here */
    bool isf = a->kind == TG_A_FLOAT || a->kind == TG_A_FLOATS;
    bool scalar = a->kind == TG_A_FLOAT || a->kind == TG_A_INT;
    int n = scalar ? 1 : a->n;
    size_t eb = isf ? 4 : 8;
    void *buf = ts_malloc((size_t)(n ? n : 1) * eb);
    if (!buf) return oom(im);
    for (int i = 0; i < n; i++) {
      if (isf) { float f = (float)(scalar ? a->f : a->floats[i]); memcpy((char *)buf + i * 4, &f, 4); }
      else { int64_t v = scalar ? a->i : a->ints[i]; memcpy((char *)buf + i * 8, &v, 8); }
    }
    tg_dim dd = DC(n);
    ts_diag tmp;
    ts_diag_clear(&tmp);
    int id = tg_value_add(im->g, on, TG_V_CONST, ir_dt(isf ? IR_F32 : IR_I64), scalar ? 0 : 1, &dd, &tmp);
    if (id < 0) st = nerr(im, nc, tmp.code, "%s", tmp.msg);
    else st = tg_value_set_data(im->g, id, buf, (size_t)n * eb, im->d);
    ts_free(buf);
    if (st) return st;
    if (!kv_grow(im)) return oom(im);
    if (!isf) {
      tg_dim *kd = TS_ANEWN(im->a, tg_dim, n ? n : 1);
      if (!kd) return oom(im);
      for (int i = 0; i < n; i++) kd[i] = DC(scalar ? a->i : a->ints[i]);
      im->kv[id] = (known){n, kd};
    }
    nc->const_value = id;
  }
  nc->to_const = true;
  return TS_OK;
}

/* ---- graph-level import --------------------------------------------------- */

/* A dim_param as a symbol: identifier characters kept, others '_'. */
static const char *sym_name(imp *im, const char *p) {
  size_t n = strlen(p);
  char *s = ts_arena_alloc(im->a, n + 2);
  if (!s) return NULL;
  size_t o = 0;
  if (!((p[0] >= 'a' && p[0] <= 'z') || (p[0] >= 'A' && p[0] <= 'Z') || p[0] == '_')) s[o++] = '_';
  for (size_t i = 0; i < n; i++) {
    char c = p[i];
    s[o++] = ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_') ? c : '_';
  }
  s[o] = '\0';
  return s;
}

static ts_status import_input(imp *im, const Onnx__ValueInfoProto *vi) {
  const char *name = vi->name;
  if (!name || !name[0]) return ts_diag_set(im->d, TS_EPARSE, "%s: a graph input has no name", im->label);
  if (tg_value_find(im->g, name) >= 0) return TS_OK; /* an initializer listed as input (IR < 4): a constant */
  const Onnx__TypeProto *tp = vi->type;
  if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type)
    return ts_diag_set(im->d, TS_EUNSUPPORTED, "%s: graph input %s is not a dense tensor", im->label, name);
  const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
  ir_dtype dt;
  int et = tt->has_elem_type ? tt->elem_type : 0;
  if (!tg_onnx_dtype(et, &dt))
    return ts_diag_set(im->d, TS_EUNSUPPORTED, "%s: graph input %s: element type %s (%d) is not supported", im->label,
                       name, onnx_type_name(et), et);
  if (!tt->shape) return ts_diag_set(im->d, TS_EUNSUPPORTED, "%s: graph input %s has no shape (unknown rank)", im->label, name);
  if (tt->shape->n_dim > MAX_RANK)
    return ts_diag_set(im->d, TS_EUNSUPPORTED, "%s: graph input %s: rank %zu above %d", im->label, name, tt->shape->n_dim, MAX_RANK);
  tg_dim dims[MAX_RANK];
  for (size_t i = 0; i < tt->shape->n_dim; i++) {
    const Onnx__TensorShapeProto__Dimension *dm = tt->shape->dim[i];
    if (dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
      if (dm->dim_value < 0 || dm->dim_value > MAX_ELEMS)
        return ts_diag_set(im->d, TS_EPARSE, "%s: graph input %s: dim %zu is %" PRId64, im->label, name, i, dm->dim_value);
      dims[i] = DC(dm->dim_value);
    } else if (dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && dm->dim_param && dm->dim_param[0]) {
      const char *s = sym_name(im, dm->dim_param);
      if (!s) return oom(im);
      dims[i] = (tg_dim){-1, s};
    } else {
      const char *s = ts_arena_printf(im->a, "unk_%d", im->nunk++);
      if (!s) return oom(im);
      dims[i] = (tg_dim){-1, s};
    }
  }
  ts_diag tmp;
  ts_diag_clear(&tmp);
  int id = tg_value_add(im->g, name, TG_V_INPUT, dt, (int)tt->shape->n_dim, dims, &tmp);
  if (id < 0) return ts_diag_set(im->d, tmp.code, "%s: graph input %s: %s", im->label, name, tmp.msg);
  if (!kv_grow(im)) return oom(im);
  return tg_graph_add_input(im->g, id) == TS_OK ? TS_OK : oom(im);
}

static ts_status import_node(imp *im, const Onnx__NodeProto *np, size_t index) {
  nctx *nc = ts_calloc(1, sizeof *nc);
  if (!nc) return oom(im);
  ts_status st = TS_OK;
  char idx[32];
  snprintf(idx, sizeof idx, "#%zu", index);
  nc->np = np;
  nc->name = np->name && np->name[0] ? np->name : idx;
  nc->okv.n = -1;
  nc->const_value = -1;
  const char *opt = np->op_type ? np->op_type : "";
  const char *dom = np->domain ? np->domain : "";
  nc->op = tg_op_from_name(opt);
  if (dom[0] && strcmp(dom, "ai.onnx")) {
    st = ts_diag_set(im->d, TS_EUNSUPPORTED, "%s: node %s: operator %s of domain '%s' is not supported (only the default domain)",
                     im->label, nc->name, opt, dom);
    goto done;
  }
  const op_spec *sp = nc->op < TG_OP_COUNT ? spec_of(nc->op) : NULL;
  if (!sp) {
    st = ts_diag_set(im->d, TS_EUNSUPPORTED, "%s: node %s: operator %s (opset %d) is not supported", im->label, nc->name,
                     opt[0] ? opt : "(empty op_type)", im->opset);
    goto done;
  }
  if (im->opset < sp->since) {
    st = nerr(im, nc, TS_EUNSUPPORTED, "%s exists from opset %d", opt, sp->since);
    goto done;
  }
  if (np->n_input > MAX_IO || np->n_output > MAX_IO) {
    st = nerr(im, nc, TS_EUNSUPPORTED, "%zu inputs / %zu outputs", np->n_input, np->n_output);
    goto done;
  }
  /* trailing empty names are omitted optional inputs/outputs */
  int nin = (int)np->n_input, nout = (int)np->n_output;
  while (nin > 0 && (!np->input[nin - 1] || !np->input[nin - 1][0])) nin--;
  if (nin < sp->min_in || (sp->max_in >= 0 && nin > sp->max_in) || nout < sp->min_out ||
      (sp->max_out >= 0 && nout > sp->max_out)) {
    st = nerr(im, nc, TS_EINVAL, "%d inputs and %d outputs; the op takes %d..%d and %d..%d", nin, nout, sp->min_in,
              sp->max_in, sp->min_out, sp->max_out);
    goto done;
  }
  nc->nin = nin;
  for (int i = 0; i < nin; i++) {
    const char *in = np->input[i];
    if (!in || !in[0]) {
      nc->in[i] = -1;
      continue;
    }
    nc->in[i] = tg_value_find(im->g, in);
    if (nc->in[i] < 0) {
      st = nerr(im, nc, TS_EINVAL, "input %d (%s) is not defined before the node (the graph must be topologically sorted)", i, in);
      goto done;
    }
  }
  nc->nout = nout;
  for (int i = 0; i < nout; i++) {
    nc->outname[i] = np->output[i] && np->output[i][0] ? np->output[i] : NULL;
    if (nc->outname[i] && tg_value_find(im->g, nc->outname[i]) >= 0) {
      st = nerr(im, nc, TS_EINVAL, "output %s is already defined (SSA: one producer per value)", nc->outname[i]);
      goto done;
    }
  }
  if (!nc->outname[0]) {
    st = nerr(im, nc, TS_EINVAL, "output 0 has no name");
    goto done;
  }
  if ((st = read_attrs(im, nc, sp))) goto done;
  if ((st = sp->fn(im, nc))) goto done;
  if (nc->to_const) goto done;
  /* outputs */
  int outs[MAX_IO];
  for (int i = 0; i < nc->nout; i++) {
    ts_diag tmp;
    ts_diag_clear(&tmp);
    char tmpname[64];
    const char *on = nc->outname[i];
    if (!on) { /* an unused optional output still needs a value for the slot */
      snprintf(tmpname, sizeof tmpname, "%s:unused%d", nc->name, i);
      on = tmpname;
    }
    outs[i] = tg_value_add(im->g, on, TG_V_INTER, nc->odt[i], nc->ondim[i], nc->odims[i], &tmp);
    if (outs[i] < 0) {
      st = nerr(im, nc, tmp.code, "%s", tmp.msg);
      goto done;
    }
  }
  if (!kv_grow(im)) {
    st = oom(im);
    goto done;
  }
  if (nc->okv.n >= 0) im->kv[outs[0]] = nc->okv;
  ts_diag tmp;
  ts_diag_clear(&tmp);
  int nid = tg_node_add(im->g, nc->op, np->name && np->name[0] ? np->name : NULL, nc->nin, nc->in, nc->nout, outs, &tmp);
  if (nid < 0) {
    st = nerr(im, nc, tmp.code, "%s", tmp.msg);
    goto done;
  }
  for (int i = 0; i < nc->nattr; i++)
    if (tg_node_set_attr(im->g, im->g->nodes[nid], &nc->attr[i]) != TS_OK) {
      st = oom(im);
      goto done;
    }
done:
  ts_free(nc);
  return st;
}

/* Marks dead every node none of whose outputs is used (transitively):
 * use counts once, then one backward walk. */
static ts_status drop_unused(tg_graph *g) {
  int *uses = ts_calloc((size_t)g->nvalues + 1, sizeof(int));
  if (!uses) return TS_ENOMEM;
  for (int i = 0; i < g->nnodes; i++)
    for (int j = 0; j < g->nodes[i]->nin; j++)
      if (g->nodes[i]->inputs[j] >= 0) uses[g->nodes[i]->inputs[j]]++;
  for (int k = 0; k < g->noutputs; k++) uses[g->outputs[k]]++;
  for (int i = g->nnodes - 1; i >= 0; i--) {
    tg_node *n = g->nodes[i];
    bool used = false;
    for (int j = 0; j < n->nout; j++) used |= uses[n->outputs[j]] > 0;
    if (used) continue;
    n->dead = true;
    for (int j = 0; j < n->nin; j++)
      if (n->inputs[j] >= 0) uses[n->inputs[j]]--;
  }
  ts_free(uses);
  return TS_OK;
}

ts_status tg_onnx_import_mem(const void *buf, size_t len, const char *label, ir_module *m, tg_graph **out, ts_diag *d) {
  if (out) *out = NULL;
  if (!label) label = "<memory>";
  if (!buf && len) return ts_diag_set(d, TS_EINVAL, "%s: no data", label);
  Onnx__ModelProto *mp = onnx__model_proto__unpack(&pb_allocator, len, buf);
  if (!mp)
    return ts_diag_set(d, TS_EPARSE, "%s: not a valid ONNX model (protobuf ModelProto did not parse: truncated or corrupt, %zu bytes)",
                       label, len);
  imp im = {.d = d, .label = label, .a = m->arena};
  ts_status st = TS_OK;
  const Onnx__GraphProto *gp = mp->graph;
  if (!gp) {
    st = ts_diag_set(d, TS_EPARSE, "%s: the model has no graph", label);
    goto done;
  }
  int opset = -1;
  for (size_t i = 0; i < mp->n_opset_import; i++) {
    const Onnx__OperatorSetIdProto *os = mp->opset_import[i];
    if (!os->domain || !os->domain[0] || !strcmp(os->domain, "ai.onnx")) opset = os->has_version ? (int)(os->version > 100000 ? 100000 : os->version) : -1;
  }
  if (opset < 0) {
    st = ts_diag_set(d, TS_EUNSUPPORTED, "%s: the model imports no default-domain opset", label);
    goto done;
  }
  if (opset < TG_ONNX_OPSET_MIN || opset > TG_ONNX_OPSET_MAX) {
    st = ts_diag_set(d, TS_EUNSUPPORTED, "%s: opset %d is not supported (tessel reads opsets %d to %d; convert with onnx.version_converter)",
                     label, opset, TG_ONNX_OPSET_MIN, TG_ONNX_OPSET_MAX);
    goto done;
  }
  im.opset = opset;
  im.g = tg_graph_new(m, gp->name && gp->name[0] ? gp->name : "main");
  if (!im.g) {
    st = ts_diag_set(d, TS_ENOMEM, "%s: out of memory", label);
    goto done;
  }
  im.g->opset = opset;
  for (size_t i = 0; i < gp->n_initializer && !st; i++) {
    const Onnx__TensorProto *t = gp->initializer[i];
    char what[300];
    const char *nm = t->name && t->name[0] ? t->name : NULL;
    snprintf(what, sizeof what, "initializer %s", nm ? nm : "(unnamed)");
    if (!nm) st = ts_diag_set(d, TS_EPARSE, "%s: %s: every initializer needs a name", label, what);
    else if (tg_value_find(im.g, nm) >= 0) st = ts_diag_set(d, TS_EPARSE, "%s: %s is defined twice", label, what);
    else {
      int id;
      st = import_tensor(&im, t, nm, what, &id);
    }
  }
  for (size_t i = 0; i < gp->n_input && !st; i++) st = import_input(&im, gp->input[i]);
  for (size_t i = 0; i < gp->n_node && !st; i++) st = import_node(&im, gp->node[i], i);
  if (st) goto fail;
  if (gp->n_output == 0) {
    st = ts_diag_set(d, TS_EINVAL, "%s: the graph has no outputs", label);
    goto fail;
  }
  for (size_t i = 0; i < gp->n_output; i++) {
    const char *on = gp->output[i]->name;
    int id = on ? tg_value_find(im.g, on) : -1;
    if (id < 0) {
      st = ts_diag_set(d, TS_EINVAL, "%s: graph output %s is produced by no node", label, on ? on : "(unnamed)");
      goto fail;
    }
    /* a declared shape must agree with the inferred one where both are constants */
    const Onnx__TypeProto *tp = gp->output[i]->type;
    const tg_value *v = im.g->values[id];
    if (tp && tp->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE && tp->tensor_type && tp->tensor_type->shape) {
      const Onnx__TensorShapeProto *sh = tp->tensor_type->shape;
      if ((int)sh->n_dim != v->ndim) {
        st = ts_diag_set(d, TS_ESHAPE, "%s: graph output %s is declared with rank %zu, inferred rank %d", label, on, sh->n_dim, v->ndim);
        goto fail;
      }
      for (int k = 0; k < v->ndim; k++) {
        const Onnx__TensorShapeProto__Dimension *dm = sh->dim[k];
        if (dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE && !v->dims[k].sym &&
            dm->dim_value != v->dims[k].value) {
          st = ts_diag_set(d, TS_ESHAPE, "%s: graph output %s dim %d is declared %" PRId64 ", inferred %" PRId64, label, on, k,
                           dm->dim_value, v->dims[k].value);
          goto fail;
        }
      }
    }
    if (tg_graph_add_output(im.g, id) != TS_OK) {
      st = ts_diag_set(d, TS_ENOMEM, "%s: out of memory", label);
      goto fail;
    }
  }
  if (drop_unused(im.g) != TS_OK) {
    st = ts_diag_set(d, TS_ENOMEM, "%s: out of memory", label);
    goto fail;
  }
  if ((st = tg_graph_compact(im.g, d))) goto fail;
  if ((st = tg_graph_verify(im.g, d))) goto fail;
  if (out) *out = im.g;
  goto done;
fail:
  tg_graph_free(im.g); /* the entry stays in m, empty */
done:
  ts_free(im.kv);
  onnx__model_proto__free_unpacked(mp, &pb_allocator);
  return st;
}

ts_status tg_onnx_import(const char *path, ir_module *m, tg_graph **out, ts_diag *d) {
  if (out) *out = NULL;
  char *buf = NULL;
  size_t len = 0;
  ts_status st = ts_read_file(path, &buf, &len, d);
  if (st) return st;
  st = tg_onnx_import_mem(buf, len, path, m, out, d);
  ts_free(buf);
  return st;
}
