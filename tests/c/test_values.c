/* Members that carry values: trie_compile_with_values, trie_compile_template_with_values, trie_automaton_with_values,
 * trie_member_value, trie_possible_values; saved and loaded (eagerly and lazily) with their values; bad inputs. */
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

/* Every byte is a token, plus "ab" and an end of generation (id 257). */
static trie_vocab *byte_vocab(void) {
    static uint8_t bytes[256];
    const uint8_t *ptrs[258];
    size_t lens[258];
    uint32_t kinds[258];
    for (int i = 0; i < 256; i++) {
        bytes[i] = (uint8_t)i;
        ptrs[i] = &bytes[i];
        lens[i] = 1;
        kinds[i] = TRIE_TOKEN_NORMAL;
    }
    ptrs[256] = (const uint8_t *)"ab";
    lens[256] = 2;
    kinds[256] = TRIE_TOKEN_NORMAL;
    ptrs[257] = (const uint8_t *)"</s>";
    lens[257] = 4;
    kinds[257] = TRIE_TOKEN_CONTROL;
    int32_t eog = 257;
    trie_vocab *v = NULL;
    CHECK(trie_vocab_new(ptrs, lens, kinds, 258, &eog, 1, &v) == TRIE_OK);
    return v;
}

/* The state after spelling `text` byte by byte (the byte tokens), or TRIE_STATE_FINISHED on a rejected byte. */
static trie_state spell(const trie_automaton *a, const char *text) {
    trie_state s = trie_start(a);
    for (const char *p = text; *p; p++) {
        if (trie_advance(a, s, (int32_t)(uint8_t)*p, &s) != TRIE_OK) return TRIE_STATE_FINISHED;
    }
    return s;
}

/* The value of the member complete after `text`, or UINT64_MAX when none. */
static uint64_t value_at(const trie_automaton *a, const char *text) {
    uint64_t value = 1;
    bool found = true;
    trie_state s = spell(a, text);
    if (s == TRIE_STATE_FINISHED) return UINT64_MAX;
    CHECK(trie_member_value(a, s, &value, &found) == TRIE_OK);
    return found ? value : UINT64_MAX;
}

