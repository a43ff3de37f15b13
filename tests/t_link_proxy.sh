#!/usr/bin/env bash
# The tests' link shaper (tests/link_proxy.py) against an echo server on
# loopback, each mode timed by round trips of 96 bytes: "ok" passes at
# once; "delay 100" adds 100 ms each way (a round trip 200 ms and more);
# "delay 100 40" spreads the round trips over 120 to 280 ms and keeps
# every byte in order; a megabyte sent whole under "delay 100" takes a
# round trip, not one per chunk (the delay costs no bandwidth); "stall"
# passes nothing until "ok" again, and then everything; --record keeps
# every byte passed, each way.
set -u
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2> /dev/null; done; rm -rf "$tmp"' EXIT
check() { if (eval "$2"); then echo "PASS link_proxy_$1"; else echo "FAIL link_proxy_$1"; fi; }
command -v python3 > /dev/null || { echo "SKIP link_proxy: python3 needed"; exit 0; }
python3 -c '
import socket, threading
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
print(s.getsockname()[1], flush=True)
def echo(c):
    while (d := c.recv(65536)):
        c.sendall(d)
while True:
    threading.Thread(target=echo, args=(s.accept()[0],), daemon=True).start()' > "$tmp/echo.port" &
pids+=($!)
for _ in $(seq 50); do [ -s "$tmp/echo.port" ] && break; sleep 0.1; done
python3 tests/link_proxy.py --record "$tmp/seen" "$(cat "$tmp/echo.port")" "$tmp/link" > "$tmp/proxy.port" &
pids+=($!)
for _ in $(seq 50); do [ -s "$tmp/proxy.port" ] && break; sleep 0.1; done
port=$(cat "$tmp/proxy.port")

# N round trips of 96 bytes (each a counter, so order shows), or one of
# BYTES: prints each trip's ms; fails on bytes out of order
trips() {
  python3 - "$port" "$@" <<'PY'
import socket, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
size = int(sys.argv[3]) if len(sys.argv) > 3 else 96
c = socket.create_connection(("127.0.0.1", port))
for i in range(n):
    msg = (b"%08d" % i) * (size // 8)
    t = time.monotonic()
    c.sendall(msg)
    got = b""
    while len(got) < len(msg):
        got += c.recv(1 << 20)
    if got != msg:
        sys.exit("bytes out of order at trip %d" % i)
    print("%.1f" % (1000 * (time.monotonic() - t)))
PY
}
mode() { echo "$*" > "$tmp/link"; sleep 0.2; }
within() { awk -v lo="$2" -v hi="$3" '$1 < lo || $1 > hi { bad = 1 } END { exit bad }' "$1"; }

mode ok
check ok 'trips 20 > "$tmp/ok" && within "$tmp/ok" 0 50'
mode delay 100
check delay 'trips 10 > "$tmp/delay" && within "$tmp/delay" 195 300'
mode delay 100 40
check jitter 'trips 30 > "$tmp/jitter" && within "$tmp/jitter" 115 300 &&
  [ "$(sort -n "$tmp/jitter" | sed -n "3p;28p" | awk "NR == 1 { lo = \$1 } NR == 2 { print (\$1 - lo > 30) }")" = 1 ]'
check bandwidth_kept 'trips 1 1048576 > "$tmp/mb" && within "$tmp/mb" 195 600'
echo "  round trips: ok $(sort -n "$tmp/ok" | sed -n 10p) ms, delay 100: $(sort -n "$tmp/delay" | sed -n 5p) ms," \
  "delay 100 40: $(sort -n "$tmp/jitter" | head -n 1) to $(sort -n "$tmp/jitter" | tail -n 1) ms, 1 MB at delay 100: $(cat "$tmp/mb") ms"
mode stall
trips 1 > "$tmp/stall" &
t=$!
sleep 1.5
check stall '[ ! -s "$tmp/stall" ]'
mode ok
wait $t
check stall_then_ok 'within "$tmp/stall" 1000 5000'
check records 'python3 -c "
import os, sys
up, down = (os.path.getsize(\"$tmp/seen.\" + w) for w in (\"up\", \"down\"))
print(\"  recorded: %d bytes up, %d down\" % (up, down))
sys.exit(0 if up == down and up == 61 * 96 + 1048576 else 1)"'
