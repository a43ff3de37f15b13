#!/usr/bin/env bash
# The pool over TLS between hosts (tests/hosts.sh): Redis on host "pool"
# with TLS only (its plain-text port closed), client certificates required
# (tls-auth-clients) and an ACL user per node (scripts/acl.sh); the swarm's
# CA and certificates from scripts/tls-certs.sh. Node a0 on host n1 and
# node a1 on host n2 (the micro model, I/J 4/4) reach it by rediss://,
# a1 through a recording proxy on the pool host (tests/link_proxy.py):
#   - they train, share from their third rounds, and say nothing of a
#     link in clear text;
#   - what the proxy saw is TLS records only, both ways, and holds no
#     password;
#   - a1's link made 200 ms long each way, give or take 50: both go on
#     sharing, and a0 keeps at least 0.8 of its pace;
#   - each way a connection can be refused says one line that names its
#     cause: a node certificate of another CA, none, or expired; a server
#     certificate of another CA, another name, or expired; a plain-text
#     client on the TLS port, a TLS client on a plain-text port; and the
#     settings themselves (a missing file, a certificate without its key,
#     TLS settings for a redis:// URL).
set -u
cd "$(dirname "$0")/.."
bin=${SAPO_BIN:-build/asan/bin}
tmp=$(mktemp -d)
. tests/nodes.sh
trap 'nodes_cleanup_hosts' EXIT
check() { if (eval "$2"); then echo "PASS tls_$1"; else echo "FAIL tls_$1"; fi; }
need tls pool openssl
nodes_init tls
tests/hosts.sh start "$tmp/hosts" pool n1 n2 2> "$tmp/hosts.err" ||
  { echo "SKIP tls: no network namespaces here ($(head -n 1 "$tmp/hosts.err"))"; exit 0; }
pool=$(tests/hosts.sh addr "$tmp/hosts" pool)
on() { local h=$1; shift; tests/hosts.sh run "$tmp/hosts" "$h" "$@"; }

# the swarm's CA and certificates, another CA's, and expired ones
c=$tmp/tls
{
  scripts/tls-certs.sh "$c" ca && scripts/tls-certs.sh "$c" server pool "$pool" &&
    for n in admin a0 a1; do scripts/tls-certs.sh "$c" node $n; done &&
    SAPO_TLS_DAYS=-1 scripts/tls-certs.sh "$c" node old && SAPO_TLS_DAYS=-1 scripts/tls-certs.sh "$c" server stale "$pool" &&
    scripts/tls-certs.sh "$c/other" ca && scripts/tls-certs.sh "$c/other" node a0
} > "$tmp/certs.log" 2>&1 || { cat "$tmp/certs.log"; echo "FAIL tls_certificates"; exit 1; }
export SAPO_SWARM=t$$
scripts/acl.sh --swarm "$SAPO_SWARM" --out "$tmp/users.acl" a0 a1 > /dev/null
url() { grep "^$1 " "$tmp/users.acl.urls" | cut -d' ' -f2 | sed "s|^redis://|rediss://|; s|HOST|$pool:${2:-6380}|"; }
pw() { grep "^$1 " "$tmp/users.acl.urls" | sed 's|.*://[^:]*:\([^@]*\)@.*|\1|'; }

# TLS only on 6380 (no plain-text port); the same with an expired
# certificate on 6381; another Redis in plain text on 6382
on pool redis-server --port 0 --tls-port 6380 --bind "$pool" --tls-cert-file "$c/pool.crt" --tls-key-file "$c/pool.key" \
  --tls-ca-cert-file "$c/ca.crt" --tls-auth-clients yes --aclfile "$tmp/users.acl" --save "" --appendonly no \
  > "$tmp/redis.log" 2>&1 &
pids+=($!)
on pool redis-server --port 0 --tls-port 6381 --bind "$pool" --tls-cert-file "$c/stale.crt" --tls-key-file "$c/stale.key" \
  --tls-ca-cert-file "$c/ca.crt" --save "" --appendonly no > "$tmp/stale.log" 2>&1 &
pids+=($!)
on pool redis-server --port 6382 --bind "$pool" --save "" --appendonly no > "$tmp/plain.log" 2>&1 &
pids+=($!)
on pool python3 tests/link_proxy.py --listen "$pool" --record "$tmp/seen" "$pool:6380" "$tmp/link" > "$tmp/proxy.port" 2> "$tmp/proxy.log" &
pids+=($!)
# the admin loads the pool functions (a node's user may not)
admin() {
  on n1 env SAPO_REDIS="$(url admin)" SAPO_TLS_CA="$c/ca.crt" SAPO_TLS_CERT="$c/admin.crt" SAPO_TLS_KEY="$c/admin.key" \
    "$bin/pool" size --swarm "$SAPO_SWARM" 2>&1
}
for _ in $(seq 50); do [ "$(admin)" = 0 ] && [ -s "$tmp/proxy.port" ] && break; sleep 0.1; done
check plain_text_closed '! on n1 bash -c "echo > /dev/tcp/$pool/6379" 2> /dev/null &&
  ! on n1 timeout 5 redis-cli -h "$pool" -p 6380 ping 2> /dev/null | grep -q PONG'
check admin_over_tls '[ "$(admin)" = 0 ]'
[ -s "$tmp/proxy.port" ] || { cat "$tmp/proxy.log"; echo "FAIL tls_proxy_start"; exit 1; }

