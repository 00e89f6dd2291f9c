"""Tune an ONNX model's kernels, build it into one shared library, and run
it on NumPy input, checked against onnxruntime.

    .venv/bin/python3 examples/python/model.py MODEL.onnx [TRIALS]
    (e.g. build/tests/models/mlp.onnx, made by `meson test`)
"""
import sys

import numpy as np
import onnxruntime as ort

import tessel

path = sys.argv[1] if len(sys.argv) > 1 else "build/tests/models/mlp.onnx"
trials = int(sys.argv[2]) if len(sys.argv) > 2 else 64
print(tessel.tune_model(path, trials=trials, log="model_example.jsonl"))
m = tessel.load(tessel.build_model(path, log="model_example.jsonl", output="model_example.so"))
feed = {}
for name, dtype, shape in m.inputs:  # symbolic dims (None) at 1
    feed[name] = np.random.rand(*[d or 1 for d in shape]).astype(dtype)
outputs = m(**feed)
want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feed)
for (name, _, _), got, ref in zip(m.outputs, outputs, want):
    print(f"{name}: shape {got.shape}, max error vs onnxruntime {np.abs(got - ref).max():.3g}")
