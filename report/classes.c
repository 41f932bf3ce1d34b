#include "report/classes.h"

#include "policy/k8s.h"
#include "policy/policy.h"

#include <string.h>

/* json_object_set_new() takes v even when it fails: one check at the end. */
static int set(json_t *o, const char *key, json_t *v)
{
	return v ? json_object_set_new(o, key, v) : -1;
}

json_t *classes_spec_new(const struct policy *p, const struct policy_class *c)
{
	json_t *o = json_object(), *tenants = json_array();
	int rc = 0;

	if (!o || !tenants) {
		json_decref(o);
		json_decref(tenants);
		return NULL;
	}
	if (c->description[0])
		rc |= set(o, "description", json_string(c->description));
	rc |= set(o, "flavor", json_string(c->flavor->name));
	if (c->flavor->dra)
		rc |= set(o, "deviceClassName", json_string(c->flavor->dra->device_class));
	else
		rc |= set(o, "resource", json_string(c->flavor->resource));
	rc |= set(o, "sharing", json_string(policy_sharing_name(c->flavor->sharing)));
	rc |= set(o, "gpus", json_integer(c->gpus));
	rc |= set(o, "maxGpus", json_integer(c->max_gpus));
	rc |= set(o, "preemptible", json_boolean(c->preemptible));
	if (c->topology_key)
		rc |= set(o, "topology",
			  json_pack("{s:s, s:s}", "key", c->topology_key, "mode",
				    c->topology_mode == POLICY_TOPOLOGY_PREFERRED
					    ? "preferred"
					    : "required"));
	if (c->priority_class_name)
		rc |= set(o, "priorityClassName", json_string(c->priority_class_name));
	if (c->cpu)
		rc |= set(o, "cpu", json_string(c->cpu));
	if (c->memory)
		rc |= set(o, "memory", json_string(c->memory));
	for (size_t i = 0; i < policy_tenant_count(p); i++) {
		const struct policy_tenant *t = policy_tenant_at(p, i);

		if (policy_tenant_can_use(t, c))
			rc |= json_array_append_new(tenants, json_string(t->name));
	}
	rc |= set(o, "tenants", tenants);
	if (rc) {
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *classes_object_new(const struct policy *p, const struct policy_class *c)
{
	json_t *spec = classes_spec_new(p, c);

	if (!spec)
		return NULL;
	/* "o": the object takes spec, also when json_pack fails. */
	return json_pack("{s:s, s:s, s:{s:s, s:{s:s}}, s:o}", "apiVersion",
			 CLASSES_API_VERSION, "kind", "GPUClass", "metadata", "name",
			 c->name, "labels", CLASSES_OWNER_LABEL, CLASSES_OWNER, "spec",
			 spec);
}

void classes_plan_release(struct classes_plan *pl)
{
	json_decref(pl->create);
	json_decref(pl->update);
	json_decref(pl->remove);
	json_decref(pl->skipped);
	*pl = (struct classes_plan){0};
}

static const char *meta_str(const json_t *obj, const char *key)
{
	return json_string_value(json_object_get(json_object_get(obj, "metadata"), key));
}

/* The owned object named name, or NULL. */
static const json_t *owned_named(const json_t *owned, const char *name)
{
	size_t i;
	const json_t *o;

	json_array_foreach(owned, i, o) {
		const char *n = meta_str(o, "name");

		if (n && strcmp(n, name) == 0)
			return o;
	}
	return NULL;
}

/* A class that is published: its name is an object name. */
static const struct policy_class *published(const struct policy *p, const char *name)
{
	const struct policy_class *c = policy_class_find(p, name);

	return c && k8s_dns_subdomain_valid(c->name) ? c : NULL;
}

int classes_plan_make(const struct policy *p, const json_t *owned,
		      struct classes_plan *out)
{
	struct classes_plan pl = {json_array(), json_array(), json_array(),
				  json_array(), 0};
	size_t i;
	const json_t *o;
	int rc = 0;

	if (!pl.create || !pl.update || !pl.remove || !pl.skipped)
		goto fail;
	for (i = 0; i < policy_class_count(p); i++) {
		const struct policy_class *c = policy_class_at(p, i);
		const json_t *have;
		json_t *want;

		if (!k8s_dns_subdomain_valid(c->name)) {
			rc |= json_array_append_new(pl.skipped, json_string(c->name));
			continue;
		}
		want = classes_object_new(p, c);
		if (!want)
			goto fail;
		have = owned_named(owned, c->name);
		if (!have) {
			rc |= json_array_append_new(pl.create, want);
		} else if (json_equal(json_object_get(have, "spec"),
				      json_object_get(want, "spec"))) {
			pl.unchanged++;
			json_decref(want);
		} else {
			json_t *meta = json_object_get(want, "metadata");
			const char *rv = meta_str(have, "resourceVersion");
			const char *uid = meta_str(have, "uid");

			if (rv)
				rc |= json_object_set_new(meta, "resourceVersion",
							  json_string(rv));
			if (uid)
				rc |= json_object_set_new(meta, "uid", json_string(uid));
			rc |= json_array_append_new(pl.update, want);
		}
	}
	json_array_foreach(owned, i, o) {
		const char *n = meta_str(o, "name");

		if (n && !published(p, n))
			rc |= json_array_append(pl.remove, (json_t *)o);
	}
	if (rc)
		goto fail;
	*out = pl;
	return 0;
fail:
	classes_plan_release(&pl);
	return -1;
}
