/* The game's stage outputs (game_output.h): the best completion of a
 * group (the first of equals, NaN last), an output built from scored
 * groups and read back, and every way a peer's output is refused (another
 * node or round, a question outside the round or twice, another answer,
 * more than one completion, text that is no UTF-8 or too long, more groups
 * than questions, bytes that are no record); the swarm seed and student
 * numbers are the same for the same names. */
#include "check.h"
#include "game/game_output.h"

/* a precondition of the rest of a test: its failure ends the program */
#define CHECK(cond)                                                    \
    do {                                                               \
        if (!(cond)) {                                                 \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #cond); \
            exit(1);                                                   \
        }                                                              \
    } while (0)

#define Q 3
#define ROUND 5
#define FIRST ((uint64_t)ROUND * Q)

static const char *const answers[Q] = {"4", "7", "12"};

/* a scored group of question q (index FIRST + q unless index given) with
 * these completions and rewards */
static uint8_t *group(uint64_t index, const char *answer, const char *const *texts, const float *rewards, int n,
                      size_t *len)
{
    rec_completion_t c[8] = {0};
    for (int i = 0; i < n; i++) c[i] = (rec_completion_t){.text = texts[i], .reward = rewards[i], .finished = true};
    rec_group_t r = {.node = "n1",
                     .round = 3 * (ROUND - 1) + 1,
                     .model = "tiny",
                     .task = {.task_id = index,
                              .family = "game_answer",
                              .question = "Q?",
                              .answer = answer,
                              .metadata_json = "{}",
                              .index = index,
                              .node = "n1"},
                     .completions = c,
                     .n_completions = (size_t)n,
                     .scored = true};
    uint8_t *buf;
    return rec_group_build(&r, &buf, len) == 0 ? buf : NULL;
}

static void test_best(void)
{
    const char *t[4] = {"a", "b", "c", "d"};
    size_t len;
    struct {
        float r[4];
        int best;
    } cases[] = {{{0.2f, 1.2f, 1.2f, 0}, 1}, {{NAN, 0, 0, 0}, 1}, {{NAN, NAN, NAN, NAN}, 0}, {{0, 0, 0, 0.5f}, 3}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        uint8_t *g = group(FIRST, "4", t, cases[k].r, 4, &len);
        rec_group_view_t v;
        CHECK(g && rec_group_view(g, len, &v, NULL, 0) == 0);
        EXPECTF(game_best(&v) == cases[k].best, "case %zu: best %d, want %d", k, game_best(&v), cases[k].best);
        rec_free(g);
    }
}

/* an output of n1 in ROUND from groups of questions 0 and 2 */
static uint8_t *output(size_t *len)
{
    const char *t0[2] = {"<think>2+2</think><answer>5</answer>", "<think>2+2</think><answer>4</answer>"};
    const char *t2[2] = {"twelve", "<answer>12</answer>"};
    float r0[2] = {0.2f, 1.2f}, r2[2] = {0.9f, 0.1f};
    size_t l0, l2;
    uint8_t *g0 = group(FIRST, "4", t0, r0, 2, &l0), *g2 = group(FIRST + 2, "12", t2, r2, 2, &l2);
    rec_group_view_t v0, v2;
    CHECK(g0 && g2 && rec_group_view(g0, l0, &v0, NULL, 0) == 0 && rec_group_view(g2, l2, &v2, NULL, 0) == 0);
    const rec_group_view_t *views[3] = {&v0, NULL, &v2};
    uint8_t *out = NULL;
    char err[256] = "";
    EXPECTF(game_output_build("n1", ROUND, 9, views, 3, &out, len, err, sizeof err) == 0, "build: %s", err);
    rec_free(g0), rec_free(g2);
    return out;
}

