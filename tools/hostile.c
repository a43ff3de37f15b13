/* hostile: writes the records a hostile peer would publish into a swarm's
 * pool, one file each, for `pool publish` to send.
 *   hostile --kind KIND --count N --out DIR [--completions L] [--seed S] [--big BYTES] [--text BYTES]
 *           [--victim NODE]
 * Kinds: random (random bytes), truncated (a real record cut short),
 * oversized (a record of about --big bytes), long_text (completions of --text bytes),
 * bad_utf8, unknown_family, bad_metadata (not an object, or naming another family),
 * wrong_size (L + 1 completions), bad_node (a node id with ':'),
 * wrong_type (a task record), forged (wrong answers claiming reward 1),
 * duplicate (one real group, N times); and against signatures: unsigned
 * (real groups, half of them cut shorter than a signature), wrong_key
 * (real groups signed by a random key: the files are pool entries,
 * signature || record), impostor (groups naming --victim, default n0, as
 * their node). Records are named as node "evil-KIND"; questions are real
 * ones from the task library. The hostile node signs its records with its
 * own registered key (`pool publish --key`), so they reach the checks past
 * the signature; unsigned and wrong_key files are published as they are. */
#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/identity.h"
#include "records.h"
#include "tasks/task.h"
#include "util/splitmix.h"

static const char *const kinds[] = {"random",         "truncated",    "oversized",  "long_text", "bad_utf8",
                                    "unknown_family", "bad_metadata", "wrong_size", "bad_node",  "wrong_type",
                                    "forged",         "duplicate",    "unsigned",   "wrong_key", "impostor"};
#define NKINDS ((int)(sizeof kinds / sizeof kinds[0]))

static uint64_t rng_state;

static uint64_t next(void) { return splitmix64(&rng_state); }

/* the task of question index of the library's mix (seed 7); exits on
 * failure */
static void draw_task(uint64_t index, task_question_t *e)
{
    static task_mix_t *mix;
    char err[256];
    if (!mix && !(mix = task_mix_new(NULL, 7, err, sizeof err))) {
        fprintf(stderr, "hostile: task mix: %s\n", err);
        exit(1);
    }
    if (task_mix_draw(mix, index, e, err, sizeof err) != 0) {
        fprintf(stderr, "hostile: task %llu: %s\n", (unsigned long long)index, err);
        exit(1);
    }
}

/* n completions claiming reward 1: an answer, then random letters up to
 * text_len bytes; texts[i] holds completion i's text */
static void made_up_completions(int n, size_t text_len, char **texts, rec_completion_t *c)
{
    for (int i = 0; i < n; i++) {
        texts[i] = malloc(text_len + 1);
        int k = snprintf(texts[i], text_len + 1, "<answer>%llu</answer>", (unsigned long long)(next() % 1000000007));
        for (size_t j = (size_t)k; j < text_len; j++) texts[i][j] = (char)('a' + next() % 26);
        texts[i][text_len] = '\0';
        c[i] = (rec_completion_t){.text = texts[i], .reward = 1.0f, .finished = true};
    }
}

/* A group for a real question with L made-up completions; kind bends one
 * part of it. Returns a malloc'ed record. */
static uint8_t *group(const char *kind, uint64_t index, int L, size_t big, size_t text, const char *victim, size_t *len)
{
    task_question_t e = {0};
    draw_task(index, &e);
    char node[64];
    snprintf(node, sizeof node, "evil-%s", kind);
    const cJSON *fam = cJSON_GetObjectItemCaseSensitive(e.metadata, "source_dataset");
    char *meta = cJSON_PrintUnformatted(e.metadata);
    rec_task_t t = {.task_id = index,
                    .family = fam->valuestring,
                    .question = e.question,
                    .answer = e.answer,
                    .metadata_json = meta,
                    .seed = 7,
                    .index = index,
                    .node = node};
    int n = !strcmp(kind, "wrong_size") ? L + 1 : L;
    size_t text_len = !strcmp(kind, "long_text")   ? text + index % 100
                      : !strcmp(kind, "oversized") ? big / (size_t)n
                                                   : 40;
    char **texts = calloc((size_t)n, sizeof *texts);
    rec_completion_t *c = calloc((size_t)n, sizeof *c);
    made_up_completions(n, text_len, texts, c);
    if (!strcmp(kind, "bad_utf8")) {
        static const char *const bad[] = {"\xC0\x80", "\xED\xA0\x80", "\x80", "\xF5\x80\x80\x80", "\xE2\x82"};
        const char *b = bad[index % 5];
        memcpy(texts[0] + 20, b, strlen(b));
    }
    if (!strcmp(kind, "unknown_family")) t.family = "no_such_family";
    if (!strcmp(kind, "bad_metadata"))
        t.metadata_json = index % 2 ? "[1, 2, 3]" : "{\"source_dataset\": \"no_such_family\"}";
    if (!strcmp(kind, "bad_node")) t.node = "evil:other";
    if (!strcmp(kind, "impostor")) t.node = victim;
    rec_group_t r = {.node = t.node,
                     .policy_version = index,
                     .round = index,
                     .model = "forger",
                     .task = t,
                     .completions = c,
                     .n_completions = (size_t)n,
                     .created_ms = index,
                     .scored = true};
    uint8_t *buf = NULL;
    if (!strcmp(kind, "wrong_type") ? rec_task_build(&t, &buf, len) : rec_group_build(&r, &buf, len)) {
        fprintf(stderr, "hostile: %s record %llu could not be built\n", kind, (unsigned long long)index);
        exit(1);
    }
    for (int i = 0; i < n; i++) free(texts[i]);
    free(texts);
    free(c);
    free(meta);
    task_question_free(&e);
    return buf;
}

