/*
 * strbuf: a growable string with a hard cap.
 *
 * Appends never fail loudly: when memory runs out or the cap is reached the
 * buffer is marked failed and later appends are ignored; the owner checks
 * strbuf_failed() once at the end.
 */
#ifndef GPUGATE_STRBUF_H
#define GPUGATE_STRBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

struct strbuf {
	char *buf;
	size_t len;
	size_t cap;
	size_t max;  /* hard cap on len */
	bool failed;
};

void strbuf_init(struct strbuf *sb, size_t max);
void strbuf_release(struct strbuf *sb);
void strbuf_addf(struct strbuf *sb, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void strbuf_add_slow(struct strbuf *sb, const char *s, size_t n);

/* Appends n bytes.  Inline: the JSON writers call it for every token. */
static inline void strbuf_add(struct strbuf *sb, const char *s, size_t n)
{
	if (n < sb->cap - sb->len && !sb->failed && n <= sb->max - sb->len) {
		memcpy(sb->buf + sb->len, s, n);
		sb->len += n;
		sb->buf[sb->len] = '\0';
		return;
	}
	strbuf_add_slow(sb, s, n);
}
bool strbuf_failed(const struct strbuf *sb);
/* Hands the NUL-terminated buffer to the caller; sb is left empty. */
char *strbuf_take(struct strbuf *sb, size_t *len);

#endif
