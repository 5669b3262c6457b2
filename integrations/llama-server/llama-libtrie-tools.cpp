// llama-libtrie-tools.cpp - tool calls through libtrie (see llama-libtrie.h, "Tool calls").
//
// Output: section_start ["\n"] {"name": NAME, "arguments": ARGS}["\n" section_end], end-of-generation. With
// "auto" (lazy, JSON-native templates with a section marker) the stage first waits for section_start (llama.cpp's
// lazy-grammar trigger, as a word and, when it is one token, as that token) and constrains nothing before it.
//   - NAME: a segment of an open template (trie_compile_template, TRIE_END_OPEN) over the tools' names: the
//     output names exactly one of them; no crossing tokens are offered, so the hand-over happens at the token
//     boundary right after `, "arguments": ` (the segment stage's contract with offer = NULL);
//   - ARGS and the rest: the chosen tool's grammar only, llama.cpp's json-schema-to-grammar of its "parameters"
//     followed by the call's closing text, built when the tool is chosen and kept for the next request.
// Sources of tools: the request's "tools" (bounded by the inline limits) or an operator registry, the file
// NAME.json of the set directory (an OpenAI tools list; bounded by --trie-max-file-bytes), compiled once and
// kept in an LRU (--trie-cache-size) like a named set.
//
// Lifetime: a stage's `user` is the common_libtrie_tools it was made for; the request's sampling parameters
// (common_params_sampling::trie_tools, copied into every common_sampler and its clones) keep it alive.

#include "llama-libtrie-internal.h"
#include "llama-libtrie-stage.h"  // llama.h, trie.h, trie_llama.h

#include "json-schema-to-grammar.h"
#include "json.h"
#include "log.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <sys/stat.h>
#include <vector>

using json = common_json;

struct common_libtrie_tools {
    std::shared_ptr<const trie_automaton> automaton;    // the names' segments, open
    std::vector<std::string>              names;        // by member index
    std::vector<std::string>              parameters;   // JSON schema text, by member index
    std::string                           section_end;  // "" or e.g. "</tool_call>"
    std::string                           trigger;      // lazy ("auto"): section_start, the stage waits for it; "" eager
    const llama_vocab *                   vocab = nullptr;  // part of the cache key

    mutable std::mutex                    mu;           // guards grammars
    mutable std::vector<std::string>      grammars;     // built on first choice; "" not yet

    // The GBNF of what follows the name of `member` (its arguments, "}", the closing text); "" when the
    // tool's schema cannot be converted (logged).
    std::string grammar_of(size_t member) const;
};

