/* One line per event on stderr, prefixed with the process's role and
 * node. */
#include "util/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static const char *log_role = "sapo";
static const char *log_node = "-";

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
