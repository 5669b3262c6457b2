#!/usr/bin/env bash
# Jump-forward benchmark of the llama.cpp harness: model steps and wall time per answer, unconstrained vs libtrie vs
# libtrie with jump-forward (forced runs decoded as one batch, trie_draft), on four set tasks, and the beam mode with
# and without jump-forward. Not part of the test command.
#
#   scripts/bench-jump.sh [--tasks "tools cities npm calls"] [--threads 1] [--n-predict 48] [--no-beam]
#   scripts/bench-jump.sh --server [--tasks ...] [--threads 1] [--n-predict 48]
#
# --server: the same tasks through llama-server (scripts/fetch-llama-server.sh) instead of the harness: two servers
# with the task sets in their --trie-set-dir, two with --trie-jump-forward 0 (unconstrained; libtrie), one with
# jump-forward on (the set's forced runs proposed as the slot's speculative draft and verified in one batch), one
# server per mode so that each keeps its prompt cache; scripts/bench-jump-server.py sends each prompt in the three
# modes in turn (batch 1, greedy).
# Writes docs/bench/jump-forward-server.jsonl.
#
# Tasks (each: one choices file, its prompts with gold answers, few-shot turns where the data has them):
#   tools   the demo's 4,000 tool names (data/tools.txt, data/tools-prompts.tsv, data/tools-shots.tsv)
#   cities  GeoNames cities, "Name, CC" (179,347 strings, scripts/fetch-cities.sh), 8 prompts below
#   npm     npm package names: every 20th of the 4,499,322 names plus the gold answers (scripts/fetch-npm-names.sh)
#   calls   tool calls with arguments: {"name": "T", "arguments": {"city": "C"}} for 400 tools (weather, maps first) x
#           25 cities (10,000 calls), 8 prompts below
# Every run is batch 1 (one answer at a time: per-answer latency), greedy, -t 1 by default (a 2-core shared machine:
# -t 2 collapses), with the load average (uptime) recorded before and after each run.
#
# Writes docs/bench/jump-forward.jsonl (the harness's JSON lines plus task and load) and prints a Markdown table.
# Environment: TRIE_MODEL (default smollm2; see scripts/fetch-model.sh), HARNESS (a built trie-llama; default:
# scripts/build-harness.sh), TRIE_CACHE.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
TASKS="tools cities npm calls"; THREADS=1; NPRED=48; BEAM=1; SERVER=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --tasks) TASKS="$2"; shift ;;
    --threads) THREADS="$2"; shift ;;
    --n-predict) NPRED="$2"; shift ;;
    --no-beam) BEAM=0 ;;
    --server) SERVER=1 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
log() { printf '[bench-jump] %s\n' "$*" >&2; }
MODEL="$(scripts/fetch-model.sh "${TRIE_MODEL:-smollm2}" | tail -n 1)"
if [[ "$SERVER" == 1 ]]; then
  BIN="$(scripts/fetch-llama-server.sh | tail -n 1)"
elif [[ -z "${HARNESS:-}" ]]; then
  LLAMA_PREFIX="$(scripts/fetch-llama.sh | tail -n 1)"; export LLAMA_PREFIX
  nice -n 10 cargo build --release -q
  HARNESS="$(scripts/build-harness.sh | tail -n 1)"
fi
TMP="$(mktemp -d)"
OUT=docs/bench/jump-forward.jsonl
[[ "$SERVER" == 1 ]] && OUT=docs/bench/jump-forward-server.jsonl
: > "$OUT"
PIDS=()
# shellcheck source=scripts/llama-server-lib.sh
source scripts/llama-server-lib.sh   # free_port, stop_server
trap 'for p in "${PIDS[@]}"; do stop_server "$p"; done; rm -rf "$TMP"' EXIT

# ---- task data ---------------------------------------------------------------------------------------------------
make_task() {
  local task="$1" dir="$TMP/$1"
  mkdir -p "$dir"
  : > "$dir/shots.tsv"
  case "$task" in
    tools)
      cp data/tools.txt "$dir/choices.txt"; cp data/tools-prompts.tsv "$dir/prompts.tsv"
      cp data/tools-shots.tsv "$dir/shots.tsv"
      echo "Answer with exactly one of the allowed tool names." > "$dir/system" ;;
    cities)
      cp "$(scripts/fetch-cities.sh | tail -n 1)" "$dir/choices.txt"
      cat > "$dir/prompts.tsv" <<'EOF'
