#!/usr/bin/env bash
# Redis outages under 2 training nodes (I/J 2/2, micro model): Redis down
# when the nodes start, then up, then stopped for SAPO_OUTAGE_S seconds
# (default 10) and restarted empty on the same port. Checks: the nodes train
# on local groups while Redis is away (one log line, not one per call), the
# samplers stay nearly idle on the CPU, sharing starts once Redis is there
# and resumes after the restart, and no process dies.
set -u
cd "$(dirname "$0")/.."
bin=${SAPO_BIN:-build/asan/bin}
tmp=$(mktemp -d)
. tests/nodes.sh
trap nodes_cleanup EXIT
outage=${SAPO_OUTAGE_S:-10}
check() { if (eval "$2"); then echo "PASS outage_$1"; else echo "FAIL outage_$1"; fi; }
nodes_init outage
port=6500
while (exec 3<> /dev/tcp/127.0.0.1/$port) 2> /dev/null; do port=$((port + 1)); done
export SAPO_CHECKPOINT_EVERY=1000 SAPO_SWARM=o$$ SAPO_REDIS=redis://127.0.0.1:$port

redis_up() {
  redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no > "$tmp/redis.log" 2>&1 &
  redis_pid=$!
  for _ in $(seq 50); do redis-cli -p "$port" ping > /dev/null 2>&1 && return 0; sleep 0.1; done
  return 1
}
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

node_start a0 1
node_start a1 2
check trains_with_redis_down_at_start 'advance 3'
check logged_once 'for n in a0 a1; do [ "$(grep -c "training on local groups" "$tmp/$n/sampler.log")" = 1 ] || exit 1; done'

redis_up || { echo "FAIL outage_redis_start"; exit 1; }
r0=$(rows a0) r1=$(rows a1)
check sharing_starts 'for _ in $(seq 600); do [ "$(shared_since a0 $r0)" -gt 0 ] && [ "$(shared_since a1 $r1)" -gt 0 ] && exit 0; sleep 0.2; done; exit 1'

kill -TERM $redis_pid; wait $redis_pid 2> /dev/null; redis_pid=
hz=$(getconf CLK_TCK)
c0=$(cpu_ticks $pid_a0_sampler) r0=$(rows a0)
sleep "$outage"
c1=$(cpu_ticks $pid_a0_sampler)
cpu=$(python3 -c "print(round(100 * ($c1 - $c0) / $hz / $outage, 1))")
echo "  sampler CPU during the ${outage} s outage: $cpu% of a core; rounds trained: $(( $(rows a0) - r0 ))"
check trains_during_outage '[ "$(rows a0)" -gt "$r0" ]'
check sampler_does_not_spin 'python3 -c "import sys; sys.exit(0 if $cpu < 25 else 1)"'

redis_up || { echo "FAIL outage_redis_restart"; exit 1; }
r0=$(rows a0) r1=$(rows a1)
check sharing_resumes 'for _ in $(seq 900); do [ "$(shared_since a0 $r0)" -gt 0 ] && [ "$(shared_since a1 $r1)" -gt 0 ] && exit 0; sleep 0.2; done; exit 1'
grep -h "works again" "$tmp"/a*/sampler.log | head -2 | sed 's/^/  /'
# one line per distinct failure per outage, not one per call
check few_log_lines_per_outage '[ "$(grep -c "pool: " "$tmp/a0/sampler.log")" -le 4 ]'
check no_process_died 'all_alive'
check no_sanitizer_error '! grep -l -E "Sanitizer|runtime error" "$tmp"/a*/*.log'
echo "outage test: $SECONDS s"
