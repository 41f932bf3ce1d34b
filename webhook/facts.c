#include "webhook/facts.h"

#include "base/arena.h"
#include "base/diag.h"
#include "base/text.h"
#include "codec/jget.h"
#include "policy/dra-template.h"
#include "policy/kinds.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

struct fx {
	struct arena *a;
	struct diag *d;
	bool failed;
	bool oom;
};

static void bad(struct fx *x, const char *path, const char *what)
{
	if (x->failed)
		return;
	x->failed = true;
	diag_addf(x->d, "%s %s", path, what);
}

/*
 * path + "." + key, then "[index]" when index >= 0, cut to fit size: the
 * paths of messages, built for every container and list item on the way
 * down (snprintf would cost more than the rest of the walk).
 */
static const char *sub(char *buf, size_t size, const char *path,
		       const char *key, long index)
{
	size_t n = 0;
	char digits[TEXT_DECIMAL_MAX];

	for (const char *s = path; *s && n + 1 < size; s++)
		buf[n++] = *s;
	if (n + 1 < size)
		buf[n++] = '.';
	for (const char *s = key; *s && n + 1 < size; s++)
		buf[n++] = *s;
	if (index >= 0) {
		if (n + 1 < size)
			buf[n++] = '[';
		for (const char *s = text_decimal(digits, (uint64_t)index);
		     *s && n + 1 < size; s++)
			buf[n++] = *s;
		if (n + 1 < size)
			buf[n++] = ']';
	}
	buf[n] = '\0';
	return buf;
}

static void wrong_type(struct fx *x, const char *path, const char *key,
		       json_type want)
{
	char full[512];

	snprintf(full, sizeof(full), "%s%s%s", path, path[0] ? "." : "", key);
	bad(x, full,
	    want == JSON_OBJECT  ? "is not an object"
	    : want == JSON_ARRAY ? "is not a list"
	    : want == JSON_STRING ? "is not a string"
				  : "has the wrong type");
}

/*
 * Member `key` of obj when it is of the wanted type; NULL when absent or
 * null; a wrong type is reported.  Inlined, so that the length of a literal
 * key is known where it is looked up (jget()).
 */
static inline __attribute__((always_inline)) const json_t *
member(struct fx *x, const json_t *obj, const char *key, json_type want,
       const char *path)
{
	const json_t *v;

	if (!obj)
		return NULL;
	v = jget(obj, key);
	if (!v || json_is_null(v))
		return NULL;
	if (json_typeof(v) == want)
		return v;
	wrong_type(x, path, key, want);
	return NULL;
}

static inline __attribute__((always_inline)) const char *
string(struct fx *x, const json_t *obj, const char *key, const char *path)
{
	const json_t *v = member(x, obj, key, JSON_STRING, path);

	return v ? json_string_value(v) : NULL;
}

static void *alloc(struct fx *x, size_t n, size_t size)
{
	void *p = arena_calloc(x->a, n ? n : 1, size);

	if (!p) {
		x->oom = true;
		bad(x, "object", "is too large (out of memory)");
	}
	return p;
}

/* A string map (labels, annotations, nodeSelector). */
static const struct wl_kv *string_map(struct fx *x, const json_t *obj,
				      const char *key, const char *path,
				      size_t *n)
{
	const json_t *m = member(x, obj, key, JSON_OBJECT, path);
	struct wl_kv *kv;
	const char *k;
	json_t *v;
	size_t i = 0;

	*n = 0;
	if (!m)
		return NULL;
	kv = alloc(x, json_object_size(m), sizeof(*kv));
	if (!kv)
		return NULL;
	json_object_foreach((json_t *)m, k, v) {
		if (!json_is_string(v)) {
			char full[512];

			snprintf(full, sizeof(full), "%s.%s[\"%.60s\"]", path, key, k);
			bad(x, full, "is not a string");
			return NULL;
		}
		kv[i].key = k;
		kv[i].value = json_string_value(v);
		i++;
	}
	*n = i;
	return kv;
}

