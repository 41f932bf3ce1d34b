#include "controllers/quota-sync.h"

#include "base/arena.h"
#include "base/diag.h"
#include "base/log.h"
#include "kube/client.h"
#include "policy/policy.h"
#include "usage/inventory.h"
#include "report/classes.h"
#include "controllers/events.h"
#include "webhook/holder.h"
#include "report/pool-report.h"
#include "report/quotas.h"
#include "controllers/worker.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* One request; the objects are advice for users, never urgent. */
#define SYNC_TIMEOUT_MS 10000u
/* The waiting pods counted, at most: a bound on one round's memory. */
#define MAX_WAITING 4096u

struct quota_sync {
	struct quota_sync_config cfg;
	struct worker w;
	/* The thread's own. */
	json_t *known;        /* "NS/NAME" -> object as listed or written; NULL: list */
	json_t *namespaces;   /* the cluster's, as last listed; NULL: not listable */
	json_t *absent;       /* "NS/NAME" whose create said 404, until the next list */
	bool ns_forbidden;    /* said once: namespaces may not be listed */
	int64_t listed_at;    /* monotonic s of the last list */
	int64_t next_at;      /* monotonic ms: the next round from then */
	bool crd_missing;     /* the last list said 404 */
	unsigned failures;    /* rounds failed in a row */
};

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* An error, logged when it differs from the one logged last. */
static void failed(struct quota_sync *s, const char *text)
{
	worker_failed(&s->w, "gpuquotas not synced", text);
}

/* The names of the cluster's namespaces into s->namespaces; NULL when
 * they may not be listed (said once: the tenants' exact names are used). */
static void list_namespaces(struct quota_sync *s)
{
	json_t *list = NULL, *o;
	struct diag d;
	size_t i;
	int rc;

	diag_init(&d);
	json_decref(s->namespaces);
	s->namespaces = NULL;
	rc = kube_get_json(s->w.kube, "/api/v1/namespaces", SYNC_TIMEOUT_MS, &list, &d);
	if (rc == 403 && !s->ns_forbidden)
		log_event(LOG_WARN, "msg=\"gpuquotas: namespaces may not be listed; only "
				    "namespaces a tenant names exactly (no glob) get a "
				    "GPUQuota\" fix=\"grant list on namespaces "
				    "(manifests/rbac.yaml)\"");
	s->ns_forbidden = rc == 403;
	if (rc == 0 && (s->namespaces = json_array()))
		json_array_foreach(json_object_get(list, "items"), i, o)
			json_array_append(s->namespaces,
					  json_object_get(json_object_get(o, "metadata"), "name"));
	json_decref(list);
}

/* s->known from a list of the owned objects: 0, or -1 (logged). */
static int list_owned(struct quota_sync *s)
{
	json_t *list = NULL, *o;
	struct diag d;
	size_t i;
	int rc;

	diag_init(&d);
	rc = kube_get_json(s->w.kube, QUOTAS_ALL "?labelSelector=app.kubernetes.io"
			   "%2Fmanaged-by%3D" CLASSES_OWNER, SYNC_TIMEOUT_MS, &list, &d);
	if (rc == 404) {
		if (!s->crd_missing)
			log_event(LOG_WARN, "msg=\"gpuquotas not synced: the GPUQuota "
					    "CustomResourceDefinition is not installed\" "
					    "crd=gpuquotas.gpugate.io");
		s->crd_missing = true;
		worker_recovered(&s->w);
		return -1;
	}
	if (rc != 0) {
		failed(s, diag_text(&d));
		return -1;
	}
	if (s->crd_missing)
		log_event(LOG_INFO, "msg=\"gpuquotas: the CustomResourceDefinition is "
				    "there now\"");
	s->crd_missing = false;
	s->listed_at = now_ms() / 1000;
	list_namespaces(s);
	json_decref(s->absent);
	s->absent = json_object();
	json_decref(s->known);
	s->known = json_object();
	json_array_foreach(json_object_get(list, "items"), i, o) {
		char key[320];

		quotas_key(o, key, sizeof(key));
		if (key[0] && s->known)
			json_object_set(s->known, key, o);
	}
	json_decref(list);
	if (!s->known) {
		failed(s, "out of memory");
		return -1;
	}
	return 0;
}

