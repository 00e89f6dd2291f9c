#!/usr/bin/env bash
# bert_sizes.sh — issue #22's table from ONE BERT-base build and an existing
# tuning log (no tuning; bench/buckets.sh tunes first): builds
# bert_base.onnx with `--log LOG --threads 1 --buckets batch=BUCKET_BATCHES
# --buckets sequence=BUCKET_SEQS` (the log's buckets), then times it against
# onnxruntime at every batch x sequence of BATCHES x SEQS with
# bench/zoo/sizes.py (1 thread, pinned to CPU 0, OMP_NUM_THREADS=1; tessel
# and onnxruntime alternate, ROUNDS rounds of median-of-REPEAT, each side's
# best; every output checked against onnxruntime), and prints which kernels
# ran at each size (`tessel run --profile --json`: padded bucket / exact /
# generic calls). The header has the load and the OpenBLAS sgemm 1024^3 peak.
#
#   bench/bert_sizes.sh LOG [OUTDIR]        (run from the repository root)
#   Environment: BUILD (build), PY (.venv/bin/python), MODELS (/work/zoo-models
#   if there, else bench/out/zoo-models), BUCKET_BATCHES (1), BUCKET_SEQS
#   (64,128), BATCHES (1,8), SEQS (17,64,128,384), ROUNDS (3), REPEAT (5).
# The machine is shared: compare ratios within a run, not figures across runs.
set -euo pipefail
if [ $# -lt 1 ] || [ "$1" = "-h" ] || [ "$1" = "--help" ]; then
  awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "$0"
  exit 0
fi
log=$1
out=${2:-bench/out/bert_sizes}
build=${BUILD:-build}
py=${PY:-.venv/bin/python}
models=${MODELS:-}
[ -z "$models" ] && { [ -f /work/zoo-models/bert_base.onnx ] && models=/work/zoo-models || models=bench/out/zoo-models; }
bb=${BUCKET_BATCHES:-1}
bs=${BUCKET_SEQS:-64,128}
mkdir -p "$out"
ninja -C "$build" tessel bench/bench_baselines >/dev/null
echo "== $(date -u '+%Y-%m-%d %H:%M UTC'); $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) cores;" \
  "load average $(cut -d' ' -f1-3 /proc/loadavg); tessel $(git rev-parse --short HEAD)"
echo "== peak: OpenBLAS sgemm 1024^3, 1 thread: $(taskset -c 0 "$build/bench/bench_baselines" sgemm 1024 1024 1024 1)"
so="$out/bert_base.so"
echo "== one build: tessel build bert_base.onnx --log $log --threads 1 --buckets batch=$bb --buckets sequence=$bs"
"$build/tessel" build "$models/bert_base.onnx" -o "$so" --log "$log" --threads 1 \
  --buckets "batch=$bb" --buckets "sequence=$bs" 2>"$out/build.err" | tail -1
echo "== against onnxruntime (bench/zoo/sizes.py, 1 thread, CPU 0)"
OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 taskset -c 0 "$py" bench/zoo/sizes.py "$models/bert_base.onnx" "$so" \
  --batches "${BATCHES:-1,8}" --seqs "${SEQS:-17,64,128,384}" --rounds "${ROUNDS:-3}" --repeat "${REPEAT:-5}" \
  --tessel "$build/tessel" --work "$out/in"
echo "== kernels per size (calls on a padded bucket kernel / an exact one / the generic one)"
for w in "$out"/in/b*_s*; do
  OMP_NUM_THREADS=1 "$build/tessel" run "$so" --input "input_ids=$w/input_ids.npy" \
    --input "attention_mask=$w/attention_mask.npy" --threads 1 --profile --json 2>/dev/null |
    "$py" -c "
import json, sys
p = json.load(sys.stdin)['profile']
pad = sum(1 for c in p if c['spec'] >= 0 and c['covers']); ex = sum(1 for c in p if c['spec'] >= 0 and not c['covers'])
print('$(basename "$w"): %d calls: %d covering (bucket or library), %d exact, %d generic' % (len(p), pad, ex, len(p) - pad - ex))"
done
echo "== load at the end $(cut -d' ' -f1-3 /proc/loadavg)"
