#!/usr/bin/env bash
# The GPU kit's round trip on the CPU (scripts/gpu_kit.sh, scripts/model.sh
# split and join, scripts/procfile.sh): the kit packed from a copy of the
# working tree, unpacked into another copy as a device call would find it,
# and one CPU node run there for 2 rounds from the kit alone: its programs,
# its libraries (read back from a running process's memory map), its
# redis-server, and the Procfile without foreman. A file split into parts
# joins back there, and a part that is missing, corrupt or not yet carried
# is named.
set -u
cd "$(dirname "$0")/.."
bin=${SAPO_BIN:-build/asan/bin}
tmp=$(mktemp -d)
. tests/nodes.sh
trap 'scripts/swarm.sh stop --run "$tmp/there/run/kit" > /dev/null 2>&1; [ -n "${KEEP:-}" ] || nodes_cleanup' EXIT
need gpu_kit broker learner sampler generator verifier evaluate tap report study loadgen redis-server redis-cli
check() { if eval "$2"; then echo "PASS gpu_kit_$1"; else echo "FAIL gpu_kit_$1"; fi; }

# what a device call takes of this checkout: tracked files and untracked
# ones git does not ignore
tree() {
  mkdir -p "$1"
  { git ls-files -z; git ls-files -z --others --exclude-standard; } |
    while IFS= read -r -d '' f; do [ -f "$f" ] && printf '%s\0' "$f"; done | tar --null -T - -cf - | tar -C "$1" -xf -
}
here=$tmp/here there=$tmp/there
tree "$here"
tree "$there"

(cd "$here" && scripts/gpu_kit.sh pack --bin "$OLDPWD/$bin" --no-checks) > "$tmp/pack.log" 2>&1
kit=$here/.gpu/kit.tar.xz
check pack '[ -s "$kit" ] && xz -dc "$kit" | tar -tf - > "$tmp/kit.list" && grep -qx "./bin/learner" "$tmp/kit.list" && grep -qx "./bin/study" "$tmp/kit.list" &&
  grep -qx "./.gpu/bin/redis-server" "$tmp/kit.list" && grep -q "\.gpu/libs/libczmq" "$tmp/kit.list"'
check no_system_library '! grep -qE "libs/(libc\.so|libcudart|libcublas|libstdc\+\+)" "$tmp/kit.list"'

mkdir -p "$there/.gpu"
cp "$kit" "$there/.gpu/"
(cd "$there" && scripts/gpu_kit.sh unpack) > "$tmp/unpack.log" 2>&1
rc=$?
check unpack '[ $rc = 0 ] && [ -x "$there/bin/learner" ] && grep -q "SAPO_MODEL_CACHE=$there/.gpu/models" "$there/.gpu/env"'
# each folder once on the library path, where CUDA's libraries share one
check library_path_once '[ -z "$(grep "^export LD_LIBRARY_PATH=" "$there/.gpu/env" | cut -d= -f2 | tr ":" "\n" | sort | uniq -d)" ]'

# every library a program loads that is not the C library's, the C++
# runtime's or CUDA's comes from the kit
foreign() {
  (. "$there/.gpu/env" && ldd "$1") | awk '$2 == "=>" { print $1, $3 }' |
    grep -vE '^(libc\.so|libm\.so|libpthread|libdl\.so|librt\.so|libresolv|libstdc\+\+|libgcc_s|libcuda|libcurand|libcublas)' |
    grep -v " $there/.gpu/libs/"
}
check libraries '[ -z "$(foreign "$there/bin/learner")$(foreign "$there/bin/study")$(foreign "$there/.gpu/bin/redis-server")" ]'
check redis_from_kit '[ "$(. "$there/.gpu/env" && command -v redis-server)" = "$there/.gpu/bin/redis-server" ]'

# one node for 2 rounds from the kit, under scripts/procfile.sh
cat > "$tmp/micro.json" <<'JSON'
{"model_type": "qwen2", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
 "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 264, "rope_theta": 10000.0,
 "rms_norm_eps": 1e-6, "tie_word_embeddings": true, "max_position_embeddings": 1024, "eos_token_id": 256}
