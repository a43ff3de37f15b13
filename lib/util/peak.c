/* Peak resident memory: read from /proc/self/status, written to the run
 * folder by a thread that looks once a second. */
#include "util/peak.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/fs.h"

size_t peak_rss(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    size_t kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %zu kB", &kb) == 1) break;
    fclose(f);
    return kb * 1024;
}

static struct {
    pthread_mutex_t lock;
    char path[PATH_MAX + 64];
    size_t written; /* the peak the file holds */
} watch = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* the file holds the peak when it grew: written aside, then renamed, so a
 * reader never sees half a number */
static void write_if_grown(void)
{
    pthread_mutex_lock(&watch.lock);
    size_t now = peak_rss();
    if (watch.path[0] && now > watch.written) {
        char tmp[sizeof watch.path + 8];
        snprintf(tmp, sizeof tmp, "%s.tmp", watch.path);
        FILE *f = fopen(tmp, "w");
        if (f && fprintf(f, "%zu\n", now) > 0 && fclose(f) == 0 && rename(tmp, watch.path) == 0) watch.written = now;
        else if (f) unlink(tmp);
    }
    pthread_mutex_unlock(&watch.lock);
}

void peak_note(void) { write_if_grown(); }

static void *watcher(void *arg)
{
    (void)arg;
    for (;;) {
        write_if_grown();
        sleep(1);
    }
    return NULL;
}

int peak_watch(const char *run, const char *process, char *err, size_t errlen)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/peak", run);
    if (fs_mkdirs(dir) != 0) {
        snprintf(err, errlen, "%s: cannot create: %s", dir, strerror(errno));
        return -1;
    }
    pthread_mutex_lock(&watch.lock);
    snprintf(watch.path, sizeof watch.path, "%s/%s-%ld", dir, process, (long)getpid());
    watch.written = 0;
    pthread_mutex_unlock(&watch.lock);
    write_if_grown();
    pthread_t t;
    int rc = pthread_create(&t, NULL, watcher, NULL);
    if (rc != 0) {
        snprintf(err, errlen, "peak memory watch: cannot start a thread: %s", strerror(rc));
        return -1;
    }
    pthread_detach(t);
    return 0;
}

static int by_name(const void *a, const void *b) { return strcmp(a, b); }

void peak_read(const char *run, peak_table_t *t)
{
    memset(t, 0, sizeof *t);
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/peak", run);
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d))) {
        /* <process>-<pid>: the name up to the last dash */
        const char *dash = strrchr(de->d_name, '-');
        if (!dash || dash == de->d_name || strchr(dash, '.') || (size_t)(dash - de->d_name) >= sizeof t->name[0])
            continue;
        char path[PATH_MAX + 256];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        char *text = fs_read_text(path);
        size_t bytes = text ? strtoull(text, NULL, 10) : 0;
        free(text);
        char name[sizeof t->name[0]];
        snprintf(name, sizeof name, "%.*s", (int)(dash - de->d_name), de->d_name);
        int i = 0;
        while (i < t->n && strcmp(t->name[i], name) != 0) i++;
        if (i == t->n) {
            if (t->n == PEAK_MAX_PROCESSES) continue;
            snprintf(t->name[t->n++], sizeof t->name[0], "%s", name);
        }
        if (bytes > t->bytes[i]) t->bytes[i] = bytes;
    }
    closedir(d);
    /* sorted by name, each name with its bytes */
    struct {
        char name[32];
        size_t bytes;
    } rows[PEAK_MAX_PROCESSES];
    for (int i = 0; i < t->n; i++) memcpy(rows[i].name, t->name[i], sizeof rows[i].name), rows[i].bytes = t->bytes[i];
    qsort(rows, (size_t)t->n, sizeof rows[0], by_name);
    for (int i = 0; i < t->n; i++) memcpy(t->name[i], rows[i].name, sizeof rows[i].name), t->bytes[i] = rows[i].bytes;
}
