// A second translation unit for trie-llama-selftest, in C++17: it creates and recognizes trie sampler stages
// with its own copy of the header's static functions (and its own interface struct), so the selftest can check
// that trie_llama_sampler_is_trie holds across translation units and languages.
#include "llama.h"
#include "trie.h"
#include "trie_llama.h"

extern "C" struct llama_sampler *selftest_tu2_sampler_init(const trie_automaton *automaton) {
    return trie_llama_sampler_init(automaton);
}

extern "C" bool selftest_tu2_is_trie(const struct llama_sampler *smpl) {
    return trie_llama_sampler_is_trie(smpl);
}

// A foreign sampler (not libtrie's) that is also named "trie", with the given context (NULL, or a block smaller
// than trie_llama_ctx): trie_llama_sampler_is_trie must say no without reading that context.
static const char *foreign_name(const struct llama_sampler *) { return "trie"; }
static void foreign_free(struct llama_sampler *smpl) { free(smpl->ctx); }

extern "C" struct llama_sampler *selftest_tu2_foreign_init(void *ctx) {
    static llama_sampler_i iface = [] {
        llama_sampler_i i{};
        i.name = foreign_name;
        i.free = foreign_free;
        return i;
    }();
    return llama_sampler_init(&iface, ctx);
}
