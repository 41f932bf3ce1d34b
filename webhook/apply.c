#include "webhook/apply.h"

#include "base/diag.h"
#include "base/text.h"
#include "codec/jget.h"
#include "codec/jsonmem.h"
#include "codec/jsonout.h"
#include "policy/dra-template.h"
#include "policy/kinds.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define DEFAULT_GRACE_SECONDS 30

struct ap {
	struct diag *d;
	bool failed;
};

static void oom(struct ap *a)
{
	if (!a->failed)
		diag_addf(a->d, "out of memory while mutating the object");
	a->failed = true;
}

/*
 * The object member `key` of parent, created empty when absent.  These
 * helpers are inlined so that a literal key's length is known where it is
 * looked up (jget()).
 */
static inline __attribute__((always_inline)) json_t *
ensure_object(struct ap *a, json_t *parent, const char *key)
{
	json_t *v;

	if (!parent)
		return NULL;
	v = jget(parent, key);
	if (json_is_object(v))
		return v;
	if (v && !json_is_null(v)) {
		if (!a->failed)
			diag_addf(a->d, "%s is not an object", key);
		a->failed = true;
		return NULL;
	}
	v = json_object();
	if (!v || json_object_set_new(parent, key, v) < 0) {
		oom(a);
		return NULL;
	}
	return v;
}

static inline __attribute__((always_inline)) json_t *
ensure_array(struct ap *a, json_t *parent, const char *key)
{
	json_t *v;

	if (!parent)
		return NULL;
	v = jget(parent, key);
	if (json_is_array(v))
		return v;
	if (v && !json_is_null(v)) {
		if (!a->failed)
			diag_addf(a->d, "%s is not a list", key);
		a->failed = true;
		return NULL;
	}
	v = json_array();
	if (!v || json_object_set_new(parent, key, v) < 0) {
		oom(a);
		return NULL;
	}
	return v;
}

static inline __attribute__((always_inline)) void
set_string(struct ap *a, json_t *obj, const char *key, const char *value)
{
	const char *have;

	if (!obj)
		return;
	have = json_string_value(jget(obj, key));
	if (have && strcmp(have, value) == 0)
		return;
	if (json_object_set_new(obj, key, json_string(value)) < 0)
		oom(a);
}

static void append(struct ap *a, json_t *arr, json_t *item)
{
	if (!arr || !item || json_array_append_new(arr, item) < 0) {
		json_decref(item);
		oom(a);
	}
}

/* Removes key from the map `map` of meta, when both exist. */
static void remove_key(json_t *meta, const char *map, const char *key)
{
	json_t *m = jget(meta, map);

	if (!json_is_object(m))
		return;
	json_object_del(m, key);
}

static const char *const stamp_labels[] = {STAMP_TENANT, STAMP_FLAVOR,
					   STAMP_PREEMPTIBLE, STAMP_GANG};
static const char *const stamp_annotations[] = {STAMP_DECISION, STAMP_BORROWED};

static void strip_stamps(json_t *meta)
{
	for (size_t i = 0; i < sizeof(stamp_labels) / sizeof(stamp_labels[0]); i++)
		remove_key(meta, "labels", stamp_labels[i]);
	for (size_t i = 0; i < sizeof(stamp_annotations) / sizeof(stamp_annotations[0]);
	     i++)
		remove_key(meta, "annotations", stamp_annotations[i]);
}

/*
 * The stamps on meta; template_labels: the class and GPU labels too (a
 * pod template whose owner carries them); decision: the decision
 * annotation (never on a Deployment's or StatefulSet's template, whose
 * every change rolls its pods).
 */
static void stamp(struct ap *a, json_t *meta, const struct plan *pl,
		  bool template_labels, bool decision)
{
	json_t *labels = ensure_object(a, meta, "labels");
	json_t *ann;
	char num[TEXT_DECIMAL_MAX + 1];

	set_string(a, labels, STAMP_TENANT, pl->tenant);
	set_string(a, labels, STAMP_FLAVOR, pl->flavor->name);
	if (pl->gang[0])
		set_string(a, labels, STAMP_GANG, pl->gang);
	else if (pl->remove_gang)
		json_object_del(labels, STAMP_GANG);
	if (pl->preemptible)
		set_string(a, labels, STAMP_PREEMPTIBLE, "true");
	else
		json_object_del(labels, STAMP_PREEMPTIBLE);
	if (template_labels && pl->class_label)
		set_string(a, labels, pl->class_label, pl->class_name);
	if (template_labels && pl->gpus_label)
		set_string(a, labels, pl->gpus_label, pl->gpus_value);
	/* A Job's pod keeps the record its template gave it. */
	if (pl->keep_decision || !decision)
		return;
	ann = ensure_object(a, meta, "annotations");
	set_string(a, ann, STAMP_DECISION, pl->decision);
	if (pl->borrowed > 0) {
		set_string(a, ann, STAMP_BORROWED, text_int(num, pl->borrowed));
	} else if (ann) {
		json_object_del(ann, STAMP_BORROWED);
	}
}

