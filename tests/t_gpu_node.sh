#!/usr/bin/env bash
# scripts/gpu_node.sh, the one command a device call runs, here on the CPU
# with the micro model: held-out pass@1 before, one node for a few rounds,
# pass@1 of its last policy version, the report and a manifest, every file
# where a device call brings files back (at most 8, flat); a second call
# on the same run folder resumes the node from its checkpoint and does
# not evaluate the start again; bad flags name themselves. The node keeps
# what the GPU presets keep on disk (2 policy versions in bf16, 1
# checkpoint), within the bound its learner states, and a bf16 version is
# what the second evaluation loads.
set -u
cd "$(dirname "$0")/.."
bin=${SAPO_BIN:-build/asan/bin}
export SAPO_BIN=$bin
tmp=$(mktemp -d)
. tests/nodes.sh
trap nodes_cleanup EXIT
need gpu_node broker learner sampler generator verifier evaluate report redis-server redis-cli python3
micro_model gpu_node
check() { if eval "$2"; then echo "PASS gpu_node_$1"; else echo "FAIL gpu_node_$1"; fi; }
export SAPO_MODEL=$tmp/micro SAPO_QUESTIONS=4 SAPO_COMPLETIONS=4 SAPO_MAX_NEW_TOKENS=12 SAPO_LOCAL_FILTER=all SAPO_SWARM=gn$$
export SAPO_POLICY_DTYPE=bf16 SAPO_KEEP_VERSIONS=2 SAPO_KEEP_CHECKPOINTS=1 SAPO_CHECKPOINT_EVERY=2

scripts/gpu_node.sh --minutes 3 --eval-questions 4 --ij 2/0 --rounds 3 --run "$tmp/run" --out "$tmp/out1" > "$tmp/one.log" 2>&1
rc=$?
check runs '[ $rc = 0 ] && grep -q "3 rounds in this call, 3 in all" "$tmp/one.log"'
check out_files '[ "$(ls "$tmp/out1" | wc -l)" -le 8 ] && [ -z "$(find "$tmp/out1" -mindepth 1 -type d)" ] &&
  for f in summary.md manifest.json eval.jsonl metrics.jsonl report.md; do [ -s "$tmp/out1/$f" ] || exit 1; done'
check evaluated_twice '[ "$(wc -l < "$tmp/out1/eval.jsonl")" = 2 ] && [ "$(wc -l < "$tmp/out1/metrics.jsonl")" = 3 ] &&
  grep -q "after (policy version 3)" "$tmp/out1/summary.md" && grep -q "held-out greedy pass@1 (4 questions)" "$tmp/out1/summary.md" &&
  grep -qE "^Own groups whose completions all scored alike .*: [0-9.]+ of them a round" "$tmp/out1/summary.md"'
