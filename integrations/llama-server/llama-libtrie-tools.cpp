// llama-libtrie-tools.cpp - tool calls through libtrie (see llama-libtrie.h, "Tool calls"): an adapter over
// libtrie's tool-call engine (trie_calls_*, include/trie.h), which decides the whole answer: the free content
// before a call ("auto": until the template's section marker, its text or its own token; the tokens that would
// finish the marker and go on past it are masked), the marker, the tool's name from a trie, the hand-over to that
// tool's arguments, the close, the next call ("parallel_tool_calls": true with both markers) or only
// end-of-generation, and which tool a name is. This file supplies what is llama.cpp's own:
//   - the request side: which requests libtrie serves (common_libtrie_chat_tools), the tools (the request's
//     "tools", recognized within the inline limits, or an operator registry, the file NAME.json of the set
//     directory: libtrie's trie_registry_*, confined like a set file, looked up by the file's identity before it
//     is read, bounded by --trie-max-file-bytes), compiled once and kept in an LRU (--trie-cache-size, make() off
//     its mutex);
//   - the argument matcher of a tool (the engine's callbacks): llama.cpp's grammar of the tool's "parameters"
//     (json-schema-to-grammar's builder) followed by the format's close, built for every tool when the tools are
//     prepared: a tool whose parameters are not an object schema, or that llama.cpp's converter refuses, refuses
//     the request (or the registry), never a call cut short;
//   - the llama.cpp sampler stage ("trie-tools") over one sequence of the engine: its mask, its accepted tokens,
//     its clone (a new sequence replaying the tokens), the engine's forced run as a speculative draft.
// Call format: section_start "\n" {"name": NAME, "arguments": ARGS} "\n" section_end (the template's JSON-native
// markers, trimmed), or the bare {"name": NAME, "arguments": ARGS} where the template has none.
//
// "trie_tools" is internal: the chat endpoint writes it with a per-process secret, and a value without it (a
// client's) is refused.
//
// Lifetime: a stage's callbacks get the common_libtrie_tools it was made for; the request's sampling parameters
// (common_params_sampling::trie_tools, copied into every common_sampler and its clones) keep it alive.

#include "llama-libtrie-internal.h"
#include "llama-libtrie-stage.h"  // llama.h, trie.h, trie_llama.h

#include "json-schema-to-grammar.h"
#include "json-schema.h"
#include "json.h"
#include "log.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <unordered_set>
#include <stdexcept>
#include <vector>

using json = common_json;

namespace {

// A tool list recognized, with every tool's argument grammar: what the chat endpoint checks before the template
// sees the tools, and what common_libtrie_tools_resolve compiles for a vocabulary (the same object, from an LRU).
// Tool i (the engine's tool index) is names[i].
struct prepared_tools {
    std::vector<std::string> names;
    std::vector<std::string> parameters;  // JSON schema text
    std::vector<std::string> grammars;    // argument_grammar of each
};

}  // namespace

