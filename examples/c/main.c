/* libtrie C example: load a GGUF vocabulary, compile the lines of a file as the set, then walk decodes that pick
 * random allowed tokens until the end of generation, printing each string produced and the timings.
 *
 *   trie_example_c VOCAB.gguf SET.txt [N_WALKS=5] [SEED=1]
 *
 * Build: cc main.c $(pkg-config --cflags --libs trie) -o trie_example_c   (or with CMake: see examples/cpp) */
#define _POSIX_C_SOURCE 200809L
#include <trie.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t rng_state;
static uint64_t rng_next(void) { /* xorshift64* */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}

static int fail(const char *what, trie_status st) {
    fprintf(stderr, "%s: %s: %s\n", what, trie_status_str(st), trie_last_error());
    return 1;
}

/* Reads the non-empty lines of a file (without "\n" / "\r\n"). */
static char **read_lines(const char *path, size_t *n_out) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t n = 0, cap = 64;
    char **lines = malloc(cap * sizeof *lines);
    char *line = NULL;
    size_t line_cap = 0;
    ssize_t len;
    while ((len = getline(&line, &line_cap, f)) >= 0) {
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
        if (len == 0) continue;
        if (n == cap) lines = realloc(lines, (cap *= 2) * sizeof *lines);
        lines[n++] = strdup(line);
    }
    free(line);
    fclose(f);
    *n_out = n;
    return lines;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s VOCAB.gguf SET.txt [N_WALKS=5] [SEED=1]\n", argv[0]);
        return 2;
    }
    int n_walks = argc > 3 ? atoi(argv[3]) : 5;
    rng_state = argc > 4 ? strtoull(argv[4], NULL, 10) : 1;
    if (rng_state == 0) rng_state = 1;
    printf("libtrie %s (header %s)\n", trie_version(), TRIE_VERSION_STRING);

    double t0 = now_s();
    trie_vocab *vocab = NULL;
    trie_status st = trie_vocab_from_gguf(argv[1], &vocab);
    if (st != TRIE_OK) return fail("loading the vocabulary", st);
    double t_vocab = now_s() - t0;
    printf("vocabulary: %zu token ids, %.1f MiB, loaded in %.1f ms\n", trie_vocab_n_tokens(vocab),
           trie_vocab_memory_usage(vocab) / 1048576.0, t_vocab * 1e3);

    size_t n_strings = 0;
    char **lines = read_lines(argv[2], &n_strings);
    if (!lines) {
        fprintf(stderr, "cannot read %s\n", argv[2]);
        trie_vocab_free(vocab);
        return 1;
    }
    const uint8_t **ptrs = malloc((n_strings ? n_strings : 1) * sizeof *ptrs);
    size_t *lens = malloc((n_strings ? n_strings : 1) * sizeof *lens);
    for (size_t i = 0; i < n_strings; i++) {
        ptrs[i] = (const uint8_t *)lines[i];
        lens[i] = strlen(lines[i]);
    }
    trie_options options;
    trie_options_init(&options);
    options.drop_unreachable = true;
    trie_automaton *automaton = NULL;
    t0 = now_s();
    st = trie_compile(vocab, ptrs, lens, n_strings, &options, &automaton);
    double t_compile = now_s() - t0;
    trie_vocab_free(vocab); /* the automaton keeps its own reference */
    if (st != TRIE_OK) {
        for (size_t i = 0; i < n_strings; i++) free(lines[i]);
        free(lines);
        free(ptrs);
        free(lens);
        return fail("compiling the set", st);
    }
    printf("set: %zu strings, %zu members, %zu states, %.1f KiB, compiled in %.2f ms\n", n_strings,
           trie_automaton_n_members(automaton), trie_automaton_n_states(automaton),
           trie_automaton_memory_usage(automaton) / 1024.0, t_compile * 1e3);
    const size_t *dropped;
    size_t n_dropped;
    trie_automaton_dropped(automaton, &dropped, &n_dropped);
    for (size_t i = 0; i < n_dropped; i++) printf("dropped (no tokens spell it): %s\n", lines[dropped[i]]);

    /* Decode: the mask is what an engine applies to the logits; here a random allowed token is "sampled". */
    trie_vocab *v = trie_automaton_vocab(automaton);
    size_t n_words = trie_automaton_mask_words(automaton);
    uint32_t *mask = malloc(n_words * sizeof *mask);
    double t_mask = 0, t_advance = 0;
    size_t n_steps = 0;
    int bad = 0;
    for (int w = 0; w < n_walks; w++) {
        char text[4096];
        size_t text_len = 0, n_tokens = 0;
        trie_state state = trie_start(automaton);
        while (state != TRIE_STATE_FINISHED) {
            double a = now_s();
            if ((st = trie_mask(automaton, state, mask, n_words)) != TRIE_OK) return fail("mask", st);
            double b = now_s();
            const int32_t *allowed;
            size_t n_allowed;
            if ((st = trie_allowed(automaton, state, &allowed, &n_allowed)) != TRIE_OK) return fail("allowed", st);
            int32_t token = allowed[rng_next() % n_allowed];
            if (!(mask[token / 32] >> (token % 32) & 1u)) bad = 1;
            double c = now_s();
            trie_state next;
            if ((st = trie_advance(automaton, state, token, &next)) != TRIE_OK) return fail("advance", st);
            t_mask += b - a;
            t_advance += now_s() - c;
            n_steps++;
            if (next != TRIE_STATE_FINISHED) {
                const uint8_t *bytes;
                size_t len;
                trie_vocab_token(v, token, &bytes, &len);
                if (text_len + len < sizeof text) {
                    memcpy(text + text_len, bytes, len);
                    text_len += len;
                }
                n_tokens++;
            }
            state = next;
        }
        text[text_len] = 0;
        int member = 0;
        for (size_t i = 0; i < n_strings && !member; i++) member = strcmp(lines[i], text) == 0;
        if (!member) bad = 1;
        printf("walk %d: \"%s\" (%zu tokens)%s\n", w + 1, text, n_tokens, member ? "" : "  NOT A MEMBER");
    }
    if (n_steps)
        printf("per step: mask %.2f us, advance %.0f ns (%zu steps)\n", t_mask / n_steps * 1e6,
               t_advance / n_steps * 1e9, n_steps);

    free(mask);
    trie_vocab_free(v);
    trie_automaton_free(automaton);
    for (size_t i = 0; i < n_strings; i++) free(lines[i]);
    free(lines);
    free(ptrs);
    free(lens);
    return bad;
}
