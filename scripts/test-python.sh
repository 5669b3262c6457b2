#!/usr/bin/env bash
# The Python package as users get it: `pip install .` into a fresh venv (.cache/py-venv; the build backend and numpy
# pinned by tests/python/requirements.txt), mypy --strict over the package, then tests/python against the installed
# copy, which must load the libtrie.so bundled inside it. (tests/python also runs against the source tree in an
# earlier stage.) `scripts/test-python.sh --venv-only` creates the venv and exits (scripts/test-prefetch.sh).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${TRIE_CACHE:-$REPO/.cache}"
VENV="$CACHE/py-venv"
REQ="$REPO/tests/python/requirements.txt"
if [[ ! -f "$VENV/.req" ]] || ! cmp -s "$REQ" "$VENV/.req"; then
  rm -rf "$VENV"
  "${PYTHON:-python3}" -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check --require-hashes -r "$REQ"
  cp "$REQ" "$VENV/.req"
fi
if [[ "${1:-}" == --venv-only ]]; then exit 0; fi
"$VENV/bin/pip" install -q --disable-pip-version-check --no-build-isolation --no-deps --force-reinstall "$REPO"
rm -rf "$REPO/build"
"$VENV/bin/pip" show -f libtrie | grep -E '^(Name|Version)|_libtrie|vllm/|sets.py|entry_points'
grep -A1 'vllm.logits_processors' "$VENV"/lib/python3*/site-packages/libtrie-*.dist-info/entry_points.txt
# Type annotations (the package ships py.typed): strict, with vLLM and torch (not installed here) treated as Any.
"$VENV/bin/mypy" --strict --ignore-missing-imports --cache-dir "$CACHE/mypy" "$REPO/python/libtrie"
cd "$CACHE"  # away from the source tree, so `import libtrie` finds the installed package
env -u TRIE_LIB LIBTRIE_TEST_INSTALLED=1 "$VENV/bin/python" -m unittest discover -s "$REPO/tests/python" -v
