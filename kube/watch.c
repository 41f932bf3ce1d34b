#include "kube/watch.h"

#include "base/arena.h"
#include "base/diag.h"
#include "base/log.h"
#include "kube/client.h"
#include "kube/config.h"
#include "policy/k8s.h"
#include "policy/policy.h"
#include "policy/workload.h"
#include "usage/usage.h"
#include "webhook/facts.h"
#include "webhook/holder.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Used in printf formats: %% is one percent sign. */
#define SELECTOR "labelSelector=gpugate.io%%2Ftenant"
#define LIST_PAGE 500
#define LIST_MAX_BODY (256u << 20)
#define BACKOFF_MIN_MS 500
#define BACKOFF_MAX_MS 30000

/* ---- object -> ledger item --------------------------------------------- */

static bool selector_matches(const struct policy_flavor *f,
			     const struct wl_pod *pod)
{
	for (size_t i = 0; i < f->n_node_selector; i++) {
		const char *v = wl_get(pod->node_selector, pod->n_node_selector,
				       f->node_selector[i].key);

		if (!v || strcmp(v, f->node_selector[i].value) != 0)
			return false;
	}
	return true;
}

static int64_t container_units(const struct wl_container *ct, const char *res)
{
	int64_t v;

	for (size_t i = 0; i < ct->n_limits; i++)
		if (strcmp(ct->limits[i].name, res) == 0 && ct->limits[i].quantity &&
		    k8s_quantity_whole(ct->limits[i].quantity, &v) == 0)
			return v;
	for (size_t i = 0; i < ct->n_requests; i++)
		if (strcmp(ct->requests[i].name, res) == 0 && ct->requests[i].quantity &&
		    k8s_quantity_whole(ct->requests[i].quantity, &v) == 0)
			return v;
	return 0;
}

/* The flavor a pod uses and its units, from its spec alone. */
static const struct policy_flavor *pod_flavor(const struct policy *p,
					      const struct wl_pod *pod,
					      int64_t *units)
{
	const struct policy_flavor *cands[16], *f = NULL;
	const char *res = NULL;
	size_t n;

	for (size_t c = 0; c < pod->n_containers && !res; c++) {
		const struct wl_container *ct = &pod->containers[c];

		for (size_t i = 0; i < ct->n_limits && !res; i++)
			if (policy_is_flavor_resource(p, ct->limits[i].name))
				res = ct->limits[i].name;
		for (size_t i = 0; i < ct->n_requests && !res; i++)
			if (policy_is_flavor_resource(p, ct->requests[i].name))
				res = ct->requests[i].name;
	}
	if (!res)
		return NULL;
	n = policy_flavors_for_resource(p, res, cands, 16);
	if (n > 16)
		n = 16;
	for (size_t i = 0; i < n && !f; i++)
		if (selector_matches(cands[i], pod))
			f = cands[i];
	if (!f)
		f = cands[0];
	*units = 0;
	for (size_t c = 0; c < pod->n_containers; c++)
		*units += container_units(&pod->containers[c], res);
	return f;
}

int watch_item(const struct policy *p, const json_t *obj, bool is_job,
	       struct arena *a, struct usage_item *out)
{
	const json_t *meta = json_object_get(obj, "metadata");
	const char *uid = json_string_value(json_object_get(meta, "uid"));
	struct workload wl = {.kind = is_job ? WL_JOB : WL_POD, .op = WL_CREATE};
	const struct policy_tenant *t;
	const struct policy_flavor *f;
	int64_t units = 0;
	struct diag d;

	memset(out, 0, sizeof(*out));
	if (!json_is_object(obj) || !uid)
		return -1;
	out->uid = uid;
	out->is_job = is_job;
	out->namespace = json_string_value(json_object_get(meta, "namespace"));
	out->name = json_string_value(json_object_get(meta, "name"));
	diag_init(&d);
	if (!out->namespace || facts_extract(obj, &wl, a, &d) < 0)
		return 0; /* holds nothing gpugate can read */
	t = policy_tenant_for_namespace(p, out->namespace);
	f = t ? pod_flavor(p, &wl.pod, &units) : NULL;
	if (!t || !f)
		return 0;
	out->tenant = t->name;
	out->flavor = f->name;
	out->owner_job_uid = wl.owner_job_uid;
	if (is_job) {
		out->units = units * wl.parallelism;
		/* A suspended Job keeps its gang: resuming it is an UPDATE
		 * nobody judges, so it must still hold what it was admitted
		 * with (SPEC: until it completes, fails or is deleted). */
		out->active = !wl.job_finished;
	} else {
		out->units = units;
		out->active = !wl.phase || (strcmp(wl.phase, "Succeeded") != 0 &&
					    strcmp(wl.phase, "Failed") != 0);
	}
	out->active = out->active && out->units > 0;
	return 0;
}

/* ---- the loops ---------------------------------------------------------- */

