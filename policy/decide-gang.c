/*
 * decide: gang start (SPEC section 9, policy/gang.h): which route a Job of
 * a `gang: true` class takes, and what /validate refuses of a gang's Job
 * and pods.  The route is chosen once, at the Job's /mutate, from the
 * policy and what the cluster serves (decide_input.gang_served), and
 * stamped on the Job and its template (STAMP_GANG_ROUTE): a Job in flight
 * keeps it whatever the cluster serves later.
 */
#include "policy/decide-int.h"
#include "policy/gang.h"
#include "base/text.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* The pods of a Job's gang: min(parallelism, completions). */
static int64_t gang_pods(const struct workload *wl)
{
	if (wl->has_completions && wl->completions < wl->parallelism)
		return wl->completions;
	return wl->parallelism;
}

/* A scheduling gate of the template that is not gpugate's, or NULL. */
static const char *foreign_gate(const struct wl_pod *pod)
{
	for (size_t i = 0; i < pod->n_scheduling_gates; i++)
		if (strcmp(pod->scheduling_gates[i], GANG_GATE) != 0)
			return pod->scheduling_gates[i];
	return NULL;
}

/*
 * Who else already starts the Job (the contract: never overwrite what the
 * user, Kueue or another scheduler set), into why; false: nobody.  What
 * gpugate wrote itself (a re-invocation, route stamped) is not someone
 * else's.
 */
static bool left_to_other(const struct workload *wl, enum gang_route stamped,
			  const char *gang_id, char *why, size_t size)
{
	const char *gate = foreign_gate(&wl->pod);

	if (wl->has_scheduling && stamped != GANG_WORKLOAD)
		snprintf(why, size, "left to its own spec.scheduling");
	else if (gate)
		snprintf(why, size, "left to scheduling gate %.80s", gate);
	else if (wl->pod.pod_group_name &&
		 !(stamped == GANG_PODGROUP && strcmp(wl->pod.pod_group_name, gang_id) == 0))
		snprintf(why, size, "left to PodGroup %.80s", wl->pod.pod_group_name);
	else if (wl->pod.scheduler_name &&
		 strcmp(wl->pod.scheduler_name, GANG_DEFAULT_SCHEDULER) != 0)
		snprintf(why, size, "left to scheduler %.80s", wl->pod.scheduler_name);
	else
		return false;
	return true;
}

/* Whether route r can run with what is served: its objects need someone
 * to act (the controller), route workload the Job field. */
static bool route_runs(enum gang_route r, unsigned served)
{
	switch (r) {
	case GANG_WORKLOAD:
		/* Chosen by the operator before the probe answered: trusted. */
		return !(served & GANG_SERVES_KNOWN) ||
		       (served & GANG_SERVES_JOB_SCHEDULING);
	case GANG_PODGROUP:
		return (served & GANG_SERVES_PODGROUP) && (served & GANG_SERVES_CONTROLLER);
	case GANG_GATES:
		return (served & GANG_SERVES_CONTROLLER) != 0;
	default:
		return false;
	}
}

enum gang_route decide_gang_route(const struct policy *p, const struct policy_class *cls,
				  const struct workload *wl, unsigned served,
				  const char *gang_id, char *why, size_t size)
{
	const struct policy_settings *s = policy_settings(p);
	enum gang_route stamped = GANG_NONE, r;
	const char *have = decide_annotation(wl, STAMP_GANG_ROUTE);

	why[0] = '\0';
	if (wl->kind != WL_JOB || !cls || !cls->gang)
		return GANG_NONE;
	if (gang_pods(wl) <= 1) {
		snprintf(why, size, "none (one pod)");
		return GANG_NONE;
	}
	if (s->gang_start == POLICY_GANG_OFF) {
		snprintf(why, size, "off (settings.gangStart)");
		return GANG_NONE;
	}
	/* Its own route again (a re-invocation), when it still runs: never
	 * "none" from the user, nor a route this cluster drops. */
	if (gang_route_parse(have, &stamped) && stamped != GANG_NONE &&
	    !route_runs(stamped, served))
		stamped = GANG_NONE;
	if (left_to_other(wl, stamped, gang_id, why, size))
		return GANG_NONE;
	if (stamped != GANG_NONE)
		return stamped;
	switch (s->gang_start) {
	case POLICY_GANG_WORKLOAD:
		r = GANG_WORKLOAD;
		break;
	case POLICY_GANG_PODGROUP:
		r = GANG_PODGROUP;
		break;
	case POLICY_GANG_GATES:
		r = GANG_GATES;
		break;
	default:
		/* The scheduler's routes only where every pod runs at once:
		 * their minCount stays the gang's, so the last pods of a Job
		 * with more completions than parallelism (or a gang that lost
		 * a pod after some completed) would wait for pods that never
		 * come (docs/design/gang-start.md, Q2).  Route gates counts
		 * what is still to run. */
		r = gang_auto_route(served);
		if (r != GANG_GATES && wl->has_completions &&
		    wl->completions > wl->parallelism)
			r = route_runs(GANG_GATES, served) ? GANG_GATES : GANG_NONE;
		break;
	}
	if (r == GANG_NONE) {
		snprintf(why, size, "none (no route: gpugate runs without the API)");
		return GANG_NONE;
	}
	if (!route_runs(r, served)) {
		snprintf(why, size, "none (settings.gangStart %s: %s)", gang_route_name(r),
			 served & GANG_SERVES_CONTROLLER ? "not served here"
							 : "gpugate runs without the API");
		return GANG_NONE;
	}
	return r;
}

