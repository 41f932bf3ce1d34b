/*
 * policy/capacity.c: effective capacity — what the usable nodes of a
 * flavor hold against the nominal quotas promised, and which tenants'
 * nominal quota is not backed now.  Summaries and usage are plain values.
 */
#include "policy/capacity.h"
#include "policy/policy.h"
#include "policy/pool.h"
#include "policy/quota.h"
#include "tests/unit/test_policy.h"

#include <criterion/criterion.h>
#include <string.h>

static const char policy_yaml[] =
	"version: 1\n"
	"flavors:\n"
	"  - {name: h100, resource: nvidia.com/gpu, sharing: exclusive,\n"
	"     nodeSelector: [\"nvidia.com/gpu.product=H100\"], gpusPerNode: 8}\n"
	"  - {name: l4, resource: nvidia.com/gpu.shared, sharing: time-slicing,\n"
	"     gpusPerNode: 8}\n"
	"classes: []\n"
	"tenants:\n"
	"  - {name: research, namespaces: [research], cohort: ml,\n"
	"     quota: [{flavor: h100, nominal: 32}, {flavor: l4, nominal: 8}]}\n"
	"  - {name: prod, namespaces: [prod], cohort: ml,\n"
	"     quota: [{flavor: h100, nominal: 24}]}\n"
	"  - {name: intern, namespaces: [intern], quota: [{flavor: h100, nominal: 0}]}\n"
	"  - {name: solo, namespaces: [solo], quota: [{flavor: h100, nominal: 8}]}\n"
	"  - {name: web, namespaces: [web], quota: [{flavor: l4, nominal: 4}]}\n";

static struct policy *P;
static const struct policy_flavor *H100, *L4;

/* used[tenant][flavor] */
static int64_t used[5][2];

static int64_t used_fn(const void *ctx, unsigned t, unsigned f)
{
	(void)ctx;
	return used[t][f];
}

static const struct usage_view view = {NULL, used_fn};

static void setup(void)
{
	P = test_policy(policy_yaml);
	H100 = policy_flavor_find(P, "h100");
	L4 = policy_flavor_find(P, "l4");
	memset(used, 0, sizeof(used));
}

static void teardown(void)
{
	policy_free(P);
}

TestSuite(capacity, .init = setup, .fini = teardown);

/* A flavor of n usable nodes of 8 units, `out` excluded ones, `allocated`
 * units held on the usable ones. */
static struct pool_summary summary(const struct policy_flavor *f, size_t n,
				   size_t out, int64_t allocated)
{
	struct pool_summary s = {.flavor = f};

	s.nodes[POOL_USABLE] = n;
	s.nodes[POOL_CORDONED] = out;
	s.capacity = 8 * (int64_t)(n + out);
	s.allocatable = 8 * (int64_t)n;
	s.allocated = allocated;
	s.free = s.allocatable - allocated;
	s.excluded = 8 * (int64_t)out;
	return s;
}

static const struct capacity_tenant *find(const struct capacity_tenant *t, size_t n,
					  const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(t[i].tenant->name, name) == 0)
			return &t[i];
	cr_assert_fail("no tenant %s", name);
	return NULL;
}

Test(capacity, usable_against_promised_when_nodes_are_out)
{
	/* 8 nodes, 2 cordoned: 48 usable of 64 promised (32+24+0+8). */
	struct pool_summary s = summary(H100, 6, 2, 0);
	struct capacity_flavor c;
	struct capacity_tenant t[8];
	size_t n = 99;

	capacity_of(P, H100, &s, NULL, &c, t, &n);
	cr_expect(c.known);
	cr_expect_eq(c.flavor, H100);
	cr_expect_eq(c.capacity, 64);
	cr_expect_eq(c.usable, 48);
	cr_expect_eq(c.excluded, 16);
	cr_expect_eq(c.free, 48);
	cr_expect_eq(c.promised, 64);
	cr_expect_eq(c.unbacked, 16);
	/* nothing used: every nominal fits the 48 free on its own */
	cr_expect_eq(c.n_short, 0);
	cr_assert_eq(n, 4);
	cr_expect_str_eq(t[0].tenant->name, "research");
	cr_expect_str_eq(t[1].tenant->name, "prod");
	cr_expect_str_eq(t[2].tenant->name, "intern");
	cr_expect_str_eq(t[3].tenant->name, "solo");
	for (size_t i = 0; i < n; i++)
		cr_expect_eq(t[i].short_by, 0, "%s", t[i].tenant->name);
}

