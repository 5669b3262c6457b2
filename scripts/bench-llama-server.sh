#!/usr/bin/env bash
# Benchmark llama-server with libtrie against the server's own GBNF ("grammar") and JSON-schema enum
# ("json_schema": {"enum": [...]}) at K = 100, 1,000, 10,000 tool names, with parallel slots:
#
#   scripts/bench-llama-server.sh [--requests N] [--concurrency C] [--cap SECONDS] ...   (see bench-llama-server.py)
#
# The server runs with --trie-no-route, so "grammar" and "json_schema" take llama.cpp's own path (issue 22 routes
# them to libtrie by default; scripts/bench-llama-server-tools.sh compares the two).
# Builds the server (scripts/fetch-llama-server.sh) and fetches SmolLM2-135M (scripts/fetch-model.sh), starts it on
# 127.0.0.1 (4 slots unless TRIE_BENCH_SLOTS), runs scripts/bench-llama-server.py, writes JSON lines to
# docs/bench/llama-server.jsonl (TRIE_BENCH_OUT) and prints a table. Every case is capped in wall time (--cap,
# default 60 s), so the whole run stays under about 10 * cap. The server is stopped on exit.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
log() { printf '[bench-llama-server] %s\n' "$*" >&2; }
# shellcheck source=scripts/llama-server-lib.sh
source "$REPO/scripts/llama-server-lib.sh"   # free_port, stop_server

BIN="$("$REPO/scripts/fetch-llama-server.sh" | tail -1)"
MODEL="$("$REPO/scripts/fetch-model.sh" "${TRIE_MODEL:-smollm2}" | tail -1)"
OUT="${TRIE_BENCH_OUT:-$REPO/docs/bench/llama-server.jsonl}"
SLOTS="${TRIE_BENCH_SLOTS:-4}"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/libtrie-server-bench.XXXXXX")"
SERVER_PID=""
cleanup() {
  stop_server "$SERVER_PID"
  rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

mkdir -p "$WORK/sets"
for k in 100 1000 10000; do
  python3 "$REPO/scripts/gen-data.py" tools --count "$k" > "$WORK/sets/tools$k.txt"
done

PORT="$(free_port)"
"$BIN" -m "$MODEL" --host 127.0.0.1 --port "$PORT" -np "$SLOTS" -c $(( 2048 * SLOTS )) \
  -t "${TRIE_SERVER_THREADS:-2}" -nr --no-webui --trie-set-dir "$WORK/sets" --trie-no-route > "$WORK/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 1 360); do
  curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && break
  kill -0 "$SERVER_PID" 2>/dev/null || { log "server exited"; tail -30 "$WORK/server.log" >&2; exit 1; }
  sleep 0.5
done
curl -sf "http://127.0.0.1:$PORT/health" >/dev/null || { log "server not healthy"; exit 1; }

mkdir -p "$(dirname "$OUT")"
: > "$OUT"
log "model $(basename "$MODEL"), $SLOTS slots, results to $OUT"
python3 "$REPO/scripts/bench-llama-server.py" --url "http://127.0.0.1:$PORT" --sets "$WORK/sets" \
  --prompts "$REPO/data/tools-prompts.tsv" --concurrency "$SLOTS" --out "$OUT" "$@"
grep -E "libtrie: (compiled|vocabulary)" "$WORK/server.log" | sed 's/^/# /' || true
