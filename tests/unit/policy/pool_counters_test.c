/*
 * The pool's counters (policy/pool.c pool_device_blocked and the DRA
 * views): NVIDIA-shaped partitionable GPUs (KEP-4815), where a full GPU
 * and its MIG partitions consume one counter set gpu-<minor>-counter-set
 * and the scheduler allocates a device only when what the held devices of
 * the pool consume plus its own fits every counter.
 */
#include "policy/policy.h"
#include "policy/pool.h"
#include "tests/unit/test_policy.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

static const char policy_yaml[] =
	"version: 1\n"
	"flavors:\n"
	"  - name: a100\n"
	"    sharing: exclusive\n"
	"    gpusPerNode: 8\n"
	"    dra:\n"
	"      deviceClassName: gpu.nvidia.com\n"
	"      driver: gpu.nvidia.com\n"
	"      attributes: [type=gpu]\n"
	"  - name: mig-1g\n"
	"    sharing: mig\n"
	"    gpusPerNode: 8\n"
	"    dra:\n"
	"      deviceClassName: mig.nvidia.com\n"
	"      driver: gpu.nvidia.com\n"
	"      attributes: [type=mig, profile=1g.5gb]\n"
	"classes: []\n"
	"tenants: []\n";

static const struct pool_condition READY[] = {{"Ready", "True", ""}};

/* gpu-0-counter-set of an A100 40GB: 98 multiprocessors, 40Gi, 8 memory
 * slices. */
static const struct pool_label set_counters[] = {
	{"multiprocessors", "98"}, {"memory", "40Gi"},
	{"memory-slice-0", "1"}, {"memory-slice-1", "1"}, {"memory-slice-2", "1"},
	{"memory-slice-3", "1"}, {"memory-slice-4", "1"}, {"memory-slice-5", "1"},
	{"memory-slice-6", "1"}, {"memory-slice-7", "1"},
};

/* The full GPU consumes all of it. */
static const struct pool_counter_use gpu_use = {"gpu-0-counter-set", set_counters, 10};

/* A 1g.5gb partition on memory slice k: 14 multiprocessors, 5Gi. */
struct mig {
	struct pool_label counters[3];
	struct pool_counter_use use;
	char slice[24], name[24];
};

static void mig(struct mig *m, int k)
{
	snprintf(m->slice, sizeof(m->slice), "memory-slice-%d", k);
	snprintf(m->name, sizeof(m->name), "gpu-0-mig-1g-%d", k);
	m->counters[0] = (struct pool_label){"multiprocessors", "14"};
	m->counters[1] = (struct pool_label){"memory", "5Gi"};
	m->counters[2] = (struct pool_label){m->slice, "1"};
	m->use = (struct pool_counter_use){"gpu-0-counter-set", m->counters, 3};
}

static const struct pool_label gpu_attrs[] = {{"gpu.nvidia.com/type", "gpu"}};
static const struct pool_label mig_attrs[] = {{"gpu.nvidia.com/type", "mig"},
					      {"gpu.nvidia.com/profile", "1g.5gb"}};
static const bool strings[] = {true, true};

/* A node "a" with gpu-0 and partitions on memory slices 0 and 1. */
struct scene {
	struct mig m[2];
	struct pool_device d[3];
	struct pool_counter_set set;
	const struct pool_device *users[3];
	struct pool_node node;
};

static void scene(struct scene *s)
{
	memset(s, 0, sizeof(*s));
	s->d[0] = (struct pool_device){
		.driver = "gpu.nvidia.com", .pool = "a", .name = "gpu-0",
		.attributes = gpu_attrs, .attribute_is_string = strings, .n_attributes = 1,
		.consumes = &gpu_use, .n_consumes = 1,
	};
	for (int k = 0; k < 2; k++) {
		mig(&s->m[k], k);
		s->d[1 + k] = (struct pool_device){
			.driver = "gpu.nvidia.com", .pool = "a", .name = s->m[k].name,
			.attributes = mig_attrs, .attribute_is_string = strings,
			.n_attributes = 2, .consumes = &s->m[k].use, .n_consumes = 1,
		};
	}
	s->set = (struct pool_counter_set){
		.driver = "gpu.nvidia.com", .pool = "a", .name = "gpu-0-counter-set",
		.counters = set_counters, .n_counters = 10, .users = s->users,
	};
	s->node = (struct pool_node){
		.name = "a", .conditions = READY, .n_conditions = 1, .ready = true,
		.devices = s->d, .n_devices = 3, .counter_sets = &s->set,
		.n_counter_sets = 1,
	};
}

