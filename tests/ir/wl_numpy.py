"""wl_numpy.py — NumPy references for the built-in workloads of MetaSchedule's
single-operator suite (docs/IR.md, "Workloads"), written from TVM's
te_workload.py definitions and not from tessel's DSL or C loops: the
transposed convolution, for one, is TVM's dilate-pad-and-flip correlation, not
the gather form tessel's DSL and C reference use. Also the runtime's seeded
inputs (runtime/measure.c tsrt_fill_random, splitmix64), so an artifact's
outputs from tessel-kernel-runner can be checked here. Used by
tests/ir/workloads_numpy.py and bench/tvm/side_by_side.py."""

import numpy as np

_M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def _mix(z):
    z = z + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def seeded_f32(shape, seed):
    """The f32 values tsrt_fill_random writes for seed: exact multiples of 2^-23 in [-1, 1)."""
    n = int(np.prod(shape)) if len(shape) else 1
    with np.errstate(over="ignore"):
        s = _mix(np.array([seed], dtype=np.uint64))[0]
        r = _mix(s + np.arange(n, dtype=np.uint64))
    v = (r % np.uint64(16777216)).astype(np.float64) / 8388608.0 - 1.0
    return v.astype(np.float32).reshape(shape)


def parse_spec(spec):
    """'name:k=v,...' (every key given) -> (name, {key: int or str})."""
    name, _, rest = spec.partition(":")
    p = {}
    for kv in filter(None, rest.split(",")):
        k, v = kv.split("=")
        p[k] = int(v) if v.lstrip("-").isdigit() else v
    return name, p


def conv_out(n, k, stride, pad, dil=1):
    return (n + 2 * pad - dil * (k - 1) - 1) // stride + 1


def conv_nd_channels_last(x, w, stride, pad, dil, groups):
    """x [n, sp..., c], w [taps..., c/groups, k] -> [n, out..., k] in float64,
    as te_workload.conv1d_nlc / conv2d_nhwc / conv3d_ndhwc (pad both sides)."""
    x = x.astype(np.float64)
    w = w.astype(np.float64)
    nsp = x.ndim - 2
    xp = np.pad(x, [(0, 0)] + [(pad, pad)] * nsp + [(0, 0)])
    taps = w.shape[:nsp]
    cg, k = w.shape[nsp], w.shape[nsp + 1]
    kg = k // groups
    outs = [conv_out(x.shape[1 + i], taps[i], stride, pad, dil) for i in range(nsp)]
    y = np.zeros([x.shape[0]] + outs + [k])
    for t in np.ndindex(*taps):
        sl = tuple(slice(t[i] * dil, t[i] * dil + (outs[i] - 1) * stride + 1, stride) for i in range(nsp))
        xs = xp[(slice(None),) + sl]  # [n, out..., c]
        for g in range(groups):
            y[..., g * kg:(g + 1) * kg] += xs[..., g * cg:(g + 1) * cg] @ w[t][:, g * kg:(g + 1) * kg]
    return y


def conv2d_transpose_nhwc_tvm(x, w, stride, pad):
    """TVM's form: insert stride-1 zeros between input pixels, pad by r-1-pad,
    correlate with the spatially flipped kernel. x [n,h,w,c], w [r,s,c,k]."""
    n, h, wd, c = x.shape
    r, s, _, k = w.shape
    dil = np.zeros((n, (h - 1) * stride + 1, (wd - 1) * stride + 1, c))
    dil[:, ::stride, ::stride, :] = x
    return conv_nd_channels_last(
        np.pad(dil, [(0, 0), (r - 1 - pad, r - 1 - pad), (s - 1 - pad, s - 1 - pad), (0, 0)]),
        w[::-1, ::-1], 1, 0, 1, 1)


def capsule_nhwijc(x, w, stride, pad):
    """x [n,h,w,cap,cap,c], w [r,s,cap,cap,c,k] -> [n,p,q,cap,cap,k]."""
    x = x.astype(np.float64)
    w = w.astype(np.float64)
    r, s = w.shape[:2]
    xp = np.pad(x, [(0, 0), (pad, pad), (pad, pad), (0, 0), (0, 0), (0, 0)])
    p, q = conv_out(x.shape[1], r, stride, pad), conv_out(x.shape[2], s, stride, pad)
    y = 0
    for ri in range(r):
        for si in range(s):
            xs = xp[:, ri:ri + (p - 1) * stride + 1:stride, si:si + (q - 1) * stride + 1:stride]
            y = y + np.einsum("npqikc,kjco->npqijo", xs, w[ri, si])
    return y


def reference(spec, inputs):
    """The output of workload spec (tessel's name and keys) for inputs, float64."""
    name, p = parse_spec(spec)
    x = inputs[0]
    if name == "conv1d_nlc":
        return conv_nd_channels_last(x, inputs[1], p["stride"], p["pad"], p["dilation"], p["groups"])
    if name == "conv2d_nhwc":
        return conv_nd_channels_last(x, inputs[1], p["stride"], p["pad"], p["dilation"], p["groups"])
    if name == "conv3d_ndhwc":
        return conv_nd_channels_last(x, inputs[1], p["stride"], p["pad"], p["dilation"], p["groups"])
    if name == "depthwise_conv2d_nhwc":  # weights [1, r, s, c] = [r, s, 1, c]: groups = c
        w = np.transpose(inputs[1], (1, 2, 0, 3))
        return conv_nd_channels_last(x, w, p["stride"], p["pad"], p["dilation"], x.shape[-1])
    if name == "conv2d_capsule":
        return capsule_nhwijc(x, inputs[1], p["stride"], p["pad"])
    if name == "conv2d_transpose_nhwc":
        return conv2d_transpose_nhwc_tvm(x, inputs[1], p["stride"], p["pad"])
    if name == "conv2d_nhwc_bn_relu":  # inputs: X, W, bias, bn_offset, bn_scale
        y = conv_nd_channels_last(x, inputs[1], p["stride"], p["pad"], p["dilation"], 1)
        bias, off, scale = (a.astype(np.float64) for a in inputs[2:5])
        return np.maximum((y + bias) * scale + off, 0.0)
    if name == "transpose_batch_matmul":
        return np.einsum("bihk,bjhk->bhij", x.astype(np.float64), inputs[1].astype(np.float64))
    if name == "batch_matmul":
        return np.matmul(x.astype(np.float64), inputs[1].astype(np.float64))
    if name == "norm":
        return np.sqrt(np.sum(x.astype(np.float64) ** 2, axis=(1, 2)))
    if name == "softmax":
        e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    raise KeyError("no NumPy reference for workload " + name)


def close(got, ref, rtol=1e-3):
    """f32 kernel vs float64 reference: within rtol of the output's scale."""
    got = np.asarray(got, dtype=np.float64).reshape(ref.shape)
    tol = rtol * max(1.0, float(np.abs(ref).max()))
    err = float(np.abs(got - ref).max()) if ref.size else 0.0
    return bool(np.isfinite(got).all() and err <= tol), err
