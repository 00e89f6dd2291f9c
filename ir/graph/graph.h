/* graph.h — tessel's graph IR: a mutable dataflow of operator calls over
 * typed tensor values (constant or symbolic dims) in the same ir_module as
 * the loop functions. ONNX import gives ONNX-level ops (TG_OP_*),
 * legalisation turns them into TG_OP_CALLs of PrimFuncs, fusion merges them.
 * Nodes and values live in the module's arena; the id tables on the heap.
 * docs/GRAPH.md, docs/IR.md ("Notes by file").
 */
#ifndef TESSEL_IR_GRAPH_H
#define TESSEL_IR_GRAPH_H

#include "../ir.h"

/* X(enum, ONNX op_type) — the ONNX-level operators the importer produces,
 * plus tessel's own (names without an ONNX equivalent start with "tessel."). */
#define TG_OP_LIST(X)                            \
  X(TG_OP_CONV, "Conv")                          \
  X(TG_OP_CONV_TRANSPOSE, "ConvTranspose")       \
  X(TG_OP_GEMM, "Gemm")                          \
  X(TG_OP_MATMUL, "MatMul")                      \
  X(TG_OP_ADD, "Add")                            \
  X(TG_OP_SUB, "Sub")                            \
  X(TG_OP_MUL, "Mul")                            \
  X(TG_OP_DIV, "Div")                            \
  X(TG_OP_RELU, "Relu")                          \
  X(TG_OP_LEAKY_RELU, "LeakyRelu")               \
  X(TG_OP_SIGMOID, "Sigmoid")                    \
  X(TG_OP_TANH, "Tanh")                          \
  X(TG_OP_ERF, "Erf")                            \
  X(TG_OP_GELU, "Gelu")                          \
  X(TG_OP_CLIP, "Clip")                          \
  X(TG_OP_SOFTMAX, "Softmax")                    \
  X(TG_OP_LAYER_NORM, "LayerNormalization")      \
  X(TG_OP_BATCH_NORM, "BatchNormalization")      \
  X(TG_OP_MAX_POOL, "MaxPool")                   \
  X(TG_OP_AVERAGE_POOL, "AveragePool")           \
  X(TG_OP_GLOBAL_AVERAGE_POOL, "GlobalAveragePool") \
  X(TG_OP_FLATTEN, "Flatten")                    \
  X(TG_OP_RESHAPE, "Reshape")                    \
  X(TG_OP_TRANSPOSE, "Transpose")                \
  X(TG_OP_CONCAT, "Concat")                      \
  X(TG_OP_SPLIT, "Split")                        \
  X(TG_OP_SLICE, "Slice")                        \
  X(TG_OP_GATHER, "Gather")                      \
  X(TG_OP_PAD, "Pad")                            \
  X(TG_OP_REDUCE_MEAN, "ReduceMean")             \
  X(TG_OP_REDUCE_SUM, "ReduceSum")               \
  X(TG_OP_SQRT, "Sqrt")                          \
  X(TG_OP_POW, "Pow")                            \
  X(TG_OP_CAST, "Cast")                          \
  X(TG_OP_SQUEEZE, "Squeeze")                    \
  X(TG_OP_UNSQUEEZE, "Unsqueeze")                \
  X(TG_OP_SHAPE, "Shape")                        \
  X(TG_OP_CONSTANT, "Constant")                  \
  X(TG_OP_IDENTITY, "Identity")                  \
  /* -- legacy opsets (op_legacy.c) -- */        \
  X(TG_OP_LRN, "LRN")                            \
  X(TG_OP_DROPOUT, "Dropout")                    \
  X(TG_OP_SUM, "Sum")                            \
  X(TG_OP_MEAN, "Mean")                          \
  X(TG_OP_MAX, "Max")                            \
  X(TG_OP_MIN, "Min")                            \
  /* -- comparison, logic and shape building (bool, int64; op_logic.c) -- */ \
  X(TG_OP_EQUAL, "Equal")                        \
  X(TG_OP_LESS, "Less")                          \
  X(TG_OP_GREATER, "Greater")                    \
  X(TG_OP_LESS_OR_EQUAL, "LessOrEqual")          \
  X(TG_OP_GREATER_OR_EQUAL, "GreaterOrEqual")    \
  X(TG_OP_NOT, "Not")                            \
  X(TG_OP_AND, "And")                            \
  X(TG_OP_OR, "Or")                              \
  X(TG_OP_XOR, "Xor")                            \
  X(TG_OP_WHERE, "Where")                        \
  X(TG_OP_MOD, "Mod")                            \
  X(TG_OP_RANGE, "Range")                        \
  X(TG_OP_CONSTANT_OF_SHAPE, "ConstantOfShape")  \
  X(TG_OP_EXPAND, "Expand")                      \
  /* -- unary maths, activations, reductions, normalisations (mathops) -- */\
  X(TG_OP_EXP, "Exp")                           \
  X(TG_OP_LOG, "Log")                           \
  X(TG_OP_NEG, "Neg")                           \
  X(TG_OP_ABS, "Abs")                           \
  X(TG_OP_RECIPROCAL, "Reciprocal")             \
  X(TG_OP_FLOOR, "Floor")                       \
  X(TG_OP_CEIL, "Ceil")                         \
  X(TG_OP_ROUND, "Round")                       \
  X(TG_OP_SIGN, "Sign")                         \
  X(TG_OP_SIN, "Sin")                           \
  X(TG_OP_COS, "Cos")                           \
  X(TG_OP_SOFTPLUS, "Softplus")                 \
  X(TG_OP_SOFTSIGN, "Softsign")                 \
  X(TG_OP_ELU, "Elu")                           \
  X(TG_OP_SELU, "Selu")                         \
  X(TG_OP_CELU, "Celu")                         \
  X(TG_OP_HARD_SIGMOID, "HardSigmoid")          \
  X(TG_OP_HARD_SWISH, "HardSwish")              \
  X(TG_OP_PRELU, "PRelu")                       \
  X(TG_OP_MISH, "Mish")                         \
  X(TG_OP_LOG_SOFTMAX, "LogSoftmax")            \
  X(TG_OP_REDUCE_MAX, "ReduceMax")              \
  X(TG_OP_REDUCE_MIN, "ReduceMin")              \
  X(TG_OP_REDUCE_PROD, "ReduceProd")            \
  X(TG_OP_REDUCE_L1, "ReduceL1")                \
  X(TG_OP_REDUCE_L2, "ReduceL2")                \
  X(TG_OP_REDUCE_LOG_SUM_EXP, "ReduceLogSumExp")\
  X(TG_OP_REDUCE_SUM_SQUARE, "ReduceSumSquare") \
  X(TG_OP_ARG_MAX, "ArgMax")                    \
  X(TG_OP_ARG_MIN, "ArgMin")                    \
  X(TG_OP_GLOBAL_MAX_POOL, "GlobalMaxPool")     \
  X(TG_OP_LP_NORM, "LpNormalization")           \
  X(TG_OP_INSTANCE_NORM, "InstanceNormalization")\
  X(TG_OP_GROUP_NORM, "GroupNormalization")     \
  X(TG_OP_MVN, "MeanVarianceNormalization")     \
  /* -- ops2: contraction, top-k, scatters (op_contract.c, op_scatter.c) -- */ \
  X(TG_OP_EINSUM, "Einsum")                      \
  X(TG_OP_TOPK, "TopK")                          \
  X(TG_OP_SCATTER_ND, "ScatterND")               \
  X(TG_OP_SCATTER_ELEMENTS, "ScatterElements")   \
  X(TG_OP_SCATTER, "Scatter")                    \
  X(TG_OP_CAST_LIKE, "CastLike")                 \
  /* -- quantization (op_quant.c) -- */            \
  X(TG_OP_QUANTIZE_LINEAR, "QuantizeLinear")     \
  X(TG_OP_DEQUANTIZE_LINEAR, "DequantizeLinear") \
  X(TG_OP_DYN_QUANTIZE_LINEAR, "DynamicQuantizeLinear") \
  X(TG_OP_MATMUL_INTEGER, "MatMulInteger")       \
  X(TG_OP_QLINEAR_MATMUL, "QLinearMatMul")       \
  X(TG_OP_QLINEAR_CONV, "QLinearConv")           \
  X(TG_OP_CONV_INTEGER, "ConvInteger")           \
  /* -- data movement (op_data.c) -- */           \
  X(TG_OP_GATHER_ELEMENTS, "GatherElements")     \
  X(TG_OP_TILE, "Tile")                          \
  X(TG_OP_DEPTH_TO_SPACE, "DepthToSpace")        \
  X(TG_OP_SPACE_TO_DEPTH, "SpaceToDepth")        \
  X(TG_OP_TRILU, "Trilu")                        \
  X(TG_OP_SIZE, "Size")                          \
  X(TG_OP_CUMSUM, "CumSum")                      \
  X(TG_OP_ONEHOT, "OneHot")                      \
  X(TG_OP_GATHER_ND, "GatherND")                 \
  X(TG_OP_RESIZE, "Resize")                      \
  X(TG_OP_UPSAMPLE, "Upsample")                  \
  X(TG_OP_RMS_NORM, "RMSNormalization")          \
  X(TG_OP_SHRINK, "Shrink")                      \
  X(TG_OP_IS_NAN, "IsNaN")                       \
  X(TG_OP_IS_INF, "IsInf")                       \
  X(TG_OP_ATTENTION, "Attention")                \
  X(TG_OP_ROTARY_EMBEDDING, "RotaryEmbedding")   \
  X(TG_OP_MS_QLINEAR_ADD, "QLinearAdd")          \
  X(TG_OP_MS_QLINEAR_MUL, "QLinearMul")          \
  X(TG_OP_MS_QLINEAR_SIGMOID, "QLinearSigmoid")  \
  X(TG_OP_MS_QLINEAR_LEAKY_RELU, "QLinearLeakyRelu") \
  X(TG_OP_MS_QLINEAR_GLOBAL_AVG_POOL, "QLinearGlobalAveragePool") \
  X(TG_OP_MS_QLINEAR_AVG_POOL, "QLinearAveragePool") \
  X(TG_OP_MS_QLINEAR_CONCAT, "QLinearConcat")    \
  X(TG_OP_MS_QGEMM, "QGemm")                     \
  X(TG_OP_MS_GELU, "Gelu.ms")                    \
  X(TG_OP_MS_BIAS_GELU, "BiasGelu")              \
  X(TG_OP_MS_FAST_GELU, "FastGelu")              \
  X(TG_OP_MS_QUICK_GELU, "QuickGelu")            \
  X(TG_OP_MS_FUSED_MATMUL, "FusedMatMul")        \
  X(TG_OP_MS_SKIP_LAYER_NORM, "SkipLayerNormalization") \
  X(TG_OP_MS_SKIP_SIMPLIFIED_LAYER_NORM, "SkipSimplifiedLayerNormalization") \
  X(TG_OP_MS_EMBED_LAYER_NORM, "EmbedLayerNormalization") \
  X(TG_OP_MS_ATTENTION, "Attention.ms")          \
  X(TG_OP_SIMPLIFIED_LAYER_NORM, "SimplifiedLayerNormalization") \
  X(TG_OP_CALL, "tessel.call")

