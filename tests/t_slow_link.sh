#!/usr/bin/env bash
# A slow, then stalled link between one node and the pool (a TCP proxy on
# loopback, tests/link_proxy.py): 2 training nodes (I/J 2/2, the micro
# model), a1 reaching Redis through the proxy, a0 directly. 200 ms added
# to every chunk for 15 s: a1 still trains and shares. Then 30 s in which
# nothing passes: a1 trains on its own groups and logs one line, a0 keeps
# its pace. Then the link heals: a1 shares again.
set -u
cd "$(dirname "$0")/.."
bin=${SAPO_BIN:-build/asan/bin}
tmp=$(mktemp -d)
. tests/nodes.sh
proxy_pid=
trap '[ -n "$proxy_pid" ] && kill $proxy_pid 2> /dev/null; nodes_cleanup' EXIT
check() { if (eval "$2"); then echo "PASS slow_link_$1"; else echo "FAIL slow_link_$1"; fi; }
nodes_init slow_link
port=6800
while (exec 3<> /dev/tcp/127.0.0.1/$port) 2> /dev/null; do port=$((port + 1)); done
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no > "$tmp/redis.log" 2>&1 &
redis_pid=$!
for _ in $(seq 50); do redis-cli -p "$port" ping > /dev/null 2>&1 && break; sleep 0.1; done
echo ok > "$tmp/link"
python3 tests/link_proxy.py "$port" "$tmp/link" > "$tmp/proxy.port" 2> "$tmp/proxy.log" &
proxy_pid=$!
for _ in $(seq 50); do [ -s "$tmp/proxy.port" ] && break; sleep 0.1; done
export SAPO_CHECKPOINT_EVERY=1000 SAPO_SWARM=l$$

SAPO_REDIS=redis://127.0.0.1:$port node_start a0 1
SAPO_REDIS=redis://127.0.0.1:$(cat "$tmp/proxy.port") node_start a1 2
check trains 'advance 4'

echo "delay 200" > "$tmp/link"
r1=$(rows a1)
sleep 15
check delayed_link_trains_and_shares '[ "$(rows a1)" -gt "$r1" ] && [ "$(shared_since a1 $r1)" -gt 0 ]'

# the stall: a0's pace against its pace before it
r0=$(rows a0) t0=$SECONDS
sleep 10
pace_before=$(( $(rows a0) - r0 ))
echo stall > "$tmp/link"
r0=$(rows a0) r1=$(rows a1) o0=$(outages a0) o1=$(outages a1)
sleep 30
pace_stall=$(( $(rows a0) - r0 ))
echo "  a0's rounds: $pace_before in 10 s before the stall, $pace_stall in its 30 s; a1's in the stall: $(( $(rows a1) - r1 ))"
check stalled_node_trains_alone '[ "$(rows a1)" -gt "$r1" ]'
check stalled_node_logs_one_line '[ $(( $(outages a1) - o1 )) = 1 ]'
# its rate in the stall at least 0.3 of its rate before: a node held up
# by the other's link would stop (a pool call waits 2 s for a reply,
# against about 0.2 s a round). Not more: on 2 cores a1 trains alone in
# the stall and takes CPU it left idle while its link was slow, so a0's
# rate falls by itself; six runs on a Zen 4 read 0.46 to 0.82 (two
# under the 0.6 this asked for until 2026-11-29, docs/tests.md)
check other_node_unhindered '[ $(( $(outages a0) - o0 )) = 0 ] && [ $((pace_stall * 10 * 10)) -ge $((pace_before * 30 * 3)) ]'

echo ok > "$tmp/link"
r1=$(rows a1)
check shares_after_the_stall 'for _ in $(seq 450); do [ "$(shared_since a1 $r1)" -gt 0 ] && exit 0; sleep 0.2; done; exit 1'
grep -h "works again\|training on local" "$tmp"/a1/sampler.log | head -2 | sed 's/^/  /'
check no_process_died 'all_alive'
check no_sanitizer_error '! grep -l -E "Sanitizer|runtime error" "$tmp"/a*/*.log'
echo "slow link test: $SECONDS s"
