/* Checks on a group drawn from the pool, in an order that reads no field
 * of a hostile entry before its size, signature and structure pass. */
#include "screen.h"

#include <cjson/cJSON.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/identity.h"
#include "util/utf8.h"
#include "pool/pool.h"
#include "records.h"
#include "tasks/task.h"
#include "util/utf8.h"

typedef struct {
    uint64_t a, b;
} digest_t;

struct screen {
    screen_limits_t lim;
    char node[64];
    long counts[SCREEN_NREASONS];
    digest_t *seen; /* ring of the last dup_window contents */
    int n_seen, next_seen;
};

static const char *const names[SCREEN_NREASONS] = {
    "passed",   "too_large",      "malformed",    "bad_node",  "own",      "wrong_size",    "text_too_long",
    "bad_utf8", "unknown_family", "bad_metadata", "duplicate", "unsigned", "bad_signature", "node_mismatch",
};

screen_t *screen_new(const screen_limits_t *limits)
{
    if (sodium_init() < 0) return NULL;
    screen_t *self = calloc(1, sizeof *self);
    if (!self) return NULL;
    self->lim = *limits;
    snprintf(self->node, sizeof self->node, "%s", limits->node ? limits->node : "");
    self->lim.node = self->node;
    if (self->lim.dup_window < 1) self->lim.dup_window = 1;
    self->seen = calloc((size_t)self->lim.dup_window, sizeof *self->seen);
    if (!self->seen) {
        free(self);
        return NULL;
    }
    return self;
}

void screen_destroy(screen_t **self_p)
{
    if (!self_p || !*self_p) return;
    free((*self_p)->seen);
    free(*self_p);
    *self_p = NULL;
}

/* a text field: valid UTF-8 within the length limit */
static screen_reason_t text_ok(const screen_t *self, const char *s)
{
    size_t n = strlen(s);
    if (n > self->lim.max_text) return SCREEN_TEXT_TOO_LONG;
    return utf8_valid(s, n) ? SCREEN_OK : SCREEN_BAD_UTF8;
}

static void absorb(crypto_generichash_state *h, const char *s)
{
    uint64_t n = strlen(s);
    crypto_generichash_update(h, (const unsigned char *)&n, sizeof n);
    crypto_generichash_update(h, (const unsigned char *)s, n);
}

/* What makes two groups the same to a learner: the node, the question and
 * the completion texts. Versions, timestamps and rewards are left out, so a
 * flood of one group with those changed is still a flood. */
static digest_t content_digest(const rec_group_view_t *v)
{
    crypto_generichash_state h;
    crypto_generichash_init(&h, NULL, 0, 16);
    absorb(&h, v->r.node);
    absorb(&h, v->r.task.family);
    absorb(&h, v->r.task.question);
    absorb(&h, v->r.task.answer);
    for (size_t i = 0; i < v->r.n_completions; i++) {
        rec_completion_t c;
        rec_group_completion(v, i, &c);
        absorb(&h, c.text);
    }
    unsigned char out[16];
    crypto_generichash_final(&h, out, sizeof out);
    digest_t d;
    memcpy(&d.a, out, 8);
    memcpy(&d.b, out + 8, 8);
    return d;
}

static int seen_before(screen_t *self, digest_t d)
{
    for (int i = 0; i < self->n_seen; i++)
        if (self->seen[i].a == d.a && self->seen[i].b == d.b) return 1;
    self->seen[self->next_seen] = d;
    self->next_seen = (self->next_seen + 1) % self->lim.dup_window;
    if (self->n_seen < self->lim.dup_window) self->n_seen++;
    return 0;
}

static screen_reason_t metadata_ok(const char *json, const char *family)
{
    cJSON *m = cJSON_Parse(json);
    const cJSON *src = cJSON_GetObjectItemCaseSensitive(m, "source_dataset");
    screen_reason_t r = cJSON_IsObject(m) && cJSON_IsString(src) && strcmp(src->valuestring, family) == 0
                            ? SCREEN_OK
                            : SCREEN_BAD_METADATA;
    cJSON_Delete(m);
    return r;
}

