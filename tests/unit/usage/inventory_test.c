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
