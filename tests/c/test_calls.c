/* The tool-call engine from C (trie_calls_*), the way an engine such as llama-server drives it: the argument
 * matcher is the caller's (here a matcher over one fixed text per tool, standing in for a llama.cpp grammar
 * sampler), given as a table of callbacks; a parallel JSON list of two calls is decoded token by token, rolled back
 * and replayed, and every matcher is released. */
#include <trie.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int passed, failed;

#define CHECK(cond)                                                                                   \
    do {                                                                                              \
        if (cond) {                                                                                   \
            passed++;                                                                                 \
        } else {                                                                                      \
            failed++;                                                                                 \
            fprintf(stderr, "%s:%d: CHECK(%s) failed (last error: %s)\n", __FILE__, __LINE__, #cond, \
                    trie_last_error());                                                               \
        }                                                                                             \
    } while (0)

enum { N_TOKENS = 258, EOS = 257, WORDS = (N_TOKENS + 31) / 32 };

/* 256 byte tokens, "<tool_call>" (256), "</s>" (257, control, end of generation). */
static trie_vocab *make_vocab(void) {
    static uint8_t bytes[256];
    const uint8_t *ptrs[N_TOKENS];
    size_t lens[N_TOKENS];
    uint32_t kinds[N_TOKENS];
    for (int i = 0; i < 256; i++) {
        bytes[i] = (uint8_t)i;
        ptrs[i] = &bytes[i];
        lens[i] = 1;
        kinds[i] = TRIE_TOKEN_NORMAL;
    }
    ptrs[256] = (const uint8_t *)"<tool_call>";
    lens[256] = 11;
    kinds[256] = TRIE_TOKEN_NORMAL;
    ptrs[257] = (const uint8_t *)"</s>";
    lens[257] = 4;
    kinds[257] = TRIE_TOKEN_CONTROL;
    int32_t eog = EOS;
    trie_vocab *v = NULL;
    CHECK(trie_vocab_new(ptrs, lens, kinds, N_TOKENS, &eog, 1, &v) == TRIE_OK);
    return v;
}

/* The caller's side: the arguments of each tool; a matcher follows one text (arguments + close + "]" or ", "). */
struct user {
    const char *args[2];
    int made, released, freed;
};

struct matcher {
    char text[2][64];
    int n_texts;
    char buf[128]; /* the bytes accepted: buf[0..len[depth]] */
    size_t len[128];
    int depth;
};

static void *cb_make(void *u, size_t tool, bool last) {
    struct user *user = u;
    struct matcher *m = calloc(1, sizeof *m);
    snprintf(m->text[0], sizeof m->text[0], "%s}]", user->args[tool]);
    snprintf(m->text[1], sizeof m->text[1], "%s}, ", user->args[tool]);
    m->n_texts = last ? 1 : 2;
    user->made++;
    return m;
}

static bool fits(const struct matcher *m, int token) {
    size_t n = m->len[m->depth];
    for (int i = 0; i < m->n_texts; i++)
        if (token >= 0 && token < 256 && strlen(m->text[i]) > n && strncmp(m->text[i], m->buf, n) == 0 &&
            (unsigned char)m->text[i][n] == token)
            return true;
    return false;
}

static bool cb_accept(void *u, void *mp, int32_t token) {
    (void)u;
    struct matcher *m = mp;
    if (!fits(m, token)) return false;
    size_t n = m->len[m->depth];
    m->buf[n] = (char)token;
    m->len[++m->depth] = n + 1;
    return true;
}

static bool cb_fill(void *u, void *mp, uint32_t *row, size_t words) {
    (void)u;
    struct matcher *m = mp;
    memset(row, 0, words * sizeof *row);
    for (int t = 0; t < 256; t++)
        if (fits(m, t)) row[t / 32] |= 1u << (t % 32);
    return true;
}

static void cb_rollback(void *u, void *mp, size_t n) {
    (void)u;
    ((struct matcher *)mp)->depth -= (int)n;
}

static int32_t cb_completed(void *u, void *mp) {
    (void)u;
    struct matcher *m = mp;
    size_t n = m->len[m->depth];
    for (int i = 0; i < m->n_texts; i++)
        if (strlen(m->text[i]) == n && strncmp(m->text[i], m->buf, n) == 0) return 1;
    return 0;
}

static void cb_release(void *u, void *mp) {
    ((struct user *)u)->released++;
    free(mp);
}

