/* Screening of pool records (sampler/screen.c): one real group passes, and
 * each way of bending it is refused for its own reason and counted; signed
 * entries pass only under their node's key, unchanged, naming that node. */
#include "check.h"
#include "util/identity.h"
#include "../sampler/screen.h"
#include "records.h"
#include "tasks/task.h"
#include "util/utf8.h"

typedef struct {
    const char *node, *family, *metadata, *text0;
    int n;
} shape_t;

/* a group of n completions for a real basic_arithmetic question */
static uint8_t *build(const shape_t *s, size_t *len)
{
    task_mix_t *mix = task_mix_new(NULL, 3, NULL, 0);
    task_question_t e = {0};
    char err[256];
    task_mix_draw(mix, 0, &e, err, sizeof err);
    char *meta = cJSON_PrintUnformatted(e.metadata);
    const char *fam = cJSON_GetObjectItemCaseSensitive(e.metadata, "source_dataset")->valuestring;
    rec_task_t t = {.family = s->family ? s->family : fam,
                    .question = e.question,
                    .answer = e.answer,
                    .metadata_json = s->metadata ? s->metadata : meta};
    rec_completion_t c[8];
    for (int i = 0; i < s->n; i++)
        c[i] = (rec_completion_t){.text = i == 0 && s->text0 ? s->text0 : "<answer>1</answer>"};
    rec_group_t r = {.node = s->node ? s->node : "peer", .task = t, .completions = c, .n_completions = (size_t)s->n};
    uint8_t *buf = NULL;
    EXPECT(rec_group_build(&r, &buf, len) == 0);
    free(meta);
    task_question_free(&e);
    task_mix_destroy(&mix);
    return buf;
}

static screen_reason_t check_one(screen_t *sc, const shape_t *s)
{
    size_t len;
    uint8_t *buf = build(s, &len);
    screen_reason_t r = screen_check(sc, buf, len);
    rec_free(buf);
    return r;
}

static void test_utf8(void)
{
    EXPECT(utf8_valid("plain \xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80", 17));
    EXPECT(!utf8_valid("\xC0\x80", 2));         /* overlong NUL */
    EXPECT(!utf8_valid("\xED\xA0\x80", 3));     /* surrogate */
    EXPECT(!utf8_valid("\xF4\x90\x80\x80", 4)); /* past U+10FFFF */
    EXPECT(!utf8_valid("\x80", 1));             /* lone continuation */
    EXPECT(!utf8_valid("\xE2\x82", 2));         /* cut short */
}

/* reason r (its place in the list) is named name and counted n times */
static bool counted(const screen_t *sc, int r, const char *name, long n)
{
    bool ok = strcmp(screen_reason_name((screen_reason_t)r), name) == 0 && screen_count(sc, (screen_reason_t)r) == n;
    if (!ok)
        fprintf(stderr, "reason %d: %s counted %ld, not %s %ld\n", r, screen_reason_name((screen_reason_t)r),
                screen_count(sc, (screen_reason_t)r), name, n);
    return ok;
}

