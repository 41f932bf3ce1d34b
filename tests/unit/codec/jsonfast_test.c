/*
 * The strict JSON reader (codec/jsonfast.c): what it builds equals what
 * jansson builds, and every refusal is one located line.  The differential
 * fuzz harness (tests/fuzz/json_fuzz.c) covers the rest.
 */
#include "codec/jsonfast.h"

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static json_t *both(const char *text, size_t len)
{
	json_error_t e;
	char err[256];
	json_t *a = json_loadb(text, len,
			       JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL | JSON_DECODE_ANY,
			       &e);
	json_t *b = jsonfast_parse(text, len, err, sizeof(err));

	cr_assert_not_null(a, "jansson refused %s: %s", text, e.text);
	cr_assert_not_null(b, "jsonfast refused %s: %s", text, err);
	cr_assert(json_equal(a, b), "values differ for %s", text);
	json_decref(a);
	return b;
}

Test(jsonfast, reads_what_jansson_reads)
{
	static const char *const docs[] = {
		"{}", "[]", "0", "-0", "1.5", "-2e-3", "1E+400000000000000000000"
		+ 0 * 0, "\"\"", "true", "false", "null",
		"{\"a\":[1,2,{\"b\":null}],\"c\":\"d\"}",
		" \t\r\n{ \"k\" : [ 1 , 2 ] } \n",
		"\"caf\\u00e9 \\ud83d\\ude00 \\\" \\\\ \\/ \\b\\f\\n\\r\\t\"",
		"\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"",
		"9223372036854775807", "-9223372036854775808",
		"{\"x\\u0041\":1}", "[\"a\\u0000b\"]",
	};

	for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
		if (i == 6)
			continue; /* real overflow: refused by both, below */
		json_decref(both(docs[i], strlen(docs[i])));
	}
}

Test(jsonfast, keeps_nul_inside_strings)
{
	json_t *v = both("[\"a\\u0000b\"]", 12);

	cr_assert_eq(json_string_length(json_array_get(v, 0)), 3);
	cr_assert_eq(memcmp(json_string_value(json_array_get(v, 0)), "a\0b", 3), 0);
	json_decref(v);
}

Test(jsonfast, a_large_document)
{
	size_t cap = 1 << 22, n = 0;
	char *text = malloc(cap);

	n += (size_t)snprintf(text + n, cap - n, "{\"items\":[");
	for (int i = 0; i < 20000; i++)
		n += (size_t)snprintf(text + n, cap - n,
				      "%s{\"name\":\"pod-%d\",\"labels\":{\"a/b\":\"c\"},"
				      "\"n\":%d,\"r\":%d.25}",
				      i ? "," : "", i, i, i);
	n += (size_t)snprintf(text + n, cap - n, "]}");
	json_decref(both(text, n));
	free(text);
}

struct bad {
	char name[40];
	char text[64];
	char error[120];
};

