/* onnx.h — ONNX model import into the graph IR (graph.h) through protobuf-c
 * and tessel's own subset of onnx.proto: opsets 1 to 28, every op of
 * TG_OP_LIST, written in one canonical form (full shapes, defaults filled,
 * parameter inputs known at import moved into attributes). Refusals name the
 * node, op and opset. docs/GRAPH.md, docs/IR.md ("Notes by file"). */
#ifndef TESSEL_IR_GRAPH_ONNX_H
#define TESSEL_IR_GRAPH_ONNX_H

#include "graph.h"

#define TG_ONNX_OPSET_MIN 1
#define TG_ONNX_OPSET_MAX 28

/* Reads an .onnx file and imports it (label for messages: the path). */
ts_status tg_onnx_import(const char *path, ir_module *m, tg_graph **out, ts_diag *d);
/* Imports a serialised ModelProto from memory; label names it in messages. */
ts_status tg_onnx_import_mem(const void *buf, size_t len, const char *label, ir_module *m, tg_graph **out,
                             ts_diag *d);

/* The ir dtype of an ONNX TensorProto.DataType, false when tessel has none. */
bool tg_onnx_dtype(int onnx_type, ir_dtype *out);

#endif
