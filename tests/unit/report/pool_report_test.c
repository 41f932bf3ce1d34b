/*
 * report/pool-report.c: the pool at a glance (GET /pool, `gpugate pool`):
 * per flavor its nodes, capacity, allocated, free and the excluded nodes
 * with why; per tenant and flavor its use, nominal quota, what it borrows
 * and what it lends; as JSON and as the two tables of the terminal.
 */
#include "base/strbuf.h"
#include "policy/idle.h"
#include "policy/policy.h"
#include "policy/pool.h"
#include "report/pool-report.h"
#include "tests/unit/test_policy.h"
#include "usage/inventory.h"
#include "usage/usage.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
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
	"  - {name: l4, resource: nvidia.com/gpu.shared, sharing: time-slicing,\n"
	"     gpusPerNode: 8}\n"
	"  - {name: a100, resource: nvidia.com/gpu, sharing: exclusive,\n"
	"     nodeSelector: [\"nvidia.com/gpu.product=A100\"], gpusPerNode: 8}\n"
	"  - {name: b200, resource: nvidia.com/gpu, sharing: exclusive,\n"
	"     nodeSelector: [\"nvidia.com/gpu.product=B200\"], gpusPerNode: 8}\n"
	"classes: []\n"
	"tenants:\n"
	"  - {name: research, namespaces: [research], cohort: ml,\n"
	"     quota: [{flavor: h100, nominal: 16, lendingLimit: 3},\n"
	"             {flavor: l4, nominal: 4}]}\n"
	"  - {name: vision, namespaces: [vision], cohort: ml,\n"
	"     quota: [{flavor: h100, nominal: 8}]}\n"
	"  - {name: prod, namespaces: [prod], cohort: ml,\n"
	"     quota: [{flavor: h100, nominal: 4}]}\n"
	"  - {name: solo, namespaces: [solo], quota: [{flavor: h100, nominal: 2}]}\n"
	"health:\n"
	"  taints: [\"gpu-health\"]\n";

static struct policy *P;
static struct inventory *I;
static struct usage_store *U;

static void setup(void)
{
	P = test_policy(policy_yaml);
	I = inventory_new();
	U = usage_memory_new(&(struct usage_memory_config){0});
	cr_assert_not_null(I);
	cr_assert_not_null(U);
}

static void teardown(void)
{
	usage_free(U);
	inventory_free(I);
	policy_free(P);
}

TestSuite(pool_report, .init = setup, .fini = teardown);

/* ---- the cluster ------------------------------------------------------------ */

enum shape { OK, CORDONED, SICK, NOT_READY, UNTOLERATED };

/* A Node with cap and alloc units of res, labelled product (NULL: none),
 * as shape says; an H100 node carries the GPU taint h100 tolerates. */
static void put_node(const char *name, const char *product, const char *res,
		     int64_t cap, int64_t alloc, enum shape shape)
{
	bool h100 = product && strcmp(product, "H100") == 0;
	struct pool_label label = {"nvidia.com/gpu.product", product};
	struct pool_resource r = {res, cap, alloc, 0};
	struct pool_condition ready = {"Ready", shape == NOT_READY ? "False" : "True", ""};
	struct pool_taint taints[] = {
		{"nvidia.com/gpu", "present", "NoSchedule"},
		{shape == SICK ? "gpu-health" : "dedicated",
		 shape == SICK ? "fatal" : "infra", "NoSchedule"},
	};
	struct pool_node n = {
		.name = name,
		.labels = &label,
		.n_labels = product ? 1 : 0,
		.resources = &r,
		.n_resources = res ? 1 : 0,
		.taints = h100 ? taints : taints + 1,
		.n_taints = (h100 ? 1 : 0) + (shape == SICK || shape == UNTOLERATED),
		.conditions = &ready,
		.n_conditions = 1,
		.ready = shape != NOT_READY,
		.unschedulable = shape == CORDONED,
	};

	cr_assert_eq(inventory_node_put(I, &n), 0);
}

static void put_pod(const char *uid, const char *node, const char *res, int64_t units)
{
	struct inventory_ask ask = {res, units};
	struct inventory_placement pl = {uid, node, &ask, 1, NULL, NULL};

	cr_assert_eq(inventory_pod_put(I, &pl), 0);
}

/*
 * h100: gpu-a and gpu-b usable (gpu-b lost 2 devices), gpu-c cordoned,
 * gpu-d quarantined by a health taint, gpu-e NotReady, gpu-f tainted; l4:
 * l4-1 usable, l4-2 tainted (l4 tolerates nothing); a100: one node, empty;
 * b200: none; and a node without GPUs.
 */
static void cluster(void)
{
	inventory_relist_begin(I, INVENTORY_NODES);
	put_node("gpu-a", "H100", "nvidia.com/gpu", 8, 8, OK);
	put_node("gpu-b", "H100", "nvidia.com/gpu", 8, 6, OK);
	put_node("gpu-c", "H100", "nvidia.com/gpu", 8, 8, CORDONED);
	put_node("gpu-d", "H100", "nvidia.com/gpu", 8, 8, SICK);
	put_node("gpu-e", "H100", "nvidia.com/gpu", 8, 8, NOT_READY);
	put_node("gpu-f", "H100", "nvidia.com/gpu", 8, 8, UNTOLERATED);
	put_node("l4-1", NULL, "nvidia.com/gpu.shared", 4, 4, OK);
	put_node("l4-2", NULL, "nvidia.com/gpu.shared", 4, 4, UNTOLERATED);
	put_node("a100-1", "A100", "nvidia.com/gpu", 8, 8, OK);
	put_node("cpu-1", NULL, NULL, 0, 0, OK);
	inventory_relist_end(I, INVENTORY_NODES);
	inventory_relist_begin(I, INVENTORY_PODS);
	put_pod("p1", "gpu-a", "nvidia.com/gpu", 3);
	put_pod("p2", "gpu-b", "nvidia.com/gpu", 2);
	put_pod("p3", "gpu-c", "nvidia.com/gpu", 8); /* excluded: not counted */
	put_pod("p4", "l4-1", "nvidia.com/gpu.shared", 1);
	inventory_relist_end(I, INVENTORY_PODS);
}