static const struct wl_resource *resources(struct fx *x, const json_t *res,
					   const char *key, const char *path,
					   size_t *n)
{
	const json_t *m = member(x, res, key, JSON_OBJECT, path);
	struct wl_resource *r;
	const char *k;
	json_t *v;
	size_t i = 0;

	*n = 0;
	if (!m)
		return NULL;
	r = alloc(x, json_object_size(m), sizeof(*r));
	if (!r)
		return NULL;
	json_object_foreach((json_t *)m, k, v) {
		r[i].name = k;
		/* Quantities are strings on the wire; hand-written reviews
		 * sometimes use numbers, which the rules treat as invalid. */
		r[i].quantity = json_is_string(v) ? json_string_value(v) : NULL;
		i++;
	}
	*n = i;
	return r;
}

/* envFrom: the source of each entry, its name and its prefix. */
static void env_from(struct fx *x, const json_t *c, const char *path,
		     struct wl_container *out)
{
	const json_t *arr = member(x, c, "envFrom", JSON_ARRAY, path);
	struct wl_env_from *e;
	size_t i;
	json_t *item;

	if (!arr)
		return;
	e = alloc(x, json_array_size(arr), sizeof(*e));
	if (!e)
		return;
	json_array_foreach(arr, i, item) {
		char ep[256], rp[288];
		const json_t *ref;

		sub(ep, sizeof(ep), path, "envFrom", (long)i);
		if (!json_is_object(item)) {
			bad(x, ep, "is not an object");
			return;
		}
		e[i].prefix = string(x, item, "prefix", ep);
		ref = member(x, item, "configMapRef", JSON_OBJECT, ep);
		if (ref) {
			sub(rp, sizeof(rp), ep, "configMapRef", -1);
			e[i].source = WL_ENV_CONFIG_MAP;
			e[i].name = string(x, ref, "name", rp);
			continue;
		}
		ref = member(x, item, "secretRef", JSON_OBJECT, ep);
		if (ref) {
			sub(rp, sizeof(rp), ep, "secretRef", -1);
			e[i].source = WL_ENV_SECRET;
			e[i].name = string(x, ref, "name", rp);
		}
	}
	out->env_from = e;
	out->n_env_from = json_array_size(arr);
}

/* resources.claims[].name, read leniently like spec.resourceClaims. */
static void container_claims(struct fx *x, const json_t *res,
			     struct wl_container *out)
{
	const json_t *arr = jget(res, "claims");
	const char **names;
	size_t i, n = 0;
	json_t *item;

	if (!arr || !json_is_array(arr) || json_array_size(arr) == 0)
		return;
	names = alloc(x, json_array_size(arr), sizeof(*names));
	if (!names)
		return;
	json_array_foreach(arr, i, item) {
		const char *name = json_string_value(jget(item, "name"));

		if (name)
			names[n++] = name;
	}
	out->claims = names;
	out->n_claims = n;
}

static void container(struct fx *x, const json_t *c, const char *path,
		      struct wl_container *out)
{
	const json_t *res, *env, *mounts, *sc, *lc, *pre, *exec, *cmd, *priv;

	if (!json_is_object(c)) {
		bad(x, path, "is not an object");
		return;
	}
	out->name = string(x, c, "name", path);
	res = member(x, c, "resources", JSON_OBJECT, path);
	if (res) {
		char rp[256];

		sub(rp, sizeof(rp), path, "resources", -1);
		out->limits = resources(x, res, "limits", rp, &out->n_limits);
		out->requests = resources(x, res, "requests", rp, &out->n_requests);
		container_claims(x, res, out);
	}
	env = member(x, c, "env", JSON_ARRAY, path);
	if (env) {
		struct wl_kv *e = alloc(x, json_array_size(env), sizeof(*e));
		size_t i;
		json_t *item;

		if (!e)
			return;
		json_array_foreach(env, i, item) {
			char ep[256];

			sub(ep, sizeof(ep), path, "env", (long)i);
			if (!json_is_object(item)) {
				bad(x, ep, "is not an object");
				return;
			}
			e[i].key = string(x, item, "name", ep);
			e[i].value = string(x, item, "value", ep);
		}
		out->env = e;
		out->n_env = json_array_size(env);
	}
	env_from(x, c, path, out);
	mounts = member(x, c, "volumeMounts", JSON_ARRAY, path);
	if (mounts) {
		struct wl_mount *m = alloc(x, json_array_size(mounts), sizeof(*m));
		size_t i;
		json_t *item;

		if (!m)
			return;
		json_array_foreach(mounts, i, item) {
			char mp[256];

			sub(mp, sizeof(mp), path, "volumeMounts", (long)i);
			if (!json_is_object(item)) {
				bad(x, mp, "is not an object");
				return;
			}
			m[i].volume = string(x, item, "name", mp);
			m[i].path = string(x, item, "mountPath", mp);
			m[i].sub_path = string(x, item, "subPath", mp);
			if (!m[i].sub_path)
				m[i].sub_path = string(x, item, "subPathExpr", mp);
		}
		out->mounts = m;
		out->n_mounts = json_array_size(mounts);
	}
	sc = member(x, c, "securityContext", JSON_OBJECT, path);
	priv = sc ? jget(sc, "privileged") : NULL;
	out->privileged = priv && json_is_true(priv);
	out->restart_policy = string(x, c, "restartPolicy", path);
	lc = member(x, c, "lifecycle", JSON_OBJECT, path);
	pre = lc ? jget(lc, "preStop") : NULL;
	out->has_pre_stop = pre && json_is_object(pre);
	exec = out->has_pre_stop ? jget(pre, "exec") : NULL;
	cmd = exec && json_is_object(exec) ? jget(exec, "command") : NULL;
	if (cmd && json_is_array(cmd)) {
		const char **argv = alloc(x, json_array_size(cmd), sizeof(*argv));
		size_t i;
		json_t *item;

		if (!argv)
			return;
		json_array_foreach(cmd, i, item)
			argv[i] = json_is_string(item) ? json_string_value(item) : NULL;
		out->pre_stop_exec = argv;
		out->n_pre_stop_exec = json_array_size(cmd);
	}
}

