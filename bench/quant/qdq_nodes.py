#!/usr/bin/env python3
"""qdq_nodes.py — every compute node of a QDQ model in isolation, tessel
against onnxruntime: where a quantized model's output differs, tells a
wrong op from rounding that a deep network amplifies.

Runs the model once on onnxruntime (graph optimisations off: the Q/DQ ops
as written) and keeps every QuantizeLinear's output. Then each node that is
not a QuantizeLinear or DequantizeLinear (Conv, Sigmoid, Mul, Add,
GlobalAveragePool, Gemm, ...) becomes a model of its own: its quantized
activations are inputs, fed onnxruntime's values from the full run, then
its DequantizeLinears, the node and its QuantizeLinear. These are built
with tessel (--qdq on or off) in groups of at most 60 inputs (`tessel run`
takes 64) and run on the same inputs on both. Prints, per node whose
uint8 output differs anywhere, the largest difference in quantization
steps and how many elements differ, and for each differing element how
far onnxruntime's own float value (the node's output, before its
QuantizeLinear) lies from a rounding boundary (x.5 steps): float sums in
another order round such a tie either way; for a Conv, also which of the
two its sum in float64 rounds to. Exit status 1 when a node
differs by more than one step or at an element that is not within --tie
steps of a boundary (for a Conv: nor within the error bound of an f32 sum
of its K terms, twice K * 2^-24 * sum |term|), else 0.

  .venv/bin/python bench/quant/qdq_nodes.py MODEL.onnx OUT_DIR [--tessel build/tessel] [--qdq off] [--seed 9] [--tie 1e-4]

Float model inputs are standard normal from numpy's default_rng(--seed)
(symbolic dims 1). Needs each node's output to feed exactly one
QuantizeLinear and its inputs to come from DequantizeLinears (the QDQ format
of onnxruntime's quantize_static)."""
import argparse
import copy
import os
import re
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

QDQ = ("QuantizeLinear", "DequantizeLinear")


def qtype(q, inits):
    """A QuantizeLinear's output type: its zero point's (uint8 without one)."""
    return inits[q.input[2]].data_type if len(q.input) > 2 and q.input[2] in inits else TensorProto.UINT8


def session(model):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


def dequantized(d, inits, ref):
    """A DequantizeLinear's output as both compute it: f32 (q - zp) * scale."""
    arr = lambda name: onnx.numpy_helper.to_array(inits[name]) if name in inits else ref[name]
    q = arr(d.input[0]).astype(np.float32)
    sc = arr(d.input[1]).astype(np.float32)
    zp = arr(d.input[2]).astype(np.float32) if len(d.input) > 2 and d.input[2] else np.zeros_like(sc)
    if sc.size > 1:
        shp = [1] * q.ndim
        shp[next((x.i for x in d.attribute if x.name == "axis"), 1) % q.ndim] = -1
        sc, zp = sc.reshape(shp), zp.reshape(shp)
    return (q - zp) * sc


