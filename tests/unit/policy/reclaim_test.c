/*
 * Reclaim (policy/reclaim.c), table-driven.  Cohort "lab": lender (16),
 * bor (2), bor2 (0), guard (6, lendingLimit 2: 4 guaranteed), noq (no
 * entry for g).  Cohort "farm": f1 (4), f2 (4).  solo is in no cohort.
 */
#include "base/diag.h"
#include "policy/policy.h"
#include "policy/quota.h"
#include "policy/reclaim.h"

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
	"  - {name: lender, namespaces: [l], cohort: lab, quota: [{flavor: g, nominal: 16}]}\n"
	"  - {name: bor, namespaces: [b], cohort: lab, quota: [{flavor: g, nominal: 2}]}\n"
	"  - {name: bor2, namespaces: [b2], cohort: lab, quota: [{flavor: g, nominal: 0}]}\n"
	"  - {name: guard, namespaces: [g], cohort: lab,\n"
	"     quota: [{flavor: g, nominal: 6, lendingLimit: 2}]}\n"
	"  - {name: noq, namespaces: [n], cohort: lab, quota: [{flavor: other, nominal: 9}]}\n"
	"  - {name: f1, namespaces: [f1], cohort: farm, quota: [{flavor: g, nominal: 4}]}\n"
	"  - {name: f2, namespaces: [f2], cohort: farm, quota: [{flavor: g, nominal: 4}]}\n"
	"  - {name: solo, namespaces: [s], quota: [{flavor: g, nominal: 4}]}\n";

enum { LENDER, BOR, BOR2, GUARD, NOQ, F1, F2, SOLO, NT };
enum { LAB, FARM };

static int64_t used_now[NT];

static int64_t used_fn(const void *ctx, unsigned t, unsigned f)
{
	(void)ctx;
	return f == 0 ? used_now[t] : 100; /* flavor "other" never counts */
}

static const struct usage_view view = {.ctx = NULL, .used = used_fn};

static struct policy *load(void)
{
	struct policy *p = NULL;
	struct diag d;

	diag_init(&d);
	cr_assert_eq(policy_parse("r.yaml", policy_yaml, strlen(policy_yaml), &p, &d),
		     0, "%s", diag_text(&d));
	cr_assert_str_eq(policy_cohort_name(p, LAB), "lab");
	cr_assert_str_eq(policy_cohort_name(p, FARM), "farm");
	return p;
}

struct dcase {
	char name[64];
	int cohort;
	int64_t used[NT];
	int64_t want;
};

static struct dcase dcases[] = {
	{"nothing used", LAB, {0}, 0},
	{"borrowers within what is lent", LAB, {[LENDER] = 4, [BOR] = 16}, 0},
	{"lender back on nominal", LAB, {[LENDER] = 16, [BOR] = 10, [GUARD] = 6}, 8},
	{"lendingLimit: guard lends 2 of its idle 6", LAB,
	 {[LENDER] = 16, [BOR] = 10}, 6},
	{"guard above its limit lends less", LAB,
	 {[LENDER] = 16, [BOR] = 10, [GUARD] = 5}, 7},
	{"no quota entry: all of it borrowed", LAB,
	 {[LENDER] = 16, [GUARD] = 6, [BOR] = 2, [NOQ] = 3}, 3},
	{"nominal 0 borrows everything", LAB,
	 {[LENDER] = 16, [GUARD] = 6, [BOR] = 2, [BOR2] = 2}, 2},
	{"other cohorts do not count", LAB,
	 {[LENDER] = 16, [GUARD] = 6, [BOR] = 2, [F1] = 20, [SOLO] = 9}, 0},
	{"farm", FARM, {[F1] = 4, [F2] = 7, [BOR] = 50}, 3},
	{"farm: f1 lends", FARM, {[F1] = 1, [F2] = 7}, 0},
	{"no cohort", -1, {[SOLO] = 9}, 0},
	{"no such cohort", 7, {[SOLO] = 9}, 0},
};

ParameterizedTestParameters(reclaim, deficit)
{
	return cr_make_param_array(struct dcase, dcases,
				   sizeof(dcases) / sizeof(dcases[0]));
}

