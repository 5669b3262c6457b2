// llama-libtrie-route.cpp - a request's "json_schema" / "grammar" served by libtrie when it is a set (see
// llama-libtrie.h, "Routing without a new field"). The recognizer (trie_recognize) decides; everything it does
// not read as a set keeps llama.cpp's grammar path untouched.
//
// Invariants: the compiled language is exactly the recognized set's (prefix + render(member) + suffix, ended by
// end-of-generation); a recognized set is compiled once per (vocabulary, shape, text) and kept in an LRU of
// --trie-cache-size entries; sizes are bounded by the inline limits before anything is compiled.

#include "llama-libtrie-internal.h"
#include "llama-libtrie-stage.h"  // llama.h, trie.h, trie_llama.h

#include "log.h"

#include <chrono>
#include <stdexcept>
#include <vector>

namespace {

[[noreturn]] void refuse(const std::string & msg) {
    throw std::invalid_argument(msg);
}

const char * shape_name(int shape) {
    return shape == COMMON_LIBTRIE_JSON_SCHEMA ? "json_schema" : "grammar";
}

uint32_t recognize_kind(int shape) {
    switch (shape) {
        case COMMON_LIBTRIE_JSON_SCHEMA: return TRIE_RECOGNIZE_JSON_SCHEMA;
        case COMMON_LIBTRIE_GRAMMAR:     return TRIE_RECOGNIZE_GRAMMAR;
        default: refuse("libtrie: unknown request shape");
    }
}

using recognized_ptr = std::unique_ptr<trie_recognized, void (*)(trie_recognized *)>;

// The recognized set of `text`, or a null pointer when it is not a set. Throws for malformed input.
recognized_ptr recognize(int shape, const std::string & text) {
    trie_recognized * r = nullptr;
    const trie_status st = trie_recognize(recognize_kind(shape), (const uint8_t *) text.data(), text.size(), &r);
    if (st != TRIE_OK) {
        // llama.cpp names the field of a bad json_schema itself; a grammar's error is named here
        refuse((shape == COMMON_LIBTRIE_GRAMMAR ? std::string("\"grammar\": ") : std::string()) + llama_libtrie::last_error());
    }
    return recognized_ptr(r, trie_recognized_free);
}

llama_libtrie::lru<trie_automaton> g_routed;

}  // namespace

std::atomic<bool> llama_libtrie::g_route{true};

void common_libtrie_set_route(bool on) {
    llama_libtrie::g_route = on;
}

bool common_libtrie_is_set(int shape, const std::string & text) {
    return llama_libtrie::g_route && recognize(shape, text) != nullptr;
}

std::shared_ptr<const trie_automaton> common_libtrie_route(const common_params_libtrie & opts,
                                                           const llama_vocab *           vocab,
                                                           int                           shape,
                                                           const std::string &           text) {
    if (!opts.route || !llama_libtrie::g_route) {
        return nullptr;
    }
    // the text bound of an inline set spec: room for the inline bytes with every character escaped
    const uint64_t max_text = opts.max_inline_bytes * 12 + (64u << 10);
    if (text.size() > max_text) {
        refuse(std::string("\"") + shape_name(shape) + "\" is " + std::to_string(text.size()) +
               " bytes, more than this server reads for a set (" + std::to_string(max_text) +
               "); name a set of the set directory with \"trie\" instead");
    }
    recognized_ptr r = recognize(shape, text);
    if (!r) {
        return nullptr;  // not a set: llama.cpp's grammar path
    }
    const size_t n = trie_recognized_n_members(r.get());
    const uint8_t * const * strings = nullptr;
    const size_t *          lens    = nullptr;
    if (trie_recognized_members(r.get(), &strings, &lens) != TRIE_OK) {
        refuse(std::string("libtrie: ") + llama_libtrie::last_error());
    }
    uint64_t bytes = 0;
    for (size_t i = 0; i < n; ++i) {
        bytes += lens[i] + 1;
    }
    if (n > opts.max_inline_strings || bytes > opts.max_inline_bytes) {
        refuse(std::string("\"") + shape_name(shape) + "\" is a set of " + std::to_string(n) + " strings (" +
               std::to_string(bytes) + " bytes), more than this server compiles from a request (" +
               std::to_string(opts.max_inline_strings) + " strings, " + std::to_string(opts.max_inline_bytes) +
               " bytes: --trie-max-inline-strings / --trie-max-inline-bytes); name a set of the set directory with \"trie\" instead");
    }
    const auto   sets = llama_libtrie::sets_of(opts, vocab);
    std::string  key  = llama_libtrie::fingerprint_hex(sets->vocab) + (shape == COMMON_LIBTRIE_JSON_SCHEMA ? "s" : "g") + text;
    bool         made = false;
    const auto   t0   = std::chrono::steady_clock::now();
    auto a = g_routed.get(key, opts.cache_size, [&]() -> std::shared_ptr<const trie_automaton> {
        trie_template t;
        trie_template_init(&t);
        trie_recognized_prefix(r.get(), &t.prefix, &t.prefix_len);
        trie_recognized_suffix(r.get(), &t.suffix, &t.suffix_len);
        t.render = trie_recognized_render(r.get());
        t.end    = trie_recognized_end(r.get());
        trie_options o;
        trie_options_init(&o);
        o.max_states = opts.max_states;
        o.max_bytes  = opts.max_bytes;
        trie_automaton * out = nullptr;
        if (trie_compile_template(sets->vocab, strings, lens, n, &t, &o, &out) != TRIE_OK) {
            refuse(std::string("\"") + shape_name(shape) + "\": libtrie cannot serve this set: " + llama_libtrie::last_error());
        }
        return std::shared_ptr<const trie_automaton>(
            out, [](const trie_automaton * p) { trie_automaton_free(const_cast<trie_automaton *>(p)); });
    }, &made);
    if (made) {
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        LOG_INF("libtrie: routed a %s set of %zu strings (%zu states) in %.1f ms\n", shape_name(shape), n,
                trie_automaton_n_states(a.get()), ms);
    }
    return a;
}
