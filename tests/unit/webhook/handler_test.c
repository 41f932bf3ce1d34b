/*
 * The join point (webhook/handler.c) where the golden cases cannot reach:
 * answers that are not a review, and which subresources are judged.  The
 * reviews themselves are in tests/golden (golden_test.c).
 */
#include "base/diag.h"
#include "base/log.h"
#include "policy/policy.h"
#include "webhook/handler.h"
#include "webhook/holder.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

Test(handler, no_policy_loaded_is_503)
{
	/* serve never starts without a policy: this is the guard behind it. */
	static const char review[] =
		"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\","
		"\"request\":{\"uid\":\"u-1\",\"kind\":{\"group\":\"\",\"version\":"
		"\"v1\",\"kind\":\"Pod\"},\"operation\":\"CREATE\",\"namespace\":"
		"\"research\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"Pod\","
		"\"spec\":{\"containers\":[{\"name\":\"m\"}]}}}}";
	struct holder *empty = holder_new(NULL);
	struct handler h = {.policy = empty};
	struct handler_reply r;

	log_set_level(LOG_ERROR);
	cr_assert_not_null(empty);
	handler_admit(&h, HANDLER_MUTATE, review, strlen(review), &r);
	cr_assert_eq(r.status, 503);
	cr_assert_str_eq(r.content_type, "text/plain; charset=utf-8");
	cr_assert_str_eq(r.body, "gpugate: no policy loaded\n");
	cr_assert_eq(r.len, strlen(r.body));
	free(r.body);
	holder_free(empty);
}

/* ---- kubectl debug: the ephemeralcontainers subresource ----------------- */

/* A review of subresource `sub` (UPDATE of a class Pod in namespace
 * research) whose Pod has one ephemeral container with these fields. */
static char *debug_review(const char *sub, const char *ephemeral)
{
	static const char pod[] =
		"{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\","
		"\"namespace\":\"research\",\"labels\":{\"gpugate.io/class\":"
		"\"train-small\",\"gpugate.io/tenant\":\"research\"}},\"spec\":{"
		"\"containers\":[{\"name\":\"main\",\"resources\":{\"limits\":"
		"{\"nvidia.com/gpu\":\"1\"}}}]%s}}";
	char object[2048], old[2048], *out;
	int n;

	snprintf(old, sizeof(old), pod, "");
	if (ephemeral) {
		char eph[1024];

		snprintf(eph, sizeof(eph), ",\"ephemeralContainers\":[%s]", ephemeral);
		snprintf(object, sizeof(object), pod, eph);
	} else {
		snprintf(object, sizeof(object), "%s", old);
	}
	n = asprintf(&out,
		     "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":"
		     "\"AdmissionReview\",\"request\":{\"uid\":\"u-debug\",\"kind\":"
		     "{\"group\":\"\",\"version\":\"v1\",\"kind\":\"Pod\"},"
		     "\"resource\":{\"group\":\"\",\"version\":\"v1\",\"resource\":"
		     "\"pods\"},\"subResource\":\"%s\",\"name\":\"p\",\"namespace\":"
		     "\"research\",\"operation\":\"UPDATE\",\"object\":%s,"
		     "\"oldObject\":%s,\"dryRun\":false}}",
		     sub, object, old);
	cr_assert_gt(n, 0);
	return out;
}

static json_t *admit_json(struct handler *h, enum handler_endpoint ep,
			  const char *review)
{
	struct handler_reply r;
	json_error_t e;
	json_t *resp;

	handler_admit(h, ep, review, strlen(review), &r);
	cr_assert_eq(r.status, 200, "%d %s", r.status, r.body);
	resp = json_loadb(r.body, r.len, 0, &e);
	cr_assert_not_null(resp, "%s", e.text);
	free(r.body);
	return resp;
}

static struct holder *example_policy(void)
{
	struct policy *p = NULL;
	struct diag d;
	struct holder *h;

	log_set_level(LOG_ERROR);
	diag_init(&d);
	cr_assert_eq(policy_load("policy/examples/gpu-cluster.yaml", &p, &d), 0, "%s",
		     diag_text(&d));
	h = holder_new(p);
	cr_assert_not_null(h);
	return h;
}

#define PRIVILEGED_DEBUGGER                                                 \
	"{\"name\":\"debugger-7xk2q\",\"image\":\"busybox\",\"targetContainerName\":" \
	"\"main\",\"securityContext\":{\"privileged\":true}}"

