/*
 * controllers/victims.c: which workloads the reclaimer takes back first.
 * Cohort "lab": lender (nominal 8), bor (nominal 12); cohort "farm": f1
 * (4).  The lender is at its nominal quota and bor borrows 10: the
 * cohort holds 10 over its quota of g.
 */
#include "controllers/victims.h"
#include "policy/policy.h"
#include "policy/quota.h"
#include "tests/unit/test_policy.h"
#include "usage/usage.h"

#include <criterion/criterion.h>
#include <string.h>

#define POLICY(lender_reclaim)                                                    \
	"version: 1\n"                                                            \
	"flavors:\n"                                                              \
	"  - {name: g, resource: x.io/g, sharing: exclusive, gpusPerNode: 64}\n" \
	"classes: []\n"                                                           \
	"tenants:\n"                                                              \
	"  - {name: lender, namespaces: [l], cohort: lab" lender_reclaim ",\n"    \
	"     quota: [{flavor: g, nominal: 8}]}\n"                                \
	"  - {name: bor, namespaces: [b], cohort: lab, quota: [{flavor: g, nominal: 12}]}\n" \
	"  - {name: f1, namespaces: [f], cohort: farm, quota: [{flavor: g, nominal: 4}]}\n"

enum { LENDER, BOR, F1, NT };

static int64_t used_now[NT];

static int64_t used_fn(const void *ctx, unsigned t, unsigned f)
{
	(void)ctx;
	(void)f;
	return used_now[t];
}

static const struct usage_view view = {.ctx = NULL, .used = used_fn};

/* The workloads the round saw, in this order. */
enum { B_OLD, B_NEW, B_LOW, B_FIXED, B_SIG, F1_W, L_W, NW };
static const struct usage_workload W[NW] = {
	[B_OLD] = {.uid = "b-old", .kind = USAGE_PODS, .tenant = "bor", .units = 4,
		   .priority = 10, .created_ms = 1000, .preemptible = true},
	[B_NEW] = {.uid = "b-new", .kind = USAGE_PODS, .tenant = "bor", .units = 4,
		   .priority = 10, .created_ms = 2000, .preemptible = true},
	[B_LOW] = {.uid = "b-low", .kind = USAGE_JOBS, .tenant = "bor", .units = 2,
		   .priority = 5, .created_ms = 500, .preemptible = true},
	[B_FIXED] = {.uid = "b-fixed", .kind = USAGE_PODS, .tenant = "bor", .units = 8,
		     .priority = 0, .created_ms = 100, .preemptible = false},
	[B_SIG] = {.uid = "b-sig", .kind = USAGE_PODS, .tenant = "bor", .units = 4,
		   .priority = 50, .created_ms = 3000, .preemptible = true},
	[F1_W] = {.uid = "f1-w", .kind = USAGE_PODS, .tenant = "f1", .units = 9,
		  .priority = 0, .created_ms = 100, .preemptible = true},
	[L_W] = {.uid = "l-w", .kind = USAGE_PODS, .tenant = "lender", .units = 8,
		 .priority = 8, .created_ms = 100, .preemptible = true},
};

static void seen(const struct policy *p, struct victims_workload *ws, bool sig_recorded)
{
	for (size_t i = 0; i < NW; i++)
		ws[i] = (struct victims_workload){
			&W[i], policy_tenant_find(p, W[i].tenant), policy_flavor_find(p, "g"),
			i == B_SIG && sig_recorded};
	memset(used_now, 0, sizeof(used_now));
	used_now[LENDER] = 8;
	used_now[BOR] = 22; /* 4 + 4 + 2 + 8 + 4: 10 over its nominal */
	used_now[F1] = 9;
}

/* The choice for cohort on g among ws. */
static void choose(const struct policy *p, int cohort, const struct victims_workload *ws,
		   struct victims *v)
{
	cr_assert_eq(victims_choose(p, cohort, policy_flavor_find(p, "g"), &view, ws, NW, v),
		     0);
}

