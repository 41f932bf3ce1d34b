/* The AdmissionReview codec (webhook/review.c). */
#include "webhook/review.h"

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <string.h>

#define REVIEW(req)                                                     \
	"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\"," \
	"\"request\":" req "}"

Test(review, decodes_a_pod_create)
{
	static const char body[] = REVIEW(
		"{\"uid\":\"u-1\",\"kind\":{\"group\":\"\",\"version\":\"v1\",\"kind\":"
		"\"Pod\"},\"namespace\":\"research\",\"name\":\"\",\"operation\":"
		"\"CREATE\",\"dryRun\":true,\"object\":{\"kind\":\"Pod\"}}");
	struct review rv;
	char err[256];

	cr_assert_eq(review_decode(body, strlen(body), &rv, err, sizeof(err)), 0,
		     "%s", err);
	cr_assert_str_eq(rv.uid, "u-1");
	cr_assert_eq(rv.kind, WL_POD);
	cr_assert_eq(rv.op, WL_CREATE);
	cr_assert_str_eq(rv.namespace, "research");
	cr_assert_str_eq(rv.name, "");
	cr_assert(rv.dry_run);
	cr_assert_not_null(rv.object);
	cr_assert_null(rv.old_object);
	review_release(&rv);
}

Test(review, decodes_kinds)
{
	static const struct {
		const char *gvk;
		enum wl_kind kind;
	} cases[] = {
		{"{\"group\":\"batch\",\"version\":\"v1\",\"kind\":\"Job\"}", WL_JOB},
		{"{\"group\":\"\",\"version\":\"v1\",\"kind\":\"Pod\"}", WL_POD},
		/* Pod-template controllers (#18). */
		{"{\"group\":\"apps\",\"version\":\"v1\",\"kind\":\"Deployment\"}",
		 WL_TEMPLATE},
		{"{\"group\":\"batch\",\"version\":\"v1\",\"kind\":\"CronJob\"}",
		 WL_TEMPLATE},
		{"{\"group\":\"apps\",\"version\":\"v1\",\"kind\":\"ControllerRevision\"}",
		 WL_OTHER},
		{"{\"group\":\"batch\",\"version\":\"v1beta1\",\"kind\":\"Job\"}",
		 WL_OTHER},		{"{\"group\":\"resource.k8s.io\",\"version\":\"v1\","
		 "\"kind\":\"ResourceClaim\"}", WL_CLAIM},
		{"{\"group\":\"resource.k8s.io\",\"version\":\"v1\","
		 "\"kind\":\"ResourceClaimTemplate\"}", WL_CLAIM_TEMPLATE},
		/* matchPolicy Equivalent converts the betas: never sent. */
		{"{\"group\":\"resource.k8s.io\",\"version\":\"v1beta2\","
		 "\"kind\":\"ResourceClaim\"}", WL_OTHER},
		{"{\"group\":\"resource.k8s.io\",\"version\":\"v1\","
		 "\"kind\":\"DeviceClass\"}", WL_OTHER},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char body[512], err[256];
		struct review rv;

		snprintf(body, sizeof(body),
			 REVIEW("{\"uid\":\"u\",\"kind\":%s,\"operation\":\"DELETE\"}"),
			 cases[i].gvk);
		cr_assert_eq(review_decode(body, strlen(body), &rv, err, sizeof(err)), 0,
			     "%s", err);
		cr_expect_eq(rv.kind, cases[i].kind, "%s", cases[i].gvk);
		cr_expect_eq(rv.op, WL_DELETE);
		review_release(&rv);
	}
}

struct bad_review {
	char name[48];
	char body[512];
	char error[160];
};

static struct bad_review bad_reviews[] = {
	{"not json", "{\"apiVersion\":", "body is not valid JSON: "
	 "unexpected end of input (line 1, column 15)"},
	{"array", "[1,2]", "body is not a JSON object"},
	{"wrong kind", "{\"kind\":\"Pod\"}", "kind is not AdmissionReview"},
	{"v1beta1",
	 "{\"apiVersion\":\"admission.k8s.io/v1beta1\",\"kind\":\"AdmissionReview\"}",
	 "apiVersion is not admission.k8s.io/v1 (set admissionReviewVersions: "
	 "[v1])"},
	{"no request", REVIEW("null"), "review has no request"},
	{"no uid", REVIEW("{\"operation\":\"CREATE\"}"), "review has no request.uid"},
	{"empty uid", REVIEW("{\"uid\":\"\",\"operation\":\"CREATE\"}"),
	 "review has no request.uid"},
	{"no operation", REVIEW("{\"uid\":\"u\"}"), "review has no request.operation"},
	{"bad operation", REVIEW("{\"uid\":\"u\",\"operation\":\"PATCH\"}"),
	 "request.operation is not CREATE, UPDATE, DELETE or CONNECT"},
	{"object not an object",
	 REVIEW("{\"uid\":\"u\",\"operation\":\"CREATE\",\"object\":[1]}"),
	 "request.object is not an object"},
	{"duplicate keys",
	 REVIEW("{\"uid\":\"u\",\"uid\":\"v\",\"operation\":\"CREATE\"}"),
	 "body is not valid JSON: duplicate object key \"uid\" (line 1, "
	 "column 83)"},
};

