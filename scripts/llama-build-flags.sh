# The llama.cpp build definitions shared by scripts/fetch-llama.sh (shared libraries for the harness and the tests)
# and scripts/fetch-llama-server.sh (static llama-server with libtrie), so that both build the same pinned source
# with the same CPU instruction sets and the same CUDA settings. Sourced, never run: `source "$REPO/scripts/llama-build-flags.sh"`.
#
# Defines
#   LCP_VERSION LCP_SHA256   the pinned llama-cpp-python sdist (read from scripts/fetch-sdist.sh, its one definition)
#   LLAMA_COMMIT             the llama.cpp commit that sdist vendors
#   CMAKE_VERSION NINJA_VERSION   the pinned build tools (PyPI wheels, in $CACHE/venv)
#   ARCH                     uname -m
#   CUDA                     0 or 1 (TRIE_LLAMA_CUDA=0|1, default: 1 when nvcc exists)
#   cpu_flags  (array)       the CMake -D flags for the CPU code (see below; TRIE_LLAMA_CPU_FLAGS replaces them)
#   cuda_flags (array)       -DGGML_CUDA=ON, CMAKE_CUDA_ARCHITECTURES and TRIE_LLAMA_CUDA_FLAGS when CUDA=1, else empty
#   llama_flags_stamp        prints "arch=... cuda=... flags=..." for a build stamp (a changed flag list rebuilds)
#   llama_setup_venv         creates $CACHE/venv with the pinned cmake and ninja when needed; sets CMAKE and NINJA
#   llama_venv_paths         sets CMAKE and NINJA to the venv's paths without creating anything
#
# CPU code is built for a portable ISA, never for the build machine (-march=native): on x86-64, GGML_NATIVE=OFF with
# SSE4.2 AVX AVX2 FMA F16C BMI2 (x86-64-v3: Intel Haswell / AMD Zen and later), and AVX-VNNI, AVX512* and AMX* off.
# A native build on an Intel Xeon with AMX compiles ggml's AMX kernels and registers the AMX extra buffer type,
# which crashed there (SIGILL at `tilezero` in tinygemm_kernel_amx); machines that run these scripts are AMD EPYC or
# Intel AMX at random, and the binaries must behave the same on both. Other architectures get llama.cpp's defaults
# with GGML_NATIVE=OFF.
#
# Environment: TRIE_LLAMA_CUDA=0|1 (default: auto), TRIE_LLAMA_CPU_FLAGS (CMake -D flags replacing the portable ISA
# list, e.g. "-DGGML_NATIVE=ON" to tune for this machine), TRIE_LLAMA_CUDA_ARCHS (CMAKE_CUDA_ARCHITECTURES; default
# "native" when nvidia-smi sees a GPU, else llama.cpp's portable list), TRIE_LLAMA_CUDA_FLAGS (more CMake -D flags
# for a CUDA build only, e.g. "-DGGML_CUDA_FA=OFF -DCUDAToolkit_ROOT=/opt/cuda"; scripts/cuda/build-llama-cuda.sh
# sets it). Needs REPO and CACHE set by the caller.

LCP_VERSION="$(sed -n 's/^LCP_VERSION="\(.*\)"$/\1/p' "$REPO/scripts/fetch-sdist.sh")"
LCP_SHA256="$(sed -n 's/^LCP_SHA256="\(.*\)"$/\1/p' "$REPO/scripts/fetch-sdist.sh")"
LLAMA_COMMIT="0c1e57098"
CMAKE_VERSION="3.31.10"
NINJA_VERSION="1.11.1.4"

# ---- CPU instruction sets (see above) ----------------------------------------------------------------------
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
  if [[ -n "${TRIE_LLAMA_CUDA_FLAGS:-}" ]]; then
    read -r -a _trie_cuda_extra <<< "$TRIE_LLAMA_CUDA_FLAGS"
    cuda_flags+=("${_trie_cuda_extra[@]}")
  fi
fi

# The part of a build stamp that names the flags (both scripts' stamps include it).
llama_flags_stamp() {
  printf 'arch=%s flags=%s' "$ARCH" "${cpu_flags[*]} ${cuda_flags[*]}"
}

# ---- tools -------------------------------------------------------------------------------------------------
llama_venv_paths() {
  CMAKE="$CACHE/venv/bin/cmake"
  NINJA="$CACHE/venv/bin/ninja"
}

llama_setup_venv() {
  local venv="$CACHE/venv"
  if [[ ! -x "$venv/bin/cmake" || ! -x "$venv/bin/ninja" ]] \
     || ! "$venv/bin/cmake" --version 2>/dev/null | grep -q "version $CMAKE_VERSION"; then
    log "creating venv with cmake==$CMAKE_VERSION ninja==$NINJA_VERSION in $venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check "cmake==$CMAKE_VERSION" "ninja==$NINJA_VERSION"
  fi
  llama_venv_paths
}
