/*
 * The inventory's counter sets (usage/inventory-dra.c): per (driver,
 * pool, name) from the newest complete generation of a pool, whatever
 * slice carries them, and the held devices that consume them, as the
 * scheduler's allocator reads a pool of partitionable devices.
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
	"  - {name: a100, sharing: exclusive, gpusPerNode: 8,\n"
	"     dra: {deviceClassName: gpu.nvidia.com, driver: gpu.nvidia.com,\n"
	"           attributes: [type=gpu]}}\n"
	"  - {name: mig-1g, sharing: mig, gpusPerNode: 8,\n"
	"     dra: {deviceClassName: mig.nvidia.com, driver: gpu.nvidia.com,\n"
	"           attributes: [type=mig, profile=1g.5gb]}}\n"
	"classes: []\n"
	"tenants: []\n";

static struct policy *P;
static const struct policy_flavor *GPU, *MIG;
static struct inventory *I;

static void setup(void)
{
	P = test_policy(policy_yaml);
	GPU = policy_flavor_find(P, "a100");
	MIG = policy_flavor_find(P, "mig-1g");
	I = inventory_new();
	cr_assert_not_null(I);
	for (int k = 0; k < INVENTORY_KINDS; k++) {
		inventory_relist_begin(I, (enum inventory_kind)k);
		inventory_relist_end(I, (enum inventory_kind)k);
	}
}

static void teardown(void)
{
	inventory_free(I);
	policy_free(P);
}

TestSuite(inventory_counters, .init = setup, .fini = teardown);

static const struct pool_label set_counters[] = {
	{"multiprocessors", "98"}, {"memory", "40Gi"},
	{"memory-slice-0", "1"}, {"memory-slice-1", "1"},
};

/* The counter set gpu-0-counter-set of pool `pool` in a slice of its own
 * (no devices), of generation gen of count slices, on node (NULL: none). */
static void put_counters(const char *name, const char *node, const char *pool,
			 int64_t gen, int64_t count, const char *set)
{
	struct pool_counter_set cs = {.name = set, .counters = set_counters,
				      .n_counters = 4};

	cr_assert_eq(inventory_slice_put(I, &(struct inventory_slice){
						    .name = name, .driver = "gpu.nvidia.com",
						    .pool = pool, .generation = gen,
						    .slice_count = count, .node = node,
						    .counter_sets = &cs, .n_counter_sets = 1}),
		     0);
}

static const struct pool_label gpu_attrs[] = {{"gpu.nvidia.com/type", "gpu"}};
static const struct pool_label mig_attrs[] = {{"gpu.nvidia.com/type", "mig"},
					      {"gpu.nvidia.com/profile", "1g.5gb"}};
static const bool strings[] = {true, true};
static const struct pool_label mig0[] = {{"multiprocessors", "14"}, {"memory", "5Gi"},
					 {"memory-slice-0", "1"}};
static const struct pool_label mig1[] = {{"multiprocessors", "14"}, {"memory", "5Gi"},
					 {"memory-slice-1", "1"}};

/* gpu-0 (when with_gpu) and the partitions mig-0, mig-1 of pool on node,
 * consuming set. */
static void put_devices(const char *name, const char *node, const char *pool, int64_t gen,
			int64_t count, bool with_gpu, const char *set)
{
	struct pool_counter_use use[3] = {{set, set_counters, 4}, {set, mig0, 3},
					  {set, mig1, 3}};
	struct pool_device d[3] = {
		{.name = "gpu-0", .attributes = gpu_attrs, .n_attributes = 1},
		{.name = "mig-0", .attributes = mig_attrs, .n_attributes = 2},
		{.name = "mig-1", .attributes = mig_attrs, .n_attributes = 2},
	};

	for (int i = 0; i < 3; i++) {
		d[i].attribute_is_string = strings;
		d[i].consumes = &use[i];
		d[i].n_consumes = 1;
	}
	cr_assert_eq(inventory_slice_put(I, &(struct inventory_slice){
						    .name = name, .driver = "gpu.nvidia.com",
						    .pool = pool, .generation = gen,
						    .slice_count = count, .node = node,
						    .devices = with_gpu ? d : d + 1,
						    .n_devices = with_gpu ? 3 : 2}),
		     0);
}

static void put_node(const char *name)
{
	struct pool_condition cond[] = {{"Ready", "True", ""}};
	struct pool_node node = {.name = name, .conditions = cond, .n_conditions = 1,
				 .ready = true};

	cr_assert_eq(inventory_node_put(I, &node), 0);
}

static void hold(const char *uid, const char *device)
{
	struct inventory_claim_device d = {.driver = "gpu.nvidia.com", .pool = "a", .device = device};

	cr_assert_eq(inventory_claim_put(I, uid, &d, 1), 0);
}

/* What a flavor's view shows of its first node. */
struct seen {
	const struct policy_flavor *flavor;
	size_t n_members;
	int64_t allocatable, allocated, free, blocked;
	bool approximate;
	char blocked_why[160];
};

static void seen_fn(void *ctx, const struct pool_view *v)
{
	struct seen *s = ctx;

	if (v->flavor != s->flavor)
		return;
	s->n_members = v->n_members;
	s->allocatable = v->allocatable;
	s->allocated = v->allocated;
	s->free = v->free;
	s->blocked = v->devices_blocked;
	s->approximate = v->approximate;
	snprintf(s->blocked_why, sizeof(s->blocked_why), "%s",
		 v->n_members ? v->members[0].blocked_why : "");
}

