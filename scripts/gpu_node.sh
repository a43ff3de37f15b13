#!/usr/bin/env bash
# One node, trained for a fixed time and judged before and after: what a
# lent GPU turns into within one device call. In order: the preset's warm
# start (once; none for a model that needs none), held-out greedy pass@1
# of the policy it starts from, one node (I own groups, no sharing) for as
# many rounds as fit the time, held-out pass@1 of its last policy version,
# and the report. Runs on whatever the settings say (SAPO_BACKEND=cuda:0 on
# a GPU; the CPU otherwise, as tests/t_gpu_node.sh runs it).
#
#   scripts/gpu_node.sh [--preset NAME] [--minutes M] [--eval-questions Q]
#       [--eval-every K] [--ij I/0] [--rounds R] [--run DIR] [--out DIR]
#
# --minutes: the whole command's time, evaluations included (default 8);
# the node stops when what is left is what the first evaluation took and
# a minute more. --eval-questions: held-out questions per family (default
# 100). --eval-every: also score the policy versions at multiples of K
# rounds on the same questions while the node runs, one at a time in its
# own process beside it (the newest such version each time; one still
# running when the node stops is finished where the time allows, else
# stopped and said), so the call tells when the rise came (default 0:
# none; on the CPU it takes the node's cores). --rounds: at most this
# many rounds (default: as many as fit).
# --run: the node's folder (default run/gpu-node); a folder that already
# holds a node resumes it from its checkpoint, and its first evaluation is
# not run again (a warm device machine keeps it between calls). --out:
# where the results go (default $OUT, else DIR/out): summary.md (pass@1
# before and after, rounds, time per round), manifest.json (what ran),
# eval.jsonl, completions.jsonl (every held-out completion of every
# evaluation, the start's first, by round, as the evaluator's
# eval-completions setting writes them),
# metrics.jsonl, report.md, node.log (its last 5,000 lines) and
# gpu_node.log: eight files, flat, as a device call brings them back.
set -euo pipefail
cd "$(dirname "$0")/.."
export SAPO_BIN=${SAPO_BIN:-bin}
minutes=8 per_family=100 every=0 ij=4/0 rounds=100000 run=run/gpu-node out=${OUT:-}
while [ $# -gt 0 ]; do
  case "$1" in
    --preset) export SAPO_PRESET=$2; shift 2 ;;
    --minutes) minutes=$2; shift 2 ;;
    --eval-questions) per_family=$2; shift 2 ;;
    --eval-every) every=$2; shift 2 ;;
    --ij) ij=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --run) run=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "gpu_node: unknown flag '$1' (see the top of scripts/gpu_node.sh)" >&2; exit 2 ;;
  esac
