#!/usr/bin/env bash
# buckets.sh — issue #22's shape buckets (docs/MODEL.md "Shape buckets") on
# BERT-base from bench/zoo, in one run:
#   1. tessel tune-model with --buckets batch=BUCKET_BATCHES --buckets
#      sequence=BUCKET_SEQS (one task per bucket of every task with a
#      symbolic dim, all under one --trials budget; library candidates on, the
#      default), 1 thread, pinned to CPU 0; the per-task table. The budget is
#      TRIALS_PER_TASK x the task count (`tessel tasks`): 3 by default, which
#      is each task's first round holding its default schedule and the
#      OpenBLAS and oneDNN calls (a task no library covers: its default and
#      two searched candidates). The build replays a bucket's library record
#      as the call at every size up to the bucket, and as the generic kernel
#      when the largest bucket chose it (docs/TUNING.md "Any size");
#   2. ONE build from that log with the same --buckets, timed against
#      onnxruntime at every batch x sequence of BATCHES x SEQS by
#      bench/zoo/zoo.py (1 thread; tessel and onnxruntime alternate, each
#      keeps its best median; the error against onnxruntime's unoptimised
#      reference is checked there too);
#   3. which kernels ran at each size: `tessel run --profile --json` counts the
#      calls that took a bucket kernel (padded), an exact specialisation and
#      the symbolic (generic) kernel.
#
#   bench/buckets.sh [OUTDIR]      (run from the repository root)
#   Environment: BUILD (build), PY (.venv/bin/python), MODELS (exported zoo
#   models: /work/zoo-models if there, else bench/out/zoo-models; bench/zoo/zoo.sh
#   makes them), MODEL (bert_base), TRIALS_PER_TASK (3), TRIALS (the per-task
#   figure times the task count), BUCKET_BATCHES (1,8), BUCKET_SEQS
#   (64,128,384), BATCHES (1,8), SEQS (17,64,128,384), REPEAT (3), ROUNDS (1).
# The machine is shared: compare ratios within a run, not figures across runs.
set -euo pipefail
if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
  awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "$0"
  exit 0
fi
out=${1:-bench/out/buckets}
build=${BUILD:-build}
py=${PY:-.venv/bin/python}
models=${MODELS:-}
[ -z "$models" ] && { [ -f /work/zoo-models/bert_base.onnx ] && models=/work/zoo-models || models=bench/out/zoo-models; }
bb=${BUCKET_BATCHES:-1,8}
bs=${BUCKET_SEQS:-64,128,384}
model=${MODEL:-bert_base}
mkdir -p "$out"
ninja -C "$build" tessel bench/bench_baselines >/dev/null
echo "== $(date -u '+%Y-%m-%d %H:%M UTC'); $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) cores;" \
  "load average $(cut -d' ' -f1-3 /proc/loadavg); tessel $(git rev-parse --short HEAD)"
echo "== peak: OpenBLAS sgemm 1024^3, 1 thread: $("$build/bench/bench_baselines" sgemm 1024 1024 1024 1)"

log="$out/$model.buckets.jsonl"
ntasks=$("$build/tessel" tasks "$models/$model.onnx" --buckets "batch=$bb" --buckets "sequence=$bs" | tail -1 | cut -d' ' -f1)
trials=${TRIALS:-$(( ntasks * ${TRIALS_PER_TASK:-3} ))}
echo "== $model tuned with --buckets batch=$bb --buckets sequence=$bs: $ntasks tasks, --trials $trials, 1 thread, CPU 0" \
  "(resumes from $log)"
t0=$(date +%s)
taskset -c 0 "$build/tessel" tune-model "$models/$model.onnx" --buckets "batch=$bb" --buckets "sequence=$bs" \
  --trials "$trials" --threads 1 --log "$log" 2>&1 >/dev/null | awk '/^ *ID  task/{p=1} p' | tail -n "$(( ntasks + 3 ))"
echo "== tuning wall time: $(( $(date +%s) - t0 )) s; load average $(cut -d' ' -f1-3 /proc/loadavg)"

echo "== ONE build from the log, timed against onnxruntime (bench/zoo/zoo.py)"
"$py" bench/zoo/zoo.py "$models" "$out/zoo" --tessel "$build/tessel" --only "$model" --threads 1 \
  --batches "${BATCHES:-1,8}" --seqs "${SEQS:-17,64,128,384}" --repeat "${REPEAT:-3}" --rounds "${ROUNDS:-1}" \
  --build-arg=--log --build-arg="$log" --build-arg=--threads --build-arg=1 \
  --build-arg=--buckets --build-arg="batch=$bb" --build-arg=--buckets --build-arg="sequence=$bs"

echo "== kernels per size (tessel run --profile --json: calls on a padded bucket kernel / an exact one / the generic one)"
so="$out/zoo/$model.so"
if [ -f "$so" ]; then
  IFS=, read -ra B <<<"${BATCHES:-1,8}"
  IFS=, read -ra S <<<"${SEQS:-17,64,128,384}"
  for b in "${B[@]}"; do for s in "${S[@]}"; do
    w="$out/zoo/$model/b${b}_s${s}/in"
    [ -d "$w" ] || continue
    "$build/tessel" run "$so" --input "input_ids=$w/input_ids.npy" --input "attention_mask=$w/attention_mask.npy" \
      --threads 1 --profile --json 2>/dev/null |
      "$py" -c "
import json, sys
p = json.load(sys.stdin)['profile']
pad = sum(1 for c in p if c['spec'] >= 0 and c['covers']); ex = sum(1 for c in p if c['spec'] >= 0 and not c['covers'])
print('batch $b sequence $s: %d calls: %d bucket (padded), %d exact, %d generic' % (len(p), pad, ex, len(p) - pad - ex))"
  done; done
fi