static const struct wl_container *containers(struct fx *x, const json_t *spec,
					     const char *key, const char *path,
					     size_t *n)
{
	const json_t *arr = member(x, spec, key, JSON_ARRAY, path);
	struct wl_container *out;
	size_t i;
	json_t *item;

	*n = 0;
	if (!arr)
		return NULL;
	out = alloc(x, json_array_size(arr), sizeof(*out));
	if (!out)
		return NULL;
	json_array_foreach(arr, i, item) {
		char cp[96];

		sub(cp, sizeof(cp), path, key, (long)i);
		container(x, item, cp, &out[i]);
		if (x->failed)
			return NULL;
	}
	*n = json_array_size(arr);
	return out;
}

/* A downwardAPI volume of one item (the checkpoint signal's shape), read
 * leniently: any other shape leaves both fields NULL. */
static void downward(const json_t *vol, struct wl_volume *v)
{
	const json_t *items = jget(jget(vol, "downwardAPI"), "items");
	const json_t *item;

	if (!json_is_array(items) || json_array_size(items) != 1)
		return;
	item = json_array_get(items, 0);
	v->downward_path = json_string_value(jget(item, "path"));
	v->downward_field =
		json_string_value(jget(jget(item, "fieldRef"), "fieldPath"));
}

static void volumes(struct fx *x, const json_t *spec, const char *path,
		    struct wl_pod *pod)
{
	const json_t *arr = member(x, spec, "volumes", JSON_ARRAY, path);
	struct wl_volume *v;
	size_t i;
	json_t *item;

	if (!arr)
		return;
	v = alloc(x, json_array_size(arr), sizeof(*v));
	if (!v)
		return;
	json_array_foreach(arr, i, item) {
		char vp[96];
		const json_t *hp;

		sub(vp, sizeof(vp), path, "volumes", (long)i);
		if (!json_is_object(item)) {
			bad(x, vp, "is not an object");
			return;
		}
		v[i].name = string(x, item, "name", vp);
		hp = member(x, item, "hostPath", JSON_OBJECT, vp);
		v[i].host_path = hp ? string(x, hp, "path", vp) : NULL;
		downward(item, &v[i]);
	}
	pod->volumes = v;
	pod->n_volumes = json_array_size(arr);
}

/*
 * spec.tolerations, read leniently: a list of the wrong type is reported
 * by apply_plan(), which must extend it ("cannot mutate the Pod:
 * tolerations is not a list"); an entry that is not an object is left
 * out, and a field that is not a string reads as absent.  The apiserver
 * sends neither.
 */