ParameterizedTest(struct dcase *dc, reclaim, deficit)
{
	struct policy *p = load();

	memcpy(used_now, dc->used, sizeof(used_now));
	cr_expect_eq(reclaim_deficit(p, dc->cohort, policy_flavor_find(p, "g"), &view),
		     dc->want, "%s: %lld", dc->name,
		     (long long)reclaim_deficit(p, dc->cohort,
						policy_flavor_find(p, "g"), &view));
	policy_free(p);
}

struct tcand {
	char uid[8];
	unsigned tenant;
	int64_t units;
	int32_t priority;
	int64_t admitted_ms;
	bool preemptible;
	bool signalled;
};

#define MAXC 8
#define END (-1)

struct pcase {
	char name[64];
	int cohort;
	int64_t used[NT];
	struct tcand c[MAXC];
	size_t n;
	bool has_below;
	int32_t below;
	size_t cap;
	int want[MAXC]; /* indices, END-terminated */
	bool covered;
};

#define P(uid, t, units, prio, ms) {uid, t, units, prio, ms, true, false}

static struct pcase pcases[] = {
	/* D = 4; priority, then the most recent, then uid */
	{"kueue order", LAB, {[LENDER] = 16, [GUARD] = 6, [BOR] = 6},
	 {P("a", BOR, 1, 10, 100), P("b", BOR, 1, 0, 100), P("c", BOR, 1, 0, 200),
	  P("a2", BOR, 1, 0, 200), P("z", BOR, 1, 5, 50)},
	 5, false, 0, MAXC, {3, 2, 1, 4, END}, true},
	/* D = 4: bor borrows 14, the lender lends 10 */
	{"a 16-unit job covers 4, nothing more", LAB,
	 {[LENDER] = 6, [GUARD] = 6, [BOR] = 16},
	 {P("big", BOR, 16, 0, 100), P("s1", BOR, 1, 5, 100), P("s2", BOR, 1, 5, 200)},
	 3, false, 0, MAXC, {0, END}, true},
	{"only borrowing tenants of the cohort", LAB,
	 {[LENDER] = 16, [GUARD] = 6, [BOR] = 3, [F1] = 9, [SOLO] = 9},
	 {P("l", LENDER, 1, -5, 9), P("g", GUARD, 1, -5, 9), P("f", F1, 1, -5, 9),
	  P("s", SOLO, 1, -5, 9), P("b", BOR, 1, 0, 9)},
	 5, false, 0, MAXC, {4, END}, true},
	/* D = 5: bor borrows 2, bor2 3 */
	{"a tenant that stops borrowing is skipped", LAB,
	 {[LENDER] = 16, [GUARD] = 6, [BOR] = 4, [BOR2] = 3},
	 {P("b0", BOR, 1, 0, 3), P("b1", BOR, 1, 0, 2), P("b2", BOR, 1, 0, 1),
	  P("x0", BOR2, 1, 1, 3), P("x1", BOR2, 1, 1, 2), P("x2", BOR2, 1, 1, 1)},
	 6, false, 0, MAXC, {0, 1, 3, 4, 5, END}, true},
	/* D = 7; the guard's 8 free 2 + 2 (lendingLimit), not 8 */
	{"lendingLimit caps what a victim frees", LAB,
	 {[LENDER] = 16, [BOR] = 2, [GUARD] = 8, [BOR2] = 5},
	 {P("g", GUARD, 8, 0, 1), P("x0", BOR2, 1, 1, 5), P("x1", BOR2, 1, 1, 4),
	  P("x2", BOR2, 1, 1, 3), P("x3", BOR2, 1, 1, 2), P("x4", BOR2, 1, 1, 1)},
	 6, false, 0, MAXC, {0, 1, 2, 3, END}, true},
	{"LowerPriority: not enough below", LAB,
	 {[LENDER] = 16, [GUARD] = 6, [BOR] = 5},
	 {P("p7", BOR, 1, 7, 1), P("p5", BOR, 1, 5, 1), P("p0", BOR, 1, 0, 1)},
	 3, true, 5, MAXC, {2, END}, false},
	{"LowerPriority: enough below", LAB, {[LENDER] = 16, [GUARD] = 6, [BOR] = 3},
	 {P("p5", BOR, 1, 5, 1), P("p0", BOR, 1, 0, 1)},
	 2, true, 5, MAXC, {1, END}, true},
	{"signalled first, nobody new", LAB, {[LENDER] = 16, [GUARD] = 6, [BOR] = 3},
	 {P("new", BOR, 1, 0, 9), {"old", BOR, 1, 10, 1, true, true}},
	 2, false, 0, MAXC, {1, END}, true},
	{"signalled first, then the next", LAB,
	 {[LENDER] = 16, [GUARD] = 6, [BOR] = 4},
	 {P("new", BOR, 1, 0, 9), {"old", BOR, 1, 10, 1, true, true}},
	 2, false, 0, MAXC, {1, 0, END}, true},
	{"non-preemptible never", LAB, {[LENDER] = 16, [GUARD] = 6, [BOR] = 3},
	 {{"np", BOR, 1, 0, 9, false, true}, P("p", BOR, 1, 5, 1)},
	 2, false, 0, MAXC, {1, END}, true},
	{"only non-preemptible: not covered", LAB,
	 {[LENDER] = 16, [GUARD] = 6, [BOR] = 3},
	 {{"np", BOR, 1, 0, 9, false, false}},
	 1, false, 0, MAXC, {END}, false},
	{"deficit 0 picks nothing", LAB, {[LENDER] = 0, [BOR] = 5},
	 {{"old", BOR, 1, 0, 1, true, true}, P("b", BOR, 1, 0, 1)},
	 2, false, 0, MAXC, {END}, true},
	/* farm D = 2; lab has a deficit of its own (bor borrows 3) */
	{"cohorts are independent", FARM,
	 {[LENDER] = 16, [GUARD] = 6, [BOR] = 5, [F1] = 4, [F2] = 6},
	 {P("b", BOR, 1, -9, 9), P("y0", F2, 1, 0, 2), P("y1", F2, 1, 0, 1),
	  P("y2", F2, 1, 0, 0)},
	 4, false, 0, MAXC, {1, 2, END}, true},
	{"cap runs out", LAB, {[LENDER] = 16, [GUARD] = 6, [BOR] = 5},
	 {P("a", BOR, 1, 0, 3), P("b", BOR, 1, 0, 2), P("c", BOR, 1, 0, 1)},
	 3, false, 0, 2, {0, 1, END}, false},
};