done
[[ "$minutes" =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "gpu_node: --minutes: '$minutes' is not a number" >&2; exit 2; }
[[ "$per_family" =~ ^[0-9]+$ ]] && [ "$per_family" -ge 1 ] ||
  { echo "gpu_node: --eval-questions: '$per_family' is not a positive integer" >&2; exit 2; }
[[ "$every" =~ ^[0-9]+$ ]] || { echo "gpu_node: --eval-every: '$every' is not a whole number of rounds" >&2; exit 2; }
[[ "$ij" =~ ^[0-9]+/0$ ]] || { echo "gpu_node: --ij: '$ij' is not I/0 (one node shares nothing)" >&2; exit 2; }
[[ "$rounds" =~ ^[0-9]+$ ]] && [ "$rounds" -ge 1 ] || { echo "gpu_node: --rounds: '$rounds' is not a positive integer" >&2; exit 2; }
for p in broker learner sampler generator verifier evaluate report; do
  [ -x "$SAPO_BIN/$p" ] || { echo "gpu_node: $SAPO_BIN/$p missing: run make (or scripts/gpu_kit.sh unpack)" >&2; exit 1; }
done
command -v redis-server > /dev/null || { echo "gpu_node: redis-server is needed (make deps, or . .gpu/env)" >&2; exit 1; }
start=$(date +%s)
deadline=$((start + $(awk -v m="$minutes" 'BEGIN { printf "%d", m * 60 }')))
mkdir -p "$run"
run=$(cd "$run" && pwd)
out=${out:-$run/out}
mkdir -p "$out"
log=$out/gpu_node.log
: > "$log"
say() { echo "gpu_node: $*" | tee -a "$log"; }
along_pid=""
trap '[ -z "$along_pid" ] || kill "$along_pid" 2> /dev/null; scripts/swarm.sh stop --run "$run" > /dev/null 2>&1 || true' EXIT

# where the node runs, as the manifest names it
device() {
  local b=${SAPO_BACKEND:-$("$SAPO_BIN/learner" --help 2> /dev/null | awk '$1 == "--backend" { gsub(/"/, "", $3); print $3 }')}
  if [[ "$b" == cuda:* ]] && command -v nvidia-smi > /dev/null; then
    echo "$b: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader -i "${b#cuda:}" 2> /dev/null | head -n 1)"
  else
    echo "${b:-cpu}: $(lscpu 2> /dev/null | awk -F': *' '/^Model name/ { print $2; exit }'), $(getconf _NPROCESSORS_ONLN) cores"
  fi
}

# 1. the policy RL starts from: the warm start makes it once where the
# preset asks for one
"$SAPO_BIN/learner" warmstart 2>&1 | sed 's/^/gpu_node: /' | tee -a "$log"
[ "${PIPESTATUS[0]}" = 0 ] || { say "the warm start failed"; exit 1; }
from=$("$SAPO_BIN/learner" start)
if [ -f "$from" ]; then hash=$(sha256sum "$from" | cut -d' ' -f1); else hash=$(cat "$from"/*.safetensors | sha256sum | cut -d' ' -f1); fi
say "the node starts from $from (sha256 $hash) on $(device)"

# 2. held-out pass@1 before, once per run folder
if [ ! -s "$run/eval-start.json" ]; then
  t0=$(date +%s)
  rm -f "$run/completions-start.jsonl"
  SAPO_EVAL_COMPLETIONS=$run/completions-start.jsonl "$SAPO_BIN/evaluate" once "$per_family" > "$run/eval-start.json.new" 2>> "$log" ||
    { say "the first evaluation failed (see $log)"; exit 1; }
  mv "$run/eval-start.json.new" "$run/eval-start.json"
  echo $(($(date +%s) - t0)) > "$run/eval-seconds"
fi
eval_s=$(cat "$run/eval-seconds")
say "before: $(grep -o '"pass1":[0-9.e-]*' "$run/eval-start.json" | tail -n 1) ($eval_s s to evaluate)"

# 3. the node, until what is left is the second evaluation and a minute
stop_at=$((deadline - eval_s - 60))
[ "$(date +%s)" -lt "$stop_at" ] || { say "no time left for a round (--minutes $minutes, an evaluation takes $eval_s s)"; exit 1; }
rows() { if [ -f "$run/n0/metrics.jsonl" ]; then wc -l < "$run/n0/metrics.jsonl"; else echo 0; fi; }
had=$(rows)
scripts/swarm.sh start --nodes 1 --ij "$ij" --rounds "$rounds" --run "$run" >> "$log" 2>&1 ||
  { say "the node did not start (see $log)"; exit 1; }
# each process's device memory as the driver counts it (the CUDA context
# included), once: a failing nvidia-smi is said, and the call goes on
smi=""
device_memory() {
  [ -z "$smi" ] && [ "$(rows)" -gt "$had" ] && command -v nvidia-smi > /dev/null || return 0
  smi=$(nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader 2>&1 | tr '\n' ';') ||
    smi="nvidia-smi failed: $smi"
  smi=${smi:-no process listed}
  say "nvidia-smi, each process: $smi" > /dev/null
}
# held-out pass@1 of policy version $1 into $2, its completions into $3;
# run it with & (the evaluator then replaces the subshell: $! is its pid)
score_version() {
  rm -f "$3"
  SAPO_FORMAT_STEPS=0 SAPO_EVAL_COMPLETIONS=$3 exec "$SAPO_BIN/evaluate" --model "$run/n0/policy/v$1" \
    once "$per_family" > "$2" 2>> "$log"
}
# the numbers N of the names in folder $1 that the sed pattern $2 (N as
# \1) matches, in order
numbered() { ls "$1" 2> /dev/null | sed -n "s/^$2\$/\1/p" | sort -n || true; }
# --eval-every: the newest version at a multiple of K not yet scored,
# scored beside the node in a process of its own, one at a time, as the
# last version is scored below (a version the learner has since deleted
# fails that evaluation, said, and the next is tried)
along_v="" along_done=$(numbered "$run" 'eval-along-v\([0-9]*\)\.json' | tail -n 1)
along_done=${along_done:-0}
along_start() {
  [ "$every" -gt 0 ] && [ -z "$along_pid" ] || return 0
  along_v=$(numbered "$run/n0/policy" 'v\([0-9]*\)' | awk -v k="$every" -v d="$along_done" '$1 > d && $1 % k == 0' | tail -n 1)
  [ -n "$along_v" ] || return 0
  score_version "$along_v" "$run/eval-along-v$along_v.json.new" "$run/completions-along-v$along_v.jsonl" &
  along_pid=$!
}
along_end() { # $1: wait, or stop (one still running is stopped)
  [ -n "$along_pid" ] || return 0
  local new=$run/eval-along-v$along_v.json.new
  if [ "$1" = stop ] && kill "$along_pid" 2> /dev/null; then
    say "the evaluation of policy version $along_v stopped: no time left for it"
  elif wait "$along_pid" && [ -s "$new" ]; then
    mv "$new" "$run/eval-along-v$along_v.json"
    say "along the way: policy version $along_v $(grep -o '"pass1":[0-9.e-]*' "$run/eval-along-v$along_v.json" | tail -n 1)"
  else
    say "the evaluation of policy version $along_v failed (see $log)"
  fi
  wait "$along_pid" 2> /dev/null || true
  [ -s "$run/eval-along-v$along_v.json" ] || rm -f "$new" "$run/completions-along-v$along_v.jsonl"
  along_done=$along_v along_pid=""
}
# time for an evaluation still to come beside the last one, and a minute
room() { [ $(($(date +%s) + 2 * eval_s + 60)) -le "$deadline" ]; }
while scripts/swarm.sh wait --run "$run" --timeout 5 > /dev/null 2>&1; [ $? != 0 ] && [ "$(date +%s)" -lt "$stop_at" ]; do
  say "$(scripts/swarm.sh progress --run "$run" | cut -c1-150)" > /dev/null
  device_memory
  if [ -n "$along_pid" ] && ! kill -0 "$along_pid" 2> /dev/null; then along_end wait; fi
  along_start
done
# where the rounds ended between two looks, before the processes stop
device_memory
scripts/swarm.sh stop --run "$run" >> "$log" 2>&1
# the evaluation beside the node finished, and one of a version not yet
# scored, where the time allows
if room; then
  along_end wait
  if room; then along_start; fi
fi
if room; then along_end wait; else along_end stop; fi
now=$(rows)
say "$((now - had)) rounds in this call, $now in all"
[ "$now" -gt 0 ] || { say "the node ran no round (see $run/n0/node.log)"; cp "$run/n0/node.log" "$out/" 2> /dev/null; exit 1; }

# 4. held-out pass@1 of the last policy version the learner wrote, its
# lines labelled with the round and version its folder records
last=$(numbered "$run/n0/policy" 'v\([0-9]*\)' | tail -n 1)
[ -n "$last" ] || { say "no policy version in $run/n0/policy"; exit 1; }
if [ -s "$run/eval-along-v$last.json" ]; then # scored already, beside the node
  cp "$run/eval-along-v$last.json" "$run/eval-v$last.json"
  cp "$run/completions-along-v$last.jsonl" "$run/completions-v$last.jsonl" 2> /dev/null || true
else
  score_version "$last" "$run/eval-v$last.json" "$run/completions-v$last.jsonl" &
  wait $! || { say "the second evaluation failed (see $log)"; exit 1; }
fi

# 5. what ran, and what it did
"$SAPO_BIN/report" "$run/n0" > /dev/null 2>> "$log" || say "report: see $log"
cp "$run/n0/report/summary.md" "$out/report.md" 2> /dev/null || true
cp "$run/n0/metrics.jsonl" "$out/"
tail -n 5000 "$run/n0/node.log" > "$out/node.log"
# the start, the versions scored along the way (this call's and earlier
# ones', before the last), the last
along=$(numbered "$run" 'eval-along-v\([0-9]*\)\.json' | awk -v l="$last" '$1 < l')
{
  cat "$run/eval-start.json"
  for v in $along; do cat "$run/eval-along-v$v.json"; done
  cat "$run/eval-v$last.json"
} > "$out/eval.jsonl"
# every held-out completion of those evaluations, to read what the model wrote
{
  cat "$run/completions-start.jsonl"
  for v in $along; do cat "$run/completions-along-v$v.jsonl"; done
  cat "$run/completions-v$last.jsonl"
} > "$out/completions.jsonl" 2> /dev/null || true
json_str() { local s=${1//\\/\\\\}; s=${s//\"/\\\"}; printf '"%s"' "$s"; }
{
  environment=""
  for v in $(compgen -e | grep '^SAPO_' | sort); do environment+="${environment:+, }$(json_str "$v"): $(json_str "${!v}")"; done
  version=$(git describe --always --dirty 2> /dev/null || cat .gpu/version 2> /dev/null || echo unknown)
  printf '{"command": %s,\n' "$(json_str "scripts/gpu_node.sh ${SAPO_PRESET:+--preset $SAPO_PRESET }--minutes $minutes --eval-questions $per_family$([ "$every" = 0 ] || echo " --eval-every $every") --ij $ij$([ "$rounds" = 100000 ] || echo " --rounds $rounds")")"
  printf ' "version": %s, "device": %s,\n' "$(json_str "$version")" "$(json_str "$(device)")"
  printf ' "start": %s,\n' "$(scripts/start_record.sh)"
  printf ' "environment": {%s},\n' "$environment"
  printf ' "rounds": %d, "evaluated_version": %d, "wall_seconds": %d}\n' "$now" "$last" $(($(date +%s) - start))
} > "$out/manifest.json"
python3 - "$out" "$now" "$had" "$(device)" "$last" "$smi" > "$out/summary.md" <<'PY'
import json, re, statistics, sys
out, rounds, had, device, version, smi = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), sys.argv[6]
evals = [json.loads(l) for l in open(out + "/eval.jsonl")]
lines = [json.loads(l) for l in open(out + "/metrics.jsonl")][had:]
def med(xs):
    return statistics.median(xs) if xs else float("nan")
walls = [b["time"] - a["time"] for a, b in zip(lines, lines[1:])]
secs = lambda k: med([l.get("seconds", {}).get(k, 0) for l in lines])
b, a = evals[0], evals[-1]
print("# One node, %d round%s (%d in this call), on %s\n" % (rounds, "" if rounds == 1 else "s", len(lines), device))
print("| | before | after (policy version %d) |" % version)
print("|---|---|---|")
print("| held-out greedy pass@1 (%d questions) | %.3f | %.3f |" % (a["questions"], b["pass1"], a["pass1"]))
print("| scorers' mean (partial credit) | %.3f | %.3f |" % (b["score"], a["score"]))
print("| answers in the tags | %.3f | %.3f |" % (b["format"], a["format"]))
for f in sorted(b["families"]):
    print("| pass@1 %s | %.3f | %.3f |" % (f, b["families"][f], a["families"].get(f, float("nan"))))
print("\nChange in pass@1: %+.3f.\n" % (a["pass1"] - b["pass1"]))
if len(evals) > 2:
    print("Held-out greedy pass@1 along the way: %s.\n" % ", ".join(
        "round %d %.3f" % (e["round"], e["pass1"]) for e in evals))
between = "%.1f s of wall time between the learner's steps" % med(walls) if walls else \
    "no time between steps (one round)"
print("A round (medians over this call's rounds): %s, %.1f s training, %.1f s generating its own groups "
      "(the generators' clocks, summed over groups), %.1f s verifying." %
      (between, secs("train"), secs("generate"), secs("verify")))
def own(l):  # metrics_round_reward: every own completion scored for the round
    s = l.get("sampler", {})
    return s["scored_reward"] if s.get("scored_completions") else l.get("reward_mean")
rew = [own(l) for l in lines if isinstance(own(l), (int, float))]
if rew:
    k = max(1, len(rew) // 5)
    print("\nOwn reward: first %d rounds %.3f, last %d rounds %.3f." % (k, sum(rew[:k]) / k, k, sum(rew[-k:]) / k))
# what GRPO had to learn from: of every own group the sampler scored for a
# round (its completions / completions a group), the share whose
# completions all scored alike, dropped or trained (the batch's
# zero_adv_share counts only the groups trained). The sampler counts
# those since its process started and scored_completions per round, so a
# round's are the difference from the line before (from zero after a
# restart, where the count falls)
size = json.load(open(out + "/manifest.json"))["start"]["settings"]["completions"]
zero, seen = [], 0
for s in (l.get("sampler", {}) for l in lines):
    if "local_zero_adv_dropped" not in s:
        continue
    alike = s["local_zero_adv_dropped"] + s["local_zero_adv_kept"]
    if s.get("scored_completions"):
        zero.append((alike - seen if alike >= seen else alike) / (s["scored_completions"] / size))
    seen = alike
if zero:
    print("\nOwn groups whose completions all scored alike (no advantage to learn from): %.2f of them a round "
          "(median), %.2f in the first round, %.2f in the last." % (med(zero), zero[0], zero[-1]))
# each process's model on the device, at most (policy_log_memory's last line)
peaks = {}
for line in open(out + "/node.log", errors="replace"):
    m = re.search(r"(learner|generator)\.\d+ *\| \S+ (cuda:\d+ memory of the model.*)", line)
    if m:
        peaks[m.group(1)] = m.group(2)
for proc, text in sorted(peaks.items()):
    print("\n%s: %s." % (proc, text))
if smi:
    print("\nnvidia-smi once the node had trained a round (each process, its CUDA context included): %s" % smi)
PY
cat "$out/summary.md" | tee -a "$log"
say "done in $(($(date +%s) - start)) s; results in $out"
