#!/usr/bin/env bash
# A round of the default mix's shape (bench/bench_round.c) on this tree's
# library against the same round on an older commit's, the two binaries
# run in turn RUNS times (default 5): the median seconds of each and their
# ratio. REV defaults to 510cb29^, the code when issue 18 (a round three
# times faster) was filed: a request per prompt and one row per
# completion. Not one of `make bench`'s runs: it builds a second tree.
#   bench/round_before.sh [REV] [RUNS]
set -eu
cd "$(dirname "$0")/.."
rev=${1:-510cb29^}
runs=${2:-5}
work=$(mktemp -d)
trap 'git worktree remove --force "$work/old" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
git worktree add -q --detach "$work/old" "$rev"
cp bench/bench_round.c bench/bench.h bench/group_rows.h "$work/old/bench/"
make -s -C "$work/old" MODE=release NVCC= CC="gcc -DSAPO_ROUND_BEFORE" build/release/bench/bench_round
make -s MODE=release build/release/bench/bench_round
for i in $(seq "$runs"); do
  "$work/old/build/release/bench/bench_round" | sed -n 's/^round the way before issue 18: \([0-9.]*\) s.*/\1/p' >>"$work/old.txt"
  build/release/bench/bench_round | sed -n "s/^round the node's way: \([0-9.]*\) s.*/\1/p" >>"$work/new.txt"
done
median() { sort -g "$1" | awk '{v[NR] = $1} END {print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
old=$(median "$work/old.txt") new=$(median "$work/new.txt")
echo "round at $rev: $old s (runs: $(tr '\n' ' ' <"$work/old.txt"))"
echo "round at this tree: $new s (runs: $(tr '\n' ' ' <"$work/new.txt"))"
echo "ratio: $(awk -v a="$old" -v b="$new" 'BEGIN {printf "%.2f", a / b}')"
