#!/usr/bin/env python3
"""profile_ops.py — where one inference's time goes, tessel beside onnxruntime.

Runs MODEL.onnx in onnxruntime with SessionOptions.enable_profiling (1 thread by
default) on the inputs of DIR (input_ids.npy, attention_mask.npy, ... as
bench/zoo/zoo.py writes them), sums its per-node kernel times by op type, and
sums a `tessel run MODEL.so --profile --json` of the same inputs by kernel
name (the kernel's task name without its trailing _N), both per inference.
The two columns are not matched op by op (tessel fuses): read them as where
each spends its time.

  profile_ops.py MODEL.onnx MODEL.so INPUT_DIR [--threads 1] [--repeat 5]
                 [--tessel build/tessel]
"""
import argparse
import collections
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import onnxruntime as ort


def ort_profile(model, feeds, threads, repeat):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.enable_profiling = True
    so.profile_file_prefix = os.path.join(tempfile.mkdtemp(), "ort")
    s = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    s.run(None, feeds)  # warm-up, counted out below
    for _ in range(repeat):
        s.run(None, feeds)
    path = s.end_profiling()
    ev = json.load(open(path))
    runs = [e for e in ev if e.get("cat") == "Session" and e.get("name") == "model_run"]
    per_op = collections.Counter()
    first_run_end = runs[0]["ts"] + runs[0]["dur"] if runs else 0
    for e in ev:
        if e.get("cat") != "Node" or not e.get("name", "").endswith("_kernel_time"):
            continue
        if e["ts"] < first_run_end:  # the warm-up run
            continue
        per_op[e.get("args", {}).get("op_name", "?")] += e["dur"] / 1e3 / repeat
    total = sum(r["dur"] for r in runs[1:]) / 1e3 / max(len(runs) - 1, 1)
    return per_op, total


def tessel_profile(tessel, so, inputs, threads, repeat):
    cmd = [tessel, "run", so, "--threads", str(threads), "--profile", "--json", "--bench", "--repeat", str(repeat)]
    for name, path in inputs.items():
        cmd += ["--input", f"{name}={path}"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    p = json.loads(out)["profile"]
    per = collections.Counter()
    kinds = collections.Counter()
    for c in p:
        per[re.sub(r"_\d+$", "", c["kernel"])] += c["ms"]
        kinds["generic" if c["spec"] < 0 else "bucket" if c["covers"] else "exact"] += 1
    return per, sum(c["ms"] for c in p), kinds


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("so")
    ap.add_argument("inputs")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--tessel", default="build/tessel")
    a = ap.parse_args()
    inputs = {os.path.basename(f)[:-4]: f for f in sorted(glob.glob(os.path.join(a.inputs, "*.npy")))}
    feeds = {k: np.load(v) for k, v in inputs.items()}
    per_ort, ort_total = ort_profile(a.model, feeds, a.threads, a.repeat)
    per_ts, ts_total, kinds = tessel_profile(a.tessel, a.so, inputs, a.threads, a.repeat)
    shapes = ", ".join(f"{k} {list(v.shape)}" for k, v in feeds.items())
    print(f"# {os.path.basename(a.model)} ({shapes}), {a.threads} thread(s), mean of {a.repeat} runs")
    print(f"# onnxruntime {ort.__version__}: model_run {ort_total:.2f} ms; tessel: sum of calls {ts_total:.2f} ms"
          f" ({dict(kinds)} calls)")
    print(f"{'onnxruntime op':<28}{'ms':>10}   {'tessel kernel':<48}{'ms':>10}")
    lo = per_ort.most_common()
    lt = per_ts.most_common()
    for i in range(max(len(lo), len(lt))):
        l = f"{lo[i][0]:<28}{lo[i][1]:>10.2f}" if i < len(lo) else " " * 38
        r = f"{lt[i][0][:47]:<48}{lt[i][1]:>10.2f}" if i < len(lt) else ""
        print(f"{l}   {r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
