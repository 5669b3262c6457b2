/* llama.cpp's GBNF grammar sampler on the same set files and token paths as the other engines: the grammar is an
 * alternation of the literal strings (root ::= "a" | "b" | ...), the vocabulary the vocab-only GGUF; each step applies
 * the sampler to the full vocabulary (llama_sampler_apply on all n_vocab candidates, as on a grammar rejection in
 * llama.cpp's common sampling) and then accepts the path's token.
 * gbnf_bench VOCAB.gguf SET.txt PATHS.txt FORM COMPILE_BUDGET_S MASK_BUDGET_S  -> one JSON line on stdout. */
#include "bench_common.h"
#include "llama.h"
#include <math.h>

static void quiet(enum ggml_log_level level, const char *text, void *ud) { (void)level; (void)text; (void)ud; }

int main(int argc, char **argv) {
    if (argc < 7) { fprintf(stderr, "usage: gbnf_bench VOCAB SET PATHS FORM COMPILE_S MASK_S\n"); return 2; }
    double compile_budget = atof(argv[5]), mask_budget = atof(argv[6]);
    llama_log_set(quiet, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    struct llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) { printf("{\"status\":\"error\",\"error\":\"cannot load vocab\"}\n"); return 0; }
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    int32_t n_vocab = llama_vocab_n_tokens(vocab);
    char **members;
    size_t k = read_lines(argv[2], &members);
    char **strs = form_strings(members, k, argv[4]);
    /* root ::= "s1" | "s2" ... with \" and \\ escaped */
    size_t cap = 64;
    for (size_t i = 0; i < k; i++) cap += 2 * strlen(strs[i]) + 5;
    char *g = malloc(cap), *w = g;
    w += sprintf(w, "root ::= ");
    for (size_t i = 0; i < k; i++) {
        if (i) { memcpy(w, " | ", 3); w += 3; }
        *w++ = '"';
        for (const char *c = strs[i]; *c; c++) {
            if (*c == '"' || *c == '\\') *w++ = '\\';
            *w++ = *c;
        }
        *w++ = '"';
    }
    *w++ = '\n';
    *w = 0;
    path_t *paths;
    size_t n_paths = read_paths(argv[3], &paths);

    long base = reset_peak();
    double t = now_s();
    struct llama_sampler *smpl = llama_sampler_init_grammar(vocab, g, "root");
    double first_ms = (now_s() - t) * 1e3;
    if (!smpl) { printf("{\"status\":\"error\",\"error\":\"grammar rejected\"}\n"); return 0; }
    double rep[11];
    size_t n_rep = 0;
    double spent = first_ms / 1e3;
    while (n_rep < 11 && spent + first_ms / 1e3 < compile_budget) {
        t = now_s();
        struct llama_sampler *s2 = llama_sampler_init_grammar(vocab, g, "root");
        double dt = now_s() - t;
        llama_sampler_free(s2);
        rep[n_rep++] = dt * 1e3;
        spent += dt;
    }
    llama_token_data *cand = malloc(n_vocab * sizeof *cand);
    size_t pcap = 1 << 16, n = 0, n_first = 0, decodes = 0, mismatched = 0;
    double *per = malloc(pcap * sizeof *per), first_sum = 0;
    double deadline = now_s() + mask_budget;
    /* The first decode runs on the fresh sampler and to its end whatever the budget (reset re-parses the grammar,
     * which is as slow as the compile); later ones stop at the budget. */
    for (size_t p = 0; p < n_paths && (p == 0 || now_s() < deadline); p++) {
        if (p) llama_sampler_reset(smpl);
        int bad = 0;
        for (size_t i = 0; i < paths[p].n && (p == 0 || now_s() < deadline); i++) {
            int32_t tok = paths[p].ids[i];
            for (int32_t j = 0; j < n_vocab; j++) cand[j] = (llama_token_data){j, 0.0f, 0.0f};
            llama_token_data_array arr = {cand, (size_t)n_vocab, -1, false};
            double t0 = now_s();
            llama_sampler_apply(smpl, &arr);
            double dt = (now_s() - t0) * 1e6;
            if (n == pcap) per = realloc(per, (pcap *= 2) * sizeof *per);
            per[n++] = dt;
            if (!i) { first_sum += dt; n_first++; }
            if (isinf(cand[tok].logit)) { bad = 1; break; }
            if (i + 1 < paths[p].n) llama_sampler_accept(smpl, tok);
        }
        mismatched += bad;
        decodes++;
    }
    long peak = status_kb("VmHWM") * 1024;
    printf("{\"version\":\"llama.cpp 0c1e57098\",\"first_compile_ms\":%.3f,\"compile_repeats\":%zu,\"compile_ms\":%.3f,"
           "\"decodes\":%zu,\"mismatched_decodes\":%zu",
           first_ms, n_rep, n_rep ? median(rep, n_rep) : first_ms, decodes, mismatched);
    print_stats(per, n, first_sum, n_first);
    printf(",\"peak_rss_growth_bytes\":%ld,\"status\":\"%s\"}\n", peak > base ? peak - base : 0, mismatched ? "mismatch" : "ok");
    llama_sampler_free(smpl);
    llama_model_free(model);
    return 0;
}
