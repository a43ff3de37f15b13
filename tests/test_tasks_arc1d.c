/* arc_1d family: every rule of reasoning-gym's table is drawn and builds
 * examples at the smallest and large sizes; every example's output is the
 * one a solver written from the rule's definition gives; the shared family
 * checks;
 * scores against reasoning-gym's fixtures. */
#include "check.h"
#include "tasks_family_check.h"

extern const task_family_t task_family_arc_1d;
static const task_family_t *F = &task_family_arc_1d;

/* row i of an example as ints; n cells */
static int read_row(const cJSON *example, const char *which, int *row, int max)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(example, which), *v;
    int n = 0;
    cJSON_ArrayForEach(v, a)
    {
        if (n < max) row[n] = v->valueint;
        n++;
    }
    return n;
}

/* Each rule solved from its definition, independently of the generator:
 * the output the rule gives for an input. The _left rules are their
 * _right rule on the mirrored row. */
typedef struct {
    int start, len, color;
} run_t;

#define ROW_MAX 1024

/* maximal runs of one nonzero colour; by_colour 0 joins any nonzero cells */
static int runs_of(const int *row, int n, run_t *r, int by_colour)
{
    int count = 0;
    for (int i = 0; i < n;) {
        if (!row[i]) {
            i++;
            continue;
        }
        int j = i;
        while (j < n && row[j] && (!by_colour || row[j] == row[i])) j++;
        r[count++] = (run_t){i, j - i, row[i]};
        i = j;
    }
    return count;
}

static void paint(int *row, int from, int len, int color)
{
    for (int i = from; i < from + len; i++) row[i] = color;
}

static int find(const int *row, int n, int value)
{
    for (int i = 0; i < n; i++)
        if (row[i] == value) return i;
    return -1;
}

static int cmp_len(const void *a, const void *b) { return ((const run_t *)a)->len - ((const run_t *)b)->len; }

/* moves by k cells, and the gravity rules that pile cells to one side */
static int solve_move_gravity(const char *rule, const int *in, int n, int *out)
{
    int k, ones = 0, twos = 0, nonzero = 0;
    for (int i = 0; i < n; i++) ones += in[i] == 1, twos += in[i] == 2, nonzero += in[i] != 0;
    if (sscanf(rule, "move_%dpix_", &k) == 1) {
        int wrapped = strstr(rule, "wrapped") != NULL;
        for (int i = 0; i < n; i++) {
            if (wrapped) out[(i + k) % n] = in[i];
            else if (in[i]) out[i + k] = in[i];
        }
    } else if (strcmp(rule, "gravity_right") == 0) {
        for (int i = 0, m = 0; i < n; i++)
            if (in[i]) out[m++] = in[i];
    } else if (strcmp(rule, "gravity_counting_right") == 0) {
        paint(out, 0, nonzero, 1);
    } else if (strcmp(rule, "gravity_antigravity_right") == 0) {
        paint(out, 0, twos, 2);
        paint(out, n - ones, ones, 1);
    } else if (strcmp(rule, "gravity_weighted_colors_right") == 0) {
        paint(out, 0, twos, 2);
        paint(out, twos, ones, 1);
    } else if (strcmp(rule, "gravity_one_step_right") == 0) {
        memcpy(out, in, (size_t)n * sizeof *out);
        for (int i = 1; i < n; i++)
            if (out[i] && !out[i - 1]) out[i - 1] = out[i], out[i] = 0;
    } else {
        return 0;
    }
    return 1;
}

