/*
 * decide: the class path (rules class-unknown, class-not-allowed,
 * gpus-invalid, sharing, container-unknown, gpus-conflict, two-flavors,
 * security, node-selector, not-mutated), then the quota claim.
 */
#include "policy/decide-int.h"

#include "base/text.h"
#include "policy/k8s.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* ---- the class path --------------------------------------------------- */

/* Step "resources": which container gets GPUs, and nobody else does. */
static bool check_class_resources(struct ctx *c, size_t gpu)
{
	const struct wl_pod *pod = &c->wl->pod;
	const char *res = c->out->flavor->resource;

	for (size_t i = 0; i < pod->n_init_containers; i++) {
		const struct wl_container *ct = &pod->init_containers[i];
		const char *r = charge_container_resource(c->p, ct, NULL);

		if (r && decide_violate(c, RULES_TWO_FLAVORS,
				 "init container \"%s\" asks for %s; with class %s "
				 "only container \"%s\" gets accelerators: remove that "
				 "request",
				 ct->name, r, c->out->cls->name,
				 pod->containers[gpu].name))
			return true;
	}
	for (size_t i = 0; i < pod->n_containers; i++) {
		const struct wl_container *ct = &pod->containers[i];
		const char *other = charge_container_resource(c->p, ct, res);

		if (other && decide_violate(c, RULES_TWO_FLAVORS,
				     "container \"%s\" asks for %s, but class %s gives "
				     "this pod %s (%s) only: remove that request",
				     ct->name, other, c->out->cls->name,
				     c->out->flavor->name, res))
			return true;
		if (i != gpu &&
		    (decide_has_resource(ct->limits, ct->n_limits, res) ||
		     decide_has_resource(ct->requests, ct->n_requests, res)) &&
		    decide_violate(c, RULES_TWO_FLAVORS,
			    "container \"%s\" also asks for %s; with class %s only "
			    "container \"%s\" gets accelerators: remove that request "
			    "or name it in annotation " ANNOTATION_CONTAINER,
			    ct->name, res, c->out->cls->name, pod->containers[gpu].name))
			return true;
	}
	return false;
}

static bool check_node_selector(struct ctx *c)
{
	const struct policy_flavor *f = c->out->flavor;
	const struct wl_pod *pod = &c->wl->pod;

	for (size_t i = 0; i < f->n_node_selector; i++) {
		const struct policy_kv *kv = &f->node_selector[i];
		const char *have = wl_get(pod->node_selector, pod->n_node_selector,
					  kv->key);

		if (have && strcmp(have, kv->value) != 0) {
			if (decide_violate(c, RULES_NODE_SELECTOR,
				    "nodeSelector %s=%s conflicts with flavor %s, which "
				    "needs %s=%s: remove it, the class chooses the nodes",
				    kv->key, have, f->name, kv->key, kv->value))
				return true;
		} else if (!have && c->in->phase == DECIDE_VALIDATE) {
			if (decide_violate(c, RULES_NOT_MUTATED,
				    "the pod lacks nodeSelector %s=%s of flavor %s: it "
				    "was changed after gpugate's mutation, or the "
				    "mutating webhook is not registered",
				    kv->key, kv->value, f->name))
				return true;
		}
	}
	return false;
}

/* At /validate: the GPU container carries exactly the class's resources. */
static bool check_mutated_resources(struct ctx *c, size_t gpu)
{
	const struct wl_container *ct = &c->wl->pod.containers[gpu];
	const char *res = c->out->flavor->resource;
	const char *raw = NULL;
	int64_t units = -1;
	bool found = decide_container_units(ct, res, &units, &raw);

	for (size_t i = 0; found && i < ct->n_requests; i++) {
		int64_t r;

		if (strcmp(ct->requests[i].name, res) == 0 &&
		    (!ct->requests[i].quantity ||
		     k8s_quantity_whole(ct->requests[i].quantity, &r) < 0 ||
		     r != units))
			units = -1;
	}
	if (found && units == (int64_t)c->out->count)
		return false;
	return decide_violate(c, RULES_NOT_MUTATED,
		       "container \"%s\" has %s %s but class %s gives %u: it was "
		       "changed after gpugate's mutation, or the mutating webhook "
		       "is not registered",
		       ct->name, res, found ? (raw && raw[0] ? raw : "(invalid)") : "none",
		       c->out->cls->name, c->out->count);
}

