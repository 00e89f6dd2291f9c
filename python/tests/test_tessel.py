"""pytest for the tessel Python package (python/tessel) over libtessel's C API.

References nobody here wrote: NumPy (matmul, einsum) for kernels and
onnxruntime for models. The models are tests/models' generated ones
(MODELS_DIR, set by meson; else build/tests/models). Tuning runs use a few
trials only: what is checked is that every call does what it says.
"""
import os
from pathlib import Path

import numpy as np
import pytest

import tessel

ROOT = Path(__file__).resolve().parents[2]
MODELS = Path(os.environ.get("MODELS_DIR", ROOT / "build" / "tests" / "models"))
MLP = MODELS / "mlp.onnx"

DSL = """
kernel scaled_mm(A: f32[19, 13], B: f32[13, 7]) -> C: f32[19, 7] {
  C[i, k] += A[i, j] * B[j, k] * 0.5
}
"""


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_version():
    assert tessel.version() == tessel.__version__
    assert tessel.version().count(".") == 2


def test_kernel_from_spec_dsl_and_file(tmp_path):
    k = tessel.kernel("matmul:k=5,m=3,n=4")
    assert k.definition == "matmul:m=3,n=4,k=5"  # canonical order
    assert k.flops == 2 * 3 * 4 * 5
    assert len(k.key) == 16
    d = tessel.kernel(DSL)
    assert d.definition == DSL and d.flops == 0
    f = tmp_path / "mm.tsl"
    f.write_text(DSL)
    assert tessel.kernel(str(f)).key == d.key  # the same function, the same workload key
    assert tessel.kernel(d) is d


def test_dsl_kernel_tuned_against_numpy(tmp_path):
    log = tmp_path / "dsl.jsonl"
    r = tessel.tune(DSL, trials=4, log=log, batch=2, progress=False)
    assert r.trials == 4 and r.new_trials == 4
    assert r.best_seconds > 0 and r.target.startswith("llvm")
    again = tessel.tune(DSL, trials=4, log=log, progress=False)  # resumed: the budget is met
    assert again.new_trials == 0 and again.trials == 4
    k = tessel.build(DSL, log=log)
    a, b = rand(19, 13, seed=1), rand(13, 7, seed=2)
    np.testing.assert_allclose(k(a, b), (a @ b) * 0.5, rtol=1e-5, atol=1e-5)
    # non-contiguous, other-dtype inputs are converted
    np.testing.assert_allclose(k(np.asfortranarray(a.astype(np.float64)), b), (a @ b) * 0.5, rtol=1e-5, atol=1e-5)


