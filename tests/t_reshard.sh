#!/usr/bin/env bash
# Reshard under load: nodes a and b publish and draw through the pool
# (bin/pool, one publish and one draw a process, in a loop each) while the
# slot of a's keys moves to another master the way `redis-cli --cluster
# reshard` moves it (CLUSTER SETSLOT IMPORTING on the target, MIGRATING on
# the source, MIGRATE, SETSLOT NODE), but one key a second and with a pause
# before the first key and after the last, so that the slot stays half
# moved for seconds and publishes land while it is (redis-cli moves a
# node's few keys in one MIGRATE, in milliseconds). Checks: the move
# completes (no BUSYKEY), a's sequence never goes back, and every entry
# whose publish succeeded, before, during or after the move, is fetched
# after it, by a draw and in a's entries.
set -u
cd "$(dirname "$0")/.."
bin=${SAPO_BIN:-build/asan/bin}
. tests/nodes.sh
need reshard pool redis-server redis-cli python3
tmp=$(mktemp -d)
loops=()
trap 'for p in "${loops[@]}"; do kill "$p" 2> /dev/null; wait "$p" 2> /dev/null; done
      tests/cluster.sh stop "$tmp/cluster" > /dev/null 2>&1; rm -rf "$tmp"' EXIT
check() { if (eval "$2"); then echo "PASS reshard_$1"; else echo "FAIL reshard_$1"; fi; }
url=$(tests/cluster.sh start "$tmp/cluster") || { echo "SKIP reshard: no Redis Cluster could be started (tests/cluster.sh)"; exit 0; }
export SAPO_SWARM=r$$ SAPO_REDIS=$url
port=$(head -n 1 "$tmp/cluster/ports" | cut -d' ' -f1)
rc() { redis-cli -p "$1" "${@:2}" 2> /dev/null; }

# the phase of the move, as the loops read it when a call returns
echo before > "$tmp/phase"
# node $1 publishes "$1-<i>" for i = 1, 2, ... and draws up to 4 entries
# of the other node, until $tmp/stop: each publish that succeeded goes to
# $1.ok as "i phase hi" (hi: its counter read back by redis-cli, which
# follows MOVED and ASK), each that failed to $1.failed, each draw to
# $1.draws as its exit status
publish_loop() {
  local i=0 other=$2
  while [ ! -f "$tmp/stop" ]; do
    i=$((i + 1))
    printf '%s-%d' "$1" "$i" > "$tmp/$1.rec"
    if "$bin/pool" publish --node "$1" "$tmp/$1.rec" 2>> "$tmp/$1.err"; then
      echo "$i $(cat "$tmp/phase") $(redis-cli -c -p "$port" GET "$SAPO_SWARM:n:{$1}:hi" 2> /dev/null)" >> "$tmp/$1.ok"
    else
      echo "$i $(cat "$tmp/phase")" >> "$tmp/$1.failed"
    fi
    "$bin/pool" sample --exclude "$1" --count 4 > /dev/null 2>> "$tmp/$1.draw.err"
    echo "$? $other" >> "$tmp/$1.draws"
  done
}
count() { [ -f "$1" ] && wc -l < "$1" || echo 0; }
publish_loop a b &
loops+=($!)
publish_loop b a &
loops+=($!)
for _ in $(seq 300); do [ "$(count "$tmp/a.ok")" -ge 5 ] && [ "$(count "$tmp/b.ok")" -ge 5 ] && break; sleep 0.1; done
check publishes_before '[ "$(count "$tmp/a.ok")" -ge 5 ] && [ "$(count "$tmp/b.ok")" -ge 5 ]'

# the move, by hand: a's slot from its master to the next
slot=$(rc "$port" cluster keyslot "$SAPO_SWARM:n:{a}:hi")
masters=$(rc "$port" cluster nodes | awk '$3 ~ /master/ { split($2, a, "[:@]"); print $1, a[2] }')
src_id= src=
while read -r id p; do
  [ "$(rc "$p" cluster countkeysinslot "$slot")" -gt 0 ] && src_id=$id src=$p
