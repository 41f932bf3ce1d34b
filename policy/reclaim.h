/*
 * reclaim: the pure core of checkpoint-aware reclaim of lent quota.
 *
 * Tenants of a cohort lend their unused nominal quota (policy/quota.h).
 * When a lender is then admitted on its own nominal quota while borrowers
 * still hold the lent units, the cohort holds more than its quota.  For a
 * cohort and a flavor the excess, the deficit, is
 *
 *   D = max(0, sum_M max(0, U_M - N_M) - sum_M min(L_M, max(0, N_M - U_M)))
 *
 * over the members M of the cohort (U used, N nominal, L lendingLimit,
 * L absent = N; a member with no quota entry for the flavor has N = 0 and
 * lends nothing): what the members borrow minus what they can still lend.
 * The part of a member's nominal above its lending limit is guaranteed to
 * it and never counts as lendable.
 *
 * The daemon reclaims D units by choosing victims, whole workloads, among
 * the cohort's borrowing workloads in Kueue's order; it then checkpoints
 * and suspends (Job) or evicts (Pod) them.  This module only chooses.
 *
 * Pure: every function reads its arguments and the usage view and nothing
 * else; no I/O, no clock, no globals, no allocation.
 */
#ifndef GPUGATE_RECLAIM_H
#define GPUGATE_RECLAIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct policy;
struct policy_flavor;
struct policy_tenant;
struct usage_view;

/* A workload that could be reclaimed: a Job or a bare Pod holding units
 * of the flavor being reclaimed.  Read only; never kept. */
struct reclaim_candidate {
	const char *uid;     /* the workload's uid; NULL compares as "" */
	unsigned tenant;     /* policy tenant index (policy_tenant->index) */
	int64_t units;       /* what it holds of the flavor (<= 0: not a victim) */
	int32_t priority;    /* the workload's priority */
	int64_t admitted_ms; /* when it was admitted, ms since the epoch */
	bool preemptible;    /* gpugate.io/preemptible=true: only these are victims */
	bool signalled;      /* already a victim (its checkpoint was requested) */
};

/*
 * D above for cohort cohort_index (0 <= i < policy_cohort_count) and flavor
 * f, under usage u (u->used is called once per member of the cohort, for
 * f only).  Returns 0 when cohort_index is no cohort of p (-1: the tenant
 * is in none), when nothing is borrowed, or when the cohort can still lend
 * all of it.  Never negative.
 */
int64_t reclaim_deficit(const struct policy *p, int cohort_index,
			const struct policy_flavor *f, const struct usage_view *u);

/*
 * Chooses victims to cover the deficit of cohort cohort_index and flavor f
 * under usage u, which must include what every candidate holds (they are
 * admitted).  Writes indices into c[] to picked[], in the order chosen, at
 * most cap of them, and returns how many.  c[] is not reordered or written;
 * picked[] is the only memory written besides *covered.
 *
 * A candidate can be a victim only when all of these hold:
 *   - its tenant is a member of the cohort (tenant < policy_tenant_count);
 *   - it is preemptible and holds units > 0;
 *   - with has_below (Kueue's LowerPriority mode): priority < below_priority;
 *   - its tenant still borrows (U > N, N = 0 without a quota entry) at that
 *     point of the pick, in the usage simulated so far (below).
 * The walk is in this order (Kueue's candidate order):
 *   1. signalled candidates first: a victim chosen by an earlier pass is
 *      counted again before anyone new, so a second pass or a restart
 *      picks nobody new while the victims it already has suffice;
 *   2. then the lowest priority first;
 *   3. then the most recently admitted (largest admitted_ms) first;
 *   4. then by uid (strcmp), then by index into c[], so the order is total
 *      and the result never depends on the order of c[].
 * Each victim taken is simulated: its tenant's usage of f drops by its
 * units (never below 0) and the deficit is recomputed, so a victim frees
 * less than its units when its tenant falls below nominal and its lending
 * limit caps what it lends back.  A tenant that no longer borrows has the
 * rest of its candidates skipped (usage only drops during a pick, so it
 * does not borrow again).  The pick stops as soon as the deficit is 0:
 * a deficit of 0 picks nothing, and a signalled candidate that is not
 * needed any more is not picked (the caller may withdraw its signal).
 * Victims are whole workloads: the last one may cover more than was left.
 *
 * *covered (when covered is not NULL) is set to whether the deficit is 0
 * after the victims returned: false when the eligible candidates, or cap,
 * ran out first.  Cost: O(n^2) time for n candidates (a selection walk, no
 * sort, no scratch memory), plus one u->used call per cohort member and
 * one per candidate considered; meant for n up to a few thousand.
 */
size_t reclaim_pick(const struct policy *p, int cohort_index,
		    const struct policy_flavor *f, const struct usage_view *u,
		    const struct reclaim_candidate *c, size_t n, bool has_below,
		    int32_t below_priority, size_t *picked, size_t cap,
		    bool *covered);

/*
 * reclaimWithinCohort LowerPriority at admission (Kueue keeps such a
 * workload pending): would the victims of priority below `below` cover the
 * deficit of t's cohort and flavor f once t holds `units` more (under usage
 * u, which must include what every candidate holds)?  The pick is
 * reclaim_pick()'s with that bound, on that usage.  *reclaimable is set to
 * what the eligible candidates of borrowing members hold, for the message.
 * picked[] is scratch of n entries.  A tenant in no cohort: true, 0.
 */
