#!/usr/bin/env bash
# Speculative decoding stays exact (issue 31, llama-server), opt-in (not in scripts/test.sh, nor in run.sh's default
# run: about an hour on a shared 2-core machine):
#
#   tests/llama-server/run-spec.sh
#
# Starts llama-server (SmolLM2-135M, 4 slots, -t 1) with the engine's own drafting and libtrie routing, and runs
# tests/llama-server/check_spec.py: TRIE_SPEC_REQUESTS (default 1,000) requests, json_schema enums (a templated set),
# a GBNF alternation of UTF-8 city names, a chat response_format enum, tool calls ("tools" + "tool_choice":
# "required") and a "trie" set, greedy and sampled; every answer must be valid and no request may fail (the
# assertions). Then the same requests on a server with --trie-no-route (llama.cpp's grammars for all but the "trie"
# kind), reported, not asserted. Prints both tables; the summaries (JSON) go to TRIE_SPEC_OUT (default: the
# temporary folder, removed unless TRIE_KEEP=1).
#
# Environment: TRIE_SPEC_DRAFT=model (default: --model-draft with the same GGUF, -td 1, --spec-draft-n-max 4) or
# ngram (--spec-type ngram-simple: no second model), TRIE_SPEC_REQUESTS, TRIE_SPEC_PARTS ("route noroute" by
# default), TRIE_SPEC_SERVERS (default 1: servers sharing the requests, 4 slots each), TRIE_SPEC_MAX_MINUTES (default
# 0: none; no new request after it, the shortfall a failed check), TRIE_SERVER_THREADS (default 1), TRIE_CACHE,
# TRIE_KEEP=1.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
log() { printf '[llama-server spec] %s\n' "$*" >&2; }
# shellcheck source=scripts/llama-server-lib.sh
source "$REPO/scripts/llama-server-lib.sh"   # free_port, stop_server

BIN="$("$REPO/scripts/fetch-llama-server.sh" | tail -1)"
MODEL="$("$REPO/scripts/fetch-model.sh" smollm2 | tail -1)"
N="${TRIE_SPEC_REQUESTS:-1000}"
PARTS="${TRIE_SPEC_PARTS:-route noroute}"
case "${TRIE_SPEC_DRAFT:-model}" in
  model) DRAFT=(-md "$MODEL" -td "${TRIE_SERVER_THREADS:-1}" --spec-draft-n-max 4) ;;
  ngram) DRAFT=(--spec-type ngram-simple) ;;
  *) log "TRIE_SPEC_DRAFT: model or ngram"; exit 2 ;;
esac

WORK="$(mktemp -d "${TMPDIR:-/tmp}/libtrie-spec-test.XXXXXX")"
OUT="${TRIE_SPEC_OUT:-$WORK}"
mkdir -p "$OUT"
SERVER_PID=""
cleanup() {
  for p in $SERVER_PID; do stop_server "$p"; done
  if [[ "${TRIE_KEEP:-0}" == 1 ]]; then log "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT INT TERM
mkdir -p "$WORK/sets"
cp "$REPO/data/tools.txt" "$WORK/sets/tools.txt"
SERVERS="${TRIE_SPEC_SERVERS:-1}"

rc=0
for part in $PARTS; do
  extra=(); expect=exact
  if [[ "$part" == noroute ]]; then extra=(--trie-no-route); expect=report; fi
  targets=()
  SERVER_PID=""
  for k in $(seq 1 "$SERVERS"); do
    port="$(free_port)"
    "$BIN" -m "$MODEL" --host 127.0.0.1 --port "$port" -np 4 -c 8192 -t "${TRIE_SERVER_THREADS:-1}" -nr --no-webui \
      --seed 1 --jinja --trie-set-dir "$WORK/sets" "${DRAFT[@]}" "${extra[@]}" > "$WORK/server-$part-$k.log" 2>&1 &
    SERVER_PID="$SERVER_PID $!"
    targets+=(--url "http://127.0.0.1:$port" --pid "$!")
  done
  log "$part: $SERVERS server(s) ($SERVER_PID), drafting: ${DRAFT[*]} ${extra[*]} (load: $(cut -d' ' -f1-3 /proc/loadavg))"
  set +e
  python3 "$REPO/tests/llama-server/check_spec.py" "${targets[@]}" --repo "$REPO" --sets "$WORK/sets" --requests "$N" \
    --label "$part" --expect "$expect" --summary "$OUT/spec-$part.json" --outputs "$OUT/spec-$part.jsonl" \
    --max-minutes "${TRIE_SPEC_MAX_MINUTES:-0}"
  prc=$?
  set -e
  log "$part: done (load: $(cut -d' ' -f1-3 /proc/loadavg))"
  if [[ "$prc" != 0 ]]; then rc=1; log "$part: server log (last 40 lines):"; tail -40 "$WORK/server-$part-1.log" >&2 || true; fi
  for p in $SERVER_PID; do stop_server "$p"; done
  SERVER_PID=""
done
exit "$rc"
