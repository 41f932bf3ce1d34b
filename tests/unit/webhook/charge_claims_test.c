/*
 * What the usage feed derives from a DRA ResourceClaim as the API shows it
 * (webhook/charge.c with USAGE_CLAIMS): the JSON side of
 * tests/unit/policy/dra_test.c.
 */
#include "base/arena.h"
#include "base/diag.h"
#include "policy/policy.h"
#include "usage/usage.h"
#include "webhook/charge.h"
#include "webhook/holder.h"
#include "tests/unit/test_policy.h"

#include <criterion/criterion.h>
#include <string.h>

static const char policy_yaml[] =
	"version: 1\n"
	"flavors:\n"
	"  - {name: h100, resource: nvidia.com/gpu, sharing: exclusive,\n"
	"     gpusPerNode: 8, deviceClassNames: [gpu.nvidia.com]}\n"
	"classes: []\n"
	"tenants:\n"
	"  - {name: research, namespaces: [research], quota: [{flavor: h100, nominal: 8}]}\n";

static struct policy *P;

static void setup(void)
{
	P = test_policy(policy_yaml);
}

static void teardown(void)
{
	policy_free(P);
}

TestSuite(charge_claims, .init = setup, .fini = teardown);

/* Made by the resourceclaim controller for pod "p" from a template:
 * firstAvailable of 4 or 2 GPUs, allocated. */
static const char template_claim[] =
	"{\"apiVersion\": \"resource.k8s.io/v1\", \"kind\": \"ResourceClaim\","
	" \"metadata\": {\"name\": \"p-gpu-x7k2q\", \"namespace\": \"research\","
	"  \"uid\": \"uid-c\", \"ownerReferences\": [{\"apiVersion\": \"v1\","
	"  \"kind\": \"Pod\", \"name\": \"p\", \"uid\": \"uid-p\", \"controller\": true}]},"
	" \"spec\": {\"devices\": {\"requests\": [{\"name\": \"gpu\", \"firstAvailable\": ["
	"  {\"name\": \"four\", \"deviceClassName\": \"gpu.nvidia.com\","
	"   \"allocationMode\": \"ExactCount\", \"count\": 4},"
	"  {\"name\": \"two\", \"deviceClassName\": \"gpu.nvidia.com\","
	"   \"allocationMode\": \"ExactCount\", \"count\": 2}]}]}},"
	" \"status\": {\"allocation\": {\"devices\": {\"results\": []}},"
	"  \"reservedFor\": [{\"resource\": \"pods\", \"name\": \"p\", \"uid\": \"uid-p\"}]}}";

Test(charge_claims, a_claim_holds_its_devices_as_a_claim)
{
	json_t *obj = json_loads(template_claim, 0, NULL);
	struct usage_item it;
	struct arena a;

	cr_assert_not_null(obj);
	arena_init(&a);
	cr_assert_eq(charge_item(P, obj, USAGE_CLAIMS, &a, &it), 0);
	cr_assert_eq(it.kind, USAGE_CLAIMS);
	cr_assert_str_eq(it.uid, "uid-c");
	cr_assert_str_eq(it.name, "p-gpu-x7k2q");
	cr_assert_str_eq(it.tenant, "research");
	cr_assert_str_eq(it.flavor, "h100");
	cr_assert_eq(it.units, 4, "the larger alternative");
	cr_assert(it.active);
	cr_assert_null(it.owner_job_uid, "a claim rides on no Job");
	arena_release(&a);
	/* The same under the holder's policy, copied out of it. */
	{
		struct holder *h = holder_new(P);

		P = NULL; /* the holder owns it now */
		arena_init(&a);
		cr_assert_eq(charge_item_current(h, obj, USAGE_CLAIMS, &a, &it), 0);
		holder_swap(h, NULL);
		cr_assert_str_eq(it.tenant, "research");
		cr_assert_eq(it.units, 4);
		arena_release(&a);
		holder_free(h);
	}
	json_decref(obj);
}

