/* The game's stages as tasks: the builders' prompts and metadata (top-5
 * students by reward, ties to the lower id, listed by id; no peers; peers'
 * text cut at GAME_PEER_TEXT_MAX on a UTF-8 boundary; the first
 * GAME_CRITIQUES_MAX critiques and their votes), a JSON round trip, the
 * families' scores of whole completions through task_score_completion and
 * score_group (values from game.h's weights), their lookup, and that
 * they are never drawn or scored from an answer alone. */
#include "check.h"
#include "group_buf.h"
#include "tasks/game.h"
#include "tasks/fam_game.h"
#include "node/score.h"
#include "tasks/task.h"

#define QUESTION "Maya has 30 apples and buys 12 more. How many apples does she have?"
#define GSM_SUFFIX " Give the final answer as a number, without units, between <answer> and </answer>."

/* a gsm8k-like problem with the answer 42; the caller frees it */
static task_question_t problem(void)
{
    task_question_t p = {strdup(QUESTION GSM_SUFFIX), strdup("42"), task_metadata_new("gsm8k", 12)};
    return p;
}

static const char *meta_str(const task_question_t *e, const char *key)
{
    return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e->metadata, key));
}

static double meta_num(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsNumber(v) ? v->valuedouble : -1e300;
}

static int count(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)); p++) n++;
    return n;
}

/* score completion on e and check the score and formatted */
static void expect_score(const task_question_t *e, const char *completion, double want, bool want_formatted)
{
    char err[256] = "";
    bool formatted = !want_formatted;
    double got = task_score_completion(completion, e, &formatted, err, sizeof err);
    EXPECTF(fabs(got - want) < 1e-6 && formatted == want_formatted,
            "%s: [%s] scores %g (formatted %d), want %g (%d) %s", meta_str(e, "source_dataset"), completion, got,
            formatted, want, want_formatted, err);
}

static char *critique(const char *id)
{
    return task_strdupf("<compare>#7 says 42, #3 says 41</compare>\n<explain>7 adds both</explain>\n"
                        "<identify>%s</identify>",
                        id);
}

static char *resolution(const char *majority, const char *answer)
{
    return task_strdupf("<summarize_feedback>most pick 7</summarize_feedback><majority>%s</majority>"
                        "<question>how many apples</question><think>30 + 12</think><answer>%s</answer>",
                        majority, answer);
}

static void test_families(void)
{
    static const char *const names[] = {"game_answer", "game_critique", "game_resolve"};
    char err[256];
    for (int i = 0; i < 3; i++) {
        const task_family_t *f = task_family_find(names[i]);
        EXPECTF(f && !strcmp(f->name, names[i]), "%s not found", names[i]);
        if (!f) continue;
        EXPECT(task_family_opt_in(f) && task_family_built(f));
        EXPECT(task_family_completion_scorer(f) != NULL);
        EXPECT(f->score == NULL);
        /* no config fields; generate says where questions come from */
        cJSON *config = task_family_config(f, NULL, err, sizeof err);
        EXPECT(config != NULL);
        task_question_t e = {0};
        err[0] = '\0';
        EXPECT(f->generate(config, 1, 0, &e, err, sizeof err) == -1 && strstr(err, "built by the sampler"));
        EXPECT(e.question == NULL);
        cJSON_Delete(config);
        /* a task mix naming one is refused at load, with one line naming it */
        char *spec = task_strdupf("{\"families\": {\"gsm_symbolic\": {}, \"%s\": {\"weight\": 1}}}", names[i]);
        err[0] = '\0';
        task_mix_t *mix = task_mix_new(spec, 1, err, sizeof err);
        EXPECTF(!mix && strstr(err, names[i]) && strstr(err, "sampler") && !strchr(err, '\n'), "mix %s: [%s]", spec,
                err);
        task_mix_destroy(&mix);
        free(spec);
    }
    /* the other families: neither built nor scored as whole completions */
    static const char *const others[] = {"bf", "gsm8k", "gsm_symbolic", "basic_arithmetic"};
    for (int i = 0; i < 4; i++) {
        const task_family_t *f = task_family_find(others[i]);
        EXPECT(f && !task_family_built(f) && !task_family_completion_scorer(f) && f->score);
    }
    EXPECT(task_family_find("game") == NULL);
}

