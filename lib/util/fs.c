/* Small file-system helpers: removing a tree, making folders, reading a
 * whole file, the whole lines at the end of a file lines are appended to. */
#include "util/fs.h"

#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

int fs_rm_tree(const char *dir)
{
    struct stat st;
    if (lstat(dir, &st) != 0) return errno == ENOENT ? 0 : -1;
    return nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

int fs_mkdirs(const char *dir)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(path, 0755) != 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    return mkdir(path, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

char *fs_read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *s = NULL;
    size_t cap = 0, n = 0;
    for (;;) {
        if (n + 4096 + 1 > cap) {
            char *grown = realloc(s, cap = 2 * cap + 4096 + 1);
            if (!grown) {
                free(s);
                fclose(f);
                errno = ENOMEM;
                return NULL;
            }
            s = grown;
        }
        size_t got = fread(s + n, 1, 4096, f);
        n += got;
        if (got < 4096) break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(s);
        errno = EIO;
        return NULL;
    }
    s[n] = '\0';
    return s;
}

/* the offset just past the last newline before offset at (0 if none), or
 * -1: the file read backward 4 KB at a time */
static long after_newline(FILE *f, long at)
{
    char buf[4096];
    while (at > 0) {
        long from = at > (long)sizeof buf ? at - (long)sizeof buf : 0;
        if (fseek(f, from, SEEK_SET) != 0 || fread(buf, 1, (size_t)(at - from), f) != (size_t)(at - from)) return -1;
        for (long i = at - from; i > 0; i--)
            if (buf[i - 1] == '\n') return from + i;
        at = from;
    }
    return 0;
}

/* the offset just past the file's last newline (0 if none), and its size */
static int whole_end(FILE *f, long *end, long *size)
{
    if (fseek(f, 0, SEEK_END) != 0 || (*size = ftell(f)) < 0) return -1;
    *end = after_newline(f, *size);
    return *end < 0 ? -1 : 0;
}

char *fs_last_line(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    long end, size, start;
    char *line = NULL;
    /* from after the newline before the last one to the last one */
    if (whole_end(f, &end, &size) == 0 && end > 0 && (start = after_newline(f, end - 1)) >= 0 &&
        (line = malloc((size_t)(end - start)))) {
        if (fseek(f, start, SEEK_SET) != 0 || fread(line, 1, (size_t)(end - start), f) != (size_t)(end - start)) {
            free(line);
            line = NULL;
        } else {
            line[end - start - 1] = '\0';
        }
    }
    fclose(f);
    return line;
}

long fs_cut_partial_line(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return errno == ENOENT ? 0 : -1;
    long end, size;
    int rc = whole_end(f, &end, &size);
    fclose(f);
    if (rc != 0) {
        errno = EIO;
        return -1;
    }
    if (end == size) return 0;
    return truncate(path, end) == 0 ? size - end : -1;
}