/* buf += a b, cut to size. */
static void append(char *buf, size_t size, const char *a, const char *b)
{
	size_t n = strlen(buf);

	if (n + 1 < size)
		text_cat(buf + n, size - n, a, b, NULL);
}

/* The route part of a Job's plan at /mutate (decide-plan.c). */
void decide_gang_plan(struct ctx *c)
{
	const struct workload *wl = c->wl;
	const struct policy_class *cls = c->out->cls;
	struct plan *pl = &c->out->plan;
	char why[160];

	if (wl->kind == WL_POD) {
		/* A Job's pod on route gates: the gate its template gave it,
		 * where someone made the pod without it. */
		const char *r = decide_annotation(wl, STAMP_GANG_ROUTE);

		pl->gang_gate = wl->owner_job && r && strcmp(r, "gates") == 0 &&
				wl->op == WL_CREATE;
		return;
	}
	pl->gang_route = decide_gang_route(c->p, cls, wl, c->in->gang_served,
					   pl->gang, why, sizeof(why));
	if (pl->gang_route == GANG_NONE) {
		if (why[0])
			append(pl->decision, sizeof(pl->decision), "; gang start ", why);
		return;
	}
	pl->gang_pods = gang_pods(wl);
	pl->gang_topology = pl->gang_route != GANG_GATES &&
			    cls->topology_mode == POLICY_TOPOLOGY_REQUIRED &&
			    (c->in->gang_served & GANG_SERVES_TOPOLOGY);
	append(pl->decision, sizeof(pl->decision), "; gang start: ",
	       gang_route_name(pl->gang_route));
}

bool decide_gpugate_user(const struct decide_input *in)
{
	const char *u = in->wl->user;
	char sa[300];

	if (!u)
		return false;
	if (in->self_user && strcmp(u, in->self_user) == 0)
		return true;
	if (!in->self_namespace || !in->self_namespace[0])
		return false;
	snprintf(sa, sizeof(sa), "system:serviceaccount:%s:", in->self_namespace);
	return strncmp(u, sa, strlen(sa)) == 0;
}

/* The pod names a class that says gang: made by hand for a Job of it, it
 * would skip the gang even without the route its template carries. */
static bool gang_class(const struct ctx *c)
{
	const char *name = decide_label(c->wl, policy_settings(c->p)->class_label);
	const struct policy_class *cls = name ? policy_class_find(c->p, name) : NULL;

	return cls && cls->gang;
}

static bool has_gate(const struct wl_pod *pod)
{
	for (size_t i = 0; i < pod->n_scheduling_gates; i++)
		if (strcmp(pod->scheduling_gates[i], GANG_GATE) == 0)
			return true;
	return false;
}

/* /validate of a gang's Job or pod (CREATE and UPDATE): the moves that
 * would start part of a gang early.  True when final. */
bool decide_gang_guard(struct ctx *c)
{
	const struct workload *wl = c->wl, *old = c->in->old;
	const char *route = decide_annotation(wl, STAMP_GANG_ROUTE);
	const char *was = old ? decide_annotation(old, STAMP_GANG_ROUTE) : NULL;

	if (old && was && (!route || strcmp(route, was) != 0))
		return decide_violate(c, RULES_GANG,
			"annotation " STAMP_GANG_ROUTE " is set by gpugate and cannot "
			"be changed or removed (it is \"%.20s\"): it says how the "
			"gang starts", was);
	if (wl->kind == WL_POD && wl->op == WL_CREATE && wl->pod.node_name &&
	    (route || (wl->owner_job && gang_class(c))))
		return decide_violate(c, RULES_GANG,
			"a pod of a gang (Job %.63s) cannot name spec.nodeName: its gang "
			"starts all at once through the scheduler; leave nodeName unset",
			wl->owner_job ? wl->owner_job : "?");
	if (wl->kind == WL_POD && old && has_gate(&old->pod) && !has_gate(&wl->pod) &&
	    !decide_gpugate_user(c->in))
		return decide_violate(c, RULES_GANG,
			"scheduling gate " GANG_GATE " is removed by gpugate only, "
			"when the whole gang has room: the pod waits for its gang "
			"(kubectl describe pod says why)");
	/* A suspended Job's template may lose its gates (Kubernetes' mutable
	 * scheduling directives): its next pods would start one by one. */
	if (wl->kind == WL_JOB && old && has_gate(&old->pod) && !has_gate(&wl->pod))
		return decide_violate(c, RULES_GANG,
			"scheduling gate " GANG_GATE " cannot be removed from the Job's "
			"pod template: its pods start all at once when gpugate releases "
			"them");
	if (wl->kind == WL_JOB && old && route && strcmp(route, "workload") == 0 &&
	    old->scheduling_gang &&
	    (!wl->scheduling_gang || wl->gang_min_count < old->gang_min_count))
		return decide_violate(c, RULES_GANG,
			"spec.scheduling.schedulingPolicy.gang.minCount cannot be lowered "
			"(it is %" PRId64 "): the Job starts all or nothing "
			"(its class says gang)",
			old->gang_min_count);
	return false;
}
