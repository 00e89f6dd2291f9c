#!/usr/bin/env bash
# cpu_kernels.sh — issue 17 item 5: the fp32 CPU kernels beside their libraries, in one run.
# Prints the machine's measured FMA peak and DRAM read bandwidth (bench_baselines peak_fma /
# read_bw), then per case tessel's tuned kernel and the library on 1 and 2 threads:
#   five ResNet convolutions in the channel-blocked layout (conv2d_nchwc, NCHW16c; the stem
#   reads plain NCHW, cb=1) against oneDNN's direct convolution in the layouts oneDNN picks;
#   three MobileNetV2 depthwise layers (depthwise_conv2d_nchwc, cb=16) against oneDNN's
#   grouped convolution; sgemm 1024^3 and 1000x333x777 against OpenBLAS; GEMV 1x4096x4096
#   (matmul m=1) against OpenBLAS sgemv, in GB/s of the matrix read, beside the read bandwidth.
# Each case is tuned once, on 1 thread, for TRIALS trials (`tessel tune --threads 1`); its
# best record is then timed with `tessel bench --log --threads T` (built and verified against
# the interpreter) right before the library on the same thread count. Run from the repository
# root:   bench/cpu_kernels.sh [TRIALS] [OUTDIR]     (defaults: 128, bench/out-cpu)
# Logs stay in OUTDIR, so a rerun resumes (a met budget tunes nothing). Never part of the tests.
set -euo pipefail
trials=${1:-128}
out=${2:-bench/out-cpu}
mkdir -p "$out"
ninja -C build tessel bench/bench_baselines >/dev/null
T=build/tessel
B=build/bench/bench_baselines

field() { python3 -c 'import json,sys; print("%.2f" % json.load(sys.stdin)[sys.argv[1]])' "$1"; }

echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')  trials per case: $trials (tuned on 1 thread)"
for th in 1 2; do
  echo "threads $th: fp32 FMA peak $($B peak_fma $th | cut -d' ' -f1) GFLOP/s, read bandwidth $($B read_bw $th | cut -d' ' -f1) GB/s"
done

# case name, tessel spec, library args (bench_baselines, without the thread count), unit
cases=(
  "conv_3x3s1_64_56|conv2d_nchwc:n=1,c=64,h=56,w=56,k=64,r=3,s=3,stride=1,pad=1,dilation=1,cb=16,kb=16|conv 1 64 56 56 64 3 3 1 1|GFLOP/s"
  "conv_3x3s2_64_56|conv2d_nchwc:n=1,c=64,h=56,w=56,k=128,r=3,s=3,stride=2,pad=1,dilation=1,cb=16,kb=16|conv 1 64 56 56 128 3 3 2 1|GFLOP/s"
  "conv_1x1s2_64_56|conv2d_nchwc:n=1,c=64,h=56,w=56,k=128,r=1,s=1,stride=2,pad=0,dilation=1,cb=16,kb=16|conv 1 64 56 56 128 1 1 2 0|GFLOP/s"
  "conv_7x7s2_stem|conv2d_nchwc:n=1,c=3,h=224,w=224,k=64,r=7,s=7,stride=2,pad=3,dilation=1,cb=1,kb=16|conv 1 3 224 224 64 7 7 2 3|GFLOP/s"
  "conv_3x3s1_512_7|conv2d_nchwc:n=1,c=512,h=7,w=7,k=512,r=3,s=3,stride=1,pad=1,dilation=1,cb=16,kb=16|conv 1 512 7 7 512 3 3 1 1|GFLOP/s"
  "dw_32_112_s1|depthwise_conv2d_nchwc:n=1,c=32,h=112,w=112,r=3,s=3,stride=1,pad=1,dilation=1,cb=16|dwconv 1 32 112 112 3 3 1 1|GFLOP/s"
  "dw_144_56_s2|depthwise_conv2d_nchwc:n=1,c=144,h=56,w=56,r=3,s=3,stride=2,pad=1,dilation=1,cb=16|dwconv 1 144 56 56 3 3 2 1|GFLOP/s"
  "dw_384_14_s1|depthwise_conv2d_nchwc:n=1,c=384,h=14,w=14,r=3,s=3,stride=1,pad=1,dilation=1,cb=16|dwconv 1 384 14 14 3 3 1 1|GFLOP/s"
  "sgemm_1024|matmul:m=1024,n=1024,k=1024|sgemm 1024 1024 1024|GFLOP/s"
  "sgemm_1000x333x777|matmul:m=1000,n=333,k=777|sgemm 1000 333 777|GFLOP/s"
  "gemv_4096|matmul:m=1,n=4096,k=4096|sgemv 4096 4096|GB/s"
)

for c in "${cases[@]}"; do
  IFS='|' read -r name spec lib unit <<<"$c"
  $T tune "$spec" --no-library --trials "$trials" --threads 1 --log "$out/$name.json" --json >"$out/$name.summary" 2>"$out/$name.err"
done

printf '%-20s %3s %10s %10s %7s %s\n' case thr tessel library ratio unit
for c in "${cases[@]}"; do
  IFS='|' read -r name spec lib unit <<<"$c"
  for th in 1 2; do
    j=$($T bench "$spec" --log "$out/$name.json" --threads "$th" --json 2>>"$out/$name.err")
    g=$(field gflops <<<"$j")
    if [ "$unit" = "GB/s" ]; then # GEMV: the 4 bytes per multiply-add of the matrix, as the library's figure
      g=$(python3 -c "print('%.2f' % ($g * 2))")
    fi
    b=$($B $lib "$th" | cut -d' ' -f1)
    printf '%-20s %3s %10s %10s %7.2f %s\n' "$name" "$th" "$g" "$b" "$(python3 -c "print($g/$b)")" "$unit"
  done
done
echo "(library: oneDNN for conv and dwconv, OpenBLAS for sgemm and sgemv; ratio = tessel / library)"
