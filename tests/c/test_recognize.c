/* C tests of the recognizer calls (trie_recognize and trie_recognized_*): sets, "not a set", errors, NULLs, and a
 * recognized set compiled with trie_compile. Prints "N passed, N failed"; exits non-zero on any failure. */
#include "trie.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

static int passed, failed;

#define CHECK(cond)                                                                                              \
    do {                                                                                                         \
        if (cond) {                                                                                              \
            passed++;                                                                                            \
        } else {                                                                                                 \
            failed++;                                                                                            \
            fprintf(stderr, "FAIL %s:%d: %s (last error: %s; reason: %s)\n", __FILE__, __LINE__, #cond,         \
                    trie_last_error(), trie_recognize_reason());                                                 \
        }                                                                                                        \
    } while (0)

static trie_recognized *rec(uint32_t kind, const char *text, trie_status want) {
    trie_recognized *r = (trie_recognized *)1;
    CHECK(trie_recognize(kind, (const uint8_t *)text, strlen(text), &r) == want);
    return r;
}

static int member_is(const trie_recognized *r, size_t i, const char *want, size_t want_len) {
    const uint8_t *p = NULL;
    size_t n = 0;
    return trie_recognized_member(r, i, &p, &n) == TRIE_OK && n == want_len && memcmp(p, want, n) == 0;
}

static void test_grammar_and_compile(void) {
    /* vLLM's choice_as_grammar for ["ab", "c", "q\"\n", ""]. */
    trie_recognized *r = rec(TRIE_RECOGNIZE_GRAMMAR, "root ::= \"ab\" | \"c\" | \"q\\\"\\n\" | \"\"", TRIE_OK);
    CHECK(r != NULL);
    CHECK(trie_recognized_n_members(r) == 4);
    CHECK(member_is(r, 0, "ab", 2) && member_is(r, 1, "c", 1) && member_is(r, 2, "q\"\n", 3) && member_is(r, 3, "", 0));
    CHECK(trie_recognized_render(r) == TRIE_RENDER_RAW && trie_recognized_end(r) == TRIE_END_EOG);
    CHECK(!trie_recognized_trailing_whitespace(r) && !trie_recognized_has_payloads(r));
    const uint8_t *p = (const uint8_t *)1;
    size_t n = 7;
    CHECK(trie_recognized_prefix(r, &p, &n) == TRIE_OK && n == 0);
    CHECK(trie_recognized_member(r, 4, &p, &n) == TRIE_ERR_INVALID_ARGUMENT && p == NULL && n == 0);
    CHECK(strstr(trie_last_error(), "out of range") != NULL);
    CHECK(trie_recognized_payload(r, 0, &p, &n) == TRIE_ERR_INVALID_ARGUMENT);
    CHECK(trie_recognized_member(r, 0, NULL, &n) == TRIE_ERR_NULL_ARGUMENT);
    trie_recognized_free(r);

    /* The members arrays go straight into trie_compile (a byte-level toy vocabulary). */
    r = rec(TRIE_RECOGNIZE_CHOICES, "[\"ab\", \"ba\", \"b\"]", TRIE_OK);
    const uint8_t *toks[3] = {(const uint8_t *)"a", (const uint8_t *)"b", (const uint8_t *)"</s>"};
    size_t tlens[3] = {1, 1, 4};
    uint32_t kinds[3] = {TRIE_TOKEN_NORMAL, TRIE_TOKEN_NORMAL, TRIE_TOKEN_CONTROL};
    int32_t eog = 2;
    trie_vocab *v = NULL;
    CHECK(trie_vocab_new(toks, tlens, kinds, 3, &eog, 1, &v) == TRIE_OK);
    const uint8_t *const *strings = NULL;
    const size_t *lens = NULL;
    CHECK(trie_recognized_members(r, &strings, &lens) == TRIE_OK && strings && lens);
    trie_automaton *a = NULL;
    CHECK(trie_compile(v, strings, lens, trie_recognized_n_members(r), NULL, &a) == TRIE_OK);
    CHECK(trie_automaton_n_members(a) == 3);
    trie_automaton_free(a);
    trie_vocab_free(v);
    trie_recognized_free(r);
}