static void test_answer_question(void)
{
    task_question_t p = problem(), e;
    char err[256];
    EXPECTF(game_answer_question(&p, 5, &e, err, sizeof err) == 0, "%s", err);
    /* the question less the gsm suffix, then the stage's form */
    EXPECTF(!strncmp(e.question, QUESTION "\n\n", strlen(QUESTION) + 2) && !strstr(e.question, "Give the final") &&
                count(e.question, "<answer>") == 1 && strstr(e.question, "<think>"),
            "[%s]", e.question);
    EXPECT(!strcmp(e.answer, "42"));
    EXPECT(!strcmp(meta_str(&e, "source_dataset"), "game_answer"));
    EXPECT(meta_num(e.metadata, "source_index") == 5);
    const cJSON *from = cJSON_GetObjectItemCaseSensitive(e.metadata, "problem");
    EXPECT(!strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(from, "source_dataset")), "gsm8k"));
    EXPECT(meta_num(from, "source_index") == 12);
    expect_score(&e, "<think>30 + 12</think>\n<answer>42</answer>", 1.2, true);
    expect_score(&e, "<think>30 + 11</think><answer>41</answer>", 0.2, true);
    expect_score(&e, "<answer>42</answer>", 0, false);
    /* a game question has no score of an answer alone */
    EXPECT(task_score_answer("42", &e, err, sizeof err) == -1 && strstr(err, "whole completions"));
    task_question_free(&e);
    /* the game needs a number for an answer */
    free(p.answer);
    p.answer = strdup("forty-two");
    EXPECT(game_answer_question(&p, 5, &e, err, sizeof err) == -1 && strstr(err, "forty-two") && !e.question);
    free(p.answer);
    p.answer = NULL;
    EXPECT(game_answer_question(&p, 5, &e, err, sizeof err) == -1 && strstr(err, "no number"));
    task_question_free(&p);
}

/* the text of a real gsm_symbolic question loses its own form sentence */
static void test_answer_question_from_gsm_symbolic(void)
{
    const task_family_t *f = task_family_find("gsm_symbolic");
    char err[256];
    cJSON *config = task_family_config(f, NULL, err, sizeof err);
    for (uint64_t i = 0; i < 50; i++) {
        task_question_t p, e;
        EXPECT(f->generate(config, 3, i, &p, err, sizeof err) == 0);
        EXPECTF(game_answer_question(&p, i, &e, err, sizeof err) == 0, "%s", err);
        const char *tail = strstr(p.question, " Give the final answer");
        EXPECTF(tail && !strncmp(e.question, p.question, (size_t)(tail - p.question)) &&
                    !strncmp(e.question + (tail - p.question), "\n\nReply", 7) && count(e.question, "<answer>") == 1,
                "[%s] from [%s]", e.question, p.question);
        EXPECT(!strcmp(e.answer, p.answer));
        task_question_free(&p);
        task_question_free(&e);
    }
    cJSON_Delete(config);
}

