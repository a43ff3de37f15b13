/* The three-stage game's stage rewards: reading a completion of one
 * stage (answer, critique, resolve) and scoring its form and content. */
#include "tasks/game.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tasks/task.h"

/* The tag of each section, indexed by stage and the GAME_<STAGE>_* enums */
static const char *const stage_tags[GAME_STAGES][GAME_MAX_SECTIONS] = {
    [GAME_ANSWER] = {"think", "answer"},
    [GAME_CRITIQUE] = {"compare", "explain", "identify"},
    [GAME_RESOLVE] = {"summarize_feedback", "majority", "question", "think", "answer"},
};

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

static const char *skip_space(const char *p)
{
    while (is_space(*p)) p++;
    return p;
}

static int occurrences(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

int game_stage_parse(game_stage_t stage, const char *completion, game_section_t out[GAME_MAX_SECTIONS])
{
    if (!completion || (unsigned)stage >= GAME_STAGES) return -1;
    const char *p = completion;
    int n = 0;
    for (; n < GAME_MAX_SECTIONS && stage_tags[stage][n]; n++) {
        char open[32], close[32];
        snprintf(open, sizeof open, "<%s>", stage_tags[stage][n]);
        snprintf(close, sizeof close, "</%s>", stage_tags[stage][n]);
        /* The walk below takes each section's first closing tag, so a tag
         * inside another section's content, or a section repeated after
         * the last, would go unseen by it: counting over the whole text
         * is what makes "each exactly once" hold. */
        if (occurrences(completion, open) != 1 || occurrences(completion, close) != 1) return -1;
        p = skip_space(p);
        if (strncmp(p, open, strlen(open)) != 0) return -1;
        p += strlen(open);
        const char *end = strstr(p, close);
        if (!end) return -1;
        out[n] = (game_section_t){p, (size_t)(end - p)};
        p = end + strlen(close);
    }
    return *skip_space(p) ? -1 : n;
}

/* The id written bare in s (see game.h), or -1. Nine digits at most keep
 * it within int without overflow checks. */
static int section_id(game_section_t s)
{
    const char *p = s.text, *end = s.text + s.len;
    while (p < end && is_space(*p)) p++;
    while (end > p && is_space(end[-1])) end--;
    if (end == p || end - p > 9) return -1;
    int id = 0;
    for (; p < end; p++) {
        if (*p < '0' || *p > '9') return -1;
        id = id * 10 + (*p - '0');
    }
    return id;
}

static int section_equals_truth(game_section_t s, const char *truth)
{
    char *answer = strndup(s.text, s.len);
    int eq = task_numbers_equal(answer, truth);
    free(answer);
    return eq;
}

static game_reward_t summed(game_reward_t r)
{
    r.total = r.format + r.shown + r.correct + r.vote;
    return r;
}

game_reward_t game_reward_answer(const char *completion, const char *truth)
{
    game_section_t s[GAME_MAX_SECTIONS];
    game_reward_t r = {0};
    if (game_stage_parse(GAME_ANSWER, completion, s) < 0) return r;
    r.format = GAME_FORMAT_WEIGHT;
    if (section_equals_truth(s[GAME_ANSWER_ANSWER], truth)) r.correct = GAME_CORRECT_WEIGHT;
    return summed(r);
}

game_reward_t game_reward_critique(const char *completion, const int *shown_ids, const char *const *shown_answers,
                                   int n_shown, const char *truth)
{
    game_section_t s[GAME_MAX_SECTIONS];
    game_reward_t r = {0};
    if (game_stage_parse(GAME_CRITIQUE, completion, s) < 0) return r;
    r.format = GAME_FORMAT_WEIGHT;
    int id = section_id(s[GAME_CRITIQUE_IDENTIFY]);
    for (int i = 0; id >= 0 && i < n_shown; i++) {
        if (shown_ids[i] != id) continue;
        r.shown = GAME_SHOWN_WEIGHT;
        if (task_numbers_equal(shown_answers[i], truth)) r.correct = GAME_CORRECT_WEIGHT;
        break;
    }
    return summed(r);
}

int game_identified(const char *critique)
{
    game_section_t s[GAME_MAX_SECTIONS];
    return game_stage_parse(GAME_CRITIQUE, critique, s) < 0 ? -1 : section_id(s[GAME_CRITIQUE_IDENTIFY]);
}

/* 1 when id has a vote and no id has more. A handful of critics vote, so
 * counting each vote against all the others is cheap enough. */
static int in_plurality(int id, const int *votes, int n_votes)
{
    int mine = 0, most = 0;
    for (int i = 0; i < n_votes; i++) {
        if (votes[i] < 0) continue;
        int count = 0;
        for (int j = 0; j < n_votes; j++) count += votes[j] == votes[i];
        if (count > most) most = count;
        mine += votes[i] == id;
    }
    return mine > 0 && mine == most;
}

game_reward_t game_reward_resolve(const char *completion, const int *votes, int n_votes, const char *truth)
{
    game_section_t s[GAME_MAX_SECTIONS];
    game_reward_t r = {0};
    if (game_stage_parse(GAME_RESOLVE, completion, s) < 0) return r;
    r.format = GAME_FORMAT_WEIGHT;
    int id = section_id(s[GAME_RESOLVE_MAJORITY]);
    if (in_plurality(id, votes, n_votes)) r.vote = GAME_VOTE_WEIGHT;
    if (section_equals_truth(s[GAME_RESOLVE_ANSWER], truth)) r.correct = GAME_CORRECT_WEIGHT;
    return summed(r);
}
