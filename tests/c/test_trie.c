/* C tests of every call of include/trie.h and of every bad input: statuses, messages, outputs left untouched.
 * Prints "N passed, N failed" and exits non-zero on any failure. Run under AddressSanitizer and valgrind by ctest.
 *
 * Real vocabularies are read from $TRIE_ASSETS (default: TRIE_DEFAULT_ASSETS, set by CMake); a missing file is a
 * failure naming the command that fetches them (scripts/fetch-assets.sh). TRIE_TEST_LARGE=1 adds the
 * 1,000,000-string compile. */
#define _POSIX_C_SOURCE 200809L
#include "trie.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#ifndef TRIE_DEFAULT_ASSETS
#define TRIE_DEFAULT_ASSETS "../shared/assets"
#endif

static int passed, failed, skipped;

#define CHECK(cond)                                                                                   \
    do {                                                                                              \
        if (cond) {                                                                                   \
            passed++;                                                                                 \
        } else {                                                                                      \
            failed++;                                                                                 \
            fprintf(stderr, "FAIL %s:%d: %s (last error: %s)\n", __FILE__, __LINE__, #cond, trie_last_error()); \
        }                                                                                             \
    } while (0)

#define CHECK_ST(call, expected) CHECK((call) == (expected))

static const char *assets_dir(void) {
    const char *a = getenv("TRIE_ASSETS");
    return a && *a ? a : TRIE_DEFAULT_ASSETS;
}

static char *asset(const char *rel) {
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/%s", assets_dir(), rel);
    return buf;
}

static int file_exists(const char *path) { return access(path, R_OK) == 0; }

/* A real-vocabulary asset is missing: a failure (CI fetches the assets), never a silent skip. */
static void missing_asset(const char *path) {
    failed++;
    fprintf(stderr, "FAIL: asset %s not found: run scripts/fetch-assets.sh (it prints the folder it filled) and "
                    "set TRIE_ASSETS to that folder\n", path);
}

/* Tokens: a b c d e ab abc bc </s>(control, EOG 8); mask width 40 (ids 9..39 are padding). */
static trie_vocab *toy_vocab(void) {
    static const char *texts[] = {"a", "b", "c", "d", "e", "ab", "abc", "bc", "</s>"};
    const uint8_t *ptrs[9];
    size_t lens[9];
    uint32_t kinds[9];
    for (int i = 0; i < 9; i++) {
        ptrs[i] = (const uint8_t *)texts[i];
        lens[i] = strlen(texts[i]);
        kinds[i] = i == 8 ? TRIE_TOKEN_CONTROL : TRIE_TOKEN_NORMAL;
    }
    int32_t eog = 8;
    trie_vocab *v = NULL;
    trie_status st = trie_vocab_new_ex(ptrs, lens, kinds, 9, &eog, 1, 40, &v);
    CHECK_ST(st, TRIE_OK);
    return v;
}

static trie_automaton *compile_strs(const trie_vocab *v, const char **strs, size_t n, const trie_options *o,
                                    trie_status *st_out) {
    const uint8_t **ptrs = malloc((n ? n : 1) * sizeof *ptrs);
    size_t *lens = malloc((n ? n : 1) * sizeof *lens);
    for (size_t i = 0; i < n; i++) {
        ptrs[i] = (const uint8_t *)strs[i];
        lens[i] = strlen(strs[i]);
    }
    trie_automaton *a = (trie_automaton *)0x1; /* must be overwritten with NULL or a handle */
    trie_status st = trie_compile(v, ptrs, lens, n, o, &a);
    if (st_out) *st_out = st;
    free(ptrs);
    free(lens);
    if (st != TRIE_OK) CHECK(a == NULL);
    return a;
}

static void test_version_and_status(void) {
    CHECK(strcmp(trie_version(), TRIE_VERSION_STRING) == 0);
    CHECK(trie_sampler_name() != NULL && strcmp(trie_sampler_name(), "trie") == 0);
    CHECK(trie_sampler_name() == trie_sampler_name());
    CHECK(TRIE_VERSION_MAJOR == 0 && TRIE_VERSION_MINOR == 3);
    CHECK(strcmp(trie_status_str(TRIE_OK), "ok") == 0);
    CHECK(strcmp(trie_status_str(TRIE_ERR_TOKEN_REJECTED), "token rejected") == 0);
    for (int s = 0; s <= 13; s++) CHECK(strcmp(trie_status_str(s), "unknown status") != 0);
    CHECK(strcmp(trie_status_str(14), "unknown status") == 0);
    CHECK(strcmp(trie_status_str(-1), "unknown status") == 0);
    CHECK(trie_last_error() != NULL);
    CHECK(TRIE_STATE_FINISHED == 0xFFFFFFFFu);
    CHECK(sizeof(trie_state) == 4);
}

static void test_vocab_new(void) {
    const uint8_t *ptrs[3] = {(const uint8_t *)"x", NULL, (const uint8_t *)"yz"};
    size_t lens[3] = {1, 0, 2};
    uint32_t kinds[3] = {TRIE_TOKEN_NORMAL, TRIE_TOKEN_UNUSED, TRIE_TOKEN_NORMAL};
    int32_t eog[1] = {1};
    trie_vocab *v = (trie_vocab *)0x1;

    CHECK_ST(trie_vocab_new(ptrs, lens, kinds, 3, eog, 1, &v), TRIE_OK);
    CHECK(v != NULL && trie_vocab_n_tokens(v) == 3);
    trie_vocab_free(v);
    /* kinds NULL: all normal; no EOG ids. */
    CHECK_ST(trie_vocab_new(ptrs, lens, NULL, 3, NULL, 0, &v), TRIE_OK);
    trie_vocab_free(v);

    CHECK_ST(trie_vocab_new(ptrs, lens, kinds, 3, eog, 1, NULL), TRIE_ERR_NULL_ARGUMENT);
    CHECK(strstr(trie_last_error(), "out") != NULL);
    v = (trie_vocab *)0x1;
    CHECK_ST(trie_vocab_new(NULL, lens, kinds, 3, eog, 1, &v), TRIE_ERR_NULL_ARGUMENT);
    CHECK(v == NULL);
    CHECK(strstr(trie_last_error(), "token_bytes") != NULL);
    CHECK_ST(trie_vocab_new(ptrs, NULL, kinds, 3, eog, 1, &v), TRIE_ERR_NULL_ARGUMENT);
    CHECK_ST(trie_vocab_new(ptrs, lens, kinds, 3, NULL, 1, &v), TRIE_ERR_NULL_ARGUMENT);
    size_t bad_lens[3] = {1, 4, 2}; /* token 1 is NULL with 4 bytes */
    CHECK_ST(trie_vocab_new(ptrs, bad_lens, kinds, 3, eog, 1, &v), TRIE_ERR_NULL_ARGUMENT);
    CHECK(strstr(trie_last_error(), "token_bytes[1]") != NULL);
    uint32_t bad_kinds[3] = {1, 9, 1};
    CHECK_ST(trie_vocab_new(ptrs, lens, bad_kinds, 3, eog, 1, &v), TRIE_ERR_INVALID_ARGUMENT);
    CHECK(strstr(trie_last_error(), "token_kinds[1]") != NULL);
    int32_t neg = -1, big = 3;
    CHECK_ST(trie_vocab_new(ptrs, lens, kinds, 3, &neg, 1, &v), TRIE_ERR_INVALID_ARGUMENT);
    CHECK_ST(trie_vocab_new(ptrs, lens, kinds, 3, &big, 1, &v), TRIE_ERR_INVALID_ARGUMENT);
    CHECK(strstr(trie_last_error(), "out of range") != NULL);
    CHECK_ST(trie_vocab_new(NULL, NULL, NULL, 0, NULL, 0, &v), TRIE_ERR_INVALID_ARGUMENT);
    CHECK_ST(trie_vocab_new_ex(ptrs, lens, kinds, 3, eog, 1, 2, &v), TRIE_ERR_INVALID_ARGUMENT);
    /* Id 3 exists with n_vocab 4 but is padding: never allowed, so it cannot end generation either. */
    CHECK_ST(trie_vocab_new_ex(ptrs, lens, kinds, 3, &big, 1, 4, &v), TRIE_ERR_INVALID_ARGUMENT);
    CHECK(strstr(trie_last_error(), "padding") != NULL);
    CHECK_ST(trie_vocab_new_ex(ptrs, lens, kinds, 3, eog, 1, 4, &v), TRIE_OK);
    CHECK(trie_vocab_n_tokens(v) == 4);
    trie_vocab_free(v);
    CHECK(v != NULL);
    CHECK_ST(trie_vocab_new(ptrs, lens, kinds, (size_t)1 << 40, eog, 1, &v), TRIE_ERR_LIMIT_EXCEEDED);
}

static void test_vocab_accessors(void) {
    trie_vocab *v = toy_vocab();
    CHECK(trie_vocab_n_tokens(v) == 40);
    CHECK(trie_vocab_n_tokens(NULL) == 0);
    CHECK(trie_vocab_memory_usage(v) > 0);
    CHECK(trie_vocab_memory_usage(NULL) == 0);

    const uint8_t *bytes = (const uint8_t *)0x1;
    size_t len = 99;
    CHECK_ST(trie_vocab_token(v, 5, &bytes, &len), TRIE_OK);
    CHECK(len == 2 && memcmp(bytes, "ab", 2) == 0);
    CHECK_ST(trie_vocab_token(v, 39, &bytes, &len), TRIE_OK); /* padding: no bytes */
    CHECK(len == 0);
    CHECK_ST(trie_vocab_token(v, -1, &bytes, &len), TRIE_ERR_INVALID_ARGUMENT);
    CHECK(bytes == NULL && len == 0);
    CHECK_ST(trie_vocab_token(v, 40, &bytes, &len), TRIE_ERR_INVALID_ARGUMENT);
    CHECK(strstr(trie_last_error(), "40") != NULL);
    CHECK_ST(trie_vocab_token(NULL, 0, &bytes, &len), TRIE_ERR_NULL_ARGUMENT);
    CHECK_ST(trie_vocab_token(v, 0, NULL, &len), TRIE_ERR_NULL_ARGUMENT);
    CHECK_ST(trie_vocab_token(v, 0, &bytes, NULL), TRIE_ERR_NULL_ARGUMENT);

    const int32_t *ids = NULL;
    size_t n = 0;
    CHECK_ST(trie_vocab_eog_ids(v, &ids, &n), TRIE_OK);
    CHECK(n == 1 && ids[0] == 8);
    CHECK_ST(trie_vocab_eog_ids(NULL, &ids, &n), TRIE_ERR_NULL_ARGUMENT);
    CHECK(ids == NULL && n == 0);
    CHECK_ST(trie_vocab_eog_ids(v, NULL, &n), TRIE_ERR_NULL_ARGUMENT);
    CHECK_ST(trie_vocab_eog_ids(v, &ids, NULL), TRIE_ERR_NULL_ARGUMENT);

    trie_vocab *r = trie_vocab_retain(v);
    CHECK(r == v);
    trie_vocab_free(v);
    CHECK(trie_vocab_n_tokens(r) == 40); /* still alive through r */
    trie_vocab_free(r);
    CHECK(trie_vocab_retain(NULL) == NULL);
    trie_vocab_free(NULL);
}

static void test_compile(void) {
    trie_vocab *v = toy_vocab();
    trie_status st;
    const char *set[] = {"abc", "ab", "bd"};
    trie_automaton *a = compile_strs(v, set, 3, NULL, &st);
    CHECK_ST(st, TRIE_OK);
    CHECK(a != NULL);
    CHECK(trie_automaton_n_vocab(a) == 40);
    CHECK(trie_automaton_mask_words(a) == 2);
    CHECK(trie_automaton_n_states(a) >= 4);
    CHECK(trie_automaton_n_members(a) == 3);
    CHECK(trie_automaton_memory_usage(a) > 0);
    const size_t *dropped = (const size_t *)0x1;
    size_t n_dropped = 7;
    CHECK_ST(trie_automaton_dropped(a, &dropped, &n_dropped), TRIE_OK);
    CHECK(n_dropped == 0);
    trie_automaton_free(a);

    /* Bad inputs. */
    const uint8_t *ptrs[2] = {(const uint8_t *)"ab", NULL};
    size_t lens[2] = {2, 0};
    trie_automaton *out = (trie_automaton *)0x1;
    CHECK_ST(trie_compile(v, ptrs, lens, 2, NULL, &out), TRIE_OK); /* NULL with length 0: the empty string */
    CHECK(trie_is_accepting(out, trie_start(out)));                  /* the empty string is a member */
    trie_automaton_free(out);
    out = (trie_automaton *)0x1;
    CHECK_ST(trie_compile(NULL, ptrs, lens, 2, NULL, &out), TRIE_ERR_NULL_ARGUMENT);
    CHECK(out == NULL);
    CHECK(strstr(trie_last_error(), "vocab") != NULL);
    CHECK_ST(trie_compile(v, ptrs, lens, 2, NULL, NULL), TRIE_ERR_NULL_ARGUMENT);
    CHECK_ST(trie_compile(v, NULL, lens, 2, NULL, &out), TRIE_ERR_NULL_ARGUMENT);
    CHECK_ST(trie_compile(v, ptrs, NULL, 2, NULL, &out), TRIE_ERR_NULL_ARGUMENT);
    size_t bad_lens[2] = {2, 3};
    CHECK_ST(trie_compile(v, ptrs, bad_lens, 2, NULL, &out), TRIE_ERR_NULL_ARGUMENT);
    CHECK(strstr(trie_last_error(), "strings[1]") != NULL);
    CHECK_ST(trie_compile(v, NULL, NULL, 0, NULL, &out), TRIE_ERR_EMPTY_SET);
    CHECK(out == NULL);

    const char *unreachable[] = {"abz", "ab"};
    a = compile_strs(v, unreachable, 2, NULL, &st);
    CHECK_ST(st, TRIE_ERR_UNREACHABLE_STRING);
    CHECK(strstr(trie_last_error(), "abz") != NULL);
    trie_options opts;
    CHECK_ST(trie_options_init(&opts), TRIE_OK);
    CHECK(opts.struct_size == sizeof(trie_options) && !opts.drop_unreachable && opts.max_states == 0);
    opts.drop_unreachable = true;
    a = compile_strs(v, unreachable, 2, &opts, &st);
    CHECK_ST(st, TRIE_OK);
    CHECK_ST(trie_automaton_dropped(a, &dropped, &n_dropped), TRIE_OK);
    CHECK(n_dropped == 1 && dropped[0] == 0);
    CHECK(trie_automaton_n_members(a) == 1);
    CHECK_ST(trie_automaton_dropped(NULL, &dropped, &n_dropped), TRIE_ERR_NULL_ARGUMENT);
    CHECK(dropped == NULL && n_dropped == 0);
    CHECK_ST(trie_automaton_dropped(a, NULL, &n_dropped), TRIE_ERR_NULL_ARGUMENT);
    CHECK_ST(trie_automaton_dropped(a, &dropped, NULL), TRIE_ERR_NULL_ARGUMENT);
    trie_automaton_free(a);
    const char *none[] = {"zz"};
    a = compile_strs(v, none, 1, &opts, &st);
    CHECK_ST(st, TRIE_ERR_UNREACHABLE_STRING);

    /* Versioned options: struct_size 0 is refused; an older, shorter struct (up to drop_unreachable) works with
       defaults for the rest; a newer, longer one works when its unknown tail is zero and is refused otherwise. */
    {
        trie_options bad = opts;
        bad.struct_size = 0;
        a = compile_strs(v, unreachable, 2, &bad, &st);
        CHECK_ST(st, TRIE_ERR_INVALID_ARGUMENT);
        CHECK(strstr(trie_last_error(), "trie_options_init") != NULL);
        bad.struct_size = offsetof(trie_options, drop_unreachable) + 1;
        bad.max_states = 1; /* past the old struct: ignored */
        a = compile_strs(v, unreachable, 2, &bad, &st);
        CHECK_ST(st, TRIE_OK);
        CHECK(trie_automaton_n_members(a) == 1);
        trie_automaton_free(a);
        struct { trie_options o; uint64_t future; } newer;
        memset(&newer, 0, sizeof newer);
        CHECK_ST(trie_options_init(&newer.o), TRIE_OK);
        newer.o.struct_size = sizeof newer;
        a = compile_strs(v, unreachable + 1, 1, &newer.o, &st);
        CHECK_ST(st, TRIE_OK);
        trie_automaton_free(a);
        newer.future = 7;
        a = compile_strs(v, unreachable + 1, 1, &newer.o, &st);
        CHECK_ST(st, TRIE_ERR_INVALID_ARGUMENT);
        CHECK(strstr(trie_last_error(), "does not know") != NULL);
        CHECK_ST(trie_options_init(NULL), TRIE_ERR_NULL_ARGUMENT);
    }
    /* Bounds: more states or bytes than allowed is TRIE_ERR_LIMIT_EXCEEDED, never an abort. */
    {
        trie_options bounded;
        trie_options_init(&bounded);
        bounded.max_states = 2;
        a = compile_strs(v, unreachable + 1, 1, &bounded, &st);
        CHECK_ST(st, TRIE_ERR_LIMIT_EXCEEDED);
        CHECK(strstr(trie_last_error(), "max_states") != NULL);
        bounded.max_states = 0;
        bounded.max_bytes = 16;
        a = compile_strs(v, unreachable + 1, 1, &bounded, &st);
        CHECK_ST(st, TRIE_ERR_LIMIT_EXCEEDED);
        CHECK(strstr(trie_last_error(), "max_bytes") != NULL);
        bounded.max_states = 3;
        bounded.max_bytes = 1u << 20;
        a = compile_strs(v, unreachable + 1, 1, &bounded, &st);
        CHECK_ST(st, TRIE_OK);
        trie_automaton_free(a);
    }

    /* Non-UTF-8 bytes and a 64 KiB string are fine as members. */
    static char big[65537];
    memset(big, 'a', 65536);
    big[65536] = 0;
    const char *odd[] = {"ab\xff", big};
    a = compile_strs(v, odd, 2, &opts, &st);
    CHECK_ST(st, TRIE_OK);
    CHECK_ST(trie_automaton_dropped(a, &dropped, &n_dropped), TRIE_OK);
    CHECK(n_dropped == 1 && dropped[0] == 0); /* no token spells 0xff */
    CHECK(trie_automaton_n_states(a) == 65537);
    trie_automaton_free(a);

    /* NULL handles. */
    CHECK(trie_automaton_n_vocab(NULL) == 0);
    CHECK(trie_automaton_mask_words(NULL) == 0);
    CHECK(trie_automaton_n_states(NULL) == 0);
    CHECK(trie_automaton_n_members(NULL) == 0);
    CHECK(trie_automaton_memory_usage(NULL) == 0);
    CHECK(trie_automaton_retain(NULL) == NULL);
    CHECK(trie_automaton_vocab(NULL) == NULL);
    trie_automaton_free(NULL);
    trie_vocab_free(v);
}

static void test_decode(void) {
    trie_vocab *v = toy_vocab();
    const char *set[] = {"abc", "ab", "bd"};
    trie_automaton *a = compile_strs(v, set, 3, NULL, NULL);
    trie_vocab_free(v); /* the automaton keeps it alive */
    trie_state s0 = trie_start(a);
    CHECK(s0 == 0);
    CHECK(trie_start(NULL) == 0);

    int32_t toks[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
    size_t n = 0;
    CHECK_ST(trie_allowed(a, s0, NULL, 0, &n), TRIE_ERR_BUFFER_TOO_SMALL); /* the size query */
    CHECK(n == 4);
    CHECK_ST(trie_allowed(a, s0, toks, 3, &n), TRIE_ERR_BUFFER_TOO_SMALL);
    CHECK(n == 4 && toks[0] == -1); /* nothing written */
    CHECK_ST(trie_allowed(a, s0, toks, 8, &n), TRIE_OK);
    CHECK(n == 4 && toks[0] == 0 && toks[1] == 1 && toks[2] == 5 && toks[3] == 6 && toks[4] == -1);
    CHECK_ST(trie_allowed(a, TRIE_STATE_FINISHED, toks, 8, &n), TRIE_OK);
    CHECK(n == 1 && toks[0] == 8);
    CHECK_ST(trie_allowed(a, 123456, toks, 8, &n), TRIE_ERR_INVALID_STATE);
    CHECK(n == 0);
    CHECK(strstr(trie_last_error(), "123456") != NULL);
    CHECK_ST(trie_allowed(NULL, s0, toks, 8, &n), TRIE_ERR_NULL_ARGUMENT);
    CHECK_ST(trie_allowed(a, s0, NULL, 8, &n), TRIE_ERR_NULL_ARGUMENT);
    CHECK_ST(trie_allowed(a, s0, toks, 8, NULL), TRIE_ERR_NULL_ARGUMENT);

    /* Masks. */
    uint32_t mask[4] = {0xAAAAAAAAu, 0xAAAAAAAAu, 0xAAAAAAAAu, 0xAAAAAAAAu};
    CHECK_ST(trie_mask(a, s0, mask, 1), TRIE_ERR_BUFFER_TOO_SMALL);
    CHECK(mask[0] == 0xAAAAAAAAu); /* nothing written */
    CHECK(strstr(trie_last_error(), "needs 2") != NULL);
    CHECK_ST(trie_mask(a, s0, NULL, 2), TRIE_ERR_NULL_ARGUMENT);
    CHECK_ST(trie_mask(a, s0, NULL, 0), TRIE_ERR_BUFFER_TOO_SMALL);
    CHECK_ST(trie_mask(NULL, s0, mask, 2), TRIE_ERR_NULL_ARGUMENT);
    CHECK_ST(trie_mask(a, 99999, mask, 4), TRIE_ERR_INVALID_STATE);
    CHECK(mask[0] == 0xAAAAAAAAu);
    CHECK_ST(trie_mask(a, s0, mask, 4), TRIE_OK);
    CHECK(mask[0] == 0x63u && mask[1] == 0 && mask[2] == 0 && mask[3] == 0); /* tokens 0 1 5 6 */
    CHECK_ST(trie_mask(a, TRIE_STATE_FINISHED, mask, 2), TRIE_OK);
    CHECK(mask[0] == 0x100u && mask[1] == 0);

    /* Advancing. */
    trie_state s_ab = 77;
    CHECK_ST(trie_advance(a, s0, 5, &s_ab), TRIE_OK);
    CHECK(s_ab != 77 && s_ab != TRIE_STATE_FINISHED);
    CHECK(trie_is_accepting(a, s_ab));
    CHECK(!trie_is_accepting(a, s0));
    CHECK(trie_is_accepting(a, TRIE_STATE_FINISHED));
    CHECK(!trie_is_accepting(a, 99999));
    CHECK(!trie_is_accepting(NULL, s0));
    trie_state next = 77;
    CHECK_ST(trie_advance(a, s0, 3, &next), TRIE_ERR_TOKEN_REJECTED);
    CHECK(next == 77);
    CHECK(strstr(trie_last_error(), "\"d\"") != NULL);
    CHECK_ST(trie_advance(a, s0, 8, &next), TRIE_ERR_TOKEN_REJECTED); /* EOG before a member ends */
    CHECK_ST(trie_advance(a, s0, 20, &next), TRIE_ERR_TOKEN_REJECTED); /* padding id */
    CHECK_ST(trie_advance(a, s0, -1, &next), TRIE_ERR_INVALID_ARGUMENT);
    CHECK_ST(trie_advance(a, s0, 40, &next), TRIE_ERR_INVALID_ARGUMENT);
    CHECK_ST(trie_advance(a, s0, 2147483647, &next), TRIE_ERR_INVALID_ARGUMENT);
    CHECK_ST(trie_advance(a, 99999, 0, &next), TRIE_ERR_INVALID_STATE);
    CHECK_ST(trie_advance(a, s0, 0, NULL), TRIE_ERR_NULL_ARGUMENT);
    CHECK_ST(trie_advance(NULL, s0, 0, &next), TRIE_ERR_NULL_ARGUMENT);
    CHECK(next == 77);
    CHECK_ST(trie_advance(a, s_ab, 8, &next), TRIE_OK);
    CHECK(next == TRIE_STATE_FINISHED);
    CHECK_ST(trie_advance(a, next, 8, &next), TRIE_OK);
    CHECK(next == TRIE_STATE_FINISHED);
    CHECK_ST(trie_advance(a, TRIE_STATE_FINISHED, 0, &next), TRIE_ERR_TOKEN_REJECTED);

    /* Batch masks: rows for s0, s_ab, FINISHED, then a parallel-sized batch. */
    trie_state states[3] = {s0, s_ab, TRIE_STATE_FINISHED};
    uint32_t rows[9];
    for (int i = 0; i < 9; i++) rows[i] = 0xAAAAAAAAu;
    CHECK_ST(trie_mask_batch(a, states, 3, rows, 9, 3), TRIE_OK);
    CHECK(rows[0] == 0x63u && rows[1] == 0 && rows[2] == 0);
    CHECK(rows[3] == ((1u << 2) | (1u << 8)) && rows[4] == 0);
    CHECK(rows[6] == 0x100u);
    for (int i = 0; i < 9; i++) rows[i] = 0xAAAAAAAAu;
    CHECK_ST(trie_mask_batch(a, states, 3, rows, 9, 1), TRIE_ERR_BUFFER_TOO_SMALL);
    CHECK_ST(trie_mask_batch(a, states, 3, rows, 5, 2), TRIE_ERR_BUFFER_TOO_SMALL);
    trie_state bad_states[2] = {s0, 424242};
    CHECK_ST(trie_mask_batch(a, bad_states, 2, rows, 9, 2), TRIE_ERR_INVALID_STATE);
    CHECK(rows[0] == 0xAAAAAAAAu);
    CHECK_ST(trie_mask_batch(a, NULL, 3, rows, 9, 3), TRIE_ERR_NULL_ARGUMENT);
    CHECK_ST(trie_mask_batch(a, states, 3, NULL, 9, 3), TRIE_ERR_NULL_ARGUMENT);
    CHECK_ST(trie_mask_batch(NULL, states, 3, rows, 9, 3), TRIE_ERR_NULL_ARGUMENT);
    CHECK(rows[0] == 0xAAAAAAAAu);
    CHECK_ST(trie_mask_batch(a, NULL, 0, NULL, 0, 0), TRIE_OK);
    trie_state many[64];
    uint32_t many_rows[64 * 2];
    for (int i = 0; i < 64; i++) many[i] = i % 2 ? s_ab : s0;
    CHECK_ST(trie_mask_batch(a, many, 64, many_rows, 128, 2), TRIE_OK);
    int ok = 1;
    for (int i = 0; i < 64; i++) ok &= many_rows[2 * i] == (i % 2 ? ((1u << 2) | (1u << 8)) : 0x63u);
    CHECK(ok);

    /* Rows of different sets in one buffer (a serving batch); NULL = an unconstrained row (all ones). */
    {
        trie_vocab *v2 = toy_vocab();
        const char *set2[] = {"e", "de"};
        trie_automaton *b = compile_strs(v2, set2, 2, NULL, NULL);
        trie_vocab_free(v2);
        const trie_automaton *automata[4] = {a, b, NULL, a};
        trie_state row_states[4] = {s0, 0, 12345, s_ab};
        uint32_t mixed[8];
        for (int i = 0; i < 8; i++) mixed[i] = 0xAAAAAAAAu;
        CHECK_ST(trie_mask_rows(automata, row_states, 4, mixed, 8, 2), TRIE_OK);
        CHECK(mixed[0] == 0x63u && mixed[1] == 0);
        CHECK(mixed[2] == ((1u << 3) | (1u << 4)) && mixed[3] == 0);
        CHECK(mixed[4] == UINT32_MAX && mixed[5] == UINT32_MAX);
        CHECK(mixed[6] == ((1u << 2) | (1u << 8)) && mixed[7] == 0);
        for (int i = 0; i < 8; i++) mixed[i] = 0xAAAAAAAAu;
        trie_state bad_rows[4] = {s0, 0, 0, 424242};
        CHECK_ST(trie_mask_rows(automata, bad_rows, 4, mixed, 8, 2), TRIE_ERR_INVALID_STATE);
        CHECK(strstr(trie_last_error(), "row 3") != NULL);
        CHECK_ST(trie_mask_rows(automata, row_states, 4, mixed, 8, 1), TRIE_ERR_BUFFER_TOO_SMALL);
        CHECK_ST(trie_mask_rows(automata, row_states, 4, mixed, 7, 2), TRIE_ERR_BUFFER_TOO_SMALL);
        CHECK_ST(trie_mask_rows(automata, row_states, 4, mixed, 8, 0), TRIE_ERR_INVALID_ARGUMENT);
        CHECK_ST(trie_mask_rows(NULL, row_states, 4, mixed, 8, 2), TRIE_ERR_NULL_ARGUMENT);
        CHECK_ST(trie_mask_rows(automata, row_states, 4, NULL, 8, 2), TRIE_ERR_NULL_ARGUMENT);
        CHECK(mixed[0] == 0xAAAAAAAAu && mixed[7] == 0xAAAAAAAAu);
        CHECK_ST(trie_mask_rows(NULL, NULL, 0, NULL, 0, 0), TRIE_OK);
        trie_automaton_free(b);
    }

    /* Retain: a second reference outlives the first. */
    trie_automaton *r = trie_automaton_retain(a);
    CHECK(r == a);
    trie_vocab *av = trie_automaton_vocab(a);
    CHECK(av != NULL && trie_vocab_n_tokens(av) == 40);
    trie_automaton_free(a);
    CHECK_ST(trie_advance(r, trie_start(r), 5, &next), TRIE_OK);
    trie_automaton_free(r);
    CHECK(trie_vocab_n_tokens(av) == 40);
    trie_vocab_free(av);
}

static void test_forced(void) {
    trie_vocab *v = toy_vocab();
    const char *set[] = {"abcab", "bd"};
    trie_automaton *a = compile_strs(v, set, 2, NULL, NULL);
    size_t nb = 99, nt = 99;
    bool forced = true;
    CHECK_ST(trie_forced(a, trie_start(a), NULL, 0, &nb, NULL, 0, &nt, &forced), TRIE_OK);
    CHECK(!forced && nb == 0 && nt == 0);
    trie_state s;
    CHECK_ST(trie_advance(a, trie_start(a), 0, &s), TRIE_OK); /* "a" */
    CHECK_ST(trie_forced(a, s, NULL, 0, &nb, NULL, 0, &nt, &forced), TRIE_ERR_BUFFER_TOO_SMALL);
    CHECK(forced && nb == 4 && nt == 2);
    uint8_t bytes[8] = {0};
    int32_t toks[8] = {-5, -5, -5, -5, -5, -5, -5, -5};
    CHECK_ST(trie_forced(a, s, bytes, 8, &nb, toks, 1, &nt, &forced), TRIE_ERR_BUFFER_TOO_SMALL);
    CHECK(bytes[0] == 0 && toks[0] == -5);
    CHECK_ST(trie_forced(a, s, bytes, 8, &nb, toks, 8, &nt, &forced), TRIE_OK);
    CHECK(forced && nb == 4 && memcmp(bytes, "bcab", 4) == 0);
    CHECK(nt == 2 && toks[0] == 7 && toks[1] == 5 && toks[2] == -5);
    /* Following the forced path reaches an accepting state with nothing left to force but the end. */
    trie_state t = s;
    for (size_t i = 0; i < nt; i++) CHECK_ST(trie_advance(a, t, toks[i], &t), TRIE_OK);
    CHECK(trie_is_accepting(a, t));
    CHECK_ST(trie_forced(a, t, bytes, 8, &nb, toks, 8, &nt, &forced), TRIE_OK);
    CHECK(forced && nb == 0 && nt == 0);
    CHECK_ST(trie_forced(a, TRIE_STATE_FINISHED, bytes, 8, &nb, toks, 8, &nt, &forced), TRIE_OK);
    CHECK(!forced);
    CHECK_ST(trie_forced(a, 4242, bytes, 8, &nb, toks, 8, &nt, &forced), TRIE_ERR_INVALID_STATE);
    CHECK_ST(trie_forced(NULL, s, bytes, 8, &nb, toks, 8, &nt, &forced), TRIE_ERR_NULL_ARGUMENT);
    CHECK_ST(trie_forced(a, s, bytes, 8, NULL, toks, 8, &nt, &forced), TRIE_ERR_NULL_ARGUMENT);
    CHECK_ST(trie_forced(a, s, bytes, 8, &nb, toks, 8, NULL, &forced), TRIE_ERR_NULL_ARGUMENT);
    CHECK_ST(trie_forced(a, s, bytes, 8, &nb, toks, 8, &nt, NULL), TRIE_ERR_NULL_ARGUMENT);
    CHECK_ST(trie_forced(a, s, NULL, 8, &nb, toks, 8, &nt, &forced), TRIE_ERR_NULL_ARGUMENT);
    CHECK_ST(trie_forced(a, s, bytes, 8, &nb, NULL, 8, &nt, &forced), TRIE_ERR_NULL_ARGUMENT);
    trie_automaton_free(a);
    trie_vocab_free(v);
}

/* Several threads decode with one automaton; each thread's last error is its own. */
struct walk_arg {
    const trie_automaton *a;
    int ok;
};

static void *walk_thread(void *p) {
    struct walk_arg *w = p;
    w->ok = trie_last_error()[0] == '\0'; /* a fresh thread has no error yet */
    for (int i = 0; i < 200; i++) {
        trie_state s = trie_start(w->a);
        int steps = 0;
        while (s != TRIE_STATE_FINISHED && steps++ < 100) {
            int32_t toks[64];
            size_t n;
            if (trie_allowed(w->a, s, toks, 64, &n) != TRIE_OK || n == 0) { w->ok = 0; break; }
            if (trie_advance(w->a, s, toks[(size_t)(i + steps) % n], &s) != TRIE_OK) { w->ok = 0; break; }
        }
        w->ok &= s == TRIE_STATE_FINISHED;
    }
    trie_state dummy;
    w->ok &= trie_advance(w->a, 0, -3, &dummy) == TRIE_ERR_INVALID_ARGUMENT;
    w->ok &= strstr(trie_last_error(), "-3") != NULL;
    return NULL;
}

static void test_threads(void) {
    trie_vocab *v = toy_vocab();
    const char *set[] = {"abc", "ab", "bd", "cab", "eee", "abcabc"};
    trie_automaton *a = compile_strs(v, set, 6, NULL, NULL);
    trie_vocab_free(v);
    trie_state dummy;
    trie_advance(a, 0, 3, &dummy); /* main thread: a rejected-token message */
    const char *mine = trie_last_error();
    char before[256];
    snprintf(before, sizeof before, "%s", mine);
    pthread_t th[4];
    struct walk_arg args[4];
    for (int i = 0; i < 4; i++) {
        args[i].a = a;
        args[i].ok = 0;
        pthread_create(&th[i], NULL, walk_thread, &args[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CHECK(args[i].ok);
    }
    CHECK(strcmp(trie_last_error(), before) == 0);
    trie_automaton_free(a);
}

static void write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fwrite(data, 1, n, f);
    fclose(f);
}

static void test_files(void) {
    trie_vocab *v = (trie_vocab *)0x1;
    CHECK_ST(trie_vocab_from_gguf(NULL, &v), TRIE_ERR_NULL_ARGUMENT);
    CHECK(v == NULL);
    CHECK_ST(trie_vocab_from_gguf("/nonexistent/x.gguf", NULL), TRIE_ERR_NULL_ARGUMENT);
    CHECK_ST(trie_vocab_from_gguf("/nonexistent/x.gguf", &v), TRIE_ERR_IO);
    CHECK(strstr(trie_last_error(), "/nonexistent/x.gguf") != NULL);
    CHECK_ST(trie_vocab_from_gguf("/tmp/\xff\xfe.gguf", &v), TRIE_ERR_INVALID_ARGUMENT);
    CHECK(strstr(trie_last_error(), "UTF-8") != NULL);
    CHECK_ST(trie_vocab_from_tokenizer_json(NULL, &v), TRIE_ERR_NULL_ARGUMENT);
    CHECK_ST(trie_vocab_from_tokenizer_json("/nonexistent/tokenizer.json", &v), TRIE_ERR_IO);
    CHECK_ST(trie_vocab_from_tokenizer_json("/tmp/\xff.json", &v), TRIE_ERR_INVALID_ARGUMENT);
    CHECK_ST(trie_vocab_from_tokenizer_json_ex("/nonexistent/t.json", NULL, 2, 0, &v), TRIE_ERR_NULL_ARGUMENT);

    char tmpl[] = "/tmp/trie-test-XXXXXX";
    int fd = mkstemp(tmpl);
    if (fd >= 0) close(fd);
    write_file(tmpl, "GGUF\x03\x00\x00\x00garbage", 15);
    CHECK_ST(trie_vocab_from_gguf(tmpl, &v), TRIE_ERR_MALFORMED_FILE);
    write_file(tmpl, "not a gguf file at all", 22);
    CHECK_ST(trie_vocab_from_gguf(tmpl, &v), TRIE_ERR_MALFORMED_FILE);
    write_file(tmpl, "{\"model\": [1, 2", 15);
    CHECK_ST(trie_vocab_from_tokenizer_json(tmpl, &v), TRIE_ERR_MALFORMED_FILE);
    CHECK(v == NULL);

    const char *gguf = asset("vocab/ggml-vocab-llama-bpe.gguf");
    if (!file_exists(gguf)) {
        missing_asset(gguf);
    } else {
        /* Truncated copy of a real file. */
        FILE *f = fopen(gguf, "rb");
        static unsigned char head[100000];
        size_t got = f ? fread(head, 1, sizeof head, f) : 0;
        if (f) fclose(f);
        write_file(tmpl, head, got);
        CHECK_ST(trie_vocab_from_gguf(tmpl, &v), TRIE_ERR_MALFORMED_FILE);

        CHECK_ST(trie_vocab_from_gguf(gguf, &v), TRIE_OK);
        CHECK(trie_vocab_n_tokens(v) == 128256);
        const char *set[] = {"search_flights", "search_hotels", "book_flight", "\xe4\xbd\xa0\xe5\xa5\xbd"};
        trie_status st;
        trie_automaton *a = compile_strs(v, set, 4, NULL, &st);
        CHECK_ST(st, TRIE_OK);
        size_t words = trie_automaton_mask_words(a);
        CHECK(words == 128256 / 32);
        uint32_t *mask = calloc(words, sizeof *mask);
        int32_t *toks = malloc(trie_automaton_n_vocab(a) * sizeof *toks); /* always large enough */
        trie_state s = trie_start(a);
        char text[256];
        size_t len = 0;
        int steps = 0;
        while (s != TRIE_STATE_FINISHED && steps++ < 64) {
            size_t n;
            CHECK_ST(trie_mask(a, s, mask, words), TRIE_OK);
            CHECK_ST(trie_allowed(a, s, toks, trie_automaton_n_vocab(a), &n), TRIE_OK);
            int32_t t = toks[n - 1]; /* the largest id: an EOG id once accepting */
            CHECK(mask[t / 32] >> (t % 32) & 1u);
            const uint8_t *b;
            size_t bl;
            CHECK_ST(trie_vocab_token(v, t, &b, &bl), TRIE_OK);
            if (trie_advance(a, s, t, &s) != TRIE_OK) break;
            if (s != TRIE_STATE_FINISHED && len + bl < sizeof text) {
                memcpy(text + len, b, bl);
                len += bl;
            }
        }
        CHECK(s == TRIE_STATE_FINISHED);
        int member = 0;
        for (int i = 0; i < 4; i++) member |= strlen(set[i]) == len && memcmp(set[i], text, len) == 0;
        CHECK(member);
        free(toks);
        free(mask);
        trie_automaton_free(a);
        trie_vocab_free(v);
    }
    const char *bert = asset("vocab/ggml-vocab-bert-bge.gguf");
    if (!file_exists(bert)) {
        missing_asset(bert);
    } else {
        CHECK_ST(trie_vocab_from_gguf(bert, &v), TRIE_ERR_UNSUPPORTED_VOCABULARY);
        CHECK(v == NULL);
    }
    const char *qwen = asset("tokenizers/qwen3.tokenizer.json");
    if (!file_exists(qwen)) {
        missing_asset(qwen);
    } else {
        CHECK_ST(trie_vocab_from_tokenizer_json(qwen, &v), TRIE_OK);
        size_t listed = trie_vocab_n_tokens(v);
        CHECK(listed > 150000 && listed < 151936);
        trie_vocab_free(v);
        int32_t eos = 151645;
        CHECK_ST(trie_vocab_from_tokenizer_json_ex(qwen, &eos, 1, 151936, &v), TRIE_OK);
        CHECK(trie_vocab_n_tokens(v) == 151936);
        const int32_t *ids;
        size_t n;
        CHECK_ST(trie_vocab_eog_ids(v, &ids, &n), TRIE_OK);
        CHECK(n == 1 && ids[0] == 151645);
        trie_vocab_free(v);
        CHECK_ST(trie_vocab_from_tokenizer_json_ex(qwen, &eos, 1, 1000, &v), TRIE_ERR_INVALID_ARGUMENT);
    }
    unlink(tmpl);
}

/* Saved vocabularies and automata: load back with the same behaviour; another vocabulary, a damaged file, a
   missing file and NULLs are errors with their status. */
static void test_saved_files(void) {
    trie_vocab *v = toy_vocab();
    const char *set[] = {"abcab", "abd", "bc", "e"};
    trie_automaton *a = compile_strs(v, set, 4, NULL, NULL);
    char dir[] = "/tmp/trie-saved-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char apath[256], vpath[256], bad[256];
    snprintf(apath, sizeof apath, "%s/set.trie", dir);
    snprintf(vpath, sizeof vpath, "%s/toy.vocab", dir);
    snprintf(bad, sizeof bad, "%s/bad.trie", dir);
    CHECK_ST(trie_automaton_save(a, apath), TRIE_OK);
    CHECK_ST(trie_vocab_save(v, vpath), TRIE_OK);

    trie_vocab *w = NULL;
    CHECK_ST(trie_vocab_load(vpath, &w), TRIE_OK);
    uint8_t fa[16], fb[16];
    CHECK_ST(trie_vocab_fingerprint(v, fa), TRIE_OK);
    CHECK_ST(trie_vocab_fingerprint(w, fb), TRIE_OK);
    CHECK(memcmp(fa, fb, 16) == 0);
    trie_automaton *b = NULL;
    CHECK_ST(trie_automaton_load(w, apath, &b), TRIE_OK);
    CHECK(trie_automaton_n_states(a) == trie_automaton_n_states(b));
    uint32_t ma[2], mb[2];
    int32_t ta[40], tb[40];
    for (trie_state s = 0; s < trie_automaton_n_states(a); s++) {
        size_t na, nb;
        CHECK_ST(trie_mask(a, s, ma, 2), TRIE_OK);
        CHECK_ST(trie_mask(b, s, mb, 2), TRIE_OK);
        CHECK(ma[0] == mb[0] && ma[1] == mb[1]);
        CHECK_ST(trie_allowed(a, s, ta, 40, &na), TRIE_OK);
        CHECK_ST(trie_allowed(b, s, tb, 40, &nb), TRIE_OK);
        CHECK(na == nb && memcmp(ta, tb, na * sizeof *ta) == 0);
    }
    trie_automaton_free(b);

    /* Another vocabulary: same tokens, another end-of-generation id. */
    const uint8_t *ptrs[9];
    size_t lens[9];
    static const char *texts[] = {"a", "b", "c", "d", "e", "ab", "abc", "bc", "</s>"};
    for (int i = 0; i < 9; i++) { ptrs[i] = (const uint8_t *)texts[i]; lens[i] = strlen(texts[i]); }
    trie_vocab *other = NULL;
    CHECK_ST(trie_vocab_new(ptrs, lens, NULL, 9, NULL, 0, &other), TRIE_OK);
    b = (trie_automaton *)0x1;
    CHECK_ST(trie_automaton_load(other, apath, &b), TRIE_ERR_VOCAB_MISMATCH);
    CHECK(b == NULL && strstr(trie_last_error(), "another vocabulary") != NULL);
    trie_vocab_free(other);

    /* A damaged copy, a truncated copy, a vocabulary file given as an automaton, a missing file, NULLs. */
    FILE *f = fopen(apath, "rb");
    static unsigned char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    buf[n / 2] ^= 0x10;
    write_file(bad, buf, n);
    CHECK_ST(trie_automaton_load(w, bad, &b), TRIE_ERR_MALFORMED_FILE);
    CHECK(strstr(trie_last_error(), "checksum") != NULL);
    buf[n / 2] ^= 0x10;
    write_file(bad, buf, n - 7);
    CHECK_ST(trie_automaton_load(w, bad, &b), TRIE_ERR_MALFORMED_FILE);
    CHECK_ST(trie_automaton_load(w, vpath, &b), TRIE_ERR_MALFORMED_FILE);
    CHECK_ST(trie_vocab_load(apath, &other), TRIE_ERR_MALFORMED_FILE);
    CHECK(other == NULL);
    CHECK_ST(trie_automaton_load(w, "/nonexistent/x.trie", &b), TRIE_ERR_IO);
    CHECK_ST(trie_automaton_load(NULL, apath, &b), TRIE_ERR_NULL_ARGUMENT);
    CHECK_ST(trie_automaton_load(w, NULL, &b), TRIE_ERR_NULL_ARGUMENT);
    CHECK_ST(trie_automaton_load(w, apath, NULL), TRIE_ERR_NULL_ARGUMENT);
    CHECK_ST(trie_automaton_save(NULL, apath), TRIE_ERR_NULL_ARGUMENT);
    CHECK_ST(trie_vocab_save(v, NULL), TRIE_ERR_NULL_ARGUMENT);
    CHECK_ST(trie_vocab_fingerprint(v, NULL), TRIE_ERR_NULL_ARGUMENT);
    CHECK_ST(trie_automaton_save(a, "/nonexistent/dir/x.trie"), TRIE_ERR_IO);

    unlink(apath);
    unlink(vpath);
    unlink(bad);
    rmdir(dir);
    trie_automaton_free(a);
    trie_vocab_free(w);
    trie_vocab_free(v);
}

/* Token sequences (canonical tokenizations): only the given paths; bad ids name the sequence. */
static void test_compile_tokens(void) {
    trie_vocab *v = toy_vocab(); /* a b c d e ab abc bc </s> */
    const int32_t abc[] = {5, 2}, bd[] = {1, 3}, bad[] = {0, 8};
    const int32_t *seqs[] = {abc, bd};
    size_t lens[] = {2, 2};
    trie_automaton *a = NULL;
    CHECK_ST(trie_compile_tokens(v, seqs, lens, 2, NULL, &a), TRIE_OK);
    CHECK(trie_automaton_n_members(a) == 2);
    int32_t toks[8];
    size_t n;
    CHECK_ST(trie_allowed(a, trie_start(a), toks, 8, &n), TRIE_OK);
    CHECK(n == 2 && toks[0] == 1 && toks[1] == 5);
    trie_state s;
    CHECK_ST(trie_advance(a, trie_start(a), 6, &s), TRIE_ERR_TOKEN_REJECTED); /* [abc] was not given */
    trie_automaton_free(a);
    const int32_t *bad_seqs[] = {abc, bad};
    a = (trie_automaton *)0x1;
    CHECK_ST(trie_compile_tokens(v, bad_seqs, lens, 2, NULL, &a), TRIE_ERR_INVALID_ARGUMENT);
    CHECK(a == NULL && strstr(trie_last_error(), "token 1 of sequence 1") != NULL);
    const int32_t *null_seqs[] = {abc, NULL};
    CHECK_ST(trie_compile_tokens(v, null_seqs, lens, 2, NULL, &a), TRIE_ERR_NULL_ARGUMENT);
    CHECK_ST(trie_compile_tokens(v, NULL, NULL, 0, NULL, &a), TRIE_ERR_EMPTY_SET);
    trie_vocab_free(v);
}

static void test_large(void) {
    if (!getenv("TRIE_TEST_LARGE")) {
        skipped++;
        return;
    }
    trie_vocab *v = toy_vocab();
    size_t n = 1000000;
    char *buf = malloc(n * 8);
    const uint8_t **ptrs = malloc(n * sizeof *ptrs);
    size_t *lens = malloc(n * sizeof *lens);
    for (size_t i = 0; i < n; i++) {
        size_t x = i;
        for (int k = 0; k < 8; k++) {
            buf[i * 8 + k] = "abcde"[x % 5];
            x /= 5;
        }
        ptrs[i] = (const uint8_t *)(buf + i * 8);
        lens[i] = 8;
    }
    trie_automaton *a = NULL;
    CHECK_ST(trie_compile(v, ptrs, lens, n, NULL, &a), TRIE_OK);
    CHECK(trie_automaton_n_members(a) == 390625); /* 5^8 distinct strings */
    trie_automaton_free(a);
    free(buf);
    free(ptrs);
    free(lens);
    trie_vocab_free(v);
}

/* Incremental updates: trie_automaton_with gives what a full compile of the resulting set gives; the old
 * automaton stays valid; the usual argument checks. */
static void test_with_changes(void) {
    trie_vocab *v = toy_vocab();
    trie_status st;
    const char *set[] = {"abc", "ab", "bd"};
    trie_automaton *a = compile_strs(v, set, 3, NULL, &st);
    CHECK_ST(st, TRIE_OK);
    const uint8_t *add[2] = {(const uint8_t *)"bca", (const uint8_t *)"abd"};
    size_t add_lens[2] = {3, 3};
    const uint8_t *rm[2] = {(const uint8_t *)"ab", (const uint8_t *)"zz"}; /* "zz" is not a member: ignored */
    size_t rm_lens[2] = {2, 2};
    trie_automaton *b = (trie_automaton *)0x1;
    CHECK_ST(trie_automaton_with(a, add, add_lens, 2, rm, rm_lens, 2, NULL, &b), TRIE_OK);
    CHECK(b != NULL && b != a);
    CHECK(trie_automaton_n_members(b) == 4);
    CHECK(trie_automaton_n_members(a) == 3);
    /* The same as a full compile: every state's mask. */
    const char *want_set[] = {"bca", "abd", "abc", "bd"};
    trie_automaton *w = compile_strs(v, want_set, 4, NULL, &st);
    CHECK_ST(st, TRIE_OK);
    CHECK(trie_automaton_n_states(b) == trie_automaton_n_states(w));
    int same = 1;
    for (trie_state s = 0; s < (trie_state)trie_automaton_n_states(w); s++) {
        uint32_t mb[2], mw[2];
        CHECK_ST(trie_mask(b, s, mb, 2), TRIE_OK);
        CHECK_ST(trie_mask(w, s, mw, 2), TRIE_OK);
        same &= mb[0] == mw[0] && mb[1] == mw[1];
    }
    CHECK(same);
    /* "ab" was removed: after token "ab" (id 5) no end of generation in b, still one in a. */
    trie_state s;
    CHECK_ST(trie_advance(a, trie_start(a), 5, &s), TRIE_OK);
    CHECK(trie_is_accepting(a, s));
    CHECK_ST(trie_advance(b, trie_start(b), 5, &s), TRIE_OK);
    CHECK(!trie_is_accepting(b, s));
    trie_automaton_free(w);

    /* Removing everything; NULL arrays with zero counts; bad arguments. */
    const uint8_t *all[3] = {(const uint8_t *)"abc", (const uint8_t *)"ab", (const uint8_t *)"bd"};
    size_t all_lens[3] = {3, 2, 2};
    trie_automaton *out = (trie_automaton *)0x1;
    CHECK_ST(trie_automaton_with(a, NULL, NULL, 0, all, all_lens, 3, NULL, &out), TRIE_ERR_EMPTY_SET);
    CHECK(out == NULL);
    CHECK(strstr(trie_last_error(), "empty") != NULL);
    CHECK_ST(trie_automaton_with(a, NULL, NULL, 0, NULL, NULL, 0, NULL, &out), TRIE_OK);
    CHECK(out != NULL && trie_automaton_n_members(out) == 3);
    trie_automaton_free(out);
    out = (trie_automaton *)0x1;
    CHECK_ST(trie_automaton_with(NULL, add, add_lens, 2, NULL, NULL, 0, NULL, &out), TRIE_ERR_NULL_ARGUMENT);
    CHECK(out == NULL);
    CHECK_ST(trie_automaton_with(a, add, add_lens, 2, NULL, NULL, 0, NULL, NULL), TRIE_ERR_NULL_ARGUMENT);
    CHECK_ST(trie_automaton_with(a, NULL, add_lens, 2, NULL, NULL, 0, NULL, &out), TRIE_ERR_NULL_ARGUMENT);
    CHECK_ST(trie_automaton_with(a, add, NULL, 2, NULL, NULL, 0, NULL, &out), TRIE_ERR_NULL_ARGUMENT);
    CHECK_ST(trie_automaton_with(a, NULL, NULL, 0, rm, NULL, 2, NULL, &out), TRIE_ERR_NULL_ARGUMENT);
    /* An added string the vocabulary cannot produce ("z" has no token): named, or dropped. */
    const uint8_t *bad[1] = {(const uint8_t *)"az"};
    size_t bad_lens[1] = {2};
    CHECK_ST(trie_automaton_with(a, bad, bad_lens, 1, NULL, NULL, 0, NULL, &out), TRIE_ERR_UNREACHABLE_STRING);
    CHECK(strstr(trie_last_error(), "\"az\"") != NULL);
    trie_options o;
    CHECK_ST(trie_options_init(&o), TRIE_OK);
    o.drop_unreachable = true;
    CHECK_ST(trie_automaton_with(a, bad, bad_lens, 1, NULL, NULL, 0, &o, &out), TRIE_OK);
    const size_t *dropped = NULL;
    size_t n_dropped = 0;
    CHECK_ST(trie_automaton_dropped(out, &dropped, &n_dropped), TRIE_OK);
    CHECK(n_dropped == 1 && dropped[0] == 0);
    trie_automaton_free(out);
    o.max_states = 3;
    CHECK_ST(trie_automaton_with(a, add, add_lens, 2, NULL, NULL, 0, &o, &out), TRIE_ERR_LIMIT_EXCEEDED);

    /* The old automaton outlives the new one and still decodes. */
    trie_automaton_free(b);
    CHECK_ST(trie_advance(a, trie_start(a), 5, &s), TRIE_OK);
    trie_automaton_free(a);
    trie_vocab_free(v);
}


static bool keep_not_c(void *user, size_t member, const uint8_t *overflow, size_t len) {
    (*(int *)user)++;
    (void)member;
    return !(len >= 1 && overflow[0] == 'c');
}

/* Sets inside an output: a template, member identity, possible members and the hand-over of open segments. */
static void test_template(void) {
    trie_vocab *v = toy_vocab();
    trie_template t;
    CHECK_ST(trie_template_init(&t), TRIE_OK);
    CHECK(t.struct_size == sizeof t && t.render == TRIE_RENDER_RAW && t.end == TRIE_END_EOG);
    t.prefix = (const uint8_t *)"a";
    t.prefix_len = 1;
    t.suffix = (const uint8_t *)"b";
    t.suffix_len = 1;
    t.end = TRIE_END_OPEN;
    const uint8_t *ptrs[3] = {(const uint8_t *)"d", (const uint8_t *)"c", (const uint8_t *)"d"};
    size_t lens[3] = {1, 1, 1};
    trie_automaton *a = NULL;
    CHECK_ST(trie_compile_template(v, ptrs, lens, 3, &t, NULL, &a), TRIE_OK); /* segments "adb", "acb" */
    CHECK(a != NULL && trie_automaton_is_open(a) && trie_automaton_n_members(a) == 2);
    size_t ids[4] = {99, 99, 99, 99}, n = 0, m = 0, over = 0;
    CHECK_ST(trie_possible_members(a, trie_start(a), ids, 1, &n), TRIE_ERR_BUFFER_TOO_SMALL);
    CHECK(n == 2 && ids[0] == 99);
    CHECK_ST(trie_possible_members(a, trie_start(a), ids, 4, &n), TRIE_OK);
    CHECK(n == 2 && ids[0] == 1 && ids[1] == 0); /* "acb" < "adb": input indices 1 then 0 */
    trie_state s = trie_start(a), ac;
    CHECK_ST(trie_advance(a, s, 0, &s), TRIE_OK);  /* "a" */
    CHECK_ST(trie_advance(a, s, 2, &ac), TRIE_OK); /* "ac" */
    CHECK_ST(trie_member(a, ac, &m), TRIE_OK);
    CHECK(m == SIZE_MAX);
    /* "bc" (7) finishes "acb" and overflows "c"; "b" (1) stays inside the segment. */
    int32_t toks[4] = {-1, -1, -1, -1};
    uint32_t ov[4] = {0};
    CHECK_ST(trie_crossing(a, ac, NULL, NULL, toks, ov, ids, 4, &n), TRIE_OK);
    CHECK(n == 1 && toks[0] == 7 && ov[0] == 1 && ids[0] == 1);
    CHECK_ST(trie_crossing(a, ac, NULL, NULL, NULL, NULL, NULL, 0, &n), TRIE_ERR_BUFFER_TOO_SMALL);
    CHECK(n == 1);
    int calls = 0;
    CHECK_ST(trie_crossing(a, ac, keep_not_c, &calls, toks, ov, ids, 4, &n), TRIE_OK);
    CHECK(n == 0 && calls == 1);
    CHECK_ST(trie_cross(a, ac, 7, &m, &over), TRIE_OK);
    CHECK(m == 1 && over == 1);
    CHECK_ST(trie_cross(a, ac, 1, &m, &over), TRIE_ERR_TOKEN_REJECTED);
    CHECK(m == SIZE_MAX && strstr(trie_last_error(), "does not finish a segment") != NULL);
    CHECK_ST(trie_cross(a, ac, 1, NULL, &over), TRIE_ERR_NULL_ARGUMENT);
    trie_state end;
    CHECK_ST(trie_advance(a, ac, 1, &end), TRIE_OK); /* "acb": complete, handed over */
    CHECK_ST(trie_member(a, end, &m), TRIE_OK);
    CHECK(m == 1 && trie_is_accepting(a, end));
    CHECK_ST(trie_allowed(a, end, toks, 4, &n), TRIE_OK);
    CHECK(n == 0); /* open: neither the set nor end-of-generation */
    CHECK_ST(trie_member(a, 4242, &m), TRIE_ERR_INVALID_STATE);
    CHECK_ST(trie_member(NULL, end, &m), TRIE_ERR_NULL_ARGUMENT);
    trie_automaton_free(a);

    /* Bad templates and members. */
    t.end = TRIE_END_OPEN;
    const uint8_t *pre[2] = {(const uint8_t *)"c", (const uint8_t *)"cb"};
    size_t pl[2] = {1, 2};
    CHECK_ST(trie_compile_template(v, pre, pl, 2, &t, NULL, &a), TRIE_ERR_INVALID_ARGUMENT); /* "acb" < "acbb" */
    CHECK(a == NULL && strstr(trie_last_error(), "prefix") != NULL);
    t.render = 7;
    CHECK_ST(trie_compile_template(v, ptrs, lens, 3, &t, NULL, &a), TRIE_ERR_INVALID_ARGUMENT);
    CHECK(strstr(trie_last_error(), "render") != NULL);
    t.render = TRIE_RENDER_JSON_STRING;
    const uint8_t *bad[1] = {(const uint8_t *)"\xff"};
    size_t bl[1] = {1};
    CHECK_ST(trie_compile_template(v, bad, bl, 1, &t, NULL, &a), TRIE_ERR_INVALID_ARGUMENT);
    CHECK(strstr(trie_last_error(), "member 0") != NULL);
    t.struct_size = 0;
    CHECK_ST(trie_compile_template(v, ptrs, lens, 3, &t, NULL, &a), TRIE_ERR_INVALID_ARGUMENT);
    CHECK_ST(trie_compile_template(v, ptrs, lens, 3, NULL, NULL, &a), TRIE_ERR_NULL_ARGUMENT);
    CHECK_ST(trie_template_init(NULL), TRIE_ERR_NULL_ARGUMENT);
    trie_vocab_free(v);
}

int main(void) {
    test_version_and_status();
    test_vocab_new();
    test_vocab_accessors();
    test_compile();
    test_decode();
    test_forced();
    test_threads();
    test_files();
    test_saved_files();
    test_compile_tokens();
    test_with_changes();
    test_template();
    test_large();
    printf("%d passed, %d failed (%d skipped groups)\n", passed, failed, skipped);
    return failed ? 1 : 0;
}
