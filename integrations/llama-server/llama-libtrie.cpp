// llama-libtrie.cpp - request sets for llama-server, through libtrie's request-set front end (trie_set_cache_*).
// See llama-libtrie.h. Compiled into llama-common by patches/llama-server-libtrie.patch (-DLLAMA_LIBTRIE=ON).
//
// Spec parsing, confinement of set files, reading, inline bounds and the LRU of compiled sets are libtrie's
// (src/sets, the same code the vLLM processor uses); this file only maps a model's vocabulary to its set cache.

#include "llama-libtrie.h"

#include "llama-libtrie-stage.h"  // llama.h, trie.h, trie_llama.h

#include "json.h"
#include "log.h"

#include <array>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>
#include <sys/stat.h>
#include <vector>

namespace {

[[noreturn]] void refuse(const std::string & msg) {
    throw std::invalid_argument(msg);
}

std::string truncated(const char * msg, size_t n = 600) {
    std::string s = msg ? msg : "";
    return s.size() <= n ? s : s.substr(0, n) + "...";
}

// ---- one set cache per vocabulary ---------------------------------------------------------------------------
//
// B2: a llama_vocab's address is not its identity (a model freed and another loaded at the same address). Each
// lookup takes a signature of the llama_vocab (every token's text and attributes, the special ids: about a
// millisecond for 150,000 tokens); a vocabulary whose signature changed is built again. Set caches are keyed by
// the trie vocabulary's fingerprint (two models with one tokenizer share one), held by the models that use them
// and released with the last (a stale address's entry is replaced); compiled sets in use keep their own
// references, so nothing a running request holds is freed under it.

struct set_cache {
    trie_set_cache * cache = nullptr;
    ~set_cache() { trie_set_cache_free(cache); }
};

using fingerprint = std::array<uint8_t, 16>;

struct vocab_entry {
    uint64_t                   signature = 0;
    std::shared_ptr<set_cache> sets;
};

std::mutex                                        g_mu;        // guards the two maps
std::mutex                                        g_build_mu;  // one vocabulary built at a time
std::map<const llama_vocab *, vocab_entry>         g_vocabs;
std::map<fingerprint, std::weak_ptr<set_cache>>    g_by_fingerprint;

uint64_t fnv(uint64_t h, const void * data, size_t n) {
    const auto * p = (const unsigned char *) data;
    for (size_t i = 0; i < n; ++i) {
        h = (h ^ p[i]) * 1099511628211ull;
    }
    return h;
}

// What identifies a llama_vocab's content for libtrie: token texts, attributes, the end-of-generation ids.
uint64_t signature_of(const llama_vocab * vocab) {
    const int32_t n = llama_vocab_n_tokens(vocab);
    uint64_t      h = fnv(14695981039346656037ull, &n, sizeof n);
    for (int32_t id = 0; id < n; ++id) {
        const char * text = llama_vocab_get_text(vocab, id);
        const size_t len  = text ? std::strlen(text) : 0;
        const int32_t attr = (int32_t) llama_vocab_get_attr(vocab, id);
        const uint8_t eog  = llama_vocab_is_eog(vocab, id) ? 1 : 0;
        h = fnv(h, &len, sizeof len);
        h = fnv(h, text, len);
        h = fnv(h, &attr, sizeof attr);
        h = fnv(h, &eog, 1);
    }
    return h;
}

std::shared_ptr<set_cache> lookup(const llama_vocab * vocab, uint64_t sig) {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = g_vocabs.find(vocab);
    return it != g_vocabs.end() && it->second.signature == sig ? it->second.sets : nullptr;
}

trie_set_config config_of(const common_params_libtrie & opts) {
    trie_set_config c;
    trie_set_config_init(&c);
    c.set_dir            = opts.set_dir.empty() ? nullptr : opts.set_dir.c_str();
    c.max_inline_strings = opts.max_inline_strings;
    c.max_inline_bytes   = opts.max_inline_bytes;
    c.max_file_bytes     = opts.max_file_bytes;
    c.max_states         = opts.max_states;
    c.max_bytes          = opts.max_bytes;
    c.capacity           = opts.cache_size;
    return c;
}

// The set cache of `vocab` under `opts` (built on first use, and again when the vocabulary at that address changed).
std::shared_ptr<set_cache> sets_of(const common_params_libtrie & opts, const llama_vocab * vocab) {
    const uint64_t sig = signature_of(vocab);
    if (auto sets = lookup(vocab, sig)) {
        return sets;
    }
    std::lock_guard<std::mutex> build(g_build_mu);
    if (auto sets = lookup(vocab, sig)) {  // built by another request meanwhile
        return sets;
    }
    const auto t0 = std::chrono::steady_clock::now();
    trie_vocab * tv = nullptr;
    const trie_status st = trie_llama_vocab(vocab, &tv);
    if (st != TRIE_OK) {
        // not the request's fault, but the request cannot be served: say why
        refuse(std::string("libtrie cannot use this model's vocabulary: ") + trie_status_str(st) + ": " +
               truncated(trie_last_error()));
    }
    std::unique_ptr<trie_vocab, void (*)(trie_vocab *)> owned(tv, trie_vocab_free);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    LOG_INF("libtrie: vocabulary of %zu tokens built in %.1f ms\n", trie_vocab_n_tokens(tv), ms);
    fingerprint fp{};
    trie_vocab_fingerprint(tv, fp.data());

    std::shared_ptr<set_cache> sets;
    {
        std::lock_guard<std::mutex> lock(g_mu);
        auto it = g_by_fingerprint.find(fp);
        if (it != g_by_fingerprint.end()) {
            sets = it->second.lock();
        }
    }
    if (!sets) {
        sets = std::make_shared<set_cache>();
        const trie_set_config c = config_of(opts);
        const trie_status     s = trie_set_cache_new(tv, &c, &sets->cache);  // keeps its own reference to tv
        if (s != TRIE_OK) {
            refuse(std::string("libtrie cannot serve sets: ") + trie_status_str(s) + ": " + truncated(trie_last_error()));
        }
    }
    std::lock_guard<std::mutex> lock(g_mu);
    for (auto it = g_by_fingerprint.begin(); it != g_by_fingerprint.end();) {  // caches no model holds any more
        it = it->second.expired() ? g_by_fingerprint.erase(it) : std::next(it);
    }
    g_by_fingerprint[fp] = sets;
    g_vocabs[vocab]      = vocab_entry{ sig, sets };  // replaces a stale entry of a freed model
    return sets;
}

}  // namespace

