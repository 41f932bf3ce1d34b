/*
 * A class of a DRA flavor from end to end without a server (docs/policy.md,
 * "DRA flavors"): /mutate names gpugate's claim template in the pod and
 * the GPU container uses it; /validate checks it is there; the charge
 * reads the count from the template's name; the claim made from the
 * template is the flavor's and may ride on its pod; and gpugate's entry
 * and template names are nobody else's.
 */
#include "base/arena.h"
#include "base/diag.h"
#include "policy/charge.h"
#include "policy/decide.h"
#include "policy/dra-template.h"
#include "policy/kinds.h"
#include "usage/usage.h"
#include "webhook/apply.h"
#include "webhook/charge.h"
#include "webhook/facts.h"
#include "tests/unit/test_policy.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

static const char POLICY[] =
	"version: 1\n"
	"flavors:\n"
	"  - name: h100-dra\n"
	"    sharing: exclusive\n"
	"    gpusPerNode: 8\n"
	"    nodeSelector: [\"nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3\"]\n"
	"    tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]\n"
	"    dra:\n"
	"      deviceClassName: gpu.nvidia.com\n"
	"      driver: gpu.nvidia.com\n"
	"      attributes: [\"productName=NVIDIA H100 80GB HBM3\"]\n"
	"classes:\n"
	"  - {name: train, flavor: h100-dra, gpus: 2, maxGpus: 8}\n"
	"tenants:\n"
	"  - {name: research, namespaces: [research], classes: [train],\n"
	"     quota: [{flavor: h100-dra, nominal: 32}]}\n";

static struct policy *P;
static char TEMPLATE4[DRA_TEMPLATE_NAME_MAX];

static void setup(void)
{
	P = test_policy(POLICY);
	cr_assert(dra_template_name(policy_class_find(P, "train"), 4, TEMPLATE4,
				    sizeof(TEMPLATE4)));
}

static void teardown(void)
{
	policy_free(P);
}

TestSuite(dra_class, .init = setup, .fini = teardown);

struct run {
	struct arena a;
	struct workload wl;
	struct decision dec;
};

static json_t *parse(const char *json)
{
	json_error_t e;
	json_t *v = json_loads(json, 0, &e);

	cr_assert_not_null(v, "bad test JSON: %s: %s", e.text, json);
	return v;
}

/* The keeper's board, as a test says it. */
static enum decide_templates_served board_served = DECIDE_TEMPLATES_UNKNOWN;
static const char *board_taken; /* the one taken name, or NULL */

static enum decide_templates_served served_fn(void *ctx)
{
	(void)ctx;
	return board_served;
}

static bool taken_fn(void *ctx, const char *ns, const char *name)
{
	(void)ctx;
	return board_taken && strcmp(ns, "research") == 0 && strcmp(name, board_taken) == 0;
}

static const struct decide_template_source board = {served_fn, taken_fn, NULL};

static void decide_on(struct run *r, const json_t *obj, enum decide_phase phase)
{
	struct decide_input in = {.policy = P, .wl = &r->wl, .phase = phase,
				  .templates = &board};
	const char *kind = json_string_value(json_object_get(obj, "kind"));
	struct diag d;

	arena_init(&r->a);
	memset(&r->wl, 0, sizeof(r->wl));
	r->wl.def = strcmp(kind, "ResourceClaim") == 0
			    ? kinds_find("resource.k8s.io", "v1", "ResourceClaim")
			    : kinds_find("", "v1", "Pod");
	r->wl.kind = r->wl.def->wl;
	r->wl.op = WL_CREATE;
	r->wl.namespace = "research";
	r->wl.request_uid = "req-1";
	diag_init(&d);
	cr_assert_eq(facts_extract(obj, &r->wl, &r->a, &d), 0, "%s", diag_text(&d));
	decide(&in, NULL, &r->dec);
}

/* A pod of class train asking for gpus GPUs (NULL: the class's count),
 * spec.resourceClaims extra ("" for none). */
