"""retime_reach.py — "when did tessel reach TVM's final best?" answered by
re-timing instead of by each tuner's in-tuning measurements. Run with the
bench venv from the repository root on a side_by_side.py row kept with
--keep:

  /work/tvm-venv/bin/python bench/tvm/retime_reach.py OUT/NAME-tT.json OUT/sbs-NAME-T-xxxx \
      [--rounds 3] [--all]

side_by_side.py's time-to-reach columns compare each tuner's own measurements
taken at different moments: on a shared machine a kernel measured while
another process ran reads slower than it is, and a row can miss by noise. Here
TVM's final best (compiled from its kept database) and tessel's logged
candidates, in the order tessel measured them, are re-timed back to back in
interleaved rounds (tessel: `tessel bench --log` with a one-record log,
median of 5 repeats of >= 100 ms; TVM: time_evaluator, median of 5 repeats of
>= 100 ms), and the first candidate whose median over the rounds is at most
TVM's is reported with its time since tessel's start (the start taken as the
last record's time minus tessel's wall, the log's clock being in whole
seconds). --all re-times every candidate instead of stopping at the first.
Prints one line per candidate re-timed and the verdict. Speed is never a
test: this is bench/."""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "ir"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
TESSEL = os.path.join(ROOT, "build", "tessel")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("row", help="the row's NAME-tT.json")
    ap.add_argument("work", help="the row's kept work folder (tessel.jsonl, tvm/)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--all", action="store_true")
    a = ap.parse_args()
    import numpy as np
    import tvm
    import wl_numpy
    from side_by_side import wl_numpy_shapes
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.testing import te_workload

    row = json.load(open(a.row))
    th = row["threads"]
    os.environ["TVM_NUM_THREADS"] = os.environ["TESSEL_NUM_THREADS"] = str(th)
    target = tvm.target.Target({"kind": "llvm", "mcpu": row["tvm_mcpu"], "num-cores": th})
    mod = te_workload.create_te_workload(row["name"], row["idx"])
    db = ms.database.JSONDatabase(work_dir=os.path.join(a.work, "tvm"))
    exe = tvm.compile(ms.tir_integration.compile_tir(db, mod, target).mod, target=target)
    dev = tvm.cpu(0)
    shapes = wl_numpy_shapes(row["spec"])
    args = [tvm.runtime.tensor(wl_numpy.seeded_f32(s, 7 + i), dev) for i, s in enumerate(shapes[:-1])]
    args.append(tvm.runtime.tensor(np.zeros(shapes[-1], "float32"), dev))
    ev = exe.jit().time_evaluator("main", dev, number=1, repeat=5, min_repeat_ms=100)

    with open(os.path.join(a.work, "tessel.jsonl")) as f:
        recs = [json.loads(ln) for ln in f if ln.strip()]
    t0 = max(r["time"] for r in recs) - row["tessel_wall"]
    cands, seen = [], set()
    for r in sorted(recs, key=lambda r: r["time"]):
        if r.get("error") is None and r.get("verified") and r.get("trace_hash") not in seen:
            seen.add(r.get("trace_hash"))
            cands.append(r)
    print("# %s, %d thread(s); TVM's final best measured %.1f us in its tuning, at %.0f s; load %s" % (
        row["name"], th, row["tvm_best_tuned_s"] * 1e6, row["tvm_reach"], open("/proc/loadavg").read().split()[0]))
    tmp = tempfile.mkdtemp(prefix="reach-")
    env = dict(os.environ)
    verdict = None
    for r in cands:
        one = os.path.join(tmp, "one.jsonl")
        with open(one, "w") as f:
            f.write(json.dumps(r) + "\n")
        ts, tv = [], []
        for _ in range(a.rounds):
            out = subprocess.run([TESSEL, "bench", row["spec"], "--log", one, "--threads", str(th), "--json"],
                                 capture_output=True, text=True, env=env, check=True).stdout
            ts.append(json.loads(out[out.index("{"):])["seconds_median"])
            tv.append(statistics.median(ev(*args).results))
        mt, mv = statistics.median(ts), statistics.median(tv)
        when = r["time"] - t0
        print("tessel %s at %4.0f s: in tuning %8.1f us; re-timed %8.1f us vs TVM's best %8.1f us: %.2fx" % (
            r.get("trace_hash"), when, statistics.median(r["run_secs"]) * 1e6, mt * 1e6, mv * 1e6, mv / mt),
            flush=True)
        if mt <= mv and verdict is None:
            verdict = when
            if not a.all:
                break
    print("# re-timed back to back: tessel reached TVM's final best at %s s, TVM at %.0f s (half: %.0f s); "
          "load %s" % ("—" if verdict is None else "%.0f" % max(0.0, verdict), row["tvm_reach"],
                       row["tvm_reach"] / 2, open("/proc/loadavg").read().split()[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
