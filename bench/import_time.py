#!/usr/bin/env python3
"""import_time.py [SIZES...] — ONNX import time against the node count.

  .venv/bin/python bench/import_time.py            (sizes 10000 20000 40000 80000)

Writes one chain model per size (Add with a [1,8] initializer on even
nodes, an unnamed Relu on odd ones: every node looks up its inputs by name,
defines a new value and, unnamed, gets a made-up node name) and times
`tessel graph show MODEL` on it (import plus the printer, output discarded).
Prints wall and CPU seconds (the child's user+sys: the build machine is
shared, so CPU time is the steadier figure) and CPU microseconds per node,
which stays flat when import grows linearly (issue 15: it grew
quadratically while value lookup by name scanned the graph). Environment:
BUILD (build directory, default build).
"""
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def chain(n):
    nodes, inits, h = [], [], "x"
    for i in range(n):
        o = "y" if i == n - 1 else f"t{i}"
        if i % 2 == 0:
            c = f"c{i}"
            inits.append(numpy_helper.from_array(np.full([1, 8], 0.001, np.float32), c))
            nodes.append(helper.make_node("Add", [h, c], [o], name=f"add{i}"))
        else:
            nodes.append(helper.make_node("Relu", [h], [o]))
        h = o
    vi = [helper.make_tensor_value_info(s, TensorProto.FLOAT, [1, 8]) for s in ("x", "y")]
    g = helper.make_graph(nodes, "chain", vi[:1], vi[1:], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def main():
    sizes = [int(a) for a in sys.argv[1:]] or [10000, 20000, 40000, 80000]
    tessel = os.path.join(os.environ.get("BUILD", "build"), "tessel")
    print(f"{'nodes':>8} {'wall s':>8} {'cpu s':>8} {'cpu us/node':>12}")
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            path = os.path.join(tmp, f"chain{n}.onnx")
            onnx.save(chain(n), path)
            r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            subprocess.run([tessel, "graph", "show", path], stdout=subprocess.DEVNULL, check=True)
            wall = time.perf_counter() - t0
            r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
            print(f"{n:>8} {wall:>8.2f} {cpu:>8.2f} {cpu / n * 1e6:>12.1f}", flush=True)


if __name__ == "__main__":
    main()
