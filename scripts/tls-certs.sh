#!/usr/bin/env bash
# A swarm's TLS certificates, made with the openssl command (P-256 keys):
#
#   scripts/tls-certs.sh DIR ca                   the swarm's CA: DIR/ca.crt (every node and
#                                                 Redis trusts it) and DIR/ca.key (signs the rest;
#                                                 keep it off the swarm's machines)
#   scripts/tls-certs.sh DIR server NAME ADDR...  a Redis server's DIR/NAME.crt and .key, valid for
#                                                 each address (IP) or DNS name it is reached by
#                                                 (also a client's, for a cluster's bus and replicas)
#   scripts/tls-certs.sh DIR node NAME            a node's client certificate DIR/NAME.crt and .key
#
# SAPO_TLS_DAYS (365) is how long a certificate holds; -1 makes one that
# has already expired (the tests' refusal of it). docs/security.md shows
# where each file goes.
set -eu
usage() { sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[ $# -ge 2 ] || usage
dir=$1 kind=$2
shift 2
days=${SAPO_TLS_DAYS:-365}
command -v openssl > /dev/null || { echo "tls-certs: the openssl command is needed (apt-get install openssl)" >&2; exit 1; }
mkdir -p "$dir"
umask 077

case $kind in
  ca)
    [ ! -e "$dir/ca.key" ] || { echo "tls-certs: $dir/ca.key exists: a swarm keeps its CA" >&2; exit 1; }
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$dir/ca.key" \
      -out "$dir/ca.crt" -days 3650 -subj "/CN=sapo swarm CA" 2> "$dir/.openssl.log" ||
      { cat "$dir/.openssl.log" >&2; exit 1; }
    chmod 644 "$dir/ca.crt"
    echo "tls-certs: $dir/ca.crt (give it to every node and Redis) and $dir/ca.key (keep it safe)"
    ;;
  server|node)
    [ $# -ge 1 ] || usage
    name=$1
    shift
    [ -e "$dir/ca.key" ] || { echo "tls-certs: $dir/ca.key missing: make the CA first ($0 $dir ca)" >&2; exit 1; }
    case $name in *[!A-Za-z0-9._-]*|'') echo "tls-certs: name '$name': letters, digits, . _ - only" >&2; exit 2 ;; esac
    ext=$(mktemp)
    trap 'rm -f "$ext" "$dir/$name.csr"' EXIT
    if [ "$kind" = server ]; then
      [ $# -ge 1 ] || { echo "tls-certs: a server needs the addresses or names it is reached by" >&2; exit 2; }
      san=
      for a in "$@"; do
        if [[ $a =~ ^[0-9.]+$ || $a == *:* ]]; then san+="${san:+,}IP:$a"; else san+="${san:+,}DNS:$a"; fi
      done
      printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\n' "$san" > "$ext"
    else
      printf 'extendedKeyUsage=clientAuth\n' > "$ext"
    fi
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$dir/$name.key" \
      -out "$dir/$name.csr" -subj "/CN=$name" 2> "$dir/.openssl.log" &&
      openssl x509 -req -in "$dir/$name.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial \
        -days "$days" -extfile "$ext" -out "$dir/$name.crt" 2>> "$dir/.openssl.log" ||
      { cat "$dir/.openssl.log" >&2; exit 1; }
    chmod 644 "$dir/$name.crt"
    echo "tls-certs: $dir/$name.crt and $dir/$name.key ($kind, $days days)"
    ;;
  *) usage ;;
esac
