/* cluster-check: a valid policy held against what a cluster has. */
#include "policy/cluster-check.h"

#include "base/diag.h"
#include "policy/capacity.h"
#include "policy/policy.h"
#include "policy/pool.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool listed(const char *name, const char *const *names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (names[i] && strcmp(names[i], name) == 0)
			return true;
	return false;
}

unsigned cluster_check_priority_classes(const struct policy *p,
					const char *const *names, size_t n,
					struct diag *w)
{
	unsigned found = 0;

	for (size_t i = 0; i < policy_class_count(p); i++) {
		const struct policy_class *c = policy_class_at(p, i);

		if (!c->priority_class_name || listed(c->priority_class_name, names, n))
			continue;
		diag_addf(w, "%s: warning: class \"%s\": PriorityClass \"%s\" does not "
			     "exist in the cluster, and the apiserver refuses pods that "
			     "name it; create it (docs/operations.md, \"PriorityClasses\") "
			     "or remove priorityClassName from the class",
			  policy_source(p), c->name, c->priority_class_name);
		found++;
	}
	return found;
}

/* Whether flavor f lists device class dc. */
static bool lists_class(const struct policy_flavor *f, const char *dc)
{
	for (size_t i = 0; i < f->n_device_classes; i++)
		if (strcmp(f->device_classes[i], dc) == 0)
			return true;
	return false;
}

/* A class of the cluster that serves a flavor resource through DRA. */
static unsigned check_served_resource(const struct policy *p,
				      const struct cluster_device_class *dc,
				      struct diag *w)
{
	const struct policy_flavor *fs[8], *mapped;
	size_t n = policy_flavors_for_resource(p, dc->extended_resource, fs, 8);

	if (n == 0 || policy_implicit_device_class(dc->extended_resource))
		return 0;
	if (n > 8)
		n = 8;
	for (size_t i = 0; i < n; i++)
		if (lists_class(fs[i], dc->name))
			return 0;
	mapped = policy_flavor_for_device_class(p, dc->name);
	if (mapped) {
		diag_addf(w, "%s: warning: DeviceClass \"%s\" serves %s through DRA "
			     "(extendedResourceName), but flavor %s lists it in "
			     "deviceClassNames, not %s: the claim the kube-scheduler "
			     "makes for such a pod cannot ride on the pod, and both are "
			     "charged (docs/quota.md, \"What each door costs\")",
			  policy_source(p), dc->name, dc->extended_resource,
			  mapped->name, fs[0]->name);
		return 1;
	}
	diag_addf(w, "%s: warning: DeviceClass \"%s\" serves %s through DRA "
		     "(extendedResourceName), which flavor %s uses, but no flavor "
		     "lists \"%s\" in deviceClassNames: the claim the kube-scheduler "
		     "makes for such a pod asks for that class, %s; add it to flavor "
		     "%s's deviceClassNames (docs/quota.md, \"What each door costs\")",
		  policy_source(p), dc->name, dc->extended_resource, fs[0]->name,
		  dc->name,
		  !policy_is_gpu_device_class(p, dc->name)
			  ? "which gpugate does not count"
		  : policy_settings(p)->raw_gpu_requests == POLICY_RAW_REJECT
			  ? "a raw GPU request that gpugate refuses (rawGpuRequests: "
			    "reject), so the pod never binds"
			  : "a raw GPU request that gpugate does not charge",
		  fs[0]->name);
	return 1;
}

