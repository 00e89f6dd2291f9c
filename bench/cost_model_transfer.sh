#!/usr/bin/env bash
# cost_model_transfer.sh — issue 19, item 6: search curves of the pre-trained
# cost model against the online-only XGBoost model and the random model on
# the workloads the dataset never holds (tessel costmodel dataset --heldout),
# under MetaSchedule's batch size (64 candidates a batch).
#
#   bench/cost_model_transfer.sh [TRIALS] [SEEDS] [OUTDIR]
#     TRIALS  trial budget per run (default 129: the baseline and two batches)
#     SEEDS   default "1 2 3 4 5"
#     OUTDIR  default bench/out/transfer
#   Environment: BUILD (default build), VARIANTS (default
#   "xgb:cm=default xgb:cm=none random"), TASKSET (default "taskset -c 1 nice -n 10"),
#   plus what bench/cost_model_curve.sh reads.
# For each held-out workload it runs bench/cost_model_curve.sh (one log per
# variant and seed; existing logs resume, so a rerun only prints the tables)
# and prints its table: trials to reach 90 % of the best kernel any run found.
set -euo pipefail
if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
  awk 'NR > 1 && /^set -e/ { exit } NR > 1' "$0" | sed 's/^# \{0,1\}//'
  exit 0
fi
trials=${1:-129}; seeds=${2:-"1 2 3 4 5"}; out=${3:-bench/out/transfer}
build=${BUILD:-build}
export BUILD=$build VARIANTS=${VARIANTS:-"xgb:cm=default xgb:cm=none random"} BATCH=64
here=$(dirname "$0")
"$build/tessel" costmodel dataset --list --heldout | while read -r wl; do
  echo "== $wl"
  ${TASKSET:-taskset -c 1 nice -n 10} "$here/cost_model_curve.sh" "$wl" "$trials" "$seeds" "$out" -- --batch 64
done
