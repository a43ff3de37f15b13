#!/usr/bin/env bash
# make demo: SAPO on this machine's CPU with the tiny model. Trains the base
# model once (cached in $SAPO_BASE, default run/base), runs a 2-node swarm in
# which each node trains on 4 of its own question groups and 4 of the other
# node's per round, shows a progress line while it runs, and ends with the
# report: a summary table and PNG plots.
#
#   DEMO_ROUNDS  rounds per node (default 100: GRPO's gain on the default
#                mix shows from about 50 rounds on; docs/learning.md)
#   DEMO_RUN     run folder (default run/demo-<date>-<time>)
#   SAPO_*       any node setting (see bin/sampler --help), e.g. SAPO_TASK_MIX
set -euo pipefail
cd "$(dirname "$0")/.."
export SAPO_BIN=${SAPO_BIN:-bin}
export SAPO_BASE=${SAPO_BASE:-run/base}
rounds=${DEMO_ROUNDS:-100}
run=${DEMO_RUN:-run/demo-$(date +%Y%m%d-%H%M%S)}
for p in broker learner sampler generator verifier report; do
  [ -x "$SAPO_BIN/$p" ] || { echo "demo: $SAPO_BIN/$p missing: run make first" >&2; exit 1; }
done

start=$(date +%s)
if [ -f "$SAPO_BASE/config.json" ]; then
  echo "demo: base model $SAPO_BASE (cached; its accuracy: $(cat "$SAPO_BASE/accuracy.json" 2> /dev/null))"
else
  echo "demo: training the tiny base model into $SAPO_BASE (once; about 9 minutes on 2 cores)"
  "$SAPO_BIN/learner" warmstart
fi

echo "demo: 2 nodes, 4 local / 4 external groups per round, $rounds rounds each, run folder $run"
scripts/swarm.sh start --nodes 2 --ij 4/4 --rounds "$rounds" --run "$run" --wait
"$SAPO_BIN/report" "$run" --window $(( rounds >= 8 ? rounds / 4 : 1 ))
echo "demo: done in $(( $(date +%s) - start )) s; report folder: $run/report"