typedef enum {
#define TG_X(e, n) e,
  TG_OP_LIST(TG_X)
#undef TG_X
  TG_OP_COUNT
} tg_op;

const char *tg_op_name(tg_op op);
/* TG_OP_COUNT when the name is not one of TG_OP_LIST. */
tg_op tg_op_from_name(const char *name);

typedef struct tg_dim {
  int64_t value;   /* >= 0 when constant; -1 when symbolic */
  const char *sym; /* NULL when constant */
} tg_dim;

typedef enum { TG_V_INPUT, TG_V_CONST, TG_V_INTER } tg_value_kind;

typedef struct tg_value {
  int id;
  const char *name;
  tg_value_kind kind;
  ir_dtype dtype; /* element type, lanes 1 */
  int ndim;
  tg_dim *dims;
  void *data;     /* TG_V_CONST: row-major host data, nbytes of it; else NULL */
  size_t nbytes;
  int producer;   /* node id, or -1 (inputs and constants) */
  bool fixed_layout; /* TG_V_CONST laid out by a pass for its kernel (Winograd's
                        transformed weights): never a layout-free param */
} tg_value;

typedef enum { TG_A_INT, TG_A_FLOAT, TG_A_STRING, TG_A_INTS, TG_A_FLOATS } tg_attr_kind;

