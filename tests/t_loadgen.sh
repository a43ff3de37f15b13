#!/usr/bin/env bash
# The pool's load generator against a real redis-server: 20 simulated nodes,
# rounds of 1 s for 3 s, 8 groups of 2,000 bytes and a draw of 4 each. It
# makes every call its schedule asks for (20 nodes x 3 rounds x 8
# publishes, 60 draws), with no error; draws after the first round bring 4
# groups; Redis holds about what the window keeps (20 nodes x 2 rounds x 8
# groups of 2 KB: 0.3 MB, at most 3 MB more than before); the JSON line
# carries each figure; the swarm's keys are gone at the end. A bad flag
# names itself.
set -u
cd "$(dirname "$0")/.."
bin=${SAPO_BIN:-build/asan/bin}
tmp=$(mktemp -d)
. tests/nodes.sh
need loadgen loadgen redis-server redis-cli python3
trap nodes_cleanup EXIT
check() { if eval "$2"; then echo "PASS loadgen_$1"; else echo "FAIL loadgen_$1"; fi; }

out=$("$bin/loadgen" --nodes lots 2>&1); rc=$?
check bad_flag '[ $rc = 2 ] && [ "$out" = "loadgen: --nodes: '\''lots'\'' is not an integer in [2, 1000000]" ]'

port=6700
while (exec 3<> /dev/tcp/127.0.0.1/$port) 2> /dev/null; do port=$((port + 1)); done
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no > "$tmp/redis.log" 2>&1 &
redis_pid=$!
for _ in $(seq 50); do redis-cli -p "$port" ping > /dev/null 2>&1 && break; sleep 0.1; done
"$bin/loadgen" --redis "redis://127.0.0.1:$port" --nodes 20 --seconds 3 --round-seconds 1 --bytes 2000 \
  > "$tmp/out" 2> "$tmp/err"
rc=$?
check runs '[ $rc = 0 ] || { cat "$tmp/out" "$tmp/err"; false; }'
python3 - "$tmp/out" <<'PY'
import json, sys
lines = open(sys.argv[1]).read().splitlines()
ok = lambda name, cond, why="": print(("PASS" if cond else "FAIL") + " loadgen_" + name + ("" if cond else " " + why))
try:
    j = json.loads(lines[-1])
except (ValueError, IndexError) as e:
    sys.exit(print("FAIL loadgen_json %s" % e))
ok("json", all(k in j for k in ("publish", "draw", "used_memory_max", "used_memory_end", "server_cpu", "errors")), lines[-1])
ok("calls", j["publish"]["calls"] == 20 * 3 * 8 and j["draw"]["calls"] == 60, lines[-1])
ok("no_errors", j["errors"] == 0)
# round 1's draws find only what the nodes before them published
ok("draws_full", j["draw"]["groups"] >= (40 * 4 + 10) / 60, str(j["draw"]))
ok("latency_figures", 0 < j["publish"]["p50_ms"] <= j["publish"]["p99_ms"] and 0 < j["draw"]["p50_ms"] <= j["draw"]["p99_ms"])
# a call's wait from its round's due time is never less than from its own start
ok("due_figures", j["draw"]["p99_due_ms"] >= j["draw"]["p99_ms"] and j["publish"]["p99_due_ms"] >= j["publish"]["p99_ms"]
   and 0 <= j["schedule_kept"] <= 1, lines[-1])
before = float([l for l in lines if l.startswith("redis:")][0].split("(")[1].split(" MB")[0]) * 1e6
ok("memory_bounded", 0.3e6 <= j["used_memory_end"] - before <= 3e6, "%d bytes more" % (j["used_memory_end"] - before))
PY
check keys_cleaned '[ "$(redis-cli -p "$port" dbsize)" = 0 ]'

# the same schedule by 4 threads, each on clients of its own: every call
# made, none failed (ASan watches the threads' figures merged)
"$bin/loadgen" --redis "redis://127.0.0.1:$port" --nodes 20 --seconds 3 --round-seconds 1 --bytes 2000 --threads 4 \
  > "$tmp/out4" 2> "$tmp/err4"
rc=$?
check threads '[ $rc = 0 ] && tail -n 1 "$tmp/out4" | python3 -c "
import json, sys
j = json.loads(sys.stdin.read())
sys.exit(not (j[\"threads\"] == 4 and j[\"publish\"][\"calls\"] == 480 and j[\"draw\"][\"calls\"] == 60 and j[\"errors\"] == 0))"'
# a schedule one thread cannot keep (2,000 nodes in 1 s rounds, 4
# publishes and a draw each: 10,000 calls a second): it says so (most rounds begun late), and the draws' latency
# from their due time counts the wait behind the late schedule that their
# latency from their own start leaves out (coordinated omission)
"$bin/loadgen" --redis "redis://127.0.0.1:$port" --nodes 2000 --seconds 1 --round-seconds 1 --groups 4 --bytes 2000 \
  > "$tmp/outlate" 2> "$tmp/errlate"
check behind_schedule_counted 'tail -n 1 "$tmp/outlate" | python3 -c "
import json, sys
j = json.loads(sys.stdin.read())
print(\"  overloaded: %.1f %% of the rounds begun on time; draw p99 %.2f ms from its start, %.1f ms from its due time\" % (
    100 * j[\"schedule_kept\"], j[\"draw\"][\"p99_ms\"], j[\"draw\"][\"p99_due_ms\"]))
sys.exit(not (j[\"schedule_kept\"] < 0.5 and j[\"draw\"][\"p99_due_ms\"] > 10 * j[\"draw\"][\"p99_ms\"]))" &&
  grep -q "^schedule: [0-9.]* % of 2000 rounds begun within 5 ms of their due time" "$tmp/outlate" || { tail -n 3 "$tmp/outlate" "$tmp/errlate"; false; }'
out=$("$bin/loadgen" --nodes 10 --threads 3 2>&1); rc=$?
check threads_divide '[ $rc = 2 ] && [ "$out" = "loadgen: --threads: 3 does not divide --nodes 10" ]'
