/*
 * decide: the class path for a class of a DRA flavor (docs/policy.md,
 * "DRA flavors"): the pod gets its devices through gpugate's claim
 * template (policy/dra-template.h), named by its spec.resourceClaims entry
 * DRA_TEMPLATE_ENTRY and used by its GPU container, never through an
 * extended resource.  And, for every pod, the rule that gpugate's entry
 * and template names are gpugate's.
 */
#include "policy/decide-int.h"

#include "policy/dra-template.h"

#include <stdio.h>
#include <string.h>

/* The pod's entry DRA_TEMPLATE_ENTRY, or NULL. */
static const struct wl_pod_claim *gpugate_entry(const struct wl_pod *pod)
{
	for (size_t i = 0; i < pod->n_claims; i++)
		if (pod->claims[i].name && strcmp(pod->claims[i].name, DRA_TEMPLATE_ENTRY) == 0)
			return &pod->claims[i];
	return NULL;
}

static bool uses_entry(const struct wl_container *ct)
{
	for (size_t i = 0; i < ct->n_claims; i++)
		if (strcmp(ct->claims[i], DRA_TEMPLATE_ENTRY) == 0)
			return true;
	return false;
}

bool decide_dra_entries(struct ctx *c, const char *class_name)
{
	const struct wl_pod *pod = &c->wl->pod;

	for (size_t i = 0; i < pod->n_claims; i++) {
		const struct wl_pod_claim *e = &pod->claims[i];
		bool ours = e->name && strcmp(e->name, DRA_TEMPLATE_ENTRY) == 0;

		if (!ours && dra_template_is_gpugates(e->template_name) &&
		    decide_violate(c, RULES_CLASS_CONFLICT,
			    "spec.resourceClaims entry \"%.63s\" names claim template "
			    "\"%.100s\", which is gpugate's: ask for GPUs with a class "
			    "(label %s) instead",
			    e->name ? e->name : "", e->template_name,
			    policy_settings(c->p)->class_label))
			return true;
		if (ours && (!dra_template_is_gpugates(e->template_name) || !class_name) &&
		    decide_violate(c, RULES_CLASS_CONFLICT,
			    "spec.resourceClaims entry \"" DRA_TEMPLATE_ENTRY "\" is "
			    "gpugate's: it names the claim template of the GPU class "
			    "in label %s; rename your entry, or set the label",
			    policy_settings(c->p)->class_label))
			return true;
	}
	return false;
}

/* Where the class's template cannot be had: the cluster serves no claim
 * templates, or a stranger's template has its name (the keeper found it:
 * controllers/claim-templates.h).  Rule claim-template; true when
 * denied. */
static bool decide_dra_template_gone(struct ctx *c, unsigned count)
{
	const struct decide_template_source *ts = c->in->templates;
	const struct policy_class *cls = c->out->cls;
	char name[DRA_TEMPLATE_NAME_MAX];

	if (!ts || !dra_template_name(cls, count, name, sizeof(name)))
		return false;
	if (ts->served(ts->ctx) == DECIDE_TEMPLATES_NOT_SERVED)
		return decide_violate(c, RULES_CLAIM_TEMPLATE,
			"class \"%s\" is served through DRA (resource.k8s.io/v1 "
			"ResourceClaimTemplates), which this cluster does not serve; ask "
			"the platform team (Kubernetes 1.34 or later) or use another class",
			cls->name);
	if (c->wl->namespace && ts->taken(ts->ctx, c->wl->namespace, name))
		return decide_violate(c, RULES_CLAIM_TEMPLATE,
			"claim template \"%s\" in namespace \"%s\" is not gpugate's (no "
			"label app.kubernetes.io/managed-by=gpugate); delete or rename it",
			name, c->wl->namespace);
	return false;
}

/* At /mutate: an entry of gpugate's that the pod already has must be the
 * class's (a template of the same class and count; a stale hash is
 * rewritten), and no container may ask for an extended GPU resource. */
bool decide_dra_class_mutate(struct ctx *c, size_t gpu, unsigned count)
{
	const struct wl_pod *pod = &c->wl->pod;
	const struct policy_class *cls = c->out->cls;
	const struct wl_pod_claim *e = gpugate_entry(pod);

	for (size_t i = 0; i < pod->n_containers + pod->n_init_containers; i++) {
		const struct wl_container *ct = i < pod->n_containers
							? &pod->containers[i]
							: &pod->init_containers[i - pod->n_containers];
		const char *r = charge_container_resource(c->p, ct, NULL);

		if (r && decide_violate(c, RULES_TWO_FLAVORS,
				 "container \"%s\" asks for %s, but class %s gives this "
				 "pod %s through DRA (its claim template): remove that "
				 "request",
				 ct->name ? ct->name : "", r, cls->name, cls->flavor->name))
			return true;
		if (i != gpu && uses_entry(ct) &&
		    decide_violate(c, RULES_TWO_FLAVORS,
			    "container \"%s\" also uses claim " DRA_TEMPLATE_ENTRY "; with "
			    "class %s only container \"%s\" gets accelerators: remove it "
			    "or name it in annotation " ANNOTATION_CONTAINER,
			    ct->name ? ct->name : "", cls->name,
			    pod->containers[gpu].name ? pod->containers[gpu].name : ""))
			return true;
	}
	if (decide_dra_template_gone(c, count))
		return true;
	if (e) {
		unsigned have = 0;
		bool current;
		const struct policy_class *was =
			dra_template_parse(c->p, e->template_name, &have, &current);

		/* On an UPDATE of a controller's template the entry is the one
		 * gpugate wrote (decide_dra_entries() keeps users off it): it
		 * is rewritten to the class's now, as a count is. */
		if ((was != cls || have != count) && c->wl->op != WL_UPDATE)
			return decide_violate(c, RULES_GPUS_CONFLICT,
				"spec.resourceClaims entry " DRA_TEMPLATE_ENTRY " names "
				"claim template \"%.100s\", but class %s gives %u: remove "
				"the entry, gpugate writes it",
				e->template_name ? e->template_name : "", cls->name, count);
	}
	return false;
}

/* At /validate: the pod names the class's template under gpugate's entry,
 * and its GPU container uses it. */
bool decide_dra_class_mutated(struct ctx *c, size_t gpu)
{
	const struct wl_pod *pod = &c->wl->pod;
	const struct policy_class *cls = c->out->cls;
	const struct wl_pod_claim *e = gpugate_entry(pod);
	char want[DRA_TEMPLATE_NAME_MAX];

	if (!dra_template_name(cls, c->out->count, want, sizeof(want)))
		want[0] = '\0';
	if (!e || !e->template_name || strcmp(e->template_name, want) != 0)
		return decide_violate(c, RULES_NOT_MUTATED,
			"the pod lacks spec.resourceClaims entry " DRA_TEMPLATE_ENTRY
			" naming claim template %s of class %s: it was changed after "
			"gpugate's mutation, or the mutating webhook is not registered",
			want, cls->name);
	if (!uses_entry(&pod->containers[gpu]))
		return decide_violate(c, RULES_NOT_MUTATED,
			"container \"%s\" does not use claim " DRA_TEMPLATE_ENTRY " of "
			"class %s: it was changed after gpugate's mutation, or the "
			"mutating webhook is not registered",
			pod->containers[gpu].name ? pod->containers[gpu].name : "",
			cls->name);
	return false;
}
