//go:build trie_nopkgconfig

package trie

// Built with -tags trie_nopkgconfig, the package asks nothing of pkg-config: give the flags in the environment,
// for example for a libtrie build tree that is not installed.
//
// A cargo build (`cargo build --release`), linked statically (target/release/libtrie.so names itself
// libtrie.so.0.3, which that folder does not hold, so the static library is the simple choice there):
//
//	CGO_CFLAGS="-I$REPO/include" \
//	CGO_LDFLAGS="$REPO/target/release/libtrie.a -lpthread -ldl -lm -lrt -lutil" \
//	go test -tags trie_nopkgconfig ./...
//
// A CMake build tree (`cmake -S $REPO -B $BUILD && cmake --build $BUILD`), linked to the shared library:
//
//	CGO_CFLAGS="-I$REPO/include" \
//	CGO_LDFLAGS="-L$BUILD/lib -ltrie -Wl,-rpath,$BUILD/lib" \
//	go test -tags trie_nopkgconfig ./...

import "C"
