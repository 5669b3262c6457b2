// llama-libtrie-tools.cpp - tool calls through libtrie (see llama-libtrie.h, "Tool calls").
//
// Output: section_start ["\n"] {"name": NAME, "arguments": ARGS}["\n" section_end], end-of-generation. With
// "auto" (lazy, JSON-native templates with a section marker) the stage first waits for section_start (llama.cpp's
// lazy-grammar trigger, as a word and, when it is one token, as that token) and constrains nothing before it.
//   - NAME: a segment of an open template (trie_compile_template, TRIE_END_OPEN) over the tools' names: the
//     output names exactly one of them; no crossing tokens are offered, so the hand-over happens at the token
//     boundary right after `, "arguments": ` (the segment stage's contract with offer = NULL);
//   - ARGS and the rest: the chosen tool's grammar only, built with llama.cpp's grammar builder (build_grammar:
//     the tool's "parameters" added with add_schema, the call's closing text with add_rule, which pick unique rule
//     names), for every tool when the tools are compiled: a tool whose parameters are not an object schema, or
//     that llama.cpp's converter refuses (a dangling $ref, an unsupported keyword), refuses the request (or the
//     registry), never a call cut short.
// Parallel calls ("parallel_tool_calls": true, a template with both markers): after a call's "\n" section_end, the
// response ends or another call follows ("\n" section_start "\n" {"name": ...), each name from the set and each
// argument object by its own tool's grammar; otherwise exactly one call (enforced by the stage). After the name,
// common_sampler checks the argument grammar after sampling (common_libtrie_stage_check_after), as its own grammar.
// Sources of tools: the request's "tools" (recognized within the inline limits) or an operator registry, the
// file NAME.json of the set directory (libtrie's trie_registry_*: confined like a set file, looked up by the
// file's identity before it is read, bounded by --trie-max-file-bytes), compiled once and kept in an LRU
// (--trie-cache-size) like a named set.
//
// "trie_tools" is internal: the chat endpoint writes it with a per-process secret, and a value without it (a
// client's) is refused.
//
// Lifetime: a stage's `user` is the common_libtrie_tools it was made for; the request's sampling parameters
// (common_params_sampling::trie_tools, copied into every common_sampler and its clones) keep it alive.

#include "llama-libtrie-internal.h"
#include "llama-libtrie-stage.h"  // llama.h, trie.h, trie_llama.h

#include "json-schema-to-grammar.h"
#include "json-schema.h"
#include "json.h"
#include "log.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <stdexcept>
#include <vector>

using json = common_json;

struct common_libtrie_tools {
    std::shared_ptr<const trie_automaton> automaton;    // the names' segments, open
    std::vector<std::string>              names;        // by member index
    std::vector<std::string>              parameters;   // JSON schema text, by member index
    std::string                           section_end;  // "" or e.g. "</tool_call>"
    std::string                           trigger;      // lazy ("auto"): section_start, the stage waits for it; "" eager
    const llama_vocab *                   vocab = nullptr;  // part of the cache key
    // parallel_tool_calls: true (a template with section markers): after a call's section_end, end-of-generation or
    // another call, "\n" section_start "\n" {"name": ... (this automaton, the same names); nullptr: one call
    std::shared_ptr<const trie_automaton> again;

    std::vector<std::string>              grammars;     // by member index: the GBNF of what follows the name
};

