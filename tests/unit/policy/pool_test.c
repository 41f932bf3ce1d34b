/*
 * The pool (policy/pool.c): which nodes a flavor has, which are excluded
 * and why, and whether a request fits.  Nodes are written as plain values.
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
	"  - name: h100\n"
	"    resource: nvidia.com/gpu\n"
	"    sharing: exclusive\n"
	"    nodeSelector: [\"nvidia.com/gpu.product=H100\"]\n"
	"    tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]\n"
	"    gpusPerNode: 8\n"
	"  - name: l4\n"
	"    resource: nvidia.com/gpu.shared\n"
	"    sharing: time-slicing\n"
	"    nodeSelector: [\"nvidia.com/gpu.product=L4\"]\n"
	"    tolerations: [{key: dedicated, operator: Equal, value: gpu}]\n"
	"    gpusPerNode: 16\n"
	"classes: []\n"
	"tenants: []\n";

static struct policy *P;
static const struct policy_flavor *H100, *L4;

static void setup(void)
{
	P = test_policy(policy_yaml);
	H100 = policy_flavor_find(P, "h100");
	L4 = policy_flavor_find(P, "l4");
}

static void teardown(void)
{
	policy_free(P);
}

TestSuite(pool, .init = setup, .fini = teardown);

static const struct pool_condition READY[] = {{"Ready", "True", "KubeletReady"}};
static const struct pool_taint GPU_TAINT[] = {{"nvidia.com/gpu", "present", "NoSchedule"}};

/* An H100 node: 8 GPUs, alloc allocatable, used allocated, in clique. */
struct h100 {
	struct pool_label labels[2];
	struct pool_resource res[1];
	struct pool_node node;
};

static void h100(struct h100 *x, const char *name, int64_t alloc, int64_t used,
		 const char *clique)
{
	x->labels[0] = (struct pool_label){"nvidia.com/gpu.product", "H100"};
	x->labels[1] = (struct pool_label){"nvidia.com/gpu.clique", clique};
	x->res[0] = (struct pool_resource){"nvidia.com/gpu", 8, alloc, used};
	x->node = (struct pool_node){
		.name = name, .labels = x->labels, .n_labels = clique ? 2 : 1,
		.resources = x->res, .n_resources = 1, .taints = GPU_TAINT,
		.n_taints = 1, .conditions = READY, .n_conditions = 1,
		.ready = true,
	};
}

/* The totals of a view: capacity, allocatable, allocated and free units. */
static void expect_totals(const struct pool_view *v, int64_t capacity,
			  int64_t allocatable, int64_t allocated, int64_t free_)
{
	cr_assert_eq(v->capacity, capacity, "capacity %lld", (long long)v->capacity);
	cr_assert_eq(v->allocatable, allocatable, "allocatable %lld",
		     (long long)v->allocatable);
	cr_assert_eq(v->allocated, allocated, "allocated %lld", (long long)v->allocated);
	cr_assert_eq(v->free, free_, "free %lld", (long long)v->free);
}

Test(pool, membership_needs_the_labels_and_the_resource)
{
	struct h100 a;
	struct pool_label plain[] = {{"nvidia.com/gpu.product", "H100"}};
	struct pool_node no_resource = {.name = "cpu", .labels = plain, .n_labels = 1,
					.ready = true};

	h100(&a, "a", 8, 0, NULL);
	cr_assert(pool_node_in_flavor(&a.node, H100));
	cr_assert_not(pool_node_in_flavor(&a.node, L4));
	cr_assert_not(pool_node_in_flavor(&no_resource, H100));
	cr_assert_str_eq(pool_node_label(&a.node, "nvidia.com/gpu.product"), "H100");
	cr_assert_null(pool_node_label(&a.node, "nvidia.com/gpu.clique"));
}

