#!/usr/bin/env bash
# test_check_deps.sh SRCROOT — scripts/check-deps on copies of the module
# sources: the real tree and a copy of it pass (exit 0, the summary line);
# a planted upward #include, a planted third-party include and a planted link
# dependency each fail (exit 1, FILE:LINE and the rule named).
set -u
src=${1:-$(dirname "$0")/../..}
src=$(cd "$src" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
pass() { echo "ok   - $1"; }
fail() { echo "FAIL - $1"; fails=$((fails + 1)); }

copy() {  # copy DIR: the module folders and the script, nothing built
  mkdir -p "$1/scripts"
  cp "$src/scripts/check-deps" "$1/scripts/"
  for d in base runtime rpc tracker ir codegen costmodel search tuner cli include; do
    cp -a "$src/$d" "$1/"
  done
}

# 1. the real tree passes
out=$("$src/scripts/check-deps" 2>&1); rc=$?
if [ $rc -eq 0 ] && printf '%s\n' "$out" | grep -q '^check-deps: ok'; then
  pass "real tree: exit 0 and the summary line"
else
  fail "real tree: rc $rc"; printf '%s\n' "$out"
fi

# 2. a copy of the module folders passes too (what the planted cases edit)
copy "$tmp/clean"
out=$("$tmp/clean/scripts/check-deps" 2>&1); rc=$?
if [ $rc -eq 0 ] && printf '%s\n' "$out" | grep -q '^check-deps: ok'; then
  pass "clean copy: exit 0 and the summary line"
else
  fail "clean copy: rc $rc"; printf '%s\n' "$out"
fi

# planted DIR FILE SED PATTERN WHAT: a clean copy with one edit must fail
# (exit 1) with a line matching PATTERN (LINE in it is the planted line).
planted() {
  copy "$tmp/$1"
  sed -i "$3" "$tmp/$1/$2"
  local line out rc
  line=$(grep -n 'PLANTED' "$tmp/$1/$2" | head -1 | cut -d: -f1)
  sed -i 's| *// PLANTED||' "$tmp/$1/$2"
  out=$("$tmp/$1/scripts/check-deps" 2>&1); rc=$?
  if [ $rc -eq 1 ] && printf '%s\n' "$out" | grep -q "${4//LINE/$line}"; then
    pass "$5: exit 1, $2:$line named"
  else
    fail "$5: rc $rc"; printf '%s\n' "$out"
  fi
}

# 3. a planted upward include: ir/ir.c includes tuner/tune.h
planted up ir/ir.c '0,/^#include/s//#include "tuner\/tune.h" \/\/ PLANTED\n#include/' \
  '^ir/ir.c:LINE: #include "tuner/tune.h": ir/ may not use tuner/' "planted upward include"
# 4. a planted third-party include: search uses LLVM
planted llvm search/space.c '0,/^#include/s//#include <llvm-c\/Core.h> \/\/ PLANTED\n#include/' \
  '^search/space.c:LINE: #include <llvm-c/Core.h>: search/ may not use llvm' "planted <llvm-c/Core.h> in search"
# 5. a planted link dependency: search's library lists llvm_dep
planted link search/meson.build '0,/dependencies: \[/s//dependencies: [llvm_dep, # PLANTED\n  /' \
  "^search/meson.build:LINE: static_library 'tessel_search' of search/ lists llvm_dep: search/ may not use codegen LLVM backend" \
  "planted llvm_dep in search/meson.build"

# 6. the loop IR may not include the graph IR (ir/graph builds on ir)
planted graph ir/ir.c '0,/^#include/s//#include "graph\/graph.h" \/\/ PLANTED\n#include/' \
  '^ir/ir.c:LINE: #include "graph/graph.h": the loop IR may not use the graph IR' "planted graph include in ir/ir.c"

echo "check-deps tests: $((6 - fails))/6 passed"
[ $fails -eq 0 ]