ParameterizedTestParameters(reclaim, pick)
{
	return cr_make_param_array(struct pcase, pcases,
				   sizeof(pcases) / sizeof(pcases[0]));
}

ParameterizedTest(struct pcase *pc, reclaim, pick)
{
	struct policy *p = load();
	struct reclaim_candidate c[MAXC], copy[MAXC];
	size_t picked[MAXC], got, want = 0;
	bool covered = !pc->covered;

	memcpy(used_now, pc->used, sizeof(used_now));
	for (size_t i = 0; i < pc->n; i++)
		c[i] = (struct reclaim_candidate){
			.uid = pc->c[i].uid, .tenant = pc->c[i].tenant,
			.units = pc->c[i].units, .priority = pc->c[i].priority,
			.admitted_ms = pc->c[i].admitted_ms,
			.preemptible = pc->c[i].preemptible,
			.signalled = pc->c[i].signalled};
	memcpy(copy, c, sizeof(c));
	got = reclaim_pick(p, pc->cohort, policy_flavor_find(p, "g"), &view, c, pc->n,
			   pc->has_below, pc->below, picked, pc->cap, &covered);
	while (pc->want[want] != END)
		want++;
	cr_expect_eq(got, want, "%s: %zu picked, want %zu", pc->name, got, want);
	for (size_t i = 0; i < got && i < want; i++)
		cr_expect_eq(picked[i], (size_t)pc->want[i], "%s: pick %zu is %zu",
			     pc->name, i, picked[i]);
	cr_expect_eq(covered, pc->covered, "%s: covered", pc->name);
	cr_expect_eq(memcmp(copy, c, sizeof(c)), 0, "%s: c[] reordered", pc->name);
	policy_free(p);
}

/*
 * reclaimWithinCohort LowerPriority at admission: the lender (nominal 16,
 * using 8) asks for 8 more while bor borrows 6 and bor2 borrows 4 and guard
 * uses its 6: after the request the cohort holds 10 beyond its quota.
 */