Test(pool, exclusions_in_order_health_first)
{
	struct h100 a;
	char why[160];
	struct pool_taint quarantine[] = {
		{"nvidia.com/gpu", "present", "NoSchedule"},
		{"gpu-health", "fatal", "NoSchedule"},
	};
	struct pool_condition sick[] = {{"Ready", "True", ""},
					{"GpuXidError", "True", "Xid79"}};
	struct policy_health_taint ht[] = {{"gpu-health", NULL, NULL}};
	struct policy_health_condition hc[] = {{"GpuXidError", "True"}};
	struct policy_kv hl[] = {{"other-state", NULL}, {"repair-state", "in-progress"}};
	struct policy_health h = {.taints = ht, .n_taints = 1,
				  .conditions = hc, .n_conditions = 1,
				  .labels = hl, .n_labels = 2};

	h100(&a, "a", 8, 0, NULL);
	cr_assert_eq(pool_node_exclusion(&a.node, H100, &h, why, sizeof(why)), POOL_USABLE);
	cr_assert_str_eq(why, "");

	/* Untolerated NoSchedule taint: L4's toleration does not cover it. */
	cr_assert_eq(pool_node_exclusion(&a.node, L4, &h, why, sizeof(why)), POOL_TAINTED);
	cr_assert_str_eq(why, "taint nvidia.com/gpu=present:NoSchedule");

	a.node.unschedulable = true;
	cr_assert_eq(pool_node_exclusion(&a.node, H100, &h, why, sizeof(why)), POOL_CORDONED);
	cr_assert_str_eq(why, "spec.unschedulable");

	a.node.ready = false;
	a.node.conditions = (struct pool_condition[]){{"Ready", "Unknown", "NodeStatusUnknown"}};
	cr_assert_eq(pool_node_exclusion(&a.node, H100, &h, why, sizeof(why)), POOL_NOT_READY);
	cr_assert_str_eq(why, "Ready=Unknown");

	a.labels[1] = (struct pool_label){"repair-state", "done"};
	a.node.n_labels = 2;
	cr_assert_eq(pool_node_exclusion(&a.node, H100, &h, why, sizeof(why)), POOL_NOT_READY);
	a.labels[1] = (struct pool_label){"repair-state", "in-progress"};
	cr_assert_eq(pool_node_exclusion(&a.node, H100, &h, why, sizeof(why)), POOL_HEALTH);
	cr_assert_str_eq(why, "label repair-state=in-progress");
	/* A label named without a value: any value. */
	a.labels[1] = (struct pool_label){"other-state", "anything"};
	cr_assert_eq(pool_node_exclusion(&a.node, H100, &h, why, sizeof(why)), POOL_HEALTH);
	cr_assert_str_eq(why, "label other-state=anything");
	a.labels[1] = (struct pool_label){"repair-state", "in-progress"};

	a.node.conditions = sick;
	a.node.n_conditions = 2;
	cr_assert_eq(pool_node_exclusion(&a.node, H100, &h, why, sizeof(why)), POOL_HEALTH);
	cr_assert_str_eq(why, "condition GpuXidError=True (reason Xid79)");

	a.node.taints = quarantine;
	a.node.n_taints = 2;
	cr_assert_eq(pool_node_exclusion(&a.node, H100, &h, why, sizeof(why)), POOL_HEALTH);
	cr_assert_str_eq(why, "taint gpu-health=fatal:NoSchedule");

	/* Without health settings, the same node is only NotReady. */
	cr_assert_eq(pool_node_exclusion(&a.node, H100, NULL, why, sizeof(why)), POOL_NOT_READY);
}

Test(pool, health_taint_value_and_effect_narrow_the_match)
{
	struct h100 a;
	char why[160];
	struct pool_taint t[] = {{"gpu-health", "degraded", "PreferNoSchedule"}};
	struct policy_health_taint ht[] = {{"gpu-health", "fatal", NULL},
					   {"gpu-health", NULL, "NoExecute"}};
	struct policy_health h = {.taints = ht, .n_taints = 2};

	h100(&a, "a", 8, 0, NULL);
	a.node.taints = t;
	cr_assert_eq(pool_node_exclusion(&a.node, H100, &h, why, sizeof(why)), POOL_USABLE);
	t[0].effect = "NoExecute";
	cr_assert_eq(pool_node_exclusion(&a.node, H100, &h, why, sizeof(why)), POOL_HEALTH);
	cr_assert_str_eq(why, "taint gpu-health=degraded:NoExecute");
	/* Not named as health, NoExecute and not tolerated: tainted. */
	t[0].key = "other";
	cr_assert_eq(pool_node_exclusion(&a.node, H100, &h, why, sizeof(why)), POOL_TAINTED);
	cr_assert_str_eq(why, "taint other=degraded:NoExecute");
}

