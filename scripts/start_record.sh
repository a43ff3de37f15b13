#!/usr/bin/env bash
# What a node starts from, as its learner resolves it (the settings in the
# environment, a preset among them), as one JSON object for a manifest:
#   model              the model setting ("tiny", a fetched model's name, a folder, a GGUF)
#   model_file         the file or folder that names ("" for tiny), and its sha256
#   start              what RL starts from: that model, or the base folder a warm
#                      start made from it; and its sha256 (the file's, or the
#                      folder's safetensors concatenated in name order)
#   made_from          the base's format.json record of how it was made (null
#                      where there is none)
#   settings           every setting of the node (bin/learner settings)
#
#   scripts/start_record.sh          (SAPO_BIN: the programs, default bin)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${SAPO_BIN:-bin}
settings=$("$bin/learner" settings)
start=$("$bin/learner" start)
model=$(python3 -c 'import json, sys; print(json.load(sys.stdin)["model"])' <<< "$settings")

# the sha256 of a file, or of a folder's safetensors joined in name order
# (a fetched model's stamp stands for its file, as scripts/model.sh keeps it)
sum_of() {
  if [ -f "$1" ] && [ -f "$1.sha256" ] && [ "$1.sha256" -nt "$1" ]; then cat "$1.sha256"
  elif [ -f "$1" ]; then sha256sum "$1" | cut -d' ' -f1
  elif [ -d "$1" ] && ls "$1"/*.safetensors > /dev/null 2>&1; then cat "$1"/*.safetensors | sha256sum | cut -d' ' -f1
  fi
}
file=""
if [ "$model" != tiny ]; then
  if [ -e "$model" ]; then file=$model
  else file=$(scripts/model.sh path "$model" 2> /dev/null || true)
  fi
fi
python3 - "$model" "$file" "$(sum_of "$file")" "$start" "$(sum_of "$start")" "$settings" <<'PY'
import json, os, sys
model, file, file_sum, start, start_sum, settings = sys.argv[1:]
made = None
fmt = os.path.join(start, "format.json")
if os.path.isfile(fmt):
    try:
        made = json.load(open(fmt)).get("made_from")
    except ValueError:
        made = "format.json is not JSON"
print(json.dumps({"model": model, "model_file": file, "model_file_sha256": file_sum, "start": start,
                  "start_sha256": start_sum, "made_from": made, "settings": json.loads(settings)}))
PY
