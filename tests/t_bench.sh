#!/usr/bin/env bash
# bench/run.sh with stand-in benchmark programs (scripts that print the
# line formats of bench/bench.h and sleep), in a copy of the tree's
# bench/ and scripts/ so that its bench/results.json is the test's:
#   - the header names the CPU, its flags (SAPO_BENCH_HIDE_FLAGS hides
#     avx512_bf16 and amx_bf16: the plan then says bench_model skips its
#     bf16 rows), the threads and the commit, and the plan an estimate;
#   - lines come as the programs print them, a program silent longer than
#     SAPO_PROGRESS_SECONDS gets a line saying where it is;
#   - a program over its share of SAPO_BENCH_LIMIT is cut off with a line,
#     its processes ended, and the next one runs;
#   - results.json holds every figure, skip and cut-off and each program's
#     end, and a run stopped half-way keeps what came before the stop.
set -u
cd "$(dirname "$0")/.."
for c in python3 stdbuf setsid; do
  command -v $c > /dev/null || { echo "SKIP bench: $c not installed"; exit 0; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
check() { if eval "$2"; then echo "PASS bench_$1"; else echo "FAIL bench_$1"; fi; }

# the run happens in a copy, so the tree's own bench/results.json is not touched
mkdir -p "$tmp/tree/bench" "$tmp/tree/scripts" "$tmp/progs"
cp bench/run.sh "$tmp/tree/bench/"
cp scripts/progress.sh scripts/model.sh "$tmp/tree/scripts/"
prog() { printf '#!/usr/bin/env bash\n%s\n' "$2" > "$tmp/progs/$1"; chmod +x "$tmp/progs/$1"; }
prog bench_model 'echo "bench fast_row: 12.5 tokens/s (peer x: 10 tokens/s, ratio 1.25)"
echo "bench fast_alone: 3 ms"
echo "bench fast_skip: skipped: needs AVX512-BF16 or AMX, which this CPU lacks"
echo "bench fast_nopeer: 7 tokens/s (pytorch eager: no figure: cut off after 10 s)"
echo "a line of context"'
prog b2_silent 'sleep 2.5; echo "bench silent_row: 1 rounds/s"'
prog b3_long 'echo "bench long_first: 2 s"; sleep 61.71 & sleep 61.72; echo "bench long_never: 1 s"'
prog b4_after 'echo "bench after_row: 4 s"'

(cd "$tmp/tree" && SAPO_PROGRESS_SECONDS=1 SAPO_BENCH_LIMIT=16 SAPO_BENCH_HIDE_FLAGS=avx512_bf16,amx_bf16 \
  bench/run.sh "$tmp"/progs/bench_model "$tmp"/progs/b2_silent "$tmp"/progs/b3_long "$tmp"/progs/b4_after) > "$tmp/out" 2>&1
rc=$?
res=$tmp/tree/bench/results.json
check runs '[ $rc = 0 ] || { cat "$tmp/out"; false; }'
check header 'grep -q "^bench: .*(family [0-9]*, model [0-9]*); [a-z0-9_ ]*avx2, .*avx512_bf16.*amx_bf16.*; [0-9]* threads; git " "$tmp/out" &&
  grep -q "^bench: 4 programs, about [0-9]* min [0-9]* s in all (at most 16 s, SAPO_BENCH_LIMIT)" "$tmp/out" || { head -n 8 "$tmp/out"; false; }'
check plan_skips_bf16 'grep -q "^  bench_model .*skips .*bf16 rows: neither avx512_bf16 nor amx_bf16" "$tmp/out" || { head -n 8 "$tmp/out"; false; }'
check lines_in_order 'grep -x -e "bench fast_row: .*" -e "  a line of context" -e "bench silent_row: .*" -e "bench long_first: 2 s" -e "bench after_row: 4 s" "$tmp/out" |
  cut -c1-16 | tr "\n" "|" | grep -qx "bench fast_row: |  a line of cont|bench silent_row|bench long_first|bench after_row:|" || { cat "$tmp/out"; false; }'
check progress_line 'grep -q "^b2_silent: [12] s, at: its start$" "$tmp/out" && grep -q "^b3_long: [0-9] s, at: bench long_first: 2 s$" "$tmp/out" || { cat "$tmp/out"; false; }'
check cut_off 'grep -q "^bench b3_long: cut off: after [0-9] s, its share of SAPO_BENCH_LIMIT" "$tmp/out" && ! grep -q long_never "$tmp/out" &&
  ! pgrep -f "sleep 61.7[12]" > /dev/null || { cat "$tmp/out"; pgrep -af "sleep 61.7"; false; }'
check results 'python3 - "$res" <<'"'"'PY'"'"'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["cpu"] and r["threads"] >= 1 and r["commit"] and r["finished"].endswith("Z"), r
assert r["flags"]["avx512_bf16"] is False and r["flags"]["amx_bf16"] is False, r["flags"]
assert r["hidden_flags"] == "avx512_bf16,amx_bf16" and set(r["flags"]) == {"avx2", "avx512f", "avx512_bf16", "amx_bf16"}
rows = {x["name"]: x for x in r["rows"]}
assert rows["fast_row"] == {"name": "fast_row", "value": 12.5, "unit": "tokens/s", "peer": "peer x",
                            "peer_value": 10, "peer_unit": "tokens/s", "ratio": 1.25}, rows["fast_row"]
assert rows["fast_alone"]["value"] == 3 and rows["fast_alone"]["peer"] is None
assert rows["fast_skip"]["skipped"] == "needs AVX512-BF16 or AMX, which this CPU lacks"
assert rows["fast_nopeer"]["peer_missing"] == "cut off after 10 s" and rows["fast_nopeer"]["peer_value"] is None
assert rows["b3_long"]["cut_off"].startswith("after ") and "long_first" in rows and "after_row" in rows
ends = {p["name"]: p["status"] for p in r["programs"]}
assert ends == {"bench_model": "ok", "b2_silent": "ok", "b3_long": "cut off", "b4_after": "ok"}, ends
PY'

# 2. stopped half-way: the rows before the stop are kept, the program's
# processes are ended
prog b5_stopped 'echo "bench before_stop: 5 s"; sleep 61.73 & sleep 61.74'
(cd "$tmp/tree" && exec bench/run.sh "$tmp"/progs/b5_stopped) > "$tmp/out2" 2>&1 &
run=$!
for _ in $(seq 100); do grep -q before_stop "$res" 2> /dev/null && break; sleep 0.1; done
kill -TERM "$run"
wait "$run"
rc=$?
check interrupted_keeps_rows '[ $rc = 130 ] && python3 -c "
import json, sys
r = json.load(open(sys.argv[1]))
assert r[\"finished\"] == \"interrupted\" and [x[\"name\"] for x in r[\"rows\"]] == [\"before_stop\"], r
" "$res" && ! pgrep -f "sleep 61.7[34]" > /dev/null || { cat "$tmp/out2"; cat "$res"; false; }'
