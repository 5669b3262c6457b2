// llama-libtrie.h - libtrie in llama.cpp's common library and llama-server (built with -DLLAMA_LIBTRIE=ON).
//
// patches/llama-server-libtrie.patch adds llama-libtrie.cpp to llama-common and:
//   - common_params::libtrie                 the operator's options (flags --trie-*, environment LIBTRIE_*),
//   - common_params_sampling::trie           the compiled set of a request (shared, immutable),
//   - common_sampler::trie                   one trie stage per sampler (one trie state per slot), applied before
//                                            the sampler chain, advanced by generated tokens only, cloned/copied
//                                            with the sampler for the server's rollbacks,
//   - the server's "trie" request field      resolved here by libtrie's front end: checked, then compiled once into
//                                            a shared LRU.
//
// A request names its set with "trie":
//   {"set": "tools"}            the file tools.txt of the set directory (--trie-set-dir / LIBTRIE_SET_DIR)
//   {"file": "sub/x.txt"}       a file by its path relative to the set directory
//   {"strings": ["a", "b"]}     the members inline (bounded by --trie-max-inline-strings / -bytes)
//   optional "drop_unreachable": true   drop members the vocabulary cannot spell instead of failing
// Short forms: a string ("tools", or a path when it holds a '/'), an array of strings.
// Set files: one member per line, '\n' separated, a final newline ignored, UTF-8.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

struct llama_vocab;
struct llama_sampler;
struct trie_automaton;
struct common_chat_templates;
class common_json;

// The operator's options (common/arg.cpp: --trie-*; defaults as the vLLM processor's).
struct common_params_libtrie {
    std::string set_dir;                           // real path of the set directory; empty: no sets from files
    std::string compiled_dir;                      // compiled sets shared by the processes of a machine (--trie-compiled-dir); empty: none
    std::string deferred_registry;                 // a registry of set_dir offered as deferred tools of every chat request with tools (--trie-deferred-registry); empty: none
    uint64_t    max_inline_strings = 10000;        // most members of an inline set
    uint64_t    max_inline_bytes   = 1u << 20;     // most bytes of an inline set (a byte per member counted for its separator)
    uint64_t    max_file_bytes     = 256u << 20;   // largest set file read
    uint64_t    max_states         = 0;            // trie_options.max_states of every compile (0: the library's own bounds)
    uint64_t    max_bytes          = 0;            // trie_options.max_bytes of every compile (0: no bound)
    uint64_t    cache_size         = 64;           // compiled sets kept (least recently used dropped first)
    uint32_t    max_json_depth     = 128;          // deepest JSON nesting of a request body (checked before it is parsed)
    bool        route              = true;         // serve json_schema / grammar sets and tool calls (--trie-no-route: off)
};

// The compiled set a request's "trie" value names, for the vocabulary `vocab`, through libtrie's request-set front
// end (trie_set_cache_get: the same parsing, confinement and LRU as the vLLM processor). One set cache per
// vocabulary fingerprint, built on first use; a llama_vocab is recognised by a signature of its tokens, not by its
// address (a model freed and another loaded at the same address gets its own). Compiled in the calling thread on a
// miss (a set asked for by several requests at once is compiled once; the others wait for it). Thread-safe.
// Throws std::invalid_argument with a reason fit for the client (the set directory's location is not disclosed).
std::shared_ptr<const trie_automaton> common_libtrie_resolve(const common_params_libtrie & opts,
                                                             const llama_vocab *           vocab,
                                                             const common_json &           value);

// Parses a non-negative integer option (digits, '_' separators allowed); throws std::invalid_argument naming `what`.
uint64_t common_libtrie_parse_u64(const std::string & value, const char * what);

// The real path of an operator's set directory; throws std::invalid_argument when it is not a directory.
std::string common_libtrie_set_dir(const std::string & path);

// A registry name of an operator's option (`what`): the name as given; throws std::invalid_argument naming `what`
// when it is empty or not a plain name (a '/', a NUL, "." or "..": registries are NAME.json of the set directory).
std::string common_libtrie_registry_name(const std::string & value, const char * what);