static struct bad bads[] = {
	{"empty", "", "no JSON value (line 1, column 1)"},
	{"blank", "  \n ", "no JSON value (line 2, column 2)"},
	{"truncated", "{\"apiVersion\":", "unexpected end of input (line 1, column 15)"},
	{"duplicate", "{\"uid\":1,\"uid\":2}", "duplicate object key \"uid\" (line 1, column 10)"},
	{"trailing", "{} x", "end of input expected (line 1, column 4)"},
	{"comma", "[1,]", "unexpected character ']' (line 1, column 4)"},
	{"missing colon", "{\"a\" 1}", "':' expected (line 1, column 6)"},
	{"bare key", "{a:1}", "string or '}' expected (line 1, column 2)"},
	{"leading zero", "01", "invalid number: leading zero (line 1, column 1)"},
	{"dot", "1.", "invalid number: digit expected after '.' (line 1, column 1)"},
	{"exponent", "1e", "invalid number: digit expected in the exponent (line 1, column 1)"},
	{"big", "9223372036854775808", "too big integer (line 1, column 1)"},
	{"big negative", "-9223372036854775809", "too big negative integer (line 1, column 1)"},
	{"real overflow", "1e400", "real number overflow (line 1, column 1)"},
	{"control", "\"a\tb\"", "control character 0x09 in a string (line 1, column 3)"},
	{"bad utf8", "\"\xff\"", "invalid UTF-8 byte 0xff (line 1, column 2)"},
	{"overlong", "\"\xc0\xaf\"", "invalid UTF-8 byte 0xc0 (line 1, column 2)"},
	{"surrogate bytes", "\"\xed\xa0\x80\"", "invalid UTF-8 byte 0xed (line 1, column 2)"},
	{"bad escape", "\"\\x\"", "invalid escape \\x (line 1, column 2)"},
	{"short u", "\"\\u12\"", "invalid \\u escape (line 1, column 2)"},
	{"lone high", "\"\\ud800x\"", "invalid Unicode escape: lone high surrogate (line 1, column 8)"},
	{"lone low", "\"\\udc00\"", "invalid Unicode escape: lone low surrogate (line 1, column 8)"},
	{"nul key", "{\"\\u0000\":1}", "NUL character in an object key (line 1, column 10)"},
	{"literal", "tru", "invalid literal (line 1, column 1)"},
	{"unterminated", "\"abc", "unterminated string (line 1, column 5)"},
	{"control byte after", "[1]\x01", "end of input expected (line 1, column 4)"},
	{"control byte", "\x01", "unexpected character '?' (line 1, column 1)"},
};

ParameterizedTestParameters(jsonfast, refuses)
{
	return cr_make_param_array(struct bad, bads, sizeof(bads) / sizeof(bads[0]));
}

ParameterizedTest(struct bad *c, jsonfast, refuses)
{
	json_error_t e;
	char err[256] = "";
	json_t *v = jsonfast_parse(c->text, strlen(c->text), err, sizeof(err));
	json_t *j = json_loadb(c->text, strlen(c->text),
			       JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL | JSON_DECODE_ANY,
			       &e);

	cr_assert_null(v, "case %s accepted", c->name);
	cr_assert_null(j, "case %s: jansson accepts it", c->name);
	cr_assert_str_eq(err, c->error, "case %s", c->name);
}

Test(jsonfast, nesting_is_bounded)
{
	size_t n = JSONFAST_MAX_DEPTH + 1;
	char *deep = malloc(2 * n + 1);
	char err[256];

	memset(deep, '[', n);
	memset(deep + n, ']', n);
	deep[2 * n] = '\0';
	cr_assert_null(jsonfast_parse(deep, 2 * n, err, sizeof(err)));
	cr_assert_str_eq(err, "maximum nesting depth 2048 reached (line 1, column 2049)");
	/* 2048 levels are fine, as with jansson */
	json_decref(both(deep + 1, 2 * n - 2));
	free(deep);
}

static struct jsonfast_skip *skip_set(const char *const *paths)
{
	char err[256] = "";
	struct jsonfast_skip *sk = jsonfast_skip_new(paths, err, sizeof(err));

	cr_assert_not_null(sk, "%s", err);
	return sk;
}

static json_t *at(json_t *v, const char *path)
{
	char key[64];

	while (v && *path) {
		size_t n = strcspn(path, "/");

		snprintf(key, sizeof(key), "%.*s", (int)n, path);
		v = json_is_array(v) ? json_array_get(v, (size_t)atoi(key))
				     : json_object_get(v, key);
		path += n + (path[n] == '/');
	}
	return v;
}

