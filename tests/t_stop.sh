#!/usr/bin/env bash
# How a node starts and stops, through scripts/swarm.sh with real
# processes and a micro random model:
#   - start refuses a node whose base or model folder is missing (the tiny
#     model's base, a folder without config.json, a file that is not
#     there, a fetched model's name never fetched): one line naming it and
#     the command that makes it, a non-zero status, and no process started;
#   - a node stopped each way, by the end of its rounds, by `swarm.sh stop`
#     and by its learner's keeper giving up, closes every socket: node.log
#     holds no CZMQ line about a "dangling" socket, and each of the node's
#     other processes says it stopped.
set -u
cd "$(dirname "$0")/.."
bin=${SAPO_BIN:-build/asan/bin}
. tests/nodes.sh
need stop broker learner sampler generator verifier redis-server redis-cli foreman
tmp=$(mktemp -d)
# every swarm started here, a refused one included where start did not refuse it
cleanup() {
  local r
  for r in "$tmp"/*/; do [ -f "$r/pids" ] && scripts/swarm.sh stop --run "$r" > /dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
check() { if eval "$2"; then echo "PASS stop_$1"; else echo "FAIL stop_$1"; fi; }
export SAPO_BIN=$bin SAPO_SWARM=t$$ SAPO_QUESTIONS=4 SAPO_COMPLETIONS=2 SAPO_MAX_NEW_TOKENS=8

# 1. start's checks: nothing may run after a refusal
micro_model stop
redis_before=$(pgrep -c -x redis-server)
refused() { # name, expected line (a pattern), swarm.sh start flags...
  local name=$1 want=$2
  shift 2
  scripts/swarm.sh start --run "$tmp/refused-$name" "$@" > "$tmp/$name.out" 2>&1
  local rc=$?
  check "refuses_$name" '[ $rc != 0 ] && [ "$(wc -l < "$tmp/$name.out")" = 1 ] && grep -q -- "$want" "$tmp/$name.out" &&
    [ ! -e "$tmp/refused-$name" ] || { echo "status $rc:"; cat "$tmp/$name.out"; false; }'
}
SAPO_BASE=$tmp/nobase refused tiny_base "base model $tmp/nobase: no such folder or file; make it with: SAPO_BASE=$tmp/nobase $bin/learner warmstart"
mkdir "$tmp/empty"
refused model_folder "model $tmp/empty: no config.json in the folder" --models "$tmp/empty"
refused second_node "node n1: model $tmp/none.gguf: no such folder or file" --nodes 2 --models "$tmp/micro,$tmp/none.gguf"
SAPO_MODEL_CACHE=$tmp/cache refused not_fetched "fetch it with: scripts/model.sh get smollm2-135m" --models smollm2-135m
check refusals_start_nothing '! pgrep -f -- "$tmp/refused"'

# 2. a node stopped three ways, all at once: the end of its rounds, swarm.sh
# stop once it trains, and a learner that cannot open its model (a folder
# whose weights are cut short), which its keeper gives up on at once
mkdir "$tmp/broken"
cp "$tmp/micro/config.json" "$tmp/broken/"
head -c 100 "$tmp/micro/model.safetensors" > "$tmp/broken/model.safetensors"
SAPO_MODEL=$tmp/micro scripts/swarm.sh start --nodes 1 --ij 2/0 --rounds 2 --run "$tmp/end" --wait > "$tmp/end.out" 2>&1 &
end_pid=$!
SAPO_MODEL=$tmp/broken SAPO_RESTARTS=0 scripts/swarm.sh start --nodes 1 --ij 2/0 --run "$tmp/gaveup" --wait > "$tmp/gaveup.out" 2>&1 &
gaveup_pid=$!
SAPO_MODEL=$tmp/micro scripts/swarm.sh start --nodes 1 --ij 2/0 --run "$tmp/stop" > "$tmp/stop.out" 2>&1
for _ in $(seq 600); do [ "$(rows stop/n0)" -ge 1 ] && break; sleep 0.2; done
scripts/swarm.sh stop --run "$tmp/stop" > /dev/null
wait "$end_pid" "$gaveup_pid"

# each process but the one named ($2) logged its last line
stopped_all() {
  local p
  for p in broker sampler generator verifier learner; do
    [ "$p" = "${2:-}" ] && continue
    grep -q "$p\[n0\] stop" "$1" || { echo "$1: no stop line from the $p"; return 1; }
  done
}
clean() { ! grep -n "dangling" "$1"; }
log=$tmp/end/n0/node.log
check normal_end_clean '[ "$(rows end/n0)" = 2 ] && stopped_all "$log" && clean "$log" || { tail -n 30 "$log"; false; }'
log=$tmp/stop/n0/node.log
check swarm_stop_clean '[ "$(rows stop/n0)" -ge 1 ] && stopped_all "$log" && clean "$log" || { tail -n 30 "$log"; false; }'
log=$tmp/gaveup/n0/node.log
check learner_gave_up_clean 'grep -q "keep: learner exited with status 1; it was restarted 0 times in 60 s, giving up" "$log" &&
  stopped_all "$log" learner && clean "$log" || { tail -n 30 "$log"; false; }'