int main(void) {
    trie_vocab *v = byte_vocab();
    static const char *names[] = {"search", "book", "search_all", "book"};
    const uint8_t *ptrs[4];
    size_t lens[4];
    for (int i = 0; i < 4; i++) {
        ptrs[i] = (const uint8_t *)names[i];
        lens[i] = strlen(names[i]);
    }
    const uint64_t values[4] = {10, 20, 30, 40};

    /* A bare set: the first copy's value wins; prefixes and possible members. */
    trie_automaton *a = NULL;
    CHECK(trie_compile_with_values(v, ptrs, lens, values, 4, NULL, &a) == TRIE_OK);
    CHECK(a != NULL && trie_automaton_has_values(a));
    CHECK(value_at(a, "book") == 20 && value_at(a, "search") == 10 && value_at(a, "search_all") == 30);
    CHECK(value_at(a, "sea") == UINT64_MAX);
    size_t n = 99;
    uint64_t got[4] = {0};
    CHECK(trie_possible_values(a, spell(a, "se"), NULL, 0, &n) == TRIE_ERR_BUFFER_TOO_SMALL && n == 2);
    CHECK(trie_possible_values(a, spell(a, "se"), got, 4, &n) == TRIE_OK && n == 2 && got[0] == 10 && got[1] == 30);
    CHECK(trie_possible_values(a, trie_start(a), got, 4, &n) == TRIE_OK && n == 3 && got[0] == 20);

    /* An update: "book" re-added with a new value, "search" removed, "cancel" added. */
    static const char *add[] = {"cancel", "book"};
    const uint8_t *add_ptrs[2] = {(const uint8_t *)add[0], (const uint8_t *)add[1]};
    size_t add_lens[2] = {6, 4};
    const uint64_t add_values[2] = {50, 60};
    const uint8_t *rm_ptrs[1] = {(const uint8_t *)"search"};
    size_t rm_lens[1] = {6};
    trie_automaton *b = NULL;
    CHECK(trie_automaton_with_values(a, add_ptrs, add_lens, add_values, 2, rm_ptrs, rm_lens, 1, NULL, &b) == TRIE_OK);
    CHECK(value_at(b, "book") == 60 && value_at(b, "cancel") == 50 && value_at(b, "search_all") == 30);
    CHECK(value_at(b, "search") == UINT64_MAX);
    /* Updating a valued automaton without values is refused, and the out pointer is NULL. */
    trie_automaton *c = (trie_automaton *)1;
    CHECK(trie_automaton_with(a, add_ptrs, add_lens, 2, NULL, NULL, 0, NULL, &c) == TRIE_ERR_INVALID_ARGUMENT && !c);
    CHECK(strstr(trie_last_error(), "with_changes_and_values") != NULL);
    c = (trie_automaton *)1;
    CHECK(trie_automaton_with_values(a, add_ptrs, add_lens, NULL, 2, NULL, NULL, 0, NULL, &c) ==
              TRIE_ERR_NULL_ARGUMENT &&
          !c);
    CHECK(strstr(trie_last_error(), "add_values") != NULL);

    /* Saved and loaded (eagerly, lazily): the same values. */
    char dir[] = "/tmp/trie-values-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[256];
    snprintf(path, sizeof path, "%s/map.trie", dir);
    CHECK(trie_automaton_save(b, path) == TRIE_OK);
    trie_automaton *loaded = NULL, *lazy = NULL;
    CHECK(trie_automaton_load(v, path, &loaded) == TRIE_OK);
    CHECK(trie_automaton_load_lazy(v, path, &lazy) == TRIE_OK);
    CHECK(value_at(loaded, "book") == 60 && value_at(loaded, "cancel") == 50 && value_at(loaded, "search_all") == 30);
    CHECK(value_at(lazy, "book") == 60 && value_at(lazy, "cancel") == 50 && value_at(lazy, "search_all") == 30);
    unlink(path);
    rmdir(dir);

    /* A template with an open end: the value where the name hands over. */
    trie_template t;
    CHECK(trie_template_init(&t) == TRIE_OK);
    t.prefix = (const uint8_t *)"{\"name\": ";
    t.prefix_len = strlen("{\"name\": ");
    t.suffix = (const uint8_t *)", ";
    t.suffix_len = 2;
    t.render = TRIE_RENDER_JSON_STRING;
    t.end = TRIE_END_OPEN;
    trie_automaton *tpl = NULL;
    CHECK(trie_compile_template_with_values(v, ptrs, lens, values, 4, &t, NULL, &tpl) == TRIE_OK);
    CHECK(value_at(tpl, "{\"name\": \"book\", ") == 20 && value_at(tpl, "{\"name\": \"search_all\", ") == 30);
    size_t member = 0;
    CHECK(trie_member(tpl, spell(tpl, "{\"name\": \"book\", "), &member) == TRIE_OK && member == 1);

    /* Without values: no value anywhere, and an update with values is refused. */
    trie_automaton *plain = NULL;
    CHECK(trie_compile(v, ptrs, lens, 4, NULL, &plain) == TRIE_OK);
    CHECK(!trie_automaton_has_values(plain) && value_at(plain, "book") == UINT64_MAX);
    CHECK(trie_possible_values(plain, trie_start(plain), got, 4, &n) == TRIE_OK && n == 0);
    c = (trie_automaton *)1;
    CHECK(trie_automaton_with_values(plain, add_ptrs, add_lens, add_values, 2, NULL, NULL, 0, NULL, &c) ==
              TRIE_ERR_INVALID_ARGUMENT &&
          !c);

    /* Bad arguments: NULL values with strings, NULL out pointers, NULL automaton. */
    c = (trie_automaton *)1;
    CHECK(trie_compile_with_values(v, ptrs, lens, NULL, 4, NULL, &c) == TRIE_ERR_NULL_ARGUMENT && !c);
    CHECK(strstr(trie_last_error(), "values") != NULL);
    uint64_t value;
    bool found;
    CHECK(trie_member_value(a, 0, NULL, &found) == TRIE_ERR_NULL_ARGUMENT);
    CHECK(trie_member_value(a, 0, &value, NULL) == TRIE_ERR_NULL_ARGUMENT);
    CHECK(trie_member_value(NULL, 0, &value, &found) == TRIE_ERR_NULL_ARGUMENT && !found);
    CHECK(trie_member_value(a, 1u << 30, &value, &found) == TRIE_ERR_INVALID_STATE && !found);
    CHECK(trie_possible_values(a, 0, got, 4, NULL) == TRIE_ERR_NULL_ARGUMENT);
    CHECK(!trie_automaton_has_values(NULL));

    trie_automaton_free(plain);
    trie_automaton_free(tpl);
    trie_automaton_free(lazy);
    trie_automaton_free(loaded);
    trie_automaton_free(b);
    trie_automaton_free(a);
    trie_vocab_free(v);
    printf("test_values: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
