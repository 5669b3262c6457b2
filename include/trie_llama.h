/*
 * trie_llama.h - libtrie as a llama.cpp sampler stage (header-only, C99 and C++17).
 *
 * Include it after llama.h and trie.h:
 *
 *     #include "llama.h"
 *     #include "trie.h"
 *     #include "trie_llama.h"
 *
 *     trie_vocab *tv;     trie_llama_vocab(llama_model_get_vocab(model), &tv);
 *     trie_automaton *a;  trie_compile(tv, strings, lens, n, NULL, &a);
 *     trie_vocab_free(tv);                         // the automaton keeps its vocab alive
 *
 *     struct llama_sampler *chain = llama_sampler_chain_init(llama_sampler_chain_default_params());
 *     llama_sampler_chain_add(chain, trie_llama_sampler_init(a));   // constraint first ...
 *     llama_sampler_chain_add(chain, llama_sampler_init_greedy());   // ... then the selecting sampler
 *     trie_automaton_free(a);                       // the sampler holds its own reference
 *
 * The sampler keeps one trie_state. apply() restricts the candidates to the tokens allowed in that state;
 * accept() advances it (a token the automaton rejects, e.g. one forced by the caller, leaves the state as it
 * is and is recorded); reset() goes back to the start state; clone() copies the state. After an
 * end-of-generation token the state is TRIE_STATE_FINISHED, where only EOG ids are allowed: stop at EOG.
 *
 * The stage fails closed: it never lets a token outside the automaton through. If a libtrie call fails or a
 * state allows no token, apply() leaves only the end-of-generation ids (the answer ends there) or, when the
 * vocabulary has none, sets every logit to -inf; the failure is kept (the first one, until reset) and
 * trie_llama_sampler_error() returns it. Check it after generating when outputs must be members.
 *
 * trie_llama_sampler_is_trie() recognizes a stage made in any translation unit, C or C++, of any shared object
 * linked to the same libtrie: a stage's name callback returns trie_sampler_name(), one static string exported by
 * libtrie itself, and is_trie compares that pointer before it reads anything of the sampler's context (a foreign
 * sampler also named "trie" is never dereferenced). Two copies of libtrie in one process (a static libtrie.a in
 * each of two shared objects) have two such strings: a stage of one copy is not a stage for the other (is_trie
 * says false; it never says true wrongly).
 *
 * Put the stage before any truncating sampler (top-k, top-p, min-p ...) so those see only allowed tokens.
 * accept() advances on every token it is given: an engine that also feeds the prompt's tokens to its chain's
 * accept (llama.cpp's common_sampler does, for the repetition penalties, when a server slot starts) moves the
 * state with them. There, keep the stage outside that chain and accept only generated tokens (as the
 * llama-server integration, integrations/llama-server, does), or reset() it after the prompt.
 * Only the CPU sampler interface is used (the experimental backend members of llama_sampler_i stay NULL).
 *
 * Memory: init and clone allocate only the context and the end-of-generation ids; the two full-width scratch
 * buffers (n_vocab ids and an n_vocab-bit mask, about 0.6 MB for 152K ids) are allocated by the first apply, so
 * an engine that clones samplers often (llama-server on rollbacks) pays for them only in clones that sample. If
 * that allocation fails, apply fails closed (EOG ids only, or all -inf) and records TRIE_ERR_LIMIT_EXCEEDED; a
 * later apply tries again. Define TRIE_LLAMA_SCRATCH_MALLOC(bytes) before including this header to allocate the
 * scratch buffers with something else (it must return memory free() releases, or NULL).
 *
 * All functions are static; the header has no link-time symbols of its own.
 */
#ifndef TRIE_LLAMA_H
#define TRIE_LLAMA_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef TRIE_LLAMA_SCRATCH_MALLOC
#define TRIE_LLAMA_SCRATCH_MALLOC(bytes) malloc(bytes)
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------------------------------
 * Vocabulary: token bytes, kinds and end-of-generation ids of a llama.cpp vocabulary.
 * ---------------------------------------------------------------------------------------------------------- */

/* Maps llama.cpp's token attribute bits to libtrie's token kinds (GGUF numbering). */
static inline uint32_t trie_llama_token_kind(enum llama_token_attr attr) {
    const int a = (int) attr;
    if (a & LLAMA_TOKEN_ATTR_CONTROL)      return TRIE_TOKEN_CONTROL;
    if (a & LLAMA_TOKEN_ATTR_UNKNOWN)      return TRIE_TOKEN_UNKNOWN;
    if (a & LLAMA_TOKEN_ATTR_UNUSED)       return TRIE_TOKEN_UNUSED;
    if (a & LLAMA_TOKEN_ATTR_BYTE)         return TRIE_TOKEN_BYTE;
    if (a & LLAMA_TOKEN_ATTR_USER_DEFINED) return TRIE_TOKEN_USER_DEFINED;
    if (a & LLAMA_TOKEN_ATTR_NORMAL)       return TRIE_TOKEN_NORMAL;
    /* LLAMA_TOKEN_ATTR_UNDEFINED: an id without a defined type (e.g. padding); never allow it. */
    return TRIE_TOKEN_UNUSED;
}

