#!/usr/bin/env bash
# SAPO node benchmarks on the tiny model (release build in $SAPO_BIN):
#  - time per round split by stage (generate, verify, train, pool,
#    transport) for a 2-node swarm (4 local / 4 external), and the share of
#    transport + serialization + pool in a round (goal <= 1 %);
#  - every process's peak resident memory in that swarm's first node;
#  - rounds per second with 1, 2 and 4 generators on one node.
# Transport is measured per group as the time from the generator's record
# being built to the sampler receiving it scored, less the verifier's time:
# it holds serialization, both broker hops and any queueing, so it is an
# upper bound. Seconds per stage are sums over the round's groups; generation
# overlaps training, so stages do not add up to the round's wall time.
set -u
cd "$(dirname "$0")/.."
bin=${SAPO_BIN:-bin}
for p in broker learner sampler generator verifier; do
  [ -x "$bin/$p" ] || { echo "b_node: $bin/$p missing (make bench builds it)" >&2; exit 1; }
done
command -v foreman > /dev/null && command -v python3 > /dev/null || { echo "b_node: needs foreman and python3" >&2; exit 1; }
quick=${SAPO_BENCH_QUICK:-0}
rounds=$([ "$quick" = 1 ] && echo 4 || echo 10)
tmp=$(mktemp -d)
trap 'scripts/swarm.sh stop --run "$tmp/s" > /dev/null 2>&1; rm -rf "$tmp"' EXIT
base=${SAPO_BASE:-run/base}
if [ ! -f "$base/config.json" ]; then
  base=build/bench-base
  [ -f "$base/config.json" ] || "$bin/learner" warmstart --base "$base" --warmstart-steps 1 > "$tmp/warm.log" 2>&1 ||
    { cat "$tmp/warm.log" >&2; exit 1; }
fi
export SAPO_BASE=$base SAPO_BIN=$bin SAPO_SWARM=bench$$ SAPO_SHARE=all SAPO_LOCAL_FILTER=all SAPO_EXTERNAL_FILTER=all

run_swarm() { # run folder, nodes, I/J, generators
  echo "b_node: $2 node(s) at $3, $4 generator(s), $rounds rounds"
  scripts/swarm.sh start --run "$1" --nodes "$2" --ij "$3" --generators "$4" --rounds "$rounds" --wait > "$1.log" 2>&1
}

run_swarm "$tmp/s" 2 4/4 1
python3 - "$tmp/s/n0/metrics.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
if len(rows) < 3:
    sys.exit("b_node: fewer than 3 rounds in " + sys.argv[1])
med = lambda xs: statistics.median(xs)
walls = [b["time"] - a["time"] for a, b in zip(rows[1:], rows[2:])]
secs = rows[2:]
def stage(name):
    return med([r["seconds"].get(name, 0) for r in secs])
wall = med(walls)
print("bench node_round_tiny: %.3f s/round" % wall)
for name in ("generate", "verify", "train", "pool", "transport"):
    print("bench node_stage_%s: %.4f s/round" % (name, stage(name)))
share = 100 * (stage("pool") + stage("transport")) / wall
print("bench node_transport_pool_share: %.3f %% (goal: 1 %%, ratio %.3f)" % (share, share / 1.0))
# every process's peak resident memory over the run (peak_gb, docs/memory.md)
for name, gb in sorted(rows[-1].get("peak_gb", {}).items()):
    print("bench node_peak_tiny_%s: %.4f GB" % (name, gb))
PY

declare -A rate
for g in 1 2 4; do
  run_swarm "$tmp/g$g" 1 8/0 "$g"
  rate[$g]=$(python3 -c "
import json,sys
r=[json.loads(l) for l in open('$tmp/g$g/n0/metrics.jsonl')][1:]
print('%.4f' % ((len(r)-1)/(r[-1]['time']-r[0]['time'])) if len(r) > 1 else 'nan')")
done
for g in 2 4; do
  echo "bench node_rounds_per_s_gen$g: ${rate[$g]} rounds/s (1 generator: ${rate[1]} rounds/s, ratio $(python3 -c "print('%.3f' % (${rate[$g]}/${rate[1]}))"))"
done
echo "bench node_rounds_per_s_gen1: ${rate[1]} rounds/s"
