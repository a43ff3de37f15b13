#!/usr/bin/env bash
# Runs every benchmark: each program build/release/bench/bench_* and each
# script bench/b_*.sh. Echoes the lines that start with "bench " and writes
# those in the figure format
#   bench NAME: VALUE UNIT (PEER: VALUE UNIT, ratio R)
# (the part in parentheses optional) to bench/results.json as an array of
# {name, value, unit, peer, peer_value, peer_unit, ratio}.
# QUICK=1 (make bench QUICK=1) is passed on as SAPO_BENCH_QUICK=1.
set -u
cd "$(dirname "$0")/.."
bindir=${BENCH_BIN:-build/release/bench}
export SAPO_BIN=${SAPO_BIN:-bin}
if [ -n "${QUICK:-}" ] && [ "$QUICK" != 0 ]; then export SAPO_BENCH_QUICK=1; fi
out=bench/results.json

json_str() {
  local s=${1//\\/\\\\}
  s=${s//\"/\\\"}
  printf '"%s"' "$s"
}

num='[-+0-9.eE]+|inf|nan'
re="^bench ([^:]+): ($num) ([^ (]+)( \((.+): ($num) ([^ ,]+), ratio ($num)\))?\$"
items=()
failed=0
progs=()
for p in "$bindir"/bench_*; do [ -x "$p" ] && progs+=("$p"); done
for p in bench/b_*.sh; do [ -f "$p" ] && progs+=("$p"); done
for p in "${progs[@]}"; do
  start=$(date +%s)
  output=$(bash -c '"$0"' "$p")
  rc=$?
  while IFS= read -r line; do
    [[ "$line" == bench\ * ]] || continue
    echo "$line"
    if [[ "$line" =~ $re ]]; then
      item="{\"name\": $(json_str "${BASH_REMATCH[1]}"), \"value\": ${BASH_REMATCH[2]}, \"unit\": $(json_str "${BASH_REMATCH[3]}")"
      if [ -n "${BASH_REMATCH[4]}" ]; then
        item+=", \"peer\": $(json_str "${BASH_REMATCH[5]}"), \"peer_value\": ${BASH_REMATCH[6]}"
        item+=", \"peer_unit\": $(json_str "${BASH_REMATCH[7]}"), \"ratio\": ${BASH_REMATCH[8]}}"
      else
        item+=", \"peer\": null, \"peer_value\": null, \"peer_unit\": null, \"ratio\": null}"
      fi
      item=${item//: inf/: null}
      item=${item//: nan/: null}
      items+=("$item")
    fi
  done <<< "$output"
  if [ "$rc" != 0 ]; then
    echo "bench: $(basename "$p") exited $rc" >&2
    failed=1
  fi
  echo "($(basename "$p"): $(( $(date +%s) - start ))s)" >&2
done
{
  echo "["
  for i in "${!items[@]}"; do
    sep=","; [ "$i" = $(( ${#items[@]} - 1 )) ] && sep=""
    echo "  ${items[$i]}$sep"
  done
  echo "]"
} > "$out"
echo "wrote ${#items[@]} figures to $out"
exit "$failed"
