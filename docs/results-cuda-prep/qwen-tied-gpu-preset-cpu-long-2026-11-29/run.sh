#!/usr/bin/env bash
cd /work/studies/qwencpu
date -u
SAPO_BACKEND=cpu OMP_NUM_THREADS=2 SAPO_QUESTIONS=4 SAPO_GENERATE_BATCH=4 SAPO_MICRO_BATCH=4 SAPO_STALL_SECONDS=1800 \
  scripts/gpu_node.sh --preset qwen2.5-coder-0.5b-gpu --minutes 128 --eval-questions 100 --run run/qwen-cpu-long
echo "rc=$?"
date -u
