#!/usr/bin/env bash
# Installs the Debian packages sapo needs, only those missing. Python
# packages (test oracles only) live in .venv and are set up by
# tests/oracle/setup.sh when someone regenerates golden files; pip also
# fetches the real models (scripts/model.sh).
set -eu
need=(build-essential pkg-config libzmq3-dev libczmq-dev flatbuffers-compiler
      libflatbuffers-dev libhiredis-dev libssl-dev openssl redis-server libopenblas-dev libcjson-dev
      libpcre2-dev libutf8proc-dev libsodium-dev libprotobuf-c-dev protobuf-c-compiler
      gnuplot-nox ruby-foreman
      clang-format python3-pip xz-utils)
missing=()
for p in "${need[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "deps: missing Debian packages: ${missing[*]}; run as root or: sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