done <<< "$masters"
read -r dst_id dst <<< "$(awk -v s="$src_id" '$1 != s' <<< "$masters" | head -n 1)"
keys_before=$(rc "$src" cluster countkeysinslot "$slot")
moved=0 refused=
rc "$dst" cluster setslot "$slot" importing "$src_id" > /dev/null
rc "$src" cluster setslot "$slot" migrating "$dst_id" > /dev/null
echo migrating > "$tmp/phase"
sleep 3
echo split > "$tmp/phase"
for _ in $(seq 50); do
  key=$(rc "$src" cluster getkeysinslot "$slot" 1)
  [ -n "$key" ] || break
  out=$(rc "$src" migrate 127.0.0.1 "$dst" "" 0 5000 keys "$key")
  [ "$out" = OK ] || { refused="MIGRATE $key: $out"; break; }
  moved=$((moved + 1))
  sleep 1
done
echo importing > "$tmp/phase"
sleep 3
if [ -z "$refused" ]; then
  while read -r id p; do rc "$p" cluster setslot "$slot" node "$dst_id" > /dev/null; done <<< "$masters"
fi
echo after > "$tmp/phase"
sleep 3
touch "$tmp/stop"
for p in "${loops[@]}"; do wait "$p" 2> /dev/null; done
loops=()

echo "  slot $slot of a's $keys_before keys: $moved moved from :$src to :$dst, one a second${refused:+; refused: $refused}"
for n in a b; do
  echo "  $n: publishes that succeeded by phase: $(cut -d' ' -f2 "$tmp/$n.ok" | sort | uniq -c | awk '{ printf "%s %s, ", $2, $1 }')failed: $(count "$tmp/$n.failed")"
  [ -s "$tmp/$n.err" ] && echo "    the first failed: $(head -n 1 "$tmp/$n.err")"
done
check move_completes '[ -z "$refused" ] && [ "$(rc "$src" cluster countkeysinslot "$slot")" = 0 ] &&
                      [ "$(rc "$dst" cluster countkeysinslot "$slot")" = "$keys_before" ]'
check published_while_half_moved '[ "$(awk "\$2 == \"migrating\" || \$2 == \"importing\"" "$tmp/a.ok" | wc -l)" -gt 0 ]'
# each publish that succeeded moved a's newest seq on
check sequence_never_back 'python3 -c "
import sys
hi = [int(l.split()[2]) if len(l.split()) > 2 else 0 for l in open(\"$tmp/a.ok\")]
sys.exit(0 if all(x < y for x, y in zip([0] + hi, hi)) else 1)" || { echo "  a.ok (i phase hi): $(tr "\n" ";" < "$tmp/a.ok")"; false; }'
# every entry of a that a publish was told was stored, fetched after the
# move: its text among a's entries (HGETALL where they live now), and
# every entry held there drawn by b through the pool
published=$(count "$tmp/a.ok")
redis-cli -c -p "$port" hgetall "$SAPO_SWARM:n:{a}:e" 2> /dev/null | awk 'NR % 2 == 0' | sort > "$tmp/a.held"
drawn=$("$bin/pool" sample --exclude b --count 100000 2>&1 > /dev/null | grep -c 'node a:')
sed 's/ .*//; s/^/a-/' "$tmp/a.ok" | sort > "$tmp/a.want"
echo "  a: $published entries published, $(comm -12 "$tmp/a.want" "$tmp/a.held" | wc -l) of them held after the move, $drawn drawn by b"
check every_entry_fetched '[ -z "$(comm -23 "$tmp/a.want" "$tmp/a.held")" ] && [ "$drawn" = "$(wc -l < "$tmp/a.held")" ]'
check draws_never_failed '! grep -qv "^0 " "$tmp/a.draws" "$tmp/b.draws" ||
  { grep -hv "^0 " "$tmp/a.draws" "$tmp/b.draws" | head -n 3; grep -hv "unsigned (no key" "$tmp/a.draw.err" "$tmp/b.draw.err" | head -n 3; false; }'
# a sapo from before every key was declared calls with the node's base
# alone, and the functions older builds call read keys found at run
# time: on a cluster each is refused with its reason, never run half right
old=$(redis-cli -c -p "$port" fcall sapo_publish_node 1 "$SAPO_SWARM:n:{c}:" "$SAPO_SWARM:max_per_node:{c}" 10 0 0 1 rec 2>&1)
legacy=$(redis-cli -c -p "$port" fcall_ro sapo_fresh 1 "$SAPO_SWARM:" c 10 0 0 32 2>&1)
check older_calls_refused '[[ "$old" == *"update this node"* ]] && [[ "$legacy" == *no-cluster* ]] ||
                           { echo "  $old / $legacy"; false; }'
check no_sanitizer_error '! grep -l -E "Sanitizer|runtime error" "$tmp"/*.err'
echo "reshard test: $SECONDS s"
