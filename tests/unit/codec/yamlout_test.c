/* jansson value -> YAML text (codec/yamlout.c). */
#include "codec/yamlout.h"

#include "base/diag.h"
#include "base/strbuf.h"
#include "codec/yamljson.h"

#include <criterion/criterion.h>
#include <stdlib.h>

static char *write_yaml(const char *json)
{
	json_error_t err;
	json_t *v = json_loads(json, JSON_DECODE_ANY, &err);
	struct strbuf sb;
	size_t len;

	cr_assert_not_null(v, "%s", err.text);
	strbuf_init(&sb, 1u << 20);
	cr_assert_eq(yamlout_write(v, &sb), 0);
	json_decref(v);
	return strbuf_take(&sb, &len);
}

Test(yamlout, block_style_and_quotes_where_a_reader_could_differ)
{
	char *got = write_yaml(
		"{\"results\": [{\"name\": \"llm\", \"document\": 1, \"ok\": true, "
		"\"rule\": null, \"warnings\": [], \"patch\": {}, \"r\": 0.5}], "
		"\"words\": [\"yes\", \"No\", \"on\", \"null\", \"8080\", \"\", "
		"\"a b\", \"x: y\", \"gpugate.io/class\", \"caf\\u00e9\", \"l1\\nl2\"]}");

	cr_expect_str_eq(got, "results:\n"
			      "- name: llm\n"
			      "  document: 1\n"
			      "  ok: true\n"
			      "  rule: null\n"
			      "  warnings: []\n"
			      "  patch: {}\n"
			      "  r: 0.5\n"
			      "words:\n"
			      "- \"yes\"\n"
			      "- \"No\"\n"
			      "- \"on\"\n"
			      "- \"null\"\n"
			      "- \"8080\"\n"
			      "- \"\"\n"
			      "- \"a b\"\n"
			      "- \"x: y\"\n"
			      "- gpugate.io/class\n"
			      "- \"caf\xc3\xa9\"\n"
			      "- \"l1\\nl2\"\n");
	free(got);
}

Test(yamlout, reads_back_as_the_same_value)
{
	static const char *const cases[] = {
		"{\"a\": {\"b\": [1, -2, 3.25, \"\\\"q\\\\\", \"\\t\", {\"c\": null}]}}",
		"[\"~\", \"0x1F\", \"0644\", \"-\", \"<<\", \"*x\", \"&a\", \"#c\", \"!t\"]",
		"\"just a string\"",
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_t *want = json_loads(cases[i], JSON_DECODE_ANY, NULL), *back = NULL;
		char *text = write_yaml(cases[i]);
		struct diag d;

		diag_init(&d);
		cr_assert_eq(yamljson_parse("t", text, strlen(text), &back, &d), 0,
			     "%s: %s", text, diag_text(&d));
		cr_expect(json_equal(want, back), "case %zu: %s", i, text);
		json_decref(want);
		json_decref(back);
		free(text);
	}
}
