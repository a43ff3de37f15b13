#!/usr/bin/env bash
# Hostile peers against a training swarm: 2 honest nodes (I/J 2/6, micro
# model, real redis-server) train while bin/pool publishes bad records of
# every kind bin/hostile makes (SAPO_HOSTILE_COUNT in all, default 100,000:
# about 40 s on 2 idle cores; half before the first round, half during)
# under one evil node id per kind, each signed with that evil node's own
# registered key (so they reach the checks past the signature), except the
# unsigned ones (no key registered, or shorter than a signature) and
# wrong_key (signed by a key that is not the one registered); impostor
# records name the honest node n0 but are published under their own id.
# Checks: no process dies or reports a sanitizer error, every round is
# trained, no refused kind ever reaches a training batch, forged rewards
# that are drawn are re-scored to 0, and the sampler's metrics count every
# refusal reason.
set -u
cd "$(dirname "$0")/.."
bin=${SAPO_BIN:-build/asan/bin}
# the flood is about 1 GB of files: on a disk mounted with discard,
# deleting it once written back took over 3 minutes, so it goes to memory
# (/dev/shm) where that has 2 GB free
if [ "$(df --output=avail -k /dev/shm 2> /dev/null | tail -n 1)" -gt 2000000 ] 2> /dev/null; then
  tmp=$(mktemp -d -p /dev/shm)
else
  tmp=$(mktemp -d)
fi
. tests/nodes.sh
need hostile broker learner sampler generator verifier pool hostile redis-server redis-cli foreman python3
cleanup() {
  [ -n "${flood:-}" ] && kill "$flood" 2> /dev/null && wait "$flood" 2> /dev/null
  [ -f "$tmp/swarm/pids" ] && scripts/swarm.sh stop --run "$tmp/swarm" > /dev/null
  [ -n "$redis_pid" ] && kill "$redis_pid" 2> /dev/null && wait "$redis_pid" 2> /dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
export SAPO_BIN=$bin
total=${SAPO_HOSTILE_COUNT:-100000}
rounds=${SAPO_HOSTILE_ROUNDS:-12}

micro_model hostile
export SAPO_MODEL=$tmp/micro SAPO_QUESTIONS=4 SAPO_COMPLETIONS=4 SAPO_MAX_NEW_TOKENS=12 SAPO_SHARE=all SAPO_LOCAL_FILTER=all \
       SAPO_EXTERNAL_FILTER=all SAPO_CHECKPOINT_EVERY=4 SAPO_SWARM=h$$ SAPO_MAX_RECORD=32768 SAPO_MAX_TEXT=4096

# the bad records: oversized ones are 40 kB each, so fewer of them; the
# rest split evenly over the other kinds
kinds="random truncated long_text bad_utf8 unknown_family bad_metadata wrong_size bad_node wrong_type unsigned wrong_key
       impostor forged duplicate"
nkinds=$(wc -w <<< "$kinds")
each=$((total / (nkinds + 1) + 1))
big=$((total - each * nkinds)); [ $big -lt 1 ] && big=1; [ $big -gt 2000 ] && big=2000
each=$(((total - big) / nkinds))
mkdir -p "$tmp/bad" "$tmp/keys"
made=0
"$bin/hostile" --kind oversized --count $big --completions 4 --big 40000 --out "$tmp/bad" && made=$((made + big))
for k in $kinds; do
  "$bin/hostile" --kind $k --count $each --completions 4 --seed $RANDOM --text 5000 --out "$tmp/bad" && made=$((made + each))
done
echo "hostile: $made bad records made ($SECONDS s)"

# the pool first, so half the flood is in it before the nodes start
port=6700
while (exec 3<> /dev/tcp/127.0.0.1/$port) 2> /dev/null; do port=$((port + 1)); done
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no > "$tmp/redis.log" 2>&1 &
redis_pid=$!
for _ in $(seq 50); do redis-cli -p "$port" ping > /dev/null 2>&1 && break; sleep 0.1; done
redis=redis://127.0.0.1:$port
# the operator's bound on every node's entries: a hostile publisher's own bound is ignored
redis-cli -p "$port" SET "$SAPO_SWARM:max_per_node" 2000 > /dev/null
# wrong_key's id has a key, just not the one its entries are signed with
"$bin/pool" register --redis "$redis" --node evil-wrong_key --key "$tmp/keys/evil-wrong_key.key"
publish() {
  local sign
  for k in oversized $kinds; do
    case $k in unsigned | wrong_key) sign=() ;; *) sign=(--key "$tmp/keys/evil-$k.key") ;; esac
    (cd "$tmp/bad" && ls | grep "^$k-") | sed -n "$1" | sed "s|^|$tmp/bad/|" |
      xargs -n 2000 "$bin/pool" publish --redis "$redis" --node "evil-$k" "${sign[@]}"
  done
}
# half the flood is in the pool before the first round (every kind: when
# the nodes drew while it went in, kind after kind, faster rounds drew none
# of the later kinds), half arrives during training
half=$((made / 2))
publish "1~2p" 2>> "$tmp/publish.err"
echo "hostile: first half published ($SECONDS s)"
scripts/swarm.sh start --nodes 2 --ij 2/6 --rounds "$rounds" --run "$tmp/swarm" --redis "$redis" > "$tmp/swarm.log" 2>&1
publish "2~2p" 2>> "$tmp/publish.err" &
flood=$!
scripts/swarm.sh wait --run "$tmp/swarm" --timeout 600
wait "$flood"; flood=
sizes=$(for k in oversized $kinds; do echo "$k $("$bin/pool" size --redis "$redis" --node evil-$k 2> /dev/null || echo -1)"; done)
scripts/swarm.sh stop --run "$tmp/swarm" > /dev/null
echo "hostile: swarm done ($SECONDS s)"
python3 - "$tmp/swarm" "$rounds" "$half" "$made" "$tmp/publish.err" <<'PY'
import json, sys, os, glob
run, rounds, half, made, perr = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
ok = lambda name, cond: print(("PASS" if cond else "FAIL") + " hostile_" + name)
m = {}
for n in ("n0", "n1"):
    p = os.path.join(run, n, "metrics.jsonl")
    m[n] = [json.loads(l) for l in open(p)] if os.path.exists(p) else []
