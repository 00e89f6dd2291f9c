/* ops.h — the operator registry: one row per graph operator (ops.c) saying
 * everything the importer and the passes need to know about it, so that
 * adding an operator is one row plus its handler and emitter in a family
 * file (op_elemwise.c, op_nn.c, op_tensor.c, op_reduce.c). The op enum
 * stays the X-macro TG_OP_LIST of graph.h; every enum value has a row (a
 * test checks it). Internal to ir/graph. docs/GRAPH.md ("Adding an
 * operator"). */
#ifndef TESSEL_IR_GRAPH_OPS_H
#define TESSEL_IR_GRAPH_OPS_H

#include "passes_int.h"

typedef struct imp imp;   /* the importer's state (onnx_int.h) */
typedef struct nctx nctx; /* one node being imported (onnx_int.h) */

/* Flags the passes read. */
enum {
  /* a no-op when its output has its input's dtype and dims (simplify drops it) */
  TG_OPF_NOOP_SAME_SHAPE = 1u << 0,
  /* inputs from 1 on are compile-time parameters lg_normalize turns into attributes */
  TG_OPF_PARAM_INPUTS = 1u << 1,
  /* any output may be unneeded (the emitter is handed NULL names), even output 0 */
  TG_OPF_ANY_OUTPUT = 1u << 2,
  /* a generator: the canonical node has no inputs (its shape is in its
   * output's dims, its parameters in attributes: Range, ConstantOfShape) */
  TG_OPF_NO_INPUTS = 1u << 3,
  /* transcendental (exp, tanh, erf...): many times an FMA's cost, so fusion
   * never makes it the prologue of a matmul or conv, which would recompute
   * it for every tile of outputs that reads the element (TVM's FuseOps fuses
   * elementwise ops after such anchors, not before) */
  TG_OPF_COSTLY = 1u << 4,
  /* imported as a subgraph of ordinary ops (expand_int.h): never a node */
  TG_OPF_EXPANDED = 1u << 5,
  /* of onnxruntime's com.microsoft domain (and only there) */
  TG_OPF_MS_DOMAIN = 1u << 6,
};

/* Import: checks the node (inputs, attributes) and sets its output dtypes
 * and dims and its canonical attributes; returns a diagnostic naming the
 * node on bad input. */
typedef ts_status (*tg_import_fn)(imp *im, nctx *nc);
/* Legalisation: appends the statements computing node n to k; in[i] names
 * n->inputs[i] (NULL for an omitted input), out[i] n->outputs[i] (NULL: not
 * needed). Errors go to k (lg_fail). */
typedef void (*tg_emit_fn)(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out);
/* Fusion pattern that depends on the node (Add broadcasting or not). */
typedef tg_pattern (*tg_pattern_fn)(const tg_graph *g, const tg_node *n);

/* The qdq pass's rewrite around a node of this op (qdq.c): sets *changed
 * when it rewrote something. */
typedef ts_status (*tg_qdq_fn)(tg_graph *g, tg_node *n, bool *changed, ts_diag *d);

typedef struct tg_op_def {
  tg_op op;
  const char *onnx;    /* ONNX op_type (= tg_op_name(op)) */
  const char *kernel;  /* short kernel name for PrimFuncs: "conv2d", "add" */
  int since, until;    /* default-domain opsets [since, until); until 0: open */
  int min_in, max_in;  /* ONNX arity; max -1: unbounded */
  int min_out, max_out;
  /* attributes: space-separated "K:name[@since][<until]", K one of i f s I
   * F T (int, float, string, ints, floats, tensor); @N: from opset N; <N:
   * only before opset N */
  const char *attrs;
  tg_import_fn import;  /* NULL: not importable (tessel.call) */
  tg_emit_fn emit;      /* NULL: no legalisation (folded before it) */
  int lg_min_in;        /* inputs the emitter needs present */
  tg_pattern pattern;   /* fusion pattern, unless pattern_fn */
  tg_pattern_fn pattern_fn;
  unsigned flags;       /* TG_OPF_* */
  tg_qdq_fn qdq;        /* the qdq pass's rewrite (NULL: none) */
} tg_op_def;

