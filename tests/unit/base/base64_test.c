/* The one base64 codec (base/base64.c).  The encoder is also held to a
 * bit-at-a-time reference through the response encoder (review_test.c). */
#include "base/base64.h"
#include "base/strbuf.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

static char *encode(const void *in, size_t len)
{
	struct strbuf sb;
	size_t n;

	strbuf_init(&sb, 1u << 20);
	base64_encode(&sb, in, len);
	cr_assert_not(strbuf_failed(&sb));
	return strbuf_take(&sb, &n);
}

Test(base64, encodes_rfc4648_vectors)
{
	static const char *const vec[][2] = {
		{"", ""},         {"f", "Zg=="},         {"fo", "Zm8="},
		{"foo", "Zm9v"},  {"foob", "Zm9vYg=="}, {"fooba", "Zm9vYmE="},
		{"foobar", "Zm9vYmFy"},
	};

	for (size_t i = 0; i < sizeof(vec) / sizeof(vec[0]); i++) {
		char *out = encode(vec[i][0], strlen(vec[i][0]));

		cr_assert_str_eq(out ? out : "", vec[i][1]);
		free(out);
	}
}

Test(base64, round_trips_every_byte_and_length)
{
	unsigned char bytes[600];

	for (size_t i = 0; i < sizeof(bytes); i++)
		bytes[i] = (unsigned char)(i * 31 + i / 256);
	for (size_t len = 0; len <= sizeof(bytes); len += len < 10 ? 1 : 53) {
		char *text = encode(bytes, len), *back;
		size_t n;

		cr_assert_eq(base64_decode(text ? text : "", text ? strlen(text) : 0,
					   BASE64_STRICT, &back, &n),
			     0);
		cr_assert_eq(n, len);
		cr_assert(memcmp(back, bytes, len) == 0);
		cr_assert_eq(back[n], '\0');
		free(back);
		free(text);
	}
}

static int decode(const char *in, enum base64_mode mode, char *out, size_t size)
{
	char *buf;
	size_t n;
	int rc = base64_decode(in, strlen(in), mode, &buf, &n);

	if (rc == 0) {
		cr_assert_lt(n, size);
		memcpy(out, buf, n + 1);
		free(buf);
	}
	return rc;
}

Test(base64, strict_takes_only_padded_unbroken_text)
{
	char out[64];

	cr_assert_eq(decode("Zm9vYg==", BASE64_STRICT, out, sizeof(out)), 0);
	cr_assert_str_eq(out, "foob");
	cr_assert_eq(decode("Zm9vYg", BASE64_STRICT, out, sizeof(out)), -1);
	cr_assert_eq(decode("Zm9v\nYg==", BASE64_STRICT, out, sizeof(out)), -1);
	cr_assert_eq(decode("Zm9vY", BASE64_STRICT, out, sizeof(out)), -1);
	cr_assert_eq(decode("Zm=vYg==", BASE64_STRICT, out, sizeof(out)), -1);
	cr_assert_eq(decode("Zg===", BASE64_STRICT, out, sizeof(out)), -1);
	cr_assert_eq(decode("Zm9v!g==", BASE64_STRICT, out, sizeof(out)), -1);
}

Test(base64, lenient_skips_white_space_and_missing_padding)
{
	char out[64];

	cr_assert_eq(decode(" Zm9v\r\n YmFy\t", BASE64_LENIENT, out, sizeof(out)), 0);
	cr_assert_str_eq(out, "foobar");
	cr_assert_eq(decode("Zm9vYg", BASE64_LENIENT, out, sizeof(out)), 0);
	cr_assert_str_eq(out, "foob");
	cr_assert_eq(decode("Zm9vYg==\n", BASE64_LENIENT, out, sizeof(out)), 0);
	cr_assert_str_eq(out, "foob");
	cr_assert_eq(decode("Zm9vY", BASE64_LENIENT, out, sizeof(out)), -1);
	cr_assert_eq(decode("Zm9vYg=", BASE64_LENIENT, out, sizeof(out)), -1);
	cr_assert_eq(decode("Zg==Zg==", BASE64_LENIENT, out, sizeof(out)), -1);
	cr_assert_eq(decode("Zm9v-g", BASE64_LENIENT, out, sizeof(out)), -1);
}

/* RFC 4648, a bit at a time: the reference the table-driven encoder must
 * equal at every length, across its 8-byte steps, its 1 KiB flushes and
 * its tail of 0 to 7 bytes. */
static void reference(const unsigned char *in, size_t len, char *out)
{
	static const char abc[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t o = 0, bits = 0;
	unsigned acc = 0;

	for (size_t i = 0; i < len; i++) {
		acc = (acc << 8) | in[i];
		bits += 8;
		while (bits >= 6) {
			bits -= 6;
			out[o++] = abc[(acc >> bits) & 63];
		}
	}
	if (bits)
		out[o++] = abc[(acc << (6 - bits)) & 63];
	while (o % 4)
		out[o++] = '=';
	out[o] = '\0';
}

Test(base64, equals_the_bit_at_a_time_reference_at_every_length)
{
	static unsigned char bytes[2100];
	static char want[2900];

	for (size_t i = 0; i < sizeof(bytes); i++)
		bytes[i] = (unsigned char)(i * 151 + (i >> 3));
	for (size_t len = 0; len <= sizeof(bytes); len++) {
		char *got = encode(bytes, len);

		reference(bytes, len, want);
		cr_assert_str_eq(got ? got : "", want, "length %zu", len);
		free(got);
	}
}
