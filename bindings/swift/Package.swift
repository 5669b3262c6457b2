// swift-tools-version:5.7
// The Swift binding of libtrie. libtrie itself (the C library) must be installed where pkg-config finds
// `trie` (scripts/install.sh PREFIX, then PKG_CONFIG_PATH=PREFIX/lib/pkgconfig): see README.md.
import PackageDescription

let package = Package(
    name: "Trie",
    products: [
        .library(name: "Trie", targets: ["Trie"]),
        .executable(name: "trie-pick", targets: ["TriePick"]),
    ],
    targets: [
        // The C API (trie.h) as a Clang module; flags from pkg-config's trie.pc.
        .systemLibrary(name: "CTrie", path: "Sources/CTrie", pkgConfig: "trie"),
        // The Swift API: Vocab, Automaton, TrieError.
        .target(name: "Trie", dependencies: ["CTrie"]),
        // Example: pick a tool name for each line of input with a toy scorer.
        .executableTarget(name: "TriePick", dependencies: ["Trie"]),
        .testTarget(name: "TrieTests", dependencies: ["Trie"]),
    ]
)
