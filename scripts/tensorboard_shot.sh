#!/usr/bin/env bash
# The picture of docs/metrics.md: a real TensorBoard (from .venv: tests/
# oracle/setup.sh tensorboard) serving a run folder, drawn by headless
# Chromium (Debian's chromium package): the Scalars dashboard, its tag
# filter set, no smoothing (the Time Series dashboard draws its lines with
# WebGL, which headless Chromium leaves blank).
#
#   scripts/tensorboard_shot.sh RUN OUT.png [FILTER] [WIDTHxHEIGHT]
#
# FILTER: a regular expression of the tags to show (default reward|pass1);
# size default 1280x800.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: scripts/tensorboard_shot.sh RUN OUT.png [FILTER] [WIDTHxHEIGHT]" >&2; exit 2; }
run=$1 out=$2 filter=${3:-reward|pass1} size=${4:-1280x800}
[ -d "$run" ] || { echo "tensorboard_shot: $run: no such folder" >&2; exit 1; }
[ -x .venv/bin/tensorboard ] || { echo "tensorboard_shot: no .venv/bin/tensorboard: run tests/oracle/setup.sh tensorboard" >&2; exit 1; }
command -v chromium > /dev/null || { echo "tensorboard_shot: no chromium: apt-get install chromium" >&2; exit 1; }
port=$((30000 + $$ % 20000))
.venv/bin/tensorboard --logdir "$run" --port $port --host 127.0.0.1 > "$out.tensorboard.log" 2>&1 &
tb=$!
trap 'kill $tb 2> /dev/null; wait $tb 2> /dev/null; rm -f "$out.tensorboard.log"' EXIT
for _ in $(seq 120); do
  python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/data/runs', timeout=2)" 2> /dev/null && break
  sleep 0.5
done
enc=$(python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$filter")
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size="${size/x/,}" \
  --virtual-time-budget=20000 --screenshot="$out" "http://127.0.0.1:$port/?darkMode=false#scalars&tagFilter=$enc&_smoothingWeight=0" \
  > /dev/null 2>&1
[ -s "$out" ] || { echo "tensorboard_shot: chromium drew nothing" >&2; cat "$out.tensorboard.log" >&2; exit 1; }
# 64 colours are enough for a dashboard, and a third of the bytes
.venv/bin/python -c 'import sys; from PIL import Image
Image.open(sys.argv[1]).convert("RGB").quantize(64).save(sys.argv[1], optimize=True)' "$out" 2> /dev/null || true
echo "tensorboard_shot: $out ($(du -k "$out" | cut -f1) KB)"
