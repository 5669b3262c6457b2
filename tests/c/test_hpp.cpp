// Tests of the header-only C++ wrapper include/trie.hpp: RAII, copies (retain) and moves, exceptions with status.
// Prints "N passed, N failed"; exits non-zero on any failure.
#include "trie.hpp"

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

static int passed, failed;
#define CHECK(cond)                                                              \
    do {                                                                         \
        if (cond) {                                                              \
            passed++;                                                            \
        } else {                                                                 \
            failed++;                                                            \
            std::fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                        \
    } while (0)

template <class F> static trie_status status_of(F &&f) {
    try {
        f();
    } catch (const trie::Error &e) {
        return e.status();
    }
    return TRIE_OK;
}

int main() {
    trie::Vocab v = trie::Vocab::from_tokens({"a", "b", "ab", "</s>"}, {1, 1, 1, TRIE_TOKEN_CONTROL}, {3}, 64);
    CHECK(v.n_tokens() == 64);
    CHECK(v.token(2) == "ab");
    CHECK(v.eog_ids().size() == 1 && v.eog_ids()[0] == 3);
    trie::Vocab copy = v; // a second reference
    trie::Automaton a = trie::Automaton::compile(copy, {"ab", "ba"});
    CHECK(a.n_members() == 2 && a.mask_words() == 2 && a.n_vocab() == 64);

    std::vector<std::string> set{"ab", "zz"};
    CHECK(status_of([&] { trie::Automaton::compile(v, set); }) == TRIE_ERR_UNREACHABLE_STRING);
    {
        trie::Automaton b = a.with_changes({"aab"}, {"ab"});
        CHECK(b.n_members() == 2 && a.n_members() == 2);
        CHECK(status_of([&] { a.with_changes({}, {"ab", "ba"}); }) == TRIE_ERR_EMPTY_SET);
    }
    trie::Automaton d = trie::Automaton::compile(v, set, true);
    CHECK(d.dropped().size() == 1 && d.dropped()[0] == 1);
    CHECK(status_of([&] { trie::Automaton::compile(v, std::vector<std::string>{}); }) == TRIE_ERR_EMPTY_SET);
    trie_options bounded;
    trie_options_init(&bounded);
    bounded.max_states = 2;
    std::vector<std::string> two{"ab", "ba"};
    CHECK(status_of([&] { trie::Automaton::compile(v, two, bounded); }) == TRIE_ERR_LIMIT_EXCEEDED);
    bounded.max_states = 5;
    CHECK(trie::Automaton::compile(v, two, bounded).n_members() == 2);

    trie_state s = a.start();
    CHECK(a.allowed(s).size() == 3);
    std::vector<uint32_t> m = a.mask(s);
    CHECK(m.size() == 2 && m[0] == 0x7u && m[1] == 0);
    uint32_t small[1];
    CHECK(status_of([&] { a.mask(s, small, 1); }) == TRIE_ERR_BUFFER_TOO_SMALL);
    trie_state n = 12345;
    CHECK(!a.try_advance(s, 3, n) && n == 12345);
    CHECK(status_of([&] { a.advance(s, 3); }) == TRIE_ERR_TOKEN_REJECTED);
    CHECK(status_of([&] { a.advance(s, 99); }) == TRIE_ERR_INVALID_ARGUMENT);
    CHECK(status_of([&] { a.allowed(777); }) == TRIE_ERR_INVALID_STATE);
    s = a.advance(s, 2);
    CHECK(a.is_accepting(s));
    auto f = a.forced(s);
    CHECK(f && f->bytes.empty() && f->tokens.empty());
    CHECK(!a.forced(a.start()));
    trie_state b = a.advance(a.start(), 1);
    auto fb = a.forced(b);
    CHECK(fb && fb->bytes == "a" && fb->tokens.size() == 1 && fb->tokens[0] == 0);
    CHECK(a.advance(s, 3) == trie::finished);
    CHECK(a.vocab().token(2) == "ab");

    trie_state states[2] = {a.start(), s};
    std::vector<uint32_t> rows(4);
    a.mask_batch(states, 2, rows.data(), rows.size(), 2);
    CHECK(rows[0] == 0x7u && rows[2] == 0x8u);
    trie::Row mixed[3] = {{&a, a.start()}, {nullptr, 0}, {&a, s}};
    std::vector<uint32_t> mixed_rows(6);
    trie::mask_rows(mixed, 3, mixed_rows.data(), mixed_rows.size(), 2);
    CHECK(mixed_rows[0] == 0x7u && mixed_rows[2] == UINT32_MAX && mixed_rows[3] == UINT32_MAX && mixed_rows[4] == 0x8u);
    trie::Row bad[1] = {{&a, 777}};
    CHECK(status_of([&] { trie::mask_rows(bad, 1, mixed_rows.data(), mixed_rows.size(), 2); }) == TRIE_ERR_INVALID_STATE);

    trie::Automaton moved = std::move(a);
    CHECK(moved.n_states() > 0);
    trie::Automaton shared = moved;
    moved = d; // assignment drops a reference and adds another
    CHECK(shared.n_members() == 2 && moved.n_members() == 1);

    CHECK(status_of([] { trie::Vocab::from_gguf("/nonexistent.gguf"); }) == TRIE_ERR_IO);
    try {
        trie::Vocab::from_gguf("/nonexistent.gguf");
    } catch (const trie::Error &e) {
        CHECK(std::string(e.what()).find("/nonexistent.gguf") != std::string::npos);
    }
    CHECK(trie::version() == TRIE_VERSION_STRING);

    // A tool-call name inside a template, handed over at its end: {"n": "ab"} / {"n": "ba"} then what follows.
    trie::Template t{"{\"n\": ", "}", TRIE_RENDER_JSON_STRING, TRIE_END_OPEN};
    trie::Vocab jv = trie::Vocab::from_tokens({"{", "\"", "n", ":", " ", "a", "b", "}", "}{", "</s>"},
                                              {1, 1, 1, 1, 1, 1, 1, 1, 1, TRIE_TOKEN_CONTROL}, {9}, 10);
    std::vector<std::string> tools{"ba", "ab"};
    trie::Automaton ta = trie::Automaton::compile_template(jv, tools, t);
    CHECK(ta.is_open() && ta.possible_members(ta.start()) == (std::vector<std::size_t>{1, 0}));
    trie_state ts = ta.start();
    for (int32_t tok : {0, 1, 2, 1, 3, 4, 1, 6, 5, 1}) ts = ta.advance(ts, tok); // {"n": "ba"
    CHECK(!ta.member(ts) && ta.possible_members(ts) == std::vector<std::size_t>{0});
    std::vector<trie::Crossing> cs = ta.crossing(ts);
    CHECK(cs.size() == 1 && cs[0].token == 8 && cs[0].member == 0 && cs[0].overflow == 1); // "}{"
    CHECK(ta.crossing(ts, [](std::size_t, std::string_view o) { return o[0] == '['; }).empty());
    CHECK(ta.cross(ts, 8).member == 0);
    CHECK(status_of([&] { ta.cross(ts, 7); }) == TRIE_ERR_TOKEN_REJECTED);
    trie_state done = ta.advance(ts, 7);
    CHECK(ta.member(done) == std::optional<std::size_t>(0) && ta.allowed(done).empty());
    trie::Template prefixy{"", "", TRIE_RENDER_RAW, TRIE_END_OPEN};
    CHECK(status_of([&] { trie::Automaton::compile_template(jv, std::vector<std::string>{"a", "ab"}, prefixy); }) ==
          TRIE_ERR_INVALID_ARGUMENT);
    std::printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
