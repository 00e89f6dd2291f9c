#!/usr/bin/env bash
# setup.sh — the bench-only virtual environment for bench/tvm/side_by_side.py and
# bench/tvm/model.py:
# Apache TVM 0.27 (MetaSchedule, its XGBoost cost model), NumPy, and onnx
# (bench/tvm/model.py: the Relax ONNX frontend reads the model with it). Never
# needed by the build or the tests. apache-tvm-ffi is pinned: 0.1.15.x
# segfaults on MetaSchedule's first JSON database write. `[all]` brings
# xgboost and psutil (tuning needs both). MetaSchedule's runner links each
# candidate with g++ (scripts/setup.sh installs it).
# Usage: bench/tvm/setup.sh [VENV]   (default /work/tvm-venv)
set -euo pipefail
venv=${1:-/work/tvm-venv}
python3 -m venv "$venv"
"$venv/bin/pip" install -q "apache-tvm[all]==0.27.0.post1" "apache-tvm-ffi==0.1.14.post1" numpy "onnx==1.23.2"
"$venv/bin/python" -c "import tvm; from tvm.s_tir import meta_schedule; import onnx; from tvm.relax.frontend.onnx import from_onnx; print('tvm', tvm.__version__, 'onnx', onnx.__version__, 'ok')"