static void test_json_and_tools(void) {
    /* llama.cpp's json_schema_to_grammar output for {"enum": ["a", "b"]}: JSON strings, the space rule unused. */
    trie_recognized *r = rec(TRIE_RECOGNIZE_GRAMMAR,
                             "root ::= (\"\\\"a\\\"\" | \"\\\"b\\\"\")\nspace ::= | \" \" | \"\\n\"{1,2} [ \\t]{0,20}\n",
                             TRIE_OK);
    CHECK(r && trie_recognized_render(r) == TRIE_RENDER_JSON_STRING && member_is(r, 1, "b", 1));
    trie_recognized_free(r);
    r = rec(TRIE_RECOGNIZE_JSON_SCHEMA, "{\"enum\": [\"x\", 1, null]}", TRIE_OK);
    CHECK(r && trie_recognized_render(r) == TRIE_RENDER_JSON_TEXT && member_is(r, 0, "\"x\"", 3));
    trie_recognized_free(r);
    r = rec(TRIE_RECOGNIZE_TOOLS,
            "[{\"type\": \"function\", \"function\": {\"name\": \"get\", \"parameters\": {\"type\": \"object\"}}}]",
            TRIE_OK);
    CHECK(r && trie_recognized_end(r) == TRIE_END_OPEN && trie_recognized_has_payloads(r));
    const uint8_t *p = NULL;
    size_t n = 0;
    CHECK(trie_recognized_payload(r, 0, &p, &n) == TRIE_OK && n == 18 && memcmp(p, "{\"type\": \"object\"}", n) == 0);
    CHECK(trie_recognized_prefix(r, &p, &n) == TRIE_OK && n == 9 && memcmp(p, "{\"name\": ", n) == 0);
    CHECK(trie_recognized_suffix(r, &p, &n) == TRIE_OK && n == 15 && memcmp(p, ", \"arguments\": ", n) == 0);
    trie_recognized_free(r);
    r = rec(TRIE_RECOGNIZE_REGEX, "^(?:a|b\\.c)$", TRIE_OK);
    CHECK(r && member_is(r, 1, "b.c", 3));
    trie_recognized_free(r);
}

static void test_not_sets_and_errors(void) {
    CHECK(rec(TRIE_RECOGNIZE_GRAMMAR, "root ::= \"a\" | [bc]", TRIE_OK) == NULL);
    CHECK(strstr(trie_recognize_reason(), "character class") != NULL);
    CHECK(rec(TRIE_RECOGNIZE_JSON_SCHEMA, "{\"type\": \"string\", \"minLength\": 2}", TRIE_OK) == NULL);
    CHECK(strstr(trie_recognize_reason(), "minLength") != NULL);
    CHECK(rec(TRIE_RECOGNIZE_REGEX, "[a-z]+", TRIE_OK) == NULL);
    CHECK(rec(TRIE_RECOGNIZE_GRAMMAR, "root ::= \"a", TRIE_ERR_INVALID_ARGUMENT) == NULL);
    CHECK(strstr(trie_last_error(), "unterminated") != NULL && strcmp(trie_recognize_reason(), "") == 0);
    CHECK(rec(TRIE_RECOGNIZE_CHOICES, "[]", TRIE_ERR_EMPTY_SET) == NULL);
    CHECK(rec(TRIE_RECOGNIZE_CHOICES, "[\"a\", \"a\"]", TRIE_ERR_INVALID_ARGUMENT) == NULL);
    CHECK(rec(TRIE_RECOGNIZE_TOOLS, "[{\"function\": {}}]", TRIE_ERR_INVALID_ARGUMENT) == NULL);
    CHECK(strstr(trie_last_error(), "tool 0 has no name") != NULL);
    CHECK(rec(99, "[]", TRIE_ERR_INVALID_ARGUMENT) == NULL);
    trie_recognized *r = NULL;
    const uint8_t bad[] = {'[', '"', 0xff, '"', ']'};
    CHECK(trie_recognize(TRIE_RECOGNIZE_CHOICES, bad, sizeof bad, &r) == TRIE_ERR_INVALID_ARGUMENT && r == NULL);
    CHECK(strstr(trie_last_error(), "not UTF-8") != NULL);
    CHECK(trie_recognize(TRIE_RECOGNIZE_CHOICES, NULL, 3, &r) == TRIE_ERR_NULL_ARGUMENT);
    CHECK(trie_recognize(TRIE_RECOGNIZE_CHOICES, bad, sizeof bad, NULL) == TRIE_ERR_NULL_ARGUMENT);
    const uint8_t *const *strings = NULL;
    const size_t *lens = NULL;
    CHECK(trie_recognized_members(NULL, &strings, &lens) == TRIE_ERR_NULL_ARGUMENT);
    CHECK(trie_recognized_n_members(NULL) == 0 && trie_recognized_render(NULL) == TRIE_RENDER_RAW);
    CHECK(!trie_recognized_trailing_whitespace(NULL) && !trie_recognized_has_payloads(NULL));
    trie_recognized_free(NULL);
}

