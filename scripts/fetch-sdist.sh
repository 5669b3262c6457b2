#!/usr/bin/env bash
# Download (once) and verify the pinned llama-cpp-python source distribution from PyPI. It vendors llama.cpp
# commit 0c1e57098 (MIT) under vendor/llama.cpp: the llama.cpp tree we build and its vocab-only GGUF test files.
# Prints the path of the verified .tar.gz on stdout.
# Environment: TRIE_CACHE (default <repo>/.cache).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${TRIE_CACHE:-$REPO/.cache}"
LCP_VERSION="0.3.36"
LCP_SHA256="832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
SDIST="$CACHE/dl/llama_cpp_python-$LCP_VERSION.tar.gz"
log() { printf '[fetch-sdist] %s\n' "$*" >&2; }
sha() { sha256sum "$1" | cut -d' ' -f1; }

mkdir -p "$CACHE/dl"
if [[ -f "$SDIST" && "$(sha "$SDIST")" != "$LCP_SHA256" ]]; then
  log "cached $SDIST has a wrong sha256; downloading again"
  rm -f "$SDIST"
fi
if [[ ! -f "$SDIST" ]]; then
  log "downloading llama-cpp-python==$LCP_VERSION sdist from PyPI (~77 MB)"
  tmp="$(mktemp -d)"
  # pip reads an sdist's metadata even for `download`; without build isolation it needs the build backend
  # (scikit-build-core) at hand, and with isolation it would try to compile cmake from source.
  # scikit-build-core's metadata hook also looks for CMake >= 3.21, which a fresh machine may lack: the venv
  # holds the same pinned cmake/ninja wheels as scripts/fetch-llama.sh and is put first on PATH.
  if [[ ! -x "$CACHE/venv-dl/bin/pip" || ! -x "$CACHE/venv-dl/bin/cmake" ]]; then
    python3 -m venv "$CACHE/venv-dl"
    "$CACHE/venv-dl/bin/pip" install -q --disable-pip-version-check "scikit-build-core==0.11.6" \
      "cmake==3.31.10" "ninja==1.11.1.4"
  fi
  PATH="$CACHE/venv-dl/bin:$PATH" "$CACHE/venv-dl/bin/pip" download -q --disable-pip-version-check --no-deps --no-binary :all: \
    --no-build-isolation "llama-cpp-python==$LCP_VERSION" -d "$tmp"
  f="$(ls "$tmp"/llama_cpp_python-*.tar.gz | head -1)"
  mv "$f" "$SDIST"
  rm -rf "$tmp"
fi
got="$(sha "$SDIST")"
if [[ "$got" != "$LCP_SHA256" ]]; then
  log "sha256 mismatch for $SDIST: got $got, want $LCP_SHA256"
  exit 1
fi
echo "$SDIST"