static void uses(const char *tenant, const char *flavor, int64_t units)
{
	char uid[64];
	struct usage_item it = {.uid = uid, .kind = USAGE_PODS, .namespace = tenant,
				.name = uid, .tenant = tenant, .flavor = flavor,
				.per_pod = units, .slots = 1, .units = units,
				.active = true};

	snprintf(uid, sizeof(uid), "%s-%s", tenant, flavor);
	usage_observe(U, &it);
}

/*
 * The cohort ml borrows 8 h100 (prod uses 12 of its 4); research, first in
 * policy order, lends 3 (its lendingLimit, of 6 unused), vision the other
 * 5 (of 6 unused).  solo borrows 3 outside every cohort: nobody lends.
 */
static void usage(void)
{
	uses("research", "h100", 10);
	uses("research", "l4", 1);
	uses("vision", "h100", 2);
	uses("prod", "h100", 12);
	uses("solo", "h100", 5);
}

/* The report as text. */
static char *text_of(const json_t *report)
{
	struct strbuf sb;

	strbuf_init(&sb, 1 << 20);
	cr_assert_eq(pool_report_text(report, &sb), 0);
	return strbuf_take(&sb, NULL);
}

/* The tenants' table of usage(). */
#define TENANTS_TEXT                                                              \
	"\n"                                                                       \
	"TENANT               FLAVOR                 USED  NOMINAL  BORROWED   LENT\n" \
	"research             h100                     10       16         0      3\n" \
	"research             l4                        1        4         0      0\n" \
	"vision               h100                      2        8         0      5\n" \
	"prod                 h100                     12        4         8      0\n" \
	"solo                 h100                      5        2         3      0\n"

/* ---- tests ------------------------------------------------------------------- */

Test(pool_report, the_text_has_a_line_per_flavor_and_per_tenant_quota)
{
	json_t *r;
	char *text;

	cluster();
	usage();
	r = pool_report(P, I, U);
	cr_assert_not_null(r);
	text = text_of(r);
	cr_expect_str_eq(text,
			 "FLAVOR               NODES USABLE CAPACITY ALLOCATED  FREE "
			 "LARGEST-FREE  EXCLUDED\n"
			 "h100                     6      2       48         5     9"
			 "            5  gpu-c (cordoned), gpu-d (taint "
			 "gpu-health=fatal:NoSchedule), gpu-e (NotReady), ...\n"
			 "l4                       2      1        8         1     3"
			 "            3  l4-2 (taint dedicated=infra:NoSchedule)\n"
			 "a100                     1      1        8         0     8"
			 "            8  -\n"
			 "b200                     0      0        0         0     0"
			 "            0  -\n"
			 "\n"
			 "h100: effective: 14 of 30 promised usable (32 on excluded "
			 "nodes): 16 not backed\n"
			 "l4: effective: 4 usable back the 4 promised (4 on excluded "
			 "nodes)\n" TENANTS_TEXT);
	free(text);
	json_decref(r);
}

static const json_t *flavor(const json_t *r, size_t i, const char *name)
{
	const json_t *f = json_array_get(json_object_get(r, "flavors"), i);

	cr_assert_not_null(f);
	cr_assert_str_eq(json_string_value(json_object_get(f, "name")), name);
	return f;
}

static long long num(const json_t *o, const char *key)
{
	const json_t *v = json_object_get(o, key);

	cr_assert(json_is_integer(v), "%s is not an integer", key);
	return (long long)json_integer_value(v);
}

static const char *str(const json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));

	cr_assert_not_null(s, "%s is not a string", key);
	return s;
}

