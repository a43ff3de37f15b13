#!/usr/bin/env bash
# second seed of the Qwen GPU preset on the CPU, 200 held-out questions,
# the seed-1 base (run 1s, sha256 bc2b6985...) as the model, no warm start;
# policy versions 5, 10, 15, 20 copied aside for later evaluation
cd /work/studies/qwencpu2
date -u
r=run/qwen-cpu-seed2
mkdir -p $r/snap
( while true; do
    for v in 5 10 15 20; do
      n=$((v + 1))
      if [ -d $r/n0/policy/v$n ] && [ ! -d $r/snap/v$v ]; then cp -r $r/n0/policy/v$v $r/snap/v$v.tmp && mv $r/snap/v$v.tmp $r/snap/v$v && echo "snap v$v $(date -u +%T)"; fi
    done
    sleep 20
  done ) &
snap=$!
SAPO_SEED=2 SAPO_FORMAT_STEPS=0 SAPO_MODEL=run/base-qwen2.5-coder-0.5b-tied-gpu SAPO_BACKEND=cpu OMP_NUM_THREADS=2 SAPO_QUESTIONS=4 SAPO_GENERATE_BATCH=4 SAPO_MICRO_BATCH=4 SAPO_STALL_SECONDS=1800 \
  scripts/gpu_node.sh --preset qwen2.5-coder-0.5b-gpu --minutes 110 --eval-questions 200 --run $r
echo "rc=$?"
kill $snap
date -u
