#include "codec/jsonout.h"

#include "base/text.h"
#include "codec/jsonmem.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* Index of the first byte at or after i that needs an escape, else n. */
static size_t plain_run(const char *s, size_t i, size_t n)
{
#if defined(__SSE2__)
	/* 16 bytes at a time; the signed compare also stops at bytes of 0x80
	 * and above, which the scalar loop below lets through. */
	while (n - i >= 16) {
		const __m128i v = _mm_loadu_si128((const __m128i *)(s + i));
		const unsigned mask = (unsigned)_mm_movemask_epi8(_mm_or_si128(
			_mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')),
				     _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'))),
			_mm_cmplt_epi8(v, _mm_set1_epi8(0x20))));

		if (!mask) {
			i += 16;
			continue;
		}
		i += (size_t)__builtin_ctz(mask);
		if ((unsigned char)s[i] < 0x80)
			return i;
		i++;
	}
#endif
	for (; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c < 0x20 || c == '"' || c == '\\')
			return i;
	}
	return n;
}

void jsonout_string(struct strbuf *sb, const char *s, size_t n)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t run = 0, i = plain_run(s, 0, n);

	/* Most strings (every key, most values) need no escape: one copy. */
	if (i == n && n + 2 < sb->cap - sb->len && !sb->failed &&
	    n + 2 <= sb->max - sb->len) {
		char *d = sb->buf + sb->len;

		d[0] = '"';
		memcpy(d + 1, s, n);
		d[n + 1] = '"';
		d[n + 2] = '\0';
		sb->len += n + 2;
		return;
	}
	strbuf_add(sb, "\"", 1);
	for (; i < n; i = plain_run(s, i + 1, n)) {
		unsigned char c = (unsigned char)s[i];
		char esc[6] = {'\\', 'u', '0', '0', 0, 0};
		const char *e = esc;
		size_t elen = 2;

		strbuf_add(sb, s + run, i - run);
		run = i + 1;
		switch (c) {
		case '"': e = "\\\""; break;
		case '\\': e = "\\\\"; break;
		case '\b': e = "\\b"; break;
		case '\f': e = "\\f"; break;
		case '\n': e = "\\n"; break;
		case '\r': e = "\\r"; break;
		case '\t': e = "\\t"; break;
		default:
			esc[4] = hex[c >> 4];
			esc[5] = hex[c & 15];
			elen = sizeof(esc);
		}
		strbuf_add(sb, e, elen);
	}
	strbuf_add(sb, s + run, n - run);
	strbuf_add(sb, "\"", 1);
}

/* A json_int_t in decimal, as "%lld" writes it. */
static void put_integer(struct strbuf *sb, json_int_t v)
{
	char buf[TEXT_DECIMAL_MAX];
	/* Through uint64_t: the most negative value has no positive. */
	const char *d = text_decimal(buf, v < 0 ? 0 - (uint64_t)v : (uint64_t)v);

	if (v < 0)
		strbuf_add(sb, "-", 1);
	strbuf_add(sb, d, (size_t)(buf + sizeof(buf) - 1 - d));
}

/*
 * Frozen values (jsonout_freeze()): their text, written once.  Entries are
 * added under the lock and published by the count (release); readers take
 * the count (acquire) and read only entries below it, which never change.
 */
#define FROZEN_MAX 16
static struct {
	const json_t *v;
	char *text;
	size_t len;
} frozen[FROZEN_MAX];
static _Atomic size_t n_frozen;
static pthread_mutex_t frozen_mu = PTHREAD_MUTEX_INITIALIZER;

int jsonout_freeze(const json_t *v)
{
	struct strbuf sb;
	size_t n;
	int rc = -1;

	if (!v)
		return -1;
	pthread_mutex_lock(&frozen_mu);
	n = atomic_load_explicit(&n_frozen, memory_order_relaxed);
	for (size_t i = 0; i < n; i++)
		if (frozen[i].v == v)
			rc = 0;
	if (rc < 0 && n < FROZEN_MAX) {
		strbuf_init(&sb, SIZE_MAX / 2);
		jsonout_value(&sb, v);
		if (!strbuf_failed(&sb)) {
			frozen[n].text = strbuf_take(&sb, &frozen[n].len);
			frozen[n].v = v;
			if (frozen[n].text) {
				atomic_store_explicit(&n_frozen, n + 1, memory_order_release);
				rc = 0;
			}
		}
		strbuf_release(&sb);
	}
	pthread_mutex_unlock(&frozen_mu);
	return rc;
}

static bool write_frozen(struct strbuf *sb, const json_t *v)
{
	size_t n = atomic_load_explicit(&n_frozen, memory_order_acquire);

	for (size_t i = 0; i < n; i++)
		if (frozen[i].v == v) {
			strbuf_add(sb, frozen[i].text, frozen[i].len);
			return true;
		}
	return false;
}

void jsonout_value(struct strbuf *sb, const json_t *v)
{
	json_t *x, *o = (json_t *)v; /* jansson's iterators are not const */
	const char *k;
	size_t klen, i;
	bool first = true;

	switch (json_typeof(v)) {
	case JSON_OBJECT:
		if (write_frozen(sb, v))
			return;
		strbuf_add(sb, "{", 1);
		json_object_keylen_foreach(o, k, klen, x)
		{
			if (!first)
				strbuf_add(sb, ",", 1);
			first = false;
			jsonout_string(sb, k, klen);
			strbuf_add(sb, ":", 1);
			jsonout_value(sb, x);
		}
		strbuf_add(sb, "}", 1);
		return;
	case JSON_ARRAY:
		strbuf_add(sb, "[", 1);
		json_array_foreach(o, i, x)
		{
			if (i)
				strbuf_add(sb, ",", 1);
			jsonout_value(sb, x);
		}
		strbuf_add(sb, "]", 1);
		return;
	case JSON_STRING:
		jsonout_string(sb, json_string_value(v), json_string_length(v));
		return;
	case JSON_INTEGER:
		put_integer(sb, json_integer_value(v));
		return;
	case JSON_REAL: {
		/* rare in Kubernetes objects: jansson's own formatting */
		char *t = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);

		if (t)
			strbuf_add(sb, t, strlen(t));
		else
			sb->failed = true;
		jsonmem_free(t);
		return;
	}
	case JSON_TRUE:
		strbuf_add(sb, "true", 4);
		return;
	case JSON_FALSE:
		strbuf_add(sb, "false", 5);
		return;
	case JSON_NULL:
		strbuf_add(sb, "null", 4);
		return;
	}
}
