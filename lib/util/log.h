/* One line per event on stderr: "<role>[<node>] <message>". Every process
 * calls log_init once; foreman prefixes the process name and time. */
#ifndef SAPO_LOG_H
#define SAPO_LOG_H

void log_init(const char *role, const char *node);
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* logs the error line and exits with status 1 */
void log_fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

#endif
