// The README's C++ example, whole (include/trie.hpp: RAII handles, failures throw trie::Error). CMake builds this
// file and ctest runs it (example_cpp_quickstart, scripts/test-c.sh); scripts/check-docs.py checks the README's copy.
//
//   trie_example_cpp_quickstart MODEL.gguf
#include <trie.hpp>

#include <iostream>
#include <string>
#include <vector>

int main(int argc, char **argv) try {
    if (argc != 2) {
        std::cerr << "usage: " << argv[0] << " MODEL.gguf\n";
        return 2;
    }
    // docs:begin decode
    trie::Vocab vocab = trie::Vocab::from_gguf(argv[1]);
    trie::Automaton tools = trie::Automaton::compile(vocab, {"github.create_issue", "github.close_issue"});
    std::string text;
    for (trie_state s = tools.start(); s != trie::finished;) {
        std::vector<uint32_t> mask = tools.mask(s);  // apply to the logits, then sample; here the last allowed id:
        int32_t token = tools.allowed(s).back();
        if ((s = tools.advance(s, token)) != trie::finished) text += vocab.token(token);  // throws if not allowed
    }
    // docs:end decode
    std::cout << text << "\n";
    trie::Automaton more = tools.with_changes({"github.reopen_issue"}, {});
    if (text != "github.create_issue" && text != "github.close_issue") return 1;
    return more.n_members() == 3 ? 0 : 1;
} catch (const trie::Error &e) {
    std::cerr << "libtrie: " << e.what() << "\n";
    return 1;
}
