#!/usr/bin/env python3
"""resnet18_ort.py MODEL IN.npy OUT_DIR THREADS [REPEAT]

onnxruntime side of bench/resnet18.sh: one CPU session with
intra_op_num_threads=THREADS and default graph optimisations (ORT_ENABLE_ALL,
what a user gets), 5 warm-up runs, then REPEAT timed runs (default 20).
Writes OUT_DIR/logits.npy and prints JSON {threads, median_ms, min_ms, runs,
each_ms} (each_ms: every timed run in order; bench/latency_spread.py reads it).
"""
import json
import os
import sys
import time

import numpy as np
import onnxruntime as ort


def main(argv):
    if len(argv) < 5:
        sys.stderr.write(__doc__)
        return 2
    model, inp, out_dir, threads = argv[1], argv[2], argv[3], int(argv[4])
    repeat = int(argv[5]) if len(argv) > 5 else 20
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    feeds = {sess.get_inputs()[0].name: np.load(inp)}
    for _ in range(5):
        out = sess.run(None, feeds)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = sess.run(None, feeds)
        times.append(time.perf_counter() - t0)
    os.makedirs(out_dir, exist_ok=True)
    np.save(os.path.join(out_dir, "logits.npy"), out[0])
    each = [t * 1e3 for t in times]
    times.sort()
    print(json.dumps({"threads": threads, "median_ms": times[len(times) // 2] * 1e3,
                      "min_ms": times[0] * 1e3, "runs": repeat, "each_ms": each}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
