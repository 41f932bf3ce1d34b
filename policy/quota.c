/*
 * Quota arithmetic, Kueue style, for one flat cohort.
 *
 * For tenant T asking R units of flavor F, with usage U and nominal N:
 *   U + R <= N                         -> nominal
 *   else, in a cohort, with need = U + R - N:
 *     need <= B (when B is set) and
 *     need <= pool - others_borrowing  -> borrowed, min(R, need) of it
 *   else                               -> over (or never fits)
 * where, over the other members M of the cohort:
 *   pool             = sum of min(L_M, max(0, N_M - U_M)), L_M absent = N_M
 *   others_borrowing = sum of max(0, U_M - N_M)
 * A member's nominal minus its lending limit is guaranteed to it; the rest
 * of its unused nominal is lendable; what members already borrow is taken
 * from that pool first.
 *
 * Reclaim: a request within nominal (U + R <= N) takes units of T's own
 * unused nominal quota, and the lendable part of those may be lent out.
 * With deficit = sum of max(0, U_M - N_M) - sum of min(L_M, max(0, N_M -
 * U_M)) over all members (T included), the request needs reclaimed what it
 * adds to the deficit: deficit(U_T + R) - deficit(U_T).  Kueue never lets
 * a cohort hold more than its quota: with reclaimWithinCohort Never that
 * is a denial (the workload waits), else gpugate admits and reclaims.
 *
 * "Never fits" compares R alone with the most T could ever hold: N when in
 * no cohort, N + B with a borrowing limit, else N + every member's lendable
 * nominal.
 */
#include "policy/quota.h"

#include "policy/policy.h"

#include <stddef.h>

static int64_t max64(int64_t a, int64_t b)
{
	return a > b ? a : b;
}

static int64_t min64(int64_t a, int64_t b)
{
	return a < b ? a : b;
}

static int64_t nothing_used(const void *ctx, unsigned tenant, unsigned flavor)
{
	(void)ctx;
	(void)tenant;
	(void)flavor;
	return 0;
}

const struct usage_view quota_no_usage = {.ctx = NULL, .used = nothing_used};

int64_t quota_excess(const struct policy_tenant *t, const struct policy_flavor *f,
		     int64_t used)
{
	const struct policy_quota *q = policy_tenant_quota(t, f);
	int64_t nominal = q ? q->nominal : 0;
	int64_t cap = !q ? 0 : q->lending_limit == POLICY_NO_LIMIT ? q->nominal
								   : q->lending_limit;

	return max64(0, used - nominal) - min64(cap, max64(0, nominal - used));
}

/* The cohort's deficit, with `extra` units added to tenant t's usage (t
 * NULL: as it is).  Borrowers are noted in out when out is not NULL. */
static int64_t deficit(const struct policy *p, int cohort_index,
		       const struct policy_flavor *f, const struct usage_view *u,
		       const struct policy_tenant *t, int64_t extra,
		       struct quota_result *out)
{
	int64_t sum = 0;

	for (size_t i = 0; i < policy_tenant_count(p); i++) {
		const struct policy_tenant *m = policy_tenant_at(p, i);
		const struct policy_quota *mq;
		int64_t mu, over;

		if (m->cohort_index != cohort_index)
			continue;
		mq = policy_tenant_quota(m, f);
		mu = u->used(u->ctx, m->index, f->index) + (m == t ? extra : 0);
		over = max64(0, mu - (mq ? mq->nominal : 0));
		sum += quota_excess(m, f, mu);
		if (out && over > 0 && m != t) {
			if (out->n_borrowers < QUOTA_MAX_NAMED)
				out->borrowers[out->n_borrowers] =
					(struct quota_borrower){m->name, over};
			out->n_borrowers++;
		}
	}
	return max64(0, sum);
}

int64_t quota_cohort_deficit(const struct policy *p, int cohort_index,
			     const struct policy_flavor *f,
			     const struct usage_view *u)
{
	if (cohort_index < 0)
		return 0;
	return deficit(p, cohort_index, f, u, NULL, 0, NULL);
}