JSON
(
  cd "$there" && . .gpu/env && bin/learner init "$tmp/micro.json" "$there/micro" > "$tmp/init.log" 2>&1 &&
    SAPO_BIN=bin SAPO_RUNNER=procfile SAPO_MODEL=$there/micro SAPO_QUESTIONS=2 SAPO_COMPLETIONS=4 SAPO_MAX_NEW_TOKENS=12 \
      SAPO_LOCAL_FILTER=all SAPO_SWARM=kit$$ scripts/swarm.sh start --nodes 1 --ij 2/0 --rounds 2 --run run/kit
) > "$tmp/swarm.log" 2>&1
n0=$there/run/kit/n0
maps=""
for _ in $(seq 600); do
  pid=$(cat "$n0/learner.pid" 2> /dev/null)
  [ -n "$pid" ] && maps=$(grep -o '/[^ ]*libczmq[^ ]*' "/proc/$pid/maps" 2> /dev/null | sort -u)
  [ -n "$maps" ] && break
  sleep 0.1
done
check node_libraries_from_kit '[ -n "$maps" ] && [ "$(dirname "$maps")" = "$there/.gpu/libs" ]'
(cd "$there" && timeout 300 scripts/swarm.sh wait --run run/kit)
rounds=$(grep -c '"round"' "$n0/metrics.jsonl" 2> /dev/null)
check node_two_rounds '[ "${rounds:-0}" = 2 ] && grep -q "procfile | learner.1 started" "$n0/node.log"'
(cd "$there" && scripts/swarm.sh stop --run run/kit > /dev/null 2>&1)
# the pool's load generator from the kit against the kit's redis-server
# (bench/b_pool_load.sh on the device machine's cores)
(
  cd "$there" && . .gpu/env && port=6750 &&
    while (exec 3<> /dev/tcp/127.0.0.1/$port) 2> /dev/null; do port=$((port + 1)); done &&
    { redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no > /dev/null 2>&1 & } &&
    for _ in $(seq 50); do redis-cli -p "$port" ping > /dev/null 2>&1 && break; sleep 0.1; done &&
    bin/loadgen --redis "redis://127.0.0.1:$port" --nodes 20 --seconds 2 --round-seconds 1 --bytes 2000 > "$tmp/load.out" 2>&1
  echo "rc=$?" >> "$tmp/load.out"
  redis-cli -p "$port" shutdown nosave > /dev/null 2>&1
)
check loadgen_from_kit 'grep -qx "rc=0" "$tmp/load.out" && grep -q "\"errors\": *0" "$tmp/load.out" || { cat "$tmp/load.out"; false; }'
check python_env '(export LD_LIBRARY_PATH=/nowhere; "$there/.venv/bin/python" -c "import os; print(os.environ.get(\"LD_LIBRARY_PATH\"))") | grep -qx None'
(cd "$there" && scripts/gpu_kit.sh unpack) > /dev/null 2>&1
check unpack_again '[ $? = 0 ]'
# a machine without xz (the device image's is not certain): python3 unpacks
noxz=$tmp/noxz
mkdir -p "$noxz"
for f in /usr/local/bin/* /usr/bin/* /bin/*; do
  n=${f##*/}
  [ "$n" = xz ] || [ -e "$noxz/$n" ] || ln -s "$f" "$noxz/$n"
done
rm -f "$there/bin/learner"
(cd "$there" && PATH=$noxz scripts/gpu_kit.sh unpack) > "$tmp/noxz.log" 2>&1
rc=$?
check unpack_without_xz '[ $rc = 0 ] && ! (PATH=$noxz; command -v xz > /dev/null) && [ -x "$there/bin/learner" ] &&
  xz -dc "$kit" | tar -xOf - ./bin/learner | cmp -s - "$there/bin/learner" || { cat "$tmp/noxz.log"; false; }'
rm -f "$there/.gpu/kit.tar.xz"
(cd "$there" && scripts/gpu_kit.sh unpack) > "$tmp/missing.log" 2>&1
rc=$?
check missing_kit_names_itself '[ $rc != 0 ] && grep -q "kit.tar.xz not found" "$tmp/missing.log"'

