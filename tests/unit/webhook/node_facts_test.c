/*
 * webhook/node-facts.c: a Node's facts for the pool (capacity and
 * allocatable per flavor's resource, labels, taints, conditions, Ready,
 * cordon) and a Pod's (where it is bound and what it asks there, whether
 * it waits, how long it ran), from their JSON.  Through the module's
 * public functions only: node_facts, pod_placement, pod_run and the feed's
 * callbacks.
 */
#include "base/arena.h"
#include "policy/policy.h"
#include "policy/pool.h"
#include "tests/unit/test_policy.h"
#include "usage/inventory.h"
#include "usage/meter.h"
#include "webhook/holder.h"
#include "webhook/node-facts.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

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
	"classes: []\n"
	"tenants:\n"
	"  - {name: research, namespaces: [research],\n"
	"     quota: [{flavor: h100, nominal: 8}, {flavor: l4, nominal: 8}]}\n"
	"health:\n"
	"  taints: [\"gpu-health=fatal\"]\n"
	"  conditions: [\"GpuThermal\"]\n"
	"  labels: [\"repair-state=in-progress\"]\n";

static struct policy *P;
static struct arena A;
static json_t *OBJ;

static void setup(void)
{
	P = test_policy(policy_yaml);
	arena_init(&A);
	OBJ = NULL;
}

static void teardown(void)
{
	json_decref(OBJ);
	arena_release(&A);
	policy_free(P);
}

TestSuite(node_facts, .init = setup, .fini = teardown);

/* The object of text, kept until the test ends (facts borrow its
 * strings); one per test. */
static const json_t *object(const char *text)
{
	json_error_t e;

	cr_assert_null(OBJ, "one object per test");
	OBJ = json_loads(text, 0, &e);
	cr_assert_not_null(OBJ, "%s: %s", e.text, text);
	return OBJ;
}

/* node_facts of a Node whose status and spec are the texts given. */
static int node_of(const char *text, struct pool_node *out)
{
	return node_facts(object(text), &A, out);
}

static const struct pool_resource *resource(const struct pool_node *n,
					    const char *name)
{
	const struct pool_resource *r = pool_node_resource(n, name);

	cr_assert_not_null(r, "no resource %s", name);
	return r;
}

/* ---- nodes --------------------------------------------------------------- */

Test(node_facts, reads_a_gpu_node_whole)
{
	struct pool_node n;

	cr_assert_eq(node_of("{\"metadata\":{\"name\":\"gpu-1\",\"labels\":{"
			     "\"nvidia.com/gpu.product\":\"H100\",\"zone\":\"a\","
			     "\"weird\":7}},"
			     "\"spec\":{\"unschedulable\":false,\"taints\":["
			     "{\"key\":\"nvidia.com/gpu\",\"value\":\"present\","
			     "\"effect\":\"NoSchedule\"},"
			     "{\"key\":\"bare\",\"effect\":\"NoExecute\"},"
			     "{\"value\":\"keyless\"},\"not an object\"]},"
			     "\"status\":{\"capacity\":{\"cpu\":\"96\",\"memory\":\"1Ti\","
			     "\"nvidia.com/gpu\":\"8\"},\"allocatable\":{\"cpu\":\"95\","
			     "\"nvidia.com/gpu\":\"7\"},\"conditions\":["
			     "{\"type\":\"MemoryPressure\",\"status\":\"False\"},"
			     "{\"type\":\"Ready\",\"status\":\"True\",\"reason\":\"KubeletReady\"},"
			     "{\"status\":\"True\"}]}}",
			     &n),
		     0);
	cr_expect_str_eq(n.name, "gpu-1");
	cr_expect_not(n.unschedulable);
	cr_expect(n.ready);
	/* Labels: string values only. */
	cr_assert_eq(n.n_labels, 2);
	cr_expect_str_eq(pool_node_label(&n, "nvidia.com/gpu.product"), "H100");
	cr_expect_str_eq(pool_node_label(&n, "zone"), "a");
	cr_expect_null(pool_node_label(&n, "weird"));
	/* Resources: extended ones only (a '/' in the name). */
	cr_assert_eq(n.n_resources, 1);
	cr_expect_str_eq(n.resources[0].name, "nvidia.com/gpu");
	cr_expect_eq(n.resources[0].capacity, 8);
	cr_expect_eq(n.resources[0].allocatable, 7);
	cr_expect_eq(n.resources[0].allocated, 0);
	cr_expect_null(pool_node_resource(&n, "cpu"));
	/* Taints with a key; a missing value is "". */
	cr_assert_eq(n.n_taints, 2);
	cr_expect_str_eq(n.taints[0].key, "nvidia.com/gpu");
	cr_expect_str_eq(n.taints[0].value, "present");
	cr_expect_str_eq(n.taints[0].effect, "NoSchedule");
	cr_expect_str_eq(n.taints[1].key, "bare");
	cr_expect_str_eq(n.taints[1].value, "");
	cr_expect_str_eq(n.taints[1].effect, "NoExecute");
	/* Conditions with a type; a missing reason is "". */
	cr_assert_eq(n.n_conditions, 2);
	cr_expect_str_eq(n.conditions[0].type, "MemoryPressure");
	cr_expect_str_eq(n.conditions[0].status, "False");
	cr_expect_str_eq(n.conditions[0].reason, "");
	cr_expect_str_eq(n.conditions[1].type, "Ready");
	cr_expect_str_eq(n.conditions[1].reason, "KubeletReady");
	cr_expect(pool_node_in_flavor(&n, policy_flavor_find(P, "h100")));
	cr_expect_not(pool_node_in_flavor(&n, policy_flavor_find(P, "l4")));
}

