/* Encode and decode throughput of lib/tokenizer on the golden corpora
 * (tests/golden/tokenizer), one thread, then encode on all threads sharing
 * one tokenizer. Run from the repository root; prints one line per case. */
#include "tokenizer/tokenizer.h"

#include <cjson/cJSON.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* the text of each line ["text", id, ...] of a golden corpus */
static char **read_texts(const char *path, size_t *count, size_t *bytes)
{
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    char **texts = NULL, *line = NULL;
    size_t cap = 0, alloc = 0;
    *count = *bytes = 0;
    while (getline(&line, &cap, f) > 0) {
        cJSON *a = cJSON_Parse(line);
        if (cJSON_IsArray(a) && cJSON_IsString(a->child)) {
            if (*count == alloc) {
                alloc = alloc ? 2 * alloc : 1024;
                texts = realloc(texts, alloc * sizeof *texts);
            }
            texts[(*count)++] = strdup(a->child->valuestring);
            *bytes += strlen(a->child->valuestring);
        }
        cJSON_Delete(a);
    }
    free(line);
    fclose(f);
    return texts;
}

static void bench(const char *name, const char *tokenizer_path, const char *corpus_path)
{
    char err[512];
    if (access(tokenizer_path, R_OK) != 0) {
        printf("%-6s skipped: no %s\n", name, tokenizer_path);
        return;
    }
    double t0 = now();
    tokenizer_t *t = tokenizer_load(tokenizer_path, err, sizeof err);
    double load_s = now() - t0;
    size_t count, bytes;
    char **texts = read_texts(corpus_path, &count, &bytes);
    if (!t || !texts) {
        fprintf(stderr, "bench_tokenizer: %s\n", t ? corpus_path : err);
        exit(1);
    }
    int reps = 5;
    size_t tokens = 0;
    t0 = now();
    double decode_s = 0;
    for (int r = 0; r < reps; r++)
        for (size_t i = 0; i < count; i++) {
            int32_t *ids;
            size_t n;
            if (tokenizer_encode(t, texts[i], strlen(texts[i]), &ids, &n) != 0) exit(1);
            tokens += n;
            double d0 = now();
            free(tokenizer_decode(t, ids, n));
            decode_s += now() - d0;
            free(ids);
        }
    double encode_s = now() - t0 - decode_s;
    int threads = omp_get_max_threads();
    t0 = now();
#pragma omp parallel for schedule(dynamic, 64)
    for (size_t i = 0; i < (size_t)reps * count; i++) {
        int32_t *ids;
        size_t n;
        if (tokenizer_encode(t, texts[i % count], strlen(texts[i % count]), &ids, &n) == 0) free(ids);
    }
    double parallel_s = now() - t0;
    double mb = (double)reps * (double)bytes / 1e6;
    printf("%-6s load %.3f s | encode %.2f MB/s %.0f tokens/s | decode %.0f tokens/s | encode x%d threads %.2f MB/s\n",
           name, load_s, mb / encode_s, (double)tokens / encode_s, (double)tokens / decode_s, threads, mb / parallel_s);
    for (size_t i = 0; i < count; i++) free(texts[i]);
    free(texts);
    tokenizer_destroy(&t);
}

int main(void)
{
    bench("small", "tests/golden/tokenizer/small/tokenizer.json", "tests/golden/tokenizer/small/corpus.jsonl");
    bench("qwen", "tests/golden/tokenizer/qwen/tokenizer.json", "tests/golden/tokenizer/qwen/corpus.jsonl");
    return 0;
}
