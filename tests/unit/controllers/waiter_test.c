/*
 * controllers/waiter.c: what a pod that waits for a node is told
 * (waiter_reason()), and when it is told again (waiter_due()).
 */
#include "controllers/waiter.h"
#include "policy/policy.h"
#include "policy/pool.h"
#include "tests/unit/test_policy.h"
#include "usage/inventory.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

static const char policy_yaml[] =
	"version: 1\n"
	"flavors:\n"
	"  - name: h100\n"
	"    resource: nvidia.com/gpu\n"
	"    sharing: exclusive\n"
	"    nodeSelector: [\"nvidia.com/gpu.product=H100\"]\n"
	"    gpusPerNode: 8\n"
	"classes: []\n"
	"tenants:\n"
	"  - {name: research, namespaces: [research], quota: [{flavor: h100, nominal: 16}]}\n";

static struct policy *P;
static const struct policy_flavor *H100;
static struct inventory *I;

static void setup(void)
{
	P = test_policy(policy_yaml);
	H100 = policy_flavor_find(P, "h100");
	I = inventory_new();
	cr_assert_not_null(I);
}

static void teardown(void)
{
	inventory_free(I);
	policy_free(P);
}

TestSuite(waiter, .init = setup, .fini = teardown);

/* The nodes (8 GPUs each, Ready, cordoned when asked) and a CPU node,
 * then the pods bound to them, each listed whole. */
static void pool(size_t nodes, bool cordoned, const int64_t *bound, size_t n_bound)
{
	struct pool_label label = {"nvidia.com/gpu.product", "H100"};
	struct pool_resource res[] = {{"nvidia.com/gpu", 8, 8, 0}};
	struct pool_condition cond[] = {{"Ready", "True", ""}};

	inventory_relist_begin(I, INVENTORY_NODES);
	for (size_t i = 0; i < nodes; i++) {
		char name[16];
		struct pool_node n = {.name = name, .labels = &label, .n_labels = 1,
				      .resources = res, .n_resources = 1,
				      .conditions = cond, .n_conditions = 1, .ready = true,
				      .unschedulable = cordoned};

		snprintf(name, sizeof(name), "node-%zu", i);
		cr_assert_eq(inventory_node_put(I, &n), 0);
	}
	{
		struct pool_node cpu = {.name = "cpu-0", .conditions = cond,
					.n_conditions = 1, .ready = true};

		cr_assert_eq(inventory_node_put(I, &cpu), 0);
	}
	inventory_relist_end(I, INVENTORY_NODES);
	inventory_relist_begin(I, INVENTORY_PODS);
	for (size_t i = 0; i < n_bound; i++) {
		char uid[16], node[16];
		struct inventory_ask ask = {"nvidia.com/gpu", bound[i]};
		struct inventory_placement pl = {uid, node, &ask, 1, NULL, NULL};

		snprintf(uid, sizeof(uid), "bound-%zu", i);
		snprintf(node, sizeof(node), "node-%zu", i);
		cr_assert_eq(inventory_pod_put(I, &pl), 0);
	}
	inventory_relist_end(I, INVENTORY_PODS);
}

static void expect_told(int64_t per_pod, const char *scheduler, const char *want)
{
	const struct inventory_waiting pod = {
		.uid = "u1", .namespace = "research", .name = "train-0",
		.tenant = "research", .flavor = "h100", .per_pod = per_pod, .since = 1000,
		.scheduler = scheduler};
	char message[1024];

	memset(message, 'x', sizeof(message));
	waiter_reason(P, H100, I, NULL, &pod, message, sizeof(message));
	cr_expect_str_eq(message, want);
}

Test(waiter, no_node_of_the_flavor)
{
	pool(0, false, NULL, 0);
	expect_told(8, "0/3 nodes are available", "no node of flavor h100 is in the cluster");
}

Test(waiter, the_pool_not_listed_yet_leaves_it_to_the_scheduler)
{
	expect_told(8, "0/3 nodes are available", "the scheduler says: 0/3 nodes are available");
	expect_told(8, "", "");
}

Test(waiter, every_node_excluded)
{
	pool(2, true, NULL, 0);
	expect_told(8, "", "all 2 nodes of flavor h100 are excluded (the repair comes first); "
		    "2 nodes excluded: node-0 (cordoned), node-1 (cordoned)");
}

