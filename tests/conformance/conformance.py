#!/usr/bin/env python3
"""conformance.py — tessel against the onnx package's own backend test data.

Every model of the installed wheel's onnx/backend/test/data sets (onnx_cases.py) is built
with `tessel build` (untuned), run with `tessel run` on its stored inputs, and each output
compared with the expected one as onnx's runner compares them (same shape, same dtype,
np.testing.assert_allclose with the model's rtol/atol). Each model gets one class:
refused (import), build failed, run failed, mismatch, pass.

  conformance.py --tessel T [--sets S,...] [--pass-list F] [--jobs N] [--work DIR]
                 [--report [--markdown] [--convert OPSET]] [--update-pass-list] [--self-test]
                 [--node-dir DIR] [--legacy-dir DIR] [--only SUBSTRING]

Default: the test. Fails (exit 1) when a model of the pass list does not pass (a
regression) and prints the models that pass but are not listed. --update-pass-list
rewrites the list from this run (the sets not run keep their lines). --report prints one
line per model, the counts per set and the reasons by frequency (--markdown: for
bench/RESULTS.md); with either, the exit status is 0. --report --convert OPSET runs the
models converted by onnx.version_converter first: which operators stop them once the
opset does not (a diagnosis; never for the test or the pass list). --self-test is the
negative control: a shipped model (simple/test_single_relu_model, converted to opset 17)
passes, and the same model with a corrupted expected output is a mismatch. Exit 77 (skipped) when a set asked for
has no models, e.g. node/ where neither the wheel nor --node-dir has it.

Docs: docs/CONFORMANCE.md.
"""
import argparse
import collections
import concurrent.futures as cf
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "models")]
import onnx_cases  # noqa: E402
from ort_run import sanitize  # noqa: E402  (the name `tessel run --output-dir` gives an output)

DEFAULT_SETS = ["light", "pytorch-converted", "pytorch-operator", "simple"]
CLASSES = ["pass", "mismatch", "run failed", "build failed", "refused"]
BUILD_TIMEOUT, RUN_TIMEOUT = 600, 120


def tool(cmd, timeout, path=None):
    """Runs cmd; (ok, the last line of its error output, path shortened to its name)."""
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                           env=dict(os.environ, TESSEL_NUM_THREADS="1"))
    except subprocess.TimeoutExpired:
        return False, f"timed out after {timeout} s"
    if p.returncode == 0:
        return True, ""
    lines = [ln for ln in (p.stderr + p.stdout).splitlines() if ln.strip()]
    msg = lines[-1] if lines else f"exit status {p.returncode}"
    msg = re.sub(r"^tessel [a-z -]+: ", "", msg)
    if path:  # the report's line names the model already
        msg = msg.replace(path + ": ", "").replace(path, os.path.basename(path))
    return False, msg


def compare(expected, got, rtol, atol):
    """None when got matches expected as onnx's runner requires, else why not."""
    if got.shape != expected.shape:
        return f"shape {list(got.shape)}, expected {list(expected.shape)}"
    if got.dtype != expected.dtype:
        return f"dtype {got.dtype}, expected {expected.dtype}"
    if expected.dtype == object:
        return None if np.array_equal(got, expected) else "strings differ"
    try:
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol)
        return None
    except AssertionError:
        g, e = got.astype(np.float64), expected.astype(np.float64)
        err = np.abs(g - e)
        bad = ~np.isclose(g, e, rtol=rtol, atol=atol, equal_nan=True)
        worst = float(np.nanmax(np.where(np.isnan(err), np.inf, err))) if err.size else 0.0
        return (f"max abs err {worst:.3g} ({int(bad.sum())} of {bad.size} elements "
                f"outside rtol {rtol:g}, atol {atol:g})")


def feeds_of(case, ds, model):
    """{graph input name: array} of a data set; ValueError naming the input otherwise."""
    free = onnx_cases.free_inputs(model)
    names = {x.name for x in model.graph.input}
    feeds = {}
    for i, (name, src) in enumerate(ds.inputs):
        if not isinstance(src, str):
            feeds[name] = src
            continue
        pb_name, arr = onnx_cases.read_tensor(src)
        name = pb_name if pb_name in names else (free[i].name if i < len(free) else None)
        if name is None:
            raise ValueError(f"{os.path.basename(src)}: the model has {len(free)} inputs")
        vi = next(x for x in model.graph.input if x.name == name)
        if not vi.type.HasField("tensor_type"):
            raise ValueError(f"input {name!r} is a {vi.type.WhichOneof('value')}, not a tensor")
        feeds[name] = arr
    return feeds