static json_t *pod(const char *gpus, const char *claims)
{
	char json[2048];

	snprintf(json, sizeof(json),
		 "{\"apiVersion\": \"v1\", \"kind\": \"Pod\", \"metadata\": {\"name\": \"p\","
		 " \"namespace\": \"research\", \"labels\": {\"gpugate.io/class\": \"train\"%s%s%s}},"
		 " \"spec\": {%s\"containers\": [{\"name\": \"trainer\", \"image\": \"x\"}]}}",
		 gpus ? ", \"gpugate.io/gpus\": \"" : "", gpus ? gpus : "", gpus ? "\"" : "",
		 claims);
	return parse(json);
}

Test(dra_class, mutate_names_the_template_and_the_container_uses_it)
{
	json_t *obj = pod("4", ""), *out = json_deep_copy(obj), *want;
	struct run r;
	struct diag d;
	char json[1024];

	decide_on(&r, obj, DECIDE_MUTATE);
	cr_assert(r.dec.allowed, "%s", r.dec.message);
	cr_assert_null(r.dec.plan.resource, "no extended resource");
	cr_assert_str_eq(r.dec.plan.dra_template, TEMPLATE4);
	cr_assert_eq(r.dec.claim.units, 4);
	cr_assert_str_eq(r.dec.claim.flavor->name, "h100-dra");
	diag_init(&d);
	cr_assert_eq(apply_plan(out, &r.wl, &r.dec.plan, P, &d), 0, "%s", diag_text(&d));
	snprintf(json, sizeof(json),
		 "[{\"name\": \"" DRA_TEMPLATE_ENTRY "\", \"resourceClaimTemplateName\": \"%s\"}]",
		 TEMPLATE4);
	want = parse(json);
	cr_assert(json_equal(json_object_get(json_object_get(out, "spec"), "resourceClaims"),
			     want), "%s", json_dumps(out, 0));
	json_decref(want);
	{
		json_t *ct = json_array_get(json_object_get(json_object_get(out, "spec"),
							    "containers"), 0);
		json_t *res = json_object_get(ct, "resources");

		want = parse("[{\"name\": \"" DRA_TEMPLATE_ENTRY "\"}]");
		cr_assert(json_equal(json_object_get(res, "claims"), want), "%s",
			  json_dumps(ct, 0));
		json_decref(want);
		cr_assert_null(json_object_get(res, "limits"), "no GPU limit: %s",
			       json_dumps(ct, 0));
	}
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(
				 json_object_get(out, "spec"), "nodeSelector"),
				 "nvidia.com/gpu.product")),
			 "NVIDIA-H100-80GB-HBM3");
	arena_release(&r.a);

	/* Mutated again: nothing changes (the same entry and claim). */
	{
		json_t *again = json_deep_copy(out);

		decide_on(&r, out, DECIDE_MUTATE);
		cr_assert(r.dec.allowed, "%s", r.dec.message);
		cr_assert_eq(apply_plan(again, &r.wl, &r.dec.plan, P, &d), 0);
		cr_assert(json_equal(again, out), "%s", json_dumps(again, 0));
		json_decref(again);
		arena_release(&r.a);
	}

	/* /validate: admitted, charged 4 of h100-dra. */
	decide_on(&r, out, DECIDE_VALIDATE);
	cr_assert(r.dec.allowed, "%s", r.dec.message);
	cr_assert(r.dec.claim.needed);
	cr_assert_eq(r.dec.claim.units, 4);
	{
		struct quota_result q = {.position = QUOTA_NOMINAL, .requested = 4,
					 .used = 8, .nominal = 32};
		struct decide_input in = {.policy = P, .wl = &r.wl, .phase = DECIDE_VALIDATE};

		decide_quota(&in, &r.dec, &q);
		cr_assert_str_eq(r.dec.success, "gpugate: train -> 4 x h100-dra (DRA) for "
						"tenant research (12/32 in use)");
	}
	arena_release(&r.a);

	/* The feed charges the pod from its template's name. */
	{
		struct usage_item it;
		struct arena a;

		json_object_set_new(json_object_get(out, "metadata"), "uid", json_string("uid-p"));
		arena_init(&a);
		cr_assert_eq(charge_item(P, out, USAGE_PODS, &a, &it), 0);
		cr_assert_str_eq(it.flavor, "h100-dra");
		cr_assert_eq(it.units, 4);
		cr_assert(it.active);
		arena_release(&a);
	}
	json_decref(obj);
	json_decref(out);
}

