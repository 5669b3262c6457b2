#!/usr/bin/env bash
# Build llama-server with libtrie (issue 15): the pinned llama.cpp tree, patched with
# patches/llama-server-libtrie.patch, configured with -DLLAMA_LIBTRIE=ON -DLIBTRIE_ROOT=<this repository>.
#
# Source: the PyPI source distribution llama-cpp-python==0.3.36 (sha256-pinned in scripts/fetch-sdist.sh), which
# vendors llama.cpp commit 0c1e57098 under vendor/llama.cpp (MIT).
#
# CPU and CUDA flags: the same as scripts/fetch-llama.sh, defined once in scripts/llama-build-flags.sh: on x86-64 a
# fixed baseline (SSE4.2, AVX, AVX2, FMA, F16C, BMI2), no -march=native, no AVX-512 and no AMX kernels, so the same
# build runs on AMD EPYC and on Intel AMX machines (llama.cpp's AMX kernels crash on some of them); CUDA
# (-DGGML_CUDA=ON, CMAKE_CUDA_ARCHITECTURES) when nvcc exists. Static llama.cpp and libtrie (target/release/libtrie.a):
# the binary needs no LD_LIBRARY_PATH.
#
#   scripts/fetch-llama-server.sh                      fetch + build (or nothing, when the stamp matches)
#   scripts/fetch-llama-server.sh --print-cmake-args   print the CMake configure arguments, one per line, and exit
#
# Result (idempotent, stamped):
#   $TRIE_CACHE/llama-server/src            the patched llama.cpp tree
#   $TRIE_CACHE/llama-server/build          the CMake build tree
#   $TRIE_CACHE/llama-server/bin/llama-server
#
# Environment: TRIE_CACHE (default <repo>/.cache), TRIE_JOBS (default 2), TRIE_LLAMA_CUDA=0|1 (default: auto),
#              TRIE_LLAMA_CPU_FLAGS, TRIE_LLAMA_CUDA_ARCHS (as for scripts/fetch-llama.sh; the flags are part of the
#              build stamp, so changing them rebuilds), TRIE_FORCE=1 rebuilds. Prints the path of the llama-server binary as the last line of stdout.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${TRIE_CACHE:-$REPO/.cache}"
JOBS="${TRIE_JOBS:-2}"
PRINT_ARGS=0
case "${1:-}" in
  "") ;;
  --print-cmake-args) PRINT_ARGS=1 ;;
  *) echo "usage: $0 [--print-cmake-args]" >&2; exit 2 ;;
esac

PATCH="$REPO/patches/llama-server-libtrie.patch"

ROOT="$CACHE/llama-server"
SRC="$ROOT/src"
BUILD="$ROOT/build"
BIN="$ROOT/bin"
STAMP="$BIN/.trie-stamp"

log() { printf '[fetch-llama-server] %s\n' "$*" >&2; }
sha() { sha256sum "$1" | cut -d' ' -f1; }

# The pinned sdist and tools, the CPU flags (cpu_flags), CUDA and its flags (cuda_flags), the venv: one definition
# for this script and scripts/fetch-llama.sh.
# shellcheck source=scripts/llama-build-flags.sh
source "$REPO/scripts/llama-build-flags.sh"
llama_venv_paths
LIBTRIE_LIB="$REPO/target/release/libtrie.a"

cmake_args=(-G Ninja -DCMAKE_MAKE_PROGRAM="$NINJA"
  -DCMAKE_BUILD_TYPE=Release
  -DBUILD_SHARED_LIBS=OFF
  -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON
  -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF
  -DLLAMA_LIBTRIE=ON -DLIBTRIE_ROOT="$REPO" -DLIBTRIE_LIB="$LIBTRIE_LIB"
  "${cpu_flags[@]}" "${cuda_flags[@]}")
if [[ "$PRINT_ARGS" == 1 ]]; then
  printf '%s\n' "${cmake_args[@]}"
  exit 0
fi

# ---- tools (pinned cmake + ninja from PyPI, the same venv as scripts/fetch-llama.sh) -------------------------
llama_setup_venv
venv="$CACHE/venv"

# ---- libtrie (static library; cargo decides whether anything changed) ----------------------------------------
log "building libtrie (cargo build --release)"
(cd "$REPO" && cargo build --release --quiet)
[[ -f "$LIBTRIE_LIB" ]] || { log "missing $LIBTRIE_LIB"; exit 1; }

# The stamp names everything the binary depends on (the CPU and CUDA flags in full); the libtrie side (its
# sources) is rebuilt by ninja itself.
want_stamp() {
  printf 'llama-cpp-python=%s commit=%s sha256=%s patch=%s cuda=%s cmake=%s %s\n' \
    "$LCP_VERSION" "$LLAMA_COMMIT" "$LCP_SHA256" "$(sha "$PATCH")" "$CUDA" "$CMAKE_VERSION" "$(llama_flags_stamp)"
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

# libtrie.a by content, not time: `cargo test` writes a new copy under target/release/deps and a later `cargo build`
# copies it up with its older time, which neither a time check nor ninja would see.
LIB_STAMP="$BIN/.libtrie-sha256"
lib_sha="$(sha "$LIBTRIE_LIB")"
if [[ "${TRIE_FORCE:-0}" != 1 && -f "$STAMP" && "$(cat "$STAMP")" == "$(want_stamp)" \
      && -x "$BIN/llama-server" && "$(cat "$LIB_STAMP" 2>/dev/null)" == "$lib_sha" \
      && -z "$(find "$REPO/integrations/llama-server" "$REPO/include" -newer "$BIN/llama-server" -type f 2>/dev/null)" ]]; then
  log "llama-server with libtrie already built: $BIN/llama-server"
  echo "$BIN/llama-server"
  exit 0
fi

# ---- configure + build ---------------------------------------------------------------------------------------
if [[ "$CUDA" == 1 ]]; then log "nvcc found: building with ${cuda_flags[*]}"; fi
mkdir -p "$BUILD" "$BIN"
rm -f "$STAMP"
# A libtrie.a that changed since the last link is made newer than the binary, so ninja links it again.
if [[ "$(cat "$LIB_STAMP" 2>/dev/null)" != "$lib_sha" ]]; then touch "$LIBTRIE_LIB"; fi
rm -f "$LIB_STAMP"
log "configuring (cmake $CMAKE_VERSION, ninja, Release, static, LLAMA_LIBTRIE=ON, cuda=$CUDA, CPU: ${cpu_flags[*]})"
"$CMAKE" -S "$SRC" -B "$BUILD" "${cmake_args[@]}" --log-level=WARNING >"$ROOT/configure.log" 2>&1 \
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
echo "$lib_sha" > "$LIB_STAMP"
echo "$BIN/llama-server"
