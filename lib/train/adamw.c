/* AdamW in torch.optim.AdamW's order of operations (single-tensor path):
 *   p <- p * (1 - lr wd)
 *   m <- lerp(m, g, 1 - beta1);  v <- v beta2 + (1 - beta2) g^2
 *   p <- p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
 * with the scalars in double and the tensors in float, as torch does, so
 * parameters agree to rounding after many steps. The moments may be kept
 * in bf16 (adamw_new_bf16), stepped in fp32 and stored rounded at random. */
#include "train/adamw.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/log.h"

#define ADAMW_MAGIC "SAPOADAM"
#define ADAMW_VERSION 1u

typedef struct {
    uint64_t offset, n;
} range_t;

struct adamw {
    size_t n;
    long step;
    float *m;          // (n) first moment, or NULL where kept in bf16
    float *v;          // (n) second moment, the same
    uint16_t *m16;     // (n) the moments in bf16 (adamw_new_bf16), or NULL
    uint16_t *v16;     // (n)
    range_t *no_decay; // sorted by offset
    size_t n_no_decay;
    void *holder; /* a device holding the moments (adamw_hold), or NULL */
    adamw_holder_fn ask;
};

adamw_params_t adamw_params_default(void)
{
    return (adamw_params_t){.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 1e-2f};
}

adamw_t *adamw_new(size_t n)
{
    adamw_t *self = calloc(1, sizeof *self);
    if (self) {
        self->n = n;
        self->m = calloc(n ? n : 1, sizeof(float));
        self->v = calloc(n ? n : 1, sizeof(float));
    }
    if (!self || !self->m || !self->v) {
        log_error("adamw: out of memory for the state of %zu parameters", n);
        adamw_destroy(&self);
        return NULL;
    }
    return self;
}

adamw_t *adamw_new_bf16(size_t n)
{
    adamw_t *self = calloc(1, sizeof *self);
    if (self) {
        self->n = n;
        self->m16 = calloc(n ? n : 1, sizeof(uint16_t));
        self->v16 = calloc(n ? n : 1, sizeof(uint16_t));
    }
    if (!self || !self->m16 || !self->v16) {
        log_error("adamw: out of memory for the bf16 state of %zu parameters", n);
        adamw_destroy(&self);
        return NULL;
    }
    return self;
}

bool adamw_bf16(const adamw_t *self) { return self->m16 != NULL; }

static inline float from_bf16(uint16_t h)
{
    uint32_t b = (uint32_t)h << 16;
    float f;
    memcpy(&f, &b, 4);
    return f;
}