Test(waiter, no_node_could_ever_hold_it)
{
	pool(2, false, NULL, 0);
	expect_told(16, "", "no usable node of flavor h100 can hold 16 nvidia.com/gpu: the largest "
		    "offers 8 (node-0)");
}

Test(waiter, no_room_now)
{
	const int64_t bound[] = {8, 4};

	pool(2, false, bound, 2);
	expect_told(8, "", "no node of flavor h100 has 8 nvidia.com/gpu free: 4 free on 2 usable "
		    "nodes, at most 4 on one");
}

Test(waiter, room_then_the_scheduler_speaks_or_nothing_is_said)
{
	pool(2, false, NULL, 0);
	expect_told(8, "0/2 nodes are available: 2 node(s) had untolerated taint.",
		    "the scheduler says: 0/2 nodes are available: 2 node(s) had "
		    "untolerated taint.");
	expect_told(8, "", "");
}

Test(waiter, the_same_reason_again_only_after_repeat)
{
	/* Nothing said yet: due. */
	cr_expect(waiter_due(0, 0, 42, 1000, 600));
	/* The same reason 599 s later: not yet; 600 s later: again. */
	cr_expect_not(waiter_due(42, 1000, 42, 1599, 600));
	cr_expect(waiter_due(42, 1000, 42, 1600, 600));
	/* Another reason: at once. */
	cr_expect(waiter_due(42, 1000, 43, 1001, 600));
}

/* ---- a pod of a gang (SPEC section 9) ----------------------------------- */

static const struct inventory_waiting GANG_POD = {
	.uid = "g1", .namespace = "research", .name = "train-0", .tenant = "research",
	.flavor = "h100", .per_pod = 8, .since = 1000,
	.scheduler = "Scheduling is blocked due to non-empty scheduling gates",
	.gang = "g-3f2a1c", .gang_route = "gates", .class_name = "", .gang_gated = true};

static void expect_gang(int64_t pods, const char *key, const char *want)
{
	char message[1024];

	memset(message, 'x', sizeof(message));
	waiter_gang_reason(P, H100, I, NULL, &GANG_POD, pods, key, message, sizeof(message));
	cr_expect_str_eq(message, want);
}

Test(waiter, which_pods_are_told_of_their_gang)
{
	struct inventory_waiting pod = GANG_POD;

	cr_expect(waiter_is_gang(&pod));
	pod.gang_gated = false;
	cr_expect_not(waiter_is_gang(&pod), "released: the scheduler's to say");
	pod.gang_route = "workload";
	cr_expect(waiter_is_gang(&pod));
	pod.gang_route = "podgroup";
	cr_expect(waiter_is_gang(&pod));
	pod.gang = "";
	cr_expect_not(waiter_is_gang(&pod));
}

Test(waiter, a_gang_that_fits_is_starting)
{
	pool(3, false, NULL, 0);
	expect_gang(3, NULL, "waits for its gang g-3f2a1c (route gates): all 3 pods fit "
			     "now; starting");
}

Test(waiter, a_gang_one_node_short)
{
	const int64_t bound[] = {8};

	pool(3, false, bound, 1);
	expect_gang(3, NULL, "waits for its gang g-3f2a1c (route gates): 2 of 3 pods fit "
			     "now; short: 1 node with 8 nvidia.com/gpu free");
}

Test(waiter, a_gang_the_flavor_never_holds)
{
	pool(2, false, NULL, 0);
	expect_gang(3, NULL, "waits for its gang g-3f2a1c (route gates): 2 of 3 pods fit "
			     "now; short: the usable nodes of flavor h100 can hold 2 of its 3 "
			     "pods of 8 nvidia.com/gpu, even empty");
}

Test(waiter, a_gang_without_nodes)
{
	pool(0, false, NULL, 0);
	expect_gang(3, NULL, "waits for its gang g-3f2a1c (route gates): 0 of 3 pods fit "
			     "now; short: no node of flavor h100 is in the cluster");
}

Test(waiter, a_gang_pool_not_listed_yet)
{
	expect_gang(3, NULL, "waits for its gang g-3f2a1c (route gates): 3 pods; the pool "
			     "is not known yet");
}

