/* passes.h — the graph passes that take an imported model (ONNX-level ops,
 * ir/graph/graph.h) to what the graph executor runs: every live node a
 * TG_OP_CALL of a PrimFunc in g->mod, one PrimFunc per fused group.
 *
 * The pipeline, in order (tg_pass_names):
 *   qdq             QDQ chains become int8 work (qdq.c): DequantizeLinear ->
 *                   Conv/MatMul/Gemm [-> Relu] -> QuantizeLinear becomes
 *                   QLinearConv/QLinearMatMul (int32 sums, onnxruntime's
 *                   requantize), a DequantizeLinear moves past the data
 *                   movement after it, QuantizeLinear(DequantizeLinear(x))
 *                   with one scale is x; the integer ops' weight-side
 *                   zero-point terms are folded into their bias.
 *                   g->opts.qdq_off (--qdq off) keeps the float path.
 *   fold_constants  Constant nodes become TG_V_CONST values; shape arithmetic
 *                   (Shape of a static value, Gather/Concat/Unsqueeze/Squeeze/
 *                   Cast/Reshape/arithmetic on constants) is evaluated; any op
 *                   whose inputs are all constant is legalised alone and run
 *                   on the reference interpreter (ir/interp.h), its outputs
 *                   becoming constants.
 *   fold_batchnorm  BatchNormalization after a Conv with constant weights is
 *                   folded into the conv's weights and bias; a standalone one
 *                   becomes Mul + Add with constant per-channel scale/shift.
 *   simplify        nodes that change nothing removed (Identity, Reshape/
 *                   Flatten/Squeeze/Unsqueeze to the same shape, Cast to the
 *                   same dtype, identity Transpose, zero Pad), unless their
 *                   output is a graph output (its name is the caller's).
 *   winograd        a 3x3 stride-1 Conv with constant f32 weights (and 16+
 *                   channels each way) becomes the Winograd F(4x4, 3x3)
 *                   form: its weights transformed at compile time into
 *                   U[6,6,C,K], the transform matrices BT[6,6] and AT[4,6]
 *                   added as constants (inputs 3 and 4), attribute
 *                   "tessel.winograd" = 4; legalize writes the transforms
 *                   and the batched matmul as one kernel. g->opts.winograd
 *                   (--winograd off|all) switches it off or drops the
 *                   channel thresholds.
 *   nchwc           with g->opts.conv_block (--conv-layout nchwc) the float
 *                   2-D convolutions (groups 1 and depthwise, the output
 *                   channels a multiple of the block) compute in the
 *                   channel-blocked layout [N, C/b, H, W, b] (attribute
 *                   "tessel.nchwc" = b, weights re-laid at compile time),
 *                   and the elementwise ops and MaxPools between them run on
 *                   the blocked tensors, so that layout conversions (a
 *                   Reshape and a Transpose) sit only at the region's
 *                   borders (nchwc.c).
 *   legalize        every remaining op becomes a TG_OP_CALL of its own
 *                   PrimFunc (DSL text generated per op and parsed; symbolic
 *                   dims become PrimFunc size vars named after the graph
 *                   symbol). The node keeps its ONNX attributes plus
 *                   "tessel.op" (the original op name), which fusion reads.
 *   layout_rewrite  constant weights pre-packed into the layout the kernel
 *                   reads: a Gemm's constant B [N,K] (transB=1) becomes
 *                   [K,N], as MatMul's already is (docs/PASSES.md). Runs on the
 *                   legalised single-op calls (their PrimFunc is rewritten),
 *                   or on ONNX-level nodes before legalize.
 *   fuse            FuseOps-style grouping (docs/PASSES.md); each group of
 *                   two or more calls is merged into ONE PrimFunc named
 *                   "fused_<op>_<op>..._<n>" with the intermediates as
 *                   allocated buffers. A fused call is opaque (fuse is
 *                   idempotent).
 *   dce             nodes whose outputs nobody reads removed; the graph
 *                   compacted (tg_graph_compact); PrimFuncs of g->mod that
 *                   no live call uses removed.
 * Each pass is idempotent and may be run alone (fuse does nothing before
 * legalize; legalize refuses ops it cannot express, naming them).
 *
 * Errors: TS_ENOTFOUND for an unknown pass name (the message lists the valid
 * ones); TS_EUNSUPPORTED naming the node, its op and the attribute/shape that
 * cannot be handled; whatever the parser or interpreter reported, prefixed
 * with the node's name. */
#ifndef TESSEL_IR_GRAPH_PASSES_H
#define TESSEL_IR_GRAPH_PASSES_H

#include "graph.h"

/* The pass names in pipeline order (static storage); *n gets the count. */
const char *const *tg_pass_names(int *n);
/* Runs one pass by name. */
ts_status tg_run_pass(tg_graph *g, const char *name, ts_diag *d);
/* Runs the pipeline up to and including stop_after (NULL: all of it). An
 * unknown stop_after is TS_ENOTFOUND before anything runs. */
ts_status tg_run_pipeline(tg_graph *g, const char *stop_after, ts_diag *d);
/* The same with the passes' switches (NULL: the defaults) stored in g->opts
 * first, where every pass (and a later tg_run_pass) reads them. */
ts_status tg_run_pipeline_opts(tg_graph *g, const char *stop_after, const tg_pass_opts *o, ts_diag *d);

/* Sets one switch by name from its CLI/log spelling: "winograd" = on|off|all,
 * "polyphase" = on|off, "qdq" = on|off|nchw,
 * "conv_layout" = nchw|nchwc|nchwc<B>. TS_EINVAL naming the valid values otherwise. */
ts_status tg_pass_opts_set(tg_pass_opts *o, const char *name, const char *value, ts_diag *d);
/* The switches that differ from the model compiler's defaults
 * (tun_model_opts_init: every switch 0 but conv_block -1, nchwc with the
 * target's block) as "name=value,..." ("" for the defaults): what the
 * tuning log records. Returns buf. */
const char *tg_pass_opts_str(const tg_pass_opts *o, char *buf, size_t n);
/* Parses tg_pass_opts_str's form back ("" or NULL: the model compiler's
 * defaults, conv_block -1). */
ts_status tg_pass_opts_parse(const char *s, tg_pass_opts *o, ts_diag *d);

/* The individual passes (what tg_run_pass dispatches to). */
ts_status tg_pass_qdq(tg_graph *g, ts_diag *d);
ts_status tg_pass_fold_constants(tg_graph *g, ts_diag *d);
ts_status tg_pass_fold_batchnorm(tg_graph *g, ts_diag *d);
ts_status tg_pass_simplify(tg_graph *g, ts_diag *d);
ts_status tg_pass_winograd(tg_graph *g, ts_diag *d);
ts_status tg_pass_nchwc(tg_graph *g, ts_diag *d);
ts_status tg_pass_legalize(tg_graph *g, ts_diag *d);
ts_status tg_pass_fuse(tg_graph *g, ts_diag *d);
ts_status tg_pass_layout_rewrite(tg_graph *g, ts_diag *d);
ts_status tg_pass_dce(tg_graph *g, ts_diag *d);

/* Counts the PrimFuncs the live TG_OP_CALL nodes call (distinct callees);
 * handy for "PrimFuncs before/after fusion" checks. */
int tg_count_called_funcs(const tg_graph *g);

#endif
