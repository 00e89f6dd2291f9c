"""Tune a kernel written in tessel's DSL, build the best schedule and call it
on NumPy arrays, checked against NumPy; then the same for an einsum string.

    .venv/bin/python3 examples/python/kernel.py [TRIALS]
"""
import sys

import numpy as np

import tessel

trials = int(sys.argv[1]) if len(sys.argv) > 1 else 32
src = """
kernel gelu_mm(A: f32[128, 96], B: f32[96, 80]) -> C: f32[128, 80] {
  acc[i, k] += A[i, j] * B[j, k]
  C[i, k] = acc[i, k] * 0.5 * (1.0 + tanh(0.7978845608 * (acc[i, k] + 0.044715 * acc[i, k] * acc[i, k] * acc[i, k])))
}
"""
r = tessel.tune(src, trials=trials, log="kernel_example.jsonl")
print(r)
k = tessel.build(src, log="kernel_example.jsonl")
a = np.random.rand(128, 96).astype(np.float32) - 0.5
b = np.random.rand(96, 80).astype(np.float32) - 0.5
x = a @ b
want = x * 0.5 * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))
print("max error vs NumPy:", np.abs(k(a, b) - want).max())

e = tessel.einsum("bij,bkj->bik", (4, 32, 16), (4, 24, 16))
tessel.tune(e, trials=trials, log="kernel_example.jsonl")
ke = tessel.build(e, log="kernel_example.jsonl")
p, q = np.random.rand(4, 32, 16).astype(np.float32), np.random.rand(4, 24, 16).astype(np.float32)
print("einsum max error:", np.abs(ke(p, q) - np.einsum("bij,bkj->bik", p, q)).max())
print(tessel.Log("kernel_example.jsonl").best())
