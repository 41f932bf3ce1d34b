#include "base/base64.h"

#include "base/strbuf.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char alphabet[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* The two characters of every 12-bit value: two lookups per 3 bytes. */
static char pairs[4096][2];
static pthread_once_t pairs_once = PTHREAD_ONCE_INIT;

static void pairs_fill(void)
{
	for (unsigned v = 0; v < 4096; v++) {
		pairs[v][0] = alphabet[v >> 6];
		pairs[v][1] = alphabet[v & 63];
	}
}

/* The 8 bytes at p as a big-endian number. */
static inline uint64_t load_be64(const unsigned char *p)
{
	uint64_t w;

	memcpy(&w, p, sizeof(w));
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	w = __builtin_bswap64(w);
#endif
	return w;
}

void base64_encode(struct strbuf *sb, const void *in, size_t len)
{
	const unsigned char *u = in;
	/* One strbuf_add per 1 KiB (a multiple of 8), and room after it for
	 * the tail: two groups of 4 and one padded group. */
	char out[1024 + 12];
	size_t o = 0, i = 0;

	pthread_once(&pairs_once, pairs_fill);
	/* Six bytes a step, from one 8-byte load (so while 8 remain): four
	 * 12-bit values, eight characters. */
	for (; len - i >= 8; i += 6) {
		uint64_t w = load_be64(u + i);

		memcpy(out + o, pairs[(w >> 52) & 0xfff], 2);
		memcpy(out + o + 2, pairs[(w >> 40) & 0xfff], 2);
		memcpy(out + o + 4, pairs[(w >> 28) & 0xfff], 2);
		memcpy(out + o + 6, pairs[(w >> 16) & 0xfff], 2);
		o += 8;
		if (o == 1024) {
			strbuf_add(sb, out, o);
			o = 0;
		}
	}
	/* Then whole groups of 3 bytes: at most two. */
	for (; len - i >= 3; i += 3) {
		unsigned v = (unsigned)u[i] << 16 | (unsigned)u[i + 1] << 8 | u[i + 2];

		memcpy(out + o, pairs[v >> 12], 2);
		memcpy(out + o + 2, pairs[v & 0xfff], 2);
		o += 4;
	}
	/* The last 1 or 2 bytes, padded with '='. */
	if (i < len) {
		unsigned v = (unsigned)u[i] << 16;

		if (i + 1 < len)
			v |= (unsigned)u[i + 1] << 8;
		out[o++] = alphabet[v >> 18];
		out[o++] = alphabet[(v >> 12) & 63];
		out[o++] = i + 1 < len ? alphabet[(v >> 6) & 63] : '=';
		out[o++] = '=';
	}
	strbuf_add(sb, out, o);
}

static int value_of(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

static bool is_space(unsigned char c)
{
	return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

int base64_decode(const char *in, size_t n, enum base64_mode mode, char **out,
		  size_t *outlen)
{
	size_t o = 0, digits = 0, pad = 0;
	unsigned acc = 0;
	int bits = 0;
	char *buf;

	*out = NULL;
	*outlen = 0;
	/* Check first (nothing is allocated for text that is not base64). */
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)in[i];

		if (mode == BASE64_LENIENT && is_space(c))
			continue;
		if (c == '=') {
			pad++;
			continue;
		}
		if (value_of(c) < 0 || pad)
			return -1; /* not the alphabet, or data after '=' */
		digits++;
	}
	if (digits % 4 == 1 || pad > 2)
		return -1;
	if (pad && (digits + pad) % 4)
		return -1;
	if (mode == BASE64_STRICT && ((digits + pad) % 4 || n != digits + pad))
		return -1;
	buf = malloc(digits / 4 * 3 + 3);
	if (!buf)
		return -2;
	for (size_t i = 0; i < n; i++) {
		int v = value_of((unsigned char)in[i]);

		if (v < 0)
			continue; /* white space or padding, checked above */
		acc = (acc << 6) | (unsigned)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			buf[o++] = (char)((acc >> bits) & 0xff);
		}
	}
	buf[o] = '\0';
	*out = buf;
	*outlen = o;
	return 0;
}
