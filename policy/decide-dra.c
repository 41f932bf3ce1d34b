/*
 * decide: DRA, ResourceClaim and ResourceClaimTemplate (policy/dra.h).
 */
#include "policy/decide-int.h"

#include "base/text.h"
#include "policy/dra-template.h"
#include "policy/dra.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* ---- DRA: ResourceClaim and ResourceClaimTemplate (policy/dra.h) ------- */

/*
 * A ResourceClaim that asks for devices of a GPU device class is charged
 * like a bare Pod: its units of one flavor, reserved at /validate.  A
 * ResourceClaimTemplate holds nothing (the resourceclaim controller makes
 * a claim from it for each pod, and that claim comes through here): it is
 * judged by the same rules, and against an empty cluster, so that a
 * template whose claims can never be admitted is refused when it is
 * written.  gpugate changes neither: there is no plan.
 *
 * Claims use nominal quota only.  Borrowed GPUs must be preemptible, and
 * gpugate cannot make a claim's pods preemptible: it does not change the
 * claim, and does not know which pods will use it.
 */

static bool is_template(const struct ctx *c)
{
	return c->wl->kind == WL_CLAIM_TEMPLATE;
}

/* "gpu", or "gpu/big" for a subrequest (Kubernetes' own notation). */
static void request_name(const struct dra_where *w, char *buf, size_t size)
{
	text_cat(buf, size, w->request, w->subrequest ? "/" : "",
		 w->subrequest ? w->subrequest : "", NULL);
}

/* The device classes tenant t can use: mapped to a flavor of a sharing
 * mode it may use, which it has quota for. */
static void usable_device_classes(const struct policy *p,
				  const struct policy_tenant *t, char *buf,
				  size_t size)
{
	buf[0] = '\0';
	for (size_t i = 0; i < policy_flavor_count(p); i++) {
		const struct policy_flavor *f = policy_flavor_at(p, i);

		if (!policy_tenant_allows_sharing(t, f->sharing) ||
		    !policy_tenant_quota(t, f))
			continue;
		for (size_t k = 0; k < f->n_device_classes; k++)
			decide_list_add(buf, size, f->device_classes[k]);
	}
	if (!buf[0])
		snprintf(buf, size, "none");
}

/* raw-request, allocation-all, two-flavors, sharing.  True when final. */
static bool claim_rules(struct ctx *c, const struct dra_claim *h)
{
	const struct policy_tenant *t = c->out->tenant;
	const char *what = is_template(c) ? "claim template" : "claim";
	char list[600], name[160];

	if (h->raw.device_class &&
	    policy_settings(c->p)->raw_gpu_requests == POLICY_RAW_REJECT) {
		usable_device_classes(c->p, t, list, sizeof(list));
		if (decide_violate(c, RULES_RAW_REQUEST,
			    "this %s asks for devices of class \"%s\", which maps to "
			    "no GPU flavor; use a device class tenant \"%s\" may use: %s",
			    what, h->raw.device_class, t->name, list))
			return true;
	}
	if (h->all.device_class) {
		request_name(&h->all, name, sizeof(name));
		if (decide_violate(c, RULES_ALLOCATION_ALL,
			    "request \"%s\" asks for all devices of class \"%s\" "
			    "(allocationMode All), which cannot be counted against "
			    "quota; ask for a number of devices (allocationMode "
			    "ExactCount with a count)",
			    name, h->all.device_class))
			return true;
	}
	if (h->other_flavor &&
	    decide_violate(c, RULES_TWO_FLAVORS,
		    "this %s asks for devices of two flavors (class \"%s\" of %s "
		    "and class \"%s\" of %s); a claim may use one flavor only",
		    what, h->device_class, h->flavor->name,
		    h->two_flavors.device_class, h->other_flavor->name))
		return true;
	if (h->flavor && !policy_tenant_allows_sharing(t, h->flavor->sharing)) {
		decide_sharing_list(t, list, sizeof(list));
		if (decide_violate(c, RULES_SHARING,
			    "device class \"%s\" is a %s GPU class, which tenant \"%s\" "
			    "may not use (allowed sharing: %s)",
			    h->device_class, policy_sharing_name(h->flavor->sharing),
			    t->name, list))
			return true;
	}
	return false;
}

/* "2 (claim, device class C)": what the claim asks of the quota.  A claim
 * riding on its pod asks only what its devices exceed the pod's units by
 * (policy/charge.h); then the message says so. */
