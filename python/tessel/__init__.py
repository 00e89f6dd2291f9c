"""tessel from Python: tune, build and run kernels and ONNX models with NumPy.

A thin layer over libtessel's C API (include/tessel/tessel.h) through ctypes;
nothing to compile beyond tessel's own build. docs/API.md has the C side.

    import numpy as np, tessel
    tessel.tune("matmul:m=256,n=256,k=256", trials=64, log="mm.jsonl")
    k = tessel.build("matmul:m=256,n=256,k=256", log="mm.jsonl")
    c, = k(a, b)                                   # NumPy in, NumPy out
    tessel.tune_model("model.onnx", trials=200, log="m.jsonl")
    tessel.build_model("model.onnx", log="m.jsonl", output="model.so")
    outputs = tessel.load("model.so")(data=x)      # a list of arrays

A kernel is a built-in workload spec ("matmul:m=...", see `tessel
workloads`), a DSL file path, DSL text ("kernel f(...) -> ... { ... }"), or
tessel.einsum("ij,jk->ik", a, b). Options are the CLI's long options with
"_" for "-" (repeat=5, no_tensorize=True, runner="rpc", sym=["N=4"]).
Errors raise TesselError carrying tessel's message.
"""
import os
import sys

import numpy as np

from . import _lib
from ._lib import dec, enc, lib

__all__ = ["TesselError", "Kernel", "CompiledKernel", "Model", "Log", "Record", "TuneResult", "TuneModelResult",
           "kernel", "einsum", "tune", "tune_model", "build", "build_model", "load", "version", "aligned_empty"]
__version__ = dec(lib.tessel_version())

# TESSEL_DT_* codes (tessel_model.h) and NumPy dtypes; bf16 has no NumPy type.
_DTYPES = {0: np.bool_, 1: np.int8, 2: np.int16, 3: np.int32, 4: np.int64, 5: np.uint8, 6: np.uint32,
           7: np.float16, 9: np.float32, 10: np.float64}
_DSL_TYPES = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64", np.dtype(np.int32): "i32",
              np.dtype(np.int64): "i64", np.dtype(np.int8): "i8", np.dtype(np.uint8): "u8",
              np.dtype(np.float16): "f16"}


class TesselError(RuntimeError):
    """A tessel call failed: str(e) is tessel's message, e.code its status
    (e.status its name, e.g. "invalid argument")."""

    def __init__(self, msg, code=2):
        super().__init__(msg)
        self.code = code
        self.status = dec(lib.tessel_strerror(code))


def version():
    return __version__


def _check(rc, err):
    if rc:
        msg = err.msg.decode(errors="replace") or dec(lib.tessel_strerror(rc))
        if rc == _lib.ECANCELED:
            raise KeyboardInterrupt(msg)
        raise TesselError(msg, rc)


def _np_dtype(code, what):
    if code not in _DTYPES:
        raise TesselError(f"{what}: dtype {dec(lib.tessel_dtype_name(code))} has no NumPy type", 9)
    return np.dtype(_DTYPES[code])


def _info_shape(info):
    return tuple(int(info.shape[j]) for j in range(info.ndim))


def aligned_empty(shape, dtype=np.float32):
    """An uninitialised C-contiguous array whose data is 64-byte aligned (the
    kernels' buffer alignment): a model reads such an input in place."""
    dtype = np.dtype(dtype)
    n = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.empty(n + 64, dtype=np.uint8)
    off = (-raw.ctypes.data) % 64
    return raw[off:off + n].view(dtype).reshape(shape)


# ---- kernels -----------------------------------------------------------------------------

class Kernel:
    """A kernel to tune or build (tessel_func): see kernel()."""

    def __init__(self, subject, name=None):
        err = _lib.Error()
        h = _lib.ctypes.c_void_p()
        text = str(subject)
        if "{" in text and "kernel" in text:
            _check(lib.tessel_func_from_dsl(enc(text), enc(name), _lib.ctypes.byref(h), err), err)
        else:
            _check(lib.tessel_func_parse(enc(text), _lib.ctypes.byref(h), err), err)
        self._h = h

    def __del__(self):
        if getattr(self, "_h", None):
            lib.tessel_func_free(self._h)
            self._h = None

    @property
    def definition(self):
        """The canonical spec or the DSL text: the log's workload."""
        return dec(lib.tessel_func_definition(self._h))

    @property
    def key(self):
        return dec(lib.tessel_func_key(self._h))

    @property
    def flops(self):
        return lib.tessel_func_flops(self._h)

    def __repr__(self):
        d = self.definition
        return f"tessel.Kernel({d if len(d) < 60 else d[:57] + '...'!r}, key={self.key})"


