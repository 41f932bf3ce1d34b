#include "webhook/classes.h"

#include "policy/policy.h"

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
