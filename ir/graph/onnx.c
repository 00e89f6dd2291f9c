/* onnx.c — ONNX import (onnx.h): protobuf-c unpacks the model through the
 * allocation hook, then each node is checked against its operator's row in
 * the registry (ops.c: opset range, input/output counts, attributes) and
 * its row's handler (in the family file op_*.c) builds the canonical graph
 * node. This file keeps parsing, tensors, graph inputs, node dispatch and
 * the opset check. Small int64 tensors known at import are tracked so a
 * computed Reshape still gets exact dims. docs/GRAPH.md, docs/IR.md ("Notes
 * by file"). */

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_int.h"
#include "ops.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "onnx.c reads raw_data as host order: a little-endian host is required"
#endif

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

const char *imp_type_name(int t) {
  static const char *const names[] = {"UNDEFINED", "FLOAT",     "UINT8",      "INT8",      "UINT16",
                                      "INT16",     "INT32",     "INT64",      "STRING",    "BOOL",
                                      "FLOAT16",   "DOUBLE",    "UINT32",     "UINT64",    "COMPLEX64",
                                      "COMPLEX128", "BFLOAT16", "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ",
                                      "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "UINT4", "INT4", "FLOAT4E2M1"};
  return t >= 0 && t < (int)(sizeof names / sizeof *names) ? names[t] : "unknown";
}


ts_status imp_nerr(imp *im, const nctx *nc, ts_status code, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return ts_diag_set(im->d, code, "%s: node %s (%s, opset %d): %s", im->label, nc->name, tg_op_name(nc->op),
                     im->opset, msg);
}

ts_status imp_oom(imp *im) { return ts_diag_set(im->d, TS_ENOMEM, "%s: out of memory importing", im->label); }

bool imp_kv_grow(imp *im) {
  int n = im->g->nvalues;
  if (n <= im->nkv) return true;
  known *p = ts_realloc(im->kv, (size_t)n * sizeof *p);
  if (!p) return false;
  for (int i = im->nkv; i < n; i++) p[i] = (known){-1, NULL};
  im->kv = p;
  im->nkv = n;
  return true;
}

/* A known tensor with no symbolic element: its values. */
bool imp_kv_ints(imp *im, int id, const int64_t **vals, int *n, int64_t *buf, int cap) {
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

void imp_dims_str(char *buf, size_t n, int nd, const tg_dim *dims) {
  size_t o = 0;
  o += (size_t)snprintf(buf + o, n - o, "[");
  for (int i = 0; i < nd && o < n; i++) {
    if (dims[i].sym) o += (size_t)snprintf(buf + o, n - o, "%s%s", i ? "," : "", dims[i].sym);
    else o += (size_t)snprintf(buf + o, n - o, "%s%" PRId64, i ? "," : "", dims[i].value);
  }
  if (o < n) snprintf(buf + o, n - o, "]");
}

/* Normalises axis a for rank r (valid range [-r, r-1], or [-r, r] when
 * inclusive); false when out of range. */
bool imp_norm_axis(int64_t *a, int r, bool inclusive) {
  int64_t hi = inclusive ? r : r - 1;
  if (*a < -(int64_t)r || *a > hi) return false;
  if (*a < 0) *a += r;
  return true;
}

/* Product of dims: a constant or a monomial of symbols (dim.c). */
bool imp_dims_product(imp *im, const tg_dim *d, int n, tg_dim *out) {
  return tg_dims_product(im->a, d, n, out) && (out->sym || out->value <= MAX_ELEMS);
}

/* Multidirectional (numpy) broadcasting of two shapes. */
ts_status imp_broadcast(imp *im, nctx *nc, const tg_value *a, const tg_value *b, int *nd, tg_dim *out) {
  int r = a->ndim > b->ndim ? a->ndim : b->ndim;
  if (r > MAX_RANK) return imp_nerr(im, nc, TS_EUNSUPPORTED, "rank %d is above %d", r, MAX_RANK);
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
      imp_dims_str(s1, sizeof s1, a->ndim, a->dims);
      imp_dims_str(s2, sizeof s2, b->ndim, b->dims);
      return imp_nerr(im, nc, TS_ESHAPE, "shapes %s (%s) and %s (%s) do not broadcast (dim %d)", s1, a->name, s2, b->name, i);
    }
  }
  *nd = r;
  return TS_OK;
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

ts_status imp_set_int(imp *im, nctx *nc, const char *name, int64_t v) {
  tg_attr *a = put_attr(im, nc, name, TG_A_INT);
  if (!a) return imp_nerr(im, nc, TS_EUNSUPPORTED, "too many attributes");
  a->i = v;
  return TS_OK;
}

ts_status imp_set_float(imp *im, nctx *nc, const char *name, double v) {
  tg_attr *a = put_attr(im, nc, name, TG_A_FLOAT);
  if (!a) return imp_nerr(im, nc, TS_EUNSUPPORTED, "too many attributes");
  a->f = v;
  return TS_OK;
}

ts_status imp_set_str(imp *im, nctx *nc, const char *name, const char *v) {
  tg_attr *a = put_attr(im, nc, name, TG_A_STRING);
  if (!a) return imp_nerr(im, nc, TS_EUNSUPPORTED, "too many attributes");
  a->s = v;
  return TS_OK;
}

ts_status imp_set_ints(imp *im, nctx *nc, const char *name, const int64_t *v, int n) {
  int64_t *cp = n ? ts_arena_memdup(im->a, v, (size_t)n * sizeof *v) : NULL;
  if (n && !cp) return imp_oom(im);
  tg_attr *a = put_attr(im, nc, name, TG_A_INTS);
  if (!a) return imp_nerr(im, nc, TS_EUNSUPPORTED, "too many attributes");
  a->n = n;
  a->ints = cp;
  return TS_OK;
}

ts_status imp_set_floats(imp *im, nctx *nc, const char *name, const double *v, int n) {
  double *cp = n ? ts_arena_memdup(im->a, v, (size_t)n * sizeof *v) : NULL;
  if (n && !cp) return imp_oom(im);
  tg_attr *a = put_attr(im, nc, name, TG_A_FLOATS);
  if (!a) return imp_nerr(im, nc, TS_EUNSUPPORTED, "too many attributes");
  a->n = n;
  a->floats = cp;
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
ts_status imp_import_tensor(imp *im, const Onnx__TensorProto *t, const char *name, const char *what, int *out_id) {
  ir_dtype dt;
  int dtype = t->has_data_type ? t->data_type : 0;
  if (!tg_onnx_dtype(dtype, &dt))
    return ts_diag_set(im->d, TS_EUNSUPPORTED, "%s: %s: element type %s (%d) is not supported", im->label, what,
                       imp_type_name(dtype), dtype);
  bool external = t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
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
  if (external) {
    ts_status est = imp_external_data(im, t, what, nbytes, &buf);
    if (est) return est;
  } else if (t->has_raw_data) {
    if (t->raw_data.len != nbytes)
      return ts_diag_set(im->d, TS_EPARSE, "%s: %s: raw_data holds %zu bytes, %" PRId64 " %s elements need %zu",
                         im->label, what, t->raw_data.len, numel, imp_type_name(dtype), nbytes);
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
                         have, imp_type_name(dtype), numel);
    buf = ts_malloc(nbytes);
    if (!buf) return imp_oom(im);
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
  else st = tg_value_set_data(im->g, id, t->has_raw_data && !external ? t->raw_data.data : buf, nbytes, im->d);
  ts_free(buf);
  if (st != TS_OK) return st;
  if (!imp_kv_grow(im)) return imp_oom(im);
  /* small integer constants are known contents */
  if ((dt.code == IR_I64 || dt.code == IR_I32) && numel <= MAX_KNOWN && t->n_dims <= 1) {
    tg_dim *kd = TS_ANEWN(im->a, tg_dim, numel ? numel : 1);
    if (!kd) return imp_oom(im);
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
bool imp_const_scalar(imp *im, int vid, double *out) {
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
ts_status imp_param_ints(imp *im, nctx *nc, int i, const char *what, bool *present, int64_t *buf, int cap,
                            const int64_t **vals, int *n) {
  *present = false;
  *n = 0;
  if (i >= nc->nin || nc->in[i] < 0) return TS_OK;
  const tg_value *v = im->g->values[nc->in[i]];
  if (v->dtype.code != IR_I64 && v->dtype.code != IR_I32)
    return imp_nerr(im, nc, TS_ETYPE, "input %d (%s, the %s) must be int64", i, v->name, what);
  if (!imp_kv_ints(im, nc->in[i], vals, n, buf, cap))
    return imp_nerr(im, nc, TS_EUNSUPPORTED, "input %d (%s, the %s) must be a constant (or computable at import)", i,
                    v->name, what);
  *present = true;
  return TS_OK;
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

static ts_status read_attrs(imp *im, nctx *nc, const tg_op_def *sp) {
  const Onnx__NodeProto *np = nc->np;
  if (np->n_attribute > MAX_ATTRS) return imp_nerr(im, nc, TS_EUNSUPPORTED, "%zu attributes", np->n_attribute);
  for (size_t i = 0; i < np->n_attribute; i++) {
    const Onnx__AttributeProto *ap = np->attribute[i];
    const char *an = ap->name ? ap->name : "";
    if (ap->ref_attr_name && ap->ref_attr_name[0])
      return imp_nerr(im, nc, TS_EUNSUPPORTED, "attribute %s refers to a function attribute", an);
    /* before opset 6 (5 for Reshape) many ops carried consumed_inputs, a
     * hint for in-place buffers that means nothing to the result */
    if (im->opset < 7 && !strcmp(an, "consumed_inputs")) continue;
    bool wrong;
    char kind = spec_attr(sp->attrs, an, im->opset, &wrong);
    if (!kind)
      return imp_nerr(im, nc, TS_EUNSUPPORTED, "attribute '%s' is not supported%s", an,
                      wrong ? " at this opset" : " (not an attribute of this op)");
    int want = kind == 'i' ? 2 : kind == 'f' ? 1 : kind == 's' ? 3 : kind == 'I' ? 7 : kind == 'F' ? 6 : 4;
    int type = ap->has_type ? (int)ap->type : 0;
    if (type != want)
      return imp_nerr(im, nc, TS_EUNSUPPORTED, "attribute '%s' has type %s, expected %s", an, attr_type_name(type),
                      attr_type_name(want));
    char *nm = ts_arena_strdup(im->a, an);
    if (!nm) return imp_oom(im);
    if (A(nc, nm)) return imp_nerr(im, nc, TS_EPARSE, "attribute '%s' given twice", an);
    tg_attr *a = put_attr(im, nc, nm, TG_A_INT);
    switch (kind) {
    case 'i': a->kind = TG_A_INT; a->i = ap->i; break;
    case 'f': a->kind = TG_A_FLOAT; a->f = ap->f; break;
    case 's': {
      a->kind = TG_A_STRING;
      char *s = ts_arena_strndup(im->a, ap->s.len ? (const char *)ap->s.data : "", ap->s.len);
      if (!s) return imp_oom(im);
      if (strlen(s) != ap->s.len) return imp_nerr(im, nc, TS_EPARSE, "attribute '%s' holds a NUL byte", an);
      a->s = s;
      break;
    }
    case 'I':
      a->kind = TG_A_INTS;
      if (ap->n_ints > 1024) return imp_nerr(im, nc, TS_EUNSUPPORTED, "attribute '%s' has %zu elements", an, ap->n_ints);
      a->n = (int)ap->n_ints;
      a->ints = a->n ? ts_arena_memdup(im->a, ap->ints, ap->n_ints * sizeof(int64_t)) : NULL;
      if (a->n && !a->ints) return imp_oom(im);
      break;
    case 'F':
      a->kind = TG_A_FLOATS;
      if (ap->n_floats > (1u << 24)) return imp_nerr(im, nc, TS_EUNSUPPORTED, "attribute '%s' is too long", an);
      a->n = (int)ap->n_floats;
      if (a->n) {
        a->floats = TS_ANEWN(im->a, double, a->n);
        if (!a->floats) return imp_oom(im);
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

ts_status imp_need_float(imp *im, nctx *nc, int i) {
  const tg_value *v = IN(im, nc, i);
  char b[16];
  if (v && !is_float(v->dtype))
    return imp_nerr(im, nc, TS_ETYPE, "input %d (%s) is %s; the op takes floating-point tensors", i, v->name,
                    ir_dtype_str(v->dtype, b, sizeof b));
  return TS_OK;
}

ts_status imp_need_input(imp *im, nctx *nc, int i, const char *what) {
  if (!IN(im, nc, i)) return imp_nerr(im, nc, TS_EINVAL, "input %d (%s) is required", i, what);
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
                       name, imp_type_name(et), et);
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
      if (!s) return imp_oom(im);
      dims[i] = (tg_dim){-1, s};
    } else {
      const char *s = ts_arena_printf(im->a, "unk_%d", im->nunk++);
      if (!s) return imp_oom(im);
      dims[i] = (tg_dim){-1, s};
    }
  }
  ts_diag tmp;
  ts_diag_clear(&tmp);
  int id = tg_value_add(im->g, name, TG_V_INPUT, dt, (int)tt->shape->n_dim, dims, &tmp);
  if (id < 0) return ts_diag_set(im->d, tmp.code, "%s: graph input %s: %s", im->label, name, tmp.msg);
  if (!imp_kv_grow(im)) return imp_oom(im);
  return tg_graph_add_input(im->g, id) == TS_OK ? TS_OK : imp_oom(im);
}

/* Operators whose output shape depends on tensor data: tessel plans every
 * shape and buffer at build time (symbolic dims only from the inputs), so
 * these are refused with the reason, not merely as unknown. */
static const char *data_dependent_shape(const char *op) {
  static const char *const ops[] = {"NonZero", "Unique", "Compress", "NonMaxSuppression", "StringSplit",
                                    "Loop", "If", "Scan", "SequenceConstruct", "SplitToSequence"};
  for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
    if (!strcmp(op, ops[i]))
      return i < 5 ? ": its output shape depends on tensor data, and tessel plans every shape at build time "
                     "(from the inputs' dims)"
                   : ": control flow and sequences have shapes only known at run time; tessel plans every shape at "
                     "build time";
  return NULL;
}

ts_status imp_import_node(imp *im, const Onnx__NodeProto *np, size_t index) {
  nctx *nc = ts_calloc(1, sizeof *nc);
  if (!nc) return imp_oom(im);
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
  bool ms = !strcmp(dom, "com.microsoft");
  if (ms && !(tg_op_def_of(nc->op) && (tg_op_def_of(nc->op)->flags & TG_OPF_MS_DOMAIN))) {
    /* com.microsoft's ops named as default-domain ones are registered as "<name>.ms" */
    char msname[128];
    snprintf(msname, sizeof msname, "%s.ms", opt);
    nc->op = tg_op_from_name(msname);
  }
  const tg_op_def *msd = tg_op_def_of(nc->op);
  bool ms_op = msd && (msd->flags & TG_OPF_MS_DOMAIN);
  if (ms != ms_op) nc->op = TG_OP_COUNT; /* an op of the other domain of that name */
  if (ms && !ms_op) {
    st = ts_diag_set(im->d, TS_EUNSUPPORTED, "%s: node %s: operator %s of domain 'com.microsoft' is not supported "
                     "(docs/GRAPH.md lists the com.microsoft ops tessel reads)", im->label, nc->name, opt);
    goto done;
  }
  if (dom[0] && strcmp(dom, "ai.onnx") && !ms) {
    st = ts_diag_set(im->d, TS_EUNSUPPORTED, "%s: node %s: operator %s of domain '%s' is not supported (only the default domain)",
                     im->label, nc->name, opt, dom);
    goto done;
  }
  const tg_op_def *sp = tg_op_def_of(nc->op);
  if (!sp || !sp->import) {
    const char *why = data_dependent_shape(opt);
    st = ts_diag_set(im->d, TS_EUNSUPPORTED, "%s: node %s: operator %s (opset %d) is not supported%s", im->label, nc->name,
                     opt[0] ? opt : "(empty op_type)", im->opset, why ? why : "");
    goto done;
  }
  if (im->opset < sp->since) {
    st = imp_nerr(im, nc, TS_EUNSUPPORTED, "%s exists from opset %d", opt, sp->since);
    goto done;
  }
  if (sp->until && im->opset >= sp->until) {
    st = imp_nerr(im, nc, TS_EUNSUPPORTED, "%s was removed at opset %d", opt, sp->until);
    goto done;
  }
  if (np->n_input > MAX_IO || np->n_output > MAX_IO) {
    st = imp_nerr(im, nc, TS_EUNSUPPORTED, "%zu inputs / %zu outputs", np->n_input, np->n_output);
    goto done;
  }
  /* trailing empty names are omitted optional inputs/outputs */
  int nin = (int)np->n_input, nout = (int)np->n_output;
  while (nin > 0 && (!np->input[nin - 1] || !np->input[nin - 1][0])) nin--;
  if (nin < sp->min_in || (sp->max_in >= 0 && nin > sp->max_in) || nout < sp->min_out ||
      (sp->max_out >= 0 && nout > sp->max_out)) {
    st = imp_nerr(im, nc, TS_EINVAL, "%d inputs and %d outputs; the op takes %d..%d and %d..%d", nin, nout, sp->min_in,
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
      st = imp_nerr(im, nc, TS_EINVAL, "input %d (%s) is not defined before the node (the graph must be topologically sorted)", i, in);
      goto done;
    }
  }
  nc->nout = nout;
  for (int i = 0; i < nout; i++) {
    nc->outname[i] = np->output[i] && np->output[i][0] ? np->output[i] : NULL;
    if (nc->outname[i] && tg_value_find(im->g, nc->outname[i]) >= 0) {
      st = imp_nerr(im, nc, TS_EINVAL, "output %s is already defined (SSA: one producer per value)", nc->outname[i]);
      goto done;
    }
  }
  if (!nc->outname[0]) {
    st = imp_nerr(im, nc, TS_EINVAL, "output 0 has no name");
    goto done;
  }
  if ((st = read_attrs(im, nc, sp))) goto done;
  if ((st = sp->import(im, nc))) goto done;
  if (nc->to_const || nc->expanded) goto done;
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
      st = imp_nerr(im, nc, tmp.code, "%s", tmp.msg);
      goto done;
    }
  }
  if (!imp_kv_grow(im)) {
    st = imp_oom(im);
    goto done;
  }
  if (nc->okv.n >= 0) im->kv[outs[0]] = nc->okv;
  ts_diag tmp;
  ts_diag_clear(&tmp);
  int nid = tg_node_add(im->g, nc->op, np->name && np->name[0] ? np->name : NULL, nc->nin, nc->in, nc->nout, outs, &tmp);
  if (nid < 0) {
    st = imp_nerr(im, nc, tmp.code, "%s", tmp.msg);
    goto done;
  }
  for (int i = 0; i < nc->nattr; i++)
    if (tg_node_set_attr(im->g, im->g->nodes[nid], &nc->attr[i]) != TS_OK) {
      st = imp_oom(im);
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

/* Imports a serialised model; dir: the model file's directory, for
 * external data (NULL: none). */
static ts_status import_model(const void *buf, size_t len, const char *label, const char *dir, ir_module *m,
                              tg_graph **out, ts_diag *d) {
  if (out) *out = NULL;
  if (!label) label = "<memory>";
  if (!buf && len) return ts_diag_set(d, TS_EINVAL, "%s: no data", label);
  Onnx__ModelProto *mp = onnx__model_proto__unpack(&pb_allocator, len, buf);
  if (!mp)
    return ts_diag_set(d, TS_EPARSE, "%s: not a valid ONNX model (protobuf ModelProto did not parse: truncated or corrupt, %zu bytes)",
                       label, len);
  imp im = {.d = d, .label = label, .dir = dir, .a = m->arena};
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
      st = imp_import_tensor(&im, t, nm, what, &id);
    }
  }
  for (size_t i = 0; i < gp->n_input && !st; i++) st = import_input(&im, gp->input[i]);
  for (size_t i = 0; i < gp->n_node && !st; i++) st = imp_import_node(&im, gp->node[i], i);
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

ts_status tg_onnx_import_mem(const void *buf, size_t len, const char *label, ir_module *m, tg_graph **out, ts_diag *d) {
  return import_model(buf, len, label, NULL, m, out, d);
}

ts_status tg_onnx_import(const char *path, ir_module *m, tg_graph **out, ts_diag *d) {
  if (out) *out = NULL;
  char *buf = NULL;
  size_t len = 0;
  ts_status st = ts_read_file_as(path, TS_FILE_ONNX, &buf, &len, d);
  if (st) return st;
  /* the directory external data is read from: path up to its last '/' */
  const char *slash = strrchr(path, '/');
  size_t dl = slash ? (size_t)(slash - path) : 1;
  char *dir = ts_malloc(dl + 2);
  if (!dir) {
    ts_free(buf);
    return ts_diag_set(d, TS_ENOMEM, "%s: out of memory", path);
  }
  if (slash) memcpy(dir, path, dl);
  else dir[0] = '.';
  if (slash && dl == 0) dir[dl++] = '/';
  dir[dl] = '\0';
  st = import_model(buf, len, path, dir, m, out, d);
  ts_free(dir);
  ts_free(buf);
  return st;
}

