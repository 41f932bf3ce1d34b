/*
 * The decision engine.  Rules run in this order; the first violation is
 * the one reported (docs/users.md lists every message):
 *
 *   1. not a Pod or Job, or not a CREATE           -> allowed untouched
 *   2. no class, no flavor resource                 -> security rules
 *      (every namespace when the pod can reach GPU nodes, else tenant
 *      namespaces only: check_security); forged stamps stripped
 *   3. raw flavor resources without a class         -> no-tenant, raw-request,
 *      two-flavors, raw-flavor (a shared resource must select one flavor),
 *      sharing, security; quota when the resource is one flavor
 *   4. a class: class-conflict, no-tenant, class-unknown, class-not-allowed,
 *      gpus-invalid, sharing, container-unknown, init/other containers'
 *      flavor resources (two-flavors), security, node-selector conflicts,
 *      at /validate not-mutated, then quota (decide_quota)
 *   DRA (a ResourceClaim or ResourceClaimTemplate CREATE asking for a GPU
 *      device class; decide-dra.c): no-tenant, raw-request, allocation-all,
 *      two-flavors, sharing, then quota
 *
 * This file holds the entry points (policy/decide.h) and that order; the
 * rules and messages are in the other parts (policy/decide-int.h lists
 * them).
 */
#include "policy/decide-int.h"

#include "base/text.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* ---- entry points ----------------------------------------------------- */

static void init_decision(const struct decide_input *in, struct decision *out)
{
	memset(out, 0, sizeof(*out));
	out->allowed = true;
	out->code = 200;
	out->mode = policy_settings(in->policy)->mode;
}

static const char *class_of(struct ctx *c)
{
	const struct workload *wl = c->wl;
	const char *key = policy_settings(c->p)->class_label;
	const char *pod = wl_get(wl->pod.labels, wl->pod.n_labels, key);
	const char *job = wl->kind == WL_JOB || wl->kind == WL_TEMPLATE
				  ? wl_get(wl->labels, wl->n_labels, key)
				  : NULL;

	if (pod && job && strcmp(pod, job) != 0) {
		decide_violate(c, RULES_CLASS_CONFLICT,
			"the %s asks for class \"%.63s\" but its pod template asks "
			"for class \"%.63s\"; use one",
			decide_kind_name(wl), job, pod);
		return NULL;
	}
	return pod ? pod : job;
}

/* The first of keys[0, n) whose label differs between old and now
 * (changed, removed or added), with its old value in *was (NULL: added);
 * NULL when none does. */
static const char *label_changed(const struct workload *old, const struct workload *now,
				 const char *const *keys, size_t n, const char **was)
{
	for (size_t i = 0; i < n; i++) {
		const char *a = wl_get(old->labels, old->n_labels, keys[i]);
		const char *b = wl_get(now->labels, now->n_labels, keys[i]);

		if ((a || b) && (!a || !b || strcmp(a, b) != 0)) {
			*was = a;
			return keys[i];
		}
	}
	return NULL;
}

/*
 * UPDATE: the stamped labels are gpugate's record of who holds what; a
 * user who could drop them would drop out of quota accounting.
 */
static void check_stamps_unchanged(struct ctx *c)
{
	static const char *const keys[] = {STAMP_TENANT, STAMP_FLAVOR, STAMP_GANG,
					   STAMP_PREEMPTIBLE};
	const char *was, *key = label_changed(c->in->old, c->wl, keys,
					      sizeof(keys) / sizeof(keys[0]), &was);

	if (key && was)
		decide_violate(c, RULES_STAMP_CHANGED,
			"label %s is set by gpugate and cannot be changed or "
			"removed (it is \"%.63s\")",
			key, was);
	else if (key)
		decide_violate(c, RULES_STAMP_CHANGED,
			"label %s is set by gpugate and cannot be added by an "
			"update",
			key);
}

/*
 * UPDATE of a running GPU Job: its gang was reserved for the pods it could
 * run at once, charge_job_slots() (min(parallelism, completions)), and its
 * pods are admitted against that reservation.  Whatever raises that number
 * (parallelism, or completions of an elastic Indexed Job) would add pods
 * nobody judged.  A Job suspended before the update holds nothing: it may
 * grow, and its resume is judged whole (decide_update()).  Which Job is a
 * GPU Job is its template's charge, never its labels (a jobs/status writer
 * can change those).
 */
