/*
 * What a workload holds of quota (policy/charge.c), from plain facts: the
 * JSON side is tests/unit/webhook/charge_test.c.
 */
#include "base/diag.h"
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
	"     nodeSelector: [\"gpu=h100\"], gpusPerNode: 8}\n"
	"  - {name: a100, resource: nvidia.com/gpu, sharing: exclusive,\n"
	"     nodeSelector: [\"gpu=a100\"], gpusPerNode: 8}\n"
	"  - {name: mig, resource: nvidia.com/mig-1g.10gb, sharing: mig,\n"
	"     gpusPerNode: 56}\n"
	"classes: []\n"
	"tenants:\n"
	"  - {name: research, namespaces: [research],\n"
	"     quota: [{flavor: h100, nominal: 8}, {flavor: a100, nominal: 8},\n"
	"             {flavor: mig, nominal: 8}]}\n";

static struct policy *P;

static void setup(void)
{
	P = test_policy(policy_yaml);
}

static void teardown(void)
{
	policy_free(P);
}

TestSuite(charge, .init = setup, .fini = teardown);

static const struct wl_kv on_h100[] = {{"gpu", "h100"}};
static const struct wl_kv on_a100[] = {{"gpu", "a100"}};
static const struct wl_resource two_gpus[] = {{"cpu", "4"}, {"nvidia.com/gpu", "2"}};
static const struct wl_resource one_gpu[] = {{"nvidia.com/gpu", "1"}};
static const struct wl_container two_containers[] = {
	{.name = "a", .limits = two_gpus, .n_limits = 2},
	{.name = "b", .limits = one_gpu, .n_limits = 1},
};

/* A running Pod in research: 3 GPUs on h100 nodes. */
static struct workload pod(void)
{
	return (struct workload){
		.kind = WL_POD,
		.namespace = "research",
		.pod = {.containers = two_containers, .n_containers = 2,
			.node_selector = on_h100, .n_node_selector = 1},
		.phase = "Running",
	};
}

Test(charge, a_running_pod_holds_its_units_on_the_flavor_it_selects)
{
	struct workload wl = pod();
	struct charge ch;

	charge_decide(P, &wl, &ch);
	cr_assert(ch.active);
	cr_assert_str_eq(ch.tenant->name, "research");
	cr_assert_str_eq(ch.flavor->name, "h100");
	cr_assert_eq(ch.units, 3);
	wl.pod.node_selector = on_a100;
	charge_decide(P, &wl, &ch);
	cr_assert_str_eq(ch.flavor->name, "a100");
	wl.pod.n_node_selector = 0;
	charge_decide(P, &wl, &ch);
	cr_assert_str_eq(ch.flavor->name, "h100",
			 "no selector matches: the resource's first flavor");
	cr_assert_eq(ch.units, 3);
}

Test(charge, limits_count_before_requests_and_fractions_count_nothing)
{
	static const struct wl_resource lim[] = {{"nvidia.com/mig-1g.10gb", "2"}};
	static const struct wl_resource req[] = {{"nvidia.com/mig-1g.10gb", "5"}};
	static const struct wl_resource half[] = {{"nvidia.com/mig-1g.10gb", "500m"}};
	struct wl_container ct[] = {
		{.name = "a", .limits = lim, .n_limits = 1, .requests = req,
		 .n_requests = 1},
		{.name = "b", .requests = req, .n_requests = 1},
		{.name = "c", .limits = half, .n_limits = 1},
	};
	struct workload wl = pod();
	struct charge ch;

	wl.pod.containers = ct;
	wl.pod.n_containers = 3;
	charge_decide(P, &wl, &ch);
	cr_assert_str_eq(ch.flavor->name, "mig");
	cr_assert_eq(ch.units, 2 + 5 + 0);
	cr_assert(ch.active);
}

Test(charge, terminal_pods_hold_nothing_but_keep_their_flavor)
{
	static const char *const phases[] = {"Succeeded", "Failed"};

	for (size_t i = 0; i < 2; i++) {
		struct workload wl = pod();
		struct charge ch;

		wl.phase = phases[i];
		charge_decide(P, &wl, &ch);
		cr_assert_not(ch.active, "%s", phases[i]);
		cr_assert_str_eq(ch.flavor->name, "h100");
	}
	{
		struct workload wl = pod();
		struct charge ch;

		wl.phase = NULL;
		charge_decide(P, &wl, &ch);
		cr_assert(ch.active, "no phase yet: pending, it holds");
	}
}

Test(charge, a_job_holds_its_gang_until_it_finishes)
{
	struct workload wl = pod();
	struct charge ch;

	wl.kind = WL_JOB;
	wl.phase = NULL;
	wl.parallelism = 3;
	charge_decide(P, &wl, &ch);
	cr_assert(ch.active);
	cr_assert_eq(ch.units, 9);
	cr_assert_eq(ch.per_pod, 3);
	cr_assert_eq(ch.slots, 3);
	wl.has_completions = true;
	wl.completions = 2;
	charge_decide(P, &wl, &ch);
	cr_assert_eq(ch.units, 6, "no more pods run at once than completions");
	wl.job_suspended = true;
	charge_decide(P, &wl, &ch);
	cr_assert_not(ch.active, "suspended: its pods are gone, resuming is judged");
	cr_assert_eq(ch.per_pod, 3);
	wl.job_suspended = false;
	wl.job_finished = true;
	charge_decide(P, &wl, &ch);
	cr_assert_not(ch.active);
	cr_assert_str_eq(ch.tenant->name, "research");
}

