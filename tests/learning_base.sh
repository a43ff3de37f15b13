#!/usr/bin/env bash
# Makes the learning test's base once, in build/learning-base-2layer: the
# release programs, then the warm start of config/tiny-2layer.json (750
# steps, seed 1), about 5 minutes of 2 cores on an AMD Zen 3. tests/run.sh
# starts it at nice 19 beside the first tests, which leave a core idle
# much of the time; tests/t_learning.sh calls it again and waits for it.
# One at a time (a lock in build/); the base appears whole or not at all.
# The warm start gives the same weights at any thread count.
set -u
cd "$(dirname "$0")/.."
base=build/learning-base-2layer
mkdir -p build
exec 9> build/learning-base.lock
flock 9
# the programs every time (up to date, a second): t_learning runs them
make -s --no-print-directory -j"$(nproc)" MODE=release programs > build/learning-base-make.log 2>&1 ||
  { tail -n 5 build/learning-base-make.log; echo "learning base: make MODE=release programs failed"; exit 1; }
[ -f "$base/config.json" ] && exit 0
rm -rf "$base.part"
SAPO_SEED=1 SAPO_WARMSTART_SHAPE=config/tiny-2layer.json SAPO_BASE=$base.part bin/learner warmstart > build/learning-base.log 2>&1 ||
  { tail -n 5 build/learning-base.log; echo "learning base: warm start failed (build/learning-base.log)"; exit 1; }
mv "$base.part" "$base"
