/*
 * The single homes in policy/charge.h that admission, the usage feed and
 * the node view share: the scan of a container (and a pod) for flavor
 * resources, and whether a pod is done.
 */
#include "policy/charge.h"
#include "policy/policy.h"
#include "policy/workload.h"
#include "tests/unit/test_policy.h"

#include <criterion/criterion.h>
#include <string.h>

static const char policy_yaml[] =
	"version: 1\n"
	"flavors:\n"
	"  - {name: h100, resource: nvidia.com/gpu, sharing: exclusive,\n"
	"     gpusPerNode: 8}\n"
	"  - {name: mig, resource: nvidia.com/mig-1g.10gb, sharing: mig,\n"
	"     gpusPerNode: 56}\n"
	"classes: []\n"
	"tenants:\n"
	"  - {name: research, namespaces: [research],\n"
	"     quota: [{flavor: h100, nominal: 8}, {flavor: mig, nominal: 8}]}\n";

static struct policy *P;

static void setup(void)
{
	P = test_policy(policy_yaml);
}

static void teardown(void)
{
	policy_free(P);
}

TestSuite(charge_home, .init = setup, .fini = teardown);

Test(charge_home, a_container_names_its_first_flavor_resource_limits_first)
{
	struct wl_resource limits[] = {{"cpu", "1"}, {"nvidia.com/mig-1g.10gb", "1"}};
	struct wl_resource requests[] = {{"nvidia.com/gpu", "1"}, {"memory", "1Gi"}};
	struct wl_container ct = {.name = "c",
				  .limits = limits, .n_limits = 2,
				  .requests = requests, .n_requests = 2};
	struct wl_container plain = {.name = "p", .limits = limits, .n_limits = 1};

	cr_assert_str_eq(charge_container_resource(P, &ct, NULL), "nvidia.com/mig-1g.10gb");
	cr_assert_str_eq(charge_container_resource(P, &ct, "nvidia.com/mig-1g.10gb"),
			 "nvidia.com/gpu", "other_than skips one resource");
	cr_assert_null(charge_container_resource(P, &plain, NULL), "cpu is no flavor's");
	ct.n_limits = 1;
	cr_assert_str_eq(charge_container_resource(P, &ct, NULL), "nvidia.com/gpu",
			 "then the requests");
	cr_assert_null(charge_container_resource(P, &ct, "nvidia.com/gpu"));
}

Test(charge_home, a_pod_names_its_containers_resource_before_its_init_containers)
{
	struct wl_resource gpu[] = {{"nvidia.com/gpu", "1"}};
	struct wl_resource mig[] = {{"nvidia.com/mig-1g.10gb", "1"}};
	struct wl_container init = {.name = "i", .limits = mig, .n_limits = 1};
	struct wl_container main_ct = {.name = "m", .limits = gpu, .n_limits = 1};
	struct wl_container none = {.name = "n"};
	struct wl_pod pod = {.containers = &main_ct, .n_containers = 1,
			     .init_containers = &init, .n_init_containers = 1};

	cr_assert_str_eq(charge_pod_resource(P, &pod, NULL), "nvidia.com/gpu");
	cr_assert_str_eq(charge_pod_resource(P, &pod, "nvidia.com/gpu"),
			 "nvidia.com/mig-1g.10gb");
	pod.containers = &none;
	cr_assert_str_eq(charge_pod_resource(P, &pod, NULL), "nvidia.com/mig-1g.10gb");
	pod.n_init_containers = 0;
	cr_assert_null(charge_pod_resource(P, &pod, NULL));
}

Test(charge_home, a_pod_is_done_when_succeeded_or_failed)
{
	cr_assert(charge_pod_terminal("Succeeded"));
	cr_assert(charge_pod_terminal("Failed"));
	cr_assert_not(charge_pod_terminal("Running"));
	cr_assert_not(charge_pod_terminal("Pending"));
	cr_assert_not(charge_pod_terminal("Unknown"));
	cr_assert_not(charge_pod_terminal(""));
	cr_assert_not(charge_pod_terminal(NULL), "no phase yet: not done");
	cr_assert_not(charge_pod_terminal("succeeded"), "phases are case-sensitive");
}