/*
 * Builds a trie_vocab from a llama.cpp vocabulary:
 *   bytes of token id  = llama_token_to_piece(vocab, id, ..., lstrip 0, special false)
 *                        (the exact text the token contributes to the output; empty for control tokens),
 *   kind               = llama_vocab_get_attr mapped by trie_llama_token_kind,
 *   end-of-generation  = every id with llama_vocab_is_eog.
 * Returns TRIE_ERR_NULL_ARGUMENT, TRIE_ERR_LIMIT_EXCEEDED (allocation failure) or trie_vocab_new's status.
 */
static inline trie_status trie_llama_vocab(const struct llama_vocab *vocab, trie_vocab **out) {
    if (vocab == NULL || out == NULL) return TRIE_ERR_NULL_ARGUMENT;
    *out = NULL;

    const int32_t n = llama_vocab_n_tokens(vocab);
    if (n <= 0) return TRIE_ERR_INVALID_ARGUMENT;

    size_t cap = (size_t) n * 8 + 1024;              /* all token bytes, grown on demand */
    size_t used = 0;
    uint8_t *arena = (uint8_t *) malloc(cap);
    size_t *offs = (size_t *) malloc(sizeof(size_t) * (size_t) n);
    size_t *lens = (size_t *) malloc(sizeof(size_t) * (size_t) n);
    uint32_t *kinds = (uint32_t *) malloc(sizeof(uint32_t) * (size_t) n);
    int32_t *eog = (int32_t *) malloc(sizeof(int32_t) * (size_t) n);
    const uint8_t **ptrs = (const uint8_t **) malloc(sizeof(uint8_t *) * (size_t) n);
    size_t n_eog = 0;
    trie_status st = TRIE_OK;
    int32_t bufsz = 256;
    char *buf = (char *) malloc((size_t) bufsz);

    if (!arena || !offs || !lens || !kinds || !eog || !ptrs || !buf) { st = TRIE_ERR_LIMIT_EXCEEDED; goto done; }

    for (int32_t id = 0; id < n; ++id) {
        int32_t len = llama_token_to_piece(vocab, id, buf, bufsz, 0, false);
        if (len < 0) {                                  /* -len is the size needed */
            int32_t need = -len;
            char *nb = (char *) realloc(buf, (size_t) need);
            if (!nb) { st = TRIE_ERR_LIMIT_EXCEEDED; goto done; }
            buf = nb;
            bufsz = need;
            len = llama_token_to_piece(vocab, id, buf, bufsz, 0, false);
            if (len < 0) { st = TRIE_ERR_UNSUPPORTED_VOCABULARY; goto done; }
        }
        if (used + (size_t) len > cap) {
            size_t ncap = cap * 2 + (size_t) len;
            uint8_t *na = (uint8_t *) realloc(arena, ncap);
            if (!na) { st = TRIE_ERR_LIMIT_EXCEEDED; goto done; }
            arena = na;
            cap = ncap;
        }
        memcpy(arena + used, buf, (size_t) len);
        offs[id] = used;
        lens[id] = (size_t) len;
        used += (size_t) len;
        kinds[id] = trie_llama_token_kind(llama_vocab_get_attr(vocab, id));
        if (llama_vocab_is_eog(vocab, id)) eog[n_eog++] = id;
    }
    for (int32_t id = 0; id < n; ++id) ptrs[id] = arena + offs[id];  /* arena no longer moves */

    st = trie_vocab_new(ptrs, lens, kinds, (size_t) n, eog, n_eog, out);

done:
    free(buf); free(ptrs); free(eog); free(kinds); free(lens); free(offs); free(arena);
    return st;
}

/* ------------------------------------------------------------------------------------------------------------
 * Sampler stage.
 * ---------------------------------------------------------------------------------------------------------- */

/* First member of every stage's context: the layout version. trie_llama_sampler_is_trie reads it only after the
 * name pointer proved the sampler is a libtrie stage; it tells apart stages made by copies of this header with
 * another context layout. */
#define TRIE_LLAMA_MAGIC UINT64_C(0x3176616D6C656972) /* "rielmav1": layout version 1 */

typedef struct trie_llama_ctx {
    uint64_t        magic;       /* TRIE_LLAMA_MAGIC */
    trie_automaton *automaton;   /* own reference (trie_automaton_retain) */
    trie_state      state;
    size_t          n_vocab;     /* trie_automaton_n_vocab: the mask width */
    uint32_t       *mask;        /* ceil(n_vocab / 32) words, filled on demand; NULL until the first apply */
    int32_t        *allowed;     /* n_vocab ids (always enough for trie_allowed); NULL until the first apply */
    int32_t        *eog;         /* the end-of-generation ids (trie_allowed in TRIE_STATE_FINISHED) */
    size_t          n_eog;
    trie_status     error;       /* TRIE_OK, or the first failure since init / reset (sticky) */
    char            error_msg[192];
} trie_llama_ctx;

/* The name is "trie"; its address (trie_sampler_name(), a static string of libtrie, the same in every translation
 * unit and shared object) is what identifies a stage. A per-translation-unit static, a weak symbol or a C++ inline
 * variable would not do: this header is all static functions, and weak / inline symbols are resolved per shared
 * object under -fvisibility=hidden, -Bsymbolic or RTLD_LOCAL (and do not exist in C on every compiler). */