export SAPO_CHECKPOINT_EVERY=1000 SAPO_LOCAL_GROUPS=4 SAPO_EXTERNAL_GROUPS=4 SAPO_TLS_CA=$c/ca.crt
SAPO_REDIS=$(url a0) SAPO_TLS_CERT=$c/a0.crt SAPO_TLS_KEY=$c/a0.key node_host=n1 node_start a0 1
SAPO_REDIS=$(url a1 "$(cat "$tmp/proxy.port")") SAPO_TLS_CERT=$c/a1.crt SAPO_TLS_KEY=$c/a1.key node_host=n2 node_start a1 2
check trains 'advance 10 || { tail -n 3 "$tmp"/a*/sampler.log; false; }'
check shares 'shares_from_third a0 8 && shares_from_third a1 8'
check no_clear_text_warning '! grep -q "not encrypted" "$tmp"/a*/sampler.log'
check no_pool_error '! grep -q "error: pool" "$tmp"/a*/sampler.log || { grep -h "error: pool" "$tmp"/a*/sampler.log | head -3; false; }'
# every byte on a1's link is a TLS record (type 20 to 23, version 3.x, a
# length that lands on the next record's start), both ways
tls_only() {
  python3 -c "
import sys
ok = True
for way in ('up', 'down'):
    b = open('$tmp/seen.' + way, 'rb').read()
    i = n = 0
    while i + 5 <= len(b) and b[i] in (20, 21, 22, 23) and b[i + 1] == 3:
        i += 5 + int.from_bytes(b[i + 3:i + 5], 'big'); n += 1
    # a record cut at the end is one the proxy was passing when read
    print('  %s: %d bytes, %d TLS records, %s' % (way, len(b), n, 'nothing else' if i >= len(b) - 5 or i >= len(b) else 'other bytes at %d' % i))
    ok = ok and len(b) > 10000 and n > 10 and (i >= len(b) or len(b) - i < 5 + 16384 + 256)
sys.exit(0 if ok else 1)"
}
check link_carries_tls_only 'tls_only'
check link_carries_no_password '! grep -q -a -F "$(pw a1)" "$tmp/seen.up" "$tmp/seen.down"'

# a1's link 200 ms long each way, give or take 50: a1 goes on sharing,
# a0 keeps its pace
r0=$(rows a0) r1=$(rows a1)
slow_at=$(date +%s.%N)
echo "delay 200 50" > "$tmp/link"
check slow_link_trains 'advance 4'
slow_end=$(date +%s.%N)
echo ok > "$tmp/link"
check slow_link_shares '[ "$(shared_since a1 $r1)" -ge 3 ] && [ "$(shared_since a0 $r0)" -ge 3 ]'
check slow_link_other_keeps_pace 'keeps_pace a0 $slow_at $slow_end'
echo "  a1's pool time a round on the slow link: $(python3 -c "
import json
rs = [json.loads(l) for l in open('$tmp/a1/metrics.jsonl')][$r1:]
print(' '.join('%.2f' % r['seconds']['pool'] for r in rs[:6]), 's')")"

# each refusal: exit status 1 or 2 and one line that names the cause
# ($1 a name, $2 the text the line must hold, then env settings)
refused() {
  local name=$1 want=$2
  shift 2
  on n1 env "$@" "$bin/pool" size --swarm "$SAPO_SWARM" > "$tmp/$name.out" 2> "$tmp/$name.err"
  local rc=$?
  echo "  $name: $(cat "$tmp/$name.err")"
  [ $rc != 0 ] && [ "$(wc -l < "$tmp/$name.err")" = 1 ] && grep -q -- "$want" "$tmp/$name.err"
}
node0="SAPO_REDIS=$(url a0)"
check refuses_node_of_other_ca 'refused other_ca_node "certificate" $node0 SAPO_TLS_CERT=$c/other/a0.crt SAPO_TLS_KEY=$c/other/a0.key'
check refuses_node_without_certificate 'refused no_cert "certificate" $node0 SAPO_TLS_CERT= SAPO_TLS_KEY='
check refuses_expired_node 'refused expired_node "certificate" $node0 SAPO_TLS_CERT=$c/old.crt SAPO_TLS_KEY=$c/old.key'
mine="SAPO_TLS_CERT=$c/a0.crt SAPO_TLS_KEY=$c/a0.key"
check refuses_server_of_other_ca 'refused other_ca_server "not signed by a CA of tls-ca" $node0 $mine SAPO_TLS_CA=$c/other/ca.crt'
check refuses_server_of_other_name 'refused other_name "does not carry the name" $node0 $mine SAPO_TLS_NAME=redis.example.org'
check refuses_expired_server 'refused expired_server "certificate has expired" SAPO_REDIS=rediss://$pool:6381 $mine'
check refuses_plain_client 'refused plain_client "a TLS port ends a plain-text client" SAPO_REDIS=redis://$pool:6380 SAPO_TLS_CA= SAPO_TLS_CERT= SAPO_TLS_KEY='
check refuses_tls_to_plain 'refused tls_to_plain "does not speak TLS" SAPO_REDIS=rediss://$pool:6382 $mine'
check names_missing_file 'refused missing_file "tls-ca (SAPO_TLS_CA) $c/none.crt: No such file" $node0 $mine SAPO_TLS_CA=$c/none.crt'
check names_missing_key 'refused missing_key "go together" $node0 SAPO_TLS_CERT=$c/a0.crt SAPO_TLS_KEY='
check names_plain_url 'refused plain_url "is plain text: over TLS it is rediss://" SAPO_REDIS=redis://$pool:6382 $mine'
check no_process_exits 'all_alive'
check no_sanitizer_error '! grep -l -E "Sanitizer|runtime error" "$tmp"/a*/*.log "$tmp"/*.err'
