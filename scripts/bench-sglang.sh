#!/usr/bin/env bash
# SGLang grammar backends on enum JSON schemas of K names (scripts/bench-sglang.py): libtrie against SGLang's XGrammar
# backend through SGLang's backend interface, one run, every output checked. Results: docs/bench/sglang.md.
# The inline bounds are raised for the run (a 100,000-name enum is over the 10,000-member default).
#   scripts/bench-sglang.sh [K ...]      (default: 100 1000 10000 100000; XGrammar up to 10,000)
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
mapfile -t OUT < <(scripts/setup-sglang.sh | tail -n 3)
PY="${OUT[0]}" ASSETS="${OUT[2]}"
cd "${TRIE_CACHE:-$REPO/.cache}"  # the installed package, not the source tree
HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false LIBTRIE_MAX_INLINE_STRINGS=200000 LIBTRIE_MAX_INLINE_BYTES=$((16 << 20)) "$PY" -W ignore "$REPO/scripts/bench-sglang.py" \
  "$ASSETS/tokenizers/qwen3.tokenizer.json" ${@:-100 1000 10000 100000}