static int64_t claim_request_text(const struct ctx *c, const struct dra_claim *h,
				  const struct quota_result *q, char *buf, size_t size)
{
	int64_t asked = q->requested > 0 ? q->requested : h->units;

	if (asked < h->units && c->wl->owner_pod)
		snprintf(buf, size, "%" PRId64 " (claim, device class %s: %" PRId64
			 " of its %" PRId64 " devices, pod \"%s\" holds the other %"
			 PRId64 ")", asked, h->device_class, asked, h->units,
			 c->wl->owner_pod, h->units - asked);
	else
		snprintf(buf, size, "%" PRId64 " (claim, device class %s)", asked,
			 h->device_class);
	return asked;
}

/* The quota rules: a claim against the usage q was decided on, a
 * template's claims against an empty cluster.  Nominal quota only. */
static void claim_quota_rules(struct ctx *c, const struct dra_claim *h,
			      const struct quota_result *q)
{
	const char *tenant = c->out->tenant->name, *flavor = h->flavor->name;
	char ceiling[160], req[320];
	int64_t asked;

	/* Covered: the scheduler's claim, its pod holds its devices. */
	if (q->position == QUOTA_NOMINAL || q->position == QUOTA_COVERED)
		return;
	if (q->position == QUOTA_UNAVAILABLE) {
		decide_unavailable(c, q);
		return;
	}
	asked = claim_request_text(c, h, q, req, sizeof(req));
	if (q->position == QUOTA_LENT_OUT || q->position == QUOTA_RECLAIM_SHORT) {
		decide_lent_out(c, q, tenant, flavor, req);
		return;
	}
	if (q->position == QUOTA_NO_QUOTA) {
		decide_violate(c, RULES_QUOTA,
			"tenant \"%s\" has no quota for flavor %s (device class %s); "
			"ask the platform team for quota",
			tenant, flavor, h->device_class);
		return;
	}
	if (asked > q->nominal) {
		snprintf(ceiling, sizeof(ceiling), "nominal %" PRId64 "%s", q->nominal,
			 q->cohort ? "; claims do not borrow" : "");
		if (is_template(c))
			decide_violate(c, RULES_QUOTA,
				"the claims of this template can never be admitted: "
				"each needs %" PRId64 " %s, tenant \"%s\" may hold at "
				"most %" PRId64 " (%s)",
				h->units, flavor, tenant, q->nominal, ceiling);
		else
			decide_violate(c, RULES_QUOTA,
				"claim can never be admitted: needs %" PRId64 " %s, "
				"tenant \"%s\" may hold at most %" PRId64 " (%s)",
				asked, flavor, tenant, q->nominal, ceiling);
		return;
	}
	if (is_template(c))
		return; /* fits an empty cluster */
	if (q->cohort)
		decide_violate(c, RULES_QUOTA,
			"tenant \"%s\" is over its %s quota: requested %s, in use "
			"%" PRId64 " of nominal %" PRId64 ", claims do not borrow "
			"from cohort \"%s\"",
			tenant, flavor, req, q->used, q->nominal, q->cohort);
	else
		decide_violate(c, RULES_QUOTA,
			"tenant \"%s\" is over its %s quota: requested %s, in use "
			"%" PRId64 " of nominal %" PRId64 ", no cohort to borrow from",
			tenant, flavor, req, q->used, q->nominal);
}

/*
 * What the claim asks for (dra_decide()); a claim made from one of
 * gpugate's templates asks for its DRA flavor's devices
 * (charge_template_claim_flavor()), whatever flavor, if any, its device
 * class maps to: no raw-request or two-flavors rule for it.
 */
static void claim_facts_of(const struct ctx *c, struct dra_claim *h)
{
	const struct policy_flavor *tf = charge_template_claim_flavor(c->p, c->wl);
	struct charge ch;

	dra_decide(c->p, c->wl->device_requests, c->wl->n_device_requests, h);
	if (!tf)
		return;
	charge_claim(c->p, c->wl, &ch);
	h->gpu = true;
	h->flavor = tf;
	h->device_class = tf->dra->device_class;
	h->units = ch.units;
	h->raw.device_class = NULL;
	h->two_flavors.device_class = NULL;
	h->other_flavor = NULL;
}

/* At /validate, the line kubectl prints for an admitted claim or template. */
static void claim_success_line(struct ctx *c)
{
	const struct decision *out = c->out;
	char head[DECIDE_WARNING_LEN], tail[200], pos[160];
	char units[TEXT_DECIMAL_MAX + 1];

	if (c->in->phase != DECIDE_VALIDATE || !out->allowed ||
	    (out->violation && out->mode == POLICY_MODE_AUDIT))
		return;
	text_cat(head, sizeof(head), "gpugate: ",
		 is_template(c) ? "claim template -> " : "claim -> ",
		 text_int(units, out->claim.units), " x ", out->flavor->name,
		 is_template(c) ? " per claim" : "", " for tenant ",
		 out->tenant->name, NULL);
	if (is_template(c)) {
		text_cat(tail, sizeof(tail), " (each claim made from it is charged)",
			 NULL);
	} else {
		decide_position_text(c, pos, sizeof(pos));
		text_cat(tail, sizeof(tail), " (", pos, ")", NULL);
	}
	decide_add_success(c, head, tail);
}

