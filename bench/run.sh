#!/usr/bin/env bash
# Runs the benchmarks: each program build/release/bench/bench_* and each
# script bench/b_*.sh (or those given as arguments), one after another.
#
#   bench/run.sh [PROGRAM...]        (make bench; QUICK=1: make bench QUICK=1)
#
# - At the start: the CPU (lscpu's model, the flags that decide rows:
#   avx2, avx512f, avx512_bf16, amx_bf16), the threads, the commit, then
#   each program with what it measures, what it skips on this CPU and its
#   estimated time (this CPU's last run in bench/results.json where it
#   has one, else the table below, measured on a 2-core AMD EPYC Zen 4).
# - Each program's lines as they come: figures
#     bench NAME: VALUE UNIT (PEER: VALUE UNIT, ratio R)
#     bench NAME: VALUE UNIT (PEER: no figure: REASON)
#     bench NAME: skipped: REASON
#     bench PROGRAM: cut off: REASON
#   as they are, its other lines indented; after each SAPO_PROGRESS_SECONDS
#   (20) without a line, one saying what it is at (scripts/progress.sh).
# - Time limits: the whole run may take SAPO_BENCH_LIMIT seconds (1680;
#   450 with QUICK=1). Each program may take what is left of it but the
#   estimates of the programs after it; where the run is behind its
#   estimates, the programs left are capped at one time that fits them in
#   what is left (the short ones run whole, the long ones are cut). Its
#   peers (PyTorch, reasoning-gym) may take what is left of its limit
#   (SAPO_BENCH_DEADLINE, bench.h). A program cut off is a line
#   "bench PROGRAM: cut off: ..." and the next one runs.
# - bench/results.json, rewritten after every line that counts: the CPU,
#   the flags, the threads, the commit, each program's time and how it
#   ended, and every figure, skip and cut-off so far; so a run stopped
#   half-way keeps what it measured.
# - SAPO_BENCH_HIDE_FLAGS=avx512_bf16,amx_bf16 (CPU flags, comma-separated)
#   makes the benchmarks take the CPU for one without them: the rows that
#   need them are skipped, with their reasons, on sapo's side and the
#   peers' alike.
# Exit status 1 when a program failed (not when one was cut off).
set -u
cd "$(dirname "$0")/.."
. scripts/progress.sh
bindir=${BENCH_BIN:-build/release/bench}
export SAPO_BIN=${SAPO_BIN:-bin}
quick=0
if [ -n "${QUICK:-}" ] && [ "$QUICK" != 0 ]; then quick=1; fi
[ "${SAPO_BENCH_QUICK:-0}" != 0 ] && quick=1
export SAPO_BENCH_QUICK=$quick
out=bench/results.json
every=$(progress_every) || exit 2
budget=${SAPO_BENCH_LIMIT:-$([ $quick = 1 ] && echo 450 || echo 1680)}
[[ "$budget" =~ ^[1-9][0-9]*$ ]] || { echo "bench: SAPO_BENCH_LIMIT '$budget' is not a positive whole number of seconds" >&2; exit 2; }
# figures printed as they come, from the C programs (stdbuf) and Python
export PYTHONUNBUFFERED=1