Test(capacity, unbacked_is_0_when_the_usable_nodes_hold_enough)
{
	struct pool_summary s = summary(H100, 8, 0, 20);
	struct capacity_flavor c;

	used[0][0] = 10; /* research */
	used[1][0] = 10; /* prod */
	capacity_of(P, H100, &s, &view, &c, NULL, NULL);
	cr_expect(c.known);
	cr_expect_eq(c.usable, 64);
	cr_expect_eq(c.promised, 64);
	cr_expect_eq(c.unbacked, 0);
	cr_expect_eq(c.n_short, 0);
	/* more usable than promised: still 0, never negative */
	s = summary(H100, 10, 0, 0);
	capacity_of(P, H100, &s, &view, &c, NULL, NULL);
	cr_expect_eq(c.unbacked, 0);
}

Test(capacity, short_by_per_tenant_with_usage)
{
	/* 6 usable nodes (48), 2 out; research holds 8, prod 24 (its
	 * nominal), solo 0; 16 units are free. */
	struct pool_summary s = summary(H100, 6, 2, 32);
	struct capacity_flavor c;
	struct capacity_tenant t[8];
	size_t n;

	used[0][0] = 8;
	used[1][0] = 24;
	capacity_of(P, H100, &s, &view, &c, t, &n);
	cr_expect_eq(c.free, 16);
	cr_expect_eq(c.unbacked, 16);
	/* research: 32 - 8 = 24 to go, 16 free: 8 not backed */
	cr_expect_eq(find(t, n, "research")->nominal, 32);
	cr_expect_eq(find(t, n, "research")->used, 8);
	cr_expect_eq(find(t, n, "research")->short_by, 8);
	/* prod holds all of its nominal: backed */
	cr_expect_eq(find(t, n, "prod")->short_by, 0);
	/* solo: 8 to go, 16 free */
	cr_expect_eq(find(t, n, "solo")->short_by, 0);
	cr_expect_eq(c.n_short, 1);
	/* a tenant over its nominal counts as holding its nominal */
	used[3][0] = 12; /* solo holds 12 of 8: 4 fewer free */
	s = summary(H100, 6, 2, 44);
	capacity_of(P, H100, &s, &view, &c, t, &n);
	cr_expect_eq(find(t, n, "solo")->short_by, 0);
	cr_expect_eq(find(t, n, "research")->short_by, 20);
}

Test(capacity, short_by_without_usage_is_the_nominal_beyond_the_free_units)
{
	/* 3 usable nodes (24), 5 out: research (32) is 8 short, prod (24)
	 * and solo (8) fit on their own. */
	struct pool_summary s = summary(H100, 3, 5, 0);
	struct capacity_flavor c;
	struct capacity_tenant t[8];
	size_t n;

	capacity_of(P, H100, &s, NULL, &c, t, &n);
	cr_expect_eq(c.unbacked, 40);
	cr_expect_eq(find(t, n, "research")->used, 0);
	cr_expect_eq(find(t, n, "research")->short_by, 8);
	cr_expect_eq(find(t, n, "prod")->short_by, 0);
	cr_expect_eq(find(t, n, "solo")->short_by, 0);
	cr_expect_eq(c.n_short, 1);
}