ParameterizedTestParameters(review, rejects)
{
	return cr_make_param_array(struct bad_review, bad_reviews,
				   sizeof(bad_reviews) / sizeof(bad_reviews[0]));
}

ParameterizedTest(struct bad_review *c, review, rejects)
{
	struct review rv;
	char err[256];

	cr_assert_eq(review_decode(c->body, strlen(c->body), &rv, err, sizeof(err)),
		     -1, "%s accepted", c->name);
	cr_assert_str_eq(err, c->error, "case %s", c->name);
	review_release(&rv);
}

Test(review, rejects_invalid_utf8)
{
	static const char body[] = REVIEW("{\"uid\":\"\xff\xfe\",\"operation\":\"CREATE\"}");
	struct review rv;
	char err[256];

	cr_assert_eq(review_decode(body, strlen(body), &rv, err, sizeof(err)), -1);
	cr_assert_str_eq(err, "body is not valid JSON: invalid UTF-8 byte 0xff "
			      "(line 1, column 80)");
	review_release(&rv);
}

static json_t *decode_response(const char *out)
{
	json_error_t e;
	json_t *v = json_loads(out, 0, &e);

	cr_assert_not_null(v, "%s", e.text);
	cr_assert_str_eq(json_string_value(json_object_get(v, "apiVersion")),
			 "admission.k8s.io/v1");
	cr_assert_str_eq(json_string_value(json_object_get(v, "kind")),
			 "AdmissionReview");
	return v;
}

Test(review, encodes_an_admission_with_a_patch)
{
	const char *patch = "[{\"op\":\"add\",\"path\":\"/a\",\"value\":1}]";
	const char *warnings[] = {"gpugate: one\nline"};
	struct review_response resp = {.allowed = true, .patch = patch,
				       .patch_len = strlen(patch),
				       .warnings = warnings, .n_warnings = 1};
	size_t len;
	char *out = review_encode("u-7", &resp, &len);
	json_t *v = decode_response(out), *r = json_object_get(v, "response");

	cr_assert_eq(len, strlen(out));
	cr_assert_str_eq(json_string_value(json_object_get(r, "uid")), "u-7");
	cr_assert(json_is_true(json_object_get(r, "allowed")));
	cr_assert_str_eq(json_string_value(json_object_get(r, "patchType")),
			 "JSONPatch");
	/* base64 of [{"op":"add","path":"/a","value":1}] */
	cr_assert_str_eq(json_string_value(json_object_get(r, "patch")),
			 "W3sib3AiOiJhZGQiLCJwYXRoIjoiL2EiLCJ2YWx1ZSI6MX1d");
	cr_assert_str_eq(json_string_value(json_array_get(json_object_get(r, "warnings"),
							  0)),
			 "gpugate: one line", "warnings are one line");
	cr_assert_null(json_object_get(r, "status"));
	json_decref(v);
	free(out);
}

Test(review, base64_of_the_patch_decodes_back)
{
	const char *patch = "[{\"op\":\"add\",\"path\":\"/metadata/labels\","
			    "\"value\":{\"a\":\"b\"}}]";
	struct review_response resp = {.allowed = true, .patch = patch,
				       .patch_len = strlen(patch)};
	size_t len;
	char *out = review_encode("u", &resp, &len);
	json_t *v = decode_response(out);
	const char *b64 = json_string_value(
		json_object_get(json_object_get(v, "response"), "patch"));

	/* [{"op":"add","path":"/metadata/labels","value":{"a":"b"}}] */
	cr_assert_str_eq(b64, "W3sib3AiOiJhZGQiLCJwYXRoIjoiL21ldGFkYXRhL2xhYmVscyIsInZh"
			      "bHVlIjp7ImEiOiJiIn19XQ==");
	json_decref(v);
	free(out);
}

