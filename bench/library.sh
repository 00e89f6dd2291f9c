#!/usr/bin/env bash
# library.sh — issue #22's library candidates (docs/TUNING.md, "Library
# candidates"), in one run:
#   1. the machine's peak: OpenBLAS sgemm 1024^3 on 1 thread (bench_baselines);
#   2. sgemm 1024^3 tuned with --trials N (64) on 1 thread, pinned to CPU 1:
#      the best generated kernel against the OpenBLAS and oneDNN calls measured
#      as candidates in the same run (the log's records);
#   3. each model (bert_base: batch 1, sequence 128) tuned twice with the same
#      budget, with library candidates and with --no-library, on 1 thread
#      pinned to CPU 0: the per-task tables (the library column: which tasks
#      went to a library and by how much), then each log built and timed
#      against onnxruntime by bench/zoo/zoo.py (its ratios are within one
#      zoo.py run: tessel and onnxruntime alternate).
#
#   bench/library.sh [OUTDIR]      (run from the repository root)
#   Environment: BUILD (build), PY (.venv/bin/python), MODELS (exported zoo
#   models, bench/out/zoo-models: bench/zoo/zoo.sh makes them), SGEMM_TRIALS
#   (64), MODEL_TRIALS (42: 3 per BERT task), ONLY (bert_base), SEQS
#   (17,64,128,384), BATCHES (1), THREADS (1: zoo.py's thread counts).
# The machine is shared: compare ratios within a run, not figures across runs.
set -euo pipefail
if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
  sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
fi
out=${1:-bench/out/library}
build=${BUILD:-build}
py=${PY:-.venv/bin/python}
models=${MODELS:-bench/out/zoo-models}
mkdir -p "$out"
ninja -C "$build" tessel bench/bench_baselines >/dev/null
echo "== $(date -u '+%Y-%m-%d %H:%M UTC'); $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) cores;" \
  "load average $(cut -d' ' -f1-3 /proc/loadavg); tessel $(git rev-parse --short HEAD)"
echo "== peak: OpenBLAS sgemm 1024^3, 1 thread: $("$build/bench/bench_baselines" sgemm 1024 1024 1024 1)"

echo "== sgemm 1024^3, --trials ${SGEMM_TRIALS:-64}, 1 thread, CPU 1"
rm -f "$out/sgemm.jsonl"
taskset -c 1 "$build/tessel" tune matmul:m=1024,n=1024,k=1024 --trials "${SGEMM_TRIALS:-64}" --threads 1 \
  --log "$out/sgemm.jsonl" 2>/dev/null
"$py" - "$out/sgemm.jsonl" <<'EOF'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
ok = [r for r in recs if r["error"] is None and r["verified"] and not r.get("runoff")]  # the trials, not the run-off's re-timings
mean = lambda r: sum(r["run_secs"]) / len(r["run_secs"])
flops = 2 * 1024 ** 3
kern = min((mean(r) for r in ok if r.get("kind") != "library"), default=None)
print("| kernel | mean ms | GFLOP/s | generated / it |")
print("|---|---|---|---|")
for r in ok:
    if r.get("kind") == "library":
        m = mean(r)
        print("| %s (%s) | %.2f | %.1f | %.3f |" % (r["params"]["call"], r["params"]["lib"], m * 1e3, flops / m * 1e-9,
                                                  kern / m if kern else float("nan")))
if kern:
    print("| best generated (of %d) | %.2f | %.1f | 1 |" % (sum(1 for r in recs if r.get("kind") != "library"),
                                                         kern * 1e3, flops / kern * 1e-9))
EOF

for m in ${ONLY:-bert_base}; do
  for side in library no-library; do
    flag=""
    [ "$side" = no-library ] && flag=--no-library
    log="$out/$m.$side.jsonl"
    rm -f "$log"
    echo "== $m tuned with $side: --trials ${MODEL_TRIALS:-42} --sym batch=1 --sym sequence=128, 1 thread, CPU 0"
    taskset -c 0 "$build/tessel" tune-model "$models/$m.onnx" --sym batch=1 --sym sequence=128 \
      --trials "${MODEL_TRIALS:-42}" --threads 1 --log "$log" $flag 2>&1 >/dev/null | tail -20
    echo "== $m built from the $side log vs onnxruntime (bench/zoo/zoo.py)"
    "$py" bench/zoo/zoo.py "$models" "$out/$side" --tessel "$build/tessel" --only "$m" --threads "${THREADS:-1}" \
      --batches "${BATCHES:-1}" --seqs "${SEQS:-17,64,128,384}" --repeat 5 --rounds 2 \
      --build-arg=--log --build-arg="$log" --build-arg=--sym --build-arg=batch=1 \
      --build-arg=--sym --build-arg=sequence=128
  done
done
