#include "base/text.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* Length of the valid UTF-8 sequence at s (1..4), 0 if invalid or cut. */
static size_t seq_len(const unsigned char *s)
{
	size_t n;
	unsigned min;
	unsigned cp;

	if (s[0] < 0x80)
		return 1;
	if ((s[0] & 0xe0) == 0xc0) {
		n = 2;
		min = 0x80;
		cp = s[0] & 0x1f;
	} else if ((s[0] & 0xf0) == 0xe0) {
		n = 3;
		min = 0x800;
		cp = s[0] & 0x0f;
	} else if ((s[0] & 0xf8) == 0xf0) {
		n = 4;
		min = 0x10000;
		cp = s[0] & 0x07;
	} else {
		return 0;
	}
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0; /* also catches the terminating NUL */
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

size_t text_utf8_len(const char *s)
{
	return seq_len((const unsigned char *)s);
}

/* The length a lead byte announces: 1..4, or 0 for a stray byte. */
static size_t announced(unsigned char c)
{
	if (c < 0x80)
		return 1;
	if ((c & 0xe0) == 0xc0)
		return 2;
	if ((c & 0xf0) == 0xe0)
		return 3;
	if ((c & 0xf8) == 0xf0)
		return 4;
	return 0;
}

void text_clean(char *s)
{
	unsigned char *p = (unsigned char *)s;

	while (*p) {
		size_t n = seq_len(p), want;

		if (n == 0) {
			/* A character cut by the end of the string is dropped;
			 * anything else invalid becomes '?'. */
			want = announced(*p);
			for (size_t i = 1; i < want; i++) {
				if (p[i] == '\0') {
					*p = '\0';
					return;
				}
				if ((p[i] & 0xc0) != 0x80)
					break;
			}
			*p++ = '?';
			continue;
		}
		if (n == 1 && *p < 0x20)
			*p = ' ';
		p += n;
	}
}

void text_clip(char *s, size_t max)
{
	size_t len = strlen(s), cut;

	if (len <= max || max < 3)
		return;
	cut = max - 3;
	/* Back up to the start of a character. */
	while (cut > 0 && ((unsigned char)s[cut] & 0xc0) == 0x80)
		cut--;
	memcpy(s + cut, "...", 4);
}

const char *text_decimal(char buf[TEXT_DECIMAL_MAX], uint64_t v)
{
	char *e = buf + TEXT_DECIMAL_MAX - 1;

	*e = '\0';
	do {
		*--e = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	return e;
}

const char *text_int(char buf[TEXT_DECIMAL_MAX + 1], int64_t v)
{
	/* The magnitude of INT64_MIN does not fit int64_t: go unsigned. */
	uint64_t m = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
	char *s = (char *)text_decimal(buf + 1, m);

	if (v < 0)
		*--s = '-';
	return s;
}

void text_cat(char *buf, size_t size, ...)
{
	size_t n = 0;
	const char *s;
	va_list ap;

	if (!size)
		return;
	va_start(ap, size);
	while ((s = va_arg(ap, const char *)) != NULL) {
		size_t k = strlen(s);

		if (k > size - 1 - n)
			k = size - 1 - n;
		memcpy(buf + n, s, k);
		n += k;
	}
	va_end(ap);
	buf[n] = '\0';
}

int64_t text_unix_time(const char *s)
{
	struct tm tm = {0};
	const char *end = s ? strptime(s, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;

	return end ? (int64_t)timegm(&tm) : 0;
}

size_t text_distance(const char *a, const char *b, size_t max)
{
	size_t row[2][TEXT_DISTANCE_MAX_LEN + 1];
	size_t la = strlen(a), lb = strlen(b);

	if (strcmp(a, b) == 0)
		return 0;
	if (la > TEXT_DISTANCE_MAX_LEN || lb > TEXT_DISTANCE_MAX_LEN ||
	    (la > lb ? la - lb : lb - la) > max)
		return max + 1;
	for (size_t j = 0; j <= lb; j++)
		row[0][j] = j;
	for (size_t i = 1; i <= la; i++) {
		size_t *prev = row[(i - 1) & 1], *cur = row[i & 1];
		size_t best;

		cur[0] = i;
		best = cur[0];
		for (size_t j = 1; j <= lb; j++) {
			size_t sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
			size_t del = prev[j] + 1, ins = cur[j - 1] + 1;

			cur[j] = sub < del ? sub : del;
			if (ins < cur[j])
				cur[j] = ins;
			if (cur[j] < best)
				best = cur[j];
		}
		if (best > max) /* every later row is at least this far */
			return max + 1;
	}
	return row[la & 1][lb] > max ? max + 1 : row[la & 1][lb];
}

void text_nearest_consider(struct text_nearest *n, const char *name,
			   const char *known)
{
	size_t edits;

	if (!name || !known || !known[0] || strcmp(name, known) == 0)
		return;
	edits = strcasecmp(name, known) == 0
			? 0
			: text_distance(name, known, TEXT_NEAREST_MAX_EDITS);
	if (edits > TEXT_NEAREST_MAX_EDITS || (edits && edits >= strlen(name)))
		return;
	if (!n->name || edits < n->edits) {
		n->name = known;
		n->edits = edits;
	}
}

const char *text_nearest_hint(const struct text_nearest *n, const char *prefix,
			      char *buf, size_t size)
{
	int len;

	buf[0] = '\0';
	if (!n->name)
		return buf;
	len = snprintf(buf, size, " (did you mean \"%s%s\"?)", prefix, n->name);
	if (len < 0 || (size_t)len >= size)
		buf[0] = '\0';
	return buf;
}

/* A decimal of at most 18 digits at *s, advanced past it. */
static bool read_num(const char **s, int64_t *out)
{
	int64_t v = 0;
	int digits = 0;

	while (**s >= '0' && **s <= '9') {
		if (++digits > 18)
			return false;
		v = v * 10 + (**s - '0');
		(*s)++;
	}
	*out = v;
	return digits > 0;
}

int text_record_parse(const char *text, const char names[3], int64_t v[3],
		      const char **tail)
{
	const char *s = text;

	if (!s)
		return -1;
	for (int i = 0; i < 3; i++) {
		if (s[0] != names[i] || s[1] != '=')
			return -1;
		s += 2;
		if (!read_num(&s, &v[i]) || *s++ != ' ')
			return -1;
	}
	if (s[0] != 't' || s[1] != '=' || !s[2] || strchr(s + 2, '\n'))
		return -1;
	*tail = s + 2;
	return 0;
}

void text_duration(int64_t s, char *buf, size_t size)
{
	static const struct {
		int64_t secs;
		char unit;
	} units[] = {{86400, 'd'}, {3600, 'h'}, {60, 'm'}, {1, 's'}};

	if (s < 0)
		s = 0;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		int64_t hi = s / units[i].secs, lo;

		if (!hi && units[i].secs > 1)
			continue;
		if (units[i].secs == 1) {
			snprintf(buf, size, "%llds", (long long)s);
			return;
		}
		lo = (s % units[i].secs) / units[i + 1].secs;
		if (lo)
			snprintf(buf, size, "%lld%c%lld%c", (long long)hi, units[i].unit,
				 (long long)lo, units[i + 1].unit);
		else
			snprintf(buf, size, "%lld%c", (long long)hi, units[i].unit);
		return;
	}
}
