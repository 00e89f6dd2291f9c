#!/usr/bin/env bash
# zoo.sh — issue #15's model zoo: real architectures from torchvision and
# transformers (random weights, fixed seeds, TorchScript exporter), each
# imported, built untuned, checked against onnxruntime and timed against it on
# 1 and 2 threads, in ONE table (bench/zoo/zoo.py; docs/MODEL.md, "zoo").
#
#   bench/zoo/zoo.sh [OUTDIR] [-- zoo.py options]      (run from the repository root)
#     OUTDIR  artifacts, inputs, outputs and table.md (default bench/out/zoo)
#     zoo.py options: --only a,b  --repeat N  --batches 1,2  --seqs 16,64
#             --threads 1,2  --rounds N  --status FILE  --no-run (import and
#             build only)  (bench/zoo/zoo.py --help)
#   Environment: BUILD (build directory, default build), PY (python with numpy
#   and onnxruntime for the reference and the timing, default .venv/bin/python:
#   the test set-up's pinned onnxruntime), MODELS (exported models, default
#   bench/out/zoo-models), ZOO_VENV (the bench-only virtual environment with
#   torch, torchvision and transformers for the export, default
#   bench/.venv-zoo, created with pip when missing: about 7 GB, never needed
#   by the tests), EXPORT=0 (use MODELS as it is, no export, no torch),
#   EXPORT_ARGS (more export.py options, e.g. "--wide --exporter dynamo
#   --attention sdpa --opset 23"; give each set its own MODELS directory).
#
# Before the table it measures the machine's peak as OpenBLAS sgemm 1024^3 on
# 1 and 2 threads (bench_baselines, the same run) and prints it with the load
# average, since this 2-core machine is shared and latency alone says little.
set -euo pipefail
if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
  sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
fi
out=bench/out/zoo
if [ $# -gt 0 ] && [ "$1" != "--" ]; then out=$1; shift; fi
[ "${1:-}" = "--" ] && shift
build=${BUILD:-build}
py=${PY:-.venv/bin/python}
models=${MODELS:-bench/out/zoo-models}
venv=${ZOO_VENV:-bench/.venv-zoo}

if [ "${EXPORT:-1}" != 0 ]; then
  if [ ! -x "$venv/bin/python" ]; then
    echo "== creating $venv (torch 2.8.0, torchvision 0.23.0, transformers; about 7 GB)"
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q torch==2.8.0 torchvision==0.23.0 transformers onnx onnxruntime onnxscript numpy
  fi
  echo "== export to $models"
  # shellcheck disable=SC2086 # EXPORT_ARGS is a list of options
  "$venv/bin/python" bench/zoo/export.py "$models" ${EXPORT_ARGS:-}
fi

ninja -C "$build" tessel bench/bench_baselines >/dev/null
peak() { "$build/bench/bench_baselines" sgemm 1024 1024 1024 "$1" | awk '{printf "%.0f", $1}'; }
p1=$(peak 1)
p2=$(peak 2)
ctx="$(date -u '+%Y-%m-%d %H:%M UTC'); $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) cores;"
ctx="$ctx peak (OpenBLAS sgemm 1024³) $p1 GFLOP/s on 1 thread, $p2 on 2; load average $(cut -d' ' -f1-3 /proc/loadavg);"
ctx="$ctx onnxruntime $("$py" -c 'import onnxruntime; print(onnxruntime.__version__)'), tessel $(git rev-parse --short HEAD)"
echo "== table (bench/zoo/zoo.py $models $out $*)"
"$py" bench/zoo/zoo.py "$models" "$out" --tessel "$build/tessel" --context "$ctx" "$@"
