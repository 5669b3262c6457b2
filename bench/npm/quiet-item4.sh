#!/usr/bin/env bash
# Issue 38, item 4: the quiet run of the large-layout targets, a previous layout against a new one (OLD_COMMIT,
# NEW_COMMIT: by default main 189d39f, packed widths and unary rows derived, against branch `rows`, branching states
# with short rows keeping only their byte children), alternately, in one run. Run it ALONE on the machine (nothing
# else building or measuring).
#
# It only measures: the two `compile_lines` binaries are prebuilt (see BIN below; `--build` rebuilds them, about
# 10 minutes on 2 cores, from a `git worktree` of each commit). It takes about 1.5 to 3 minutes on 2 cores:
# all 4,499,322 npm names twice per layout (compile, peak RSS, sizes per section, save, 5 eager and 5 lazy loads,
# masks and first use of the states of 200 random decodes, `advance`), then the 100,000 cities three times per
# layout (and whether the two layouts save byte-identical files). It prints a markdown table and the load average
# before and after each run; raw JSON lines go to $OUT/item4.jsonl.
#
# Usage: bench/npm/quiet-item4.sh [--build]
#   BIN=<repo>/target/item4            where old/compile_lines and new/compile_lines are
#   VOCAB, NAMES, CITIES               the qwen2 GGUF, the npm names, 100,000 city names (defaults: the repo's
#                                      fetch scripts; the 2026-12-06 run used the 100,000 cities of /work/vcache)
#   OUT=/tmp/quiet-item4               results and the saved files (about 700 MB while running, removed after)
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${BIN:-$REPO/target/item4}
VOCAB=${VOCAB:-$("$REPO/scripts/fetch-assets.sh" | tail -n 1)/vocab/ggml-vocab-qwen2.gguf}
NAMES=${NAMES:-$("$REPO/scripts/fetch-npm-names.sh" | tail -n 1)}
if [[ -z "${CITIES:-}" ]]; then  # 100,000 GeoNames city names: the first 100,000 lines of scripts/fetch-cities.sh's
    CITIES="${TRIE_CACHE:-$REPO/.cache}/data/cities-100000.txt"
    [[ -s "$CITIES" ]] || head -n 100000 "$("$REPO/scripts/fetch-cities.sh" | tail -n 1)" >"$CITIES"
fi
OUT=${OUT:-/tmp/quiet-item4}
OLD_COMMIT=${OLD_COMMIT:-189d39f}
NEW_COMMIT=${NEW_COMMIT:-rows}

if [[ "${1:-}" == "--build" ]]; then
    for which in old new; do
        commit=$OLD_COMMIT; [[ $which == new ]] && commit=$NEW_COMMIT
        src=$(mktemp -d /tmp/item4-src-XXXX)
        git -C "$REPO" worktree add --detach "$src" "$commit" >/dev/null
        (cd "$src" && CARGO_TARGET_DIR="$BIN/target-$which" cargo build --release --example compile_lines -q)
        mkdir -p "$BIN/$which"
        cp "$BIN/target-$which/release/examples/compile_lines" "$BIN/$which/compile_lines"
        git -C "$REPO" worktree remove --force "$src"
    done
fi
for which in old new; do
    [[ -x "$BIN/$which/compile_lines" ]] || { echo "missing $BIN/$which/compile_lines (run with --build)" >&2; exit 1; }
done
for f in "$VOCAB" "$NAMES" "$CITIES"; do [[ -r "$f" ]] || { echo "missing $f" >&2; exit 1; }; done
mkdir -p "$OUT"
: > "$OUT/item4.jsonl"
echo "start $(date -u +%FT%TZ), load average $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"

# run LABEL WHICH SET FILE: one compile_lines run, its JSON line tagged with the layout, set and load averages.
run() {
    local which=$1 set=$2 file=$3 save=$4
    local before after line
    before=$(cut -d' ' -f1 /proc/loadavg)
    line=$(timeout 300 "$BIN/$which/compile_lines" "$VOCAB" "$file" --save "$save")
    after=$(cut -d' ' -f1 /proc/loadavg)
    echo "{\"layout\":\"$which\",\"set\":\"$set\",\"load_before\":$before,\"load_after\":$after,\"at\":\"$(date -u +%TZ)\",\"run\":$line}" \
        >> "$OUT/item4.jsonl"
    echo "  $(date -u +%TZ) $which $set done (load $before -> $after)"
}

for round in 1 2; do
    for which in old new; do
        run "$which" npm "$NAMES" "$OUT/$which-npm.trie"
        rm -f "$OUT/$which-npm.trie"
    done
done
for round in 1 2 3; do
    for which in old new; do
        run "$which" cities "$CITIES" "$OUT/$which-cities.trie"
    done
done
if cmp -s "$OUT/old-cities.trie" "$OUT/new-cities.trie"; then same=yes; else same=NO; fi
rm -f "$OUT/old-cities.trie" "$OUT/new-cities.trie"
echo "end $(date -u +%FT%TZ), load average $(cut -d' ' -f1-3 /proc/loadavg)"

OLD_COMMIT=$OLD_COMMIT NEW_COMMIT=$NEW_COMMIT python3 "$REPO/bench/npm/item4-table.py" "$OUT/item4.jsonl" "$same"
