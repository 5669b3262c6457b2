// trie-llama: run a llama.cpp model on a set of prompts, its answer forced to be one string of a finite set.
//
// Compares three modes on the same prompts and model:
//   unconstrained  plain greedy / sampled decoding
//   trie           libtrie's sampler stage (include/trie_llama.h) before the selecting sampler
//   gbnf           llama.cpp's grammar sampler with root ::= "s1" | "s2" | ...
//   beam           a beam search over trie states
// and, with --jump-forward, trie-jump and beam-jump: the same with forced runs (the bytes every member still
// possible continues with, trie_draft) decoded as one batch, one model step for the whole run;
// and reports validity (outputs that are members), accuracy (against gold labels), compile time, decode speed
// and the time spent in the constraint stage per token.
//
// Decodes B prompts at once: one llama_batch holding several sequence ids, one sampler chain per sequence.

#include "llama.h"
#include "trie.h"
#include "trie_llama.h"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

namespace {

using clk = std::chrono::steady_clock;

double ms_since(clk::time_point t0) {
    return std::chrono::duration<double, std::milli>(clk::now() - t0).count();
}

const char *kSystemPrompt = "Answer with exactly one of the allowed names.";

struct Args {
    std::string model;
    std::string choices;
    std::string prompts;
    std::string mode = "all";
    std::string out;
    std::string system = kSystemPrompt;
    std::string shots;           // few-shot examples: 'prompt<TAB>answer' lines, sent as earlier chat turns
    int batch = 4;
    int beam = 4;                // beam width of mode beam (0: not part of --mode all)
    int n_predict = 48;
    uint32_t seed = 42;
    float temp = 0.0f;
    int threads = 0;
    int n_gpu_layers = 99;
    size_t gbnf_max_k = 5000;
    bool json = false;
    bool require_valid = false;
    bool extra_bufts = false;    // llama_model_params.use_extra_bufts (see --extra-bufts)
    bool canonical = false;      // trie/beam: only each member's own tokenization (trie_compile_tokens)
    bool jump_forward = false;   // also run trie-jump / beam-jump (see --jump-forward)
    std::vector<std::string> modes;  // the modes to run, in order (from --mode and --jump-forward)
    bool quiet = false;
    bool verbose = false;
};

void usage(const char *argv0) {
    std::fprintf(stderr,
        "usage: %s --model FILE.gguf --choices FILE --prompts FILE [options]\n"
        "  --choices FILE     the allowed strings, one per line (exact bytes; empty lines skipped)\n"
        "  --prompts FILE     one prompt per line: 'prompt' or 'prompt<TAB>gold'\n"
        "  --system TEXT      the system prompt (default: \"%s\")\n"
        "  --shots FILE       few-shot examples, 'prompt<TAB>answer' per line, sent as earlier chat turns\n"
        "  --mode M[,M...]    unconstrained | trie | trie-jump | gbnf | beam | beam-jump | all (default all:\n"
        "                     unconstrained, trie, gbnf, and beam if --beam > 0)\n"
        "  --jump-forward     also run each libtrie mode (trie, beam) with jump-forward, as trie-jump / beam-jump:\n"
        "                     a forced run (trie_draft: the rest of the only member left, or the bytes all members\n"
        "                     left share) is decoded as one batch, one model step; an answer whose member is\n"
        "                     complete ends without a step for its end-of-generation token\n"
        "  --beam W           beam width of mode beam: the W best partial members by total log-probability,\n"
        "                     over trie states (default 4; 0 leaves beam out of --mode all)\n"
        "  --batch B          sequences decoded together (default 4)\n"
        "  --n-predict N      max tokens per answer (default 48)\n"
        "  --temp T           0 = greedy (default); > 0 samples with --seed\n"
        "  --seed S           sampling seed (default 42)\n"
        "  --threads N        CPU threads (default: all cores but one)\n"
        "  --ngl N            layers offloaded to a GPU when llama.cpp has one (default 99)\n"
        "  --extra-bufts      let llama.cpp use its extra CPU buffer types (weight repacking; AMX kernels in an\n"
        "                     AMX-enabled build). Off by default: a native build crashed on AMX CPUs there\n"
        "  --gbnf-max-k K     skip gbnf mode above K strings (default 5000; its mask cost grows with K)\n"
        "  --canonical        trie and beam allow only the tokenizer's own tokenization of each member\n"
        "                     (llama_tokenize, then trie_compile_tokens); default: every tokenization\n"
        "  --out FILE         write 'mode<TAB>prompt#<TAB>output' lines (output with \\\\ \\t \\n \\r escaped)\n"
        "  --json             also print one JSON line per mode\n"
        "  --require-valid    exit 1 unless every trie output is a member\n"
        "  --quiet            no per-prompt lines;  --verbose: keep llama.cpp's log\n",
        argv0, kSystemPrompt);
}

bool parse_args(int argc, char **argv, Args &a) {
    for (int i = 1; i < argc; ++i) {
        std::string k = argv[i];
        auto val = [&](const char *name) -> const char * {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "missing value for %s\n", name);
                std::exit(2);
            }
            return argv[++i];
        };
        if (k == "--model" || k == "-m") a.model = val("--model");
        else if (k == "--choices") a.choices = val("--choices");
        else if (k == "--prompts") a.prompts = val("--prompts");
        else if (k == "--system") a.system = val("--system");
        else if (k == "--shots") a.shots = val("--shots");
        else if (k == "--extra-bufts") a.extra_bufts = true;
        else if (k == "--canonical") a.canonical = true;
        else if (k == "--jump-forward") a.jump_forward = true;
        else if (k == "--mode") a.mode = val("--mode");
        else if (k == "--out") a.out = val("--out");
        else if (k == "--batch" || k == "-b") a.batch = std::atoi(val("--batch"));
        else if (k == "--beam") a.beam = std::atoi(val("--beam"));
        else if (k == "--n-predict" || k == "-n") a.n_predict = std::atoi(val("--n-predict"));
        else if (k == "--seed") a.seed = (uint32_t) std::strtoul(val("--seed"), nullptr, 10);
        else if (k == "--temp") a.temp = (float) std::atof(val("--temp"));
        else if (k == "--threads" || k == "-t") a.threads = std::atoi(val("--threads"));
        else if (k == "--ngl") a.n_gpu_layers = std::atoi(val("--ngl"));
        else if (k == "--gbnf-max-k") a.gbnf_max_k = (size_t) std::strtoull(val("--gbnf-max-k"), nullptr, 10);
        else if (k == "--json") a.json = true;
        else if (k == "--require-valid") a.require_valid = true;
        else if (k == "--quiet" || k == "-q") a.quiet = true;
        else if (k == "--verbose" || k == "-v") a.verbose = true;
        else if (k == "--help" || k == "-h") { usage(argv[0]); std::exit(0); }
        else { std::fprintf(stderr, "unknown argument: %s\n", k.c_str()); return false; }
    }
    if (a.model.empty() || a.choices.empty() || a.prompts.empty()) return false;
    if (a.batch < 1 || a.n_predict < 1) return false;
    a.modes.clear();
    auto add = [&a](const std::string &m) {
        if (std::find(a.modes.begin(), a.modes.end(), m) == a.modes.end()) a.modes.push_back(m);
    };
    for (size_t i = 0; i <= a.mode.size();) {
        size_t j = a.mode.find(',', i);
        if (j == std::string::npos) j = a.mode.size();
        const std::string m = a.mode.substr(i, j - i);
        i = j + 1;
        if (m == "all") {
            for (const char *x : {"unconstrained", "trie", "gbnf"}) add(x);
            if (a.beam > 0) add("beam");
        } else if (m == "unconstrained" || m == "trie" || m == "trie-jump" || m == "gbnf" || m == "beam"
                   || m == "beam-jump") {
            add(m);
        } else {
            std::fprintf(stderr, "unknown mode: %s\n", m.c_str());
            return false;
        }
    }
    if (a.jump_forward) {
        const std::vector<std::string> base = a.modes;
        for (const auto &m : base) {
            if (m == "trie" || m == "beam") add(m + "-jump");
        }
    }
    const bool beams = std::find(a.modes.begin(), a.modes.end(), "beam") != a.modes.end()
                       || std::find(a.modes.begin(), a.modes.end(), "beam-jump") != a.modes.end();
    if (a.beam < 0 || (beams && a.beam < 1)) return false;
    // Default: all cores but one. ggml's threads spin at every barrier, so on a machine whose cores are busy
    // with other work, using all of them was 10x slower here (2 shared cores: 3.5 against 42 tokens/s).
    if (a.threads <= 0) {
        const unsigned hw = std::thread::hardware_concurrency();
        a.threads = hw > 1 ? (int) hw - 1 : 1;
    }
    return true;
}

