#!/usr/bin/env bash
# A SAPO swarm end to end with real processes, a real redis-server and a
# small random model (rewards are ~0, so sharing is forced on with
# SAPO_SHARE=all, SAPO_LOCAL_FILTER=all and SAPO_EXTERNAL_FILTER=all to exercise the external path):
#   - 3 nodes (2/2, 2/2, 4/0) run their rounds through foreman and the swarm
#     script; versions advance, checkpoints and metrics appear, batches hold
#     I local + J external groups once the pool has other nodes' entries,
#     never the node's own; the J = 0 node uses nothing external;
#   - the learner's and generator's model threads run at nice SAPO_NICE
#     above the broker, verifier and sampler, and their threads that carry
#     records (ZeroMQ's, the wire producer's sender) do not;
#   - a hostile peer's forged rewards never reach a node's training batch;
#   - a node run by hand survives a killed generator, and a killed learner
#     resumes from its checkpoint with its round counter; its evaluator,
#     started after round 0, scores round 0 first;
#   - the swarm's stop ends a process that does not answer it.
set -u
cd "$(dirname "$0")/.."
bin=${SAPO_BIN:-build/asan/bin}
. tests/nodes.sh
need node broker learner sampler generator verifier pool tap redis-server foreman python3 flatc
tmp=$(mktemp -d)
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2> /dev/null; wait "$p" 2> /dev/null; done
  for r in swarm swarm2; do [ -f "$tmp/$r/pids" ] && scripts/swarm.sh stop --run "$tmp/$r" > /dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
check() { if eval "$2"; then echo "PASS node_$1"; else echo "FAIL node_$1"; fi; }
export SAPO_BIN=$bin

micro_model node
export SAPO_MODEL=$tmp/micro SAPO_QUESTIONS=4 SAPO_COMPLETIONS=4 SAPO_MAX_NEW_TOKENS=12 SAPO_SHARE=all SAPO_LOCAL_FILTER=all \
       SAPO_EXTERNAL_FILTER=all SAPO_CHECKPOINT_EVERY=2 SAPO_SWARM=t$$

# a hostile peer: 50 groups of a real question, wrong answers claiming reward 1
# (different ones each time: identical copies are dropped as a duplicate
# flood), signed with its own key so they pass the signature check
"$bin/verifier" generate --family basic_arithmetic --seed 9 --count 1 > "$tmp/entry.jsonl"
mkdir -p "$tmp/forged"
python3 - "$tmp/entry.jsonl" "$tmp/forged" <<'PY'
import json, sys
e = json.loads(open(sys.argv[1]).readline())
task = {"task_id": 1, "family": "basic_arithmetic", "question": e["question"], "answer": e["answer"],
        "metadata_json": json.dumps(e["metadata"]), "node": "evil"}
for k in range(50):
    comps = [{"text": "<answer>%d</answer>" % (10**9 + 4 * k + i), "reward": 1.0, "finished": True} for i in range(4)]
    json.dump({"node": "evil", "model": "forger", "task": task, "completions": comps, "scored": True},
              open("%s/f%02d.json" % (sys.argv[2], k), "w"))