static void tolerations(struct fx *x, const json_t *spec, struct wl_pod *pod)
{
	const json_t *arr = jget(spec, "tolerations");
	struct wl_toleration *t;
	size_t i, n = 0;
	json_t *item;

	if (!arr || !json_is_array(arr) || json_array_size(arr) == 0)
		return;
	t = alloc(x, json_array_size(arr), sizeof(*t));
	if (!t)
		return;
	json_array_foreach(arr, i, item) {
		if (!json_is_object(item))
			continue;
		t[n].key = json_string_value(jget(item, "key"));
		t[n].op = json_string_value(jget(item, "operator"));
		t[n].value = json_string_value(jget(item, "value"));
		t[n].effect = json_string_value(jget(item, "effect"));
		n++;
	}
	pod->tolerations = t;
	pod->n_tolerations = n;
}

/* spec.schedulingGates[].name, read leniently like the tolerations: an
 * entry that is not an object with a string name is left out. */
static void scheduling_gates(struct fx *x, const json_t *spec, struct wl_pod *pod)
{
	const json_t *arr = jget(spec, "schedulingGates");
	const char **g;
	size_t i, n = 0;
	json_t *item;

	if (!arr || !json_is_array(arr) || json_array_size(arr) == 0)
		return;
	g = alloc(x, json_array_size(arr), sizeof(*g));
	if (!g)
		return;
	json_array_foreach(arr, i, item) {
		const char *name = json_string_value(jget(item, "name"));

		if (name)
			g[n++] = name;
	}
	pod->scheduling_gates = g;
	pod->n_scheduling_gates = n;
}

/* spec.resourceClaims[] of a pod (or a pod template), read leniently: the
 * apiserver validated it, and an entry that is not an object names
 * nothing. */
static void pod_claim_entries(struct fx *x, const json_t *spec, struct wl_pod *pod)
{
	const json_t *arr = spec ? jget(spec, "resourceClaims") : NULL;
	struct wl_pod_claim *out;
	size_t i, n = 0;
	json_t *item;

	if (!arr || !json_is_array(arr) || json_array_size(arr) == 0)
		return;
	out = alloc(x, json_array_size(arr), sizeof(*out));
	if (!out)
		return;
	json_array_foreach(arr, i, item) {
		if (!json_is_object(item))
			continue;
		out[n].name = json_string_value(jget(item, "name"));
		out[n].claim = json_string_value(jget(item, "resourceClaimName"));
		out[n].template_name =
			json_string_value(jget(item, "resourceClaimTemplateName"));
		n++;
	}
	pod->claims = out;
	pod->n_claims = n;
}

/* metadata + spec of a pod (a Pod, or a Job's spec.template). */
static void pod_facts(struct fx *x, const json_t *meta, const json_t *spec,
		      const char *mpath, const char *spath, struct wl_pod *pod)
{
	const json_t *grace, *prio;

	pod->labels = string_map(x, meta, "labels", mpath, &pod->n_labels);
	pod->annotations = string_map(x, meta, "annotations", mpath,
				      &pod->n_annotations);
	if (!spec)
		return;
	pod->containers = containers(x, spec, "containers", spath,
				     &pod->n_containers);
	pod->init_containers = containers(x, spec, "initContainers", spath,
					  &pod->n_init_containers);
	pod->ephemeral_containers = containers(x, spec, "ephemeralContainers",
					       spath,
					       &pod->n_ephemeral_containers);
	volumes(x, spec, spath, pod);
	pod->node_selector = string_map(x, spec, "nodeSelector", spath,
					&pod->n_node_selector);
	pod->priority_class_name = string(x, spec, "priorityClassName", spath);
	prio = jget(spec, "priority");
	pod->has_priority = prio && !json_is_null(prio);
	/* The Priority admission plugin resolved it from the class before
	 * any webhook; a value out of int32 range is no priority it wrote. */
	if (json_is_integer(prio) && json_integer_value(prio) >= INT32_MIN &&
	    json_integer_value(prio) <= INT32_MAX)
		pod->priority = (int32_t)json_integer_value(prio);
	grace = jget(spec, "terminationGracePeriodSeconds");
	if (grace && json_is_integer(grace)) {
		pod->has_grace = true;
		pod->grace = json_integer_value(grace);
	}
	pod->restart_policy = string(x, spec, "restartPolicy", spath);
	pod->node_name = string(x, spec, "nodeName", spath);
	pod->service_account = string(x, spec, "serviceAccountName", spath);
	if (!pod->service_account)
		pod->service_account = string(x, spec, "serviceAccount", spath);
	tolerations(x, spec, pod);
	scheduling_gates(x, spec, pod);
	pod->scheduler_name = string(x, spec, "schedulerName", spath);
	pod->pod_group_name = json_string_value(
		jget(jget(spec, "schedulingGroup"), "podGroupName"));
	pod_claim_entries(x, spec, pod);
}