static inline const char *trie_llama__name(const struct llama_sampler *smpl) {
    (void) smpl;
    return trie_sampler_name();
}

/* Records the first failure; later ones keep the first message. */
static inline void trie_llama__fail(trie_llama_ctx *c, trie_status st, const char *what, const char *detail) {
    if (c->error != TRIE_OK) return;
    c->error = st;
    snprintf(c->error_msg, sizeof c->error_msg, "trie sampler: %s: %s%s%s (state %u)", what,
             trie_status_str((int) st), detail && *detail ? ": " : "", detail ? detail : "", (unsigned) c->state);
}

static inline void trie_llama__accept(struct llama_sampler *smpl, llama_token token) {
    trie_llama_ctx *c = (trie_llama_ctx *) smpl->ctx;
    trie_state next;
    /* A token the automaton does not allow (one the caller forced, or one picked after a failure) leaves the
     * state unchanged and is recorded: the output is no longer guaranteed to be a member. */
    const trie_status st = trie_advance(c->automaton, c->state, token, &next);
    if (st == TRIE_OK) {
        c->state = next;
    } else {
        char detail[48];
        snprintf(detail, sizeof detail, "token %d", (int) token);
        trie_llama__fail(c, st, "accept", detail);
    }
}

/* Allocates the full-width scratch buffers (both or neither). Returns 0 when that fails. */
static inline int trie_llama__scratch(trie_llama_ctx *c) {
    if (c->allowed != NULL && c->mask != NULL) return 1;
    uint32_t *mask = (uint32_t *) TRIE_LLAMA_SCRATCH_MALLOC(((c->n_vocab + 31) / 32 + 1) * sizeof(uint32_t));
    int32_t *allowed = mask ? (int32_t *) TRIE_LLAMA_SCRATCH_MALLOC((c->n_vocab + 1) * sizeof(int32_t)) : NULL;
    if (allowed == NULL) {
        free(mask);
        return 0;
    }
    c->mask = mask;
    c->allowed = allowed;
    return 1;
}

static inline void trie_llama__apply(struct llama_sampler *smpl, llama_token_data_array *cur_p) {
    trie_llama_ctx *c = (trie_llama_ctx *) smpl->ctx;
    const int32_t *allowed = c->eog;
    size_t n_allowed = c->n_eog;

    /* Fail closed: when the scratch buffers cannot be allocated, libtrie fails or the state allows nothing, only
     * the end-of-generation ids stay (the model stops); with no EOG id at all every candidate gets logit -inf.
     * Either way the failure is recorded (trie_llama_sampler_error). In TRIE_STATE_FINISHED trie_allowed gives
     * the EOG ids. */
    if (!trie_llama__scratch(c)) {
        char detail[96];
        snprintf(detail, sizeof detail, "cannot allocate the scratch buffers for %zu ids", c->n_vocab);
        trie_llama__fail(c, TRIE_ERR_LIMIT_EXCEEDED, "apply", detail);
    } else {
        size_t n = 0;
        const trie_status st = trie_allowed(c->automaton, c->state, c->allowed, c->n_vocab, &n);
        if (st != TRIE_OK) {
            trie_llama__fail(c, st, "apply", trie_last_error());
        } else if (n == 0) {
            trie_llama__fail(c, TRIE_ERR_INVALID_STATE, "apply", "the state allows no token");
        } else {
            allowed = c->allowed;
            n_allowed = n;
        }
    }

    /* Fast path: the candidates are the whole vocabulary in id order (what llama_sampler_sample builds from
     * the logits). Verify data[t].id == t for every allowed t (O(allowed)), then compact the allowed entries
     * to the front in ascending id order (in place: the target index never exceeds the source index). */
    if (n_allowed > 0 && !cur_p->sorted && cur_p->size >= c->n_vocab && cur_p->size > 0
        && cur_p->data[0].id == 0 && cur_p->data[cur_p->size - 1].id == (llama_token) (cur_p->size - 1)) {
        int in_order = 1;
        for (size_t k = 0; k < n_allowed; ++k) {
            const int32_t t = allowed[k];
            if (t < 0 || (size_t) t >= cur_p->size || cur_p->data[t].id != t) { in_order = 0; break; }
        }
        if (in_order) {
            for (size_t k = 0; k < n_allowed; ++k) cur_p->data[k] = cur_p->data[allowed[k]];
            cur_p->size = n_allowed;
            cur_p->selected = -1;            /* indices changed; the selecting sampler sets it */
            return;
        }
    }

    /* General path: any order, any subset. Mask out (logit = -inf) every id not allowed. The mask is built from
     * the list, so this path cannot fail. Without scratch buffers (their allocation failed) the list is the EOG
     * ids: a few, looked up directly. */
    if (c->mask == NULL) {
        for (size_t i = 0; i < cur_p->size; ++i) {
            int ok = 0;
            for (size_t k = 0; k < n_allowed && !ok; ++k) ok = cur_p->data[i].id == allowed[k];
            if (!ok) cur_p->data[i].logit = -INFINITY;
        }
    } else {
        const size_t n_words = (c->n_vocab + 31) / 32;
        memset(c->mask, 0, n_words * sizeof(uint32_t));
        for (size_t k = 0; k < n_allowed; ++k) {
            const int32_t t = allowed[k];
            if (t >= 0 && (size_t) t < c->n_vocab) c->mask[(size_t) t >> 5] |= 1u << ((uint32_t) t & 31u);
        }
        for (size_t i = 0; i < cur_p->size; ++i) {
            const llama_token id = cur_p->data[i].id;
            const int ok = id >= 0 && (size_t) id < c->n_vocab
                           && ((c->mask[(size_t) id >> 5] >> ((uint32_t) id & 31u)) & 1u);
            if (!ok) cur_p->data[i].logit = -INFINITY;
        }
    }
}