// Checks the options that need more than their own value once all are parsed (server start): a
// --trie-deferred-registry needs --trie-set-dir and a registry libtrie reads. Logs the reason and returns false
// when the server cannot serve them.
bool common_libtrie_check_options(const common_params_libtrie & opts);

// The operator's compiled directory (--trie-compiled-dir / LIBTRIE_COMPILED_DIR), created (0700) if missing: set
// files, registries' tool names and routed sets compiled by one llama-server are saved there and mapped by the
// others (one copy in the page cache, one compile per machine). Throws std::invalid_argument when it is not a
// directory and cannot be created.
std::string common_libtrie_compiled_dir(const std::string & path);

// Counters for logs and tests, summed over the live set caches: compiles run (failed ones included), lookups served
// from the LRU, sets held.
struct common_libtrie_stats {
    uint64_t compiles = 0;
    uint64_t hits     = 0;
    uint64_t entries  = 0;
};
common_libtrie_stats common_libtrie_get_stats();

// ---- Routing without a new field (llama-libtrie-route.cpp) ---------------------------------------------------
//
// A request's "json_schema" / "response_format" schema that libtrie's recognizer reads as a set (a string enum,
// a const, anyOf/oneOf of those) and a "grammar" that is a pure literal alternation (llama.cpp's own enum form
// included) are served by libtrie instead of a GBNF grammar; anything else goes the usual way.

// Routing on (the default) or off (--trie-no-route: everything below goes llama.cpp's way, for comparisons).
// Process-wide; set once while the options are parsed.
void common_libtrie_set_route(bool on);

enum common_libtrie_shape : int {
    COMMON_LIBTRIE_JSON_SCHEMA = 1,  // trie_recognize(TRIE_RECOGNIZE_JSON_SCHEMA)
    COMMON_LIBTRIE_GRAMMAR     = 2,  // trie_recognize(TRIE_RECOGNIZE_GRAMMAR)
};

// Whether `text` (a JSON schema or a GBNF grammar) is a set libtrie serves (false with routing off): no vocabulary
// needed; recognized within the operator's inline bounds (trie_recognize_with: --trie-max-inline-strings / -bytes,
// the text by 12x the bytes + 64 KiB, the nesting by --trie-max-json-depth), so a set over them is refused before
// it is built. Throws std::invalid_argument for malformed input or a bound hit, the message starting with `field`
// (the request field the client sent: "json_schema", "response_format", "grammar").
bool common_libtrie_is_set(const common_params_libtrie & opts, int shape, const std::string & text, const char * field);

// The compiled set of `text` for `vocab`, or nullptr when it is not a set or routing is off (the caller keeps its
// own grammar).
// Compiled once per (vocabulary, shape, text) into an LRU of --trie-cache-size entries; bounded by the inline
// limits (--trie-max-inline-strings / -bytes, the text by 12x the bytes + 64 KiB) and --trie-max-states /
// --trie-max-bytes. Throws std::invalid_argument naming the problem (an HTTP 400).
std::shared_ptr<const trie_automaton> common_libtrie_route(const common_params_libtrie & opts,
                                                           const llama_vocab *           vocab,
                                                           int                           shape,
                                                           const std::string &           text);

// ---- Requests before they are parsed, and reasoning templates (llama-libtrie-route.cpp) ------------------------

// The deepest JSON nesting of a request body (--trie-max-json-depth; process-wide, set while the options are parsed).
void common_libtrie_set_max_json_depth(uint32_t depth);

// "" when the raw request body may be parsed, else the reason for an HTTP 400: its JSON nesting is deeper than
// --trie-max-json-depth (checked on the raw bytes, without recursion, before any JSON parser or dump touches it:
// nlohmann's dump and destructor recurse, and a deep enough body overflows the stack). With or without routing.
std::string common_libtrie_check_body(const std::string & body);

// Whether a chat request's output starts with a reasoning block (the template has reasoning tags, and thinking is
// on or the generation prompt leaves a block open, e.g. "<think>\n"): libtrie's stage would then constrain the
// reasoning instead of the content, and the reasoning-budget sampler could force its end tag outside the set, so
// such a request is left to llama.cpp (not routed).
bool common_libtrie_reasoning_first(const std::string & generation_prompt, const std::string & thinking_start_tag,
                                    const std::vector<std::string> & thinking_end_tags, bool enable_thinking);

