#!/usr/bin/env bash
# The pool on a Redis Cluster over TLS across hosts (tests/hosts.sh):
# three cluster hosts c1, c2 and c3, each with a master (6380) and the
# replica of another host's master (6381), TLS only between every two of
# them (tls-cluster, tls-replication) and to clients (certificates
# required, and a password), a node timeout of 2 s. Node a0 on host n1 and a1 on n2 (the
# micro model, 2/2, every group shared, no pool window, pool-deadline 1 s)
# reach it by rediss-cluster://, each from one seed:
#   - they train and share through it;
#   - the host of a0's master is cut off from every other: its replica on
#     another host is promoted, no process exits, both nodes go on
#     training, and a0 shares again by itself;
#   - once they stop, what each published is counted against what the
#     cluster holds: a1 lost nothing, a0 at most what its cut master had
#     not copied to its replica.
set -u
cd "$(dirname "$0")/.."
bin=${SAPO_BIN:-build/asan/bin}
tmp=$(mktemp -d)
. tests/nodes.sh
trap 'nodes_cleanup_hosts' EXIT
check() { if (eval "$2"); then echo "PASS tls_cluster_$1"; else echo "FAIL tls_cluster_$1"; fi; }
need tls_cluster openssl
nodes_init tls_cluster
tests/hosts.sh start "$tmp/hosts" c1 c2 c3 n1 n2 2> "$tmp/hosts.err" ||
  { echo "SKIP tls_cluster: no network namespaces here ($(head -n 1 "$tmp/hosts.err"))"; exit 0; }
on() { local h=$1; shift; tests/hosts.sh run "$tmp/hosts" "$h" "$@"; }
addr() { tests/hosts.sh addr "$tmp/hosts" "$1"; }
c=$tmp/tls
{
  scripts/tls-certs.sh "$c" ca && scripts/tls-certs.sh "$c" node admin &&
    for h in c1 c2 c3; do scripts/tls-certs.sh "$c" server $h "$(addr $h)"; done &&
    for n in a0 a1; do scripts/tls-certs.sh "$c" node $n; done
} > "$tmp/certs.log" 2>&1 || { cat "$tmp/certs.log"; echo "FAIL tls_cluster_certificates"; exit 1; }
# redis-cli over TLS as the admin, from host n1
cli() { on n1 redis-cli --tls --cacert "$c/ca.crt" --cert "$c/admin.crt" --key "$c/admin.key" -a swarm-secret --no-auth-warning "$@"; }

seeds=
for h in c1 c2 c3; do
  for port in 6380 6381; do
    mkdir -p "$tmp/$h-$port"
    on $h redis-server --port 0 --tls-port $port --bind "$(addr $h)" --tls-cert-file "$c/$h.crt" --tls-key-file "$c/$h.key" \
      --tls-ca-cert-file "$c/ca.crt" --tls-auth-clients yes --tls-cluster yes --tls-replication yes \
      --requirepass swarm-secret --masterauth swarm-secret \
      --cluster-enabled yes --cluster-node-timeout 2000 --cluster-config-file "$tmp/$h-$port/nodes.conf" \
      --dir "$tmp/$h-$port" --save "" --appendonly no --logfile "$tmp/$h-$port/redis.log" > /dev/null 2>&1 &
    pids+=($!)
  done
done
for h in c1 c2 c3; do
  for port in 6380 6381; do
    for _ in $(seq 100); do cli -h "$(addr $h)" -p $port ping 2> /dev/null | grep -q PONG && break; sleep 0.05; done
  done
done
# redis-cli puts each replica on another host than its master
cli --cluster create "$(addr c1):6380" "$(addr c2):6380" "$(addr c3):6380" "$(addr c1):6381" "$(addr c2):6381" \
  "$(addr c3):6381" --cluster-replicas 1 --cluster-yes > "$tmp/create.log" 2>&1 ||
  { tail -n 5 "$tmp/create.log"; echo "FAIL tls_cluster_create"; exit 1; }
# every node says the cluster is ok, and every replica has its first copy
healthy() {
  local h port info
  for h in c1 c2 c3; do
    for port in 6380 6381; do
      cli -h "$(addr $h)" -p $port cluster info 2> /dev/null | grep -q '^cluster_state:ok' || return 1
      info=$(cli -h "$(addr $h)" -p $port info replication 2> /dev/null | tr -d '\r')
      grep -q '^role:slave' <<< "$info" || continue
      grep -q '^master_link_status:up' <<< "$info" && grep -q '^master_sync_in_progress:0' <<< "$info" || return 1
    done
  done
}
for _ in $(seq 300); do healthy && break; sleep 0.1; done
check healthy 'healthy'

