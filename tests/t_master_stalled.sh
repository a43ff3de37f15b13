#!/usr/bin/env bash
# One master of the cluster pool behind a stalled link: the master that
# holds node a0's keys announces the port of a TCP proxy in front of it
# (tests/link_proxy.py; cluster-announce-port, so every client reaches it
# through the proxy while the cluster's bus goes direct and no failover
# starts), and three training nodes a0, a1 and a2 (the micro model, 2/2,
# every group shared), one on each master. For 30 s the proxy passes
# nothing, the master's connections open:
#   - a1 and a2, whose own keys are elsewhere but whose draws read a0's,
#     keep at least half their pace (a pool call waits on the stalled
#     master at most half its deadline, and then not at all for a while)
#     and still train on external groups;
#   - a0 trains on its own groups, saying so in one line (which also
#     shows its calls went through the proxy);
#   - no process exits; and once the link passes again a0 shares again by
#     itself.
set -u
cd "$(dirname "$0")/.."
bin=${SAPO_BIN:-build/asan/bin}
tmp=$(mktemp -d)
. tests/nodes.sh
proxy_pid=
trap '[ -n "$proxy_pid" ] && kill $proxy_pid 2> /dev/null; tests/cluster.sh stop "$tmp/cluster" > /dev/null 2>&1; nodes_cleanup' EXIT
check() { if (eval "$2"); then echo "PASS master_stalled_$1"; else echo "FAIL master_stalled_$1"; fi; }
nodes_init master_stalled
url=$(tests/cluster.sh start "$tmp/cluster") || { echo "SKIP master_stalled: no Redis Cluster could be started (tests/cluster.sh)"; exit 0; }
# the master of slot 3656 (a0's; a1's and a2's, 7785 and 11786, are on the others)
m0=
while read -r p _; do
  redis-cli -p "$p" cluster nodes | awk '/myself/ && /master/' | grep -qE ' 0-5460( |$)' && m0=$p
done < "$tmp/cluster/ports"
check found_master '[ -n "$m0" ]'
echo ok > "$tmp/link"
python3 tests/link_proxy.py "$m0" "$tmp/link" > "$tmp/proxy.port" 2> "$tmp/proxy.log" &
proxy_pid=$!
for _ in $(seq 50); do [ -s "$tmp/proxy.port" ] && break; sleep 0.1; done
proxy=$(cat "$tmp/proxy.port")
redis-cli -p "$m0" config set cluster-announce-port "$proxy" > /dev/null
# every node's map names the proxy for that master
announced() {
  local p
  while read -r p _; do redis-cli -p "$p" cluster slots | grep -qx "$proxy" || return 1; done < "$tmp/cluster/ports"
}
check announced 'for _ in $(seq 100); do announced && exit 0; sleep 0.1; done; exit 1'
export SAPO_CHECKPOINT_EVERY=1000 SAPO_SWARM=s$$ SAPO_REDIS=$url
node_start a0 1
node_start a1 2
node_start a2 3
check trains 'advance 4'
r1=$(rows a1) r2=$(rows a2)
sleep 10
before=$(( $(rows a1) - r1 + $(rows a2) - r2 ))
echo stall > "$tmp/link"
r0=$(rows a0) r1=$(rows a1) r2=$(rows a2) o0=$(outages a0)
sleep 30
stalled=$(( $(rows a1) - r1 + $(rows a2) - r2 ))
echo "  a1 and a2: $before rounds in 10 s before the stall, $stalled in its 30 s; a0 $(( $(rows a0) - r0 )) in the stall"
check others_keep_half_their_pace "[ $before -gt 0 ] && [ $((stalled * 10 * 2)) -ge $((before * 30)) ]"
# and they go on drawing each other's groups through the stall
check others_still_share '[ "$(shared_since a1 "$r1")" -gt 0 ] && [ "$(shared_since a2 "$r2")" -gt 0 ]'

check stalled_node_trains '[ "$(rows a0)" -gt "$r0" ]'
check stalled_node_one_line '[ $(( $(outages a0) - o0 )) = 1 ] || { grep -h "pool" "$tmp/a0/sampler.log" | head -5; false; }'
echo ok > "$tmp/link"
r0=$(rows a0)
check shares_after 'for _ in $(seq 450); do [ "$(shared_since a0 $r0)" -gt 0 ] && exit 0; sleep 0.2; done; exit 1'
check no_process_exits 'all_alive'