Test(node_facts, capacity_and_allocatable_per_flavor_resource)
{
	struct pool_node n;
	const struct pool_resource *r;

	cr_assert_eq(node_of("{\"metadata\":{\"name\":\"mixed\"},\"status\":{"
			     "\"capacity\":{\"nvidia.com/gpu\":\"8\","
			     "\"nvidia.com/gpu.shared\":\"32\",\"example.com/half\":\"1500m\","
			     "\"example.com/cap-only\":\"4\",\"example.com/milli\":\"2000m\","
			     "\"example.com/number\":3},"
			     "\"allocatable\":{\"nvidia.com/gpu\":\"0\","
			     "\"nvidia.com/gpu.shared\":\"30\",\"example.com/half\":\"1\","
			     "\"example.com/alloc-only\":\"2\",\"example.com/milli\":\"2\","
			     "\"example.com/number\":\"3\"}}}",
			     &n),
		     0);
	cr_expect_eq(n.n_resources, 7);
	/* h100's resource: a device plugin that lost every device lists 0. */
	r = resource(&n, "nvidia.com/gpu");
	cr_expect_eq(r->capacity, 8);
	cr_expect_eq(r->allocatable, 0);
	/* l4's resource, on the same node. */
	r = resource(&n, "nvidia.com/gpu.shared");
	cr_expect_eq(r->capacity, 32);
	cr_expect_eq(r->allocatable, 30);
	cr_expect(pool_node_in_flavor(&n, policy_flavor_find(P, "l4")));
	/* No H100 label: not h100's whatever it offers. */
	cr_expect_not(pool_node_in_flavor(&n, policy_flavor_find(P, "h100")));
	/* Not a whole number, or not a string: -1. */
	r = resource(&n, "example.com/half");
	cr_expect_eq(r->capacity, -1);
	cr_expect_eq(r->allocatable, 1);
	r = resource(&n, "example.com/milli");
	cr_expect_eq(r->capacity, 2);
	cr_expect_eq(r->allocatable, 2);
	r = resource(&n, "example.com/number");
	cr_expect_eq(r->capacity, -1);
	cr_expect_eq(r->allocatable, 3);
	/* A side that does not name it: -1. */
	r = resource(&n, "example.com/cap-only");
	cr_expect_eq(r->capacity, 4);
	cr_expect_eq(r->allocatable, -1);
	r = resource(&n, "example.com/alloc-only");
	cr_expect_eq(r->capacity, -1);
	cr_expect_eq(r->allocatable, 2);
}