def kernel(subject, name=None):
    """A Kernel from a workload spec, a DSL file (path, or path#name) or DSL
    text (name picks one of several functions)."""
    return subject if isinstance(subject, Kernel) else Kernel(subject, name)


def einsum(subscripts, *operands, dtype=None):
    """A Kernel computing np.einsum(subscripts, *operands): operands are arrays
    or shapes (then dtype, default float32). Products are summed over the
    indices missing from the output; "->" may be left out (NumPy's implicit
    output: the indices seen once, in alphabetical order)."""
    spec = subscripts.replace(" ", "")
    ins, arrow, out = spec.partition("->")
    ins = ins.split(",")
    if len(ins) != len(operands):
        raise TesselError(f"einsum '{subscripts}': {len(ins)} operands in the subscripts, {len(operands)} given", 2)
    if not arrow:
        letters = "".join(ins)
        out = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    if not out:
        raise TesselError(f"einsum '{subscripts}': a scalar output is not supported", 9)
    shapes, types, extent = [], [], {}
    for sub, op in zip(ins, operands):
        shape = tuple(op.shape) if hasattr(op, "shape") else tuple(op)
        t = np.dtype(dtype or (op.dtype if hasattr(op, "dtype") else np.float32))
        if t not in _DSL_TYPES:
            raise TesselError(f"einsum: dtype {t} is not supported", 9)
        if len(sub) != len(shape) or not all(c.isalpha() for c in sub):
            raise TesselError(f"einsum '{subscripts}': operand '{sub}' does not index shape {shape}", 6)
        for c, n in zip(sub, shape):
            if extent.setdefault(c, n) != n:
                raise TesselError(f"einsum '{subscripts}': index {c} is {extent[c]} and {n}", 6)
        shapes.append(shape)
        types.append(_DSL_TYPES[t])
    if any(c not in extent for c in out):
        raise TesselError(f"einsum '{subscripts}': output index not in any operand", 2)
    names = [f"X{i}" for i in range(len(ins))]
    params = ", ".join(f"{n}: {t}[{', '.join(map(str, s))}]" for n, t, s in zip(names, types, shapes))
    oshape = ", ".join(str(extent[c]) for c in out)
    # an index named like the DSL's tensors cannot clash: indices are one lower-case letter
    idx = {c: (c.lower() + c.lower() if c.isupper() else c) for c in extent}
    body = " * ".join(f"{n}[{', '.join(idx[c] for c in sub)}]" for n, sub in zip(names, ins))
    reduce = any(c not in out for c in extent)
    src = (f"kernel einsum({params}) -> Y: {types[0]}[{oshape}] {{\n"
           f"  Y[{', '.join(idx[c] for c in out)}] {'+=' if reduce else '='} {body}\n}}\n")
    return Kernel(src)


class CompiledKernel:
    """A built kernel loaded into this process: k(*inputs) returns its outputs
    as a list of NumPy arrays (one array when it has one output)."""

    def __init__(self, path):
        err = _lib.Error()
        h = _lib.ctypes.c_void_p()
        _check(lib.tessel_kernel_load(enc(path), _lib.ctypes.byref(h), err), err)
        self._h, self.path = h, str(path)
        self.params = []
        for i in range(lib.tessel_kernel_num_params(h)):
            info = _lib.TensorInfo()
            _check(lib.tessel_kernel_param_info(h, i, _lib.ctypes.byref(info), err), err)
            self.params.append((dec(info.name), _np_dtype(info.dtype, dec(info.name)), _info_shape(info)))
        self.ninputs = lib.tessel_kernel_num_inputs(h)

    def __del__(self):
        if getattr(self, "_h", None):
            lib.tessel_kernel_free(self._h)
            self._h = None

    def __call__(self, *inputs):
        if len(inputs) != self.ninputs:
            raise TesselError(f"kernel {self.path}: {self.ninputs} inputs expected, {len(inputs)} given", 2)
        bufs = []
        for (name, dt, shape), x in zip(self.params, inputs):
            x = np.asarray(x)
            if x.shape != shape:
                raise TesselError(f"input {name}: shape {shape} expected, got {x.shape}", 6)
            if x.dtype != dt or not x.flags.c_contiguous or x.ctypes.data % 64:
                y = aligned_empty(shape, dt)
                y[...] = x
                x = y
            bufs.append(x)
        outs = [aligned_empty(shape, dt) for _, dt, shape in self.params[self.ninputs:]]
        args = (_lib.ctypes.c_void_p * len(self.params))(*[a.ctypes.data for a in bufs + outs])
        err = _lib.Error()
        _check(lib.tessel_kernel_run(self._h, args, err), err)
        return outs[0] if len(outs) == 1 else outs


