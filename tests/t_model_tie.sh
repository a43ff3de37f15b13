#!/usr/bin/env bash
# A GGUF file's two copies of a tied embedding made one (scripts/gguf_tie.py)
# and what a model makes of completions already written (bin/logprobs), on
# the micro Llama of the fuzz seeds and its copy with output.weight written
# out (tests/golden/gguf/micro-llama-untied.gguf, tests/oracle/gguf_seed.py):
# tied back, either way, it is the micro Llama byte for byte; a file with
# nothing to tie and a file that is not GGUF get one line each; sapo reads
# the untied copy and the tied one alike, and logprobs refuses and counts
# the lines it cannot read.
set -u
cd "$(dirname "$0")/.."
bin=${SAPO_BIN:-build/asan/bin}
. tests/nodes.sh
need model_tie logprobs
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
check() { if eval "$2"; then echo "PASS model_tie_$1"; else echo "FAIL model_tie_$1"; fi; }
micro=fuzz/seeds/fuzz_gguf/micro-llama.gguf untied=tests/golden/gguf/micro-llama-untied.gguf

python3 scripts/gguf_tie.py "$untied" "$tmp/tied.gguf" > "$tmp/tie.out" 2>&1; rc=$?
check same_bytes '[ $rc = 0 ] && cmp -s "$tmp/tied.gguf" "$micro" && grep -q "24864 before" "$tmp/tie.out"'
python3 scripts/gguf_tie.py "$untied" "$tmp/tied-out.gguf" --keep output > /dev/null 2>&1; rc=$?
check keep_output '[ $rc = 0 ] && cmp -s "$tmp/tied-out.gguf" "$micro"'
# in the golden file both copies hold the same bytes, so the two checks
# above pass whichever copy is kept: a copy whose output.weight (the
# file's last 8,288 bytes) is halved tells them apart
python3 -c '
import struct, sys
data = open(sys.argv[1], "rb").read()
n = 8288 // 4
out = struct.unpack("<%df" % n, data[-8288:])
open(sys.argv[2], "wb").write(data[:-8288] + struct.pack("<%df" % n, *(x / 2 for x in out)))' "$untied" "$tmp/halved.gguf"
python3 scripts/gguf_tie.py "$tmp/halved.gguf" "$tmp/halved-emb.gguf" > /dev/null 2>&1
python3 scripts/gguf_tie.py "$tmp/halved.gguf" "$tmp/halved-out.gguf" --keep output > /dev/null 2>&1; rc=$?
check keep_output_takes_its_bytes '[ $rc = 0 ] && cmp -s "$tmp/halved-emb.gguf" "$micro" && ! cmp -s "$tmp/halved-out.gguf" "$micro" &&
  python3 -c "
