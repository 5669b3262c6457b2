#!/usr/bin/env bash
# Compile once, share everywhere (issue 38 item 3): N serving processes on one machine get the same large set file
# through the request-set front end with a compiled directory (LIBTRIE_COMPILED_DIR / --trie-compiled-dir), versus
# one process compiling alone. Each process (examples/shared_serve.rs) fills masks along random member decodes and
# sleeps while its /proc/PID/smaps_rollup is read.
#
#   scripts/bench-shared.sh [SET_FILE] [N]     # default: the npm package names (scripts/fetch-npm-names.sh), N = 4
#
# Prints one JSON line per process and a summary: PSS / RSS of the lone compiling process, of the first process
# with the directory (it compiles and saves), of the N processes together, and the later processes' time to
# their first mask (no compile). The machine may be shared: read the ratios within one run, with the load average.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SET="${1:-$("$REPO/scripts/fetch-npm-names.sh")}"
N="${2:-4}"
DECODES="${DECODES:-200}"
ASSETS="${TRIE_ASSETS:-$REPO/../shared/assets}"
VOCAB="$ASSETS/vocab/ggml-vocab-qwen2.gguf"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/libtrie-bench-shared.XXXXXX")"
# Every process started is listed in $WORK/pids and killed at exit (command substitutions hide them from `jobs`).
cleanup() {
  for p in $(cat "$WORK/pids" 2>/dev/null); do kill "$p" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT
mkdir -p "$WORK/sets"
cp "$SET" "$WORK/sets/big.txt"  # a regular file: links under the set directory are refused
(cd "$REPO" && cargo build --release -q --example shared_serve)
BIN="$REPO/target/release/examples/shared_serve"
mem() {  # PID -> "pss_kib rss_kib pss_anon_kib": Pss_Anon is the process's own heap (its share of nothing)
  awk '/^Pss:/{p=$2} /^Rss:/{r=$2} /^Pss_Anon:/{a=$2} END{print p, r, a}' "/proc/$1/smaps_rollup"
}
# Starts one process; waits for its JSON line (it then sleeps); prints "pid json".
serve() {  # COMPILED_DIR OUT
  "$BIN" "$VOCAB" "$WORK/sets" big "$1" "$DECODES" 600 >"$2" 2>"$2.err" &
  local pid=$!
  echo "$pid" >>"$WORK/pids"
  while [[ ! -s "$2" ]]; do
    kill -0 "$pid" 2>/dev/null || { echo "process $pid failed" >&2; exit 1; }
    sleep 0.2
  done
  echo "$pid"
}
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg); set: $SET ($(wc -l <"$SET") lines); N = $N"

# 1. One process compiling alone (no compiled directory): the automaton on its heap.
pid=$(serve - "$WORK/alone.json"); read -r alone_pss alone_rss alone_anon < <(mem "$pid")
echo "alone: $(cat "$WORK/alone.json") pss_kib=$alone_pss rss_kib=$alone_rss pss_anon_kib=$alone_anon"
kill "$pid"; wait "$pid" 2>/dev/null || true

# 2. N processes with the directory: the first compiles and saves (then maps the file), the others map it.
pids=()
pids+=("$(serve "$WORK/compiled" "$WORK/p0.json")")
for i in $(seq 1 $((N - 1))); do
  "$BIN" "$VOCAB" "$WORK/sets" big "$WORK/compiled" "$DECODES" 600 >"$WORK/p$i.json" 2>"$WORK/p$i.err" &
  pids+=("$!")
  echo "$!" >>"$WORK/pids"
done
for i in $(seq 1 $((N - 1))); do
  while [[ ! -s "$WORK/p$i.json" ]]; do kill -0 "${pids[$i]}" || exit 1; sleep 0.2; done
done
total_pss=0; total_rss=0; total_anon=0
for i in $(seq 0 $((N - 1))); do
  read -r pss rss anon < <(mem "${pids[$i]}")
  total_pss=$((total_pss + pss)); total_rss=$((total_rss + rss)); total_anon=$((total_anon + anon))
  echo "p$i: $(cat "$WORK/p$i.json") pss_kib=$pss rss_kib=$rss pss_anon_kib=$anon"
done
file=$(ls "$WORK/compiled"/*.trie)
file_kib=$(( $(stat -c %s "$file") / 1024 ))
echo "compiled file: $(basename "$file") $file_kib KiB"
# PSS counts the file's pages the processes touched; the bound counts the whole file resident once.
bound=$((total_anon + file_kib))
ratio() { awk "BEGIN{printf \"%.3f\", $1/$2}"; }
echo "summary: alone_pss_kib=$alone_pss n=$N total_pss_kib=$total_pss ratio=$(ratio $total_pss $alone_pss)" \
  "total_rss_kib=$total_rss anon_plus_whole_file_kib=$bound ratio_bound=$(ratio $bound $alone_pss)"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
