#!/usr/bin/env bash
# Fetch a pinned llama.cpp source tree and build it (shared libraries, CPU; CUDA when nvcc exists).
#
# Source: the PyPI source distribution llama-cpp-python==0.3.36, which vendors llama.cpp commit 0c1e57098
# under vendor/llama.cpp (MIT). The sdist's sha256 is pinned in scripts/fetch-sdist.sh.
#
# Result (idempotent, stamped):
#   $TRIE_CACHE/llama.cpp/src      the llama.cpp source tree (llama.cpp/ is $TRIE_LLAMA_ROOT when set)
#   $TRIE_CACHE/llama.cpp/build    the CMake build tree
#   $TRIE_CACHE/llama.cpp/install  the install prefix (include/llama.h, lib/libllama.so, lib/libllama-common.so,
#                                  lib/cmake/llama)
#   $TRIE_CACHE/venv               a Python venv holding pinned cmake and ninja from PyPI
#
# CPU code is built for a portable ISA, never for the build machine (-march=native), with the flags defined once in
# scripts/llama-build-flags.sh (shared with scripts/fetch-llama-server.sh; see there why): on x86-64 GGML_NATIVE=OFF
# with SSE4.2 AVX AVX2 FMA F16C BMI2 and no AVX-VNNI, AVX512* or AMX*; other architectures GGML_NATIVE=OFF.
#
#   scripts/fetch-llama.sh                      fetch + build (or nothing, when the stamp matches)
#   scripts/fetch-llama.sh --print-cmake-args   print the CMake configure arguments, one per line, and exit
#
# Environment: TRIE_CACHE (default <repo>/.cache), TRIE_JOBS (default 2), TRIE_LLAMA_CUDA=0|1 (default: auto),
#              TRIE_LLAMA_CPU_FLAGS (CMake -D flags replacing the portable ISA list, e.g. "-DGGML_NATIVE=ON" to
#              tune for this machine; the flags are part of the build stamp, so changing them rebuilds),
#              TRIE_LLAMA_CUDA_ARCHS (CMAKE_CUDA_ARCHITECTURES; default "native" when nvidia-smi sees a GPU,
#              else llama.cpp's portable list), TRIE_LLAMA_CUDA_FLAGS (more -D flags for a CUDA build),
#              TRIE_LLAMA_ROOT (default $TRIE_CACHE/llama.cpp: where src/, build/, install/ go; the CUDA build
#              of scripts/cuda/build-llama-cuda.sh uses its own, so it never replaces the CPU build), TRIE_FORCE=1 rebuilds.
# Targets: llama, and llama-common (common/: the chat templates and the chat parser, common_chat_parse, that
# tests/calls-proof/llama_chat_driver.cpp links, so that tool calls are read back by llama.cpp's own parser).
# Prints the install prefix as the last line of stdout.
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

LLAMA_ROOT="${TRIE_LLAMA_ROOT:-$CACHE/llama.cpp}"
SRC="$LLAMA_ROOT/src"
BUILD="$LLAMA_ROOT/build"
PREFIX="$LLAMA_ROOT/install"
STAMP="$PREFIX/.trie-stamp"

log() { printf '[fetch-llama] %s\n' "$*" >&2; }

# The pinned sdist and tools, the CPU flags (cpu_flags), CUDA and its flags (cuda_flags), the venv: one definition
# for this script and scripts/fetch-llama-server.sh.
# shellcheck source=scripts/llama-build-flags.sh
source "$REPO/scripts/llama-build-flags.sh"
llama_venv_paths

cmake_args=(-G Ninja -DCMAKE_MAKE_PROGRAM="$NINJA"
  -DCMAKE_BUILD_TYPE=Release
  -DCMAKE_INSTALL_PREFIX="$PREFIX"
  -DCMAKE_INSTALL_LIBDIR=lib
  -DBUILD_SHARED_LIBS=ON
  -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF
  -DLLAMA_BUILD_COMMON=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=OFF
  -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF
  "${cpu_flags[@]}" "${cuda_flags[@]}")
