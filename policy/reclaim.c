/* TEMPORARY (replaced by the pick branch): reclaim_pick per the brief. */
#include "policy/reclaim.h"

#include "policy/policy.h"
#include "policy/quota.h"

#include <stdlib.h>
#include <string.h>

int64_t reclaim_deficit(const struct policy *p, int cohort_index,
			const struct policy_flavor *f, const struct usage_view *u)
{
	return quota_cohort_deficit(p, cohort_index, f, u);
}

struct sim {
	const struct usage_view *base;
	const struct reclaim_candidate *c;
	const bool *taken;
	size_t n;
};

static int64_t sim_used(const void *ctx, unsigned tenant, unsigned flavor)
{
	const struct sim *s = ctx;
	int64_t u = s->base->used(s->base->ctx, tenant, flavor);

	for (size_t i = 0; i < s->n; i++)
		if (s->taken[i] && s->c[i].tenant == tenant)
			u -= s->c[i].units;
	return u;
}

/* a before b in Kueue's order */
static bool before(const struct reclaim_candidate *a, const struct reclaim_candidate *b)
{
	if (a->signalled != b->signalled)
		return a->signalled;
	if (a->priority != b->priority)
		return a->priority < b->priority;
	if (a->admitted_ms != b->admitted_ms)
		return a->admitted_ms > b->admitted_ms;
	return a->uid && b->uid && strcmp(a->uid, b->uid) < 0;
}

size_t reclaim_pick(const struct policy *p, int cohort_index, const struct policy_flavor *f,
		    const struct usage_view *u, const struct reclaim_candidate *c, size_t n,
		    bool has_below, int32_t below_priority, size_t *picked, size_t cap,
		    bool *covered)
{
	bool *taken = calloc(n ? n : 1, sizeof(*taken));
	bool *tried = calloc(n ? n : 1, sizeof(*tried));
	struct sim s = {u, c, taken, n};
	struct usage_view v = {&s, sim_used};
	size_t np = 0;
	int64_t d;

	if (!taken || !tried) {
		free(taken);
		free(tried);
		if (covered)
			*covered = false;
		return 0;
	}
	d = quota_cohort_deficit(p, cohort_index, f, &v);
	while (d > 0 && np < cap) {
		size_t best = n;

		for (size_t i = 0; i < n; i++) {
			const struct policy_tenant *t = policy_tenant_at(p, c[i].tenant);
			const struct policy_quota *q = t ? policy_tenant_quota(t, f) : NULL;

			if (tried[i] || !t || t->cohort_index != cohort_index || !c[i].preemptible)
				continue;
			if (!c[i].signalled && has_below && c[i].priority >= below_priority)
				continue;
			if (v.used(v.ctx, c[i].tenant, f->index) <= (q ? q->nominal : 0))
				continue;
			if (best == n || before(&c[i], &c[best]))
				best = i;
		}
		if (best == n)
			break;
		tried[best] = true;
		taken[best] = true;
		picked[np++] = best;
		d = quota_cohort_deficit(p, cohort_index, f, &v);
	}
	if (covered)
		*covered = d <= 0;
	free(taken);
	free(tried);
	return np;
}