Test(pool_report, the_json_counts_each_flavor_s_nodes_by_state)
{
	static const struct {
		const char *name, *state, *why;
		long long capacity, allocatable, allocated, free;
	} h100_nodes[] = {
		{"gpu-a", "usable", NULL, 8, 8, 3, 5},
		{"gpu-b", "usable", NULL, 8, 6, 2, 4},
		{"gpu-c", "cordoned", "spec.unschedulable", 8, 8, 8, 0},
		{"gpu-d", "health", "taint gpu-health=fatal:NoSchedule", 8, 8, 0, 8},
		{"gpu-e", "NotReady", "Ready=False", 8, 8, 0, 8},
		{"gpu-f", "tainted", "taint dedicated=infra:NoSchedule", 8, 8, 0, 8},
	};
	const json_t *f, *states, *list;
	json_t *r;

	cluster();
	r = pool_report(P, I, U);
	cr_assert_not_null(r);
	cr_expect(json_is_true(json_object_get(r, "synced")));
	cr_expect_eq(json_array_size(json_object_get(r, "flavors")), 4);
	f = flavor(r, 0, "h100");
	cr_expect_str_eq(str(f, "resource"), "nvidia.com/gpu");
	cr_expect_str_eq(str(f, "sharing"), "exclusive");
	cr_expect_eq(num(f, "nodes"), 6);
	cr_expect_eq(num(f, "usable"), 2);
	states = json_object_get(f, "states");
	cr_expect_eq(json_object_size(states), 6);
	cr_expect_eq(num(states, "usable"), 2);
	cr_expect_eq(num(states, "health"), 1);
	cr_expect_eq(num(states, "validating"), 0);
	cr_expect_eq(num(states, "NotReady"), 1);
	cr_expect_eq(num(states, "cordoned"), 1);
	cr_expect_eq(num(states, "tainted"), 1);
	cr_expect_eq(num(f, "capacity"), 48);
	cr_expect_eq(num(f, "allocatable"), 14);
	cr_expect_eq(num(f, "allocated"), 5);
	cr_expect_eq(num(f, "free"), 9);
	cr_expect_eq(num(f, "largestFree"), 5);
	cr_expect_str_eq(str(f, "largestFreeNode"), "gpu-a");
	cr_expect_eq(num(f, "excludedUnits"), 32);
	list = json_object_get(f, "nodeList");
	cr_assert_eq(json_array_size(list), 6);
	for (size_t i = 0; i < 6; i++) {
		const json_t *n = json_array_get(list, i);

		cr_expect_str_eq(str(n, "name"), h100_nodes[i].name);
		cr_expect_str_eq(str(n, "state"), h100_nodes[i].state);
		if (h100_nodes[i].why)
			cr_expect_str_eq(str(n, "why"), h100_nodes[i].why);
		else
			cr_expect_null(json_object_get(n, "why"), "%s", h100_nodes[i].name);
		cr_expect_eq(num(n, "capacity"), h100_nodes[i].capacity);
		cr_expect_eq(num(n, "allocatable"), h100_nodes[i].allocatable);
		cr_expect_eq(num(n, "allocated"), h100_nodes[i].allocated, "%s",
			     h100_nodes[i].name);
		cr_expect_eq(num(n, "free"), h100_nodes[i].free, "%s", h100_nodes[i].name);
	}
	f = flavor(r, 1, "l4");
	cr_expect_str_eq(str(f, "sharing"), "time-slicing");
	cr_expect_eq(num(f, "excludedUnits"), 4);
	cr_expect_str_eq(str(f, "largestFreeNode"), "l4-1");
	/* A flavor without nodes: no largest free node at all. */
	f = flavor(r, 3, "b200");
	cr_expect_eq(num(f, "nodes"), 0);
	cr_expect_eq(json_array_size(json_object_get(f, "nodeList")), 0);
	cr_expect_null(json_object_get(f, "largestFreeNode"));
	json_decref(r);
}

Test(pool_report, tenants_say_what_each_uses_borrows_and_lends)
{
	static const struct {
		const char *tenant, *cohort, *flavor;
		long long used, nominal, borrowed, lent;
	} want[] = {
		{"research", "ml", "h100", 10, 16, 0, 3},
		{"research", "ml", "l4", 1, 4, 0, 0},
		{"vision", "ml", "h100", 2, 8, 0, 5},
		{"prod", "ml", "h100", 12, 4, 8, 0},
		{"solo", NULL, "h100", 5, 2, 3, 0},
	};
	json_t *r, *alone;
	const json_t *tenants;
	size_t k = 0;

	usage();
	r = pool_report(P, NULL, U);
	cr_assert_not_null(r);
	tenants = json_object_get(r, "tenants");
	cr_assert_eq(json_array_size(tenants), 4);
	for (size_t t = 0; t < 4; t++) {
		const json_t *x = json_array_get(tenants, t);
		const json_t *qs = json_object_get(x, "quota");

		for (size_t i = 0; i < json_array_size(qs); i++, k++) {
			const json_t *q = json_array_get(qs, i);

			cr_assert_lt(k, 5);
			cr_expect_str_eq(str(x, "name"), want[k].tenant);
			if (want[k].cohort)
				cr_expect_str_eq(str(x, "cohort"), want[k].cohort);
			else
				cr_expect_null(json_object_get(x, "cohort"));
			cr_expect_str_eq(str(q, "flavor"), want[k].flavor);
			cr_expect_eq(num(q, "used"), want[k].used, "%s", want[k].tenant);
			cr_expect_eq(num(q, "nominal"), want[k].nominal);
			cr_expect_eq(num(q, "borrowed"), want[k].borrowed, "%s",
				     want[k].tenant);
			cr_expect_eq(num(q, "lent"), want[k].lent, "%s", want[k].tenant);
		}
	}
	cr_expect_eq(k, 5);
	/* The tenants alone are the report's, but for the busy share of idle
	 * GPUs (SPEC 10), which only the report has (null: no data here). */
	alone = pool_report_tenants(P, NULL, U);
	cr_assert_not_null(alone);
	for (size_t t = 0; t < json_array_size(tenants); t++) {
		json_t *x = json_array_get(tenants, t);

		cr_expect(json_is_null(json_object_get(x, "busyShare")));
		json_object_del(x, "busyShare");
	}
	cr_expect(json_equal(alone, tenants));
	json_decref(alone);
	json_decref(r);
}

Test(pool_report, before_nodes_and_pods_are_listed_the_pool_is_not_known)
{
	json_t *r;
	char *text;

	usage();
	/* No inventory (no API), then one that has listed Nodes only. */
	for (int i = 0; i < 2; i++) {
		if (i == 1) {
			inventory_relist_begin(I, INVENTORY_NODES);
			put_node("gpu-a", "H100", "nvidia.com/gpu", 8, 8, OK);
			inventory_relist_end(I, INVENTORY_NODES);
		}
		r = pool_report(P, i ? I : NULL, U);
		cr_assert_not_null(r);
		cr_expect(json_is_false(json_object_get(r, "synced")));
		cr_expect_eq(json_array_size(json_object_get(r, "flavors")), 0);
		text = text_of(r);
		cr_expect_str_eq(text, "the pool is not known yet (Nodes and Pods not "
				       "listed)\n" TENANTS_TEXT);
		free(text);
		json_decref(r);
	}
}

