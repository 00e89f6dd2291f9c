"""side_by_side.py — tessel against TVM's MetaSchedule on MetaSchedule's own
single-operator suite (C1D C2D C3D CAP DEP DIL GMM GRP T2D CBR TBG NRM SFM, at
the shapes of tvm/s_tir/meta_schedule/testing/te_workload.py), same trial
budget and thread count, one tuner after the other. Run with the bench venv
(bench/tvm/setup.sh) from the repository root:

  /work/tvm-venv/bin/python bench/tvm/side_by_side.py --trials 64 --threads 1,2 \
      [--workloads C1D,C2D,...] [--two-thread-workloads GMM,C2D] [--out DIR]

Per workload and thread count, in a fresh child process (TVM's thread pool
and TESSEL_NUM_THREADS are set before anything starts):
 1. `tessel tune SPEC --trials N --threads T` (the wall clock starts when the
    process is started), then MetaSchedule's tune_tir with max_trials_global
    N, 64 per batch, XGBoost model, LocalBuilder/LocalRunner defaults except
    a 120 s build timeout (the wall clock starts at the tune_tir call; TVM's
    import is not counted);
 2. re-times both best kernels back to back, three rounds alternating:
    tessel's with `tessel bench --log` (median of repeats of >= 100 ms),
    TVM's with time_evaluator (median of 5 repeats of >= 100 ms); the best
    round of each is reported;
 3. runs both on the same seeded inputs (tessel's via tessel-kernel-runner)
    and checks both outputs against NumPy (tests/ir/wl_numpy.py);
 4. time to TVM's final best: from each tuner's own measurements (tessel's log
    records and their `time`; TVM's runner results, timestamped by a measure
    callback), the first moment tessel measured a kernel at least as fast as
    TVM's best, against the moment TVM measured its best.
Then prints one table and the machine's peak (OpenBLAS sgemm 1024^3 at each
thread count, build/bench/bench_baselines, measured in this run).
Library candidates are not part of tessel's single-kernel search: every
tessel figure is a generated kernel. Speed is never a test: this is bench/."""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "ir"))
TESSEL = os.path.join(ROOT, "build", "tessel")
RUNNER = os.path.join(ROOT, "build", "runtime", "tessel-kernel-runner")
BASELINES = os.path.join(ROOT, "build", "bench", "bench_baselines")

SUITE = ["C1D", "C2D", "C3D", "CAP", "DEP", "DIL", "GMM", "GRP", "T2D", "CBR", "TBG", "NRM", "SFM"]
# te_workload.CONFIGS index per workload: the first shape, except C3D, whose
# first (16x224x224, 7x7x7 kernel, 13 GFLOP) is too large for a shared
# two-core machine; its second shape (16x56x56, 64->64, 1x1x1) instead.
DEFAULT_IDX = {"C3D": 1}


def tessel_spec(name, a):
    """te_workload's positional parameters -> tessel's spec (same layout)."""
    if name == "C1D":
        n, l, ci, co, k, st, pad = a[:7]
        dil, g = (list(a[7:9]) + [1, 1])[:2] if len(a) > 7 else (1, 1)
        return f"conv1d_nlc:n={n},l={l},c={ci},k={co},r={k},stride={st},pad={pad},dilation={dil},groups={g}"
    if name in ("C2D", "DIL", "GRP"):
        n, h, w, ci, co, k = a[:6]
        st, pad, dil, g = (list(a[6:]) + [1, 0, 1, 1][len(a) - 6:])[:4]
        return (f"conv2d_nhwc:n={n},c={ci},h={h},w={w},k={co},r={k},s={k},stride={st},pad={pad},"
                f"dilation={dil},groups={g}")
    if name == "C3D":
        n, d, h, w, ci, co, k = a[:7]
        st, pad, dil, g = (list(a[7:]) + [1, 0, 1, 1][len(a) - 7:])[:4]
        return (f"conv3d_ndhwc:n={n},d={d},h={h},w={w},c={ci},k={co},t={k},r={k},s={k},stride={st},"
                f"pad={pad},dilation={dil},groups={g}")
    if name == "CAP":
        n, h, w, ci, co, k, st, pad = a[:8]
        cap = a[8] if len(a) > 8 else 4
        return f"conv2d_capsule:n={n},h={h},w={w},c={ci},k={co},r={k},s={k},cap={cap},stride={st},pad={pad}"
    if name == "DEP":
        n, h, w, c, k, st, pad = a[:7]
        dil = a[7] if len(a) > 7 else 1
        return f"depthwise_conv2d_nhwc:n={n},h={h},w={w},c={c},r={k},s={k},stride={st},pad={pad},dilation={dil}"
    if name == "T2D":
        n, h, w, ci, co, k, st, pad = a[:8]
        return f"conv2d_transpose_nhwc:n={n},h={h},w={w},c={ci},k={co},r={k},s={k},stride={st},pad={pad}"
    if name == "CBR":
        n, h, w, ci, co, k, st, pad = a[:8]
        dil = a[8] if len(a) > 8 else 1
        return (f"conv2d_nhwc_bn_relu:n={n},h={h},w={w},c={ci},k={co},r={k},s={k},stride={st},pad={pad},"
                f"dilation={dil}")
    if name == "GMM":
        b, n, m, k = a[:4]
        return f"batch_matmul:b={b},m={n},n={m},k={k}"
    if name == "TBG":
        b, l, h, d = a[:4]
        return f"transpose_batch_matmul:b={b},l={l},heads={h},d={d}"
    if name == "NRM":
        b, m, n = a[:3]
        return f"norm:b={b},m={m},n={n}"
    if name == "SFM":
        m, n = a[:2]
        return f"softmax:m={m},n={n}"
    raise KeyError(name)


