// llama-libtrie-draft.cpp - the forced run of a libtrie stage as a llama-server slot's speculative draft, and a draft
// of another origin cut to what the set allows (see llama-libtrie-draft.h). Compiled into llama-common by
// patches/llama-server-libtrie.patch (-DLLAMA_LIBTRIE=ON).
//
// Invariants: a draft is only ever a proposal (the server verifies every token with the full sampler, the stage's
// mask included, so an output stays a member whatever is drafted); nothing here changes a stage's state (the
// stage advances once per token the verification accepts, through common_sampler_accept); a stage that failed or
// is not libtrie's proposes nothing and cuts nothing.

#include "llama-libtrie-draft.h"

#include "llama-libtrie-internal.h"
#include "llama-libtrie-stage.h"  // llama.h, trie.h, trie_llama.h

#include <algorithm>
#include <atomic>
#include <cstring>

namespace {

std::atomic<int32_t> g_jump_forward{COMMON_LIBTRIE_JUMP_FORWARD_DEFAULT};

// The automaton and state a plain stage (a set) constrains with now; a tool-call stage ("trie-tools") is asked
// through llama_libtrie::tools_draft / tools_trim (the engine knows where it is).
struct constraint {
    const trie_automaton * automaton = nullptr;
    trie_state             state     = 0;
};

bool constraint_of(const llama_sampler * stage, constraint & out) {
    if (stage == nullptr || stage->iface == nullptr || stage->iface->name == nullptr || stage->ctx == nullptr ||
        !trie_llama_sampler_is_trie(stage) || trie_llama_sampler_error(stage, nullptr) != TRIE_OK) {
        return false;
    }
    const auto * c = (const trie_llama_ctx *) stage->ctx;
    out.automaton  = c->automaton;
    out.state      = c->state;
    return out.state != TRIE_STATE_FINISHED;
}

}  // namespace

void common_libtrie_set_jump_forward(int32_t n_max) {
    g_jump_forward = std::clamp<int32_t>(n_max, 0, COMMON_LIBTRIE_JUMP_FORWARD_MAX);
}

int32_t common_libtrie_jump_forward() {
    return g_jump_forward;
}

bool common_libtrie_stage_draft(const llama_sampler * stage, int32_t n_max, std::vector<llama_token> & out) {
    out.clear();
    if (llama_libtrie::tools_draft(stage, n_max, out)) {
        return true;
    }
    constraint c;
    if (n_max <= 0 || !constraint_of(stage, c)) {
        return false;
    }
    out.resize((size_t) n_max);
    size_t n = 0;
    if (trie_draft(c.automaton, c.state, out.data(), out.size(), &n, nullptr, nullptr) != TRIE_OK) {
        n = 0;  // nothing proposed: the slot samples as usual
    }
    out.resize(n);
    return n > 0;
}

size_t common_libtrie_stage_trim(const llama_sampler * stage, std::vector<llama_token> & draft) {
    constraint c;
    if (draft.empty() || !constraint_of(stage, c)) {
        return llama_libtrie::tools_trim(stage, draft);
    }
    size_t n_ok = 0;
    if (trie_validate_draft(c.automaton, c.state, draft.data(), draft.size(), &n_ok, nullptr) != TRIE_OK ||
        n_ok == draft.size()) {
        return 0;  // cannot tell (the verification decides), or nothing to cut
    }
    const size_t cut = draft.size() - n_ok;
    draft.resize(n_ok);
    return cut;
}
