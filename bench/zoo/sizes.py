#!/usr/bin/env python3
"""sizes.py — one or more built models (tessel build MODEL.onnx ... -o B.so) against
onnxruntime at every batch x sequence, 1 thread by default: the table of issue
22 (docs/MODEL.md "Shape buckets"; bench/buckets.sh builds and times the same
way through zoo.py, with the tuning).

For each size, ROUNDS rounds; a round times every .so (`tessel run B.so --bench
--repeat R --threads T`, its median) and onnxruntime (its own graph
optimisations, T intra-op threads, the median of R runs after 2 warm-ups),
the starting side alternating by round. Each side keeps the lowest of its
round medians; the ratio is tessel / onnxruntime. Every tessel output is
checked against onnxruntime's (max |x - ref| / max |ref|, bar 1e-3, as zoo.py).
Inputs are zoo.py's (bench/zoo/zoo.py make_inputs, seed 7; the model's JSON
beside it gives the input names and the vocabulary).

  sizes.py MODEL.onnx B.so [B2.so ...] [--batches 1,8] [--seqs 17,64,128,384]
           [--repeat 3] [--rounds 2] [--threads 1] [--tessel build/tessel]
           [--work DIR]
Print `uptime` beside the table: figures move with the machine's load.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnxruntime as ort

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zoo  # noqa: E402  (make_inputs, rel_error)


def ort_ms(sess, feeds, repeat):
    for _ in range(2):
        sess.run(None, feeds)
    t = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        sess.run(None, feeds)
        t.append((time.perf_counter() - t0) * 1e3)
    return sorted(t)[len(t) // 2]


def tessel_ms(a, so, work, feeds, out_dir):
    cmd = [a.tessel, "run", so, "--bench", "--repeat", str(a.repeat), "--threads", str(a.threads), "--json",
           "--output-dir", out_dir]
    for k in feeds:
        cmd += ["--input", "%s=%s" % (k, os.path.join(work, zoo.sanitize(k) + ".npy"))]
    env = dict(os.environ, TESSEL_NUM_THREADS=str(a.threads), OMP_NUM_THREADS=str(a.threads),
               OPENBLAS_NUM_THREADS=str(a.threads))
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit("%s: %s" % (" ".join(cmd), p.stderr.strip().splitlines()[-1:] or p.returncode))
    return json.loads(p.stdout)["latency_ms"]["median"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("so", nargs="+")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--seqs", default="17,64,128,384")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--tessel", default="build/tessel")
    ap.add_argument("--work", default="")
    a = ap.parse_args()
    meta = json.load(open(os.path.splitext(a.model)[0] + ".json"))
    root = a.work or tempfile.mkdtemp(prefix="sizes-")
    so_opt = ort.SessionOptions()
    so_opt.intra_op_num_threads = a.threads
    so_opt.inter_op_num_threads = 1
    sess = ort.InferenceSession(a.model, so_opt, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    print("# %s, %d thread(s), best of %d rounds of median-of-%d; onnxruntime %s; load %s" %
          (os.path.basename(a.model), a.threads, a.rounds, a.repeat, ort.__version__,
           open("/proc/loadavg").read().split()[:3]))
    print("%-8s %-6s %10s  %s" % ("batch", "seq", "ort ms", "  ".join("%s ms (ratio, err)" % os.path.basename(s)
                                                                        for s in a.so)))
    for b in [int(x) for x in a.batches.split(",")]:
        for s in [int(x) for x in a.seqs.split(",")]:
            work = os.path.join(root, "b%d_s%d" % (b, s))
            os.makedirs(work, exist_ok=True)
            feeds = zoo.make_inputs(meta, b, s, 7)
            for k, v in feeds.items():
                np.save(os.path.join(work, zoo.sanitize(k) + ".npy"), v)
            ref = sess.run(None, feeds)
            best_o = float("inf")
            best_t = [float("inf")] * len(a.so)
            errs = [0.0] * len(a.so)
            for r in range(a.rounds):
                order = ["ort"] + list(range(len(a.so)))
                if r % 2:
                    order = order[1:] + order[:1]
                for side in order:
                    if side == "ort":
                        best_o = min(best_o, ort_ms(sess, feeds, a.repeat))
                        continue
                    out = os.path.join(work, "out%d" % side)
                    best_t[side] = min(best_t[side], tessel_ms(a, a.so[side], work, feeds, out))
                    e, why = zoo.rel_error(ref, out, names)
                    if why:
                        sys.exit("%s at batch %d sequence %d: %s" % (a.so[side], b, s, why))
                    errs[side] = max(errs[side], e)
            cells = "  ".join("%9.2f (%.2fx, %.0e)" % (t, t / best_o, e) for t, e in zip(best_t, errs))
            print("%-8d %-6d %10.2f  %s" % (b, s, best_o, cells), flush=True)
    print("# load at the end %s" % open("/proc/loadavg").read().split()[:3])
    return 0


if __name__ == "__main__":
    sys.exit(main())
