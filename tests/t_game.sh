#!/usr/bin/env bash
# The three-stage game (SAPO_GAME=three-stage) end to end with real
# processes, a real redis-server and a small random model:
#   - 3 nodes play 2 rounds through the swarm script: each round is three
#     batches, answer, critique and resolve, each of its stage's family and
#     of all the round's questions, and the learner stops after the
#     rounds' 6 batches;
#   - the nodes publish their answer and critique outputs and read each
#     other's: some node's critique shows a peer, and no peer's output is
#     refused;
#   - a stage output planted under a node without a key (garbage, with no
#     signature) is refused, counted, and logged by its node's name;
#   - game-wait: two nodes that wait for each other's outputs see each
#     other at every stage from round 2 on; a peer that never
#     plays holds a stage for the bound only;
#   - game_report on hand-made metrics and evaluations: stage rewards,
#     peers shown and answer length per game round, and relative regret
#     worked by hand;
#   - a node on a random Qwen-shaped model with the real Qwen tokenizer
#     plays a round: its three stages reach the learner.
set -u
cd "$(dirname "$0")/.."
bin=${SAPO_BIN:-build/asan/bin}
. tests/nodes.sh
need game broker learner sampler generator verifier redis-server redis-cli foreman python3
tmp=$(mktemp -d)
cleanup() {
  for r in swarm q w60 w3; do [ -f "$tmp/$r/pids" ] && scripts/swarm.sh stop --run "$tmp/$r" > /dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
export SAPO_BIN=$bin
micro_model game
export SAPO_MODEL=$tmp/micro SAPO_QUESTIONS=3 SAPO_COMPLETIONS=4 SAPO_MAX_NEW_TOKENS=12 SAPO_GAME=three-stage SAPO_SWARM=g$$

scripts/swarm.sh start --nodes 3 --rounds 2 --run "$tmp/swarm" > "$tmp/swarm.log" 2>&1
port=$(grep -o 'redis://127.0.0.1:[0-9]*' "$tmp/swarm.log" | head -1 | grep -o '[0-9]*$')
# the planted outputs: a node in the swarm's set with no key, its answer
# outputs of both rounds bytes that are no signed record
redis-cli -p "$port" SADD "g$$:nodes" evil > /dev/null
for r in 1 2; do redis-cli -p "$port" SET "g$$:n:evil:stage:$r:1" "not a record" > /dev/null; done
scripts/swarm.sh wait --run "$tmp/swarm" --timeout 300
scripts/swarm.sh stop --run "$tmp/swarm" > /dev/null
python3 - "$tmp/swarm" > "$tmp/verdicts" <<'PY'
import json, os, sys
run = sys.argv[1]
def rows(n):
    p = os.path.join(run, n, "metrics.jsonl")
    return [json.loads(l) for l in open(p)] if os.path.exists(p) else []
m = {n: rows(n) for n in ("n0", "n1", "n2")}
ok = lambda name, cond: print(("PASS" if cond else "FAIL") + " game_" + name)
stages = ["answer", "critique", "resolve"]
def staged(r):
    g = r["sampler"].get("game", {})
    b = r["round"]
    return (g.get("round") == (b - 1) // 3 + 1 and g.get("stage") == stages[(b - 1) % 3] and
            list(r["family_count"]) == ["game_" + stages[(b - 1) % 3]] and r["local_groups"] == 3 and
            r["external_groups"] == 0)
ok("three_batches_a_round", all([r["round"] for r in m[n]] == list(range(1, 7)) and all(staged(r) for r in m[n])
                                for n in m))
ok("peers_shown", any(r["sampler"]["game"]["peers"] > 0 for n in m for r in m[n] if r["sampler"]["game"]["stage"] != "answer"))
ok("outputs_published", all(m[n][-1]["sampler"]["game"]["outputs_published"] >= 3 for n in m))
logs = {n: open(os.path.join(run, n, "node.log"), errors="replace").read() for n in m}
ok("planted_output_refused", all(m[n][-1]["sampler"]["game"]["outputs_rejected"] >= 1 and
                                 "dropped evil's answer output" in logs[n] for n in m))
ok("no_peer_refused", all(not any("dropped %s's" % p in logs[n] for p in m) for n in m))
PY
cat "$tmp/verdicts"
grep -q FAIL "$tmp/verdicts" && { echo "--- swarm logs"; tail -n 20 "$tmp/swarm"/n*/node.log; }

# game-wait: two nodes whose stages wait up to 60 s for the other's output
# see it at every stage from round 2 on (in round 1 a node ahead may not
# know of its peer yet: a node is known once it has published); without
# the wait, whichever node reaches a stage first sees none. Then a peer that never plays (evil
# in the pool's set of nodes) holds each stage for the bound (3 s) alone.
for w in 60 3; do
  SAPO_GAME_WAIT=$w SAPO_SWARM=w$w$$ scripts/swarm.sh start --nodes 2 --rounds $((w == 60 ? 3 : 1)) --run "$tmp/w$w" \
    > "$tmp/w$w.log" 2>&1
  [ "$w" = 3 ] && redis-cli -p "$(grep -o 'redis://127.0.0.1:[0-9]*' "$tmp/w$w.log" | head -1 | grep -o '[0-9]*$')" \
    SADD "w$w$$:nodes" evil > /dev/null
  scripts/swarm.sh wait --run "$tmp/w$w" --timeout 300
  scripts/swarm.sh stop --run "$tmp/w$w" > /dev/null
done
python3 - "$tmp" <<'PY'
import json, os, sys
ok = lambda name, cond: print(("PASS" if cond else "FAIL") + " game_" + name)
def games(run):
    m = {}
    for n in ("n0", "n1"):
        p = os.path.join(run, n, "metrics.jsonl")
        m[n] = [json.loads(l)["sampler"]["game"] for l in open(p)] if os.path.exists(p) else []
    return m
m = games(sys.argv[1] + "/w60")
later = [g for n in m for g in m[n] if g["stage"] != "answer" and g["round"] > 1]
ok("wait_for_peers", all(len(m[n]) == 9 for n in m) and len(later) == 8 and
   all(g["peers"] == 1 and g["waited_seconds"] < 60 for g in later))
m = games(sys.argv[1] + "/w3")
shown = [g for n in m for g in m[n] if g["stage"] != "answer"]
ok("wait_bounded", all(len(m[n]) == 3 for n in m) and len(shown) == 4 and
   all(g["peers"] == 1 and 3 <= g["waited_seconds"] < 6 for g in shown))
PY

# game_report: swarm n0 and n1, solo n0; two rounds (six batches), pass@1
# at rounds 0 and 2: n0 0.5 0.8, n1 0.5 0.4, solo 0.25 0.6. Best 0.5, 0.8:
# pointwise regret n0 0 0, n1 0 0.5, solo 0.5 0.25; averaged at round 2:
# 0, 0.25, 0.375. Peers shown: n0 1 at critique and 2 at resolve in round
# 1, one more of each in round 2; the others 0, then 1
mkdir -p "$tmp/r/swarm/n0" "$tmp/r/swarm/n1" "$tmp/r/solo/n0"
python3 - "$tmp/r" <<'PY'
import json, sys
r = sys.argv[1]
fams = ["game_answer", "game_critique", "game_resolve"]
def node(path, base, passes, peers=0):
    with open(path + "/metrics.jsonl", "w") as f:
        for b in range(1, 7):
            st = (b - 1) % 3
            f.write(json.dumps({"round": b, "reward_mean": base + st / 10 + b / 100, "completion_length": 10 + b,
                                "sampler": {"game": {"round": (b - 1) // 3 + 1, "stage": ["answer", "critique", "resolve"][st],
                                                     "peers": peers * st + (b > 3)}},
                                "family_reward": {fams[st]: 0}}) + "\n")
    with open(path + "/eval.jsonl", "w") as f:
        for rd, p in zip((0, 2), passes):
            f.write(json.dumps({"round": rd, "pass1": p}) + "\n")
node(r + "/swarm/n0", 0.1, (0.5, 0.8), 1)
node(r + "/swarm/n1", 0.2, (0.5, 0.4))
node(r + "/solo/n0", 0.3, (0.25, 0.6))
PY
"$bin/game_report" "$tmp/r/swarm" "$tmp/r/solo" > "$tmp/r/out" 2>&1
python3 - "$tmp/r" <<'PY'
import sys
r = sys.argv[1]
ok = lambda name, cond: print(("PASS" if cond else "FAIL") + " game_" + name)
rows = [list(map(float, l.split())) for l in open(r + "/swarm/game/regret.dat") if not l.startswith("#")]
want = [[0, .5, 0, 0, .5, 0, 0, .25, .5, .5], [2, .8, 0, 0, .4, .5, .25, .6, .25, .375]]
ok("report_regret", len(rows) == 2 and all(abs(a - b) < 1e-6 for x, y in zip(rows, want) for a, b in zip(x, y)))
# swarm/n0: round 1's stages 0.11 0.22 0.33, round 2's 0.14 0.25 0.36; answer length 11 and 14
n0 = [list(map(float, l.split())) for l in open(r + "/swarm/game/node0.dat") if not l.startswith("#")]
ok("report_stages", len(n0) == 2 and all(abs(a - b) < 1e-6 for a, b in zip(n0[0] + n0[1], [1, .11, .22, .33, 11, 2, .14, .25, .36, 14])))
out = open(r + "/out").read()
ok("report_summary", "| solo/n0 | 2 |" in out and "0.3750 |" in out)
# peers shown, mean over the two rounds: n0 1.5 at critique, 2.5 at resolve
ok("report_peers", "| 1.50, 2.50 |" in out and "| 0.50, 0.50 |" in out)
PY
"$bin/game_report" "$tmp/r/swarm" > /dev/null 2>&1; [ $? -eq 2 ] && echo "PASS game_report_usage" || echo "FAIL game_report_usage"

# a Qwen-shaped checkpoint: ChatML prompts, the real tokenizer, one round
tok=tests/golden/tokenizer/qwen/tokenizer.json
if [ ! -f "$tok" ]; then
  echo "SKIP game_qwen: $tok missing (make test unpacks it)"
  exit 0
fi
cat > "$tmp/qwen.json" <<'JSON'
{"model_type": "qwen2", "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
 "num_key_value_heads": 1, "intermediate_size": 32, "vocab_size": 151936, "rope_theta": 10000.0,
 "rms_norm_eps": 1e-6, "tie_word_embeddings": true, "max_position_embeddings": 4096, "eos_token_id": 151645}
JSON
"$bin/learner" init "$tmp/qwen.json" "$tmp/qwen" > "$tmp/qinit.log" 2>&1 && ln -s "$PWD/$tok" "$tmp/qwen/tokenizer.json"
SAPO_MODEL=$tmp/qwen SAPO_QUESTIONS=2 SAPO_COMPLETIONS=2 SAPO_MAX_NEW_TOKENS=6 SAPO_SWARM=q$$ \
  scripts/swarm.sh start --nodes 1 --rounds 1 --run "$tmp/q" > "$tmp/q.log" 2>&1
scripts/swarm.sh wait --run "$tmp/q" --timeout 300
scripts/swarm.sh stop --run "$tmp/q" > /dev/null
fams=$(grep -o '"family_count":{"[a-z_]*"' "$tmp/q/n0/metrics.jsonl" 2> /dev/null | cut -d'"' -f4 | tr '\n' ' ')
if [ "$fams" = "game_answer game_critique game_resolve " ]; then echo "PASS game_qwen"
else echo "FAIL game_qwen: stages trained: '$fams'"; tail -n 20 "$tmp/q/n0/node.log"; fi
exit 0
