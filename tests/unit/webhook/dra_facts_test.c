/*
 * webhook/dra-facts.c: ResourceSlices, DeviceTaintRules, ResourceClaims'
 * allocations and DeviceClasses of resource.k8s.io/v1, NVIDIA-shaped
 * (driver gpu.nvidia.com), read for the pool.  Through the module's
 * public functions only.
 */
#include "base/arena.h"
#include "webhook/dra-facts.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

static struct arena A;
static json_t *OBJ;

static void setup(void)
{
	arena_init(&A);
	OBJ = NULL;
}

static void teardown(void)
{
	json_decref(OBJ);
	arena_release(&A);
}

TestSuite(dra_facts, .init = setup, .fini = teardown);

static json_t *parse(const char *text)
{
	json_error_t e;

	json_decref(OBJ);
	OBJ = json_loads(text, 0, &e);
	cr_assert(OBJ, "bad test JSON: %s", e.text);
	return OBJ;
}

/* As NVIDIA's kubelet plugin publishes a node's GPUs (two of eight). */
static const char slice_json[] =
	"{\"apiVersion\": \"resource.k8s.io/v1\", \"kind\": \"ResourceSlice\","
	" \"metadata\": {\"name\": \"gpu-node-1-gpu.nvidia.com-x7k2p\"},"
	" \"spec\": {\"driver\": \"gpu.nvidia.com\", \"nodeName\": \"gpu-node-1\","
	"  \"pool\": {\"name\": \"gpu-node-1\", \"generation\": 3, \"resourceSliceCount\": 1},"
	"  \"devices\": ["
	"   {\"name\": \"gpu-0\","
	"    \"attributes\": {"
	"     \"productName\": {\"string\": \"NVIDIA H100 80GB HBM3\"},"
	"     \"type\": {\"string\": \"gpu\"},"
	"     \"uuid\": {\"string\": \"GPU-4b5c2d1e-0000-1111-2222-333344445555\"},"
	"     \"index\": {\"int\": 0},"
	"     \"cudaComputeCapability\": {\"version\": \"9.0.0\"},"
	"     \"resource.kubernetes.io/pcieRoot\": {\"string\": \"pci0000:00\"},"
	"     \"multiGPU\": {\"bool\": true}},"
	"    \"capacity\": {\"memory\": {\"value\": \"80Gi\"}}},"
	"   {\"name\": \"gpu-1\","
	"    \"attributes\": {\"productName\": {\"string\": \"NVIDIA H100 80GB HBM3\"},"
	"     \"type\": {\"string\": \"gpu\"}},"
	"    \"capacity\": {\"memory\": {\"value\": \"80Gi\"}},"
	"    \"taints\": [{\"key\": \"gpu.nvidia.com/xid\", \"value\": \"79\","
	"                  \"effect\": \"NoExecute\"}]}]}}";

static const char *label(const struct pool_label *l, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(l[i].key, key) == 0)
			return l[i].value;
	return NULL;
}

static bool is_string(const struct pool_device *d, const char *key)
{
	for (size_t i = 0; i < d->n_attributes; i++)
		if (strcmp(d->attributes[i].key, key) == 0)
			return d->attribute_is_string[i];
	cr_assert_fail("no attribute %s", key);
	return false;
}

