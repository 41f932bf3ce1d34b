/* victims: which workloads the reclaimer takes back first
 * (controllers/victims.h). */
#include "controllers/victims.h"

#include "policy/policy.h"
#include "policy/quota.h"
#include "policy/reclaim.h"
#include "usage/usage.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/*
 * LowerPriority: victims must rank below the lender.  The lenders are the
 * members within their nominal quota; when every one of them says
 * LowerPriority, the bound is the highest priority among their workloads
 * (the one waiting for the units is among them).  Any lender with Any:
 * no bound.
 */
static bool priority_bound(const struct policy *p, int cohort,
			   const struct policy_flavor *f, const struct usage_view *uv,
			   const struct victims_workload *ws, size_t n, int32_t *below)
{
	bool bound = false, any = false;

	*below = INT32_MIN;
	for (size_t i = 0; i < policy_tenant_count(p); i++) {
		const struct policy_tenant *m = policy_tenant_at(p, i);
		const struct policy_quota *q = policy_tenant_quota(m, f);

		if (m->cohort_index != cohort || !q ||
		    uv->used(uv->ctx, m->index, f->index) > q->nominal)
			continue;
		if (m->reclaim == POLICY_RECLAIM_LOWER_PRIORITY)
			bound = true;
		else if (m->reclaim == POLICY_RECLAIM_ANY)
			any = true;
	}
	if (!bound || any)
		return false;
	for (size_t i = 0; i < n; i++) {
		const struct victims_workload *s = &ws[i];
		const struct policy_quota *q = policy_tenant_quota(s->tenant, f);

		if (s->flavor == f && s->tenant->cohort_index == cohort && q &&
		    uv->used(uv->ctx, s->tenant->index, f->index) <= q->nominal &&
		    s->w->priority > *below)
			*below = s->w->priority;
	}
	return true;
}

int victims_choose(const struct policy *p, int cohort, const struct policy_flavor *f,
		   const struct usage_view *uv, const struct victims_workload *ws,
		   size_t n, struct victims *out)
{
	struct reclaim_candidate *cand = calloc(n ? n : 1, sizeof(*cand));
	size_t *picked = calloc(n ? n : 1, sizeof(*picked));
	size_t nc = 0;

	memset(out, 0, sizeof(*out));
	out->candidates = calloc(n ? n : 1, sizeof(*out->candidates));
	out->picked = calloc(n ? n : 1, sizeof(*out->picked));
	if (!cand || !picked || !out->candidates || !out->picked) {
		free(cand);
		free(picked);
		victims_release(out);
		return -1;
	}
	out->deficit = quota_cohort_deficit(p, cohort, f, uv);
	out->covered = out->deficit <= 0;
	for (size_t i = 0; i < n; i++) {
		const struct victims_workload *s = &ws[i];

		if (s->flavor != f || s->tenant->cohort_index != cohort ||
		    !usage_reclaim_candidate(s->w, s->tenant->index, &cand[nc]))
			continue;
		/* Signalled: gpugate's record says so, not the tenant's
		 * annotation. */
		cand[nc].signalled = s->signalled;
		out->candidates[nc++] = i;
	}
	out->n_candidates = nc;
	if (out->deficit > 0) {
		int32_t below;
		bool has_below = priority_bound(p, cohort, f, uv, ws, n, &below);
		size_t np = reclaim_pick(p, cohort, f, uv, cand, nc, has_below, below,
					 picked, nc, &out->covered);

		for (size_t k = 0; k < np; k++)
			out->picked[k] = out->candidates[picked[k]];
		out->n_picked = np;
	}
	free(cand);
	free(picked);
	return 0;
}

void victims_release(struct victims *v)
{
	free(v->candidates);
	free(v->picked);
	memset(v, 0, sizeof(*v));
}
