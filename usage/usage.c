/* usage: the seam; every call goes to the store's backend (usage/backend.h). */
#include "usage/usage.h"

#include "policy/decide.h"
#include "policy/policy.h"
#include "policy/quota.h"
#include "usage/backend.h"

void usage_decide(struct usage_store *u, const struct policy *p,
		  const struct workload *wl, const struct quota_claim *c,
		  bool reserve, bool force, struct quota_result *out)
{
	if (u && u->be->decide)
		u->be->decide(u, p, wl, c, reserve, force, out);
	else
		quota_decide(p, c->tenant, c->flavor, c->units, c->may_borrow,
			     &quota_no_usage, out);
}

void usage_release(struct usage_store *u, const struct policy *p,
		   const struct workload *wl)
{
	if (u && u->be->release)
		u->be->release(u, p, wl);
}

void usage_observe(struct usage_store *u, const struct usage_item *it)
{
	if (u && u->be->observe)
		u->be->observe(u, it);
}

void usage_forget(struct usage_store *u, const char *uid)
{
	if (u && u->be->forget)
		u->be->forget(u, uid);
}

void usage_relist_begin(struct usage_store *u, enum usage_kind kind)
{
	if (u && u->be->relist_begin)
		u->be->relist_begin(u, kind);
}

void usage_relist_end(struct usage_store *u, enum usage_kind kind)
{
	if (u && u->be->relist_end)
		u->be->relist_end(u, kind);
}

void usage_set_watching(struct usage_store *u, bool up)
{
	if (u && u->be->set_watching)
		u->be->set_watching(u, up);
}

size_t usage_expire(struct usage_store *u)
{
	return u && u->be->expire ? u->be->expire(u) : 0;
}

int64_t usage_used(struct usage_store *u, const char *tenant, const char *flavor)
{
	return u && u->be->used ? u->be->used(u, tenant, flavor) : 0;
}

size_t usage_entries(struct usage_store *u)
{
	return u && u->be->entries ? u->be->entries(u) : 0;
}

void usage_foreach(struct usage_store *u, usage_sum_fn fn, void *ctx)
{
	if (u && u->be->foreach)
		u->be->foreach(u, fn, ctx);
}

void usage_each_workload(struct usage_store *u, usage_workload_fn fn, void *ctx)
{
	if (u && u->be->each_workload)
		u->be->each_workload(u, fn, ctx);
}

const char *usage_backend_name(const struct usage_store *u)
{
	return u ? u->be->name : "none";
}

void usage_free(struct usage_store *u)
{
	if (u && u->be->free)
		u->be->free(u);
}

static int64_t names_used(const void *ctx, unsigned tenant, unsigned flavor)
{
	const struct usage_names *n = ctx;

	return usage_used(n->u, policy_tenant_at(n->p, tenant)->name,
			  policy_flavor_at(n->p, flavor)->name);
}

void usage_names_view(struct usage_names *names, const struct policy *p,
		      struct usage_store *u, struct usage_view *out)
{
	names->p = p;
	names->u = u;
	out->ctx = names;
	out->used = names_used;
}
