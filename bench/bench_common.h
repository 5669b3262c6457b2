/* Shared helpers of the C benchmark programs (gbnf_bench.c, trie_native.c): read the set and the token paths
 * written by bench/common.py, time with CLOCK_MONOTONIC, reset and read the peak RSS, print statistics as JSON. */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* One string per line; returns the count, fills *out (each a malloc'd NUL-terminated copy). */
static size_t read_lines(const char *path, char ***out) {
    FILE *f = fopen(path, "rb");
    if (!f) { perror(path); exit(2); }
    size_t n = 0, cap = 1024;
    char **v = malloc(cap * sizeof *v);
    char *line = NULL;
    size_t lcap = 0;
    ssize_t len;
    while ((len = getline(&line, &lcap, f)) >= 0) {
        if (len > 0 && line[len - 1] == '\n') line[--len] = 0;
        if (n == cap) v = realloc(v, (cap *= 2) * sizeof *v);
        v[n++] = strdup(line);
    }
    free(line);
    fclose(f);
    *out = v;
    return n;
}

typedef struct { int32_t *ids; size_t n; } path_t;

static size_t read_paths(const char *file, path_t **out) {
    char **lines;
    size_t n = read_lines(file, &lines);
    path_t *p = calloc(n, sizeof *p);
    for (size_t i = 0; i < n; i++) {
        size_t cap = 16;
        p[i].ids = malloc(cap * sizeof(int32_t));
        char *s = lines[i], *end;
        for (;;) {
            long v = strtol(s, &end, 10);
            if (end == s) break;
            if (p[i].n == cap) p[i].ids = realloc(p[i].ids, (cap *= 2) * sizeof(int32_t));
            p[i].ids[p[i].n++] = (int32_t)v;
            s = end;
        }
        free(lines[i]);
    }
    free(lines);
    *out = p;
    return n;
}

static long status_kb(const char *field) {
    FILE *f = fopen("/proc/self/status", "r");
    char buf[256];
    long v = 0;
    size_t fl = strlen(field);
    while (f && fgets(buf, sizeof buf, f))
        if (!strncmp(buf, field, fl) && buf[fl] == ':') v = atol(buf + fl + 1);
    if (f) fclose(f);
    return v;
}

static long reset_peak(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (f) { fputs("5", f); fclose(f); }
    return status_kb("VmRSS") * 1024;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, size_t n) {
    if (!n) return 0;
    qsort(v, n, sizeof *v, cmp_d);
    return v[n / 2];
}

/* Prints ,"steps":..,"mask_mean_us":.. (sorts per_step). */
static void print_stats(double *per_step, size_t n, double first_sum, size_t n_first) {
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += per_step[i];
    qsort(per_step, n, sizeof *per_step, cmp_d);
    printf(",\"steps\":%zu,\"mask_mean_us\":%.3f,\"mask_p50_us\":%.3f,\"mask_p99_us\":%.3f,\"mask_first_step_us\":%.3f",
           n, n ? sum / n : 0, n ? per_step[n / 2] : 0, n ? per_step[(n * 99 / 100 < n - 1) ? n * 99 / 100 : n - 1] : 0,
           n_first ? first_sum / n_first : 0);
}

/* The strings of a form: "raw" as read, "json" with JSON quotes (the sets hold no quote, backslash or control). */
static char **form_strings(char **members, size_t n, const char *form) {
    if (strcmp(form, "json")) return members;
    char **v = malloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(members[i]);
        v[i] = malloc(l + 3);
        v[i][0] = '"';
        memcpy(v[i] + 1, members[i], l);
        v[i][l + 1] = '"';
        v[i][l + 2] = 0;
    }
    return v;
}
#endif
