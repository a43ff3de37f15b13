/* bf: what does this Brainfuck program print? The programs are compiled
 * here from three small templates, the ones reasoning-gym compiles with
 * BFit: difficulty 1 prints a five-letter word, 2 adds x and y to an
 * accumulator until it reaches a target and prints it in decimal, 3 adds y
 * only once the accumulator passes a threshold. The answer is what bf_run
 * prints. Scored by the default scorer.
 *
 * Every loop the compiler writes either counts a cell down to zero or runs
 * the accumulator loop, whose parameters keep every value below 256; so
 * each program halts, and the step limit only guards against a compiler
 * bug. reasoning-gym's difficulty-3 targets reach 626 and wrap in 8-bit
 * cells, printing a number its BFit source does not compute; we draw from
 * the same ranges but keep only parameters that fit in a cell. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tasks/bf.h"
#include "tasks/rng.h"
#include "tasks/task.h"

#define STEP_LIMIT 10000000

static const char *const words[] = {
    "about", "above", "actor", "adopt", "after", "again", "agent", "agree", "alarm", "album", "alive", "allow", "alone",
    "amber", "angle", "apple", "arena", "argue", "arrow", "aside", "award", "basic", "beach", "begin", "berry", "birth",
    "black", "blade", "blank", "blend", "block", "bloom", "board", "brave", "bread", "brick", "brief", "bring", "brush",
    "cabin", "cable", "candy", "cargo", "chair", "chalk", "charm", "chart", "chess", "chief", "civic", "claim", "clean",
    "climb", "clock", "cloud", "coast", "coral", "couch", "count", "craft", "crane", "cream", "crisp", "crowd", "curve",
    "dance", "delta", "depth", "diary", "dozen", "draft", "dream", "dress", "drift", "eager", "early", "earth", "elbow",
    "empty", "enjoy", "equal", "event", "exact", "fable", "faith", "fence", "fiber", "field", "flame", "fleet", "floor",
    "flute", "focus", "forge", "frame", "fresh", "frost", "fruit", "giant", "glass", "globe", "grain", "grape", "grass",
    "green", "guard", "guide", "happy", "heart", "honey", "horse", "hotel", "house", "human", "humor", "image", "input",
    "ivory", "jelly", "judge", "juice", "knife", "label", "lemon", "level", "light", "limit", "lucky", "lunar", "magic",
    "maple", "march", "medal", "metal", "model", "money", "month", "motor", "mouse", "music", "noble", "north", "novel",
    "ocean", "olive", "orbit", "order", "paint", "panel", "paper", "party", "peace", "pearl", "piano", "pilot", "pixel",
    "plain", "plant", "plaza", "point", "power", "press", "pride", "prism", "proof", "quiet", "radio", "raven", "reach",
    "ridge", "river", "robot", "round", "royal", "salad", "scale", "scene", "scout", "shade", "shape", "shelf", "shine",
    "skill", "slope", "smile", "solar", "sound", "spark", "spice", "spoon", "stone", "storm", "story", "sugar", "sunny",
    "table", "theme", "tiger", "toast", "tower", "track", "trail", "train", "trend", "trust", "tulip", "uncle", "union",
    "urban", "valid", "value", "vapor", "video", "vivid", "voice", "water", "whale", "wheat", "width", "world", "yield",
    "young", "zebra",
};

static cJSON *default_config(void)
{
    cJSON *c = cJSON_CreateObject();
    cJSON_AddNumberToObject(c, "difficulty", 1);
    return c;
}

static int validate_config(const cJSON *c, char *err, size_t errlen)
{
    int64_t d;
    if (task_config_int(c, "difficulty", &d, err, errlen)) return -1;
    if (d < 1 || d > 3) {
        snprintf(err, errlen, "bf config: difficulty must be 1, 2 or 3");
        return -1;
    }
    return 0;
}

/* A Brainfuck writer that addresses cells by number: it tracks where the
 * pointer is, so every helper starts by moving there. A loop must end on
 * the cell it started on, which loop_close enforces by moving back. */
typedef struct {
    char *s;
    size_t len, cap;
    int at;
} bfw_t;

static void emit(bfw_t *w, char c, int count)
{
    if (w->len + (size_t)count + 1 > w->cap) {
        while (w->len + (size_t)count + 1 > w->cap) w->cap = w->cap ? w->cap * 2 : 1024;
        w->s = realloc(w->s, w->cap);
        if (!w->s) abort();
    }
    memset(w->s + w->len, c, (size_t)count);
    w->len += (size_t)count;
    w->s[w->len] = '\0';
}

static void emits(bfw_t *w, const char *s)
{
    for (; *s; s++) emit(w, *s, 1);
}

static void go(bfw_t *w, int cell)
{
    if (cell > w->at) emit(w, '>', cell - w->at);
    else emit(w, '<', w->at - cell);
    w->at = cell;
}

static void add(bfw_t *w, int cell, int n)
{
    go(w, cell);
    if (n > 0) emit(w, '+', n);
    else emit(w, '-', -n);
}