Test(node_facts, a_node_without_status_or_spec_has_no_facts_but_its_name)
{
	struct pool_node n;

	cr_assert_eq(node_of("{\"metadata\":{\"name\":\"bare\"}}", &n), 0);
	cr_expect_str_eq(n.name, "bare");
	cr_expect_eq(n.n_labels, 0);
	cr_expect_eq(n.n_resources, 0);
	cr_expect_eq(n.n_taints, 0);
	cr_expect_eq(n.n_conditions, 0);
	cr_expect_not(n.ready, "no Ready condition: not ready");
	cr_expect_not(n.unschedulable);
}

Test(node_facts, ready_only_when_the_ready_condition_is_true)
{
	static const char *const statuses[] = {"False", "Unknown", "true", ""};
	char text[300];

	for (size_t i = 0; i < sizeof(statuses) / sizeof(statuses[0]); i++) {
		struct pool_node n;
		json_t *o;

		snprintf(text, sizeof(text),
			 "{\"metadata\":{\"name\":\"n\"},\"status\":{\"conditions\":["
			 "{\"type\":\"Ready\",\"status\":\"%s\"}]}}",
			 statuses[i]);
		o = json_loads(text, 0, NULL);
		cr_assert_not_null(o);
		cr_assert_eq(node_facts(o, &A, &n), 0);
		cr_expect_not(n.ready, "Ready=%s", statuses[i]);
		cr_expect_eq(n.n_conditions, 1);
		json_decref(o);
	}
}

Test(node_facts, refuses_a_node_without_a_name_or_with_fields_of_the_wrong_type)
{
	static const char *const bad[] = {
		"{}",
		"{\"metadata\":{}}",
		"{\"metadata\":{\"name\":7}}",
		"{\"metadata\":{\"name\":\"n\"},\"spec\":[]}",
		"{\"metadata\":{\"name\":\"n\"},\"status\":\"up\"}",
		"{\"metadata\":{\"name\":\"n\"},\"spec\":{\"unschedulable\":\"true\"}}",
		"{\"metadata\":{\"name\":\"n\",\"labels\":[\"a\"]}}",
		"{\"metadata\":{\"name\":\"n\"},\"status\":{\"capacity\":[]}}",
		"{\"metadata\":{\"name\":\"n\"},\"status\":{\"allocatable\":\"8\"}}",
		"{\"metadata\":{\"name\":\"n\"},\"spec\":{\"taints\":{}}}",
		"{\"metadata\":{\"name\":\"n\"},\"status\":{\"conditions\":{}}}",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct pool_node n;
		json_t *o = json_loads(bad[i], 0, NULL);

		cr_assert_not_null(o, "%s", bad[i]);
		cr_expect_eq(node_facts(o, &A, &n), -1, "%s", bad[i]);
		json_decref(o);
	}
}

/* The exclusion the facts of a Node lead to for flavor h100 under the
 * policy's health settings (policy/pool.h decides; the facts must carry
 * what it needs). */
static enum pool_exclusion h100_exclusion(const char *spec, const char *labels,
					  const char *conditions, char *why,
					  size_t size)
{
	char text[1200];
	struct pool_node n;
	json_t *o;
	enum pool_exclusion e;

	snprintf(text, sizeof(text),
		 "{\"metadata\":{\"name\":\"g\",\"labels\":{"
		 "\"nvidia.com/gpu.product\":\"H100\"%s}},\"spec\":{%s},"
		 "\"status\":{\"capacity\":{\"nvidia.com/gpu\":\"8\"},"
		 "\"allocatable\":{\"nvidia.com/gpu\":\"8\"},\"conditions\":["
		 "%s]}}",
		 labels, spec, conditions);
	o = json_loads(text, 0, NULL);
	cr_assert_not_null(o, "%s", text);
	cr_assert_eq(node_facts(o, &A, &n), 0, "%s", text);
	cr_assert(pool_node_in_flavor(&n, policy_flavor_find(P, "h100")));
	e = pool_node_exclusion(&n, policy_flavor_find(P, "h100"), policy_health(P),
				why, size);
	json_decref(o);
	return e;
}

