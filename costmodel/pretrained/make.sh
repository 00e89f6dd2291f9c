#!/usr/bin/env bash
# make.sh — produces costmodel/pretrained/default.json, the pre-trained cost
# model `tessel tune` loads when its feature schema and target family match
# (docs/COSTMODEL.md, "Pre-trained model"):
#   1. `tessel costmodel dataset` measures the corpus (ResNet-50, MobileNetV2,
#      BERT layers, then seeded random workloads) into DATA/dataset.jsonl on
#      one core (resumable: rerun to go on, or raise WORKLOADS/TIME_LIMIT);
#   2. `tessel costmodel eval --split workloads` reports the held-out-workload
#      ranking for both objectives (3 seeds);
#   3. `tessel costmodel train` fits the model on the whole dataset.
#
#   costmodel/pretrained/make.sh [DATA]     (DATA default: bench/out/dataset)
#   Environment: BUILD (build), TRIALS (32 per workload), BATCH (32),
#   WORKLOADS (150), TIME_LIMIT (2400 s; 0: none), OBJECTIVE (rank), ROUNDS (50),
#   CPU (taskset -c 1 nice -n 10), SKIP_DATASET=1 (train on DATA as it is).
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
if [ "${SKIP_DATASET:-0}" != 1 ]; then
  $cpu "$T" costmodel dataset --log "$data/dataset.jsonl" --trials "${TRIALS:-32}" --batch "${BATCH:-32}" \
    --workloads "${WORKLOADS:-150}" --threads 1 --time-limit "${TIME_LIMIT:-2400}"
fi
for obj in packsum rank; do
  for s in 1 2 3; do
    printf '%s seed %s: ' "$obj" "$s"
    $cpu "$T" costmodel eval "$data/dataset.jsonl" --split workloads --train-frac 0.75 --seed "$s" \
      --objective "$obj" --json
  done
done
$cpu "$T" costmodel train "$data/dataset.jsonl" --objective "${OBJECTIVE:-rank}" --max-rounds "${ROUNDS:-50}" -o "$here/default.json" --json