typedef struct tg_attr {
  const char *name;
  tg_attr_kind kind;
  int64_t i;
  double f;
  const char *s;
  int n;           /* TG_A_INTS / TG_A_FLOATS: element count */
  int64_t *ints;
  double *floats;
} tg_attr;

typedef struct tg_node {
  int id;
  const char *name;   /* ONNX node name, or a made-up unique one */
  tg_op op;
  bool dead;          /* removed; dropped by tg_graph_compact */
  int nin, nout;
  int *inputs;        /* value ids, -1 = omitted optional input */
  int *outputs;       /* value ids */
  int nattr;
  tg_attr *attrs;
  const char *callee; /* TG_OP_CALL: PrimFunc name in g->mod */
} tg_node;

/* The switches of the graph passes that change the kernels they make (and
 * so the task keys); all zero means the defaults. Set by the model compiler
 * from the CLI's --winograd/--polyphase flags (tg_pass_opts_set) and written
 * into the tuning log's records (docs/PASSES.md, docs/LOG.md). */
typedef enum {
  TG_WINOGRAD_ON,  /* the convolutions that gain from it (the default) */
  TG_WINOGRAD_OFF, /* the direct convolution everywhere */
  TG_WINOGRAD_ALL, /* no channel/tile thresholds (tests) */
} tg_winograd_mode;

