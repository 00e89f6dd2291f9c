#!/usr/bin/env python3
"""quant_zoo.py — quantized real models through tessel against onnxruntime
(issue 16): quantizes the zoo's ResNet-50 and EfficientNet-B0 with
onnxruntime's quantize_static (QDQ, per-channel int8 weights, uint8
activations, 4 seeded calibration images) and DistilBERT with quantize_dynamic (int8 weights), builds each with
tessel (untuned) twice, with the qdq pass (--qdq on, the default: QDQ chains
as integer ops) and without it (--qdq off: the float path), and prints max
abs error against onnxruntime (graph optimisations off: the Q/DQ ops as
written; and on: its int8 kernels; and onnxruntime's int8 kernels against
its own unoptimised graph, and that graph on the input plus N(0, 1e-6): the
spread rounding alone makes in that model)
and 1-thread latency of each, in the same
run: --rounds rounds of onnxruntime int8, tessel --qdq on and off in turn,
each the median (tessel) or mean (onnxruntime) of --repeat runs; the table
has the medians over the rounds.

  .venv/bin/python bench/quant/quant_zoo.py MODELS_DIR OUT_DIR [--tessel build/tessel] [--repeat 5] [--rounds 3]
      [--only NAME]   (only the models whose name contains NAME, e.g. resnet)
      [--modes on,off] (the builds to time: on, off, nchw (--qdq nchw: no channels-last region),
                        tuned (--qdq on --log LOG))
      [--log LOG]      (the tune-model log of the tuned build)

MODELS_DIR holds resnet50.onnx, efficientnet_b0.onnx and distilbert.onnx
(bench/zoo/export.py). bench/quant/qdq_nodes.py checks a QDQ model node by
node where the whole model's figure is large."""
import argparse
import logging
import os
import subprocess
import time

import numpy as np
import onnxruntime as ort
from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType, quantize_dynamic,
                                      quantize_static)
from onnxruntime.quantization.shape_inference import quant_pre_process


class Images(CalibrationDataReader):
    def __init__(self, name):
        self.d = iter([{name: np.random.default_rng(i).standard_normal((1, 3, 224, 224)).astype(np.float32)}
                       for i in range(4)])

    def get_next(self):
        return next(self.d, None)


def ort_run(path, feeds, opt, repeat):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL if opt else ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(path, so)
    y = s.run(None, feeds)[0]
    t = time.perf_counter()
    for _ in range(repeat):
        s.run(None, feeds)
    return y, (time.perf_counter() - t) / repeat * 1e3, s.get_outputs()[0].name


def tessel_run(a, so, feeds, out_dir, oname):
    args = [a.tessel, "run", so, "--output-dir", out_dir, "--threads", "1"]
    for k in feeds:
        args += ["--input", f"{k}={out_dir}/{k}.npy"]
    subprocess.run(args, check=True, capture_output=True)
    y = np.load(os.path.join(out_dir, oname + ".npy"))
    r = subprocess.run(args + ["--bench", "--repeat", str(a.repeat)], check=True, capture_output=True, text=True)
    ms = float([ln for ln in r.stdout.splitlines() if ln.startswith("latency")][0].split("median")[1].split()[0])
    return y, ms


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("models")
    ap.add_argument("out")
    ap.add_argument("--tessel", default="build/tessel")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default="", help="run the models whose name contains this (e.g. ResNet)")
    ap.add_argument("--modes", default="on,off", help="builds: on, off, nchw, tuned (--qdq on --log LOG)")
    ap.add_argument("--log", default="", help="the tune-model log for the tuned build")
    a = ap.parse_args()
    modes = a.modes.split(",")
    logging.getLogger().setLevel(logging.ERROR)
    os.makedirs(a.out, exist_ok=True)
    qm = {}
    for m in ("resnet50", "efficientnet_b0"):
        qm[m] = os.path.join(a.out, m + "_qdq.onnx")
        if a.only and a.only.lower() not in m.replace("_", "-"):
            continue
        pre = os.path.join(a.out, m + "_pre.onnx")
        quant_pre_process(os.path.join(a.models, m + ".onnx"), pre, skip_symbolic_shape=True)
        quantize_static(pre, qm[m], Images("input"), quant_format=QuantFormat.QDQ, per_channel=True,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    db = os.path.join(a.out, "distilbert_dyn.onnx")
    if not a.only or a.only.lower() in "distilbert":
        quantize_dynamic(os.path.join(a.models, "distilbert.onnx"), db, weight_type=QuantType.QInt8)
    ids = np.random.default_rng(3).integers(0, 30000, (2, 16)).astype(np.int64)
    am = np.ones((2, 16), np.int64)
    am[1, 12:] = 0
    img = {"input": np.random.default_rng(9).standard_normal((1, 3, 224, 224)).astype(np.float32)}
    cases = [("ResNet-50 QDQ", qm["resnet50"], img), ("EfficientNet-B0 QDQ", qm["efficientnet_b0"], img),
             ("DistilBERT dynamic b2 s16", db, {"input_ids": ids, "attention_mask": am})]
    print("| model | tessel --qdq | max abs err / max ref vs ort (no opt) | vs ort int8 | ort int8 vs ort (no opt) | "
          "ort (no opt): input + N(0, 1e-6) | 1 thr: tessel / ort int8 ms |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    cases = [c for c in cases if not a.only or a.only.lower() in c[0].lower()]
    for name, path, feeds in cases:
        d = os.path.join(a.out, os.path.basename(path)[:-5])
        os.makedirs(d, exist_ok=True)
        for k, v in feeds.items():
            np.save(os.path.join(d, k + ".npy"), v)
        r0, _, oname = ort_run(path, feeds, False, 1)
        m = np.abs(r0).max()
        # the model's own sensitivity: its float inputs moved far below one quantization step
        moved = {k: v + np.random.default_rng(1).standard_normal(v.shape).astype(np.float32) * np.float32(1e-6)
                 if v.dtype == np.float32 else v for k, v in feeds.items()}
        spread = np.abs(ort_run(path, moved, False, 1)[0] - r0).max() / m
        sos = {}
        for qdq in modes:
            sos[qdq] = os.path.join(a.out, os.path.basename(path)[:-5] + "_qdq_" + qdq + ".so")
            flags = ["--qdq", "on", "--log", a.log] if qdq == "tuned" else ["--qdq", qdq]
            subprocess.run([a.tessel, "build", path, "-o", sos[qdq]] + flags, check=True, capture_output=True)
        # --rounds rounds, each timing onnxruntime int8 and both builds in turn (medians over rounds): a
        # machine whose load changes shifts all three alike
        ms = {"ort": [], **{q: [] for q in modes}}
        ys = {}
        for _ in range(a.rounds):
            r1, t, _ = ort_run(path, feeds, True, a.repeat)
            ms["ort"].append(t)
            for qdq in modes:
                ys[qdq], t = tessel_run(a, sos[qdq], feeds, d, oname)
                ms[qdq].append(t)
        ort_ms = float(np.median(ms["ort"]))
        for qdq in modes:
            t = float(np.median(ms[qdq]))
            print(f"| {name} | {qdq} | {np.abs(ys[qdq] - r0).max() / m:.2g} | {np.abs(ys[qdq] - r1).max() / m:.2g} | "
                  f"{np.abs(r1 - r0).max() / m:.2g} | {spread:.2g} | {t:.3g} / {ort_ms:.3g} = {t / ort_ms:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
