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

/* Strings with no escape take the one-copy path; at every length around a
 * strbuf's growth the text must be the same. */
Test(jsonout, plain_strings_at_every_length)
{
	char s[300];

	memset(s, 'a', sizeof(s));
	for (size_t n = 0; n < sizeof(s); n++)
		assert_like_jansson(json_stringn(s, n));
}

/* A frozen value is written from its text: the same bytes, wherever it
 * stands; an equal value that is another object is written as usual; and
 * when the text was taken, a change made afterwards does not show (the
 * contract: never change a frozen value). */
Test(jsonout, a_frozen_value_is_written_from_its_text)
{
	json_t *f = json_loads("{\"name\":\"sig\",\"items\":[{\"path\":\"p\"}]}", 0, NULL);
	json_t *twin = json_deep_copy(f);
	json_t *outer = json_pack("[O,{s:O},O]", f, "k", f, twin);
	struct strbuf sb;

	cr_assert_eq(jsonout_freeze(f), 0);
	cr_assert_eq(jsonout_freeze(f), 0, "twice: the same entry");
	assert_like_jansson(json_incref(outer));
	/* Changed behind the contract's back: the frozen text wins where f
	 * stands, the twin shows its own change. */
	json_object_set_new(f, "name", json_string("changed"));
	json_object_set_new(twin, "name", json_string("twin"));
	strbuf_init(&sb, 1 << 20);
	jsonout_value(&sb, outer);
	cr_assert_str_eq(sb.buf,
			 "[{\"name\":\"sig\",\"items\":[{\"path\":\"p\"}]},"
			 "{\"k\":{\"name\":\"sig\",\"items\":[{\"path\":\"p\"}]}},"
			 "{\"name\":\"twin\",\"items\":[{\"path\":\"p\"}]}]");
	strbuf_release(&sb);
	json_decref(outer);
	json_decref(twin);
	/* f stays: a frozen value is never freed */
}

Test(jsonout, freezing_more_than_it_keeps_is_refused)
{
	int refused = 0;

	for (int i = 0; i < 20; i++) {
		json_t *v = json_pack("{s:i}", "i", i);

		/* a frozen value is kept for the process: never freed */
		if (jsonout_freeze(v) < 0) {
			refused++;
			json_decref(v);
		}
	}
	cr_assert_eq(refused, 4, "16 are kept");
	cr_assert_eq(jsonout_freeze(NULL), -1);
}
