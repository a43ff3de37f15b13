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
#
# Resuming: the same command on a folder that holds this study unfinished
# (stopped, killed, its machine gone) goes on instead of starting again.
# Steps that ended are kept; the step it stopped in starts its nodes again
# from their last checkpoints (every SAPO_CHECKPOINT_EVERY rounds) and its
# evaluators after the rounds their eval.jsonl holds; a line half written
# by a killed process is cut. Within a seed a J = 0 step then ends with
# the same metrics and evaluations as one run straight through
# (tests/t_resume.sh); a step with J > 0 draws from a fresh pool. The
# manifest keeps the first start, lists each resume and counts each
# step's own seconds. A finished study, or one run with other settings or
# from other starts, is refused with a line. A finished step's folder
# keeps each node's files and last policy version, not its checkpoints.
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
json_str() { local s=${1//\\/\\\\}; s=${s//\"/\\\"}; printf '"%s"' "$s"; }
command_line="scripts/experiment.sh ${SAPO_PRESET:+--preset $SAPO_PRESET }--nodes $nodes --rounds $rounds --seeds $seeds --configs \"$configs\" ${model:+--model $model }--eval-every $every --eval-questions $per_family$([ "$samples" -gt 0 ] && echo " --eval-samples $samples" || true)${mixes:+ --mixes $mixes}${eval_mix:+ --eval-mix $eval_mix}"
# A folder that holds this study unfinished (stopped, killed, its machine
# gone) is resumed: its finished steps are kept, the step it stopped in
# starts again from its nodes' checkpoints and evaluations
resumed=""
if [ -e "$exp/manifest.json" ]; then
  grep -q '"started"' "$exp/manifest.json" ||
    { echo "experiment: $exp/manifest.json is not a whole manifest; pick another --run" >&2; exit 1; }
  grep -q '"finished"' "$exp/manifest.json" &&
    { echo "experiment: $exp holds a finished experiment; pick another --run" >&2; exit 1; }
  was=$(head -n 1 "$exp/manifest.json")
  [ "$was" = "{\"command\": $(json_str "$command_line")," ] ||
    { echo "experiment: $exp holds another experiment (${was#*: }); resume it with its own command or pick another --run" >&2; exit 1; }
  resumed=$(sed -n 's/.*"started": "\([^"]*\)".*/\1/p' "$exp/manifest.json")
  echo "experiment: resuming $exp (started $resumed)"
fi
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
environment_json() {
  local environment="" v
  for v in $(compgen -e | grep '^SAPO_' | sort); do environment+="${environment:+, }$(json_str "$v"): $(json_str "${!v}")"; done
  printf ' "node_seed": "seed * 1000 + node index", "environment": {%s},' "$environment"
}
manifest() {
  local environment
  environment=$(environment_json)
  {
    printf '{"command": %s,\n' "$(json_str "$command_line")"
    printf ' "git_version": %s,\n' "$(json_str "$(git describe --always --dirty 2> /dev/null || echo unknown)")"
    printf ' "nodes": %d, "rounds": %d, "seeds": [%s], "configs": %s,\n' "$nodes" "$rounds" "$seeds" "$(json_str "$configs")"
    printf ' "eval_every": %d, "eval_questions_per_family": %d, "omp_threads": %d,\n' "$every" "$per_family" "$OMP_NUM_THREADS"
    printf '%s\n' "$environment"
    printf ' "starts": [%s],\n' "$starts"
    printf ' "host": %s, "cpu": %s, "cores": %d, "started": "%s"' "$(json_str "$(uname -srm)")" "$(json_str "$(cpu_name)")" \
      "$(getconf _NPROCESSORS_ONLN)" "${resumed:-$(date -u -d @"$start" +%FT%TZ)}"
    [ -n "$resumed_at" ] && printf ',\n "resumed": [%s]' "$resumed_at"
    # resumed: the steps' own seconds, not the time the study lay stopped
    [ $# -gt 0 ] && printf ',\n "finished": "%s", "wall_seconds": %d, "seconds_per_configuration": {%s}' \
      "$(date -u +%FT%TZ)" "${2:-$(( $(date +%s) - start ))}" "$1"
    printf '}\n'
  } > "$exp/manifest.json.new"
  # whole or not at all: a study killed as it writes keeps the one before
  mv "$exp/manifest.json.new" "$exp/manifest.json"
}
resumed_at=""
if [ -n "$resumed" ]; then
  # the same settings and starts as the steps already run (the
  # manifest's lines 5 and 6), but for where the binaries are and how
  # often progress is said
  pairs() { grep -o '"SAPO_[A-Z0-9_]*": "[^"]*"' | grep -vE '"SAPO_(BIN|PROGRESS_SECONDS)"' | sort; }
  changed=$(diff <(sed -n 5p "$exp/manifest.json" | pairs) <(environment_json | pairs) |
    sed -n 's/^[<>] "\(SAPO_[A-Z0-9_]*\)".*/\1/p' | sort -u | paste -sd' ' || true)
  [ -z "$changed" ] || { echo "experiment: $exp was run with other settings ($changed differ); resume it with its own" >&2; exit 1; }
  sums() { grep -o '"\(model_file_\|start_\)sha256": "[^"]*"'; }
  [ "$(sed -n 6p "$exp/manifest.json" | sums)" = "$(sums <<< "$starts")" ] ||
    { echo "experiment: $exp was run from other starts than now ($(grep -o '"start_sha256": "[^"]*"' "$exp/manifest.json" | cut -c17-32 | paste -sd' ')...); resume it from its own" >&2; exit 1; }
  resumed_at=$(sed -n 's/^ "resumed": \[\(.*\)\],*$/\1/p' "$exp/manifest.json")
  resumed_at+="${resumed_at:+, }\"$(date -u -d @"$start" +%FT%TZ)\""
fi
manifest
# the node settings' defaults as these binaries have them (the manifest holds the SAPO_* overrides)
"$SAPO_BIN/sampler" --help-markdown > "$exp/settings.md"

# the round of the last whole line of a node's metrics or eval file (0: none)
last_round() {
  local r
  r=$(tail -n 2 "$1" 2> /dev/null | grep '}$' | tail -n 1 | grep -o '"round":[0-9]*' | head -n 1 | cut -d: -f2)
  echo "${r:-0}"
}
# a step's folder whose every node ran its rounds and was scored at the last
step_finished() {
  local i
  for i in $(seq 0 $((nodes - 1))); do
    [ "$(last_round "$1/n$i/metrics.jsonl")" -ge "$rounds" ] && [ "$(last_round "$1/n$i/eval.jsonl")" -ge "$rounds" ] || return 1
  done
}
# " n0 R0, n1 R1, ...": the round each node of a step's folder logged last
rounds_logged() {
  local i out=""
  for i in $(seq 0 $((nodes - 1))); do out+="${out:+,} n$i $(last_round "$1/n$i/metrics.jsonl")"; done
  echo "$out"
}
# the seconds a step's folder was worked on: from its swarm's start (its
# log's time) to the last file its nodes wrote
step_age() {
  local last
  last=$(find "$1" -type f -printf '%T@\n' | sort -n | tail -n 1)
  echo $(( ${last%.*} > $(stat -c %Y "$1.log") ? ${last%.*} - $(stat -c %Y "$1.log") : 0 ))
}

run=""
. scripts/evaluators.sh
cleanup() {
  for p in "${eval_pids[@]}"; do kill -TERM "$p" 2> /dev/null || true; done
  if [ -n "$run" ] && [ -f "$run/pids" ]; then scripts/swarm.sh stop --run "$run" > /dev/null; fi
}
trap 'cleanup; exit 130' INT TERM
trap cleanup EXIT

times="" total=0
steps=$(( $(wc -w <<< "$configs") * ${#seed_list[@]} )) step=0
for c in $configs; do
  for s in "${seed_list[@]}"; do
    step=$((step + 1))
    # I/Ju: the external groups drawn and counted, not trained (the batch
    # reward's selection without its learning)
    untrained=0
    [[ "$c" == *u ]] && untrained=1
    run=$exp/I${c%/*}J${c#*/}/seed$s
    t0=$(date +%s) before=0
    if [ -f "$run.seconds" ] || { [ -d "$run" ] && step_finished "$run"; }; then
      # run before: a step whose folder holds its last round and
      # evaluations is done (a version that wrote no .seconds: the time
      # from its start to its last file)
      [ -f "$run.seconds" ] || step_age "$run" > "$run.seconds"
      echo "experiment: step $step of $steps: $c, seed $s: done before, in $(cat "$run.seconds") s"
      times+="${times:+, }\"$c seed $s\": $(cat "$run.seconds")"
      total=$((total + $(cat "$run.seconds")))
      run=""
      continue
    fi
    if [ -d "$run" ]; then
      # stopped midway: whatever of it still runs is ended, and its
      # nodes start again from their checkpoints; its time so far counts
      before=$(( $(cat "$run.before" 2> /dev/null || echo 0) + $(step_age "$run") ))
      echo "$before" > "$run.before"
      scripts/swarm.sh stop --run "$run" > /dev/null 2>&1 || true
      echo "experiment: step $step of $steps: $c, seed $s: resuming in $run from its nodes' checkpoints (stopped at rounds$(rounds_logged "$run"))"
    else
      echo "experiment: step $step of $steps: $c, seed $s: $nodes nodes x $rounds rounds into $run"
    fi
    mkdir -p "$run"
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
      r=$(last_round "$run/n$i/metrics.jsonl")
      [ "$r" -ge "$rounds" ] || { echo "experiment: node n$i of $c seed $s stopped at round $r of $rounds (see $run/n$i/node.log)" >&2; exit 1; }
    done
    echo $(( $(date +%s) - t0 + before )) > "$run.seconds"
    # a finished step needs no checkpoints (a resume starts only the step
    # it stopped in) and keeps each node's last policy, for scoring its
    # answers again: a three-node SmolLM2 seed of two configurations held
    # 31 GB without this, most of it checkpoints
    for i in $(seq 0 $((nodes - 1))); do
      rm -rf "$run/n$i/ckpt"
      find "$run/n$i/policy" -mindepth 1 -maxdepth 1 -name 'v*' 2> /dev/null | sort -V | head -n -1 | xargs -r rm -rf
    done
    times+="${times:+, }\"$c seed $s\": $(cat "$run.seconds")"
    total=$((total + $(cat "$run.seconds")))
    run=""
  done
done
if [ -n "$resumed" ]; then
  manifest "$times" "$total"
else
  manifest "$times"
fi
"$SAPO_BIN/study" "$exp"
echo "experiment: done in $(( $(date +%s) - start )) s; results in $exp/results"
