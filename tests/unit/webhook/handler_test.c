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
#include "tests/unit/test_policy.h"

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

/* Sends review (request.uid `uid`) to endpoint ep; its answer into *a, and
 * the first warning into warning (size > 0; "" when none; may be NULL). */
static void admit_review(struct handler *h, enum handler_endpoint ep, const char *review,
			 const char *uid, struct answer *a, char *warning, size_t wsize)
{
	struct handler_reply r;
	json_error_t e;
	json_t *resp, *out, *status, *w;
	const char *msg;

	handler_admit(h, ep, review, strlen(review), &r);
	cr_assert_eq(r.status, 200, "%d %s", r.status, r.body);
	resp = json_loadb(r.body, r.len, 0, &e);
	free(r.body);
	cr_assert_not_null(resp, "%s", e.text);
	out = json_object_get(resp, "response");
	cr_assert_str_eq(json_string_value(json_object_get(out, "uid")), uid);
	status = json_object_get(out, "status");
	memset(a, 0, sizeof(*a));
	a->allowed = json_is_true(json_object_get(out, "allowed"));
	a->code = (long)json_integer_value(json_object_get(status, "code"));
	msg = json_string_value(json_object_get(status, "message"));
	snprintf(a->message, sizeof(a->message), "%s", msg ? msg : "");
	a->patch = json_object_get(out, "patch") != NULL;
	w = json_object_get(out, "warnings");
	a->warnings = w != NULL;
	if (warning)
		snprintf(warning, wsize, "%s",
			 json_array_size(w) ? json_string_value(json_array_get(w, 0)) : "");
	json_decref(resp);
}

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
	admit_review(h, ep, review, "u-debug", a, NULL, 0);
	free(review);
}

static struct holder *example_policy(void)
{
	struct holder *h;

	log_set_level(LOG_ERROR);
	h = holder_new(test_policy_file("policy/examples/gpu-cluster.yaml"));
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

/* ---- kubectl scale: the scale subresource of a Deployment --------------- */

/* A parent source: answers `object` (NULL: fails with `error`), and
 * records the path asked for. */
struct fake_parents {
	const char *object;
	const char *error;
	char path[512];
	int calls;
};

static json_t *fake_get(void *ctx, const char *path, char *err, size_t errsz)
{
	struct fake_parents *f = ctx;
	json_error_t e;
	json_t *obj;

	f->calls++;
	snprintf(f->path, sizeof(f->path), "%s", path);
	if (!f->object) {
		snprintf(err, errsz, "%s", f->error);
		return NULL;
	}
	obj = json_loads(f->object, 0, &e);
	cr_assert_not_null(obj, "%s", e.text);
	return obj;
}

/* The Deployment "serve" in research as the API holds it: class
 * train-large, 8 H100 a pod. */
#define SERVE(replicas, uid)                                                  \
	"{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{"    \
	"\"name\":\"serve\",\"namespace\":\"research\",\"uid\":\"" uid "\"},"     \
	"\"spec\":{\"replicas\":" replicas ",\"selector\":{\"matchLabels\":{"   \
	"\"app\":\"serve\"}},\"template\":{\"metadata\":{\"labels\":{\"app\":"   \
	"\"serve\",\"gpugate.io/class\":\"train-large\"}},\"spec\":{"           \
	"\"containers\":[{\"name\":\"m\",\"image\":\"x\",\"resources\":{"        \
	"\"limits\":{\"nvidia.com/gpu\":\"8\"}}}]}}}}"

/* An UPDATE of subresource scale of `resource` "serve" in namespace ns,
 * from `before` to `now` replicas ("" leaves spec.replicas out, as the API
 * does for 0). */
static void scale_admit(struct handler *h, enum handler_endpoint ep, const char *ns,
			const char *resource, const char *before, const char *now,
			struct answer *a, char *warning, size_t wsize)
{
	char *review;