static void check_slots_not_raised(struct ctx *c)
{
	const struct workload *now = c->wl, *old = c->in->old;
	int64_t was = charge_job_slots(old), will = charge_job_slots(now);
	struct charge held;

	if (now->kind != WL_JOB || old->job_suspended || will <= was)
		return;
	charge_decide(c->p, old, &held);
	if (!held.flavor)
		return;
	if (now->parallelism > old->parallelism &&
	    (!now->has_completions || now->completions >= now->parallelism))
		decide_violate(c, RULES_PARALLELISM_RAISED,
			"the parallelism of a GPU Job cannot be raised (from %" PRId64
			" to %" PRId64 "): its gang was admitted for %" PRId64 "; "
			"create a new Job instead",
			old->parallelism, now->parallelism, was);
	else
		decide_violate(c, RULES_PARALLELISM_RAISED,
			"a GPU Job cannot be made to run more pods at once (from "
			"%" PRId64 " to %" PRId64 ": parallelism %" PRId64
			", completions %" PRId64 "): its gang was admitted for %" PRId64
			"; create a new Job instead",
			was, will, now->parallelism, now->completions, was);
}

/*
 * At /validate: the claim is what the object holds by the charge rule, so
 * that what is reserved is what the watch will count, whatever the mode
 * (warn and audit relax the verdict, never the accounting).  A pod that
 * names two flavors' resources could be charged for one only: denied in
 * every mode.
 */
static void claim_from_charge(struct ctx *c)
{
	const struct charge *ch = &c->charge;
	struct decision *out = c->out;
	bool may_borrow = out->claim.needed && out->claim.may_borrow;

	if (ch->two_flavors) {
		out->mode = POLICY_MODE_ENFORCE;
		out->violation = false;
		decide_violate(c, RULES_TWO_FLAVORS,
			"this workload asks for resources of two flavors (%s and "
			"another); a pod may use one flavor only",
			ch->flavor->units);
		return;
	}
	memset(&out->claim, 0, sizeof(out->claim));
	if (!ch->active)
		return;
	out->claim = (struct quota_claim){
		.needed = true,
		.tenant = ch->tenant,
		.flavor = ch->flavor,
		.units = ch->units,
		.per_pod = (unsigned)(ch->per_pod > UINT32_MAX ? UINT32_MAX : ch->per_pod),
		.pods = ch->slots,
		.may_borrow = may_borrow,
		.owner_job_uid = ch->owner_job_uid,
	};
	if (!out->flavor)
		out->flavor = ch->flavor;
}

int32_t decide_priority(const struct workload *wl, const char *class_priority,
			const struct priority_view *pv)
{
	const struct wl_pod *pod = &wl->pod;
	const char *name = pod->priority_class_name;
	int32_t v = 0;

	/* The class's priorityClassName replaces none the user chose
	 * (decide_class()); the apiserver then resolves it again. */
	if (class_priority && !name)
		name = class_priority;
	else if (wl->kind == WL_POD && pod->has_priority)
		return pod->priority; /* the Priority plugin's answer */
	if (pv && pv->value(pv->ctx, name, &v))
		return v;
	return 0; /* Kubernetes' priority without a class or a default */
}

/*
 * Does Kueue really hold the workload, so that its quota is Kueue's word?
 * The queue label alone is anybody's to write.  Kueue holds a Job by
 * suspending it and admits it by resuming it, so a resume is Kueue's (a Job
 * created running was not suspended by Kueue: Kueue does not manage it);
 * it holds a bare Pod behind its scheduling gate.
 */
static bool kueue_holds(const struct ctx *c)
{
	const struct workload *wl = c->wl;

	if (wl->kind == WL_JOB)
		return wl->op == WL_UPDATE && c->in->old && c->in->old->job_suspended;
	for (size_t i = 0; wl->kind == WL_POD && i < wl->pod.n_scheduling_gates; i++)
		if (strcmp(wl->pod.scheduling_gates[i], KUEUE_ADMISSION_GATE) == 0)
			return true;
	return false;
}

