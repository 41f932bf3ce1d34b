/*
 * victims: which workloads the reclaimer takes back first, the pure part
 * of its round (controllers/reclaimer.h): for one cohort and flavor, the
 * deficit (what the cohort holds over its quota, policy/quota.h
 * quota_cohort_deficit), the candidates (its borrowing, preemptible
 * workloads of the flavor, usage/usage.h usage_reclaim_candidate), the
 * priority bound of reclaimWithinCohort LowerPriority, and the victims in
 * the order they are taken (policy/reclaim.h reclaim_pick: Kueue's order,
 * signalled ones first, whole workloads, only as many as needed).
 *
 * No I/O and no lock of its own: it reads the usage view it is given.
 */
#ifndef GPUGATE_VICTIMS_H
#define GPUGATE_VICTIMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct policy;
struct policy_flavor;
struct policy_tenant;
struct usage_view;
struct usage_workload;

/* One workload the reclaimer saw this round. */
struct victims_workload {
	const struct usage_workload *w;
	const struct policy_tenant *tenant; /* w's tenant in p */
	const struct policy_flavor *flavor; /* w's flavor in p */
	bool signalled;                     /* gpugate's record says it was asked */
};

struct victims {
	int64_t deficit;      /* what the cohort holds over its quota of f; >= 0 */
	/* Indices into ws: the cohort's candidates of f (whether or not
	 * picked), in the order of ws. */
	size_t *candidates;
	size_t n_candidates;
	/* Indices into ws: the victims, in the order they are taken. */
	size_t *picked;
	size_t n_picked;
	/* The victims cover the deficit (true when there is none). */
	bool covered;
};

/*
 * The choice for cohort (an index of p's cohorts) and flavor f under uv,
 * among ws[0..n).  LowerPriority: when every lender (a member within its
 * nominal quota) of the cohort says LowerPriority and none Any, victims
 * rank below the highest priority among the lenders' workloads in ws.
 * 0 with *out (victims_release() it), or -1 when out of memory (nothing
 * to release).
 */
int victims_choose(const struct policy *p, int cohort, const struct policy_flavor *f,
		   const struct usage_view *uv, const struct victims_workload *ws,
		   size_t n, struct victims *out);
void victims_release(struct victims *v);

#endif
