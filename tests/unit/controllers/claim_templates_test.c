/*
 * controllers/claim-templates.c: the ResourceClaimTemplate the keeper
 * writes, field by field (docs/design/dra.md, "The template").
 */
#include "controllers/claim-templates.h"
#include "policy/dra-template.h"
#include "policy/policy.h"
#include "tests/unit/test_policy.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char POLICY[] =
	"version: 1\n"
	"flavors:\n"
	"  - name: h100-dra\n"
	"    sharing: exclusive\n"
	"    gpusPerNode: 8\n"
	"    dra:\n"
	"      deviceClassName: gpu.nvidia.com\n"
	"      driver: gpu.nvidia.com\n"
	"      attributes: [\"productName=NVIDIA H100 80GB HBM3\"]\n"
	"      minCapacity: [memory=80Gi]\n"
	"%s"
	"  - {name: l4, resource: nvidia.com/gpu, sharing: exclusive, gpusPerNode: 8}\n"
	"classes:\n"
	"  - {name: train, flavor: h100-dra, gpus: 2, maxGpus: 4}\n"
	"  - {name: small, flavor: l4, gpus: 1}\n"
	"tenants: [{name: t, namespaces: [t], quota: [{flavor: h100-dra, nominal: 16}]}]\n";

static struct policy *policy_with(const char *extra)
{
	char yaml[4096];

	snprintf(yaml, sizeof(yaml), POLICY, extra);
	return test_policy(yaml);
}

#define CEL                                                                     \
	"device.driver == 'gpu.nvidia.com' && "                                 \
	"device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3' && " \
	"device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('80Gi')) >= 0"

/* The object for train x 3 in namespace research against want, where
 * want's %s is the template's name and EXACTLY_TAIL what follows the
 * selectors in exactly{}. */
static void expect_object(struct policy *p, const char *want_fmt)
{
	const struct policy_class *c = policy_class_find(p, "train");
	char name[DRA_TEMPLATE_NAME_MAX], want[4096];
	json_t *got, *exp;
	json_error_t e;
	char *dump;

	cr_assert(dra_template_name(c, 3, name, sizeof(name)));
	snprintf(want, sizeof(want), want_fmt, name);
	exp = json_loads(want, 0, &e);
	cr_assert_not_null(exp, "bad test JSON: %s: %s", e.text, want);
	got = claim_templates_object(c, 3, "research", name);
	cr_assert_not_null(got);
	dump = json_dumps(got, JSON_COMPACT | JSON_SORT_KEYS);
	cr_assert(json_equal(got, exp), "got %s", dump);
	free(dump);
	json_decref(got);
	json_decref(exp);
}

#define HEAD                                                                    \
	"{\"apiVersion\": \"resource.k8s.io/v1\", \"kind\": \"ResourceClaimTemplate\"," \
	" \"metadata\": {\"name\": \"%s\", \"namespace\": \"research\", \"labels\": {" \
	"   \"app.kubernetes.io/managed-by\": \"gpugate\", \"gpugate.io/class\": \"train\"," \
	"   \"gpugate.io/flavor\": \"h100-dra\"}},"                           \
	" \"spec\": {\"metadata\": {\"labels\": {\"app.kubernetes.io/managed-by\": \"gpugate\"," \
	"   \"gpugate.io/class\": \"train\"}, \"annotations\": {\"gpugate.io/flavor\": \"h100-dra\"}}," \
	"  \"spec\": {\"devices\": {\"requests\": [{\"name\": \"gpu\", \"exactly\": {" \
	"   \"deviceClassName\": \"gpu.nvidia.com\", \"allocationMode\": \"ExactCount\"," \
	"   \"count\": 3, "

Test(claim_templates, the_template_of_a_class_and_count)
{
	struct policy *p = policy_with("");

	expect_object(p, HEAD "\"selectors\": [{\"cel\": {\"expression\": \"" CEL "\"}}]"
			      "}}]}}}}");
	cr_assert_null(claim_templates_object(policy_class_find(p, "small"), 1, "research",
					      "x"),
		       "no DRA flavor: no template");
	policy_free(p);
}

Test(claim_templates, extra_selectors_and_device_tolerations)
{
	struct policy *p = policy_with(
		"      selectors: [\"device.attributes['gpu.nvidia.com'].brand == 'Nvidia'\"]\n"
		"      tolerations:\n"
		"        - {key: example.com/flaky, operator: Exists, effect: NoSchedule}\n"
		"        - {key: example.com/slow, operator: Equal, value: \"yes\",\n"
		"           effect: NoExecute, tolerationSeconds: 300}\n");

	expect_object(p, HEAD "\"selectors\": [{\"cel\": {\"expression\": \"" CEL "\"}},"
			      " {\"cel\": {\"expression\": \"device.attributes['gpu.nvidia.com']"
			      ".brand == 'Nvidia'\"}}],"
			      " \"tolerations\": ["
			      "  {\"key\": \"example.com/flaky\", \"operator\": \"Exists\","
			      "   \"effect\": \"NoSchedule\"},"
			      "  {\"key\": \"example.com/slow\", \"operator\": \"Equal\","
			      "   \"value\": \"yes\", \"effect\": \"NoExecute\","
			      "   \"tolerationSeconds\": 300}]"
			      "}}]}}}}");
	policy_free(p);
}

Test(claim_templates, a_shared_flavors_template_asks_one_devices_share)
{
	/* train x 3 of a flavor shared by memory, 10Gi a unit: one device
	 * that allows multiple allocations, 30Gi of its memory. */
	static const char shared[] =
		"version: 1\n"
		"flavors:\n"
		"  - name: h100-dra\n"
		"    sharing: mps\n"
		"    gpusPerNode: 32\n"
		"    dra:\n"
		"      deviceClassName: gpu.nvidia.com\n"
		"      driver: gpu.nvidia.com\n"
		"      attributes: [\"productName=NVIDIA H100 80GB HBM3\"]\n"
		"      minCapacity: [memory=80Gi]\n"
		"      sharedCapacity: {name: memory, perUnit: 10Gi, unitsPerDevice: 8}\n"
		"classes:\n"
		"  - {name: train, flavor: h100-dra, gpus: 2, maxGpus: 4}\n"
		"tenants: [{name: t, namespaces: [t], quota: [{flavor: h100-dra, nominal: 16}]}]\n";
	struct policy *p = test_policy(shared);
	char head[sizeof(HEAD) + 8], *at;

	/* HEAD with count 1 */
	snprintf(head, sizeof(head), "%s", HEAD);
	at = strstr(head, "\"count\": 3");
	at[9] = '1';
	{
		char fmt[4096];

		snprintf(fmt, sizeof(fmt),
			 "%s\"selectors\": [{\"cel\": {\"expression\": \"" CEL
			 " && device.allowMultipleAllocations\"}}],"
			 " \"capacity\": {\"requests\": {\"memory\": \"30Gi\"}}"
			 "}}]}}}}",
			 head);
		expect_object(p, fmt);
	}
	policy_free(p);
}
