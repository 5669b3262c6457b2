// llama-libtrie-draft.h - jump-forward through llama-server's speculative slot (issue 31).
//
// A slot whose sampler has a libtrie stage (a set, a tool call's name) proposes the stage's forced run (trie_draft:
// the rest of the only member left, a template's prefix / suffix) as its speculative draft: the server decodes the
// sampled token and the run in one batch and verifies the run with common_sampler_sample_and_accept_n, the same
// path as a draft model's. No draft model is needed; with one (--model-draft) or n-gram drafting (--spec-type), the
// engine drafts only where nothing is forced, and its draft is cut to the prefix the set allows.
//
// Included only by the llama.cpp sources that use it (common/arg.cpp, common/sampling.cpp,
// tools/server/server-context.cpp), not by common.h: a change here does not rebuild the whole server.
#pragma once

#include "llama.h"

#include <cstdint>
#include <vector>

struct common_sampler;

// The most forced tokens a slot proposes per step (--trie-jump-forward N, LIBTRIE_JUMP_FORWARD; 0: off). Process-wide,
// set while the options are parsed.
constexpr int32_t COMMON_LIBTRIE_JUMP_FORWARD_DEFAULT = 16;
constexpr int32_t COMMON_LIBTRIE_JUMP_FORWARD_MAX     = 256;
void    common_libtrie_set_jump_forward(int32_t n_max);
int32_t common_libtrie_jump_forward();

// The libtrie stage of a sampler (common/sampling.cpp, patches/llama-server-libtrie.patch), or nullptr.
const llama_sampler * common_sampler_libtrie_stage(const common_sampler * gsmpl);

// The forced run of a libtrie stage from its current state, at most `n_max` tokens, into `out` (cleared first):
// a plain stage (a set), a tool-call stage in a tool's name (the call's fixed text around it, the rest of the only
// name left: libtrie's trie_calls_draft). Empty where nothing is forced, in free content and a tool's arguments,
// after the end, for a stage that failed, and for anything that is not a libtrie stage.
// Returns !out.empty().
bool common_libtrie_stage_draft(const llama_sampler * stage, int32_t n_max, std::vector<llama_token> & out);

// Cuts `draft` (a draft model's or an n-gram draft) to its longest prefix the stage's set accepts from the current
// state (trie_validate_draft, trie_calls_validate): tokens the set rejects would be rejected by the verification
// anyway. Leaves the draft as it is in free content and a tool's arguments (the verification decides). Returns the number
// of tokens cut.
size_t common_libtrie_stage_trim(const llama_sampler * stage, std::vector<llama_token> & draft);