if [[ "$PRINT_ARGS" == 1 ]]; then
  printf '%s\n' "${cmake_args[@]}"
  exit 0
fi

want_stamp() {
  printf 'llama-cpp-python=%s commit=%s sha256=%s cuda=%s cmake=%s targets=llama,llama-common %s\n' \
    "$LCP_VERSION" "$LLAMA_COMMIT" "$LCP_SHA256" "$CUDA" "$CMAKE_VERSION" "$(llama_flags_stamp)"
}

if [[ "${TRIE_FORCE:-0}" != 1 && -f "$STAMP" && "$(cat "$STAMP")" == "$(want_stamp)" \
      && -f "$PREFIX/include/llama.h" && -f "$PREFIX/lib/libllama-common.so" ]]; then
  log "llama.cpp $LLAMA_COMMIT already built in $PREFIX (cuda=$CUDA, ${cpu_flags[*]})"
  echo "$PREFIX"
  exit 0
fi

mkdir -p "$LLAMA_ROOT"
llama_setup_venv

# ---- download + verify (shared with scripts/fetch-assets.sh) ---------------------------------------------------
SDIST="$("$REPO/scripts/fetch-sdist.sh")"
log "sdist sha256 ok ($LCP_SHA256)"

# ---- extract -----------------------------------------------------------------------------------------------
if [[ ! -f "$SRC/.trie-extracted" || "$(cat "$SRC/.trie-extracted")" != "$LCP_SHA256" ]]; then
  log "extracting vendor/llama.cpp into $SRC"
  rm -rf "$SRC" "$LLAMA_ROOT/tmp"
  mkdir -p "$LLAMA_ROOT/tmp"
  tar -xzf "$SDIST" -C "$LLAMA_ROOT/tmp" "llama_cpp_python-$LCP_VERSION/vendor/llama.cpp"
  mv "$LLAMA_ROOT/tmp/llama_cpp_python-$LCP_VERSION/vendor/llama.cpp" "$SRC"
  rm -rf "$LLAMA_ROOT/tmp"
  echo "$LCP_SHA256" > "$SRC/.trie-extracted"
fi

# ---- configure + build + install ---------------------------------------------------------------------------
if [[ "$CUDA" == 1 ]]; then log "nvcc found: building with ${cuda_flags[*]}"; fi
rm -f "$STAMP"
log "configuring (cmake $CMAKE_VERSION, ninja, Release, shared, cuda=$CUDA, CPU: ${cpu_flags[*]})"
"$CMAKE" -S "$SRC" -B "$BUILD" "${cmake_args[@]}" --log-level=WARNING >"$LLAMA_ROOT/configure.log" 2>&1 \
  || { log "configure failed; see $LLAMA_ROOT/configure.log"; tail -30 "$LLAMA_ROOT/configure.log" >&2; exit 1; }

log "building targets llama and llama-common with $JOBS jobs (about 9 minutes on 2 cores for CPU; much longer with CUDA)"
start=$(date +%s)
# Ninja prints one "[n/N] ..." line per step; keep the progress visible but short.
if ! "$CMAKE" --build "$BUILD" --target llama llama-common -j "$JOBS" 2>&1 \
  | tee "$LLAMA_ROOT/build.log" \
  | { grep --line-buffered -E '^\[[0-9]+/[0-9]+\]|error' || true; } \
  | sed -u -E 's/^(\[[0-9]+\/[0-9]+\]) [A-Za-z ]+ (.*\/)?([^/ ]+)$/\1 \3/' >&2; then
  log "build failed; see $LLAMA_ROOT/build.log"
  exit 1
fi
log "built in $(( $(date +%s) - start )) s"

"$CMAKE" --install "$BUILD" >"$LLAMA_ROOT/install.log" 2>&1 \
  || { log "install failed; see $LLAMA_ROOT/install.log"; tail -20 "$LLAMA_ROOT/install.log" >&2; exit 1; }
want_stamp > "$STAMP"
log "installed into $PREFIX"
echo "$PREFIX"
