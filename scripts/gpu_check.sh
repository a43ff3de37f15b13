#!/usr/bin/env bash
# The whole GPU check in one command: test_cuda from the ASan build under
# LeakSanitizer, test_cuda from the release build under compute-sanitizer's
# memcheck and racecheck (compute-sanitizer cannot run an ASan binary), and
# bench_cuda. Exits 1 when a step fails, or when a GPU is present but the
# device tests skip (a driver older than the build's CUDA, a build without
# nvcc); prints one SKIP line and exits 0 where there is no GPU or driver.
#   scripts/gpu_check.sh
#   JOBS=8 scripts/gpu_check.sh            make's parallelism (default: nproc)
#   SANITIZER_TESTS="test_generate" ...    the tests the sanitizers run (default: all)
#   STEP_TIMEOUT=120 ...                   seconds a step may take (default: no limit)
#   GPU_CHECK_LOGS=DIR ...                 where the steps' logs go (default: a new folder)
#   GPU_CHECK_BENCH=0 ...                  the tests alone, no bench_cuda (a call of its own)
#   SAPO_GPU_PREBUILT=1 ...                use the programs in place (scripts/gpu_kit.sh)
set -u
cd "$(dirname "$0")/.." || exit 1

if ! command -v nvidia-smi >/dev/null 2>&1; then
  echo "SKIP gpu_check: no NVIDIA driver (nvidia-smi not found)"
  exit 0
fi
if ! gpus=$(nvidia-smi -L 2>&1) || ! grep -q '^GPU ' <<<"$gpus"; then
  echo "SKIP gpu_check: the driver sees no GPU (nvidia-smi -L: $(head -n 1 <<<"$gpus"))"
  exit 0
fi
driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1)
echo "gpu_check: $(head -n 1 <<<"$gpus"), driver ${driver:-unknown}"

cuda_home=${CUDA_HOME:-/usr/local/cuda}
sanitizer=$(command -v compute-sanitizer || true)
for c in "$cuda_home/bin/compute-sanitizer" "$cuda_home/compute-sanitizer/compute-sanitizer"; do
  if [ -z "$sanitizer" ] && [ -x "$c" ]; then sanitizer=$c; fi
done

jobs=${JOBS:-$(nproc)}
logs=${GPU_CHECK_LOGS:-$(mktemp -d /tmp/sapo-gpu-check-XXXXXX)}
mkdir -p "$logs"
failed=()

# step NAME COMMAND...: runs it with its output kept in $logs/NAME.log; a
# non-zero exit, a FAIL line, or a SKIP line (a GPU is present) fails it
step() {
  local name=$1
  shift
  echo "== $name: $*"
  timeout "${STEP_TIMEOUT:-0}" "$@" 2>&1 | tee "$logs/$name.log"
  local rc=${PIPESTATUS[0]}
  local why=""
  if [ "$rc" -eq 124 ]; then why="over ${STEP_TIMEOUT}s"
  elif [ "$rc" -ne 0 ]; then why="exit status $rc"; fi
  if grep -q '^FAIL ' "$logs/$name.log"; then why="${why:+$why, }a test failed"; fi
  if grep -q '^SKIP ' "$logs/$name.log"; then why="${why:+$why, }skipped with a GPU present"; fi
  if [ -n "$why" ]; then
    echo "FAIL $name ($why)"
    failed+=("$name")
  else
    echo "ok $name"
  fi
}

if [ -n "${SAPO_GPU_PREBUILT:-}" ]; then
  echo "gpu_check: the programs in place, built elsewhere (scripts/gpu_kit.sh)"
elif ! make -j"$jobs" MODE=release build/release/tests/test_cuda build/release/bench/bench_cuda ||
   ! make -j"$jobs" MODE=asan build/asan/tests/test_cuda; then
  echo "FAIL gpu_check: the build failed"
  exit 1
fi

read -r -a only <<<"${SANITIZER_TESTS:-}"
# as tests/run.sh runs every C test: leaks are errors, the CUDA libraries'
# own allocations suppressed
step asan env ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 LSAN_OPTIONS=suppressions="$PWD/tests/lsan.supp" \
  build/asan/tests/test_cuda
if [ -n "$sanitizer" ]; then
  step memcheck "$sanitizer" --tool memcheck --leak-check full --error-exitcode 1 \
    build/release/tests/test_cuda ${only[@]+"${only[@]}"}
  step racecheck "$sanitizer" --tool racecheck build/release/tests/test_cuda ${only[@]+"${only[@]}"}
  # racecheck reports hazards inside cuBLAS's own Hopper kernels (nvjet_*,
  # seen on an H200: their asynchronous copies are outside what it models);
  # a hazard in one of sapo's kernels (every one is named *_kernel) fails
  if [ -f "$logs/racecheck.log" ]; then
    ours=$(grep -cE 'access at [A-Za-z0-9_]+_kernel' "$logs/racecheck.log" || true)
    all=$(grep -c 'Race reported' "$logs/racecheck.log" || true)
    if [ "$ours" -gt 0 ]; then
      echo "FAIL racecheck: $ours hazard lines name sapo's kernels"
      failed+=(racecheck-sapo)
    else
      echo "racecheck: $all hazard reports, none in sapo's kernels"
    fi
  fi
else
  echo "FAIL compute-sanitizer: not found on the PATH or under $cuda_home (the CUDA toolkit's cuda-sanitizer package)"
  failed+=(compute-sanitizer)
fi
[ "${GPU_CHECK_BENCH:-1}" = 0 ] || step bench build/release/bench/bench_cuda

echo "gpu_check: logs in $logs"
if [ ${#failed[@]} -gt 0 ]; then
  echo "FAIL gpu_check: ${failed[*]}"
  exit 1
fi
echo "PASS gpu_check"
