#!/usr/bin/env bash
# The differential harness (tests/differential/README.md): libtrie's recognized sets against the engines' own matchers.
#
#   scripts/test-differential.sh                 the CI-sized run: the fixed corpus, seed 1 (TRIE_DIFF_CASES cases,
#                                                default 3000) and a random seed (a quarter as many), printed for
#                                                reproduction
#   scripts/test-differential.sh --cases N [--seed S] [--first I] [--families a,b] [--progress K] [--jobs J]
#                                                one run of N generated cases (a fuzz campaign: large N, any seed)
#   scripts/test-differential.sh --venv-only     create the oracles' venv (below) and exit (scripts/test-prefetch.sh)
#
# Oracles: xgrammar (PyPI wheel 0.2.8, torch/transformers stubbed), re (Python), jsonschema 4.26.0 — installed into
# $TRIE_CACHE/diff-venv from tests/differential/requirements.lock (pinned, --require-hashes, --no-deps); and
# llama.cpp's grammar parser/matcher (tests/differential/llama_oracle.cpp linked against the build of
# scripts/fetch-llama.sh). TRIE_DIFF_LLAMA: auto (default: used when that build is present, else said "NOT RUN"),
# 1 (required: builds llama.cpp through scripts/fetch-llama.sh if needed, fails without it), 0 (not used); with
# CI=true, auto without that build fails (an oracle is never skipped silently in CI).
# An oracle that is required and does not load fails the run (xgrammar, re and jsonschema are always required).
# Environment: TRIE_CACHE (default <repo>/.cache), TRIE_SKIP_CARGO=1 (do not build libtrie), TRIE_DIFF_CASES.
# Exits 1 on any disagreement; each is written to $TRIE_CACHE/differential/disagreements-<seed>.jsonl.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
CACHE="${TRIE_CACHE:-$REPO/.cache}"
VENV="$CACHE/diff-venv"
OUTDIR="$CACHE/differential"
LOCK="tests/differential/requirements.lock"
LLAMA_MODE="${TRIE_DIFF_LLAMA:-auto}"
log() { printf '[differential] %s\n' "$*" >&2; }
mkdir -p "$OUTDIR"

# ---- the oracles' venv (pinned, hashed) -------------------------------------------------------------------------
stamp="$(sha256sum "$LOCK" | cut -d' ' -f1) $(python3 -c 'import sys; print(sys.version.split()[0])')"
if [[ ! -x "$VENV/bin/python" || "$(cat "$VENV/.trie-stamp" 2>/dev/null)" != "$stamp" ]]; then
  log "creating $VENV with the pinned oracles ($LOCK)"
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check --no-deps --require-hashes -r "$LOCK"
  echo "$stamp" > "$VENV/.trie-stamp"
fi
if [[ "${1:-}" == --venv-only ]]; then exit 0; fi

if [[ "${TRIE_SKIP_CARGO:-0}" != 1 ]]; then
  log "cargo build --release"
  cargo build --release -q
fi

# ---- the llama.cpp oracle ----------------------------------------------------------------------------------------
LLAMA_ROOT="${TRIE_LLAMA_ROOT:-$CACHE/llama.cpp}"
ORACLE="$OUTDIR/llama-oracle"
oracles="xgrammar,re,jsonschema"
required="xgrammar,re,jsonschema"
if [[ "$LLAMA_MODE" == 1 && ! -f "$LLAMA_ROOT/install/lib/libllama.so" ]]; then
  log "TRIE_DIFF_LLAMA=1: building llama.cpp (scripts/fetch-llama.sh)"
  scripts/fetch-llama.sh >/dev/null
fi
if [[ "$LLAMA_MODE" != 0 ]]; then
  if [[ -f "$LLAMA_ROOT/install/lib/libllama.so" && -f "$LLAMA_ROOT/src/src/llama-grammar.h" ]]; then
    src=tests/differential/llama_oracle.cpp
    if [[ ! -x "$ORACLE" || "$src" -nt "$ORACLE" || "$LLAMA_ROOT/install/lib/libllama.so" -nt "$ORACLE" ]]; then
      log "building the llama.cpp oracle against $LLAMA_ROOT/install"
      "${CXX:-c++}" -std=c++17 -O2 -o "$ORACLE" "$src" \
        -I "$LLAMA_ROOT/src/src" -I "$LLAMA_ROOT/src/include" -I "$LLAMA_ROOT/src/ggml/include" \
        -L "$LLAMA_ROOT/install/lib" -lllama -Wl,--disable-new-dtags,-rpath,"$LLAMA_ROOT/install/lib"
    fi
    oracles="$oracles,llama"
    [[ "$LLAMA_MODE" == 1 ]] && required="$required,llama"
  elif [[ "$LLAMA_MODE" == 1 ]]; then
    log "TRIE_DIFF_LLAMA=1 but no llama.cpp build in $LLAMA_ROOT"; exit 2
  elif [[ "${CI:-}" == true ]]; then
    # CI never skips an oracle silently: say which way (0: the llama stage runs it; 1: build and require it here).
    log "llama.cpp oracle: no build in $LLAMA_ROOT and CI=true: set TRIE_DIFF_LLAMA=0 or 1"; exit 2
  else
    log "llama.cpp oracle NOT RUN: no build of scripts/fetch-llama.sh in $LLAMA_ROOT (TRIE_DIFF_LLAMA=1 requires it)"
  fi
else
  log "llama.cpp oracle NOT RUN (TRIE_DIFF_LLAMA=0)"
fi

run() {
  local seed="$1"; shift
  PYTHONPATH="$REPO/python" "$VENV/bin/python" tests/differential/run.py --seed "$seed" --oracles "$oracles" \
    --require "$required" --llama-oracle "$ORACLE" --out "$OUTDIR/disagreements-{seed}.jsonl" \
    --stderr-log "$OUTDIR/oracles-stderr.log" "$@"
}

if [[ $# -gt 0 ]]; then
  run 1 "$@"  # a --seed given here overrides the 1
  exit $?
fi

CASES="${TRIE_DIFF_CASES:-3000}"
RANDOM_SEED="$(python3 -c 'import secrets; print(secrets.randbelow(10**9))')"
t0=$SECONDS
rc=0
log "fixed seed 1: $CASES cases (+ the known corpus)"
run 1 --cases "$CASES" || rc=1
log "random seed $RANDOM_SEED: $((CASES / 4)) cases (reproduce: scripts/test-differential.sh --seed $RANDOM_SEED --cases $((CASES / 4)) --no-known)"
run "$RANDOM_SEED" --cases $((CASES / 4)) --no-known || rc=1
log "done in $((SECONDS - t0)) s (oracles: $oracles)"
exit $rc
