#!/usr/bin/env bash
# Short soak (scripts/soak.sh, about a minute): a 2-node micro-model swarm
# sampled for RSS and file descriptors. Under ASan memory grows with the
# allocator's quarantine, so the bound here is loose; the long run with
# release binaries is where the 5 % figure is measured.
set -u
cd "$(dirname "$0")/.."
bin=${SAPO_BIN:-build/asan/bin}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. tests/nodes.sh
need soak broker learner sampler generator verifier redis-server redis-cli foreman python3
micro_model soak
export SAPO_BIN=$bin SAPO_MODEL=$tmp/micro SAPO_QUESTIONS=4 SAPO_COMPLETIONS=4 SAPO_MAX_NEW_TOKENS=12 SAPO_SHARE=all SAPO_LOCAL_FILTER=all \
       SAPO_EXTERNAL_FILTER=all SAPO_CHECKPOINT_EVERY=5 SAPO_SWARM=s$$ ASAN_OPTIONS=detect_leaks=0:quarantine_size_mb=16
mkdir -p "$tmp/run"
if scripts/soak.sh --minutes 1 --warmup 0.3 --interval 3 --max-growth 100 --run "$tmp/run/soak" > "$tmp/soak.out" 2>&1; then
  echo "PASS soak_short"
else
  echo "FAIL soak_short"
fi
sed 's/^/  /' "$tmp/soak.out"
rounds=$(cat "$tmp"/run/soak/n*/metrics.jsonl 2> /dev/null | wc -l)
if [ "$rounds" -ge 4 ]; then echo "PASS soak_trains"; else echo "FAIL soak_trains ($rounds rounds)"; fi
