#!/usr/bin/env bash
# Runs every test program (C binaries from the sanitizer build, then shell
# tests tests/t_*.sh) and ends with the one line CI reads:
#   N passed, N failed, N skipped
# A test program prints PASS/FAIL/SKIP lines; one that dies without printing
# a FAIL line (a crash, a sanitizer report, a timeout) counts as one failure.
set -u
cd "$(dirname "$0")/.."
bindir=${1:-build/asan/tests}
export SAPO_BIN=${SAPO_BIN:-build/asan/bin}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/tests/lsan.supp}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
filter=${TESTS:-}
pass=0 fail=0 skip=0
log=$(mktemp -d)/tests.log
programs=()
for t in "$bindir"/test_*; do [ -x "$t" ] && programs+=("$t"); done
for t in tests/t_*.sh; do [ -f "$t" ] && programs+=("$t"); done
# the learning test's base takes minutes of CPU; made at nice 19 beside
# the tests before it (which leave a core idle much of the time), it is
# ready or nearly so when t_learning.sh comes to wait for it
if [ -z "$filter" ] || [[ t_learning.sh == *$filter* ]]; then
  nice -n 19 tests/learning_base.sh > /dev/null 2>&1 &
fi
for t in "${programs[@]}"; do
  name=$(basename "$t")
  [ -n "$filter" ] && [[ "$name" != *$filter* ]] && continue
  start=$(date +%s)
  out=$(timeout "${TEST_TIMEOUT:-1800}" bash -c '"$0" 2>&1' "$t"; echo "rc=$?")
  rc=${out##*rc=}
  out=${out%rc=*}
  echo "$out" >> "$log"
  p=$(grep -c '^PASS ' <<<"$out") f=$(grep -c '^FAIL ' <<<"$out") s=$(grep -c '^SKIP ' <<<"$out")
  if [ "$rc" != 0 ] && [ "$f" = 0 ]; then f=1; echo "FAIL $name: exited $rc"; fi
  grep -E '^(FAIL|SKIP) ' <<<"$out"
  if [ "$f" != 0 ]; then
    echo "--- output of $name (last 40 lines) ---"; tail -n 40 <<<"$out"; echo "---"
  fi
  echo "$name: $p passed, $f failed, $s skipped ($(( $(date +%s) - start ))s)"
  pass=$((pass + p)) fail=$((fail + f)) skip=$((skip + s))
done
echo "full log: $log"
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" = 0 ]
