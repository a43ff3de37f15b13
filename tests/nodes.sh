# Helpers for shell tests that run nodes (sourced, not run):
#   need NAME PROG...  SKIP the test NAME unless the programs (in $bin or on PATH) are there
#   micro_model NAME   makes the micro model in $tmp/micro (2 layers, 64 wide, byte vocabulary)
#   nodes_init NAME    both, and exports the small-node settings for nodes run by hand
#   node_start N SEED  starts every process of node N (pids in pids[], pid_N_PROC); on
#                      host $node_host of tests/hosts.sh in $tmp/hosts where that is set
#   node_proc N PROC   (re)starts one process of node N
#   rows N             metrics lines node N has written
#   nodes_cleanup      SIGKILLs every process started here and $redis_pid, removes $tmp
#   all_alive          every process of pids[] still runs
#   shares_from_third N MIN  node N shared in every round from its third but one, MIN rounds at least
#   keeps_pace N T0 T1 node N's pace from T0 to T1 at least 0.8 of its pace before T0
#   nodes_cleanup_hosts  nodes_cleanup after removing the hosts of tests/hosts.sh in $tmp/hosts
#   master_of NODE     the port of the master of a cluster (tests/cluster.sh in
#                      $tmp/cluster) that holds NODE's keys of swarm $SAPO_SWARM
# The caller sets bin and tmp.
pids=()
redis_pid=
need() {
  local name=$1 p; shift
  for p in "$@"; do
    [ -x "$bin/$p" ] || command -v "$p" > /dev/null || { echo "SKIP $name: $p not built or installed"; exit 0; }
  done
}
micro_model() {
  cat > "$tmp/micro.json" <<'JSON'
{"model_type": "qwen2", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
 "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 264, "rope_theta": 10000.0,
 "rms_norm_eps": 1e-6, "tie_word_embeddings": true, "max_position_embeddings": 1024, "eos_token_id": 256}
JSON
  "$bin/learner" init "$tmp/micro.json" "$tmp/micro" 2> "$tmp/init.log" || { cat "$tmp/init.log"; echo "FAIL $1_init"; exit 1; }
}
nodes_cleanup() {
  for p in "${pids[@]}" $redis_pid; do kill -9 "$p" 2> /dev/null; done
  for p in "${pids[@]}" $redis_pid; do wait "$p" 2> /dev/null; done
  rm -rf "$tmp"
}
nodes_init() {
  need "$1" broker learner sampler generator verifier redis-server redis-cli python3
  micro_model "$1"
  export SAPO_MODEL=$tmp/micro SAPO_QUESTIONS=4 SAPO_COMPLETIONS=4 SAPO_MAX_NEW_TOKENS=12 SAPO_SHARE=all SAPO_LOCAL_FILTER=all SAPO_EXTERNAL_FILTER=all \
         SAPO_LOCAL_GROUPS=2 SAPO_EXTERNAL_GROUPS=2
}
node_proc() {
  SAPO_NODE=$1 SAPO_RUN=$tmp/$1 SAPO_BROKER=$tmp/$1 SAPO_SEED=$(cat "$tmp/$1/seed") ${node_host:+tests/hosts.sh run "$tmp/hosts" "$node_host"} \
    "$bin/$2" >> "$tmp/$1/$2.log" 2>&1 &
  pids+=($!)
  eval "pid_$1_$2=$!"
}
node_start() {
  mkdir -p "$tmp/$1"
  echo "$2" > "$tmp/$1/seed"
  for p in broker learner sampler verifier generator; do node_proc "$1" $p; done
}
rows() { [ -f "$tmp/$1/metrics.jsonl" ] && wc -l < "$tmp/$1/metrics.jsonl" || echo 0; }
# waits until nodes a0 and a1 have at least $1 more rounds than at the call
advance() {
  local a0 a1
  a0=$(rows a0) a1=$(rows a1)
  for _ in $(seq 900); do
    [ "$(rows a0)" -ge $((a0 + $1)) ] && [ "$(rows a1)" -ge $((a1 + $1)) ] && return 0
    sleep 0.2
  done
  return 1
}
# rounds of node $1 after row $2 that trained on another node's groups
shared_since() {
  python3 -c "
import json, sys
rs = [json.loads(l) for l in open('$tmp/$1/metrics.jsonl')][$2:]
print(sum(1 for r in rs if r['external_from']))"
}
# the outage lines node $1's sampler logged
outages() { grep -c "training on local groups" "$tmp/$1/sampler.log"; }
# the processes of pids[] all still running
all_alive() {
  local p
  for p in "${pids[@]}"; do kill -0 "$p" 2> /dev/null || return 1; done
}
# node $1 trained on another node's groups in every round from its third
# but at most one, and has at least $2 such rounds: nodes never wait for
# each other, so one that runs a round ahead (they start apart) can find
# nothing fresh once ([2, 2, 0, 2, ...] in a quiet make test); a client
# that lost the pool finds nothing in every round
shares_from_third() {
  python3 -c "
import json, sys
rs = [json.loads(l) for l in open('$tmp/$1/metrics.jsonl')][2:]
dry = sum(1 for r in rs if not (r['external_groups'] > 0 and r['external_from']))
print('  $1: %d rounds from the third, %d without another node\'s groups' % (len(rs), dry))
sys.exit(0 if len(rs) >= $2 and dry <= 1 else 1)"
}
# node $1's rounds a second between the times $2 and $3 (date +%s.%N) at
# least 0.8 of its pace before $2 (from its second round: the first
# waits for the model's load); prints both
keeps_pace() {
  python3 -c "
import json, sys
t = [json.loads(l)['time'] for l in open('$tmp/$1/metrics.jsonl')]
a, b = $2, $3
before = sum(1 for x in t[1:] if x <= a) / (a - t[0])
during = sum(1 for x in t if a < x <= b) / (b - a)
print('  $1: %.3f rounds/s before, %.3f after (%.2f of its pace)' % (before, during, during / before))
sys.exit(0 if during >= 0.8 * before else 1)"
}
# nodes_cleanup, after the hosts of tests/hosts.sh in $tmp/hosts and what
# runs on them
nodes_cleanup_hosts() {
  local p
  for p in "${pids[@]}"; do kill -9 "$p" 2> /dev/null; done
  for p in "${pids[@]}"; do wait "$p" 2> /dev/null; done
  tests/hosts.sh stop "$tmp/hosts" > /dev/null 2>&1
  nodes_cleanup
}
# (only the master answers EXISTS for them; the others answer MOVED)
master_of() {
  local port
  while read -r port _; do
    [ "$(redis-cli -p "$port" exists "$SAPO_SWARM:n:{$1}:hi" 2> /dev/null)" = 1 ] && { echo "$port"; return 0; }
  done < "$tmp/cluster/ports"
  return 1
}
