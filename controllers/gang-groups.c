/* gang-groups: route podgroup's Workload and PodGroup (controllers/gang-groups.h). */
#include "controllers/gang-groups.h"

#include "base/diag.h"
#include "base/log.h"
#include "base/strmap.h"
#include "controllers/events.h"
#include "controllers/worker.h"
#include "kube/client.h"
#include "policy/decide.h"
#include "policy/gang.h"
#include "policy/policy.h"
#include "webhook/holder.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* One request: a start waits for it, but no admission does. */
#define GROUPS_TIMEOUT_MS 10000u
/* The Jobs read per page of the list. */
#define GROUPS_PAGE 100u

struct gang_groups {
	struct gang_groups_config cfg;
	struct worker w;
	/* The thread's own: the uids of the Jobs told of a conflict (owned
	 * keys), so that each is told once. */
	struct strmap told;
};

/* ---- pure --------------------------------------------------------------- */

static const json_t *at(const json_t *o, const char *const *path)
{
	for (; o && *path; path++)
		o = json_object_get(o, *path);
	return o;
}

static const char *str_at(const json_t *o, const char *const *path)
{
	return json_string_value(at(o, path));
}

static bool finished(const json_t *job)
{
	static const char *const conds[] = {"status", "conditions", NULL};
	const json_t *c;
	size_t i;

	json_array_foreach(at(job, conds), i, c) {
		const char *type = json_string_value(json_object_get(c, "type"));
		const char *status = json_string_value(json_object_get(c, "status"));

		if (type && status && strcmp(status, "True") == 0 &&
		    (strcmp(type, "Complete") == 0 || strcmp(type, "Failed") == 0))
			return true;
	}
	return false;
}

/* A whole number at path, or dflt when absent. */
static int64_t int_at(const json_t *o, const char *const *path, int64_t dflt)
{
	const json_t *v = at(o, path);

	return json_is_integer(v) ? json_integer_value(v) : dflt;
}

bool gang_groups_want(const json_t *job, const struct policy *p, unsigned served,
		      struct gang_groups_want *out)
{
	static const char *const route[] = {"metadata", "annotations", STAMP_GANG_ROUTE,
					    NULL};
	static const char *const ns[] = {"metadata", "namespace", NULL};
	static const char *const name[] = {"metadata", "name", NULL};
	static const char *const uid[] = {"metadata", "uid", NULL};
	static const char *const deleting[] = {"metadata", "deletionTimestamp", NULL};
	static const char *const tlabels[] = {"spec", "template", "metadata", "labels",
					      NULL};
	static const char *const parallelism[] = {"spec", "parallelism", NULL};
	static const char *const completions[] = {"spec", "completions", NULL};
	static const char *const prio[] = {"spec", "template", "spec",
					   "priorityClassName", NULL};
	const char *r = str_at(job, route);
	const json_t *labels = at(job, tlabels);
	int64_t par, comp;

	memset(out, 0, sizeof(*out));
	if (!r || strcmp(r, gang_route_name(GANG_PODGROUP)) != 0 || finished(job) ||
	    at(job, deleting))
		return false;
	out->namespace = str_at(job, ns);
	out->job = str_at(job, name);
	out->uid = str_at(job, uid);
	out->gang = json_string_value(json_object_get(labels, STAMP_GANG));
	if (!out->namespace || !out->job || !out->uid || !out->gang || !out->gang[0])
		return false;
	par = int_at(job, parallelism, 1);
	comp = int_at(job, completions, par); /* none: a work queue, parallelism */
	out->min_count = par < comp ? par : comp;
	if (out->min_count <= 1)
		return false;
	out->priority_class = str_at(job, prio);
	if (p && (served & GANG_SERVES_TOPOLOGY)) {
		const char *label = policy_settings(p)->class_label;
		const char *cname =
			label ? json_string_value(json_object_get(labels, label)) : NULL;
		const struct policy_class *c = cname ? policy_class_find(p, cname) : NULL;

		if (c && c->topology_mode == POLICY_TOPOLOGY_REQUIRED && c->topology_key)
			out->topology_key = c->topology_key;
	}
	return true;
}