Test(pool_report, without_usage_every_tenant_uses_nothing)
{
	json_t *r = pool_report(P, NULL, NULL);
	char *text;

	cr_assert_not_null(r);
	text = text_of(r);
	cr_expect_str_eq(text,
			 "the pool is not known yet (Nodes and Pods not listed)\n"
			 "\n"
			 "TENANT               FLAVOR                 USED  NOMINAL  "
			 "BORROWED   LENT\n"
			 "research             h100                      0       16"
			 "         0      0\n"
			 "research             l4                        0        4"
			 "         0      0\n"
			 "vision               h100                      0        8"
			 "         0      0\n"
			 "prod                 h100                      0        4"
			 "         0      0\n"
			 "solo                 h100                      0        2"
			 "         0      0\n");
	free(text);
	json_decref(r);
}

/*
 * Effective capacity (policy/capacity.h): h100 promises 30 (16 + 8 + 4 +
 * 2), its usable nodes hold 14, 9 of them free.  With research holding 0
 * of its 16, 7 of its nominal are not backed; once the cohort borrows (prod
 * holds 12 of its 4), those 8 back research's nominal too.
 */
Test(pool_report, effective_capacity_per_flavor_and_the_tenants_short)
{
	const json_t *f, *e, *t;
	json_t *r;
	char *text;

	cluster();
	r = pool_report(P, I, U);
	cr_assert_not_null(r);
	f = flavor(r, 0, "h100");
	e = json_object_get(f, "effective");
	cr_assert_not_null(e);
	cr_expect(json_is_true(json_object_get(e, "known")));
	cr_expect_eq(num(e, "usable"), 14);
	cr_expect_eq(num(e, "promised"), 30);
	cr_expect_eq(num(e, "unbacked"), 16);
	cr_assert_eq(json_array_size(json_object_get(e, "tenants")), 4);
	t = json_array_get(json_object_get(e, "tenants"), 0);
	cr_expect_str_eq(str(t, "tenant"), "research");
	cr_expect_eq(num(t, "nominal"), 16);
	cr_expect_eq(num(t, "used"), 0);
	cr_expect_eq(num(t, "reclaimable"), 0);
	cr_expect_eq(num(t, "short"), 7);
	t = json_array_get(json_object_get(e, "tenants"), 1);
	cr_expect_str_eq(str(t, "tenant"), "vision");
	cr_expect_eq(num(t, "short"), 0);
	/* a flavor nobody has quota of: nothing promised, nothing unbacked */
	e = json_object_get(flavor(r, 2, "a100"), "effective");
	cr_expect_eq(num(e, "promised"), 0);
	cr_expect_eq(num(e, "unbacked"), 0);
	cr_expect_eq(json_array_size(json_object_get(e, "tenants")), 0);
	/* b200 has no node: not known, never unbacked */
	e = json_object_get(flavor(r, 3, "b200"), "effective");
	cr_expect(json_is_false(json_object_get(e, "known")));
	cr_expect_eq(num(e, "unbacked"), 0);
	/* the tenants say how much of their nominal is backed */
	t = json_array_get(json_object_get(json_array_get(json_object_get(r, "tenants"),
							  0),
					   "quota"),
			   0);
	cr_expect_eq(num(t, "backed"), 9);
	cr_expect_eq(num(t, "notBacked"), 7);
	text = text_of(r);
	cr_expect(strstr(text, "h100: effective: 14 of 30 promised usable (32 on "
			       "excluded nodes): 16 not backed\n"
			       "  tenant research: nominal 16, holds 0, 9 free now: 7 "
			       "of its nominal not backed\n"
			       "l4: effective:"),
		  "%s", text);
	free(text);
	json_decref(r);
	/* prod borrows 8 beyond its nominal: they back research's */
	uses("prod", "h100", 12);
	r = pool_report(P, I, U);
	cr_assert_not_null(r);
	t = json_array_get(json_object_get(json_object_get(flavor(r, 0, "h100"),
							   "effective"),
					   "tenants"),
			   0);
	cr_expect_eq(num(t, "reclaimable"), 5); /* at most what the usable nodes hold */
	cr_expect_eq(num(t, "short"), 2);
	text = text_of(r);
	cr_expect(strstr(text, "  tenant research: nominal 16, holds 0, 9 free now, 5 "
			       "borrowed by its cohort: 2 of its nominal not backed\n"),
		  "%s", text);
	free(text);
	json_decref(r);
	/* without the pool: no backed numbers */
	r = pool_report_tenants(P, NULL, U);
	cr_assert_not_null(r);
	t = json_array_get(json_object_get(json_array_get(r, 0), "quota"), 0);
	cr_expect_null(json_object_get(t, "backed"));
	cr_expect_null(json_object_get(t, "notBacked"));
	json_decref(r);
	r = pool_report_tenants(P, I, U);
	t = json_array_get(json_object_get(json_array_get(r, 0), "quota"), 0);
	cr_expect_eq(num(t, "notBacked"), 2);
	json_decref(r);
}

/* ---- the nodes gpugate took out for health ------------------------------------ */

/* An H100 node carrying gpugate's taint (value taint) and record, and the
 * health taint gpu-health when sick. */
