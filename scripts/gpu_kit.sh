#!/usr/bin/env bash
# The GPU kit: a node and the GPU checks, taken to a lent device machine
# that has none of our Debian packages and can fetch nothing. The programs
# are built here and travel with the shared libraries they need, less the
# C library's, the C++ runtime's and CUDA's (the machine has CUDA and its
# driver, and its python3 needs its own C++ runtime); the scripts, the
# Procfile and config/ travel as the working tree.
#
#   scripts/gpu_kit.sh pack [--bin DIR] [--no-checks]
#       here: the node's programs (bin/, built first; or those in DIR),
#       the pool's load generator (bin/loadgen: bench/b_pool_load.sh runs
#       there on the machine's 16 cores), redis-server and redis-cli, and
#       the GPU checks (test_cuda, release
#       and ASan, and bench_cuda; --no-checks leaves them out), stripped of
#       debug information, into .gpu/kit.tar.xz (xz at its strongest: half
#       the bytes gzip leaves, so a model's last part rides beside it)
#   scripts/gpu_kit.sh unpack
#       there: the node's programs into bin/, the checks where the build
#       puts them, redis into .gpu/bin, and .gpu/env to source: the library
#       path, PATH, SAPO_MODEL_CACHE=.gpu/models (scripts/model.sh join
#       puts a model there), SAPO_GPU_PREBUILT=1 (scripts/gpu_check.sh runs
#       the checks in place); where there is no .venv, .venv/bin/python runs
#       the machine's python3 for the PyTorch peers
#   scripts/gpu_kit.sh plan [NAME...]
#       here: the device calls that take the kit and the parts of each
#       model (scripts/model.sh split NAME) there, with what each carries
#
# A device call carries at most 64 MiB, the working tree included; the kit
# goes once, in the first call. On the device machine:
#   scripts/gpu_kit.sh unpack && . .gpu/env && scripts/gpu_check.sh
set -euo pipefail
cd "$(dirname "$0")/.."

kit=.gpu/kit.tar.xz
# a node's programs, the study's report (scripts/experiment.sh: a swarm
# on one GPU) and the pool's load generator
node_programs=(broker sampler generator verifier learner evaluate tap report study loadgen)
checks=(build/release/tests/test_cuda build/release/bench/bench_cuda build/asan/tests/test_cuda)
# what a call may carry in all, the working tree included (scripts/model.sh
# split keeps 1 MiB of it free for files the tree gains before the call)
limit=$((64 << 20))

die() { echo "gpu_kit: $*" >&2; exit 1; }
mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }

# the C library's own and CUDA's, which the device machine has in versions
# that match its kernel and driver; the C++ runtime too, which must stay the
# machine's own for its python3
system_lib() {
  case "$1" in
    linux-vdso* | ld-linux* | libc.so* | libm.so* | libpthread* | libdl.so* | librt.so* | libresolv*) return 0 ;;
    libcuda.so* | libcudart* | libcurand* | libcublas*) return 0 ;;
    libstdc++* | libgcc_s*) return 0 ;;
  esac
  return 1
}

# bytes of the working tree that travels with every call: tracked files and
# untracked ones git does not ignore
tree_bytes() {
  { git ls-files -z; git ls-files -z --others --exclude-standard; } 2> /dev/null | xargs -0 -r stat -c %s 2> /dev/null |
    awk '{ s += $1 } END { print s + 0 }' || true
}