Test(dra_facts, nvidia_slice)
{
	struct inventory_slice s;
	const struct pool_device *d;

	cr_assert_eq(dra_slice_facts(parse(slice_json), &A, &s), 0);
	cr_assert_str_eq(s.name, "gpu-node-1-gpu.nvidia.com-x7k2p");
	cr_assert_str_eq(s.driver, "gpu.nvidia.com");
	cr_assert_str_eq(s.pool, "gpu-node-1");
	cr_assert_eq(s.generation, 3);
	cr_assert_eq(s.slice_count, 1);
	cr_assert_str_eq(s.node, "gpu-node-1");
	cr_assert_eq(s.n_devices, 2);
	d = &s.devices[0];
	cr_assert_str_eq(d->name, "gpu-0");
	cr_assert_str_eq(d->driver, "gpu.nvidia.com");
	cr_assert_str_eq(d->pool, "gpu-node-1");
	cr_assert_eq(d->n_attributes, 7);
	cr_assert_str_eq(label(d->attributes, d->n_attributes, "gpu.nvidia.com/productName"),
			 "NVIDIA H100 80GB HBM3");
	cr_assert_str_eq(label(d->attributes, d->n_attributes, "gpu.nvidia.com/type"), "gpu");
	cr_assert_str_eq(label(d->attributes, d->n_attributes, "gpu.nvidia.com/uuid"),
			 "GPU-4b5c2d1e-0000-1111-2222-333344445555");
	cr_assert_str_eq(label(d->attributes, d->n_attributes, "gpu.nvidia.com/index"), "0");
	cr_assert_str_eq(label(d->attributes, d->n_attributes,
			       "gpu.nvidia.com/cudaComputeCapability"),
			 "9.0.0");
	cr_assert_str_eq(label(d->attributes, d->n_attributes, "gpu.nvidia.com/multiGPU"),
			 "true");
	/* A name with a domain is kept as it is. */
	cr_assert_str_eq(label(d->attributes, d->n_attributes,
			       "resource.kubernetes.io/pcieRoot"),
			 "pci0000:00");
	cr_assert(is_string(d, "gpu.nvidia.com/productName"));
	cr_assert(!is_string(d, "gpu.nvidia.com/index"));
	cr_assert(!is_string(d, "gpu.nvidia.com/cudaComputeCapability"));
	cr_assert(!is_string(d, "gpu.nvidia.com/multiGPU"));
	cr_assert_eq(d->n_capacity, 1);
	cr_assert_str_eq(d->capacity[0].key, "gpu.nvidia.com/memory");
	cr_assert_str_eq(d->capacity[0].value, "80Gi");
	cr_assert_eq(d->n_taints, 0);
	d = &s.devices[1];
	cr_assert_eq(d->n_taints, 1);
	cr_assert_str_eq(d->taints[0].taint.key, "gpu.nvidia.com/xid");
	cr_assert_str_eq(d->taints[0].taint.value, "79");
	cr_assert_str_eq(d->taints[0].taint.effect, "NoExecute");
	cr_assert_null(d->taints[0].rule);
	cr_assert(!d->allocated);
}

Test(dra_facts, slice_on_no_node)
{
	struct inventory_slice s;

	/* allNodes: a network pool, on no node's. */
	cr_assert_eq(dra_slice_facts(parse("{\"metadata\": {\"name\": \"net\"},"
					   " \"spec\": {\"driver\": \"gpu.nvidia.com\","
					   "  \"allNodes\": true,"
					   "  \"pool\": {\"name\": \"fabric\", \"generation\": 1,"
					   "   \"resourceSliceCount\": 2}}}"),
				     &A, &s),
		     0);
	cr_assert_null(s.node);
	cr_assert_eq(s.n_devices, 0);
	cr_assert_eq(s.slice_count, 2);
	cr_assert_eq(dra_slice_facts(parse("{\"metadata\": {\"name\": \"sel\"},"
					   " \"spec\": {\"driver\": \"d\", \"nodeName\": \"\","
					   "  \"nodeSelector\": {\"nodeSelectorTerms\": []},"
					   "  \"pool\": {\"name\": \"p\"}}}"),
				     &A, &s),
		     0);
	cr_assert_null(s.node);
}

Test(dra_facts, slice_skips_what_it_does_not_read)
{
	struct inventory_slice s;

	cr_assert_eq(dra_slice_facts(parse("{\"metadata\": {\"name\": \"s\"},"
					   " \"spec\": {\"driver\": \"gpu.nvidia.com\","
					   "  \"nodeName\": \"n\", \"pool\": {\"name\": \"n\"},"
					   "  \"devices\": [7, {\"noname\": 1},"
					   "   {\"name\": \"gpu-0\","
					   "    \"attributes\": {\"ids\": {\"ints\": [1, 2]},"
					   "     \"odd\": 5, \"type\": {\"string\": \"gpu\"}},"
					   "    \"capacity\": {\"memory\": {\"value\": 80},"
					   "     \"cores\": {\"value\": \"132\"}},"
					   "    \"taints\": [{\"value\": \"nokey\"},"
					   "     {\"key\": \"k\"}]}]}}"),
				     &A, &s),
		     0);
	cr_assert_eq(s.n_devices, 1);
	cr_assert_eq(s.devices[0].n_attributes, 1);
	cr_assert_str_eq(s.devices[0].attributes[0].key, "gpu.nvidia.com/type");
	cr_assert_eq(s.devices[0].n_capacity, 1);
	cr_assert_str_eq(s.devices[0].capacity[0].key, "gpu.nvidia.com/cores");
	cr_assert_eq(s.devices[0].n_taints, 1);
	cr_assert_str_eq(s.devices[0].taints[0].taint.value, "");
	cr_assert_str_eq(s.devices[0].taints[0].taint.effect, "");
}

