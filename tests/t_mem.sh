#!/usr/bin/env bash
# test_mem from the release build: it checks glibc's malloc, which the
# sanitizer build replaces.
set -u
cd "$(dirname "$0")/.."
make -s --no-print-directory MODE=release build/release/tests/test_mem > /dev/null 2>&1 ||
  { echo "FAIL mem_build: make MODE=release build/release/tests/test_mem"; exit 1; }
build/release/tests/test_mem
