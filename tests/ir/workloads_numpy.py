"""workloads_numpy.py — the workloads of MetaSchedule's single-operator suite
(and conv2d_nhwc, batch_matmul, softmax, which C2D/DIL/GRP, GMM and SFM use)
built by tessel (default schedule, LLVM), run by tessel-kernel-runner on its
seeded inputs, and compared with NumPy (wl_numpy.py, written from TVM's
definitions) at odd and prime sizes, strides, padding, dilation and groups.
Negative control: every output must differ from the reference of other inputs.

usage: workloads_numpy.py --tessel PATH --runner PATH --work DIR"""

import argparse
import os
import re
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import wl_numpy  # noqa: E402

SPECS = [
    "conv1d_nlc:n=1,l=13,c=6,k=4,r=3,stride=2,pad=1,dilation=1,groups=2",
    "conv1d_nlc:n=2,l=17,c=5,k=7,r=5,stride=1,pad=2,dilation=2,groups=1",
    "conv2d_nhwc:n=1,c=6,h=11,w=7,k=8,r=3,s=3,stride=2,pad=1,dilation=1,groups=2",
    "conv2d_nhwc:n=1,c=5,h=13,w=9,k=3,r=3,s=3,stride=1,pad=1,dilation=2,groups=1",
    "conv3d_ndhwc:n=1,d=5,h=7,w=6,c=3,k=5,t=3,r=3,s=3,stride=2,pad=1,dilation=1,groups=1",
    "conv3d_ndhwc:n=1,d=4,h=5,w=5,c=4,k=6,t=1,r=3,s=2,stride=1,pad=0,dilation=1,groups=2",
    "conv2d_capsule:n=1,h=7,w=5,c=3,k=5,r=3,s=3,cap=3,stride=2,pad=1",
    "conv2d_capsule:n=1,h=5,w=5,c=2,k=3,r=3,s=3,cap=4,stride=1,pad=1",
    "depthwise_conv2d_nhwc:n=1,h=11,w=9,c=7,r=3,s=3,stride=2,pad=1,dilation=1",
    "depthwise_conv2d_nhwc:n=2,h=9,w=13,c=5,r=5,s=3,stride=1,pad=2,dilation=2",
    "conv2d_transpose_nhwc:n=1,h=5,w=3,c=7,k=5,r=4,s=4,stride=2,pad=1",
    "conv2d_transpose_nhwc:n=1,h=4,w=5,c=3,k=2,r=3,s=5,stride=3,pad=2",
    "conv2d_transpose_nhwc:n=2,h=3,w=3,c=2,k=3,r=3,s=3,stride=1,pad=0",
    "conv2d_transpose_nhwc:n=1,h=3,w=4,c=3,k=2,r=6,s=3,stride=3,pad=2",  # zero-free phases, odd pads
    "conv2d_transpose_nhwc:n=1,h=3,w=5,c=2,k=3,r=2,s=4,stride=2,pad=0",
    "conv2d_nhwc_bn_relu:n=1,h=11,w=9,c=5,k=7,r=3,s=3,stride=2,pad=1,dilation=1",
    "conv2d_nhwc_bn_relu:n=1,h=7,w=7,c=3,k=4,r=1,s=1,stride=1,pad=0,dilation=1",
    "transpose_batch_matmul:b=2,l=13,heads=3,d=7",
    "transpose_batch_matmul:b=1,l=5,heads=1,d=17",
    "batch_matmul:b=3,m=13,n=7,k=11",
    "norm:b=3,m=7,n=13",
    "norm:b=1,m=1,n=31",
    "softmax:m=7,n=13",
]


def param_shapes(tessel, spec):
    """[(name, shape)] of the function's params, from `tessel show`'s signature."""
    out = subprocess.run([tessel, "show", spec], check=True, capture_output=True, text=True).stdout
    sig = next(line for line in out.splitlines() if line.startswith("func "))
    return [(m.group(1), tuple(int(d) for d in m.group(2).split(",")))
            for m in re.finditer(r"(\w+): f32\[([\d, ]+)\]", sig)]


def run_kernel(tessel, runner, spec, work, seed, env=None):
    """Builds spec's default schedule and runs it: (inputs, output array)."""
    so = os.path.join(work, "k.so")
    subprocess.run([tessel, "build", spec, "-o", so], check=True, capture_output=True)
    outp = os.path.join(work, "out.bin")
    r = subprocess.run([runner, so, str(seed), outp], capture_output=True, text=True, env=env)
    if r.returncode or not r.stdout.startswith("ok"):
        raise RuntimeError("%s: runner: %s%s" % (spec, r.stdout, r.stderr))
    shapes = param_shapes(tessel, spec)
    inputs = [wl_numpy.seeded_f32(s, seed + i) for i, (_, s) in enumerate(shapes[:-1])]
    got = np.fromfile(outp, dtype=np.float32).reshape(shapes[-1][1])
    return inputs, got


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tessel", required=True)
    ap.add_argument("--runner", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    fails = 0
    for spec in SPECS:
        seed = 11
        inputs, got = run_kernel(a.tessel, a.runner, spec, a.work, seed)
        ref = wl_numpy.reference(spec, inputs)
        ok, err = wl_numpy.close(got, ref)
        other = wl_numpy.reference(spec, [wl_numpy.seeded_f32(x.shape, seed + 100 + i) for i, x in enumerate(inputs)])
        sensitive = not wl_numpy.close(got, other)[0] and float(np.abs(ref).max()) > 0
        print("%-4s %s  max abs err %.3g%s" % ("ok" if ok and sensitive else "FAIL", spec, err,
                                               "" if sensitive else "  (negative control did not fail)"))
        fails += not (ok and sensitive)
    print("%d of %d workloads match NumPy" % (len(SPECS) - fails, len(SPECS)))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
