#!/usr/bin/env bash
# Integration test of llama-server with libtrie (issue 15), opt-in (not in scripts/test.sh):
#
#   tests/llama-server/run.sh
#
# Builds llama-server with libtrie (scripts/fetch-llama-server.sh, cached in .cache/), fetches SmolLM2-135M
# (scripts/fetch-model.sh smollm2), writes a set directory (a 10,000-string tool set, the multi-byte UTF-8 city
# set, and bad sets), starts the real server on 127.0.0.1 with 4 parallel slots, and runs tests/llama-server/check.py:
# concurrent constrained (file sets and inline sets, /completion and /v1/chat/completions) and unconstrained
# requests, membership of every constrained output, unconstrained outputs equal to the same prompt sent alone
# (greedy), bad sets refused with an HTTP 400 naming the reason while the server keeps serving, each set compiled
# once. Then tests/llama-server/check_routing.py (issue 22): json_schema / response_format enums and literal grammars
# served by libtrie without the "trie" field, tool calls (10 tools, a named tool, a 10,000-tool registry) and bad
# schemas / tools refused with a 400; the tool checks run again on a second server with Qwen2.5-Coder-0.5B
# (scripts/fetch-model.sh qwen2.5-coder-0.5b), whose template has a JSON-native tool-call format that llama.cpp
# parses. Then the hostile requests of issue 28 (--part hostile: each a clear 400 while the server goes on, /health
# polled during each), and a reasoning template (tests/llama-server/think-template.jinja, "<think>" forced open: a
# json_schema enum is left to llama.cpp, not forced into the reasoning block). The servers are stopped on exit. Prints "N passed, M failed" per part; exit status 1 when anything failed.
#
# Then (issue 29) tests/llama-server/check_calls.py on the Qwen2.5 server (a 10,000-tool registry, "auto" with and
# without a call, parallel calls), (issue 36) tests/llama-server/check_registry_updates.py there (an unsorted
# registry updated three times, every name checked against its own schema after each update), (issue 37)
# tests/llama-server/check_deferred.py there (deferred tools: "defer_loading", tool_reference, a search function left
# unanswered, with no libtrie field), a Qwen2.5 server with --trie-deferred-registry (check_deferred.py --offered: the
# operator's registry as deferred tools of every request; a registry it cannot read: the server does not start), and the README's registry example (data/registry/tools.json, tests/llama-server/check_registry.py) on a
# Qwen2.5 server with --trie-no-route: the registry is still libtrie's, "tools" are llama.cpp's; needs jsonschema.
#
# Then (issue 31) tests/llama-server/check_spec.py on a SmolLM2 server with a draft model (--model-draft, the same GGUF)
# beside libtrie's jump-forward drafts: TRIE_SPEC_REQUESTS (default 40) requests (enums, a UTF-8 grammar set, a chat
# enum, tool calls, a "trie" set; greedy and sampled), every answer valid, none failed, drafts proposed and accepted.
# The 1,000-request run with the --trie-no-route comparison is tests/llama-server/run-spec.sh (opt-in, long).
#
# Environment: TRIE_CACHE (default <repo>/.cache), TRIE_SERVER_PORT (default: a free port), TRIE_SERVER_THREADS
# (default 1: -t 2 on a shared 2-core machine makes llama.cpp's threads wait on each other), TRIE_KEEP=1 keeps the temporary folder (server log, set directory).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
log() { printf '[llama-server test] %s\n' "$*" >&2; }
# shellcheck source=scripts/llama-server-lib.sh
source "$REPO/scripts/llama-server-lib.sh"   # free_port, stop_server
t_start=$(date +%s)

