/* A group record in plain malloc'ed memory, for the functions under test
 * that take ownership and free() it (rec_group_build's own buffer is
 * freed with rec_free); NULL when it cannot be built. */
#ifndef SAPO_GROUP_BUF_H
#define SAPO_GROUP_BUF_H
#include <stdlib.h>
#include <string.h>
#include "records.h"

static void *group_buf(const rec_group_t *r, size_t *len)
{
    uint8_t *built;
    if (rec_group_build(r, &built, len) != 0) return NULL;
    void *buf = malloc(*len);
    if (buf) memcpy(buf, built, *len);
    rec_free(built);
    return buf;
}

/* group_buf, and its view in *v (as the sampler has a group it hands to
 * the assembly); NULL when it cannot be built */
static inline void *group_buf_viewed(const rec_group_t *r, rec_group_view_t *v)
{
    size_t len;
    void *buf = group_buf(r, &len);
    char err[128];
    if (buf && rec_group_view(buf, len, v, err, sizeof err) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

#endif
