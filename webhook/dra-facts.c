#include "webhook/dra-facts.h"

#include "base/arena.h"
#include "policy/k8s.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static const char *get_str(const json_t *obj, const char *key)
{
	return json_string_value(json_object_get(obj, key));
}

/* An optional member: absent, or of type want (json_typeof). */
static bool absent_or(const json_t *v, json_type want)
{
	return !v || json_typeof(v) == want;
}

/* name as the API qualifies it, "<domain>/<id>" (k8s_dra_name_split: the one
 * rule; a name without a domain is the driver's). */
static const char *qualified(const char *driver, const char *name, struct arena *a)
{
	struct k8s_dra_name n;
	size_t ni;
	char *s;

	k8s_dra_name_split(driver, name, &n);
	if (n.domain == name)
		return name;
	ni = strlen(n.id);
	s = arena_alloc(a, n.domain_len + ni + 2);
	if (!s)
		return NULL;
	memcpy(s, n.domain, n.domain_len);
	s[n.domain_len] = '/';
	memcpy(s + n.domain_len + 1, n.id, ni + 1);
	return s;
}

/* An attribute's value as text (string, int, bool, version); NULL for a
 * list or an unknown type. */
static const char *attribute_text(const json_t *v, struct arena *a, bool *is_string)
{
	const json_t *x;
	char buf[32];

	*is_string = false;
	if ((x = json_object_get(v, "string")) && json_is_string(x)) {
		*is_string = true;
		return json_string_value(x);
	}
	if ((x = json_object_get(v, "version")) && json_is_string(x))
		return json_string_value(x);
	if ((x = json_object_get(v, "bool")) && json_is_boolean(x))
		return json_is_true(x) ? "true" : "false";
	if ((x = json_object_get(v, "int")) && json_is_integer(x)) {
		snprintf(buf, sizeof(buf), "%" PRId64, (int64_t)json_integer_value(x));
		return arena_strdup(a, buf);
	}
	return NULL;
}

/* A capacity's value as written ("80Gi"); NULL without one. */
static const char *capacity_text(const json_t *v, struct arena *a, bool *is_string)
{
	(void)a;
	*is_string = false;
	return get_str(v, "value");
}

/* A quantity written as a string (consumedCapacity's values). */
static const char *string_text(const json_t *v, struct arena *a, bool *is_string)
{
	(void)a;
	*is_string = false;
	return json_string_value(v);
}

/*
 * The members of obj (attributes or capacity: NAME -> {...}) that text
 * reads, by their qualified names: *labels and *is_string (n of each).
 * 0 when obj is absent or read; -1 when it is not an object, or out of
 * memory.
 */
static int qualified_of(const json_t *obj, const char *driver, struct arena *a,
			const char *(*text)(const json_t *v, struct arena *a, bool *is_string),
			const struct pool_label **labels, const bool **is_string, size_t *n)
{
	struct pool_label *l;
	bool *str;
	const char *k;
	json_t *v;

	*n = 0;
	if (!obj)
		return 0;
	if (!json_is_object(obj))
		return -1;
	l = arena_calloc(a, json_object_size(obj) + 1, sizeof(*l));
	str = arena_calloc(a, json_object_size(obj) + 1, sizeof(*str));
	if (!l || !str)
		return -1;
	json_object_foreach((json_t *)obj, k, v) {
		const char *value = json_is_object(v) || text == string_text
					    ? text(v, a, &str[*n])
					    : NULL;

		if (!value)
			continue;
		l[*n] = (struct pool_label){qualified(driver, k, a), value};
		if (!l[*n].key)
			return -1;
		(*n)++;
	}
	*labels = l;
	*is_string = str;
	return 0;
}

/* A taint {key, value, effect}; false when it has no key. */
static bool taint_of(const json_t *t, struct pool_taint *out)
{
	const char *key = get_str(t, "key");
	const char *value = get_str(t, "value");
	const char *effect = get_str(t, "effect");

	if (!key)
		return false;
	*out = (struct pool_taint){key, value ? value : "", effect ? effect : ""};
	return true;
}