/* The uid of obj's controller ownerReference, or NULL. */
static const char *controller_uid(const json_t *obj)
{
	static const char *const refs[] = {"metadata", "ownerReferences", NULL};
	const json_t *r;
	size_t i;

	json_array_foreach(at(obj, refs), i, r)
		if (json_is_true(json_object_get(r, "controller")))
			return json_string_value(json_object_get(r, "uid"));
	return NULL;
}

bool gang_groups_ours(const json_t *obj, const char *uid)
{
	const char *c = controller_uid(obj);

	return c && uid && strcmp(c, uid) == 0;
}

long gang_groups_plan(const json_t *jobs, const json_t *podgroups,
		      const struct policy *p, unsigned served,
		      struct gang_groups_want *out, size_t max)
{
	struct strmap have;
	const json_t *o;
	size_t i, n = 0;

	strmap_init(&have);
	json_array_foreach(json_object_get(podgroups, "items"), i, o) {
		const char *uid = controller_uid(o);

		if (uid && strmap_put(&have, uid, 1, NULL) < 0) {
			strmap_release(&have);
			return -1;
		}
	}
	json_array_foreach(json_object_get(jobs, "items"), i, o) {
		if (n >= max)
			break;
		if (gang_groups_want(o, p, served, &out[n]) &&
		    !strmap_get(&have, out[n].uid, NULL))
			n++;
	}
	strmap_release(&have);
	return (long)n;
}

/* metadata of an object of w: name, namespace, our label, the Job as its
 * controller (not blocking its deletion: the Job's foreground deletion
 * must not wait for gpugate's objects). */
static json_t *meta(const struct gang_groups_want *w)
{
	return json_pack("{s:s, s:s, s:{s:s}, s:[{s:s, s:s, s:s, s:s, s:b, s:b}]}",
			 "name", w->gang, "namespace", w->namespace, "labels",
			 GANG_GROUPS_OWNER_LABEL, GANG_GROUPS_OWNER, "ownerReferences",
			 "apiVersion", "batch/v1", "kind", "Job", "name", w->job, "uid",
			 w->uid, "controller", 1, "blockOwnerDeletion", 0);
}

/* What a template and a PodGroup share: the policy, the constraint, the
 * priority class.  Into o. */
static int policy_into(json_t *o, const struct gang_groups_want *w)
{
	if (json_object_set_new(o, "schedulingPolicy",
				json_pack("{s:{s:I}}", "gang", "minCount",
					  (json_int_t)w->min_count)) < 0)
		return -1;
	if (w->topology_key &&
	    json_object_set_new(o, "schedulingConstraints",
				json_pack("{s:[{s:s}]}", "topology", "key",
					  w->topology_key)) < 0)
		return -1;
	if (w->priority_class &&
	    json_object_set_new(o, "priorityClassName",
				json_string(w->priority_class)) < 0)
		return -1;
	return 0;
}

json_t *gang_groups_workload(const struct gang_groups_want *w)
{
	json_t *tmpl = json_pack("{s:s}", "name", GANG_GROUPS_TEMPLATE);

	if (!tmpl || policy_into(tmpl, w) < 0) {
		json_decref(tmpl);
		return NULL;
	}
	return json_pack("{s:s, s:s, s:o, s:{s:{s:s, s:s, s:s}, s:[o]}}", "apiVersion",
			 "scheduling.k8s.io/v1beta1", "kind", "Workload", "metadata",
			 meta(w), "spec", "controllerRef", "apiGroup", "batch", "kind",
			 "Job", "name", w->job, "podGroupTemplates", tmpl);
}

json_t *gang_groups_podgroup(const struct gang_groups_want *w)
{
	json_t *spec = json_pack("{s:{s:s, s:s}}", "workloadRef", "workloadName",
				 w->gang, "templateName", GANG_GROUPS_TEMPLATE);

	if (!spec || policy_into(spec, w) < 0) {
		json_decref(spec);
		return NULL;
	}
	return json_pack("{s:s, s:s, s:o, s:o}", "apiVersion",
			 "scheduling.k8s.io/v1beta1", "kind", "PodGroup", "metadata",
			 meta(w), "spec", spec);
}

/* ---- the thread --------------------------------------------------------- */

