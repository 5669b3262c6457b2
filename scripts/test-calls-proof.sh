#!/usr/bin/env bash
# The whole-call proof (tests/calls-proof/README.md): tool calls written by libtrie's tool-call engine on real
# vocabularies (examples/calls_proof) are read back by the serving engines' own parsers and checked against the tool
# list or registry version each request saw (tests/calls-proof/check.py: (a) the parser reads the same calls,
# (b) each names a tool of that version, (c) its arguments validate with `jsonschema` against that tool's parameters).
#
#   scripts/test-calls-proof.sh                  the CI slice: seed 1 (TRIE_PROOF_WALKS call walks, default 1500) and
#                                                a random seed (a third as many, printed), read by llama.cpp's chat
#                                                parser; then the mutation check (below) must FAIL the harness
#   scripts/test-calls-proof.sh --walks N [--seed S] [--big K] [--max-tools K] [--per-request N] [--formats F,..]
#                                                one run (a campaign: large N; --big K adds one registry of K tools)
#   scripts/test-calls-proof.sh --mutate numbering [--walks N] [--seed S]
#                                                defect 1 of issue 36 put back on the harness's side (the registry's
#                                                member -> tool map numbered as route.py did; examples/calls_proof):
#                                                the check must fail; exits 0 when it does, 1 when the harness misses it
#   scripts/test-calls-proof.sh --vllm [--walks N] [--seed S]
#                                                vLLM's own tool parsers (Hermes2ProToolParser, Llama3JsonToolParser,
#                                                MistralToolParser) instead, imported by TRIE_VLLM_PYTHON (a python
#                                                with vllm; default /work/vcache/vllm-venv/bin/python); opt-in
#
# llama.cpp: the build of scripts/fetch-llama.sh (libllama-common: common_chat_templates_apply builds the chat
# template's parser, common_chat_parse reads the answer, as llama-server does); the driver
# tests/calls-proof/llama_chat_driver.cpp is built against it. jsonschema: the differential harness's venv
# ($TRIE_CACHE/diff-venv, tests/differential/requirements.lock). Assets: TRIE_ASSETS (scripts/fetch-assets.sh).
# Environment: TRIE_CACHE (default <repo>/.cache), TRIE_SKIP_CARGO=1, TRIE_PROOF_WALKS. Failures are written to
# $TRIE_CACHE/calls-proof/failures-<seed>.jsonl.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
CACHE="${TRIE_CACHE:-$REPO/.cache}"
OUTDIR="$CACHE/calls-proof"
LLAMA_ROOT="${TRIE_LLAMA_ROOT:-$CACHE/llama.cpp}"
log() { printf '[calls-proof] %s\n' "$*" >&2; }
mkdir -p "$OUTDIR"

walks="" seed="" mutate="" vllm=0 extra=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --walks) walks="$2"; shift 2 ;;
    --seed) seed="$2"; shift 2 ;;
    --mutate) mutate="$2"; shift 2 ;;
    --vllm) vllm=1; shift ;;
    --big|--max-tools|--formats|--per-request) extra+=("$1" "$2"); shift 2 ;;
    *) echo "usage: see the top of $0" >&2; exit 2 ;;
  esac
done
if [[ -z "${TRIE_ASSETS:-}" ]]; then TRIE_ASSETS="$(scripts/fetch-assets.sh | tail -n 1)"; fi
export TRIE_ASSETS

if [[ "${TRIE_SKIP_CARGO:-0}" != 1 ]]; then
  log "cargo build --release --example calls_proof"
  cargo build --release -q --example calls_proof
fi
GEN="$REPO/target/release/examples/calls_proof"

checker=()
if [[ "$vllm" == 1 ]]; then
  PY="${TRIE_VLLM_PYTHON:-/work/vcache/vllm-venv/bin/python}"
  [[ -x "$PY" ]] || { log "--vllm: no python at $PY (set TRIE_VLLM_PYTHON to a python with vllm)"; exit 2; }
  checker=(env HF_HUB_OFFLINE=1 "$PY" tests/calls-proof/check.py --vllm --tokenizers "$TRIE_ASSETS/tokenizers")
else
  scripts/test-differential.sh --venv-only
  scripts/fetch-llama.sh >/dev/null
  DRIVER="$OUTDIR/llama-chat-driver"
  src=tests/calls-proof/llama_chat_driver.cpp
  lib="$LLAMA_ROOT/install/lib/libllama-common.so"
  if [[ ! -x "$DRIVER" || "$src" -nt "$DRIVER" || "$lib" -nt "$DRIVER" ]]; then
    log "building the llama.cpp chat-parser driver against $LLAMA_ROOT/install"
    "${CXX:-c++}" -std=c++17 -O2 -o "$DRIVER" "$src" \
      -I "$LLAMA_ROOT/src/common" -I "$LLAMA_ROOT/src/include" -I "$LLAMA_ROOT/src/ggml/include" \
      -I "$LLAMA_ROOT/src/vendor" -L "$LLAMA_ROOT/install/lib" -lllama-common -lllama \
      -Wl,--disable-new-dtags,-rpath,"$LLAMA_ROOT/install/lib"
  fi
  checker=("$CACHE/diff-venv/bin/python" tests/calls-proof/check.py --llama "$DRIVER"
    --templates "$LLAMA_ROOT/src/models/templates")
fi

# one run: generate N call walks with seed S (and the generator's other flags), check them
run() {
  local s="$1" n="$2"; shift 2
  local calls="$OUTDIR/calls-$s.jsonl"
  "$GEN" --seed "$s" --walks "$n" --out "$calls" "$@"
  "${checker[@]}" "$calls" --out "$OUTDIR/failures-$s.jsonl"
}

# a mutation run: exits 0 when the check fails (the harness caught it), 1 when it passes
mutation() {
  local m="$1" s="$2" n="$3"; shift 3
  log "mutation '$m' (seed $s, $n call walks): the check must fail"
  if run "$s" "$n" --max-tools 200 --mutate "$m" "$@" >"$OUTDIR/mutation-$s.log" 2>&1; then
    log "the harness did NOT catch the mutation '$m' (log: $OUTDIR/mutation-$s.log)"; return 1
  fi
  grep -E '^(llama.cpp|vLLM): [0-9]+ call walks' "$OUTDIR/mutation-$s.log" >&2 || true
  log "the harness caught the mutation '$m' (failures: $OUTDIR/failures-$s.jsonl)"
}
if [[ -n "$mutate" ]]; then
  mutation "$mutate" "${seed:-1}" "${walks:-300}" "${extra[@]}"
  exit $?
fi
if [[ -n "$walks" || -n "$seed" || "$vllm" == 1 ]]; then
  run "${seed:-1}" "${walks:-3000}" "${extra[@]}"
  exit $?
fi

WALKS="${TRIE_PROOF_WALKS:-1500}"
RANDOM_SEED="$(python3 -c 'import secrets; print(secrets.randbelow(10**9))')"
t0=$SECONDS
rc=0
log "fixed seed 1: $WALKS call walks"
run 1 "$WALKS" --max-tools 200 || rc=1
log "random seed $RANDOM_SEED: $((WALKS / 3)) call walks (reproduce: scripts/test-calls-proof.sh --seed $RANDOM_SEED --walks $((WALKS / 3)) --max-tools 200)"
run "$RANDOM_SEED" $((WALKS / 3)) --max-tools 200 || rc=1
log "mutation check: defect 1 put back in the harness's registry map must fail the check"
mutation numbering 7 300 || rc=1
log "done in $((SECONDS - t0)) s"
exit $rc