/* Two cliques of 3 nodes, one node of each busy: 4 free, no clique has 3. */
Test(waiter, a_gang_in_one_domain_names_the_best)
{
	struct pool_resource res[] = {{"nvidia.com/gpu", 8, 8, 0}};
	struct pool_condition cond[] = {{"Ready", "True", ""}};

	inventory_relist_begin(I, INVENTORY_NODES);
	for (int i = 0; i < 6; i++) {
		char name[16];
		struct pool_label labels[] = {{"nvidia.com/gpu.product", "H100"},
					      {"nvidia.com/gpu.clique", i < 3 ? "c0" : "c1"}};
		struct pool_node n = {.name = name, .labels = labels, .n_labels = 2,
				      .resources = res, .n_resources = 1, .conditions = cond,
				      .n_conditions = 1, .ready = true};

		snprintf(name, sizeof(name), "node-%d", i);
		cr_assert_eq(inventory_node_put(I, &n), 0);
	}
	inventory_relist_end(I, INVENTORY_NODES);
	inventory_relist_begin(I, INVENTORY_PODS);
	for (int i = 0; i < 6; i += 3) {
		char uid[16], node[16];
		struct inventory_ask ask = {"nvidia.com/gpu", 8};
		struct inventory_placement pl = {uid, node, &ask, 1, NULL, NULL};

		snprintf(uid, sizeof(uid), "blocker-%d", i);
		snprintf(node, sizeof(node), "node-%d", i);
		cr_assert_eq(inventory_pod_put(I, &pl), 0);
	}
	inventory_relist_end(I, INVENTORY_PODS);
	expect_gang(3, "nvidia.com/gpu.clique",
		    "waits for its gang g-3f2a1c (route gates): 2 of 3 pods fit now, best "
		    "domain nvidia.com/gpu.clique=c0; short: 1 node with 8 nvidia.com/gpu free");
}

/* A DRA flavor's units are devices, and its messages say so. */
Test(waiter, a_dra_flavor_counts_devices)
{
	struct policy *p = test_policy(
		"version: 1\n"
		"flavors:\n"
		"  - name: h100-dra\n"
		"    sharing: exclusive\n"
		"    gpusPerNode: 8\n"
		"    dra: {deviceClassName: gpu.nvidia.com, driver: gpu.nvidia.com,\n"
		"          attributes: [\"productName=H100\"]}\n"
		"classes: []\n"
		"tenants:\n"
		"  - {name: research, namespaces: [research], quota: [{flavor: h100-dra, nominal: 16}]}\n");
	const struct policy_flavor *f = policy_flavor_find(p, "h100-dra");
	struct pool_label attr = {"gpu.nvidia.com/productName", "H100"};
	const bool is_string = true;
	struct pool_device dev[] = {
		{.driver = "gpu.nvidia.com", .pool = "dra-0", .name = "gpu-0",
		 .attributes = &attr, .attribute_is_string = &is_string, .n_attributes = 1},
		{.driver = "gpu.nvidia.com", .pool = "dra-0", .name = "gpu-1",
		 .attributes = &attr, .attribute_is_string = &is_string, .n_attributes = 1}};
	struct inventory_slice slice = {.name = "dra-0-gpu", .driver = "gpu.nvidia.com",
					.pool = "dra-0", .generation = 1, .slice_count = 1,
					.node = "dra-0", .devices = dev, .n_devices = 2};
	struct inventory_claim_device held = {.driver = "gpu.nvidia.com", .pool = "dra-0",
					      .device = "gpu-1"};
	struct pool_condition cond[] = {{"Ready", "True", ""}};
	struct pool_node n = {.name = "dra-0", .conditions = cond, .n_conditions = 1,
			      .ready = true};
	const struct inventory_waiting pod = {
		.uid = "u1", .namespace = "research", .name = "train-0",
		.tenant = "research", .flavor = "h100-dra", .per_pod = 2, .since = 1000,
		.scheduler = ""};
	char message[1024];

	cr_assert_not_null(f);
	for (int k = INVENTORY_NODES; k < INVENTORY_KINDS; k++)
		inventory_relist_begin(I, (enum inventory_kind)k);
	cr_assert_eq(inventory_node_put(I, &n), 0);
	cr_assert_eq(inventory_slice_put(I, &slice), 0);
	cr_assert_eq(inventory_claim_put(I, "claim-1", &held, 1), 0);
	for (int k = INVENTORY_NODES; k < INVENTORY_KINDS; k++)
		inventory_relist_end(I, (enum inventory_kind)k);
	waiter_reason(p, f, I, NULL, &pod, message, sizeof(message));
	cr_expect_str_eq(message, "no node of flavor h100-dra has 2 gpu.nvidia.com devices "
			 "free: 1 free on 1 usable node, at most 1 on one");
	policy_free(p);
}