/* The rules of a CREATE (or of a Job being resumed), then the claim. */
static void judge(struct ctx *c)
{
	const struct workload *wl = c->wl;
	struct decision *out = c->out;
	const char *class_name, *raw = NULL;

	if (c->in->phase == DECIDE_VALIDATE && wl->op == WL_CREATE &&
	    decide_gang_guard(c))
		return;
	class_name = class_of(c);
	if (out->violation) {
		/* class-conflict: nothing to map */
	} else if (decide_dra_entries(c, class_name) || decide_raw_device_class(c)) {
		/* a GPU device class no flavor maps, asked for by name */
	} else if (class_name) {
		decide_class(c, class_name);
	} else {
		raw = charge_pod_resource(c->p, &wl->pod, NULL);
		if (raw)
			decide_raw(c, raw);
		else
			decide_check_security(c, -1);
	}
	if (!out->allowed)
		return;
	if (wl->kind == WL_TEMPLATE) {
		/* Its pods are charged one by one, as they are created. */
		if (out->cls)
			decide_template_ceiling(c);
		if (!out->violation)
			decide_template_pool(c);
		memset(&out->claim, 0, sizeof(out->claim));
		return;
	}
	out->queue = decide_label(wl, KUEUE_QUEUE_LABEL);
	if (!out->queue && wl->kind == WL_JOB && out->cls && out->tenant &&
	    c->in->phase == DECIDE_MUTATE)
		out->queue = out->tenant->local_queue; /* stamped (plan_mapping) */
	if (c->in->phase == DECIDE_VALIDATE)
		claim_from_charge(c);
	else if (wl->kind == WL_JOB && wl->job_suspended)
		out->claim.needed = false; /* judged when it is resumed */
	else if (wl->kind == WL_JOB && out->queue && wl->op == WL_CREATE)
		/* Kueue suspends it (its webhook runs after this one) and
		 * charges it when it admits it: judged when it is resumed.
		 * Without Kueue it is not suspended, and /validate charges it. */
		out->claim.needed = false;
	else if (out->claim.needed)
		out->claim.owner_job_uid = c->charge.owner_job_uid;
	if (out->claim.needed) {
		out->claim.priority = decide_priority(
			wl, out->cls ? out->cls->priority_class_name : NULL,
			c->in->priorities);
		out->claim.kueue_quota = out->queue && out->tenant &&
					 out->tenant->kueue_owns_quota &&
					 kueue_holds(c);
	}
}

/*
 * UPDATE of a Job: the GPU request of its pod template (class, count,
 * flavor, per-pod units) is what its gang was judged for; a change would
 * give its pods what nobody judged.  (Suspended, a Job's template is
 * mutable; it still cannot change what its pods ask for.)  The labels are
 * held through jobs/status too (decide_status()): a status writer may
 * rewrite them.
 */
static void check_job_labels_unchanged(struct ctx *c)
{
	const struct workload *now = c->wl, *old = c->in->old;
	const struct policy_settings *s = policy_settings(c->p);
	const char *keys[2] = {s->class_label, s->gpus_label};

	for (size_t i = 0; i < 2; i++) {
		const char *a = decide_label(old, keys[i]);
		const char *b = decide_label(now, keys[i]);

		if ((a || b) && (!a || !b || strcmp(a, b) != 0)) {
			decide_violate(c, RULES_JOB_TEMPLATE_CHANGED,
				"label %s of a Job cannot be changed by an update (it "
				"is \"%.63s\"): its gang was judged for it; create a new "
				"Job instead",
				keys[i], a ? a : "");
			return;
		}
	}
}

/* ...and its per-pod units and flavor, beside those labels. */
static void check_template_unchanged(struct ctx *c)
{
	const struct workload *old = c->in->old;
	struct charge was;

	check_job_labels_unchanged(c);
	if (c->out->violation)
		return;
	charge_decide(c->p, old, &was);
	if (was.flavor != c->charge.flavor || was.per_pod != c->charge.per_pod)
		decide_violate(c, RULES_JOB_TEMPLATE_CHANGED,
			"the pod template's GPU request cannot be changed by an update "
			"(it is %" PRId64 " %s per pod, now %" PRId64 " %s): its gang "
			"was judged for it; create a new Job instead",
			was.per_pod, was.flavor ? was.flavor->units : "GPUs",
			c->charge.per_pod,
			c->charge.flavor ? c->charge.flavor->units : "GPUs");
}

