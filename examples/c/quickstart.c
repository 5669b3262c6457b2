/* The README's C example, whole: compile two tool names against a model's vocabulary and decode one member with a
 * stand-in for the model (it takes the last allowed token). CMake builds this file and ctest runs it
 * (example_c_quickstart, scripts/test-c.sh); scripts/check-docs.py checks the README's copy of the docs: region.
 *
 *   trie_example_c_quickstart MODEL.gguf */
#include <trie.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s MODEL.gguf\n", argv[0]);
        return 2;
    }
    char text[64] = "";
    /* docs:begin decode */
    trie_vocab *vocab;
    trie_automaton *a;
    const uint8_t *set[] = {(const uint8_t *)"calendar.create_event", (const uint8_t *)"weather.get_forecast"};
    size_t lens[] = {21, 20};
    if (trie_vocab_from_gguf(argv[1], &vocab) || trie_compile(vocab, set, lens, 2, NULL, &a))
        return fprintf(stderr, "%s\n", trie_last_error()), 1;      /* every error says what and why */
    uint32_t *mask = calloc(trie_automaton_mask_words(a), 4);       /* ceil(V / 32) words */
    int32_t *allowed = calloc(trie_automaton_n_vocab(a), 4), token;
    size_t n, len; const uint8_t *bytes;
    for (trie_state s = trie_start(a); s != TRIE_STATE_FINISHED;) {
        trie_mask(a, s, mask, trie_automaton_mask_words(a));        /* apply to the logits */
        trie_allowed(a, s, allowed, trie_automaton_n_vocab(a), &n);
        token = allowed[n - 1];                                     /* your sampler; here the last allowed id */
        if (trie_advance(a, s, token, &s)) return 1;                /* TRIE_ERR_TOKEN_REJECTED if not allowed */
        if (s != TRIE_STATE_FINISHED && !trie_vocab_token(vocab, token, &bytes, &len)) strncat(text, (char *)bytes, len);
    }
    /* docs:end decode */
    printf("%s\n", text);
    int member = strcmp(text, "calendar.create_event") == 0 || strcmp(text, "weather.get_forecast") == 0;

    /* docs:begin update */
    const uint8_t *add[] = {(const uint8_t *)"calendar.delete_event"};
    size_t add_len[] = {21};
    trie_automaton *b;                  /* `a` stays valid: sequences in flight on it finish there */
    if (trie_automaton_with(a, add, add_len, 1, NULL, NULL, 0, NULL, &b)) return 1;
    /* docs:end update */
    printf("updated: %zu members\n", trie_automaton_n_members(b));
    int ok = member && trie_automaton_n_members(b) == 3;
    free(mask);
    free(allowed);
    trie_automaton_free(b);
    trie_automaton_free(a);
    trie_vocab_free(vocab);
    return ok ? 0 : 1;
}
