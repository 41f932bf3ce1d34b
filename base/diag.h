/*
 * diag: a bounded sink for human-readable diagnostics.
 *
 * A fallible function returns 0 or a negative code and takes a `struct diag *`
 * last; the code drives control flow, the sink carries the text.  The sink
 * lives in the caller's storage, never allocates, and keeps whole lines (each
 * made one line of valid UTF-8: quoted input cannot break it): when
 * it is full, later lines are counted but not stored, and diag_text() ends
 * with "... and N more".  A NULL sink is allowed and discards everything.
 */
#ifndef GPUGATE_DIAG_H
#define GPUGATE_DIAG_H

#include <stdarg.h>
#include <stddef.h>

#define DIAG_CAP 16384

struct diag {
	char buf[DIAG_CAP]; /* lines separated by '\n', NUL-terminated */
	size_t len;         /* bytes used in buf, without the NUL */
	unsigned count;     /* lines added, stored or not */
	unsigned dropped;   /* lines that did not fit */
};

void diag_init(struct diag *d);

/* Adds one line (a trailing newline in fmt is not needed). */
void diag_addf(struct diag *d, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void diag_vaddf(struct diag *d, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));

/* Number of lines added so far (stored or dropped). */
unsigned diag_count(const struct diag *d);

/*
 * The stored lines, newline-separated, plus a last line "... and N more"
 * when some were dropped.  Valid until the next call on d.
 */
const char *diag_text(struct diag *d);

/* The first line only, without a newline (empty string when none). */
void diag_first(const struct diag *d, char *out, size_t outsz);

#endif
