#!/usr/bin/env bash
# Recreates the Python venv (.venv at the repository root) that the golden-file
# scripts in tests/oracle/ and the benchmarks' peers run in. Idempotent: an
# existing venv only gets what it lacks. `make bench` sets it up, and
# regenerating golden files needs it; of `make test`, only
# tests/t_tensorboard.sh needs it, and asks for its part alone:
#   tests/oracle/setup.sh              everything
#   tests/oracle/setup.sh tensorboard  TensorBoard alone (its reader, a
#                                      few seconds from PyPI)
set -eu
cd "$(dirname "$0")/../.."
[ -x .venv/bin/python ] || python3 -m venv .venv
tensorboard=(tensorboard==2.21.0 numpy==2.4.6)
if [ "${1:-}" = tensorboard ]; then
  .venv/bin/pip install -q "${tensorboard[@]}"
  exit 0
fi
.venv/bin/pip install -q numpy==2.4.6 tokenizers==0.23.3 safetensors==0.8.0 reasoning_gym==0.1.25 \
    torch==2.15.0 transformers==5.23.0 trl==1.16.0 scipy==1.17.1 gguf==0.19.0 "${tensorboard[@]}"
