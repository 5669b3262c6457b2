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