/*
 * UPDATE of a Pod: the job controller's label says which Job's gang the
 * pod rides on; a pod that dropped it would leave the gang (and be
 * replaced by the job controller) while it still holds its GPUs.
 */
static void check_controller_uid_unchanged(struct ctx *c)
{
	const struct workload *now = c->wl, *old = c->in->old;
	const char *a = wl_get(old->labels, old->n_labels, CHARGE_CONTROLLER_UID_LABEL);
	const char *b = wl_get(now->labels, now->n_labels, CHARGE_CONTROLLER_UID_LABEL);

	if (a && (!b || strcmp(a, b) != 0))
		decide_violate(c, RULES_STAMP_CHANGED,
			"label " CHARGE_CONTROLLER_UID_LABEL " is set by the job "
			"controller and cannot be changed or removed (it is "
			"\"%.63s\"): it says which Job's quota holds the pod",
			a);
}

/*
 * UPDATE of a Pod, or of its status (a status writer may rewrite labels):
 * its class and GPU-count labels are what it was admitted and charged
 * for, and what it is judged by while it runs (the idle rule of a pod is
 * its class's, policy/idle.c).  A pod relabelled to another class would
 * run under that class's rules on GPUs it got under this one's; a pod
 * given a class would come under rules nobody admitted it for.  Changed,
 * removed or added, like a Job's (check_template_unchanged()).
 */
static void check_request_labels_unchanged(struct ctx *c)
{
	const struct policy_settings *s = policy_settings(c->p);
	const char *const keys[2] = {s->class_label, s->gpus_label};
	const char *was, *key = label_changed(c->in->old, c->wl, keys, 2, &was);

	if (key && was)
		decide_violate(c, RULES_POD_REQUEST_CHANGED,
			"label %s of a pod cannot be changed or removed by an "
			"update (it is \"%.63s\"): the pod was admitted and "
			"charged for it, and is judged by it while it runs; "
			"create a new pod instead",
			key, was);
	else if (key)
		decide_violate(c, RULES_POD_REQUEST_CHANGED,
			"label %s cannot be added to a pod by an update: the "
			"pod was admitted and charged without it; create a new "
			"pod instead",
			key);
}

/* UPDATE at /validate (see decide.h). */
static void decide_update(struct ctx *c)
{
	const struct workload *wl = c->wl, *old = c->in->old;
	struct decision *out = c->out;

	out->tenant = policy_tenant_for_namespace(c->p, wl->namespace);
	if (out->tenant)
		out->mode = out->tenant->mode;
	check_stamps_unchanged(c);
	if (!out->violation && wl->kind == WL_POD)
		check_controller_uid_unchanged(c);
	if (!out->violation && wl->kind == WL_POD)
		check_request_labels_unchanged(c);
	if (!out->violation)
		decide_gang_guard(c);
	/* Where a pod may run can change after its creation: tolerations may
	 * be added to any pod, and a gated pod's nodeSelector and affinity
	 * set before its gates are removed.  It is held to the security rules
	 * as it is now, wherever it can now reach. */
	if (!out->violation && wl->kind == WL_POD)
		decide_check_security(c, -1);
	if (wl->kind != WL_JOB || out->violation)
		return;
	check_slots_not_raised(c);
	if (!out->violation)
		check_template_unchanged(c);
	if (out->violation)
		return;
	/* Resuming a suspended Job is an admission point: its gang is judged
	 * and reserved now.  A suspended Job's other updates are judged by
	 * the rules (no quota: it holds nothing). */
	if (wl->job_suspended || (old->job_suspended && !wl->job_finished))
		judge(c);
}

/*
 * settings.exemptions: the GPU stack's own pods (the device plugin, the
 * DCGM exporter, NVSentinel) are privileged and tolerate the GPU taint by
 * design; in their namespaces, or as their ServiceAccounts, gpugate judges
 * nothing and changes nothing.  A claim or a template has no
 * ServiceAccount of its own to go by: its namespace, or its pod's.
 */