	cr_assert_gt(asprintf(&review,
			      "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":"
			      "\"AdmissionReview\",\"request\":{\"uid\":\"u-scale\","
			      "\"kind\":{\"group\":\"autoscaling\",\"version\":\"v1\","
			      "\"kind\":\"Scale\"},\"resource\":{\"group\":\"apps\","
			      "\"version\":\"v1\",\"resource\":\"%s\"},\"subResource\":"
			      "\"scale\",\"name\":\"serve\",\"namespace\":\"%s\","
			      "\"operation\":\"UPDATE\",\"object\":{\"kind\":\"Scale\","
			      "\"apiVersion\":\"autoscaling/v1\",\"metadata\":{\"name\":"
			      "\"serve\",\"namespace\":\"%s\",\"uid\":\"d-1\"},\"spec\":"
			      "{%s%s}},\"oldObject\":{\"kind\":\"Scale\",\"apiVersion\":"
			      "\"autoscaling/v1\",\"metadata\":{\"name\":\"serve\","
			      "\"uid\":\"d-1\"},\"spec\":{%s%s}},\"dryRun\":false}}",
			      resource, ns, ns, now[0] ? "\"replicas\":" : "", now,
			      before[0] ? "\"replicas\":" : "", before),
		     0);
	admit_review(h, ep, review, "u-scale", a, warning, wsize);
	free(review);
}

Test(handler, a_scale_raise_is_judged_against_the_parents_template)
{
	struct holder *pol = example_policy();
	struct fake_parents f = {.object = SERVE("1", "d-1")};
	struct handler_parents src = {fake_get, &f};
	struct handler h = {.policy = pol, .parents = &src};
	struct answer a;
	char w[512];

	/* 6 pods of 8 H100: 48, beyond research's ceiling. */
	scale_admit(&h, HANDLER_VALIDATE, "research", "deployments", "1", "6", &a, w,
		    sizeof(w));
	cr_assert_eq(f.calls, 1);
	cr_assert_str_eq(f.path, "/apis/apps/v1/namespaces/research/deployments/serve");
	cr_assert_not(a.allowed);
	cr_assert_eq(a.code, 403);
	cr_assert_str_eq(a.message,
			 "gpugate: Deployment \"serve\" can never run all its replicas: "
			 "needs 48 h100-80gb (6 replicas x 8), tenant \"research\" may hold "
			 "at most 40 (nominal 32 + 8 that cohort \"lab\" can lend)");
	cr_assert_not(a.patch);

	/* Within it: admitted; the line that says what the pods will ask is
	 * no problem, so no warning (settings.admissionWarnings problems). */
	scale_admit(&h, HANDLER_VALIDATE, "research", "deployments", "1", "2", &a, w,
		    sizeof(w));
	cr_assert(a.allowed, "%s", a.message);
	cr_assert_not(a.patch);
	cr_assert_not(a.warnings);

	/* A scale down never asks for more: not even read.  Nor is 0. */
	scale_admit(&h, HANDLER_VALIDATE, "research", "deployments", "9", "6", &a, w,
		    sizeof(w));
	expect_silent_admission(&a);
	scale_admit(&h, HANDLER_VALIDATE, "research", "deployments", "6", "", &a, w,
		    sizeof(w));
	expect_silent_admission(&a);
	cr_assert_eq(f.calls, 2);

	/* A StatefulSet's scale reads the StatefulSet. */
	f.object = "{\"apiVersion\":\"apps/v1\",\"kind\":\"StatefulSet\",\"metadata\":"
		   "{\"name\":\"serve\",\"uid\":\"d-1\"},\"spec\":{\"replicas\":1,"
		   "\"template\":{\"metadata\":{\"labels\":{\"gpugate.io/class\":"
		   "\"train-large\"}},\"spec\":{\"containers\":[{\"name\":\"m\"}]}}}}";
	scale_admit(&h, HANDLER_VALIDATE, "research", "statefulsets", "", "6", &a, w,
		    sizeof(w));
	cr_assert_str_eq(f.path, "/apis/apps/v1/namespaces/research/statefulsets/serve");
	cr_assert_not(a.allowed);
	cr_assert(strstr(a.message, "StatefulSet \"serve\" can never run all its replicas"),
		  "%s", a.message);
	holder_free(pol);
}

Test(handler, a_scale_that_cannot_be_judged_passes_with_a_warning)
{
	struct holder *pol = example_policy();
	struct fake_parents f = {.error = "GET /apis/apps/v1/namespaces/research/"
					  "deployments/serve: no answer within 2000 ms"};
	struct handler_parents src = {fake_get, &f};
	struct handler h = {.policy = pol, .parents = &src};
	struct answer a;
	char w[512];

	scale_admit(&h, HANDLER_VALIDATE, "research", "deployments", "1", "6", &a, w,
		    sizeof(w));
	cr_assert(a.allowed);
	cr_assert_str_eq(w, "gpugate: the scale of Deployment \"serve\" to 6 was not "
			    "judged: GET /apis/apps/v1/namespaces/research/deployments/"
			    "serve: no answer within 2000 ms; its pods still meet the "
			    "quota one by one");

	/* The API answered with another object (deleted and made again). */
	f.object = SERVE("1", "d-2");
	scale_admit(&h, HANDLER_VALIDATE, "research", "deployments", "1", "6", &a, w,
		    sizeof(w));
	cr_assert(a.allowed);
	cr_assert(strstr(w, "was not judged: the API returned another object (kind "
			    "Deployment, uid d-2)"),
		  "%s", w);

	/* An object that does not read as a Deployment: not judged either. */
	f.object = "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":"
		   "{\"name\":\"serve\",\"uid\":\"d-1\"},\"spec\":{\"template\":7}}";
	scale_admit(&h, HANDLER_VALIDATE, "research", "deployments", "1", "6", &a, w,
		    sizeof(w));
	cr_assert(a.allowed);
	cr_assert_str_eq(w, "gpugate: the scale of Deployment \"serve\" to 6 was not "
			    "judged: the Deployment does not read: spec.template is not an "
			    "object; its pods still meet the quota one by one");

	/* A name that is no Kubernetes name is never put into a path. */
	f.calls = 0;
	scale_admit(&h, HANDLER_VALIDATE, "research/../kube-system", "deployments", "1",
		    "6", &a, w, sizeof(w));
	cr_assert_eq(f.calls, 0);
	cr_assert(a.allowed);
	cr_assert(strstr(w, "not a Kubernetes name"), "%s", w);

	/* A malformed Scale is a bad request. */
	scale_admit(&h, HANDLER_VALIDATE, "research", "deployments", "1", "\"6\"", &a, w,
		    sizeof(w));
	cr_assert_not(a.allowed);
	cr_assert_eq(a.code, 400);
	cr_assert_str_eq(a.message, "gpugate: malformed Scale: spec.replicas is not a "
				    "whole number");
	holder_free(pol);
}

Test(handler, without_the_api_or_at_mutate_a_scale_is_not_gpugates_business)
{
	struct holder *pol = example_policy();
	struct fake_parents f = {.object = SERVE("1", "d-1")};
	struct handler_parents src = {fake_get, &f};
	struct handler embedded = {.policy = pol};
	struct handler h = {.policy = pol, .parents = &src};
	struct answer a;
	char w[512];

	scale_admit(&embedded, HANDLER_VALIDATE, "research", "deployments", "1", "6", &a,
		    w, sizeof(w));
	expect_silent_admission(&a);
	scale_admit(&h, HANDLER_MUTATE, "research", "deployments", "1", "6", &a, w,
		    sizeof(w));
	expect_silent_admission(&a);
	/* Nor a DaemonSet's or a Job's (they have no scale subresource). */
	scale_admit(&h, HANDLER_VALIDATE, "research", "jobs", "1", "6", &a, w, sizeof(w));
	expect_silent_admission(&a);
	cr_assert_eq(f.calls, 0);
	holder_free(pol);
}
