// llama.cpp's own chat parser as the reader of libtrie's tool calls (tests/calls-proof, scripts/test-calls-proof.sh).
//
// Linked against the llama.cpp build of scripts/fetch-llama.sh (libllama-common.so of the pinned tree). For each
// request it does what llama-server does with a chat request that has tools: the model's chat template (a file of
// the tree's models/templates) is applied with the request's tools, tool_choice and parallel_tool_calls
// (common_chat_templates_init + common_chat_templates_apply), which builds the template's PEG parser; the model's
// output is then read by common_chat_parse(output, is_partial=false, params), as the server reads a finished answer.
//
// Protocol: JSON lines on stdin, one answer line on stdout per "call" line, in order.
//   {"kind": "tools", "key": K, "tools": [{"name": N, "parameters": SCHEMA}, ...]}   a tool list (no answer)
//   {"kind": "call", "id": I, "tools": K, "template": FILE, "tool_choice": "auto"|"required",
//    "parallel": BOOL, "output": TEXT}
// answer: {"id": I, "ok": true, "format": NAME, "content": TEXT, "tool_calls": [{"name": N, "arguments": TEXT}]}
//      or {"id": I, "ok": false, "error": MESSAGE} (the template or the parse threw).
// argv[1]: the folder of the templates (<llama.cpp>/models/templates). llama.cpp's logs go to stderr.
#include "chat.h"

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

using json = nlohmann::ordered_json;

static std::string read_file(const std::string & path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw std::runtime_error("cannot read " + path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

int main(int argc, char ** argv) {
    if (argc != 2) {
        std::cerr << "usage: " << argv[0] << " TEMPLATES_DIR < requests.jsonl\n";
        return 2;
    }
    const std::string dir = argv[1];
    std::map<std::string, std::vector<common_chat_tool>> tool_lists;
    std::map<std::string, common_chat_templates_ptr> templates;
    // (tools key, template, tool_choice, parallel) -> the parser parameters llama-server would use
    std::map<std::tuple<std::string, std::string, std::string, bool>, common_chat_parser_params> parsers;
    std::string line;
    while (std::getline(std::cin, line)) {
        if (line.empty()) continue;
        json req = json::parse(line);
        const std::string kind = req.at("kind");
        if (kind == "tools") {
            std::vector<common_chat_tool> tools;
            for (const auto & t : req.at("tools")) {
                tools.push_back({t.at("name").get<std::string>(), "", t.at("parameters").dump()});
            }
            const std::string key = req.at("key");
            tool_lists[key] = std::move(tools);
            for (auto it = parsers.begin(); it != parsers.end();) {
                it = std::get<0>(it->first) == key ? parsers.erase(it) : std::next(it);
            }
            continue;
        }
        json out;
        out["id"] = req.at("id");
        try {
            const std::string key = req.at("tools"), tmpl = req.at("template"), choice = req.at("tool_choice");
            const bool parallel = req.at("parallel");
            auto pk = std::make_tuple(key, tmpl, choice, parallel);
            auto it = parsers.find(pk);
            if (it == parsers.end()) {
                if (parsers.size() >= 16) {  // a bounded cache: the calls come grouped by tool list
                    parsers.clear();
                }
                auto t = templates.find(tmpl);
                if (t == templates.end()) {
                    t = templates.emplace(tmpl, common_chat_templates_init(nullptr, read_file(dir + "/" + tmpl), "<s>", "</s>")).first;
                }
                common_chat_templates_inputs inputs;
                common_chat_msg user;
                user.role = "user";
                user.content = "Call a tool.";
                inputs.messages = { user };
                inputs.tools = tool_lists.at(key);
                inputs.tool_choice = choice == "required" ? COMMON_CHAT_TOOL_CHOICE_REQUIRED : COMMON_CHAT_TOOL_CHOICE_AUTO;
                inputs.parallel_tool_calls = parallel;
                inputs.enable_thinking = false;
                common_chat_params cp = common_chat_templates_apply(t->second.get(), inputs);
                common_chat_parser_params pp(cp);
                pp.parse_tool_calls = true;
                if (!cp.parser.empty()) pp.parser.load(cp.parser);
                if (getenv("TRIE_PROOF_DUMP")) {  // the template's parser, to read what it expects
                    std::cerr << "format " << common_chat_format_name(cp.format) << " generation_prompt "
                              << json(cp.generation_prompt).dump() << "\n" << pp.parser.dump(pp.parser.root()) << "\n";
                }
                it = parsers.emplace(pk, std::move(pp)).first;
            }
            common_chat_msg msg = common_chat_parse(req.at("output").get<std::string>(), false, it->second);
            out["ok"] = true;
            out["format"] = common_chat_format_name(it->second.format);
            out["content"] = msg.content;
            out["reasoning"] = msg.reasoning_content;
            json calls = json::array();
            for (const auto & c : msg.tool_calls) {
                calls.push_back({ { "name", c.name }, { "arguments", c.arguments } });
            }
            out["tool_calls"] = calls;
        } catch (const std::exception & e) {
            out["ok"] = false;
            out["error"] = e.what();
        }
        std::cout << out.dump(-1, ' ', false, json::error_handler_t::replace) << "\n" << std::flush;
    }
    return 0;
}
