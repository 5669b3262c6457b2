// llama-libtrie.cpp - request sets for llama-server: confinement, reading, compiling, the shared LRU.
// See llama-libtrie.h. Compiled into llama-common by patches/llama-server-libtrie.patch (-DLLAMA_LIBTRIE=ON).

#include "llama-libtrie.h"

#include "llama-libtrie-stage.h"  // llama.h, trie.h, trie_llama.h

#include "json.h"
#include "log.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <future>
#include <list>
#include <map>
#include <mutex>
#include <stdexcept>
#include <sys/stat.h>
#include <unistd.h>
#include <unordered_map>
#include <vector>

namespace {

[[noreturn]] void refuse(const std::string & msg) {
    throw std::invalid_argument(msg);
}

// The client's own words, not a megabyte of them.
std::string shown(const std::string & s) {
    std::string out = s.size() <= 200 ? s : s.substr(0, 200) + "...";
    return "'" + out + "'";
}

std::string truncated(const char * msg, size_t n = 600) {
    std::string s = msg ? msg : "";
    return s.size() <= n ? s : s.substr(0, n) + "...";
}

// ---- the vocabulary: built once per model -------------------------------------------------------------------

std::mutex                                           g_vocab_mu;
std::map<const llama_vocab *, std::shared_ptr<trie_vocab>> g_vocabs;

std::shared_ptr<trie_vocab> vocab_of(const llama_vocab * vocab) {
    std::lock_guard<std::mutex> lock(g_vocab_mu);
    auto it = g_vocabs.find(vocab);
    if (it != g_vocabs.end()) {
        return it->second;
    }
    const auto t0 = std::chrono::steady_clock::now();
    trie_vocab * tv = nullptr;
    const trie_status st = trie_llama_vocab(vocab, &tv);
    if (st != TRIE_OK) {
        // not the request's fault, but the request cannot be served: say why
        refuse(std::string("libtrie cannot use this model's vocabulary: ") + trie_status_str(st) + ": " +
               truncated(trie_last_error()));
    }
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    LOG_INF("libtrie: vocabulary of %zu tokens built in %.1f ms\n", trie_vocab_n_tokens(tv), ms);
    std::shared_ptr<trie_vocab> p(tv, trie_vocab_free);
    g_vocabs.emplace(vocab, p);
    return p;
}

// ---- what a request asks for --------------------------------------------------------------------------------

struct set_spec {
    std::string              key;     // identifies the compiled set in the LRU
    std::string              what;    // how messages name it
    std::string              path;    // a file set: its real path
    uint64_t                 size = 0;
    std::vector<std::string> strings; // an inline set
    bool                     is_file = false;
    bool                     drop    = false;
};

bool has_dotdot(const std::string & raw) {
    size_t start = 0;
    while (start <= raw.size()) {
        size_t end = raw.find_first_of("/\\", start);
        if (end == std::string::npos) {
            end = raw.size();
        }
        if (raw.compare(start, end - start, "..") == 0 && end - start == 2) {
            return true;
        }
        start = end + 1;
    }
    return false;
}

// Checks a set file a request names (relative to the set directory) and fills spec.path/size/key.
void resolve_file(const common_params_libtrie & opts, const std::string & raw, set_spec & spec) {
    const std::string & what = spec.what;
    if (raw.find('\0') != std::string::npos) {
        refuse(what + " is not a valid path");
    }
    const std::string & root = opts.set_dir;
    if (root.empty()) {
        refuse(what + " is refused: this server does not read sets from files (the operator has not configured "
               "--trie-set-dir / LIBTRIE_SET_DIR); pass the members inline ({\"strings\": [...]})");
    }
    if (!raw.empty() && (raw[0] == '/' || raw[0] == '\\' || raw[0] == '~')) {
        refuse(what + " is refused: absolute paths are not allowed; name a set of the set directory or a path "
               "relative to it");
    }
    if (has_dotdot(raw)) {
        refuse(what + " is refused: '..' is not allowed in a set path");
    }
    const std::string joined = root + "/" + raw;
    char * real_c = realpath(joined.c_str(), nullptr);
    if (real_c == nullptr) {
        if (errno == ENOENT || errno == ENOTDIR) {
            refuse(what + " does not exist in the set directory");
        }
        refuse(what + " cannot be read: " + std::strerror(errno));
    }
    const std::string real(real_c);
    free(real_c);
    const std::string prefix = root == "/" ? root : root + "/";
    if (real.size() <= prefix.size() || real.compare(0, prefix.size(), prefix) != 0) {
        refuse(what + " is refused: it resolves outside the set directory (a symbolic link)");
    }
    struct stat st {};
    if (stat(real.c_str(), &st) != 0) {
        refuse(what + " cannot be read: " + std::strerror(errno));
    }
    if (!S_ISREG(st.st_mode)) {
        refuse(what + " is refused: not a regular file");
    }
    if ((uint64_t) st.st_size > opts.max_file_bytes) {
        refuse(what + " is refused: " + std::to_string((uint64_t) st.st_size) + " bytes, more than this server "
               "reads (" + std::to_string(opts.max_file_bytes) + ", --trie-max-file-bytes / LIBTRIE_MAX_FILE_BYTES)");
    }
    spec.path = real;
    spec.size = (uint64_t) st.st_size;
    // a changed file (size, modification time, inode) is a new set
    spec.key = "F" + real + '\0' + std::to_string((uint64_t) st.st_size) + ':' +
               std::to_string((int64_t) st.st_mtim.tv_sec) + '.' + std::to_string((int64_t) st.st_mtim.tv_nsec) +
               ':' + std::to_string((uint64_t) st.st_ino) + ':' + std::to_string((uint64_t) st.st_dev);
}

set_spec parse_spec(const common_params_libtrie & opts, const common_json & value_in) {
    set_spec spec;
    const common_json * value = &value_in;
    common_json wrapped;
    // short forms: a set name (a path when it holds a '/'), a list of strings
    if (value->is_string()) {
        const std::string s = value->get<std::string>();
        wrapped = common_json::object();
        wrapped[s.find('/') != std::string::npos ? "file" : "set"] = s;
        value = &wrapped;
    } else if (value->is_array()) {
        wrapped = common_json::object();
        wrapped["strings"] = *value;
        value = &wrapped;
    }
    if (!value->is_object()) {
        refuse("\"trie\" must be {\"set\": NAME}, {\"file\": PATH} or {\"strings\": [...]} (or a set name, or a "
               "list of strings)");
    }
    int n_given = 0;
    for (const auto & item : value->items()) {
        const std::string & k = item.key();
        if (k == "set" || k == "file" || k == "strings") {
            n_given++;
        } else if (k != "drop_unreachable") {
            refuse("\"trie\" has an unknown key " + shown(k) + " (expected one of \"set\", \"file\", \"strings\", "
                   "and optionally \"drop_unreachable\")");
        }
    }
    if (n_given != 1) {
        refuse("\"trie\" needs exactly one of \"set\", \"file\", \"strings\"");
    }
    if (value->contains("drop_unreachable")) {
        const common_json & d = value->at("drop_unreachable");
        if (!d.is_boolean()) {
            refuse("\"trie\".\"drop_unreachable\" must be a boolean");
        }
        spec.drop = d.get<bool>();
    }
    const char drop_tag = spec.drop ? 'D' : 'K';

    if (value->contains("strings")) {
        const common_json & arr = value->at("strings");
        if (!arr.is_array()) {
            refuse("\"trie\".\"strings\" must be a list of strings");
        }
        if (arr.size() > opts.max_inline_strings) {
            refuse("the inline set has " + std::to_string(arr.size()) + " strings, more than this server accepts (" +
                   std::to_string(opts.max_inline_strings) + ", --trie-max-inline-strings / "
                   "LIBTRIE_MAX_INLINE_STRINGS); name a set of the set directory instead");
        }
        if (arr.empty()) {
            refuse("\"trie\".\"strings\" is empty: a set needs at least one member");
        }
        spec.what = "the inline set";
        spec.strings.reserve(arr.size());
        uint64_t bytes = 0;
        std::string key;
        key.push_back('S');
        key.push_back(drop_tag);
        for (size_t i = 0; i < arr.size(); ++i) {
            const common_json & s = arr.at(i);
            if (!s.is_string()) {
                refuse("\"trie\".\"strings\" must be a list of strings (item " + std::to_string(i) + " is not)");
            }
            spec.strings.push_back(s.get<std::string>());
            const std::string & b = spec.strings.back();
            bytes += b.size() + 1;
            if (bytes > opts.max_inline_bytes) {
                refuse("the inline set is larger than this server accepts (" + std::to_string(opts.max_inline_bytes) +
                       " bytes, --trie-max-inline-bytes / LIBTRIE_MAX_INLINE_BYTES); name a set of the set "
                       "directory instead");
            }
            const uint64_t n = b.size();
            key.append((const char *) &n, sizeof n);  // length-prefixed: the key is the set itself
            key.append(b);
        }
        spec.key = std::move(key);
        return spec;
    }

    spec.is_file = true;
    if (value->contains("set")) {
        const common_json & v = value->at("set");
        const std::string name = v.is_string() ? v.get<std::string>() : std::string();
        if (!v.is_string() || name.empty() || name.find_first_of("/\\") != std::string::npos || name[0] == '.') {
            refuse("\"trie\".\"set\" must be a plain set name (the name of a .txt file of the set directory)");
        }
        spec.what = "the set " + shown(name);
        resolve_file(opts, name + ".txt", spec);
    } else {
        const common_json & v = value->at("file");
        if (!v.is_string() || v.get<std::string>().empty()) {
            refuse("\"trie\".\"file\" must be a path relative to the set directory");
        }
        const std::string raw = v.get<std::string>();
        spec.what = "the set file " + shown(raw);
        resolve_file(opts, raw, spec);
    }
    spec.key.insert(spec.key.begin(), drop_tag);
    return spec;
}

// ---- reading a set file -------------------------------------------------------------------------------------

// Offset of the first byte that is not part of valid UTF-8, or npos.
size_t utf8_error_at(const std::string & s) {
    const auto * p = (const unsigned char *) s.data();
    const size_t n = s.size();
    size_t i = 0;
    while (i < n) {
        const unsigned char c = p[i];
        if (c < 0x80) { i++; continue; }
        size_t len; uint32_t cp;
        if      ((c & 0xE0) == 0xC0) { len = 2; cp = c & 0x1F; }
        else if ((c & 0xF0) == 0xE0) { len = 3; cp = c & 0x0F; }
        else if ((c & 0xF8) == 0xF0) { len = 4; cp = c & 0x07; }
        else return i;
        if (i + len > n) return i;
        for (size_t k = 1; k < len; ++k) {
            if ((p[i + k] & 0xC0) != 0x80) return i;
            cp = (cp << 6) | (p[i + k] & 0x3F);
        }
        if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10FFFF ||
            (cp >= 0xD800 && cp <= 0xDFFF)) {
            return i;
        }
        i += len;
    }
    return std::string::npos;
}