def test_spec_kernel_built_without_log():
    k = tessel.build("matmul:m=33,n=17,k=9")
    a, b = rand(33, 9), rand(9, 17)
    np.testing.assert_allclose(k(a, b), a @ b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("subs,shapes", [("ij,kj->ik", [(5, 7), (3, 7)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
                                         ("ij->ji", [(3, 5)]), ("ij,j", [(6, 4), (4,)])])
def test_einsum_against_numpy(subs, shapes):
    ops = [rand(*s, seed=i) for i, s in enumerate(shapes)]
    k = tessel.build(tessel.einsum(subs, *ops))
    np.testing.assert_allclose(k(*ops), np.einsum(subs, *ops), rtol=1e-5, atol=1e-5)


def test_progress_line_without_tqdm(tmp_path, capsys, monkeypatch):
    import builtins
    real_import = builtins.__import__

    def no_tqdm(name, *a, **kw):
        if name.startswith("tqdm"):
            raise ImportError(name)
        return real_import(name, *a, **kw)

    monkeypatch.setattr(builtins, "__import__", no_tqdm)
    tessel.tune("add:m=8,n=8", trials=2, log=tmp_path / "p.jsonl", batch=1)
    err = capsys.readouterr().err
    assert "tune add:m=8,n=8: 2/2 trials" in err


def test_progress_bar_with_tqdm(tmp_path, monkeypatch):
    import sys
    import types
    bars = []

    class FakeBar:  # the part of tqdm's interface the package uses
        def __init__(self, desc=None, unit=None):
            self.desc, self.n, self.total, self.seen, self.closed = desc, 0, None, [], False
            bars.append(self)

        def set_postfix_str(self, s, refresh=True):
            self.postfix = s

        def refresh(self):
            self.seen.append((self.n, self.total))

        def close(self):
            self.closed = True

    mod = types.ModuleType("tqdm.auto")
    mod.tqdm = FakeBar
    monkeypatch.setitem(sys.modules, "tqdm", types.ModuleType("tqdm"))
    monkeypatch.setitem(sys.modules, "tqdm.auto", mod)
    # no_runoff: the bar counts trials, and len(Log) is every record (a run-off adds its own)
    tessel.tune("matmul:m=8,n=8,k=8", trials=3, log=tmp_path / "b.jsonl", batch=1, no_runoff=True)
    (bar,) = bars
    assert bar.desc == "tune matmul:m=8,n=8,k=8" and bar.closed
    assert bar.seen[-1] == (len(tessel.Log(tmp_path / "b.jsonl")), 3) and all(t == 3 for _, t in bar.seen)
    assert [n for n, _ in bar.seen] == sorted(n for n, _ in bar.seen)
    assert bar.postfix.startswith("best ")
    bars.clear()
    tessel.tune("matmul:m=8,n=8,k=8", trials=2, log=tmp_path / "b.jsonl", no_runoff=True)  # the log has them
    assert bars[0].seen[-1] == (len(tessel.Log(tmp_path / "b.jsonl")), 2)


def test_cancel_stops_after_a_batch(tmp_path, monkeypatch):
    calls = []

    def interrupted(self, ctx, done, total, best):  # what Ctrl-C inside the callback does
        calls.append(done)
        if done >= 1:
            self.interrupted = True
            return 1
        return 0

    monkeypatch.setattr(tessel._Progress, "_cb", interrupted)
    log = tmp_path / "c.jsonl"
    with pytest.raises(KeyboardInterrupt, match="cancelled"):
        tessel.tune("add:m=8,n=8", trials=50, log=log, batch=2, progress=False)
    n = len(tessel.Log(log))
    assert 1 <= n < 50  # what was measured is logged; the rest was not run


def test_log_best_and_records(tmp_path):
    log = tmp_path / "l.jsonl"
    # no_runoff: the log holds just the trials (the run-off's records are test_runoff.c's)
    tessel.tune("matmul:m=8,n=8,k=8", trials=3, log=log, batch=3, progress=False, no_runoff=True)
    tessel.tune("add:m=8,n=8", trials=2, log=log, batch=2, progress=False, no_runoff=True)
    lg = tessel.Log(log)
    assert len(lg) == 5 and lg.skipped == 0
    recs = list(lg)
    assert recs[0].workload == "matmul:m=8,n=8,k=8" and recs[-1].workload == "add:m=8,n=8"
    best = lg.best()
    assert [r.workload for r in best] == ["matmul:m=8,n=8,k=8", "add:m=8,n=8"]
    mm = [r for r in recs[:3] if r.verified and not r.error]
    assert best[0].mean_seconds == min(r.mean_seconds for r in mm)
    one = lg.best("matmul:k=8,m=8,n=8", target="llvm")  # any spelling of the spec, the host target
    assert one is not None and one.mean_seconds == best[0].mean_seconds and one.gflops > 0
    assert lg.best(tessel.kernel("add:m=8,n=8"))[0].workload == "add:m=8,n=8"
    assert lg.best("softmax:m=4,n=4") == []
    with pytest.raises(IndexError):
        lg[5]


@pytest.mark.skipif(not MLP.exists(), reason="tests/models not generated (meson test makes them)")
def test_model_tuned_built_and_run_against_onnxruntime(tmp_path):
    import onnxruntime as ort
    log = tmp_path / "m.jsonl"
    r = tessel.tune_model(MLP, trials=3, log=log, batch=1, progress=False)
    assert r.ntasks >= 1 and r.trials == 3 and r.new_trials == 3
    so = tessel.build_model(MLP, log=log, output=tmp_path / "mlp.so")
    assert so == str(tmp_path / "mlp.so") and os.path.exists(so)
    m = tessel.load(so)
    assert [n for n, _, _ in m.inputs] == ["x"] and m.inputs[0][2] == (4, 64)
    x = rand(4, 64, seed=3)
    want = ort.InferenceSession(str(MLP), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    got = m(x=x)
    assert len(got) == len(want)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(m(x)[0], want[0], rtol=1e-4, atol=1e-4)  # positional


@pytest.mark.skipif(not MLP.exists(), reason="tests/models not generated")
def test_model_input_without_copy(tmp_path):
    m = tessel.load(tessel.build_model(MLP, output=tmp_path / "mlp.so"))
    x = tessel.aligned_empty((4, 64), np.float32)
    x[...] = rand(4, 64)
    y0 = m(x=x)[0]
    assert m.borrowed == [True]  # aligned, contiguous, float32: read in place
    np.testing.assert_array_equal(m(x=np.asfortranarray(x))[0], y0)  # made C-contiguous first
    np.testing.assert_array_equal(m(x=x)[0], y0)


def test_errors_a_user_meets(tmp_path):
    with pytest.raises(tessel.TesselError, match="m must be a positive integer") as e:
        tessel.tune("matmul:m=oops,n=2,k=2", trials=1, log=tmp_path / "e.jsonl")
    assert e.value.status == "invalid argument"
    with pytest.raises(tessel.TesselError, match="neither a file nor a built-in workload"):
        tessel.kernel("missing/kernel.tsl")
    with pytest.raises(tessel.TesselError, match="no such file"):
        tessel.Log(tmp_path / "missing.jsonl")
    with pytest.raises(tessel.TesselError, match="missing.so"):
        tessel.load(str(tmp_path / "missing.so"))
    with pytest.raises(tessel.TesselError, match="cannot read"):
        tessel.tune_model(tmp_path / "missing.onnx", trials=1, log=tmp_path / "e.jsonl")
    with pytest.raises(tessel.TesselError, match="unknown option 'bogus'"):
        tessel.tune("add:m=4,n=4", trials=1, log=tmp_path / "e.jsonl", bogus=3)
    with pytest.raises(tessel.TesselError, match="option repeat wants an integer"):
        tessel.tune("add:m=4,n=4", trials=1, log=tmp_path / "e.jsonl", repeat="many")
    with pytest.raises(tessel.TesselError, match="<dsl>"):
        tessel.kernel("kernel broken(A: f32[4]) -> B: f32[4] { B[i] = = A[i] }")
    with pytest.raises(tessel.TesselError, match="no usable record for add:m=4,n=4"):
        tessel.build("add:m=4,n=4", log=_empty_log(tmp_path))
    k = tessel.build("add:m=4,n=4")
    with pytest.raises(tessel.TesselError, match=r"shape \(4, 4\) expected, got \(4, 5\)"):
        k(np.zeros((4, 4), np.float32), np.zeros((4, 5), np.float32))
    with pytest.raises(tessel.TesselError, match="2 inputs expected"):
        k(np.zeros((4, 4), np.float32))
    with pytest.raises(tessel.TesselError, match="operand"):
        tessel.einsum("ij,jk->ik", (2, 3), (4, 5, 6))


def _empty_log(tmp_path):
    p = tmp_path / "empty.jsonl"
    p.write_text("")
    return p


@pytest.mark.skipif(not MLP.exists(), reason="tests/models not generated")
def test_model_errors(tmp_path):
    m = tessel.load(tessel.build_model(MLP, output=tmp_path / "mlp.so"))
    with pytest.raises(tessel.TesselError, match="dim 0 must be 4, got 3"):
        m(x=np.zeros((3, 64), np.float32))
    with pytest.raises(tessel.TesselError, match="has 2 dims, got 1"):
        m(x=np.zeros(64, np.float32))
    with pytest.raises(tessel.TesselError, match="no input 'data'"):
        m(data=np.zeros((4, 64), np.float32))
    with pytest.raises(tessel.TesselError, match="missing: x"):
        m()
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    with pytest.raises(tessel.TesselError, match="bad.onnx"):
        tessel.build_model(bad, output=tmp_path / "bad.so")


def test_c_api_details(tmp_path):
    """What the Python layer does not reach: options read back, the cancel
    flag set before a run, a misaligned buffer refused by tessel_kernel_run."""
    import ctypes
    from tessel import _lib
    lib, err = _lib.lib, _lib.Error()
    o = tessel._Opts(trials=5, log=tmp_path / "f.jsonl", repeat=2)
    assert lib.tessel_opts_get(o._h, b"--repeat") == b"2" and lib.tessel_opts_get(o._h, b"winograd") is None
    flag = ctypes.c_int(1)
    lib.tessel_opts_set_cancel(o._h, ctypes.byref(flag))
    k = tessel.kernel("add:m=4,n=4")
    r = _lib.TuneResult(size=ctypes.sizeof(_lib.TuneResult))
    assert lib.tessel_tune(k._h, o._h, ctypes.byref(r), err) == _lib.ECANCELED
    assert b"cancelled at 1 of 5 trials" in err.msg and r.new_trials <= 1  # the baseline comes first
    small = _lib.TuneResult(size=ctypes.sizeof(ctypes.c_size_t) + 4)  # an older caller's struct: trials only
    lib.tessel_tune(k._h, o._h, ctypes.byref(small), err)
    assert small.trials == r.trials and small.new_trials == 0 and small.best_seconds == 0
    ck = tessel.build(k)
    a = tessel.aligned_empty(64, np.uint8)
    args = (ctypes.c_void_p * 3)(a.ctypes.data + 4, a.ctypes.data, a.ctypes.data)
    assert lib.tessel_kernel_run(ck._h, args, err) == 2
    assert b"not 64-byte aligned" in err.msg
