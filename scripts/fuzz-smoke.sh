#!/usr/bin/env bash
# Short smoke run of every cargo-fuzz target (fuzz/), for CI: builds the targets once, then fuzzes each for
# SECONDS (default 25) from its committed seeds (fuzz/seeds/TARGET, never written to) plus a scratch corpus.
# Any crash, panic, leak, timeout or out-of-memory fails the script; the input is left in
# fuzz/artifacts/TARGET/ (reproduce: RUSTC_BOOTSTRAP=1 cargo fuzz run -a TARGET fuzz/artifacts/TARGET/<file>).
#
#   scripts/fuzz-smoke.sh              every target, 25 s each (about 3 minutes after the build)
#   scripts/fuzz-smoke.sh 10           every target, 10 s each (scripts/test.sh, CI)
#   scripts/fuzz-smoke.sh 600 gguf     one target for 10 minutes (the long runs of docs/robustness.md)
#   scripts/fuzz-smoke.sh --install-only   install cargo-fuzz when missing, build nothing
#   FUZZ_KEEP_CORPUS=1 ...             keep the grown corpus in fuzz/corpus/TARGET (gitignored)
#   FUZZ_CODEGEN_UNITS=N ...           rustc codegen units (default 16: cargo-fuzz's own default of 1 compiles each
#                                      crate on one core, and the build was most of a smoke run; 1 may fuzz somewhat
#                                      faster, for long runs)
#
# cargo-fuzz needs nightly-only rustc flags (-Zsanitizer=address, coverage instrumentation); only a stable
# toolchain is installed here, so the flags are unlocked with RUSTC_BOOTSTRAP=1. cargo-fuzz itself is
# installed from crates.io (pinned) when missing. Prints "fuzz smoke: N passed, N failed" last.
set -uo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO/fuzz"
INSTALL_ONLY=0
if [[ "${1:-}" == --install-only ]]; then INSTALL_ONLY=1; shift; fi
SECONDS_PER_TARGET="${1:-25}"
shift || true
TARGETS=("$@")
if ((${#TARGETS[@]} == 0)); then TARGETS=(compile gguf tokenizer_json ffi load update recognize); fi
CARGO_FUZZ_VERSION=0.13.1
export RUSTC_BOOTSTRAP=1

if ! cargo fuzz --version 2>/dev/null | grep -q "$CARGO_FUZZ_VERSION"; then
  echo "[fuzz] installing cargo-fuzz $CARGO_FUZZ_VERSION"
  cargo install cargo-fuzz --version "$CARGO_FUZZ_VERSION" --locked -q || exit 1
fi
if ((INSTALL_ONLY)); then cargo fuzz --version; exit 0; fi
# -a: debug assertions (overflow checks) on; the same flags for build and run, so run does not rebuild.
FLAGS=(-a --codegen-units "${FUZZ_CODEGEN_UNITS:-16}")
echo "[fuzz] building ${TARGETS[*]}"
cargo fuzz build "${FLAGS[@]}" || { echo "fuzz smoke: 0 passed, ${#TARGETS[@]} failed"; exit 1; }

passed=0
failed=0
for t in "${TARGETS[@]}"; do
  if [[ "${FUZZ_KEEP_CORPUS:-0}" == 1 ]]; then corpus="corpus/$t"; else corpus="$(mktemp -d)"; fi
  mkdir -p "$corpus" "artifacts/$t"
  dict=()
  if [[ -f "dicts/$t.dict" ]]; then dict=("-dict=dicts/$t.dict"); fi
  log="$(mktemp)"
  echo "[fuzz] $t: ${SECONDS_PER_TARGET} s"
  # One job, one worker; 2 GiB RSS and 10 s per input are failures; leaks are failures (ASan's LeakSanitizer).
  cargo fuzz run "${FLAGS[@]}" "$t" "$corpus" "seeds/$t" -- \
    -max_total_time="$SECONDS_PER_TARGET" -rss_limit_mb=2048 -malloc_limit_mb=2048 -timeout=10 \
    -print_final_stats=1 "${dict[@]}" >"$log" 2>&1
  rc=$?
  runs="$(grep -Eo 'Done [0-9]+ runs in [0-9]+ second' "$log" | tail -n 1)"
  cov="$(grep -Eo 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -n 1)"
  if ((rc == 0)); then
    passed=$((passed + 1))
    echo "[fuzz] $t: ok ($runs; $cov)"
  else
    failed=$((failed + 1))
    echo "[fuzz] $t: FAILED (exit $rc); last lines:"
    tail -n 40 "$log"
    ls -1 "artifacts/$t" | sed 's/^/[fuzz]   artifact: /'
  fi
  rm -f "$log"
  if [[ "${FUZZ_KEEP_CORPUS:-0}" != 1 ]]; then rm -rf "$corpus"; fi
done
echo "fuzz smoke: $passed passed, $failed failed"
((failed == 0))
