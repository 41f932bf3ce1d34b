/*
 * The pure parts of the health controller (controllers/health.h): the
 * merge patch of a step on a Node (every other taint kept, the Node's
 * resourceVersion its precondition) and the signal as the record keeps
 * it.  The round itself runs over the fake API
 * (tests/integration/test_node_health.py).
 */
#include "base/text.h"
#include "controllers/health.h"
#include "policy/health.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <string.h>

static json_t *node_of(const char *text)
{
	json_error_t e;
	json_t *n = json_loads(text, 0, &e);

	cr_assert_not_null(n, "%s", e.text);
	return n;
}

static char *dump(const json_t *j)
{
	return json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
}

static void expect_patch(const json_t *patch, const char *want)
{
	char *got = dump(patch);

	cr_expect_str_eq(got, want);
	free(got);
}

static const char NODE[] =
	"{\"metadata\": {\"name\": \"h0\", \"resourceVersion\": \"42\","
	" \"annotations\": {\"gpugate.io/health\": \"o=1 c=0 n=1 t=x\", \"a\": \"b\"}},"
	" \"spec\": {\"taints\": ["
	"  {\"key\": \"nvidia.com/gpu\", \"value\": \"present\", \"effect\": \"NoSchedule\"},"
	"  {\"key\": \"gpugate.io/unhealthy\", \"value\": \"health\", \"effect\": \"NoSchedule\"},"
	"  {\"key\": \"other\", \"effect\": \"NoExecute\", \"timeAdded\": \"2026-12-05T11:00:00Z\"},"
	"  {\"key\": \"gpugate.io/unhealthy\", \"value\": \"dup\", \"effect\": \"NoExecute\"}"
	"]}}";

Test(health_controller, mark_out_keeps_every_other_taint_in_order)
{
	json_t *n = node_of(NODE);
	json_t *p = health_patch_build(n, HEALTH_TAINT_VALIDATING, "o=1 c=2 n=1 t=x", false);

	cr_assert_not_null(p);
	expect_patch(p,
		     "{\"metadata\":{\"annotations\":{\"gpugate.io/health\":\"o=1 c=2 n=1 t=x\"},"
		     "\"resourceVersion\":\"42\"},\"spec\":{\"taints\":["
		     "{\"effect\":\"NoSchedule\",\"key\":\"nvidia.com/gpu\",\"value\":\"present\"},"
		     "{\"effect\":\"NoExecute\",\"key\":\"other\",\"timeAdded\":"
		     "\"2026-12-05T11:00:00Z\"},"
		     "{\"effect\":\"NoSchedule\",\"key\":\"gpugate.io/unhealthy\","
		     "\"value\":\"validating\"}]}}");
	json_decref(p);
	json_decref(n);
}

Test(health_controller, return_drops_both_and_touches_no_other_annotation)
{
	json_t *n = node_of(NODE);
	json_t *p = health_patch_build(n, NULL, NULL, true);

	expect_patch(p,
		     "{\"metadata\":{\"annotations\":{\"gpugate.io/health\":null},"
		     "\"resourceVersion\":\"42\"},\"spec\":{\"taints\":["
		     "{\"effect\":\"NoSchedule\",\"key\":\"nvidia.com/gpu\",\"value\":\"present\"},"
		     "{\"effect\":\"NoExecute\",\"key\":\"other\",\"timeAdded\":"
		     "\"2026-12-05T11:00:00Z\"}]}}");
	json_decref(p);
	json_decref(n);
}

Test(health_controller, fix_taint_leaves_the_record_alone)
{
	json_t *n = node_of("{\"metadata\": {\"resourceVersion\": \"7\"}, \"spec\": {}}");
	json_t *p = health_patch_build(n, HEALTH_TAINT_OUT, NULL, false);

	expect_patch(p, "{\"metadata\":{\"resourceVersion\":\"7\"},\"spec\":{\"taints\":["
			"{\"effect\":\"NoSchedule\",\"key\":\"gpugate.io/unhealthy\","
			"\"value\":\"health\"}]}}");
	json_decref(p);
	json_decref(n);
}

Test(health_controller, no_taint_left_removes_the_list)
{
	json_t *n = node_of("{\"metadata\": {\"resourceVersion\": \"7\"}, \"spec\": {\"taints\":"
			    " [{\"key\": \"gpugate.io/unhealthy\", \"effect\": \"NoSchedule\"}]}}");
	json_t *p = health_patch_build(n, NULL, NULL, true);

	expect_patch(p, "{\"metadata\":{\"annotations\":{\"gpugate.io/health\":null},"
			"\"resourceVersion\":\"7\"},\"spec\":{\"taints\":null}}");
	json_decref(p);
	json_decref(n);
}

Test(health_controller, no_resource_version_no_patch)
{
	json_t *n = node_of("{\"metadata\": {\"name\": \"h0\"}, \"spec\": {}}");

	cr_assert_null(health_patch_build(n, HEALTH_TAINT_OUT, "o=1 c=0 n=1 t=x", false));
	json_decref(n);
	n = node_of("{\"metadata\": {\"resourceVersion\": \"\"}}");
	cr_assert_null(health_patch_build(n, NULL, NULL, true));
	json_decref(n);
}

Test(health_controller, the_record_keeps_a_clean_short_signal)
{
	char out[32];
	struct health_record r;
	char rec[96];

	health_why_clean("condition X=True (reason\nXid79)", out, sizeof(out));
	cr_assert_str_eq(out, "condition X=True (reason Xid79)");
	health_why_clean("", out, sizeof(out));
	cr_assert_str_eq(out, "unknown");
	health_why_clean(NULL, out, sizeof(out));
	cr_assert_str_eq(out, "unknown");
	health_why_clean("taint a-very-long-key-of-a-taint=value:NoSchedule", out, sizeof(out));
	cr_assert_lt(strlen(out), sizeof(out));
	cr_assert(strstr(out, "...") != NULL);
	/* Whatever it was, the record it makes parses. */
	health_why_clean("\n\r\t\x01\xff", out, sizeof(out));
	r = (struct health_record){.out_ms = 1, .cleared_ms = 0, .times = 1, .why = out};
	health_record_format(&r, rec, sizeof(rec));
	cr_assert_eq(health_record_parse(rec, &r), 0, "%s", rec);
}

Test(health_controller, durations_as_an_operator_reads_them)
{
	static const struct {
		int64_t s;
		const char *want;
	} cases[] = {
		{-5, "0s"},      {0, "0s"},        {45, "45s"},        {60, "1m"},
		{200, "3m20s"},  {3600, "1h"},     {3720, "1h2m"},     {3725, "1h2m"},
		{86400, "1d"},   {183600, "2d3h"}, {90061, "1d1h"},
	};
	char buf[32];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		text_duration(cases[i].s, buf, sizeof(buf));
		cr_expect_str_eq(buf, cases[i].want, "%lld", (long long)cases[i].s);
	}
}
