/*
 * The inventory (usage/inventory.c): nodes and the pods bound to them,
 * relists, and the fit it copies out for admission.
 */
#include "policy/policy.h"
#include "usage/inventory.h"
#include "tests/unit/test_policy.h"

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
	"    tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]\n"
	"    gpusPerNode: 8\n"
	"classes: []\n"
	"tenants: []\n";

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

TestSuite(inventory, .init = setup, .fini = teardown);

/* Puts an H100 node with alloc GPUs (its strings are the test's and go
 * out of scope: the inventory copies them). */
static void put_node(const char *name, int64_t alloc, bool ready, const char *clique)
{
	char n[64], c[64];
	struct pool_label labels[2];
	struct pool_resource res[] = {{"nvidia.com/gpu", 8, alloc, 0}};
	struct pool_condition cond[] = {{"Ready", ready ? "True" : "False", ""}};
	struct pool_taint taint[] = {{"nvidia.com/gpu", "present", "NoSchedule"}};
	struct pool_node node;

	snprintf(n, sizeof(n), "%s", name);
	snprintf(c, sizeof(c), "%s", clique ? clique : "");
	labels[0] = (struct pool_label){"nvidia.com/gpu.product", "H100"};
	labels[1] = (struct pool_label){"nvidia.com/gpu.clique", c};
	node = (struct pool_node){.name = n, .labels = labels, .n_labels = clique ? 2 : 1,
				  .resources = res, .n_resources = 1, .taints = taint,
				  .n_taints = 1, .conditions = cond, .n_conditions = 1,
				  .ready = ready};
	cr_assert_eq(inventory_node_put(I, &node), 0);
	memset(n, 'x', sizeof(n) - 1);
}

static void put_cpu_node(const char *name)
{
	struct pool_condition cond[] = {{"Ready", "True", ""}};
	struct pool_node node = {.name = name, .conditions = cond, .n_conditions = 1,
				 .ready = true};

	cr_assert_eq(inventory_node_put(I, &node), 0);
}

static void put_pod(const char *uid, const char *node, int64_t gpus)
{
	struct inventory_ask ask = {"nvidia.com/gpu", gpus};
	struct inventory_placement pl = {uid, node, &ask, 1, NULL, NULL};

	cr_assert_eq(inventory_pod_put(I, &pl), 0);
}

static void synced(void)
{
	inventory_relist_begin(I, INVENTORY_NODES);
	inventory_relist_end(I, INVENTORY_NODES);
	inventory_relist_begin(I, INVENTORY_PODS);
	inventory_relist_end(I, INVENTORY_PODS);
}

Test(inventory, knows_nothing_until_both_kinds_are_listed)
{
	struct pool_check f;

	put_node("a", 8, true, NULL); /* a watch event before the first list */
	inventory_fit(I, P, H100, 1, 1, NULL, &f);
	cr_assert_not(f.known);
	inventory_relist_begin(I, INVENTORY_NODES);
	put_node("b", 8, true, NULL);
	inventory_relist_end(I, INVENTORY_NODES);
	cr_assert_eq(inventory_nodes(I), 1); /* the list replaced a with b */
	cr_assert_not(inventory_synced(I));
	inventory_relist_begin(I, INVENTORY_PODS);
	inventory_relist_end(I, INVENTORY_PODS);
	cr_assert(inventory_synced(I));
	inventory_fit(I, P, H100, 1, 1, NULL, &f);
	cr_assert(f.known);
	cr_assert_eq(f.fit.verdict, POOL_FITS);
}

