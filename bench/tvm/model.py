"""model.py — one ONNX model tuned end to end by TVM's MetaSchedule and by
`tessel tune-model` under the same total trial budget and thread count, one
tuner after the other, then both built models and onnxruntime timed back to
back. Run with the bench venv (bench/tvm/setup.sh: apache-tvm 0.27 and onnx)
from the repository root:

  /work/tvm-venv/bin/python bench/tvm/model.py MODEL.onnx --trials N --threads T \
      --keep DIR [--rounds R] [--repeat N] [--cpus LIST]
  /work/tvm-venv/bin/python bench/tvm/model.py --time-only --keep DIR [--rounds R ...]
  /work/tvm-venv/bin/python bench/tvm/model.py --report --keep DIR

1. TVM: the model is imported by the Relax ONNX frontend (weights as
   constants, the input at the ONNX model's static shape), lowered by Relax's
   zero pipeline (DecomposeOpsForInference, LegalizeOps, FuseOps, FuseTIR:
   what relax.pipeline.static_shape_tuning_pipeline runs before tuning), and
   its fused TIR tasks tuned by MetaSchedule's Relax integration
   (meta_schedule.relax_integration.tune_relax: gradient task scheduler,
   evolutionary search, XGBoost model, LocalBuilder/LocalRunner) with
   max_trials_global N and min(64, N / tasks) trials per iteration, so that
   every task gets a round, as tessel's --batch default does. The best
   schedules are applied (MetaScheduleApplyDatabase), the module is compiled
   by tvm.compile and exported to DIR/tvm/model.so. The wall clock runs from
   the import to the end of tuning (TVM's own Python import not counted).
2. tessel: `tessel tune-model MODEL --trials N --threads T --no-library` (the
   wall clock starts with the process), then `tessel build --log --threads T`
   to DIR/tessel/model.so. Generated kernels only.
3. Timing, R rounds, each round one fresh process per side in turn (tessel,
   TVM, onnxruntime), all under the same `taskset -c CPUS` (default: the
   first T CPUs) and thread count; each process runs 5 warm-ups (tessel: 1)
   and REPEAT timed runs on the same seeded input (uniform [-1, 1), seed 7).
   Per side the median of all runs. Each side's output is compared with
   onnxruntime's (default graph optimisations, intra_op_num_threads T).
4. One table: median latency of each side, ratios, tuning wall and trials of
   each tuner, the machine's peak (OpenBLAS sgemm 1024^3 at T threads,
   build/bench/bench_baselines, best of 3 before and 3 after the timing) and
   the load average around each phase.

A tuner whose artifact is already in DIR is not run again (the budget and
the model must match); --time-only re-times what is in DIR without tuning
(the quiet-machine re-timing), --report prints the last table again.
Everything lands in DIR: meta.json (every figure), tvm/ (MetaSchedule's
work dir, the model's .so), tessel/ (the log, the .so), the input, outputs.
Speed is never a test: this is bench/."""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from side_by_side import json_of, peak, run  # noqa: E402 (the single-operator script's helpers, one copy)

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
TESSEL = os.path.join(ROOT, "build", "tessel")
BASELINES = os.path.join(ROOT, "build", "bench", "bench_baselines")
ORT_PY = os.path.join(ROOT, ".venv", "bin", "python")
ORT_RUN = os.path.join(ROOT, "bench", "resnet18_ort.py")


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def env_threads(threads):
    return dict(os.environ, TVM_NUM_THREADS=str(threads), TESSEL_NUM_THREADS=str(threads),
                OMP_NUM_THREADS=str(threads))


def load_meta(d):
    p = os.path.join(d, "meta.json")
    if os.path.exists(p):
        with open(p) as f:
            return json.load(f)
    return {}


def save_meta(d, meta):
    tmp = os.path.join(d, "meta.json.tmp")
    with open(tmp, "w") as f:
        json.dump(meta, f, indent=1)
    os.replace(tmp, os.path.join(d, "meta.json"))


# ---- workers (run in child processes, TVM_NUM_THREADS set before TVM loads) -----------------