Test(dra_class, validate_refuses_a_pod_without_the_template)
{
	json_t *obj = pod("4", "");
	struct run r;

	decide_on(&r, obj, DECIDE_VALIDATE);
	cr_assert_not(r.dec.allowed);
	cr_assert_str_eq(r.dec.rule, "not-mutated");
	arena_release(&r.a);
	json_decref(obj);
}

Test(dra_class, gpugates_entry_and_templates_are_nobody_elses)
{
	static const char *const cases[][2] = {
		/* another template under gpugate's entry */
		{"\"resourceClaims\": [{\"name\": \"gpugate-gpu\", \"resourceClaimTemplateName\": "
		 "\"mine\"}], ", "class-conflict"},
		/* gpugate's template under another entry */
		{"\"resourceClaims\": [{\"name\": \"x\", \"resourceClaimTemplateName\": "
		 "\"gpugate.train.4.abcdef\"}], ", "class-conflict"},
		/* gpugate's template of another count */
		{"\"resourceClaims\": [{\"name\": \"gpugate-gpu\", \"resourceClaimTemplateName\": "
		 "\"gpugate.train.2.abcdef\"}], ", "gpus-conflict"},
	};
	struct run r;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_t *obj = pod("4", cases[i][0]);

		decide_on(&r, obj, DECIDE_MUTATE);
		cr_assert_not(r.dec.allowed, "%zu", i);
		cr_assert_str_eq(r.dec.rule, cases[i][1], "%zu: %s", i, r.dec.message);
		arena_release(&r.a);
		json_decref(obj);
	}
	/* Without a class, gpugate's entry is not for the taking either. */
	{
		char json[1024];
		json_t *obj;

		snprintf(json, sizeof(json),
			 "{\"apiVersion\": \"v1\", \"kind\": \"Pod\", \"metadata\": {\"name\": \"p\","
			 " \"namespace\": \"research\"}, \"spec\": {\"resourceClaims\": [{\"name\":"
			 " \"gpugate-gpu\", \"resourceClaimTemplateName\": \"%s\"}], \"containers\":"
			 " [{\"name\": \"c\", \"image\": \"x\", \"resources\": {\"claims\": [{\"name\":"
			 " \"gpugate-gpu\"}]}}]}}",
			 TEMPLATE4);
		obj = parse(json);
		decide_on(&r, obj, DECIDE_VALIDATE);
		cr_assert_not(r.dec.allowed);
		cr_assert_str_eq(r.dec.message,
				 "gpugate: spec.resourceClaims entry \"gpugate-gpu\" is gpugate's: "
				 "it names the claim template of the GPU class in label "
				 "gpugate.io/class; rename your entry, or set the label");
		arena_release(&r.a);
		json_decref(obj);
	}
}

