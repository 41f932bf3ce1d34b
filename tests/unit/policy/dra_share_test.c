/*
 * What a share of a device costs (docs/quota.md, "What each door costs"):
 * a flavor shared by capacity (dra.sharedCapacity), through each door
 * that reaches it: a claim of a class it lists, the claim made from
 * gpugate's template, and the pod that names that template.
 */
#include "policy/charge.h"
#include "policy/dra-template.h"
#include "policy/dra.h"
#include "policy/policy.h"
#include "policy/workload.h"
#include "tests/unit/test_policy.h"

#include <criterion/criterion.h>
#include <string.h>

static const char policy_yaml[] =
	"version: 1\n"
	"flavors:\n"
	"  - name: l40s-share\n"
	"    sharing: time-slicing\n"
	"    gpusPerNode: 32\n"
	"    deviceClassNames: [l40s-share.example.com]\n"
	"    dra:\n"
	"      deviceClassName: gpu.nvidia.com\n"
	"      driver: gpu.nvidia.com\n"
	"      attributes: [\"productName=NVIDIA L40S\"]\n"
	"      sharedCapacity: {name: memory, perUnit: 12Gi, unitsPerDevice: 4}\n"
	"classes:\n"
	"  - {name: notebook, flavor: l40s-share, gpus: 1, maxGpus: 4}\n"
	"tenants:\n"
	"  - {name: research, namespaces: [research], quota: [{flavor: l40s-share, nominal: 8}]}\n";

static struct policy *P;

static void setup(void)
{
	P = test_policy(policy_yaml);
}

static void teardown(void)
{
	policy_free(P);
}

TestSuite(dra_share, .init = setup, .fini = teardown);

static int64_t units_of(const char *cls, int64_t count, const char *name, const char *q)
{
	struct wl_kv cap = {name, q};
	struct wl_device_request r = {.name = "gpu", .device_class = cls,
				      .mode = WL_ALLOCATE_COUNT, .count = count,
				      .capacity = name ? &cap : NULL, .n_capacity = name ? 1 : 0};
	struct dra_claim c;

	dra_decide(P, &r, 1, &c);
	return c.units;
}

Test(dra_share, a_claims_share_costs_its_capacity_in_units_rounded_up)
{
	const char *cls = "l40s-share.example.com";

	cr_assert_eq(units_of(cls, 1, "memory", "12Gi"), 1);
	cr_assert_eq(units_of(cls, 1, "memory", "25Gi"), 3, "24Gi and a bit: 3 units");
	cr_assert_eq(units_of(cls, 2, "memory", "24Gi"), 4, "each device's share");
	cr_assert_eq(units_of(cls, 1, "gpu.nvidia.com/memory", "24Gi"), 2,
		     "qualified by the driver's domain: the same capacity");
	cr_assert_eq(units_of(cls, 1, "memory", "0"), 1, "no share is free");
	/* No share of the capacity named: the whole device (the scheduler
	 * consumes its whole capacity), unitsPerDevice. */
	cr_assert_eq(units_of(cls, 1, NULL, NULL), 4);
	cr_assert_eq(units_of(cls, 1, "example.com/memory", "12Gi"), 4,
		     "another domain's capacity is not the flavor's");
	cr_assert_eq(units_of(cls, 1, "multiprocessors", "10"), 4);
	cr_assert_eq(units_of(cls, 1, "memory", "100m"), 4,
		     "a fraction of a byte: not knowable before allocation, the most");
}

Test(dra_share, all_devices_of_a_shared_class_count_each_whole)
{
	struct wl_device_request r = {.name = "gpu", .device_class = "l40s-share.example.com",
				      .mode = WL_ALLOCATE_ALL, .count = 1};
	struct dra_claim c;

	dra_decide(P, &r, 1, &c);
	cr_assert_eq(c.units, DRA_ALL_DEVICES * 4);
	cr_assert_str_eq(c.all.device_class, "l40s-share.example.com");
}

Test(dra_share, the_claim_of_gpugates_template_costs_the_share_the_pod_pays)
{
	const struct policy_class *nb = policy_class_find(P, "notebook");
	char name[DRA_TEMPLATE_NAME_MAX], q[32];
	struct wl_kv ann[] = {{"resource.kubernetes.io/pod-claim-name", DRA_TEMPLATE_ENTRY},
			      {"gpugate.io/flavor", "l40s-share"}};
	struct wl_kv cap = {"memory", q};
	struct wl_device_request r = {.name = "gpu", .device_class = "gpu.nvidia.com",
				      .mode = WL_ALLOCATE_COUNT, .count = 1,
				      .capacity = &cap, .n_capacity = 1};
	struct wl_pod_claim entry = {.name = DRA_TEMPLATE_ENTRY};
	struct workload claim = {.kind = WL_CLAIM, .namespace = "research",
				 .annotations = ann, .n_annotations = 2,
				 .device_requests = &r, .n_device_requests = 1};
	struct workload pod = {.kind = WL_POD, .namespace = "research", .phase = "Running"};
	struct charge ch;

	/* The template of 3 units asks 36Gi of one device ... */
	cr_assert(dra_template_name(nb, 3, name, sizeof(name)));
	cr_assert_gt(dra_share_quantity(policy_flavor_find(P, "l40s-share")->dra->shared, 3,
					q, sizeof(q)), 0);
	cr_assert_str_eq(q, "36Gi");
	/* ... its claim holds 3 units (riding on its pod where it may) ... */
	charge_decide(P, &claim, &ch);
	cr_assert_str_eq(ch.flavor->name, "l40s-share");
	cr_assert_eq(ch.units, 3);
	/* ... and the pod that names it pays 3 at the door. */
	entry.template_name = name;
	pod.pod.claims = &entry;
	pod.pod.n_claims = 1;
	charge_decide(P, &pod, &ch);
	cr_assert_str_eq(ch.flavor->name, "l40s-share");
	cr_assert_eq(ch.per_pod, 3);
	cr_assert_eq(ch.units, 3);
	cr_assert(ch.active);
}
