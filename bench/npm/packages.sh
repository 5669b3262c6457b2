#!/usr/bin/env bash
# Which npm packages does a code model name for 50 JavaScript tasks, unconstrained vs constrained to the names that
# exist in the npm registry (every public package name: all-the-package-names@2.0.2578, 4,499,322 names, the
# oracle)? Runs build/llama/trie-llama (examples/llama: llama.cpp with libtrie's sampler stage) in its two modes
# on bench/npm/tasks.tsv (few-shot: bench/npm/shots.tsv), greedy, then bench/npm/score.py counts, per mode, the
# answers that name an existing package and the answers among the task's well-known packages.
#
#   bench/npm/packages.sh [MODEL]     MODEL: qwen2.5-coder-0.5b (default) or smollm2 (scripts/fetch-model.sh)
#
# Needs: scripts/fetch-llama.sh's llama.cpp (built once), cargo build --release. Writes .cache/npm-packages/
# (prompts, outputs) and prints the score as JSON lines (bench/npm/score.py). About 5 minutes on 2 cores.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$REPO"
MODEL_NAME="${1:-qwen2.5-coder-0.5b}"
CACHE="${TRIE_CACHE:-$REPO/.cache}"
OUT="$CACHE/npm-packages"
mkdir -p "$OUT"
NAMES="$(scripts/fetch-npm-names.sh | tail -n 1)"
MODEL="$(scripts/fetch-model.sh "$MODEL_NAME" | tail -n 1)"
HARNESS="$(scripts/build-harness.sh | tail -n 1)"
PROMPT='Which npm package should I use to %s? Reply with the npm package name only.'
grep -v '^#' bench/npm/tasks.tsv | cut -f1 | while IFS= read -r task; do
  # shellcheck disable=SC2059
  printf "$PROMPT\n" "$task"
done >"$OUT/prompts.txt"
"$HARNESS" --model "$MODEL" --choices "$NAMES" --prompts "$OUT/prompts.txt" --shots bench/npm/shots.tsv \
  --system "You are a JavaScript expert. Answer with the name of one npm package only." \
  --mode all --beam 0 --n-predict 24 --batch 4 --json --out "$OUT/$MODEL_NAME.tsv" | tee "$OUT/$MODEL_NAME.log"
"${PYTHON:-python3}" bench/npm/score.py --names "$NAMES" --tasks bench/npm/tasks.tsv --outputs "$OUT/$MODEL_NAME.tsv" \
  --model "$MODEL_NAME" --log "$OUT/$MODEL_NAME.log"