/*
 * An UPDATE of a pod template gpugate mapped before (its tenant stamp is on
 * the old template) that leaves container ct's count of res as the old
 * template had it: that count is the one gpugate wrote.  kubectl apply
 * keeps a field its last-applied configuration does not name, so a user
 * who changes only the GPU label would otherwise be told that "their"
 * count conflicts with it.  It is rewritten to the class's.
 */
static bool count_is_gpugates(const struct ctx *c, const struct wl_container *ct,
			      const char *res, int64_t units)
{
	const struct workload *old = c->in->old;

	if (c->wl->kind != WL_TEMPLATE || c->wl->op != WL_UPDATE || !old || !ct->name ||
	    !wl_get(old->pod.labels, old->pod.n_labels, STAMP_TENANT))
		return false;
	for (size_t i = 0; i < old->pod.n_containers; i++) {
		const struct wl_container *oc = &old->pod.containers[i];
		const char *raw = NULL;
		int64_t was = -1;

		if (oc->name && strcmp(oc->name, ct->name) == 0)
			return decide_container_units(oc, res, &was, &raw) && was == units;
	}
	return false;
}

/*
 * At /mutate: a GPU count the user wrote on the GPU container must be the
 * class's.  gpugate never removes what the user wrote, so a different one
 * is denied rather than replaced without a word (what gpugate wrote itself
 * on a template is rewritten: count_is_gpugates()).
 */
static bool check_user_count(struct ctx *c, size_t gpu, unsigned count)
{
	const struct wl_container *ct = &c->wl->pod.containers[gpu];
	const struct policy_class *cls = c->out->cls;
	const char *res = cls->flavor->resource, *label = policy_settings(c->p)->gpus_label;
	const char *raw = NULL;
	int64_t units = -1;

	if (!decide_container_units(ct, res, &units, &raw) || units == (int64_t)count ||
	    count_is_gpugates(c, ct, res, units))
		return false;
	if (units >= 1 && units <= (int64_t)cls->max_gpus)
		return decide_violate(c, RULES_GPUS_CONFLICT,
			       "container \"%s\" asks for %s %s but class %s gives %u: "
			       "remove that request, or set label %s: \"%s\"",
			       ct->name ? ct->name : "", raw, res, cls->name, count,
			       label, raw);
	return decide_violate(c, RULES_GPUS_CONFLICT,
		       "container \"%s\" asks for %s %s but class %s gives %u "
		       "(at most %u with label %s): remove that request",
		       ct->name ? ct->name : "", raw && raw[0] ? raw : "(invalid)", res,
		       cls->name, count, cls->max_gpus, label);
}

/*
 * After a violation that leaves nothing to map (warn or audit mode): the
 * workload is admitted as it is.
 */
static void unmap(struct ctx *c)
{
	c->out->cls = NULL;
	c->out->flavor = NULL;
}

