/* expand.c — the builder of expanded operators (expand_int.h): an ONNX
 * operator served by ordinary ops is imported as a subgraph whose nodes are
 * built here as NodeProtos and imported one by one through the normal path,
 * so each gets its handler's checks, shapes and known values. */
#include <stdio.h>

#include "expand_int.h"

/* The subgraph being built: names derive from the Attention node's name. */
static Onnx__AttributeProto *xa(xb *b, const char *name, Onnx__AttributeProto__AttributeType type) {
  Onnx__AttributeProto *a = TS_ANEW(b->im->a, Onnx__AttributeProto);
  if (!a) return NULL;
  *a = (Onnx__AttributeProto)ONNX__ATTRIBUTE_PROTO__INIT;
  a->name = (char *)name;
  a->has_type = 1;
  a->type = type;
  return a;
}

Onnx__AttributeProto *xa_int(xb *b, const char *name, int64_t v) {
  Onnx__AttributeProto *a = xa(b, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
  if (a) a->has_i = 1, a->i = v;
  return a;
}

Onnx__AttributeProto *xa_float(xb *b, const char *name, float v) {
  Onnx__AttributeProto *a = xa(b, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
  if (a) a->has_f = 1, a->f = v;
  return a;
}

Onnx__AttributeProto *xa_str(xb *b, const char *name, const char *v) {
  Onnx__AttributeProto *a = xa(b, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
  if (a) a->s.data = (uint8_t *)v, a->s.len = strlen(v);
  return a;
}

Onnx__AttributeProto *xa_ints(xb *b, const char *name, const int64_t *v, int n) {
  Onnx__AttributeProto *a = xa(b, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
  int64_t *c = a ? TS_ANEWN(b->im->a, int64_t, n ? n : 1) : NULL;
  if (!c) return NULL;
  memcpy(c, v, (size_t)n * sizeof *c);
  a->n_ints = (size_t)n;
  a->ints = c;
  return a;
}

/* Imports op(ins) with the given attributes and nout outputs named
 * outs[k] (NULL: "<node>/<op>_<k>:<j>", or "<node>/<op>_<k>" for a single
 * output), written back into outs. Returns outs[0] (NULL after the first
 * failure, which b->st keeps). */
const char *xn_outs(xb *b, const char *op, int nout, const char **outs, int nin, const char *const *ins, int nattr,
                    Onnx__AttributeProto *const *attrs) {
  if (b->st) return NULL;
  for (int i = 0; i < nin; i++)
    if (!ins[i]) return NULL; /* an earlier step failed */
  for (int i = 0; i < nattr; i++)
    if (!attrs[i]) return (b->st = imp_oom(b->im)), NULL;
  char nm[400], on[420];
  snprintf(nm, sizeof nm, "%s/%s_%d", b->nc->name, op, b->k++);
  char *name = ts_arena_strdup(b->im->a, nm);
  char **in = TS_ANEWN(b->im->a, char *, nin ? nin : 1);
  Onnx__AttributeProto **at = TS_ANEWN(b->im->a, Onnx__AttributeProto *, nattr ? nattr : 1);
  Onnx__NodeProto *np = TS_ANEW(b->im->a, Onnx__NodeProto);
  char **o = TS_ANEWN(b->im->a, char *, nout);
  if (!name || !in || !at || !np || !o) return (b->st = imp_oom(b->im)), NULL;
  for (int j = 0; j < nout; j++) {
    if (nout > 1) snprintf(on, sizeof on, "%s:%d", nm, j);
    if (!(o[j] = ts_arena_strdup(b->im->a, outs[j] ? outs[j] : nout > 1 ? on : nm))) return (b->st = imp_oom(b->im)), NULL;
    outs[j] = o[j];
  }
  for (int i = 0; i < nin; i++) in[i] = (char *)ins[i];
  for (int i = 0; i < nattr; i++) at[i] = attrs[i];
  *np = (Onnx__NodeProto)ONNX__NODE_PROTO__INIT;
  np->name = name;
  np->op_type = (char *)op;
  np->n_input = (size_t)nin;
  np->input = in;
  np->n_output = (size_t)nout;
  np->output = o;
  np->n_attribute = (size_t)nattr;
  np->attribute = at;
  /* an op newer than the model (LayerNormalization in an opset-14 model's
   * SkipLayerNormalization) is imported at the opset it needs */
  int opset = b->im->opset;
  if (b->min_opset > opset) b->im->opset = b->min_opset;
  b->st = imp_import_node(b->im, np, 0);
  b->im->opset = opset;
  return b->st ? NULL : outs[0];
}

const char *xn(xb *b, const char *op, const char *out, int nin, const char *const *ins, int nattr,
               Onnx__AttributeProto *const *attrs) {
  const char *outs[1] = {out};
  return xn_outs(b, op, 1, outs, nin, ins, nattr, attrs);
}

const tg_value *xv(xb *b, const char *name) {
  int id = name ? tg_value_find(b->im->g, name) : -1;
  return id >= 0 ? b->im->g->values[id] : NULL;
}

/* A scalar of Q's element type. */
const char *c_float(xb *b, double v) {
  Onnx__AttributeProto *a[] = {xa_float(b, "value_float", (float)v)};
  const char *c = xn(b, "Constant", NULL, 0, NULL, 1, a);
  if (b->elem == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT) return c;
  Onnx__AttributeProto *t[] = {xa_int(b, "to", b->elem)};
  return XA(b, "Cast", NULL, t, c);
}

const char *c_int(xb *b, int64_t v) {
  Onnx__AttributeProto *a[] = {xa_int(b, "value_int", v)};
  return xn(b, "Constant", NULL, 0, NULL, 1, a);
}

const char *c_ints(xb *b, const int64_t *v, int n) {
  Onnx__AttributeProto *a[] = {xa_ints(b, "value_ints", v, n)};
  return xn(b, "Constant", NULL, 0, NULL, 1, a);
}

const char *transpose(xb *b, const char *x, const int64_t *perm, int r, const char *out) {
  Onnx__AttributeProto *a[] = {xa_ints(b, "perm", perm, r)};
  return XA(b, "Transpose", out, a, x);
}


int xonnx_type(const tg_value *v) {
  for (int i = 1; i < 64; i++) {
    ir_dtype t;
    if (tg_onnx_dtype(i, &t) && ir_dtype_eq(t, v->dtype)) return i;
  }
  return 0;
}

const char *xin(const nctx *nc, int i) { return i < nc->nin && nc->in[i] >= 0 ? nc->np->input[i] : ""; }

const char *xout(const nctx *nc, int k) { return k < nc->nout ? nc->outname[k] : NULL; }
