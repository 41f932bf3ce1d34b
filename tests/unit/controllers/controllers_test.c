/* controllers/controllers.c: the table the daemon walks, and the start of
 * one row (its needs checked, leading handed only to leader-only rows). */
#include "base/diag.h"
#include "controllers/controllers.h"

#include <criterion/criterion.h>
#include <string.h>

Test(controllers, the_rows_in_start_order_and_what_they_need)
{
	static const struct {
		const char *name;
		const char *needs;
		bool leader_only;
	} want[CONTROLLERS_COUNT] = {
		{"waiter", "kube policy usage inventory identity", true},
		{"reclaimer", "kube policy usage metrics identity namespace", true},
		{"health", "kube policy inventory metrics", true},
		{"class-sync", "kube policy", true},
		{"quota-sync", "kube policy usage inventory synced", true},
		{"claim-sync", "kube policy pvcs", true},
		/* Writes nothing (dry runs); every replica's webhook reads it. */
		{"gang-probe", "kube policy metrics namespace gang-served", false},
		{"gang-groups", "kube policy identity gang-served", true},
		{"gang-start", "kube policy inventory metrics namespace", true},
		/* Writes annotations and Events: the leader's. */
		{"idle", "kube policy usage metrics identity synced", true},
		/* Reads on every replica (its idle turn), writes on the leader. */
		{"claim-templates", "kube policy metrics templates", true},
	};

	for (size_t i = 0; i < CONTROLLERS_COUNT; i++) {
		const struct controller *c = &controllers_table[i];
		char needs[128];

		controller_needs_text(c->needs, needs, sizeof(needs));
		cr_expect_str_eq(c->name, want[i].name);
		cr_expect_str_eq(needs, want[i].needs, "%s", c->name);
		cr_expect_eq(c->leader_only, want[i].leader_only,
			     "%s: only what writes API objects is the leader's", c->name);
		cr_expect(c->start && c->stop);
	}
}

static bool yes(void *ctx)
{
	(void)ctx;
	return true;
}

static struct controller_deps got;
static int started;

static int fake_start(const struct controller_deps *deps, void **out, struct diag *d)
{
	(void)d;
	got = *deps;
	started++;
	*out = &got;
	return 0;
}

static void fake_stop(void *c)
{
	(void)c;
}

Test(controllers, leading_only_for_leader_only_rows)
{
	struct controller row = {"fake", CONTROLLER_NEEDS_POLICY, true, NULL, fake_start,
				 fake_stop};
	struct controller_deps deps = {.policy = (struct holder *)&row, .leading = yes};
	struct diag d;
	void *out = NULL;

	diag_init(&d);
	cr_assert_eq(controller_start(&row, &deps, &out, &d), 0);
	cr_expect_eq(out, &got);
	cr_expect_eq(got.leading, yes, "leader-only: the Lease's answer");
	row.leader_only = false;
	cr_assert_eq(controller_start(&row, &deps, &out, &d), 0);
	cr_expect_null(got.leading, "every replica: no leading");
	cr_expect_eq(got.policy, deps.policy, "the rest as given");
	cr_expect_eq(started, 2);
}

static bool never(const struct controller_deps *deps)
{
	(void)deps;
	return false;
}

Test(controllers, switched_off_starts_nothing_and_missing_needs_refuse)
{
	struct controller row = {"fake", CONTROLLER_NEEDS_KUBE | CONTROLLER_NEEDS_METRICS |
						 CONTROLLER_NEEDS_SYNCED,
				 true, never, fake_start, fake_stop};
	struct controller_deps deps = {0};
	struct diag d;
	void *out = &row;

	diag_init(&d);
	/* Off: nothing runs, whatever it lacks. */
	cr_assert_eq(controller_start(&row, &deps, &out, &d), 0);
	cr_expect_null(out);
	cr_expect_eq(started, 0);
	/* On, lacking two of its three needs. */
	row.on = NULL;
	deps.metrics = (struct metrics *)&row;
	cr_expect_eq(controller_missing(&row, &deps),
		     CONTROLLER_NEEDS_KUBE | CONTROLLER_NEEDS_SYNCED);
	cr_assert_eq(controller_start(&row, &deps, &out, &d), -1);
	cr_expect_str_eq(diag_text(&d), "controller fake needs: kube synced\n");
	cr_expect_null(out);
	cr_expect_eq(started, 0, "not started");
}

Test(controllers, the_switches_of_gpugate_serve)
{
	struct controller_deps deps = {0};

	cr_expect_not(controllers_table[0].on(&deps), "waiter: off without "
						      "--waiting-reasons-after");
	deps.waiting_after_s = 60;
	cr_expect(controllers_table[0].on(&deps));
	cr_expect_null(controllers_table[1].on, "the reclaimer: always");
	cr_expect(controllers_table[2].on(&deps), "health: on (idle until the pool is synced)");
	deps.no_node_health = true;
	cr_expect_not(controllers_table[2].on(&deps), "--no-node-health");
	cr_expect(controllers_table[3].on(&deps));
	deps.no_gpuclasses = true;
	cr_expect_not(controllers_table[3].on(&deps), "--no-gpuclasses");
	cr_expect(controllers_table[4].on(&deps));
	deps.no_gpuquotas = true;
	cr_expect_not(controllers_table[4].on(&deps), "--no-gpuquotas");
	cr_expect_null(controllers_table[5].on, "claim-sync: always (idle while off)");
	cr_expect_null(controllers_table[6].on, "gang-probe: always");
	cr_expect_null(controllers_table[7].on, "gang-groups: always (idle without "
						"PodGroups or gang classes)");
	cr_expect_null(controllers_table[8].on, "gang-start: always (idle while no gang "
						"pod is gated)");
	cr_expect_null(controllers_table[9].on, "idle: always (without --prometheus-url "
						"nothing is idle)");
	cr_expect_null(controllers_table[10].on, "claim-templates: always (it only "
						 "reads while no class is of a DRA flavor)");
}
