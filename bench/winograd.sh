#!/usr/bin/env bash
# winograd.sh — issue 17 item 3: ResNet-50's Winograd tasks (its 3x3 stride-1 convolutions with
# 56x56, 28x28 and 14x14 outputs) in the F(4x4, 3x3) and F(2x2, 3x3) forms, default schedule
# and tuned, beside oneDNN's direct convolution on the same shape, on 1 thread.
# Dumps the tasks with `tessel tasks --dump` (--winograd-tile 4 and 2), tunes each for TRIALS
# trials (`tessel tune --no-library --threads 1`; the log resumes), then per task times the
# default schedule (`tessel bench TASK`), the tuned one (`tessel bench TASK --log LOG`) and oneDNN
# (`bench_baselines conv`) back to back, ROUNDS rounds, and prints the medians in ms.
# Run from the repository root:  bench/winograd.sh [TRIALS] [OUTDIR] [MODEL]
# (defaults 128, bench/out-winograd, /work/zoo-models/resnet50.onnx). Never part of the tests.
set -euo pipefail
trials=${1:-128}
out=${2:-bench/out-winograd}
model=${3:-/work/zoo-models/resnet50.onnx}
rounds=${ROUNDS:-3}
mkdir -p "$out"
ninja -C build tessel bench/bench_baselines >/dev/null
T=build/tessel
B=build/bench/bench_baselines
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')  trials per task: $trials  $(uptime)"
echo "fp32 FMA peak (1 thread): $($B peak_fma 1 | cut -d' ' -f1) GFLOP/s"
for m in 4 2; do $T tasks "$model" --winograd-tile $m --dump "$out/f$m" >/dev/null; done
# task name, oneDNN shape (C H W K)
cases=("fused_transpose_reshape_conv2d_winograd_relu_0|64 56 56 64"
       "fused_transpose_reshape_conv2d_winograd_relu_3|128 28 28 128"
       "fused_transpose_reshape_conv2d_winograd_relu_6|256 14 14 256")
for c in "${cases[@]}"; do
  IFS='|' read -r name shp <<<"$c"
  for m in 4 2; do
    $T tune "$out/f$m/$name.tsl" --no-library --trials "$trials" --threads 1 --log "$out/f$m/$name.json" \
      --json >"$out/f$m/$name.summary" 2>"$out/f$m/$name.err"
  done
done
ms() { $T bench "$@" --threads 1 --json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["seconds_median"]*1e3)'; }
med() { python3 -c 'import statistics,sys; print("%.3f" % statistics.median(map(float, sys.argv[1:])))' "$@"; }
printf '%-48s %9s %9s %9s %9s %9s %s\n' task F4_def F4_tuned F2_def F2_tuned oneDNN "(ms, medians of $rounds rounds)"
for c in "${cases[@]}"; do
  IFS='|' read -r name shp <<<"$c"
  read -r C H W K <<<"$shp"
  a=() b=() e=() f=() o=()
  for r in $(seq "$rounds"); do
    a+=("$(ms "$out/f4/$name.tsl")"); b+=("$(ms "$out/f4/$name.tsl" --log "$out/f4/$name.json")")
    e+=("$(ms "$out/f2/$name.tsl")"); f+=("$(ms "$out/f2/$name.tsl" --log "$out/f2/$name.json")")
    o+=("$($B conv 1 "$C" "$H" "$W" "$K" 3 3 1 1 1 | awk '{print $2 * 1e3}')")
  done
  printf '%-48s %9s %9s %9s %9s %9s\n' "$name" "$(med "${a[@]}")" "$(med "${b[@]}")" "$(med "${e[@]}")" "$(med "${f[@]}")" "$(med "${o[@]}")"
done
echo "end: $(uptime)"