static void test_critique_selection(void)
{
    /* four at 1.2 (8, 11, 17, 40), two at 0.2 (2, 3), 0.0, NaN: the top
     * five are the four and 2, the lower id of the tie for the last place */
    const game_student_t students[] = {
        {40, "<think>a</think><answer>42</answer>", 1.2},  {3, "<think>b</think><answer>41</answer>", 0.2},
        {17, "<think>c</think><answer>$42</answer>", 1.2}, {8, "<think>d</think><answer> 42 </answer>", 1.2},
        {25, "<think>e</think><answer>7</answer>", 0.0},   {11, "<think>f</think><answer>42.0</answer>", 1.2},
        {2, "<answer>40</answer> and more", 0.2},          {30, "<think>g</think><answer>42</answer>", NAN},
    };
    task_question_t p = problem(), e;
    char err[256];
    EXPECTF(game_critique_question(&p, 9, students, 8, &e, err, sizeof err) == 0, "%s", err);
    const int want[] = {2, 8, 11, 17, 40};
    const char *const want_answer[] = {NULL, "42", "42.0", "$42", "42"};
    const cJSON *shown = cJSON_GetObjectItemCaseSensitive(e.metadata, "shown");
    EXPECT(cJSON_GetArraySize(shown) == 5);
    const char *at = e.question;
    for (int i = 0; i < 5 && cJSON_GetArraySize(shown) == 5; i++) {
        const cJSON *s = cJSON_GetArrayItem(shown, i);
        const cJSON *a = cJSON_GetObjectItem(s, "answer");
        EXPECTF(meta_num(s, "id") == want[i], "shown[%d] is %g, want %d", i, meta_num(s, "id"), want[i]);
        EXPECTF(want_answer[i] ? cJSON_IsString(a) && !strcmp(a->valuestring, want_answer[i]) : cJSON_IsNull(a),
                "shown[%d].answer", i);
        /* listed by id, each with its completion */
        char line[96];
        snprintf(line, sizeof line, "Student #%d said: ", want[i]);
        const char *next = strstr(e.question, line);
        EXPECTF(next && next > at, "%s missing or out of order", line);
        if (next) at = next;
    }
    EXPECT(strstr(e.question, "Student #8 said: <think>d</think><answer> 42 </answer>\n"));
    EXPECT(!strstr(e.question, "Student #3 ") && !strstr(e.question, "Student #25") && !strstr(e.question, "#30"));
    static const char head[] = "Students were asked this question:\n\n" QUESTION "\n\n";
    EXPECT(!strncmp(e.question, head, strlen(head)));
    EXPECT(count(e.question, "<identify>") == 1 && !strstr(e.question, "Give the final"));
    EXPECT(meta_num(e.metadata, "source_index") == 9 && !strcmp(e.answer, "42"));
    task_question_free(&e);
    /* fewer than five: all of them */
    EXPECT(game_critique_question(&p, 9, students, 2, &e, err, sizeof err) == 0);
    shown = cJSON_GetObjectItemCaseSensitive(e.metadata, "shown");
    EXPECT(cJSON_GetArraySize(shown) == 2 && meta_num(cJSON_GetArrayItem(shown, 0), "id") == 3 &&
           meta_num(cJSON_GetArrayItem(shown, 1), "id") == 40);
    task_question_free(&e);
    task_question_free(&p);
}

