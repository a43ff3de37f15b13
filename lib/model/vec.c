/* The model's elementwise loops: those that need exp (SwiGLU forward and
 * backward, softmax rows and log-sum-exp), then the row kernels of the
 * other layers. expf is a call that stops a loop from vectorizing, so
 * these use util/fastexp.h. Each is built for AVX-512 and AVX2 too and
 * picked at run time (the project's baseline, x86-64-v2, has 4-wide
 * vectors only). */
#include "model/model_impl.h"

#include "util/fastexp.h"

#include <math.h>

#define CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

CLONES void model_swiglu_loop(float *h, const float *g, const float *u, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) h[i] = g[i] / (1.0f + fastexp(-g[i])) * u[i];
}

CLONES void model_swiglu_backward_loop(float *dg, float *du, const float *dh, const float *g, const float *u, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        float s = 1.0f / (1.0f + fastexp(-g[i]));
        du[i] = dh[i] * g[i] * s;
        dg[i] = dh[i] * u[i] * s * (1.0f + g[i] * (1.0f - s));
    }
}

CLONES void model_softmax_row(float *p, int n, float scale)
{
    float mx = -INFINITY, sum = 0;
#pragma omp simd reduction(max : mx)
    for (int i = 0; i < n; i++) mx = p[i] > mx ? p[i] : mx;
#pragma omp simd reduction(+ : sum)
    for (int i = 0; i < n; i++) {
        p[i] = fastexp((p[i] - mx) * scale);
        sum += p[i];
    }
    float inv = 1.0f / sum;
#pragma omp simd
    for (int i = 0; i < n; i++) p[i] *= inv;
}

CLONES float model_logsumexp(const float *x, int n, float scale)
{
    float mx = -INFINITY, sum = 0;
#pragma omp simd reduction(max : mx)
    for (int i = 0; i < n; i++) mx = x[i] * scale > mx ? x[i] * scale : mx;
#pragma omp simd reduction(+ : sum)
    for (int i = 0; i < n; i++) sum += fastexp(x[i] * scale - mx);
    return mx + logf(sum);
}

CLONES void model_softmax_grad_row(float *x, int n, float scale, float lse, float d)
{
#pragma omp simd
    for (int i = 0; i < n; i++) x[i] = -d * fastexp(x[i] * scale - lse) * scale;
}

/* The row kernels of forward.c's and forward_bf16.c's loops: built here
 * for the wider vectors too (those files are built for the baseline
 * alone) */

CLONES float model_rms_inv(const float *restrict x, int n, float eps)
{
    float ss = 0;
#pragma omp simd reduction(+ : ss)
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    return 1.0f / sqrtf(ss / n + eps);
}

CLONES void model_scale_mul(float *restrict o, const float *restrict x, const float *restrict w, float r, int n)
{
#pragma omp simd
    for (int i = 0; i < n; i++) o[i] = w[i] * (x[i] * r);
}

CLONES void model_rmsnorm_backward_row(float *restrict dx, const float *restrict d, const float *restrict x,
                                       const float *restrict w, float r, int n, bool acc)
{
    float s = 0;
#pragma omp simd reduction(+ : s)
    for (int i = 0; i < n; i++) s += d[i] * w[i] * x[i];
    float k = r * r * r * s / n;
    if (acc) {
#pragma omp simd
        for (int i = 0; i < n; i++) dx[i] += r * d[i] * w[i] - k * x[i];
    } else {
#pragma omp simd
        for (int i = 0; i < n; i++) dx[i] = r * d[i] * w[i] - k * x[i];
    }
}

CLONES void model_rmsnorm_weight_cols(float *restrict pw, const float *restrict d, const float *restrict x,
                                      const float *restrict r, int rows, int n, size_t ld)
{
    for (int k = 0; k < rows; k++) {
        const float *dk = d + (size_t)k * ld, *xk = x + (size_t)k * ld;
#pragma omp simd
        for (int i = 0; i < n; i++) pw[i] += dk[i] * xk[i] * r[k];
    }
}

CLONES void model_rope_row(float *restrict x, const float *restrict c, const float *restrict s, int H, int HD,
                           float dir)
{
    int half = HD / 2;
    for (int h = 0; h < H; h++) {
        float *restrict a = x + (size_t)h * HD, *restrict b = a + half;
#pragma omp simd
        for (int i = 0; i < half; i++) {
            float ai = a[i], bi = b[i], si = dir * s[i];
            a[i] = ai * c[i] - bi * si;
            b[i] = bi * c[i] + ai * si;
        }
    }
}

CLONES void model_add_row(float *restrict dst, const float *restrict src, int n)
{
#pragma omp simd
    for (int i = 0; i < n; i++) dst[i] += src[i];
}

/* 64 columns at a time, their sums in a small buffer (in L1) down the
 * rows, rather than each row's pass reading and writing all of dst */
CLONES void model_add_cols(float *restrict dst, const float *restrict src, int rows, int n, size_t ld)
{
    for (int j0 = 0; j0 < n; j0 += 64) {
        int len = n - j0 < 64 ? n - j0 : 64;
        float acc[64];
        for (int j = 0; j < len; j++) acc[j] = dst[j0 + j];
        for (int r = 0; r < rows; r++) {
            const float *row = src + (size_t)r * ld + j0;
#pragma omp simd
            for (int j = 0; j < len; j++) acc[j] += row[j];
        }
        for (int j = 0; j < len; j++) dst[j0 + j] = acc[j];
    }
}

CLONES void model_softmax_backward_row(float *restrict dr, const float *restrict p, int n, int T, float scale)
{
    float sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int i = 0; i < n; i++) sum += p[i] * dr[i];
#pragma omp simd
    for (int i = 0; i < n; i++) dr[i] = p[i] * (dr[i] - sum) * scale;
    for (int i = n; i < T; i++) dr[i] = 0;
}