typedef struct tg_pass_opts {
  tg_winograd_mode winograd;
  int winograd_tile; /* the output tile m of F(m x m, 3x3): 4 (0, the default) or 2 (--winograd-tile) */
  bool polyphase_off; /* strided 2-d convolutions read the padded input in the plain order */
  bool qdq_off;       /* the qdq pass leaves QuantizeLinear/DequantizeLinear chains as float ops */
  bool qdq_nchw;      /* the integer ops keep the NCHW layout (no channels-last region; --qdq nchw) */
  /* --conv-layout: 0 NCHW (the float convolutions as imported); > 0 the
   * nchwc pass blocks channels by this many (NCHW[x]c); -1 nchwc with the
   * block from the target's vector width (the model compiler resolves it;
   * the pass alone reads it as 8) */
  int conv_block;
} tg_pass_opts;

/* A name -> id hash index (open addressing, linear probing, the names hashed
 * with xxhash) over the values' or the nodes' names, so lookups and the
 * importer's per-node checks cost O(1) rather than a scan of the graph.
 * Slots hold ids (-1 empty) and compare against the table's current names.
 * Kept in step by tg_value_add, tg_node_add, tg_node_rename and
 * tg_graph_compact; heap memory (ts_malloc), freed by tg_graph_free. */
typedef struct tg_name_index {
  int cap;    /* slots: a power of two, or 0 before the first entry */
  int used;   /* filled slots */
  int *slots;
} tg_name_index;

typedef struct tg_graph {
  const char *name;
  tg_pass_opts opts;  /* read by the passes (tg_run_pipeline_opts sets it) */
  ir_module *mod;     /* owner: arena, and the PrimFuncs TG_OP_CALL names */
  int opset;          /* the model's default-domain opset (0 when built by hand) */
  int nvalues, capvalues;
  tg_value **values;  /* indexed by id */
  int nnodes, capnodes;
  tg_node **nodes;    /* indexed by id; topological order is kept by passes */
  int ninputs, noutputs;
  int *inputs;        /* value ids of the graph inputs, in order */
  int *outputs;       /* value ids of the graph outputs, in order */
  tg_name_index value_index; /* value names (unique) -> id */
  tg_name_index node_index;  /* node names -> an id with that name */
} tg_graph;

/* A new empty graph registered in m under name (an IR_MOD_GRAPH entry). */
tg_graph *tg_graph_new(ir_module *m, const char *name);
/* The graph registered in m under name, or the first graph when name is NULL. */
tg_graph *tg_graph_get(const ir_module *m, const char *name);
void tg_graph_free(tg_graph *g); /* the heap tables only; the arena is m's */

/* Adds a value; dims are copied (their sym strings too). Returns the id or
 * -1 on OOM / duplicate name (d set). */
int tg_value_add(tg_graph *g, const char *name, tg_value_kind kind, ir_dtype dt, int ndim,
                 const tg_dim *dims, ts_diag *d);
/* Copies nbytes of data into the arena as the constant's contents. */
ts_status tg_value_set_data(tg_graph *g, int id, const void *data, size_t nbytes, ts_diag *d);
int tg_value_find(const tg_graph *g, const char *name); /* id or -1 */
/* Elements of a value with only constant dims (-1 if any dim is symbolic). */
int64_t tg_value_numel(const tg_value *v);
/* ONNX Shape's start/end for an input of rank r: negative counts from the
 * end, then both clamp to [0, r]. */
void tg_shape_range(int r, int64_t *start, int64_t *end);
bool tg_value_is_static(const tg_value *v);

