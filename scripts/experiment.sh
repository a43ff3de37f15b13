#!/usr/bin/env bash
# The paper's controlled study (section 5) on this machine: the same swarm
# trained once per local/external split I/J (I + J = 8 by default), one
# configuration after another, each from the same base model and seeds and
# with a fresh pool; an evaluator per node scores held-out pass@1 as it
# trains. Ends with tools/study's report: EXP/results/summary.md (the
# cumulative-reward table, ratios to J = 0, tests across seeds, evaluation
# against isolated nodes) and its plots. EXP/manifest.json records what a
# rerun needs: the SAPO_* environment, seeds, git version, wall time, and
# for each kind of model what its nodes load (scripts/start_record.sh:
# the model and its file's sha256, the start and its sha256, how a base
# was made, every node setting); EXP/settings.md the node settings'
# defaults of the binaries used.
#
#   scripts/experiment.sh [--preset NAME] [--nodes N] [--rounds R] [--seeds S[,S...]]
#       [--configs "I/J I/J ..."] [--model tiny|NAME|FOLDER|GGUF[,...]] [--run EXP]
#       [--mixes FILE[,FILE...]] [--eval-mix FILE]
#       [--eval-every E] [--eval-questions Q] [--eval-samples S] [--quick]
#
# Defaults: 4 nodes, 8/0 6/2 4/4 2/6, 100 rounds, seeds 1,2,3, the tiny model,
# 40 held-out questions per family at rounds 0, rounds/2 and rounds (12
# swarms; docs/results/ has the run and its time on 2 cores). A list of
# models gives each node its own (the last repeats: a heterogeneous swarm,
# scripts/swarm.sh --models); the report then compares each kind of model
# with itself across configurations. --quick: 2 nodes, 8/0 and 4/4, 6 rounds,
# 4 held-out questions per family (minutes). --eval-samples S also samples
# each held-out question S times at the nodes' temperature (evaluate's
# sampled pass@1; 0, the default, is greedy only). A configuration I/Ju
# draws and counts its J external groups but does not train on them
# (external-train 0): how much of the batch reward selection alone makes.
# --preset NAME runs the
# nodes with config/presets/NAME.env and takes the study's flags from its
# "# experiment:" line (config/presets/paper.env: the paper's regime).
# --mixes gives each node its task mix (the last repeats: specialised
# nodes), --eval-mix the mix every evaluator scores (default: the node's).
# Any SAPO_* variable reaches every node.
#
# The nodes run in lockstep (SAPO_LOCKSTEP=1 unless set): each samples a
# round's questions with the policy of the round before, and the
# configurations meet the same questions and sampling uniforms per node
# and round. Against the generators' default overlap (SAPO_LOCKSTEP=0),
# with 2 nodes, 80 rounds and 4 seeds, it halved the spread across seeds
# of a configuration's cumulative reward in one comparison (sd 0.95
# against 1.75 at 8/0, 1.99 against 4.02 at 4/4), and a J = 0 node repeats
# itself, nearly exactly (docs/learning.md, "Common random numbers").
# Each step (a configuration and seed) says where it is at least every
# SAPO_PROGRESS_SECONDS (20): its number, the time gone, each node's round.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/progress.sh
every=$(progress_every)
export SAPO_BIN=${SAPO_BIN:-bin}
export SAPO_LOCKSTEP=${SAPO_LOCKSTEP:-1}
nodes=4 rounds=100 seeds=1,2,3 configs="8/0 6/2 4/4 2/6" model=${SAPO_MODEL:-} exp="" every="" per_family=40 samples=0
mixes="" eval_mix=""
# --preset NAME: the nodes run with config/presets/NAME.env, and the study
# takes the flags of its "# experiment:" line; flags given here come after,
# so they win
for ((a = 1; a <= $#; a++)); do
  if [ "${!a}" = --preset ]; then
    b=$((a + 1))
    preset=${!b:-}
    [ -f "config/presets/$preset.env" ] || { echo "experiment: --preset: no config/presets/$preset.env" >&2; exit 2; }
    export SAPO_PRESET=$preset
    line=$(sed -n 's/^# experiment: //p' "config/presets/$preset.env" | head -n 1)
    set -- "${@:1:a-1}" "${@:a+2}"
    eval "set -- $line \"\$@\""
    break
  fi
done
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes) nodes=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --seeds) seeds=$2; shift 2 ;;
    --configs) configs=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --run) exp=$2; shift 2 ;;
    --eval-every) every=$2; shift 2 ;;
    --eval-questions) per_family=$2; shift 2 ;;
    --eval-samples) samples=$2; shift 2 ;;
    --mixes) mixes=$2; shift 2 ;;
    --eval-mix) eval_mix=$2; shift 2 ;;
    --quick) nodes=2 rounds=6 configs="8/0 4/4" per_family=4; shift ;;
    *) echo "experiment: unknown flag '$1' (see the top of scripts/experiment.sh)" >&2; exit 2 ;;
  esac
