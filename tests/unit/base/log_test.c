/* The JSON lines of --log-format json (base/log.c, log_json_line). */
#include "base/log.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

static const char TS[] = "2026-12-05T10:00:00.000Z";

static void expect_line(const char *fields, const char *want)
{
	char out[1024];
	size_t n = log_json_line(out, sizeof(out), TS, "info", fields);

	cr_expect_str_eq(out, want, "fields: %s", fields);
	cr_expect_eq(n, strlen(out));
}

Test(log, fields_in_order_msg_first)
{
	expect_line("msg=\"policy reloaded\" file=/etc/gpugate/policy.yaml flavors=2",
		    "{\"ts\":\"2026-12-05T10:00:00.000Z\",\"level\":\"info\","
		    "\"msg\":\"policy reloaded\",\"file\":\"/etc/gpugate/policy.yaml\","
		    "\"flavors\":\"2\"}\n");
	/* msg where it is, first where it goes; none: "" */
	expect_line("kind=pods msg=\"watch error\" code=410",
		    "{\"ts\":\"2026-12-05T10:00:00.000Z\",\"level\":\"info\","
		    "\"msg\":\"watch error\",\"kind\":\"pods\",\"code\":\"410\"}\n");
	expect_line("a=1", "{\"ts\":\"2026-12-05T10:00:00.000Z\",\"level\":\"info\","
			   "\"msg\":\"\",\"a\":\"1\"}\n");
	/* a bare key, an empty value, runs of spaces */
	expect_line("msg=x  dry_run b=  c=\"\"",
		    "{\"ts\":\"2026-12-05T10:00:00.000Z\",\"level\":\"info\","
		    "\"msg\":\"x\",\"dry_run\":\"true\",\"b\":\"\",\"c\":\"\"}\n");
}

Test(log, escapes_what_json_asks)
{
	static const struct {
		const char *fields, *msg;
	} cases[] = {
		/* log_quote()'s \" and \\ are a quote and a backslash */
		{"msg=\"say \\\"hi\\\" to C:\\\\tmp\"", "say \\\"hi\\\" to C:\\\\tmp"},
		/* a raw backslash that escapes nothing stays one */
		{"msg=\"a\\b\"", "a\\\\b"},
		{"msg=a\\b", "a\\\\b"},
		{"msg=\"line\none\"", "line\\none"},
		{"msg=\"tab\there\rcr\"", "tab\\there\\rcr"},
		{"msg=\"bell\x07 esc\x1b del\x7f\"", "bell\\u0007 esc\\u001b del\\u007f"},
		{"msg=caf\xc3\xa9", "caf\xc3\xa9"},
		{"msg=\"\xf0\x9f\x98\x80 ok\"", "\xf0\x9f\x98\x80 ok"},
		/* not UTF-8: U+FFFD, never a raw byte */
		{"msg=a\xffz", "a\\ufffdz"},
		{"msg=\"over\xc0\xaflong\"", "over\\ufffd\\ufffdlong"},
		/* a character cut by the closing quote is not one */
		{"msg=\"cut\xc3\" next=1", "cut\\ufffd"},
		/* no closing quote: the rest is the value */
		{"msg=\"open end", "open end"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char out[512], want[512];

		log_json_line(out, sizeof(out), TS, "warn", cases[i].fields);
		snprintf(want, sizeof(want),
			 "{\"ts\":\"%s\",\"level\":\"warn\",\"msg\":\"%s\"", TS, cases[i].msg);
		cr_expect(strncmp(out, want, strlen(want)) == 0, "case %zu: %s\nwant %s", i,
			  out, want);
	}
}

Test(log, keys_are_escaped_too)
{
	expect_line("msg=m we\"ird=1",
		    "{\"ts\":\"2026-12-05T10:00:00.000Z\",\"level\":\"info\","
		    "\"msg\":\"m\",\"we\\\"ird\":\"1\"}\n");
}

/* Whatever the size, the line is one JSON object (jansson reads it) with
 * ts, level and msg: cut at a field or at a whole character. */
Test(log, short_buffers_still_end_the_object)
{
	const char *fields = "msg=\"\xc3\xa9\xc3\xa9\xc3\xa9 \\\" x\" error=\"a\nb\\\\\" k=v";
	bool whole = false;

	for (size_t size = 64; size < 200; size++) {
		char out[200];
		json_error_t err;
		json_t *obj;
		size_t n;

		memset(out, 'X', sizeof(out));
		n = log_json_line(out, size, TS, "error", fields);
		cr_assert_lt(n, size, "size %zu", size);
		cr_assert_eq(out[n], '\0');
		cr_assert_str_eq(out + n - 2, "}\n", "size %zu: %s", size, out);
		obj = json_loads(out, JSON_REJECT_DUPLICATES, &err);
		cr_assert(json_is_object(obj), "size %zu: %s: %s", size, out, err.text);
		cr_assert(json_is_string(json_object_get(obj, "ts")));
		cr_assert_str_eq(json_string_value(json_object_get(obj, "level")), "error");
		if (json_object_get(obj, "k")) {
			whole = true;
			cr_assert_str_eq(json_string_value(json_object_get(obj, "msg")),
					 "\xc3\xa9\xc3\xa9\xc3\xa9 \" x");
			cr_assert_str_eq(json_string_value(json_object_get(obj, "error")),
					 "a\nb\\");
		}
		json_decref(obj);
	}
	cr_assert(whole, "the whole line fits at last");
}

Test(log, format_names)
{
	enum log_format f = LOG_FORMAT_LOGFMT;

	cr_expect_eq(log_format_parse("json", &f), 0);
	cr_expect_eq(f, LOG_FORMAT_JSON);
	cr_expect_eq(log_format_parse("logfmt", &f), 0);
	cr_expect_eq(f, LOG_FORMAT_LOGFMT);
	cr_expect_eq(log_format_parse("JSON", &f), -1);
	cr_expect_eq(log_format_parse("", &f), -1);
}