def model_input(model_path):
    """(name, shape) of the ONNX model's one graph input that is not an initializer."""
    import onnx
    m = onnx.load(model_path, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    ins = [i for i in m.graph.input if i.name not in inits]
    if len(ins) != 1:
        raise SystemExit("model.py: %s has %d graph inputs; one is supported" % (model_path, len(ins)))
    dims = ins[0].type.tensor_type.shape.dim
    if any(not d.HasField("dim_value") for d in dims):
        raise SystemExit("model.py: input %s of %s has a symbolic dim; give a static model" % (ins[0].name, model_path))
    return ins[0].name, [d.dim_value for d in dims]


def tvm_target(threads):
    import tvm
    host = tvm.target.codegen.llvm_get_system_cpu()
    return tvm.target.Target({"kind": "llvm", "mcpu": host, "num-cores": threads})


def tvm_lowered(model_path, target):
    """The model through the Relax frontend and the zero pipeline (fused TIR tasks)."""
    import onnx
    import tvm
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx
    name, shape = model_input(model_path)
    mod = from_onnx(onnx.load(model_path), {name: shape}, keep_params_in_input=False)
    with target:
        mod = tvm.transform.Sequential([relax.transform.DecomposeOpsForInference(),
                                        relax.transform.CanonicalizeBindings(),
                                        relax.pipeline.zero_pipeline()])(mod)
    return mod


def inproc_builder():
    """MetaSchedule's LocalBuilder work (default_build, default_export) done in the
    tuning process itself, one candidate after the other: LocalBuilder starts a
    fresh pool of workers for every batch, each loading TVM (~10 s of CPU), which
    on a loaded two-core machine costs minutes per batch. Same artifacts; only
    TVM's tuning wall gets shorter."""
    import tvm
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.builder.local_builder import default_build, default_export

    @tvm.ir.utils.derived_object
    class InProcBuilder(ms.builder.PyBuilder):
        def build(self, build_inputs):
            out = []
            for bi in build_inputs:
                try:
                    out.append(ms.builder.BuilderResult(default_export(default_build(bi.mod, bi.target, None)), None))
                except Exception as e:  # noqa: BLE001 — a failed candidate, as LocalBuilder reports it
                    out.append(ms.builder.BuilderResult(None, "in-process build: %s" % e))
            return out

    return InProcBuilder()


def worker_tvm_tune(a):
    import tvm
    from tvm import relax
    from tvm.s_tir import meta_schedule as ms

    work = os.path.join(a.keep, "tvm")
    os.makedirs(work, exist_ok=True)
    target = tvm_target(a.threads)
    t0 = time.time()
    mod = tvm_lowered(a.model, target)
    tasks = ms.relax_integration.extract_tasks(mod, target)
    per_iter = max(1, min(64, a.trials // max(1, len(tasks))))
    stamps = []

    @tvm.ir.utils.derived_object
    class Stamp(ms.measure_callback.PyMeasureCallback):
        def apply(self, task_scheduler, task_id, measure_candidates, builder_results, runner_results):
            ok = sum(1 for rr in runner_results if rr.error_msg is None and rr.run_secs)
            stamps.append((time.time() - t0, task_id, len(runner_results), ok))

    builder = (ms.builder.LocalBuilder(timeout_sec=a.tvm_build_timeout) if a.tvm_builder == "local"
               else inproc_builder())
    done = os.path.join(work, "tuned.json")  # tuning finished: a rerun only compiles
    if os.path.exists(done):
        with open(done) as f:
            wall, stamps = json.load(f)
    else:
        ms.relax_integration.tune_relax(
            mod, {}, target, work, max_trials_global=a.trials, num_trials_per_iter=per_iter,
            builder=builder, runner=ms.runner.LocalRunner(timeout_sec=60),
            measure_callbacks=ms.measure_callback.MeasureCallback.create("default") + [Stamp()],
            cost_model="xgb", task_scheduler="gradient")
        wall = time.time() - t0
        with open(done, "w") as f:
            json.dump([wall, stamps], f)
    with target, tvm.transform.PassContext(opt_level=3):
        tuned = relax.transform.MetaScheduleApplyDatabase(work)(mod)
    ex = tvm.compile(tuned, target=target)
    so = os.path.join(work, "model.so")
    ex.export_library(so)
    res = {"wall": wall, "tasks": len(tasks), "trials_per_iter": per_iter,
           "trials": sum(s[2] for s in stamps), "trials_ok": sum(s[3] for s in stamps),
           "compile_s": time.time() - t0 - wall, "mcpu": str(target.attrs["mcpu"]), "so": so,
           "task_names": [t.task_name for t in tasks]}
    print("TVMRESULT " + json.dumps(res), flush=True)


def worker_tvm_time(a):
    import numpy as np
    import tvm
    from tvm import relax

    lib = tvm.runtime.load_module(a.so)
    dev = tvm.cpu(0)
    vm = relax.VirtualMachine(lib, dev)
    x = tvm.runtime.tensor(np.load(a.input), dev)
    f = vm["main"]
    for _ in range(5):
        out = f(x)
    each = []
    for _ in range(a.repeat):
        t = time.perf_counter()
        out = f(x)
        each.append((time.perf_counter() - t) * 1e3)
    if isinstance(out, (list, tuple)) or not hasattr(out, "numpy"):
        out = out[0]
    np.save(a.out_npy, out.numpy())
    print(json.dumps({"each_ms": each}))


# ---- the driver ---------------------------------------------------------------------------


def tune_tvm(a, meta):
    la0 = loadavg()
    cmd = [sys.executable, os.path.abspath(__file__), a.model, "--worker", "tvm-tune", "--trials", str(a.trials),
           "--threads", str(a.threads), "--keep", a.keep, "--tvm-build-timeout", str(a.tvm_build_timeout),
           "--tvm-builder", a.tvm_builder]
    log = os.path.join(a.keep, "tvm-tune.log")
    with open(log, "w") as f:
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=f, text=True, env=env_threads(a.threads))
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("TVMRESULT ")]
    if r.returncode or not line:
        raise RuntimeError("TVM tuning failed (%d); see %s" % (r.returncode, log))
    meta["tvm"] = dict(json.loads(line[-1][len("TVMRESULT "):]), load=[la0, loadavg()], builder=a.tvm_builder)
    save_meta(a.keep, meta)


def tune_tessel(a, meta):
    d = os.path.join(a.keep, "tessel")
    os.makedirs(d, exist_ok=True)
    log, so = os.path.join(d, "tune.jsonl"), os.path.join(d, "model.so")
    if os.path.exists(log):
        os.remove(log)  # a partial log would count toward the budget
    la0 = loadavg()
    env = env_threads(a.threads)
    t0 = time.time()
    with open(os.path.join(a.keep, "tessel-tune.log"), "w") as f:
        r = subprocess.run([TESSEL, "tune-model", a.model, "--trials", str(a.trials), "--threads", str(a.threads),
                            "--no-library", "--log", log, "--json"], stdout=subprocess.PIPE, stderr=f, text=True,
                           env=env)
    wall = time.time() - t0
    if r.returncode:
        raise RuntimeError("tessel tune-model failed (%d); see %s/tessel-tune.log" % (r.returncode, a.keep))
    summ = json_of(r.stdout)
    with open(log) as f:
        recs = [json.loads(ln) for ln in f if ln.strip()]
    t1 = time.time()
    run([TESSEL, "build", a.model, "-o", so, "--log", log, "--threads", str(a.threads)], env=env)
    meta["tessel"] = {"wall": wall, "build_s": time.time() - t1, "tasks": len(summ.get("tasks", [])),
                      "trials": summ.get("trials"), "new_trials": summ.get("new_trials"), "records": len(recs),
                      "estimated_ms": (summ.get("estimated_latency_seconds") or 0) * 1e3, "so": so,
                      "load": [la0, loadavg()]}
    save_meta(a.keep, meta)


def make_input(a, meta):
    import numpy as np
    name, shape = model_input(a.model)
    p = os.path.join(a.keep, "input.npy")
    x = np.random.default_rng(7).uniform(-1.0, 1.0, size=shape).astype(np.float32)
    np.save(p, x)
    meta["input"] = {"name": name, "shape": shape, "path": p}


def time_all(a, meta):
    """R rounds of one fresh process per side, same pinning and thread count; medians."""
    import numpy as np
    th, inp = meta["threads"], meta["input"]
    cpus = a.cpus or ("0" if th == 1 else "0-%d" % (th - 1))
    pin = ["taskset", "-c", cpus]
    env = env_threads(th)
    outd = os.path.join(a.keep, "outputs")
    os.makedirs(outd, exist_ok=True)
    sides = {"tessel": [], "TVM": [], "onnxruntime": []}
    la0, p0 = loadavg(), peak(th)
    for _ in range(a.rounds):
        r = run(pin + [TESSEL, "run", meta["tessel"]["so"], "--input", "%s=%s" % (inp["name"], inp["path"]),
                       "--bench", "--repeat", str(a.repeat), "--threads", str(th), "--json",
                       "--output-dir", os.path.join(outd, "tessel")], env=env)
        sides["tessel"] += json_of(r.stdout)["latency_ms"]["each"]
        r = run(pin + [sys.executable, os.path.abspath(__file__), "--worker", "tvm-time", "--so", meta["tvm"]["so"],
                       "--input", inp["path"], "--repeat", str(a.repeat), "--out-npy",
                       os.path.join(outd, "tvm.npy")], env=env)
        sides["TVM"] += json_of(r.stdout)["each_ms"]
        r = run(pin + [ORT_PY, ORT_RUN, meta["model"], inp["path"], os.path.join(outd, "ort"), str(th),
                       str(a.repeat)], env=env)
        sides["onnxruntime"] += json_of(r.stdout)["each_ms"]
    la1, p1 = loadavg(), peak(th)
    ref = np.load(os.path.join(outd, "ort", "logits.npy"))
    tes = [f for f in sorted(os.listdir(os.path.join(outd, "tessel"))) if f.endswith(".npy")]
    got = {"tessel": np.load(os.path.join(outd, "tessel", tes[0])), "TVM": np.load(os.path.join(outd, "tvm.npy"))}
    check = {}
    for k, v in got.items():
        v = v.reshape(ref.shape) if v.size == ref.size else v
        if v.shape != ref.shape:
            check[k] = {"ok": False, "max_abs_err": None, "why": "shape %s vs %s" % (v.shape, ref.shape)}
            continue
        err = float(np.max(np.abs(v.astype(np.float64) - ref)))
        check[k] = {"ok": bool(np.allclose(v, ref, rtol=1e-3, atol=1e-3)), "max_abs_err": err,
                    "top1_same": bool(np.argmax(v) == np.argmax(ref))}
    meta["timing"] = {"when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cpus": cpus, "rounds": a.rounds,
                      "repeat": a.repeat, "load": [la0, la1],
                      "peak": max(p for p in (p0, p1) if p is not None) if (p0 or p1) else None,
                      "median_ms": {k: statistics.median(v) for k, v in sides.items()},
                      "p10_p90_ms": {k: [sorted(v)[len(v) // 10], sorted(v)[(len(v) * 9) // 10]]
                                     for k, v in sides.items()},
                      "check": check}
    save_meta(a.keep, meta)


def table(meta):
    t, tv, ts = meta["timing"], meta.get("tvm", {}), meta.get("tessel", {})
    med, ort = t["median_ms"], t["median_ms"]["onnxruntime"]
    lines = ["model %s, %d thread(s), budget %d trials each; timed %s, %d rounds x %d runs per side, "
             "taskset -c %s" % (meta["model"], meta["threads"], meta["trials"], t["when"], t["rounds"], t["repeat"],
                                t["cpus"]),
             "",
             "| side | median ms | p10-p90 ms | / onnxruntime | tessel speed-up over it | tuning wall s | trials | "
             "tasks | load during tuning | max abs err vs ort (top-1 same) |",
             "|" + "---|" * 10]
    for side in ("tessel", "TVM", "onnxruntime"):
        m = med[side]
        tun = {"tessel": ts, "TVM": tv}.get(side, {})
        ck = t["check"].get(side)
        cks = "reference" if side == "onnxruntime" else (
            "%s %.2g (%s)" % ("ok" if ck["ok"] else "FAIL", ck["max_abs_err"], "yes" if ck["top1_same"] else "no")
            if ck and ck.get("max_abs_err") is not None else "FAIL: %s" % (ck or {}).get("why"))
        lines.append("| %s | %.2f | %.2f-%.2f | %.2fx | %s | %s | %s | %s | %s | %s |" % (
            side, m, t["p10_p90_ms"][side][0], t["p10_p90_ms"][side][1], m / ort,
            "—" if side == "tessel" else "%.2fx" % (m / med["tessel"]),
            "%.0f" % tun["wall"] if tun else "—", tun.get("trials", "—") if tun else "—",
            tun.get("tasks", "—") if tun else "—", " / ".join(tun["load"]) if tun else "—", cks))
    pk = t.get("peak")
    lines.append("")
    lines.append("machine peak, %d thread(s): OpenBLAS sgemm 1024^3 %s GFLOP/s (bench_baselines, best of 3 before and "
                 "3 after the timing); load average %s before the timing, %s after"
                 % (meta["threads"], "%.1f" % pk if pk else "?", t["load"][0], t["load"][1]))
    if tv:
        lines.append("TVM: %s tasks, %d trials per iteration, %d of %d trials built and ran; mcpu %s; compile %.0f s"
                     % (tv["tasks"], tv["trials_per_iter"], tv["trials_ok"], tv["trials"], tv["mcpu"],
                        tv["compile_s"]))
    if ts:
        lines.append("tessel: %s tasks, %s trials, build %.0f s, its estimate (sum of weight x best) %.2f ms"
                     % (ts["tasks"], ts["trials"], ts["build_s"], ts["estimated_ms"]))
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", nargs="?")
    ap.add_argument("--trials", type=int)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--keep", help="folder for every artifact and meta.json (needed but by the workers)")
    ap.add_argument("--rounds", type=int, default=5, help="processes per side (default 5)")
    ap.add_argument("--repeat", type=int, default=20, help="timed runs per process (default 20)")
    ap.add_argument("--cpus", help="taskset CPU list for the timing (default: the first THREADS CPUs)")
    ap.add_argument("--tvm-build-timeout", type=float, default=600, help="LocalBuilder's timeout per build")
    ap.add_argument("--tvm-builder", choices=["local", "inproc"], default="local",
                    help="MetaSchedule's LocalBuilder (default) or the same builds in the tuning process")
    ap.add_argument("--order", default="tvm,tessel", help="which tuner first (default tvm,tessel)")
    ap.add_argument("--time-only", action="store_true", help="re-time the artifacts in --keep; no tuning")
    ap.add_argument("--report", action="store_true", help="print the last table in --keep")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--so", help=argparse.SUPPRESS)
    ap.add_argument("--input", help=argparse.SUPPRESS)
    ap.add_argument("--out-npy", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker == "tvm-time":
        return worker_tvm_time(a)
    if not a.keep:
        ap.error("--keep DIR is needed")
    a.keep = os.path.abspath(a.keep)
    if a.worker == "tvm-tune":
        return worker_tvm_tune(a)
    if a.worker == "tvm-time":
        return worker_tvm_time(a)
    meta = load_meta(a.keep)
    if a.report:
        print(table(meta))
        return 0
    if a.time_only:
        if "tvm" not in meta or "tessel" not in meta:
            raise SystemExit("model.py: %s holds no tuned artifacts of both sides" % a.keep)
    else:
        if not a.model or not a.trials:
            ap.error("MODEL and --trials are needed (or --time-only / --report with --keep)")
        a.model = os.path.abspath(a.model)
        os.makedirs(a.keep, exist_ok=True)
        if meta.get("model") != a.model or meta.get("trials") != a.trials or meta.get("threads") != a.threads:
            meta = {"model": a.model, "trials": a.trials, "threads": a.threads}
            save_meta(a.keep, meta)
        print("# %s; %s, %d thread(s), %d trials each; artifacts in %s; load %s" % (
            time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), a.model, a.threads, a.trials, a.keep, loadavg()),
            flush=True)
        for side in a.order.split(","):
            if side == "tvm" and "tvm" not in meta:
                tune_tvm(a, meta)
            elif side == "tessel" and "tessel" not in meta:
                tune_tessel(a, meta)
            else:
                continue
            print("# %s tuned: %.0f s, %s trials (load %s)" % (side, meta[side]["wall"], meta[side]["trials"],
                                                                loadavg()), flush=True)
    a.model = meta["model"]
    make_input(a, meta)
    time_all(a, meta)
    print(table(meta))
    return 0


if __name__ == "__main__":
    sys.exit(main())
