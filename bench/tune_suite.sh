#!/usr/bin/env bash
# tune_suite.sh — issue "Tune a single kernel", item 10: tunes each case with
# tessel and times the best library baseline in the same run, then compares
# the XGBoost model with the random model (bench/cost_model_curve.sh: trials
# to reach 90 % of the best GFLOP/s, three seeds). Run from the repository root:
#   bench/tune_suite.sh [TRIALS] [OUTDIR]      (defaults: 1000, bench/out)
# Logs are kept in OUTDIR, so a rerun resumes (budget already met: no new
# trials). Prints one table; never part of the tests.
set -euo pipefail
trials=${1:-1000}
out=${2:-bench/out}
mkdir -p "$out"
ninja -C build tessel bench/bench_baselines >/dev/null
T=build/tessel
B=build/bench/bench_baselines

gflops() { python3 -c 'import json,sys; print("%.1f" % json.load(sys.stdin)["best_gflops"])'; }

row() { # name spec threads baseline-args...
  local name=$1 spec=$2 th=$3; shift 3
  local t0=$(date +%s)
  local g=$($T tune "$spec" --no-library --trials "$trials" --log "$out/$name.json" --threads "$th" --json 2>"$out/$name.err" | tee "$out/$name.summary" | gflops)
  local t1=$(date +%s)
  local b=$($B "$@" | cut -d' ' -f1)
  printf '%-28s %3s %9s %9s %7.2f %6ss\n' "$name" "$th" "$g" "$b" "$(python3 -c "print($g/$b)")" "$((t1 - t0))"
}

printf '%-28s %3s %9s %9s %7s %7s\n' case thr tessel baseline ratio tune
row sgemm_1024_t1 matmul:m=1024,n=1024,k=1024 1 sgemm 1024 1024 1024 1
row sgemm_1024_t2 matmul:m=1024,n=1024,k=1024 2 sgemm 1024 1024 1024 2
row sgemm_1000x333x777 matmul:m=1000,n=333,k=777 1 sgemm 1000 333 777 1
row conv_64_56_3x3 conv2d_nchw:n=1,c=64,h=56,w=56,k=64,r=3,s=3,stride=1,pad=1,dilation=1,groups=1 1 \
    conv 1 64 56 56 64 3 3 1 1 1
row softmax_1024 softmax:m=1024,n=1024 1 softmax 1024 1024 1
echo "(baseline: OpenBLAS cblas_sgemm for sgemm, oneDNN for conv and softmax; GFLOP/s; tune = wall seconds)"
# where each case's tuning time went (tune --json "phases", seconds; docs/COSTMODEL.md)
python3 - "$out" <<'PY'
import json, os, sys
keys = ("search", "train", "build", "measure", "verify")
print("%-28s %8s " % ("case", "wall") + " ".join("%8s" % k for k in keys))
for name in ("sgemm_1024_t1", "sgemm_1024_t2", "sgemm_1000x333x777", "conv_64_56_3x3", "softmax_1024"):
    try:
        j = json.load(open(os.path.join(sys.argv[1], name + ".summary")))
    except (OSError, ValueError):
        continue
    ph = j.get("phases", {})
    print("%-28s %8.1f " % (name, j.get("wall_seconds", 0)) + " ".join("%8.1f" % ph.get(k, 0) for k in keys))
PY

# XGBoost vs random model: trials to reach 90 % of the best kernel any run found,
# per seed (bench/cost_model_curve.sh; docs/COSTMODEL.md "XGBoost vs random after the
# default schedule"). Not on the sgemm logs above: the tuner measures the default
# schedule first, which was within 90 % of the best on sgemm 1024^3, so every run would
# "reach 90 %" at trial 1 whatever the model. The case and seeds are those of the
# 2026-11-29 measurement: softmax 1024x1024 (default at 6 % of the best; random search
# hits many slow or timed-out compute locations), 1 thread, 128 trials, seeds 1-3, a
# 16-candidate first batch so the model trains after 12 samples. There XGBoost reached
# 90 % at trials never/2/43 (median 43) and the random model never within 128 (the
# seed-2 "2" is timing noise: the same first-batch kernel timed 0.61 vs 1.05 ms in the
# two runs; XGBoost's own candidates got there at trial 89). On matmul 256x333x257 with
# the same settings the target was not met (xgb 124/83/never, random 24/never/never).
VARIANTS="xgb:min=12:first=16 random:first=16" BATCH=16 BUILD=build \
  bench/cost_model_curve.sh softmax:m=1024,n=1024 128 "1 2 3" "$out/curve" -- --timeout 5