static bool requests_resource(const json_t *ct, const char *res)
{
	const json_t *r = jget(ct, "resources");

	return jget(jget(r, "requests"), res) ||
	       jget(jget(r, "limits"), res);
}

static void map_resources(struct ap *a, json_t *ct, const struct plan *pl)
{
	json_t *res = ensure_object(a, ct, "resources");
	json_t *limits = ensure_object(a, res, "limits");
	json_t *requests = jget(res, "requests");
	char count[TEXT_DECIMAL_MAX];
	const char *n = text_decimal(count, pl->count);

	if (pl->resource) {
		set_string(a, limits, pl->resource, n);
		/* An extended resource's request must equal its limit. */
		if (json_is_object(requests) && jget(requests, pl->resource))
			set_string(a, requests, pl->resource, n);
	} else if (json_object_size(limits) == 0) {
		/* A DRA class: no extended resource, and no empty limits. */
		json_object_del(res, "limits");
	}
	/* cpu and memory: only where the container asks for none (a limit
	 * alone is a request too: Kubernetes copies it). */
	if (pl->cpu && !requests_resource(ct, "cpu"))
		set_string(a, ensure_object(a, res, "requests"), "cpu", pl->cpu);
	if (pl->memory && !requests_resource(ct, "memory"))
		set_string(a, ensure_object(a, res, "requests"), "memory", pl->memory);
}

static inline __attribute__((always_inline)) const char *
str_or(const json_t *o, const char *key, const char *dflt)
{
	const char *s = json_string_value(jget(o, key));

	return s ? s : dflt;
}

/* Two tolerations are the same when every field is (absent == empty). */
static bool same_toleration(const json_t *t, const struct policy_toleration *pt)
{
	const json_t *secs = jget(t, "tolerationSeconds");

	if (strcmp(str_or(t, "key", ""), pt->key) != 0 ||
	    strcmp(str_or(t, "operator", "Equal"), pt->op) != 0 ||
	    strcmp(str_or(t, "value", ""), pt->value) != 0 ||
	    strcmp(str_or(t, "effect", ""), pt->effect) != 0)
		return false;
	if (!pt->has_seconds)
		return !secs || json_is_null(secs);
	return json_is_integer(secs) && json_integer_value(secs) == pt->seconds;
}

static void map_tolerations(struct ap *a, json_t *spec,
			    const struct policy_flavor *f)
{
	json_t *tols;

	if (!f->n_tolerations)
		return;
	tols = ensure_array(a, spec, "tolerations");
	for (size_t i = 0; tols && i < f->n_tolerations; i++) {
		const struct policy_toleration *pt = &f->tolerations[i];
		bool found = false;
		size_t k;
		json_t *t, *nt;

		json_array_foreach(tols, k, t)
			if (json_is_object(t) && same_toleration(t, pt))
				found = true;
		if (found)
			continue;
		nt = json_object();
		if (!nt) {
			oom(a);
			return;
		}
		if (pt->key[0])
			set_string(a, nt, "key", pt->key);
		set_string(a, nt, "operator", pt->op);
		if (pt->value[0])
			set_string(a, nt, "value", pt->value);
		if (pt->effect[0])
			set_string(a, nt, "effect", pt->effect);
		if (pt->has_seconds &&
		    json_object_set_new(nt, "tolerationSeconds",
					json_integer(pt->seconds)) < 0)
			oom(a);
		append(a, tols, nt);
	}
}

/*
 * An object of the given members, in order: obj("k1", v1, "k2", v2, NULL).
 * Takes every value (NULL ones too, from a failed allocation) and returns
 * NULL when anything failed.  json_pack would parse its format on every
 * request.
 */
