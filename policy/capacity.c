/* capacity: effective capacity, the rule of policy/capacity.h. */
#include "policy/capacity.h"

#include "policy/policy.h"
#include "policy/pool.h"
#include "policy/quota.h"

static int64_t used_of(const struct usage_view *u, const struct policy_tenant *t,
		       const struct policy_flavor *f)
{
	int64_t v = u ? u->used(u->ctx, t->index, f->index) : 0;

	return v > 0 ? v : 0;
}

/* What the other members of t's cohort hold of f beyond their nominal
 * quota: units t takes back by reclaim (or gets when they end), so they
 * back its nominal quota as much as free ones do. */
static int64_t cohort_borrowed(const struct policy *p, const struct policy_tenant *t,
			       const struct policy_flavor *f,
			       const struct usage_view *u)
{
	int64_t sum = 0;

	if (t->cohort_index < 0)
		return 0;
	for (size_t i = 0; i < policy_tenant_count(p); i++) {
		const struct policy_tenant *o = policy_tenant_at(p, i);
		const struct policy_quota *q = policy_tenant_quota(o, f);
		int64_t used;

		if (o == t || o->cohort_index != t->cohort_index || !q)
			continue;
		used = used_of(u, o, f);
		if (used > q->nominal)
			sum += used - q->nominal;
	}
	return sum;
}

void capacity_of(const struct policy *p, const struct policy_flavor *f,
		 const struct pool_summary *s, const struct usage_view *u,
		 struct capacity_flavor *out, struct capacity_tenant *tenants,
		 size_t *n_tenants)
{
	size_t n = 0;

	*out = (struct capacity_flavor){.flavor = f};
	if (s) {
		for (int e = POOL_USABLE; e <= POOL_TAINTED; e++)
			if (s->nodes[e])
				out->known = true;
		if (s->capacity)
			out->known = true;
		out->capacity = s->capacity;
		out->usable = s->allocatable;
		out->excluded = s->excluded;
		out->free = s->free;
	}
	out->promised = quota_nominal_sum(p, f);
	if (out->known && out->promised > out->usable)
		out->unbacked = out->promised - out->usable;
	for (size_t i = 0; i < policy_tenant_count(p); i++) {
		const struct policy_tenant *t = policy_tenant_at(p, i);
		const struct policy_quota *q = policy_tenant_quota(t, f);
		struct capacity_tenant ct;

		if (!q)
			continue;
		ct = (struct capacity_tenant){.tenant = t, .nominal = q->nominal,
					      .used = used_of(u, t, f)};
		if (out->known) {
			int64_t held = ct.used < ct.nominal ? ct.used : ct.nominal;
			int64_t back = cohort_borrowed(p, t, f, u);

			/* Borrowed units on excluded nodes back nothing. */
			if (s && back > s->allocated)
				back = s->allocated;
			ct.reclaimable = back;
			ct.short_by = ct.nominal - held - out->free - back;
			if (ct.short_by < 0)
				ct.short_by = 0;
		}
		if (ct.short_by > 0)
			out->n_short++;
		if (tenants)
			tenants[n] = ct;
		n++;
	}
	if (n_tenants)
		*n_tenants = n;
}
