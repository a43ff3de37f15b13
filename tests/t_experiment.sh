#!/usr/bin/env bash
# The controlled study end to end at --quick size with a micro random model
# (rewards are ~0, so sharing is forced on as in t_node.sh): two
# configurations x two seeds x two nodes through scripts/experiment.sh, the
# nodes of two kinds (a 2-layer and a 1-layer micro model: a heterogeneous
# swarm), then every output file and its shape: the manifest (git version,
# model hashes, wall time), per-node metrics and evaluation lines,
# rewards.tsv, cumulative.tsv (each value the sum of that run's rows in
# rewards.tsv), the summary's tables (the by-kind one against sums of
# rewards.tsv per kind) and the PNGs; and each step's progress lines.
set -u
cd "$(dirname "$0")/.."
bin=${SAPO_BIN:-build/asan/bin}
for p in broker learner sampler generator verifier evaluate study; do
  [ -x "$bin/$p" ] || { echo "SKIP experiment: $bin/$p not built"; exit 0; }
done
for c in redis-server foreman gnuplot; do
  command -v $c > /dev/null || { echo "SKIP experiment: $c not installed"; exit 0; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
check() { if eval "$2"; then echo "PASS experiment_$1"; else echo "FAIL experiment_$1"; fi; }
export SAPO_BIN=$bin

out=$(scripts/experiment.sh --rounds two 2>&1); rc=$?
check bad_flag '[ $rc = 2 ] && [ "$out" = "experiment: --rounds: '\''two'\'' is not a positive integer" ]'

cat > "$tmp/micro.json" <<'JSON'
{"model_type": "qwen2", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
 "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 264, "rope_theta": 10000.0,
 "rms_norm_eps": 1e-6, "tie_word_embeddings": true, "max_position_embeddings": 1024, "eos_token_id": 256}
JSON
sed 's/"num_hidden_layers": 2/"num_hidden_layers": 1/' "$tmp/micro.json" > "$tmp/micro1.json"
{ "$bin/learner" init "$tmp/micro.json" "$tmp/micro" && "$bin/learner" init "$tmp/micro1.json" "$tmp/micro1"; } 2> "$tmp/init.log" ||
  { cat "$tmp/init.log"; echo "FAIL experiment_init"; exit 1; }
exp=$tmp/exp
SAPO_QUESTIONS=4 SAPO_COMPLETIONS=4 SAPO_MAX_NEW_TOKENS=12 SAPO_SHARE=all SAPO_LOCAL_FILTER=all SAPO_EXTERNAL_FILTER=all SAPO_SWARM=t$$ \
  SAPO_PROGRESS_SECONDS=1 scripts/experiment.sh --quick --configs "4/0 2/2" --seeds 1,2 --rounds 3 --eval-every 2 --eval-questions 2 \
  --model "$tmp/micro,$tmp/micro1" --run "$exp" > "$tmp/out.log" 2>&1
rc=$?
check runs '[ $rc = 0 ] || { tail -20 "$tmp/out.log"; false; }'
# each step says where it is: its number, the time gone, the nodes' rounds
check step_progress 'grep -q "^experiment: step 4 of 4: 2/2, seed 2: " "$tmp/out.log" &&
  grep -q "^  step [1-4] of 4 ([42]/[02], seed [12]), [0-9]* s: n0 r" "$tmp/out.log" || { cat "$tmp/out.log"; false; }'

m=$exp/manifest.json
hash0=$(sha256sum "$tmp/micro/model.safetensors" | cut -d' ' -f1) hash1=$(sha256sum "$tmp/micro1/model.safetensors" | cut -d' ' -f1)
# what each kind of node loaded: its model, start and their sums, and
# every setting as the learner resolved it
check manifest '[ -f "$m" ] && grep -q "\"git_version\": \"[0-9a-f]" "$m" &&
  grep -q "\"wall_seconds\": [0-9]" "$m" && grep -q "\"cpu\": \".*(family [0-9]*, model [0-9]*)\"" "$m" && grep -q "\"seeds\": \[1,2\]" "$m" && grep -q "\"SAPO_COMPLETIONS\": \"4\"" "$m" &&
  python3 -c "
import json, sys
s = json.load(open(sys.argv[1]))[\"starts\"]
assert [x[\"start_sha256\"] for x in s] == sys.argv[2:4] and [x[\"model\"] for x in s] == sys.argv[4:6], s
assert s[0][\"model_file_sha256\"] == sys.argv[2] and s[0][\"settings\"][\"completions\"] == 4, s
" "$m" "$hash0" "$hash1" "$tmp/micro" "$tmp/micro1" &&
  grep -q "^| \`--lr\` | \`SAPO_LR\` |" "$exp/settings.md"'

ok=1
for c in I4J0 I2J2; do
  for s in 1 2; do
    for n in n0 n1; do
      d=$exp/$c/seed$s/$n
      [ "$(wc -l < "$d/metrics.jsonl")" = 3 ] || { echo "$d/metrics.jsonl: not 3 rounds"; ok=0; }
      # rounds 0 (the base policy), 2 and 3 (the last)
      [ "$(grep -o '"round":[0-9]*' "$d/eval.jsonl" | cut -d: -f2 | tr '\n' ' ')" = "0 2 3 " ] ||
        { echo "$d/eval.jsonl: rounds $(grep -o '"round":[0-9]*' "$d/eval.jsonl" | tr '\n' ' ')"; ok=0; }
      grep -q '"pass1":[0-9.]*,"score":[0-9.e-]*,"format":[0-9.e-]*,"questions":[0-9]*,"families":{"basic_arithmetic"' "$d/eval.jsonl" ||
        { echo "$d/eval.jsonl: no pass1/families"; ok=0; }
      # every greedy answer scored, question by question (paired tests)
      q=$(grep -o '"questions":[0-9]*' "$d/eval.jsonl" | awk -F: '{ s += $2 } END { print s }')
      [ "$(grep -c '"round":' "$d/eval-completions.jsonl" 2> /dev/null)" = "$q" ] ||
        { echo "$d/eval-completions.jsonl: not the $q answers of eval.jsonl"; ok=0; }
      # a finished step keeps its last policy, not its checkpoints
      [ ! -e "$d/ckpt" ] && [ "$(ls "$d/policy")" = v3 ] ||
        { echo "$d: checkpoints or policies other than the last: $(ls "$d/ckpt" "$d/policy" 2>&1 | tr '\n' ' ')"; ok=0; }
    done
  done
done
check node_files '[ $ok = 1 ]'

r=$exp/results
check rewards_tsv '[ "$(head -1 "$r/rewards.tsv")" = "$(printf "config\tseed\tnode\tround\treward\tbatch_reward\tmodel")" ] &&
  [ "$(awk -F"\t" "NR > 1 { print \$3, \$7 }" "$r/rewards.tsv" | sort -u | tr "\n" " ")" = "n0 bytes-2L-64C-v264 n1 bytes-1L-64C-v264 " ] &&
  [ "$(wc -l < "$r/rewards.tsv")" = $((1 + 2 * 2 * 2 * 3)) ]'
# each cumulative value is the sum over nodes and rounds of that run's rewards
sums=$(awk -F'\t' 'NR > 1 { s[$1 " " $2] += $5 } END { for (k in s) printf "%s %.4f\n", k, s[k] }' "$r/rewards.tsv" | sort)
cums=$(awk -F'\t' 'NR > 1 { printf "%s %s %.4f\n", $1, $2, $5 }' "$r/cumulative.tsv" | sort)
check cumulative_tsv '[ "$(wc -l < "$r/cumulative.tsv")" = 5 ] && [ "$sums" = "$cums" ] &&
  awk -F"\t" "NR > 1 && (\$3 != 2 || \$4 != 3) { exit 1 }" "$r/cumulative.tsv"'
check summary 'grep -q "^| 4/0 | 2 | 3 | 2 | .* | 1 | n/a | n/a | n/a |$" "$r/summary.md" &&
  grep -q "| ratio to J = 0 | Welch p | paired p | permutation p |$" "$r/summary.md" &&
  grep -qE "^\| 2/2 \| 2 \| 3 \| 2 \| .* \| ([0-9.]+|n/a) \| ([0-9.e-]+|n/a) \| ([0-9.e-]+|n/a) \| ([0-9.e-]+|n/a) \|$" "$r/summary.md" &&
  grep -q "^### 2/2 nodes against 4/0 (isolated) nodes" "$r/summary.md" &&
  [ "$(grep -cE "^\| [023] \| [0-9.]+ \(4\) \| [0-9.]+ \(4\) \|" "$r/summary.md")" = 3 ] &&
  grep -q "^- start: model \`$tmp/micro1\`, .*start_sha256 \`$hash1\`" "$r/summary.md"'
# the by-kind table: per kind and configuration, the per-seed sums of rewards.tsv
want=$(awk -F'\t' 'NR > 1 { s[$7 " " $1 " " $2] += $5 } END { for (k in s) printf "%s %.2f\n", k, s[k] }' "$r/rewards.tsv" | sort)
got=$(awk -F' [|] ' '/^\| bytes-/ { n = split($4, v, ", "); for (i = 1; i <= n; i++) printf "%s %s %d %s\n", substr($1, 3), $2, i, v[i] }' "$r/summary.md" | sort)
check by_model 'grep -q "^## By kind of model" "$r/summary.md" && [ "$(grep -c "^| bytes-" "$r/summary.md")" = 4 ] &&
  [ "$want" = "$got" ] && grep -qE "^\| bytes-1L-64C-v264 \| 4/0 \| 1 \| .* \| 1 \| n/a \| n/a \| [0-9.]+ \| [0-9.]+ \|$" "$r/summary.md" ||
  { echo "want: $want"; echo "got: $got"; false; }'
ok=1
for p in moving_average cumulative grid evaluation; do
  [ "$(head -c 4 "$r/$p.png" | od -An -c | tr -d ' ')" = "211PNG" ] || { echo "$r/$p.png: not a PNG"; ok=0; }
done
check plots '[ $ok = 1 ]'
# where gnuplot is not installed (a device machine), the study still ends
# well, with its summary, and says there are no plots
mkdir -p "$tmp/no-gnuplot"
cp "$r/summary.md" "$tmp/summary.before"
gp_err=$(PATH=$tmp/no-gnuplot "$bin/study" "$exp" 2>&1 > /dev/null); rc=$?
check without_gnuplot '[ $rc = 0 ] && cmp -s "$r/summary.md" "$tmp/summary.before" &&
  [ "$gp_err" = "study: gnuplot is not installed: no plots; the data and summary are in $r" ] || { echo "rc $rc: $gp_err"; false; }'
# the two rewards: each run's batch reward summed as its own reward is (cumulative_batch)
sums=$(awk -F'\t' 'NR > 1 { s[$1 " " $2] += $6 } END { for (k in s) printf "%s %.4f\n", k, s[k] }' "$r/rewards.tsv" | sort)
cums=$(awk -F'\t' 'NR > 1 { printf "%s %s %.4f\n", $1, $2, $6 }' "$r/cumulative.tsv" | sort)
check both_rewards '[ "$(head -1 "$r/cumulative.tsv")" = "$(printf "config\tseed\tnodes\trounds\tcumulative\tcumulative_batch")" ] &&
  [ "$sums" = "$cums" ] && grep -q "^## Two rewards" "$r/summary.md" &&
  grep -qE "^\| 2/2 \| 2 \| [0-9.]+ \| [0-9.n/a]+ \| .* \| [0-9.]+ \| [0-9.n/a]+ \| .* \| n/a \| [0-9.]+ \| [0-9.]+ \(3\) \|$" "$r/summary.md"'

# the paper's preset at its quick size (on the micro model): both rewards
# in the table, and I/Ju, whose nodes count external groups they do not train
SAPO_QUESTIONS=4 SAPO_COMPLETIONS=4 SAPO_MAX_NEW_TOKENS=12 SAPO_SHARE=all SAPO_LOCAL_FILTER=all SAPO_EXTERNAL_FILTER=all SAPO_SWARM=u$$ \
  scripts/experiment.sh --preset paper --quick --configs "4/0 2/2 2/2u" --seeds 1 --rounds 3 --eval-every 3 --eval-questions 2 \
  --model "$tmp/micro" --run "$tmp/paper" > "$tmp/paper.log" 2>&1
rc=$?
pr=$tmp/paper/results
check preset_runs '[ $rc = 0 ] && grep -q "\"command\": \"scripts/experiment.sh --preset paper --nodes 2 --rounds 3" "$tmp/paper/manifest.json" ||
  { tail -20 "$tmp/paper.log"; false; }'
check preset_both_rewards '[ "$(grep -cE "^\| (4/0|2/2|2/2u) \| 1 \| [0-9.]+ \|" "$pr/summary.md")" = 3 ] &&
  grep -q "| cumulative own | ratio to J = 0 | Welch p | cumulative batch | ratio to J = 0 |" "$pr/summary.md"'
check untrained_external 'grep -q "\"untrained_external\":[1-9]" "$tmp/paper/I2J2u/seed1/n0/metrics.jsonl" &&
  ! grep -q "\"untrained_external\"" "$tmp/paper/I2J2/seed1/n0/metrics.jsonl"'

# specialised nodes (the specialised preset's mixes on the micro model): a
# node draws only from its own mix (every task on n0's stream a sum, on
# n1's a difference), and its evaluator scores the union, by key
SAPO_QUESTIONS=4 SAPO_COMPLETIONS=4 SAPO_MAX_NEW_TOKENS=12 SAPO_SHARE=all SAPO_LOCAL_FILTER=all SAPO_EXTERNAL_FILTER=all SAPO_SWARM=s$$ \
  scripts/experiment.sh --preset specialised --quick --configs "2/2" --seeds 1 --rounds 4 --eval-every 4 --eval-questions 2 \
  --model "$tmp/micro" --run "$tmp/spec" > "$tmp/spec.log" 2>&1 &
sp=$!
for n in n0 n1; do
  for _ in $(seq 600); do [ -f "$tmp/spec/I2J2/seed1/$n/start" ] && break; sleep 0.1; done
  timeout 60 "$bin/tap" --broker "$tmp/spec/I2J2/seed1/$n" --stream tasks --count 6 > "$tmp/$n.tasks" 2> /dev/null &
done
wait $sp
rc=$?
wait
spec_ok() {
  [ $rc = 0 ] && [ "$(wc -l < "$tmp/n0.tasks")" -ge 2 ] && [ "$(wc -l < "$tmp/n1.tasks")" -ge 2 ] &&
    [ "$(grep -c 'Calculate [0-9]* + [0-9]*\.' "$tmp/n0.tasks")" = "$(wc -l < "$tmp/n0.tasks")" ] &&
    [ "$(grep -c 'Calculate [0-9]* - [0-9]*\.' "$tmp/n1.tasks")" = "$(wc -l < "$tmp/n1.tasks")" ] &&
    grep -q '"families":{"basic_arithmetic#add":[0-9.]*,"basic_arithmetic#sub":[0-9.]*,"basic_arithmetic#mul":[0-9.]*}' \
      "$tmp/spec/I2J2/seed1/n0/eval.jsonl"
}
check specialised_mixes 'spec_ok || { tail -5 "$tmp/spec.log"; head -2 "$tmp/n0.tasks" "$tmp/n1.tasks"; false; }'

out=$(scripts/experiment.sh --rounds 3 --run "$exp" --model "$tmp/micro" 2>&1); rc=$?
check no_overwrite '[ $rc = 1 ] && [ "$out" = "experiment: $exp holds a finished experiment; pick another --run" ]'