static void put_marked(const char *name, bool sick, const char *taint, const char *record)
{
	struct pool_label label = {"nvidia.com/gpu.product", "H100"};
	struct pool_resource r = {"nvidia.com/gpu", 8, 8, 0};
	struct pool_condition ready = {"Ready", "True", ""};
	struct pool_taint taints[] = {
		{"nvidia.com/gpu", "present", "NoSchedule"},
		{"gpugate.io/unhealthy", taint, "NoSchedule"},
		{"gpu-health", "fatal", "NoSchedule"},
	};
	struct pool_node n = {
		.name = name, .labels = &label, .n_labels = 1, .resources = &r,
		.n_resources = 1, .taints = taints, .n_taints = sick ? 3 : 2,
		.conditions = &ready, .n_conditions = 1, .ready = true,
		.health_record = record,
	};

	cr_assert_eq(inventory_node_put(I, &n), 0);
}

Test(pool_report, a_node_out_for_health_says_since_when_and_what_it_waits_for)
{
	/* 2026-12-05T12:00:00Z */
	const int64_t now = 1796472000000;
	struct policy *p = test_policy("version: 1\n"
				       "flavors:\n"
				       "  - name: h100\n"
				       "    resource: nvidia.com/gpu\n"
				       "    sharing: exclusive\n"
				       "    nodeSelector: [\"nvidia.com/gpu.product=H100\"]\n"
				       "    tolerations: [{key: nvidia.com/gpu, operator: Exists,"
				       " effect: NoSchedule}]\n"
				       "    gpusPerNode: 8\n"
				       "classes: []\n"
				       "tenants: []\n"
				       "health:\n"
				       "  taints: [\"gpu-health\"]\n"
				       "  returnAfter: {validationLabel: \"diag=pass\"}\n");
	const json_t *nodes, *n;
	json_t *r;
	char *text;

	inventory_relist_begin(I, INVENTORY_NODES);
	/* Out 1h2m, the second time. */
	put_marked("gpu-d", true, "health",
		   "o=1796468280000 c=0 n=2 t=taint gpu-health=fatal:NoSchedule");
	/* Out 10 min ago, cleared 5 min ago. */
	put_marked("gpu-v", false, "validating",
		   "o=1796471400000 c=1796471700000 n=1 t=condition GpuXidError=True");
	/* A health signal gpugate has not marked yet: no since. */
	put_marked("gpu-s", true, "health", NULL);
	put_node("gpu-a", "H100", "nvidia.com/gpu", 8, 8, OK);
	inventory_relist_end(I, INVENTORY_NODES);
	inventory_relist_begin(I, INVENTORY_PODS);
	inventory_relist_end(I, INVENTORY_PODS);

	r = pool_report_at(p, I, NULL, now);
	cr_assert_not_null(r);
	nodes = json_object_get(flavor(r, 0, "h100"), "nodeList");
	cr_assert_eq(json_array_size(nodes), 4);
	n = json_array_get(nodes, 0);
	cr_assert_str_eq(str(n, "name"), "gpu-d");
	cr_assert_str_eq(str(n, "state"), "health");
	cr_assert_str_eq(str(n, "why"), "taint gpu-health=fatal:NoSchedule");
	cr_assert_str_eq(str(n, "outSince"), "2026-12-05T10:58:00Z");
	cr_assert_eq(num(n, "outSeconds"), 3720);
	cr_assert_eq(num(n, "times"), 2);
	cr_assert_null(json_object_get(n, "waitsFor"));
	n = json_array_get(nodes, 1);
	cr_assert_str_eq(str(n, "name"), "gpu-v");
	cr_assert_str_eq(str(n, "state"), "validating");
	cr_assert_str_eq(str(n, "outSince"), "2026-12-05T11:50:00Z");
	cr_assert_eq(num(n, "outSeconds"), 600);
	cr_assert_null(json_object_get(n, "times"), "once: not said");
	cr_assert_str_eq(str(n, "waitsFor"), "label diag=pass");
	/* The existing fields stay. */
	cr_assert_eq(num(n, "capacity"), 8);
	n = json_array_get(nodes, 2);
	cr_assert_str_eq(str(n, "state"), "health");
	cr_assert_null(json_object_get(n, "outSince"));
	cr_assert_null(json_object_get(n, "outSeconds"));
	n = json_array_get(nodes, 3);
	cr_assert_str_eq(str(n, "state"), "usable");
	cr_assert_null(json_object_get(n, "outSince"));

	text = text_of(r);
	cr_expect(strstr(text,
			 "\nOUT FOR HEALTH (gpugate's record on the node)\n"
			 "NODE                 FLAVOR               STATE       SINCE\n"
			 "gpu-d                h100                 health      "
			 "2026-12-05T10:58:00Z (out 1h2m, out 2 times before it came back): "
			 "taint gpu-health=fatal:NoSchedule\n"
			 "gpu-v                h100                 validating  "
			 "2026-12-05T11:50:00Z (out 10m); waits for label diag=pass\n"
			 "\nTENANT") != NULL,
		  "%s", text);
	free(text);
	json_decref(r);
	policy_free(p);
}

Test(pool_report, no_node_out_no_health_table)
{
	json_t *r;
	char *text;

	cluster();
	r = pool_report(P, I, U);
	text = text_of(r);
	cr_expect_null(strstr(text, "OUT FOR HEALTH"));
	free(text);
	json_decref(r);
}

/* ---- idle GPUs ---------------------------------------------------------------- */

/* A Running pod of tenant on node, of per_pod units of flavor, with
 * gpugate's idle annotation since `since` (Unix s; 0: none). */
