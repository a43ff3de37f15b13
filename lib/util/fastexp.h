/* e^x without libm, within 2 ulp, for loops that must vectorize: expf is
 * a call, and GCC keeps a loop with a call scalar. x = k ln2 + r with
 * |r| <= ln2 / 2 (ln2 in two parts, so k ln2 is exact), e^r by its
 * degree-7 Taylor polynomial, 2^k through the exponent bits; k is rounded
 * by adding and taking away 1.5 * 2^23. Branch-free throughout. */
#ifndef SAPO_UTIL_FASTEXP_H
#define SAPO_UTIL_FASTEXP_H

#include <stdint.h>
#include <string.h>

/* for x in [-87, 88] */
static inline float fastexp_core(float x)
{
    const float log2e = 1.44269504f, ln2_hi = 0.693145751953125f, ln2_lo = 1.42860677e-06f;
    float k = (x * log2e + 12582912.0f) - 12582912.0f;
    float r = (x - k * ln2_hi) - k * ln2_lo;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    int32_t bits = ((int32_t)k + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

/* any x: below -87 gives e^-87, above 88 e^88 */
static inline float fastexp(float x)
{
    x = x < -87.0f ? -87.0f : x;
    x = x > 88.0f ? 88.0f : x;
    return fastexp_core(x);
}

/* x <= 0: below -87 (under FLT_MIN) gives 0, and so do -inf and NaN, so a
 * masked logit is never drawn. The clamp compares bit patterns (for x <= 0
 * a larger magnitude is a larger unsigned pattern), not floats. */
static inline float fastexp_nonpos(float x)
{
    const uint32_t minus87 = 0xC2AE0000u;
    uint32_t in, out;
    memcpy(&in, &x, sizeof in);
    /* all ones when x < -87, or not a number (no x > 0 comes in) */
    uint32_t under = -(uint32_t)((in > minus87) | (in - 1u < 0x7fffffffu));
    uint32_t clamped = (in & ~under) | (minus87 & under);
    float xc;
    memcpy(&xc, &clamped, sizeof xc);
    float y = fastexp_core(xc);
    memcpy(&out, &y, sizeof out);
    out &= ~under;
    memcpy(&y, &out, sizeof y);
    return y;
}

#endif
