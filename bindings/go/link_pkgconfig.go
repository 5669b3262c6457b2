//go:build !trie_nopkgconfig

package trie

// Compiler and linker flags come from pkg-config's trie.pc (installed by scripts/install.sh PREFIX or
// `cmake --install`): set PKG_CONFIG_PATH=PREFIX/lib/pkgconfig when PREFIX is not a system location.
// For a build tree that is not installed, build with -tags trie_nopkgconfig (see link_manual.go).

// #cgo pkg-config: trie
import "C"
