// llama-libtrie-route.cpp - a request's "json_schema" / "grammar" served by libtrie when it is a set (see
// llama-libtrie.h, "Routing without a new field"). The recognizer (trie_recognize_with, within the operator's inline
// bounds) decides; everything it does not read as a set keeps llama.cpp's grammar path untouched. Also here: the
// request body's nesting bound (common_libtrie_check_body) and the reasoning-template decision.
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

llama_libtrie::lru<trie_automaton> g_routed;

std::atomic<uint32_t> g_max_json_depth{128};

std::string trimmed(const std::string & s) {
    const size_t b = s.find_first_not_of(" \t\r\n");
    return b == std::string::npos ? std::string() : s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

}  // namespace

std::atomic<bool> llama_libtrie::g_route{true};

void common_libtrie_set_route(bool on) {
    llama_libtrie::g_route = on;
}

llama_libtrie::recognize_bounds llama_libtrie::request_bounds(const common_params_libtrie & opts) {
    recognize_bounds b;
    b.max_text_bytes   = opts.max_inline_bytes * 12 + (64u << 10);
    b.max_members      = opts.max_inline_strings;
    b.max_member_bytes = opts.max_inline_bytes;
    b.max_depth        = opts.max_json_depth;
    return b;
}

std::string llama_libtrie::bounds_hint() {
    return " (this server's bounds: --trie-max-inline-strings / --trie-max-inline-bytes / --trie-max-json-depth); "
           "name a set of the set directory with \"trie\" instead";
}

std::string llama_libtrie::json_depth_error(const char * text, size_t len, uint32_t max_depth) {
#ifdef TRIE_RECOGNIZE_VLLM_TOOLS
    if (trie_json_check_depth((const uint8_t *) text, len, max_depth) == TRIE_OK) {
        return "";
    }
    return last_error(300);
#else
    uint32_t depth = 0;
    bool     in_string = false, escaped = false;
    for (size_t i = 0; i < len; ++i) {
        const char c = text[i];
        if (in_string) {
            if (escaped) {
                escaped = false;
            } else if (c == '\\') {
                escaped = true;
            } else if (c == '"') {
                in_string = false;
            }
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            if (++depth > max_depth) {
                return "JSON nested more than " + std::to_string(max_depth) + " levels deep (at byte " + std::to_string(i) +
                       "), more than the limit max_depth = " + std::to_string(max_depth);
            }
        } else if ((c == ']' || c == '}') && depth > 0) {
            --depth;
        }
    }
    return "";
#endif
}

std::unique_ptr<trie_recognized, void (*)(trie_recognized *)> llama_libtrie::recognize(uint32_t kind, const std::string & text,
                                                                                     const recognize_bounds & b) {
    using ptr = std::unique_ptr<trie_recognized, void (*)(trie_recognized *)>;
    trie_recognized * r = nullptr;
#ifdef TRIE_RECOGNIZE_VLLM_TOOLS
    trie_recognize_limits limits;
    trie_recognize_limits_init(&limits);
    limits.max_text_bytes   = b.max_text_bytes;
    limits.max_members      = b.max_members;
    limits.max_member_bytes = b.max_member_bytes;
    limits.max_depth        = b.max_depth;
    const trie_status st = trie_recognize_with(kind, (const uint8_t *) text.data(), text.size(), &limits, &r);
    if (st == TRIE_ERR_LIMIT_EXCEEDED) {
        throw over_bounds(last_error(600) + bounds_hint());
    }
    if (st != TRIE_OK) {
        refuse(last_error());
    }
    return ptr(r, trie_recognized_free);
#else
    // an older libtrie: the size and the nesting before it reads anything, members and bytes after
    if (text.size() > b.max_text_bytes) {
        throw over_bounds("the text is " + std::to_string(text.size()) + " bytes, more than the limit max_text_bytes = " +
                          std::to_string(b.max_text_bytes) + bounds_hint());
    }
    if (kind != TRIE_RECOGNIZE_GRAMMAR && kind != TRIE_RECOGNIZE_REGEX) {
        const std::string deep = json_depth_error(text.data(), text.size(), b.max_depth);
        if (!deep.empty()) {
            throw over_bounds(deep + bounds_hint());
        }
    }
    if (trie_recognize(kind, (const uint8_t *) text.data(), text.size(), &r) != TRIE_OK) {
        refuse(last_error());
    }
    ptr rec(r, trie_recognized_free);
    if (rec) {
        const size_t n = trie_recognized_n_members(rec.get());
        uint64_t     bytes = 0;
        for (size_t i = 0; i < n; ++i) {
            const uint8_t * m = nullptr;
            size_t          ml = 0;
            if (trie_recognized_member(rec.get(), i, &m, &ml) == TRIE_OK) {
                bytes += ml + 1;
            }
        }
        if (n > b.max_members || bytes > b.max_member_bytes) {
            throw over_bounds("a set of " + std::to_string(n) + " strings (" + std::to_string(bytes) +
                              " bytes), more than the limits max_members = " + std::to_string(b.max_members) +
                              ", max_member_bytes = " + std::to_string(b.max_member_bytes) + bounds_hint());
        }
    }
    return rec;
#endif
}