bool read_lines(const std::string &path, std::vector<std::string> &out) {
    // The whole file in one read, the lines counted with memchr, `out` reserved once, then one string per line:
    // the 4.5 M npm names (94.6 MB) in half the time of std::getline on an ifstream (its sentry per line, and
    // the vector's regrowth moving millions of strings), a few per cent of the library's compile time. Same
    // lines as before: split at '\n', one trailing '\r' dropped, empty lines skipped, a last line without '\n'
    // kept.
    std::FILE *f = std::fopen(path.c_str(), "rb");
    if (f == nullptr) return false;
    std::string data;
    if (std::fseek(f, 0, SEEK_END) == 0) {
        const long size = std::ftell(f);
        if (size > 0) data.reserve((size_t) size);
        std::rewind(f);
    }
    char buf[1 << 16];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) data.append(buf, n);
    const bool ok = std::ferror(f) == 0;
    std::fclose(f);
    if (!ok) return false;
    const char *p = data.data(), *end = p + data.size();
    size_t lines = 0;
    for (const char *q = p; (q = (const char *) std::memchr(q, '\n', (size_t) (end - q))) != nullptr; ++q) ++lines;
    out.reserve(out.size() + lines + 1);
    while (p < end) {
        const char *nl = (const char *) std::memchr(p, '\n', (size_t) (end - p));
        const char *stop = nl != nullptr ? nl : end;
        size_t len = (size_t) (stop - p);
        if (len > 0 && p[len - 1] == '\r') --len;
        if (len > 0) out.emplace_back(p, len);
        p = stop + 1;
    }
    return true;
}

std::string escape_field(const std::string &s) {
    std::string r;
    for (char c : s) {
        switch (c) {
            case '\\': r += "\\\\"; break;
            case '\t': r += "\\t"; break;
            case '\n': r += "\\n"; break;
            case '\r': r += "\\r"; break;
            default: r += c;
        }
    }
    return r;
}

std::string json_str(const std::string &s) {
    std::string r = "\"";
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') { r += '\\'; r += (char) c; }
        else if (c < 0x20) { char b[8]; std::snprintf(b, sizeof b, "\\u%04x", c); r += b; }
        else r += (char) c;
    }
    return r + "\"";
}

// GBNF: root ::= "a" | "b" | ...  String literals escape backslash, quote and control bytes; other bytes
// (UTF-8 included) stand for themselves.
std::string gbnf_of(const std::vector<std::string> &choices) {
    std::string g = "root ::= ";
    for (size_t i = 0; i < choices.size(); ++i) {
        if (i) g += " | ";
        g += '"';
        for (unsigned char c : choices[i]) {
            if (c == '"' || c == '\\') { g += '\\'; g += (char) c; }
            else if (c == '\n') g += "\\n";
            else if (c == '\r') g += "\\r";
            else if (c == '\t') g += "\\t";
            else if (c < 0x20 || c == 0x7f) { char b[8]; std::snprintf(b, sizeof b, "\\x%02X", c); g += b; }
            else g += (char) c;
        }
        g += '"';
    }
    g += "\n";
    return g;
}

std::string token_piece(const llama_vocab *vocab, llama_token t) {
    char buf[256];
    int n = llama_token_to_piece(vocab, t, buf, sizeof buf, 0, false);
    if (n >= 0) return std::string(buf, (size_t) n);
    std::string s((size_t) -n, '\0');
    n = llama_token_to_piece(vocab, t, &s[0], (int32_t) s.size(), 0, false);
    s.resize(n > 0 ? (size_t) n : 0);
    return s;
}

std::vector<llama_token> tokenize(const llama_vocab *vocab, const std::string &text) {
    std::vector<llama_token> toks(text.size() + 16);
    int n = llama_tokenize(vocab, text.data(), (int32_t) text.size(), toks.data(), (int32_t) toks.size(), true, true);
    if (n < 0) {
        toks.resize((size_t) -n);
        n = llama_tokenize(vocab, text.data(), (int32_t) text.size(), toks.data(), (int32_t) toks.size(), true, true);
    }
    toks.resize(n > 0 ? (size_t) n : 0);
    return toks;
}

struct Shot {
    std::string prompt, answer;
};

// The model's chat template applied to: the system prompt, the few-shot examples as earlier user/assistant
// turns, then the prompt. Without a template: plain "Q:/A:" text.
std::string chat_prompt(const llama_model *model, const std::string &system, const std::vector<Shot> &shots,
                        const std::string &user) {
    const char *tmpl = llama_model_chat_template(model, nullptr);
    std::vector<llama_chat_message> msgs;
    size_t total = system.size() + user.size();
    if (!system.empty()) msgs.push_back({"system", system.c_str()});
    for (const auto &sh : shots) {
        msgs.push_back({"user", sh.prompt.c_str()});
        msgs.push_back({"assistant", sh.answer.c_str()});
        total += sh.prompt.size() + sh.answer.size();
    }
    msgs.push_back({"user", user.c_str()});
    if (tmpl != nullptr) {
        std::vector<char> buf(4096 + total * 2);
        int n = llama_chat_apply_template(tmpl, msgs.data(), msgs.size(), true, buf.data(), (int32_t) buf.size());
        if (n > (int) buf.size()) {
            buf.resize((size_t) n);
            n = llama_chat_apply_template(tmpl, msgs.data(), msgs.size(), true, buf.data(), (int32_t) buf.size());
        }
        if (n >= 0) return std::string(buf.data(), (size_t) n);
    }
    std::string r = system.empty() ? "" : system + "\n\n";
    for (const auto &sh : shots) r += "Q: " + sh.prompt + "\nA: " + sh.answer + "\n\n";
    return r + "Q: " + user + "\nA: ";
}

