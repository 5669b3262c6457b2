#!/usr/bin/env bash
# The largest real workload of the benchmarks: every public npm package name, from the npm package
# all-the-package-names@2.0.2578 (ISC; its names.json: 4,499,322 names, 20 bytes on average, all ASCII), pinned by
# the tarball's sha256. Writes $TRIE_CACHE/data/npm-package-names.txt (default .cache/), one name per line, sorted by
# code point, distinct (names.json already is; the script checks it); the output is checked against its sha256
# too (94.6 MB). Prints the file's path on stdout.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${TRIE_CACHE:-$REPO/.cache}"
OUT="$CACHE/data/npm-package-names.txt"
VERSION=2.0.2578
TARBALL=all-the-package-names-$VERSION.tgz
TARBALL_SHA=89cccbb8825c8b60fa65a69aa558facd9dcebff951024d321478ed720adf1b85
OUT_SHA=70f5319f99da47a4cbaeeb019488fd41042cf854d55fa455a8624a5e119830cb
log() { printf '[fetch-npm-names] %s\n' "$*" >&2; }
sha() { sha256sum "$1" | cut -d' ' -f1; }

if [[ -f "$OUT" && "$(sha "$OUT")" == "$OUT_SHA" ]]; then echo "$OUT"; exit 0; fi
mkdir -p "$CACHE/data"
if [[ ! -f "$CACHE/data/$TARBALL" || "$(sha "$CACHE/data/$TARBALL")" != "$TARBALL_SHA" ]]; then
  log "downloading $TARBALL (npm registry, 27 MB)"
  (cd "$CACHE/data" && npm pack -q --silent "all-the-package-names@$VERSION" >/dev/null)
fi
got="$(sha "$CACHE/data/$TARBALL")"
if [[ "$got" != "$TARBALL_SHA" ]]; then log "sha256 mismatch for $TARBALL: got $got, want $TARBALL_SHA"; exit 1; fi
"${PYTHON:-python3}" - "$CACHE/data/$TARBALL" "$OUT.tmp" <<'EOF'
import json, sys, tarfile
with tarfile.open(sys.argv[1], "r:gz") as t:
    names = json.load(t.extractfile("package/names.json"))
assert all(isinstance(s, str) and s and "\n" not in s and "\r" not in s for s in names), "unexpected name"
assert all(a < b for a, b in zip(names, names[1:])), "names.json is not sorted and distinct"
with open(sys.argv[2], "w", encoding="utf-8", newline="\n") as f:
    f.write("".join(s + "\n" for s in names))
EOF
got="$(sha "$OUT.tmp")"
if [[ "$got" != "$OUT_SHA" ]]; then log "sha256 mismatch for $OUT: got $got, want $OUT_SHA"; exit 1; fi
mv "$OUT.tmp" "$OUT"
log "$(wc -l <"$OUT") names in $OUT"
echo "$OUT"