#define READY "{\"type\":\"Ready\",\"status\":\"True\"}"
#define TOLERATED "\"taints\":[{\"key\":\"nvidia.com/gpu\",\"effect\":\"NoSchedule\"}]"

Test(node_facts, taints_conditions_labels_and_cordons_exclude_a_node)
{
	char why[160];

	cr_expect_eq(h100_exclusion(TOLERATED, "", READY, why, sizeof(why)), POOL_USABLE);
	cr_expect_str_eq(why, "");
	/* Health, by the policy's own signals and the built-in ones. */
	cr_expect_eq(h100_exclusion("\"taints\":[{\"key\":\"gpu-health\",\"value\":"
				    "\"fatal\",\"effect\":\"PreferNoSchedule\"}]",
				    "", READY, why, sizeof(why)),
		     POOL_HEALTH);
	cr_expect_str_eq(why, "taint gpu-health=fatal:PreferNoSchedule");
	cr_expect_eq(h100_exclusion("", "", READY ",{\"type\":\"GpuThermal\",\"status\":"
				    "\"True\",\"reason\":\"Hot\"}",
				    why, sizeof(why)),
		     POOL_HEALTH);
	cr_expect_str_eq(why, "condition GpuThermal=True (reason Hot)");
	cr_expect_eq(h100_exclusion("", "", READY ",{\"type\":\"GpuThermal\",\"status\":"
				    "\"False\"}",
				    why, sizeof(why)),
		     POOL_USABLE);
	cr_expect_eq(h100_exclusion("", "", READY ",{\"type\":\"GpuXidError\",\"status\":"
				    "\"True\",\"reason\":\"Xid79\"}",
				    why, sizeof(why)),
		     POOL_HEALTH);
	cr_expect_str_eq(why, "condition GpuXidError=True (reason Xid79)");
	cr_expect_eq(h100_exclusion("", ",\"repair-state\":\"in-progress\"", READY, why,
				    sizeof(why)),
		     POOL_HEALTH);
	cr_expect_str_eq(why, "label repair-state=in-progress");
	cr_expect_eq(h100_exclusion("", ",\"repair-state\":\"done\"", READY, why,
				    sizeof(why)),
		     POOL_USABLE);
	cr_expect_eq(h100_exclusion("", ",\"dgxc.nvidia.com/nvsentinel-state\":"
				    "\"quarantined\"",
				    READY, why, sizeof(why)),
		     POOL_HEALTH);
	cr_expect_str_eq(why, "label dgxc.nvidia.com/nvsentinel-state=quarantined");
	/* Then NotReady, cordoned, an untolerated taint. */
	cr_expect_eq(h100_exclusion("", "", "{\"type\":\"Ready\",\"status\":\"Unknown\"}",
				    why, sizeof(why)),
		     POOL_NOT_READY);
	cr_expect_str_eq(why, "Ready=Unknown");
	cr_expect_eq(h100_exclusion("", "", "", why, sizeof(why)), POOL_NOT_READY);
	cr_expect_str_eq(why, "Ready=(none)");
	cr_expect_eq(h100_exclusion("\"unschedulable\":true", "", READY, why, sizeof(why)),
		     POOL_CORDONED);
	cr_expect_str_eq(why, "spec.unschedulable");
	cr_expect_eq(h100_exclusion("\"taints\":[{\"key\":\"dedicated\",\"value\":\"infra\","
				    "\"effect\":\"NoExecute\"}]",
				    "", READY, why, sizeof(why)),
		     POOL_TAINTED);
	cr_expect_str_eq(why, "taint dedicated=infra:NoExecute");
	cr_expect_eq(h100_exclusion("\"taints\":[{\"key\":\"dedicated\",\"effect\":"
				    "\"PreferNoSchedule\"}]",
				    "", READY, why, sizeof(why)),
		     POOL_USABLE);
}

/* ---- pods: where they are and what they ask ------------------------------- */

/* A pod of namespace research asking limits (a JSON object's members) in
 * its one container, with more members of the pod after spec. */
