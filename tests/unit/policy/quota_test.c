/*
 * Quota arithmetic (policy/quota.c), table-driven.  The cohort "lab" has
 * three members with different lending and borrowing limits; "solo" is in
 * no cohort; "zero" has nominal 0 and lives on borrowed quota only.
 */
#include "base/diag.h"
#include "policy/policy.h"
#include "policy/quota.h"

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <string.h>

static const char policy_yaml[] =
	"version: 1\n"
	"flavors:\n"
	"  - {name: g, resource: x.io/g, sharing: exclusive, gpusPerNode: 64}\n"
	"  - {name: other, resource: x.io/o, sharing: exclusive, gpusPerNode: 64}\n"
	"classes: []\n"
	"tenants:\n"
	"  - name: a\n"
	"    namespaces: [a]\n"
	"    cohort: lab\n"
	"    quota: [{flavor: g, nominal: 10, borrowingLimit: 6}]\n"
	"  - name: b\n"
	"    namespaces: [b]\n"
	"    cohort: lab\n"
	"    quota: [{flavor: g, nominal: 8, lendingLimit: 3}]\n"
	"  - name: c\n"
	"    namespaces: [c]\n"
	"    cohort: lab\n"
	"    quota: [{flavor: g, nominal: 4}]\n"
	"  - name: zero\n"
	"    namespaces: [zero]\n"
	"    cohort: lab\n"
	"    quota: [{flavor: g, nominal: 0}]\n"
	"  - name: solo\n"
	"    namespaces: [solo]\n"
	"    quota: [{flavor: g, nominal: 5}]\n";

enum { A, B, C, ZERO, SOLO, NT };

struct qcase {
	char name[64];
	int tenant;
	int64_t used[NT];
	int64_t request;
	bool may_borrow;
	enum quota_position want;
	int64_t borrowed;
	int64_t can_lend;
	int64_t ceiling;
};

static int64_t used_now[NT];

static int64_t used_fn(const void *ctx, unsigned t, unsigned f)
{
	(void)ctx;
	return f == 0 ? used_now[t] : 0;
}

/*
 * Pools, from a's point of view with nothing used: b lends min(3, 8) = 3,
 * c lends 4, zero lends 0: 7.  a's ceiling: 10 + min(6, 7) = 16.
 * b's ceiling: 8 + a's 10 + c's 4 = 22 (no borrowing limit).
 */
static struct qcase cases[] = {
	{"fits nominal", A, {0}, 10, true, QUOTA_NOMINAL, 0, 6, 16},
	{"exactly nominal", A, {9}, 1, true, QUOTA_NOMINAL, 0, 6, 16},
	{"borrows the excess only", A, {8}, 4, true, QUOTA_BORROWED, 2, 6, 16},
	{"already borrowing: all of R borrowed", A, {12}, 2, true, QUOTA_BORROWED,
	 2, 4, 16},
	{"borrowing limit is the cap", A, {10}, 6, true, QUOTA_BORROWED, 6, 6, 16},
	{"over the borrowing limit", A, {10}, 7, true, QUOTA_OVER, 0, 6, 16},
	{"the cohort has less than the limit", A, {10, 8, 3}, 3, true, QUOTA_OVER,
	 0, 1, 16},
	{"a lender that uses its quota lends less", A, {10, 7, 0}, 5, true,
	 QUOTA_BORROWED, 5, 5, 16},
	{"... and no more", A, {10, 7, 0}, 6, true, QUOTA_OVER, 0, 5, 16},
	{"lending limit caps an idle lender", A, {10, 0, 4}, 4, true, QUOTA_OVER,
	 0, 3, 16},
	{"others' borrowing comes out of the pool first", A, {10, 0, 0, 5}, 3,
	 true, QUOTA_OVER, 0, 2, 16},
	{"never fits", A, {0}, 17, true, QUOTA_NEVER_FITS, 0, 6, 16},
	{"never fits, whatever is in use", A, {16}, 17, true, QUOTA_NEVER_FITS, 0,
	 0, 16},
	{"no borrowing limit: ceiling is the cohort", B, {0}, 22, true,
	 QUOTA_BORROWED, 14, 14, 22},
	{"nominal is never blocked by borrowers", B, {14, 3}, 5, true,
	 QUOTA_NOMINAL, 0, 0, 22},
	{"nominal 0 lives on borrowing", ZERO, {0}, 5, true, QUOTA_BORROWED, 5, 17,
	 17},
	{"may not borrow", A, {8}, 4, false, QUOTA_NOT_PREPARED, 2, 6, 16},
	{"no cohort: nominal only", SOLO, {[SOLO] = 3}, 2, true, QUOTA_NOMINAL, 0,
	 0, 5},
	{"no cohort: over", SOLO, {[SOLO] = 4}, 2, true, QUOTA_OVER, 0, 0, 5},
	{"no cohort: never fits", SOLO, {0}, 6, true, QUOTA_NEVER_FITS, 0, 0, 5},
	{"others' usage is not mine", SOLO, {[A] = 50}, 5, true, QUOTA_NOMINAL, 0,
	 0, 5},
};

