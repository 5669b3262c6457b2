#!/usr/bin/env bash
# The opt-in SGLang test (not part of scripts/test.sh): libtrie's grammar backend against the real SGLang 0.5.23
# package's classes (plugin loader, argument parser, create_grammar_backend, the backend cache and executor, the
# batch mask of SamplingBatchInfo, XGrammar for delegated requests), run on the CPU against the pip-installed package.
# An SGLang server needs CUDA kernels, so none is started. First run: ~5 GB of pinned wheels
# (scripts/setup-sglang.sh); then about a minute.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
CACHE="${TRIE_CACHE:-$REPO/.cache}"
mapfile -t OUT < <(scripts/setup-sglang.sh | tail -n 3)
PY="${OUT[0]}" GGUF="${OUT[1]}" ASSETS="${OUT[2]}"
if [[ ! -x "$PY" || ! -f "$GGUF" || ! -d "$ASSETS" ]]; then
  echo "test-sglang: the SGLang environment is incomplete (python: $PY, model: $GGUF, assets: $ASSETS)" >&2
  exit 1
fi
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false LIBTRIE_TEST_GGUF="$GGUF" TRIE_ASSETS="$ASSETS"
unset LIBTRIE_VOCAB LIBTRIE_SGLANG_DEFAULT LIBTRIE_MAX_INLINE_STRINGS LIBTRIE_MAX_INLINE_BYTES SGLANG_PLUGINS TRIE_LIB
cd "$CACHE"  # not the repository root: `import libtrie` must find the installed package and its entry point
LIBTRIE_TEST_INSTALLED=1 "$PY" -W ignore -m unittest discover -v -s "$REPO/tests/sglang" -p 'test_sglang.py'