static int taints_of(const json_t *taints, struct arena *a, struct pool_device *d)
{
	struct pool_device_taint *t;
	size_t i, n = 0;
	json_t *x;

	if (!taints)
		return 0;
	if (!json_is_array(taints) || json_array_size(taints) > DRA_DEVICE_MAX_TAINTS)
		return -1;
	t = arena_calloc(a, json_array_size(taints) + 1, sizeof(*t));
	if (!t)
		return -1;
	json_array_foreach(taints, i, x)
		if (taint_of(x, &t[n].taint))
			n++;
	d->taints = t;
	d->n_taints = n;
	return 0;
}

/* counters (NAME -> {value: quantity}, at most max of them) into *out
 * and *n; -1 when it is not an object, is empty or over max, a value is
 * no quantity, or out of memory. */
static int counters_of(const json_t *counters, size_t max, struct arena *a,
		       const struct pool_label **out, size_t *n)
{
	struct pool_label *l;
	const char *k;
	json_t *v;

	*n = 0;
	if (!json_is_object(counters) || json_object_size(counters) == 0 ||
	    json_object_size(counters) > max)
		return -1;
	if (!(l = arena_calloc(a, json_object_size(counters), sizeof(*l))))
		return -1;
	json_object_foreach((json_t *)counters, k, v) {
		const char *value = get_str(v, "value");

		if (!value || !k8s_quantity_valid(value))
			return -1;
		l[(*n)++] = (struct pool_label){k, value};
	}
	*out = l;
	return 0;
}

/* A device's consumesCounters[] {counterSet, counters}. */
static int consumes_of(const json_t *uses, struct arena *a, struct pool_device *d)
{
	struct pool_counter_use *u;
	size_t i;
	json_t *x;

	if (!uses)
		return 0;
	if (!json_is_array(uses) || json_array_size(uses) > DRA_DEVICE_MAX_CONSUMES)
		return -1;
	if (!(u = arena_calloc(a, json_array_size(uses) + 1, sizeof(*u))))
		return -1;
	json_array_foreach(uses, i, x) {
		u[i].set = get_str(x, "counterSet");
		if (!u[i].set ||
		    counters_of(json_object_get(x, "counters"), DRA_CONSUMES_MAX_COUNTERS, a,
				&u[i].counters, &u[i].n_counters) < 0)
			return -1;
	}
	d->consumes = u;
	d->n_consumes = json_array_size(uses);
	return 0;
}

/* spec.sharedCounters[] {name, counters} of slice out. */
static int counter_sets_of(const json_t *sets, struct arena *a, struct inventory_slice *out)
{
	struct pool_counter_set *c;
	size_t i;
	json_t *x;

	if (!sets)
		return 0;
	if (!json_is_array(sets) || json_array_size(sets) > DRA_SLICE_MAX_COUNTER_SETS)
		return -1;
	if (!(c = arena_calloc(a, json_array_size(sets) + 1, sizeof(*c))))
		return -1;
	json_array_foreach(sets, i, x) {
		c[i].driver = out->driver;
		c[i].pool = out->pool;
		c[i].name = get_str(x, "name");
		if (!c[i].name ||
		    counters_of(json_object_get(x, "counters"), DRA_COUNTER_SET_MAX_COUNTERS,
				a, &c[i].counters, &c[i].n_counters) < 0)
			return -1;
	}
	out->counter_sets = c;
	out->n_counter_sets = json_array_size(sets);
	return 0;
}

/* A device of the slice; 1 when read, 0 when skipped (no name), -1. */
static int device_of(const json_t *x, const struct inventory_slice *s, struct arena *a,
		     struct pool_device *d)
{
	const json_t *attrs = json_object_get(x, "attributes");
	const json_t *cap = json_object_get(x, "capacity");
	const bool *unused; /* capacities are no strings */

