/*
 * decide: the pool (policy/pool.h): the rule "pool" (a request no usable
 * node could ever hold) for Pods, Jobs and pod templates, and the advice
 * /validate gives for what was admitted but has no room now.
 */
#include "policy/decide-int.h"

#include "base/text.h"
#include "policy/kinds.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* ---- the pool (policy/pool.h) ----------------------------------------- */

/*
 * "; 2 nodes excluded: a (cordoned), b (condition X=True)" or "", at most
 * room bytes (size > room): the nodes that do not fit become ", ..." (a
 * warning has DECIDE_WARNING_LEN bytes in all).
 */
void decide_excluded_text(const struct pool_check *pc, char *buf, size_t size,
			  size_t room)
{
	char entry[POOL_NAME_LEN + 200];
	size_t len;

	buf[0] = '\0';
	if (!pc->n_excluded)
		return;
	snprintf(buf, size, "; %zu node%s excluded: ", pc->n_excluded,
		 pc->n_excluded == 1 ? "" : "s");
	for (size_t i = 0; i < pc->n_excluded; i++) {
		const char *why;

		len = strlen(buf);
		if (i >= POOL_MAX_EXCLUDED) {
			snprintf(buf + len, size - len, ", ...");
			break;
		}
		why = pc->excluded[i].exclusion == POOL_HEALTH ||
				      pc->excluded[i].exclusion == POOL_TAINTED
			      ? pc->excluded[i].why
			      : pool_exclusion_name(pc->excluded[i].exclusion);
		snprintf(entry, sizeof(entry), "%s%s (%s)", i ? ", " : "",
			 pc->excluded[i].node, why);
		/* Room for this entry and a closing ", ..." after it (none
		 * needed after the last). */
		if (len + strlen(entry) + (i + 1 < pc->n_excluded ? 5 : 0) > room) {
			if (i)
				snprintf(buf + len, size - len, ", ...");
			else /* not even one: the count alone */
				snprintf(buf, size, "; %zu node%s excluded (gpugate pool "
					 "names them)", pc->n_excluded,
					 pc->n_excluded == 1 ? "" : "s");
			break;
		}
		snprintf(buf + len, size - len, "%s", entry);
	}
	if (strlen(buf) > room)
		buf[0] = '\0';
}

/* "all 4 nodes", or "the one node" (n == 1). */
const char *decide_nodes_text(size_t n, const char *all, char *buf, size_t size)
{
	if (n == 1)
		snprintf(buf, size, "the one node");
	else
		snprintf(buf, size, "%s %zu nodes", all, n);
	return buf;
}

static bool needs_pool_check(const struct decide_input *in, const struct decision *out)
{
	const struct quota_claim *cl = &out->claim;

	/* A Job's pod was weighed with its Job; claims have no node yet. */
	return cl->needed && !cl->owner_job_uid && cl->per_pod > 0 &&
	       (in->wl->kind == WL_POD || in->wl->kind == WL_JOB);
}

const char *decide_pool_topology(const struct decision *out)
{
	/* The class says (the plan exists at /mutate only). */
	return out->cls && out->cls->topology_mode == POLICY_TOPOLOGY_REQUIRED &&
			       out->claim.pods > 1
		       ? out->cls->topology_key
		       : NULL;
}

bool decide_pool_denies(const struct decide_input *in, const struct decision *out,
			const struct pool_check *pc)
{
	return needs_pool_check(in, out) && pc && pc->known &&
	       pc->fit.verdict == POOL_NEVER_FITS && out->mode == POLICY_MODE_ENFORCE;
}

void decide_pool_check(const struct decide_input *in, const struct decision *out,
		       struct pool_check *pc)
{
	const struct quota_claim *cl = &out->claim;

	pc->known = false;
	if (!in->pool || !cl->flavor || !needs_pool_check(in, out))
		return;
	in->pool->fit(in->pool->ctx, cl->flavor, cl->per_pod, cl->pods,
		      decide_pool_topology(out), pc);
}

bool decide_holds_units(const struct decide_input *in, const struct decision *out,
			const struct pool_check *pc, bool dry_run)
{
	return in->phase == DECIDE_VALIDATE && !dry_run && out->allowed &&
	       !decide_pool_denies(in, out, pc);
}

