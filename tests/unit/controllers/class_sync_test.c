/*
 * controllers/class-sync.c: which GPUClass objects a sync creates,
 * replaces and deletes given the policy and the API's list of the owned
 * ones (class_sync_plan()), and when it tries again after a failure
 * (worker_retry_s()).
 */
#include "controllers/class-sync.h"
#include "controllers/worker.h"
#include "policy/policy.h"
#include "report/classes.h"
#include "tests/unit/test_policy.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

static const char POLICY[] =
	"version: 1\n"
	"flavors:\n"
	"  - {name: h100, resource: nvidia.com/gpu, sharing: exclusive, gpusPerNode: 8}\n"
	"classes:\n"
	"  - {name: big, flavor: h100, gpus: 8}\n"
	"  - {name: small, flavor: h100, gpus: 1, maxGpus: 4}\n"
	"  - {name: new, flavor: h100, gpus: 2}\n"
	"  - {name: Bad_Name, flavor: h100, gpus: 1}\n"
	"tenants:\n"
	"  - {name: a, namespaces: [a], quota: [{flavor: h100, nominal: 8}]}\n";

/* An owned object as the API lists it. */
static json_t *listed(const char *name, const char *uid, const char *rv, json_t *spec)
{
	return json_pack("{s:s, s:s, s:{s:s, s:s, s:s, s:{s:s}}, s:o}", "apiVersion",
			 CLASSES_API_VERSION, "kind", "GPUClass", "metadata", "name", name,
			 "uid", uid, "resourceVersion", rv, "labels", CLASSES_OWNER_LABEL,
			 CLASSES_OWNER, "spec", spec);
}

/* "name name ..." of a plan's list. */
static void expect_names(const json_t *objects, const char *want)
{
	char got[256] = "";
	size_t i;
	const json_t *o;

	json_array_foreach(objects, i, o) {
		const json_t *n = json_object_get(json_object_get(o, "metadata"), "name");

		strcat(got, i ? " " : "");
		strcat(got, n ? json_string_value(n) : json_string_value(o));
	}
	cr_expect_str_eq(got, want);
}

Test(class_sync, creates_replaces_and_deletes_what_differs_from_the_policy)
{
	struct policy *p = test_policy(POLICY);
	json_t *items = json_array(), *list;
	struct classes_plan pl;
	char err[64] = "";

	/* big as the policy has it; small stale; gone no longer in the
	 * policy; new not listed at all */
	json_array_append_new(items, listed("big", "u1", "10",
					    classes_spec_new(p, policy_class_find(p, "big"))));
	json_array_append_new(items, listed("small", "u2", "11",
					    json_pack("{s:s, s:i}", "flavor", "h100", "gpus", 2)));
	json_array_append_new(items, listed("gone", "u3", "12", json_object()));
	list = json_pack("{s:s, s:o}", "kind", "GPUClassList", "items", items);
	cr_assert_eq(class_sync_plan(p, list, &pl, err, sizeof(err)), 0, "%s", err);
	expect_names(pl.create, "new");
	expect_names(pl.update, "small");
	expect_names(pl.remove, "gone");
	expect_names(pl.skipped, "Bad_Name");
	cr_expect_eq(pl.unchanged, 1, "big");
	/* replaced at the version listed; deleted with the uid listed */
	cr_expect_str_eq(json_string_value(json_object_get(
				 json_object_get(json_array_get(pl.update, 0), "metadata"),
				 "resourceVersion")),
			 "11");
	cr_expect_str_eq(json_string_value(json_object_get(
				 json_object_get(json_array_get(pl.remove, 0), "metadata"),
				 "uid")),
			 "u3");
	classes_plan_release(&pl);
	json_decref(list);
	policy_free(p);
}

Test(class_sync, an_empty_list_creates_every_class_that_can_be_published)
{
	struct policy *p = test_policy(POLICY);
	json_t *list = json_pack("{s:[]}", "items");
	struct classes_plan pl;
	char err[64] = "";

	cr_assert_eq(class_sync_plan(p, list, &pl, err, sizeof(err)), 0, "%s", err);
	expect_names(pl.create, "big small new");
	cr_expect_eq(json_array_size(pl.update) + json_array_size(pl.remove), 0);
	cr_expect_eq(pl.unchanged, 0);
	classes_plan_release(&pl);
	json_decref(list);
	policy_free(p);
}

Test(class_sync, an_answer_without_items_is_an_error)
{
	struct policy *p = test_policy(POLICY);
	json_t *list = json_pack("{s:s}", "kind", "Status");
	struct classes_plan pl;
	char err[64] = "";

	cr_assert_eq(class_sync_plan(p, list, &pl, err, sizeof(err)), -1);
	cr_expect_str_eq(err, "the list of gpuclasses has no items");
	json_decref(list);
	policy_free(p);
}

Test(class_sync, retried_after_2_4_8_16_then_every_retry_s)
{
	const unsigned want[] = {2, 4, 8, 16, 30, 30, 30};

	for (unsigned i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		cr_expect_eq(worker_retry_s(i, 30), want[i], "after %u: %u", i,
			     worker_retry_s(i, 30));
	cr_expect_eq(worker_retry_s(4, 300), 32, "capped by retry_s only");
	cr_expect_eq(worker_retry_s(0, 1), 1);
}
