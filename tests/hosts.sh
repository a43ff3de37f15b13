#!/usr/bin/env bash
# Separate hosts on this machine for the tests: a network namespace per
# host, each joined by a veth link to a switch (a bridge in a namespace of
# its own), each with its own address on 10.77.0.0/24. Traffic goes
# between the namespaces this made and never leaves them: the machine's
# own network and loopback are not on the switch. Needs root (every
# session and CI run is).
#
#   tests/hosts.sh start DIR NAME...  makes the hosts; DIR/hosts lists
#                                     "NAME NAMESPACE ADDRESS" a line each
#   tests/hosts.sh addr DIR NAME      a host's address
#   tests/hosts.sh run DIR NAME CMD...  CMD on host NAME (ip netns exec)
#   tests/hosts.sh cut DIR NAME       NAME's link to the switch down (the
#                                     host cut off from every other)
#   tests/hosts.sh mend DIR NAME      its link up again
#   tests/hosts.sh stop DIR           every namespace removed (their links
#                                     and the switch with them), and DIR
set -u
cmd=${1:-} dir=${2:-}
[ -n "$dir" ] || { echo "usage: tests/hosts.sh start|addr|run|cut|mend|stop DIR ..." >&2; exit 2; }
shift 2
# a host's field from DIR/hosts: 2 its namespace, 3 its address
field() { awk -v h="$1" -v f="$2" '$1 == h { print $f }' "$dir/hosts"; }
# the switch's end of host $1's link
port_of() { echo "s$(field "$1" 2 | md5sum | cut -c1-8)"; }

case "$cmd" in
  start)
    command -v ip > /dev/null || { echo "hosts.sh: ip (iproute2) is needed" >&2; exit 1; }
    mkdir -p "$dir"
    id=$(basename "$(mktemp -u sapoXXXXXX)")
    sw=$id-switch
    ip netns add "$sw" || { echo "hosts.sh: cannot make network namespaces (root needed)" >&2; exit 1; }
    echo "$sw" > "$dir/switch"
    : > "$dir/hosts"
    ip -n "$sw" link add br0 type bridge && ip -n "$sw" link set br0 up || exit 1
    k=1
    for name in "$@"; do
      ns=$id-$name addr=10.77.0.$k
      ip netns add "$ns" || exit 1
      echo "$name $ns $addr" >> "$dir/hosts"
      p=$(port_of "$name")
      ip link add "h$k$id" netns "$ns" type veth peer name "$p" netns "$sw" || exit 1
      ip -n "$ns" link set "h$k$id" name eth0
      ip -n "$ns" addr add "$addr/24" dev eth0
      ip -n "$ns" link set lo up
      ip -n "$ns" link set eth0 up
      ip -n "$sw" link set "$p" master br0
      ip -n "$sw" link set "$p" up
      k=$((k + 1))
    done
    ;;
  addr) field "$1" 3 ;;
  run)
    ns=$(field "$1" 2)
    [ -n "$ns" ] || { echo "hosts.sh: no host $1 in $dir" >&2; exit 1; }
    shift
    exec ip netns exec "$ns" "$@"
    ;;
  cut) ip -n "$(cat "$dir/switch")" link set "$(port_of "$1")" down ;;
  mend) ip -n "$(cat "$dir/switch")" link set "$(port_of "$1")" up ;;
  stop)
    if [ -f "$dir/hosts" ]; then
      while read -r _ ns _; do
        # whatever still runs on the host goes with it
        for pid in $(ip netns pids "$ns" 2> /dev/null); do kill -9 "$pid" 2> /dev/null; done
        ip netns del "$ns" 2> /dev/null
      done < "$dir/hosts"
    fi
    [ -f "$dir/switch" ] && ip netns del "$(cat "$dir/switch")" 2> /dev/null
    rm -rf "$dir"
    ;;
  *) echo "usage: tests/hosts.sh start|addr|run|cut|mend|stop DIR ..." >&2; exit 2 ;;
esac