static void test_reasons(void)
{
    screen_limits_t lim = {.node = "me", .completions = 4, .max_record = 8192, .max_text = 1000, .dup_window = 8};
    screen_t *sc = screen_new(&lim);
    char long_text[1100];
    memset(long_text, 'x', sizeof long_text - 1);
    long_text[sizeof long_text - 1] = '\0';
    EXPECT(check_one(sc, &(shape_t){.n = 4}) == SCREEN_OK);
    EXPECT(check_one(sc, &(shape_t){.n = 4}) == SCREEN_DUPLICATE);
    EXPECT(check_one(sc, &(shape_t){.n = 4, .node = "me"}) == SCREEN_OWN);
    EXPECT(check_one(sc, &(shape_t){.n = 4, .node = "a:b"}) == SCREEN_BAD_NODE);
    EXPECT(check_one(sc, &(shape_t){.n = 5}) == SCREEN_WRONG_SIZE);
    EXPECT(check_one(sc, &(shape_t){.n = 4, .text0 = long_text}) == SCREEN_TEXT_TOO_LONG);
    EXPECT(check_one(sc, &(shape_t){.n = 4, .text0 = "<answer>\xC0\x80</answer>"}) == SCREEN_BAD_UTF8);
    EXPECT(check_one(sc, &(shape_t){.n = 4, .family = "no_such_family"}) == SCREEN_UNKNOWN_FAMILY);
    EXPECT(check_one(sc, &(shape_t){.n = 4, .metadata = "[1]"}) == SCREEN_BAD_METADATA);
    EXPECT(check_one(sc, &(shape_t){.n = 4, .metadata = "{\"source_dataset\":\"other\"}"}) == SCREEN_BAD_METADATA);
    EXPECT(screen_check(sc, NULL, 1 << 20) == SCREEN_TOO_LARGE);
    uint8_t junk[64] = {0};
    memcpy(junk + 4, "SROL", 4);
    EXPECT(screen_check(sc, junk + 1, 40) == SCREEN_MALFORMED); /* misaligned junk is copied, then refused */
    size_t len;
    uint8_t *buf = build(&(shape_t){.n = 4, .node = "other"}, &len);
    EXPECT(screen_check(sc, buf, len / 2) == SCREEN_MALFORMED);
    rec_free(buf);
    EXPECT(screen_count(sc, SCREEN_OK) == 1 && screen_count(sc, SCREEN_MALFORMED) == 2);
    EXPECT(screen_rejected(sc) == 11);
    /* the counts by name, first to last as the metrics list them */
    EXPECT(counted(sc, 0, "passed", 1) && counted(sc, 1, "too_large", 1) && counted(sc, 2, "malformed", 2));
    screen_destroy(&sc);
    EXPECT(sc == NULL);
}

/* env: a group of node `node`, signed by `by`, one byte flipped at `flip`
 * when flip >= 0 (a signature byte below IDENTITY_SIGNATURE_BYTES, else a
 * record byte) */
static screen_reason_t check_signed(screen_t *sc, const identity_t *by, const char *node, const char *source,
                                    const uint8_t *pub, long flip, const char *text0)
{
    size_t len, env_len;
    uint8_t *rec = build(&(shape_t){.n = 4, .node = node, .text0 = text0}, &len);
    uint8_t *env = identity_seal(by, rec, len, &env_len);
    if (flip >= 0) env[flip] ^= 0x20;
    rec_group_view_t v;
    screen_reason_t r = screen_entry(sc, env, env_len, source, pub, &v);
    if (r == SCREEN_OK) EXPECT(strcmp(v.r.node, node) == 0 && v.r.n_completions == 4);
    free(env);
    rec_free(rec);
    return r;
}