// ---- a sampler wrapper that times its inner stage's apply + accept -----------------------------------------

struct StageTimer {
    double ns = 0;
};

struct TimedCtx {
    llama_sampler *inner;
    StageTimer *timer;
};

llama_sampler *timed_init(llama_sampler *inner, StageTimer *timer);

const char *timed_name(const llama_sampler *s) { return llama_sampler_name(((const TimedCtx *) s->ctx)->inner); }
void timed_accept(llama_sampler *s, llama_token t) {
    auto *c = (TimedCtx *) s->ctx;
    auto t0 = clk::now();
    llama_sampler_accept(c->inner, t);
    c->timer->ns += std::chrono::duration<double, std::nano>(clk::now() - t0).count();
}
void timed_apply(llama_sampler *s, llama_token_data_array *p) {
    auto *c = (TimedCtx *) s->ctx;
    auto t0 = clk::now();
    llama_sampler_apply(c->inner, p);
    c->timer->ns += std::chrono::duration<double, std::nano>(clk::now() - t0).count();
}
void timed_reset(llama_sampler *s) { llama_sampler_reset(((TimedCtx *) s->ctx)->inner); }
llama_sampler *timed_clone(const llama_sampler *s) {
    auto *c = (const TimedCtx *) s->ctx;
    return timed_init(llama_sampler_clone(c->inner), c->timer);
}
void timed_free(llama_sampler *s) {
    auto *c = (TimedCtx *) s->ctx;
    llama_sampler_free(c->inner);
    delete c;
}

llama_sampler_i *timed_iface() {
    static llama_sampler_i iface = [] {
        llama_sampler_i i{};
        i.name = timed_name;
        i.accept = timed_accept;
        i.apply = timed_apply;
        i.reset = timed_reset;
        i.clone = timed_clone;
        i.free = timed_free;
        return i;
    }();
    return &iface;
}

llama_sampler *timed_init(llama_sampler *inner, StageTimer *timer) {
    if (inner == nullptr) return nullptr;
    return llama_sampler_init(timed_iface(), new TimedCtx{inner, timer});
}

// ---- one mode over all prompts ------------------------------------------------------------------------------

struct Prompt {
    std::string text;
    std::string gold;  // empty: none
    std::vector<llama_token> tokens;
};

struct ModeResult {
    std::string mode;
    bool skipped = false;
    std::string note;
    size_t n = 0, valid = 0, n_gold = 0, correct = 0, truncated = 0;
    size_t stage_errors = 0;     // trie: sequences whose stage reported a failure (trie_llama_sampler_error)
    std::string first_stage_error;
    double compile_ms = 0;       // trie: vocab + compile; gbnf: grammar sampler init (first sequence)
    double vocab_ms = 0;         // trie only
    double prefill_ms = 0, gen_ms = 0;
    size_t gen_tokens = 0;
    double stage_ns = 0;         // time inside the constraint stage (apply + accept)
    bool jump = false;           // trie-jump / beam-jump
    size_t steps = 0;            // model steps: per answer, the forward passes its tokens took part in (prefill
                                 // included; a beam's hypotheses decoded together count once)
    size_t forced_tokens = 0;    // jump: tokens of forced runs (decoded in a batch, never sampled)
    size_t out_tokens = 0;       // tokens of the answers (end-of-generation tokens not counted)
    std::vector<std::string> outputs;
};

size_t answer_tokens(const ModeResult &r) { return r.out_tokens; }

void batch_add(llama_batch &b, llama_token t, llama_pos pos, llama_seq_id seq, bool logits) {
    const int i = b.n_tokens;
    b.token[i] = t;
    b.pos[i] = pos;
    b.n_seq_id[i] = 1;
    b.seq_id[i][0] = seq;
    b.logits[i] = logits;
    b.n_tokens++;
}

struct Runner {
    const Args &args;
    llama_model *model;
    const llama_vocab *vocab;
    llama_context *ctx;
    llama_batch batch;
    std::vector<Prompt> &prompts;
    const std::unordered_set<std::string> &members;
    size_t prefix_len;           // tokens every prompt starts with (system prompt, few-shot turns)
    llama_seq_id prefix_seq;     // the sequence holding them, decoded once
    bool prefix_ready = false;
    double prefix_ms = 0;

    // Empties sequences 0..n-1 and gives every `stride`-th one the shared prefix's cells.
    bool reset_seqs(int n, int stride) {
        llama_memory_t mem = llama_get_memory(ctx);
        if (!prefix_ready) {
            llama_memory_clear(mem, true);
            if (prefix_len > 0) {
                batch.n_tokens = 0;
                const auto &toks = prompts[0].tokens;
                for (size_t j = 0; j < prefix_len; ++j) {
                    batch_add(batch, toks[j], (llama_pos) j, prefix_seq, j + 1 == prefix_len);
                }
                auto t0 = clk::now();
                if (llama_decode(ctx, batch) != 0) {
                    std::fprintf(stderr, "llama_decode failed (shared prefix)\n");
                    return false;
                }
                prefix_ms = ms_since(t0);
            }
            prefix_ready = true;
        }
        for (int s = 0; s < n; ++s) {
            llama_memory_seq_rm(mem, s, -1, -1);
            if (prefix_len > 0 && s % stride == 0) llama_memory_seq_cp(mem, prefix_seq, s, -1, -1);
        }
        return true;
    }

    // Builds the chain of one sequence. `stage` (may be NULL) is the constraint, wrapped for timing.
    llama_sampler *make_chain(llama_sampler *stage, StageTimer *timer) {
        llama_sampler_chain_params cp = llama_sampler_chain_default_params();
        cp.no_perf = true;
        llama_sampler *chain = llama_sampler_chain_init(cp);
        if (stage) llama_sampler_chain_add(chain, timed_init(stage, timer));
        if (args.temp <= 0.0f) {
            llama_sampler_chain_add(chain, llama_sampler_init_greedy());
        } else {
            llama_sampler_chain_add(chain, llama_sampler_init_temp(args.temp));
            llama_sampler_chain_add(chain, llama_sampler_init_dist(args.seed));
        }
        return chain;
    }