Test(charge_claims, claims_gpugate_cannot_read_or_place_hold_nothing)
{
	static const char *const claims[] = {
		/* a count of the wrong type */
		"{\"metadata\": {\"uid\": \"u\", \"namespace\": \"research\"}, \"spec\":"
		" {\"devices\": {\"requests\": [{\"name\": \"g\", \"exactly\":"
		" {\"deviceClassName\": \"gpu.nvidia.com\", \"count\": \"2\"}}]}}}",
		/* outside every tenant */
		"{\"metadata\": {\"uid\": \"u\", \"namespace\": \"web\"}, \"spec\":"
		" {\"devices\": {\"requests\": [{\"name\": \"g\", \"exactly\":"
		" {\"deviceClassName\": \"gpu.nvidia.com\"}}]}}}",
		/* no GPU class */
		"{\"metadata\": {\"uid\": \"u\", \"namespace\": \"research\"}, \"spec\":"
		" {\"devices\": {\"requests\": [{\"name\": \"n\", \"exactly\":"
		" {\"deviceClassName\": \"nic.example.com\"}}]}}}",
	};

	for (size_t i = 0; i < sizeof(claims) / sizeof(claims[0]); i++) {
		json_t *obj = json_loads(claims[i], 0, NULL);
		struct usage_item it;
		struct arena a;

		cr_assert_not_null(obj, "%zu", i);
		arena_init(&a);
		cr_assert_eq(charge_item(P, obj, USAGE_CLAIMS, &a, &it), 0);
		cr_assert_not(it.active, "%zu", i);
		cr_assert_null(it.tenant, "%zu", i);
		cr_assert_str_eq(it.uid, "u", "known by its uid, to be forgotten");
		arena_release(&a);
		json_decref(obj);
	}
}

/* ---- claims that ride on their pod (policy/charge.h) ------------------- */

/* The kube-scheduler's claim for pod "p"'s extended resources (KEP-5004),
 * allocated and reserved for the pod; %s: the annotation's value, %s:
 * reservedFor's uid. */
static json_t *scheduler_claim(const char *annotation, const char *reserved_uid)
{
	char buf[2048];

	snprintf(buf, sizeof(buf),
		 "{\"metadata\": {\"name\": \"p-extended-resources-k8x2z\","
		 " \"namespace\": \"research\", \"uid\": \"uid-c\","
		 " \"creationTimestamp\": \"2026-12-06T01:00:00Z\","
		 " \"annotations\": {\"resource.kubernetes.io/extended-resource-claim\": \"%s\"},"
		 " \"ownerReferences\": [{\"apiVersion\": \"v1\", \"kind\": \"Pod\","
		 "  \"name\": \"p\", \"uid\": \"uid-p\", \"controller\": true}]},"
		 " \"spec\": {\"devices\": {\"requests\": [{\"name\": \"container-0-request-0\","
		 "  \"exactly\": {\"deviceClassName\": \"gpu.nvidia.com\","
		 "   \"allocationMode\": \"ExactCount\", \"count\": 2}}]}},"
		 " \"status\": {\"reservedFor\": [{\"resource\": \"pods\", \"name\": \"p\","
		 "  \"uid\": \"%s\"}]}}",
		 annotation, reserved_uid);
	return json_loads(buf, 0, NULL);
}

Test(charge_claims, the_schedulers_claim_may_ride_on_its_pod)
{
	json_t *obj = scheduler_claim("true", "uid-p");
	struct usage_item it;
	struct arena a;

	arena_init(&a);
	cr_assert_eq(charge_item(P, obj, USAGE_CLAIMS, &a, &it), 0);
	cr_assert_eq(it.units, 2);
	cr_assert_str_eq(it.owner_pod_uid, "uid-p");
	cr_assert_eq(it.created_ms, 1796518800000LL, "its earliest is by creation");
	arena_release(&a);
	json_decref(obj);
}