done
int() { [[ "$2" =~ ^[0-9]+$ ]] && [ "$2" -ge 1 ] || { echo "experiment: $1: '$2' is not a positive integer" >&2; exit 2; }; }
int --nodes "$nodes"; int --rounds "$rounds"; int --eval-questions "$per_family"
every=${every:-$(( rounds / 2 > 1 ? rounds / 2 : 1 ))}
int --eval-every "$every"
[[ "$samples" =~ ^[0-9]+$ ]] || { echo "experiment: --eval-samples: '$samples' is not a number" >&2; exit 2; }
IFS=, read -r -a seed_list <<< "$seeds"
for s in "${seed_list[@]}"; do int --seeds "$s"; done
for c in $configs; do
  [[ "$c" =~ ^[0-9]+/[0-9]+u?$ ]] || { echo "experiment: --configs: '$c' is not I/J or I/Ju" >&2; exit 2; }
done
for p in broker learner sampler generator verifier evaluate study; do
  [ -x "$SAPO_BIN/$p" ] || { echo "experiment: $SAPO_BIN/$p missing: run make first" >&2; exit 1; }
done
command -v redis-server > /dev/null ||
  { echo "experiment: redis-server is needed (make deps)" >&2; exit 1; }
exp=${exp:-run/experiment-$(date +%Y%m%d-%H%M%S)}
[ -e "$exp/manifest.json" ] && { echo "experiment: $exp already holds an experiment; pick another --run" >&2; exit 1; }
mkdir -p "$exp"
export SAPO_MODEL=$model
# the warm start runs alone: every core
warm_threads=${OMP_NUM_THREADS:-$(getconf _NPROCESSORS_ONLN)}
# a node's processes share the cores with every other node's: one thread each
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}

