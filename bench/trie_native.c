/* libtrie through its C ABI, natively, on the same set files and token paths as the peers.
 * trie_native VOCAB.gguf SET.txt PATHS.txt FORM COMPILE_BUDGET_S MASK_BUDGET_S  -> one JSON line on stdout. */
#include "bench_common.h"
#include "trie.h"

int main(int argc, char **argv) {
    if (argc < 7) { fprintf(stderr, "usage: trie_native VOCAB SET PATHS FORM COMPILE_S MASK_S\n"); return 2; }
    double compile_budget = atof(argv[5]), mask_budget = atof(argv[6]);
    trie_vocab *vocab;
    if (trie_vocab_from_gguf(argv[1], &vocab)) { fprintf(stderr, "%s\n", trie_last_error()); return 1; }
    char **members;
    size_t k = read_lines(argv[2], &members);
    char **strs = form_strings(members, k, argv[4]);
    size_t *lens = malloc(k * sizeof *lens);
    for (size_t i = 0; i < k; i++) lens[i] = strlen(strs[i]);
    path_t *paths;
    size_t n_paths = read_paths(argv[3], &paths);

    long base = reset_peak();
    trie_automaton *a = NULL;
    double t = now_s();
    int st = trie_compile(vocab, (const uint8_t *const *)strs, lens, k, NULL, &a);
    double first_ms = (now_s() - t) * 1e3;
    if (st) { printf("{\"status\":\"error\",\"error\":\"%s\"}\n", trie_last_error()); return 0; }
    double rep[11];
    size_t n_rep = 0;
    double spent = first_ms / 1e3;
    while (n_rep < 11 && spent + first_ms / 1e3 < compile_budget) {
        trie_automaton *b;
        t = now_s();
        trie_compile(vocab, (const uint8_t *const *)strs, lens, k, NULL, &b);
        double dt = now_s() - t;
        trie_automaton_free(b);
        rep[n_rep++] = dt * 1e3;
        spent += dt;
    }
    size_t words = trie_automaton_mask_words(a);
    uint32_t *row = calloc(words, 4);
    size_t cap = 1 << 16, n = 0, n_first = 0, decodes = 0, mismatched = 0;
    double *per = malloc(cap * sizeof *per), first_sum = 0;
    double deadline = now_s() + mask_budget;
    for (size_t p = 0; p < n_paths && now_s() < deadline; p++) {
        trie_state s = trie_start(a);
        int bad = 0;
        for (size_t i = 0; i < paths[p].n; i++) {
            int32_t tok = paths[p].ids[i];
            double t0 = now_s();
            trie_mask(a, s, row, words);
            double dt = (now_s() - t0) * 1e6;
            if (n == cap) per = realloc(per, (cap *= 2) * sizeof *per);
            per[n++] = dt;
            if (!i) { first_sum += dt; n_first++; }
            if (!((row[tok >> 5] >> (tok & 31)) & 1) || trie_advance(a, s, tok, &s)) { bad = 1; break; }
        }
        mismatched += bad;
        decodes++;
    }
    long peak = status_kb("VmHWM") * 1024;
    printf("{\"version\":\"%s\",\"first_compile_ms\":%.3f,\"compile_repeats\":%zu,\"compile_ms\":%.3f,\"decodes\":%zu,"
           "\"mismatched_decodes\":%zu,\"automaton_bytes\":%zu,\"states\":%zu",
           trie_version(), first_ms, n_rep, n_rep ? median(rep, n_rep) : first_ms, decodes, mismatched,
           trie_automaton_memory_usage(a), trie_automaton_n_states(a));
    print_stats(per, n, first_sum, n_first);
    printf(",\"peak_rss_growth_bytes\":%ld,\"status\":\"%s\"}\n", peak > base ? peak - base : 0, mismatched ? "mismatch" : "ok");
    trie_automaton_free(a);
    trie_vocab_free(vocab);
    return 0;
}
