#include "policy/charge.h"

#include "policy/dra-template.h"
#include "policy/dra.h"
#include "policy/k8s.h"
#include "policy/policy.h"
#include "policy/workload.h"

#include <string.h>

/* Flavors looked at for one resource name, at most. */
#define CANDIDATES 16

static bool selector_matches(const struct policy_flavor *f,
			     const struct wl_pod *pod)
{
	for (size_t i = 0; i < f->n_node_selector; i++) {
		const char *v = wl_get(pod->node_selector, pod->n_node_selector,
				       f->node_selector[i].key);

		if (!v || strcmp(v, f->node_selector[i].value) != 0)
			return false;
	}
	return true;
}

/* Units of res in one resource list; false when the list does not name it. */
static bool list_units(const struct wl_resource *r, size_t n, const char *res,
		       int64_t *units)
{
	for (size_t i = 0; i < n; i++) {
		if (strcmp(r[i].name, res) != 0)
			continue;
		if (!r[i].quantity || k8s_quantity_whole(r[i].quantity, units) < 0 ||
		    *units < 0)
			*units = 0;
		return true;
	}
	return false;
}

/* A container's units of res: its limit, else its request; for a device
 * class's implicit name its request, else its limit (the scheduler serves
 * requests through the claim it makes, KEP-5004). */
static int64_t container_units(const struct wl_container *ct, const char *res)
{
	int64_t v = 0;

	if (policy_implicit_device_class(res)) {
		if (!list_units(ct->requests, ct->n_requests, res, &v))
			list_units(ct->limits, ct->n_limits, res, &v);
		return v;
	}
	if (!list_units(ct->limits, ct->n_limits, res, &v))
		list_units(ct->requests, ct->n_requests, res, &v);
	return v;
}

static bool is_sidecar(const struct wl_container *ct)
{
	return ct->restart_policy && strcmp(ct->restart_policy, "Always") == 0;
}

int64_t charge_pod_units(const struct wl_pod *pod, const char *res)
{
	int64_t regular = 0, sidecars = 0, init = 0;

	for (size_t i = 0; i < pod->n_containers; i++)
		regular += container_units(&pod->containers[i], res);
	for (size_t i = 0; i < pod->n_init_containers; i++) {
		const struct wl_container *ct = &pod->init_containers[i];
		int64_t u = container_units(ct, res), peak;

		if (is_sidecar(ct)) {
			sidecars += u;
			peak = sidecars;
		} else {
			peak = u + sidecars;
		}
		if (peak > init)
			init = peak;
	}
	return regular + sidecars > init ? regular + sidecars : init;
}

const char *charge_container_resource(const struct policy *p,
				      const struct wl_container *ct,
				      const char *other_than)
{
	for (size_t i = 0; i < ct->n_limits; i++)
		if (policy_is_flavor_resource(p, ct->limits[i].name) &&
		    (!other_than || strcmp(ct->limits[i].name, other_than) != 0))
			return ct->limits[i].name;
	for (size_t i = 0; i < ct->n_requests; i++)
		if (policy_is_flavor_resource(p, ct->requests[i].name) &&
		    (!other_than || strcmp(ct->requests[i].name, other_than) != 0))
			return ct->requests[i].name;
	return NULL;
}

const char *charge_pod_resource(const struct policy *p, const struct wl_pod *pod,
				const char *other_than)
{
	const char *res = NULL;

	for (size_t c = 0; c < pod->n_containers && !res; c++)
		res = charge_container_resource(p, &pod->containers[c], other_than);
	for (size_t c = 0; c < pod->n_init_containers && !res; c++)
		res = charge_container_resource(p, &pod->init_containers[c], other_than);
	return res;
}

static const struct policy_flavor *pick_flavor(const struct policy *p,
					       const struct wl_pod *pod,
					       const char *res)
{
	const struct policy_flavor *cands[CANDIDATES], *best = NULL;
	size_t n = policy_flavors_for_resource(p, res, cands, CANDIDATES);

	if (n > CANDIDATES)
		n = CANDIDATES;
	/* The most specific flavor whose nodes the pod selects: the one the
	 * class mapping gave it, when another flavor's selector is a subset. */
	for (size_t i = 0; i < n; i++)
		if (selector_matches(cands[i], pod) &&
		    (!best || cands[i]->n_node_selector > best->n_node_selector))
			best = cands[i];
	return best ? best : n ? cands[0] : NULL;
}

