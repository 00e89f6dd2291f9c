#!/usr/bin/env bash
# latency_spread.sh — issue 17's thread-steadiness bench: a built model's
# latency over 20 runs per process, in several processes, at 1 and 2 threads,
# beside onnxruntime in the same run (bench/latency_spread.py prints the table).
#
#   bench/latency_spread.sh [MODEL.onnx] [OUTDIR]   (run from the repository root)
#     MODEL   default: ResNet-18 v1 from bench/resnet18_gen.py (seed 0) in OUTDIR;
#             /work/zoo-models/resnet50.onnx or any one-input image model works
#     OUTDIR  artifacts and inputs (default bench/out/spread)
#   Environment: BUILD (default build), PY (python with numpy and onnxruntime,
#   default .venv/bin/python), LOG (a tuning log: each thread count's build
#   replays the records measured at that count, else any count's, as
#   `tessel build --log LOG --threads T` does; default: untuned builds),
#   ROUNDS (processes per side and thread count, default 5), REPEAT (timed
#   runs per process, default 20), THREADS (default 1,2).
#
# It prints the date, the CPU, the machine's measured peak (OpenBLAS sgemm
# 1024^3 on 1 and 2 threads, bench_baselines, this run) and the load average;
# the table's load columns say how busy the machine was around each row.
set -euo pipefail
if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
  sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
fi
out=${2:-bench/out/spread}
build=${BUILD:-build}
py=${PY:-.venv/bin/python}
rounds=${ROUNDS:-5}
repeat=${REPEAT:-20}
threads=${THREADS:-1,2}
mkdir -p "$out"
M=${1:-$out/resnet18.onnx}
[ -n "${1:-}" ] || "$py" bench/resnet18_gen.py "$M" --seed 0 >/dev/null
ninja -C "$build" tessel bench/bench_baselines >/dev/null
# the model's one input, seeded
"$py" tests/models/ort_run.py "$M" "$out/in" "$out/ref" --random 7 >/dev/null
IN=$(ls "$out"/in/*.npy | head -1)
name=$(basename "$IN" .npy)
peak() { "$build/bench/bench_baselines" sgemm 1024 1024 1024 "$1" | awk '{printf "%.0f", $1}'; }
echo "$(date -u '+%Y-%m-%d %H:%M UTC'); $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) cores;" \
  "peak (OpenBLAS sgemm 1024³) $(peak 1) GFLOP/s on 1 thread, $(peak 2) on 2; load average $(cut -d' ' -f1-3 /proc/loadavg);" \
  "onnxruntime $("$py" -c 'import onnxruntime; print(onnxruntime.__version__)'), tessel $(git rev-parse --short HEAD)"
echo "model $M, input $name; ${LOG:+log $LOG, }$rounds processes x $repeat runs per side and thread count"
echo
first=1
for t in ${threads//,/ }; do
  so=$out/model_t$t.so
  "$build/tessel" build "$M" -o "$so" ${LOG:+--log "$LOG"} --threads "$t" 2>"$out/build_t$t.stderr" | tail -1 >&2
  "$py" bench/latency_spread.py "$so" "$M" "$IN" --input-name "$name" --tessel "$build/tessel" --threads "$t" \
    --rounds "$rounds" --repeat "$repeat" --json "$out/runs_t$t.json" | { if [ $first = 1 ]; then cat; else tail -n +3; fi; }
  first=0
done