static void put_running(const char *uid, const char *ns, const char *name,
			const char *tenant, const char *flavor, const char *node,
			int64_t per_pod, int64_t since)
{
	struct inventory_ask ask = {"nvidia.com/gpu", per_pod};
	struct inventory_running run = {uid, ns, name, tenant, flavor, per_pod, since};
	struct inventory_placement pl = {uid, node, &ask, 1, NULL, &run};

	cr_assert_eq(inventory_pod_put(I, &pl), 0);
}

static void idle_cluster(void)
{
	cluster();
	inventory_relist_begin(I, INVENTORY_PODS);
	/* 2026-12-05T14:00:00Z, and 13:30. */
	put_running("r1", "research", "train-1", "research", "h100", "gpu-a", 4, 1796479200);
	put_running("r0", "research", "notebook", "research", "h100", "gpu-a", 2, 1796477400);
	put_running("r2", "research", "busy", "research", "h100", "gpu-b", 2, 0);
	put_running("v1", "vision", "eval", "vision", "h100", "gpu-b", 2, 0);
	put_running("x1", "other", "stray", "nobody", "h100", "gpu-b", 1, 1796479200);
	inventory_relist_end(I, INVENTORY_PODS);
}

Test(pool_report, idle_pods_from_the_annotation_and_each_tenant_s_busy_share)
{
	/* research: notebook 0 %, train-1 no data, busy 90 %: (0 + 1.8) / 4;
	 * vision: no data at all; the rest hold nothing. */
	struct idle_util utils[] = {{"research", "notebook", 0.0},
				    {"research", "busy", 0.9},
				    {"vision", "nothing-here", 0.5}};
	json_t *r, *idle, *t;
	char *text;

	idle_cluster();
	r = pool_report_idle(P, I, U, 1796481000000LL /* 14:30 */, utils, 3);
	cr_assert_not_null(r);
	idle = json_object_get(r, "idle");
	cr_assert_eq(json_array_size(idle), 2, "the stray pod's tenant is none of the policy's");
	cr_expect_str_eq(str(json_array_get(idle, 0), "pod"), "notebook");
	cr_expect_str_eq(str(json_array_get(idle, 0), "since"), "2026-12-05T13:30:00Z");
	cr_expect_eq(num(json_array_get(idle, 0), "idleSeconds"), 3600);
	cr_expect_eq(num(json_array_get(idle, 0), "units"), 2);
	cr_expect_str_eq(str(json_array_get(idle, 1), "pod"), "train-1");
	cr_expect_str_eq(str(json_array_get(idle, 1), "tenant"), "research");
	cr_expect_str_eq(str(json_array_get(idle, 1), "flavor"), "h100");
	t = json_array_get(json_object_get(r, "tenants"), 0);
	cr_expect_str_eq(str(t, "name"), "research");
	cr_expect_float_eq(json_real_value(json_object_get(t, "busyShare")), 0.45, 1e-9);
	t = json_array_get(json_object_get(r, "tenants"), 1);
	cr_expect(json_is_null(json_object_get(t, "busyShare")), "vision: no data");
	text = text_of(r);
	cr_expect(strstr(text, "\nIDLE (gpugate.io/idle-since on the pod)\n"
			       "NAMESPACE/POD                            TENANT           "
			       "FLAVOR           UNITS  IDLE SINCE            FOR\n"
			       "research/notebook                        research         "
			       "h100                 2  2026-12-05T13:30:00Z  1h\n"
			       "research/train-1                         research         "
			       "h100                 4  2026-12-05T14:00:00Z  30m\n"),
		  "%s", text);
	cr_expect(strstr(text, "\nBUSY (last hour, of the GPUs each tenant holds now)\n"
			       "TENANT                 BUSY\n"
			       "research              45.0%\n"
			       "vision                  n/a\n"
			       "prod                    n/a\n"
			       "solo                    n/a\n"),
		  "%s", text);
	free(text);
	json_decref(r);
}

Test(pool_report, without_the_idle_board_the_share_is_null_and_not_shown)
{
	json_t *r, *t;
	size_t i;
	char *text;

	idle_cluster();
	r = pool_report(P, I, U);
	json_array_foreach(json_object_get(r, "tenants"), i, t)
		cr_expect(json_is_null(json_object_get(t, "busyShare")));
	cr_expect_eq(json_array_size(json_object_get(r, "idle")), 2);
	text = text_of(r);
	cr_expect(strstr(text, "\nIDLE "));
	cr_expect_null(strstr(text, "\nBUSY "));
	free(text);
	json_decref(r);
}

/* ---- DRA flavors -------------------------------------------------------------- */

static const char dra_policy_yaml[] =
	"version: 1\n"
	"flavors:\n"
	"  - {name: h100-dra, sharing: exclusive, gpusPerNode: 8,\n"
	"     dra: {deviceClassName: gpu.nvidia.com, driver: gpu.nvidia.com,\n"
	"           attributes: [\"productName=NVIDIA H100 80GB HBM3\"]}}\n"
	"classes: []\n"
	"tenants:\n"
	"  - {name: research, namespaces: [research], quota: [{flavor: h100-dra, "
	"nominal: 8}]}\n";

/* One KWOK node with three H100s in a slice: gpu-1 tainted by an XID,
 * gpu-0 allocated; every DRA kind listed when listed is true, else
 * ResourceSlices not served. */