export SAPO_CHECKPOINT_EVERY=1000 SAPO_SWARM=s$$ SAPO_POOL_WINDOW=0 SAPO_POOL_DEADLINE=1 SAPO_TLS_CA=$c/ca.crt
SAPO_REDIS=rediss-cluster://:swarm-secret@$(addr c1):6380 SAPO_TLS_CERT=$c/a0.crt SAPO_TLS_KEY=$c/a0.key node_host=n1 node_start a0 1
SAPO_REDIS=rediss-cluster://:swarm-secret@$(addr c2):6380 SAPO_TLS_CERT=$c/a1.crt SAPO_TLS_KEY=$c/a1.key node_host=n2 node_start a1 2
check trains 'advance 6 || { tail -n 3 "$tmp"/a*/sampler.log; false; }'
check shares 'shares_from_third a0 4 && shares_from_third a1 4'
check no_clear_text_warning '! grep -q "not encrypted" "$tmp"/a*/sampler.log'

# the host and port of the master that answers for node $1's keys (not
# asking host $2, cut off: a connect to it waits for TCP to give up)
master_of_node() {
  local h port
  for h in c1 c2 c3; do
    [ "$h" = "${2:-}" ] && continue
    for port in 6380 6381; do
      [ "$(cli -h "$(addr $h)" -p $port exists "$SAPO_SWARM:n:{$1}:hi" 2> /dev/null)" = 1 ] && { echo "$h $port"; return 0; }
    done
  done
  return 1
}
read -r mh mp <<< "$(master_of_node a0)"
read -r oh _ <<< "$(master_of_node a1)"
check masters_apart '[ -n "$mh" ] && [ -n "$oh" ] && [ "$mh" != "$oh" ]'
r0=$(rows a0) r1=$(rows a1)
cut_at=$(date +%s.%N)
tests/hosts.sh cut "$tmp/hosts" "$mh"
check replica_promoted 'for _ in $(seq 300); do [ -n "$(master_of_node a0 "$mh")" ] && exit 0; sleep 0.1; done; exit 1'
promoted_at=$(date +%s.%N)
echo "  $mh (a0's master, $mp) cut off; a replica on another host promoted after $(python3 -c "print(round($promoted_at - $cut_at, 1))") s"
check trains_while_cut 'advance 4'
echo "  rounds while cut and after: a0 $(( $(rows a0) - r0 )), a1 $(( $(rows a1) - r1 )); outage lines: a0 $(outages a0), a1 $(outages a1)"
check shares_again 'for _ in $(seq 300); do [ "$(shared_since a0 $r0)" -gt 0 ] && [ "$(shared_since a1 $r1)" -gt 0 ] && exit 0; sleep 0.2; done; exit 1'
check no_process_exits 'all_alive'
for p in "${pids[@]}"; do kill -TERM "$p" 2> /dev/null; done
for n in a0 a1; do for p in broker learner sampler verifier generator; do wait "$(eval echo "\$pid_${n}_$p")" 2> /dev/null; done; done
# what each node published (its sampler's last line) against what the cluster holds
live=$( [ "$mh" = c1 ] && echo c2 || echo c1 )
lost0=-1
for n in a0 a1; do
  pub=$(sed -n 's/.*stopping at round [0-9]*: \([0-9]*\) groups published.*/\1/p' "$tmp/$n/sampler.log" | tail -n 1)
  held=$(cli -c -h "$(addr $live)" -p 6380 hlen "$SAPO_SWARM:n:{$n}:e" 2> /dev/null)
  echo "  $n published ${pub:-?} entries, the cluster holds ${held:-?}"
  if [ $n = a0 ]; then lost0=$((${pub:-0} - ${held:-0})); else check nothing_lost_a1 '[ -n "$pub" ] && [ "$held" = "$pub" ] && [ "$pub" -gt 0 ]'; fi
done
# a0's master may not have copied its last entries to its replica: a
# round or two of 2 groups at most
check lost_only_unreplicated "[ $lost0 -ge 0 ] && [ $lost0 -le 4 ]"
check no_sanitizer_error '! grep -l -E "Sanitizer|runtime error" "$tmp"/a*/*.log'
