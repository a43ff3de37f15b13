#!/usr/bin/env bash
# A study resumed: scripts/experiment.sh run on a folder that holds its own
# study unfinished goes on from where it stopped instead of starting again.
# Two nodes of the tiny model from the learning test's base, two configurations (4/0 and 2/0, so
# that a node's steps depend on nothing but its seed: no pool draws),
# 8 rounds, checkpoints every 2 rounds, evaluations at rounds 0, 4 and 8.
#   - straight: the study run through once;
#   - stopped: the same study, every process of it SIGKILLed (as a machine
#     that goes away leaves it) in the second step after round 3, with a
#     line of its metrics and one of its evaluations left half written,
#     then the same command again: the first step is kept ("done before"),
#     the second goes on from its nodes' round-2 checkpoints.
# Both end with the same files: every metrics line's learning values
# (rewards, losses, gradients, entropies, completions counted), every
# evaluation line and every answer the evaluators scored the same, round
# by round, nothing missing or repeated,
# and the same rewards.tsv and cumulative.tsv; only times, memory peaks
# and the sampler's counters (counted since its process started, and the
# pool's size: a fresh pool after the stop) may differ. The
# resumed manifest keeps the first start and names the resume. A finished
# study, or one run with other settings, is refused with one line.
set -u
cd "$(dirname "$0")/.."
bin=${SAPO_BIN:-build/asan/bin}
. tests/nodes.sh
need resume broker learner sampler generator verifier evaluate study redis-server foreman gnuplot python3
tmp=$(mktemp -d)
cleanup() {
  [ -n "${sid:-}" ] && pkill -9 -s "$sid" 2> /dev/null
  for d in "$tmp"/*/I*/seed*; do [ -f "$d/pids" ] && scripts/swarm.sh stop --run "$d" > /dev/null 2>&1; done
  rm -rf "$tmp"
}
trap cleanup EXIT
check() { if eval "$2"; then echo "PASS resume_$1"; else echo "FAIL resume_$1"; fi; }
export SAPO_BIN=$bin

# the learning test's base (tests/learning_base.sh, made once): a model
# that gets rewards, so that its steps move it and a step lost, repeated
# or taken from another policy would show
tests/learning_base.sh || { echo "FAIL resume_learning_base"; exit 1; }
# one question per decode batch: batches form by timing, and a batch's
# log-probs differ from a lone question's in the last digits
study() {
  SAPO_BASE=build/learning-base-2layer SAPO_QUESTIONS=4 SAPO_COMPLETIONS=4 SAPO_SWARM=resume SAPO_CHECKPOINT_EVERY=2 SAPO_GENERATE_BATCH=1 SAPO_PROGRESS_SECONDS=1 env "${@:2}" \
    scripts/experiment.sh --nodes 2 --configs "4/0 2/0" --seeds 1 --rounds 8 --eval-every 4 --eval-questions 2 --run "$1"
}
# straight through, beside the one stopped below (lockstep: a node's steps
# do not depend on timing)
study "$tmp/straight" > "$tmp/straight.log" 2>&1 &
straight=$!

# a study started in a session of its own and SIGKILLed whole once the
# command $2 holds (checked every 0.1 s, at most 300 s)
killed() {
  setsid bash -c "$(declare -f study); tmp=$tmp; study $1" > "$1.log" 2>&1 < /dev/null &
  sid=$!
  for _ in $(seq 3000); do
    eval "$2" && break
    kill -0 "$sid" 2> /dev/null || break
    sleep 0.1
  done
  pkill -9 -s "$sid" 2> /dev/null
  wait "$sid" 2> /dev/null
  sleep 1
  sid=""
}
# the second run, killed whole in its second step after round 3
m=$tmp/stopped/I2J0/seed1/n0/metrics.jsonl
last_round() { tail -n 1 "$1" 2> /dev/null | grep -o '"round":[0-9]*' | cut -d: -f2; }
killed "$tmp/stopped" '[ "$(last_round "$m")" -ge 3 ] 2> /dev/null'
wait $straight
check straight_runs '[ $? = 0 ] || { tail -20 "$tmp/straight.log"; false; }'
r=$(last_round "$m")
check killed_midway '[ "${r:-0}" -ge 3 ] && [ "$r" -lt 8 ] && ! grep -q "\"finished\"" "$tmp/stopped/manifest.json" || { echo "round ${r:-none}"; tail -5 "$tmp/stopped.log" "$tmp/stopped/I2J0/seed1/n0/"*.log; false; }'
# a kill mid-write: half a line after the whole ones
half_metrics='{"node":"n0","round":5' half_eval='{"node":"n1","round":99,"pass'
printf '%s' "$half_metrics" >> "$m"
printf '%s' "$half_eval" >> "$tmp/stopped/I2J0/seed1/n1/eval.jsonl"

study "$tmp/stopped" > "$tmp/resumed.log" 2>&1
check resumed_runs '[ $? = 0 ] || { tail -20 "$tmp/resumed.log"; false; }'
check said_where '
  grep -q "^experiment: resuming $tmp/stopped (started 20" "$tmp/resumed.log" &&
  grep -q "^experiment: step 1 of 2: 4/0, seed 1: done before, in [0-9]* s" "$tmp/resumed.log" &&
  grep -q "^experiment: step 2 of 2: 2/0, seed 1: resuming in .*/I2J0/seed1 from its nodes.* checkpoints (stopped at rounds n0 [0-9]*, n1 [0-9]*)$" "$tmp/resumed.log" ||
  { cat "$tmp/resumed.log"; false; }'
