#!/usr/bin/env bash
# The BFCL v4 runner's environment: a venv under $TRIE_CACHE/bfcl/venv (default <repo>/.cache) with the pinned
# bfcl-eval wheel from PyPI and the two dependencies its data loader and AST checker import, every file checked
# against the sha256 of bench/bfcl/requirements.lock, installed --no-deps (none of bfcl-eval's API clients).
# Idempotent (stamped with the lock's sha256). Prints the venv's python as the last line of stdout.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CACHE="${TRIE_CACHE:-$REPO/.cache}"
VENV="$CACHE/bfcl/venv"
LOCK="$REPO/bench/bfcl/requirements.lock"
want="$(sha256sum "$LOCK" | cut -d' ' -f1)"
if [[ -x "$VENV/bin/python" && -f "$VENV/.trie-stamp" && "$(cat "$VENV/.trie-stamp")" == "$want" ]]; then
  echo "$VENV/bin/python"
  exit 0
fi
echo "[bfcl-setup] creating $VENV (bfcl-eval==2026.3.23, --no-deps, hashes from $LOCK)" >&2
rm -rf "$VENV"
python3 -m venv "$VENV"
"$VENV/bin/pip" install -q --disable-pip-version-check --no-deps --require-hashes --only-binary :all: -r "$LOCK"
echo "$want" > "$VENV/.trie-stamp"
echo "$VENV/bin/python"
