/*
 * report/quotas.c: the GPUQuota objects a tenant's team reads, from the
 * pool report's numbers, and the plan that decides what to write.
 */
#include "policy/policy.h"
#include "tests/unit/test_policy.h"
#include "usage/usage.h"
#include "base/strbuf.h"
#include "report/pool-report.h"
#include "report/quotas.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

static const char POLICY[] =
	"version: 1\n"
	"flavors:\n"
	"  - {name: h100, resource: nvidia.com/gpu, sharing: exclusive, gpusPerNode: 8}\n"
	"  - {name: l4, resource: nvidia.com/gpu.shared, sharing: time-slicing, gpusPerNode: 8}\n"
	"classes:\n"
	"  - {name: small, flavor: h100, gpus: 1, maxGpus: 8}\n"
	"tenants:\n"
	"  - {name: research, namespaces: [research, research-dev, 'team-*'], cohort: ml,\n"
	"     quota: [{flavor: h100, nominal: 32}, {flavor: l4, nominal: 8}]}\n"
	"  - {name: prod, namespaces: [prod], cohort: ml,\n"
	"     quota: [{flavor: h100, nominal: 8}]}\n"
	"  - {name: Odd_Name, namespaces: [odd], quota: [{flavor: h100, nominal: 1}]}\n";

/* v says what the JSON text want says (key order aside). */
static void expect_json(const json_t *v, const char *want)
{
	json_t *w = json_loads(want, JSON_DECODE_ANY, NULL);
	char *got = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_SORT_KEYS);

	cr_assert_not_null(w, "bad expectation %s", want);
	cr_expect(json_equal(v, w), "got %s, want %s", got ? got : "(null)", want);
	free(got);
	json_decref(w);
}

/* The store with prod using 12 h100 (4 over its nominal 8). */
static struct usage_store *store_with(const char *tenant, const char *flavor,
				      int64_t units)
{
	struct usage_store *u = usage_memory_new(&(struct usage_memory_config){0});
	struct usage_item it = {.uid = "u1", .kind = USAGE_PODS, .namespace = "x",
				.name = "p", .tenant = tenant, .flavor = flavor,
				.per_pod = units, .slots = 1, .units = units,
				.active = true};

	cr_assert_not_null(u);
	usage_observe(u, &it);
	return u;
}

Test(quotas, status_from_the_pool_numbers_with_waiting_pods)
{
	struct policy *p = test_policy(POLICY);
	struct usage_store *u = store_with("prod", "h100", 12);
	json_t *tenants = pool_report_tenants(p, NULL, u), *waiting = json_object();
	json_t *st;

	cr_assert_not_null(tenants);
	cr_assert_eq(quotas_waiting_add(waiting, "prod", "h100", 4), 0);
	cr_assert_eq(quotas_waiting_add(waiting, "prod", "h100", 2), 0);
	cr_assert_eq(quotas_waiting_add(waiting, "research", "l4", 1), 0);
	st = quotas_status_new(json_array_get(tenants, 1), waiting, "2026-12-05T03:00:00Z");
	expect_json(st, "{\"cohort\":\"ml\",\"flavors\":[{\"borrowed\":4,\"flavor\":\"h100\","
			"\"lent\":0,\"nominal\":8,\"used\":12,\"waitingGPUs\":6,"
			"\"waitingPods\":2}],\"tenant\":\"prod\","
			"\"updated\":\"2026-12-05T03:00:00Z\",\"used\":\"h100 12/8 (+4 "
			"borrowed)\",\"waiting\":2}");
	json_decref(st);
	/* research lends prod's 4 from its unused 32 */
	st = quotas_status_new(json_array_get(tenants, 0), waiting, "t");
	cr_expect_str_eq(json_string_value(json_object_get(st, "used")),
			 "h100 0/32 (4 lent), l4 0/8");
	cr_expect_eq(json_integer_value(json_object_get(st, "waiting")), 1);
	json_decref(st);
	json_decref(waiting);
	json_decref(tenants);
	usage_free(u);
	policy_free(p);
}

