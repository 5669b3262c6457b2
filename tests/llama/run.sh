#!/usr/bin/env bash
# Integration test: libtrie's llama.cpp sampler stage on a real model (SmolLM2-135M-Instruct).
#
#   tests/llama/run.sh
#
# Fetches and builds what it needs (cached: see scripts/fetch-llama.sh, scripts/fetch-model.sh), then runs the
# harness and checks its outputs independently (tests/llama/check.py reads the harness's --out file and the
# choice file and tests exact byte membership):
#   1. 10,000 tool names, trie, greedy, batch 4: every output is a member
#   2. the UTF-8 city set (Japanese, Korean, Cyrillic, accents...), trie: every output is a member
#   3. the UTF-8 city set, trie, sampling at temperature 1.5 with 3 seeds: every output is a member
#   4. 20 tool names, trie and gbnf: both 100 % valid (checked per mode), and identical greedy outputs
#   5. --require-valid exits 0 on the 10,000-name run (done in 1)
#   6. 20 tool names, beam search over trie states with few-shot turns: every output is a member
#   0. trie-llama-selftest: the header's two apply paths, accept/clone/reset, on the model's real vocabulary;
#      is_trie across translation units; fail closed (invalid / empty / finished states) with the error reported
#   P. the llama.cpp build is portable (unless TRIE_LLAMA_CPU_FLAGS overrides it): no -march=native in its compile
#      commands and no AMX instruction in libggml-cpu.so, so results do not depend on the machine's CPU; and
#      scripts/fetch-llama-server.sh configures the same GGML/CUDA flags (scripts/llama-build-flags.sh)
# Prints "N passed, N failed" last; exits 1 if anything failed.
set -uo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$REPO"
TMP="$(mktemp -d "${TMPDIR:-/tmp}/trie-llama-test.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); printf 'PASS  %s\n' "$*"; }
ko() { fail=$((fail + 1)); printf 'FAIL  %s\n' "$*"; }

set -e
LLAMA_PREFIX="$(scripts/fetch-llama.sh | tail -n 1)"
export LLAMA_PREFIX
MODEL="$(scripts/fetch-model.sh "${TRIE_MODEL:-smollm2}" | tail -n 1)"
if [[ "${TRIE_SKIP_CARGO:-0}" != 1 ]]; then
  echo "[test] cargo build --release" >&2
  cargo build --release -q
fi
HARNESS="$(scripts/build-harness.sh | tail -n 1)"
set +e

CHECK=(python3 "$REPO/tests/llama/check.py")
NTOOLS="$(grep -c . data/tools-prompts.tsv)"

# ---- P: portable llama.cpp build ---------------------------------------------------------------------------
# Both llama.cpp builds (this one and llama-server's) take their ISA and CUDA flags from scripts/llama-build-flags.sh.
flags_lib="$(scripts/fetch-llama.sh --print-cmake-args | grep -E '^-D(GGML_|CMAKE_CUDA)')"
flags_srv="$(scripts/fetch-llama-server.sh --print-cmake-args | grep -E '^-D(GGML_|CMAKE_CUDA)')"
if [[ -n "$flags_lib" && "$flags_lib" == "$flags_srv" ]]; then
  ok "portable build: fetch-llama.sh and fetch-llama-server.sh use the same $(wc -l <<<"$flags_lib") GGML/CUDA flags"
else ko "portable build: fetch-llama.sh and fetch-llama-server.sh flags differ"; diff <(echo "$flags_lib") <(echo "$flags_srv"); fi
if [[ -z "${TRIE_LLAMA_CPU_FLAGS+set}" && "$(uname -m)" == x86_64 ]]; then
  LBUILD="${TRIE_CACHE:-$REPO/.cache}/llama.cpp/build"
  NINJA="${TRIE_CACHE:-$REPO/.cache}/venv/bin/ninja"
  cmds="$("$NINJA" -C "$LBUILD" -t commands 2>/dev/null)"
  if [[ -n "$cmds" ]] && ! grep -q -- '-march=native' <<<"$cmds" && grep -q -- '-mavx2' <<<"$cmds"; then
    ok "portable build: no -march=native in llama.cpp's compile commands (explicit -mavx2 ISA list)"
  else ko "portable build: compile commands missing or using -march=native"; fi
  GGML_CPU="$LLAMA_PREFIX/lib/libggml-cpu.so"
  if ! command -v objdump >/dev/null; then
    echo "SKIP  portable build: no objdump for the AMX instruction check"
  else
    n_amx=missing
    if [[ -f "$GGML_CPU" ]]; then
      n_amx="$(objdump -d --no-show-raw-insn "$GGML_CPU" | grep -c -E '\s(tilezero|tileloadd|tileloaddt1|tdpb[a-z]+|tdpbf16ps)\s' || true)"
    fi
    if [[ "$n_amx" == 0 ]]; then ok "portable build: no AMX instruction (tilezero, tileloadd, tdpb*) in libggml-cpu.so"
    else ko "portable build: $GGML_CPU: $n_amx AMX instructions"; fi
  fi
fi

