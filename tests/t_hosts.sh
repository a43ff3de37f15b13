#!/usr/bin/env bash
# A swarm across hosts (tests/hosts.sh: a network namespace each, joined
# by a switch, traffic never on loopback): Redis on host "pool" with a
# password, node a0 on host n1 and node a1 on host n2 (the micro model,
# 2/2, every group shared), each reaching the pool by its address:
#   - every process of a node runs on its host, and the pool is reached
#     from there only by the pool host's address;
#   - each sampler says once that its link to the pool is not encrypted;
#   - the two nodes share through the pool from their third rounds;
#   - n1 cut off from the switch for 60 s (SAPO_CUT_S): a0 goes on
#     training on its own groups and says so in one line, a1 keeps at
#     least 0.8 of its pace, and a0 shares again by itself within 35 s
#     of the link's return (its pool's backoff) and says so.
set -u
cd "$(dirname "$0")/.."
bin=${SAPO_BIN:-build/asan/bin}
tmp=$(mktemp -d)
. tests/nodes.sh
trap 'nodes_cleanup_hosts' EXIT
check() { if (eval "$2"); then echo "PASS hosts_$1"; else echo "FAIL hosts_$1"; fi; }
nodes_init hosts
tests/hosts.sh start "$tmp/hosts" pool n1 n2 2> "$tmp/hosts.err" ||
  { echo "SKIP hosts: no network namespaces here ($(head -n 1 "$tmp/hosts.err"))"; exit 0; }
pool=$(tests/hosts.sh addr "$tmp/hosts" pool)
tests/hosts.sh run "$tmp/hosts" pool redis-server --port 6379 --bind "$pool" --requirepass swarm-secret --save "" \
  --appendonly no > "$tmp/redis.log" 2>&1 &
pids+=($!)
for _ in $(seq 50); do
  tests/hosts.sh run "$tmp/hosts" n1 redis-cli -h "$pool" -a swarm-secret --no-auth-warning ping 2> /dev/null | grep -q PONG && break
  sleep 0.1
done
export SAPO_CHECKPOINT_EVERY=1000 SAPO_SWARM=h$$ SAPO_REDIS=redis://:swarm-secret@$pool:6379
node_host=n1 node_start a0 1
node_host=n2 node_start a1 2
check trains 'advance 6'
check on_their_hosts '[ -n "$(ip netns pids "$(awk "\$1 == \"n1\" { print \$2 }" "$tmp/hosts/hosts")" | grep -x "$pid_a0_sampler")" ] &&
  [ -n "$(ip netns pids "$(awk "\$1 == \"n2\" { print \$2 }" "$tmp/hosts/hosts")" | grep -x "$pid_a1_learner")" ]'
check plaintext_said_once '[ "$(grep -c "link to it is not encrypted" "$tmp/a0/sampler.log")" = 1 ] &&
  grep -q "pool: $pool:6379 is another host" "$tmp/a1/sampler.log"'
check shares 'shares_from_third a0 4 && shares_from_third a1 4'

# n1 cut off: a0 trains on, a1 goes on at its pace
cut_s=${SAPO_CUT_S:-60}
r0=$(rows a0) r1=$(rows a1) o0=$(outages a0)
t0=$(date +%s)
cut_at=$(date +%s.%N)
tests/hosts.sh cut "$tmp/hosts" n1
sleep "$cut_s"
mended_at=$(date +%s.%N)
tests/hosts.sh mend "$tmp/hosts" n1
check trains_while_cut '[ "$(rows a0)" -ge $((r0 + 2)) ] && [ "$(rows a1)" -ge $((r1 + 2)) ]'
check one_line_for_the_cut '[ $(( $(outages a0) - o0 )) = 1 ]'
# a1's rounds a second while a0 was cut, against before it (from its
# second round, the first being the model's load)
check other_keeps_pace 'keeps_pace a1 $cut_at $mended_at'
r0=$(rows a0)
# a0 shares again by itself: its pool tries again with backoff, 30 s
# apart at most, so within 35 s of the link's return (two rounds of a
# real model's, which take minutes; the micro model's take a second)
shared_again() { python3 -c "
import json, sys
rs = [json.loads(l) for l in open('$tmp/a0/metrics.jsonl')][$r0:]
sys.exit(0 if any(r['external_groups'] > 0 and r['external_from'] for r in rs) else 1)"; }
check shares_again 'for _ in $(seq 175); do shared_again && exit 0; sleep 0.2; done; exit 1'
check said_back 'grep -q "pool works again after" "$tmp/a0/sampler.log"'
check no_process_exits 'all_alive'
echo "  a0 cut off for $cut_s s: it trained $(( $(rows a0) - r0 )) rounds after the link was back, within $(( $(date +%s) - t0 - cut_s )) s"