Test(quotas, one_object_per_namespace_of_a_tenant_named_after_it)
{
	struct policy *p = test_policy(POLICY);
	json_t *tenants = pool_report_tenants(p, NULL, NULL);
	json_t *wanted = quotas_wanted_new(p, tenants, NULL, NULL, "t");
	json_t *o;

	cr_assert_not_null(wanted);
	/* no glob team-*, no Odd_Name (not an object name) */
	cr_expect_eq(json_object_size(wanted), 3);
	cr_expect_not_null(json_object_get(wanted, "research/research"));
	cr_expect_not_null(json_object_get(wanted, "research-dev/research"));
	o = json_object_get(wanted, "prod/prod");
	cr_assert_not_null(o);
	expect_json(json_object_get(o, "metadata"),
		    "{\"labels\":{\"app.kubernetes.io/managed-by\":\"gpugate\"},"
		    "\"name\":\"prod\",\"namespace\":\"prod\"}");
	cr_expect_str_eq(json_string_value(json_object_get(o, "kind")), "GPUQuota");
	cr_expect_str_eq(json_string_value(json_object_get(json_object_get(o, "status"),
							   "used")),
			 "h100 0/8");
	json_decref(wanted);
	/* the cluster's namespaces: globs match, absent ones have none, a
	 * namespace of no tenant has none */
	{
		json_t *names = json_pack("[s, s, s, s, s]", "research", "team-a", "odd",
					  "kube-system", "prod");

		wanted = quotas_wanted_new(p, tenants, names, NULL, "t");
		cr_assert_not_null(wanted);
		cr_expect_eq(json_object_size(wanted), 3);
		cr_expect_not_null(json_object_get(wanted, "research/research"));
		cr_expect_not_null(json_object_get(wanted, "team-a/research"));
		cr_expect_not_null(json_object_get(wanted, "prod/prod"));
		json_decref(names);
	}
	json_decref(wanted);
	json_decref(tenants);
	policy_free(p);
}

static json_t *known_of(const json_t *wanted, const char *key, const char *rv)
{
	json_t *o = json_deep_copy(json_object_get(wanted, key));
	json_t *meta = json_object_get(o, "metadata");

	cr_assert_not_null(o);
	json_object_set_new(meta, "resourceVersion", json_string(rv));
	json_object_set_new(meta, "uid", json_string("uid-1"));
	return o;
}

Test(quotas, plan_writes_only_what_changed)
{
	struct policy *p = test_policy(POLICY);
	json_t *tenants = pool_report_tenants(p, NULL, NULL);
	json_t *before = quotas_wanted_new(p, tenants, NULL, NULL, "2026-12-05T03:00:00Z");
	json_t *known = json_array(), *after, *stale;
	struct usage_store *u = store_with("prod", "h100", 3);
	struct quotas_plan pl;

	json_array_append_new(known, known_of(before, "research/research", "7"));
	json_array_append_new(known, known_of(before, "prod/prod", "8"));
	stale = known_of(before, "prod/prod", "9");
	json_object_set_new(json_object_get(stale, "metadata"), "namespace",
			    json_string("gone"));
	json_array_append_new(known, stale);
	json_decref(tenants);
	/* a later time alone is no change; prod's usage is */
	tenants = pool_report_tenants(p, NULL, u);
	after = quotas_wanted_new(p, tenants, NULL, NULL, "2026-12-05T03:00:09Z");
	cr_assert_eq(quotas_plan_make(after, known, &pl), 0);
	cr_expect_eq(pl.unchanged, 1); /* research/research */
	cr_assert_eq(json_array_size(pl.create), 1);
	expect_json(json_object_get(json_object_get(json_array_get(pl.create, 0),
						    "metadata"),
				    "namespace"),
		    "\"research-dev\"");
	cr_assert_eq(json_array_size(pl.update), 1);
	expect_json(json_object_get(json_array_get(pl.update, 0), "metadata"),
		    "{\"labels\":{\"app.kubernetes.io/managed-by\":\"gpugate\"},"
		    "\"name\":\"prod\",\"namespace\":\"prod\",\"resourceVersion\":\"8\","
		    "\"uid\":\"uid-1\"}");
	cr_expect_str_eq(json_string_value(json_object_get(
				 json_object_get(json_array_get(pl.update, 0), "status"), "used")),
			 "h100 3/8");
	cr_assert_eq(json_array_size(pl.remove), 1);
	expect_json(json_object_get(json_object_get(json_array_get(pl.remove, 0),
						    "metadata"),
				    "namespace"),
		    "\"gone\"");
	quotas_plan_release(&pl);
	json_decref(after);
	json_decref(known);
	json_decref(before);
	json_decref(tenants);
	usage_free(u);
	policy_free(p);
}