Test(dra_facts, bad_slices)
{
	static const char *const bad[] = {
		"{\"spec\": {\"driver\": \"d\", \"pool\": {\"name\": \"p\"}}}",
		"{\"metadata\": {\"name\": \"s\"}, \"spec\": {\"pool\": {\"name\": \"p\"}}}",
		"{\"metadata\": {\"name\": \"s\"}, \"spec\": {\"driver\": \"d\"}}",
		"{\"metadata\": {\"name\": \"s\"}, \"spec\": {\"driver\": \"d\","
		" \"pool\": {\"name\": \"p\", \"generation\": \"3\"}}}",
		"{\"metadata\": {\"name\": \"s\"}, \"spec\": {\"driver\": \"d\","
		" \"pool\": {\"name\": \"p\"}, \"nodeName\": 1}}",
		"{\"metadata\": {\"name\": \"s\"}, \"spec\": {\"driver\": \"d\","
		" \"pool\": {\"name\": \"p\"}, \"devices\": {}}}",
		"{\"metadata\": {\"name\": \"s\"}, \"spec\": {\"driver\": \"d\","
		" \"pool\": {\"name\": \"p\"}, \"devices\": [{\"name\": \"x\","
		" \"attributes\": []}]}}",
		"{\"metadata\": {\"name\": \"s\"}, \"spec\": {\"driver\": \"d\","
		" \"pool\": {\"name\": \"p\"}, \"devices\": [{\"name\": \"x\","
		" \"taints\": {}}]}}",
		"[]",
	};
	struct inventory_slice s;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_eq(dra_slice_facts(parse(bad[i]), &A, &s), -1, "%s", bad[i]);
	cr_assert_eq(dra_slice_facts(NULL, &A, &s), -1);
}

/* Over the API's limits: refused, whatever the rest. */
Test(dra_facts, hostile_sizes)
{
	json_t *o = parse("{\"metadata\": {\"name\": \"s\"}, \"spec\": {\"driver\": \"d\","
			  " \"pool\": {\"name\": \"p\"}, \"devices\": []}}");
	json_t *devs = json_object_get(json_object_get(o, "spec"), "devices");
	json_t *taints = json_array(), *attrs = json_object();
	struct inventory_slice s;
	char name[32];

	for (int i = 0; i < DRA_SLICE_MAX_DEVICES; i++) {
		snprintf(name, sizeof(name), "gpu-%d", i);
		json_array_append_new(devs, json_pack("{s:s}", "name", name));
	}
	cr_assert_eq(dra_slice_facts(o, &A, &s), 0);
	cr_assert_eq(s.n_devices, DRA_SLICE_MAX_DEVICES);
	json_array_append_new(devs, json_pack("{s:s}", "name", "one-more"));
	cr_assert_eq(dra_slice_facts(o, &A, &s), -1);

	json_array_clear(devs);
	for (int i = 0; i <= DRA_DEVICE_MAX_TAINTS; i++)
		json_array_append_new(taints, json_pack("{s:s,s:s}", "key", "k",
							"effect", "NoSchedule"));
	json_array_append_new(devs, json_pack("{s:s,s:o}", "name", "gpu-0", "taints", taints));
	cr_assert_eq(dra_slice_facts(o, &A, &s), -1);

	json_array_clear(devs);
	for (int i = 0; i <= DRA_DEVICE_MAX_ATTRIBUTES; i++) {
		snprintf(name, sizeof(name), "a%d", i);
		json_object_set_new(attrs, name, json_pack("{s:i}", "int", i));
	}
	json_array_append_new(devs, json_pack("{s:s,s:o}", "name", "gpu-0", "attributes",
					      attrs));
	cr_assert_eq(dra_slice_facts(o, &A, &s), -1);
}

