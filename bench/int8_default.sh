#!/usr/bin/env bash
# int8_default.sh — the untuned (default-schedule) int8 kernels of two
# builds in turn: tessel bench of ResNet-50's three conv shapes and a padded
# u8 x s8 matmul, 1 thread pinned to CPU (default 1), best of ROUNDS
# (default 3) rounds, with the VNNI peak the same run measures.
#
#   bench/int8_default.sh BEFORE_BUILD AFTER_BUILD    (from the repository root)
set -euo pipefail
if [ $# -ne 2 ]; then
  sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
before=$1 after=$2 cpu=${CPU:-1} rounds=${ROUNDS:-3}
gops() { taskset -c "$cpu" "$1/tessel" bench "$2" --threads 1 --json 2>/dev/null |
  python3 -c 'import json,sys; print("%.1f" % json.load(sys.stdin)["gflops"])'; }
date -u '+%Y-%m-%d %H:%M UTC'; echo "load $(cut -d' ' -f1 /proc/loadavg)"
bb=$after/bench/bench_baselines
[ -x "$bb" ] || bb=$before/bench/bench_baselines
echo "peak_vnni $(for i in 1 2 3; do taskset -c "$cpu" "$bb" peak_vnni | cut -d' ' -f1; done | sort -n | tail -1)"
for sp in "conv2d_nhwc_u8s8:n=1,c=64,h=56,w=56,k=64,r=3,s=3,stride=1,pad=1" \
  "conv2d_nhwc_u8s8:n=1,c=256,h=56,w=56,k=64,r=1,s=1,stride=1,pad=0" \
  "conv2d_nhwc_u8s8:n=1,c=128,h=56,w=56,k=128,r=3,s=3,stride=2,pad=1" "matmul_u8s8:m=197,n=1000,k=333"; do
  a=0 b=0
  for _ in $(seq "$rounds"); do
    a=$(python3 -c "print(max($a, $(gops "$before" "$sp")))")
    b=$(python3 -c "print(max($b, $(gops "$after" "$sp")))")
  done
  echo "$sp before $a after $b"
done
