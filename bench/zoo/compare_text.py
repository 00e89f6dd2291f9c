#!/usr/bin/env python3
"""compare_text.py MODEL.onnx VOCAB BATCH SEQ MODEL.so - a transformer (token ids, attention mask;
the last row padded by a third) on onnxruntime and on `tessel run MODEL.so`, same inputs: prints
max |diff| / max |ref|. Run from the repository root. bench/RESULTS.md."""
import sys, os, subprocess, numpy as np, onnxruntime as ort
model, vocab, b, s = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rng = np.random.default_rng(1)
d = "/tmp/cmp_text"
os.makedirs(d + "/in", exist_ok=True)
sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
feeds = {}
for i in sess.get_inputs():
    if "mask" in i.name:
        m = np.ones((b, s), np.int64); m[-1, s - s // 3:] = 0; feeds[i.name] = m
    else:
        feeds[i.name] = rng.integers(0, vocab, (b, s)).astype(np.int64)
    if i.type == "tensor(int32)": feeds[i.name] = feeds[i.name].astype(np.int32)
    np.save(f"{d}/in/{i.name}.npy", feeds[i.name])
want = sess.run(None, feeds)[0]
args = ["build/tessel", "run", sys.argv[5], "--output-dir", d + "/out"]
for k in feeds: args += ["--input", f"{k}={d}/in/{k}.npy"]
subprocess.run(args, check=True, capture_output=True)
got = np.load(os.path.join(d, "out", sorted(os.listdir(d + "/out"))[0]))
print(model, want.shape, got.shape, "err/max", float(np.abs(want - got).max() / np.abs(want).max()))
