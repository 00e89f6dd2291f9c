/* expand_int.h — building an imported node's replacement subgraph: an
 * operator defined by an ONNX function body (Attention) or by quantize /
 * compute / requantize (com.microsoft's QLinear* ops) is imported as
 * ordinary nodes. Each node is a NodeProto built in the importer's arena
 * and imported through imp_import_node, named "<node>/<Op>_<k>" so that a
 * refusal names the node it came from; the last may take the node's own
 * output name. Every builder returns the output's name, or NULL once a step
 * failed (b->st keeps the first error), so steps chain without checks.
 * expand.c; docs/GRAPH.md ("Expanded operators"). */
#ifndef TESSEL_IR_GRAPH_EXPAND_INT_H
#define TESSEL_IR_GRAPH_EXPAND_INT_H

#include "onnx_int.h"
#include "ops.h"

typedef struct xb {
  imp *im;
  nctx *nc;    /* the node being expanded (names, messages) */
  int k;       /* nodes built so far */
  int elem;    /* ONNX element type of c_float's constants */
  int min_opset; /* the next nodes are imported at this opset at least (0: the model's) */
  ts_status st;
} xb;

Onnx__AttributeProto *xa_int(xb *b, const char *name, int64_t v);
Onnx__AttributeProto *xa_float(xb *b, const char *name, float v);
Onnx__AttributeProto *xa_ints(xb *b, const char *name, const int64_t *v, int n);
Onnx__AttributeProto *xa_str(xb *b, const char *name, const char *v);
/* op(ins) with attributes; output `out`, or a fresh name when NULL. */
const char *xn(xb *b, const char *op, const char *out, int nin, const char *const *ins, int nattr,
               Onnx__AttributeProto *const *attrs);
/* The same with nout outputs (Split): outs[j] or fresh names, written back. */
const char *xn_outs(xb *b, const char *op, int nout, const char **outs, int nin, const char *const *ins, int nattr,
                    Onnx__AttributeProto *const *attrs);
/* The value of an imported name (NULL if none). */
const tg_value *xv(xb *b, const char *name);
/* Scalar constants: of type b->elem; int64; an int64 vector. */
const char *c_float(xb *b, double v);
const char *c_int(xb *b, int64_t v);
const char *c_ints(xb *b, const int64_t *v, int n);
const char *transpose(xb *b, const char *x, const int64_t *perm, int r, const char *out);
/* The ONNX element type of v (TensorProto.DataType; 0 if none). */
int xonnx_type(const tg_value *v);
/* Input i's ONNX name, "" when omitted; output k's, NULL when unused. */
const char *xin(const nctx *nc, int i);
const char *xout(const nctx *nc, int k);

/* XN(b, "Op", out, in0, in1, ...), XA(b, "Op", out, attrs[], in0, ...) */
#define XN(b, op, out, ...) xn(b, op, out, (int)(sizeof((const char *[]){__VA_ARGS__}) / sizeof(const char *)), \
                               (const char *[]){__VA_ARGS__}, 0, NULL)
#define XA(b, op, out, attrs, ...) xn(b, op, out, (int)(sizeof((const char *[]){__VA_ARGS__}) / sizeof(const char *)), \
                                      (const char *[]){__VA_ARGS__}, (int)(sizeof(attrs) / sizeof(attrs[0])), attrs)

#endif
