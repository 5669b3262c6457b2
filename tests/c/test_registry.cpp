// B2: llama-server's map from a model's vocabulary to its set cache (integrations/llama-server/
// llama-libtrie-registry.h), checked against libtrie alone: a model freed and another loaded at the same address
// gets its own vocabulary and sets; one tokenizer at two addresses shares one set cache.
// Issue 28: llama-server's tool registries (trie_registry_*, the front end's confinement and LRU): names that are
// paths, links, fifos, directories and big files refused (a fifo without blocking), a registry looked up by its
// file's identity before it is read, a registry replaced while a request holds the old one.
#include "../../integrations/llama-server/llama-libtrie-registry.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

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

static void write_file(const std::string & path, const std::string & text) {
    std::ofstream(path, std::ios::binary) << text;
}

static std::string error_of(trie_registry_cache * c, const std::string & name) {
    trie_registry * r = nullptr;
    const trie_status st = trie_registry_cache_get(c, (const uint8_t *) name.data(), name.size(), &r, nullptr);
    trie_registry_free(r);
    return st == TRIE_OK ? std::string("(served)") : std::string(trie_last_error());
}

static bool refused(trie_registry_cache * c, const std::string & name, const char * reason) {
    const std::string e = error_of(c, name);
    const bool ok = e.find(reason) != std::string::npos;
    if (!ok) std::fprintf(stderr, "registry '%s': expected '%s', got '%s'\n", name.c_str(), reason, e.c_str());
    return ok;
}

static std::string first_tool(const trie_registry * r) {
    const uint8_t * n = nullptr; size_t nl = 0;
    const uint8_t * p = nullptr; size_t pl = 0;
    return trie_registry_tool(r, 0, &n, &nl, &p, &pl) == TRIE_OK ? std::string((const char *) n, nl) : "";
}

static void registries() {
    char tmpl[] = "/tmp/libtrie-registry-XXXXXX";
    const std::string tmp = mkdtemp(tmpl);
    const std::string sets = tmp + "/sets";
    mkdir(sets.c_str(), 0700);
    const char * tools = "[{\"name\": \"f\", \"parameters\": {\"type\": \"object\"}}]";
    write_file(sets + "/tools.json", tools);
    write_file(tmp + "/outside.json", tools);
    CHECK(symlink((tmp + "/outside.json").c_str(), (sets + "/escape.json").c_str()) == 0);
    CHECK(mkfifo((sets + "/fifo.json").c_str(), 0600) == 0);
    write_file(sets + "/big.json", std::string(5000, ' '));

    trie_registry_cache * c = nullptr;
    CHECK(trie_registry_cache_new(sets.c_str(), 4096, 0, 8, &c) == TRIE_OK);
    trie_registry * a = nullptr;
    bool read = false;
    CHECK(trie_registry_cache_get(c, (const uint8_t *) "tools", 5, &a, &read) == TRIE_OK && read);
    CHECK(trie_registry_n_tools(a) == 1 && first_tool(a) == "f");
    trie_registry * again = nullptr;
    CHECK(trie_registry_cache_get(c, (const uint8_t *) "tools", 5, &again, &read) == TRIE_OK && !read);  // by identity
    trie_registry_free(again);

    for (const char * name : { "../outside", "..", "/etc/passwd", "sub/x", ".hidden", "" }) {
        CHECK(refused(c, name, "a registry name is 1 to 128 characters"));
    }
    CHECK(refused(c, (tmp + "/outside").c_str(), "a registry name"));
    CHECK(refused(c, "escape", "a symbolic link"));
    const auto t0 = std::chrono::steady_clock::now();
    CHECK(refused(c, "fifo", "not a regular file"));  // never opened: no hang
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
    CHECK(refused(c, "big", "more than this server reads"));
    CHECK(refused(c, "nope", "does not exist"));
    CHECK(error_of(c, "escape").find(sets) == std::string::npos);  // the set directory's location is not disclosed

    // replaced while a request holds the old one: the holder keeps it, the next get reads the new file
    uint8_t id_a[16], id_b[16];
    CHECK(trie_registry_identity(a, id_a) == TRIE_OK);
    write_file(sets + "/new.tmp", "[{\"name\": \"g\"}, {\"name\": \"h\"}]");
    CHECK(rename((sets + "/new.tmp").c_str(), (sets + "/tools.json").c_str()) == 0);
    trie_registry * b = nullptr;
    CHECK(trie_registry_cache_get(c, (const uint8_t *) "tools", 5, &b, &read) == TRIE_OK && read);
    CHECK(trie_registry_n_tools(b) == 2 && first_tool(b) == "g");
    CHECK(trie_registry_identity(b, id_b) == TRIE_OK && std::memcmp(id_a, id_b, 16) != 0);
    CHECK(trie_registry_n_tools(a) == 1 && first_tool(a) == "f");
    trie_registry_free(a);
    trie_registry_free(b);
    trie_registry_cache_free(c);

    trie_registry_cache * none = nullptr;
    CHECK(trie_registry_cache_new(nullptr, 4096, 0, 8, &none) == TRIE_OK);
    CHECK(refused(none, "tools", "no set directory"));
    trie_registry_cache_free(none);
    CHECK(trie_registry_cache_new((tmp + "/nonexistent").c_str(), 4096, 0, 8, &none) == TRIE_ERR_INVALID_ARGUMENT);
    CHECK(none == nullptr);
    if (std::system(("rm -rf '" + tmp + "'").c_str()) != 0) std::fprintf(stderr, "cannot remove %s\n", tmp.c_str());
}

// The README's registry example (data/registry/tools.json) is one a server serves: read through the same
// confinement, 8 distinct tools, each with an object schema.
static void readme_example() {
    const std::string here = __FILE__;  // <repo>/tests/c/test_registry.cpp (CMake passes absolute paths)
    const std::string dir  = here.substr(0, here.rfind("tests/c/")) + "data/registry";
    trie_registry_cache * c = nullptr;
    CHECK(trie_registry_cache_new(dir.c_str(), 1 << 20, 0, 2, &c) == TRIE_OK);
    trie_registry * r = nullptr;
    CHECK(trie_registry_cache_get(c, (const uint8_t *) "tools", 5, &r, nullptr) == TRIE_OK);
    CHECK(r != nullptr && trie_registry_n_tools(r) == 8);
    CHECK(r != nullptr && first_tool(r) == "jira_create_issue");
    for (size_t i = 0; r != nullptr && i < trie_registry_n_tools(r); ++i) {
        const uint8_t * n = nullptr; size_t nl = 0;
        const uint8_t * p = nullptr; size_t pl = 0;
        CHECK(trie_registry_tool(r, i, &n, &nl, &p, &pl) == TRIE_OK);
        CHECK(std::string((const char *) p, pl).find("\"type\":\"object\"") != std::string::npos
              || std::string((const char *) p, pl).find("\"type\": \"object\"") != std::string::npos);
    }
    trie_registry_free(r);
    trie_registry_cache_free(c);
}

int main() {
    registries();
    readme_example();
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
