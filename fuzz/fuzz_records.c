/* libFuzzer target: every record decoder on untrusted bytes, as they come
 * from a socket or the pool: identification, the Verifier and each view,
 * JSON printing, and the pool screen: on the bytes as a pool entry (an
 * envelope whose signature fails), and on them sealed with a key the screen
 * trusts, so the record checks behind the signature see them too. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/identity.h"
#include "../sampler/screen.h"
#include "records.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static screen_t *screen;
    static identity_t *id;
    if (!screen) {
        id = identity_new();
        screen_limits_t lim = {
            .node = "me", .completions = 4, .max_record = 1 << 20, .max_text = 4096, .dup_window = 64};
        screen = screen_new(&lim);
    }
    void *buf = malloc(size ? size : 1);
    memcpy(buf, data, size);
    char err[256];
    rec_identify(buf, size);
    rec_verify(buf, size, err, sizeof err);
    rec_task_t t;
    rec_task_view(buf, size, &t, err, sizeof err);
    rec_group_view_t v;
    if (rec_group_view(buf, size, &v, err, sizeof err) == 0) {
        rec_completion_t c;
        for (size_t i = 0; i < v.r.n_completions; i++) rec_group_completion(&v, i, &c);
        rec_completion_t *comps = calloc(v.r.n_completions + 1, sizeof *comps);
        rec_group_t r;
        rec_group_unpack(&v, &r, comps);
        uint8_t *out;
        size_t len;
        if (rec_group_build(&r, &out, &len) == 0) rec_free(out);
        free(comps);
    }
    rec_batch_view_t b;
    if (rec_batch_view(buf, size, &b, err, sizeof err) == 0)
        for (size_t i = 0; i < b.b.n_groups; i++) rec_batch_group(&b, i, &v);
    rec_policy_t p;
    rec_policy_view(buf, size, &p, err, sizeof err);
    free(rec_to_json(buf, size, err, sizeof err));
    screen_check(screen, data, size);
    screen_entry(screen, data, size, "peer", identity_public(id), NULL);
    size_t sealed_len;
    uint8_t *sealed = identity_seal(id, data, size, &sealed_len);
    rec_group_view_t seen;
    if (sealed) screen_entry(screen, sealed, sealed_len, "peer", identity_public(id), &seen);
    free(sealed);
    free(buf);
    return 0;
}
