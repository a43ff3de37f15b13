#!/usr/bin/env bash
# The pool at swarm scale (issue 24's goals), with bin/loadgen against a
# redis-server of its own: 1,000 simulated nodes, rounds of 10 s, 8 groups
# of 22,000 bytes published and 4 drawn per node and round, window 2
# rounds, for 60 s (20 s with QUICK=1). Goals, each line's ratio to it
# (at most 1 meets it): publish p99 and draw p99 at most 1 ms, Redis
# used_memory at most 2 GB, 0 errors.
set -u
cd "$(dirname "$0")/.."
bin=${SAPO_BIN:-bin}
[ -x "$bin/loadgen" ] || { echo "b_pool_load: $bin/loadgen missing (make bench builds it)" >&2; exit 1; }
command -v redis-server > /dev/null && command -v redis-cli > /dev/null || { echo "b_pool_load: needs redis-server" >&2; exit 1; }
seconds=$([ "${SAPO_BENCH_QUICK:-0}" = 1 ] && echo 20 || echo 60)
nodes=${POOL_LOAD_NODES:-1000}
port=6800
while (exec 3<> /dev/tcp/127.0.0.1/$port) 2> /dev/null; do port=$((port + 1)); done
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no > /dev/null 2>&1 &
redis=$!
trap 'kill $redis 2> /dev/null; wait $redis 2> /dev/null' EXIT
for _ in $(seq 50); do redis-cli -p "$port" ping > /dev/null 2>&1 && break; sleep 0.1; done
out=$("$bin/loadgen" --redis "redis://127.0.0.1:$port" --nodes "$nodes" --seconds "$seconds" --round-seconds 10 2> /dev/null)
rc=$?
echo "$out" | grep -v '^{' | sed 's/^/  /'
python3 - "$nodes" <<PY
import json, sys
j = json.loads("""$(echo "$out" | tail -n 1)""")
n = sys.argv[1]
line = lambda name, v, unit, goal: print("bench pool_%s_nodes_%s: %.4g %s (goal: %g %s, ratio %.3g)" % (n, name, v, unit, goal, unit, v / goal))
line("publish_p99", j["publish"]["p99_ms"], "ms", 1)
line("draw_p99", j["draw"]["p99_ms"], "ms", 1)
line("used_memory", j["used_memory_max"] / 1e9, "GB", 2)
print("bench pool_%s_nodes_errors: %d errors" % (n, j["errors"]))
print("bench pool_%s_nodes_server_cpu: %.3g cores" % (n, j["server_cpu"]))
PY
exit $rc