#define POD(meta, spec, status)                                                  \
	"{\"metadata\":{\"uid\":\"u1\",\"namespace\":\"research\",\"name\":\"p1\"" \
	meta "},\"spec\":{" spec "},\"status\":{" status "}}"
#define GPUS(n) "\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":{" \
		"\"nvidia.com/gpu\":\"" n "\"}}}]"

static int placement_of(const struct policy *p, const char *text,
			struct inventory_placement *out)
{
	return pod_placement(p, object(text), &A, out);
}

static int64_t asked(const struct inventory_placement *pl, const char *res)
{
	for (size_t i = 0; i < pl->n_asks; i++)
		if (strcmp(pl->asks[i].resource, res) == 0)
			return pl->asks[i].units;
	return 0;
}

Test(node_facts, a_bound_pod_asks_the_schedulers_count_per_resource)
{
	struct inventory_placement pl;

	cr_assert_eq(placement_of(P, POD("", "\"nodeName\":\"gpu-1\","
					  "\"containers\":["
					  "{\"name\":\"a\",\"resources\":{"
					  "\"limits\":{\"nvidia.com/gpu\":\"2\",\"cpu\":\"4\"},"
					  "\"requests\":{\"nvidia.com/gpu\":\"2\","
					  "\"example.com/fpga\":\"1\"}}},"
					  "{\"name\":\"b\",\"resources\":{\"limits\":{"
					  "\"nvidia.com/gpu\":\"1\","
					  "\"nvidia.com/gpu.shared\":\"0\"}}}],"
					  "\"initContainers\":[{\"name\":\"i\",\"resources\":{"
					  "\"limits\":{\"nvidia.com/gpu\":\"5\"}}}]",
				      "\"phase\":\"Running\""),
				  &pl),
		     0);
	cr_expect_str_eq(pl.uid, "u1");
	cr_expect_str_eq(pl.node, "gpu-1");
	cr_expect_null(pl.waiting);
	/* nvidia.com/gpu once: max(2 + 1, init 5); the fpga from requests;
	 * not cpu (no '/'), not a resource at 0. */
	cr_expect_eq(pl.n_asks, 2);
	cr_expect_eq(asked(&pl, "nvidia.com/gpu"), 5);
	cr_expect_eq(asked(&pl, "example.com/fpga"), 1);
	cr_expect_eq(asked(&pl, "nvidia.com/gpu.shared"), 0);
}

Test(node_facts, a_terminating_pod_still_holds_its_units)
{
	struct inventory_placement pl;

	cr_assert_eq(placement_of(P, POD(",\"deletionTimestamp\":\"2026-12-05T03:00:00Z\"",
					  "\"nodeName\":\"gpu-1\"," GPUS("4"),
					  "\"phase\":\"Running\""),
				  &pl),
		     0);
	cr_expect_str_eq(pl.node, "gpu-1");
	cr_expect_eq(pl.n_asks, 1);
	cr_expect_eq(asked(&pl, "nvidia.com/gpu"), 4);
}

Test(node_facts, succeeded_and_failed_pods_hold_nothing)
{
	static const char *const phases[] = {"Succeeded", "Failed"};
	char text[600];

	for (size_t i = 0; i < 2; i++) {
		struct inventory_placement pl;
		json_t *o;

		snprintf(text, sizeof(text),
			 POD("", "\"nodeName\":\"gpu-1\"," GPUS("4"), "\"phase\":\"%s\""),
			 phases[i]);
		o = json_loads(text, 0, NULL);
		cr_assert_not_null(o);
		cr_assert_eq(pod_placement(P, o, &A, &pl), 0);
		cr_expect_str_eq(pl.uid, "u1");
		cr_expect_null(pl.node, "%s", phases[i]);
		cr_expect_eq(pl.n_asks, 0, "%s", phases[i]);
		cr_expect_null(pl.waiting, "%s", phases[i]);
		json_decref(o);
	}
}

