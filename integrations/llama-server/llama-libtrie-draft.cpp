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

// The automaton and state a stage constrains with now: a plain stage, a segment stage in its set, or the current
// call of a parallel-calls stage ("trie-tools"; between calls nothing: end-of-generation is allowed there too).
struct constraint {
    const trie_automaton * automaton = nullptr;
    trie_state             state     = 0;
};

bool constraint_of(const llama_sampler * stage, constraint & out) {
    if (stage == nullptr || stage->iface == nullptr || stage->iface->name == nullptr || stage->ctx == nullptr) {
        return false;
    }
    if (trie_llama_sampler_is_trie(stage)) {
        if (trie_llama_sampler_error(stage, nullptr) != TRIE_OK) {
            return false;
        }
        const auto * c = (const trie_llama_ctx *) stage->ctx;
        out.automaton  = c->automaton;
        out.state      = c->state;
        return out.state != TRIE_STATE_FINISHED;
    }
    const char * name = llama_sampler_name(stage);
    if (std::strcmp(name, "trie-tools") == 0) {
        return constraint_of(llama_libtrie::tools_current_segment(stage), out);
    }
    if (std::strcmp(name, "trie-segment") == 0) {
        const auto * c = (const trie_llama_seg *) stage->ctx;
        if (c->magic != TRIE_LLAMA_SEG_MAGIC || c->phase != TRIE_LLAMA_IN_SET || c->error != TRIE_OK) {
            return false;
        }
        out.automaton = c->automaton;
        out.state     = c->state;
        return true;
    }
    return false;
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
        return 0;
    }
    std::vector<trie_state> states(draft.size());
    size_t n_ok = 0;
    if (trie_validate_draft(c.automaton, c.state, draft.data(), draft.size(), &n_ok, states.data()) != TRIE_OK) {
        return 0;  // cannot tell: the verification decides
    }
    if (n_ok == draft.size()) {
        return 0;
    }
    // an open template (a tool call's name) whose member is complete after the accepted prefix hands over to the
    // tool's argument grammar there: the rest of the draft is the grammar's to judge
    const trie_state at = n_ok == 0 ? c.state : states[n_ok - 1];
    size_t member = SIZE_MAX;
    if (trie_automaton_is_open(c.automaton) && trie_member(c.automaton, at, &member) == TRIE_OK && member != SIZE_MAX) {
        return 0;
    }
    const size_t cut = draft.size() - n_ok;
    draft.resize(n_ok);
    return cut;
}
