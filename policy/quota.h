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
	char reason[160];        /* QUOTA_UNAVAILABLE: why, one line */
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

/* The nominal quota of every tenant for flavor f, summed: what the policy
 * promises of f at once (borrowing moves units, it adds none). */
int64_t quota_nominal_sum(const struct policy *p, const struct policy_flavor *f);

/* "nominal", "borrowed", "over", ... for logs and metrics. */
const char *quota_position_name(enum quota_position pos);

#endif
