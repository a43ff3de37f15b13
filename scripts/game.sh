#!/usr/bin/env bash
# RL Swarm's three-stage game on this machine, a swarm against a solo node:
# N game nodes share a pool and read each other's stage outputs; one solo
# node plays the same questions with the same seed as the swarm's n0, on a
# pool of its own, so it never sees a peer. An evaluator per node scores
# held-out pass@1 on the answer stage's prompt. Ends with game_report:
# RUN/game/summary.md (stage rewards, answer length, pass@1, relative
# regret of every node against the best) and its plots.
#
#   scripts/game.sh [--nodes N] [--rounds R] [--seed S] [--run RUN]
#       [--eval-every E] [--eval-questions Q]
#
# Defaults: 3 nodes (as RL Swarm's report), 30 rounds, seed 1, pass@1 on
# 50 questions every 5 rounds. Each round is three batches (a GRPO step
# per stage). The tiny model plays from a base trained once for the game
# (learner warmstart with SAPO_GAME=three-stage) into SAPO_BASE, default
# run/base-game. Completions may run to 192 tokens (SAPO_MAX_NEW_TOKENS):
# a resolve's five sections take about 140 to 170 bytes on the default mix.
# Any SAPO_* variable reaches every node; a model folder in SAPO_MODEL
# plays instead of the tiny model.
set -euo pipefail
cd "$(dirname "$0")/.."
export SAPO_BIN=${SAPO_BIN:-bin}
export SAPO_BASE=${SAPO_BASE:-run/base-game}
export SAPO_GAME=three-stage
export SAPO_MAX_NEW_TOKENS=${SAPO_MAX_NEW_TOKENS:-192}
export SAPO_MODEL=${SAPO_MODEL:-tiny}
nodes=3 rounds=30 seed=1 run="" every=5 per_family=50
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes) nodes=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --run) run=$2; shift 2 ;;
    --eval-every) every=$2; shift 2 ;;
    --eval-questions) per_family=$2; shift 2 ;;
    *) echo "game: unknown flag '$1' (see the top of scripts/game.sh)" >&2; exit 2 ;;
  esac
done
int() { [[ "$2" =~ ^[0-9]+$ ]] && [ "$2" -ge 1 ] || { echo "game: $1: '$2' is not a positive integer" >&2; exit 2; }; }
int --nodes "$nodes"; int --rounds "$rounds"; int --seed "$seed"; int --eval-every "$every"
int --eval-questions "$per_family"
for p in broker learner sampler generator verifier evaluate game_report; do
  [ -x "$SAPO_BIN/$p" ] || { echo "game: $SAPO_BIN/$p missing: run make first" >&2; exit 1; }
done
command -v redis-server > /dev/null ||
  { echo "game: redis-server is needed (make deps)" >&2; exit 1; }
run=${run:-run/game-$(date +%Y%m%d-%H%M%S)}
[ -e "$run/swarm" ] && { echo "game: $run already holds a game; pick another --run" >&2; exit 1; }
mkdir -p "$run"
# both swarms draw the same questions: the mix is seeded by the swarm's name
export SAPO_SWARM=${SAPO_SWARM:-game$seed}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
if [ "$SAPO_MODEL" = tiny ] && [ ! -f "$SAPO_BASE/config.json" ]; then
  echo "game: training the tiny model's game base into $SAPO_BASE (once)"
  "$SAPO_BIN/learner" warmstart
fi

. scripts/evaluators.sh
cleanup() {
  for p in "${eval_pids[@]}"; do kill -TERM "$p" 2> /dev/null || true; done
  for g in swarm solo; do [ -f "$run/$g/pids" ] && scripts/swarm.sh stop --run "$run/$g" > /dev/null; done
  return 0
}
trap 'cleanup; exit 130' INT TERM
trap cleanup EXIT

# a swarm.sh run of n game nodes in folder g, and an evaluator per node
start() {
  local g=$1 n=$2 i
  scripts/swarm.sh start --nodes "$n" --ij 8/0 --rounds "$rounds" --run "$run/$g" --seed "$seed" > "$run/$g.log" 2>&1 ||
    { cat "$run/$g.log" >&2; exit 1; }
  local dir; dir=$(cd "$run/$g" && pwd)
  for i in $(seq 0 $((n - 1))); do evaluator_start "$dir" "n$i" $((seed * 1000 + i)) "$rounds" "$every" "$per_family"; done
}
echo "game: $nodes swarm nodes and a solo node, $rounds rounds (3 batches each), into $run"
start swarm "$nodes"
start solo 1
t0=$(date +%s)
until scripts/swarm.sh wait --run "$run/swarm" --timeout 5 && scripts/swarm.sh wait --run "$run/solo" --timeout 1; do
  line="  swarm: $(scripts/swarm.sh progress --run "$run/swarm" | cut -c1-100)  solo: $(scripts/swarm.sh progress --run "$run/solo" | cut -c1-40)"
  if [ -t 1 ]; then printf '\r%s' "$line"; elif [ "$line" != "${shown:-}" ]; then echo "$line"; shown=$line; fi
done
if [ -t 1 ]; then echo; fi
for g in swarm solo; do scripts/swarm.sh stop --run "$run/$g" > /dev/null; done
evaluators_finish
echo "game: played in $(( $(date +%s) - t0 )) s"
"$SAPO_BIN/game_report" "$run/swarm" "$run/solo"