static void cb_free_user(void *u) { ((struct user *)u)->freed++; }

static int n_allowed(trie_calls_matcher *m, int *first) {
    uint32_t row[WORDS];
    CHECK(trie_calls_fill_bitmask(m, row, WORDS) == TRIE_OK);
    int n = 0;
    for (int t = 0; t < WORDS * 32; t++)
        if (row[t / 32] >> (t % 32) & 1) {
            if (n++ == 0 && first) *first = t;
        }
    return n;
}

static int feed(trie_calls_matcher *m, const char *text) {
    for (const char *p = text; *p; p++)
        if (trie_calls_accept(m, (unsigned char)*p) != TRIE_OK) return 0;
    return 1;
}

int main(void) {
    trie_vocab *v = make_vocab();
    const char *names[] = {"get_weather", "get_time"};
    const uint8_t *ptrs[] = {(const uint8_t *)names[0], (const uint8_t *)names[1]};
    size_t lens[] = {strlen(names[0]), strlen(names[1])};
    trie_calls_format f;
    CHECK(trie_calls_format_init(&f, "json") == TRIE_OK);
    CHECK(!f.has_trigger && f.more_len == 2 && memcmp(f.last, "]", 1) == 0);
    trie_calls_config c;
    CHECK(trie_calls_config_init(&c) == TRIE_OK);
    int32_t stops[] = {EOS};
    c.mode = TRIE_CALLS_REQUIRED;
    c.parallel = true;
    c.stops = stops;
    c.n_stops = 1;
    trie_calls *calls = NULL;
    CHECK(trie_calls_new(v, ptrs, lens, 2, &f, &c, NULL, &calls) == TRIE_OK);
    trie_vocab_free(v);

    struct user user = {{"{\"city\": \"Paris\"}", "{}"}, 0, 0, 0};
    trie_calls_callbacks cb = {sizeof cb, &user, cb_make, NULL, cb_accept, cb_fill, cb_rollback, cb_completed,
                               cb_release, cb_free_user};
    trie_calls_matcher *m = NULL;
    CHECK(trie_calls_matcher_new(calls, &cb, &m) == TRIE_OK);
    trie_calls_free(calls);

    int first = -1;
    CHECK(n_allowed(m, &first) == 1 && first == '[');
    CHECK(feed(m, "[{\"name\": \"get_weather\", \"parameters\": "));
    trie_calls_info info;
    CHECK(trie_calls_info_of(m, &info) == TRIE_OK);
    CHECK(info.phase == TRIE_CALLS_PHASE_ARGS && info.has_tool && info.tool == 0 && user.made == 1);
    CHECK(n_allowed(m, &first) == 1 && first == '{');
    CHECK(feed(m, "{\"city\": \"Paris\"}}, "));
    CHECK(trie_calls_info_of(m, &info) == TRIE_OK);
    CHECK(info.phase == TRIE_CALLS_PHASE_NAME && info.calls == 1);
    CHECK(feed(m, "{\"name\": \"get_time\", \"parameters\": {}}]"));
    CHECK(trie_calls_info_of(m, &info) == TRIE_OK);
    CHECK(info.phase == TRIE_CALLS_PHASE_END && info.calls == 2 && info.tool == 1);
    CHECK(n_allowed(m, &first) == 1 && first == EOS);
    /* Rollback into the second call's arguments, then the replay ends the same way. */
    size_t before = info.n_accepted;
    CHECK(trie_calls_rollback(m, 3) == TRIE_OK);
    CHECK(trie_calls_info_of(m, &info) == TRIE_OK);
    CHECK(info.phase == TRIE_CALLS_PHASE_ARGS && info.n_accepted == before - 3);
    int32_t rest[] = {'{', '}', '}', ']', EOS};
    size_t n = 0;
    CHECK(trie_calls_validate(m, rest, 5, &n) == TRIE_OK && n == 0);
    CHECK(trie_calls_validate(m, rest + 1, 4, &n) == TRIE_OK && n == 4);
    CHECK(feed(m, "}}]"));
    CHECK(trie_calls_accept(m, EOS) == TRIE_OK && trie_calls_is_terminated(m));
    CHECK(trie_calls_accept(m, 'x') == TRIE_OK); /* after the end: ignored */
    trie_calls_matcher_free(m);
    CHECK(user.made == 2 && user.released == 2 && user.freed == 1);

    printf("test_calls: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