namespace {

[[noreturn]] void refuse(const std::string & msg) {
    throw std::invalid_argument(msg);
}

const size_t MAX_SECTION_BYTES = 256;

llama_libtrie::lru<common_libtrie_tools> g_tools;

// The internal "trie_tools" value's secret: 128 random bits per process, written by common_libtrie_chat_tools and
// checked by common_libtrie_tools_resolve (a client cannot send a value the server accepts as its own).
const std::string & secret() {
    static const std::string value = [] {
        std::random_device rd;
        char buf[40];
        snprintf(buf, sizeof buf, "%08x%08x%08x%08x", rd(), rd(), rd(), rd());
        return std::string(buf);
    }();
    return value;
}

// The registries of the set directory (libtrie's trie_registry_cache), created on first use.
struct registry_cache {
    trie_registry_cache * cache = nullptr;
    ~registry_cache() { trie_registry_cache_free(cache); }
};

trie_registry_cache * registries(const common_params_libtrie & opts) {
    static std::mutex                      mu;
    static std::unique_ptr<registry_cache> held;
    std::lock_guard<std::mutex> lock(mu);
    if (!held) {
        auto r = std::make_unique<registry_cache>();
        if (trie_registry_cache_new(opts.set_dir.c_str(), opts.max_file_bytes, 0, opts.cache_size, &r->cache) != TRIE_OK) {
            refuse("libtrie cannot read registries: " + llama_libtrie::last_error());
        }
        held = std::move(r);
    }
    return held->cache;
}

using registry_ptr = std::unique_ptr<trie_registry, void (*)(const trie_registry *)>;

// The registry NAME of the set directory: opened confined, looked up by the file's identity before it is read.
registry_ptr open_registry(const common_params_libtrie & opts, const std::string & name, std::string & identity) {
    if (opts.set_dir.empty()) {
        refuse("\"trie\": {\"registry\": ...} needs a set directory on the server (--trie-set-dir)");
    }
    trie_registry * r = nullptr;
    if (trie_registry_cache_get(registries(opts), (const uint8_t *) name.data(), name.size(), &r, nullptr) != TRIE_OK) {
        refuse("\"trie\": " + llama_libtrie::last_error());
    }
    registry_ptr reg(r, trie_registry_free);
    uint8_t id[16] = {};
    trie_registry_identity(reg.get(), id);
    static const char * hex = "0123456789abcdef";
    identity.clear();
    for (uint8_t b : id) {
        identity.push_back(hex[b >> 4]);
        identity.push_back(hex[b & 15]);
    }
    return reg;
}

// The GBNF of what follows a tool's name: its arguments (the "parameters" schema, which must describe objects),
// "}", and the call's closing text; built with llama.cpp's grammar builder, which picks unique rule names (a
// parameter named "tool_args" or "root" gets rules of its own). Throws std::invalid_argument naming the tool.
std::string argument_grammar(const std::string & tool, const std::string & parameters, const std::string & section_end) {
    const std::string what = "the tool '" + tool + "': ";
    json schema;
    try {
        schema = json::parse(parameters);
    } catch (const std::exception & e) {
        refuse(what + "\"parameters\" is not JSON: " + e.what());
    }
    if (!schema.is_object()) {
        refuse(what + "\"parameters\" must be a JSON schema object");
    }
    // OpenAI: the arguments are an object; a schema without type or structure (a description only) is read as one
    static const char * structural[] = { "type", "anyOf", "oneOf", "allOf", "$ref", "enum", "const", "not", "items",
                                         "prefixItems", "pattern", "properties" };
    bool has_structure = false;
    for (const char * k : structural) {
        has_structure = has_structure || schema.contains(k);
    }
    if (!has_structure) {
        schema["type"] = "object";
    }
    try {
        common_chat_schema_document doc = common_chat_schema_from_json(schema);
        if (!doc.root || !doc.root->value_types().is_only(common_chat_schema::TYPE_OBJECT)) {
            refuse(what + "\"parameters\" must describe an object (\"type\": \"object\"): the arguments of a call are "
                   "a JSON object");
        }
        std::string root;
        std::string g = build_grammar([&](const common_grammar_builder & b) {
            std::string tail = b.add_schema("tool-args", *doc.root) + " " + gbnf_format_literal("}");
            if (!section_end.empty()) {
                tail += " " + gbnf_format_literal("\n" + section_end);
            }
            root = b.add_rule("root", tail);
        });
        if (root != "root") {
            refuse(what + "the argument grammar has no root rule");
        }
        return g;
    } catch (const std::invalid_argument &) {
        throw;
    } catch (const std::exception & e) {
        refuse(what + "llama.cpp cannot constrain its arguments: " + e.what());
    }
}

// Fail closed: a stage that allows only end-of-generation (libtrie's set of the empty string): the call is cut
// short, never invalid. NULL only if even that cannot be allocated.
llama_sampler * end_here(const common_libtrie_tools * t) {
    trie_vocab *    v     = trie_automaton_vocab(t->automaton.get());
    const uint8_t * empty = (const uint8_t *) "";
    const size_t    zero  = 0;
    trie_automaton * a    = nullptr;
    llama_sampler *  s    = nullptr;
    if (v && trie_compile(v, &empty, &zero, 1, nullptr, &a) == TRIE_OK) {
        s = trie_llama_sampler_init(a);
    }
    trie_automaton_free(a);
    trie_vocab_free(v);
    return s;
}

llama_sampler * next_of(void * user, size_t member, const uint8_t * overflow, size_t len) {
    const auto * t = (const common_libtrie_tools *) user;
    (void) overflow;  // offer = NULL: no crossing token, so no overflow
    const std::string & g = member < t->grammars.size() && len == 0 ? t->grammars[member] : std::string();
    llama_sampler *     s = g.empty() ? nullptr : llama_sampler_init_grammar(t->vocab, g.c_str(), "root");
    if (s == nullptr) {
        LOG_ERR("libtrie: no argument grammar for tool %zu; the call ends here\n", member);
        return end_here(t);
    }
    return s;
}

// A tool list recognized, with every tool's argument grammar: what the chat endpoint checks before the template
// sees the tools, and what common_libtrie_tools_resolve compiles for a vocabulary (the same object, from an LRU).
struct prepared_tools {
    std::vector<std::string> names;       // by member index
    std::vector<std::string> parameters;  // JSON schema text
    std::vector<std::string> grammars;    // argument_grammar of each
};

llama_libtrie::lru<prepared_tools> g_prepared;

// The request's "tools" (`text`: their JSON) or the registry `registry` (when not ""), recognized within the
// bounds, each tool's argument grammar built; cached by the text or the registry file's identity (`source` is
// set to the key part that names it). Throws std::invalid_argument naming the client's field.
std::shared_ptr<const prepared_tools> prepare(const common_params_libtrie & opts, const std::string & text,
                                              const std::string & registry, const std::string & section_end,
                                              std::string & source) {
    const std::string field = registry.empty() ? "\"tools\": " : "\"trie\": the registry '" + registry + "': ";
    registry_ptr      reg(nullptr, trie_registry_free);
    if (!registry.empty()) {
        std::string identity;
        reg    = open_registry(opts, registry, identity);  // looked up by identity before it is read
        source = "r" + registry + ":" + identity;
    } else {
        source = "t" + text;
    }
    return g_prepared.get(section_end + "\x01" + source, opts.cache_size, [&]() -> std::shared_ptr<const prepared_tools> {
        const auto t0 = std::chrono::steady_clock::now();
        auto p = std::make_shared<prepared_tools>();
        if (reg) {
            for (size_t i = 0, n = trie_registry_n_tools(reg.get()); i < n; ++i) {
                const uint8_t * b = nullptr; size_t bl = 0;
                const uint8_t * q = nullptr; size_t ql = 0;
                if (trie_registry_tool(reg.get(), i, &b, &bl, &q, &ql) != TRIE_OK) {
                    refuse("libtrie: " + llama_libtrie::last_error());
                }
                p->names.emplace_back((const char *) b, bl);
                p->parameters.emplace_back((const char *) q, ql);
            }
        } else {
            std::unique_ptr<trie_recognized, void (*)(trie_recognized *)> rec(nullptr, trie_recognized_free);
            try {
                rec = llama_libtrie::recognize(TRIE_RECOGNIZE_TOOLS, text, llama_libtrie::request_bounds(opts));
            } catch (const llama_libtrie::over_bounds &) {
                throw;  // inline tools over the bounds: llama.cpp's path (common_libtrie_chat_tools)
            } catch (const std::invalid_argument & e) {
                refuse(field + e.what());
            }
            if (!rec) {
                refuse(field + "not a list of functions: " + trie_recognize_reason());
            }
            for (size_t i = 0, n = trie_recognized_n_members(rec.get()); i < n; ++i) {
                const uint8_t * b = nullptr; size_t bl = 0;
                const uint8_t * q = nullptr; size_t ql = 0;
                if (trie_recognized_member(rec.get(), i, &b, &bl) != TRIE_OK || trie_recognized_payload(rec.get(), i, &q, &ql) != TRIE_OK) {
                    refuse("libtrie: " + llama_libtrie::last_error());
                }
                p->names.emplace_back((const char *) b, bl);
                p->parameters.emplace_back((const char *) q, ql);
            }
        }
        for (size_t i = 0; i < p->names.size(); ++i) {
            try {
                p->grammars.push_back(argument_grammar(p->names[i], p->parameters[i], section_end));
            } catch (const std::invalid_argument & e) {
                refuse(field + e.what());
            }
        }
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        LOG_INF("libtrie: argument grammars of %zu tools built in %.1f ms\n", p->names.size(), ms);
        return p;
    });
}

// The markers without their surrounding whitespace (Qwen2.5's analysis gives "<tool_call>\n"): the call writes
// one "\n" after the start and before the end, and the lazy trigger is the marker itself.
std::string trim(const std::string & m) {
    const size_t b = m.find_first_not_of(" \t\r\n");
    return b == std::string::npos ? std::string() : m.substr(b, m.find_last_not_of(" \t\r\n") - b + 1);
}

}  // namespace

