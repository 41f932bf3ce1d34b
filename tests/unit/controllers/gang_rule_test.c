/*
 * controllers/gang-rule.c: the record's text, what a gang's pods count
 * for, the next step (release check, start, timeout, regate by suspend
 * and resume) and the release rule over a pool check.
 */
#include "controllers/gang-rule.h"
#include "policy/pool.h"

#include <criterion/criterion.h>
#include <string.h>

Test(gang_rule, record_round_trip)
{
	struct gang_record r = {.released_ms = 1764921600123, .regates = 2,
				.suspended = true, .tenant = "research"}, back;
	char buf[128];

	cr_assert_eq(gang_record_format(&r, buf, sizeof(buf)), strlen(buf));
	cr_assert_str_eq(buf, "r=1764921600123 n=2 s=1 t=research");
	cr_assert_eq(gang_record_parse(buf, &back), 0);
	cr_assert_eq(back.released_ms, r.released_ms);
	cr_assert_eq(back.regates, 2);
	cr_assert(back.suspended);
	cr_assert_str_eq(back.tenant, "research");
	cr_assert_eq(gang_record_parse("r=0 n=0 s=0 t=a", &back), 0);
	cr_assert(!back.suspended);
	cr_assert_eq(back.released_ms, 0);
}

Test(gang_rule, record_refuses_what_is_not_one)
{
	static const char *const bad[] = {
		"", "r=1 n=0 s=0", "r=1 n=0 s=0 t=", "r=1 n=0 s=2 t=a",
		"n=0 r=1 s=0 t=a", "r=x n=0 s=0 t=a", "r=1 n=0 s=0 t=a b",
		"r=1  n=0 s=0 t=a", "r=1 n=0 s=0 t=a\n", "r=1234567890123456789 n=0 s=0 t=a",
	};
	struct gang_record r;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_expect_eq(gang_record_parse(bad[i], &r), -1, "%s", bad[i]);
	cr_expect_eq(gang_record_parse(NULL, &r), -1);
}

static const struct gang_job JOB3 = {.parallelism = 3, .completions = 3};

Test(gang_rule, count_wants_what_runs_at_once)
{
	struct gang_count c;
	struct gang_job j = {.parallelism = 4, .completions = 6, .succeeded = 3};

	gang_count(&j, NULL, 0, &c);
	cr_expect_eq(c.want, 3); /* 6 - 3 left, fewer than parallelism */
	j = (struct gang_job){.parallelism = 4, .completions = -1};
	gang_count(&j, NULL, 0, &c);
	cr_expect_eq(c.want, 4);
	j = (struct gang_job){.parallelism = 2, .completions = 2, .succeeded = 5};
	gang_count(&j, NULL, 0, &c);
	cr_expect_eq(c.want, 0);
}

Test(gang_rule, count_sorts_the_pods)
{
	const struct gang_pod pods[] = {
		{.bound = true, .running = true, .domain = "c0"},
		{.gated = true},
		{.gated = true, .other_gate = true},
		{.domain = "c0"},                      /* released, not bound */
		{.terminal = true, .bound = true, .domain = "c9"},
	};
	struct gang_count c;

	gang_count(&(struct gang_job){.parallelism = 4, .completions = 4}, pods, 5, &c);
	cr_expect_eq(c.want, 4);
	cr_expect_eq(c.active, 4);
	cr_expect_eq(c.bound, 1);
	cr_expect_eq(c.gated, 2);
	cr_expect_eq(c.pending, 1);
	cr_expect_eq(c.running, 1);
	cr_expect(c.foreign_gate);
	cr_expect_str_eq(c.domain, "c0");
	cr_expect(!c.split);
}

Test(gang_rule, count_sees_a_split_gang)
{
	const struct gang_pod pods[] = {{.bound = true, .domain = "c0"},
					{.bound = true, .domain = "c1"}};
	struct gang_count c;

	gang_count(&JOB3, pods, 2, &c);
	cr_expect(c.split);
}

static enum gang_step next(const struct gang_record *rec, const struct gang_job *j,
			   const struct gang_pod *pods, size_t n, int64_t now_ms)
{
	struct gang_count c;

	gang_count(j, pods, n, &c);
	return gang_next(rec, j, &c, now_ms, 300);
}

static const struct gang_pod GATED3[] = {{.gated = true}, {.gated = true}, {.gated = true}};

Test(gang_rule, complete_gang_is_checked)
{
	cr_expect_eq(next(NULL, &JOB3, GATED3, 3, 0), GANG_CHECK);
}

Test(gang_rule, one_pod_missing_waits)
{
	cr_expect_eq(next(NULL, &JOB3, GATED3, 2, 0), GANG_WAIT);
}

Test(gang_rule, a_foreign_gate_waits)
{
	const struct gang_pod pods[] = {{.gated = true}, {.gated = true, .other_gate = true},
					{.gated = true}};

	cr_expect_eq(next(NULL, &JOB3, pods, 3, 0), GANG_WAIT);
}

Test(gang_rule, a_replacement_joins_its_bound_gang)
{
	const struct gang_pod pods[] = {{.bound = true, .running = true, .domain = "c0"},
					{.bound = true, .running = true, .domain = "c0"},
					{.gated = true}};

	cr_expect_eq(next(NULL, &JOB3, pods, 3, 0), GANG_CHECK);
}