static bool exempt(const struct decide_input *in, struct decision *out)
{
	const struct workload *wl = in->wl;

	out->exempt = policy_exempt(in->policy, wl->namespace,
				    wl->kind == WL_CLAIM || wl->kind == WL_CLAIM_TEMPLATE
					    ? NULL
					    : wl->pod.service_account);
	return out->exempt != POLICY_NOT_EXEMPT;
}

void decide_prepare(const struct decide_input *in, struct decision *out)
{
	struct ctx c = {.in = in, .p = in->policy, .wl = in->wl, .out = out};
	const struct workload *wl = in->wl;

	init_decision(in, out);
	if (exempt(in, out))
		return;
	if (wl->kind == WL_CLAIM || wl->kind == WL_CLAIM_TEMPLATE) {
		decide_claim(&c);
		return;
	}
	if (wl->kind == WL_OTHER || (wl->kind == WL_TEMPLATE && wl->template_owned))
		return;
	if (wl->kind == WL_TEMPLATE && (wl->op == WL_CREATE || wl->op == WL_UPDATE)) {
		/* Every change of a template is judged and mapped again: what
		 * it asks is what its next pods will ask. */
		out->tenant = policy_tenant_for_namespace(in->policy, wl->namespace);
		if (out->tenant)
			out->mode = out->tenant->mode;
		judge(&c);
	} else if (wl->op == WL_UPDATE && in->old && in->phase == DECIDE_VALIDATE) {
		charge_decide(in->policy, wl, &c.charge);
		decide_update(&c);
		if (!out->claim.needed && wl->job_suspended)
			return; /* no word on every update of a suspended Job */
	} else if (wl->op == WL_CREATE) {
		charge_decide(in->policy, wl, &c.charge);
		out->tenant = policy_tenant_for_namespace(in->policy, wl->namespace);
		if (out->tenant)
			out->mode = out->tenant->mode;
		judge(&c);
	} else {
		return;
	}
	if (!out->claim.needed)
		decide_finish(&c);
}

void decide(const struct decide_input *in, const struct usage_view *usage,
	    struct decision *out)
{
	decide_with_pool(in, usage, NULL, out);
}

void decide_with_pool(const struct decide_input *in, const struct usage_view *usage,
		      const struct pool_check *pc, struct decision *out)
{
	struct quota_result q;

	decide_prepare(in, out);
	if (!out->claim.needed)
		return;
	quota_decide(in->policy, out->claim.tenant, out->claim.flavor,
		     out->claim.units, out->claim.may_borrow, usage ? usage : &quota_no_usage,
		     &q);
	decide_quota_pool(in, out, &q, pc);
}

/* ---- ephemeral containers --------------------------------------------- */

void decide_status(const struct decide_input *in, struct decision *out)
{
	struct ctx c = {.in = in, .p = in->policy, .wl = in->wl, .out = out};

	init_decision(in, out);
	if ((in->wl->kind != WL_POD && in->wl->kind != WL_JOB) || !in->old ||
	    exempt(in, out))
		return;
	out->tenant = policy_tenant_for_namespace(in->policy, in->wl->namespace);
	if (out->tenant)
		out->mode = out->tenant->mode;
	check_stamps_unchanged(&c);
	if (!out->violation && in->wl->kind == WL_POD)
		check_controller_uid_unchanged(&c);
	if (!out->violation && in->wl->kind == WL_POD)
		check_request_labels_unchanged(&c);
	else if (!out->violation && in->wl->kind == WL_JOB)
		check_job_labels_unchanged(&c);
}

void decide_ephemeral(const struct decide_input *in, struct decision *out)
{
	struct ctx c = {.in = in, .p = in->policy, .wl = in->wl, .out = out};

	init_decision(in, out);
	if (in->wl->kind != WL_POD || exempt(in, out))
		return;
	out->tenant = policy_tenant_for_namespace(in->policy,
						  in->wl->namespace);
	if (out->tenant)
		out->mode = out->tenant->mode;
	decide_check_security(&c, -1);
}