static void dra_cluster(bool listed)
{
	struct pool_node n = {.name = "kwok-1", .ready = true};
	struct pool_label attrs[] = {{"gpu.nvidia.com/productName", "NVIDIA H100 80GB HBM3"}};
	bool is_string[] = {true};
	struct pool_device_taint xid = {{"gpu.nvidia.com/xid", "79", "NoExecute"}, NULL};
	struct pool_device devs[3];
	struct inventory_slice s = {.name = "kwok-1-gpu", .driver = "gpu.nvidia.com",
				    .pool = "kwok-1", .generation = 1, .slice_count = 1,
				    .node = "kwok-1", .devices = devs, .n_devices = 3};
	struct inventory_claim_device held = {.driver = "gpu.nvidia.com", .pool = "kwok-1", .device = "gpu-0"};
	static const char *const names[] = {"gpu-0", "gpu-1", "gpu-2"};

	for (size_t i = 0; i < 3; i++)
		devs[i] = (struct pool_device){.driver = "gpu.nvidia.com", .pool = "kwok-1",
					       .name = names[i], .attributes = attrs,
					       .attribute_is_string = is_string,
					       .n_attributes = 1,
					       .taints = i == 1 ? &xid : NULL,
					       .n_taints = i == 1};
	inventory_relist_begin(I, INVENTORY_NODES);
	cr_assert_eq(inventory_node_put(I, &n), 0);
	inventory_relist_end(I, INVENTORY_NODES);
	inventory_relist_begin(I, INVENTORY_PODS);
	inventory_relist_end(I, INVENTORY_PODS);
	for (int k = INVENTORY_SLICES; k < INVENTORY_KINDS; k++) {
		if (!listed && k == INVENTORY_SLICES) {
			inventory_not_served(I, INVENTORY_SLICES);
			continue;
		}
		inventory_relist_begin(I, (enum inventory_kind)k);
		if (k == INVENTORY_SLICES)
			cr_assert_eq(inventory_slice_put(I, &s), 0);
		if (k == INVENTORY_CLAIMS)
			cr_assert_eq(inventory_claim_put(I, "claim-1", &held, 1), 0);
		inventory_relist_end(I, (enum inventory_kind)k);
	}
}

static long long jnum(const json_t *o, const char *key)
{
	return (long long)json_integer_value(json_object_get(o, key));
}

/* The report of dra_cluster(listed) under dra_policy_yaml, its flavor in
 * *f and its text in *text (the caller frees both). */
static json_t *dra_report(bool listed, const json_t **f, char **text)
{
	json_t *r;

	policy_free(P);
	P = test_policy(dra_policy_yaml);
	dra_cluster(listed);
	r = pool_report(P, I, U);
	cr_assert_not_null(r);
	*f = json_array_get(json_object_get(r, "flavors"), 0);
	*text = text_of(r);
	return r;
}

Test(pool_report, a_dra_flavor_counts_devices_and_names_the_tainted)
{
	const json_t *f, *n;
	char *text;
	json_t *r = dra_report(true, &f, &text);

	cr_assert_str_eq(json_string_value(json_object_get(f, "units")), "devices");
	cr_expect(json_is_true(json_object_get(f, "known")));
	cr_expect(json_is_false(json_object_get(f, "approximate")));
	cr_expect_eq(jnum(f, "capacity"), 3);
	cr_expect_eq(jnum(f, "allocatable"), 2);
	cr_expect_eq(jnum(f, "allocated"), 1);
	cr_expect_eq(jnum(f, "free"), 1);
	cr_expect_eq(jnum(f, "devicesTainted"), 1);
	cr_expect_null(json_object_get(f, "resource"));
	n = json_array_get(json_object_get(f, "nodeList"), 0);
	cr_expect_eq(jnum(n, "devicesTainted"), 1);
	cr_expect_str_eq(json_string_value(json_object_get(n, "deviceWhy")),
			 "gpu-1: taint gpu.nvidia.com/xid=79:NoExecute");
	cr_expect(strstr(text, "\nDEVICES (DRA flavors: ResourceSlices, DeviceTaintRules, "
			       "claims)\n"
			       "h100-dra: units are devices; 1 tainted\n"
			       "  kwok-1               1 tainted (gpu-1: taint "
			       "gpu.nvidia.com/xid=79:NoExecute)\n"),
		  "%s", text);
	free(text);
	json_decref(r);
}

Test(pool_report, without_resource_slices_a_dra_flavor_is_not_known)
{
	const json_t *f;
	char *text;
	json_t *r = dra_report(false, &f, &text);

	cr_expect(json_is_false(json_object_get(f, "known")));
	cr_expect_eq(jnum(f, "capacity"), 0);
	cr_expect(strstr(text, "h100-dra: units are devices, not known (ResourceSlices not "
			       "listed or not served)\n"),
		  "%s", text);
	free(text);
	json_decref(r);
}

/* A flavor of an extended resource says nothing of devices. */
Test(pool_report, other_flavors_have_no_device_fields)
{
	json_t *r;
	char *text;
	size_t i;
	const json_t *f;

	cluster();
	r = pool_report(P, I, U);
	cr_assert_not_null(r);
	json_array_foreach(json_object_get(r, "flavors"), i, f) {
		cr_expect_null(json_object_get(f, "units"));
		cr_expect_null(json_object_get(f, "devicesTainted"));
	}
	text = text_of(r);
	cr_expect_null(strstr(text, "DEVICES"), "%s", text);
	free(text);
	json_decref(r);
}

/* ---- DRA counters ------------------------------------------------------------- */

static const char mig_policy_yaml[] =
	"version: 1\n"
	"flavors:\n"
	"  - {name: mig-1g, sharing: mig, gpusPerNode: 8,\n"
	"     dra: {deviceClassName: mig.nvidia.com, driver: gpu.nvidia.com,\n"
	"           attributes: [type=mig, profile=1g.5gb]}}\n"
	"classes: []\n"
	"tenants: []\n";