def run(cmd, env=None, check=True):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if check and r.returncode:
        raise RuntimeError("%s failed (%d): %s%s" % (" ".join(cmd), r.returncode, r.stdout[-2000:], r.stderr[-2000:]))
    return r


def json_of(text):
    """The JSON object a --json command printed (possibly over several lines)."""
    return json.loads(text[text.index("{"):])


def log_records(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


# ---- the worker: one workload at one thread count ------------------------------------------


def tune_tessel(spec, trials, threads, work, env):
    log = os.path.join(work, "tessel.jsonl")
    t0 = time.time()
    r = run([TESSEL, "tune", spec, "--no-library", "--trials", str(trials), "--log", log, "--threads", str(threads), "--json"], env=env)
    wall = time.time() - t0
    summary = json_of(r.stdout)
    trace = []  # (seconds since start, mean run seconds) of every usable record
    for rec in log_records(log):
        if rec.get("error") is None and rec.get("verified") and rec.get("run_secs"):
            trace.append((rec["time"] - t0, statistics.mean(rec["run_secs"])))
    return {"log": log, "wall": wall, "trace": trace, "summary": summary}


def tune_tvm(name, idx, trials, threads, work, build_timeout):
    import tvm
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.testing import te_workload

    host = tvm.target.codegen.llvm_get_system_cpu()
    target = tvm.target.Target({"kind": "llvm", "mcpu": host, "num-cores": threads})
    mod = te_workload.create_te_workload(name, idx)
    trace = []
    t0 = time.time()

    @tvm.ir.utils.derived_object
    class Stamp(ms.measure_callback.PyMeasureCallback):
        def apply(self, task_scheduler, task_id, measure_candidates, builder_results, runner_results):
            now = time.time() - t0
            for rr in runner_results:
                if rr.error_msg is None and rr.run_secs:
                    trace.append((now, statistics.mean(float(x) for x in rr.run_secs)))

    callbacks = ms.measure_callback.MeasureCallback.create("default") + [Stamp()]
    db = ms.tir_integration.tune_tir(
        mod, target, os.path.join(work, "tvm"), max_trials_global=trials, num_trials_per_iter=64,
        builder=ms.builder.LocalBuilder(timeout_sec=build_timeout), runner=ms.runner.LocalRunner(timeout_sec=60),
        measure_callbacks=callbacks, cost_model="xgb")
    wall = time.time() - t0
    sch = ms.tir_integration.compile_tir(db, mod, target)
    exe = tvm.compile(sch.mod, target=target)
    return {"wall": wall, "trace": trace, "exe": exe, "target": str(host)}


def first_reach(trace, goal):
    """Seconds until a measured kernel was at least as fast as goal (None: never)."""
    for t, s in sorted(trace):
        if s <= goal * (1 + 1e-9):
            return t
    return None


def worker(a):
    import numpy as np
    import wl_numpy
    import tvm
    from tvm.s_tir.meta_schedule.testing import te_workload

    name, threads, trials = a.worker, a.threads_one, a.trials
    idx = a.idx if a.idx is not None else DEFAULT_IDX.get(name, 0)
    args = te_workload.CONFIGS[name][1][idx]
    spec = tessel_spec(name, args)
    work = tempfile.mkdtemp(prefix=f"sbs-{name}-{threads}-", dir=a.out)
    env = dict(os.environ, TESSEL_NUM_THREADS=str(threads))
    res = {"name": name, "idx": idx, "tvm_args": list(args), "spec": spec, "threads": threads, "trials": trials}
    flops = json.loads(run([TESSEL, "show", spec, "--json"]).stdout)["flops"]
    res["flops"] = flops

    ts = tune_tessel(spec, trials, threads, work, env)
    tv = tune_tvm(name, idx, trials, threads, work, a.tvm_build_timeout)
    res.update(tessel_wall=ts["wall"], tvm_wall=tv["wall"], tvm_mcpu=tv["target"],
               tessel_trials=len(ts["trace"]), tvm_trials=len(tv["trace"]))

    # re-time back to back, three alternating rounds
    dev = tvm.cpu(0)
    shapes = wl_numpy_shapes(spec)
    inputs = [wl_numpy.seeded_f32(s, 7 + i) for i, s in enumerate(shapes[:-1])]
    tv_args = [tvm.runtime.tensor(x, dev) for x in inputs] + [tvm.runtime.tensor(np.zeros(shapes[-1], "float32"), dev)]
    mod = tv["exe"].jit()
    f = mod["main"]
    ev = mod.time_evaluator("main", dev, number=1, repeat=5, min_repeat_ms=100)
    t_tessel, t_tvm = [], []
    for _ in range(3):
        b = json_of(run([TESSEL, "bench", spec, "--log", ts["log"], "--threads", str(threads), "--json"],
                        env=env).stdout)
        t_tessel.append(b["seconds_median"])
        res["tessel_verified"] = bool(b.get("matched", b.get("verified")))
        t_tvm.append(statistics.median(ev(*tv_args).results))
    res.update(tessel_s=min(t_tessel), tvm_s=min(t_tvm))

    # both against NumPy on the same seeded inputs
    ref = wl_numpy.reference(spec, inputs)
    f(*tv_args)
    res["tvm_numpy_ok"], res["tvm_numpy_err"] = wl_numpy.close(tv_args[-1].numpy(), ref)
    so = os.path.join(work, "best.so")
    run([TESSEL, "build", spec, "--log", ts["log"], "-o", so])
    outp = os.path.join(work, "out.bin")
    run([RUNNER, so, "7", outp], env=env)
    got = np.fromfile(outp, dtype=np.float32)
    res["tessel_numpy_ok"], res["tessel_numpy_err"] = wl_numpy.close(got, ref)

    # time to reach TVM's final best, each by its own measurements
    tvm_best = min(s for _, s in tv["trace"]) if tv["trace"] else None
    if tvm_best:
        res["tvm_best_tuned_s"] = tvm_best
        res["tessel_best_tuned_s"] = min(s for _, s in ts["trace"]) if ts["trace"] else None
        res["tessel_reach"] = first_reach(ts["trace"], tvm_best)
        res["tessel_reach90"] = first_reach(ts["trace"], tvm_best / 0.9)
        res["tvm_reach"] = first_reach(tv["trace"], tvm_best)
    print(json.dumps(res))
    with open(os.path.join(a.out, f"{name}-t{threads}.json"), "w") as fo:
        json.dump(res, fo)
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)