bool common_libtrie_is_set(const common_params_libtrie & opts, int shape, const std::string & text, const char * field) {
    if (!opts.route || !llama_libtrie::g_route) {
        return false;
    }
    try {
        return llama_libtrie::recognize(recognize_kind(shape), text, llama_libtrie::request_bounds(opts)) != nullptr;
    } catch (const llama_libtrie::over_bounds & e) {
        LOG_INF("libtrie: \"%s\" is over this server's bounds, llama.cpp serves it: %s\n", field, e.what());
        return false;  // not a set: llama.cpp's path, as without libtrie
    } catch (const std::invalid_argument & e) {
        refuse(std::string("\"") + field + "\": " + e.what());  // the chat endpoint's errors name no field
    }
}

void common_libtrie_set_max_json_depth(uint32_t depth) {
    g_max_json_depth = depth;
}

std::string common_libtrie_check_body(const std::string & body) {
    const uint32_t    max   = g_max_json_depth;
    const std::string error = llama_libtrie::json_depth_error(body.data(), body.size(), max);
    if (error.empty()) {
        return "";
    }
    return "the request body is refused before it is parsed: " + error + " (this server's bound: --trie-max-json-depth / "
           "LIBTRIE_MAX_JSON_DEPTH " + std::to_string(max) + ")";
}

bool common_libtrie_reasoning_first(const std::string & generation_prompt, const std::string & thinking_start_tag,
                                    const std::vector<std::string> & thinking_end_tags, bool enable_thinking) {
    const std::string start = trimmed(thinking_start_tag);
    if (start.empty() && thinking_end_tags.empty()) {
        return false;  // the template has no reasoning block
    }
    if (!start.empty()) {
        // a block the generation prompt opens and does not close (a template that forces "<think>" open)
        const size_t open = generation_prompt.rfind(start);
        if (open != std::string::npos) {
            bool closed = false;
            for (const auto & tag : thinking_end_tags) {
                const std::string end = trimmed(tag);
                const size_t      at  = end.empty() ? std::string::npos : generation_prompt.rfind(end);
                closed = closed || (at != std::string::npos && at > open);
            }
            if (!closed) {
                return true;
            }
            return false;  // opened and closed by the prompt (thinking off): the content comes next
        }
    }
    return enable_thinking;  // the model may open a block itself
}

std::shared_ptr<const trie_automaton> common_libtrie_route(const common_params_libtrie & opts,
                                                           const llama_vocab *           vocab,
                                                           int                           shape,
                                                           const std::string &           text) {
    if (!opts.route || !llama_libtrie::g_route) {
        return nullptr;
    }
    std::unique_ptr<trie_recognized, void (*)(trie_recognized *)> r(nullptr, trie_recognized_free);
    try {
        r = llama_libtrie::recognize(recognize_kind(shape), text, llama_libtrie::request_bounds(opts));
    } catch (const llama_libtrie::over_bounds & e) {
        LOG_INF("libtrie: a %s over this server's bounds, llama.cpp serves it: %s\n", shape_name(shape), e.what());
        return nullptr;  // over the bounds: llama.cpp's grammar path, as without libtrie
    }
    if (!r) {
        return nullptr;  // not a set: llama.cpp's grammar path
    }
    const size_t n = trie_recognized_n_members(r.get());
    const uint8_t * const * strings = nullptr;
    const size_t *          lens    = nullptr;
    if (trie_recognized_members(r.get(), &strings, &lens) != TRIE_OK) {
        refuse(std::string("libtrie: ") + llama_libtrie::last_error());
    }
    const auto   sets = llama_libtrie::sets_of(opts, vocab);
    std::string  key  = llama_libtrie::fingerprint_hex(sets->vocab) + (shape == COMMON_LIBTRIE_JSON_SCHEMA ? "s" : "g") + text;
    bool         made = false;
    const auto   t0   = std::chrono::steady_clock::now();
    std::shared_ptr<const trie_automaton> a;
    try {
    a = g_routed.get(key, opts.cache_size, [&]() -> std::shared_ptr<const trie_automaton> {
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
        const trie_status st = llama_libtrie::compile_template(opts, sets->vocab, strings, lens, n, &t, &o, &out);
        if (st == TRIE_ERR_LIMIT_EXCEEDED) {  // --trie-max-states / --trie-max-bytes
            throw llama_libtrie::over_bounds(llama_libtrie::last_error());
        }
        if (st != TRIE_OK) {
            refuse("libtrie cannot serve this set: " + llama_libtrie::last_error());
        }
        return std::shared_ptr<const trie_automaton>(
            out, [](const trie_automaton * p) { trie_automaton_free(const_cast<trie_automaton *>(p)); });
    }, &made);
    } catch (const llama_libtrie::over_bounds & e) {
        LOG_INF("libtrie: a %s over this server's compile bounds, llama.cpp serves it: %s\n", shape_name(shape), e.what());
        return nullptr;
    }
    if (made) {
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        LOG_INF("libtrie: routed a %s set of %zu strings (%zu states) in %.1f ms\n", shape_name(shape), n,
                trie_automaton_n_states(a.get()), ms);
    }
    return a;
}
