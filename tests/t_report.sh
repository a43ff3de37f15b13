#!/usr/bin/env bash
# bin/report on metrics written by hand: the reward plots and one plot per
# diagnostic, the diagnostics as columns of each node's data file, no
# gnuplot warning for a diagnostic that never moves, and metrics from
# before the diagnostics still reported (their plots left out), and the
# summary's change from the first window of rounds to the last.
set -u
cd "$(dirname "$0")/.."
r=${SAPO_BIN:-build/asan/bin}/report
if [ ! -x "$r" ]; then echo "SKIP report: $r not built"; exit 0; fi
command -v gnuplot > /dev/null || { echo "SKIP report: gnuplot not installed"; exit 0; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
check() { if eval "$2"; then echo "PASS report_$1"; else echo "FAIL report_$1"; fi; }

for n in n0 n1; do
  mkdir -p "$tmp/run/$n"
  for i in 1 2 3 4; do
    printf '{"round":%d,"reward_mean":0.%d,"entropy":0.%d,"completion_length":%d,"truncated_share":0,"format_share":1,"local":{"zero_adv_share":0.5},"ratio_max":1.%d}\n' \
      $i $i $((9 - i)) $((20 + i)) $i >> "$tmp/run/$n/metrics.jsonl"
  done
done
"$r" "$tmp/run" > "$tmp/out" 2> "$tmp/err"; rc=$?
check rc '[ $rc = 0 ]'
check plots '[ $(ls "$tmp/run/report/"*.png | wc -l) = 9 ] && [ -s "$tmp/run/report/entropy.png" ] && [ -s "$tmp/run/report/zero_adv_share.png" ]'
# round reward moving_average cumulative batch_reward (NaN: these metrics
# predate it), then the diagnostics in the plots' order
check columns 'awk "NR == 3 { exit !(\$5 == \"NaN\" && \$6 == 0.7 && \$7 == 22 && \$8 == 0 && \$9 == 1 && \$10 == 0.5 && \$11 == 1.2) }" "$tmp/run/report/n0.dat"'
check no_warning '! grep -qi warning "$tmp/err"'
# window 1 here (4 rounds): the change is the last round's reward minus the first's
check change 'grep -qF "| n0 | 4 | 0.2500 | 0.1000 | 0.4000 | +0.3000 | 1.00 |" "$tmp/run/report/summary.md"'

# a round's reward is every scored own completion's (sampler.scored_reward), not the trained groups'
mkdir -p "$tmp/scored/n0"
printf '{"round":1,"reward_mean":0.5,"sampler":{"scored_reward":0.25,"scored_completions":32}}\n{"round":2,"reward_mean":0.5,"sampler":{"scored_reward":0.75,"scored_completions":40}}\n' > "$tmp/scored/n0/metrics.jsonl"
"$r" "$tmp/scored" --window 1 > /dev/null 2>&1
check scored_reward 'grep -qF "| n0 | 2 | 0.5000 | 0.2500 | 0.7500 | +0.5000 | 1.00 |" "$tmp/scored/report/summary.md"'

mkdir -p "$tmp/old/n0"
printf '{"round":1,"reward_mean":0.1}\n{"round":2,"reward_mean":0.2}\n' > "$tmp/old/n0/metrics.jsonl"
"$r" "$tmp/old" > "$tmp/out2" 2> "$tmp/err2"; rc=$?
check old_metrics '[ $rc = 0 ] && [ $(ls "$tmp/old/report/"*.png | wc -l) = 3 ] && grep -q "NaN" "$tmp/old/report/n0.dat"'
