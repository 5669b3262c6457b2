/* trie-llama-selftest: checks include/trie_llama.h (compiled as C99) against a real llama.cpp vocabulary.
 *
 *   trie-llama-selftest MODEL.gguf        (only the vocabulary is loaded)
 *
 * Random walks through a small set (prefixes, multi-byte UTF-8) drive the sampler stage the way
 * llama_sampler_sample does, and compare its two apply paths: the full vocabulary in id order (compacted to the
 * allowed tokens) and shuffled or partial candidate arrays (masked with -inf), against trie_allowed. Also
 * checks accept of a rejected token, clone (state copied, independent), reset, and that each walk spells a
 * member. Regression checks: a stage made in another translation unit (trie_llama_selftest_tu2.cpp, C++) is
 * recognized by trie_llama_sampler_is_trie both ways; foreign samplers also named "trie" (NULL or 1-byte context)
 * are not, and their context is not read; the stage fails closed (an invalid state, a state that
 * allows no token, the finished state, a failed allocation of the scratch buffers: no token outside the
 * automaton keeps a finite logit or its place, and the failure is reported by trie_llama_sampler_error); the
 * scratch buffers are allocated by the first apply, not by init or clone. Exit status 0 when every check passes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The stage's scratch allocations go through here, so a test can make them fail (fail_scratch). */
static int fail_scratch = 0;
static size_t n_scratch_allocs = 0;
static void *selftest_scratch_malloc(size_t bytes) {
    n_scratch_allocs++;
    return fail_scratch ? NULL : malloc(bytes);
}
#define TRIE_LLAMA_SCRATCH_MALLOC(bytes) selftest_scratch_malloc(bytes)

#include "llama.h"
#include "trie.h"
#include "trie_llama.h"

static int n_checks = 0, n_failed = 0;
#define CHECK(cond, ...)                                                     \
    do {                                                                     \
        n_checks++;                                                          \
        if (!(cond)) {                                                       \
            n_failed++;                                                      \
            fprintf(stderr, "selftest: FAILED %s:%d: ", __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                                    \
            fputc('\n', stderr);                                             \
        }                                                                    \
    } while (0)

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (uint32_t) (rng >> 16);
}

