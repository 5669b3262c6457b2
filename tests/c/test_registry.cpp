// B2: llama-server's map from a model's vocabulary to its set cache (integrations/llama-server/
// llama-libtrie-registry.h), checked against libtrie alone: a model freed and another loaded at the same address
// gets its own vocabulary and sets; one tokenizer at two addresses shares one set cache.
#include "../../integrations/llama-server/llama-libtrie-registry.h"

#include <cstdio>
#include <cstring>
#include <vector>

static int passed, failed;
#define CHECK(cond)                                                                                            \
    do {                                                                                                       \
        if (cond) {                                                                                            \
            passed++;                                                                                          \
        } else {                                                                                               \
            failed++;                                                                                          \
            std::fprintf(stderr, "%s:%d: CHECK(%s) failed (last error: %s)\n", __FILE__, __LINE__, #cond,      \
                         trie_last_error());                                                                   \
        }                                                                                                      \
    } while (0)

// Every ASCII byte a token, then `extra` more tokens and an end-of-generation token.
static trie_vocab * make_vocab(int extra) {
    std::vector<std::vector<uint8_t>> toks;
    for (int b = 0; b < 128; b++) toks.push_back({ (uint8_t) b });
    for (int i = 0; i < extra; i++) toks.push_back({ 'x', (uint8_t) ('a' + i % 26), (uint8_t) ('a' + i / 26) });
    toks.push_back({ '<', '/', 's', '>' });
    std::vector<const uint8_t *> ptrs;
    std::vector<size_t>          lens;
    std::vector<uint32_t>        kinds(toks.size(), TRIE_TOKEN_NORMAL);
    kinds.back() = TRIE_TOKEN_CONTROL;
    for (const auto & t : toks) {
        ptrs.push_back(t.data());
        lens.push_back(t.size());
    }
    const int32_t eog = (int32_t) toks.size() - 1;
    trie_vocab * v = nullptr;
    CHECK(trie_vocab_new(ptrs.data(), lens.data(), kinds.data(), toks.size(), &eog, 1, &v) == TRIE_OK);
    return v;
}

static size_t n_vocab_of_set(llama_libtrie::set_cache & sets) {
    const char * spec = "[\"hello\"]";
    trie_automaton * a = nullptr;
    CHECK(trie_set_cache_get(sets.cache, (const uint8_t *) spec, std::strlen(spec), &a, nullptr) == TRIE_OK);
    const size_t n = trie_automaton_n_vocab(a);
    trie_automaton_free(a);
    return n;
}

int main() {
    llama_libtrie::registry r;
    trie_set_config config;
    trie_set_config_init(&config);
    static char model_a, model_b;  // two "model" addresses
    int builds = 0;
    auto first = r.get(&model_a, 1, config, [&] { builds++; return make_vocab(0); });
    auto again = r.get(&model_a, 1, config, [&] { builds++; return make_vocab(0); });
    CHECK(first == again && builds == 1);
    CHECK(n_vocab_of_set(*first) == 129);

    // Another model loaded at the same address, with another vocabulary: built again, its own sets.
    auto other = r.get(&model_a, 2, config, [&] { builds++; return make_vocab(40); });
    CHECK(builds == 2 && other != first);
    CHECK(n_vocab_of_set(*other) == 169);
    CHECK(n_vocab_of_set(*first) == 129);  // a request still holding the old model's sets is unaffected

    // The first tokenizer at another address: the same fingerprint, so the same set cache (still held above).
    auto shared = r.get(&model_b, 7, config, [&] { builds++; return make_vocab(0); });
    CHECK(builds == 3 && shared == first);
    int live = 0;
    r.each([&](const trie_set_cache *) { live++; });
    CHECK(live == 2);

    // Released with the last holder: nothing holds the first cache once model_b is replaced too.
    first.reset();
    again.reset();
    shared.reset();
    auto replaced = r.get(&model_b, 8, config, [&] { builds++; return make_vocab(40); });
    CHECK(replaced == other);
    live = 0;
    r.each([&](const trie_set_cache *) { live++; });
    CHECK(live == 1);

    // A vocabulary libtrie refuses to serve sets with (a bad config): an exception, nothing registered.
    trie_set_config bad = config;
    bad.struct_size = 1;
    bool threw = false;
    try {
        r.get(&model_b, 9, bad, [&] { return make_vocab(1); });
    } catch (const std::invalid_argument & e) {
        threw = std::strstr(e.what(), "trie_set_config_init") != nullptr;
    }
    CHECK(threw);
    std::printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