static inline void trie_llama__reset(struct llama_sampler *smpl) {
    trie_llama_ctx *c = (trie_llama_ctx *) smpl->ctx;
    c->state = trie_start(c->automaton);
    c->error = TRIE_OK;
    c->error_msg[0] = '\0';
}

static inline struct llama_sampler *trie_llama_sampler_init(const trie_automaton *automaton);

/* A clone shares nothing mutable with its source and gets no scratch buffers (its first apply allocates them). */
static inline struct llama_sampler *trie_llama__clone(const struct llama_sampler *smpl) {
    const trie_llama_ctx *c = (const trie_llama_ctx *) smpl->ctx;
    struct llama_sampler *copy = trie_llama_sampler_init(c->automaton);
    if (copy != NULL) {
        trie_llama_ctx *d = (trie_llama_ctx *) copy->ctx;
        d->state = c->state;
        d->error = c->error;
        memcpy(d->error_msg, c->error_msg, sizeof d->error_msg);
    }
    return copy;
}

static inline void trie_llama__free(struct llama_sampler *smpl) {
    trie_llama_ctx *c = (trie_llama_ctx *) smpl->ctx;
    if (c == NULL) return;
    c->magic = 0;
    trie_automaton_free(c->automaton);
    free(c->mask);
    free(c->allowed);
    free(c->eog);
    free(c);
    smpl->ctx = NULL;
}

#ifdef __cplusplus
} /* extern "C" */

/* C++17 has no designated initializers: value-initialize (all members NULL, including any that newer llama.cpp
 * versions append) and assign. A function-local static is initialized once, thread-safely. */
static inline struct llama_sampler_i *trie_llama__iface(void) {
    struct make {
        static llama_sampler_i iface() {
            llama_sampler_i i{};
            i.name = trie_llama__name;
            i.accept = trie_llama__accept;
            i.apply = trie_llama__apply;
            i.reset = trie_llama__reset;
            i.clone = trie_llama__clone;
            i.free = trie_llama__free;
            return i;
        }
    };
    static llama_sampler_i iface = make::iface();
    return &iface;
}