typedef struct {
    const char *kind, *out, *victim;
    long count;
    int L;
    size_t big, text;
} opts_t;

/* the flags into o (--seed into the generator's state); 0, or 2 after
 * the usage on stderr */
static int parse_flags(int argc, char **argv, opts_t *o)
{
    for (int a = 1; a + 1 < argc; a += 2) {
        if (!strcmp(argv[a], "--kind")) o->kind = argv[a + 1];
        else if (!strcmp(argv[a], "--out")) o->out = argv[a + 1];
        else if (!strcmp(argv[a], "--count")) o->count = atol(argv[a + 1]);
        else if (!strcmp(argv[a], "--completions")) o->L = atoi(argv[a + 1]);
        else if (!strcmp(argv[a], "--seed")) rng_state = strtoull(argv[a + 1], NULL, 10);
        else if (!strcmp(argv[a], "--big")) o->big = strtoull(argv[a + 1], NULL, 10);
        else if (!strcmp(argv[a], "--text")) o->text = strtoull(argv[a + 1], NULL, 10);
        else if (!strcmp(argv[a], "--victim")) o->victim = argv[a + 1];
        else {
            fprintf(stderr, "hostile: unknown flag '%s'\n", argv[a]);
            return 2;
        }
    }
    int k = 0;
    while (o->kind && k < NKINDS && strcmp(o->kind, kinds[k])) k++;
    if (!o->kind || k == NKINDS || !o->out || o->count < 1 || o->L < 1 || o->big < 64 ||
        o->big > REC_MAX_BYTES - 4096 || o->text < 64 || o->text > REC_MAX_BYTES / 64) {
        fprintf(stderr, "usage: hostile --kind KIND --count N --out DIR [--completions L] [--seed S] [--big BYTES] "
                        "[--text BYTES] [--victim NODE]\n"
                        "kinds:");
        for (int i = 0; i < NKINDS; i++) fprintf(stderr, " %s", kinds[i]);
        fprintf(stderr, "\n");
        return 2;
    }
    return 0;
}

/* Record i: random bytes, or a group bent by the kind, then cut short
 * (truncated, and half of unsigned) or sealed by forger (wrong_key). NULL
 * after a line on stderr. */
static uint8_t *make_record(const opts_t *o, long i, identity_t *forger, size_t *len)
{
    const char *kind = o->kind;
    uint8_t *buf;
    if (!strcmp(kind, "random")) {
        *len = 1 + next() % 4096;
        buf = malloc(*len);
        for (size_t j = 0; j < *len; j++) buf[j] = (uint8_t)next();
        /* some random buffers carry a group's identifier, so they reach the Verifier */
        if (*len >= 8 && i % 2) memcpy(buf + 4, "SROL", 4);
        return buf;
    }
    bool dup = !strcmp(kind, "duplicate");
    uint64_t keep = rng_state;
    buf = group(kind, dup ? 0 : (uint64_t)i, o->L, o->big, o->text, o->victim, len);
    if (dup) rng_state = keep; /* the same completions every time */
    if (!strcmp(kind, "truncated")) *len = 1 + next() % (*len - 1);
    if (!strcmp(kind, "unsigned") && i % 2) *len = 1 + next() % (IDENTITY_SIGNATURE_BYTES - 1);
    if (forger) {
        size_t env_len;
        uint8_t *env = identity_seal(forger, buf, *len, &env_len);
        if (!env) {
            fprintf(stderr, "hostile: out of memory\n");
            return NULL;
        }
        free(buf);
        buf = env, *len = env_len;
    }
    return buf;
}

int main(int argc, char **argv)
{
    opts_t o = {.victim = "n0", .L = 8, .big = (size_t)2 << 20, .text = 16384};
    if (parse_flags(argc, argv, &o)) return 2;
    const char *kind = o.kind;
    /* wrong_key: signed, but by a key nobody registered */
    identity_t *forger = !strcmp(kind, "wrong_key") ? identity_new() : NULL;
    if (!strcmp(kind, "wrong_key") && !forger) {
        fprintf(stderr, "hostile: libsodium failed to start\n");
        return 1;
    }
    for (long i = 0; i < o.count; i++) {
        size_t len;
        uint8_t *buf = make_record(&o, i, forger, &len);
        if (!buf) return 1;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s-%06ld.bin", o.out, kind, i);
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(buf, 1, len, f) != len || fclose(f) != 0) {
            fprintf(stderr, "hostile: %s: cannot write\n", path);
            return 1;
        }
        free(buf);
    }
    identity_destroy(&forger);
    return 0;
}