Test(pool, view_totals_count_usable_nodes_only)
{
	struct h100 a, b, c;
	struct pool_member m[3];
	struct pool_view v;
	const struct pool_node *nodes[3];

	h100(&a, "a", 8, 3, NULL);
	h100(&b, "b", 7, 0, NULL); /* a device plugin lost one GPU */
	h100(&c, "c", 8, 0, NULL);
	c.node.unschedulable = true;
	nodes[0] = &a.node;
	nodes[1] = &b.node;
	nodes[2] = &c.node;
	pool_view_build(nodes, 3, H100, NULL, m, &v);
	cr_assert_eq(v.n_members, 3);
	cr_assert_eq(v.n_usable, 2);
	expect_totals(&v, 16, 15, 3, 12);
	cr_assert_eq(v.largest_allocatable, 8);
	cr_assert_str_eq(v.largest_allocatable_node, "a");
	cr_assert_eq(v.largest_free, 7);
	cr_assert_str_eq(v.largest_free_node, "b");
	cr_assert_eq(m[2].exclusion, POOL_CORDONED);
	cr_assert_eq(m[2].free, 8);
	pool_view_build(nodes, 3, L4, NULL, m, &v);
	cr_assert_eq(v.n_members, 0);
}

Test(pool, allocated_beyond_allocatable_leaves_nothing_free)
{
	struct h100 a;
	struct pool_member m[1];
	struct pool_view v;
	const struct pool_node *nodes[] = {&a.node};

	h100(&a, "a", 6, 8, NULL); /* two GPUs died under running pods */
	pool_view_build(nodes, 1, H100, NULL, m, &v);
	cr_assert_eq(v.free, 0);
	cr_assert_eq(v.allocated, 8);
}

Test(pool, fit_never_not_now_and_fits)
{
	struct h100 a, b;
	struct pool_member m[2];
	struct pool_view v;
	struct pool_fit fit;
	const struct pool_node *nodes[] = {&a.node, &b.node};

	h100(&a, "a", 8, 5, NULL);
	h100(&b, "b", 8, 6, NULL);
	pool_view_build(nodes, 2, H100, NULL, m, &v);
	/* 5 free in all, at most 3 on one node: fragmentation. */
	pool_fit(&v, 4, 1, NULL, &fit);
	cr_assert_eq(fit.verdict, POOL_NOT_NOW);
	cr_assert_eq(fit.fit_now, 0);
	cr_assert_eq(fit.fit_empty, 4);
	pool_fit(&v, 3, 1, NULL, &fit);
	cr_assert_eq(fit.verdict, POOL_FITS);
	cr_assert_eq(fit.fit_now, 1);
	pool_fit(&v, 9, 1, NULL, &fit);
	cr_assert_eq(fit.verdict, POOL_NEVER_FITS);
	pool_fit(&v, 2, 3, NULL, &fit);
	cr_assert_eq(fit.verdict, POOL_NOT_NOW);
	cr_assert_eq(fit.fit_now, 2);
	cr_assert_eq(fit.fit_empty, 8);

	/* One node excluded: the other decides, 9 never fits on it. */
	a.node.ready = false;
	pool_view_build(nodes, 2, H100, NULL, m, &v);
	pool_fit(&v, 3, 1, NULL, &fit);
	cr_assert_eq(fit.verdict, POOL_NOT_NOW);
	cr_assert_eq(fit.n_excluded, 1);

	/* Every node excluded: advisory only (a broken health feed must not
	 * stop every pod at the door). */
	b.node.ready = false;
	pool_view_build(nodes, 2, H100, NULL, m, &v);
	pool_fit(&v, 1, 1, NULL, &fit);
	cr_assert_eq(fit.verdict, POOL_NONE_USABLE);
	cr_assert_eq(fit.n_excluded, 2);
	cr_assert_str_eq(pool_verdict_name(fit.verdict), "none-usable");

	/* Usable nodes that offer nothing (a device plugin restarting reports
	 * allocatable 0): advisory as well, never a denial. */
	a.node.ready = b.node.ready = true;
	a.res[0].allocatable = b.res[0].allocatable = 0;
	pool_view_build(nodes, 2, H100, NULL, m, &v);
	pool_fit(&v, 1, 1, NULL, &fit);
	cr_assert_eq(fit.verdict, POOL_NONE_USABLE);
	cr_assert_eq(fit.n_excluded, 0);

	/* No node of the flavor at all: unknown (an autoscaler may add one). */
	pool_view_build(nodes, 2, L4, NULL, m, &v);
	pool_fit(&v, 1, 1, NULL, &fit);
	cr_assert_eq(fit.verdict, POOL_UNKNOWN);
}