BIN="$("$REPO/scripts/fetch-llama-server.sh" | tail -1)"
MODEL="$("$REPO/scripts/fetch-model.sh" smollm2 | tail -1)"
t_built=$(date +%s)
log "build and model ready in $(( t_built - t_start )) s: $BIN"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/libtrie-server-test.XXXXXX")"
SERVER_PID=""
cleanup() {
  stop_server "$SERVER_PID"
  if [[ "${TRIE_KEEP:-0}" == 1 ]]; then log "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT INT TERM

# ---- the set directory --------------------------------------------------------------------------------------
SETS="$WORK/sets"
mkdir -p "$SETS/sub" "$WORK/outside" "$SETS/adir.txt"
python3 "$REPO/scripts/gen-data.py" tools --count 10000 > "$SETS/tools10k.txt"
cp "$REPO/data/cities-utf8.txt" "$SETS/sub/cities.txt"
printf 'yes\nno\n\xff\xfe\n' > "$SETS/notutf8.txt"
: > "$SETS/empty.txt"
printf 'secret\n' > "$WORK/outside/secret.txt"
ln -s "$WORK/outside/secret.txt" "$SETS/escape.txt"
# over --trie-max-file-bytes (2 MB)
python3 -c "import sys; sys.stdout.write(''.join('x%07d\n' % i for i in range(300000)))" > "$SETS/big.txt"
# over --trie-max-states (the tool set's trie has about 100,000 nodes; this one about 640,000)
python3 -c "
import hashlib, sys
sys.stdout.write(''.join(hashlib.sha256(str(i).encode()).hexdigest() + '\n' for i in range(10000)))" > "$SETS/huge.txt"

# next_port: a fresh free port for each server (a server killed while busy may hold its port a while); a fixed
# TRIE_SERVER_PORT is waited for (up to 30 s) until it can be bound again.
next_port() {
  if [[ -z "${TRIE_SERVER_PORT:-}" ]]; then free_port; return; fi
  for _ in $(seq 1 60); do
    python3 -c 'import socket,sys; s=socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1])))' "$TRIE_SERVER_PORT" \
      2>/dev/null && break
    sleep 0.5
  done
  echo "$TRIE_SERVER_PORT"
}
PORT="$(next_port)"
LOG="$WORK/server.log"

# -nr (--no-repack): no extra CPU buffer types (the build has no AMX kernels anyway; this keeps weights as loaded).
"$BIN" -m "$MODEL" --host 127.0.0.1 --port "$PORT" -np 4 -c 8192 -t "${TRIE_SERVER_THREADS:-1}" -nr \
  --no-webui --seed 1 \
  --trie-set-dir "$SETS" --trie-max-inline-strings 1000 --trie-max-file-bytes 2000000 --trie-max-states 400000 \
  > "$LOG" 2>&1 &
SERVER_PID=$!
log "server pid $SERVER_PID on 127.0.0.1:$PORT (log: $LOG)"

set +e
python3 "$REPO/tests/llama-server/check.py" --url "http://127.0.0.1:$PORT" --server-log "$LOG" --pid "$SERVER_PID" \
  --repo "$REPO" --sets "$SETS"
rc=$?
# issue 22: json_schema / response_format / grammar sets and tool calls reach libtrie without the "trie" field
python3 "$REPO/tests/llama-server/check_routing.py" --url "http://127.0.0.1:$PORT" --server-log "$LOG" \
  --pid "$SERVER_PID" --sets "$SETS" --part routing --part tools --part hostile --model-label SmolLM2
rc2=$?
set -e
if [[ "$rc" != 0 || "$rc2" != 0 ]]; then
  log "server log (last 40 lines):"
  tail -40 "$LOG" >&2 || true
fi
stop_server "$SERVER_PID"
SERVER_PID=""

# ---- tool calls with Qwen2.5's template (JSON-native <tool_call> format, parsed by llama.cpp) -----------------
QWEN="$("$REPO/scripts/fetch-model.sh" qwen2.5-coder-0.5b | tail -1)"
QLOG="$WORK/server-qwen.log"
PORT="$(next_port)"
"$BIN" -m "$QWEN" --host 127.0.0.1 --port "$PORT" -np 1 -c 8192 -t "${TRIE_SERVER_THREADS:-1}" -nr \
  --no-webui --seed 1 --jinja --trie-set-dir "$SETS" --trie-max-inline-strings 1000 --trie-max-file-bytes 8000000 \
  > "$QLOG" 2>&1 &
SERVER_PID=$!
log "Qwen2.5 server pid $SERVER_PID on 127.0.0.1:$PORT (log: $QLOG)"
set +e
python3 "$REPO/tests/llama-server/check_routing.py" --url "http://127.0.0.1:$PORT" --server-log "$QLOG" \
  --pid "$SERVER_PID" --sets "$SETS" --part tools --model-label Qwen2.5
rc3=$?
# issue 29: a 10,000-tool registry, "auto" with and without a call, parallel calls (2 and 3), jsonschema-checked
python3 "$REPO/tests/llama-server/check_calls.py" --url "http://127.0.0.1:$PORT" --pid "$SERVER_PID" --sets "$SETS" \
  || rc3=1
# issue 36, defect 1: an unsorted registry updated three times (add, remove, change a schema), every name called
# after each update and its arguments checked (jsonschema) against its own schema
python3 "$REPO/tests/llama-server/check_registry_updates.py" --url "http://127.0.0.1:$PORT" --pid "$SERVER_PID" \
  --sets "$SETS" || rc3=1
# issue 37, item 1: deferred tools with only the APIs' fields (defer_loading, tool_reference, a search function)
python3 "$REPO/tests/llama-server/check_deferred.py" --url "http://127.0.0.1:$PORT" --pid "$SERVER_PID" || rc3=1
set -e
if [[ "$rc3" != 0 ]]; then
  log "Qwen2.5 server log (last 40 lines):"
  tail -40 "$QLOG" >&2 || true
fi
stop_server "$SERVER_PID"
SERVER_PID=""

# ---- issue 37: an operator's registry offered as deferred tools of every request (--trie-deferred-registry) -----
python3 "$REPO/tests/llama-server/check_deferred.py" --write-registry "$SETS/offered_tools.json"
OLOG="$WORK/server-offered.log"
PORT="$(next_port)"
"$BIN" -m "$QWEN" --host 127.0.0.1 --port "$PORT" -np 1 -c 8192 -t "${TRIE_SERVER_THREADS:-1}" -nr \
  --no-webui --seed 1 --jinja --trie-set-dir "$SETS" --trie-deferred-registry offered_tools > "$OLOG" 2>&1 &
SERVER_PID=$!
log "offered-registry Qwen2.5 server pid $SERVER_PID on 127.0.0.1:$PORT (log: $OLOG)"
set +e
python3 "$REPO/tests/llama-server/check_deferred.py" --url "http://127.0.0.1:$PORT" --pid "$SERVER_PID" \
  --offered offered_tools
rc3b=$?
set -e
if [[ "$rc3b" != 0 ]]; then
  log "offered-registry server log (last 40 lines):"
  tail -40 "$OLOG" >&2 || true
  rc3=1
fi
stop_server "$SERVER_PID"
SERVER_PID=""
# a registry the server cannot read: it does not start, and says which flag
BLOG="$WORK/server-bad-registry.log"
set +e
timeout 120 "$BIN" -m "$QWEN" --host 127.0.0.1 --port "$(next_port)" -np 1 -c 2048 -t 1 -nr --no-webui --jinja \
  --trie-set-dir "$SETS" --trie-deferred-registry no_such_registry > "$BLOG" 2>&1
brc=$?
set -e
if [[ "$brc" != 0 && "$brc" != 124 ]] && grep -q -- "--trie-deferred-registry 'no_such_registry'" "$BLOG"; then
  echo "ok   a registry the server cannot read: llama-server exits ($brc) naming --trie-deferred-registry"
else
  echo "FAIL a registry the server cannot read: exit $brc, log: $(tail -3 "$BLOG" | tr '\n' ' ')"
  rc3=1
fi

# ---- the README's registry example with routing off (issue 29) ----------------------------------------------
NLOG="$WORK/server-noroute.log"
PORT="$(next_port)"
"$BIN" -m "$QWEN" --host 127.0.0.1 --port "$PORT" -np 1 -c 8192 -t "${TRIE_SERVER_THREADS:-1}" -nr \
  --no-webui --seed 1 --jinja --trie-no-route --trie-set-dir "$REPO/data/registry" > "$NLOG" 2>&1 &
SERVER_PID=$!
log "no-route Qwen2.5 server pid $SERVER_PID on 127.0.0.1:$PORT (log: $NLOG)"
set +e
python3 "$REPO/tests/llama-server/check_registry.py" --url "http://127.0.0.1:$PORT" --server-log "$NLOG" \
  --pid "$SERVER_PID" --no-route
rc5=$?
set -e
if [[ "$rc5" != 0 ]]; then
  log "no-route server log (last 40 lines):"
  tail -40 "$NLOG" >&2 || true
fi
stop_server "$SERVER_PID"
SERVER_PID=""

# ---- a reasoning template (issue 28): SmolLM2 with a template that forces "<think>" open ----------------------
RLOG="$WORK/server-reasoning.log"
PORT="$(next_port)"
"$BIN" -m "$MODEL" --host 127.0.0.1 --port "$PORT" -np 1 -c 4096 -t "${TRIE_SERVER_THREADS:-1}" -nr \
  --no-webui --seed 1 --jinja --chat-template-file "$REPO/tests/llama-server/think-template.jinja" \
  > "$RLOG" 2>&1 &
SERVER_PID=$!
log "reasoning-template server pid $SERVER_PID on 127.0.0.1:$PORT (log: $RLOG)"
set +e
python3 "$REPO/tests/llama-server/check_routing.py" --url "http://127.0.0.1:$PORT" --server-log "$RLOG" \
  --pid "$SERVER_PID" --sets "$SETS" --part reasoning --model-label SmolLM2-think
rc4=$?
set -e
if [[ "$rc4" != 0 ]]; then
  log "reasoning-template server log (last 40 lines):"
  tail -40 "$RLOG" >&2 || true
fi
stop_server "$SERVER_PID"
SERVER_PID=""

# ---- speculative decoding (issue 31): a draft model (the same GGUF) beside libtrie's forced runs -----------------
# (jump-forward is on by default: every server above drafted its sets' forced runs too)
cp "$REPO/data/tools.txt" "$SETS/tools.txt"
SLOG="$WORK/server-spec.log"
PORT="$(next_port)"
"$BIN" -m "$MODEL" -md "$MODEL" -td "${TRIE_SERVER_THREADS:-1}" --spec-draft-n-max 4 --host 127.0.0.1 --port "$PORT" \
  -np 4 -c 8192 -t "${TRIE_SERVER_THREADS:-1}" -nr --no-webui --seed 1 --jinja --trie-set-dir "$SETS" > "$SLOG" 2>&1 &
SERVER_PID=$!
log "speculative server (draft model) pid $SERVER_PID on 127.0.0.1:$PORT (log: $SLOG)"
set +e
python3 "$REPO/tests/llama-server/check_spec.py" --url "http://127.0.0.1:$PORT" --pid "$SERVER_PID" --repo "$REPO" \
  --sets "$SETS" --requests "${TRIE_SPEC_REQUESTS:-40}" --label spec-draft-model
rc6=$?
set -e
if [[ "$rc6" != 0 ]]; then
  log "speculative server log (last 40 lines):"
  tail -40 "$SLOG" >&2 || true
fi
[[ "$rc" == 0 && "$rc2" == 0 && "$rc3" == 0 && "$rc4" == 0 && "$rc5" == 0 && "$rc6" == 0 ]] || rc=1
log "total $(( $(date +%s) - t_start )) s (build/model $(( t_built - t_start )) s, server test $(( $(date +%s) - t_built )) s)"
exit "$rc"