/* Does the pod's nodeSelector keep it off f's nodes: a key of f's
 * selector that it requires with another value? */
static bool selector_excludes(const struct policy_flavor *f, const struct wl_pod *pod)
{
	for (size_t i = 0; i < f->n_node_selector; i++) {
		const char *v = wl_get(pod->node_selector, pod->n_node_selector,
				       f->node_selector[i].key);

		if (v && strcmp(v, f->node_selector[i].value) != 0)
			return true;
	}
	return false;
}

const struct policy_flavor *charge_selected_flavor(const struct policy *p,
						   const struct wl_pod *pod,
						   const char *res)
{
	const struct policy_flavor *cands[CANDIDATES];
	size_t n = policy_flavors_for_resource(p, res, cands, CANDIDATES);
	const struct policy_flavor *f;

	if (n > CANDIDATES)
		return NULL;
	if (n == 1)
		return cands[0];
	f = pick_flavor(p, pod, res);
	if (!f || !selector_matches(f, pod))
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (cands[i] != f && !selector_excludes(cands[i], pod))
			return NULL;
	return f;
}

/* The Job a pod may ride on: its controller ownerReference, confirmed by
 * the job controller's label. */
static const char *owner_job_uid(const struct workload *wl)
{
	const char *label = wl_get(wl->pod.labels, wl->pod.n_labels,
				   CHARGE_CONTROLLER_UID_LABEL);

	if (!wl->owner_job_uid || !wl->owner_job_uid[0] || !label ||
	    strcmp(label, wl->owner_job_uid) != 0)
		return NULL;
	return wl->owner_job_uid;
}

const struct policy_flavor *charge_template_claim_flavor(const struct policy *p,
							 const struct workload *wl)
{
	const char *entry = wl_get(wl->annotations, wl->n_annotations,
				   CHARGE_POD_CLAIM_ANNOTATION);
	const char *name = wl_get(wl->annotations, wl->n_annotations,
				  CHARGE_FLAVOR_ANNOTATION);
	const struct policy_flavor *f = name ? policy_flavor_find(p, name) : NULL;

	if (wl->kind != WL_CLAIM || !entry || strcmp(entry, DRA_TEMPLATE_ENTRY) != 0 ||
	    !f || !f->dra)
		return NULL;
	return f;
}

/* The units of one request part (exactly, or a firstAvailable entry) of
 * DRA flavor f's device class (dra_part_units); 0 for another class. */
static int64_t part_units(const struct policy_flavor *f, const struct wl_device_request *d)
{
	if (!d->device_class || strcmp(d->device_class, f->dra->device_class) != 0)
		return 0;
	return dra_part_units(f, d);
}

/* The units of DRA flavor f a claim's requests ask of its device class:
 * each request's exactly part, or its largest firstAvailable entry. */
static int64_t class_units(const struct workload *wl, const struct policy_flavor *f)
{
	int64_t units = 0;

	for (size_t i = 0; i < wl->n_device_requests; i++) {
		const struct wl_device_request *r = &wl->device_requests[i];
		int64_t most = part_units(f, r);

		for (size_t k = 0; k < r->n_first_available; k++) {
			int64_t n = part_units(f, &r->first_available[k]);

			if (n > most)
				most = n;
		}
		units += most;
	}
	return units;
}

/* The pod a claim may ride on: the scheduler's claim for that pod's
 * extended resources, or the claim made from gpugate's template for it,
 * which no other consumer uses. */
static const char *owner_pod_uid(const struct policy *p, const struct workload *wl)
{
	if (!wl->owner_pod_uid || !wl->owner_pod_uid[0] || wl->reserved_for_others ||
	    (!wl->extended_resource_claim && !charge_template_claim_flavor(p, wl)))
		return NULL;
	return wl->owner_pod_uid;
}