ok("publish_accepted", os.path.getsize(perr) == 0 or print(open(perr).read()[:2000]))
ok("rounds_trained", all([r["round"] for r in m[n]] == list(range(1, rounds + 1)) for n in m))
# forged and duplicate records are well formed, and so is a truncated one
# whose cut fell in the builder's trailing padding: those may be trained on.
# An impostor group that got through would show up as n0's in n1's batches:
# node_mismatch counts them refused, and test_screen checks the reason itself
allowed = {"n0", "n1", "evil-forged", "evil-duplicate", "evil-truncated"}
seen = {k for n in m for r in m[n] for k in r["external_from"]}
ok("no_refused_record_trained", seen <= allowed or print("external from", seen))
forged = [r["external_reward_from"]["evil-forged"] for n in m for r in m[n] if "evil-forged" in r["external_reward_from"]]
# claimed 1.0; the local verifier gives wrong answers 0 (0.01 in families
# that credit any answer). Which kinds a run draws is chance: t_node.sh
# checks forged rewards on a pool where they are sure to be drawn.
print("  rounds that trained on forged groups:", len(forged))
ok("forged_rewards_rescored", all(x < 0.5 for x in forged) or print("  forged rewards:", forged))
screen = {}
for n in m:
    if m[n]:
        for k, v in m[n][-1]["sampler"]["screen"].items(): screen[k] = screen.get(k, 0) + v
print("  screened by the two samplers:", json.dumps(screen))
# duplicates need the same content drawn twice within the window, which a
# run may not do: test_screen checks that reason directly
want = ["too_large", "malformed", "bad_node", "wrong_size", "text_too_long", "bad_utf8", "unknown_family",
        "bad_metadata", "unsigned", "bad_signature", "node_mismatch"]
print("  records drawn:", sum(v for v in screen.values()))
ok("every_reason_counted", all(screen.get(k, 0) > 0 for k in want) or print("  reasons never counted:", [k for k in want if not screen.get(k)]))
logs = "".join(open(f, errors="replace").read() for f in glob.glob(os.path.join(run, "*", "node.log")))
ok("no_sanitizer_error", "Sanitizer" not in logs and "runtime error" not in logs)
PY
echo "  pool entries per evil node:" $(echo "$sizes" | tr '\n' ' ')
if awk '$2 < 0 || $2 > 2000 {bad=1} END {exit bad}' <<< "$sizes"; then echo "PASS hostile_pool_bound"; else echo "FAIL hostile_pool_bound"; fi
echo "hostile test: $SECONDS s"