static void owner_job(struct fx *x, const json_t *meta, struct workload *wl)
{
	const json_t *refs = member(x, meta, "ownerReferences", JSON_ARRAY,
				    "metadata");
	size_t i;
	json_t *r;

	if (!refs)
		return;
	json_array_foreach(refs, i, r) {
		const json_t *ctrl;
		const struct kind_def *owner;

		if (!json_is_object(r))
			continue;
		ctrl = jget(r, "controller");
		if (!ctrl || !json_is_true(ctrl))
			continue;
		owner = kinds_by_api(json_string_value(jget(r, "apiVersion")),
				     json_string_value(jget(r, "kind")));
		if (!owner || owner->wl != WL_JOB)
			continue;
		wl->owner_job = json_string_value(jget(r, "name"));
		wl->owner_job_uid = json_string_value(jget(r, "uid"));
		return;
	}
}

/* A Pod's status: the scheduler's claim for its extended resources, and
 * the claim made from gpugate's template (policy/charge.h). */
static void pod_claim_status(const json_t *status, struct workload *wl)
{
	const json_t *arr = jget(status, "resourceClaimStatuses");
	size_t i;
	json_t *item;

	wl->extended_claim = json_string_value(jget(
		jget(status, "extendedResourceClaimStatus"), "resourceClaimName"));
	json_array_foreach(arr, i, item) {
		const char *name = json_string_value(jget(item, "name"));

		if (name && strcmp(name, DRA_TEMPLATE_ENTRY) == 0)
			wl->template_claim =
				json_string_value(jget(item, "resourceClaimName"));
	}
}

/* A claim's controller ownerReference of kind Pod (apiVersion v1), the
 * scheduler's annotation, and whether status.reservedFor names anything
 * but that pod. */
static void claim_owner(const json_t *meta, const json_t *status,
			struct workload *wl)
{
	const json_t *refs = jget(meta, "ownerReferences");
	const json_t *reserved = jget(status, "reservedFor");
	size_t i;
	json_t *r;

	json_array_foreach(refs, i, r) {
		const char *api = json_string_value(jget(r, "apiVersion"));
		const char *kind = json_string_value(jget(r, "kind"));

		if (!json_is_true(jget(r, "controller")) || !api || !kind ||
		    strcmp(api, "v1") != 0 || strcmp(kind, "Pod") != 0)
			continue;
		wl->owner_pod = json_string_value(jget(r, "name"));
		wl->owner_pod_uid = json_string_value(jget(r, "uid"));
		break;
	}
	wl->extended_resource_claim =
		wl_get(wl->annotations, wl->n_annotations,
		       "resource.kubernetes.io/extended-resource-claim") &&
		strcmp(wl_get(wl->annotations, wl->n_annotations,
			      "resource.kubernetes.io/extended-resource-claim"),
		       "true") == 0;
	json_array_foreach(reserved, i, r) {
		const char *res = json_string_value(jget(r, "resource"));
		const char *group = json_string_value(jget(r, "apiGroup"));
		const char *uid = json_string_value(jget(r, "uid"));

		if (!wl->owner_pod_uid || !res || strcmp(res, "pods") != 0 ||
		    (group && group[0]) || !uid || strcmp(uid, wl->owner_pod_uid) != 0)
			wl->reserved_for_others = true;
	}
}

/* A whole number from 0 to 100000 at key of obj, or dflt when absent. */
static int64_t count_at(struct fx *x, const json_t *obj, const char *key,
			const char *path, int64_t dflt)
{
	const json_t *v = obj ? jget(obj, key) : NULL;
	char full[128];

	if (!v || json_is_null(v))
		return dflt;
	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    json_integer_value(v) > 100000) {
		bad(x, sub(full, sizeof(full), path, key, -1),
		    "is not a whole number from 0 to 100000");
		return dflt;
	}
	return json_integer_value(v);
}

/*
 * Where the pod template of a kind that owns one (a Job, a controller)
 * sits, as its row's pod_template says (kinds.h): the object that holds it,
 * walked down from object ("spec", or a CronJob's "spec.jobTemplate.spec"),
 * with its path for messages in path, and the member that is the template
 * in *last ("template").
 */
