/* The monotonic clock in milliseconds, for deadlines and ages. */
#ifndef SAPO_CLOCK_H
#define SAPO_CLOCK_H

#include <time.h>

static inline long long clock_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#endif
