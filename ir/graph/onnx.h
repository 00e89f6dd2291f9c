/* onnx.h — ONNX model import into the graph IR (graph.h), through protobuf-c
 * and tessel's own subset of onnx.proto (onnx.proto beside this file).
 *
 * Supported: the default domain ("" or "ai.onnx") at opsets 13 to 21, every
 * operator of TG_OP_LIST except tessel.call, tensors of f32, f64, f16, bf16,
 * i8, i16, i32, i64, u8, u32 and bool. Anything else is refused with
 * TS_EUNSUPPORTED naming the node, the op and the opset (an unsupported op,
 * attribute, attribute value, input form, dtype or opset); a truncated or
 * corrupt file is refused with TS_EPARSE; a model whose shapes do not agree
 * with TS_ESHAPE. Weights stored as external data are refused.
 *
 * The imported graph is in a *canonical form* so later passes need not know
 * which opset a model was written for (docs/GRAPH.md lists it per op):
 *  - every value has a dtype and a full shape (shape inference for every op);
 *    symbolic dims keep their dim_param name (non-identifier characters
 *    become '_'); an input dim with neither value nor name gets a made-up
 *    symbol "unk_N";
 *  - every attribute an op defines is present, defaults filled in, axes
 *    normalised to be non-negative, auto_pad resolved into explicit pads;
 *  - parameter *inputs* whose value is known at import (Split's split,
 *    Reduce*'s and (Un)Squeeze's axes, Pad's pads/constant_value/axes,
 *    Slice's starts/ends/axes/steps, Clip's min/max, Reshape's shape) become
 *    attributes (INTS, or FLOAT "min"/"max"/"value") and are dropped from the
 *    node's inputs, so those nodes have only their data input. Reshape keeps
 *    its shape input only when the shape holds a symbolic size (computed by a
 *    Shape/Gather/Concat chain); its output value's dims are still exact;
 *  - Constant nodes become TG_V_CONST values; Reduce* with empty axes and
 *    noop_with_empty_axes=1 becomes Identity;
 *  - nodes whose results nothing uses are dropped, then the graph is compacted.
 *
 * Both functions register the graph in m (tg_graph_new) and set *out; on
 * failure *out is NULL, d says why, and whatever was added to m's arena stays
 * there (freed with m); a half-built graph entry is left empty. */
#ifndef TESSEL_IR_GRAPH_ONNX_H
#define TESSEL_IR_GRAPH_ONNX_H

#include "graph.h"

#define TG_ONNX_OPSET_MIN 13
#define TG_ONNX_OPSET_MAX 21

/* Reads an .onnx file and imports it (label for messages: the path). */
ts_status tg_onnx_import(const char *path, ir_module *m, tg_graph **out, ts_diag *d);
/* Imports a serialised ModelProto from memory; label names it in messages. */
ts_status tg_onnx_import_mem(const void *buf, size_t len, const char *label, ir_module *m, tg_graph **out,
                             ts_diag *d);

/* The ir dtype of an ONNX TensorProto.DataType, false when tessel has none. */
bool tg_onnx_dtype(int onnx_type, ir_dtype *out);

#endif
