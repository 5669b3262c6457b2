#!/usr/bin/env bash
# The Go binding (bindings/go) in CI, in one command:
#   1. Go from Debian's golang-go when `go` is missing (standard library only: nothing is downloaded);
#   2. libtrie built (cargo build --release) and installed to a temporary prefix with scripts/install.sh, so
#      that cgo finds it through pkg-config (`#cgo pkg-config: trie`) as users do;
#   3. gofmt, go vet, go test -v (GODEBUG=cgocheck=2), go test -race, the example program (examples/pick) over data/tools*.txt;
#   4. the documented fallbacks without pkg-config (-tags trie_nopkgconfig, CGO_CFLAGS/CGO_LDFLAGS): the static
#      target/release/libtrie.a of a plain cargo build, and the shared library of the CMake build tree;
#   5. Go's own summary lines again at the end.
# Env: TRIE_ASSETS (real vocabularies; default <repo>/../shared/assets), BUILD_DIR (default <repo>/build/go),
#      TRIE_GO_RACE=0 to skip the race detector run.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$root/build/go}"
export TRIE_ASSETS="${TRIE_ASSETS:-$root/../shared/assets}"
export GOPROXY=off GOTOOLCHAIN=local GOFLAGS= GO111MODULE=on CGO_ENABLED=1
export GOCACHE="${GOCACHE:-$build/gocache}"
mkdir -p "$build"
[ -d "$TRIE_ASSETS/vocab" ] && export TRIE_REQUIRE_ASSETS=1 || echo "warning: no vocabularies under $TRIE_ASSETS: the GGUF tests skip"

if ! command -v go >/dev/null; then
  echo "== installing Go (golang-go)"
  sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq golang-go pkg-config >/dev/null
fi
go version

echo "== libtrie: cargo build --release, install to $build/prefix"
(cd "$root" && cargo build --release --lib)
BUILD_DIR="$build/cmake" "$root/scripts/install.sh" "$build/prefix" >"$build/install.log" 2>&1 \
  || { cat "$build/install.log"; exit 1; }
libdir="$build/prefix/lib"
[ -f "$libdir/pkgconfig/trie.pc" ] || { echo "no trie.pc under $libdir/pkgconfig"; exit 1; }
export PKG_CONFIG_PATH="$libdir/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
echo "pkg-config trie: $(pkg-config --modversion trie) $(pkg-config --cflags --libs trie)"

log="$build/go-test.log"
: >"$log"
cd "$root/bindings/go"
# pkg-config gives -L but no run path: the test binaries find the shared library through this rpath.
export CGO_LDFLAGS="-Wl,-rpath,$libdir"

echo "== gofmt, go vet"
unformatted="$(gofmt -l .)"
[ -z "$unformatted" ] || { echo "gofmt needed: $unformatted"; exit 1; }
go vet ./...

echo "== go test -v (pkg-config; GODEBUG=cgocheck=2 checks every pointer handed to C)"
GODEBUG=cgocheck=2 go test -count=1 -v ./... 2>&1 | tee -a "$log"

if [ "${TRIE_GO_RACE:-1}" != 0 ] && case "$(go env GOARCH)" in amd64|arm64) true ;; *) false ;; esac; then
  echo "== go test -race"
  go test -count=1 -race ./... 2>&1 | tee -a "$log"
fi

echo "== example: examples/pick"
out="$build/pick.out"
go run ./examples/pick "$TRIE_ASSETS/vocab/ggml-vocab-llama-bpe.gguf" "$root/data/tools.txt" \
  "$root/data/tools-prompts.tsv" | tee "$out"
# Whatever the toy scorer picks must be a member of the set.
n_picks=0
while read -r member _; do
  grep -qxF -- "$member" "$root/data/tools.txt" || { echo "example printed a non-member: $member"; exit 1; }
  n_picks=$((n_picks + 1))
done < <(grep -F '  <-  ' "$out")
[ "$n_picks" -eq "$(grep -c . "$root/data/tools-prompts.tsv")" ] || { echo "example: $n_picks picks"; exit 1; }
echo "example: $n_picks picks, all members of the set"

echo "== fallback without pkg-config (-tags trie_nopkgconfig): static target/release/libtrie.a"
export PKG_CONFIG=/nonexistent
CGO_CFLAGS="-I$root/include" CGO_LDFLAGS="$root/target/release/libtrie.a -lpthread -ldl -lm -lrt -lutil" \
  go vet -tags trie_nopkgconfig ./...
CGO_CFLAGS="-I$root/include" CGO_LDFLAGS="$root/target/release/libtrie.a -lpthread -ldl -lm -lrt -lutil" \
  go test -count=1 -tags trie_nopkgconfig ./... 2>&1 | tee -a "$log"
echo "== fallback without pkg-config (-tags trie_nopkgconfig): shared, CMake build tree $build/cmake/lib"
CGO_CFLAGS="-I$root/include" CGO_LDFLAGS="-L$build/cmake/lib -ltrie -Wl,-rpath,$build/cmake/lib" \
  go test -count=1 -tags trie_nopkgconfig ./... 2>&1 | tee -a "$log"
unset PKG_CONFIG

echo "== Go test summary"
grep -E '^(--- (PASS|FAIL|SKIP)|PASS$|FAIL|ok )' "$log"
! grep -qE '^(--- FAIL|FAIL)' "$log"