std::string common_libtrie_chat_tools(const common_params_libtrie & opts, const json & body,
                                      const common_libtrie_tool_format & format) {
    const json tools   = body.contains("tools") ? body.at("tools") : json();
    const json choice  = body.contains("tool_choice") ? body.at("tool_choice") : json();
    const json trie    = body.contains("trie") ? body.at("trie") : json();
    // --trie-no-route leaves "tools" to llama.cpp, but a registry ("trie" field) is libtrie's either way: llama.cpp
    // cannot express a tool that is not in the request
    if ((!llama_libtrie::g_route || !opts.route) && !(trie.is_object() && trie.contains("registry"))) {
        return "";
    }
    const bool has_tools = tools.is_array() && !tools.empty();

    std::string only;
    if (choice.is_object()) {  // {"type": "function", "function": {"name": NAME}}
        if (!choice.contains("function") || !choice.at("function").is_object()
            || !choice.at("function").contains("name") || !choice.at("function").at("name").is_string()) {
            refuse("\"tool_choice\": a named tool is {\"type\": \"function\", \"function\": {\"name\": NAME}}");
        }
        only = choice.at("function").at("name").get<std::string>();
    }
    json spec = json::object();
    std::string registry;
    if (trie.is_object() && trie.contains("registry")) {
        if (!trie.at("registry").is_string()) {
            refuse("\"trie\": \"registry\" must be a string (a registry of the set directory)");
        }
        if (choice.is_string() && choice.get<std::string>() == "none") {
            refuse("\"trie\": {\"registry\": ...} asks for a tool call, but \"tool_choice\" is \"none\"");
        }
        registry = trie.at("registry").get<std::string>();
        spec["registry"] = registry;
    } else if (has_tools && (only.size() > 0 || (choice.is_string() && choice.get<std::string>() == "required"))) {
        spec["tools"] = tools;
    } else if (has_tools && (choice.is_null() || (choice.is_string() && choice.get<std::string>() == "auto"))
               && format.native && format.section_start.find_first_not_of(" \t\r\n") != std::string::npos) {
        spec["tools"] = tools;  // "auto": the model may answer, or open a call with the template's section marker
        spec["lazy"]  = true;
    } else {
        return "";  // "auto" / "none" / no tools: llama.cpp's own path
    }
    spec["section_start"] = format.native ? trim(format.section_start) : std::string();
    spec["section_end"]   = format.native ? trim(format.section_end) : std::string();
    // parallel_tool_calls: true serves several calls where the template has markers to delimit them; anything else
    // (false, absent, a bare-JSON template) serves exactly one call: enforced by the stage, not filtered afterwards
    const json parallel = body.contains("parallel_tool_calls") ? body.at("parallel_tool_calls") : json();
    if (parallel.is_boolean() && parallel.get<bool>() && !spec["section_start"].get<std::string>().empty()
        && !spec["section_end"].get<std::string>().empty()) {
        spec["parallel"] = true;
    }
    // checked now, before the template sees the tools: refusals name the client's fields
    std::string source;
    std::shared_ptr<const prepared_tools> prepared;
    try {
        prepared = prepare(opts, registry.empty() ? tools.dump() : std::string(), registry,
                           spec["section_end"].get<std::string>(), source);
    } catch (const llama_libtrie::over_bounds & e) {
        if (!registry.empty()) {
            refuse("\"trie\": the registry '" + registry + "': " + e.what());
        }
        LOG_INF("libtrie: \"tools\" over this server's bounds, llama.cpp serves them: %s\n", e.what());
        return "";  // the request's own tools over the bounds: llama.cpp's own path, as without libtrie
    }
    if (!only.empty()) {
        bool found = false;
        for (const auto & n : prepared->names) {
            found = found || n == only;
        }
        if (!found) {
            refuse("\"tool_choice\" names the tool '" + only + "', which is not one of the " +
                   (registry.empty() ? std::string("\"tools\"") : "registry '" + registry + "'"));
        }
        spec["only"] = only;
    }
    spec["secret"] = secret();
    return spec.dump();
}