/* ---- gpugate's claim templates (policy/dra-template.h) ------------------ */

/* The label that says a template is gpugate's (controllers/claim-sync.h's
 * CLAIM_SYNC_OWNER_LABEL, which the core cannot include). */
#define OWNER_LABEL "app.kubernetes.io/managed-by"
#define OWNER "gpugate"

static bool labelled_gpugates(const struct workload *wl)
{
	const char *v = wl ? wl_get(wl->labels, wl->n_labels, OWNER_LABEL) : NULL;

	return v && strcmp(v, OWNER) == 0;
}

/*
 * The templates of DRA classes are gpugate's (docs/design/dra.md,
 * "Keeping users out"): nobody else creates one under its prefix, or
 * changes or removes its label on one (the keeper would take it for a
 * stranger's and leave it).  Deleting stays allowed: the keeper makes it
 * again, and a namespace's deletion never waits on gpugate.  True when
 * the request is decided here (denied, or gpugate's own write, which
 * the claim rules below do not judge).
 */
static bool template_guard(struct ctx *c)
{
	const struct workload *wl = c->wl, *old = c->in->old;
	bool self = decide_gpugate_user(c->in);
	struct decision *out = c->out;

	out->tenant = policy_tenant_for_namespace(c->p, wl->namespace);
	if (out->tenant)
		out->mode = out->tenant->mode;
	if (wl->op == WL_CREATE && wl->name && dra_template_is_gpugates(wl->name)) {
		if (!self)
			decide_violate(c, RULES_CLAIM_TEMPLATE,
				"claim template names starting with " DRA_TEMPLATE_PREFIX
				" are gpugate's; choose another name");
		return true;
	}
	/* Added to a gpugate.* name, the label would make a stranger's
	 * template pass for gpugate's. */
	if (wl->op == WL_UPDATE && old && labelled_gpugates(old) != labelled_gpugates(wl) &&
	    (labelled_gpugates(old) || (wl->name && dra_template_is_gpugates(wl->name)))) {
		if (!self)
			decide_violate(c, RULES_CLAIM_TEMPLATE,
				"the label " OWNER_LABEL "=" OWNER " of claim template "
				"\"%.253s\" is gpugate's to set; leave it as it was",
				wl->name ? wl->name : "");
		return true;
	}
	out->tenant = NULL;
	out->mode = policy_settings(c->p)->mode;
	return false;
}

void decide_claim(struct ctx *c)
{
	const struct workload *wl = c->wl;
	struct decision *out = c->out;
	struct dra_claim h;
	struct charge ch;

	if (is_template(c) && template_guard(c))
		return;
	if (wl->op != WL_CREATE)
		return;
	claim_facts_of(c, &h);
	if (!h.gpu)
		return; /* no GPUs: none of gpugate's business */
	out->tenant = policy_tenant_for_namespace(c->p, wl->namespace);
	if (!out->tenant) {
		decide_violate(c, RULES_NO_TENANT,
			"namespace \"%s\" belongs to no tenant, so it cannot use "
			"device class \"%s\"; ask the platform team to add it to a "
			"tenant in the gpugate policy",
			wl->namespace, h.first_gpu.device_class);
		return;
	}
	out->mode = out->tenant->mode;
	/* In warn and audit mode a violation admits the claim, and what it
	 * asks of a flavor is still charged. */
	if (claim_rules(c, &h) || !h.flavor || h.units <= 0)
		return;
	out->flavor = h.flavor;
	out->count = h.units > UINT32_MAX ? UINT32_MAX : (unsigned)h.units;
	charge_claim(c->p, wl, &ch);
	out->claim = (struct quota_claim){
		.needed = true,
		.tenant = out->tenant,
		.flavor = h.flavor,
		.units = h.units,
		.per_pod = out->count,
		.pods = 1,
		.may_borrow = false,
		/* The scheduler's claim for a pod's extended resources: the
		 * store charges it what the pod does not hold already. */
		.owner_pod_uid = ch.owner_pod_uid,
	};
	if (is_template(c)) {
		struct quota_result q;

		out->claim.needed = false; /* it holds nothing */
		quota_decide(c->p, out->tenant, h.flavor, h.units, false,
			     &quota_no_usage, &q);
		claim_quota_rules(c, &h, &q);
		claim_success_line(c);
	}
}

void decide_claim_quota(struct ctx *c, const struct quota_result *q)
{
	struct dra_claim h;

	c->out->has_quota = true;
	c->out->quota = *q;
	claim_facts_of(c, &h);
	claim_quota_rules(c, &h, q);
	claim_success_line(c);
}