Test(dra_facts, taint_rule)
{
	struct inventory_taint_rule r;

	cr_assert_eq(dra_taint_rule_facts(
			     parse("{\"metadata\": {\"name\": \"drain-gpu-3\"},"
				   " \"spec\": {\"deviceSelector\": {\"driver\": \"gpu.nvidia.com\","
				   "  \"pool\": \"gpu-node-1\", \"device\": \"gpu-3\"},"
				   "  \"taint\": {\"key\": \"maintenance\", \"value\": \"rma\","
				   "   \"effect\": \"NoSchedule\"}}}"),
			     &r),
		     0);
	cr_assert_str_eq(r.name, "drain-gpu-3");
	cr_assert(r.has_selector);
	cr_assert_str_eq(r.driver, "gpu.nvidia.com");
	cr_assert_str_eq(r.pool, "gpu-node-1");
	cr_assert_str_eq(r.device, "gpu-3");
	cr_assert_str_eq(r.taint.key, "maintenance");
	cr_assert_str_eq(r.taint.value, "rma");
	cr_assert_str_eq(r.taint.effect, "NoSchedule");

	/* A driver-wide rule; and one without a selector (matches nothing). */
	cr_assert_eq(dra_taint_rule_facts(
			     parse("{\"metadata\": {\"name\": \"all\"},"
				   " \"spec\": {\"deviceSelector\": {\"driver\": \"gpu.nvidia.com\"},"
				   "  \"taint\": {\"key\": \"k\", \"effect\": \"None\"}}}"),
			     &r),
		     0);
	cr_assert_null(r.pool);
	cr_assert_null(r.device);
	cr_assert_str_eq(r.taint.value, "");
	cr_assert_eq(dra_taint_rule_facts(
			     parse("{\"metadata\": {\"name\": \"none\"},"
				   " \"spec\": {\"taint\": {\"key\": \"k\", \"effect\": \"NoExecute\"}}}"),
			     &r),
		     0);
	cr_assert(!r.has_selector);

	cr_assert_eq(dra_taint_rule_facts(parse("{\"metadata\": {\"name\": \"x\"},"
						" \"spec\": {\"taint\": {\"value\": \"v\"}}}"),
					  &r),
		     -1);
	cr_assert_eq(dra_taint_rule_facts(parse("{\"metadata\": {\"name\": \"x\"},"
						" \"spec\": {\"deviceSelector\": [],"
						"  \"taint\": {\"key\": \"k\"}}}"),
					  &r),
		     -1);
	cr_assert_eq(dra_taint_rule_facts(parse("{\"spec\": {\"taint\": {\"key\": \"k\"}}}"),
					  &r),
		     -1);
}

Test(dra_facts, claim_allocation)
{
	struct dra_claim c;

	cr_assert_eq(dra_claim_facts(
			     parse("{\"metadata\": {\"name\": \"train-gpu\", \"uid\": \"u1\","
				   "  \"deletionTimestamp\": \"2026-12-06T04:00:00Z\"},"
				   " \"status\": {\"allocation\": {\"devices\": {\"results\": ["
				   "  {\"request\": \"gpu\", \"driver\": \"gpu.nvidia.com\","
				   "   \"pool\": \"gpu-node-1\", \"device\": \"gpu-0\"},"
				   "  {\"request\": \"gpu\", \"driver\": \"gpu.nvidia.com\","
				   "   \"pool\": \"gpu-node-1\", \"device\": \"gpu-1\","
				   "   \"adminAccess\": true},"
				   "  {\"request\": \"gpu\", \"driver\": \"gpu.nvidia.com\"},"
				   "  {\"request\": \"gpu\", \"driver\": \"gpu.nvidia.com\","
				   "   \"pool\": \"gpu-node-1\", \"device\": \"gpu-2\"}]}}}}"),
			     &A, &c),
		     0);
	/* Being deleted: still allocated until gone. */
	cr_assert_str_eq(c.uid, "u1");
	cr_assert_eq(c.n_devices, 2);
	cr_assert_str_eq(c.devices[0].driver, "gpu.nvidia.com");
	cr_assert_str_eq(c.devices[0].pool, "gpu-node-1");
	cr_assert_str_eq(c.devices[0].device, "gpu-0");
	cr_assert_str_eq(c.devices[1].device, "gpu-2");

	cr_assert_eq(dra_claim_facts(parse("{\"metadata\": {\"uid\": \"u2\"},"
					   " \"spec\": {\"devices\": {\"requests\": []}}}"),
				     &A, &c),
		     0);
	cr_assert_eq(c.n_devices, 0);
	cr_assert_eq(dra_claim_facts(parse("{\"metadata\": {\"name\": \"x\"}}"), &A, &c), -1);
	{
		json_t *o = parse("{\"metadata\": {\"uid\": \"u3\"}, \"status\": {\"allocation\":"
				  " {\"devices\": {\"results\": []}}}}");
		json_t *res = json_object_get(json_object_get(json_object_get(
			json_object_get(o, "status"), "allocation"), "devices"), "results");

		for (int i = 0; i <= DRA_CLAIM_MAX_RESULTS; i++)
			json_array_append_new(res, json_pack("{s:s,s:s,s:s}", "driver", "d",
							     "pool", "p", "device", "x"));
		cr_assert_eq(dra_claim_facts(o, &A, &c), -1, "over the API's limit");
		json_array_remove(res, 0);
		cr_assert_eq(dra_claim_facts(o, &A, &c), 0);
		cr_assert_eq(c.n_devices, DRA_CLAIM_MAX_RESULTS);
	}
	cr_assert_eq(dra_claim_facts(parse("{\"metadata\": {\"uid\": \"u\"}, \"status\":"
					   " {\"allocation\": {\"devices\": {\"results\": 1}}}}"),
				     &A, &c),
		     -1);
}

