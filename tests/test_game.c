/* The three-stage game's rewards, case by case with values worked by hand
 * from game.h's weights (form 0.2 per check, substance 1.0): each stage's
 * form (order, each tag once, whitespace, sections over several lines),
 * a critique's choice of student (shown or not, right or wrong), a
 * resolution's reading of the vote (plurality, tie, no votes, not an id),
 * and gsm8k's number rule for answers. */
#include "check.h"
#include "tasks/game.h"

/* every part and the total, each within float rounding of its hand value */
static void expect_reward(const char *what, game_reward_t r, double format, double shown, double correct, double vote,
                          double total)
{
    EXPECTF(fabs(r.format - format) < 1e-6 && fabs(r.shown - shown) < 1e-6 && fabs(r.correct - correct) < 1e-6 &&
                fabs(r.vote - vote) < 1e-6 && fabs(r.total - total) < 1e-6,
            "%s: format %g shown %g correct %g vote %g total %g, want %g %g %g %g %g", what, r.format, r.shown,
            r.correct, r.vote, r.total, format, shown, correct, vote, total);
}

/* the sections of completion, zeroed first so that a failed parse leaves
 * none of an earlier one's behind */
static int parse(game_stage_t stage, const char *completion, game_section_t s[GAME_MAX_SECTIONS])
{
    memset(s, 0, GAME_MAX_SECTIONS * sizeof *s);
    return game_stage_parse(stage, completion, s);
}

static void expect_section(game_section_t s, const char *want)
{
    EXPECTF(s.text && s.len == strlen(want) && !memcmp(s.text, want, s.len), "section [%.*s], want [%s]", (int)s.len,
            s.text ? s.text : "", want);
}

static void test_parse(void)
{
    game_section_t s[GAME_MAX_SECTIONS];
    EXPECT(parse(GAME_ANSWER, "<think>a</think><answer>b</answer>", s) == 2);
    expect_section(s[GAME_ANSWER_THINK], "a");
    expect_section(s[GAME_ANSWER_ANSWER], "b");
    /* content as written, over several lines, whitespace kept */
    const char *text = "  <summarize_feedback>most say 7\nsome say 3</summarize_feedback>\n"
                       "<majority> 7 </majority>\n\n<question>\nHow many?\n</question>\t"
                       "<think>\n2 + 5\n= 7\n</think><answer>\n7\n</answer>\n";
    EXPECT(parse(GAME_RESOLVE, text, s) == 5);
    expect_section(s[GAME_RESOLVE_SUMMARY], "most say 7\nsome say 3");
    expect_section(s[GAME_RESOLVE_MAJORITY], " 7 ");
    expect_section(s[GAME_RESOLVE_QUESTION], "\nHow many?\n");
    expect_section(s[GAME_RESOLVE_THINK], "\n2 + 5\n= 7\n");
    expect_section(s[GAME_RESOLVE_ANSWER], "\n7\n");
    EXPECT(parse(GAME_CRITIQUE, "<compare>x</compare><explain></explain><identify>3</identify>", s) == 3);
    expect_section(s[GAME_CRITIQUE_EXPLAIN], "");
    /* another stage's tags are plain content: a critique may quote <answer> */
    EXPECT(parse(GAME_CRITIQUE,
                 "<compare>#1 wrote <answer>5</answer></compare><explain>e</explain><identify>1</identify>", s) == 3);
    expect_section(s[GAME_CRITIQUE_COMPARE], "#1 wrote <answer>5</answer>");
    /* an answer-stage completion is no critique */
    EXPECT(parse(GAME_CRITIQUE, "<think>a</think><answer>b</answer>", s) == -1);
    EXPECT(parse(GAME_STAGES, "<think>a</think><answer>b</answer>", s) == -1);
    EXPECT(parse(GAME_ANSWER, NULL, s) == -1);
}

