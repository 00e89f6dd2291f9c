/* passes_int.h — internals shared by the graph passes (passes.c, legalize.c,
 * fuse.c, tasks.c): the op patterns fusion reads, and the kernel builder
 * that writes compute-DSL text for one op or a fused group of ops and parses
 * it into a PrimFunc. Not installed; nothing outside ir/graph includes it. */
#ifndef TESSEL_IR_GRAPH_PASSES_INT_H
#define TESSEL_IR_GRAPH_PASSES_INT_H

#include "passes.h"

/* TVM's OpPatternKind, in order: a group's pattern is its highest member's. */
typedef enum {
  TG_PAT_ELEMWISE,   /* same shape in and out, one to one */
  TG_PAT_BROADCAST,  /* elementwise with numpy broadcasting */
  TG_PAT_INJECTIVE,  /* each output element a function of one input element (reshape, transpose, ...) */
  TG_PAT_REDUCE,     /* commutative reduction (reduce, softmax, layernorm, pools): an anchor */
  TG_PAT_OUT_EWISE,  /* conv / matmul / gemm: an anchor whose output takes an elementwise epilogue */
  TG_PAT_OPAQUE,     /* never fused */
} tg_pattern;

/* The ONNX op a node stands for: its op, or for a call made by legalize its
 * "tessel.op" attribute (TG_OP_CALL for a fused call or a foreign one). */
tg_op lg_node_op(const tg_node *n);
tg_pattern lg_pattern(const tg_graph *g, const tg_node *n);
/* Short lower-case op name for function names: "conv2d", "matmul", "add". */
const char *lg_short_name(tg_op op);
/* The same for a node: "conv2d_winograd" for a conv in the Winograd form. */
const char *lg_node_short_name(const tg_node *n);

/* Writes compute-DSL text for kernels; symbols of the graph get DSL names
 * "symN" and are renamed back to the graph's names after parsing. */
#define LG_MAX_SYMS 32
typedef struct lg_kernel {
  const tg_graph *g;
  ts_strbuf lets, body;
  const char *syms[LG_MAX_SYMS]; /* base symbols, in DSL order (sym0, sym1...); owned copies */
  int nsyms;
  char dimtxt[8][192]; /* a ring for lg_dim_s's text of a product of symbols */
  int ndimtxt;
  ts_status st; /* first error (sticky) */
  ts_diag *d;
} lg_kernel;

void lg_init(lg_kernel *k, const tg_graph *g, ts_diag *d);
void lg_fini(lg_kernel *k);
/* Declares an intermediate tensor `name` with value vid's dtype and dims. */
void lg_let(lg_kernel *k, const char *name, int vid);
/* Moves inputs that are compile-time parameters (Reshape's shape, Slice's
 * starts/ends/axes/steps, Pad's pads/value, Clip's min/max, Reduce*'s and
 * (Un)Squeeze's axes, Split's split) into attributes and drops them from the
 * node's inputs; they must be constants (else TS_EUNSUPPORTED naming the
 * node). Idempotent. */
ts_status lg_normalize(tg_graph *g, tg_node *n, ts_diag *d);
/* Appends the statements computing node n: in[i] names n->inputs[i] (NULL
 * for an omitted input), out[i] n->outputs[i] (NULL: not needed). Temporary
 * tensors are named after out[0]. */
ts_status lg_emit(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out);
/* Parses the kernel: params in_vids (named in_names) then out_vids, adds the
 * function named fname to m (fname must be free), renames size vars to the
 * graph's symbols. */
ts_status lg_build(lg_kernel *k, ir_module *m, const char *fname, int nin, const int *in_vids,
                   const char *const *in_names, int nout, const int *out_vids,
                   const char *const *out_names, ir_func **out);
/* A function name free in m: "<base>_<n>" with the smallest n >= 0 (arena string). */
const char *lg_fresh_name(ir_module *m, const char *base);
/* Legalises one node into its own PrimFunc in m (the node is not changed). */
ts_status lg_node_func(const tg_graph *g, const tg_node *n, ir_module *m, ir_func **out, ts_diag *d);
/* Removes the PrimFuncs of m that no live call of g uses (a model's module
 * holds only what the passes made). */
void lg_module_drop_unused(tg_graph *g);

/* ---- shared by the passes (passes.c) ---- */
bool tg_is_graph_output(const tg_graph *g, int vid);
/* A value name not yet in g: base, base_1, base_2 ... (written to buf). */
const char *tg_fresh_value_name(const tg_graph *g, const char *base, char *buf, size_t n);
/* Adds a constant value (a fresh name from base) with the given dims and
 * data. Returns its id, or -1 with d set. */
int tg_add_const(tg_graph *g, const char *base, ir_dtype dt, int nd, const tg_dim *dims, const void *data,
                 size_t nbytes, ts_diag *d);

#endif
