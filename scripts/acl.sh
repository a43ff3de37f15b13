#!/usr/bin/env bash
# Writes a Redis ACL file for a swarm's pool: one user per node, which may
# run the pool functions and read every pool key of the swarm but write only
# its own keys (<swarm>:n:<node>:*, on a cluster <swarm>:n:{<node>}:*) and
# the node set <swarm>:nodes (with SADD: no SREM); no DEL, no FLUSH*, no
# FUNCTION, no CONFIG. An admin user (all rights) loads the pool functions
# and sets the swarm's bound; the default user is off.
#
#   scripts/acl.sh --swarm S --out users.acl [--cluster] NODE...
#
# --cluster: for a Redis Cluster, every node of which takes the same file
# (redis-server --aclfile, and --masteruser admin --masterauth PASSWORD so
# that replicas reach their masters); the bound an operator sets there is
# per node, S:max_per_node:{NODE}, in the slot of the node's keys.
#
# Passwords are drawn from /dev/urandom; each user's redis:// URL (with
# HOST for the host name) goes to users.acl.urls (mode 600), the admin's
# first. Start Redis with `redis-server --aclfile users.acl`, then once:
#   bin/pool size --redis <admin URL> --swarm S     (loads the functions)
#   redis-cli --user admin ... SET S:max_per_node N  (the bound no node can raise)
set -euo pipefail
swarm= out= cluster=0
nodes=()
while [ $# -gt 0 ]; do
  case "$1" in
    --swarm) swarm=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --cluster) cluster=1; shift ;;
    -*) echo "acl: unknown flag '$1'" >&2; exit 2 ;;
    *) nodes+=("$1"); shift ;;
  esac
done
[ -n "$swarm" ] && [ -n "$out" ] && [ ${#nodes[@]} -gt 0 ] || { echo "usage: scripts/acl.sh --swarm S --out FILE NODE..." >&2; exit 2; }
[[ "$swarm" =~ ^[A-Za-z0-9_.-]+$ ]] || { echo "acl: swarm '$swarm': letters, digits, '_', '.' or '-' only" >&2; exit 2; }
pw() { head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
umask 077
admin=$(pw)
{
  echo "user default off"
  echo "user admin on >$admin ~* &* +@all"
  for n in "${nodes[@]}"; do
    [[ "$n" =~ ^[A-Za-z0-9_.-]{1,63}$ ]] || { echo "acl: node id '$n': 1..63 letters, digits, '_', '.' or '-'" >&2; exit 2; }
    p=$(pw)
    own=$swarm:n:$n:*
    [ $cluster = 1 ] && own="$swarm:n:{$n}:*"
    echo "user $n on >$p resetchannels -@all +fcall +fcall_ro +ping +hello +auth +select +get +set +strlen +hget +hset +hdel +hstrlen +mget +sadd +smembers +scard +srandmember +time +pexpire +cluster|slots +asking +readonly %R~$swarm:* ~$own ~$swarm:nodes"
    echo "$n redis://$n:$p@HOST" >> "$out.urls.new"
  done
} > "$out.new"
{ echo "admin redis://admin:$admin@HOST"; cat "$out.urls.new"; } > "$out.urls"
rm -f "$out.urls.new"
mv "$out.new" "$out"
echo "acl: $out (${#nodes[@]} node users + admin), URLs in $out.urls"
