/* Following the learner's policy versions from its notices, and loading
 * each one. */
#include "node/version.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "records.h"
#include "util/log.h"

int version_follow(wire_subscriber_t *sub, int timeout_ms, policy_t *policy, uint64_t *version, uint64_t *round,
                   char *checkpoint, size_t checkpoint_len)
{
    int changed = 0;
    wire_record_t *r;
    while ((r = wire_subscriber_recv(sub, changed ? 0 : timeout_ms))) {
        timeout_ms = 0;
        void *copy = NULL;
        const void *buf = rec_aligned(r->data, r->size, &copy);
        rec_policy_t pn;
        char err[256];
        if (!buf || rec_policy_view(buf, r->size, &pn, err, sizeof err) != 0) {
            log_error("dropped a policy notice: %s", buf ? err : "out of memory");
        } else if (pn.policy_version != *version) {
            char path[4096];
            snprintf(path, sizeof path, "%s", pn.checkpoint);
            if (policy && policy_reload(policy, path, err, sizeof err) != 0) {
                log_error("policy version %llu: %s", (unsigned long long)pn.policy_version, err);
                changed = changed ? changed : -1;
            } else {
                *version = pn.policy_version;
                if (round) *round = pn.round;
                if (checkpoint) snprintf(checkpoint, checkpoint_len, "%s", path);
                changed = 1;
            }
        }
        free(copy);
        wire_record_destroy(&r);
    }
    return changed;
}
