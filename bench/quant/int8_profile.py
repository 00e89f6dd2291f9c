#!/usr/bin/env python3
"""int8_profile.py MODEL.onnx BUILD.so [--tessel build/tessel] [--repeat 10] [--input NAME=FILE.npy]

Where a tessel model build's time goes, per kernel: `tessel run BUILD.so --threads 1 --bench --repeat N
--profile --json` (per-call mean ms) joined with `tessel tasks MODEL.onnx` (each task's MFLOP per call):
per kernel its calls, total ms, share, and GOP/s (integer multiply-adds count 2, as the tasks' MFLOP),
largest first, and the sum. Beside bench/ort_profile.py (onnxruntime's per-node minima) and
`bench_baselines peak_pmaddwd` (the core's ceiling for the vpmaddwd kernels): issue 16's int8 profile."""
import argparse
import collections
import json
import subprocess


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("build")
    ap.add_argument("--tessel", default="build/tessel")
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--input", default="input=/tmp/qz/input.npy")
    a = ap.parse_args()
    tasks = subprocess.run([a.tessel, "tasks", a.model], check=True, capture_output=True, text=True).stdout
    mflop = {}
    for ln in tasks.splitlines()[1:]:
        f = ln.split()
        if len(f) == 5 and f[0].isdigit():
            mflop[f[1]] = float(f[4])
    r = subprocess.run([a.tessel, "run", a.build, "--threads", "1", "--input", a.input, "--bench", "--repeat",
                        str(a.repeat), "--profile", "--json"], check=True, capture_output=True, text=True)
    js = json.loads(r.stdout)
    ms = collections.defaultdict(float)
    calls = collections.Counter()
    for c in js["profile"]:
        ms[c["kernel"]] += c["ms"]
        calls[c["kernel"]] += 1
    total = sum(ms.values())
    print(f"{'kernel':56s} {'calls':>5s} {'ms':>8s} {'%':>6s} {'GOP/s':>7s}")
    for k in sorted(ms, key=lambda k: -ms[k]):
        g = mflop.get(k, 0.0) * calls[k] / ms[k] if ms[k] > 0 else 0.0
        print(f"{k:56s} {calls[k]:5d} {ms[k]:8.3f} {100 * ms[k] / total:6.1f} {g:7.1f}")
    print(f"{'sum of calls':56s} {sum(calls.values()):5d} {total:8.3f}")
    flops = sum(mflop.get(k, 0.0) * calls[k] for k in ms)
    print(f"model: {flops / 1e3:.2f} GOP in {total:.2f} ms = {flops / total:.1f} GOP/s")


if __name__ == "__main__":
    main()
