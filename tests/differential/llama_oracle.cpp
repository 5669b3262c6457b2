// llama.cpp's own grammar parser and matcher as an oracle for the differential harness (tests/differential).
//
// Linked against the llama.cpp build of scripts/fetch-llama.sh (libllama.so of the pinned tree); uses the internal
// API exactly as llama.cpp's tests/test-grammar-integration.cpp does: llama_grammar_init_impl(nullptr, text, "root",
// ...) to parse, then llama_grammar_accept_token per code point on a clone, a string being accepted when one stack
// is empty at its end.
//
// Protocol (binary, stdin/stdout, one request after another until EOF), all integers u32 little-endian:
//   request:  len, grammar text bytes, n, then n times (len, string bytes)
//   response: one byte 1 (the grammar parsed) or 0 (it did not), then, if it parsed, n bytes 1/0 (accepted or not)
// llama.cpp's parse errors go to stderr through its log callback, silenced here.
#include "llama-grammar.h"
#include "llama.h"

#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

static bool read_exact(void * buf, size_t n) { return n == 0 || fread(buf, 1, n, stdin) == n; }

static bool read_u32(uint32_t & v) {
    unsigned char b[4];
    if (!read_exact(b, 4)) return false;
    v = uint32_t(b[0]) | uint32_t(b[1]) << 8 | uint32_t(b[2]) << 16 | uint32_t(b[3]) << 24;
    return true;
}

static bool read_str(std::string & s) {
    uint32_t n;
    if (!read_u32(n)) return false;
    s.resize(n);
    return read_exact(s.data(), n);
}

// Splits UTF-8 text into one piece per code point (the test's parse_tokens for text without token markers).
static std::vector<std::string> code_points(const std::string & s) {
    std::vector<std::string> out;
    size_t i = 0;
    while (i < s.size()) {
        unsigned char c = s[i];
        size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 1;
        if (i + len > s.size()) len = s.size() - i;
        out.push_back(s.substr(i, len));
        i += len;
    }
    return out;
}

static bool match_string(const llama_grammar & base, const std::string & input) {
    llama_grammar * g = llama_grammar_clone_impl(base);
    bool ok = true;
    auto & stacks = llama_grammar_get_stacks(g);
    for (const auto & piece : code_points(input)) {
        try {
            llama_grammar_accept_token(*g, 0, piece);
        } catch (const std::runtime_error &) {
            ok = false;
            break;
        }
        if (stacks.empty()) {
            ok = false;
            break;
        }
    }
    if (ok) {
        ok = false;
        for (const auto & stack : stacks) {
            if (stack.empty()) {
                ok = true;
                break;
            }
        }
    }
    llama_grammar_free_impl(g);
    return ok;
}

static void quiet(enum ggml_log_level, const char *, void *) {}

int main() {
    llama_log_set(quiet, nullptr);
    std::string text;
    while (read_str(text)) {
        uint32_t n;
        if (!read_u32(n)) return 2;
        std::vector<std::string> strings(n);
        for (auto & s : strings) {
            if (!read_str(s)) return 2;
        }
        llama_grammar * g = nullptr;
        try {
            g = llama_grammar_init_impl(nullptr, text.c_str(), "root", false, nullptr, 0, nullptr, 0);
        } catch (const std::exception &) {
            g = nullptr;
        }
        std::string out(1, g ? 1 : 0);
        if (g) {
            for (const auto & s : strings) {
                out.push_back(match_string(*g, s) ? 1 : 0);
            }
            llama_grammar_free_impl(g);
        }
        fwrite(out.data(), 1, out.size(), stdout);
        fflush(stdout);
    }
    return 0;
}
