#!/usr/bin/env bash
# bin/verifier score and generate from the outside: exit statuses, one
# error line per bad input line, the rest still scored.
set -u
cd "$(dirname "$0")/.."
v=${SAPO_BIN:-build/asan/bin}/verifier
if [ ! -x "$v" ]; then echo "SKIP verifier_cli: $v not built"; exit 0; fi
command -v python3 > /dev/null || { echo "SKIP verifier_cli: python3 not installed"; exit 0; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
check() { if eval "$2"; then echo "PASS verifier_cli_$1"; else echo "FAIL verifier_cli_$1"; fi; }

# generate: same seed, same lines; each entry's own answer scores 1 as a response and inside a completion
"$v" generate --family calendar_arithmetic --seed 3 --count 20 > "$tmp/a.jsonl"; rc=$?
"$v" generate --family calendar_arithmetic --seed 3 --count 5 --start 15 > "$tmp/b.jsonl"
check generate_rc '[ $rc = 0 ] && [ $(wc -l < "$tmp/a.jsonl") = 20 ]'
check generate_start 'tail -n 5 "$tmp/a.jsonl" | cmp -s - "$tmp/b.jsonl"'
for f in base_conversion basic_arithmetic fraction_simplification decimal_arithmetic calendar_arithmetic binary_matrix; do
  "$v" generate --family $f --seed 1 --count 10 --config '{}'
done > "$tmp/all.jsonl"
python3 - "$tmp/all.jsonl" > "$tmp/in.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    e = json.loads(line)
    print(json.dumps(dict(e, response=e["answer"])))
    print(json.dumps(dict(e, completion="<think>hm</think> <answer> " + e["answer"] + " </answer>")))
    print(json.dumps(dict(e, completion="no tags at all")))
PY
"$v" score "$tmp/in.jsonl" > "$tmp/out.jsonl" 2> "$tmp/err"; rc=$?
check score_rc '[ $rc = 0 ] && [ ! -s "$tmp/err" ]'
check score_values 'python3 -c "
import json, sys
rows = [json.loads(l) for l in open(\"$tmp/out.jsonl\")]
assert len(rows) == 180, len(rows)
for i, r in enumerate(rows):
    want = 0.0 if i % 3 == 2 and r[\"metadata\"][\"source_dataset\"] != \"fraction_simplification\" else 1.0
    if i % 3 == 2 and r[\"metadata\"][\"source_dataset\"] == \"fraction_simplification\": want = 0.01
    assert r[\"score\"] == want, (i, r[\"score\"], want)
    assert \"question\" in r and \"metadata\" in r
"'
check score_stdin '"$v" score < "$tmp/in.jsonl" | cmp -s - "$tmp/out.jsonl"'

# a game stage's completion is scored whole, in its own form: a right
# critique of a shown student 1.4, an id not shown 0.2 (form only)
crit='{"question":"q","answer":"42","metadata":{"source_dataset":"game_critique","source_index":1,"shown":[{"id":3,"answer":"42"}]},"completion":"<compare>a</compare>\n<explain>b\nc</explain><identify>ID</identify>"}'
check score_game_stage '[ "$(echo "${crit/ID/3}" | "$v" score | python3 -c "import json,sys; print(round(json.load(sys.stdin)[\"score\"], 4))")" = 1.4 ] &&
  [ "$(echo "${crit/ID/4}" | "$v" score | python3 -c "import json,sys; print(round(json.load(sys.stdin)[\"score\"], 4))")" = 0.2 ]'

# malformed lines: each named on stderr by line number, the others scored, exit 1
{ head -n 1 "$tmp/in.jsonl"; echo '{not json'; echo '{"question":"q","answer":"a","metadata":{"source_dataset":"chess"},"response":"a"}'
  echo '{"question":"q","answer":"a","metadata":{"source_dataset":"bf"}}'; echo '[1,2]'
  echo '{"question":"q","answer":"a","metadata":{"source_dataset":"base_conversion"},"response":"a","completion":"a"}'
  sed -n 2p "$tmp/in.jsonl"; } > "$tmp/bad.jsonl"
"$v" score "$tmp/bad.jsonl" > "$tmp/out2.jsonl" 2> "$tmp/err2"; rc=$?
check malformed_rc '[ $rc = 1 ]'
check malformed_kept '[ $(wc -l < "$tmp/out2.jsonl") = 2 ]'
check malformed_lines '[ $(wc -l < "$tmp/err2") = 5 ] && grep -q ":2: not valid JSON" "$tmp/err2" && grep -q ":3: unknown family chess" "$tmp/err2" && grep -q ":4: needs exactly one" "$tmp/err2" && grep -q ":5: entry is not a JSON object" "$tmp/err2" && grep -q ":6: needs exactly one" "$tmp/err2"'

# usage errors: one line naming the flag, exit 2
usage() { "$v" "$@" > /dev/null 2> "$tmp/u"; local rc=$?; [ $rc = 2 ] && [ $(wc -l < "$tmp/u") = 1 ] && grep -q -- "$want" "$tmp/u"; }
want=--family; check no_family 'usage generate --seed 1 --count 1'
want=--count; check no_count 'usage generate --family bf --seed 1'
want=--seed; check bad_seed 'usage generate --family bf --seed x --count 1'
want=chess; check unknown_family 'usage generate --family chess --seed 1 --count 1'
want=max_n; check bad_config 'usage generate --family binary_matrix --seed 1 --count 1 --config "{\"max_n\": 0}"'
want=--config; check config_not_json 'usage generate --family binary_matrix --seed 1 --count 1 --config "{"'
want=--bogus; check unknown_flag 'usage generate --bogus 1'
want=--start; check no_value 'usage generate --family bf --seed 1 --count 1 --start'
want=nonexistent; check missing_file 'usage score "$tmp/nonexistent.jsonl"'
want=bogus; check unknown_mode 'usage bogus'