static void test_critique_scores(void)
{
    /* 3 wrong, 7 right (written "$42"), 12 out of form: no answer */
    const game_student_t students[] = {{3, "<think>x</think><answer>41</answer>", 0.2},
                                       {7, "<think>y</think><answer>$42</answer>", 1.2},
                                       {12, "<think>z</think>42", 0}};
    task_question_t p = problem(), e;
    char err[256];
    EXPECT(game_critique_question(&p, 1, students, 3, &e, err, sizeof err) == 0);
    static const struct {
        const char *id;
        double score;
    } cases[] = {{"7", 1.4}, {"3", 0.4}, {"12", 0.4}, {"5", 0.2}, {"#7", 0.2}, {"", 0.2}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *c = critique(cases[i].id);
        expect_score(&e, c, cases[i].score, true);
        free(c);
    }
    expect_score(&e, "<identify>7</identify>", 0, false);
    /* through the verifier's score_group, whose floor and format bonus
     * leave a stage's score as it is (the default floor would zero 0.2) */
    char *c7 = critique("7"), *c5 = critique("5");
    char *meta = cJSON_PrintUnformatted(e.metadata);
    rec_completion_t c[] = {{.text = c7}, {.text = c5}, {.text = "<answer>42</answer>"}};
    rec_group_t r = {
        .node = "n0",
        .completions = c,
        .n_completions = 3,
        .task = {.family = "game_critique", .question = e.question, .answer = e.answer, .metadata_json = meta}};
    size_t len;
    void *buf = group_buf(&r, &len);
    score_stats_t st = {0};
    EXPECTF(buf && score_group(buf, len, (reward_rule_t){0.6f, 0.5f}, &st, err, sizeof err) == 0, "%s", err);
    rec_group_view_t v;
    EXPECT(buf && rec_group_view(buf, len, &v, err, sizeof err) == 0);
    const float want[] = {1.4f, 0.2f, 0.0f};
    for (size_t i = 0; buf && i < 3; i++) {
        rec_completion_t got;
        rec_group_completion(&v, i, &got);
        EXPECTF(fabsf(got.reward - want[i]) < 1e-6f, "completion %zu: reward %g, want %g", i, got.reward, want[i]);
    }
    EXPECT(st.scored == 1 && st.completions == 3 && st.malformed == 0);
    free(buf);
    /* metadata a peer broke: the record is dropped with the reason */
    const char *bad_meta = "{\"source_dataset\":\"game_critique\",\"shown\":[{\"id\":\"7\",\"answer\":\"42\"}]}";
    r.task.metadata_json = bad_meta;
    buf = group_buf(&r, &len);
    err[0] = '\0';
    EXPECT(buf && score_group(buf, len, (reward_rule_t){0, 0}, &st, err, sizeof err) == -1 && strstr(err, "shown[0]") &&
           st.malformed == 1);
    free(buf);
    free(meta);
    free(c7);
    free(c5);
    task_question_free(&e);
    task_question_free(&p);
}

static void test_no_peers(void)
{
    task_question_t p = problem(), e;
    char err[256];
    EXPECT(game_critique_question(&p, 2, NULL, 0, &e, err, sizeof err) == 0);
    EXPECT(strstr(e.question, "No other student's answer reached you") && !strstr(e.question, "Student #") &&
           strstr(e.question, "leave <identify></identify> empty"));
    const cJSON *shown = cJSON_GetObjectItemCaseSensitive(e.metadata, "shown");
    EXPECT(cJSON_IsArray(shown) && cJSON_GetArraySize(shown) == 0);
    /* only the form can be earned */
    char *c = critique("7");
    expect_score(&e, c, 0.2, true);
    free(c);
    expect_score(&e, "<compare>c</compare><explain>e</explain><identify></identify>", 0.2, true);
    task_question_free(&e);

    EXPECT(game_resolve_question(&p, 2, NULL, 0, &e, err, sizeof err) == 0);
    EXPECT(strstr(e.question, "No criticism") && !strstr(e.question, "Criticism #"));
    const cJSON *votes = cJSON_GetObjectItemCaseSensitive(e.metadata, "votes");
    EXPECT(cJSON_IsArray(votes) && cJSON_GetArraySize(votes) == 0);
    /* the form and a right answer, no vote */
    char *r = resolution("", "42");
    expect_score(&e, r, 1.2, true);
    free(r);
    r = resolution("7", "42");
    expect_score(&e, r, 1.2, true);
    free(r);
    task_question_free(&e);
    task_question_free(&p);
}

/* head (an odd number of bytes) then two-byte characters, so that every
 * even byte after head is a continuation byte and a cut at
 * GAME_PEER_TEXT_MAX (even) must back up one byte; tail after the cut */
static char *long_completion(const char *head, const char *tail)
{
    size_t h = strlen(head), n = h + 2 * 1500;
    char *s = malloc(n + strlen(tail) + 1);
    memcpy(s, head, h);
    for (size_t i = h; i < n; i += 2) s[i] = (char)0xC3, s[i + 1] = (char)0xA9; /* é */
    strcpy(s + n, tail);
    return s;
}