# ---- 0: the sampler stage itself (C99 build of include/trie_llama.h) on the model's vocabulary ----------------
SELFTEST="$(dirname "$HARNESS")/trie-llama-selftest"
if "$SELFTEST" "$MODEL" | sed 's/^/    /'; then ok "selftest: apply paths, accept, clone, reset on the real vocabulary"
else ko "selftest"; fi
# The README's llama.cpp example (examples/llama/quickstart.c), as a reader would run it: its answer is a member.
if "$(dirname "$HARNESS")/trie-llama-quickstart" "$MODEL" | sed 's/^/    /'; then ok "README example: examples/llama/quickstart.c"
else ko "README example: examples/llama/quickstart.c"; fi
COMMON=(--model "$MODEL" --n-predict 48 --quiet --json)

# ---- 1 + 5: 10,000 names ---------------------------------------------------------------------------------------
python3 scripts/gen-data.py tools --count 10000 > "$TMP/tools10k.txt"
echo "[test] 10,000 tool names, trie, greedy" >&2
"$HARNESS" "${COMMON[@]}" --choices "$TMP/tools10k.txt" --prompts data/tools-prompts.tsv --mode trie \
  --batch 4 --require-valid --out "$TMP/t1.tsv" > "$TMP/t1.log" 2>&1
rc=$?
grep -E '^(trie|\{)' "$TMP/t1.log" | sed 's/^/    /'
if [[ $rc -eq 0 ]]; then ok "10k: harness --require-valid exit 0"; else ko "10k: harness exit $rc"; tail -5 "$TMP/t1.log"; fi
if "${CHECK[@]}" "$TMP/tools10k.txt" "$TMP/t1.tsv" trie "$NTOOLS"; then ok "10k: every trie output is a member"
else ko "10k: trie outputs not all members"; fi

# ---- 2: UTF-8 set, greedy ----------------------------------------------------------------------------------
echo "[test] UTF-8 cities, trie, greedy" >&2
"$HARNESS" "${COMMON[@]}" --choices data/cities-utf8.txt --prompts data/cities-prompts.tsv --mode trie \
  --batch 4 --out "$TMP/t2.tsv" > "$TMP/t2.log" 2>&1
rc=$?
grep -E '^(trie|\{)' "$TMP/t2.log" | sed 's/^/    /'
if [[ $rc -eq 0 ]] && "${CHECK[@]}" data/cities-utf8.txt "$TMP/t2.tsv" trie 8; then
  ok "utf-8: every trie output is a member"
else ko "utf-8 greedy (harness exit $rc)"; tail -5 "$TMP/t2.log"; fi

# ---- 3: UTF-8 set, sampling --------------------------------------------------------------------------------
for seed in 1 2 3; do
  "$HARNESS" "${COMMON[@]}" --choices data/cities-utf8.txt --prompts data/cities-prompts.tsv --mode trie \
    --batch 8 --temp 1.5 --seed "$seed" --out "$TMP/t3-$seed.tsv" > "$TMP/t3-$seed.log" 2>&1
  rc=$?
  if [[ $rc -eq 0 ]] && "${CHECK[@]}" data/cities-utf8.txt "$TMP/t3-$seed.tsv" trie 8; then
    ok "utf-8 sampling T=1.5 seed $seed: every trie output is a member"
  else ko "utf-8 sampling seed $seed (harness exit $rc)"; tail -5 "$TMP/t3-$seed.log"; fi
done

# ---- 4: small K, trie vs gbnf ------------------------------------------------------------------------------
python3 - "$REPO/data/tools.txt" "$REPO/data/tools-prompts.tsv" > "$TMP/tools20.txt" <<'PY'
import sys
names = [l.rstrip("\n") for l in open(sys.argv[1], encoding="utf-8") if l.strip()]
gold = [l.rstrip("\n").split("\t")[1] for l in open(sys.argv[2], encoding="utf-8") if "\t" in l]
out = list(dict.fromkeys(gold))
for n in names:
    if len(out) >= 20:
        break
    if n not in out:
        out.append(n)
print("\n".join(sorted(out)))
PY
echo "[test] 20 tool names, trie vs gbnf" >&2
"$HARNESS" "${COMMON[@]}" --choices "$TMP/tools20.txt" --prompts data/tools-prompts.tsv --mode trie \
  --batch 4 --out "$TMP/t4-trie.tsv" > "$TMP/t4-trie.log" 2>&1
rc=$?
grep -E '^(trie|\{)' "$TMP/t4-trie.log" | sed 's/^/    /'
if [[ $rc -eq 0 ]] && "${CHECK[@]}" "$TMP/tools20.txt" "$TMP/t4-trie.tsv" trie "$NTOOLS"; then ok "K=20: trie 100% valid"
else ko "K=20 trie (harness exit $rc)"; tail -5 "$TMP/t4-trie.log"; fi
"$HARNESS" "${COMMON[@]}" --choices "$TMP/tools20.txt" --prompts data/tools-prompts.tsv --mode gbnf \
  --batch 4 --out "$TMP/t4-gbnf.tsv" > "$TMP/t4-gbnf.log" 2>&1