std::shared_ptr<const common_libtrie_tools> common_libtrie_tools_resolve(const common_params_libtrie & opts,
                                                                         const llama_vocab *           vocab,
                                                                         const json &                  value) {
    if (!value.is_object() || !value.contains("secret") || !value.at("secret").is_string()
        || value.at("secret").get<std::string>() != secret()) {
        refuse("this field is not a request field (the server sets it internally for tool calls): send \"tools\" with "
               "\"tool_choice\", or \"trie\": {\"registry\": NAME}");
    }
    auto str = [&](const char * key) -> std::string {
        return value.contains(key) && value.at(key).is_string() ? value.at(key).get<std::string>() : std::string();
    };
    const std::string section_start = str("section_start");
    const std::string section_end   = str("section_end");
    const std::string only          = str("only");
    const std::string registry      = str("registry");
    const bool        lazy          = value.contains("lazy") && value.at("lazy").is_boolean() && value.at("lazy").get<bool>();
    const bool        parallel      = value.contains("parallel") && value.at("parallel").is_boolean()
                                      && value.at("parallel").get<bool>() && !section_end.empty();
    if ((lazy && section_start.empty()) || section_start.size() > MAX_SECTION_BYTES || section_end.size() > MAX_SECTION_BYTES) {
        refuse("libtrie: the template's tool-call markers cannot be served");
    }
    if (registry.empty() && !(value.contains("tools") && value.at("tools").is_array())) {
        refuse("libtrie: no tools");
    }
    std::string source;
    const auto  prepared = prepare(opts, registry.empty() ? value.at("tools").dump() : std::string(), registry, section_end, source);
    const auto  sets = llama_libtrie::sets_of(opts, vocab);
    char        addr[32];
    snprintf(addr, sizeof addr, "%p", (const void *) vocab);
    const std::string key = std::string(addr) + llama_libtrie::fingerprint_hex(sets->vocab) + "\x01" + section_start + "\x01" +
                            section_end + "\x01" + only + (lazy ? "\x01L" : "\x01E") + (parallel ? "P" : "1") + source;
    bool made = false;
    const auto t0 = std::chrono::steady_clock::now();
    auto tools = g_tools.get(key, opts.cache_size, [&]() -> std::shared_ptr<const common_libtrie_tools> {
        auto t = std::make_shared<common_libtrie_tools>();
        t->vocab       = vocab;
        t->section_end = section_end;
        t->trigger     = lazy ? section_start : std::string();
        for (size_t i = 0; i < prepared->names.size(); ++i) {
            if (!only.empty() && prepared->names[i] != only) {
                continue;
            }
            t->names.push_back(prepared->names[i]);
            t->parameters.push_back(prepared->parameters[i]);
            t->grammars.push_back(prepared->grammars[i]);
        }
        if (t->names.empty()) {
            refuse("\"tool_choice\" names the tool '" + only + "', which is not one of the tools");
        }
        // the name's segment: section_start ["\n"] {"name": NAME, "arguments":   (open: the arguments follow);
        // lazy: the stage waits for section_start, the segment begins after it
        std::string prefix = section_start.empty() ? "" : (lazy ? "" : section_start) + "\n";
        prefix += "{\"name\": ";
        const std::string suffix = ", \"arguments\": ";
        trie_template tt;
        trie_template_init(&tt);
        tt.prefix     = (const uint8_t *) prefix.data();
        tt.prefix_len = prefix.size();
        tt.suffix     = (const uint8_t *) suffix.data();
        tt.suffix_len = suffix.size();
        tt.render     = TRIE_RENDER_JSON_STRING;
        tt.end        = TRIE_END_OPEN;
        std::vector<const uint8_t *> ptrs;
        std::vector<size_t>          lens;
        for (const auto & s : t->names) {
            ptrs.push_back((const uint8_t *) s.data());
            lens.push_back(s.size());
        }
        trie_options o;
        trie_options_init(&o);
        o.max_states = opts.max_states;
        o.max_bytes  = opts.max_bytes;
        auto compile = [&](const std::string & pre) {
            tt.prefix     = (const uint8_t *) pre.data();
            tt.prefix_len = pre.size();
            trie_automaton * a = nullptr;
            if (llama_libtrie::compile_template(opts, sets->vocab, ptrs.data(), lens.data(), ptrs.size(), &tt, &o, &a) !=
                TRIE_OK) {
                refuse("libtrie cannot serve these tool names: " + llama_libtrie::last_error());
            }
            return std::shared_ptr<const trie_automaton>(
                a, [](const trie_automaton * p) { trie_automaton_free(const_cast<trie_automaton *>(p)); });
        };
        t->automaton = compile(prefix);
        if (parallel) {  // the next call, after "\n" section_end
            t->again = compile("\n" + section_start + "\n{\"name\": ");
        }
        return t;
    }, &made);
    if (made) {
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        LOG_INF("libtrie: compiled %zu tool names%s%s%s in %.1f ms\n", tools->names.size(),
                registry.empty() ? "" : " of the registry ", registry.c_str(), parallel ? " (parallel calls)" : "", ms);
    }
    return tools;
}

