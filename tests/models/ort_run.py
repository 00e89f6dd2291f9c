#!/usr/bin/env python3
"""ort_run.py MODEL IN_DIR OUT_DIR [--random SEED --sym NAME=V ... --optimize]

onnxruntime reference outputs for tessel's parity tests (tests/tuner/test_model.c).

Reads every model input from IN_DIR/NAME.npy, runs the model on onnxruntime's
CPU provider (graph optimisations off, so the reference is the plain
operator semantics) and writes every output to OUT_DIR/NAME.npy. Names are
sanitised the way `tessel run --output-dir` does (characters other than
letters, digits, '_', '-', '.' become '_').

With --random SEED, inputs missing from IN_DIR are generated (floats uniform
[-1, 1) float32 (float16 for a float16 input), ints in [-4, 4], bools, from numpy's default_rng(SEED + input
index); symbolic dims
from --sym NAME=V, else 1) and written to IN_DIR first, so the same files can
be handed to `tessel run --input`.

With --optimize, onnxruntime's graph optimisations are on (ORT_ENABLE_ALL):
its QDQ fusions run QDQ chains as its int8 kernels (QLinearConv, ...), the
reference for tessel's integer ops.

Exit status 0 on success, 2 on a usage or model error (message on stderr).
"""
import os
import re
import sys

import numpy as np


def sanitize(name):
    s = re.sub(r"[^A-Za-z0-9_.\-]", "_", name)
    return "output" if s in ("", ".", "..") else s


def main(argv):
    if len(argv) < 4:
        sys.stderr.write(__doc__)
        return 2
    model, in_dir, out_dir = argv[1], argv[2], argv[3]
    seed, syms, optimize = None, {}, False
    i = 4
    while i < len(argv):
        if argv[i] == "--optimize":
            optimize = True
            i += 1
        elif argv[i] == "--random" and i + 1 < len(argv):
            seed = int(argv[i + 1])
            i += 2
        elif argv[i] == "--sym" and i + 1 < len(argv) and "=" in argv[i + 1]:
            k, v = argv[i + 1].split("=", 1)
            syms[k] = int(v)
            i += 2
        else:
            sys.stderr.write("ort_run.py: unexpected argument %r\n" % argv[i])
            return 2
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_ENABLE_ALL if optimize
                                   else ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    so.intra_op_num_threads = 1
    try:
        sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    except Exception as e:  # onnxruntime raises its own exception types
        sys.stderr.write("ort_run.py: %s: %s\n" % (model, e))
        return 2
    os.makedirs(out_dir, exist_ok=True)
    feeds = {}
    for idx, inp in enumerate(sess.get_inputs()):
        path = os.path.join(in_dir, sanitize(inp.name) + ".npy")
        if not os.path.exists(path):
            if seed is None:
                sys.stderr.write("ort_run.py: missing input %s (%s)\n" % (inp.name, path))
                return 2
            shape = [d if isinstance(d, int) else syms.get(str(d), 1) for d in inp.shape]
            rng = np.random.default_rng(seed + idx)
            if inp.type in ("tensor(int64)", "tensor(int32)"):  # small ints, both signs
                arr = rng.integers(-4, 5, size=shape).astype(np.int64 if "64" in inp.type else np.int32)
            elif inp.type == "tensor(bool)":
                arr = rng.integers(0, 2, size=shape).astype(bool)
            elif inp.type in ("tensor(uint8)", "tensor(int8)"):  # the whole 8-bit range
                u = inp.type == "tensor(uint8)"
                arr = rng.integers(0 if u else -128, 256 if u else 128, size=shape).astype(np.uint8 if u else np.int8)
            else:
                arr = rng.uniform(-1.0, 1.0, size=shape).astype(np.float16 if inp.type == "tensor(float16)" else np.float32)
            os.makedirs(in_dir, exist_ok=True)
            np.save(path, arr)
        feeds[inp.name] = np.load(path)
    outs = sess.run(None, feeds)
    for o, v in zip(sess.get_outputs(), outs):
        # ascontiguousarray returns at least 1-d: keep a 0-d output 0-d
        np.save(os.path.join(out_dir, sanitize(o.name) + ".npy"), np.ascontiguousarray(v).reshape(np.shape(v)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
