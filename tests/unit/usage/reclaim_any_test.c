/*
 * Issue #26, through the seam (usage/usage.c) over the memory backend:
 * pods forged onto a Job nobody manages (beyond its gang, or the Job
 * holds nothing) are reclaim candidates of their own, and a lender with
 * reclaimWithinCohort Any is admitted "reclaims N" only when the
 * candidates can give the N back (else QUOTA_RECLAIM_SHORT, nothing held).
 */
#include "policy/decide.h"
#include "policy/policy.h"
#include "policy/quota.h"
#include "policy/reclaim.h"
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
	"     quota: [{flavor: h100, nominal: 8}]}\n"
	"  - {name: bor, namespaces: [bor], cohort: lab, quota: [{flavor: h100, nominal: 8}]}\n";

static struct policy *P;
static struct usage_store *L;

static void setup(void)
{
	struct usage_memory_config cfg = {.reservation_ttl_ms = 30000};

	P = test_policy(policy_yaml);
	L = usage_memory_new(&cfg);
}

static void teardown(void)
{
	usage_free(L);
	policy_free(P);
}

TestSuite(reclaim_any, .init = setup, .fini = teardown);

static void observe(const char *uid, bool job, int64_t per_pod, int64_t slots, bool active,
		    bool preemptible, const char *owner)
{
	struct usage_item it = {
		.uid = uid, .kind = job ? USAGE_JOBS : USAGE_PODS, .namespace = "bor",
		.name = uid, .tenant = "bor", .flavor = "h100", .per_pod = per_pod,
		.slots = slots, .units = per_pod * slots, .active = active,
		.owner_job_uid = owner, .created_ms = 1700000000000, .preemptible = preemptible,
	};

	usage_observe(L, &it);
}

struct found {
	const char *uid;
	bool candidate, owned;
	struct reclaim_candidate c;
};

static void find(void *ctx, const struct usage_workload *w)
{
	struct found *f = ctx;

	if (strcmp(w->uid, f->uid) != 0)
		return;
	f->owned = w->owned;
	f->candidate = usage_reclaim_candidate(w, 1, &f->c);
}

Test(reclaim_any, pods_forged_onto_a_job_nobody_manages_are_victims)
{
	struct found f = {.uid = "forged"};

	/* A Job (no controller manages it: spec.managedBy names none) created
	 * suspended holds nothing; the tenant makes its pods itself, with the
	 * Job as their controller: they hold theirs, owned. */
	observe("j", true, 8, 1, false, true, NULL);
	observe("forged", false, 8, 1, true, false, "j");
	observe("forged2", false, 8, 1, true, false, "j");
	cr_expect_eq(usage_used(L, "bor", "h100"), 16);
	usage_each_workload(L, find, &f);
	cr_assert(f.owned);
	cr_expect(f.candidate, "a pod its Job's gang does not cover is a victim of its own");
	cr_expect(f.c.preemptible);
	cr_expect_not(f.c.signalled);
	cr_expect_eq(f.c.units, 8);
	/* A pod naming a Job the ledger does not know: the same. */
	observe("orphan", false, 8, 1, true, false, "no-such-job");
	f = (struct found){.uid = "orphan"};
	usage_each_workload(L, find, &f);
	cr_expect(f.owned);
	cr_expect(f.candidate);
}

static void ask(struct quota_result *out, bool reserve)
{
	struct workload wl = {.kind = WL_POD, .op = WL_CREATE, .namespace = "lender",
			      .name = "ask", .uid = "ask-uid", .request_uid = "r"};
	struct quota_claim c = {
		.needed = true, .tenant = policy_tenant_find(P, "lender"),
		.flavor = policy_flavor_find(P, "h100"), .units = 8, .per_pod = 8,
		.pods = 1, .may_borrow = true, .priority = 0,
	};

	usage_decide(L, P, &wl, &c, reserve, false, out);
}

Test(reclaim_any, a_lender_is_admitted_only_for_what_can_be_taken_back)
{
	struct quota_result q;

	/* bor holds 16: its 8, and the lender's 8 borrowed by a pod that is
	 * not preemptible (admitted before it borrowed, say): nothing to take
	 * back. */
	observe("own", false, 8, 1, true, false, NULL);
	observe("kept", false, 8, 1, true, false, NULL);
	ask(&q, true);
	cr_assert_eq(q.position, QUOTA_RECLAIM_SHORT, "%s", quota_position_name(q.position));
	cr_expect(q.any_priority);
	cr_expect_eq(q.reclaim, 8);
	cr_expect_eq(q.reclaimable, 0);
	cr_expect_eq(usage_used(L, "lender", "h100"), 0, "a denial holds nothing");
	/* A preemptible borrower instead: admitted, reclaims 8. */
	usage_forget(L, "kept");
	observe("lent", false, 8, 1, true, true, NULL);
	ask(&q, false);
	cr_expect_eq(q.position, QUOTA_NOMINAL, "%s", quota_position_name(q.position));
	cr_expect_eq(q.reclaim, 8);
	ask(&q, true);
	cr_expect_eq(q.position, QUOTA_NOMINAL);
	cr_expect_eq(usage_used(L, "lender", "h100"), 8, "held");
}