PY
flatc -b -o "$tmp/forged" schemas/group.fbs "$tmp"/forged/*.json 2> "$tmp/flatc.log"

# 1. the swarm, and beside it a one-node swarm started at the same moment:
# each must get a Redis of its own (both once took the same free port)
scripts/swarm.sh start --nodes 3 --ij 2/2,2/2,4/0 --rounds 8 --run "$tmp/swarm" > "$tmp/swarm.log" 2>&1 &
SAPO_SWARM=u$$ scripts/swarm.sh start --nodes 1 --ij 4/0 --rounds 2 --run "$tmp/swarm2" > "$tmp/swarm2.log" 2>&1
wait
# the learner's and the generator's model threads (the main thread among
# them) run at nice SAPO_NICE (10) above the broker, verifier and sampler,
# whatever nice the test runs at; their ZeroMQ and sender threads do not
# only this test's processes count (their node folders are under $tmp):
# another swarm on the machine, a study say, runs its own at its own nice
ours() {
  for p in $(pgrep -x "$1"); do
    tr '\0' '\n' < /proc/"$p"/environ 2> /dev/null | grep -q "^SAPO_BROKER=$tmp/" && echo "$p"
  done
}
nice_of() { for p in $(ours "$1"); do ps -o ni= -p "$p"; done | sort -u | tr -d ' ' | tr '\n' ' '; }
carriers_nice() {
  for p in $(ours learner) $(ours generator); do
    for t in /proc/"$p"/task/*; do
      case "$(cat "$t/comm" 2> /dev/null)" in ZMQbg/* | wire-send) awk '{print $19}' "$t/stat" 2> /dev/null ;; esac
    done
  done | sort -u | tr '\n' ' '
}
# a process lowers its model threads once its sockets exist: wait until
# every learner and generator of the swarms (each node's, at least the
# 3-node swarm's) has
settled() {
  [ "$(ours learner | wc -l)" -ge 3 ] && [ "$(ours generator | wc -l)" -ge 3 ] &&
    [ "$(wc -w <<< "$ni_learner")" = 1 ] && [ "$(wc -w <<< "$ni_generator")" = 1 ] &&
    { [ "${SAPO_NICE:-10}" = 0 ] || { [ "$ni_learner" != "$ni_broker" ] && [ "$ni_generator" != "$ni_broker" ]; }; }
}
for _ in $(seq 240); do
  ni_learner=$(nice_of learner) ni_generator=$(nice_of generator) ni_broker=$(nice_of broker) ni_carriers=$(carriers_nice)
  settled && break
  sleep 0.25
done
check compute_processes_niced '[ -n "$ni_broker" ] && [ "$(nice_of verifier)" = "$ni_broker" ] &&
  [ "$(nice_of sampler)" = "$ni_broker" ] && [ -n "$ni_learner" ] && [ "$ni_learner" = "$ni_generator" ] &&
  [ $(( ${ni_learner% } - ${ni_broker% } )) = "${SAPO_NICE:-10}" ] && [ "$ni_carriers" = "$ni_broker" ] ||
  { echo "nice: learner $ni_learner generator $ni_generator broker $ni_broker, their record threads $ni_carriers"; false; }'
port=$(grep -o 'redis://127.0.0.1:[0-9]*' "$tmp/swarm.log" | head -1)
port2=$(grep -o 'redis://127.0.0.1:[0-9]*' "$tmp/swarm2.log" | head -1)
"$bin/pool" publish --redis "$port" --node evil --key "$tmp/evil.key" "$tmp"/forged/*.bin
scripts/swarm.sh wait --run "$tmp/swarm2" --timeout 300 > /dev/null
# keep.sh names each process it runs in the node's folder (NAME.pid); one
# that does not answer its stop in time (in life, a large model's batch or
# load) outlives foreman, which kills keep.sh only: here a process that
# ignores SIGTERM, named as keep.sh names them. The swarm's stop ends it.
check keep_names_its_processes '(for p in broker generator learner sampler verifier; do
  grep -qx "[0-9][0-9]*" "$tmp/swarm2/n0/$p.pid" || exit 1; done)'
(trap '' TERM; SAPO_RUN=$tmp/swarm2/n0 exec sleep 300) &
stuck=$!
echo "$stuck" > "$tmp/swarm2/n0/stuck.pid"
scripts/swarm.sh stop --run "$tmp/swarm2" > /dev/null
check stop_ends_every_process '! ps -p "$stuck" -o stat= | grep -qv Z'
kill -9 "$stuck" 2> /dev/null
wait "$stuck" 2> /dev/null
check redis_of_its_own '[ -n "$port" ] && [ -n "$port2" ] && [ "$port" != "$port2" ] &&
  [ "$(wc -l < "$tmp/swarm2/n0/metrics.jsonl")" = 2 ]'
scripts/swarm.sh wait --run "$tmp/swarm" --timeout 300
scripts/swarm.sh stop --run "$tmp/swarm" > /dev/null
python3 - "$tmp/swarm" > "$tmp/verdicts" <<'PY'
import json, sys, os
run = sys.argv[1]
def rows(n):
    p = os.path.join(run, n, "metrics.jsonl")
    return [json.loads(l) for l in open(p)] if os.path.exists(p) else []
m = {n: rows(n) for n in ("n0", "n1", "n2")}
ok = lambda name, cond: print(("PASS" if cond else "FAIL") + " node_" + name)
ok("rounds_and_versions", all([r["round"] for r in m[n]] == list(range(1, 9)) and
                              all(r["policy_version"] == r["round"] for r in m[n]) for n in m))
def ckpt(n):
    d = os.path.join(run, n, "ckpt", "latest")
    return os.path.islink(d) and json.load(open(os.path.join(d, "state.json")))["round"] == 8
ok("checkpoints", all(ckpt(n) for n in m))
ok("batches_I_plus_J", all(r["local_groups"] == 2 and r["external_groups"] == 2
                           for n in ("n0", "n1") for r in m[n][2:]) and len(m["n0"]) == 8)
ok("never_own_external", all(n not in r["external_from"] for n in m for r in m[n]))
ok("j0_uses_nothing_external", len(m["n2"]) == 8 and all(r["external_groups"] == 0 and r["local_groups"] == 4 for r in m["n2"]))
evil = [r["external_reward_from"]["evil"] for n in ("n0", "n1") for r in m[n] if "evil" in r["external_reward_from"]]
ok("forged_rewards_rescored", len(evil) > 0 and all(x < 0.01 for x in evil))
PY
cat "$tmp/verdicts"
grep -q FAIL "$tmp/verdicts" && { echo "--- swarm logs"; tail -n 20 "$tmp/swarm"/n*/node.log; }