Test(jsonfast, skips_a_value_it_is_told_not_to_build)
{
	static const char *const paths[] = {"request/object/metadata/managedFields",
					    "request/userInfo", NULL};
	static const char text[] =
		"{\"request\":{\"userInfo\":{\"groups\":[\"a\"]},"
		"\"object\":{\"metadata\":{\"name\":\"p\","
		"\"managedFields\":[{\"manager\":\"kubectl\",\"fieldsV1\":{\"f:spec\":"
		"{\"f:containers\":{}}}}],\"labels\":{\"a\":\"b\"}}},"
		"\"oldObject\":{\"metadata\":{\"managedFields\":[1]}}}}";
	static const char twice[] = "{\"request\":{\"userInfo\":1,\"userInfo\":2}}";
	static const char dup[] = "{\"request\":{\"uid\":1,\"uid\":2}}";
	struct jsonfast_skip *skip = skip_set(paths);
	char err[256];
	json_t *v = jsonfast_parse_skip(text, strlen(text), skip, err, sizeof(err));

	cr_assert_not_null(v, "%s", err);
	cr_assert_null(at(v, "request/object/metadata/managedFields"),
		       "a skipped member is left out");
	cr_assert_null(at(v, "request/userInfo"));
	cr_assert_eq(json_object_size(at(v, "request/object/metadata")), 2);
	cr_assert_str_eq(json_string_value(at(v, "request/object/metadata/labels/a")),
			 "b", "what follows the skipped value is read");
	cr_assert(json_is_array(at(v, "request/oldObject/metadata/managedFields")),
		  "only the exact path is skipped");
	json_decref(v);
	/* Skipped, but still checked to be JSON. */
	cr_assert_null(jsonfast_parse_skip(
		"{\"request\":{\"object\":{\"metadata\":{\"managedFields\":[01]}}}}", 55,
		skip, err, sizeof(err)));
	cr_assert_str_eq(err, "invalid number: leading zero (line 1, column 52)");
	/* Keys are checked as when built: no NUL, escapes valid. */
	cr_assert_null(jsonfast_parse_skip("{\"request\":{\"userInfo\":{\"a\\u0000\":1}}}",
					   38, skip, err, sizeof(err)));
	cr_assert_str_eq(err, "NUL character in an object key (line 1, column 34)");
	cr_assert_null(jsonfast_parse_skip("{\"request\":{\"userInfo\":[\"\\x\"]}}",
					   31, skip, err, sizeof(err)));
	cr_assert_str_eq(err, "invalid escape \\x (line 1, column 26)");
	/* An escaped NUL in a string value is fine, as when built. */
	cr_assert_not_null(v = jsonfast_parse_skip("{\"request\":{\"userInfo\":[\"\\u0000\"]}}",
						   35, skip, err, sizeof(err)), "%s", err);
	json_decref(v);
	/* Nothing reads a skipped member: given twice, it is not refused. */
	cr_assert_not_null(v = jsonfast_parse_skip(
				   twice, strlen(twice), skip, err, sizeof(err)),
			   "%s", err);
	cr_assert_eq(json_object_size(at(v, "request")), 0);
	json_decref(v);
	cr_assert_null(jsonfast_parse_skip(dup, strlen(dup), skip, err, sizeof(err)));
	cr_assert_str_eq(err, "duplicate object key \"uid\" (line 1, column 21)");
	/* No skip set: everything is built. */
	cr_assert_not_null(v = jsonfast_parse_skip(text, strlen(text), NULL, err,
						   sizeof(err)), "%s", err);
	cr_assert(json_is_array(at(v, "request/object/metadata/managedFields")));
	json_decref(v);
	jsonfast_skip_free(skip);
}

