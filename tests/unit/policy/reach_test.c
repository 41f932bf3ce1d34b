/*
 * Can a pod reach GPU nodes (policy/reach.c): the pod facts are written
 * as plain values, no JSON.
 */
#include "base/diag.h"
#include "policy/reach.h"
#include "tests/unit/test_policy.h"

#include <criterion/criterion.h>
#include <string.h>

static const char policy_yaml[] =
	"version: 1\n"
	"flavors:\n"
	"  - name: h100\n"
	"    resource: nvidia.com/gpu\n"
	"    sharing: exclusive\n"
	"    nodeSelector: [\"gpu=h100\", \"zone=a\"]\n"
	"    tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]\n"
	"    gpusPerNode: 8\n"
	"  - name: l4\n"
	"    resource: nvidia.com/gpu.shared\n"
	"    sharing: time-slicing\n"
	"    nodeSelector: [\"gpu=l4\"]\n"
	"    tolerations: [{key: dedicated, operator: Equal, value: gpu}]\n"
	"    gpusPerNode: 16\n"
	"classes: []\n"
	"tenants: []\n";

static struct policy *P;

static void setup(void)
{
	P = test_policy(policy_yaml);
}

static void teardown(void)
{
	policy_free(P);
}

TestSuite(reach, .init = setup, .fini = teardown);

Test(reach, a_plain_pod_reaches_nothing)
{
	static const struct wl_container ct = {.name = "web"};
	static const struct wl_kv sel[] = {{"gpu", "a100"}, {"zone", "b"}};
	static const struct wl_toleration tol[] = {
		{"node.kubernetes.io/not-ready", "Exists", NULL, "NoExecute"},
		{"nvidia.com/gpu", "Exists", NULL, "NoExecute"},
		{"dedicated", "Equal", "cpu", NULL},
	};
	struct wl_pod pod = {.containers = &ct, .n_containers = 1,
			     .node_selector = sel, .n_node_selector = 2,
			     .tolerations = tol, .n_tolerations = 3};
	struct reach why;

	cr_assert_not(reach_gpu_nodes(P, &pod, &why));
	cr_assert_eq(why.cause, REACH_NONE);
	cr_assert_not(reach_gpu_nodes(P, &pod, NULL));
}

Test(reach, a_flavor_resource_in_any_container)
{
	static const struct wl_resource gpu[] = {{"nvidia.com/gpu.shared", "1"}};
	static const struct wl_resource cpu[] = {{"cpu", "1"}};
	struct wl_container init = {.name = "fetch", .requests = gpu, .n_requests = 1};
	struct wl_container main = {.name = "m", .limits = cpu, .n_limits = 1};
	struct wl_pod pod = {.containers = &main, .n_containers = 1,
			     .init_containers = &init, .n_init_containers = 1};
	struct reach why;

	cr_assert(reach_gpu_nodes(P, &pod, &why));
	cr_assert_eq(why.cause, REACH_RESOURCE);
	cr_assert_str_eq(why.resource, "nvidia.com/gpu.shared");
	main.limits = gpu;
	cr_assert(reach_gpu_nodes(P, &pod, &why));
	cr_assert_eq(why.cause, REACH_RESOURCE);
}

Test(reach, a_nodeselector_entry_of_a_flavor)
{
	static const struct wl_kv sel[] = {{"zone", "a"}};
	struct wl_pod pod = {.node_selector = sel, .n_node_selector = 1};
	struct reach why;

	cr_assert(reach_gpu_nodes(P, &pod, &why));
	cr_assert_eq(why.cause, REACH_NODE_SELECTOR);
	cr_assert_str_eq(why.flavor->name, "h100");
	cr_assert_str_eq(why.selector->key, "zone");
	cr_assert_str_eq(why.selector->value, "a");
}

Test(reach, a_toleration_of_a_flavor_taint)
{
	static const struct wl_toleration tol[] = {
		{"node.kubernetes.io/unreachable", "Exists", NULL, "NoExecute"},
		{"dedicated", NULL, "gpu", "NoSchedule"},
	};
	struct wl_pod pod = {.tolerations = tol, .n_tolerations = 2};
	struct reach why;

	cr_assert(reach_gpu_nodes(P, &pod, &why));
	cr_assert_eq(why.cause, REACH_TOLERATION);
	cr_assert_str_eq(why.flavor->name, "l4");
	cr_assert_str_eq(why.taint->key, "dedicated");
}