static void quiet_log(enum ggml_log_level level, const char *text, void *ud) {
    (void) ud;
    if (level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

static const char *MEMBERS[] = {
    "github.create_issue", "github.create_issue_comment", "github.close_issue", "slack.send_message",
    "東京", "東京都", "München", "Córdoba", "Москва", "서울", "a", "ab",
};
#define N_MEMBERS (sizeof MEMBERS / sizeof MEMBERS[0])

static int is_member(const char *s, size_t n) {
    for (size_t i = 0; i < N_MEMBERS; ++i)
        if (strlen(MEMBERS[i]) == n && memcmp(MEMBERS[i], s, n) == 0) return 1;
    return 0;
}

/* trie_llama_selftest_tu2.cpp */
struct llama_sampler *selftest_tu2_sampler_init(const trie_automaton *automaton);
bool selftest_tu2_is_trie(const struct llama_sampler *smpl);
struct llama_sampler *selftest_tu2_foreign_init(void *ctx);   /* a foreign sampler named "trie" (C++) */

/* A foreign sampler named "trie", made here (C): ctx NULL or a malloc'ed block (freed with the sampler). */
static const char *foreign_name(const struct llama_sampler *smpl) { (void) smpl; return "trie"; }
static void foreign_free(struct llama_sampler *smpl) { free(smpl->ctx); }
static struct llama_sampler_i foreign_iface = { .name = foreign_name, .free = foreign_free };

/* Samplers named "trie" that are not libtrie's: NULL context, a 1-byte context (reading the 8-byte magic there
 * would be out of bounds: AddressSanitizer catches it), and a context full of the magic's bytes. is_trie and
 * trie_llama_sampler_error must say no in both translation units, without touching the context. */
static void test_foreign_trie_named(void) {
    struct llama_sampler *f[5];
    unsigned char *one = (unsigned char *) malloc(1), *one2 = (unsigned char *) malloc(1);
    trie_llama_ctx *fake = (trie_llama_ctx *) calloc(1, sizeof(trie_llama_ctx));
    if (one) *one = 0x72;
    if (one2) *one2 = 0x72;
    if (fake) fake->magic = TRIE_LLAMA_MAGIC;           /* looks like a stage's context; the name says no */
    f[0] = llama_sampler_init(&foreign_iface, NULL);
    f[1] = llama_sampler_init(&foreign_iface, one);
    f[2] = llama_sampler_init(&foreign_iface, fake);
    f[3] = selftest_tu2_foreign_init(NULL);
    f[4] = selftest_tu2_foreign_init(one2);
    for (int i = 0; i < 5; ++i) {
        CHECK(f[i] != NULL && strcmp(llama_sampler_name(f[i]), "trie") == 0, "foreign sampler %d is named trie", i);
        CHECK(!trie_llama_sampler_is_trie(f[i]), "foreign sampler %d named trie is not a trie stage", i);
        CHECK(!selftest_tu2_is_trie(f[i]), "foreign sampler %d named trie is not a trie stage (other TU)", i);
        const char *msg = NULL;
        CHECK(trie_llama_sampler_error(f[i], &msg) == TRIE_ERR_INVALID_ARGUMENT, "error() of foreign sampler %d", i);
        llama_sampler_free(f[i]);
    }
}

/* The stage's state, set from outside (what a corrupted or foreign state looks like to apply). */
static void poke_state(struct llama_sampler *smpl, trie_state s) { ((trie_llama_ctx *) smpl->ctx)->state = s; }

/* Error reporting exists since the fail-closed header; the behavioural checks below also run on older ones. */
#ifdef TRIE_LLAMA_MAGIC
#define CHECK_ERROR(smpl, want, what)                                                                  \
    do {                                                                                               \
        const char *msg_ = NULL;                                                                       \
        const trie_status got_ = trie_llama_sampler_error((smpl), &msg_);                              \
        CHECK(got_ == (want), "%s: trie_llama_sampler_error %s, want %s (%s)", (what),                 \
              trie_status_str(got_), trie_status_str(want), msg_ ? msg_ : "");                         \
        CHECK(msg_ != NULL && (got_ == TRIE_OK) == (msg_[0] == '\0'), "%s: message '%s'", (what),      \
              msg_ ? msg_ : "(null)");                                                                 \
    } while (0)
#else
#define CHECK_ERROR(smpl, want, what) ((void) (smpl))
#endif

/* Applies `smpl` to the full vocabulary in id order and to a reversed copy; every surviving candidate (kept
 * entry / finite logit) must satisfy `ok`. Returns the number kept on the full array. */
static size_t apply_and_check(struct llama_sampler *smpl, int32_t n_vocab, int (*ok)(const struct llama_vocab *, llama_token),
                              const struct llama_vocab *vocab, const char *what) {
    llama_token_data *d = (llama_token_data *) malloc(sizeof(llama_token_data) * (size_t) n_vocab);
    for (int32_t i = 0; i < n_vocab; ++i) { d[i].id = i; d[i].logit = 1.0f; d[i].p = 0.0f; }
    llama_token_data_array cur = { d, (size_t) n_vocab, -1, false };
    llama_sampler_apply(smpl, &cur);
    size_t kept = 0, bad = 0;
    for (size_t i = 0; i < cur.size; ++i) {
        if (!isfinite(cur.data[i].logit)) continue;
        kept++;
        if (ok && !ok(vocab, cur.data[i].id)) bad++;
    }
    CHECK(bad == 0, "%s (id order): %zu candidates not allowed survive (size %zu of %d)", what, bad, cur.size, n_vocab);
    for (int32_t i = 0; i < n_vocab; ++i) { d[i].id = n_vocab - 1 - i; d[i].logit = 1.0f; d[i].p = 0.0f; }
    llama_token_data_array rev = { d, (size_t) n_vocab, -1, false };
    llama_sampler_apply(smpl, &rev);
    bad = 0;
    for (size_t i = 0; i < rev.size; ++i) {
        if (isfinite(rev.data[i].logit) && ok && !ok(vocab, rev.data[i].id)) bad++;
    }
    CHECK(bad == 0, "%s (reversed): %zu candidates not allowed keep a finite logit", what, bad);
    free(d);
    return kept;
}

static int only_eog(const struct llama_vocab *vocab, llama_token t) { return llama_vocab_is_eog(vocab, t); }
static int nothing(const struct llama_vocab *vocab, llama_token t) { (void) vocab; (void) t; return 0; }

/* Fail-closed checks on the model's vocabulary (automaton `a`). */
static void test_fail_closed(const trie_automaton *a, const struct llama_vocab *vocab, int32_t n_vocab) {
    struct llama_sampler *s = trie_llama_sampler_init(a);
    CHECK_ERROR(s, TRIE_OK, "fresh stage");

    /* an invalid state: trie_allowed fails -> only end-of-generation ids are left */
    poke_state(s, (trie_state) trie_automaton_n_states(a) + 7);
    size_t kept = apply_and_check(s, n_vocab, only_eog, vocab, "invalid state");
    CHECK(kept >= 1, "invalid state: the EOG ids stay (kept %zu)", kept);
    CHECK_ERROR(s, TRIE_ERR_INVALID_STATE, "invalid state");
    llama_sampler_reset(s);
    CHECK_ERROR(s, TRIE_OK, "after reset");

    /* the finished state (after EOG): only EOG ids, no error */
    poke_state(s, TRIE_STATE_FINISHED);
    kept = apply_and_check(s, n_vocab, only_eog, vocab, "finished state");
    CHECK(kept >= 1, "finished state: the EOG ids stay (kept %zu)", kept);
    CHECK_ERROR(s, TRIE_OK, "finished state");
    llama_sampler_free(s);
}

/* A vocabulary without any end-of-generation id: after the whole member "ab" the state allows nothing. */
static void test_empty_state(void) {
    const uint8_t *tok[3] = { (const uint8_t *) "a", (const uint8_t *) "b", (const uint8_t *) "c" };
    const size_t tok_len[3] = { 1, 1, 1 };
    trie_vocab *tv = NULL;
    trie_status st = trie_vocab_new(tok, tok_len, NULL, 3, NULL, 0, &tv);
    CHECK(st == TRIE_OK, "trie_vocab_new: %s", trie_last_error());
    const uint8_t *members[1] = { (const uint8_t *) "ab" };
    const size_t member_len[1] = { 2 };
    trie_automaton *a = NULL;
    st = trie_compile(tv, members, member_len, 1, NULL, &a);
    trie_vocab_free(tv);
    CHECK(st == TRIE_OK, "trie_compile: %s", trie_last_error());
    if (st != TRIE_OK) return;
    struct llama_sampler *s = trie_llama_sampler_init(a);
    trie_automaton_free(a);
    llama_sampler_accept(s, 0);                          /* "a" */
    llama_sampler_accept(s, 1);                          /* "b": a whole member, no EOG to end it */
    CHECK_ERROR(s, TRIE_OK, "walk to the leaf");
    size_t kept = apply_and_check(s, 3, nothing, NULL, "state allowing nothing");
    CHECK(kept == 0, "state allowing nothing: %zu candidates keep a finite logit", kept);
    CHECK_ERROR(s, TRIE_ERR_INVALID_STATE, "state allowing nothing");
    /* no EOG id and the scratch allocation fails: every logit -inf, TRIE_ERR_LIMIT_EXCEEDED */
    struct llama_sampler *s2 = llama_sampler_clone(s);
    llama_sampler_reset(s2);                             /* the start state: "a" would be allowed */
    fail_scratch = 1;
    kept = apply_and_check(s2, 3, nothing, NULL, "no EOG, scratch allocation failed");
    fail_scratch = 0;
    CHECK(kept == 0, "no EOG, scratch allocation failed: %zu candidates keep a finite logit", kept);
    CHECK_ERROR(s2, TRIE_ERR_LIMIT_EXCEEDED, "no EOG, scratch allocation failed");
    llama_sampler_free(s2);
    llama_sampler_free(s);
}

/* The scratch buffers: none after init or clone, allocated by the first apply. A failed allocation fails closed
 * (EOG ids only on both apply paths, TRIE_ERR_LIMIT_EXCEEDED reported) and the next apply after it tries again. */
static void test_lazy_scratch(const trie_automaton *a, const struct llama_vocab *vocab, int32_t n_vocab) {
    struct llama_sampler *s = trie_llama_sampler_init(a);
    const trie_llama_ctx *c = (const trie_llama_ctx *) s->ctx;
    CHECK(c->allowed == NULL && c->mask == NULL, "init allocates no scratch buffer");
    CHECK(c->n_eog >= 1, "init knows the EOG ids (%zu)", c->n_eog);
    size_t n_eog_vocab = 0;
    for (int32_t t = 0; t < n_vocab; ++t) n_eog_vocab += llama_vocab_is_eog(vocab, t) ? 1 : 0;
    CHECK(c->n_eog == n_eog_vocab, "EOG ids at init: %zu, vocabulary: %zu", c->n_eog, n_eog_vocab);

    /* allocation failure at the first apply */
    fail_scratch = 1;
    const size_t allocs_before = n_scratch_allocs;
    size_t kept = apply_and_check(s, n_vocab, only_eog, vocab, "scratch allocation failed");
    CHECK(n_scratch_allocs > allocs_before, "apply tried to allocate the scratch buffers");
    CHECK(kept >= 1 && kept == c->n_eog, "scratch allocation failed: the EOG ids stay (kept %zu)", kept);
    CHECK(c->allowed == NULL && c->mask == NULL, "no scratch buffer after the failure");
    CHECK_ERROR(s, TRIE_ERR_LIMIT_EXCEEDED, "scratch allocation failed");
    {   /* (the start state allows member tokens and no EOG id: only EOG survived above) a clone of the failed
         * stage: no scratch buffers, the error copied */
        struct llama_sampler *cl = llama_sampler_clone(s);
        CHECK(cl != NULL && ((const trie_llama_ctx *) cl->ctx)->allowed == NULL, "clone without scratch buffers");
        CHECK_ERROR(cl, TRIE_ERR_LIMIT_EXCEEDED, "the clone keeps the error");
        llama_sampler_free(cl);
    }
    fail_scratch = 0;
    llama_sampler_reset(s);
    CHECK_ERROR(s, TRIE_OK, "after reset");

    /* the next apply allocates them and works: the start state's allowed list */
    size_t n_allowed = 0;
    trie_allowed(a, trie_llama_sampler_state(s), NULL, 0, &n_allowed);
    kept = apply_and_check(s, n_vocab, NULL, vocab, "first apply after a failed allocation");
    CHECK(kept == n_allowed, "apply after a failed allocation keeps the allowed tokens (%zu vs %zu)", kept, n_allowed);
    CHECK(c->allowed != NULL && c->mask != NULL, "apply allocated the scratch buffers");
    CHECK_ERROR(s, TRIE_OK, "apply after a failed allocation");

    /* a clone gets no scratch buffers (not copied), and allocates its own on its first apply */
    struct llama_sampler *cl = llama_sampler_clone(s);
    const trie_llama_ctx *cc = (const trie_llama_ctx *) cl->ctx;
    CHECK(cc->allowed == NULL && cc->mask == NULL, "clone allocates no scratch buffer");
    CHECK(cc->n_eog == c->n_eog && memcmp(cc->eog, c->eog, c->n_eog * sizeof(int32_t)) == 0, "clone: same EOG ids");
    kept = apply_and_check(cl, n_vocab, NULL, vocab, "clone's first apply");
    CHECK(kept == n_allowed, "clone's first apply keeps the allowed tokens (%zu vs %zu)", kept, n_allowed);
    CHECK(cc->allowed != NULL && cc->mask != NULL && cc->allowed != c->allowed, "clone has its own buffers");
    llama_sampler_free(cl);
    llama_sampler_free(s);
}

static int cmp_id(const void *a, const void *b) {
    const llama_token x = *(const llama_token *) a, y = *(const llama_token *) b;
    return (x > y) - (x < y);
}


/* ---- the segment stage: a tool-call name inside a template, triggered by a word, handed over at its end ---- */

static size_t handed_member = SIZE_MAX, handed_len = 0, recorder_accepts = 0, recorder_applies = 0;
static uint8_t handed_overflow[256];

static const char *recorder_name(const struct llama_sampler *smpl) { (void) smpl; return "recorder"; }
static void recorder_accept(struct llama_sampler *smpl, llama_token t) { (void) smpl; (void) t; recorder_accepts++; }
static void recorder_apply(struct llama_sampler *smpl, llama_token_data_array *cur) { (void) smpl; (void) cur; recorder_applies++; }
static struct llama_sampler *recorder_clone(const struct llama_sampler *smpl);
static struct llama_sampler_i recorder_iface = { .name = recorder_name, .accept = recorder_accept,
                                                 .apply = recorder_apply, .clone = recorder_clone };
static struct llama_sampler *recorder_clone(const struct llama_sampler *smpl) {
    (void) smpl;
    return llama_sampler_init(&recorder_iface, NULL);
}

static struct llama_sampler *next_after(void *user, size_t member, const uint8_t *overflow, size_t len) {
    (*(int *) user)++;
    handed_member = member;
    handed_len = len < sizeof handed_overflow ? len : sizeof handed_overflow;
    if (len) memcpy(handed_overflow, overflow, handed_len);
    return llama_sampler_init(&recorder_iface, NULL);
}

static bool arguments_begin(void *user, size_t member, const uint8_t *overflow, size_t len) {
    (void) user; (void) member;
    return len >= 1 && overflow[0] == '{';
}

static void test_segment(const struct llama_vocab *vocab, int32_t n_vocab) {
    trie_vocab *tv = NULL;
    CHECK(trie_llama_vocab(vocab, &tv) == TRIE_OK, "segment: vocab");
    const uint8_t *ptrs[N_MEMBERS];
    size_t lens[N_MEMBERS];
    for (size_t i = 0; i < N_MEMBERS; ++i) { ptrs[i] = (const uint8_t *) MEMBERS[i]; lens[i] = strlen(MEMBERS[i]); }
    const char *prefix = "{\"name\": ", *suffix = ", \"arguments\": ";
    trie_template t;
    trie_template_init(&t);
    t.prefix = (const uint8_t *) prefix; t.prefix_len = strlen(prefix);
    t.suffix = (const uint8_t *) suffix; t.suffix_len = strlen(suffix);
    t.render = TRIE_RENDER_JSON_STRING;
    t.end = TRIE_END_OPEN;
    trie_automaton *a = NULL;
    trie_status st = trie_compile_template(tv, ptrs, lens, N_MEMBERS, &t, NULL, &a);
    trie_vocab_free(tv);
    CHECK(st == TRIE_OK, "segment: compile_template: %s", trie_last_error());
    if (st != TRIE_OK) return;
    trie_vocab *av = trie_automaton_vocab(a); /* a reference for token bytes, freed at the end */
    int n_next = 0;
    struct trie_llama_segment_params p = { "<call>", -1, arguments_begin, next_after, &n_next };
    struct llama_sampler *smpl = trie_llama_segment_init(a, &p);
    CHECK(smpl != NULL && trie_llama_segment_phase(smpl) == TRIE_LLAMA_WAITING, "segment: init waits");
    llama_token_data *d = (llama_token_data *) malloc(sizeof(llama_token_data) * (size_t) n_vocab);
    llama_token toks[64];
    int n_crossed = 0;
    for (int walk = 0; walk < 40; ++walk) {
        llama_sampler_reset(smpl);
        handed_member = SIZE_MAX;
        const char *lead = walk % 2 ? "Sure. <call>" : "<call>";
        const int nt = llama_tokenize(vocab, lead, (int32_t) strlen(lead), toks, 64, false, false);
        CHECK(nt > 0, "segment: tokenize");
        for (int i = 0; i < nt; ++i) {
            CHECK(trie_llama_segment_phase(smpl) == TRIE_LLAMA_WAITING, "segment: waits before the trigger");
            for (int32_t k = 0; k < n_vocab; ++k) { d[k].id = k; d[k].logit = 0.0f; d[k].p = 0.0f; }
            llama_token_data_array cur = { d, (size_t) n_vocab, -1, false };
            llama_sampler_apply(smpl, &cur);
            size_t finite = 0;
            for (size_t k = 0; k < cur.size; ++k) finite += isfinite(cur.data[k].logit) ? 1 : 0;
            CHECK(finite == (size_t) n_vocab, "segment: waiting constrains nothing (%zu of %d)", finite, n_vocab);
            llama_sampler_accept(smpl, toks[i]);
        }
        CHECK(trie_llama_segment_phase(smpl) == TRIE_LLAMA_IN_SET, "segment: the trigger starts the set");
        char text[512];
        size_t tlen = 0;
        for (int step = 0; step < 200 && trie_llama_segment_phase(smpl) == TRIE_LLAMA_IN_SET; ++step) {
            for (int32_t k = 0; k < n_vocab; ++k) { d[k].id = k; d[k].logit = 0.0f; d[k].p = 0.0f; }
            llama_token_data_array cur = { d, (size_t) n_vocab, -1, false };
            llama_sampler_apply(smpl, &cur);
            llama_token pick[4096];
            size_t n_pick = 0, n_cross_here = 0;
            const trie_state s = trie_llama_segment_state(smpl);
            for (size_t k = 0; k < cur.size && n_pick < 4096; ++k) {
                if (!isfinite(cur.data[k].logit)) continue;
                trie_state nx;
                size_t m, o;
                const llama_token id = cur.data[k].id;
                const int in_set = trie_advance(a, s, id, &nx) == TRIE_OK;
                const int crosses = !in_set && trie_cross(a, s, id, &m, &o) == TRIE_OK;
                CHECK(in_set || crosses, "segment: candidate %d is neither allowed nor crossing", (int) id);
                n_cross_here += crosses;
                pick[n_pick++] = id;
            }
            CHECK(n_pick > 0, "segment: no candidate in the set");
            if (n_pick == 0) break;
            /* Prefer a crossing token now and then, so the hand-over with overflow is exercised. */
            llama_token chosen = pick[rnd() % n_pick];
            if (n_cross_here && rnd() % 2) {
                for (size_t k = 0; k < n_pick; ++k) {
                    size_t m, o;
                    if (trie_cross(a, s, pick[k], &m, &o) == TRIE_OK) { chosen = pick[k]; break; }
                }
            }
            const uint8_t *b = NULL;
            size_t bl = 0;
            trie_vocab_token(av, chosen, &b, &bl);
            if (tlen + bl < sizeof text) { memcpy(text + tlen, b, bl); tlen += bl; }
            llama_sampler_accept(smpl, chosen);
        }
        CHECK(trie_llama_segment_phase(smpl) == TRIE_LLAMA_HANDED_OVER, "segment: handed over (walk %d)", walk);
        const size_t m = trie_llama_segment_member(smpl);
        CHECK(m < N_MEMBERS && m == handed_member, "segment: member %zu / %zu", m, handed_member);
        if (m >= N_MEMBERS) continue;
        /* the text is the member's segment, then the overflow handed to the next sampler */
        char want[512];
        size_t wl = (size_t) snprintf(want, sizeof want, "%s\"%s\"%s", prefix, MEMBERS[m], suffix);
        CHECK(tlen == wl + handed_len && memcmp(text, want, wl) == 0 && memcmp(text + wl, handed_overflow, handed_len) == 0,
              "segment: text '%.*s' is the segment of %s + %zu overflow bytes", (int) tlen, text, MEMBERS[m], handed_len);
        CHECK(handed_len == 0 || handed_overflow[0] == '{', "segment: overflow begins the arguments");
        n_crossed += handed_len > 0;
        /* after the hand-over, apply and accept go to the next sampler; a clone clones it */
        const size_t applies = recorder_applies, accepts = recorder_accepts;
        for (int32_t k = 0; k < n_vocab; ++k) { d[k].id = k; d[k].logit = 0.0f; d[k].p = 0.0f; }
        llama_token_data_array cur = { d, (size_t) n_vocab, -1, false };
        llama_sampler_apply(smpl, &cur);
        llama_sampler_accept(smpl, 0);
        CHECK(recorder_applies == applies + 1 && recorder_accepts == accepts + 1, "segment: delegated to next");
        struct llama_sampler *copy = llama_sampler_clone(smpl);
        CHECK(copy && trie_llama_segment_phase(copy) == TRIE_LLAMA_HANDED_OVER && trie_llama_segment_member(copy) == m,
              "segment: clone keeps the hand-over");
        llama_sampler_free(copy);
        const char *msg = NULL;
        CHECK(trie_llama_segment_error(smpl, &msg) == TRIE_OK, "segment: no failure (%s)", msg ? msg : "");
    }
    CHECK(n_next == 40, "segment: next called once per walk (%d)", n_next);
    printf("segment stage: 40 walks handed over, %d of them by a token crossing into the arguments\n", n_crossed);
    /* text after the trigger inside the trigger's token is fed to the automaton */
    llama_sampler_reset(smpl);
    const char *lead = "<call>{\"name\": \"git";
    const int nt = llama_tokenize(vocab, lead, (int32_t) strlen(lead), toks, 64, false, false);
    for (int i = 0; i < nt; ++i) llama_sampler_accept(smpl, toks[i]);
    CHECK(trie_llama_segment_phase(smpl) == TRIE_LLAMA_IN_SET, "segment: in the set after trigger + text");
    const char *msg = NULL;
    CHECK(trie_llama_segment_error(smpl, &msg) == TRIE_OK, "segment: text after the trigger (%s)", msg ? msg : "");
    size_t pm = 0;
    trie_possible_members(a, trie_llama_segment_state(smpl), NULL, 0, &pm);
    CHECK(pm == 3, "segment: 3 github.* members possible after '\"git' (%zu)", pm);
    /* text after the trigger that is on no segment: fail closed, recorded */
    llama_sampler_reset(smpl);
    const char *off = "<call>[oops";
    const int no = llama_tokenize(vocab, off, (int32_t) strlen(off), toks, 64, false, false);
    for (int i = 0; i < no; ++i) llama_sampler_accept(smpl, toks[i]);
    CHECK(trie_llama_segment_error(smpl, &msg) != TRIE_OK, "segment: off-set text after the trigger is a failure");
    llama_sampler_free(smpl);
    trie_vocab_free(av);
    trie_automaton_free(a);
    free(d);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s MODEL.gguf\n", argv[0]);
        return 2;
    }
    llama_log_set(quiet_log, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    struct llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) { fprintf(stderr, "cannot load %s\n", argv[1]); return 2; }
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    const int32_t n_vocab = llama_vocab_n_tokens(vocab);

    trie_vocab *tv = NULL;
    trie_status st = trie_llama_vocab(vocab, &tv);
    CHECK(st == TRIE_OK, "trie_llama_vocab: %s %s", trie_status_str(st), trie_last_error());
    if (st != TRIE_OK) return 1;
    CHECK(trie_vocab_n_tokens(tv) == (size_t) n_vocab, "vocab size %zu vs %d", trie_vocab_n_tokens(tv), n_vocab);

    const uint8_t *ptrs[N_MEMBERS];
    size_t lens[N_MEMBERS];
    for (size_t i = 0; i < N_MEMBERS; ++i) { ptrs[i] = (const uint8_t *) MEMBERS[i]; lens[i] = strlen(MEMBERS[i]); }
    trie_automaton *a = NULL;
    st = trie_compile(tv, ptrs, lens, N_MEMBERS, NULL, &a);
    trie_vocab_free(tv);
    CHECK(st == TRIE_OK, "trie_compile: %s %s", trie_status_str(st), trie_last_error());
    if (st != TRIE_OK) return 1;

    struct llama_sampler *smpl = trie_llama_sampler_init(a);
    trie_automaton_free(a);                       /* the sampler keeps its own reference */
    CHECK(smpl != NULL, "trie_llama_sampler_init");
    CHECK(trie_llama_sampler_is_trie(smpl), "is_trie");
    {   /* is_trie across translation units (the other one is C++), and for other samplers */
        struct llama_sampler *other = selftest_tu2_sampler_init(a);
        CHECK(other != NULL, "stage made in the other translation unit");
        CHECK(trie_llama_sampler_is_trie(other), "is_trie of a stage made in another translation unit");
        CHECK(selftest_tu2_is_trie(smpl), "is_trie, in another translation unit, of a stage made here");
        CHECK(selftest_tu2_is_trie(other), "is_trie of its own stage in the other translation unit");
        struct llama_sampler *greedy = llama_sampler_init_greedy();
        CHECK(!trie_llama_sampler_is_trie(greedy) && !selftest_tu2_is_trie(greedy), "greedy is not a trie stage");
        CHECK(!trie_llama_sampler_is_trie(NULL), "NULL is not a trie stage");
        struct llama_sampler *chain = llama_sampler_chain_init(llama_sampler_chain_default_params());
        llama_sampler_chain_add(chain, other);
        CHECK(!trie_llama_sampler_is_trie(chain), "a chain is not a trie stage");
        CHECK(trie_llama_sampler_is_trie(llama_sampler_chain_get(chain, 0)), "chain member 0 is");
        llama_sampler_free(chain);
        llama_sampler_free(greedy);
    }
    CHECK(strcmp(llama_sampler_name(smpl), "trie") == 0, "name");
    CHECK(llama_sampler_name(smpl) == trie_sampler_name(), "the name is libtrie's trie_sampler_name()");
    test_foreign_trie_named();
    test_segment(vocab, n_vocab);
    const trie_state start = trie_llama_sampler_state(smpl);

    llama_token_data *full = (llama_token_data *) malloc(sizeof(llama_token_data) * (size_t) n_vocab);
    llama_token_data *shuf = (llama_token_data *) malloc(sizeof(llama_token_data) * (size_t) n_vocab);
    llama_token *ids = (llama_token *) malloc(sizeof(llama_token) * (size_t) n_vocab);
    int32_t *allowed = (int32_t *) malloc(sizeof(int32_t) * (size_t) n_vocab);
    int n_walks = 0, n_members_hit = 0;

    for (int walk = 0; walk < 200; ++walk) {
        llama_sampler_reset(smpl);
        CHECK(trie_llama_sampler_state(smpl) == start, "reset goes back to the start state");
        CHECK_ERROR(smpl, TRIE_OK, "after reset");
        char out[256];
        size_t out_len = 0;
        struct llama_sampler *cloned = NULL;
        trie_state clone_expected = 0;
        for (int step = 0; step < 64; ++step) {
            /* fast path: the full vocabulary in id order */
            for (int32_t i = 0; i < n_vocab; ++i) {
                full[i].id = i; full[i].logit = (float) (rnd() % 1000) / 100.0f; full[i].p = 0.0f;
            }
            llama_token_data_array cur = { full, (size_t) n_vocab, -1, false };
            llama_sampler_apply(smpl, &cur);
            const size_t n_kept = cur.size;
            for (size_t k = 0; k < n_kept; ++k) ids[k] = cur.data[k].id;

            size_t n_allowed = 0;
            st = trie_allowed(a, trie_llama_sampler_state(smpl), allowed, (size_t) n_vocab, &n_allowed);
            CHECK(st == TRIE_OK && n_allowed > 0, "trie_allowed");
            CHECK(n_kept == n_allowed && memcmp(ids, allowed, n_kept * sizeof(llama_token)) == 0,
                  "compacted candidates == allowed list (%zu vs %zu)", n_kept, n_allowed);
            CHECK(cur.selected == -1, "selected reset");

            /* general path: shuffled full vocabulary, then a partial array */
            for (int32_t i = 0; i < n_vocab; ++i) { shuf[i].id = i; shuf[i].logit = 1.0f; shuf[i].p = 0.0f; }
            for (int32_t i = n_vocab - 1; i > 0; --i) {
                int32_t j = (int32_t) (rnd() % (uint32_t) (i + 1));
                llama_token_data t = shuf[i]; shuf[i] = shuf[j]; shuf[j] = t;
            }
            size_t sizes[2] = { (size_t) n_vocab, (size_t) (n_vocab / 2) };
            for (int v = 0; v < 2; ++v) {
                for (int32_t i = 0; i < n_vocab; ++i) shuf[i].logit = 1.0f;
                llama_token_data_array c2 = { shuf, sizes[v], -1, false };
                llama_sampler_apply(smpl, &c2);
                CHECK(c2.size == sizes[v], "mask path keeps the size");
                size_t n_fin = 0;
                for (size_t i = 0; i < c2.size; ++i) {
                    if (isfinite(c2.data[i].logit)) ids[n_fin++] = c2.data[i].id;
                }
                qsort(ids, n_fin, sizeof(llama_token), cmp_id);
                size_t n_expect = 0;
                for (size_t k = 0; k < n_allowed; ++k) {
                    for (size_t i = 0; i < c2.size; ++i) if (c2.data[i].id == allowed[k]) { n_expect++; break; }
                }
                CHECK(n_fin == n_expect, "masked candidates == allowed present (%zu vs %zu)", n_fin, n_expect);
                for (size_t k = 0, j = 0; k < n_fin; ++k) {
                    while (j < n_allowed && allowed[j] < ids[k]) ++j;
                    CHECK(j < n_allowed && allowed[j] == ids[k], "finite logit on a token not allowed: %d", ids[k]);
                }
            }

            /* a token not allowed (forced from elsewhere) leaves the state alone */
            const trie_state before = trie_llama_sampler_state(smpl);
            for (int32_t t = 0; t < n_vocab; ++t) {
                int ok = 0;
                for (size_t k = 0; k < n_allowed; ++k) if (allowed[k] == t) { ok = 1; break; }
                if (!ok) {
                    llama_sampler_accept(smpl, t);
                    CHECK(trie_llama_sampler_state(smpl) == before, "rejected token changed the state");
                    CHECK_ERROR(smpl, TRIE_ERR_TOKEN_REJECTED, "rejected token");
                    break;
                }
            }

            const llama_token tok = (llama_token) allowed[rnd() % n_allowed];
            if (step == 1 && cloned == NULL) {
                cloned = llama_sampler_clone(smpl);
                CHECK(cloned && trie_llama_sampler_state(cloned) == before, "clone copies the state");
                clone_expected = before;
            }
            llama_sampler_accept(smpl, tok);
            if (llama_vocab_is_eog(vocab, tok)) {
                CHECK(trie_llama_sampler_state(smpl) == TRIE_STATE_FINISHED, "finished after EOG");
                CHECK(is_member(out, out_len), "walk spelled a member: '%.*s'", (int) out_len, out);
                n_members_hit++;
                break;
            }
            char piece[128];
            int32_t n = llama_token_to_piece(vocab, tok, piece, sizeof piece, 0, false);
            CHECK(n >= 0 && out_len + (size_t) n < sizeof out, "piece");
            if (n > 0 && out_len + (size_t) n < sizeof out) { memcpy(out + out_len, piece, (size_t) n); out_len += (size_t) n; }
        }
        if (cloned) {
            CHECK(trie_llama_sampler_state(cloned) == clone_expected, "clone is independent");
            llama_sampler_free(cloned);
        }
        n_walks++;
    }
    CHECK(n_members_hit == n_walks, "every walk ended with EOG (%d of %d)", n_members_hit, n_walks);

    test_fail_closed(a, vocab, n_vocab);
    test_lazy_scratch(a, vocab, n_vocab);
    test_empty_state();

    llama_sampler_free(smpl);
    free(full); free(shuf); free(ids); free(allowed);
    llama_model_free(model);
    llama_backend_free();
    printf("selftest: %d walks, %d checks, %d failed\n", n_walks, n_checks, n_failed);
    return n_failed ? 1 : 0;
}
