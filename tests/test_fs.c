/* lib/util/fs.c: the whole lines at the end of a file that lines are
 * appended to, as a process killed mid-write leaves it: the last whole
 * line read, a partial one after it never read and cut before the next
 * append; a tree made and removed. */
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "util/fs.h"

static char dir[64];

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    fputs(text, f);
    fclose(f);
}

static void test_last_line(void)
{
    char path[128];
    snprintf(path, sizeof path, "%s/a.jsonl", dir);
    EXPECT(fs_last_line(path) == NULL); /* missing */
    write_file(path, "");
    EXPECT(fs_last_line(path) == NULL);
    write_file(path, "{\"round\":1");
    EXPECT(fs_last_line(path) == NULL); /* no whole line */
    write_file(path, "{\"round\":1}\n");
    char *l = fs_last_line(path);
    EXPECTF(l && strcmp(l, "{\"round\":1}") == 0, "%s", l ? l : "(null)");
    free(l);
    write_file(path, "{\"round\":1}\n{\"round\":2}\n{\"rou");
    l = fs_last_line(path);
    EXPECTF(l && strcmp(l, "{\"round\":2}") == 0, "%s", l ? l : "(null)");
    free(l);
    /* a line longer than the 4 KB the file is read back by */
    char *big = malloc(10000);
    memset(big, 'x', 9000);
    strcpy(big + 9000, "\n");
    FILE *f = fopen(path, "wb");
    fputs("first\n", f);
    fputs(big, f);
    fputs("partial", f);
    fclose(f);
    l = fs_last_line(path);
    EXPECTF(l && strlen(l) == 9000 && l[0] == 'x' && l[8999] == 'x', "%zu", l ? strlen(l) : 0);
    free(l);
    free(big);
}

static void test_cut_partial_line(void)
{
    char path[128];
    snprintf(path, sizeof path, "%s/b.jsonl", dir);
    EXPECT(fs_cut_partial_line(path) == 0); /* missing: nothing to cut */
    write_file(path, "one\ntwo\n");
    EXPECT(fs_cut_partial_line(path) == 0);
    write_file(path, "one\ntwo\nthr");
    EXPECT(fs_cut_partial_line(path) == 3);
    FILE *f = fopen(path, "a");
    fputs("three\n", f);
    fclose(f);
    char *s = fs_read_text(path);
    EXPECTF(s && strcmp(s, "one\ntwo\nthree\n") == 0, "%s", s ? s : "(null)");
    free(s);
    write_file(path, "no newline at all");
    EXPECT(fs_cut_partial_line(path) == 17);
    s = fs_read_text(path);
    EXPECT(s && s[0] == '\0');
    free(s);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/test_fs.XXXXXX");
    if (!mkdtemp(dir)) return 1;
    RUN_TEST(test_last_line);
    RUN_TEST(test_cut_partial_line);
    EXPECT(fs_rm_tree(dir) == 0);
    CHECK_EXIT();
}