Test(node_facts, an_unbound_gpu_pod_waits_with_what_it_asks)
{
	struct inventory_placement pl;
	const struct inventory_waiting *w;

	cr_assert_eq(placement_of(P, POD(",\"creationTimestamp\":\"2026-12-05T03:00:00Z\"",
					  "\"nodeName\":\"\"," GPUS("3"),
					  "\"phase\":\"Pending\",\"conditions\":["
					  "{\"type\":\"Ready\",\"status\":\"False\","
					  "\"message\":\"not this\"},"
					  "{\"type\":\"PodScheduled\",\"status\":\"False\","
					  "\"message\":\"0/4 nodes are available\"}]"),
				  &pl),
		     0);
	cr_expect_null(pl.node, "an empty nodeName is no node");
	cr_expect_eq(pl.n_asks, 0);
	w = pl.waiting;
	cr_assert_not_null(w);
	cr_expect_str_eq(w->uid, "u1");
	cr_expect_str_eq(w->namespace, "research");
	cr_expect_str_eq(w->name, "p1");
	cr_expect_str_eq(w->tenant, "research");
	cr_expect_str_eq(w->flavor, "h100");
	cr_expect_eq(w->per_pod, 3);
	cr_expect_eq(w->since, 1796439600);
	cr_expect_str_eq(w->scheduler, "0/4 nodes are available");
}

Test(node_facts, a_waiting_pod_of_another_flavor_without_times_or_messages)
{
	struct inventory_placement pl;

	cr_assert_eq(placement_of(P, POD("", "\"containers\":[{\"name\":\"c\","
					  "\"resources\":{\"limits\":{"
					  "\"nvidia.com/gpu.shared\":\"2\"}}}]",
				      "\"phase\":\"Pending\""),
				  &pl),
		     0);
	cr_assert_not_null(pl.waiting);
	cr_expect_str_eq(pl.waiting->tenant, "research");
	cr_expect_str_eq(pl.waiting->flavor, "l4");
	cr_expect_eq(pl.waiting->per_pod, 2);
	cr_expect_eq(pl.waiting->since, 0, "no creationTimestamp: unknown");
	cr_expect_str_eq(pl.waiting->scheduler, "");
	cr_expect_str_eq(pl.waiting->gang, "", "no gang");
	cr_expect_str_eq(pl.waiting->gang_route, "");
	cr_expect_not(pl.waiting->gang_gated);
}

/* A gated gang pod (route gates, SPEC section 9) waits like any other,
 * with its gang's facts. */
Test(node_facts, a_gated_gang_pod_waits_with_its_gang)
{
	struct inventory_placement pl;

	cr_assert_eq(placement_of(P, POD(",\"labels\":{\"gpugate.io/gang\":\"g-1\","
					  "\"gpugate.io/class\":\"train\"},"
					  "\"annotations\":{\"gpugate.io/gang-route\":\"gates\"}",
					  "\"schedulingGates\":[{\"name\":\"x.io/y\"},"
					  "{\"name\":\"gpugate.io/gang\"}]," GPUS("8"),
				      "\"phase\":\"Pending\""),
				  &pl),
		     0);
	cr_assert_not_null(pl.waiting);
	cr_expect_str_eq(pl.waiting->gang, "g-1");
	cr_expect_str_eq(pl.waiting->gang_route, "gates");
	cr_expect_str_eq(pl.waiting->class_name, "train");
	cr_expect(pl.waiting->gang_gated);
}

Test(node_facts, an_unbound_pod_does_not_wait_when_deleted_tenantless_gpu_less_or_without_policy)
{
	static const char *const texts[] = {
		POD(",\"deletionTimestamp\":\"2026-12-05T03:00:00Z\"", GPUS("1"),
		    "\"phase\":\"Pending\""),
		/* outside every tenant: the charge rule charges nobody */
		"{\"metadata\":{\"uid\":\"u1\",\"namespace\":\"elsewhere\",\"name\":\"p\"},"
		"\"spec\":{" GPUS("1") "},\"status\":{\"phase\":\"Pending\"}}",
		POD("", "\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":{"
			"\"cpu\":\"1\"}}}]",
		    "\"phase\":\"Pending\""),
		POD("", GPUS("0"), "\"phase\":\"Pending\""),
	};
	struct inventory_placement pl;

	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		json_t *o = json_loads(texts[i], 0, NULL);

		cr_assert_not_null(o);
		cr_assert_eq(pod_placement(P, o, &A, &pl), 0);
		cr_expect_str_eq(pl.uid, "u1");
		cr_expect_null(pl.node);
		cr_expect_eq(pl.n_asks, 0);
		cr_expect_null(pl.waiting, "%s", texts[i]);
		json_decref(o);
	}
	/* No policy (none loaded yet): nothing waits. */
	cr_assert_eq(placement_of(NULL, POD("", GPUS("1"), "\"phase\":\"Pending\""), &pl),
		     0);
	cr_expect_null(pl.waiting);
}

