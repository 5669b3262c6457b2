#!/usr/bin/env bash
# Builds, in the background of scripts/test.sh, what takes minutes and only its later stages need: the differential
# harness's venv, cbindgen (C ABI stage), cargo-fuzz (fuzz smoke), llama.cpp and the model (llama.cpp stages), the
# Python stage's venv. Each one through the
# script its stage runs, which later finds it built (stamped) and does nothing. test.sh starts this at the lowest CPU
# priority (setsid nice -n 19), so that it only uses the CPU time its stages leave idle.
#
#   scripts/test-prefetch.sh DIR     writes DIR/NAME.log and then DIR/NAME.done (the exit status) for each tool
#
# Environment: TRIE_SKIP_LLAMA=1 (no llama.cpp, no model), TRIE_MODEL (default smollm2), as scripts/test.sh.
set -uo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
DIR="$1"
mkdir -p "$DIR"
run() {
  local name="$1"; shift
  "$@" >"$DIR/$name.log" 2>&1
  echo $? >"$DIR/$name.done"
}
run diff-venv scripts/test-differential.sh --venv-only
run cbindgen scripts/gen-header.sh "$DIR/trie.h"
run cargo-fuzz scripts/fuzz-smoke.sh --install-only
if [[ "${TRIE_SKIP_LLAMA:-0}" != 1 ]]; then
  run llama.cpp scripts/fetch-llama.sh
  run model scripts/fetch-model.sh "${TRIE_MODEL:-smollm2}"
fi
run py-venv scripts/test-python.sh --venv-only