static const json_t *template_holder(struct fx *x, const json_t *object,
				     const struct kind_def *k, char *path, size_t size,
				     const char **last)
{
	const char *const *m = k->pod_template;
	const json_t *v = object;
	size_t n = 0;

	path[0] = '\0';
	for (; m[0] && m[1]; m++) {
		v = member(x, v, m[0], JSON_OBJECT, path);
		if (n && n + 1 < size)
			path[n++] = '.';
		for (const char *c = m[0]; *c && n + 1 < size; c++)
			path[n++] = *c;
		path[n] = '\0';
	}
	*last = m[0];
	return v;
}

/* A Deployment, StatefulSet, ReplicaSet, DaemonSet or CronJob: its pod
 * template's facts, and how many pods it runs at once. */
static void template_facts(struct fx *x, const json_t *object, const json_t *meta,
			   struct workload *wl)
{
	const struct kind_def *k = wl->def;
	const json_t *holder, *tmpl, *refs, *r;
	char hpath[64], path[80];
	const char *last;
	size_t i;

	holder = template_holder(x, object, k, hpath, sizeof(hpath), &last);
	if (k->pods == KIND_PODS_JOB) {
		/* The pods one of its Jobs runs at once, as charge_job_slots()
		 * counts them: min(parallelism, completions). */
		int64_t par = count_at(x, holder, "parallelism", hpath, 1);
		int64_t done = count_at(x, holder, "completions", hpath, par);

		tmpl = member(x, holder, last, JSON_OBJECT, hpath);
		wl->replicas = done < par ? done : par;
	} else {
		tmpl = member(x, holder, last, JSON_OBJECT, hpath);
		/* One pod per matching node (KIND_PODS_PER_NODE): 0. */
		wl->replicas = k->pods == KIND_PODS_REPLICAS
				       ? count_at(x, holder, "replicas", hpath, 1)
				       : 0;
	}
	snprintf(path, sizeof(path), "%s.%s", hpath, last);
	{
		char mpath[96], spath[96];

		snprintf(mpath, sizeof(mpath), "%s.metadata", path);
		snprintf(spath, sizeof(spath), "%s.spec", path);
		pod_facts(x, member(x, tmpl, "metadata", JSON_OBJECT, path),
			  member(x, tmpl, "spec", JSON_OBJECT, path), mpath, spath,
			  &wl->pod);
	}
	/* A ReplicaSet a Deployment controls: its template is the
	 * Deployment's, judged there. */
	if (!k->template_owner)
		return;
	refs = member(x, meta, "ownerReferences", JSON_ARRAY, "metadata");
	json_array_foreach(refs, i, r) {
		const struct kind_def *owner =
			kinds_by_api(json_string_value(jget(r, "apiVersion")),
				     json_string_value(jget(r, "kind")));

		if (json_is_true(jget(r, "controller")) && owner &&
		    owner == k->template_owner)
			wl->template_owned = true;
	}
}

/* spec.scheduling (workload-aware scheduling, policy/gang.h): read
 * leniently; the apiserver validated it (a minCount that is not a
 * positive number reads as absent). */
static void job_scheduling(const json_t *spec, struct workload *wl)
{
	const json_t *sch = jget(spec, "scheduling");
	const json_t *gang, *min;

	if (!sch || json_is_null(sch))
		return;
	wl->has_scheduling = true;
	gang = jget(jget(sch, "schedulingPolicy"), "gang");
	if (!gang || json_is_null(gang))
		return;
	wl->scheduling_gang = true;
	min = jget(gang, "minCount");
	if (json_is_integer(min) && json_integer_value(min) > 0)
		wl->gang_min_count = json_integer_value(min);
}

static void job_facts(struct fx *x, const json_t *spec, const json_t *status,
		      struct workload *wl)
{
	const json_t *par, *pfp, *rules, *conds;
	size_t i;
	json_t *item;