static void test_round_trip(void)
{
    size_t len;
    uint8_t *out = output(&len);
    const char *texts[Q];
    char err[256] = "";
    int n = game_output_read(out, len, "n1", ROUND, FIRST, Q, answers, 1000, texts, err, sizeof err);
    EXPECTF(n == 2, "read %d texts: %s", n, err);
    EXPECT(texts[0] && strcmp(texts[0], "<think>2+2</think><answer>4</answer>") == 0);
    EXPECT(texts[1] == NULL);
    EXPECT(texts[2] && strcmp(texts[2], "twelve") == 0);
    /* another node, another round, a shorter limit, other answers */
    EXPECT(game_output_read(out, len, "n2", ROUND, FIRST, Q, answers, 1000, texts, err, sizeof err) == -1);
    EXPECT(game_output_read(out, len, "n1", ROUND + 1, FIRST + Q, Q, answers, 1000, texts, err, sizeof err) == -1);
    EXPECT(game_output_read(out, len, "n1", ROUND, FIRST, Q, answers, 10, texts, err, sizeof err) == -1);
    EXPECT(texts[0] == NULL && texts[2] == NULL);
    const char *other[Q] = {"4", "7", "13"};
    EXPECT(game_output_read(out, len, "n1", ROUND, FIRST, Q, other, 1000, texts, err, sizeof err) == -1);
    EXPECTF(strstr(err, "another answer") != NULL, "err: %s", err);
    /* fewer questions than the output's groups */
    EXPECT(game_output_read(out, len, "n1", ROUND, FIRST, 1, answers, 1000, texts, err, sizeof err) == -1);
    /* bytes that are no record */
    uint8_t junk[64] = {1, 2, 3};
    EXPECT(game_output_read(junk, sizeof junk, "n1", ROUND, FIRST, Q, answers, 1000, texts, err, sizeof err) == -1);
    rec_free(out);
}

/* a batch of n1 in ROUND holding the given groups as they are */
static void expect_refused(const char *what, uint64_t *index, const char **answer, const char *const *texts, int n)
{
    rec_group_t rs[2];
    rec_completion_t c[2][3];
    uint8_t *bufs[2];
    size_t lens[2];
    float rewards[3] = {1, 1, 1};
    for (int g = 0; g < 2; g++) {
        bufs[g] = group(index[g], answer[g], texts, rewards, n, &lens[g]);
        rec_group_view_t v;
        CHECK(bufs[g] && rec_group_view(bufs[g], lens[g], &v, NULL, 0) == 0);
        rec_group_unpack(&v, &rs[g], c[g]);
    }
    rec_batch_t b = {.node = "n1", .round = ROUND, .groups = rs, .n_groups = 2, .stats_json = "{}"};
    uint8_t *out;
    size_t len;
    CHECK(rec_batch_build(&b, &out, &len) == 0);
    const char *texts_out[Q];
    char err[256] = "";
    int got = game_output_read(out, len, "n1", ROUND, FIRST, Q, answers, 1000, texts_out, err, sizeof err);
    EXPECTF(got == -1 && err[0], "%s: read %d (%s)", what, got, err);
    for (int q = 0; q < Q; q++) EXPECTF(texts_out[q] == NULL, "%s: text %d left set", what, q);
    rec_free(out), rec_free(bufs[0]), rec_free(bufs[1]);
}

static void test_refused(void)
{
    const char *one[1] = {"<answer>4</answer>"}, *two[2] = {"a", "b"}, *bad[1] = {"\xff\xfe"};
    const char *ans[2] = {"4", "7"};
    expect_refused("outside the round", (uint64_t[]){FIRST, FIRST + Q}, ans, one, 1);
    expect_refused("before the round", (uint64_t[]){FIRST - 1, FIRST + 1}, (const char *[]){"12", "7"}, one, 1);
    expect_refused("a question twice", (uint64_t[]){FIRST, FIRST}, (const char *[]){"4", "4"}, one, 1);
    expect_refused("two completions", (uint64_t[]){FIRST, FIRST + 1}, ans, two, 2);
    expect_refused("no UTF-8", (uint64_t[]){FIRST, FIRST + 1}, ans, bad, 1);
    expect_refused("another answer", (uint64_t[]){FIRST, FIRST + 1}, (const char *[]){"4", "8"}, one, 1);
}

static void test_names(void)
{
    EXPECT(game_swarm_seed("sapo") == game_swarm_seed("sapo"));
    EXPECT(game_swarm_seed("sapo") != game_swarm_seed("sapo2"));
    int a = game_student_id("n0"), b = game_student_id("n1");
    EXPECT(a >= 0 && a < 1000 && b >= 0 && b < 1000 && a != b);
    EXPECT(game_student_id("n0") == a);
}

int main(void)
{
    RUN_TEST(test_best);
    RUN_TEST(test_round_trip);
    RUN_TEST(test_refused);
    RUN_TEST(test_names);
    CHECK_EXIT();
}
