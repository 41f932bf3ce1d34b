/*
 * reclaimWithinCohort LowerPriority at admission, through the seam
 * (usage_decide(), usage/usage.c) over the memory backend: a lender whose
 * nominal units are lent out is admitted only when the borrowing workloads
 * of lower priority than its request can give them back; otherwise
 * QUOTA_RECLAIM_SHORT and nothing is held (Kueue keeps it pending).
 */
#include "policy/decide.h"
#include "policy/policy.h"
#include "policy/quota.h"
#include "usage/usage.h"
#include "tests/unit/test_policy.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

static const char policy_yaml[] =
	"version: 1\n"
	"flavors:\n"
	"  - {name: h100, resource: nvidia.com/gpu, sharing: exclusive, gpusPerNode: 8}\n"
	"classes:\n"
	"  - {name: one, flavor: h100, gpus: 1, maxGpus: 8}\n"
	"tenants:\n"
	"  - {name: lender, namespaces: [lender], cohort: lab,\n"
	"     reclaimWithinCohort: LowerPriority, quota: [{flavor: h100, nominal: 8}]}\n"
	"  - {name: loose, namespaces: [loose], cohort: lab, mode: warn,\n"
	"     reclaimWithinCohort: LowerPriority, quota: [{flavor: h100, nominal: 8}]}\n"
	"  - {name: bor, namespaces: [bor], cohort: lab, quota: [{flavor: h100, nominal: 0}]}\n";

static struct policy *P;
static struct usage_store *L;

/* bor borrows 8 of the 16 the lenders lend: a pod at priority 10 and one
 * at priority 100, 4 GPUs each, both preemptible (admitted borrowing). */
static void setup(void)
{
	static const int32_t prio[2] = {10, 100};
	static const char *const uid[2] = {"low", "high"};
	struct usage_memory_config cfg = {.reservation_ttl_ms = 30000};

	P = test_policy(policy_yaml);
	L = usage_memory_new(&cfg);
	for (int i = 0; i < 2; i++) {
		struct usage_item it = {
			.uid = uid[i], .kind = USAGE_PODS, .namespace = "bor",
			.name = uid[i], .tenant = "bor", .flavor = "h100", .per_pod = 4,
			.slots = 1, .units = 4, .active = true, .priority = prio[i],
			.created_ms = 1700000000000 + i, .preemptible = true,
		};

		usage_observe(L, &it);
	}
	/* The lenders use everything they do not lend. */
	for (int i = 0; i < 2; i++) {
		const char *t = i ? "loose" : "lender";
		char u[16];
		struct usage_item it = {
			.kind = USAGE_PODS, .namespace = t, .tenant = t, .flavor = "h100",
			.per_pod = 4, .slots = 1, .units = 4, .active = true,
		};

		snprintf(u, sizeof(u), "%s-own", t);
		it.uid = it.name = u;
		usage_observe(L, &it);
	}
}

static void teardown(void)
{
	usage_free(L);
	policy_free(P);
}

TestSuite(lower_priority, .init = setup, .fini = teardown);

/* tenant asks for 4 more at `priority`: its last 4 nominal units, which
 * bor holds (the cohort's 16 - 8 used by the lenders - 8 by bor = 0). */
static void ask(const char *tenant, int32_t priority, bool reserve,
		struct quota_result *out)
{
	struct workload wl = {.kind = WL_POD, .op = WL_CREATE, .namespace = tenant,
			      .name = "ask", .uid = "ask-uid", .request_uid = "r"};
	struct quota_claim c = {
		.needed = true, .tenant = policy_tenant_find(P, tenant),
		.flavor = policy_flavor_find(P, "h100"), .units = 4, .per_pod = 4,
		.pods = 1, .may_borrow = true, .priority = priority,
	};

	usage_decide(L, P, &wl, &c, reserve,
		     c.tenant->mode != POLICY_MODE_ENFORCE, out);
}

Test(lower_priority, short_when_only_higher_priorities_borrow_and_nothing_is_held)
{
	struct quota_result q;

	ask("lender", 10, true, &q);
	cr_assert_eq(q.position, QUOTA_RECLAIM_SHORT, "%s", quota_position_name(q.position));
	cr_expect_eq(q.reclaim, 4);
	cr_expect_eq(q.below, 10);
	cr_expect_eq(q.reclaimable, 0, "the pod at 10 is not below 10");
	cr_expect_eq(usage_used(L, "lender", "h100"), 4, "a denial holds nothing");
	/* The peek of /mutate says the same. */
	ask("lender", 10, false, &q);
	cr_expect_eq(q.position, QUOTA_RECLAIM_SHORT);
}

Test(lower_priority, admitted_when_a_lower_priority_borrower_covers_it)
{
	struct quota_result q;

	ask("lender", 11, false, &q);
	cr_expect_eq(q.position, QUOTA_NOMINAL, "%s", quota_position_name(q.position));
	ask("lender", 11, true, &q);
	cr_assert_eq(q.position, QUOTA_NOMINAL, "%s", quota_position_name(q.position));
	cr_expect_eq(q.reclaim, 4);
	cr_expect_eq(usage_used(L, "lender", "h100"), 8, "held");
	/* Both lenders back on their whole nominal: 8 to take back, and the
	 * pod at 10 alone is not enough below 50 ... */
	ask("loose", 50, false, &q);
	cr_expect_eq(q.position, QUOTA_RECLAIM_SHORT);
	cr_expect_eq(q.reclaimable, 4);
	/* ... but both pods are below 101. */
	ask("loose", 101, false, &q);
	cr_expect_eq(q.position, QUOTA_NOMINAL);
}

Test(lower_priority, warn_mode_holds_the_units_and_says_so)
{
	struct quota_result q;

	ask("loose", 5, true, &q);
	cr_expect_eq(q.position, QUOTA_RECLAIM_SHORT);
	cr_expect_eq(usage_used(L, "loose", "h100"), 8, "warn mode admits: held");
}

Test(lower_priority, a_request_that_needs_nothing_back_is_not_weighed)
{
	struct quota_result q;

	/* bor gives back the pod at 100: the cohort lends 4 again. */
	usage_forget(L, "high");
	ask("lender", 0, true, &q);
	cr_expect_eq(q.position, QUOTA_NOMINAL);
	cr_expect_eq(q.reclaim, 0);
}
