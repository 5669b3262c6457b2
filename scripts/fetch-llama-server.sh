#!/usr/bin/env bash
# Build llama-server with libtrie (issue 15): the pinned llama.cpp tree, patched with
# patches/llama-server-libtrie.patch, configured with -DLLAMA_LIBTRIE=ON -DLIBTRIE_ROOT=<this repository>.
#
# Source: the PyPI source distribution llama-cpp-python==0.3.36 (sha256-pinned in scripts/fetch-sdist.sh), which
# vendors llama.cpp commit 0c1e57098 under vendor/llama.cpp (MIT).
#
# CPU flags: a fixed x86-64 baseline (AVX, AVX2, FMA, F16C, BMI2), no -march=native, no AVX-512 and no AMX kernels,
# so the same build runs on AMD EPYC and on Intel AMX machines (llama.cpp's AMX kernels crash on some of them).
# CUDA (-DGGML_CUDA=ON) when nvcc exists. Static llama.cpp and libtrie (target/release/libtrie.a): the binary needs
# no LD_LIBRARY_PATH.
#
# Result (idempotent, stamped):
#   $TRIE_CACHE/llama-server/src            the patched llama.cpp tree
#   $TRIE_CACHE/llama-server/build          the CMake build tree
#   $TRIE_CACHE/llama-server/bin/llama-server
#
# Environment: TRIE_CACHE (default <repo>/.cache), TRIE_JOBS (default 2), TRIE_LLAMA_CUDA=0|1 (default: auto),
#              TRIE_FORCE=1 rebuilds. Prints the path of the llama-server binary as the last line of stdout.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${TRIE_CACHE:-$REPO/.cache}"
JOBS="${TRIE_JOBS:-2}"

LCP_VERSION="$(sed -n 's/^LCP_VERSION="\(.*\)"$/\1/p' "$REPO/scripts/fetch-sdist.sh")"
LCP_SHA256="$(sed -n 's/^LCP_SHA256="\(.*\)"$/\1/p' "$REPO/scripts/fetch-sdist.sh")"
LLAMA_COMMIT="0c1e57098"
CMAKE_VERSION="3.31.10"
NINJA_VERSION="1.11.1.4"
PATCH="$REPO/patches/llama-server-libtrie.patch"

ROOT="$CACHE/llama-server"
SRC="$ROOT/src"
BUILD="$ROOT/build"
BIN="$ROOT/bin"
STAMP="$BIN/.trie-stamp"

log() { printf '[fetch-llama-server] %s\n' "$*" >&2; }
sha() { sha256sum "$1" | cut -d' ' -f1; }

CUDA="${TRIE_LLAMA_CUDA:-auto}"
if [[ "$CUDA" == auto ]]; then
  if command -v nvcc >/dev/null 2>&1; then CUDA=1; else CUDA=0; fi
fi

# ---- tools (pinned cmake + ninja from PyPI, the same venv as scripts/fetch-llama.sh) -------------------------
venv="$CACHE/venv"
if [[ ! -x "$venv/bin/cmake" || ! -x "$venv/bin/ninja" ]] \
   || ! "$venv/bin/cmake" --version 2>/dev/null | grep -q "version $CMAKE_VERSION"; then
  log "creating venv with cmake==$CMAKE_VERSION ninja==$NINJA_VERSION in $venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check "cmake==$CMAKE_VERSION" "ninja==$NINJA_VERSION"
fi
CMAKE="$venv/bin/cmake"
NINJA="$venv/bin/ninja"

# ---- libtrie (static library; cargo decides whether anything changed) ----------------------------------------
log "building libtrie (cargo build --release)"
(cd "$REPO" && cargo build --release --quiet)
LIBTRIE_LIB="$REPO/target/release/libtrie.a"
[[ -f "$LIBTRIE_LIB" ]] || { log "missing $LIBTRIE_LIB"; exit 1; }

# The stamp names everything the binary depends on; the libtrie side (its sources) is rebuilt by ninja itself.
want_stamp() {
  printf 'llama-cpp-python=%s commit=%s sha256=%s patch=%s cuda=%s cmake=%s flags=x86-64-v3-noavx512-noamx\n' \
    "$LCP_VERSION" "$LLAMA_COMMIT" "$LCP_SHA256" "$(sha "$PATCH")" "$CUDA" "$CMAKE_VERSION"
}

# ---- download + verify + extract + patch ---------------------------------------------------------------------
# scikit-build-core (used by pip to read the sdist's metadata) needs a cmake on PATH.
SDIST="$(PATH="$venv/bin:$PATH" "$REPO/scripts/fetch-sdist.sh")"
[[ "$(sha "$SDIST")" == "$LCP_SHA256" ]] || { log "sha256 mismatch for $SDIST"; exit 1; }
log "sdist sha256 ok ($LCP_SHA256)"

