#include "policy/reach.h"

#include <string.h>

static const char *or_empty(const char *s)
{
	return s ? s : "";
}

bool reach_tolerates(const struct wl_toleration *t,
		     const struct policy_toleration *ft)
{
	const char *key = or_empty(t->key), *op = or_empty(t->op);
	const char *effect = or_empty(t->effect);

	if (!ft->key[0])
		return false;
	if (effect[0] && ft->effect[0] && strcmp(effect, ft->effect) != 0)
		return false;
	if (strcmp(op, "Exists") == 0)
		return !key[0] || strcmp(key, ft->key) == 0;
	if (strcmp(key, ft->key) != 0)
		return false;
	if (op[0] && strcmp(op, "Equal") != 0)
		return true; /* a newer Kubernetes' operator: in doubt, yes */
	return strcmp(ft->op, "Exists") == 0 ||
	       strcmp(or_empty(t->value), ft->value) == 0;
}

static const char *flavor_resource_of(const struct policy *p,
				      const struct wl_container *ct)
{
	for (size_t i = 0; i < ct->n_limits; i++)
		if (policy_is_flavor_resource(p, ct->limits[i].name))
			return ct->limits[i].name;
	for (size_t i = 0; i < ct->n_requests; i++)
		if (policy_is_flavor_resource(p, ct->requests[i].name))
			return ct->requests[i].name;
	return NULL;
}

static bool by_resource(const struct policy *p, const struct wl_pod *pod,
			struct reach *why)
{
	const char *r = NULL;

	for (size_t i = 0; i < pod->n_containers && !r; i++)
		r = flavor_resource_of(p, &pod->containers[i]);
	for (size_t i = 0; i < pod->n_init_containers && !r; i++)
		r = flavor_resource_of(p, &pod->init_containers[i]);
	if (!r)
		return false;
	why->cause = REACH_RESOURCE;
	why->resource = r;
	return true;
}

static bool by_toleration(const struct policy_flavor *f,
			  const struct wl_pod *pod, struct reach *why)
{
	for (size_t k = 0; k < f->n_tolerations; k++)
		for (size_t i = 0; i < pod->n_tolerations; i++)
			if (reach_tolerates(&pod->tolerations[i],
					    &f->tolerations[k])) {
				why->cause = REACH_TOLERATION;
				why->flavor = f;
				why->taint = &f->tolerations[k];
				return true;
			}
	return false;
}

static bool by_node_selector(const struct policy_flavor *f,
			     const struct wl_pod *pod, struct reach *why)
{
	for (size_t k = 0; k < f->n_node_selector; k++) {
		const char *have = wl_get(pod->node_selector,
					  pod->n_node_selector,
					  f->node_selector[k].key);

		if (have && strcmp(have, f->node_selector[k].value) == 0) {
			why->cause = REACH_NODE_SELECTOR;
			why->flavor = f;
			why->selector = &f->node_selector[k];
			return true;
		}
	}
	return false;
}

bool reach_gpu_nodes(const struct policy *p, const struct wl_pod *pod,
		     struct reach *why)
{
	struct reach ignored;
	size_t n = policy_flavor_count(p);

	if (!why)
		why = &ignored;
	memset(why, 0, sizeof(*why));
	if (by_resource(p, pod, why))
		return true;
	for (size_t i = 0; i < n; i++)
		if (by_toleration(policy_flavor_at(p, i), pod, why))
			return true;
	for (size_t i = 0; i < n; i++)
		if (by_node_selector(policy_flavor_at(p, i), pod, why))
			return true;
	return false;
}