    // The forced run of `state` (at most `cap` tokens) into `out`; false (and a message) when libtrie fails.
    bool draft(const trie_automaton *a, trie_state state, size_t cap, std::vector<llama_token> &out,
               trie_state &end, bool &complete, ModeResult &r) {
        auto t0 = clk::now();
        out.resize(cap);
        size_t n = 0;
        const trie_status st = trie_draft(a, state, out.data(), cap, &n, &end, &complete);
        out.resize(st == TRIE_OK ? n : 0);
        r.stage_ns += std::chrono::duration<double, std::nano>(clk::now() - t0).count();
        if (st != TRIE_OK) std::fprintf(stderr, "libtrie: trie_draft: %s\n", trie_last_error());
        return st == TRIE_OK;
    }

    // stage_factory(seq) returns a new constraint stage or NULL. With `jump` (the stage's automaton; the stages
    // must then be trie_llama_sampler_init stages), forced runs are decoded as one batch: after each sampled
    // token, the run from the stage's state is accepted by the chain and decoded with it, logits at its end only.
    template <class F>
    bool run(ModeResult &r, F stage_factory, const trie_automaton *jump = nullptr) {
        StageTimer timer;
        const size_t P = prompts.size();
        r.outputs.assign(P, std::string());
        for (size_t g = 0; g < P; g += (size_t) args.batch) {
            const size_t ns = std::min((size_t) args.batch, P - g);
            if (!reset_seqs((int) ns, 1)) return false;

            std::vector<llama_sampler *> chains(ns), stages(ns);
            for (size_t s = 0; s < ns; ++s) {
                stages[s] = stage_factory();
                chains[s] = make_chain(stages[s], &timer);
            }

            std::vector<bool> active(ns, true);
            std::vector<int> n_gen(ns, 0);
            size_t n_active = ns;
            std::vector<llama_token> run;
            trie_state end = 0;
            bool complete = false;
            // The forced run (at most `budget` tokens) from sequence s's state into `run`: accepted by its chain,
            // appended to its output and counted.
            auto take_forced = [&](size_t s, size_t budget) -> bool {
                if (!draft(jump, trie_llama_sampler_state(stages[s]), budget, run, end, complete, r)) return false;
                for (llama_token d : run) {
                    llama_sampler_accept(chains[s], d);
                    r.outputs[g + s] += token_piece(vocab, d);
                    r.out_tokens++;
                }
                n_gen[s] += (int) run.size();
                r.gen_tokens += run.size();
                r.forced_tokens += run.size();
                return true;
            };

            // prefill: every prompt of the group in one batch, logits at each prompt's last token (with jump, after
            // the forced run of the start state, e.g. a prefix all members share)
            batch.n_tokens = 0;
            std::vector<int32_t> idx(ns);
            std::vector<llama_pos> pos(ns);
            for (size_t s = 0; s < ns; ++s) {
                const auto &toks = prompts[g + s].tokens;
                run.clear();
                complete = false;
                if (jump && !take_forced(s, (size_t) args.n_predict)) return false;
                for (size_t j = prefix_len; j < toks.size(); ++j) {
                    batch_add(batch, toks[j], (llama_pos) j, (llama_seq_id) s, j + 1 == toks.size() && run.empty());
                }
                for (size_t j = 0; j < run.size(); ++j) {
                    batch_add(batch, run[j], (llama_pos) (toks.size() + j), (llama_seq_id) s, j + 1 == run.size());
                }
                idx[s] = batch.n_tokens - 1;
                pos[s] = (llama_pos) (toks.size() + run.size());
                r.steps++;
                if (complete || n_gen[s] >= args.n_predict) {  // answered by the forced run alone
                    active[s] = false;
                    n_active--;
                    r.truncated += !complete;
                }
            }
            auto t0 = clk::now();
            if (llama_decode(ctx, batch) != 0) {
                std::fprintf(stderr, "llama_decode failed (prefill)\n");
                return false;
            }
            r.prefill_ms += ms_since(t0);

            t0 = clk::now();
            while (n_active > 0) {
                batch.n_tokens = 0;
                for (size_t s = 0; s < ns; ++s) {
                    if (!active[s]) continue;
                    const llama_token t = llama_sampler_sample(chains[s], ctx, idx[s]);
                    r.gen_tokens++;
                    n_gen[s]++;
                    if (llama_vocab_is_eog(vocab, t)) {
                        active[s] = false;
                        n_active--;
                        continue;
                    }
                    r.outputs[g + s] += token_piece(vocab, t);
                    r.out_tokens++;
                    run.clear();
                    complete = false;
                    if (jump && n_gen[s] < args.n_predict && !take_forced(s, (size_t) (args.n_predict - n_gen[s]))) {
                        return false;
                    }
                    if (complete) {  // one member, complete: its end-of-generation token needs no model step
                        active[s] = false;
                        n_active--;
                        continue;
                    }
                    if (n_gen[s] >= args.n_predict) {
                        active[s] = false;
                        n_active--;
                        r.truncated++;
                        continue;
                    }
                    batch_add(batch, t, pos[s]++, (llama_seq_id) s, run.empty());
                    for (size_t j = 0; j < run.size(); ++j) {
                        batch_add(batch, run[j], pos[s]++, (llama_seq_id) s, j + 1 == run.size());
                    }
                    idx[s] = batch.n_tokens - 1;
                    r.steps++;
                }
                if (batch.n_tokens > 0 && llama_decode(ctx, batch) != 0) {
                    std::fprintf(stderr, "llama_decode failed (generation)\n");
                    return false;
                }
            }
            r.gen_ms += ms_since(t0);
            // The trie stage fails closed and records why; a sequence with a failure is reported, never hidden.
            for (size_t s = 0; s < ns; ++s) {
                const char *msg = nullptr;
                if (stages[s] != nullptr && trie_llama_sampler_is_trie(stages[s])
                    && trie_llama_sampler_error(stages[s], &msg) != TRIE_OK) {
                    if (r.stage_errors++ == 0) r.first_stage_error = msg;
                    std::fprintf(stderr, "trie-llama: prompt #%zu: %s\n", g + s, msg);
                }
            }
            for (auto *c : chains) llama_sampler_free(c);
        }
        r.stage_ns = timer.ns;
        score(r);
        return true;
    }

    // Validity and accuracy of r.outputs; prints one line per prompt unless --quiet.
    void score(ModeResult &r) {
        const size_t P = prompts.size();
        r.n = P;
        for (size_t i = 0; i < P; ++i) {
            const std::string &o = r.outputs[i];
            const bool ok = members.count(o) > 0;
            r.valid += ok;
            if (!prompts[i].gold.empty()) {
                r.n_gold++;
                r.correct += (o == prompts[i].gold);
            }
            if (!args.quiet) {
                std::printf("  [%-13s] #%-3zu %s %s%s%s\n", r.mode.c_str(), i, ok ? "member " : "INVALID",
                            json_str(o).c_str(),
                            prompts[i].gold.empty() ? "" : (o == prompts[i].gold ? "  (= gold)" : "  gold: "),
                            prompts[i].gold.empty() || o == prompts[i].gold ? "" : prompts[i].gold.c_str());
            }
        }
        std::fflush(stdout);
    }

