#!/usr/bin/env bash
# Configure and build the llama.cpp harness examples/llama (trie-llama) against the cached llama.cpp install and
# the repository's libtrie (target/release). Prints the path of the binary as the last line of stdout.
#
# Environment: TRIE_CACHE (default <repo>/.cache), TRIE_BUILD (default <repo>/build/llama),
#              LLAMA_PREFIX (default: what scripts/fetch-llama.sh prints), TRIE_LIB (default
#              <repo>/target/release/libtrie.so).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${TRIE_CACHE:-$REPO/.cache}"
BUILD="${TRIE_BUILD:-$REPO/build/llama}"
TRIE_LIB="${TRIE_LIB:-$REPO/target/release/libtrie.so}"

log() { printf '[build-harness] %s\n' "$*" >&2; }

if [[ -z "${LLAMA_PREFIX:-}" ]]; then
  LLAMA_PREFIX="$("$REPO/scripts/fetch-llama.sh" | tail -n 1)"
fi
CMAKE="$CACHE/venv/bin/cmake"
NINJA="$CACHE/venv/bin/ninja"
[[ -x "$CMAKE" ]] || CMAKE="$(command -v cmake)"
gen=()
if [[ -x "$NINJA" ]]; then gen=(-G Ninja -DCMAKE_MAKE_PROGRAM="$NINJA"); fi

if [[ ! -f "$TRIE_LIB" ]]; then
  log "libtrie not found at $TRIE_LIB: run 'cargo build --release' at the repository root first"
  exit 1
fi

if [[ ! -f "$BUILD/CMakeCache.txt" ]]; then
  log "configuring $BUILD"
  "$CMAKE" -S "$REPO/examples/llama" -B "$BUILD" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DLLAMA_DIR="$LLAMA_PREFIX" -DTRIE_INCLUDE_DIR="$REPO/include" -DTRIE_LIB="$TRIE_LIB" \
    --log-level=WARNING >&2
fi
log "building trie-llama"
"$CMAKE" --build "$BUILD" -j "${TRIE_JOBS:-2}" >&2
echo "$BUILD/trie-llama"