std::shared_ptr<const trie_automaton> common_libtrie_resolve(const common_params_libtrie & opts,
                                                             const llama_vocab *           vocab,
                                                             const common_json &           value) {
    if (vocab == nullptr) {
        refuse("libtrie: no vocabulary");
    }
    std::string spec;
    try {
        spec = value.dump();  // strict: a string that is not valid UTF-8 throws
    } catch (const std::exception &) {
        refuse("\"trie\" holds a string that is not valid UTF-8");
    }
    const std::shared_ptr<set_cache> sets = sets_of(opts, vocab);
    trie_automaton * a = nullptr;
    trie_set_info    info{};
    const trie_status st = trie_set_cache_get(sets->cache, (const uint8_t *) spec.data(), spec.size(), &a, &info);
    if (st != TRIE_OK) {
        refuse(truncated(trie_last_error(), 1000));  // a message fit for the client (an HTTP 400)
    }
    if (info.compiled) {
        LOG_INF("libtrie: compiled %s: %zu strings, %zu states, %.1f MB, in %.1f ms\n", info.what,
                trie_automaton_n_members(a), trie_automaton_n_states(a), trie_automaton_memory_usage(a) / 1e6,
                info.seconds * 1e3);
    }
    return std::shared_ptr<const trie_automaton>(
        a, [](const trie_automaton * p) { trie_automaton_free(const_cast<trie_automaton *>(p)); });
}

uint64_t common_libtrie_parse_u64(const std::string & value, const char * what) {
    std::string digits;
    for (char ch : value) {
        if (ch == '_') continue;
        if (ch < '0' || ch > '9') {
            throw std::invalid_argument(std::string(what) + ": expected a non-negative integer, got '" + value + "'");
        }
        digits.push_back(ch);
    }
    if (digits.empty() || digits.size() > 19) {
        throw std::invalid_argument(std::string(what) + ": expected a non-negative integer, got '" + value + "'");
    }
    return std::stoull(digits);
}

std::string common_libtrie_set_dir(const std::string & path) {
    if (path.empty()) {
        return "";
    }
    char * real = realpath(path.c_str(), nullptr);
    struct stat st {};
    if (real == nullptr || stat(real, &st) != 0 || !S_ISDIR(st.st_mode)) {
        free(real);
        throw std::invalid_argument("--trie-set-dir / LIBTRIE_SET_DIR: '" + path + "' is not a directory");
    }
    std::string out(real);
    free(real);
    return out;
}

common_libtrie_stats common_libtrie_get_stats() {
    std::vector<std::shared_ptr<set_cache>> live;
    {
        std::lock_guard<std::mutex> lock(g_mu);
        for (const auto & kv : g_by_fingerprint) {
            if (auto p = kv.second.lock()) {
                live.push_back(p);
            }
        }
    }
    common_libtrie_stats s;
    for (const auto & p : live) {
        trie_set_stats t{};
        if (trie_set_cache_stats(p->cache, &t) == TRIE_OK) {
            s.compiles += t.compiles;
            s.hits += t.hits;
            s.entries += t.entries;
        }
    }
    return s;
}
