#!/usr/bin/env bash
# A node run the way the README runs one (foreman, through scripts/swarm.sh)
# survives its own crashes: SIGKILL of its learner, then of a generator,
# then of its sampler. Each process is restarted by scripts/keep.sh with one
# line naming it and the signal, the node's other processes keep their pids
# (they kept serving). Nothing is lost: the batches the learner applied
# after its last checkpoint come back from the broker and are trained again
# (its log says so), and the metrics hold every round once, in order, with
# no round or version lost or skipped.
# Then `swarm.sh restart --node n0` stops the node and
# starts it again as it was started, and the node still finishes every
# round; `swarm.sh stop` ends a Redis restarted by hand on the swarm's
# port. Then keep.sh
# alone: a crash loop gives up after SAPO_RESTARTS restarts in 60 s, and a
# SIGTERM to keep ends the process it runs.
set -u
cd "$(dirname "$0")/.."
bin=${SAPO_BIN:-build/asan/bin}
tmp=$(mktemp -d)
. tests/nodes.sh
need restart broker learner sampler generator verifier redis-server foreman python3
cleanup() {
  [ -f "$tmp/swarm/pids" ] && scripts/swarm.sh stop --run "$tmp/swarm" > /dev/null 2>&1
  nodes_cleanup
}
trap cleanup EXIT
check() { if eval "$2"; then echo "PASS restart_$1"; else echo "FAIL restart_$1"; fi; }
export SAPO_BIN=$bin
micro_model restart
rounds=40
export SAPO_MODEL=$tmp/micro SAPO_QUESTIONS=4 SAPO_COMPLETIONS=4 SAPO_MAX_NEW_TOKENS=12 SAPO_LOCAL_FILTER=all \
       SAPO_CHECKPOINT_EVERY=4 SAPO_SWARM=r$$

scripts/swarm.sh start --nodes 1 --ij 4/0 --rounds $rounds --run "$tmp/swarm" > "$tmp/swarm.log" 2>&1
log=$tmp/swarm/n0/node.log
metrics=$tmp/swarm/n0/metrics.jsonl
rows() { [ -f "$metrics" ] && wc -l < "$metrics" || echo 0; }
wait_rows() { for _ in $(seq 900); do [ "$(rows)" -ge "$1" ] && return 0; sleep 0.2; done; return 1; }
# the pid of process P of this node (the child of its keep.sh)
proc() {
  local k
  for k in $(pgrep -f "scripts/keep.sh $1 $bin/$1"); do
    tr '\0' '\n' < "/proc/$k/environ" 2> /dev/null | grep -qx "SAPO_RUN=$tmp/swarm/n0" || continue
    pgrep -P "$k" -x "$1" | head -1
    return
  done
}
others() { for p in broker verifier; do proc $p; done | tr '\n' ' '; }

# round 5 or a little after: past the checkpoint of round 4
wait_rows 5
before=$(others)
kill -9 "$(proc learner)"
check learner_restarted 'for _ in $(seq 100); do grep -q "keep: learner was killed by signal 9 (KILL); restarting it" "$log" && break; sleep 0.2; done; grep -q "keep: learner was killed by signal 9" "$log"'
at=$(rows)
check learner_trains_again "wait_rows $((at + 3))"
kill -9 "$(proc generator)"
check generator_restarted 'for _ in $(seq 100); do grep -q "keep: generator was killed by signal 9" "$log" && break; sleep 0.2; done; grep -q "keep: generator was killed by signal 9" "$log"'
at=$(rows)
kill -9 "$(proc sampler)"
check sampler_restarted 'for _ in $(seq 100); do grep -q "keep: sampler was killed by signal 9" "$log" && break; sleep 0.2; done; grep -q "keep: sampler was killed by signal 9" "$log"'
check others_kept_serving '[ "$(others)" = "$before" ] && [ -n "${before// /}" ]'
at=$(rows)
old_runner=$(awk '$1 == "node" && $3 == "n0" {print $2}' "$tmp/swarm/pids")
scripts/swarm.sh restart --node n0 --run "$tmp/swarm" >> "$tmp/swarm.log" 2>&1
new_runner=$(awk '$1 == "node" && $3 == "n0" {print $2}' "$tmp/swarm/pids")
check node_restarted '[ -n "$new_runner" ] && [ "$new_runner" != "$old_runner" ] && ! kill -0 "$old_runner" 2> /dev/null && kill -0 "$new_runner"'
check node_trains_after_restart "wait_rows $((at + 2))"
# the learner ends the node once it has trained every round
scripts/swarm.sh wait --run "$tmp/swarm" --timeout 300
check node_finishes_every_round "python3 -c \"
import json; rs=[json.loads(l)['round'] for l in open('$metrics')]
assert rs[-1] == $rounds, rs[-5:]\""
check nothing_lost "python3 -c \"
import json; rs=[json.loads(l) for l in open('$metrics')]
assert [r['round'] for r in rs] == list(range(1, $rounds + 1)), [r['round'] for r in rs]
assert [r['policy_version'] for r in rs] == list(range(1, $rounds + 1)), [r['policy_version'] for r in rs]
assert not [r for r in rs if 'rounds_lost' in r or 'versions_lost' in r or 'rounds_skipped' in r]\""
again=$(grep -o "rounds [0-9]*\.\.[0-9]* were trained after the checkpoint; training them again" "$log" | head -1)
last=$(sed 's/rounds [0-9]*\.\.\([0-9]*\) .*/\1/' <<< "$again")
echo "  learner restart: ${again:-the kill came at a checkpoint}"
check batches_trained_again '[ -z "$again" ] || grep -q "round $last trained again from its batch" "$log"'
check no_sanitizer_report '! grep -q "ERROR: AddressSanitizer\|runtime error" "$log"'
# Redis killed and started again by hand on the swarm's port: stop ends it too
port=$(awk '$1 == "redis" {print $3}' "$tmp/swarm/pids")
kill -9 "$(awk '$1 == "redis" {print $2}' "$tmp/swarm/pids")"
sleep 0.3
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no > /dev/null 2>&1 &
redis_pid=$!
for _ in $(seq 50); do redis-cli -p "$port" ping > /dev/null 2>&1 && break; sleep 0.1; done
scripts/swarm.sh stop --run "$tmp/swarm" > /dev/null
check stop_ends_redis_restarted_by_hand 'for _ in $(seq 50); do kill -0 "$redis_pid" 2> /dev/null || break; sleep 0.1; done; ! kill -0 "$redis_pid" 2> /dev/null'

# keep.sh alone: a crash loop, and SIGTERM
out=$(SAPO_RESTARTS=2 scripts/keep.sh crasher sh -c 'exit 3' 2>&1)
rc=$?
check crash_loop_gives_up '[ $rc = 3 ] && [ "$(grep -c "restarting it" <<< "$out")" = 2 ] && grep -q "restarted 2 times in 60 s, giving up" <<< "$out"'
scripts/keep.sh sleeper sleep 300 2> "$tmp/keep.log" &
keep=$!
sleep 0.5
child=$(pgrep -P "$keep" -x sleep)
kill -TERM "$keep"
check term_ends_the_process 'for _ in $(seq 50); do kill -0 "$keep" 2> /dev/null || break; sleep 0.1; done; ! kill -0 "$keep" 2> /dev/null && [ -n "$child" ] && ! kill -0 "$child" 2> /dev/null && ! grep -q restarting "$tmp/keep.log"'
echo "restart test: $SECONDS s"