# each model's start: the base the warm start makes (once; the tiny model
# from nothing, a chat model's answer format when SAPO_FORMAT_STEPS > 0),
# else the model itself; what the nodes load, for the manifest
IFS=, read -r -a kinds <<< "$model"
# none given: the model setting's default (tiny, or a preset's)
[ ${#kinds[@]} -gt 0 ] || kinds=("")
starts=""
for m in "${kinds[@]}"; do
  OMP_NUM_THREADS=$warm_threads SAPO_MODEL=$m "$SAPO_BIN/learner" warmstart 2>&1 | sed 's/^/experiment: /'
  [ "${PIPESTATUS[0]}" = 0 ] || { echo "experiment: the warm start of ${m:-the model} failed" >&2; exit 1; }
  r=$(SAPO_MODEL=$m scripts/start_record.sh) || exit 1
  starts+="${starts:+, }$r"
done
start=$(date +%s)

# the CPU as lscpu names it, with its family and model numbers
cpu_name() {
  lscpu 2> /dev/null | awk -F': *' '/^Model name/ { n = $2 } /^CPU family/ { f = $2 } /^Model:/ { m = $2 }
    END { printf "%s (family %s, model %s)", n, f, m }'
}
json_str() { local s=${1//\\/\\\\}; s=${s//\"/\\\"}; printf '"%s"' "$s"; }
manifest() {
  local environment="" v
  for v in $(compgen -e | grep '^SAPO_' | sort); do environment+="${environment:+, }$(json_str "$v"): $(json_str "${!v}")"; done
  {
    printf '{"command": %s,\n' "$(json_str "scripts/experiment.sh ${SAPO_PRESET:+--preset $SAPO_PRESET }--nodes $nodes --rounds $rounds --seeds $seeds --configs \"$configs\" ${model:+--model $model }--eval-every $every --eval-questions $per_family$([ "$samples" -gt 0 ] && echo " --eval-samples $samples")${mixes:+ --mixes $mixes}${eval_mix:+ --eval-mix $eval_mix}")"
    printf ' "git_version": %s,\n' "$(json_str "$(git describe --always --dirty 2> /dev/null || echo unknown)")"
    printf ' "nodes": %d, "rounds": %d, "seeds": [%s], "configs": %s,\n' "$nodes" "$rounds" "$seeds" "$(json_str "$configs")"
    printf ' "eval_every": %d, "eval_questions_per_family": %d, "omp_threads": %d,\n' "$every" "$per_family" "$OMP_NUM_THREADS"
    printf ' "node_seed": "seed * 1000 + node index", "environment": {%s},\n' "$environment"
    printf ' "starts": [%s],\n' "$starts"
    printf ' "host": %s, "cpu": %s, "cores": %d, "started": "%s"' "$(json_str "$(uname -srm)")" "$(json_str "$(cpu_name)")" \
      "$(getconf _NPROCESSORS_ONLN)" "$(date -u -d @"$start" +%FT%TZ)"
    [ $# -gt 0 ] && printf ',\n "finished": "%s", "wall_seconds": %d, "seconds_per_configuration": {%s}' \
      "$(date -u +%FT%TZ)" "$(( $(date +%s) - start ))" "$1"
    printf '}\n'
  } > "$exp/manifest.json"
}
manifest
# the node settings' defaults as these binaries have them (the manifest holds the SAPO_* overrides)
"$SAPO_BIN/sampler" --help-markdown > "$exp/settings.md"

run=""
. scripts/evaluators.sh
cleanup() {
  for p in "${eval_pids[@]}"; do kill -TERM "$p" 2> /dev/null || true; done
  if [ -n "$run" ] && [ -f "$run/pids" ]; then scripts/swarm.sh stop --run "$run" > /dev/null; fi
}
trap 'cleanup; exit 130' INT TERM
trap cleanup EXIT

times=""
steps=$(( $(wc -w <<< "$configs") * ${#seed_list[@]} )) step=0
for c in $configs; do
  for s in "${seed_list[@]}"; do
    step=$((step + 1))
    # I/Ju: the external groups drawn and counted, not trained (the batch
    # reward's selection without its learning)
    untrained=0
    [[ "$c" == *u ]] && untrained=1
    run=$exp/I${c%/*}J${c#*/}/seed$s
    t0=$(date +%s)
    mkdir -p "$run"
    echo "experiment: step $step of $steps: $c, seed $s: $nodes nodes x $rounds rounds into $run"
    SAPO_EXTERNAL_TRAIN=$((1 - untrained)) scripts/swarm.sh start --nodes "$nodes" --ij "${c%u}" --models "$model" --mixes "$mixes" --rounds "$rounds" --run "$run" \
      --seed "$s" > "$run.log" 2>&1 ||
      { cat "$run.log" >&2; exit 1; }
    run=$(cd "$run" && pwd)
    for i in $(seq 0 $((nodes - 1))); do
      SAPO_MODEL=${kinds[$(( i < ${#kinds[@]} ? i : ${#kinds[@]} - 1 ))]} SAPO_TASK_MIX=${eval_mix:-${SAPO_TASK_MIX:-}} \
        evaluator_start "$run" "n$i" $((s * 1000 + i)) "$rounds" "$every" "$per_family" "$samples"
    done
    # until every node has run its rounds: on a terminal a line rewritten
    # in place, in a log a line per change of the rounds and at least one
    # every SAPO_PROGRESS_SECONDS
    said=$SECONDS
    while ! scripts/swarm.sh wait --run "$run" --timeout $((every < 5 ? every : 5)); do
      rounds_now=$(scripts/swarm.sh progress --run "$run" | cut -c1-150)
      line="  step $step of $steps ($c, seed $s), $(progress_elapsed $(($(date +%s) - t0))): $rounds_now"
      if [ -t 1 ]; then printf '\r%s' "$line"
      elif [ "$rounds_now" != "${shown:-}" ] || [ $((SECONDS - said)) -ge "$every" ]; then
        echo "$line"
        shown=$rounds_now said=$SECONDS
      fi
    done
    if [ -t 1 ]; then echo; fi
    scripts/swarm.sh stop --run "$run" > /dev/null
    evaluators_finish
    for i in $(seq 0 $((nodes - 1))); do
      r=$(tail -n 1 "$run/n$i/metrics.jsonl" 2> /dev/null | grep -o '"round":[0-9]*' | cut -d: -f2)
      [ "${r:-0}" -ge "$rounds" ] || { echo "experiment: node n$i of $c seed $s stopped at round ${r:-0} of $rounds (see $run/n$i/node.log)" >&2; exit 1; }
    done
    times+="${times:+, }\"$c seed $s\": $(( $(date +%s) - t0 ))"
    run=""
  done
done
manifest "$times"
"$SAPO_BIN/study" "$exp"
echo "experiment: done in $(( $(date +%s) - start )) s; results in $exp/results"
