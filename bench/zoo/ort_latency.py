#!/usr/bin/env python3
"""ort_latency.py MODEL.onnx X.npy [TESSEL_OUT_DIR] - onnxruntime's median latency of 10 runs (1 intra-op
thread, default graph optimisations) on one input; with TESSEL_OUT_DIR, first the error of that
directory's output against onnxruntime's (max |diff| / max |ref|). bench/RESULTS.md."""
import sys, time, numpy as np, onnxruntime as ort
m, x = sys.argv[1], np.load(sys.argv[2])
so = ort.SessionOptions(); so.intra_op_num_threads = 1
s = ort.InferenceSession(m, so, providers=["CPUExecutionProvider"])
name = s.get_inputs()[0].name
w = s.run(None, {name: x})[0]
if len(sys.argv) > 3:
    import glob; g = np.load(glob.glob(sys.argv[3] + "/*.npy")[0]); print("err", float(np.abs(w - g).max() / np.abs(w).max()))
for _ in range(3): s.run(None, {name: x})
t = []
for _ in range(10):
    t0 = time.perf_counter(); s.run(None, {name: x}); t.append(time.perf_counter() - t0)
print("onnxruntime median %.2f ms" % (1e3 * float(np.median(t))))
