/* ops.c — the operator registry (ops.h): one row per operator, in one
 * place. A row names the ONNX op_type, the kernel's short name, the opset
 * range, the arity, the attribute spec, the import handler and the
 * legalisation emitter (both in the operator's family file), the inputs
 * the emitter needs, the fusion pattern and the flags the passes read.
 * docs/GRAPH.md ("Adding an operator"). */
#include <string.h>

#include "ops.h"

#define POOL_ATTRS "s:auto_pad i:ceil_mode@10 I:dilations@10 I:kernel_shape I:pads I:strides"
#define CONV_ATTRS "s:auto_pad I:dilations i:group I:kernel_shape I:pads I:strides"
#define CONVT_ATTRS "s:auto_pad I:dilations i:group I:kernel_shape I:output_padding I:output_shape I:pads I:strides"
#define AVGPOOL_ATTRS "s:auto_pad i:ceil_mode@10 i:count_include_pad I:dilations@19 I:kernel_shape I:pads I:strides"
#define RED_ATTRS "I:axes<18 i:keepdims i:noop_with_empty_axes@18"
#define CONST_ATTRS "T:value f:value_float@12 F:value_floats@12 i:value_int@12 I:value_ints@12"
#define RESIZE_ATTRS "s:mode s:coordinate_transformation_mode@11 f:cubic_coeff_a@11 i:exclude_outside@11 " \
  "f:extrapolation_value@11 s:nearest_mode@11 i:antialias@18 I:axes@18 s:keep_aspect_ratio_policy@18"

#define EW TG_PAT_ELEMWISE
#define BC TG_PAT_BROADCAST
#define INJ TG_PAT_INJECTIVE
#define RED TG_PAT_REDUCE
#define OUT TG_PAT_OUT_EWISE
#define OPQ TG_PAT_OPAQUE
#define NOOP TG_OPF_NOOP_SAME_SHAPE
#define PARAMS TG_OPF_PARAM_INPUTS