/* Device i held by a claim: allocated, and a user of the set. */
static void hold(struct scene *s, int i)
{
	s->d[i].allocated = true;
	s->users[s->set.n_users++] = &s->d[i];
}

static void view(struct scene *s, const struct policy_flavor *f, struct pool_member *m,
		 struct pool_view *v)
{
	const struct pool_node *nodes[1] = {&s->node};

	pool_view_build(nodes, 1, f, NULL, m, v);
	cr_assert_eq(v->n_members, 1);
}

Test(pool_counters, nothing_held_everything_free_but_the_gpu_and_partitions_compete)
{
	struct policy *p = test_policy(policy_yaml);
	struct scene s;
	struct pool_member m;
	struct pool_view v;
	char why[160];

	scene(&s);
	for (int i = 0; i < 3; i++)
		cr_assert_not(pool_device_blocked(&s.node, &s.d[i], why, sizeof(why)));
	cr_assert_str_eq(why, "");
	view(&s, policy_flavor_find(p, "mig-1g"), &m, &v);
	cr_assert_eq(m.capacity, 2);
	cr_assert_eq(m.allocatable, 2);
	cr_assert_eq(m.free, 2);
	cr_assert_eq(m.devices_blocked, 0);
	/* Both partitions can be had together, but not with the free GPU
	 * beside them: free is an upper bound. */
	cr_assert(v.approximate);
	view(&s, policy_flavor_find(p, "a100"), &m, &v);
	cr_assert_eq(m.free, 1);
	cr_assert(v.approximate);
	policy_free(p);
}

Test(pool_counters, a_held_gpu_blocks_its_partitions)
{
	struct policy *p = test_policy(policy_yaml);
	struct scene s;
	struct pool_member m;
	struct pool_view v;
	struct pool_summary sum;
	char why[160];

	scene(&s);
	hold(&s, 0);
	cr_assert(pool_device_blocked(&s.node, &s.d[1], why, sizeof(why)));
	cr_assert_str_eq(why, "counter set gpu-0-counter-set: multiprocessors used by gpu-0");
	view(&s, policy_flavor_find(p, "mig-1g"), &m, &v);
	cr_assert_eq(m.capacity, 2);
	cr_assert_eq(m.allocatable, 2, "blocked devices stay allocatable");
	cr_assert_eq(m.allocated, 0);
	cr_assert_eq(m.devices_blocked, 2);
	cr_assert_eq(m.free, 0);
	cr_assert_str_eq(m.blocked_why, "gpu-0-mig-1g-0: counter set gpu-0-counter-set: "
					"multiprocessors used by gpu-0");
	cr_assert_eq(v.devices_blocked, 2);
	cr_assert_eq(v.free, 0);
	cr_assert_not(v.approximate, "nothing free competes");
	pool_summarize(&v, &sum);
	cr_assert_eq(sum.devices_blocked, 2);
	cr_assert_eq(sum.free, 0);

	view(&s, policy_flavor_find(p, "a100"), &m, &v);
	cr_assert_eq(m.allocated, 1);
	cr_assert_eq(m.devices_blocked, 0, "a held device is allocated, not blocked");
	cr_assert_eq(m.free, 0);
	policy_free(p);
}

