/* The README's llama.cpp example, whole: libtrie's sampler stage in a llama.cpp sampler chain, greedy, on a real
 * model. CMake builds it with the harness (examples/llama/CMakeLists.txt) and tests/llama/run.sh runs it on
 * SmolLM2-135M in CI's llama.cpp stage; scripts/check-docs.py checks the README's copy of the docs: region.
 *
 *   trie-llama-quickstart MODEL.gguf */
#include "llama.h"
#include "trie.h"
#include "trie_llama.h"

#include <stdio.h>
#include <string.h>

static void quiet(enum ggml_log_level level, const char *text, void *user) { (void)level, (void)text, (void)user; }

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s MODEL.gguf\n", argv[0]);
        return 2;
    }
    llama_log_set(quiet, NULL);
    llama_backend_init();
    struct llama_model *model = llama_model_load_from_file(argv[1], llama_model_default_params());
    if (!model) return 1;
    struct llama_context *ctx = llama_init_from_model(model, llama_context_default_params());
    if (!ctx) return 1;
    const char *set[] = {"Paris", "London", "Tokyo", "New York"};
    const uint8_t *strings[4];
    size_t lens[4];
    for (int i = 0; i < 4; i++) strings[i] = (const uint8_t *)set[i], lens[i] = strlen(set[i]);

    /* docs:begin stage */
    trie_vocab *tv;                      /* token bytes via llama_token_to_piece, EOG ids via llama_vocab_is_eog */
    if (trie_llama_vocab(llama_model_get_vocab(model), &tv) != TRIE_OK) return 1;
    trie_automaton *a;
    if (trie_compile(tv, strings, lens, 4, NULL, &a) != TRIE_OK) return 1;
    struct llama_sampler *chain = llama_sampler_chain_init(llama_sampler_chain_default_params());
    llama_sampler_chain_add(chain, trie_llama_sampler_init(a));   /* first, before top-k / top-p / dist */
    llama_sampler_chain_add(chain, llama_sampler_init_greedy());
    /* then as usual: token = llama_sampler_sample(chain, ctx, -1) after each llama_decode */
    /* docs:end stage */

    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    const char *prompt = "Q: What is the capital of France?\nA:";
    llama_token tokens[64];
    int n = llama_tokenize(vocab, prompt, (int32_t)strlen(prompt), tokens, 64, true, false);
    if (n <= 0) return 1;
    char text[64] = "";
    struct llama_batch batch = llama_batch_get_one(tokens, n);
    for (int step = 0; step < 32; step++) {
        if (llama_decode(ctx, batch) != 0) return 1;
        llama_token t = llama_sampler_sample(chain, ctx, -1);
        if (llama_vocab_is_eog(vocab, t)) break;
        char piece[64];
        int len = llama_token_to_piece(vocab, t, piece, sizeof piece, 0, false);
        if (len < 0 || strlen(text) + (size_t)len >= sizeof text) return 1;
        strncat(text, piece, (size_t)len);
        tokens[0] = t;
        batch = llama_batch_get_one(tokens, 1);
    }
    int member = 0;
    for (int i = 0; i < 4; i++) member |= strcmp(text, set[i]) == 0;
    printf("%s%s\n", text, member ? "" : "  NOT A MEMBER");
    const char *msg = NULL;
    int failed = trie_llama_sampler_error(llama_sampler_chain_get(chain, 0), &msg) != TRIE_OK;
    llama_sampler_free(chain);
    trie_automaton_free(a);
    trie_vocab_free(tv);
    llama_free(ctx);
    llama_model_free(model);
    return member && !failed ? 0 : 1;
}