# ---- options and progress ----------------------------------------------------------------

class _Opts:
    """A tessel_opts handle filled from keyword options."""

    def __init__(self, **options):
        err = _lib.Error()
        h = _lib.ctypes.c_void_p()
        _check(lib.tessel_opts_new(_lib.ctypes.byref(h), err), err)
        self._h = h
        for k, v in options.items():
            if v is None:
                continue
            for one in (v if isinstance(v, (list, tuple)) else [v]):
                val = ("1" if one else "0") if isinstance(one, bool) else os.fspath(one) if isinstance(
                    one, os.PathLike) else str(one)
                _check(lib.tessel_opts_set(h, enc(k.replace("_", "-")), enc(val), err), err)

    def __del__(self):
        if getattr(self, "_h", None):
            lib.tessel_opts_free(self._h)
            self._h = None


class _Progress:
    """The progress callback: a tqdm bar when tqdm is installed (and progress
    is True), else a line on stderr per update; Ctrl-C inside a run stops it
    after the current batch (KeyboardInterrupt)."""

    def __init__(self, opts, show, desc):
        self.bar, self.show, self.desc, self.interrupted = None, show, desc, False
        self.cancel = _lib.ctypes.c_int(0)
        self.fn = _lib.PROGRESS_FN(self._cb)
        lib.tessel_opts_set_progress(opts._h, self.fn, None)
        lib.tessel_opts_set_cancel(opts._h, _lib.ctypes.byref(self.cancel))
        if show:
            try:
                from tqdm.auto import tqdm
                self.bar = tqdm(desc=desc, unit="trial")
            except ImportError:
                self.bar = None

    def _cb(self, ctx, done, total, best):
        try:
            if self.bar is not None:
                self.bar.total = total
                self.bar.n = done
                if best > 0:
                    self.bar.set_postfix_str(f"best {best * 1e3:.4g} ms", refresh=False)
                self.bar.refresh()
            elif self.show:
                b = f", best {best * 1e3:.4g} ms" if best > 0 else ""
                print(f"{self.desc}: {done}/{total} trials{b}", file=sys.stderr, flush=True)
            return 0
        except KeyboardInterrupt:
            self.interrupted = True
            return 1

    def close(self):
        if self.bar is not None:
            self.bar.close()


class TuneResult:
    """What tune() did: trials (in the log for this kernel and target),
    new_trials, errors, best_seconds, best_gflops, baseline_seconds,
    baseline_gflops, wall_seconds, target, log."""

    def __init__(self, r, log):
        for f, _ in _lib.TuneResult._fields_[1:]:
            setattr(self, f, getattr(r, f))
        self.target = dec(r.target)
        self.log = str(log)

    def __repr__(self):
        return (f"TuneResult(trials={self.trials}, new_trials={self.new_trials}, errors={self.errors}, "
                f"best_seconds={self.best_seconds:.4g}, best_gflops={self.best_gflops:.4g})")


class TuneModelResult:
    """What tune_model() did: ntasks, trials, new_trials, rounds,
    estimated_seconds (Σ weight x best latency), missing, wall_seconds, target."""

    def __init__(self, r, log):
        for f, _ in _lib.TuneModelResult._fields_[1:]:
            setattr(self, f, getattr(r, f))
        self.target = dec(r.target)
        self.log = str(log)

    def __repr__(self):
        return (f"TuneModelResult(ntasks={self.ntasks}, trials={self.trials}, new_trials={self.new_trials}, "
                f"estimated_seconds={self.estimated_seconds:.4g})")


