/*
 * DRA ResourceClaims in the memory usage backend (usage/memory-backend.c):
 * a claim reserved at /validate becomes the claim the feed observes, and a
 * relist of one kind forgets only that kind.
 */
#include "base/diag.h"
#include "policy/decide.h"
#include "usage/usage.h"
#include "tests/unit/test_policy.h"

#include <criterion/criterion.h>
#include <string.h>

static const char policy_yaml[] =
	"version: 1\n"
	"flavors:\n"
	"  - {name: h100, resource: nvidia.com/gpu, sharing: exclusive, gpusPerNode: 8,\n"
	"     deviceClassNames: [gpu.nvidia.com]}\n"
	"classes: []\n"
	"tenants:\n"
	"  - {name: a, namespaces: [a], quota: [{flavor: h100, nominal: 10}]}\n";

static struct policy *P;
static uint64_t fake_now;

static uint64_t now_ms(void)
{
	return fake_now;
}

static void setup(void)
{
	P = test_policy(policy_yaml);
	fake_now = 1000;
}

static void teardown(void)
{
	policy_free(P);
}

TestSuite(ledger_claims, .init = setup, .fini = teardown);

/* /validate of a claim of `units` in namespace a: reserves it. */
static enum quota_position reserve_claim(struct usage_store *l, const char *uid,
					 int64_t units)
{
	struct workload wl = {.kind = WL_CLAIM, .op = WL_CREATE, .namespace = "a",
			      .name = uid, .uid = uid, .request_uid = "r"};
	struct quota_claim c = {
		.needed = true, .tenant = policy_tenant_find(P, "a"),
		.flavor = policy_flavor_find(P, "h100"), .units = units,
		.per_pod = (unsigned)units, .pods = 1,
	};
	struct quota_result q;

	usage_decide(l, P, &wl, &c, true, false, &q);
	return q.position;
}

static struct usage_item item(const char *uid, enum usage_kind kind,
			       int64_t units)
{
	return (struct usage_item){.uid = uid, .kind = kind, .namespace = "a",
				   .name = uid, .tenant = "a", .flavor = "h100",
				   .per_pod = units, .slots = 1, .units = units,
				   .active = true};
}

Test(ledger_claims, a_reserved_claim_is_the_claim_the_feed_observes)
{
	struct usage_memory_config cfg = {.reservation_ttl_ms = 30000, .now_ms = now_ms};
	struct usage_store *l = usage_memory_new(&cfg);
	struct usage_item c = item("c1", USAGE_CLAIMS, 2);

	cr_assert_eq(reserve_claim(l, "c1", 2), QUOTA_NOMINAL);
	cr_assert_eq(usage_used(l, "a", "h100"), 2);
	usage_observe(l, &c);
	cr_assert_eq(usage_used(l, "a", "h100"), 2, "one claim, counted once");
	cr_assert_eq(usage_entries(l), 1);
	/* Observed: it no longer expires, it stays until it is deleted. */
	fake_now += 10 * 60 * 1000;
	cr_assert_eq(usage_expire(l), 0);
	usage_forget(l, "c1");
	cr_assert_eq(usage_used(l, "a", "h100"), 0);
	usage_free(l);
}

Test(ledger_claims, a_relist_forgets_only_its_own_kind)
{
	struct usage_memory_config cfg = {.reservation_ttl_ms = 30000, .now_ms = now_ms};
	struct usage_store *l = usage_memory_new(&cfg);
	struct usage_item pod = item("p1", USAGE_PODS, 1);
	struct usage_item job = item("j1", USAGE_JOBS, 3);
	struct usage_item claim = item("c1", USAGE_CLAIMS, 2);
	struct usage_item gone = item("c2", USAGE_CLAIMS, 4);

	usage_observe(l, &pod);
	usage_observe(l, &job);
	usage_observe(l, &claim);
	usage_observe(l, &gone);
	cr_assert_eq(usage_used(l, "a", "h100"), 10);
	usage_relist_begin(l, USAGE_CLAIMS);
	usage_observe(l, &claim);
	usage_relist_end(l, USAGE_CLAIMS);
	cr_assert_eq(usage_used(l, "a", "h100"), 6, "c2 was deleted meanwhile");
	usage_relist_begin(l, USAGE_PODS);
	usage_relist_end(l, USAGE_PODS);
	cr_assert_eq(usage_used(l, "a", "h100"), 5, "an empty pod list keeps the claim");
	usage_free(l);
}
