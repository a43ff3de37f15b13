/* A node's Ed25519 identity: its key file, and signing and verifying the
 * groups it publishes to the pool. */
#include "util/identity.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct identity {
    uint8_t sk[IDENTITY_SECRET_BYTES]; /* seed, then the public key */
};

static identity_t *alloc_identity(void)
{
    if (sodium_init() < 0) return NULL;
    return calloc(1, sizeof(identity_t));
}

identity_t *identity_new(void)
{
    identity_t *self = alloc_identity();
    uint8_t pk[IDENTITY_PUBLIC_BYTES];
    if (self) crypto_sign_keypair(pk, self->sk);
    return self;
}

void identity_destroy(identity_t **self_p)
{
    if (!self_p || !*self_p) return;
    sodium_memzero((*self_p)->sk, sizeof(*self_p)->sk);
    free(*self_p);
    *self_p = NULL;
}

/* A secret key whose public half is not the one its seed makes is a
 * corrupted or foreign file: signatures made with it would not verify. */
static int consistent(const uint8_t sk[IDENTITY_SECRET_BYTES])
{
    uint8_t pk[IDENTITY_PUBLIC_BYTES], again[IDENTITY_SECRET_BYTES];
    crypto_sign_seed_keypair(pk, again, sk);
    int ok = sodium_memcmp(again, sk, IDENTITY_SECRET_BYTES) == 0;
    sodium_memzero(again, sizeof again);
    return ok;
}

static int read_key(identity_t *self, int fd, const char *path, char *err, size_t errlen)
{
    struct stat st;
    if (fstat(fd, &st) != 0) {
        snprintf(err, errlen, "key file %s: %s", path, strerror(errno));
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "key file %s: not a regular file", path);
        return -1;
    }
    if (st.st_mode & 077) {
        snprintf(err, errlen, "key file %s: mode %03o lets group or others read the node's secret key (chmod 600 %s)",
                 path, (unsigned)(st.st_mode & 0777), path);
        return -1;
    }
    if (st.st_size != IDENTITY_SECRET_BYTES) {
        snprintf(err, errlen, "key file %s: %lld bytes, not a %d-byte Ed25519 secret key", path, (long long)st.st_size,
                 IDENTITY_SECRET_BYTES);
        return -1;
    }
    ssize_t n = read(fd, self->sk, sizeof self->sk);
    if (n != (ssize_t)sizeof self->sk) {
        snprintf(err, errlen, "key file %s: %s", path, n < 0 ? strerror(errno) : "short read");
        return -1;
    }
    if (!consistent(self->sk)) {
        snprintf(err, errlen, "key file %s: not an Ed25519 secret key (its public half does not match its seed)", path);
        return -1;
    }
    return 0;
}

/* Writes a fresh key to a temp file beside path and links it in place:
 * link fails where path exists, so two processes making the node's key at
 * once end up with the same one (the loser reads the winner's). 0 made,
 * 1 someone else's is there now, -1 with err. */
static int create_key(identity_t *self, const char *path, char *err, size_t errlen)
{
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp) {
        snprintf(err, errlen, "key file %s: path too long", path);
        return -1;
    }
    uint8_t pk[IDENTITY_PUBLIC_BYTES];
    crypto_sign_keypair(pk, self->sk);
    unlink(tmp);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        snprintf(err, errlen, "key file %s: cannot create: %s", path, strerror(errno));
        return -1;
    }
    int ok = write(fd, self->sk, sizeof self->sk) == (ssize_t)sizeof self->sk && fsync(fd) == 0;
    int saved = errno;
    close(fd);
    if (!ok) {
        unlink(tmp);
        snprintf(err, errlen, "key file %s: cannot write: %s", tmp, strerror(saved));
        return -1;
    }
    int linked = link(tmp, path);
    saved = errno;
    unlink(tmp);
    if (linked != 0) {
        if (saved == EEXIST) return 1;
        snprintf(err, errlen, "key file %s: cannot create: %s", path, strerror(saved));
        return -1;
    }
    /* the new name survives a crash only once its folder is synced */
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash == dir) slash[1] = '\0';
    else if (slash) *slash = '\0';
    else snprintf(dir, sizeof dir, ".");
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    return 0;
}

