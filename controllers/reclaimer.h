/*
 * reclaimer: lent GPUs come back, checkpoint first (docs/quota.md "Lent
 * quota coming back"; docs/design/reclaim.md).
 *
 * A thread of gpugate serve (API mode).  Every interval, while `leading`
 * says so (the Lease of several replicas), for each cohort and flavor that
 * holds more than its quota (quota_cohort_deficit: a lender was admitted on
 * its nominal quota while its units were lent out) it chooses victims among
 * the cohort's borrowing, preemptible workloads (policy/reclaim.h
 * reclaim_pick: Kueue's order, whole workloads, only as many as needed)
 * from the usage store's observed workloads, and moves each along:
 *
 *   signal    gpugate.io/checkpoint-requested=<time> on the workload and
 *             its pods (the pods' downward API volume shows it), an Event;
 *   release   once the workload reports (gpugate.io/checkpoint-done) or the
 *             policy's checkpoint.timeoutSeconds pass: a Job is suspended
 *             and labelled gpugate.io/reclaimed=true, a Pod (bare, or one
 *             beyond its Job's gang) is evicted through the Eviction API
 *             (a 429 from a PodDisruptionBudget is tried again next round),
 *             an Event;
 *   delete    a released pod still not terminating checkpoint.grace-
 *             PeriodSeconds after its release (no controller deleted the
 *             pods of its suspended Job, a PDB refused every eviction) is
 *             deleted, and one terminating with a longer grace is deleted
 *             again: gracePeriodSeconds capped at the policy's;
 *   abandon   the cohort no longer needs it before it was released: the
 *             request is taken back;
 *   resume    a Job labelled gpugate.io/reclaimed is resumed when its
 *             cohort holds no more than its quota and its gang fits again
 *             (the resume goes through admission like any other).
 *
 * The health loop (docs/design/health-loop.md) adds victims of its own,
 * before the cohorts': every preemptible workload with a pod on a node
 * that is out of the pool for `health` is signalled the same way, and,
 * under health.onUnhealthy checkpoint, released the same way, so that it
 * resumes on another node (gpugate's taint keeps it off the failing one).
 * Where another system drains the node (health.drainedBy: NVSentinel),
 * or under onUnhealthy signal, it is only signalled.  A non-preemptible
 * pod there gets a GPUNodeFailing Event, once per pod and node.  When the
 * node comes back before the release, the request is taken back.
 *
 * The times (signalled, released) are gpugate's own, in the ConfigMap
 * gpugate-reclaim of its namespace, written before each step is taken:
 * a tenant editing its objects cannot restart a timeout, and a restart or
 * a change of leader picks a reclaim up where it was.
 */
#ifndef GPUGATE_RECLAIMER_H
#define GPUGATE_RECLAIMER_H

#include <stdbool.h>
#include <stdint.h>

struct diag;
struct holder;
struct inventory;
struct kube_config;
struct metrics;
struct usage_store;

/* The label a reclaimed (suspended) Job carries until gpugate resumes it. */
#define RECLAIMER_LABEL "gpugate.io/reclaimed"
/* What the reclaim is for, on a victim: "8 h100-80gb for tenant research". */
#define RECLAIMER_FOR "gpugate.io/reclaim-for"

struct reclaimer_config {
	const struct kube_config *kube;
	struct holder *policy;
	struct usage_store *usage;
	const char *identity;        /* reportingInstance of the Events */
	/* gpugate's namespace: its state ConfigMap gpugate-reclaim lives
	 * there (docs/design/reclaim.md "State"); NULL: "gpugate". */
	const char *namespace;
	unsigned interval_ms;        /* between rounds; 0: 2000 */
	bool (*leading)(void *ctx);  /* NULL: always */
	void *leading_ctx;
	int64_t (*now_ms)(void);     /* wall clock, ms; NULL: the real one */
	/* What it does, pushed as it does it (metrics/metrics.h,
	 * metrics_reclaim()): gpugate_reclaims_total and
	 * gpugate_checkpoint_wait_seconds, shown once it started; NULL:
	 * not counted. */
	struct metrics *metrics;
	/* The pool (nodes and their health): with it, the workloads on a
	 * node out of the pool for health are taken too (the health loop,
	 * docs/design/health-loop.md); NULL: lent quota only. */
	struct inventory *inventory;
	/* Idle GPUs (controllers/idle-board.h): the workloads the idle
	 * controller found idle under action reclaim are taken too, after
	 * the health loop's and before the cohorts'; NULL: none. */
	struct idle_board *idle;
};

struct reclaimer;

int reclaimer_start(const struct reclaimer_config *cfg, struct reclaimer **out,
		    struct diag *d);
/* Stops the thread (within a second) and frees r.  NULL is a no-op. */
void reclaimer_stop(struct reclaimer *r);

#endif
