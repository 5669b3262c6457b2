#!/usr/bin/env bash
# Compile once, share everywhere with real llama-server processes (issue 38 item 3): N patched llama-servers on one
# machine serve a large set file through --trie-set-dir with one --trie-compiled-dir, versus one server compiling
# alone. (scripts/bench-shared.sh measures the same with examples/shared_serve.rs processes, without a model.)
#
#   scripts/bench-shared-llama.sh [SET_FILE] [N]   # default: the npm package names (scripts/fetch-npm-names.sh), N = 4
#
# Steps, one server at a time except in step 3 (at most N servers at once; every one is killed on exit, the
# temporary folder with the compiled directory removed):
#   0. base: a server without libtrie sets in use serves one unconstrained request: the model's and llama.cpp's own
#      memory (weights mapped from the GGUF, KV cache, compute buffers), the part every server pays anyway.
#   1. lone: a server without --trie-compiled-dir serves one constrained request naming the set
#      ({"trie": {"set": "big"}}): it compiles the set onto its heap.
#   2. p0: a server with --trie-compiled-dir serves the request: it compiles, saves the file atomically, maps it.
#   3. p1..p(N-1), started one after the other once p0 has served, each serves the request: they map the file.
#      Each server's log must say "libtrie: mapped the set 'big' from the compiled directory, not compiled" (p0's
#      and lone's: "libtrie: compiled the set 'big'"); the script fails otherwise.
# After its request each server's memory is read from /proc/PID/smaps_rollup (Pss, Rss, Pss_Anon, Pss_File) and
# split by mapping from /proc/PID/smaps: the model's GGUF file, the compiled .trie file, anonymous memory. The
# time to first response is the constrained request's wall time (curl), set resolution + decode; the log gives
# the compile or mapping time alone.
#
# Servers: -t 1 (one thread: the machine may be shared), -c 512, -np 1, -nr (--no-repack: the weights stay the
# mapped GGUF pages, shared by every server, instead of a repacked heap copy each), greedy, n_predict 48.
# Model: Qwen2.5-Coder-0.5B-Instruct Q4_K_M (scripts/fetch-model.sh qwen2.5-coder-0.5b; qwen2 vocabulary).
#
# Output: one JSON line per server and a summary line, on stdout and in $OUT (default
# docs/bench/shared-llama-server.jsonl, overwritten). The summary: total PSS of the N servers / PSS of the lone
# server, with and without the model's file pages (the ratio issue 38 bounds at 1.3), the same if every page of the
# compiled file and of the model were resident (PSS counts only the pages touched), and whether p1.. compiled.
#
# Environment: TRIE_CACHE (as scripts/fetch-llama-server.sh and scripts/fetch-model.sh), OUT, LLAMA_SERVER (a
# llama-server binary built with libtrie, else scripts/fetch-llama-server.sh builds or finds one), MODEL (a GGUF).
# Times depend on the machine's load: the load average is printed with every run; memory is what this measures.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/llama-server-lib.sh
source "$REPO/scripts/llama-server-lib.sh"   # free_port, stop_server
SET="${1:-$("$REPO/scripts/fetch-npm-names.sh")}"
N="${2:-4}"
OUT="${OUT:-$REPO/docs/bench/shared-llama-server.jsonl}"
BIN="${LLAMA_SERVER:-$("$REPO/scripts/fetch-llama-server.sh" | tail -1)}"
MODEL="${MODEL:-$("$REPO/scripts/fetch-model.sh" qwen2.5-coder-0.5b | tail -1)}"
log() { printf '[bench-shared-llama] %s\n' "$*" >&2; }

WORK="$(mktemp -d "${TMPDIR:-/tmp}/libtrie-bench-shared-llama.XXXXXX")"
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do stop_server "$p"; done
  rm -rf "$WORK"
}
trap cleanup EXIT INT TERM
mkdir -p "$WORK/sets"
cp "$SET" "$WORK/sets/big.txt"   # a regular file: links out of the set directory are refused
CDIR="$WORK/compiled"
: > "$WORK/rows.jsonl"