static const struct reclaim_candidate below_cands[] = {
	{.uid = "b-low", .tenant = BOR, .units = 4, .priority = 10, .preemptible = true},
	{.uid = "b-mid", .tenant = BOR, .units = 4, .priority = 50, .preemptible = true},
	{.uid = "b2-low", .tenant = BOR2, .units = 4, .priority = 10, .preemptible = true},
	{.uid = "b2-keep", .tenant = BOR2, .units = 9, .priority = 1, .preemptible = false},
	/* The lender's own workloads are no victims: it does not borrow. */
	{.uid = "l-low", .tenant = LENDER, .units = 8, .priority = 0, .preemptible = true},
};

static bool below(int32_t priority, int64_t units, int64_t *reclaimable)
{
	struct policy *p = load();
	size_t picked[8];
	bool covered;

	memset(used_now, 0, sizeof(used_now));
	used_now[LENDER] = 8;
	used_now[BOR] = 8;   /* nominal 2: borrows 6 */
	used_now[BOR2] = 4 + 9; /* nominal 0: borrows 13 */
	used_now[GUARD] = 6;
	covered = reclaim_below(p, policy_tenant_at(p, LENDER), policy_flavor_at(p, 0),
				units, &view, below_cands,
				sizeof(below_cands) / sizeof(below_cands[0]), priority,
				picked, reclaimable);
	policy_free(p);
	return covered;
}

Test(reclaim_below, the_request_counts_and_only_lower_priorities_are_taken)
{
	int64_t r;

	/* After the request bor borrows 6 and bor2 13, and the lender (at
	 * 16) and guard (at 6) lend nothing: 19 beyond the quota.  The
	 * preemptible victims hold 12 in all: never enough. */
	cr_expect_not(below(1000, 8, &r));
	cr_expect_eq(r, 12);
	/* Below 50: b-low and b2-low, 8 units. */
	cr_expect_not(below(50, 8, &r));
	cr_expect_eq(r, 8);
	/* Below 10: nothing. */
	cr_expect_not(below(10, 8, &r));
	cr_expect_eq(r, 0);
}

Test(reclaim_below, covered_when_the_lower_victims_suffice)
{
	struct policy *p = load();
	size_t picked[8];
	int64_t r;
	const struct reclaim_candidate c[] = {
		{.uid = "low", .tenant = BOR, .units = 4, .priority = 10, .preemptible = true},
		{.uid = "high", .tenant = BOR, .units = 4, .priority = 90, .preemptible = true},
	};

	/* bor borrows 8 (10 of nominal 2); the lender (8 of 16) asks for 8:
	 * the cohort then holds 8 beyond its quota, less guard's 2 lendable
	 * idle units: 6.  Below 50 only "low" (4) may go: short. */
	memset(used_now, 0, sizeof(used_now));
	used_now[LENDER] = 8;
	used_now[BOR] = 10;
	cr_expect_not(reclaim_below(p, policy_tenant_at(p, LENDER), policy_flavor_at(p, 0),
				    8, &view, c, 2, 50, picked, &r));
	cr_expect_eq(r, 4);
	/* Below 100 both may: 8 >= 6. */
	cr_expect(reclaim_below(p, policy_tenant_at(p, LENDER), policy_flavor_at(p, 0), 8,
				&view, c, 2, 100, picked, &r));
	cr_expect_eq(r, 8);
	/* Asking for 4 only: the deficit after is 2, "low" covers it. */
	cr_expect(reclaim_below(p, policy_tenant_at(p, LENDER), policy_flavor_at(p, 0), 4,
				&view, c, 2, 50, picked, &r));
	/* A tenant in no cohort: nothing to reclaim, covered. */
	cr_expect(reclaim_below(p, policy_tenant_at(p, SOLO), policy_flavor_at(p, 0), 4,
				&view, c, 2, 50, picked, &r));
	cr_expect_eq(r, 0);
	policy_free(p);
}

/* reclaimWithinCohort Any at admission (#26): no priority bound, but only
 * what the preemptible candidates hold can be taken back. */
