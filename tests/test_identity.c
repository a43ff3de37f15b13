/* A node's key file (lib/node/identity.c) on real files in a temp folder:
 * made when missing with mode 0600, the same key on every later load,
 * refused with a line naming the file when its size, content or mode is
 * wrong; signatures verify only for the signed bytes under the signer's
 * key; the hex forms round-trip. */
#include "check.h"
#include "util/identity.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64];

static void write_file(const char *path, const void *data, size_t len, mode_t mode)
{
    unlink(path);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
    EXPECT(fd >= 0 && write(fd, data, len) == (ssize_t)len);
    close(fd);
    chmod(path, mode);
}

static void test_create_and_reload(void)
{
    char path[128], err[512];
    snprintf(path, sizeof path, "%s/node.key", dir);
    identity_t *a = identity_load(path, err, sizeof err);
    EXPECTF(a != NULL, "%s", err);
    struct stat st;
    EXPECT(stat(path, &st) == 0 && st.st_size == IDENTITY_SECRET_BYTES && (st.st_mode & 0777) == 0600);
    identity_t *b = identity_load(path, err, sizeof err);
    EXPECTF(b != NULL, "%s", err);
    if (a && b) EXPECT(memcmp(identity_public(a), identity_public(b), IDENTITY_PUBLIC_BYTES) == 0);
    /* no temp file is left beside it */
    char tmp[160];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    EXPECT(access(tmp, F_OK) != 0);
    identity_t *c = identity_new();
    EXPECT(c && memcmp(identity_public(a), identity_public(c), IDENTITY_PUBLIC_BYTES) != 0);
    identity_destroy(&a);
    identity_destroy(&b);
    identity_destroy(&c);
    EXPECT(a == NULL && b == NULL);
    snprintf(path, sizeof path, "%s/no/such/folder/node.key", dir);
    EXPECT(identity_load(path, err, sizeof err) == NULL && strstr(err, path) && strstr(err, "cannot create"));
}

static void test_bad_files(void)
{
    char path[128], err[512];
    snprintf(path, sizeof path, "%s/bad.key", dir);
    uint8_t junk[IDENTITY_SECRET_BYTES];
    memset(junk, 7, sizeof junk);
    write_file(path, junk, 10, 0600);
    EXPECT(identity_load(path, err, sizeof err) == NULL && strstr(err, path) && strstr(err, "10 bytes"));
    /* right size, but the public half is not the seed's */
    write_file(path, junk, sizeof junk, 0600);
    EXPECT(identity_load(path, err, sizeof err) == NULL && strstr(err, path) && strstr(err, "does not match"));
    /* a good key others can read is refused, and loads once it is private */
    char good[128];
    snprintf(good, sizeof good, "%s/open.key", dir);
    identity_t *id = identity_load(good, err, sizeof err);
    EXPECT(id != NULL);
    identity_destroy(&id);
    chmod(good, 0644);
    EXPECT(identity_load(good, err, sizeof err) == NULL && strstr(err, good) && strstr(err, "mode 644"));
    chmod(good, 0640);
    EXPECT(identity_load(good, err, sizeof err) == NULL && strstr(err, "chmod 600"));
    chmod(good, 0600);
    EXPECT((id = identity_load(good, err, sizeof err)) != NULL);
    identity_destroy(&id);
    /* a folder where the file should be */
    EXPECT(identity_load(dir, err, sizeof err) == NULL && strstr(err, dir));
    unlink(path);
    unlink(good);
}

static void test_sign_verify(void)
{
    identity_t *a = identity_new(), *b = identity_new();
    const char msg[] = "a group record";
    uint8_t sig[IDENTITY_SIGNATURE_BYTES];
    identity_sign(a, msg, sizeof msg, sig);
    EXPECT(identity_verify(identity_public(a), msg, sizeof msg, sig));
    EXPECT(!identity_verify(identity_public(b), msg, sizeof msg, sig));
    EXPECT(!identity_verify(identity_public(a), msg, sizeof msg - 1, sig));
    sig[5] ^= 1;
    EXPECT(!identity_verify(identity_public(a), msg, sizeof msg, sig));
    size_t len;
    uint8_t *env = identity_seal(a, msg, sizeof msg, &len);
    EXPECT(env && len == IDENTITY_SIGNATURE_BYTES + sizeof msg);
    EXPECT(memcmp(env + IDENTITY_SIGNATURE_BYTES, msg, sizeof msg) == 0);
    EXPECT(identity_verify(identity_public(a), env + IDENTITY_SIGNATURE_BYTES, sizeof msg, env));
    const uint8_t *rec;
    size_t rec_len;
    EXPECT(identity_open(identity_public(a), env, len, &rec, &rec_len) == 1 && rec == env + IDENTITY_SIGNATURE_BYTES &&
           rec_len == sizeof msg);
    env[len - 1] ^= 1;
    EXPECT(identity_open(identity_public(a), env, len, &rec, &rec_len) == 0);
    EXPECT(identity_open(identity_public(a), env, IDENTITY_SIGNATURE_BYTES - 1, &rec, &rec_len) == -1 && !rec);
    free(env);
    char hex[65], fp[IDENTITY_FINGERPRINT_HEX + 1];
    uint8_t back[IDENTITY_PUBLIC_BYTES];
    identity_public_hex(identity_public(a), hex, sizeof hex);
    identity_fingerprint(identity_public(a), fp, sizeof fp);
    EXPECT(strlen(hex) == 64 && strlen(fp) == IDENTITY_FINGERPRINT_HEX && strncmp(hex, fp, strlen(fp)) == 0);
    EXPECT(identity_public_parse(hex, 64, back) == 0 && memcmp(back, identity_public(a), sizeof back) == 0);
    EXPECT(identity_public_parse(hex, 63, back) == -1);
    hex[10] = 'g';
    EXPECT(identity_public_parse(hex, 64, back) == -1);
    identity_destroy(&a);
    identity_destroy(&b);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/sapo-identity-XXXXXX");
    if (!mkdtemp(dir)) {
        printf("FAIL test_identity: cannot make a temp folder\n");
        return 1;
    }
    RUN_TEST(test_create_and_reload);
    RUN_TEST(test_bad_files);
    RUN_TEST(test_sign_verify);
    char path[128];
    snprintf(path, sizeof path, "%s/node.key", dir);
    unlink(path);
    rmdir(dir);
    CHECK_EXIT();
}