Test(dra_facts, device_class)
{
	struct dra_class c;

	cr_assert_eq(dra_class_facts(parse("{\"metadata\": {\"name\": \"gpu.nvidia.com\"},"
					   " \"spec\": {\"selectors\": [{\"cel\": {\"expression\":"
					   "  \"device.driver == 'gpu.nvidia.com'\"}}],"
					   "  \"extendedResourceName\": \"nvidia.com/gpu\"}}"),
				     &c),
		     0);
	cr_assert_str_eq(c.name, "gpu.nvidia.com");
	cr_assert_str_eq(c.extended_resource, "nvidia.com/gpu");
	cr_assert_eq(dra_class_facts(parse("{\"metadata\": {\"name\": \"mig\"}, \"spec\": {}}"),
				     &c),
		     0);
	cr_assert_null(c.extended_resource);
	cr_assert_eq(dra_class_facts(parse("{\"metadata\": {\"name\": \"x\"},"
					   " \"spec\": {\"extendedResourceName\": 3}}"),
				     &c),
		     -1);
	cr_assert_eq(dra_class_facts(parse("{\"spec\": {}}"), &c), -1);
}

/* Partitionable A100s as NVIDIA's plugin publishes them since 1.34 (a
 * slice has sharedCounters or devices, never both): the counter set of
 * gpu-0 in one slice, the full GPU and a 1g.5gb partition in another. */
static const char counters_json[] =
	"{\"metadata\": {\"name\": \"node-1-counters\"},"
	" \"spec\": {\"driver\": \"gpu.nvidia.com\", \"nodeName\": \"node-1\","
	"  \"pool\": {\"name\": \"node-1\", \"generation\": 1, \"resourceSliceCount\": 2},"
	"  \"sharedCounters\": [{\"name\": \"gpu-0-counter-set\", \"counters\": {"
	"   \"multiprocessors\": {\"value\": \"98\"}, \"memory\": {\"value\": \"40Gi\"},"
	"   \"memory-slice-0\": {\"value\": \"1\"}, \"memory-slice-1\": {\"value\": \"1\"},"
	"   \"memory-slice-2\": {\"value\": \"1\"}, \"memory-slice-3\": {\"value\": \"1\"},"
	"   \"memory-slice-4\": {\"value\": \"1\"}, \"memory-slice-5\": {\"value\": \"1\"},"
	"   \"memory-slice-6\": {\"value\": \"1\"}, \"memory-slice-7\": {\"value\": \"1\"}}}]}}";