/* The pool's rule: a request no usable node could ever hold. */
static void pool_rule(const struct decide_input *in, struct decision *out,
		      const struct pool_check *pc)
{
	struct ctx c = {.in = in, .p = in->policy, .wl = in->wl, .out = out};
	const struct quota_claim *cl = &out->claim;
	const struct policy_flavor *f = cl->flavor;
	const struct pool_fit *fit = &pc->fit;
	const char *topo = decide_pool_topology(out);
	char ex[700], gang[160];

	if (!pc->known || !needs_pool_check(in, out) || fit->verdict != POOL_NEVER_FITS)
		return;
	/* A denial has room for every node named (up to four). */
	decide_excluded_text(pc, ex, sizeof(ex), 600);
	snprintf(gang, sizeof(gang), "the job's %" PRId64 " pods of %u %s", cl->pods,
		 cl->per_pod, f->units);
	{
		if (cl->per_pod > pc->largest_allocatable)
			decide_violate(&c, RULES_POOL, "no usable node of flavor %s can hold a pod of "
				"%u %s: the largest offers %" PRId64 " (%s)%s",
				f->name, cl->per_pod, f->units,
				pc->largest_allocatable, pc->largest_allocatable_node, ex);
		else if (topo)
			decide_violate(&c, RULES_POOL, "no %s domain of flavor %s can hold %s: the "
				"largest holds %" PRId64 "%s%s",
				topo, f->name, gang, fit->fit_empty,
				fit->n_domains ? "" : " (no usable node has the label)", ex);
		else
			decide_violate(&c, RULES_POOL, "the usable nodes of flavor %s can hold at most "
				"%" PRId64 " of %s%s",
				f->name, fit->fit_empty, gang, ex);
	}
}

/*
 * A pod template against the pool (its pods hold no claim, so pool_rule()
 * never sees them): what no usable node could ever hold is refused at the
 * door, as a Pod's or a Job's is.  One pod of a Deployment, StatefulSet,
 * ReplicaSet or DaemonSet; a CronJob's whole Job, a gang like any Job's,
 * in one domain when its class requires a topology.  All the replicas of
 * the others are not a gang (a Deployment runs with some of them, and an
 * autoscaler may add nodes): more than the flavor's usable nodes could
 * hold, even empty, is a warning at /validate.  What is in use now is
 * never weighed: the template holds nothing, and its pods meet the quota
 * and the pool one by one.
 */
void decide_template_pool(struct ctx *c)
{
	const struct workload *wl = c->wl;
	struct decision *out = c->out;
	const struct policy_flavor *f = out->flavor;
	const char *kind = decide_kind_name(wl);
	/* A CronJob's pods are a Job's: a gang. */
	bool gang = wl->def->pods == KIND_PODS_JOB;
	int64_t per_pod = out->count, pods = gang && wl->replicas > 1 ? wl->replicas : 1;
	const char *topo = gang && pods > 1 && out->cls &&
					   out->cls->topology_mode == POLICY_TOPOLOGY_REQUIRED
				   ? out->cls->topology_key
				   : NULL;
	struct pool_check pc;
	char who[96], ex[700];

	if (!c->in->pool || !f || per_pod <= 0)
		return;
	snprintf(who, sizeof(who), wl->name && wl->name[0] ? "%s \"%.63s\"" : "%s", kind,
		 wl->name);
	c->in->pool->fit(c->in->pool->ctx, f, per_pod, pods, topo, &pc);
	if (!pc.known)
		return;
	if (pc.fit.verdict == POOL_NEVER_FITS) {
		decide_excluded_text(&pc, ex, sizeof(ex), 600);
		if (per_pod > pc.largest_allocatable)
			decide_violate(c, RULES_POOL, "%s can never run a pod: no usable node of flavor "
				"%s can hold one of %" PRId64 " %s, the largest offers %"
				PRId64 " (%s)%s",
				who, f->name, per_pod, f->units, pc.largest_allocatable,
				pc.largest_allocatable_node, ex);
		else if (topo)
			decide_violate(c, RULES_POOL, "%s can never run a whole Job: no %s domain of "
				"flavor %s can hold its %" PRId64 " pods of %" PRId64 " %s, the "
				"largest holds %" PRId64 "%s%s",
				who, topo, f->name, pods, per_pod, f->units, pc.fit.fit_empty,
				pc.fit.n_domains ? "" : " (no usable node has the label)", ex);
		else
			decide_violate(c, RULES_POOL, "%s can never run a whole Job: the usable nodes of "
				"flavor %s can hold at most %" PRId64 " of its %" PRId64
				" pods of %" PRId64 " %s%s",
				who, f->name, pc.fit.fit_empty, pods, per_pod, f->units, ex);
		return;
	}
	if (gang || wl->def->pods == KIND_PODS_PER_NODE || wl->replicas <= 1 ||
	    c->in->phase != DECIDE_VALIDATE || pc.fit.verdict == POOL_NONE_USABLE ||
	    pc.fit.verdict == POOL_UNKNOWN)
		return;
	c->in->pool->fit(c->in->pool->ctx, f, per_pod, wl->replicas, NULL, &pc);
	if (pc.known && pc.fit.verdict == POOL_NEVER_FITS)
		decide_add_warning(out, "gpugate: the usable nodes of flavor %s can hold at most "
			    "%" PRId64 " of %s's %" PRId64 " pods of %" PRId64 " %s, even "
			    "empty: the others stay Pending until nodes join",
			    f->name, pc.fit.fit_empty, who, wl->replicas, per_pod, f->units);
}

