#!/usr/bin/env bash
# Everything the C ABI needs in CI, in one command:
#   1. include/trie.h matches a fresh cbindgen run (pinned version) and Cargo.toml's version;
#   2. the Rust tests of the ABI (tests/ffi.rs, the module ffi of the integration test binary);
#   3. CMake build + ctest: C tests (shared, static, AddressSanitizer+LeakSanitizer, valgrind), C++ wrapper test,
#      examples, packaging (install to a temp prefix, find_package + pkg-config builds).
# Env: BUILD_DIR (default <repo>/build/c), TRIE_ASSETS (real vocabularies; default <repo>/../shared/assets).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$root/build/c}"
cd "$root"
scripts/check-header.sh
cargo test --release --test integration ffi::
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release
cmake --build "$build" -j"$(nproc 2>/dev/null || echo 4)"
# Two at a time: valgrind (the longest) and the packaging test (cmake and compilers) overlap.
ctest --test-dir "$build" --output-on-failure -j"$(nproc 2>/dev/null || echo 2)"