// One member per line, '\n' separated, a final newline ignored ('\r' kept); UTF-8 checked.
std::vector<std::string> read_members(const set_spec & spec, uint64_t max_bytes, bool & transient) {
    const int fd = open(spec.path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        transient = true;
        refuse(spec.what + " cannot be read: " + std::strerror(errno));
    }
    std::string data;
    struct stat st {};
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        transient = true;
        refuse(spec.what + " is refused: not a regular file");
    }
    const uint64_t limit = max_bytes;
    data.resize((size_t) std::min<uint64_t>((uint64_t) st.st_size, limit) + 1);
    size_t got = 0;
    for (;;) {
        if (got == data.size()) {
            if (got > limit) break;
            data.resize(std::min<uint64_t>(limit + 1, (uint64_t) data.size() * 2));
        }
        const ssize_t r = read(fd, &data[got], data.size() - got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            const int e = errno;
            close(fd);
            transient = true;
            refuse(spec.what + " cannot be read: " + std::strerror(e));
        }
        if (r == 0) break;
        got += (size_t) r;
    }
    close(fd);
    if (got > limit) {
        refuse(spec.what + " is refused: more than " + std::to_string(limit) + " bytes");
    }
    data.resize(got);
    const size_t bad = utf8_error_at(data);
    if (bad != std::string::npos) {
        const size_t line = 1 + (size_t) std::count(data.begin(), data.begin() + (std::ptrdiff_t) bad, '\n');
        refuse(spec.what + " is not valid UTF-8 (line " + std::to_string(line) + ")");
    }
    std::vector<std::string> lines;
    if (data.empty()) {
        return lines;
    }
    if (data.back() == '\n') {
        data.pop_back();
    }
    size_t start = 0;
    for (;;) {
        const size_t end = data.find('\n', start);
        if (end == std::string::npos) {
            lines.emplace_back(data, start);
            break;
        }
        lines.emplace_back(data, start, end - start);
        start = end + 1;
    }
    return lines;
}

