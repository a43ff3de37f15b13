#!/usr/bin/env bash
# Learning happens on the default mix (single-digit sums and differences):
# one node at LEARNING_CONFIG (default 8/0: eight own groups a step, the
# study's configuration without sharing) with the default RL settings runs
# LEARNING_ROUNDS (default 200) GRPO rounds on the CPU from a base model
# trained here, with an evaluator beside it (scripts/experiment.sh). Three
# checks:
#   - the reward of every own completion scored, per round, rises over the
#     run (its least-squares line, all rounds, ends higher than it starts).
#     Each round's questions are new, so this is the sampling policy's
#     accuracy on questions it never trained on;
#   - on 200 held-out questions sampled 4 times each at the node's
#     temperature (the same uniforms at every evaluation), the share of
#     right answers, averaged over the evaluations of the second half
#     (due at rounds R/2, 3R/4 and R), rises above round 0's by at least
#     LEARNING_SAMPLED_RISE (0.03);
#   - held-out greedy pass@1 on those questions, averaged the same way,
#     rises by at least LEARNING_GREEDY_RISE (0.03).
#
# The base is the smaller kind, config/tiny-2layer.json (2 layers of 256,
# 1.6M parameters), after the default 750 warm-start steps with seed 1, in
# about 3 minutes on 2 cores of the Intel CPU with AMX (5 on an AMD Zen
# 3), where the default 4-layer base takes 9. Any change to the kernels'
# rounding, to the CPU or to the warm start gives another base and other
# trajectories, and later
# rounds vary with process timing (which policy version sampled a group).
#
# Measured (docs/learning.md has every run). At 8/0 on an Intel Xeon with
# AMX (family 6 model 167), where this base's greedy pass@1 is 0.75 and
# its sampled share 0.525, six seeds (LEARNING_SEED=1..6) gave greedy
# +0.098 to +0.177, the sampled share +0.086 to +0.131 and the reward
# +0.107 to +0.165: the margins leave 0.068 and 0.056 over the worst run.
# A seventh run, seed 1 in a clean-clone make test beside a pip install,
# gave +0.08, +0.081 and +0.119. With a learning rate of 1e-12 (SAPO_LR)
# the policy stands still and all three checks fail.
#
# Until then the test ran 4/0, and on the Intel CPU its held-out figures
# did not rise reliably: averaged as now, greedy moved by -0.008 to +0.075
# and the sampled share by +0.006 to +0.055 over six seeds, so it only
# checked that they did not collapse. A 4/0 node also gains less per group
# trained than an 8/0 one (docs/learning.md, "One node at 8/0"). On an AMD EPYC Zen 3 (AVX2) the
# base was 0.655 and greedy pass@1 at round 200 rose by 0.055 to 0.19 at
# 4/0 in seven runs. One greedy evaluation moves by 0.085 (sd) between
# evaluations 25 rounds apart, hence the average of the second half.
#
# The reward check first compared rounds 1-10 with the last 50. On another
# CPU in CI (no AMX) that failed once, 0.540 against 0.533, while pass@1
# rose 0.655 -> 0.845: a 10-round mean has a standard error of about 0.04
# (one round's scored reward varies by 0.11 to 0.17). The least-squares
# line uses every round; its rise over 200 rounds at 4/0 was +0.035 to +0.129 in
# seven runs on Zen 3 (the lowest 1.3 of its standard errors above 0) and
# +0.087 to +0.225 in five on the Intel CPU.
#
# Uses the release build (bin/, built here if needed: the sanitizer build
# is several times slower) and the base cached in build/learning-base-2layer
# (tests/learning_base.sh makes both once).
set -u
cd "$(dirname "$0")/.."
for c in redis-server foreman python3 gnuplot; do
  command -v $c > /dev/null || { echo "SKIP learning: $c not installed"; exit 0; }
done
# the base (and the release programs), made here or already begun by
# tests/run.sh beside the earlier tests
tests/learning_base.sh || { echo "FAIL learning_base"; exit 1; }
bin=bin
base=build/learning-base-2layer
rounds=${LEARNING_ROUNDS:-200}
sampled_rise=${LEARNING_SAMPLED_RISE:-0.03}
greedy_rise=${LEARNING_GREEDY_RISE:-0.03}
seed=${LEARNING_SEED:-1}
config=${LEARNING_CONFIG:-8/0}
tmp=$(mktemp -d)
cleanup() {
  rm -rf "$tmp"
}
trap cleanup EXIT
# the node's default overlap of generation and training, which every
# figure below was measured with (scripts/experiment.sh would run lockstep)
export SAPO_BIN=$bin SAPO_BASE=$base SAPO_SWARM=learning$$ SAPO_LOCKSTEP=0