Test(inventory, pods_allocate_on_their_node_before_and_after_it_is_known)
{
	struct pool_check f;

	synced();
	put_pod("p1", "a", 5); /* seen before its node */
	put_node("a", 8, true, NULL);
	put_node("b", 8, true, NULL);
	put_pod("p2", "b", 6);
	inventory_fit(I, P, H100, 4, 1, NULL, &f);
	cr_assert_eq(f.fit.verdict, POOL_NOT_NOW);
	cr_assert_eq(f.free, 5);
	cr_assert_eq(f.largest_free, 3);
	cr_assert_str_eq(f.largest_free_node, "a");
	cr_assert_eq(f.n_nodes, 2);

	/* p2 moves (a replace), then p1 ends (put with no node). */
	put_pod("p2", "a", 2);
	inventory_fit(I, P, H100, 4, 1, NULL, &f);
	cr_assert_eq(f.fit.verdict, POOL_FITS);
	cr_assert_eq(f.free, 9);
	cr_assert_str_eq(f.largest_free_node, "b");
	cr_assert_eq(inventory_pod_put(I, &(struct inventory_placement){"p1", NULL,
									    NULL, 0, NULL, NULL}),
		     0);
	inventory_pod_delete(I, "p2");
	inventory_fit(I, P, H100, 8, 2, NULL, &f);
	cr_assert_eq(f.fit.verdict, POOL_FITS);
	cr_assert_eq(f.free, 16);
	cr_assert_eq(inventory_pods(I), 1); /* p1, holding nothing */
}

Test(inventory, excluded_nodes_are_copied_out_with_why)
{
	struct pool_check f;

	synced();
	put_node("a", 8, false, NULL);
	put_node("b", 6, true, NULL);
	inventory_fit(I, P, H100, 8, 1, NULL, &f);
	cr_assert_eq(f.fit.verdict, POOL_NEVER_FITS);
	cr_assert_eq(f.largest_allocatable, 6);
	cr_assert_str_eq(f.largest_allocatable_node, "b");
	cr_assert_eq(f.n_excluded, 1);
	cr_assert_str_eq(f.excluded[0].node, "a");
	cr_assert_eq(f.excluded[0].exclusion, POOL_NOT_READY);
	cr_assert_str_eq(f.excluded[0].why, "Ready=False");
}

Test(inventory, a_relist_drops_what_it_did_not_see)
{
	struct pool_check f;

	synced();
	put_node("a", 8, true, "A");
	put_node("b", 8, true, "A");
	put_pod("p1", "a", 8);
	put_pod("p2", "b", 8);
	inventory_relist_begin(I, INVENTORY_NODES);
	put_node("a", 8, true, "A");
	inventory_relist_end(I, INVENTORY_NODES);
	cr_assert_eq(inventory_nodes(I), 1);
	inventory_relist_begin(I, INVENTORY_PODS);
	put_pod("p2", "b", 8);
	inventory_relist_end(I, INVENTORY_PODS);
	cr_assert_eq(inventory_pods(I), 1);
	/* a is free again; b's pod still counts, b itself is gone. */
	inventory_fit(I, P, H100, 8, 1, "nvidia.com/gpu.clique", &f);
	cr_assert_eq(f.fit.verdict, POOL_FITS);
	cr_assert_str_eq(f.domain, "A");
	cr_assert_eq(f.n_nodes, 1);
	/* Another node, of no flavor: the cluster has nodes, none of h100. */
	put_cpu_node("cpu-0");
	inventory_node_delete(I, "a");
	inventory_fit(I, P, H100, 8, 1, NULL, &f);
	cr_assert(f.known);
	cr_assert_eq(f.fit.verdict, POOL_UNKNOWN);
	/* No node at all (a control plane alone): nothing is said. */
	inventory_node_delete(I, "cpu-0");
	inventory_fit(I, P, H100, 8, 1, NULL, &f);
	cr_assert_not(f.known);
}

Test(inventory, many_nodes_and_pods_add_up)
{
	struct pool_check f;
	char name[32], uid[32];

	synced();
	for (int i = 0; i < 300; i++) {
		snprintf(name, sizeof(name), "n%d", i);
		put_node(name, 8, true, i % 2 ? "odd" : "even");
	}
	for (int i = 0; i < 1000; i++) {
		snprintf(name, sizeof(name), "n%d", i % 300);
		snprintf(uid, sizeof(uid), "u%d", i);
		put_pod(uid, name, 1);
	}
	inventory_fit(I, P, H100, 1, 1, NULL, &f);
	cr_assert_eq(f.allocatable, 2400);
	cr_assert_eq(f.free, 1400);
	for (int i = 0; i < 1000; i += 2) {
		snprintf(uid, sizeof(uid), "u%d", i);
		inventory_pod_delete(I, uid);
	}
	inventory_fit(I, P, H100, 8, 60, "nvidia.com/gpu.clique", &f);
	cr_assert_eq(f.free, 1900);
	cr_assert_eq(f.fit.n_domains, 2);
	cr_assert_eq(inventory_pods(I), 500);
	for (int i = 0; i < 300; i++) {
		snprintf(name, sizeof(name), "n%d", i);
		inventory_node_delete(I, name);
	}
	cr_assert_eq(inventory_nodes(I), 0);
}