	memset(d, 0, sizeof(*d));
	d->name = get_str(x, "name");
	if (!d->name)
		return 0;
	if (json_object_size(attrs) + json_object_size(cap) > DRA_DEVICE_MAX_ATTRIBUTES)
		return -1;
	d->driver = s->driver;
	d->pool = s->pool;
	if (qualified_of(attrs, s->driver, a, attribute_text, &d->attributes,
			 &d->attribute_is_string, &d->n_attributes) < 0 ||
	    qualified_of(cap, s->driver, a, capacity_text, &d->capacity, &unused,
			 &d->n_capacity) < 0 ||
	    taints_of(json_object_get(x, "taints"), a, d) < 0 ||
	    consumes_of(json_object_get(x, "consumesCounters"), a, d) < 0)
		return -1;
	d->multi_alloc = json_is_true(json_object_get(x, "allowMultipleAllocations"));
	return 1;
}

int dra_slice_facts(const json_t *obj, struct arena *a, struct inventory_slice *out)
{
	const json_t *spec = json_object_get(obj, "spec");
	const json_t *pool = json_object_get(spec, "pool");
	const json_t *gen = json_object_get(pool, "generation");
	const json_t *count = json_object_get(pool, "resourceSliceCount");
	const json_t *node = json_object_get(spec, "nodeName");
	const json_t *devices = json_object_get(spec, "devices");
	struct pool_device *d;
	size_t i, n = 0;
	bool advanced = false;
	json_t *x;

	memset(out, 0, sizeof(*out));
	out->name = get_str(json_object_get(obj, "metadata"), "name");
	out->driver = get_str(spec, "driver");
	out->pool = get_str(pool, "name");
	if (!out->name || !out->driver || !out->pool || !absent_or(gen, JSON_INTEGER) ||
	    !absent_or(count, JSON_INTEGER) || !absent_or(node, JSON_STRING) ||
	    !absent_or(devices, JSON_ARRAY) ||
	    json_array_size(devices) > DRA_SLICE_MAX_DEVICES)
		return -1;
	out->generation = json_integer_value(gen);
	out->slice_count = json_integer_value(count);
	out->node = json_string_value(node);
	if (out->node && !out->node[0])
		out->node = NULL;
	if (counter_sets_of(json_object_get(spec, "sharedCounters"), a, out) < 0)
		return -1;
	if (!json_array_size(devices))
		return 0;
	d = arena_calloc(a, json_array_size(devices), sizeof(*d));
	if (!d)
		return -1;
	json_array_foreach(devices, i, x) {
		int rc = json_is_object(x) ? device_of(x, out, a, &d[n]) : 0;

		if (rc < 0)
			return -1;
		n += (size_t)rc;
		if (rc > 0 && (d[n - 1].n_consumes || d[n - 1].n_taints))
			advanced = true;
	}
	if (advanced && json_array_size(devices) > DRA_SLICE_MAX_ADVANCED_DEVICES)
		return -1;
	out->devices = d;
	out->n_devices = n;
	return 0;
}

int dra_taint_rule_facts(const json_t *obj, struct inventory_taint_rule *out)
{
	const json_t *spec = json_object_get(obj, "spec");
	const json_t *sel = json_object_get(spec, "deviceSelector");
	const json_t *taint = json_object_get(spec, "taint");

	memset(out, 0, sizeof(*out));
	out->name = get_str(json_object_get(obj, "metadata"), "name");
	if (!out->name || !absent_or(sel, JSON_OBJECT) || !json_is_object(taint) ||
	    !taint_of(taint, &out->taint))
		return -1;
	out->has_selector = sel != NULL;
	out->driver = get_str(sel, "driver");
	out->pool = get_str(sel, "pool");
	out->device = get_str(sel, "device");
	return 0;
}

