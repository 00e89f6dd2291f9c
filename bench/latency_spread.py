#!/usr/bin/env python3
"""latency_spread.py MODEL.so MODEL.onnx INPUT.npy [options]

Issue 17's steadiness check: a built model's latency, run after run and process
after process, at 1 and 2 threads, beside onnxruntime (default graph
optimisations, intra_op_num_threads = the same count) in the same run.

For each thread count and each of --rounds rounds, one fresh `tessel run
MODEL.so --bench --repeat R --threads T --json` process and one fresh
onnxruntime process (bench/resnet18_ort.py: 5 warm-ups, then R timed runs) alternate, so both sides
see the same machine. Per side and thread count it prints:
  - the median of all R x rounds runs;
  - spread over runs: (p90 - p10) / median of the runs of each process, the
    worst process's (what one process sees from run to run);
  - max/min - 1 of the per-process medians (what moved between processes:
    the 16.8-23.8 ms swing the issue describes);
  - the slowest single run / the median.
The load average is printed before and after each thread count: the machine
may be shared, and the figures mean little when it is busy. Prints one
Markdown table; --json FILE also writes every run.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def pct(xs, q):
    xs = sorted(xs)
    k = (len(xs) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def run_tessel(tessel, so, inp_name, inp, threads, repeat):
    env = dict(os.environ, TESSEL_NUM_THREADS=str(threads))
    out = subprocess.run([tessel, "run", so, "--input", "%s=%s" % (inp_name, inp), "--bench", "--repeat",
                          str(repeat), "--threads", str(threads), "--json"], env=env, capture_output=True,
                         text=True, check=True).stdout
    return json.loads(out)["latency_ms"]["each"]


def run_ort(model, inp, threads, repeat):
    # bench/resnet18_ort.py: one session, default optimisations, 5 warm-ups (any one-input model)
    ort_py = os.path.join(os.path.dirname(os.path.abspath(__file__)), "resnet18_ort.py")
    with tempfile.TemporaryDirectory() as out_dir:
        out = subprocess.run([sys.executable, ort_py, model, inp, out_dir, str(threads), str(repeat)],
                             capture_output=True, text=True, check=True).stdout
    return json.loads(out)["each_ms"]


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("so")
    ap.add_argument("onnx")
    ap.add_argument("input", help="the model's one input as .npy")
    ap.add_argument("--input-name", default="data")
    ap.add_argument("--tessel", default="build/tessel")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--repeat", type=int, default=20, help="timed runs per process (default 20)")
    ap.add_argument("--rounds", type=int, default=5, help="processes per side and thread count (default 5)")
    ap.add_argument("--json", help="write every run here")
    a = ap.parse_args()
    rows, every = [], {}
    for th in [int(t) for t in a.threads.split(",")]:
        la0 = loadavg()
        runs = {"tessel": [], "onnxruntime": []}
        for _ in range(a.rounds):
            runs["tessel"].append(run_tessel(a.tessel, a.so, a.input_name, a.input, th, a.repeat))
            runs["onnxruntime"].append(run_ort(a.onnx, a.input, th, a.repeat))
        la1 = loadavg()
        for side, procs in runs.items():
            allr = [x for p in procs for x in p]
            med = statistics.median(allr)
            within = max((pct(p, 0.9) - pct(p, 0.1)) / statistics.median(p) for p in procs)
            meds = [statistics.median(p) for p in procs]
            rows.append((th, side, med, within, max(meds) / min(meds) - 1, max(allr) / med, meds, la0, la1))
        every[th] = runs
    print("| threads | side | median ms | worst process's (p90-p10)/median | per-process medians max/min-1 | "
          "slowest run / median | per-process medians (ms) | load before / after |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for th, side, med, within, between, worst, meds, la0, la1 in rows:
        print("| %d | %s | %.2f | %.1f %% | %.1f %% | %.2f | %s | %s / %s |" % (
            th, side, med, within * 100, between * 100, worst, " ".join("%.2f" % m for m in meds), la0, la1))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(every, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
