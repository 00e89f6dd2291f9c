#!/usr/bin/env bash
# campaign.sh — one libFuzzer campaign of a harness built with -Dfuzz=true:
#   campaign.sh HARNESS SEED_CORPUS WORKDIR MAX_LEN [SECONDS]
# (SECONDS: else $TESSEL_FUZZ_SECS, else 60). New inputs go to WORKDIR/corpus
# (the committed seed corpus is only read), findings (crash-, leak-, oom-,
# timeout- files) to WORKDIR/findings, libFuzzer's output to WORKDIR/log.
# Prints one line: harness, seconds, executions, executions/s, coverage
# (edges "cov" and features "ft" at the end), corpus size, findings; exits 1
# when there is a finding (its file is named; add it to the seed corpus once
# fixed). The meson suite 'fuzz' runs it; scripts/fuzz.sh runs it per harness.
set -uo pipefail
if [ $# -lt 4 ]; then
  echo "usage: $0 HARNESS SEED_CORPUS WORKDIR MAX_LEN [SECONDS]" >&2
  exit 2
fi
exe=$1 seed=$2 work=$3 maxlen=$4 secs=${5:-${TESSEL_FUZZ_SECS:-60}}
name=$(basename "$exe")
mkdir -p "$work/corpus" "$work/findings" || exit 2
log=$work/log
# -timeout: one input over 10 s is a finding; -rss_limit_mb: over 2 GiB too.
"$exe" -max_total_time="$secs" -max_len="$maxlen" -timeout=10 -rss_limit_mb=2048 \
  -print_final_stats=1 -artifact_prefix="$work/findings/" \
  "$work/corpus" "$seed" >"$log" 2>&1
rc=$?
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
ncorpus=$(find "$work/corpus" -type f | wc -l)
findings=$(find "$work/findings" -type f | wc -l)
echo "$name: ${secs}s executions=${execs:-?} exec/s=${rate:-?} cov=${cov:-?} ft=${ft:-?}" \
     "corpus=$ncorpus findings=$findings"
if [ "$findings" -gt 0 ] || [ $rc -ne 0 ]; then
  find "$work/findings" -type f -printf '  finding: %p\n'
  grep -m3 -E 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|^fuzz_' "$log" | sed 's/^/  /'
  echo "  (libFuzzer exit $rc; log: $log)"
  exit 1
fi