static void test_answer(void)
{
    expect_reward("well formed, right", game_reward_answer("<think>2 + 3 = 5</think><answer>5</answer>", "5"), 0.2, 0,
                  1, 0, 1.2);
    expect_reward("well formed, wrong", game_reward_answer("<think>2 + 3 = 6</think><answer>6</answer>", "5"), 0.2, 0,
                  0, 0, 0.2);
    expect_reward("whitespace around and between",
                  game_reward_answer(" \n<think>x</think>\r\n\t\f <answer> 5 </answer>\n\v", "5"), 0.2, 0, 1, 0, 1.2);
    expect_reward("multi-line sections",
                  game_reward_answer("<think>\nfirst 2\nthen 3\n</think>\n<answer>\n5\n</answer>", "5"), 0.2, 0, 1, 0,
                  1.2);
    expect_reward("empty sections", game_reward_answer("<think></think><answer></answer>", "5"), 0.2, 0, 0, 0, 0.2);
    expect_reward("no truth", game_reward_answer("<think>x</think><answer>5</answer>", NULL), 0.2, 0, 0, 0, 0.2);
    /* out of form earns nothing, a right answer included */
    expect_reward("no think", game_reward_answer("<answer>5</answer>", "5"), 0, 0, 0, 0, 0);
    expect_reward("no answer", game_reward_answer("<think>5</think>", "5"), 0, 0, 0, 0, 0);
    expect_reward("unclosed answer", game_reward_answer("<think>x</think><answer>5", "5"), 0, 0, 0, 0, 0);
    expect_reward("out of order", game_reward_answer("<answer>5</answer><think>x</think>", "5"), 0, 0, 0, 0, 0);
    expect_reward("answer twice", game_reward_answer("<think>x</think><answer>4</answer><answer>5</answer>", "5"), 0, 0,
                  0, 0, 0);
    expect_reward("answer inside think",
                  game_reward_answer("<think>say <answer>4</answer></think><answer>5</answer>", "5"), 0, 0, 0, 0, 0);
    expect_reward("think opened twice", game_reward_answer("<think>a<think>b</think><answer>5</answer>", "5"), 0, 0, 0,
                  0, 0);
    expect_reward("stray closing tag", game_reward_answer("<think>a</answer></think><answer>5</answer>", "5"), 0, 0, 0,
                  0, 0);
    expect_reward("answer closed before it opens", game_reward_answer("<think>a</answer></think><answer>5", "5"), 0, 0,
                  0, 0, 0);
    expect_reward("text before", game_reward_answer("Sure. <think>x</think><answer>5</answer>", "5"), 0, 0, 0, 0, 0);
    expect_reward("text between", game_reward_answer("<think>x</think> so <answer>5</answer>", "5"), 0, 0, 0, 0, 0);
    expect_reward("text after", game_reward_answer("<think>x</think><answer>5</answer> done", "5"), 0, 0, 0, 0, 0);
    expect_reward("tag case", game_reward_answer("<Think>x</Think><answer>5</answer>", "5"), 0, 0, 0, 0, 0);
    expect_reward("null completion", game_reward_answer(NULL, "5"), 0, 0, 0, 0, 0);
}

