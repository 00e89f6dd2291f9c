#!/usr/bin/env bash
# int8.sh — issue #7's bench: tensor intrinsics in the search.
#
#   bench/int8.sh [TRIALS] [OUTDIR]      (run from the repository root)
#     TRIALS  tuning budget per run (default 64)
#     OUTDIR  logs and summary (default bench/out/int8)
#   Environment: BUILD (build directory, default build), THREADS (measurement
#   threads of tessel and of the baselines, default 1), SEED (default 1).
#
# 1. matmul_int8 1024³ (i8 x i8 -> i32) tuned twice with the same seed:
#    with MultiLevelTilingTensor (AVX-512 VNNI intrinsics on this CPU) and
#    with it off (--no-tensorize); then oneDNN's s8 x s8 -> s32 matmul
#    (bench_baselines matmul_s8, weights in oneDNN's layout, reorder untimed)
#    in the same run. For the VNNI run it also splits the log into
#    tensorized and plain candidates and prints the best of each: "done"
#    means the best tensorized candidate beats the best plain one.
# 2. sgemm 1024³ tuned with and without the FMA micro-kernel rule, and
#    OpenBLAS cblas_sgemm.
# Every tessel figure is a verified kernel (tessel tune checks each
# candidate against the reference interpreter). GFLOP/s count a
# multiply-add as 2 (GOP/s for int8).
set -euo pipefail
if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
  sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
fi
trials=${1:-64}
out=${2:-bench/out/int8}
build=${BUILD:-build}
threads=${THREADS:-1}
seed=${SEED:-1}
T=$build/tessel
B=$build/bench/bench_baselines
ninja -C "$build" tessel bench/bench_baselines >/dev/null
mkdir -p "$out"

tune() { # LOG WORKLOAD [TUNE-FLAGS...]
  local log=$1 wl=$2
  shift 2
  nice "$T" tune "$wl" --no-library --trials "$trials" --log "$log" --threads "$threads" --seed "$seed" --json "$@" \
    2>"$log.stderr" | python3 -c 'import json,sys; print("%.2f" % json.load(sys.stdin)["best_gflops"])'
}

# best verified GFLOP/s of the log's tensorized / plain candidates
split_log() { # LOG FLOPS
  python3 - "$1" "$2" <<'EOF'
import json, sys
best = {"tensorized": 0.0, "plain": 0.0}
count = {"tensorized": 0, "plain": 0}
for line in open(sys.argv[1]):
    r = json.loads(line)
    kind = "tensorized" if "Tensorize" in json.dumps(r.get("trace")) else "plain"
    count[kind] += 1
    if r.get("error") or not r.get("verified") or not r.get("run_secs"):
        continue
    secs = sorted(r["run_secs"])[len(r["run_secs"]) // 2]
    best[kind] = max(best[kind], float(sys.argv[2]) / secs * 1e-9)
print("  tensorized candidates: %3d, best %8.2f GOP/s" % (count["tensorized"], best["tensorized"]))
print("  plain candidates:      %3d, best %8.2f GOP/s" % (count["plain"], best["plain"]))
print("  best tensorized / best plain: %.2fx" % (best["tensorized"] / best["plain"] if best["plain"] else float("nan")))
EOF
}

flops=$((2 * 1024 * 1024 * 1024))
echo "== matmul_int8 1024^3, $trials trials, $threads thread(s), seed $seed"
rm -f "$out/int8_vnni.jsonl" "$out/int8_plain.jsonl" "$out/sgemm_fma.jsonl" "$out/sgemm_plain.jsonl"
vnni=$(tune "$out/int8_vnni.jsonl" matmul_int8:m=1024,n=1024,k=1024)
plain=$(tune "$out/int8_plain.jsonl" matmul_int8:m=1024,n=1024,k=1024 --no-tensorize)
dnnl=$("$B" matmul_s8 1024 1024 1024 "$threads" | cut -d' ' -f1)
echo "tessel, MultiLevelTilingTensor (VNNI):  $vnni GOP/s"
split_log "$out/int8_vnni.jsonl" "$flops"
echo "tessel, without it (--no-tensorize): $plain GOP/s"
echo "oneDNN matmul s8 x s8 -> s32:            $dnnl GOP/s"

echo "== sgemm 1024^3, $trials trials"
fma=$(tune "$out/sgemm_fma.jsonl" matmul:m=1024,n=1024,k=1024)
nofma=$(tune "$out/sgemm_plain.jsonl" matmul:m=1024,n=1024,k=1024 --no-tensorize)
blas=$("$B" sgemm 1024 1024 1024 "$threads" | cut -d' ' -f1)
echo "tessel, with the FMA micro-kernel rule:  $fma GFLOP/s"
split_log "$out/sgemm_fma.jsonl" "$flops"
echo "tessel, without it:                      $nofma GFLOP/s"
echo "OpenBLAS cblas_sgemm:                    $blas GFLOP/s"
