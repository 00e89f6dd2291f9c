#!/usr/bin/env python3
"""gen_models.py OUTDIR — writes tessel's test models (deterministic: seeded
weights, fixed shapes), built with the onnx helper API:

  mlp.onnx          opset 17: Gemm/Relu x3 with a MatMul+Add layer, x f32[4,64] -> f32[4,10]
  cnn.onnx          opset 13: conv, batchnorm, relu, maxpool, a residual block
                    (add), strided conv, global average pool, flatten, gemm;
                    x f32[1,3,32,32] -> f32[1,10]
  transformer.onnx  opset 20: one encoder block with a symbolic batch dim
                    "batch": layernorm, q/k/v matmuls, reshape/transpose into
                    4 heads, scaled softmax attention, output projection,
                    residual adds, an MLP with Gelu; x f32[batch,16,64] -> same
  transformer_erf.onnx  opset 17: the same block with gelu written with Erf
                    and a Shape/Gather/Concat-computed reshape target
  quant_mlp_dyn.onnx, quant_cnn_qdq.onnx, quant_mbconv_qdq.onnx,
  quant_resnet_qdq.onnx, quant_transformer_dyn.onnx  opset 13 (17):
                        made by onnxruntime's quantization tools (dynamic
                        MLP, per-channel QDQ CNN, QDQ EfficientNet block,
                        QDQ small ResNet, dynamic transformer_erf block; and
                        quant_transformer_dyn_exact.onnx, its MatMulIntegers
                        as int32 MatMuls: the exact reference)
  transformer_flat.onnx opset 17: dims that are products of batch and seq
                        (Flatten, Reshape -1, heads folded into the batch)
  transformer_dyn.onnx  opset 17: a decoder block with dynamic batch and
                    sequence axes and the transformers mask/position logic
                    (int64 inputs input_ids, attention_mask [batch,seq])
  ops/*.onnx        one small model per operator and opset form (import
                    coverage); ops/manifest.json lists each with the output
                    shapes onnxruntime produces, when onnxruntime is present;
                    ops/bad_*.onnx models the importer must refuse.
  legacy/test_*/    models of opsets 1 to 6 with NumPy-computed expected
                    outputs, in the onnx backend-test layout (conformance).
  models.stamp      written last (the meson custom_target's output).

Needs the `onnx` and `numpy` packages (scripts/setup.sh installs them into
.venv); onnxruntime is optional (only for the manifest's reference shapes).
"""
import json
import os
import shutil
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT
I64 = TensorProto.INT64