static json_t *obj(const char *key, json_t *value, ...)
{
	json_t *o = json_object();
	bool ok = o != NULL;
	va_list ap;

	va_start(ap, value);
	while (key) {
		if (ok)
			ok = json_object_set_new_nocheck(o, key, value) == 0;
		else
			json_decref(value);
		key = va_arg(ap, const char *);
		if (key)
			value = va_arg(ap, json_t *);
	}
	va_end(ap);
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* [item], taking item. */
static json_t *list_of(json_t *item)
{
	json_t *l = json_array();

	if (json_array_append_new(l, item) < 0) { /* takes item, even so */
		json_decref(l);
		return NULL;
	}
	return l;
}

/*
 * A class of a DRA flavor: the pod's spec.resourceClaims entry
 * DRA_TEMPLATE_ENTRY names the class's template (replaced when it names
 * another: decide_dra_class_mutate() said it may be), and the GPU
 * container uses it.
 */
static void map_claim(struct ap *a, json_t *spec, json_t *ct, const struct plan *pl)
{
	json_t *entries = jget(spec, "resourceClaims"), *uses, *item;
	size_t i, at = SIZE_MAX;

	if (!json_is_array(entries)) {
		entries = json_array();
		if (!entries || json_object_set_new(spec, "resourceClaims", entries) < 0) {
			oom(a);
			return;
		}
	}
	json_array_foreach(entries, i, item)
		if (json_is_object(item) &&
		    strcmp(str_or(item, "name", ""), DRA_TEMPLATE_ENTRY) == 0)
			at = i;
	if (at != SIZE_MAX &&
	    strcmp(str_or(json_array_get(entries, at), "resourceClaimTemplateName", ""),
		   pl->dra_template) != 0) {
		/* Replaced, never edited: the entry may be shared with the
		 * request's object (apply_copy()). */
		json_array_remove(entries, at);
		at = SIZE_MAX;
	}
	if (at == SIZE_MAX)
		append(a, entries, obj("name", json_string(DRA_TEMPLATE_ENTRY),
				       "resourceClaimTemplateName",
				       json_string(pl->dra_template), NULL));
	uses = jget(ensure_object(a, ct, "resources"), "claims");
	if (!json_is_array(uses)) {
		uses = json_array();
		if (!uses || json_object_set_new(jget(ct, "resources"), "claims", uses) < 0) {
			oom(a);
			return;
		}
	}
	json_array_foreach(uses, i, item)
		if (strcmp(str_or(item, "name", ""), DRA_TEMPLATE_ENTRY) == 0)
			return;
	append(a, uses, obj("name", json_string(DRA_TEMPLATE_ENTRY), NULL));
}

static json_t *affinity_term(const struct plan *pl)
{
	return obj("labelSelector",
		   obj("matchLabels", obj(STAMP_GANG, json_string(pl->gang), NULL),
		       NULL),
		   "topologyKey", json_string(pl->topology_key), NULL);
}

static void map_topology(struct ap *a, json_t *spec, const struct plan *pl)
{
	json_t *pa = ensure_object(a, ensure_object(a, spec, "affinity"),
				   "podAffinity");
	json_t *term = affinity_term(pl), *item, *list;
	size_t i;

	if (!term) {
		oom(a);
		return;
	}
	if (pl->topology == POLICY_TOPOLOGY_REQUIRED) {
		list = ensure_array(a, pa, "requiredDuringSchedulingIgnoredDuringExecution");
		json_array_foreach(list, i, item)
			if (json_equal(item, term)) {
				json_decref(term);
				return;
			}
		append(a, list, term);
		return;
	}
	list = ensure_array(a, pa, "preferredDuringSchedulingIgnoredDuringExecution");
	json_array_foreach(list, i, item)
		if (json_equal(jget(item, "podAffinityTerm"), term)) {
			json_decref(term);
			return;
		}
	append(a, list, obj("weight", json_integer(100), "podAffinityTerm", term, NULL));
}

/*
 * One pass over arr: found[k] becomes true when an item's member `key` is
 * want[k].  A pod's env, mounts and volumes are each read once however many
 * entries gpugate may add to them.
 */
static void mark_named(const json_t *arr, const char *key,
		       const char *const *want, bool *found, size_t n)
{
	size_t i;
	json_t *item;

	json_array_foreach(arr, i, item) {
		const char *s = json_string_value(jget(item, key));

		for (size_t k = 0; s && k < n; k++)
			if (!found[k] && strcmp(s, want[k]) == 0)
				found[k] = true;
	}
}

/*
 * The checkpoint signal's three values never change: they are built once
 * and shared (jansson counts references atomically), and their JSON text is
 * written once (jsonout_freeze()).  apply_plan() never edits an appended
 * value, so every object can hold them.
 */
static struct {
	json_t *env, *mount, *volume;
} signal_json;
static pthread_once_t signal_once = PTHREAD_ONCE_INIT;

static void signal_build(void)
{
	/* Built inside the first request that needs them: not from its
	 * arena (codec/jsonmem.h), which the request drops. */
	bool was_on = jsonmem_pause();

	signal_json.env = obj("name", json_string(SIGNAL_ENV), "value",
			      json_string(SIGNAL_FILE), NULL);
	signal_json.mount = obj("name", json_string(SIGNAL_VOLUME), "mountPath",
				json_string(SIGNAL_MOUNT_PATH), "readOnly",
				json_true(), NULL);
	/* The file is empty until the annotation exists; kubelet rewrites it
	 * when the annotation changes. */
	signal_json.volume =
		obj("name", json_string(SIGNAL_VOLUME), "downwardAPI",
		    obj("items",
			list_of(obj("path", json_string(SIGNAL_ITEM), "fieldRef",
				    obj("fieldPath", json_string(SIGNAL_FIELD_PATH),
					NULL),
				    NULL)),
			NULL),
		    NULL);
	/* Their text too: the patch copies it (codec/jsonout.h). */
	jsonout_freeze(signal_json.env);
	jsonout_freeze(signal_json.mount);
	jsonout_freeze(signal_json.volume);
	jsonmem_resume(was_on);
}

/* Appends a shared value (a new reference; NULL when building it failed). */
static void append_shared(struct ap *a, json_t *arr, json_t *shared)
{
	append(a, arr, json_incref(shared));
}

/* Env entries the checkpoint plan adds to every app container, in order. */
#define CK_ENV_MAX 32

static void checkpoint_env(struct ap *a, json_t *ct, const struct plan *pl,
			   const struct policy_checkpoint *ck)
{
	const char *want[CK_ENV_MAX + 2];
	bool found[CK_ENV_MAX + 2] = {false};
	size_t n = 0, pre, sig = SIZE_MAX;
	json_t *env = ensure_array(a, ct, "env");

	if (!env)
		return;
	/* Past CK_ENV_MAX policy variables (validate.c allows any number),
	 * the rest are looked up one by one. */
	for (size_t e = 0; e < ck->n_env && n < CK_ENV_MAX; e++)
		want[n++] = ck->env[e].key;
	pre = n;
	want[n++] = "GPUGATE_PREEMPTIBLE";
	if (pl->signal) {
		sig = n;
		want[n++] = SIGNAL_ENV;
	}
	mark_named(env, "name", want, found, n);
	for (size_t e = 0; e < ck->n_env; e++) {
		const char *key = ck->env[e].key;

		bool have = false;

		if (e < pre)
			have = found[e];
		else
			mark_named(env, "name", &key, &have, 1);
		if (have)
			continue;
		append(a, env, obj("name", json_string(key), "value",
				   json_string(ck->env[e].value), NULL));
	}
	if (!found[pre])
		append(a, env, obj("name", json_string("GPUGATE_PREEMPTIBLE"),
				   "value", json_string("1"), NULL));
	if (sig != SIZE_MAX && !found[sig])
		append_shared(a, env, signal_json.env);
}

static void checkpoint(struct ap *a, json_t *spec, json_t *gpu_ct,
		       const struct plan *pl, const struct policy *p)
{
	const struct policy_checkpoint *ck = policy_checkpoint(p);
	json_t *containers = jget(spec, "containers");
	json_t *vols = ensure_array(a, spec, "volumes");
	const char *vol_names[2] = {CHECKPOINT_VOLUME, SIGNAL_VOLUME};
	bool vol_found[2] = {false, false};
	json_t *grace, *ct;
	size_t i;

	if (pl->signal)
		pthread_once(&signal_once, signal_build);
	json_array_foreach(containers, i, ct) {
		/* A mount already at the path (the user's own volume) wins;
		 * the same for the signal (decide.c warns). */
		const char *names[2] = {CHECKPOINT_VOLUME, SIGNAL_VOLUME};
		const char *paths[2] = {ck->mount_path, SIGNAL_MOUNT_PATH};
		bool name_found[2] = {false, false}, path_found[2] = {false, false};
		json_t *mounts;

		if (!json_is_object(ct))
			continue;
		checkpoint_env(a, ct, pl, ck);
		mounts = ensure_array(a, ct, "volumeMounts");
		if (!mounts)
			continue;
		mark_named(mounts, "name", names, name_found, 2);
		mark_named(mounts, "mountPath", paths, path_found, 2);
		if (!pl->no_volume && !name_found[0] && !path_found[0]) {
			append(a, mounts,
			       obj("name", json_string(CHECKPOINT_VOLUME),
				   "mountPath", json_string(ck->mount_path), NULL));
			path_found[1] = path_found[1] ||
					strcmp(ck->mount_path, SIGNAL_MOUNT_PATH) == 0;
		}
		if (pl->signal && !name_found[1] && !path_found[1])
			append_shared(a, mounts, signal_json.mount);
	}
	if (vols)
		mark_named(vols, "name", vol_names, vol_found, 2);
	if (vols && !vol_found[0] && !pl->no_volume) {
		if (pl->claim_name[0])
			append(a, vols,
			       obj("name", json_string(CHECKPOINT_VOLUME),
				   "persistentVolumeClaim",
				   obj("claimName", json_string(pl->claim_name), NULL),
				   NULL));
		else
			append(a, vols,
			       obj("name", json_string(CHECKPOINT_VOLUME),
				   "emptyDir", json_object(), NULL));
	}
	if (pl->signal && vols && !vol_found[1])
		append_shared(a, vols, signal_json.volume);
	if (pl->set_pre_stop && gpu_ct) {
		json_t *lc = ensure_object(a, gpu_ct, "lifecycle");
		json_t *cmd = json_array();

		for (size_t k = 0; cmd && k < ck->n_pre_stop; k++)
			if (json_array_append_new(cmd, json_string(ck->pre_stop[k])) < 0)
				oom(a);
		if (!cmd || !lc ||
		    json_object_set_new(lc, "preStop",
					obj("exec", obj("command", cmd, NULL), NULL)) < 0)
			oom(a);
	}
	/* Exactly the policy's: at least, time to checkpoint; at most, so
	 * that a reclaim is not held for a grace the tenant chose (#26). */
	grace = jget(spec, "terminationGracePeriodSeconds");
	if ((json_is_integer(grace) ? json_integer_value(grace)
				    : DEFAULT_GRACE_SECONDS) != pl->grace &&
	    json_object_set_new(spec, "terminationGracePeriodSeconds",
				json_integer(pl->grace)) < 0)
		oom(a);
}

/* A borrower without the hooks: its grace is its own, but never longer
 * than the policy's (#26: a reclaim is not held for the hour it chose). */
static void cap_grace(struct ap *a, json_t *spec, int64_t cap)
{
	json_t *grace = jget(spec, "terminationGracePeriodSeconds");

	if ((json_is_integer(grace) ? json_integer_value(grace) : DEFAULT_GRACE_SECONDS) > cap &&
	    json_object_set_new(spec, "terminationGracePeriodSeconds", json_integer(cap)) < 0)
		oom(a);
}

static void failure_rule(struct ap *a, json_t *job_spec)
{
	json_t *rules = ensure_array(a, ensure_object(a, job_spec, "podFailurePolicy"),
				     "rules");
	const char *repl = json_string_value(jget(job_spec,
							     "podReplacementPolicy"));

	/* A Job with a podFailurePolicy must replace pods only once they
	 * failed (the apiserver defaults TerminatingOrFailed, then refuses
	 * it); for GPUs that is also the right thing: a replacement never
	 * waits for the GPUs its terminating predecessor still holds. */
	if (repl && strcmp(repl, "Failed") != 0)
		set_string(a, job_spec, "podReplacementPolicy", "Failed");

	append(a, rules,
	       obj("action", json_string("Ignore"), "onPodConditions",
		   list_of(obj("type", json_string("DisruptionTarget"),
				      "status", json_string("True"), NULL)),
		   NULL));
}

/*
 * Gang start (policy/gang.h): the route stamp on the Job and its
 * template, and what the route writes, each only where absent (the
 * decision already left alone a Job someone else starts); a Job's pod on
 * route gates gets the gate its template gave it.
 */
static void map_gang(struct ap *a, json_t *object, json_t *meta, json_t *pod_meta,
		     json_t *spec, const struct plan *pl)
{
	const char *route = gang_route_name(pl->gang_route);
	json_t *job_spec = jget(object, "spec"), *gates, *item;
	size_t i;

	if (pl->gang_gate || pl->gang_route == GANG_GATES) {
		gates = ensure_array(a, spec, "schedulingGates");
		json_array_foreach(gates, i, item)
			if (json_is_string(jget(item, "name")) &&
			    strcmp(json_string_value(jget(item, "name")), GANG_GATE) == 0)
				break;
		if (gates && i == json_array_size(gates))
			append(a, gates, obj("name", json_string(GANG_GATE), NULL));
	}
	if (pl->gang_route == GANG_NONE)
		return;
	set_string(a, ensure_object(a, meta, "annotations"), STAMP_GANG_ROUTE, route);
	set_string(a, ensure_object(a, pod_meta, "annotations"), STAMP_GANG_ROUTE, route);
	if (pl->gang_route == GANG_PODGROUP &&
	    !jget(jget(spec, "schedulingGroup"), "podGroupName"))
		set_string(a, ensure_object(a, spec, "schedulingGroup"), "podGroupName",
			   pl->gang);
	if (pl->gang_route == GANG_WORKLOAD && json_is_object(job_spec) &&
	    !jget(job_spec, "scheduling")) {
		json_t *sch = obj("schedulingPolicy",
				  obj("gang", obj("minCount", json_integer(pl->gang_pods),
						  NULL),
				      NULL),
				  NULL);

		if (sch && pl->gang_topology && pl->topology_key &&
		    json_object_set_new(sch, "schedulingConstraints",
					obj("topology",
					    list_of(obj("key", json_string(pl->topology_key),
							NULL)),
					    NULL)) < 0)
			oom(a);
		if (!sch || json_object_set_new(job_spec, "scheduling", sch) < 0)
			oom(a);
	}
}

int apply_plan(json_t *object, const struct workload *wl,
	       const struct plan *pl, const struct policy *p, struct diag *d)
{
	struct ap a = {.d = d};
	const struct kind_def *k = wl->def;
	json_t *meta, *pod_meta, *spec, *tmpl = object, *gpu_ct = NULL;
	bool owner;

	if (!pl->active)
		return 0;
	meta = ensure_object(&a, object, "metadata");
	/* The pod template where the kind's row says it sits (a Pod is its
	 * own); a Job or a controller owns it. */
	for (const char *const *m = k ? k->pod_template : NULL; m && *m; m++)
		tmpl = ensure_object(&a, tmpl, *m);
	owner = tmpl != object;
	pod_meta = owner ? ensure_object(&a, tmpl, "metadata") : meta;
	spec = ensure_object(&a, tmpl, "spec");
	if (a.failed)
		return -1;
	if (pl->strip_stamps) {
		strip_stamps(pod_meta);
		if (owner)
			strip_stamps(meta);
	}
	if (pl->note[0])
		set_string(&a, ensure_object(&a, pod_meta, "annotations"),
			   STAMP_DECISION, pl->note);
	if (pl->queue_name && !jget(jget(meta, "labels"), KUEUE_QUEUE_LABEL))
		set_string(&a, ensure_object(&a, meta, "labels"), KUEUE_QUEUE_LABEL,
			   pl->queue_name);
	if (pl->map || pl->stamp_only) {
		stamp(&a, pod_meta, pl, owner, wl->kind != WL_TEMPLATE);
		if (owner)
			stamp(&a, meta, pl, false, true);
	}
	if (!pl->map)
		return a.failed ? -1 : 0;

	gpu_ct = json_array_get(jget(spec, "containers"), pl->gpu_container);
	if (!json_is_object(gpu_ct)) {
		diag_addf(d, "container %zu is missing", pl->gpu_container);
		return -1;
	}
	map_resources(&a, gpu_ct, pl);
	if (pl->dra_template[0])
		map_claim(&a, spec, gpu_ct, pl);
	for (size_t i = 0; i < pl->flavor->n_node_selector; i++)
		set_string(&a, ensure_object(&a, spec, "nodeSelector"),
			   pl->flavor->node_selector[i].key,
			   pl->flavor->node_selector[i].value);
	map_tolerations(&a, spec, pl->flavor);
	if (pl->priority_class) {
		set_string(&a, spec, "priorityClassName", pl->priority_class);
		/* The apiserver resolved spec.priority from the pod as it came
		 * in; it recomputes both from the new class name when its
		 * admission chain is re-invoked after our change, and refuses a
		 * value that disagrees with the class. */
		if (wl->kind == WL_POD) {
			json_object_del(spec, "priority");
			json_object_del(spec, "preemptionPolicy");
		}
	}
	if (pl->topology != POLICY_TOPOLOGY_NONE)
		map_topology(&a, spec, pl);
	if (pl->gang_route != GANG_NONE || pl->gang_gate)
		map_gang(&a, object, meta, pod_meta, spec, pl);
	if (pl->checkpoint)
		checkpoint(&a, spec, gpu_ct, pl, p);
	else if (pl->cap_grace)
		cap_grace(&a, spec, pl->grace_cap);
	if (pl->replace_when_failed && wl->kind == WL_JOB &&
	    json_is_object(jget(object, "spec")) &&
	    !jget(jget(object, "spec"), "podReplacementPolicy"))
		set_string(&a, jget(object, "spec"), "podReplacementPolicy", "Failed");
	if (pl->add_failure_rule)
		failure_rule(&a, jget(object, "spec"));
	return a.failed ? -1 : 0;
}

/*
 * Copy on write, decided up front: the containers apply_plan() may change
 * are copied (shallowly: their members are shared until replaced), and
 * everything else is shared with the original.  apply_plan() only ever
 * replaces members, appends to arrays, or deletes members, at the paths
 * below; it never edits a shared value in place (the review fuzz harness
 * checks that the request's object comes out untouched).  The diff then
 * stops at every shared value: its cost is the size of what may change,
 * not of the object.
 */
struct cow {
	bool oom;
};

/* Replaces holder[key] (an object or array) by its shallow copy. */
static json_t *own(struct cow *w, json_t *holder, const char *key)
{
	json_t *v = jget(holder, key), *c;

	if (!v || !(json_is_object(v) || json_is_array(v)))
		return NULL;
	c = json_copy(v);
	if (!c || json_object_set_new_nocheck(holder, key, c) < 0) {
		w->oom = true;
		return NULL;
	}
	return c;
}

static void own_meta(struct cow *w, json_t *holder)
{
	json_t *meta = own(w, holder, "metadata");

	own(w, meta, "labels");
	own(w, meta, "annotations");
}

static void own_pod_spec(struct cow *w, json_t *spec)
{
	json_t *aff, *pa, *cs, *ct;
	size_t i;

	if (!spec)
		return;
	own(w, spec, "nodeSelector");
	own(w, spec, "tolerations");
	own(w, spec, "volumes");
	own(w, spec, "schedulingGates");
	own(w, spec, "schedulingGroup");
	own(w, spec, "resourceClaims");
	aff = own(w, spec, "affinity");
	pa = own(w, aff, "podAffinity");
	own(w, pa, "requiredDuringSchedulingIgnoredDuringExecution");
	own(w, pa, "preferredDuringSchedulingIgnoredDuringExecution");
	cs = own(w, spec, "containers");
	json_array_foreach(cs, i, ct) {
		json_t *c = json_copy(ct), *res;

		if (!c || json_array_set_new(cs, i, c) < 0) {
			w->oom = true;
			return;
		}
		res = own(w, c, "resources");
		own(w, res, "limits");
		own(w, res, "requests");
		own(w, res, "claims");
		own(w, c, "env");
		own(w, c, "volumeMounts");
		own(w, c, "lifecycle");
	}
}

json_t *apply_copy(const json_t *object, const struct workload *wl)
{
	const struct kind_def *k = wl->def;
	struct cow w = {.oom = false};
	json_t *root = json_copy((json_t *)object), *tmpl = root;

	if (!root || !json_is_object(root))
		return root;
	own_meta(&w, root);
	if (!k || !k->pod_template || !k->pod_template[0]) {
		/* A Pod (or a kind apply_plan() writes no pod into). */
		own_pod_spec(&w, own(&w, root, "spec"));
	} else {
		/* A Job, a Deployment, a CronJob, ...: the pod template where
		 * its row says, and its own spec. */
		for (const char *const *m = k->pod_template; *m && tmpl; m++)
			tmpl = own(&w, tmpl, *m);
		own(&w, own(&w, jget(root, "spec"), "podFailurePolicy"), "rules");
		own_meta(&w, tmpl);
		own_pod_spec(&w, own(&w, tmpl, "spec"));
	}
	if (w.oom) {
		json_decref(root);
		return NULL;
	}
	return root;
}
