/* A node's identity: an Ed25519 key pair (libsodium). The public key is
 * who the node is to the swarm; every group it publishes to the
 * pool is signed with the secret key, and a reader verifies the signature
 * under the key registered for the node id the entry is stored under.
 *
 * Key file: the 64-byte libsodium secret key (seed, then public key), raw,
 * mode 0600. identity_load creates it when it does not exist.
 *
 * A pool entry is an envelope: the 64-byte detached signature, then the
 * record it covers. 64 is a multiple of 16, so the record inside a 16-byte
 * aligned entry stays aligned for FlatBuffers. */
#ifndef SAPO_IDENTITY_H
#define SAPO_IDENTITY_H

#include <stddef.h>
#include <stdint.h>

#define IDENTITY_PUBLIC_BYTES 32
#define IDENTITY_SECRET_BYTES 64
#define IDENTITY_SIGNATURE_BYTES 64
/* hex digits of identity_fingerprint */
#define IDENTITY_FINGERPRINT_HEX 16

typedef struct identity identity_t;

/* The key in path, made (temp file, fsync, link: never replacing a key
 * another process wrote meanwhile) when path does not exist. NULL with one
 * line in err naming path: unreadable, wrong size, a public half that does
 * not match the secret, or a mode that lets group or others read it. */
identity_t *identity_load(const char *path, char *err, size_t errlen);
/* A fresh key held in memory only (tests and bin/hostile's forgeries). */
identity_t *identity_new(void);
void identity_destroy(identity_t **self_p);

const uint8_t *identity_public(const identity_t *self);
void identity_sign(const identity_t *self, const void *msg, size_t len, uint8_t sig[IDENTITY_SIGNATURE_BYTES]);
/* 1 when sig is pub's signature of msg, else 0 */
int identity_verify(const uint8_t pub[IDENTITY_PUBLIC_BYTES], const void *msg, size_t len,
                    const uint8_t sig[IDENTITY_SIGNATURE_BYTES]);

/* The envelope signature || rec, malloc'ed (free()), its length in
 * *out_len; NULL when out of memory. */
uint8_t *identity_seal(const identity_t *self, const void *rec, size_t len, size_t *out_len);
/* Opens an envelope of identity_seal: the record inside goes to *rec and
 * *rec_len. 1 when its signature verifies under pub, 0 when it does not,
 * -1 when entry is shorter than a signature (*rec NULL). */
int identity_open(const uint8_t pub[IDENTITY_PUBLIC_BYTES], const void *entry, size_t len, const uint8_t **rec,
                  size_t *rec_len);

/* The first IDENTITY_FINGERPRINT_HEX hex digits of the public key (what
 * `redis-cli GET <swarm>:n:<node>:key` starts with), for logs. */
void identity_fingerprint(const uint8_t pub[IDENTITY_PUBLIC_BYTES], char *out, size_t outlen);
/* The public key as 64 lowercase hex digits (out: at least 65 bytes). */
void identity_public_hex(const uint8_t pub[IDENTITY_PUBLIC_BYTES], char *out, size_t outlen);
/* 64 hex digits (any case) to 32 bytes: 0, or -1 when hex is not that. */
int identity_public_parse(const char *hex, size_t len, uint8_t pub[IDENTITY_PUBLIC_BYTES]);

#endif
