#!/usr/bin/env bash
# The opt-in transformers test (not part of scripts/test.sh): libtrie.transformers with SmolLM2-135M-Instruct loaded
# by transformers 5.19 (torch 2.13), greedy / sampling / beam search / a padded batch / a tool call whose arguments
# an XGrammar matcher constrains. Uses the environment of the vLLM test (scripts/setup-vllm.sh: .cache/vllm-venv,
# which holds torch, transformers, xgrammar and jsonschema, and the converted model); about 1 minute after setup.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
CACHE="${TRIE_CACHE:-$REPO/.cache}"
mapfile -t OUT < <(scripts/setup-vllm.sh | tail -n 2)
PY="${OUT[0]}" MODEL="${OUT[1]}"
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export LIBTRIE_TEST_MODEL="$MODEL" LIBTRIE_TEST_SETS="$CACHE/bench-sets"
cd "$CACHE"  # not the repository root: `import libtrie` must find the installed package
exec "$PY" -m unittest discover -v -s "$REPO/tests/transformers" -p 'test_*.py'
