#!/usr/bin/env python3
"""qdq_compare.py — one QDQ model's tessel builds against onnxruntime's int8
kernels at 1 thread, in the same run (issue 16): --rounds rounds, each the
median of --repeat onnxruntime runs (graph optimisations on: its int8
kernels) then of each build's `tessel run --bench --repeat` in turn; prints
the median over rounds of each, the ratio, and each build's max abs error
against onnxruntime without optimisations (the Q/DQ ops as written) and with,
over the reference's max |value|, with `uptime` (the machine's load).

  .venv/bin/python bench/quant/qdq_compare.py MODEL.onnx A.so [B.so ...] [--tessel build/tessel]
      [--rounds 3] [--repeat 5] [--input NAME] [--cpu-time]

The builds come from `tessel build MODEL.onnx -o A.so` (untuned) or with
`--log LOG` (tuned); the input is N(0, 1) of the model's input shape, seed 9
(as quant_zoo.py)."""
import argparse
import os
import resource
import subprocess
import tempfile
import time

import numpy as np
import onnxruntime as ort


def session(model, opt):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_ENABLE_ALL if opt
                                   else ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    return ort.InferenceSession(model, so)


def child_cpu_ms(cmd):
    """The CPU time (user + sys, ms) of running cmd to its end."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, check=True, capture_output=True)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime) * 1e3


def time_round(a, run_ort, tessel_cmd, builds, ms):
    """One round: the median of --repeat onnxruntime runs (wall ms), or with
    --cpu-time their CPU ms each (this process's), then each build's
    `tessel run --bench` median (wall) or CPU ms per inference (the
    --repeat N+1 run minus a --repeat 1 run, over N: start-up, loading and
    the warm-up cancel)."""
    ts = []
    for _ in range(a.repeat):
        t, c = time.perf_counter(), time.process_time()
        run_ort()
        ts.append((time.process_time() - c if a.cpu_time else time.perf_counter() - t) * 1e3)
    ms["ort"].append(float(np.median(ts)))
    for b in builds:
        if a.cpu_time:
            one = child_cpu_ms(tessel_cmd(b) + ["--bench", "--repeat", "1"])
            n = child_cpu_ms(tessel_cmd(b) + ["--bench", "--repeat", str(a.repeat + 1)])
            ms[b].append((n - one) / a.repeat)
            continue
        r = subprocess.run(tessel_cmd(b) + ["--bench", "--repeat", str(a.repeat)], check=True, capture_output=True,
                           text=True)
        line = [ln for ln in r.stdout.splitlines() if ln.startswith("latency")][0]
        ms[b].append(float(line.split("median")[1].split()[0]))


def tessel_args(a, so, inp, d):
    return [a.tessel, "run", so, "--threads", "1", "--input", f"{a.input}={inp}", "--output-dir", d]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("builds", nargs="+")
    ap.add_argument("--tessel", default="build/tessel")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--cpu-time", action="store_true",
                    help="time in CPU ms per inference (this process's for onnxruntime, the child's for tessel: "
                         "its --repeat N+1 run minus a --repeat 1 run, over N): a loaded machine's waits left out")
    ap.add_argument("--input", default="input")
    a = ap.parse_args()
    s = session(a.model, True)
    shape = [d if isinstance(d, int) else 1 for d in s.get_inputs()[0].shape]
    x = np.random.default_rng(9).standard_normal(shape).astype(np.float32)
    d = tempfile.mkdtemp(prefix="qdq_compare")
    inp = os.path.join(d, a.input + ".npy")
    np.save(inp, x)
    ref = s.run(None, {a.input: x})[0]
    r0 = session(a.model, False).run(None, {a.input: x})[0]
    oname = s.get_outputs()[0].name
    ms = {k: [] for k in ["ort"] + a.builds}
    for _ in range(a.rounds):
        time_round(a, lambda: s.run(None, {a.input: x}), lambda b: tessel_args(a, b, inp, d), a.builds, ms)
    print(os.popen("uptime").read().strip())
    o = float(np.median(ms["ort"]))
    m = float(np.abs(r0).max())
    if a.cpu_time:
        print("CPU ms per inference (--cpu-time)")
    print(f"onnxruntime int8, 1 thread: {o:.1f} ms (rounds {', '.join(f'{v:.1f}' for v in ms['ort'])})")
    for b in a.builds:
        subprocess.run(tessel_args(a, b, inp, d), check=True, capture_output=True)
        y = np.load(os.path.join(d, oname + ".npy"))
        t = float(np.median(ms[b]))
        print(f"{b}: {t:.1f} ms = {t / o:.2f}x onnxruntime int8; max abs err / max ref: vs ort (no opt) "
              f"{np.abs(y - r0).max() / m:.2g}, vs ort int8 {np.abs(y - ref).max() / m:.2g} "
              f"(rounds {', '.join(f'{v:.1f}' for v in ms[b])})")


if __name__ == "__main__":
    main()
