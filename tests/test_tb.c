/* TensorBoard event files (lib/tb/): the CRC-32C against its published
 * check values, and files written by tb_open, tb_line and tb_text read
 * back here record by record (the framing, both CRCs of every record, the
 * Event decoded by protobuf-c): the version record first, then each line
 * as one Event with every number tagged by its path; a restarted process
 * gets a file of its own; a folder that cannot be made is one error. The
 * reading by TensorBoard itself is tests/t_tensorboard.sh's. */
#include <dirent.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "tb/crc32c.h"
#include "tb/event.pb-c.h"
#include "tb/tb.h"
#include "util/fs.h"

static uint32_t le32(const unsigned char *p)
{
    return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* the Events of a file, in order, up to its last whole record; *bad
 * counts records whose CRCs fail, *tail the bytes after the last whole
 * record */
static int read_events(const char *path, Sapo__Tb__Event **ev, int max, int *bad, long *tail)
{
    FILE *f = fopen(path, "rb");
    int n = 0;
    *bad = 0;
    *tail = 0;
    if (!f) return -1;
    unsigned char head[12];
    for (;;) {
        long at = ftell(f);
        size_t got = fread(head, 1, 12, f);
        if (got == 0) break;
        uint64_t len = 0;
        for (int i = 0; i < 8; i++) len |= (uint64_t)head[i] << (8 * i);
        unsigned char *data = got == 12 && len < (1u << 24) ? malloc(len + 4) : NULL;
        if (!data || fread(data, 1, len + 4, f) != len + 4) {
            free(data);
            fseek(f, 0, SEEK_END);
            *tail = ftell(f) - at;
            break;
        }
        if (le32(head + 8) != crc32c_masked(head, 8) || le32(data + len) != crc32c_masked(data, len)) ++*bad;
        else if (n < max) ev[n++] = sapo__tb__event__unpack(NULL, len, data);
        free(data);
    }
    fclose(f);
    return n;
}

static void free_events(Sapo__Tb__Event **ev, int n)
{
    for (int i = 0; i < n; i++)
        if (ev[i]) sapo__tb__event__free_unpacked(ev[i], NULL);
}

/* the one file in dir, into path; how many there are */
static int files_in(const char *dir, char *path, size_t len)
{
    DIR *d = opendir(dir);
    int n = 0;
    if (!d) return 0;
    for (struct dirent *e; (e = readdir(d));)
        if (strstr(e->d_name, "tfevents")) {
            snprintf(path, len, "%s/%s", dir, e->d_name);
            n++;
        }
    closedir(d);
    return n;
}

static const char *group_of(const char *field) { return strcmp(field, "loss") == 0 ? "train" : NULL; }

/* the check values of CRC-32C (RFC 3720's, and the common "123456789"),
 * and the mask: rotated right by 15, plus 0xA282EAD8 */
static void test_crc32c(void)
{
    EXPECT(crc32c("123456789", 9) == 0xE3069283u);
    unsigned char zeros[32] = {0}, ones[32];
    memset(ones, 0xFF, sizeof ones);
    EXPECT(crc32c(zeros, 32) == 0x8A9136AAu);
    EXPECT(crc32c(ones, 32) == 0x62A8AB43u);
    unsigned char inc[32];
    for (int i = 0; i < 32; i++) inc[i] = (unsigned char)i;
    EXPECT(crc32c(inc, 32) == 0x46DD794Eu);
    EXPECT(crc32c("", 0) == 0);
    uint32_t c = 0xE3069283u;
    EXPECT(crc32c_masked("123456789", 9) == ((c >> 15) | (c << 17)) + 0xA282EAD8u);
}

/* a line as the learner writes it, read back: step, wall time, every
 * number at its tag, nothing else */
static void test_line_read_back(void)
{
    char dir[] = "/tmp/test_tb_XXXXXX", err[512], path[1024];
    if (!mkdtemp(dir)) SKIP_TEST("no temporary folder");
    tb_t *tb = tb_open(dir, "learner", err, sizeof err);
    EXPECTF(tb != NULL, "%s", err);
    if (!tb) return;
    const char *line = "{\"node\":\"n0\",\"round\":7,\"loss\":0.125,\"reward_mean\":0.5,\"ok\":true,\"none\":null,"
                       "\"local\":{\"zero_adv_share\":0.25,\"deep\":{\"x\":-3}},\"peak_gb\":{\"learner\":1.5},"
                       "\"time\":1790000000.5}";
    EXPECT(tb_line(tb, line, NULL, group_of, err, sizeof err) == 0);
    EXPECT(tb_line(tb, "{\"round\":8,\"pass1\":0.75}", "heldout", NULL, err, sizeof err) == 0);
    EXPECT(tb_text(tb, 7, "manifest", "node **n0**", err, sizeof err) == 0);
    EXPECT(tb_line(tb, "[1,2]", NULL, NULL, err, sizeof err) == -1 && strstr(err, "not a JSON object"));
    tb_close(&tb);
    EXPECT(tb == NULL);
    EXPECT(files_in(dir, path, sizeof path) == 1);
    EXPECTF(strstr(path, "/events.out.tfevents.") && strstr(path, ".learner"), "%s", path);

    Sapo__Tb__Event *ev[8] = {0};
    int bad;
    long tail;
    int n = read_events(path, ev, 8, &bad, &tail);
    EXPECTF(n == 4 && bad == 0 && tail == 0, "%d events, %d bad, %ld bytes after", n, bad, tail);
    if (n == 4 && ev[0] && ev[1] && ev[2] && ev[3]) {
        EXPECT(ev[0]->what_case == SAPO__TB__EVENT__WHAT_FILE_VERSION &&
               strcmp(ev[0]->file_version, "brain.Event:2") == 0);
        EXPECT(ev[1]->step == 7 && ev[1]->wall_time == 1790000000.5);
        EXPECT(ev[1]->what_case == SAPO__TB__EVENT__WHAT_SUMMARY);
        const char *tags[] = {"train/loss", "reward_mean", "local/zero_adv_share", "local/deep/x", "peak_gb/learner"};
        const float vals[] = {0.125f, 0.5f, 0.25f, -3.0f, 1.5f};
        Sapo__Tb__Summary *s = ev[1]->summary;
        EXPECTF(s && s->n_value == 5, "%zu values", s ? s->n_value : 0);
        for (size_t i = 0; s && i < s->n_value && i < 5; i++) {
            EXPECTF(strcmp(s->value[i]->tag, tags[i]) == 0, "%s", s->value[i]->tag);
            EXPECT(s->value[i]->value_case == SAPO__TB__VALUE__VALUE_SIMPLE_VALUE &&
                   s->value[i]->simple_value == vals[i]);
        }
        s = ev[2]->summary;
        EXPECT(ev[2]->step == 8 && s && s->n_value == 1 && strcmp(s->value[0]->tag, "heldout/pass1") == 0 &&
               s->value[0]->simple_value == 0.75f);
        s = ev[3]->summary;
        EXPECT(ev[3]->step == 7 && s && s->n_value == 1 && strcmp(s->value[0]->tag, "manifest") == 0);
        if (s && s->n_value == 1) {
            Sapo__Tb__Value *v = s->value[0];
            EXPECT(v->metadata && v->metadata->plugin_data &&
                   strcmp(v->metadata->plugin_data->plugin_name, "text") == 0);
            EXPECT(v->value_case == SAPO__TB__VALUE__VALUE_TENSOR && v->tensor->dtype == 7 &&
                   v->tensor->n_string_val == 1 && v->tensor->string_val[0].len == 11 &&
                   memcmp(v->tensor->string_val[0].data, "node **n0**", 11) == 0);
        }
    }
    free_events(ev, n);

    /* cut in the middle of its last record (a process killed mid-write):
     * the records before it read whole */
    struct stat st;
    EXPECT(stat(path, &st) == 0 && truncate(path, st.st_size - 9) == 0);
    n = read_events(path, ev, 8, &bad, &tail);
    EXPECTF(n == 3 && bad == 0 && tail > 0, "%d events, %d bad, %ld bytes after", n, bad, tail);
    free_events(ev, n);
    fs_rm_tree(dir);
}

/* every start of a process makes a file of its own, also in the same
 * second; an old file is never written again */
static void test_file_per_start(void)
{
    char dir[] = "/tmp/test_tb_XXXXXX", err[512], path[1024];
    if (!mkdtemp(dir)) SKIP_TEST("no temporary folder");
    tb_t *a = tb_open(dir, "evaluate", err, sizeof err);
    tb_t *b = tb_open(dir, "evaluate", err, sizeof err);
    EXPECT(a && b && strcmp(tb_path(a), tb_path(b)) != 0);
    tb_close(&a);
    tb_close(&b);
    EXPECT(files_in(dir, path, sizeof path) == 2);
    fs_rm_tree(dir);
}

/* a folder that cannot be made: NULL and one line naming it */
static void test_open_error(void)
{
    char err[512] = "";
    tb_t *tb = tb_open("/dev/null/tb", "learner", err, sizeof err);
    EXPECTF(tb == NULL && strstr(err, "/dev/null/tb") && !strchr(err, '\n'), "%s", err);
}

int main(void)
{
    RUN_TEST(test_crc32c);
    RUN_TEST(test_line_read_back);
    RUN_TEST(test_file_per_start);
    RUN_TEST(test_open_error);
    CHECK_EXIT();
}
