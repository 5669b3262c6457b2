#!/usr/bin/env bash
# The crate as crates.io would get it (docs/packaging.md): `cargo package` from the committed tree (Cargo.toml's
# `include` list), its size and file count (crates.io takes at most 10 MB), then the crate compiled from the
# packaged files alone, unpacked in a temporary folder: what the verify step of `cargo package` proves (build.rs
# runs, every file the build reads is in the package). Here as `cargo check --release` with this checkout's
# target/: the dependencies checked by the clippy stage are reused and only the crate itself is compiled again,
# without code generation or link (a full `cargo build` of the copy would replace the checkout's own
# target/release/libtrie.so: a cdylib's file name has no hash). `cargo package` without --no-verify does the same
# in the dev profile (a debug build of every dependency: minutes).
#
#   scripts/check-package.sh           package, list, size, compile the unpacked crate (lib + the libtrie command)
#   scripts/check-package.sh --publish also `cargo publish --dry-run` (asks crates.io's index; uploads nothing)
#
# Fails on a dirty tree (cargo refuses to package uncommitted changes: commit first, or set ALLOW_DIRTY=1).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
dirty=()
if [[ "${ALLOW_DIRTY:-0}" == 1 ]]; then dirty=(--allow-dirty); fi
version="$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)"
crate="target/package/libtrie-$version.crate"
t0=$SECONDS
cargo package -q --no-verify "${dirty[@]}"
files="$(tar -tzf "$crate" | grep -cv '/$')"
bytes="$(stat -c %s "$crate")"
echo "[package] $crate: $bytes bytes compressed, $files files"
tar -tzf "$crate" | sed 's/^/  /'
if ((bytes > 10 * 1000 * 1000)); then
  echo "[package] over crates.io's 10 MB: trim Cargo.toml's include list" >&2; exit 1
fi
# Every file the build reads must be in the package: build it from the unpacked files alone.
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
tar -xzf "$crate" -C "$work"
t1=$SECONDS
CARGO_TARGET_DIR="$REPO/target" cargo check -q --release --locked --offline \
  --manifest-path "$work/libtrie-$version/Cargo.toml" --lib --bins
echo "[package] the packaged crate compiles from its own files (lib + libtrie command, $((SECONDS - t1)) s)"
if [[ "${1:-}" == --publish ]]; then
  cargo publish --dry-run --no-verify "${dirty[@]}"
  echo "[package] cargo publish --dry-run: ok"
fi
echo "[package] done in $((SECONDS - t0)) s"
