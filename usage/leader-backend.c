/*
 * The leader backend of usage/leader-backend.h: a memory ledger on every
 * replica, and reserving decisions made where role() says.
 */
#include "usage/leader-backend.h"

#include "policy/quota.h"
#include "usage/backend.h"
#include "usage/usage.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct leader {
	struct usage_store store; /* first: the seam points here */
	struct usage_leader_config cfg;
	struct usage_store *ledger; /* a memory store, fenced by role() */
};

static const struct usage_backend leader_backend;

static struct leader *leader_of(struct usage_store *u)
{
	return (struct leader *)u;
}

static void unavailable(struct quota_result *out, const char *why)
{
	memset(out, 0, sizeof(*out));
	out->position = QUOTA_UNAVAILABLE;
	snprintf(out->reason, sizeof(out->reason), "%s", why);
}

/* The ledger's fence: only the leader reserves, and only while it leads. */
static bool fence(void *ctx, char *why, size_t size)
{
	struct leader *l = ctx;
	char who[USAGE_ROLE_WHO_MAX] = "";

	switch (l->cfg.role(l->cfg.ctx, who, sizeof(who))) {
	case USAGE_ROLE_LEAD:
		return true;
	case USAGE_ROLE_FOLLOW:
		snprintf(why, size, "this replica does not lead quota decisions "
				    "(the replica at %s does)", who);
		return false;
	case USAGE_ROLE_NONE:
	default:
		snprintf(why, size, "%s", who[0] ? who : "no replica leads quota decisions");
		return false;
	}
}

static void ledger_decide(struct leader *l, const struct policy *p,
			  const struct workload *wl, const struct quota_claim *c,
			  bool reserve, bool force, struct quota_result *out)
{
	char why[sizeof(out->reason)] = "";

	l->ledger->be->decide(l->ledger, p, wl, c, reserve, force, out);
	/*
	 * Decided while leading (the fence); still leading now?  A process
	 * paused inside the decision (SIGSTOP, a frozen cgroup) past its
	 * renew deadline may wake up after another replica took over: its
	 * answer is then no longer its to give.  The units it reserved stay
	 * in its ledger until they expire (an over-count, never an
	 * over-admission).
	 */
	if (reserve && out->position != QUOTA_UNAVAILABLE && !fence(l, why, sizeof(why))) {
		char line[sizeof(out->reason)];

		snprintf(line, sizeof(line), "lost the lead while deciding: %s", why);
		unavailable(out, line);
	}
}

static void leader_decide(struct usage_store *u, const struct policy *p,
			  const struct workload *wl, const struct quota_claim *c,
			  bool reserve, bool force, struct quota_result *out)
{
	struct leader *l = leader_of(u);
	char who[USAGE_ROLE_WHO_MAX] = "", why[sizeof(out->reason)] = "";

	/* A peek (/mutate, dry runs) is this replica's ledger's: what its
	 * watch shows, as with the shared store. */
	if (!reserve) {
		ledger_decide(l, p, wl, c, false, force, out);
		return;
	}
	switch (l->cfg.role(l->cfg.ctx, who, sizeof(who))) {
	case USAGE_ROLE_LEAD:
		/* role() is asked again under the ledger's lock (fence()). */
		ledger_decide(l, p, wl, c, true, force, out);
		return;
	case USAGE_ROLE_FOLLOW:
		if (l->cfg.forward(l->cfg.ctx, who, p, wl, c, force, out, why,
				   sizeof(why)) < 0) {
			char line[sizeof(out->reason)];

			snprintf(line, sizeof(line), "the replica that decides quota "
						     "(%s) did not answer: %s", who, why);
			unavailable(out, line);
		}
		return;
	case USAGE_ROLE_NONE:
	default:
		unavailable(out, who[0] ? who : "no replica leads quota decisions now");
		return;
	}
}

void usage_leader_reserve(struct usage_store *u, const struct policy *p,
			  const struct workload *wl, const struct quota_claim *c,
			  bool force, struct quota_result *out)
{
	if (!u || u->be != &leader_backend) {
		unavailable(out, "this replica does not keep usage with --usage-store leader");
		return;
	}
	/* Never forwarded again: the fence answers for a replica that does
	 * not lead (any more). */
	ledger_decide(leader_of(u), p, wl, c, true, force, out);
}

/* ---- the rest is the ledger's ------------------------------------------- */

static void leader_release(struct usage_store *u, const struct policy *p,
			   const struct workload *wl)
{
	usage_release(leader_of(u)->ledger, p, wl);
}

static void leader_observe(struct usage_store *u, const struct usage_item *it)
{
	usage_observe(leader_of(u)->ledger, it);
}

static void leader_forget(struct usage_store *u, const char *uid)
{
	usage_forget(leader_of(u)->ledger, uid);
}

static void leader_relist_begin(struct usage_store *u, enum usage_kind kind)
{
	usage_relist_begin(leader_of(u)->ledger, kind);
}

static void leader_relist_end(struct usage_store *u, enum usage_kind kind)
{
	usage_relist_end(leader_of(u)->ledger, kind);
}

static void leader_set_watching(struct usage_store *u, bool up)
{
	usage_set_watching(leader_of(u)->ledger, up);
}

static size_t leader_expire(struct usage_store *u)
{
	return usage_expire(leader_of(u)->ledger);
}

static int64_t leader_used(struct usage_store *u, const char *tenant,
			   const char *flavor)
{
	return usage_used(leader_of(u)->ledger, tenant, flavor);
}

static size_t leader_entries(struct usage_store *u)
{
	return usage_entries(leader_of(u)->ledger);
}

static void leader_foreach(struct usage_store *u, usage_sum_fn fn, void *ctx)
{
	usage_foreach(leader_of(u)->ledger, fn, ctx);
}

static void leader_each_workload(struct usage_store *u, usage_workload_fn fn,
				 void *ctx)
{
	usage_each_workload(leader_of(u)->ledger, fn, ctx);
}

static bool leader_gang(struct usage_store *u, const char *job_uid,
			struct usage_gang *out)
{
	return usage_gang(leader_of(u)->ledger, job_uid, out);
}

static void leader_free(struct usage_store *u)
{
	struct leader *l = leader_of(u);

	usage_free(l->ledger);
	free(l);
}

static const struct usage_backend leader_backend = {
	.name = "leader",
	.decide = leader_decide,
	.release = leader_release,
	.observe = leader_observe,
	.forget = leader_forget,
	.relist_begin = leader_relist_begin,
	.relist_end = leader_relist_end,
	.set_watching = leader_set_watching,
	.expire = leader_expire,
	.used = leader_used,
	.entries = leader_entries,
	.foreach = leader_foreach,
	.each_workload = leader_each_workload,
	.gang = leader_gang,
	.free = leader_free,
};

struct usage_store *usage_leader_new(const struct usage_leader_config *cfg)
{
	struct usage_memory_config mc;
	struct leader *l;

	if (!cfg || !cfg->role || !cfg->forward)
		return NULL;
	l = calloc(1, sizeof(*l));
	if (!l)
		return NULL;
	l->store.be = &leader_backend;
	l->cfg = *cfg;
	mc = cfg->memory;
	mc.may_reserve = fence;
	mc.fence_ctx = l;
	l->ledger = usage_memory_new(&mc);
	if (!l->ledger) {
		free(l);
		return NULL;
	}
	return &l->store;
}