Test(reach, a_resource_is_the_first_cause)
{
	static const struct wl_resource gpu[] = {{"nvidia.com/gpu", "1"}};
	static const struct wl_kv sel[] = {{"gpu", "h100"}};
	static const struct wl_toleration tol[] = {{NULL, "Exists", NULL, NULL}};
	struct wl_container main = {.name = "m", .limits = gpu, .n_limits = 1};
	struct wl_pod pod = {.containers = &main, .n_containers = 1,
			     .node_selector = sel, .n_node_selector = 1,
			     .tolerations = tol, .n_tolerations = 1};
	struct reach why;

	cr_assert(reach_gpu_nodes(P, &pod, &why));
	cr_assert_eq(why.cause, REACH_RESOURCE);
	pod.n_containers = 0;
	cr_assert(reach_gpu_nodes(P, &pod, &why));
	cr_assert_eq(why.cause, REACH_TOLERATION);
	pod.n_tolerations = 0;
	cr_assert(reach_gpu_nodes(P, &pod, &why));
	cr_assert_eq(why.cause, REACH_NODE_SELECTOR);
}

/* ---- Kubernetes' toleration matching ---------------------------------- */

struct match {
	const char *name;
	struct wl_toleration pod;
	struct policy_toleration flavor;
	bool tolerates;
};

static const struct policy_toleration GPU_EXISTS = {
	.key = "nvidia.com/gpu", .op = "Exists", .value = "", .effect = "NoSchedule"};
static const struct policy_toleration GPU_PRESENT = {
	.key = "nvidia.com/gpu", .op = "Equal", .value = "present", .effect = ""};

static const struct match matches[] = {
	{"exists without a key tolerates everything",
	 {NULL, "Exists", NULL, NULL}, GPU_EXISTS, true},
	{"exists without a key, another effect",
	 {NULL, "Exists", NULL, "NoExecute"}, GPU_EXISTS, false},
	{"exists with the key",
	 {"nvidia.com/gpu", "Exists", NULL, "NoSchedule"}, GPU_EXISTS, true},
	{"exists with the key, any value",
	 {"nvidia.com/gpu", "Exists", NULL, NULL}, GPU_PRESENT, true},
	{"exists with another key",
	 {"nvidia.com/mig", "Exists", NULL, NULL}, GPU_EXISTS, false},
	{"empty effect matches every effect",
	 {"nvidia.com/gpu", "Exists", NULL, ""}, GPU_EXISTS, true},
	{"another effect",
	 {"nvidia.com/gpu", "Exists", NULL, "PreferNoSchedule"}, GPU_EXISTS, false},
	{"the flavor's empty effect stands for any effect",
	 {"nvidia.com/gpu", "Equal", "present", "NoExecute"}, GPU_PRESENT, true},
	{"equal with key and value",
	 {"nvidia.com/gpu", "Equal", "present", NULL}, GPU_PRESENT, true},
	{"no operator means equal",
	 {"nvidia.com/gpu", NULL, "present", NULL}, GPU_PRESENT, true},
	{"equal with another value",
	 {"nvidia.com/gpu", "Equal", "absent", NULL}, GPU_PRESENT, false},
	{"equal without a value",
	 {"nvidia.com/gpu", "Equal", NULL, NULL}, GPU_PRESENT, false},
	{"equal against the flavor's exists: any value",
	 {"nvidia.com/gpu", "Equal", "whatever", "NoSchedule"}, GPU_EXISTS, true},
	{"equal with another key",
	 {"dedicated", "Equal", "present", NULL}, GPU_PRESENT, false},
	{"equal without a key",
	 {NULL, "Equal", "present", NULL}, GPU_PRESENT, false},
	{"an unknown operator with the key: in doubt, it tolerates",
	 {"nvidia.com/gpu", "Gt", "1", NULL}, GPU_PRESENT, true},
	{"an unknown operator with another key",
	 {"dedicated", "Gt", "1", NULL}, GPU_PRESENT, false},
	{"a flavor toleration without a key names no taint",
	 {NULL, "Exists", NULL, NULL},
	 {.key = "", .op = "Exists", .value = "", .effect = ""}, false},
};

Test(reach, tolerates_by_kubernetes_matching)
{
	for (size_t i = 0; i < sizeof(matches) / sizeof(matches[0]); i++)
		cr_expect_eq(reach_tolerates(&matches[i].pod, &matches[i].flavor),
			     matches[i].tolerates, "%s", matches[i].name);
}