# a file in parts: split here, carried part by part, joined there
head -c 3000000 /dev/urandom > "$tmp/weights.bin"
(cd "$here" && scripts/model.sh split "$tmp/weights.bin" --size 1000000) > "$tmp/split.log" 2>&1
parts=$here/.gpu/models/weights.bin
check split '[ "$(ls "$parts" | grep -c "^part-")" = 3 ] && [ "$(wc -l < "$parts/parts.sha256")" = 4 ]'
join() { (cd "$there" && SAPO_MODEL_CACHE=$there/cache scripts/model.sh join weights.bin) > "$tmp/join.log" 2>&1; }
mkdir -p "$there/.gpu/models/weights.bin"
cp "$parts/parts.sha256" "$parts/part-01" "$parts/part-03" "$there/.gpu/models/weights.bin/"
join
check join_names_missing_part '[ $? != 0 ] && grep -q "lacks part-02" "$tmp/join.log"'
head -c 1000000 /dev/zero > "$there/.gpu/models/weights.bin/part-02"
join
check join_refuses_corrupt_part '[ $? != 0 ] && grep -q "part-02 does not match its sha256" "$tmp/join.log"'
cp "$parts/part-02" "$there/.gpu/models/weights.bin/"
join
check join '[ $? = 0 ] && cmp -s "$tmp/weights.bin" "$there/cache/weights.bin/weights.bin" &&
  [ -z "$(ls "$there/.gpu/models/weights.bin" | grep "^part-")" ]'
# the plan: the kit in the first call, then each call as much as fits,
# with the model's list of sums, at most 7 paths a call
(cd "$here" && scripts/model.sh split "$tmp/weights.bin" --size 300000 && scripts/gpu_kit.sh plan weights.bin) > "$tmp/plan.log" 2>&1
check plan '[ "$(grep -c "^call " "$tmp/plan.log")" = 2 ] &&
  grep -q "^call 1: .*carry .gpu/kit.tar.xz .gpu/models/weights.bin/parts.sha256 .gpu/models/weights.bin/part-01 " "$tmp/plan.log" &&
  grep -q "^call 2: .*carry .gpu/models/weights.bin/parts.sha256 .gpu/models/weights.bin/part-06 " "$tmp/plan.log"'
# by default every part but the last fills a call beside the tree, and the
# last, smaller one rides beside the kit in the first call
head -c 1 /dev/zero > "$tmp/big.bin"
room=$(cd "$here" && scripts/model.sh split "$tmp/big.bin" | sed -n 's/.* parts of \([0-9]*\) bytes.*/\1/p')
truncate -s $((2 * ${room:-0} + 5000)) "$tmp/big.bin"
(cd "$here" && scripts/model.sh split "$tmp/big.bin" && scripts/gpu_kit.sh plan big.bin) > "$tmp/plan-full.log" 2>&1
big=$here/.gpu/models/big.bin
check plan_last_part_beside_kit '[ "${room:-0}" -gt 1000000 ] && [ "$(stat -c %s "$big/part-01")" = "$room" ] &&
  [ "$(stat -c %s "$big/part-03")" = 5000 ] && [ "$(grep -c "^call " "$tmp/plan-full.log")" = 3 ] &&
  grep -qx "call 1: .* carry .gpu/kit.tar.xz .gpu/models/big.bin/parts.sha256 .gpu/models/big.bin/part-03" "$tmp/plan-full.log" &&
  grep -qx "call 2: .* carry .gpu/models/big.bin/parts.sha256 .gpu/models/big.bin/part-01" "$tmp/plan-full.log" ||
  { cat "$tmp/plan-full.log"; false; }'
rm -rf "$big" "$tmp/big.bin"
# a tree that grows after the split (by less than the 1 MiB the split
# keeps free) still carries every part: the plan counts the tree as it is
grow=$tmp/grow
mkdir -p "$grow/scripts" "$grow/.gpu"
cp scripts/model.sh scripts/progress.sh scripts/gpu_kit.sh "$grow/scripts/"
cp "$kit" "$grow/.gpu/"
printf '/.gpu/\n' > "$grow/.gitignore"
head -c 1 /dev/zero > "$tmp/big.bin"
room=$(cd "$grow" && git init -q && scripts/model.sh split "$tmp/big.bin" | sed -n 's/.* parts of \([0-9]*\) bytes.*/\1/p')
truncate -s $((2 * ${room:-0} + 5000)) "$tmp/big.bin"
(cd "$grow" && scripts/model.sh split "$tmp/big.bin" > /dev/null && head -c 600000 /dev/urandom > grown.bin &&
  scripts/gpu_kit.sh plan big.bin) > "$tmp/plan-grown.log" 2>&1
check plan_after_tree_grew '[ $? = 0 ] && [ "${room:-0}" -gt 1000000 ] && [ "$(grep -c "^call " "$tmp/plan-grown.log")" = 3 ] ||
  { cat "$tmp/plan-grown.log"; false; }'
rm -rf "$grow" "$tmp/big.bin"