/* RFC 4648 base64, a bit at a time: the reference for the fast one. */
static char *base64_slow(const unsigned char *in, size_t len)
{
	static const char abc[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	char *out = malloc((len + 2) / 3 * 4 + 1);
	size_t o = 0, nbits = len * 8;

	cr_assert_not_null(out);
	for (size_t bit = 0; bit < nbits; bit += 6) {
		unsigned v = 0;

		for (size_t b = bit; b < bit + 6; b++)
			v = v << 1 | (b < nbits ? (in[b / 8] >> (7 - b % 8)) & 1 : 0);
		out[o++] = abc[v];
	}
	while (o % 4)
		out[o++] = '=';
	out[o] = '\0';
	return out;
}

Test(review, base64_of_every_byte_and_length)
{
	unsigned char bytes[1100];

	/* Every byte value, and lengths across the 1 KiB output blocks. */
	for (size_t i = 0; i < sizeof(bytes); i++)
		bytes[i] = (unsigned char)(i * 7 + i / 256);
	for (size_t len = 1; len <= sizeof(bytes); len += len < 20 ? 1 : 37) {
		struct review_response resp = {.allowed = true,
					       .patch = (const char *)bytes,
					       .patch_len = len};
		size_t n;
		char *out = review_encode("u", &resp, &n);
		json_t *v = decode_response(out);
		char *want = base64_slow(bytes, len);

		cr_assert_str_eq(json_string_value(json_object_get(
					 json_object_get(v, "response"), "patch")),
				 want, "length %zu", len);
		free(want);
		json_decref(v);
		free(out);
	}
}

Test(review, no_patch_field_without_a_patch)
{
	struct review_response none = {.allowed = true};
	struct review_response empty = {.allowed = true, .patch = ""};
	const struct review_response *cases[] = {&none, &empty};

	for (size_t i = 0; i < 2; i++) {
		size_t len;
		char *out = review_encode("u", cases[i], &len);
		json_t *v = decode_response(out), *r = json_object_get(v, "response");

		cr_assert_null(json_object_get(r, "patch"));
		cr_assert_null(json_object_get(r, "patchType"));
		cr_assert_null(json_object_get(r, "warnings"));
		json_decref(v);
		free(out);
	}
}

Test(review, encodes_a_denial)
{
	struct review_response resp = {.allowed = false, .code = 403,
				       .message = "gpugate: no"};
	size_t len;
	char *out = review_encode("u-9", &resp, &len);
	json_t *v = decode_response(out), *r = json_object_get(v, "response");
	json_t *st = json_object_get(r, "status");

	cr_assert(json_is_false(json_object_get(r, "allowed")));
	cr_assert_eq(json_integer_value(json_object_get(st, "code")), 403);
	cr_assert_str_eq(json_string_value(json_object_get(st, "message")),
			 "gpugate: no");
	cr_assert_str_eq(json_string_value(json_object_get(st, "reason")),
			 "Forbidden");
	cr_assert_null(json_object_get(r, "patch"));
	json_decref(v);
	free(out);
}

/*
 * What no rule reads is not built (review.c's list): a Pod's managedFields,
 * its containers' images, commands, ports and probes, volume sources but
 * hostPath, and the like, in a Pod's spec and in a Job's pod template, in
 * object and oldObject.  review_decode_all() builds everything.
 */
Test(review, leaves_out_what_no_rule_reads)
{
	static const char spec[] =
		"{\"containers\":[{\"name\":\"c\",\"image\":\"i\",\"command\":[\"x\"],"
		"\"ports\":[{\"containerPort\":1}],\"env\":[{\"name\":\"A\",\"value\":"
		"\"1\"},{\"name\":\"B\",\"valueFrom\":{\"fieldRef\":{\"fieldPath\":"
		"\"x\"}}}],\"resources\":{\"limits\":{\"cpu\":\"1\"}},"
		"\"securityContext\":{\"privileged\":true},\"livenessProbe\":{}}],"
		"\"volumes\":[{\"name\":\"h\",\"hostPath\":{\"path\":\"/x\"}},"
		"{\"name\":\"s\",\"secret\":{\"secretName\":\"s\"}}],"
		"\"dnsPolicy\":\"ClusterFirst\",\"priority\":0,"
		"\"resourceClaims\":[{\"name\":\"gpugate-gpu\","
		"\"resourceClaimTemplateName\":\"t\"}]}";
	char body[4096], err[256];
	struct review rv, all;

	snprintf(body, sizeof(body),
		 REVIEW("{\"uid\":\"u\",\"kind\":{\"group\":\"\",\"version\":\"v1\","
			"\"kind\":\"Pod\"},\"operation\":\"UPDATE\",\"object\":"
			"{\"metadata\":{\"name\":\"p\",\"managedFields\":[{}]},"
			"\"spec\":%s},\"oldObject\":{\"spec\":{\"template\":"
			"{\"spec\":%s}}}}"),
		 spec, spec);
	cr_assert_eq(review_decode(body, strlen(body), &rv, err, sizeof(err)), 0,
		     "%s", err);
	cr_assert_eq(review_decode_all(body, strlen(body), &all, err, sizeof(err)),
		     0, "%s", err);
	for (int k = 0; k < 2; k++) {
		const json_t *sp = k ? json_object_get(json_object_get(json_object_get(
					       rv.old_object, "spec"), "template"), "spec")
				     : json_object_get(rv.object, "spec");
		const json_t *ct = json_array_get(json_object_get(sp, "containers"), 0);
		const json_t *env = json_object_get(ct, "env");

		cr_assert_not_null(ct);
		cr_assert_null(json_object_get(ct, "image"));
		cr_assert_null(json_object_get(ct, "command"));
		cr_assert_null(json_object_get(ct, "ports"));
		cr_assert_null(json_object_get(ct, "livenessProbe"));
		cr_assert_not_null(json_object_get(ct, "resources"), "read: kept");
		cr_assert_not_null(json_object_get(ct, "securityContext"));
		cr_assert_str_eq(json_string_value(json_object_get(
					 json_array_get(env, 0), "value")), "1");
		cr_assert_null(json_object_get(json_array_get(env, 1), "valueFrom"));
		cr_assert_not_null(json_object_get(json_array_get(
			json_object_get(sp, "volumes"), 0), "hostPath"));
		cr_assert_null(json_object_get(json_array_get(
			json_object_get(sp, "volumes"), 1), "secret"));
		cr_assert_null(json_object_get(sp, "dnsPolicy"));
		cr_assert_not_null(json_object_get(sp, "priority"),
				   "apply_plan removes it: kept");
		cr_assert_not_null(json_object_get(sp, "resourceClaims"),
				   "a DRA class's entry is read and written: kept");
	}
	cr_assert_null(json_object_get(json_object_get(rv.object, "metadata"),
				       "managedFields"));
	cr_assert_not_null(json_object_get(json_object_get(all.object, "metadata"),
					   "managedFields"));
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(
				 json_object_get(json_object_get(all.object, "spec"),
						 "containers"), 0), "image")), "i");
	review_release(&rv);
	review_release(&all);
}

