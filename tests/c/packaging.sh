#!/usr/bin/env bash
# Packaging test: installs libtrie to a temporary prefix with CMake, then builds and runs
#   - the C++ example with find_package(Trie 0.3 REQUIRED) (shared, then static library),
#   - the C example with `pkg-config --cflags --libs trie` (shared, then static library).
# Env: TRIE_CARGO_TARGET_DIR (reuse a cargo target dir), TRIE_ASSETS (vocabularies; the runs are skipped without),
# KEEP=1 keeps the temporary directory.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/trie-packaging-XXXXXX")"
[[ "${KEEP:-0}" == 1 ]] || trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"
assets="${TRIE_ASSETS:-$root/../shared/assets}"
gguf="$assets/vocab/ggml-vocab-llama-bpe.gguf"
set_file="$root/examples/c/set.txt"
step() { printf '\n== %s\n' "$*"; }
fail() { echo "packaging: FAIL: $*" >&2; exit 1; }

step "configure, build and install to $prefix"
cmake -S "$root" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DTRIE_BUILD_TESTS=OFF -DTRIE_BUILD_EXAMPLES=OFF \
    -DTRIE_CARGO_TARGET_DIR="${TRIE_CARGO_TARGET_DIR:-$root/target}" >/dev/null
cmake --build "$work/build"
cmake --install "$work/build" --prefix "$prefix"

step "installed files"
libdir="$prefix/lib"
version="$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -n1)"
soname_want="libtrie.so.${version%.*}" # 0.x: the ABI follows the minor version
for f in include/trie.h include/trie.hpp lib/libtrie.a "lib/libtrie.so.$version" lib/cmake/Trie/TrieConfig.cmake \
         lib/cmake/Trie/TrieConfigVersion.cmake lib/pkgconfig/trie.pc; do
    [[ -f "$prefix/$f" ]] || fail "missing $f"
done
[[ "$(readlink "$libdir/$soname_want")" == "libtrie.so.$version" ]] || fail "$soname_want is not a link to libtrie.so.$version"
[[ "$(readlink "$libdir/libtrie.so")" == "$soname_want" ]] || fail "libtrie.so is not a link to $soname_want"
soname="$(readelf -d "$libdir/libtrie.so.$version" | sed -n 's/.*Library soname: \[\(.*\)\].*/\1/p')"
[[ "$soname" == "$soname_want" ]] || fail "soname is '$soname', not $soname_want"
echo "ok: soname $soname, headers, static library, CMake package, trie.pc"

run() { # run EXE: with a vocabulary when the assets are there, else just the usage message
    if [[ -f "$gguf" ]]; then
        "$@" "$gguf" "$set_file" 3
    else
        echo "(no $gguf: checking that it starts)"
        set +e; "$@" >/dev/null 2>&1; rc=$?; set -e
        [[ $rc == 2 ]] || fail "$* exited $rc"
    fi
}

step "C++ example: find_package(Trie 0.3 REQUIRED), Trie::trie"
cmake -S "$root/examples/cpp" -B "$work/cpp" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/cpp"
deps="$(ldd "$work/cpp/trie_example_cpp")" # (not piped into grep -q: SIGPIPE + pipefail)
grep -qF "$soname_want => $libdir/$soname_want" <<<"$deps" || fail "C++ example does not load $libdir/$soname_want"
run "$work/cpp/trie_example_cpp"

step "C++ example: Trie::trie_static"
cmake -S "$root/examples/cpp" -B "$work/cpp-static" -DCMAKE_PREFIX_PATH="$prefix" -DTRIE_EXAMPLE_STATIC=ON >/dev/null
cmake --build "$work/cpp-static"
deps="$(ldd "$work/cpp-static/trie_example_cpp")"
if grep -q libtrie <<<"$deps"; then fail "static C++ example links libtrie.so"; fi
run "$work/cpp-static/trie_example_cpp"

step "C example: pkg-config --cflags --libs trie"
export PKG_CONFIG_PATH="$libdir/pkgconfig"
echo "pkg-config: $(pkg-config --modversion trie): $(pkg-config --cflags --libs trie)"
[[ "$(pkg-config --modversion trie)" == "$version" ]] || fail "pkg-config version"
cc=${CC:-cc}
# shellcheck disable=SC2046
"$cc" -std=c11 -Wall -Wextra -Werror "$root/examples/c/main.c" -o "$work/example_c" $(pkg-config --cflags --libs trie)
LD_LIBRARY_PATH="$libdir" run "$work/example_c"

step "C example: static, pkg-config --static"
# shellcheck disable=SC2046
"$cc" -std=c11 "$root/examples/c/main.c" -o "$work/example_c_static" $(pkg-config --cflags trie) \
    "$(pkg-config --variable=libdir trie)/libtrie.a" $(pkg-config --static --libs-only-l trie | sed 's/-ltrie//')
deps="$(ldd "$work/example_c_static")"
if grep -q libtrie <<<"$deps"; then fail "static C example links libtrie.so"; fi
run "$work/example_c_static"

echo
echo "packaging: all passed"