extern "C" {
#else
/* C: designated initializers; members not named (the experimental backend interface) are NULL. */
static struct llama_sampler_i trie_llama__iface_storage = {
    .name = trie_llama__name,
    .accept = trie_llama__accept,
    .apply = trie_llama__apply,
    .reset = trie_llama__reset,
    .clone = trie_llama__clone,
    .free = trie_llama__free,
};
static inline struct llama_sampler_i *trie_llama__iface(void) { return &trie_llama__iface_storage; }
#endif

/*
 * Creates the sampler stage for `automaton`, in its start state. The sampler holds its own reference to the
 * automaton; the caller may free its reference right away. Returns NULL on a NULL automaton or allocation
 * failure. Free it with llama_sampler_free, or let a llama_sampler_chain own it. The full-width scratch buffers
 * are allocated by the first apply (see "Memory" above).
 */
static inline struct llama_sampler *trie_llama_sampler_init(const trie_automaton *automaton) {
    if (automaton == NULL) return NULL;
    trie_llama_ctx *c = (trie_llama_ctx *) calloc(1, sizeof(trie_llama_ctx));
    if (c == NULL) return NULL;
    c->n_vocab = trie_automaton_n_vocab(automaton);
    /* the EOG ids (trie_allowed in TRIE_STATE_FINISHED), what a failing apply falls back to: ask for their number
     * first (TRIE_ERR_BUFFER_TOO_SMALL with the count), so no full-width buffer is needed */
    size_t n_eog = 0;
    const trie_status st = trie_allowed(automaton, TRIE_STATE_FINISHED, NULL, 0, &n_eog);
    if (st != TRIE_OK && st != TRIE_ERR_BUFFER_TOO_SMALL) n_eog = 0;
    c->eog = (int32_t *) malloc((n_eog + 1) * sizeof(int32_t));
    if (c->eog == NULL) goto fail;
    if (n_eog > 0 && trie_allowed(automaton, TRIE_STATE_FINISHED, c->eog, n_eog, &c->n_eog) != TRIE_OK) c->n_eog = 0;
    c->automaton = trie_automaton_retain(automaton);
    if (c->automaton == NULL) goto fail;
    c->magic = TRIE_LLAMA_MAGIC;
    c->state = trie_start(c->automaton);
    c->error = TRIE_OK;
    return llama_sampler_init(trie_llama__iface(), c);
fail:
    free(c->mask); free(c->allowed); free(c->eog); free(c);
    return NULL;
}

/* True when `smpl` is a sampler made by trie_llama_sampler_init, in this or any other translation unit or shared
 * object using the same libtrie. Identity first: the name callback must return the pointer trie_sampler_name()
 * (not merely the text "trie", which any sampler may use, with any context or none); only then is the context
 * read, for its layout version (TRIE_LLAMA_MAGIC). A foreign sampler's context is never touched. */
static inline bool trie_llama_sampler_is_trie(const struct llama_sampler *smpl) {
    if (smpl == NULL || smpl->iface == NULL || smpl->iface->name == NULL) return false;
    if (smpl->iface->name(smpl) != trie_sampler_name()) return false;
    return smpl->ctx != NULL && ((const trie_llama_ctx *) smpl->ctx)->magic == TRIE_LLAMA_MAGIC;
}

/* The stage's current state (TRIE_STATE_FINISHED after an end-of-generation token). `smpl` must be a sampler
 * made by trie_llama_sampler_init (not the chain holding it: use llama_sampler_chain_get). */
static inline trie_state trie_llama_sampler_state(const struct llama_sampler *smpl) {
    return ((const trie_llama_ctx *) smpl->ctx)->state;
}

/*
 * TRIE_OK while the stage has kept every output on the automaton; else the first failure since init or the
 * last reset, with a message in `*message` (when `message` is not NULL; "" for TRIE_OK; valid until the next
 * call on the sampler):
 *   - apply: trie_allowed failed (e.g. TRIE_ERR_INVALID_STATE) or the state allows no token (reported as
 *     TRIE_ERR_INVALID_STATE). The stage failed closed: only the end-of-generation ids were left, or, with no
 *     EOG id, every logit was set to -inf (llama.cpp's selecting sampler still returns some token then, so
 *     such an output is not a member: check this after generating);
 *   - accept: a token the automaton rejects (TRIE_ERR_TOKEN_REJECTED; forced by the caller, or picked after a
 *     failure). The state stays as it was.
 * `smpl` must be a trie stage (trie_llama_sampler_is_trie); for anything else TRIE_ERR_INVALID_ARGUMENT.
 */
static inline trie_status trie_llama_sampler_error(const struct llama_sampler *smpl, const char **message) {
    if (!trie_llama_sampler_is_trie(smpl)) {
        if (message) *message = "not a trie sampler";
        return TRIE_ERR_INVALID_ARGUMENT;
    }
    const trie_llama_ctx *c = (const trie_llama_ctx *) smpl->ctx;
    if (message) *message = c->error_msg;
    return c->error;
}


/* ------------------------------------------------------------------------------------------------------------
 * Segment stage: a set inside an output, activated lazily by a trigger, handed over at the segment's end.
 *
 * For an automaton of trie_compile_template (a tool call's name, a JSON enum value inside prose, ...):
 *   - waiting: until the trigger appears in the generated text (a word such as "<tool_call>\n", or a token id such
 *     as a special <tool_call> token), apply() constrains nothing; the text after the trigger inside the token
 *     that completed it is fed to the automaton (it must be on a segment: else the stage fails closed);
 *   - in the set: apply() allows the automaton's tokens and, for an open automaton (TRIE_END_OPEN), the crossing
 *     tokens (trie_crossing) that finish the segment and go on past it, those that `offer` accepts (NULL: none
 *     are offered; hand-over then happens only at token boundaries; a function that returns true offers all of
 *     them). Named `offer`, not `keep`: trie_crossing's `keep` = NULL lists all. Fail closed as
 *     trie_llama_sampler_init;
 *   - handed over: once the segment is complete (or a crossing token finished it), `next(user, member,
 *     overflow, len)` builds the sampler for what follows member `member` (its input index): for a tool call,
 *     that tool's argument grammar, built only for the chosen tool (llama_sampler_init_grammar, cached by the
 *     caller). `overflow` holds the crossing token's bytes past the segment (len 0 at a token boundary): the
 *     returned sampler must already have accepted them (e.g. a grammar built for the rest after them, or one
 *     fed their tokenization). The stage owns it: apply/accept go to it, clone clones it, free frees it. NULL
 *     leaves the rest unconstrained.
 * With an automaton that ends with end-of-generation (TRIE_END_EOG) the stage ends like the plain stage.
 * ---------------------------------------------------------------------------------------------------------- */

typedef struct llama_sampler *(*trie_llama_next_fn)(void *user, size_t member, const uint8_t *overflow, size_t len);

struct trie_llama_segment_params {
    const char       *trigger;        /* NUL-terminated text; NULL or "": no word trigger */
    llama_token       trigger_token;  /* a token that triggers (e.g. a special <tool_call>); -1: none */
    trie_overflow_fn  offer;          /* which crossing tokens to offer (trie_crossing's filter); NULL: none */
    trie_llama_next_fn next;          /* builds the sampler of what follows a segment; NULL: unconstrained */
    void             *user;           /* passed to offer and next */
};

enum trie_llama_phase { TRIE_LLAMA_WAITING = 0, TRIE_LLAMA_IN_SET = 1, TRIE_LLAMA_HANDED_OVER = 2 };

#define TRIE_LLAMA_SEG_MAGIC UINT64_C(0x3167657365697274) /* "triesegv1" */

typedef struct trie_llama_seg {
    uint64_t        magic;
    trie_automaton *automaton;      /* own reference */
    trie_vocab     *vocab;          /* own reference: token bytes */
    struct trie_llama_segment_params p;
    char           *trigger;        /* own copy of p.trigger, or NULL */
    size_t          trigger_len;
    char           *tail;           /* while waiting: the last trigger_len - 1 bytes seen, then the new token's */
    size_t          tail_len, tail_cap;
    int             phase;
    trie_state      state;
    size_t          member;         /* the member handed over, SIZE_MAX before */
    struct llama_sampler *next;     /* own, or NULL */
    size_t          n_vocab;
    uint32_t       *mask;           /* scratch, allocated by the first apply in the set */
    int32_t        *ids;
    uint32_t       *over;
    size_t         *mems;
    trie_status     error;
    char            error_msg[192];
} trie_llama_seg;

static inline const char *trie_llama__seg_name(const struct llama_sampler *smpl) { (void) smpl; return "trie-segment"; }

static inline void trie_llama__seg_fail(trie_llama_seg *c, trie_status st, const char *what, const char *detail) {
    if (c->error != TRIE_OK) return;
    c->error = st;
    snprintf(c->error_msg, sizeof c->error_msg, "trie segment: %s: %s%s%s (state %u)", what,
             trie_status_str((int) st), detail && *detail ? ": " : "", detail ? detail : "", (unsigned) c->state);
}

/* Hands over after the segment of `member`, with `len` overflow bytes. */
static inline void trie_llama__seg_hand_over(trie_llama_seg *c, size_t member, const uint8_t *overflow, size_t len) {
    c->phase = TRIE_LLAMA_HANDED_OVER;
    c->member = member;
    c->next = c->p.next ? c->p.next(c->p.user, member, overflow, len) : NULL;
}

/* Feeds `len` bytes to the automaton with the longest allowed tokens that spell them (text after a trigger).
 * Returns 0 (and records why) when they leave every segment. */
static inline int trie_llama__seg_feed(trie_llama_seg *c, const uint8_t *bytes, size_t len) {
    while (len > 0) {
        size_t n = 0;
        if (trie_allowed(c->automaton, c->state, c->ids, c->n_vocab, &n) != TRIE_OK) {
            trie_llama__seg_fail(c, TRIE_ERR_INVALID_STATE, "trigger", trie_last_error());
            return 0;
        }
        int32_t best = -1;
        size_t best_len = 0;
        for (size_t k = 0; k < n; ++k) {
            const uint8_t *tb = NULL;
            size_t tl = 0;
            if (trie_vocab_token(c->vocab, c->ids[k], &tb, &tl) == TRIE_OK && tl > best_len && tl <= len
                && memcmp(tb, bytes, tl) == 0) {
                best = c->ids[k];
                best_len = tl;
            }
        }
        if (best < 0) {
            trie_llama__seg_fail(c, TRIE_ERR_TOKEN_REJECTED, "trigger", "the text after the trigger is on no segment");
            return 0;
        }
        trie_state next;
        if (trie_advance(c->automaton, c->state, best, &next) != TRIE_OK) {
            trie_llama__seg_fail(c, TRIE_ERR_TOKEN_REJECTED, "trigger", trie_last_error());
            return 0;
        }
        c->state = next;
        bytes += best_len;
        len -= best_len;
    }
    return 1;
}

static inline int trie_llama__seg_scratch(trie_llama_seg *c) {
    if (c->mask) return 1;
    c->mask = (uint32_t *) TRIE_LLAMA_SCRATCH_MALLOC(((c->n_vocab + 31) / 32 + 1) * sizeof(uint32_t));
    c->ids = (int32_t *) TRIE_LLAMA_SCRATCH_MALLOC((c->n_vocab + 1) * sizeof(int32_t));
    c->over = (uint32_t *) TRIE_LLAMA_SCRATCH_MALLOC((c->n_vocab + 1) * sizeof(uint32_t));
    c->mems = (size_t *) TRIE_LLAMA_SCRATCH_MALLOC((c->n_vocab + 1) * sizeof(size_t));
    if (!c->mask || !c->ids || !c->over || !c->mems) {
        free(c->mask); free(c->ids); free(c->over); free(c->mems);
        c->mask = NULL; c->ids = NULL; c->over = NULL; c->mems = NULL;
        return 0;
    }
    return 1;
}

static inline void trie_llama__seg_accept(struct llama_sampler *smpl, llama_token token) {
    trie_llama_seg *c = (trie_llama_seg *) smpl->ctx;
    if (c->phase == TRIE_LLAMA_HANDED_OVER) {
        if (c->next) llama_sampler_accept(c->next, token);
        return;
    }
    if (!trie_llama__seg_scratch(c)) {
        trie_llama__seg_fail(c, TRIE_ERR_LIMIT_EXCEEDED, "accept", "cannot allocate the scratch buffers");
        return;
    }
    const uint8_t *tb = NULL;
    size_t tl = 0;
    if (trie_vocab_token(c->vocab, token, &tb, &tl) != TRIE_OK) { tb = NULL; tl = 0; }
    if (c->phase == TRIE_LLAMA_WAITING) {
        if (c->p.trigger_token >= 0 && token == c->p.trigger_token) {
            c->phase = TRIE_LLAMA_IN_SET;
            c->tail_len = 0;
            return;
        }
        if (c->trigger_len == 0) return;
        if (c->tail_len + tl > c->tail_cap) {
            size_t cap = (c->tail_len + tl) * 2 + 16;
            char *t = (char *) realloc(c->tail, cap);
            if (!t) { trie_llama__seg_fail(c, TRIE_ERR_LIMIT_EXCEEDED, "accept", "trigger buffer"); return; }
            c->tail = t;
            c->tail_cap = cap;
        }
        memcpy(c->tail + c->tail_len, tb, tl);
        c->tail_len += tl;
        /* the first occurrence of the trigger that ends inside this token */
        for (size_t e = c->trigger_len; e <= c->tail_len; ++e) {
            if (memcmp(c->tail + e - c->trigger_len, c->trigger, c->trigger_len) == 0) {
                c->phase = TRIE_LLAMA_IN_SET;
                trie_llama__seg_feed(c, (const uint8_t *) c->tail + e, c->tail_len - e);
                c->tail_len = 0;
                return;
            }
        }
        const size_t keep_n = c->trigger_len - 1 < c->tail_len ? c->trigger_len - 1 : c->tail_len;
        memmove(c->tail, c->tail + c->tail_len - keep_n, keep_n);
        c->tail_len = keep_n;
        return;
    }
    /* in the set */
    trie_state next;
    trie_status st = trie_advance(c->automaton, c->state, token, &next);
    if (st == TRIE_OK) {
        c->state = next;
        size_t m = SIZE_MAX;
        if (trie_automaton_is_open(c->automaton) && trie_member(c->automaton, next, &m) == TRIE_OK && m != SIZE_MAX)
            trie_llama__seg_hand_over(c, m, NULL, 0);
        return;
    }
    size_t m = SIZE_MAX, overflow = 0;
    if (st == TRIE_ERR_TOKEN_REJECTED && trie_cross(c->automaton, c->state, token, &m, &overflow) == TRIE_OK) {
        trie_llama__seg_hand_over(c, m, tb + tl - overflow, overflow);
        return;
    }
    char detail[48];
    snprintf(detail, sizeof detail, "token %d", (int) token);
    trie_llama__seg_fail(c, st, "accept", detail);
}

static inline void trie_llama__seg_apply(struct llama_sampler *smpl, llama_token_data_array *cur_p) {
    trie_llama_seg *c = (trie_llama_seg *) smpl->ctx;
    if (c->phase == TRIE_LLAMA_WAITING) return;
    if (c->phase == TRIE_LLAMA_HANDED_OVER) {
        if (c->next) llama_sampler_apply(c->next, cur_p);
        return;
    }
    size_t n = 0, n_cross = 0;
    const size_t n_words = (c->n_vocab + 31) / 32;
    if (!trie_llama__seg_scratch(c)) {
        trie_llama__seg_fail(c, TRIE_ERR_LIMIT_EXCEEDED, "apply", "cannot allocate the scratch buffers");
        for (size_t i = 0; i < cur_p->size; ++i) cur_p->data[i].logit = -INFINITY;
        return;
    }
    memset(c->mask, 0, n_words * sizeof(uint32_t));
    trie_status st = trie_allowed(c->automaton, c->state, c->ids, c->n_vocab, &n);
    if (st != TRIE_OK) { trie_llama__seg_fail(c, st, "apply", trie_last_error()); n = 0; }
    for (size_t k = 0; k < n; ++k) c->mask[(size_t) c->ids[k] >> 5] |= 1u << ((uint32_t) c->ids[k] & 31u);
    if (st == TRIE_OK && c->p.offer && trie_automaton_is_open(c->automaton)) {
        st = trie_crossing(c->automaton, c->state, c->p.offer, c->p.user, c->ids, c->over, c->mems, c->n_vocab, &n_cross);
        if (st != TRIE_OK) { trie_llama__seg_fail(c, st, "apply", trie_last_error()); n_cross = 0; }
        for (size_t k = 0; k < n_cross; ++k) c->mask[(size_t) c->ids[k] >> 5] |= 1u << ((uint32_t) c->ids[k] & 31u);
    }
    if (n + n_cross == 0) trie_llama__seg_fail(c, TRIE_ERR_INVALID_STATE, "apply", "the state allows no token");
    for (size_t i = 0; i < cur_p->size; ++i) {
        const llama_token id = cur_p->data[i].id;
        const int ok = id >= 0 && (size_t) id < c->n_vocab && ((c->mask[(size_t) id >> 5] >> ((uint32_t) id & 31u)) & 1u);
        if (!ok) cur_p->data[i].logit = -INFINITY;
    }
}

static inline void trie_llama__seg_reset(struct llama_sampler *smpl) {
    trie_llama_seg *c = (trie_llama_seg *) smpl->ctx;
    if (c->next) llama_sampler_free(c->next);
    c->next = NULL;
    c->member = SIZE_MAX;
    c->phase = (c->trigger_len > 0 || c->p.trigger_token >= 0) ? TRIE_LLAMA_WAITING : TRIE_LLAMA_IN_SET;
    c->state = trie_start(c->automaton);
    c->tail_len = 0;
    c->error = TRIE_OK;
    c->error_msg[0] = '\0';
}

static inline struct llama_sampler *trie_llama_segment_init(const trie_automaton *automaton,
                                                            const struct trie_llama_segment_params *params);

static inline struct llama_sampler *trie_llama__seg_clone(const struct llama_sampler *smpl) {
    const trie_llama_seg *c = (const trie_llama_seg *) smpl->ctx;
    struct llama_sampler *copy = trie_llama_segment_init(c->automaton, &c->p);
    if (copy == NULL) return NULL;
    trie_llama_seg *d = (trie_llama_seg *) copy->ctx;
    if (c->tail_len > 0) {
        d->tail = (char *) malloc(c->tail_len);
        if (d->tail == NULL) { llama_sampler_free(copy); return NULL; }
        memcpy(d->tail, c->tail, c->tail_len);
        d->tail_len = d->tail_cap = c->tail_len;
    }
    d->phase = c->phase;
    d->state = c->state;
    d->member = c->member;
    d->next = c->next ? llama_sampler_clone(c->next) : NULL;
    d->error = c->error;
    memcpy(d->error_msg, c->error_msg, sizeof d->error_msg);
    return copy;
}

static inline void trie_llama__seg_free(struct llama_sampler *smpl) {
    trie_llama_seg *c = (trie_llama_seg *) smpl->ctx;
    if (c == NULL) return;
    c->magic = 0;
    if (c->next) llama_sampler_free(c->next);
    trie_automaton_free(c->automaton);
    trie_vocab_free(c->vocab);
    free(c->trigger); free(c->tail); free(c->mask); free(c->ids); free(c->over); free(c->mems);
    free(c);
    smpl->ctx = NULL;
}

#ifdef __cplusplus
} /* extern "C" */
static inline struct llama_sampler_i *trie_llama__seg_iface(void) {
    struct make {
        static llama_sampler_i iface() {
            llama_sampler_i i{};
            i.name = trie_llama__seg_name;
            i.accept = trie_llama__seg_accept;
            i.apply = trie_llama__seg_apply;
            i.reset = trie_llama__seg_reset;
            i.clone = trie_llama__seg_clone;
            i.free = trie_llama__seg_free;
            return i;
        }
    };
    static llama_sampler_i iface = make::iface();
    return &iface;
}
extern "C" {
#else
static struct llama_sampler_i trie_llama__seg_iface_storage = {
    .name = trie_llama__seg_name,
    .accept = trie_llama__seg_accept,
    .apply = trie_llama__seg_apply,
    .reset = trie_llama__seg_reset,
    .clone = trie_llama__seg_clone,
    .free = trie_llama__seg_free,
};
static inline struct llama_sampler_i *trie_llama__seg_iface(void) { return &trie_llama__seg_iface_storage; }
#endif

/*
 * Creates the segment stage for `automaton` (see above), waiting for its trigger (or in the set at once without
 * one). `params` is copied (the trigger text too); NULL means no trigger, no crossing tokens, nothing after.
 * Returns NULL on a NULL automaton or allocation failure.
 */
static inline struct llama_sampler *trie_llama_segment_init(const trie_automaton *automaton,
                                                            const struct trie_llama_segment_params *params) {
    if (automaton == NULL) return NULL;
    trie_llama_seg *c = (trie_llama_seg *) calloc(1, sizeof(trie_llama_seg));
    if (c == NULL) return NULL;
    if (params) c->p = *params; else c->p.trigger_token = -1;
    if (c->p.trigger && c->p.trigger[0]) {
        c->trigger_len = strlen(c->p.trigger);
        c->trigger = (char *) malloc(c->trigger_len + 1);
        if (c->trigger == NULL) { free(c); return NULL; }
        memcpy(c->trigger, c->p.trigger, c->trigger_len + 1);
        c->p.trigger = c->trigger;
    } else {
        c->p.trigger = NULL;
    }
    c->automaton = trie_automaton_retain(automaton);
    c->vocab = trie_automaton_vocab(automaton);
    c->n_vocab = trie_automaton_n_vocab(automaton);
    if (c->automaton == NULL || c->vocab == NULL) {
        trie_automaton_free(c->automaton); trie_vocab_free(c->vocab); free(c->trigger); free(c);
        return NULL;
    }
    c->magic = TRIE_LLAMA_SEG_MAGIC;
    struct llama_sampler *smpl = llama_sampler_init(trie_llama__seg_iface(), c);
    if (smpl == NULL) { trie_automaton_free(c->automaton); trie_vocab_free(c->vocab); free(c->trigger); free(c); return NULL; }
    trie_llama__seg_reset(smpl);
    return smpl;
}

/* The segment stage's phase (enum trie_llama_phase), the member it handed over (SIZE_MAX before), its automaton
 * state, and its first failure since init/reset (TRIE_OK, message "" while every output stayed on the set).
 * `smpl` must be made by trie_llama_segment_init. */
static inline int trie_llama_segment_phase(const struct llama_sampler *smpl) { return ((const trie_llama_seg *) smpl->ctx)->phase; }
static inline size_t trie_llama_segment_member(const struct llama_sampler *smpl) { return ((const trie_llama_seg *) smpl->ctx)->member; }
static inline trie_state trie_llama_segment_state(const struct llama_sampler *smpl) { return ((const trie_llama_seg *) smpl->ctx)->state; }
static inline trie_status trie_llama_segment_error(const struct llama_sampler *smpl, const char **message) {
    const trie_llama_seg *c = (const trie_llama_seg *) smpl->ctx;
    if (message) *message = c->error_msg;
    return c->error;
}

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TRIE_LLAMA_H */