bool charge_pod_terminal(const char *phase)
{
	return phase && (strcmp(phase, "Succeeded") == 0 || strcmp(phase, "Failed") == 0);
}

int64_t charge_job_slots(const struct workload *wl)
{
	int64_t slots = wl->parallelism;

	if (wl->has_completions && wl->completions < slots)
		slots = wl->completions;
	return slots > 0 ? slots : 0;
}

void charge_claim(const struct policy *p, const struct workload *wl,
		  struct charge *out)
{
	const struct policy_tenant *t;
	const struct policy_flavor *tf;
	struct dra_claim c;

	memset(out, 0, sizeof(*out));
	if (wl->kind != WL_CLAIM || !wl->namespace)
		return;
	t = policy_tenant_for_namespace(p, wl->namespace);
	if (!t)
		return;
	dra_decide(p, wl->device_requests, wl->n_device_requests, &c);
	/* Made from gpugate's template: its devices are that flavor's. */
	tf = charge_template_claim_flavor(p, wl);
	if (tf) {
		c.flavor = tf;
		c.units = class_units(wl, tf);
	}
	if (!c.flavor)
		return;
	out->tenant = t;
	out->flavor = c.flavor;
	out->units = c.units;
	out->per_pod = c.units; /* one claim, like one pod */
	out->slots = 1;
	out->owner_pod_uid = owner_pod_uid(p, wl);
	/* A claim holds its devices until it is deleted: allocated or not,
	 * whatever its pods do (the resourceclaim controller deletes a claim
	 * it made for a pod once the pod is done). */
	out->active = c.units > 0;
}

/*
 * The door of a DRA class: the pod's spec.resourceClaims entries that name
 * a template of gpugate's (policy/dra-template.h), whatever the entry;
 * its flavor and per-pod units (*units), from the first; *other when
 * another names a template of another flavor.  NULL when none does.
 */
static const struct policy_flavor *template_door(const struct policy *p,
						 const struct wl_pod *pod,
						 int64_t *units, bool *other)
{
	const struct policy_flavor *f = NULL;
	int64_t sum = 0;

	for (size_t i = 0; i < pod->n_claims; i++) {
		unsigned count;
		bool current;
		const struct policy_class *c =
			dra_template_parse(p, pod->claims[i].template_name, &count, &current);

		if (!c)
			continue;
		if (f && c->flavor != f) {
			if (other)
				*other = true;
			continue;
		}
		f = c->flavor;
		sum += count;
	}
	if (units)
		*units = sum;
	return f;
}

void charge_decide(const struct policy *p, const struct workload *wl,
		   struct charge *out)
{
	const struct policy_tenant *t;
	const struct policy_flavor *f;
	const char *res;

	if (wl->kind == WL_CLAIM) { /* DRA: policy/dra.h */
		charge_claim(p, wl, out);
		return;
	}
	memset(out, 0, sizeof(*out));
	if (!wl->namespace || (wl->kind != WL_POD && wl->kind != WL_JOB))
		return;
	t = policy_tenant_for_namespace(p, wl->namespace);
	res = t ? charge_pod_resource(p, &wl->pod, NULL) : NULL;
	f = res ? pick_flavor(p, &wl->pod, res) : NULL;
	if (t && !f && (f = template_door(p, &wl->pod, &out->per_pod, &out->two_flavors)))
		res = NULL; /* a DRA class: its claim template says */
	else if (f)
		out->per_pod = charge_pod_units(&wl->pod, res);
	if (!f)
		return;
	out->tenant = t;
	out->flavor = f;
	if (res)
		out->two_flavors = charge_pod_resource(p, &wl->pod, res) != NULL ||
				   template_door(p, &wl->pod, NULL, NULL) != NULL;
	if (wl->kind == WL_JOB) {
		out->slots = charge_job_slots(wl);
		out->active = !wl->job_finished && !wl->job_suspended;
	} else {
		out->slots = 1;
		out->active = !charge_pod_terminal(wl->phase);
		out->owner_job_uid = owner_job_uid(wl);
	}
	out->units = out->per_pod * out->slots;
	out->active = out->active && out->units > 0;
}