namespace {

llama_sampler * first_call(const common_libtrie_tools * tools);

// ---- parallel calls ("trie-tools": a segment stage per call) ----------------------------------------------------
// The current call's segment stage (`inner`) constrains the call; once the text it handed over to (the arguments
// and the closing text) ends with "\n" section_end, the call is complete and the next stage is a segment over
// `again` ("\n" section_start "\n" {"name": NAME, "arguments": ...), whose first token may also be
// end-of-generation (`open`: until the next call's first token, end-of-generation keeps its logit).
struct calls_ctx {
    const common_libtrie_tools * tools;   // kept alive by the request's sampling parameters
    trie_vocab *                 vocab;   // own reference: token bytes
    llama_sampler *              inner;   // own
    bool                         open;    // between calls: end-of-generation or another call
    std::string                  tail;    // the current call's text after its name (only its last bytes matter)
    std::string                  end;     // "\n" section_end
    std::vector<float>           saved;   // scratch: end-of-generation logits while `open`
};

llama_sampler * next_call(const common_libtrie_tools * tools) {
    trie_llama_segment_params p{};
    p.trigger       = nullptr;
    p.trigger_token = -1;
    p.offer         = nullptr;
    p.next          = next_of;
    p.user          = const_cast<common_libtrie_tools *>(tools);
    return trie_llama_segment_init(tools->again.get(), &p);
}

const char * calls_name(const llama_sampler *) { return "trie-tools"; }

void calls_accept(llama_sampler * smpl, llama_token token) {
    auto * c = (calls_ctx *) smpl->ctx;
    if (c->open && llama_vocab_is_eog(c->tools->vocab, token)) {
        return;  // the response ends after its last call
    }
    c->open = false;
    const bool args = trie_llama_segment_phase(c->inner) == TRIE_LLAMA_HANDED_OVER;
    llama_sampler_accept(c->inner, token);
    if (!args) {
        return;
    }
    const uint8_t * b = nullptr;
    size_t          n = 0;
    if (trie_vocab_token(c->vocab, token, &b, &n) == TRIE_OK) {
        c->tail.append((const char *) b, n);
        if (c->tail.size() > 2 * c->end.size() + 64) {
            c->tail.erase(0, c->tail.size() - c->end.size());
        }
    }
    if (c->tail.size() >= c->end.size() && c->tail.compare(c->tail.size() - c->end.size(), c->end.size(), c->end) == 0) {
        llama_sampler * next = next_call(c->tools);
        if (next) {  // else the current stage goes on: it allows end-of-generation only
            llama_sampler_free(c->inner);
            c->inner = next;
            c->open  = true;
            c->tail.clear();
        }
    }
}

void calls_apply(llama_sampler * smpl, llama_token_data_array * cur_p) {
    auto * c = (calls_ctx *) smpl->ctx;
    if (!c->open) {
        llama_sampler_apply(c->inner, cur_p);
        return;
    }
    c->saved.resize(cur_p->size);
    for (size_t i = 0; i < cur_p->size; ++i) {
        c->saved[i] = cur_p->data[i].logit;
    }
    llama_sampler_apply(c->inner, cur_p);
    for (size_t i = 0; i < cur_p->size; ++i) {
        if (llama_vocab_is_eog(c->tools->vocab, cur_p->data[i].id)) {
            cur_p->data[i].logit = c->saved[i];
        }
    }
}

void calls_reset(llama_sampler * smpl) {
    auto * c = (calls_ctx *) smpl->ctx;
    llama_sampler * first = first_call(c->tools);
    if (first) {
        llama_sampler_free(c->inner);
        c->inner = first;
    } else {
        llama_sampler_reset(c->inner);
    }
    c->open = false;
    c->tail.clear();
}

llama_sampler * calls_make(const common_libtrie_tools * tools, llama_sampler * inner);

llama_sampler * calls_clone(const llama_sampler * smpl) {
    const auto *    c     = (const calls_ctx *) smpl->ctx;
    llama_sampler * inner = llama_sampler_clone(c->inner);
    llama_sampler * copy  = inner ? calls_make(c->tools, inner) : nullptr;
    if (copy) {
        auto * d = (calls_ctx *) copy->ctx;
        d->open  = c->open;
        d->tail  = c->tail;
    }
    return copy;
}

void calls_free(llama_sampler * smpl) {
    auto * c = (calls_ctx *) smpl->ctx;
    llama_sampler_free(c->inner);
    trie_vocab_free(c->vocab);
    delete c;
}

llama_sampler_i * calls_iface() {
    static llama_sampler_i iface = [] {
        llama_sampler_i i{};
        i.name   = calls_name;
        i.accept = calls_accept;
        i.apply  = calls_apply;
        i.reset  = calls_reset;
        i.clone  = calls_clone;
        i.free   = calls_free;
        return i;
    }();
    return &iface;
}

// Takes `inner` (freed on failure).
llama_sampler * calls_make(const common_libtrie_tools * tools, llama_sampler * inner) {
    auto * c  = new calls_ctx{ tools, trie_automaton_vocab(tools->automaton.get()), inner, false, {}, "\n" + tools->section_end, {} };
    if (!c->vocab) {
        llama_sampler_free(inner);
        delete c;
        return nullptr;
    }
    return llama_sampler_init(calls_iface(), c);
}

llama_sampler * calls_init(const common_libtrie_tools * tools) {
    llama_sampler * first = first_call(tools);
    return first ? calls_make(tools, first) : nullptr;
}

}  // namespace

