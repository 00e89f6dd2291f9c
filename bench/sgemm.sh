#!/usr/bin/env bash
# sgemm.sh — builds tessel's sgemm 1024³ from the hand-written trace in
# examples/ and times it against OpenBLAS in the same process run, on 1 and
# 2 threads. Usage: bench/sgemm.sh [TRACE.json]   (run from the repository root)
set -euo pipefail
trace=${1:-examples/sgemm_1024.json}
ninja -C build tessel bench/bench_sgemm >/dev/null
so=$(mktemp /tmp/tessel-sgemm-XXXXXX.so)
trap 'rm -f "$so"' EXIT
build/tessel build matmul:m=1024,n=1024,k=1024 --trace "$trace" -o "$so"
build/bench/bench_sgemm "$so" 1024 1024 1024
