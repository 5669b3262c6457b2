#!/usr/bin/env bash
# Opt-in: compile and link the CUDA build of the pinned llama.cpp, the harness (examples/llama) and trie_llama.h on a
# machine WITHOUT a GPU or a system CUDA install. Compile and link only: nothing here runs GPU code.
#
#   scripts/cuda/build-llama-cuda.sh            toolkit + llama.cpp (CUDA) + libtrie + harness, then link checks
#   scripts/cuda/build-llama-cuda.sh --toolkit  only fetch and assemble the CUDA toolkit; print its root
#
# The CUDA toolkit comes from PyPI wheels, pinned by version and sha256, unpacked into the cache (no system
# install). Only the CUDA 13 wheels ship the nvcc driver itself (bin/nvcc, cudafe++, fatbinary, nvlink) and cicc:
# every nvidia-cuda-nvcc-cu12 wheel (12.1 to 12.9 checked) holds ptxas and libnvvm only, so a 12.x toolkit cannot be
# assembled from the registry. CUDA 13.0 update 2 it is, the version of the GPU machines' image (nvcc 13.0, driver
# 580): sm_80 (A100) and sm_90 (H100/H200) are both supported by it; it needs an R580 driver at run time.
#
#   nvidia-cuda-nvcc==13.0.88     bin/: nvcc, cudafe++, fatbinary, nvlink, ptxas, bin2c, crt/link.stub
#   nvidia-nvvm==13.0.88          nvvm/bin/cicc, nvvm/libdevice, lib/libnvvm.so.4
#   nvidia-cuda-crt==13.0.88      include/crt/ (host_config.h, ...)
#   nvidia-cuda-runtime==13.0.96  include/cuda_runtime*.h, cuda.h, lib/libcudart.so.13, libcudart_static.a, libcudadevrt.a
#   nvidia-cublas==13.1.0.3       include/cublas*.h, lib/libcublas.so.13, libcublasLt.so.13
#   nvidia-cuda-cccl==13.0.85     include/cccl/ (cub, thrust, libcudacxx)
#
# All six unpack into one tree, nvidia/cu13/, laid out like a toolkit (bin/, include/, lib/, nvvm/). Assembled in
# $TRIE_CACHE/cuda/toolkit-13.0.2 with what nvcc.profile and CMake's FindCUDAToolkit look for besides:
# targets/x86_64-linux/{include,lib}, lib64 -> lib, the unversioned links libcudart.so/libcublas.so/libcublasLt.so,
# nvvm/lib64/libnvvm.so, and lib/stubs/libcuda.so.
#
# libcuda.so (the driver API: ggml-cuda calls cuMemCreate, cuMemMap, cuDeviceGetAttribute... for its VMM pool) is
# part of the NVIDIA driver, in no wheel. lib/stubs/libcuda.so is GENERATED here: every function that the wheel's
# cuda.h declares, after its own #define renames (cuMemAlloc -> cuMemAlloc_v2 ...), as a function returning
# CUDA_ERROR_STUB_LIBRARY (34), with the SONAME libcuda.so.1. It is ONLY for linking (like the toolkit's own
# lib64/stubs/libcuda.so): the binaries record NEEDED libcuda.so.1 and, on a GPU machine, the dynamic loader finds
# the driver's real libcuda.so.1; the stubs folder is in no RPATH (checked below).
#
# llama.cpp: the same pinned source and the same portable CPU flags as scripts/fetch-llama.sh (that script does the
# build, with TRIE_LLAMA_CUDA=1 and the flags below), installed into its own root $TRIE_CACHE/llama.cpp-cuda, so the
# CPU build in $TRIE_CACHE/llama.cpp (what CI and the tests use) is never replaced. nvcc is put on PATH for that
# command only: nothing here changes what scripts/fetch-llama.sh picks without this script.
#
# CUDA flags: -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=$TRIE_LLAMA_CUDA_ARCHS (default "80;90": SASS and PTX for
# both) plus $TRIE_LLAMA_CUDA_FLAGS, default
#   -DGGML_CUDA_FA=OFF           FlashAttention kernels compiled empty (the 82 fattn template files still go through
#                                nvcc, quickly): llama.cpp then runs attention without FA on the GPU
#   -DGGML_CUDA_NCCL=OFF         one GPU; no NCCL lookup
#   -DCUDAToolkit_ROOT=<toolkit> -DCMAKE_CUDA_COMPILER=<toolkit>/bin/nvcc
# Set TRIE_LLAMA_CUDA_FLAGS="-DGGML_CUDA_NCCL=OFF" (with the toolkit flags) for the full build with FA.
#
# Harness: libtrie (cargo build --release) and examples/llama built into $TRIE_BUILD (default build/llama-cuda)
# against the CUDA install, by scripts/build-harness.sh.
#
# Environment: TRIE_CACHE (default <repo>/.cache), TRIE_JOBS (default 2), TRIE_LLAMA_CUDA_ARCHS (default "80;90"),
#              TRIE_LLAMA_CUDA_FLAGS (default above), TRIE_BUILD (default <repo>/build/llama-cuda),
#              TRIE_SKIP_CARGO=1 (use the existing target/release/libtrie.so).
# Prints the harness path as the last line of stdout.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CACHE="${TRIE_CACHE:-$REPO/.cache}"
JOBS="${TRIE_JOBS:-2}"
ONLY_TOOLKIT=0
case "${1:-}" in
  "") ;;
  --toolkit) ONLY_TOOLKIT=1 ;;
  *) echo "usage: $0 [--toolkit]" >&2; exit 2 ;;