def _run_tuning(call, opts, progress, desc):
    p = _Progress(opts, progress, desc)
    try:
        err = _lib.Error()
        rc = call(err)
    finally:
        p.close()
    if rc == _lib.ECANCELED and p.interrupted:
        raise KeyboardInterrupt(err.msg.decode(errors="replace"))
    _check(rc, err)


def tune(subject, trials, log, target=None, progress=True, **options):
    """Tunes a kernel (spec, DSL file or text, or a Kernel) for `trials`
    records in the log (resumed: records already there count). Returns a
    TuneResult."""
    k = kernel(subject)
    opts = _Opts(trials=trials, log=log, target=target, **options)
    r = _lib.TuneResult(size=_lib.ctypes.sizeof(_lib.TuneResult))
    _run_tuning(lambda err: lib.tessel_tune(k._h, opts._h, _lib.ctypes.byref(r), err), opts, progress,
                "tune " + (k.definition if len(k.definition) < 40 else "kernel " + k.key))
    return TuneResult(r, log)


def tune_model(path, trials, log, target=None, progress=True, **options):
    """Tunes the ONNX model's tasks for `trials` records in all (as `tessel
    tune-model`). Returns a TuneModelResult."""
    opts = _Opts(trials=trials, log=log, target=target, **options)
    r = _lib.TuneModelResult(size=_lib.ctypes.sizeof(_lib.TuneModelResult))
    _run_tuning(lambda err: lib.tessel_tune_model(enc(path), opts._h, _lib.ctypes.byref(r), err), opts, progress,
                "tune-model " + os.path.basename(str(path)))
    return TuneModelResult(r, log)


def build(subject, log=None, target=None, output=None, **options):
    """Builds a kernel from the log's best record (the default schedule
    without a log) and loads it: a CompiledKernel. output: the artifact's
    path (default: a file in a temporary folder)."""
    k = kernel(subject)
    if output is None:
        import tempfile
        output = os.path.join(tempfile.mkdtemp(prefix="tessel-"), f"kernel_{k.key}.so")
    opts = _Opts(log=log, target=target, **options)
    err = _lib.Error()
    _check(lib.tessel_build(k._h, opts._h, enc(output), err), err)
    return CompiledKernel(output)


def build_model(path, log=None, output="model.so", target=None, **options):
    """Builds the ONNX model into one shared library (as `tessel build
    MODEL.onnx -o OUTPUT`); returns output's path."""
    opts = _Opts(log=log, target=target, **options)
    err = _lib.Error()
    _check(lib.tessel_build_model(enc(path), opts._h, enc(output), err), err)
    return str(output)


# ---- models -------------------------------------------------------------------------------

