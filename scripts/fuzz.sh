#!/usr/bin/env bash
# fuzz.sh — a libFuzzer campaign of a given length per harness of tests/fuzz
# (docs/FUZZING.md):
#   scripts/fuzz.sh [-j N] SECONDS [HARNESS...]      e.g. scripts/fuzz.sh 600 dsl onnx
# Sets up build-fuzz first (scripts/setup.sh --fuzz: installs clang-19 and its
# libFuzzer/ASan/UBSan runtimes when missing, configures with -Dfuzz=true,
# builds the harnesses), then runs tests/fuzz/campaign.sh for each harness
# (all by default), N at a time (default 1), each pinned to one core at
# nice 19. Prints one line per harness: executions, executions/s, coverage
# (cov: edges, ft: features), corpus size and findings; exits 1 if any
# harness has a finding. A campaign's corpus and findings stay in
# build-fuzz/tests/fuzz/campaign/HARNESS (the next campaign, and the meson
# suite's, starts from that corpus).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=1
if [ "${1:-}" = "-j" ]; then
  jobs=${2:?-j needs a number}
  shift 2
fi
secs=${1:?usage: scripts/fuzz.sh [-j N] SECONDS [HARNESS...]}
shift
case $secs in ''|*[!0-9]*) echo "fuzz.sh: SECONDS must be a whole number, not '$secs'" >&2; exit 2 ;; esac
case $jobs in ''|*[!0-9]*|0) echo "fuzz.sh: -j needs a positive whole number, not '$jobs'" >&2; exit 2 ;; esac
scripts/setup.sh --fuzz
# the campaign commands, as the meson suite 'fuzz' has them: NAME then campaign.sh's arguments
mapfile -t cmds < <(meson introspect build-fuzz --tests | python3 -c '
import json, sys
want = set(sys.argv[1:])
for t in json.load(sys.stdin):
    name = t["name"]
    if "tessel:fuzz" in t["suite"] and (not want or name[len("fuzz_"):] in want):
        print(name, *t["cmd"])
' "$@")
if [ ${#cmds[@]} -eq 0 ]; then
  echo "fuzz.sh: no harness matches: $*" >&2
  exit 2
fi
ncpu=$(nproc)
fail=0
for ((i = 0; i < ${#cmds[@]}; i += jobs)); do
  pids=()
  for ((k = 0; k < jobs && i + k < ${#cmds[@]}; k++)); do
    read -r -a c <<<"${cmds[i + k]}"
    # c: NAME campaign.sh HARNESS SEED WORKDIR MAX_LEN
    exe=${c[2]}
    [ "${exe#/}" != "$exe" ] || exe=build-fuzz/$exe # meson gives it relative to the build dir
    nice -n 19 taskset -c $(((i + k) % ncpu)) "${c[1]}" "$exe" "${c[3]}" "${c[4]}" "${c[5]}" "$secs" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || fail=1; done
done
exit $fail