void decide_class(struct ctx *c, const char *class_name)
{
	const struct workload *wl = c->wl;
	const struct policy_settings *s = policy_settings(c->p);
	const struct policy_tenant *t = c->out->tenant;
	const struct policy_class *cls;
	const char *gpus, *want;
	char list[600];
	size_t gpu = 0;
	unsigned count;

	if (!t) {
		decide_violate(c, RULES_NO_TENANT,
			"namespace \"%s\" belongs to no tenant, so it cannot use GPU "
			"class \"%s\"; ask the platform team to add it to a tenant in "
			"the gpugate policy",
			wl->namespace, class_name);
		return;
	}
	cls = policy_class_find(c->p, class_name);
	if (!cls) {
		char hint[TEXT_DISTANCE_MAX_LEN + 32];

		decide_usable_classes(c->p, t, list, sizeof(list));
		decide_violate(c, RULES_CLASS_UNKNOWN,
			"unknown GPU class \"%s\"%s; tenant \"%s\" may use: %s",
			class_name,
			decide_nearest_usable_class(c->p, t, class_name, hint, sizeof(hint)),
			t->name, list);
		return;
	}
	if (!policy_tenant_allows_class(t, cls)) {
		decide_usable_classes(c->p, t, list, sizeof(list));
		decide_violate(c, RULES_CLASS_NOT_ALLOWED,
			"class \"%s\" is not allowed for tenant \"%s\"; allowed: %s",
			cls->name, t->name, list);
		return;
	}
	c->out->cls = cls;
	c->out->flavor = cls->flavor;

	gpus = decide_label(wl, s->gpus_label);
	count = cls->gpus;
	if (gpus && !decide_parse_count(gpus, cls->max_gpus, &count)) {
		decide_violate(c, RULES_GPUS_INVALID,
			"label %s=\"%.40s\" must be a whole number from 1 to %u for "
			"class %s",
			s->gpus_label, gpus, cls->max_gpus, cls->name);
		unmap(c);
		return;
	}
	c->out->count = count;

	if (!policy_tenant_allows_sharing(t, cls->flavor->sharing)) {
		char allowed[128];

		decide_sharing_list(t, allowed, sizeof(allowed));
		if (decide_violate(c, RULES_SHARING,
			    "class \"%s\" uses %s GPUs, which tenant \"%s\" may not "
			    "use (allowed sharing: %s)",
			    cls->name, policy_sharing_name(cls->flavor->sharing),
			    t->name, allowed))
			return;
	}

	if (wl->pod.n_containers == 0) {
		decide_violate(c, RULES_CONTAINER_UNKNOWN, "the pod has no containers");
		unmap(c);
		return;
	}
	want = decide_annotation(wl, ANNOTATION_CONTAINER);
	if (want) {
		size_t i;

		for (i = 0; i < wl->pod.n_containers; i++)
			if (wl->pod.containers[i].name &&
			    strcmp(wl->pod.containers[i].name, want) == 0)
				break;
		if (i == wl->pod.n_containers) {
			list[0] = '\0';
			for (size_t k = 0; k < wl->pod.n_containers; k++)
				decide_list_add(list, sizeof(list),
					 wl->pod.containers[k].name ? wl->pod.containers[k].name
								    : "");
			decide_violate(c, RULES_CONTAINER_UNKNOWN,
				"annotation " ANNOTATION_CONTAINER " names container "
				"\"%.63s\", but the pod has no such container "
				"(containers: %s)",
				want, list);
			unmap(c);
			return;
		}
		gpu = i;
	}
	c->out->plan.gpu_container = gpu;

	if (cls->flavor->dra) {
		/* Its devices come through gpugate's claim template. */
		if (decide_dra_class_mutate(c, gpu, count) ||
		    decide_check_security(c, (long)gpu) || check_node_selector(c))
			return;
		if (c->in->phase == DECIDE_VALIDATE && decide_dra_class_mutated(c, gpu))
			return;
	} else {
		if (c->in->phase == DECIDE_MUTATE && check_user_count(c, gpu, count))
			return;
		if (check_class_resources(c, gpu) || decide_check_security(c, (long)gpu) ||
		    check_node_selector(c))
			return;
		if (c->in->phase == DECIDE_VALIDATE && check_mutated_resources(c, gpu))
			return;
	}

	c->out->claim = (struct quota_claim){
		.needed = true,
		.tenant = t,
		.flavor = cls->flavor,
		.per_pod = count,
		.pods = wl->kind == WL_JOB ? charge_job_slots(wl) : 1,
	};
	c->out->claim.units = (int64_t)count * c->out->claim.pods;
	/* At /mutate the workload will be made preemptible if it borrows; at
	 * /validate it may borrow only if it already is. */
	c->out->claim.may_borrow =
		c->in->phase == DECIDE_MUTATE || cls->preemptible ||
		(decide_label(wl, STAMP_PREEMPTIBLE) &&
		 strcmp(decide_label(wl, STAMP_PREEMPTIBLE), "true") == 0);
}