namespace {

[[noreturn]] void refuse(const std::string & msg) {
    throw std::invalid_argument(msg);
}

const size_t MAX_SECTION_BYTES = 256;

std::string gbnf_literal(const std::string & s) {
    std::string out = "\"";
    for (unsigned char c : s) {
        switch (c) {
            case '"':  out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            default:
                if (c < 0x20) {
                    char buf[8];
                    snprintf(buf, sizeof buf, "\\x%02x", c);
                    out += buf;
                } else {
                    out.push_back((char) c);
                }
        }
    }
    return out + "\"";
}

llama_libtrie::lru<common_libtrie_tools> g_tools;

// The registry file NAME.json of the set directory, confined to it, bounded; its content.
std::string read_registry(const common_params_libtrie & opts, const std::string & name, std::string & stamp) {
    if (opts.set_dir.empty()) {
        refuse("\"trie\": {\"registry\": ...} needs a set directory on the server (--trie-set-dir)");
    }
    if (name.empty() || name.size() > 128 || name[0] == '.') {
        refuse("\"registry\": a registry name is 1 to 128 characters of [A-Za-z0-9_.-], not starting with '.'");
    }
    for (char c : name) {
        if (!(isalnum((unsigned char) c) || c == '_' || c == '-' || c == '.')) {
            refuse("\"registry\": a registry name is 1 to 128 characters of [A-Za-z0-9_.-], not starting with '.'");
        }
    }
    const std::string path = opts.set_dir + "/" + name + ".json";
    char * real = realpath(path.c_str(), nullptr);
    if (real == nullptr) {
        refuse("\"registry\": no registry '" + name + "' in the set directory");
    }
    std::string rp(real);
    free(real);
    struct stat st {};
    if (rp.compare(0, opts.set_dir.size() + 1, opts.set_dir + "/") != 0 || stat(rp.c_str(), &st) != 0
        || !S_ISREG(st.st_mode)) {
        refuse("\"registry\": the registry '" + name + "' is not a file of the set directory");
    }
    if ((uint64_t) st.st_size > opts.max_file_bytes) {
        refuse("\"registry\": the registry '" + name + "' is " + std::to_string((uint64_t) st.st_size) +
               " bytes, more than this server reads (--trie-max-file-bytes " + std::to_string(opts.max_file_bytes) + ")");
    }
    stamp = std::to_string((uint64_t) st.st_size) + ":" + std::to_string((int64_t) st.st_mtime) + ":" +
            std::to_string((uint64_t) st.st_ino);
    std::ifstream in(rp, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    if (!in.good() && !in.eof()) {
        refuse("\"registry\": the registry '" + name + "' cannot be read");
    }
    return ss.str();
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
    const std::string g = len == 0 ? t->grammar_of(member) : std::string();
    llama_sampler *   s = g.empty() ? nullptr : llama_sampler_init_grammar(t->vocab, g.c_str(), "root");
    if (s == nullptr) {
        LOG_ERR("libtrie: no argument grammar for tool %zu; the call ends here\n", member);
        return end_here(t);
    }
    return s;
}

// Checks a request's "tools" before the chat template sees them (so a bad list is refused with libtrie's reason):
// an OpenAI list of functions with distinct names and object parameters, including `only` when it is not "".
void check_tools(const json & tools, const std::string & only) {
    const std::string text = tools.dump();
    trie_recognized * r = nullptr;
    if (trie_recognize(TRIE_RECOGNIZE_TOOLS, (const uint8_t *) text.data(), text.size(), &r) != TRIE_OK) {
        refuse("\"tools\": " + llama_libtrie::last_error());
    }
    std::unique_ptr<trie_recognized, void (*)(trie_recognized *)> rec(r, trie_recognized_free);
    if (!rec) {
        refuse(std::string("\"tools\": not a list of functions: ") + trie_recognize_reason());
    }
    if (only.empty()) {
        return;
    }
    for (size_t i = 0, n = trie_recognized_n_members(rec.get()); i < n; ++i) {
        const uint8_t * b = nullptr;
        size_t          bl = 0;
        if (trie_recognized_member(rec.get(), i, &b, &bl) == TRIE_OK && std::string((const char *) b, bl) == only) {
            return;
        }
    }
    refuse("\"tool_choice\" names the tool '" + only + "', which is not one of the \"tools\"");
}

}  // namespace

std::string common_libtrie_tools::grammar_of(size_t member) const {
    if (member >= parameters.size()) {
        return "";
    }
    std::lock_guard<std::mutex> lock(mu);
    if (!grammars[member].empty()) {
        return grammars[member];
    }
    const auto t0 = std::chrono::steady_clock::now();
    std::string args;
    try {
        args = json_schema_to_grammar(json::parse(parameters[member]), true);
    } catch (const std::exception & e) {
        LOG_ERR("libtrie: tool '%s': json-schema-to-grammar: %s\n", names[member].c_str(), e.what());
        return "";
    }
    // the schema's root becomes tool-args; the call closes after it
    std::string renamed;
    std::istringstream lines(args);
    for (std::string line; std::getline(lines, line);) {
        if (line.rfind("root ::=", 0) == 0) {
            line = "tool-args ::=" + line.substr(8);
        }
        renamed += line + "\n";
    }
    renamed += "root ::= tool-args \"}\"";
    if (!section_end.empty()) {
        renamed += " \"\\n\" " + gbnf_literal(section_end);
    }
    renamed += "\n";
    grammars[member] = renamed;
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    LOG_INF("libtrie: argument grammar of tool '%s' built in %.2f ms (%zu bytes)\n", names[member].c_str(), ms, renamed.size());
    return renamed;
}

std::string common_libtrie_chat_tools(const json & body, const common_libtrie_tool_format & format) {
    if (!llama_libtrie::g_route) {
        return "";
    }
    const json tools   = body.contains("tools") ? body.at("tools") : json();
    const json choice  = body.contains("tool_choice") ? body.at("tool_choice") : json();
    const json trie    = body.contains("trie") ? body.at("trie") : json();
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
    if (trie.is_object() && trie.contains("registry")) {
        if (!trie.at("registry").is_string()) {
            refuse("\"trie\": \"registry\" must be a string (a registry of the set directory)");
        }
        if (choice.is_string() && choice.get<std::string>() == "none") {
            refuse("\"trie\": {\"registry\": ...} asks for a tool call, but \"tool_choice\" is \"none\"");
        }
        spec["registry"] = trie.at("registry");
    } else if (has_tools && (only.size() > 0 || (choice.is_string() && choice.get<std::string>() == "required"))) {
        check_tools(tools, only);
        spec["tools"] = tools;
    } else if (has_tools && (choice.is_null() || (choice.is_string() && choice.get<std::string>() == "auto"))
               && format.native && format.section_start.find_first_not_of(" \t\r\n") != std::string::npos) {
        check_tools(tools, only);
        spec["tools"] = tools;  // "auto": the model may answer, or open a call with the template's section marker
        spec["lazy"]  = true;
    } else {
        return "";  // "auto" / "none" / no tools: llama.cpp's own path
    }
    if (!only.empty()) {
        spec["only"] = only;
    }
    // the markers without their surrounding whitespace (Qwen2.5's analysis gives "<tool_call>\n"): the call writes
    // one "\n" after the start and before the end, and the lazy trigger is the marker itself
    auto trim = [](const std::string & m) {
        const size_t b = m.find_first_not_of(" \t\r\n");
        return b == std::string::npos ? std::string() : m.substr(b, m.find_last_not_of(" \t\r\n") - b + 1);
    };
    spec["section_start"] = format.native ? trim(format.section_start) : std::string();
    spec["section_end"]   = format.native ? trim(format.section_end) : std::string();
    return spec.dump();
}

std::shared_ptr<const common_libtrie_tools> common_libtrie_tools_resolve(const common_params_libtrie & opts,
                                                                         const llama_vocab *           vocab,
                                                                         const json &                  value) {
    if (!value.is_object()) {
        refuse("\"trie_tools\" must be an object");
    }
    auto str = [&](const char * key) -> std::string {
        if (!value.contains(key)) return "";
        if (!value.at(key).is_string()) refuse(std::string("\"trie_tools\": \"") + key + "\" must be a string");
        return value.at(key).get<std::string>();
    };
    const std::string section_start = str("section_start");
    const std::string section_end   = str("section_end");
    const std::string only          = str("only");
    if (value.contains("lazy") && !value.at("lazy").is_boolean()) {
        refuse("\"trie_tools\": \"lazy\" must be a boolean");
    }
    const bool lazy = value.contains("lazy") && value.at("lazy").get<bool>();
    if (lazy && section_start.empty()) {
        refuse("\"trie_tools\": \"lazy\" needs a \"section_start\" to wait for");
    }
    if (section_start.size() > MAX_SECTION_BYTES || section_end.size() > MAX_SECTION_BYTES) {
        refuse("\"trie_tools\": a section marker is longer than 256 bytes");
    }
    std::string text, source, stamp;
    if (value.contains("registry")) {
        source = str("registry");
        text   = read_registry(opts, source, stamp);
    } else if (value.contains("tools") && value.at("tools").is_array()) {
        const uint64_t max_text = opts.max_inline_bytes * 12 + (64u << 10);
        text = value.at("tools").dump();
        if (text.size() > max_text) {
            refuse("\"tools\" is " + std::to_string(text.size()) + " bytes, more than this server compiles from a request (" +
                   std::to_string(max_text) + "); keep a registry in the set directory and name it with \"trie\": {\"registry\": NAME}");
        }
        if (value.at("tools").size() > opts.max_inline_strings) {
            refuse("\"tools\" lists " + std::to_string(value.at("tools").size()) + " tools, more than this server compiles from a request (" +
                   std::to_string(opts.max_inline_strings) + "); keep a registry in the set directory");
        }
    } else {
        refuse("\"trie_tools\" needs \"tools\" (an array) or \"registry\" (a name)");
    }
    const auto  sets = llama_libtrie::sets_of(opts, vocab);
    char        addr[32];
    snprintf(addr, sizeof addr, "%p", (const void *) vocab);
    const std::string key = std::string(addr) + llama_libtrie::fingerprint_hex(sets->vocab) + "\x01" + section_start + "\x01" +
                            section_end + "\x01" + only + (lazy ? "\x01L" : "\x01E") + (source.empty() ? "t" + text : "r" + source + ":" + stamp);
    bool made = false;
    const auto t0 = std::chrono::steady_clock::now();
    auto tools = g_tools.get(key, opts.cache_size, [&]() -> std::shared_ptr<const common_libtrie_tools> {
        trie_recognized * r = nullptr;
        if (trie_recognize(TRIE_RECOGNIZE_TOOLS, (const uint8_t *) text.data(), text.size(), &r) != TRIE_OK) {
            refuse((source.empty() ? std::string("\"tools\": ") : "the registry '" + source + "': ") + llama_libtrie::last_error());
        }
        std::unique_ptr<trie_recognized, void (*)(trie_recognized *)> rec(r, trie_recognized_free);
        if (!rec) {
            refuse((source.empty() ? std::string("\"tools\": ") : "the registry '" + source + "': ") + "not a list of functions: " +
                   trie_recognize_reason());
        }
        auto t = std::make_shared<common_libtrie_tools>();
        t->vocab       = vocab;
        t->section_end = section_end;
        t->trigger     = lazy ? section_start : std::string();
        const size_t n = trie_recognized_n_members(rec.get());
        for (size_t i = 0; i < n; ++i) {
            const uint8_t * b = nullptr; size_t bl = 0;
            const uint8_t * p = nullptr; size_t pl = 0;
            if (trie_recognized_member(rec.get(), i, &b, &bl) != TRIE_OK || trie_recognized_payload(rec.get(), i, &p, &pl) != TRIE_OK) {
                refuse("libtrie: " + llama_libtrie::last_error());
            }
            std::string name((const char *) b, bl);
            if (!only.empty() && name != only) {
                continue;
            }
            t->names.push_back(std::move(name));
            t->parameters.emplace_back((const char *) p, pl);
        }
        if (t->names.empty()) {
            refuse("\"tool_choice\" names the tool '" + only + "', which is not one of the " +
                   (source.empty() ? std::string("\"tools\"") : "registry '" + source + "'"));
        }
        t->grammars.resize(t->names.size());
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
        trie_automaton * a = nullptr;
        if (trie_compile_template(sets->vocab, ptrs.data(), lens.data(), ptrs.size(), &tt, &o, &a) != TRIE_OK) {
            refuse("libtrie cannot serve these tool names: " + llama_libtrie::last_error());
        }
        t->automaton = std::shared_ptr<const trie_automaton>(
            a, [](const trie_automaton * p) { trie_automaton_free(const_cast<trie_automaton *>(p)); });
        return t;
    }, &made);
    if (made) {
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        LOG_INF("libtrie: compiled %zu tool names%s%s in %.1f ms\n", tools->names.size(),
                source.empty() ? "" : " of the registry ", source.c_str(), ms);
    }
    return tools;
}

llama_sampler * common_libtrie_tools_sampler(const std::shared_ptr<const common_libtrie_tools> & tools,
                                             const llama_vocab *                                 vocab) {
    if (!tools || vocab != tools->vocab) {
        return nullptr;
    }
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
    p.user          = const_cast<common_libtrie_tools *>(tools.get());  // read only (grammars: under its mutex)
    return trie_llama_segment_init(tools->automaton.get(), &p);
}