/* one block against a dot, the biggest block, and blocks drawn from two points */
static int solve_blocks(const char *rule, const int *in, int n, int *out, run_t *r, int c)
{
    int k;
    if (strcmp(rule, "block_touch_dot") == 0 || sscanf(rule, "block_touch_dot_%dpix", &k) == 1 ||
        strcmp(rule, "block_scale_to_dot") == 0) {
        int touch = strcmp(rule, "block_touch_dot") == 0, dot = find(in, n, touch ? 1 : 2);
        const run_t *b = r[0].start == dot ? &r[1] : &r[0];
        int left = b->start < dot, gap = left ? dot - b->start - b->len : b->start - dot - 1;
        out[dot] = in[dot];
        if (touch) paint(out, left ? dot - b->len : dot + 1, b->len, b->color);
        else if (rule[6] == 's')
            paint(out, left ? b->start : dot, left ? dot - b->start + 1 : b->start + b->len - dot, b->color);
        else paint(out, b->start + (left ? 1 : -1) * (gap < k ? gap : k), b->len, b->color);
    } else if (strcmp(rule, "block_and_noise_remove") == 0 || strcmp(rule, "paint_biggest_block") == 0) {
        int best = 0;
        for (int i = 1; i < c; i++)
            if (r[i].len > r[best].len) best = i;
        if (rule[0] == 'b') paint(out, r[best].start, r[best].len, r[best].color);
        else memcpy(out, in, (size_t)n * sizeof *out), paint(out, r[best].start, r[best].len, 1);
    } else if (strcmp(rule, "block_and_noise_remove_inside") == 0) {
        runs_of(in, n, r, 0);
        int count[10] = {0}, major = 1;
        for (int i = r[0].start; i < r[0].start + r[0].len; i++) count[in[i]]++;
        for (int v = 1; v < 10; v++)
            if (count[v] > count[major]) major = v;
        paint(out, r[0].start, r[0].len, major);
    } else if (strcmp(rule, "move_block_by_own_size") == 0) {
        paint(out, r[0].start + r[0].len, r[0].len, r[0].color);
    } else if (strcmp(rule, "two_points_and_fill") == 0) {
        paint(out, r[0].start, r[c - 1].start + r[c - 1].len - r[0].start, r[0].color);
    } else if (strcmp(rule, "two_points_and_fill_inv") == 0) {
        out[r[0].start] = out[r[0].start + r[0].len - 1] = r[0].color;
    } else if (strncmp(rule, "copy_block_to_dots", 18) == 0) {
        for (int i = 0; i < c; i++) paint(out, i ? r[i].start - r[0].len / 2 : 0, r[0].len, r[i].color);
    } else {
        return 0;
    }
    return 1;
}

/* reflected, repeated, recoloured and sorted blocks */
static int solve_reflect_recolor(const char *rule, const int *in, int n, int *out, run_t *r, int c)
{
    if (strcmp(rule, "repeat_pattern_full") == 0) {
        runs_of(in, n, r, 0);
        for (int i = 0; i < n; i++) out[i] = in[i % (r[0].len / 2)];
    } else if (strncmp(rule, "reflect_block_with", 18) == 0 || strcmp(rule, "reflect_block_random") == 0) {
        runs_of(in, n, r, 0);
        for (int i = 0; i < r[0].len; i++) out[r[0].start + i] = in[r[0].start + r[0].len - 1 - i];
    } else if (strcmp(rule, "reflect_block_around_dot") == 0) {
        int dot = find(in, n, 2);
        out[dot] = 2;
        for (int i = 0; i < n; i++)
            if (in[i] && i != dot) out[2 * dot - i] = in[i];
    } else if (strcmp(rule, "recolor_blocks_by_size") == 0) {
        paint(out, r[0].start, r[0].len, r[0].len > r[1].len ? 1 : 2);
        paint(out, r[1].start, r[1].len, r[0].len > r[1].len ? 2 : 1);
    } else if (strcmp(rule, "change_to_five") == 0) {
        for (int i = 0; i < n; i++) out[i] = in[i] ? 5 : 0;
    } else if (strcmp(rule, "recolor_blocks_from_palette") == 0) {
        int palette = find(in, n, 0);
        memcpy(out, in, (size_t)palette * sizeof *out);
        for (int i = 0, j = 0; i < c; i++)
            if (r[i].start > palette) paint(out, r[i].start, r[i].len, in[j++]);
    } else if (strcmp(rule, "color_left_half_blocks") == 0) {
        memcpy(out, in, (size_t)n * sizeof *out);
        for (int i = 0; i < c; i++) paint(out, r[i].start, r[i].len / 2, 8);
    } else if (strncmp(rule, "sort_", 5) == 0) {
        qsort(r, (size_t)c, sizeof *r, cmp_len);
        for (int i = 0, pos = 0; i < c; pos += r[i].len + 1, i++) paint(out, pos, r[i].len, r[i].color);
    } else {
        return 0;
    }
    return 1;
}

