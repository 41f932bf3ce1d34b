#include "report/quotas.h"

#include "base/strbuf.h"
#include "policy/k8s.h"
#include "policy/policy.h"
#include "usage/usage.h"
#include "report/classes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* json_object_set_new() takes v even when it fails: one check at the end. */
static int set(json_t *o, const char *key, json_t *v)
{
	return v ? json_object_set_new(o, key, v) : -1;
}

static int64_t num(const json_t *o, const char *key)
{
	return (int64_t)json_integer_value(json_object_get(o, key));
}

int quotas_waiting_add(json_t *acc, const char *tenant, const char *flavor,
		       int64_t per_pod)
{
	json_t *t = json_object_get(acc, tenant), *f;

	if (!t && (set(acc, tenant, json_object()) < 0 ||
		   !(t = json_object_get(acc, tenant))))
		return -1;
	f = json_object_get(t, flavor);
	if (!f && (set(t, flavor, json_pack("{s:I, s:I}", "pods", (json_int_t)0, "gpus",
					    (json_int_t)0)) < 0 ||
		   !(f = json_object_get(t, flavor))))
		return -1;
	return set(f, "pods", json_integer(num(f, "pods") + 1)) |
	       set(f, "gpus", json_integer(num(f, "gpus") + per_pod));
}

json_t *quotas_status_new(const json_t *tenant_report, const json_t *waiting,
			  const char *now)
{
	const char *tenant = json_string_value(json_object_get(tenant_report, "name"));
	const json_t *cohort = json_object_get(tenant_report, "cohort");
	const json_t *w = tenant ? json_object_get(waiting, tenant) : NULL;
	json_t *st = json_object(), *flavors = json_array(), *q;
	struct strbuf used;
	int64_t pods_waiting = 0;
	size_t i;
	int rc = 0;

	strbuf_init(&used, 64u << 10);
	if (!st || !flavors || !tenant)
		goto fail;
	rc |= set(st, "tenant", json_string(tenant));
	if (json_is_string(cohort))
		rc |= set(st, "cohort", json_deep_copy(cohort));
	json_array_foreach(json_object_get(tenant_report, "quota"), i, q) {
		const char *flavor = json_string_value(json_object_get(q, "flavor"));
		const json_t *fw = flavor ? json_object_get(w, flavor) : NULL;
		int64_t b = num(q, "borrowed"), l = num(q, "lent");
		const json_t *nb = json_object_get(q, "notBacked");
		json_t *e;

		if (!flavor)
			continue;
		e = json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I}", "flavor", flavor,
			      "nominal", (json_int_t)num(q, "nominal"), "used",
			      (json_int_t)num(q, "used"), "borrowed", (json_int_t)b, "lent",
			      (json_int_t)l, "waitingPods", (json_int_t)num(fw, "pods"),
			      "waitingGPUs", (json_int_t)num(fw, "gpus"));
		/* Only when the pool is known (policy/capacity.h). */
		if (e && json_is_integer(nb)) {
			rc |= set(e, "backed", json_integer(num(q, "backed")));
			rc |= set(e, "notBacked", json_integer(num(q, "notBacked")));
		}
		rc |= json_array_append_new(flavors, e);
		pods_waiting += num(fw, "pods");
		strbuf_addf(&used, "%s%s %lld/%lld", i ? ", " : "", flavor,
			    (long long)num(q, "used"), (long long)num(q, "nominal"));
		if (b > 0)
			strbuf_addf(&used, " (+%lld borrowed)", (long long)b);
		if (l > 0)
			strbuf_addf(&used, " (%lld lent)", (long long)l);
		if (num(q, "notBacked") > 0)
			strbuf_addf(&used, " (%lld not backed)",
				    (long long)num(q, "notBacked"));
	}
	if (strbuf_failed(&used))
		goto fail;
	rc |= set(st, "flavors", flavors);
	flavors = NULL;
	rc |= set(st, "used", json_string(used.len ? used.buf : "-"));
	rc |= set(st, "waiting", json_integer(pods_waiting));
	rc |= set(st, "updated", json_string(now));
	if (rc)
		goto fail;
	strbuf_release(&used);
	return st;