// ---- the shared LRU of compiled sets ------------------------------------------------------------------------

struct compiled {
    std::shared_ptr<const trie_automaton> automaton;
    std::string                           error;
};

struct entry {
    std::shared_future<compiled>        fut;
    std::list<const std::string *>::iterator pos;
};

std::mutex                                g_mu;
std::unordered_map<std::string, entry>    g_sets;   // key: the set's identity (content, or file + size + mtime)
std::list<const std::string *>            g_order;  // most recently used first; points at g_sets' keys
common_libtrie_stats                      g_stats;

compiled compile(const common_params_libtrie & opts, const llama_vocab * vocab, const set_spec & spec,
                 bool & transient) {
    compiled out;
    try {
        std::shared_ptr<trie_vocab> tv = vocab_of(vocab);
        std::vector<std::string> file_members;
        const std::vector<std::string> & members =
            spec.is_file ? (file_members = read_members(spec, opts.max_file_bytes, transient)) : spec.strings;
        if (members.empty()) {
            refuse(spec.what + " is empty: a set needs at least one member");
        }
        std::vector<const uint8_t *> ptrs(members.size());
        std::vector<size_t>          lens(members.size());
        for (size_t i = 0; i < members.size(); ++i) {
            ptrs[i] = (const uint8_t *) members[i].data();
            lens[i] = members[i].size();
        }
        trie_options o;
        trie_options_init(&o);
        o.drop_unreachable = spec.drop;
        o.max_states       = opts.max_states;
        o.max_bytes        = opts.max_bytes;
        const auto t0 = std::chrono::steady_clock::now();
        trie_automaton * a = nullptr;
        const trie_status st = trie_compile(tv.get(), ptrs.data(), lens.data(), members.size(), &o, &a);
        if (st != TRIE_OK) {
            std::string hint;
            if (st == TRIE_ERR_LIMIT_EXCEEDED) {
                hint = " (this server's bounds: --trie-max-states / LIBTRIE_MAX_STATES, --trie-max-bytes / "
                       "LIBTRIE_MAX_BYTES)";
            } else if (st == TRIE_ERR_UNREACHABLE_STRING) {
                hint = " (\"drop_unreachable\": true drops such members)";
            }
            refuse(spec.what + " cannot be compiled: " + trie_status_str(st) + ": " + truncated(trie_last_error()) +
                   hint);
        }
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        LOG_INF("libtrie: compiled %s: %zu strings, %zu states, %.1f MB, in %.1f ms\n", spec.what.c_str(),
                members.size(), trie_automaton_n_states(a), trie_automaton_memory_usage(a) / 1e6, ms);
        out.automaton = std::shared_ptr<const trie_automaton>(
            a, [](const trie_automaton * p) { trie_automaton_free(const_cast<trie_automaton *>(p)); });
    } catch (const std::invalid_argument & e) {
        out.error = e.what();
    } catch (const std::exception & e) {
        transient = true;
        out.error = spec.what + " cannot be compiled: " + e.what();
    }
    return out;
}

}  // namespace

