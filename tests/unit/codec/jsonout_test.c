/*
 * jsonout: the text must be byte for byte what jansson's compact dump
 * writes, because the patch text is checked against it and the response
 * must stay the same bytes as before.
 */
#include "codec/jsonout.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void assert_like_jansson(json_t *v)
{
	struct strbuf sb;
	char *want = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);

	strbuf_init(&sb, 1 << 20);
	jsonout_value(&sb, v);
	cr_assert_not(strbuf_failed(&sb));
	cr_assert_str_eq(sb.buf, want);
	free(want);
	strbuf_release(&sb);
	json_decref(v);
}

Test(jsonout, every_control_byte_and_escape)
{
	char s[40];
	size_t n = 0;

	for (int c = 1; c < 0x20; c++)
		s[n++] = (char)c;
	s[n++] = '"';
	s[n++] = '\\';
	s[n++] = '/';
	s[n++] = 0x7f;
	assert_like_jansson(json_stringn(s, n));
	assert_like_jansson(json_stringn("a\0b", 3));
}

Test(jsonout, utf8_is_written_as_is)
{
	assert_like_jansson(json_string("\xc3\xa9t\xc3\xa9 \xe2\x82\xac \xf0\x9f\x9a\x80"));
}

Test(jsonout, integers_at_the_limits)
{
	assert_like_jansson(json_integer(0));
	assert_like_jansson(json_integer(-7));
	assert_like_jansson(json_integer(INT64_MAX));
	assert_like_jansson(json_integer(INT64_MIN));
}

Test(jsonout, nested_values_keep_key_order)
{
	assert_like_jansson(json_loads(
		"{\"z\":1,\"a\":[true,false,null,1.5,\"x\",{}],\"m\":{\"k\":[]},"
		"\"e\":0.1}",
		0, NULL));
}

Test(jsonout, a_full_strbuf_fails_and_stays_failed)
{
	struct strbuf sb;

	strbuf_init(&sb, 4);
	jsonout_string(&sb, "abcdef", 6);
	cr_assert(strbuf_failed(&sb));
	jsonout_string(&sb, "", 0);
	cr_assert(strbuf_failed(&sb));
	strbuf_release(&sb);
}
