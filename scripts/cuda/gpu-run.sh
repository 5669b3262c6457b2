#!/usr/bin/env bash
# The CUDA run of libtrie's llama.cpp sampler stage, for a machine with one NVIDIA GPU and NO network (the device
# machine: nvcc 13.0, driver 580, CMake and ninja, Python 3, no Rust). Run from the repository root with the bundle
# that scripts/cuda/pack-gpu-bundle.sh made here (.cache/gpu-bundle, carried):
#
#   scripts/cuda/gpu-run.sh [--ngl N] [--shapes "0.6b 8b"] [--bundle DIR] [--rebuild] [--cpu-dry-run]
#
# 1. llama.cpp (CUDA) + the harness: the prebuilt ones of the bundle (built by scripts/cuda/build-llama-cuda.sh
#    with the pinned wheels, CUDA 13.0), when every library they need resolves on this machine (libcudart.so.13 and
#    libcublas.so.13 from its CUDA toolkit or its Python nvidia-* packages, libcuda.so.1 from the driver); else, or
#    with --rebuild, built here from the bundle's llama.cpp source (the pinned commit, the same CMake flags as
#    scripts/fetch-llama.sh: portable CPU ISA list, -DGGML_CUDA=ON, CMAKE_CUDA_ARCHITECTURES=native,
#    GGML_CUDA_FA=OFF) with this machine's nvcc, cmake and ninja, all cores; then examples/llama against it.
# 2. A GGUF with the real Qwen3 vocabulary and random weights for each shape (scripts/cuda/make-random-qwen3-gguf.py:
#    0.6b = Qwen3-0.6B's shape, 8b = Qwen3-8B's, Q8_0), from the bundle's Qwen3 tokenizer.json.
# 3. For batch 1 (16 prompts) and batch 64 (64 prompts): trie-llama --mode all --beam 0 --gbnf-max-k 0 (that is,
#    unconstrained and the trie stage, greedy) over the 4,000 tool names of data/tools.txt with --ngl N (default 99);
#    checks that llama.cpp offloaded every layer to CUDA0, that every trie output is a member (--require-valid and
#    tests/llama/check.py, byte-exact), and prints the stage's cost per token beside the decode time per token.
#
# --cpu-dry-run: for a machine with no GPU (what was run where this script was written): no nvidia-smi needed, the
#    CUDA build's libcuda.so.1 is the bundle's link stub (CUDA then finds no device and llama.cpp runs on the CPU),
#    and the offload check is skipped. Use it with --ngl 0 --shapes tiny.
# Environment: OUT (where the logs, JSON lines and summary go; default .cache/gpu-run-out), TRIE_GPU_JOBS (default
#    nproc), TRIE_CUDA_LIBS (more folders holding libcudart.so.13 / libcublas.so.13, searched first). Exit status 0 only when every check passed.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$REPO"
NGL=99
SHAPES="0.6b 8b"
BUNDLE="$REPO/.cache/gpu-bundle"
REBUILD=0
DRY=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --ngl) NGL="$2"; shift 2 ;;
    --shapes) SHAPES="$2"; shift 2 ;;
    --bundle) BUNDLE="$(cd "$2" && pwd)"; shift 2 ;;
    --rebuild) REBUILD=1; shift ;;
    --cpu-dry-run) DRY=1; shift ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done
OUTDIR="${OUT:-$REPO/.cache/gpu-run-out}"
mkdir -p "$OUTDIR"
WORK="${TMPDIR:-/tmp}/trie-gpu-run"
mkdir -p "$WORK"
JOBS="${TRIE_GPU_JOBS:-$(nproc)}"
T0=$(date +%s)