# a round's share of its own groups all scored alike: the sampler counts
# them since it started, so the summary takes each round's difference.
# The summary (gpu_node.sh's own Python) rerun on the call's metrics set
# to 2 more such groups counted each round, of 2, 2 and 8 groups scored
mkdir -p "$tmp/alike" && cp "$tmp/out1"/* "$tmp/alike/"
python3 - "$tmp/alike/metrics.jsonl" << 'PYALIKE'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
for n, l in enumerate(lines, 1):
    l["sampler"].update(local_zero_adv_kept=2 * n, local_zero_adv_dropped=0, scored_completions=[8, 8, 32][n - 1])
open(sys.argv[1], "w").write("".join(json.dumps(l) + "\n" for l in lines))
PYALIKE
awk '/<<.PY.$/ { f = 1; next } /^PY$/ { f = 0 } f' scripts/gpu_node.sh > "$tmp/summary.py"
check alike_share 'python3 "$tmp/summary.py" "$tmp/alike" 3 0 cpu 3 "" |
  grep -q "scored alike .*: 1.00 of them a round (median), 1.00 in the first round, 0.25 in the last"'
# every held-out completion of both evaluations, each scored as the
# evaluation's pass@1 counted it
check completions 'python3 -c "
import json, sys
evals = [json.loads(l) for l in open(sys.argv[1] + \"/eval.jsonl\")]
lines = [json.loads(l) for l in open(sys.argv[1] + \"/completions.jsonl\")]
assert len(lines) == sum(e[\"questions\"] for e in evals), (len(lines), evals)
at = 0
for e in evals:
    mine, at = lines[at:at + e[\"questions\"]], at + e[\"questions\"]
    assert len(mine) == e[\"questions\"] and all(l[\"temperature\"] == 0 for l in mine), e
    assert abs(sum(l[\"score\"] >= 1 for l in mine) / len(mine) - e[\"pass1\"]) < 1e-9, e
    assert sum(l[\"formatted\"] for l in mine) / len(mine) == e[\"format\"], e
    assert all(l[\"question\"] and l[\"family\"] in e[\"families\"] and \"completion\" in l for l in mine), mine[0]
    # each line names the round and policy version it scored: 0 and 0, then 3 and 3
    assert all((l[\"round\"], l[\"policy_version\"]) == (e[\"round\"], e[\"policy_version\"]) for l in mine), mine[0]
assert [(e[\"round\"], e[\"policy_version\"]) for e in evals] == [(0, 0), (3, 3)], evals
" "$tmp/out1"'
sum=$(cat "$tmp"/micro/*.safetensors | sha256sum | cut -d' ' -f1)
check manifest 'python3 -c "
import json, sys
m = json.load(open(sys.argv[1]))
s = m[\"start\"]
assert s[\"start_sha256\"] == sys.argv[2] and s[\"model\"] == sys.argv[3] and m[\"rounds\"] == 3, m
assert s[\"settings\"][\"max-new-tokens\"] == 12 and m[\"environment\"][\"SAPO_MAX_NEW_TOKENS\"] == \"12\", m
assert m[\"device\"].startswith(\"cpu\"), m
" "$tmp/out1/manifest.json" "$sum" "$tmp/micro"'

# what stays on disk: the newest 2 versions, in bf16, and 1 checkpoint,
# within the stated bound (a folder's config and header on top)
dtypes=$(python3 -c "
import json, struct, sys
f = open(sys.argv[1], 'rb'); n = struct.unpack('<Q', f.read(8))[0]
print(' '.join(sorted({t['dtype'] for k, t in json.loads(f.read(n)).items() if k != '__metadata__'})))
" "$tmp/run/n0/policy/v3/model.safetensors")
bound=$(grep -o 'disk: at most [0-9.]* GB' "$tmp/run/n0/node.log" | head -n 1 | grep -o '[0-9.]*')
used=$(du -sb --apparent-size "$tmp/run/n0/policy" "$tmp/run/n0/ckpt" | awk '{ s += $1 } END { print s }')
check disk '[ "$(ls "$tmp/run/n0/policy" | grep -c "^v")" = 2 ] && [ "$dtypes" = BF16 ] &&
  [ "$(ls "$tmp/run/n0/ckpt" | grep -c "^r")" = 1 ] && [ -n "$bound" ] &&
  awk -v u="$used" -v b="$bound" "BEGIN { exit !(u <= b * 1e9 + 8 * 65536) }"'

# a second call: the node resumes at round 4, the start is not evaluated
# again; an nvidia-smi that fails, as one may where the driver or the
# runtime will not answer, is said in the summary and the call goes on;
# --eval-every 2 scores version 4 as well (beside the node, or once it
# stopped: the newest 2 versions are kept), between the start and the last
before=$(cat "$tmp/run/eval-start.json")
mkdir -p "$tmp/smi"
printf '#!/bin/sh\necho "$*" >> "%s/smi.calls"\necho "NVIDIA-SMI has failed: no driver here"\nexit 9\n' "$tmp" > "$tmp/smi/nvidia-smi"
chmod +x "$tmp/smi/nvidia-smi"
PATH=$tmp/smi:$PATH scripts/gpu_node.sh --minutes 3 --eval-questions 4 --eval-every 2 --ij 2/0 --rounds 5 --run "$tmp/run" --out "$tmp/out2" > "$tmp/two.log" 2>&1
rc=$?
check resumes '[ $rc = 0 ] && grep -q "2 rounds in this call, 5 in all" "$tmp/two.log" &&
  grep -q "from $tmp/run/n0/ckpt/r00000003 at round 3" "$tmp/run/n0/node.log" &&
  [ "$(head -n 1 "$tmp/out2/eval.jsonl")" = "$before" ] && grep -q "after (policy version 5)" "$tmp/out2/summary.md"'
check failing_nvidia_smi 'grep -q "^--query-compute-apps" "$tmp/smi.calls" &&
  grep -q "^nvidia-smi once the node had trained a round .*: nvidia-smi failed: NVIDIA-SMI has failed: no driver here" "$tmp/out2/summary.md"'

check along_the_way 'grep -q "along the way: policy version 4 \"pass1\"" "$tmp/two.log" &&
  [ "$(python3 -c "import json, sys; print(*[e[\"round\"] for e in map(json.loads, open(sys.argv[1]))])" "$tmp/out2/eval.jsonl")" = "0 4 5" ] &&
  [ "$(wc -l < "$tmp/out2/completions.jsonl")" = 12 ] && [ "$(grep -c "\"round\":4," "$tmp/out2/completions.jsonl")" = 4 ] &&
  grep -qE "^Held-out greedy pass@1 along the way: round 0 [0-9.]+, round 4 [0-9.]+, round 5 [0-9.]+\.$" "$tmp/out2/summary.md" &&
  grep -q "gpu_node.sh --minutes 3 --eval-questions 4 --eval-every 2 --ij 2/0 --rounds 5" "$tmp/out2/manifest.json"'

scripts/gpu_node.sh --ij 2/2 > "$tmp/bad.log" 2>&1
check refuses_sharing '[ $? = 2 ] && grep -q "is not I/0" "$tmp/bad.log"'
scripts/gpu_node.sh --minutes soon > "$tmp/bad.log" 2>&1
check refuses_minutes '[ $? = 2 ] && grep -q "minutes: .soon. is not a number" "$tmp/bad.log"'
scripts/gpu_node.sh --eval-every often > "$tmp/bad.log" 2>&1
check refuses_eval_every '[ $? = 2 ] && grep -q "eval-every: .often. is not a whole number of rounds" "$tmp/bad.log"'
SAPO_BIN=$tmp/nowhere scripts/gpu_node.sh > "$tmp/bad.log" 2>&1
check names_missing_program '[ $? = 1 ] && grep -q "nowhere/broker missing" "$tmp/bad.log"'
