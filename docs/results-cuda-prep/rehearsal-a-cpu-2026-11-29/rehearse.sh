#!/usr/bin/env bash
# session A on the CPU: a bare copy of the tree, the kit and SmolLM2's three
# parts carried as the plan carries them, then call 3's command with the CPU
# backend and a budget the CPU needs
set -u
src=/work/main
d=/work/rehearse/dev
rm -rf "$d" && mkdir -p "$d"
(cd $src && { git ls-files -z; git ls-files -z --others --exclude-standard; } | tar --null -T - -cf -) | tar -C "$d" -xf -
carry() { for p in "$@"; do mkdir -p "$d/$(dirname "$p")"; cp "$src/$p" "$d/$p"; done; }
S=.gpu/models/smollm2-135m
export OUT=/work/rehearse/outA; rm -rf $OUT; mkdir -p $OUT
carry .gpu/kit.tar.gz $S/parts.sha256 $S/part-03 $S/part-01 $S/part-02
cd "$d" && scripts/gpu_kit.sh unpack > $OUT/unpack.log 2>&1 && . .gpu/env && scripts/model.sh join smollm2-135m &&
  { time SAPO_BACKEND=cpu scripts/gpu_node.sh --preset smollm2-135m --minutes ${MINUTES:-20} --eval-questions ${EVALQ:-50} > /dev/null; } 2> $OUT/time.txt
echo "node rc=$?"
timeout 60 build/release/tests/test_cuda test_real_model 2>&1
ls -la $OUT
