/*
 * quota: the pure quota arithmetic of SPEC section 5 (Kueue cohort
 * semantics), deciding one request against a snapshot of usage.
 *
 * Units are the flavor's resource (GPUs, MIG slices, shared replicas).
 * Usage is read through a small view so that the ledger can run the
 * arithmetic under its own lock, against its own state, and tests can run
 * it against a plain array.
 */
#ifndef GPUGATE_QUOTA_H
#define GPUGATE_QUOTA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct policy;
struct policy_tenant;
struct policy_flavor;

/* Read-only usage: units of flavor f held by tenant t right now. */
struct usage_view {
	const void *ctx;
	int64_t (*used)(const void *ctx, unsigned tenant, unsigned flavor);
};

/* A view in which nothing is in use. */
extern const struct usage_view quota_no_usage;

enum quota_position {
	QUOTA_NOMINAL,       /* fits in the tenant's nominal quota */
	QUOTA_BORROWED,      /* fits with `borrowed` units from the cohort */
	QUOTA_OVER,          /* does not fit now */
	QUOTA_NEVER_FITS,    /* could not fit even in an empty cluster */
	QUOTA_NO_QUOTA,      /* the tenant has no quota entry for the flavor */
	QUOTA_NOT_PREPARED,  /* would borrow, but the caller may not borrow */
	QUOTA_COVERED,       /* a Job's pod: the Job's reservation holds it */
	QUOTA_UNAVAILABLE,   /* the usage store cannot decide now (reason) */
	/* Fits the nominal quota, but `reclaim` of the units are lent out to
	 * borrowers and the tenant's reclaimWithinCohort is Never: denied
	 * until they come back (Kueue's answer: the workload waits). */
	QUOTA_LENT_OUT,
	/* The same with reclaimWithinCohort LowerPriority when the borrowing
	 * workloads of lower priority than the request cannot give back the
	 * `reclaim` units (reclaim_below(); Kueue keeps it pending): denied
	 * until they come back.  `below` is the request's priority and
	 * `reclaimable` what those workloads hold.  With Any (any_priority)
	 * when the cohort's candidates, whatever their priority, cannot. */
	QUOTA_RECLAIM_SHORT,
};

/* At most this many borrowers are named in a quota result. */
#define QUOTA_MAX_NAMED 4

/* A member of the cohort that holds more than its nominal quota. */
struct quota_borrower {
	const char *tenant; /* points into the policy */
	int64_t borrowed;   /* units held beyond its nominal quota */
};

struct quota_result {
	enum quota_position position;
	int64_t requested;       /* R */
	int64_t used;            /* U, before this request */
	int64_t nominal;         /* N */
	int64_t borrowing_limit; /* B, POLICY_NO_LIMIT when absent */
	int64_t borrowed;        /* units of R on borrowed quota (position BORROWED) */
	int64_t can_lend;        /* what the cohort could still lend the tenant */
	int64_t ceiling;         /* most the tenant could ever hold */
	int64_t cohort_lendable; /* sum of the other members' lendable nominal */
	const char *cohort;      /* NULL when the tenant is in no cohort */
	const char *holder;      /* QUOTA_COVERED: the Job holding the units */
	/*
	 * Units of the nominal quota this request takes that are lent out:
	 * what the cohort would hold beyond its members' quotas after the
	 * request, less what it already held beyond them before.  With
	 * position QUOTA_NOMINAL (reclaimWithinCohort Any or LowerPriority)
	 * gpugate reclaims them from the borrowers; QUOTA_LENT_OUT denies.
	 */
	int64_t reclaim;
	/* Who borrows in the cohort now, in policy order (when reclaim > 0):
	 * the first QUOTA_MAX_NAMED, and how many there are in all. */
	struct quota_borrower borrowers[QUOTA_MAX_NAMED];
	size_t n_borrowers;
	/* QUOTA_RECLAIM_SHORT: the request's priority, and the units the
	 * borrowing workloads of lower priority hold. */
	int32_t below;
	/* reclaimWithinCohort Any: no priority bound, `below` means nothing;
	 * `reclaimable` is what the cohort's candidates hold. */
	bool any_priority;
	int64_t reclaimable;
	char reason[320];        /* QUOTA_UNAVAILABLE: why, one line */
};

/*
 * Decides a request of `units` (> 0) for tenant t on flavor f.  may_borrow
 * false turns a position that needs borrowing into QUOTA_NOT_PREPARED (the
 * workload was not made preemptible, so it may only use nominal quota).
 * Pure: reads p, the view, and nothing else.
 */
void quota_decide(const struct policy *p, const struct policy_tenant *t,
		  const struct policy_flavor *f, int64_t units, bool may_borrow,
		  const struct usage_view *u, struct quota_result *out);

/*
 * The units cohort `cohort_index` holds of flavor f beyond what its
 * members' quotas allow: what its members borrow, less the lendable part
 * (at most lendingLimit) of the nominal quota they leave unused; 0 when it
 * holds no more than that.  A lender admitted on nominal quota while its
 * units were lent out makes it positive until the borrowers give them
 * back.
 */
int64_t quota_cohort_deficit(const struct policy *p, int cohort_index,
			     const struct policy_flavor *f,
			     const struct usage_view *u);

/* One member's part of that deficit when it uses `used` of f: what it
 * borrows (max(0, used - nominal)) less what it can still lend (min(L,
 * max(0, nominal - used))); no quota entry: nominal 0, lends nothing. */
int64_t quota_excess(const struct policy_tenant *t, const struct policy_flavor *f,
		     int64_t used);

/* The nominal quota of every tenant for flavor f, summed: what the policy
 * promises of f at once (borrowing moves units, it adds none). */
int64_t quota_nominal_sum(const struct policy *p, const struct policy_flavor *f);

/* "nominal", "borrowed", "over", ... for logs and metrics. */
const char *quota_position_name(enum quota_position pos);

#endif
