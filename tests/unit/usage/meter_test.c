/*
 * The meter (usage/meter.c): GPU-seconds from pods' run times, on a fake
 * clock.
 */
#include "usage/meter.h"

#include <criterion/criterion.h>
#include <string.h>

static int64_t clock_now;

static int64_t fake_now(void)
{
	return clock_now;
}

struct sums {
	double research_h100, product_h100;
	int calls;
};

static void sum(void *ctx, const char *tenant, const char *flavor, double s)
{
	struct sums *x = ctx;

	x->calls++;
	if (strcmp(flavor, "h100") != 0)
		return;
	if (strcmp(tenant, "research") == 0)
		x->research_h100 = s;
	else if (strcmp(tenant, "product") == 0)
		x->product_h100 = s;
}

static struct sums totals(struct meter *m)
{
	struct sums x = {0};

	meter_foreach(m, sum, &x);
	return x;
}

static void put(struct meter *m, const char *uid, const char *tenant, int64_t units,
		int64_t start, int64_t end)
{
	struct meter_pod p = {uid, tenant, tenant ? "h100" : NULL, units, start, end};

	meter_put(m, &p);
}

Test(meter, charges_the_run_after_its_own_start_from_pod_status)
{
	struct meter *m;

	clock_now = 1000;
	m = meter_new(fake_now);
	put(m, "a", "research", 8, 400, 0);   /* running since before: from 1000 */
	put(m, "b", "research", 2, 1010, 0);  /* starts later */
	put(m, "c", "research", 8, 100, 900); /* ended before the meter: nothing */
	put(m, "d", "product", 1, 0, 0);      /* not started: nothing */
	put(m, "e", NULL, 4, 1000, 0);        /* no tenant: not kept */
	cr_assert_eq(meter_pods(m), 4);
	clock_now = 1100;
	cr_assert_float_eq(totals(m).research_h100, 8 * 100 + 2 * 90, 1e-9);
	cr_assert_float_eq(totals(m).product_h100, 0, 1e-9);

	/* b ends at 1050 (status says so), seen at 1100: charged to 1050. */
	put(m, "b", "research", 2, 1010, 1050);
	cr_assert_float_eq(totals(m).research_h100, 8 * 100 + 2 * 40, 1e-9);
	clock_now = 1200;
	cr_assert_float_eq(totals(m).research_h100, 8 * 200 + 2 * 40, 1e-9);
	/* Gone: charged once, never again. */
	meter_gone(m, "b");
	meter_gone(m, "b");
	clock_now = 1300;
	cr_assert_float_eq(totals(m).research_h100, 8 * 300 + 2 * 40, 1e-9);
	meter_gone(m, "a"); /* deleted while running: up to now */
	clock_now = 1400;
	cr_assert_float_eq(totals(m).research_h100, 8 * 300 + 2 * 40, 1e-9);
	meter_free(m);
}

Test(meter, a_relist_closes_what_it_no_longer_lists)
{
	struct meter *m;

	clock_now = 0;
	m = meter_new(fake_now);
	put(m, "a", "research", 1, 10, 0);
	put(m, "b", "research", 1, 10, 0);
	clock_now = 110;
	meter_relist_begin(m);
	put(m, "a", "research", 1, 10, 0);
	meter_relist_end(m); /* b went while the watch was down: to now */
	cr_assert_eq(meter_pods(m), 1);
	clock_now = 210;
	cr_assert_float_eq(totals(m).research_h100, 200 + 100, 1e-9);
	meter_free(m);
}

Test(meter, a_pod_moved_to_another_tenant_keeps_what_it_ran)
{
	struct meter *m;
	struct sums x;

	clock_now = 100;
	m = meter_new(fake_now);
	put(m, "a", "research", 4, 100, 0);
	clock_now = 110;
	put(m, "a", "product", 4, 100, 0); /* a policy reload moved it */
	clock_now = 120;
	x = totals(m);
	cr_assert_float_eq(x.research_h100, 40, 1e-9);
	cr_assert_float_eq(x.product_h100, 40, 1e-9); /* from the move: once */
	put(m, "a", NULL, 4, 100, 0); /* no longer a GPU pod: closed */
	cr_assert_eq(meter_pods(m), 0);
	cr_assert_eq(x.calls, 2);
	meter_free(m);
}