# program: seconds of a full run, of a quick one, and what it measures
# (a 2-core AMD EPYC Zen 4, 2026-12-07: the full ones from a quiet make
# bench, docs/results-bench/make-bench-2026-12-07.txt, rounded up; the
# quick ones measured beside other work)
table() {
  case "$1" in
    bench_broker) echo "10 5 records/s through the broker, against a direct PUSH/PULL pair" ;;
    bench_cuda) echo "5 5 the CUDA backend (skipped at once without a GPU)" ;;
    bench_memory) echo "520 60 peak memory of a training step at micro-batch 16 (activations kept, recomputed, moments in bf16) and of a round's sampling: the tiny model and (not QUICK) SmolLM2-135M, and the Qwen 0.5B where the time allows (run alone), against PyTorch with and without gradient checkpointing" ;;
    bench_model) echo "90 45 the tiny model: training steps in fp32 and cpu-bf16 and sampling, against PyTorch and transformers; bf16 kernels; a step's share of the sgemm peak" ;;
    bench_pool) echo "15 15 pool draw latency at 10^4 and 10^6 entries, against Redis PING" ;;
    bench_real) echo "430 150 SmolLM2-135M: training steps in fp32 and cpu-bf16 and sampling, against PyTorch and transformers" ;;
    bench_records) echo "10 5 group records, FlatBuffers against cJSON; signing" ;;
    bench_round) echo "20 15 the default round's sampling and training, against the way before issue 18; its TensorBoard event's cost" ;;
    bench_tasks) echo "70 35 questions made and answers scored per family, against reasoning-gym" ;;
    bench_tokenizer) echo "5 5 the tokenizer's encode and decode" ;;
    bench_train) echo "5 5 random numbers, token draws, the GRPO loss, AdamW" ;;
    b_node.sh) echo "80 75 a 2-node swarm's round by stage; rounds/s with 1, 2 and 4 generators" ;;
    b_pool_load.sh) echo "330 75 the pool at 1,000 and 10,000 nodes (QUICK: 1,000), one Redis and a Redis Cluster" ;;
    b_pool_tls.sh) echo "210 55 the pool at 1,000 nodes over TLS against plain text, across two hosts" ;;
    *) echo "60 60 (not in bench/run.sh's table)" ;;
  esac
}

