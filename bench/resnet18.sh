#!/usr/bin/env bash
# resnet18.sh — issue #8's model bench: ResNet-18 v1 at batch 1 (random
# weights, bench/resnet18_gen.py, onnx helper API, opset 17).
#
#   bench/resnet18.sh [TRIALS] [OUTDIR]      (run from the repository root)
#     TRIALS  tessel tune-model budget, measurement trials over all 18 tasks
#             (default 1200: 18 warm-up rounds of BATCH, the rest by the
#             gradient scheduler; roughly an hour on this 2-core machine)
#     OUTDIR  model, logs, outputs and summary (default bench/out/resnet18)
#   Environment: BUILD (build directory, default build), PY (python with onnx
#   and onnxruntime, default .venv/bin/python), REPEAT (timed runs per
#   figure, default 20), SEED (tuning seed, default 1), TUNE_THREADS
#   (threads of the tuning measurements, default 1), BATCH (trials per
#   tune-model round, default 32: the round-robin warm-up gives each of the
#   18 tasks one round, so 64 would spend 1152 trials before the gradient
#   scheduler chooses anything).
#
# In one run: generate the model, print `tessel tasks`, build it untuned
# (default schedules), tune it for TRIALS (wall time reported), build it
# tuned, and time untuned tessel, tuned tessel and onnxruntime (default
# graph optimisations) at 1 and 2 threads (tessel's TESSEL_NUM_THREADS /
# --threads the same as onnxruntime's intra_op_num_threads), all on the
# same seeded input. Every tessel output is compared with onnxruntime's
# (graph optimisations off, tests/models/ort_run.py): max abs error and
# pass/fail at |d| <= 1e-4 + 1e-3 |ort| (18 layers of f32 reassociation).
# Resumable: the tuning log is kept; rerunning with the same TRIALS tunes
# nothing more (the wall time then only covers the check).
set -euo pipefail
if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
  sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
fi
trials=${1:-1200}
out=${2:-bench/out/resnet18}
build=${BUILD:-build}
py=${PY:-.venv/bin/python}
repeat=${REPEAT:-20}
seed=${SEED:-1}
tthreads=${TUNE_THREADS:-1}
batch=${BATCH:-32}
T=$build/tessel
ninja -C "$build" tessel >/dev/null
mkdir -p "$out"
M=$out/resnet18.onnx
"$py" bench/resnet18_gen.py "$M" --seed 0
echo "== model: $M (ResNet-18 v1, batch 1, opset 17, seeded random weights)"
echo "== tasks (tessel tasks)"
"$T" tasks "$M"

# the reference: seeded input, onnxruntime with graph optimisations off
"$py" tests/models/ort_run.py "$M" "$out/in" "$out/ref" --random 7 >/dev/null
IN=$out/in/data.npy

echo "== build untuned"
"$T" build "$M" -o "$out/untuned.so" 2>&1 | tail -1
echo "== tune-model: $trials trials (log $out/tune.log)"
t0=$(date +%s.%N)
nice "$T" tune-model "$M" --no-library --trials "$trials" --batch "$batch" --log "$out/tune.log" --seed "$seed" --threads "$tthreads" \
  --json >"$out/tune.json" 2>"$out/tune.stderr"
t1=$(date +%s.%N)
tune_s=$(python3 -c "print('%.0f' % ($t1 - $t0))")
tail -n 30 "$out/tune.stderr" | sed -n '/^id\|^ *id /,$p' | tail -n 25 || true
echo "== build tuned"
"$T" build "$M" --log "$out/tune.log" -o "$out/tuned.so" 2>&1 | tail -1

run_tessel() { # SO THREADS NAME -> median ms; outputs in $out/NAME
  "$T" run "$1" --input "data=$IN" --output-dir "$out/$3" --bench --repeat "$repeat" --threads "$2" --json \
    2>/dev/null | python3 -c 'import json,sys; print("%.2f" % json.load(sys.stdin)["latency_ms"]["median"])'
}
check() { # DIR -> "max|d| ok/FAIL"
  "$py" - "$out/ref/logits.npy" "$1/logits.npy" <<'PYEOF'
import sys
import numpy as np
r, x = np.load(sys.argv[1]), np.load(sys.argv[2])
d = np.abs(x.astype(np.float64) - r)
ok = r.shape == x.shape and bool(np.all(d <= 1e-4 + 1e-3 * np.abs(r)))
print("%.1e %s" % (d.max(), "ok" if ok else "FAIL"))
PYEOF
}

declare -A ms err
for th in 1 2; do
  ms[untuned$th]=$(TESSEL_NUM_THREADS=$th run_tessel "$out/untuned.so" $th untuned$th)
  err[untuned$th]=$(check "$out/untuned$th")
  ms[tuned$th]=$(TESSEL_NUM_THREADS=$th run_tessel "$out/tuned.so" $th tuned$th)
  err[tuned$th]=$(check "$out/tuned$th")
  ms[ort$th]=$("$py" bench/resnet18_ort.py "$M" "$IN" "$out/ort$th" $th "$repeat" |
    python3 -c 'import json,sys; print("%.2f" % json.load(sys.stdin)["median_ms"])')
  err[ort$th]=$(check "$out/ort$th")
done

{
  echo "ResNet-18 batch 1, median of $repeat runs (ms); tuning: $trials trials in ${tune_s} s wall"
  echo "(tune-model --threads $tthreads, seed $seed); errors vs onnxruntime with graph optimisations off"
  echo
  echo "| threads | tessel untuned | tessel tuned ($trials trials) | onnxruntime | tuned / ort |"
  echo "| --- | --- | --- | --- | --- |"
  for th in 1 2; do
    r=$(python3 -c "print('%.2fx' % (${ms[tuned$th]} / ${ms[ort$th]}))")
    echo "| $th | ${ms[untuned$th]} (err ${err[untuned$th]}) | ${ms[tuned$th]} (err ${err[tuned$th]}) | ${ms[ort$th]} (err ${err[ort$th]}) | $r |"
  done
  echo
  python3 - "$out/tune.json" <<'PYEOF'
import json, sys
j = json.load(open(sys.argv[1]))
print("estimated latency from the log: %.2f ms (sum of weight x best)" % (j["estimated_latency_seconds"] * 1e3))
print()
print("| id | task | weight | MFLOP | default ms | tuned ms | GFLOP/s | trials |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
for i, t in enumerate(j["tasks"]):
    f = lambda s: "%.3f" % (s * 1e3) if s else "-"
    print("| %d | %s | %d | %.1f | %s | %s | %.1f | %d |" % (i, t["name"], t["weight"], t["flops"] / 1e6,
          f(t.get("default_seconds")), f(t.get("best_seconds")), t.get("gflops") or 0, t["trials"]))
PYEOF
} | tee "$out/summary.md"