/* to nearest, ties to even (finite x: moments are) */
static inline uint16_t to_bf16(float x)
{
    uint32_t b;
    memcpy(&b, &x, 4);
    return (uint16_t)((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
}

/* Stochastic: up with the chance that x lies between its two bf16
 * neighbours (r is 16 random bits). bf16 keeps 8 bits of a number, so a
 * second moment's decay by beta2 = 0.999 a step would round back to the
 * moment itself every time; rounded at random it decays as it should on
 * average, each moment with its own draws */
static inline uint16_t to_bf16_stochastic(float x, uint32_t r)
{
    uint32_t b;
    memcpy(&b, &x, 4);
    return (uint16_t)((b + (r & 0xffffu)) >> 16);
}

/* 32 random bits for moment which of parameter i at step t: a hash of the
 * three, so every thread split draws the same */
static inline uint32_t draw(uint64_t i, uint64_t t, uint64_t which)
{
    uint64_t z = i * 0x9E3779B97F4A7C15ull ^ (t * 2 + which) * 0xD1B54A32D192ED03ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (uint32_t)((z ^ (z >> 31)) >> 32);
}

int adamw_to_bf16(adamw_t *self)
{
    if (self->m16) return 0;
    self->m16 = malloc((self->n ? self->n : 1) * sizeof(uint16_t));
    self->v16 = malloc((self->n ? self->n : 1) * sizeof(uint16_t));
    if (!self->m16 || !self->v16) {
        free(self->m16), free(self->v16);
        self->m16 = self->v16 = NULL;
        log_error("adamw: out of memory for the bf16 state of %zu parameters", self->n);
        return -1;
    }
    for (size_t i = 0; i < self->n; i++) self->m16[i] = to_bf16(self->m[i]), self->v16[i] = to_bf16(self->v[i]);
    free(self->m), free(self->v);
    self->m = self->v = NULL;
    return 0;
}

/* the holder, if any, pulled (when pull) and then dropped; 0, or -1 when
 * the pull failed (the holder is dropped all the same: its copy is not
 * one to trust) */
static int let_go(adamw_t *self, int pull)
{
    if (!self->holder) return 0;
    void *holder = self->holder;
    adamw_holder_fn ask = self->ask;
    int rc = pull ? ask(holder, self, ADAMW_PULL) : 0;
    self->holder = NULL;
    self->ask = NULL;
    ask(holder, self, ADAMW_DROP);
    return rc;
}

int adamw_hold(adamw_t *self, void *holder, adamw_holder_fn fn)
{
    if (self->holder == holder) return 0;
    if (let_go(self, 1) != 0) {
        log_error("adamw: the moments of %zu parameters could not be brought back from where they "
                  "were stepped",
                  self->n);
        return -1;
    }
    self->holder = holder;
    self->ask = fn;
    return 0;
}

void adamw_unhold(adamw_t *self, const void *holder)
{
    if (self->holder != holder) return;
    self->holder = NULL;
    self->ask = NULL;
}

const void *adamw_holder(const adamw_t *self) { return self->holder; }

void adamw_destroy(adamw_t **self_p)
{
    if (!self_p || !*self_p) return;
    adamw_t *self = *self_p;
    let_go(self, 0);
    free(self->m);
    free(self->v);
    free(self->m16);
    free(self->v16);
    free(self->no_decay);
    free(self);
    *self_p = NULL;
}

size_t adamw_size(const adamw_t *self) { return self->n; }

long adamw_steps(const adamw_t *self) { return self->step; }

int adamw_no_decay(adamw_t *self, size_t offset, size_t n)
{
    if (offset > self->n || n > self->n - offset) {
        log_error("adamw: no-decay range [%zu, %zu) is past the %zu parameters", offset, offset + n, self->n);
        return -1;
    }
    size_t at = 0;
    while (at < self->n_no_decay && self->no_decay[at].offset < offset) at++;
    int overlaps_prev = at > 0 && self->no_decay[at - 1].offset + self->no_decay[at - 1].n > offset;
    int overlaps_next = at < self->n_no_decay && offset + n > self->no_decay[at].offset;
    if (overlaps_prev || overlaps_next) {
        log_error("adamw: no-decay range [%zu, %zu) overlaps an earlier one", offset, offset + n);
        return -1;
    }
    range_t *r = realloc(self->no_decay, (self->n_no_decay + 1) * sizeof *r);
    if (!r) {
        log_error("adamw: out of memory for no-decay ranges");
        return -1;
    }
    memmove(r + at + 1, r + at, (self->n_no_decay - at) * sizeof *r);
    r[at] = (range_t){offset, n};
    self->no_decay = r;
    self->n_no_decay++;
    return 0;
}

typedef struct {
    float decay;     // 1 - lr * weight_decay
    float w1;        // 1 - beta1, lerp weight
    float beta2, c2; // beta2, 1 - beta2
    float step_size; // lr / (1 - beta1^t)
    float bc2_sqrt;  // sqrt(1 - beta2^t)
    float eps;
} coef_t;

/* parameters [lo, hi), multiplied by decay first (1 where they take none) */
static void update(adamw_t *self, const coef_t *c, float decay, float *params, const float *grads, size_t lo, size_t hi)
{
    float *m = self->m, *v = self->v;
#pragma omp parallel for simd schedule(static)
    for (size_t i = lo; i < hi; i++) {
        float g = grads[i];
        /* torch's lerp for weights below one half (beta1 above it):
         * start + w (end - start) */
        m[i] = m[i] + c->w1 * (g - m[i]);
        v[i] = v[i] * c->beta2 + c->c2 * (g * g);
        float denom = sqrtf(v[i]) / c->bc2_sqrt + c->eps;
        params[i] = params[i] * decay + -c->step_size * (m[i] / denom);
    }
}

/* update's loop with the moments in bf16: read, stepped in fp32, stored
 * rounded at random */
static void update_bf16(adamw_t *self, const coef_t *c, float decay, float *params, const float *grads, size_t lo,
                        size_t hi)
{
    uint16_t *m16 = self->m16, *v16 = self->v16;
    uint64_t t = (uint64_t)self->step;
#pragma omp parallel for schedule(static)
    for (size_t i = lo; i < hi; i++) {
        float g = grads[i], m = from_bf16(m16[i]), v = from_bf16(v16[i]);
        m = m + c->w1 * (g - m);
        v = v * c->beta2 + c->c2 * (g * g);
        float denom = sqrtf(v) / c->bc2_sqrt + c->eps;
        params[i] = params[i] * decay + -c->step_size * (m / denom);
        m16[i] = to_bf16_stochastic(m, draw(i, t, 0));
        v16[i] = to_bf16_stochastic(v, draw(i, t, 1));
    }
}

float *adamw_moment(adamw_t *self, int which) { return which ? self->v : self->m; }

void adamw_set_steps(adamw_t *self, long steps) { self->step = steps; }

size_t adamw_no_decay_ranges(const adamw_t *self, size_t *pairs, size_t max)
{
    for (size_t r = 0; r < self->n_no_decay && r < max; r++) {
        pairs[2 * r] = self->no_decay[r].offset;
        pairs[2 * r + 1] = self->no_decay[r].n;
    }
    return self->n_no_decay;
}

int adamw_step(adamw_t *self, const adamw_params_t *p, float *params, const float *grads)
{
    if (let_go(self, 1) != 0) {
        log_error("adamw: no step: the moments could not be brought back from where they were stepped");
        return -1;
    }
    self->step++;
    double t = (double)self->step;
    coef_t c = {
        .decay = (float)(1.0 - (double)p->lr * p->weight_decay),
        .w1 = (float)(1.0 - (double)p->beta1),
        .beta2 = p->beta2,
        .c2 = (float)(1.0 - (double)p->beta2),
        .step_size = (float)((double)p->lr / (1.0 - pow(p->beta1, t))),
        .bc2_sqrt = (float)sqrt(1.0 - pow(p->beta2, t)),
        .eps = p->eps,
    };
    size_t at = 0;
    void (*run)(adamw_t *, const coef_t *, float, float *, const float *, size_t, size_t) =
        self->m16 ? update_bf16 : update;
    for (size_t r = 0; r < self->n_no_decay; r++) {
        const range_t *nd = &self->no_decay[r];
        run(self, &c, c.decay, params, grads, at, nd->offset);
        run(self, &c, 1.0f, params, grads, nd->offset, nd->offset + nd->n);
        at = nd->offset + nd->n;
    }
    run(self, &c, c.decay, params, grads, at, self->n);
    return 0;
}

float grad_clip_norm(float *grads, size_t n, float max_norm)
{
    /* float sums over blocks (vectorised), added in double */
    double ss = 0.0;
    size_t nb = (n + 1023) / 1024;
#pragma omp parallel for reduction(+ : ss) schedule(static)
    for (size_t b = 0; b < nb; b++) {
        size_t end = (b + 1) * 1024 < n ? (b + 1) * 1024 : n;
        float sb = 0.0f;
#pragma omp simd reduction(+ : sb)
        for (size_t i = b * 1024; i < end; i++) sb += grads[i] * grads[i];
        ss += sb;
    }
    float norm = (float)sqrt(ss);
    if (max_norm > 0.0f) {
        float coef = (float)((double)max_norm / ((double)norm + 1e-6));
        if (coef < 1.0f) {
#pragma omp parallel for simd schedule(static)
            for (size_t i = 0; i < n; i++) grads[i] *= coef;
        }
    }
    return norm;
}

/* The file is native-endian (every machine we build for is little-endian):
 *   char magic[8]; uint32 version; uint32 zero; uint64 count; int64 step;
 *   uint64 n_ranges; n_ranges x (uint64 offset, uint64 n); float m[count];
 *   float v[count] */
typedef struct {
    char magic[8];
    uint32_t version, zero;
    uint64_t count;
    int64_t step;
    uint64_t n_ranges;
} header_t;

/* a moment into f as n floats (bf16 ones widened: the file is the same
 * whatever the state is kept in); whether all were written */
static bool write_moment(FILE *f, const float *x, const uint16_t *x16, size_t n)
{
    if (!x16) return fwrite(x, sizeof(float), n, f) == n;
    float buf[4096];
    for (size_t i = 0; i < n; i += 4096) {
        size_t k = n - i < 4096 ? n - i : 4096;
        for (size_t j = 0; j < k; j++) buf[j] = from_bf16(x16[i + j]);
        if (fwrite(buf, sizeof(float), k, f) != k) return false;
    }
    return true;
}

int adamw_save(const adamw_t *self, const char *path)
{
    /* a holder's moments are the current ones and the file must have
     * them: copying them home changes where the state lives, not what it
     * is, so self stays const to the caller */
    if (self->holder && self->ask(self->holder, (adamw_t *)self, ADAMW_PULL) != 0) {
        log_error("adamw: cannot write optimizer state %s: its moments could not be brought back", path);
        return -1;
    }
    size_t len = strlen(path);
    char *tmp = malloc(len + 5);
    if (!tmp) {
        log_error("adamw: out of memory saving %s", path);
        return -1;
    }
    memcpy(tmp, path, len);
    memcpy(tmp + len, ".tmp", 5);
    header_t h = {.version = ADAMW_VERSION, .count = self->n, .step = self->step, .n_ranges = self->n_no_decay};
    memcpy(h.magic, ADAMW_MAGIC, 8);
    FILE *f = fopen(tmp, "wb");
    int ok = f != NULL;
    ok = ok && fwrite(&h, sizeof h, 1, f) == 1;
    /* fwrite's buffer must not be NULL even for 0 items */
    ok = ok && (self->n_no_decay == 0 ||
                fwrite(self->no_decay, sizeof *self->no_decay, self->n_no_decay, f) == self->n_no_decay);
    ok = ok && write_moment(f, self->m, self->m16, self->n) && write_moment(f, self->v, self->v16, self->n);
    ok = ok && fflush(f) == 0 && fsync(fileno(f)) == 0;
    int err = errno;
    if (f && fclose(f) != 0 && ok) {
        ok = 0;
        err = errno;
    }
    if (ok && rename(tmp, path) != 0) {
        ok = 0;
        err = errno;
    }
    if (!ok) {
        log_error("adamw: cannot write optimizer state %s: %s", f ? path : tmp, strerror(err));
        unlink(tmp);
    }
    free(tmp);
    return ok ? 0 : -1;
}

adamw_t *adamw_load(const char *path, size_t expect_n)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        log_error("adamw: cannot open optimizer state %s: %s", path, strerror(errno));
        return NULL;
    }
    header_t h;
    adamw_t *self = NULL;
    const char *why = NULL;
    if (fread(&h, sizeof h, 1, f) != 1) why = "truncated header";
    else if (memcmp(h.magic, ADAMW_MAGIC, 8) != 0) why = "not a sapo optimizer state (bad magic)";
    else if (h.version != ADAMW_VERSION) why = "unsupported version";
    else if (h.count != expect_n) {
        log_error("adamw: %s holds state for %llu parameters, the model has %zu", path, (unsigned long long)h.count,
                  expect_n);
        fclose(f);
        return NULL;
    } else if (h.step < 0 || h.n_ranges > h.count) why = "corrupt header (step or range count)";
    else if (!(self = adamw_new(expect_n))) why = "out of memory";
    if (!why) {
        self->step = (long)h.step;
        self->no_decay = malloc((h.n_ranges ? h.n_ranges : 1) * sizeof *self->no_decay);
        if (!self->no_decay) why = "out of memory";
        else if (fread(self->no_decay, sizeof *self->no_decay, h.n_ranges, f) != h.n_ranges)
            why = "truncated no-decay ranges";
        self->n_no_decay = why ? 0 : h.n_ranges;
        /* saved sorted and disjoint; anything else is corruption */
        for (size_t r = 0, end = 0; r < self->n_no_decay && !why; r++) {
            const range_t *nd = &self->no_decay[r];
            if (nd->offset < end || nd->offset > h.count || nd->n > h.count - nd->offset)
                why = "invalid no-decay range";
            end = nd->offset + nd->n;
        }
    }
    if (!why &&
        (fread(self->m, sizeof(float), self->n, f) != self->n || fread(self->v, sizeof(float), self->n, f) != self->n))
        why = "truncated moments";
    if (!why && fgetc(f) != EOF) why = "trailing bytes after the moments";
    fclose(f);
    if (why) {
        log_error("adamw: %s: %s", path, why);
        adamw_destroy(&self);
    }
    return self;
}