# a flag of /proc/cpuinfo as the benchmarks see it (bench.h's bench_cpu_flag)
flags=$(grep -m 1 '^flags' /proc/cpuinfo 2> /dev/null | cut -d: -f2)
hidden() { [[ ",${SAPO_BENCH_HIDE_FLAGS:-}," == *",$1,"* ]]; }
has_flag() { [[ " $flags " == *" $1 "* ]] && ! hidden "$1"; }
flag_word() {
  if has_flag "$1"; then echo "$1"
  elif [[ " $flags " == *" $1 "* ]]; then echo "$1 hidden"
  else echo "no $1"; fi
}
cpu=$(lscpu 2> /dev/null | awk -F': *' '/^Model name/ { n = $2 } /^CPU family/ { f = $2 } /^Model:/ { m = $2 }
  END { printf "%s (family %s, model %s)", n, f, m }')
threads=${OMP_NUM_THREADS:-$(nproc)}
commit=$(git describe --always --dirty 2> /dev/null || echo unknown)

progs=("$@")
if [ ${#progs[@]} = 0 ]; then
  for p in "$bindir"/bench_*; do [ -x "$p" ] && [[ "$p" != *.d ]] && progs+=("$p"); done
  for p in bench/b_*.sh; do [ -f "$p" ] && progs+=("$p"); done
fi

json_str() {
  local s=${1//\\/\\\\}
  s=${s//\"/\\\"}
  printf '"%s"' "$s"
}

# this CPU's last seconds for program $1 in a results.json of the same
# kind of run, or nothing
last_seconds() {
  [ -f "$out" ] && command -v python3 > /dev/null || return 0
  python3 - "$out" "$1" "$cpu" "$quick" "$flags_seen" 2> /dev/null <<'PY' || true
import json, sys
out, name, cpu, quick, flags = sys.argv[1:]
r = json.load(open(out))
if r.get("cpu") == cpu and r.get("quick") == (quick == "1") and r.get("flags_seen") == flags:
    for p in r.get("programs", []):
        if p["name"] == name and p["status"] == "ok":
            print(p["seconds"])
PY
}

# what program $1 skips on this CPU, in words
skips() {
  local what=()
  case "$1" in
    bench_model | bench_real | bench_tasks)
      [ -x .venv/bin/python ] || what+=("its peers: no .venv (tests/oracle/setup.sh makes it)") ;;
  esac
  case "$1" in
    bench_model | bench_real)
      has_flag avx512_bf16 || has_flag amx_bf16 || what+=("bf16 rows: neither avx512_bf16 nor amx_bf16") ;;
  esac
  [ "$1" = bench_model ] && ! has_flag amx_bf16 && has_flag avx512_bf16 && what+=("the AMX rows")
  [ "$1" = bench_real ] && ! scripts/model.sh path smollm2-135m > /dev/null 2>&1 &&
    what=("everything: SmolLM2-135M is not fetched (scripts/model.sh get smollm2-135m)")
  local w sep="skips "
  for w in "${what[@]}"; do printf '%s%s' "$sep" "$w"; sep="; "; done
}

flags_seen="$(flag_word avx2), $(flag_word avx512f), $(flag_word avx512_bf16), $(flag_word amx_bf16)"
echo "bench: $cpu; $flags_seen; $threads threads; git $commit$([ $quick = 1 ] && echo "; quick")"
names=() est=()
total=0
for p in "${progs[@]}"; do
  n=$(basename "$p")
  read -r full short what <<< "$(table "$n")"
  e=$(last_seconds "$n")
  e=${e:-$([ $quick = 1 ] && echo "$short" || echo "$full")}
  names+=("$n") est+=("$e")
  total=$((total + e))
  s=$(skips "$n")
  printf '  %-16s %10s  %s%s\n' "$n" "$(progress_elapsed "$e")" "$what" "${s:+ ($s)}"
done
echo "bench: ${#progs[@]} programs, about $(progress_elapsed "$total") in all (at most $(progress_elapsed "$budget"), SAPO_BENCH_LIMIT)"

started=$(date -u +%FT%TZ)
rows=() runs=()
write_results() {
  local i
  {
    printf '{"cpu": %s, "flags": {' "$(json_str "$cpu")"
    for f in avx2 avx512f avx512_bf16 amx_bf16; do
      printf '%s"%s": %s' "$([ "$f" = avx2 ] || echo ", ")" "$f" "$(has_flag "$f" && echo true || echo false)"
    done
    printf '}, "flags_seen": %s, "hidden_flags": %s,\n' "$(json_str "$flags_seen")" "$(json_str "${SAPO_BENCH_HIDE_FLAGS:-}")"
    printf ' "threads": %d, "commit": %s, "quick": %s, "started": "%s", "finished": %s,\n' "$threads" \
      "$(json_str "$commit")" "$([ $quick = 1 ] && echo true || echo false)" "$started" "${1:-null}"
    printf ' "programs": ['
    for i in "${!runs[@]}"; do printf '%s\n  %s' "$([ "$i" = 0 ] || echo ",")" "${runs[$i]}"; done
    printf '],\n "rows": ['
    for i in "${!rows[@]}"; do printf '%s\n  %s' "$([ "$i" = 0 ] || echo ",")" "${rows[$i]}"; done
    printf ']}\n'
  } > "$out.new" && mv "$out.new" "$out"
}

num='[-+0-9.eE]+|inf|nan'
# a unit may hold spaces ("completion tokens/s")
row_re="^bench ([^:]+): ($num) ([^(]*[^ (])( \((.+): ($num) ([^,]+), ratio ($num)\))?\$"
nopeer_re="^bench ([^:]+): ($num) ([^(]*[^ (]) \((.+): no figure: (.+)\)\$"
skip_re="^bench ([^:]+): (skipped|cut off): (.+)\$"
# one line of a program: a figure or a skip is shown and kept, any other
# line shown indented
progress_line() {
  local line=$1 item
  if [[ "$line" =~ $row_re ]]; then
    item="{\"name\": $(json_str "${BASH_REMATCH[1]}"), \"value\": ${BASH_REMATCH[2]}, \"unit\": $(json_str "${BASH_REMATCH[3]}")"
    if [ -n "${BASH_REMATCH[4]}" ]; then
      item+=", \"peer\": $(json_str "${BASH_REMATCH[5]}"), \"peer_value\": ${BASH_REMATCH[6]}"
      item+=", \"peer_unit\": $(json_str "${BASH_REMATCH[7]}"), \"ratio\": ${BASH_REMATCH[8]}}"
    else
      item+=", \"peer\": null, \"peer_value\": null, \"peer_unit\": null, \"ratio\": null}"
    fi
    item=${item//: inf/: null}
    item=${item//: nan/: null}
  elif [[ "$line" =~ $nopeer_re ]]; then
    item="{\"name\": $(json_str "${BASH_REMATCH[1]}"), \"value\": ${BASH_REMATCH[2]}, \"unit\": $(json_str "${BASH_REMATCH[3]}")"
    item+=", \"peer\": $(json_str "${BASH_REMATCH[4]}"), \"peer_value\": null, \"peer_missing\": $(json_str "${BASH_REMATCH[5]}")}"
  elif [[ "$line" =~ $skip_re ]]; then
    local key=${BASH_REMATCH[2]/ /_}
    item="{\"name\": $(json_str "${BASH_REMATCH[1]}"), \"$key\": $(json_str "${BASH_REMATCH[3]}")}"
  else
    # an estimate is taken from runs whose peers all ended
    [[ "$line" == "peer "*": cut off "* ]] && peer_cut=1
    printf '  %s\n' "$line"
    return
  fi
  printf '%s\n' "$line"
  rows+=("$item")
  write_results
}

# the time c at which the programs whose estimates follow $1 (the time
# left) fit in it, each given the least of a fifth more than its estimate
# and c
cap() {
  local left=$1 n w
  shift
  n=$#
  for w in $(printf '%s\n' "$@" | sort -n); do
    w=$((w * 6 / 5))
    [ $((w * n)) -le "$left" ] || break
    left=$((left - w)) n=$((n - 1))
  done
  echo $((n > 0 ? left / n : left))
}

trap 'progress_stop; write_results "\"interrupted\""; echo "bench: interrupted; what was measured is in $out"; exit 130' INT TERM
write_results
failed=0 t_start=$SECONDS
for i in "${!progs[@]}"; do
  p=${progs[$i]} n=${names[$i]}
  # a run ahead of its estimates gives the program at hand what is left of
  # the budget but the estimates of the programs after it; a run behind
  # them caps the programs left at one time, the same for all, that fits
  # their estimates (and a fifth more) in what is left: the short ones
  # run whole, the long ones are cut. Never past the budget.
  rest=0
  for e in "${est[@]:$i}"; do rest=$((rest + e)); done
  left=$((budget - (SECONDS - t_start)))
  if [ "$rest" -le "$left" ]; then
    limit=$((left - (rest - ${est[$i]})))
  else
    limit=$(cap "$left" "${est[@]:$i}")
    [ "$limit" -le $((${est[$i]} * 6 / 5)) ] || limit=$((${est[$i]} * 6 / 5))
  fi
  [ "$limit" -ge 5 ] || limit=5
  echo "[$n] $(progress_elapsed $((SECONDS - t_start))) into the run; at most $(progress_elapsed "$limit")"
  start=$SECONDS peer_cut=0
  export SAPO_BENCH_DEADLINE=$(($(date +%s) + limit))
  progress_run --limit "$limit" "$n" stdbuf -oL bash -c '"$0"' "$p"
  rc=$?
  secs=$((SECONDS - start))
  status=ok
  if [ "$rc" = 124 ]; then
    status="cut off"
    progress_line "bench $n: cut off: after $(progress_elapsed "$secs"), its share of SAPO_BENCH_LIMIT (the rows it printed were measured)"
  elif [ "$rc" != 0 ]; then
    status="exited $rc"
    echo "bench: $n exited $rc" >&2
    failed=1
  elif [ $peer_cut = 1 ]; then
    status="ok, a peer cut off"
  fi
  runs+=("{\"name\": $(json_str "$n"), \"seconds\": $secs, \"status\": $(json_str "$status")}")
  write_results
  echo "[$n] $(progress_elapsed "$secs"), $status"
done
trap - INT TERM
write_results "\"$(date -u +%FT%TZ)\""
echo "bench: ${#rows[@]} lines in $out, $(progress_elapsed $((SECONDS - t_start))) in all"
exit "$failed"
