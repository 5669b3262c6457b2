/* The tool search from C (trie_tool_search_*), the way llama-server serves a tool-search tool: an index built once
 * from the OpenAI tools list, BM25 and regex queries as arrays and as Anthropic's result block, every error a
 * status with a message naming the field, the index shared by threads. */
#include <trie.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>

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

static const char *TOOLS =
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Current weather in a "
    "city\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}}}},"
    " {\"type\": \"function\", \"function\": {\"name\": \"sendEmail\", \"description\": \"Send an email\"}},"
    " {\"type\": \"function\", \"function\": {\"name\": \"stock.price\", \"description\": \"A stock's latest "
    "price\"}}]";

static trie_status query(const trie_tool_search *s, uint32_t mode, const char *q, size_t k, uint32_t *tools,
                         double *scores, size_t cap, size_t *n) {
    return trie_tool_search_query(s, mode, (const uint8_t *)q, strlen(q), k, tools, scores, cap, n);
}

static void *worker(void *arg) {
    const trie_tool_search *s = arg;
    for (int i = 0; i < 200; i++) {
        uint32_t tools[3];
        size_t n = 0;
        if (query(s, TRIE_SEARCH_BM25, "send an email", 3, tools, NULL, 3, &n) != TRIE_OK || tools[0] != 1)
            return (void *)1;
    }
    return NULL;
}

int main(void) {
    trie_tool_search *s = NULL;
    CHECK(trie_tool_search_new((const uint8_t *)TOOLS, strlen(TOOLS), &s) == TRIE_OK);
    CHECK(trie_tool_search_n_tools(s) == 3);
    const uint8_t *name = NULL;
    size_t len = 0;
    CHECK(trie_tool_search_name(s, 2, &name, &len) == TRIE_OK && len == 11 && memcmp(name, "stock.price", 11) == 0);

    uint32_t tools[3] = {0};
    double scores[3] = {0};
    size_t n = 0;
    CHECK(query(s, TRIE_SEARCH_BM25, "weather in Paris", 3, tools, scores, 3, &n) == TRIE_OK);
    CHECK(n == 1 && tools[0] == 0 && scores[0] > 0);
    CHECK(query(s, TRIE_SEARCH_BM25, "stock price", 3, tools, scores, 3, &n) == TRIE_OK && tools[0] == 2);
    CHECK(query(s, TRIE_SEARCH_REGEX, "(?i)^SEND|price", 3, tools, scores, 3, &n) == TRIE_OK);
    CHECK(n == 2 && tools[0] == 1 && tools[1] == 2 && scores[0] == 2.0);
    /* too small a buffer: only the count */
    CHECK(query(s, TRIE_SEARCH_REGEX, ".", 3, tools, NULL, 1, &n) == TRIE_ERR_BUFFER_TOO_SMALL && n == 3);

    /* the JSON result: ask for the size, then fill */
    const char *q = "email";
    CHECK(trie_tool_search_query_json(s, TRIE_SEARCH_BM25, (const uint8_t *)q, 5, 5, NULL, 0, &n) ==
          TRIE_ERR_BUFFER_TOO_SMALL);
    char buf[512];
    size_t need = n;
    CHECK(need < sizeof buf);
    CHECK(trie_tool_search_query_json(s, TRIE_SEARCH_BM25, (const uint8_t *)q, 5, 5, (uint8_t *)buf, need, &n) ==
          TRIE_OK);
    CHECK(n == need);
    buf[n] = 0;
    CHECK(strcmp(buf, "{\"tool_references\":[{\"tool_name\":\"sendEmail\",\"type\":\"tool_reference\"}],"
                      "\"type\":\"tool_search_tool_search_result\"}") == 0);

    /* errors name the field */
    CHECK(query(s, TRIE_SEARCH_REGEX, "a(b", 3, tools, NULL, 3, &n) == TRIE_ERR_INVALID_ARGUMENT);
    CHECK(strncmp(trie_last_error(), "pattern:", 8) == 0);
    CHECK(query(s, TRIE_SEARCH_BM25, "x", 0, tools, NULL, 3, &n) == TRIE_ERR_INVALID_ARGUMENT);
    CHECK(strncmp(trie_last_error(), "k:", 2) == 0);
    CHECK(query(s, 9, "x", 1, tools, NULL, 3, &n) == TRIE_ERR_INVALID_ARGUMENT);
    CHECK(strncmp(trie_last_error(), "mode:", 5) == 0);
    CHECK(query(NULL, TRIE_SEARCH_BM25, "x", 1, tools, NULL, 3, &n) == TRIE_ERR_NULL_ARGUMENT);
    CHECK(query(s, TRIE_SEARCH_BM25, "x", 1, tools, NULL, 3, NULL) == TRIE_ERR_NULL_ARGUMENT);
    CHECK(trie_tool_search_query(s, TRIE_SEARCH_BM25, NULL, 3, 1, tools, NULL, 3, &n) == TRIE_ERR_NULL_ARGUMENT);
    CHECK(trie_tool_search_name(s, 3, &name, &len) == TRIE_ERR_INVALID_ARGUMENT && name == NULL);
    trie_tool_search *bad = (trie_tool_search *)1;
    const char *dup = "[{\"name\": \"a\"}, {\"name\": \"a\"}]";
    CHECK(trie_tool_search_new((const uint8_t *)dup, strlen(dup), &bad) == TRIE_ERR_INVALID_ARGUMENT && bad == NULL);
    CHECK(strstr(trie_last_error(), "same name") != NULL);

    /* the request's side of defer_loading: the deferred tool leaves the prompt, the plan's size asked first */
    const char *req = "{\"tools\": [{\"type\": \"function\", \"defer_loading\": true, \"function\": {\"name\": "
                      "\"a\"}}, {\"type\": \"function\", \"function\": {\"name\": \"b\"}}], \"messages\": []}";
    CHECK(trie_deferred_plan((const uint8_t *)req, strlen(req), NULL, NULL, 0, &n) == TRIE_ERR_BUFFER_TOO_SMALL);
    need = n;
    CHECK(need < sizeof buf);
    CHECK(trie_deferred_plan((const uint8_t *)req, strlen(req), NULL, (uint8_t *)buf, need, &n) == TRIE_OK);
    buf[n] = 0;
    CHECK(strstr(buf, "\"tools\":[{\"function\":{\"name\":\"b\"},\"type\":\"function\"}]") != NULL);
    const char *plain = "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"b\"}}]}";
    CHECK(trie_deferred_plan((const uint8_t *)plain, strlen(plain), NULL, NULL, 0, &n) == TRIE_OK && n == 0);
    CHECK(trie_deferred_plan((const uint8_t *)"[]", 2, NULL, NULL, 0, &n) == TRIE_ERR_INVALID_ARGUMENT);
    CHECK(strncmp(trie_last_error(), "request:", 8) == 0);

    /* one index, several threads */
    pthread_t th[4];
    for (int i = 0; i < 4; i++) CHECK(pthread_create(&th[i], NULL, worker, s) == 0);
    for (int i = 0; i < 4; i++) {
        void *r = NULL;
        CHECK(pthread_join(th[i], &r) == 0 && r == NULL);
    }
    const trie_tool_search *r = trie_tool_search_retain(s);
    CHECK(r == s);
    trie_tool_search_free(r);
    trie_tool_search_free(s);
    trie_tool_search_free(NULL);
    printf("test_search: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
