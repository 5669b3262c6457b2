// llama-libtrie.cpp - request sets for llama-server, through libtrie's request-set front end (trie_set_cache_*).
// See llama-libtrie.h. Compiled into llama-common by patches/llama-server-libtrie.patch (-DLLAMA_LIBTRIE=ON).
//
// Spec parsing, confinement of set files, reading, inline bounds and the LRU of compiled sets are libtrie's
// (src/sets, the same code the vLLM processor uses); this file only maps a model's vocabulary to its set cache.

#include "llama-libtrie.h"

#include "llama-libtrie-internal.h"  // llama-libtrie-registry.h
#include "llama-libtrie-stage.h"     // llama.h, trie.h, trie_llama.h

#include "json.h"
#include "log.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <sys/stat.h>

namespace {

[[noreturn]] void refuse(const std::string & msg) {
    throw std::invalid_argument(msg);
}

std::string truncated(const char * msg, size_t n = 600) {
    std::string s = msg ? msg : "";
    return s.size() <= n ? s : s.substr(0, n) + "...";
}

// ---- one set cache per vocabulary (llama-libtrie-registry.h) -------------------------------------------------

llama_libtrie::registry g_registry;

uint64_t fnv(uint64_t h, const void * data, size_t n) {
    const auto * p = (const unsigned char *) data;
    for (size_t i = 0; i < n; ++i) {
        h = (h ^ p[i]) * 1099511628211ull;
    }
    return h;
}

// What identifies a llama_vocab's content for libtrie: token texts, attributes, the end-of-generation ids (about a
// millisecond for 150,000 tokens, once per request that names a set).
uint64_t signature_of(const llama_vocab * vocab) {
    const int32_t n = llama_vocab_n_tokens(vocab);
    uint64_t      h = fnv(14695981039346656037ull, &n, sizeof n);
    for (int32_t id = 0; id < n; ++id) {
        const char *  text = llama_vocab_get_text(vocab, id);
        const size_t  len  = text ? std::strlen(text) : 0;
        const int32_t attr = (int32_t) llama_vocab_get_attr(vocab, id);
        const uint8_t eog  = llama_vocab_is_eog(vocab, id) ? 1 : 0;
        h = fnv(h, &len, sizeof len);
        h = fnv(h, text, len);
        h = fnv(h, &attr, sizeof attr);
        h = fnv(h, &eog, 1);
    }
    return h;
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
    c.cache_dir          = opts.compiled_dir.empty() ? nullptr : opts.compiled_dir.c_str();
    return c;
}

// The trie vocabulary of a model (a new reference), logged.
trie_vocab * build_vocab(const llama_vocab * vocab) {
    const auto t0 = std::chrono::steady_clock::now();
    trie_vocab * tv = nullptr;
    const trie_status st = trie_llama_vocab(vocab, &tv);
    if (st != TRIE_OK) {
        // not the request's fault, but the request cannot be served: say why
        refuse(std::string("libtrie cannot use this model's vocabulary: ") + trie_status_str(st) + ": " +
               truncated(trie_last_error()));
    }
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    LOG_INF("libtrie: vocabulary of %zu tokens built in %.1f ms\n", trie_vocab_n_tokens(tv), ms);
    return tv;
}

}  // namespace

std::shared_ptr<llama_libtrie::set_cache> llama_libtrie::sets_of(const common_params_libtrie & opts,
                                                                 const llama_vocab *           vocab) {
    if (vocab == nullptr) {
        refuse("libtrie: no vocabulary");
    }
    const trie_set_config config = config_of(opts);
    return g_registry.get(vocab, signature_of(vocab), config, [&] { return build_vocab(vocab); });
}

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
    const auto sets = llama_libtrie::sets_of(opts, vocab);
    trie_automaton * a = nullptr;
    trie_set_info    info{};
    const trie_status st = trie_set_cache_get(sets->cache, (const uint8_t *) spec.data(), spec.size(), &a, &info);
    if (st != TRIE_OK) {
        refuse(truncated(trie_last_error(), 1000));  // a message fit for the client (an HTTP 400)
    }
    if (info.loaded) {  // another server (or an earlier run) compiled it into --trie-compiled-dir
        LOG_INF("libtrie: mapped %s from the compiled directory, not compiled: %zu strings, %zu states, in %.1f ms\n",
                info.what, trie_automaton_n_members(a), trie_automaton_n_states(a), info.seconds * 1e3);
    } else if (info.compiled) {
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

std::string common_libtrie_registry_name(const std::string & value, const char * what) {
    if (value.empty() || value == "." || value == ".." || value.find('/') != std::string::npos
        || value.find('\0') != std::string::npos) {
        throw std::invalid_argument(std::string(what) + ": '" + value + "' is not a registry name (NAME for the file "
                                    "NAME.json of --trie-set-dir)");
    }
    return value;
}

std::string common_libtrie_compiled_dir(const std::string & path) {
    if (path.empty()) {
        return "";
    }
    trie_compiled_dir * d = nullptr;  // creates it (0700) if missing, and checks it is a directory
    if (trie_compiled_dir_new(path.c_str(), &d) != TRIE_OK) {
        throw std::invalid_argument(llama_libtrie::last_error());
    }
    trie_compiled_dir_free(d);
    char *      real = realpath(path.c_str(), nullptr);
    std::string out  = real ? std::string(real) : path;
    free(real);
    return out;
}

trie_status llama_libtrie::compile_template(const common_params_libtrie & opts, const trie_vocab * vocab,
                                            const uint8_t * const * strings, const size_t * lens, size_t n,
                                            const trie_template * t, const trie_options * o, trie_automaton ** out) {
    if (opts.compiled_dir.empty()) {
        return trie_compile_template(vocab, strings, lens, n, t, o, out);
    }
    static std::mutex                                     mutex;
    static std::unordered_map<std::string, trie_compiled_dir *> dirs;  // kept for the process's life
    trie_compiled_dir * dir = nullptr;
    {
        std::lock_guard<std::mutex> lock(mutex);
        auto it = dirs.find(opts.compiled_dir);
        if (it == dirs.end()) {
            const trie_status st = trie_compiled_dir_new(opts.compiled_dir.c_str(), &dir);
            if (st != TRIE_OK) {
                return st;
            }
            it = dirs.emplace(opts.compiled_dir, dir).first;
        }
        dir = it->second;
    }
    return trie_compiled_dir_compile_template(dir, vocab, strings, lens, n, t, o, out, nullptr);
}

common_libtrie_stats common_libtrie_get_stats() {
    common_libtrie_stats s;
    g_registry.each([&](const trie_set_cache * cache) {
        trie_set_stats t{};
        if (trie_set_cache_stats(cache, &t) == TRIE_OK) {
            s.compiles += t.compiles;
            s.hits += t.hits;
            s.entries += t.entries;
        }
    });
    return s;
}

std::string llama_libtrie::fingerprint_hex(const trie_vocab * vocab) {
    uint8_t fp[16] = {};
    if (trie_vocab_fingerprint(vocab, fp) != TRIE_OK) {
        refuse(std::string("libtrie: ") + truncated(trie_last_error()));
    }
    static const char * hex = "0123456789abcdef";
    std::string out;
    for (uint8_t b : fp) {
        out.push_back(hex[b >> 4]);
        out.push_back(hex[b & 15]);
    }
    return out;
}

std::string llama_libtrie::last_error(size_t n) {
    return truncated(trie_last_error(), n);
}
