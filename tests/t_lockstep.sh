#!/usr/bin/env bash
# Lockstep (--lockstep 1), the common random numbers of a study: one node
# with the micro model, real processes and a real redis-server, 4 rounds,
# every group it makes published (SAPO_SHARE=all, no pool window) and read
# back from the pool:
#   - a round's groups are sampled by the policy of the round before
#     (version = round - 1), and the learner trains nothing older;
#   - its questions are the round's own places in the question sequence
#     (task_id = round x 2^20 + k);
#   - run twice, the node makes the same groups (questions and completions)
#     and the same training steps;
#   - at I = 2 it meets, in each round, the first two questions it meets at
#     I = 4, and in round 1 (the same base policy) the same completions;
#   - a node at 2/2 alone in its pool (always dry) fills each batch with
#     local groups, the round's next questions, and does not stall.
# (Later rounds' completions are alike too here: a few steps at lr 1e-4
# barely move the random micro model, so that is not checked.)
set -u
cd "$(dirname "$0")/.."
bin=${SAPO_BIN:-build/asan/bin}
. tests/nodes.sh
need lockstep broker learner sampler generator verifier pool redis-server foreman python3
tmp=$(mktemp -d)
cleanup() {
  for r in a b c; do [ -f "$tmp/$r/pids" ] && scripts/swarm.sh stop --run "$tmp/$r" > /dev/null 2>&1; done
  nodes_cleanup
}
trap cleanup EXIT
export SAPO_BIN=$bin

micro_model lockstep
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no > /dev/null 2>&1 &
redis_pid=$!
for _ in $(seq 50); do redis-cli -p "$port" ping > /dev/null 2>&1 && break; sleep 0.1; done
# one question per decode batch: a batch's log-probs differ from a lone
# question's in the last digits (test_policy), and batches form by timing
export SAPO_MODEL=$tmp/micro SAPO_QUESTIONS=4 SAPO_COMPLETIONS=4 SAPO_MAX_NEW_TOKENS=12 SAPO_SHARE=all \
       SAPO_LOCAL_FILTER=all SAPO_POOL_WINDOW=0 SAPO_LOCKSTEP=1 SAPO_GENERATE_BATCH=1
# a: I = 4; b: the same again; c: I = 2. The same seed, a swarm name each.
# d: I = 2, J = 2, with no peer.
for r in a:4/0 b:4/0 c:2/0 d:2/2; do
  SAPO_SWARM=l$$${r%:*} timeout 120 scripts/swarm.sh start --nodes 1 --ij "${r#*:}" --rounds 4 --seed 3 \
    --redis "redis://127.0.0.1:$port" --run "$tmp/${r%:*}" --wait > "$tmp/${r%:*}.log" 2>&1 ||
    { tail -n 20 "$tmp/${r%:*}.log" "$tmp/${r%:*}"/n0/*.log; echo "FAIL lockstep_run_${r%:*}"; exit 1; }
  "$bin/pool" sample --redis "redis://127.0.0.1:$port" --swarm "l$$${r%:*}" --exclude nobody --window 1000 \
    --count 100 > "$tmp/${r%:*}.pool" 2> "$tmp/${r%:*}.pool.err"
done
python3 - "$tmp" <<'PY'
import json, sys
tmp = sys.argv[1]
def groups(r):
    out = {}
    for l in open("%s/%s.pool" % (tmp, r)):
        g = json.loads(l)
        # the node may sample round 5's questions before it stops
        if g.get("round", 0) <= 4: out[g["task"]["task_id"]] = g
    return out
def metrics(r):
    return [json.loads(l) for l in open("%s/%s/n0/metrics.jsonl" % (tmp, r))]
ok = lambda name, cond, why="": print(("PASS" if cond else "FAIL") + " lockstep_" + name + (" (%s)" % why if why else ""))
a, b, c, d = groups("a"), groups("b"), groups("c"), groups("d")
ma, mb = metrics("a"), metrics("b")
slot = 1 << 20
ok("all_rounds", len(ma) == 4 and len(mb) == 4 and len(metrics("c")) == 4,
   "%d, %d and %d groups in the pool" % (len(a), len(b), len(c)))
ok("sampled_by_the_round_before",
   len(a) == 16 and all(g.get("policy_version", 0) == g.get("round", 0) - 1 for g in a.values()) and
   all(m["local"]["age_versions_max"] == 0 for m in ma),
   "version, round of each group: %s" % sorted({(g.get("policy_version", 0), g.get("round", 0)) for g in a.values()}))
ok("questions_by_round", sorted(a) == [r * slot + k for r in range(1, 5) for k in range(4)] and
   all(t // slot == g["round"] for t, g in a.items()), "task ids %s" % sorted(a))
texts = lambda g: [x.get("text", "") for x in g["completions"]]
ok("repeats", sorted(a) == sorted(b) and all(texts(a[t]) == texts(b[t]) for t in a) and
   [(m["loss"], m["grad_norm"], m["entropy"]) for m in ma] == [(m["loss"], m["grad_norm"], m["entropy"]) for m in mb])
ok("common_questions", sorted(c) == [r * slot + k for r in range(1, 5) for k in range(2)] and
   all(c[t]["task"]["question"] == a[t]["task"]["question"] for t in c) and
   all(texts(c[t]) == texts(a[t]) for t in c if t // slot == 1))
md = metrics("d")
ok("dry_pool_filled_locally", len(md) == 4 and all(m["local_groups"] == 4 and m["external_groups"] == 0 for m in md) and
   sorted(d) == sorted(a), "%d rounds, task ids %s" % (len(md), sorted(d)))
PY