	wl->parallelism = 1;
	par = spec ? jget(spec, "parallelism") : NULL;
	if (par && !json_is_null(par)) {
		if (!json_is_integer(par) || json_integer_value(par) < 0 ||
		    json_integer_value(par) > 100000)
			bad(x, "spec.parallelism", "is not a whole number from 0 to 100000");
		else
			wl->parallelism = json_integer_value(par);
	}
	par = spec ? jget(spec, "completions") : NULL;
	if (par && !json_is_null(par)) {
		if (!json_is_integer(par) || json_integer_value(par) < 0)
			bad(x, "spec.completions", "is not a whole number");
		else {
			wl->has_completions = true;
			wl->completions = json_integer_value(par);
		}
	}
	wl->job_suspended = spec && json_is_true(jget(spec, "suspend"));
	job_scheduling(spec, wl);
	pfp = member(x, spec, "podFailurePolicy", JSON_OBJECT, "spec");
	rules = member(x, pfp, "rules", JSON_ARRAY, "spec.podFailurePolicy");
	if (rules) {
		wl->n_failure_rules = json_array_size(rules);
		json_array_foreach(rules, i, item) {
			const json_t *onc = jget(item, "onPodConditions");
			const char *action = json_string_value(jget(item, "action"));
			size_t k;
			json_t *pc;

			if (!action || strcmp(action, "Ignore") != 0 || !json_is_array(onc))
				continue;
			json_array_foreach(onc, k, pc) {
				const char *type = json_string_value(jget(pc, "type"));

				if (type && strcmp(type, "DisruptionTarget") == 0)
					wl->has_disruption_rule = true;
			}
		}
	}
	conds = member(x, status, "conditions", JSON_ARRAY, "status");
	if (conds) {
		json_array_foreach(conds, i, item) {
			const char *type = json_string_value(jget(item, "type"));
			const char *st = json_string_value(jget(item, "status"));

			if (type && st && strcmp(st, "True") == 0 &&
			    (strcmp(type, "Complete") == 0 || strcmp(type, "Failed") == 0))
				wl->job_finished = true;
		}
	}
}

static void claim_facts(struct fx *x, const json_t *spec, const char *path,
			struct workload *wl);

int facts_extract(const json_t *object, struct workload *wl, struct arena *a,
		  struct diag *d)
{
	struct fx x = {.a = a, .d = d};
	const json_t *meta, *spec, *status;

	if (!json_is_object(object)) {
		diag_addf(d, "object is not a JSON object");
		return -1;
	}
	meta = member(&x, object, "metadata", JSON_OBJECT, "");
	spec = member(&x, object, "spec", JSON_OBJECT, "");
	status = member(&x, object, "status", JSON_OBJECT, "");
	if (meta) {
		const char *name = string(&x, meta, "name", "metadata");
		const char *uid = string(&x, meta, "uid", "metadata");

		if (name)
			wl->name = name;
		const json_t *gen = jget(meta, "generation");

		if (uid)
			wl->uid = uid;
		if (gen && json_is_integer(gen))
			wl->generation = json_integer_value(gen);
		if (!wl->namespace || !wl->namespace[0]) {
			const char *ns = string(&x, meta, "namespace", "metadata");

			if (ns)
				wl->namespace = ns;
		}
	}
	wl->labels = string_map(&x, meta, "labels", "metadata", &wl->n_labels);
	wl->annotations = string_map(&x, meta, "annotations", "metadata",
				     &wl->n_annotations);
	if (wl->kind == WL_POD) {
		pod_facts(&x, meta, spec, "metadata", "spec", &wl->pod);
		wl->phase = string(&x, status, "phase", "status");
		owner_job(&x, meta, wl);
		pod_claim_status(status, wl);
	} else if (wl->kind == WL_JOB) {
		char hpath[64], path[80], mpath[96], spath[96];
		const char *last;
		const json_t *holder = template_holder(&x, object, wl->def, hpath,
						       sizeof(hpath), &last);
		const json_t *tmpl = member(&x, holder, last, JSON_OBJECT, hpath);
		const json_t *tmeta, *tspec;

		snprintf(path, sizeof(path), "%s.%s", hpath, last);
		snprintf(mpath, sizeof(mpath), "%s.metadata", path);
		snprintf(spath, sizeof(spath), "%s.spec", path);
		tmeta = member(&x, tmpl, "metadata", JSON_OBJECT, path);
		tspec = member(&x, tmpl, "spec", JSON_OBJECT, path);
		pod_facts(&x, tmeta, tspec, mpath, spath, &wl->pod);
		job_facts(&x, spec, status, wl);
	} else if (wl->kind == WL_CLAIM) {
		claim_facts(&x, spec, "spec", wl);
		claim_owner(meta, status, wl);
	} else if (wl->kind == WL_CLAIM_TEMPLATE) {
		claim_facts(&x, member(&x, spec, "spec", JSON_OBJECT, "spec"),
			    "spec.spec", wl);
	} else if (wl->kind == WL_TEMPLATE) {
		/* The object's own kind says which; else the caller's. */
		const struct kind_def *own = kinds_template(json_string_value(jget(object, "kind")));

		if (own)
			wl->def = own;
		template_facts(&x, object, meta, wl);
	}
	return x.failed ? -1 : 0;
}