# start NAME [ARGS...]: starts a server (log $WORK/NAME.log), waits for /health; sets PID and PORT.
start() {
  local name="$1"; shift
  PORT="$(free_port)"
  "$BIN" -m "$MODEL" --host 127.0.0.1 --port "$PORT" -t 1 -c 512 -np 1 -nr --no-webui --seed 1 \
    --trie-set-dir "$WORK/sets" "$@" >"$WORK/$name.log" 2>&1 &
  PID=$!
  PIDS+=("$PID")
  for _ in $(seq 1 600); do
    curl -sf "127.0.0.1:$PORT/health" >/dev/null 2>&1 && return 0
    kill -0 "$PID" 2>/dev/null || { log "$name exited:"; tail -20 "$WORK/$name.log" >&2; exit 1; }
    sleep 0.5
  done
  log "$name not healthy after 300 s"; exit 1
}

PROMPT='The npm package name for a library that parses command-line arguments is: '
# request NAME PORT TRIE(true|false): one /completion; writes $WORK/NAME.resp, prints the wall seconds.
request() {
  local body
  body=$(python3 -c 'import json, sys
d = {"prompt": sys.argv[1], "n_predict": 48, "temperature": 0, "cache_prompt": False}
if sys.argv[2] == "true": d["trie"] = {"set": "big"}
print(json.dumps(d))' "$PROMPT" "$3")
  curl -sS -o "$WORK/$1.resp" -w '%{time_total}' "127.0.0.1:$2/completion" -H 'Content-Type: application/json' \
    -d "$body"
}

# measure NAME PID PORT SECONDS CONSTRAINED COMPILED_DIR: appends the server's JSON line to rows.jsonl.
measure() {
  python3 - "$@" "$MODEL" "$WORK" "$WORK/sets/big.txt" <<'EOF' >>"$WORK/rows.jsonl"
import json, os, re, sys
name, pid, port, seconds, constrained, cdir, model, work, setfile = sys.argv[1:]
roll = {}
for line in open(f"/proc/{pid}/smaps_rollup"):
    m = re.match(r"(\w+):\s+(\d+) kB", line)
    if m:
        roll[m.group(1)] = int(m.group(2))
parts = {"model": 0, "trie": 0, "anon": 0, "other_file": 0}
path = ""
for line in open(f"/proc/{pid}/smaps"):
    head = re.match(r"^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \d+\s*(.*)$", line)
    if head:
        path = head.group(1).strip()
        continue
    if line.startswith("Pss:"):
        kib = int(line.split()[1])
        if path == os.path.realpath(model):
            parts["model"] += kib
        elif path.endswith(".trie"):
            parts["trie"] += kib
        elif path == "" or path.startswith("["):
            parts["anon"] += kib
        else:
            parts["other_file"] += kib
text = json.load(open(f"{work}/{name}.resp"))["content"]
members = set(open(setfile, encoding="utf-8").read().split("\n"))
logtext = open(f"{work}/{name}.log", errors="replace").read()
comp = re.search(r"libtrie: compiled the set 'big': (\d+) strings, (\d+) states, ([\d.]+) MB, in ([\d.]+) ms", logtext)
mapped = re.search(r"libtrie: mapped the set 'big' from the compiled directory, not compiled: (\d+) strings, "
                   r"(\d+) states, in ([\d.]+) ms", logtext)
row = {
    "server": name, "pid": int(pid), "compiled_dir": cdir == "yes", "constrained": constrained == "true",
    "log": "compiled" if comp else "mapped" if mapped else "none",
    "log_ms": float(comp.group(4)) if comp else float(mapped.group(3)) if mapped else None,
    "first_response_s": float(seconds), "output": text, "output_is_member": text in members,
    "pss_kib": roll["Pss"], "rss_kib": roll["Rss"], "pss_anon_kib": roll.get("Pss_Anon"),
    "pss_file_kib": roll.get("Pss_File"), "pss_model_file_kib": parts["model"], "pss_trie_file_kib": parts["trie"],
    "pss_anon_maps_kib": parts["anon"], "pss_other_files_kib": parts["other_file"],
    "pss_without_model_kib": roll["Pss"] - parts["model"],
    "load": open("/proc/loadavg").read().split()[:3],
}
print(json.dumps(row))
EOF
  tail -1 "$WORK/rows.jsonl" >&2
}

log "load average before: $(cut -d' ' -f1-3 /proc/loadavg); set: $SET ($(wc -l <"$SET") lines); N = $N"
log "server: $BIN; model: $MODEL"

# 0. the model alone: an unconstrained request
start base; secs=$(request base "$PORT" false); measure base "$PID" "$PORT" "$secs" false no
stop_server "$PID"

# 1. one server compiling alone (no compiled directory)
start lone; secs=$(request lone "$PORT" true); measure lone "$PID" "$PORT" "$secs" true no
stop_server "$PID"

# 2. + 3. N servers with the compiled directory: p0 compiles and saves, the others map
declare -a SPIDS SPORTS
for i in $(seq 0 $((N - 1))); do
  start "p$i" --trie-compiled-dir "$CDIR"
  SPIDS[i]=$PID; SPORTS[i]=$PORT
  secs=$(request "p$i" "$PORT" true)
  echo "$secs" >"$WORK/p$i.secs"
done
for i in $(seq 0 $((N - 1))); do
  measure "p$i" "${SPIDS[i]}" "${SPORTS[i]}" "$(cat "$WORK/p$i.secs")" true yes
done
file=$(ls "$CDIR"/*.trie)
file_kib=$(( $(stat -c %s "$file") / 1024 ))
log "compiled file: $(basename "$file") $file_kib KiB"

model_kib=$(( $(stat -L -c %s "$MODEL") / 1024 ))
python3 - "$WORK/rows.jsonl" "$N" "$file_kib" "$(basename "$file")" "$model_kib" <<'EOF' >"$WORK/summary.json"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
n, file_kib, file_name, model_kib = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
by = {r["server"]: r for r in rows}
lone, base = by["lone"], by["base"]
shared = [by[f"p{i}"] for i in range(n)]
total = sum(r["pss_kib"] for r in shared)
total_wo = sum(r["pss_without_model_kib"] for r in shared)
# The worst case PSS cannot show: every page of the compiled file and of the model resident (once: page cache),
# plus each server's own anonymous memory and its share of the other files (libraries).
own = sum(r["pss_anon_maps_kib"] + r["pss_other_files_kib"] for r in shared)
lone_all = lone["pss_anon_maps_kib"] + lone["pss_other_files_kib"] + model_kib
print(json.dumps({
    "summary": True, "n": n, "threads": 1, "compiled_file": file_name, "compiled_file_kib": file_kib,
    "lone_pss_kib": lone["pss_kib"], "total_pss_kib": total, "ratio": round(total / lone["pss_kib"], 3),
    "lone_pss_without_model_kib": lone["pss_without_model_kib"], "total_pss_without_model_kib": total_wo,
    "ratio_without_model": round(total_wo / lone["pss_without_model_kib"], 3),
    "model_file_kib": model_kib, "all_pages_resident_kib": own + file_kib + model_kib,
    "ratio_all_pages_resident": round((own + file_kib + model_kib) / lone_all, 3),
    "all_pages_resident_without_model_kib": own + file_kib,
    "ratio_all_pages_resident_without_model": round((own + file_kib) / (lone_all - model_kib), 3),
    "base_pss_kib": base["pss_kib"], "base_pss_without_model_kib": base["pss_without_model_kib"],
    "bound": 1.3, "later_compiled": [r["log"] != "mapped" for r in shared[1:]],
    "all_outputs_members": all(r["output_is_member"] for r in rows if r["constrained"]),
    "load_after": open("/proc/loadavg").read().split()[:3],
}))
EOF
cat "$WORK/rows.jsonl" "$WORK/summary.json" | tee "$OUT"
log "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$WORK/summary.json" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
bad = [f"p{i + 1} compiled" for i, c in enumerate(s["later_compiled"]) if c]
if not s["all_outputs_members"]:
    bad.append("a constrained output is not a member")
if bad:
    sys.exit("FAILED: " + ", ".join(bad))
EOF