Test(node_facts, a_pod_gpugate_cannot_read_asks_nothing)
{
	static const char *const texts[] = {
		/* no namespace */
		"{\"metadata\":{\"uid\":\"u1\",\"name\":\"p\"},\"spec\":{\"nodeName\":"
		"\"gpu-1\"," GPUS("2") "}}",
		/* containers not an array */
		POD("", "\"nodeName\":\"gpu-1\",\"containers\":{}", "\"phase\":\"Running\""),
		/* a quantity that is not one */
		POD("", "\"nodeName\":\"gpu-1\"," GPUS("two"), "\"phase\":\"Running\""),
	};
	struct inventory_placement pl;

	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		json_t *o = json_loads(texts[i], 0, NULL);

		cr_assert_not_null(o, "%s", texts[i]);
		cr_assert_eq(pod_placement(P, o, &A, &pl), 0, "%s", texts[i]);
		cr_expect_str_eq(pl.uid, "u1");
		cr_expect_str_eq(pl.node, "gpu-1", "%s", texts[i]);
		cr_expect_eq(pl.n_asks, 0, "%s", texts[i]);
		cr_expect_null(pl.waiting);
		json_decref(o);
	}
}

Test(node_facts, a_pod_without_a_uid_is_refused)
{
	struct inventory_placement pl;
	struct meter_pod mp;

	cr_expect_eq(placement_of(P, "{\"metadata\":{\"namespace\":\"research\"},"
				     "\"spec\":{\"nodeName\":\"gpu-1\"}}",
				  &pl),
		     -1);
	cr_expect_eq(pod_run(P, OBJ, &A, &mp), -1);
}

Test(node_facts, a_pod_without_extended_resources_asks_nothing_on_its_node)
{
	struct inventory_placement pl;

	cr_assert_eq(placement_of(P, POD("", "\"nodeName\":\"cpu-1\",\"containers\":["
					  "{\"name\":\"c\",\"resources\":{\"requests\":{"
					  "\"cpu\":\"1\"}}}]",
				      "\"phase\":\"Running\""),
				  &pl),
		     0);
	cr_expect_str_eq(pl.node, "cpu-1");
	cr_expect_eq(pl.n_asks, 0);
	cr_expect_null(pl.waiting);
}

/* ---- pods: how long they ran ------------------------------------------- */

static int run_of(const struct policy *p, const char *text, struct meter_pod *out)
{
	return pod_run(p, object(text), &A, out);
}

Test(node_facts, a_running_gpu_pod_runs_since_its_start)
{
	struct meter_pod mp;

	cr_assert_eq(run_of(P, POD("", "\"nodeName\":\"gpu-1\"," GPUS("2"),
				   "\"phase\":\"Running\",\"startTime\":"
				   "\"2026-12-05T03:00:00Z\""),
			    &mp),
		     0);
	cr_expect_str_eq(mp.uid, "u1");
	cr_expect_str_eq(mp.tenant, "research");
	cr_expect_str_eq(mp.flavor, "h100");
	cr_expect_eq(mp.units, 2);
	cr_expect_eq(mp.start, 1796439600);
	cr_expect_eq(mp.end, 0);
}