/* The row of op; NULL for TG_OP_COUNT or a value out of range. */
const tg_op_def *tg_op_def_of(tg_op op);
/* The row whose ONNX op_type is name; NULL when there is none. */
const tg_op_def *tg_op_def_find(const char *name);

/* ---- the handlers and emitters the rows name (family files) ---- */
/* op_elemwise.c */
ts_status imp_unary(imp *im, nctx *nc);
ts_status imp_binary(imp *im, nctx *nc);
ts_status imp_leaky(imp *im, nctx *nc);
ts_status imp_gelu(imp *im, nctx *nc);
ts_status imp_clip(imp *im, nctx *nc);
ts_status imp_cast(imp *im, nctx *nc);
void lg_emit_unary(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out);
void lg_emit_binary(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out);
tg_pattern lg_pattern_binary(const tg_graph *g, const tg_node *n);
/* op_nn.c */
ts_status imp_conv(imp *im, nctx *nc);
ts_status imp_gemm(imp *im, nctx *nc);
ts_status imp_matmul(imp *im, nctx *nc);
ts_status imp_batchnorm(imp *im, nctx *nc);
ts_status imp_pool(imp *im, nctx *nc);
ts_status imp_gap(imp *im, nctx *nc);
void lg_emit_conv(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out);
/* Conv's checks of W (and B) against X, its canonical attributes and its
 * output (of dtype ydt): shared with ConvInteger and QLinearConv. */
ts_status imp_conv_shape(imp *im, nctx *nc, const tg_value *x, const tg_value *w, const tg_value *b, ir_dtype ydt);
/* The integer convolution's reductions (ConvInteger, QLinearConv): input xi
 * (u8/i8, padded with padval: its zero point) against input wi into the
 * i32 tensor acc (declared by the caller, the output's dims) as
 * "acc += i32(x[..]) * i32(w[..])", the form the int8 sketch rules match;
 * with xsum, also the window sums of x per group into xsum [N, groups,
 * spatial...] (declared here). zero_pad: padval is 0 (a guarded
 * convolution over symbolic spatial dims is then allowed). */
bool lg_conv_int(lg_kernel *k, const tg_node *n, int xi, int wi, const char *const *in, const char *o,
                 const char *padval, bool zero_pad, const char *acc, const char *xsum, int64_t *groups);
/* The same channels-last (2-D, ungrouped, constant sizes: _ok says whether
 * it applies, emitting nothing): x transposed to NHWC and padded with
 * padval in one byte stage, then acc [N, P, Q, M] (declared here) +=
 * i32(xt[n, p*sh + kh*dh, q*sw + kw*dw, c]) * i32(w[m, c, kh, kw]) over
 * kh, kw, c: the implicit GEMM the VNNI rule tensorizes (4 consecutive
 * input channels per lane, 16 output channels per vector). With the node
 * attribute tessel.nhwc (the qdq pass's channels-last int8 region) x and y
 * are already [N, H, W, C]: the byte stage only pads (none when the window
 * stays inside x). */
bool lg_conv_int_nhwc_ok(lg_kernel *k, const tg_node *n, int xi, int wi);
bool lg_conv_int_nhwc(lg_kernel *k, const tg_node *n, int xi, int wi, const char *const *in, const char *o,
                      const char *padval, const char *acc);