Test(charge, outside_tenants_or_without_gpus_nothing_is_held)
{
	static const struct wl_container plain[] = {{.name = "a"}};
	struct workload wl = pod();
	struct charge ch;

	wl.namespace = "web";
	charge_decide(P, &wl, &ch);
	cr_assert_not(ch.active);
	cr_assert_null(ch.tenant);
	cr_assert_null(ch.flavor);
	cr_assert_eq(ch.units, 0);
	wl.namespace = NULL;
	charge_decide(P, &wl, &ch);
	cr_assert_null(ch.tenant);
	wl = pod();
	wl.pod.containers = plain;
	wl.pod.n_containers = 1;
	charge_decide(P, &wl, &ch);
	cr_assert_not(ch.active);
	cr_assert_null(ch.tenant, "no flavor resource: no tenant either");
	wl = pod();
	wl.kind = WL_OTHER;
	charge_decide(P, &wl, &ch);
	cr_assert_null(ch.tenant, "only Pods and Jobs hold quota");
}

Test(charge, init_containers_count_the_way_the_scheduler_counts_them)
{
	static const struct wl_resource g1[] = {{"nvidia.com/gpu", "1"}};
	static const struct wl_resource g2[] = {{"nvidia.com/gpu", "2"}};
	static const struct wl_resource g6[] = {{"nvidia.com/gpu", "6"}};
	const struct wl_container main1[] = {{.name = "m", .limits = g1, .n_limits = 1}};
	struct wl_container init[] = {
		{.name = "side", .limits = g2, .n_limits = 1, .restart_policy = "Always"},
		{.name = "setup", .limits = g6, .n_limits = 1},
	};
	struct workload wl = pod();
	struct charge ch;

	wl.pod.containers = main1;
	wl.pod.n_containers = 1;
	wl.pod.init_containers = init;
	wl.pod.n_init_containers = 2;
	charge_decide(P, &wl, &ch);
	/* setup runs beside the sidecar: 6 + 2 > 1 + 2 */
	cr_assert_eq(ch.units, 8);
	init[1].limits = g1;
	charge_decide(P, &wl, &ch);
	cr_assert_eq(ch.units, 3, "the sidecar runs for the pod's life: 1 + 2");
	init[0].restart_policy = NULL;
	charge_decide(P, &wl, &ch);
	cr_assert_eq(ch.units, 2, "two classic init containers, one at a time");
	/* Only init containers ask for GPUs: still charged, whatever the class. */
	wl.pod.containers = two_containers + 0;
	wl.pod.n_containers = 0;
	charge_decide(P, &wl, &ch);
	cr_assert(ch.active);
	cr_assert_eq(ch.units, 2);
}

Test(charge, a_pod_rides_on_a_job_only_with_the_job_controllers_label)
{
	struct wl_kv labels[] = {{CHARGE_CONTROLLER_UID_LABEL, "uid-j"}};
	struct workload wl = pod();
	struct charge ch;

	wl.owner_job = "j";
	wl.owner_job_uid = "uid-j";
	charge_decide(P, &wl, &ch);
	cr_assert_null(ch.owner_job_uid, "an ownerReference alone is forged");
	wl.pod.labels = labels;
	wl.pod.n_labels = 1;
	charge_decide(P, &wl, &ch);
	cr_assert_str_eq(ch.owner_job_uid, "uid-j");
	labels[0].value = "uid-k";
	charge_decide(P, &wl, &ch);
	cr_assert_null(ch.owner_job_uid, "the label names another Job");
}

Test(charge, two_flavors_resources_are_flagged)
{
	static const struct wl_resource mig[] = {{"nvidia.com/mig-1g.10gb", "1"}};
	struct wl_container ct[] = {
		{.name = "a", .limits = one_gpu, .n_limits = 1},
		{.name = "b", .limits = mig, .n_limits = 1},
	};
	struct workload wl = pod();
	struct charge ch;

	charge_decide(P, &wl, &ch);
	cr_assert_not(ch.two_flavors);
	wl.pod.containers = ct;
	charge_decide(P, &wl, &ch);
	cr_assert(ch.two_flavors);
	cr_assert_str_eq(ch.flavor->name, "h100", "charged for the first");
}

/* ---- the single homes admission, the usage feed and the node view share:
 * the scan for flavor resources, and whether a pod is done. */

Test(charge, a_container_names_its_first_flavor_resource_limits_first)
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

Test(charge, a_pod_names_its_containers_resource_before_its_init_containers)
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

Test(charge, a_pod_is_done_when_succeeded_or_failed)
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