rc=$?
grep -E '^(gbnf|\{)' "$TMP/t4-gbnf.log" | sed 's/^/    /'
if [[ $rc -eq 0 ]] && "${CHECK[@]}" "$TMP/tools20.txt" "$TMP/t4-gbnf.tsv" gbnf "$NTOOLS"; then
  ok "K=20: gbnf 100% valid (agrees with trie on validity)"
else ko "K=20 gbnf (harness exit $rc)"; tail -5 "$TMP/t4-gbnf.log"; fi
# Greedy decoding under two exact constraints for the same set must pick the same strings.
if cmp -s <(cut -f2- "$TMP/t4-trie.tsv") <(cut -f2- "$TMP/t4-gbnf.tsv"); then
  ok "K=20: trie and gbnf give identical greedy outputs"
else ko "K=20: trie and gbnf outputs differ"; paste "$TMP/t4-trie.tsv" "$TMP/t4-gbnf.tsv" | sed 's/^/    /'; fi

# ---- 6: beam search over trie states, with few-shot turns (a shared prompt prefix) -------------------------------
echo "[test] 20 tool names, beam width 3, few-shot" >&2
"$HARNESS" "${COMMON[@]}" --choices "$TMP/tools20.txt" --prompts data/tools-prompts.tsv --shots data/tools-shots.tsv \
  --mode beam --beam 3 --batch 4 --require-valid --out "$TMP/t6.tsv" > "$TMP/t6.log" 2>&1
rc=$?
grep -E '^(beam|\{)' "$TMP/t6.log" | sed 's/^/    /'
if [[ $rc -eq 0 ]] && "${CHECK[@]}" "$TMP/tools20.txt" "$TMP/t6.tsv" beam "$NTOOLS"; then ok "K=20: beam 100% valid"
else ko "K=20 beam (harness exit $rc)"; tail -5 "$TMP/t6.log"; fi

# ---- 7: --canonical (only each member's own tokenization, trie_compile_tokens), trie and beam --------------------
echo "[test] 20 tool names, --canonical, trie and beam" >&2
"$HARNESS" "${COMMON[@]}" --choices "$TMP/tools20.txt" --prompts data/tools-prompts.tsv --shots data/tools-shots.tsv \
  --mode trie --canonical --batch 4 --require-valid --out "$TMP/t7-trie.tsv" > "$TMP/t7-trie.log" 2>&1
rc=$?
"$HARNESS" "${COMMON[@]}" --choices "$TMP/tools20.txt" --prompts data/tools-prompts.tsv --shots data/tools-shots.tsv \
  --mode beam --beam 3 --canonical --batch 4 --require-valid --out "$TMP/t7-beam.tsv" > "$TMP/t7-beam.log" 2>&1
rc2=$?
grep -E '^(trie|beam|\{)' "$TMP/t7-trie.log" "$TMP/t7-beam.log" | sed 's/^/    /'
if [[ $rc -eq 0 && $rc2 -eq 0 ]] && grep -q '"canonical":true' "$TMP/t7-trie.log" \
   && "${CHECK[@]}" "$TMP/tools20.txt" "$TMP/t7-trie.tsv" trie "$NTOOLS" \
   && "${CHECK[@]}" "$TMP/tools20.txt" "$TMP/t7-beam.tsv" beam "$NTOOLS"; then
  ok "K=20 --canonical: trie and beam 100% valid"
else ko "K=20 --canonical (harness exit $rc / $rc2)"; tail -5 "$TMP/t7-trie.log" "$TMP/t7-beam.log"; fi

# ---- 8: --jump-forward (forced runs decoded as one batch): trie-jump and beam-jump, fewer model steps -------------
echo "[test] 20 tool names, --jump-forward, trie and beam" >&2
"$HARNESS" "${COMMON[@]}" --choices "$TMP/tools20.txt" --prompts data/tools-prompts.tsv --shots data/tools-shots.tsv \
  --mode trie,beam --beam 3 --jump-forward --batch 4 --require-valid --out "$TMP/t8.tsv" > "$TMP/t8.log" 2>&1
rc=$?
grep -E '^(trie|beam|\{)' "$TMP/t8.log" | sed 's/^/    /'
steps() { grep "^{\"mode\":\"$1\"" "$TMP/t8.log" | sed -E 's/.*"steps":([0-9]+).*/\1/'; }
if [[ $rc -eq 0 ]] && "${CHECK[@]}" "$TMP/tools20.txt" "$TMP/t8.tsv" trie-jump "$NTOOLS" \
   && "${CHECK[@]}" "$TMP/tools20.txt" "$TMP/t8.tsv" beam-jump "$NTOOLS" \
   && (( $(steps trie-jump) < $(steps trie) && $(steps beam-jump) < $(steps beam) )); then
  ok "K=20 --jump-forward: trie-jump and beam-jump 100% valid, fewer model steps ($(steps trie) -> $(steps trie-jump), beam $(steps beam) -> $(steps beam-jump))"
else ko "K=20 --jump-forward (harness exit $rc)"; tail -5 "$TMP/t8.log"; fi

printf '%d passed, %d failed\n' "$pass" "$fail"
[[ $fail -eq 0 ]]
