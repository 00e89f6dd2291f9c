#!/usr/bin/env bash
# make.sh — produces costmodel/pretrained/default.json, the pre-trained cost
# model `tessel tune --cost-model default` loads (docs/COSTMODEL.md,
# "Training set", "Training, saving and loading"):
#   0. DATA/dataset.jsonl starts as the committed dataset.jsonl.xz (the
#      measurements the committed model was trained on) if it does not exist;
#   1. `tessel costmodel dataset` measures the corpus into DATA/dataset.jsonl
#      on one core: families in round robin, each family's smallest workloads
#      first (--order small-first), WORKLOADS x TRIALS candidates sampled by
#      the random model, timed with the process CPU clock (--cpu-time, so the
#      other processes of a shared machine do not count), 3 repeats of
#      >= 25 ms; resumable: rerun to go on, or raise WORKLOADS/TIME_LIMIT;
#   2. `tessel costmodel eval --split workloads` reports the held-out-workload
#      ranking for both objectives (5 seeds, 3/4 of the workloads train);
#   3. `tessel costmodel train` fits the model on the whole dataset (and the
#      EXTRA logs, if any).
#
#   costmodel/pretrained/make.sh [DATA]     (DATA default: bench/out/dataset)
#   Environment: BUILD (build), TRIALS (48 per workload), BATCH (48),
#   WORKLOADS (400), TIME_LIMIT (3600 s; 0: none), OBJECTIVE (rank), ROUNDS (100),
#   DEPTH (6),
#   CPU (taskset -c 1 nice -n 10), SKIP_DATASET=1 (train on DATA as it is),
#   EXTRA ("LOG ...": more tuning logs to train on, e.g. earlier tuning runs of
#   this machine; they never enter the held-out evaluation's scores).
set -euo pipefail
if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
  awk 'NR > 1 && /^set -e/ { exit } NR > 1' "$0" | sed 's/^# \{0,1\}//'
  exit 0
fi
data=${1:-bench/out/dataset}
T=${BUILD:-build}/tessel
cpu=${CPU:-taskset -c 1 nice -n 10}
here=$(dirname "$0")
mkdir -p "$data"
if [ ! -f "$data/dataset.jsonl" ] && [ -f "$here/dataset.jsonl.xz" ]; then
  xz -dc "$here/dataset.jsonl.xz" > "$data/dataset.jsonl"
fi
if [ "${SKIP_DATASET:-0}" != 1 ]; then
  $cpu "$T" costmodel dataset --log "$data/dataset.jsonl" --trials "${TRIALS:-48}" --batch "${BATCH:-48}" \
    --workloads "${WORKLOADS:-400}" --order small-first --threads 1 --no-library --no-runoff \
    --repeat 3 --min-repeat-ms 25 --cpu-time --time-limit "${TIME_LIMIT:-3600}"
fi
extra=()
for x in ${EXTRA:-}; do extra+=(--extra "$x"); done
for obj in packsum rank; do
  printf '%s: ' "$obj"
  $cpu "$T" costmodel eval "$data/dataset.jsonl" "${extra[@]}" --split workloads --train-frac 0.75 --seed 1 \
    --seeds 5 --objective "$obj" --max-depth "${DEPTH:-6}" --max-rounds "${ROUNDS:-100}" --json | tail -1
done
$cpu "$T" costmodel train "$data/dataset.jsonl" "${extra[@]}" --objective "${OBJECTIVE:-rank}" \
  --max-rounds "${ROUNDS:-100}" --max-depth "${DEPTH:-6}" -o "$here/default.json" --json