Test(jsonfast, skip_paths_take_alternatives_and_every_element)
{
	static const char *const paths[] = {
		"o|old/spec/containers|initContainers/[]/image|ports",
		"o|old/spec/list/[]", NULL};
	static const char text[] =
		"{\"o\":{\"spec\":{\"containers\":[{\"name\":\"a\",\"image\":\"x\","
		"\"ports\":[{\"containerPort\":1}]},{\"image\":\"y\",\"name\":\"b\"}],"
		"\"initContainers\":[{\"name\":\"i\",\"image\":\"z\"}],"
		"\"other\":[{\"image\":\"kept\"}],\"list\":[1,{\"a\":2},3]}},"
		"\"old\":{\"spec\":{\"containers\":{\"image\":\"not an array\"}}},"
		"\"x\":{\"spec\":{\"containers\":[{\"image\":\"other root key\"}]}}}";
	struct jsonfast_skip *skip = skip_set(paths);
	char err[256];
	json_t *v = jsonfast_parse_skip(text, strlen(text), skip, err, sizeof(err));

	cr_assert_not_null(v, "%s", err);
	cr_assert_null(at(v, "o/spec/containers/0/image"));
	cr_assert_null(at(v, "o/spec/containers/0/ports"));
	cr_assert_str_eq(json_string_value(at(v, "o/spec/containers/0/name")), "a");
	cr_assert_null(at(v, "o/spec/containers/1/image"));
	cr_assert_str_eq(json_string_value(at(v, "o/spec/containers/1/name")), "b");
	cr_assert_null(at(v, "o/spec/initContainers/0/image"));
	cr_assert_str_eq(json_string_value(at(v, "o/spec/other/0/image")), "kept");
	/* Skipped elements read as null, so the indexes stay true. */
	cr_assert_eq(json_array_size(at(v, "o/spec/list")), 3);
	cr_assert(json_is_null(at(v, "o/spec/list/1")));
	/* "[]" is an array's elements, not an object's members. */
	cr_assert_str_eq(json_string_value(at(v, "old/spec/containers/image")),
			 "not an array");
	cr_assert_str_eq(json_string_value(at(v, "x/spec/containers/0/image")),
			 "other root key");
	json_decref(v);
	jsonfast_skip_free(skip);
}

Test(jsonfast, refuses_skip_paths_it_cannot_hold)
{
	static const char *const deep[] = {"a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p/q", NULL};
	static const char *const empty_key[] = {"a//b", NULL};
	static const char *const empty_alt[] = {"a/b|", NULL};
	static const char *const empty[] = {"", NULL};
	static const char *const wide[] = {
		"a|b|c|d|e|f|g|h/a|b|c|d|e|f|g|h/a|b|c|d|e|f|g|h/x", NULL};
	static const char *const sixteen[] = {"a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p",
					      NULL};
	char err[256];
	struct jsonfast_skip *sk;

	cr_assert_null(jsonfast_skip_new(deep, err, sizeof(err)));
	cr_assert_str_eq(err, "skip path \"a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p/q\" is "
			      "over 16 keys deep");
	cr_assert_null(jsonfast_skip_new(empty_key, err, sizeof(err)));
	cr_assert_str_eq(err, "skip path \"a//b\" has an empty key, or the paths "
			      "make over 511 keys");
	cr_assert_null(jsonfast_skip_new(empty_alt, err, sizeof(err)));
	cr_assert_null(jsonfast_skip_new(empty, err, sizeof(err)));
	cr_assert_str_eq(err, "an empty skip path");
	/* 8 + 64 + 512 keys spelled out: over the 511 a set holds. */
	cr_assert_null(jsonfast_skip_new(wide, err, sizeof(err)));
	cr_assert(strstr(err, "over 511 keys"), "%s", err);
	cr_assert_not_null(sk = jsonfast_skip_new(sixteen, err, sizeof(err)), "%s", err);
	jsonfast_skip_free(sk);
	cr_assert_not_null(sk = jsonfast_skip_new(NULL, err, sizeof(err)), "%s", err);
	jsonfast_skip_free(sk);
}

Test(jsonfast, a_quoted_key_keeps_the_message_on_one_line)
{
	/* Found by tests/fuzz/json_fuzz.c (corpus/json/crash-duplicate-key-
	 * with-newline): the duplicate key's \n became a line break. */
	static const char text[] = "{\"a\\nb\":1,\"a\\nb\":2}";
	char err[256];

	cr_assert_null(jsonfast_parse(text, strlen(text), err, sizeof(err)));
	cr_assert_str_eq(err, "duplicate object key \"a b\" (line 1, column 11)");
}