class Builder:
    """Collects nodes and initializers; deterministic names."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes = []
        self.inits = []
        self.n = 0

    def name(self, base):
        self.n += 1
        return f"{base}{self.n}"

    def weight(self, base, shape, scale=None):
        nm = self.name(base)
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else int(shape[0])
        s = scale if scale is not None else 1.0 / np.sqrt(max(fan_in, 1))
        arr = (self.rng.standard_normal(shape) * s).astype(np.float32)
        self.inits.append(numpy_helper.from_array(arr, nm))
        return nm

    def const(self, base, arr):
        nm = self.name(base)
        self.inits.append(numpy_helper.from_array(np.asarray(arr), nm))
        return nm

    def op(self, op_type, inputs, nout=1, **attrs):
        outs = [self.name(op_type.lower() + "_") for _ in range(nout)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=self.name(op_type + "_n"), **attrs))
        return outs[0] if nout == 1 else outs

    def model(self, name, inputs, outputs, opset):
        g = helper.make_graph(self.nodes, name, inputs, outputs, self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="tessel-gen")
        m.ir_version = 8 if opset <= 18 else 9
        onnx.checker.check_model(m)
        return m


def mlp():
    b = Builder(1)
    x = helper.make_tensor_value_info("x", F, [4, 64])
    h = b.op("Gemm", ["x", b.weight("w", [128, 64]), b.weight("b", [128], 0.1)], transB=1)
    h = b.op("Relu", [h])
    h = b.op("MatMul", [h, b.weight("w", [128, 64])])
    h = b.op("Add", [h, b.weight("b", [64], 0.1)])
    h = b.op("Relu", [h])
    h = b.op("Gemm", [h, b.weight("w", [64, 10]), b.weight("b", [10], 0.1)])
    b.nodes[-1].output[0] = "y"
    y = helper.make_tensor_value_info("y", F, [4, 10])
    return b.model("mlp", [x], [y], 17)


def conv_bn_relu(b, x, cin, cout, stride=1, relu=True):
    h = b.op("Conv", [x, b.weight("w", [cout, cin, 3, 3]), b.weight("cb", [cout], 0.1)],
             kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[stride, stride])
    h = b.op("BatchNormalization", [h, b.const("g", (1 + 0.1 * b.rng.standard_normal(cout)).astype(np.float32)),
                                    b.const("be", (0.1 * b.rng.standard_normal(cout)).astype(np.float32)),
                                    b.const("mu", (0.1 * b.rng.standard_normal(cout)).astype(np.float32)),
                                    b.const("var", (0.5 + b.rng.random(cout)).astype(np.float32))],
             epsilon=1e-5)
    return b.op("Relu", [h]) if relu else h


def cnn():
    b = Builder(2)
    x = helper.make_tensor_value_info("x", F, [1, 3, 32, 32])
    h = conv_bn_relu(b, "x", 3, 16)
    h = b.op("MaxPool", [h], kernel_shape=[2, 2], strides=[2, 2])            # 16x16
    r = conv_bn_relu(b, h, 16, 16)
    r = conv_bn_relu(b, r, 16, 16, relu=False)
    h = b.op("Relu", [b.op("Add", [r, h])])                                   # residual
    h = conv_bn_relu(b, h, 16, 32, stride=2)                                  # 8x8
    h = b.op("GlobalAveragePool", [h])
    h = b.op("Flatten", [h], axis=1)
    h = b.op("Gemm", [h, b.weight("fc", [10, 32]), b.weight("fcb", [10], 0.1)], transB=1)
    b.nodes[-1].output[0] = "y"
    y = helper.make_tensor_value_info("y", F, [1, 10])
    return b.model("cnn", [x], [y], 13)


def transformer(opset, erf_gelu):
    """One encoder block, d=64, 4 heads of 16, seq 16, symbolic batch."""
    b = Builder(3)
    S, D, H, DH, FF = 16, 64, 4, 16, 128
    x = helper.make_tensor_value_info("x", F, ["batch", S, D])

    def layernorm(inp):
        if opset >= 17:
            return b.op("LayerNormalization", [inp, b.const("ln_g", (1 + 0.1 * b.rng.standard_normal(D)).astype(np.float32)),
                                               b.const("ln_b", (0.1 * b.rng.standard_normal(D)).astype(np.float32))],
                        axis=-1, epsilon=1e-5)
        raise ValueError("LayerNormalization needs opset 17")

    def linear(inp, din, dout):
        return b.op("Add", [b.op("MatMul", [inp, b.weight("w", [din, dout])]), b.weight("b", [dout], 0.1)])

    if erf_gelu:
        # target shape computed from the input's (symbolic) batch: Shape -> Gather -> Unsqueeze -> Concat
        shp = b.op("Shape", ["x"])
        bat = b.op("Unsqueeze", [b.op("Gather", [shp, b.const("i0", np.array(0, dtype=np.int64))], axis=0),
                                 b.const("ax0", np.array([0], dtype=np.int64))])
        heads_shape = b.op("Concat", [bat, b.const("hs", np.array([S, H, DH], dtype=np.int64))], axis=0)
        merge_shape = b.op("Concat", [bat, b.const("ms", np.array([S, D], dtype=np.int64))], axis=0)
    else:
        heads_shape = b.const("hs", np.array([0, S, H, DH], dtype=np.int64))   # 0: copy the batch dim
        merge_shape = b.const("ms", np.array([-1, S, D], dtype=np.int64))      # -1: inferred (batch)

    h = layernorm("x")
    q, k, v = (linear(h, D, D) for _ in range(3))
    q = b.op("Transpose", [b.op("Reshape", [q, heads_shape])], perm=[0, 2, 1, 3])   # [b,H,S,DH]
    k = b.op("Transpose", [b.op("Reshape", [k, heads_shape])], perm=[0, 2, 3, 1])   # [b,H,DH,S]
    v = b.op("Transpose", [b.op("Reshape", [v, heads_shape])], perm=[0, 2, 1, 3])
    s = b.op("Div", [b.op("MatMul", [q, k]), b.const("sc", np.array(np.sqrt(DH), dtype=np.float32))])
    p = b.op("Softmax", [s], axis=-1)
    a = b.op("Transpose", [b.op("MatMul", [p, v])], perm=[0, 2, 1, 3])            # [b,S,H,DH]
    a = b.op("Reshape", [a, merge_shape])
    h1 = b.op("Add", ["x", linear(a, D, D)])
    f = linear(layernorm(h1), D, FF)
    if erf_gelu:
        # 0.5 * f * (1 + erf(f / sqrt(2)))
        e = b.op("Erf", [b.op("Div", [f, b.const("sq2", np.array(np.sqrt(2.0), dtype=np.float32))])])
        f = b.op("Mul", [b.op("Mul", [f, b.op("Add", [e, b.const("one", np.array(1.0, dtype=np.float32))])]),
                         b.const("half", np.array(0.5, dtype=np.float32))])
    else:
        f = b.op("Gelu", [f])
    y = b.op("Add", [h1, linear(f, FF, D)])
    b.nodes[-1].output[0] = "y"
    yv = helper.make_tensor_value_info("y", F, ["batch", S, D])
    return b.model("transformer", [x], [yv], opset)


def transformer_dyn():
    """A decoder block exported the way transformers does with dynamic batch
    AND sequence axes: int64 input_ids/attention_mask [batch, seq], position
    ids sliced to seq (a symbolic Slice end), token types through the
    Where(Equal(shape, -1)) + Expand idiom, a causal mask from two Ranges
    (LessOrEqual) And the padding mask (Cast to bool), Where-masked scores,
    heads reshaped with targets computed from Shape. d=32, 2 heads, vocab 50."""
    b = Builder(9)
    V, P, D, H, DH = 50, 64, 32, 2, 16
    i64 = lambda *v: np.array(v, dtype=np.int64)
    sc = lambda v: np.array(v, dtype=np.int64).reshape(())
    ids = helper.make_tensor_value_info("input_ids", I64, ["batch", "seq"])
    am = helper.make_tensor_value_info("attention_mask", I64, ["batch", "seq"])
    shp = b.op("Shape", ["input_ids"])
    bat = b.op("Unsqueeze", [b.op("Gather", [shp, b.const("i0", sc(0))], axis=0), b.const("a0", i64(0))])
    seqs = b.op("Gather", [shp, b.const("i1", sc(1))], axis=0)
    seq = b.op("Unsqueeze", [seqs, b.const("a0", i64(0))])
    # position ids: a [1, P] buffer sliced to [1, seq]
    pos = b.op("Slice", [b.const("pos", np.arange(P, dtype=np.int64).reshape(1, P)), b.const("s0", i64(0)), seq,
                         b.const("ax", i64(1)), b.const("st", i64(1))])
    # token types: zeros [1, P] sliced and expanded to [batch, seq] through the HF shape idiom
    tt = b.op("Slice", [b.const("tt", np.zeros((1, P), np.int64)), b.const("s0", i64(0)), seq, b.const("ax", i64(1))])
    tgt = b.op("Concat", [bat, b.const("m1", i64(-1))], axis=0)
    ones = b.op("ConstantOfShape", [b.const("two", i64(2))], value=numpy_helper.from_array(i64(1), "v"))
    eq = b.op("Equal", [tgt, b.op("Mul", [ones, b.const("neg", sc(-1))])])
    tt = b.op("Expand", [tt, b.op("Where", [eq, ones, tgt])])
    h = b.op("Add", [b.op("Add", [b.op("Gather", [b.weight("wte", [V, D], 0.5), "input_ids"]),
                                  b.op("Gather", [b.weight("wpe", [P, D], 0.5), pos])]),
                     b.op("Gather", [b.weight("tte", [2, D], 0.5), tt])])
    x = b.op("LayerNormalization", [h, b.const("g", np.ones(D, np.float32)), b.const("bb", np.zeros(D, np.float32))], axis=-1)

    def linear(inp, din, dout):
        return b.op("Add", [b.op("MatMul", [inp, b.weight("w", [din, dout])]), b.weight("b", [dout], 0.1)])

    heads = b.op("Concat", [bat, seq, b.const("hd", i64(H, DH))], axis=0)
    q = b.op("Transpose", [b.op("Reshape", [linear(x, D, D), heads])], perm=[0, 2, 1, 3])
    k = b.op("Transpose", [b.op("Reshape", [linear(x, D, D), heads])], perm=[0, 2, 3, 1])
    v = b.op("Transpose", [b.op("Reshape", [linear(x, D, D), heads])], perm=[0, 2, 1, 3])
    s = b.op("Div", [b.op("MatMul", [q, k]), b.const("sc", np.array(np.sqrt(DH), np.float32))])   # [b,H,seq,seq]
    # causal mask: col <= row, from Range(0, seq, 1); And the padding mask
    r = b.op("Range", [b.const("z", sc(0)), seqs, b.const("o", sc(1))])
    causal = b.op("LessOrEqual", [b.op("Unsqueeze", [r, b.const("a0", i64(0))]), b.op("Unsqueeze", [r, b.const("a1", i64(1))])])
    pad = b.op("Cast", [b.op("Unsqueeze", ["attention_mask", b.const("a12", i64(1, 2))])], to=TensorProto.BOOL)
    mask = b.op("And", [causal, pad])                                                                 # [b,1,seq,seq]
    s = b.op("Where", [mask, s, b.const("ninf", np.array(-1e4, np.float32))])
    a = b.op("Transpose", [b.op("MatMul", [b.op("Softmax", [s], axis=-1), v])], perm=[0, 2, 1, 3])
    a = b.op("Reshape", [a, b.op("Concat", [bat, seq, b.const("dd", i64(D))], axis=0)])
    y = b.op("Add", [h, linear(a, D, D)])
    # a Mod and a Not on the way out: rows of odd position get the residual only
    odd = b.op("Not", [b.op("Equal", [b.op("Mod", [pos, b.const("two_s", sc(2))]), b.const("zs", sc(0))])])
    y = b.op("Where", [b.op("Unsqueeze", [odd, b.const("a2", i64(2))]), h, y])
    b.nodes[-1].output[0] = "y"
    yv = helper.make_tensor_value_info("y", F, ["batch", "seq", D])
    return b.model("transformer_dyn", [ids, am], [yv], 17)


def transformer_flat():
    """Shape logic whose dims are PRODUCTS of the symbols, as GPT-2, BERT and
    ViT exports write it (dynamic batch and seq): a Flatten of the hidden
    states to [batch*seq, D] for a Gemm (GPT-2's Conv1D), a Reshape(-1, D)
    inferring batch*seq, heads folded into the batch as [batch*H, seq, DH]
    through Mul(Gather(Shape), H) (ViT's attention), batched MatMuls over
    batch*H, a Reshape back inferring its -1 by division, and a Flatten of the
    mask at axis 2 ([batch*seq, 1]) gathered back by computed row indices
    (DistilBERT). d=24, 3 heads, vocab 40."""
    b = Builder(11)
    V, D, H, DH = 40, 24, 3, 8
    i64 = lambda *v: np.array(v, dtype=np.int64)
    sc = lambda v: np.array(v, dtype=np.int64).reshape(())
    ids = helper.make_tensor_value_info("input_ids", I64, ["batch", "seq"])
    am = helper.make_tensor_value_info("attention_mask", I64, ["batch", "seq"])
    shp = b.op("Shape", ["input_ids"])
    bat_s = b.op("Gather", [shp, b.const("i0", sc(0))], axis=0)
    seq_s = b.op("Gather", [shp, b.const("i1", sc(1))], axis=0)
    bat = b.op("Unsqueeze", [bat_s, b.const("a0", i64(0))])
    seq = b.op("Unsqueeze", [seq_s, b.const("a0", i64(0))])
    h = b.op("Gather", [b.weight("wte", [V, D], 0.5), "input_ids"])                              # [b, s, D]
    flat = b.op("Flatten", [h], axis=2)                                                             # [b*s, D]
    qkv = b.op("Gemm", [flat, b.weight("wqkv", [D, 3 * D]), b.weight("bqkv", [3 * D], 0.1)])        # [b*s, 3D]
    qkv = b.op("Reshape", [qkv, b.op("Concat", [bat, seq, b.const("d3", i64(3 * D))], axis=0)])   # [b, s, 3D]
    q, k, v = b.op("Split", [qkv, b.const("sp", i64(D, D, D))], 3, axis=2)
    bh = b.op("Unsqueeze", [b.op("Mul", [bat_s, b.const("nh", sc(H))]), b.const("a0", i64(0))])  # batch*H

    def heads(x):  # [b, s, D] -> [b*H, s, DH]
        x = b.op("Transpose", [b.op("Reshape", [x, b.op("Concat", [bat, seq, b.const("hd", i64(H, DH))], axis=0)])],
                 perm=[0, 2, 1, 3])
        return b.op("Reshape", [x, b.op("Concat", [bh, seq, b.const("dh", i64(DH))], axis=0)])
    q, k, v = heads(q), heads(k), heads(v)
    s = b.op("Div", [b.op("MatMul", [q, b.op("Transpose", [k], perm=[0, 2, 1])]), b.const("sq", np.array(np.sqrt(DH), np.float32))])
    a = b.op("MatMul", [b.op("Softmax", [s], axis=-1), v])                                       # [b*H, s, DH]
    a = b.op("Reshape", [a, b.op("Concat", [b.const("m1", i64(-1)), b.const("h_", i64(H)), seq, b.const("dh", i64(DH))], axis=0)])
    a = b.op("Transpose", [a], perm=[0, 2, 1, 3])                                                 # [b, s, H, DH]
    a = b.op("Reshape", [a, b.const("m1d", i64(-1, D))])                                           # [b*s, D]
    mask = b.op("Flatten", [b.op("Cast", ["attention_mask"], to=TensorProto.FLOAT)], axis=2)       # [b*s, 1]
    # DistilBERT's mask gather: rows batch_i * seq + pos of the flattened mask
    rows = b.op("Add", [b.op("Mul", [b.op("Unsqueeze", [b.op("Range", [b.const("z", sc(0)), bat_s, b.const("o", sc(1))]),
                                                         b.const("a1", i64(1))]), seq_s]),
                        b.op("Unsqueeze", [b.op("Range", [b.const("z", sc(0)), seq_s, b.const("o", sc(1))]), b.const("a0", i64(0))])])
    mask = b.op("Reshape", [b.op("Gather", [mask, rows], axis=0), b.const("m11", i64(-1, 1))])    # [b*s, 1]
    y = b.op("Add", [flat, b.op("Mul", [b.op("MatMul", [a, b.weight("wo", [D, D])]), mask])])
    y = b.op("Reshape", [y, b.op("Concat", [bat, b.const("m1", i64(-1)), b.const("dd", i64(D))], axis=0)])
    b.nodes[-1].output[0] = "y"
    yv = helper.make_tensor_value_info("y", F, ["batch", "seq", D])
    return b.model("transformer_flat", [ids, am], [yv], 17)


# ---- one model per op and opset form ---------------------------------------------------------
def op_models():
    """(file stem, opset, builder) for every TG_OP_LIST op and opset form."""
    rng = np.random.default_rng(4)
    f32 = lambda *s: (rng.standard_normal(s) * 0.5).astype(np.float32)
    i64 = lambda *v: np.array(v, dtype=np.int64)
    M = []

    def add(stem, opset, op_type, ins, outs=("y",), attrs=None, oty=F, domain=""):
        """ins: list of ('name', shape) for graph inputs, ('name', ndarray) for constants, or '' (omitted)."""
        node = helper.make_node(op_type, [n if n else "" for n, _ in ins], list(outs), name=stem, domain=domain,
                                **(attrs or {}))
        gin, inits = [], []
        for n, v in ins:
            if not n:
                continue
            if isinstance(v, np.ndarray):
                inits.append(numpy_helper.from_array(v, n))
            elif isinstance(v, tuple):  # (shape, element type)
                gin.append(helper.make_tensor_value_info(n, v[1], v[0]))
            else:
                gin.append(helper.make_tensor_value_info(n, F, v))
        gout = [helper.make_tensor_value_info(o, oty[k] if isinstance(oty, tuple) else oty, None)
                for k, o in enumerate(outs) if o]
        g = helper.make_graph([node], stem, gin, gout, inits)
        imports = [helper.make_opsetid("", opset)] + ([helper.make_opsetid(domain, 1)] if domain else [])
        m = helper.make_model(g, opset_imports=imports, producer_name="tessel-gen")
        m.ir_version = 8 if opset <= 18 else 9 if opset <= 21 else helper.find_min_ir_version_for([m.opset_import[0]])
        M.append((f"{stem}_op{opset}", opset, m))

    X = ("x", [2, 3, 8, 8])
    add("conv", 13, "Conv", [X, ("w", f32(4, 3, 3, 3)), ("b", f32(4))], attrs=dict(pads=[1, 1, 1, 1], strides=[2, 2]))
    add("conv_same", 18, "Conv", [X, ("w", f32(6, 1, 3, 3))], attrs=dict(auto_pad="SAME_UPPER", group=3, strides=[2, 2]))
    add("convtranspose", 13, "ConvTranspose", [X, ("w", f32(3, 2, 3, 3)), ("b", f32(2))], attrs=dict(strides=[2, 2], pads=[1, 1, 1, 1], output_padding=[1, 1]))
    add("convtranspose_oshape", 17, "ConvTranspose", [X, ("w", f32(3, 4, 2, 2))], attrs=dict(strides=[2, 2], output_shape=[16, 16]))
    add("convtranspose_odd", 17, "ConvTranspose", [X, ("w", f32(3, 2, 3, 3))], attrs=dict(strides=[2, 2], output_shape=[16, 16]))
    add("gemm", 13, "Gemm", [("a", [5, 7]), ("b", f32(4, 7)), ("c", f32(4))], attrs=dict(transB=1, alpha=0.5, beta=2.0))
    add("gemm_ta", 21, "Gemm", [("a", [7, 5]), ("b", f32(7, 3))], attrs=dict(transA=1))
    add("matmul", 13, "MatMul", [("a", [2, 1, 5, 7]), ("b", f32(3, 7, 4))])
    add("matmul_vec", 21, "MatMul", [("a", [7]), ("b", f32(7, 4))])
    for op in ["Add", "Sub", "Mul", "Div", "Pow"]:
        add(op.lower(), 13, op, [("a", [2, 3, 4]), ("b", np.abs(f32(3, 1)) + 0.5)])
    add("add_bcast", 21, "Add", [("a", [3, 1, 5]), ("b", [4, 1])])
    for op in ["Relu", "Sigmoid", "Tanh", "Erf", "Identity"]:
        add(op.lower(), 13, op, [("x", [2, 3, 5])])
    add("sqrt", 13, "Sqrt", [("x", [2, 3, 5])])
    add("leakyrelu", 16, "LeakyRelu", [("x", [2, 3, 5])], attrs=dict(alpha=0.2))
    add("gelu", 20, "Gelu", [("x", [2, 3, 5])], attrs=dict(approximate="tanh"))
    add("clip", 13, "Clip", [("x", [2, 3, 5]), ("lo", np.array(-0.5, np.float32)), ("hi", np.array(0.5, np.float32))])
    add("clip_max", 21, "Clip", [("x", [2, 3, 5]), ("", None), ("hi", np.array(6.0, np.float32))])
    add("softmax", 13, "Softmax", [("x", [2, 3, 5])], attrs=dict(axis=1))
    add("layernorm", 17, "LayerNormalization", [("x", [2, 3, 8]), ("s", f32(8)), ("b", f32(8))], attrs=dict(axis=-1, epsilon=1e-3))
    add("layernorm_stats", 17, "LayerNormalization", [("x", [2, 3, 5]), ("s", f32(3, 5))], outs=("y", "mean", "istd"),
        attrs=dict(axis=1))
    add("batchnorm", 15, "BatchNormalization", [X, ("s", f32(3)), ("b", f32(3)), ("m", f32(3)), ("v", np.abs(f32(3)) + 0.5)])
    add("maxpool", 13, "MaxPool", [X], attrs=dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]))
    add("maxpool_ceil", 18, "MaxPool", [("x", [1, 2, 7, 7])], attrs=dict(kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1))
    add("maxpool_ceil_pad", 13, "MaxPool", [("x", [1, 2, 5, 5])], attrs=dict(kernel_shape=[2, 2], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1))
    add("averagepool", 13, "AveragePool", [X], attrs=dict(kernel_shape=[2, 2], strides=[2, 2]))
    add("averagepool_pad", 19, "AveragePool", [X], attrs=dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=1, dilations=[1, 1]))
    add("globalaveragepool", 13, "GlobalAveragePool", [X])
    add("flatten", 13, "Flatten", [X], attrs=dict(axis=2))
    add("reshape", 13, "Reshape", [X, ("s", i64(0, -1, 16))])
    add("reshape_allowzero", 14, "Reshape", [X, ("s", i64(6, 64))], attrs=dict(allowzero=1))
    add("transpose", 13, "Transpose", [X], attrs=dict(perm=[0, 2, 3, 1]))
    add("transpose_default", 21, "Transpose", [("x", [2, 3, 4])])
    add("concat", 13, "Concat", [("a", [2, 3]), ("b", [2, 5]), ("c", f32(2, 1))], attrs=dict(axis=-1))
    add("split", 13, "Split", [("x", [6, 4]), ("s", i64(1, 2, 3))], outs=("y0", "y1", "y2"))
    add("split_even", 13, "Split", [("x", [6, 4])], outs=("y0", "y1"), attrs=dict(axis=1))
    add("split_num", 18, "Split", [("x", [7, 4])], outs=("y0", "y1", "y2"), attrs=dict(num_outputs=3))
    add("slice", 13, "Slice", [("x", [10, 8]), ("s", i64(1, -6)), ("e", i64(9, 1000)), ("a", i64(0, 1)), ("st", i64(3, 2))])
    add("slice_neg", 21, "Slice", [("x", [10, 8]), ("s", i64(-1)), ("e", i64(-100)), ("a", i64(0)), ("st", i64(-2))])
    add("gather", 13, "Gather", [("x", [5, 4, 3]), ("i", i64(4, 0, 2, 2).reshape(2, 2))], attrs=dict(axis=0))
    add("gather_axis", 21, "Gather", [("x", [5, 4, 3]), ("i", np.array(-1, dtype=np.int64))], attrs=dict(axis=2))
    add("pad", 13, "Pad", [X, ("p", i64(0, 0, 1, 2, 0, 0, 3, 4)), ("v", np.array(1.5, np.float32))])
    add("pad_reflect", 13, "Pad", [X, ("p", i64(0, 0, 1, 1, 0, 0, 1, 1))], attrs=dict(mode="reflect"))
    add("pad_axes", 18, "Pad", [X, ("p", i64(2, 1, 2, 1)), ("", None), ("a", i64(-1, 2))], attrs=dict(mode="edge"))
    add("reducemean", 13, "ReduceMean", [X], attrs=dict(axes=[2, 3], keepdims=1))
    add("reducemean", 18, "ReduceMean", [X, ("a", i64(-1))], attrs=dict(keepdims=0))
    add("reducesum", 13, "ReduceSum", [X, ("a", i64(1))])
    add("reducesum_all", 13, "ReduceSum", [X], attrs=dict(keepdims=0))
    add("sqrt_abs", 21, "Sqrt", [("x", [3])])
    add("cast", 13, "Cast", [("x", [2, 3])], attrs=dict(to=int(TensorProto.INT32)), oty=TensorProto.INT32)
    add("cast", 19, "Cast", [("x", [2, 3])], attrs=dict(to=int(TensorProto.DOUBLE), saturate=1), oty=TensorProto.DOUBLE)
    add("squeeze", 13, "Squeeze", [("x", [1, 3, 1, 5]), ("a", i64(0, -2))])
    add("squeeze_all", 21, "Squeeze", [("x", [1, 3, 1, 5])])
    add("unsqueeze", 13, "Unsqueeze", [("x", [3, 5]), ("a", i64(0, -1))])
    add("shape", 13, "Shape", [X], oty=I64)
    add("shape_slice", 15, "Shape", [X], attrs=dict(start=1, end=-1), oty=I64)
    # Constant feeding an Add (a Constant alone would leave no node)
    b = helper.make_node("Constant", [], ["c"], name="const", value=numpy_helper.from_array(f32(2, 3), "cv"))
    a = helper.make_node("Add", ["x", "c"], ["y"], name="add")
    g = helper.make_graph([b, a], "constant", [helper.make_tensor_value_info("x", F, [2, 3])],
                          [helper.make_tensor_value_info("y", F, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], producer_name="tessel-gen")
    m.ir_version = 8
    M.append(("constant_op13", 13, m))
    # a reshape target computed with shape arithmetic: [d0, d1, d2 / 2, 2]
    nodes = [helper.make_node("Shape", ["x"], ["s"], name="shape"),
             helper.make_node("Gather", ["s", "i01"], ["d01"], name="g01", axis=0),
             helper.make_node("Gather", ["s", "i2"], ["d2"], name="g2", axis=0),
             helper.make_node("Div", ["d2", "two"], ["h"], name="div"),
             helper.make_node("Concat", ["d01", "h", "two"], ["t"], name="cat", axis=0),
             helper.make_node("Reshape", ["x", "t"], ["y"], name="reshape")]
    inits = [numpy_helper.from_array(i64(0, 1), "i01"), numpy_helper.from_array(i64(2), "i2"),
             numpy_helper.from_array(i64(2), "two")]
    g = helper.make_graph(nodes, "reshape_arith", [helper.make_tensor_value_info("x", F, [2, 3, 8])],
                          [helper.make_tensor_value_info("y", F, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="tessel-gen")
    m.ir_version = 8
    M.append(("reshape_arith_op17", 17, m))
    b = helper.make_node("Constant", [], ["c"], name="const", value_floats=[1.0, 2.0, 3.0])
    a = helper.make_node("Mul", ["x", "c"], ["y"], name="mul")
    g = helper.make_graph([b, a], "constant_floats", [helper.make_tensor_value_info("x", F, [2, 3])],
                          [helper.make_tensor_value_info("y", F, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)], producer_name="tessel-gen")
    m.ir_version = 9
    M.append(("constant_floats_op21", 21, m))
    add("shrink", 9, "Shrink", [("x", [2, 3, 5])], attrs=dict(lambd=0.3, bias=0.1))
    add("shrink_default", 9, "Shrink", [("x", [4, 7])])
    # onnxruntime's com.microsoft QOperator ops (op_msquant.c): exact against onnxruntime (weights
    # within 7 bits, as its quantizer's reduce_range: its AVX2 u8 x s8 product saturates past them)
    U8 = TensorProto.UINT8
    u8 = lambda v: np.array(v, np.uint8)
    sc = lambda v: np.array(v, np.float32)
    qx, qx2 = ("x", ([2, 3, 5, 5], U8)), ("x2", ([2, 3, 5, 5], U8))
    qa = [("s1", sc(0.02)), ("z1", u8(100))]
    qb = [("s2", sc(0.05)), ("z2", u8(30))]
    MS = "com.microsoft"
    for op, ys in (("QLinearAdd", 0.07), ("QLinearMul", 0.3)):
        add(op.lower(), 17, op, [qx] + qa + [qx2] + qb + [("s3", sc(ys)), ("z3", u8(128))], oty=U8, domain=MS)
    add("qlinearsigmoid", 17, "QLinearSigmoid", [qx, ("s1", sc(0.05)), ("z1", u8(100)), ("s3", sc(1 / 256)), ("z3", u8(0))],
        oty=U8, domain=MS)
    add("qlinearleakyrelu", 17, "QLinearLeakyRelu", [qx, ("s1", sc(0.05)), ("z1", u8(100)), ("s3", sc(0.04)), ("z3", u8(20))],
        attrs=dict(alpha=0.1), oty=U8, domain=MS)
    add("qlinearglobalaveragepool", 17, "QLinearGlobalAveragePool", [qx] + qa + [("s3", sc(0.013)), ("z3", u8(128))],
        oty=U8, domain=MS)
    add("qlinearglobalaveragepool_nhwc", 17, "QLinearGlobalAveragePool", [qx] + qa + [("s3", sc(0.013)), ("z3", u8(128))],
        attrs=dict(channels_last=1), oty=U8, domain=MS)
    add("qlinearaveragepool", 17, "QLinearAveragePool", [qx] + qa + [("s3", sc(0.013)), ("z3", u8(128))],
        attrs=dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]), oty=U8, domain=MS)
    add("qlinearconcat", 17, "QLinearConcat", [("s3", sc(0.04)), ("z3", u8(128)), qx] + qa + [qx2] + qb,
        attrs=dict(axis=1), oty=U8, domain=MS)
    qw = lambda *s: rng.integers(-64, 64, s).astype(np.int8)
    add("qgemm", 17, "QGemm", [("a", ([4, 7], U8))] + qa + [("w", qw(5, 7)), ("ws", sc([0.01, 0.02, 0.015, 0.03, 0.005])),
        ("wz", np.zeros(5, np.int8)), ("c", rng.integers(-500, 500, 5).astype(np.int32)), ("s3", sc(0.05)), ("z3", u8(120))],
        attrs=dict(transB=1), oty=U8, domain=MS)
    add("qgemm_float", 17, "QGemm", [("a", ([4, 7], U8))] + qa + [("w", qw(7, 5)), ("ws", sc(0.01)), ("wz", np.array(0, np.int8)),
        ("c", rng.integers(-500, 500, 5).astype(np.int32))], attrs=dict(alpha=0.5), domain=MS)
    # onnxruntime's transformer optimizer's com.microsoft ops (op_mscontrib.c)
    add("ms_gelu", 17, "Gelu", [("x", [2, 3, 5])], domain=MS)
    add("biasgelu", 17, "BiasGelu", [("x", [2, 3, 8]), ("b", f32(8))], domain=MS)
    add("fastgelu", 17, "FastGelu", [("x", [2, 3, 8]), ("b", f32(8))], domain=MS)
    add("quickgelu", 17, "QuickGelu", [("x", [2, 3, 8])], attrs=dict(alpha=1.5), domain=MS)
    add("fusedmatmul", 17, "FusedMatMul", [("a", [2, 7, 5]), ("b", f32(4, 7))], attrs=dict(alpha=0.5, transA=1, transB=1),
        domain=MS)
    add("skiplayernormalization", 17, "SkipLayerNormalization", [("x", [2, 5, 8]), ("s", [2, 5, 8]), ("g", f32(8)),
        ("be", f32(8)), ("bi", f32(8))], outs=("y", "", "", "sum"), attrs=dict(epsilon=1e-5), domain=MS)
    add("skipsimplifiedlayernormalization", 17, "SkipSimplifiedLayerNormalization", [("x", [2, 5, 8]), ("s", [2, 5, 8]),
        ("g", f32(8))], attrs=dict(epsilon=1e-6), domain=MS)
    I32 = lambda *v: np.array(v, np.int32)
    add("embedlayernormalization", 17, "EmbedLayerNormalization", [("ids", I32([3, 0, 9, 4, 4], [1, 2, 3, 8, 7])),
        ("seg", I32([0, 0, 1, 1, 1], [0, 1, 1, 0, 0])), ("we", f32(10, 8)), ("pe", f32(6, 8)), ("se", f32(2, 8)),
        ("g", [8]), ("be", f32(8)), ("m", I32([1, 1, 1, 0, 0], [1, 1, 1, 1, 1]))], outs=("y", "mi", "es"),
        oty=(F, TensorProto.INT32, F), attrs=dict(epsilon=1e-5), domain=MS)
    add("ms_attention", 17, "Attention", [("x", [2, 5, 8]), ("w", f32(8, 24)), ("b", f32(24)), ("mi", I32(3, 5))],
        attrs=dict(num_heads=2), domain=MS)
    add("ms_attention_causal", 17, "Attention", [("x", [2, 5, 8]), ("w", f32(8, 24)), ("b", f32(24)),
        ("mi", I32([1, 1, 1, 0, 0], [1, 1, 1, 1, 1]))], attrs=dict(num_heads=4, unidirectional=1), domain=MS)
    add("simplifiedlayernormalization", 17, "SimplifiedLayerNormalization", [("x", [2, 5, 8]), ("g", f32(8))],
        attrs=dict(epsilon=1e-6))
    add("maxpool_u8", 17, "MaxPool", [qx], attrs=dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]), oty=U8)
    add("isnan", 13, "IsNaN", [("x", [2, 3, 5])], oty=TensorProto.BOOL)
    ang = rng.uniform(0, 6.3, (11, 4)).astype(np.float32)  # 11 positions, rotary_dim / 2 = 4
    add("rotaryembedding", 23, "RotaryEmbedding", [("x", [2, 3, 5, 8]), ("cos", np.cos(ang)), ("sin", np.sin(ang)),
        ("pos", rng.integers(0, 11, (2, 5)).astype(np.int64))])
    add("rotaryembedding_3d", 23, "RotaryEmbedding", [("x", [2, 5, 24]), ("cos", np.cos(ang)), ("sin", np.sin(ang)),
        ("pos", rng.integers(0, 11, (2, 5)).astype(np.int64))], attrs=dict(num_heads=2, interleaved=1, rotary_embedding_dim=8))
    add("isinf", 10, "IsInf", [("x", [2, 3, 5])], attrs=dict(detect_positive=0), oty=TensorProto.BOOL)
    add("attention", 23, "Attention", [("q", [2, 3, 4, 8]), ("k", [2, 3, 6, 8]), ("v", [2, 3, 6, 5])], attrs=dict(is_causal=1))
    add("attention_3d", 23, "Attention", [("q", [2, 4, 12]), ("k", [2, 6, 6]), ("v", [2, 6, 10])],
        outs=("y", "pk", "pv", "qk"), attrs=dict(q_num_heads=4, kv_num_heads=2, qk_matmul_output_mode=2))
    add("rmsnorm", 23, "RMSNormalization", [("x", [2, 3, 5]), ("s", f32(5))], attrs=dict(epsilon=1e-4))
    add("rmsnorm_axis", 23, "RMSNormalization", [("x", [2, 3, 5]), ("s", f32(3, 1))], attrs=dict(axis=1))
    # -- legacy opsets (7-12) and the ops of op_legacy.c: LRN, Dropout, Sum/Mean/Max/Min --
    add("softmax_coerce", 11, "Softmax", [("x", [2, 3, 5])], attrs=dict(axis=1))  # over 3*5, not 3
    add("softmax_default", 9, "Softmax", [("x", [2, 3, 4])])  # axis 1 by default before 13
    add("clip_attrs", 9, "Clip", [("x", [2, 3, 5])], attrs=dict(min=-0.3, max=0.4))
    add("clip_attrs_max", 7, "Clip", [("x", [2, 3, 5])], attrs=dict(max=0.2))
    add("slice_attrs", 9, "Slice", [("x", [10, 8])], attrs=dict(starts=[1, -6], ends=[9, 1000], axes=[0, 1]))
    add("slice_attrs_noaxes", 7, "Slice", [("x", [5, 7])], attrs=dict(starts=[1, 2], ends=[-1, 6]))
    add("pad_attrs", 9, "Pad", [X], attrs=dict(pads=[0, 0, 1, 2, 0, 0, 3, 4], value=1.5))
    add("pad_attrs_edge", 10, "Pad", [X], attrs=dict(pads=[0, 0, 1, 1, 0, 0, 2, 1], mode="edge"))
    add("split_attr", 11, "Split", [("x", [6, 5])], outs=("y0", "y1", "y2"), attrs=dict(axis=0, split=[1, 2, 3]))
    add("split_attr_even", 9, "Split", [("x", [4, 6])], outs=("y0", "y1"), attrs=dict(axis=1))
    add("squeeze_attr", 11, "Squeeze", [("x", [1, 3, 1, 5])], attrs=dict(axes=[0, -2]))
    add("unsqueeze_attr", 11, "Unsqueeze", [("x", [3, 5])], attrs=dict(axes=[0, -1]))
    add("unsqueeze_attr", 9, "Unsqueeze", [("x", [3, 5])], attrs=dict(axes=[0, 3]))
    add("reducesum_attr", 11, "ReduceSum", [X], attrs=dict(axes=[1, -1], keepdims=0))
    add("reducemean_attr", 9, "ReduceMean", [X], attrs=dict(axes=[2]))
    add("batchnorm_spatial", 7, "BatchNormalization", [X, ("s", f32(3)), ("b", f32(3)), ("m", f32(3)), ("v", np.abs(f32(3)) + 0.5)], attrs=dict(spatial=1, epsilon=1e-3))
    add("batchnorm", 9, "BatchNormalization", [X, ("s", f32(3)), ("b", f32(3)), ("m", f32(3)), ("v", np.abs(f32(3)) + 0.5)])
    add("gemm_bcast", 9, "Gemm", [("a", [5, 7]), ("b", f32(4, 7)), ("c", f32(4))], attrs=dict(transB=1, beta=0.5))
    add("gemm_bcast", 7, "Gemm", [("a", [7, 5]), ("b", f32(7, 3)), ("c", f32(1, 3))], attrs=dict(transA=1, alpha=2.0))
    add("maxpool_storage", 8, "MaxPool", [("x", [1, 2, 7, 7])], attrs=dict(kernel_shape=[3, 3], strides=[2, 2], storage_order=0))
    add("maxpool_ceil", 10, "MaxPool", [("x", [1, 2, 7, 7])], attrs=dict(kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1))
    add("averagepool_incl", 7, "AveragePool", [X], attrs=dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=1))
    add("averagepool_ceil", 10, "AveragePool", [("x", [1, 2, 7, 7])], attrs=dict(kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1))
    add("concat", 7, "Concat", [("a", [2, 3]), ("b", [2, 5])], attrs=dict(axis=1))
    add("flatten", 9, "Flatten", [X], attrs=dict(axis=1))
    add("gather", 9, "Gather", [("x", [5, 4, 3]), ("i", i64(2, 0, -1))], attrs=dict(axis=-1))
    add("cast", 9, "Cast", [("x", [2, 3])], attrs=dict(to=int(TensorProto.INT32)), oty=TensorProto.INT32)
    add("add_bcast", 7, "Add", [("a", [3, 1, 5]), ("b", [4, 1])])
    add("mul_bcast", 7, "Mul", [("a", [2, 3, 4]), ("b", f32(4))])
    add("reshape", 7, "Reshape", [X, ("s", i64(2, -1))])
    add("conv_nobias", 7, "Conv", [X, ("w", f32(4, 3, 3, 3))], attrs=dict(pads=[1, 1, 1, 1]))
    add("lrn", 9, "LRN", [("x", [2, 7, 5, 5])], attrs=dict(size=5, alpha=1e-2, beta=0.75, bias=2.0))
    add("lrn_default", 13, "LRN", [("x", [1, 5, 3, 4])], attrs=dict(size=3))  # onnxruntime takes odd sizes only
    add("dropout", 7, "Dropout", [("x", [2, 3, 5])], attrs=dict(ratio=0.3))
    # a mask output nothing reads
    d = helper.make_node("Dropout", ["x"], ["y", "mask"], name="dropout_mask", ratio=0.5)
    g = helper.make_graph([d], "dropout_mask", [helper.make_tensor_value_info("x", F, [2, 3, 5])],
                          [helper.make_tensor_value_info("y", F, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 10)], producer_name="tessel-gen")
    m.ir_version = 8
    M.append(("dropout_mask_op10", 10, m))
    add("dropout", 12, "Dropout", [("x", [2, 3, 5]), ("r", np.array(0.2, np.float32))])
    add("dropout", 13, "Dropout", [("x", [2, 3, 5]), ("r", np.array(0.2, np.float32)), ("t", np.array(False))])
    add("sum", 8, "Sum", [("a", [2, 3, 4]), ("b", f32(3, 1)), ("c", [4])])
    add("sum_one", 9, "Sum", [("a", [2, 3])])
    add("mean", 9, "Mean", [("a", [2, 3, 4]), ("b", f32(4)), ("c", [2, 1, 1])])
    add("max", 12, "Max", [("a", [2, 3, 4]), ("b", f32(3, 1)), ("c", [4]), ("d", [1, 3, 1])])
    add("min", 13, "Min", [("a", [3, 5]), ("b", [5])])
    add("min", 8, "Min", [("a", [3, 5]), ("b", f32(3, 1))])
    # ops whose opsets 22-28 changed only the types
    add("relu", 22, "Relu", [("x", [2, 3, 5])])
    add("conv", 22, "Conv", [X, ("w", f32(4, 3, 3, 3)), ("b", f32(4))], attrs=dict(pads=[1, 1, 1, 1], strides=[2, 2]))
    add("reshape", 24, "Reshape", [X, ("s", i64(0, -1))])
    add("averagepool", 22, "AveragePool", [X], attrs=dict(kernel_shape=[2, 2], strides=[2, 2]))
    add("cast_round", 25, "Cast", [("x", [2, 3])], attrs=dict(to=int(TensorProto.DOUBLE), round_mode="up"), oty=TensorProto.DOUBLE)
    add("dropout", 22, "Dropout", [("x", [2, 3, 5])])
    # -- unary maths, activations, reductions, normalisations (mathops) --
    XU = ("x", [2, 3, 7])
    for op in ["Exp", "Log", "Neg", "Abs", "Reciprocal", "Floor", "Ceil", "Round", "Sign", "Sin", "Cos", "Softplus",
               "Softsign", "Elu", "Selu", "HardSigmoid"]:
        add(op.lower(), 13, op, [XU])
    add("elu_alpha", 21, "Elu", [XU], attrs=dict(alpha=0.7))
    add("selu_attrs", 21, "Selu", [XU], attrs=dict(alpha=1.3, gamma=0.9))
    add("celu", 13, "Celu", [XU], attrs=dict(alpha=0.6))
    add("hardsigmoid_attrs", 21, "HardSigmoid", [XU], attrs=dict(alpha=0.9, beta=0.3))
    add("hardswish", 14, "HardSwish", [XU])
    add("mish", 18, "Mish", [XU])
    add("prelu", 13, "PRelu", [("x", [2, 5, 3, 3]), ("s", f32(5, 1, 1))])
    add("prelu_scalar", 16, "PRelu", [XU, ("s", f32(1))])
    add("logsoftmax", 13, "LogSoftmax", [XU])
    add("logsoftmax_axis", 13, "LogSoftmax", [XU], attrs=dict(axis=1))
    X5 = ("x", [2, 5, 3, 7])
    for op in ["ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSumExp", "ReduceSumSquare"]:
        add(op.lower(), 13, op, [X5], attrs=dict(axes=[1, 3], keepdims=1))
        add(op.lower() + "_all", 13, op, [X5], attrs=dict(keepdims=0))
        add(op.lower(), 18, op, [X5, ("a", i64(-1, 1))], attrs=dict(keepdims=0))
    add("argmax", 13, "ArgMax", [X5], attrs=dict(axis=1), oty=I64)
    add("argmax_last", 13, "ArgMax", [("x", np.array([[1, 3, 3, 2], [5, 5, 5, 1], [0, 1, 2, 3]], np.float32))],
        attrs=dict(axis=1, keepdims=0, select_last_index=1), oty=I64)
    add("argmin", 13, "ArgMin", [X5], attrs=dict(axis=-1, keepdims=0), oty=I64)
    add("argmin_first", 13, "ArgMin", [("x", np.array([[1, 0, 0, 2], [5, 5, 5, 1], [0, 1, 0, 3]], np.float32))],
        attrs=dict(axis=0), oty=I64)
    add("globalmaxpool", 13, "GlobalMaxPool", [X5])
    add("lpnormalization", 13, "LpNormalization", [X5], attrs=dict(axis=1))
    add("lpnormalization_l1", 13, "LpNormalization", [X5], attrs=dict(p=1))
    add("instancenormalization", 13, "InstanceNormalization", [X5, ("s", f32(5)), ("b", f32(5))], attrs=dict(epsilon=1e-3))
    X6 = ("x", [2, 6, 5, 3])
    add("groupnormalization", 18, "GroupNormalization", [X6, ("s", f32(3)), ("b", f32(3))], attrs=dict(num_groups=3))
    add("groupnormalization", 21, "GroupNormalization", [X6, ("s", f32(6)), ("b", f32(6))],
        attrs=dict(num_groups=2, epsilon=1e-3))
    add("meanvariancenormalization", 13, "MeanVarianceNormalization", [X5])
    add("meanvariancenormalization_axes", 13, "MeanVarianceNormalization", [X5], attrs=dict(axes=[1, 2, 3]))
    # older and newer opset forms (22+ changed only the types)
    add("logsoftmax_coerce", 11, "LogSoftmax", [("x", [2, 3, 5, 7])])  # axis 1 by default, over 3*5*7
    add("logsoftmax_coerce", 9, "LogSoftmax", [("x", [2, 3, 5, 7])], attrs=dict(axis=2))
    add("reducemax_attr", 11, "ReduceMax", [X5], attrs=dict(axes=[-1, 1], keepdims=0))
    add("reducel2_all", 7, "ReduceL2", [X5])
    add("reducelogsumexp_attr", 12, "ReduceLogSumExp", [X5], attrs=dict(axes=[2]))
    add("argmax", 7, "ArgMax", [X5], attrs=dict(axis=2), oty=I64)
    add("argmin_last", 12, "ArgMin", [X5], attrs=dict(axis=-1, select_last_index=1, keepdims=0), oty=I64)
    add("prelu", 7, "PRelu", [("x", [2, 5, 3, 3]), ("s", f32(5, 1, 1))])
    add("hardsigmoid", 7, "HardSigmoid", [XU], attrs=dict(alpha=0.3))
    add("sign", 9, "Sign", [XU])
    add("round", 11, "Round", [XU])
    add("sin", 7, "Sin", [XU])
    add("meanvariancenormalization", 9, "MeanVarianceNormalization", [X5])
    add("instancenormalization", 7, "InstanceNormalization", [X5, ("s", f32(5)), ("b", f32(5))])
    add("elu", 22, "Elu", [XU])
    add("mish", 22, "Mish", [XU])
    add("globalmaxpool", 22, "GlobalMaxPool", [X5])
    add("reducemax", 20, "ReduceMax", [X5, ("a", i64(1))])
    # Round of exact halves (half to even) then a use of x, so the model has an input
    nodes = [helper.make_node("Round", ["c"], ["r"], name="round"), helper.make_node("Add", ["r", "x"], ["y"], name="add")]
    c = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, -3.49], np.float32)
    g = helper.make_graph(nodes, "round_halves", [helper.make_tensor_value_info("x", F, [8])],
                          [helper.make_tensor_value_info("y", F, None)], [numpy_helper.from_array(c, "c")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], producer_name="tessel-gen")
    m.ir_version = 8
    M.append(("round_halves_op13", 13, m))
    M.extend(logic_op_models())
    M.extend(ops2_models())
    # -- data movement (op_data.c) --
    add("gatherelements", 13, "GatherElements", [("x", [3, 5, 4]), ("i", rng.integers(-5, 5, (3, 2, 4)).astype(np.int64))], attrs=dict(axis=1))
    add("gatherelements_last", 13, "GatherElements", [("x", [3, 7]), ("i", rng.integers(-7, 7, (2, 7)).astype(np.int32))], attrs=dict(axis=-1))
    add("tile", 13, "Tile", [("x", [2, 3, 5]), ("r", i64(3, 1, 2))])
    add("depthtospace", 13, "DepthToSpace", [("x", [2, 12, 3, 5])], attrs=dict(blocksize=2))
    add("depthtospace_crd", 13, "DepthToSpace", [("x", [1, 18, 2, 3])], attrs=dict(blocksize=3, mode="CRD"))
    add("spacetodepth", 13, "SpaceToDepth", [("x", [2, 3, 6, 4])], attrs=dict(blocksize=2))
    add("trilu", 14, "Trilu", [("x", [2, 5, 7])])
    add("trilu_lower", 14, "Trilu", [("x", [5, 7]), ("k", np.array(-1, np.int64))], attrs=dict(upper=0))
    add("trilu_k", 14, "Trilu", [("x", [3, 7, 5]), ("k", np.array(2, np.int64))])
    add("size", 13, "Size", [("x", [2, 3, 5])], oty=I64)
    add("cumsum", 14, "CumSum", [("x", [3, 7]), ("a", np.array(1, np.int64))])
    add("cumsum_excl_rev", 14, "CumSum", [("x", [5, 3, 2]), ("a", np.array(-3, np.int32))], attrs=dict(exclusive=1, reverse=1))
    add("onehot", 13, "OneHot", [("i", i64(0, 3, -1, 7, 2, -9).reshape(2, 3)), ("d", np.array(5, np.int64)), ("v", np.array([-1.0, 2.0], np.float32))])
    add("onehot_axis", 13, "OneHot", [("i", i64(0, 3, -2, 4)), ("d", np.array(5.0, np.float32)), ("v", np.array([0.0, 1.0], np.float32))], attrs=dict(axis=0))
    add("gathernd", 13, "GatherND", [("x", [4, 3, 5]), ("i", i64(0, 1, 3, -1, 2, 0).reshape(3, 2))])
    add("gathernd_batch", 13, "GatherND", [("x", [2, 3, 5]), ("i", i64(1, 2, 0, -1).reshape(2, 2, 1))], attrs=dict(batch_dims=1))
    sc = lambda *v: np.array(v, np.float32)
    add("resize_nearest", 13, "Resize", [("x", [1, 2, 5, 7]), ("", None), ("s", sc(1, 1, 2, 3))])
    add("resize_nearest_down", 13, "Resize", [("x", [1, 2, 7, 9]), ("", None), ("s", sc(1, 1, 0.6, 0.5))], attrs=dict(nearest_mode="ceil", coordinate_transformation_mode="asymmetric"))
    add("resize_nearest_ac", 13, "Resize", [("x", [2, 3, 5]), ("", None), ("", None), ("z", i64(2, 3, 11))], attrs=dict(coordinate_transformation_mode="align_corners", nearest_mode="round_prefer_ceil"))
    add("resize_nearest_floor", 19, "Resize", [("x", [1, 2, 5, 7]), ("", None), ("s", sc(1.7, 2.5))], attrs=dict(nearest_mode="floor", axes=[2, 3]))
    add("resize_linear", 13, "Resize", [("x", [1, 2, 5, 7]), ("", None), ("s", sc(1, 1, 2, 1.5))], attrs=dict(mode="linear"))
    add("resize_linear_ac", 13, "Resize", [("x", [1, 3, 4, 6]), ("", None), ("", None), ("z", i64(1, 3, 7, 5))], attrs=dict(mode="linear", coordinate_transformation_mode="align_corners"))
    add("resize_linear_pt", 18, "Resize", [("x", [2, 3, 9]), ("", None), ("", None), ("z", i64(4, 1))], attrs=dict(mode="linear", coordinate_transformation_mode="pytorch_half_pixel", axes=[2, 1]))
    add("resize_linear_asym", 13, "Resize", [("x", [1, 2, 5, 7]), ("", None), ("s", sc(1, 1, 0.5, 2.3))], attrs=dict(mode="linear", coordinate_transformation_mode="asymmetric"))
    add("resize_opset10", 10, "Resize", [("x", [1, 2, 5, 7]), ("s", sc(1, 1, 2, 1.5))])
    add("upsample", 7, "Upsample", [("x", [1, 2, 3, 4])], attrs=dict(scales=[1.0, 1.0, 2.0, 3.0]))
    add("upsample_linear", 9, "Upsample", [("x", [1, 2, 3, 4]), ("s", sc(1, 1, 2, 2.5))], attrs=dict(mode="linear"))
    return M


# -- comparison, logic and shape building (bool, int64; ir/graph/op_logic.c) --
def logic_op_models():
    """Single-node models of the comparison/logic/shape ops, static shapes
    (the manifest checks their shapes; test_passes_ort their values)."""
    rng = np.random.default_rng(8)
    f32 = lambda *s: (rng.standard_normal(s) * 0.5).astype(np.float32)
    i64 = lambda *v: np.array(v, dtype=np.int64)
    B, L = TensorProto.BOOL, I64
    M = []

    def add(stem, opset, op_type, ins, oty, attrs=None):
        node = helper.make_node(op_type, [n for n, _ in ins], ["y"], name=stem, **(attrs or {}))
        gin, inits = [], []
        for n, v in ins:
            if isinstance(v, np.ndarray):
                inits.append(numpy_helper.from_array(v, n))
            else:
                gin.append(helper.make_tensor_value_info(n, v[1], v[0]))
        g = helper.make_graph([node], stem, gin, [helper.make_tensor_value_info("y", oty, None)], inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="tessel-gen")
        m.ir_version = 8 if opset <= 18 else 9
        M.append((f"{stem}_op{opset}", opset, m))

    add("equal", 13, "Equal", [("a", ([2, 3, 5], L)), ("b", i64(0, 1, -1, 2, 0).reshape(5))], B)
    add("equal_f", 19, "Equal", [("a", ([3, 5], F)), ("b", np.array([0.25], np.float32))], B)
    add("less", 13, "Less", [("a", ([2, 3, 5], F)), ("b", f32(3, 1))], B)
    add("greater", 13, "Greater", [("a", ([2, 3, 5], L)), ("b", i64(0))], B)
    add("lessorequal", 16, "LessOrEqual", [("a", ([3, 7], L)), ("b", ([7], L))], B)
    add("greaterorequal", 16, "GreaterOrEqual", [("a", ([3, 7], F)), ("b", f32(7))], B)
    add("not", 13, "Not", [("x", ([2, 3, 5], B))], B)
    add("and", 13, "And", [("a", ([3, 5], B)), ("b", ([5], B))], B)
    add("or", 13, "Or", [("a", ([3, 1], B)), ("b", ([1, 5], B))], B)
    add("xor", 13, "Xor", [("a", ([3, 5], B)), ("b", ([3, 5], B))], B)
    add("where", 16, "Where", [("c", ([2, 1, 5], B)), ("x", ([3, 5], F)), ("w", np.array(-1.5, np.float32))], F)
    add("where_i64", 13, "Where", [("c", ([3, 5], B)), ("x", ([5], L)), ("w", ([3, 1], L))], L)
    add("mod", 13, "Mod", [("a", ([3, 7], L)), ("b", i64(3, -3, 2, -2, 5, 7, -4))], L)
    add("mod_fmod", 13, "Mod", [("a", ([3, 7], L)), ("b", i64(3, -3, 2, -2, 5, 7, -4))], L, dict(fmod=1))
    add("mod_float", 13, "Mod", [("a", ([3, 7], F)), ("b", np.array([0.3, -0.3, 0.7, -1.1, 2.0, 0.45, -0.2], np.float32))], F, dict(fmod=1))
    add("range", 13, "Range", [("s", i64(2).reshape(())), ("l", i64(17).reshape(())), ("d", i64(3).reshape(()))], L)
    add("range_f", 21, "Range", [("s", np.array(1.0, np.float32)), ("l", np.array(-2.0, np.float32)), ("d", np.array(-0.7, np.float32))], F)
    add("constantofshape", 13, "ConstantOfShape", [("s", i64(2, 3, 7))], L,
        dict(value=numpy_helper.from_array(i64(-3), "v")))
    add("constantofshape_f", 21, "ConstantOfShape", [("s", i64(3, 5))], F)
    add("expand", 13, "Expand", [("x", ([3, 1], F)), ("s", i64(2, 1, 5))], F)
    add("expand_b", 13, "Expand", [("x", ([1, 5], B)), ("s", i64(3, 1))], B)
    return M


def dyn_models():
    """Multi-node models of the shape logic of transformers exported with a
    dynamic axis "batch" (test_passes_ort runs them with batch=2): values
    computed from the symbolic dim fold at import."""
    M = []
    i64 = lambda *v: np.array(v, dtype=np.int64)

    def model(stem, nodes, ins, inits, opset=17):
        g = helper.make_graph(nodes, stem, ins, [helper.make_tensor_value_info("y", F, None)], inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="tessel-gen")
        m.ir_version = 8
        M.append((stem if stem.startswith("bad_") else f"dyn_{stem}", m))

    N = helper.make_node
    # Range(0, batch, 1) as float added to x[batch, 3]; ConstantOfShape(Shape(x)) * x
    x = helper.make_tensor_value_info("x", F, ["batch", 3])
    model("range", [N("Shape", ["x"], ["s"]), N("Gather", ["s", "i0"], ["n"], axis=0),
                    N("Range", ["z", "n", "one"], ["r"]), N("Cast", ["r"], ["rf"], to=F),
                    N("Unsqueeze", ["rf", "ax1"], ["ru"]), N("ConstantOfShape", ["s"], ["c"], value=numpy_helper.from_array(np.array([2.5], np.float32), "v")),
                    N("Mul", ["x", "c"], ["xc"]), N("Add", ["xc", "ru"], ["y"])],
          [x], [numpy_helper.from_array(i64(0).reshape(()), "i0"), numpy_helper.from_array(i64(0).reshape(()), "z"),
                numpy_helper.from_array(i64(1).reshape(()), "one"), numpy_helper.from_array(i64(1), "ax1")])
    # position_ids[:, 0:batch] of a constant, the end Unsqueeze(Shape(x)[0]); Expand to [batch, batch]
    pos = numpy_helper.from_array(np.arange(40, dtype=np.float32).reshape(1, 40) * 0.5, "pos")
    model("slice_sym", [N("Shape", ["x"], ["s"]), N("Gather", ["s", "i0"], ["n"], axis=0),
                        N("Unsqueeze", ["n", "ax0"], ["nu"]),
                        N("Slice", ["pos", "zero1", "nu", "one1", "one1"], ["p"]),
                        N("Concat", ["nu", "nu"], ["sh"], axis=0), N("Expand", ["p", "sh"], ["pe"]),
                        N("MatMul", ["pe", "x"], ["y"])],
          [x], [pos, numpy_helper.from_array(i64(0).reshape(()), "i0"), numpy_helper.from_array(i64(0), "ax0"),
                numpy_helper.from_array(i64(0), "zero1"), numpy_helper.from_array(i64(1), "one1")])
    # the HF mask idiom: Where(Equal(shape, -1), ones, shape) as Expand's target; a causal mask from two Ranges
    model("mask", [N("Shape", ["x"], ["s"]), N("Gather", ["s", "i0"], ["n"], axis=0),
                   N("Unsqueeze", ["n", "ax0"], ["nu"]), N("Concat", ["nu", "m1"], ["t"], axis=0),
                   N("ConstantOfShape", ["two"], ["ones"], value=numpy_helper.from_array(i64(1), "v")),
                   N("Mul", ["ones", "m1s"], ["neg"]), N("Equal", ["t", "neg"], ["eq"]),
                   N("Where", ["eq", "ones", "t"], ["tw"]), N("Expand", ["col", "tw"], ["colx"]),
                   N("Range", ["z", "n", "one"], ["r"]), N("Unsqueeze", ["r", "ax1"], ["rc"]),
                   N("LessOrEqual", ["colx", "rc"], ["le"]), N("Not", ["le"], ["nle"]),
                   N("And", ["nle", "lebool"], ["msk"]), N("Where", ["msk", "big", "x"], ["y"])],
          [helper.make_tensor_value_info("x", F, ["batch", 3])],
          [numpy_helper.from_array(i64(0).reshape(()), "i0"), numpy_helper.from_array(i64(0), "ax0"),
           numpy_helper.from_array(i64(-1), "m1"), numpy_helper.from_array(i64(2), "two"),
           numpy_helper.from_array(i64(-1).reshape(()), "m1s"), numpy_helper.from_array(i64(0, 1, 2).reshape(1, 3), "col"),
           numpy_helper.from_array(i64(0).reshape(()), "z"), numpy_helper.from_array(i64(1).reshape(()), "one"),
           numpy_helper.from_array(i64(1), "ax1"), numpy_helper.from_array(np.array([True, False, True]), "lebool"),
           numpy_helper.from_array(np.array(-9.0, np.float32), "big")])
    # float16 storage end to end: an f16 input and f16 weights through MatMul, Add, Relu, a Flatten
    # of [batch, 2, 5] to [batch*2, 5] (a product of the symbol), Cast back to f32
    rng = np.random.default_rng(16)
    model("f16", [N("MatMul", ["x16", "w16"], ["h"]), N("Add", ["h", "b16"], ["hb"]), N("Relu", ["hb"], ["hr"]),
                  N("Reshape", ["hr", "sh3"], ["h3"]), N("Flatten", ["h3"], ["hf"], axis=2),
                  N("Cast", ["hf"], ["y"], to=F)],
          [helper.make_tensor_value_info("x16", TensorProto.FLOAT16, ["batch", 7])],
          [numpy_helper.from_array((rng.standard_normal((7, 10)) * 0.5).astype(np.float16), "w16"),
           numpy_helper.from_array((rng.standard_normal(10) * 0.1).astype(np.float16), "b16"),
           numpy_helper.from_array(i64(0, 2, 5), "sh3")])
    # refused: a Range whose length is tensor data (bad_: only test_model_dyn reads it, for the message)
    model("bad_range_data", [N("Cast", ["x"], ["xi"], to=I64), N("ReduceSum", ["xi"], ["n"], keepdims=0),
                             N("Range", ["z", "n", "one"], ["r"]), N("Cast", ["r"], ["y"], to=F)],
          [helper.make_tensor_value_info("x", F, [3])],
          [numpy_helper.from_array(i64(0).reshape(()), "z"), numpy_helper.from_array(i64(1).reshape(()), "one")])
    # refused: NonZero's output length is the count of nonzeros (tensor data)
    model("bad_nonzero", [N("NonZero", ["x"], ["nz"]), N("Cast", ["nz"], ["y"], to=F)],
          [helper.make_tensor_value_info("x", F, [3])], [])
    # quantization (op_quant.c): per-axis uint8 and per-tensor int8 Q -> DQ; DynamicQuantizeLinear -> DQ;
    # MatMulInteger u8 x s8 with a per-tensor a_zero_point and a per-column b_zero_point
    qs = numpy_helper.from_array(np.array([0.01, 0.02, 0.05, 0.003], np.float32), "qs")
    model("qdq", [N("QuantizeLinear", ["x", "qs", "qz"], ["q"], axis=1), N("DequantizeLinear", ["q", "qs", "qz"], ["d"], axis=1),
                  N("QuantizeLinear", ["x", "s1", "z1"], ["q1"]), N("DequantizeLinear", ["q1", "s1", "z1"], ["d1"]),
                  N("Add", ["d", "d1"], ["y"])],
          [helper.make_tensor_value_info("x", F, ["batch", 4, 3])],
          [qs, numpy_helper.from_array(np.array([128, 100, 0, 255], np.uint8), "qz"),
           numpy_helper.from_array(np.array(0.0078, np.float32), "s1"), numpy_helper.from_array(np.array(-3, np.int8), "z1")], 13)
    model("dyn_quant", [N("DynamicQuantizeLinear", ["x"], ["q", "qsc", "qzp"]), N("DequantizeLinear", ["q", "qsc", "qzp"], ["y"])],
          [helper.make_tensor_value_info("x", F, ["batch", 4, 3])], [], 13)
    model("matmul_integer", [N("Cast", ["x"], ["xi"], to=TensorProto.UINT8), N("MatMulInteger", ["xi", "qb", "qaz", "qbz"], ["mi"]),
                             N("Cast", ["mi"], ["y"], to=F)],
          [helper.make_tensor_value_info("x", F, ["batch", 5, 7])],
          [numpy_helper.from_array(np.random.default_rng(1).integers(-128, 127, (7, 6)).astype(np.int8), "qb"),
           numpy_helper.from_array(np.array(3, np.uint8), "qaz"), numpy_helper.from_array(np.array([1, -2, 3, 0, 5, -7], np.int8), "qbz")], 13)
    # QLinearMatMul u8 x s8 -> u8, b's scale and zero point per column, then DequantizeLinear
    model("qlinear_matmul", [N("QuantizeLinear", ["x", "qas", "qaz2"], ["xq"]),
                             N("QLinearMatMul", ["xq", "qas", "qaz2", "qb", "qbs", "qbz", "qys", "qyz"], ["yq"]),
                             N("DequantizeLinear", ["yq", "qys", "qyz"], ["y"])],
          [helper.make_tensor_value_info("x", F, ["batch", 5, 7])],
          [numpy_helper.from_array(np.array(0.02, np.float32), "qas"), numpy_helper.from_array(np.array(120, np.uint8), "qaz2"),
           numpy_helper.from_array(np.random.default_rng(2).integers(-128, 127, (7, 6)).astype(np.int8), "qb"),
           numpy_helper.from_array(np.array([0.01, 0.02, 0.005, 0.03, 0.015, 0.01], np.float32), "qbs"),
           numpy_helper.from_array(np.array([0, 1, -1, 2, 0, -3], np.int8), "qbz"),
           numpy_helper.from_array(np.array(0.05, np.float32), "qys"), numpy_helper.from_array(np.array(128, np.uint8), "qyz")], 21)
    # Pow of an int64 base (exponents 0..5 and -1), then Cast for the f32 output
    model("pow_int", [N("Pow", ["xi", "pe"], ["p"]), N("Cast", ["p"], ["y"], to=F)],
          [helper.make_tensor_value_info("xi", I64, ["batch", 6])],
          [numpy_helper.from_array(i64(0, 1, 2, 3, 5, -1), "pe")])
    # Dropout's mask output read: all true at inference (opset 13), zeros of the data's type (opset 9)
    model("dropout_mask13", [N("Dropout", ["x"], ["o", "m"]), N("Cast", ["m"], ["mf"], to=F), N("Add", ["o", "mf"], ["y"])],
          [helper.make_tensor_value_info("x", F, ["batch", 5])], [], 13)
    model("dropout_mask9", [N("Dropout", ["x"], ["o", "m"]), N("Add", ["o", "m"], ["y"])],
          [helper.make_tensor_value_info("x", F, ["batch", 5])], [], 9)
    # torch's F.pad through the TorchScript exporter (swin_t): the pads list reversed pairwise
    # at import, Concat -> Reshape [-1, 2] -> Slice step -1 -> Transpose -> Reshape [-1], with
    # a pad width computed from the shape ((4 - 5 % 4) % 4 = 3 on the last axis)
    model("pad_reversed", [N("Shape", ["x"], ["s"]), N("Gather", ["s", "i2"], ["w"], axis=0),
                           N("Mod", ["w", "four"], ["wm"]), N("Sub", ["four", "wm"], ["ws"]), N("Mod", ["ws", "four"], ["pw"]),
                           N("Unsqueeze", ["pw", "ax0"], ["pwu"]), N("Concat", ["zero1", "pwu", "zeros4"], ["p6"], axis=0),
                           N("Reshape", ["p6", "m12"], ["p32"]),
                           N("Slice", ["p32", "m1", "mbig", "ax0", "m1"], ["prev"]),
                           N("Transpose", ["prev"], ["pt"], perm=[1, 0]), N("Reshape", ["pt", "m1"], ["pads"]),
                           N("Cast", ["pads"], ["pads64"], to=I64), N("Pad", ["x", "pads64", "cval"], ["y"])],
          [helper.make_tensor_value_info("x", F, ["batch", 3, 5])],
          [numpy_helper.from_array(i64(2).reshape(()), "i2"), numpy_helper.from_array(i64(4).reshape(()), "four"),
           numpy_helper.from_array(i64(0), "ax0"), numpy_helper.from_array(i64(0), "zero1"),
           numpy_helper.from_array(i64(0, 0, 0, 0), "zeros4"), numpy_helper.from_array(i64(-1, 2), "m12"),
           numpy_helper.from_array(i64(-1), "m1"), numpy_helper.from_array(i64(-(2**62)), "mbig"),
           numpy_helper.from_array(np.array(0.5, np.float32), "cval")])
    # GPT-Neo's causal-mask slice: the start is key length - query length, a size minus itself
    model("slice_sub_self", [N("Shape", ["x"], ["s"]), N("Gather", ["s", "i0"], ["n"], axis=0),
                             N("Sub", ["n", "n"], ["st"]), N("Unsqueeze", ["st", "ax0"], ["stu"]),
                             N("Slice", ["x", "stu", "three", "one1"], ["y"])],
          [helper.make_tensor_value_info("x", F, ["batch", 3, 5])],
          [numpy_helper.from_array(i64(0).reshape(()), "i0"), numpy_helper.from_array(i64(0), "ax0"),
           numpy_helper.from_array(i64(3), "three"), numpy_helper.from_array(i64(1), "one1")])
    # Attention (opset 23, torch's export of scaled_dot_product_attention; op_attention.c expands it):
    # 4-D grouped-query (4 query heads on 2 key/value heads) with a past cache, causal, a bool mask,
    # every output (present key/value, the softmax probabilities) summed into y
    rng = np.random.default_rng(23)
    def attn(stem, nodes, ins, inits):
        g = helper.make_graph(nodes, stem, ins, [helper.make_tensor_value_info("y", F, None)], inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 23)], producer_name="tessel-gen")
        m.ir_version = 10
        M.append((f"dyn_{stem}", m))
    bmask = rng.random((1, 1, 5, 8)) > 0.3
    bmask[0, 0, 3, :] = False  # a fully masked row: zeros, not NaN
    attn("attention_gqa_past", [
        N("Attention", ["q", "k", "v", "mask", "pk", "pv"], ["a", "prk", "prv", "p"], is_causal=1, qk_matmul_output_mode=3),
        N("ReduceSum", ["prk", "ax12"], ["sk"]), N("ReduceSum", ["prv", "ax12"], ["sv"]), N("ReduceSum", ["p", "ax3"], ["sp"]),
        N("Add", ["a", "sp"], ["a2"]), N("Mul", ["a2", "sk"], ["a3"]), N("Add", ["a3", "sv"], ["y"])],
        [helper.make_tensor_value_info("q", F, ["batch", 4, 5, 6]), helper.make_tensor_value_info("k", F, ["batch", 2, 5, 6]),
         helper.make_tensor_value_info("v", F, ["batch", 2, 5, 6]), helper.make_tensor_value_info("pk", F, ["batch", 2, 3, 6]),
         helper.make_tensor_value_info("pv", F, ["batch", 2, 3, 6])],
        [numpy_helper.from_array(bmask, "mask"), numpy_helper.from_array(i64(1, 2), "ax12"), numpy_helper.from_array(i64(3), "ax3")])
    # 3-D (heads split from the hidden axis), an explicit scale, softcap, a float mask
    attn("attention_3d_softcap", [
        N("Attention", ["q", "k", "v", "fmask"], ["y"], q_num_heads=3, kv_num_heads=3, scale=0.3, softcap=2.0)],
        [helper.make_tensor_value_info("q", F, ["batch", 7, 12]), helper.make_tensor_value_info("k", F, ["batch", 9, 12]),
         helper.make_tensor_value_info("v", F, ["batch", 9, 15])],
        [numpy_helper.from_array((rng.standard_normal((7, 9)) * 0.5).astype(np.float32), "fmask")])
    # IsNaN and IsInf (torch writes IsNaN into its SDPA decomposition before opset 23)
    model("isnan_isinf", [N("Add", ["x", "special"], ["d"]), N("IsNaN", ["d"], ["n"]), N("IsInf", ["d"], ["i"], detect_negative=0),
                          N("IsInf", ["d"], ["i2"]), N("Where", ["n", "x", "x2"], ["w"]), N("Where", ["i", "x2", "w"], ["w2"]),
                          N("Cast", ["i2"], ["i2f"], to=F), N("Add", ["w2", "i2f"], ["y"])],
          [helper.make_tensor_value_info("x", F, ["batch", 6]), helper.make_tensor_value_info("x2", F, ["batch", 6])],
          [numpy_helper.from_array(np.array([np.nan, np.inf, -np.inf, 0, 1, -2], np.float32), "special")])
    # an int64 tensor transposed at run time (Transpose moves any dtype)
    model("transpose_i64", [N("Cast", ["x"], ["xi"], to=I64), N("Transpose", ["xi"], ["t"], perm=[2, 0, 1]),
                            N("Cast", ["t"], ["y"], to=F)],
          [helper.make_tensor_value_info("x", F, ["batch", 3, 5])], [])
    # a bool mask flattened (Flatten moves any dtype)
    model("flatten_bool", [N("Greater", ["x", "zf"], ["g"]), N("Flatten", ["g"], ["fg"], axis=1),
                           N("Where", ["fg", "x2", "zf"], ["y"])],
          [helper.make_tensor_value_info("x", F, ["batch", 2, 3]), helper.make_tensor_value_info("x2", F, ["batch", 6])],
          [numpy_helper.from_array(np.array(0.0, np.float32), "zf")])
    return M


def bad_models():
    """Models the importer must refuse (tests/ir/test_onnx.c checks the messages)."""
    rng = np.random.default_rng(6)
    B = {}

    def model(nodes, ins, outs, inits=(), opset=17, domain_imports=()):
        g = helper.make_graph(nodes, "bad", ins, outs, list(inits))
        ops = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, 1) for d in domain_imports]
        m = helper.make_model(g, opset_imports=ops, producer_name="tessel-gen")
        m.ir_version = 8
        return m

    x = helper.make_tensor_value_info("x", F, [2, 3])
    y = helper.make_tensor_value_info("y", F, None)
    B["bad_op"] = model([helper.make_node("Hardmax", ["x"], ["y"], name="hm")], [x], [y])
    B["bad_attr"] = model([helper.make_node("Relu", ["x"], ["y"], name="r", foo=3)], [x], [y])
    B["bad_gelu18"] = model([helper.make_node("Gelu", ["x"], ["y"], name="g")], [x], [y], opset=18)
    B["bad_opset0"] = model([helper.make_node("Relu", ["x"], ["y"], name="r")], [x], [y], opset=0)
    # opsets 1-6: training mode (is_test absent: 0), a B that does not fit A from axis
    bn_in = [numpy_helper.from_array(np.ones(3, np.float32), n) for n in ("s", "b", "m", "v")]
    B["bad_bn_training6"] = model([helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], name="bn")],
                                  [helper.make_tensor_value_info("x", F, [2, 3, 4])], [y], bn_in, opset=6)
    B["bad_legacy_axis6"] = model([helper.make_node("Add", ["x", "z"], ["y"], name="a", broadcast=1, axis=1)],
                                  [helper.make_tensor_value_info("x", F, [2, 3, 4]),
                                   helper.make_tensor_value_info("z", F, [4, 3])], [y], opset=6)
    # Attention: 3-D inputs without head counts; 6 query heads on 4 key/value heads
    B["bad_attention_heads"] = model([helper.make_node("Attention", ["q", "q", "q"], ["y"], name="at")],
                                     [helper.make_tensor_value_info("q", F, [2, 5, 12])], [y], opset=23)
    B["bad_attention_gqa"] = model([helper.make_node("Attention", ["q", "k", "k"], ["y"], name="at")],
                                   [helper.make_tensor_value_info("q", F, [2, 6, 5, 8]),
                                    helper.make_tensor_value_info("k", F, [2, 4, 5, 8])], [y], opset=23)
    # com.microsoft's QLinearAdd in the default domain (no such operator there)
    B["bad_ms_op_default_domain"] = model([helper.make_node("QLinearAdd", ["x"] * 7, ["y"], name="qa")], [x], [y])
    B["bad_opset29"] = model([helper.make_node("Relu", ["x"], ["y"], name="r")], [x], [y], opset=29)
    B["bad_domain"] = model([helper.make_node("FusedGemm", ["x", "x"], ["y"], name="fg", domain="com.microsoft")],
                            [x], [y], domain_imports=["com.microsoft"])
    w = numpy_helper.from_array(rng.standard_normal((2, 3)).astype(np.float32), "w")
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    e = w.external_data.add()
    e.key, e.value = "location", "weights.bin"
    B["bad_external"] = model([helper.make_node("Add", ["x", "w"], ["y"], name="a")], [x], [y], [w])
    B["bad_reducemean_axes13"] = model([helper.make_node("ReduceMean", ["x", "ax"], ["y"], name="rm")], [x], [y],
                                       [numpy_helper.from_array(np.array([1], np.int64), "ax")], opset=13)
    B["bad_broadcast"] = model([helper.make_node("Add", ["x", "z"], ["y"], name="a")],
                               [x, helper.make_tensor_value_info("z", F, [4, 3])], [y])
    B["bad_unsorted"] = model([helper.make_node("Relu", ["t"], ["y"], name="second"),
                               helper.make_node("Relu", ["x"], ["t"], name="first")], [x], [y])
    B["bad_symconv"] = model([helper.make_node("Conv", ["xi", "w"], ["y"], name="c", kernel_shape=[3, 3])],
                             [helper.make_tensor_value_info("xi", F, [1, 3, "h", 8])], [y],
                             [numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w")])
    B["bad_dynamic_slice"] = model([helper.make_node("Slice", ["x", "s", "e"], ["y"], name="sl")],
                                   [x, helper.make_tensor_value_info("s", I64, [1])], [y],
                                   [numpy_helper.from_array(np.array([2], np.int64), "e")])
    B["bad_string"] = model([helper.make_node("Identity", ["x"], ["y"], name="i")],
                            [helper.make_tensor_value_info("x", TensorProto.STRING, [2])], [y])
    x4 = helper.make_tensor_value_info("x", F, [1, 2, 6, 6])
    B["bad_split_num13"] = model([helper.make_node("Split", ["x"], ["y", "z"], name="sp", axis=0, num_outputs=2)],
                                 [x], [y, helper.make_tensor_value_info("z", F, None)], opset=13)
    B["bad_avgpool_dil18"] = model([helper.make_node("AveragePool", ["x"], ["y"], name="ap", kernel_shape=[2, 2],
                                                     dilations=[2, 2])], [x4], [y], opset=18)
    B["bad_pad_wrap18"] = model([helper.make_node("Pad", ["x", "p"], ["y"], name="pd", mode="wrap")], [x], [y],
                                [numpy_helper.from_array(np.array([0, 1, 0, 1], np.int64), "p")], opset=18)
    # -- legacy opsets (op_legacy.c) --
    B["bad_slice_inputs9"] = model([helper.make_node("Slice", ["x", "s", "e"], ["y"], name="sl")], [x], [y],
                                   [numpy_helper.from_array(np.array([1], np.int64), "s"),
                                    numpy_helper.from_array(np.array([2], np.int64), "e")], opset=9)
    B["bad_dropout_training"] = model([helper.make_node("Dropout", ["x", "r", "t"], ["y"], name="dr")], [x], [y],
                                      [numpy_helper.from_array(np.array(0.5, np.float32), "r"),
                                       numpy_helper.from_array(np.array(True), "t")], opset=13)
    B["bad_bn_spatial0"] = model([helper.make_node("BatchNormalization", ["x4", "p", "p", "p", "p"], ["y"], name="bn",
                                                   spatial=0)], [helper.make_tensor_value_info("x4", F, [1, 2, 3, 3])], [y],
                                 [numpy_helper.from_array(np.ones(2, np.float32), "p")], opset=7)
    # -- unary maths, activations, reductions, normalisations (mathops) --
    x6 = helper.make_tensor_value_info("x", F, [2, 6, 5, 3])
    vec = lambda n, nm: numpy_helper.from_array(np.ones(n, np.float32), nm)
    B["bad_lpnorm_p3"] = model([helper.make_node("LpNormalization", ["x"], ["y"], name="lp", p=3)], [x], [y])
    B["bad_groupnorm_groups"] = model([helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], name="gn",
                                                        num_groups=4)], [x6], [y], [vec(6, "s"), vec(6, "b")], opset=21)
    B["bad_groupnorm18_scale"] = model([helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], name="gn",
                                                         num_groups=2)], [x6], [y], [vec(6, "s"), vec(6, "b")], opset=18)
    B["bad_prelu_slope"] = model([helper.make_node("PRelu", ["x", "s"], ["y"], name="pr")], [x], [y],
                                 [numpy_helper.from_array(np.ones((4, 1, 3), np.float32), "s")])
    B["bad_reducel2_int"] = model([helper.make_node("ReduceL2", ["xi"], ["y"], name="rl")],
                                  [helper.make_tensor_value_info("xi", TensorProto.INT32, [2, 3])], [y])
    # ConvInteger refusals: a float x; a w zero point neither per tensor nor per output channel
    xi = helper.make_tensor_value_info("x", TensorProto.UINT8, [1, 2, 5, 5])
    yi = helper.make_tensor_value_info("y", TensorProto.INT32, None)
    B["bad_convinteger_float"] = model([helper.make_node("ConvInteger", ["xf", "w"], ["y"], name="ci")],
                                       [helper.make_tensor_value_info("xf", F, [1, 2, 5, 5])], [yi],
                                       [numpy_helper.from_array(np.ones((3, 2, 3, 3), np.uint8), "w")])
    B["bad_convinteger_wzp"] = model([helper.make_node("ConvInteger", ["x", "w", "", "wz"], ["y"], name="ci")], [xi], [yi],
                                     [numpy_helper.from_array(np.ones((3, 2, 3, 3), np.uint8), "w"),
                                      numpy_helper.from_array(np.ones(2, np.uint8), "wz")])
    return B


# ---- issue 15 (graphfix): convolutions without a bias through every pass, and a
# 100k-node chain for import time. conv/*.onnx: tests/ir/test_passes_models.c
# checks each against onnxruntime with --winograd on / off / all; chain_100k.onnx:
# the same test imports it (name lookups must not scan the graph).
def conv_bias_models():
    """(stem, model): 16 channels, 16x16 maps: big enough for Winograd's default thresholds."""
    C, HW = 16, 16
    def conv(b, x, bias, stride=1, name="w"):
        ins = [x, b.weight(name, [C, C, 3, 3])] + ([b.weight("cb", [C], 0.1)] if bias else [])
        return b.op("Conv", ins, kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[stride, stride])
    def finish(b, h, stem, out_hw, in_shape=None):
        b.nodes[-1].output[0] = "y"
        x = helper.make_tensor_value_info("x", F, in_shape or [1, C, HW, HW])
        y = helper.make_tensor_value_info("y", F, [1, C] + (out_hw if isinstance(out_hw, list) else [out_hw, out_hw]))
        return stem, b.model(stem, [x], [y], 17)
    out = []
    for bias in (False, True):   # one 3x3 stride-1 conv, then Relu
        b = Builder(40 + bias)
        h = b.op("Relu", [conv(b, "x", bias)])
        out.append(finish(b, h, "wino_bias" if bias else "wino_nobias", HW))
    # conv without bias -> batchnorm (folded into the conv's new bias) -> relu ->
    # conv without bias -> relu -> strided conv without bias (polyphase)
    b = Builder(42)
    h = conv(b, "x", False)
    h = b.op("BatchNormalization", [h, b.const("g", (1 + 0.1 * b.rng.standard_normal(C)).astype(np.float32)),
                                    b.const("be", (0.1 * b.rng.standard_normal(C)).astype(np.float32)),
                                    b.const("mu", (0.1 * b.rng.standard_normal(C)).astype(np.float32)),
                                    b.const("var", (0.5 + b.rng.random(C)).astype(np.float32))], epsilon=1e-5)
    h = b.op("Relu", [h])
    h = b.op("Relu", [conv(b, h, False)])
    h = conv(b, h, False, stride=2)
    out.append(finish(b, h, "nobias_bn_chain", HW // 2))
    # 1x1 convs with strides (2, 3) and no padding on odd 15x13 maps (the
    # simplify pass subsamples their input with a Slice), with and without a
    # bias, the second behind a Relu
    b = Builder(43)
    h = b.op("Conv", ["x", b.weight("p1", [C, C, 1, 1]), b.weight("pb", [C], 0.1)], kernel_shape=[1, 1], strides=[2, 3])
    h = b.op("Conv", [b.op("Relu", [h]), b.weight("p2", [C, C, 1, 1])], kernel_shape=[1, 1], strides=[3, 2])
    out.append(finish(b, h, "strided_pointwise", [3, 3], [1, C, 15, 13]))
    return out


# ---- issue 17 (nchwc): a ResNet-style and a MobileNet-style network for the
# nchwc pass (--conv-layout nchwc), odd spatial sizes and channel counts the
# block does not divide (those convolutions fall back to NCHW).
# tests/ir/test_passes_models.c runs them against onnxruntime.
def nchwc_models():
    def conv(b, x, cin, cout, k, s=1, group=1, bias=True):
        ins = [x, b.weight("w", [cout, cin // group, k, k])] + ([b.weight("cb", [cout], 0.1)] if bias else [])
        return b.op("Conv", ins, kernel_shape=[k, k], pads=[k // 2] * 4, strides=[s, s], group=group)
    def relu6(b, h):
        return b.op("Clip", [h, b.const("lo", np.array(0, np.float32)), b.const("hi", np.array(6, np.float32))])
    def finish(b, stem, hw, y_shape):
        b.nodes[-1].output[0] = "y"
        x = helper.make_tensor_value_info("x", F, [1, 3] + hw)
        y = helper.make_tensor_value_info("y", F, y_shape)
        return stem, b.model(stem, [x], [y], 17)
    out = []
    # ResNet: 7x7/2 stem (3 input channels: read plain), batch norm, Relu,
    # 3x3/2 MaxPool; a bottleneck with a strided 3x3 and a strided 1x1
    # projection, the residual Add and Relu; a basic block of two 3x3s at 16
    # channels (Winograd's thresholds); a 12-channel 1x1 (fallback); the
    # pooled head
    b = Builder(60)
    h = conv(b, "x", 3, 16, 7, 2, bias=False)
    h = b.op("BatchNormalization", [h, b.const("g", (1 + 0.1 * b.rng.standard_normal(16)).astype(np.float32)),
                                    b.const("be", (0.1 * b.rng.standard_normal(16)).astype(np.float32)),
                                    b.const("mu", (0.1 * b.rng.standard_normal(16)).astype(np.float32)),
                                    b.const("var", (0.5 + b.rng.random(16)).astype(np.float32))], epsilon=1e-5)
    h = b.op("MaxPool", [b.op("Relu", [h])], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    t = b.op("Relu", [conv(b, h, 16, 8, 1)])
    t = b.op("Relu", [conv(b, t, 8, 8, 3, 2)])
    t = conv(b, t, 8, 16, 1)
    h = b.op("Relu", [b.op("Add", [t, conv(b, h, 16, 16, 1, 2)])])
    t = b.op("Relu", [conv(b, h, 16, 16, 3)])
    h = b.op("Relu", [b.op("Add", [conv(b, t, 16, 16, 3), h])])
    h = conv(b, h, 16, 12, 1)
    h = b.op("Flatten", [b.op("GlobalAveragePool", [h])])
    b.op("Gemm", [h, b.weight("fc", [10, 12]), b.weight("fb", [10], 0.1)], transB=1)
    out.append(finish(b, "nchwc_resnet", [35, 33], [1, 10]))
    # MobileNetV2: 3x3/2 stem, ReLU6; an inverted residual (1x1 expand,
    # depthwise 3x3, 1x1 project, Add); a strided one to 24 channels with a
    # squeeze-excite scale (pool, 1x1 to 8, 1x1 back, Sigmoid, Mul); a
    # 20-channel 1x1 (fallback); the pooled output
    b = Builder(61)
    h = relu6(b, conv(b, "x", 3, 16, 3, 2))
    t = relu6(b, conv(b, h, 16, 48, 1))
    t = relu6(b, conv(b, t, 48, 48, 3, group=48))
    h = b.op("Add", [conv(b, t, 48, 16, 1), h])
    t = relu6(b, conv(b, h, 16, 48, 1))
    t = relu6(b, conv(b, t, 48, 48, 3, 2, group=48))
    se = b.op("Relu", [conv(b, b.op("GlobalAveragePool", [t]), 48, 8, 1)])
    t = b.op("Mul", [t, b.op("Sigmoid", [conv(b, se, 8, 48, 1)])])
    h = conv(b, t, 48, 24, 1)
    h = relu6(b, conv(b, h, 24, 20, 1))
    b.op("GlobalAveragePool", [h])
    out.append(finish(b, "nchwc_mobilenet", [29, 27], [1, 20, 1, 1]))
    # RegNet / ResNeXt: grouped 3x3s with 16 channels per group (blocked as they are), 8 per group
    # (merged into groups of 16 at block 16) and 4 per group (merged at 8 and 16), between 1x1s,
    # a strided projection, Add
    b = Builder(62)
    h = b.op("Relu", [conv(b, "x", 3, 16, 3, 2)])
    t = b.op("Relu", [conv(b, h, 16, 32, 1)])
    t = b.op("Relu", [conv(b, t, 32, 32, 3, 2, group=2)])
    t = b.op("Relu", [conv(b, t, 32, 32, 3, group=4)])
    t = b.op("Relu", [conv(b, t, 32, 32, 3, group=8)])
    t = conv(b, t, 32, 16, 1)
    h = b.op("Relu", [b.op("Add", [t, conv(b, h, 16, 16, 1, 2)])])
    b.op("GlobalAveragePool", [h])
    out.append(finish(b, "nchwc_regnet", [31, 29], [1, 16, 1, 1]))
    # DenseNet: pre-activation layers (batch norm, Relu, 1x1, batch norm, Relu, 3x3 to 8 new
    # channels) whose inputs are the Concat of every earlier feature map: 16, 24, 32 channels
    # (the block 16 divides only the first and last)
    b = Builder(63)
    def bn(b, h, c):
        return b.op("BatchNormalization", [h, b.const("g", (1 + 0.1 * b.rng.standard_normal(c)).astype(np.float32)),
                                           b.const("be", (0.1 * b.rng.standard_normal(c)).astype(np.float32)),
                                           b.const("mu", (0.1 * b.rng.standard_normal(c)).astype(np.float32)),
                                           b.const("var", (0.5 + b.rng.random(c)).astype(np.float32))], epsilon=1e-5)
    h = b.op("Relu", [conv(b, "x", 3, 16, 3, 2, bias=False)])
    for c in (16, 24):
        t = b.op("Relu", [bn(b, conv(b, b.op("Relu", [bn(b, h, c)]), c, 32, 1, bias=False), 32)])
        h = b.op("Concat", [h, conv(b, t, 32, 8, 3, bias=False)], axis=1)
    # the transition: 1x1 to 16, 2x2/2 average pool; an Inception-style 3x3/1 one, padded,
    # dividing by the taps inside the input
    h = conv(b, b.op("Relu", [bn(b, h, 32)]), 32, 16, 1, bias=False)
    h = b.op("AveragePool", [h], kernel_shape=[2, 2], strides=[2, 2])
    h = b.op("AveragePool", [h], kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=0)
    b.op("GlobalAveragePool", [h])
    out.append(finish(b, "nchwc_densenet", [27, 25], [1, 16, 1, 1]))
    return out


def chain_model(n):
    """n nodes: Add of a shared [1,8] initializer on even nodes, an unnamed Relu on odd ones."""
    nodes, h = [], "x"
    for i in range(n):
        o = "y" if i == n - 1 else f"t{i}"
        nodes.append(helper.make_node("Add", [h, "c"], [o], name=f"add{i}") if i % 2 == 0
                     else helper.make_node("Relu", [h], [o]))
        h = o
    vi = [helper.make_tensor_value_info(s, F, [1, 8]) for s in ("x", "y")]
    c = numpy_helper.from_array(np.full([1, 8], 0.001, np.float32), "c")
    g = helper.make_graph(nodes, "chain", vi[:1], vi[1:], [c])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="tessel-gen")
    m.ir_version = 8
    return m


def save_graphfix_models(out):
    os.makedirs(os.path.join(out, "conv"), exist_ok=True)
    for stem, m in conv_bias_models() + nchwc_models():
        onnx.save(m, os.path.join(out, "conv", stem + ".onnx"))
    onnx.save(chain_model(100000), os.path.join(out, "chain_100k.onnx"))


def random_feed(rng, type_str, shape):
    """A seeded input of onnxruntime's type string: small ints, bools or floats."""
    if type_str in ("tensor(int64)", "tensor(int32)"):
        return rng.integers(-4, 5, size=shape).astype(np.int64 if "64" in type_str else np.int32)
    if type_str == "tensor(bool)":
        return rng.integers(0, 2, size=shape).astype(bool)
    if type_str in ("tensor(uint8)", "tensor(int8)"):
        lo, hi = (0, 256) if "uint" in type_str else (-128, 128)
        return rng.integers(lo, hi, size=shape).astype(np.uint8 if "uint" in type_str else np.int8)
    return rng.standard_normal(shape).astype(np.float32)


def mathops_sym_models():
    """Models of the unary maths, activation, reduction and normalisation ops
    with a symbolic batch dim (saved into ops/ beside the per-op models, so
    test_passes_ort runs them against onnxruntime at batch 2; not in the
    manifest, whose shapes are constant)."""
    rng = np.random.default_rng(8)
    f32 = lambda *s: (rng.standard_normal(s) * 0.5).astype(np.float32)
    b = Builder(9)
    b.inits += [numpy_helper.from_array(f32(5, 1, 1), "slope"), numpy_helper.from_array(f32(5), "s5"),
                numpy_helper.from_array(f32(5), "b5"), numpy_helper.from_array(np.array([2], np.int64), "ax2"),
                numpy_helper.from_array(np.array(3.0, np.float32), "three")]
    h = b.op("PRelu", ["x", "slope"])
    h = b.op("HardSwish", [h])
    h = b.op("InstanceNormalization", [h, "s5", "b5"], epsilon=1e-4)
    g = b.op("GroupNormalization", [h, "s5", "b5"], num_groups=5)
    h = b.op("LogSoftmax", [g], axis=1)
    y = b.op("ReduceLogSumExp", [h, "ax2"], keepdims=1)
    z = b.op("ArgMax", [g], axis=3, keepdims=0)
    w = b.op("Round", [b.op("Mul", ["x", "three"])])
    w = b.op("GlobalMaxPool", [b.op("Mish", [w])])
    v = b.op("ReduceL2", [b.op("MeanVarianceNormalization", [g])], keepdims=0)
    x = helper.make_tensor_value_info("x", F, ["batch", 5, 7, 3])
    outs = [helper.make_tensor_value_info(n, t, None) for n, t in ((y, F), (z, I64), (w, F), (v, F))]
    gr = helper.make_graph(b.nodes, "mathops_sym_batch", [x], outs, b.inits)
    m = helper.make_model(gr, opset_imports=[helper.make_opsetid("", 18)], producer_name="tessel-gen")
    m.ir_version = 8
    return [("mathops_sym_batch_op18", m)]


def legacy_cases(out):
    """out/legacy/test_X: models of opsets 1 to 6 in the onnx backend-test layout
    (model.onnx, test_data_set_0/input_I.pb, output_I.pb), run by
    tests/conformance (`conformance_legacy`). Neither onnxruntime (opset 7 on)
    nor onnx's reference evaluator or version converter implements the old
    broadcast with an axis, so the expected outputs are NumPy written from the
    operator texts of onnx.defs (Add-6: B matches A's dims from axis on; PRelu-6:
    a slope per channel; Reshape-1's shape and Concat-1's axis attributes;
    consumed_inputs, a hint with no effect)."""
    rng = np.random.default_rng(61)
    f32 = lambda *s: rng.standard_normal(s).astype(np.float32)
    root = os.path.join(out, "legacy")
    if os.path.isdir(root):
        shutil.rmtree(root)

    def case(name, opset, node, ins, outs):
        """ins: (name, array) graph inputs; outs: (name, expected array)."""
        vi = lambda n, a: helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), list(a.shape))
        g = helper.make_graph([node], name, [vi(n, a) for n, a in ins], [vi(n, a) for n, a in outs])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="tessel-gen")
        m.ir_version = 3
        d = os.path.join(root, "test_" + name)
        os.makedirs(os.path.join(d, "test_data_set_0"))
        onnx.save(m, os.path.join(d, "model.onnx"))
        for kind, vals in (("input", ins), ("output", outs)):
            for i, (n, a) in enumerate(vals):
                with open(os.path.join(d, "test_data_set_0", f"{kind}_{i}.pb"), "wb") as f:
                    f.write(numpy_helper.from_array(a, n).SerializeToString())

    a, b = f32(2, 3, 4, 5), f32(3, 4)
    case("add_axis1_op6", 6, helper.make_node("Add", ["a", "b"], ["y"], broadcast=1, axis=1),
         [("a", a), ("b", b)], [("y", a + b[:, :, None])])
    a, b = f32(2, 3, 4), f32(2)
    case("mul_axis0_op6", 6, helper.make_node("Mul", ["a", "b"], ["y"], broadcast=1, axis=0),
         [("a", a), ("b", b)], [("y", a * b[:, None, None])])
    a, b = f32(2, 3, 4), f32(4)
    case("sub_suffix_op6", 6, helper.make_node("Sub", ["a", "b"], ["y"], broadcast=1),
         [("a", a), ("b", b)], [("y", a - b)])
    a, b = f32(2, 3, 4), f32(1, 1)
    case("div_one_element_op6", 6, helper.make_node("Div", ["a", "b"], ["y"], broadcast=1),
         [("a", a), ("b", b)], [("y", a / b)])
    a, b = f32(2, 3, 4), f32(2, 3)
    case("greater_axis0_op6", 6, helper.make_node("Greater", ["a", "b"], ["y"], broadcast=1, axis=0),
         [("a", a), ("b", b)], [("y", a > b[:, :, None])])
    a, b = f32(3, 5), f32(3, 5)
    case("add_same_shape_op6", 6, helper.make_node("Add", ["a", "b"], ["y"]), [("a", a), ("b", b)], [("y", a + b)])
    x, sl = f32(2, 3, 4, 5), f32(3)
    case("prelu_channel_op6", 6, helper.make_node("PRelu", ["x", "s"], ["y"]),
         [("x", x), ("s", sl)], [("y", np.where(x > 0, x, x * sl[:, None, None]))])
    x = f32(2, 3, 4)
    case("reshape_attr_op4", 4, helper.make_node("Reshape", ["x"], ["y"], shape=[6, -1], consumed_inputs=[0]),
         [("x", x)], [("y", x.reshape(6, -1))])
    a, b = f32(2, 3), f32(2, 5)
    case("concat_default_axis_op3", 3, helper.make_node("Concat", ["a", "b"], ["y"]),
         [("a", a), ("b", b)], [("y", np.concatenate([a, b], axis=1))])
    x = f32(2, 3)
    case("relu_consumed_op1", 1, helper.make_node("Relu", ["x"], ["y"], consumed_inputs=[0]),
         [("x", x)], [("y", np.maximum(x, 0))])
    x, sc, bi, mu = f32(2, 3, 4), f32(3), f32(3), f32(3)
    var = np.abs(f32(3)) + 0.5
    y = (x - mu[:, None]) / np.sqrt(var[:, None] + np.float32(1e-3)) * sc[:, None] + bi[:, None]
    case("batchnorm_is_test_op5", 5, helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"],
                                                      is_test=1, epsilon=1e-3, consumed_inputs=[0, 0, 0, 1, 1]),
         [("x", x), ("s", sc), ("b", bi), ("m", mu), ("v", var)], [("y", y.astype(np.float32))])
    x = f32(2, 3, 5)
    case("dropout_is_test_op6", 6, helper.make_node("Dropout", ["x"], ["y"], is_test=1, ratio=0.4),
         [("x", x)], [("y", x)])


def ort_shapes(model):
    """Output shapes onnxruntime produces on seeded inputs (None without onnxruntime)."""
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(5)
    feeds = {}
    for i in sess.get_inputs():
        shape = [d if isinstance(d, int) else 3 for d in i.shape]
        feeds[i.name] = random_feed(rng, i.type, shape)
    outs = sess.run(None, feeds)
    return [list(o.shape) for o in outs]


def quantized_models(out):
    """A dynamically quantized MLP (onnxruntime.quantization.quantize_dynamic:
    DynamicQuantizeLinear, MatMulInteger) and a QDQ CNN (quantize_static with
    per-channel int8 weights and uint8 activations, 8 seeded calibration
    inputs), and that CNN in the operator format (QLinearConv), and an
    EfficientNet block and a small ResNet quantized like the CNN:
    quant_mlp_dyn.onnx, quant_cnn_qdq.onnx, quant_cnn_qop.onnx,
    quant_mbconv_qdq.onnx, quant_resnet_qdq.onnx (and quant_mlp_dyn_exact.onnx,
    the MLP's exact reference, as below); and the encoder block
    transformer_erf quantized dynamically, quant_transformer_dyn.onnx, with
    its exact reference quant_transformer_dyn_exact.onnx."""
    import tempfile
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType, quantize_dynamic,
                                          quantize_static)
    import logging
    logging.getLogger().setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory() as td:
        b = Builder(3)
        h = b.op("Relu", [b.op("Add", [b.op("MatMul", ["x", b.weight("w1", [24, 40])]), b.weight("b1", [40], 0.1)])])
        b.op("Add", [b.op("MatMul", [h, b.weight("w2", [40, 10])]), b.weight("b2", [10], 0.1)])
        b.nodes[-1].output[0] = "y"
        f = os.path.join(td, "mlp.onnx")
        onnx.save(b.model("quant_mlp", [helper.make_tensor_value_info("x", F, ["batch", 24])],
                          [helper.make_tensor_value_info("y", F, ["batch", 10])], 13), f)
        quantize_dynamic(f, os.path.join(out, "quant_mlp_dyn.onnx"), weight_type=QuantType.QInt8)
        onnx.save(exact_matmul_integer(onnx.load(os.path.join(out, "quant_mlp_dyn.onnx"))),
                  os.path.join(out, "quant_mlp_dyn_exact.onnx"))
        b = Builder(4)
        c = b.op("Relu", [b.op("Conv", ["x", b.weight("w1", [8, 3, 3, 3]), b.weight("b1", [8], 0.1)], pads=[1, 1, 1, 1])])
        c = b.op("MaxPool", [c], kernel_shape=[2, 2], strides=[2, 2])
        c = b.op("Relu", [b.op("Conv", [c, b.weight("w2", [16, 8, 3, 3]), b.weight("b2", [16], 0.1)], pads=[1, 1, 1, 1])])
        c = b.op("Flatten", [b.op("GlobalAveragePool", [c])])
        b.op("Gemm", [c, b.weight("w3", [10, 16]), b.weight("b3", [10], 0.1)], transB=1)
        b.nodes[-1].output[0] = "y"
        f = os.path.join(td, "cnn.onnx")
        onnx.save(b.model("quant_cnn", [helper.make_tensor_value_info("x", F, [1, 3, 12, 12])],
                          [helper.make_tensor_value_info("y", F, [1, 10])], 13), f)

        class Reader(CalibrationDataReader):
            def __init__(self):
                self.d = iter([{"x": np.random.default_rng(i).standard_normal((1, 3, 12, 12)).astype(np.float32)}
                               for i in range(8)])

            def get_next(self):
                return next(self.d, None)
        quantize_static(f, os.path.join(out, "quant_cnn_qdq.onnx"), Reader(), quant_format=QuantFormat.QDQ,
                        per_channel=True, activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
        # the same CNN in the operator format: QLinearConv with an int32 bias
        quantize_static(f, os.path.join(out, "quant_cnn_qop.onnx"), Reader(), quant_format=QuantFormat.QOperator,
                        per_channel=True, activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                        op_types_to_quantize=["Conv"])
        # an EfficientNet block (MBConv) the way quantize_static writes EfficientNet-B0: a 1x1 expansion,
        # SiLU as Sigmoid and a Mul of two dequantized tensors, a depthwise 3x3 conv (per-channel weights
        # on axis 0 of a group-15 conv), squeeze-excitation (GlobalAveragePool, two 1x1 convs, a Sigmoid
        # broadcast over H x W by a Mul), a 1x1 projection and the residual Add, each between
        # DequantizeLinear and QuantizeLinear; odd channels and extents
        b = Builder(5)

        def silu(t):
            return b.op("Mul", [t, b.op("Sigmoid", [t])])
        c = silu(b.op("Conv", ["x", b.weight("w1", [15, 5, 1, 1]), b.weight("b1", [15], 0.1)]))
        c = silu(b.op("Conv", [c, b.weight("w2", [15, 1, 3, 3]), b.weight("b2", [15], 0.1)], group=15, pads=[1, 1, 1, 1]))
        e = silu(b.op("Conv", [b.op("GlobalAveragePool", [c]), b.weight("w3", [4, 15, 1, 1]), b.weight("b3", [4], 0.1)]))
        e = b.op("Sigmoid", [b.op("Conv", [e, b.weight("w4", [15, 4, 1, 1]), b.weight("b4", [15], 0.1)])])
        c = b.op("Conv", [b.op("Mul", [c, e]), b.weight("w5", [5, 15, 1, 1]), b.weight("b5", [5], 0.1)])
        b.op("Add", [c, "x"])
        b.nodes[-1].output[0] = "y"
        f = os.path.join(td, "mbconv.onnx")
        onnx.save(b.model("quant_mbconv", [helper.make_tensor_value_info("x", F, [1, 5, 13, 11])],
                          [helper.make_tensor_value_info("y", F, [1, 5, 13, 11])], 13), f)

        class Reader2(CalibrationDataReader):
            def __init__(self):
                self.d = iter([{"x": np.random.default_rng(i).standard_normal((1, 5, 13, 11)).astype(np.float32)}
                               for i in range(8)])

            def get_next(self):
                return next(self.d, None)
        quantize_static(f, os.path.join(out, "quant_mbconv_qdq.onnx"), Reader2(), quant_format=QuantFormat.QDQ,
                        per_channel=True, activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
        # a small ResNet the way quantize_static writes ResNet-50 (the qdq pass's channels-last region):
        # a 7x7 stride-2 stem with Relu, a padded 3x3 stride-2 MaxPool, a bottleneck with a strided 1x1
        # projection and one with the identity shortcut, each ending in Add -> Relu, GlobalAveragePool
        # and a Gemm; odd channels and extents
        b = Builder(6)

        def cv(t, m, c, k, s=1, relu=True):
            p = k // 2
            t = b.op("Conv", [t, b.weight("w", [m, c, k, k]), b.weight("b", [m], 0.1)], kernel_shape=[k, k],
                     strides=[s, s], pads=[p, p, p, p])
            return b.op("Relu", [t]) if relu else t

        def bottleneck(t, c, mid, m, s):
            y = cv(cv(cv(t, mid, c, 1), mid, mid, 3, s), m, mid, 1, relu=False)
            sc = cv(t, m, c, 1, s, relu=False) if s != 1 or c != m else t
            return b.op("Relu", [b.op("Add", [y, sc])])
        c = cv("x", 12, 3, 7, 2)
        c = b.op("MaxPool", [c], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
        c = bottleneck(c, 12, 8, 20, 2)
        c = bottleneck(c, 20, 8, 20, 1)
        c = b.op("Flatten", [b.op("GlobalAveragePool", [c])])
        b.op("Gemm", [c, b.weight("wf", [10, 20]), b.weight("bf", [10], 0.1)], transB=1)
        b.nodes[-1].output[0] = "y"
        f = os.path.join(td, "resnet.onnx")
        onnx.save(b.model("quant_resnet", [helper.make_tensor_value_info("x", F, [1, 3, 37, 35])],
                          [helper.make_tensor_value_info("y", F, [1, 10])], 13), f)

        class Reader3(CalibrationDataReader):
            def __init__(self):
                self.d = iter([{"x": np.random.default_rng(i).standard_normal((1, 3, 37, 35)).astype(np.float32)}
                               for i in range(8)])

            def get_next(self):
                return next(self.d, None)
        quantize_static(f, os.path.join(out, "quant_resnet_qdq.onnx"), Reader3(), quant_format=QuantFormat.QDQ,
                        per_channel=True, activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
        # the encoder block (transformer_erf: LayerNormalization, q/k/v, attention, Erf gelu, symbolic batch)
        # quantized the way quantize_dynamic writes BERT: DynamicQuantizeLinear -> MatMulInteger -> Cast ->
        # Mul by the scales, per-tensor int8 weights; and the same with each MatMulInteger written as an
        # int32 MatMul (exact_matmul_integer), onnxruntime's exact reference for it
        f = os.path.join(td, "transformer_erf.onnx")
        onnx.save(transformer(17, True), f)
        quantize_dynamic(f, os.path.join(out, "quant_transformer_dyn.onnx"), weight_type=QuantType.QInt8)
        m = onnx.load(os.path.join(out, "quant_transformer_dyn.onnx"))
        onnx.save(exact_matmul_integer(m), os.path.join(out, "quant_transformer_dyn_exact.onnx"))


def exact_matmul_integer(m):
    """m with every MatMulInteger(a, b, a_zp, b_zp) as MatMul(i32(a) - i32(a_zp), i32(b) - i32(b_zp)):
    onnxruntime's int32 MatMul sums exactly, where its AVX2 MatMulInteger kernel adds pairs of u8 x s8
    products in a saturating int16 (vpmaddubsw), off by up to 2^15 where both products of a pair are
    large (VNNI machines are exact either way)."""
    nodes = []
    for n in m.graph.node:
        if n.op_type != "MatMulInteger":
            nodes.append(n)
            continue
        ins = []
        for j in (0, 1):
            c = n.output[0] + "_exact_in%d" % j
            nodes.append(helper.make_node("Cast", [n.input[j]], [c], to=TensorProto.INT32))
            if len(n.input) > j + 2 and n.input[j + 2]:
                nodes.append(helper.make_node("Cast", [n.input[j + 2]], [c + "_zp"], to=TensorProto.INT32))
                nodes.append(helper.make_node("Sub", [c, c + "_zp"], [c + "_c"]))
                c += "_c"
            ins.append(c)
        nodes.append(helper.make_node("MatMul", ins, [n.output[0]]))
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    return m


def qdq_int_models(out):
    """QDQ models for the integer ops the qdq pass makes (ir/graph/qdq.c),
    written by hand with odd channel counts, per-channel int8 weights,
    strides, uneven pads, groups, a Relu before a QuantizeLinear, a MaxPool
    between DequantizeLinear and QuantizeLinear, int32 biases, and uint8
    outputs (the QuantizeLinear's, compared bit for bit with onnxruntime's
    fused QDQ kernels: test_passes_ort runs them with its graph
    optimisations on); and data movement between DequantizeLinear and
    QuantizeLinear: qdq_conv.onnx, qdq_matmul.onnx, qdq_matmul_act.onnx,
    qdq_moves.onnx."""
    rng = np.random.default_rng(23)
    U8 = TensorProto.UINT8

    def q(b, x, s, z):
        sc, zp = b.const("s", np.array(s, np.float32)), b.const("z", np.array(z, np.uint8))
        return b.op("QuantizeLinear", [x, sc, zp]), sc, zp

    def dq(b, x, sc, zp, axis=1):
        return b.op("DequantizeLinear", [x, sc, zp] if zp else [x, sc], axis=axis)

    def wdq(b, shape, axis, per_channel=True):
        # 7-bit weights (onnxruntime's reduce_range): its AVX2 u8 x s8 kernels add two products in a
        # saturating int16 (vpmaddubsw), exact only below 2 * 255 * 64; VNNI machines are exact either way
        w = b.const("w", rng.integers(-64, 64, shape).astype(np.int8))
        n = shape[axis]
        ws = rng.uniform(0.002, 0.006, n if per_channel else ()).astype(np.float32)
        wz = np.zeros(n if per_channel else (), np.int8)
        return dq(b, w, b.const("ws", ws), b.const("wz", wz), axis), ws

    def bias(b, xs, ws, n):
        bs = (np.float32(xs) * ws).astype(np.float32)
        return dq(b, b.const("b", rng.integers(-2000, 2000, n).astype(np.int32)), b.const("bs", bs), None, 0)

    b = Builder(23)
    xq, xs, xz = q(b, "x", 0.0081, 131)
    w1, ws1 = wdq(b, [7, 5, 3, 3], 0)
    c = b.op("Relu", [b.op("Conv", [dq(b, xq, xs, xz), w1, bias(b, 0.0081, ws1, 7)], strides=[2, 1], pads=[1, 0, 2, 1])])
    c, s1, z1 = q(b, c, 0.02, 0)
    c, _, _ = q(b, b.op("MaxPool", [dq(b, c, s1, z1)], kernel_shape=[2, 2], pads=[0, 1, 1, 0]), 0.02, 0)
    w2, ws2 = wdq(b, [7, 1, 3, 3], 0)
    c, s2, z2 = q(b, b.op("Conv", [dq(b, c, s1, z1), w2, bias(b, 0.02, ws2, 7)], group=7, strides=[2, 2], pads=[1, 1, 1, 1]), 0.012, 128)
    w3, _ = wdq(b, [3, 7, 1, 1], 0, per_channel=False)
    b.op("QuantizeLinear", [b.op("Conv", [dq(b, c, s2, z2), w3]), b.const("s", np.array(0.01, np.float32)),
                            b.const("z", np.array(128, np.uint8))])
    b.nodes[-1].output[0] = "y"
    onnx.save(b.model("qdq_conv", [helper.make_tensor_value_info("x", F, [1, 5, 11, 9])],
                      [helper.make_tensor_value_info("y", U8, [1, 3, 3, 4])], 13), os.path.join(out, "qdq_conv.onnx"))

    b = Builder(24)
    xq, xs, xz = q(b, "x", 0.0093, 120)
    w1, _ = wdq(b, [13, 11], 1)
    h, s1, z1 = q(b, b.op("MatMul", [dq(b, xq, xs, xz), w1]), 0.015, 125)
    w2, ws2 = wdq(b, [5, 11], 0)
    b.op("QuantizeLinear", [b.op("Gemm", [dq(b, h, s1, z1), w2, bias(b, 0.015, ws2, 5)], transB=1),
                            b.const("s", np.array(0.014, np.float32)), b.const("z", np.array(110, np.uint8))])
    b.nodes[-1].output[0] = "y"
    onnx.save(b.model("qdq_matmul", [helper.make_tensor_value_info("x", F, [3, 13])],
                      [helper.make_tensor_value_info("y", U8, [3, 5])], 13), os.path.join(out, "qdq_matmul.onnx"))

    # a batched MatMul of two activations (attention's scores): QLinearMatMul with a batched b
    b = Builder(26)
    xq, xs, xz = q(b, "x", 0.0079, 128)
    kq, ks, kz = q(b, b.op("Transpose", [dq(b, xq, xs, xz)], perm=[0, 1, 3, 2]), 0.0079, 128)
    b.op("QuantizeLinear", [b.op("MatMul", [dq(b, xq, xs, xz), dq(b, kq, ks, kz)]),
                            b.const("s", np.array(0.011, np.float32)), b.const("z", np.array(101, np.uint8))])
    b.nodes[-1].output[0] = "y"
    onnx.save(b.model("qdq_matmul_act", [helper.make_tensor_value_info("x", F, [2, 3, 5, 7])],
                      [helper.make_tensor_value_info("y", U8, [2, 3, 5, 5])], 13), os.path.join(out, "qdq_matmul_act.onnx"))

    # data movement between DequantizeLinear and QuantizeLinear: the pass runs each on the uint8 tensor; one
    # QuantizeLinear with another scale (a requantize that stays), a Concat of two branches of one scale
    b = Builder(25)
    i64 = lambda *v: b.const("i", np.array(v, np.int64))
    S, Z = 0.0087, 129
    x, _, _ = q(b, "x", S, Z)

    def mv(x, op, ins=(), s=S, z=Z, **attrs):
        sc, zp = b.const("s", np.array(S, np.float32)), b.const("z", np.array(Z, np.uint8))
        return q(b, b.op(op, [dq(b, x, sc, zp)] + list(ins), **attrs), s, z)[0]

    t = mv(x, "Transpose", perm=[0, 2, 3, 1])                       # [2, 5, 4, 6]
    t = mv(t, "Reshape", [i64(2, 5, 24)])                           # [2, 5, 24]
    t = mv(t, "Slice", [i64(1), i64(20), i64(2), i64(3)])           # [2, 5, 7]
    t = mv(t, "Gather", [i64(4, 0, 2)], axis=1)                     # [2, 3, 7]
    t = mv(t, "Unsqueeze", [i64(1)])                                # [2, 1, 3, 7]
    u = mv(t, "Resize", ["", b.const("sc", np.array([1, 1, 2, 1.5], np.float32))], mode="nearest")  # [2, 1, 6, 10]
    u = mv(u, "MaxPool", kernel_shape=[3, 2], strides=[2, 2], pads=[1, 0, 1, 1])  # [2, 1, 3, 5]
    t = mv(t, "Squeeze", [i64(1)])                                  # [2, 3, 7]
    t = mv(t, "Flatten", s=0.011, z=120)                            # [2, 21], another scale: stays a requantize
    v = mv(u, "Flatten")                                            # [2, 15]
    c = mv(v, "Concat", [dq(b, v, b.const("s", np.array(S, np.float32)), b.const("z", np.array(Z, np.uint8)))], axis=1)
    b.op("Identity", [c])
    b.nodes[-1].output[0] = "y"
    b.op("Identity", [t])
    b.nodes[-1].output[0] = "y2"
    onnx.save(b.model("qdq_moves", [helper.make_tensor_value_info("x", F, [2, 6, 5, 4])],
                      [helper.make_tensor_value_info("y", U8, [2, 30]), helper.make_tensor_value_info("y2", U8, [2, 21])], 13),
              os.path.join(out, "qdq_moves.onnx"))


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    # ops/ is rewritten whole: a model an older generator wrote (renamed or
    # dropped since) would otherwise stay and be tested by directory walks
    ops = os.path.join(out, "ops")
    if os.path.isdir(ops):
        for f in os.listdir(ops):
            if f.endswith(".onnx") or f == "manifest.json":
                os.remove(os.path.join(ops, f))
    os.makedirs(ops, exist_ok=True)
    onnx.save(mlp(), os.path.join(out, "mlp.onnx"))
    onnx.save(cnn(), os.path.join(out, "cnn.onnx"))
    onnx.save(transformer(20, False), os.path.join(out, "transformer.onnx"))
    onnx.save(transformer(17, True), os.path.join(out, "transformer_erf.onnx"))
    onnx.save(transformer_dyn(), os.path.join(out, "transformer_dyn.onnx"))
    onnx.save(transformer_flat(), os.path.join(out, "transformer_flat.onnx"))
    quantized_models(out)
    qdq_int_models(out)
    manifest = []
    for stem, opset, m in op_models():
        # (no onnx.checker here: the op models' outputs declare no shape, which it wants)
        onnx.save(m, os.path.join(out, "ops", stem + ".onnx"))
        node = m.graph.node[-1 if stem.startswith("reshape") else 0]
        # com.microsoft's Gelu and Attention are tessel's "Gelu.ms" and "Attention.ms"
        op = node.op_type + (".ms" if node.domain == "com.microsoft" and node.op_type in ("Gelu", "Attention") else "")
        manifest.append({"file": stem + ".onnx", "opset": opset, "op": op,
                         "outputs": [o.name for o in m.graph.output], "shapes": ort_shapes(m)})
    for stem, m in dyn_models():
        onnx.save(m, os.path.join(out, "ops", stem + ".onnx"))
    with open(os.path.join(out, "ops", "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    for stem, m in mathops_sym_models():
        onnx.save(m, os.path.join(out, "ops", stem + ".onnx"))
    save_ops2_models(os.path.join(out, "ops"))
    for stem, m in bad_models().items():
        onnx.save(m, os.path.join(out, "ops", stem + ".onnx"))
    save_graphfix_models(out)
    legacy_cases(out)
    with open(os.path.join(out, "models.stamp"), "w") as f:
        f.write("generated by gen_models.py\n")
    print(f"gen_models: wrote 5 models and {len(manifest)} op models to {out}")


# -- ops2: Einsum (ir/graph/op_contract.c), TopK, ScatterND/ScatterElements/Scatter (op_scatter.c) --
def ops2_models():
    """Single-node models of Einsum (several spellings, odd extents, a
    symbolic batch), TopK (k attribute and input, smallest, int64 with ties)
    and the scatters (every reduction, negative indices, duplicates where a
    reduction makes them well defined). test_passes_ort runs each against
    onnxruntime."""
    rng = np.random.default_rng(15)
    i64 = lambda *v: np.array(v, dtype=np.int64)
    f32 = lambda *s: (rng.standard_normal(s) * 0.5).astype(np.float32)
    M = []

    def add(stem, opset, op_type, ins, outs=(("y", F),), attrs=None):
        node = helper.make_node(op_type, [n for n, _ in ins], [o for o, _ in outs], name=stem, **(attrs or {}))
        # ins: ('name', shape) a float input, ('name', (shape, type)) a typed one, ('name', ndarray) a constant
        inits = [numpy_helper.from_array(v, n) for n, v in ins if n and isinstance(v, np.ndarray)]
        gin = [helper.make_tensor_value_info(n, *((v[1], v[0]) if isinstance(v, tuple) else (F, v)))
               for n, v in ins if n and not isinstance(v, np.ndarray)]
        gout = [helper.make_tensor_value_info(o, t, None) for o, t in outs if t is not None]
        m = helper.make_model(helper.make_graph([node], stem, gin, gout, inits),
                              opset_imports=[helper.make_opsetid("", opset)], producer_name="tessel-gen")
        m.ir_version = 8 if opset <= 18 else 9
        M.append((f"{stem}_op{opset}", opset, m))

    E = lambda eq: dict(equation=eq)
    add("einsum_bmm", 12, "Einsum", [("a", [3, 5, 7]), ("b", [3, 7, 2])], attrs=E("bij,bjk->bik"))
    add("einsum_mm_implicit", 13, "Einsum", [("a", [5, 7]), ("b", [7, 3])], attrs=E("ij,jk"))
    add("einsum_attn", 13, "Einsum", [("q", [2, 3, 5, 7]), ("k", [2, 3, 11, 7])], attrs=E("bhqd,bhkd->bhqk"))
    add("einsum_dot", 13, "Einsum", [("a", [7]), ("b", [7])], attrs=E("i,i->"))
    add("einsum_diag", 13, "Einsum", [("a", [5, 5])], attrs=E("ii->i"))
    add("einsum_transpose", 13, "Einsum", [("a", [3, 5, 2])], attrs=E("ijk->kji"))
    add("einsum_sum", 13, "Einsum", [("a", [3, 5])], attrs=E("ij->"))
    add("einsum_outer", 13, "Einsum", [("a", [3]), ("b", [5])], attrs=E("i,j->ij"))
    add("einsum_ellipsis", 13, "Einsum", [("a", [2, 1, 5, 3]), ("b", [1, 3, 3, 4])], attrs=E("...ij,...jk->...ik"))
    add("einsum_three", 13, "Einsum", [("a", [2, 3, 5]), ("b", f32(5, 7)), ("c", [7, 3])], attrs=E("abc, cd ,de -> abe"))
    add("einsum_implicit_sorted", 13, "Einsum", [("a", [5, 3]), ("b", [3, 2])], attrs=E("kj,jb"))
    L = TensorProto.INT64
    add("topk_attr", 9, "TopK", [("x", [3, 11])], outs=(("v", F), ("i", L)), attrs=dict(k=4))
    add("topk_input", 10, "TopK", [("x", [7, 5]), ("k", i64(3))], outs=(("v", F), ("i", L)), attrs=dict(axis=0))
    add("topk_smallest", 11, "TopK", [("x", [2, 13, 3]), ("k", i64(5))], outs=(("v", F), ("i", L)), attrs=dict(axis=1, largest=0))
    add("topk_ties", 11, "TopK", [("x", ([4, 9], L)), ("k", i64(9))], outs=(("v", L), ("i", L)))
    add("topk_ties_smallest", 11, "TopK", [("x", ([4, 9], L)), ("k", i64(6))], outs=(("v", L), ("i", L)), attrs=dict(largest=0))
    add("topk_indices", 11, "TopK", [("x", [5, 7]), ("k", i64(2))], outs=(("v", None), ("i", L)))  # values unused
    add("scatternd", 11, "ScatterND", [("x", [4, 5, 3]), ("i", i64(1, 3, 0).reshape(3, 1)), ("u", [3, 5, 3])])
    add("scatternd_elem", 13, "ScatterND", [("x", [4, 6]), ("i", i64(1, 2, 3, 5, 0, 0).reshape(3, 2)), ("u", [3])])
    add("scatternd_3d_idx", 13, "ScatterND", [("x", [7, 4]), ("i", i64(5, 0, 3, 6, 1, 2).reshape(3, 2, 1)), ("u", [3, 2, 4])])
    add("scatternd_add", 16, "ScatterND", [("x", [3, 4, 5]), ("i", i64(0, 1, 2, 3, 0, 1).reshape(3, 2)), ("u", [3, 5])], attrs=dict(reduction="add"))
    add("scatternd_mul", 16, "ScatterND", [("x", [3, 4, 5]), ("i", i64(0, 1, 2, 3, 0, 1, 1, 1).reshape(2, 2, 2)), ("u", [2, 2, 5])], attrs=dict(reduction="mul"))
    add("scatternd_max", 18, "ScatterND", [("x", [5, 3]), ("i", i64(4, 1, 4).reshape(3, 1)), ("u", [3, 3])], attrs=dict(reduction="max"))
    add("scatternd_min", 18, "ScatterND", [("x", [5, 3]), ("i", i64(4, 1, 4).reshape(3, 1)), ("u", [3, 3])], attrs=dict(reduction="min"))
    add("scatterelements", 11, "ScatterElements", [("x", [3, 5]), ("i", i64(1, -1, 0, 2, 4, -5).reshape(3, 2)), ("u", [3, 2])], attrs=dict(axis=1))
    add("scatterelements_small", 13, "ScatterElements", [("x", [4, 5]), ("i", i64(3, 0, 1, 2, 1, 0).reshape(2, 3)), ("u", [2, 3])])
    add("scatterelements_add", 16, "ScatterElements", [("x", [3, 5]), ("i", i64(1, 1, 4, 0, 0, 0).reshape(3, 2)), ("u", [3, 2])], attrs=dict(axis=1, reduction="add"))
    add("scatterelements_mul", 16, "ScatterElements", [("x", [3, 5]), ("i", i64(1, 1, 4, 0, 0, 2).reshape(3, 2)), ("u", [3, 2])], attrs=dict(axis=-1, reduction="mul"))
    add("scatterelements_max", 18, "ScatterElements", [("x", [4, 3]), ("i", i64(0, 2, 0, 0, 2, 1).reshape(2, 3)), ("u", [2, 3])], attrs=dict(reduction="max"))
    add("scatterelements_min", 18, "ScatterElements", [("x", [4, 3]), ("i", np.array([[0, 2, 0], [0, 2, 1]], np.int32)), ("u", [2, 3])], attrs=dict(reduction="min"))
    add("scatter", 9, "Scatter", [("x", [3, 5]), ("i", i64(1, 3, 0, 2, 4, 0).reshape(3, 2)), ("u", [3, 2])], attrs=dict(axis=1))
    add("scatter", 10, "Scatter", [("x", [4, 3]), ("i", i64(3, 0, 1).reshape(1, 3)), ("u", [1, 3])])
    # ConvTranspose groups / dilations / output_shape past the op's reach, AveragePool dilations
    X = ("x", [2, 4, 5, 7])
    add("convtranspose_group", 17, "ConvTranspose", [X, ("w", f32(4, 3, 3, 2)), ("b", f32(6))], attrs=dict(group=2, strides=[2, 3], pads=[1, 0, 0, 1], output_padding=[1, 2]))
    add("convtranspose_dil", 17, "ConvTranspose", [X, ("w", f32(4, 2, 3, 3))], attrs=dict(dilations=[2, 3], strides=[1, 2]))
    add("convtranspose_group_dil", 22, "ConvTranspose", [X, ("w", f32(4, 1, 2, 3))], attrs=dict(group=4, dilations=[3, 2], strides=[3, 1], output_padding=[2, 0]))
    add("convtranspose_same_lower", 17, "ConvTranspose", [X, ("w", f32(4, 3, 3, 3))], attrs=dict(auto_pad="SAME_LOWER", strides=[2, 2]))
    add("convtranspose_oshape_big", 17, "ConvTranspose", [("x", [1, 1, 3, 3]), ("w", f32(1, 2, 3, 3))], attrs=dict(strides=[3, 2], output_shape=[10, 8]))
    add("averagepool_dil", 19, "AveragePool", [X], attrs=dict(kernel_shape=[2, 3], dilations=[2, 2], pads=[1, 2, 1, 0]))
    add("averagepool_dil_incl", 19, "AveragePool", [X], attrs=dict(kernel_shape=[3, 2], dilations=[2, 3], pads=[1, 1, 2, 1], count_include_pad=1, strides=[2, 1]))
    add("averagepool_dil_ceil", 19, "AveragePool", [X], attrs=dict(kernel_shape=[2, 2], dilations=[2, 2], strides=[2, 2], ceil_mode=1))
    add("castlike", 15, "CastLike", [("x", [2, 3, 5]), ("t", np.array([1], np.int32))], outs=(("y", TensorProto.INT32),))
    add("castlike_f64", 19, "CastLike", [("x", ([3, 5], L)), ("t", np.array([0.5], np.float64))], outs=(("y", TensorProto.DOUBLE),))
    sc = lambda *v: np.array(v, np.float32)
    add("resize_cubic", 13, "Resize", [("x", [1, 2, 5, 7]), ("r", sc()), ("s", sc(1, 1, 2, 1.5))], attrs=dict(mode="cubic"))
    add("resize_cubic_excl", 19, "Resize", [("x", [2, 3, 6, 5]), ("r", sc()), ("s", sc(1, 1, 0.6, 1.8))], attrs=dict(mode="cubic", exclude_outside=1, cubic_coeff_a=-0.5))
    add("resize_cubic_ac", 18, "Resize", [("x", [1, 2, 4, 5]), ("r", sc()), ("", None), ("z", i64(7, 3))], attrs=dict(mode="cubic", coordinate_transformation_mode="align_corners", axes=[2, 3]))
    add("resize_cubic_asym", 13, "Resize", [("x", [1, 1, 5, 4]), ("r", sc()), ("s", sc(1, 1, 1.5, 2.5))], attrs=dict(mode="cubic", coordinate_transformation_mode="asymmetric"))
    add("resize_cubic_pt", 13, "Resize", [("x", [2, 9]), ("r", sc()), ("", None), ("z", i64(2, 4))], attrs=dict(mode="cubic", coordinate_transformation_mode="pytorch_half_pixel"))
    # quantization (op_quant.c): one model per op and opset form, shapes checked against onnxruntime
    U8, I8, I32 = TensorProto.UINT8, TensorProto.INT8, TensorProto.INT32
    add("quantize_u8", 10, "QuantizeLinear", [("x", [2, 3, 5]), ("s", np.array(0.02, np.float32)), ("z", np.array(128, np.uint8))],
        outs=(("y", U8),))
    add("quantize_axis", 13, "QuantizeLinear", [("x", [2, 3, 5]), ("s", np.array([0.1, 0.02, 0.05], np.float32)),
                                                 ("z", np.array([0, -4, 9], np.int8))], outs=(("y", I8),), attrs=dict(axis=1))
    add("dequantize_axis", 13, "DequantizeLinear", [("x", ([2, 3, 5], U8)), ("s", np.array([0.1, 0.02, 0.05], np.float32)),
                                                     ("z", np.array([3, 128, 0], np.uint8))], attrs=dict(axis=1))
    add("dequantize_i32", 10, "DequantizeLinear", [("x", ([4, 3], I32)), ("s", np.array(0.5, np.float32))])
    # per tensor on a 1-D x: the default axis 1 is out of range and not read (a QDQ DenseNet's biases)
    add("dequantize_1d", 13, "DequantizeLinear", [("x", ([5], U8)), ("s", np.array(0.25, np.float32)), ("z", np.array(3, np.uint8))])
    add("dyn_quantize", 11, "DynamicQuantizeLinear", [("x", [3, 7])], outs=(("y", U8), ("ys", F), ("yz", U8)))
    # b in [-60, 60): onnxruntime's AVX2 u8 x s8 kernel (vpmaddubsw) saturates a
    # pair of products at int16, so full-range operands differ from the
    # specification on CPUs without VNNI; 2 * 255 * 60 stays below 2^15
    add("matmul_integer", 10, "MatMulInteger", [("a", ([2, 3, 7], U8)),
                                                 ("b", np.random.default_rng(8).integers(-60, 60, (7, 5)).astype(np.int8)),
                                                 ("az", np.array(7, np.uint8)),
                                                 ("bz", np.array([1, 0, -1, 2, 3], np.int8))], outs=(("y", I32),))
    add("qlinear_conv", 10, "QLinearConv", [("x", ([1, 2, 7, 6], U8)), ("xs", np.array(0.03, np.float32)), ("xz", np.array(120, np.uint8)),
                                             ("w", np.random.default_rng(6).integers(-60, 60, (4, 2, 3, 3)).astype(np.int8)),
                                             ("ws", np.array([0.01, 0.02, 0.015, 0.03], np.float32)), ("wz", np.array([0, 0, 0, 0], np.int8)),
                                             ("ys", np.array(0.2, np.float32)), ("yz", np.array(128, np.uint8)),
                                             ("b", np.array([100, -300, 0, 2000], np.int32))],
        outs=(("y", U8),), attrs=dict(pads=[1, 1, 1, 1], strides=[2, 1]))
    # QLinearConv as the integer op: groups, odd channel counts, strides and uneven pads, per-channel scales and
    # a bias; int8 activations with a nonzero weight zero point (the window-sum compensation). Weights of 7
    # bits with uint8 activations: onnxruntime's AVX2 u8 x s8 kernels saturate pairs of products in int16
    rq = np.random.default_rng(16)
    add("qlinear_conv_group", 10, "QLinearConv", [("x", ([1, 6, 9, 7], U8)), ("xs", np.array(0.021, np.float32)), ("xz", np.array(131, np.uint8)),
                                                   ("w", rq.integers(-64, 64, (9, 2, 3, 3)).astype(np.int8)),
                                                   ("ws", rq.uniform(0.002, 0.02, 9).astype(np.float32)), ("wz", np.zeros(9, np.int8)),
                                                   ("ys", np.array(0.37, np.float32)), ("yz", np.array(117, np.uint8)),
                                                   ("b", rq.integers(-3000, 3000, 9).astype(np.int32))],
        outs=(("y", U8),), attrs=dict(group=3, pads=[1, 2, 0, 1], strides=[2, 2]))
    add("qlinear_conv_s8", 10, "QLinearConv", [("x", ([2, 3, 5, 8], I8)), ("xs", np.array(0.05, np.float32)), ("xz", np.array(-7, np.int8)),
                                                ("w", rq.integers(-100, 100, (5, 3, 2, 3)).astype(np.int8)),
                                                ("ws", np.array(0.013, np.float32)), ("wz", np.array(3, np.int8)),
                                                ("ys", np.array(0.9, np.float32)), ("yz", np.array(-11, np.int8))],
        outs=(("y", I8),), attrs=dict(pads=[0, 1, 1, 1], dilations=[1, 2]))
    # a strided 1x1 QLinearConv (simplify subsamples its input with a Slice first)
    add("qlinear_conv_pointwise_stride", 10, "QLinearConv", [("x", ([2, 5, 9, 7], U8)), ("xs", np.array(0.04, np.float32)), ("xz", np.array(77, np.uint8)),
                                                              ("w", rq.integers(-64, 64, (3, 5, 1, 1)).astype(np.int8)),
                                                              ("ws", rq.uniform(0.002, 0.02, 3).astype(np.float32)), ("wz", np.zeros(3, np.int8)),
                                                              ("ys", np.array(0.09, np.float32)), ("yz", np.array(140, np.uint8))],
        outs=(("y", U8),), attrs=dict(strides=[2, 3]))
    # ConvInteger (onnxruntime's kernel: uint8 x and w, per-tensor zero points, padded with x's zero point)
    add("convinteger", 10, "ConvInteger", [("x", ([1, 3, 7, 6], U8)), ("w", rq.integers(0, 256, (5, 3, 3, 2)).astype(np.uint8)),
                                           ("xz", np.array(113, np.uint8)), ("wz", np.array(97, np.uint8))],
        outs=(("y", I32),), attrs=dict(pads=[1, 0, 2, 1], strides=[2, 1]))
    add("convinteger_group", 10, "ConvInteger", [("x", ([2, 4, 5, 5], U8)), ("w", rq.integers(0, 256, (6, 2, 3, 3)).astype(np.uint8)),
                                                 ("xz", np.array(200, np.uint8))],
        outs=(("y", I32),), attrs=dict(group=2, dilations=[2, 1], pads=[1, 1, 1, 1]))
    add("convinteger_nozp", 10, "ConvInteger", [("x", ([1, 2, 6, 6], U8)), ("w", ([3, 2, 1, 1], U8))], outs=(("y", I32),))
    add("qlinear_matmul", 10, "QLinearMatMul", [("a", ([3, 7], U8)), ("as", np.array(0.03, np.float32)), ("az", np.array(9, np.uint8)),
                                                 ("b", ([7, 5], I8)), ("bs", np.array(0.02, np.float32)), ("bz", np.array(0, np.int8)),
                                                 ("ys", np.array(0.1, np.float32)), ("yz", np.array(100, np.uint8))], outs=(("y", U8),))
    return M


def ops2_sym_models():
    """Models with a symbolic batch (no manifest entry: its shapes are static;
    test_passes_ort runs them at batch=2)."""
    out = []
    for stem, eq, a, b in [("einsum_attn_sym", "bhqd,bhkd->bhqk", ["batch", 3, 5, 7], ["batch", 3, 11, 7]),
                           ("einsum_bmm_sym", "...ij,...jk->...ik", ["batch", 5, 3], [1, 3, 4])]:
        node = helper.make_node("Einsum", ["a", "b"], ["y"], name=stem, equation=eq)
        g = helper.make_graph([node], stem, [helper.make_tensor_value_info("a", F, a), helper.make_tensor_value_info("b", F, b)],
                              [helper.make_tensor_value_info("y", F, None)])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], producer_name="tessel-gen")
        m.ir_version = 8
        out.append((stem + "_op13", m))
    return out


def save_ops2_models(ops_dir):
    """The ops2 models outside the manifest: symbolic batch, external data, refusals."""
    for stem, m in ops2_sym_models():
        onnx.save(m, os.path.join(ops_dir, stem + ".onnx"))
    save_ops2_extern_models(ops_dir)
    x = helper.make_tensor_value_info("x", F, [3, 5])
    k = helper.make_tensor_value_info("k", I64, [1])
    v, i = helper.make_tensor_value_info("v", F, None), helper.make_tensor_value_info("i", I64, None)
    y = helper.make_tensor_value_info("y", F, None)
    idx = numpy_helper.from_array(np.array([[1]], np.int64), "idx")
    upd = numpy_helper.from_array(np.ones((1, 5), np.float32), "u")
    bad = {
        "bad_topk_dynamic_k": ([helper.make_node("TopK", ["x", "k"], ["v", "i"], name="tk")], [x, k], [v, i], [], 13),
        "bad_topk_k_large": ([helper.make_node("TopK", ["x"], ["v", "i"], name="tk", k=6)], [x], [v, i], [], 9),
        "bad_einsum_letters": ([helper.make_node("Einsum", ["x", "x"], ["y"], name="es", equation="ij,jk->ik")], [x], [y], [], 13),
        "bad_einsum_term": ([helper.make_node("Einsum", ["x"], ["y"], name="es", equation="i2->i")], [x], [y], [], 13),
        "bad_scatternd_max16": ([helper.make_node("ScatterND", ["x", "idx", "u"], ["y"], name="sc", reduction="max")], [x], [y], [idx, upd], 16),
    }
    for stem, (nodes, ins, outs, inits, opset) in bad.items():
        mm = helper.make_model(helper.make_graph(nodes, stem, ins, outs, inits), opset_imports=[helper.make_opsetid("", opset)])
        mm.ir_version = 8
        onnx.save(mm, os.path.join(ops_dir, stem + ".onnx"))


def save_ops2_extern_models(ops_dir):
    """External data (weights beside the model): extern_mm_op17.onnx, every
    tensor in extern_mm_op17.bin (test_passes_ort runs it against
    onnxruntime); and the refusals test_onnx checks: a location that leaves
    the directory ('..', absolute), a missing file, a file too short."""
    rng = np.random.default_rng(16)
    b = Builder(16)
    h = b.op("Conv", ["x", b.weight("k", [2, 1, 2, 3])])
    h = b.op("MatMul", [h, b.weight("w", [5, 3])])
    h = b.op("Add", [h, b.weight("b", [3])])
    b.op("Gather", [h, b.const("g", np.array([2, 0], np.int64))], axis=3)
    b.nodes[-1].output[0] = "y"
    m = b.model("extern_mm", [helper.make_tensor_value_info("x", F, [1, 1, 5, 7])], [helper.make_tensor_value_info("y", F, [1, 2, 4, 2])], 17)
    onnx.save_model(m, os.path.join(ops_dir, "extern_mm_op17.onnx"), save_as_external_data=True,
                    all_tensors_to_one_file=True, location="extern_mm_op17.bin", size_threshold=0)
    x = helper.make_tensor_value_info("x", F, [2, 3])
    y = helper.make_tensor_value_info("y", F, None)
    for stem, loc, off, length in [("bad_extern_escape", "../weights.bin", None, None),
                                   ("bad_extern_abs", "/etc/hostname", None, None),
                                   ("bad_extern_missing", "no_such_weights.bin", None, None),
                                   ("bad_extern_trunc", "bad_extern_trunc.bin", "8", "24"),
                                   ("bad_extern_length", "bad_extern_trunc.bin", None, "20"),
                                   ("bad_extern_link", "bad_extern_link.bin", None, None)]:
        w = numpy_helper.from_array(rng.standard_normal((2, 3)).astype(np.float32), "w")
        w.ClearField("raw_data")
        w.data_location = TensorProto.EXTERNAL
        for k, v in (("location", loc), ("offset", off), ("length", length)):
            if v is not None:
                e = w.external_data.add()
                e.key, e.value = k, v
        g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"], name="a")], stem, [x], [y], [w])
        mm = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="tessel-gen")
        mm.ir_version = 8
        onnx.save(mm, os.path.join(ops_dir, stem + ".onnx"))
    with open(os.path.join(ops_dir, "bad_extern_trunc.bin"), "wb") as f:
        f.write(bytes(30))  # 30 bytes: offset 8 + 24 runs past the end
    link = os.path.join(ops_dir, "bad_extern_link.bin")  # a link out of the model's directory
    if os.path.lexists(link):
        os.remove(link)
    os.symlink("../mlp.onnx", link)


if __name__ == "__main__":
    main()