pack() {
  local bindir="" with_checks=1
  while [ $# -gt 0 ]; do
    case "$1" in
      --bin) bindir=$2; shift 2 ;;
      --no-checks) with_checks=0; shift ;;
      *) die "pack: unknown flag '$1' (pack [--bin DIR] [--no-checks])" ;;
    esac
  done
  if [ -z "$bindir" ]; then
    bindir=bin
    make -j"$(nproc)" MODE=release programs
    if [ $with_checks = 1 ]; then
      make -j"$(nproc)" MODE=release build/release/tests/test_cuda build/release/bench/bench_cuda
      make -j"$(nproc)" MODE=asan build/asan/tests/test_cuda
    fi
  fi
  local p stage progs=()
  for p in "${node_programs[@]}"; do
    [ -x "$bindir/$p" ] || die "$bindir/$p not built (make, or pack --bin DIR)"
  done
  for p in redis-server redis-cli; do command -v "$p" > /dev/null || die "$p not installed (make deps)"; done
  stage=$(mktemp -d)
  trap 'rm -rf "$stage"' RETURN
  mkdir -p "$stage/bin" "$stage/.gpu/libs" "$stage/.gpu/bin"
  for p in "${node_programs[@]}"; do cp "$bindir/$p" "$stage/bin/$p"; progs+=("$stage/bin/$p"); done
  for p in redis-server redis-cli; do cp -L "$(command -v "$p")" "$stage/.gpu/bin/$p"; progs+=("$stage/.gpu/bin/$p"); done
  if [ $with_checks = 1 ]; then
    for p in "${checks[@]}"; do
      [ -x "$p" ] || die "$p not built (pack without --bin builds it, or --no-checks)"
      mkdir -p "$stage/$(dirname "$p")"
      cp "$p" "$stage/$p"
      progs+=("$stage/$p")
    done
  fi
  local name path cuda=0
  for p in "${progs[@]}"; do
    while read -r name _ path _; do
      case "$name" in libcudart*) cuda=1 ;; esac
      if [ -n "${path:-}" ] && [ -f "$path" ] && ! system_lib "$name"; then cp -L "$path" "$stage/.gpu/libs/$name"; fi
    done < <(ldd "$p")
    strip --strip-debug "$p"
  done
  chmod u+w "$stage"/.gpu/libs/*
  strip --strip-debug "$stage"/.gpu/libs/*
  # unpack looks for CUDA's libraries only where a program needs them
  [ $cuda = 1 ] && touch "$stage/.gpu/needs-cuda"
  # the device machine's copy of the tree has no git: what was built, for manifests
  git describe --always --dirty > "$stage/.gpu/version" 2> /dev/null || echo unknown > "$stage/.gpu/version"
  mkdir -p .gpu
  tar -C "$stage" -cf - . | xz -9e -T1 > "$kit.tmp"
  mv "$kit.tmp" "$kit"
  local bytes
  bytes=$(stat -c %s "$kit")
  echo "gpu_kit: $kit, $(mib "$bytes") MiB: ${#progs[@]} programs and $(ls "$stage/.gpu/libs" | wc -l) libraries;" \
    "with the working tree ($(mib "$(tree_bytes)") MiB) a call carries $(mib $((bytes + $(tree_bytes)))) of its 64 MiB"
}

unpack() {
  [ -f "$kit" ] || die "$kit not found (scripts/gpu_kit.sh pack here, then carry $kit)"
  # xz where the machine has it, else python3's lzma (the device image's
  # python3 is certain; its xz is not)
  if command -v xz > /dev/null; then
    xz -dc "$kit" | tar -C . -xf -
  else
    python3 - "$kit" << 'PY' || die "$kit: python3 could not unpack it"
import sys, tarfile
with tarfile.open(sys.argv[1], "r:xz") as kit:
    if hasattr(tarfile, "tar_filter"):
        kit.extractall(".", filter="tar")
    else:
        kit.extractall(".")
PY
  fi
  # CUDA's libraries: the toolkit's, else the ones PyTorch's packages carry
  local cuda="" lib found
  if [ -f .gpu/needs-cuda ]; then
    for lib in libcudart.so.13 libcurand.so.10 libcublas.so.13; do
      found=$(find /usr/local/cuda/lib64/ /usr/local/cuda/targets/x86_64-linux/lib/ /usr/lib/x86_64-linux-gnu/ \
        /opt /usr/local/lib -name "$lib" 2> /dev/null | head -n 1 || true)
      [ -n "$found" ] || die "$lib not found on this machine"
      [[ "$cuda:" == *":$(dirname "$found"):"* ]] || cuda="$cuda:$(dirname "$found")"
    done
  fi
  {
    echo "export LD_LIBRARY_PATH=$PWD/.gpu/libs$cuda\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
    echo "export PATH=$PWD/.gpu/bin:\$PATH"
    echo "export SAPO_MODEL_CACHE=$PWD/.gpu/models"
    echo "export SAPO_GPU_PREBUILT=1"
  } > .gpu/env
  # the peers run under the machine's own libraries, not the kit's
  if [ ! -e .venv/bin/python ] && command -v python3 > /dev/null; then
    mkdir -p .venv/bin
    printf '#!/bin/sh\nunset LD_LIBRARY_PATH\nexec %s "$@"\n' "$(command -v python3)" > .venv/bin/python
    chmod +x .venv/bin/python
  fi
  echo "gpu_kit: unpacked; ${cuda:+CUDA libraries from${cuda//:/ }; }source .gpu/env"
}

# the calls that take the kit and each model's parts: a call carries what
# fits beside the working tree, at most 7 paths (a device call takes 8).
# Each part goes to the first call with room for it and for its model's
# list of sums, so a model's last, smaller part rides beside the kit
plan() {
  local tree room name f size sums i n=0
  local used=() paths=()
  tree=$(tree_bytes)
  # the tree as it is now: the split's margin has paid for its growth
  room=$((limit - tree))
  # place PATH BYTES [SUMS]: into the first call with room for it (and for
  # SUMS, where that call does not carry them yet), else into a new one
  local bytes count
  place() {
    for ((i = 0; i <= n; i++)); do
      [ "$i" -lt "$n" ] || { used[n]=0 paths[n]="" n=$((n + 1)); }
      bytes=$2 count=1
      if [ -n "${3:-}" ] && [[ " ${paths[i]} " != *" $3 "* ]]; then bytes=$((bytes + 4096)) count=2; fi
      [ $((used[i] + bytes)) -le "$room" ] && [ $(($(wc -w <<< "${paths[i]}") + count)) -le 7 ] && break
    done
    [ "$count" = 1 ] || paths[i]="${paths[i]:+${paths[i]} }$3"
    paths[i]="${paths[i]:+${paths[i]} }$1"
    used[i]=$((used[i] + bytes))
  }
  [ -f "$kit" ] || die "$kit not found (scripts/gpu_kit.sh pack)"
  [ "$(stat -c %s "$kit")" -le "$room" ] || die "$kit ($(mib "$(stat -c %s "$kit")") MiB) does not fit a call beside the tree's $(mib "$tree") MiB"
  place "$kit" "$(stat -c %s "$kit")"
  for name in "$@"; do
    sums=.gpu/models/$name/parts.sha256
    [ -f "$sums" ] || die "no parts of $name in .gpu/models/$name (scripts/model.sh split $name)"
    while read -r _ f; do
      [[ "$f" == part-* ]] || continue
      size=$(stat -c %s ".gpu/models/$name/$f")
      [ $((size + 4096)) -le "$room" ] ||
        die "$name's $f ($(mib "$size") MiB) does not fit a call beside the tree's $(mib "$tree") MiB: split it again"
      place ".gpu/models/$name/$f" "$size" "$sums"
    done < "$sums"
  done
  for ((i = 0; i < n; i++)); do
    echo "call $((i + 1)): $(mib "${used[i]}") MiB beside the tree's $(mib "$tree"): carry ${paths[i]}"
  done
  echo "the first call begins with: scripts/gpu_kit.sh unpack && . .gpu/env; each later one with: . .gpu/env"
  for name in "$@"; do echo "once every part of $name is there: scripts/model.sh join $name"; done
}

case "${1:-}" in
  pack) shift; pack "$@" ;;
  unpack) unpack ;;
  plan) shift; plan "$@" ;;
  *) echo "usage: scripts/gpu_kit.sh pack [--bin DIR] [--no-checks] | unpack | plan [NAME...]" >&2; exit 2 ;;
esac
