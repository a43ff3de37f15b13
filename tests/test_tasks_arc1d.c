/* arc_1d family: every rule of reasoning-gym's table is drawn and builds
 * examples at the smallest and large sizes; the rules that are plain
 * functions of the input are checked as such; the shared family checks;
 * scores against reasoning-gym's fixtures. */
#include "check.h"
#include "tasks_family_check.h"

extern const task_family_t task_family_arc_1d;
static const task_family_t *F = &task_family_arc_1d;

/* row i of an example as ints; n cells */
static int read_row(const cJSON *example, const char *which, int *row, int max) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(example, which), *v;
    int n = 0;
    cJSON_ArrayForEach(v, a) {
        if (n < max) row[n] = v->valueint;
        n++;
    }
    return n;
}

/* the output each input-determined rule must give */
static int expected_output(const char *rule, const int *in, int n, int *out) {
    int k = 0, right = strstr(rule, "_right") != NULL;
    if (strncmp(rule, "move_", 5) == 0 && sscanf(rule + 5, "%dpix", &k) == 1) {
        int wrapped = strstr(rule, "wrapped") != NULL;
        for (int i = 0; i < n; i++) {
            int from = right ? i - k : i + k;
            out[i] = wrapped ? in[((from % n) + n) % n] : (from >= 0 && from < n ? in[from] : 0);
        }
        return 1;
    }
    if (strcmp(rule, "gravity_right") == 0 || strcmp(rule, "gravity_left") == 0) {
        /* reasoning-gym's gravity_right packs to the left; _left mirrors it */
        int m = 0;
        memset(out, 0, (size_t)n * sizeof *out);
        if (strcmp(rule, "gravity_right") == 0) {
            for (int i = 0; i < n; i++) if (in[i]) out[m++] = in[i];
        } else {
            for (int i = n - 1; i >= 0; i--) if (in[i]) out[n - 1 - m++] = in[i];
        }
        return 1;
    }
    if (strcmp(rule, "change_to_five") == 0) {
        for (int i = 0; i < n; i++) out[i] = in[i] ? 5 : 0;
        return 1;
    }
    if (strcmp(rule, "two_points_and_fill") == 0) {
        int lo = -1, hi = -1;
        for (int i = 0; i < n; i++) if (in[i]) { if (lo < 0) lo = i; hi = i; }
        for (int i = 0; i < n; i++) out[i] = i >= lo && i <= hi ? in[lo] : 0;
        return 1;
    }
    return 0;
}

static int names_seen[128];
static char names[128][64];
static int n_names;

static void check_entry(const task_entry_t *e) {
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
    cJSON_ArrayForEach(ex, all) {
        EXPECT(read_row(ex, "input", in, 1024) == n);
        EXPECT(read_row(ex, "output", out, 1024) == n);
        for (int i = 0; i < n; i++) EXPECT(in[i] >= 0 && in[i] <= 9 && out[i] >= 0 && out[i] <= 9);
        if (expected_output(rule, in, n, want))
            EXPECTF(memcmp(out, want, (size_t)n * sizeof *out) == 0, "%s: output is not the rule applied", rule);
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

static void test_entries(void) {
    n_names = 0;
    family_check_entries(F, NULL, 1, 1500, check_entry);
    EXPECTF(n_names == 70, "%d rules drawn in 1500 entries, reasoning-gym has 70", n_names);
}

static void test_sizes(void) {
    /* the smallest row every rule must handle, and long rows */
    family_check_entries(F, "{\"min_size\": 8, \"max_size\": 8, \"num_train\": 5}", 2, 1500, check_entry);
    family_check_entries(F, "{\"min_size\": 9, \"max_size\": 13}", 3, 1500, check_entry);
    family_check_entries(F, "{\"min_size\": 150, \"max_size\": 200, \"num_train\": 1}", 4, 300, check_entry);
}

static void test_config(void) {
    static const char *const bad[] = {"{\"min_size\": 7}", "{\"min_size\": 20, \"max_size\": 19}", "{\"num_train\": 0}",
                         "{\"max_size\": 201}", "{\"min_size\": 1.5}", "{\"size\": 3}"};
    static const char *const field[] = {"min_size", "max_size", "num_train", "max_size", "min_size", "size"};
    family_check_bad_configs(F, bad, field, (int)(sizeof bad / sizeof bad[0]));
}

static void test_many(void) {
    family_check_many(F, 100000);
}

static void test_fixtures(void) {
    int a = family_check_fixtures(F, "tests/golden/tasks/variants_arc_1d.jsonl");
    int b = family_check_fixtures(F, "tests/golden/tasks/sapo_arc_1d.jsonl");
    int c = family_check_fixtures(F, "tests/golden/tasks/rg_arc_1d.jsonl");
    if (a < 0 && b < 0 && c < 0) SKIP_TEST("no fixtures in tests/golden/tasks");
}

int main(void) {
    RUN_TEST(test_entries);
    RUN_TEST(test_sizes);
    RUN_TEST(test_config);
    RUN_TEST(test_many);
    RUN_TEST(test_fixtures);
    CHECK_EXIT();
}
