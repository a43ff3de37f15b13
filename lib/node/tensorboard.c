#include "node/tensorboard.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/fs.h"
#include "util/log.h"

tb_t *tensorboard_open(const config_t *cfg, const char *process)
{
    if (!cfg->tensorboard) return NULL;
    char dir[PATH_MAX], err[PATH_MAX + 256];
    snprintf(dir, sizeof dir, "%s/tb", cfg->run);
    tb_t *tb = tb_open(dir, process, err, sizeof err);
    if (!tb) log_error("TensorBoard: %s; going on without event files", err);
    else log_info("TensorBoard events into %s", tb_path(tb));
    return tb;
}

/* a file's text on one line (a JSON file's newlines are spaces), or NULL */
static char *text_of(const char *path)
{
    char *s = fs_read_text(path);
    if (s) {
        size_t n = strlen(s);
        while (n && (s[n - 1] == '\n' || s[n - 1] == '\r')) s[--n] = 0;
        for (char *p = s; *p; p++)
            if (*p == '\n' || *p == '\r') *p = ' ';
    }
    return s;
}

void tensorboard_manifest(tb_t **tb, const config_t *cfg, const char *shape, const char *start, uint64_t round)
{
    if (!*tb) return;
    char path[PATH_MAX + 32], err[PATH_MAX + 256];
    snprintf(path, sizeof path, "%s.sha256", start);
    char *sha = text_of(path);
    snprintf(path, sizeof path, "%s/format.json", start);
    char *made = text_of(path);
    char *settings = config_json(cfg);
    size_t n = strlen(start) + strlen(cfg->node) + strlen(cfg->model) + strlen(shape) + (sha ? strlen(sha) : 0) +
               (made ? strlen(made) : 0) + (settings ? strlen(settings) : 0) + 512;
    char *text = malloc(n);
    if (text) {
        /* Markdown: four spaces make a block the dashboard keeps verbatim */
        int len = snprintf(text, n, "node **%s**, model **%s** (%s)\n\nstarts from %s%s%s%s\n\n", cfg->node, cfg->model,
                           shape, start, sha ? " (sha256 " : "", sha ? sha : "", sha ? ")" : "");
        if (made) len += snprintf(text + len, n - len, "made by its warm start:\n\n    %s\n\n", made);
        if (settings) snprintf(text + len, n - len, "settings:\n\n    %s\n", settings);
        if (tb_text(*tb, (int64_t)round, "manifest", text, err, sizeof err) != 0) {
            log_error("TensorBoard: %s; going on without event files", err);
            tb_close(tb);
        }
    }
    free(text);
    free(settings);
    free(made);
    free(sha);
}

void tensorboard_line(tb_t **tb, const char *line, const char *prefix, tb_group_fn group)
{
    char err[PATH_MAX + 256];
    if (*tb && tb_line(*tb, line, prefix, group, err, sizeof err) != 0) {
        log_error("TensorBoard: %s; going on without event files", err);
        tb_close(tb);
    }
}
