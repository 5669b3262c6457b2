#!/usr/bin/env bash
# Benchmark tool calls and enum schemas on llama-server: libtrie (requests routed without the "trie" field) vs the
# stock path (the same binary with --trie-no-route), issue 22:
#
#   scripts/bench-llama-server-tools.sh [--requests N] [--cap SECONDS] [--enum-sizes ...] [--tool-sizes ...] ...
#
# Enum schemas (response_format json_schema {"enum": K names}) on SmolLM2-135M; tools ("tools" with T tools,
# tool_choice "required") and registries ("trie": {"registry": NAME}, libtrie only) on Qwen2.5-Coder-0.5B, whose
# template renders tools in the prompt and has a JSON-native tool-call format. One server at a time, 1 slot,
# requests one after another. Results: JSON lines in docs/bench/llama-server-tools.jsonl (TRIE_BENCH_OUT).
# Threads: -t 1 (TRIE_SERVER_THREADS): on a 2-core machine shared with other work, -t 2 makes llama.cpp's threads
# wait on each other and decode collapses to 0.3-1 tok/s; the load average is logged before and after.
# Models come from scripts/fetch-model.sh; the server from scripts/fetch-llama-server.sh (or $LLAMA_SERVER_BIN).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
log() { printf '[bench-llama-server-tools] %s\n' "$*" >&2; }
# shellcheck source=scripts/llama-server-lib.sh
source "$REPO/scripts/llama-server-lib.sh"   # free_port, stop_server

BIN="${LLAMA_SERVER_BIN:-$("$REPO/scripts/fetch-llama-server.sh" | tail -1)}"  # LLAMA_SERVER_BIN: a built one
SMOL="$("$REPO/scripts/fetch-model.sh" smollm2 | tail -1)"
QWEN="$("$REPO/scripts/fetch-model.sh" qwen2.5-coder-0.5b | tail -1)"
OUT="${TRIE_BENCH_OUT:-$REPO/docs/bench/llama-server-tools.jsonl}"   # appended to

WORK="$(mktemp -d "${TMPDIR:-/tmp}/libtrie-tools-bench.XXXXXX")"
SERVER_PID=""
cleanup() {
  stop_server "$SERVER_PID"
  rm -rf "$WORK"
}
trap cleanup EXIT INT TERM
mkdir -p "$WORK/sets"
python3 "$REPO/scripts/gen-data.py" tools --count 10000 > "$WORK/names.txt"
mkdir -p "$(dirname "$OUT")"

# serve MODEL MODE CONTEXT CASES [args...]: one server, one client run
serve() {
  local model="$1" mode="$2" ctx="$3" cases="$4"
  shift 4
  local extra=()
  [[ "$mode" == stock ]] && extra+=(--trie-no-route)
  PORT="$(free_port)"  # a fresh port: a server killed while busy may still hold the last one
  "$BIN" -m "$model" --host 127.0.0.1 --port "$PORT" -np 1 -c "$ctx" -t "${TRIE_SERVER_THREADS:-1}" -nr --no-webui \
    --jinja --trie-set-dir "$WORK/sets" --trie-max-inline-strings 200000 --trie-max-inline-bytes 16000000 \
    "${extra[@]}" > "$WORK/server-$mode.log" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 1 360); do
    curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && break
    kill -0 "$SERVER_PID" 2>/dev/null || { log "server exited"; tail -30 "$WORK/server-$mode.log" >&2; exit 1; }
    sleep 0.5
  done
  log "$(basename "$model") $mode: $cases"
  python3 "$REPO/scripts/bench-llama-server-tools.py" --url "http://127.0.0.1:$PORT" --mode "$mode" \
    --names "$WORK/names.txt" --sets "$WORK/sets" --cases "$cases" --out "$OUT" "$@"
  grep -E "libtrie: (routed|compiled|argument grammar)" "$WORK/server-$mode.log" | head -20 | sed 's/^/# /' || true
  stop_server "$SERVER_PID"
  SERVER_PID=""
}

log "load before the run: $(uptime)"
# TRIE_BENCH_PARTS: which parts to run (default "enum tools"; "args": the argument phase, issue 29)
if [[ " ${TRIE_BENCH_PARTS:-enum tools} " == *" args "* ]]; then
  serve "$QWEN" libtrie 4096 args "$@"
  serve "$QWEN" stock 4096 args,beyond "$@"
fi
if [[ " ${TRIE_BENCH_PARTS:-enum tools} " == *" enum "* ]]; then
  serve "$SMOL" libtrie 4096 enum "$@"
  serve "$SMOL" stock 4096 enum "$@"
fi
if [[ " ${TRIE_BENCH_PARTS:-enum tools} " == *" tools "* ]]; then
  serve "$QWEN" libtrie 16384 tools,registry "$@"
  serve "$QWEN" stock 16384 tools "$@"
fi
log "load after the run: $(uptime)"
log "results in $OUT"