Test(pool, a_gang_with_a_required_topology_needs_one_domain)
{
	struct h100 x[5];
	struct pool_member m[5];
	struct pool_view v;
	struct pool_fit fit;
	const struct pool_node *nodes[5];
	const char *key = "nvidia.com/gpu.clique";

	h100(&x[0], "a0", 8, 0, "A");
	h100(&x[1], "a1", 8, 8, "A");
	h100(&x[2], "b0", 8, 0, "B");
	h100(&x[3], "b1", 8, 0, "B");
	h100(&x[4], "n", 8, 0, NULL); /* no clique label: in no domain */
	for (int i = 0; i < 5; i++)
		nodes[i] = &x[i].node;
	pool_view_build(nodes, 5, H100, NULL, m, &v);

	pool_fit(&v, 8, 2, key, &fit);
	cr_assert_eq(fit.verdict, POOL_FITS);
	cr_assert_str_eq(fit.domain, "B");
	cr_assert_eq(fit.n_domains, 2);
	cr_assert_eq(fit.fit_now, 2);

	/* 3 whole nodes in one domain: none has 3 (and the unlabelled node
	 * counts in none), although 3 are free in all. */
	pool_fit(&v, 8, 3, key, &fit);
	cr_assert_eq(fit.verdict, POOL_NEVER_FITS);
	cr_assert_eq(fit.fit_empty, 2);
	pool_fit(&v, 8, 3, NULL, &fit);
	cr_assert_eq(fit.verdict, POOL_FITS);

	/* B busy: A could hold 2 when empty, has room for 1 now. */
	x[2].res[0].allocated = 8;
	pool_view_build(nodes, 5, H100, NULL, m, &v);
	pool_fit(&v, 8, 2, key, &fit);
	cr_assert_eq(fit.verdict, POOL_NOT_NOW);
	cr_assert_eq(fit.fit_now, 1);
	cr_assert_eq(fit.fit_empty, 2);
}

/* A gang whose first pods are bound in a domain must find its room there
 * (pool_fit_in), even when another domain has more. */
Test(pool, a_gang_bound_in_a_domain_fits_only_there)
{
	struct h100 x[4];
	struct pool_member m[4];
	struct pool_view v;
	struct pool_fit fit;
	struct pool_check pc;
	const struct pool_node *nodes[4];
	const char *key = "nvidia.com/gpu.clique";

	h100(&x[0], "a0", 8, 8, "A");
	h100(&x[1], "a1", 8, 0, "A");
	h100(&x[2], "b0", 8, 0, "B");
	h100(&x[3], "b1", 8, 0, "B");
	for (int i = 0; i < 4; i++)
		nodes[i] = &x[i].node;
	pool_view_build(nodes, 4, H100, NULL, m, &v);

	pool_fit_in(&v, 8, 2, key, NULL, &fit);
	cr_assert_eq(fit.verdict, POOL_FITS);
	cr_assert_str_eq(fit.domain, "B");
	pool_fit_in(&v, 8, 2, key, "A", &fit);
	cr_assert_eq(fit.verdict, POOL_NOT_NOW);
	cr_assert_eq(fit.fit_now, 1);
	cr_assert_str_eq(fit.domain, "A");
	cr_assert_eq(fit.n_domains, 1);
	pool_fit_in(&v, 8, 1, key, "A", &fit);
	cr_assert_eq(fit.verdict, POOL_FITS);
	/* A domain no usable node has: nothing fits there. */
	pool_fit_in(&v, 8, 1, key, "C", &fit);
	cr_assert_eq(fit.verdict, POOL_NEVER_FITS);
	cr_assert_null(fit.domain);
	/* The check names the domain it was asked for. */
	pool_check_build_in(&v, 8, 1, key, "A", &pc);
	cr_assert(pc.known);
	cr_assert_str_eq(pc.domain, "A");
	cr_assert_eq(pc.fit.domain, pc.domain);
}

/* ---- health settings from the policy file ------------------------------ */

static bool has_condition(const struct policy_health *h, const char *type,
			  const char *status)
{
	for (size_t i = 0; i < h->n_conditions; i++)
		if (strcmp(h->conditions[i].type, type) == 0 &&
		    strcmp(h->conditions[i].status, status) == 0)
			return true;
	return false;
}