static void test_signatures(void)
{
    screen_limits_t lim = {.node = "me", .completions = 4, .max_record = 8192, .max_text = 1000, .dup_window = 8};
    screen_t *sc = screen_new(&lim);
    identity_t *peer = identity_new(), *other = identity_new();
    const uint8_t *pub = identity_public(peer);
    EXPECT(check_signed(sc, peer, "peer", "peer", pub, -1, "<answer>1</answer>") == SCREEN_OK);
    EXPECT(check_signed(sc, peer, "peer", "peer", pub, 3, "<answer>2</answer>") == SCREEN_BAD_SIGNATURE);
    EXPECT(check_signed(sc, peer, "peer", "peer", pub, IDENTITY_SIGNATURE_BYTES + 40, "<answer>3</answer>") ==
           SCREEN_BAD_SIGNATURE);
    /* signed by a key that is not the one registered for the node */
    EXPECT(check_signed(sc, other, "peer", "peer", pub, -1, "<answer>4</answer>") == SCREEN_BAD_SIGNATURE);
    EXPECT(check_signed(sc, peer, "peer", "peer", NULL, -1, "<answer>5</answer>") == SCREEN_UNSIGNED);
    /* a record of node "victim" published under the peer's id and key: a
     * replay of the victim's group, or a lie about who made it */
    EXPECT(check_signed(sc, peer, "victim", "peer", pub, -1, "<answer>6</answer>") == SCREEN_NODE_MISMATCH);
    EXPECT(check_signed(sc, peer, "peer", "a:b", pub, -1, "<answer>7</answer>") == SCREEN_BAD_NODE);
    /* the same content again, properly signed, is still a duplicate */
    EXPECT(check_signed(sc, peer, "peer", "peer", pub, -1, "<answer>1</answer>") == SCREEN_DUPLICATE);
    uint8_t shorty[IDENTITY_SIGNATURE_BYTES - 1] = {0};
    EXPECT(screen_entry(sc, shorty, sizeof shorty, "peer", pub, NULL) == SCREEN_UNSIGNED);
    EXPECT(screen_entry(sc, NULL, 1 << 20, "peer", pub, NULL) == SCREEN_TOO_LARGE);
    /* a validly signed record that does not parse, at an odd address */
    uint8_t junk[200] = {0};
    memcpy(junk + 1 + IDENTITY_SIGNATURE_BYTES + 4, "SROL", 4);
    identity_sign(peer, junk + 1 + IDENTITY_SIGNATURE_BYTES, 100, junk + 1);
    EXPECT(screen_entry(sc, junk + 1, IDENTITY_SIGNATURE_BYTES + 100, "peer", pub, NULL) == SCREEN_MALFORMED);
    /* a signed record over the size limit is refused before its signature is checked */
    uint8_t *big = calloc(1, IDENTITY_SIGNATURE_BYTES + 8193);
    EXPECT(screen_entry(sc, big, IDENTITY_SIGNATURE_BYTES + 8193, "peer", pub, NULL) == SCREEN_TOO_LARGE);
    free(big);
    EXPECT(screen_count(sc, SCREEN_OK) == 1 && screen_count(sc, SCREEN_BAD_SIGNATURE) == 3 &&
           screen_count(sc, SCREEN_UNSIGNED) == 2 && screen_count(sc, SCREEN_NODE_MISMATCH) == 1);
    EXPECT(screen_rejected(sc) == 11);
    EXPECT(counted(sc, SCREEN_NREASONS - 3, "unsigned", 2) && counted(sc, SCREEN_NREASONS - 2, "bad_signature", 3) &&
           counted(sc, SCREEN_NREASONS - 1, "node_mismatch", 1));
    identity_destroy(&peer);
    identity_destroy(&other);
    screen_destroy(&sc);
}

/* what an entry that passes hands on: the view of its record, inside the
 * entry; one whose record is not REC_ALIGN-aligned is refused when a view
 * is asked for (without one it is checked in a copy) */
static void test_view(void)
{
    screen_limits_t lim = {.node = "me", .completions = 4, .max_record = 8192, .max_text = 1000, .dup_window = 8};
    screen_t *sc = screen_new(&lim);
    identity_t *peer = identity_new();
    size_t len, env_len;
    uint8_t *rec = build(&(shape_t){.n = 4, .node = "peer"}, &len);
    uint8_t *env = identity_seal(peer, rec, len, &env_len);
    uint8_t *odd = malloc(env_len + 1);
    memcpy(odd + 1, env, env_len);
    rec_group_view_t v;
    EXPECT(screen_entry(sc, odd + 1, env_len, "peer", identity_public(peer), &v) == SCREEN_MALFORMED);
    EXPECT(screen_entry(sc, env, env_len, "peer", identity_public(peer), &v) == SCREEN_OK);
    const char *q = v.r.task.question;
    EXPECT(strcmp(v.r.node, "peer") == 0 && q > (const char *)env && q < (const char *)env + env_len);
    EXPECT(screen_entry(sc, odd + 1, env_len, "peer", identity_public(peer), NULL) == SCREEN_DUPLICATE);
    free(odd);
    free(env);
    rec_free(rec);
    identity_destroy(&peer);
    screen_destroy(&sc);
}

int main(void)
{
    RUN_TEST(test_utf8);
    RUN_TEST(test_reasons);
    RUN_TEST(test_signatures);
    RUN_TEST(test_view);
    CHECK_EXIT();
}