Test(dra_class, the_claim_made_from_the_template_is_the_flavors_and_rides)
{
	/* As the resourceclaim controller makes it: the template's spec, its
	 * spec.metadata annotations, the entry's annotation, the pod as
	 * controller.  gpu.nvidia.com maps to no flavor here (it is in the
	 * default gpuDeviceClassNames: a raw GPU class for any other claim). */
	json_t *obj = parse(
		"{\"apiVersion\": \"resource.k8s.io/v1\", \"kind\": \"ResourceClaim\","
		" \"metadata\": {\"name\": \"p-gpugate-gpu-x7k2q\", \"namespace\": \"research\","
		"  \"uid\": \"uid-c\", \"annotations\": {\"gpugate.io/flavor\": \"h100-dra\","
		"   \"resource.kubernetes.io/pod-claim-name\": \"gpugate-gpu\"},"
		"  \"ownerReferences\": [{\"apiVersion\": \"v1\", \"kind\": \"Pod\", \"name\": \"p\","
		"   \"uid\": \"uid-p\", \"controller\": true}]},"
		" \"spec\": {\"devices\": {\"requests\": [{\"name\": \"gpu\", \"exactly\": {"
		"  \"deviceClassName\": \"gpu.nvidia.com\", \"allocationMode\": \"ExactCount\","
		"  \"count\": 4}}]}}}");
	json_t *raw = json_deep_copy(obj);
	struct usage_item it;
	struct arena a;
	struct run r;

	arena_init(&a);
	cr_assert_eq(charge_item(P, obj, USAGE_CLAIMS, &a, &it), 0);
	cr_assert_str_eq(it.flavor, "h100-dra");
	cr_assert_eq(it.units, 4);
	cr_assert_str_eq(it.owner_pod_uid, "uid-p");
	arena_release(&a);
	decide_on(&r, obj, DECIDE_VALIDATE);
	cr_assert(r.dec.allowed, "%s", r.dec.message);
	cr_assert(r.dec.claim.needed);
	cr_assert_str_eq(r.dec.claim.flavor->name, "h100-dra");
	cr_assert_str_eq(r.dec.claim.owner_pod_uid, "uid-p");
	arena_release(&r.a);
	/* Without gpugate's annotations it is a raw GPU claim. */
	json_object_del(json_object_get(json_object_get(raw, "metadata"), "annotations"),
			"gpugate.io/flavor");
	decide_on(&r, raw, DECIDE_VALIDATE);
	cr_assert_not(r.dec.allowed);
	cr_assert_str_eq(r.dec.rule, "raw-request");
	arena_release(&r.a);
	json_decref(obj);
	json_decref(raw);
}

Test(dra_class, a_template_gpugate_cannot_have_is_said_at_the_door)
{
	json_t *obj = pod("4", "");
	char want[512];
	struct run r;

	/* Not served: every DRA class pod. */
	board_served = DECIDE_TEMPLATES_NOT_SERVED;
	decide_on(&r, obj, DECIDE_MUTATE);
	cr_assert_not(r.dec.allowed);
	cr_assert_str_eq(r.dec.rule, "claim-template");
	cr_assert_str_eq(r.dec.message,
			 "gpugate: class \"train\" is served through DRA (resource.k8s.io/v1 "
			 "ResourceClaimTemplates), which this cluster does not serve; ask the "
			 "platform team (Kubernetes 1.34 or later) or use another class");
	arena_release(&r.a);
	/* Served, its name a stranger's. */
	board_served = DECIDE_TEMPLATES_SERVED;
	board_taken = TEMPLATE4;
	decide_on(&r, obj, DECIDE_MUTATE);
	cr_assert_not(r.dec.allowed);
	snprintf(want, sizeof(want),
		 "gpugate: claim template \"%s\" in namespace \"research\" is not gpugate's "
		 "(no label app.kubernetes.io/managed-by=gpugate); delete or rename it",
		 TEMPLATE4);
	cr_assert_str_eq(r.dec.message, want);
	arena_release(&r.a);
	/* Another count's template is free: admitted. */
	json_decref(obj);
	obj = pod("2", "");
	decide_on(&r, obj, DECIDE_MUTATE);
	cr_assert(r.dec.allowed, "%s", r.dec.message);
	arena_release(&r.a);
	board_taken = NULL;
	board_served = DECIDE_TEMPLATES_UNKNOWN;
	json_decref(obj);
}
