#!/usr/bin/env bash
# Builds libtrie with cargo (through CMake) and installs library, headers, CMake package and trie.pc.
#   scripts/install.sh [PREFIX]        (default: /usr/local; or set PREFIX)
# Then: find_package(Trie 0.3 REQUIRED) + Trie::trie, or `pkg-config --cflags --libs trie`.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
prefix="${1:-${PREFIX:-/usr/local}}"
build="${BUILD_DIR:-$root/build}"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DTRIE_BUILD_TESTS=OFF -DTRIE_BUILD_EXAMPLES=OFF
cmake --build "$build"
cmake --install "$build" --prefix "$prefix"
echo "installed libtrie to $prefix"
