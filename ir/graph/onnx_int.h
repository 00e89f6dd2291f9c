/* onnx_int.h — the ONNX importer's internals, shared by onnx.c (parsing,
 * tensors, graph inputs, node dispatch, the opset check) and the operator
 * family files op_*.c that hold each operator's import handler: the
 * importer's state (imp), the node being imported (nctx), the small
 * accessors of inputs and attributes, and the helpers the handlers call.
 * Not installed; nothing outside ir/graph includes it. docs/GRAPH.md. */
#ifndef TESSEL_IR_GRAPH_ONNX_INT_H
#define TESSEL_IR_GRAPH_ONNX_INT_H

#include <inttypes.h>
#include <stdbool.h>
#include <string.h>

#include "onnx.h"
#include "onnx.pb-c.h"

#define MAX_RANK 16
#define MAX_IO 64
#define MAX_ATTRS 24
#define MAX_KNOWN 4096              /* elements tracked for a known int tensor */
#define MAX_ELEMS ((int64_t)1 << 40) /* no tensor is larger */
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
  const char *dir; /* the model file's directory (external data); NULL: imported from memory */
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
  bool expanded;     /* the handler imported the node's function body instead (op_attention.c) */
  int const_value;   /* its value id */
  known okv;         /* known contents of output 0 (n = -1 if none) */
} nctx;

static inline const known *kv_get(imp *im, int id) { return id >= 0 && id < im->nkv && im->kv[id].n >= 0 ? &im->kv[id] : NULL; }

/* ---- dims --------------------------------------------------------------- */
static inline tg_dim DC(int64_t v) { return (tg_dim){v, NULL}; }

static inline const tg_value *IN(imp *im, const nctx *nc, int i) {
  return i < nc->nin && nc->in[i] >= 0 ? im->g->values[nc->in[i]] : NULL;
}

static inline void set_out(nctx *nc, int k, ir_dtype dt, int nd, const tg_dim *dims) {
  nc->odt[k] = dt;
  nc->ondim[k] = nd;
  for (int i = 0; i < nd; i++) nc->odims[k][i] = dims[i];
}

static inline void same_as_input(imp *im, nctx *nc, int k, int i) {
  const tg_value *v = IN(im, nc, i);
  set_out(nc, k, v->dtype, v->ndim, v->dims);
}

/* ---- attributes --------------------------------------------------------- */
static inline tg_attr *A(nctx *nc, const char *name) {
  for (int i = 0; i < nc->nattr; i++)
    if (!strcmp(nc->attr[i].name, name)) return &nc->attr[i];
  return NULL;
}

static inline int64_t aint(nctx *nc, const char *name, int64_t def) {
  tg_attr *a = A(nc, name);
  return a ? a->i : def;
}

static inline double afloat(nctx *nc, const char *name, double def) {
  tg_attr *a = A(nc, name);
  return a ? a->f : def;
}

static inline const char *astr(nctx *nc, const char *name, const char *def) {
  tg_attr *a = A(nc, name);
  return a ? a->s : def;
}

static inline const int64_t *aints(nctx *nc, const char *name, int *n) {
  tg_attr *a = A(nc, name);
  *n = a ? a->n : 0;
  return a ? a->ints : NULL;
}

/* Drops attribute name from the node, if it has it. */
static inline void drop_attr(nctx *nc, const char *name) {
  tg_attr *a = A(nc, name);
  if (a) *a = nc->attr[--nc->nattr];
}

/* Drops inputs from index `from` on (their contents became attributes). */
static inline void drop_inputs(nctx *nc, int from) {
  if (nc->nin > from) nc->nin = from;
}

static inline bool is_float(ir_dtype t) { return ir_dtype_is_float(t); }

/* ---- shared by onnx.c and the family files (op_*.c) ----------------------- */
/* Sets the diagnostic "label: node N (Op, opset K): msg" and returns code. */
ts_status imp_nerr(imp *im, const nctx *nc, ts_status code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
ts_status imp_oom(imp *im);
const char *imp_type_name(int t);
bool imp_kv_grow(imp *im);
/* A known tensor with no symbolic element: its values (at most cap, in buf). */
bool imp_kv_ints(imp *im, int id, const int64_t **vals, int *n, int64_t *buf, int cap);
void imp_dims_str(char *buf, size_t n, int nd, const tg_dim *dims);
/* Normalises axis a for rank r (valid range [-r, r-1], or [-r, r] when
 * inclusive); false when out of range. */
bool imp_norm_axis(int64_t *a, int r, bool inclusive);
/* Product of dims: a constant or a monomial of symbols (graph.h, dim.c);
 * false on overflow or too many factors. */
bool imp_dims_product(imp *im, const tg_dim *d, int n, tg_dim *out);
/* Multidirectional (numpy) broadcasting of two shapes. */
ts_status imp_broadcast(imp *im, nctx *nc, const tg_value *a, const tg_value *b, int *nd, tg_dim *out);
/* Canonical attributes the handlers write (replacing any the node had). */
ts_status imp_set_int(imp *im, nctx *nc, const char *name, int64_t v);
ts_status imp_set_float(imp *im, nctx *nc, const char *name, double v);
ts_status imp_set_str(imp *im, nctx *nc, const char *name, const char *v);
ts_status imp_set_ints(imp *im, nctx *nc, const char *name, const int64_t *v, int n);
ts_status imp_set_floats(imp *im, nctx *nc, const char *name, const double *v, int n);
/* Converts a TensorProto into a new constant value named `name`; `what`
 * names it in messages. */
ts_status imp_import_tensor(imp *im, const Onnx__TensorProto *t, const char *name, const char *what, int *out_id);
/* The nbytes of tensor t stored as external data (onnx_extern.c), read
 * into a new ts_malloc buffer *out. */
ts_status imp_external_data(imp *im, const Onnx__TensorProto *t, const char *what, size_t nbytes, void **out);
/* A scalar (or one-element) constant input as a double. */
bool imp_const_scalar(imp *im, int vid, double *out);
/* Parameter input i as ints known at import (omitted: *present = false). */
ts_status imp_param_ints(imp *im, nctx *nc, int i, const char *what, bool *present, int64_t *buf, int cap,
                         const int64_t **vals, int *n);
/* TS_ETYPE naming input i unless it is floating-point. */
ts_status imp_need_float(imp *im, nctx *nc, int i);
/* TS_EINVAL naming input i (`what`) when it is omitted. */
ts_status imp_need_input(imp *im, nctx *nc, int i, const char *what);
/* Imports one node (a synthesised one too: op_attention.c builds its
 * function body's nodes and imports each); index names it in messages when
 * it has no name. */
ts_status imp_import_node(imp *im, const Onnx__NodeProto *np, size_t index);
/* TS_ETYPE naming input i (`what`) unless it is int32 or int64 (op_data.c). */
ts_status imp_need_index(imp *im, nctx *nc, int i, const char *what);

#endif