void lg_emit_conv_transpose(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out);
void lg_emit_gemm(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out);
void lg_emit_matmul(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out);
void lg_emit_batchnorm(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out);
void lg_emit_pool(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out);
void lg_emit_global_avg(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out);
/* op_tensor.c */
ts_status imp_flatten(imp *im, nctx *nc);
ts_status imp_reshape(imp *im, nctx *nc);
ts_status imp_transpose(imp *im, nctx *nc);
ts_status imp_concat(imp *im, nctx *nc);
ts_status imp_split(imp *im, nctx *nc);
ts_status imp_slice(imp *im, nctx *nc);
ts_status imp_gather(imp *im, nctx *nc);
ts_status imp_pad(imp *im, nctx *nc);
ts_status imp_squeeze(imp *im, nctx *nc);
ts_status imp_unsqueeze(imp *im, nctx *nc);
ts_status imp_shape(imp *im, nctx *nc);
ts_status imp_constant(imp *im, nctx *nc);
void lg_emit_transpose(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out);
void lg_emit_reshape(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out);
void lg_emit_concat(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out);
void lg_emit_split(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out);
void lg_emit_slice(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out);
void lg_emit_gather(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out);
void lg_emit_pad(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out);
void lg_emit_shape(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out);
/* op_reduce.c */
ts_status imp_softmax(imp *im, nctx *nc);
ts_status imp_layernorm(imp *im, nctx *nc);
ts_status imp_reduce(imp *im, nctx *nc);
void lg_emit_softmax(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out);
void lg_emit_layernorm(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out);
void lg_emit_reduce(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out);
/* op_legacy.c */
ts_status imp_lrn(imp *im, nctx *nc);
ts_status imp_dropout(imp *im, nctx *nc);
ts_status imp_variadic(imp *im, nctx *nc);
/* Parameter `what` of node nc: the ints attribute of that name before
 * opset `until`, input i from it on (imp_param_ints). */
ts_status imp_param_legacy(imp *im, nctx *nc, int i, const char *what, int until, bool *present, int64_t *buf,
                           int cap, const int64_t **vals, int *n);
/* Opsets 1 to 6, each a no-op from opset 7 on. imp_legacy_broadcast: a
 * binary op's broadcast and axis attributes (B aligned with A's dims from
 * axis on) become numpy broadcasting, with an Unsqueeze of B where the two
 * differ. imp_legacy_slope: PRelu's 1-D slope of C elements is per channel
 * (dim 1), made so by an Unsqueeze. imp_legacy_is_test: BatchNormalization
 * and Dropout need is_test=1 (0, the default, is training mode). */
ts_status imp_legacy_broadcast(imp *im, nctx *nc);
ts_status imp_legacy_slope(imp *im, nctx *nc);
ts_status imp_legacy_is_test(imp *im, nctx *nc);
void lg_emit_lrn(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out);
void lg_emit_dropout(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out);
void lg_emit_variadic(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out);
/* op_logic.c */
ts_status imp_compare(imp *im, nctx *nc);
ts_status imp_not(imp *im, nctx *nc);
ts_status imp_is_special(imp *im, nctx *nc);
ts_status imp_attention(imp *im, nctx *nc);
ts_status imp_rotary(imp *im, nctx *nc);
ts_status imp_ms_qlinear(imp *im, nctx *nc);
ts_status imp_ms_contrib(imp *im, nctx *nc);
ts_status imp_where(imp *im, nctx *nc);
ts_status imp_range(imp *im, nctx *nc);
ts_status imp_constant_of_shape(imp *im, nctx *nc);
ts_status imp_expand(imp *im, nctx *nc);
void lg_emit_logic(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out);
void lg_emit_range(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out);
void lg_emit_constant_of_shape(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out);
/* op_data.c */
ts_status imp_gather_elements(imp *im, nctx *nc);
ts_status imp_tile(imp *im, nctx *nc);
ts_status imp_depth_space(imp *im, nctx *nc);
ts_status imp_trilu(imp *im, nctx *nc);
ts_status imp_size(imp *im, nctx *nc);
ts_status imp_cumsum(imp *im, nctx *nc);
ts_status imp_onehot(imp *im, nctx *nc);
ts_status imp_gather_nd(imp *im, nctx *nc);
ts_status imp_resize(imp *im, nctx *nc);
void lg_emit_gather_elements(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out);
void lg_emit_tile(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out);
void lg_emit_depth_space(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out);
void lg_emit_trilu(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out);
void lg_emit_size(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out);
void lg_emit_cumsum(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out);
void lg_emit_onehot(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out);
void lg_emit_gather_nd(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out);
void lg_emit_resize(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out);