class Model:
    """A built model: m(*inputs, **named_inputs) returns its outputs as a
    list of NumPy arrays. An input that is C-contiguous, of the model's dtype
    and 64-byte aligned is read in place (no copy); m keeps a reference to it
    until the next call."""

    def __init__(self, path):
        buf = _lib.ctypes.create_string_buffer(512)
        self._h = lib.tessel_model_load(enc(path), buf, 512)
        if not self._h:
            raise TesselError(buf.value.decode(errors="replace") or f"cannot load {path}", 24)
        self.path = str(path)
        self.inputs, self.outputs = [], []
        for count, get, dst in ((lib.tessel_model_num_inputs, lib.tessel_model_input_info, self.inputs),
                                (lib.tessel_model_num_outputs, lib.tessel_model_output_info, self.outputs)):
            for i in range(count(self._h)):
                info = _lib.TensorInfo()
                get(self._h, i, _lib.ctypes.byref(info))
                shape = tuple(None if info.shape[j] < 0 else int(info.shape[j]) for j in range(info.ndim))
                dst.append((dec(info.name), _np_dtype(info.dtype, dec(info.name)), shape))
        self._held = []
        self.borrowed = []

    def __del__(self):
        if getattr(self, "_h", None):
            lib.tessel_model_free(self._h)
            self._h = None

    def _fail(self):
        raise TesselError(dec(lib.tessel_model_error(self._h)), 6)

    def __call__(self, *args, **kwargs):
        names = [n for n, _, _ in self.inputs]
        feed = dict(zip(names, args))
        for k, v in kwargs.items():
            if k not in names:
                raise TesselError(f"{self.path} has no input '{k}' (inputs: {', '.join(names)})", 4)
            if k in feed:
                raise TesselError(f"input '{k}' given twice", 2)
            feed[k] = v
        if len(args) > len(names) or len(feed) != len(names):
            missing = [n for n in names if n not in feed]
            raise TesselError(f"{self.path} takes {len(names)} inputs; missing: {', '.join(missing) or '-'}", 2)
        held, borrowed = [], []
        for i, (name, dt, _) in enumerate(self.inputs):
            x = np.ascontiguousarray(feed[name], dtype=dt)  # no copy when it already is
            shape = (_lib.ctypes.c_int64 * max(1, x.ndim))(*x.shape)
            b = _lib.ctypes.c_int(0)
            if lib.tessel_model_bind_input(self._h, i, x.ctypes.data, x.ndim, shape, _lib.ctypes.byref(b)):
                self._fail()
            held.append(x)
            borrowed.append(bool(b.value))
        self._held, self.borrowed = held, borrowed
        if lib.tessel_model_run(self._h):
            self._fail()
        outs = []
        for i, (name, dt, _) in enumerate(self.outputs):
            data = _lib.ctypes.c_void_p()
            nd = _lib.ctypes.c_int(0)
            shape = (_lib.ctypes.c_int64 * _lib.MAX_DIMS)()
            if lib.tessel_model_get_output(self._h, i, _lib.ctypes.byref(data), _lib.ctypes.byref(nd), shape):
                self._fail()
            y = np.empty(tuple(shape[j] for j in range(nd.value)), dtype=dt)
            if lib.tessel_model_copy_output(self._h, i, y.ctypes.data, y.nbytes):
                self._fail()
            outs.append(y)
        return outs


def load(path):
    """Loads a built model (tessel_model_load): a callable Model."""
    return Model(path)


# ---- logs ----------------------------------------------------------------------------------

class Record:
    """One log record: workload, workload_key, target, trace (JSON text),
    error (None unless it failed), verified, nruns, mean_seconds, gflops,
    build_seconds, time."""

    def __init__(self, r):
        for f, _ in _lib.Record._fields_:
            v = getattr(r, f)
            setattr(self, f, dec(v) if isinstance(v, bytes) else v)
        self.verified = bool(self.verified)

    def __repr__(self):
        w = self.workload if len(self.workload) < 50 else self.workload_key
        return f"Record({w!r}, mean_seconds={self.mean_seconds:.4g}, gflops={self.gflops:.4g}, verified={self.verified})"


class Log:
    """A tuning log read-only: len(log), log[i], iteration, and best()."""

    def __init__(self, path):
        err = _lib.Error()
        h = _lib.ctypes.c_void_p()
        _check(lib.tessel_log_open(enc(path), _lib.ctypes.byref(h), err), err)
        self._h, self.path = h, str(path)

    def __del__(self):
        if getattr(self, "_h", None):
            lib.tessel_log_close(self._h)
            self._h = None

    def __len__(self):
        return lib.tessel_log_count(self._h)

    @property
    def skipped(self):
        """Corrupt lines skipped on loading."""
        return lib.tessel_log_skipped(self._h)

    def __getitem__(self, i):
        if i < 0:
            i += len(self)
        r, err = _lib.Record(), _lib.Error()
        try:
            _check(lib.tessel_log_record(self._h, i, _lib.ctypes.byref(r), err), err)
        except TesselError as e:
            raise IndexError(str(e)) from None
        return Record(r)

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def best(self, workload=None, target=None):
        """The best verified record of each (workload, target) pair, in log
        order; workload: a spec, key, DSL text or Kernel; target: a target
        string ("llvm": the host). With a workload and a target, the one
        record or None."""
        w = workload.key if isinstance(workload, Kernel) else workload
        n = lib.tessel_log_best(self._h, enc(w), enc(target), None, 0)
        arr = (_lib.Record * max(1, n))()
        lib.tessel_log_best(self._h, enc(w), enc(target), arr, n)
        recs = [Record(arr[i]) for i in range(n)]
        if workload is not None and target is not None:
            return recs[0] if recs else None
        return recs
