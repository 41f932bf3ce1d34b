/* A valid policy held against what a cluster has (policy/cluster-check.c). */
#include "base/diag.h"
#include "policy/cluster-check.h"
#include "policy/policy.h"
#include "policy/pool.h"
#include "policy/quota.h"
#include "tests/unit/test_policy.h"

#include <criterion/criterion.h>
#include <stdint.h>

static const char POLICY[] =
	"version: 1\n"
	"flavors:\n"
	"  - {name: h100, resource: nvidia.com/gpu, sharing: exclusive, gpusPerNode: 8}\n"
	"classes:\n"
	"  - {name: big, flavor: h100, gpus: 8, priorityClassName: training}\n"
	"  - {name: urgent, flavor: h100, gpus: 1, priorityClassName: critical}\n"
	"  - {name: plain, flavor: h100, gpus: 1}\n"
	"  - {name: also-big, flavor: h100, gpus: 4, priorityClassName: training}\n"
	"tenants: [{name: t, namespaces: [t]}]\n";

static struct policy *parse(void)
{
	return test_policy(POLICY);
}

Test(cluster_check, warns_about_each_class_whose_priority_class_is_missing)
{
	static const char *const has[] = {"system-cluster-critical", "critical",
					  "system-node-critical"};
	struct policy *p = parse();
	struct diag w;

	diag_init(&w);
	cr_assert_eq(cluster_check_priority_classes(p, has, 3, &w), 2);
	cr_assert_str_eq(
		diag_text(&w),
		"t.yaml: warning: class \"big\": PriorityClass \"training\" does not "
		"exist in the cluster, and the apiserver refuses pods that name it; "
		"create it (docs/operations.md, \"PriorityClasses\") or remove "
		"priorityClassName from the class\n"
		"t.yaml: warning: class \"also-big\": PriorityClass \"training\" does "
		"not exist in the cluster, and the apiserver refuses pods that name "
		"it; create it (docs/operations.md, \"PriorityClasses\") or remove "
		"priorityClassName from the class\n");
	policy_free(p);
}

Test(cluster_check, nothing_to_say_when_every_priority_class_exists)
{
	static const char *const has[] = {"training", "critical"};
	struct policy *p = parse();
	struct diag w;

	diag_init(&w);
	cr_assert_eq(cluster_check_priority_classes(p, has, 2, &w), 0);
	cr_assert_eq(diag_count(&w), 0);
	cr_assert_eq(cluster_check_priority_classes(p, NULL, 0, &w), 3,
		     "a cluster without any: all three named");
	policy_free(p);
}

/* ---- effective capacity ------------------------------------------------- */

static const char CAPACITY[] =
	"version: 1\n"
	"flavors:\n"
	"  - {name: h100, resource: nvidia.com/gpu, sharing: exclusive, gpusPerNode: 8}\n"
	"  - {name: a100, resource: nvidia.com/gpu, sharing: exclusive, gpusPerNode: 8,\n"
	"     nodeSelector: [\"p=A100\"]}\n"
	"  - {name: l4, resource: nvidia.com/gpu.shared, sharing: time-slicing, gpusPerNode: 8,\n"
	"     nodeSelector: [\"p=L4\"]}\n"
	"classes: []\n"
	"tenants:\n"
	"  - {name: research, namespaces: [research],\n"
	"     quota: [{flavor: h100, nominal: 32}, {flavor: a100, nominal: 8}, {flavor: l4, nominal: 8}]}\n"
	"  - {name: prod, namespaces: [prod], quota: [{flavor: h100, nominal: 32}]}\n";

static int64_t used_h100[2];

static int64_t used_fn(const void *ctx, unsigned t, unsigned f)
{
	(void)ctx;
	return f == 0 ? used_h100[t] : 0;
}

