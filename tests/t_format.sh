#!/usr/bin/env bash
# Every C, C++ and CUDA source the project owns is in the house style of
# .clang-format (make format-check); make format fixes what is off.
set -u
cd "$(dirname "$0")/.."
command -v clang-format > /dev/null || { echo "SKIP format: clang-format not installed (make deps)"; exit 0; }
if out=$(make --no-print-directory -s format-check 2>&1); then
  echo "PASS format"
else
  echo "$out"
  echo "FAIL format"
fi