int dra_claim_facts(const json_t *obj, struct arena *a, struct dra_claim *out)
{
	const json_t *results = json_object_get(
		json_object_get(json_object_get(json_object_get(obj, "status"),
						"allocation"),
				"devices"),
		"results");
	struct inventory_claim_device *d;
	size_t i, n = 0;
	json_t *x;

	memset(out, 0, sizeof(*out));
	out->uid = get_str(json_object_get(obj, "metadata"), "uid");
	if (!out->uid || !absent_or(results, JSON_ARRAY) ||
	    json_array_size(results) > DRA_CLAIM_MAX_RESULTS)
		return -1;
	if (!json_array_size(results))
		return 0;
	d = arena_calloc(a, json_array_size(results), sizeof(*d));
	if (!d)
		return -1;
	json_array_foreach(results, i, x) {
		const json_t *consumed = json_object_get(x, "consumedCapacity");
		const bool *unused;

		d[n] = (struct inventory_claim_device){.driver = get_str(x, "driver"),
						       .pool = get_str(x, "pool"),
						       .device = get_str(x, "device")};
		if (!d[n].driver || !d[n].pool || !d[n].device ||
		    json_is_true(json_object_get(x, "adminAccess")))
			continue;
		/* A share of a device that allows multiple allocations: what
		 * it consumes of each capacity (names qualified as the
		 * slices' are; quantities are strings in the API). */
		if (json_object_size(consumed) > DRA_DEVICE_MAX_ATTRIBUTES ||
		    qualified_of(consumed, d[n].driver, a, string_text, &d[n].consumed,
				 &unused, &d[n].n_consumed) < 0)
			return -1;
		n++;
	}
	out->devices = d;
	out->n_devices = n;
	return 0;
}

int dra_class_facts(const json_t *obj, struct dra_class *out)
{
	const json_t *spec = json_object_get(obj, "spec");
	const json_t *ext = json_object_get(spec, "extendedResourceName");

	out->name = get_str(json_object_get(obj, "metadata"), "name");
	out->extended_resource = json_string_value(ext);
	if (!out->name || !absent_or(spec, JSON_OBJECT) || !absent_or(ext, JSON_STRING))
		return -1;
	if (out->extended_resource && !out->extended_resource[0])
		out->extended_resource = NULL;
	return 0;
}

int dra_facts_put(struct inventory *inv, enum inventory_kind kind, const json_t *obj,
		  struct arena *a)
{
	switch (kind) {
	case INVENTORY_SLICES: {
		struct inventory_slice s;

		return dra_slice_facts(obj, a, &s) < 0 ? -1 : inventory_slice_put(inv, &s);
	}
	case INVENTORY_TAINT_RULES: {
		struct inventory_taint_rule r;

		return dra_taint_rule_facts(obj, &r) < 0 ? -1
							 : inventory_taint_rule_put(inv, &r);
	}
	case INVENTORY_CLAIMS: {
		struct dra_claim c;

		return dra_claim_facts(obj, a, &c) < 0
			       ? -1
			       : inventory_claim_put(inv, c.uid, c.devices, c.n_devices);
	}
	case INVENTORY_DEVICE_CLASSES: {
		struct dra_class c;

		return dra_class_facts(obj, &c) < 0
			       ? -1
			       : inventory_device_class_put(inv, c.name, c.extended_resource);
	}
	default:
		return -1;
	}
}

void dra_facts_delete(struct inventory *inv, enum inventory_kind kind, const json_t *obj)
{
	const json_t *meta = json_object_get(obj, "metadata");
	const char *name = get_str(meta, "name");
	const char *uid = get_str(meta, "uid");

	if (kind == INVENTORY_CLAIMS && uid)
		inventory_claim_delete(inv, uid);
	if (!name)
		return;
	if (kind == INVENTORY_SLICES)
		inventory_slice_delete(inv, name);
	else if (kind == INVENTORY_TAINT_RULES)
		inventory_taint_rule_delete(inv, name);
	else if (kind == INVENTORY_DEVICE_CLASSES)
		inventory_device_class_delete(inv, name);
}
