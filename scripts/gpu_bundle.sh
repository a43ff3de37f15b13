#!/usr/bin/env bash
# Takes the GPU check to a lent device machine that cannot install our
# libraries: the programs are built here and travel with the shared
# libraries they need, less the C library and CUDA's own (the machine has
# CUDA and its driver).
#
#   scripts/gpu_bundle.sh pack      here: build test_cuda (release and ASan)
#                                   and bench_cuda, write .gpu/bundle.tar.gz
#   scripts/gpu_bundle.sh pack P... the same for programs P, already built
#   scripts/gpu_bundle.sh unpack    there: put the programs where the build
#                                   would, write .gpu/env (the library path,
#                                   SAPO_GPU_PREBUILT=1), and where there is no
#                                   .venv, make .venv/bin/python run the
#                                   machine's python3 for the peers
#
# On the device machine, with .gpu carried:
#   scripts/gpu_bundle.sh unpack && . .gpu/env && scripts/gpu_check.sh
set -euo pipefail
cd "$(dirname "$0")/.."

programs=(build/release/tests/test_cuda build/release/bench/bench_cuda build/asan/tests/test_cuda)
bundle=.gpu/bundle.tar.gz

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

pack() {
  if [ $# -gt 0 ]; then
    programs=("$@")
  else
    make -j"$(nproc)" MODE=release build/release/tests/test_cuda build/release/bench/bench_cuda
    make -j"$(nproc)" MODE=asan build/asan/tests/test_cuda
  fi
  local stage
  stage=$(mktemp -d)
  mkdir -p "$stage/.gpu/libs"
  for p in "${programs[@]}"; do
    mkdir -p "$stage/$(dirname "$p")"
    cp "$p" "$stage/$p"
    ldd "$p" | while read -r name _ path _; do
      if [ -n "${path:-}" ] && [ -f "$path" ] && ! system_lib "$name"; then cp -L "$path" "$stage/.gpu/libs/$name"; fi
    done
  done
  mkdir -p .gpu
  tar -C "$stage" -czf "$bundle" build .gpu
  rm -rf "$stage"
  echo "gpu_bundle: $bundle, $(du -h "$bundle" | cut -f1): ${programs[*]} and $(tar -tzf "$bundle" | grep -c '\.gpu/libs/.') libraries"
}

unpack() {
  if [ ! -f "$bundle" ]; then
    echo "gpu_bundle: $bundle not found (scripts/gpu_bundle.sh pack, then carry .gpu)" >&2
    exit 1
  fi
  tar -C . -xzf "$bundle"
  # CUDA's libraries: the toolkit's, else the ones PyTorch's packages carry
  local cuda=""
  for lib in libcudart.so.13 libcurand.so.10 libcublas.so.13; do
    local found
    found=$(find /usr/local/cuda/lib64/ /usr/local/cuda/targets/x86_64-linux/lib/ /usr/lib/x86_64-linux-gnu/ \
      /opt /usr/local/lib -name "$lib" 2>/dev/null | head -n 1 || true)
    if [ -z "$found" ]; then
      echo "gpu_bundle: $lib not found on this machine" >&2
      exit 1
    fi
    cuda="$cuda:$(dirname "$found")"
  done
  {
    echo "export LD_LIBRARY_PATH=$PWD/.gpu/libs$cuda\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
    echo "export SAPO_GPU_PREBUILT=1"
  } >.gpu/env
  # the peers run under the machine's own libraries, not the bundle's
  if [ ! -e .venv/bin/python ]; then
    mkdir -p .venv/bin
    printf '#!/bin/sh\nunset LD_LIBRARY_PATH\nexec %s "$@"\n' "$(command -v python3)" >.venv/bin/python
    chmod +x .venv/bin/python
  fi
  echo "gpu_bundle: unpacked; CUDA libraries from${cuda//:/ }"
}

case "${1:-}" in
  pack)
    shift
    pack "$@"
    ;;
  unpack) unpack ;;
  *)
    echo "usage: scripts/gpu_bundle.sh pack [PROGRAM...] | unpack" >&2
    exit 2
    ;;
esac
