#!/bin/sh
# check.sh — runs the C examples the way a user builds them (tests/meson
# registers it): `built` runs the meson-built programs; `uninstalled`
# compiles them with `pkg-config tessel-uninstalled` / `tessel-runtime-
# uninstalled` against the build tree; `installed` runs `meson install` into a
# scratch DESTDIR and compiles them with `pkg-config tessel` / `tessel-runtime`
# from there. Each must tune+build+call a matmul that matches a plain loop,
# and run a model built by the tessel CLI with the expected output shape.
# Usage: check.sh MODE BUILD_DIR SOURCE_DIR TESSEL_EXE MODELS_DIR
set -eu
mode=$1 build=$2 src=$3 tessel=$4 models=$5
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
case $mode in
built)
  tk=$build/examples/c/tune_kernel rm=$build/examples/c/run_model ;;
uninstalled|installed)
  if [ "$mode" = uninstalled ]; then
    export PKG_CONFIG_PATH="$build/meson-uninstalled" sfx=-uninstalled
    pc="pkg-config"
  else
    meson install -C "$build" --no-rebuild --quiet --destdir "$tmp/root" >/dev/null
    tpc=$(find "$tmp/root" -name tessel.pc | head -n1)
    [ -n "$tpc" ] || { echo "check.sh: meson install wrote no tessel.pc" >&2; exit 1; }
    prefix="$tmp/root$(sed -n 's/^prefix=//p' "$tpc")"
    export PKG_CONFIG_PATH="$(dirname "$tpc")" sfx=""
    pc="pkg-config --define-variable=prefix=$prefix"
    test -f "$prefix/include/tessel/tessel.h" && test -f "$prefix/include/tessel/tessel_model.h"
  fi
  libs_t=$($pc --libs-only-L tessel$sfx | sed 's/^-L//; s/ .*//')
  libs_r=$($pc --libs-only-L tessel-runtime$sfx | sed 's/^-L//; s/ .*//')
  export LD_LIBRARY_PATH="$libs_t:$libs_r"
  ${CC:-cc} -std=gnu11 -o tk "$src/examples/c/tune_kernel.c" $($pc --cflags --libs tessel$sfx) -lm
  ${CC:-cc} -std=gnu11 -o rm_ "$src/examples/c/run_model.c" $($pc --cflags --libs tessel-runtime$sfx)
  # the runtime-only program needs nothing of libtessel
  if ldd ./rm_ | grep -q 'libtessel\.so'; then echo "check.sh: run_model links libtessel" >&2; exit 1; fi
  tk=./tk rm=./rm_ ;;
*) echo "check.sh: mode built|uninstalled|installed" >&2; exit 2 ;;
esac
"$tk" "matmul:m=24,n=20,k=13" 2 "$tmp/log.jsonl" > tk.out
grep -q '^2 trials' tk.out && grep -q '^max |C - A.B|' tk.out || { cat tk.out; exit 1; }
"$tessel" build "$models/mlp.onnx" -o "$tmp/mlp.so" 2>/dev/null
"$rm" "$tmp/mlp.so" > rm.out
grep -q '^output y: f32 \[4, 10\] sum' rm.out || { cat rm.out; exit 1; }
echo "$mode: ok"