static void tell_conflict(struct gang_groups *g, const struct gang_groups_want *w,
			  const char *kind)
{
	char msg[600];
	char *key;

	if (strmap_get(&g->told, w->uid, NULL))
		return;
	snprintf(msg, sizeof(msg),
		 "gpugate: the %s %s/%s is not this Job's (its controller is "
		 "another): gpugate does not make the gang's Workload and PodGroup, "
		 "and the pods, which name PodGroup %s, do not start until that %s "
		 "is removed",
		 kind, w->namespace, w->gang, w->gang, kind);
	if (events_write(g->w.kube, g->cfg.identity,
			 &(struct events_object){.api_version = "batch/v1", .kind = "Job",
						 .namespace = w->namespace,
						 .name = w->job, .uid = w->uid},
			 "GangConflict", "Warning", msg, (int64_t)time(NULL)) < 0)
		return; /* told next turn */
	key = strdup(w->uid);
	if (key && strmap_put(&g->told, key, 1, NULL) != 0)
		free(key);
	log_event(LOG_WARN, "msg=\"gang objects taken\" job=%s/%s %s=%s", w->namespace,
		  w->job, kind, w->gang);
}

/* One object of w: 0 created, 2 ours already, 1 someone else's, -1
 * failed (in d). */
static int ensure(struct gang_groups *g, const struct gang_groups_want *w,
		  const char *resource, json_t *obj, struct diag *d)
{
	char path[512];
	json_t *have = NULL;
	int rc;

	if (!obj) {
		diag_addf(d, "out of memory");
		return -1;
	}
	snprintf(path, sizeof(path), "/apis/scheduling.k8s.io/v1beta1/namespaces/%s/%s",
		 w->namespace, resource);
	rc = kube_create(g->w.kube, path, obj, GROUPS_TIMEOUT_MS, NULL, d);
	json_decref(obj);
	if (rc != 409)
		return rc == 0 ? 0 : -1;
	snprintf(path, sizeof(path), "/apis/scheduling.k8s.io/v1beta1/namespaces/%s/%s/%s",
		 w->namespace, resource, w->gang);
	diag_init(d); /* the 409 is not the error */
	rc = kube_get_json(g->w.kube, path, GROUPS_TIMEOUT_MS, &have, d);
	if (rc != 0)
		return -1; /* deleted meanwhile (404): next turn creates it */
	rc = gang_groups_ours(have, w->uid) ? 2 : 1;
	json_decref(have);
	return rc;
}

/* Both objects of one Job: 0, or -1 with the error in d. */
static int create_for(struct gang_groups *g, const struct gang_groups_want *w,
		      struct diag *d)
{
	static const char *const kinds[] = {"Workload", "PodGroup"};
	struct diag one;
	char first[400];
	bool created = false;

	for (int i = 0; i < 2; i++) {
		json_t *obj = i == 0 ? gang_groups_workload(w) : gang_groups_podgroup(w);
		int rc;

		diag_init(&one);
		rc = ensure(g, w, i == 0 ? "workloads" : "podgroups", obj, &one);
		if (rc == 1) {
			tell_conflict(g, w, kinds[i]);
			return 0;
		}
		if (rc < 0) {
			diag_first(&one, first, sizeof(first));
			diag_addf(d, "%s", first);
			return -1;
		}
		created |= rc == 0;
	}
	if (created)
		log_event(LOG_INFO, "msg=\"gang objects created\" job=%s/%s "
				    "podgroup=%s min_count=%lld topology=%s",
			  w->namespace, w->job, w->gang, (long long)w->min_count,
			  w->topology_key ? w->topology_key : "none");
	return 0;
}

static bool any_gang_class(const struct policy *p)
{
	for (size_t i = 0; i < policy_class_count(p); i++)
		if (policy_class_at(p, i)->gang)
			return true;
	return false;
}

/* A continue token into a query: anything but [A-Za-z0-9._~-] as %XX
 * (real tokens are base64url; the escape is for the odd one).  false when
 * it does not fit. */
static bool escape_into(char *out, size_t size, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = 0;

	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			     (c >= '0' && c <= '9') || c == '.' || c == '_' ||
			     c == '~' || c == '-';

		if (n + (plain ? 1 : 3) >= size)
			return false;
		if (plain) {
			out[n++] = (char)c;
		} else {
			out[n++] = '%';
			out[n++] = hex[c >> 4];
			out[n++] = hex[c & 15];
		}
	}
	out[n] = '\0';
	return true;
}