identity_t *identity_load(const char *path, char *err, size_t errlen)
{
    identity_t *self = alloc_identity();
    if (!self) {
        snprintf(err, errlen, "key file %s: out of memory or libsodium failed to start", path);
        return NULL;
    }
    for (int attempt = 0; attempt < 2; attempt++) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            int rc = read_key(self, fd, path, err, errlen);
            close(fd);
            if (rc == 0) return self;
            break;
        }
        if (errno != ENOENT) {
            snprintf(err, errlen, "key file %s: %s", path, strerror(errno));
            break;
        }
        int made = create_key(self, path, err, errlen);
        if (made == 0) return self;
        if (made < 0) break;
    }
    identity_destroy(&self);
    return NULL;
}

const uint8_t *identity_public(const identity_t *self) { return self->sk + 32; }

void identity_sign(const identity_t *self, const void *msg, size_t len, uint8_t sig[IDENTITY_SIGNATURE_BYTES])
{
    crypto_sign_detached(sig, NULL, msg, len, self->sk);
}

int identity_verify(const uint8_t pub[IDENTITY_PUBLIC_BYTES], const void *msg, size_t len,
                    const uint8_t sig[IDENTITY_SIGNATURE_BYTES])
{
    if (sodium_init() < 0) return 0;
    return crypto_sign_verify_detached(sig, msg, len, pub) == 0;
}

uint8_t *identity_seal(const identity_t *self, const void *rec, size_t len, size_t *out_len)
{
    uint8_t *out = malloc(IDENTITY_SIGNATURE_BYTES + len);
    if (!out) return NULL;
    memcpy(out + IDENTITY_SIGNATURE_BYTES, rec, len);
    identity_sign(self, out + IDENTITY_SIGNATURE_BYTES, len, out);
    *out_len = IDENTITY_SIGNATURE_BYTES + len;
    return out;
}

int identity_open(const uint8_t pub[IDENTITY_PUBLIC_BYTES], const void *entry, size_t len, const uint8_t **rec,
                  size_t *rec_len)
{
    *rec = NULL;
    *rec_len = 0;
    if (len < IDENTITY_SIGNATURE_BYTES) return -1;
    *rec = (const uint8_t *)entry + IDENTITY_SIGNATURE_BYTES;
    *rec_len = len - IDENTITY_SIGNATURE_BYTES;
    return identity_verify(pub, *rec, *rec_len, entry);
}

void identity_public_hex(const uint8_t pub[IDENTITY_PUBLIC_BYTES], char *out, size_t outlen)
{
    static const char digits[] = "0123456789abcdef";
    size_t n = 0;
    for (int i = 0; i < IDENTITY_PUBLIC_BYTES && n + 2 < outlen; i++) {
        out[n++] = digits[pub[i] >> 4];
        out[n++] = digits[pub[i] & 15];
    }
    if (outlen) out[n] = '\0';
}

void identity_fingerprint(const uint8_t pub[IDENTITY_PUBLIC_BYTES], char *out, size_t outlen)
{
    identity_public_hex(pub, out, outlen < IDENTITY_FINGERPRINT_HEX + 1 ? outlen : IDENTITY_FINGERPRINT_HEX + 1);
}

int identity_public_parse(const char *hex, size_t len, uint8_t pub[IDENTITY_PUBLIC_BYTES])
{
    uint8_t out[IDENTITY_PUBLIC_BYTES] = {0};
    if (len != 2 * IDENTITY_PUBLIC_BYTES) return -1;
    for (size_t i = 0; i < len; i++) {
        char c = hex[i];
        int v = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (v < 0) return -1;
        out[i / 2] |= (uint8_t)(i % 2 ? v : v << 4);
    }
    memcpy(pub, out, sizeof out);
    return 0;
}
