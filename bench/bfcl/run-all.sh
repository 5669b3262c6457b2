#!/usr/bin/env bash
# BFCL v4 on one engine, every category x mode (issue 29), then the table of docs/bench/bfcl.md:
#
#   bench/bfcl/run-all.sh [--engine llama-server|vllm] [--limit N] [--modes "stock libtrie catalog"]
#                         [--categories "simple_python multiple live_simple parallel parallel_multiple"]
#                         [--max-tokens N] [--one-start]
#
# --one-start: one engine start per mode for every category (vLLM on CPU takes minutes to start); the default
# starts the engine once per category and mode.
#
# Answers: $BFCL_OUT (default docs/bench/bfcl-<engine>.jsonl), summaries: docs/bench/bfcl-<engine>-summary.jsonl
# (both appended to). The llama-server engine runs -t 1 (BFCL_THREADS): see engine_llama_server.py. The load
# average is logged before and after each run.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
ENGINE=llama-server LIMIT=20 MAXTOK=512 ONE=0
MODES="stock libtrie catalog"
CATS="simple_python multiple live_simple parallel parallel_multiple"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --engine) ENGINE="$2"; shift 2 ;;
    --limit) LIMIT="$2"; shift 2 ;;
    --modes) MODES="$2"; shift 2 ;;
    --categories) CATS="$2"; shift 2 ;;
    --max-tokens) MAXTOK="$2"; shift 2 ;;
    --one-start) ONE=1; shift ;;
    *) echo "usage: $0 [--engine E] [--limit N] [--modes M] [--categories C] [--max-tokens N] [--one-start]" >&2
       exit 2 ;;
  esac
done
PY="$("$REPO/bench/bfcl/setup.sh" | tail -1)"
OUT="${BFCL_OUT:-$REPO/docs/bench/bfcl-$ENGINE.jsonl}"
SUM="${OUT%.jsonl}-summary.jsonl"
run() {  # run MODE CATEGORIES
  echo "[bfcl] $ENGINE $1 $2 (limit $LIMIT, max_tokens $MAXTOK); load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
  "$PY" "$REPO/bench/bfcl/run.py" --engine "$ENGINE" --mode "$1" --category "$2" --limit "$LIMIT" \
    --max-tokens "$MAXTOK" --out "$OUT" --summary "$SUM"
}
if [[ "$ONE" == 1 ]]; then
  for mode in $MODES; do run "$mode" "${CATS// /,}"; done
else
  for cat in $CATS; do
    for mode in $MODES; do run "$mode" "$cat"; done
  done
fi
echo "[bfcl] done; load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
python3 "$REPO/bench/bfcl/table.py" "$SUM"