/* fills that run from seeds, pixels and marks */
static int solve_fill(const char *rule, const int *in, int n, int *out, run_t *r, int c)
{
    if (strcmp(rule, "duplicate_block_from_seeds") == 0) {
        const run_t *b = &r[0];
        for (int i = 0; i < c; i++)
            if (r[i].len >= 2) b = &r[i];
        memcpy(out, in, (size_t)n * sizeof *out);
        int left = in[b->start - 2], right = b->start + b->len + 1 < n ? in[b->start + b->len + 1] : 0;
        /* copies every len + 1 cells outwards from each seed, cut at the edge */
        for (int end = b->start - 2; left && end >= 0; end -= b->len + 1)
            for (int i = end; i > end - b->len && i >= 0; i--) out[i] = left;
        for (int start = b->start + b->len + 1; right && start < n; start += b->len + 1)
            for (int i = start; i < start + b->len && i < n; i++) out[i] = right;
    } else if (strcmp(rule, "fill_from_pixel") == 0) {
        runs_of(in, n, r, 0);
        int a = r[0].start, z = a + r[0].len - 1;
        memcpy(out, in, (size_t)n * sizeof *out);
        if (in[a] != in[a + 1]) paint(out, 0, a + 1, in[a]);
        else paint(out, z, n - z, in[z]);
    } else if (strcmp(rule, "mark_size_two_blocks") == 0) {
        memcpy(out, in, (size_t)n * sizeof *out);
        for (int i = 0; i < c; i++) {
            if (r[i].len != 2) continue;
            if (r[i].start > 0) out[r[i].start - 1] = 3;
            if (r[i].start + 2 < n) out[r[i].start + 2] = 3;
        }
    } else if (strcmp(rule, "fill_until_collision") == 0) {
        memcpy(out, in, (size_t)n * sizeof *out);
        if (in[0] == 5) {
            for (int i = 1, prev = 0; i < n; i++)
                if (in[i]) paint(out, prev + 1, i - prev - 1, in[i]), prev = i;
        } else {
            for (int i = n - 2, prev = n - 1; i >= 0; i--)
                if (in[i]) paint(out, i + 1, prev - i - 1, in[i]), prev = i;
        }
    } else {
        return 0;
    }
    return 1;
}

/* the reference solver, one rule group per helper: each returns 1 when
 * the rule is one of its own, 0 otherwise */
static int solve(const char *rule, const int *in, int n, int *out)
{
    static run_t r[ROW_MAX];
    int c = runs_of(in, n, r, 1);
    memset(out, 0, (size_t)n * sizeof *out);
    return solve_move_gravity(rule, in, n, out) || solve_blocks(rule, in, n, out, r, c) ||
           solve_reflect_recolor(rule, in, n, out, r, c) || solve_fill(rule, in, n, out, r, c);
}

static int expected_output(const char *rule, const int *in, int n, int *out)
{
    const char *left = strstr(rule, "_left");
    if (!left || left[5]) return solve(rule, in, n, out);
    char right[64];
    static int rin[ROW_MAX], rout[ROW_MAX];
    snprintf(right, sizeof right, "%.*s_right", (int)(left - rule), rule);
    for (int i = 0; i < n; i++) rin[i] = in[n - 1 - i];
    if (!solve(right, rin, n, rout)) return 0;
    for (int i = 0; i < n; i++) out[i] = rout[n - 1 - i];
    return 1;
}

static int rules_solved[128];

static int names_seen[128];
static char names[128][64];
static int n_names;