Test(reclaim_cover, any_weighs_every_priority_but_only_preemptible_work)
{
	struct policy *p = load();
	size_t picked[8];
	int64_t r;
	const struct reclaim_candidate c[] = {
		{.uid = "low", .tenant = BOR, .units = 4, .priority = 10, .preemptible = true},
		{.uid = "high", .tenant = BOR, .units = 4, .priority = 90, .preemptible = true},
		{.uid = "kept", .tenant = BOR2, .units = 8, .priority = 0, .preemptible = false},
	};

	/* The cohort holds 6 beyond its quota after the request (above): the
	 * two preemptible pods of bor cover it, whatever their priority. */
	memset(used_now, 0, sizeof(used_now));
	used_now[LENDER] = 8;
	used_now[BOR] = 10;
	cr_expect(reclaim_cover(p, policy_tenant_at(p, LENDER), policy_flavor_at(p, 0), 8,
				&view, c, 2, false, 0, picked, &r));
	cr_expect_eq(r, 8);
	/* bor2 borrows 8 more that nobody can take back: 14 beyond, 8
	 * reclaimable, short. */
	used_now[BOR2] = 8;
	cr_expect_not(reclaim_cover(p, policy_tenant_at(p, LENDER), policy_flavor_at(p, 0),
				    8, &view, c, 3, false, 0, picked, &r));
	cr_expect_eq(r, 8);
	policy_free(p);
}

/* gpugate's own record of a victim (#26): text in its ConfigMap. */
Test(reclaim_record, round_trips_and_refuses_anything_else)
{
	static const char *const bad[] = {
		"", "s=0 r=0 j=0 t=x", "s=5 r=0 t=x", "s=5 r=0 j=8 t=x", "s=5 r=0 j=0",
		"s=5 r=0 j=0 t=", "s=5 r=0 j=0 x=1", "s=5  r=0 j=0 t=x", "r=0 s=5 j=0 t=x",
		"s=-5 r=0 j=0 t=x", "s=5 r=-1 j=0 t=x", "s=5 r=0 j=0x t=x",
		"s=1234567890123456789 r=0 j=0 t=x", "s= r=0 j=0 t=x", "s=5 r=0 j=0 t=a\nb",
	};
	struct reclaim_record r = {.signalled_ms = 1764892800000, .released_ms = 1764892812345,
				   .of_job = true, .tenant = "ML team_1"},
			      back = {0};
	char text[64], small[8];

	cr_assert_eq(reclaim_record_format(&r, text, sizeof(text)), 47);
	cr_assert_str_eq(text, "s=1764892800000 r=1764892812345 j=1 t=ML team_1");
	cr_expect_eq(reclaim_record_format(&r, small, sizeof(small)), 47, "the length needed");
	cr_expect_str_eq(small, "s=17648", "cut short, terminated");
	cr_assert_eq(reclaim_record_parse(text, &back), 0);
	cr_expect_eq(back.signalled_ms, r.signalled_ms);
	cr_expect_eq(back.released_ms, r.released_ms);
	cr_expect(back.of_job);
	cr_expect_not(back.for_health);
	cr_expect_str_eq(back.tenant, "ML team_1");
	cr_expect_eq(reclaim_record_parse(NULL, &back), -1);
	/* The health loop's flag (2), alone and with of_job. */
	r.for_health = true;
	reclaim_record_format(&r, text, sizeof(text));
	cr_expect_str_eq(text, "s=1764892800000 r=1764892812345 j=3 t=ML team_1");
	cr_assert_eq(reclaim_record_parse("s=5 r=0 j=2 t=x", &back), 0);
	cr_expect(back.for_health);
	cr_expect_not(back.of_job);
	cr_expect_not(back.for_idle);
	/* Idle GPUs' flag (4). */
	r.for_health = false;
	r.for_idle = true;
	reclaim_record_format(&r, text, sizeof(text));
	cr_expect_str_eq(text, "s=1764892800000 r=1764892812345 j=5 t=ML team_1");
	cr_assert_eq(reclaim_record_parse("s=5 r=0 j=4 t=x", &back), 0);
	cr_expect(back.for_idle);
	cr_expect_not(back.for_health);
	cr_expect_not(back.of_job);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		back.signalled_ms = 42;
		cr_expect_eq(reclaim_record_parse(bad[i], &back), -1, "\"%s\"", bad[i]);
		cr_expect_eq(back.signalled_ms, 42, "\"%s\": *out untouched", bad[i]);
	}
}

