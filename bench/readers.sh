#!/bin/sh
# bench/readers.sh — how fast and in how much memory tessel refuses the inputs
# that used to hang it or grow without bound (issue 21, items 5-6): a log on a
# full device, /dev/zero as a log, a trace, an ONNX model and a .npy input,
# and an over-size DSL file. Each command is run 3 times pinned to CPU 1 and
# the median wall time and peak resident set (GNU time) are printed with the
# exit status and the first line of its error.
#   bench/readers.sh [build/tessel]
set -u
T=${1:-build/tessel}
D=$(mktemp -d /tmp/tessel-readers-XXXXXX)
trap 'rm -rf "$D"' EXIT
truncate -s 1G "$D/big.tsl"
"$T" build "$(dirname "$0")/../examples/softmax.tsl" -o "$D/k.so" >/dev/null 2>&1 || true
run() { # name, command...
  name=$1
  shift
  for i in 1 2 3; do
    /usr/bin/time -f "%e %M" -o "$D/time.$i" taskset -c 1 "$@" >/dev/null 2>"$D/err.$i"
    echo $? >"$D/rc.$i"
  done
  t=$(cat "$D"/time.1 "$D"/time.2 "$D"/time.3 | grep -v Command | awk '{print $1}' | sort -n | sed -n 2p)
  m=$(cat "$D"/time.1 "$D"/time.2 "$D"/time.3 | grep -v Command | awk '{print $2}' | sort -n | sed -n 2p)
  printf '| %s | %s s | %s MiB | %s | %s |\n' "$name" "$t" "$((m / 1024))" "$(cat "$D/rc.1")" \
    "$(grep -v '^trials' "$D/err.1" | head -1 | cut -c1-110)"
}
echo "| input | wall (median of 3) | peak RSS | exit | message |"
echo "| --- | --- | --- | --- | --- |"
run "tune --log /dev/full" "$T" tune matmul:m=8,n=8,k=8 --trials 4 --batch 2 --log /dev/full --model random
run "log inspect /dev/zero" "$T" log inspect /dev/zero
run "show --trace /dev/zero" "$T" show matmul --trace /dev/zero
run "graph show /dev/zero (ONNX)" "$T" graph show /dev/zero
run "show big.tsl (1 GiB DSL file)" "$T" show "$D/big.tsl"