def conv64(n, x, w, b):
    """A 2-D Conv summed in float64 (explicit pads), or None for another form."""
    at = {x.name: helper.get_attribute_value(x) for x in n.attribute}
    if x.ndim != 4 or at.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
        return None
    grp, st = at.get("group", 1), at.get("strides", [1, 1])
    dl, pd = at.get("dilations", [1, 1]), at.get("pads", [0, 0, 0, 0])
    x = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pd[0], pd[2]), (pd[1], pd[3])))
    w = w.astype(np.float64)
    co, cpg, kh, kw = w.shape
    ho = (x.shape[2] - dl[0] * (kh - 1) - 1) // st[0] + 1
    wo = (x.shape[3] - dl[1] * (kw - 1) - 1) // st[1] + 1
    y = np.zeros((x.shape[0], co, ho, wo))
    for g in range(grp):
        cs = slice(g * (co // grp), (g + 1) * (co // grp))
        for i in range(kh):
            for j in range(kw):
                xs = x[:, g * cpg:(g + 1) * cpg, i * dl[0]:i * dl[0] + st[0] * (ho - 1) + 1:st[0],
                       j * dl[1]:j * dl[1] + st[1] * (wo - 1) + 1:st[1]]
                y[:, cs] += np.einsum("nchw,oc->nohw", xs, w[cs, :, i, j])
    if b is not None:
        y += b.astype(np.float64).reshape(1, -1, 1, 1)
    return y


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("out")
    ap.add_argument("--tessel", default="build/tessel")
    ap.add_argument("--qdq", default="off", choices=("on", "off"))
    ap.add_argument("--seed", type=int, default=9)
    ap.add_argument("--tie", type=float, default=1e-4)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    m = onnx.load(a.model)
    g = m.graph
    inits = {t.name: t for t in g.initializer}
    prod = {o: n for n in g.node for o in n.output}
    cons = {}
    for n in g.node:
        for i in n.input:
            cons.setdefault(i, []).append(n)
    rng = np.random.default_rng(a.seed)
    feeds = {}
    for i in g.input:
        if i.name in inits:
            continue
        shape = [d.dim_value if d.HasField("dim_value") else 1 for d in i.type.tensor_type.shape.dim]
        feeds[i.name] = rng.standard_normal(shape).astype(np.float32)
    # the full model once, every QuantizeLinear's output kept
    full = copy.deepcopy(m)
    have = {o.name for o in full.graph.output}
    for q in g.node:
        if q.op_type == "QuantizeLinear" and q.output[0] not in have:
            full.graph.output.append(helper.make_tensor_value_info(q.output[0], qtype(q, inits), None))
    s = session(full)
    ref = dict(zip([o.name for o in s.get_outputs()], s.run(None, feeds)))

    work = []
    for n in g.node:
        if n.op_type in QDQ or all(i in inits or not i for i in n.input):
            continue
        qs = [c for c in cons.get(n.output[0], []) if c.op_type == "QuantizeLinear"]
        acts = []
        for i in n.input:
            if not i or i in inits:
                continue
            d = prod.get(i)
            if d is None or d.op_type != "DequantizeLinear" or len(qs) != 1:
                sys.exit(f"qdq_nodes: node {n.name or n.op_type} ({n.op_type}): input {i} does not come from a "
                         f"DequantizeLinear or its output does not feed one QuantizeLinear: not a QDQ model")
            if d.input[0] not in inits:
                acts.append(d.input[0])
        work.append((n, qs[0], acts))

    bad = worst = 0
    ndiff = 0
    total = 0
    while work:
        group, names = [], set()
        while work and len(names | set(work[0][2])) <= 60:
            names |= set(work[0][2])
            group.append(work.pop(0))
        if not group:
            group.append(work.pop(0))
        nodes, ins, outs, gfeeds, idx = [], [], [], {}, {}
        for k, (n, q, _) in enumerate(group):
            p = f"n{k}_"
            nn = copy.deepcopy(n)
            nn.name = p + (n.name or n.op_type)
            for j, i in enumerate(n.input):
                if not i or i in inits:
                    continue
                d = copy.deepcopy(prod[i])
                d.name, d.output[0], nn.input[j] = p + (d.name or "dq"), p + i, p + i
                if d.input[0] not in inits:
                    src = d.input[0]
                    if src not in idx:
                        idx[src] = f"in{len(idx)}"
                        gfeeds[idx[src]] = ref[src]
                        ins.append(helper.make_tensor_value_info(idx[src], TensorProto.UINT8 if ref[src].dtype == np.uint8
                                                                 else TensorProto.INT8, ref[src].shape))
                    d.input[0] = idx[src]
                nodes.append(d)
            nn.output[0] = f"f{k}"
            qq = copy.deepcopy(q)
            qq.name, qq.input[0], qq.output[0] = p + (q.name or "q"), f"f{k}", f"y{k}"
            nodes += [nn, qq]
            outs.append(helper.make_tensor_value_info(f"y{k}", qtype(q, inits), None))
        used = {i for nd in nodes for i in nd.input}

        def make(outs):
            sub = helper.make_model(helper.make_graph(nodes, "nodes", ins, outs,
                                                      [t for t in g.initializer if t.name in used]),
                                    opset_imports=m.opset_import)
            sub.ir_version = m.ir_version
            return sub
        # tessel's model has only the quantized outputs (a float value read elsewhere would keep the
        # qdq pass from fusing its chain); onnxruntime's also has each node's float output
        sub = make(outs)
        fouts = [helper.make_tensor_value_info(f"f{k}", TensorProto.FLOAT, None) for k in range(len(group))]
        r = dict(zip([o.name for o in outs + fouts], session(make(outs + fouts)).run(None, gfeeds)))
        sub_path = os.path.join(a.out, "nodes.onnx")
        onnx.save(sub, sub_path)
        so = os.path.abspath(os.path.join(a.out, "nodes.so"))
        subprocess.run([a.tessel, "build", sub_path, "-o", so, "--qdq", a.qdq], check=True, capture_output=True)
        args = []
        for name, v in gfeeds.items():
            np.save(os.path.join(a.out, name + ".npy"), v)
            args += ["--input", f"{name}={os.path.join(a.out, name + '.npy')}"]
        subprocess.run([a.tessel, "run", so, "--output-dir", a.out] + args, check=True, capture_output=True)
        for k, (n, q, _) in enumerate(group):
            t = np.load(os.path.join(a.out, f"y{k}.npy")).astype(np.int64)
            o = r[f"y{k}"].astype(np.int64)
            total += 1
            if not (t != o).any():
                continue
            ndiff += 1
            d = np.abs(t - o)
            sc = onnx.numpy_helper.to_array(inits[q.input[1]]).astype(np.float64)
            if sc.size > 1:
                ax = next((x.i for x in q.attribute if x.name == "axis"), 1)
                shp = [1] * t.ndim
                shp[ax] = -1
                sc = sc.reshape(shp)
            v = r[f"f{k}"].astype(np.float64) / sc
            tie = np.abs(np.abs(v - np.floor(v)) - 0.5)[t != o]
            near = np.full(tie.shape, a.tie)
            # a Conv summed in float64 and rounded: which side is right
            right = ""
            if n.op_type == "Conv":
                xs = [dequantized(prod[i], inits, ref) if i else None for i in n.input] + [None]
                y = conv64(n, xs[0], xs[1], xs[2])
                if y is not None:
                    # an f32 sum of K terms is within K * 2^-24 * sum |term| of the exact one, so two such
                    # sums are within twice that of each other: onnxruntime's value that close to a boundary
                    # is a tie the other sum may cross
                    w = xs[1]
                    k_terms = int(np.prod(w.shape[1:])) + (xs[2] is not None)
                    mag = conv64(n, np.abs(xs[0]), np.abs(w), None if xs[2] is None else np.abs(xs[2]))
                    near = np.maximum(near, (2 * k_terms * 2.0 ** -24 * mag / np.abs(sc))[t != o])
                    zp = (onnx.numpy_helper.to_array(inits[q.input[2]]).astype(np.float64)
                          if len(q.input) > 2 and q.input[2] in inits else 0.0)
                    info = np.iinfo(np.uint8 if qtype(q, inits) == TensorProto.UINT8 else np.int8)
                    e = np.clip(np.round(y / sc) + zp, info.min, info.max)[t != o]
                    right = (f"; the float64 sum rounds as tessel at {int((e == t[t != o]).sum())}, "
                             f"as onnxruntime at {int((e == o[t != o]).sum())}")
            worst = max(worst, int(d.max()))
            if d.max() > 1 or (tie > near).any():
                bad += 1
            print(f"{n.op_type:18s} {n.name or '?':60s} max {int(d.max())} step, {int((d > 0).sum())} of {d.size} elements; "
                  f"ort's float value from a .5 boundary: at most {tie.max():.2g} step{right}", flush=True)
    print(f"{total} nodes, {ndiff} differ (largest {worst} step); {bad} by more than one step or off a rounding tie "
          f"(farther from x.5 than --tie {a.tie:g} step or, for a Conv, an f32 sum's error bound)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