/* Where a pod is bound, by a label of its node (gang start pins a gang's
 * replacement pods to the domain of those already bound). */
Test(inventory, a_nodes_label)
{
	char v[64] = "untouched";

	put_node("h0", 8, true, "c0");
	put_node("h1", 8, true, NULL);
	cr_assert(inventory_node_label(I, "h0", "nvidia.com/gpu.clique", v, sizeof(v)));
	cr_assert_str_eq(v, "c0");
	strcpy(v, "untouched");
	cr_assert_not(inventory_node_label(I, "h1", "nvidia.com/gpu.clique", v, sizeof(v)));
	cr_assert_not(inventory_node_label(I, "nope", "nvidia.com/gpu.clique", v, sizeof(v)));
	put_pod("p", "h9", 8); /* a slot without its Node */
	cr_assert_not(inventory_node_label(I, "h9", "nvidia.com/gpu.clique", v, sizeof(v)));
	cr_assert_str_eq(v, "untouched");
}

/* ---- DRA: devices from ResourceSlices ----------------------------------- */

static const char dra_yaml[] =
	"version: 1\n"
	"flavors:\n"
	"  - {name: h100, resource: nvidia.com/gpu, sharing: exclusive, gpusPerNode: 8,\n"
	"     nodeSelector: [\"nvidia.com/gpu.product=H100\"],\n"
	"     tolerations: [{key: nvidia.com/gpu, operator: Exists}]}\n"
	"  - {name: h100-dra, sharing: exclusive, gpusPerNode: 8,\n"
	"     dra: {deviceClassName: gpu.nvidia.com, driver: gpu.nvidia.com,\n"
	"           attributes: [productName=H100], minCapacity: [memory=80Gi]}}\n"
	"classes: []\n"
	"tenants: []\n";

static const struct policy_flavor *DRA;

static void dra_setup(void)
{
	P = test_policy(dra_yaml);
	H100 = policy_flavor_find(P, "h100");
	DRA = policy_flavor_find(P, "h100-dra");
	I = inventory_new();
	cr_assert_not_null(I);
}

TestSuite(inventory_dra, .init = dra_setup, .fini = teardown);

/* Puts slice name of pool `pool` on node (NULL: not node-local): n
 * devices gpu-<first>... of memory mem, generation gen of count slices;
 * its strings are the test's and go out of scope. */
static void put_slice(const char *name, const char *node, const char *pool, int64_t gen,
		      int64_t count, int first, int n, const char *mem)
{
	char names[8][16], mems[8][16], pools[8][64];
	struct pool_label attrs[8][1], caps[8][1];
	bool is_string[8][1];
	struct pool_device d[8];
	struct pool_device_taint none = {{"example.com/info", "", "None"}, NULL};

	cr_assert(n <= 8);
	for (int i = 0; i < n; i++) {
		snprintf(names[i], sizeof(names[i]), "gpu-%d", first + i);
		snprintf(mems[i], sizeof(mems[i]), "%s", mem);
		snprintf(pools[i], sizeof(pools[i]), "%s", pool);
		attrs[i][0] = (struct pool_label){"gpu.nvidia.com/productName", "H100"};
		caps[i][0] = (struct pool_label){"gpu.nvidia.com/memory", mems[i]};
		is_string[i][0] = true;
		d[i] = (struct pool_device){
			.driver = "ignored", .pool = pools[i], .name = names[i],
			.attributes = attrs[i], .attribute_is_string = is_string[i],
			.n_attributes = 1, .capacity = caps[i], .n_capacity = 1,
			.taints = &none, .n_taints = 1, .allocated = true,
		};
	}
	cr_assert_eq(inventory_slice_put(I, &(struct inventory_slice){
						    .name = name, .driver = "gpu.nvidia.com",
						    .pool = pool, .generation = gen,
						    .slice_count = count, .node = node,
						    .devices = d, .n_devices = (size_t)n}),
		     0);
	for (int i = 0; i < n; i++)
		memset(names[i], 'x', sizeof(names[i]) - 1);
}

