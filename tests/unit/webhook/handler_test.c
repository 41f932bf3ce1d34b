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

struct answer {
	bool allowed;
	long code;               /* status.code, 0 when allowed */
	char message[1024];      /* status.message, "" when allowed */
	bool patch, warnings;    /* the response has them */
};

/*
 * Sends an UPDATE of subresource `sub` of a class Pod in namespace
 * research, whose spec.ephemeralContainers is [ephemeral], to endpoint ep.
 */
static void debug_admit(struct handler *h, enum handler_endpoint ep,
			const char *sub, const char *ephemeral, struct answer *a)
{
	static const char pod[] =
		"{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\","
		"\"namespace\":\"research\",\"labels\":{\"gpugate.io/class\":"
		"\"train-small\",\"gpugate.io/tenant\":\"research\"}},\"spec\":{"
		"\"containers\":[{\"name\":\"main\",\"resources\":{\"limits\":"
		"{\"nvidia.com/gpu\":\"1\"}}}]%s%s%s}}";
	char object[2048], old[2048], *review;
	struct handler_reply r;
	json_error_t e;
	json_t *resp, *out, *status;

	snprintf(old, sizeof(old), pod, "", "", "");
	snprintf(object, sizeof(object), pod, ",\"ephemeralContainers\":[",
		 ephemeral, "]");
	cr_assert_gt(asprintf(&review,
			      "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":"
			      "\"AdmissionReview\",\"request\":{\"uid\":\"u-debug\","
			      "\"kind\":{\"group\":\"\",\"version\":\"v1\",\"kind\":"
			      "\"Pod\"},\"resource\":{\"group\":\"\",\"version\":\"v1\","
			      "\"resource\":\"pods\"},\"subResource\":\"%s\",\"name\":"
			      "\"p\",\"namespace\":\"research\",\"operation\":\"UPDATE\","
			      "\"object\":%s,\"oldObject\":%s,\"dryRun\":false}}",
			      sub, object, old),
		     0);
	handler_admit(h, ep, review, strlen(review), &r);
	free(review);
	cr_assert_eq(r.status, 200, "%d %s", r.status, r.body);
	resp = json_loadb(r.body, r.len, 0, &e);
	free(r.body);
	cr_assert_not_null(resp, "%s", e.text);
	out = json_object_get(resp, "response");
	cr_assert_str_eq(json_string_value(json_object_get(out, "uid")), "u-debug");
	status = json_object_get(out, "status");
	memset(a, 0, sizeof(*a));
	a->allowed = json_is_true(json_object_get(out, "allowed"));
	a->code = (long)json_integer_value(json_object_get(status, "code"));
	snprintf(a->message, sizeof(a->message), "%s",
		 json_string_value(json_object_get(status, "message"))
			 ? json_string_value(json_object_get(status, "message"))
			 : "");
	a->patch = json_object_get(out, "patch") != NULL;
	a->warnings = json_object_get(out, "warnings") != NULL;
	json_decref(resp);
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

static void expect_silent_admission(const struct answer *a)
{
	cr_assert(a->allowed, "%s", a->message);
	cr_assert_not(a->patch);
	cr_assert_not(a->warnings);
}

#define PRIVILEGED_DEBUGGER                                                 \
	"{\"name\":\"debugger-7xk2q\",\"image\":\"busybox\",\"targetContainerName\":" \
	"\"main\",\"securityContext\":{\"privileged\":true}}"

Test(handler, validate_judges_ephemeral_containers)
{
	struct holder *pol = example_policy();
	struct handler h = {.policy = pol};
	struct answer a;

	debug_admit(&h, HANDLER_VALIDATE, "ephemeralcontainers", PRIVILEGED_DEBUGGER, &a);
	cr_assert_not(a.allowed);
	cr_assert_eq(a.code, 403);
	cr_assert_str_eq(a.message,
			 "gpugate: ephemeral container \"debugger-7xk2q\" is privileged "
			 "and the pod can reach GPU nodes (it asks for class "
			 "train-small); a privileged container sees every GPU on the "
			 "node: remove securityContext.privileged (kubectl debug "
			 "--profile=sysadmin sets it)");
	cr_assert_not(a.patch);
	/* /mutate is not registered for it and leaves it alone. */
	debug_admit(&h, HANDLER_MUTATE, "ephemeralcontainers", PRIVILEGED_DEBUGGER, &a);
	expect_silent_admission(&a);
	/* Other subresources are still no business of gpugate's. */
	debug_admit(&h, HANDLER_VALIDATE, "status", PRIVILEGED_DEBUGGER, &a);
	expect_silent_admission(&a);
	holder_free(pol);
}

Test(handler, unprivileged_debugger_is_admitted_silently)
{
	struct holder *pol = example_policy();
	struct handler h = {.policy = pol};
	struct answer a;

	debug_admit(&h, HANDLER_VALIDATE, "ephemeralcontainers",
		    "{\"name\":\"debugger-7xk2q\",\"image\":\"busybox\",\"env\":[{"
		    "\"name\":\"NVIDIA_VISIBLE_DEVICES\",\"value\":\"void\"}]}",
		    &a);
	expect_silent_admission(&a);
	/* ...and one that sets it to all is refused. */
	debug_admit(&h, HANDLER_VALIDATE, "ephemeralcontainers",
		    "{\"name\":\"dbg\",\"env\":[{\"name\":\"NVIDIA_VISIBLE_DEVICES\","
		    "\"value\":\"all\"}]}",
		    &a);
	cr_assert_not(a.allowed);
	cr_assert_str_eq(a.message,
			 "gpugate: ephemeral container \"dbg\" sets "
			 "NVIDIA_VISIBLE_DEVICES, which bypasses the device plugin's GPU "
			 "isolation: remove it and ask for GPUs with a class");
	holder_free(pol);
}

Test(handler, malformed_ephemeral_containers_are_a_bad_request)
{
	struct holder *pol = example_policy();
	struct handler h = {.policy = pol};
	struct answer a;

	debug_admit(&h, HANDLER_VALIDATE, "ephemeralcontainers", "\"debugger\"", &a);
	cr_assert_not(a.allowed);
	cr_assert_eq(a.code, 400);
	cr_assert_str_eq(a.message,
			 "gpugate: malformed Pod: spec.ephemeralContainers[0] is not "
			 "an object");
	holder_free(pol);
}
