#!/usr/bin/env bash
# CI for the Swift package (bindings/swift) on a machine without a Swift toolchain: what can be checked with
# Clang alone. `swift build` / `swift test` are NOT run here (see bindings/swift/README.md).
#   1. clang from Debian when missing;
#   2. libtrie built and installed to a temporary prefix (scripts/install.sh), found through pkg-config `trie`
#      as SwiftPM's .systemLibrary(pkgConfig: "trie") finds it;
#   3. the CTrie module (Sources/CTrie/module.modulemap -> shim.h -> trie.h) compiled as a Clang module:
#      ci/module_check.m with `@import CTrie;` (Objective-C) and ci/module_check.c with
#      `#pragma clang module import CTrie`, -Wall -Werror; the module's `link "trie"` recorded in the object;
#   4. the two linked against libtrie and run on a real vocabulary: load, compile, walk to a member, forced
#      continuation, rejected token, too-short mask, bad state;
#   5. static checks of the Swift sources: every trie_* / TRIE_* name they use is declared by trie.h, and the
#      target folders Package.swift names exist.
# Env: TRIE_ASSETS (default <repo>/../shared/assets), BUILD_DIR (default <repo>/build/swift).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
pkg="$root/bindings/swift"
build="${BUILD_DIR:-$root/build/swift}"
assets="${TRIE_ASSETS:-$root/../shared/assets}"
mkdir -p "$build"

if ! command -v clang >/dev/null; then
  echo "== installing clang"
  sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq clang pkg-config >/dev/null
fi
clang --version | head -1
if command -v swift >/dev/null; then echo "note: swift is installed; run swift build / swift test in $pkg"; fi

echo "== libtrie: install to $build/prefix"
BUILD_DIR="$build/cmake" "$root/scripts/install.sh" "$build/prefix" >"$build/install.log" 2>&1 \
  || { cat "$build/install.log"; exit 1; }
libdir="$build/prefix/lib"
export PKG_CONFIG_PATH="$libdir/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
cflags="$(pkg-config --cflags trie)"
libs="$(pkg-config --libs trie)"
echo "pkg-config trie $(pkg-config --modversion trie): $cflags $libs"

echo "== CTrie as a Clang module"
rm -rf "$build/module-cache"
mod=(-fmodules -fmodules-cache-path="$build/module-cache" -fmodule-map-file="$pkg/Sources/CTrie/module.modulemap"
     $cflags -Wall -Wextra -Werror)
clang "${mod[@]}" -c "$pkg/ci/module_check.m" -o "$build/module_check_objc.o"
echo "ok: @import CTrie; (Objective-C, ci/module_check.m)"
clang "${mod[@]}" -DCTRIE_WITH_OBJC -c "$pkg/ci/module_check.c" -o "$build/module_check.o"
echo "ok: #pragma clang module import CTrie (C, ci/module_check.c)"
ls "$build/module-cache"/*/CTrie-*.pcm >/dev/null || { echo "no CTrie .pcm: the module was not built"; exit 1; }
# The module map's `link "trie"` is recorded for autolinking (Swift turns it into -ltrie).
readelf -p .linker-options "$build/module_check_objc.o" | grep -qw trie \
  || { echo "the module's link \"trie\" is not recorded"; exit 1; }
echo "ok: module built ($(basename "$(ls "$build/module-cache"/*/CTrie-*.pcm)")), link \"trie\" recorded"
# Without the module map the import must fail: the check above really went through it.
if clang -fmodules -fmodules-cache-path="$build/module-cache" $cflags -c "$pkg/ci/module_check.m" \
     -o /dev/null 2>/dev/null; then
  echo "@import CTrie compiled without the module map?"; exit 1
fi

echo "== link and run"
clang "$build/module_check.o" "$build/module_check_objc.o" $libs -Wl,-rpath,"$libdir" -o "$build/module_check"
if [ -d "$assets/vocab" ]; then
  "$build/module_check" "$assets/vocab/ggml-vocab-llama-bpe.gguf"
  "$build/module_check" "$assets/vocab/ggml-vocab-llama-spm.gguf"
else
  echo "no vocabularies under $assets (set TRIE_ASSETS)"; exit 1
fi

echo "== static checks of the Swift sources"
header="$(pkg-config --variable=includedir trie)/trie.h"
missing=0
names="$(grep -rhoE '\b(trie|TRIE)_[A-Za-z0-9_]*[A-Za-z0-9]\b' "$pkg/Sources" --include='*.swift' | sort -u)"
for name in $names; do
  if ! grep -qE "\b$name\b" "$header"; then echo "not in trie.h: $name"; missing=1; fi
done
[ "$missing" = 0 ] || exit 1
echo "ok: the $(echo "$names" | wc -w) C names the Swift sources use are declared in trie.h: $(echo $names)"
for dir in Sources/CTrie Sources/Trie Sources/TriePick Tests/TrieTests; do
  [ -d "$pkg/$dir" ] || { echo "missing target folder $dir"; exit 1; }
done
echo "ok: Package.swift's target folders exist"
echo "NOT run (no Swift toolchain on this machine): swift build, swift test, swift run trie-pick"
echo "test-swift-module: all checks passed"
