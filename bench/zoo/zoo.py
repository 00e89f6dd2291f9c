#!/usr/bin/env python3
"""zoo.py MODELS_DIR OUT_DIR [options] — bench/zoo's table (driven by zoo.sh).

For every model MODELS_DIR/NAME.onnx exported by bench/zoo/export.py (with its
NAME.json: inputs, vocabulary size), in one run:

1. imports: `tessel graph show MODEL` (the ONNX importer alone); on failure the
   row carries tessel's refusal message;
2. builds: `tessel build MODEL -o OUT_DIR/NAME.so` (passes, legalisation,
   default schedules, codegen; untuned). A transformer is built ONCE and run at
   every batch x sequence pair (--batches x --seqs);
3. matches: seeded inputs (images uniform [-1, 1); token ids uniform over the
   vocabulary; attention mask all ones except the last quarter of batch row 1),
   the reference from onnxruntime with graph optimisations OFF (the plain
   operator semantics, as tests/models/ort_run.py), and `tessel run --input ...
   --output-dir ...` on each thread count; the error is max |tessel - ref| over
   max |ref| over all outputs (the issue's bar: <= 1e-3);
4. latency: tessel's median of `--bench --repeat N --threads T`
   (TESSEL_NUM_THREADS=T as well) against onnxruntime's median in this process
   with DEFAULT graph optimisations (ORT_ENABLE_ALL, what a user gets),
   intra_op_num_threads=T, 3 warm-ups and N timed runs; the two alternate
   --rounds times per T and each keeps its best median (the machine is
   shared: load comes and goes); the ratio is tessel / onnxruntime (< 1 is
   faster).

Prints one Markdown table; --status FILE also writes each model's first
refusal (or "ok") and its operator types as plain lines. Needs numpy, onnx and onnxruntime (the test set-up's
.venv has both). docs/MODEL.md ("zoo").
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

import numpy as np

BAR = 1e-3


def sanitize(name):
    s = re.sub(r"[^A-Za-z0-9_.\-]", "_", name)
    return "output" if s in ("", ".", "..") else s


def first_line(text, model):
    """tessel's message: the last non-empty stderr line, without the command
    and model path prefixes (the row names the model)."""
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    msg = re.sub(r"^tessel [a-z ]+: ", "", lines[-1]) if lines else "(no message)"
    while msg.startswith(model + ": "):
        msg = msg[len(model) + 2:]
    return msg


def sh(cmd, timeout, env=None):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        return 124, "", "timed out after %d s: %s" % (timeout, " ".join(cmd))


def make_inputs(meta, batch, seq, seed):
    feeds = {}
    for idx, inp in enumerate(meta["inputs"]):
        dims = {"batch": batch, "sequence": seq}
        shape = [d if isinstance(d, int) else dims[d] for d in inp["shape"]]
        rng = np.random.default_rng(seed + idx)
        if inp["name"] == "attention_mask":
            a = np.ones(shape, np.int64)
            if shape[0] > 1:
                a[1, shape[1] - shape[1] // 4:] = 0
        elif inp["dtype"] == "int64":
            a = rng.integers(0, meta.get("vocab", 2), size=shape, dtype=np.int64)
        else:
            a = rng.uniform(-1.0, 1.0, size=shape).astype(np.float32)
        feeds[inp["name"]] = a
    return feeds


def ort_session(model, threads, optimise):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    if not optimise:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


def ort_median_ms(sess, feeds, repeat):
    for _ in range(3):
        sess.run(None, feeds)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        sess.run(None, feeds)
        times.append(time.perf_counter() - t0)
    times.sort()
    return times[len(times) // 2] * 1e3


def rel_error(ref_outs, out_dir, names):
    """max |x - ref| / max |ref| over every output; None with a reason on a
    missing or misshapen output."""
    worst = 0.0
    for name, r in zip(names, ref_outs):
        path = os.path.join(out_dir, sanitize(name) + ".npy")
        if not os.path.exists(path):
            return None, "no output %s" % name
        x = np.load(path)
        if x.shape != r.shape:
            return None, "output %s shape %s, onnxruntime %s" % (name, x.shape, r.shape)
        scale = float(np.max(np.abs(r))) or 1.0
        d = np.abs(x.astype(np.float64) - r.astype(np.float64))
        if not np.all(np.isfinite(d)):
            return None, "output %s has non-finite values" % name
        worst = max(worst, float(d.max()) / scale)
    return worst, None


def tessel_run(a, so, in_args, out_dir, threads):
    env = dict(os.environ, TESSEL_NUM_THREADS=str(threads))
    cmd = [a.tessel, "run", so] + in_args + ["--output-dir", out_dir, "--bench", "--repeat", str(a.repeat),
                                              "--threads", str(threads), "--json"]
    rc, out, err = sh(cmd, a.run_timeout, env)
    if rc != 0:
        return None, "run: " + first_line(err, so)
    return json.loads(out)["latency_ms"]["median"], None


def run_case(a, name, model, so, meta, batch, seq, row):
    """One input size of a built model: reference, tessel and onnxruntime on
    each thread count; fills row (matches, latencies)."""
    work = os.path.join(a.out_dir, name, "b%d_s%d" % (batch, seq))
    os.makedirs(os.path.join(work, "in"), exist_ok=True)
    feeds = make_inputs(meta, batch, seq, a.seed)
    in_args = []
    for k, v in feeds.items():
        p = os.path.join(work, "in", sanitize(k) + ".npy")
        np.save(p, v)
        in_args += ["--input", "%s=%s" % (k, p)]
    ref_sess = ort_session(model, 1, False)
    names = [o.name for o in ref_sess.get_outputs()]
    ref = ref_sess.run(None, feeds)
    del ref_sess
    errs = []
    for t in a.threads:
        sess = ort_session(model, t, True)
        best = [float("inf"), float("inf")]
        for _ in range(a.rounds):  # alternate, keep each side's best median
            ms, why = tessel_run(a, so, in_args, os.path.join(work, "tessel%d" % t), t)
            if why:
                row["note"] = why
                return
            e, why = rel_error(ref, os.path.join(work, "tessel%d" % t), names)
            if why:
                row["note"] = why
                return
            errs.append(e)
            best = [min(best[0], ms), min(best[1], ort_median_ms(sess, feeds, a.repeat))]
        row["lat"][t] = tuple(best)
        del sess
    row["err"] = max(errs)


def op_types(model):
    """The model's operator types with their counts (for STATUS: what an
    operator author needs beyond the first refusal)."""
    import onnx

    m = onnx.load(model, load_external_data=False)
    counts = {}
    for n in m.graph.node:
        counts[n.op_type] = counts.get(n.op_type, 0) + 1
    opset = next((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), 0)
    return "opset %d; " % opset + " ".join("%s:%d" % kv for kv in sorted(counts.items()))


def model_rows(a, name):
    model = os.path.join(a.models_dir, name + ".onnx")
    with open(os.path.join(a.models_dir, name + ".json")) as f:
        meta = json.load(f)
    symbolic = {d for i in meta["inputs"] for d in i["shape"] if isinstance(d, str)}
    sizes = [(b, s) for b in a.batches for s in (a.seqs if "sequence" in symbolic else [0])] \
        if symbolic else [(1, 0)]
    row = lambda label: {"label": label, "imports": None, "builds": None, "err": None, "lat": {}, "note": ""}
    one = row(name + (" (all sizes)" if symbolic else ""))
    rc, _, err = sh([a.tessel, "graph", "show", model], a.build_timeout)
    if rc != 0:
        one["imports"], one["note"] = False, first_line(err, model)
        return [one]
    so = os.path.join(a.out_dir, name + ".so")
    t0 = time.time()
    rc, _, err = sh([a.tessel, "build", model, "-o", so] + a.build_arg, a.build_timeout)
    build_s = time.time() - t0
    if rc != 0:
        one["imports"], one["builds"], one["note"] = True, False, "build: " + first_line(err, model)
        return [one]
    if a.no_run:
        one["imports"], one["builds"], one["build_s"] = True, True, build_s
        return [one]
    rows = []
    for b, s in sizes:
        r = row(name + ("" if not symbolic else " b%d" % b + (" s%d" % s if s else "")))
        r["imports"], r["builds"], r["build_s"] = True, True, build_s
        rows.append(r)
    for r, (b, s) in zip(rows, sizes):
        run_case(a, name, model, so, meta, b, s, r)
    return rows


def fmt_row(a, r):
    yes = lambda v: "-" if v is None else ("yes" if v else "**no**")
    if r["err"] is None:
        match = "-"
    else:
        match = "%.1e %s" % (r["err"], "ok" if r["err"] <= BAR else "**FAIL**")
    builds = yes(r["builds"]) + (" (%.0f s)" % r["build_s"] if r.get("builds") else "")
    cells = [r["label"], yes(r["imports"]), builds, match]
    for t in a.threads:
        if t in r["lat"]:
            ms, ort = r["lat"][t]
            cells.append("%.3g / %.3g = %.2fx" % (ms, ort, ms / ort))
        else:
            cells.append("-")
    cells.append(r["note"].replace("|", "\\|"))
    return "| " + " | ".join(cells) + " |"


def write_status(path, context, lines):
    with open(path + ".tmp", "w") as f:
        f.write("# bench/zoo status (bench/zoo/zoo.py): each model's first refusal, its operators\n# %s\n"
                % context)
        f.write("\n".join(lines) + "\n")
    os.replace(path + ".tmp", path)


def main():
    ap = argparse.ArgumentParser(description="bench/zoo's table: import, build, match, latency")
    ap.add_argument("models_dir")
    ap.add_argument("out_dir")
    ap.add_argument("--tessel", default="build/tessel")
    ap.add_argument("--only", default="", help="comma-separated model names (default: every NAME.onnx)")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--batches", default="1,2")
    ap.add_argument("--seqs", default="16,64")
    ap.add_argument("--repeat", type=int, default=10, help="timed runs per median")
    ap.add_argument("--rounds", type=int, default=2, help="tessel/onnxruntime alternations per thread count")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--build-timeout", type=int, default=1800)
    ap.add_argument("--run-timeout", type=int, default=900)
    ap.add_argument("--no-run", action="store_true", help="import and build only (a quick status)")
    ap.add_argument("--status", help="also write each model's first refusal here")
    ap.add_argument("--context", default="", help="a line printed above the table (machine, peak)")
    ap.add_argument("--build-arg", action="append", default=[],
                    help="one more argument of `tessel build` (repeat it: --build-arg=--log --build-arg=LOG)")
    a = ap.parse_args()
    a.threads = [int(x) for x in a.threads.split(",")]
    a.batches = [int(x) for x in a.batches.split(",")]
    a.seqs = [int(x) for x in a.seqs.split(",")]
    names = [n for n in a.only.split(",") if n] or sorted(
        f[:-5] for f in os.listdir(a.models_dir) if f.endswith(".onnx"))
    os.makedirs(a.out_dir, exist_ok=True)
    head = ["model", "imports", "builds", "matches ort (max err / max ref)"] + [
        "%d thr: tessel / ort ms" % t for t in a.threads] + ["first refusal / note"]
    lines = []
    if a.context:
        lines += [a.context, ""]
    lines += ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    print("\n".join(lines), flush=True)
    status = []
    for n in names:
        rows = model_rows(a, n)
        for r in rows:
            lines.append(fmt_row(a, r))
            print(lines[-1], flush=True)
        note = next((r["note"] for r in rows if r["note"]), "")
        if not note and a.no_run:
            note = "ok: imports, builds (not run)"
        elif not note and any(r["err"] is not None and r["err"] > BAR for r in rows):
            note = "output differs from onnxruntime (max err %.1e)" % max(r["err"] for r in rows if r["err"] is not None)
        status.append("%-20s %s\n%-20s (%s)" % (n, note or "ok: imports, builds, matches onnxruntime", "",
                                                 op_types(os.path.join(a.models_dir, n + ".onnx"))))
        if a.status:  # after every model: others read it while the table runs
            write_status(a.status, a.context or a.tessel, status)
    with open(os.path.join(a.out_dir, "table.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