/* A duplicate key in a part no rule reads is not looked for: only the
 * reader that builds the part refuses it (found by tests/fuzz/review_fuzz.c,
 * corpus/review/crash-duplicate-key-in-unread-part). */
Test(review, a_duplicate_key_in_an_unread_part_is_read_past)
{
	static const char body[] = REVIEW(
		"{\"uid\":\"u\",\"kind\":{\"group\":\"\",\"version\":\"v1\",\"kind\":"
		"\"Pod\"},\"operation\":\"CREATE\",\"object\":{\"spec\":{\"containers\":"
		"[{\"name\":\"c\",\"image\":{\"name\":1,\"name\":2}}]}}}");
	struct review rv;
	char err[256];

	cr_assert_eq(review_decode(body, strlen(body), &rv, err, sizeof(err)), 0,
		     "%s", err);
	review_release(&rv);
	cr_assert_eq(review_decode_all(body, strlen(body), &rv, err, sizeof(err)), -1);
	cr_assert(strstr(err, "duplicate object key \"name\""), "%s", err);
}

/* request.resource is read for a Scale only (what it scales), at no cost to
 * every other review. */
Test(review, reads_what_a_scale_scales_and_nothing_else_reads_the_resource)
{
	static const char *const subs[] = {"scale", "status", ""};
	char body[1024], err[256];
	struct review rv;

	for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++) {
		snprintf(body, sizeof(body),
			 REVIEW("{\"uid\":\"u\",\"kind\":{\"group\":\"autoscaling\","
				"\"version\":\"v1\",\"kind\":\"Scale\"},\"resource\":{"
				"\"group\":\"apps\",\"version\":\"v1\",\"resource\":"
				"\"statefulsets\"},\"subResource\":\"%s\",\"operation\":"
				"\"UPDATE\",\"object\":{\"spec\":{\"replicas\":2}}}"),
			 subs[i]);
		cr_assert_eq(review_decode(body, strlen(body), &rv, err, sizeof(err)), 0,
			     "%s", err);
		cr_assert_str_eq(rv.sub_resource, subs[i]);
		cr_assert_str_eq(rv.resource, i == 0 ? "statefulsets" : "");
		cr_assert_str_eq(rv.resource_group, i == 0 ? "apps" : "");
		cr_assert_not_null(rv.object);
		review_release(&rv);
	}
}
