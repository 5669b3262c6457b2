#!/usr/bin/env bash
# Fetch a pinned llama.cpp source tree and build it (shared libraries, CPU; CUDA when nvcc exists).
#
# Source: the PyPI source distribution llama-cpp-python==0.3.36, which vendors llama.cpp commit 0c1e57098
# under vendor/llama.cpp (MIT). The sdist's sha256 is pinned below.
#
# Result (idempotent, stamped):
#   $TRIE_CACHE/llama.cpp/src      the llama.cpp source tree
#   $TRIE_CACHE/llama.cpp/build    the CMake build tree
#   $TRIE_CACHE/llama.cpp/install  the install prefix (include/llama.h, lib/libllama.so, lib/cmake/llama)
#   $TRIE_CACHE/venv               a Python venv holding pinned cmake and ninja from PyPI
#
# CPU code is built for a portable ISA, never for the build machine (-march=native): on x86-64,
# GGML_NATIVE=OFF with SSE4.2 AVX AVX2 FMA F16C BMI2 (x86-64-v3: Intel Haswell / AMD Zen and later), and AVX-VNNI,
# AVX512* and AMX* off. A native build on an Intel Xeon with AMX compiles ggml's AMX kernels and registers the
# AMX extra buffer type, which crashed there (SIGILL at `tilezero` in tinygemm_kernel_amx); machines that run
# this script are AMD EPYC or Intel AMX at random, and the binaries must behave the same on both. Other
# architectures get llama.cpp's defaults with GGML_NATIVE=OFF.
#
# Environment: TRIE_CACHE (default <repo>/.cache), TRIE_JOBS (default 2), TRIE_LLAMA_CUDA=0|1 (default: auto),
#              TRIE_LLAMA_CPU_FLAGS (CMake -D flags replacing the portable ISA list, e.g. "-DGGML_NATIVE=ON" to
#              tune for this machine; the flags are part of the build stamp, so changing them rebuilds),
#              TRIE_LLAMA_CUDA_ARCHS (CMAKE_CUDA_ARCHITECTURES; default "native" when nvidia-smi sees a GPU,
#              else llama.cpp's portable list), TRIE_FORCE=1 rebuilds.
# Prints the install prefix as the last line of stdout.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${TRIE_CACHE:-$REPO/.cache}"
JOBS="${TRIE_JOBS:-2}"

# The pinned sdist (version, sha256) is defined once, in scripts/fetch-sdist.sh.
LCP_VERSION="$(sed -n 's/^LCP_VERSION="\(.*\)"$/\1/p' "$REPO/scripts/fetch-sdist.sh")"
LCP_SHA256="$(sed -n 's/^LCP_SHA256="\(.*\)"$/\1/p' "$REPO/scripts/fetch-sdist.sh")"
LLAMA_COMMIT="0c1e57098"
CMAKE_VERSION="3.31.10"
NINJA_VERSION="1.11.1.4"

LLAMA_ROOT="$CACHE/llama.cpp"
SRC="$LLAMA_ROOT/src"
BUILD="$LLAMA_ROOT/build"
PREFIX="$LLAMA_ROOT/install"
STAMP="$PREFIX/.trie-stamp"

log() { printf '[fetch-llama] %s\n' "$*" >&2; }

# ---- tools -------------------------------------------------------------------------------------------------
setup_venv() {
  local venv="$CACHE/venv"
  if [[ ! -x "$venv/bin/cmake" || ! -x "$venv/bin/ninja" ]] \
     || ! "$venv/bin/cmake" --version 2>/dev/null | grep -q "version $CMAKE_VERSION"; then
    log "creating venv with cmake==$CMAKE_VERSION ninja==$NINJA_VERSION in $venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check \
      "cmake==$CMAKE_VERSION" "ninja==$NINJA_VERSION"
  fi
  CMAKE="$venv/bin/cmake"
  NINJA="$venv/bin/ninja"
}


# ---- CPU instruction sets (see the header) ------------------------------------------------------------------
ARCH="$(uname -m)"
if [[ -n "${TRIE_LLAMA_CPU_FLAGS+set}" ]]; then
  read -r -a cpu_flags <<< "$TRIE_LLAMA_CPU_FLAGS"
elif [[ "$ARCH" == x86_64 || "$ARCH" == amd64 ]]; then
  cpu_flags=(-DGGML_NATIVE=OFF
    -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
    -DGGML_AVX_VNNI=OFF -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF
    -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF
    -DGGML_BACKEND_DL=OFF -DGGML_CPU_ALL_VARIANTS=OFF)
else
  cpu_flags=(-DGGML_NATIVE=OFF)
fi

# ---- CUDA autodetect ---------------------------------------------------------------------------------------
CUDA="${TRIE_LLAMA_CUDA:-auto}"
if [[ "$CUDA" == auto ]]; then
  if command -v nvcc >/dev/null 2>&1; then CUDA=1; else CUDA=0; fi
fi
cuda_flags=()
if [[ "$CUDA" == 1 ]]; then
  # GGML_NATIVE=OFF would also make ggml compile CUDA code for a long list of GPU generations: build for the GPUs
  # of this machine when there are any (TRIE_LLAMA_CUDA_ARCHS overrides).
  CUDA_ARCHS="${TRIE_LLAMA_CUDA_ARCHS:-}"
  if [[ -z "$CUDA_ARCHS" ]] && nvidia-smi -L >/dev/null 2>&1; then CUDA_ARCHS=native; fi
  cuda_flags+=(-DGGML_CUDA=ON)
  if [[ -n "$CUDA_ARCHS" ]]; then cuda_flags+=("-DCMAKE_CUDA_ARCHITECTURES=$CUDA_ARCHS"); fi
fi

want_stamp() {
  printf 'llama-cpp-python=%s commit=%s sha256=%s cuda=%s cmake=%s arch=%s flags=%s\n' \
    "$LCP_VERSION" "$LLAMA_COMMIT" "$LCP_SHA256" "$CUDA" "$CMAKE_VERSION" "$ARCH" "${cpu_flags[*]} ${cuda_flags[*]}"
}

if [[ "${TRIE_FORCE:-0}" != 1 && -f "$STAMP" && "$(cat "$STAMP")" == "$(want_stamp)" \
      && -f "$PREFIX/include/llama.h" ]]; then
  log "llama.cpp $LLAMA_COMMIT already built in $PREFIX (cuda=$CUDA, ${cpu_flags[*]})"
  echo "$PREFIX"
  exit 0
fi

mkdir -p "$LLAMA_ROOT"
setup_venv

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
"$CMAKE" -S "$SRC" -B "$BUILD" -G Ninja -DCMAKE_MAKE_PROGRAM="$NINJA" \
  -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_INSTALL_PREFIX="$PREFIX" \
  -DCMAKE_INSTALL_LIBDIR=lib \
  -DBUILD_SHARED_LIBS=ON \
  -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
  -DLLAMA_BUILD_COMMON=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=OFF \
  -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF \
  "${cpu_flags[@]}" "${cuda_flags[@]}" \
  --log-level=WARNING >"$LLAMA_ROOT/configure.log" 2>&1 \
  || { log "configure failed; see $LLAMA_ROOT/configure.log"; tail -30 "$LLAMA_ROOT/configure.log" >&2; exit 1; }

log "building target llama with $JOBS jobs (about 6 minutes on 2 cores for CPU; much longer with CUDA)"
start=$(date +%s)
# Ninja prints one "[n/N] ..." line per step; keep the progress visible but short.
if ! "$CMAKE" --build "$BUILD" --target llama -j "$JOBS" 2>&1 \
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
