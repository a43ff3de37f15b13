#!/usr/bin/env bash
# A real Redis Cluster on loopback for the tests: 3 masters and 3
# replicas (redis-server --cluster-enabled yes, joined by redis-cli
# --cluster create), a node timeout of 1 s so a failover takes seconds
# (CLUSTER_NODE_TIMEOUT=MS: another, e.g. Redis's default 15000).
#
#   tests/cluster.sh start DIR [ACLFILE ADMINPASS]
#                                  starts it under DIR (every node with the ACL
#                                  file, replicas reaching their masters as admin);
#                                  prints the seed URL
#                                  (redis-cluster://127.0.0.1:P1,...); DIR/ports
#                                  lists each node's port and pid
#   tests/cluster.sh wait DIR      until every node says cluster_state:ok, each
#                                  master has a replica and every replica has
#                                  finished its first copy (30 s at most)
#   tests/cluster.sh stop DIR      kills every node and removes DIR
set -u
cmd=${1:-} dir=${2:-} acl=${3:-} pass=${4:-}
# redis-cli as admin where the cluster has users
rcli() { if [ -n "$pass" ]; then redis-cli --user admin --pass "$pass" --no-auth-warning "$@"; else redis-cli "$@"; fi; }
[ -n "$dir" ] || { echo "usage: tests/cluster.sh start|wait|stop DIR" >&2; exit 2; }

# every master's count of connected replicas, and each node's state
healthy() {
  local p
  while read -r p _; do
    rcli -p "$p" cluster info 2> /dev/null | grep -q '^cluster_state:ok' || return 1
  done < "$dir/ports"
  p=$(head -n 1 "$dir/ports" | cut -d' ' -f1)
  local nodes
  nodes=$(rcli -p "$p" cluster nodes 2> /dev/null) || return 1
  [ "$(awk '$3 ~ /master/' <<< "$nodes" | wc -l)" = 3 ] && [ "$(awk '$3 ~ /slave/' <<< "$nodes" | wc -l)" = 3 ] &&
    ! awk '{ print $3 }' <<< "$nodes" | grep -qE 'fail|handshake|noaddr' || return 1
  # every replica holds its master's copy: its link is up and its first
  # sync is over, so a write a test makes is confirmed (WAIT) and survives
  # its master's kill
  local info
  while read -r p _; do
    info=$(rcli -p "$p" info replication 2> /dev/null | tr -d '\r') || return 1
    grep -q '^role:slave' <<< "$info" || continue
    grep -q '^master_link_status:up' <<< "$info" && grep -q '^master_sync_in_progress:0' <<< "$info" || return 1
  done < "$dir/ports"
}

wait_healthy() {
  for _ in $(seq 300); do
    healthy && return 0
    sleep 0.1
  done
  echo "cluster.sh: the cluster in $dir did not come up healthy in 30 s" >&2
  return 1
}

case "$cmd" in
  start)
    mkdir -p "$dir"
    ports=$(python3 -c '
import socket
s = [socket.socket() for _ in range(12)]
for x in s: x.bind(("127.0.0.1", 0))
print(" ".join(str(x.getsockname()[1]) for x in s))
for x in s: x.close()')
    read -r -a p <<< "$ports"
    : > "$dir/ports"
    seeds=""
    for i in 0 1 2 3 4 5; do
      port=${p[$i]} bus=${p[$((i + 6))]}
      mkdir -p "$dir/n$i"
      redis-server --port "$port" --bind 127.0.0.1 --cluster-enabled yes --cluster-port "$bus" \
        --cluster-config-file "$dir/n$i/nodes.conf" --cluster-node-timeout "${CLUSTER_NODE_TIMEOUT:-1000}" --dir "$dir/n$i" \
        --save "" --appendonly no --logfile "$dir/n$i/redis.log" --daemonize no \
        ${acl:+--aclfile "$acl" --masteruser admin --masterauth "$pass"} > /dev/null 2>&1 &
      echo "$port $!" >> "$dir/ports"
      seeds+="${seeds:+ }127.0.0.1:$port"
    done
    for i in 0 1 2 3 4 5; do
      for _ in $(seq 100); do rcli -p "${p[$i]}" ping 2> /dev/null | grep -q PONG && break; sleep 0.05; done
    done
    # shellcheck disable=SC2086
    rcli --cluster create $seeds --cluster-replicas 1 --cluster-yes > "$dir/create.log" 2>&1 ||
      { echo "cluster.sh: redis-cli --cluster create failed (see $dir/create.log)" >&2; exit 1; }
    wait_healthy || exit 1
    echo "redis-cluster://$(tr ' ' ',' <<< "$seeds")"
    ;;
  wait) wait_healthy ;;
  stop)
    if [ -f "$dir/ports" ]; then
      while read -r _ pid; do kill -9 "$pid" 2> /dev/null; done < "$dir/ports"
      while read -r _ pid; do wait "$pid" 2> /dev/null; done < "$dir/ports"
    fi
    rm -rf "$dir"
    ;;
  *) echo "usage: tests/cluster.sh start|wait|stop DIR" >&2; exit 2 ;;
esac