def wl_numpy_shapes(spec):
    import re
    out = run([TESSEL, "show", spec]).stdout
    sig = next(line for line in out.splitlines() if line.startswith("func "))
    return [tuple(int(d) for d in m.group(1).split(",")) for m in re.finditer(r"\w+: f32\[([\d, ]+)\]", sig)]


# ---- the driver ---------------------------------------------------------------------------


def peak(threads, best=None):
    """OpenBLAS sgemm 1024^3 GFLOP/s, best of 3 (and of best, an earlier figure)."""
    for _ in range(3):
        r = run([BASELINES, "sgemm", "1024", "1024", "1024", str(threads)], check=False)
        try:
            g = float(r.stdout.split()[0])
        except (IndexError, ValueError):
            continue
        best = g if best is None else max(best, g)
    return best


def fmt_s(x):
    # a log record stamped a moment before the wall clock started reads as 0, not "-0"
    return "—" if x is None else "%.0f" % max(0.0, x)


def table(rows, peaks, when="best of 3 before and 3 after the rows, this run"):
    hdr = ("| workload | tessel spec | thr | tessel GFLOP/s | TVM GFLOP/s | ratio | tessel tune s | TVM tune s "
           "| tessel reaches TVM best at s (90 % of it) | TVM reaches it at s | NumPy tessel/TVM |")
    lines = [hdr, "|" + "---|" * 11]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['name']} | {r.get('spec', '')} | {r['threads']} | error: {r['error'][:80]} |||||||| ")
            continue
        g1, g2 = r["flops"] / r["tessel_s"] * 1e-9, r["flops"] / r["tvm_s"] * 1e-9
        ok = ("ok" if r["tessel_numpy_ok"] else "FAIL") + "/" + ("ok" if r["tvm_numpy_ok"] else "FAIL")
        lines.append(f"| {r['name']} | `{r['spec'].split(':')[0]}` {r['spec'].split(':')[1]} | {r['threads']} "
                     f"| {g1:.2f} | {g2:.2f} | {g1 / g2:.2f} | {r['tessel_wall']:.0f} | {r['tvm_wall']:.0f} "
                     f"| {fmt_s(r.get('tessel_reach'))} ({fmt_s(r.get('tessel_reach90'))}) "
                     f"| {fmt_s(r.get('tvm_reach'))} | {ok} |")
    for t, p in sorted(peaks.items()):
        lines.append(f"\nmachine peak, {t} thread(s): OpenBLAS sgemm 1024^3 {p:.1f} GFLOP/s (bench_baselines, {when})"
                     if p else f"\nmachine peak, {t} thread(s): bench_baselines not built (ninja -C build bench/bench_baselines)")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=64)
    ap.add_argument("--threads", default="1", help="thread counts, e.g. 1,2")
    ap.add_argument("--workloads", default=",".join(SUITE))
    ap.add_argument("--two-thread-workloads", default=None,
                    help="the workloads of the rows at thread counts > 1 (default: all of --workloads)")
    ap.add_argument("--idx", type=int, default=None, help="te_workload CONFIGS index (default: 0; C3D 1)")
    ap.add_argument("--out", default=None, help="folder for the per-row JSON (default: a new temporary one)")
    ap.add_argument("--keep", action="store_true", help="keep the logs and TVM work folders")
    ap.add_argument("--tvm-build-timeout", type=float, default=600,
                    help="seconds per MetaSchedule build (its workers start by loading TVM and its tensor "
                         "intrinsics, which on a loaded machine takes minutes; 600)")
    ap.add_argument("--report", nargs="+", metavar="DIR",
                    help="print the table of the rows already in these --out folders (the peak measured now)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--threads-one", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        os.environ["TVM_NUM_THREADS"] = str(a.threads_one)
        os.environ["TESSEL_NUM_THREADS"] = str(a.threads_one)
        return worker(a)
    if a.report:
        rows = []
        for d in a.report:
            rows += [json.load(open(os.path.join(d, f))) for f in sorted(os.listdir(d)) if f.endswith(".json")]
        order = {n: i for i, n in enumerate(SUITE)}
        rows.sort(key=lambda r: (r["threads"], order.get(r["name"], 99)))
        print(table(rows, {t: peak(t) for t in sorted({r["threads"] for r in rows})},
                    "best of 3, measured by this --report, after the rows"))
        return 0
    a.out = a.out or tempfile.mkdtemp(prefix="tessel-vs-tvm-")
    os.makedirs(a.out, exist_ok=True)
    names = [n for n in a.workloads.split(",") if n]
    multi = [n for n in (a.two_thread_workloads or a.workloads).split(",") if n]
    threads = [int(t) for t in a.threads.split(",")]
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; trials {a.trials}; rows in {a.out}", flush=True)
    rows, peaks = [], {}
    for t in threads:
        peaks[t] = peak(t)
        print(f"# peak, {t} thread(s): OpenBLAS sgemm 1024^3 {peaks[t]} GFLOP/s", flush=True)
        for n in (names if t == 1 else multi):
            env = dict(os.environ, TVM_NUM_THREADS=str(t), TESSEL_NUM_THREADS=str(t))
            cmd = [sys.executable, os.path.abspath(__file__), "--worker", n, "--threads-one", str(t),
                   "--trials", str(a.trials), "--out", a.out, "--tvm-build-timeout", str(a.tvm_build_timeout)] + (["--idx", str(a.idx)] if a.idx is not None else []) + \
                  (["--keep"] if a.keep else [])
            t0 = time.time()
            r = subprocess.run(cmd, capture_output=True, text=True, env=env)
            path = os.path.join(a.out, f"{n}-t{t}.json")
            if r.returncode or not os.path.exists(path):
                row = {"name": n, "threads": t, "error": (r.stderr.strip().splitlines() or ["?"])[-1]}
                with open(os.path.join(a.out, f"{n}-t{t}.err"), "w") as fe:
                    fe.write(r.stdout + r.stderr)
            else:
                with open(path) as fi:
                    row = json.load(fi)
            rows.append(row)
            print(f"# {n} t={t}: {time.time() - t0:.0f} s", flush=True)
        peaks[t] = peak(t, peaks[t])  # at the start and the end of the rows: the best
    print(table(rows, peaks))


if __name__ == "__main__":
    sys.exit(main())