// Used by common/sampling.cpp (patches/llama-server-libtrie.patch, declared there): whether the libtrie stage of a
// tool call is checked after sampling, as common_sampler checks its grammar (a stage that waits for its trigger, or
// whose call has handed over to a tool's argument grammar), or masks first (a tool's name, a set).
bool common_libtrie_stage_check_after(const llama_sampler * smpl);
bool common_libtrie_stage_check_after(const llama_sampler * smpl) {
    const char * name = llama_sampler_name(smpl);
    if (strcmp(name, "trie-tools") == 0) {
        const auto * c = (const calls_ctx *) smpl->ctx;
        smpl           = c->inner;
        if (c->open) {
            return false;
        }
        name = llama_sampler_name(smpl);
    }
    return strcmp(name, "trie-segment") == 0 && trie_llama_segment_phase(smpl) != TRIE_LLAMA_IN_SET;
}

// llama-libtrie-draft.cpp: the segment stage of a parallel-calls stage's current call, or nullptr between calls
// (end-of-generation or another call) and for any other sampler.
const llama_sampler * llama_libtrie::tools_current_segment(const llama_sampler * smpl) {
    if (smpl == nullptr || std::strcmp(llama_sampler_name(smpl), "trie-tools") != 0) {
        return nullptr;
    }
    const auto * c = (const calls_ctx *) smpl->ctx;
    return c->open ? nullptr : c->inner;
}