std::shared_ptr<const trie_automaton> common_libtrie_resolve(const common_params_libtrie & opts,
                                                             const llama_vocab *           vocab,
                                                             const common_json &           value) {
    if (vocab == nullptr) {
        refuse("libtrie: no vocabulary");
    }
    set_spec spec = parse_spec(opts, value);
    spec.key.append(1, '\0').append(std::to_string((uintptr_t) vocab));

    std::shared_future<compiled> fut;
    std::promise<compiled>       promise;
    bool                         mine = false;
    {
        std::lock_guard<std::mutex> lock(g_mu);
        auto it = g_sets.find(spec.key);
        if (it != g_sets.end()) {
            g_order.splice(g_order.begin(), g_order, it->second.pos);  // most recently used
            fut = it->second.fut;
            g_stats.hits++;
        } else {
            mine = true;
            fut  = promise.get_future().share();
            auto ins = g_sets.emplace(spec.key, entry{ fut, {} });
            g_order.push_front(&ins.first->first);
            ins.first->second.pos = g_order.begin();
            const size_t cap = (size_t) std::max<uint64_t>(1, opts.cache_size);
            while (g_sets.size() > cap) {  // dropped sets stay alive while requests use them
                const std::string * k = g_order.back();
                g_order.pop_back();
                g_sets.erase(*k);
            }
        }
    }
    if (mine) {
        bool transient = false;  // an I/O failure: try again next time, do not remember it
        compiled c = compile(opts, vocab, spec, transient);
        promise.set_value(c);
        std::lock_guard<std::mutex> lock(g_mu);
        g_stats.compiles++;
        if (transient && !c.automaton) {
            auto it = g_sets.find(spec.key);
            if (it != g_sets.end() && it->second.fut.valid()) {
                g_order.erase(it->second.pos);
                g_sets.erase(it);
            }
        }
    }
    const compiled & c = fut.get();
    if (!c.automaton) {
        refuse(c.error);
    }
    return c.automaton;
}

uint64_t common_libtrie_parse_u64(const std::string & value, const char * what) {
    std::string digits;
    for (char ch : value) {
        if (ch == '_') continue;
        if (ch < '0' || ch > '9') {
            throw std::invalid_argument(std::string(what) + ": expected a non-negative integer, got '" + value + "'");
        }
        digits.push_back(ch);
    }
    if (digits.empty() || digits.size() > 19) {
        throw std::invalid_argument(std::string(what) + ": expected a non-negative integer, got '" + value + "'");
    }
    return std::stoull(digits);
}

std::string common_libtrie_set_dir(const std::string & path) {
    if (path.empty()) {
        return "";
    }
    char * real = realpath(path.c_str(), nullptr);
    struct stat st {};
    if (real == nullptr || stat(real, &st) != 0 || !S_ISDIR(st.st_mode)) {
        free(real);
        throw std::invalid_argument("--trie-set-dir / LIBTRIE_SET_DIR: '" + path + "' is not a directory");
    }
    std::string out(real);
    free(real);
    return out;
}

common_libtrie_stats common_libtrie_get_stats() {
    std::lock_guard<std::mutex> lock(g_mu);
    common_libtrie_stats s = g_stats;
    s.entries = g_sets.size();
    return s;
}