    // Beam search over trie states: each prompt keeps the `width` best partial members by total log-probability
    // (the model's full-vocabulary log-softmax, summed over the tokens), one llama.cpp sequence per hypothesis
    // (KV cells shared through llama_memory_seq_cp). A hypothesis ends with an end-of-generation token, which
    // the automaton allows only after a whole member. The answer is the best finished hypothesis; search stops
    // when no live hypothesis can beat it (scores only decrease). Greedy decoding is width 1.
    // With `jump`, each hypothesis takes the forced run of its state right after its token, decoded in the same
    // batch with logits at every position of the run, so the run's tokens add their model log-probabilities to the
    // score in the same step (ranking as without jump, up to the tokenization of the forced bytes). A run shared by
    // all hypotheses (the start state's) is decoded once, with the prompt, and adds the same to every hypothesis of
    // the prompt (left out). A hypothesis ends with its end-of-generation token, as without jump.
    bool run_beam(ModeResult &r, const trie_automaton *a, int width, bool jump) {
        struct Hyp {
            trie_state state;
            double score;
            std::vector<llama_token> toks;
            int slot;      // sequence id
            int32_t idx;   // logits row in the last batch
            llama_pos pos = 0;  // next position
            size_t n_new = 1;   // tokens to decode at this step (the chosen token and its forced run)
            std::vector<llama_token> forced{};  // jump: the forced run decoded after the chosen token, to be scored
        };
        struct Cand {
            int parent;
            llama_token tok;
            double score;
            trie_state next;
        };
        const size_t P = prompts.size();
        const size_t n_vocab = (size_t) llama_vocab_n_tokens(vocab);
        const size_t nv = trie_automaton_n_vocab(a);
        std::vector<int32_t> allowed(nv + 1);
        r.outputs.assign(P, std::string());
        llama_memory_t mem = llama_get_memory(ctx);
        for (size_t g = 0; g < P; g += (size_t) args.batch) {
            const size_t np = std::min((size_t) args.batch, P - g);
            if (!reset_seqs((int) (np * (size_t) width), width)) return false;
            // prefill each prompt (after the shared prefix) into its first slot; children copy their parent
            batch.n_tokens = 0;
            std::vector<std::vector<Hyp>> live(np);
            std::vector<double> best_done(np, -INFINITY);
            std::vector<std::vector<llama_token>> best_toks(np);
            std::vector<llama_pos> pos(np);
            std::vector<llama_token> run;
            trie_state end = 0;
            bool complete = false;
            for (size_t p = 0; p < np; ++p) {
                const auto &toks = prompts[g + p].tokens;
                const int slot0 = (int) (p * (size_t) width);
                run.clear();
                end = trie_start(a);
                complete = false;
                if (jump && !draft(a, trie_start(a), (size_t) args.n_predict - 1, run, end, complete, r)) return false;
                r.forced_tokens += run.size();
                for (size_t j = prefix_len; j < toks.size(); ++j) {
                    batch_add(batch, toks[j], (llama_pos) j, slot0, j + 1 == toks.size() && run.empty());
                }
                for (size_t j = 0; j < run.size(); ++j) {
                    batch_add(batch, run[j], (llama_pos) (toks.size() + j), slot0, j + 1 == run.size());
                }
                r.steps++;
                if (complete) {  // one member: answered by the forced run
                    best_done[p] = 0.0;
                    best_toks[p] = run;
                    continue;
                }
                live[p].push_back(Hyp{end, 0.0, run, slot0, batch.n_tokens - 1});
                live[p].back().pos = (llama_pos) (toks.size() + run.size());
                pos[p] = (llama_pos) toks.size();
            }
            auto t0 = clk::now();
            if (llama_decode(ctx, batch) != 0) {
                std::fprintf(stderr, "llama_decode failed (prefill)\n");
                return false;
            }
            r.prefill_ms += ms_since(t0);
            t0 = clk::now();
            for (int step = 0;; ++step) {
                batch.n_tokens = 0;
                for (size_t p = 0; p < np; ++p) {
                    auto &hs = live[p];
                    if (hs.empty()) continue;
                    auto ts = clk::now();
                    std::vector<Cand> cands;
                    // log-softmax of token `tok` in logits row `row` of the last batch
                    auto logprob = [&](int32_t row, llama_token tok, double *lse_out) {
                        const float *lg = llama_get_logits_ith(ctx, row);
                        float mx = -INFINITY;
                        for (size_t t = 0; t < n_vocab; ++t) mx = std::max(mx, lg[t]);
                        double sum = 0;
                        for (size_t t = 0; t < n_vocab; ++t) sum += std::exp((double) (lg[t] - mx));
                        const double lse = mx + std::log(sum);
                        if (lse_out) *lse_out = lse;
                        return tok >= 0 ? (double) lg[tok] - lse : 0.0;
                    };
                    for (size_t h = 0; h < hs.size(); ++h) {
                        // jump: the forced tokens decoded with the chosen one add their log-probabilities (read
                        // from the logits at each position of the run: the same step), so ranking stays exact
                        for (size_t j = 0; j < hs[h].forced.size(); ++j) {
                            hs[h].score += logprob(hs[h].idx - (int32_t) (hs[h].forced.size() - j), hs[h].forced[j],
                                                   nullptr);
                        }
                        const float *lg = llama_get_logits_ith(ctx, hs[h].idx);
                        double lse = 0;
                        logprob(hs[h].idx, -1, &lse);
                        size_t n_allowed = 0;
                        if (trie_allowed(a, hs[h].state, allowed.data(), nv, &n_allowed) != TRIE_OK) {
                            std::fprintf(stderr, "libtrie: %s\n", trie_last_error());
                            return false;
                        }
                        for (size_t k = 0; k < n_allowed; ++k) {
                            const llama_token t = allowed[k];
                            if ((size_t) t >= n_vocab) continue;
                            cands.push_back(Cand{(int) h, t, hs[h].score + (double) lg[t] - lse, 0});
                        }
                    }
                    const size_t keep = std::min(cands.size(), (size_t) width);
                    std::partial_sort(cands.begin(), cands.begin() + (ptrdiff_t) keep, cands.end(),
                                      [](const Cand &x, const Cand &y) { return x.score > y.score; });
                    cands.resize(keep);
                    std::vector<Hyp> next;
                    std::vector<int> children(hs.size(), 0);
                    for (auto &c : cands) {
                        if (c.score <= best_done[p]) break;  // sorted: nothing after can win
                        if (trie_advance(a, hs[c.parent].state, c.tok, &c.next) != TRIE_OK) {
                            std::fprintf(stderr, "libtrie: %s\n", trie_last_error());
                            return false;
                        }
                        if (c.next == TRIE_STATE_FINISHED) {
                            best_done[p] = c.score;
                            best_toks[p] = hs[c.parent].toks;
                            continue;
                        }
                        if ((int) hs[c.parent].toks.size() + 1 >= args.n_predict) continue;
                        Hyp n{c.next, c.score, hs[c.parent].toks, -1, -1};
                        n.toks.push_back(c.tok);
                        n.pos = hs[c.parent].pos;
                        if (jump) {
                            const size_t cap = (size_t) args.n_predict - 1 - n.toks.size();
                            if (!draft(a, c.next, cap, run, end, complete, r)) return false;
                            n.toks.insert(n.toks.end(), run.begin(), run.end());
                            n.state = end;
                            n.n_new = 1 + run.size();
                            n.forced = run;
                            r.forced_tokens += run.size();
                        }
                        // the first child continues in its parent's sequence; others get a free slot (below)
                        if (children[c.parent]++ == 0) n.slot = hs[c.parent].slot;
                        next.push_back(std::move(n));
                        next.back().idx = c.parent;  // parent index until a slot is assigned
                    }
                    // free slots: this prompt's slots that no surviving hypothesis continues in
                    std::vector<bool> used((size_t) width, false);
                    const int base = (int) (p * (size_t) width);
                    for (const auto &n : next) if (n.slot >= 0) used[(size_t) (n.slot - base)] = true;
                    size_t f = 0;
                    for (auto &n : next) {
                        if (n.slot >= 0) continue;
                        while (used[f]) ++f;
                        used[f] = true;
                        n.slot = base + (int) f;
                        llama_memory_seq_rm(mem, n.slot, -1, -1);
                        llama_memory_seq_cp(mem, hs[(size_t) n.idx].slot, n.slot, -1, -1);
                    }
                    for (size_t k = 0; k < (size_t) width; ++k) {
                        if (!used[k]) llama_memory_seq_rm(mem, base + (int) k, -1, -1);
                    }
                    r.stage_ns += std::chrono::duration<double, std::nano>(clk::now() - ts).count();
                    for (auto &n : next) {
                        const size_t k0 = n.toks.size() - n.n_new;
                        for (size_t k = k0; k < n.toks.size(); ++k) {
                            batch_add(batch, n.toks[k], n.pos++, n.slot, jump || k + 1 == n.toks.size());
                        }
                        n.idx = batch.n_tokens - 1;
                    }
                    if (!next.empty()) r.steps++;
                    if (next.empty() && best_toks[p].empty() && best_done[p] == -INFINITY) r.truncated++;
                    pos[p]++;
                    hs = std::move(next);
                }
                if (batch.n_tokens == 0) break;
                r.gen_tokens += (size_t) batch.n_tokens;
                if (llama_decode(ctx, batch) != 0) {
                    std::fprintf(stderr, "llama_decode failed (beam)\n");
                    return false;
                }
            }
            r.gen_ms += ms_since(t0);
            for (size_t p = 0; p < np; ++p) {
                for (llama_token t : best_toks[p]) r.outputs[g + p] += token_piece(vocab, t);
                r.out_tokens += best_toks[p].size();
            }
        }
        score(r);
        return true;
    }
};

