#include "base/strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void strbuf_init(struct strbuf *sb, size_t max)
{
	sb->buf = NULL;
	sb->len = 0;
	sb->cap = 0;
	sb->max = max;
	sb->failed = false;
}

void strbuf_release(struct strbuf *sb)
{
	free(sb->buf);
	strbuf_init(sb, sb->max);
}

static bool grow(struct strbuf *sb, size_t extra)
{
	size_t need, cap;
	char *nb;

	if (sb->failed)
		return false;
	if (extra > sb->max - sb->len) {
		sb->failed = true;
		return false;
	}
	need = sb->len + extra + 1;
	if (need <= sb->cap)
		return true;
	cap = sb->cap ? sb->cap : 256;
	while (cap < need)
		cap *= 2;
	nb = realloc(sb->buf, cap);
	if (!nb) {
		sb->failed = true;
		return false;
	}
	sb->buf = nb;
	sb->cap = cap;
	return true;
}

void strbuf_add_slow(struct strbuf *sb, const char *s, size_t n)
{
	if (!grow(sb, n))
		return;
	memcpy(sb->buf + sb->len, s, n);
	sb->len += n;
	sb->buf[sb->len] = '\0';
}

void strbuf_addf(struct strbuf *sb, const char *fmt, ...)
{
	va_list ap;
	char small[512];
	int n;

	va_start(ap, fmt);
	n = vsnprintf(small, sizeof(small), fmt, ap);
	va_end(ap);
	if (n < 0) {
		sb->failed = true;
		return;
	}
	if ((size_t)n < sizeof(small)) {
		strbuf_add(sb, small, (size_t)n);
		return;
	}
	if (!grow(sb, (size_t)n))
		return;
	va_start(ap, fmt);
	vsnprintf(sb->buf + sb->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	sb->len += (size_t)n;
}

bool strbuf_failed(const struct strbuf *sb)
{
	return sb->failed;
}

char *strbuf_take(struct strbuf *sb, size_t *len)
{
	char *b = sb->buf;

	if (!b) {
		b = calloc(1, 1);
		if (!b)
			return NULL;
	}
	if (len)
		*len = sb->len;
	sb->buf = NULL;
	sb->len = sb->cap = 0;
	return b;
}