/* clang-format off */
static const tg_op_def defs[TG_OP_COUNT] = {
/* op                        ONNX                  kernel               since until in    out   attrs                           import           emit                    lg_in pattern fn  flags [qdq rewrite] */
#define R(op, ...) [op] = {op, __VA_ARGS__}
R(TG_OP_CONV,                "Conv",               "conv2d",             1, 0, 2, 3,  1, 1, CONV_ATTRS,                     imp_conv,        lg_emit_conv,            2, OUT, NULL, 0, tg_qdq_conv),
R(TG_OP_CONV_TRANSPOSE,      "ConvTranspose",      "conv2d_transpose",   1, 0, 2, 3,  1, 1, CONVT_ATTRS,                    imp_conv,        lg_emit_conv_transpose,  2, OUT, NULL, 0),
R(TG_OP_GEMM,                "Gemm",               "dense",              1, 0, 2, 3,  1, 1, "f:alpha f:beta i:transA i:transB i:broadcast<7", imp_gemm,    lg_emit_gemm,            2, OUT, NULL, 0, tg_qdq_matmul),
R(TG_OP_MATMUL,              "MatMul",             "matmul",             1, 0, 2, 2,  1, 1, "",                             imp_matmul,      lg_emit_matmul,          2, OUT, NULL, 0, tg_qdq_matmul),
R(TG_OP_ADD,                 "Add",                "add",                1, 0, 2, 2,  1, 1, "i:broadcast<7 i:axis<7",       imp_binary,      lg_emit_binary,          2, BC, lg_pattern_binary, 0),
R(TG_OP_SUB,                 "Sub",                "subtract",           1, 0, 2, 2,  1, 1, "i:broadcast<7 i:axis<7",       imp_binary,      lg_emit_binary,          2, BC, lg_pattern_binary, 0),
R(TG_OP_MUL,                 "Mul",                "multiply",           1, 0, 2, 2,  1, 1, "i:broadcast<7 i:axis<7",       imp_binary,      lg_emit_binary,          2, BC, lg_pattern_binary, 0),
R(TG_OP_DIV,                 "Div",                "divide",             1, 0, 2, 2,  1, 1, "i:broadcast<7 i:axis<7",       imp_binary,      lg_emit_binary,          2, BC, lg_pattern_binary, 0),
R(TG_OP_RELU,                "Relu",               "relu",               1, 0, 1, 1,  1, 1, "",                             imp_unary,       lg_emit_unary,           1, EW, NULL, 0),
R(TG_OP_LEAKY_RELU,          "LeakyRelu",          "leaky_relu",         1, 0, 1, 1,  1, 1, "f:alpha",                      imp_leaky,       lg_emit_unary,           1, EW, NULL, 0),
R(TG_OP_SIGMOID,             "Sigmoid",            "sigmoid",            1, 0, 1, 1,  1, 1, "",                             imp_unary,       lg_emit_unary,           1, EW, NULL, TG_OPF_COSTLY),
R(TG_OP_TANH,                "Tanh",               "tanh",               1, 0, 1, 1,  1, 1, "",                             imp_unary,       lg_emit_unary,           1, EW, NULL, TG_OPF_COSTLY),
R(TG_OP_ERF,                 "Erf",                "erf",                9, 0, 1, 1,  1, 1, "",                             imp_unary,       lg_emit_unary,           1, EW, NULL, TG_OPF_COSTLY),
R(TG_OP_GELU,                "Gelu",               "gelu",              20, 0, 1, 1,  1, 1, "s:approximate",                imp_gelu,        lg_emit_unary,           1, EW, NULL, TG_OPF_COSTLY),
R(TG_OP_CLIP,                "Clip",               "clip",               6, 0, 1, 3,  1, 1, "f:min<11 f:max<11",                             imp_clip,        lg_emit_unary,           1, EW, NULL, PARAMS),
R(TG_OP_SOFTMAX,             "Softmax",            "softmax",            1, 0, 1, 1,  1, 1, "i:axis",                       imp_softmax,     lg_emit_softmax,         1, RED, NULL, 0),
R(TG_OP_LAYER_NORM,          "LayerNormalization", "layer_norm",        17, 0, 2, 3,  1, 3, "i:axis f:epsilon i:stash_type", imp_layernorm,  lg_emit_layernorm,       2, RED, NULL, 0),
R(TG_OP_RMS_NORM,            "RMSNormalization",   "rms_norm",          23, 0, 2, 2,  1, 1, "i:axis f:epsilon i:stash_type", imp_layernorm,  lg_emit_layernorm,       2, RED, NULL, 0),
R(TG_OP_BATCH_NORM,          "BatchNormalization", "batch_norm",         1, 0, 5, 5,  1, 5, "f:epsilon f:momentum i:spatial<9 i:training_mode@14 i:is_test<7", imp_batchnorm, lg_emit_batchnorm, 5, BC, NULL, 0),
R(TG_OP_MAX_POOL,            "MaxPool",            "max_pool2d",         1, 0, 1, 1,  1, 2, POOL_ATTRS " i:storage_order@8",  imp_pool,        lg_emit_pool,            1, OUT, NULL, 0, tg_qdq_move),
R(TG_OP_AVERAGE_POOL,        "AveragePool",        "avg_pool2d",         1, 0, 1, 1,  1, 1, AVGPOOL_ATTRS,                  imp_pool,        lg_emit_pool,            1, OUT, NULL, 0),
R(TG_OP_GLOBAL_AVERAGE_POOL, "GlobalAveragePool",  "global_avg_pool2d",  1, 0, 1, 1,  1, 1, "",                             imp_gap,         lg_emit_global_avg,      1, RED, NULL, 0),
R(TG_OP_FLATTEN,             "Flatten",            "flatten",            1, 0, 1, 1,  1, 1, "i:axis",                       imp_flatten,     lg_emit_reshape,         1, INJ, NULL, NOOP, tg_qdq_move),
R(TG_OP_RESHAPE,             "Reshape",            "reshape",            1, 0, 1, 2,  1, 1, "I:shape<5 i:allowzero@14",             imp_reshape,     lg_emit_reshape,         1, INJ, NULL, NOOP | PARAMS, tg_qdq_move),
R(TG_OP_TRANSPOSE,           "Transpose",          "transpose",          1, 0, 1, 1,  1, 1, "I:perm",                       imp_transpose,   lg_emit_transpose,       1, INJ, NULL, 0, tg_qdq_move),
R(TG_OP_CONCAT,              "Concat",             "concat",             1, 0, 1, -1, 1, 1, "i:axis",                       imp_concat,      lg_emit_concat,          1, INJ, NULL, 0, tg_qdq_concat),
R(TG_OP_SPLIT,               "Split",              "split",              2, 0, 1, 2,  1, -1, "i:axis I:split<13 i:num_outputs@18",     imp_split,       lg_emit_split,           1, INJ, NULL, PARAMS | TG_OPF_ANY_OUTPUT),
R(TG_OP_SLICE,               "Slice",              "slice",              1, 0, 1, 5,  1, 1, "I:starts<10 I:ends<10 I:axes<10",                             imp_slice,       lg_emit_slice,           1, INJ, NULL, PARAMS, tg_qdq_move),
R(TG_OP_GATHER,              "Gather",             "take",               1, 0, 2, 2,  1, 1, "i:axis",                       imp_gather,      lg_emit_gather,          2, INJ, NULL, 0, tg_qdq_move),
R(TG_OP_PAD,                 "Pad",                "pad",                2, 0, 1, 4,  1, 1, "s:mode I:pads<11 f:value<11",                       imp_pad,         lg_emit_pad,             1, INJ, NULL, PARAMS),
R(TG_OP_REDUCE_MEAN,         "ReduceMean",         "mean",               1, 0, 1, 2,  1, 1, "I:axes<18 i:keepdims i:noop_with_empty_axes@18", imp_reduce, lg_emit_reduce, 1, RED, NULL, PARAMS),
R(TG_OP_REDUCE_SUM,          "ReduceSum",          "sum",                1, 0, 1, 2,  1, 1, "I:axes<13 i:keepdims i:noop_with_empty_axes@13", imp_reduce,  lg_emit_reduce,          1, RED, NULL, PARAMS),
R(TG_OP_SQRT,                "Sqrt",               "sqrt",               1, 0, 1, 1,  1, 1, "",                             imp_unary,       lg_emit_unary,           1, EW, NULL, 0),
R(TG_OP_POW,                 "Pow",                "power",              1, 0, 2, 2,  1, 1, "i:broadcast<7 i:axis<7",       imp_binary,      lg_emit_binary,          2, BC, lg_pattern_binary, 0),
R(TG_OP_CAST,                "Cast",               "cast",               1, 0, 1, 1,  1, 1, "i:to i:saturate@19 s:round_mode@24",           imp_cast,        lg_emit_unary,           1, EW, NULL, NOOP),
R(TG_OP_SQUEEZE,             "Squeeze",            "squeeze",            1, 0, 1, 2,  1, 1, "I:axes<13",                             imp_squeeze,     lg_emit_reshape,         1, INJ, NULL, NOOP | PARAMS, tg_qdq_move),
R(TG_OP_UNSQUEEZE,           "Unsqueeze",          "expand_dims",        1, 0, 1, 2,  1, 1, "I:axes<13",                             imp_unsqueeze,   lg_emit_reshape,         1, INJ, NULL, NOOP | PARAMS, tg_qdq_move),
R(TG_OP_SHAPE,               "Shape",              "shape_of",           1, 0, 1, 1,  1, 1, "i:start@15 i:end@15",          imp_shape,       lg_emit_shape,           1, OPQ, NULL, 0),
R(TG_OP_CONSTANT,            "Constant",           "op",                 1, 0, 0, 0,  1, 1, CONST_ATTRS,                    imp_constant,    NULL,                    0, OPQ, NULL, 0),
R(TG_OP_IDENTITY,            "Identity",           "copy",               1, 0, 1, 1,  1, 1, "",                             imp_unary,       lg_emit_unary,           1, EW, NULL, NOOP),
/* -- comparison, logic and shape building (bool, int64; op_logic.c) -- */
R(TG_OP_EQUAL,               "Equal",              "equal",              1, 0, 2, 2,  1, 1, "i:broadcast<7 i:axis<7",       imp_compare,     lg_emit_logic,           2, BC, lg_pattern_binary, 0),
R(TG_OP_LESS,                "Less",               "less",               1, 0, 2, 2,  1, 1, "i:broadcast<7 i:axis<7",       imp_compare,     lg_emit_logic,           2, BC, lg_pattern_binary, 0),
R(TG_OP_GREATER,             "Greater",            "greater",            1, 0, 2, 2,  1, 1, "i:broadcast<7 i:axis<7",       imp_compare,     lg_emit_logic,           2, BC, lg_pattern_binary, 0),
R(TG_OP_LESS_OR_EQUAL,       "LessOrEqual",        "less_equal",        12, 0, 2, 2,  1, 1, "",                             imp_compare,     lg_emit_logic,           2, BC, lg_pattern_binary, 0),
R(TG_OP_GREATER_OR_EQUAL,    "GreaterOrEqual",     "greater_equal",     12, 0, 2, 2,  1, 1, "",                             imp_compare,     lg_emit_logic,           2, BC, lg_pattern_binary, 0),
R(TG_OP_NOT,                 "Not",                "logical_not",        1, 0, 1, 1,  1, 1, "",                             imp_not,         lg_emit_logic,           1, EW, NULL, 0),
R(TG_OP_AND,                 "And",                "logical_and",        1, 0, 2, 2,  1, 1, "i:broadcast<7 i:axis<7",       imp_compare,     lg_emit_logic,           2, BC, lg_pattern_binary, 0),
R(TG_OP_OR,                  "Or",                 "logical_or",         1, 0, 2, 2,  1, 1, "i:broadcast<7 i:axis<7",       imp_compare,     lg_emit_logic,           2, BC, lg_pattern_binary, 0),
R(TG_OP_XOR,                 "Xor",                "logical_xor",        1, 0, 2, 2,  1, 1, "i:broadcast<7 i:axis<7",       imp_compare,     lg_emit_logic,           2, BC, lg_pattern_binary, 0),
R(TG_OP_WHERE,               "Where",              "where",              9, 0, 3, 3,  1, 1, "",                             imp_where,       lg_emit_logic,           3, BC, lg_pattern_binary, 0),
R(TG_OP_MOD,                 "Mod",                "mod",               10, 0, 2, 2,  1, 1, "i:fmod",                       imp_compare,     lg_emit_logic,           2, BC, lg_pattern_binary, 0),
R(TG_OP_RANGE,               "Range",              "arange",            11, 0, 3, 3,  1, 1, "",                             imp_range,       lg_emit_range,           0, OPQ, NULL, TG_OPF_NO_INPUTS),
R(TG_OP_CONSTANT_OF_SHAPE,   "ConstantOfShape",    "full",               9, 0, 1, 1,  1, 1, "T:value",                      imp_constant_of_shape, lg_emit_constant_of_shape, 0, OPQ, NULL, TG_OPF_NO_INPUTS),
R(TG_OP_EXPAND,              "Expand",             "broadcast_to",       8, 0, 2, 2,  1, 1, "",                             imp_expand,      lg_emit_logic,           1, BC, NULL, 0),
/* -- data movement (op_data.c) -- */
R(TG_OP_GATHER_ELEMENTS,     "GatherElements",     "gather_elements",   11, 0, 2, 2,  1, 1, "i:axis",                       imp_gather_elements, lg_emit_gather_elements, 2, INJ, NULL, 0),
R(TG_OP_TILE,                "Tile",               "tile",               6, 0, 2, 2,  1, 1, "",                             imp_tile,        lg_emit_tile,            1, INJ, NULL, NOOP | PARAMS),
R(TG_OP_DEPTH_TO_SPACE,      "DepthToSpace",       "depth_to_space",     1, 0, 1, 1,  1, 1, "i:blocksize s:mode@11",        imp_depth_space, lg_emit_depth_space,     1, INJ, NULL, 0),
R(TG_OP_SPACE_TO_DEPTH,      "SpaceToDepth",       "space_to_depth",     1, 0, 1, 1,  1, 1, "i:blocksize",                  imp_depth_space, lg_emit_depth_space,     1, INJ, NULL, 0),
R(TG_OP_TRILU,               "Trilu",              "trilu",             14, 0, 1, 2,  1, 1, "i:upper",                      imp_trilu,       lg_emit_trilu,           1, INJ, NULL, PARAMS),
R(TG_OP_SIZE,                "Size",               "size",               1, 0, 1, 1,  1, 1, "",                             imp_size,        lg_emit_size,            1, OPQ, NULL, 0),
R(TG_OP_CUMSUM,              "CumSum",             "cumsum",            11, 0, 2, 2,  1, 1, "i:exclusive i:reverse",        imp_cumsum,      lg_emit_cumsum,          1, OPQ, NULL, PARAMS),
R(TG_OP_ONEHOT,              "OneHot",             "one_hot",            9, 0, 3, 3,  1, 1, "i:axis",                       imp_onehot,      lg_emit_onehot,          3, INJ, NULL, 0),
R(TG_OP_GATHER_ND,           "GatherND",           "gather_nd",         11, 0, 2, 2,  1, 1, "i:batch_dims@12",              imp_gather_nd,   lg_emit_gather_nd,       2, INJ, NULL, 0),
R(TG_OP_RESIZE,              "Resize",             "resize",            10, 0, 1, 4,  1, 1, RESIZE_ATTRS,                   imp_resize,      lg_emit_resize,          1, INJ, NULL, PARAMS, tg_qdq_move),
R(TG_OP_UPSAMPLE,            "Upsample",           "upsample",           7, 10, 1, 2, 1, 1, "s:mode F:scales<9",            imp_resize,      lg_emit_resize,          1, INJ, NULL, PARAMS),
R(TG_OP_CALL,                "tessel.call",        "op",                 0, 0, 0, -1, 0, -1, "",                            NULL,            NULL,                    0, OPQ, NULL, 0),
/* -- legacy opsets: LRN, Dropout, variadic Sum/Mean/Max/Min (op_legacy.c) -- */
R(TG_OP_LRN,                 "LRN",                "lrn",                1, 0, 1, 1,  1, 1, "f:alpha f:beta f:bias i:size", imp_lrn,     lg_emit_lrn,             1, OUT, NULL, 0),
R(TG_OP_DROPOUT,             "Dropout",            "dropout",            1, 0, 1, 3,  1, 2, "f:ratio<12 i:seed@12 i:is_test<7",         imp_dropout,     lg_emit_dropout,         1, EW, NULL, 0),
R(TG_OP_SUM,                 "Sum",                "sum_n",              1, 0, 1, -1, 1, 1, "",                             imp_variadic,    lg_emit_variadic,        1, BC, lg_pattern_binary, 0),
R(TG_OP_MEAN,                "Mean",               "mean_n",             1, 0, 1, -1, 1, 1, "",                             imp_variadic,    lg_emit_variadic,        1, BC, lg_pattern_binary, 0),
R(TG_OP_MAX,                 "Max",                "maximum",            1, 0, 1, -1, 1, 1, "",                             imp_variadic,    lg_emit_variadic,        1, BC, lg_pattern_binary, 0),
R(TG_OP_MIN,                 "Min",                "minimum",            1, 0, 1, -1, 1, 1, "",                             imp_variadic,    lg_emit_variadic,        1, BC, lg_pattern_binary, 0),
/* -- unary maths, activations, reductions, normalisations (mathops: op_math.c, op_norm.c) -- */
R(TG_OP_EXP,                      "Exp",                "exp",                 1, 0, 1, 1,  1, 1, "",                              imp_math_unary,   lg_emit_math_unary,   1, EW, NULL, TG_OPF_COSTLY),
R(TG_OP_LOG,                      "Log",                "log",                 1, 0, 1, 1,  1, 1, "",                              imp_math_unary,   lg_emit_math_unary,   1, EW, NULL, TG_OPF_COSTLY),
R(TG_OP_NEG,                      "Neg",                "negative",            1, 0, 1, 1,  1, 1, "",                              imp_math_unary,   lg_emit_math_unary,   1, EW, NULL, 0),
R(TG_OP_ABS,                      "Abs",                "abs",                 1, 0, 1, 1,  1, 1, "",                              imp_math_unary,   lg_emit_math_unary,   1, EW, NULL, 0),
R(TG_OP_RECIPROCAL,               "Reciprocal",         "reciprocal",          1, 0, 1, 1,  1, 1, "",                              imp_math_unary,   lg_emit_math_unary,   1, EW, NULL, 0),
R(TG_OP_FLOOR,                    "Floor",              "floor",               1, 0, 1, 1,  1, 1, "",                              imp_math_unary,   lg_emit_math_unary,   1, EW, NULL, 0),
R(TG_OP_CEIL,                     "Ceil",               "ceil",                1, 0, 1, 1,  1, 1, "",                              imp_math_unary,   lg_emit_math_unary,   1, EW, NULL, 0),
R(TG_OP_ROUND,                    "Round",              "round",              11, 0, 1, 1,  1, 1, "",                              imp_math_unary,   lg_emit_math_unary,   1, EW, NULL, 0),
R(TG_OP_SIGN,                     "Sign",               "sign",                9, 0, 1, 1,  1, 1, "",                              imp_math_unary,   lg_emit_math_unary,   1, EW, NULL, 0),
R(TG_OP_SIN,                      "Sin",                "sin",                 7, 0, 1, 1,  1, 1, "",                              imp_math_unary,   lg_emit_math_unary,   1, EW, NULL, TG_OPF_COSTLY),
R(TG_OP_COS,                      "Cos",                "cos",                 7, 0, 1, 1,  1, 1, "",                              imp_math_unary,   lg_emit_math_unary,   1, EW, NULL, TG_OPF_COSTLY),
R(TG_OP_SOFTPLUS,                 "Softplus",           "softplus",            1, 0, 1, 1,  1, 1, "",                              imp_math_unary,   lg_emit_math_unary,   1, EW, NULL, TG_OPF_COSTLY),
R(TG_OP_SOFTSIGN,                 "Softsign",           "softsign",            1, 0, 1, 1,  1, 1, "",                              imp_math_unary,   lg_emit_math_unary,   1, EW, NULL, 0),
R(TG_OP_ELU,                      "Elu",                "elu",                 1, 0, 1, 1,  1, 1, "f:alpha",                       imp_math_unary,   lg_emit_math_unary,   1, EW, NULL, TG_OPF_COSTLY),
R(TG_OP_SELU,                     "Selu",               "selu",                1, 0, 1, 1,  1, 1, "f:alpha f:gamma",               imp_math_unary,   lg_emit_math_unary,   1, EW, NULL, TG_OPF_COSTLY),
R(TG_OP_CELU,                     "Celu",               "celu",               12, 0, 1, 1,  1, 1, "f:alpha",                       imp_math_unary,   lg_emit_math_unary,   1, EW, NULL, TG_OPF_COSTLY),
R(TG_OP_HARD_SIGMOID,             "HardSigmoid",        "hard_sigmoid",        1, 0, 1, 1,  1, 1, "f:alpha f:beta",                imp_math_unary,   lg_emit_math_unary,   1, EW, NULL, 0),
R(TG_OP_IS_NAN,                   "IsNaN",              "isnan",               9, 0, 1, 1,  1, 1, "",                              imp_is_special,   lg_emit_logic,        1, EW, NULL, 0),
R(TG_OP_IS_INF,                   "IsInf",              "isinf",              10, 0, 1, 1,  1, 1, "i:detect_negative i:detect_positive", imp_is_special, lg_emit_logic, 1, EW, NULL, 0),
/* expanded at import into the subgraph of its function body (op_attention.c): no node of its own */
R(TG_OP_ATTENTION,                "Attention",          "attention",          23, 0, 3, 6,  1, 4, "i:is_causal i:kv_num_heads i:q_num_heads i:qk_matmul_output_mode f:scale f:softcap i:softmax_precision", imp_attention, NULL, 0, OPQ, NULL, TG_OPF_EXPANDED),
R(TG_OP_ROTARY_EMBEDDING,         "RotaryEmbedding",    "rotary_embedding",   23, 0, 3, 4,  1, 1, "i:interleaved i:num_heads i:rotary_embedding_dim", imp_rotary, NULL, 0, OPQ, NULL, TG_OPF_EXPANDED),
/* com.microsoft's QOperator ops (op_msquant.c): DequantizeLinear, the float op, QuantizeLinear */
#define MSQ TG_OPF_EXPANDED | TG_OPF_MS_DOMAIN
R(TG_OP_MS_QLINEAR_ADD,           "QLinearAdd",         "qlinear_add",         1, 0, 7, 8,  1, 1, "",                              imp_ms_qlinear,   NULL,                 0, OPQ, NULL, MSQ),
R(TG_OP_MS_QLINEAR_MUL,           "QLinearMul",         "qlinear_mul",         1, 0, 7, 8,  1, 1, "",                              imp_ms_qlinear,   NULL,                 0, OPQ, NULL, MSQ),
R(TG_OP_MS_QLINEAR_SIGMOID,       "QLinearSigmoid",     "qlinear_sigmoid",     1, 0, 4, 5,  1, 1, "",                              imp_ms_qlinear,   NULL,                 0, OPQ, NULL, MSQ),
R(TG_OP_MS_QLINEAR_LEAKY_RELU,    "QLinearLeakyRelu",   "qlinear_leaky_relu",  1, 0, 4, 5,  1, 1, "f:alpha",                       imp_ms_qlinear,   NULL,                 0, OPQ, NULL, MSQ),
R(TG_OP_MS_QLINEAR_GLOBAL_AVG_POOL, "QLinearGlobalAveragePool", "qlinear_global_avg_pool", 1, 0, 4, 5, 1, 1, "i:channels_last",   imp_ms_qlinear,   NULL,                 0, OPQ, NULL, MSQ),
R(TG_OP_MS_QLINEAR_AVG_POOL,      "QLinearAveragePool", "qlinear_avg_pool",    1, 0, 4, 5,  1, 1, "s:auto_pad i:ceil_mode i:channels_last i:count_include_pad I:kernel_shape I:pads I:strides", imp_ms_qlinear, NULL, 0, OPQ, NULL, MSQ),
R(TG_OP_MS_QLINEAR_CONCAT,        "QLinearConcat",      "qlinear_concat",      1, 0, 5, -1, 1, 1, "i:axis",                        imp_ms_qlinear,   NULL,                 0, OPQ, NULL, MSQ),
R(TG_OP_MS_QGEMM,                 "QGemm",              "qgemm",               1, 0, 6, 9,  1, 1, "f:alpha i:transA i:transB",     imp_ms_qlinear,   NULL,                 0, OPQ, NULL, MSQ),
/* com.microsoft's transformer ops (op_mscontrib.c; "Gelu.ms" and "Attention.ms" are com.microsoft's Gelu and Attention) */
R(TG_OP_MS_GELU,                  "Gelu.ms",            "gelu_ms",             1, 0, 1, 1,  1, 1, "",                              imp_ms_contrib,   NULL,                 0, OPQ, NULL, MSQ),
R(TG_OP_MS_BIAS_GELU,             "BiasGelu",           "bias_gelu",           1, 0, 2, 2,  1, 1, "",                              imp_ms_contrib,   NULL,                 0, OPQ, NULL, MSQ),
R(TG_OP_MS_FAST_GELU,             "FastGelu",           "fast_gelu",           1, 0, 1, 2,  1, 1, "",                              imp_ms_contrib,   NULL,                 0, OPQ, NULL, MSQ),
R(TG_OP_MS_QUICK_GELU,            "QuickGelu",          "quick_gelu",          1, 0, 1, 1,  1, 1, "f:alpha",                       imp_ms_contrib,   NULL,                 0, OPQ, NULL, MSQ),
R(TG_OP_MS_FUSED_MATMUL,          "FusedMatMul",        "fused_matmul",        1, 0, 2, 2,  1, 1, "f:alpha i:transA i:transB i:transBatchA i:transBatchB", imp_ms_contrib, NULL, 0, OPQ, NULL, MSQ),
R(TG_OP_MS_SKIP_LAYER_NORM,       "SkipLayerNormalization", "skip_layer_norm", 1, 0, 3, 5,  1, 4, "f:epsilon",                     imp_ms_contrib,   NULL,                 0, OPQ, NULL, MSQ),
R(TG_OP_MS_SKIP_SIMPLIFIED_LAYER_NORM, "SkipSimplifiedLayerNormalization", "skip_rms_norm", 1, 0, 3, 4, 1, 4, "f:epsilon",        imp_ms_contrib,   NULL,                 0, OPQ, NULL, MSQ),
R(TG_OP_MS_EMBED_LAYER_NORM,      "EmbedLayerNormalization", "embed_layer_norm", 1, 0, 6, 9, 1, 3, "f:epsilon i:mask_index_type",  imp_ms_contrib,   NULL,                 0, OPQ, NULL, MSQ),
R(TG_OP_MS_ATTENTION,             "Attention.ms",       "attention_ms",        1, 0, 2, 8,  1, 2, "i:num_heads i:unidirectional I:qkv_hidden_sizes f:mask_filter_value f:scale i:do_rotary i:past_present_share_buffer", imp_ms_contrib, NULL, 0, OPQ, NULL, MSQ),
/* onnxruntime registers SimplifiedLayerNormalization (its RMS norm) in the default domain */
R(TG_OP_SIMPLIFIED_LAYER_NORM,    "SimplifiedLayerNormalization", "simplified_layer_norm", 1, 0, 2, 2, 1, 2, "i:axis f:epsilon i:stash_type", imp_ms_contrib, NULL, 0, OPQ, NULL, TG_OPF_EXPANDED),
R(TG_OP_SHRINK,                   "Shrink",             "shrink",              9, 0, 1, 1,  1, 1, "f:bias f:lambd",                imp_math_unary,   lg_emit_math_unary,   1, EW, NULL, 0),
R(TG_OP_HARD_SWISH,               "HardSwish",          "hard_swish",         14, 0, 1, 1,  1, 1, "",                              imp_math_unary,   lg_emit_math_unary,   1, EW, NULL, 0),
R(TG_OP_PRELU,                    "PRelu",              "prelu",               1, 0, 2, 2,  1, 1, "",                              imp_prelu,        lg_emit_prelu,        2, BC, lg_pattern_binary, 0),
R(TG_OP_MISH,                     "Mish",               "mish",               18, 0, 1, 1,  1, 1, "",                              imp_math_unary,   lg_emit_math_unary,   1, EW, NULL, TG_OPF_COSTLY),
R(TG_OP_LOG_SOFTMAX,              "LogSoftmax",         "log_softmax",         1, 0, 1, 1,  1, 1, "i:axis",                        imp_logsoftmax,   lg_emit_logsoftmax,   1, RED, NULL, 0),
R(TG_OP_REDUCE_MAX,               "ReduceMax",          "max",                 1, 0, 1, 2,  1, 1, RED_ATTRS,                       imp_reduce_math,  lg_emit_reduce_math,  1, RED, NULL, 0),
R(TG_OP_REDUCE_MIN,               "ReduceMin",          "min",                 1, 0, 1, 2,  1, 1, RED_ATTRS,                       imp_reduce_math,  lg_emit_reduce_math,  1, RED, NULL, 0),
R(TG_OP_REDUCE_PROD,              "ReduceProd",         "prod",                1, 0, 1, 2,  1, 1, RED_ATTRS,                       imp_reduce_math,  lg_emit_reduce_math,  1, RED, NULL, 0),
R(TG_OP_REDUCE_L1,                "ReduceL1",           "l1_norm",             1, 0, 1, 2,  1, 1, RED_ATTRS,                       imp_reduce_math,  lg_emit_reduce_math,  1, RED, NULL, 0),
R(TG_OP_REDUCE_L2,                "ReduceL2",           "l2_norm",             1, 0, 1, 2,  1, 1, RED_ATTRS,                       imp_reduce_math,  lg_emit_reduce_math,  1, RED, NULL, 0),
R(TG_OP_REDUCE_LOG_SUM_EXP,       "ReduceLogSumExp",    "logsumexp",           1, 0, 1, 2,  1, 1, RED_ATTRS,                       imp_reduce_math,  lg_emit_reduce_math,  1, RED, NULL, 0),
R(TG_OP_REDUCE_SUM_SQUARE,        "ReduceSumSquare",    "sum_square",          1, 0, 1, 2,  1, 1, RED_ATTRS,                       imp_reduce_math,  lg_emit_reduce_math,  1, RED, NULL, 0),
R(TG_OP_ARG_MAX,                  "ArgMax",             "argmax",              1, 0, 1, 1,  1, 1, "i:axis i:keepdims i:select_last_index@12", imp_argmax,       lg_emit_argmax,       1, RED, NULL, 0),
R(TG_OP_ARG_MIN,                  "ArgMin",             "argmin",              1, 0, 1, 1,  1, 1, "i:axis i:keepdims i:select_last_index@12", imp_argmax,       lg_emit_argmax,       1, RED, NULL, 0),
R(TG_OP_GLOBAL_MAX_POOL,          "GlobalMaxPool",      "global_max_pool2d",   1, 0, 1, 1,  1, 1, "",                              imp_gap,          lg_emit_global_max,   1, RED, NULL, 0),
R(TG_OP_LP_NORM,                  "LpNormalization",    "lp_norm",             1, 0, 1, 1,  1, 1, "i:axis i:p",                    imp_lpnorm,       lg_emit_lpnorm,       1, RED, NULL, 0),
R(TG_OP_INSTANCE_NORM,            "InstanceNormalization","instance_norm",       1, 0, 3, 3,  1, 1, "f:epsilon",                     imp_instnorm,     lg_emit_instnorm,     3, RED, NULL, 0),
R(TG_OP_GROUP_NORM,               "GroupNormalization", "group_norm",         18, 0, 3, 3,  1, 1, "f:epsilon i:num_groups i:stash_type@21", imp_groupnorm,    lg_emit_groupnorm,    3, RED, NULL, 0),
R(TG_OP_MVN,                      "MeanVarianceNormalization","mvn",                 9, 0, 1, 1,  1, 1, "I:axes",                        imp_mvn,          lg_emit_mvn,          1, RED, NULL, 0),
/* -- ops2: contraction, top-k, scatters (op_contract.c, op_scatter.c) -- */
R(TG_OP_EINSUM,                   "Einsum",             "einsum",             12, 0, 1, -1, 1, 1, "s:equation",                    imp_einsum,       lg_emit_einsum,       1, OUT, NULL, 0),
R(TG_OP_TOPK,                     "TopK",               "topk",                1, 0, 1, 2,  1, 2, "i:axis i:k<10 i:largest@11 i:sorted@11", imp_topk, lg_emit_topk,        1, OPQ, NULL, TG_OPF_ANY_OUTPUT),
R(TG_OP_SCATTER_ND,               "ScatterND",          "scatter_nd",         11, 0, 3, 3,  1, 1, "s:reduction@16",                imp_scatter_nd,   lg_emit_scatter_nd,   3, OPQ, NULL, 0),
R(TG_OP_SCATTER_ELEMENTS,         "ScatterElements",    "scatter_elements",   11, 0, 3, 3,  1, 1, "i:axis s:reduction@16",         imp_scatter_elements, lg_emit_scatter_elements, 3, OPQ, NULL, 0),
R(TG_OP_SCATTER,                  "Scatter",            "scatter",             9, 11, 3, 3, 1, 1, "i:axis",                        imp_scatter_elements, lg_emit_scatter_elements, 3, OPQ, NULL, 0),
R(TG_OP_CAST_LIKE,                "CastLike",           "cast",               15, 0, 2, 2,  1, 1, "i:saturate@19 s:round_mode@24", imp_castlike,     lg_emit_unary,        1, EW, NULL, 0),
/* -- quantization (op_quant.c) -- */
R(TG_OP_QUANTIZE_LINEAR,          "QuantizeLinear",     "quantize",           10, 0, 2, 3,  1, 1, "i:axis@13 i:saturate@19 i:block_size@21 i:output_dtype@21 i:precision@23", imp_quantize, lg_emit_quantize, 2, EW, NULL, 0, tg_qdq_pair),
R(TG_OP_DEQUANTIZE_LINEAR,        "DequantizeLinear",   "dequantize",         10, 0, 2, 3,  1, 1, "i:axis@13 i:block_size@21 i:output_dtype@23", imp_dequantize, lg_emit_dequantize, 2, EW, NULL, 0),
R(TG_OP_DYN_QUANTIZE_LINEAR,      "DynamicQuantizeLinear","dyn_quantize",     11, 0, 1, 1,  3, 3, "",                              imp_dyn_quantize, lg_emit_dyn_quantize, 1, OPQ, NULL, TG_OPF_ANY_OUTPUT),
R(TG_OP_MATMUL_INTEGER,           "MatMulInteger",      "matmul_integer",     10, 0, 2, 4,  1, 1, "",                              imp_matmul_integer, lg_emit_matmul_integer, 2, OUT, NULL, 0),
R(TG_OP_QLINEAR_CONV,             "QLinearConv",        "qlinear_conv",       10, 0, 8, 9,  1, 1, CONV_ATTRS,                    imp_qlinear_conv, lg_emit_qlinear_conv, 8, OUT, NULL, 0),
R(TG_OP_QLINEAR_MATMUL,           "QLinearMatMul",      "qlinear_matmul",     10, 0, 8, 8,  1, 1, "",                              imp_qlinear_matmul, lg_emit_qlinear_matmul, 8, OUT, NULL, 0),
R(TG_OP_CONV_INTEGER,             "ConvInteger",        "conv2d_integer",     10, 0, 2, 4,  1, 1, CONV_ATTRS,                    imp_conv_integer, lg_emit_conv_integer, 2, OUT, NULL, 0),
#undef R
};
/* clang-format on */

const tg_op_def *tg_op_def_of(tg_op op) {
  if ((int)op < 0 || op >= TG_OP_COUNT || !defs[op].onnx) return NULL;
  return &defs[op];
}

const tg_op_def *tg_op_def_find(const char *name) {
  if (!name) return NULL;
  for (int i = 0; i < TG_OP_COUNT; i++)
    if (defs[i].onnx && !strcmp(defs[i].onnx, name)) return &defs[i];
  return NULL;
}