const char *quota_position_name(enum quota_position pos)
{
	switch (pos) {
	case QUOTA_NOMINAL:
		return "nominal";
	case QUOTA_BORROWED:
		return "borrowed";
	case QUOTA_OVER:
		return "over";
	case QUOTA_NEVER_FITS:
		return "never-fits";
	case QUOTA_NO_QUOTA:
		return "no-quota";
	case QUOTA_NOT_PREPARED:
		return "not-prepared";
	case QUOTA_COVERED:
		return "covered";
	case QUOTA_UNAVAILABLE:
		return "unavailable";
	case QUOTA_LENT_OUT:
		return "lent-out";
	case QUOTA_RECLAIM_SHORT:
		return "reclaim-short";
	}
	return "unknown";
}

void quota_decide(const struct policy *p, const struct policy_tenant *t,
		  const struct policy_flavor *f, int64_t units, bool may_borrow,
		  const struct usage_view *u, struct quota_result *out)
{
	const struct policy_quota *q = policy_tenant_quota(t, f);
	int64_t pool = 0, others_borrowing = 0, lendable = 0, need, own_borrowing;

	*out = (struct quota_result){
		.requested = units,
		.borrowing_limit = POLICY_NO_LIMIT,
		.cohort = t->cohort,
	};
	if (!q) {
		out->position = QUOTA_NO_QUOTA;
		return;
	}
	out->used = u->used(u->ctx, t->index, f->index);
	out->nominal = q->nominal;
	out->borrowing_limit = t->cohort ? q->borrowing_limit : POLICY_NO_LIMIT;

	if (t->cohort) {
		for (size_t i = 0; i < policy_tenant_count(p); i++) {
			const struct policy_tenant *m = policy_tenant_at(p, i);
			const struct policy_quota *mq;
			int64_t mu, cap;

			if (m == t || m->cohort_index != t->cohort_index)
				continue;
			mq = policy_tenant_quota(m, f);
			mu = u->used(u->ctx, m->index, f->index);
			if (!mq) {
				/* No nominal: anything it holds is borrowed. */
				others_borrowing += max64(0, mu);
				continue;
			}
			cap = mq->lending_limit == POLICY_NO_LIMIT ? mq->nominal
								   : mq->lending_limit;
			lendable += cap;
			pool += min64(cap, max64(0, mq->nominal - mu));
			others_borrowing += max64(0, mu - mq->nominal);
		}
	}
	out->cohort_lendable = lendable;

	if (!t->cohort)
		out->ceiling = q->nominal;
	else if (q->borrowing_limit != POLICY_NO_LIMIT)
		out->ceiling = q->nominal + min64(q->borrowing_limit, lendable);
	else
		out->ceiling = q->nominal + lendable;

	own_borrowing = max64(0, out->used - q->nominal);
	out->can_lend = max64(0, pool - others_borrowing - own_borrowing);
	if (out->borrowing_limit != POLICY_NO_LIMIT)
		out->can_lend = min64(out->can_lend, max64(0, q->borrowing_limit -
								own_borrowing));
	if (!t->cohort)
		out->can_lend = 0;

	if (units > out->ceiling) {
		out->position = QUOTA_NEVER_FITS;
		return;
	}
	if (out->used + units <= q->nominal) {
		out->position = QUOTA_NOMINAL;
		if (!t->cohort)
			return;
		out->reclaim = deficit(p, t->cohort_index, f, u, t, units, out) -
			       deficit(p, t->cohort_index, f, u, t, 0, NULL);
		if (out->reclaim <= 0) {
			out->reclaim = 0;
			out->n_borrowers = 0;
		} else if (t->reclaim == POLICY_RECLAIM_NEVER) {
			out->position = QUOTA_LENT_OUT;
		}
		return;
	}
	need = out->used + units - q->nominal;
	if (t->cohort &&
	    (q->borrowing_limit == POLICY_NO_LIMIT || need <= q->borrowing_limit) &&
	    need <= pool - others_borrowing) {
		out->borrowed = min64(units, need);
		out->position = may_borrow ? QUOTA_BORROWED : QUOTA_NOT_PREPARED;
		return;
	}
	out->position = QUOTA_OVER;
}

int64_t quota_nominal_sum(const struct policy *p, const struct policy_flavor *f)
{
	int64_t sum = 0;

	for (size_t i = 0; i < policy_tenant_count(p); i++) {
		const struct policy_quota *q = policy_tenant_quota(policy_tenant_at(p, i), f);

		if (q)
			sum += q->nominal;
	}
	return sum;
}