Test(pool, health_defaults_cover_nvsentinel_and_node_problem_detector)
{
	const struct policy_health *h = policy_health(P);
	struct h100 a;
	char why[160];
	struct pool_label state[] = {{"nvidia.com/gpu.product", "H100"},
				     {"dgxc.nvidia.com/nvsentinel-state", "draining"}};
	struct pool_condition xid[] = {{"Ready", "True", ""},
				       {"SysLogsXIDError", "True", "SysLogsXIDErrorIsNotHealthy"}};
	struct pool_taint oos[] = {{"node.kubernetes.io/out-of-service", "nodeshutdown",
				    "NoExecute"}};

	cr_assert(has_condition(h, "GpuXidError", "True"));
	cr_assert(has_condition(h, "KernelDeadlock", "True"));
	cr_assert_not(has_condition(h, "GpuThermalWatch", "True"));
	h100(&a, "a", 8, 0, NULL);
	a.node.labels = state;
	a.node.n_labels = 2;
	cr_assert_eq(pool_node_exclusion(&a.node, H100, h, why, sizeof(why)), POOL_HEALTH);
	cr_assert_str_eq(why, "label dgxc.nvidia.com/nvsentinel-state=draining");
	a.node.n_labels = 1;
	a.node.conditions = xid;
	a.node.n_conditions = 2;
	cr_assert_eq(pool_node_exclusion(&a.node, H100, h, why, sizeof(why)), POOL_HEALTH);
	cr_assert_str_eq(why, "condition SysLogsXIDError=True (reason "
			      "SysLogsXIDErrorIsNotHealthy)");
	/* The same condition, healthy. */
	xid[1].status = "False";
	cr_assert_eq(pool_node_exclusion(&a.node, H100, h, why, sizeof(why)), POOL_USABLE);
	a.node.taints = oos;
	cr_assert_eq(pool_node_exclusion(&a.node, H100, h, why, sizeof(why)), POOL_HEALTH);
	cr_assert_str_eq(why, "taint node.kubernetes.io/out-of-service=nodeshutdown:NoExecute");
}

Test(pool, health_entries_add_to_the_defaults_or_replace_them)
{
	static const char base[] =
		"version: 1\nflavors: []\nclasses: []\ntenants: []\nhealth:\n";
	char yaml[512];
	struct policy *p;
	const struct policy_health *h;

	snprintf(yaml, sizeof(yaml), "%s%s", base,
		 "  taints: [\"nvidia.com/gpu-error=fatal:NoSchedule\", gpu-health]\n"
		 "  conditions: [GpuThermalWatch, \"Degraded=Unknown\"]\n"
		 "  labels: [\"nvidia.com/gpu-driver-upgrade-state=upgrade-failed\"]\n");
	p = test_policy(yaml);
	h = policy_health(p);
	cr_assert_eq(h->n_taints, 3);
	cr_assert_str_eq(h->taints[0].key, "node.kubernetes.io/out-of-service");
	cr_assert_str_eq(h->taints[1].key, "nvidia.com/gpu-error");
	cr_assert_str_eq(h->taints[1].value, "fatal");
	cr_assert_str_eq(h->taints[1].effect, "NoSchedule");
	cr_assert_str_eq(h->taints[2].key, "gpu-health");
	cr_assert_null(h->taints[2].value);
	cr_assert_null(h->taints[2].effect);
	cr_assert(has_condition(h, "GpuThermalWatch", "True"));
	cr_assert(has_condition(h, "Degraded", "Unknown"));
	cr_assert(has_condition(h, "GpuXidError", "True"));
	cr_assert_eq(h->n_labels, 2);
	cr_assert_str_eq(h->labels[1].value, "upgrade-failed");
	policy_free(p);

	snprintf(yaml, sizeof(yaml), "%s%s", base,
		 "  defaults: false\n  conditions: [GpuXidError]\n");
	p = test_policy(yaml);
	h = policy_health(p);
	cr_assert_eq(h->n_taints, 0);
	cr_assert_eq(h->n_labels, 0);
	cr_assert_eq(h->n_conditions, 1);
	cr_assert_str_eq(h->conditions[0].type, "GpuXidError");
	policy_free(p);
}

/* The health loop (policy/health.h): a node whose signal is gone but that
 * still carries gpugate's record or taint is out as validating, before
 * NotReady and cordoned; gpugate's taint is never `tainted`. */
