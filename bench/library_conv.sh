#!/usr/bin/env bash
# library_conv.sh — the convolution library candidate (issue #22 item 1;
# docs/TUNING.md, "Library candidates"): ResNet-50's 3x3 and 1x1
# convolutions, its stride-2 3x3 and a MobileNetV2 depthwise one, each tuned
# with --trials N (16) on 1 thread pinned to CPU 1; the oneDNN call
# (tsrt_dnnl_conv2d_f32, measured as a candidate and in the run-off) against
# the best generated kernel of the same run, as `tessel tune` prints them.
#
#   bench/library_conv.sh [OUTDIR]      (run from the repository root)
#   Environment: BUILD (build), TRIALS (16), CPU (1), ONLY (a regex of the shapes' names).
# The *_nchw8c shapes are the same convolutions in the nchwc pass's channel-blocked layout
# (the call uses oneDNN's nChw8c / OIhw8i8o, its AVX2 kernels' own layout).
# The machine is shared: compare ratios within a run, not figures across runs.
set -euo pipefail
if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
  sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
fi
out=${1:-bench/out/library_conv}
build=${BUILD:-build}
mkdir -p "$out"
ninja -C "$build" tessel >/dev/null
echo "== $(date -u '+%Y-%m-%d %H:%M UTC'); $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) cores;" \
  "tessel $(git rev-parse --short HEAD); --trials ${TRIALS:-16}, 1 thread, CPU ${CPU:-1}"
specs=(
  "resnet50_3x3 conv2d_nchw:n=1,c=64,h=56,w=56,k=64,r=3,s=3,stride=1,pad=1,dilation=1"
  "resnet50_1x1 conv2d_nchw:n=1,c=256,h=56,w=56,k=64,r=1,s=1,stride=1,pad=0,dilation=1"
  "resnet50_3x3_s2 conv2d_nchw:n=1,c=128,h=56,w=56,k=128,r=3,s=3,stride=2,pad=1,dilation=1"
  "mbv2_dw_s2 depthwise_conv2d:n=1,c=96,h=112,w=112,r=3,s=3,stride=2,pad=1,dilation=1"
  "resnet50_3x3_nchw8c conv2d_nchwc:n=1,c=64,h=56,w=56,k=64,r=3,s=3,stride=1,pad=1,dilation=1,cb=8,kb=8"
  "resnet50_1x1_nchw8c conv2d_nchwc:n=1,c=256,h=56,w=56,k=64,r=1,s=1,stride=1,pad=0,dilation=1,cb=8,kb=8"
  "mbv2_dw_s2_nchw8c depthwise_conv2d_nchwc:n=1,c=96,h=112,w=112,r=3,s=3,stride=2,pad=1,dilation=1,cb=8"
)
echo "| shape | load before | oneDNN call ms | best generated ms | cell |"
echo "|---|---|---|---|---|"
for e in "${specs[@]}"; do
  name=${e%% *}
  [[ "$name" =~ ${ONLY:-.} ]] || continue
  spec=${e#* }
  rm -f "$out/$name.jsonl"
  load=$(cut -d' ' -f1 /proc/loadavg)
  line=$(taskset -c "${CPU:-1}" "$build/tessel" tune "$spec" --trials "${TRIALS:-16}" --threads 1 \
    --log "$out/$name.jsonl" 2>/dev/null | grep '^library' || true)
  # "library dnnl: T ms, best generated kernel T ms (CELL)"
  lib=$(echo "$line" | sed -n 's/^library [a-z]*: \([0-9.e-]*\) ms.*/\1/p')
  gen=$(echo "$line" | sed -n 's/.*best generated kernel \([0-9.e-]*\) ms.*/\1/p')
  cell=$(echo "$line" | sed -n 's/.*(\(.*\))$/\1/p')
  echo "| $name \`$spec\` | $load | ${lib:--} | ${gen:--} | ${cell:-no library record} |"
done
echo "== load after: $(cut -d' ' -f1-3 /proc/loadavg)"