struct kind {
	struct watch *w;
	bool jobs;
	const char *path;            /* /api/v1/pods or /apis/batch/v1/jobs */
	pthread_t thread;
	bool started;
	struct kube *kube;
	char rv[128];                /* resourceVersion to resume from */
	bool gone;                   /* the watch said 410 */
	unsigned backoff;            /* ms before the next retry */
	atomic_bool synced;
	atomic_bool connected;       /* the watch answered 200 and is open */
	unsigned events;
};

struct watch {
	struct watch_config cfg;
	struct kube_config kube;
	struct kind kinds[2];
	volatile bool stop;
	pthread_mutex_t mu;
	pthread_cond_t cv;
};

static const char *kind_name(const struct kind *k)
{
	return k->jobs ? "jobs" : "pods";
}

/* Sleeps ms, or less when the watch is stopped. */
static void nap(struct watch *w, unsigned ms)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += ms / 1000;
	until.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&w->mu);
	while (!w->stop &&
	       pthread_cond_timedwait(&w->cv, &w->mu, &until) == 0)
		;
	pthread_mutex_unlock(&w->mu);
}

/* A success (a whole list, an open watch): the next failure is retried
 * soon again. */
static void backoff_reset(struct kind *k)
{
	k->backoff = BACKOFF_MIN_MS;
}

/* Waits before the next attempt after a failure, then doubles the wait. */
static void backoff_nap(struct kind *k)
{
	nap(k->w, k->backoff);
	k->backoff = k->backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : k->backoff * 2;
}

/* The ledger lets reservations expire only while both watches are open:
 * the flag and the ledger change together, under the lock, so that the
 * two threads never leave the ledger with a stale state. */
static void set_connected(struct kind *k, bool up)
{
	struct watch *w = k->w;

	pthread_mutex_lock(&w->mu);
	atomic_store(&k->connected, up);
	usage_set_watching(w->cfg.ledger, atomic_load(&w->kinds[0].connected) &&
						   atomic_load(&w->kinds[1].connected));
	pthread_mutex_unlock(&w->mu);
}

static void on_open(void *ctx)
{
	struct kind *k = ctx;

	set_connected(k, true);
	backoff_reset(k);
}

static void apply_object(struct kind *k, const json_t *obj, bool deleted)
{
	struct holder_ref *ref;
	const struct policy *p = holder_acquire(k->w->cfg.policy, &ref);
	struct usage_item it;
	struct arena a;

	arena_init(&a);
	if (p && watch_item(p, obj, k->jobs, &a, &it) == 0) {
		if (deleted || !it.active)
			usage_forget(k->w->cfg.ledger, it.uid);
		else
			usage_observe(k->w->cfg.ledger, &it);
	}
	arena_release(&a);
	holder_release(ref);
}

/* Lists every page; the ledger's observations of this kind are replaced. */
static int list(struct kind *k)
{
	char path[2048], *body = NULL, *esc;
	char cont[1024] = "";
	bool begun = false;
	int rc = -1;

	do {
		json_t *root, *items, *item;
		const char *next, *rv;
		struct diag d;
		long status = 0;
		size_t len, i;

		esc = cont[0] ? curl_easy_escape(NULL, cont, 0) : NULL;
		snprintf(path, sizeof(path), "%s?" SELECTOR "&limit=%d%s%s", k->path,
			 LIST_PAGE, esc ? "&continue=" : "", esc ? esc : "");
		curl_free(esc);
		diag_init(&d);
		if (kube_get(k->kube, path, LIST_MAX_BODY, &status, &body, &len,
			     &k->w->stop, &d) < 0) {
			char q[600];
			char first[512];

			if (k->w->stop)
				goto out;
			diag_first(&d, first, sizeof(first));
			log_event(LOG_WARN, "msg=\"cannot list\" kind=%s error=\"%s\" "
					    "retry_ms=%u",
				  kind_name(k), log_quote(first, q, sizeof(q)),
				  k->backoff);
			goto out;
		}
		if (status != 200) {
			log_event(LOG_WARN, "msg=\"cannot list\" kind=%s status=%ld "
					    "retry_ms=%u",
				  kind_name(k), status, k->backoff);
			free(body);
			goto out;
		}
		root = json_loadb(body, len, 0, NULL);
		free(body);
		items = json_object_get(root, "items");
		if (!json_is_array(items)) {
			log_event(LOG_WARN, "msg=\"cannot list\" kind=%s error=\"not a "
					    "list\" retry_ms=%u",
				  kind_name(k), k->backoff);
			json_decref(root);
			goto out;
		}
		if (!begun) {
			usage_relist_begin(k->w->cfg.ledger, k->jobs);
			begun = true;
		}
		json_array_foreach(items, i, item)
			apply_object(k, item, false);
		rv = json_string_value(json_object_get(json_object_get(root, "metadata"),
						       "resourceVersion"));
		next = json_string_value(json_object_get(json_object_get(root, "metadata"),
							 "continue"));
		if (rv)
			snprintf(k->rv, sizeof(k->rv), "%s", rv);
		snprintf(cont, sizeof(cont), "%s", next ? next : "");
		json_decref(root);
	} while (cont[0] && !k->w->stop);
	if (!k->w->stop) {
		usage_relist_end(k->w->cfg.ledger, k->jobs);
		rc = 0;
	}
out:
	return rc;
}