Test(pool, gpugate_marks_keep_a_node_out_as_validating)
{
	struct h100 a;
	char why[160];
	struct pool_taint t[] = {{"nvidia.com/gpu", "present", "NoSchedule"},
				 {"gpugate.io/unhealthy", "validating", "NoSchedule"}};
	struct pool_condition xid[] = {{"Ready", "True", ""},
				       {"GpuXidError", "True", "Xid79"}};
	const struct policy_health *h = policy_health(P);

	h100(&a, "a", 8, 0, NULL);
	a.node.taints = t;
	a.node.n_taints = 2;
	cr_assert_eq(pool_node_exclusion(&a.node, H100, h, why, sizeof(why)), POOL_VALIDATING);
	cr_assert_str_eq(why, "taint gpugate.io/unhealthy=validating:NoSchedule");
	a.node.health_record = "o=1764892800000 c=1764896400000 n=2 t=condition GpuXidError=True";
	cr_assert_eq(pool_node_exclusion(&a.node, H100, h, why, sizeof(why)), POOL_VALIDATING);
	cr_assert_str_eq(why, "after condition GpuXidError=True, cleared 2025-12-05T01:00:00Z");
	/* The record alone (the taint taken off by hand) still holds it. */
	a.node.n_taints = 1;
	cr_assert_eq(pool_node_exclusion(&a.node, H100, h, why, sizeof(why)), POOL_VALIDATING);
	/* A signal on again: health first. */
	a.node.conditions = xid;
	a.node.n_conditions = 2;
	cr_assert_eq(pool_node_exclusion(&a.node, H100, h, why, sizeof(why)), POOL_HEALTH);
	/* A record that does not parse, and no taint: not gpugate's mark. */
	a.node.conditions = READY;
	a.node.n_conditions = 1;
	a.node.health_record = "o=0 c=0 n=1 t=x";
	cr_assert_eq(pool_node_exclusion(&a.node, H100, h, why, sizeof(why)), POOL_USABLE);
	/* gpugate's taint on a NotReady node: validating comes first. */
	a.node.n_taints = 2;
	a.node.ready = false;
	cr_assert_eq(pool_node_exclusion(&a.node, H100, h, why, sizeof(why)), POOL_VALIDATING);
	/* Never `tainted`, though the flavor does not tolerate it. */
	t[1].key = "other.io/unhealthy";
	a.node.ready = true;
	cr_assert_eq(pool_node_exclusion(&a.node, H100, h, why, sizeof(why)), POOL_TAINTED);
	cr_assert_str_eq(pool_exclusion_name(POOL_VALIDATING), "validating");
}

/* ---- DRA flavors: devices from ResourceSlices --------------------------- */

static const char dra_yaml[] =
	"version: 1\n"
	"flavors:\n"
	"  - name: h100-dra\n"
	"    sharing: exclusive\n"
	"    gpusPerNode: 8\n"
	"    nodeSelector: [\"example.com/pool=gpu\"]\n"
	"    dra:\n"
	"      deviceClassName: gpu.nvidia.com\n"
	"      driver: gpu.nvidia.com\n"
	"      attributes: [\"productName=NVIDIA H100 80GB HBM3\", \"example.com/rack=r1\"]\n"
	"      minCapacity: [memory=80Gi]\n"
	"      tolerations: [{key: example.com/flaky, operator: Exists, effect: NoSchedule}]\n"
	"  - name: any-dra\n"
	"    sharing: exclusive\n"
	"    gpusPerNode: 8\n"
	"    dra:\n"
	"      deviceClassName: gpu.nvidia.com\n"
	"      driver: gpu.nvidia.com\n"
	"      selectors: [\"device.attributes['gpu.nvidia.com'].brand == 'Nvidia'\"]\n"
	"  - {name: l4, resource: nvidia.com/gpu.shared, sharing: time-slicing, gpusPerNode: 8}\n"
	"classes: []\n"
	"tenants: []\n";

/* A device of gpu.nvidia.com: an H100 of rack r1 with memory mem. */
struct gpu {
	struct pool_label attrs[3];
	bool is_string[3];
	struct pool_label cap[1];
	struct pool_device d;
};

static void gpu(struct gpu *g, const char *name, const char *mem)
{
	g->attrs[0] = (struct pool_label){"gpu.nvidia.com/productName",
					  "NVIDIA H100 80GB HBM3"};
	g->attrs[1] = (struct pool_label){"example.com/rack", "r1"};
	g->attrs[2] = (struct pool_label){"gpu.nvidia.com/index", "3"};
	g->is_string[0] = g->is_string[1] = true;
	g->is_string[2] = false;
	g->cap[0] = (struct pool_label){"gpu.nvidia.com/memory", mem};
	g->d = (struct pool_device){
		.driver = "gpu.nvidia.com", .pool = "node-a", .name = name,
		.attributes = g->attrs, .attribute_is_string = g->is_string,
		.n_attributes = 3, .capacity = g->cap, .n_capacity = 1,
	};
}

