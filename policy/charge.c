#include "policy/charge.h"

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

static int64_t container_units(const struct wl_container *ct, const char *res)
{
	int64_t v;

	for (size_t i = 0; i < ct->n_limits; i++)
		if (strcmp(ct->limits[i].name, res) == 0 && ct->limits[i].quantity &&
		    k8s_quantity_whole(ct->limits[i].quantity, &v) == 0)
			return v;
	for (size_t i = 0; i < ct->n_requests; i++)
		if (strcmp(ct->requests[i].name, res) == 0 && ct->requests[i].quantity &&
		    k8s_quantity_whole(ct->requests[i].quantity, &v) == 0)
			return v;
	return 0;
}

/* The flavor a pod uses and its units, from its spec alone. */
static const struct policy_flavor *pod_flavor(const struct policy *p,
					      const struct wl_pod *pod,
					      int64_t *units)
{
	const struct policy_flavor *cands[CANDIDATES], *f = NULL;
	const char *res = NULL;
	size_t n;

	for (size_t c = 0; c < pod->n_containers && !res; c++) {
		const struct wl_container *ct = &pod->containers[c];

		for (size_t i = 0; i < ct->n_limits && !res; i++)
			if (policy_is_flavor_resource(p, ct->limits[i].name))
				res = ct->limits[i].name;
		for (size_t i = 0; i < ct->n_requests && !res; i++)
			if (policy_is_flavor_resource(p, ct->requests[i].name))
				res = ct->requests[i].name;
	}
	if (!res)
		return NULL;
	n = policy_flavors_for_resource(p, res, cands, CANDIDATES);
	if (n > CANDIDATES)
		n = CANDIDATES;
	for (size_t i = 0; i < n && !f; i++)
		if (selector_matches(cands[i], pod))
			f = cands[i];
	if (!f)
		f = cands[0];
	*units = 0;
	for (size_t c = 0; c < pod->n_containers; c++)
		*units += container_units(&pod->containers[c], res);
	return f;
}

void charge_decide(const struct policy *p, const struct workload *wl,
		   struct charge *out)
{
	const struct policy_tenant *t;
	const struct policy_flavor *f;
	int64_t units = 0;

	if (wl->kind == WL_CLAIM) { /* DRA: policy/dra.h */
		dra_charge(p, wl, out);
		return;
	}
	memset(out, 0, sizeof(*out));
	if (!wl->namespace || (wl->kind != WL_POD && wl->kind != WL_JOB))
		return;
	t = policy_tenant_for_namespace(p, wl->namespace);
	f = t ? pod_flavor(p, &wl->pod, &units) : NULL;
	if (!t || !f)
		return;
	out->tenant = t;
	out->flavor = f;
	if (wl->kind == WL_JOB) {
		out->units = units * wl->parallelism;
		/* A suspended Job keeps its gang (see the header). */
		out->active = !wl->job_finished;
	} else {
		out->units = units;
		out->active = !wl->phase || (strcmp(wl->phase, "Succeeded") != 0 &&
					     strcmp(wl->phase, "Failed") != 0);
	}
	out->active = out->active && out->units > 0;
}