static void expect_indices(const size_t *got, size_t n, const size_t *want, size_t nw,
			   const char *what)
{
	cr_assert_eq(n, nw, "%s: %zu, not %zu", what, n, nw);
	for (size_t i = 0; i < n; i++)
		cr_expect_eq(got[i], want[i], "%s[%zu]: %zu, not %zu", what, i, got[i],
			     want[i]);
}

Test(victims, signalled_first_then_lowest_priority_then_most_recent_until_covered)
{
	struct policy *p = test_policy(POLICY(""));
	struct victims_workload ws[NW];
	struct victims v;
	/* Every workload of the cohort on g; not farm's. */
	const size_t cands[] = {B_OLD, B_NEW, B_LOW, B_FIXED, B_SIG, L_W};
	const size_t picked[] = {B_SIG, B_LOW, B_NEW};

	seen(p, ws, true);
	choose(p, policy_tenant_find(p, "bor")->cohort_index, ws, &v);
	cr_expect_eq(v.deficit, 10);
	expect_indices(v.candidates, v.n_candidates, cands, 6, "candidates");
	/* b-sig was asked already (gpugate's record), then b-low (priority
	 * 5), then of the two at priority 10 the more recent: 4 + 2 + 4 = 10.
	 * b-old stays; b-fixed is not preemptible; the lender lends nothing. */
	expect_indices(v.picked, v.n_picked, picked, 3, "picked");
	cr_expect(v.covered);
	victims_release(&v);
	policy_free(p);
}

Test(victims, a_signal_the_tenant_wrote_itself_does_not_count)
{
	struct policy *p = test_policy(POLICY(""));
	struct victims_workload ws[NW];
	struct usage_workload forged[NW];
	struct victims v;
	/* No record of b-sig: priority 50 goes last. */
	const size_t picked[] = {B_LOW, B_NEW, B_OLD};

	seen(p, ws, false);
	memcpy(forged, W, sizeof(W));
	forged[B_SIG].signalled_ms = 1234; /* its own annotation */
	for (size_t i = 0; i < NW; i++)
		ws[i].w = &forged[i];
	choose(p, 0, ws, &v);
	expect_indices(v.picked, v.n_picked, picked, 3, "picked");
	cr_expect(v.covered);
	victims_release(&v);
	policy_free(p);
}

Test(victims, lower_priority_takes_only_what_ranks_below_the_lenders)
{
	struct policy *p = test_policy(POLICY(", reclaimWithinCohort: LowerPriority"));
	struct victims_workload ws[NW];
	struct victims v;
	/* The lender's own workload has priority 8: only b-low (5) is
	 * below it, 2 of the 10: short. */
	const size_t picked[] = {B_LOW};

	seen(p, ws, true);
	choose(p, 0, ws, &v);
	cr_expect_eq(v.deficit, 10);
	expect_indices(v.picked, v.n_picked, picked, 1, "picked");
	cr_expect_not(v.covered);
	victims_release(&v);
	policy_free(p);
}

Test(victims, nothing_over_quota_picks_nobody)
{
	struct policy *p = test_policy(POLICY(""));
	struct victims_workload ws[NW];
	struct victims v;

	seen(p, ws, true);
	used_now[BOR] = 12; /* back on its nominal */
	choose(p, 0, ws, &v);
	cr_expect_eq(v.deficit, 0);
	cr_expect_eq(v.n_picked, 0);
	cr_expect_eq(v.n_candidates, 6, "the candidates all the same (their records "
					"are taken back)");
	cr_expect(v.covered);
	victims_release(&v);
	/* The farm: f1 holds 9 of its 4 (cohort "lab" is not its business):
	 * its one workload is taken back, not lab's. */
	{
		const size_t farm[] = {F1_W};

		choose(p, 1, ws, &v);
		cr_expect_eq(v.deficit, 5);
		expect_indices(v.candidates, v.n_candidates, farm, 1, "candidates");
		expect_indices(v.picked, v.n_picked, farm, 1, "picked");
		cr_expect(v.covered);
	}
	victims_release(&v);
	policy_free(p);
}