/* The pool's advice, at /validate, for what was admitted: no room now. */
static void pool_advice(const struct decide_input *in, struct decision *out,
			const struct pool_check *pc)
{
	const struct quota_claim *cl = &out->claim;
	const struct policy_flavor *f = cl->flavor;
	const struct pool_fit *fit = &pc->fit;
	bool job = in->wl->kind == WL_JOB && cl->pods > 1;
	const char *topo = decide_pool_topology(out);
	const char *what = in->wl->kind == WL_JOB ? "job" : "pod";
	char ex_short[700], gang[160], n1[40];

	if (!pc->known || !needs_pool_check(in, out) || !out->allowed ||
	    in->phase != DECIDE_VALIDATE)
		return; /* advice is given once, when admitted (kubectl prints it) */
/* A warning as long as its kind may be (DECIDE_WARNING_LEN): the text
 * first, then as many excluded nodes as fit after it. */
#define ADVISE(...)                                                            \
	do {                                                                   \
		char probe_[2 * DECIDE_WARNING_LEN];                           \
		size_t len_;                                                   \
		ex_short[0] = '\0';                                            \
		snprintf(probe_, sizeof(probe_), __VA_ARGS__);                 \
		len_ = strlen(probe_);                                         \
		decide_excluded_text(pc, ex_short, sizeof(ex_short),                  \
			      len_ + 1 < DECIDE_WARNING_LEN                    \
				      ? DECIDE_WARNING_LEN - 1 - len_          \
				      : 0);                                    \
		decide_add_warning(out, __VA_ARGS__);                                 \
	} while (0)
	snprintf(gang, sizeof(gang), "the job's %" PRId64 " pods of %u %s", cl->pods,
		 cl->per_pod, f->units);
	switch (fit->verdict) {
	case POOL_UNKNOWN:
		ADVISE("gpugate: no node of flavor %s is in the cluster: the "
			    "%s waits until one joins", f->name, what);
		break;
	case POOL_NONE_USABLE:
		if (pc->n_usable)
			ADVISE("gpugate: no usable node of flavor %s offers any %s "
				    "now (allocatable 0), the %s waits until one does%s",
				    f->name, f->units, what, ex_short);
		else
			ADVISE("gpugate: %s of flavor %s %s excluded, the %s "
				    "waits until one is back%s",
				    decide_nodes_text(pc->n_nodes, "all", n1, sizeof(n1)), f->name,
				    pc->n_nodes == 1 ? "is" : "are", what, ex_short);
		break;
	case POOL_NOT_NOW:
		if (topo)
			ADVISE("gpugate: admitted, but no %s domain of flavor %s "
				    "has room for %s now: the best (%s) has room for "
				    "%" PRId64 "%s",
				    topo, f->name, gang, pc->domain, fit->fit_now, ex_short);
		else if (job)
			ADVISE("gpugate: admitted, but flavor %s has room for "
				    "%" PRId64 " of %s now (%" PRId64 " free, at most %"
				    PRId64 " on one node)%s",
				    f->name, fit->fit_now, gang, pc->free, pc->largest_free, ex_short);
		else
			ADVISE("gpugate: admitted, but no node of flavor %s has "
				    "%u %s free now: %" PRId64 " free on %zu node%s, at most %"
				    PRId64 " on one%s; the %s waits%s",
				    f->name, cl->per_pod, f->units, pc->free, pc->n_usable,
				    pc->n_usable == 1 ? "" : "s",
				    pc->largest_free,
				    pc->free >= cl->per_pod ? " (fragmentation)" : "", what,
				    ex_short);
		break;
	default:
		break;
	}
}
#undef ADVISE

void decide_quota_pool(const struct decide_input *in, struct decision *out,
		       const struct quota_result *q, const struct pool_check *pc)
{
	/* Quota speaks first: only what quota admits meets the pool's rule,
	 * recorded before decide_quota() words the plan (the decision
	 * annotation of warn and audit modes carries it). */
	if (pc && (q->position == QUOTA_NOMINAL || q->position == QUOTA_BORROWED))
		pool_rule(in, out, pc);
	decide_quota(in, out, q);
	if (pc)
		pool_advice(in, out, pc);
}
