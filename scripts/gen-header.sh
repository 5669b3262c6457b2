#!/usr/bin/env bash
# Regenerates include/trie.h from src/capi/ with a pinned cbindgen.
#
#   scripts/gen-header.sh            # writes include/trie.h
#   scripts/gen-header.sh OUT.h      # writes OUT.h instead (scripts/check-header.sh uses this)
#
# The pinned cbindgen is installed on first use with `cargo install --locked` into $TRIE_TOOLS_DIR
# (default: <repo>/.cache/cbindgen, ignored by git). Set CBINDGEN to use another binary of the same version.
set -euo pipefail

CBINDGEN_VERSION=0.29.2
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-$root/include/trie.h}"
tools="${TRIE_TOOLS_DIR:-$root/.cache/cbindgen}"
cbindgen="${CBINDGEN:-$tools/bin/cbindgen}"

if [[ ! -x "$cbindgen" ]] || [[ "$("$cbindgen" --version)" != "cbindgen $CBINDGEN_VERSION" ]]; then
    if [[ -n "${CBINDGEN:-}" ]]; then
        echo "gen-header: $CBINDGEN is not cbindgen $CBINDGEN_VERSION" >&2
        exit 1
    fi
    echo "gen-header: installing cbindgen $CBINDGEN_VERSION into $tools" >&2
    cargo install cbindgen --version "=$CBINDGEN_VERSION" --locked --root "$tools" >&2
fi

tmp="$(mktemp)"
trap 'rm -f "$tmp"' EXIT
# cbindgen's WARN lines about private constants and `u32` are expected: keep only real errors.
(cd "$root" && "$cbindgen" --config cbindgen.toml --crate libtrie --output "$tmp" 2> >(grep -v -e '^WARN: Skip .* - (not `pub`)' -e "^WARN: Can't find u32" >&2))
mkdir -p "$(dirname "$out")"
cp "$tmp" "$out"