Test(quotas, status_same_ignores_only_the_time)
{
	json_t *a = json_pack("{s:s, s:i, s:s}", "used", "h100 1/8", "waiting", 0,
			      "updated", "1");
	json_t *b = json_pack("{s:s, s:i, s:s}", "used", "h100 1/8", "waiting", 0,
			      "updated", "2");
	json_t *c = json_pack("{s:s, s:i}", "used", "h100 1/8", "waiting", 1);
	json_t *d = json_pack("{s:s, s:i, s:s, s:s}", "used", "h100 1/8", "waiting", 0,
			      "updated", "1", "cohort", "ml");

	cr_expect(quotas_status_same(a, b));
	cr_expect_not(quotas_status_same(a, c));
	cr_expect_not(quotas_status_same(a, d));
	cr_expect_not(quotas_status_same(d, a));
	cr_expect_not(quotas_status_same(a, NULL));
	json_decref(a);
	json_decref(b);
	json_decref(c);
	json_decref(d);
}

Test(quotas, text_table_and_usage_from_the_objects)
{
	struct policy *p = test_policy(POLICY);
	struct usage_store *u = store_with("prod", "h100", 12);
	json_t *tenants = pool_report_tenants(p, NULL, u);
	json_t *wanted = quotas_wanted_new(p, tenants, NULL, NULL, "2026-12-05T03:00:00Z");
	json_t *items = json_array();
	struct usage_store *back = usage_memory_new(&(struct usage_memory_config){0});
	struct strbuf sb;

	/* the tenant's objects of two namespaces, as a list gives them */
	json_array_append(items, json_object_get(wanted, "prod/prod"));
	json_array_append(items, json_object_get(wanted, "research/research"));
	json_array_append(items, json_object_get(wanted, "research-dev/research"));
	strbuf_init(&sb, 1u << 20);
	cr_assert_eq(quotas_text(items, &sb), 0);
	cr_expect_str_eq(sb.buf,
		"TENANT               FLAVOR                 USED  NOMINAL  BORROWED   LENT  WAITING  UPDATED\n"
		"prod                 h100                     12        8         4      0        0  2026-12-05T03:00:00Z\n"
		"research             h100                      0       32         0      4        0  2026-12-05T03:00:00Z\n"
		"research             l4                        0        8         0      0        0  2026-12-05T03:00:00Z\n"
		"research             h100                      0       32         0      4        0  2026-12-05T03:00:00Z\n"
		"research             l4                        0        8         0      0        0  2026-12-05T03:00:00Z\n");
	strbuf_release(&sb);
	/* what explain judges against: prod's 12, nothing else */
	cr_assert_not_null(back);
	cr_expect_eq(quotas_observe(back, items), 1);
	cr_expect_eq(usage_used(back, "prod", "h100"), 12);
	cr_expect_eq(usage_used(back, "research", "h100"), 0);
	/* read twice (several namespaces), counted once */
	quotas_observe(back, items);
	cr_expect_eq(usage_used(back, "prod", "h100"), 12);
	usage_free(back);
	json_decref(items);
	json_decref(wanted);
	json_decref(tenants);
	usage_free(u);
	policy_free(p);
}

/* With the pool known, each flavor says how much of its nominal quota
 * the usable nodes back now (policy/capacity.h), and the column says what
 * is not backed. */
Test(quotas, status_says_what_of_the_nominal_is_not_backed)
{
	json_t *tr = json_pack("{s:s, s:[{s:s, s:i, s:i, s:i, s:i, s:i, s:i}, "
			       "{s:s, s:i, s:i, s:i, s:i, s:i, s:i}]}",
			       "name", "research", "quota", "flavor", "h100", "used", 8,
			       "nominal", 32, "borrowed", 0, "lent", 0, "backed", 24,
			       "notBacked", 8, "flavor", "l4", "used", 0, "nominal", 8,
			       "borrowed", 0, "lent", 0, "backed", 8, "notBacked", 0);
	json_t *st;

	cr_assert_not_null(tr);
	st = quotas_status_new(tr, NULL, "t");
	expect_json(st, "{\"flavors\":[{\"backed\":24,\"borrowed\":0,\"flavor\":"
			"\"h100\",\"lent\":0,\"nominal\":32,\"notBacked\":8,"
			"\"used\":8,\"waitingGPUs\":0,\"waitingPods\":0},"
			"{\"backed\":8,\"borrowed\":0,\"flavor\":\"l4\",\"lent\":0,"
			"\"nominal\":8,\"notBacked\":0,\"used\":0,\"waitingGPUs\":0,"
			"\"waitingPods\":0}],\"tenant\":\"research\",\"updated\":\"t\","
			"\"used\":\"h100 8/32 (8 not backed), l4 0/8\",\"waiting\":0}");
	json_decref(st);
	json_decref(tr);
}
