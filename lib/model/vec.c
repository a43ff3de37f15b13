/* The model's elementwise loops that need exp: SwiGLU forward and
 * backward, softmax rows and log-sum-exp. expf is a call that stops a
 * loop from vectorizing, so these use model_exp (below), and each is
 * built for AVX-512 and AVX2 too and picked at run time (the project's
 * baseline, x86-64-v2, has 4-wide vectors only). */
#include "model/model_impl.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#define CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

/* e^x to within a few ulp over [-87, 88] (e^-87 below, e^88 above):
 * x = n ln2 + r with |r| <= ln2 / 2 (ln2 in two parts, Cephes's, so n ln2
 * is exact), e^r by its Taylor series to r^7, times 2^n built in the
 * exponent bits. Branch-free, so a loop of it vectorizes (a rounding
 * builtin or a chained ?: did not). */
static inline float model_exp(float x)
{
    x = x < -87.0f ? -87.0f : x;
    x = x > 88.0f ? 88.0f : x;
    /* n rounded to an integer by adding and taking away 1.5 * 2^23 */
    float n = (x * 1.44269504f + 12582912.0f) - 12582912.0f;
    float r = x - n * 0.693359375f;
    r = r + n * 2.12194440e-4f;
    float p = 1.0f / 5040;
    p = p * r + 1.0f / 720;
    p = p * r + 1.0f / 120;
    p = p * r + 1.0f / 24;
    p = p * r + 1.0f / 6;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    int32_t bits = ((int32_t)n + 127) << 23;
    float two_n;
    memcpy(&two_n, &bits, sizeof two_n);
    return p * two_n;
}

float model_exp_scalar(float x) { return model_exp(x); }

CLONES void model_swiglu_loop(float *h, const float *g, const float *u, size_t n)
{
    #pragma omp simd
    for (size_t i = 0; i < n; i++) h[i] = g[i] / (1.0f + model_exp(-g[i])) * u[i];
}

CLONES void model_swiglu_backward_loop(float *dg, float *du, const float *dh, const float *g, const float *u,
                                       size_t n)
{
    #pragma omp simd
    for (size_t i = 0; i < n; i++) {
        float s = 1.0f / (1.0f + model_exp(-g[i]));
        du[i] = dh[i] * g[i] * s;
        dg[i] = dh[i] * u[i] * s * (1.0f + g[i] * (1.0f - s));
    }
}

CLONES void model_softmax_row(float *p, int n)
{
    float mx = -INFINITY, sum = 0;
    #pragma omp simd reduction(max:mx)
    for (int i = 0; i < n; i++) mx = p[i] > mx ? p[i] : mx;
    #pragma omp simd reduction(+:sum)
    for (int i = 0; i < n; i++) {
        p[i] = model_exp(p[i] - mx);
        sum += p[i];
    }
    float inv = 1.0f / sum;
    #pragma omp simd
    for (int i = 0; i < n; i++) p[i] *= inv;
}

CLONES float model_logsumexp(const float *x, int n, float scale)
{
    float mx = -INFINITY, sum = 0;
    #pragma omp simd reduction(max:mx)
    for (int i = 0; i < n; i++) mx = x[i] * scale > mx ? x[i] * scale : mx;
    #pragma omp simd reduction(+:sum)
    for (int i = 0; i < n; i++) sum += model_exp(x[i] * scale - mx);
    return mx + logf(sum);
}

CLONES void model_softmax_grad_row(float *x, int n, float scale, float lse, float d)
{
    #pragma omp simd
    for (int i = 0; i < n; i++) x[i] = -d * model_exp(x[i] * scale - lse) * scale;
}
