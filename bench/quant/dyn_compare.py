#!/usr/bin/env python3
"""dyn_compare.py — a dynamically quantized transformer (onnxruntime's
quantize_dynamic: DynamicQuantizeLinear → MatMulInteger → Cast → Mul by the
scales) through tessel against onnxruntime's int8 kernels at 1 thread, in the
same run (issue 16; the sibling of qdq_compare.py for token inputs).

  .venv/bin/python bench/quant/dyn_compare.py MODEL.onnx A.so [B.so ...] [--tessel build/tessel]
      [--batch 2] [--seq 16] [--rounds 3] [--repeat 5] [--make SRC.onnx] [--cpu-time]

--make SRC.onnx first writes MODEL.onnx with quantize_dynamic(SRC, int8
weights) (onnxruntime's defaults: per-tensor weights, u8 activations). The
builds come from `tessel build MODEL.onnx -o A.so`. Inputs as quant_zoo.py's
DistilBERT case: input_ids uniform in [0, 30000) (seed 3), attention_mask ones
with the last quarter of the second sequence 0. Each round takes the median of
--repeat onnxruntime runs (graph optimisations on: its DynamicQuantizeMatMul /
MatMulIntegerToFloat kernels), then of each build's `tessel run --bench
--repeat`; printed: the median over rounds, the ratio, and each build's max abs
error over the reference's max |value| against onnxruntime without
optimisations (the ops as written), with them, and against onnxruntime on
the model with each MatMulInteger written as an int32 MatMul (exact sums, as
tessel's: onnxruntime's AVX2 MatMulInteger saturates pairs of products in
int16), with `uptime`."""
import argparse
import logging
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnxruntime as ort

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from qdq_compare import session, time_round  # noqa: E402 (its sibling: one copy of the timing)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "models"))
from gen_models import exact_matmul_integer  # noqa: E402 (the suite's exact reference, one copy)


def feeds_for(s, batch, seq):
    feeds = {}
    for i in s.get_inputs():
        if "mask" in i.name:
            v = np.ones((batch, seq), np.int64)
            if batch > 1:
                v[1, seq - seq // 4:] = 0
        elif "type" in i.name:
            v = np.zeros((batch, seq), np.int64)
        else:
            v = np.random.default_rng(3).integers(0, 30000, (batch, seq)).astype(np.int64)
        feeds[i.name] = v
    return feeds


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("builds", nargs="*")
    ap.add_argument("--tessel", default="build/tessel")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--cpu-time", action="store_true",
                    help="time in CPU ms per inference (this process's for onnxruntime, the child's for tessel: "
                         "its --repeat N+1 run minus a --repeat 1 run, over N): a loaded machine's waits left out")
    ap.add_argument("--make", default="", help="quantize_dynamic this float model into MODEL first")
    a = ap.parse_args()
    if a.make:
        from onnxruntime.quantization import QuantType, quantize_dynamic
        logging.getLogger().setLevel(logging.ERROR)
        quantize_dynamic(a.make, a.model, weight_type=QuantType.QInt8)
    s = session(a.model, True)
    feeds = feeds_for(s, a.batch, a.seq)
    d = tempfile.mkdtemp(prefix="dyn_compare")
    args = []
    for k, v in feeds.items():
        np.save(os.path.join(d, k + ".npy"), v)
        args += ["--input", f"{k}={d}/{k}.npy"]
    ref = s.run(None, feeds)[0]
    r0 = session(a.model, False).run(None, feeds)[0]
    import onnx
    xp = os.path.join(d, "exact.onnx")
    onnx.save(exact_matmul_integer(onnx.load(a.model)), xp)
    rx = session(xp, False).run(None, feeds)[0]
    oname = s.get_outputs()[0].name
    m = float(np.abs(r0).max())
    print(f"onnxruntime int8 against its own unoptimised graph: {np.abs(ref - r0).max() / m:.2g} of max |ref|; "
          f"that graph against its exact form (MatMulInteger as int32 MatMul): {np.abs(r0 - rx).max() / m:.2g}")
    ms = {k: [] for k in ["ort"] + a.builds}
    for _ in range(a.rounds):
        time_round(a, lambda: s.run(None, feeds),
                   lambda b: [a.tessel, "run", b, "--threads", "1", "--output-dir", d] + args, a.builds, ms)
    print(os.popen("uptime").read().strip())
    o = float(np.median(ms["ort"]))
    if a.cpu_time:
        print("CPU ms per inference (--cpu-time)")
    print(f"onnxruntime int8, 1 thread, b{a.batch} s{a.seq}: {o:.1f} ms (rounds {', '.join(f'{v:.1f}' for v in ms['ort'])})")
    for b in a.builds:
        subprocess.run([a.tessel, "run", b, "--threads", "1", "--output-dir", d] + args, check=True,
                       capture_output=True)
        y = np.load(os.path.join(d, oname + ".npy"))
        t = float(np.median(ms[b]))
        print(f"{b}: {t:.1f} ms = {t / o:.2f}x onnxruntime int8; max abs err / max ref: vs ort (no opt) "
              f"{np.abs(y - r0).max() / m:.2g}, vs ort int8 {np.abs(y - ref).max() / m:.2g}, vs ort exact sums "
              f"{np.abs(y - rx).max() / m:.2g} "
              f"(rounds {', '.join(f'{v:.1f}' for v in ms[b])})")


if __name__ == "__main__":
    main()
