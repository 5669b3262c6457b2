#!/usr/bin/env bash
# Set up the environment of the opt-in SGLang test (idempotent, cached under .cache/):
#   - .cache/sglang-venv: PyPI sglang 0.5.23 and what its grammar modules import, pinned by tests/sglang/requirements.lock
#     and installed with --require-hashes --no-deps (~5 GB, mostly torch and the CUDA runtime wheels PyPI's torch
#     needs to import, even on a CPU machine);
#   - libtrie installed into it from this tree (pip install ., which builds libtrie.so with cargo), with its
#     sglang.srt.plugins entry point;
#   - the test tokenizers: the SmolLM2-135M-Instruct GGUF (scripts/fetch-model.sh, sha256-checked; transformers reads
#     its tokenizer) and the tokenizer.json files of scripts/fetch-assets.sh.
# Prints the venv's python, the GGUF model and the assets folder, one per line, last.
# Environment: TRIE_CACHE (default .cache), PYTHON (a CPython 3.11; default python3).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
CACHE="${TRIE_CACHE:-$REPO/.cache}"
VENV="$CACHE/sglang-venv"
LOCK="$REPO/tests/sglang/requirements.lock"
log() { printf '[setup-sglang] %s\n' "$*" >&2; }

PY="${PYTHON:-python3}"
if [[ "$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')" != 3.11 ]]; then
  log "the lock file pins CPython 3.11 wheels; $PY is $("$PY" --version 2>&1)"
  exit 2
fi
if [[ ! -f "$VENV/.lock" ]] || ! cmp -s "$LOCK" "$VENV/.lock"; then
  log "installing SGLang's grammar modules and their pinned requirements into $VENV (about 5 GB of wheels)"
  rm -rf "$VENV"
  "$PY" -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check --require-hashes --no-deps -r "$LOCK"
  cp "$LOCK" "$VENV/.lock"
fi
log "installing libtrie from this tree into $VENV"
"$VENV/bin/pip" install -q --disable-pip-version-check --no-deps --force-reinstall "$REPO" >&2
rm -rf "$REPO/build"

GGUF="$(scripts/fetch-model.sh smollm2 | tail -n 1)"
ASSETS="$(scripts/fetch-assets.sh | tail -n 1)"
echo "$VENV/bin/python"
echo "$GGUF"
echo "$ASSETS"