unsigned cluster_check_device_classes(const struct policy *p,
				      const struct cluster_device_class *dcs,
				      size_t n, struct diag *w)
{
	unsigned found = 0;

	for (size_t i = 0; i < n; i++)
		if (dcs[i].name && dcs[i].extended_resource)
			found += check_served_resource(p, &dcs[i], w);
	for (size_t f = 0; f < policy_flavor_count(p); f++) {
		const struct policy_flavor *fl = policy_flavor_at(p, f);

		for (size_t k = 0; k < fl->n_device_classes; k++) {
			size_t i;

			for (i = 0; i < n; i++)
				if (dcs[i].name && strcmp(dcs[i].name, fl->device_classes[k]) == 0)
					break;
			if (i < n)
				continue;
			diag_addf(w, "%s: warning: flavor %s: deviceClassNames: the cluster "
				     "has no DeviceClass \"%s\" (kubectl get deviceclasses): "
				     "no claim of it can be allocated",
				  policy_source(p), fl->name, fl->device_classes[k]);
			found++;
		}
	}
	return found;
}

static size_t nodes_of(const struct pool_summary *s)
{
	size_t n = 0;

	for (int e = POOL_USABLE; e <= POOL_TAINTED; e++)
		n += s->nodes[e];
	return n;
}

/* "; not backed now: tenant T S of its nominal N, ..." into out. */
static void short_tenants(const struct capacity_tenant *t, size_t n, char *out,
			  size_t size)
{
	size_t len = 0, named = 0, more = 0;

	out[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		int k;

		if (t[i].short_by <= 0)
			continue;
		if (named == CLUSTER_CHECK_MAX_NAMED) {
			more++;
			continue;
		}
		k = snprintf(out + len, size - len,
			     "%s tenant %s %" PRId64 " of its nominal %" PRId64,
			     named ? "," : "; not backed now:", t[i].tenant->name,
			     t[i].short_by, t[i].nominal);
		if (k < 0 || (size_t)k >= size - len)
			break;
		len += (size_t)k;
		named++;
	}
	if (more && len < size)
		snprintf(out + len, size - len, ", and %zu more", more);
}

unsigned cluster_check_capacity(const struct policy *p, const struct pool_summary *s,
				size_t n, const struct usage_view *u, bool dra_known,
				struct diag *w)
{
	size_t nt = policy_tenant_count(p);
	struct capacity_tenant *t = calloc(nt + 1, sizeof(*t));
	unsigned found = 0;

	for (size_t i = 0; i < n; i++) {
		const struct policy_flavor *f = s[i].flavor;
		struct capacity_flavor c;
		char tenants[1024];
		size_t k = 0;

		if (f->dra && !dra_known) {
			diag_addf(w, "%s: warning: flavor %s: the cluster's ResourceSlices, "
				     "DeviceTaintRules, ResourceClaims or DeviceClasses "
				     "could not be listed: its devices are not weighed",
				  policy_source(p), f->name);
			found++;
			continue;
		}
		capacity_of(p, f, &s[i], u, &c, t, t ? &k : NULL);
		if (!c.known && f->dra) {
			diag_addf(w, "%s: warning: flavor %s: no node of the cluster "
				     "carries its node labels and has a device of driver "
				     "%s that matches its dra attributes and minCapacity "
				     "(kubectl get resourceslices)",
				  policy_source(p), f->name, f->dra->driver);
			found++;
			continue;
		}
		if (!c.known) {
			diag_addf(w, "%s: warning: flavor %s: no node of the cluster "
				     "carries its node labels and offers %s",
				  policy_source(p), f->name, f->resource);
			found++;
			continue;
		}
		if (!c.unbacked)
			continue;
		short_tenants(t, k, tenants, sizeof(tenants));
		diag_addf(w, "%s: warning: flavor %s: the tenants' nominal quota sums to "
			     "%" PRId64 ", the usable nodes offer %" PRId64 " %s: "
			     "over-committed by %" PRId64 " (%" PRId64 " %%)%s%s%s",
			  policy_source(p), f->name, c.promised, c.usable, f->units,
			  c.unbacked, c.usable ? c.unbacked * 100 / c.usable : 100,
			  s[i].nodes[POOL_USABLE] < nodes_of(&s[i])
				  ? " (excluded nodes not counted)"
				  : "",
			  tenants,
			  tenants[0] ? " (docs/quota.md, \"Effective capacity\")" : "");
		found++;
	}
	free(t);
	return found;
}