Test(pool_dra, a_device_is_the_flavors_by_driver_attributes_and_capacity)
{
	struct policy *p = test_policy(dra_yaml);
	const struct policy_flavor *f = policy_flavor_find(p, "h100-dra");
	const struct policy_flavor *any = policy_flavor_find(p, "any-dra");
	struct gpu g;

	gpu(&g, "gpu-0", "81920Mi");
	cr_assert(pool_device_in_flavor(&g.d, f));
	cr_assert(pool_device_in_flavor(&g.d, any), "no attributes: every device");
	cr_assert_not(pool_device_in_flavor(&g.d, policy_flavor_find(p, "l4")),
		      "a flavor without dra has no devices");
	/* minCapacity compares quantities: 81559Mi is less than 80Gi. */
	g.cap[0].value = "81559Mi";
	cr_assert_not(pool_device_in_flavor(&g.d, f));
	g.cap[0].value = "85899345920"; /* 80Gi exactly */
	cr_assert(pool_device_in_flavor(&g.d, f));
	g.cap[0].key = "memory"; /* not the driver's qualified name */
	cr_assert_not(pool_device_in_flavor(&g.d, f));
	gpu(&g, "gpu-0", "80Gi");
	/* An unqualified flavor name is the driver's: example.com/productName
	 * is another attribute. */
	g.attrs[0].key = "example.com/productName";
	cr_assert_not(pool_device_in_flavor(&g.d, f));
	gpu(&g, "gpu-0", "80Gi");
	/* A qualified flavor name is its domain's, not the driver's. */
	g.attrs[1].key = "gpu.nvidia.com/rack";
	cr_assert_not(pool_device_in_flavor(&g.d, f));
	gpu(&g, "gpu-0", "80Gi");
	g.attrs[1].value = "r2";
	cr_assert_not(pool_device_in_flavor(&g.d, f));
	gpu(&g, "gpu-0", "80Gi");
	/* Only string attributes match (the template's CEL compares strings). */
	g.is_string[1] = false;
	cr_assert_not(pool_device_in_flavor(&g.d, f));
	gpu(&g, "gpu-0", "80Gi");
	g.d.driver = "gpu.example.com";
	cr_assert_not(pool_device_in_flavor(&g.d, f));
	cr_assert_not(pool_device_in_flavor(&g.d, any));
	policy_free(p);
}

Test(pool_dra, device_taints_as_the_scheduler_reads_them)
{
	struct policy *p = test_policy(dra_yaml);
	const struct policy_flavor *f = policy_flavor_find(p, "h100-dra");
	const struct policy_flavor *any = policy_flavor_find(p, "any-dra");
	struct gpu g;
	char why[160];
	struct pool_device_taint t[3] = {
		{{"example.com/info", "", "None"}, NULL},
		{{"example.com/flaky", "yes", "NoSchedule"}, NULL},
		{{"example.com/xid", "79", "NoExecute"}, "xid-79"},
	};

	gpu(&g, "gpu-0", "80Gi");
	cr_assert_not(pool_device_tainted(&g.d, f, why, sizeof(why)));
	cr_assert_str_eq(why, "");
	g.d.taints = t;
	g.d.n_taints = 1; /* effect None is informational */
	cr_assert_not(pool_device_tainted(&g.d, f, why, sizeof(why)));
	g.d.n_taints = 2; /* the slice's own: h100-dra tolerates it */
	cr_assert_not(pool_device_tainted(&g.d, f, why, sizeof(why)));
	cr_assert(pool_device_tainted(&g.d, any, why, sizeof(why)));
	cr_assert_str_eq(why, "taint example.com/flaky=yes:NoSchedule");
	g.d.n_taints = 3; /* a DeviceTaintRule's, not tolerated */
	cr_assert(pool_device_tainted(&g.d, f, why, sizeof(why)));
	cr_assert_str_eq(why, "DeviceTaintRule xid-79: taint example.com/xid=79:NoExecute");
	/* The toleration names NoSchedule only. */
	t[1].taint.effect = "NoExecute";
	t[2].taint.effect = "None";
	cr_assert(pool_device_tainted(&g.d, f, why, sizeof(why)));
	cr_assert_str_eq(why, "taint example.com/flaky=yes:NoExecute");
	t[1].taint.value = "";
	cr_assert(pool_device_tainted(&g.d, any, why, sizeof(why)));
	cr_assert_str_eq(why, "taint example.com/flaky:NoExecute");
	policy_free(p);
}

/* A node of the DRA flavors (label example.com/pool=gpu) with devices. */
static struct pool_node dra_node(const char *name, struct pool_device *d, size_t n)
{
	static const struct pool_label pool_gpu[] = {{"example.com/pool", "gpu"}};

