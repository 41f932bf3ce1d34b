/*
 * What the usage feed derives from cluster objects (webhook/charge.c): the
 * JSON adapter around the pure rule (tests/unit/policy/charge_test.c).
 */
#include "base/arena.h"
#include "base/diag.h"
#include "policy/policy.h"
#include "usage/usage.h"
#include "webhook/charge.h"
#include "webhook/holder.h"
#include "tests/unit/test_policy.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

static const char policy_yaml[] =
	"version: 1\n"
	"flavors:\n"
	"  - {name: h100, resource: nvidia.com/gpu, sharing: exclusive,\n"
	"     nodeSelector: [\"gpu=h100\"], gpusPerNode: 8}\n"
	"  - {name: a100, resource: nvidia.com/gpu, sharing: exclusive,\n"
	"     nodeSelector: [\"gpu=a100\"], gpusPerNode: 8}\n"
	"classes: []\n"
	"tenants:\n"
	"  - {name: research, namespaces: [research],\n"
	"     quota: [{flavor: h100, nominal: 8}, {flavor: a100, nominal: 8}]}\n";

static struct policy *P;

static void setup(void)
{
	P = test_policy(policy_yaml);
}

static void teardown(void)
{
	policy_free(P);
}

TestSuite(charge_item, .init = setup, .fini = teardown);

static void item_of(const char *json, bool job, struct usage_item *it,
		    struct arena *a, json_t **keep)
{
	json_error_t e;

	*keep = json_loads(json, 0, &e);
	cr_assert_not_null(*keep, "%s", e.text);
	arena_init(a);
	cr_assert_eq(charge_item(P, *keep, job ? USAGE_JOBS : USAGE_PODS, a, it), 0);
}

Test(charge_item, a_running_pod_holds_its_units)
{
	struct usage_item it;
	struct arena a;
	json_t *obj;

	item_of("{\"metadata\":{\"uid\":\"u1\",\"namespace\":\"research\",\"name\":"
		"\"p\",\"labels\":{\"gpugate.io/flavor\":\"a100\"}},\"spec\":{"
		"\"nodeSelector\":{\"gpu\":\"h100\"},\"containers\":[{\"name\":\"a\","
		"\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"2\"}}},{\"name\":\"b\","
		"\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]},\"status\":"
		"{\"phase\":\"Running\"}}",
		false, &it, &a, &obj);
	cr_assert(it.active);
	cr_assert_str_eq(it.uid, "u1");
	cr_assert_str_eq(it.tenant, "research");
	cr_assert_str_eq(it.flavor, "h100",
			 "the node selector decides, not the (forgeable) label");
	cr_assert_eq(it.units, 3);
	arena_release(&a);
	json_decref(obj);
}

Test(charge_item, terminal_pods_hold_nothing)
{
	static const char *const phases[] = {"Succeeded", "Failed"};

	for (size_t i = 0; i < 2; i++) {
		char json[512];
		struct usage_item it;
		struct arena a;
		json_t *obj;

		snprintf(json, sizeof(json),
			 "{\"metadata\":{\"uid\":\"u\",\"namespace\":\"research\"},"
			 "\"spec\":{\"nodeSelector\":{\"gpu\":\"a100\"},\"containers\":"
			 "[{\"name\":\"a\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":"
			 "\"1\"}}}]},\"status\":{\"phase\":\"%s\"}}",
			 phases[i]);
		item_of(json, false, &it, &a, &obj);
		cr_assert_not(it.active, "%s", phases[i]);
		cr_assert_str_eq(it.flavor, "a100");
		arena_release(&a);
		json_decref(obj);
	}
}

Test(charge_item, a_job_holds_its_gang_until_it_finishes)
{
	struct usage_item it;
	struct arena a;
	json_t *obj;

	item_of("{\"metadata\":{\"uid\":\"j\",\"namespace\":\"research\"},\"spec\":"
		"{\"parallelism\":3,\"template\":{\"spec\":{\"nodeSelector\":{\"gpu\":"
		"\"h100\"},\"containers\":[{\"name\":\"a\",\"resources\":{\"limits\":"
		"{\"nvidia.com/gpu\":\"2\"}}}]}}}}",
		true, &it, &a, &obj);
	cr_assert(it.active);
	cr_assert_eq(it.kind, USAGE_JOBS);
	cr_assert_eq(it.units, 6);
	arena_release(&a);
	json_decref(obj);
	item_of("{\"metadata\":{\"uid\":\"j\",\"namespace\":\"research\"},\"spec\":"
		"{\"parallelism\":3,\"template\":{\"spec\":{\"containers\":[{\"name\":"
		"\"a\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"2\"}}}]}}},"
		"\"status\":{\"conditions\":[{\"type\":\"Complete\",\"status\":\"True\"}]}}",
		true, &it, &a, &obj);
	cr_assert_not(it.active);
	arena_release(&a);
	json_decref(obj);
	item_of("{\"metadata\":{\"uid\":\"j\",\"namespace\":\"research\"},\"spec\":"
		"{\"suspend\":true,\"template\":{\"spec\":{\"containers\":[{\"name\":"
		"\"a\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"2\"}}}]}}}}",
		true, &it, &a, &obj);
	cr_assert_not(it.active, "suspended: its pods are gone, resuming is judged");
	cr_assert_eq(it.per_pod, 2);
	arena_release(&a);
	json_decref(obj);
}

