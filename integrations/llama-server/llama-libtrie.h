// llama-libtrie.h - libtrie in llama.cpp's common library and llama-server (built with -DLLAMA_LIBTRIE=ON).
//
// patches/llama-server-libtrie.patch adds llama-libtrie.cpp to llama-common and:
//   - common_params::libtrie                 the operator's options (flags --trie-*, environment LIBTRIE_*),
//   - common_params_sampling::trie           the compiled set of a request (shared, immutable),
//   - common_sampler::trie                   one trie stage per sampler (one trie state per slot), applied before
//                                            the sampler chain, advanced by generated tokens only, cloned/copied
//                                            with the sampler for the server's rollbacks,
//   - the server's "trie" request field      resolved here by libtrie's front end: checked, then compiled once into
//                                            a shared LRU.
//
// A request names its set with "trie":
//   {"set": "tools"}            the file tools.txt of the set directory (--trie-set-dir / LIBTRIE_SET_DIR)
//   {"file": "sub/x.txt"}       a file by its path relative to the set directory
//   {"strings": ["a", "b"]}     the members inline (bounded by --trie-max-inline-strings / -bytes)
//   optional "drop_unreachable": true   drop members the vocabulary cannot spell instead of failing
// Short forms: a string ("tools", or a path when it holds a '/'), an array of strings.
// Set files: one member per line, '\n' separated, a final newline ignored, UTF-8.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

struct llama_vocab;
struct trie_automaton;
class common_json;

// The operator's options (common/arg.cpp: --trie-*; defaults as the vLLM processor's).
struct common_params_libtrie {
    std::string set_dir;                           // real path of the set directory; empty: no sets from files
    uint64_t    max_inline_strings = 10000;        // most members of an inline set
    uint64_t    max_inline_bytes   = 1u << 20;     // most bytes of an inline set (a byte per member counted for its separator)
    uint64_t    max_file_bytes     = 256u << 20;   // largest set file read
    uint64_t    max_states         = 0;            // trie_options.max_states of every compile (0: the library's own bounds)
    uint64_t    max_bytes          = 0;            // trie_options.max_bytes of every compile (0: no bound)
    uint64_t    cache_size         = 64;           // compiled sets kept (least recently used dropped first)
};

// The compiled set a request's "trie" value names, for the vocabulary `vocab`, through libtrie's request-set front
// end (trie_set_cache_get: the same parsing, confinement and LRU as the vLLM processor). One set cache per
// vocabulary fingerprint, built on first use; a llama_vocab is recognised by a signature of its tokens, not by its
// address (a model freed and another loaded at the same address gets its own). Compiled in the calling thread on a
// miss (a set asked for by several requests at once is compiled once; the others wait for it). Thread-safe.
// Throws std::invalid_argument with a reason fit for the client (the set directory's location is not disclosed).
std::shared_ptr<const trie_automaton> common_libtrie_resolve(const common_params_libtrie & opts,
                                                             const llama_vocab *           vocab,
                                                             const common_json &           value);

// Parses a non-negative integer option (digits, '_' separators allowed); throws std::invalid_argument naming `what`.
uint64_t common_libtrie_parse_u64(const std::string & value, const char * what);

// The real path of an operator's set directory; throws std::invalid_argument when it is not a directory.
std::string common_libtrie_set_dir(const std::string & path);

// Counters for logs and tests, summed over the live set caches: compiles run (failed ones included), lookups served
// from the LRU, sets held.
struct common_libtrie_stats {
    uint64_t compiles = 0;
    uint64_t hits     = 0;
    uint64_t entries  = 0;
};
common_libtrie_stats common_libtrie_get_stats();
