#include "tb/tb.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "tb/crc32c.h"
#include "tb/event.pb-c.h"
#include "util/fs.h"

#define DT_STRING 7
#define TAG_MAX 256

struct tb {
    int fd;
    char path[PATH_MAX];
};

static double now_seconds(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return tv.tv_sec + tv.tv_usec / 1e6;
}

static void put_le64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static void put_le32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* the Event as one TFRecord, in one write */
static int write_event(tb_t *tb, const Sapo__Tb__Event *ev, char *err, size_t errlen)
{
    size_t n = sapo__tb__event__get_packed_size(ev);
    unsigned char *rec = malloc(n + 16);
    if (!rec) {
        snprintf(err, errlen, "%s: out of memory for a record of %zu bytes", tb->path, n);
        return -1;
    }
    put_le64(rec, n);
    put_le32(rec + 8, crc32c_masked(rec, 8));
    sapo__tb__event__pack(ev, rec + 12);
    put_le32(rec + 12 + n, crc32c_masked(rec + 12, n));
    size_t off = 0;
    while (off < n + 16) {
        ssize_t w = write(tb->fd, rec + off, n + 16 - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            snprintf(err, errlen, "%s: cannot write: %s", tb->path, w < 0 ? strerror(errno) : "nothing written");
            free(rec);
            return -1;
        }
        off += (size_t)w;
    }
    free(rec);
    return 0;
}