Test(node_facts, a_finished_pod_ends_at_its_last_container)
{
	struct meter_pod mp;

	cr_assert_eq(run_of(P, POD("", "\"nodeName\":\"gpu-1\"," GPUS("1"),
				   "\"phase\":\"Succeeded\",\"startTime\":"
				   "\"2026-12-05T03:00:00Z\",\"containerStatuses\":["
				   "{\"state\":{\"terminated\":{\"finishedAt\":"
				   "\"2026-12-05T03:10:00Z\"}}},"
				   "{\"state\":{\"running\":{}}}],"
				   "\"initContainerStatuses\":["
				   "{\"state\":{\"terminated\":{\"finishedAt\":"
				   "\"2026-12-05T03:20:00Z\"}}}]"),
			    &mp),
		     0);
	cr_expect_eq(mp.units, 1);
	cr_expect_eq(mp.start, 1796439600);
	cr_expect_eq(mp.end, 1796439600 + 20 * 60);
}

Test(node_facts, a_failed_pod_without_finish_times_ends_now)
{
	struct meter_pod mp;
	int64_t before = (int64_t)time(NULL), after;

	cr_assert_eq(run_of(P, POD("", GPUS("1"), "\"phase\":\"Failed\""), &mp), 0);
	after = (int64_t)time(NULL);
	cr_expect_eq(mp.start, 0);
	cr_expect_geq(mp.end, before);
	cr_expect_leq(mp.end, after);
}

Test(node_facts, pods_that_hold_no_gpu_of_a_tenant_run_for_nobody)
{
	static const char *const texts[] = {
		POD("", "\"containers\":[{\"name\":\"c\"}]", "\"phase\":\"Running\""),
		"{\"metadata\":{\"uid\":\"u1\",\"namespace\":\"elsewhere\",\"name\":\"p\"},"
		"\"spec\":{" GPUS("1") "},\"status\":{\"phase\":\"Running\"}}",
		"{\"metadata\":{\"uid\":\"u1\",\"name\":\"p\"},\"spec\":{" GPUS("1") "}}",
	};

	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		struct meter_pod mp;
		json_t *o = json_loads(texts[i], 0, NULL);

		cr_assert_not_null(o);
		cr_assert_eq(pod_run(P, o, &A, &mp), 0, "%s", texts[i]);
		cr_expect_str_eq(mp.uid, "u1");
		cr_expect_null(mp.tenant, "%s", texts[i]);
		cr_expect_eq(mp.units, 0);
		json_decref(o);
	}
	/* No policy: nobody's. */
	{
		struct meter_pod mp;
		json_t *o = json_loads(POD("", GPUS("1"), "\"phase\":\"Running\""), 0, NULL);

		cr_assert_eq(pod_run(NULL, o, &A, &mp), 0);
		cr_expect_str_eq(mp.uid, "u1");
		cr_expect_null(mp.tenant);
		json_decref(o);
	}
}

/* ---- the feed's callbacks ------------------------------------------------- */

Test(node_facts, the_callbacks_read_the_policy_of_their_holder)
{
	struct holder *h = holder_new(test_policy(policy_yaml));
	const json_t *pod = object(POD("", GPUS("2"), "\"phase\":\"Pending\""));
	json_t *node = json_loads("{\"metadata\":{\"name\":\"n\"}}", 0, NULL);
	struct inventory_placement pl;
	struct meter_pod mp;
	struct pool_node n;

	cr_assert_not_null(h);
	cr_assert_eq(pod_placement_cb(h, pod, &A, &pl), 0);
	cr_assert_not_null(pl.waiting);
	cr_expect_str_eq(pl.waiting->flavor, "h100");
	cr_assert_eq(pod_placement_cb(NULL, pod, &A, &pl), 0);
	cr_expect_null(pl.waiting, "no holder: no policy");
	cr_assert_eq(pod_run_cb(h, pod, &A, &mp), 0);
	cr_expect_str_eq(mp.tenant, "research");
	cr_expect_eq(mp.units, 2);
	cr_assert_eq(pod_run_cb(NULL, pod, &A, &mp), 0);
	cr_expect_null(mp.tenant);
	cr_assert_eq(node_facts_cb(h, node, &A, &n), 0);
	cr_expect_str_eq(n.name, "n");
	json_decref(node);
	holder_free(h);
}