fail:
	strbuf_release(&used);
	json_decref(flavors);
	json_decref(st);
	return NULL;
}

static json_t *object_new(const char *ns, const char *name, json_t *status)
{
	json_t *o = json_pack("{s:s, s:s, s:{s:s, s:s, s:{s:s}}}", "apiVersion",
			      QUOTAS_API_VERSION, "kind", QUOTAS_KIND, "metadata",
			      "name", name, "namespace", ns, "labels",
			      CLASSES_OWNER_LABEL, CLASSES_OWNER);

	if (!o || !status || set(o, "status", status) < 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* The object of namespace ns into out, when the policy gives ns a
 * tenant that can name an object.  -1 when out of memory. */
static int want(json_t *out, const struct policy *p, const json_t *tenants_report,
		const char *ns, const json_t *waiting, const char *now)
{
	const struct policy_tenant *t = policy_tenant_for_namespace(p, ns);
	const json_t *tr = NULL, *x;
	char key[320];
	size_t i;

	if (!t || !k8s_dns_subdomain_valid(t->name) || !k8s_dns_label_valid(ns))
		return 0;
	json_array_foreach(tenants_report, i, x) {
		const char *name = json_string_value(json_object_get(x, "name"));

		if (name && strcmp(name, t->name) == 0) {
			tr = x;
			break;
		}
	}
	if (!tr)
		return 0;
	snprintf(key, sizeof(key), "%s/%s", ns, t->name);
	return set(out, key, object_new(ns, t->name, quotas_status_new(tr, waiting, now)));
}

json_t *quotas_wanted_new(const struct policy *p, const json_t *tenants_report,
			  const json_t *namespaces, const json_t *waiting,
			  const char *now)
{
	json_t *out = json_object();
	const json_t *n;
	size_t i;
	int rc = 0;

	if (!out)
		return NULL;
	json_array_foreach(namespaces, i, n)
		if (json_is_string(n))
			rc |= want(out, p, tenants_report, json_string_value(n), waiting, now);
	for (i = 0; !namespaces && i < policy_tenant_count(p); i++) {
		const struct policy_tenant *t = policy_tenant_at(p, i);

		for (size_t k = 0; k < t->n_namespaces; k++)
			if (!strpbrk(t->namespaces[k], "*?["))
				rc |= want(out, p, tenants_report, t->namespaces[k], waiting,
					   now);
	}
	if (rc) {
		json_decref(out);
		return NULL;
	}
	return out;
}

int quotas_status_same(const json_t *a, const json_t *b)
{
	const char *k;
	const json_t *v;

	if (!json_is_object(a) || !json_is_object(b))
		return 0;
	json_object_foreach((json_t *)a, k, v)
		if (strcmp(k, "updated") != 0 && !json_equal(v, json_object_get(b, k)))
			return 0;
	json_object_foreach((json_t *)b, k, v)
		if (strcmp(k, "updated") != 0 && !json_object_get(a, k))
			return 0;
	return 1;
}

static const char *meta_str(const json_t *obj, const char *key)
{
	return json_string_value(json_object_get(json_object_get(obj, "metadata"), key));
}

void quotas_key(const json_t *obj, char *out, size_t size)
{
	const char *ns = meta_str(obj, "namespace"), *name = meta_str(obj, "name");

	if (ns && name)
		snprintf(out, size, "%s/%s", ns, name);
	else if (size)
		out[0] = '\0';
}

int quotas_plan_make(const json_t *wanted, const json_t *known,
		     struct quotas_plan *out)
{
	struct quotas_plan pl = {json_array(), json_array(), json_array(), 0};
	json_t *index = json_object();
	const char *key;
	const json_t *o, *want;
	size_t i;
	int rc = 0;

	if (!pl.create || !pl.update || !pl.remove || !index)
		goto fail;
	json_array_foreach(known, i, o) {
		char k[320];

		quotas_key(o, k, sizeof(k));
		if (!k[0])
			continue;
		if (json_object_get(wanted, k) && !json_object_get(index, k))
			rc |= json_object_set(index, k, (json_t *)o);
		else
			rc |= json_array_append(pl.remove, (json_t *)o);
	}
	json_object_foreach((json_t *)wanted, key, want) {
		const json_t *have = json_object_get(index, key);
		json_t *w;

		if (have && quotas_status_same(json_object_get(have, "status"),
					       json_object_get(want, "status"))) {
			pl.unchanged++;
			continue;
		}
		w = json_deep_copy(want);
		if (!w)
			goto fail;
		if (!have) {
			rc |= json_array_append_new(pl.create, w);
			continue;
		}
		{
			json_t *meta = json_object_get(w, "metadata");
			const char *rv = meta_str(have, "resourceVersion");
			const char *uid = meta_str(have, "uid");

			if (rv)
				rc |= set(meta, "resourceVersion", json_string(rv));
			if (uid)
				rc |= set(meta, "uid", json_string(uid));
		}
		rc |= json_array_append_new(pl.update, w);
	}
	if (rc)
		goto fail;
	json_decref(index);
	*out = pl;
	return 0;
fail:
	json_decref(index);
	quotas_plan_release(&pl);
	return -1;
}

void quotas_plan_release(struct quotas_plan *pl)
{
	json_decref(pl->create);
	json_decref(pl->update);
	json_decref(pl->remove);
	memset(pl, 0, sizeof(*pl));
}

int quotas_text(const json_t *items, struct strbuf *out)
{
	const json_t *o, *f;
	size_t i, k;

	strbuf_addf(out, "%-20s %-20s %6s %8s %9s %6s %8s  %s\n", "TENANT", "FLAVOR",
		    "USED", "NOMINAL", "BORROWED", "LENT", "WAITING", "UPDATED");
	json_array_foreach(items, i, o) {
		const json_t *st = json_object_get(o, "status");
		const char *tenant = json_string_value(json_object_get(st, "tenant"));
		const char *when = json_string_value(json_object_get(st, "updated"));

		json_array_foreach(json_object_get(st, "flavors"), k, f)
			strbuf_addf(out, "%-20s %-20s %6lld %8lld %9lld %6lld %8lld  %s\n",
				    tenant ? tenant : "-",
				    json_string_value(json_object_get(f, "flavor"))
					    ? json_string_value(json_object_get(f, "flavor"))
					    : "-",
				    (long long)num(f, "used"), (long long)num(f, "nominal"),
				    (long long)num(f, "borrowed"), (long long)num(f, "lent"),
				    (long long)num(f, "waitingPods"), when ? when : "-");
	}
	return strbuf_failed(out) ? -1 : 0;
}

size_t quotas_observe(struct usage_store *u, const json_t *items)
{
	const json_t *o, *f;
	size_t i, k, n = 0;

	json_array_foreach(items, i, o) {
		const json_t *st = json_object_get(o, "status");
		const char *tenant = json_string_value(json_object_get(st, "tenant"));

		json_array_foreach(json_object_get(st, "flavors"), k, f) {
			const char *flavor = json_string_value(json_object_get(f, "flavor"));
			int64_t used = num(f, "used");
			char uid[300];

			if (!tenant || !flavor || used <= 0)
				continue;
			/* the same uid again replaces: a tenant counts once */
			snprintf(uid, sizeof(uid), "gpuquota/%s/%s", tenant, flavor);
			usage_observe(u, &(struct usage_item){
				.uid = uid, .kind = USAGE_PODS,
				.namespace = json_string_value(json_object_get(
					json_object_get(o, "metadata"), "namespace")),
				.name = uid, .tenant = tenant, .flavor = flavor,
				.per_pod = used, .slots = 1, .units = used, .active = true});
			n++;
		}
	}
	return n;
}