tb_t *tb_open(const char *dir, const char *process, char *err, size_t errlen)
{
    if (fs_mkdirs(dir) != 0) {
        snprintf(err, errlen, "%s: cannot make the TensorBoard folder: %s", dir, strerror(errno));
        return NULL;
    }
    tb_t *tb = calloc(1, sizeof *tb);
    if (!tb) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    char host[HOST_NAME_MAX + 1] = "localhost";
    gethostname(host, sizeof host);
    host[HOST_NAME_MAX] = 0;
    /* TensorBoard reads a folder's files in name order: the start time
     * first, then what makes the name unique (a second file of the same
     * process in the same second gets a number) */
    tb->fd = -1;
    for (int k = 0; k < 100 && tb->fd < 0; k++) {
        int len = snprintf(tb->path, sizeof tb->path, "%s/events.out.tfevents.%010lld.%s.%d.%s", dir,
                           (long long)time(NULL), host, (int)getpid(), process);
        if (k && len > 0 && (size_t)len < sizeof tb->path) snprintf(tb->path + len, sizeof tb->path - len, ".%d", k);
        tb->fd = open(tb->path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
        if (tb->fd < 0 && errno != EEXIST) break;
    }
    if (tb->fd < 0) {
        snprintf(err, errlen, "%s: cannot create: %s", tb->path, strerror(errno));
        free(tb);
        return NULL;
    }
    Sapo__Tb__Event ev = SAPO__TB__EVENT__INIT;
    ev.wall_time = now_seconds();
    ev.what_case = SAPO__TB__EVENT__WHAT_FILE_VERSION;
    ev.file_version = "brain.Event:2";
    if (write_event(tb, &ev, err, errlen) != 0) tb_close(&tb);
    return tb;
}

/* the values of a line, gathered */
typedef struct {
    Sapo__Tb__Value *v;
    Sapo__Tb__Value **ptr;
    char (*tags)[TAG_MAX];
    size_t n, cap;
} values_t;

static int add_value(values_t *vs, const char *tag, double x)
{
    if (vs->n == vs->cap) {
        size_t cap = vs->cap ? 2 * vs->cap : 64;
        Sapo__Tb__Value *v = realloc(vs->v, cap * sizeof *v);
        if (!v) return -1;
        vs->v = v;
        char(*t)[TAG_MAX] = realloc(vs->tags, cap * sizeof *t);
        if (!t) return -1;
        vs->tags = t;
        vs->cap = cap;
    }
    Sapo__Tb__Value init = SAPO__TB__VALUE__INIT;
    vs->v[vs->n] = init;
    snprintf(vs->tags[vs->n], TAG_MAX, "%s", tag);
    vs->v[vs->n].value_case = SAPO__TB__VALUE__VALUE_SIMPLE_VALUE;
    vs->v[vs->n].simple_value = (float)x;
    vs->n++;
    return 0;
}

/* every number under j, tagged base/name (base "" at the top: name
 * alone); at the top (top) a field goes under the group that group gives
 * it, and the line's round and time are left out */
static int walk(values_t *vs, const cJSON *j, const char *base, bool top, tb_group_fn group)
{
    for (const cJSON *c = j->child; c; c = c->next) {
        if (!c->string || (top && (strcmp(c->string, "round") == 0 || strcmp(c->string, "time") == 0))) continue;
        const char *g = top && group ? group(c->string) : NULL;
        char tag[TAG_MAX];
        int len = snprintf(tag, sizeof tag, "%s%s%s%s%s", base, *base ? "/" : "", g ? g : "", g ? "/" : "", c->string);
        if (len < 0 || len >= (int)sizeof tag) continue; /* a path too long to tag */
        if (cJSON_IsNumber(c)) {
            if (add_value(vs, tag, c->valuedouble) != 0) return -1;
        } else if (cJSON_IsObject(c)) {
            if (walk(vs, c, tag, false, NULL) != 0) return -1;
        }
    }
    return 0;
}

int tb_line(tb_t *tb, const char *json, const char *prefix, tb_group_fn group, char *err, size_t errlen)
{
    cJSON *j = cJSON_Parse(json);
    if (!cJSON_IsObject(j)) {
        snprintf(err, errlen, "%s: a line that is not a JSON object", tb->path);
        cJSON_Delete(j);
        return -1;
    }
    const cJSON *round = cJSON_GetObjectItemCaseSensitive(j, "round");
    const cJSON *when = cJSON_GetObjectItemCaseSensitive(j, "time");
    values_t vs = {0};
    int rc = walk(&vs, j, prefix ? prefix : "", true, group);
    if (rc != 0) snprintf(err, errlen, "%s: out of memory for a line's values", tb->path);
    else {
        vs.ptr = malloc((vs.n ? vs.n : 1) * sizeof *vs.ptr);
        if (!vs.ptr) {
            snprintf(err, errlen, "%s: out of memory for a line's values", tb->path);
            rc = -1;
        } else {
            for (size_t i = 0; i < vs.n; i++) {
                vs.v[i].tag = vs.tags[i];
                vs.ptr[i] = &vs.v[i];
            }
            Sapo__Tb__Summary sum = SAPO__TB__SUMMARY__INIT;
            sum.n_value = vs.n;
            sum.value = vs.ptr;
            Sapo__Tb__Event ev = SAPO__TB__EVENT__INIT;
            ev.wall_time = cJSON_IsNumber(when) ? when->valuedouble : now_seconds();
            ev.step = cJSON_IsNumber(round) ? (int64_t)round->valuedouble : 0;
            ev.what_case = SAPO__TB__EVENT__WHAT_SUMMARY;
            ev.summary = &sum;
            rc = write_event(tb, &ev, err, errlen);
        }
    }
    free(vs.ptr);
    free(vs.v);
    free(vs.tags);
    cJSON_Delete(j);
    return rc;
}

int tb_text(tb_t *tb, int64_t step, const char *tag, const char *text, char *err, size_t errlen)
{
    Sapo__Tb__PluginData plugin = SAPO__TB__PLUGIN_DATA__INIT;
    plugin.plugin_name = "text";
    Sapo__Tb__Metadata meta = SAPO__TB__METADATA__INIT;
    meta.plugin_data = &plugin;
    Sapo__Tb__Shape shape = SAPO__TB__SHAPE__INIT;
    ProtobufCBinaryData s = {strlen(text), (uint8_t *)text};
    Sapo__Tb__Tensor t = SAPO__TB__TENSOR__INIT;
    t.dtype = DT_STRING;
    t.tensor_shape = &shape;
    t.n_string_val = 1;
    t.string_val = &s;
    Sapo__Tb__Value v = SAPO__TB__VALUE__INIT;
    v.tag = (char *)tag;
    v.metadata = &meta;
    v.value_case = SAPO__TB__VALUE__VALUE_TENSOR;
    v.tensor = &t;
    Sapo__Tb__Value *vp = &v;
    Sapo__Tb__Summary sum = SAPO__TB__SUMMARY__INIT;
    sum.n_value = 1;
    sum.value = &vp;
    Sapo__Tb__Event ev = SAPO__TB__EVENT__INIT;
    ev.wall_time = now_seconds();
    ev.step = step;
    ev.what_case = SAPO__TB__EVENT__WHAT_SUMMARY;
    ev.summary = &sum;
    return write_event(tb, &ev, err, errlen);
}

const char *tb_path(const tb_t *tb) { return tb->path; }

void tb_close(tb_t **tb)
{
    if (!tb || !*tb) return;
    if ((*tb)->fd >= 0) close((*tb)->fd);
    free(*tb);
    *tb = NULL;
}