static void loop_open(bfw_t *w, int cell)
{
    go(w, cell);
    emit(w, '[', 1);
}
static void loop_close(bfw_t *w, int cell)
{
    go(w, cell);
    emit(w, ']', 1);
}
static void clear(bfw_t *w, int cell)
{
    go(w, cell);
    emits(w, "[-]");
}
static void output(bfw_t *w, int cell)
{
    go(w, cell);
    emit(w, '.', 1);
}

/* cell += n, through tmp (zero, left zero) as a loop of a * b when that
 * is shorter than n single steps */
static void add_const(bfw_t *w, int cell, int n, int tmp)
{
    int sign = n < 0 ? -1 : 1, m = n * sign, best_a = 0, best_b = 0, best = m;
    for (int a = 2; a * a <= m; a++) {
        int b = m / a, cost = a + b + (m - a * b) + 8 + 2 * abs(cell - tmp);
        if (cost < best) best = cost, best_a = a, best_b = b;
    }
    if (best_a) {
        add(w, tmp, best_a);
        loop_open(w, tmp);
        add(w, cell, sign * best_b);
        add(w, tmp, -1);
        loop_close(w, tmp);
        m -= best_a * best_b;
    }
    add(w, cell, sign * m);
}

/* dst += src, src emptied */
static void move_add(bfw_t *w, int dst, int src)
{
    loop_open(w, src);
    add(w, dst, 1);
    add(w, src, -1);
    loop_close(w, src);
}

/* dst += src, src kept, through tmp (zero, left zero) */
static void copy_add(bfw_t *w, int dst, int src, int tmp)
{
    loop_open(w, src);
    add(w, dst, 1);
    add(w, tmp, 1);
    add(w, src, -1);
    loop_close(w, src);
    move_add(w, src, tmp);
}

/* if (k) { then } else { otherwise }, with k+1 and k+2 zero scratch cells:
 * then runs at most once because its loop ends on k+1, which it zeroes;
 * otherwise runs in a loop on k+1 that only starts when k was zero. Both
 * branches must end on k, and both paths leave the pointer on k. */
static void if_begin(bfw_t *w, int k)
{
    add(w, k + 1, 1);
    loop_open(w, k);
}
static void if_else(bfw_t *w, int k)
{
    go(w, k);
    emits(w, ">-]>[<");
    w->at = k;
}
static void if_end(bfw_t *w, int k)
{
    go(w, k);
    emits(w, ">->]<<");
    w->at = k;
}

/* Cell map of the accumulator programs. The comparisons are kept as
 * distances that only shrink, because acc only grows: REM = target - acc
 * (the loop runs while it is nonzero) and GATE = cond + 1 - acc (acc >
 * cond once it is zero), each floored at zero. A comparison then costs
 * nothing, and an update as many steps as the amount added. */
enum {
    ACC,
    X,
    Y,
    TMP,
    K,
    REM,
    REM_1,
    REM_2,
    GATE,
    GATE_1,
    GATE_2, /* each with the two scratch cells of if_begin */
    PR_N,
    D0,
    D1,
    D2,
    W0,
    W0_1,
    W0_2,
    W1,
    W1_1,
    W1_2,
    PR_H,
    PR_T,
    PR_F, /* print_decimal's */
};

/* cell -= amount, stopping at zero; cell + 1 and cell + 2 are scratch */
static void floored_sub(bfw_t *w, int cell, int amount)
{
    copy_add(w, K, amount, TMP);
    loop_open(w, K);
    if_begin(w, cell);
    add(w, cell, -1);
    if_else(w, cell);
    if_end(w, cell);
    add(w, K, -1);
    loop_close(w, K);
}

/* acc += v, with the distances kept up to date */
static void grow(bfw_t *w, int v, int gated)
{
    copy_add(w, ACC, v, TMP);
    floored_sub(w, REM, v);
    if (gated) floored_sub(w, GATE, v);
}

/* cell d (a digit) reached 10: zero it and carry into next; scratch k, k+1, k+2 */
static void carry_begin(bfw_t *w, int d, int k)
{
    copy_add(w, k, d, TMP);
    add(w, k, -10);
    if_begin(w, k);
    clear(w, k);
    if_else(w, k);
    clear(w, d);
}

/* prints cell v (below 1000) in decimal without leading zeros: counts v
 * into three digit cells with carries, then prints the hundreds if
 * nonzero, the tens if they or the hundreds were printed, the ones always */
static void print_decimal(bfw_t *w, int v)
{
    copy_add(w, PR_N, v, TMP);
    loop_open(w, PR_N);
    add(w, PR_N, -1);
    add(w, D0, 1);
    carry_begin(w, D0, W0);
    add(w, D1, 1);
    carry_begin(w, D1, W1);
    add(w, D2, 1);
    if_end(w, W1);
    if_end(w, W0);
    loop_close(w, PR_N);

    copy_add(w, PR_H, D2, TMP);
    loop_open(w, PR_H);
    add_const(w, D2, '0', TMP);
    output(w, D2);
    add(w, PR_F, 1);
    clear(w, PR_H);
    loop_close(w, PR_H);
    copy_add(w, PR_T, D1, TMP);
    move_add(w, PR_T, PR_F);
    loop_open(w, PR_T);
    add_const(w, D1, '0', TMP);
    output(w, D1);
    clear(w, PR_T);
    loop_close(w, PR_T);
    add_const(w, D0, '0', TMP);
    output(w, D0);
}

