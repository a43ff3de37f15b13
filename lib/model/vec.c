/* The model's elementwise loops that need exp: SwiGLU forward and
 * backward, softmax rows and log-sum-exp. expf is a call that stops a
 * loop from vectorizing, so these use util/fastexp.h, and each is
 * built for AVX-512 and AVX2 too and picked at run time (the project's
 * baseline, x86-64-v2, has 4-wide vectors only). */
#include "model/model_impl.h"

#include "util/fastexp.h"

#include <math.h>

#define CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

CLONES void model_swiglu_loop(float *h, const float *g, const float *u, size_t n)
{
    #pragma omp simd
    for (size_t i = 0; i < n; i++) h[i] = g[i] / (1.0f + fastexp(-g[i])) * u[i];
}

CLONES void model_swiglu_backward_loop(float *dg, float *du, const float *dh, const float *g, const float *u,
                                       size_t n)
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
    #pragma omp simd reduction(max:mx)
    for (int i = 0; i < n; i++) mx = p[i] > mx ? p[i] : mx;
    #pragma omp simd reduction(+:sum)
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
    #pragma omp simd reduction(max:mx)
    for (int i = 0; i < n; i++) mx = x[i] * scale > mx ? x[i] * scale : mx;
    #pragma omp simd reduction(+:sum)
    for (int i = 0; i < n; i++) sum += fastexp(x[i] * scale - mx);
    return mx + logf(sum);
}

CLONES void model_softmax_grad_row(float *x, int n, float scale, float lse, float d)
{
    #pragma omp simd
    for (int i = 0; i < n; i++) x[i] = -d * fastexp(x[i] * scale - lse) * scale;
}
