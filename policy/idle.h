/*
 * idle: the pure rules of idle GPUs (SPEC section 10; docs/design/
 * idle-gpus.md): the policy's `idle: {below, for, action}` words, which
 * rule a pod falls under, the queries gpugate asks the cluster's
 * Prometheus, the verdict on a pod and on a Job, and a tenant's busy share.
 *
 * No I/O: the idle controller (controllers/idle.h) reads Prometheus
 * (kube/prom.h) and the pods, and hands the facts here.
 */
#ifndef GPUGATE_POLICY_IDLE_H
#define GPUGATE_POLICY_IDLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct policy;
struct policy_class;
struct policy_tenant;

/* The annotation on an idle pod (and its Job): since when, RFC 3339 UTC.
 * gpugate writes it when it finds the pod idle and takes it off when the
 * pod is busy again; it informs, it decides nothing (a tenant may edit it). */
#define IDLE_SINCE_ANNOTATION "gpugate.io/idle-since"
/* Event reasons: warned (Warning), and taken back (Warning). */
#define IDLE_EVENT "GPUIdle"
#define IDLE_RECLAIMED_EVENT "GPUIdleReclaimed"
/* The value of gpugate.io/reclaimed on a Job suspended for idleness: the
 * reclaimer never resumes it (its owner does, through admission). */
#define IDLE_RECLAIMED_VALUE "idle"

/* The DCGM exporter's fields, as its Prometheus series are named
 * (dcgm-exporter etc/default-counters.csv): a ratio 0..1, valid per MIG
 * slice; else a percent of the whole GPU. */
#define IDLE_METRIC_PROF "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
#define IDLE_METRIC_UTIL "DCGM_FI_DEV_GPU_UTIL"

enum idle_action {
	IDLE_ACTION_WARN = 0,
	IDLE_ACTION_RECLAIM = 1,
};
const char *idle_action_name(enum idle_action a); /* "warn", "reclaim" */

/* `below: "5%"`: a percent in (0, 100], at most two decimals, into a ratio
 * 0..1.  0, or -1 when s is not one. */
int idle_parse_below(const char *s, double *ratio);
/* `for: 30m`: a duration of whole units s, m, h, d, concatenated
 * ("1h30m"), into seconds.  0, or -1 when s is not one. */
int idle_parse_for(const char *s, int64_t *seconds);
/* The bounds of `for` (the checker's): a minute to a week.  Below a minute
 * the exporter's own scrape (15-30 s) leaves too few points to judge. */
#define IDLE_FOR_MIN_S 60
#define IDLE_FOR_MAX_S (7 * 24 * 3600)

/*
 * The rule a pod of tenant t and class c (NULL: a pod of no class) falls
 * under: the class's, else the tenant's, else none (NULL: never idle).
 * t may be NULL (a pod of no tenant: NULL).
 */
const struct policy_idle *idle_rule(const struct policy_tenant *t,
				    const struct policy_class *c);
/* The longest `for` of a policy's rules is policy_idle_window_s()
 * (policy/policy.h): the window of the PEAK and FIRST queries. */

/*
 * The queries of one round, into buf (size >= 1024 is always enough):
 *   IDLE_Q_PEAK   per (namespace, pod), the highest per-step average over
 *                 the pod's devices in the last window_s;
 *   IDLE_Q_FIRST  per (namespace, pod), the time (s) of its first step
 *                 with data in the window: how far back the data goes;
 *   IDLE_Q_RECENT per (namespace, pod), the mean over the last recent_s
 *                 (metering).
 * metric is IDLE_METRIC_PROF (a ratio) or IDLE_METRIC_UTIL (a percent:
 * the query divides by 100).  The step is min(60 s, window_s / 4), at
 * least 1 s.  Series without a pod (the exporter not mapping devices to
 * pods) are left out.  0, or -1 when buf is too small.
 */
enum idle_query { IDLE_Q_PEAK, IDLE_Q_FIRST, IDLE_Q_RECENT };
int idle_query_text(char *buf, size_t size, enum idle_query q, const char *metric,
		    int64_t window_s, int64_t recent_s);
int64_t idle_step_s(int64_t window_s);

/* What Prometheus said of one pod (both queries of one metric). */
struct idle_series {
	bool found;         /* a PEAK sample for the pod */
	double peak;        /* 0..1: the highest step over the window */
	int64_t first_ms;   /* its first step with data; 0: unknown */
};

/* One running pod, as the controller saw it. */
struct idle_pod {
	int64_t running_ms;          /* since when it runs (status.startTime) */
	struct idle_series s;
};

enum idle_verdict {
	IDLE_NO_RULE,   /* no rule for it: never idle */
	IDLE_NO_DATA,   /* no series, or data shorter than `for`: never idle */
	IDLE_YOUNG,     /* running for less than `for`: not judged yet */
	IDLE_BUSY,      /* some step over the window reached `below` */
	IDLE_IDLE,      /* below `below` for all of `for` */
};
const char *idle_verdict_name(enum idle_verdict v);

/*
 * The verdict on pod under rule (NULL: IDLE_NO_RULE) at now_ms.  Idle
 * needs the data to go back `for` (less one step of slack: the first step
 * may straddle the window's start) and the pod to run for `for`.  The
 * peak is judged over the whole window queried, which may be longer than
 * this rule's `for` (the longest rule's): a busy step in that longer
 * window keeps the pod busy a little longer, never idle sooner.
 */
enum idle_verdict idle_judge(const struct policy_idle *rule, const struct idle_pod *pod,
			     int64_t window_s, int64_t now_ms);

/*
 * A Job's verdict from its running pods' verdicts v[0..n): idle only when
 * every one is idle (n > 0); else busy if one is busy; else the first of
 * no-data, young, no-rule in that order.  n == 0: IDLE_NO_DATA.
 */
enum idle_verdict idle_judge_job(const enum idle_verdict *v, size_t n);

/*
 * One pod's mean utilization over the last hour (IDLE_Q_RECENT with
 * recent_s 3600): what `gpugate pool` weighs a tenant's held units by to
 * show its busy share.  A pod without one has no data: it counts neither
 * as busy nor as idle (the share is of the units with data).
 */
struct idle_util {
	const char *namespace;
	const char *pod;
	double hour;  /* 0..1 */
};
#define IDLE_SHARE_WINDOW_S 3600

/*
 * A tenant's busy share of what it holds now, summed pod by pod: each
 * pod's units weighted by its mean over the last hour (u NULL: no data,
 * left out of both sums).  idle_share_of(): busy units / units with data,
 * 0..1 (a mean outside 0..1 is clamped), or -1 when no unit had data.
 */
struct idle_share {
	double busy;    /* units x mean */
	int64_t units;  /* units with data */
};
void idle_share_add(struct idle_share *s, int64_t units, const struct idle_util *u);
double idle_share_of(const struct idle_share *s);

/* "below 5% for 30m (highest 2.1%)", into buf: the words of the Events. */
void idle_describe(char *buf, size_t size, const struct policy_idle *rule,
		   double peak);

#endif