Test(pool_counters, a_held_partition_blocks_the_gpu_not_the_other_partition)
{
	struct policy *p = test_policy(policy_yaml);
	struct scene s;
	struct pool_member m;
	struct pool_view v;
	char why[160];

	scene(&s);
	hold(&s, 1);
	cr_assert(pool_device_blocked(&s.node, &s.d[0], why, sizeof(why)));
	cr_assert_str_eq(why, "counter set gpu-0-counter-set: multiprocessors used by "
			      "gpu-0-mig-1g-0");
	cr_assert_not(pool_device_blocked(&s.node, &s.d[2], why, sizeof(why)));
	view(&s, policy_flavor_find(p, "mig-1g"), &m, &v);
	cr_assert_eq(m.allocated, 1);
	cr_assert_eq(m.devices_blocked, 0);
	cr_assert_eq(m.free, 1);
	cr_assert_not(v.approximate, "the GPU is blocked: nothing competes");
	view(&s, policy_flavor_find(p, "a100"), &m, &v);
	cr_assert_eq(m.devices_blocked, 1);
	cr_assert_eq(m.free, 0);
	cr_assert_str_eq(m.blocked_why, "gpu-0: counter set gpu-0-counter-set: "
					"multiprocessors used by gpu-0-mig-1g-0");
	policy_free(p);
}

Test(pool_counters, quantities_add_up_exactly)
{
	struct scene s;
	char why[160];
	/* The set as a driver might write it: memory in Mi, and what is left
	 * for one more 5Gi partition after seven of them is 5120Mi exactly. */
	struct pool_label counters[] = {{"memory", "40960Mi"}};
	struct mig parts[8];
	struct pool_device d[8];
	const struct pool_device *users[7];

	scene(&s);
	s.set.counters = counters;
	s.set.n_counters = 1;
	for (int k = 0; k < 8; k++) {
		mig(&parts[k], k);
		parts[k].counters[0] = parts[k].counters[1]; /* memory only */
		parts[k].use.n_counters = 1;
		d[k] = s.d[1];
		d[k].consumes = &parts[k].use;
		d[k].name = parts[k].name;
	}
	for (int k = 0; k < 7; k++)
		users[k] = &d[k];
	s.set.users = users;
	s.set.n_users = 7;
	cr_assert_not(pool_device_blocked(&s.node, &d[7], why, sizeof(why)),
		      "7 x 5Gi + 5Gi = 40960Mi");
	counters[0].value = "42949672959"; /* 40Gi less one byte */
	cr_assert(pool_device_blocked(&s.node, &d[7], why, sizeof(why)));
	cr_assert_str_eq(why, "counter set gpu-0-counter-set: memory used by gpu-0-mig-1g-0");
	counters[0].value = "0.04Ti"; /* more than 40Gi */
	cr_assert_not(pool_device_blocked(&s.node, &d[7], why, sizeof(why)));
}

Test(pool_counters, a_set_or_counter_not_published_blocks)
{
	struct scene s;
	char why[160];

	scene(&s);
	s.node.n_counter_sets = 0;
	cr_assert(pool_device_blocked(&s.node, &s.d[1], why, sizeof(why)));
	cr_assert_str_eq(why, "counter set gpu-0-counter-set not published");
	scene(&s);
	s.set.pool = "b"; /* a set of another pool is not the device's */
	cr_assert(pool_device_blocked(&s.node, &s.d[1], why, sizeof(why)));
	scene(&s);
	s.set.n_counters = 2; /* no memory slices */
	cr_assert(pool_device_blocked(&s.node, &s.d[1], why, sizeof(why)));
	cr_assert_str_eq(why, "counter set gpu-0-counter-set has no counter memory-slice-0");
}

Test(pool_counters, partitions_that_overlap_compete_without_a_gpu)
{
	struct policy *p = test_policy(policy_yaml);
	struct scene s;
	struct pool_member m;
	struct pool_view v;

	scene(&s);
	/* No full GPU device: two partitions on distinct slices fit
	 * together (14 + 14 <= 98, 10Gi <= 40Gi). */
	s.node.devices = &s.d[1];
	s.node.n_devices = 2;
	view(&s, policy_flavor_find(p, "mig-1g"), &m, &v);
	cr_assert_eq(m.free, 2);
	cr_assert_not(v.approximate);
	/* On the same memory slice, only one of them can be had. */
	snprintf(s.m[1].slice, sizeof(s.m[1].slice), "memory-slice-0");
	view(&s, policy_flavor_find(p, "mig-1g"), &m, &v);
	cr_assert_eq(m.free, 2, "free stays an upper bound");
	cr_assert(v.approximate);
	policy_free(p);
}
