#!/usr/bin/env bash
# The pool on a real Redis Cluster (tests/cluster.sh: 3 masters, 3
# replicas, loopback) under 2 training nodes (I/J 2/2, the micro model):
# they share through it from the first rounds on; a reshard that moves
# one node's keys (followed by MOVED, with no failed call) and a master killed (SIGKILL, its replica promoted) while they
# train: no process exits, no round is lost, each node logs at most one
# outage line for the failover, and they share again after each.
set -u
cd "$(dirname "$0")/.."
bin=${SAPO_BIN:-build/asan/bin}
tmp=$(mktemp -d)
. tests/nodes.sh
trap 'tests/cluster.sh stop "$tmp/cluster" > /dev/null 2>&1; nodes_cleanup' EXIT
check() { if (eval "$2"); then echo "PASS cluster_$1"; else echo "FAIL cluster_$1"; fi; }
nodes_init cluster
url=$(tests/cluster.sh start "$tmp/cluster") || { echo "SKIP cluster: no Redis Cluster could be started (tests/cluster.sh)"; exit 0; }
export SAPO_CHECKPOINT_EVERY=1000 SAPO_SWARM=c$$ SAPO_REDIS=$url

# node $1's rounds are 1, 2, 3, ... with none missing
contiguous() {
  python3 -c "
import json, sys
rs = [json.loads(l)['round'] for l in open('$tmp/$1/metrics.jsonl')]
sys.exit(0 if rs == list(range(1, len(rs) + 1)) else 1)"
}

node_start a0 1
node_start a1 2
check trains 'advance 10'
# what each round drew, shown where the check fails (a node that ran
# ahead of the other finds nothing fresh to draw)
draws_by_round() {
  for n in a0 a1; do
    echo "  $n external groups by round: $(python3 -c "import json; print([json.loads(l)['external_groups'] for l in open('$tmp/$n/metrics.jsonl')])")"
  done
}
check shares_every_round 'shares_from_third a0 5 && shares_from_third a1 5 || { draws_by_round; false; }'
check keys_in_one_slot 'm=$(master_of a0) && [ "$(redis-cli -p "$m" exists "$SAPO_SWARM:n:{a0}:e" "$SAPO_SWARM:n:{a0}:s" "$SAPO_SWARM:n:{a0}:key")" = 3 ]'

# the slots of the master of a0's keys, from its first up to a0's, move to
# another master (reshard takes them in order; the master keeps the rest,
# and with them its vote in the failover below)
from=$(master_of a0)
from_id=$(redis-cli -p "$from" cluster myid)
to_id=$(redis-cli -p "$from" cluster nodes | awk -v me="$from_id" '$3 ~ /master/ && $1 != me { print $1; exit }')
slot=$(redis-cli -p "$from" cluster keyslot "$SAPO_SWARM:n:{a0}:e")
first=$(redis-cli -p "$from" cluster nodes | awk -v me="$from_id" '$1 == me { split($9, r, "-"); print r[1] }')
r0=$(rows a0) r1=$(rows a1) o0=$(outages a0) o1=$(outages a1)
redis-cli --cluster reshard "127.0.0.1:$from" --cluster-from "$from_id" --cluster-to "$to_id" \
  --cluster-slots $((slot - first + 1)) --cluster-yes > "$tmp/reshard.log" 2>&1
check reshard_moved_keys 'm=$(master_of a0) && [ "$m" != "$from" ] && [ "$(redis-cli -p "$from" cluster countkeysinslot "$slot")" = 0 ]'
check shares_after_reshard 'advance 3 && for _ in $(seq 600); do [ "$(shared_since a0 $r0)" -gt 0 ] && [ "$(shared_since a1 $r1)" -gt 0 ] && exit 0; sleep 0.2; done; exit 1'
# the keys' new place learnt from MOVED replies, with no failed call
check reshard_unnoticed '[ "$(outages a0)" = "$o0" ] && [ "$(outages a1)" = "$o1" ]'

# the master of a0's keys killed: its replica takes over
victim=$(master_of a0)
vpid=$(awk -v p="$victim" '$1 == p { print $2 }' "$tmp/cluster/ports")
o0=$(outages a0) o1=$(outages a1)
kill -9 "$vpid"
check replica_promoted 'for _ in $(seq 300); do m=$(master_of a0) && [ "$m" != "$victim" ] && exit 0; sleep 0.1; done; exit 1'
r0=$(rows a0) r1=$(rows a1)
check trains_through_failover 'advance 5'
check shares_after_failover 'for _ in $(seq 600); do [ "$(shared_since a0 $r0)" -gt 0 ] && [ "$(shared_since a1 $r1)" -gt 0 ] && exit 0; sleep 0.2; done; exit 1'
check one_line_per_outage '[ $(( $(outages a0) - o0 )) -le 1 ] && [ $(( $(outages a1) - o1 )) -le 1 ]'
check no_round_lost 'contiguous a0 && contiguous a1'
check no_process_died 'all_alive'
check no_sanitizer_error '! grep -l -E "Sanitizer|runtime error" "$tmp"/a*/*.log'
grep -h "works again\|training on local" "$tmp"/a*/sampler.log | head -4 | sed 's/^/  /'
echo "cluster test: $SECONDS s"