static void test_limits_vllm_and_depth(void) {
    trie_recognize_limits l;
    CHECK(trie_recognize_limits_init(&l) == TRIE_OK && l.struct_size == sizeof l);
    CHECK(l.max_text_bytes == 8u << 20 && l.max_members == 10000 && l.max_member_bytes == 1u << 20 && l.max_depth == 64);
    const char *bomb = "root ::= d d d d d d d \"\"\nd ::= \"0\" | \"1\" | \"2\" | \"3\" | \"4\" | \"5\" | \"6\" | \"7\" | "
                       "\"8\" | \"9\"";
    trie_recognized *r = (trie_recognized *)1;
    CHECK(trie_recognize_with(TRIE_RECOGNIZE_GRAMMAR, (const uint8_t *)bomb, strlen(bomb), &l, &r) ==
              TRIE_ERR_LIMIT_EXCEEDED &&
          r == NULL);
    CHECK(strstr(trie_last_error(), "max_members = 10000") != NULL);
    l.max_members = 1;
    const char *two = "[\"a\", \"b\"]";
    CHECK(trie_recognize_with(TRIE_RECOGNIZE_CHOICES, (const uint8_t *)two, strlen(two), &l, &r) ==
          TRIE_ERR_LIMIT_EXCEEDED);
    CHECK(trie_recognize_with(TRIE_RECOGNIZE_CHOICES, (const uint8_t *)two, strlen(two), NULL, &r) == TRIE_OK && r);
    trie_recognized_free(r);
    /* An older header's smaller struct: max_members is not read, its default applies. */
    l.struct_size = offsetof(trie_recognize_limits, max_members);
    CHECK(trie_recognize_with(TRIE_RECOGNIZE_CHOICES, (const uint8_t *)two, strlen(two), &l, &r) == TRIE_OK && r);
    trie_recognized_free(r);
    /* Duplicates that do not change the language are served once. */
    r = rec(TRIE_RECOGNIZE_GRAMMAR, "root ::= \"a\" | \"a\"", TRIE_OK);
    CHECK(r && trie_recognized_n_members(r) == 1);
    trie_recognized_free(r);
    /* vLLM's tool_choice="required" schema. */
    const char *v = "{\"type\": \"array\", \"minItems\": 1, \"items\": {\"type\": \"object\", \"anyOf\": [{\"properties\": "
                    "{\"name\": {\"type\": \"string\", \"enum\": [\"f\"]}, \"parameters\": {\"type\": \"object\"}}, "
                    "\"required\": [\"name\", \"parameters\"]}]}}";
    r = rec(TRIE_RECOGNIZE_VLLM_TOOLS, v, TRIE_OK);
    CHECK(r && trie_recognized_n_members(r) == 1 && member_is(r, 0, "f", 1) && trie_recognized_has_payloads(r));
    const uint8_t *p = NULL;
    size_t n = 0;
    CHECK(trie_recognized_prefix(r, &p, &n) == TRIE_OK && n == 10 && memcmp(p, "[{\"name\": ", 10) == 0);
    CHECK(trie_recognized_end(r) == TRIE_END_OPEN);
    trie_recognized_free(r);
    /* JSON nesting on the raw text. */
    CHECK(trie_json_check_depth((const uint8_t *)"[[\"[[[\"]]", 9, 2) == TRIE_OK);
    CHECK(trie_json_check_depth((const uint8_t *)"[[[]]]", 6, 2) == TRIE_ERR_LIMIT_EXCEEDED);
    CHECK(strstr(trie_last_error(), "max_depth = 2") != NULL);
    CHECK(trie_json_check_depth(NULL, 1, 2) == TRIE_ERR_NULL_ARGUMENT);
    CHECK(trie_recognize_limits_init(NULL) == TRIE_ERR_NULL_ARGUMENT);
}

int main(void) {
    test_grammar_and_compile();
    test_limits_vllm_and_depth();
    test_json_and_tools();
    test_not_sets_and_errors();
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