static void test_truncation(void)
{
    char *lng = long_completion("<think>", "</think><answer>42</answer>");
    EXPECT(game_reward_answer(lng, "42").total > 1); /* right, uncut */
    char *exact = malloc(GAME_PEER_TEXT_MAX + 1);
    memset(exact, 'x', GAME_PEER_TEXT_MAX);
    exact[GAME_PEER_TEXT_MAX] = '\0';
    const game_student_t students[] = {{4, lng, 1.2}, {6, exact, 0}};
    task_question_t p = problem(), e;
    char err[256];
    EXPECT(game_critique_question(&p, 1, students, 2, &e, err, sizeof err) == 0);
    /* student 4: its first GAME_PEER_TEXT_MAX - 1 bytes, then the mark */
    char *want = task_strdupf("Student #4 said: %.*s [cut]\n\n", GAME_PEER_TEXT_MAX - 1, lng);
    EXPECTF(strstr(e.question, want), "the cut text is not in the prompt");
    EXPECT(!strstr(e.question, "</think><answer>42"));
    free(want);
    /* exactly the limit: whole, no mark */
    want = task_strdupf("Student #6 said: %s\n\n", exact);
    EXPECT(strstr(e.question, want) && count(e.question, "[cut]") == 1);
    free(want);
    /* the answer is read from the text as shown: cut off, so none */
    const cJSON *shown = cJSON_GetObjectItemCaseSensitive(e.metadata, "shown");
    EXPECT(cJSON_IsNull(cJSON_GetObjectItem(cJSON_GetArrayItem(shown, 0), "answer")));
    char *c = critique("4");
    expect_score(&e, c, 0.4, true);
    free(c);
    task_question_free(&e);

    /* a critique cut before its <identify> casts no vote */
    char *long_critique = long_completion("<compare>", "</compare><explain>e</explain><identify>4</identify>");
    EXPECT(game_identified(long_critique) == 4); /* a vote, uncut */
    char *c4 = critique("4");
    const char *const critiques[] = {long_critique, c4};
    EXPECT(game_resolve_question(&p, 1, critiques, 2, &e, err, sizeof err) == 0);
    const cJSON *votes = cJSON_GetObjectItemCaseSensitive(e.metadata, "votes");
    EXPECT(cJSON_GetArraySize(votes) == 2 && cJSON_GetArrayItem(votes, 0)->valuedouble == -1 &&
           cJSON_GetArrayItem(votes, 1)->valuedouble == 4);
    EXPECT(count(e.question, "[cut]") == 1 && e.question && strlen(e.question) < 2 * GAME_PEER_TEXT_MAX);
    free(c4);
    free(long_critique);
    task_question_free(&e);
    task_question_free(&p);
    free(exact);
    free(lng);
}

static void test_resolve_question(void)
{
    /* seven critiques: the first five are listed, and with them 7 has the
     * plurality (3 votes to 1); with all seven 3 would tie it (3 to 3) */
    char *c7 = critique("7"), *c3 = critique("3");
    const char *const critiques[] = {c7, c3, c7, "<identify>7</identify>", c7, c3, c3};
    task_question_t p = problem(), e;
    char err[256];
    EXPECTF(game_resolve_question(&p, 4, critiques, 7, &e, err, sizeof err) == 0, "%s", err);
    const cJSON *votes = cJSON_GetObjectItemCaseSensitive(e.metadata, "votes");
    const double want[] = {7, 3, 7, -1, 7};
    EXPECT(cJSON_GetArraySize(votes) == 5);
    for (int i = 0; i < 5 && cJSON_GetArraySize(votes) == 5; i++)
        EXPECTF(cJSON_GetArrayItem(votes, i)->valuedouble == want[i], "votes[%d]", i);
    EXPECT(strstr(e.question, "Criticism #1 was: <compare>") && strstr(e.question, "Criticism #5 was: <compare>") &&
           strstr(e.question, "Criticism #4 was: <identify>7</identify>\n") && !strstr(e.question, "Criticism #6"));
    EXPECT(strstr(e.question, "<summarize_feedback>") && strstr(e.question, "<majority>") &&
           count(e.question, "<answer>") == 1 && !strstr(e.question, "Give the final"));
    EXPECT(!strcmp(meta_str(&e, "source_dataset"), "game_resolve") && meta_num(e.metadata, "source_index") == 4);
    static const struct {
        const char *majority, *answer;
        double score;
    } cases[] = {{"7", "42", 2.2}, {"3", "42", 1.2}, {"7", "41", 1.2}, {"3", "41", 0.2}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *r = resolution(cases[i].majority, cases[i].answer);
        expect_score(&e, r, cases[i].score, true);
        free(r);
    }
    expect_score(&e, "<think>t</think><answer>42</answer>", 0, false);
    task_question_free(&e);
    free(c7);
    free(c3);
    task_question_free(&p);
}