/* The steps (docs/design/reclaim.md "The steps"): timeout 12 s, grace 20 s,
 * signalled at T, now given per case. */
#define T 1764892800000LL

struct ncase {
	char name[96];
	bool has_record;
	struct reclaim_record r;
	struct reclaim_facts f;
	int64_t now;
	enum reclaim_step want;
	bool reported;
	int64_t grace;
};

static struct ncase ncases[] = {
	{"no record: signal", false, {0}, {.job = true, .own_grace_s = -1}, T,
	 RECLAIM_SIGNAL, false, 20},
	/* The timeout is gpugate's: the tenant's annotation plays no part. */
	{"waits for the report", true, {.signalled_ms = T}, {.job = true}, T + 11999,
	 RECLAIM_WAIT, false, 20},
	{"a Job times out: suspend", true, {.signalled_ms = T}, {.job = true}, T + 12000,
	 RECLAIM_SUSPEND, false, 20},
	{"a report before the request does not count", true, {.signalled_ms = T},
	 {.job = true, .done_ms = T - 1000}, T + 1000, RECLAIM_WAIT, false, 20},
	{"a Job reports: suspend", true, {.signalled_ms = T}, {.job = true, .done_ms = T},
	 T + 1000, RECLAIM_SUSPEND, true, 20},
	{"a pod times out: evict", true, {.signalled_ms = T}, {.own_grace_s = 3600},
	 T + 12000, RECLAIM_EVICT, false, 20},
	{"a released Job still charged: suspend again", true,
	 {.signalled_ms = T, .released_ms = T + 12000}, {.job = true}, T + 14000,
	 RECLAIM_SUSPEND, false, 20},
	{"a PDB refused: evict again within the grace", true,
	 {.signalled_ms = T, .released_ms = T + 12000}, {.own_grace_s = 30}, T + 31999,
	 RECLAIM_EVICT, false, 20},
	{"a PDB refused past the grace: delete", true,
	 {.signalled_ms = T, .released_ms = T + 12000}, {.own_grace_s = 30}, T + 32000,
	 RECLAIM_DELETE, false, 20},
	{"past the grace: the pod's shorter grace is kept", true,
	 {.signalled_ms = T, .released_ms = T + 12000}, {.own_grace_s = 5}, T + 40000,
	 RECLAIM_DELETE, false, 5},
	{"a pod of a suspended Job waits for its controller", true,
	 {.signalled_ms = T, .released_ms = T + 12000, .of_job = true}, {.own_grace_s = -1},
	 T + 31999, RECLAIM_WAIT, false, 20},
	{"no controller deleted it: delete", true,
	 {.signalled_ms = T, .released_ms = T + 12000, .of_job = true}, {.own_grace_s = -1},
	 T + 32000, RECLAIM_DELETE, false, 20},
	{"terminating with 3600 s: cut to the cap at once", true,
	 {.signalled_ms = T, .released_ms = T + 12000, .of_job = true},
	 {.terminating = true, .deletion_grace_s = 3600, .own_grace_s = 3600}, T + 12500,
	 RECLAIM_DELETE, false, 20},
	{"terminating within the cap: wait", true,
	 {.signalled_ms = T, .released_ms = T + 12000},
	 {.terminating = true, .deletion_grace_s = 20, .own_grace_s = 3600}, T + 90000,
	 RECLAIM_WAIT, false, 20},
};

ParameterizedTestParameters(reclaim, next)
{
	return cr_make_param_array(struct ncase, ncases, sizeof(ncases) / sizeof(ncases[0]));
}

ParameterizedTest(struct ncase *nc, reclaim, next)
{
	bool reported = !nc->reported;
	int64_t grace = -7;
	enum reclaim_step got = reclaim_next(nc->has_record ? &nc->r : NULL, &nc->f, nc->now,
					     12, 20, &reported, &grace);

	cr_expect_eq(got, nc->want, "%s: step %d", nc->name, (int)got);
	cr_expect_eq(reported, nc->reported, "%s: reported", nc->name);
	if (got == RECLAIM_DELETE)
		cr_expect_eq(grace, nc->grace, "%s: grace %lld", nc->name, (long long)grace);
}
