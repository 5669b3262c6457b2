/* trie_automaton_load_lazy: the same automaton as trie_automaton_load, the same status codes, checks on first use. */
#define _POSIX_C_SOURCE 200809L
#include <trie.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* Tokens a..e, "ab", "abc", "bc", end of generation (id 8). */
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
    CHECK(trie_vocab_new(ptrs, lens, kinds, 9, &eog, 1, &v) == TRIE_OK);
    return v;
}

static void write_bytes(const char *path, const unsigned char *buf, size_t n) {
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL && fwrite(buf, 1, n, f) == n);
    if (f) fclose(f);
}

int main(void) {
    trie_vocab *v = toy_vocab();
    static const char *set[] = {"abcab", "abd", "bc", "e", "ee", "abcabcd"};
    const uint8_t *ptrs[6];
    size_t lens[6];
    for (int i = 0; i < 6; i++) {
        ptrs[i] = (const uint8_t *)set[i];
        lens[i] = strlen(set[i]);
    }
    trie_automaton *a = NULL;
    CHECK(trie_compile(v, ptrs, lens, 6, NULL, &a) == TRIE_OK);
    char dir[] = "/tmp/trie-lazy-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[256], bad[256];
    snprintf(path, sizeof path, "%s/set.trie", dir);
    snprintf(bad, sizeof bad, "%s/bad.trie", dir);
    CHECK(trie_automaton_save(a, path) == TRIE_OK);

    /* The same automaton: states, masks, allowed lists, steps. */
    trie_automaton *b = NULL;
    CHECK(trie_automaton_load_lazy(v, path, &b) == TRIE_OK && b != NULL);
    CHECK(trie_automaton_n_states(a) == trie_automaton_n_states(b));
    CHECK(trie_automaton_n_members(a) == trie_automaton_n_members(b));
    for (trie_state s = 0; s < trie_automaton_n_states(a); s++) {
        uint32_t ma = 0, mb = 0;
        int32_t ta[16], tb[16];
        size_t na = 0, nb = 0;
        CHECK(trie_mask(a, s, &ma, 1) == TRIE_OK && trie_mask(b, s, &mb, 1) == TRIE_OK && ma == mb);
        CHECK(trie_allowed(a, s, ta, 16, &na) == TRIE_OK && trie_allowed(b, s, tb, 16, &nb) == TRIE_OK);
        CHECK(na == nb && memcmp(ta, tb, na * sizeof *ta) == 0);
        for (int32_t t = 0; t < 9; t++) {
            trie_state sa = 0, sb = 0;
            trie_status xa = trie_advance(a, s, t, &sa), xb = trie_advance(b, s, t, &sb);
            CHECK(xa == xb && (xa != TRIE_OK || sa == sb));
        }
    }
    trie_automaton_free(b);

    /* The same status codes as trie_automaton_load. */
    FILE *f = fopen(path, "rb");
    static unsigned char buf[1 << 16];
    size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
    if (f) fclose(f);
    CHECK(n > 64 && n < sizeof buf);
    buf[20] ^= 0x01; /* the header's section count: the checksum fails */
    write_bytes(bad, buf, n);
    b = (trie_automaton *)0x1;
    CHECK(trie_automaton_load_lazy(v, bad, &b) == TRIE_ERR_MALFORMED_FILE && b == NULL);
    CHECK(trie_automaton_load(v, bad, &b) == TRIE_ERR_MALFORMED_FILE && b == NULL);
    buf[20] ^= 0x01;
    write_bytes(bad, buf, n - 7); /* truncated */
    CHECK(trie_automaton_load_lazy(v, bad, &b) == TRIE_ERR_MALFORMED_FILE && b == NULL);
    /* A damaged body: refused at load or, lazily, by the first use of a state that reads it; never a crash. */
    buf[n / 2] ^= 0x10;
    write_bytes(bad, buf, n);
    trie_status st = trie_automaton_load_lazy(v, bad, &b);
    CHECK(st == TRIE_OK || st == TRIE_ERR_MALFORMED_FILE);
    if (st == TRIE_OK) {
        int malformed = 0;
        for (trie_state s = 0; s < trie_automaton_n_states(b); s++) {
            uint32_t m = 0;
            trie_status x = trie_mask(b, s, &m, 1);
            CHECK(x == TRIE_OK || x == TRIE_ERR_MALFORMED_FILE);
            malformed += x == TRIE_ERR_MALFORMED_FILE;
        }
        CHECK(malformed > 0);
        trie_automaton_free(b);
    } else {
        CHECK(b == NULL);
    }
    trie_vocab *other = NULL;
    static const char *texts[] = {"a", "b", "c", "d", "e", "ab", "abc", "bc", "</s>"};
    const uint8_t *tp[9];
    size_t tl[9];
    for (int i = 0; i < 9; i++) {
        tp[i] = (const uint8_t *)texts[i];
        tl[i] = strlen(texts[i]);
    }
    CHECK(trie_vocab_new(tp, tl, NULL, 9, NULL, 0, &other) == TRIE_OK);
    b = (trie_automaton *)0x1;
    CHECK(trie_automaton_load_lazy(other, path, &b) == TRIE_ERR_VOCAB_MISMATCH && b == NULL);
    CHECK(strstr(trie_last_error(), "another vocabulary") != NULL);
    trie_vocab_free(other);
    CHECK(trie_automaton_load_lazy(v, "/nonexistent/x.trie", &b) == TRIE_ERR_IO && b == NULL);
    CHECK(trie_automaton_load_lazy(NULL, path, &b) == TRIE_ERR_NULL_ARGUMENT);
    CHECK(trie_automaton_load_lazy(v, NULL, &b) == TRIE_ERR_NULL_ARGUMENT);
    CHECK(trie_automaton_load_lazy(v, path, NULL) == TRIE_ERR_NULL_ARGUMENT);

    unlink(path);
    unlink(bad);
    rmdir(dir);
    trie_automaton_free(a);
    trie_vocab_free(v);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
