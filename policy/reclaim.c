/*
 * Reclaim of lent quota: the deficit and the choice of victims.
 *
 * The deficit is a sum of one signed term per member M (quota_excess(),
 * policy/quota.h),
 *   excess(M) = max(0, U_M - N_M) - min(L_M, max(0, N_M - U_M)),
 * what M borrows minus what M can still lend, so D = max(0, sum excess).
 * A pick keeps that sum and, after each victim, replaces the term of the
 * victim's tenant only.
 *
 * Victims are chosen by a selection walk over c[] in the order of
 * ranks_before(): each step scans all of c[] for the first candidate that
 * ranks after the one taken last.  The order is total (the index breaks the
 * last tie), so each candidate is met exactly once: O(n) a step, O(n^2) in
 * all, and no scratch array.  The simulated usage of a tenant is its usage
 * in the view minus the units of the victims picked so far of that tenant,
 * summed from picked[] itself.
 */
#include "policy/reclaim.h"
#include "base/text.h"

#include "policy/policy.h"
#include "policy/quota.h"

#include <stdio.h>
#include <string.h>

static int64_t max64(int64_t a, int64_t b)
{
	return a > b ? a : b;
}

static bool valid_cohort(const struct policy *p, int cohort_index)
{
	return cohort_index >= 0 && (size_t)cohort_index < policy_cohort_count(p);
}

static int64_t nominal_of(const struct policy_tenant *t, const struct policy_flavor *f)
{
	const struct policy_quota *q = policy_tenant_quota(t, f);

	return q ? q->nominal : 0;
}

int64_t reclaim_deficit(const struct policy *p, int cohort_index,
			const struct policy_flavor *f, const struct usage_view *u)
{
	if (!valid_cohort(p, cohort_index))
		return 0;
	return quota_cohort_deficit(p, cohort_index, f, u);
}

/* True when c[a] comes before c[b] in Kueue's order (see reclaim.h). */
static bool ranks_before(const struct reclaim_candidate *c, size_t a, size_t b)
{
	const struct reclaim_candidate *x = &c[a], *y = &c[b];
	int by_uid;

	if (x->signalled != y->signalled)
		return x->signalled;
	if (x->priority != y->priority)
		return x->priority < y->priority;
	if (x->admitted_ms != y->admitted_ms)
		return x->admitted_ms > y->admitted_ms;
	by_uid = strcmp(x->uid ? x->uid : "", y->uid ? y->uid : "");
	if (by_uid != 0)
		return by_uid < 0;
	return a < b;
}

/* The rules that do not depend on the pick so far. */
static bool may_be_victim(const struct policy *p, int cohort_index,
			  const struct reclaim_candidate *c, bool has_below,
			  int32_t below_priority)
{
	if (c->tenant >= policy_tenant_count(p))
		return false;
	if (policy_tenant_at(p, c->tenant)->cohort_index != cohort_index)
		return false;
	if (!c->preemptible || c->units <= 0)
		return false;
	return !has_below || c->priority < below_priority;
}

/* Tenant t's usage of f once the victims picked[0..k) are gone. */
static int64_t simulated_used(const struct usage_view *u,
			      const struct policy_flavor *f, unsigned t,
			      const struct reclaim_candidate *c,
			      const size_t *picked, size_t k)
{
	int64_t used = u->used(u->ctx, t, f->index);

	for (size_t i = 0; i < k; i++)
		if (c[picked[i]].tenant == t)
			used -= c[picked[i]].units;
	return max64(0, used);
}

size_t reclaim_pick(const struct policy *p, int cohort_index,
		    const struct policy_flavor *f, const struct usage_view *u,
		    const struct reclaim_candidate *c, size_t n, bool has_below,
		    int32_t below_priority, size_t *picked, size_t cap,
		    bool *covered)
{
	int64_t sum;
	size_t k = 0, last = 0;
	bool have_last = false;

	if (!valid_cohort(p, cohort_index)) {
		if (covered)
			*covered = true;
		return 0;
	}
	/* The deficit before its max with 0, kept as the picks go. */
	sum = 0;
	for (size_t i = 0; i < policy_tenant_count(p); i++) {
		const struct policy_tenant *t = policy_tenant_at(p, i);

		if (t->cohort_index == cohort_index)
			sum += quota_excess(t, f, u->used(u->ctx, t->index, f->index));
	}
	while (sum > 0 && k < cap) {
		const struct policy_tenant *t;
		size_t best = 0;
		bool have_best = false;
		int64_t before, after;

		for (size_t i = 0; i < n; i++) {
			if (!may_be_victim(p, cohort_index, &c[i], has_below,
					   below_priority))
				continue;
			if (have_last && !ranks_before(c, last, i))
				continue;
			if (!have_best || ranks_before(c, i, best)) {
				best = i;
				have_best = true;
			}
		}
		if (!have_best)
			break;
		last = best;
		have_last = true;

		t = policy_tenant_at(p, c[best].tenant);
		before = simulated_used(u, f, t->index, c, picked, k);
		if (before <= nominal_of(t, f))
			continue; /* no longer borrows: not a victim */
		after = max64(0, before - c[best].units);
		sum += quota_excess(t, f, after) - quota_excess(t, f, before);
		picked[k++] = best;
	}
	if (covered)
		*covered = sum <= 0;
	return k;
}

