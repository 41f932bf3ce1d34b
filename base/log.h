/*
 * log: one line per event on stderr, in logfmt (key=value), safe from any
 * thread (each line is one write(2)).
 */
#ifndef GPUGATE_LOG_H
#define GPUGATE_LOG_H

enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR };

void log_set_level(enum log_level min);
/* fmt gives the rest of the line after "ts=... level=...": key=value pairs. */
void log_event(enum log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* A string made safe for a quoted logfmt value (quotes, backslashes and
 * control characters escaped), written into out. */
const char *log_quote(const char *s, char *out, unsigned long size);

#endif
