/*
 * log: one line per event on stderr, safe from any thread (each line is
 * one write(2)).
 *
 * Callers write the fields as logfmt (key=value, values with spaces in
 * double quotes, made safe by log_quote()); the line is that, after
 * "ts=... level=...", or, with log_set_format(LOG_FORMAT_JSON), one JSON
 * object {"ts":...,"level":...,"msg":...,<the fields>} whose values are
 * all strings.  Set the level and format before any thread starts.
 */
#ifndef GPUGATE_LOG_H
#define GPUGATE_LOG_H

#include <stddef.h>

enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR };
enum log_format { LOG_FORMAT_LOGFMT, LOG_FORMAT_JSON };

void log_set_level(enum log_level min);
void log_set_format(enum log_format format);
/* "logfmt" or "json": 0, else -1. */
int log_format_parse(const char *s, enum log_format *out);

/* fmt gives the rest of the line after "ts=... level=...": key=value pairs. */
void log_event(enum log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

struct diag;
/* One event per line of d: msg="MSG" error="LINE". */
void log_diag(enum log_level level, const char *msg, struct diag *d);

/* A string made safe for a quoted logfmt value (quotes, backslashes and
 * control characters escaped), written into out. */
const char *log_quote(const char *s, char *out, unsigned long size);

/*
 * The JSON line of one event (pure; log_event's encoder): ts and level,
 * then the logfmt fields in their order, "msg" first ("" when there is
 * none).  A bare key (no '=') has the value "true".  Strings are escaped
 * as RFC 8259 asks (\", \\, \n, \r, \t, other controls as \u00XX) and
 * bytes that are not UTF-8 become U+FFFD, so the line is always valid
 * JSON, cut at whole fields or characters when size is short.  Ends with
 * "}\n"; returns its length (size >= 64).
 */
size_t log_json_line(char *out, size_t size, const char *ts, const char *level,
		     const char *fields);

#endif