esac

log() { printf '[build-llama-cuda] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
sha() { sha256sum "$1" | cut -d' ' -f1; }

[[ "$(uname -m)" == x86_64 ]] || die "the pinned CUDA wheels are for x86-64 Linux; this is $(uname -m)"

# ---- pinned wheels: name==version sha256 (CUDA 13.0 update 2) ------------------------------------------------
CUDA_SET="13.0.2"
WHEELS=(
  "nvidia-cuda-nvcc==13.0.88    56fe502eb77625a12f25172caa3cdddb4e4c8ba2c8c17dba44b164761b380f03"
  "nvidia-nvvm==13.0.88         c5f41ffeb6466944a026dfa5317d7d85355c119bbec279205d22f1869d1054e0"
  "nvidia-cuda-crt==13.0.88     2c8043c7c9e02492716426e9919fc78d2c5b3b2a7a768a88e952676b08aa55a4"
  "nvidia-cuda-runtime==13.0.96 7f82250d7782aa23b6cfe765ecc7db554bd3c2870c43f3d1821f1d18aebf0548"
  "nvidia-cublas==13.1.0.3      ee8722c1f0145ab246bccb9e452153b5e0515fd094c3678df50b2a0888b8b171"
  "nvidia-cuda-cccl==13.0.85    e0da7ad981f3a8aff08241b5bfc1af868742a63e2762f53a5171c492ef242649"
)
DL="$CACHE/cuda/dl"
TK="$CACHE/cuda/toolkit-$CUDA_SET"
TK_STAMP="$TK/.trie-toolkit"

want_tk_stamp() { printf '%s\n' "${WHEELS[@]}" | awk '{print $1, $2}'; echo "stub=2"; }

# pip's wheel file name for name==version: the registry's name with '-' -> '_'; the platform tag varies, so glob.
wheel_file() {
  local spec="$1" name ver
  name="${spec%%==*}"; ver="${spec#*==}"
  ls "$DL/${name//-/_}-$ver-"*.whl 2>/dev/null | head -1
}

fetch_wheels() {
  mkdir -p "$DL"
  local entry spec want f got
  for entry in "${WHEELS[@]}"; do
    read -r spec want <<< "$entry"
    f="$(wheel_file "$spec")"
    if [[ -n "$f" && "$(sha "$f")" != "$want" ]]; then
      log "cached $(basename "$f") has a wrong sha256; downloading again"; rm -f "$f"; f=""
    fi
    if [[ -z "$f" ]]; then
      log "downloading $spec from PyPI"
      python3 -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
        --python-version 3.11 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 --platform manylinux_2_12_x86_64 --platform manylinux2010_x86_64 \
        -d "$DL" "$spec" >&2 || die "pip download $spec failed"
      f="$(wheel_file "$spec")"
      [[ -n "$f" ]] || die "pip download $spec left no wheel in $DL"
    fi
    got="$(sha "$f")"
    [[ "$got" == "$want" ]] || die "sha256 mismatch for $(basename "$f"): got $got, want $want"
  done
  log "sha256 ok: ${#WHEELS[@]} wheel(s)"
}

# A libcuda.so for linking only: every cu* function of cuda.h (after its #define renames) returns
# CUDA_ERROR_STUB_LIBRARY. SONAME libcuda.so.1, as the driver's.
make_cuda_stub() {
  local inc="$1" out="$2" tmp n
  tmp="$(mktemp -d)"
  # the header maps the API names to their current versions (cuMemAlloc -> cuMemAlloc_v2 ...) with #define: take
  # the names after preprocessing, which are the ones compiled code references.
  gcc -E -P -x c -I"$inc" - <<<'#include <cuda.h>' >"$tmp/cuda.i" || { rm -rf "$tmp"; die "cannot preprocess cuda.h"; }
  grep -oE '\bCUresult[[:space:]]+(CUDAAPI[[:space:]]+)?cu[A-Za-z0-9_]+[[:space:]]*\(' "$tmp/cuda.i" \
    | sed -E 's/.*[[:space:]](cu[A-Za-z0-9_]+)[[:space:]]*\($/\1/' | sort -u >"$tmp/names"
  n="$(wc -l <"$tmp/names")"
  (( n > 300 )) || { rm -rf "$tmp"; die "found only $n driver functions in cuda.h"; }
  {
    echo '/* Generated by scripts/cuda/build-llama-cuda.sh: a libcuda.so.1 stub for LINKING ONLY.'
    echo '   Every function returns CUDA_ERROR_STUB_LIBRARY (34); the real library comes with the NVIDIA driver. */'
    sed -E 's/^(.*)$/int \1(void) { return 34; }/' "$tmp/names"
  } >"$tmp/stub.c"
  gcc -shared -fPIC -O1 -Wl,-soname,libcuda.so.1 -o "$out" "$tmp/stub.c"
  cp "$tmp/stub.c" "$(dirname "$out")/libcuda-stub.c"
  rm -rf "$tmp"
  log "generated $out ($n functions from cuda.h, each returning CUDA_ERROR_STUB_LIBRARY; for linking only)"
}

assemble_toolkit() {
  if [[ -f "$TK_STAMP" && "$(cat "$TK_STAMP")" == "$(want_tk_stamp)" && -x "$TK/bin/nvcc" ]]; then
    log "CUDA toolkit $CUDA_SET already assembled in $TK"
    return
  fi
  fetch_wheels
  log "assembling the CUDA toolkit in $TK"
  rm -rf "$TK" "$TK.tmp"
  mkdir -p "$TK.tmp"
  local entry spec want
  for entry in "${WHEELS[@]}"; do
    read -r spec want <<< "$entry"
    python3 -m zipfile -e "$(wheel_file "$spec")" "$TK.tmp"
  done
  [[ -f "$TK.tmp/nvidia/cu13/bin/nvcc" ]] || die "no nvidia/cu13/bin/nvcc in the wheels"
  mv "$TK.tmp/nvidia/cu13" "$TK"
  rm -rf "$TK.tmp"
  # zip extraction drops the executable bits
  chmod +x "$TK"/bin/* "$TK"/nvvm/bin/* 2>/dev/null || true
  rm -f "$TK"/bin/crt/*.py 2>/dev/null || true
  (
    cd "$TK"
    ln -sfn lib lib64
    mkdir -p targets/x86_64-linux nvvm/lib64 lib/stubs
    ln -sfn ../../include targets/x86_64-linux/include
    ln -sfn ../../lib targets/x86_64-linux/lib
    ln -sfn ../../lib/libnvvm.so.4 nvvm/lib64/libnvvm.so
    cd lib
    for so in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libnvblas.so.13 libnvvm.so.4; do
      [[ -f "$so" ]] && ln -sfn "$so" "${so%.so.*}.so"
    done
  )
  make_cuda_stub "$TK/include" "$TK/lib/stubs/libcuda.so"
  # nvcc smoke test: one kernel for both target GPUs, compiled and linked (not run)
  local t; t="$(mktemp -d)"
  printf '%s\n' '#include <cstdio>' '__global__ void k(float *x) { x[threadIdx.x] *= 2.0f; }' \
    'int main() { float *d; cudaMalloc(&d, 128); k<<<1, 32>>>(d); printf("%d\n", (int)cudaDeviceSynchronize()); }' >"$t/k.cu"
  "$TK/bin/nvcc" -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 -o "$t/k" "$t/k.cu" >&2 \
    || { rm -rf "$t"; die "nvcc cannot compile a test kernel with $TK"; }
  rm -rf "$t"
  want_tk_stamp >"$TK_STAMP"
  log "toolkit ok: $("$TK/bin/nvcc" --version | tail -2 | head -1)"
}

# cuobjdump, to inspect the result only (lists the embedded cubins and PTX): not part of the toolkit above (the
# first cuobjdump wheel on PyPI is 13.2.51; a newer cuobjdump reads older binaries), kept apart so that it never
# changes the toolkit's stamp or headers.
CUOBJDUMP_WHEEL="nvidia-cuda-cuobjdump==13.2.51 95c69d3ddf0c2c1f535ec44c3433a66aeee19f588d9d22f73356e20b25f12b50"
CUOBJDUMP="$CACHE/cuda/tools/cuobjdump-13.2.51/cuobjdump"
fetch_cuobjdump() {
  [[ -x "$CUOBJDUMP" ]] && return
  local WHEELS=("$CUOBJDUMP_WHEEL") d
  fetch_wheels
  d="$(mktemp -d)"
  python3 -m zipfile -e "$(wheel_file "${CUOBJDUMP_WHEEL%% *}")" "$d"
  mkdir -p "$(dirname "$CUOBJDUMP")"
  install -m 755 "$d/nvidia/cu13/bin/cuobjdump" "$CUOBJDUMP"
  rm -rf "$d"
}

assemble_toolkit
fetch_cuobjdump
if [[ "$ONLY_TOOLKIT" == 1 ]]; then echo "$TK"; exit 0; fi

# ---- llama.cpp with CUDA (scripts/fetch-llama.sh, its own root) ---------------------------------------------
export TRIE_LLAMA_CUDA=1
export TRIE_LLAMA_CUDA_ARCHS="${TRIE_LLAMA_CUDA_ARCHS:-80;90}"
export TRIE_LLAMA_CUDA_FLAGS="${TRIE_LLAMA_CUDA_FLAGS:--DGGML_CUDA_FA=OFF -DGGML_CUDA_NCCL=OFF} -DCUDAToolkit_ROOT=$TK -DCMAKE_CUDA_COMPILER=$TK/bin/nvcc"
export TRIE_LLAMA_ROOT="$CACHE/llama.cpp-cuda"
export TRIE_JOBS="$JOBS"
export CUDACXX="$TK/bin/nvcc"
log "llama.cpp: CUDA archs $TRIE_LLAMA_CUDA_ARCHS, extra flags: $TRIE_LLAMA_CUDA_FLAGS (uptime: $(uptime | sed 's/.*load/load/'))"
start=$(date +%s)
LLAMA_PREFIX="$(PATH="$TK/bin:$PATH" "$REPO/scripts/fetch-llama.sh" | tail -n 1)"
log "llama.cpp (CUDA) ready in $LLAMA_PREFIX after $(( $(date +%s) - start )) s (uptime: $(uptime | sed 's/.*load/load/'))"
export LLAMA_PREFIX

GGML_CUDA_SO="$LLAMA_PREFIX/lib/libggml-cuda.so"
[[ -f "$GGML_CUDA_SO" ]] || die "no $GGML_CUDA_SO: the build did not enable CUDA"

# ---- libtrie + harness ----------------------------------------------------------------------------------------
if [[ "${TRIE_SKIP_CARGO:-0}" != 1 ]]; then
  log "cargo build --release"
  (cd "$REPO" && nice cargo build --release -q)
fi
export TRIE_BUILD="${TRIE_BUILD:-$REPO/build/llama-cuda}"
# the linker checks libggml-cuda.so's NEEDED libraries (libcudart, libcublas, libcuda): show it where they are
# (rpath-link only: nothing is recorded in the binaries). The loader's name of the driver is libcuda.so.1, the stub's
# file is libcuda.so: a folder outside the toolkit holds the libcuda.so.1 link.
LINKDIR="$CACHE/cuda/rpath-link"
mkdir -p "$LINKDIR"
ln -sfn "$TK/lib/stubs/libcuda.so" "$LINKDIR/libcuda.so.1"
export LDFLAGS="${LDFLAGS:-} -Wl,-rpath-link,$TK/lib -Wl,-rpath-link,$LINKDIR"
# llama's installed CMake package runs find_dependency(CUDAToolkit) for a CUDA ggml: point it at the toolkit
export CUDAToolkit_ROOT="$TK"
HARNESS="$(PATH="$TK/bin:$PATH" "$REPO/scripts/build-harness.sh" | tail -n 1)"

# ---- link checks ---------------------------------------------------------------------------------------------
log "checks:"
fail=0
check() { if eval "$2"; then log "  ok   $1"; else log "  FAIL $1"; fail=1; fi; }
# cuobjdump: the machine code and PTX that libggml-cuda.so embeds, one per requested architecture
for a in ${TRIE_LLAMA_CUDA_ARCHS//;/ }; do
  n="${a%%-*}"
  case "$a" in
    *-virtual) check "libggml-cuda.so embeds compute_$n PTX" "\"$CUOBJDUMP\" --list-ptx \"$GGML_CUDA_SO\" | grep -c 'sm_$n'" ;;
    *-real) check "libggml-cuda.so embeds sm_$n machine code" "\"$CUOBJDUMP\" --list-elf \"$GGML_CUDA_SO\" | grep -c 'sm_$n'" ;;
    *) check "libggml-cuda.so embeds sm_$n machine code and compute_$n PTX" \
         "\"$CUOBJDUMP\" --list-elf \"$GGML_CUDA_SO\" | grep -c 'sm_$n' && \"$CUOBJDUMP\" --list-ptx \"$GGML_CUDA_SO\" | grep -c 'sm_$n'" ;;
  esac
done
check "libggml-cuda.so exports ggml_backend_cuda_init" "nm -D --defined-only \"$GGML_CUDA_SO\" | grep -q ' ggml_backend_cuda_init$'"
check "libggml-cuda.so needs libcudart.so.13, libcublas.so.13, libcuda.so.1" \
  "readelf -d \"$GGML_CUDA_SO\" | grep -q 'libcudart.so.13' && readelf -d \"$GGML_CUDA_SO\" | grep -q 'libcublas.so.13' && readelf -d \"$GGML_CUDA_SO\" | grep -q 'libcuda.so.1'"
check "libggml.so (the backend registry) needs libggml-cuda.so" "readelf -d \"$LLAMA_PREFIX/lib/libggml.so\" | grep -q 'libggml-cuda.so'"
check "no stubs folder in any RPATH/RUNPATH" \
  "! readelf -d \"$HARNESS\" \"$LLAMA_PREFIX\"/lib/*.so | grep -E 'R(UN)?PATH' | grep -q stubs"
check "trie-llama and trie-llama-selftest linked" "[[ -x \"$HARNESS\" && -x \"$(dirname "$HARNESS")/trie-llama-selftest\" ]]"
check "ldd: the harness loads libllama, libggml, libggml-cuda, libcudart.so.13, libcublas.so.13, libcuda.so.1 (the stub here)" \
  "LD_LIBRARY_PATH=\"$TK/lib:$LINKDIR\" ldd \"$HARNESS\" >\"$TRIE_BUILD/ldd.txt\" && ! grep -q 'not found' \"$TRIE_BUILD/ldd.txt\" && grep -q 'libggml-cuda.so[.0-9]* => /' \"$TRIE_BUILD/ldd.txt\" && grep -q 'libcublas.so.13 => /' \"$TRIE_BUILD/ldd.txt\" && grep -q 'libcuda.so.1 => /' \"$TRIE_BUILD/ldd.txt\""
[[ "$fail" == 0 ]] || die "link checks failed"
echo "$HARNESS"