/* A node of no extended resource: DRA devices only. */
static void put_dra_node(const char *name)
{
	struct pool_condition cond[] = {{"Ready", "True", ""}};
	struct pool_node node = {.name = name, .conditions = cond, .n_conditions = 1,
				 .ready = true};

	cr_assert_eq(inventory_node_put(I, &node), 0);
}

static void list_empty(enum inventory_kind kind)
{
	inventory_relist_begin(I, kind);
	inventory_relist_end(I, kind);
}

/* Nodes, pods and every DRA kind listed. */
static void dra_synced(void)
{
	for (int k = 0; k < INVENTORY_KINDS; k++)
		list_empty((enum inventory_kind)k);
}

Test(inventory_dra, a_dra_flavor_is_known_once_every_dra_kind_is_listed)
{
	struct pool_check f;

	synced();
	put_dra_node("a");
	put_slice("a-gpus", "a", "a", 1, 1, 0, 2, "80Gi");
	cr_assert_not(inventory_dra_known(I));
	inventory_fit(I, P, DRA, 1, 1, NULL, &f);
	cr_assert_not(f.known);
	list_empty(INVENTORY_DEVICE_CLASSES);
	inventory_not_served(I, INVENTORY_TAINT_RULES); /* an older apiserver */
	inventory_relist_begin(I, INVENTORY_SLICES);
	put_slice("a-gpus", "a", "a", 1, 1, 0, 2, "80Gi");
	inventory_relist_end(I, INVENTORY_SLICES);
	cr_assert_not(inventory_dra_known(I), "claims not listed yet");
	cr_assert_not(inventory_dra_settled(I), "claims not listed yet");
	list_empty(INVENTORY_CLAIMS);
	cr_assert(inventory_dra_known(I));
	cr_assert(inventory_dra_settled(I));
	inventory_fit(I, P, DRA, 2, 1, NULL, &f);
	cr_assert(f.known);
	cr_assert_eq(f.fit.verdict, POOL_FITS);
	cr_assert_eq(f.allocatable, 2);
	cr_assert_eq(f.free, 2, "a slice's allocated flag is not a claim's");
	cr_assert_str_eq(f.largest_free_node, "a");
	cr_assert_eq(inventory_node_flavor(I, P, "a"), DRA);

	/* ResourceSlices not served: nothing is known of DRA devices. */
	inventory_not_served(I, INVENTORY_SLICES);
	cr_assert_not(inventory_dra_known(I));
	cr_assert(inventory_dra_settled(I), "not served is an answer");
	inventory_fit(I, P, DRA, 1, 1, NULL, &f);
	cr_assert_not(f.known);
	inventory_fit(I, P, H100, 1, 1, NULL, &f);
	cr_assert(f.known, "a flavor of extended resources does not care");
	cr_assert_null(inventory_node_flavor(I, P, "a"), "its devices were dropped");
	list_empty(INVENTORY_SLICES); /* served again */
	cr_assert(inventory_dra_known(I));
}

