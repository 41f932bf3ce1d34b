#include "base/diag.h"
#include "base/text.h"

#include <stdio.h>
#include <string.h>

/* Room kept free for the "... and N more" trailer. */
#define TRAILER_ROOM 48

void diag_init(struct diag *d)
{
	d->buf[0] = '\0';
	d->len = 0;
	d->count = 0;
	d->dropped = 0;
}

void diag_vaddf(struct diag *d, const char *fmt, va_list ap)
{
	char line[1024];
	int n;

	if (!d)
		return;
	d->count++;
	n = vsnprintf(line, sizeof(line), fmt, ap);
	if (n < 0) {
		d->dropped++;
		return;
	}
	if ((size_t)n >= sizeof(line))
		n = sizeof(line) - 1; /* a truncated line still says what is wrong */
	while (n > 0 && line[n - 1] == '\n')
		n--;
	line[n] = '\0';
	/* One line of valid UTF-8 whatever was quoted in it: a newline inside
	 * a quoted YAML scalar must not start a fake "FILE:LINE:" line. */
	text_clean(line);
	n = (int)strlen(line);
	if (d->len + (size_t)n + 1 + TRAILER_ROOM >= sizeof(d->buf)) {
		d->dropped++;
		return;
	}
	memcpy(d->buf + d->len, line, (size_t)n);
	d->len += (size_t)n;
	d->buf[d->len++] = '\n';
	d->buf[d->len] = '\0';
}

void diag_addf(struct diag *d, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	diag_vaddf(d, fmt, ap);
	va_end(ap);
}

unsigned diag_count(const struct diag *d)
{
	return d ? d->count : 0;
}

const char *diag_text(struct diag *d)
{
	if (d->dropped) {
		/* Rewritten each call: the trailer is not part of len. */
		snprintf(d->buf + d->len, sizeof(d->buf) - d->len,
			 "... and %u more\n", d->dropped);
	}
	return d->buf;
}

void diag_first(const struct diag *d, char *out, size_t outsz)
{
	size_t n = 0;

	if (outsz == 0)
		return;
	while (d && n < d->len && d->buf[n] != '\n')
		n++;
	if (n >= outsz)
		n = outsz - 1;
	if (n)
		memcpy(out, d->buf, n);
	out[n] = '\0';
}
