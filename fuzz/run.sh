#!/usr/bin/env bash
# Runs every libFuzzer target in DIR for SECONDS each (make fuzz), each on
# its own corpus under build/fuzz/corpus/<target> (kept between runs, seeded
# from fuzz/seeds/<target> when that exists), and prints one line per
# target: executions, coverage (edges), corpus size, and crashes. Exits
# non-zero when any target found a crash (the input is in build/fuzz/crashes).
set -u
cd "$(dirname "$0")/.."
dir=${1:-build/fuzz/fuzz} secs=${2:-60}
mkdir -p build/fuzz/crashes
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 OMP_NUM_THREADS=1
failed=0
for f in "$dir"/fuzz_*; do
  [ -x "$f" ] || continue
  name=$(basename "$f")
  corpus=build/fuzz/corpus/$name
  mkdir -p "$corpus"
  seeds=(); [ -d fuzz/seeds/$name ] && seeds=(fuzz/seeds/$name)
  log=build/fuzz/$name.log
  "$f" -max_total_time="$secs" -print_final_stats=1 -rss_limit_mb=4096 -artifact_prefix=build/fuzz/crashes/$name- \
    "$corpus" "${seeds[@]}" > "$log" 2>&1
  rc=$?
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*')
  units=$(ls "$corpus" | wc -l)
  crash=$(grep -c -E '^==[0-9]+==ERROR|runtime error|deadly signal' "$log")
  echo "$name: ${execs:-?} executions in ${secs} s, coverage ${cov:-?} edges, corpus $units, crashes $crash (exit $rc)"
  [ "$rc" != 0 ] || [ "$crash" != 0 ] && failed=1
done
exit $failed