log() { printf '[gpu-run %4ds] %s\n' "$(( $(date +%s) - T0 ))" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
SUMMARY="$OUTDIR/summary.txt"
: >"$SUMMARY"
say() { printf '%s\n' "$*" | tee -a "$SUMMARY"; }

# ---- 0. the machine --------------------------------------------------------------------------------------------
[[ -d "$BUNDLE" ]] || die "no bundle at $BUNDLE: run scripts/cuda/pack-gpu-bundle.sh where the CUDA build was made, and carry .cache/gpu-bundle"
(cd "$BUNDLE" && sha256sum -c --quiet SHA256SUMS) || die "bundle checksums do not match ($BUNDLE/SHA256SUMS)"
if [[ "$DRY" == 0 ]]; then
  command -v nvidia-smi >/dev/null || die "no nvidia-smi: not a GPU machine (use --cpu-dry-run for a CPU dry run)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >"$WORK/gpu.txt" \
    || die "nvidia-smi sees no GPU"
  say "GPU: $(head -1 "$WORK/gpu.txt")"
  command -v nvcc >/dev/null && say "nvcc: $(nvcc --version | grep -o 'release [0-9.]*')"
else
  say "CPU dry run: no GPU used (CUDA build loaded with the link stub as libcuda.so.1; no device found)"
fi
say "CPU: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"

# Directories holding the CUDA 13 runtime and cuBLAS on this machine.
cuda_lib_dirs() {
  local d cands=()
  if command -v nvcc >/dev/null; then
    d="$(dirname "$(readlink -f "$(command -v nvcc)")")/.."
    cands+=("$d/lib64" "$d/lib" "$d/targets/x86_64-linux/lib")
  fi
  cands+=(/usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda-13.0/lib64)
  for py in python3 /opt/torch/.venv/bin/python3; do
    command -v "$py" >/dev/null || continue
    d="$("$py" -c 'import nvidia, os; print(os.path.dirname(list(nvidia.__path__)[0] + "/x"))' 2>/dev/null || true)"
    [[ -n "$d" ]] && cands+=("$d/cu13/lib" "$d/cublas/lib" "$d/cuda_runtime/lib")
  done
  # the driver's libcuda.so.1 (the linker needs its folder when it builds the harness here)
  d="$(ldconfig -p 2>/dev/null | awk '/libcuda\.so\.1 /{print $NF; exit}')"
  [[ -n "$d" ]] && cands+=("$(dirname "$d")")
  cands+=(/usr/local/nvidia/lib64 /usr/local/nvidia/lib)
  for d in "${cands[@]}"; do
    [[ -e "$d/libcublas.so.13" || -e "$d/libcudart.so.13" || -e "$d/libcuda.so.1" ]] && readlink -f "$d"
  done | awk '!seen[$0]++' | paste -sd: -
}

# ---- 1. llama.cpp (CUDA) + harness -----------------------------------------------------------------------------
PREFIX="$WORK/llama-cuda"
HBUILD="$WORK/harness"
mkdir -p "$WORK/trie-lib"
tar -xzf "$BUNDLE/libtrie.tar.gz" -C "$WORK/trie-lib"
TRIE_LIB="$(ls "$WORK"/trie-lib/libtrie.so | head -1)"
LIBDIRS="${TRIE_CUDA_LIBS:-}"
found="$(cuda_lib_dirs || true)"
LIBDIRS="$LIBDIRS${LIBDIRS:+${found:+:}}$found"
if [[ "$DRY" == 1 ]]; then
  # no CUDA on a CPU machine: the toolkit assembled by scripts/cuda/build-llama-cuda.sh, and the link stub
  tk="$(ls -d "$REPO"/.cache/cuda/toolkit-*/lib 2>/dev/null | head -1 || true)"
  LIBDIRS="$WORK/stub${tk:+:$tk}${LIBDIRS:+:$LIBDIRS}"
fi
log "CUDA library folders: ${LIBDIRS:-none found}"

use_prebuilt() {
  rm -rf "$PREFIX" "$HBUILD"; mkdir -p "$PREFIX" "$HBUILD"
  tar -xzf "$BUNDLE/llama-cuda-prebuilt.tar.gz" -C "$PREFIX"
  mv "$PREFIX/harness/"* "$HBUILD/" && rmdir "$PREFIX/harness"
  if [[ "$DRY" == 1 ]]; then mkdir -p "$WORK/stub"; cp "$PREFIX/stub/libcuda.so" "$WORK/stub/libcuda.so.1"; fi
  local missing
  missing="$(LD_LIBRARY_PATH="$PREFIX/lib:$WORK/trie-lib${LIBDIRS:+:$LIBDIRS}" ldd "$HBUILD/trie-llama" | grep 'not found' || true)"
  if [[ -n "$missing" ]]; then log "prebuilt harness: unresolved libraries here:"; echo "$missing" >&2; return 1; fi
  log "prebuilt harness: every library resolves ($(cat "$PREFIX/BUILD-INFO" 2>/dev/null | head -1))"
}

build_here() {
  command -v nvcc >/dev/null || die "no nvcc on this machine: cannot rebuild llama.cpp with CUDA"
  local cmake ninja src="$WORK/llama-src" build="$WORK/llama-build"
  cmake="$(command -v cmake)" || die "no cmake"; ninja="$(command -v ninja)" || die "no ninja"
  rm -rf "$src" "$build" "$PREFIX" "$HBUILD"; mkdir -p "$src"
  tar -xJf "$BUNDLE/llama-src.tar.xz" -C "$src"
  # the CMake arguments of scripts/fetch-llama.sh (CPU flags from scripts/llama-build-flags.sh), with this
  # machine's GPU as the CUDA architecture; generator and prefix replaced
  local args=()
  mapfile -t args < <(TRIE_LLAMA_CUDA=1 TRIE_LLAMA_CUDA_ARCHS=native TRIE_LLAMA_CUDA_FLAGS="-DGGML_CUDA_FA=OFF -DGGML_CUDA_NCCL=OFF" \
    scripts/fetch-llama.sh --print-cmake-args | grep -vE '^(-G|Ninja|-DCMAKE_MAKE_PROGRAM=|-DCMAKE_INSTALL_PREFIX=)')
  log "building llama.cpp with CUDA here ($JOBS jobs): ${args[*]}"
  "$cmake" -S "$src" -B "$build" -G Ninja -DCMAKE_MAKE_PROGRAM="$ninja" -DCMAKE_INSTALL_PREFIX="$PREFIX" "${args[@]}" \
    >"$OUTDIR/llama-configure.log" 2>&1 || { tail -30 "$OUTDIR/llama-configure.log" >&2; die "llama.cpp configure failed"; }
  local s=$(date +%s)
  "$cmake" --build "$build" --target llama -j "$JOBS" >"$OUTDIR/llama-build.log" 2>&1 \
    || { grep -m5 -B2 -A5 'error' "$OUTDIR/llama-build.log" >&2; die "llama.cpp build failed"; }
  "$cmake" --install "$build" >/dev/null
  log "llama.cpp (CUDA, native arch) built here in $(( $(date +%s) - s )) s"
  # the linker checks libggml-cuda.so's own NEEDED libraries (libcudart, libcublas, libcuda): show it the folders
  local rl="" d
  for d in ${LIBDIRS//:/ }; do rl+=" -Wl,-rpath-link,$d"; done
  LDFLAGS="${LDFLAGS:-}$rl" "$cmake" -S examples/llama -B "$HBUILD" -G Ninja -DCMAKE_MAKE_PROGRAM="$ninja" -DCMAKE_BUILD_TYPE=Release \
    -DLLAMA_DIR="$PREFIX" -DTRIE_INCLUDE_DIR="$REPO/include" -DTRIE_LIB="$TRIE_LIB" >"$OUTDIR/harness-build.log" 2>&1 \
    && "$cmake" --build "$HBUILD" -j "$JOBS" >>"$OUTDIR/harness-build.log" 2>&1 \
    || { tail -30 "$OUTDIR/harness-build.log" >&2; die "harness build failed"; }
  say "built here: llama.cpp (CUDA, CMAKE_CUDA_ARCHITECTURES=native) and the harness"
}

if [[ "$REBUILD" == 1 ]] || ! use_prebuilt; then
  [[ "$DRY" == 1 && "$REBUILD" == 0 ]] && die "the prebuilt harness does not load"
  build_here
else
  say "prebuilt: $(head -1 "$PREFIX/BUILD-INFO")"
fi
export LD_LIBRARY_PATH="$PREFIX/lib:$WORK/trie-lib${LIBDIRS:+:$LIBDIRS}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
HARNESS="$HBUILD/trie-llama"
[[ -x "$HARNESS" ]] || die "no harness at $HARNESS"

# ---- 2. inputs ---------------------------------------------------------------------------------------------------
CHOICES="$REPO/data/tools.txt"
P16="$REPO/data/tools-prompts.tsv"
P64="$WORK/tools-prompts-64.tsv"
: >"$P64"
while [[ "$(wc -l <"$P64")" -lt 64 ]]; do cat "$P16" >>"$P64"; done
head -n 64 "$P64" >"$P64.tmp" && mv "$P64.tmp" "$P64"
NP16="$(grep -c . "$P16")"
TOKJSON="$WORK/qwen3.tokenizer.json"
xz -dc "$BUNDLE/qwen3.tokenizer.json.xz" >"$TOKJSON"

# ---- 3. runs -----------------------------------------------------------------------------------------------------
fail=0
rows=()
for shape in $SHAPES; do
  MODEL="$WORK/qwen3-$shape-random.gguf"
  if [[ ! -f "$MODEL" ]]; then
    log "writing $MODEL (Qwen3 $shape shape, random Q8_0 weights, real Qwen3 vocabulary)"
    python3 "$REPO/scripts/cuda/make-random-qwen3-gguf.py" "$TOKJSON" "$MODEL" --shape "$shape"
  fi
  for B in 1 64; do
    if [[ "$B" == 1 ]]; then PROMPTS="$P16"; N="$NP16"; else PROMPTS="$P64"; N=64; fi
    tag="$shape-b$B"
    log "run $tag: $N prompts, batch $B, --ngl $NGL"
    set +e
    "$HARNESS" --model "$MODEL" --choices "$CHOICES" --prompts "$PROMPTS" --mode all --beam 0 --gbnf-max-k 0 \
      --batch "$B" --ngl "$NGL" --n-predict 48 --json --require-valid --verbose --out "$OUTDIR/out-$tag.tsv" \
      >"$OUTDIR/stdout-$tag.txt" 2>"$OUTDIR/log-$tag.txt"
    rc=$?
    set -e
    if [[ "$rc" != 0 ]]; then
      log "FAIL $tag: trie-llama exited $rc"; tail -20 "$OUTDIR/log-$tag.txt" >&2; fail=1; continue
    fi
    if python3 "$REPO/tests/llama/check.py" "$CHOICES" "$OUTDIR/out-$tag.tsv" trie "$N" >"$OUTDIR/check-$tag.txt" 2>&1; then
      log "ok   $tag: all $N trie outputs are members (check.py)"
    else
      log "FAIL $tag: membership"; cat "$OUTDIR/check-$tag.txt" >&2; fail=1
    fi
    offl="$(grep -oE 'offloaded [0-9]+/[0-9]+ layers to GPU' "$OUTDIR/log-$tag.txt" | head -1 || true)"
    if [[ "$DRY" == 0 ]]; then
      if [[ "$offl" =~ offloaded\ ([0-9]+)/([0-9]+) && "${BASH_REMATCH[1]}" == "${BASH_REMATCH[2]}" ]] \
         && grep -q 'CUDA0' "$OUTDIR/log-$tag.txt"; then
        log "ok   $tag: $offl (CUDA0)"
      else
        log "FAIL $tag: not every layer on the GPU (${offl:-no offload line in the log})"; fail=1
      fi
    fi
    grep '^{"mode"' "$OUTDIR/stdout-$tag.txt" >"$OUTDIR/json-$tag.jsonl" || true
    rows+=("$(python3 - "$OUTDIR/json-$tag.jsonl" "$shape" "$B" "${offl:-no offload}" <<'EOF'
import json, sys
path, shape, b, offl = sys.argv[1:]
m = {r["mode"]: r for r in map(json.loads, open(path)) if not r["skipped"]}
u, t = m.get("unconstrained"), m.get("trie")
def us(r):  # decode wall time per generated token (all sequences of the batch together)
    return 1e6 / r["decode_tok_per_s"] if r and r["decode_tok_per_s"] > 0 else float("nan")
print(f"{shape:5s} {b:>5s} {u['decode_tok_per_s'] if u else float('nan'):12.1f} {t['decode_tok_per_s']:12.1f} "
      f"{us(u):13.1f} {us(t):13.1f} {t['stage_us_per_token']:12.2f} {100 * t['stage_us_per_token'] / us(t):8.2f}% "
      f"{t['valid']}/{t['n']:<5d} {offl}")
EOF
)")
  done
done

say ""
say "libtrie sampler stage on llama.cpp CUDA: 4,000 tool names (data/tools.txt), Qwen3 vocabulary, random weights, greedy, --ngl $NGL"
say "shape batch  unc tok/s   trie tok/s  unc us/token trie us/token stage us/tok   share valid  offload"
for r in "${rows[@]}"; do say "$r"; done
say "(tok/s: generated tokens / generation wall time, all sequences of the batch together; us/token: its inverse;"
say " stage: the trie stage's apply + accept per token, on the CPU; share: stage / trie us/token)"
say "total $(( $(date +%s) - T0 )) s"
if [[ "$fail" != 0 ]]; then log "some checks FAILED (logs in $OUTDIR)"; exit 1; fi
log "all checks passed; summary in $SUMMARY"
