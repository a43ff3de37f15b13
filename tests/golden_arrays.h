/* Reads the golden text files the tests/oracle scripts write: one array a
 * line, "name count v0 v1 ...", lines starting with '#' are comments. */
#ifndef SAPO_GOLDEN_ARRAYS_H
#define SAPO_GOLDEN_ARRAYS_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the array called name in path (malloc'ed, *count values), or NULL with a
 * line on stderr */
static float *golden_array(const char *path, const char *name, int *count)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        return NULL;
    }
    char key[64];
    float *out = NULL;
    int n, c;
    while (!out && fscanf(f, "%63s", key) == 1) {
        if (key[0] == '#' || fscanf(f, "%d", &n) != 1 || strcmp(key, name) != 0) {
            while ((c = fgetc(f)) != '\n' && c != EOF) {
            }
            continue;
        }
        out = malloc((n ? n : 1) * sizeof *out);
        for (int i = 0; i < n; i++)
            if (fscanf(f, "%f", &out[i]) != 1) {
                free(out);
                out = NULL;
                break;
            }
        *count = n;
    }
    fclose(f);
    if (!out) fprintf(stderr, "%s: no array %s\n", path, name);
    return out;
}

#endif
