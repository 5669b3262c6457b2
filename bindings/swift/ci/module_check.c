/* CI check of the CTrie module (no Swift toolchain here): imports the module the way Swift does, through
 * Sources/CTrie/module.modulemap (shim.h -> trie.h), and walks the same calls the Swift binding makes.
 *
 *   clang -fmodules -fmodule-map-file=Sources/CTrie/module.modulemap $(pkg-config --cflags trie) \
 *         ci/module_check.c $(pkg-config --libs trie) -o module_check
 *   ./module_check VOCAB.gguf */
#pragma clang module import CTrie

#include <stdio.h>
#include <string.h>

#ifdef CTRIE_WITH_OBJC
int ctrie_objc_check(void); /* ci/module_check.m, compiled with @import CTrie */
#endif

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "FAILED line %d: %s (%s)\n", __LINE__, #cond, trie_last_error()); \
            return 1;                                                                \
        }                                                                            \
    } while (0)

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s VOCAB.gguf\n", argv[0]);
        return 2;
    }
    printf("CTrie module: libtrie %s, header %s\n", trie_version(), TRIE_VERSION_STRING);
    CHECK(strcmp(trie_version(), TRIE_VERSION_STRING) == 0);
#ifdef CTRIE_WITH_OBJC
    CHECK(ctrie_objc_check() == 0);
    printf("@import CTrie (Objective-C): ok\n");
#endif

    trie_vocab *vocab = NULL;
    CHECK(trie_vocab_from_gguf(argv[1], &vocab) == TRIE_OK && vocab);
    size_t n_tokens = trie_vocab_n_tokens(vocab);
    const int32_t *eog;
    size_t n_eog;
    CHECK(trie_vocab_eog_ids(vocab, &eog, &n_eog) == TRIE_OK && n_eog > 0);

    const char *members[] = {"github.create_issue", "github.close_issue", "slack.send_message"};
    const uint8_t *ptrs[3];
    size_t lens[3];
    for (int i = 0; i < 3; i++) {
        ptrs[i] = (const uint8_t *)members[i];
        lens[i] = strlen(members[i]);
    }
    trie_options options;
    CHECK(trie_options_init(&options) == TRIE_OK);
    options.drop_unreachable = false;
    trie_automaton *a = NULL;
    CHECK(trie_compile(vocab, ptrs, lens, 3, &options, &a) == TRIE_OK && a);
    CHECK(trie_automaton_n_members(a) == 3);
    size_t words = trie_automaton_mask_words(a);
    CHECK(words == (n_tokens + 31) / 32);

    /* Walk "slack.send_message" with the longest allowed token at each step, then an end-of-generation token. */
    const char *target = members[2];
    size_t pos = 0, steps = 0;
    uint32_t mask[8192];
    CHECK(words <= sizeof mask / sizeof mask[0]);
    trie_state s = trie_start(a);
    while (s != TRIE_STATE_FINISHED) {
        const int32_t *allowed;
        size_t n_allowed;
        CHECK(trie_allowed(a, s, &allowed, &n_allowed) == TRIE_OK && n_allowed > 0);
        CHECK(trie_mask(a, s, mask, words) == TRIE_OK);
        int32_t best = -1;
        size_t best_len = 0;
        for (size_t i = 0; i < n_allowed; i++) {
            int32_t t = allowed[i];
            CHECK(mask[t / 32] >> (t % 32) & 1u);
            int is_eog = 0;
            for (size_t e = 0; e < n_eog; e++) is_eog |= eog[e] == t;
            if (is_eog) {
                if (pos == strlen(target) && trie_is_accepting(a, s) && best < 0) best = t;
                continue;
            }
            const uint8_t *bytes;
            size_t len;
            CHECK(trie_vocab_token(vocab, t, &bytes, &len) == TRIE_OK);
            if (len > best_len && pos + len <= strlen(target) && memcmp(target + pos, bytes, len) == 0) {
                best = t;
                best_len = len;
            }
        }
        CHECK(best >= 0);
        if (steps == 1) { /* a single member is left: the forced continuation spells the rest */
            size_t nb = 0, nt = 0;
            bool forced = false;
            trie_status st = trie_forced(a, s, NULL, 0, &nb, NULL, 0, &nt, &forced);
            CHECK((st == TRIE_OK || st == TRIE_ERR_BUFFER_TOO_SMALL) && forced && nb > 0);
            CHECK(pos + nb == strlen(target));
        }
        CHECK(trie_advance(a, s, best, &s) == TRIE_OK);
        pos += best_len;
        steps++;
    }
    CHECK(pos == strlen(target));
    printf("walk: \"%s\" in %zu tokens + end of generation\n", target, steps - 1);

    /* A rejected token, a too-short mask, a bad state. */
    trie_state next = 12345;
    CHECK(trie_advance(a, trie_start(a), eog[0], &next) == TRIE_ERR_TOKEN_REJECTED && next == 12345);
    CHECK(strlen(trie_last_error()) > 0);
    printf("rejected: %s: %s\n", trie_status_str(TRIE_ERR_TOKEN_REJECTED), trie_last_error());
    CHECK(trie_mask(a, trie_start(a), mask, words - 1) == TRIE_ERR_BUFFER_TOO_SMALL);
    CHECK(trie_advance(a, (trie_state)trie_automaton_n_states(a), eog[0], &next) == TRIE_ERR_INVALID_STATE);

    trie_vocab_free(vocab);
    trie_automaton_free(a);
    printf("CTrie module check: ok\n");
    return 0;
}