/* The objects wanted now, or NULL when out of memory. */
static json_t *wanted_now(struct quota_sync *s, const struct policy *p)
{
	json_t *tenants = pool_report_tenants(p, s->cfg.inventory, s->cfg.usage), *waiting = json_object();
	json_t *out = NULL;
	char when[40];

	if (tenants && waiting && s->cfg.inventory) {
		struct inventory_waiting *w = calloc(MAX_WAITING, sizeof(*w));
		struct arena a;
		size_t n;

		arena_init(&a);
		n = w ? inventory_waiting_list(s->cfg.inventory, INT64_MAX, w,
					       MAX_WAITING, &a)
		      : 0;
		for (size_t i = 0; i < n; i++)
			if (w[i].tenant[0] &&
			    quotas_waiting_add(waiting, w[i].tenant, w[i].flavor,
					       w[i].per_pod) < 0)
				break;
		arena_release(&a);
		free(w);
	}
	events_time((int64_t)time(NULL), when, sizeof(when));
	if (tenants && waiting)
		out = quotas_wanted_new(p, tenants, s->namespaces, waiting, when);
	json_decref(tenants);
	json_decref(waiting);
	return out;
}

static void path_of(const json_t *obj, const char *tail, char *out, size_t size)
{
	const json_t *meta = json_object_get(obj, "metadata");
	char coll[300];

	snprintf(coll, sizeof(coll), QUOTAS_COLLECTION_FMT,
		 json_string_value(json_object_get(meta, "namespace")));
	snprintf(out, size, "%s/%s%s", coll,
		 json_string_value(json_object_get(meta, "name")), tail);
}

/* The status of obj written to the object of the same name that `have`
 * is (its resourceVersion): the result in *out. */
static int put_status(struct quota_sync *s, const json_t *obj, const json_t *have,
		      json_t **out, struct diag *d)
{
	json_t *body = json_deep_copy(obj);
	json_t *meta = json_object_get(body, "metadata");
	const json_t *hm = json_object_get(have, "metadata");
	char path[600];
	int rc;

	if (!body) {
		diag_addf(d, "out of memory");
		return -1;
	}
	json_object_set(meta, "resourceVersion", json_object_get(hm, "resourceVersion"));
	json_object_set(meta, "uid", json_object_get(hm, "uid"));
	path_of(obj, "/status", path, sizeof(path));
	rc = kube_replace(s->w.kube, path, body, SYNC_TIMEOUT_MS, out, d);
	json_decref(body);
	return rc;
}

/* One write of the plan: 1 written, 0 nothing to write after all, -1
 * failed (the first failure is in d).  What is known is kept up to date. */
static int write_one(struct quota_sync *s, int step, json_t *obj, struct diag *d)
{
	char key[320], path[600];
	json_t *res = NULL, *made = NULL;
	int rc;

	quotas_key(obj, key, sizeof(key));
	if (step == 0) { /* create, then its status */
		const json_t *meta = json_object_get(obj, "metadata");
		json_t *bare = json_pack("{s:s, s:s, s:O}", "apiVersion",
					 QUOTAS_API_VERSION, "kind", QUOTAS_KIND,
					 "metadata", meta);
		char coll[300];

		snprintf(coll, sizeof(coll), QUOTAS_COLLECTION_FMT,
			 json_string_value(json_object_get(meta, "namespace")));
		rc = bare ? kube_create(s->w.kube, coll, bare, SYNC_TIMEOUT_MS, &made, d) : -1;
		json_decref(bare);
		if (rc == 404) {
			/* No such namespace (yet): not again before the next list. */
			json_object_set_new(s->absent, key, json_true());
			return 0;
		}
		if (rc == 0)
			rc = put_status(s, obj, made, &res, d);
		json_decref(made);
	} else if (step == 1) {
		rc = put_status(s, obj, obj, &res, d);
	} else {
		const json_t *meta = json_object_get(obj, "metadata");

		path_of(obj, "", path, sizeof(path));
		rc = kube_delete(s->w.kube, path,
				 json_string_value(json_object_get(meta, "uid")),
				 json_string_value(json_object_get(meta, "resourceVersion")),
				 SYNC_TIMEOUT_MS, NULL, d);
		if (rc == 0 || rc == 404)
			json_object_del(s->known, key);
		return rc == 0 ? 1 : rc == 404 ? 0 : -1;
	}
	if (rc == 0 && res)
		json_object_set_new(s->known, key, res);
	else
		json_decref(res);
	return rc == 0 ? 1 : -1;
}