Test(inventory_dra, only_the_newest_generation_of_a_complete_pool)
{
	struct pool_check f;

	dra_synced();
	put_dra_node("a");
	put_dra_node("b");
	put_slice("a-1", "a", "a", 1, 1, 0, 4, "80Gi");
	put_slice("b-1", "b", "b", 1, 1, 0, 1, "40Gi"); /* not the flavor's */
	inventory_fit(I, P, DRA, 1, 1, NULL, &f);
	cr_assert_eq(f.n_nodes, 1);
	cr_assert_eq(f.allocatable, 4);
	/* Generation 2 of pool a comes in two slices: one seen, the pool
	 * is incomplete and offers nothing (generation 1 is outdated). */
	put_slice("a-2x", "a", "a", 2, 2, 0, 2, "80Gi");
	inventory_fit(I, P, DRA, 1, 1, NULL, &f);
	cr_assert_eq(f.n_nodes, 0);
	cr_assert_eq(f.fit.verdict, POOL_UNKNOWN);
	put_slice("a-2y", "a", "a", 2, 2, 2, 1, "80Gi");
	inventory_fit(I, P, DRA, 1, 1, NULL, &f);
	cr_assert_eq(f.n_nodes, 1);
	cr_assert_eq(f.allocatable, 3);
	inventory_slice_delete(I, "a-1");
	inventory_fit(I, P, DRA, 1, 1, NULL, &f);
	cr_assert_eq(f.allocatable, 3, "the outdated slice counted for nothing");
	/* Another node's slice of pool a (the pool is per driver and name,
	 * not per node) that is not node-local. */
	put_slice("a-2z", NULL, "a", 2, 2, 3, 1, "80Gi");
	inventory_fit(I, P, DRA, 1, 1, NULL, &f);
	cr_assert_eq(f.n_nodes, 0, "three slices of a pool of two: incomplete");
	inventory_slice_delete(I, "a-2z");
	/* b's slice grows to the flavor's memory. */
	put_slice("b-1", "b", "b", 1, 1, 0, 1, "81920Mi");
	inventory_fit(I, P, DRA, 1, 1, NULL, &f);
	cr_assert_eq(f.n_nodes, 2);
	cr_assert_eq(f.allocatable, 4);
}

Test(inventory_dra, taint_rules_and_claims_change_the_view)
{
	struct pool_check f;
	struct inventory_taint_rule rule = {
		.name = "xid", .has_selector = true, .driver = "gpu.nvidia.com",
		.pool = "a", .device = "gpu-1",
		.taint = {"example.com/xid", "79", "NoExecute"},
	};
	struct inventory_claim_device held[] = {{.driver = "gpu.nvidia.com", .pool = "a", .device = "gpu-0"},
						{.driver = "gpu.nvidia.com", .pool = "a", .device = "gpu-1"}};
	struct pool_summary sum[2];

	dra_synced();
	put_dra_node("a");
	put_slice("a-1", "a", "a", 1, 1, 0, 2, "80Gi");
	inventory_fit(I, P, DRA, 2, 1, NULL, &f);
	cr_assert_eq(f.fit.verdict, POOL_FITS);
	cr_assert_eq(inventory_taint_rule_put(I, &rule), 0);
	inventory_fit(I, P, DRA, 2, 1, NULL, &f);
	cr_assert_eq(f.fit.verdict, POOL_NEVER_FITS, "gpu-1 is tainted");
	cr_assert_eq(f.allocatable, 1);
	cr_assert_eq(inventory_summaries(I, P, sum, 2), 2);
	cr_assert_eq(sum[1].devices_tainted, 1);
	cr_assert_eq(sum[1].capacity, 2);
	/* A claim holds gpu-0 (and the tainted gpu-1). */
	cr_assert_eq(inventory_claim_put(I, "claim-1", held, 2), 0);
	inventory_fit(I, P, DRA, 1, 1, NULL, &f);
	cr_assert_eq(f.fit.verdict, POOL_NOT_NOW);
	cr_assert_eq(f.free, 0);
	inventory_taint_rule_delete(I, "xid");
	inventory_fit(I, P, DRA, 1, 1, NULL, &f);
	cr_assert_eq(f.allocatable, 2);
	cr_assert_eq(f.free, 0, "both held");
	/* The claim is deallocated (no results), then allocated again. */
	cr_assert_eq(inventory_claim_put(I, "claim-1", NULL, 0), 0);
	inventory_fit(I, P, DRA, 1, 1, NULL, &f);
	cr_assert_eq(f.free, 2);
	cr_assert_eq(inventory_claim_put(I, "claim-1", held, 1), 0);
	inventory_fit(I, P, DRA, 1, 1, NULL, &f);
	cr_assert_eq(f.free, 1);
	inventory_claim_delete(I, "claim-1");
	inventory_fit(I, P, DRA, 1, 1, NULL, &f);
	cr_assert_eq(f.free, 2);
	/* A rule without a selector matches nothing; a rule of every device
	 * of the driver matches all. */
	rule.has_selector = false;
	cr_assert_eq(inventory_taint_rule_put(I, &rule), 0);
	inventory_fit(I, P, DRA, 1, 1, NULL, &f);
	cr_assert_eq(f.allocatable, 2);
	rule.has_selector = true;
	rule.pool = rule.device = NULL;
	cr_assert_eq(inventory_taint_rule_put(I, &rule), 0);
	inventory_fit(I, P, DRA, 1, 1, NULL, &f);
	cr_assert_eq(f.allocatable, 0);
	cr_assert_eq(f.fit.verdict, POOL_NONE_USABLE);
}

