#!/usr/bin/env bash
# after the seed-2 run: held-out greedy pass@1 on the same 200 questions of
# the policy versions copied aside (5, 10, 15, 20), as gpu_node.sh scores its last
cd /work/studies/qwencpu2
until grep -q '^rc=' /work/studies/qwencpu2-run.log; do sleep 30; done
date -u
r=run/qwen-cpu-seed2
export SAPO_PRESET=qwen2.5-coder-0.5b-gpu SAPO_SEED=2 SAPO_MODEL=run/base-qwen2.5-coder-0.5b-tied-gpu SAPO_BACKEND=cpu OMP_NUM_THREADS=2 SAPO_BIN=bin
for v in 10 5 20 15; do
  [ -d $r/snap/v$v ] || { echo "no v$v"; continue; }
  t0=$(date +%s)
  rm -f $r/completions-snap-v$v.jsonl
  SAPO_FORMAT_STEPS=0 SAPO_EVAL_COMPLETIONS=$r/completions-snap-v$v.jsonl bin/evaluate --model $r/snap/v$v once 200 > $r/eval-snap-v$v.json
  echo "v$v rc=$? $(($(date +%s) - t0)) s $(grep -o '"pass1":[0-9.e-]*' $r/eval-snap-v$v.json | tail -n 1)"
done
date -u
