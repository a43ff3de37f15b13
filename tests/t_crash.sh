#!/usr/bin/env bash
# Fault injection: 2 nodes (I/J 2/2, micro model, real redis-server) train
# SAPO_CRASH_ROUNDS rounds (default 30, a checkpoint every 3) while
# SAPO_CRASH_KILLS (default 8) random processes of random nodes get SIGKILL
# at random moments and are restarted at once, as foreman or a supervisor
# would. Invariants checked afterwards, per node:
#   - the learner finishes every round, and its last checkpoint is the last round;
#   - metrics rounds go up one at a time, except where a restarted learner
#     went back to its checkpoint and did not get back every batch it had
#     applied after it (the broker killed too: the line says rounds_lost)
#     or a batch went missing with a killed broker or came late
#     (rounds_skipped): round = previous + 1 - rounds_lost + rounds_skipped;
#   - the policy version goes up by one per line, back by rounds_lost (no
#     batch applied twice to one state);
#   - no leftover partial checkpoint is ever the latest, and no process
#     reports a sanitizer error.
set -u
cd "$(dirname "$0")/.."
bin=${SAPO_BIN:-build/asan/bin}
tmp=$(mktemp -d)
. tests/nodes.sh
trap nodes_cleanup EXIT
nodes_init crash
rounds=${SAPO_CRASH_ROUNDS:-30}
kills=${SAPO_CRASH_KILLS:-8}
port=6600
while (exec 3<> /dev/tcp/127.0.0.1/$port) 2> /dev/null; do port=$((port + 1)); done
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no > "$tmp/redis.log" 2>&1 &
redis_pid=$!
export SAPO_CHECKPOINT_EVERY=3 SAPO_SWARM=c$$ SAPO_REDIS=redis://127.0.0.1:$port SAPO_ROUNDS=$rounds SAPO_STALL_SECONDS=10
node_start a0 1
node_start a1 2
learner_done() { grep -q "stopping at round $rounds" "$tmp/$1/learner.log" 2> /dev/null; }

RANDOM=$$
for k in $(seq "$kills"); do
  sleep "$(python3 -c "import random; print(round(random.uniform(0.5, 3), 2))")"
  n=a$((RANDOM % 2))
  procs=(broker learner sampler verifier generator)
  p=${procs[$((RANDOM % 5))]}
  learner_done $n && p=generator
  pid=$(eval echo "\$pid_${n}_$p")
  kill -9 "$pid" 2> /dev/null
  wait "$pid" 2> /dev/null
  echo "  kill $k: $n $p at round $(rows $n)"
  node_proc $n $p
done
for _ in $(seq 1200); do learner_done a0 && learner_done a1 && break; sleep 0.25; done
python3 - "$tmp" "$rounds" <<'PY'
import json, os, sys
tmp, rounds = sys.argv[1], int(sys.argv[2])
ok = lambda name, cond: print(("PASS" if cond else "FAIL") + " crash_" + name)
finished, stepwise, versions, latest = True, True, True, True
lost_total = skipped_total = 0
for n in ("a0", "a1"):
    rs = [json.loads(l) for l in open(os.path.join(tmp, n, "metrics.jsonl"))]
    finished &= bool(rs) and rs[-1]["round"] == rounds
    prev, prev_v = 0, 0
    for r in rs:
        lost, skipped = r.get("rounds_lost", 0), r.get("rounds_skipped", 0)
        lost_total += lost
        skipped_total += skipped
        if r["round"] != prev + 1 - lost + skipped:
            stepwise = False
            print("  %s: round %d after %d (rounds_lost %d, rounds_skipped %d)" % (n, r["round"], prev, lost, skipped))
        if r["policy_version"] != prev_v + 1 - r.get("versions_lost", 0):
            versions = False
            print("  %s: version %d after %d at round %d (versions_lost %d)" % (n, r["policy_version"], prev_v, r["round"], r.get("versions_lost", 0)))
        prev, prev_v = r["round"], r["policy_version"]
    link = os.readlink(os.path.join(tmp, n, "ckpt", "latest"))
    state = json.load(open(os.path.join(tmp, n, "ckpt", link, "state.json")))
    latest &= not link.endswith(".part") and state["round"] == rounds
print("  rounds lost (applied, then not given back to a restarted learner): %d; rounds skipped (batches lost or late): %d" % (lost_total, skipped_total))
ok("every_round_trained", finished)
ok("rounds_stepwise_or_gap_recorded", stepwise)
ok("versions_stepwise", versions)
ok("last_checkpoint_complete", latest)
PY
if grep -l -E "Sanitizer|runtime error" "$tmp"/a*/*.log; then echo "FAIL crash_no_sanitizer_error"; else echo "PASS crash_no_sanitizer_error"; fi
echo "crash test: $SECONDS s"
