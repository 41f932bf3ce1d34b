/*
 * Idle GPUs' words and rules (policy/idle.c): below and for as written,
 * which rule a pod falls under, the queries, the verdict on a pod and on
 * a Job.  Pods and series are plain values.
 */
#include "policy/idle.h"
#include "policy/policy.h"
#include "tests/unit/test_policy.h"

#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

/* ---- below and for ---------------------------------------------------- */

Test(idle, below_is_a_percent_into_a_ratio)
{
	static const struct {
		const char *s;
		double want;
	} good[] = {{"5%", 0.05}, {"2.5%", 0.025}, {"0.01%", 0.0001}, {"100%", 1.0},
		    {"99.99%", 0.9999}, {"007%", 0.07}};
	static const char *const bad[] = {"0%", "0.00%", "5", "5 %", "-5%", "100.01%", "101%",
					  "5.%", ".5%", "5.123%", "5%%", "", "1e1%", "5%x",
					  "99999999999999999999%"};
	double r;

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		cr_assert_eq(idle_parse_below(good[i].s, &r), 0, "%s", good[i].s);
		cr_assert_float_eq(r, good[i].want, 1e-12, "%s", good[i].s);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_eq(idle_parse_below(bad[i], &r), -1, "%s", bad[i]);
	cr_assert_eq(idle_parse_below(NULL, &r), -1);
}

Test(idle, for_is_whole_units_concatenated)
{
	static const struct {
		const char *s;
		int64_t want;
	} good[] = {{"30m", 1800}, {"1h30m", 5400}, {"90s", 90}, {"7d", 604800},
		    {"1d2h3m4s", 93784}, {"0s", 0}};
	static const char *const bad[] = {"", "30", "m", "30x", "1h30", "1.5h", "-1m", " 1m",
					  "1m ", "999999999999m"};
	int64_t s;

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		cr_assert_eq(idle_parse_for(good[i].s, &s), 0, "%s", good[i].s);
		cr_assert_eq(s, good[i].want, "%s", good[i].s);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_eq(idle_parse_for(bad[i], &s), -1, "%s", bad[i]);
}

/* ---- which rule ------------------------------------------------------- */

static const char rules_yaml[] =
	"version: 1\n"
	"flavors:\n  - name: f\n    resource: x.io/f\n    sharing: exclusive\n    gpusPerNode: 8\n"
	"classes:\n"
	"  - name: notebook\n    flavor: f\n    gpus: 1\n"
	"    idle: {below: \"5%\", for: 30m, action: reclaim}\n"
	"  - name: train\n    flavor: f\n    gpus: 1\n"
	"tenants:\n"
	"  - name: lab\n    namespaces: [lab]\n"
	"    idle: {below: \"10%\", for: 2h}\n"
	"    quota:\n      - flavor: f\n        nominal: 8\n"
	"  - name: free\n    namespaces: [free]\n"
	"    quota:\n      - flavor: f\n        nominal: 8\n";

Test(idle, the_class_rule_wins_over_the_tenant_rule)
{
	struct policy *p = test_policy(rules_yaml);
	const struct policy_tenant *lab = policy_tenant_find(p, "lab");
	const struct policy_tenant *free_ = policy_tenant_find(p, "free");
	const struct policy_class *nb = policy_class_find(p, "notebook");
	const struct policy_class *tr = policy_class_find(p, "train");
	const struct policy_idle *r;

	r = idle_rule(lab, nb);
	cr_assert_not_null(r);
	cr_assert_float_eq(r->below, 0.05, 1e-12);
	cr_assert_eq(r->for_s, 1800);
	cr_assert_eq(r->action, IDLE_ACTION_RECLAIM);
	cr_assert_str_eq(r->below_text, "5%");
	cr_assert_str_eq(r->for_text, "30m");
	/* The tenant's, for a class without one and for a pod of no class. */
	r = idle_rule(lab, tr);
	cr_assert_not_null(r);
	cr_assert_eq(r->for_s, 7200);
	cr_assert_eq(r->action, IDLE_ACTION_WARN, "warn is the default");
	cr_assert_eq(idle_rule(lab, NULL), r);
	/* No tenant rule: the class's still holds; no class: none. */
	cr_assert_eq(idle_rule(free_, nb), nb->idle);
	cr_assert_null(idle_rule(free_, tr));
	cr_assert_null(idle_rule(free_, NULL));
	cr_assert_null(idle_rule(NULL, nb), "a pod of no tenant is not gpugate's");
	cr_assert_eq(policy_idle_window_s(p), 7200, "the longest for");
	policy_free(p);
}

Test(idle, a_policy_without_rules_has_no_window)
{
	struct policy *p = test_policy("version: 1\nflavors: []\nclasses: []\ntenants: []\n");

	cr_assert_eq(policy_idle_window_s(p), 0);
	policy_free(p);
}

/* ---- the queries ------------------------------------------------------ */

Test(idle, the_queries_average_a_pods_devices_and_scale_percent)
{
	char q[1024];

	cr_assert_eq(idle_query_text(q, sizeof(q), IDLE_Q_PEAK, IDLE_METRIC_PROF, 1800, 0), 0);
	cr_assert_str_eq(q, "max_over_time((avg by (namespace, pod) "
			    "(DCGM_FI_PROF_GR_ENGINE_ACTIVE{pod!=\"\"}))[1800s:60s])");
	cr_assert_eq(idle_query_text(q, sizeof(q), IDLE_Q_FIRST, IDLE_METRIC_UTIL, 120, 0), 0);
	cr_assert_str_eq(q, "min_over_time(timestamp(avg by (namespace, pod) "
			    "(DCGM_FI_DEV_GPU_UTIL{pod!=\"\"}) / 100)[120s:30s])");
	cr_assert_eq(idle_query_text(q, sizeof(q), IDLE_Q_RECENT, IDLE_METRIC_UTIL, 0, 60), 0);
	cr_assert_str_eq(q, "avg by (namespace, pod) (avg_over_time("
			    "DCGM_FI_DEV_GPU_UTIL{pod!=\"\"}[60s])) / 100");
	cr_assert_eq(idle_query_text(q, 20, IDLE_Q_PEAK, IDLE_METRIC_PROF, 1800, 0), -1,
		     "a short buffer is refused, not cut");
}