Test(charge_item, outside_tenants_or_without_gpus_nothing_is_held)
{
	struct usage_item it;
	struct arena a;
	json_t *obj;

	item_of("{\"metadata\":{\"uid\":\"u\",\"namespace\":\"web\"},\"spec\":"
		"{\"containers\":[{\"name\":\"a\",\"resources\":{\"limits\":"
		"{\"nvidia.com/gpu\":\"1\"}}}]}}",
		false, &it, &a, &obj);
	cr_assert_not(it.active);
	arena_release(&a);
	json_decref(obj);
	item_of("{\"metadata\":{\"uid\":\"u\",\"namespace\":\"research\"},\"spec\":"
		"{\"containers\":[{\"name\":\"a\"}]}}",
		false, &it, &a, &obj);
	cr_assert_not(it.active);
	arena_release(&a);
	json_decref(obj);
}

Test(charge_item, objects_without_uid_are_refused)
{
	json_t *obj = json_loads("{\"metadata\":{}}", 0, NULL);
	struct usage_item it;
	struct arena a;

	arena_init(&a);
	cr_assert_eq(charge_item(P, obj, USAGE_PODS, &a, &it), -1);
	arena_release(&a);
	json_decref(obj);
}

Test(charge_item, a_field_gpugate_cannot_read_holds_nothing)
{
	struct usage_item it;
	struct arena a;
	json_t *obj;

	item_of("{\"metadata\":{\"uid\":\"u\",\"namespace\":\"research\",\"name\":"
		"\"p\"},\"spec\":{\"containers\":[{\"name\":\"a\",\"env\":7,"
		"\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]}}",
		false, &it, &a, &obj);
	cr_assert_not(it.active);
	cr_assert_str_eq(it.uid, "u", "still known by its uid, to be forgotten");
	cr_assert_str_eq(it.name, "p");
	cr_assert_null(it.tenant);
	arena_release(&a);
	json_decref(obj);
}

Test(charge_item, a_job_pod_names_its_job_only_with_the_controllers_label)
{
	static const char tmpl[] =
		"{\"metadata\":{\"uid\":\"p\",\"namespace\":\"research\","
		"\"labels\":{\"batch.kubernetes.io/controller-uid\":\"%s\"},"
		"\"ownerReferences\":[{\"apiVersion\":\"batch/v1\",\"kind\":\"Job\","
		"\"name\":\"j\",\"uid\":\"uid-j\",\"controller\":true}]},\"spec\":"
		"{\"containers\":[{\"name\":\"a\",\"resources\":{\"limits\":"
		"{\"nvidia.com/gpu\":\"2\"}}}]}}";
	static const char *const labels[] = {"uid-j", "uid-other", ""};
	struct usage_item it;
	struct arena a;
	json_t *obj;

	for (size_t i = 0; i < 3; i++) {
		char json[1024];

		snprintf(json, sizeof(json), tmpl, labels[i]);
		item_of(json, false, &it, &a, &obj);
		cr_assert(it.active);
		cr_assert_eq(it.per_pod, 2);
		if (i == 0)
			cr_assert_str_eq(it.owner_job_uid, "uid-j");
		else
			cr_assert_null(it.owner_job_uid,
				       "an ownerReference alone is forged: %s", labels[i]);
		arena_release(&a);
		json_decref(obj);
	}
}

/* ---- under the holder's policy (the feed's charge callback) ------------- */

static const char running_pod[] =
	"{\"metadata\":{\"uid\":\"u1\",\"namespace\":\"research\"},\"spec\":"
	"{\"nodeSelector\":{\"gpu\":\"a100\"},\"containers\":[{\"name\":\"a\","
	"\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"2\"}}}]}}";

Test(charge_item, the_current_policy_and_an_item_that_outlives_a_reload)
{
	struct holder *h = holder_new(P);
	json_t *obj = json_loads(running_pod, 0, NULL);
	struct usage_item it;
	struct arena a;

	P = NULL; /* the holder owns it now (teardown frees NULL) */
	cr_assert_not_null(h);
	arena_init(&a);
	cr_assert_eq(charge_item_current(h, obj, USAGE_PODS, &a, &it), 0);
	/* The policy the item was computed under is freed here: its names
	 * must not be (AddressSanitizer would see the read below). */
	holder_swap(h, NULL);
	cr_assert(it.active);
	cr_assert_str_eq(it.tenant, "research");
	cr_assert_str_eq(it.flavor, "a100");
	cr_assert_eq(it.units, 2);
	arena_release(&a);
	arena_init(&a);
	cr_assert_eq(charge_item_current(h, obj, USAGE_PODS, &a, &it), -1,
		     "no policy loaded: the object is left out");
	arena_release(&a);
	json_decref(obj);
	holder_free(h);
}