echo "swarm part: $SECONDS s"
# 2. one node by hand: kill a generator, then the learner
redis_port=$(grep -o '[0-9]*$' <<< "$port")
redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no > /dev/null 2>&1 &
pids+=($!)
export SAPO_NODE=k0 SAPO_RUN=$tmp/k0 SAPO_BROKER=$tmp/k0 SAPO_REDIS=$port SAPO_LOCAL_GROUPS=4 SAPO_EXTERNAL_GROUPS=0 SAPO_ROUNDS=10
mkdir -p "$tmp/k0"
start() { "$bin/$1" >> "$tmp/k0/$1$2.log" 2>&1 & pids+=($!); eval "pid_$1$2=$!"; }
metric_rounds() { [ -f "$tmp/k0/metrics.jsonl" ] && wc -l < "$tmp/k0/metrics.jsonl" || echo 0; }
wait_rounds() { for _ in $(seq 600); do [ "$(metric_rounds)" -ge "$1" ] && return 0; sleep 0.2; done; return 1; }
start broker ""; start learner ""; start sampler ""; start verifier ""; start generator 1; start generator 2
# an evaluator started after round 0 (the learner held still meanwhile)
# scores round 0 first, from the learner's version 0
wait_rounds 1
kill -STOP "$pid_learner"
"$bin/evaluate" 100 1 >> "$tmp/k0/evaluate.log" 2>&1 &
pids+=($!)
for _ in $(seq 300); do [ -s "$tmp/k0/eval.jsonl" ] && break; sleep 0.2; done
kill -CONT "$pid_learner"
check evaluator_late_scores_round_0 'grep -q "\"round\":0," <(head -1 "$tmp/k0/eval.jsonl") && grep -q "round 0 first" "$tmp/k0/evaluate.log" ||
  { cat "$tmp/k0/evaluate.log"; false; }'
wait_rounds 2
kill -9 "$pid_generator1"; wait "$pid_generator1" 2> /dev/null
check generator_killed_node_continues 'wait_rounds 5'
kill -9 "$pid_learner"; wait "$pid_learner" 2> /dev/null
# read after the kill: the learner may checkpoint until its last moment
ckpt_round=$(python3 -c "import json;print(json.load(open('$tmp/k0/ckpt/latest/state.json'))['round'])" 2> /dev/null || echo none)
lines_at_kill=$(metric_rounds)
start learner ""
check learner_resumes_from_checkpoint 'sleep 1; for _ in $(seq 100); do grep -q "at round $ckpt_round," "$tmp/k0/learner.log" && break; sleep 0.2; done; grep -q "ckpt/r0*$ckpt_round at round $ckpt_round," "$tmp/k0/learner.log"'
for _ in $(seq 900); do kill -0 "$pid_learner" 2> /dev/null || break; sleep 0.2; done
check learner_finishes_rounds 'python3 -c "
import json; rs=[json.loads(l)[\"round\"] for l in open(\"$tmp/k0/metrics.jsonl\")][$lines_at_kill:]
print(\"rounds after the restart:\", rs)
assert rs and rs[0] > $ckpt_round and rs[-1] >= 10 and all(b > a for a, b in zip(rs, rs[1:]))"'
echo "node test: $SECONDS s"