Test(cluster_check, capacity_warns_per_flavor_not_backed_with_the_tenants_short)
{
	const struct usage_view u = {NULL, used_fn};
	struct policy *p = test_policy(CAPACITY);
	struct pool_summary s[3] = {{0}};
	struct diag w;

	/* h100: 8 nodes, 2 cordoned: 48 usable of 64 promised; research
	 * holds 8, prod 24: 16 free, research 8 short. */
	s[0].flavor = policy_flavor_find(p, "h100");
	s[0].nodes[POOL_USABLE] = 6;
	s[0].nodes[POOL_CORDONED] = 2;
	s[0].capacity = 64;
	s[0].allocatable = 48;
	s[0].allocated = 32;
	s[0].free = 16;
	s[0].excluded = 16;
	/* a100: no node */
	s[1].flavor = policy_flavor_find(p, "a100");
	/* l4: one usable node of 8, all it is promised */
	s[2].flavor = policy_flavor_find(p, "l4");
	s[2].nodes[POOL_USABLE] = 1;
	s[2].capacity = s[2].allocatable = s[2].free = 8;
	used_h100[0] = 8;
	used_h100[1] = 24;
	diag_init(&w);
	cr_assert_eq(cluster_check_capacity(p, s, 3, &u, true, &w), 2);
	cr_assert_str_eq(diag_text(&w),
			 "t.yaml: warning: flavor h100: the tenants' nominal quota sums to "
			 "64, the usable nodes offer 48 nvidia.com/gpu: over-committed by "
			 "16 (33 %) (excluded nodes not counted); not backed now: tenant "
			 "research 8 of its nominal 32 (docs/quota.md, \"Effective "
			 "capacity\")\n"
			 "t.yaml: warning: flavor a100: no node of the cluster carries its "
			 "node labels and offers nvidia.com/gpu\n");
	/* nothing used: both nominals fit the 48 free on their own, the
	 * flavor is still over-committed */
	diag_init(&w);
	s[0].allocated = 0;
	s[0].free = 48;
	cr_assert_eq(cluster_check_capacity(p, s, 1, NULL, true, &w), 1);
	cr_assert_str_eq(diag_text(&w),
			 "t.yaml: warning: flavor h100: the tenants' nominal quota sums to "
			 "64, the usable nodes offer 48 nvidia.com/gpu: over-committed by "
			 "16 (33 %) (excluded nodes not counted)\n");
	/* every node back: nothing to say */
	diag_init(&w);
	s[0].nodes[POOL_USABLE] = 8;
	s[0].nodes[POOL_CORDONED] = 0;
	s[0].allocatable = 64;
	s[0].free = 32;
	s[0].allocated = 32;
	s[0].excluded = 0;
	cr_assert_eq(cluster_check_capacity(p, s, 1, &u, true, &w), 0);
	cr_assert_eq(diag_count(&w), 0);
	policy_free(p);
}

/* ---- DRA DeviceClasses (docs/quota.md, "What each door costs") -------- */

static const char DRA_POLICY[] =
	"version: 1\n"
	"flavors:\n"
	"  - {name: h100, resource: nvidia.com/gpu, sharing: exclusive, gpusPerNode: 8,\n"
	"     deviceClassNames: [gpu.nvidia.com]}\n"
	"  - {name: mig, resource: nvidia.com/mig-1g.10gb, sharing: mig, gpusPerNode: 56,\n"
	"     deviceClassNames: [mig-1g.example.com]}\n"
	"classes: []\n"
	"tenants: [{name: t, namespaces: [t]}]\n";

Test(cluster_check, a_device_class_serving_a_flavor_resource_must_be_that_flavors)
{
	static const struct cluster_device_class ok[] = {
		{"gpu.nvidia.com", "nvidia.com/gpu"},
		{"mig-1g.example.com", NULL},
		{"nic.example.com", "example.com/nic"}, /* not a flavor's */
	};
	static const struct cluster_device_class bad[] = {
		{"gpu.nvidia.com", NULL},
		{"mig-1g.example.com", "nvidia.com/gpu"},   /* another flavor's class */
		{"mig.nvidia.com", "nvidia.com/mig-1g.10gb"}, /* a raw GPU class */
		{"h100.example.com", "nvidia.com/gpu"},     /* none of gpugate's */
	};
	struct policy *p = test_policy(DRA_POLICY);
	struct diag w;

	diag_init(&w);
	cr_assert_eq(cluster_check_device_classes(p, ok, 3, &w), 0, "%s", diag_text(&w));
	cr_assert_eq(cluster_check_device_classes(p, bad, 4, &w), 3);
	cr_assert_str_eq(
		diag_text(&w),
		"t.yaml: warning: DeviceClass \"mig-1g.example.com\" serves nvidia.com/gpu "
		"through DRA (extendedResourceName), but flavor mig lists it in "
		"deviceClassNames, not h100: the claim the kube-scheduler makes for such a "
		"pod cannot ride on the pod, and both are charged (docs/quota.md, \"What "
		"each door costs\")\n"
		"t.yaml: warning: DeviceClass \"mig.nvidia.com\" serves nvidia.com/mig-1g.10gb "
		"through DRA (extendedResourceName), which flavor mig uses, but no flavor "
		"lists \"mig.nvidia.com\" in deviceClassNames: the claim the kube-scheduler "
		"makes for such a pod asks for that class, a raw GPU request that gpugate "
		"refuses (rawGpuRequests: reject), so the pod never binds; add it to flavor "
		"mig's deviceClassNames (docs/quota.md, \"What each door costs\")\n"
		"t.yaml: warning: DeviceClass \"h100.example.com\" serves nvidia.com/gpu "
		"through DRA (extendedResourceName), which flavor h100 uses, but no flavor "
		"lists \"h100.example.com\" in deviceClassNames: the claim the "
		"kube-scheduler makes for such a pod asks for that class, which gpugate "
		"does not count; add it to flavor h100's deviceClassNames (docs/quota.md, "
		"\"What each door costs\")\n");
	diag_init(&w);
	cr_assert_eq(cluster_check_device_classes(p, ok, 1, &w), 1,
		     "mig-1g.example.com is not in the cluster");
	cr_assert_str_eq(diag_text(&w),
			 "t.yaml: warning: flavor mig: deviceClassNames: the cluster has "
			 "no DeviceClass \"mig-1g.example.com\" (kubectl get deviceclasses): "
			 "no claim of it can be allocated\n");
	policy_free(p);
}