Test(idle, the_step_is_a_quarter_of_the_window_at_most_a_minute)
{
	cr_assert_eq(idle_step_s(60), 15);
	cr_assert_eq(idle_step_s(240), 60);
	cr_assert_eq(idle_step_s(7 * 86400), 60);
	cr_assert_eq(idle_step_s(2), 1);
}

/* ---- the verdict ------------------------------------------------------ */

#define NOW 1796468400000LL
#define MIN 60000LL

static const struct policy_idle rule = {"5%", 0.05, "30m", 1800, IDLE_ACTION_WARN};

static struct idle_pod pod(int64_t running_ago_ms, bool found, double peak,
			   int64_t first_ago_ms)
{
	struct idle_pod p = {NOW - running_ago_ms, {found, peak, NOW - first_ago_ms}};

	return p;
}

Test(idle, a_pod_is_idle_when_its_highest_step_stays_below_for_all_of_for)
{
	struct idle_pod p = pod(60 * MIN, true, 0.021, 31 * MIN);

	cr_assert_eq(idle_judge(&rule, &p, 1800, NOW), IDLE_IDLE);
	p.s.peak = 0.05;
	cr_assert_eq(idle_judge(&rule, &p, 1800, NOW), IDLE_BUSY, "reaching below is busy");
	p.s.peak = 0.0499;
	cr_assert_eq(idle_judge(&rule, &p, 1800, NOW), IDLE_IDLE);
}

Test(idle, no_data_is_never_idle)
{
	struct idle_pod p = pod(60 * MIN, false, 0, 31 * MIN);

	cr_assert_eq(idle_judge(&rule, &p, 1800, NOW), IDLE_NO_DATA, "no series");
	p = pod(60 * MIN, true, NAN, 31 * MIN);
	cr_assert_eq(idle_judge(&rule, &p, 1800, NOW), IDLE_NO_DATA, "NaN");
	/* Data for 20 of the 30 minutes (an exporter started late). */
	p = pod(60 * MIN, true, 0.0, 20 * MIN);
	cr_assert_eq(idle_judge(&rule, &p, 1800, NOW), IDLE_NO_DATA);
	/* Within one step (60 s) of the window's start: the first step may
	 * straddle it. */
	p = pod(60 * MIN, true, 0.0, 29 * MIN);
	cr_assert_eq(idle_judge(&rule, &p, 1800, NOW), IDLE_IDLE);
	p.s.first_ms = 0;
	cr_assert_eq(idle_judge(&rule, &p, 1800, NOW), IDLE_NO_DATA, "first unknown");
}

Test(idle, a_pod_younger_than_for_is_not_judged)
{
	/* A new pod of an old name: the series go back further than the pod. */
	struct idle_pod p = pod(29 * MIN, true, 0.0, 120 * MIN);

	cr_assert_eq(idle_judge(&rule, &p, 1800, NOW), IDLE_YOUNG);
	p.running_ms = 0;
	cr_assert_eq(idle_judge(&rule, &p, 1800, NOW), IDLE_YOUNG, "start unknown");
	p = pod(30 * MIN, true, 0.0, 120 * MIN);
	cr_assert_eq(idle_judge(&rule, &p, 1800, NOW), IDLE_IDLE, "exactly for");
}

Test(idle, no_rule_no_verdict)
{
	struct idle_pod p = pod(60 * MIN, true, 0.0, 60 * MIN);

	cr_assert_eq(idle_judge(NULL, &p, 1800, NOW), IDLE_NO_RULE);
}

Test(idle, a_job_is_idle_only_when_all_its_running_pods_are)
{
	enum idle_verdict all_idle[] = {IDLE_IDLE, IDLE_IDLE, IDLE_IDLE};
	enum idle_verdict one_busy[] = {IDLE_IDLE, IDLE_NO_DATA, IDLE_BUSY};
	enum idle_verdict one_blind[] = {IDLE_IDLE, IDLE_YOUNG, IDLE_NO_DATA};
	enum idle_verdict one_young[] = {IDLE_IDLE, IDLE_YOUNG};

	cr_assert_eq(idle_judge_job(all_idle, 3), IDLE_IDLE);
	cr_assert_eq(idle_judge_job(one_busy, 3), IDLE_BUSY);
	cr_assert_eq(idle_judge_job(one_blind, 3), IDLE_NO_DATA);
	cr_assert_eq(idle_judge_job(one_young, 2), IDLE_YOUNG);
	cr_assert_eq(idle_judge_job(NULL, 0), IDLE_NO_DATA, "no running pod");
}

Test(idle, the_words_of_the_events)
{
	char buf[160];

	idle_describe(buf, sizeof(buf), &rule, 0.021);
	cr_assert_str_eq(buf, "below 5% for 30m (highest 2.1%)");
	cr_assert_str_eq(idle_verdict_name(IDLE_NO_DATA), "no-data");
	cr_assert_str_eq(idle_action_name(IDLE_ACTION_RECLAIM), "reclaim");
}
