#!/usr/bin/env bash
# session B on the CPU: a bare copy of the tree at a clean commit, the kit
# and the tied Qwen's eight parts carried as the plan carries them, then
# call 8's command with the CPU backend and a budget the CPU needs
set -u
src=/work/main
d=/work/rehearse/devB
rm -rf "$d" && mkdir -p "$d"
(cd $src && git ls-files -z | tar --null -T - -cf -) | tar -C "$d" -xf -
carry() { for p in "$@"; do mkdir -p "$d/$(dirname "$p")"; cp "$src/$p" "$d/$p"; done; }
Q=.gpu/models/qwen2.5-coder-0.5b-tied
export OUT=/work/rehearse/outB; rm -rf $OUT; mkdir -p $OUT
date -u
carry .gpu/kit.tar.xz $Q/parts.sha256 $Q/part-08
cd "$d" && scripts/gpu_kit.sh unpack > $OUT/unpack.log 2>&1 && . .gpu/env || { echo "unpack failed"; exit 1; }
for i in 01 02 03 04 05 06 07; do carry $Q/part-$i; done
scripts/model.sh join qwen2.5-coder-0.5b-tied > $OUT/join.log 2>&1 || { echo "join failed"; cat $OUT/join.log; exit 1; }
date -u
{ time SAPO_BACKEND=cpu OMP_NUM_THREADS=2 SAPO_QUESTIONS=4 SAPO_GENERATE_BATCH=4 SAPO_MICRO_BATCH=4 SAPO_STALL_SECONDS=1800 \
    scripts/gpu_node.sh --preset qwen2.5-coder-0.5b-gpu --minutes ${MINUTES:-115} --eval-questions 200 --eval-every 5 > /dev/null; } 2> $OUT/time.txt
echo "node rc=$?"
ls -la $OUT
date -u