/* ---- DRA flavors: devices from ResourceSlices ---------------------------- */

static const char DRA_CAPACITY[] =
	"version: 1\n"
	"flavors:\n"
	"  - name: h100-dra\n"
	"    sharing: exclusive\n"
	"    gpusPerNode: 8\n"
	"    dra: {deviceClassName: gpu.nvidia.com, driver: gpu.nvidia.com,\n"
	"          attributes: [\"productName=NVIDIA H100 80GB HBM3\"]}\n"
	"classes: []\n"
	"tenants:\n"
	"  - {name: research, namespaces: [research], quota: [{flavor: h100-dra, nominal: 24}]}\n";

Test(cluster_check, capacity_weighs_a_dra_flavors_devices_once_they_are_known)
{
	struct policy *p = test_policy(DRA_CAPACITY);
	struct pool_summary s = {0};
	struct diag w;

	s.flavor = policy_flavor_find(p, "h100-dra");
	/* not listed: said, not weighed (nor called "no node") */
	diag_init(&w);
	cr_assert_eq(cluster_check_capacity(p, &s, 1, NULL, false, &w), 1);
	cr_assert_str_eq(diag_text(&w),
			 "t.yaml: warning: flavor h100-dra: the cluster's ResourceSlices, "
			 "DeviceTaintRules, ResourceClaims or DeviceClasses could not be "
			 "listed: its devices are not weighed\n");
	/* listed, no device matches */
	diag_init(&w);
	cr_assert_eq(cluster_check_capacity(p, &s, 1, NULL, true, &w), 1);
	cr_assert_str_eq(diag_text(&w),
			 "t.yaml: warning: flavor h100-dra: no node of the cluster carries "
			 "its node labels and has a device of driver gpu.nvidia.com that "
			 "matches its dra attributes and minCapacity (kubectl get "
			 "resourceslices)\n");
	/* two nodes of 8 devices, 2 tainted: 14 usable of 24 promised */
	s.nodes[POOL_USABLE] = 2;
	s.capacity = 16;
	s.allocatable = s.free = 14;
	s.devices_tainted = 2;
	diag_init(&w);
	cr_assert_eq(cluster_check_capacity(p, &s, 1, NULL, true, &w), 1);
	cr_assert_str_eq(diag_text(&w),
			 "t.yaml: warning: flavor h100-dra: the tenants' nominal quota sums "
			 "to 24, the usable nodes offer 14 gpu.nvidia.com devices: "
			 "over-committed by 10 (71 %); not backed now: tenant research 10 "
			 "of its nominal 24 (docs/quota.md, \"Effective capacity\")\n");
	/* four nodes: enough */
	s.nodes[POOL_USABLE] = 4;
	s.capacity = 32;
	s.allocatable = s.free = 30;
	diag_init(&w);
	cr_assert_eq(cluster_check_capacity(p, &s, 1, NULL, true, &w), 0);
	policy_free(p);
}