/* The usage of a view with `units` more for one tenant and flavor: the
 * cohort as it would be with a request admitted. */
struct with_request {
	const struct usage_view *u;
	unsigned tenant, flavor;
	int64_t units;
};

static int64_t with_request_used(const void *ctx, unsigned tenant, unsigned flavor)
{
	const struct with_request *x = ctx;
	int64_t used = x->u->used(x->u->ctx, tenant, flavor);

	return tenant == x->tenant && flavor == x->flavor ? used + x->units : used;
}

bool reclaim_below(const struct policy *p, const struct policy_tenant *t,
		   const struct policy_flavor *f, int64_t units,
		   const struct usage_view *u, const struct reclaim_candidate *c,
		   size_t n, int32_t below, size_t *picked, int64_t *reclaimable)
{
	return reclaim_cover(p, t, f, units, u, c, n, true, below, picked, reclaimable);
}

bool reclaim_cover(const struct policy *p, const struct policy_tenant *t,
		   const struct policy_flavor *f, int64_t units,
		   const struct usage_view *u, const struct reclaim_candidate *c,
		   size_t n, bool has_below, int32_t below, size_t *picked,
		   int64_t *reclaimable)
{
	struct with_request x = {.u = u, .tenant = t->index, .flavor = f->index,
				 .units = units};
	struct usage_view after = {.ctx = &x, .used = with_request_used};
	bool covered = true;

	*reclaimable = 0;
	if (!valid_cohort(p, t->cohort_index))
		return true;
	for (size_t i = 0; i < n; i++) {
		const struct policy_tenant *m;

		if (!may_be_victim(p, t->cohort_index, &c[i], has_below, below))
			continue;
		m = policy_tenant_at(p, c[i].tenant);
		if (after.used(after.ctx, m->index, f->index) > nominal_of(m, f))
			*reclaimable += c[i].units;
	}
	reclaim_pick(p, t->cohort_index, f, &after, c, n, has_below, below, picked, n,
		     &covered);
	return covered;
}

size_t reclaim_record_format(const struct reclaim_record *r, char *buf, size_t size)
{
	int n = snprintf(buf, size, "s=%lld r=%lld j=%d t=%s", (long long)r->signalled_ms,
			 (long long)r->released_ms, (r->of_job ? 1 : 0) | (r->for_health ? 2 : 0) |
				 (r->for_idle ? 4 : 0),
			 r->tenant ? r->tenant : "");

	return n < 0 ? 0 : (size_t)n;
}

int reclaim_record_parse(const char *text, struct reclaim_record *out)
{
	struct reclaim_record r = {0};
	const char *tenant;
	int64_t v[3];

	if (text_record_parse(text, "srj", v, &tenant) < 0 || v[0] <= 0 || v[2] > 7)
		return -1;
	r.signalled_ms = v[0];
	r.released_ms = v[1];
	r.of_job = v[2] & 1;
	r.for_health = v[2] & 2;
	r.for_idle = v[2] & 4;
	r.tenant = tenant;
	*out = r;
	return 0;
}

enum reclaim_step reclaim_next(const struct reclaim_record *r,
			       const struct reclaim_facts *f, int64_t now_ms,
			       int64_t timeout_s, int64_t grace_s, bool *reported,
			       int64_t *delete_grace_s)
{
	bool done;

	if (reported)
		*reported = false;
	if (delete_grace_s)
		*delete_grace_s = f->own_grace_s >= 0 && f->own_grace_s < grace_s
					  ? f->own_grace_s
					  : grace_s;
	if (!r || r->signalled_ms <= 0)
		return RECLAIM_SIGNAL;
	if (!r->released_ms) {
		done = f->done_ms && f->done_ms >= r->signalled_ms;
		if (!done && now_ms - r->signalled_ms < timeout_s * 1000)
			return RECLAIM_WAIT;
		if (reported)
			*reported = done;
		return f->job ? RECLAIM_SUSPEND : RECLAIM_EVICT;
	}
	if (f->job)
		return RECLAIM_SUSPEND;
	if (f->terminating)
		return f->deletion_grace_s > grace_s ? RECLAIM_DELETE : RECLAIM_WAIT;
	if (now_ms - r->released_ms >= grace_s * 1000)
		return RECLAIM_DELETE;
	return r->of_job ? RECLAIM_WAIT : RECLAIM_EVICT;
}