ParameterizedTestParameters(quota, decides)
{
	return cr_make_param_array(struct qcase, cases,
				   sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct qcase *c, quota, decides)
{
	static const char *const names[] = {"a", "b", "c", "zero", "solo"};
	struct usage_view view = {.ctx = NULL, .used = used_fn};
	struct policy *p = NULL;
	struct quota_result r;
	struct diag d;

	diag_init(&d);
	cr_assert_eq(policy_parse("q.yaml", policy_yaml, strlen(policy_yaml), &p, &d),
		     0, "%s", diag_text(&d));
	memcpy(used_now, c->used, sizeof(used_now));
	quota_decide(p, policy_tenant_find(p, names[c->tenant]),
		     policy_flavor_find(p, "g"), c->request, c->may_borrow, &view, &r);
	cr_expect_eq(r.position, c->want, "%s: position %s", c->name,
		     quota_position_name(r.position));
	cr_expect_eq(r.borrowed, c->borrowed, "%s: borrowed %lld", c->name,
		     (long long)r.borrowed);
	cr_expect_eq(r.can_lend, c->can_lend, "%s: can_lend %lld", c->name,
		     (long long)r.can_lend);
	cr_expect_eq(r.ceiling, c->ceiling, "%s: ceiling %lld", c->name,
		     (long long)r.ceiling);
	cr_expect_eq(r.requested, c->request);
	cr_expect_eq(r.used, c->used[c->tenant]);
	policy_free(p);
}

Test(quota, no_quota_entry)
{
	static const char yaml[] =
		"version: 1\nflavors:\n"
		"  - {name: g, resource: x.io/g, sharing: exclusive, gpusPerNode: 8}\n"
		"classes: []\ntenants:\n  - {name: t, namespaces: [t]}\n";
	struct policy *p = NULL;
	struct quota_result r;
	struct diag d;

	diag_init(&d);
	cr_assert_eq(policy_parse("q.yaml", yaml, strlen(yaml), &p, &d), 0);
	quota_decide(p, policy_tenant_find(p, "t"), policy_flavor_find(p, "g"), 1,
		     true, &quota_no_usage, &r);
	cr_assert_eq(r.position, QUOTA_NO_QUOTA);
	cr_assert_str_eq(quota_position_name(r.position), "no-quota");
	policy_free(p);
}

Test(quota, other_flavors_do_not_count)
{
	struct policy *p = NULL;
	struct quota_result r;
	struct diag d;

	diag_init(&d);
	cr_assert_eq(policy_parse("q.yaml", policy_yaml, strlen(policy_yaml), &p, &d),
		     0);
	memset(used_now, 0, sizeof(used_now));
	used_now[SOLO] = 5;
	/* used_fn reports usage for flavor 0 only */
	quota_decide(p, policy_tenant_find(p, "solo"), policy_flavor_find(p, "g"), 1,
		     true, &(struct usage_view){.used = used_fn}, &r);
	cr_assert_eq(r.position, QUOTA_OVER);
	policy_free(p);
}

/* The worked example of docs/quota.md, on the example policy. */
static int64_t ex_research, ex_product;

static int64_t example_used(const void *ctx, unsigned t, unsigned f)
{
	const struct policy *p = ctx;
	const char *tenant = policy_tenant_at(p, t)->name;

	if (strcmp(policy_flavor_at(p, f)->name, "h100-80gb") != 0)
		return 0;
	return strcmp(tenant, "research") == 0  ? ex_research
	       : strcmp(tenant, "product") == 0 ? ex_product
						: 0;
}

Test(quota, worked_example_in_the_docs)
{
	struct policy *p = NULL;
	struct diag d;
	struct quota_result r;
	const struct policy_tenant *research, *product;
	const struct policy_flavor *h100;
	struct usage_view view = {.used = example_used};

	diag_init(&d);
	cr_assert_eq(policy_load("policy/examples/gpu-cluster.yaml", &p, &d), 0, "%s",
		     diag_text(&d));
	view.ctx = p;
	research = policy_tenant_find(p, "research");
	product = policy_tenant_find(p, "product");
	h100 = policy_flavor_find(p, "h100-80gb");

	ex_research = 24, ex_product = 4;
	quota_decide(p, research, h100, 8, true, &view, &r);
	cr_assert_eq(r.position, QUOTA_NOMINAL);
	ex_research = 32;
	quota_decide(p, research, h100, 8, true, &view, &r);
	cr_assert_eq(r.position, QUOTA_BORROWED);
	cr_assert_eq(r.borrowed, 8);
	ex_research = 40;
	quota_decide(p, research, h100, 8, true, &view, &r);
	cr_assert_eq(r.position, QUOTA_OVER);
	cr_assert_eq(r.can_lend, 0);
	quota_decide(p, product, h100, 16, true, &view, &r);
	cr_assert_eq(r.position, QUOTA_OVER);
	cr_assert_eq(r.can_lend, 0);
	ex_research = 24;
	quota_decide(p, product, h100, 16, true, &view, &r);
	cr_assert_eq(r.position, QUOTA_BORROWED);
	cr_assert_eq(r.borrowed, 4);
	quota_decide(p, research, h100, 64, true, &view, &r);
	cr_assert_eq(r.position, QUOTA_NEVER_FITS);
	cr_assert_eq(r.ceiling, 40);
	policy_free(p);
}

/*
 * Lent quota coming back (reclaimWithinCohort).  The cohort of policy_yaml,
 * with b Never and c Any: a borrows 6 (16 of nominal 10), which b (lending
 * at most 3 of its 8; 5 are guaranteed to it) and c (all of its 4) lend.
 */
static const char reclaim_yaml[] =
	"version: 1\n"
	"flavors:\n"
	"  - {name: g, resource: x.io/g, sharing: exclusive, gpusPerNode: 64}\n"
	"classes: []\n"
	"tenants:\n"
	"  - {name: a, namespaces: [a], cohort: lab,\n"
	"     quota: [{flavor: g, nominal: 10, borrowingLimit: 6}]}\n"
	"  - {name: b, namespaces: [b], cohort: lab, reclaimWithinCohort: Never,\n"
	"     quota: [{flavor: g, nominal: 8, lendingLimit: 3}]}\n"
	"  - {name: c, namespaces: [c], cohort: lab, reclaimWithinCohort: Any,\n"
	"     quota: [{flavor: g, nominal: 4}]}\n"
	"  - {name: zero, namespaces: [zero], cohort: lab, reclaimWithinCohort: LowerPriority,\n"
	"     quota: [{flavor: g, nominal: 0}]}\n"
	"  - {name: solo, namespaces: [solo], quota: [{flavor: g, nominal: 5}]}\n";

struct rcase {
	char name[64];
	int tenant;
	int64_t used[NT];
	int64_t request;
	enum quota_position want;
	int64_t reclaim;
	size_t n_borrowers;
	/* quota_cohort_deficit with the request counted (as if admitted) */
	int64_t deficit_after;
};

static struct rcase rcases[] = {
	{"the guaranteed part is never lent", B, {16}, 5, QUOTA_NOMINAL, 0, 0, 0},
	{"b's lendable part is lent: Never denies", B, {16}, 8, QUOTA_LENT_OUT, 2, 1,
	 2},
	{"... by as much as is lent of it", B, {16}, 7, QUOTA_LENT_OUT, 1, 1, 1},
	{"... and what is still free lends", B, {16}, 6, QUOTA_NOMINAL, 0, 0, 0},
	{"Any admits and reclaims", C, {16}, 4, QUOTA_NOMINAL, 3, 1, 3},
	{"Any: nothing lent, nothing reclaimed", C, {10}, 4, QUOTA_NOMINAL, 0, 0, 0},
	{"a pending reclaim is not counted twice", C, {16, 8}, 2, QUOTA_NOMINAL, 2, 1,
	 4},
	{"Never with a reclaim already pending", B, {16, 0, 4}, 5, QUOTA_NOMINAL, 0,
	 0, 3},
	{"a borrower reclaims nothing", A, {12}, 2, QUOTA_BORROWED, 0, 0, 0},
	{"no cohort: nothing to reclaim", SOLO, {[A] = 16, [SOLO] = 1}, 4,
	 QUOTA_NOMINAL, 0, 0, 0},
};

ParameterizedTestParameters(quota, reclaims)
{
	return cr_make_param_array(struct rcase, rcases,
				   sizeof(rcases) / sizeof(rcases[0]));
}

ParameterizedTest(struct rcase *c, quota, reclaims)
{
	static const char *const names[] = {"a", "b", "c", "zero", "solo"};
	struct usage_view view = {.ctx = NULL, .used = used_fn};
	const struct policy_tenant *t;
	struct policy *p = NULL;
	struct quota_result r;
	struct diag d;

	diag_init(&d);
	cr_assert_eq(policy_parse("q.yaml", reclaim_yaml, strlen(reclaim_yaml), &p, &d),
		     0, "%s", diag_text(&d));
	memcpy(used_now, c->used, sizeof(used_now));
	t = policy_tenant_find(p, names[c->tenant]);
	quota_decide(p, t, policy_flavor_find(p, "g"), c->request, true, &view, &r);
	cr_expect_eq(r.position, c->want, "%s: position %s", c->name,
		     quota_position_name(r.position));
	cr_expect_eq(r.reclaim, c->reclaim, "%s: reclaim %lld", c->name,
		     (long long)r.reclaim);
	cr_expect_eq(r.n_borrowers, c->n_borrowers, "%s: %zu borrowers", c->name,
		     r.n_borrowers);
	if (c->n_borrowers) {
		cr_expect_str_eq(r.borrowers[0].tenant, "a", "%s", c->name);
		cr_expect_eq(r.borrowers[0].borrowed, c->used[A] - 10, "%s", c->name);
	}
	used_now[c->tenant] += c->request;
	cr_expect_eq(quota_cohort_deficit(p, t->cohort_index, policy_flavor_find(p, "g"),
					  &view),
		     c->deficit_after, "%s: deficit after", c->name);
	policy_free(p);
}

Test(quota, reclaim_names)
{
	struct policy *p = NULL;
	struct diag d;

	diag_init(&d);
	cr_assert_eq(policy_parse("q.yaml", reclaim_yaml, strlen(reclaim_yaml), &p, &d),
		     0, "%s", diag_text(&d));
	cr_expect_eq(policy_tenant_find(p, "a")->reclaim, POLICY_RECLAIM_ANY, "default");
	cr_expect_eq(policy_tenant_find(p, "b")->reclaim, POLICY_RECLAIM_NEVER);
	cr_expect_eq(policy_tenant_find(p, "zero")->reclaim, POLICY_RECLAIM_LOWER_PRIORITY);
	cr_expect_str_eq(policy_reclaim_name(POLICY_RECLAIM_LOWER_PRIORITY), "LowerPriority");
	cr_expect_str_eq(quota_position_name(QUOTA_LENT_OUT), "lent-out");
	cr_expect_eq(quota_cohort_deficit(p, -1, policy_flavor_find(p, "g"), &quota_no_usage),
		     0);
	policy_free(p);
}
