/* One line per event on stderr, prefixed with the process's role and
 * node. */
#include "util/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static const char *log_role = "sapo";
static const char *log_node = "-";

/* the last line and when it was written, for log_watch; mu also guards
 * the watch */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char last[2048];
static struct timespec last_at;
static struct {
    pthread_t thread;
    pthread_cond_t wake;
    bool on, stop;
    const char *what;
    int seconds;
    struct timespec t0;
} watch;

void log_init(const char *role, const char *node)
{
    log_role = role ? role : "sapo";
    log_node = node ? node : "-";
    setvbuf(stderr, NULL, _IOLBF, 0);
}

static void log_line(const char *level, const char *fmt, va_list ap)
{
    char msg[2048];
    vsnprintf(msg, sizeof msg, fmt, ap);
    fprintf(stderr, "%s[%s] %s%s\n", log_role, log_node, level, msg);
    pthread_mutex_lock(&mu);
    snprintf(last, sizeof last, "%s%s", level, msg);
    clock_gettime(CLOCK_MONOTONIC, &last_at);
    pthread_mutex_unlock(&mu);
}

static void *watch_run(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&mu);
    while (!watch.stop) {
        struct timespec now, due = last_at;
        due.tv_sec += watch.seconds;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec > due.tv_sec || (now.tv_sec == due.tv_sec && now.tv_nsec >= due.tv_nsec)) {
            long s = (long)(now.tv_sec - watch.t0.tv_sec);
            if (s >= 60)
                fprintf(stderr, "%s[%s] %s: %ld min %ld s, at: %s\n", log_role, log_node, watch.what, s / 60, s % 60,
                        last);
            else fprintf(stderr, "%s[%s] %s: %ld s, at: %s\n", log_role, log_node, watch.what, s, last);
            last_at = now;
            continue;
        }
        pthread_cond_timedwait(&watch.wake, &mu, &due);
    }
    pthread_mutex_unlock(&mu);
    return NULL;
}

void log_watch(const char *what, int seconds)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_mutex_lock(&mu);
    pthread_cond_init(&watch.wake, &attr);
    watch.what = what, watch.seconds = seconds > 0 ? seconds : 1, watch.stop = false;
    clock_gettime(CLOCK_MONOTONIC, &watch.t0);
    last_at = watch.t0;
    if (!last[0]) snprintf(last, sizeof last, "its start");
    watch.on = pthread_create(&watch.thread, NULL, watch_run, NULL) == 0;
    pthread_mutex_unlock(&mu);
    pthread_condattr_destroy(&attr);
}

void log_watch_stop(void)
{
    pthread_mutex_lock(&mu);
    bool on = watch.on;
    watch.stop = true, watch.on = false;
    if (on) pthread_cond_signal(&watch.wake);
    pthread_mutex_unlock(&mu);
    if (!on) return;
    pthread_join(watch.thread, NULL);
    pthread_cond_destroy(&watch.wake);
}

void log_info(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_line("", fmt, ap);
    va_end(ap);
}

void log_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_line("error: ", fmt, ap);
    va_end(ap);
}

void log_fatal(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_line("error: ", fmt, ap);
    va_end(ap);
    exit(1);
}