/* Adds a node (inputs/outputs copied) and sets the producer of its outputs.
 * Returns the id or -1 (d set). */
int tg_node_add(tg_graph *g, tg_op op, const char *name, int nin, const int *inputs, int nout,
                const int *outputs, ts_diag *d);
/* Renames node n (the name copied into the arena), keeping the node-name
 * index in step. TS_ENOMEM leaves the old name. */
ts_status tg_node_rename(tg_graph *g, tg_node *n, const char *name);
ts_status tg_node_set_attr(tg_graph *g, tg_node *n, const tg_attr *a); /* copied; replaces same name */
const tg_attr *tg_node_attr(const tg_node *n, const char *name);
int64_t tg_attr_int(const tg_node *n, const char *name, int64_t def);
double tg_attr_float(const tg_node *n, const char *name, double def);
const char *tg_attr_str(const tg_node *n, const char *name, const char *def);
/* The INTS attribute's elements (NULL and *n = 0 when absent). */
const int64_t *tg_attr_ints(const tg_node *n, const char *name, int *count);

/* Graph inputs/outputs (appended in order). */
ts_status tg_graph_add_input(tg_graph *g, int value_id);
ts_status tg_graph_add_output(tg_graph *g, int value_id);

/* Nodes that read value id (live nodes only); returns the count, fills up to max. */
int tg_value_consumers(const tg_graph *g, int value_id, int *out, int max);
/* Replaces every use of value `from` by `to` (node inputs and graph outputs). */
void tg_replace_uses(tg_graph *g, int from, int to);
/* Drops dead nodes and values no live node or graph output refers to, and
 * renumbers ids densely (keeping relative order); re-sorts topologically. */
ts_status tg_graph_compact(tg_graph *g, ts_diag *d);
/* Checks the invariants (single producer, inputs defined before use, every
 * call's callee exists with matching param counts, dtypes of call args match
 * the params). TS_EINVAL naming the node on failure. */
ts_status tg_graph_verify(const tg_graph *g, ts_diag *d);
/* A readable text form: one line per value declaration and node, e.g.
 *   %conv0 = Conv(%x, %w0, %b0) {strides=[1,1], pads=[1,1,1,1]} : f32[batch,64,56,56]
 *   %fused_conv_relu_0 = call @fused_conv2d_relu_0(%x, %w0) : f32[batch,64,56,56]
 * constants show their shape and the first elements. */
void tg_graph_print(const tg_graph *g, ts_strbuf *out);

/* ---- additions (gx) ------------------------------------------------------ */
/* Two dims are equal when both are the same constant or the same symbol. */
bool tg_dim_eq(tg_dim a, tg_dim b);
/* ---- symbolic dims as monomials (dim.c) ----------------------------------
 * A symbolic dim is a coefficient times a product of base symbols (graph
 * input dim_params), named canonically "12*batch*seq" (factors sorted, the
 * coefficient first when not 1). docs/GRAPH.md ("Symbolic dims"). */
#define TG_MONO_MAX 8
typedef struct tg_mono {
  int64_t coeff;
  int n;
  const char *f[TG_MONO_MAX]; /* factor names, pointing into buf */
  char buf[256];
} tg_mono;
/* Splits d (a constant: coeff = value, no factor) into m; false when the
 * name is not a monomial or too long. */
bool tg_mono_parse(tg_dim d, tg_mono *m);
/* x * y and the exact quotient x / y (false when y does not divide x, on
 * overflow or too many factors); new names are allocated in a. */
bool tg_dim_mul(ts_arena *a, tg_dim x, tg_dim y, tg_dim *out);
bool tg_dim_div(ts_arena *a, tg_dim x, tg_dim y, tg_dim *out);
/* The product of n dims (1 when n = 0). */
bool tg_dims_product(ts_arena *a, const tg_dim *d, int n, tg_dim *out);
/* The value of a symbolic dim, with lookup giving each base symbol's value
 * (< 0: unbound, an error naming it). */
ts_status tg_dim_eval(tg_dim d, int64_t (*lookup)(void *ctx, const char *sym), void *ctx, int64_t *out, ts_diag *diag);
/* A single base symbol (not a product). */
bool tg_dim_is_base(tg_dim d);
/* Appends a value's type as the printer writes it, e.g. "f32[batch,64,56,56]". */
void tg_value_type_str(const tg_value *v, ts_strbuf *out);

#endif
