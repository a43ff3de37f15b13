# An evaluator beside each node of a swarm.sh run (sourced by
# scripts/experiment.sh and scripts/game.sh, not run):
#   evaluator_start DIR NODE SEED ROUNDS EVERY PER_FAMILY [SAMPLES]
#       starts bin/evaluate on node NODE of the run in DIR (its pid joins
#       eval_pids); any SAPO_* set before the call reaches it; every
#       completion it scores goes to DIR/NODE/eval-completions.jsonl (the
#       evidence question by question: docs/results-cuda-prep/paired.py)
#   evaluators_finish
#       lets each evaluator finish the last round it was sent (at most
#       300 s), then ends it; a line at least every SAPO_PROGRESS_SECONDS
#       while it waits
. scripts/progress.sh
eval_pids=()
evaluator_start() {
  local dir=$1 node=$2 seed=$3 rounds=$4 every=$5 per_family=$6 samples=${7:-0}
  SAPO_NODE=$node SAPO_RUN=$dir/$node SAPO_BROKER=$dir/$node SAPO_ROUNDS=$rounds SAPO_SEED=$seed \
    SAPO_EVAL_COMPLETIONS=$dir/$node/eval-completions.jsonl "$SAPO_BIN/evaluate" "$every" "$per_family" $([ "$samples" -gt 0 ] && echo "$samples") > "$dir/$node/eval.log" 2>&1 < /dev/null &
  eval_pids+=($!)
}
evaluators_finish() {
  local p k=0 every t0=$SECONDS said=$SECONDS
  every=$(progress_every)
  for p in "${eval_pids[@]}"; do
    k=$((k + 1))
    for _ in $(seq 300); do
      kill -0 "$p" 2> /dev/null || break
      if [ $((SECONDS - said)) -ge "$every" ]; then
        echo "  waiting for evaluator $k of ${#eval_pids[@]} to score its last round, $(progress_elapsed $((SECONDS - t0)))"
        said=$SECONDS
      fi
      sleep 1
    done
    kill -TERM "$p" 2> /dev/null || true
    wait "$p" 2> /dev/null || true
  done
  eval_pids=()
}