/* ---- DRA: ResourceClaim and ResourceClaimTemplate (resource.k8s.io/v1) -- */

/* deviceClassName, allocationMode, count and capacity.requests of an
 * exactly part or of a firstAvailable entry, with the API's defaults
 * (ExactCount, 1). */
static void device_fields(struct fx *x, const json_t *obj, const char *path,
			  struct wl_device_request *out)
{
	const char *mode = string(x, obj, "allocationMode", path);
	const json_t *count = jget(obj, "count");
	const json_t *capacity = member(x, obj, "capacity", JSON_OBJECT, path);
	char full[256];

	out->device_class = string(x, obj, "deviceClassName", path);
	if (capacity)
		out->capacity = string_map(x, capacity, "requests",
					   sub(full, sizeof(full), path, "capacity", -1),
					   &out->n_capacity);
	out->mode = WL_ALLOCATE_COUNT;
	out->count = 1;
	if (mode && strcmp(mode, "All") == 0)
		out->mode = WL_ALLOCATE_ALL;
	else if (mode && strcmp(mode, "ExactCount") != 0)
		bad(x, sub(full, sizeof(full), path, "allocationMode", -1),
		    "is not ExactCount or All");
	if (count && !json_is_null(count)) {
		if (!json_is_integer(count) || json_integer_value(count) < 1)
			bad(x, sub(full, sizeof(full), path, "count", -1),
			    "is not a whole number of at least 1");
		else
			out->count = json_integer_value(count);
	}
}

static void device_request(struct fx *x, const json_t *req, const char *path,
			   struct wl_device_request *out)
{
	const json_t *exactly, *first;
	char ep[192];

	if (!json_is_object(req)) {
		bad(x, path, "is not an object");
		return;
	}
	out->name = string(x, req, "name", path);
	out->mode = WL_ALLOCATE_COUNT;
	out->count = 1;
	exactly = member(x, req, "exactly", JSON_OBJECT, path);
	if (exactly)
		device_fields(x, exactly, sub(ep, sizeof(ep), path, "exactly", -1),
			      out);
	first = member(x, req, "firstAvailable", JSON_ARRAY, path);
	if (first) {
		struct wl_device_request *subs =
			alloc(x, json_array_size(first), sizeof(*subs));
		size_t i;
		json_t *item;

		if (!subs)
			return;
		json_array_foreach(first, i, item) {
			sub(ep, sizeof(ep), path, "firstAvailable", (long)i);
			if (!json_is_object(item)) {
				bad(x, ep, "is not an object");
				return;
			}
			subs[i].name = string(x, item, "name", ep);
			device_fields(x, item, ep, &subs[i]);
		}
		out->first_available = subs;
		out->n_first_available = json_array_size(first);
	}
}

/* spec (a claim's spec, or a template's spec.spec): devices.requests. */
static void claim_facts(struct fx *x, const json_t *spec, const char *path,
			struct workload *wl)
{
	char dp[64], rp[96];
	const json_t *devices = member(x, spec, "devices", JSON_OBJECT, path);
	const json_t *reqs = member(x, devices, "requests", JSON_ARRAY,
				    sub(dp, sizeof(dp), path, "devices", -1));
	struct wl_device_request *out;
	size_t i;
	json_t *item;

	if (!reqs)
		return;
	out = alloc(x, json_array_size(reqs), sizeof(*out));
	if (!out)
		return;
	json_array_foreach(reqs, i, item) {
		device_request(x, item, sub(rp, sizeof(rp), dp, "requests", (long)i),
			       &out[i]);
		if (x->failed)
			return;
	}
	wl->device_requests = out;
	wl->n_device_requests = json_array_size(reqs);
}
