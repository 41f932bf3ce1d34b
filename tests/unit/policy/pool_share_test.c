/*
 * policy/pool.h for a DRA flavor shared by capacity (dra.sharedCapacity):
 * a device that allows multiple allocations holds floor(capacity /
 * perUnit) units, and its shares' consumedCapacity uses them up.
 */
#include "policy/policy.h"
#include "policy/pool.h"
#include "tests/unit/test_policy.h"

#include <criterion/criterion.h>
#include <stdint.h>

static const char yaml[] =
	"version: 1\n"
	"flavors:\n"
	"  - name: l40s-share\n"
	"    sharing: time-slicing\n"
	"    gpusPerNode: 32\n"
	"    dra:\n"
	"      deviceClassName: gpu.nvidia.com\n"
	"      driver: gpu.nvidia.com\n"
	"      attributes: [\"productName=NVIDIA L40S\"]\n"
	"      sharedCapacity: {name: memory, perUnit: 12Gi, unitsPerDevice: 4}\n"
	"  - name: l40s\n"
	"    sharing: exclusive\n"
	"    gpusPerNode: 8\n"
	"    dra:\n"
	"      deviceClassName: gpu.nvidia.com\n"
	"      driver: gpu.nvidia.com\n"
	"      attributes: [\"productName=NVIDIA L40S\"]\n"
	"classes: []\n"
	"tenants: []\n";

/* An L40S of 48Gi (the driver's unqualified name, qualified as the
 * reader does), shared or not. */
struct dev {
	struct pool_label attr, cap[2];
	bool is_string;
	struct pool_device d;
};

static void l40s(struct dev *g, const char *name, bool multi)
{
	g->attr = (struct pool_label){"gpu.nvidia.com/productName", "NVIDIA L40S"};
	g->is_string = true;
	g->cap[0] = (struct pool_label){"gpu.nvidia.com/multiprocessors", "142"};
	g->cap[1] = (struct pool_label){"gpu.nvidia.com/memory", "48Gi"};
	g->d = (struct pool_device){
		.driver = "gpu.nvidia.com", .pool = "node-a", .name = name,
		.attributes = &g->attr, .attribute_is_string = &g->is_string,
		.n_attributes = 1, .capacity = g->cap, .n_capacity = 2,
		.multi_alloc = multi,
	};
}

Test(pool_share, a_shared_flavors_devices_allow_several_allocations)
{
	struct policy *p = test_policy(yaml);
	const struct policy_flavor *sh = policy_flavor_find(p, "l40s-share");
	const struct policy_flavor *whole = policy_flavor_find(p, "l40s");
	struct dev g;

	l40s(&g, "gpu-0", true);
	cr_assert(pool_device_in_flavor(&g.d, sh));
	cr_assert(pool_device_in_flavor(&g.d, whole), "whole flavors do not care");
	l40s(&g, "gpu-0", false);
	cr_assert_not(pool_device_in_flavor(&g.d, sh), "allocated once: no shares");
	l40s(&g, "gpu-0", true);
	g.d.n_capacity = 1; /* no memory */
	cr_assert_not(pool_device_in_flavor(&g.d, sh));
	policy_free(p);
}

Test(pool_share, units_are_whole_shares_of_the_capacity_and_what_is_left)
{
	struct policy *p = test_policy(yaml);
	const struct policy_flavor *sh = policy_flavor_find(p, "l40s-share");
	struct dev g;
	int64_t units, used, consumed[2] = {0, 0};

	l40s(&g, "gpu-0", true);
	pool_device_units(&g.d, sh, &units, &used);
	cr_assert_eq(units, 4, "48Gi / 12Gi");
	cr_assert_eq(used, 0);
	/* shares of 12Gi and 8Gi (a share below a unit is a unit's room
	 * gone): 28Gi left, 2 new shares fit. */
	g.d.allocated = true;
	consumed[1] = 20LL << 30;
	g.d.consumed = consumed;
	pool_device_units(&g.d, sh, &units, &used);
	cr_assert_eq(units, 4);
	cr_assert_eq(used, 2);
	consumed[1] = 48LL << 30;
	pool_device_units(&g.d, sh, &units, &used);
	cr_assert_eq(used, 4, "full");
	consumed[1] = 60LL << 30; /* more than it has: all used, never more */
	pool_device_units(&g.d, sh, &units, &used);
	cr_assert_eq(used, 4);
	/* 50Gi of capacity: 4 whole units, the 2Gi rest no unit */
	g.cap[1].value = "50Gi";
	consumed[1] = 0;
	pool_device_units(&g.d, sh, &units, &used);
	cr_assert_eq(units, 4);
	cr_assert_eq(used, 0);
	/* A whole flavor: 1, used once allocated. */
	pool_device_units(&g.d, policy_flavor_find(p, "l40s"), &units, &used);
	cr_assert_eq(units, 1);
	cr_assert_eq(used, 1);
	policy_free(p);
}

Test(pool_share, a_nodes_units_are_its_devices_shares)
{
	static const struct pool_condition ready[] = {{"Ready", "True", ""}};
	struct policy *p = test_policy(yaml);
	const struct policy_flavor *sh = policy_flavor_find(p, "l40s-share");
	struct dev g[3];
	struct pool_device d[3];
	int64_t consumed[2] = {0, 30LL << 30};
	struct pool_node n = {.name = "a", .conditions = ready, .n_conditions = 1,
			      .ready = true, .devices = d, .n_devices = 3};
	const struct pool_node *nodes[1] = {&n};
	struct pool_member m[1];
	struct pool_view v;

	l40s(&g[0], "gpu-0", true);
	l40s(&g[1], "gpu-1", true);
	l40s(&g[2], "gpu-2", false); /* not shareable: not the flavor's */
	for (int i = 0; i < 3; i++)
		d[i] = g[i].d;
	d[1].allocated = true;
	d[1].consumed = consumed; /* 30Gi: 18Gi left, 1 share */
	pool_view_build(nodes, 1, sh, NULL, m, &v);
	cr_assert_eq(v.n_members, 1);
	cr_assert_eq(m[0].capacity, 8);
	cr_assert_eq(m[0].allocatable, 8);
	cr_assert_eq(m[0].allocated, 3);
	cr_assert_eq(m[0].free, 5);
	cr_assert_eq(v.largest_free, 5);
	policy_free(p);
}