static const char partitions_json[] =
	"{\"metadata\": {\"name\": \"node-1-devices\"},"
	" \"spec\": {\"driver\": \"gpu.nvidia.com\", \"nodeName\": \"node-1\","
	"  \"pool\": {\"name\": \"node-1\", \"generation\": 1, \"resourceSliceCount\": 2},"
	"  \"devices\": ["
	"   {\"name\": \"gpu-0\", \"attributes\": {\"type\": {\"string\": \"gpu\"}},"
	"    \"consumesCounters\": [{\"counterSet\": \"gpu-0-counter-set\", \"counters\": {"
	"     \"multiprocessors\": {\"value\": \"98\"}, \"memory\": {\"value\": \"40Gi\"}}}]},"
	"   {\"name\": \"gpu-0-mig-1g-5gb-0\", \"attributes\": {"
	"     \"type\": {\"string\": \"mig\"}, \"profile\": {\"string\": \"1g.5gb\"}},"
	"    \"consumesCounters\": [{\"counterSet\": \"gpu-0-counter-set\", \"counters\": {"
	"     \"multiprocessors\": {\"value\": \"14\"}, \"memory\": {\"value\": \"5Gi\"},"
	"     \"memory-slice-0\": {\"value\": \"1\"}}}]}]}}";

Test(dra_facts, shared_counters)
{
	struct inventory_slice s;
	const struct pool_counter_set *c;

	cr_assert_eq(dra_slice_facts(parse(counters_json), &A, &s), 0);
	cr_assert_eq(s.n_devices, 0);
	cr_assert_eq(s.n_counter_sets, 1);
	c = &s.counter_sets[0];
	cr_assert_str_eq(c->name, "gpu-0-counter-set");
	cr_assert_str_eq(c->driver, "gpu.nvidia.com");
	cr_assert_str_eq(c->pool, "node-1");
	cr_assert_eq(c->n_counters, 10);
	cr_assert_str_eq(label(c->counters, c->n_counters, "memory"), "40Gi",
			 "as written, not in bytes");
	cr_assert_str_eq(label(c->counters, c->n_counters, "multiprocessors"), "98");
	cr_assert_str_eq(label(c->counters, c->n_counters, "memory-slice-7"), "1");
	cr_assert_eq(c->n_users, 0);
}

Test(dra_facts, consumed_counters)
{
	struct inventory_slice s;
	const struct pool_counter_use *u;

	cr_assert_eq(dra_slice_facts(parse(partitions_json), &A, &s), 0);
	cr_assert_eq(s.n_counter_sets, 0);
	cr_assert_eq(s.n_devices, 2);
	cr_assert_eq(s.devices[0].n_consumes, 1);
	u = &s.devices[1].consumes[0];
	cr_assert_eq(s.devices[1].n_consumes, 1);
	cr_assert_str_eq(u->set, "gpu-0-counter-set");
	cr_assert_eq(u->n_counters, 3);
	cr_assert_str_eq(label(u->counters, u->n_counters, "multiprocessors"), "14");
	cr_assert_str_eq(label(u->counters, u->n_counters, "memory"), "5Gi");
	cr_assert_str_eq(label(u->counters, u->n_counters, "memory-slice-0"), "1");
}

Test(dra_facts, bad_counters)
{
	static const char *const bad[] = {
		/* sharedCounters not a list, a set without a name, counters
		 * empty, not an object, a value that is no quantity */
		"{\"sharedCounters\": {}}",
		"{\"sharedCounters\": [{\"counters\": {\"c\": {\"value\": \"1\"}}}]}",
		"{\"sharedCounters\": [{\"name\": \"s\", \"counters\": {}}]}",
		"{\"sharedCounters\": [{\"name\": \"s\", \"counters\": []}]}",
		"{\"sharedCounters\": [{\"name\": \"s\", \"counters\": {\"c\": {\"value\": \"x\"}}}]}",
		"{\"sharedCounters\": [{\"name\": \"s\", \"counters\": {\"c\": {}}}]}",
		"{\"devices\": [{\"name\": \"d\", \"consumesCounters\": {}}]}",
		"{\"devices\": [{\"name\": \"d\", \"consumesCounters\": [{\"counters\":"
		" {\"c\": {\"value\": \"1\"}}}]}]}",
		"{\"devices\": [{\"name\": \"d\", \"consumesCounters\": [{\"counterSet\": \"s\","
		" \"counters\": {\"c\": {\"value\": \"-1\"}}}]}]}",
	};
	struct inventory_slice s;
	char text[512];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		json_t *o, *part = json_loads(bad[i], 0, NULL);

		snprintf(text, sizeof(text),
			 "{\"metadata\": {\"name\": \"s\"}, \"spec\": {\"driver\": \"d\","
			 " \"pool\": {\"name\": \"p\"}}}");
		o = parse(text);
		cr_assert(part, "bad test JSON: %s", bad[i]);
		json_object_update(json_object_get(o, "spec"), part);
		json_decref(part);
		cr_assert_eq(dra_slice_facts(o, &A, &s), -1, "%s", bad[i]);
	}
}

