#!/usr/bin/env bash
# Per-node ACL users on a Redis Cluster (scripts/acl.sh --cluster; every
# node of tests/cluster.sh with the same file): node a publishes, draws
# and registers its key through the pool as on one Redis, reads b's
# entries, but cannot publish or register as b, overwrite or delete b's
# keys, or raise the bound the operator set for it (S:max_per_node:{a},
# in the slot of a's keys), which holds.
set -u
cd "$(dirname "$0")/.."
bin=${SAPO_BIN:-build/asan/bin}
[ -x "$bin/pool" ] || { echo "SKIP acl_cluster: $bin/pool not built"; exit 0; }
for c in redis-server redis-cli python3; do command -v $c > /dev/null || { echo "SKIP acl_cluster: $c not installed"; exit 0; }; done
tmp=$(mktemp -d)
trap 'tests/cluster.sh stop "$tmp/cluster" > /dev/null 2>&1; rm -rf "$tmp"' EXIT
check() { if (eval "$2"); then echo "PASS acl_cluster_$1"; else echo "FAIL acl_cluster_$1"; fi; }
scripts/acl.sh --cluster --swarm s1 --out "$tmp/users.acl" a b > /dev/null
pw() { grep "^$1 " "$tmp/users.acl.urls" | sed 's|.*redis://[^:]*:\([^@]*\)@.*|\1|'; }
seeds=$(tests/cluster.sh start "$tmp/cluster" "$tmp/users.acl" "$(pw admin)") ||
  { echo "SKIP acl_cluster: no Redis Cluster could be started (tests/cluster.sh)"; exit 0; }
seeds=${seeds#redis-cluster://}
url() { echo "redis-cluster://$1:$(pw "$1")@$seeds"; }
port=${seeds%%,*}
port=${port##*:}
cli() { local u=$1; shift; redis-cli -c -p "$port" --user "$u" --pass "$(pw "$u")" --no-auth-warning "$@" 2>&1; }
printf 'record of a' > "$tmp/ra"
printf 'record of b' > "$tmp/rb"
check no_anonymous_access '! redis-cli -p "$port" ping 2>&1 | grep -q PONG'
check admin_loads_functions '"$bin/pool" size --redis "$(url admin)" --swarm s1 | grep -q "^0$"'
check node_publishes_own '"$bin/pool" publish --redis "$(url a)" --swarm s1 --node a "$tmp/ra" &&
                          "$bin/pool" publish --redis "$(url b)" --swarm s1 --node b "$tmp/rb"'
check keys_in_the_node_slot '[ "$(cli admin HGET "s1:n:{b}:e" 1)" = "record of b" ]'
check node_cannot_publish_as_other '! "$bin/pool" publish --redis "$(url a)" --swarm s1 --node b "$tmp/ra" 2> "$tmp/err" &&
                                    grep -q -i "no permissions\|NOPERM" "$tmp/err"'
check node_reads_others '[ "$("$bin/pool" size --redis "$(url a)" --swarm s1 --node b)" = 1 ]'
check cannot_overwrite_others '[[ "$(cli a HSET "s1:n:{b}:e" 1 forged)" == *NOPERM* ]] &&
                               [[ "$(cli a DEL "s1:n:{b}:e")" == *NOPERM* ]] && [[ "$(cli a SET "s1:n:{b}:hi" 0)" == *NOPERM* ]]'
check b_entries_intact '[ "$(cli admin HGET "s1:n:{b}:e" 1)" = "record of b" ]'
# the operator's bound for a holds, and a cannot raise it
cli admin SET "s1:max_per_node:{a}" 2 > /dev/null
check cannot_raise_bound '[[ "$(cli a SET "s1:max_per_node:{a}" 100)" == *NOPERM* ]]'
for _ in 1 2 3 4; do "$bin/pool" publish --redis "$(url a)" --swarm s1 --node a "$tmp/ra" > /dev/null; done
check bound_holds '[ "$("$bin/pool" size --redis "$(url b)" --swarm s1 --node a)" = 2 ]'
check registers_own_key '"$bin/pool" register --redis "$(url a)" --swarm s1 --node a --key "$tmp/a.key" &&
                         "$bin/pool" register --redis "$(url b)" --swarm s1 --node b --key "$tmp/b.key"'
check cannot_register_as_other '! "$bin/pool" register --redis "$(url b)" --swarm s1 --node a --key "$tmp/b.key" 2> "$tmp/err" &&
                                grep -q -i "no permissions\|NOPERM" "$tmp/err"'
check signed_entries_verify '"$bin/pool" publish --redis "$(url b)" --swarm s1 --node b --key "$tmp/b.key" "$tmp/rb" &&
                             "$bin/pool" sample --redis "$(url a)" --swarm s1 --exclude a --count 20 2>&1 | grep -q "node b: record"'