static int sync_once(struct quota_sync *s, const struct policy *p)
{
	json_t *wanted, *known = json_array(), *o;
	struct quotas_plan pl;
	const char *key;
	size_t i, done[3] = {0};
	struct diag d;
	int rc = 0;

	wanted = wanted_now(s, p);
	json_object_foreach(s->absent, key, o)
		json_object_del(wanted, key);
	json_object_foreach(s->known, key, o)
		if (known)
			json_array_append(known, o);
	if (!wanted || !known || quotas_plan_make(wanted, known, &pl) < 0) {
		json_decref(wanted);
		json_decref(known);
		failed(s, "out of memory");
		return -1;
	}
	json_decref(wanted);
	json_decref(known);
	diag_init(&d);
	{
		json_t *steps[3] = {pl.create, pl.update, pl.remove};

		for (int k = 0; k < 3; k++)
			json_array_foreach(steps[k], i, o) {
				if (worker_stopping(&s->w))
					break;
				int w = write_one(s, k, o, &d);

				if (w < 0)
					rc = -1; /* the others still go */
				else
					done[k] += (size_t)w;
			}
	}
	if (done[0] + done[1] + done[2])
		log_event(LOG_INFO, "msg=\"gpuquotas synced\" created=%zu updated=%zu "
				    "deleted=%zu unchanged=%zu",
			  done[0], done[1], done[2], pl.unchanged);
	if (rc < 0)
		failed(s, diag_text(&d));
	else
		worker_recovered(&s->w);
	quotas_plan_release(&pl);
	return rc;
}

static void forget(struct quota_sync *s)
{
	json_decref(s->known);
	s->known = NULL;
}

/* Not leading: list again when writing again. */
static void idle(void *arg)
{
	forget(arg);
}

static unsigned turn(void *arg)
{
	struct quota_sync *s = arg;
	int64_t now = now_ms();
	struct holder_ref *ref;
	const struct policy *p;
	int rc = -1;

	if (now < s->next_at || (s->cfg.synced && !s->cfg.synced(s->cfg.ctx)))
		return 200;
	if (s->known && now / 1000 - s->listed_at >= (int64_t)s->cfg.resync_s)
		forget(s);
	if (s->known || list_owned(s) == 0) {
		p = holder_acquire(s->cfg.policy, &ref);
		rc = p ? sync_once(s, p) : -1;
		holder_release(ref);
	}
	if (rc == 0) {
		s->failures = 0;
		s->next_at = now + s->cfg.interval_ms;
	} else {
		/* 2, 4, 8, 16 s, then every 30 s; list again first. */
		unsigned wait = worker_retry_s(s->failures, 30);

		s->failures++;
		forget(s);
		s->next_at = now + (int64_t)wait * 1000;
	}
	return 0; /* the next turn waits for next_at */
}

int quota_sync_start(const struct quota_sync_config *cfg, struct quota_sync **out,
		     struct diag *d)
{
	struct quota_sync *s = calloc(1, sizeof(*s));

	if (!s) {
		diag_addf(d, "out of memory");
		return -1;
	}
	s->cfg = *cfg;
	if (!s->cfg.interval_ms)
		s->cfg.interval_ms = 2000;
	if (!s->cfg.resync_s)
		s->cfg.resync_s = 60;
	if (worker_start(&s->w,
			 &(struct worker_config){.name = "quota-sync", .kube = cfg->kube,
						 .turn = turn, .idle = idle, .arg = s,
						 .idle_ms = 1000, .leading = cfg->leading,
						 .leading_ctx = cfg->ctx},
			 d) < 0) {
		free(s);
		return -1;
	}
	*out = s;
	return 0;
}

void quota_sync_stop(struct quota_sync *s)
{
	if (!s)
		return;
	worker_stop(&s->w);
	json_decref(s->known);
	json_decref(s->namespaces);
	json_decref(s->absent);
	free(s);
}