void log_cb(enum ggml_log_level level, const char *text, void *ud) {
    const bool verbose = *(const bool *) ud;
    if (verbose || level == GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
}

}  // namespace

int main(int argc, char **argv) {
    Args args;
    if (!parse_args(argc, argv, args)) {
        usage(argv[0]);
        return 2;
    }
    static bool verbose_flag = false;
    verbose_flag = args.verbose;
    llama_log_set(log_cb, &verbose_flag);

    std::vector<std::string> choices;
    if (!read_lines(args.choices, choices) || choices.empty()) {
        std::fprintf(stderr, "cannot read choices from %s (or it is empty)\n", args.choices.c_str());
        return 2;
    }
    std::unordered_set<std::string> members(choices.begin(), choices.end());

    std::vector<std::string> plines;
    if (!read_lines(args.prompts, plines) || plines.empty()) {
        std::fprintf(stderr, "cannot read prompts from %s (or it is empty)\n", args.prompts.c_str());
        return 2;
    }

    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = args.n_gpu_layers;
    // Extra buffer types (CPU weight repacking, and AMX kernels when ggml was built with them) stay off unless
    // asked for: a GGML_NATIVE build crashed on Intel AMX CPUs (SIGILL in tinygemm_kernel_amx through the AMX
    // buffer type), and results must not depend on which CPU a machine has. scripts/fetch-llama.sh builds without
    // AMX anyway; this also protects builds made elsewhere.
    mp.use_extra_bufts = args.extra_bufts;
    auto t_load = clk::now();
    llama_model *model = llama_model_load_from_file(args.model.c_str(), mp);
    if (model == nullptr) {
        std::fprintf(stderr, "cannot load model %s\n", args.model.c_str());
        return 2;
    }
    const double load_ms = ms_since(t_load);
    const llama_vocab *vocab = llama_model_get_vocab(model);

    std::vector<Shot> shots;
    if (!args.shots.empty()) {
        std::vector<std::string> slines;
        if (!read_lines(args.shots, slines)) {
            std::fprintf(stderr, "cannot read few-shot examples from %s\n", args.shots.c_str());
            return 2;
        }
        for (const auto &l : slines) {
            const auto tab = l.find('\t');
            if (tab == std::string::npos) {
                std::fprintf(stderr, "%s: a line without a TAB: %s\n", args.shots.c_str(), l.c_str());
                return 2;
            }
            shots.push_back({l.substr(0, tab), l.substr(tab + 1)});
        }
    }

    std::vector<Prompt> prompts;
    size_t max_prompt = 0;
    for (const auto &l : plines) {
        Prompt p;
        const auto tab = l.find('\t');
        p.text = tab == std::string::npos ? l : l.substr(0, tab);
        if (tab != std::string::npos) p.gold = l.substr(tab + 1);
        p.tokens = tokenize(vocab, chat_prompt(model, args.system, shots, p.text));
        max_prompt = std::max(max_prompt, p.tokens.size());
        prompts.push_back(std::move(p));
    }
    size_t gold_outside = 0;
    for (const auto &p : prompts) gold_outside += !p.gold.empty() && !members.count(p.gold);

    const int B = (int) std::min((size_t) args.batch, prompts.size());
    auto want = [&args](const char *m) {
        return std::find(args.modes.begin(), args.modes.end(), m) != args.modes.end();
    };
    const int W = (want("beam") || want("beam-jump")) ? std::max(1, args.beam) : 1;
    // The tokens all prompts start with (system prompt, few-shot turns) are decoded once into their own sequence
    // and shared (llama_memory_seq_cp: the cells are shared, kv_unified); each prompt keeps at least one token.
    size_t prefix_len = prompts[0].tokens.size();
    for (const auto &p : prompts) {
        size_t k = 0;
        while (k < prefix_len && k < p.tokens.size() && p.tokens[k] == prompts[0].tokens[k]) ++k;
        prefix_len = p.tokens.empty() ? 0 : std::min(k, p.tokens.size() - 1);
    }
    if (prompts.size() < 2) prefix_len = 0;
    // beam: a prompt's hypotheses share its cells (kv_unified), each adds at most one cell per step
    const uint32_t per_seq = (uint32_t) (max_prompt - prefix_len + (size_t) W * (size_t) args.n_predict + 8);
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t) (prefix_len + (size_t) B * per_seq);
    cp.n_batch = cp.n_ctx;
    cp.n_ubatch = std::min<uint32_t>(cp.n_ctx, 512);
    cp.n_seq_max = (uint32_t) (B * W + 1);
    cp.kv_unified = true;
    cp.n_threads = args.threads;
    cp.n_threads_batch = args.threads;
    cp.no_perf = true;
    llama_context *ctx = llama_init_from_model(model, cp);
    if (ctx == nullptr) {
        std::fprintf(stderr, "cannot create a llama context\n");
        return 2;
    }
    llama_batch batch = llama_batch_init((int32_t) cp.n_ctx, 0, 1);

    char desc[128];
    llama_model_desc(model, desc, sizeof desc);
    std::printf("trie-llama: model %s (%s, vocab %d, loaded in %.0f ms), libtrie %s\n", args.model.c_str(), desc,
                llama_vocab_n_tokens(vocab), load_ms, trie_version());
    std::printf("trie-llama: %zu choices from %s, %zu prompts from %s, batch %d, n_predict %d, %s, %d threads\n",
                choices.size(), args.choices.c_str(), prompts.size(), args.prompts.c_str(), B, args.n_predict,
                args.temp <= 0 ? "greedy" : "sampling", args.threads);
    if (!shots.empty()) std::printf("trie-llama: %zu few-shot examples from %s\n", shots.size(), args.shots.c_str());
    if (gold_outside) std::printf("trie-llama: warning: %zu gold labels are not in the choices\n", gold_outside);
    std::fflush(stdout);

    Runner runner{args, model, vocab, ctx, batch, prompts, members, prefix_len, (llama_seq_id) (B * W)};
    std::vector<ModeResult> results;
    bool failed = false;

    if (want("unconstrained")) {
        ModeResult r;
        r.mode = "unconstrained";
        std::printf("-- mode unconstrained\n");
        if (!runner.run(r, [] { return (llama_sampler *) nullptr; })) failed = true;
        results.push_back(std::move(r));
    }

    // trie and beam share one automaton (vocabulary extraction + compile, timed once, reported by both)
    const bool want_trie = want("trie") || want("trie-jump");
    const bool want_beam = want("beam") || want("beam-jump");
    trie_automaton *automaton = nullptr;
    double vocab_ms = 0, compile_ms = 0;
    if (!failed && (want_trie || want_beam)) {
        std::printf("-- libtrie: building the vocabulary and compiling %zu strings\n", choices.size());
        std::fflush(stdout);
        auto t0 = clk::now();
        trie_vocab *tv = nullptr;
        trie_status st = trie_llama_vocab(vocab, &tv);
        vocab_ms = ms_since(t0);
        if (st == TRIE_OK) {
            std::vector<const uint8_t *> ptrs;
            std::vector<size_t> lens;
            for (const auto &c : choices) {
                ptrs.push_back((const uint8_t *) c.data());
                lens.push_back(c.size());
            }
            t0 = clk::now();
            if (!args.canonical) {
                st = trie_compile(tv, ptrs.data(), lens.data(), choices.size(), nullptr, &automaton);
            } else {
                // the tokenizer's own tokenization of each member, no special tokens (tokenizing is timed too)
                std::vector<std::vector<llama_token>> seqs(choices.size());
                std::vector<const int32_t *> sptrs;
                std::vector<size_t> slens;
                for (size_t i = 0; i < choices.size(); ++i) {
                    const std::string &c = choices[i];
                    seqs[i].resize(c.size() + 8);
                    int n = llama_tokenize(vocab, c.data(), (int32_t) c.size(), seqs[i].data(),
                                           (int32_t) seqs[i].size(), false, false);
                    if (n < 0) {
                        seqs[i].resize((size_t) -n);
                        n = llama_tokenize(vocab, c.data(), (int32_t) c.size(), seqs[i].data(),
                                           (int32_t) seqs[i].size(), false, false);
                    }
                    seqs[i].resize(n > 0 ? (size_t) n : 0);
                    sptrs.push_back(seqs[i].data());
                    slens.push_back(seqs[i].size());
                }
                st = trie_compile_tokens(tv, sptrs.data(), slens.data(), choices.size(), nullptr, &automaton);
            }
            compile_ms = ms_since(t0);
            trie_vocab_free(tv);
        }
        if (st != TRIE_OK) {
            std::fprintf(stderr, "libtrie: %s: %s\n", trie_status_str(st), trie_last_error());
            failed = true;
        } else {
            std::printf("   vocab %.1f ms, compile %.1f ms%s, %zu states\n", vocab_ms, compile_ms,
                        args.canonical ? " (canonical tokenizations only)" : "",
                        trie_automaton_n_states(automaton));
            std::fflush(stdout);
        }
    }

    for (const bool jump : {false, true}) {
        if (failed || !want(jump ? "trie-jump" : "trie")) continue;
        ModeResult r;
        r.mode = jump ? "trie-jump" : "trie";
        r.jump = jump;
        r.vocab_ms = vocab_ms;
        r.compile_ms = compile_ms;
        std::printf("-- mode %s: libtrie's sampler stage, then greedy / sampling%s\n", r.mode.c_str(),
                    jump ? "; forced runs decoded as one batch" : "");
        std::fflush(stdout);
        if (!runner.run(r, [&] { return trie_llama_sampler_init(automaton); }, jump ? automaton : nullptr)) {
            failed = true;
        }
        results.push_back(std::move(r));
    }

    if (!failed && want("gbnf")) {
        ModeResult r;
        r.mode = "gbnf";
        if (choices.size() > args.gbnf_max_k) {
            r.skipped = true;
            r.note = "skipped: K > --gbnf-max-k " + std::to_string(args.gbnf_max_k);
            std::printf("-- mode gbnf %s\n", r.note.c_str());
        } else {
            const std::string g = gbnf_of(choices);
            std::printf("-- mode gbnf: grammar of %zu alternatives (%zu bytes)\n", choices.size(), g.size());
            std::fflush(stdout);
            bool first = true, bad = false;
            auto factory = [&]() -> llama_sampler * {
                auto t0 = clk::now();
                llama_sampler *s = llama_sampler_init_grammar(vocab, g.c_str(), "root");
                if (first) { r.compile_ms = ms_since(t0); first = false; }
                if (s == nullptr) bad = true;
                return s;
            };
            if (!runner.run(r, factory) || bad) {
                std::fprintf(stderr, "gbnf mode failed (grammar did not parse?)\n");
                failed = true;
            }
        }
        results.push_back(std::move(r));
    }

    for (const bool jump : {false, true}) {
        if (failed || !want(jump ? "beam-jump" : "beam")) continue;
        ModeResult r;
        r.mode = jump ? "beam-jump" : "beam";
        r.jump = jump;
        r.vocab_ms = vocab_ms;
        r.compile_ms = compile_ms;
        std::printf("-- mode %s: width %d over trie states, members ranked by total log-probability%s\n",
                    r.mode.c_str(), W, jump ? "; forced runs decoded with their token, adding 0" : "");
        std::fflush(stdout);
        if (!runner.run_beam(r, automaton, W, jump)) failed = true;
        results.push_back(std::move(r));
    }
    trie_automaton_free(automaton);

    if (!args.out.empty()) {
        std::FILE *f = std::fopen(args.out.c_str(), "wb");
        if (!f) {
            std::fprintf(stderr, "cannot write %s\n", args.out.c_str());
            failed = true;
        } else {
            for (const auto &r : results) {
                if (r.skipped) continue;
                for (size_t i = 0; i < r.outputs.size(); ++i) {
                    std::fprintf(f, "%s\t%zu\t%s\n", r.mode.c_str(), i, escape_field(r.outputs[i]).c_str());
                }
            }
            std::fclose(f);
        }
    }

    std::printf("\n%-14s %9s %9s %11s %11s %10s %14s %9s %12s %12s %10s\n", "mode", "valid", "accuracy",
                "compile ms", "prefill ms", "decode t/s", "stage us/token", "truncated", "steps/answer",
                "tokens/answer", "ms/answer");
    for (const auto &r : results) {
        if (r.skipped) {
            std::printf("%-14s %s\n", r.mode.c_str(), r.note.c_str());
            continue;
        }
        char acc[32] = "-", comp[32] = "-", stage[32] = "-";
        if (r.n_gold) std::snprintf(acc, sizeof acc, "%.1f%%", 100.0 * r.correct / r.n_gold);
        if (r.mode != "unconstrained") {
            std::snprintf(comp, sizeof comp, "%.1f", r.compile_ms + r.vocab_ms);
            std::snprintf(stage, sizeof stage, "%.1f", r.gen_tokens ? r.stage_ns / 1e3 / r.gen_tokens : 0.0);
        }
        std::printf("%-14s %8.1f%% %9s %11s %11.0f %10.1f %14s %9zu %12.2f %12.2f %10.1f\n", r.mode.c_str(),
                    r.n ? 100.0 * r.valid / r.n : 0.0, acc, comp, r.prefill_ms,
                    r.gen_ms > 0 ? r.gen_tokens / (r.gen_ms / 1e3) : 0.0, stage, r.truncated,
                    r.n ? (double) r.steps / r.n : 0.0, r.n ? (double) answer_tokens(r) / r.n : 0.0,
                    r.n ? (r.prefill_ms + r.gen_ms) / r.n : 0.0);
    }
    if (prefix_len > 0) {
        std::printf("shared prompt prefix (system prompt + few-shot turns): %zu tokens, decoded once in %.0f ms\n",
                    prefix_len, runner.prefix_ms);
    }
    std::printf("(valid: exact members; accuracy: exact gold answers; compile: trie/beam = vocabulary extraction +\n"
                " compile, gbnf = grammar sampler init; decode t/s: generated tokens / generation wall time incl.\n"
                " sampling, %d prompts at once; stage: the constraint's apply + accept per token, for beam libtrie +\n"
                " ranking per decoded hypothesis token; steps/answer: model forward passes an answer's tokens took\n"
                " part in, prefill included (a beam's hypotheses decoded together count once); tokens/answer:\n"
                " output tokens (beam: of the answer), forced runs included; ms/answer: (prefill + generation) /\n"
                " prompts)\n",
                B);
    if (args.json) {
        for (const auto &r : results) {
            std::printf("{\"mode\":%s,\"skipped\":%s,\"k\":%zu,\"n\":%zu,\"valid\":%zu,\"validity\":%.4f,"
                        "\"n_gold\":%zu,\"correct\":%zu,\"accuracy\":%.4f,\"vocab_ms\":%.3f,\"compile_ms\":%.3f,"
                        "\"prefill_ms\":%.3f,\"gen_ms\":%.3f,\"gen_tokens\":%zu,\"decode_tok_per_s\":%.3f,"
                        "\"stage_us_per_token\":%.3f,\"truncated\":%zu,\"stage_errors\":%zu,\"batch\":%d,"
                        "\"canonical\":%s,\"jump\":%s,\"steps\":%zu,\"forced_tokens\":%zu,\"answer_tokens\":%zu,"
                        "\"threads\":%d,\"n_predict\":%d}\n",
                        json_str(r.mode).c_str(), r.skipped ? "true" : "false", choices.size(), r.n, r.valid,
                        r.n ? (double) r.valid / r.n : 0.0, r.n_gold, r.correct,
                        r.n_gold ? (double) r.correct / r.n_gold : 0.0, r.vocab_ms, r.compile_ms, r.prefill_ms,
                        r.gen_ms, r.gen_tokens, r.gen_ms > 0 ? r.gen_tokens / (r.gen_ms / 1e3) : 0.0,
                        r.gen_tokens ? r.stage_ns / 1e3 / r.gen_tokens : 0.0, r.truncated, r.stage_errors, B,
                        args.canonical && r.mode != "unconstrained" && r.mode != "gbnf" ? "true" : "false",
                        r.jump ? "true" : "false", r.steps, r.forced_tokens, answer_tokens(r), args.threads,
                        args.n_predict);
        }
    }
    std::fflush(stdout);

    int rc = failed ? 1 : 0;
    for (const auto &r : results) {
        if (r.stage_errors) {
            std::fprintf(stderr, "trie-llama: %s: the stage failed (closed) on %zu prompts; first: %s\n",
                         r.mode.c_str(), r.stage_errors, r.first_stage_error.c_str());
            rc = 1;
        }
    }
    if (args.require_valid) {
        for (const auto &r : results) {
            if (r.mode != "unconstrained" && r.mode != "gbnf" && !r.skipped && r.valid != r.n) {
                std::fprintf(stderr, "trie-llama: --require-valid: %zu of %zu %s outputs are not members\n",
                             r.n - r.valid, r.n, r.mode.c_str());
                rc = 1;
            }
        }
        bool has_trie = false;
        for (const auto &r : results) has_trie |= r.mode != "unconstrained" && r.mode != "gbnf";
        if (!has_trie) {
            std::fprintf(stderr, "trie-llama: --require-valid without a trie run\n");
            rc = 1;
        }
    }

    llama_batch_free(batch);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return rc;
}