What is the capital of Japan? Answer as "City, CC" (ISO country code).	Tokyo, JP
Which Bavarian city hosts the Oktoberfest? Answer as "City, CC" (ISO country code).	Munich, DE
What is the largest city of Brazil? Answer as "City, CC" (ISO country code).	São Paulo, BR
Where is the Eiffel Tower? Answer as "City, CC" (ISO country code).	Paris, FR
What is the capital of Egypt? Answer as "City, CC" (ISO country code).	Cairo, EG
Which city is home to the Golden Gate Bridge? Answer as "City, CC" (ISO country code).	San Francisco, US
What is the capital of Australia? Answer as "City, CC" (ISO country code).	Canberra, AU
Which Spanish city is home to the Sagrada Família? Answer as "City, CC" (ISO country code).	Barcelona, ES
EOF
      printf 'What is the capital of Italy? Answer as "City, CC" (ISO country code).\tRome, IT\n' > "$dir/shots.tsv"
      echo "Answer with exactly one city, written as its name, a comma and its country code." > "$dir/system" ;;
    npm)
      local names; names="$(scripts/fetch-npm-names.sh | tail -n 1)"
      cat > "$dir/prompts.tsv" <<'EOF'
Which npm package is the core library of React? Reply with the package name only.	react
Which npm package is the Express web framework for Node.js? Reply with the package name only.	express
Which npm package is the lodash utility library? Reply with the package name only.	lodash
Which npm package is the TypeScript compiler? Reply with the package name only.	typescript
Which npm package is the webpack module bundler? Reply with the package name only.	webpack
Which npm package is the Axios HTTP client? Reply with the package name only.	axios
Which npm package is the ESLint linter? Reply with the package name only.	eslint
Which npm package is the Jest test runner? Reply with the package name only.	jest
EOF
      printf 'Which npm package is the Vue.js framework? Reply with the package name only.\tvue\n' > "$dir/shots.tsv"
      { awk 'NR % 20 == 1' "$names"; cut -f2 "$dir/prompts.tsv"; } | LC_ALL=C sort -u > "$dir/choices.txt"
      echo "Answer with exactly one npm package name." > "$dir/system" ;;
    calls)
      python3 - "$dir" <<'PY'
import json, sys
d = sys.argv[1]
tools = [l.strip() for l in open("data/tools.txt", encoding="utf-8") if l.strip()]
# the weather and maps tools first (the prompts' answers), then others up to 400
keep = [t for t in tools if t.split(".")[0] in ("weather", "maps")]
keep = (keep + [t for t in tools if t not in keep])[:400]
cities = ["Paris", "London", "Berlin", "Madrid", "Rome", "Tokyo", "Osaka", "Seoul", "Beijing", "Delhi", "Cairo",
          "Lagos", "Nairobi", "Lima", "Bogotá", "São Paulo", "Mexico City", "New York", "Chicago", "Toronto",
          "Sydney", "Zürich", "Kraków", "İstanbul", "Reykjavík"]
with open(f"{d}/choices.txt", "w", encoding="utf-8") as f:
    for t in sorted(set(keep)):
        for c in cities:
            f.write(json.dumps({"name": t, "arguments": {"city": c}}, ensure_ascii=False) + "\n")
def call(t, c):
    return json.dumps({"name": t, "arguments": {"city": c}}, ensure_ascii=False)
prompts = [("What will the weather be like in Berlin this weekend?", "weather.get_forecast", "Berlin"),
           ("Is it going to rain in Tokyo tomorrow?", "weather.get_forecast", "Tokyo"),
           ("List the places worth visiting in Chicago.", "maps.list_places", "Chicago"),
           ("Are there any weather alerts for Madrid?", "weather.search_alerts", "Madrid"),
           ("What is the time zone of Seoul?", "maps.search_timezones", "Seoul"),
           ("What's the forecast for Reykjavík?", "weather.get_forecast", "Reykjavík"),
           ("Find the coordinates of Toronto.", "maps.get_geocode", "Toronto"),
           ("Show me places to see in Kraków.", "maps.list_places", "Kraków")]
with open(f"{d}/prompts.tsv", "w", encoding="utf-8") as f:
    for p, t, c in prompts:
        f.write(f"{p} Reply with one JSON tool call.\t{call(t, c)}\n")
with open(f"{d}/shots.tsv", "w", encoding="utf-8") as f:
    f.write(f"Will it be sunny in Paris on Monday? Reply with one JSON tool call.\t{call('weather.get_forecast', 'Paris')}\n")
PY
      echo "Call exactly one tool: reply with a JSON object with its name and arguments." > "$dir/system" ;;
    *) echo "unknown task $task" >&2; exit 2 ;;
  esac
}