def expected_of(case, ds, feeds):
    """The expected outputs (arrays) of a data set."""
    if ds.outputs is None:
        return onnx_cases.reference_outputs(case.model, feeds)
    return [onnx_cases.read_tensor(p)[1] for p in ds.outputs]


def run_dataset(tessel, case, model, so, ds, k, wd):
    """(class, message) of one data set run on the built artifact."""
    try:
        feeds = feeds_of(case, ds, model)
        expected = expected_of(case, ds, feeds)
    except Exception as e:  # an input or output this harness cannot hand over
        return "run failed", f"data set {k}: {e}"
    cmd = [tessel, "run", so, "--output-dir", os.path.join(wd, f"out{k}")]
    for j, (name, arr) in enumerate(feeds.items()):
        f = os.path.join(wd, f"in{k}_{j}.npy")
        np.save(f, arr)
        cmd += ["--input", f"{name}={f}"]
    ok, msg = tool(cmd, RUN_TIMEOUT)
    if not ok:
        return "run failed", msg
    for j, exp in enumerate(expected):
        name = model.graph.output[j].name
        f = os.path.join(wd, f"out{k}", sanitize(name) + ".npy")
        if not os.path.exists(f):
            return "run failed", f"output {name!r} was not written"
        why = compare(np.asarray(exp), np.load(f, allow_pickle=False), case.rtol, case.atol)
        if why:
            return "mismatch", f"output {name!r}: {why}"
    return "pass", ""


def converted(case, opset, wd):
    """The case's model through onnx.version_converter to opset, saved in wd; its path."""
    from onnx import version_converter
    path = os.path.join(wd, os.path.basename(case.model))
    onnx.save(version_converter.convert_version(onnx.load(case.model), opset), path)
    return path


def run_case(tessel, case, work, convert=None):
    """(class, message, seconds) of one model: import, build, then every data set; with
    convert, the model converted to that opset first (a diagnosis, not conformance)."""
    t0 = time.time()
    wd = os.path.join(work, case.set, case.name)
    shutil.rmtree(wd, ignore_errors=True)
    os.makedirs(wd)
    so = os.path.join(wd, "m.so")
    try:
        path = case.model
        if convert:
            try:
                path = converted(case, convert, wd)
            except Exception as e:  # the converter's own refusals
                return "refused", f"onnx.version_converter to {convert}: {e}", time.time() - t0
        ok, msg = tool([tessel, "graph", "show", path], BUILD_TIMEOUT, path)
        if not ok:  # the import alone
            return "refused", msg, time.time() - t0
        ok, msg = tool([tessel, "build", path, "-o", so], BUILD_TIMEOUT, path)
        if not ok:
            return "build failed", msg, time.time() - t0
        model = onnx.load(path, load_external_data=False)
        for k, ds in enumerate(case.datasets):
            cls, msg = run_dataset(tessel, case, model, so, ds, k, wd)
            if cls != "pass":
                return cls, msg, time.time() - t0
        if not case.datasets:
            return "run failed", "no test data set", time.time() - t0
        return "pass", "", time.time() - t0
    finally:
        shutil.rmtree(wd, ignore_errors=True)


def run_all(tessel, cases, work, jobs, convert=None):
    """{case id: (class, message, seconds)}, models run jobs at a time."""
    with cf.ThreadPoolExecutor(max_workers=jobs) as ex:
        futs = {c.id: ex.submit(run_case, tessel, c, work, convert) for c in cases}
        return {k: f.result() for k, f in futs.items()}


def read_pass_list(path):
    if not os.path.exists(path):
        return set()
    with open(path) as f:
        return {ln.strip() for ln in f if ln.strip() and not ln.startswith("#")}


PASS_LIST_HEADER = """\
# Models of the onnx package's backend test data (onnx==1.23.2, scripts/setup.sh pins it)
# that tessel builds, runs and matches with onnx's tolerances: tests/conformance (docs/CONFORMANCE.md).
# Generated by `conformance.py --update-pass-list`, never edited by hand: a listed model
# that stops passing fails the suite.
"""


def write_pass_list(path, results, sets, old):
    keep = {m for m in old if m.split("/")[0] not in sets}
    new = keep | {m for m, r in results.items() if r[0] == "pass"}
    with open(path, "w") as f:
        f.write(PASS_LIST_HEADER)
        for m in sorted(new):
            f.write(m + "\n")
    return new


