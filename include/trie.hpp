// libtrie C++ wrapper: header-only RAII over include/trie.h (C++17).
//
//   trie::Vocab vocab = trie::Vocab::from_gguf("model.gguf");
//   trie::Automaton automaton = trie::Automaton::compile(vocab, {"search_flights", "book_hotel"});
//   trie_state s = automaton.start();
//   std::vector<uint32_t> mask = automaton.mask(s);   // apply to the logits, sample a token t
//   s = automaton.advance(s, t);                      // throws trie::Error on a rejected token
//
// Failures throw trie::Error, which carries the trie_status and libtrie's message. Vocab and Automaton are
// reference-counted handles: copying one adds a reference (cheap), moving steals it; both are immutable and may
// be shared across threads. A trie_state is a plain integer.
#ifndef TRIE_HPP
#define TRIE_HPP

#include "trie.h"

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace trie {

/// A libtrie failure: the status and the message of `trie_last_error()`.
class Error : public std::runtime_error {
public:
    Error(trie_status status, const std::string &message)
        : std::runtime_error(std::string(trie_status_str(status)) + ": " + message), status_(status) {}
    trie_status status() const noexcept { return status_; }

private:
    trie_status status_;
};

namespace detail {
inline void check(trie_status status) {
    if (status != TRIE_OK) throw Error(status, trie_last_error());
}
} // namespace detail

/// A read-only view of an array owned by a Vocab or Automaton (valid while that handle lives).
template <class T> class View {
public:
    View() = default;
    View(const T *data, std::size_t size) : data_(data), size_(size) {}
    const T *begin() const noexcept { return data_; }
    const T *end() const noexcept { return data_ + size_; }
    const T *data() const noexcept { return data_; }
    std::size_t size() const noexcept { return size_; }
    bool empty() const noexcept { return size_ == 0; }
    const T &operator[](std::size_t i) const noexcept { return data_[i]; }

private:
    const T *data_ = nullptr;
    std::size_t size_ = 0;
};

/// The state after an end-of-generation token.
inline constexpr trie_state finished = TRIE_STATE_FINISHED;

/// The version of the linked library.
inline std::string version() { return trie_version(); }

/// A tokenizer vocabulary.
class Vocab {
public:
    /// Reads the tokenizer of a GGUF file.
    static Vocab from_gguf(const std::string &path) {
        trie_vocab *v = nullptr;
        detail::check(trie_vocab_from_gguf(path.c_str(), &v));
        return Vocab(v);
    }

    /// Reads a Hugging Face tokenizer.json, inferring the end-of-generation ids.
    static Vocab from_tokenizer_json(const std::string &path) {
        trie_vocab *v = nullptr;
        detail::check(trie_vocab_from_tokenizer_json(path.c_str(), &v));
        return Vocab(v);
    }

    /// Reads a Hugging Face tokenizer.json with the given end-of-generation ids and mask width (0: default).
    static Vocab from_tokenizer_json(const std::string &path, const std::vector<int32_t> &eog_ids,
                                     std::size_t n_vocab = 0) {
        static const int32_t none = 0;
        trie_vocab *v = nullptr;
        detail::check(trie_vocab_from_tokenizer_json_ex(path.c_str(), eog_ids.empty() ? &none : eog_ids.data(),
                                                        eog_ids.size(), n_vocab, &v));
        return Vocab(v);
    }

    /// Builds a vocabulary from the bytes of every token id, their kinds (`TRIE_TOKEN_*`; empty: all normal),
    /// the end-of-generation ids and the mask width (0: the number of tokens).
    static Vocab from_tokens(const std::vector<std::string> &tokens, const std::vector<uint32_t> &kinds,
                             const std::vector<int32_t> &eog_ids, std::size_t n_vocab = 0) {
        if (!kinds.empty() && kinds.size() != tokens.size())
            throw Error(TRIE_ERR_INVALID_ARGUMENT, "kinds must be empty or as long as tokens");
        std::vector<const uint8_t *> ptrs(tokens.size());
        std::vector<std::size_t> lens(tokens.size());
        for (std::size_t i = 0; i < tokens.size(); i++) {
            ptrs[i] = reinterpret_cast<const uint8_t *>(tokens[i].data());
            lens[i] = tokens[i].size();
        }
        trie_vocab *v = nullptr;
        detail::check(trie_vocab_new_ex(ptrs.data(), lens.data(), kinds.empty() ? nullptr : kinds.data(),
                                        tokens.size(), eog_ids.data(), eog_ids.size(), n_vocab, &v));
        return Vocab(v);
    }

    /// Takes ownership of one reference to `handle` (not NULL).
    explicit Vocab(trie_vocab *handle) : v_(handle) {
        if (!v_) throw Error(TRIE_ERR_NULL_ARGUMENT, "vocab handle is NULL");
    }
    Vocab(const Vocab &other) noexcept : v_(trie_vocab_retain(other.v_)) {}
    Vocab(Vocab &&other) noexcept : v_(std::exchange(other.v_, nullptr)) {}
    Vocab &operator=(Vocab other) noexcept {
        std::swap(v_, other.v_);
        return *this;
    }
    ~Vocab() { trie_vocab_free(v_); }

    /// Number of token ids (the mask width in bits).
    std::size_t n_tokens() const noexcept { return trie_vocab_n_tokens(v_); }
    /// Heap bytes held.
    std::size_t memory_usage() const noexcept { return trie_vocab_memory_usage(v_); }
    /// The bytes token `id` stands for.
    std::string_view token(int32_t id) const {
        const uint8_t *bytes = nullptr;
        std::size_t len = 0;
        detail::check(trie_vocab_token(v_, id, &bytes, &len));
        return std::string_view(reinterpret_cast<const char *>(bytes), len);
    }
    /// The end-of-generation ids, ascending.
    View<int32_t> eog_ids() const {
        const int32_t *ids = nullptr;
        std::size_t n = 0;
        detail::check(trie_vocab_eog_ids(v_, &ids, &n));
        return View<int32_t>(ids, n);
    }
    /// The C handle (still owned by this object).
    const trie_vocab *get() const noexcept { return v_; }

private:
    trie_vocab *v_;
};

/// The rest of the only string left below a state, and tokens that spell it.
struct Forced {
    std::string bytes;
    std::vector<int32_t> tokens;
};

/// A literal prefix and suffix around every member, a rendering (TRIE_RENDER_*) and an end (TRIE_END_*).
struct Template {
    std::string prefix;
    std::string suffix;
    uint32_t render = TRIE_RENDER_RAW;
    uint32_t end = TRIE_END_EOG;
};

/// A token that finishes a segment and goes on past it: its last `overflow` bytes belong to what follows.
struct Crossing {
    int32_t token;
    std::size_t member;
    uint32_t overflow;
};

/// A set of strings compiled against a vocabulary.
class Automaton {
public:
    /// Compiles `strings` against `vocab`. With `drop_unreachable`, strings the vocabulary cannot spell are
    /// dropped (see dropped()) instead of throwing.
    template <class Strings> static Automaton compile(const Vocab &vocab, const Strings &strings,
                                                      bool drop_unreachable = false) {
        trie_options options;
        trie_options_init(&options);
        options.drop_unreachable = drop_unreachable;
        return compile(vocab, strings, options);
    }
    /// Compiles `strings` against `vocab` with `options` (initialised by trie_options_init: bounds on states and
    /// memory, dropping unreachable strings).
    template <class Strings>
    static Automaton compile(const Vocab &vocab, const Strings &strings, const trie_options &options) {
        std::vector<const uint8_t *> ptrs;
        std::vector<std::size_t> lens;
        for (const auto &s : strings) {
            std::string_view sv(s);
            ptrs.push_back(reinterpret_cast<const uint8_t *>(sv.data()));
            lens.push_back(sv.size());
        }
        trie_automaton *a = nullptr;
        detail::check(trie_compile(vocab.get(), ptrs.data(), lens.data(), ptrs.size(), &options, &a));
        return Automaton(a);
    }
    static Automaton compile(const Vocab &vocab, std::initializer_list<std::string_view> strings,
                             bool drop_unreachable = false) {
        return compile<std::initializer_list<std::string_view>>(vocab, strings, drop_unreachable);
    }

    /// A new automaton for this set with `add` added and `remove` removed (see trie_automaton_with): equal to a
    /// full compile of the resulting set, built from this one; this automaton is unchanged.
    template <class Add, class Remove>
    Automaton with_changes(const Add &add, const Remove &remove, const trie_options *options = nullptr) const {
        std::vector<const uint8_t *> ap, rp;
        std::vector<std::size_t> al, rl;
        for (const auto &s : add) {
            std::string_view sv(s);
            ap.push_back(reinterpret_cast<const uint8_t *>(sv.data()));
            al.push_back(sv.size());
        }
        for (const auto &s : remove) {
            std::string_view sv(s);
            rp.push_back(reinterpret_cast<const uint8_t *>(sv.data()));
            rl.push_back(sv.size());
        }
        trie_automaton *b = nullptr;
        detail::check(trie_automaton_with(a_, ap.data(), al.data(), ap.size(), rp.data(), rl.data(), rp.size(),
                                          options, &b));
        return Automaton(b);
    }
    Automaton with_changes(std::initializer_list<std::string_view> add,
                           std::initializer_list<std::string_view> remove) const {
        return with_changes<std::initializer_list<std::string_view>, std::initializer_list<std::string_view>>(
            add, remove);
    }

    /// Compiles `members` inside `tmpl` (see trie_compile_template): the language is
    /// { prefix + render(m) + suffix }, members identified by their index in `members`.
    template <class Strings>
    static Automaton compile_template(const Vocab &vocab, const Strings &members, const Template &tmpl,
                                      const trie_options *options = nullptr) {
        std::vector<const uint8_t *> ptrs;
        std::vector<std::size_t> lens;
        for (const auto &s : members) {
            std::string_view sv(s);
            ptrs.push_back(reinterpret_cast<const uint8_t *>(sv.data()));
            lens.push_back(sv.size());
        }
        trie_template t;
        trie_template_init(&t);
        t.prefix = reinterpret_cast<const uint8_t *>(tmpl.prefix.data());
        t.prefix_len = tmpl.prefix.size();
        t.suffix = reinterpret_cast<const uint8_t *>(tmpl.suffix.data());
        t.suffix_len = tmpl.suffix.size();
        t.render = tmpl.render;
        t.end = tmpl.end;
        trie_automaton *a = nullptr;
        detail::check(trie_compile_template(vocab.get(), ptrs.data(), lens.data(), ptrs.size(), &t, options, &a));
        return Automaton(a);
    }

    /// Takes ownership of one reference to `handle` (not NULL).
    explicit Automaton(trie_automaton *handle) : a_(handle) {
        if (!a_) throw Error(TRIE_ERR_NULL_ARGUMENT, "automaton handle is NULL");
    }
    Automaton(const Automaton &other) noexcept : a_(trie_automaton_retain(other.a_)) {}
    Automaton(Automaton &&other) noexcept : a_(std::exchange(other.a_, nullptr)) {}
    Automaton &operator=(Automaton other) noexcept {
        std::swap(a_, other.a_);
        return *this;
    }
    ~Automaton() { trie_automaton_free(a_); }

    /// The vocabulary compiled against (a new reference).
    Vocab vocab() const { return Vocab(trie_automaton_vocab(a_)); }
    std::size_t n_vocab() const noexcept { return trie_automaton_n_vocab(a_); }
    std::size_t mask_words() const noexcept { return trie_automaton_mask_words(a_); }
    std::size_t n_states() const noexcept { return trie_automaton_n_states(a_); }
    std::size_t n_members() const noexcept { return trie_automaton_n_members(a_); }
    std::size_t memory_usage() const noexcept { return trie_automaton_memory_usage(a_); }
    /// Input indices of the strings dropped as unreachable.
    View<std::size_t> dropped() const {
        const std::size_t *idx = nullptr;
        std::size_t n = 0;
        detail::check(trie_automaton_dropped(a_, &idx, &n));
        return View<std::size_t>(idx, n);
    }

    trie_state start() const noexcept { return trie_start(a_); }
    bool is_accepting(trie_state state) const noexcept { return trie_is_accepting(a_, state); }

    /// The tokens allowed in `state`, ascending (a copy).
    std::vector<int32_t> allowed(trie_state state) const {
        std::vector<int32_t> tokens;
        allowed(state, tokens);
        return tokens;
    }
    /// The tokens allowed in `state`, ascending, into `tokens` (resized; reuse it across steps to decode
    /// without allocating).
    void allowed(trie_state state, std::vector<int32_t> &tokens) const {
        std::size_t n = 0;
        tokens.resize(tokens.capacity() ? tokens.capacity() : 64);
        trie_status st = trie_allowed(a_, state, tokens.data(), tokens.size(), &n);
        if (st == TRIE_ERR_BUFFER_TOO_SMALL) {
            tokens.resize(n);
            st = trie_allowed(a_, state, tokens.data(), tokens.size(), &n);
        }
        detail::check(st);
        tokens.resize(n);
    }

    /// Writes the bitmask of `state` into `bitmask` (at least mask_words() words).
    void mask(trie_state state, uint32_t *bitmask, std::size_t n_words) const {
        detail::check(trie_mask(a_, state, bitmask, n_words));
    }
    /// The bitmask of `state` as a new vector of mask_words() words.
    std::vector<uint32_t> mask(trie_state state) const {
        std::vector<uint32_t> row(mask_words());
        mask(state, row.data(), row.size());
        return row;
    }
    /// One row of `row_words` words per state into `bitmask` (`n_words` words in all).
    void mask_batch(const trie_state *states, std::size_t n_states, uint32_t *bitmask, std::size_t n_words,
                    std::size_t row_words) const {
        detail::check(trie_mask_batch(a_, states, n_states, bitmask, n_words, row_words));
    }

    /// The state after `token`; throws Error (status TRIE_ERR_TOKEN_REJECTED) when it is not allowed.
    trie_state advance(trie_state state, int32_t token) const {
        trie_state next = state;
        detail::check(trie_advance(a_, state, token, &next));
        return next;
    }
    /// Like advance(), but a token that is not allowed returns false (other errors still throw).
    bool try_advance(trie_state state, int32_t token, trie_state &next) const {
        trie_status st = trie_advance(a_, state, token, &next);
        if (st == TRIE_ERR_TOKEN_REJECTED) return false;
        detail::check(st);
        return true;
    }

    /// The forced continuation of `state`, or nothing when several strings remain.
    std::optional<Forced> forced(trie_state state) const {
        std::size_t n_bytes = 0, n_tokens = 0;
        bool is_forced = false;
        trie_status st = trie_forced(a_, state, nullptr, 0, &n_bytes, nullptr, 0, &n_tokens, &is_forced);
        if (st != TRIE_ERR_BUFFER_TOO_SMALL) detail::check(st);
        if (!is_forced) return std::nullopt;
        Forced f;
        f.bytes.resize(n_bytes);
        f.tokens.resize(n_tokens);
        detail::check(trie_forced(a_, state, reinterpret_cast<uint8_t *>(f.bytes.data()), n_bytes, &n_bytes,
                                  f.tokens.data(), n_tokens, &n_tokens, &is_forced));
        return f;
    }

    /// Whether segments are handed over at their end (TRIE_END_OPEN).
    bool is_open() const noexcept { return trie_automaton_is_open(a_); }
    /// The member whose segment is complete in `state`, or nothing.
    std::optional<std::size_t> member(trie_state state) const {
        std::size_t m = 0;
        detail::check(trie_member(a_, state, &m));
        if (m == SIZE_MAX) return std::nullopt;
        return m;
    }
    /// The members still possible in `state` (ids as member()).
    std::vector<std::size_t> possible_members(trie_state state) const {
        std::size_t n = 0;
        trie_status st = trie_possible_members(a_, state, nullptr, 0, &n);
        if (st != TRIE_ERR_BUFFER_TOO_SMALL) detail::check(st);
        std::vector<std::size_t> out(n);
        detail::check(trie_possible_members(a_, state, out.data(), n, &n));
        return out;
    }
    /// Tokens that finish a segment below `state` and go on past it (see trie_crossing); `keep(member,
    /// overflow_prefix)` prunes them by what may follow.
    std::vector<Crossing> crossing(trie_state state,
                                   std::function<bool(std::size_t, std::string_view)> keep = nullptr) const {
        trie_overflow_fn fn = nullptr;
        void *user = nullptr;
        if (keep) {
            fn = [](void *u, std::size_t m, const uint8_t *o, std::size_t len) -> bool {
                try {
                    return (*static_cast<std::function<bool(std::size_t, std::string_view)> *>(u))(
                        m, std::string_view(reinterpret_cast<const char *>(o), len));
                } catch (...) {
                    return false;
                }
            };
            user = &keep;
        }
        std::size_t n = 0;
        trie_status st = trie_crossing(a_, state, fn, user, nullptr, nullptr, nullptr, 0, &n);
        if (st != TRIE_ERR_BUFFER_TOO_SMALL) detail::check(st);
        std::vector<int32_t> tokens(n);
        std::vector<uint32_t> overflow(n);
        std::vector<std::size_t> members(n);
        detail::check(trie_crossing(a_, state, fn, user, tokens.data(), overflow.data(), members.data(), n, &n));
        std::vector<Crossing> out(n);
        for (std::size_t i = 0; i < n; i++) out[i] = Crossing{tokens[i], members[i], overflow[i]};
        return out;
    }
    /// The hand-over by `token` (throws Error with TRIE_ERR_TOKEN_REJECTED when it does not cross an end).
    Crossing cross(trie_state state, int32_t token) const {
        std::size_t m = 0, o = 0;
        detail::check(trie_cross(a_, state, token, &m, &o));
        return Crossing{token, m, static_cast<uint32_t>(o)};
    }

    /// The C handle (still owned by this object).
    const trie_automaton *get() const noexcept { return a_; }

private:
    trie_automaton *a_;
};

/// One sequence of a serving batch for mask_rows(): the set it follows (nullptr: unconstrained) and its state.
struct Row {
    const Automaton *automaton;
    trie_state state;
};

/// Fills one bitmask row of `row_words` words per sequence into `bitmask` (`n_words` words in all), for a batch
/// whose sequences follow different sets; an unconstrained row is all ones. Throws Error (nothing written) when a
/// state is invalid, a row too short or the buffer too small; the message names the row.
inline void mask_rows(const Row *rows, std::size_t n_rows, uint32_t *bitmask, std::size_t n_words,
                      std::size_t row_words) {
    std::vector<const trie_automaton *> automata(n_rows);
    std::vector<trie_state> states(n_rows);
    for (std::size_t i = 0; i < n_rows; i++) {
        automata[i] = rows[i].automaton ? rows[i].automaton->get() : nullptr;
        states[i] = rows[i].state;
    }
    detail::check(trie_mask_rows(automata.data(), states.data(), n_rows, bitmask, n_words, row_words));
}

} // namespace trie

#endif // TRIE_HPP
