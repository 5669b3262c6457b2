#!/usr/bin/env bash
# The docs stage of scripts/test.sh (seconds): every code block of README.md and docs/*.md is a copy of a file CI
# builds or runs, or a syntax-checked command block (scripts/check-docs.py says which, per block, with -v); then the
# two README examples no other stage runs are run here on a real vocabulary: examples/quickstart.rs (built by the
# earlier cargo stages: all targets) and examples/python/quickstart.py (the source-tree package, after
# `cargo build --release`). The C, C++, llama.cpp and Go examples run in their own stages (COVERAGE in check-docs.py).
# Env: TRIE_ASSETS (real vocabularies; default <repo>/../shared/assets).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
python3 scripts/check-docs.py -v
vocab="${TRIE_ASSETS:-$REPO/../shared/assets}/vocab/ggml-vocab-qwen2.gguf"
[[ -f "$vocab" ]] || { echo "no vocabulary at $vocab (set TRIE_ASSETS)"; exit 1; }
members='^(calendar\.create_event|calendar\.list_events|weather\.get_forecast)$'
echo "== examples/quickstart.rs (cargo run --release --example quickstart)"
out="$(cargo run --release -q --example quickstart -- "$vocab")"
echo "$out"
head -n 1 <<<"$out" | grep -qE "$members" || { echo "the Rust example printed no member"; exit 1; }
echo "== examples/python/quickstart.py (source tree)"
out="$(PYTHONPATH="$REPO/python" python3 examples/python/quickstart.py "$vocab")"
echo "$out"
grep -qE "$members" <<<"$out" || { echo "the Python example printed no member"; exit 1; }
echo "test-docs: the checker passed and both examples printed a member"