Test(inventory_dra, a_device_class_serving_a_flavors_resource_hides_its_pool)
{
	struct pool_check f;

	dra_synced();
	put_node("a", 8, true, NULL);
	inventory_fit(I, P, H100, 1, 1, NULL, &f);
	cr_assert(f.known);
	cr_assert_eq(inventory_device_class_put(I, "plain", NULL), 0);
	cr_assert_eq(inventory_device_class_put(I, "other", "example.com/gpu"), 0);
	inventory_fit(I, P, H100, 1, 1, NULL, &f);
	cr_assert(f.known);
	cr_assert_eq(inventory_device_class_put(I, "gpu.nvidia.com", "nvidia.com/gpu"), 0);
	inventory_fit(I, P, H100, 1, 1, NULL, &f);
	cr_assert_not(f.known, "pods may get nvidia.com/gpu from devices");
	inventory_device_class_delete(I, "gpu.nvidia.com");
	inventory_fit(I, P, H100, 1, 1, NULL, &f);
	cr_assert(f.known);
	/* A relist that does not see it drops it too. */
	cr_assert_eq(inventory_device_class_put(I, "gpu.nvidia.com", "nvidia.com/gpu"), 0);
	inventory_relist_begin(I, INVENTORY_DEVICE_CLASSES);
	cr_assert_eq(inventory_device_class_put(I, "other", "example.com/gpu"), 0);
	inventory_relist_end(I, INVENTORY_DEVICE_CLASSES);
	inventory_fit(I, P, H100, 1, 1, NULL, &f);
	cr_assert(f.known);
}

Test(inventory_dra, a_relist_drops_stale_slices_and_nodes_keep_their_devices)
{
	struct pool_check f;
	char name[32];

	dra_synced();
	for (int i = 0; i < 40; i++) {
		snprintf(name, sizeof(name), "n%d", i);
		put_dra_node(name);
		put_slice(name, name, name, 1, 1, 0, 8, "80Gi");
	}
	inventory_fit(I, P, DRA, 8, 40, NULL, &f);
	cr_assert_eq(f.fit.verdict, POOL_FITS);
	cr_assert_eq(f.allocatable, 320);
	inventory_relist_begin(I, INVENTORY_SLICES);
	put_slice("n0", "n0", "n0", 2, 1, 0, 8, "80Gi");
	inventory_relist_end(I, INVENTORY_SLICES);
	inventory_fit(I, P, DRA, 8, 1, NULL, &f);
	cr_assert_eq(f.n_nodes, 1);
	cr_assert_eq(f.allocatable, 8);
	/* A Node's update keeps its devices; a node that joins gets them. */
	put_dra_node("n0");
	put_slice("n40", "n40", "n40", 1, 1, 0, 2, "80Gi");
	inventory_fit(I, P, DRA, 8, 1, NULL, &f);
	cr_assert_eq(f.allocatable, 8, "n40 is no Node yet");
	put_dra_node("n40");
	inventory_fit(I, P, DRA, 8, 1, NULL, &f);
	cr_assert_eq(f.n_nodes, 2);
	cr_assert_eq(f.allocatable, 10);
	cr_assert_str_eq(f.largest_free_node, "n0");
	inventory_node_delete(I, "n0");
	inventory_fit(I, P, DRA, 1, 1, NULL, &f);
	cr_assert_eq(f.allocatable, 2);
}
