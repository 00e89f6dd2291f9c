#!/usr/bin/env python3
"""ort_profile.py MODEL.onnx [THREADS=1] [RUNS=30]

onnxruntime's own profile of a one-input model (SessionOptions.enable_profiling,
default graph optimisations, intra_op_num_threads = THREADS): 5 warm-up runs,
then RUNS timed ones; per node, the minimum kernel time over the runs (the
least disturbed by other work on a shared machine), largest first, with the op,
the node and its output shape, and their sum. Beside bench/model_tasks_cpu.sh:
where onnxruntime's time goes for the layers of a tessel task.
"""
import collections
import json
import os
import sys
import tempfile

import numpy as np
import onnxruntime as ort


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return
    model = sys.argv[1]
    threads = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 30
    tmp = tempfile.mkdtemp()
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.enable_profiling = True
    so.profile_file_prefix = os.path.join(tmp, "ort")
    s = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    i = s.get_inputs()[0]
    shape = [d if isinstance(d, int) else 1 for d in i.shape]
    x = np.random.default_rng(7).random(shape, dtype=np.float32)
    for _ in range(5 + runs):
        s.run(None, {i.name: x})
    times = collections.defaultdict(list)
    for e in json.load(open(s.end_profiling())):
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            a = e["args"]
            times[(e["name"][:-len("_kernel_time")], a.get("op_name"), str(a.get("output_type_shape")))].append(e["dur"])
    rows = sorted(((min(v[-runs:]) / 1000.0, k) for k, v in times.items()), reverse=True)
    print("onnxruntime %s, %d thread(s), %d runs; sum of per-node minima %.2f ms" %
          (ort.__version__, threads, runs, sum(r[0] for r in rows)))
    for ms, (node, op, shp) in rows:
        print("%8.3f  %-18s %-50s %s" % (ms, op, node[:50], shp[:80]))


if __name__ == "__main__":
    main()