def counts_by_set(results, sets):
    rows = []
    for s in sets:
        c = collections.Counter(r[0] for m, r in results.items() if m.split("/")[0] == s)
        rows.append((s, sum(c.values()), [c[k] for k in CLASSES]))
    return rows


def print_report(results, sets, markdown):
    """One line per model (class, message), then the counts per set."""
    if markdown:
        print("| set | models | " + " | ".join(CLASSES) + " |")
        print("|---|---|" + "---|" * len(CLASSES))
        for s, n, c in counts_by_set(results, sets):
            print(f"| {s} | {n} | " + " | ".join(map(str, c)) + " |")
        print()
    for m in sorted(results):
        cls, msg, secs = results[m]
        line = f"{cls:<12} {m} ({secs:.1f} s)" + (f": {msg}" if msg else "")
        print(("    " if markdown else "") + line)
    if not markdown:
        for s, n, c in counts_by_set(results, sets):
            print(f"{s}: {n} models, " + ", ".join(f"{k} {v}" for k, v in zip(CLASSES, c)))
    print(("\n" if markdown else "") + "Reasons, most frequent first (node names and operator opsets left out):")
    for (cls, why), n in reasons(results).most_common():
        print(f"{'    ' if markdown else ''}{n:5d}  {cls}: {why}")


def reasons(results):
    """Counter of (class, message with node names and sizes left out) over the failures."""
    c = collections.Counter()
    for cls, msg, _ in results.values():
        if cls != "pass":
            why = re.sub(r"node (#\d+|'[^']*'|[^\s(:']+)(?=[:\s])", "node", msg)
            why = re.sub(r"(operator \S+) \(opset \d+\)", r"\1", why)
            c[(cls, re.sub(r"max abs err \S+ \(\d+ of \d+", "max abs err (N of M", why))] += 1
    return c


def check(results, listed, sets):
    """The test: 1 when a listed model of the sets run does not pass."""
    listed = {m for m in listed if m.split("/")[0] in sets}
    passed = {m for m, r in results.items() if r[0] == "pass"}
    bad = sorted(listed - passed)
    for m in bad:
        cls, msg, _ = results.get(m, ("missing", "not in the installed onnx test data", 0))
        print(f"REGRESSION {m}: {cls}" + (f": {msg}" if msg else ""))
    new = sorted(passed - listed)
    for m in new:
        print(f"now passes, not listed (add it: --update-pass-list): {m}")
    for s, n, c in counts_by_set(results, sets):
        print(f"{s}: {n} models, " + ", ".join(f"{k} {v}" for k, v in zip(CLASSES, c)))
    print(f"pass list: {len(listed)} listed, {len(passed)} pass, {len(bad)} regressions, "
          f"{len(new)} new")
    return 1 if bad else 0


