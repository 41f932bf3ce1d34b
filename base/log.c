#include "base/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static enum log_level min_level = LOG_INFO;

void log_set_level(enum log_level min)
{
	min_level = min;
}

void log_event(enum log_level level, const char *fmt, ...)
{
	static const char *const names[] = {"debug", "info", "warn", "error"};
	char line[2048];
	struct timespec ts;
	struct tm tm;
	va_list ap;
	size_t n;
	int k;

	if (level < min_level)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	k = snprintf(line, sizeof(line),
		     "ts=%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ level=%s ",
		     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
		     tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000, names[level]);
	n = k > 0 ? (size_t)k : 0;
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - n, fmt, ap);
	va_end(ap);
	n = strlen(line);
	if (n >= sizeof(line) - 1)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	/* One write: lines from different threads never interleave. */
	if (write(STDERR_FILENO, line, n) < 0)
		return;
}

const char *log_quote(const char *s, char *out, unsigned long size)
{
	size_t o = 0;

	if (size == 0)
		return "";
	for (; s && *s && o + 3 < size; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\') {
			out[o++] = '\\';
			out[o++] = (char)c;
		} else if (c < 0x20) {
			out[o++] = ' ';
		} else {
			out[o++] = (char)c;
		}
	}
	out[o] = '\0';
	return out;
}
