#!/usr/bin/env bash
# model_tasks_cpu.sh — where a model's time goes, per task, in thread CPU time
# (1 thread): each task of `tessel tasks MODEL.onnx` built (with LOG: its best
# record replayed, as `tessel build --log LOG --threads 1` does; else the
# default schedule) and timed by bench/kernel_cpu; then weight x median, largest
# first, and the sum. CPU time moves far less than the wall clock on a machine
# others load; compare it with bench/ort_profile.py's per-node minima.
#
#   bench/model_tasks_cpu.sh MODEL.onnx OUTDIR [LOG]   (from the repository root)
#   Environment: BUILD (default build), RUNS (per task, default 30), and any
#   graph switch of `tessel tasks` in TASK_OPTS (e.g. "--winograd off").
set -euo pipefail
if [ $# -lt 2 ] || [ "$1" = "-h" ] || [ "$1" = "--help" ]; then
  sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
fi
M=$1 out=$2 log=${3:-}
build=${BUILD:-build}
runs=${RUNS:-30}
ninja -C "$build" tessel bench/kernel_cpu >/dev/null
mkdir -p "$out/tasks"
# shellcheck disable=SC2086
"$build/tessel" tasks "$M" --dump "$out/tasks" ${TASK_OPTS:-} >"$out/tasks.txt"
echo "$(date -u '+%Y-%m-%d %H:%M UTC'); load average $(cut -d' ' -f1-3 /proc/loadavg); tessel $(git rev-parse --short HEAD); ${log:+log $log}"
awk 'NF == 5 && $1 ~ /^[0-9]+$/ {print $2, $4}' "$out/tasks.txt" | while read -r name weight; do
  if "$build/tessel" build "$out/tasks/$name.tsl" -o "$out/k.so" ${log:+--log "$log" --threads 1} >/dev/null 2>&1; then
    echo "$name $weight $(TESSEL_NUM_THREADS=1 "$build/bench/kernel_cpu" "$out/k.so" "$runs" | awk '{print $1}')"
  else
    echo "$name $weight build-failed"
  fi
done >"$out/times.txt"
awk '$3 != "build-failed" {printf "%-48s x%-2d %8.3f ms  %8.3f ms\n", $1, $2, $3, $2 * $3}' "$out/times.txt" | sort -k5 -g -r
grep build-failed "$out/times.txt" || true
awk '$3 != "build-failed" {s += $2 * $3} END {printf "sum of weight x median: %.2f ms\n", s}' "$out/times.txt"
