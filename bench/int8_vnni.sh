#!/usr/bin/env bash
# int8_vnni.sh — issue #16's int8 kernel bench: tessel's tuned int8 matmuls
# and convolutions against oneDNN's in one run.
#
#   bench/int8_vnni.sh [TRIALS] [OUTDIR]     (run from the repository root)
#     TRIALS  tuning budget per kernel (default 192, the issue's cap)
#     OUTDIR  logs (default bench/out/int8_vnni)
#   Environment: BUILD (default build), THREADS (list, default "1 2"),
#   SHAPES (list of MxNxK, default "1024x1024x1024 128x3072x768 197x768x768"),
#   WORKLOADS (default "matmul_u8s8 matmul_int8 conv2d_nhwc_u8s8"),
#   CONV_SHAPES (list of CxKxHxRxSTRIDE, square input H x H and window R x R,
#   padding R/2; default ResNet-50's "64x64x56x3x1 256x64x56x1x1
#   128x128x56x3x2": 3x3 64->64 at 56², 1x1 256->64 at 56², 3x3 stride 2
#   128->128 to 28²), SEED (default 1),
#   CPU (taskset list for the 1-thread runs, default 1), ROUNDS (default 5),
#   MEASURE_ONLY=1 (keep OUTDIR's tuning logs, measure again).
#
# For each workload, shape and thread count: `tessel tune --no-library` (generated
# kernels only, no library candidates; every figure a kernel verified
# against the interpreter), then oneDNN's matmul of the same signedness
# (bench_baselines matmul_u8s8 / matmul_s8, weights in oneDNN's layout,
# reorder untimed) or its int8 convolution (bench_baselines conv_u8s8: u8
# NHWC x s8 -> s32 NHWC, weights in oneDNN's layout) twice: limited to AVX-512 VNNI (ONEDNN_MAX_CPU_ISA=
# AVX512_CORE_VNNI: the instruction set tessel's kernels use) and
# unrestricted (on a CPU with AMX, oneDNN then uses its AMX tiles). Prints
# the machine's measured VNNI peak (bench_baselines peak_vnni), GOP/s: the
# search's best ("tuned"), then the tuned kernel (`tessel bench --log`,
# verified) and both oneDNN figures measured in turn, ROUNDS rounds, the
# best of each ("tessel", "oneDNN-*": the ratios use these; on a shared
# machine other processes only ever slow a run down, so the best of rounds
# taken in turn is the fair comparison), and whether the tuned
# kernel's code holds vpdpbusd (objdump of `tessel build --log`). The tessel weight is pre-packed (TransformLayout,
# docs/LAYOUT.md) outside the timed call, as oneDNN's reorder.
set -euo pipefail
if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
  sed -n '2,33p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
fi
trials=${1:-192}
out=${2:-bench/out/int8_vnni}
build=${BUILD:-build}
threads_list=${THREADS:-1 2}
shapes=${SHAPES:-1024x1024x1024 128x3072x768 197x768x768}
workloads=${WORKLOADS:-matmul_u8s8 matmul_int8 conv2d_nhwc_u8s8}
conv_shapes=${CONV_SHAPES:-64x64x56x3x1 256x64x56x1x1 128x128x56x3x2}
seed=${SEED:-1}
cpu=${CPU:-1}
rounds=${ROUNDS:-5}
measure_only=${MEASURE_ONLY:-0}
T=$build/tessel
B=$build/bench/bench_baselines
ninja -C "$build" tessel bench/bench_baselines >/dev/null
mkdir -p "$out"

pin() { # THREADS CMD...: one thread pinned to one core, more unpinned
  local th=$1
  shift
  if [ "$th" = 1 ]; then taskset -c "$cpu" "$@"; else "$@"; fi
}

peak=$(for i in 1 2 3 4 5; do taskset -c "$cpu" "$B" peak_vnni | cut -d' ' -f1; done | sort -n | tail -1)
echo "== $(date -u '+%Y-%m-%d %H:%M') UTC, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1 /proc/loadavg)"
echo "measured AVX-512 VNNI peak, 1 core: $peak GOP/s (best of 5)"
echo "trials $trials, seed $seed, best of $rounds rounds$([ "$measure_only" = 1 ] && echo ', the tuning logs of an earlier run measured again')"
printf '%-16s %-16s %2s %9s %9s %11s %10s %11s %8s %9s\n' workload shape th tuned tessel oneDNN-vnni oneDNN-amx tessel/vnni "of peak" vpdpbusd
for wl in $workloads; do
  base=matmul_s8
  [ "$wl" = matmul_u8s8 ] && base=matmul_u8s8
  wl_shapes=$shapes
  [ "$wl" = conv2d_nhwc_u8s8 ] && wl_shapes=$conv_shapes
  for shp in $wl_shapes; do
    if [ "$wl" = conv2d_nhwc_u8s8 ]; then
      IFS=x read -r c k h r st <<<"$shp"
      spec="$wl:n=1,c=$c,h=$h,w=$h,k=$k,r=$r,s=$r,stride=$st,pad=$((r / 2))"
      bargs=(conv_u8s8 1 "$c" "$h" "$h" "$k" "$r" "$r" "$st" "$((r / 2))")
    else
      IFS=x read -r m n k <<<"$shp"
      spec="$wl:m=$m,n=$n,k=$k"
      bargs=("$base" "$m" "$n" "$k")
    fi
    for th in $threads_list; do
      log="$out/${wl}_${shp}_t$th.jsonl"
      if [ "$measure_only" != 1 ]; then
        rm -f "$log"
        pin "$th" nice "$T" tune "$spec" --no-library --trials "$trials" --log "$log" --threads "$th" --seed "$seed" --json \
          >"$log.json" 2>"$log.stderr"
      fi
      "$T" build "$spec" --log "$log" -o "$out/${wl}_${shp}_t$th.so" >/dev/null 2>&1 || true
      nv=$(objdump -d "$out/${wl}_${shp}_t$th.so" 2>/dev/null | grep -c vpdpbusd || true)
      # the tuned kernel and oneDNN measured in turn, best of the rounds
      : >"$log.rounds"
      for r in $(seq "$rounds"); do
        g=$(pin "$th" "$T" bench "$spec" --log "$log" --threads "$th" --json 2>/dev/null |
          python3 -c 'import json,sys; print("%.2f" % json.load(sys.stdin)["gflops"])')
        dv=$(ONEDNN_MAX_CPU_ISA=AVX512_CORE_VNNI pin "$th" "$B" "${bargs[@]}" "$th" | cut -d' ' -f1)
        da=$(pin "$th" "$B" "${bargs[@]}" "$th" | cut -d' ' -f1)
        echo "$g $dv $da" >>"$log.rounds"
      done
      python3 - "$wl" "$shp" "$th" "$log.rounds" "$peak" "$nv" "$log.json" <<'EOF'
import json, sys
wl, shp, th, rounds, peak, nv, tj = sys.argv[1:]
rows = [list(map(float, l.split())) for l in open(rounds) if l.strip()]
g, dv, da = (max(r[i] for r in rows) for i in range(3))
tuned = json.load(open(tj))["best_gflops"]
print("%-16s %-16s %2s %9.1f %9.1f %11.1f %10.1f %10.2fx %7.0f%% %9s" %
      (wl, shp, th, tuned, g, dv, da, g / dv, 100 * g / (float(peak) * int(th)), "yes (%s)" % nv if int(nv) else "no"))
EOF
    done
  done
done