/* source: the node the record must name, NULL for any; view: where the
 * record's view goes when it passes, or NULL */
static screen_reason_t check(screen_t *self, const void *buf, size_t len, const char *source, rec_group_view_t *view)
{
    if (len > self->lim.max_record) return SCREEN_TOO_LARGE;
    rec_group_view_t v;
    char err[256];
    if (rec_group_view(buf, len, &v, err, sizeof err) != 0) return SCREEN_MALFORMED;
    if (pool_node_ok(v.r.node, err, sizeof err) != 0) return SCREEN_BAD_NODE;
    if (source && strcmp(v.r.node, source) != 0) return SCREEN_NODE_MISMATCH;
    if (strcmp(v.r.node, self->node) == 0) return SCREEN_OWN;
    if (v.r.n_completions != (size_t)self->lim.completions) return SCREEN_WRONG_SIZE;
    const char *fields[] = {v.r.model,       v.r.task.family,        v.r.task.question,
                            v.r.task.answer, v.r.task.metadata_json, v.r.task.node};
    screen_reason_t r;
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if ((r = text_ok(self, fields[i])) != SCREEN_OK) return r;
    for (size_t i = 0; i < v.r.n_completions; i++) {
        rec_completion_t c;
        rec_group_completion(&v, i, &c);
        if ((r = text_ok(self, c.text)) != SCREEN_OK) return r;
    }
    if (!task_family_find(v.r.task.family)) return SCREEN_UNKNOWN_FAMILY;
    if ((r = metadata_ok(v.r.task.metadata_json, v.r.task.family)) != SCREEN_OK) return r;
    if (seen_before(self, content_digest(&v))) return SCREEN_DUPLICATE;
    if (view) *view = v;
    return SCREEN_OK;
}

static screen_reason_t check_record(screen_t *self, const void *buf, size_t len, const char *source,
                                    rec_group_view_t *view)
{
    if (!buf || len > self->lim.max_record) return SCREEN_TOO_LARGE;
    /* a view points into the caller's memory, never into a copy */
    if (view && (uintptr_t)buf % REC_ALIGN != 0) return SCREEN_MALFORMED;
    void *copy = NULL;
    const void *aligned = rec_aligned(buf, len, &copy);
    screen_reason_t r = aligned ? check(self, aligned, len, source, view) : SCREEN_MALFORMED;
    free(copy);
    return r;
}

screen_reason_t screen_check(screen_t *self, const void *buf, size_t len)
{
    screen_reason_t r = check_record(self, buf, len, NULL, NULL);
    self->counts[r]++;
    return r;
}

static screen_reason_t check_entry(screen_t *self, const uint8_t *entry, size_t len, const char *source,
                                   const uint8_t *pub, rec_group_view_t *view)
{
    char err[128];
    if (!entry || len > self->lim.max_record + IDENTITY_SIGNATURE_BYTES) return SCREEN_TOO_LARGE;
    if (pool_node_ok(source, err, sizeof err) != 0) return SCREEN_BAD_NODE;
    if (!pub) return SCREEN_UNSIGNED;
    const uint8_t *rec;
    size_t rec_len;
    int opened = identity_open(pub, entry, len, &rec, &rec_len);
    if (opened < 0) return SCREEN_UNSIGNED;
    if (!opened) return SCREEN_BAD_SIGNATURE;
    return check_record(self, rec, rec_len, source, view);
}

screen_reason_t screen_entry(screen_t *self, const void *entry, size_t len, const char *source, const uint8_t *pub,
                             rec_group_view_t *view)
{
    screen_reason_t r = check_entry(self, entry, len, source, pub, view);
    self->counts[r]++;
    return r;
}

long screen_count(const screen_t *self, screen_reason_t r) { return self->counts[r]; }

long screen_rejected(const screen_t *self)
{
    long n = 0;
    for (int r = SCREEN_OK + 1; r < SCREEN_NREASONS; r++)
        if (r != SCREEN_OWN) n += self->counts[r];
    return n;
}

const char *screen_reason_name(screen_reason_t r) { return r < SCREEN_NREASONS ? names[r] : "?"; }