Test(handler, validate_judges_ephemeral_containers)
{
	struct holder *pol = example_policy();
	struct handler h = {.policy = pol};
	char *review = debug_review("ephemeralcontainers", PRIVILEGED_DEBUGGER);
	json_t *resp = admit_json(&h, HANDLER_VALIDATE, review);
	json_t *out = json_object_get(resp, "response");

	cr_assert(json_is_false(json_object_get(out, "allowed")));
	cr_assert_str_eq(json_string_value(json_object_get(out, "uid")), "u-debug");
	cr_assert_eq(json_integer_value(
			     json_object_get(json_object_get(out, "status"), "code")),
		     403);
	cr_assert_str_eq(
		json_string_value(
			json_object_get(json_object_get(out, "status"), "message")),
		"gpugate: ephemeral container \"debugger-7xk2q\" is privileged and "
		"the pod can reach GPU nodes (it asks for class train-small); a "
		"privileged container sees every GPU on the node: remove "
		"securityContext.privileged (kubectl debug --profile=sysadmin sets "
		"it)");
	cr_assert_null(json_object_get(out, "patch"));
	json_decref(resp);
	/* /mutate is not registered for it and leaves it alone. */
	resp = admit_json(&h, HANDLER_MUTATE, review);
	out = json_object_get(resp, "response");
	cr_assert(json_is_true(json_object_get(out, "allowed")));
	cr_assert_null(json_object_get(out, "patch"));
	cr_assert_null(json_object_get(out, "warnings"));
	json_decref(resp);
	free(review);
	/* Other subresources are still no business of gpugate's. */
	review = debug_review("status", PRIVILEGED_DEBUGGER);
	resp = admit_json(&h, HANDLER_VALIDATE, review);
	cr_assert(json_is_true(json_object_get(json_object_get(resp, "response"),
					       "allowed")));
	json_decref(resp);
	free(review);
	holder_free(pol);
}

Test(handler, unprivileged_debugger_is_admitted_silently)
{
	struct holder *pol = example_policy();
	struct handler h = {.policy = pol};
	char *review = debug_review("ephemeralcontainers",
				    "{\"name\":\"debugger-7xk2q\",\"image\":\"busybox\","
				    "\"env\":[{\"name\":\"NVIDIA_VISIBLE_DEVICES\","
				    "\"value\":\"void\"}]}");
	json_t *resp = admit_json(&h, HANDLER_VALIDATE, review);
	json_t *out = json_object_get(resp, "response");

	cr_assert(json_is_true(json_object_get(out, "allowed")));
	cr_assert_null(json_object_get(out, "patch"));
	cr_assert_null(json_object_get(out, "warnings"));
	json_decref(resp);
	free(review);
	/* ...and one that sets it to all is refused. */
	review = debug_review("ephemeralcontainers",
			      "{\"name\":\"dbg\",\"env\":[{\"name\":"
			      "\"NVIDIA_VISIBLE_DEVICES\",\"value\":\"all\"}]}");
	resp = admit_json(&h, HANDLER_VALIDATE, review);
	out = json_object_get(resp, "response");
	cr_assert(json_is_false(json_object_get(out, "allowed")));
	cr_assert_str_eq(
		json_string_value(
			json_object_get(json_object_get(out, "status"), "message")),
		"gpugate: ephemeral container \"dbg\" sets NVIDIA_VISIBLE_DEVICES, "
		"which bypasses the device plugin's GPU isolation: remove it and ask "
		"for GPUs with a class");
	json_decref(resp);
	free(review);
	holder_free(pol);
}

Test(handler, malformed_ephemeral_containers_are_a_bad_request)
{
	struct holder *pol = example_policy();
	struct handler h = {.policy = pol};
	char *review = debug_review("ephemeralcontainers", "\"debugger\"");
	json_t *resp = admit_json(&h, HANDLER_VALIDATE, review);
	json_t *status = json_object_get(json_object_get(resp, "response"), "status");

	cr_assert_eq(json_integer_value(json_object_get(status, "code")), 400);
	cr_assert_str_eq(json_string_value(json_object_get(status, "message")),
			 "gpugate: malformed Pod: spec.ephemeralContainers[0] is not "
			 "an object");
	json_decref(resp);
	free(review);
	holder_free(pol);
}
