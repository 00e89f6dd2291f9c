#!/usr/bin/env python3
"""conv_layout.py MODELS_DIR OUT_DIR [options] — the nchwc pass against plain
NCHW and onnxruntime, untuned, in one run (docs/PASSES.md, "nchwc").

For each model (default resnet50 and mobilenet_v2 from bench/zoo's export):
builds it once per configuration (--configs, each a space-separated list of
`tessel build` flags; default: "--conv-layout nchw", "--conv-layout nchwc",
"--conv-layout nchwc --winograd off"), checks every build's outputs against
onnxruntime without graph optimisations (max |x - ref| / max |ref|, the zoo's
bar 1e-3), then alternates --rounds times: each build's median of `tessel run
--bench --repeat N --threads T`, then onnxruntime's median (ORT_ENABLE_ALL,
intra_op_num_threads=T) in this process; each keeps its best median over the
rounds. Prints the load average before and after and one Markdown table with
each build's latency and its ratio to onnxruntime (< 1: faster).

Reuses bench/zoo/zoo.py's helpers (inputs, sessions, error, tessel run).
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import json  # noqa: E402

import zoo  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("models_dir")
    ap.add_argument("out_dir")
    ap.add_argument("--tessel", default="build/tessel")
    ap.add_argument("--only", default="resnet50,mobilenet_v2")
    ap.add_argument("--threads", default="1")
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--configs", action="append", default=[])
    ap.add_argument("--build-timeout", type=int, default=1800)
    ap.add_argument("--run-timeout", type=int, default=900)
    a = ap.parse_args()
    configs = a.configs or ["--conv-layout nchw", "--conv-layout nchwc", "--conv-layout nchwc --winograd off"]
    threads = [int(t) for t in a.threads.split(",")]
    os.makedirs(a.out_dir, exist_ok=True)
    print("load before: %s" % open("/proc/loadavg").read().strip())
    rows = []
    for name in a.only.split(","):
        model = os.path.join(a.models_dir, name + ".onnx")
        with open(os.path.join(a.models_dir, name + ".json")) as f:
            meta = json.load(f)
        feeds = zoo.make_inputs(meta, 1, 0, a.seed)
        work = os.path.join(a.out_dir, name)
        os.makedirs(os.path.join(work, "in"), exist_ok=True)
        in_args = []
        for k, v in feeds.items():
            p = os.path.join(work, "in", zoo.sanitize(k) + ".npy")
            zoo.np.save(p, v)
            in_args += ["--input", "%s=%s" % (k, p)]
        ref_sess = zoo.ort_session(model, 1, False)
        names = [o.name for o in ref_sess.get_outputs()]
        ref = ref_sess.run(None, feeds)
        del ref_sess
        sos, errs = [], []
        for ci, c in enumerate(configs):
            so = os.path.join(work, "c%d.so" % ci)
            rc, _, err = zoo.sh([a.tessel, "build", model, "-o", so] + c.split(), a.build_timeout)
            if rc:
                sys.exit("%s [%s]: build failed: %s" % (name, c, zoo.first_line(err, model)))
            ms, why = zoo.tessel_run(a, so, in_args, os.path.join(work, "out%d" % ci), 1)
            e, why2 = (None, why) if why else zoo.rel_error(ref, os.path.join(work, "out%d" % ci), names)
            if why2:
                sys.exit("%s [%s]: %s" % (name, c, why2))
            sos.append(so)
            errs.append(e)
        for t in threads:
            sess = zoo.ort_session(model, t, True)
            best = [float("inf")] * (len(configs) + 1)
            for _ in range(a.rounds):
                for ci, so in enumerate(sos):
                    ms, why = zoo.tessel_run(a, so, in_args, os.path.join(work, "bench%d" % ci), t)
                    if why:
                        sys.exit("%s: %s" % (name, why))
                    best[ci] = min(best[ci], ms)
                best[-1] = min(best[-1], zoo.ort_median_ms(sess, feeds, a.repeat))
            del sess
            rows.append((name, t, best, errs))
    print("load after: %s" % open("/proc/loadavg").read().strip())
    print()
    print("| model | threads | " + " | ".join("tessel `%s` ms (÷ ort)" % c for c in configs) + " | onnxruntime ms |")
    print("|---|---|" + "---|" * (len(configs) + 1))
    for name, t, best, errs in rows:
        cells = ["%.2f (%.2f×; err %.1e)" % (best[i], best[i] / best[-1], errs[i]) for i in range(len(configs))]
        print("| %s | %d | %s | %.2f |" % (name, t, " | ".join(cells), best[-1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
