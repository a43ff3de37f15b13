/* model_gemm_ws: each thread's buffer for a gemm's packed operands
 * (gemm_f32.c, gemm_bf16.c). */
#include "model/model_impl.h"

#include <pthread.h>
#include <stdlib.h>

/* each thread's buffer, kept across its calls and freed when it exits:
 * a thread-specific key, not a _Thread_local pointer, because a nested
 * OpenMP team (a matmul inside generate.c's parallel region) is made of
 * new threads each time, and their buffers would leak */
typedef struct {
    void *p;
    size_t cap;
} ws_t;

static pthread_key_t ws_key;
static pthread_once_t ws_once = PTHREAD_ONCE_INIT;

static void ws_free(void *v)
{
    ws_t *w = v;
    free(w->p);
    free(w);
}

static void ws_key_make(void)
{
    if (pthread_key_create(&ws_key, ws_free) != 0) abort();
}

void *model_gemm_ws(size_t bytes)
{
    pthread_once(&ws_once, ws_key_make);
    ws_t *w = pthread_getspecific(ws_key);
    if (!w) {
        w = calloc(1, sizeof *w);
        if (!w || pthread_setspecific(ws_key, w) != 0) abort();
    }
    if (w->cap < bytes) {
        free(w->p);
        w->p = aligned_alloc(64, (bytes + 63) / 64 * 64);
        w->cap = w->p ? bytes : 0;
        if (!w->p) abort();
    }
    return w->p;
}
