/*
 * decide: the raw path, a flavor resource without a class (rules
 * no-tenant, raw-request, two-flavors, raw-flavor, sharing, security),
 * then the quota claim of what it asks.
 */
#include "policy/decide-int.h"

#include "base/text.h"
#include "policy/k8s.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* ---- the raw path (a flavor resource without a class) ------------------ */

/* "a100: nvidia.com/gpu.product=A100; h100: ...", the flavors of res with
 * their nodeSelectors. */
static void flavors_of_resource(const struct policy *p, const char *res,
				char *buf, size_t size)
{
	const struct policy_flavor *f[8];
	size_t n = policy_flavors_for_resource(p, res, f, 8);

	buf[0] = '\0';
	for (size_t i = 0; i < n && i < 8; i++) {
		char one[300];
		size_t o;

		o = (size_t)snprintf(one, sizeof(one), "%.63s:", f[i]->name);
		for (size_t k = 0; k < f[i]->n_node_selector && o < sizeof(one); k++)
			o += (size_t)snprintf(one + o, sizeof(one) - o, " %.100s=%.63s",
					      f[i]->node_selector[k].key,
					      f[i]->node_selector[k].value);
		if (f[i]->n_node_selector == 0)
			snprintf(one + o, sizeof(one) - o, " no nodeSelector");
		o = strlen(buf);
		snprintf(buf + o, size - o, "%s%s", i ? "; " : "", one);
	}
}

/* The first deviceclass.resource.kubernetes.io/C a container of pod names
 * where C is a GPU device class that no flavor maps; NULL when none. */
static const char *unmapped_device_class(const struct policy *p,
					 const struct wl_container *cts, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const struct wl_resource *lists[2] = {cts[i].requests, cts[i].limits};
		size_t counts[2] = {cts[i].n_requests, cts[i].n_limits};

		for (size_t l = 0; l < 2; l++)
			for (size_t k = 0; k < counts[l]; k++) {
				const char *dc = policy_implicit_device_class(lists[l][k].name);

				if (dc && policy_is_gpu_device_class(p, dc) &&
				    !policy_flavor_for_device_class(p, dc))
					return lists[l][k].name;
			}
	}
	return NULL;
}

/* A container of cts asking for a fraction of a GPU device class by name:
 * the scheduler makes no claim for it (its PreBind fails again and again),
 * so the pod would never start.  True when it denied. */
static bool fractional_device_class(struct ctx *c, const struct wl_container *cts,
				    size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const struct wl_resource *lists[2] = {cts[i].requests, cts[i].limits};
		size_t counts[2] = {cts[i].n_requests, cts[i].n_limits};

		for (size_t l = 0; l < 2; l++)
			for (size_t k = 0; k < counts[l]; k++) {
				const struct wl_resource *r = &lists[l][k];
				const char *dc = policy_implicit_device_class(r->name);
				int64_t units;

				if (!dc || !policy_is_gpu_device_class(c->p, dc) ||
				    (r->quantity && k8s_quantity_whole(r->quantity, &units) == 0))
					continue;
				if (decide_violate(c, RULES_GPUS_INVALID,
					    "container \"%s\" asks for %s of %s: devices come "
					    "whole (1, 2, ...); the scheduler cannot serve a "
					    "fraction and the pod would never start",
					    cts[i].name ? cts[i].name : "",
					    r->quantity ? r->quantity : "a malformed quantity",
					    r->name))
					return true;
			}
	}
	return false;
}

bool decide_raw_device_class(struct ctx *c)
{
	const struct wl_pod *pod = &c->wl->pod;
	const struct policy_tenant *t = c->out->tenant;
	const char *res;
	char classes[600];

	if (fractional_device_class(c, pod->containers, pod->n_containers) ||
	    fractional_device_class(c, pod->init_containers, pod->n_init_containers))
		return true;
	if (!t || policy_settings(c->p)->raw_gpu_requests != POLICY_RAW_REJECT)
		return false;
	res = unmapped_device_class(c->p, pod->containers, pod->n_containers);
	if (!res)
		res = unmapped_device_class(c->p, pod->init_containers,
					    pod->n_init_containers);
	if (!res)
		return false;
	decide_usable_classes(c->p, t, classes, sizeof(classes));
	return decide_violate(c, RULES_RAW_REQUEST,
		"this workload asks for %s, a GPU device class that maps to no "
		"flavor; request GPUs with a class instead: set label %s to one "
		"of: %s",
		res, policy_settings(c->p)->class_label, classes);
}

void decide_raw(struct ctx *c, const char *resource)
{
	const struct workload *wl = c->wl;
	const struct policy_tenant *t = c->out->tenant;
	const struct policy_flavor *f;
	const char *other;
	char classes[600];
	int64_t units;

	if (!t) {
		decide_violate(c, RULES_NO_TENANT,
			"namespace \"%s\" belongs to no tenant, so it cannot use %s; "
			"ask the platform team to add it to a tenant in the gpugate "
			"policy",
			wl->namespace, resource);
		return;
	}
	if (policy_settings(c->p)->raw_gpu_requests == POLICY_RAW_REJECT) {
		decide_usable_classes(c->p, t, classes, sizeof(classes));
		decide_violate(c, RULES_RAW_REQUEST,
			"this workload asks for %s directly; request GPUs with a class "
			"instead: set label %s to one of: %s",
			resource, policy_settings(c->p)->class_label, classes);
		return;
	}
	/* Allowed raw requests still follow the one-flavor, sharing and
	 * security rules, and are charged by the charge rule. */
	other = charge_pod_resource(c->p, &wl->pod, resource);
	if (other && decide_violate(c, RULES_TWO_FLAVORS,
				    "this workload asks for resources of two flavors "
				    "(%s and %s); a pod may use one flavor only",
				    resource, other))
		return;
	/* The flavor of a resource several flavors share is the one whose
	 * nodes the pod selects (policy/charge.h); a pod that could land on
	 * another one's nodes would be charged for the wrong flavor. */
	if (!charge_selected_flavor(c->p, &wl->pod, resource)) {
		char which[600];

		flavors_of_resource(c->p, resource, which, sizeof(which));
		if (decide_violate(c, RULES_RAW_FLAVOR,
			    "this workload asks for %s, which several flavors "
			    "share, and its nodeSelector does not select exactly "
			    "one of them: set the nodeSelector of one (%s), or ask "
			    "for GPUs with a class",
			    resource, which))
			return;
	}
	f = c->charge.flavor;
	units = c->charge.per_pod;
	if (f && !policy_tenant_allows_sharing(t, f->sharing)) {
		char allowed[128];

		decide_sharing_list(t, allowed, sizeof(allowed));
		if (decide_violate(c, RULES_SHARING,
			    "%s is a %s GPU resource, which tenant \"%s\" may not "
			    "use (allowed sharing: %s)",
			    resource, policy_sharing_name(f->sharing), t->name,
			    allowed))
			return;
	}
	if (decide_check_security(c, -1))
		return;
	if (f && units > 0) {
		c->out->flavor = f;
		c->out->claim = (struct quota_claim){
			.needed = true,
			.tenant = t,
			.flavor = f,
			.per_pod = (unsigned)(units > UINT32_MAX ? UINT32_MAX : units),
			.pods = wl->kind == WL_JOB ? charge_job_slots(wl) : 1,
			.may_borrow = false,
		};
		c->out->claim.units = units * c->out->claim.pods;
	}
}