Test(gang_rule, nothing_gated_nothing_to_do)
{
	const struct gang_pod pods[] = {{.bound = true}, {.bound = true}};

	cr_expect_eq(next(NULL, &JOB3, pods, 2, 0), GANG_NOTHING);
}

Test(gang_rule, started_drops_the_record)
{
	const struct gang_pod pods[] = {{.bound = true, .running = true},
					{.bound = true, .running = true},
					{.bound = true, .running = true}};
	struct gang_record rec = {.released_ms = 1000, .tenant = "t"};

	cr_expect_eq(next(&rec, &JOB3, pods, 3, 5000), GANG_STARTED);
	cr_expect_eq(next(NULL, &JOB3, pods, 3, 5000), GANG_NOTHING);
}

Test(gang_rule, timeout_regates)
{
	const struct gang_pod pods[] = {{.bound = true, .running = true},
					{.bound = true, .running = true},
					{.bound = false}};
	struct gang_record rec = {.released_ms = 1000, .tenant = "t"};

	cr_expect_eq(next(&rec, &JOB3, pods, 3, 1000 + 299999), GANG_NOTHING);
	cr_expect_eq(next(&rec, &JOB3, pods, 3, 1000 + 300000), GANG_REGATE);
}

Test(gang_rule, a_kueue_held_job_is_not_regated)
{
	const struct gang_pod pods[] = {{.bound = true, .running = true}, {.bound = true}};
	struct gang_record rec = {.released_ms = 1000, .tenant = "t"};
	struct gang_job j = JOB3;

	j.kueue = true;
	cr_expect_eq(next(&rec, &j, pods, 2, 1000 + 300000), GANG_NOTHING);
}

Test(gang_rule, timeout_with_all_pods_gated_again_resets)
{
	struct gang_record rec = {.released_ms = 1000, .tenant = "t"};

	cr_expect_eq(next(&rec, &JOB3, GATED3, 3, 1000 + 300000), GANG_RESET);
}

Test(gang_rule, regate_suspends_then_resumes)
{
	struct gang_record rec = {.regates = 1, .suspended = true, .tenant = "t"};
	struct gang_job j = JOB3;
	const struct gang_pod old[] = {{.bound = true, .running = true}, {}};

	/* The suspend did not land: again. */
	cr_expect_eq(next(&rec, &j, old, 2, 0), GANG_SUSPEND);
	j.suspended = true;
	/* Its pods are still going. */
	cr_expect_eq(next(&rec, &j, old, 2, 0), GANG_NOTHING);
	/* None left: resume. */
	cr_expect_eq(next(&rec, &j, NULL, 0, 0), GANG_RESUME);
	j.suspended = false;
	/* Resumed: the new pods are gated (or not made yet): clear s. */
	cr_expect_eq(next(&rec, &j, GATED3, 3, 0), GANG_CLEAR);
	cr_expect_eq(next(&rec, &j, NULL, 0, 0), GANG_CLEAR);
}

Test(gang_rule, a_tenants_suspend_is_left)
{
	struct gang_job j = JOB3;
	struct gang_record rec = {.released_ms = 1000, .tenant = "t"};

	j.suspended = true;
	cr_expect_eq(next(NULL, &j, GATED3, 3, 0), GANG_LEAVE);
	cr_expect_eq(next(&rec, &j, NULL, 0, 999999), GANG_LEAVE);
}

Test(gang_rule, finished_drops)
{
	struct gang_job j = JOB3;
	struct gang_record rec = {.released_ms = 1000, .tenant = "t"};

	j.finished = true;
	cr_expect_eq(next(&rec, &j, NULL, 0, 0), GANG_DROP);
	cr_expect_eq(next(NULL, &j, NULL, 0, 0), GANG_NOTHING);
}

Test(gang_rule, release_needs_room_for_all)
{
	struct gang_count c = {.want = 3, .gated = 3};
	struct pool_check pc = {.known = true};
	const char *d = "x";

	pc.fit.verdict = POOL_NOT_NOW;
	cr_expect(!gang_release_ok(&c, &pc, false, &d));
	cr_expect_null(d);
	pc.fit.verdict = POOL_FITS;
	cr_expect(gang_release_ok(&c, &pc, false, &d));
	cr_expect_null(d);
	pc.known = false;
	cr_expect(!gang_release_ok(&c, &pc, false, &d));
}

Test(gang_rule, release_pins_the_domain)
{
	struct gang_count c = {.want = 3, .gated = 3};
	struct pool_check pc = {.known = true};
	const char *d;

	pc.fit.verdict = POOL_FITS;
	strcpy(pc.domain, "clique-0");
	pc.fit.domain = pc.domain;
	cr_expect(gang_release_ok(&c, &pc, true, &d));
	cr_expect_str_eq(d, "clique-0");
	/* Already bound in a domain: that one. */
	c.domain = "clique-1";
	cr_expect(gang_release_ok(&c, &pc, true, &d));
	cr_expect_str_eq(d, "clique-1");
	c.split = true;
	cr_expect(!gang_release_ok(&c, &pc, true, &d));
	/* Required, but no domain known. */
	c = (struct gang_count){.want = 3, .gated = 3};
	pc.fit.domain = NULL;
	cr_expect(!gang_release_ok(&c, &pc, true, &d));
}
