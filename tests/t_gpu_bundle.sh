#!/usr/bin/env bash
# scripts/gpu_bundle.sh, which takes the GPU check to a device machine
# without our libraries: a packed program unpacks where the build puts it,
# runs on the bundle's libraries alone (here it reports SKIP without a
# GPU), and the peers' python runs with the machine's own libraries.
set -u
cd "$(dirname "$0")/.."
prog=build/asan/tests/test_cuda
if [ ! -x "$prog" ]; then echo "SKIP gpu_bundle: $prog not built"; exit 0; fi
# unpack looks for CUDA's runtime, which only a build with nvcc links
if ! ldd "$prog" | grep -q libcudart; then echo "SKIP gpu_bundle: $prog was built without CUDA"; exit 0; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
check() { if eval "$2"; then echo "PASS gpu_bundle_$1"; else echo "FAIL gpu_bundle_$1"; fi; }

mkdir -p "$tmp/here/scripts" "$tmp/here/$(dirname $prog)" "$tmp/there/scripts"
cp scripts/gpu_bundle.sh "$tmp/here/scripts/"
cp scripts/gpu_bundle.sh "$tmp/there/scripts/"
cp "$prog" "$tmp/here/$prog"
(cd "$tmp/here" && scripts/gpu_bundle.sh pack "$prog") > "$tmp/pack.log" 2>&1
check pack '[ -s "$tmp/here/.gpu/bundle.tar.gz" ] && tar -tzf "$tmp/here/.gpu/bundle.tar.gz" | grep -q "\.gpu/libs/libczmq"'
check no_c_library '! tar -tzf "$tmp/here/.gpu/bundle.tar.gz" | grep -qE "libs/(libc\.so|libcudart|libstdc\+\+)"'

mkdir -p "$tmp/there/.gpu"
cp "$tmp/here/.gpu/bundle.tar.gz" "$tmp/there/.gpu/"
(cd "$tmp/there" && scripts/gpu_bundle.sh unpack) > "$tmp/unpack.log" 2>&1
rc=$?
check unpack '[ $rc = 0 ] && [ -x "$tmp/there/$prog" ] && grep -q "SAPO_GPU_PREBUILT=1" "$tmp/there/.gpu/env"'
# the project's libraries and ASan's come from the bundle
check libraries '[ "$( (. "$tmp/there/.gpu/env" && ldd "$tmp/there/$prog") | grep -E "libczmq|libopenblas|libasan" |
  grep -c "$tmp/there/.gpu/libs")" = 3 ]'
(. "$tmp/there/.gpu/env" && cd "$tmp/there" && ASAN_OPTIONS=detect_leaks=0 "$prog" test_backend_names test_uniform) > "$tmp/run.log" 2>&1
rc=$?
check runs '[ $rc = 0 ] && grep -q "^PASS test_backend_names" "$tmp/run.log"'
check python_env '(export LD_LIBRARY_PATH=/nowhere; "$tmp/there/.venv/bin/python" -c "import os; print(os.environ.get(\"LD_LIBRARY_PATH\"))") | grep -qx None'
(cd "$tmp/there" && scripts/gpu_bundle.sh unpack) > /dev/null 2>&1
check unpack_again '[ $? = 0 ]'
rm -f "$tmp/there/.gpu/bundle.tar.gz"
(cd "$tmp/there" && scripts/gpu_bundle.sh unpack) > "$tmp/missing.log" 2>&1
rc=$?
check missing_names_itself '[ $rc != 0 ] && grep -q "bundle.tar.gz not found" "$tmp/missing.log"'
