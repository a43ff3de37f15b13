/* Following the learner's policy versions from its notices. */
#ifndef SAPO_VERSION_H
#define SAPO_VERSION_H

#include <stdint.h>
#include "node/policy.h"
#include "wire/wire.h"

/* Reads every waiting notice (up to timeout_ms for the first); when one
 * names another version than *version (a restarted learner goes back to
 * its checkpoint's version), loads its checkpoint into policy (when policy is not
 * NULL) and updates *version and *round. Returns 1 when the version
 * changed, 0 when not, -1 when a newer checkpoint could not be loaded
 * (logged; the old weights stay). */
int version_follow(wire_subscriber_t *sub, int timeout_ms, policy_t *policy, uint64_t *version, uint64_t *round,
                   char *checkpoint, size_t checkpoint_len);

#endif
