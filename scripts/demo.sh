#!/usr/bin/env bash
# make demo: SAPO on this machine's CPU. Makes the base model once (cached
# in $SAPO_BASE), runs a 2-node swarm in which each node trains on 4 of its
# own question groups and 4 of the other node's per round, shows a progress
# line while it runs, and ends with the report: a summary table and PNG
# plots.
#
#   MODEL        (make demo MODEL=NAME) a real model scripts/model.sh fetches,
#                e.g. smollm2-135m: fetched once, run with its preset
#                (config/presets/NAME.env: its format warm start, task mix
#                and settings); default: the tiny model sapo trains itself
#   DEMO_ROUNDS  rounds per node (default 100 for the tiny model: GRPO's gain
#                on the default mix shows from about 50 rounds on,
#                docs/learning.md; 12 for a real model, whose round takes a minute)
#   DEMO_RUN     run folder (default run/demo-<date>-<time>)
#   SAPO_*       any node setting (see bin/sampler --help), e.g. SAPO_TASK_MIX
set -euo pipefail
cd "$(dirname "$0")/.."
export SAPO_BIN=${SAPO_BIN:-bin}
model=${MODEL:-}
for p in broker learner sampler generator verifier report; do
  [ -x "$SAPO_BIN/$p" ] || { echo "demo: $SAPO_BIN/$p missing: run make first" >&2; exit 1; }
done
start=$(date +%s)
if [ -n "$model" ]; then
  scripts/model.sh get "$model"
  export SAPO_MODEL=$model
  [ -f "config/presets/$model.env" ] && export SAPO_PRESET=${SAPO_PRESET:-$model}
  rounds=${DEMO_ROUNDS:-12}
else
  rounds=${DEMO_ROUNDS:-100}
fi
run=${DEMO_RUN:-run/demo-$(date +%Y%m%d-%H%M%S)}

base=$("$SAPO_BIN/learner" start)
if [ -f "$base/config.json" ] || [ -f "$base" ]; then
  echo "demo: starting from $base (cached; $(cat "$base/accuracy.json" "$base/format.json" 2> /dev/null | cut -c1-300))"
else
  echo "demo: making the base model into $base (once: the tiny model about 9 minutes on 2 cores, a real model's format warm start about 6)"
fi
"$SAPO_BIN/learner" warmstart

echo "demo: 2 nodes, 4 local / 4 external groups per round, $rounds rounds each, run folder $run"
scripts/swarm.sh start --nodes 2 --ij 4/4 --rounds "$rounds" --run "$run" --wait
"$SAPO_BIN/report" "$run" --window $(( rounds >= 8 ? rounds / 4 : 1 ))
echo "demo: done in $(( $(date +%s) - start )) s; report folder: $run/report"
