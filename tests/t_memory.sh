#!/usr/bin/env bash
# A node's memory, with real processes:
#   - every process's peak resident memory (VmHWM) is in the learner's
#     metrics lines (peak_gb) and in <run>/peak/, and bin/report tables
#     them; a learner keeps AdamW's moments in bf16 (SAPO_MOMENTS) through
#     its rounds and its last checkpoint;
#   - the memory setting: a malformed size is one line; a budget too
#     small for the model is one line with the least that would do, from
#     bin/learner budget and from swarm.sh start, which then starts
#     nothing; a budget the node fits shows its division in the learner's
#     log, and the learner recomputes where its share needs it;
#   - SmolLM2-135M (where fetched) under a budget that makes its learner
#     recompute and shrink its batches: each process's peak stays under
#     its share, and the node's under the budget (release binaries: the
#     sanitizers' shadow memory and quarantine are not the node's).
set -u
cd "$(dirname "$0")/.."
bin=${SAPO_BIN:-build/asan/bin}
. tests/nodes.sh
need memory broker learner sampler generator verifier redis-server redis-cli foreman python3
tmp=$(mktemp -d)
eval_pid=
cleanup() {
  [ -n "$eval_pid" ] && kill "$eval_pid" 2> /dev/null
  for r in "$tmp"/run-*; do [ -f "$r/pids" ] && scripts/swarm.sh stop --run "$r" > /dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
check() { if eval "$2"; then echo "PASS memory_$1"; else echo "FAIL memory_$1"; fi; }
export SAPO_SWARM=t$$ SAPO_QUESTIONS=4 SAPO_COMPLETIONS=2 SAPO_MAX_NEW_TOKENS=8
micro_model memory
export SAPO_MODEL=$tmp/micro

# 1. the setting's errors, each one line
SAPO_MEMORY=lots "$bin/learner" budget > "$tmp/bad.out" 2>&1
rc=$?
check malformed '[ $rc = 2 ] && [ "$(wc -l < "$tmp/bad.out")" = 1 ] &&
  grep -q "config: memory (SAPO_MEMORY): '"'"'lots'"'"' is not a size" "$tmp/bad.out" || { echo "status $rc:"; cat "$tmp/bad.out"; false; }'
SAPO_MEMORY=100M "$bin/learner" budget > "$tmp/small.out" 2>&1
rc=$?
least=$(grep -o 'needs at least [0-9.]*G' "$tmp/small.out" | grep -o '[0-9.]*')
check too_small '[ $rc = 1 ] && [ "$(wc -l < "$tmp/small.out")" = 1 ] && [ -n "$least" ] &&
  grep -q "memory (SAPO_MEMORY) 100M is too small for .*(the learner .* at micro-batch 1 with recompute" "$tmp/small.out" ||
  { echo "status $rc:"; cat "$tmp/small.out"; false; }'
# the least it names is enough, and a little less is not
SAPO_MEMORY=${least}G "$bin/learner" budget > "$tmp/least.out" 2>&1
rc_least=$?
SAPO_MEMORY=$(python3 -c "print(round($least * 1e9 - 2e7))") "$bin/learner" budget > /dev/null 2>&1
rc_less=$?
check least_is_enough '[ $rc_least = 0 ] && [ $rc_less = 1 ] || { echo "at ${least}G: $rc_least, 20 MB less: $rc_less"; cat "$tmp/least.out"; false; }'
SAPO_BIN=$bin SAPO_MEMORY=100M scripts/swarm.sh start --run "$tmp/run-refused" > "$tmp/swarm.out" 2>&1
rc=$?
check swarm_refuses '[ $rc = 1 ] && [ "$(wc -l < "$tmp/swarm.out")" = 1 ] && grep -q "^swarm: node n0: memory (SAPO_MEMORY) 100M is too small" "$tmp/swarm.out" &&
  [ ! -e "$tmp/run-refused" ] && ! pgrep -f -- "$tmp/run-refused" || { echo "status $rc:"; cat "$tmp/swarm.out"; false; }'

# 2. a micro node under a budget, AdamW's moments in bf16: its division in
# the log, every process's peak in the metrics
SAPO_BIN=$bin SAPO_MEMORY=4G SAPO_MOMENTS=bf16 scripts/swarm.sh start --nodes 1 --ij 2/0 --rounds 2 --run "$tmp/run-micro" --wait > "$tmp/micro.out" 2>&1
log=$tmp/run-micro/n0/node.log
check division_logged 'grep -q "learner\[n0\] memory: 4G: the learner [0-9.]*G (micro-batch [0-9]*, activations kept), 1 generator" "$log" ||
  { grep memory "$log"; false; }'
check peaks_in_metrics 'python3 - "$tmp/run-micro/n0" <<'"'"'EOF'"'"'
import json, os, sys
run = sys.argv[1]
lines = [json.loads(l) for l in open(os.path.join(run, "metrics.jsonl"))]
want = {"broker", "generator", "learner", "sampler", "verifier"}
assert len(lines) == 2, len(lines)
for d in lines:
    p = d["peak_gb"]
    assert set(p) == want and all(0 < v < 4 for v in p.values()), p
files = {f.rsplit("-", 1)[0] for f in os.listdir(os.path.join(run, "peak"))}
assert files == want, files
EOF'

# bin/report's table of the peaks, a row per node
"$bin/report" "$tmp/run-micro" > "$tmp/report.out" 2>&1
check report_table 'grep -q "^| node | broker | sampler | verifier | generator | learner | evaluate | all |" "$tmp/run-micro/report/summary.md" &&
  grep -Eq "^\| n0 \| 0\.[0-9]{3} \| 0\.[0-9]{3} \| 0\.[0-9]{3} \| 0\.[0-9]{3} \| 0\.[0-9]{3} \| \| [0-9.]+ \|$" "$tmp/run-micro/report/summary.md" ||
  { cat "$tmp/report.out"; false; }'

# 3. SmolLM2 under a budget that makes its learner recompute at a smaller
# micro-batch and its generator decode unpacked: what each process held
if ! src=$(scripts/model.sh path smollm2-135m 2> /dev/null); then
  echo "SKIP memory_smollm2_keeps_budget: smollm2-135m is not fetched (scripts/model.sh get smollm2-135m)"
  exit 0
fi
make -s --no-print-directory MODE=release programs > "$tmp/make.out" 2>&1 || { cat "$tmp/make.out"; echo "FAIL memory_release_build"; exit 1; }
# the preset's prompt and task; few, short completions
smol=(SAPO_PRESET=smollm2-135m SAPO_FORMAT_STEPS=0 SAPO_MODEL=smollm2-135m SAPO_MAX_NEW_TOKENS=32 SAPO_COMPLETIONS=4
      SAPO_QUESTIONS=4 SAPO_MICRO_BATCH=16 SAPO_GENERATE_BATCH=4)
budget=4.4G
env "${smol[@]}" SAPO_MEMORY=$budget bin/learner budget > "$tmp/plan.out" 2>&1
check smollm2_plan 'grep -q "activations recomputed" "$tmp/plan.out" && grep -q "weights unpacked" "$tmp/plan.out" || { cat "$tmp/plan.out"; false; }'
# AdamW's moments in bf16 take 4 bytes a parameter less: 0.54 GB of SmolLM2's learner
env "${smol[@]}" SAPO_MEMORY=100G bin/learner budget > "$tmp/fp32.out" 2>&1
env "${smol[@]}" SAPO_MEMORY=100G SAPO_MOMENTS=bf16 bin/learner budget > "$tmp/bf16.out" 2>&1
check smollm2_bf16_moments_plan 'python3 - "$tmp/fp32.out" "$tmp/bf16.out" <<'"'"'EOF'"'"'
import re, sys
a, b = (float(re.search(r"the learner ([0-9.]+)G", open(f).read()).group(1)) for f in sys.argv[1:])
assert abs(a - b - 0.54) < 0.015, (a, b)
EOF'
# the node with its evaluator (every 2 rounds, 2 questions): between its
# evaluations of rounds 0 and 2 the evaluator holds no model
run=$tmp/run-smol
env "${smol[@]}" SAPO_MEMORY=$budget SAPO_BIN=bin scripts/swarm.sh start --nodes 1 --ij 4/0 --rounds 2 --run "$run" > "$tmp/smol.out" 2>&1
env "${smol[@]}" SAPO_MEMORY=$budget SAPO_NODE=n0 SAPO_RUN=$run/n0 SAPO_BROKER=$run/n0 SAPO_ROUNDS=2 \
  bin/evaluate 2 2 > "$tmp/eval.log" 2>&1 &
eval_pid=$!
idle=
for _ in $(seq 1200); do
  kill -0 "$eval_pid" 2> /dev/null || break
  n=$([ -f "$run/n0/eval.jsonl" ] && wc -l < "$run/n0/eval.jsonl" || echo 0)
  # VmRSS, kB, once round 0 is scored and before the learner has round 2
  # (whose notice it sends before its metrics line): nothing to evaluate
  [ "$n" = 1 ] && [ "$(rows run-smol/n0)" -lt 2 ] && idle="$idle $(awk '/^VmRSS/ { print $2 }' "/proc/$eval_pid/status" 2> /dev/null)"
  sleep 0.5
done
wait "$eval_pid"
scripts/swarm.sh wait --run "$run" --timeout 600 > /dev/null 2>&1
scripts/swarm.sh stop --run "$run" > /dev/null 2>&1
check smollm2_evaluator_idle 'python3 - "$run/n0/eval.jsonl" $idle <<'"'"'EOF'"'"'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
idle = [int(k) / 1e6 for k in sys.argv[2:]]
print("evaluator: rounds %s, peak %.3f GB; idle between them %s GB" % ([d["round"] for d in lines], lines[-1]["peak_gb"],
      "%.3f to %.3f" % (min(idle), max(idle)) if idle else "not seen"))
assert [d["round"] for d in lines] == [0, 2] and idle and max(idle) < 0.25 and lines[-1]["peak_gb"] > 0.4
EOF'
check smollm2_keeps_budget 'python3 - "$run/n0" "$tmp/plan.out" "$budget" <<'"'"'EOF'"'"'
import json, re, sys
run, plan, budget = sys.argv[1], open(sys.argv[2]).read(), float(sys.argv[3].rstrip("G"))
share = {"learner": float(re.search(r"the learner ([0-9.]+)G", plan).group(1)),
         "generator": float(re.search(r"generator ([0-9.]+)G each", plan).group(1)),
         "evaluate": float(re.search(r"the evaluator ([0-9.]+)G", plan).group(1)),
         "small": float(re.search(r"verifier ([0-9.]+)G each", plan).group(1))}
d = [json.loads(l) for l in open(run + "/metrics.jsonl")][-1]
peak = d["peak_gb"]
print("SmolLM2 under %sG: peaks %s, shares %s" % (budget, peak, share))
assert "evaluate" in peak
for p, gb in peak.items():
    assert gb <= share.get(p, share["small"]), (p, gb)
assert sum(peak.values()) <= budget, sum(peak.values())
EOF'