/* KWOK node kwok-1: gpu-0's counter set in one slice, gpu-0 and two 1g
 * partitions in another; a claim holds gpu-0 when gpu_held. */
static void mig_cluster(bool gpu_held)
{
	struct pool_node n = {.name = "kwok-1", .ready = true};
	struct pool_label gpu_attr[] = {{"gpu.nvidia.com/type", "gpu"}};
	struct pool_label mig_attr[] = {{"gpu.nvidia.com/type", "mig"},
					{"gpu.nvidia.com/profile", "1g.5gb"}};
	bool is_string[] = {true, true};
	struct pool_label set[] = {{"memory", "40Gi"}, {"memory-slice-0", "1"},
				   {"memory-slice-1", "1"}};
	struct pool_label m0[] = {{"memory", "5Gi"}, {"memory-slice-0", "1"}};
	struct pool_label m1[] = {{"memory", "5Gi"}, {"memory-slice-1", "1"}};
	struct pool_counter_use uses[] = {{"gpu-0-counter-set", set, 3},
					  {"gpu-0-counter-set", m0, 2},
					  {"gpu-0-counter-set", m1, 2}};
	struct pool_counter_set cs = {.name = "gpu-0-counter-set", .counters = set,
				      .n_counters = 3};
	static const char *const names[] = {"gpu-0", "gpu-0-mig-0", "gpu-0-mig-1"};
	struct pool_device devs[3];
	struct inventory_slice counters = {
		.name = "kwok-1-counters", .driver = "gpu.nvidia.com", .pool = "kwok-1",
		.generation = 1, .slice_count = 2, .node = "kwok-1", .counter_sets = &cs,
		.n_counter_sets = 1};
	struct inventory_slice s = {.name = "kwok-1-gpu", .driver = "gpu.nvidia.com",
				    .pool = "kwok-1", .generation = 1, .slice_count = 2,
				    .node = "kwok-1", .devices = devs, .n_devices = 3};
	struct inventory_claim_device held = {.driver = "gpu.nvidia.com", .pool = "kwok-1", .device = "gpu-0"};

	for (size_t i = 0; i < 3; i++)
		devs[i] = (struct pool_device){.name = names[i],
					       .attributes = i ? mig_attr : gpu_attr,
					       .attribute_is_string = is_string,
					       .n_attributes = i ? 2 : 1, .consumes = &uses[i],
					       .n_consumes = 1};
	policy_free(P);
	P = test_policy(mig_policy_yaml);
	for (int k = 0; k < INVENTORY_KINDS; k++) {
		inventory_relist_begin(I, (enum inventory_kind)k);
		if (k == INVENTORY_NODES)
			cr_assert_eq(inventory_node_put(I, &n), 0);
		if (k == INVENTORY_SLICES) {
			cr_assert_eq(inventory_slice_put(I, &counters), 0);
			cr_assert_eq(inventory_slice_put(I, &s), 0);
		}
		if (k == INVENTORY_CLAIMS && gpu_held)
			cr_assert_eq(inventory_claim_put(I, "claim-1", &held, 1), 0);
		inventory_relist_end(I, (enum inventory_kind)k);
	}
}

Test(pool_report, a_dra_flavor_names_the_devices_blocked_by_counters)
{
	const json_t *f, *n;
	char *text;
	json_t *r;

	mig_cluster(true);
	r = pool_report(P, I, U);
	cr_assert_not_null(r);
	f = json_array_get(json_object_get(r, "flavors"), 0);
	cr_expect_eq(jnum(f, "capacity"), 2);
	cr_expect_eq(jnum(f, "allocatable"), 2);
	cr_expect_eq(jnum(f, "allocated"), 0);
	cr_expect_eq(jnum(f, "free"), 0);
	cr_expect_eq(jnum(f, "devicesBlocked"), 2);
	cr_expect(json_is_false(json_object_get(f, "devicesCompete")));
	n = json_array_get(json_object_get(f, "nodeList"), 0);
	cr_expect_eq(jnum(n, "devicesBlocked"), 2);
	cr_expect_str_eq(json_string_value(json_object_get(n, "blockedWhy")),
			 "gpu-0-mig-0: counter set gpu-0-counter-set: memory used by gpu-0");
	text = text_of(r);
	cr_expect(strstr(text, "mig-1g: units are devices; 0 tainted, 2 blocked by counters\n"
			       "  kwok-1               2 blocked by counters (gpu-0-mig-0: "
			       "counter set gpu-0-counter-set: memory used by gpu-0)\n"),
		  "%s", text);
	free(text);
	json_decref(r);
}

Test(pool_report, free_devices_that_compete_for_counters_are_an_upper_bound)
{
	const json_t *f, *n;
	char *text;
	json_t *r;

	mig_cluster(false);
	r = pool_report(P, I, U);
	cr_assert_not_null(r);
	f = json_array_get(json_object_get(r, "flavors"), 0);
	cr_expect_eq(jnum(f, "free"), 2);
	cr_expect_eq(jnum(f, "devicesBlocked"), 0);
	cr_expect(json_is_true(json_object_get(f, "approximate")));
	cr_expect(json_is_true(json_object_get(f, "devicesCompete")));
	n = json_array_get(json_object_get(f, "nodeList"), 0);
	cr_expect_null(json_object_get(n, "devicesBlocked"));
	cr_expect_null(json_object_get(n, "blockedWhy"));
	text = text_of(r);
	cr_expect(strstr(text, "mig-1g: units are devices, an upper bound (free devices "
			       "compete for counters: not all can be had at once); 0 tainted\n"),
		  "%s", text);
	free(text);
	json_decref(r);
}