/* gsm8k's number rule, through the answer stage */
static void test_numbers(void)
{
    static const struct {
        const char *answer, *truth;
        double correct;
    } cases[] = {
        {"1,234", "1234", 1}, {"1234", "1,234", 1}, {"$5", "5", 1},       {"5.0", "5", 1}, {"$1,234.50", "1234.5", 1},
        {"-$3", "-3", 1},     {"5 apples", "5", 0}, {"12,34", "1234", 0}, {"5.5", "5", 0}, {"five", "5", 0},
        {"5", "five", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char completion[128];
        snprintf(completion, sizeof completion, "<think>t</think><answer>%s</answer>", cases[i].answer);
        double c = cases[i].correct;
        expect_reward(completion, game_reward_answer(completion, cases[i].truth), 0.2, 0, c, 0, 0.2 + c);
    }
}

/* a well-formed critique whose <identify> holds id */
static game_reward_t critique(const char *id, const int *ids, const char *const *answers, int n, const char *truth)
{
    char completion[256];
    snprintf(completion, sizeof completion,
             "<compare>\n#3 says 41,\n#7 says 42\n</compare>\n<explain>\n7 adds both parts\n</explain>\n"
             "<identify>%s</identify>",
             id);
    return game_reward_critique(completion, ids, answers, n, truth);
}

static void test_critique(void)
{
    /* students 3, 7 and 12 shown: 3 wrong, 7 right (written "$42"), 12 without an answer */
    const int ids[] = {3, 7, 12};
    const char *const answers[] = {"41", "$42", NULL};
    expect_reward("right student", critique("7", ids, answers, 3, "42"), 0.2, 0.2, 1, 0, 1.4);
    expect_reward("wrong student", critique("3", ids, answers, 3, "42"), 0.2, 0.2, 0, 0, 0.4);
    expect_reward("student without an answer", critique("12", ids, answers, 3, "42"), 0.2, 0.2, 0, 0, 0.4);
    expect_reward("not shown", critique("5", ids, answers, 3, "42"), 0.2, 0, 0, 0, 0.2);
    expect_reward("nobody shown", critique("7", ids, answers, 0, "42"), 0.2, 0, 0, 0, 0.2);
    expect_reward("no truth", critique("7", ids, answers, 3, NULL), 0.2, 0.2, 0, 0, 0.4);
    /* the id written bare, whitespace and leading zeros aside */
    expect_reward("id over lines", critique("\n 7 \n", ids, answers, 3, "42"), 0.2, 0.2, 1, 0, 1.4);
    expect_reward("leading zero", critique("07", ids, answers, 3, "42"), 0.2, 0.2, 1, 0, 1.4);
    expect_reward("hash", critique("#7", ids, answers, 3, "42"), 0.2, 0, 0, 0, 0.2);
    expect_reward("words", critique("Student 7", ids, answers, 3, "42"), 0.2, 0, 0, 0, 0.2);
    expect_reward("trailing text", critique("7.", ids, answers, 3, "42"), 0.2, 0, 0, 0, 0.2);
    expect_reward("two ids", critique("3 7", ids, answers, 3, "42"), 0.2, 0, 0, 0, 0.2);
    expect_reward("empty", critique("", ids, answers, 3, "42"), 0.2, 0, 0, 0, 0.2);
    expect_reward("negative", critique("-7", ids, answers, 3, "42"), 0.2, 0, 0, 0, 0.2);
    /* not an id matches no student, not even one shown with a negative id */
    const int odd[] = {-1};
    expect_reward("no id against -1", critique("x", odd, answers + 1, 1, "42"), 0.2, 0, 0, 0, 0.2);
    /* ten digits are no id, even where their value wraps to a shown one */
    const int big[] = {1410065415}; /* 10000000007 mod 2^32 */
    const char *const big_answer[] = {"42"};
    expect_reward("nine digits", critique("000000007", ids, answers, 3, "42"), 0.2, 0.2, 1, 0, 1.4);
    expect_reward("ten digits", critique("0000000007", ids, answers, 3, "42"), 0.2, 0, 0, 0, 0.2);
    expect_reward("wrapping", critique("10000000007", big, big_answer, 1, "42"), 0.2, 0, 0, 0, 0.2);
    /* out of form: nothing, the right student included */
    expect_reward(
        "identify first",
        game_reward_critique("<identify>7</identify><compare>c</compare><explain>e</explain>", ids, answers, 3, "42"),
        0, 0, 0, 0, 0);
    expect_reward(
        "explain before compare",
        game_reward_critique("<explain>e</explain><compare>c</compare><identify>7</identify>", ids, answers, 3, "42"),
        0, 0, 0, 0, 0);
    expect_reward("no explain",
                  game_reward_critique("<compare>c</compare><identify>7</identify>", ids, answers, 3, "42"), 0, 0, 0, 0,
                  0);
    expect_reward("identify twice",
                  game_reward_critique("<compare>c</compare><explain>e</explain><identify>3</identify>"
                                       "<identify>7</identify>",
                                       ids, answers, 3, "42"),
                  0, 0, 0, 0, 0);
    expect_reward("identify inside explain",
                  game_reward_critique("<compare>c</compare><explain><identify>3</identify></explain>"
                                       "<identify>7</identify>",
                                       ids, answers, 3, "42"),
                  0, 0, 0, 0, 0);
}

static void test_identified(void)
{
    EXPECT(game_identified("<compare>c</compare>\n<explain>e</explain>\n<identify> 12\n</identify>\n") == 12);
    EXPECT(game_identified("<compare>c</compare><explain>e</explain><identify>0</identify>") == 0);
    EXPECT(game_identified("<compare>c</compare><explain>e</explain><identify>twelve</identify>") == -1);
    EXPECT(game_identified("<compare>c</compare><explain>e</explain><identify></identify>") == -1);
    EXPECT(game_identified("<compare>c</compare><identify>12</identify>") == -1);
    EXPECT(game_identified("<compare>c</compare><explain>e</explain><identify>12</identify> so 12") == -1);
    EXPECT(game_identified("<think>t</think><answer>12</answer>") == -1);
    EXPECT(game_identified(NULL) == -1);
}

/* a well-formed resolution naming majority and answering answer */
static game_reward_t resolve(const char *majority, const char *answer, const int *votes, int n, const char *truth)
{
    char completion[512];
    snprintf(completion, sizeof completion,
             "<summarize_feedback>\nTwo critics pick #7,\none picks #3.\n</summarize_feedback>\n"
             "<majority>%s</majority>\n<question>\nHow many apples?\n</question>\n"
             "<think>\n40 + 2\n</think>\n<answer>%s</answer>\n",
             majority, answer);
    return game_reward_resolve(completion, votes, n, truth);
}

static void test_resolve(void)
{
    const int clear[] = {7, 3, 7};
    expect_reward("plurality, right", resolve("7", "42", clear, 3, "42"), 0.2, 0, 1, 1, 2.2);
    expect_reward("plurality, wrong answer", resolve("7", "41", clear, 3, "42"), 0.2, 0, 0, 1, 1.2);
    expect_reward("minority", resolve("3", "42", clear, 3, "42"), 0.2, 0, 1, 0, 1.2);
    expect_reward("nobody's vote", resolve("5", "42", clear, 3, "42"), 0.2, 0, 1, 0, 1.2);
    expect_reward("answer as a number rule", resolve("7", "$42.00", clear, 3, "42"), 0.2, 0, 1, 1, 2.2);
    /* a plurality short of a majority still counts */
    const int plural[] = {4, 4, 9, 1, 2};
    expect_reward("plurality of 2 in 5", resolve("4", "42", plural, 5, "42"), 0.2, 0, 1, 1, 2.2);
    expect_reward("one of the singles", resolve("9", "42", plural, 5, "42"), 0.2, 0, 1, 0, 1.2);
    /* a tie: either tied id counts, an id below them does not */
    const int tie[] = {3, 7, 5, 7, 3};
    expect_reward("tie, first", resolve("3", "42", tie, 5, "42"), 0.2, 0, 1, 1, 2.2);
    expect_reward("tie, second", resolve("7", "42", tie, 5, "42"), 0.2, 0, 1, 1, 2.2);
    expect_reward("tie, below", resolve("5", "42", tie, 5, "42"), 0.2, 0, 1, 0, 1.2);
    const int one_each[] = {3, 7};
    expect_reward("tie of singles", resolve("7", "42", one_each, 2, "42"), 0.2, 0, 1, 1, 2.2);
    /* no votes: nothing to name */
    expect_reward("no critics", resolve("7", "42", NULL, 0, "42"), 0.2, 0, 1, 0, 1.2);
    /* critics that named nobody cast no vote, however many they are */
    const int abstain[] = {-1, 4, -1};
    expect_reward("abstentions", resolve("4", "42", abstain, 3, "42"), 0.2, 0, 1, 1, 2.2);
    const int none[] = {-1, -1};
    expect_reward("only abstentions", resolve("0", "42", none, 2, "42"), 0.2, 0, 1, 0, 1.2);
    /* <majority> not an id */
    expect_reward("majority in words", resolve("seven", "42", clear, 3, "42"), 0.2, 0, 1, 0, 1.2);
    expect_reward("majority with a hash", resolve("#7", "42", clear, 3, "42"), 0.2, 0, 1, 0, 1.2);
    expect_reward("majority empty", resolve("", "42", clear, 3, "42"), 0.2, 0, 1, 0, 1.2);
    expect_reward("majority over lines", resolve("\n7\n", "42", clear, 3, "42"), 0.2, 0, 1, 1, 2.2);
    /* out of form: nothing */
    const char *no_question = "<summarize_feedback>s</summarize_feedback><majority>7</majority>"
                              "<think>t</think><answer>42</answer>";
    expect_reward("no question", game_reward_resolve(no_question, clear, 3, "42"), 0, 0, 0, 0, 0);
    const char *swapped = "<majority>7</majority><summarize_feedback>s</summarize_feedback>"
                          "<question>q</question><think>t</think><answer>42</answer>";
    expect_reward("majority first", game_reward_resolve(swapped, clear, 3, "42"), 0, 0, 0, 0, 0);
    const char *twice = "<summarize_feedback>s</summarize_feedback><majority>3</majority><majority>7</majority>"
                        "<question>q</question><think>t</think><answer>42</answer>";
    expect_reward("majority twice", game_reward_resolve(twice, clear, 3, "42"), 0, 0, 0, 0, 0);
    const char *tail = "<summarize_feedback>s</summarize_feedback><majority>7</majority>"
                       "<question>q</question><think>t</think><answer>42</answer><answer>41</answer>";
    expect_reward("answer twice", game_reward_resolve(tail, clear, 3, "42"), 0, 0, 0, 0, 0);
    expect_reward("an answer-stage completion",
                  game_reward_resolve("<think>t</think><answer>42</answer>", clear, 3, "42"), 0, 0, 0, 0, 0);
}

int main(void)
{
    RUN_TEST(test_parse);
    RUN_TEST(test_answer);
    RUN_TEST(test_numbers);
    RUN_TEST(test_critique);
    RUN_TEST(test_identified);
    RUN_TEST(test_resolve);
    CHECK_EXIT();
}
