// llama-libtrie-internal.h - what the integration's own files share (llama-libtrie.cpp, -route.cpp, -tools.cpp);
// not included by llama.cpp's sources.
#pragma once

#include "llama-libtrie.h"
#include "llama-libtrie-lru.h"
#include "llama-libtrie-registry.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

struct llama_vocab;
struct llama_sampler;
typedef int32_t llama_token;

namespace llama_libtrie {

// The set cache (and trie vocabulary) serving `vocab`, built on first use (llama-libtrie.cpp). Throws
// std::invalid_argument when libtrie cannot use the vocabulary.
std::shared_ptr<set_cache> sets_of(const common_params_libtrie & opts, const llama_vocab * vocab);

// A tool-call stage ("trie-tools", llama-libtrie-tools.cpp) for llama-libtrie-draft.cpp: tools_draft puts the
// engine's forced run from the stage's position (trie_calls_draft: in a tool's name) into `out` (at most `n_max`
// tokens; false, empty, for any other sampler); tools_trim cuts `draft` to the prefix the engine accepts
// (trie_calls_validate) where the stage can tell (a name, the end), returning the number of tokens cut.
bool   tools_draft(const llama_sampler * smpl, int32_t n_max, std::vector<llama_token> & out);
size_t tools_trim(const llama_sampler * smpl, std::vector<llama_token> & draft);

// Routing on (common_libtrie_set_route; --trie-no-route turns it off).
extern std::atomic<bool> g_route;

// The vocabulary's fingerprint as 32 hex digits (a key part: two models with one tokenizer share entries).
std::string fingerprint_hex(const trie_vocab * vocab);

// The cache of compiled things by key (one in-flight build per key, built outside its lock): llama-libtrie-lru.h.

// A request over the operator's bounds (recognition or compile): thrown by recognize() and the routed compile. A
// request llama.cpp would serve itself ("json_schema", "grammar", inline "tools") catches it and keeps llama.cpp's
// path, as any request that is not a set (bounded work, never a 400 for its size); only sets named through
// libtrie's own fields (the "trie" field, a registry) are refused with its message.
struct over_bounds : std::invalid_argument {
    using std::invalid_argument::invalid_argument;
};

// trie_compile_template, through the operator's compiled directory when there is one (opts.compiled_dir:
// trie_compiled_dir_compile_template, one trie_compiled_dir per process), so every llama-server of the machine
// maps the set another one compiled. The same status and out as trie_compile_template.
trie_status compile_template(const common_params_libtrie & opts, const trie_vocab * vocab, const uint8_t * const * strings,
                             const size_t * lens, size_t n, const trie_template * t, const trie_options * o,
                             trie_automaton ** out);

// trie_last_error(), at most `n` bytes (messages go to clients).
std::string last_error(size_t n = 1000);

// ---- bounded recognition (llama-libtrie-route.cpp) -------------------------------------------------------------
//
// Every recognition runs within bounds that travel into the recognizer (trie_recognize_with +
// trie_recognize_limits): the text's size is checked before anything parses it, its nesting before anything
// recurses, members and their bytes as the expansion goes, before a member is built. A libtrie without that call
// (an older include/trie.h: no TRIE_RECOGNIZE_VLLM_TOOLS) gets the same checks around trie_recognize: size and JSON
// nesting before it, members and bytes after it.

struct recognize_bounds {
    uint64_t max_text_bytes   = 0;
    uint64_t max_members      = 0;
    uint64_t max_member_bytes = 0;  // all members' bytes + 1 per member (the inline-bytes rule)
    uint32_t max_depth        = 0;
};

// The bounds of a request's text: the inline bounds (--trie-max-inline-strings / -bytes), the text by 12x the
// bytes + 64 KiB (room for every character escaped), the nesting by --trie-max-json-depth.
recognize_bounds request_bounds(const common_params_libtrie & opts);

// How a hit bound is worded: the operator's flags named, and what the client can do instead.
std::string bounds_hint();

// The recognized set of `text` as `kind`, or a null pointer when it is not a set. Throws over_bounds for a bound
// hit ("... (this server's bounds: ...)") and std::invalid_argument for malformed input, not prefixed by any field.
std::unique_ptr<trie_recognized, void (*)(trie_recognized *)> recognize(uint32_t kind, const std::string & text,
                                                                        const recognize_bounds & bounds);

// "" when `text` nests JSON at most `max_depth` deep (arrays and objects; strings skipped; no recursion), else
// the reason.
std::string json_depth_error(const char * text, size_t len, uint32_t max_depth);

}  // namespace llama_libtrie