run_harness() {  # task modes extra-args...
  local task="$1" modes="$2"; shift 2
  local dir="$TMP/$task" load0 load1 shots=()
  [[ -s "$dir/shots.tsv" ]] && shots=(--shots "$dir/shots.tsv")
  load0="$(cut -d' ' -f1-3 /proc/loadavg)"
  log "$task: $modes (load $load0)"
  "$HARNESS" --model "$MODEL" --choices "$dir/choices.txt" --prompts "$dir/prompts.tsv" "${shots[@]}" \
    --system "$(cat "$dir/system")" --mode "$modes" --batch 1 --threads "$THREADS" --n-predict "$NPRED" --json \
    "$@" > "$dir/$modes.log" 2>&1 || { cat "$dir/$modes.log" >&2; exit 1; }
  load1="$(cut -d' ' -f1-3 /proc/loadavg)"
  grep -v '^{' "$dir/$modes.log" | sed -n '/^mode /,$p' >&2
  grep '^{' "$dir/$modes.log" | python3 -c '
import json, sys
for l in sys.stdin:
    r = json.loads(l); r["task"] = sys.argv[1]; r["load_before"] = sys.argv[2]; r["load_after"] = sys.argv[3]
    print(json.dumps(r, ensure_ascii=False))' "$task" "$load0" "$load1" >> "$OUT"
}

if [[ "$SERVER" == 1 ]]; then
  mkdir -p "$TMP/sets"
  for task in $TASKS; do make_task "$task"; cp "$TMP/$task/choices.txt" "$TMP/sets/$task.txt"; done
  declare -A URL
  for m in plain trie jump; do
    port="$(free_port)"; jf=0; [[ "$m" == jump ]] && jf=16
    "$BIN" -m "$MODEL" --host 127.0.0.1 --port "$port" -np 1 -c 4096 -t "$THREADS" -nr --no-webui --seed 1 \
      --trie-set-dir "$TMP/sets" --trie-max-file-bytes 100000000 --trie-jump-forward "$jf" > "$TMP/server-$m.log" 2>&1 &
    PIDS+=($!)
    URL[$m]="http://127.0.0.1:$port"
  done
  for m in plain trie jump; do
    for _ in $(seq 1 600); do curl -sf "${URL[$m]}/health" > /dev/null 2>&1 && break; sleep 0.5; done
  done
  for task in $TASKS; do
    load0="$(cut -d' ' -f1-3 /proc/loadavg)"
    log "$task (server): $(wc -l < "$TMP/$task/choices.txt") choices (load $load0)"
    python3 scripts/bench-jump-server.py --plain "${URL[plain]}" --trie "${URL[trie]}" --jump "${URL[jump]}" --task "$task" --set "$task" \
      --dir "$TMP/$task" --n-predict "$NPRED" > "$TMP/$task.server.jsonl"
    load1="$(cut -d' ' -f1-3 /proc/loadavg)"
    python3 -c '
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l); r["load_before"] = sys.argv[2]; r["load_after"] = sys.argv[3]; r["threads"] = int(sys.argv[4])
    print(json.dumps(r, ensure_ascii=False))' "$TMP/$task.server.jsonl" "$load0" "$load1" "$THREADS" >> "$OUT"
  done
  python3 - "$OUT" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("| task | K | mode | valid | accuracy | model steps / answer | tokens / answer | draft accepted / proposed | "
      "prefill ms / answer | decode ms / answer | wall ms / answer | load before → after |")
print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
for r in rows:
    n = r["n"] or 1
    dr = f"{r['accepted']}/{r['draft']}" if r["draft"] else "–"
    print(f"| {r['task']} | {r['k']:,} | {r['mode']} | {r['valid']}/{r['n']} | {100 * r['correct'] / n:.0f} % | "
          f"{r['steps'] / n:.2f} | {r['tokens'] / n:.2f} | {dr} | {r['prefill_ms'] / n:.0f} | {r['decode_ms'] / n:.0f} | "
          f"{r['wall_ms'] / n:.0f} | {r['load_before']} → {r['load_after']} |")
PY
  exit 0
fi

for task in $TASKS; do
  make_task "$task"
  log "$task: $(wc -l < "$TMP/$task/choices.txt") choices"
  run_harness "$task" unconstrained,trie,trie-jump --require-valid
  if [[ "$BEAM" == 1 && "$task" == tools ]]; then
    run_harness "$task" beam,beam-jump --beam 4 --require-valid
  fi
done

python3 - "$OUT" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("| task | K | mode | valid | accuracy | model steps / answer | tokens / answer | prefill ms / answer | "
      "decode ms / answer | total ms / answer | load before → after |")
print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|")
for r in rows:
    n = r["n"] or 1
    print(f"| {r['task']} | {r['k']:,} | {r['mode']} | {r['valid']}/{r['n']} | {100 * r['accuracy']:.0f} % | "
          f"{r['steps'] / n:.2f} | {r['answer_tokens'] / n:.2f} | {r['prefill_ms'] / n:.0f} | {r['gen_ms'] / n:.0f} | "
          f"{(r['prefill_ms'] + r['gen_ms']) / n:.0f} | {r['load_before']} → {r['load_after']} |")
PY