Test(charge_claims, a_claim_rides_only_as_the_schedulers_and_only_for_its_pod)
{
	json_t *no_annotation = scheduler_claim("false", "uid-p");
	json_t *other_consumer = scheduler_claim("true", "uid-other");
	json_t *owned_by_job = json_loads(
		"{\"metadata\": {\"name\": \"c\", \"namespace\": \"research\", \"uid\": \"u\","
		" \"annotations\": {\"resource.kubernetes.io/extended-resource-claim\": \"true\"},"
		" \"ownerReferences\": [{\"apiVersion\": \"batch/v1\", \"kind\": \"Job\","
		"  \"name\": \"p\", \"uid\": \"uid-p\", \"controller\": true}]},"
		" \"spec\": {\"devices\": {\"requests\": [{\"name\": \"g\", \"exactly\":"
		"  {\"deviceClassName\": \"gpu.nvidia.com\", \"count\": 2}}]}}}", 0, NULL);
	json_t *objs[] = {no_annotation, other_consumer, owned_by_job};

	for (size_t i = 0; i < 3; i++) {
		struct usage_item it;
		struct arena a;

		cr_assert_not_null(objs[i], "%zu", i);
		arena_init(&a);
		cr_assert_eq(charge_item(P, objs[i], USAGE_CLAIMS, &a, &it), 0);
		cr_assert_eq(it.units, 2, "%zu: charged all its devices", i);
		cr_assert_null(it.owner_pod_uid, "%zu", i);
		arena_release(&a);
		json_decref(objs[i]);
	}
}

Test(charge_claims, a_pod_says_which_claims_are_its_own)
{
	json_t *obj = json_loads(
		"{\"metadata\": {\"name\": \"p\", \"namespace\": \"research\", \"uid\": \"uid-p\"},"
		" \"spec\": {\"containers\": [{\"name\": \"c\", \"resources\":"
		"  {\"limits\": {\"nvidia.com/gpu\": \"2\"}}}],"
		"  \"resourceClaims\": [{\"name\": \"a\", \"resourceClaimName\": \"mine\"},"
		"   {\"name\": \"b\", \"resourceClaimTemplateName\": \"t\"},"
		"   {\"name\": \"c\", \"resourceClaimName\": \"also\"}]},"
		" \"status\": {\"phase\": \"Running\", \"extendedResourceClaimStatus\":"
		"  {\"resourceClaimName\": \"p-extended-resources-k8x2z\", \"requestMappings\": []}}}",
		0, NULL);
	struct usage_item it;
	struct arena a;

	cr_assert_not_null(obj);
	arena_init(&a);
	cr_assert_eq(charge_item(P, obj, USAGE_PODS, &a, &it), 0);
	cr_assert_eq(it.units, 2);
	cr_assert_str_eq(it.extended_claim, "p-extended-resources-k8x2z");
	cr_assert_str_eq(it.named_claims, "\x1fmine\x1f" "also\x1f");
	arena_release(&a);
	json_decref(obj);
}

Test(charge_claims, a_device_class_asked_for_by_name_is_charged_from_requests)
{
	static const struct {
		const char *resources;
		int64_t units;
	} cases[] = {
		{"\"requests\": {\"deviceclass.resource.kubernetes.io/gpu.nvidia.com\": \"2\"},"
		 " \"limits\": {\"deviceclass.resource.kubernetes.io/gpu.nvidia.com\": \"3\"}", 2},
		{"\"limits\": {\"deviceclass.resource.kubernetes.io/gpu.nvidia.com\": \"3\"}", 3},
		/* a class no flavor maps: not gpugate's to charge */
		{"\"requests\": {\"deviceclass.resource.kubernetes.io/mig.nvidia.com\": \"2\"}", 0},
		{"\"requests\": {\"deviceclass.resource.kubernetes.io/\": \"2\"}", 0},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char buf[1024];
		json_t *obj;
		struct usage_item it;
		struct arena a;

		snprintf(buf, sizeof(buf),
			 "{\"metadata\": {\"name\": \"p\", \"namespace\": \"research\","
			 " \"uid\": \"u\"}, \"spec\": {\"containers\": [{\"name\": \"c\","
			 " \"resources\": {%s}}]}}", cases[i].resources);
		obj = json_loads(buf, 0, NULL);
		cr_assert_not_null(obj, "%zu", i);
		arena_init(&a);
		cr_assert_eq(charge_item(P, obj, USAGE_PODS, &a, &it), 0);
		cr_assert_eq(it.units, cases[i].units, "%zu: %lld", i, (long long)it.units);
		if (cases[i].units)
			cr_assert_str_eq(it.flavor, "h100", "%zu", i);
		arena_release(&a);
		json_decref(obj);
	}
}