// ---- Tool calls (llama-libtrie-tools.cpp) ---------------------------------------------------------------------
//
// libtrie's tool-call engine (trie_calls_*, the template's markers as its format) decides the answer: free content
// ("auto"), the marker, the tool's name from a trie, the hand-over to that tool's arguments, the close, the next
// call or the end. llama.cpp supplies each tool's argument matcher: the grammar of its "parameters"
// (json-schema-to-grammar) followed by the call's closing text, built when the tools are checked. The tools come
// from the request ("tools") or from an operator registry (a JSON file of the set directory, compiled once, cached).

struct common_libtrie_tools;  // one compiled tool-call constraint (opaque, immutable, shared)

// The tool-call format of a chat template as libtrie writes it: section_start + {"name": NAME, "arguments": ARGS}
// + section_end. `native`: the template's own JSON-native format (llama.cpp's autoparser found it, and its parser
// reads such calls back); false: the template has none, and the bare JSON object is used.
struct common_libtrie_tool_format {
    bool        native = false;
    std::string section_start;  // e.g. "<tool_call>" (Hermes / Qwen2.5), "" for none
    std::string section_end;    // e.g. "</tool_call>"
};

// Defined in common/chat.cpp (patches/llama-server-libtrie.patch): runs llama.cpp's template analysis once per
// template and caches it.
common_libtrie_tool_format common_chat_templates_libtrie_tool_format(const struct common_chat_templates * tmpls);

// The internal "trie_tools" request value the chat endpoint builds (JSON text), or "" when libtrie does not serve
// this request's tool call (always "" with routing off). Served: "tools" with "tool_choice" "required" or a named tool
// ({"type": "function", "function": {"name": ...}}), or "trie": {"registry": NAME}; "auto" (or no tool_choice) with
// "tools" when the template has a JSON-native format with a section marker: lazily, the stage waits for the marker
// ("lazy": true). `body` is the request; its "tools" are recognized within the inline bounds of `opts`.
// Throws std::invalid_argument for a bad request (a named tool not in "tools", a bad registry name).
std::string common_libtrie_chat_tools(const common_params_libtrie & opts, const common_json & body,
                                      const common_libtrie_tool_format & format);

// Resolves a "trie_tools" value: checks it, compiles the names (cached like a named set), builds every tool's
// argument grammar (llama.cpp's build_grammar; a tool whose parameters are not an object schema, or that llama.cpp's
// converter refuses, refuses the request, or the registry). The value carries a per-process secret that
// common_libtrie_chat_tools writes: a value a client sent itself is refused. Throws std::invalid_argument naming
// the problem by the client's fields ("tools", "tool_choice", "trie").
std::shared_ptr<const common_libtrie_tools> common_libtrie_tools_resolve(const common_params_libtrie & opts,
                                                                         const llama_vocab *           vocab,
                                                                         const common_json &           value);

// A new sampler stage for one generation ("trie-tools": one sequence of the engine, trie_calls_matcher_new), or
// nullptr on failure.
struct llama_sampler * common_libtrie_tools_sampler(const std::shared_ptr<const common_libtrie_tools> & tools,
                                                    const llama_vocab *                                 vocab);

// Deferred tools and tool search ("defer_loading": true on a tool or its function, a tool-search tool, tool_reference
// items in the history), decided by libtrie (trie_deferred_plan over the request's "tools" and "messages"). Returns
// false when the request is left as it is (no tools, nothing deferred, no search tool, no reference). Else `body`'s
// "messages" become the plan's (the history as the model sees it: a search call with an empty result answered by
// libtrie's search, references as text), `body`'s "tools" every tool a call may name (the plan's tools, the search
// function with its one free-text argument among them, and every other tool of the request, deferred ones included,
// "defer_loading" removed: the call's name set and the hand-over's schemas), and `prompt_tools` the tools the chat
// template renders (the plan's). Throws std::invalid_argument naming the client's field ("tools", "messages").
bool common_libtrie_deferred(const common_params_libtrie & opts, common_json & body, common_json & prompt_tools);
