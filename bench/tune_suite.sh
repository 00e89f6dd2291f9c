#!/usr/bin/env bash
# tune_suite.sh — issue "Tune a single kernel", item 10: tunes each case with
# tessel and times the best library baseline in the same run, then compares
# the XGBoost model with the random model on sgemm 1024³ (trials to reach 90 %
# of the best GFLOP/s). Run from the repository root:
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
  local g=$($T tune "$spec" --trials "$trials" --log "$out/$name.json" --threads "$th" --json 2>"$out/$name.err" | gflops)
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

# XGBoost vs random model: trials to reach 90 % of the final best
$T tune matmul:m=1024,n=1024,k=1024 --trials "$trials" --log "$out/sgemm_1024_random.json" --threads 1 \
  --model random --json >/dev/null 2>"$out/sgemm_1024_random.err"
python3 - "$out/sgemm_1024_t1.json" "$out/sgemm_1024_random.json" <<'PY'
import json, sys
def curve(path):
    best, out = 0.0, []
    for line in open(path):
        try: r = json.loads(line)
        except ValueError: continue
        runs = r.get("run_secs") or []
        if r.get("error") is None and r.get("verified") and runs:
            best = max(best, 2.0 * 1024**3 / (sum(runs) / len(runs)) * 1e-9)
        out.append(best)
    return out
for name, path in (("xgb", sys.argv[1]), ("random", sys.argv[2])):
    c = curve(path)
    if not c or c[-1] == 0: print(name, "no verified records"); continue
    t90 = next(i + 1 for i, v in enumerate(c) if v >= 0.9 * c[-1])
    print("%-7s trials %4d  best %6.1f GFLOP/s  trials to 90%% of best: %d" % (name, len(c), c[-1], t90))
PY