import sys
halved, out, micro, untied = (open(p, \"rb\").read() for p in sys.argv[1:5])
assert len(out) == len(micro) and halved[-8288:] in out and untied[-8288:] not in out
" "$tmp/halved.gguf" "$tmp/halved-out.gguf" "$micro" "$untied"'
python3 scripts/gguf_tie.py "$micro" "$tmp/twice.gguf" > /dev/null 2> "$tmp/twice.err"; rc=$?
check refuses_tied '[ $rc = 1 ] && [ $(wc -l < "$tmp/twice.err") = 1 ] && grep -q "no output.weight: its embeddings are tied already" "$tmp/twice.err" && [ ! -e "$tmp/twice.gguf" ]'
python3 scripts/gguf_tie.py tests/t_model_tie.sh "$tmp/x.gguf" > /dev/null 2> "$tmp/notgguf.err"; rc=$?
check refuses_not_gguf '[ $rc = 1 ] && [ $(wc -l < "$tmp/notgguf.err") = 1 ] && grep -q "not a GGUF file" "$tmp/notgguf.err"'

# two completions it can read, three it cannot: not JSON, no completion,
# longer than the micro Llama's 64 positions
long=$(printf 'x%.0s' $(seq 80))
cat > "$tmp/c.jsonl" << EOF
{"question": "What is 1+1?", "completion": "<answer>2</answer>"}
not json
{"question": "What is 2+3?"}
{"question": "What is 2+3?", "completion": "$long"}
{"question": "abab", "completion": "ab 5"}
EOF
lp() { OMP_NUM_THREADS=1 "$bin/logprobs" --system-prompt none "$@"; }
lp "$tmp/c.jsonl" "$untied" "$tmp/tied.gguf" > "$tmp/two.out" 2> "$tmp/two.err"; rc=$?
last=$(tail -1 "$tmp/two.out")
check reads_alike '[ $rc = 0 ] && echo "$last" | grep -q "\"completions\": 2, \"refused\": 3" &&
  echo "$last" | grep -q "\"abs_logp_difference\": {\"mean\": 0.000000, \"max\": 0.000000}, \"kl\": {\"mean\": 0, \"max\": 0}, \"same_first_token\": 1.000000"'
check refused_lines '[ $(wc -l < "$tmp/two.err") = 3 ] && grep -q "c.jsonl:2: refused: not an object" "$tmp/two.err" &&
  grep -q "c.jsonl:3: refused: not an object" "$tmp/two.err" && grep -q "c.jsonl:4: refused: .* more than the model.s positions" "$tmp/two.err"'
lp "$tmp/c.jsonl" "$micro" > "$tmp/one.out" 2> /dev/null
first=$(sed -n 1p "$tmp/two.out" | sed 's/.*"logp": \[\([^,]*\),.*/\1/')
check one_model '[ "$(sed -n 1p "$tmp/one.out")" = "{\"line\": 1, \"tokens\": $(sed -n 1p "$tmp/two.out" | sed "s/.*\"tokens\": \([0-9]*\).*/\1/"), \"logp\": [$first]}" ] &&
  tail -1 "$tmp/one.out" | grep -q "\"mean_logp\": \[-[0-9.]*\]}"'
lp "$tmp/c.jsonl" > /dev/null 2> "$tmp/usage.err"; rc=$?
check usage '[ $rc != 0 ] && grep -q "usage: logprobs" "$tmp/usage.err"'
lp "$tmp/none.jsonl" "$micro" > /dev/null 2> "$tmp/nofile.err"; rc=$?
check missing_file '[ $rc != 0 ] && grep -q "none.jsonl: cannot read" "$tmp/nofile.err"'

# the catalogue's tied Qwen, made by `get` from the fetched one and pinned
# like every model (needs the Qwen fetched: scripts/model.sh get qwen2.5-coder-0.5b)
if src=$(scripts/model.sh path qwen2.5-coder-0.5b 2> /dev/null); then
  mkdir -p "$tmp/cache/qwen2.5-coder-0.5b"
  ln "$src" "$tmp/cache/qwen2.5-coder-0.5b/" 2> /dev/null || cp "$src" "$tmp/cache/qwen2.5-coder-0.5b/"
  SAPO_MODEL_CACHE=$tmp/cache scripts/model.sh get qwen2.5-coder-0.5b-tied > "$tmp/get.out" 2>&1; rc=$?
  check get_pinned '[ $rc = 0 ] && grep -q "qwen2.5-coder-0.5b-tied ready" "$tmp/get.out" && [ -z "$(ls -A "$tmp/cache/qwen2.5-coder-0.5b-tied" | grep "^\.get")" ] &&
    [ "$(SAPO_MODEL_CACHE=$tmp/cache scripts/model.sh path qwen2.5-coder-0.5b-tied)" = "$tmp/cache/qwen2.5-coder-0.5b-tied/qwen2.5-coder-0.5b-instruct-tied.gguf" ]'
else
  echo "SKIP model_tie_get_pinned: qwen2.5-coder-0.5b is not fetched (scripts/model.sh get qwen2.5-coder-0.5b)"
fi