/* op_math.c (mathops) */
ts_status imp_math_unary(imp *im, nctx *nc);
ts_status imp_prelu(imp *im, nctx *nc);
ts_status imp_logsoftmax(imp *im, nctx *nc);
ts_status imp_reduce_math(imp *im, nctx *nc);
ts_status imp_argmax(imp *im, nctx *nc);
void lg_emit_math_unary(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out);
void lg_emit_prelu(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out);
void lg_emit_logsoftmax(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out);
void lg_emit_reduce_math(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out);
void lg_emit_argmax(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out);
void lg_emit_global_max(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out);
/* op_norm.c (mathops) */
ts_status imp_lpnorm(imp *im, nctx *nc);
ts_status imp_instnorm(imp *im, nctx *nc);
ts_status imp_groupnorm(imp *im, nctx *nc);
ts_status imp_mvn(imp *im, nctx *nc);
void lg_emit_lpnorm(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out);
void lg_emit_instnorm(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out);
void lg_emit_groupnorm(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out);
void lg_emit_mvn(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out);
/* op_contract.c (ops2) */
ts_status imp_einsum(imp *im, nctx *nc);
void lg_emit_einsum(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out);
ts_status imp_castlike(imp *im, nctx *nc); /* op_elemwise.c */
/* op_scatter.c (ops2) */
ts_status imp_topk(imp *im, nctx *nc);
ts_status imp_scatter_nd(imp *im, nctx *nc);
ts_status imp_scatter_elements(imp *im, nctx *nc);
void lg_emit_topk(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out);
/* qdq.c: the qdq pass's rewrites the rows name */
ts_status tg_qdq_move(tg_graph *g, tg_node *n, bool *changed, ts_diag *d);   /* data movement: the DQ after it */
ts_status tg_qdq_concat(tg_graph *g, tg_node *n, bool *changed, ts_diag *d); /* the same, inputs of one scale */
ts_status tg_qdq_pair(tg_graph *g, tg_node *n, bool *changed, ts_diag *d);   /* Q(DQ(x)) with one scale: x */
ts_status tg_qdq_conv(tg_graph *g, tg_node *n, bool *changed, ts_diag *d);   /* DQ -> Conv -> Q: QLinearConv */
ts_status tg_qdq_matmul(tg_graph *g, tg_node *n, bool *changed, ts_diag *d); /* DQ -> MatMul/Gemm -> Q: QLinearMatMul */
/* qdq_layout.c: the channels-last int8 region (QLinearConv, MaxPool and the
 * elementwise ops between them NHWC; back-to-back Transposes cancelled). */
ts_status tg_qdq_layout(tg_graph *g, ts_diag *d);
/* quantization (op_quant.c) */
ts_status imp_quantize(imp *im, nctx *nc);
ts_status imp_dequantize(imp *im, nctx *nc);
ts_status imp_dyn_quantize(imp *im, nctx *nc);
ts_status imp_matmul_integer(imp *im, nctx *nc);
ts_status imp_qlinear_matmul(imp *im, nctx *nc);
ts_status imp_qlinear_conv(imp *im, nctx *nc);
ts_status imp_conv_integer(imp *im, nctx *nc);
void lg_emit_conv_integer(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out);
void lg_emit_qlinear_conv(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out);
/* The input of an integer contraction (MatMulInteger, QLinearMatMul,
 * ConvInteger, QLinearConv) that holds its int32 bias, or with attribute
 * tessel.comp the bias with the weight-side zero-point terms folded in
 * (qdq.c); -1 for any other op. */
int tg_qint_comp_input(tg_op op);
void lg_emit_qlinear_matmul(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out);
void lg_emit_quantize(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out);
void lg_emit_dequantize(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out);
void lg_emit_dyn_quantize(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out);
void lg_emit_matmul_integer(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out);
void lg_emit_scatter_nd(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out);
void lg_emit_scatter_elements(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out);

#endif