static int on_event(void *ctx, const char *line, size_t len)
{
	struct kind *k = ctx;
	json_t *ev = json_loadb(line, len, 0, NULL);
	const char *type = json_string_value(json_object_get(ev, "type"));
	const json_t *obj = json_object_get(ev, "object");
	const char *rv = json_string_value(json_object_get(
		json_object_get(obj, "metadata"), "resourceVersion"));
	int rc = 0;

	if (!type) {
		json_decref(ev);
		return 0;
	}
	if (strcmp(type, "ERROR") == 0) {
		json_int_t code = json_integer_value(json_object_get(obj, "code"));

		if (code == 410)
			k->gone = true;
		log_event(code == 410 ? LOG_INFO : LOG_WARN,
			  "msg=\"watch error\" kind=%s code=%lld", kind_name(k),
			  (long long)code);
		rc = 1; /* end this stream */
	} else {
		if (strcmp(type, "ADDED") == 0 || strcmp(type, "MODIFIED") == 0)
			apply_object(k, obj, false);
		else if (strcmp(type, "DELETED") == 0)
			apply_object(k, obj, true);
		/* BOOKMARK: only its resourceVersion matters. */
		if (rv)
			snprintf(k->rv, sizeof(k->rv), "%s", rv);
		k->events++;
	}
	json_decref(ev);
	return rc;
}

static void *loop(void *arg)
{
	struct kind *k = arg;
	struct watch *w = k->w;
	const struct kube_stream cb = {.on_open = on_open, .on_line = on_event,
				       .ctx = k};
	bool need_list = true;

	backoff_reset(k);
	while (!w->stop) {
		char path[512];
		struct diag d;
		int rc;

		if (need_list) {
			if (list(k) < 0) {
				backoff_nap(k);
				continue;
			}
			need_list = false;
			backoff_reset(k);
			if (!atomic_exchange(&k->synced, true))
				log_event(LOG_INFO, "msg=\"usage synced\" kind=%s "
						    "entries=%zu",
					  kind_name(k), usage_entries(w->cfg.ledger));
			else
				log_event(LOG_INFO, "msg=\"relisted\" kind=%s "
						    "resource_version=%s",
					  kind_name(k), k->rv);
		}
		snprintf(path, sizeof(path),
			 "%s?" SELECTOR "&watch=1&allowWatchBookmarks=true"
			 "&timeoutSeconds=300&resourceVersion=%s",
			 k->path, k->rv);
		k->gone = false;
		diag_init(&d);
		rc = kube_watch(k->kube, path, w->cfg.idle_seconds, &cb, &w->stop, &d);
		set_connected(k, false);
		if (w->stop)
			break;
		if (k->gone || rc == 410) {
			need_list = true;
			continue;
		}
		if (rc != 0) {
			char first[512], q[600];

			diag_first(&d, first, sizeof(first));
			log_event(LOG_WARN, "msg=\"watch broke\" kind=%s status=%d "
					    "error=\"%s\" retry_ms=%u",
				  kind_name(k), rc, log_quote(first, q, sizeof(q)),
				  k->backoff);
			backoff_nap(k);
			continue;
		}
		/* A clean end (timeoutSeconds): resume at once. */
	}
	return NULL;
}

int watch_start(const struct watch_config *cfg, struct watch **out,
		struct diag *d)
{
	struct watch *w = calloc(1, sizeof(*w));

	if (!w) {
		diag_addf(d, "out of memory");
		return -1;
	}
	w->cfg = *cfg;
	if (!w->cfg.idle_seconds)
		w->cfg.idle_seconds = 180;
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	/* Nothing is watched yet: reservations wait. */
	usage_set_watching(cfg->ledger, false);
	for (int i = 0; i < 2; i++) {
		struct kind *k = &w->kinds[i];

		k->w = w;
		k->jobs = i == 1;
		k->path = k->jobs ? "/apis/batch/v1/jobs" : "/api/v1/pods";
		atomic_init(&k->synced, false);
		atomic_init(&k->connected, false);
		k->kube = kube_new(cfg->kube, d);
		if (!k->kube)
			goto fail;
	}
	for (int i = 0; i < 2; i++) {
		if (pthread_create(&w->kinds[i].thread, NULL, loop, &w->kinds[i]) != 0) {
			diag_addf(d, "cannot start the watch thread");
			goto fail;
		}
		w->kinds[i].started = true;
	}
	*out = w;
	return 0;
fail:
	watch_stop(w);
	return -1;
}

bool watch_synced(struct watch *w)
{
	return atomic_load(&w->kinds[0].synced) && atomic_load(&w->kinds[1].synced);
}

bool watch_connected(struct watch *w)
{
	return atomic_load(&w->kinds[0].connected) &&
	       atomic_load(&w->kinds[1].connected);
}

void watch_stop(struct watch *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->mu);
	w->stop = true;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	for (int i = 0; i < 2; i++) {
		if (w->kinds[i].started)
			pthread_join(w->kinds[i].thread, NULL);
		kube_free(w->kinds[i].kube);
	}
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
	free(w);
}
