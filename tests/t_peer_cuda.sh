#!/usr/bin/env bash
# bench_cuda's PyTorch peers (bench/peer_cuda.py), checked here before a GPU
# is lent: on the CPU (--device cpu) with the micro model as bench_cuda
# saves a model, each training peer (eager with bf16 autocast, the same
# under torch.compile, bf16 weights compiled) and the generation peer
# print the one line bench_cuda reads, a compiled peer its compile seconds;
# a bad peer name is refused. Skips where .venv has no torch and
# transformers (tests/oracle/setup.sh makes it; make test needs no Python
# packages).
set -u
cd "$(dirname "$0")/.."
bin=${SAPO_BIN:-build/asan/bin}
py=.venv/bin/python
if ! [ -x "$py" ] || ! "$py" -c "import torch, transformers" 2> /dev/null; then
  echo "SKIP peer_cuda: no .venv with torch and transformers (tests/oracle/setup.sh)"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. tests/nodes.sh
micro_model peer_cuda
check() { if eval "$2"; then echo "PASS peer_cuda_$1"; else echo "FAIL peer_cuda_$1"; cat "$tmp/$1.err" 2> /dev/null | tail -5; fi; }
num='[0-9]+(\.[0-9]+)?'
for p in eager compile compile-bf16; do
  "$py" bench/peer_cuda.py "$tmp/micro" --device cpu --train --peer "$p" --batch 2 --seq 16 --reps 1 > "$tmp/$p.out" 2> "$tmp/$p.err"
  check "$p" "grep -Eqx 'train $num mem 0 compile $num' '$tmp/$p.out'"
done
check compile_seconds "awk '{ exit !(\$6 > 0) }' '$tmp/compile.out' && awk '{ exit !(\$6 == 0) }' '$tmp/eager.out'"
"$py" bench/peer_cuda.py "$tmp/micro" --device cpu --prompts 2 --completions 2 --prompt-len 8 --new 4 --reps 1 > "$tmp/gen.out" 2> "$tmp/gen.err"
check gen "grep -Eqx 'gen $num mem 0' '$tmp/gen.out'"
"$py" bench/peer_cuda.py "$tmp/micro" --device cpu --train --peer fast --reps 1 > /dev/null 2> "$tmp/bad.err"
check bad_peer "[ \$? != 0 ] && grep -q \"invalid choice: 'fast'\" '$tmp/bad.err'"