llama_sampler * common_libtrie_tools_sampler(const std::shared_ptr<const common_libtrie_tools> & tools,
                                             const llama_vocab *                                 vocab) {
    if (!tools || vocab != tools->vocab) {
        return nullptr;
    }
    if (tools->again) {
        return calls_init(tools.get());
    }
    return first_call(tools.get());
}

namespace {

// The segment stage of a generation's first call: eager, or waiting for the section marker ("auto").
llama_sampler * first_call(const common_libtrie_tools * tools) {
    const llama_vocab * vocab = tools->vocab;
    trie_llama_segment_params p{};
    p.trigger       = tools->trigger.empty() ? nullptr : tools->trigger.c_str();  // copied by the stage
    p.trigger_token = -1;
    if (!tools->trigger.empty()) {  // a marker that is one (special) token triggers by its id too
        llama_token ids[4];
        const int n = llama_tokenize(vocab, tools->trigger.c_str(), (int32_t) tools->trigger.size(), ids, 4, false, true);
        if (n == 1) {
            p.trigger_token = ids[0];
        }
    }
    p.offer         = nullptr;  // hand over at token boundaries only
    p.next          = next_of;
    p.user          = const_cast<common_libtrie_tools *>(tools);  // read only
    return trie_llama_segment_init(tools->automaton.get(), &p);
}

}  // namespace
