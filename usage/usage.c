/* usage: the seam; every call goes to the store's backend (usage/backend.h). */
#include "usage/usage.h"

#include "base/arena.h"
#include "base/text.h"
#include "policy/decide.h"
#include "policy/policy.h"
#include "policy/quota.h"
#include "policy/reclaim.h"
#include "usage/backend.h"

#include <stdlib.h>
#include <string.h>

bool usage_reclaim_candidate(const struct usage_workload *w, unsigned tenant,
			     struct reclaim_candidate *out)
{
	/* A pod that names a Job and is not covered by its gang (the Job is
	 * suspended or finished, no controller manages it, or the pod is
	 * beyond the gang) holds its units on its own: a victim of its own,
	 * preemptible as its Job's pods are (issue #26: pods forged onto a
	 * Job nobody manages were never taken back). */
	*out = (struct reclaim_candidate){
		.uid = w->uid,
		.tenant = tenant,
		.units = w->units,
		.priority = w->priority,
		.admitted_ms = w->created_ms,
		.preemptible = w->preemptible || w->owned,
		.signalled = w->signalled_ms != 0,
	};
	return true;
}

/* The reclaim candidates of one cohort and flavor, copied out of the
 * store (its strings live for the callback only). */
struct candidates {
	const struct policy *p;
	int cohort;
	const struct policy_flavor *f;
	struct reclaim_candidate *c;
	size_t n, cap;
	struct arena a;
	bool oom;
};

static void add_candidate(void *ctx, const struct usage_workload *w)
{
	struct candidates *x = ctx;
	const struct policy_tenant *t = policy_tenant_find(x->p, w->tenant);
	struct reclaim_candidate rc;

	if (x->oom || !t || t->cohort_index != x->cohort ||
	    policy_flavor_find(x->p, w->flavor) != x->f ||
	    !usage_reclaim_candidate(w, t->index, &rc))
		return;
	if (x->n == x->cap) {
		size_t cap = x->cap ? 2 * x->cap : 64;
		struct reclaim_candidate *c = realloc(x->c, cap * sizeof(*c));

		if (!c) {
			x->oom = true;
			return;
		}
		x->c = c;
		x->cap = cap;
	}
	rc.uid = arena_strdup(&x->a, w->uid ? w->uid : "");
	if (!rc.uid) {
		x->oom = true;
		return;
	}
	x->c[x->n++] = rc;
}

/*
 * reclaimWithinCohort LowerPriority: a request admitted on nominal quota
 * whose units are lent out is admitted only when the borrowing workloads
 * of lower priority can give them back (reclaim_below()); else
 * QUOTA_RECLAIM_SHORT.  Returns whether it turned *out into that.
 */
static bool lower_priority_short(struct usage_store *u, const struct policy *p,
				 const struct quota_claim *c, struct quota_result *out)
{
	bool any = c->tenant->reclaim == POLICY_RECLAIM_ANY;

	struct candidates x = {.p = p, .cohort = c->tenant->cohort_index,
			       .f = c->flavor};
	struct usage_names names;
	struct usage_view view;
	size_t *picked;
	int64_t reclaimable = 0;
	bool covered = true;

	if (out->position != QUOTA_NOMINAL || out->reclaim <= 0)
		return false;
	arena_init(&x.a);
	usage_each_workload(u, add_candidate, &x);
	picked = x.oom ? NULL : calloc(x.n ? x.n : 1, sizeof(*picked));
	if (picked) {
		usage_names_view(&names, p, u, &view);
		covered = reclaim_cover(p, c->tenant, c->flavor, c->units, &view, x.c,
					x.n, !any, c->priority, picked, &reclaimable);
	}
	free(picked);
	free(x.c);
	arena_release(&x.a);
	if (!picked) {
		out->position = QUOTA_UNAVAILABLE;
		text_cat(out->reason, sizeof(out->reason),
			 "out of memory while weighing the workloads to reclaim", NULL);
		return true;
	}
	if (covered)
		return false;
	out->position = QUOTA_RECLAIM_SHORT;
	out->below = c->priority;
	out->any_priority = any;
	out->reclaimable = reclaimable;
	return true;
}

static void backend_decide(struct usage_store *u, const struct policy *p,
			   const struct workload *wl, const struct quota_claim *c,
			   bool reserve, bool force, struct quota_result *out)
{
	if (u && u->be->decide)
		u->be->decide(u, p, wl, c, reserve, force, out);
	else
		quota_decide(p, c->tenant, c->flavor, c->units, c->may_borrow,
			     &quota_no_usage, out);
}

void usage_decide(struct usage_store *u, const struct policy *p,
		  const struct workload *wl, const struct quota_claim *c,
		  bool reserve, bool force, struct quota_result *out)
{
	struct quota_result peek;

	/* Any and LowerPriority: admitted "reclaims N" only for what the
	 * reclaimer can take back (issue #26); Never denies in quota_decide. */
	if (!c->tenant->cohort || (c->tenant->reclaim != POLICY_RECLAIM_LOWER_PRIORITY &&
				   c->tenant->reclaim != POLICY_RECLAIM_ANY)) {
		backend_decide(u, p, wl, c, reserve, force, out);
		return;
	}
	if (!reserve) {
		backend_decide(u, p, wl, c, false, force, out);
		lower_priority_short(u, p, c, out);
		return;
	}
	/* Weighed before anything is held, so that a denial holds nothing.
	 * The victims are weighed apart from the reservation's lock: a
	 * workload that comes or goes in between changes only who is
	 * reclaimed, which the reclaimer works out again every round. */
	backend_decide(u, p, wl, c, false, force, &peek);
	if (lower_priority_short(u, p, c, &peek) && !force) {
		*out = peek;
		return;
	}
	backend_decide(u, p, wl, c, true, force, out);
	if (peek.position == QUOTA_RECLAIM_SHORT && out->position == QUOTA_NOMINAL &&
	    out->reclaim > 0) {
		/* warn and audit modes: held all the same, and said. */
		out->position = QUOTA_RECLAIM_SHORT;
		out->below = peek.below;
		out->any_priority = peek.any_priority;
		out->reclaimable = peek.reclaimable;
	}
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

static bool same(const char *a, const char *b)
{
	return strcmp(a ? a : "", b ? b : "") == 0;
}

bool usage_gang_fits(const struct usage_holding *job, const struct usage_holding *pod)
{
	return job->per_pod == pod->per_pod && same(job->namespace, pod->namespace) &&
	       same(job->tenant, pod->tenant) && same(job->flavor, pod->flavor);
}

int64_t usage_claim_ride(const struct usage_holding *pod,
			 const struct usage_holding *claim)
{
	if (!pod || !same(pod->namespace, claim->namespace) ||
	    !same(pod->tenant, claim->tenant) || !same(pod->flavor, claim->flavor))
		return claim->per_pod;
	return claim->per_pod > pod->per_pod ? claim->per_pod - pod->per_pod : 0;
}

bool usage_gang_takes(const struct usage_holding *job, int64_t slots,
		      int64_t riders, const struct usage_holding *pod)
{
	return riders < slots && usage_gang_fits(job, pod);
}

bool usage_gang(struct usage_store *u, const char *job_uid, struct usage_gang *out)
{
	memset(out, 0, sizeof(*out));
	return u && u->be->gang && job_uid && job_uid[0] && u->be->gang(u, job_uid, out);
}

void usage_gang_holding(const struct usage_gang *g, struct usage_holding *out)
{
	*out = (struct usage_holding){.namespace = g->namespace, .tenant = g->tenant,
				      .flavor = g->flavor, .per_pod = g->per_pod};
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