want_src="$LCP_SHA256 $(sha "$PATCH")"
if [[ ! -f "$SRC/.trie-patched" || "$(cat "$SRC/.trie-patched")" != "$want_src" ]]; then
  log "extracting vendor/llama.cpp and applying $(basename "$PATCH")"
  rm -rf "$ROOT/tmp"
  mkdir -p "$ROOT/tmp"
  tar -xzf "$SDIST" -C "$ROOT/tmp" "llama_cpp_python-$LCP_VERSION/vendor/llama.cpp"
  new="$ROOT/tmp/llama_cpp_python-$LCP_VERSION/vendor/llama.cpp"
  if ! patch -d "$new" -p1 --forward --batch --quiet < "$PATCH"; then
    log "the patch does not apply to llama.cpp $LLAMA_COMMIT: $PATCH needs updating"
    exit 1
  fi
  # tar keeps the archive's modification times, and a patched file whose content did not change keeps the time
  # of the previous tree: ninja then recompiles only what a new patch really changes (common.h is everywhere).
  if [[ -d "$SRC" ]]; then
    sed -n 's|^+++ b/\([^[:space:]]*\).*|\1|p' "$PATCH" | while IFS= read -r f; do
      if [[ -f "$SRC/$f" ]] && cmp -s "$SRC/$f" "$new/$f"; then touch -r "$SRC/$f" "$new/$f"; fi
    done
  fi
  rm -rf "$SRC"
  mv "$new" "$SRC"
  rm -rf "$ROOT/tmp"
  echo "$want_src" > "$SRC/.trie-patched"
fi

if [[ "${TRIE_FORCE:-0}" != 1 && -f "$STAMP" && "$(cat "$STAMP")" == "$(want_stamp)" \
      && -x "$BIN/llama-server" && "$BIN/llama-server" -nt "$LIBTRIE_LIB" \
      && -z "$(find "$REPO/integrations/llama-server" "$REPO/include" -newer "$BIN/llama-server" -type f 2>/dev/null)" ]]; then
  log "llama-server with libtrie already built: $BIN/llama-server"
  echo "$BIN/llama-server"
  exit 0
fi

# ---- configure + build ---------------------------------------------------------------------------------------
cpu_flags=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
           -DGGML_AVX_VNNI=OFF -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF
           -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DGGML_CPU_ALL_VARIANTS=OFF
           -DGGML_BACKEND_DL=OFF)
cuda_flags=()
if [[ "$CUDA" == 1 ]]; then
  log "nvcc found: building with -DGGML_CUDA=ON"
  cuda_flags+=(-DGGML_CUDA=ON)
fi
mkdir -p "$BUILD" "$BIN"
rm -f "$STAMP"
log "configuring (cmake $CMAKE_VERSION, ninja, Release, static, LLAMA_LIBTRIE=ON, cuda=$CUDA)"
"$CMAKE" -S "$SRC" -B "$BUILD" -G Ninja -DCMAKE_MAKE_PROGRAM="$NINJA" \
  -DCMAKE_BUILD_TYPE=Release \
  -DBUILD_SHARED_LIBS=OFF \
  -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON \
  -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
  -DLLAMA_LIBTRIE=ON -DLIBTRIE_ROOT="$REPO" -DLIBTRIE_LIB="$LIBTRIE_LIB" \
  "${cpu_flags[@]}" "${cuda_flags[@]}" \
  --log-level=WARNING >"$ROOT/configure.log" 2>&1 \
  || { log "configure failed; see $ROOT/configure.log"; tail -30 "$ROOT/configure.log" >&2; exit 1; }

log "building target llama-server with $JOBS jobs (from scratch: about 35 minutes on 2 busy cores; CUDA much longer)"
start=$(date +%s)
if ! "$CMAKE" --build "$BUILD" --target llama-server -j "$JOBS" 2>&1 \
  | tee "$ROOT/build.log" \
  | { grep --line-buffered -E '^\[[0-9]+/[0-9]+\]|error' || true; } \
  | sed -u -E 's/^(\[[0-9]+\/[0-9]+\]) [A-Za-z ]+ (.*\/)?([^/ ]+)$/\1 \3/' >&2; then
  log "build failed; see $ROOT/build.log"
  exit 1
fi
log "built in $(( $(date +%s) - start )) s"
cp "$BUILD/bin/llama-server" "$BIN/llama-server.tmp" && mv "$BIN/llama-server.tmp" "$BIN/llama-server"
want_stamp > "$STAMP"
echo "$BIN/llama-server"