/*
 * One round: the stamped Jobs page by page (GROUPS_PAGE at a time, so that
 * no answer nears the client's cap however many Jobs gpugate mapped), and
 * gpugate's PodGroups once, only when a page has a Job that wants objects.
 */
static void round_once(struct gang_groups *g, const struct policy *p, unsigned served)
{
	struct gang_groups_want *want = calloc(GROUPS_PAGE, sizeof(*want));
	json_t *pgs = NULL;
	char cont[1024] = "", path[1400];
	struct diag d;
	int failed = 0;

	diag_init(&d);
	if (!want) {
		diag_addf(&d, "out of memory");
		goto fail;
	}
	do {
		json_t *jobs = NULL;
		const char *next;
		long n;

		snprintf(path, sizeof(path),
			 "/apis/batch/v1/jobs?labelSelector=gpugate.io%%2Fgang&limit=%u%s%s",
			 GROUPS_PAGE, cont[0] ? "&continue=" : "", cont);
		if (kube_get_json(g->w.kube, path, GROUPS_TIMEOUT_MS, &jobs, &d) != 0)
			goto fail;
		n = gang_groups_plan(jobs, NULL, p, served, want, GROUPS_PAGE);
		if (n > 0 && !pgs &&
		    kube_get_json(g->w.kube,
				  "/apis/scheduling.k8s.io/v1beta1/podgroups?labelSelector="
				  GANG_GROUPS_OWNER_LABEL "%3D" GANG_GROUPS_OWNER,
				  GROUPS_TIMEOUT_MS, &pgs, &d) != 0) {
			json_decref(jobs);
			goto fail;
		}
		if (n > 0)
			n = gang_groups_plan(jobs, pgs, p, served, want, GROUPS_PAGE);
		if (n < 0)
			diag_addf(&d, "out of memory");
		failed |= n < 0;
		for (long i = 0; i < n && !worker_stopping(&g->w); i++)
			if (create_for(g, &want[i], &d) < 0)
				failed = 1; /* the others still go */
		next = json_string_value(
			json_object_get(json_object_get(jobs, "metadata"), "continue"));
		if (next && next[0] && !escape_into(cont, sizeof(cont), next)) {
			diag_addf(&d, "GET /apis/batch/v1/jobs: continue token too long");
			failed = 1;
			next = NULL;
		}
		if (!next || !next[0])
			cont[0] = '\0';
		json_decref(jobs);
	} while (cont[0] && !worker_stopping(&g->w));
	if (failed)
		goto fail;
	worker_recovered(&g->w);
	goto out;
fail:
	worker_failed(&g->w, "gang objects not created", diag_text(&d));
out:
	free(want);
	json_decref(pgs);
}

static unsigned turn(void *arg)
{
	struct gang_groups *g = arg;
	unsigned served = atomic_load(g->cfg.served);
	struct holder_ref *ref;
	const struct policy *p;

	if (!(served & GANG_SERVES_PODGROUP))
		return g->cfg.interval_ms;
	p = holder_acquire(g->cfg.policy, &ref);
	if (p && any_gang_class(p))
		round_once(g, p, served);
	holder_release(ref);
	return g->cfg.interval_ms;
}

int gang_groups_start(const struct gang_groups_config *cfg, struct gang_groups **out,
		      struct diag *d)
{
	struct gang_groups *g = calloc(1, sizeof(*g));

	if (!g) {
		diag_addf(d, "out of memory");
		return -1;
	}
	g->cfg = *cfg;
	if (!g->cfg.interval_ms)
		g->cfg.interval_ms = 5000;
	strmap_init(&g->told);
	if (worker_start(&g->w,
			 &(struct worker_config){.name = "gang-groups", .kube = cfg->kube,
						 .turn = turn, .arg = g,
						 .first_ms = 1000,
						 .idle_ms = g->cfg.interval_ms,
						 .leading = cfg->leading,
						 .leading_ctx = cfg->leading_ctx},
			 d) < 0) {
		strmap_release(&g->told);
		free(g);
		return -1;
	}
	*out = g;
	return 0;
}

void gang_groups_stop(struct gang_groups *g)
{
	const char *key;
	size_t pos = 0, v;

	if (!g)
		return;
	worker_stop(&g->w);
	while (strmap_next(&g->told, &pos, &key, &v))
		free((char *)key);
	strmap_release(&g->told);
	free(g);
}
