// libtrie C++ example: the C example's walk with the header-only RAII wrapper (include/trie.hpp).
//
//   trie_example_cpp VOCAB.gguf SET.txt [N_WALKS=5] [SEED=1]
#include <trie.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <vector>

int main(int argc, char **argv) try {
    if (argc < 3) {
        std::cerr << "usage: " << argv[0] << " VOCAB.gguf SET.txt [N_WALKS=5] [SEED=1]\n";
        return 2;
    }
    const int n_walks = argc > 3 ? std::stoi(argv[3]) : 5;
    std::mt19937_64 rng(argc > 4 ? std::stoull(argv[4]) : 1);
    using clock = std::chrono::steady_clock;
    auto ms = [](clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); };
    std::cout << "libtrie " << trie::version() << " (header " << TRIE_VERSION_STRING << ")\n";

    auto t0 = clock::now();
    trie::Vocab vocab = trie::Vocab::from_gguf(argv[1]);
    std::printf("vocabulary: %zu token ids, loaded in %.1f ms\n", vocab.n_tokens(), ms(clock::now() - t0));

    std::vector<std::string> set;
    std::ifstream in(argv[2], std::ios::binary);
    if (!in) throw std::runtime_error(std::string("cannot read ") + argv[2]);
    for (std::string line; std::getline(in, line);) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (!line.empty()) set.push_back(line);
    }

    t0 = clock::now();
    trie::Automaton automaton = trie::Automaton::compile(vocab, set, /*drop_unreachable=*/true);
    std::printf("set: %zu strings, %zu members, %zu states, %.1f KiB, compiled in %.2f ms\n", set.size(),
                automaton.n_members(), automaton.n_states(), automaton.memory_usage() / 1024.0,
                ms(clock::now() - t0));
    for (std::size_t i : automaton.dropped()) std::cout << "dropped (no tokens spell it): " << set[i] << "\n";

    std::vector<uint32_t> mask(automaton.mask_words());
    std::vector<int32_t> allowed;
    clock::duration t_mask{}, t_advance{};
    std::size_t n_steps = 0;
    int bad = 0;
    bool shown_forced = false;
    for (int w = 0; w < n_walks; w++) {
        std::string text;
        std::size_t n_tokens = 0;
        trie_state state = automaton.start();
        while (state != trie::finished) {
            auto a = clock::now();
            automaton.mask(state, mask.data(), mask.size());
            t_mask += clock::now() - a;
            automaton.allowed(state, allowed); // reuses the vector: no allocation per step
            int32_t token = allowed[std::uniform_int_distribution<std::size_t>(0, allowed.size() - 1)(rng)];
            if (!(mask[token / 32] >> (token % 32) & 1u)) bad = 1;
            auto b = clock::now();
            trie_state next = automaton.advance(state, token);
            t_advance += clock::now() - b;
            n_steps++;
            if (next != trie::finished) {
                text += vocab.token(token);
                n_tokens++;
            }
            if (auto forced = automaton.forced(next); forced && !shown_forced && !forced->bytes.empty()) {
                shown_forced = true;
                std::printf("  forced after \"%s\": \"%s\" in %zu tokens\n", text.c_str(), forced->bytes.c_str(),
                            forced->tokens.size());
            }
            state = next;
        }
        bool member = std::find(set.begin(), set.end(), text) != set.end();
        bad |= !member;
        std::printf("walk %d: \"%s\" (%zu tokens)%s\n", w + 1, text.c_str(), n_tokens, member ? "" : "  NOT A MEMBER");
    }
    if (n_steps)
        std::printf("per step: mask %.2f us, advance %.0f ns (%zu steps)\n", ms(t_mask) * 1e3 / n_steps,
                    ms(t_advance) * 1e6 / n_steps, n_steps);

    // Errors are exceptions carrying the status and the message.
    try {
        automaton.advance(automaton.start(), -1);
    } catch (const trie::Error &e) {
        std::cout << "expected error: status " << e.status() << ": " << e.what() << "\n";
    }
    return bad;
} catch (const std::exception &e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
}
