/* The request-set front end through the C ABI (trie_set_cache_*): what llama-server calls. */
#define _POSIX_C_SOURCE 200809L
#include <trie.h>

#include <pthread.h>
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

/* Every ASCII byte a token, then an end-of-generation token (id 128). */
static trie_vocab *ascii_vocab(void) {
    uint8_t bytes[129][4];
    const uint8_t *ptrs[129];
    size_t lens[129];
    uint32_t kinds[129];
    for (int i = 0; i < 128; i++) {
        bytes[i][0] = (uint8_t)i;
        ptrs[i] = bytes[i];
        lens[i] = 1;
        kinds[i] = TRIE_TOKEN_NORMAL;
    }
    memcpy(bytes[128], "</s>", 4);
    ptrs[128] = bytes[128];
    lens[128] = 4;
    kinds[128] = TRIE_TOKEN_CONTROL;
    int32_t eog = 128;
    trie_vocab *v = NULL;
    CHECK(trie_vocab_new(ptrs, lens, kinds, 129, &eog, 1, &v) == TRIE_OK);
    return v;
}

static void write_file(const char *dir, const char *name, const char *text) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
}

static trie_status get(trie_set_cache *c, const char *spec, trie_automaton **out) {
    return trie_set_cache_get(c, (const uint8_t *)spec, strlen(spec), out, NULL);
}

static trie_set_cache *g_cache;

static void *get_tools(void *arg) {
    trie_automaton **out = arg;
    CHECK(get(g_cache, "\"tools\"", out) == TRIE_OK);
    return NULL;
}

int main(void) {
    char dir[] = "/tmp/libtrie-c-sets-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    write_file(dir, "colors.txt", "red\ngreen\n");
    char outside[600], link[600];
    snprintf(outside, sizeof outside, "%s.secret", dir);
    snprintf(link, sizeof link, "%s/escape.txt", dir);
    write_file("/tmp", strrchr(outside, '/') + 1, "secret\n");
    CHECK(symlink(outside, link) == 0);
    FILE *tools = NULL;
    char tools_path[600];
    snprintf(tools_path, sizeof tools_path, "%s/tools.txt", dir);
    tools = fopen(tools_path, "w");
    for (int i = 0; i < 50000; i++) fprintf(tools, "tool_%06d_%d\n", i, i * 7919 % 10007);
    fclose(tools);

    trie_vocab *v = ascii_vocab();
    trie_set_config cfg;
    CHECK(trie_set_config_init(&cfg) == TRIE_OK);
    CHECK(cfg.struct_size == sizeof cfg && cfg.max_inline_strings == 10000 && cfg.capacity == 64);
    cfg.set_dir = dir;
    cfg.max_inline_strings = 3;
    CHECK(trie_set_cache_new(v, &cfg, &g_cache) == TRIE_OK);
    trie_vocab_free(v); /* the cache keeps its own reference */

    trie_automaton *a = NULL, *b = NULL;
    trie_set_info info;
    CHECK(trie_set_cache_get(g_cache, (const uint8_t *)"{\"set\": \"colors\"}", 17, &a, &info) == TRIE_OK);
    CHECK(info.compiled && strcmp(info.what, "the set 'colors'") == 0 && trie_automaton_n_members(a) == 2);
    CHECK(get(g_cache, "{\"file\": \"./colors.txt\"}", &b) == TRIE_OK && a == b);
    trie_automaton_free(a);
    trie_automaton_free(b);

    /* Refusals: a status, a message for the client, no automaton. */
    CHECK(get(g_cache, "\"escape\"", &a) == TRIE_ERR_INVALID_ARGUMENT && a == NULL);
    CHECK(strstr(trie_last_error(), "a symbolic link") != NULL && strstr(trie_last_error(), dir) == NULL);
    CHECK(get(g_cache, "\"../x\"", &a) == TRIE_ERR_INVALID_ARGUMENT);
    CHECK(strstr(trie_last_error(), "'..' is not allowed") != NULL);
    CHECK(get(g_cache, "[\"a\", \"b\", \"c\", \"d\"]", &a) == TRIE_ERR_INVALID_ARGUMENT);
    CHECK(strstr(trie_last_error(), "4 strings, more than this server accepts") != NULL);
    CHECK(get(g_cache, "[\"\\ud800\"]", &a) == TRIE_ERR_INVALID_ARGUMENT);
    CHECK(strstr(trie_last_error(), "lone surrogates") != NULL);
    CHECK(get(g_cache, "{\"strings\": []}", &a) == TRIE_ERR_EMPTY_SET);
    CHECK(trie_set_cache_check(g_cache, (const uint8_t *)"\"/etc/passwd\"", 13) == TRIE_ERR_INVALID_ARGUMENT);
    CHECK(trie_set_cache_check(g_cache, (const uint8_t *)"\"colors\"", 8) == TRIE_OK);

    /* Four threads ask for one set at once: one compile, one automaton. */
    pthread_t threads[4];
    trie_automaton *got[4] = {NULL, NULL, NULL, NULL};
    trie_set_stats before, after;
    CHECK(trie_set_cache_stats(g_cache, &before) == TRIE_OK);
    for (int i = 0; i < 4; i++) pthread_create(&threads[i], NULL, get_tools, &got[i]);
    for (int i = 0; i < 4; i++) pthread_join(threads[i], NULL);
    CHECK(trie_set_cache_stats(g_cache, &after) == TRIE_OK);
    CHECK(after.compiles == before.compiles + 1);
    for (int i = 0; i < 4; i++) {
        CHECK(got[i] == got[0] && trie_automaton_n_members(got[i]) == 50000);
    }
    trie_set_cache_free(g_cache);
    CHECK(trie_automaton_n_members(got[0]) == 50000); /* automata outlive the cache */
    for (int i = 0; i < 4; i++) trie_automaton_free(got[i]);

    /* Pointers and sizes are checked. */
    CHECK(trie_set_cache_get(NULL, (const uint8_t *)"1", 1, &a, NULL) == TRIE_ERR_NULL_ARGUMENT);
    cfg.struct_size = 3;
    CHECK(trie_set_cache_new(NULL, &cfg, &g_cache) == TRIE_ERR_INVALID_ARGUMENT && g_cache == NULL);
    trie_set_cache_free(NULL);

    unlink(link);
    unlink(outside);
    unlink(tools_path);
    char colors[600];
    snprintf(colors, sizeof colors, "%s/colors.txt", dir);
    unlink(colors);
    rmdir(dir);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