static void check_entry(const task_question_t *e)
{
    const cJSON *m = e->metadata;
    const char *rule = cJSON_GetObjectItemCaseSensitive(m, "task_name")->valuestring;
    int n = cJSON_GetObjectItemCaseSensitive(m, "size")->valueint;
    int found = 0;
    for (int i = 0; i < n_names; i++)
        if (strcmp(names[i], rule) == 0) names_seen[i]++, found = 1;
    if (!found && n_names < 128) snprintf(names[n_names], sizeof names[0], "%s", rule), names_seen[n_names++] = 1;
    static int in[1024], out[1024], want[1024];
    const cJSON *ex;
    cJSON *all = cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(m, "train_examples"), 1);
    cJSON_AddItemToArray(all, cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(m, "test_example"), 1));
    cJSON_ArrayForEach(ex, all)
    {
        EXPECT(read_row(ex, "input", in, 1024) == n);
        EXPECT(read_row(ex, "output", out, 1024) == n);
        for (int i = 0; i < n; i++) EXPECT(in[i] >= 0 && in[i] <= 9 && out[i] >= 0 && out[i] <= 9);
        if (expected_output(rule, in, n, want)) {
            for (int i = 0; i < n_names; i++)
                if (strcmp(names[i], rule) == 0) rules_solved[i] = 1;
            if (memcmp(out, want, (size_t)n * sizeof *out) != 0) {
                static int shown;
                char a[2100], b[2100], c[2100];
                for (int i = 0; i < n; i++)
                    a[i] = (char)('0' + in[i]), b[i] = (char)('0' + out[i]), c[i] = (char)('0' + want[i]);
                a[n] = b[n] = c[n] = '\0';
                check_failures++;
                if (shown++ < 10) fprintf(stderr, "%s: %s gives %s, the rule says %s\n", rule, a, b, c);
            }
        }
    }
    cJSON_Delete(all);
    /* the answer is the test output, cells joined by single spaces */
    char text[2100];
    for (int i = 0; i < n; i++) text[2 * i] = (char)('0' + out[i]), text[2 * i + 1] = ' ';
    text[2 * n - 1] = '\0';
    EXPECT(strcmp(text, e->answer) == 0);
    for (int i = 0; i < n; i++) text[2 * i] = (char)('0' + in[i]);
    EXPECT(strstr(e->question, text) != NULL);
}

static void test_entries(void)
{
    n_names = 0;
    family_check_questions(F, NULL, 1, 1500, check_entry);
    EXPECTF(n_names == 70, "%d rules drawn in 1500 questions, reasoning-gym has 70", n_names);
    for (int i = 0; i < n_names; i++) EXPECTF(rules_solved[i], "rule %s has no independent solver", names[i]);
}

static void test_sizes(void)
{
    /* the smallest row every rule must handle, and long rows */
    family_check_questions(F, "{\"min_size\": 8, \"max_size\": 8, \"num_train\": 5}", 2, 1500, check_entry);
    family_check_questions(F, "{\"min_size\": 9, \"max_size\": 13}", 3, 1500, check_entry);
    family_check_questions(F, "{\"min_size\": 150, \"max_size\": 200, \"num_train\": 1}", 4, 300, check_entry);
}

static void test_config(void)
{
    static const char *const bad[] = {"{\"min_size\": 7}",   "{\"min_size\": 20, \"max_size\": 19}",
                                      "{\"num_train\": 0}",  "{\"max_size\": 201}",
                                      "{\"min_size\": 1.5}", "{\"size\": 3}"};
    static const char *const field[] = {"min_size", "max_size", "num_train", "max_size", "min_size", "size"};
    family_check_bad_configs(F, bad, field, (int)(sizeof bad / sizeof bad[0]));
}

static void test_many(void) { family_check_many(F, 100000); }

static void test_fixtures(void)
{
    int a = family_check_fixtures(F, "tests/golden/tasks/variants_arc_1d.jsonl");
    int b = family_check_fixtures(F, "tests/golden/tasks/sapo_arc_1d.jsonl");
    int c = family_check_fixtures(F, "tests/golden/tasks/rg_arc_1d.jsonl");
    if (a < 0 && b < 0 && c < 0) SKIP_TEST("no fixtures in tests/golden/tasks");
}

int main(void)
{
    RUN_TEST(test_entries);
    RUN_TEST(test_sizes);
    RUN_TEST(test_config);
    RUN_TEST(test_many);
    RUN_TEST(test_fixtures);
    CHECK_EXIT();
}