/* a question through JSON is the same question and scores the same */
static void test_json_round_trip(void)
{
    const game_student_t students[] = {{3, "<think>x</think><answer>41</answer>", 0.2},
                                       {7, "<think>y</think><answer>42</answer>", 1.2}};
    task_question_t p = problem(), e, back;
    char err[256];
    EXPECT(game_critique_question(&p, 8, students, 2, &e, err, sizeof err) == 0);
    cJSON *j = task_question_to_json(&e);
    char *text = cJSON_PrintUnformatted(j);
    cJSON *parsed = cJSON_Parse(text);
    EXPECTF(task_question_from_json(parsed, &back, err, sizeof err) == 0, "%s", err);
    EXPECT(!strcmp(back.question, e.question) && !strcmp(back.answer, e.answer) &&
           cJSON_Compare(back.metadata, e.metadata, 1));
    char *c = critique("7");
    expect_score(&back, c, 1.4, true);
    free(c);
    task_question_free(&back);
    cJSON_Delete(parsed);
    free(text);
    cJSON_Delete(j);
    task_question_free(&e);
    task_question_free(&p);
}

/* metadata without what the scorers need: -1 and the field named */
static void test_bad_metadata(void)
{
    static const char *const bad[][2] = {
        {"{\"source_dataset\":\"game_critique\"}", "metadata.shown"},
        {"{\"source_dataset\":\"game_critique\",\"shown\":{}}", "metadata.shown"},
        {"{\"source_dataset\":\"game_critique\",\"shown\":[{\"id\":-1,\"answer\":null}]}", "shown[0]"},
        {"{\"source_dataset\":\"game_critique\",\"shown\":[{\"id\":1,\"answer\":\"4\"},{\"id\":1.5,\"answer\":\"4\"}]}",
         "shown[1]"},
        {"{\"source_dataset\":\"game_critique\",\"shown\":[{\"id\":1000000000,\"answer\":\"4\"}]}", "shown[0]"},
        {"{\"source_dataset\":\"game_critique\",\"shown\":[{\"id\":1,\"answer\":4}]}", "shown[0]"},
        {"{\"source_dataset\":\"game_critique\",\"shown\":[7]}", "shown[0]"},
        {"{\"source_dataset\":\"game_resolve\"}", "metadata.votes"},
        {"{\"source_dataset\":\"game_resolve\",\"votes\":[7,\"3\"]}", "votes[1]"},
        {"{\"source_dataset\":\"game_resolve\",\"votes\":[2.5]}", "votes[0]"},
        {"{\"source_dataset\":\"game_resolve\",\"votes\":[1e10]}", "votes[0]"},
        {"{\"source_dataset\":\"game_resolve\",\"votes\":[1,2,3,4,5,6]}", "6 votes"},
        {"{\"source_dataset\":\"game_critique\",\"shown\":[{\"id\":1,\"answer\":null},{\"id\":2,\"answer\":null},"
         "{\"id\":3,\"answer\":null},{\"id\":4,\"answer\":null},{\"id\":5,\"answer\":null},{\"id\":6,\"answer\":null}]"
         "}",
         "6 students"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        task_question_t e = {"q", "42", cJSON_Parse(bad[i][0])};
        char err[256] = "";
        bool formatted;
        double s = task_score_completion("<compare>c</compare><explain>e</explain><identify>1</identify>", &e,
                                         &formatted, err, sizeof err);
        EXPECTF(s == -1 && strstr(err, bad[i][1]), "%s: %g [%s], want -1 naming %s", bad[i][0], s, err, bad[i][1]);
        cJSON_Delete(e.metadata);
    }
    /* well-formed edge values are accepted */
    task_question_t e = {"q", "42",
                         cJSON_Parse("{\"source_dataset\":\"game_critique\",\"shown\":[{\"id\":999999999,"
                                     "\"answer\":\"42\"},{\"id\":0,\"answer\":null}]}")};
    expect_score(&e, "<compare>c</compare><explain>e</explain><identify>999999999</identify>", 1.4, true);
    cJSON_Delete(e.metadata);
    e.metadata = cJSON_Parse("{\"source_dataset\":\"game_resolve\",\"votes\":[-5,0,0,3,4]}");
    char *r = resolution("0", "42");
    expect_score(&e, r, 2.2, true);
    free(r);
    cJSON_Delete(e.metadata);
}

static void test_builder_errors(void)
{
    task_question_t p = problem(), e;
    char err[256];
    const game_student_t dup[] = {{3, "a", 1}, {3, "b", 0}};
    EXPECT(game_critique_question(&p, 1, dup, 2, &e, err, sizeof err) == -1 && strstr(err, "id of another") &&
           !e.question);
    const game_student_t neg[] = {{-1, "a", 1}};
    EXPECT(game_critique_question(&p, 1, neg, 1, &e, err, sizeof err) == -1 && strstr(err, "outside"));
    const game_student_t big[] = {{GAME_ID_MAX + 1, "a", 1}};
    EXPECT(game_critique_question(&p, 1, big, 1, &e, err, sizeof err) == -1 && strstr(err, "outside"));
    const game_student_t none[] = {{1, NULL, 1}};
    EXPECT(game_critique_question(&p, 1, none, 1, &e, err, sizeof err) == -1 && strstr(err, "no completion"));
    EXPECT(game_critique_question(&p, 1, dup, -1, &e, err, sizeof err) == -1);
    const char *const critiques[] = {"a", NULL};
    EXPECT(game_resolve_question(&p, 1, critiques, 2, &e, err, sizeof err) == -1 && strstr(err, "critique 1"));
    EXPECT(game_resolve_question(&p, 1, critiques, -1, &e, err, sizeof err) == -1);
    task_question_free(&p);
}

/* the families scored from <answer> alone are unchanged */
static void test_other_families(void)
{
    task_question_t e = {"q", "42", task_metadata_new("gsm8k", 0)};
    expect_score(&e, "<think>t</think><answer>$42</answer>", 1.0, true);
    expect_score(&e, "some words <answer>41</answer>", 0.0, true);
    expect_score(&e, "42", 0.0, false);
    cJSON_Delete(e.metadata);
    e.metadata = task_metadata_new("no_such_family", 0);
    char err[256] = "";
    bool formatted;
    EXPECT(task_score_completion("<answer>42</answer>", &e, &formatted, err, sizeof err) == -1 &&
           strstr(err, "no_such_family"));
    cJSON_Delete(e.metadata);
}

int main(void)
{
    RUN_TEST(test_families);
    RUN_TEST(test_answer_question);
    RUN_TEST(test_answer_question_from_gsm_symbolic);
    RUN_TEST(test_critique_selection);
    RUN_TEST(test_critique_scores);
    RUN_TEST(test_no_peers);
    RUN_TEST(test_truncation);
    RUN_TEST(test_resolve_question);
    RUN_TEST(test_json_round_trip);
    RUN_TEST(test_bad_metadata);
    RUN_TEST(test_builder_errors);
    RUN_TEST(test_other_families);
    CHECK_EXIT();
}