# the warm start leaves its AdamW state for --warmstart-optimizer; a base
# without one is refused with a line naming the file
if [ -f "$base/optimizer.bin" ]; then echo "PASS learning_warmstart_optimizer_saved"; else echo "FAIL learning_warmstart_optimizer_saved"; fi
mkdir -p "$tmp/bare"
cp "$base/config.json" "$base/model.safetensors" "$tmp/bare/"
SAPO_WARMSTART_OPTIMIZER=1 SAPO_BASE=$tmp/bare SAPO_RUN=$tmp/bare-run timeout 30 "$bin/learner" > "$tmp/bare.log" 2>&1
if [ $? = 1 ] && grep -q "$tmp/bare/optimizer.bin: no warm start optimizer state" "$tmp/bare.log"; then
  echo "PASS learning_warmstart_optimizer_missing"
else
  cat "$tmp/bare.log"; echo "FAIL learning_warmstart_optimizer_missing"
fi
mkdir -p "$tmp/with-run"
SAPO_WARMSTART_OPTIMIZER=1 SAPO_BASE=$base SAPO_RUN=$tmp/with-run timeout 5 "$bin/learner" > "$tmp/with.log" 2>&1
if [ $? = 124 ] && grep -q "policy .* from $base at round 0" "$tmp/with.log" && ! grep -q "error" "$tmp/with.log"; then
  echo "PASS learning_warmstart_optimizer_loaded"
else
  cat "$tmp/with.log"; echo "FAIL learning_warmstart_optimizer_loaded"
fi
# one OpenMP thread a process, as scripts/experiment.sh gives its nodes
# when it is not told otherwise (tests/run.sh exports 2): with 2 each, the
# node's and the evaluator's threads spin against each other on 2 cores,
# and the evaluator, behind, skipped the evaluations at rounds 100 and 150
OMP_NUM_THREADS=1 scripts/experiment.sh --nodes 1 --configs "$config" --rounds "$rounds" --seeds "$seed" --eval-every $((rounds / 4)) \
  --eval-questions 200 --eval-samples 4 --run "$tmp/exp" > "$tmp/exp.log" 2>&1 || { tail -n 20 "$tmp/exp.log"; echo "FAIL learning_run"; exit 1; }
python3 - "$tmp/exp/I${config%/*}J${config#*/}/seed$seed/n0" "$rounds" "$sampled_rise" "$greedy_rise" <<'PY'
import json, sys
node, rounds, sampled_rise, greedy_rise = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
rs = [json.loads(l) for l in open(node + "/metrics.jsonl")]
ev = {e["round"]: e for e in map(json.loads, open(node + "/eval.jsonl"))}
print(("PASS" if len(rs) == rounds else "FAIL") + " learning_rounds (%d of %d)" % (len(rs), rounds))
# every own completion scored for the round, before local-filter picks
# the groups with mixed outcomes (reward_mean is of those)
r = [x["sampler"]["scored_reward"] for x in rs]
n = len(r)
mx, my = (n - 1) / 2, sum(r) / n
slope = sum((x - mx) * (y - my) for x, y in enumerate(r)) / sum((x - mx) ** 2 for x in range(n))
f, l = sum(r[:10]) / 10, sum(r[-rounds // 4:]) / (rounds // 4)
print(("PASS" if slope > 0 else "FAIL") +
      " learning_reward_rises (least-squares rise over %d rounds %+.3f; rounds 1-10 %.3f, last %d %.3f)"
      % (n, slope * n, f, rounds // 4, l))
# the late evaluations (rounds/2, 3 rounds/4, rounds) averaged: one greedy
# evaluation moves by 0.085 (sd) between evaluations 25 rounds apart. An
# evaluator that falls behind a fast node scores the first round it sees
# at or past the one due (110 for 100), or none before the last, so every
# evaluation of the second half counts, and the last one (always scored)
# must be there.
late = sorted(k for k in ev if k >= rounds // 2)
e0 = ev.get(0)
ok = e0 is not None and rounds in late and all("sampled" in ev[k] for k in [0] + late)
def mean(xs): return sum(xs) / len(xs)
s0 = e0["sampled"]["pass1"] if ok else None
s1 = mean([ev[k]["sampled"]["pass1"] for k in late]) if ok else None
print(("PASS" if ok and s1 >= s0 + sampled_rise else "FAIL") +
      " learning_sampled_rises (held-out share right of 4 samples per question %s at round 0, %s averaged over rounds %s, must rise %.2f)"
      % (s0, s1 if s1 is None else round(s1, 4), late, sampled_rise))
g0 = e0["pass1"] if ok else None
g1 = mean([ev[k]["pass1"] for k in late]) if ok else None
print(("PASS" if ok and g1 >= g0 + greedy_rise else "FAIL") +
      " learning_greedy_rises (held-out greedy pass@1 %s at round 0, %s averaged over rounds %s, must rise %.2f; each: %s)"
      % (g0, g1 if g1 is None else round(g1, 4), late, greedy_rise, [ev[k]["pass1"] for k in late] if ok else None))
PY
