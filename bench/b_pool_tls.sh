#!/usr/bin/env bash
# What TLS costs the pool: bin/loadgen on one host against Redis on
# another (tests/hosts.sh; loopback where network namespaces cannot be
# made), 1,000 simulated nodes on docs/pool-scale.md's schedule (rounds of
# 10 s, 8 groups of 22,000 bytes published and 4 drawn per node and
# round), by THREADS (default 8) threads: one redis-server in plain text
# and one with TLS only and clients' certificates (scripts/tls-certs.sh),
# runs taking turns, RUNS (default 3; 1 with QUICK=1) of each, SECONDS
# (default 30; 20 with QUICK=1) of schedule a run.
# Goal (issue 67): TLS's draw p99 and the server's CPU at most 1.5 times
# plain text's, medians of the runs; each line's ratio to its goal (at
# most 1 meets it).
set -u
cd "$(dirname "$0")/.."
bin=${SAPO_BIN:-bin}
[ -x "$bin/loadgen" ] || { echo "b_pool_tls: $bin/loadgen missing (make bench builds it)" >&2; exit 1; }
for c in redis-server openssl python3; do
  command -v $c > /dev/null || { echo "b_pool_tls: needs $c" >&2; exit 1; }
done
quick=${SAPO_BENCH_QUICK:-0}
runs=${RUNS:-$([ "$quick" = 1 ] && echo 1 || echo 3)}
seconds=${SECONDS_OF_SCHEDULE:-$([ "$quick" = 1 ] && echo 20 || echo 30)}
threads=${THREADS:-8}
tmp=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill $p 2> /dev/null; done; wait 2> /dev/null; tests/hosts.sh stop "$tmp/hosts" > /dev/null 2>&1; rm -rf "$tmp"' EXIT

if tests/hosts.sh start "$tmp/hosts" pool gen 2> /dev/null; then
  where="across two hosts (network namespaces)"
  host=$(tests/hosts.sh addr "$tmp/hosts" pool)
  on() { local h=$1; shift; tests/hosts.sh run "$tmp/hosts" "$h" "$@"; }
else
  where="on loopback (no network namespaces here)"
  host=127.0.0.1
  on() { shift; "$@"; }
fi
c=$tmp/tls
{ scripts/tls-certs.sh "$c" ca && scripts/tls-certs.sh "$c" server pool "$host" && scripts/tls-certs.sh "$c" node gen; } \
  > "$tmp/certs.log" 2>&1 || { cat "$tmp/certs.log" >&2; exit 1; }
on pool redis-server --port 6379 --bind "$host" --protected-mode no --save "" --appendonly no > /dev/null 2>&1 &
pids+=($!)
on pool redis-server --port 0 --tls-port 6380 --bind "$host" --protected-mode no --save "" --appendonly no \
  --tls-cert-file "$c/pool.crt" --tls-key-file "$c/pool.key" --tls-ca-cert-file "$c/ca.crt" --tls-auth-clients yes \
  > /dev/null 2>&1 &
pids+=($!)
sleep 0.5
export SAPO_TLS_CA=$c/ca.crt SAPO_TLS_CERT=$c/gen.crt SAPO_TLS_KEY=$c/gen.key
echo "b_pool_tls: 1,000 nodes $where, $threads threads, $runs runs of each, $seconds s of schedule each"
for r in $(seq "$runs"); do
  for kind in plain tls; do
    if [ $kind = plain ]; then url=redis://$host:6379; else url=rediss://$host:6380; fi
    # the TLS settings go with the rediss URL only
    if [ $kind = plain ]; then
      on gen env -u SAPO_TLS_CA -u SAPO_TLS_CERT -u SAPO_TLS_KEY "$bin/loadgen" --redis "$url" --nodes 1000 \
        --seconds "$seconds" --round-seconds 10 --threads "$threads" > "$tmp/$kind-$r.out" 2> "$tmp/$kind-$r.err"
    else
      on gen "$bin/loadgen" --redis "$url" --nodes 1000 --seconds "$seconds" --round-seconds 10 --threads "$threads" \
        > "$tmp/$kind-$r.out" 2> "$tmp/$kind-$r.err"
    fi || { echo "b_pool_tls: $kind run $r failed: $(tail -n 1 "$tmp/$kind-$r.err")" >&2; exit 1; }
    tail -n 1 "$tmp/$kind-$r.out" > "$tmp/$kind-$r.json"
    python3 -c "
import json, sys
j = json.load(open('$tmp/$kind-$r.json'))
print('  run $r, $kind: draw p99 %.3g ms, publish p99 %.3g ms, server CPU %.3f cores, %d errors'
      % (j['draw']['p99_ms'], j['publish']['p99_ms'], j['server_cpu'], j['errors']))"
  done
done
python3 - "$tmp" "$runs" <<'PY'
import json, statistics, sys
tmp, runs = sys.argv[1], int(sys.argv[2])
j = {k: [json.load(open("%s/%s-%d.json" % (tmp, k, r))) for r in range(1, runs + 1)] for k in ("plain", "tls")}
med = lambda k, f: statistics.median(f(x) for x in j[k])
for name, f, unit in (("draw_p99", lambda x: x["draw"]["p99_ms"], "ms"),
                      ("publish_p99", lambda x: x["publish"]["p99_ms"], "ms"),
                      ("server_cpu", lambda x: x["server_cpu"], "cores")):
    p, t = med("plain", f), med("tls", f)
    print("bench pool_1000_nodes_%s_plain: %.4g %s" % (name, p, unit))
    print("bench pool_1000_nodes_%s_tls: %.4g %s" % (name, t, unit))
    if name != "publish_p99":
        r = t / p if p > 0 else float("inf")
        print("bench pool_tls_%s_over_plain: %.3g x (goal: 1.5 x, ratio %.3g)" % (name, r, r / 1.5))
errors = sum(x["errors"] for k in j for x in j[k])
print("bench pool_tls_errors: %d errors" % errors)
PY
