/* The learner's checkpoints: written beside the last one and renamed into
 * place, so a learner killed at any moment resumes from a whole one. */
#include "checkpoint.h"
#include "util/fs.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A policy version as state.json and metrics lines write it; files
 * written before the name was unified call it "version" */
static const cJSON *policy_version_of(const cJSON *j)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "policy_version");
    return v ? v : cJSON_GetObjectItemCaseSensitive(j, "version");
}

static int read_state(const char *dir, checkpoint_state_t *st, char *err, size_t errlen)
{
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/state.json", dir);
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    char buf[512];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    cJSON *j = cJSON_Parse(buf);
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(j, "round");
    const cJSON *v = policy_version_of(j);
    int rc = 0;
    if (!cJSON_IsNumber(r) || !cJSON_IsNumber(v) || r->valuedouble < 0 || v->valuedouble < 0) {
        snprintf(err, errlen, "%s: needs numbers round and policy_version", path);
        rc = -1;
    } else {
        st->round = (uint64_t)r->valuedouble;
        st->policy_version = (uint64_t)v->valuedouble;
    }
    cJSON_Delete(j);
    return rc;
}

int checkpoint_latest(const char *run, char *dir, size_t dirlen, checkpoint_state_t *st, char *err, size_t errlen)
{
    char link[PATH_MAX + 16], target[PATH_MAX];
    snprintf(link, sizeof link, "%s/ckpt/latest", run);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n < 0) {
        if (errno == ENOENT) return 1;
        snprintf(err, errlen, "%s: %s", link, strerror(errno));
        return -1;
    }
    target[n] = '\0';
    if (snprintf(dir, dirlen, "%s/ckpt/%s", run, target) >= (int)dirlen) {
        snprintf(err, errlen, "%s: path too long", link);
        return -1;
    }
    return read_state(dir, st, err, errlen);
}

/* state.json of a checkpoint folder, flushed to disk */
static int write_state(const char *dir, const checkpoint_state_t *st, char *err, size_t errlen)
{
    char path[PATH_MAX + 320];
    snprintf(path, sizeof path, "%s/state.json", dir);
    FILE *f = fopen(path, "w");
    if (!f ||
        fprintf(f, "{\"round\": %llu, \"policy_version\": %llu}\n", (unsigned long long)st->round,
                (unsigned long long)st->policy_version) < 0 ||
        fflush(f) != 0 || fsync(fileno(f)) != 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        if (f) fclose(f);
        return -1;
    }
    fclose(f);
    return 0;
}

/* names sort by round: drop all but the newest keep */
static void prune(const char *run, int keep)
{
    char dir[PATH_MAX], path[PATH_MAX + 320];
    snprintf(dir, sizeof dir, "%s/ckpt", run);
    struct dirent **list;
    int n = scandir(dir, &list, NULL, alphasort), seen = 0;
    for (int i = n - 1; i >= 0; i--) {
        const char *d = list[i]->d_name;
        if (d[0] == 'r' && strlen(d) == 9 && ++seen > keep) {
            snprintf(path, sizeof path, "%s/%s", dir, d);
            fs_rm_tree(path);
        }
        free(list[i]);
    }
    if (n >= 0) free(list);
}

int checkpoint_save(const char *run, const policy_t *pol, const adamw_t *opt, const checkpoint_state_t *st, int keep,
                    char *err, size_t errlen)
{
    char dir[PATH_MAX], part[PATH_MAX + 8], path[PATH_MAX + 320], name[64];
    snprintf(dir, sizeof dir, "%s/ckpt", run);
    mkdir(dir, 0755);
    snprintf(name, sizeof name, "r%08llu", (unsigned long long)st->round);
    snprintf(dir, sizeof dir, "%s/ckpt/%s", run, name);
    /* the same round saved again (the final save after a periodic one) is
     * the same state: only the link is renewed */
    checkpoint_state_t old;
    char ignored[256];
    if (read_state(dir, &old, ignored, sizeof ignored) == 0 && old.round == st->round &&
        old.policy_version == st->policy_version)
        goto link;
    snprintf(part, sizeof part, "%s.part", dir);
    fs_rm_tree(part);
    if (policy_save(pol, part, false, NULL, err, errlen) != 0) return -1;
    snprintf(path, sizeof path, "%s/optimizer.bin", part);
    if (adamw_save(opt, path) != 0) {
        snprintf(err, errlen, "%s: could not be written (see above)", path);
        return -1;
    }
    if (write_state(part, st, err, errlen) != 0) return -1;
    /* a folder of this name no link points at (a learner killed while
     * renaming) gives way to the complete one */
    fs_rm_tree(dir);
    if (rename(part, dir) != 0) {
        snprintf(err, errlen, "%s: %s", dir, strerror(errno));
        return -1;
    }
link:;
    char tmp[PATH_MAX + 16], link[PATH_MAX + 16];
    snprintf(tmp, sizeof tmp, "%s/ckpt/latest.tmp", run);
    snprintf(link, sizeof link, "%s/ckpt/latest", run);
    unlink(tmp);
    if (symlink(name, tmp) != 0 || rename(tmp, link) != 0) {
        snprintf(err, errlen, "%s: %s", link, strerror(errno));
        return -1;
    }
    prune(run, keep);
    return 0;
}

size_t checkpoint_disk_bytes(size_t n_params, int keep_versions, bool bf16_versions, int keep_checkpoints)
{
    size_t version = n_params * (bf16_versions ? 2 : 4), checkpoint = n_params * 3 * sizeof(float);
    return (size_t)(keep_versions + 1) * version + (size_t)(keep_checkpoints + 1) * checkpoint;
}

uint64_t checkpoint_last_logged_round(const char *metrics_path, uint64_t *version)
{
    *version = 0;
    /* the last whole line: a learner killed mid-write leaves a partial one */
    char *line = fs_last_line(metrics_path);
    cJSON *j = line ? cJSON_Parse(line) : NULL;
    free(line);
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(j, "round");
    const cJSON *v = policy_version_of(j);
    uint64_t round = cJSON_IsNumber(r) && r->valuedouble > 0 ? (uint64_t)r->valuedouble : 0;
    if (cJSON_IsNumber(v) && v->valuedouble > 0) *version = (uint64_t)v->valuedouble;
    cJSON_Delete(j);
    return round;
}