/* print(word): cell 1 steps from one character to the next; cell 0 is
 * add_const's scratch */
static void compile_word(bfw_t *w, const char *word)
{
    int prev = 0;
    for (const char *c = word; *c; c++) {
        add_const(w, 1, *c - prev, 0);
        output(w, 1);
        prev = *c;
    }
}

/* acc = 0; while (acc < target) { acc += x; [if (acc > cond)] acc += y; } print acc */
static void compile_accumulate(bfw_t *w, int target, int x, int y, int cond)
{
    add_const(w, REM, target, TMP);
    add_const(w, X, x, TMP);
    add_const(w, Y, y, TMP);
    if (cond >= 0) add_const(w, GATE, cond + 1, TMP);
    loop_open(w, REM);
    grow(w, X, cond >= 0);
    if (cond >= 0) {
        if_begin(w, GATE);
        if_else(w, GATE);
        grow(w, Y, 1);
        if_end(w, GATE);
    } else {
        grow(w, Y, 0);
    }
    loop_close(w, REM);
    print_decimal(w, ACC);
}

/* Difficulty 2 or 3: draws a loop that adds x and y until the sum reaches
 * target (at 3, y only once the sum is past cond), writes its BF into w and
 * returns its BFit source. */
static char *draw_accumulate(bfw_t *w, task_rng_t *r, int64_t difficulty)
{
    int x, y, target, cond = -1;
    do {
        if (difficulty == 2) {
            x = (int)task_rng_range(r, 1, 4);
            y = (int)task_rng_range(r, 1, 5);
            target = x * y * (int)task_rng_range(r, 1, 9) + (int)task_rng_range(r, 1, 9);
        } else {
            x = (int)task_rng_range(r, 1, 7);
            y = (int)task_rng_range(r, 1, 9);
            target = x * y * (int)task_rng_range(r, 1, 9) + (int)task_rng_range(r, 1, 9) + 50;
            cond = target - (int)task_rng_range(r, 1, 40);
        }
    } while (target + x + y > 255);
    compile_accumulate(w, target, x, y, cond);
    if (cond < 0)
        return task_strdupf("\nint main() {\n    int acc = 0;\n    int target = %d;\n    int x = %d;\n    int y = %d;\n"
                            "    while (acc < target) {\n        acc = acc + x;\n        acc = acc + y;\n    }\n"
                            "    printint(acc);\n}\n",
                            target, x, y);
    return task_strdupf("\nint main() {\n    int acc = 0;\n    int target = %d;\n    int x = %d;\n    int y = %d;\n"
                        "    while (acc < target) {\n        acc = acc + x;\n        if (acc > %d) {\n"
                        "            acc = acc + y;\n        }\n    }\n    printint(acc);\n}\n",
                        target, x, y, cond);
}

static int generate(const cJSON *c, uint64_t seed, uint64_t index, task_question_t *out, char *err, size_t errlen)
{
    int64_t difficulty;
    if (task_config_int(c, "difficulty", &difficulty, err, errlen)) return -1;
    task_rng_t r;
    task_rng_init(&r, seed, index);
    bfw_t w = {0};
    char *source;
    if (difficulty == 1) {
        const char *word = words[task_rng_below(&r, sizeof words / sizeof words[0])];
        compile_word(&w, word);
        source = task_strdupf("\nint main() {\n    print(\"%s\");\n}\n", word);
    } else {
        source = draw_accumulate(&w, &r, difficulty);
    }
    char *printed;
    size_t printed_len;
    if (bf_run(w.s, STEP_LIMIT, &printed, &printed_len, NULL, err, errlen) < 0) {
        free(w.s);
        free(source);
        return -1;
    }
    static const char *const asks[] = {
        "What does this Brainfuck program print? Cells hold 8-bit values that wrap around, and the "
        "program reads no input.\n\n%s\n\nAnswer with exactly the characters it prints and nothing else.",
        "Run the following Brainfuck code in your head (8-bit wrapping cells, no input) and report its "
        "output.\n\n%s\n\nGive only the exact output.",
    };
    out->question = task_strdupf(asks[task_rng_below(&r, 2)], w.s);
    out->answer = printed;
    cJSON *m = out->metadata = task_metadata_new("bf", index);
    cJSON_AddStringToObject(m, "bfit_code", source);
    cJSON_AddStringToObject(m, "bf_program", w.s);
    cJSON *d = cJSON_AddObjectToObject(m, "difficulty");
    cJSON_AddNumberToObject(d, "difficulty", (double)difficulty);
    free(source);
    free(w.s);
    return 0;
}

static double score(const char *answer, const task_question_t *e) { return task_score_default(answer, e->answer); }

const task_family_t task_family_bf = {
    "bf", default_config, validate_config, generate, score,
};