/* Over the API's counter limits: refused. */
Test(dra_facts, hostile_counter_sizes)
{
	json_t *o = parse("{\"metadata\": {\"name\": \"s\"}, \"spec\": {\"driver\": \"d\","
			  " \"pool\": {\"name\": \"p\"}}}");
	json_t *spec = json_object_get(o, "spec");
	json_t *sets = json_array(), *many = json_object(), *uses = json_array();
	json_t *devs = json_array();
	struct inventory_slice s;
	char name[32];

	for (int i = 0; i < DRA_COUNTER_SET_MAX_COUNTERS; i++) {
		snprintf(name, sizeof(name), "c%d", i);
		json_object_set_new(many, name, json_pack("{s:s}", "value", "1"));
	}
	for (int i = 0; i < DRA_SLICE_MAX_COUNTER_SETS; i++) {
		snprintf(name, sizeof(name), "gpu-%d-counter-set", i);
		json_array_append_new(sets, json_pack("{s:s,s:O}", "name", name, "counters",
						      many));
	}
	json_object_set_new(spec, "sharedCounters", sets);
	cr_assert_eq(dra_slice_facts(o, &A, &s), 0);
	cr_assert_eq(s.n_counter_sets, DRA_SLICE_MAX_COUNTER_SETS);
	json_array_append_new(sets, json_pack("{s:s,s:O}", "name", "one-more", "counters",
					      many));
	cr_assert_eq(dra_slice_facts(o, &A, &s), -1, "9 sets");
	json_array_remove(sets, DRA_SLICE_MAX_COUNTER_SETS);
	json_object_set_new(many, "c-one-more", json_pack("{s:s}", "value", "1"));
	cr_assert_eq(dra_slice_facts(o, &A, &s), -1, "33 counters in a set");
	json_object_del(spec, "sharedCounters");

	/* A device: at most 2 consumptions of at most 32 counters. */
	json_object_del(many, "c-one-more");
	for (int i = 0; i < DRA_DEVICE_MAX_CONSUMES; i++) {
		snprintf(name, sizeof(name), "gpu-%d-counter-set", i);
		json_array_append_new(uses, json_pack("{s:s,s:O}", "counterSet", name,
						      "counters", many));
	}
	json_array_append_new(devs, json_pack("{s:s,s:O}", "name", "d", "consumesCounters",
					      uses));
	json_object_set_new(spec, "devices", devs);
	cr_assert_eq(dra_slice_facts(o, &A, &s), 0);
	cr_assert_eq(s.devices[0].n_consumes, DRA_DEVICE_MAX_CONSUMES);
	json_object_set_new(many, "c-one-more", json_pack("{s:s}", "value", "1"));
	json_object_set_new(json_array_get(uses, 0), "counters", json_deep_copy(many));
	json_object_set(json_array_get(devs, 0), "consumesCounters", uses);
	cr_assert_eq(dra_slice_facts(o, &A, &s), -1, "33 counters consumed");
	json_object_del(many, "c-one-more");
	json_object_set_new(json_array_get(uses, 0), "counters", json_deep_copy(many));
	json_array_append_new(uses, json_pack("{s:s,s:O}", "counterSet", "third",
					      "counters", many));
	json_object_set(json_array_get(devs, 0), "consumesCounters", uses);
	cr_assert_eq(dra_slice_facts(o, &A, &s), -1, "3 consumptions");
	json_array_remove(uses, 2);
	json_object_set(json_array_get(devs, 0), "consumesCounters", uses);

	/* A slice of which a device consumes counters holds at most 64. */
	for (int i = 1; i < DRA_SLICE_MAX_ADVANCED_DEVICES; i++) {
		snprintf(name, sizeof(name), "gpu-%d", i);
		json_array_append_new(devs, json_pack("{s:s}", "name", name));
	}
	cr_assert_eq(dra_slice_facts(o, &A, &s), 0);
	cr_assert_eq(s.n_devices, DRA_SLICE_MAX_ADVANCED_DEVICES);
	json_array_append_new(devs, json_pack("{s:s}", "name", "one-more"));
	cr_assert_eq(dra_slice_facts(o, &A, &s), -1, "65 devices, one consuming");
	json_decref(uses);
	json_decref(many);
}
