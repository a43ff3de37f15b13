/* One line per event on stderr: "<role>[<node>] <message>". Every process
 * calls log_init once; foreman prefixes the process name and time. */
#ifndef SAPO_LOG_H
#define SAPO_LOG_H

void log_init(const char *role, const char *node);
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* logs the error line and exits with status 1 */
void log_fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* A long step (a warm start: minutes of steps and scoring) is never
 * silent: from now on, after each `seconds` without a line, one saying
 * the time gone since this call and the last line, "<what>: 1 min 40 s,
 * at: <last line>", from a thread of its own, until log_watch_stop. */
void log_watch(const char *what, int seconds);
void log_watch_stop(void);

#endif
