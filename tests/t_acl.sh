#!/usr/bin/env bash
# Per-node Redis ACL users (scripts/acl.sh) on a real redis-server: node a
# publishes and samples through the pool functions, reads b's entries, but
# cannot publish as b, delete or overwrite b's keys, raise the swarm's
# bound, load functions or flush the database. Stage outputs: a writes its
# own and reads b's, never writes b's. Node keys: b cannot take a's
# node id with its own public key (neither by plain SET nor through the
# pool function), and a sampler started under a node id held by another
# key exits with that line. Functions flushed: a node's call says the
# operator must load them with the admin's URL, and that works.
set -u
cd "$(dirname "$0")/.."
bin=${SAPO_BIN:-build/asan/bin}
[ -x "$bin/pool" ] || { echo "SKIP acl: $bin/pool not built"; exit 0; }
for c in redis-server redis-cli; do command -v $c > /dev/null || { echo "SKIP acl: $c not installed"; exit 0; }; done
tmp=$(mktemp -d)
rpid=
cleanup() { [ -n "$rpid" ] && kill "$rpid" 2> /dev/null && wait "$rpid" 2> /dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
check() { if (eval "$2"); then echo "PASS acl_$1"; else echo "FAIL acl_$1"; fi; }
scripts/acl.sh --swarm s1 --out "$tmp/users.acl" a b > /dev/null
port=6700
while (exec 3<> /dev/tcp/127.0.0.1/$port) 2> /dev/null; do port=$((port + 1)); done
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --aclfile "$tmp/users.acl" > "$tmp/redis.log" 2>&1 &
rpid=$!
url() { grep "^$1 " "$tmp/users.acl.urls" | cut -d' ' -f2 | sed "s/HOST/127.0.0.1:$port/"; }
pw() { url "$1" | sed 's|redis://[^:]*:\([^@]*\)@.*|\1|'; }
cli() { local u=$1; shift; redis-cli -p "$port" --user "$u" --pass "$(pw "$u")" --no-auth-warning "$@" 2>&1; }
for _ in $(seq 50); do cli admin ping | grep -q PONG && break; sleep 0.1; done
printf 'record of a' > "$tmp/ra"; printf 'record of b' > "$tmp/rb"
check no_anonymous_access '! redis-cli -p "$port" ping 2>&1 | grep -q PONG'
check admin_loads_functions '"$bin/pool" size --redis "$(url admin)" --swarm s1 | grep -q "^0$"'
cli admin SET s1:max_per_node 3 > /dev/null
check node_publishes_own '"$bin/pool" publish --redis "$(url a)" --swarm s1 --node a "$tmp/ra" &&
                          "$bin/pool" publish --redis "$(url b)" --swarm s1 --node b "$tmp/rb"'
check node_cannot_publish_as_other '! "$bin/pool" publish --redis "$(url a)" --swarm s1 --node b "$tmp/ra" 2> "$tmp/err" && grep -q -i "no permissions\|NOPERM" "$tmp/err"'
check node_reads_others '[ "$("$bin/pool" size --redis "$(url a)" --swarm s1 --node b)" = 1 ] &&
                         [ "$(cli a HGET s1:n:b:e 1)" = "record of b" ] &&
                         "$bin/pool" sample --redis "$(url a)" --swarm s1 --exclude a --count 1 2>&1 | grep -q "entry 0:"'
# SampleExternal as a node draws (pool_draw's functions) under a node's user
check node_draws_fresh '"$bin/pool" sample --redis "$(url a)" --swarm s1 --exclude a --count 1 --window 2 2>&1 | grep -q "entry 0:"'
check cannot_delete_others '[[ "$(cli a DEL s1:n:b:e)" == *NOPERM* ]] && [[ "$(cli a HDEL s1:n:b:e 1)" == *NOPERM* ]]'
check cannot_overwrite_others '[[ "$(cli a HSET s1:n:b:e 1 forged)" == *NOPERM* ]] && [[ "$(cli a SET s1:n:b:hi 0)" == *NOPERM* ]]'
check cannot_raise_bound '[[ "$(cli a SET s1:max_per_node 1000000)" == *NOPERM* ]]'
check cannot_admin '[[ "$(cli a FUNCTION FLUSH)" == *NOPERM* ]] && [[ "$(cli a FLUSHALL)" == *NOPERM* ]] && [[ "$(cli a CONFIG SET save "")" == *NOPERM* ]]'
check bound_holds 'for i in 1 2 3 4 5; do "$bin/pool" publish --redis "$(url a)" --swarm s1 --node a "$tmp/ra" || exit 1; done; [ "$("$bin/pool" size --redis "$(url a)" --swarm s1 --node a)" = 3 ]'
# stage outputs (game mode), with the commands pool_stage_publish sends (SET
# ... PX, SADD) and pool_stage_read reads with (SRANDMEMBER, STRLEN, MGET)
check stage_publishes_own '[ "$(cli a SET s1:n:a:stage:5:2 "stage of a" PX 600000)" = OK ] &&
                           [ "$(cli a SADD s1:nodes a)" = 0 ] &&
                           [ "$(cli b SET s1:n:b:stage:5:2 "stage of b" PX 600000)" = OK ]'
check stage_reads_others '[ "$(cli a SRANDMEMBER s1:nodes 33 | sort | tr "\n" " ")" = "a b " ] &&
                          [ "$(cli a STRLEN s1:n:b:stage:5:2)" = 10 ] && [ "$(cli a MGET s1:n:b:stage:5:2)" = "stage of b" ]'
check stage_cannot_write_others '[[ "$(cli a SET s1:n:b:stage:5:2 forged PX 600000)" == *NOPERM* ]] &&
                                  [[ "$(cli a DEL s1:n:b:stage:5:2)" == *NOPERM* ]] &&
                                  [[ "$(cli a PEXPIRE s1:n:b:stage:5:2 1)" == *NOPERM* ]] &&
                                  [ "$(cli admin GET s1:n:b:stage:5:2)" = "stage of b" ]'
check b_entries_intact '[ "$(cli admin HGET s1:n:b:e 1)" = "record of b" ]'
check registers_own_key '"$bin/pool" register --redis "$(url a)" --swarm s1 --node a --key "$tmp/a.key" &&
                         "$bin/pool" register --redis "$(url b)" --swarm s1 --node b --key "$tmp/b.key"'
check cannot_overwrite_others_key '[[ "$(cli b SET s1:n:a:key "$("$bin/pool" key --key "$tmp/b.key")")" == *NOPERM* ]] &&
                                   [[ "$(cli b DEL s1:n:a:key)" == *NOPERM* ]]'
check cannot_register_as_other '! "$bin/pool" register --redis "$(url b)" --swarm s1 --node a --key "$tmp/b.key" 2> "$tmp/err" &&
                                grep -q -i "no permissions\|NOPERM" "$tmp/err"'
check own_key_intact '[ "$(cli admin GET s1:n:a:key)" = "$("$bin/pool" key --key "$tmp/a.key")" ] &&
                      ! "$bin/pool" register --redis "$(url a)" --swarm s1 --node a --key "$tmp/b.key" 2> "$tmp/err" &&
                      grep -q "registered to another key" "$tmp/err"'
check signed_entries_verify '"$bin/pool" publish --redis "$(url b)" --swarm s1 --node b --key "$tmp/b.key" "$tmp/rb" &&
                             "$bin/pool" sample --redis "$(url a)" --swarm s1 --exclude a --count 20 2>&1 | grep -q "node b: record"'
check sampler_refuses_taken_id 'SAPO_NODE=a SAPO_SWARM=s1 SAPO_RUN="$tmp/run-a" SAPO_KEY="$tmp/b.key" SAPO_REDIS="$(url a)" \
                                  timeout 60 "$bin/sampler" 2> "$tmp/err"; rc=$?; cat "$tmp/err" | sed "s/^/  /";
                                [ $rc = 1 ] && grep -q "node id a is registered to another key" "$tmp/err"'
# functions not loaded (flushed by the admin) and a node's user may not
# load them: its call says what the operator must do, in one line
cli admin FUNCTION FLUSH > /dev/null
check unloaded_functions_explained '! "$bin/pool" publish --redis "$(url a)" --swarm s1 --node a "$tmp/ra" 2> "$tmp/err" &&
  [ "$(wc -l < "$tmp/err")" = 1 ] && grep -q "ERR Function not found (the pool.s functions are not loaded there and this user may not load them: the operator loads them once with the admin.s URL, e.g. bin/pool size --redis redis://admin:PASS@HOST:PORT)" "$tmp/err" || { cat "$tmp/err"; false; }'
check admin_loads_them_again '"$bin/pool" size --redis "$(url admin)" --swarm s1 > /dev/null &&
  "$bin/pool" publish --redis "$(url a)" --swarm s1 --node a "$tmp/ra"'
