/*
 * report/classes.c: a class as users see it (`gpugate classes -o json`,
 * the spec of its GPUClass object) and the plan that makes the cluster's
 * GPUClass objects match the policy.
 */
#include "policy/policy.h"
#include "tests/unit/test_policy.h"
#include "report/classes.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

static const char POLICY[] =
	"version: 1\n"
	"flavors:\n"
	"  - {name: h100, resource: nvidia.com/gpu, sharing: exclusive, gpusPerNode: 8}\n"
	"  - {name: l4, resource: nvidia.com/gpu.shared, sharing: time-slicing, gpusPerNode: 8}\n"
	"classes:\n"
	"  - name: big\n"
	"    description: eight on one node\n"
	"    flavor: h100\n"
	"    gpus: 8\n"
	"    cpu: \"96\"\n"
	"    topology: {key: nvidia.com/gpu.clique, mode: preferred}\n"
	"    priorityClassName: training\n"
	"  - {name: small, flavor: h100, gpus: 1, maxGpus: 4, preemptible: true}\n"
	"  - {name: Shared_L4, flavor: l4, gpus: 1}\n"
	"tenants:\n"
	"  - {name: a, namespaces: [a], quota: [{flavor: h100, nominal: 8}]}\n"
	"  - {name: b, namespaces: [b], classes: [small, Shared_L4],\n"
	"     quota: [{flavor: h100, nominal: 1}, {flavor: l4, nominal: 1}]}\n"
	"  - {name: c, namespaces: [c], sharing: [mig], quota: [{flavor: h100, nominal: 1}]}\n";

static char *dump(const json_t *v)
{
	char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);

	cr_assert_not_null(s);
	return s;
}

static void expect_json(const json_t *v, const char *want)
{
	char *s = dump(v);

	cr_expect_str_eq(s, want);
	free(s);
}

Test(classes, spec_of_each_class)
{
	struct policy *p = test_policy(POLICY);
	json_t *o;

	o = classes_spec_new(p, policy_class_find(p, "big"));
	/* c allows no exclusive sharing; b does not list big */
	expect_json(o, "{\"description\":\"eight on one node\",\"flavor\":\"h100\","
		       "\"resource\":\"nvidia.com/gpu\",\"sharing\":\"exclusive\","
		       "\"gpus\":8,\"maxGpus\":8,\"preemptible\":false,"
		       "\"topology\":{\"key\":\"nvidia.com/gpu.clique\","
		       "\"mode\":\"preferred\"},\"priorityClassName\":\"training\","
		       "\"cpu\":\"96\",\"tenants\":[\"a\"]}");
	json_decref(o);
	o = classes_spec_new(p, policy_class_find(p, "small"));
	expect_json(o, "{\"flavor\":\"h100\",\"resource\":\"nvidia.com/gpu\","
		       "\"sharing\":\"exclusive\",\"gpus\":1,\"maxGpus\":4,"
		       "\"preemptible\":true,\"tenants\":[\"a\",\"b\"]}");
	json_decref(o);
	/* a may use all classes but has no l4 quota */
	o = classes_spec_new(p, policy_class_find(p, "Shared_L4"));
	expect_json(json_object_get(o, "tenants"), "[\"b\"]");
	json_decref(o);
	policy_free(p);
}

Test(classes, object_of_a_class)
{
	struct policy *p = test_policy(POLICY);
	json_t *o = classes_object_new(p, policy_class_find(p, "small"));

	expect_json(o, "{\"apiVersion\":\"gpugate.io/v1alpha1\",\"kind\":\"GPUClass\","
		       "\"metadata\":{\"name\":\"small\",\"labels\":{"
		       "\"app.kubernetes.io/managed-by\":\"gpugate\"}},"
		       "\"spec\":{\"flavor\":\"h100\",\"resource\":\"nvidia.com/gpu\","
		       "\"sharing\":\"exclusive\",\"gpus\":1,\"maxGpus\":4,"
		       "\"preemptible\":true,\"tenants\":[\"a\",\"b\"]}}");
	json_decref(o);
	policy_free(p);
}

/* An owned object as the apiserver lists it. */
static json_t *listed(const char *name, const char *uid, const char *rv, json_t *spec)
{
	return json_pack("{s:s, s:s, s:{s:s, s:s, s:s, s:{s:s}}, s:o}", "apiVersion",
			 "gpugate.io/v1alpha1", "kind", "GPUClass", "metadata", "name", name,
			 "uid", uid, "resourceVersion", rv, "labels",
			 "app.kubernetes.io/managed-by", "gpugate", "spec", spec);
}

static json_t *names(const json_t *objects)
{
	json_t *out = json_array();
	size_t i;
	const json_t *o;

	json_array_foreach(objects, i, o)
		json_array_append_new(out, json_incref(json_object_get(
						   json_object_get(o, "metadata"), "name")));
	return out;
}

Test(classes, plan_creates_updates_deletes_and_skips)
{
	struct policy *p = test_policy(POLICY);
	struct classes_plan pl;
	json_t *owned = json_array(), *n;

	/* big as the policy has it; small stale; gone no longer in the policy */
	json_array_append_new(owned, listed("big", "u1", "10",
					    classes_spec_new(p, policy_class_find(p, "big"))));
	json_array_append_new(owned, listed("small", "u2", "11",
					    json_pack("{s:s, s:i}", "flavor", "h100", "gpus", 2)));
	json_array_append_new(owned, listed("gone", "u3", "12", json_object()));
	cr_assert_eq(classes_plan_make(p, owned, &pl), 0);
	cr_expect_eq(pl.unchanged, 1);
	cr_expect_eq(json_array_size(pl.create), 0);
	expect_json(pl.skipped, "[\"Shared_L4\"]");
	n = names(pl.update);
	expect_json(n, "[\"small\"]");
	json_decref(n);
	/* the update is written at the version listed, to the object listed */
	expect_json(json_object_get(json_array_get(pl.update, 0), "metadata"),
		    "{\"name\":\"small\",\"labels\":{\"app.kubernetes.io/managed-by\":"
		    "\"gpugate\"},\"resourceVersion\":\"11\",\"uid\":\"u2\"}");
	expect_json(json_object_get(json_array_get(pl.update, 0), "spec"),
		    "{\"flavor\":\"h100\",\"resource\":\"nvidia.com/gpu\","
		    "\"sharing\":\"exclusive\",\"gpus\":1,\"maxGpus\":4,"
		    "\"preemptible\":true,\"tenants\":[\"a\",\"b\"]}");
	n = names(pl.remove);
	expect_json(n, "[\"gone\"]");
	json_decref(n);
	/* deleted with the uid and version listed */
	expect_json(json_object_get(json_object_get(json_array_get(pl.remove, 0), "metadata"),
				    "uid"), "\"u3\"");
	classes_plan_release(&pl);

	/* nothing listed: every publishable class is created */
	json_array_clear(owned);
	cr_assert_eq(classes_plan_make(p, owned, &pl), 0);
	n = names(pl.create);
	expect_json(n, "[\"big\",\"small\"]");
	json_decref(n);
	cr_expect_eq(json_array_size(pl.update) + json_array_size(pl.remove) + pl.unchanged, 0);
	classes_plan_release(&pl);

	/* an owned object named like a class that cannot be published goes */
	json_array_append_new(owned, listed("shared_l4", "u4", "13", json_object()));
	cr_assert_eq(classes_plan_make(p, owned, &pl), 0);
	n = names(pl.remove);
	expect_json(n, "[\"shared_l4\"]");
	json_decref(n);
	classes_plan_release(&pl);
	json_decref(owned);
	policy_free(p);
}