def self_test(tessel, work):
    """The negative control: a converted shipped model passes; corrupted, it does not."""
    src = os.path.join(onnx_cases.data_dir(), "simple", "test_single_relu_model")
    d = tempfile.mkdtemp(dir=work)
    try:
        cdir = os.path.join(d, "set", "relu")  # the SET/CASE layout dir_cases reads
        shutil.copytree(os.path.join(src, "test_data_set_0"),
                        os.path.join(cdir, "test_data_set_0"))
        from onnx import version_converter
        m = version_converter.convert_version(onnx.load(os.path.join(src, "model.onnx")), 17)
        onnx.save(m, os.path.join(cdir, "model.onnx"))
        case = onnx_cases.dir_cases("set", os.path.join(d, "set"))[0]
        fails = []
        got = run_case(tessel, case, os.path.join(d, "work"))
        print(f"simple/test_single_relu_model at opset 17: {got[0]} {got[1]}")
        if got[0] != "pass":
            fails.append(f"the converted model: {got[0]}: {got[1]} (expected pass)")
        out = case.datasets[0].outputs[0]
        _, ref = onnx_cases.read_tensor(out)
        off = ref.copy()
        off.flat[0] += 1e-2
        for what, bad in (("one element +1e-2", off), ("another shape", ref.reshape(-1)),
                          ("another dtype", ref.astype(np.float64))):
            with open(out, "wb") as f:
                f.write(onnx.numpy_helper.from_array(bad).SerializeToString())
            got = run_case(tessel, case, os.path.join(d, "work"))
            print(f"corrupted expected output ({what}): {got[0]}: {got[1]}")
            if got[0] != "mismatch":
                fails.append(f"corrupted ({what}): {got[0]} (expected mismatch)")
        # the comparison's bound is the runner's: just inside passes, just outside fails
        e = np.array([1.0, -2.0], np.float32)
        if compare(e, e * np.float32(1 + 0.9e-3), 1e-3, 1e-7) is not None:
            fails.append("0.9 rtol off was refused")
        if compare(e, e * np.float32(1 + 1.1e-3), 1e-3, 1e-7) is None:
            fails.append("1.1 rtol off was accepted")
        # a listed model that does not pass fails the test; a new pass does not
        if check({"s/a": ("refused", "x", 0), "s/b": ("pass", "", 0)}, {"s/a", "s/b"}, ["s"]) != 1:
            fails.append("a listed model that is refused did not fail the check")
        if check({"s/a": ("pass", "", 0), "s/b": ("pass", "", 0)}, {"s/a"}, ["s"]) != 0:
            fails.append("a listed model that passes (and a new one) failed the check")
        for f in fails:
            print("FAIL", f)
        print("self-test:", "FAIL" if fails else "ok")
        return 1 if fails else 0
    finally:
        shutil.rmtree(d, ignore_errors=True)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tessel", required=True, help="the tessel executable")
    p.add_argument("--sets", default=",".join(DEFAULT_SETS),
                   help="comma-separated: " + ",".join(onnx_cases.SETS))
    p.add_argument("--pass-list", default=os.path.join(HERE, "pass_list.txt"))
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    p.add_argument("--work", default=None, help="scratch folder (default: a temporary one)")
    p.add_argument("--node-dir", default=None,
                   help="node/ when the wheel lacks it: generated here from onnx's node cases")
    p.add_argument("--legacy-dir", default=None,
                   help="legacy/: the opset 1-6 cases tests/models/gen_models.py writes")
    p.add_argument("--only", default=None, help="run only the models whose id contains this")
    p.add_argument("--convert", type=int, default=None, metavar="OPSET",
                   help="with --report: convert each model to OPSET first (diagnosis only)")
    p.add_argument("--report", action="store_true")
    p.add_argument("--markdown", action="store_true")
    p.add_argument("--update-pass-list", action="store_true")
    p.add_argument("--self-test", action="store_true")
    return p.parse_args(argv)


def main(argv):
    a = parse_args(argv)
    tessel = os.path.abspath(a.tessel)
    os.makedirs(a.work or tempfile.gettempdir(), exist_ok=True)
    work = tempfile.mkdtemp(prefix="conformance-", dir=a.work)
    try:
        if a.self_test:
            return self_test(tessel, work)
        sets = [s for s in a.sets.split(",") if s]
        unknown = [s for s in sets if s not in onnx_cases.SETS]
        if unknown:
            print(f"conformance: unknown set {unknown[0]!r} (sets: {', '.join(onnx_cases.SETS)})")
            return 2
        if "node" in sets and a.node_dir and not os.path.isdir(
                os.path.join(onnx_cases.data_dir(), "node")):
            n = onnx_cases.generate_node(a.node_dir)
            print(f"node/: {n} cases from onnx.backend.test.case.node in {a.node_dir}")
        cases = []
        for s in sets:
            got = onnx_cases.load_cases(s, a.node_dir, a.legacy_dir)
            if not got:
                print(f"conformance: set {s!r} has no models here (skipped)")
                return 77
            cases += got
        listed = read_pass_list(a.pass_list)
        if a.convert and not a.report or a.convert and a.update_pass_list:
            print("conformance: --convert diagnoses (--report): converted models are not the "
                  "shipped ones, so they neither test nor make the pass list")
            return 2
        if a.only:
            if a.update_pass_list:
                print("conformance: --update-pass-list runs whole sets (no --only)")
                return 2
            cases = [c for c in cases if a.only in c.id]
            listed = {m for m in listed if a.only in m}
        t0 = time.time()
        results = run_all(tessel, cases, work, a.jobs, a.convert)
        print(f"# {len(cases)} models, onnx {onnx.__version__}, {a.jobs} jobs, "
              f"{time.time() - t0:.1f} s" + (f", converted to opset {a.convert}" if a.convert else ""))
        if a.report:
            print_report(results, sets, a.markdown)
        if a.update_pass_list:
            new = write_pass_list(a.pass_list, results, sets, listed)
            for m in sorted(listed - new):
                print(f"dropped from the pass list (no longer passes): {m}")
            print(f"{a.pass_list}: {len(new)} models")
        return 0 if a.report or a.update_pass_list else check(results, listed, sets)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
