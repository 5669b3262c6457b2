#!/usr/bin/env bash
# Fails when include/trie.h differs from what the pinned cbindgen generates from src/capi/ (run in CI), or when
# the status tables of the Python and Swift bindings differ from the header's `trie_status`.
# Fix with scripts/gen-header.sh (then scripts/gen-status.py) and commit the results.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
fresh="$(mktemp)"
trap 'rm -f "$fresh"' EXIT
"$root/scripts/gen-header.sh" "$fresh"
if ! diff -u "$root/include/trie.h" "$fresh"; then
    echo "check-header: include/trie.h is stale: run scripts/gen-header.sh and commit it" >&2
    exit 1
fi
# The header's version macros must match Cargo.toml.
version="$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -n1)"
IFS=. read -r major minor patch <<<"${version%%-*}"
for kv in "MAJOR $major" "MINOR $minor" "PATCH $patch"; do
    set -- $kv
    if ! grep -qx "#define TRIE_VERSION_$1 $2" "$root/include/trie.h"; then
        echo "check-header: TRIE_VERSION_$1 in include/trie.h is not $2 (Cargo.toml version $version)" >&2
        exit 1
    fi
done
# The Python and Swift status tables are generated from the header: they must match it.
python3 "$root/scripts/gen-status.py" --check
echo "check-header: include/trie.h is up to date (cbindgen $(grep -o '^CBINDGEN_VERSION=.*' "$root/scripts/gen-header.sh" | cut -d= -f2), version $version)"