	return (struct pool_node){
		.name = name, .labels = pool_gpu, .n_labels = 1,
		.conditions = READY, .n_conditions = 1, .ready = true,
		.devices = d, .n_devices = n,
	};
}

Test(pool_dra, a_node_is_the_flavors_by_its_labels_and_devices)
{
	struct policy *p = test_policy(dra_yaml);
	const struct policy_flavor *f = policy_flavor_find(p, "h100-dra");
	struct gpu g;
	struct pool_node n;

	gpu(&g, "gpu-0", "40Gi");
	n = dra_node("a", &g.d, 1);
	cr_assert_not(pool_node_in_flavor(&n, f), "no device of the flavor");
	cr_assert(pool_node_in_flavor(&n, policy_flavor_find(p, "any-dra")));
	g.cap[0].value = "80Gi";
	cr_assert(pool_node_in_flavor(&n, f));
	n.n_labels = 0;
	cr_assert_not(pool_node_in_flavor(&n, f), "the nodeSelector still applies");
	policy_free(p);
}

Test(pool_dra, the_units_of_a_dra_flavor_are_its_devices)
{
	struct policy *p = test_policy(dra_yaml);
	const struct policy_flavor *f = policy_flavor_find(p, "h100-dra");
	struct gpu g[5];
	struct pool_device da[4], db[1];
	struct pool_device_taint xid = {{"example.com/xid", "79", "NoExecute"}, "xid-79"};
	struct pool_node a, b;
	const struct pool_node *nodes[2] = {&a, &b};
	struct pool_member m[2];
	struct pool_view v;
	struct pool_summary sum;
	char name[5][8];

	for (int i = 0; i < 5; i++) {
		snprintf(name[i], sizeof(name[i]), "gpu-%d", i);
		gpu(&g[i], name[i], "80Gi");
	}
	g[3].cap[0].value = "40Gi"; /* not the flavor's: not counted at all */
	for (int i = 0; i < 4; i++)
		da[i] = g[i].d;
	da[0].allocated = true;
	da[1].taints = &xid;
	da[1].n_taints = 1;
	da[2].allocated = true;
	da[2].taints = &xid; /* tainted and held: out of allocatable */
	da[2].n_taints = 1;
	db[0] = g[4].d;
	a = dra_node("a", da, 4);
	b = dra_node("b", db, 1);

	pool_view_build(nodes, 2, f, NULL, m, &v);
	cr_assert_eq(v.n_members, 2);
	cr_assert_eq(m[0].capacity, 3);
	cr_assert_eq(m[0].allocatable, 1);
	cr_assert_eq(m[0].allocated, 1);
	cr_assert_eq(m[0].free, 0);
	cr_assert_eq(m[0].devices_tainted, 2);
	cr_assert_str_eq(m[0].device_why,
			 "gpu-1: DeviceTaintRule xid-79: taint example.com/xid=79:NoExecute");
	cr_assert_eq(m[1].capacity, 1);
	cr_assert_eq(m[1].free, 1);
	cr_assert_eq(m[1].devices_tainted, 0);
	cr_assert_str_eq(m[1].device_why, "");
	expect_totals(&v, 4, 2, 1, 1);
	cr_assert_eq(v.devices_tainted, 2);
	cr_assert_str_eq(v.largest_free_node, "b");
	cr_assert_not(v.approximate, "no selectors: the counts are exact");
	pool_summarize(&v, &sum);
	cr_assert_eq(sum.devices_tainted, 2);
	cr_assert_eq(sum.capacity, 4);

	/* A node's exclusion applies as for any flavor: its devices leave
	 * the totals, tainted ones included. */
	a.unschedulable = true;
	pool_view_build(nodes, 2, f, NULL, m, &v);
	cr_assert_eq(m[0].exclusion, POOL_CORDONED);
	cr_assert_eq(v.n_usable, 1);
	cr_assert_eq(v.capacity, 1);
	cr_assert_eq(v.devices_tainted, 0);
	pool_summarize(&v, &sum);
	cr_assert_eq(sum.excluded, 3);
	cr_assert_eq(sum.devices_tainted, 0);

	/* dra.selectors narrow further, in CEL gpugate does not evaluate. */
	pool_view_build(nodes, 2, policy_flavor_find(p, "any-dra"), NULL, m, &v);
	cr_assert(v.approximate);
	cr_assert_eq(v.capacity, 1, "b alone: a is cordoned");
	cr_assert_eq(m[0].capacity, 4);
	policy_free(p);
}