struct common_libtrie_tools {
    std::shared_ptr<const trie_calls>     engine;    // libtrie's tool-call engine of this list, format and mode
    std::shared_ptr<const prepared_tools> prepared;  // the argument grammars by tool index
    const llama_vocab *                   vocab = nullptr;  // part of the cache key
    llama_token                           eog   = -1;       // asks a grammar whether it is complete
    size_t                                n_names = 0;      // served (1 for a named tool)
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

llama_libtrie::lru<prepared_tools> g_prepared;

// The request's "tools" (`text`: their JSON, when not "") and/or the registry `registry` (when not ""; with both, the
// registry's tools and then the request's tools the registry lacks, by name: an operator's registry offered as
// deferred tools), recognized within the bounds, each tool's argument grammar built; cached by the text and the
// registry file's identity (`source` is set to the key part that names them). Throws std::invalid_argument naming
// the client's field.
std::shared_ptr<const prepared_tools> prepare(const common_params_libtrie & opts, const std::string & text,
                                              const std::string & registry, const std::string & section_end,
                                              std::string & source) {
    const std::string field = registry.empty() ? "\"tools\": " : "\"trie\": the registry '" + registry + "': ";
    registry_ptr      reg(nullptr, trie_registry_free);
    source.clear();
    if (!registry.empty()) {
        std::string identity;
        reg    = open_registry(opts, registry, identity);  // looked up by identity before it is read
        source = "r" + registry + ":" + identity;
    }
    if (!text.empty()) {
        source += "\x01t" + text;
    }
    return g_prepared.get(section_end + "\x01" + source, opts.cache_size, [&]() -> std::shared_ptr<const prepared_tools> {
        const auto t0 = std::chrono::steady_clock::now();
        auto p = std::make_shared<prepared_tools>();
        std::unordered_set<std::string> in_registry;
        if (reg) {
            for (size_t i = 0, n = trie_registry_n_tools(reg.get()); i < n; ++i) {
                const uint8_t * b = nullptr; size_t bl = 0;
                const uint8_t * q = nullptr; size_t ql = 0;
                if (trie_registry_tool(reg.get(), i, &b, &bl, &q, &ql) != TRIE_OK) {
                    refuse("libtrie: " + llama_libtrie::last_error());
                }
                p->names.emplace_back((const char *) b, bl);
                p->parameters.emplace_back((const char *) q, ql);
                in_registry.insert(p->names.back());
            }
        }
        if (!text.empty()) {
            std::unique_ptr<trie_recognized, void (*)(trie_recognized *)> rec(nullptr, trie_recognized_free);
            try {
                rec = llama_libtrie::recognize(TRIE_RECOGNIZE_TOOLS, text, llama_libtrie::request_bounds(opts));
            } catch (const llama_libtrie::over_bounds &) {
                throw;  // inline tools over the bounds: llama.cpp's path (common_libtrie_chat_tools)
            } catch (const std::invalid_argument & e) {
                refuse(std::string("\"tools\": ") + e.what());
            }
            if (!rec) {
                refuse(std::string("\"tools\": not a list of functions: ") + trie_recognize_reason());
            }
            for (size_t i = 0, n = trie_recognized_n_members(rec.get()); i < n; ++i) {
                const uint8_t * b = nullptr; size_t bl = 0;
                const uint8_t * q = nullptr; size_t ql = 0;
                if (trie_recognized_member(rec.get(), i, &b, &bl) != TRIE_OK || trie_recognized_payload(rec.get(), i, &q, &ql) != TRIE_OK) {
                    refuse("libtrie: " + llama_libtrie::last_error());
                }
                std::string name((const char *) b, bl);
                if (in_registry.count(name) != 0) {
                    continue;  // the registry's tool of that name
                }
                p->names.push_back(std::move(name));
                p->parameters.emplace_back((const char *) q, ql);
            }
        }
        for (size_t i = 0; i < p->names.size(); ++i) {
            try {
                p->grammars.push_back(argument_grammar(p->names[i], p->parameters[i], section_end));
            } catch (const std::invalid_argument & e) {
                refuse((i < in_registry.size() ? field : std::string("\"tools\": ")) + e.what());
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

namespace {

// A tool's function name (at the tool level for Anthropic's shapes), "" when it has none.
std::string tool_name(const json & tool) {
    const json & f = tool.contains("function") && tool.at("function").is_object() ? tool.at("function") : tool;
    return f.contains("name") && f.at("name").is_string() ? f.at("name").get<std::string>() : std::string();
}

}  // namespace

namespace {

bool has_registry_field(const json & body) {
    return body.contains("trie") && body.at("trie").is_object() && body.at("trie").contains("registry");
}

// The operator's registry offered as deferred tools of this request (--trie-deferred-registry), "" for none: a
// request with tools, routed, that names no registry or names that one (as vLLM's LIBTRIE_DEFERRED_REGISTRY).
std::string offered_registry(const common_params_libtrie & opts, const json & body) {
    if (opts.deferred_registry.empty() || !llama_libtrie::g_route || !opts.route || !body.contains("tools")
        || !body.at("tools").is_array() || body.at("tools").empty()) {
        return "";
    }
    if (has_registry_field(body)) {
        const json & named = body.at("trie").at("registry");
        return named.is_string() && named.get<std::string>() == opts.deferred_registry ? opts.deferred_registry : "";
    }
    return opts.deferred_registry;
}

}  // namespace

bool common_libtrie_check_options(const common_params_libtrie & opts) {
    if (opts.deferred_registry.empty()) {
        return true;
    }
    if (opts.set_dir.empty()) {
        LOG_ERR("libtrie: --trie-deferred-registry '%s' needs --trie-set-dir (the directory of NAME.json)\n",
                opts.deferred_registry.c_str());
        return false;
    }
    try {
        std::string identity;
        const registry_ptr reg = open_registry(opts, opts.deferred_registry, identity);
        LOG_INF("libtrie: the registry '%s' (%zu tools) is offered as deferred tools of every chat request with tools\n",
                opts.deferred_registry.c_str(), trie_registry_n_tools(reg.get()));
    } catch (const std::exception & e) {
        LOG_ERR("libtrie: --trie-deferred-registry '%s': %s\n", opts.deferred_registry.c_str(), e.what());
        return false;
    }
    return true;
}

bool common_libtrie_deferred(const common_params_libtrie & opts, json & body, json & prompt_tools) {
    if (!body.contains("tools") || !body.at("tools").is_array() || body.at("tools").empty()) {
        return false;
    }
    const std::string offered = offered_registry(opts, body);
    registry_ptr      reg(nullptr, trie_registry_free);
    if (!offered.empty()) {
        std::string identity;
        reg = open_registry(opts, offered, identity);
    }
    json request = json::object();
    request["tools"] = body.at("tools");
    if (body.contains("messages")) {
        request["messages"] = body.at("messages");
    }
    const std::string text = request.dump();
    size_t n = 0;
    // libtrie names the field as request.tools[i]: the client's field is tools[i]
    auto fail = [] {
        std::string msg = llama_libtrie::last_error();
        if (msg.rfind("request.", 0) == 0) {
            msg = msg.substr(8);
        }
        refuse("defer_loading: " + msg);
    };
    const trie_status st = trie_deferred_plan((const uint8_t *) text.data(), text.size(), reg.get(), nullptr, 0, &n);
    if (st != TRIE_OK && st != TRIE_ERR_BUFFER_TOO_SMALL) {
        fail();
    }
    if (n == 0) {
        return false;  // nothing deferred, no search tool, no reference: the request as it is
    }
    std::string out(n, '\0');
    if (trie_deferred_plan((const uint8_t *) text.data(), text.size(), reg.get(), (uint8_t *) out.data(), out.size(), &n) != TRIE_OK) {
        fail();
    }
    out.resize(n);
    const json plan = json::parse(out);
    prompt_tools    = plan.at("tools");
    // the call's tools: the plan's (the search function among them), then every other named tool of the request
    // (deferred ones), without "defer_loading"
    json call_tools = plan.at("tools");
    std::vector<std::string> names;
    for (const auto & t : call_tools) {
        names.push_back(tool_name(t));
    }
    for (json t : body.at("tools")) {
        const std::string name = tool_name(t);
        if (!t.is_object() || name.empty() || std::find(names.begin(), names.end(), name) != names.end()) {
            continue;  // a search tool without a function name ({"type": "tool_search"}) is the plan's function
        }
        t.erase("defer_loading");
        if (t.contains("function") && t.at("function").is_object()) {
            t.at("function").erase("defer_loading");
        }
        names.push_back(name);
        call_tools.push_back(std::move(t));
    }
    body["tools"] = call_tools;
    if (body.contains("messages")) {
        body["messages"] = plan.at("messages");
    }
    return true;
}

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
    const std::string offered = registry.empty() ? offered_registry(opts, body) : std::string();
    if (!offered.empty()) {  // the request's tools and the operator's registry offered as deferred tools
        registry          = offered;
        spec["registry"]  = offered;
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
        prepared = prepare(opts, spec.contains("tools") ? tools.dump() : std::string(), registry,
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
                   (registry.empty() ? std::string("\"tools\"")
                    : offered.empty() ? "registry '" + registry + "'"
                                      : "\"tools\" or of the registry '" + registry + "' offered as deferred tools"));
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
    const bool  has_tools = value.contains("tools") && value.at("tools").is_array();
    const auto  prepared = prepare(opts, has_tools ? value.at("tools").dump() : std::string(), registry, section_end, source);
    const auto  sets = llama_libtrie::sets_of(opts, vocab);
    char        addr[32];
    snprintf(addr, sizeof addr, "%p", (const void *) vocab);
    const std::string key = std::string(addr) + llama_libtrie::fingerprint_hex(sets->vocab) + "\x01" + section_start + "\x01" +
                            section_end + "\x01" + only + (lazy ? "\x01L" : "\x01E") + (parallel ? "P" : "1") + source;
    bool made = false;
    const auto t0 = std::chrono::steady_clock::now();
    auto tools = g_tools.get(key, opts.cache_size, [&]() -> std::shared_ptr<const common_libtrie_tools> {
        auto t      = std::make_shared<common_libtrie_tools>();
        t->vocab    = vocab;
        t->prepared = prepared;
        size_t named = SIZE_MAX;
        for (size_t i = 0; i < prepared->names.size() && !only.empty(); ++i) {
            named = prepared->names[i] == only ? i : named;
        }
        if (!only.empty() && named == SIZE_MAX) {
            refuse("\"tool_choice\" names the tool '" + only + "', which is not one of the tools");
        }
        t->n_names = only.empty() ? prepared->names.size() : 1;
        std::vector<const uint8_t *> ptrs;
        std::vector<size_t>          lens;
        for (const auto & n : prepared->names) {
            ptrs.push_back((const uint8_t *) n.data());
            lens.push_back(n.size());
        }
        // the call as llama.cpp's parser reads it back: section_start "\n" {"name": NAME, "arguments": ARGS}
        // "\n" section_end; the argument grammars end with the close (argument_grammar)
        const std::string prefix = section_start.empty() ? "{\"name\": " : "\n{\"name\": ";
        const std::string suffix = ", \"arguments\": ";
        const std::string close  = section_end.empty() ? "}" : "}\n" + section_end;
        trie_calls_format f;
        trie_calls_format_init(&f, nullptr);
        f.has_trigger = !section_start.empty();
        f.trigger     = (const uint8_t *) section_start.data();
        f.trigger_len = section_start.size();
        f.prefix      = (const uint8_t *) prefix.data();
        f.prefix_len  = prefix.size();
        f.suffix      = (const uint8_t *) suffix.data();
        f.suffix_len  = suffix.size();
        f.close       = (const uint8_t *) close.data();
        f.close_len   = close.size();
        f.render      = TRIE_RENDER_JSON_STRING;
        std::vector<int32_t> stops;  // every end-of-generation id ends the answer
        for (llama_token id = 0, n = llama_vocab_n_tokens(vocab); id < n; ++id) {
            if (llama_vocab_is_eog(vocab, id)) {
                stops.push_back(id);
            }
        }
        t->eog = stops.empty() ? -1 : stops[0];
        trie_calls_config c;
        trie_calls_config_init(&c);
        c.mode       = !only.empty() ? TRIE_CALLS_NAMED : lazy ? TRIE_CALLS_AUTO : TRIE_CALLS_REQUIRED;
        c.named_tool = named == SIZE_MAX ? 0 : named;
        c.parallel   = parallel;
        c.stops      = stops.data();
        c.n_stops    = stops.size();
        // llama.cpp's chat parser reads nothing but calls once a call is written (its own grammar constrains the
        // rest of the answer so): whitespace, the next marker or the end
        c.only_calls_after_a_call = true;
        trie_options o;
        trie_options_init(&o);
        o.max_states = opts.max_states;
        o.max_bytes  = opts.max_bytes;
        trie_calls * e = nullptr;
        if (trie_calls_new(sets->vocab, ptrs.data(), lens.data(), ptrs.size(), &f, &c, &o, &e) != TRIE_OK) {
            refuse("libtrie cannot serve these tool names: " + llama_libtrie::last_error());
        }
        t->engine = std::shared_ptr<const trie_calls>(e, trie_calls_free);
        return t;
    }, &made);
    if (made) {
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        LOG_INF("libtrie: compiled %zu tool names%s%s%s in %.1f ms\n", tools->n_names,
                registry.empty() ? "" : " of the registry ", registry.c_str(), parallel ? " (parallel calls)" : "", ms);
    }
    return tools;
}

namespace {

// ---- the argument matcher of a call: the tool's llama.cpp grammar (the engine's callbacks) --------------------

struct arg_matcher {
    llama_sampler *          start;   // the grammar at the call's start: a rollback replays `tokens` on a clone
    llama_sampler *          cur;
    std::vector<llama_token> tokens;  // accepted
};

bool grammar_allows(llama_sampler * grammar, llama_token token) {
    llama_token_data       d = { token, 1.0f, 0.0f };
    llama_token_data_array a = { &d, 1, -1, false };
    llama_sampler_apply(grammar, &a);
    return d.logit != -INFINITY;
}

void * arg_make(void * user, size_t tool, bool) {
    const auto * t = (const common_libtrie_tools *) user;
    if (tool >= t->prepared->grammars.size()) {
        return nullptr;
    }
    llama_sampler * start = llama_sampler_init_grammar(t->vocab, t->prepared->grammars[tool].c_str(), "root");
    llama_sampler * cur   = start ? llama_sampler_clone(start) : nullptr;
    if (cur == nullptr) {
        LOG_ERR("libtrie: llama.cpp cannot build the argument grammar of the tool '%s'\n", t->prepared->names[tool].c_str());
        llama_sampler_free(start);
        return nullptr;  // the engine rejects the token that completed the name
    }
    return new arg_matcher{ start, cur, {} };
}

bool arg_accept(void *, void * m, int32_t token) {
    auto * a = (arg_matcher *) m;
    if (!grammar_allows(a->cur, token)) {
        return false;  // llama_sampler_accept would abort on it
    }
    llama_sampler_accept(a->cur, token);
    a->tokens.push_back(token);
    return true;
}

bool arg_fill(void * user, void * m, uint32_t * row, size_t words) {
    const auto *  t = (const common_libtrie_tools *) user;
    const int32_t n = llama_vocab_n_tokens(t->vocab);
    if ((size_t) n > words * 32) {
        return false;
    }
    std::vector<llama_token_data> d((size_t) n);
    for (int32_t i = 0; i < n; ++i) {
        d[(size_t) i] = { i, 0.0f, 0.0f };
    }
    llama_token_data_array a = { d.data(), d.size(), -1, false };
    llama_sampler_apply(((arg_matcher *) m)->cur, &a);
    std::fill(row, row + words, 0u);
    for (size_t i = 0; i < a.size; ++i) {
        if (a.data[i].logit != -INFINITY) {
            row[a.data[i].id >> 5] |= 1u << (a.data[i].id & 31);
        }
    }
    return true;
}

void arg_rollback(void *, void * m, size_t n) {
    auto * a = (arg_matcher *) m;
    a->tokens.resize(a->tokens.size() - std::min(n, a->tokens.size()));
    llama_sampler * cur = llama_sampler_clone(a->start);
    if (cur == nullptr) {
        LOG_ERR("libtrie: cannot roll back an argument grammar\n");
        return;
    }
    for (llama_token t : a->tokens) {
        llama_sampler_accept(cur, t);
    }
    llama_sampler_free(a->cur);
    a->cur = cur;
}

int32_t arg_completed(void * user, void * m) {
    const llama_token eog = ((const common_libtrie_tools *) user)->eog;
    return eog < 0 ? -1 : grammar_allows(((arg_matcher *) m)->cur, eog) ? 1 : 0;
}

void arg_release(void *, void * m) {
    auto * a = (arg_matcher *) m;
    llama_sampler_free(a->cur);
    llama_sampler_free(a->start);
    delete a;
}

// ---- the sampler stage: one sequence of the engine ("trie-tools") ---------------------------------------------

struct calls_ctx {
    const common_libtrie_tools * tools;    // kept alive by the request's sampling parameters
    trie_calls_matcher *         seq;      // own
    std::vector<llama_token>     history;  // accepted: a clone replays them
    bool                         failed;   // a token the engine refused: only end-of-generation from here
    std::vector<uint32_t>        row;      // scratch
};

trie_calls_matcher * new_sequence(const common_libtrie_tools * t) {
    trie_calls_callbacks cb{};
    cb.struct_size        = sizeof cb;
    cb.user               = const_cast<common_libtrie_tools *>(t);  // read only
    cb.make               = arg_make;
    cb.accept             = arg_accept;
    cb.fill               = arg_fill;
    cb.rollback           = arg_rollback;
    cb.completed          = arg_completed;
    cb.release            = arg_release;
    trie_calls_matcher * m = nullptr;
    if (trie_calls_matcher_new(t->engine.get(), &cb, &m) != TRIE_OK) {
        LOG_ERR("libtrie: %s\n", llama_libtrie::last_error().c_str());
        return nullptr;
    }
    return m;
}

void eog_only(const llama_vocab * vocab, llama_token_data_array * cur_p) {
    for (size_t i = 0; i < cur_p->size; ++i) {
        if (!llama_vocab_is_eog(vocab, cur_p->data[i].id)) {
            cur_p->data[i].logit = -INFINITY;
        }
    }
}

const char * calls_name(const llama_sampler *) { return "trie-tools"; }

void calls_accept(llama_sampler * smpl, llama_token token) {
    auto * c = (calls_ctx *) smpl->ctx;
    if (c->failed) {
        return;
    }
    if (trie_calls_accept(c->seq, token) != TRIE_OK) {
        LOG_ERR("libtrie: the tool calls do not allow token %d (%s); only end-of-generation from here\n", token,
                llama_libtrie::last_error().c_str());
        c->failed = true;
        return;
    }
    c->history.push_back(token);
}

void calls_apply(llama_sampler * smpl, llama_token_data_array * cur_p) {
    auto * c = (calls_ctx *) smpl->ctx;
    if (!c->failed) {
        // in a call's arguments the mask is the tool's grammar's: applied as llama.cpp applies a grammar (to the
        // candidates given, one token under rejection sampling), not to a whole row
        if (void * args = trie_calls_current_arguments(c->seq)) {
            llama_sampler_apply(((arg_matcher *) args)->cur, cur_p);
            return;
        }
        const size_t n_vocab = (size_t) llama_vocab_n_tokens(c->tools->vocab);
        c->row.resize((n_vocab + 31) / 32);
        if (trie_calls_fill_bitmask(c->seq, c->row.data(), c->row.size()) == TRIE_OK) {
            for (size_t i = 0; i < cur_p->size; ++i) {
                const llama_token id = cur_p->data[i].id;
                if (id < 0 || (size_t) id >= n_vocab || !((c->row[(size_t) id >> 5] >> (id & 31)) & 1)) {
                    cur_p->data[i].logit = -INFINITY;
                }
            }
            return;
        }
        LOG_ERR("libtrie: %s; only end-of-generation from here\n", llama_libtrie::last_error().c_str());
        c->failed = true;
    }
    eog_only(c->tools->vocab, cur_p);
}

llama_sampler * calls_init(const common_libtrie_tools * tools);

void calls_reset(llama_sampler * smpl) {
    auto * c = (calls_ctx *) smpl->ctx;
    c->failed = trie_calls_reset(c->seq) != TRIE_OK;
    c->history.clear();
}

llama_sampler * calls_clone(const llama_sampler * smpl) {
    const auto *    c    = (const calls_ctx *) smpl->ctx;
    llama_sampler * copy = calls_init(c->tools);
    if (copy) {
        auto * d   = (calls_ctx *) copy->ctx;
        d->failed  = c->failed;
        d->history = c->history;
        for (llama_token t : c->history) {  // the same tokens, the same positions and argument grammars
            d->failed = d->failed || trie_calls_accept(d->seq, t) != TRIE_OK;
        }
    }
    return copy;
}

void calls_free(llama_sampler * smpl) {
    auto * c = (calls_ctx *) smpl->ctx;
    trie_calls_matcher_free(c->seq);
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

llama_sampler * calls_init(const common_libtrie_tools * tools) {
    trie_calls_matcher * seq = new_sequence(tools);
    return seq ? llama_sampler_init(calls_iface(), new calls_ctx{ tools, seq, {}, false, {} }) : nullptr;
}

const calls_ctx * ctx_of(const llama_sampler * smpl) {
    return smpl && smpl->iface == calls_iface() ? (const calls_ctx *) smpl->ctx : nullptr;
}

uint32_t phase_of(const calls_ctx * c) {
    trie_calls_info info{};
    return trie_calls_info_of(c->seq, &info) == TRIE_OK ? info.phase : TRIE_CALLS_PHASE_DONE;
}

}  // namespace

// Used by common/sampling.cpp (patches/llama-server-libtrie.patch, declared there): whether the libtrie stage of a
// tool call is checked after sampling, as common_sampler checks its grammar (free content before a call, a tool's
// arguments), or masks first (a tool's name, the end).
bool common_libtrie_stage_check_after(const llama_sampler * smpl);
bool common_libtrie_stage_check_after(const llama_sampler * smpl) {
    const calls_ctx * c = ctx_of(smpl);
    if (c == nullptr || c->failed) {
        return false;
    }
    const uint32_t phase = phase_of(c);
    return phase == TRIE_CALLS_PHASE_FREE || phase == TRIE_CALLS_PHASE_ARGS;
}

bool llama_libtrie::tools_draft(const llama_sampler * smpl, int32_t n_max, std::vector<llama_token> & out) {
    const calls_ctx * c = ctx_of(smpl);
    out.clear();
    if (c == nullptr || c->failed || n_max <= 0) {
        return false;
    }
    out.resize((size_t) n_max);
    size_t n = 0;
    if (trie_calls_draft(c->seq, out.data(), out.size(), &n) != TRIE_OK) {
        n = 0;
    }
    out.resize(n);
    return n > 0;
}

size_t llama_libtrie::tools_trim(const llama_sampler * smpl, std::vector<llama_token> & draft) {
    const calls_ctx * c = ctx_of(smpl);
    // free content and a tool's arguments: the verification decides (a validation there would replay grammars)
    if (c == nullptr || c->failed || draft.empty() || phase_of(c) == TRIE_CALLS_PHASE_FREE ||
        phase_of(c) == TRIE_CALLS_PHASE_ARGS) {
        return 0;
    }
    size_t n_ok = 0;
    if (trie_calls_validate(c->seq, draft.data(), draft.size(), &n_ok) != TRIE_OK || n_ok >= draft.size()) {
        return 0;
    }
    const size_t cut = draft.size() - n_ok;
    draft.resize(n_ok);
    return cut;
}

llama_sampler * common_libtrie_tools_sampler(const std::shared_ptr<const common_libtrie_tools> & tools,
                                             const llama_vocab *                                 vocab) {
    if (!tools || vocab != tools->vocab) {
        return nullptr;
    }
    return calls_init(tools.get());
}