Test(capacity, units_borrowed_in_the_cohort_back_the_lenders_nominal)
{
	/* Every node there (64), all held: prod borrows 16 beyond its 24,
	 * research holds 16 of 32.  Lending is no shortage. */
	struct pool_summary s = summary(H100, 8, 0, 64);
	struct capacity_flavor c;
	struct capacity_tenant t[8];
	size_t n;

	used[0][0] = 16;
	used[1][0] = 40;
	used[3][0] = 8;
	capacity_of(P, H100, &s, &view, &c, t, &n);
	cr_expect_eq(c.unbacked, 0);
	cr_expect_eq(find(t, n, "research")->reclaimable, 16);
	cr_expect_eq(find(t, n, "research")->short_by, 0);
	cr_expect_eq(c.n_short, 0);
	/* Two nodes go (with 16 units of prod's pods): research is short of
	 * what the lost nodes held. */
	used[1][0] = 24;
	s = summary(H100, 6, 2, 48);
	capacity_of(P, H100, &s, &view, &c, t, &n);
	cr_expect_eq(c.unbacked, 16);
	cr_expect_eq(find(t, n, "research")->reclaimable, 0);
	cr_expect_eq(find(t, n, "research")->short_by, 16);
	/* solo is in no cohort: prod's borrowing backs nothing of solo's */
	used[1][0] = 40;
	used[3][0] = 0;
	s = summary(H100, 6, 2, 48);
	capacity_of(P, H100, &s, &view, &c, t, &n);
	cr_expect_eq(find(t, n, "solo")->reclaimable, 0);
	cr_expect_eq(find(t, n, "solo")->short_by, 8);
	/* borrowed units held on excluded nodes back nothing: at most what
	 * the usable nodes hold counts */
	cr_expect_eq(find(t, n, "research")->reclaimable, 16);
	s = summary(H100, 6, 2, 4);
	capacity_of(P, H100, &s, &view, &c, t, &n);
	cr_expect_eq(find(t, n, "research")->reclaimable, 4);
}

Test(capacity, a_flavor_no_node_has_is_unknown_not_unbacked)
{
	struct pool_summary s = {.flavor = H100};
	struct capacity_flavor c;
	struct capacity_tenant t[8];
	size_t n;

	used[0][0] = 4;
	capacity_of(P, H100, &s, &view, &c, t, &n);
	cr_expect_not(c.known);
	cr_expect_eq(c.promised, 64);
	cr_expect_eq(c.usable, 0);
	cr_expect_eq(c.unbacked, 0);
	cr_expect_eq(c.n_short, 0);
	cr_assert_eq(n, 4);
	cr_expect_eq(find(t, n, "research")->used, 4);
	for (size_t i = 0; i < n; i++)
		cr_expect_eq(t[i].short_by, 0);
	/* no summary at all: the same */
	capacity_of(P, H100, NULL, &view, &c, t, &n);
	cr_expect_not(c.known);
	cr_expect_eq(c.unbacked, 0);
	/* nodes that are all excluded are known: nothing usable backs it */
	s = summary(H100, 0, 2, 0);
	capacity_of(P, H100, &s, &view, &c, t, &n);
	cr_expect(c.known);
	cr_expect_eq(c.unbacked, 64);
	cr_expect_eq(find(t, n, "research")->short_by, 28);
}

Test(capacity, tenants_without_a_quota_entry_for_the_flavor_are_left_out)
{
	struct pool_summary s = summary(L4, 1, 0, 0);
	struct capacity_flavor c;
	struct capacity_tenant t[8];
	size_t n;

	capacity_of(P, L4, &s, NULL, &c, t, &n);
	cr_expect_eq(c.promised, 12);
	cr_expect_eq(c.usable, 8);
	cr_expect_eq(c.unbacked, 4);
	cr_assert_eq(n, 2);
	cr_expect_str_eq(t[0].tenant->name, "research");
	cr_expect_str_eq(t[1].tenant->name, "web");
	cr_expect_eq(t[0].short_by, 0);
	/* n_tenants and tenants may be NULL */
	capacity_of(P, L4, &s, NULL, &c, NULL, NULL);
	cr_expect_eq(c.unbacked, 4);
}

Test(capacity, a_nominal_of_0_is_never_short)
{
	struct pool_summary s = summary(H100, 0, 8, 0);
	struct capacity_flavor c;
	struct capacity_tenant t[8];
	size_t n;

	used[2][0] = 3; /* intern uses 3 of 0 (borrowing is elsewhere) */
	capacity_of(P, H100, &s, &view, &c, t, &n);
	cr_expect_eq(find(t, n, "intern")->nominal, 0);
	cr_expect_eq(find(t, n, "intern")->used, 3);
	cr_expect_eq(find(t, n, "intern")->short_by, 0);
	cr_expect_eq(c.n_short, 3); /* research, prod, solo */
}
