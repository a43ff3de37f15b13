#!/usr/bin/env bash
# Recreates the Python venv (.venv at the repository root) that the golden-file
# scripts in tests/oracle/ and the benchmarks' peers run in. Idempotent: an
# existing venv only gets what it lacks. `make test` never needs it; `make
# bench` sets it up, and regenerating golden files needs it.
set -eu
cd "$(dirname "$0")/../.."
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install -q numpy==2.4.6 tokenizers==0.23.3 safetensors==0.8.0 reasoning_gym==0.1.25 \
    torch==2.15.0 transformers==5.23.0 trl==1.16.0 scipy==1.17.1 gguf==0.19.0
