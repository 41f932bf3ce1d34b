/*
 * The quota outcome: what the usage store's answer (struct quota_result)
 * makes of a decision prepared by decide_prepare(): admitted within
 * nominal, borrowing or covered by a reclaim, or one of the quota
 * denials with its numbers (docs/users.md lists them).  A ResourceClaim's
 * outcome is decide-dra.c's.
 */
#include "policy/decide-int.h"

#include <inttypes.h>
#include <stdio.h>

void decide_quota(const struct decide_input *in, struct decision *out,
		  const struct quota_result *q)
{
	struct ctx c = {.in = in, .p = in->policy, .wl = in->wl, .out = out};
	const struct quota_claim *cl = &out->claim;
	const char *cls = out->cls ? out->cls->name : "none";
	const char *what = in->wl->kind == WL_JOB ? "job" : "pod";
	char req[160];

	if (in->wl->kind == WL_CLAIM) {
		decide_claim_quota(&c, q);
		return;
	}
	out->has_quota = true;
	out->quota = *q;
	/* Kueue admitted it and owns this tenant's quota: gpugate counts it
	 * and says what its own numbers are, never refuses it for them. */
	if (cl->kueue_quota && out->mode == POLICY_MODE_ENFORCE &&
	    q->position != QUOTA_UNAVAILABLE)
		out->mode = POLICY_MODE_WARN;
	if (in->wl->kind == WL_JOB)
		snprintf(req, sizeof(req), "%" PRId64 " (parallelism %" PRId64
			 " x %u, class %s)", cl->units, cl->pods, cl->per_pod, cls);
	else
		snprintf(req, sizeof(req), "%" PRId64 " (class %s)", cl->units, cls);

	switch (q->position) {
	case QUOTA_NOMINAL:
	case QUOTA_BORROWED:
	case QUOTA_COVERED:
		break;
	case QUOTA_UNAVAILABLE:
		decide_unavailable(&c, q);
		break;
	case QUOTA_LENT_OUT:
	case QUOTA_RECLAIM_SHORT:
		decide_lent_out(&c, q, cl->tenant->name, cl->flavor->name, req);
		break;
	case QUOTA_NO_QUOTA:
		decide_violate(&c, RULES_QUOTA,
			"tenant \"%s\" has no quota for flavor %s (class %s); ask the "
			"platform team for quota",
			cl->tenant->name, cl->flavor->name, cls);
		break;
	case QUOTA_NEVER_FITS: {
		char ceiling[200];

		decide_ceiling_text(q, ceiling, sizeof(ceiling));
		if (in->wl->kind == WL_JOB)
			decide_violate(&c, RULES_QUOTA,
				"job can never be admitted: needs %" PRId64 " %s "
				"(parallelism %" PRId64 " x %u), tenant \"%s\" may hold at "
				"most %" PRId64 " (%s)",
				cl->units, cl->flavor->name, cl->pods, cl->per_pod,
				cl->tenant->name, q->ceiling, ceiling);
		else
			decide_violate(&c, RULES_QUOTA,
				"pod can never be admitted: needs %" PRId64 " %s, tenant "
				"\"%s\" may hold at most %" PRId64 " (%s)",
				cl->units, cl->flavor->name, cl->tenant->name, q->ceiling,
				ceiling);
		break;
	}
	case QUOTA_OVER: {
		char tail[200];
		int64_t own = q->used > q->nominal ? q->used - q->nominal : 0;

		if (!q->cohort)
			snprintf(tail, sizeof(tail), "no cohort to borrow from");
		else if (q->borrowing_limit != POLICY_NO_LIMIT &&
			 q->used + q->requested - q->nominal > q->borrowing_limit &&
			 q->borrowing_limit - own <= q->can_lend)
			snprintf(tail, sizeof(tail),
				 "borrowing limit %" PRId64 " leaves %" PRId64,
				 q->borrowing_limit,
				 q->borrowing_limit > own ? q->borrowing_limit - own : 0);
		else
			snprintf(tail, sizeof(tail), "cohort \"%s\" can lend %" PRId64,
				 q->cohort, q->can_lend);
		decide_violate(&c, RULES_QUOTA,
			"tenant \"%s\" is over its %s quota: requested %s, in use "
			"%" PRId64 " of nominal %" PRId64 ", %s",
			cl->tenant->name, cl->flavor->name, req, q->used, q->nominal,
			tail);
		break;
	}
	case QUOTA_NOT_PREPARED:
		if (!out->cls)
			/* Without a class nothing makes it preemptible: it may
			 * only ever use nominal quota. */
			decide_violate(&c, RULES_QUOTA,
				"tenant \"%s\" is over its %s quota: requested %s, in "
				"use %" PRId64 " of nominal %" PRId64 "; a %s without a "
				"class never borrows (gpugate cannot make it "
				"preemptible): ask for GPUs with a class",
				cl->tenant->name, cl->flavor->name, req, q->used,
				q->nominal, what);
		else
			decide_violate(&c, RULES_QUOTA,
				"tenant \"%s\" now needs %" PRId64 " borrowed %s for "
				"this %s, but it was not made preemptible when it was "
				"mutated (the quota changed in between); retry the "
				"request",
				cl->tenant->name, q->borrowed, cl->flavor->name, what);
		break;
	}
	decide_finish(&c);
}