static struct seen look(const struct policy_flavor *f)
{
	struct seen s = {.flavor = f};

	cr_assert_eq(inventory_each(I, P, seen_fn, &s), 0);
	return s;
}

/* Node a: pool a in two slices, the counter set in one and the devices in
 * the other (a slice has one or the other since 1.34). */
static void node_a(void)
{
	put_node("a");
	put_counters("a-counters", "a", "a", 1, 2, "gpu-0-counter-set");
	put_devices("a-devices", "a", "a", 1, 2, true, "gpu-0-counter-set");
}

Test(inventory_counters, a_held_gpu_blocks_its_partitions_until_freed)
{
	struct seen s;
	struct pool_summary sum[2];

	node_a();
	s = look(MIG);
	cr_assert_eq(s.free, 2);
	cr_assert_eq(s.blocked, 0);
	cr_assert(s.approximate, "the free GPU competes with them");
	hold("claim-gpu", "gpu-0");
	s = look(MIG);
	cr_assert_eq(s.allocatable, 2);
	cr_assert_eq(s.allocated, 0);
	cr_assert_eq(s.blocked, 2);
	cr_assert_eq(s.free, 0);
	cr_assert_not(s.approximate);
	cr_assert_str_eq(s.blocked_why, "mig-0: counter set gpu-0-counter-set: "
					"multiprocessors used by gpu-0");
	s = look(GPU);
	cr_assert_eq(s.allocated, 1);
	cr_assert_eq(s.free, 0);
	cr_assert_eq(inventory_summaries(I, P, sum, 2), 2);
	cr_assert_eq(sum[1].devices_blocked, 2);
	cr_assert_eq(sum[0].devices_blocked, 0);
	inventory_claim_delete(I, "claim-gpu");
	s = look(MIG);
	cr_assert_eq(s.free, 2);
	cr_assert_eq(s.blocked, 0);
}

Test(inventory_counters, a_held_partition_blocks_the_gpu_not_the_other)
{
	struct seen s;
	struct pool_check c;

	node_a();
	hold("claim-mig", "mig-1");
	s = look(GPU);
	cr_assert_eq(s.blocked, 1);
	cr_assert_eq(s.free, 0);
	cr_assert_str_eq(s.blocked_why, "gpu-0: counter set gpu-0-counter-set: "
					"multiprocessors used by mig-1");
	s = look(MIG);
	cr_assert_eq(s.allocated, 1);
	cr_assert_eq(s.free, 1);
	cr_assert_eq(s.blocked, 0);
	inventory_fit(I, P, GPU, 1, 1, NULL, &c);
	cr_assert(c.known);
	cr_assert_eq(c.fit.verdict, POOL_NOT_NOW, "the GPU is there, but not now");
}

Test(inventory_counters, counters_from_a_slice_on_no_node)
{
	struct seen s;

	put_node("a");
	put_counters("a-counters", NULL, "a", 1, 2, "gpu-0-counter-set");
	put_devices("a-devices", "a", "a", 1, 2, true, "gpu-0-counter-set");
	hold("claim-gpu", "gpu-0");
	s = look(MIG);
	cr_assert_eq(s.n_members, 1);
	cr_assert_eq(s.blocked, 2);
	/* Another pool's set of the same name is not pool a's. */
	inventory_slice_delete(I, "a-counters");
	put_counters("b-counters", NULL, "b", 1, 1, "gpu-0-counter-set");
	put_counters("a-counters", NULL, "a", 1, 2, "other-set");
	s = look(MIG);
	cr_assert_eq(s.n_members, 0, "a device consumes a set its pool lacks: invalid");
}

Test(inventory_counters, an_incomplete_pool_offers_nothing)
{
	struct seen s;

	put_node("a");
	put_devices("a-devices", "a", "a", 1, 2, true, "gpu-0-counter-set");
	s = look(MIG);
	cr_assert_eq(s.n_members, 0, "the counter slice is not seen yet");
	put_counters("a-counters", "a", "a", 1, 2, "gpu-0-counter-set");
	s = look(MIG);
	cr_assert_eq(s.n_members, 1);
	cr_assert_eq(s.free, 2);
}

Test(inventory_counters, a_set_named_twice_makes_the_pool_invalid)
{
	struct seen s;

	put_node("a");
	put_counters("a-counters", "a", "a", 1, 3, "gpu-0-counter-set");
	put_counters("a-counters-2", "a", "a", 1, 3, "gpu-0-counter-set");
	put_devices("a-devices", "a", "a", 1, 3, true, "gpu-0-counter-set");
	s = look(MIG);
	cr_assert_eq(s.n_members, 0);
}

Test(inventory_counters, a_new_generation_replaces_sets_and_devices)
{
	struct seen s;

	node_a();
	hold("claim-gpu", "gpu-0");
	cr_assert_eq(look(MIG).blocked, 2);
	/* Generation 2, counters first: incomplete, nothing offered. */
	put_counters("a-counters-2", "a", "a", 2, 2, "gpu-0-counter-set");
	cr_assert_eq(look(MIG).n_members, 0);
	/* Its devices: the partitions alone.  The claim still names gpu-0,
	 * which generation 2 does not publish: it consumes nothing. */
	put_devices("a-devices-2", "a", "a", 2, 2, false, "gpu-0-counter-set");
	s = look(MIG);
	cr_assert_eq(s.n_members, 1);
	cr_assert_eq(s.blocked, 0);
	cr_assert_eq(s.free, 2);
	cr_assert_eq(look(GPU).n_members, 0);
}