bool reclaim_below(const struct policy *p, const struct policy_tenant *t,
		   const struct policy_flavor *f, int64_t units,
		   const struct usage_view *u, const struct reclaim_candidate *c,
		   size_t n, int32_t below, size_t *picked, int64_t *reclaimable);

/*
 * reclaim_below() with the bound optional: has_below false weighs every
 * candidate whatever its priority (reclaimWithinCohort Any: a lender is
 * admitted "reclaims N" only when the reclaimer can take N back).
 */
bool reclaim_cover(const struct policy *p, const struct policy_tenant *t,
		   const struct policy_flavor *f, int64_t units,
		   const struct usage_view *u, const struct reclaim_candidate *c,
		   size_t n, bool has_below, int32_t below, size_t *picked,
		   int64_t *reclaimable);

/* ---- gpugate's own record of a victim (docs/design/reclaim.md "State") --- */

/*
 * What the reclaimer keeps of a victim, in its own ConfigMap (never in the
 * tenant's objects, which the tenant may edit): when it asked, when it
 * released, and whether the victim is a pod of a Job gpugate suspended.
 */
struct reclaim_record {
	int64_t signalled_ms; /* > 0 in a valid record */
	int64_t released_ms;  /* 0: not yet */
	bool of_job;          /* a pod recorded when its Job was suspended */
	/* Taken for the health loop (its pods are on a failing node,
	 * docs/design/health-loop.md), not for a cohort's lent quota. */
	bool for_health;
	/* Taken because it was idle under an idle rule of action reclaim
	 * (policy/idle.h, docs/design/idle-gpus.md): a Job suspended for it
	 * is never resumed by gpugate. */
	bool for_idle;
	/* The victim's tenant: only a gpugate whose policy has it drops the
	 * record when the workload is gone (several gpugates, or a policy
	 * that changed, share one ConfigMap).  Not empty; _parse points it
	 * into the text. */
	const char *tenant;
};

/*
 * "s=<ms> r=<ms> j=<0..7> t=<tenant>", the record's text in the ConfigMap
 * (the tenant is the rest of the text); j holds the flags, 1 of_job, 2
 * for_health and 4 for_idle (records written before the health loop have
 * j 0 or 1, before idle GPUs at most 3).  _format writes it to buf, like
 * snprintf: returns the length it needs, and a text cut short when buf
 * is too small.  _parse reads it back: 0, or -1 for any other text (a
 * missing or repeated field, a field it does not know, the fields s, r, j
 * out of that order, a signalled time <= 0, an empty tenant, a tenant
 * with a newline), *out then untouched.
 */
size_t reclaim_record_format(const struct reclaim_record *r, char *buf, size_t size);
int reclaim_record_parse(const char *text, struct reclaim_record *out);

/* What the reclaimer does next for a victim. */
enum reclaim_step {
	RECLAIM_WAIT,    /* nothing this round */
	RECLAIM_SIGNAL,  /* record signalled_ms = now; annotate; Event */
	RECLAIM_SUSPEND, /* a Job: record released_ms (first time); suspend */
	RECLAIM_EVICT,   /* a pod: record released_ms (first time); evict */
	RECLAIM_DELETE,  /* a pod: DELETE with gracePeriodSeconds = delete_grace */
};

/* What the reclaimer knows of the victim this round. */
struct reclaim_facts {
	bool job;                 /* a Job (else a pod) */
	int64_t done_ms;          /* its checkpoint report, 0: none */
	/* A released pod (read this round): */
	bool terminating;         /* metadata.deletionTimestamp is set */
	int64_t deletion_grace_s; /* metadata.deletionGracePeriodSeconds, -1: none */
	int64_t own_grace_s;      /* spec.terminationGracePeriodSeconds, -1: unset */
};

/*
 * The step for a victim with record r (NULL: none yet) at now_ms, under
 * checkpoint.timeoutSeconds timeout_s and checkpoint.gracePeriodSeconds
 * grace_s (docs/design/reclaim.md "The steps"):
 *   - no record: RECLAIM_SIGNAL;
 *   - not released: released once it reported (done_ms >= signalled_ms) or
 *     timeout_s passed since signalled_ms: RECLAIM_SUSPEND (a Job) or
 *     RECLAIM_EVICT (a pod), *reported saying which; else RECLAIM_WAIT;
 *   - released, a Job: RECLAIM_SUSPEND (it is still charged: again);
 *   - released, a pod terminating: RECLAIM_DELETE when its deletion grace
 *     is above grace_s (the apiserver shortens it), else RECLAIM_WAIT;
 *   - released, a pod not terminating: RECLAIM_DELETE once grace_s passed
 *     since released_ms; before that RECLAIM_WAIT for a pod of a Job
 *     gpugate suspended (its controller deletes it) and RECLAIM_EVICT for
 *     any other (a PodDisruptionBudget refused: again).
 * *delete_grace_s is set for RECLAIM_DELETE: min(own_grace_s, grace_s),
 * grace_s when own_grace_s < 0.  reported and delete_grace_s may be NULL.
 */
enum reclaim_step reclaim_next(const struct reclaim_record *r,
			       const struct reclaim_facts *f, int64_t now_ms,
			       int64_t timeout_s, int64_t grace_s, bool *reported,
			       int64_t *delete_grace_s);

#endif