# the last checkpoint before round 3 (every 2 rounds): 2, or 4 or 6
# where the kill came late
check from_checkpoints 'grep -rqE "policy .* at round (2|4|6), version (2|4|6)$" "$tmp/stopped/I2J0/seed1/n0/" ||
  { grep -rh "policy .* at round" "$tmp/stopped/I2J0/seed1/n0/" | head; false; }'
check partial_lines_cut 'grep -rq "cut the ${#half_metrics} bytes of a line left partial" "$tmp/stopped/I2J0/seed1/n0/" &&
  grep -q "cut the ${#half_eval} bytes of a line left partial" "$tmp/stopped/I2J0/seed1/n1/eval.log"'

python3 - "$tmp/straight" "$tmp/stopped" <<'PY'
import glob, json, os, sys
a, b = sys.argv[1], sys.argv[2]
ok = lambda name, cond, why="": print(("PASS" if cond else "FAIL") + " resume_" + name + (" (%s)" % why if why else ""))
# what a stop may change: times, memory peaks, and the counters of a pool
# and a sampler that start afresh
def free(path):
    last = path.rsplit("/", 1)[-1]
    return (last == "time" or "seconds" in path or path.startswith("/peak_gb") or last == "peak_gb" or
            (path.startswith("/sampler/") and not path.startswith("/sampler/scored_")))
def leaves(o, p=""):
    if isinstance(o, dict):
        for k, v in o.items(): yield from leaves(v, p + "/" + k)
    elif isinstance(o, list):
        for i, v in enumerate(o): yield from leaves(v, p + "/%d" % i)
    else: yield p, o
def lines(path):
    return [{k: v for k, v in leaves(json.loads(l)) if not free(k)} for l in open(path)]
files = sorted(f[len(a):] for f in glob.glob(a + "/I*/seed1/n*/*.jsonl"))
ok("same_files", files == sorted(f[len(b):] for f in glob.glob(b + "/I*/seed1/n*/*.jsonl")) and len(files) == 12, str(files))
for f in files:
    la, lb = lines(a + f), lines(b + f)
    kind = f.rsplit("/", 1)[-1].split(".")[0]
    rounds = [l["/round"] for l in lb]
    # the answers: each evaluation's questions (2 per family of the mix), once
    per = [e["questions"] for e in map(json.loads, open(b + f.replace("eval-completions", "eval")))] \
        if kind == "eval-completions" else []
    want = (list(range(1, 9)) if kind == "metrics" else [0, 4, 8] if kind == "eval" else
            [r for r, q in zip([0, 4, 8], per) for _ in range(q)])
    diff = [(x["/round"], sorted(k for k in set(x) | set(y) if x.get(k) != y.get(k))[:5]) for x, y in zip(la, lb) if x != y]
    ok("same" + f.replace("/", "_").replace(".jsonl", ""), la == lb and rounds == want,
       "rounds %s; first difference %s" % (rounds, diff[:1]))
# the steps moved the model: a lost or repeated one would show
steps = [json.loads(l) for f in files if f.endswith("metrics.jsonl") for l in open(a + f)]
ok("steps_learn", sum(1 for m in steps if m["grad_norm"] > 0) >= len(steps) // 2 and len({m["entropy"] for m in steps}) > len(steps) // 2,
   "%d of %d steps with a gradient" % (sum(1 for m in steps if m["grad_norm"] > 0), len(steps)))
for r in ("rewards.tsv", "cumulative.tsv"):
    ta, tb = open(a + "/results/" + r).read(), open(b + "/results/" + r).read()
    ok("same_" + r.replace(".", "_"), ta == tb and ta.count("\n") > 2)
m = json.load(open(b + "/manifest.json"))
ms = json.load(open(a + "/manifest.json"))
ok("manifest", len(m.get("resumed", [])) == 1 and m["started"] < m["resumed"][0] and "finished" in m and
   set(m["seconds_per_configuration"]) == set(ms["seconds_per_configuration"]) and
   m["wall_seconds"] == sum(m["seconds_per_configuration"].values()), json.dumps({k: m.get(k) for k in ("started", "resumed", "wall_seconds", "seconds_per_configuration")}))
PY

out=$(study "$tmp/stopped" 2>&1); rc=$?
check finished_refused '[ $rc = 1 ] && [ "$(tail -n 1 <<< "$out")" = "experiment: $tmp/stopped holds a finished experiment; pick another --run" ] || { echo "$rc: $out"; false; }'
killed "$tmp/other" 'grep -q "\"started\"" "$tmp/other/manifest.json" 2> /dev/null'
out=$(study "$tmp/other" SAPO_LR=0.5 2>&1); rc=$?
check other_settings_refused '[ $rc = 1 ] && [ "$(tail -n 1 <<< "$out")" = "experiment: $tmp/other was run with other settings (SAPO_LR differ); resume it with its own" ] || { echo "$rc: $out"; false; }'
